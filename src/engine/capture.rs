//! A bounded packet capture for the Diagnostics page: every frame a port sends and receives
//! (an AF_PACKET socket from `engine::sys`, needs CAP_NET_RAW), kept when it matches a small
//! filter of our own (`host ADDR`, `port N`, `tcp`/`udp`/`icmp`, joined by `and`), written as a
//! classic pcap file (24-byte global header, 16-byte record headers, LINKTYPE_ETHERNET,
//! microsecond time stamps) until the time, packet or byte cap is reached or it is stopped.
//! One thread, blocking. Not for: deciding caps (the caller checks them) or keeping files.
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

use std::io::{Read, Write};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bytes of a frame kept at most (pcap's snap length).
pub(crate) const SNAPLEN: usize = 65535;
/// [`SNAPLEN`] as the pcap header carries it.
const SNAPLEN_U32: u32 = 65535;
/// Bytes of the pcap global header.
pub(crate) const GLOBAL_HEADER: u64 = 24;
/// Bytes of each record header.
pub(crate) const RECORD_HEADER: u64 = 16;
/// LINKTYPE_ETHERNET.
pub(crate) const LINKTYPE_ETHERNET: u32 = 1;

/// A transport protocol of the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Tcp,
    Udp,
    /// ICMP or ICMPv6.
    Icmp,
}

/// Which frames to keep: all of the given conditions hold (an empty filter keeps every frame).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// Source or destination address.
    pub host: Option<IpAddr>,
    /// TCP or UDP source or destination port.
    pub port: Option<u16>,
    pub proto: Option<Proto>,
}

