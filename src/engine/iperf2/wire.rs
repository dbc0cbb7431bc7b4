//! iperf 2 wire format (2.0.5 … 2.1.x), see `docs/iperf2-wire.md` §2–§4: the 24-byte
//! version-1 client header (TCP: the first bytes of every connection; UDP: at offset 16 of
//! every datagram in 2.0.10+/2.1 layout, offset 12 in 2.0.5 layout), the UDP datagram header
//! (sequence number, sender wall-clock time), the FIN and the server report datagram.
//! All fields are big-endian 32-bit integers. Parsers check lengths strictly and never panic.
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

/// Default iperf 2 port (TCP and UDP).
pub(crate) const DEFAULT_PORT: u16 = 5001;
/// Size of the version-1 client header, bytes.
pub(crate) const CLIENT_HEADER_LEN: usize = 24;
/// The datagram id (sequence number and sent time) and its clock: `engine::datagram`'s.
pub use crate::engine::datagram::read_udp_id;
/// Smallest UDP datagram we send, bytes (`engine::datagram::IPERF2_MIN_LEN`).
pub(crate) use crate::engine::datagram::IPERF2_MIN_LEN as UDP_MIN_LEN;
pub(crate) use crate::engine::datagram::{wall_now, write_udp_id};
/// Default UDP datagram size of iperf 2, bytes.
pub(crate) const UDP_DEFAULT_LEN: usize = 1470;
/// Default UDP rate of iperf 2, bits/s.
pub(crate) const UDP_DEFAULT_RATE: u64 = crate::engine::params::DEFAULT_UDP_BITRATE;
/// Default TCP write size of iperf 2.1 (2.0.5 used 8 KiB), bytes.
pub(crate) const TCP_DEFAULT_LEN: usize = crate::engine::params::DEFAULT_TCP_BLKSIZE;

/// "Run a return test" (`-r` / `-d`); in a server report: the report is valid.
pub(crate) const HEADER_VERSION1: u32 = 0x8000_0000;
/// An extension follows the v1 fields (2.0.10+).
pub(crate) const HEADER_EXTEND: u32 = 0x4000_0000;
/// UDP test settings present (2.1).
pub(crate) const HEADER_UDPTESTS: u32 = 0x2000_0000;
/// A permit key follows (2.1 `--permit-key`).
pub(crate) const HEADER_KEYCHECK: u32 = 0x1000_0000;
/// 64-bit UDP sequence numbers (high word at offset 12).
pub(crate) const HEADER_SEQNO64B: u32 = 0x0800_0000;
/// Version-2 header (2.1).
pub(crate) const HEADER_VERSION2: u32 = 0x0400_0000;
/// `-X` peer version detection (2.1).
pub(crate) const HEADER_V2PEERDETECT: u32 = 0x0200_0000;
/// The header length is in bits 1..15 (as `len << 1`).
pub(crate) const HEADER_LEN_BIT: u32 = 0x0001_0000;
/// With HEADER_VERSION1: run the return test at the same time (`-d`), not after (`-r`).
pub(crate) const RUN_NOW: u32 = 0x0000_0001;
/// Upper flag of the 2.1 header extension: the client asked for `--trip-times` (the server
/// measures one-way latency from the datagrams' timestamps).
pub(crate) const UPPER_TRIPTIME: u16 = 0x0010;

/// The upper flags (high 16 bits of the word at extension offset 8) of a 2.1 client header
/// with HEADER_EXTEND; `hdr` starts at the v1 flags. None without an extension or when
/// the header is too short to hold that word.
pub(crate) fn ext_upper_flags(hdr: &[u8]) -> Option<u16> {
    let h = ClientHeader::parse(hdr).ok()?;
    if h.flags & HEADER_EXTEND == 0 || hdr.len() < CLIENT_HEADER_LEN + 12 {
        return None;
    }
    Some((be32(hdr, CLIENT_HEADER_LEN + 8) >> 16) as u16)
}

/// Whether a 2.1 client header (from the v1 flags on) asks for `--trip-times`.
pub(crate) fn trip_times(hdr: &[u8]) -> bool {
    ext_upper_flags(hdr).is_some_and(|f| f & UPPER_TRIPTIME != 0)
}

/// Length of the TCP client header a 2.1/2.2 `--trip-times` client writes first, bytes: the
/// v1 fields (24), the extension (36 in 2.1, 40 in 2.2) and the start time / fq-rate words;
/// both versions put the start time at offset 64 (docs/iperf2-wire.md §3.1).
pub(crate) const TCP_TRIP_HEADER_LEN: usize = 80;
const TCP_TRIP_HEADER_LEN_U32: u32 = 80;
/// Offset of the start time (seconds, then microseconds) in a `--trip-times` TCP header.
const TCP_TRIP_START_AT: usize = 64;
/// Length of the header at the start of every write ("burst") of a TCP `--trip-times`
/// client, bytes (iperf 2's `TCP_burst_payload`, 2.1 and 2.2 alike).
pub(crate) const TCP_BURST_HEADER_LEN: usize = 96;
/// A TCP header's start time more than this far from our clock makes a stock server ignore
/// `--trip-times` (2.1/2.2 `MAXDIFFTIMESTAMPSECS`), seconds.
pub(crate) const TRIP_MAX_CLOCK_DIFF_S: i64 = 600;

/// Whether a TCP client header (from the v1 flags on, at least 36 bytes) asks for
/// `--trip-times` in a form we can serve: HEADER_EXTEND, a LEN_BIT length that holds the
/// start time (≥ 72 bytes), and the TRIPTIME upper flag. A 2.1/2.2 client's header is 80 bytes.
pub(crate) fn tcp_trip_times(hdr: &[u8]) -> bool {
    let Ok(h) = ClientHeader::parse(hdr) else {
        return false;
    };
    h.flags & HEADER_LEN_BIT != 0 && h.tcp_len() >= TCP_TRIP_START_AT + 8 && trip_times(hdr)
}

/// The start time (seconds, microseconds) of a `--trip-times` TCP header (the whole header,
/// from the v1 flags on); None when it is too short or the microseconds are out of range.
pub(crate) fn tcp_trip_start(hdr: &[u8]) -> Option<(u32, u32)> {
    if hdr.len() < TCP_TRIP_START_AT + 8 {
        return None;
    }
    let usec = be32(hdr, TCP_TRIP_START_AT + 4);
    (usec < 1_000_000).then(|| (be32(hdr, TCP_TRIP_START_AT), usec))
}

