//! A bounded `ping` for the Diagnostics page: `count` ICMP echo requests to one address on an
//! absolute clock (request k leaves at start + k × interval), each with a payload of `size`
//! bytes, optionally with DF set (path-MTU probing), from a chosen port (SO_BINDTODEVICE);
//! replies matched by sequence number, a request without a reply within the timeout counted
//! lost. The socket is the latency prober's ([`crate::engine::latency::EchoSocket`]: a ping
//! socket, else a raw ICMP socket), so the same packets and the same privileges apply. One
//! thread, blocking: call it from a blocking pool. Not for: deciding limits (the caller
//! checks count, interval and size) or resolving names.
// Lengths and sizes here come from the network or from files: checked arithmetic and
// fallible slicing only (issue 37, blocker 3). CI runs clippy with -D warnings.
#![cfg_attr(
    not(test),
    warn(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

use crate::engine::latency::{echo_request, inet_checksum, parse_reply, EchoSocket, PAYLOAD_LEN};
use serde::Serialize;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Smallest payload after the 8-byte ICMP header, bytes: our magic word and sequence number.
pub const MIN_SIZE: usize = PAYLOAD_LEN;
/// Largest payload after the 8-byte ICMP header, bytes (65535 − 20 − 8, as `ping -s`).
pub const MAX_SIZE: usize = 65507;

/// What to send.
#[derive(Debug, Clone)]
pub struct PingSpec {
    /// Where to: an IPv4 or IPv6 address (a link-local IPv6 one with its scope id).
    pub target: SocketAddr,
    /// Echo requests to send (≥ 1).
    pub count: u32,
    /// Time between requests.
    pub interval: Duration,
    /// ICMP payload bytes after the 8-byte header, [`MIN_SIZE`]..=[`MAX_SIZE`].
    pub size: usize,
    /// Board port to send from (SO_BINDTODEVICE); `None` = routing decides.
    pub bind_dev: Option<String>,
    /// Set DF (IP_PMTUDISC_DO): a request larger than the path MTU fails instead of being
    /// fragmented; `false` lets the kernel fragment it.
    pub dont_fragment: bool,
    /// A request without a reply after this long is lost.
    pub timeout: Duration,
}

/// One echo request's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reply {
    /// Sequence number, from 0.
    pub seq: u32,
    /// Round-trip time, ms; `None` = no reply (lost or not sent).
    pub rtt_ms: Option<f64>,
    /// ICMP bytes of the reply (header and payload).
    pub bytes: Option<usize>,
    /// Why the request could not be sent (e.g. "Network is unreachable"), if it was not.
    pub error: Option<String>,
}

/// Round-trip times over the replies, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rtt {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    /// Mean deviation from the average (as `ping`'s mdev), ms.
    pub mdev: f64,
}

/// What a ping did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PingResult {
    /// The address pinged (`fe80::1%eth0` form for a link-local one).
    pub target: String,
    /// "ping socket" or "raw socket".
    pub socket: &'static str,
    /// Echo requests handed to the kernel.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// Requests without a reply, % of the requests (sent or not).
    pub loss_percent: f64,
    /// Round-trip times over the replies; `None` without any reply.
    pub rtt_ms: Option<Rtt>,
    /// One line per request, in order.
    pub replies: Vec<Reply>,
    /// What `ping` would print last: "4 sent, 4 received, 0 % loss, rtt min/avg/max …".
    pub summary: String,
}

fn describe(e: &std::io::Error, df: bool) -> String {
    if e.raw_os_error() == Some(libc::EMSGSIZE) {
        if df {
            "message too long: larger than the path MTU with DF set".into()
        } else {
            "message too long".into()
        }
    } else {
        // "Network is unreachable (os error 101)" → without the number.
        let s = e.to_string();
        match s.find(" (os error") {
            Some(i) => s[..i].to_string(),
            None => s,
        }
    }
}

/// The echo request with sequence `seq` and `size` payload bytes.
fn request(v6: bool, ident: u16, seq: u32, size: usize) -> Vec<u8> {
    let mut p = echo_request(v6, ident, seq as u64).to_vec();
    let start = p.len();
    p.resize(size.max(MIN_SIZE).saturating_add(8), 0);
    // The payload counts up from the header's end, byte by byte (as ping's pattern).
    for (b, i) in p
        .iter_mut()
        .skip(start)
        .zip((0..=u8::MAX).cycle().skip(start))
    {
        *b = i;
    }
    if !v6 {
        if let Some(sum) = p.get_mut(2..4) {
            sum.fill(0);
        }
        let c = inet_checksum(&p);
        if let Some(sum) = p.get_mut(2..4) {
            sum.copy_from_slice(&c.to_be_bytes());
        }
    }
    p
}

