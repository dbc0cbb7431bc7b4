//! iperf 2 peers (2.0.5 … 2.1.x): client and server for TCP and UDP, `-r`/`-d` return tests,
//! the UDP FIN / server report exchange. iperf 2 has no control connection: every stream is
//! its own TCP connection or UDP flow to port 5001, and only UDP brings numbers back.
//! The stream loops, UDP pacer and loss/jitter accounting are the iperf3 engine's
//! (`session::DataPhase`); this module drives them with iperf 2's framing and end rules.
//! Not for: the iperf3 protocol (see `engine::iperf3`).

pub(crate) mod client;
pub(crate) mod server;
pub(crate) mod trip;
pub mod wire;

use crate::engine::iperf3::wire::{Params, Protocol};
use crate::engine::report::IntervalRecord;
use crate::engine::session::DataPhase;
use crate::model::{RunDirection, RunProtocol, RunStatus};
use serde::{Deserialize, Serialize};
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};
use wire::{Layout, ServerReport};

/// The exact words our iperf3 side uses when the peer speaks iperf 2 (issue B09).
pub(crate) const LOOKS_LIKE_IPERF2: &str = "peer looks like iperf 2.x";
/// The words our iperf 2 side uses when the peer speaks iperf3.
pub(crate) const LOOKS_LIKE_IPERF3: &str = "peer looks like iperf 3";

/// Who started the test, from the board's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Server,
}

/// The run's direction word, from the board's view, for a test with return test `ret`:
/// "send" / "receive" for a one-way test (`board_client`: the board ran the client, so it
/// sent), "bidir" for `-d` (both legs at once, as iperf3's `--bidir`), "tradeoff" for `-r` (one
/// leg, then the other: iperf 2's own word, the one the test form and API take for it).
pub(crate) fn direction_word(ret: wire::Return, board_client: bool) -> RunDirection {
    match ret {
        wire::Return::None if board_client => RunDirection::Send,
        wire::Return::None => RunDirection::Receive,
        wire::Return::Dual => RunDirection::Bidir,
        wire::Return::Tradeoff => RunDirection::Tradeoff,
    }
}

/// What a test is, known when it starts.
#[derive(Debug, Clone, Serialize)]
pub struct TestInfo {
    pub role: Role,
    /// TCP or UDP.
    pub protocol: RunProtocol,
    pub peer_host: String,
    pub peer_port: u16,
    pub local_host: String,
    pub local_port: u16,
    /// From the board's view ([`direction_word`]): "send", "receive", "bidir" (`-d`, both at
    /// once) or "tradeoff" (`-r`, the client's leg, then the server's).
    pub direction: RunDirection,
    /// The test's settings as JSON (rate bits/s, length bytes, time s, streams, return test).
    pub params: serde_json::Value,
}

/// A served test's settings as the board stores them (a peer's test against the board's
/// server: [`TestInfo::params`], then the run's `params_json`); field order = stored key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ServedParams {
    /// Always true: these are a served iperf 2 test's params.
    pub iperf2: bool,
    /// The client's header as it came; `None` (`null`) for a client that sent none.
    pub header: Option<HeaderParams>,
    /// The return test the header asks for.
    #[serde(rename = "return")]
    pub ret: wire::Return,
    /// UDP: where the client's header sits; `None` (`null`) over TCP or before it is known.
    pub layout: Option<Layout>,
    /// Streams of the test (`-P`).
    pub parallel: usize,
    /// `--trip-times` asked for and measured.
    pub trip_times: bool,
    /// `--trip-times` asked for and not measured: why, in a stock server's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trip_times_ignored: Option<String>,
}

/// A client header's fields as stored with a served test (see [`wire::ClientHeader`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HeaderParams {
    /// Flag bits as hex text, "0x80000001".
    pub flags: String,
    /// `-P` of the return test.
    pub num_threads: i32,
    /// `-L`: the client's port for the return test.
    pub port: i32,
    /// `-l`, bytes; 0 = not given.
    pub buffer_len: i32,
    /// TCP: `-w`, bytes; UDP: `-b`, bits/s.
    pub win_band: i32,
    /// Negative: duration in 10 ms units; positive: byte count.
    pub amount: i32,
}

