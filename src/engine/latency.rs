//! The latency prober of a latency-under-load run: ICMP echo requests to the peer on an
//! absolute 10 ms clock (no drift: probe k leaves at start + k × interval), replies matched by
//! sequence number, a probe without a reply within [`ProbeSpec::timeout`] counted as lost.
//!
//! The socket is an unprivileged ICMP "ping socket" (`SOCK_DGRAM` + `IPPROTO_ICMP[V6]`: the
//! kernel fills the identifier and checksum and hands back only our replies) when
//! `net.ipv4.ping_group_range` allows it, else a raw ICMP socket (needs CAP_NET_RAW; we fill
//! the identifier and the IPv4 checksum, RFC 792 / RFC 1071, and skip the IPv4 header on
//! receive; ICMPv6 raw sockets get their checksum from the kernel, RFC 3542 §3.1). The method
//! is in `docs/latency.md`. All safe Rust (the syscalls stay in engine/sys): socket2 opens the socket, std's `UdpSocket`
//! sends and receives on it.
//!
//! Two threads per prober: the sender (sleeps to each deadline with 1 ns timer slack and
//! records how late it woke) and the receiver. Not for: the load (the iperf3 client does it)
//! or statistics (see `crate::results::latency`).

use socket2::{Domain, Protocol, Socket, Type};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Bytes of our payload after the 8-byte ICMP header: a magic word (4), the 64-bit sequence
/// number (8) and 4 bytes of padding; 24 bytes of ICMP, 52 bytes of IPv4 packet per probe.
pub(crate) const PAYLOAD_LEN: usize = 16;
const MAGIC: [u8; 4] = *b"NPLt";
/// Nice value the two probe threads ask for (as the UDP pacer's sender does): a thread that
/// needs ~1 % of a core must not wait behind busy loops for a scheduler slice before it sends
/// or timestamps a reply. Needs CAP_SYS_NICE; refused = the threads stay at nice 0.
pub(crate) const PROBE_NICE: i32 = -10;

/// Give the calling thread [`PROBE_NICE`]; false when refused.
fn boost() -> bool {
    crate::engine::sys::set_thread_nice(crate::engine::sys::gettid(), PROBE_NICE)
}

/// What to probe and how often.
#[derive(Debug, Clone)]
pub(crate) struct ProbeSpec {
    /// The peer's address (ICMP answered by its kernel).
    pub target: IpAddr,
    /// Time between probes (default 10 ms).
    pub interval: Duration,
    /// A probe without a reply after this long is lost (default 1 s). The board port the
    /// probes leave from is the [`EchoSocket`]'s (bound when opened).
    pub timeout: Duration,
}

/// One probe's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Probe {
    /// Sequence number, from 0.
    pub seq: u64,
    /// When it was sent, seconds since the prober's `t0`.
    pub t: f64,
    /// Round-trip time in ms; `None` = lost (no reply within the timeout).
    pub rtt_ms: Option<f64>,
}

/// What the prober did, when it stopped.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct ProberStats {
    /// Probes sent.
    pub sent: u64,
    /// Slots skipped because the sender woke more than one interval late (not sent, not lost).
    pub skipped: u64,
    /// How late the sender woke after each deadline, µs (one entry per probe sent).
    #[serde(skip)]
    pub lateness_us: Vec<f64>,
    /// Replies that came after their probe had been counted lost.
    pub late_replies: u64,
    /// CPU time of the two probe threads (user + system), µs.
    pub cpu_us: u64,
    /// "ping socket" or "raw socket".
    pub socket: &'static str,
    /// Whether both probe threads run at [`PROBE_NICE`].
    pub boosted: bool,
}

/// An open ICMP echo socket.
pub(crate) struct EchoSocket {
    sock: UdpSocket,
    raw: bool,
    v6: bool,
    ident: u16,
}

