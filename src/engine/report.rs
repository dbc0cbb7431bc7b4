//! What a test produces — interval records and the final report — and their two renderings:
//! iperf3's text table (Transfer, Bitrate, Retr, Cwnd; sender/receiver summary) and iperf3's
//! `-J` document. Units: bytes, seconds, bits/s; RTT in µs; cwnd in bytes.
//! Not for: measuring (see `session.rs`) or storing (see `store`).

use crate::engine::params::{Direction, Params};
use crate::engine::stats::CpuUtil;
use crate::model::units::unit_format;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// A finite f64 as JSON (never `null`: non-finite becomes 0).
pub fn num(f: f64) -> Value {
    if f.is_finite() {
        serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::from(0))
    } else {
        Value::from(0)
    }
}

/// TCP_INFO figures of one sending stream over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpSample {
    /// Retransmits during the interval.
    pub retransmits: u64,
    /// Congestion window at the end of the interval, bytes.
    pub snd_cwnd: u64,
    /// Send window at the end of the interval, bytes.
    pub snd_wnd: u64,
    /// Smoothed RTT, µs.
    pub rtt: u32,
    /// RTT variance, µs.
    pub rttvar: u32,
    /// Path MTU, bytes.
    pub pmtu: u32,
    /// Reordering events seen since the stream started (`tcpi_reord_seen`, cumulative, as
    /// iperf3 3.19+ prints `reorder` in an interval).
    #[serde(default)]
    pub reorder: u64,
}

/// UDP figures of one stream over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpSample {
    /// Sender: datagrams sent. Receiver: datagrams expected (highest sequence delta).
    pub packets: u64,
    /// Receiver: datagrams lost in the interval (never negative).
    pub lost: u64,
    /// Receiver: jitter at the end of the interval, ms (RFC 3550).
    pub jitter_ms: f64,
    /// Receiver: datagrams that arrived out of order in the interval.
    pub out_of_order: u64,
    /// Receiver, iperf 2 `--trip-times`: one-way latency of the datagrams that arrived in
    /// the interval (arrival wall clock − the sender's timestamp); `None` when not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyMs>,
}

/// One-way latency figures (iperf 2 `--trip-times`): datagrams measured and the mean,
/// minimum, maximum and sample standard deviation of their transit times, ms. They are only
/// meaningful when the sender's and the receiver's clocks are synchronised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyMs {
    /// Datagrams measured.
    pub count: u64,
    /// Mean transit, ms.
    pub avg: f64,
    /// Smallest transit, ms.
    pub min: f64,
    /// Largest transit, ms.
    pub max: f64,
    /// Sample standard deviation (n − 1), ms; 0 below two datagrams.
    pub stdev: f64,
}

impl UdpSample {
    /// Loss in percent of the expected datagrams (0..=100, 0 when none expected).
    pub fn lost_percent(&self) -> f64 {
        crate::engine::udp::loss_percent(self.lost, self.packets)
    }
}

/// UDP totals of one stream (after the omit period), both ends as far as known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpSummary {
    /// Datagrams the sender sent (its own count, after the omit period).
    pub sent_packets: Option<u64>,
    /// Datagrams the sender sent during the omit period (sender side only).
    #[serde(default)]
    pub omitted_packets: u64,
    /// Datagrams the receiver expected (highest sequence number seen).
    pub expected: Option<u64>,
    /// Datagrams the receiver counted as lost (expected − unique received).
    pub lost: Option<u64>,
    /// Receiver's jitter, ms (RFC 3550).
    pub jitter_ms: f64,
    /// Receiver-side counts (only where this side received).
    pub out_of_order: u64,
    pub duplicates: u64,
    pub stray: u64,
    /// Receiver's peak rate over any 1 ms window, bits/s (burstiness of the sender's pacing).
    pub peak_1ms_bps: f64,
    /// A paced sender's largest lag behind its schedule, ms (time it did not get the CPU);
    /// `None` where this side did not send paced.
    #[serde(default)]
    pub sender_max_lag_ms: Option<f64>,
    /// A paced sender's busiest 1 ms as a rate, bits/s (bytes in that 1 ms × 8000).
    #[serde(default)]
    pub sender_peak_1ms_bps: Option<f64>,
    /// A paced sender's stalls: times it fell more than 20 ms behind its schedule
    /// ([`crate::engine::pacer::PacerStats::stalls`]); `None` where not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_stalls: Option<u32>,
    /// What a paced sender still owed its schedule at the end, ms, written-off debt included
    /// ([`crate::engine::pacer::PacerStats::owed_ms`]); `None` where not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_owed_ms: Option<f64>,
    /// Why this end's sender sent without UDP GSO, when it says (datagrams above the path
    /// MTU, or GSO refused by the kernel and turned off during the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso_off: Option<crate::engine::udp::GsoOff>,
    /// The packets (skbs) this end's sender handed the kernel: one per GSO super-datagram,
    /// one per datagram otherwise; `None` where this side did not send. Not on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_skbs: Option<u64>,
    /// Datagrams this end's sender did not send because this host refused them (its own
    /// queue on the sending port was full: the send failed with ENOBUFS, see
    /// [`crate::engine::udp::UdpSendCfg::dropped_locally`]), over the whole test (omitted
    /// seconds included); not in `sent_packets` and not numbered, so not in the receiver's
    /// `lost`. `None` where this side did not send. JSON `dropped_locally` of the sending
    /// side's `sum_sent` and streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_dropped_locally: Option<u64>,
    /// ICMP port unreachable errors this end's sender got back (see
    /// [`crate::engine::udp::UdpSendCfg::port_unreachable`]); `None` where none came back or
    /// this side did not send. JSON `netperfd_port_unreachable` of the sending side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_port_unreachable: Option<u64>,
    /// Who paced this end's paced sender: the kernel's fq or the user-space pacer (see
    /// [`crate::engine::pacer::PacedBy`]); `None` unpaced, or in rows stored before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_by: Option<crate::engine::pacer::PacedBy>,
    /// A local receiver's highest sequence number seen over the whole test (omitted seconds
    /// included), for [`UdpSummary::add_trailing_loss`]; `None` where this side did not
    /// receive. Not on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_seq: Option<u64>,
    /// Of `lost`, the datagrams lost after the last one the receiver saw (the sender's count
    /// at the end less the highest sequence number seen, see
    /// [`crate::engine::udp::trailing_loss`]): in `lost` and `expected`, not in any
    /// interval. `None` where the sender's count was not known (or not credible). JSON
    /// `netperfd_lost_after_last` beside the receiver's `lost_packets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trailing_lost: Option<u64>,
    /// A local receiver: seconds from the last datagram it counted to the end of the
    /// measurement (both on this host's wall clock), for [`crate::engine::session::count_trailing_loss`];
    /// `None` where this side did not receive or nothing arrived. Not stored, not on the wire.
    #[serde(skip)]
    pub quiet_end_s: Option<f64>,
}

impl UdpSummary {
    /// Count the datagrams lost after the last one received into `lost` and `expected`
    /// (both saturating), given the sender's count of datagrams it numbered over the whole
    /// test (`sender_numbered`, from the peer's results or our own sender), the highest
    /// sequence number the receiver saw over the whole test (`highest_seen`) and the test's
    /// length in seconds (omit included, for the credibility bound of
    /// [`crate::engine::udp::trailing_loss`]). Returns the datagrams added; nothing changes
    /// (`None`) when the count is not credible or the receiver's figures are unknown.
    pub fn add_trailing_loss(
        &mut self,
        sender_numbered: i64,
        highest_seen: u64,
        seconds: f64,
    ) -> Option<u64> {
        let (Some(expected), Some(lost)) = (self.expected, self.lost) else {
            return None;
        };
        let after = crate::engine::udp::trailing_loss(sender_numbered, highest_seen, seconds)?;
        self.expected = Some(expected.saturating_add(after));
        self.lost = Some(lost.saturating_add(after));
        self.trailing_lost = Some(after);
        Some(after)
    }

    /// (lost, total) as shown: the receiver's view, lost = expected − unique with expected
    /// the highest sequence number seen (so datagrams still in flight when the receiver stops
    /// do not count as lost). When the receiver saw nothing at all of what was sent, every
    /// sent datagram is lost.
    pub fn loss(&self) -> (u64, u64) {
        match (self.expected, self.lost) {
            (Some(e), Some(l)) if e > 0 => (l.min(e), e),
            (Some(_), _) => {
                let sent = self.sent_packets.unwrap_or(0);
                (sent, sent)
            }
            _ => (0, self.sent_packets.unwrap_or(0)),
        }
    }

    /// Loss in percent (0..=100).
    pub fn lost_percent(&self) -> f64 {
        let (l, t) = self.loss();
        crate::engine::udp::loss_percent(l, t)
    }
}

/// One stream over one reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// iperf3 stream id (1, 3, 4, …).
    pub id: u32,
    /// Local socket number (shown as `[  5]`).
    pub socket: i32,
    /// Seconds since the test (or the end of omit) started.
    pub start: f64,
    pub end: f64,
    /// Bytes moved in the interval.
    pub bytes: u64,
    /// Bits per second over the interval.
    pub bits_per_second: f64,
    /// True when this side sends on the stream.
    pub sender: bool,
    /// True inside the `-O` omit period.
    pub omitted: bool,
    /// TCP_INFO for sending TCP streams.
    pub tcp: Option<TcpSample>,
    /// Datagram figures for UDP streams.
    #[serde(default)]
    pub udp: Option<UdpSample>,
    /// A receiving iperf 2 TCP `--trip-times` stream: one-way latency of the bursts (the
    /// client's writes) completed in the interval; `None` for every other stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyMs>,
}

/// All streams over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    pub streams: Vec<StreamInterval>,
}

/// Totals of one side of a stream over the whole test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SideTotals {
    /// Bytes after the omit period.
    pub bytes: u64,
    /// Seconds the side measured over.
    pub seconds: f64,
}

