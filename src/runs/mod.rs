//! Runs: everything that turns a test into a stored run — the live registry and recorder
//! (`live`), and one module per kind of run that is more than one iperf3 test: multi-port
//! (`multi`), forwarding and monitor-only (`forward`), the HTTP payload / raw TCP services
//! (`traffic`), iperf 2 served by the daemon (`iperf2`), and suites of steps (`suites`).
//! Not for: measuring (engine), SQL (store), or showing (results, web).

pub mod anon;
pub mod drops;
pub mod forward;
pub mod intake;
pub mod iperf2;
pub mod latency;
pub mod live;
pub mod multi;
pub mod recorder;
pub mod rfc2544;
pub mod schedule;
pub mod suites;
pub mod traffic;
