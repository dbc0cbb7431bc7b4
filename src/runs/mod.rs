//! Runs: everything that turns a test into a stored run — the run context and its one start
//! path (`context`), the registry of live runs (`registry`), the 1 Hz monitor (`monitor`), the
//! recorder (`recorder`), and one module per kind of run with its launchers: iperf3 client and
//! served tests (`iperf3`), multi-port (`multi`), forwarding and monitor-only (`forward`), the
//! HTTP payload / raw TCP services and downloads (`traffic`), iperf 2 (`iperf2`), latency under
//! load (`latency`), RFC 2544 (`rfc2544`), and suites of steps (`suites`).
//! Not for: measuring (engine), SQL (store), or showing (results, web).

pub(crate) mod anon;
pub(crate) mod context;
pub mod drops;
pub(crate) mod forward;
pub(crate) mod intake;
pub(crate) mod iperf2;
pub(crate) mod iperf3;
pub(crate) mod latency;
pub(crate) mod monitor;
pub(crate) mod multi;
pub(crate) mod recorder;
pub(crate) mod registry;
pub(crate) mod rfc2544;
pub(crate) mod schedule;
pub(crate) mod suites;
pub(crate) mod traffic;