impl SideTotals {
    /// Bits per second; 0 for a zero duration (never NaN).
    pub fn bits_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }
}

/// Final figures of one stream, both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    pub id: u32,
    pub socket: i32,
    /// True when this side sent on the stream.
    pub local_sender: bool,
    /// The sending end's totals (local or from the peer's results).
    pub sender: SideTotals,
    /// The receiving end's totals (local or from the peer's results). `None` when the peer's
    /// figures are not available (a stock server reports before it has the client's).
    pub receiver: Option<SideTotals>,
    /// Retransmits over the test, −1 when unknown.
    pub retransmits: i64,
    /// Reordering events the sender saw over the test (`tcpi_reord_seen` at its last
    /// reading; iperf3 3.19+ `reorder`), 0 when unknown.
    #[serde(default)]
    pub reorder: u64,
    pub max_snd_cwnd: u64,
    pub max_snd_wnd: u64,
    /// RTT extremes and mean over the intervals, µs (local sender only).
    pub max_rtt: u32,
    pub min_rtt: u32,
    pub mean_rtt: u32,
    /// UDP figures (UDP tests only).
    #[serde(default)]
    pub udp: Option<UdpSummary>,
    /// CPU of this end's thread for the stream (local streams only; the tool-bound evidence).
    #[serde(default)]
    pub thread_cpu: Option<crate::engine::threadcpu::ThreadCpu>,
}

/// Which end of the control connection this report is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Server,
}

/// One data connection as iperf3 lists it in `start.connected`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connected {
    pub socket: i32,
    pub local_host: String,
    pub local_port: u16,
    pub remote_host: String,
    pub remote_port: u16,
}

/// Everything a finished (or failed) test produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub role: Role,
    pub params: Params,
    pub cookie: String,
    /// Peer host and control port (client: the server's; server: the client's).
    pub peer_host: String,
    pub peer_port: u16,
    /// The control connection's local address and port.
    pub local_host: String,
    pub local_port: u16,
    pub system_info: String,
    /// Unix seconds at test start.
    pub timestamp: i64,
    /// Unix ms at test start (0 in reports stored before it was kept: then `timestamp` × 1000).
    #[serde(default)]
    pub timestamp_ms: i64,
    /// This end's reporting interval (`-i`), s.
    #[serde(default = "one_second")]
    pub interval: f64,
    pub connected: Vec<Connected>,
    /// Control connection MSS, bytes.
    pub tcp_mss_default: u32,
    pub sndbuf_actual: u32,
    pub rcvbuf_actual: u32,
    pub intervals: Vec<IntervalRecord>,
    pub streams: Vec<StreamSummary>,
    pub cpu_local: CpuUtil,
    pub cpu_remote: CpuUtil,
    pub sender_congestion: Option<String>,
    pub receiver_congestion: Option<String>,
    pub server_output_text: Option<String>,
    pub server_output_json: Option<Value>,
    /// The peer's own drop counters over the test when the peer is netperfd (the results
    /// key `netperfd_drops`, see [`crate::engine::iperf3::wire::Results::netperfd_drops`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_drops: Option<Value>,
    /// This side's own drop counters over the test, as it sent them with its results (a
    /// client given a drop-counter reader: `netperfd -c`, the peer agent). The board reads
    /// the peer agent's in a forwarding run's ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_drops: Option<Value>,
    /// Who paced the peer's UDP senders when the peer is netperfd (the results key
    /// `netperfd_pacing`): a `-R` client's `end.pacing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_pacing: Option<String>,
    /// Set when the test failed or was aborted.
    pub error: Option<String>,
}

impl Report {
    /// A report with nothing measured yet, only the test's header: `role`, the parameters,
    /// the cookie (text), the peer's host and control port, the control connection's `local`
    /// address, this end's interval (s). The timestamps are now.
    pub fn new(
        role: Role,
        params: Params,
        cookie: String,
        peer: (String, u16),
        local: std::net::SocketAddr,
        interval: f64,
    ) -> Report {
        let now = chrono::Utc::now();
        Report {
            role,
            params,
            cookie,
            peer_host: peer.0,
            peer_port: peer.1,
            local_host: crate::engine::net::ip_text(local.ip()),
            local_port: local.port(),
            system_info: crate::engine::stats::system_info(),
            timestamp: now.timestamp(),
            timestamp_ms: now.timestamp_millis(),
            interval,
            connected: Vec::new(),
            tcp_mss_default: 0,
            sndbuf_actual: 0,
            rcvbuf_actual: 0,
            intervals: Vec::new(),
            streams: Vec::new(),
            cpu_local: CpuUtil::default(),
            cpu_remote: CpuUtil::default(),
            sender_congestion: None,
            receiver_congestion: None,
            server_output_text: None,
            server_output_json: None,
            peer_drops: None,
            local_drops: None,
            peer_pacing: None,
            error: None,
        }
    }
}

fn one_second() -> f64 {
    1.0
}

/// Version string reported in `-J` and `--version`.
pub fn version_string() -> String {
    format!(
        "netperfd {} (iperf3 wire protocol; verified against iperf3 3.9, 3.12, 3.18, 3.22)",
        env!("CARGO_PKG_VERSION")
    )
}

pub use crate::model::units::parse_suffixed;

fn role_tag(report: &Report, local_sender: bool) -> &'static str {
    if report.params.direction != Direction::Bidir {
        return "";
    }
    match (report.role, local_sender) {
        (Role::Client, true) => "[TX-C]",
        (Role::Client, false) => "[RX-C]",
        (Role::Server, true) => "[TX-S]",
        (Role::Server, false) => "[RX-S]",
    }
}

/// Whether this side sends data in the test (and so reports retransmits and cwnd).
fn local_sends(report: &Report) -> bool {
    matches!(
        (report.params.direction, report.role),
        (Direction::Bidir, _)
            | (Direction::Send, Role::Client)
            | (Direction::Receive, Role::Server)
    )
}

fn sock_label(socket: i32) -> String {
    format!("[{socket:3}]")
}

/// Text lines before the interval table ("Connecting to host …", "[  5] local … connected to …").
pub fn text_header(report: &Report) -> String {
    let mut out = String::new();
    if report.role == Role::Client {
        out.push_str(&format!(
            "Connecting to host {}, port {}\n",
            report.peer_host, report.peer_port
        ));
        if report.params.direction == Direction::Receive {
            out.push_str(&format!(
                "Reverse mode, remote host {} is sending\n",
                report.peer_host
            ));
        }
    } else {
        out.push_str(&format!(
            "Accepted connection from {}, port {}\n",
            report.peer_host, report.peer_port
        ));
    }
    for c in &report.connected {
        out.push_str(&format!(
            "{} local {} port {} connected to {} port {}\n",
            sock_label(c.socket),
            c.local_host,
            c.local_port,
            c.remote_host,
            c.remote_port
        ));
    }
    out
}

fn is_udp(report: &Report) -> bool {
    report.params.protocol == crate::engine::params::Protocol::Udp
}

/// iperf3's `%.2g` for loss percentages.
fn g2(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (1 - mag).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn interval_table_header(report: &Report) -> &'static str {
    let bidir = report.params.direction == Direction::Bidir;
    let sends = local_sends(report);
    if is_udp(report) {
        return match (bidir, sends && report.params.direction != Direction::Bidir) {
            (true, _) => "[ ID][Role] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n",
            (false, true) => "[ ID] Interval           Transfer     Bitrate         Total Datagrams\n",
            (false, false) => "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n",
        };
    }
    match (sends, bidir) {
        (true, false) => "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n",
        (true, true) => "[ ID][Role] Interval           Transfer     Bitrate         Retr  Cwnd\n",
        (false, false) => "[ ID] Interval           Transfer     Bitrate\n",
        (false, true) => "[ ID][Role] Interval           Transfer     Bitrate\n",
    }
}

/// Text of one interval (stream lines, and [SUM] lines with several streams). `first` adds the
/// table header; later intervals of a multi-stream test start with the separator line.
pub fn text_interval(report: &Report, rec: &IntervalRecord, first: bool) -> String {
    let mut out = String::new();
    if first {
        out.push_str(interval_table_header(report));
    } else if rec.streams.len() > 1 {
        out.push_str("- - - - - - - - - - - - - - - - - - - - - - - - -\n");
    }
    for s in &rec.streams {
        out.push_str(&interval_stream_line(report, s));
    }
    let groups: Vec<bool> = if report.params.direction == Direction::Bidir {
        vec![true, false]
    } else {
        vec![rec.streams.first().map(|s| s.sender).unwrap_or(true)]
    };
    let n_streams = rec.streams.len() / groups.len().max(1);
    if n_streams > 1 {
        for g in groups {
            let ss: Vec<&StreamInterval> = rec.streams.iter().filter(|s| s.sender == g).collect();
            if ss.is_empty() {
                continue;
            }
            out.push_str(&interval_sum_line(report, g, &ss));
        }
    }
    out
}

/// One stream's line of an interval: transfer and bitrate, with the UDP datagrams (and at
/// the receiver jitter and loss) or the TCP sender's retransmits and congestion window.
fn interval_stream_line(report: &Report, s: &StreamInterval) -> String {
    let tag = role_tag(report, s.sender);
    let tr = unit_format(s.bytes as f64, false);
    let br = unit_format(s.bits_per_second / 8.0, true);
    if let Some(u) = s.udp {
        if s.sender {
            return format!(
                "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {}  {}\n",
                sock_label(s.socket),
                tag,
                s.start,
                s.end,
                tr,
                br,
                u.packets,
                omit_tag(s.omitted)
            );
        }
        return format!(
            "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {:5.3} ms  {}/{} ({}%)  {}\n",
            sock_label(s.socket),
            tag,
            s.start,
            s.end,
            tr,
            br,
            u.jitter_ms,
            u.lost,
            u.packets,
            g2(u.lost_percent()),
            omit_tag(s.omitted)
        );
    }
    match s.tcp {
        Some(t) if s.sender => format!(
            "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {:3}   {}s       {}\n",
            sock_label(s.socket),
            tag,
            s.start,
            s.end,
            tr,
            br,
            t.retransmits,
            unit_format(t.snd_cwnd as f64, false),
            omit_tag(s.omitted)
        ),
        _ => format!(
            "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec                  {}\n",
            sock_label(s.socket),
            tag,
            s.start,
            s.end,
            tr,
            br,
            omit_tag(s.omitted)
        ),
    }
}