/// The TCP header of a `--trip-times` client (80 bytes), as 2.1.8 lays it out: `h`'s v1
/// fields with HEADER_EXTEND | HEADER_LEN_BIT | (80 << 1) added, the extension with upper
/// flag TRIPTIME and the 2.1.8 version words (rate, TOS, prefetch 0), then a zero word (2.1:
/// reserved, 2.2: barrier µs) and the start time `start` = (s, µs) at offset 64.
pub(crate) fn tcp_client_header_trip(h: &ClientHeader, start: (u32, u32)) -> Vec<u8> {
    let mut v1 = *h;
    v1.flags |= HEADER_EXTEND | HEADER_LEN_BIT | (TCP_TRIP_HEADER_LEN_U32 << 1);
    let mut b = vec![0u8; TCP_TRIP_HEADER_LEN];
    if let Some(d) = b.get_mut(..CLIENT_HEADER_LEN) {
        d.copy_from_slice(&v1.to_bytes());
    }
    const E: usize = CLIENT_HEADER_LEN;
    put32(&mut b, E + 8, u32::from(UPPER_TRIPTIME) << 16);
    put32(&mut b, E + 12, EXT_VERSION.0);
    put32(&mut b, E + 16, EXT_VERSION.1);
    put32(&mut b, TCP_TRIP_START_AT, start.0);
    put32(&mut b, TCP_TRIP_START_AT + 4, start.1);
    b
}

/// The fields of a TCP `--trip-times` burst header that matter (offsets in the 96 bytes):
/// the write time at 20/24 (s, µs, the sender's wall clock just before the write), the
/// burst id at 44 (1, 2, 3 …), the burst size at 48 (bytes, this header included), the
/// 64-bit sequence at 52/56. The other words are stock bookkeeping, often stale bytes of the
/// client's buffer, and are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BurstHeader {
    /// Write time: seconds, microseconds (not checked here; see [`BurstHeader::write_us`]).
    pub write: (u32, u32),
    /// Burst id.
    pub id: u32,
    /// Bytes of the burst, header included.
    pub size: u32,
    /// Sender's byte sequence (stock: 1 + bytes before this burst's end).
    pub seqno: u64,
}

impl BurstHeader {
    /// Parse the first [`TCP_BURST_HEADER_LEN`] bytes; None when fewer are given.
    pub(crate) fn parse(b: &[u8]) -> Option<BurstHeader> {
        if b.len() < TCP_BURST_HEADER_LEN {
            return None;
        }
        Some(BurstHeader {
            write: (be32(b, 20), be32(b, 24)),
            id: be32(b, 44),
            size: be32(b, 48),
            seqno: (u64::from(be32(b, 56)) << 32) | u64::from(be32(b, 52)),
        })
    }

    /// The write time in µs since 1970, or None when the µs word is 1 000 000 or more.
    pub(crate) fn write_us(&self) -> Option<i64> {
        (self.write.1 < 1_000_000).then(|| {
            i64::from(self.write.0)
                .saturating_mul(1_000_000)
                .saturating_add(i64::from(self.write.1))
        })
    }

    /// Write the fields into the first 96 bytes of `b` (a block of at least that size; a
    /// shorter one is left alone), with `start` (s, µs) at 12/16 and the other words 0.
    pub(crate) fn write_into(&self, b: &mut [u8], start: (u32, u32)) {
        let Some(h) = b.get_mut(..TCP_BURST_HEADER_LEN) else {
            return;
        };
        h.fill(0);
        put32(h, 12, start.0);
        put32(h, 16, start.1);
        put32(h, 20, self.write.0);
        put32(h, 24, self.write.1);
        put32(h, 44, self.id);
        put32(h, 48, self.size);
        put32(h, 52, low32(self.seqno));
        put32(h, 56, low32(self.seqno >> 32));
    }
}

/// Why bytes are not an iperf 2 message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("iperf 2 message too short: {got} bytes, need {need}")]
    Short { got: usize, need: usize },
    #[error("datagram carries no iperf 2 server report")]
    NoReport,
    #[error("iperf 2 header field {field} out of range ({value})")]
    Range { field: &'static str, value: i64 },
}

/// The big-endian u32 at `at`; 0 when `b` is too short (callers check the length first).
fn be32(b: &[u8], at: usize) -> u32 {
    at.checked_add(4)
        .and_then(|end| b.get(at..end))
        .and_then(|w| <[u8; 4]>::try_from(w).ok())
        .map_or(0, u32::from_be_bytes)
}

/// Put `v` big-endian at `at`; nothing when `b` is too short (callers size it first).
fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(w) = at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        w.copy_from_slice(&v.to_be_bytes());
    }
}

/// The low 32 bits of `x` (what a 32-bit wire word of a 64-bit count carries).
#[allow(clippy::cast_possible_truncation)]
fn low32(x: u64) -> u32 {
    x as u32
}

/// The return test a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Return {
    /// Plain one-way test.
    None,
    /// `-r`: the server sends back after the client's test ends ("tradeoff").
    Tradeoff,
    /// `-d`: the server sends back at the same time ("dual test").
    Dual,
}

/// The version-1 client header (24 bytes, all versions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientHeader {
    /// Flag bits (HEADER_*; RUN_NOW).
    pub flags: u32,
    /// `-P`: streams of the return test.
    pub num_threads: i32,
    /// Port the client listens on for the return test (`-L`).
    pub port: i32,
    /// `-l`, bytes; 0 = not given.
    pub buffer_len: i32,
    /// TCP: `-w` window in bytes; UDP: `-b` rate in bits/s.
    pub win_band: i32,
    /// Negative: duration in units of 10 ms; positive: byte count (31 bits).
    pub amount: i32,
}

impl ClientHeader {
    /// Parse the first 24 bytes. Errors when fewer are given.
    pub fn parse(b: &[u8]) -> Result<ClientHeader, WireError> {
        if b.len() < CLIENT_HEADER_LEN {
            return Err(WireError::Short {
                got: b.len(),
                need: CLIENT_HEADER_LEN,
            });
        }
        Ok(ClientHeader {
            flags: be32(b, 0),
            num_threads: be32(b, 4) as i32,
            port: be32(b, 8) as i32,
            buffer_len: be32(b, 12) as i32,
            win_band: be32(b, 16) as i32,
            amount: be32(b, 20) as i32,
        })
    }

    /// The 24 bytes on the wire.
    pub fn to_bytes(self) -> [u8; CLIENT_HEADER_LEN] {
        let mut b = [0u8; CLIENT_HEADER_LEN];
        put32(&mut b, 0, self.flags);
        put32(&mut b, 4, self.num_threads as u32);
        put32(&mut b, 8, self.port as u32);
        put32(&mut b, 12, self.buffer_len as u32);
        put32(&mut b, 16, self.win_band as u32);
        put32(&mut b, 20, self.amount as u32);
        b
    }

    /// Which return test the header asks for.
    pub fn return_test(&self) -> Return {
        if self.flags & HEADER_VERSION1 == 0 {
            Return::None
        } else if self.flags & RUN_NOW != 0 {
            Return::Dual
        } else {
            Return::Tradeoff
        }
    }

