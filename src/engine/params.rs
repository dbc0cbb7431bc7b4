//! The test's parameters and each side's results, as the engine uses them whatever the
//! protocol: what a client asks for ([`Params`]: protocol, direction, time or amount,
//! streams, sizes, rate) and what each side counted ([`Results`], [`StreamResult`]). Their
//! wire form (iperf3's PARAM_EXCHANGE and results JSON, `Params::to_json`/`from_json`,
//! `Results::to_json`/`from_json`) is in `engine::iperf3::wire` and `lenient`; the iperf 2
//! side maps its header onto the same [`Params`].

use serde_json::Value;

/// Default TCP block size (write/read length), bytes (iperf3's 128 KiB).
pub const DEFAULT_TCP_BLKSIZE: usize = 128 * 1024;

/// Default UDP rate per stream, bits/s: iperf3's and iperf 2's 1 Mbit/s, counted as they
/// count it (1024 × 1024 = 1,048,576).
pub(crate) const DEFAULT_UDP_BITRATE: u64 = 1024 * 1024;

/// Transport protocol of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Protocol {
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
    #[serde(rename = "SCTP")]
    Sctp,
}

impl Protocol {
    /// iperf3's name ("TCP", "UDP", "SCTP").
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

impl From<Protocol> for crate::model::run::RunProtocol {
    /// The stored word of a run measuring this protocol.
    fn from(p: Protocol) -> Self {
        use crate::model::run::RunProtocol;
        match p {
            Protocol::Tcp => RunProtocol::Tcp,
            Protocol::Udp => RunProtocol::Udp,
            Protocol::Sctp => RunProtocol::Sctp,
        }
    }
}

/// Which way data flows, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client sends (iperf3 default).
    Send,
    /// Server sends (`-R`).
    Receive,
    /// Both send on separate streams (`--bidir`).
    Bidir,
}

/// The test parameters exchanged at PARAM_EXCHANGE (client → server), §6.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    pub protocol: Protocol,
    /// Seconds excluded at the start (`-O`).
    pub omit: u32,
    /// Test duration in seconds (`-t`); 0 with `-n`/`-k`.
    pub time: u32,
    /// Bytes to transfer over all streams (`-n`), 0 = unset.
    pub num: u64,
    /// Blocks to transfer over all streams (`-k`), 0 = unset.
    pub blockcount: u64,
    /// TCP MSS in bytes (`-M`).
    pub mss: Option<u32>,
    /// TCP_NODELAY on data streams (`-N`).
    pub nodelay: bool,
    /// Streams per direction (`-P`), 1..=128.
    pub parallel: u32,
    pub direction: Direction,
    /// SO_SNDBUF/SO_RCVBUF in bytes (`-w`).
    pub window: Option<u32>,
    /// Block size in bytes (`-l`).
    pub len: u32,
    /// Target rate per stream in bits/s (`-b`), 0 = unlimited.
    pub bandwidth: u64,
    /// Blocks per burst (`-b rate/N`), 0 = none.
    pub burst: u32,
    /// IP TOS byte (`-S`).
    pub tos: u32,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    /// TCP congestion control algorithm (`-C`).
    pub congestion: Option<String>,
    /// Socket pacing per data stream (`--fq-rate`, key `fqrate`), bits/s; 0 = none.
    /// The sending side sets SO_MAX_PACING_RATE on each of its TCP streams.
    #[serde(default)]
    pub fq_rate: u64,
    pub get_server_output: bool,
    pub udp_counters_64bit: bool,
    pub repeating_payload: bool,
    pub zerocopy: bool,
    pub dont_fragment: bool,
    /// `--skip-rx-copy` (key `skip_rx_copy`, stock 3.17+): the receiving side discards TCP
    /// data without copying it (MSG_TRUNC).
    #[serde(default)]
    pub skip_rx_copy: bool,
    /// The client's version string, e.g. "3.12"; `None` if not sent.
    pub client_version: Option<String>,
    /// How this end's paced UDP senders are paced (`--udp-pacing`; netperfd's own, never on
    /// the wire: a server's senders use `auto`).
    #[serde(default)]
    pub udp_pacing: crate::engine::pacer::PacingMode,
}