/// The [SUM] line of an interval over the streams `ss` (not empty) of one direction (`g`:
/// the senders).
fn interval_sum_line(report: &Report, g: bool, ss: &[&StreamInterval]) -> String {
    let bytes: u64 = ss.iter().map(|s| s.bytes).fold(0, u64::saturating_add);
    let bps: f64 = ss.iter().map(|s| s.bits_per_second).sum();
    let tag = role_tag(report, g);
    let start = ss[0].start;
    let end = ss[0].end;
    let omitted = ss[0].omitted;
    if is_udp(report) {
        let pk: u64 = ss
            .iter()
            .filter_map(|s| s.udp.map(|u| u.packets))
            .fold(0, u64::saturating_add);
        if g {
            return format!(
                "[SUM]{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {}  {}\n",
                tag,
                start,
                end,
                unit_format(bytes as f64, false),
                unit_format(bps / 8.0, true),
                pk,
                omit_tag(omitted)
            );
        }
        let lost: u64 = ss
            .iter()
            .filter_map(|s| s.udp.map(|u| u.lost))
            .fold(0, u64::saturating_add);
        let jit = ss
            .iter()
            .filter_map(|s| s.udp.map(|u| u.jitter_ms))
            .sum::<f64>()
            / ss.len() as f64;
        return format!(
            "[SUM]{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {:5.3} ms  {}/{} ({}%)  {}\n",
            tag,
            start,
            end,
            unit_format(bytes as f64, false),
            unit_format(bps / 8.0, true),
            jit,
            lost,
            pk,
            g2(crate::engine::udp::loss_percent(lost, pk)),
            omit_tag(omitted)
        );
    }
    if g {
        let retr: u64 = ss
            .iter()
            .filter_map(|s| s.tcp.map(|t| t.retransmits))
            .fold(0, u64::saturating_add);
        format!(
            "[SUM]{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {:3}             {}\n",
            tag,
            start,
            end,
            unit_format(bytes as f64, false),
            unit_format(bps / 8.0, true),
            retr,
            omit_tag(omitted)
        )
    } else {
        format!(
            "[SUM]{} {:6.2}-{:<6.2} sec  {}s  {}s/sec                  {}\n",
            tag,
            start,
            end,
            unit_format(bytes as f64, false),
            unit_format(bps / 8.0, true),
            omit_tag(omitted)
        )
    }
}

/// The tag of an interval line in the omitted period.
fn omit_tag(o: bool) -> &'static str {
    if o {
        "(omitted)"
    } else {
        ""
    }
}

/// The summary block: separator, header, per-stream sender/receiver lines, [SUM] lines.
pub fn text_summary(report: &Report) -> String {
    let mut out = String::new();
    out.push_str("- - - - - - - - - - - - - - - - - - - - - - - - -\n");
    let bidir = report.params.direction == Direction::Bidir;
    let udp = is_udp(report);
    out.push_str(if udp && bidir {
        "[ ID][Role] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
    } else if udp {
        "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
    } else if bidir {
        "[ ID][Role] Interval           Transfer     Bitrate         Retr\n"
    } else if report.role == Role::Client || local_sends(report) {
        "[ ID] Interval           Transfer     Bitrate         Retr\n"
    } else {
        "[ ID] Interval           Transfer     Bitrate\n"
    });
    let groups: Vec<bool> = if bidir {
        vec![true, false]
    } else {
        vec![report
            .streams
            .first()
            .map(|s| s.local_sender)
            .unwrap_or(true)]
    };
    for g in &groups {
        let ss: Vec<&StreamSummary> = report
            .streams
            .iter()
            .filter(|s| s.local_sender == *g)
            .collect();
        for s in &ss {
            match s.udp {
                Some(u) => out.push_str(&udp_pair(
                    &sock_label(s.socket),
                    role_tag(report, s.local_sender),
                    &s.sender,
                    s.receiver.as_ref(),
                    &u,
                )),
                None => out.push_str(&summary_pair(
                    &sock_label(s.socket),
                    role_tag(report, s.local_sender),
                    &s.sender,
                    s.receiver.as_ref(),
                    s.retransmits,
                )),
            }
        }
        if report.streams.len() / groups.len() > 1 && !ss.is_empty() {
            out.push_str(&summary_sum(report, *g, &ss, udp));
        }
    }
    out.push_str(&summary_notes(report));
    out
}

/// The [SUM] lines of the summary over the streams `ss` (not empty) of one direction (`g`:
/// the senders): totals of bytes, the longest time, retransmits or UDP figures.
fn summary_sum(report: &Report, g: bool, ss: &[&StreamSummary], udp: bool) -> String {
    let sent = SideTotals {
        bytes: ss
            .iter()
            .map(|s| s.sender.bytes)
            .fold(0, u64::saturating_add),
        seconds: ss.iter().map(|s| s.sender.seconds).fold(0.0, f64::max),
    };
    let recv = if ss.iter().all(|s| s.receiver.is_some()) {
        Some(SideTotals {
            bytes: ss
                .iter()
                .filter_map(|s| s.receiver.map(|r| r.bytes))
                .fold(0, u64::saturating_add),
            seconds: ss
                .iter()
                .filter_map(|s| s.receiver.map(|r| r.seconds))
                .fold(0.0, f64::max),
        })
    } else {
        None
    };
    let retr = if ss.iter().any(|s| s.retransmits >= 0) {
        ss.iter()
            .map(|s| s.retransmits.max(0))
            .fold(0, i64::saturating_add)
    } else {
        -1
    };
    if udp {
        return udp_pair(
            "[SUM]",
            role_tag(report, g),
            &sent,
            recv.as_ref(),
            &udp_total(ss),
        );
    }
    summary_pair("[SUM]", role_tag(report, g), &sent, recv.as_ref(), retr)
}

/// The lines under the summary: the pacer, datagrams lost after the last one received, ICMP
/// port unreachable, local drops, a rate shortfall, the GSO note, the error.
fn summary_notes(report: &Report) -> String {
    let mut out = String::new();
    // Who paced this end's paced UDP senders, always (before, only beside a lag line).
    if let Some(p) = pacer_line(report) {
        out.push_str(&p);
    }
    if let Some(l) = lost_after_last_line(report) {
        out.push_str(&l);
    }
    if let Some(n) = port_unreachable(report) {
        out.push_str(&format!(
            "warning: {}\n",
            port_unreachable_sentence(n, &report.peer_host)
        ));
    }
    if let Some(l) = dropped_locally_line(report) {
        out.push_str(&l);
    }
    // A shortfall, or a sender that stalled and caught up (the pacing note).
    if let Some(c) =
        crate::engine::shortfall::for_report(report).filter(|c| c.short || c.catch_up().is_some())
    {
        out.push_str(&format!("{}\n", c.sentence()));
    }
    // The GSO notes, when the kernel refused GSO during the run (chosen by the kind of note,
    // not its words).
    let refused = report.streams.iter().filter(|s| s.local_sender).any(|s| {
        matches!(
            s.udp.and_then(|u| u.gso_off),
            Some(crate::engine::udp::GsoOff::Refused { .. })
        )
    });
    if let Some(n) = gso_note(report).filter(|_| refused) {
        out.push_str(&format!("note: {n}\n"));
    }
    if let Some(e) = &report.error {
        out.push_str(&format!("error: {e}\n"));
    }
    out
}

/// Sum of the UDP figures of several streams (jitter averaged).
fn udp_total(ss: &[&StreamSummary]) -> UdpSummary {
    let us: Vec<UdpSummary> = ss.iter().filter_map(|s| s.udp).collect();
    let sum_opt = |f: &dyn Fn(&UdpSummary) -> Option<u64>| -> Option<u64> {
        if us.iter().all(|u| f(u).is_some()) && !us.is_empty() {
            Some(us.iter().filter_map(f).fold(0, u64::saturating_add))
        } else {
            None
        }
    };
    UdpSummary {
        sent_packets: sum_opt(&|u| u.sent_packets),
        omitted_packets: us
            .iter()
            .map(|u| u.omitted_packets)
            .fold(0, u64::saturating_add),
        expected: sum_opt(&|u| u.expected),
        lost: sum_opt(&|u| u.lost),
        jitter_ms: if us.is_empty() {
            0.0
        } else {
            us.iter().map(|u| u.jitter_ms).sum::<f64>() / us.len() as f64
        },
        out_of_order: us
            .iter()
            .map(|u| u.out_of_order)
            .fold(0, u64::saturating_add),
        duplicates: us.iter().map(|u| u.duplicates).fold(0, u64::saturating_add),
        stray: us.iter().map(|u| u.stray).fold(0, u64::saturating_add),
        peak_1ms_bps: us.iter().map(|u| u.peak_1ms_bps).fold(0.0, f64::max),
        // The largest lag of any stream; the streams' busiest 1 ms added up (an upper bound:
        // their busiest milliseconds need not coincide).
        sender_max_lag_ms: us
            .iter()
            .filter_map(|u| u.sender_max_lag_ms)
            .reduce(f64::max),
        sender_peak_1ms_bps: us
            .iter()
            .filter_map(|u| u.sender_peak_1ms_bps)
            .reduce(|a, b| a + b),
        sender_stalls: us
            .iter()
            .filter_map(|u| u.sender_stalls)
            .reduce(u32::saturating_add),
        sender_owed_ms: us.iter().filter_map(|u| u.sender_owed_ms).reduce(f64::max),
        // A refusal during the run says more than the plan made at the start.
        gso_off: us
            .iter()
            .filter_map(|u| u.gso_off)
            .max_by_key(|o| matches!(o, crate::engine::udp::GsoOff::Refused { .. })),
        sender_skbs: us
            .iter()
            .filter_map(|u| u.sender_skbs)
            .reduce(u64::saturating_add),
        sender_dropped_locally: us
            .iter()
            .filter_map(|u| u.sender_dropped_locally)
            .reduce(u64::saturating_add),
        sender_port_unreachable: us
            .iter()
            .filter_map(|u| u.sender_port_unreachable)
            .reduce(u64::saturating_add),
        // The kernel's when any stream was paced by it (all are, or none, on one port).
        paced_by: us
            .iter()
            .filter_map(|u| u.paced_by)
            .max_by_key(|p| p.is_kernel()),
        highest_seq: sum_opt(&|u| u.highest_seq),
        trailing_lost: us
            .iter()
            .filter_map(|u| u.trailing_lost)
            .reduce(u64::saturating_add),
        quiet_end_s: None,
    }
}