    /// Total header length the client sent on TCP, bytes: the LEN_BIT length (2.0.10+), else
    /// 24 for a v1 header. Bounded to 24..=1024.
    pub fn tcp_len(&self) -> usize {
        if self.flags & HEADER_LEN_BIT != 0 {
            (((self.flags & 0xFFFE) >> 1) as usize).clamp(CLIENT_HEADER_LEN, 1024)
        } else {
            CLIENT_HEADER_LEN
        }
    }

    /// The test length: `Ok(Duration)` for a timed test, or the byte count.
    pub fn amount(&self) -> Amount {
        if self.amount < 0 {
            Amount::Time(-f64::from(self.amount) / 100.0)
        } else {
            Amount::Bytes(self.amount as u64)
        }
    }

    /// Check the fields a return test would use (streams 1..=128, port 1..65535, a length
    /// below 64 KiB, a duration up to a day). Errors name the field.
    pub fn check_return(&self) -> Result<(), WireError> {
        if !(1..=128).contains(&self.num_threads) {
            return Err(WireError::Range {
                field: "numThreads",
                value: self.num_threads as i64,
            });
        }
        if !(1..=65535).contains(&self.port) {
            return Err(WireError::Range {
                field: "mPort",
                value: self.port as i64,
            });
        }
        if !(0..=65507).contains(&self.buffer_len) {
            return Err(WireError::Range {
                field: "bufferlen",
                value: self.buffer_len as i64,
            });
        }
        if self.amount < -8_640_000 || self.amount == 0 {
            return Err(WireError::Range {
                field: "mAmount",
                value: self.amount as i64,
            });
        }
        Ok(())
    }
}

/// The rate of a 2.0.10+/2.1 client (`-b`, bits/s) from the header extension (word 6 after
/// the v1 fields; 2.1 leaves `mWinBand` 0 for UDP). `hdr` starts at the v1 flags. None when
/// there is no extension or no rate.
pub fn ext_rate(hdr: &[u8]) -> Option<u32> {
    let h = ClientHeader::parse(hdr).ok()?;
    if h.flags & HEADER_EXTEND == 0 || hdr.len() < CLIENT_HEADER_LEN + 28 {
        return None;
    }
    Some(be32(hdr, CLIENT_HEADER_LEN + 24)).filter(|&r| r > 0 && r <= i32::MAX as u32)
}

/// Length of the UDP client header a 2.1 client sends (v1 fields + extension), bytes; the
/// flags carry it as `len << 1` with HEADER_LEN_BIT (2.1.8: `0x…0098`).
pub(crate) const UDP_EXT_HEADER_LEN: usize = 76;
const UDP_EXT_HEADER_LEN_U32: u32 = 76;
/// Version words a 2.1.8 client puts in the extension (2.1.8 = `0x00020001`, `0x00080003`).
const EXT_VERSION: (u32, u32) = (0x0002_0001, 0x0008_0003);

/// The UDP client header with the 2.1 extension, as a 2.1.8 client lays it out (76 bytes):
/// v1 fields with HEADER_EXTEND | HEADER_SEQNO64B | HEADER_LEN_BIT | (76 << 1) added to
/// `h.flags`, then the extension: type, length, upper/lower flags (0), the version words,
/// reserved/TOS (0), the rate `rate_bps` (bits/s) as low word and upper word (`(rate >> 32)
/// << 8`, rate units 0 = bits/s), write-prefetch and the rest 0. 2.1+ servers take a UDP
/// return test's rate from here (they ignore `mWinBand`); 2.0.10+ skip the extension by its
/// length. Our datagrams carry the high id word at offset 12, as SEQNO64B says.
pub(crate) fn udp_client_header_ext(h: &ClientHeader, rate_bps: u64) -> Vec<u8> {
    let mut v1 = *h;
    v1.flags |= HEADER_EXTEND | HEADER_SEQNO64B | HEADER_LEN_BIT | (UDP_EXT_HEADER_LEN_U32 << 1);
    let mut b = vec![0u8; UDP_EXT_HEADER_LEN];
    if let Some(d) = b.get_mut(..CLIENT_HEADER_LEN) {
        d.copy_from_slice(&v1.to_bytes());
    }
    const E: usize = CLIENT_HEADER_LEN;
    put32(&mut b, E + 12, EXT_VERSION.0);
    put32(&mut b, E + 16, EXT_VERSION.1);
    put32(&mut b, E + 24, low32(rate_bps));
    put32(&mut b, E + 28, low32(rate_bps >> 32) << 8);
    b
}

/// Length of a test as the header carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// Seconds.
    Time(f64),
    /// Bytes.
    Bytes(u64),
}

/// Where a UDP client's header sits, and so where the server report goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Layout {
    /// 2.0.5 … 2.0.9: 32-bit id, header and report at offset 12.
    V205,
    /// 2.0.10+ / 2.1: high id word at 12, header and report at offset 16.
    V21,
}

impl Layout {
    /// Offset of the client header and of the server report, bytes.
    pub fn offset(self) -> usize {
        match self {
            Layout::V205 => 12,
            Layout::V21 => 16,
        }
    }
}

/// What the first datagram of a UDP flow says: its layout, 64-bit ids, and the client header
/// (None when the datagram is too short or carries none).
pub fn classify_udp(first: &[u8]) -> (Layout, bool, Option<ClientHeader>) {
    let at16 = if first.len() >= 16 + CLIENT_HEADER_LEN {
        first.get(16..).and_then(|h| ClientHeader::parse(h).ok())
    } else {
        None
    };
    let at12 = if first.len() >= 12 + CLIENT_HEADER_LEN {
        first.get(12..).and_then(|h| ClientHeader::parse(h).ok())
    } else {
        None
    };
    let v2_bits = HEADER_EXTEND | HEADER_SEQNO64B | HEADER_UDPTESTS | HEADER_VERSION2;
    match (at12, at16) {
        // A 2.0.5 client asking for a return test.
        (Some(h12), _) if h12.flags & HEADER_VERSION1 != 0 && h12.flags & v2_bits == 0 => {
            (Layout::V205, false, Some(h12))
        }
        // 2.0.10+/2.1 (our client too): the high id word (0) at 12, flags at 16.
        (Some(h12), Some(h16))
            if h12.flags == 0 && (h16.flags & (v2_bits | HEADER_VERSION1) != 0) =>
        {
            (Layout::V21, h16.flags & HEADER_SEQNO64B != 0, Some(h16))
        }
        // A plain 2.0.5 client, or one we cannot tell: the 2.0.5 layout, no return test.
        (Some(h12), _) => (Layout::V205, false, Some(h12)),
        _ => (Layout::V205, false, None),
    }
}

