//! Words every layer shares: run kinds and statuses (`kind`), a run's role, protocol and
//! direction (`run`), units (`units`; how pages show
//! bitrates and sizes: `display`), checked names
//! (`names`), token hashing (`secrets`) and percentiles (`stats`). Depends on nothing above the engine's formatting.

pub(crate) mod display;
pub(crate) mod figures;
pub(crate) mod input;
pub mod kind;
pub(crate) mod names;
pub mod order;
pub(crate) mod run;
pub(crate) mod secrets;
pub(crate) mod stats;
pub mod time;
pub mod units;

pub use figures::RunFigures;
pub use kind::{RunKind, RunStatus};
pub use run::{RunDirection, RunProtocol, RunRole, StepStatus};
