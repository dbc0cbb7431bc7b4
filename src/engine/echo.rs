//! The UDP echo of latency-under-load runs: one-way delays in each direction when the peer is
//! netperfd (the daemon or `netperfd peer`).
//!
//! * [`encode_request`] / [`parse_request`] / [`reply_to`] / [`parse_reply`]: the wire, pure
//!   bytes (layout in `docs/latency.md`, "UDP echo"). A request and its reply are both
//!   [`LEN`] bytes: the reply is never larger than the request (no amplification).
//! * [`Responder`]: the peer's side, one thread on a UDP port (default [`DEFAULT_PORT`]) with
//!   a fixed receive buffer; a malformed datagram or one over a source's rate limit is dropped
//!   without an answer.
//! * [`EchoProber`]: the board's side, one request per interval on an absolute clock; it gives
//!   up after [`ANSWER_WINDOW`] without any reply (a stock peer has no echo).
//!
//! Timestamps are CLOCK_MONOTONIC nanoseconds of the host that takes them
//! ([`crate::engine::sys::mono_ns`]): never stepped (CLOCK_REALTIME jumps when NTP or a user
//! sets the time, and a step in the middle of a run would show up as a delay). The two hosts'
//! clocks have an unknown offset, so a raw one-way delay means nothing alone; the results use
//! each direction's increase over its idle-phase minimum (`crate::results::owd`).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Default UDP port of the echo responder (daemon `echo_port`, `netperfd peer --echo-port`).
pub(crate) const DEFAULT_PORT: u16 = 5291;
/// Bytes of a request and of a reply.
pub(crate) const LEN: usize = 40;
/// First four bytes of every echo datagram.
pub(crate) const MAGIC: [u8; 4] = *b"NPEo";
/// Wire version.
pub(crate) const VERSION: u8 = 1;
const KIND_REQUEST: u8 = 1;
const KIND_REPLY: u8 = 2;
/// How long the prober waits for a first reply before it stops sending (peer has no echo).
pub(crate) const ANSWER_WINDOW: Duration = Duration::from_secs(1);
/// Requests per second one source address may have answered (a 1 ms probe interval is 1000/s).
pub(crate) const RATE_PER_SOURCE: f64 = 1100.0;
/// Burst of a source's token bucket, datagrams.
pub(crate) const BURST_PER_SOURCE: f64 = 100.0;
/// Source addresses the responder keeps a bucket for; a new source beyond this takes the
/// bucket of the source heard from least recently (so 300 spoofed sources cannot fill the
/// table and leave a new prober unanswered; a live prober, heard every few ms, keeps its own).
pub(crate) const MAX_SOURCES: usize = 256;

/// A request as it travels: sequence number and the sender's send time T1 (ns, its
/// CLOCK_MONOTONIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    pub seq: u64,
    pub t1: u64,
}

/// A reply: the request's fields, the peer's receive time T2 and send time T3 (ns, the
/// peer's CLOCK_MONOTONIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub seq: u64,
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
}

fn header(kind: u8) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[0..4].copy_from_slice(&MAGIC);
    b[4] = VERSION;
    b[5] = kind;
    b
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(w)
}

/// The 40 bytes of a request: magic, version, kind 1, two zero bytes, seq, T1, and 16 zero
/// bytes where the reply puts T2 and T3 (so the reply needs no more room than the request).
pub(crate) fn encode_request(r: &Request) -> [u8; LEN] {
    let mut b = header(KIND_REQUEST);
    b[8..16].copy_from_slice(&r.seq.to_be_bytes());
    b[16..24].copy_from_slice(&r.t1.to_be_bytes());
    b
}

/// A request from a received datagram; `None` unless it is exactly [`LEN`] bytes with our
/// magic, version, kind 1 and zeros where they belong.
pub(crate) fn parse_request(b: &[u8]) -> Option<Request> {
    if b.len() != LEN
        || b[0..4] != MAGIC
        || b[4] != VERSION
        || b[5] != KIND_REQUEST
        || b[6..8] != [0, 0]
        || b[24..LEN].iter().any(|&x| x != 0)
    {
        return None;
    }
    Some(Request {
        seq: u64_at(b, 8),
        t1: u64_at(b, 16),
    })
}