/// The server's report (v1 fields) as sent back after a UDP FIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ServerReport {
    /// Flag bits (HEADER_VERSION1 = valid).
    pub flags: u32,
    /// Bytes the server received.
    pub total_len: u64,
    /// Test duration the server saw: seconds and microseconds.
    pub stop_sec: i32,
    pub stop_usec: i32,
    /// Datagrams lost.
    pub error_cnt: i32,
    /// Datagrams out of order.
    pub outorder_cnt: i32,
    /// Datagrams the server counted.
    pub datagrams: i32,
    /// Jitter: seconds and microseconds.
    pub jitter_sec: i32,
    pub jitter_usec: i32,
    /// The 2.1 extension (HEADER_EXTEND in the flags): one-way transit figures.
    #[serde(default)]
    pub ext: Option<ReportExt>,
}

/// Size of the v1 server report fields, bytes.
pub(crate) const SERVER_REPORT_LEN: usize = 40;
/// Size of the 2.1 report extension (15 words) that follows the v1 fields, bytes.
pub(crate) const SERVER_REPORT_EXT_LEN: usize = 60;

/// The 2.1 server report extension (`server_hdr_extension`, docs/iperf2-wire.md §4): one-way
/// transit figures as (whole seconds, microseconds) pairs; M2 (sum of squared differences
/// from the mean) travels in µs², i.e. s² × 10¹², split the same way. A 2.1 client prints the
/// latency (avg = sum / count, stdev = √(M2 / (count − 1))) and PPS = `ipg_cnt` / `ipg_sum`
/// from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ReportExt {
    /// Smallest transit: (s, µs).
    pub min: (i32, i32),
    /// Largest transit: (s, µs).
    pub max: (i32, i32),
    /// Sum of the transits: (s, µs).
    pub sum: (i32, i32),
    /// Mean transit: (s, µs).
    pub mean: (i32, i32),
    /// M2 in µs²: (whole, millionths).
    pub m2: (i32, i32),
    /// The last difference from the mean (stock bookkeeping; we send 0).
    pub vd: (i32, i32),
    /// Datagrams measured.
    pub cnt_transit: i32,
    /// Stock servers send datagrams per second here and 1 in `ipg_sum`.
    pub ipg_cnt: i32,
    pub ipg_sum: i32,
}

// f64 → i32 `as` saturates (NaN → 0): the wanted clamp to the wire word.
#[allow(clippy::cast_possible_truncation)]
fn split_secs(v: f64) -> (i32, i32) {
    let whole = v.trunc();
    (
        whole.clamp(i32::MIN as f64, i32::MAX as f64) as i32,
        ((v - whole) * 1e6).round() as i32,
    )
}

fn join_secs(p: (i32, i32)) -> f64 {
    p.0 as f64 + p.1 as f64 / 1e6
}

impl ReportExt {
    /// From latency figures (ms) measured over `seconds`.
    // f64 → i32 `as` saturates: the wanted clamp to the wire words.
    #[allow(clippy::cast_possible_truncation)]
    pub fn from_latency(l: &crate::engine::report::LatencyMs, seconds: f64) -> ReportExt {
        let t = crate::engine::udp::Transit::from_ms(l);
        let pps = if seconds > 0.0 {
            (l.count as f64 / seconds).round()
        } else {
            0.0
        };
        ReportExt {
            min: split_secs(t.min),
            max: split_secs(t.max),
            sum: split_secs(t.sum),
            mean: split_secs(t.mean),
            m2: split_secs(t.m2 * 1e12),
            vd: (0, 0),
            cnt_transit: l.count.min(i32::MAX as u64) as i32,
            ipg_cnt: pps.min(i32::MAX as f64) as i32,
            ipg_sum: 1,
        }
    }

    /// The latency figures (ms) it carries; None when it counted no datagram.
    pub fn latency_ms(&self) -> Option<crate::engine::report::LatencyMs> {
        let n = self.cnt_transit;
        (n > 0).then(|| {
            let m2 = join_secs(self.m2) * 1e-12;
            crate::engine::report::LatencyMs {
                count: n as u64,
                avg: join_secs(self.sum) / n as f64 * 1e3,
                min: join_secs(self.min) * 1e3,
                max: join_secs(self.max) * 1e3,
                stdev: if n < 2 {
                    0.0
                } else {
                    (m2.max(0.0) / (f64::from(n) - 1.0)).sqrt() * 1e3
                },
            }
        })
    }

    fn words(&self) -> [u32; 15] {
        let [a, b, c, d, e, f] = [self.min, self.max, self.sum, self.mean, self.m2, self.vd]
            .map(|x| [x.0 as u32, x.1 as u32]);
        [
            a[0],
            a[1],
            b[0],
            b[1],
            c[0],
            c[1],
            d[0],
            d[1],
            e[0],
            e[1],
            f[0],
            f[1],
            self.cnt_transit as u32,
            self.ipg_cnt as u32,
            self.ipg_sum as u32,
        ]
    }

    fn parse(b: &[u8], at: usize) -> ReportExt {
        let w = |i: usize| be32(b, at.saturating_add(i.saturating_mul(4))) as i32;
        ReportExt {
            min: (w(0), w(1)),
            max: (w(2), w(3)),
            sum: (w(4), w(5)),
            mean: (w(6), w(7)),
            m2: (w(8), w(9)),
            vd: (w(10), w(11)),
            cnt_transit: w(12),
            ipg_cnt: w(13),
            ipg_sum: w(14),
        }
    }
}

impl ServerReport {
    /// Duration, seconds.
    pub fn seconds(&self) -> f64 {
        self.stop_sec as f64 + self.stop_usec as f64 / 1e6
    }

    /// Jitter, ms.
    pub fn jitter_ms(&self) -> f64 {
        self.jitter_sec as f64 * 1e3 + self.jitter_usec as f64 / 1e3
    }

    /// Received bitrate, bits/s (0 for a zero duration).
    pub fn bits_per_second(&self) -> f64 {
        let s = self.seconds();
        if s > 0.0 {
            self.total_len as f64 * 8.0 / s
        } else {
            0.0
        }
    }

    /// Parse the v1 fields at `at`. Errors when the datagram is too short.
    pub fn parse_at(b: &[u8], at: usize) -> Result<ServerReport, WireError> {
        let need = at.saturating_add(SERVER_REPORT_LEN);
        if b.len() < need {
            return Err(WireError::Short { got: b.len(), need });
        }
        let w = |i: usize| be32(b, at.saturating_add(i.saturating_mul(4)));
        Ok(ServerReport {
            flags: w(0),
            total_len: ((w(1) as u64) << 32) | w(2) as u64,
            stop_sec: w(3) as i32,
            stop_usec: w(4) as i32,
            error_cnt: w(5) as i32,
            outorder_cnt: w(6) as i32,
            datagrams: w(7) as i32,
            jitter_sec: w(8) as i32,
            jitter_usec: w(9) as i32,
            ext: (w(0) & HEADER_EXTEND != 0
                && b.len() >= need.saturating_add(SERVER_REPORT_EXT_LEN))
            .then(|| ReportExt::parse(b, need)),
        })
    }