/// Send the requests and wait for the replies; returns when every request is answered or the
/// last one has waited [`PingSpec::timeout`]. Takes about count × interval + timeout.
/// Errors: no ICMP socket can be opened (no CAP_NET_RAW and ping sockets not allowed), the
/// port does not exist, or the DF option is refused. A request the kernel refuses (no route,
/// message too long) is a [`Reply`] with its error, not an error of the whole ping.
pub fn ping(spec: &PingSpec) -> std::io::Result<PingResult> {
    let v6 = spec.target.is_ipv6();
    let es = EchoSocket::open(spec.target.ip(), spec.bind_dev.as_deref())?;
    let sock = es.socket();
    set_dont_fragment(sock, v6, spec.dont_fragment)?;
    let (raw, ident) = (es.is_raw(), es.ident());
    let count = spec.count.max(1);
    let mut ex = Exchange::new(count);
    let mut next = 0u32;
    let mut last_send = Instant::now();
    let start = Instant::now();
    let mut buf = vec![0u8; 65536 + 64];
    loop {
        let now = Instant::now();
        // The caller bounds count × interval (a Diagnostics ping lasts seconds).
        let due = spec
            .interval
            .checked_mul(next)
            .and_then(|d| start.checked_add(d))
            .unwrap_or(start);
        if next < count && now >= due {
            let pkt = request(v6, ident, next, spec.size);
            let k = usize::try_from(next).unwrap_or(usize::MAX);
            ex.sent_or_refused(k, sock.send_to(&pkt, spec.target), spec.dont_fragment);
            last_send = Instant::now();
            next = next.saturating_add(1);
            continue;
        }
        let give_up = last_send.checked_add(spec.timeout).unwrap_or(last_send);
        if next == count && (!ex.waiting() || now >= give_up) {
            break;
        }
        let until = if next < count { due } else { give_up };
        let wait = until
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        sock.set_read_timeout(Some(wait))?;
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            // An ICMP error queued on the socket (host unreachable): the request stays lost.
            Err(_) => continue,
        };
        let at = Instant::now();
        if from.ip() != spec.target.ip() {
            continue;
        }
        let got = buf.get(..n).unwrap_or(&buf);
        let Some(seq) = parse_reply(got, v6, raw, ident) else {
            continue;
        };
        // An IPv4 raw socket hands over the IP header too: not counted in the reply's bytes.
        let ihl = match got.first() {
            Some(b) if raw && !v6 => usize::from(b & 0x0f).saturating_mul(4),
            _ => 0,
        };
        ex.answered(seq, at, n.saturating_sub(ihl));
    }
    Ok(finish(spec, es.kind(), ex.sent, ex.received, ex.replies))
}

/// Set the DF bit on (`df`) or off for the ping socket `sock` (IPv6 when `v6`).
fn set_dont_fragment(sock: &std::net::UdpSocket, v6: bool, df: bool) -> std::io::Result<()> {
    let (level, name, value) = match (v6, df) {
        (false, true) => (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        ),
        (false, false) => (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DONT,
        ),
        (true, true) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        ),
        (true, false) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DONT,
        ),
    };
    crate::engine::sys::setsockopt_int(sock.as_fd(), level, name, value)
}

/// A ping's requests and what came back for each.
struct Exchange {
    /// One per request, by sequence number.
    replies: Vec<Reply>,
    /// When each request left (`None`: not sent, or refused).
    sent_at: Vec<Option<Instant>>,
    sent: u32,
    received: u32,
}

impl Exchange {
    fn new(count: u32) -> Exchange {
        Exchange {
            replies: (0..count)
                .map(|seq| Reply {
                    seq,
                    rtt_ms: None,
                    bytes: None,
                    error: None,
                })
                .collect(),
            sent_at: vec![None; count as usize],
            sent: 0,
            received: 0,
        }
    }

    /// Request `k` was sent (`r` Ok) or refused by the kernel (its error kept, worded for
    /// `df`).
    fn sent_or_refused(&mut self, k: usize, r: std::io::Result<usize>, df: bool) {
        match r {
            Ok(_) => {
                if let Some(t) = self.sent_at.get_mut(k) {
                    *t = Some(Instant::now());
                }
                self.sent = self.sent.saturating_add(1);
            }
            Err(e) => {
                if let Some(r) = self.replies.get_mut(k) {
                    r.error = Some(describe(&e, df));
                }
            }
        }
    }

    /// A request sent still has no reply.
    fn waiting(&self) -> bool {
        self.sent_at
            .iter()
            .zip(&self.replies)
            .any(|(s, r)| s.is_some() && r.rtt_ms.is_none())
    }