impl HeaderParams {
    /// The stored fields of header `h`.
    pub(crate) fn of(h: &wire::ClientHeader) -> HeaderParams {
        HeaderParams {
            flags: format!("0x{:08x}", h.flags),
            num_threads: h.num_threads,
            port: h.port,
            buffer_len: h.buffer_len,
            win_band: h.win_band,
            amount: h.amount,
        }
    }
}

impl ServedParams {
    /// The stored JSON (what `TestInfo::params` and `runs.params_json` hold).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Final figures of one stream (as stored in an iperf 2 run's summary: read back with every
/// key defaulting when absent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamResult {
    /// Stream number as printed (`[  1]`).
    pub id: u32,
    pub local: String,
    pub remote: String,
    /// True when the board sent on this stream.
    pub sender: bool,
    /// Bytes this side moved (header bytes included, as iperf 2 counts them).
    pub bytes: u64,
    /// Seconds this side measured.
    pub seconds: f64,
    /// UDP sender: datagrams sent (the FIN excluded).
    pub sent_datagrams: Option<u64>,
    /// UDP: the receiver's figures — ours for a receiving stream, the peer's server report
    /// for a sending one (None when no report came back).
    pub udp: Option<UdpFigures>,
    /// A paced UDP sender's largest lag behind its schedule, ms (see
    /// [`crate::engine::pacer::PacerStats`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_max_lag_ms: Option<f64>,
    /// A paced UDP sender's busiest 1 ms as a rate, bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_peak_1ms_bps: Option<f64>,
    /// A receiving TCP `--trip-times` stream: one-way latency of the client's writes
    /// (bursts), count and avg/min/max/stdev in ms (count 0: none measured); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<crate::engine::report::LatencyMs>,
    /// With `latency_ms`: the bursts that gave no figure, by reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trip_drops: Option<trip::TripDrops>,
    /// A UDP sender's ICMP port unreachable errors (see
    /// [`crate::engine::udp::UdpSendCfg::port_unreachable`]); `None` when none came back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_unreachable: Option<u64>,
}

impl StreamResult {
    /// Bits per second over the stream's own duration.
    pub fn bits_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }
}

/// A UDP receiver's figures (iperf 2's "Server Report" fields).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UdpFigures {
    /// Bytes received.
    pub bytes: u64,
    /// Seconds the receiver measured.
    pub seconds: f64,
    /// Datagrams lost / counted, out of order; jitter in ms.
    pub lost: u64,
    pub total: u64,
    pub out_of_order: u64,
    pub jitter_ms: f64,
    /// `--trip-times`: one-way latency of the received datagrams (count, avg/min/max/stdev
    /// in ms); `None` when the client did not ask (or a report without the extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<crate::engine::report::LatencyMs>,
}

impl UdpFigures {
    /// From a server report datagram (the latency from its extension, when there is one).
    pub fn from_report(r: &ServerReport) -> UdpFigures {
        UdpFigures {
            bytes: r.total_len,
            seconds: r.seconds(),
            lost: r.error_cnt.max(0) as u64,
            total: r.datagrams.max(0) as u64,
            out_of_order: r.outorder_cnt.max(0) as u64,
            jitter_ms: r.jitter_ms(),
            latency_ms: r.ext.and_then(|e| e.latency_ms()),
        }
    }

    /// Loss, percent of the counted datagrams (0..=100).
    pub fn lost_percent(&self) -> f64 {
        crate::engine::udp::loss_percent(self.lost, self.total)
    }

    /// Received bits per second.
    pub fn bits_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }

    /// The report datagram fields for these figures.
    pub fn to_report(self) -> ServerReport {
        let us = (self.seconds.max(0.0) * 1e6).round() as i64;
        let jus = (self.jitter_ms.max(0.0) * 1e3).round() as i64;
        ServerReport {
            flags: wire::HEADER_VERSION1,
            total_len: self.bytes,
            stop_sec: (us / 1_000_000) as i32,
            stop_usec: (us % 1_000_000) as i32,
            error_cnt: self.lost.min(i32::MAX as u64) as i32,
            outorder_cnt: self.out_of_order.min(i32::MAX as u64) as i32,
            datagrams: self.total.min(i32::MAX as u64) as i32,
            jitter_sec: (jus / 1_000_000) as i32,
            jitter_usec: (jus % 1_000_000) as i32,
            ext: self
                .latency_ms
                .map(|l| wire::ReportExt::from_latency(&l, self.seconds)),
        }
    }
}