impl Filter {
    /// Parse `host ADDR`, `port N`, `tcp`, `udp`, `icmp`, each at most once, joined by `and`
    /// (`host 192.0.2.2 and icmp`); empty = everything. `host` takes an address, not a name.
    /// Errors: a sentence naming the word that is not understood.
    pub(crate) fn parse(s: &str) -> Result<Filter, String> {
        let mut f = Filter::default();
        let words: Vec<&str> = s.split_whitespace().collect();
        if s.len() > 200 {
            return Err("filter is too long (at most 200 characters)".into());
        }
        let shown =
            |w: &str| -> String { w.chars().take(40).flat_map(char::escape_default).collect() };
        let mut words_left = words.iter().copied();
        let mut expect_term = true;
        while let Some(w) = words_left.next() {
            if !expect_term {
                if w != "and" {
                    return Err(format!(
                        "filter: expected 'and' before '{}' (terms: host ADDR, port N, tcp, udp, icmp)",
                        shown(w)
                    ));
                }
                expect_term = true;
                continue;
            }
            match w {
                "host" => {
                    let a = words_left.next().ok_or("filter: 'host' needs an address")?;
                    let ip: IpAddr = a.parse().map_err(|_| {
                        format!("filter: '{}' is not an IP address (host takes an address)", shown(a))
                    })?;
                    if f.host.replace(ip).is_some() {
                        return Err("filter: 'host' given twice".into());
                    }
                }
                "port" => {
                    let p = words_left.next().ok_or("filter: 'port' needs a number")?;
                    let n: u16 = p
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("filter: '{}' is not a port (1–65535)", shown(p)))?;
                    if f.port.replace(n).is_some() {
                        return Err("filter: 'port' given twice".into());
                    }
                }
                "tcp" | "udp" | "icmp" => {
                    let p = match w {
                        "tcp" => Proto::Tcp,
                        "udp" => Proto::Udp,
                        _ => Proto::Icmp,
                    };
                    if f.proto.replace(p).is_some() {
                        return Err("filter: one protocol at most".into());
                    }
                }
                other => {
                    return Err(format!(
                        "filter: '{}' is not understood (terms: host ADDR, port N, tcp, udp, icmp, joined by 'and')",
                        shown(other)
                    ))
                }
            }
            expect_term = false;
        }
        if expect_term && !words.is_empty() {
            return Err("filter: ends with 'and'".into());
        }
        Ok(f)
    }

    /// True when the Ethernet frame `f` matches (one VLAN tag is skipped; a frame that is not
    /// IPv4 or IPv6 matches only the empty filter).
    pub(crate) fn matches(&self, f: &[u8]) -> bool {
        if *self == Filter::default() {
            return true;
        }
        let Some(mut et) = be16(f, 12) else {
            return false;
        };
        let mut off = 14;
        if et == 0x8100 {
            let Some(inner) = be16(f, 16) else {
                return false;
            };
            et = inner;
            off = 18;
        }
        let ip = f.get(off..).unwrap_or_default();
        let version = ip.first().map(|b| b >> 4);
        let (proto, src, dst, l4): (u8, IpAddr, IpAddr, Option<&[u8]>) = match (et, version) {
            (0x0800, Some(4)) => {
                let (Some(h), Some(flags)) = (ip.get(..20), be16(ip, 6)) else {
                    return false;
                };
                let ihl = usize::from(h.first().copied().unwrap_or(0) & 0x0f).saturating_mul(4);
                // An IHL below 5 words is not an IPv4 header: no ports to read behind it.
                if ihl < 20 {
                    return false;
                }
                let frag = flags & 0x1fff;
                let (Some(&proto), Some(s), Some(d)) = (h.get(9), addr4(h, 12), addr4(h, 16))
                else {
                    return false;
                };
                (
                    proto,
                    IpAddr::from(s),
                    IpAddr::from(d),
                    if frag == 0 { ip.get(ihl..) } else { None },
                )
            }
            (0x86dd, Some(6)) => {
                let (Some(&proto), Some(s), Some(d)) = (ip.get(6), addr16(ip, 8), addr16(ip, 24))
                else {
                    return false;
                };
                (proto, IpAddr::from(s), IpAddr::from(d), ip.get(40..))
            }
            _ => return false,
        };
        if let Some(h) = self.host {
            if src != h && dst != h {
                return false;
            }
        }
        if let Some(p) = self.proto {
            let ok = match p {
                Proto::Tcp => proto == 6,
                Proto::Udp => proto == 17,
                Proto::Icmp => proto == 1 || proto == 58,
            };
            if !ok {
                return false;
            }
        }
        if let Some(port) = self.port {
            if proto != 6 && proto != 17 {
                return false;
            }
            let (Some(sp), Some(dp)) = (l4.and_then(|l| be16(l, 0)), l4.and_then(|l| be16(l, 2)))
            else {
                return false;
            };
            if sp != port && dp != port {
                return false;
            }
        }
        true
    }
}

/// The big-endian u16 at `at`, if `b` holds it.
fn be16(b: &[u8], at: usize) -> Option<u16> {
    let w = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes(w.try_into().ok()?))
}

/// The 4 bytes at `at` (an IPv4 address), if `b` holds them.
fn addr4(b: &[u8], at: usize) -> Option<[u8; 4]> {
    b.get(at..at.checked_add(4)?)?.try_into().ok()
}

/// The 16 bytes at `at` (an IPv6 address), if `b` holds them.
fn addr16(b: &[u8], at: usize) -> Option<[u8; 16]> {
    b.get(at..at.checked_add(16)?)?.try_into().ok()
}

/// The pcap global header (little-endian, version 2.4, microseconds).
pub(crate) fn global_header(snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    h
}

/// One record header: time stamp, bytes kept, bytes on the wire.
pub(crate) fn record_header(t: SystemTime, kept: u32, wire: u32) -> [u8; 16] {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut h = [0u8; 16];
    // pcap's 32-bit seconds wrap in 2106, as on the wire.
    let secs = u32::try_from(d.as_secs() & 0xffff_ffff).unwrap_or(0);
    h[0..4].copy_from_slice(&secs.to_le_bytes());
    h[4..8].copy_from_slice(&d.subsec_micros().to_le_bytes());
    h[8..12].copy_from_slice(&kept.to_le_bytes());
    h[12..16].copy_from_slice(&wire.to_le_bytes());
    h
}

