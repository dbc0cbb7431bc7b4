//! Runs: everything that turns a test into a stored run — the run context and its one start
//! path (`context`), the registry of live runs (`registry`), the 1 Hz monitor (`monitor`), the
//! recorder (`recorder`), and one module per kind of run with its launchers: iperf3 client and
//! served tests (`iperf3`), multi-port (`multi`), forwarding and monitor-only (`forward`), the
//! HTTP payload / raw TCP services and downloads (`traffic`), iperf 2 (`iperf2`), latency under
//! load (`latency`), RFC 2544 (`rfc2544`), and suites of steps (`suites`).
//! Not for: measuring (engine), SQL (store), or showing (results, web).

pub mod anon;
pub mod context;
pub mod drops;
pub mod forward;
pub mod intake;
pub mod iperf2;
pub mod iperf3;
pub mod latency;
pub mod monitor;
pub mod multi;
pub mod recorder;
pub mod registry;
pub mod rfc2544;
pub mod schedule;
pub mod suites;
pub mod traffic;