/// How a test ended and what it measured.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub status: RunStatus,
    pub error: Option<String>,
    pub streams: Vec<StreamResult>,
    /// Notes worth keeping with the run (e.g. no server report, a peer that looks like iperf3).
    pub notes: Vec<String>,
    /// A paced client's rate check (`-b`: asked, sent, received; see
    /// [`crate::engine::shortfall`]); `None` unpaced or on the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_check: Option<crate::engine::shortfall::RateCheck>,
}

/// Progress of iperf 2 tests (client: one test numbered 0; server: one per connection/flow).
#[derive(Debug, Clone)]
pub enum Event {
    Started { test: u64, info: Box<TestInfo> },
    Interval { test: u64, record: IntervalRecord },
    Finished { test: u64, outcome: Box<Outcome> },
}

/// iperf3-engine parameters for an iperf 2 data phase: protocol, length (bytes), rate
/// (bits/s, 0 = unlimited), byte target, the digit filler iperf 2 sends.
fn phase_params(udp: bool, len: usize, rate: u64, bytes: u64) -> Params {
    Params {
        protocol: if udp { Protocol::Udp } else { Protocol::Tcp },
        len: len as u32,
        bandwidth: rate,
        num: bytes,
        repeating_payload: true,
        ..Params::default()
    }
}

/// When a leg ends.
#[derive(Debug, Clone, Copy)]
enum Until {
    /// A sender: after `secs` (or the byte target in the params).
    Send { secs: f64 },
    /// A receiver: when every stream saw EOF (TCP) or a FIN (UDP); gives up after `limit`
    /// or when nothing arrived for `stall`.
    Recv { limit: Duration, stall: Duration },
}

/// One direction of a test: a data phase and how it ends.
struct Leg {
    phase: DataPhase,
    until: Until,
    /// Sockets of UDP streams (clones), for the FIN and report exchange.
    udp: Vec<UdpSocket>,
    /// Bytes already read before the phase started (TCP headers), per stream.
    pre: Vec<u64>,
    /// Seconds to add to interval times (a `-r` return leg starts after the first).
    offset: f64,
    /// UDP receivers: where the report goes in the reply to the FIN.
    layout: Layout,
}

/// How long a TCP sending stream waits at its end for the server to read what is still
/// queued and close ([`close_like_stock`]).
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

/// End iperf 2 TCP sending streams as a stock client does: shut down the writing side of
/// every stream first (each FIN goes after every byte still in its send buffer), then read and
/// drop what the server writes (a 2.1 server answers a `--trip-times` header) until it closes
/// each one, all within `limit`. Closing with unread bytes makes the kernel reset the
/// connection and throw away what is still queued (the new-user tryout: 1.3 MB of 24.6 MB
/// never reached a stock server behind a 50 Mbit/s link). All FINs go before any wait: a
/// server that closes its streams together (ours does, at the end of the test) would
/// otherwise wait for a FIN this loop had not sent yet, and `-P 2` hung for the whole
/// `limit` (s51 tryout: 12.07 s for a 2 s test). Returns how many the server closed.
fn close_like_stock(mut socks: Vec<std::net::TcpStream>, limit: Duration) -> usize {
    use std::io::Read;
    for s in &mut socks {
        let _ = s.set_nonblocking(false);
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let end = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    let mut closed = 0;
    'streams: for mut s in socks {
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
                continue 'streams;
            }
            match s.read(&mut buf) {
                Ok(0) => {
                    closed += 1;
                    continue 'streams;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => continue 'streams,
            }
        }
    }
    closed
}