/// What to capture.
#[derive(Debug, Clone)]
pub(crate) struct CaptureSpec {
    /// Longest capture.
    pub duration: Duration,
    /// Most packets written.
    pub max_packets: u64,
    /// Largest pcap file, bytes (headers included).
    pub max_bytes: u64,
    pub filter: Filter,
}

/// Live counts of a capture, and its stop switch.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Packets written.
    pub packets: AtomicU64,
    /// Bytes of the pcap file so far.
    pub bytes: AtomicU64,
    /// Set to end the capture early.
    pub stop: AtomicBool,
    /// CPU time of the capture thread (user + system), µs; set when it ends.
    pub cpu_us: AtomicU64,
}

/// Why a capture ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Time,
    Packets,
    Bytes,
    Stopped,
}

impl Ended {
    /// "time", "packets", "bytes", "stopped".
    pub(crate) fn word(self) -> &'static str {
        match self {
            Ended::Time => "time",
            Ended::Packets => "packets",
            Ended::Bytes => "bytes",
            Ended::Stopped => "stopped",
        }
    }
}

/// Open the capture socket of port `ifindex` (see [`crate::engine::sys::packet_socket`]).
pub(crate) fn open(ifindex: u32) -> std::io::Result<std::fs::File> {
    let fd = crate::engine::sys::packet_socket(ifindex)?;
    socket2::SockRef::from(&fd).set_read_timeout(Some(Duration::from_millis(100)))?;
    Ok(std::fs::File::from(fd))
}

