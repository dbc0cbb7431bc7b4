//! netperfd: a network performance test appliance for embedded Linux boards. The library holds
//! the iperf3-compatible engine, the SQLite store, the web UI and the CLI; `main.rs` is a thin
//! entry point.
#![warn(unreachable_pub)]
pub mod board;
pub(crate) mod cert;
pub mod cmd;
pub(crate) mod config;
pub(crate) mod conn_limit;
pub mod engine;
pub mod logging;
pub mod model;
pub mod peer;
pub(crate) mod results;
pub mod runs;
pub mod spec;
pub mod store;
pub mod web;

/// Scratch directories for unit tests: each call gets a new, unique directory (the
/// `tempfile` crate), so tests that run at the same moment never share a database.
#[cfg(test)]
pub(crate) mod scratch {
    /// A new empty directory named `netperfd-TAG-…` under the system's temp dir; kept after
    /// the test (the OS cleans its temp dir) so a failing test's database can be inspected.
    pub(crate) fn dir(tag: &str) -> std::path::PathBuf {
        match tempfile::Builder::new()
            .prefix(&format!("netperfd-{tag}-"))
            .tempdir()
        {
            Ok(d) => d.keep(),
            Err(e) => panic!("cannot create a scratch directory: {e}"),
        }
    }
}