fn udp_pair(
    label: &str,
    tag: &str,
    sender: &SideTotals,
    receiver: Option<&SideTotals>,
    u: &UdpSummary,
) -> String {
    let mut out = format!(
        "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {:5.3} ms  {}/{} ({}%)  sender\n",
        label,
        tag,
        0.0,
        sender.seconds,
        unit_format(sender.bytes as f64, false),
        unit_format(sender.bits_per_second() / 8.0, true),
        0.0,
        0,
        u.sent_packets.unwrap_or(0),
        0
    );
    match (receiver, u.expected) {
        (Some(r), Some(_)) => {
            let (lost, total) = u.loss();
            out.push_str(&format!(
                "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {:5.3} ms  {}/{} ({}%)  receiver\n",
                label,
                tag,
                0.0,
                r.seconds,
                unit_format(r.bytes as f64, false),
                unit_format(r.bits_per_second() / 8.0, true),
                u.jitter_ms,
                lost,
                total,
                g2(crate::engine::udp::loss_percent(lost, total))
            ));
        }
        _ => out.push_str(&format!("{label} (receiver statistics not available)\n")),
    }
    out
}

fn summary_pair(
    label: &str,
    tag: &str,
    sender: &SideTotals,
    receiver: Option<&SideTotals>,
    retransmits: i64,
) -> String {
    let mut out = String::new();
    let retr = if retransmits >= 0 {
        format!("{retransmits:3}")
    } else {
        "   ".into()
    };
    out.push_str(&format!(
        "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec  {}             sender\n",
        label,
        tag,
        0.0,
        sender.seconds,
        unit_format(sender.bytes as f64, false),
        unit_format(sender.bits_per_second() / 8.0, true),
        retr
    ));
    match receiver {
        Some(r) => out.push_str(&format!(
            "{}{} {:6.2}-{:<6.2} sec  {}s  {}s/sec                  receiver\n",
            label,
            tag,
            0.0,
            r.seconds,
            unit_format(r.bytes as f64, false),
            unit_format(r.bits_per_second() / 8.0, true)
        )),
        None => out.push_str(&format!("{} (receiver statistics not available)\n", label)),
    }
    out
}

fn interval_stream_json(s: &StreamInterval) -> Value {
    let mut m = Map::new();
    m.insert("socket".into(), s.socket.into());
    m.insert("start".into(), num(s.start));
    m.insert("end".into(), num(s.end));
    m.insert("seconds".into(), num(s.end - s.start));
    m.insert("bytes".into(), s.bytes.into());
    m.insert("bits_per_second".into(), num(s.bits_per_second));
    if let Some(u) = s.udp {
        if s.sender {
            m.insert("packets".into(), u.packets.into());
        } else {
            m.insert("jitter_ms".into(), num(u.jitter_ms));
            m.insert("lost_packets".into(), u.lost.into());
            m.insert("packets".into(), u.packets.into());
            m.insert("lost_percent".into(), num(u.lost_percent()));
        }
    }
    if let (true, Some(t)) = (s.sender, s.tcp) {
        m.insert("retransmits".into(), t.retransmits.into());
        m.insert("snd_cwnd".into(), t.snd_cwnd.into());
        m.insert("snd_wnd".into(), t.snd_wnd.into());
        m.insert("rtt".into(), t.rtt.into());
        m.insert("rttvar".into(), t.rttvar.into());
        m.insert("pmtu".into(), t.pmtu.into());
        m.insert("reorder".into(), t.reorder.into());
    }
    m.insert("omitted".into(), s.omitted.into());
    m.insert("sender".into(), s.sender.into());
    Value::Object(m)
}

fn interval_sum_json(ss: &[&StreamInterval], sender: bool) -> Value {
    let bytes: u64 = ss.iter().map(|s| s.bytes).fold(0, u64::saturating_add);
    let bps: f64 = ss.iter().map(|s| s.bits_per_second).sum();
    let (start, end, omitted) = ss
        .first()
        .map(|s| (s.start, s.end, s.omitted))
        .unwrap_or((0.0, 0.0, false));
    let mut m = Map::new();
    m.insert("start".into(), num(start));
    m.insert("end".into(), num(end));
    m.insert("seconds".into(), num(end - start));
    m.insert("bytes".into(), bytes.into());
    m.insert("bits_per_second".into(), num(bps));
    if sender && ss.iter().any(|s| s.tcp.is_some()) {
        let r: u64 = ss
            .iter()
            .filter_map(|s| s.tcp.map(|t| t.retransmits))
            .fold(0, u64::saturating_add);
        m.insert("retransmits".into(), r.into());
    }
    if ss.iter().any(|s| s.udp.is_some()) {
        let pk: u64 = ss
            .iter()
            .filter_map(|s| s.udp.map(|u| u.packets))
            .fold(0, u64::saturating_add);
        if sender {
            m.insert("packets".into(), pk.into());
        } else {
            let lost: u64 = ss
                .iter()
                .filter_map(|s| s.udp.map(|u| u.lost))
                .fold(0, u64::saturating_add);
            let jit = ss
                .iter()
                .filter_map(|s| s.udp.map(|u| u.jitter_ms))
                .sum::<f64>()
                / ss.len().max(1) as f64;
            m.insert("jitter_ms".into(), num(jit));
            m.insert("lost_packets".into(), lost.into());
            m.insert("packets".into(), pk.into());
            m.insert(
                "lost_percent".into(),
                num(crate::engine::udp::loss_percent(lost, pk)),
            );
        }
    }
    m.insert("omitted".into(), omitted.into());
    m.insert("sender".into(), sender.into());
    Value::Object(m)
}

fn side_json(t: &SideTotals, socket: i32, sender_flag: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("socket".into(), socket.into());
    m.insert("start".into(), 0.into());
    m.insert("end".into(), num(t.seconds));
    m.insert("seconds".into(), num(t.seconds));
    m.insert("bytes".into(), t.bytes.into());
    m.insert("bits_per_second".into(), num(t.bits_per_second()));
    m.insert("sender".into(), sender_flag.into());
    m
}

/// `retransmits`: whether the sum carries the sender's retransmits (a sending side shown
/// with its TCP figures).
fn sum_json(ss: &[&StreamSummary], sending_side: bool, flag: bool, retransmits: bool) -> Value {
    let t = if sending_side {
        SideTotals {
            bytes: ss
                .iter()
                .map(|s| s.sender.bytes)
                .fold(0, u64::saturating_add),
            seconds: ss.iter().map(|s| s.sender.seconds).fold(0.0, f64::max),
        }
    } else {
        SideTotals {
            bytes: ss
                .iter()
                .filter_map(|s| s.receiver.map(|r| r.bytes))
                .fold(0, u64::saturating_add),
            seconds: ss
                .iter()
                .filter_map(|s| s.receiver.map(|r| r.seconds))
                .fold(0.0, f64::max),
        }
    };
    let mut m = side_json(&t, 0, flag);
    m.remove("socket");
    if sending_side && retransmits {
        let r: i64 = ss
            .iter()
            .map(|s| s.retransmits.max(0))
            .fold(0, i64::saturating_add);
        m.insert("retransmits".into(), r.into());
        // keep key order close to iperf3: retransmits before sender
        let sender = m.remove("sender").unwrap_or(Value::Bool(flag));
        m.insert("sender".into(), sender);
    }
    Value::Object(m)
}

/// The iperf3 `-J` document for a report (one JSON object, no NaN/null numbers).
pub fn to_iperf3_json(report: &Report) -> Value {
    let p = &report.params;
    let start = start_json(report);
    let intervals: Vec<Value> = report
        .intervals
        .iter()
        .map(|rec| interval_json(report, rec))
        .collect();
    let end = end_json(report);

    let mut top = Map::new();
    top.insert("start".into(), Value::Object(start));
    top.insert("intervals".into(), Value::Array(intervals));
    top.insert("end".into(), Value::Object(end));
    if let Some(t) = &p.title {
        top.insert("title".into(), t.clone().into());
    }
    if let Some(t) = &p.extra_data {
        top.insert("extra_data".into(), t.clone().into());
    }
    if let Some(t) = &report.server_output_text {
        top.insert("server_output_text".into(), t.clone().into());
    }
    if let Some(j) = &report.server_output_json {
        top.insert("server_output_json".into(), j.clone());
    }
    if let Some(e) = &report.error {
        top.insert("error".into(), e.clone().into());
    }
    Value::Object(top)
}