    /// Find the report in a reply to our FIN: offset 12 (2.0.5) if HEADER_VERSION1 is set
    /// there, else offset 16 (2.0.10+/2.1). Errors when neither holds a valid report (an
    /// echo of the FIN from a server that lost the flow).
    pub fn parse(b: &[u8]) -> Result<(ServerReport, Layout), WireError> {
        for layout in [Layout::V205, Layout::V21] {
            if let Ok(r) = ServerReport::parse_at(b, layout.offset()) {
                if r.flags & HEADER_VERSION1 != 0 {
                    return Ok((r, layout));
                }
            }
        }
        if b.len() < 12 + SERVER_REPORT_LEN {
            return Err(WireError::Short {
                got: b.len(),
                need: 12 + SERVER_REPORT_LEN,
            });
        }
        Err(WireError::NoReport)
    }

    /// The reply datagram to a FIN: `len` bytes (at least offset + 40, 128 for 2.1 peers),
    /// zero except the report; the 2.0.5 layout keeps the FIN's first 12 bytes as 2.0.5
    /// servers do, and sets only HEADER_VERSION1, the 2.1 layout adds HEADER_SEQNO64B, and
    /// with [`ServerReport::ext`] HEADER_EXTEND and the 15 extension words after the v1
    /// fields (the 64-bit count words after them stay 0).
    pub fn datagram(&self, layout: Layout, fin: &[u8], len: usize) -> Vec<u8> {
        let at = layout.offset();
        let ext = self.ext.filter(|_| layout == Layout::V21);
        let min = match layout {
            Layout::V205 => at.saturating_add(SERVER_REPORT_LEN),
            Layout::V21 => 128,
        };
        let mut b = vec![0u8; len.clamp(min, 65507)];
        if layout == Layout::V205 {
            for (d, s) in b.iter_mut().zip(fin).take(12) {
                *d = *s;
            }
        }
        let flags = match layout {
            Layout::V205 => HEADER_VERSION1,
            Layout::V21 => HEADER_VERSION1 | HEADER_SEQNO64B,
        } | if ext.is_some() { HEADER_EXTEND } else { 0 };
        let words = [
            flags,
            low32(self.total_len >> 32),
            low32(self.total_len),
            self.stop_sec as u32,
            self.stop_usec as u32,
            self.error_cnt as u32,
            self.outorder_cnt as u32,
            self.datagrams as u32,
            self.jitter_sec as u32,
            self.jitter_usec as u32,
        ];
        for (i, w) in words.iter().enumerate() {
            put32(&mut b, at.saturating_add(i.saturating_mul(4)), *w);
        }
        if let Some(e) = ext {
            for (i, w) in e.words().iter().enumerate() {
                put32(
                    &mut b,
                    at.saturating_add(SERVER_REPORT_LEN)
                        .saturating_add(i.saturating_mul(4)),
                    *w,
                );
            }
        }
        b
    }
}

/// Whether the first bytes a peer sent on an iperf3 port look like an iperf 2 client: a
/// v1 header (flags with only iperf 2 bits, 1..=1000 streams, a port) or, with `-C`, the
/// digit filler. An iperf3 cookie is 36 characters of `a-z2-7` then NUL, which neither is.
pub fn looks_like_iperf2(first: &[u8]) -> bool {
    if first.starts_with(b"0123456789") {
        return true;
    }
    let Ok(h) = ClientHeader::parse(first) else {
        return false;
    };
    let known = HEADER_VERSION1
        | HEADER_EXTEND
        | HEADER_UDPTESTS
        | HEADER_KEYCHECK
        | HEADER_SEQNO64B
        | HEADER_VERSION2
        | HEADER_V2PEERDETECT
        | 0x0080_0000
        | HEADER_LEN_BIT
        | 0xFFFF;
    let len_ok = h.flags & HEADER_LEN_BIT != 0 || h.flags & 0xFFFE == 0;
    h.flags & !known == 0
        && len_ok
        && (1..=1000).contains(&h.num_threads)
        && (0..=65535).contains(&h.port)
}

/// Whether the first bytes a peer sent on an iperf 2 port look like an iperf3 client's
/// cookie (36 characters of `a-z2-7`, then NUL).
pub fn looks_like_iperf3(first: &[u8]) -> bool {
    match (first.get(..36), first.get(36)) {
        (Some(cookie), Some(0)) => cookie
            .iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'2'..=b'7')),
        _ => false,
    }
}

/// Length of our iperf3 peer-type "auto" probe, bytes (`engine::iperf3::wire::probe_cookie`).
pub(crate) const AUTO_PROBE_LEN: usize = 37;

/// True while `first` (the first bytes of a TCP connection) can still grow into the
/// peer-type "auto" probe: four NUL bytes, 32 cookie characters (`a-z`, `2-7`), a NUL
/// (docs/iperf2-wire.md §6). A stock iperf 2 header never looks like this: its second word
/// (`numThreads`, `-P`) is small, never four letters.
pub(crate) fn could_be_auto_probe(first: &[u8]) -> bool {
    first.len() <= AUTO_PROBE_LEN
        && first.iter().enumerate().all(|(i, &c)| match i {
            0..=3 | 36 => c == 0,
            _ => matches!(c, b'a'..=b'z' | b'2'..=b'7'),
        })
}