/// Capture from `sock` (from [`open`]) into `out` until a cap or the stop switch; the
/// counts in `progress` follow as it goes. Errors: writing `out` or reading the socket fails.
pub(crate) fn capture(
    spec: &CaptureSpec,
    mut sock: std::fs::File,
    out: &mut impl Write,
    progress: &Progress,
) -> std::io::Result<Ended> {
    out.write_all(&global_header(SNAPLEN_U32))?;
    let mut bytes = GLOBAL_HEADER;
    progress.bytes.store(bytes, Ordering::Relaxed);
    let mut packets = 0u64;
    let start = Instant::now();
    let mut buf = vec![0u8; SNAPLEN + 1];
    let ended = loop {
        if progress.stop.load(Ordering::Relaxed) {
            break Ended::Stopped;
        }
        if start.elapsed() >= spec.duration {
            break Ended::Time;
        }
        if packets >= spec.max_packets {
            break Ended::Packets;
        }
        let n = match sock.read(&mut buf) {
            Ok(n) => n,
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
            Err(e) => return Err(e),
        };
        let at = SystemTime::now();
        let frame = buf.get(..n).unwrap_or(&buf);
        if !spec.filter.matches(frame) {
            continue;
        }
        let kept = frame.get(..SNAPLEN).unwrap_or(frame);
        // n ≤ SNAPLEN + 1: both fit u32.
        let (kept_len, wire_len) = (
            u32::try_from(kept.len()).unwrap_or(SNAPLEN_U32),
            u32::try_from(n).unwrap_or(u32::MAX),
        );
        let add = RECORD_HEADER.saturating_add(u64::from(kept_len));
        if bytes.saturating_add(add) > spec.max_bytes {
            break Ended::Bytes;
        }
        out.write_all(&record_header(at, kept_len, wire_len))?;
        out.write_all(kept)?;
        bytes = bytes.saturating_add(add);
        packets = packets.saturating_add(1);
        progress.bytes.store(bytes, Ordering::Relaxed);
        progress.packets.store(packets, Ordering::Relaxed);
    };
    out.flush()?;
    progress
        .cpu_us
        .store(crate::engine::latency::thread_cpu_us(), Ordering::Relaxed);
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 frame of `proto` from `s` to `d` with ports (TCP/UDP).
    fn v4(proto: u8, s: [u8; 4], d: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = proto;
        f[26..30].copy_from_slice(&s);
        f[30..34].copy_from_slice(&d);
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f
    }

    /// Issue 37 (blocker 3): an IPv4 header with IHL < 5 made the filter read the "ports"
    /// from the IP header itself (IHL 0: the version byte 0x40 and the TOS byte gave source
    /// port 0x4000 = 16384), so `port 16384` kept a malformed frame. A header shorter than
    /// 20 bytes has no ports behind it: no port filter matches it; the same frame with
    /// IHL 5 still matches its real ports.
    #[test]
    fn an_ipv4_header_with_ihl_below_5_matches_no_port() {
        let mut f = v4(17, [192, 0, 2, 1], [192, 0, 2, 2], 5201, 40000);
        let p16384 = Filter::parse("port 16384").unwrap();
        let p5201 = Filter::parse("udp and port 5201").unwrap();
        assert!(p5201.matches(&f));
        assert!(!p16384.matches(&f));
        f[14] = 0x40; // version 4, IHL 0
        assert!(!p16384.matches(&f), "ports read from the IP header itself");
        assert!(!p5201.matches(&f));
        f[14] = 0x44; // IHL 4 (16 bytes): still shorter than the fixed header
        assert!(!p5201.matches(&f));
        // Truncated frames (every length short of the ports) never match nor panic.
        let full = v4(6, [192, 0, 2, 1], [192, 0, 2, 2], 1, 2);
        let any = Filter::parse("host 192.0.2.1 and tcp and port 2").unwrap();
        for n in 0..14 + 20 + 4 {
            assert!(!any.matches(&full[..n]), "{n} bytes matched");
        }
        assert!(any.matches(&full));
    }

    #[test]
    fn filters_parse_strictly() {
        assert_eq!(Filter::parse("").unwrap(), Filter::default());
        let f = Filter::parse(" host 192.0.2.2  and icmp ").unwrap();
        assert_eq!(f.host, Some("192.0.2.2".parse().unwrap()));
        assert_eq!(f.proto, Some(Proto::Icmp));
        assert_eq!(Filter::parse("tcp and port 5201").unwrap().port, Some(5201));
        for (bad, want) in [
            ("host 1.2.3.4; rm -rf /", "not an IP address"),
            ("host $(reboot)", "not an IP address"),
            ("port 0", "not a port"),
            ("port 70000", "not a port"),
            ("icmp or tcp", "expected 'and'"),
            ("tcp and udp", "one protocol"),
            ("host", "needs an address"),
            ("icmp and", "ends with 'and'"),
            ("arp", "not understood"),
            ("`id`", "not understood"),
        ] {
            let e = Filter::parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn filters_match_frames() {
        let a = [192, 0, 2, 2];
        let b = [192, 0, 2, 1];
        let icmp = v4(1, a, b, 0, 0);
        let tcp = v4(6, a, b, 40000, 5201);
        let f = Filter::parse("host 192.0.2.1 and icmp").unwrap();
        assert!(f.matches(&icmp) && !f.matches(&tcp));
        let f = Filter::parse("port 5201").unwrap();
        assert!(f.matches(&tcp) && !f.matches(&icmp));
        assert!(!Filter::parse("host 192.0.2.9").unwrap().matches(&tcp));
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(Filter::default().matches(&arp));
        assert!(!Filter::parse("icmp").unwrap().matches(&arp));
        assert!(!Filter::parse("icmp").unwrap().matches(&[0u8; 5]));
    }

    #[test]
    fn pcap_headers_have_the_classic_layout() {
        let g = global_header(65535);
        assert_eq!(&g[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(g[20..24].try_into().unwrap()), 1);
        let r = record_header(UNIX_EPOCH + Duration::from_micros(5_000_123), 60, 98);
        assert_eq!(u32::from_le_bytes(r[0..4].try_into().unwrap()), 5);
        assert_eq!(u32::from_le_bytes(r[4..8].try_into().unwrap()), 123);
        assert_eq!(u32::from_le_bytes(r[8..12].try_into().unwrap()), 60);
        assert_eq!(u32::from_le_bytes(r[12..16].try_into().unwrap()), 98);
    }
}