/// The iperf3 JSON document's `start` object: connections, version, time, peer, cookie,
/// socket options and the test's parameters.
fn start_json(report: &Report) -> Map<String, Value> {
    let p = &report.params;
    let mut start = Map::new();
    start.insert(
        "connected".into(),
        Value::Array(
            report
                .connected
                .iter()
                .map(|c| {
                    json!({"socket": c.socket, "local_host": c.local_host, "local_port": c.local_port,
                       "remote_host": c.remote_host, "remote_port": c.remote_port})
                })
                .collect(),
        ),
    );
    start.insert("version".into(), version_string().into());
    start.insert("system_info".into(), report.system_info.clone().into());
    let ts = chrono::DateTime::from_timestamp(report.timestamp, 0)
        .map(|d| d.format("%a, %d %b %Y %H:%M:%S GMT").to_string())
        .unwrap_or_default();
    let millis = if report.timestamp_ms > 0 {
        report.timestamp_ms
    } else {
        report.timestamp.saturating_mul(1000)
    };
    start.insert(
        "timestamp".into(),
        json!({"time": ts, "timesecs": report.timestamp, "timemillisecs": millis}),
    );
    match report.role {
        Role::Client => start.insert(
            "connecting_to".into(),
            json!({"host": report.peer_host, "port": report.peer_port}),
        ),
        Role::Server => start.insert(
            "accepted_connection".into(),
            json!({"host": report.peer_host, "port": report.peer_port}),
        ),
    };
    start.insert("cookie".into(), report.cookie.clone().into());
    if let Some(mss) = p.mss {
        start.insert("tcp_mss".into(), mss.into());
    } else {
        start.insert("tcp_mss_default".into(), report.tcp_mss_default.into());
    }
    start.insert("target_bitrate".into(), p.bandwidth.into());
    start.insert("fq_rate".into(), p.fq_rate.into());
    start.insert("sock_bufsize".into(), p.window.unwrap_or(0).into());
    start.insert("sndbuf_actual".into(), report.sndbuf_actual.into());
    start.insert("rcvbuf_actual".into(), report.rcvbuf_actual.into());
    start.insert(
        "test_start".into(),
        json!({
            "protocol": p.protocol.name(),
            "num_streams": p.parallel,
            "blksize": p.len,
            "omit": p.omit,
            "duration": p.time,
            "bytes": p.num,
            "blocks": p.blockcount,
            "reverse": i32::from(p.direction == Direction::Receive),
            "tos": p.tos,
            "target_bitrate": p.bandwidth,
            "bidir": i32::from(p.direction == Direction::Bidir),
            "fqrate": p.fq_rate,
            // iperf3 3.19+: the reporting interval (s) and GSO/GRO (never used: 0).
            "interval": report.interval,
            "gso": 0,
            "gro": 0,
        }),
    );
    start
}

/// One element of the iperf3 JSON document's `intervals`: each stream, then `sum` (and with
/// --bidir `sum_bidir_reverse`).
fn interval_json(report: &Report, rec: &IntervalRecord) -> Value {
    let bidir = report.params.direction == Direction::Bidir;
    let mut m = Map::new();
    m.insert(
        "streams".into(),
        Value::Array(rec.streams.iter().map(interval_stream_json).collect()),
    );
    if bidir {
        // Stock iperf3 (client and server alike) puts the client→server leg in `sum`.
        let fwd = forward_leg_sends(report);
        let tx: Vec<&StreamInterval> = rec.streams.iter().filter(|s| s.sender == fwd).collect();
        let rx: Vec<&StreamInterval> = rec.streams.iter().filter(|s| s.sender != fwd).collect();
        m.insert("sum".into(), interval_sum_json(&tx, fwd));
        m.insert("sum_bidir_reverse".into(), interval_sum_json(&rx, !fwd));
    } else {
        let all: Vec<&StreamInterval> = rec.streams.iter().collect();
        let sender = all.first().map(|s| s.sender).unwrap_or(true);
        m.insert("sum".into(), interval_sum_json(&all, sender));
    }
    Value::Object(m)
}

/// The iperf3 JSON document's `end` object: per-stream and summed figures as the document's
/// side measured them, rate checks, CPU utilization and congestion control.
fn end_json(report: &Report) -> Map<String, Value> {
    let mut end = Map::new();
    // A server's document shows only what the server measured (stock: the client's side is
    // 0 bytes over the server's own seconds), though it knows the client's figures.
    let own = stock_server_view(report);
    let shown = own.as_ref().unwrap_or(report);
    if is_udp(report) {
        udp_end_json(shown, &mut end);
    } else {
        tcp_end_json(shown, &mut end);
    }
    rate_checks_json(report, &mut end);
    end.insert(
        "cpu_utilization_percent".into(),
        json!({
            "host_total": num(report.cpu_local.total),
            "host_user": num(report.cpu_local.user),
            "host_system": num(report.cpu_local.system),
            "remote_total": num(report.cpu_remote.total),
            "remote_user": num(report.cpu_remote.user),
            "remote_system": num(report.cpu_remote.system),
        }),
    );
    if let Some(c) = &report.sender_congestion {
        end.insert("sender_tcp_congestion".into(), c.clone().into());
    }
    if let Some(c) = &report.receiver_congestion {
        end.insert("receiver_tcp_congestion".into(), c.clone().into());
    }
    end
}

/// A server's report as stock iperf3's server writes its `end` (3.12–3.22): the side of each
/// stream the client measured becomes 0 bytes / 0 bits/s over the server's own seconds, a
/// receiving server's sum carries no client datagram count, a sending server no client
/// jitter or loss (and `tcp_end_json` drops the client's TCP figures). `None` for a client
/// report (a client shows both ends, as stock).
fn stock_server_view(report: &Report) -> Option<Report> {
    if report.role != Role::Server {
        return None;
    }
    let mut r = report.clone();
    for s in &mut r.streams {
        if s.local_sender {
            s.receiver = Some(SideTotals {
                bytes: 0,
                seconds: s.sender.seconds,
            });
            if let Some(u) = s.udp.as_mut() {
                // The sender's own count as the total, nothing lost, no jitter: what the
                // server itself knows.
                u.expected = u.sent_packets;
                u.lost = Some(0);
                u.jitter_ms = 0.0;
                u.out_of_order = 0;
                u.duplicates = 0;
                u.stray = 0;
                u.peak_1ms_bps = 0.0;
            }
        } else {
            let seconds = s.receiver.map(|t| t.seconds).unwrap_or(s.sender.seconds);
            s.sender = SideTotals { bytes: 0, seconds };
            s.retransmits = -1;
            s.reorder = 0;
            s.max_snd_cwnd = 0;
            s.max_snd_wnd = 0;
            s.max_rtt = 0;
            s.min_rtt = 0;
            s.mean_rtt = 0;
            if let Some(u) = s.udp.as_mut() {
                u.sent_packets = None;
                u.sender_max_lag_ms = None;
                u.sender_peak_1ms_bps = None;
            }
        }
    }
    Some(r)
}

/// Whether the `end` shows a sender's TCP figures (retransmits, cwnd, RTT) for streams this
/// end sent (`local_sender`) or received: a client shows both ends, a server only its own.
fn shows_sender_tcp(report: &Report, local_sender: bool) -> bool {
    report.role == Role::Client || local_sender
}

fn tcp_end_json(report: &Report, end: &mut Map<String, Value>) {
    let bidir = report.params.direction == Direction::Bidir;
    let streams: Vec<Value> = report
        .streams
        .iter()
        .map(|s| {
            let mut snd = side_json(&s.sender, s.socket, s.local_sender);
            if shows_sender_tcp(report, s.local_sender) {
                let snd_flag = snd.remove("sender").unwrap_or(Value::Bool(s.local_sender));
                snd.insert("retransmits".into(), s.retransmits.into());
                snd.insert("reorder".into(), s.reorder.into());
                snd.insert("max_snd_cwnd".into(), s.max_snd_cwnd.into());
                snd.insert("max_snd_wnd".into(), s.max_snd_wnd.into());
                snd.insert("max_rtt".into(), s.max_rtt.into());
                snd.insert("min_rtt".into(), s.min_rtt.into());
                snd.insert("mean_rtt".into(), s.mean_rtt.into());
                snd.insert("sender".into(), snd_flag);
            }
            let rcv = side_json(&s.receiver.unwrap_or_default(), s.socket, s.local_sender);
            json!({"sender": Value::Object(snd), "receiver": Value::Object(rcv)})
        })
        .collect();
    end.insert("streams".into(), Value::Array(streams));
    if bidir {
        // The client→server leg first, as stock writes it on both ends.
        let fwd = forward_leg_sends(report);
        let tx: Vec<&StreamSummary> = report
            .streams
            .iter()
            .filter(|s| s.local_sender == fwd)
            .collect();
        let rx: Vec<&StreamSummary> = report
            .streams
            .iter()
            .filter(|s| s.local_sender != fwd)
            .collect();
        let tcp = |f: bool| shows_sender_tcp(report, f);
        end.insert("sum_sent".into(), sum_json(&tx, true, fwd, tcp(fwd)));
        end.insert("sum_received".into(), sum_json(&tx, false, fwd, false));
        end.insert(
            "sum_sent_bidir_reverse".into(),
            sum_json(&rx, true, !fwd, tcp(!fwd)),
        );
        end.insert(
            "sum_received_bidir_reverse".into(),
            sum_json(&rx, false, !fwd, false),
        );
    } else {
        let all: Vec<&StreamSummary> = report.streams.iter().collect();
        let flag = all.first().map(|s| s.local_sender).unwrap_or(true);
        let tcp = shows_sender_tcp(report, flag);
        end.insert("sum_sent".into(), sum_json(&all, true, flag, tcp));
        end.insert("sum_received".into(), sum_json(&all, false, flag, false));
    }
}

