//! Runs: everything that turns a test into a stored run — the live registry and recorder
//! (`live`), and one module per kind of run that is more than one iperf3 test: multi-port
//! (`multi`), forwarding and monitor-only (`forward`), the HTTP payload / raw TCP services
//! (`traffic`), iperf 2 served by the daemon (`iperf2`), and suites of steps (`suites`).
//! Not for: measuring (engine), SQL (store), or showing (results, web).

pub(crate) mod anon;
pub mod drops;
pub(crate) mod forward;
pub(crate) mod intake;
pub(crate) mod iperf2;
pub(crate) mod latency;
pub(crate) mod live;
pub(crate) mod multi;
pub(crate) mod recorder;
pub(crate) mod rfc2544;
pub(crate) mod schedule;
pub(crate) mod suites;
pub(crate) mod traffic;