    /// A reply of `bytes` to request `seq` came at `at`; ignored unless that request was
    /// sent and not answered yet.
    fn answered(&mut self, seq: u64, at: Instant, bytes: usize) {
        let Some(i) = usize::try_from(seq).ok() else {
            return;
        };
        let (Some(Some(t)), Some(reply)) = (self.sent_at.get(i).copied(), self.replies.get_mut(i))
        else {
            return;
        };
        if reply.rtt_ms.is_some() {
            return;
        }
        reply.rtt_ms = Some(at.saturating_duration_since(t).as_secs_f64() * 1e3);
        reply.bytes = Some(bytes);
        self.received = self.received.saturating_add(1);
    }
}

fn finish(
    spec: &PingSpec,
    socket: &'static str,
    sent: u32,
    received: u32,
    replies: Vec<Reply>,
) -> PingResult {
    let rtts: Vec<f64> = replies.iter().filter_map(|r| r.rtt_ms).collect();
    let rtt_ms = (!rtts.is_empty()).then(|| {
        let n = rtts.len() as f64;
        let avg = rtts.iter().sum::<f64>() / n;
        Rtt {
            min: rtts.iter().copied().fold(f64::INFINITY, f64::min),
            avg,
            max: rtts.iter().copied().fold(0.0, f64::max),
            mdev: rtts.iter().map(|r| (r - avg).abs()).sum::<f64>() / n,
        }
    });
    let total = replies.len().max(1) as f64;
    let loss_percent = (total - received as f64) / total * 100.0;
    let target = target_text(&spec.target);
    let mut summary = format!(
        "{} requests, {sent} sent, {received} received, {loss_percent:.0} % loss",
        replies.len()
    );
    match &rtt_ms {
        Some(r) => summary.push_str(&format!(
            ", rtt min/avg/max/mdev {:.3}/{:.3}/{:.3}/{:.3} ms",
            r.min, r.avg, r.max, r.mdev
        )),
        None => {
            summary.push_str(": no reply to any request");
            if let Some(e) = replies.iter().find_map(|r| r.error.as_deref()) {
                summary.push_str(&format!(" ({e})"));
            }
        }
    }
    PingResult {
        target,
        socket,
        sent,
        received,
        loss_percent,
        rtt_ms,
        replies,
        summary,
    }
}

/// The address of `a` as the Diagnostics answers show it: an IPv6 address with a scope (a
/// link-local one) keeps it as `%PORT` (`fe80::1%eth0`; the scope's number when the port is
/// gone), any other just the address.
pub fn target_text(a: &SocketAddr) -> String {
    match a {
        SocketAddr::V6(a) if a.scope_id() != 0 => {
            let dev = nix::net::if_::if_indextoname(a.scope_id())
                .ok()
                .and_then(|c| c.into_string().ok())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| a.scope_id().to_string());
            format!("{}%{dev}", a.ip())
        }
        a => a.ip().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_size_and_a_valid_checksum() {
        let p = request(false, 0x1234, 7, 100);
        assert_eq!(p.len(), 108);
        assert_eq!(p[0], 8);
        // A valid Internet checksum sums to zero over the whole message.
        assert_eq!(inet_checksum(&p), 0);
        // A reply to it (type 0, checksum not checked) is matched to sequence 7.
        let mut r = p.clone();
        r[0] = 0;
        assert_eq!(parse_reply(&r, false, false, 0x1234), Some(7));
        // The smallest size still holds the magic and the sequence.
        assert_eq!(request(true, 1, 3, 0).len(), 8 + MIN_SIZE);
    }

    #[test]
    fn loopback_answers_every_request() {
        let spec = PingSpec {
            target: "127.0.0.1:0".parse().unwrap(),
            count: 3,
            interval: Duration::from_millis(20),
            size: 56,
            bind_dev: None,
            dont_fragment: true,
            timeout: Duration::from_secs(1),
        };
        let r = ping(&spec).expect("an ICMP socket (tests run as root)");
        assert_eq!((r.sent, r.received), (3, 3), "{r:?}");
        assert_eq!(r.loss_percent, 0.0);
        let rtt = r.rtt_ms.expect("rtt");
        assert!(
            rtt.min > 0.0 && rtt.min <= rtt.avg && rtt.avg <= rtt.max,
            "{rtt:?}"
        );
        assert!(r.replies.iter().all(|x| x.bytes == Some(64)), "{r:?}");
    }

    #[test]
    fn the_largest_size_crosses_loopback_with_df() {
        let spec = PingSpec {
            target: "127.0.0.1:0".parse().unwrap(),
            count: 1,
            interval: Duration::from_millis(20),
            size: MAX_SIZE,
            bind_dev: None,
            dont_fragment: true,
            timeout: Duration::from_millis(200),
        };
        let r = ping(&spec).expect("socket");
        // Loopback's MTU is 65536: 65507 + 28 fits. The reply is the whole payload.
        assert_eq!(r.received, 1, "{r:?}");
        assert_eq!(r.replies[0].bytes, Some(MAX_SIZE + 8));
    }
}