/// True when `first` is exactly the peer-type "auto" probe (37 bytes, see
/// [`could_be_auto_probe`]): not the start of a test, so it is not recorded as one.
pub(crate) fn is_auto_probe(first: &[u8]) -> bool {
    first.len() == AUTO_PROBE_LEN && could_be_auto_probe(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_probe_is_recognised_and_stock_headers_are_not() {
        let p = crate::engine::iperf3::wire::probe_cookie();
        assert!(is_auto_probe(&p));
        assert!(could_be_auto_probe(&p[..24]));
        // A real cookie, a 2.1.8 header (-P 4) and a 2.0.5 -C client's digit filler are not.
        assert!(!is_auto_probe(&crate::engine::iperf3::wire::make_cookie()));
        let mut h = ClientHeader {
            num_threads: 4,
            amount: -300,
            ..Default::default()
        }
        .to_bytes()
        .to_vec();
        h.resize(37, 0);
        assert!(!could_be_auto_probe(&h[..24]));
        assert!(!is_auto_probe(&h));
        assert!(!is_auto_probe(b"0123456789012345678901234567890123456"));
        let mut longer = p.to_vec();
        longer.push(b'0');
        assert!(!is_auto_probe(&longer));
    }

    /// Hex dump of the first 64 bytes of a capture line to bytes.
    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn words(ws: &[u32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    const VEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/iperf2-2.1.8/");

    /// The "first 64: …" hex of the first TCP connection in a capture file.
    fn first_tcp(file: &str) -> Vec<u8> {
        let text = std::fs::read_to_string(format!("{VEC}{file}")).unwrap();
        let line = text.lines().find(|l| l.starts_with("TCP ")).unwrap();
        hex(line.rsplit("first 64: ").next().unwrap().trim())
    }

    /// The `ints=[…]` of every UDP datagram in a capture file, as bytes.
    fn udp_lines(file: &str) -> Vec<(String, Vec<u8>)> {
        let text = std::fs::read_to_string(format!("{VEC}{file}")).unwrap();
        text.lines()
            .filter(|l| l.contains("ints=["))
            .map(|l| {
                let inner = l.split("ints=[").nth(1).unwrap().trim_end_matches(']');
                let ws: Vec<u32> = inner
                    .split(", ")
                    .map(|x| {
                        u32::from_str_radix(x.trim_matches('\'').trim_start_matches("0x"), 16)
                            .unwrap()
                    })
                    .collect();
                (l.trim().to_string(), words(&ws))
            })
            .collect()
    }

    #[test]
    fn tcp_plain_capture() {
        let b = first_tcp("capture-tcp.txt");
        let h = ClientHeader::parse(&b).unwrap();
        assert_eq!(h.flags, 0x4001_0078);
        assert_eq!((h.num_threads, h.port, h.amount), (1, 5001, -100));
        assert_eq!(h.return_test(), Return::None);
        assert_eq!(h.tcp_len(), 60);
        assert_eq!(h.amount(), Amount::Time(1.0));
        assert!(looks_like_iperf2(&b));
        assert!(!looks_like_iperf3(&b));
        // `-b 10M` travels in the extension (10 × 2^20 bits/s).
        assert_eq!(ext_rate(&b), Some(10 * 1024 * 1024));
        assert_eq!(ClientHeader::parse(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn tcp_return_captures() {
        let r = ClientHeader::parse(&first_tcp("capture-tcp_r.txt")).unwrap();
        assert_eq!((r.flags, r.port), (0xc001_0078, 5002));
        assert_eq!(r.return_test(), Return::Tradeoff);
        assert!(r.check_return().is_ok());
        let d = ClientHeader::parse(&first_tcp("capture-tcp_d.txt")).unwrap();
        assert_eq!(d.flags, 0xc001_0079);
        assert_eq!(d.return_test(), Return::Dual);
    }

    #[test]
    fn tcp_compat_capture_has_no_header() {
        let b = first_tcp("capture-tcp_C.txt");
        // The filler's first word has bit 31 clear: no return test is triggered.
        let h = ClientHeader::parse(&b).unwrap();
        assert_eq!(h.return_test(), Return::None);
        assert!(looks_like_iperf2(&b));
    }

    #[test]
    fn udp_capture_datagrams_and_report() {
        let lines = udp_lines("capture-udp.txt");
        let (_, first) = &lines[0];
        let (layout, wide, h) = classify_udp(first);
        assert_eq!((layout, wide), (Layout::V21, true));
        assert_eq!(h.unwrap().flags, 0x4801_0098);
        assert_eq!(h.unwrap().return_test(), Return::None);
        assert_eq!(read_udp_id(first, true).unwrap().1, 1);
        assert_eq!(
            read_udp_id(first, true).unwrap().0,
            0x6b0c_ffa0 * 1_000_000 + 0x19613
        );
        let fin = &lines
            .iter()
            .find(|(l, _)| l.contains("'0xffffffa3'"))
            .unwrap()
            .1;
        assert_eq!(read_udp_id(fin, true).unwrap().1, -93);
        assert_eq!(read_udp_id(fin, false).unwrap().1, -93);
        let (_, rep) = lines.last().unwrap();
        let (r, layout) = ServerReport::parse(rep).unwrap();
        assert_eq!(layout, Layout::V21);
        assert_eq!(r.flags, 0x8800_0000);
        assert_eq!(r.total_len, 136_710);
        assert_eq!((r.stop_sec, r.stop_usec), (1, 0x453a));
        assert!((r.seconds() - 1.017722).abs() < 1e-9);
        assert_eq!((r.error_cnt, r.outorder_cnt, r.datagrams), (0, 0, 93));
        assert!((r.jitter_ms() - 0.005).abs() < 1e-12);
        // Our own 2.1-layout reply has the same report where a 2.1 client reads it.
        let ours = r.datagram(Layout::V21, fin, 128);
        assert_eq!(ours.len(), 128);
        assert_eq!(&ours[..16], &[0u8; 16]);
        assert_eq!(ServerReport::parse(&ours).unwrap(), (r, Layout::V21));
    }

    #[test]
    fn udp_return_capture_asks_for_a_return_test() {
        let lines = udp_lines("capture-udp_r.txt");
        let (layout, _, h) = classify_udp(&lines[0].1);
        assert_eq!(layout, Layout::V21);
        let h = h.unwrap();
        assert_eq!(h.flags, 0xc801_0098);
        assert_eq!(h.return_test(), Return::Tradeoff);
        assert_eq!((h.port, h.amount), (5001, -100));
        let (r, _) = ServerReport::parse(&lines.last().unwrap().1).unwrap();
        assert_eq!((r.datagrams, r.error_cnt), (93, 0));
    }

    #[test]
    fn udp_header_extension_is_laid_out_as_2_1_8_sends_it() {
        // `iperf -c … -u -b 1M -t 1 -r` (2.1.8): v1 fields and the first 24 extension bytes.
        let lines = udp_lines("capture-udp_r.txt");
        let theirs = &lines[0].1[16..64];
        let h = ClientHeader {
            flags: HEADER_VERSION1,
            num_threads: 1,
            port: 5001,
            buffer_len: 0,
            win_band: 0,
            amount: -100,
        };
        let ours = udp_client_header_ext(&h, 1_048_576);
        assert_eq!(ours.len(), 76);
        assert_eq!(&ours[..48], theirs);
        // The rate travels in the extension, where 2.1+ servers read it (and ext_rate too).
        assert_eq!(ext_rate(&ours), Some(1_048_576));
        let fast = udp_client_header_ext(&h, 100_000_000);
        assert_eq!(ext_rate(&fast), Some(100_000_000));
        let d = ClientHeader::parse(&udp_client_header_ext(
            &ClientHeader {
                flags: HEADER_VERSION1 | RUN_NOW,
                ..h
            },
            1,
        ))
        .unwrap();
        assert_eq!(d.flags, 0xc801_0099);
        assert_eq!(d.return_test(), Return::Dual);
    }

    /// A constructed 2.0.5 exchange: a 1470-byte FIN (id −1001) and the server's reply, the
    /// FIN buffer with bytes 12..51 overwritten by the report (flags 0x80000000).
    #[test]
    fn udp_205_report_layout() {
        let mut fin = vec![b'0'; 1470];
        put32(&mut fin, 0, (-1001i32) as u32);
        put32(&mut fin, 4, 1_700_000_000);
        put32(&mut fin, 8, 250_000);
        let hdr = ClientHeader {
            flags: 0,
            num_threads: 1,
            port: 5001,
            buffer_len: 0,
            win_band: 1_048_576,
            amount: -1000,
        };
        fin[12..36].copy_from_slice(&hdr.to_bytes());
        assert_eq!(classify_udp(&fin), (Layout::V205, false, Some(hdr)));
        assert_eq!(read_udp_id(&fin, false).unwrap().1, -1001);
        let mut reply = fin.clone();
        let report = words(&[0x8000_0000, 0, 1_470_000, 10, 12_345, 7, 2, 1000, 0, 1_234]);
        reply[12..52].copy_from_slice(&report);
        let (r, layout) = ServerReport::parse(&reply).unwrap();
        assert_eq!(layout, Layout::V205);
        assert_eq!(r.total_len, 1_470_000);
        assert!((r.seconds() - 10.012345).abs() < 1e-9);
        assert_eq!((r.error_cnt, r.outorder_cnt, r.datagrams), (7, 2, 1000));
        assert!((r.jitter_ms() - 1.234).abs() < 1e-12);
        // What we send a 2.0.5 client: the same bytes where it reads them.
        let ours = r.datagram(Layout::V205, &fin, fin.len());
        assert_eq!(ours.len(), 1470);
        assert_eq!(&ours[..52], &reply[..52]);
        // An echo without a report, and truncated datagrams, are errors, not panics.
        assert_eq!(ServerReport::parse(&fin), Err(WireError::NoReport));
        assert!(ServerReport::parse(&reply[..51]).is_err());
        assert!(matches!(
            ServerReport::parse(&[0u8; 20]),
            Err(WireError::Short { .. })
        ));
    }

    /// The first 64 bytes of a stock 2.1.8 `iperf -c … -u --trip-times -e -b 1M -t 0.5`
    /// datagram (tcpdump on loopback): v1 flags 0x680100d8 (EXTEND | UDPTESTS | SEQNO64B |
    /// LEN_BIT | 108 bytes), extension flags word 0x00100000 (upper flag TRIPTIME).
    const TRIP_DGRAM: [u32; 16] = [
        0x0000_0001,
        0x6b11_7309,
        0x0006_7d16,
        0,
        0x6801_00d8,
        1,
        0x176f,
        0,
        0,
        0xffff_ffce,
        0,
        0,
        0x0010_0000,
        0x0002_0001,
        0x0008_0003,
        0,
    ];

    #[test]
    fn trip_times_flag_word() {
        let d = words(&TRIP_DGRAM);
        let (layout, wide, h) = classify_udp(&d);
        assert_eq!((layout, wide), (Layout::V21, true));
        assert_eq!(h.unwrap().flags, 0x6801_00d8);
        assert_eq!(ext_upper_flags(&d[16..]), Some(0x0010));
        assert!(trip_times(&d[16..]));
        // The same client without --trip-times: flags word 0.
        let mut plain = d.clone();
        plain[48..52].copy_from_slice(&[0; 4]);
        assert_eq!(ext_upper_flags(&plain[16..]), Some(0));
        assert!(!trip_times(&plain[16..]));
        // Other upper flags alone (e.g. NOUDPFIN 0x0008) are not trip-times.
        plain[48..52].copy_from_slice(&0x0008_0000u32.to_be_bytes());
        assert!(!trip_times(&plain[16..]));
        // No HEADER_EXTEND (2.0.5 style), or a header cut before the word: not asked.
        let mut v1 = d.clone();
        v1[16..20].copy_from_slice(&0x0801_00d8u32.to_be_bytes());
        assert_eq!(ext_upper_flags(&v1[16..]), None);
        assert_eq!(ext_upper_flags(&d[16..51]), None);
        assert!(!trip_times(&d[16..20]));
        // Our own 2.1 header sets no upper flag.
        let ours = udp_client_header_ext(&ClientHeader::default(), 1_000_000);
        assert_eq!(ext_upper_flags(&ours), Some(0));
    }

    /// The report a stock 2.1.8 `iperf -s -u -e` sent to a `--trip-times -b 10M -t 1` client
    /// (tcpdump, payload bytes 16..144), which printed
    /// `0.001 ms 0/895 (0%) 0.011/0.002/0.588/0.020 ms 893 pps`.
    const STOCK_TRIP_REPORT: [u32; 28] = [
        0xc800_0000,
        0,
        0x0014_1342,
        1,
        0x06cf,
        0,
        0,
        0x037f,
        0,
        1, // v1
        0,
        2,
        0,
        0x024c,
        0,
        0x26af,
        0,
        0x0b,
        0x0005_317d,
        0x0001_b016,
        0,
        0xffff_ffff, // transit
        0x037f,
        0x037d,
        1, // cntTransit, IPGcnt, IPGsum
        0,
        0,
        0, // 64-bit count words
    ];

    #[test]
    fn report_extension_round_trip_with_stock_values() {
        let mut d = vec![0u8; 16];
        d.extend(words(&STOCK_TRIP_REPORT));
        assert_eq!(d.len(), 128);
        let (r, layout) = ServerReport::parse(&d).unwrap();
        assert_eq!(layout, Layout::V21);
        assert_eq!((r.datagrams, r.total_len), (895, 1_315_650));
        let e = r.ext.expect("extension");
        assert_eq!((e.cnt_transit, e.ipg_cnt, e.ipg_sum), (895, 893, 1));
        let l = e.latency_ms().unwrap();
        // What the stock client printed: 0.011/0.002/0.588/0.020 ms.
        assert_eq!(l.count, 895);
        let shown = format!("{:.3}/{:.3}/{:.3}/{:.3}", l.avg, l.min, l.max, l.stdev);
        assert_eq!(shown, "0.011/0.002/0.588/0.020");
        // Our figures → our report datagram → parsed back: the same latency, and the words
        // sit where the stock client reads them.
        let ours = crate::engine::iperf2::UdpFigures::from_report(&r);
        assert_eq!(ours.latency_ms, Some(l));
        let rep = ours.to_report();
        let b = rep.datagram(Layout::V21, &[], 1470);
        assert_eq!(
            be32(&b, 16),
            HEADER_VERSION1 | HEADER_EXTEND | HEADER_SEQNO64B
        );
        let (back, _) = ServerReport::parse(&b).unwrap();
        let lb = back.ext.unwrap().latency_ms().unwrap();
        assert_eq!(lb.count, 895);
        for (a, b) in [
            (lb.avg, l.avg),
            (lb.min, l.min),
            (lb.max, l.max),
            (lb.stdev, l.stdev),
        ] {
            assert!((a - b).abs() < 2e-6, "{lb:?} vs {l:?}");
        }
        assert_eq!(be32(&b, 56 + 4), 2, "min µs word");
        assert_eq!(be32(&b, 56 + 48), 895, "cntTransit word");
        assert_eq!(be32(&b, 56 + 52), 893, "IPGcnt: datagrams per second");
        assert_eq!(be32(&b, 56 + 56), 1, "IPGsum");
        // M2 in µs², whole part 340349 as the stock server sent it.
        assert_eq!(be32(&b, 56 + 32), 0x0005_317d);
        // Without latency figures: no HEADER_EXTEND, no extension words.
        let plain = crate::engine::iperf2::UdpFigures {
            latency_ms: None,
            ..ours
        }
        .to_report()
        .datagram(Layout::V21, &[], 128);
        assert_eq!(be32(&plain, 16), HEADER_VERSION1 | HEADER_SEQNO64B);
        assert!(ServerReport::parse(&plain).unwrap().0.ext.is_none());
        assert!(plain[56..116].iter().all(|&x| x == 0));
        // A 2.0.5 client never gets the extension (it would not expect it).
        let old = rep.datagram(Layout::V205, &[0u8; 12], 100);
        assert_eq!(be32(&old, 12), HEADER_VERSION1);
        // A report cut inside the extension parses without it, and never panics.
        let (cut, _) = ServerReport::parse(&d[..100]).unwrap();
        assert!(cut.ext.is_none());
    }

    /// The first 80 bytes of a stock 2.1.8 `iperf -c … --trip-times -t 0.3 -l 1000` (tcpdump
    /// on loopback) and of the same from 2.2.1, then the first 96 bytes of 2.1.8's first
    /// write (its buffer's stale header words around the burst fields).
    const TRIP_HDR_218: [u32; 20] = [
        0x4001_00a0,
        1,
        0x3e1f,
        0x03e8,
        0,
        0xffff_ffe2,
        0,
        0,
        0x0010_0000,
        0x0002_0001,
        0x0008_0003,
        0,
        0,
        0,
        0,
        0,
        0x6b16_bea0,
        0x0002_3110,
        0,
        0,
    ];
    const TRIP_HDR_221: [u32; 20] = [
        0x4001_00a0,
        1,
        0x3e1f,
        0x03e8,
        0,
        0xffff_ffe2,
        0,
        0,
        0x0010_0000,
        0x0002_0002,
        0x0001_0001,
        0,
        0,
        0,
        0,
        0,
        0x6b16_bea4,
        0x000c_e78c,
        0,
        0,
    ];
    const TRIP_BURST_218: [u32; 24] = [
        0x4001_00a0,
        1,
        0x3e1f,
        0x6b16_bea0,
        0x0002_3142,
        0x6b16_bea0,
        0x0002_314c,
        0,
        0x0010_0000,
        0x0002_0001,
        0x0008_0003,
        1,
        0x03e8,
        0x03ea,
        0,
        0,
        0,
        0x6b16_bea0,
        0x0002_3110,
        0,
        0,
        0,
        0,
        0,
    ];

    #[test]
    fn tcp_trip_times_header_and_burst_as_stock_writes_them() {
        for (v, start) in [
            (TRIP_HDR_218, (0x6b16_bea0, 0x0002_3110)),
            (TRIP_HDR_221, (0x6b16_bea4, 0x000c_e78c)),
        ] {
            let b = words(&v);
            let h = ClientHeader::parse(&b).unwrap();
            assert_eq!(h.tcp_len(), TCP_TRIP_HEADER_LEN);
            assert_eq!(h.return_test(), Return::None);
            assert!(tcp_trip_times(&b));
            assert_eq!(tcp_trip_start(&b), Some(start));
            // Cut before the start time, or without the flag: not a trip-times header.
            assert!(!tcp_trip_times(&b[..35]));
            assert_eq!(tcp_trip_start(&b[..71]), None);
            let mut plain = b.clone();
            plain[32..36].copy_from_slice(&[0; 4]);
            assert!(!tcp_trip_times(&plain));
        }
        // Ours: the 2.1.8 bytes, with our own header fields.
        let h = ClientHeader::parse(&words(&TRIP_HDR_218)).unwrap();
        let ours =
            tcp_client_header_trip(&ClientHeader { flags: 0, ..h }, (0x6b16_bea0, 0x0002_3110));
        assert_eq!(ours, words(&TRIP_HDR_218));
        // The burst: write time, id 1, size 1000; the stale words are ignored.
        let b = BurstHeader::parse(&words(&TRIP_BURST_218)).unwrap();
        assert_eq!(b.write, (0x6b16_bea0, 0x0002_314c));
        assert_eq!((b.id, b.size, b.seqno), (1, 1000, 1002));
        assert_eq!(b.write_us(), Some(0x6b16_bea0 * 1_000_000 + 0x0002_314c));
        let mut mine = vec![b'0'; 1000];
        b.write_into(&mut mine, (0x6b16_bea0, 0x0002_3142));
        assert_eq!(BurstHeader::parse(&mine), Some(b));
        assert_eq!(&mine[12..28], &words(&TRIP_BURST_218)[12..28]);
        assert_eq!(&mine[44..60], &words(&TRIP_BURST_218)[44..60]);
        assert_eq!(BurstHeader::parse(&mine[..95]), None);
        let bad = BurstHeader {
            write: (1, 1_000_000),
            ..b
        };
        assert_eq!(bad.write_us(), None);
        // A block shorter than the header is left alone.
        let mut short = vec![1u8; 50];
        b.write_into(&mut short, (0, 0));
        assert!(short.iter().all(|&x| x == 1));
    }

    #[test]
    fn short_and_hostile_input() {
        for n in 0..CLIENT_HEADER_LEN {
            assert!(ClientHeader::parse(&vec![0xff; n]).is_err());
            assert!(!looks_like_iperf2(&vec![0xff; n]));
            let _ = classify_udp(&vec![0xff; n]);
            assert!(read_udp_id(&vec![0xff; n], n < 12).is_none() || n >= 12);
        }
        let h = ClientHeader::parse(&[0xff; 24]).unwrap();
        assert!(h.check_return().is_err());
        assert_eq!(h.tcp_len(), 1024);
        assert!(!looks_like_iperf2(&[0xff; 40]));
        let cookie = b"abcdefghijklmnopqrstuvwxyz2345672345\0";
        assert!(looks_like_iperf3(cookie));
        assert!(!looks_like_iperf2(cookie));
    }

    #[test]
    fn written_ids_round_trip() {
        let mut b = [0u8; 16];
        write_udp_id(&mut b, -93, 5, 6);
        assert_eq!(&b[12..16], &[0xff; 4]);
        assert_eq!(read_udp_id(&b, true), Some((5_000_006, -93)));
        write_udp_id(&mut b, (1 << 33) + 7, 0, 0);
        assert_eq!(read_udp_id(&b, true).unwrap().1, (1 << 33) + 7);
        assert_eq!(read_udp_id(&b, false).unwrap().1, 7);
    }
}
