//! Command-line entry points, one file per subcommand; `main.rs` dispatches here. `iperf` is the
//! iperf3-compatible client/server (`-c` / `-s`), `daemon` the appliance's composition root.
//! Nothing imports `cmd` but `main.rs`.

pub mod daemon;
pub mod forward;
pub mod http_get;
pub mod iperf;
pub mod iperf2;
pub mod ladder;
pub mod latency;
pub mod multi;
pub mod net;
pub mod runs;
pub mod suite;