/// Drive a leg to its end, sending intervals as `test`; returns (stream results, error).
async fn drive(
    mut leg: Leg,
    test: u64,
    interval: f64,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<Arc<Notify>>,
) -> (Vec<StreamResult>, Option<String>, bool) {
    if let Err(e) = leg.phase.start(false) {
        return (
            Vec::new(),
            Some(format!("cannot start the streams: {e}")),
            false,
        );
    }
    let udp = leg.phase.udp();
    let send = matches!(leg.until, Until::Send { .. });
    let (error, aborted) = watch(&mut leg, test, interval, &events, cancel).await;
    if let Some(rec) = leg.phase.finish().await {
        emit_interval(&events, test, rec, leg.offset);
    }
    // A TCP sending leg ends as a stock client's does: the FIN after every byte written,
    // then what the server writes read until it closes; the time that takes is part of the
    // test (a stock 2.1.8 client behind a 50 Mbit/s link: 4.33 s, 47.7 Mbit/s).
    let mut closing_s = 0.0;
    if send && !udp && !aborted && error.is_none() {
        closing_s = close_senders(&leg).await;
    }
    let secs = leg.phase.measured_seconds() + closing_s;
    let mut out = stream_results(&leg, udp, secs);
    let len = leg.phase.params.len as usize;
    let layout = leg.layout;
    let socks = std::mem::take(&mut leg.udp);
    crate::engine::task::spawn_blocking(move || leg.phase.stop())
        .await
        .ok();
    if udp && !aborted {
        exchange_reports(socks, &mut out, send, len, layout).await;
    } else if udp && send {
        for r in out.iter_mut() {
            r.udp = None;
        }
    }
    (out, error, aborted)
}

/// Wait until `leg` ends (a sender: its time or byte target; a receiver: every stream ended,
/// or its limit or stall passed), fails or is cancelled, sending an interval as `test` every
/// `interval` seconds (clamped to 0.1..60). Returns (error, aborted). Ticks at most every
/// 50 ms: it only watches, the streams' threads move the data.
async fn watch(
    leg: &mut Leg,
    test: u64,
    interval: f64,
    events: &Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<Arc<Notify>>,
) -> (Option<String>, bool) {
    let udp = leg.phase.udp();
    let tick = Duration::from_secs_f64(interval.clamp(0.1, 60.0));
    let mut next_tick = Instant::now() + tick;
    let mut last_progress = (leg.phase.progress(), Instant::now());
    let notify = Arc::new(Notify::new());
    let cancel = cancel.unwrap_or(notify);
    loop {
        let wait = next_tick
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.notified() => { return (None, true); }
            _ = leg.phase.shared.wake.notified() => {}
        }
        if let Some(e) = leg.phase.shared.error() {
            return (Some(e), false);
        }
        let el = leg.phase.elapsed();
        match leg.until {
            Until::Send { secs } => {
                if (secs > 0.0 && el >= secs) || leg.phase.shared.send_limit_reached() {
                    return (None, false);
                }
            }
            Until::Recv { limit, stall } => {
                let p = leg.phase.progress();
                if p != last_progress.0 {
                    last_progress = (p, Instant::now());
                }
                let all = leg.streams_ended(udp);
                if !all && el >= limit.as_secs_f64() {
                    let e = format!(
                        "the peer's streams did not end within {} s",
                        limit.as_secs()
                    );
                    return (Some(e), false);
                } else if !all && last_progress.1.elapsed() >= stall {
                    let e = format!("no data from the peer for {} s", stall.as_secs());
                    return (Some(e), false);
                } else if all {
                    return (None, false);
                }
            }
        }
        if Instant::now() >= next_tick {
            next_tick += tick;
            if let Some(rec) = leg.phase.sample() {
                emit_interval(events, test, rec, leg.offset);
            }
        }
    }
}

impl Leg {
    /// A receiving leg's streams all ended: the FIN seen (UDP) or the thread done at EOF (TCP).
    fn streams_ended(&self, udp: bool) -> bool {
        if udp {
            self.phase
                .streams
                .iter()
                .all(|s| s.udp_stats().map(|u| u.fin.is_some()).unwrap_or(true))
        } else {
            self.phase.streams.iter().all(|s| s.thread_done())
        }
    }
}

/// Close `leg`'s TCP sending streams as a stock client does ([`close_like_stock`]); returns
/// the seconds that took.
async fn close_senders(leg: &Leg) -> f64 {
    let socks: Vec<_> = leg
        .phase
        .streams
        .iter()
        .filter(|s| s.sender)
        .filter_map(|s| s.tcp_clone())
        .collect();
    let t = Instant::now();
    let _ = crate::engine::task::spawn_blocking(move || close_like_stock(socks, CLOSE_LIMIT)).await;
    t.elapsed().as_secs_f64()
}