impl Params {
    /// Make this a UDP test with iperf3's UDP defaults: [`DEFAULT_UDP_BITRATE`] per stream and
    /// the datagram size from the path MSS (`len` 0). The one place those defaults are set.
    pub fn set_udp_defaults(&mut self) {
        self.protocol = Protocol::Udp;
        self.bandwidth = DEFAULT_UDP_BITRATE;
        self.len = 0;
    }
}

impl Default for Params {
    fn default() -> Self {
        Params {
            protocol: Protocol::Tcp,
            omit: 0,
            time: 10,
            num: 0,
            blockcount: 0,
            mss: None,
            nodelay: false,
            parallel: 1,
            direction: Direction::Send,
            window: None,
            len: DEFAULT_TCP_BLKSIZE as u32,
            bandwidth: 0,
            burst: 0,
            tos: 0,
            title: None,
            extra_data: None,
            congestion: None,
            fq_rate: 0,
            get_server_output: false,
            udp_counters_64bit: false,
            repeating_payload: false,
            zerocopy: false,
            dont_fragment: false,
            skip_rx_copy: false,
            client_version: None,
            udp_pacing: Default::default(),
        }
    }
}

/// One stream's entry in a results document (§9.2).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StreamResult {
    pub id: u32,
    /// Bytes sent (sender) or received (receiver) after the omit period.
    pub bytes: u64,
    /// TCP retransmits, −1 when unknown / not a sender.
    pub retransmits: i64,
    /// Jitter in seconds (UDP receiver).
    pub jitter: f64,
    /// UDP lost datagrams.
    pub errors: i64,
    pub omitted_errors: i64,
    /// UDP datagrams sent, or highest sequence seen by a receiver.
    pub packets: i64,
    pub omitted_packets: i64,
    /// Seconds, always 0.
    pub start_time: f64,
    /// Seconds from stream start (after omit) to the final sample.
    pub end_time: f64,
}

/// A results document (either direction), §9.2.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Results {
    /// Process CPU, % of wall time (user + system).
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// −1 pure receiver, 1 TCP sender with retransmit counts, 0 otherwise.
    pub sender_has_retransmits: i64,
    pub congestion_used: Option<String>,
    pub server_output_text: Option<String>,
    pub server_output_json: Option<Value>,
    /// A netperfd peer's own drop counters that moved during the test (key
    /// `netperfd_drops`, a list of `{"place", "port"?, "packets", "counter"}` with `place`
    /// one of `qdisc`, `nic`, `softnet`, `socket`). Stock iperf3 neither sends nor reads it.
    pub netperfd_drops: Option<Value>,
    /// A netperfd peer's `end.pacing` for its own paced UDP senders (key `netperfd_pacing`,
    /// text such as "user-space token bucket"), so a `-R` client's `-J` says who paced the
    /// server's senders. Stock iperf3 neither sends nor reads it.
    pub netperfd_pacing: Option<String>,
    pub streams: Vec<StreamResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// iperf3's UDP defaults (its `UDP_RATE`, 1024 × 1024 bits/s, and a datagram sized from
    /// the MSS) set in one place; the rest of the test is left as it was.
    #[test]
    fn udp_defaults_are_iperf3_s() {
        let mut p = Params {
            time: 3,
            parallel: 4,
            ..Params::default()
        };
        p.set_udp_defaults();
        assert_eq!(
            (p.protocol, p.bandwidth, p.len, p.time, p.parallel),
            (Protocol::Udp, 1_048_576, 0, 3, 4)
        );
        assert_eq!(crate::engine::iperf2::wire::UDP_DEFAULT_RATE, 1_048_576);
        assert_eq!(crate::engine::iperf2::wire::TCP_DEFAULT_LEN, 131_072);
    }
}