fn udp_side_json(
    t: &SideTotals,
    u: &UdpSummary,
    receiver_side: bool,
    flag: bool,
    socket: Option<i32>,
) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(sk) = socket {
        m.insert("socket".into(), sk.into());
    }
    m.insert("start".into(), 0.into());
    m.insert("end".into(), num(t.seconds));
    m.insert("seconds".into(), num(t.seconds));
    m.insert("bytes".into(), t.bytes.into());
    m.insert("bits_per_second".into(), num(t.bits_per_second()));
    if receiver_side {
        let (lost, total) = u.loss();
        m.insert("jitter_ms".into(), num(u.jitter_ms));
        m.insert("lost_packets".into(), lost.into());
        m.insert("packets".into(), total.into());
        m.insert(
            "lost_percent".into(),
            num(crate::engine::udp::loss_percent(lost, total)),
        );
        if let Some(t) = u.trailing_lost {
            m.insert(NETPERFD_LOST_AFTER_LAST.into(), t.min(lost).into());
        }
    } else {
        m.insert("jitter_ms".into(), 0.into());
        m.insert("lost_packets".into(), 0.into());
        m.insert("packets".into(), u.sent_packets.unwrap_or(0).into());
        m.insert("lost_percent".into(), 0.into());
        if let Some(d) = u.sender_dropped_locally {
            m.insert("dropped_locally".into(), d.into());
        }
        if let Some(n) = u.sender_port_unreachable {
            m.insert(NETPERFD_PORT_UNREACHABLE.into(), n.into());
        }
    }
    m.insert("sender".into(), flag.into());
    m
}

/// netperfd's additions beside stock's layout for a paced test (`-b`): the rate asked for in
/// `sum_sent.target_bits_per_second` (and `sum_sent_bidir_reverse`), `end.shortfall` (see
/// [`crate::engine::shortfall::RateCheck::to_json`]) for the main leg, and `end.pacing` — how this
/// end paced what it sent ("user-space token bucket", …).
fn rate_checks_json(report: &Report, end: &mut Map<String, Value>) {
    let fwd = if report.params.direction == Direction::Bidir {
        forward_leg_sends(report)
    } else {
        match report.streams.first() {
            Some(s) => s.local_sender,
            None => return,
        }
    };
    for (leg, key) in [(fwd, "sum_sent"), (!fwd, "sum_sent_bidir_reverse")] {
        if let (Some(c), Some(Value::Object(m))) = (
            crate::engine::shortfall::for_report_leg(report, leg),
            end.get_mut(key),
        ) {
            m.insert(
                "target_bits_per_second".into(),
                num(c.target_bits_per_second),
            );
        }
    }
    if let Some(c) = crate::engine::shortfall::for_report(report) {
        end.insert("shortfall".into(), c.to_json());
    }
    let gso = gso_note(report);
    let peer_pacing = report
        .peer_pacing
        .as_ref()
        .filter(|_| report.params.bandwidth > 0);
    if let Some(how) = pacing_sentence(report) {
        end.insert("pacing".into(), how.into());
        if let Some(p) = peer_pacing {
            // A --bidir client: the netperfd server paced the other direction, in its words
            // (its pacer may differ from this end's: the new-user tryout saw kernel here and
            // user space there under one "pacing" key).
            end.insert("server_pacing".into(), p.clone().into());
        }
    } else if let Some(p) = peer_pacing {
        // A -R client: the netperfd server's own words for its senders.
        end.insert("pacing".into(), p.clone().into());
    }
    if let Some(n) = gso {
        end.insert("udp_gso".into(), n.into());
    }
}

/// `end.pacing` for this end's paced senders: who paced them (UDP: the kernel's fq or the
/// user-space pacer, see [`crate::engine::pacer::PacedBy::sentence`]; TCP: "user-space write
/// schedule") and why GSO was off, if it was; `None` when this end sent nothing paced.
pub fn pacing_sentence(report: &Report) -> Option<String> {
    if report.params.bandwidth == 0 || !report.streams.iter().any(|s| s.local_sender) {
        return None;
    }
    let mut how = if is_udp(report) {
        paced_by(report).map_or_else(
            || crate::engine::pacer::Pacing::UserSpace.as_str().to_string(),
            |p| p.sentence(),
        )
    } else {
        "user-space write schedule".to_string()
    };
    if let Some(n) = gso_note(report) {
        how.push_str("; ");
        how.push_str(&n);
    }
    Some(how)
}

/// The text summary's pacing line for this end's paced UDP senders: "pacing: kernel (fq on
/// eth1, SO_MAX_PACING_RATE)\n", "pacing: user-space token bucket\n"; `None` when this end
/// sent no paced UDP.
pub fn pacer_line(report: &Report) -> Option<String> {
    if !is_udp(report) || report.params.bandwidth == 0 {
        return None;
    }
    if !report.streams.iter().any(|s| s.local_sender) {
        // A -R client: the netperfd server's words for its senders, when it sent them.
        return report
            .peer_pacing
            .as_ref()
            .map(|p| format!("pacing (the server's senders): {p}\n"));
    }
    let how = paced_by(report).map_or_else(
        || crate::engine::pacer::Pacing::UserSpace.as_str().to_string(),
        |p| p.sentence(),
    );
    // A --bidir client: the server's senders too, when a netperfd server said who paced them.
    let theirs = report
        .peer_pacing
        .as_ref()
        .map(|p| format!("pacing (the server's senders): {p}\n"))
        .unwrap_or_default();
    Some(format!("pacing: {how}\n{theirs}"))
}

/// Datagrams this end's UDP senders did not send because this host's own queue refused
/// them ([`UdpSummary::sender_dropped_locally`], all streams), when there were any.
pub fn dropped_locally(report: &Report) -> Option<u64> {
    report
        .streams
        .iter()
        .filter(|s| s.local_sender)
        .filter_map(|s| s.udp.and_then(|u| u.sender_dropped_locally))
        .reduce(u64::saturating_add)
        .filter(|&n| n > 0)
}

/// The text line of [`dropped_locally`]: "dropped locally: 1,234 datagrams not sent (…)".
/// The `-J` key, beside a receiver's `lost_packets` (each stream's and the sums'), of the
/// datagrams of `lost_packets` lost after the last one received (see
/// [`UdpSummary::trailing_lost`]).
pub const NETPERFD_LOST_AFTER_LAST: &str = "netperfd_lost_after_last";

/// Datagrams lost after the last one received, over the streams this report's receiver
/// counted them for; `None` when no stream's sender count was known or none was lost so.
pub fn lost_after_last(report: &Report) -> Option<u64> {
    report
        .streams
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.trailing_lost))
        .reduce(u64::saturating_add)
        .filter(|n| *n > 0)
}

/// The `-J` key, beside a sender's `packets` (each stream's and `sum_sent`), of the ICMP
/// port unreachable errors its sender got back (see
/// [`UdpSummary::sender_port_unreachable`]).
pub const NETPERFD_PORT_UNREACHABLE: &str = "netperfd_port_unreachable";

/// ICMP port unreachable errors this end's UDP senders got back, summed; `None` when none.
pub fn port_unreachable(report: &Report) -> Option<u64> {
    report
        .streams
        .iter()
        .filter(|s| s.local_sender)
        .filter_map(|s| s.udp.and_then(|u| u.sender_port_unreachable))
        .reduce(u64::saturating_add)
        .filter(|n| *n > 0)
}

/// The sentence for ICMP port unreachable errors a UDP sender got back from `peer` (text,
/// host or address): `n` of them.
pub fn port_unreachable_sentence(n: u64, peer: &str) -> String {
    format!(
        "the peer's host {peer} answered ICMP port unreachable {} time{}: nothing was listening on the UDP port for a while",
        crate::model::display::count(n),
        if n == 1 { "" } else { "s" }
    )
}

fn lost_after_last_line(report: &Report) -> Option<String> {
    let n = lost_after_last(report)?;
    Some(format!(
        "lost after the last datagram received: {} of the Lost (the sender's own count at the end says it sent them; no interval shows them; datagrams a path held past the end count here too)\n",
        crate::model::display::count(n)
    ))
}

fn dropped_locally_line(report: &Report) -> Option<String> {
    let n = dropped_locally(report)?;
    Some(format!(
        "dropped locally: {} datagrams not sent: this host's own queue on the sending port was full (ENOBUFS); not in Total, not in Lost\n",
        crate::model::display::count(n)
    ))
}

/// Who paced this end's UDP senders: the kernel's when any stream says so, else the first
/// stream's word (see [`crate::engine::pacer::PacedBy`]).
pub fn paced_by(report: &Report) -> Option<crate::engine::pacer::PacedBy> {
    report
        .streams
        .iter()
        .filter(|s| s.local_sender)
        .filter_map(|s| s.udp.and_then(|u| u.paced_by))
        .max_by_key(|p| p.is_kernel())
}

