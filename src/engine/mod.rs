//! The measurement engine: iperf3-compatible client and server, the TCP stream loops, interval
//! statistics and reports. Not for: storage, the web UI, or changing the board.
pub mod admission;
pub mod capture;
pub mod datagram;
pub mod echo;
pub mod http;
pub mod iperf2;
pub mod iperf3;
pub mod latency;
pub mod meter;
pub mod net;
pub mod netlink;
pub mod pacer;
pub mod params;
pub mod path;
pub mod ping;
pub mod report;
pub mod session;
pub mod shortfall;
pub mod stats;
pub mod sys;
pub mod task;
pub mod tcp;
pub mod threadcpu;
pub mod udp;
