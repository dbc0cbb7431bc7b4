//! iperf3 protocol: wire format (`wire`, bytes only), the control connection's I/O (`framing`)
//! and its order (`control`), client (`client`) and server (`server`), compatible
//! with stock iperf3 3.9–3.18 (see `docs/iperf3-wire.md`).
pub(crate) mod client;
pub(crate) mod control;
mod drain;
pub(crate) mod framing;
mod lenient;
pub(crate) mod server;
pub mod wire;
