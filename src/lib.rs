//! netperfd: a network performance test appliance for embedded Linux boards. The library holds
//! the iperf3-compatible engine, the SQLite store, the web UI and the CLI; `main.rs` is a thin
//! entry point.
pub mod engine;
pub mod cli;
pub mod daemon;
pub mod logging;
pub mod runs_cli;
pub mod web;