/// Each stream's result over `secs` seconds: bytes (with those read before the phase), UDP
/// figures as this side counted them, trip-times latency.
fn stream_results(leg: &Leg, udp: bool, secs: f64) -> Vec<StreamResult> {
    let sums = leg.phase.local_summaries();
    let mut out = Vec::new();
    for (i, s) in leg.phase.streams.iter().enumerate() {
        let bytes = sums
            .get(i)
            .map(|x| {
                if x.local_sender {
                    x.sender.bytes
                } else {
                    x.receiver.map(|r| r.bytes).unwrap_or(0)
                }
            })
            .unwrap_or(0)
            + leg.pre.get(i).copied().unwrap_or(0);
        let udp_fig = s.udp_stats().map(|u| UdpFigures {
            bytes,
            seconds: secs,
            lost: u.lost(),
            total: u.max_seq,
            out_of_order: u.out_of_order,
            jitter_ms: u.jitter * 1000.0,
            latency_ms: u.transit.map(|t| t.to_ms().unwrap_or_default()),
        });
        out.push(StreamResult {
            id: s.id,
            local: format!(
                "{} port {}",
                crate::engine::net::ip_text(s.local.ip()),
                s.local.port()
            ),
            remote: format!(
                "{} port {}",
                crate::engine::net::ip_text(s.remote.ip()),
                s.remote.port()
            ),
            sender: s.sender,
            bytes,
            seconds: secs,
            sent_datagrams: if udp && s.sender {
                Some(s.packets_sent())
            } else {
                None
            },
            udp: udp_fig,
            sender_max_lag_ms: sums
                .get(i)
                .and_then(|x| x.udp)
                .and_then(|u| u.sender_max_lag_ms),
            sender_peak_1ms_bps: sums
                .get(i)
                .and_then(|x| x.udp)
                .and_then(|u| u.sender_peak_1ms_bps),
            latency_ms: s.trip_stats().map(|t| t.total_ms()),
            trip_drops: s.trip_stats().map(|t| t.drops),
            port_unreachable: sums
                .get(i)
                .and_then(|x| x.udp)
                .and_then(|u| u.sender_port_unreachable),
        });
    }
    out
}

