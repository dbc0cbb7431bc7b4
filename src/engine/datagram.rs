//! The UDP datagram headers netperfd writes and reads, as bytes and nothing else: iperf3's
//! (`docs/iperf3-wire.md` §8.2: sent time, then the sequence number, 32 or 64 bits) and iperf
//! 2's (`docs/iperf2-wire.md`: the sequence number's low word, sent time, the high word; a
//! negative number is the FIN). The generic UDP loops (`engine::udp`) use both without
//! importing a protocol folder; `engine::iperf2::wire` re-exports iperf 2's. Parsers check
//! lengths and never panic; writers need the header's length of room.
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

/// Smallest iperf 2 UDP datagram we send, bytes: 16 bytes of datagram header, the 24-byte
/// client header, and room for the server report (16 + 40) in the same size.
pub(crate) const IPERF2_MIN_LEN: usize = 60;

// ------------------------------------------------------------------ iperf3

/// Header size in bytes: 12 with 32-bit sequence numbers, 16 with 64-bit ones.
pub(crate) fn header_len(wide: bool) -> usize {
    if wide {
        16
    } else {
        12
    }
}

/// Write the header: big-endian seconds, microseconds, sequence number (32 or 64 bits; a
/// 32-bit header carries the low 32 bits). `buf` must hold [`header_len`] bytes; a shorter
/// buffer is left as it is (the senders size every datagram to at least the header).
pub(crate) fn write_header(buf: &mut [u8], sec: u32, usec: u32, seq: u64, wide: bool) {
    put32(buf, 0, sec);
    put32(buf, 4, usec);
    if wide {
        put32(buf, 8, (seq >> 32) as u32);
        put32(buf, 12, (seq & 0xffff_ffff) as u32);
    } else {
        put32(buf, 8, (seq & 0xffff_ffff) as u32);
    }
}

/// Read a header: (sent time in µs, sequence number as on the wire). `None` if too short.
pub fn read_header(buf: &[u8], wide: bool) -> Option<(i64, u64)> {
    if buf.len() < header_len(wide) {
        return None;
    }
    let sec = i64::from(be32(buf, 0));
    let usec = i64::from(be32(buf, 4));
    let seq = if wide {
        (u64::from(be32(buf, 8)) << 32) | u64::from(be32(buf, 12))
    } else {
        u64::from(be32(buf, 8))
    };
    // u32 seconds × 10^6 + u32 µs stays far below i64::MAX (~4.3e15 + 4.3e9).
    Some((micros(sec, usec), seq))
}

/// `sec` × 10^6 + `usec`, saturating (both come off the wire).
fn micros(sec: i64, usec: i64) -> i64 {
    sec.saturating_mul(1_000_000).saturating_add(usec)
}

// ------------------------------------------------------------------ iperf 2

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

/// Wall clock as (seconds, microseconds): iperf 2 timestamps its datagrams with it.
pub(crate) fn wall_now() -> (u32, u32) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    // iperf 2 carries 32-bit seconds: they wrap in 2106, as on the wire.
    ((d.as_secs() & 0xffff_ffff) as u32, d.subsec_micros())
}

/// Read a datagram's (sent time in µs, signed sequence number). `wide`: the high 32 bits are
/// at offset 12 (HEADER_SEQNO64B). A negative number is the FIN. `None` if too short.
pub fn read_udp_id(b: &[u8], wide: bool) -> Option<(i64, i64)> {
    if b.len() < if wide { 16 } else { 12 } {
        return None;
    }
    let lo = be32(b, 0);
    let id = if wide {
        (((be32(b, 12) as u64) << 32) | lo as u64) as i64
    } else {
        lo as i32 as i64
    };
    let sent = micros(i64::from(be32(b, 4)), i64::from(be32(b, 8)));
    Some((sent, id))
}

/// Write a datagram header (2.1 layout): low id word at 0, seconds at 4, µs at 8, high id word
/// at 12. `b` must hold 16 bytes.
pub(crate) fn write_udp_id(b: &mut [u8], id: i64, sec: u32, usec: u32) {
    let id = id as u64;
    put32(b, 0, (id & 0xffff_ffff) as u32);
    put32(b, 4, sec);
    put32(b, 8, usec);
    put32(b, 12, (id >> 32) as u32);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_headers_round_trip_at_both_widths() {
        let mut b = [0u8; 16];
        write_header(&mut b, 7, 250_000, (1 << 32) + 5, true);
        assert_eq!(read_header(&b, true), Some((7_250_000, (1 << 32) + 5)));
        assert_eq!(b[..4], 7u32.to_be_bytes());
        write_header(&mut b, 1, 2, (1 << 32) + 5, false);
        assert_eq!(read_header(&b, false), Some((1_000_002, 5)));
        assert_eq!((header_len(false), header_len(true)), (12, 16));
        assert_eq!(read_header(&b[..11], false), None);
        assert_eq!(read_header(&b[..15], true), None);
    }
}
