//! The measurement engine: iperf3-compatible client and server, the TCP stream loops, interval
//! statistics and reports. Not for: storage, the web UI, or changing the board.
pub(crate) mod admission;
pub(crate) mod capture;
pub mod datagram;
pub(crate) mod echo;
pub mod http;
pub mod iperf2;
pub mod iperf3;
pub(crate) mod latency;
pub(crate) mod meter;
pub(crate) mod net;
pub(crate) mod netlink;
pub(crate) mod pacer;
pub(crate) mod params;
pub(crate) mod path;
pub mod ping;
pub mod report;
pub(crate) mod session;
pub(crate) mod shortfall;
pub(crate) mod stats;
pub(crate) mod sys;
pub(crate) mod task;
pub(crate) mod tcp;
pub(crate) mod threadcpu;
pub mod udp;