/// The reply to `r` (received at `t2`, sent at `t3`, ns), [`LEN`] bytes like the request.
pub(crate) fn reply_to(r: &Request, t2: u64, t3: u64) -> [u8; LEN] {
    let mut b = header(KIND_REPLY);
    b[8..16].copy_from_slice(&r.seq.to_be_bytes());
    b[16..24].copy_from_slice(&r.t1.to_be_bytes());
    b[24..32].copy_from_slice(&t2.to_be_bytes());
    b[32..40].copy_from_slice(&t3.to_be_bytes());
    b
}

/// A reply from a received datagram; `None` unless it is exactly [`LEN`] bytes with our
/// magic, version and kind 2.
pub(crate) fn parse_reply(b: &[u8]) -> Option<Reply> {
    if b.len() != LEN
        || b[0..4] != MAGIC
        || b[4] != VERSION
        || b[5] != KIND_REPLY
        || b[6..8] != [0, 0]
    {
        return None;
    }
    Some(Reply {
        seq: u64_at(b, 8),
        t1: u64_at(b, 16),
        t2: u64_at(b, 24),
        t3: u64_at(b, 32),
    })
}

/// Per-source token buckets ([`RATE_PER_SOURCE`], [`BURST_PER_SOURCE`]), at most
/// [`MAX_SOURCES`] of them.
#[derive(Debug, Default)]
pub(crate) struct RateLimit {
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl RateLimit {
    /// Whether a datagram from `src` at `now` may be answered (takes one token).
    pub(crate) fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        if !self.buckets.contains_key(&src) && self.buckets.len() >= MAX_SOURCES {
            self.buckets
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < Duration::from_secs(1));
            if self.buckets.len() >= MAX_SOURCES {
                // Evict the least recently heard source (a linear scan of ≤ 256 entries).
                let oldest = self
                    .buckets
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(ip, _)| *ip);
                if let Some(ip) = oldest {
                    self.buckets.remove(&ip);
                }
            }
        }
        let (tokens, at) = self.buckets.entry(src).or_insert((BURST_PER_SOURCE, now));
        let dt = now.saturating_duration_since(*at).as_secs_f64();
        *tokens = (*tokens + dt * RATE_PER_SOURCE).min(BURST_PER_SOURCE);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Counters of a running responder.
#[derive(Debug, Default)]
pub(crate) struct ResponderCounts {
    /// Requests answered.
    pub answered: AtomicU64,
    /// Datagrams dropped as malformed (wrong size, magic, version, kind or padding).
    pub malformed: AtomicU64,
    /// Requests dropped by the per-source rate limit.
    pub limited: AtomicU64,
}

/// A running echo responder; dropping it (or [`Responder::stop`]) ends its thread.
#[derive(Debug)]
pub(crate) struct Responder {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Read by the tests (through [`Responder::counts`]).
    #[cfg_attr(not(test), allow(dead_code))]
    counts: Arc<ResponderCounts>,
    /// Joined by the tests (through [`Responder::stop`]); dropping it detaches the thread.
    #[cfg_attr(not(test), allow(dead_code))]
    thread: Option<JoinHandle<()>>,
}

