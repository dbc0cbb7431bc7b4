//! The UDP datagram headers netperfd writes and reads, as bytes and nothing else: iperf3's
//! (`docs/iperf3-wire.md` §8.2: sent time, then the sequence number, 32 or 64 bits) and iperf
//! 2's (`docs/iperf2-wire.md`: the sequence number's low word, sent time, the high word; a
//! negative number is the FIN). The generic UDP loops (`engine::udp`) use both without
//! importing a protocol folder; `engine::iperf2::wire` re-exports iperf 2's. Parsers check
//! lengths and never panic; writers need the header's length of room.

/// Smallest iperf 2 UDP datagram we send, bytes: 16 bytes of datagram header, the 24-byte
/// client header, and room for the server report (16 + 40) in the same size.
pub const IPERF2_MIN_LEN: usize = 60;

// ------------------------------------------------------------------ iperf3

/// Header size in bytes: 12 with 32-bit sequence numbers, 16 with 64-bit ones.
pub fn header_len(wide: bool) -> usize {
    if wide {
        16
    } else {
        12
    }
}

/// Write the header: big-endian seconds, microseconds, sequence number (32 or 64 bits).
pub fn write_header(buf: &mut [u8], sec: u32, usec: u32, seq: u64, wide: bool) {
    buf[0..4].copy_from_slice(&sec.to_be_bytes());
    buf[4..8].copy_from_slice(&usec.to_be_bytes());
    if wide {
        buf[8..16].copy_from_slice(&seq.to_be_bytes());
    } else {
        buf[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
    }
}

/// Read a header: (sent time in µs, sequence number as on the wire). `None` if too short.
pub fn read_header(buf: &[u8], wide: bool) -> Option<(i64, u64)> {
    if buf.len() < header_len(wide) {
        return None;
    }
    let sec = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as i64;
    let usec = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]) as i64;
    let seq = if wide {
        u64::from_be_bytes([
            buf[8], buf[9], buf[10], buf[11], buf[12], buf[13], buf[14], buf[15],
        ])
    } else {
        u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as u64
    };
    Some((sec * 1_000_000 + usec, seq))
}

// ------------------------------------------------------------------ iperf 2

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Wall clock as (seconds, microseconds): iperf 2 timestamps its datagrams with it.
pub fn wall_now() -> (u32, u32) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() as u32, d.subsec_micros())
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
    let sent = be32(b, 4) as i64 * 1_000_000 + be32(b, 8) as i64;
    Some((sent, id))
}

/// Write a datagram header (2.1 layout): low id word at 0, seconds at 4, µs at 8, high id word
/// at 12. `b` must hold 16 bytes.
pub fn write_udp_id(b: &mut [u8], id: i64, sec: u32, usec: u32) {
    put32(b, 0, id as u64 as u32);
    put32(b, 4, sec);
    put32(b, 8, usec);
    put32(b, 12, ((id as u64) >> 32) as u32);
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
