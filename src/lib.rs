//! netperfd: a network performance test appliance for embedded Linux boards. The library holds
//! the iperf3-compatible engine, the SQLite store, the web UI and the CLI; `main.rs` is a thin
//! entry point.
pub mod analysis;
pub mod cli;
pub mod compare;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod http_cli;
pub mod ladder_cli;
pub mod live;
pub mod logging;
pub mod monitor;
pub mod multi;
pub mod multi_cli;
pub mod net_cli;
pub mod runs_cli;
pub mod store;
pub mod suite_cli;
pub mod suites;
pub mod system;
pub mod traffic;
pub mod web;