fn bind_udp(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, None)?;
    if addr.is_ipv6() {
        // [::] serves IPv4 too (mapped addresses).
        let _ = s.set_only_v6(false);
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

impl Responder {
    /// Listen on UDP `port` of every address (`[::]`, IPv4 too; `0.0.0.0` where the host has
    /// no IPv6) and answer requests on a thread. Errors: the port cannot be bound.
    pub(crate) fn start(port: u16) -> std::io::Result<Responder> {
        let sock = bind_udp(SocketAddr::from(([0u16; 8], port)))
            .or_else(|_| bind_udp(SocketAddr::from(([0u8; 4], port))))?;
        Responder::on(sock)
    }

    /// Answer requests arriving on `sock` (already bound).
    pub(crate) fn on(sock: UdpSocket) -> std::io::Result<Responder> {
        // Idle, the thread sleeps in recv: `stop` wakes it with an empty datagram to its own
        // port ([`wake`]); the timeout only bounds the wait if that datagram is filtered.
        // (With 200 ms it woke 5 times a second on an idle board.)
        sock.set_read_timeout(Some(IDLE_WAIT))?;
        let local = sock.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(ResponderCounts::default());
        let (st, c) = (stop.clone(), counts.clone());
        let thread = std::thread::Builder::new()
            .name("udp-echo".into())
            .spawn(move || serve(&sock, &st, &c))?;
        Ok(Responder {
            local,
            stop,
            counts,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    #[cfg(test)]
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Its counters.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> &ResponderCounts {
        &self.counts
    }

    /// Stop answering and wait for the thread (woken at once by an empty datagram; at most
    /// [`IDLE_WAIT`] when a firewall drops that).
    #[cfg(test)]
    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        wake(self.local);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            wake(self.local);
        }
    }
}

/// The longest a UDP server thread sleeps in `recv` before it looks at its stop flag, when
/// no datagram wakes it.
pub(crate) const IDLE_WAIT: Duration = Duration::from_secs(5);

/// Wake a thread blocked in `recv` on a UDP socket bound to `local`: an empty datagram to it
/// (to loopback when it is bound to every address). Best effort.
pub(crate) fn wake(local: SocketAddr) {
    let to = match local.ip() {
        std::net::IpAddr::V4(a) if a.is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, local.port()))
        }
        std::net::IpAddr::V6(a) if a.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, local.port()))
        }
        _ => local,
    };
    let from: SocketAddr = if to.is_ipv4() {
        SocketAddr::from(([0u8; 4], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    if let Ok(s) = UdpSocket::bind(from) {
        let _ = s.send_to(&[], to);
    }
}

fn serve(sock: &UdpSocket, stop: &AtomicBool, c: &ResponderCounts) {
    // One byte more than a request: a longer datagram is cut to LEN + 1 and fails the size check.
    let mut buf = [0u8; LEN + 1];
    let mut limit = RateLimit::default();
    while !stop.load(Ordering::SeqCst) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            // E.g. ECONNREFUSED from an earlier reply's ICMP error: keep serving.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        if stop.load(Ordering::SeqCst) {
            break; // the wake-up datagram of `stop`
        }
        let t2 = crate::engine::sys::mono_ns();
        let Some(req) = parse_request(&buf[..n]) else {
            c.malformed.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        if !limit.allow(from.ip(), Instant::now()) {
            c.limited.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let reply = reply_to(&req, t2, crate::engine::sys::mono_ns());
        if sock.send_to(&reply, from).is_ok() {
            c.answered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One answered echo probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EchoSample {
    pub seq: u64,
    /// When it was sent, seconds since the prober's `t0`.
    pub t: f64,
    /// T2 − T1, ns: the way up (board → peer) plus the unknown clock offset.
    pub up_ns: i64,
    /// T4 − T3, ns: the way down (peer → board) minus the unknown clock offset.
    pub down_ns: i64,
    /// (T4 − T1) − (T3 − T2), ms: the round trip without the peer's turnaround (= up + down).
    pub rtt_ms: f64,
}

/// What an [`EchoProber`] did, when it stopped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EchoStats {
    /// The peer's echo port.
    pub port: u16,
    /// Requests sent.
    pub sent: u64,
    /// Answered requests (each once), any order.
    pub samples: Vec<EchoSample>,
    /// True when no reply came within [`ANSWER_WINDOW`] and the prober stopped sending.
    pub gave_up: bool,
    /// Replies that came after the timeout, duplicates, or replies to no request of ours.
    pub stray: u64,
}

/// A running echo prober; [`EchoProber::stop`] ends it.
#[derive(Debug)]
pub(crate) struct EchoProber {
    stop: Arc<AtomicBool>,
    sender_done: Arc<AtomicBool>,
    sender: Option<JoinHandle<(u64, bool)>>,
    receiver: Option<JoinHandle<(Vec<EchoSample>, u64)>>,
    port: u16,
}

/// Start echo probes to `peer` (its echo port) every `interval` on an absolute clock
/// (request k leaves at start + k × interval), bound to `bind_dev` when given. A reply later
/// than `timeout` after its request is not used. `t0` is the origin of [`EchoSample::t`].
/// Errors: the socket cannot be opened, bound to the port, or connected.
pub(crate) fn start_prober(
    peer: SocketAddr,
    interval: Duration,
    timeout: Duration,
    bind_dev: Option<&str>,
    t0: Instant,
) -> std::io::Result<EchoProber> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(peer), Type::DGRAM, None)?;
    if let Some(d) = bind_dev {
        s.bind_device(Some(d.as_bytes()))?;
    }
    s.connect(&peer.into())?;
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    let tx_sock: UdpSocket = s.into();
    let rx_sock = tx_sock.try_clone()?;
    // t0 on the monotonic clock in ns: T1 − t0_ns is the send time on the run's axis.
    let t0_ns = crate::engine::sys::mono_ns().saturating_sub(t0.elapsed().as_nanos() as u64);
    let flags = EchoFlags {
        stop: Arc::new(AtomicBool::new(false)),
        sent: Arc::new(AtomicU64::new(0)),
        answered: Arc::new(AtomicBool::new(false)),
        sender_done: Arc::new(AtomicBool::new(false)),
    };
    let interval = interval.max(Duration::from_millis(1));
    let f = flags.clone();
    let sender = std::thread::Builder::new()
        .name("latency-echo-tx".into())
        .spawn(move || send_echoes(&tx_sock, interval, &f))?;
    let f = flags.clone();
    let receiver = std::thread::Builder::new()
        .name("latency-echo-rx".into())
        .spawn(move || receive_echoes(&rx_sock, &f, timeout, t0_ns))?;
    Ok(EchoProber {
        stop: flags.stop,
        sender_done: flags.sender_done,
        sender: Some(sender),
        receiver: Some(receiver),
        port: peer.port(),
    })
}

/// What an echo prober's two threads share.
#[derive(Clone)]
struct EchoFlags {
    /// Set to stop sending (then receiving, once the last replies are in).
    stop: Arc<AtomicBool>,
    /// Requests sent (each counted before it leaves).
    sent: Arc<AtomicU64>,
    /// A reply came: the sender goes on past [`ANSWER_WINDOW`].
    answered: Arc<AtomicBool>,
    /// The sender ended.
    sender_done: Arc<AtomicBool>,
}

/// The sending thread: request k leaves at start + k × `interval` (slots missed while not
/// scheduled are skipped), until stopped or no reply came within [`ANSWER_WINDOW`]. Returns
/// (requests sent, whether it gave up for want of a reply).
fn send_echoes(tx_sock: &UdpSocket, interval: Duration, f: &EchoFlags) -> (u64, bool) {
    let _ = crate::engine::sys::fine_timer_slack();
    let start = Instant::now();
    let mut k: u64 = 0;
    let mut seq: u64 = 0;
    let mut gave_up = false;
    while !f.stop.load(Ordering::SeqCst) {
        let due = start + interval * (k as u32);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let late = Instant::now().saturating_duration_since(due);
        if late > interval {
            k += (late.as_nanos() / interval.as_nanos()) as u64;
            continue;
        }
        if f.stop.load(Ordering::SeqCst) {
            break;
        }
        if !f.answered.load(Ordering::SeqCst) && start.elapsed() >= ANSWER_WINDOW {
            gave_up = true;
            break;
        }
        let req = Request {
            seq,
            t1: crate::engine::sys::mono_ns(),
        };
        seq += 1;
        // Counted before it leaves: its reply may come before the next line runs.
        f.sent.store(seq, Ordering::SeqCst);
        // A failed send (e.g. ECONNREFUSED after the peer's port unreachable) is a
        // request without a reply.
        let _ = tx_sock.send(&encode_request(&req));
        k += 1;
    }
    f.sender_done.store(true, Ordering::SeqCst);
    (seq, gave_up)
}

/// The receiving thread: each fresh reply (to a request sent, within `timeout`, not seen
/// before) becomes a sample on the run's axis (`t0_ns`: its origin on the monotonic clock);
/// after the stop it waits for the last replies (at most `timeout`). Returns the samples and
/// the count of stray datagrams.
fn receive_echoes(
    rx_sock: &UdpSocket,
    f: &EchoFlags,
    timeout: Duration,
    t0_ns: u64,
) -> (Vec<EchoSample>, u64) {
    let timeout_ns = timeout.as_nanos() as u64;
    let mut buf = [0u8; LEN + 1];
    let mut samples = Vec::new();
    let mut seen = HashSet::new();
    let mut stray = 0u64;
    let mut stop_seen: Option<Instant> = None;
    loop {
        if f.stop.load(Ordering::SeqCst) && f.sender_done.load(Ordering::SeqCst) {
            let since = *stop_seen.get_or_insert_with(Instant::now);
            if since.elapsed() >= timeout || seen.len() as u64 >= f.sent.load(Ordering::SeqCst) {
                break;
            }
        }
        let n = match rx_sock.recv(&mut buf) {
            Ok(n) => n,
            Err(_) => continue,
        };
        let t4 = crate::engine::sys::mono_ns();
        let Some(r) = parse_reply(&buf[..n]) else {
            stray += 1;
            continue;
        };
        let fresh = r.seq < f.sent.load(Ordering::SeqCst)
            && r.t1 <= t4
            && t4 - r.t1 <= timeout_ns
            && r.t3 >= r.t2
            && seen.insert(r.seq);
        if !fresh {
            stray += 1;
            continue;
        }
        f.answered.store(true, Ordering::SeqCst);
        let turn = r.t3 - r.t2;
        let rtt_ns = (t4 - r.t1).saturating_sub(turn);
        samples.push(EchoSample {
            seq: r.seq,
            t: r.t1.saturating_sub(t0_ns) as f64 / 1e9,
            up_ns: r.t2.wrapping_sub(r.t1) as i64,
            down_ns: t4.wrapping_sub(r.t3) as i64,
            rtt_ms: rtt_ns as f64 / 1e6,
        });
    }
    (samples, stray)
}

impl EchoProber {
    /// Stop sending, wait for the last replies (at most the timeout), return what it did.
    /// Blocking: call from a blocking context.
    pub(crate) fn stop(mut self) -> EchoStats {
        self.stop.store(true, Ordering::SeqCst);
        let mut st = EchoStats {
            port: self.port,
            ..Default::default()
        };
        if let Some(h) = self.sender.take() {
            if let Ok((sent, gave_up)) = h.join() {
                st.sent = sent;
                st.gave_up = gave_up;
            }
        }
        // A sender that panicked never said so; the receiver must still end.
        self.sender_done.store(true, Ordering::SeqCst);
        if let Some(h) = self.receiver.take() {
            if let Ok((samples, stray)) = h.join() {
                st.samples = samples;
                st.stray = stray;
            }
        }
        st
    }
}

impl Drop for EchoProber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_reply_round_trip_the_wire() {
        let req = Request {
            seq: 0x0102_0304_0506_0708,
            t1: 123_456_789_000,
        };
        let b = encode_request(&req);
        assert_eq!(&b[0..4], b"NPEo");
        assert_eq!((b[4], b[5]), (1, 1));
        assert_eq!(b[8..16], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(b[24..].iter().all(|&x| x == 0));
        assert_eq!(parse_request(&b), Some(req));
        let r = reply_to(&req, 5_000, 5_250);
        assert_eq!(
            r.len(),
            b.len(),
            "the reply is never larger than the request"
        );
        assert_eq!(
            parse_reply(&r),
            Some(Reply {
                seq: req.seq,
                t1: req.t1,
                t2: 5_000,
                t3: 5_250
            })
        );
        // A reply is not a request (no echo loops between two responders) and vice versa.
        assert_eq!(parse_request(&r), None);
        assert_eq!(parse_reply(&b), None);
    }

    #[test]
    fn malformed_requests_are_refused() {
        let good = encode_request(&Request { seq: 7, t1: 9 });
        assert!(parse_request(&good).is_some());
        // Too short, too long, empty.
        assert_eq!(parse_request(&good[..LEN - 1]), None);
        let mut long = good.to_vec();
        long.push(0);
        assert_eq!(parse_request(&long), None);
        assert_eq!(parse_request(&[]), None);
        // Each header byte and the padding changed in turn.
        for i in (0..8).chain(24..LEN) {
            let mut b = good;
            b[i] ^= 0x55;
            assert_eq!(parse_request(&b), None, "byte {i} changed");
        }
    }

    #[test]
    fn rate_limit_per_source() {
        let mut l = RateLimit::default();
        let now = Instant::now();
        let a: IpAddr = "192.0.2.9".parse().unwrap();
        let b: IpAddr = "192.0.2.10".parse().unwrap();
        let ok = (0..1000).filter(|_| l.allow(a, now)).count();
        assert_eq!(ok, BURST_PER_SOURCE as usize);
        // Another source has its own bucket; the first refills with time.
        assert!(l.allow(b, now));
        assert!(l.allow(a, now + Duration::from_millis(10)));
        // No more than MAX_SOURCES buckets while all are fresh.
        for i in 0..(MAX_SOURCES as u32 + 10) {
            l.allow(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)), now);
        }
        assert!(l.buckets.len() <= MAX_SOURCES);
    }

    /// Issue 21: 300 spoofed sources used to fill the 256-source table, and a new prober got
    /// no answer until one bucket had been idle for 1 s.
    #[test]
    fn spoofed_sources_cannot_lock_out_a_new_or_a_live_prober() {
        let mut l = RateLimit::default();
        let t0 = Instant::now();
        let live: IpAddr = "192.0.2.77".parse().unwrap();
        assert!(l.allow(live, t0));
        let spoof = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0xc633_6400 + i));
        let mut answered_live = 0;
        // 300 spoofed sources, each heard once per round, 3 rounds within 300 ms; the live
        // prober sends every 1 ms in between.
        for round in 0..3u32 {
            for i in 0..300u32 {
                let now = t0 + Duration::from_micros((round * 300 + i) as u64 * 333);
                l.allow(spoof(i), now);
                if i % 3 == 0 && l.allow(live, now) {
                    answered_live += 1;
                }
            }
        }
        assert_eq!(
            answered_live, 300,
            "the live prober was answered every time"
        );
        assert_eq!(l.buckets.len(), MAX_SOURCES);
        // A new prober, 0.3 s into the flood (no bucket idle for 1 s): answered at once.
        let newcomer: IpAddr = "192.0.2.200".parse().unwrap();
        let now = t0 + Duration::from_millis(301);
        assert!(l.allow(newcomer, now));
        assert!(l.buckets.contains_key(&newcomer));
        assert!(l.buckets.contains_key(&live));
    }

    #[test]
    fn responder_answers_and_drops_malformed() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let resp = Responder::on(sock).unwrap();
        let addr = resp.local_addr();
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        c.connect(addr).unwrap();
        // Garbage, a too-long datagram and a reply-shaped one: no answer to any.
        c.send(b"hello").unwrap();
        c.send(&[0xffu8; 1500]).unwrap();
        c.send(&reply_to(&Request { seq: 1, t1: 1 }, 2, 3)).unwrap();
        let req = Request {
            seq: 42,
            t1: crate::engine::sys::mono_ns(),
        };
        c.send(&encode_request(&req)).unwrap();
        let mut buf = [0u8; 2048];
        let n = c.recv(&mut buf).unwrap();
        assert_eq!(n, LEN);
        let r = parse_reply(&buf[..n]).unwrap();
        assert_eq!((r.seq, r.t1), (42, req.t1));
        assert!(r.t2 >= req.t1 && r.t3 >= r.t2, "{r:?}");
        // Only the one good request was answered.
        assert!(c.recv(&mut buf).is_err());
        assert_eq!(resp.counts().answered.load(Ordering::Relaxed), 1);
        assert_eq!(resp.counts().malformed.load(Ordering::Relaxed), 3);
        resp.stop();
    }

    #[test]
    fn prober_measures_loopback_and_gives_up_without_a_responder() {
        let resp = Responder::on(UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
        let t0 = Instant::now();
        let p = start_prober(
            resp.local_addr(),
            Duration::from_millis(10),
            Duration::from_secs(1),
            None,
            t0,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let st = p.stop();
        assert!(!st.gave_up);
        assert!(st.sent >= 15, "sent {}", st.sent);
        assert_eq!(st.samples.len() as u64, st.sent);
        for s in &st.samples {
            // One host, one clock: each way is a real delay, small and not negative.
            assert!((0..50_000_000).contains(&s.up_ns), "{s:?}");
            assert!((0..50_000_000).contains(&s.down_ns), "{s:?}");
            let sum = (s.up_ns + s.down_ns) as f64 / 1e6;
            assert!((sum - s.rtt_ms).abs() < 1e-6, "{s:?}");
            assert!((0.0..0.4).contains(&s.t), "{s:?}");
        }
        resp.stop();
        // Nobody answers on this port: it stops sending after the answer window.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let p = start_prober(
            silent.local_addr().unwrap(),
            Duration::from_millis(10),
            Duration::from_millis(200),
            None,
            Instant::now(),
        )
        .unwrap();
        std::thread::sleep(ANSWER_WINDOW + Duration::from_millis(300));
        let st = p.stop();
        assert!(st.gave_up);
        assert!(st.samples.is_empty());
        assert!((50..=101).contains(&st.sent), "sent {}", st.sent);
    }
}