/// Why this end's UDP senders sent without GSO, one sentence per distinct reason joined by
/// "; " (see [`crate::engine::udp::GsoOff::sentence`]); `None` when none says.
fn gso_note(report: &Report) -> Option<String> {
    let mut notes: Vec<String> = Vec::new();
    for s in report.streams.iter().filter(|s| s.local_sender) {
        if let Some(off) = s.udp.and_then(|u| u.gso_off) {
            let n = off.sentence();
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// In a `--bidir` test, whether this end sends on the client→server leg (the leg stock iperf3
/// reports in `sum` / `sum_sent` / `sum_received`, on the client and on the server).
fn forward_leg_sends(report: &Report) -> bool {
    report.role == Role::Client
}

fn udp_end_json(report: &Report, end: &mut Map<String, Value>) {
    let streams: Vec<Value> = report
        .streams
        .iter()
        .map(|s| {
            let u = s.udp.unwrap_or_default();
            // Stock: a sending stream carries the sender's bytes and rate (its own seconds),
            // with the receiver's jitter and loss; a receiving stream the receiver's.
            let t = if s.local_sender {
                s.sender
            } else {
                s.receiver.unwrap_or_default()
            };
            let mut m = udp_side_json(&t, &u, true, s.local_sender, Some(s.socket));
            let sender = m.remove("sender").unwrap_or(Value::Bool(s.local_sender));
            m.insert("out_of_order".into(), u.out_of_order.into());
            m.insert("duplicates".into(), u.duplicates.into());
            m.insert("stray".into(), u.stray.into());
            m.insert("peak_1ms_bits_per_second".into(), num(u.peak_1ms_bps));
            if let Some(d) = u.sender_dropped_locally.filter(|_| s.local_sender) {
                m.insert("dropped_locally".into(), d.into());
            }
            m.insert("sender".into(), sender);
            json!({"udp": Value::Object(m)})
        })
        .collect();
    end.insert("streams".into(), Value::Array(streams));
    let groups: Vec<(bool, &str)> = if report.params.direction == Direction::Bidir {
        let fwd = forward_leg_sends(report);
        vec![(fwd, ""), (!fwd, "_bidir_reverse")]
    } else {
        vec![(
            report
                .streams
                .first()
                .map(|s| s.local_sender)
                .unwrap_or(true),
            "",
        )]
    };
    for (g, suffix) in groups {
        let ss: Vec<&StreamSummary> = report
            .streams
            .iter()
            .filter(|s| s.local_sender == g)
            .collect();
        let u = udp_total(&ss);
        let sent = SideTotals {
            bytes: ss
                .iter()
                .map(|s| s.sender.bytes)
                .fold(0, u64::saturating_add),
            seconds: ss.iter().map(|s| s.sender.seconds).fold(0.0, f64::max),
        };
        let recv = SideTotals {
            bytes: ss
                .iter()
                .filter_map(|s| s.receiver.map(|r| r.bytes))
                .fold(0, u64::saturating_add),
            seconds: ss
                .iter()
                .filter_map(|s| s.receiver.map(|r| r.seconds))
                .fold(0.0, f64::max),
        };
        // Stock's `sum` on a sending side: the receiver's seconds, jitter and loss, but the
        // sender's bytes and rate (`sum.bytes == sum_sent.bytes`). A receiving side keeps the
        // received bytes (stock 3.12 writes its own sent bytes there: 0).
        let mut sum = udp_side_json(&recv, &u, true, g, None);
        if g {
            sum.insert("bytes".into(), sent.bytes.into());
            sum.insert("bits_per_second".into(), num(sent.bits_per_second()));
        }
        end.insert(format!("sum{suffix}"), Value::Object(sum));
        end.insert(
            format!("sum_sent{suffix}"),
            Value::Object(udp_side_json(&sent, &u, false, true, None)),
        );
        // A sending server knows no receiver's count (stock writes 0 packets, 0 jitter).
        let received = if g && report.role == Role::Server {
            UdpSummary::default()
        } else {
            u
        };
        end.insert(
            format!("sum_received{suffix}"),
            Value::Object(udp_side_json(&recv, &received, true, false, None)),
        );
    }
}

/// The `-J` document for a test that failed before it produced anything.
pub fn error_json(msg: &str) -> Value {
    json!({
        "start": {"connected": [], "version": version_string(), "system_info": crate::engine::stats::system_info()},
        "intervals": [],
        "end": {},
        "error": msg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 38's attacker: a peer agent reporting `sent_packets` 2^64 − 1 on two streams
    /// overflowed the sum (a forwarding run's task died with NAT still on). Saturated.
    #[test]
    fn udp_totals_of_extreme_streams_saturate() {
        let s = |n: u64| StreamSummary {
            udp: Some(UdpSummary {
                sent_packets: Some(n),
                lost: Some(n),
                expected: Some(n),
                omitted_packets: n,
                ..Default::default()
            }),
            ..Default::default()
        };
        let (a, b) = (s(u64::MAX), s(u64::MAX));
        let t = udp_total(&[&a, &b]);
        assert_eq!(
            (t.sent_packets, t.lost, t.expected, t.omitted_packets),
            (Some(u64::MAX), Some(u64::MAX), Some(u64::MAX), u64::MAX)
        );
        let (c, d) = (s(1_000), s(234));
        assert_eq!(udp_total(&[&c, &d]).sent_packets, Some(1_234));
    }

    /// Issue 39: datagrams this host's queue refused are `dropped_locally` in the sender's
    /// JSON (sum and stream) and a text line of their own; none refused: 0 and no line.
    #[test]
    fn datagrams_dropped_locally_are_said_apart_in_json_and_text() {
        let report = |dropped: Option<u64>| {
            let params = Params {
                protocol: crate::engine::params::Protocol::Udp,
                bandwidth: 150_000_000,
                ..Params::default()
            };
            let mut r = Report::new(
                Role::Client,
                params,
                "c".into(),
                ("192.0.2.1".into(), 5201),
                "192.0.2.2:5201".parse().expect("addr"),
                3.0,
            );
            r.streams = vec![StreamSummary {
                id: 1,
                local_sender: true,
                udp: Some(UdpSummary {
                    sent_packets: Some(12_670),
                    expected: Some(12_670),
                    lost: Some(0),
                    sender_dropped_locally: dropped,
                    ..UdpSummary::default()
                }),
                ..StreamSummary::default()
            }];
            r
        };
        let r = report(Some(26_200));
        let j = to_iperf3_json(&r);
        assert_eq!(j["end"]["sum_sent"]["dropped_locally"], 26_200, "{j}");
        assert_eq!(j["end"]["sum_sent"]["packets"], 12_670);
        assert_eq!(j["end"]["streams"][0]["udp"]["dropped_locally"], 26_200);
        assert!(j["end"]["sum_received"].get("dropped_locally").is_none());
        assert_eq!(j["end"]["sum_received"]["lost_packets"], 0);
        let t = text_summary(&r);
        assert!(
            t.contains("dropped locally: 26,200 datagrams not sent: this host's own queue"),
            "{t}"
        );
        // None refused: the key says 0, no text line.
        let r = report(Some(0));
        assert_eq!(to_iperf3_json(&r)["end"]["sum_sent"]["dropped_locally"], 0);
        assert!(!text_summary(&r).contains("dropped locally"));
    }

    /// The text summary's GSO note is there when the kernel refused GSO during the run (with
    /// every sender's note), not for datagrams that were only too long for GSO: chosen by the
    /// kind of note, as before by its words.
    #[test]
    fn the_gso_note_shows_when_the_kernel_refused_gso() {
        use crate::engine::udp::GsoOff;
        let report = |offs: &[Option<GsoOff>]| {
            let params = Params {
                protocol: crate::engine::params::Protocol::Udp,
                bandwidth: 100_000_000,
                ..Params::default()
            };
            let mut r = Report::new(
                Role::Client,
                params,
                "c".into(),
                ("192.0.2.1".into(), 5201),
                "192.0.2.2:5201".parse().expect("addr"),
                1.0,
            );
            r.streams = offs
                .iter()
                .enumerate()
                .map(|(i, off)| StreamSummary {
                    id: i as u32 + 1,
                    local_sender: true,
                    udp: Some(UdpSummary {
                        gso_off: *off,
                        ..UdpSummary::default()
                    }),
                    ..StreamSummary::default()
                })
                .collect();
            text_summary(&r)
        };
        let frag_off = GsoOff::Fragmented {
            len: 2000,
            mtu: 1500,
        };
        let refused_off = GsoOff::Refused {
            errno: libc::EMSGSIZE,
        };
        let (frag, refused) = (Some(frag_off), Some(refused_off));
        let note = |t: &str| {
            t.lines()
                .find(|l| l.starts_with("note: "))
                .map(String::from)
        };
        assert_eq!(note(&report(&[frag])), None);
        assert_eq!(note(&report(&[None])), None);
        let both = note(&report(&[frag, refused])).expect("a note");
        assert_eq!(
            both,
            format!("note: {}; {}", frag_off.sentence(), refused_off.sentence())
        );
        assert!(note(&report(&[refused])).is_some());
    }

    /// The tail lost after the last datagram received: in the server's lost and total (the
    /// stock keys), said apart in `netperfd_lost_after_last` (stream and sum) and a text
    /// line; and a sender's ICMP port unreachable errors in `netperfd_port_unreachable` and
    /// a warning line.
    #[test]
    fn loss_after_the_last_datagram_and_port_unreachable_are_said() {
        let params = Params {
            protocol: crate::engine::params::Protocol::Udp,
            ..Params::default()
        };
        let mut r = Report::new(
            Role::Server,
            params,
            "c".into(),
            ("192.0.2.1".into(), 5201),
            "192.0.2.2:5201".parse().expect("addr"),
            1.0,
        );
        let mut u = UdpSummary {
            expected: Some(7),
            lost: Some(0),
            highest_seq: Some(7),
            ..UdpSummary::default()
        };
        assert_eq!(u.add_trailing_loss(9_378, 7, 10.0), Some(9_371));
        r.streams = vec![StreamSummary {
            id: 1,
            local_sender: false,
            receiver: Some(SideTotals {
                bytes: 8_400,
                seconds: 10.0,
            }),
            udp: Some(u),
            ..StreamSummary::default()
        }];
        let j = to_iperf3_json(&r);
        let e = &j["end"];
        assert_eq!(e["sum"]["lost_packets"], 9_371, "{j}");
        assert_eq!(e["sum"]["packets"], 9_378);
        assert_eq!(e["sum"]["netperfd_lost_after_last"], 9_371);
        assert_eq!(e["streams"][0]["udp"]["netperfd_lost_after_last"], 9_371);
        let t = text_summary(&r);
        assert!(t.contains("9371/9378"), "{t}");
        assert!(
            t.contains("lost after the last datagram received: 9,371 of the Lost"),
            "{t}"
        );
        // Not known: no key, no line.
        r.streams[0].udp = Some(UdpSummary {
            expected: Some(7),
            lost: Some(0),
            ..UdpSummary::default()
        });
        assert!(to_iperf3_json(&r)["end"]["sum"]
            .get("netperfd_lost_after_last")
            .is_none());
        assert!(!text_summary(&r).contains("after the last"));
        // A sender that got port unreachable back.
        r.role = Role::Client;
        r.streams = vec![StreamSummary {
            id: 1,
            local_sender: true,
            udp: Some(UdpSummary {
                sent_packets: Some(850),
                sender_port_unreachable: Some(849),
                ..UdpSummary::default()
            }),
            ..StreamSummary::default()
        }];
        let j = to_iperf3_json(&r);
        assert_eq!(
            j["end"]["sum_sent"]["netperfd_port_unreachable"], 849,
            "{j}"
        );
        assert!(text_summary(&r).contains(
            "warning: the peer's host 192.0.2.1 answered ICMP port unreachable 849 times"
        ));
    }

    /// Issue 39 (kpace tryout): the text output named the pacer only beside a lag line. A UDP
    /// sender's end summary now always says who paced it; a receiver, TCP and -b 0 say nothing.
    #[test]
    fn text_summary_says_who_paced_a_udp_sender() {
        use crate::engine::pacer::{PacedBy, PortName, UserWhy};
        let report = |udp: bool, rate: u64, local_sender: bool, by: Option<PacedBy>| {
            let params = Params {
                protocol: if udp {
                    crate::engine::params::Protocol::Udp
                } else {
                    crate::engine::params::Protocol::Tcp
                },
                bandwidth: rate,
                ..Params::default()
            };
            let mut r = Report::new(
                Role::Client,
                params,
                "c".into(),
                ("192.0.2.1".into(), 5201),
                "192.0.2.2:5201".parse().expect("addr"),
                1.0,
            );
            r.streams = vec![StreamSummary {
                id: 1,
                local_sender,
                udp: Some(UdpSummary {
                    paced_by: by,
                    sent_packets: Some(8633),
                    ..UdpSummary::default()
                }),
                ..StreamSummary::default()
            }];
            r
        };
        let fq = PacedBy::Kernel {
            port: PortName::new("eth1"),
            forced: false,
        };
        let r = report(true, 100_000_000, true, Some(fq));
        let t = text_summary(&r);
        assert!(
            t.contains("pacing: kernel (fq on eth1, SO_MAX_PACING_RATE)\n"),
            "{t}"
        );
        assert_eq!(
            to_iperf3_json(&r)["end"]["pacing"],
            "kernel (fq on eth1, SO_MAX_PACING_RATE)"
        );
        let user = Some(PacedBy::UserSpace { why: UserWhy::NoFq });
        let t = text_summary(&report(true, 100_000_000, true, user));
        assert!(t.contains("pacing: user-space token bucket\n"), "{t}");
        // A -R client sent nothing: the netperfd server's words, in its -J and its text.
        let mut rev = report(true, 100_000_000, false, None);
        rev.peer_pacing = Some("user-space token bucket (asked: --udp-pacing user)".into());
        assert_eq!(
            to_iperf3_json(&rev)["end"]["pacing"],
            "user-space token bucket (asked: --udp-pacing user)"
        );
        assert!(text_summary(&rev).contains(
            "pacing (the server's senders): user-space token bucket (asked: --udp-pacing user)\n"
        ));
        // A --bidir client: its own pacer under "pacing", the server's under "server_pacing",
        // and a text line for each.
        let mut both = report(true, 100_000_000, true, Some(fq));
        both.peer_pacing = Some("user-space token bucket".into());
        let e = &to_iperf3_json(&both)["end"];
        assert_eq!(e["pacing"], "kernel (fq on eth1, SO_MAX_PACING_RATE)");
        assert_eq!(e["server_pacing"], "user-space token bucket");
        let t = text_summary(&both);
        assert!(
            t.contains("pacing: kernel (fq on eth1, SO_MAX_PACING_RATE)\npacing (the server's senders): user-space token bucket\n"),
            "{t}"
        );
        assert!(to_iperf3_json(&r)["end"].get("server_pacing").is_none());
        // A stock server says nothing: no end.pacing on a -R client.
        let stock = report(true, 100_000_000, false, None);
        assert!(to_iperf3_json(&stock)["end"].get("pacing").is_none());
        for (udp, rate, sender) in [
            (true, 0, true),
            (false, 100_000_000, true),
            (true, 100_000_000, false),
        ] {
            let r = report(udp, rate, sender, user);
            assert_eq!(pacer_line(&r), None, "udp {udp} -b {rate} sender {sender}");
            assert!(!text_summary(&r).contains("pacing:"));
        }
    }

    #[test]
    fn units_match_iperf3() {
        assert_eq!(
            unit_format(2.75 * 1024.0 * 1024.0 * 1024.0, false),
            "2.75 GByte"
        );
        assert_eq!(unit_format(23.6e9 / 8.0, true), "23.6 Gbit");
        assert_eq!(unit_format(941.48e6 / 8.0, true), " 941 Mbit");
        assert_eq!(unit_format(0.0, true), "0.00 bit");
        assert_eq!(unit_format(f64::NAN, true), "0.00 bit");
        assert_eq!(unit_format(2_748_000.0, false), "2.62 MByte");
    }

    #[test]
    fn suffixes_are_1024_for_sizes_and_1000_for_rates() {
        assert_eq!(parse_suffixed("10M", false), Ok(10 * 1024 * 1024));
        assert_eq!(parse_suffixed("300K", false), Ok(300 * 1024));
        assert_eq!(parse_suffixed("8k", false), Ok(8192));
        assert_eq!(parse_suffixed("100M", true), Ok(100_000_000));
        assert_eq!(parse_suffixed("1.5G", true), Ok(1_500_000_000));
        assert_eq!(parse_suffixed("42", true), Ok(42));
        assert!(parse_suffixed("10X", true).is_err());
        assert!(parse_suffixed("-5", true).is_err());
        assert!(parse_suffixed("", true).is_err());
    }

    /// Issue 39: a netperfd server's `-J` wrote the client's bytes, rate and retransmits into
    /// the side it did not measure, where stock servers (3.12–3.22, measured) write 0 bytes and
    /// 0 bits/s over the server's own seconds and no sender TCP figures. A client keeps both.
    #[test]
    fn server_json_shows_only_its_own_side_as_stock() {
        let stream = |local_sender: bool, udp: bool| StreamSummary {
            id: 1,
            socket: 5,
            local_sender,
            sender: SideTotals {
                bytes: 1_000_000,
                seconds: 1.5,
            },
            receiver: Some(SideTotals {
                bytes: 900_000,
                seconds: 1.25,
            }),
            retransmits: 7,
            max_snd_cwnd: 64_000,
            udp: udp.then_some(UdpSummary {
                sent_packets: Some(700),
                expected: Some(690),
                lost: Some(10),
                jitter_ms: 0.5,
                ..UdpSummary::default()
            }),
            ..StreamSummary::default()
        };
        let report = |role: Role, local_sender: bool, udp: bool| {
            let params = Params {
                protocol: if udp {
                    crate::engine::params::Protocol::Udp
                } else {
                    crate::engine::params::Protocol::Tcp
                },
                ..Params::default()
            };
            let mut r = Report::new(
                role,
                params,
                "c".into(),
                ("192.0.2.1".into(), 5201),
                "192.0.2.2:5201".parse().expect("addr"),
                1.0,
            );
            r.streams = vec![stream(local_sender, udp)];
            to_iperf3_json(&r)
        };
        // A receiving TCP server: sum_sent 0 bytes over its own 1.25 s, no retransmits.
        let e = &report(Role::Server, false, false)["end"];
        assert_eq!(e["sum_sent"]["bytes"], 0);
        assert_eq!(e["sum_sent"]["bits_per_second"], 0.0);
        assert_eq!(e["sum_sent"]["seconds"], 1.25);
        assert!(e["sum_sent"].get("retransmits").is_none(), "{e}");
        assert!(
            e["streams"][0]["sender"].get("max_snd_cwnd").is_none(),
            "{e}"
        );
        assert_eq!(e["sum_received"]["bytes"], 900_000);
        // A sending TCP server: sum_received 0 over its own 1.5 s, its retransmits kept.
        let e = &report(Role::Server, true, false)["end"];
        assert_eq!(e["sum_received"]["bytes"], 0);
        assert_eq!(e["sum_received"]["seconds"], 1.5);
        assert_eq!(e["streams"][0]["receiver"]["bytes"], 0);
        assert_eq!(e["sum_sent"]["bytes"], 1_000_000);
        assert_eq!(e["sum_sent"]["retransmits"], 7);
        // UDP: a receiving server counts no sent datagrams; a sending one no client jitter/loss.
        let e = &report(Role::Server, false, true)["end"];
        assert_eq!(e["sum_sent"]["bytes"], 0);
        assert_eq!(e["sum_sent"]["packets"], 0);
        assert_eq!(e["sum_received"]["packets"], 690);
        assert_eq!(e["sum_received"]["lost_packets"], 10);
        let e = &report(Role::Server, true, true)["end"];
        assert_eq!(e["sum_received"]["bytes"], 0);
        assert_eq!(e["sum_received"]["packets"], 0);
        assert_eq!(e["sum_received"]["jitter_ms"], 0.0);
        assert_eq!(e["sum"]["packets"], 700);
        assert_eq!(e["sum"]["lost_packets"], 0);
        assert_eq!(e["sum_sent"]["packets"], 700);
        // A client shows both ends, the server's figures included.
        let e = &report(Role::Client, true, false)["end"];
        assert_eq!(e["sum_received"]["bytes"], 900_000);
        assert_eq!(e["sum_sent"]["retransmits"], 7);
        let e = &report(Role::Client, false, false)["end"];
        assert_eq!(e["sum_sent"]["bytes"], 1_000_000);
    }
}