impl EchoSocket {
    /// Open a ping socket for `target`'s family (raw socket when ping sockets are not
    /// allowed), bound to `bind_dev` when given. Errors: neither socket could be opened
    /// (no CAP_NET_RAW and ping_group_range excludes us), or the port does not exist.
    pub(crate) fn open(target: IpAddr, bind_dev: Option<&str>) -> std::io::Result<EchoSocket> {
        let v6 = target.is_ipv6();
        let (domain, proto) = if v6 {
            (Domain::IPV6, Protocol::ICMPV6)
        } else {
            (Domain::IPV4, Protocol::ICMPV4)
        };
        let (s, raw) = match Socket::new(domain, Type::DGRAM, Some(proto)) {
            Ok(s) => (s, false),
            Err(dgram) => match Socket::new(domain, Type::RAW, Some(proto)) {
                Ok(s) => (s, true),
                Err(rawe) => {
                    return Err(std::io::Error::new(
                        rawe.kind(),
                        format!(
                            "cannot open an ICMP socket: ping socket: {dgram}; raw socket: {rawe} \
                             (allow ping sockets with sysctl net.ipv4.ping_group_range or give CAP_NET_RAW)"
                        ),
                    ))
                }
            },
        };
        if let Some(d) = bind_dev {
            s.bind_device(Some(d.as_bytes())).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot bind to port '{d}': {e}"))
            })?;
        }
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
        let ident = (std::process::id() as u16) ^ 0x4e50 ^ (next_prober() as u16).wrapping_mul(7);
        Ok(EchoSocket {
            sock: s.into(),
            raw,
            v6,
            ident,
        })
    }

    /// The socket, to send echo requests to and receive replies from (read timeout 20 ms).
    pub(crate) fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// True for a raw ICMP socket (IPv4 replies start with the IP header; the identifier is
    /// ours to fill and check), false for a ping socket.
    pub(crate) fn is_raw(&self) -> bool {
        self.raw
    }

    /// The identifier our echo requests carry (a ping socket replaces it with its own).
    pub(crate) fn ident(&self) -> u16 {
        self.ident
    }

    /// "ping socket" or "raw socket".
    pub(crate) fn kind(&self) -> &'static str {
        if self.raw {
            "raw socket"
        } else {
            "ping socket"
        }
    }
}