/// The UDP end of a leg over its sockets `socks`: a sender sends each flow's FIN and takes
/// the server's report into `out`; a receiver answers the FINs with its own figures.
async fn exchange_reports(
    socks: Vec<UdpSocket>,
    out: &mut [StreamResult],
    send: bool,
    len: usize,
    layout: Layout,
) {
    let results = out.to_vec();
    // Every stream's exchange at once: with `-P`, each stock client thread waits for
    // its own report (10 tries, 250 ms apart), so one stream must not wait for another.
    let ex = crate::engine::task::spawn_blocking(move || {
        std::thread::scope(|sc| {
            let handles: Vec<_> = socks
                .iter()
                .zip(results.iter())
                .map(|(sock, r)| {
                    sc.spawn(move || {
                        if send {
                            fin_exchange(sock, r.sent_datagrams.unwrap_or(0), len)
                        } else {
                            if let Some(u) = r.udp {
                                answer_fins(sock, &u.to_report(), layout, len);
                            }
                            None
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect::<Vec<_>>()
        })
    })
    .await
    .unwrap_or_default();
    if send {
        for (r, rep) in out.iter_mut().zip(ex) {
            r.udp = rep.map(|x| UdpFigures::from_report(&x));
        }
    }
}

fn emit_interval(
    events: &Option<mpsc::UnboundedSender<Event>>,
    test: u64,
    mut rec: IntervalRecord,
    offset: f64,
) {
    for s in &mut rec.streams {
        s.start += offset;
        s.end += offset;
    }
    if let Some(tx) = events {
        let _ = tx.send(Event::Interval { test, record: rec });
    }
}

/// The client's end of a UDP flow: send the FIN (id = −(datagrams numbered), 64-bit form)
/// up to 10 times, 250 ms apart, and return the first server report that comes back.
fn fin_exchange(sock: &UdpSocket, sent: u64, len: usize) -> Option<ServerReport> {
    let len = len.max(wire::UDP_MIN_LEN);
    let mut fin = vec![b'0'; len];
    let id = -(sent.max(1) as i64);
    let _ = sock.set_read_timeout(Some(Duration::from_millis(250)));
    let mut buf = vec![0u8; 65536];
    for _ in 0..10 {
        let (sec, usec) = wire::wall_now();
        wire::write_udp_id(&mut fin, id, sec, usec);
        if sock.send(&fin).is_err() {
            std::thread::sleep(Duration::from_millis(250));
            continue;
        }
        let deadline = Instant::now() + Duration::from_millis(250);
        while Instant::now() < deadline {
            match sock.recv(&mut buf) {
                Ok(n) => {
                    if let Ok((r, _)) = ServerReport::parse(&buf[..n]) {
                        return Some(r);
                    }
                }
                Err(_) => break,
            }
        }
    }
    None
}

/// The server's end of a UDP flow: answer the FIN (and its repeats) with the report, until
/// the client has been quiet for 300 ms (at most 10 answers, 3 s).
fn answer_fins(sock: &UdpSocket, report: &ServerReport, layout: Layout, len: usize) {
    let reply = report.datagram(layout, &[], len);
    let _ = sock.send(&reply);
    let _ = sock.set_read_timeout(Some(Duration::from_millis(300)));
    let mut buf = vec![0u8; 65536];
    let start = Instant::now();
    let mut sent = 1;
    while sent < 10 && start.elapsed() < Duration::from_secs(3) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                if let Some((_, id)) = wire::read_udp_id(&buf[..n], false) {
                    if id < 0 {
                        let _ = sock.send(&reply);
                        sent += 1;
                    }
                }
            }
            Err(_) => break,
        }
    }
}

/// Text of the interval and summary lines as iperf 2 prints them:
/// `[  1] 0.0000-1.0000 sec  1.38 MBytes  11.5 Mbits/sec` (UDP receivers add jitter and
/// lost/total).
pub(crate) fn text_line(
    id: u32,
    start: f64,
    end: f64,
    bytes: u64,
    udp: Option<&UdpFigures>,
) -> String {
    let secs = end - start;
    let bps = if secs > 0.0 { bytes as f64 / secs } else { 0.0 };
    let mut s = format!(
        "[{id:3}] {start:.4}-{end:.4} sec  {}s  {}s/sec",
        crate::model::units::unit_format(bytes as f64, false),
        crate::model::units::unit_format(bps, true)
    );
    if let Some(u) = udp {
        s.push_str(&format!(
            "  {:6.3} ms {}/{} ({:.2}%)",
            u.jitter_ms,
            u.lost,
            u.total,
            u.lost_percent()
        ));
        if let Some(l) = &u.latency_ms {
            s.push_str(&latency_text(l, secs));
        }
        if u.out_of_order > 0 {
            s.push_str(&format!(" {} out-of-order", u.out_of_order));
        }
    }
    s.push('\n');
    s
}

/// The `--trip-times` columns as a stock iperf 2 server prints them after Lost/Total:
/// ` 0.008/0.002/0.184/0.009 ms 895 pps` (latency avg/min/max/stdev, then the datagrams
/// measured per second of `secs`); ` -/-/-/- ms 0 pps` when none arrived.
pub(crate) fn latency_text(l: &crate::engine::report::LatencyMs, secs: f64) -> String {
    let pps = if secs > 0.0 {
        l.count as f64 / secs
    } else {
        0.0
    };
    if l.count == 0 {
        format!(" -/-/-/- ms {pps:.0} pps")
    } else {
        format!(
            " {:.3}/{:.3}/{:.3}/{:.3} ms {pps:.0} pps",
            l.avg, l.min, l.max, l.stdev
        )
    }
}

/// A TCP line (`text_line`'s, ending in a newline) with the `--trip-times` columns a stock
/// 2.1/2.2 server prints for TCP: ` 1.912/0.023/68.459/4.299 ms (22162/131072)` — burst
/// latency avg/min/max/stdev in ms, then (bursts measured/bytes per burst, `bytes` ÷ count);
/// ` -/-/-/- ms (0/0)` when none completed.
pub(crate) fn with_burst_latency(
    line: &str,
    l: &crate::engine::report::LatencyMs,
    bytes: u64,
) -> String {
    let head = line.strip_suffix('\n').unwrap_or(line);
    if l.count == 0 {
        return format!("{head}  -/-/-/- ms (0/0)\n");
    }
    format!(
        "{head}  {:.3}/{:.3}/{:.3}/{:.3} ms ({}/{})\n",
        l.avg,
        l.min,
        l.max,
        l.stdev,
        l.count,
        bytes / l.count
    )
}

/// The [SUM] of the streams the board sent on (`sender`) or received on, as a stock iperf 2
/// prints it for `-P`: bytes added up, the longest stream's seconds; UDP figures added up
/// (jitter: the streams' mean, ms). None unless there are at least two such streams.
pub(crate) fn stream_sum(o: &Outcome, sender: bool) -> Option<StreamResult> {
    let v: Vec<&StreamResult> = o.streams.iter().filter(|s| s.sender == sender).collect();
    if v.len() < 2 {
        return None;
    }
    let udp: Vec<UdpFigures> = v.iter().filter_map(|s| s.udp).collect();
    let udp = (!udp.is_empty()).then(|| UdpFigures {
        bytes: udp.iter().map(|u| u.bytes).sum(),
        seconds: udp.iter().map(|u| u.seconds).fold(0.0, f64::max),
        lost: udp.iter().map(|u| u.lost).sum(),
        total: udp.iter().map(|u| u.total).sum(),
        out_of_order: udp.iter().map(|u| u.out_of_order).sum(),
        jitter_ms: udp.iter().map(|u| u.jitter_ms).sum::<f64>() / udp.len() as f64,
        latency_ms: None,
    });
    Some(StreamResult {
        id: 0,
        local: v[0].local.clone(),
        remote: v[0].remote.clone(),
        sender,
        bytes: v.iter().map(|s| s.bytes).sum(),
        seconds: v.iter().map(|s| s.seconds).fold(0.0, f64::max),
        sent_datagrams: v.iter().map(|s| s.sent_datagrams).sum::<Option<u64>>(),
        udp,
        sender_max_lag_ms: v
            .iter()
            .filter_map(|s| s.sender_max_lag_ms)
            .reduce(f64::max),
        sender_peak_1ms_bps: v
            .iter()
            .filter_map(|s| s.sender_peak_1ms_bps)
            .reduce(|a, b| a + b),
        latency_ms: None,
        trip_drops: None,
        port_unreachable: v
            .iter()
            .filter_map(|s| s.port_unreachable)
            .reduce(u64::saturating_add),
    })
}

/// Text of an outcome's summary lines (per stream; UDP senders add the server report; a
/// `[SUM]` line per direction with several streams).
pub(crate) fn text_summary(o: &Outcome) -> String {
    let mut t = String::new();
    for s in &o.streams {
        let ud = if s.sender { None } else { s.udp.as_ref() };
        let line = text_line(s.id, 0.0, s.seconds, s.bytes, ud);
        match (&s.latency_ms, ud) {
            (Some(l), None) => t.push_str(&with_burst_latency(&line, l, s.bytes)),
            _ => t.push_str(&line),
        }
        if let Some(w) = s.trip_drops.and_then(|d| d.sentence()) {
            t.push_str(&format!("[{:3}] {w}\n", s.id));
        }
        if s.sender {
            if let Some(n) = s.sent_datagrams {
                t.push_str(&format!("[{:3}] Sent {} datagrams\n", s.id, n + 1));
                match &s.udp {
                    Some(u) => {
                        t.push_str(&format!("[{:3}] Server Report:\n", s.id));
                        t.push_str(&text_line(s.id, 0.0, u.seconds, u.bytes, Some(u)));
                    }
                    None => t.push_str(&format!(
                        "[{:3}] WARNING: did not receive ack of last datagram after 10 tries.\n",
                        s.id
                    )),
                }
            }
        }
    }
    for sender in [false, true] {
        if let Some(sum) = stream_sum(o, sender) {
            let ud = if sender { None } else { sum.udp.as_ref() };
            let line = text_line(0, 0.0, sum.seconds, sum.bytes, ud);
            t.push_str(&line.replacen("[  0]", "[SUM]", 1));
        }
    }
    for n in &o.notes {
        t.push_str(&format!("note: {n}\n"));
    }
    if let Some(c) = o.rate_check.filter(|c| c.short) {
        t.push_str(&format!("{}\n", c.sentence()));
    }
    t
}

/// The rate check of a paced client's sending streams: `-b` is per stream, as in iperf 2
/// (each client thread sends at it), so the target is `rate_bps` × streams; sent = bytes × 8
/// over the longest stream time; received from the server reports when every stream has one
/// (UDP). `None` when unpaced or nothing was sent.
pub(crate) fn rate_check(
    rate_bps: u64,
    streams: &[StreamResult],
) -> Option<crate::engine::shortfall::RateCheck> {
    let send: Vec<&StreamResult> = streams.iter().filter(|s| s.sender).collect();
    if rate_bps == 0 || send.is_empty() {
        return None;
    }
    let per_second = |bytes: u64, secs: f64| {
        if secs > 0.0 {
            bytes as f64 * 8.0 / secs
        } else {
            0.0
        }
    };
    let sent = per_second(
        send.iter().map(|s| s.bytes).sum(),
        send.iter().map(|s| s.seconds).fold(0.0, f64::max),
    );
    let recv = send.iter().all(|s| s.udp.is_some()).then(|| {
        let us: Vec<&UdpFigures> = send.iter().filter_map(|s| s.udp.as_ref()).collect();
        per_second(
            us.iter().map(|u| u.bytes).sum(),
            us.iter().map(|u| u.seconds).fold(0.0, f64::max),
        )
    });
    let lag = send
        .iter()
        .filter_map(|s| s.sender_max_lag_ms)
        .reduce(f64::max);
    let peak = send
        .iter()
        .filter_map(|s| s.sender_peak_1ms_bps)
        .reduce(|a, b| a + b);
    crate::engine::shortfall::RateCheck::new(rate_bps as f64 * send.len() as f64, sent, recv)
        .map(|c| c.with_sender(lag, peak))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The new-user tryout: our `--iperf2 --trip-times` client closed its TCP stream with
    /// the server's answer unread, the kernel reset the connection, and what was still
    /// queued (1.3 MB of 24.6 MB) never reached the stock server. A server that answers,
    /// then reads only after the client is done writing, gets every byte written, and the
    /// client learns that the server closed.
    #[test]
    fn a_tcp_sender_closes_after_every_byte_reached_the_server() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            s.write_all(b"2.1 ack!").expect("answer");
            // The client fills its send buffer and closes while nothing is read here.
            std::thread::sleep(Duration::from_millis(300));
            let mut n = 0u64;
            let mut buf = vec![0u8; 65_536];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => n += k as u64,
                    Err(e) => panic!("server read after {n} bytes: {e}"),
                }
            }
            n
        });
        let mut c = std::net::TcpStream::connect(addr).expect("connect");
        c.set_nonblocking(true).expect("nonblocking");
        let chunk = vec![7u8; 65_536];
        let mut written = 0u64;
        loop {
            match c.write(&chunk) {
                Ok(k) => written += k as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        assert!(written > 65_536, "{written}");
        assert_eq!(close_like_stock(vec![c], Duration::from_secs(5)), 1);
        assert_eq!(server.join().expect("server"), written);
    }

    /// The s51 tryout: `-P 2` from our client to our server took 12 s for a 2 s test. Our
    /// server closes a test's streams together once every one has ended, and the client
    /// waited for stream 1 to close before it sent stream 2's FIN. Here the server reads
    /// stream 2 to its end before stream 1 and closes both only then: every stream must be
    /// closed by the server (the old order closed one and timed out on the other).
    #[test]
    fn parallel_tcp_senders_send_every_fin_before_waiting() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut a, _) = l.accept().expect("accept 1");
            let (mut b, _) = l.accept().expect("accept 2");
            let mut buf = [0u8; 1024];
            let mut n = [0u64; 2];
            for (i, s) in [&mut b, &mut a].into_iter().enumerate() {
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(k) => n[i] += k as u64,
                        Err(e) => panic!("server read: {e}"),
                    }
                }
            }
            n
        });
        let mut c1 = std::net::TcpStream::connect(addr).expect("connect 1");
        c1.write_all(&[1u8; 3000]).expect("write 1");
        let mut c2 = std::net::TcpStream::connect(addr).expect("connect 2");
        c2.write_all(&[2u8; 5000]).expect("write 2");
        assert_eq!(close_like_stock(vec![c1, c2], Duration::from_secs(3)), 2);
        assert_eq!(server.join().expect("server"), [5000, 3000]);
    }
}