fn next_prober() -> u32 {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The Internet checksum (RFC 1071) of `b`.
pub(crate) fn inet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in b.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        sum += w as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request: type 8 (ICMPv4) or 128 (ICMPv6), code 0, identifier, 16-bit sequence,
/// then our payload with the 64-bit sequence. The checksum is filled for ICMPv4 (a ping
/// socket overwrites it and the identifier anyway).
pub(crate) fn echo_request(v6: bool, ident: u16, seq: u64) -> [u8; 8 + PAYLOAD_LEN] {
    let mut p = [0u8; 8 + PAYLOAD_LEN];
    p[0] = if v6 { 128 } else { 8 };
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
    p[8..12].copy_from_slice(&MAGIC);
    p[12..20].copy_from_slice(&seq.to_be_bytes());
    if !v6 {
        let c = inet_checksum(&p);
        p[2..4].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// The 64-bit sequence of an echo reply in `buf` as received, or `None` when it is not a
/// reply to us. `raw_v4`: the buffer starts with the IPv4 header; `ident`: checked only on raw
/// sockets (a ping socket gets only its own replies).
pub(crate) fn parse_reply(buf: &[u8], v6: bool, raw: bool, ident: u16) -> Option<u64> {
    let icmp = if raw && !v6 {
        let ihl = (*buf.first()? & 0x0f) as usize * 4;
        if ihl < 20 {
            return None;
        }
        buf.get(ihl..)?
    } else {
        buf
    };
    if icmp.len() < 8 + 12 {
        return None;
    }
    let reply = if v6 { 129 } else { 0 };
    if icmp[0] != reply || icmp[1] != 0 {
        return None;
    }
    if raw && u16::from_be_bytes([icmp[4], icmp[5]]) != ident {
        return None;
    }
    if icmp[8..12] != MAGIC {
        return None;
    }
    let seq = u64::from_be_bytes(icmp[12..20].try_into().ok()?);
    (seq as u16 == u16::from_be_bytes([icmp[6], icmp[7]])).then_some(seq)
}

/// CPU time (user + system) of the calling thread, µs.
pub(crate) fn thread_cpu_us() -> u64 {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => {
            let tv =
                |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64;
            tv(u.user_time()) + tv(u.system_time())
        }
        Err(_) => 0,
    }
}

struct Shared {
    /// Sent and not yet answered or lost: seq → (send instant, seconds since t0).
    outstanding: Mutex<BTreeMap<u64, (Instant, f64)>>,
    stop: AtomicBool,
    sender_done: AtomicBool,
}

/// What the sender thread returns: probes sent, slots skipped, lateness per probe (µs), CPU µs,
/// whether it got [`PROBE_NICE`].
type SenderEnd = (u64, u64, Vec<f64>, u64, bool);

/// A running prober; [`Prober::stop`] ends it.
pub(crate) struct Prober {
    shared: Arc<Shared>,
    sender: Option<JoinHandle<SenderEnd>>,
    receiver: Option<JoinHandle<(u64, u64, bool)>>,
    socket: &'static str,
}

/// Start probing: one [`Probe`] per probe sent goes to `tx` (replies as they come, losses
/// after the timeout). `t0` is the time origin of [`Probe::t`]; the first probe leaves at once.
/// Errors: the socket cannot be cloned or a thread cannot be started.
pub(crate) fn start(
    spec: &ProbeSpec,
    sock: EchoSocket,
    t0: Instant,
    tx: mpsc::UnboundedSender<Probe>,
) -> std::io::Result<Prober> {
    let shared = Arc::new(Shared {
        outstanding: Mutex::new(BTreeMap::new()),
        stop: AtomicBool::new(false),
        sender_done: AtomicBool::new(false),
    });
    let kind = sock.kind();
    let rx_sock = sock.sock.try_clone()?;
    let dest = SocketAddr::new(spec.target, 0);
    let (v6, raw, ident) = (sock.v6, sock.raw, sock.ident);
    let interval = spec.interval.max(Duration::from_millis(1));
    let timeout = spec.timeout;
    let sh = shared.clone();
    let sender = std::thread::Builder::new()
        .name("latency-probe-tx".into())
        .spawn(move || send_probes(&sh, &sock, dest, interval, t0))?;
    let sh = shared.clone();
    let receiver = std::thread::Builder::new()
        .name("latency-probe-rx".into())
        .spawn(move || {
            let from = Replies {
                sock: rx_sock,
                dest,
                v6,
                raw,
                ident,
            };
            from.receive(&sh, timeout, &tx)
        })?;
    Ok(Prober {
        shared,
        sender: Some(sender),
        receiver: Some(receiver),
        socket: kind,
    })
}

/// The sending thread: an echo request to `dest` every `interval` on a fixed schedule (slots
/// missed while not scheduled are skipped, not sent late), each noted as outstanding with
/// its time since `t0`, until stopped. Returns (probes sent, slots skipped, each probe's
/// lateness in µs, the thread's CPU µs, whether its priority was raised).
fn send_probes(
    sh: &Shared,
    sock: &EchoSocket,
    dest: SocketAddr,
    interval: Duration,
    t0: Instant,
) -> SenderEnd {
    let (v6, ident) = (sock.v6, sock.ident);
    let _ = crate::engine::sys::fine_timer_slack();
    let boosted = boost();
    let start = Instant::now();
    let mut k: u64 = 0;
    let mut seq: u64 = 0;
    let mut skipped = 0u64;
    let mut late = Vec::new();
    while !sh.stop.load(Ordering::SeqCst) {
        let due = start + Duration::from_nanos(interval.as_nanos() as u64 * k);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let woke = Instant::now();
        let lateness = woke.saturating_duration_since(due);
        if lateness > interval {
            // Slots missed while we were not scheduled: skip to the next future slot.
            let missed = (lateness.as_nanos() / interval.as_nanos()) as u64;
            skipped += missed;
            k += missed;
            continue;
        }
        if sh.stop.load(Ordering::SeqCst) {
            break;
        }
        let pkt = echo_request(v6, ident, seq);
        let at = woke.duration_since(t0).as_secs_f64();
        if let Ok(mut o) = sh.outstanding.lock() {
            o.insert(seq, (Instant::now(), at));
        }
        if sock.sock.send_to(&pkt, dest).is_err() {
            // Unreachable / no route: the probe is lost (the receiver times it out).
        }
        late.push(lateness.as_secs_f64() * 1e6);
        seq += 1;
        k += 1;
    }
    sh.sender_done.store(true, Ordering::SeqCst);
    (seq, skipped, late, thread_cpu_us(), boosted)
}

/// Where the echo replies come from: the ping socket (a clone of the sender's), the target
/// `dest`, and how to read a reply (family, raw socket, our identifier).
struct Replies {
    sock: UdpSocket,
    dest: SocketAddr,
    v6: bool,
    raw: bool,
    ident: u16,
}

impl Replies {
    /// The receiving thread: each reply to an outstanding probe goes to `tx` with its RTT,
    /// probes without a reply after `timeout` go as lost, until the sender is done and
    /// nothing is outstanding. Returns (replies too late, the thread's CPU µs, whether its
    /// priority was raised).
    fn receive(
        &self,
        sh: &Shared,
        timeout: Duration,
        tx: &mpsc::UnboundedSender<Probe>,
    ) -> (u64, u64, bool) {
        let (rx_sock, dest) = (&self.sock, self.dest);
        let boosted = boost();
        let mut buf = [0u8; 2048];
        let mut late_replies = 0u64;
        loop {
            match rx_sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let now = Instant::now();
                    if from.ip() != dest.ip() {
                        continue;
                    }
                    if let Some(seq) = parse_reply(&buf[..n], self.v6, self.raw, self.ident) {
                        let hit = sh.outstanding.lock().ok().and_then(|mut o| o.remove(&seq));
                        match hit {
                            Some((sent, at)) => {
                                let rtt = now.saturating_duration_since(sent).as_secs_f64() * 1e3;
                                let _ = tx.send(Probe {
                                    seq,
                                    t: at,
                                    rtt_ms: Some(rtt),
                                });
                            }
                            None => late_replies += 1,
                        }
                    }
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut
                        || e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
            // Time out probes without a reply.
            let now = Instant::now();
            let expired: Vec<(u64, f64)> = match sh.outstanding.lock() {
                Ok(mut o) => {
                    let old: Vec<u64> = o
                        .iter()
                        .filter(|(_, (sent, _))| now.saturating_duration_since(*sent) >= timeout)
                        .map(|(s, _)| *s)
                        .collect();
                    old.into_iter()
                        .filter_map(|s| o.remove(&s).map(|(_, at)| (s, at)))
                        .collect()
                }
                Err(_) => Vec::new(),
            };
            for (seq, at) in expired {
                let _ = tx.send(Probe {
                    seq,
                    t: at,
                    rtt_ms: None,
                });
            }
            if sh.sender_done.load(Ordering::SeqCst)
                && sh.outstanding.lock().map(|o| o.is_empty()).unwrap_or(true)
            {
                break;
            }
        }
        (late_replies, thread_cpu_us(), boosted)
    }
}

impl Prober {
    /// Stop sending, wait until every probe sent is answered or timed out (at most the
    /// timeout), and return what the prober did. Blocking: call from a blocking context.
    pub(crate) fn stop(mut self) -> ProberStats {
        self.shared.stop.store(true, Ordering::SeqCst);
        let mut st = ProberStats {
            socket: self.socket,
            ..Default::default()
        };
        if let Some(h) = self.sender.take() {
            if let Ok((sent, skipped, late, cpu, boosted)) = h.join() {
                st.boosted = boosted;
                st.sent = sent;
                st.skipped = skipped;
                st.lateness_us = late;
                st.cpu_us += cpu;
            }
        }
        // A sender that panicked never set this; the receiver must still end.
        self.shared.sender_done.store(true, Ordering::SeqCst);
        if let Some(h) = self.receiver.take() {
            if let Ok((late_replies, cpu, boosted)) = h.join() {
                st.boosted &= boosted;
                st.late_replies = late_replies;
                st.cpu_us += cpu;
            }
        }
        st
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.sender_done.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_checksum_verifies_and_reply_parses() {
        let p = echo_request(false, 0x1234, 70_000);
        assert_eq!(p[0], 8);
        // A packet with its checksum in place sums to zero.
        assert_eq!(inet_checksum(&p), 0);
        assert_eq!(u16::from_be_bytes([p[6], p[7]]), (70_000u64 as u16));
        // The peer's reply: type 0, same identifier and payload, behind a 20-byte IPv4 header.
        let mut r = p;
        r[0] = 0;
        let mut raw = vec![0x45u8];
        raw.extend_from_slice(&[0u8; 19]);
        raw.extend_from_slice(&r);
        assert_eq!(parse_reply(&raw, false, true, 0x1234), Some(70_000));
        assert_eq!(parse_reply(&raw, false, true, 0x9999), None);
        // Our own request seen on a raw socket is not a reply.
        let mut req = vec![0x45u8];
        req.extend_from_slice(&[0u8; 19]);
        req.extend_from_slice(&p);
        assert_eq!(parse_reply(&req, false, true, 0x1234), None);
        // Ping socket: no IP header, identifier rewritten by the kernel.
        let mut d = r;
        d[4] = 0xab;
        assert_eq!(parse_reply(&d, false, false, 0x1234), Some(70_000));
        // ICMPv6 reply is type 129.
        let mut v6 = echo_request(true, 1, 5);
        v6[0] = 129;
        assert_eq!(parse_reply(&v6, true, false, 1), Some(5));
        assert_eq!(parse_reply(&v6[..10], true, false, 1), None);
    }

    #[test]
    fn probes_loopback_on_the_clock() {
        let target: IpAddr = "127.0.0.1".parse().unwrap();
        let sock = match EchoSocket::open(target, None) {
            Ok(s) => s,
            Err(e) => panic!("no ICMP socket (tests run as root): {e}"),
        };
        let spec = ProbeSpec {
            target,
            interval: Duration::from_millis(10),
            timeout: Duration::from_millis(500),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let p = start(&spec, sock, Instant::now(), tx).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let st = p.stop();
        let mut got = Vec::new();
        while let Ok(x) = rx.try_recv() {
            got.push(x);
        }
        // 300 ms at 10 ms: about 30 probes, every one answered by the kernel.
        // (Slots the sender skipped on a busy machine count as slots, not as probes.)
        let slots = st.sent + st.skipped;
        assert!(
            (25..=32).contains(&slots),
            "sent {} + skipped {}",
            st.sent,
            st.skipped
        );
        assert!(st.sent >= 15, "sent {}", st.sent);
        assert_eq!(got.len() as u64, st.sent);
        assert!(got.iter().all(|p| p.rtt_ms.is_some_and(|r| r < 50.0)));
        // Sent on the absolute clock: take away each probe's own lateness and every probe
        // sits on a slot k × 10 ms after the first (k ≥ its sequence number; more when slots
        // were skipped on a busy machine), so lateness never accumulates into drift.
        assert_eq!(st.lateness_us.len() as u64, st.sent);
        crate::model::order::sort_by_key(&mut got, |p| p.seq);
        let slot_time = |p: &Probe| p.t - st.lateness_us[p.seq as usize] / 1e6;
        let t0 = slot_time(&got[0]);
        for p in &got {
            let k = (slot_time(p) - t0) / 0.010;
            assert!(
                (k - k.round()).abs() < 0.05 && k.round() as u64 >= p.seq,
                "probe {} at {} s is {k} slots after the first",
                p.seq,
                p.t
            );
        }
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2 (checksum = its complement).
        assert_eq!(
            inet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
    }
}
