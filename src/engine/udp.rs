//! UDP streams: the receiver's accounting (loss as expected
//! minus unique received, out-of-order and duplicates apart, 64-bit sequence numbers, RFC 3550
//! §6.4.1 jitter), a burst-free token-bucket pacer, and the send/receive loops on the fast path
//! (sendmmsg/recvmmsg, UDP GSO/GRO when the kernel offers them, with fallback).
//! The datagram headers (iperf3's and iperf 2's) are `engine::datagram`'s.
//! Units: bytes, bits/s, seconds; sequence numbers start at 1.

use crate::engine::datagram::{header_len, read_header, read_udp_id, write_header, write_udp_id};
use crate::engine::tcp::Shared;
use serde::{Deserialize, Serialize};
use std::net::UdpSocket;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The 4 bytes a client sends to open a UDP stream ("9876" on the wire, §7.3).
pub(crate) const HELLO: [u8; 4] = *b"9876";
/// The 4 bytes the server answers with ("6789").
pub(crate) const REPLY: [u8; 4] = *b"6789";
/// Largest UDP payload over IPv4, bytes (65535 − 20 − 8).
pub(crate) const MAX_UDP_LEN_V4: usize = 65507;
/// Largest UDP payload over IPv6, bytes (65535 − 8; jumbograms aside).
pub(crate) const MAX_UDP_LEN_V6: usize = 65527;
/// Most datagrams handed to the kernel in one call: one sendmmsg call, or one GSO
/// super-datagram (older kernels refuse more than 64 segments with EINVAL, UDP_MAX_SEGMENTS).
const MAX_BATCH: usize = 64;
/// Most datagrams a paced sender sends per wake-up (one sendmmsg call, or GSO
/// super-datagrams of at most [`MAX_BATCH`]), before the receive-buffer limit
/// ([`BATCH_RCVBUF_BUDGET`]): 0.8 ms of traffic is 195 datagrams of 512 bytes at 1 Gbit/s.
const MAX_PACED_BATCH: usize = 256;
/// The receive buffer of a stock receiver, bytes: Linux's `net.core.rmem_default` (212,992
/// on common kernels), which `iperf3 -s` keeps for its UDP socket (it sets none).
pub(crate) const STOCK_RCVBUF: usize = 212_992;
/// Most receive buffer (skb truesize, see [`rcv_truesize`]) one paced wake-up's datagrams may
/// take at the receiver, bytes: three quarters of [`STOCK_RCVBUF`], 159,744. A batch sent
/// back to back reaches a receiver on the same host (veth, loopback) at once, faster than it
/// reads: its socket must hold the whole batch. 0.8 ms at 1 Gbit/s of 512-byte datagrams is
/// 195 of them, 262 KB of truesize: a stock `iperf3 -s` lost 18.7 % of them, every one in its
/// UdpRcvbufErrors (iperf3 3.21 `--gsro`'s largest batch, 127 datagrams, 171 KB: ~5 %). The
/// quarter left covers what the receiver has not read yet of the previous batch. Over a wire
/// no faster than the rate the batch arrives spread at line rate and the limit costs nothing.
pub(crate) const BATCH_RCVBUF_BUDGET: usize = STOCK_RCVBUF / 4 * 3;
/// What one GSO segment costs a receiver's socket beyond its payload, bytes: 832 (the
/// `sk_buff`, its shared info, headroom and headers; measured on Linux 6.18, veth and loopback:
/// truesize = payload + 832 exactly for 18…1472-byte datagrams segmented from one GSO send).
const GSO_SEGMENT_OVERHEAD: usize = 832;

/// Estimated receive-buffer cost (skb truesize) of one datagram of `len` payload bytes at a
/// receiver on veth or loopback, bytes; `gso`: it left in a GSO super-datagram. Segments of a
/// GSO send are sized to fit: `len` + 832. A datagram sent on its own is copied into one slab
/// object, the power of two that holds it with 384 bytes of headroom, headers and shared info,
/// plus 320 for the `sk_buff` (measured on Linux 6.18 over loopback: 832 up to 128 bytes, 1,280
/// for 256–512, 2,304 for 700–1,472, 4,352 for 2,000; the estimate is never below these and at
/// most 5 % above). A real NIC's driver sets its own truesize, but its wire spreads the batch.
pub(crate) fn rcv_truesize(len: usize, gso: bool) -> usize {
    if gso {
        len.saturating_add(GSO_SEGMENT_OVERHEAD)
    } else {
        len.saturating_add(384)
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX)
            .saturating_add(320)
    }
}
/// Most datagrams a kernel-paced sender hands over per wake-up: 4096 (8 ms at 1 Gbit/s is 690
/// datagrams of 1448 bytes, 1953 of 512), and at most [`MAX_KERNEL_BATCH_BYTES`].
const MAX_KERNEL_BATCH: usize = 4096;
/// Most bytes a kernel-paced sender hands over per wake-up (its buffer): 2 MiB.
const MAX_KERNEL_BATCH_BYTES: usize = 2 << 20;
/// Most messages in one sendmmsg call (the kernel's UIO_MAXIOV).
const SENDMMSG_MAX: usize = 1024;
/// Bytes of the Ethernet header, counted by fq's pacing in every segment (with the IP and UDP
/// headers: `qdisc_pkt_len`).
const ETH_HEADER: usize = 14;

/// Extend a 32-bit wire sequence number to 64 bits: the value ≡ `s32` (mod 2^32) closest to
/// `reference` (the highest sequence seen so far). Correct across 2^31 and 2^32.
pub(crate) fn extend_seq(s32: u32, reference: u64) -> u64 {
    let base = reference & !0xFFFF_FFFF;
    let cand = base | s32 as u64;
    let mut best = cand;
    let dist = |x: u64| x.abs_diff(reference);
    if cand >= 1 << 32 && dist(cand - (1 << 32)) < dist(best) {
        best = cand - (1 << 32);
    }
    if dist(cand + (1 << 32)) < dist(best) {
        best = cand + (1 << 32);
    }
    best
}

/// Window (in sequence numbers) within which duplicates are told from late datagrams.
const DUP_WINDOW: u64 = 1 << 16;

/// Receiver-side accounting of one UDP stream.
///
/// * expected = highest sequence number seen (`max_seq`); lost = expected − unique received,
///   never negative and never above expected;
/// * a datagram below `max_seq` not seen before is out-of-order (and, being unique, cancels
///   the loss it was counted as); one seen before is a duplicate and changes nothing else;
/// * jitter per RFC 3550 §6.4.1: D = (R_j − S_j) − (R_i − S_i) on consecutive unique
///   datagrams, J += (|D| − J)/16, in seconds; the first value is the first |D| (no ramp from
///   0), and a constant offset between the two clocks cancels out.
#[derive(Debug, Clone)]
pub struct UdpRecv {
    wide: bool,
    /// iperf 2 datagrams: sequence number at offset 0 (high word at 12 when `wide`), sender
    /// wall-clock time at 4/8, a negative sequence number marks the FIN.
    iperf2: bool,
    /// iperf 2: the FIN's sequence number (the count of datagrams the sender numbered), once
    /// the first FIN arrived.
    pub fin: Option<u64>,
    /// Highest (64-bit) sequence number seen.
    pub max_seq: u64,
    /// Distinct sequence numbers received (≤ max_seq).
    pub unique: u64,
    /// Late datagrams (below max_seq, first time seen).
    pub out_of_order: u64,
    /// Datagrams seen before.
    pub duplicates: u64,
    /// Datagrams that are not of this test (too short for a header, sequence 0).
    pub stray: u64,
    /// Jitter in seconds (0 until two datagrams arrived).
    pub jitter: f64,
    jitter_set: bool,
    prev_transit: Option<i64>,
    prev_sent: Option<i64>,
    bitmap: Vec<u64>,
    /// Values at the end of the omit period (excluded from the results).
    pub omit_max_seq: u64,
    /// Highest sequence number among datagrams read after the receiver stopped counting
    /// ([`UdpRecv::note_late`]): they arrived late, not lost. 0 when none.
    pub late_max_seq: u64,
    /// When the last datagram of this test arrived (wall clock, µs since the epoch, as
    /// `arrival_us` of [`UdpRecv::on_datagram`]); 0 before the first.
    pub last_arrival_us: i64,
    pub omit_unique: u64,
    /// Distinct datagrams above `omit_max_seq` (the ones the results count).
    pub unique_after_omit: u64,
    /// Peak bits per second over any 1 ms window of arrival times (burstiness).
    pub peak_1ms_bps: f64,
    win: std::collections::VecDeque<(i64, u64)>,
    win_bytes: u64,
    /// iperf 2 `--trip-times`: one-way transit of every counted datagram, whole test and
    /// since the last interval sample (None: not asked, see [`UdpRecv::measure_transit`]).
    pub transit: Option<Transit>,
    /// The same since the last [`UdpRecv::take_transit_interval`].
    pub transit_interval: Option<Transit>,
}

/// Running one-way transit statistics (Welford's online mean and M2), seconds: what an iperf
/// 2 server keeps for `--trip-times` and sends back in its report's extension.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Transit {
    /// Datagrams measured.
    pub count: u64,
    /// Smallest and largest transit, s.
    pub min: f64,
    pub max: f64,
    /// Sum of the transits, s.
    pub sum: f64,
    /// Running mean, s.
    pub mean: f64,
    /// Sum of squared differences from the mean, s².
    pub m2: f64,
}

impl Transit {
    /// Add one transit time, seconds (may be negative when the clocks differ).
    pub(crate) fn add(&mut self, secs: f64) {
        self.count += 1;
        if self.count == 1 {
            self.min = secs;
            self.max = secs;
        } else {
            self.min = self.min.min(secs);
            self.max = self.max.max(secs);
        }
        self.sum += secs;
        let d = secs - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (secs - self.mean);
    }

    /// Sample standard deviation (n − 1), s; 0 below two values.
    pub(crate) fn stdev(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2.max(0.0) / (self.count - 1) as f64).sqrt()
        }
    }

    /// The figures in ms; `None` when nothing was measured.
    pub(crate) fn to_ms(self) -> Option<crate::engine::report::LatencyMs> {
        (self.count > 0).then(|| crate::engine::report::LatencyMs {
            count: self.count,
            avg: self.mean * 1e3,
            min: self.min * 1e3,
            max: self.max * 1e3,
            stdev: self.stdev() * 1e3,
        })
    }

    /// Back from ms figures (sum = avg × count, M2 = stdev² × (count − 1)).
    pub(crate) fn from_ms(l: &crate::engine::report::LatencyMs) -> Transit {
        Transit {
            count: l.count,
            min: l.min / 1e3,
            max: l.max / 1e3,
            sum: l.avg / 1e3 * l.count as f64,
            mean: l.avg / 1e3,
            m2: (l.stdev / 1e3).powi(2) * l.count.saturating_sub(1) as f64,
        }
    }
}

impl UdpRecv {
    /// Fresh accounting; `wide` = 64-bit sequence numbers on the wire.
    pub fn new(wide: bool) -> UdpRecv {
        UdpRecv {
            wide,
            iperf2: false,
            fin: None,
            max_seq: 0,
            unique: 0,
            out_of_order: 0,
            duplicates: 0,
            stray: 0,
            jitter: 0.0,
            jitter_set: false,
            prev_transit: None,
            prev_sent: None,
            bitmap: vec![0; (DUP_WINDOW / 64) as usize],
            omit_max_seq: 0,
            late_max_seq: 0,
            last_arrival_us: 0,
            omit_unique: 0,
            unique_after_omit: 0,
            peak_1ms_bps: 0.0,
            win: std::collections::VecDeque::new(),
            win_bytes: 0,
            transit: None,
            transit_interval: None,
        }
    }

    /// Measure every counted datagram's one-way transit (arrival − the sender's timestamp;
    /// iperf 2 `--trip-times`) from now on.
    pub(crate) fn measure_transit(&mut self) {
        self.transit.get_or_insert_with(Transit::default);
        self.transit_interval.get_or_insert_with(Transit::default);
    }

    /// The transit figures since the last call (interval), and a fresh start for the next.
    pub(crate) fn take_transit_interval(&mut self) -> Option<Transit> {
        self.transit_interval.as_mut().map(std::mem::take)
    }

    fn bit(&mut self, seq: u64) -> (usize, u64) {
        let i = (seq % DUP_WINDOW) as usize;
        (i / 64, 1u64 << (i % 64))
    }

    /// Fresh accounting of iperf 2 datagrams (see `engine::iperf2::wire`); `wide` = the
    /// client set HEADER_SEQNO64B (high sequence word at offset 12). The FIN (negative id) is
    /// counted like a datagram of its sequence number, as iperf 2 servers do; repeats of it
    /// are not.
    pub fn new_iperf2(wide: bool) -> UdpRecv {
        UdpRecv {
            iperf2: true,
            ..UdpRecv::new(wide)
        }
    }

    /// Count one datagram: its bytes (`len`), arrival time in µs on the local clock.
    /// Returns false for a stray datagram (not counted).
    pub fn on_datagram(&mut self, data: &[u8], arrival_us: i64) -> bool {
        let parsed = if self.iperf2 {
            match read_udp_id(data, self.wide) {
                Some((sent_us, id)) if id < 0 => {
                    if self.fin.is_some() {
                        // A repeated FIN: the client waits for our report, nothing to count.
                        return false;
                    }
                    let seq = id.unsigned_abs();
                    self.fin = Some(seq);
                    Some((sent_us, if self.wide { seq } else { seq & 0xFFFF_FFFF }))
                }
                Some((sent_us, id)) => Some((sent_us, id as u64)),
                None => None,
            }
        } else {
            read_header(data, self.wide)
        };
        let Some((sent_us, wire_seq)) = parsed else {
            self.stray += 1;
            return false;
        };
        let seq = if self.wide {
            wire_seq
        } else {
            extend_seq(wire_seq as u32, self.max_seq.max(1))
        };
        if seq == 0 {
            self.stray += 1;
            return false;
        }
        self.last_arrival_us = self.last_arrival_us.max(arrival_us);
        if seq > self.max_seq {
            // Clear the bits of the sequence numbers we now expect.
            let gap = seq - self.max_seq;
            if gap >= DUP_WINDOW {
                self.bitmap.iter_mut().for_each(|w| *w = 0);
            } else {
                for s in self.max_seq + 1..=seq {
                    let (w, m) = self.bit(s);
                    self.bitmap[w] &= !m;
                }
            }
            let (w, m) = self.bit(seq);
            self.bitmap[w] |= m;
            self.max_seq = seq;
            self.unique += 1;
            self.unique_after_omit += 1;
        } else if self.max_seq - seq >= DUP_WINDOW {
            // Too old to tell: count it as a late datagram.
            self.unique += 1;
            self.out_of_order += 1;
            if seq > self.omit_max_seq {
                self.unique_after_omit += 1;
            }
        } else {
            let (w, m) = self.bit(seq);
            if self.bitmap[w] & m != 0 {
                self.duplicates += 1;
                return true;
            }
            self.bitmap[w] |= m;
            self.unique += 1;
            self.out_of_order += 1;
            if seq > self.omit_max_seq {
                self.unique_after_omit += 1;
            }
        }
        if let Some(t) = self.transit.as_mut() {
            let secs = (arrival_us - sent_us) as f64 / 1e6;
            t.add(secs);
            if let Some(i) = self.transit_interval.as_mut() {
                i.add(secs);
            }
        }
        // Peak rate over a sliding 1 ms window of arrivals: every counted datagram, those of
        // one sender batch too (counting a batch once read 23 Mbit/s for a 100 Mbit/s
        // sender of 6-datagram batches).
        let len = data.len() as u64;
        self.win.push_back((arrival_us, len));
        self.win_bytes += len;
        while let Some(&(t, b)) = self.win.front() {
            if arrival_us - t >= 1000 {
                self.win.pop_front();
                self.win_bytes -= b;
            } else {
                break;
            }
        }
        if self.max_seq - self.omit_max_seq > 1 {
            let bps = self.win_bytes as f64 * 8.0 / 1e-3;
            if bps > self.peak_1ms_bps {
                self.peak_1ms_bps = bps;
            }
        }
        // Datagrams sent in one batch (sendmmsg/GSO) carry one timestamp, and a GRO
        // super-datagram has one arrival time: such a batch is one jitter sample, not many
        // zero differences that would pull the estimate towards 0.
        if self.prev_sent == Some(sent_us) {
            return true;
        }
        self.prev_sent = Some(sent_us);
        let transit = arrival_us - sent_us;
        if let Some(prev) = self.prev_transit {
            let d = (transit - prev).unsigned_abs() as f64 / 1e6;
            if self.jitter_set {
                self.jitter += (d - self.jitter) / 16.0;
            } else {
                self.jitter = d;
                self.jitter_set = true;
            }
        }
        self.prev_transit = Some(transit);
        true
    }

    /// Note a datagram (iperf3 layout) that arrived after the receiver stopped counting:
    /// only its sequence number is kept ([`UdpRecv::late_max_seq`]), so that the loss after
    /// the last datagram received ([`trailing_loss`]) does not count what was still in
    /// flight when the test ended. Figures, bytes and intervals do not change.
    pub(crate) fn note_late(&mut self, data: &[u8]) {
        let Some((_, wire_seq)) = read_header(data, self.wide) else {
            return;
        };
        let seq = if self.wide {
            wire_seq
        } else {
            extend_seq(wire_seq as u32, self.max_seq.max(self.late_max_seq).max(1))
        };
        self.late_max_seq = self.late_max_seq.max(seq);
    }

    /// Lost datagrams so far (whole test): expected − unique, never negative.
    pub fn lost(&self) -> u64 {
        self.max_seq.saturating_sub(self.unique)
    }

    /// The omit period ends: later results exclude what came before; jitter restarts.
    pub(crate) fn end_omit(&mut self) {
        self.omit_max_seq = self.max_seq;
        self.omit_unique = self.unique;
        self.unique_after_omit = 0;
        self.jitter = 0.0;
        self.jitter_set = false;
        self.prev_transit = None;
        self.prev_sent = None;
        self.peak_1ms_bps = 0.0;
        if self.transit.is_some() {
            self.transit = Some(Transit::default());
            self.transit_interval = Some(Transit::default());
        }
    }

    /// Expected datagrams after the omit period.
    pub fn expected_after_omit(&self) -> u64 {
        self.max_seq - self.omit_max_seq
    }

    /// Lost datagrams after the omit period: expected − unique among the datagrams above
    /// the omit boundary (a late one from the omit period changes nothing here).
    pub fn lost_after_omit(&self) -> u64 {
        self.expected_after_omit()
            .saturating_sub(self.unique_after_omit)
    }
}

/// Most datagrams per second one stream is believed to have sent: 200 million (more than a
/// 100 Gbit/s port carries of the smallest iperf3 datagram). A sender's count at the end
/// (it comes from the network) above this many per second of the test is not credible and
/// is not used by [`trailing_loss`].
pub(crate) const MAX_CREDIBLE_DATAGRAMS_PER_SEC: u64 = 200_000_000;

/// How long the tail after the last datagram received must last, s, to count as lost
/// ([`trailing_loss`]): 0.25 s of the sender's average rate. A shorter tail may still be in
/// flight when the receiver stops counting — a queue on the path, or the control
/// connection's TEST_END overtaking the data in another hardware queue — so it is left
/// uncounted, as a gap-counting receiver (stock iperf3) leaves it.
pub(crate) const TRAILING_LOSS_MIN_S: f64 = 0.25;

/// Datagrams lost after the last one the receiver saw: the sender's count of the datagrams
/// it numbered over the whole test (`sender_numbered`, omitted seconds included: iperf3's
/// results `packets` of a sender; its datagrams this host refused to send, `dropped_locally`,
/// are not numbered and not in it) less the highest sequence number the receiver saw
/// (`highest_seen`, the whole test's). A receiver that counts gaps in the sequence never sees
/// these lost: nothing after them shows the gap. 0 when the sender numbered no more than
/// was seen (reordering, duplicates and a smaller count change nothing), and 0 when the tail
/// is shorter than [`TRAILING_LOSS_MIN_S`] at the sender's average rate over `seconds` (it
/// may be in flight, not lost).
///
/// `seconds`: how long the test ran on this host's own clock, s (omit included; never a
/// duration the peer reports). `None` when the count cannot be believed: negative, or above
/// [`MAX_CREDIBLE_DATAGRAMS_PER_SEC`] per second of the test (plus 2 s) — a peer's results
/// come from the network.
pub(crate) fn trailing_loss(sender_numbered: i64, highest_seen: u64, seconds: f64) -> Option<u64> {
    let sent = u64::try_from(sender_numbered).ok()?;
    let after = sent.saturating_sub(highest_seen);
    let secs = if seconds.is_finite() && seconds > 0.0 {
        seconds.min(604_800.0)
    } else {
        0.0
    };
    // Saturating float → integer conversion; a week is more than any test runs.
    let bound = (secs.ceil() as u64)
        .saturating_add(2)
        .saturating_mul(MAX_CREDIBLE_DATAGRAMS_PER_SEC);
    if sent > bound {
        return None;
    }
    // The tail's length in time at the average rate: after / sent × seconds.
    let tail_s = if sent == 0 {
        0.0
    } else {
        after as f64 / sent as f64 * secs
    };
    Some(if tail_s >= TRAILING_LOSS_MIN_S {
        after
    } else {
        0
    })
}

/// Loss in percent of `expected`, clamped to 0..=100; 0 when nothing was expected (no NaN).
pub(crate) fn loss_percent(lost: u64, expected: u64) -> f64 {
    if expected == 0 {
        0.0
    } else {
        (lost.min(expected) as f64 * 100.0 / expected as f64).clamp(0.0, 100.0)
    }
}

pub(crate) use super::pacer::{PacedBy, Pacer, PacerStats, PacingMode};
pub(crate) use super::sys::{fine_timer_slack, mono_now};
use super::sys::{
    getsockopt_int, recvmmsg, send, sendmmsg, sendmmsg_txtime, setsockopt_int, CmsgSlot,
};

/// Ask for a `bytes` receive buffer: SO_RCVBUFFORCE (above rmem_max, needs CAP_NET_ADMIN),
/// else SO_RCVBUF (capped at rmem_max). A deep buffer keeps a briefly busy receiver from
/// dropping datagrams at high rates.
pub(crate) fn deep_recv_buffer(fd: BorrowedFd<'_>, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v);
    }
}

/// Set IP_MTU_DISCOVER=DO (the DF bit) on an IPv4 UDP socket.
pub(crate) fn set_dont_fragment(sock: &UdpSocket) -> std::io::Result<()> {
    setsockopt_int(
        sock.as_fd(),
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )
}

const UDP_SEGMENT: libc::c_int = 103;
use super::sys::UDP_GRO;

/// Turn on UDP GSO with segments of `len` bytes; false when the kernel does not offer it.
pub(crate) fn enable_gso(sock: &UdpSocket, len: usize) -> bool {
    setsockopt_int(sock.as_fd(), libc::SOL_UDP, UDP_SEGMENT, len as libc::c_int).is_ok()
}

fn disable_gso(sock: &UdpSocket) {
    let _ = setsockopt_int(sock.as_fd(), libc::SOL_UDP, UDP_SEGMENT, 0);
}

/// Turn on UDP GRO; false when the kernel does not offer it.
pub(crate) fn enable_gro(sock: &UdpSocket) -> bool {
    setsockopt_int(sock.as_fd(), libc::SOL_UDP, UDP_GRO, 1).is_ok()
}

/// Ask the kernel to report this host's own drops of what a UDP socket sends (IP_RECVERR,
/// and IPV6_RECVERR on an IPv6 socket; both on a dual-stack one): without it a datagram the
/// sending host's qdisc drops (NET_XMIT_DROP) is reported as sent; with it the send call
/// fails with ENOBUFS for that datagram (a GSO super-datagram is one drop, all its
/// datagrams). ICMP errors the socket receives are then queued on its error queue (read with
/// [`drain_error_queue`]) besides the pending error the next send returns. Errors: the
/// kernel refused the option.
pub(crate) fn enable_recverr(sock: &UdpSocket) -> std::io::Result<()> {
    let fd = sock.as_fd();
    match sock.local_addr()? {
        std::net::SocketAddr::V4(_) => setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVERR, 1),
        std::net::SocketAddr::V6(_) => {
            // IPv4-mapped peers go through the IPv4 path, which reads IP_RECVERR.
            let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVERR, 1);
            setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1)
        }
    }
}

/// Most entries read from a socket's error queue in one [`drain_error_queue`] call.
const ERRQUEUE_DRAIN: usize = 256;

/// Read and drop what a socket's error queue holds (IP_RECVERR: ICMP errors the peer's host
/// or a router sent back, the kernel's own EMSGSIZE), at most [`ERRQUEUE_DRAIN`] entries,
/// without blocking. Returns how many came from ICMP (or ICMPv6): the pending error a send
/// call returned was one of those, not this host refusing the send. The queue holds its
/// entries in the socket's receive memory: left undrained it would fill to the receive
/// buffer.
pub(crate) fn drain_error_queue(fd: BorrowedFd<'_>) -> usize {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, SockaddrStorage};
    use std::os::fd::AsRawFd;
    let mut data = [0u8; 256];
    let mut cmsg = nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in6);
    let mut icmp = 0;
    for _ in 0..ERRQUEUE_DRAIN {
        let mut iov = [std::io::IoSliceMut::new(&mut data)];
        let Ok(m) = recvmsg::<SockaddrStorage>(
            fd.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
        ) else {
            break;
        };
        let Ok(cms) = m.cmsgs() else { continue };
        for c in cms {
            let origin = match c {
                ControlMessageOwned::Ipv4RecvErr(e, _) | ControlMessageOwned::Ipv6RecvErr(e, _) => {
                    e.ee_origin
                }
                _ => continue,
            };
            if origin == libc::SO_EE_ORIGIN_ICMP || origin == libc::SO_EE_ORIGIN_ICMP6 {
                icmp += 1;
            }
        }
    }
    icmp
}

/// Sender settings of one UDP stream.
#[derive(Debug, Clone)]
pub(crate) struct UdpSendCfg {
    /// Datagram size in bytes (header included).
    pub len: usize,
    /// Target in bits/s; 0 = as fast as possible.
    pub rate: u64,
    /// 64-bit sequence numbers.
    pub wide: bool,
    /// Payload is the "0123456789" pattern instead of random bytes.
    pub repeating: bool,
    /// Try UDP GSO.
    pub gso: bool,
    /// Send iperf 2 datagrams instead of iperf3 ones.
    pub iperf2: Option<Iperf2Tx>,
    /// Where a paced sender keeps its pacer's figures (lag behind the schedule, busiest 1 ms),
    /// updated as it runs and when it ends.
    pub pacer_stats: Option<Arc<Mutex<PacerStats>>>,
    /// Where the sender says why it sends without GSO (datagrams above the path MTU, or the
    /// kernel refused a GSO batch and it was turned off), for the run's notes.
    pub gso_off: Option<Arc<Mutex<Option<GsoOff>>>>,
    /// Where the sender counts the packets (skbs) it handed the kernel: one per GSO
    /// super-datagram, one per datagram otherwise. A port that counts skbs (a veth) counts
    /// these, not datagrams; the ledger sets them against the port's packet counter.
    pub skbs: Option<Arc<AtomicU64>>,
    /// Where the sender counts the datagrams this host refused to send (the send call failed
    /// with ENOBUFS: the sending port's qdisc was full and dropped them, reported through
    /// IP_RECVERR, see [`enable_recverr`]): a GSO super-datagram refused counts all its
    /// datagrams. They are not counted as sent and not numbered (the next datagram sent
    /// takes the first refused one's sequence number), so the receiver does not count them
    /// lost.
    pub dropped_locally: Option<Arc<AtomicU64>>,
    /// Where the sender counts the ICMP port unreachable errors that came back (a send, or
    /// the pending error of a sendmmsg that stopped short, returned ECONNREFUSED: the peer's
    /// host said nothing listens on the port). The test goes on through them (a stray one
    /// in a run that has a receiver is harmless); a run whose receiver never answered says
    /// so with this count.
    pub port_unreachable: Option<Arc<AtomicU64>>,
    /// How a paced sender asks to be paced (`--udp-pacing`, see [`PacingMode`]).
    pub pacing: PacingMode,
    /// Where a paced sender says who paced it (the kernel's fq or the user-space pacer), for
    /// `end.pacing` and the run's notes.
    pub paced_by: Option<Arc<Mutex<Option<PacedBy>>>>,
}

/// How an iperf 2 sender lays out its datagrams (see `engine::iperf2::wire`).
#[derive(Debug, Clone)]
pub(crate) struct Iperf2Tx {
    /// Bytes written at offset 16 of every datagram (the client header, or empty).
    pub header: Vec<u8>,
    /// Sequence number of the first datagram (0 suits 2.0.5 and 2.1 servers alike).
    pub first_seq: u64,
}

/// Datagrams per wake-up of the sender at this rate: about [`super::pacer::BATCH_TIME`]
/// (0.8 ms) of traffic, 1..256, never more than the pacer's window cap (see
/// [`Pacer::batch_datagrams`]) and never more than a stock receiver's socket holds with room
/// ([`BATCH_RCVBUF_BUDGET`] of [`rcv_truesize`]; `gso`: sent as GSO super-datagrams): e.g. 118
/// datagrams of 512 bytes (195 by time alone at 1 Gbit/s), 69 of 1448 (unchanged). Sent in one
/// sendmmsg call or in GSO super-datagrams of at most 64 datagrams and 65000 bytes. Unpaced:
/// 64, one call. A sender in debt still sends several batches back to back as the pacer's
/// window allows (its catch-up, see [`super::pacer`]).
pub(crate) fn batch_size(rate_bps: u64, len: usize, gso: bool) -> usize {
    if rate_bps == 0 {
        return MAX_BATCH;
    }
    let fits = (BATCH_RCVBUF_BUDGET / rcv_truesize(len, gso).max(1)).clamp(1, MAX_PACED_BATCH);
    Pacer::batch_datagrams(rate_bps, len, fits)
}

/// Datagrams per wake-up of a kernel-paced sender (see [`super::pacer::KERNEL_BATCH_TIME`]):
/// about 8 ms of traffic, 1..=4096 and at most 2 MiB.
pub(crate) fn kernel_batch_size(rate_bps: u64, len: usize) -> usize {
    let max = (MAX_KERNEL_BATCH_BYTES / len.max(1)).clamp(1, MAX_KERNEL_BATCH);
    Pacer::kernel_batch_datagrams(rate_bps, len, max)
}

/// SO_MAX_PACING_RATE for a kernel-paced sender of `len`-byte datagrams at `rate_bps` bits/s
/// of payload, bytes/s: fq counts every segment with its Ethernet, IP and UDP headers
/// (`v6`: IPv6's), and paces at [`super::pacer::KERNEL_MARGIN`] × the rate so the schedule,
/// not fq, sets the average (see the pacer's module docs). At least 1.
pub(crate) fn kernel_pacing_rate(rate_bps: u64, len: usize, v6: bool) -> u64 {
    pacing_rate_times(rate_bps, len, v6, super::pacer::KERNEL_MARGIN)
}

/// As [`kernel_pacing_rate`] at `times` × the rate instead of the margin: with departure
/// times (SO_TXTIME) the socket's pacing rate is [`super::pacer::KERNEL_CATCH_UP`] × the rate,
/// the rate at which the pacer times what is owed (fq ignores the socket's rate for a
/// timestamped skb; the option only bounds anything sent without a time).
pub(crate) fn pacing_rate_times(rate_bps: u64, len: usize, v6: bool, times: f64) -> u64 {
    let hdr = ETH_HEADER + if v6 { V6_OVERHEAD } else { V4_OVERHEAD };
    let len = len.max(1) as f64;
    let wire = rate_bps as f64 / 8.0 * (len + hdr as f64) / len;
    ((wire * times) as u64).max(1)
}

/// Datagrams per kernel call: with GSO at most [`MAX_BATCH`] and [`GSO_MAX_BYTES`] (at least
/// 1); by sendmmsg the whole batch.
fn call_size(len: usize, gso: bool) -> usize {
    if gso {
        (GSO_MAX_BYTES / len.max(1)).clamp(1, MAX_BATCH)
    } else {
        MAX_PACED_BATCH
    }
}

/// Largest GSO super-datagram the sender builds, bytes (below the 64 KiB an IP packet and
/// the kernel's GSO path accept).
const GSO_MAX_BYTES: usize = 65000;

/// How a sender hands its batches to the kernel: one GSO super-datagram (`UDP_SEGMENT` set
/// on the socket) or sendmmsg. A trait so that tests can stand in for a kernel that refuses
/// GSO.
trait BatchTx {
    /// Send `buf` as one GSO super-datagram; the bytes sent (all of `buf`) or the error.
    fn send_gso(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    /// Send `n` datagrams of `len` bytes laid end to end in `buf`; how many went.
    fn send_mmsg(&mut self, buf: &[u8], len: usize, n: usize) -> std::io::Result<usize>;
    /// Turn GSO off on the socket (after the kernel refused it).
    fn disable_gso(&mut self);
    /// The socket's pending error, cleared (SO_ERROR): after a sendmmsg call that sent fewer
    /// messages than asked, the error of the first one that did not go (the kernel keeps it
    /// for the next call otherwise). `None`: none.
    fn take_error(&mut self) -> Option<i32> {
        None
    }
    /// Drain the socket's error queue; how many entries were ICMP errors (see
    /// [`drain_error_queue`]).
    fn drain_errors(&mut self) -> usize {
        0
    }
    /// Send `m` messages of `seg` bytes each, laid end to end in `buf`, message `i` not
    /// before `times_ns[i]` (SCM_TXTIME, CLOCK_MONOTONIC ns; one sendmmsg call on a socket):
    /// GSO super-datagrams when `gso` (the socket's segment size below `seg`), else single
    /// datagrams; how many messages went. The default (test stand-ins) ignores the times.
    fn send_timed(
        &mut self,
        buf: &[u8],
        seg: usize,
        m: usize,
        times_ns: &[u64],
        gso: bool,
    ) -> std::io::Result<usize> {
        let _ = times_ns;
        if gso {
            self.send_gso_many(buf, seg, m)
        } else {
            self.send_mmsg(buf, seg, m)
        }
    }
    /// Send `m` GSO super-datagrams of `seg` bytes each, laid end to end in `buf` (one
    /// sendmmsg call on a socket); how many super-datagrams went.
    fn send_gso_many(&mut self, buf: &[u8], seg: usize, m: usize) -> std::io::Result<usize> {
        let mut sent = 0;
        while sent < m {
            match self.send_gso(&buf[sent * seg..(sent + 1) * seg]) {
                Ok(_) => sent += 1,
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }
}

/// [`BatchTx`] on a real socket.
struct SockTx<'a>(&'a UdpSocket);

impl BatchTx for SockTx<'_> {
    fn send_gso(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        send(self.0.as_fd(), buf)
    }
    fn send_mmsg(&mut self, buf: &[u8], len: usize, n: usize) -> std::io::Result<usize> {
        sendmmsg(self.0.as_fd(), buf, len, n)
    }
    fn disable_gso(&mut self) {
        disable_gso(self.0);
    }
    fn send_gso_many(&mut self, buf: &[u8], seg: usize, m: usize) -> std::io::Result<usize> {
        sendmmsg(self.0.as_fd(), buf, seg, m)
    }
    fn send_timed(
        &mut self,
        buf: &[u8],
        seg: usize,
        m: usize,
        times_ns: &[u64],
        _gso: bool,
    ) -> std::io::Result<usize> {
        sendmmsg_txtime(self.0.as_fd(), buf, seg, m, times_ns)
    }
    fn take_error(&mut self) -> Option<i32> {
        getsockopt_int(self.0.as_fd(), libc::SOL_SOCKET, libc::SO_ERROR)
            .ok()
            .filter(|&e| e != 0)
    }
    fn drain_errors(&mut self) -> usize {
        drain_error_queue(self.0.as_fd())
    }
}

/// Bytes of the IPv4 header (no options) plus the UDP header.
pub(crate) const V4_OVERHEAD: usize = 20 + 8;
/// Bytes of the IPv6 header (no extension headers) plus the UDP header.
pub(crate) const V6_OVERHEAD: usize = 40 + 8;
/// The MTU assumed when the socket cannot tell its path's (not connected, an old kernel):
/// Ethernet's, bytes. A smaller real MTU is caught at run time (see [`send_batch`]).
pub(crate) const ASSUMED_MTU: usize = 1500;
/// Largest datagram put in a GSO batch, bytes: above it a batch is only a few datagrams and
/// sendmmsg costs about the same.
const GSO_MAX_LEN: usize = 16 * 1024;

/// Why a UDP sender does not (or no longer) send GSO batches, for the run's notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum GsoOff {
    /// The datagrams are larger than the path takes in one IP packet: the kernel fragments
    /// each one, and refuses GSO segments above the MTU. `len` and `mtu` in bytes.
    Fragmented { len: usize, mtu: usize },
    /// The kernel refused a GSO batch during the run (`errno`: EMSGSIZE when the path MTU
    /// shrank below a segment, EIO without checksum offload, EINVAL); the refused batch and
    /// the rest of the run went by sendmmsg.
    Refused { errno: i32 },
}

impl GsoOff {
    /// One sentence for the run's notes, e.g. "UDP GSO off: datagrams of 2000 bytes are
    /// IP-fragmented on this path (MTU 1500), each is sent on its own".
    pub fn sentence(&self) -> String {
        match *self {
            GsoOff::Fragmented { len, mtu } => format!(
                "UDP GSO off: datagrams of {len} bytes are IP-fragmented on this path (MTU {mtu}), each is sent on its own"
            ),
            GsoOff::Refused { errno } => format!(
                "UDP GSO turned off during the run: the kernel refused a GSO batch ({}); that batch and the rest went as single datagrams",
                std::io::Error::from_raw_os_error(errno)
            ),
        }
    }
}

/// How a sender hands its datagrams to the kernel, decided once per stream by [`gso_plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GsoPlan {
    /// Send GSO super-datagrams (`UDP_SEGMENT` of the datagram length).
    pub gso: bool,
    /// Most datagrams per kernel call (one GSO super-datagram, or one sendmmsg call).
    pub per_call: usize,
    /// Why GSO is not used, when that is worth a note: datagrams above the path MTU (also
    /// when a batch holds only one of them; the run says how its datagrams went).
    pub off: Option<GsoOff>,
    /// The datagrams are larger than one IP packet of the path (`len` + headers > MTU): the
    /// kernel IP-fragments each one. Then the sender does not ask for its host's own drops
    /// ([`enable_recverr`]): a send fails with ENOBUFS when the queue drops any one fragment,
    /// after the fragments before it have left, so "not sent" would be false (a new-user
    /// tryout: `-l 8000` through a full 50 Mbit/s queue was counted 9,330 datagrams "not
    /// sent" while their first fragments filled the link). Such a datagram is counted as
    /// sent, and the receiver counts it lost.
    pub fragmented: bool,
}

/// Decide GSO for datagrams of `len` bytes (UDP payload) sent `batch` at a time over a path
/// of `mtu` bytes (`None`: unknown, [`ASSUMED_MTU`]); `v6`: the packets carry an IPv6 header
/// ([`V6_OVERHEAD`], else [`V4_OVERHEAD`]). GSO only when every segment fits one IP packet
/// (`len` + headers ≤ MTU: the kernel refuses a larger segment with EMSGSIZE, and a datagram
/// that must be IP-fragmented is sent on its own), a batch has more than one datagram, `len`
/// ≤ 16 KiB and `allowed` (the sender's setting). Pure: no socket, no kernel.
pub(crate) fn gso_plan(
    len: usize,
    v6: bool,
    mtu: Option<usize>,
    batch: usize,
    allowed: bool,
) -> GsoPlan {
    let overhead = if v6 { V6_OVERHEAD } else { V4_OVERHEAD };
    let mtu = mtu.filter(|&m| m > overhead).unwrap_or(ASSUMED_MTU);
    let fits = len.checked_add(overhead).is_some_and(|l| l <= mtu);
    let off = (!fits).then_some(GsoOff::Fragmented { len, mtu });
    let gso = allowed && fits && batch > 1 && len <= GSO_MAX_LEN && len > 0;
    GsoPlan {
        gso,
        per_call: call_size(len, gso),
        off: off.filter(|_| allowed),
        fragmented: !fits,
    }
}

/// The MTU of a connected UDP socket's path, bytes (IP_MTU / IPV6_MTU: the route's MTU,
/// lowered by path-MTU discovery); `None` when the socket cannot tell (not connected).
pub(crate) fn path_mtu(sock: &UdpSocket) -> Option<usize> {
    let fd = sock.as_fd();
    let v = match sock.local_addr().ok()? {
        std::net::SocketAddr::V4(_) => getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU),
        std::net::SocketAddr::V6(_) => getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    v.ok()
        .and_then(|m| usize::try_from(m).ok())
        .filter(|&m| m > 0)
}

/// Whether the packets of a connected socket carry an IPv6 header: an IPv6 peer that is not
/// an IPv4-mapped address (a dual-stack socket sends those as IPv4).
fn sends_ipv6(sock: &UdpSocket) -> bool {
    match sock.peer_addr().or_else(|_| sock.local_addr()) {
        Ok(std::net::SocketAddr::V6(a)) => a.ip().to_ipv4_mapped().is_none(),
        _ => false,
    }
}

/// Send one batch of `n` datagrams of `len` bytes from `buf`: one GSO super-datagram while
/// `gso` holds, else sendmmsg. A kernel that refuses GSO (EMSGSIZE: a segment above the path
/// MTU, the path MTU having shrunk; EIO: no checksum offload; EINVAL) turns GSO off for the
/// rest of the stream, `off` records why, and the same batch goes at once by sendmmsg, so the
/// datagrams the pacer booked are sent now, not a batch later (no rate lost, none counted
/// twice, the sequence continuous). Returns the datagrams sent.
///
/// `skb`: datagrams per GSO super-datagram; when `n` is a multiple of it above it (a
/// kernel-paced batch), the batch goes as `n / skb` super-datagrams in one sendmmsg call.
/// `times`: with departure times (SO_TXTIME), one per datagram of the call (CLOCK_MONOTONIC
/// ns); each message carries its first datagram's.
#[allow(clippy::too_many_arguments)]
fn send_batch(
    tx: &mut impl BatchTx,
    gso: &mut bool,
    off: &mut Option<GsoOff>,
    buf: &[u8],
    len: usize,
    n: usize,
    skb: usize,
    times: Option<&[u64]>,
) -> std::io::Result<usize> {
    // Every message of a timed call carries its time (one left untimed would leave at once,
    // ahead of its flow's timed ones).
    let timed = |tx: &mut dyn FnMut(&[u64]) -> std::io::Result<usize>, per: usize| {
        let t = times.unwrap_or_default();
        let m = n.div_ceil(per.max(1));
        let ts: Vec<u64> = (0..m)
            .map(|i| t.get(i * per).or(t.last()).copied().unwrap_or(0))
            .collect();
        tx(&ts)
    };
    if *gso {
        let sent = if times.is_some() {
            let per = if skb > 0 && n > skb && n % skb == 0 {
                skb
            } else {
                n.max(1)
            };
            timed(
                &mut |ts| tx.send_timed(&buf[..n * len], per * len, ts.len(), ts, true),
                per,
            )
            .map(|m| m * per)
        } else if skb > 0 && n > skb && n % skb == 0 {
            tx.send_gso_many(&buf[..n * len], skb * len, n / skb)
                .map(|m| m * skb)
        } else {
            tx.send_gso(&buf[..n * len]).map(|b| b / len)
        };
        match sent {
            Ok(k) => return Ok(k),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EIO | libc::EINVAL | libc::EMSGSIZE)
                ) =>
            {
                tx.disable_gso();
                *gso = false;
                *off = e.raw_os_error().map(|errno| GsoOff::Refused { errno });
            }
            Err(e) => return Err(e),
        }
    }
    if times.is_some() {
        return timed(&mut |ts| tx.send_timed(buf, len, n, ts, false), 1);
    }
    tx.send_mmsg(buf, len, n)
}

/// Send datagrams until stopped (or the `-n`/`-k` target is reached). Paced
/// ([`UdpSendCfg::rate`] > 0) by [`Pacer`]: one batch of [`batch_size`] datagrams per wake-up
/// (about 0.8 ms of traffic), sent as GSO super-datagrams (`UDP_SEGMENT`, up to 64
/// datagrams or 65000 bytes each) where the kernel offers it, else by one sendmmsg call;
/// every datagram carries its own header and sequence number, so a receiver counts each one. `packets` counts datagrams sent, `bytes`
/// their bytes. Every UDP sender goes through here: the iperf3 client, the server's `-R` /
/// `--bidir` sending side and the iperf 2 paths (`cfg.iperf2`).
pub(crate) fn udp_send_loop(
    sock: UdpSocket,
    cfg: UdpSendCfg,
    bytes: Arc<AtomicU64>,
    packets: Arc<AtomicU64>,
    shared: Arc<Shared>,
) {
    // A failure leaves the default 50 µs slack: pacing still works, with coarser wake-ups.
    let _ = fine_timer_slack();
    let _ = sock.set_write_timeout(Some(crate::engine::tcp::POLL));
    let len = sender_len(&cfg);
    let v6 = sends_ipv6(&sock);
    let paced_by = (cfg.rate > 0).then(|| kernel_or_user(&sock, &cfg, len, v6));
    let kernel = paced_by.is_some_and(|p| p.is_kernel());
    if let (Some(p), Some(slot)) = (paced_by, &cfg.paced_by) {
        if let Ok(mut g) = slot.lock() {
            *g = Some(p);
        }
    }
    // (The plan needs only to know whether a batch holds more than one datagram; the send
    // loop sizes its batches for the GSO it really got.)
    let batch = if kernel {
        kernel_batch_size(cfg.rate, len)
    } else {
        batch_size(cfg.rate, len, cfg.gso)
    };
    let plan = gso_plan(len, v6, path_mtu(&sock), batch, cfg.gso);
    // This host's own drops (a full qdisc on the sending port) as ENOBUFS, not as sent
    // (not for IP-fragmented datagrams: [`GsoPlan::fragmented`]). Those, and with a kernel
    // without it: such drops are counted as sent, as before (and as stock iperf3 does).
    if !plan.fragmented {
        let _ = enable_recverr(&sock);
    }
    let gso = plan.gso && enable_gso(&sock, len);
    if let (Some(off), Some(slot)) = (plan.off, &cfg.gso_off) {
        if let Ok(mut g) = slot.lock() {
            *g = Some(off);
        }
    }
    if kernel {
        let skb = if gso {
            Pacer::kernel_skb_datagrams(cfg.rate, len, call_size(len, true))
        } else {
            1
        };
        let pacing = if paced_by.is_some_and(|p| p.is_txtime()) {
            pacing_rate_times(cfg.rate, len, v6, super::pacer::KERNEL_CATCH_UP)
        } else {
            kernel_pacing_rate(cfg.rate, len, v6)
        };
        let v = kernel_send_buffer(pacing, skb * len);
        if setsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v).is_err() {
            let _ = setsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, v);
        }
    }
    // Forced kernel pacing with no fq on the port: nothing spreads the hand-overs (the
    // kernel pacer then counts each batch as a burst).
    let unspread =
        matches!(paced_by, Some(PacedBy::Kernel { port, .. }) if port.as_str().is_empty());
    let mode = match (kernel, unspread) {
        (false, _) => Mode::User,
        (true, _) if paced_by.is_some_and(|p| p.is_txtime()) => Mode::KernelTxtime,
        (true, false) => Mode::Kernel,
        (true, true) => Mode::KernelUnspread,
    };
    run_sender_mode(
        &mut SockTx(&sock),
        gso,
        mode,
        &cfg,
        &bytes,
        &packets,
        &shared,
    );
}

/// Who paces a sender in [`run_sender_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The user-space pacer (or none, unpaced).
    User,
    /// The kernel, through fq on the port.
    Kernel,
    /// The kernel by `--udp-pacing kernel` on a port without fq: nothing spreads the batches.
    KernelUnspread,
    /// The kernel, through fq on the port, each message with its departure time (SO_TXTIME).
    KernelTxtime,
}

/// Decide who paces a paced sender (see [`super::pacer::decide_pacing`]) and set the socket
/// up for it: under kernel pacing with fq on the port, SO_TXTIME first (departure times:
/// [`PacedBy::KernelTxtime`], SO_MAX_PACING_RATE at [`super::pacer::KERNEL_CATCH_UP`] × the
/// rate); where the kernel refuses it (before 4.19: ENOPROTOOPT; EINVAL) SO_MAX_PACING_RATE at
/// [`kernel_pacing_rate`] alone, as before ([`PacedBy::Kernel`]). A socket whose pacing rate
/// cannot be set is paced in user space. (Forced kernel pacing without fq never asks for
/// departure times: nothing would honour them.)
fn kernel_or_user(sock: &UdpSocket, cfg: &UdpSendCfg, len: usize, v6: bool) -> PacedBy {
    let fd = sock.as_fd();
    let fq = match cfg.pacing {
        PacingMode::User => None,
        _ => crate::engine::netlink::fq_egress(sock),
    };
    // An unset pacing rate reads as ~0 (-1 as an int); anything else is `--fq-rate`'s.
    let rate_set =
        getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE).is_ok_and(|v| v != -1);
    let p = super::pacer::decide_pacing(cfg.pacing, fq.as_deref(), rate_set);
    if !p.is_kernel() {
        return p;
    }
    let p = match p {
        PacedBy::Kernel { port, forced }
            if !port.as_str().is_empty() && super::sys::enable_txtime(fd).is_ok() =>
        {
            PacedBy::KernelTxtime { port, forced }
        }
        p => p,
    };
    let pacing = if p.is_txtime() {
        pacing_rate_times(cfg.rate, len, v6, super::pacer::KERNEL_CATCH_UP)
    } else {
        kernel_pacing_rate(cfg.rate, len, v6)
    };
    if super::sys::set_max_pacing_rate(fd, pacing).is_err() {
        return PacedBy::UserSpace {
            why: super::pacer::UserWhy::NoFq,
        };
    }
    p
}

/// fq's default limit of packets (skbs) queued per flow: beyond it fq drops.
const FQ_FLOW_LIMIT: usize = 100;

/// SO_SNDBUF for a kernel-paced sender (the value to pass: the kernel doubles it), bytes:
/// room for the batch on its way and the queue the pacer lets build in fq
/// ([`super::pacer::KERNEL_BATCH_TIME`] + [`super::pacer::KERNEL_QUEUE`] at `pacing`
/// bytes/s, twice over for the kernel's bookkeeping), but never room for more than 80 % of
/// fq's per-flow limit of super-datagrams of `skb_bytes` (each costs the buffer at least its
/// bytes). The buffer is the real bound on fq's queue: where fq drains slower than its pacing
/// rate (late timers: measured under TCG, where a modelled queue overflowed fq's limit and it
/// dropped 1,023 of 2,688 datagrams), the sender blocks instead of fq dropping.
pub(crate) fn kernel_send_buffer(pacing: u64, skb_bytes: usize) -> libc::c_int {
    let queue = super::pacer::KERNEL_BATCH_TIME + super::pacer::KERNEL_QUEUE;
    let want = (pacing as f64 * queue.as_secs_f64() * 2.0) as usize;
    let most = skb_bytes.max(1).saturating_mul(FQ_FLOW_LIMIT * 8 / 10);
    let v = want.min(most) / 2;
    v.clamp(4096, i32::MAX as usize) as libc::c_int
}

/// Bytes per datagram on the wire for this sender: `cfg.len`, at least the header (and the
/// iperf 2 minimum for iperf 2 datagrams).
fn sender_len(cfg: &UdpSendCfg) -> usize {
    let len = cfg.len.max(header_len(cfg.wide));
    if cfg.iperf2.is_some() {
        len.max(crate::engine::datagram::IPERF2_MIN_LEN)
    } else {
        len
    }
}

/// Datagrams of `len` bytes left before the `-n`/`-k` target (over all streams); at least 1,
/// `usize::MAX` without a target.
fn left_to_send(shared: &Shared, len: usize) -> usize {
    let mut left = u64::MAX;
    if shared.num > 0 {
        let bytes = shared.num.saturating_sub(shared.sent_bytes.load(Relaxed));
        left = left.min(bytes.div_ceil(len.max(1) as u64));
    }
    if shared.blockcount > 0 {
        left = left.min(
            shared
                .blockcount
                .saturating_sub(shared.sent_blocks.load(Relaxed)),
        );
    }
    usize::try_from(left).unwrap_or(usize::MAX).max(1)
}

/// [`run_sender_mode`] paced in user space.
#[cfg(test)]
fn run_sender(
    tx: &mut impl BatchTx,
    gso: bool,
    cfg: &UdpSendCfg,
    bytes: &AtomicU64,
    packets: &AtomicU64,
    shared: &Shared,
) -> Option<Pacer> {
    run_sender_mode(tx, gso, Mode::User, cfg, bytes, packets, shared)
}

/// The send loop of [`udp_send_loop`] on any [`BatchTx`]; `gso`: the socket has UDP GSO on;
/// `mode`: who paces (under the kernel: batches of [`kernel_batch_size`], GSO super-datagrams
/// of about 0.5 ms of traffic, see the pacer's module docs). Returns the pacer (None unpaced) for its
/// figures.
fn run_sender_mode(
    tx: &mut impl BatchTx,
    mut gso: bool,
    mode: Mode,
    cfg: &UdpSendCfg,
    bytes: &AtomicU64,
    packets: &AtomicU64,
    shared: &Shared,
) -> Option<Pacer> {
    // No priority boost for the sender thread: on one host (veth) a nice −10 sender delays
    // the receiver's softirq and its arrival times bunch (measured: busiest 1 ms 1.9–2.5 ×).
    let (mut s, mut pacer) = sender_setup(cfg, mode, gso);
    let len = s.len;
    let keep_stats = |p: &Option<Pacer>| {
        if let (Some(p), Some(st)) = (p, &cfg.pacer_stats) {
            if let Ok(mut g) = st.lock() {
                *g = p.stats();
            }
        }
    };
    let mut batches: u32 = 0;
    let mut refused: Option<GsoOff> = None;
    let mut seq: u64 = cfg.iperf2.as_ref().map(|t| t.first_seq).unwrap_or(1);
    let stopped = || send_stopped(shared);
    loop {
        if stopped() {
            keep_stats(&pacer);
            return pacer;
        }
        if shared.send_limit_reached() {
            shared.wake.notify_one();
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        // Never past a -n/-k target by more than the other streams' share: the last batch
        // is cut to what is left.
        let batch = s.batch.min(left_to_send(shared, len));
        if let Some(p) = pacer.as_mut() {
            if !p.take(batch * len, &stopped) {
                keep_stats(&pacer);
                return pacer;
            }
            if s.txtime {
                // Each datagram gets its message's departure (CLOCK_MONOTONIC ns; 0, no
                // time, only where the sum would overflow a u64).
                let d = p.departures();
                let (unit, clock) = (s.unit, s.clock);
                s.dg_times.clear();
                s.dg_times.extend((0..batch).map(|i| {
                    d.get(i / unit)
                        .or(d.last())
                        .and_then(|&at| super::pacer::txtime_ns(clock.1, clock.0, at))
                        .unwrap_or(0)
                }));
            }
            batches = batches.wrapping_add(1);
            if batches % 64 == 0 {
                keep_stats(&pacer);
            }
        }
        let (sec, usec) = if cfg.iperf2.is_some() {
            crate::engine::datagram::wall_now()
        } else {
            mono_now()
        };
        // Number the batch's datagrams from position `from` on, the first `first`.
        let number = |buf: &mut [u8], from: usize, first: u64| {
            for i in from..batch {
                let s = first + (i - from) as u64;
                if cfg.iperf2.is_some() {
                    write_udp_id(&mut buf[i * len..], s as i64, sec, usec);
                } else {
                    write_header(&mut buf[i * len..], sec, usec, s, cfg.wide);
                }
            }
        };
        number(&mut s.buf, 0, seq);
        let res = send_calls(tx, &mut gso, &mut refused, &mut s, cfg, batch, seq, &number);
        if let AfterBatch::Stop = after_batch(res, tx, cfg, len, &mut seq, bytes, packets, shared) {
            keep_stats(&pacer);
            return pacer;
        }
    }
}

/// The sender is to stop: the test's end, or its sending side's.
fn send_stopped(shared: &Shared) -> bool {
    shared.stop.load(Relaxed) || shared.stop_send.load(Relaxed)
}

/// What [`run_sender_mode`] fixes once per test ([`sender_setup`]), with the buffers it reuses
/// batch after batch.
struct SendSetup {
    /// Bytes per datagram ([`sender_len`]).
    len: usize,
    /// Paced by the kernel (fq), at a rate.
    kernel: bool,
    /// Paced by the kernel with a departure time per message (SO_TXTIME).
    txtime: bool,
    /// Datagrams per batch (one booking of the pacer), before a -n/-k target cuts the last.
    batch: usize,
    /// Datagrams per GSO super-datagram.
    skb: usize,
    /// Datagrams per message the pacer times: `skb` with GSO on at the start, else 1.
    unit: usize,
    /// The pacer's Instant and CLOCK_MONOTONIC ns read together (one reading of each).
    clock: (std::time::Instant, u64),
    /// `batch` datagrams' payload laid end to end (the headers are written per batch).
    buf: Vec<u8>,
    /// Under SO_TXTIME, each datagram's departure in the current batch (CLOCK_MONOTONIC ns).
    dg_times: Vec<u64>,
}

/// The once-per-test part of [`run_sender_mode`] (its arguments' meaning): the batch sizes,
/// the payload and the pacer (None unpaced).
fn sender_setup(cfg: &UdpSendCfg, mode: Mode, gso: bool) -> (SendSetup, Option<Pacer>) {
    let len = sender_len(cfg);
    let kernel = mode != Mode::User && cfg.rate > 0;
    let mut batch = if kernel {
        kernel_batch_size(cfg.rate, len)
    } else {
        batch_size(cfg.rate, len, gso)
    };
    if cfg.rate == 0 && gso {
        // Unpaced: one GSO super-datagram per call.
        batch = call_size(len, true);
    }
    // Datagrams per GSO super-datagram: all of a call's (up to 64 and 65000 bytes), or under
    // kernel pacing about 0.5 ms of traffic, since fq sends each one as a burst.
    let skb = if kernel {
        Pacer::kernel_skb_datagrams(cfg.rate, len, call_size(len, true))
    } else {
        call_size(len, true)
    };
    let mut fill = crate::engine::tcp::payload(len, cfg.repeating);
    if let Some(t) = &cfg.iperf2 {
        fill[12..16].fill(0);
        let n = t.header.len().min(len.saturating_sub(16));
        fill[16..16 + n].copy_from_slice(&t.header[..n]);
    }
    let mut buf = Vec::with_capacity(batch * len);
    for _ in 0..batch {
        buf.extend_from_slice(&fill);
    }
    let txtime = kernel && mode == Mode::KernelTxtime;
    // Departure times: the pacer times each message (one super-datagram, or one datagram
    // without GSO); `clock` ties its Instants to CLOCK_MONOTONIC ns (one reading of each).
    let unit = if gso { skb } else { 1 };
    let clock = (std::time::Instant::now(), super::sys::mono_ns());
    // Lost time is repaid with at most 1.9 ms of traffic in any 1.2 ms (see engine::pacer);
    // only debt beyond 1 s is written off.
    let pacer = if txtime {
        Some(Pacer::new_kernel_txtime(
            cfg.rate,
            super::pacer::MAX_DEBT,
            unit * len,
        ))
    } else if kernel {
        Some(Pacer::new_kernel(
            cfg.rate,
            super::pacer::MAX_DEBT,
            mode == Mode::Kernel,
        ))
    } else if cfg.rate > 0 {
        Some(Pacer::new(cfg.rate, super::pacer::MAX_DEBT))
    } else {
        None
    };
    let s = SendSetup {
        len,
        kernel,
        txtime,
        batch,
        skb,
        unit,
        clock,
        buf,
        dg_times: Vec::new(),
    };
    (s, pacer)
}

/// Send the first `batch` datagrams of `s.buf` (numbered from `seq` by `number`, as in
/// [`run_sender_mode`]) in as many calls as it takes; `gso` and `refused` as
/// [`send_batch`] keeps them. Returns the datagrams sent, or the error of a batch that sent
/// none; datagrams this host refused are counted in `cfg.dropped_locally`.
#[inline]
#[allow(clippy::too_many_arguments)]
fn send_calls(
    tx: &mut impl BatchTx,
    gso: &mut bool,
    refused: &mut Option<GsoOff>,
    s: &mut SendSetup,
    cfg: &UdpSendCfg,
    batch: usize,
    seq: u64,
    number: &impl Fn(&mut [u8], usize, u64),
) -> std::io::Result<usize> {
    let (len, skb, kernel, txtime) = (s.len, s.skb, s.kernel, s.txtime);
    // The batch in calls of at most 64 datagrams (65000 bytes with GSO); a call that
    // sends less than asked (or fails) ends the batch, and the next one numbers on from
    // the last datagram that went. A message this host refused (ENOBUFS: its own queue
    // dropped it) is counted apart and skipped: the rest of the batch is numbered again
    // from the first refused sequence number and sent (what the pacer booked is sent or
    // refused, never both, and the sequence has no gap for the receiver to count lost).
    // `pos`: datagrams of the batch handed over (sent or refused); `went`: sent.
    let (mut pos, mut went, mut dropped_here) = (0usize, 0usize, 0usize);
    let res = loop {
        let left = batch - pos;
        let k = if kernel && *gso && left > skb {
            // Whole super-datagrams in one sendmmsg call; the rest in the next call.
            (left / skb).min(SENDMMSG_MAX) * skb
        } else if kernel && *gso {
            left
        } else {
            left.min(call_size(len, *gso))
        };
        let was_gso = *gso;
        let times = txtime.then(|| s.dg_times.get(pos..).unwrap_or_default());
        let sent = send_batch(tx, gso, refused, &s.buf[pos * len..], len, k, skb, times);
        // Datagrams per message of this call: still `gso` after it, GSO super-datagrams
        // of `per` datagrams each (several in one sendmmsg when kernel-paced), one skb
        // each; else one datagram per message.
        let per = match *gso {
            true if skb > 0 && k > skb && k % skb == 0 => skb,
            true => k.max(1),
            false => 1,
        };
        if let (Ok(n), Some(skbs)) = (&sent, &cfg.skbs) {
            skbs.fetch_add(n.div_ceil(per) as u64, Relaxed);
        }
        if was_gso && !*gso {
            keep_gso_off(cfg, *refused);
        }
        // The datagrams of the message this host's queue refused: the first one of the
        // call, or (a sendmmsg that sent some) the first that did not go, whose error the
        // kernel keeps pending (taken here so that the next call does not fail with it).
        let dropped = match &sent {
            Ok(n) if *n < k => match tx.take_error() {
                Some(libc::ENOBUFS) => per.min(k - n),
                Some(e) => {
                    if e == libc::ECONNREFUSED {
                        if let Some(c) = &cfg.port_unreachable {
                            c.fetch_add(1, Relaxed);
                        }
                    }
                    // An ICMP error's entry on the error queue goes with it.
                    tx.drain_errors();
                    0
                }
                None => 0,
            },
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => per.min(k),
            _ => 0,
        };
        if let Ok(n) = sent {
            pos += n;
            went += n;
        }
        if dropped > 0 {
            pos += dropped;
            dropped_here += dropped;
            if pos >= batch {
                break Ok(went);
            }
            number(&mut s.buf, pos, seq + went as u64);
            continue;
        }
        match sent {
            Ok(n) => {
                if n < k || pos >= batch {
                    break Ok(went);
                }
            }
            // What went counts; the error shows again on the next call if it lasts.
            Err(_) if went > 0 => break Ok(went),
            Err(e) => break Err(e),
        }
    };
    if dropped_here > 0 {
        if let Some(c) = &cfg.dropped_locally {
            c.fetch_add(dropped_here as u64, Relaxed);
        }
    }
    res
}

/// Keep why the kernel refused GSO (`refused`) in `cfg.gso_off`, for the run's report.
fn keep_gso_off(cfg: &UdpSendCfg, refused: Option<GsoOff>) {
    if let (Some(r), Some(slot)) = (refused, &cfg.gso_off) {
        if let Ok(mut g) = slot.lock() {
            *g = Some(r);
        }
    }
}

/// What [`run_sender_mode`]'s loop does after a batch.
enum AfterBatch {
    /// The next batch.
    Next,
    /// Stop the test's sending (the error, if any, is in `shared.error`).
    Stop,
}

/// Count a batch's result `res` (datagrams of `len` bytes sent, or the error of a batch that
/// sent none): move `seq` on, add to `packets`, `bytes` and `shared`'s totals; for errors,
/// wait, go on or stop the test with its error. Returns what the loop does next.
#[inline]
#[allow(clippy::too_many_arguments)]
fn after_batch(
    res: std::io::Result<usize>,
    tx: &mut impl BatchTx,
    cfg: &UdpSendCfg,
    len: usize,
    seq: &mut u64,
    bytes: &AtomicU64,
    packets: &AtomicU64,
    shared: &Shared,
) -> AfterBatch {
    match res {
        Ok(n) => {
            *seq += n as u64;
            packets.fetch_add(n as u64, Relaxed);
            bytes.fetch_add((n * len) as u64, Relaxed);
            shared.sent_bytes.fetch_add((n * len) as u64, Relaxed);
            shared.sent_blocks.fetch_add(n as u64, Relaxed);
            if n == 0 && cfg.rate == 0 {
                // Unpaced, every datagram refused: let the queue drain a little.
                std::thread::yield_now();
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            // A local firewall dropped the first datagram of the batch: it was sent as far
            // as the test is concerned (its sequence number is used), and lost.
            *seq += 1;
            packets.fetch_add(1, Relaxed);
            bytes.fetch_add(len as u64, Relaxed);
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::Interrupted
                    | std::io::ErrorKind::TimedOut
            ) || e.raw_os_error() == Some(libc::ENOBUFS) =>
        {
            // Queue full: try again (datagrams are not reused, so the sequence stays
            // continuous).
            std::thread::yield_now();
        }
        // An ICMP error the peer's host or a router sent back (port unreachable while the
        // peer's socket is not open yet or already closed, a host unreachable that passed):
        // the kernel returns it once on the next send, which sent nothing. Drained from
        // the error queue (IP_RECVERR queues each one) and the test goes on. The same
        // errno with no ICMP behind it (no route here) stops the test below.
        Err(e) if tx.drain_errors() > 0 || e.raw_os_error() == Some(libc::ECONNREFUSED) => {
            if e.raw_os_error() == Some(libc::ECONNREFUSED) {
                if let Some(c) = &cfg.port_unreachable {
                    c.fetch_add(1, Relaxed);
                }
            }
            std::thread::yield_now();
        }
        Err(e) => {
            if !send_stopped(shared) {
                if let Ok(mut g) = shared.error.lock() {
                    if g.is_none() {
                        *g = Some(send_error(&e, len));
                    }
                }
                shared.wake.notify_one();
            }
            return AfterBatch::Stop;
        }
    }
    AfterBatch::Next
}

/// The run's error for a send that failed for good: "UDP send failed: …", naming the datagram
/// length when the kernel says it is too long (EMSGSIZE outside GSO: above the 65,507 / 65,527
/// bytes a UDP datagram can carry, or above the path MTU with the DF bit asked for).
fn send_error(e: &std::io::Error, len: usize) -> String {
    if e.raw_os_error() == Some(libc::EMSGSIZE) {
        format!(
            "UDP send failed: a datagram of {len} bytes is too long to send on this path ({e}); the largest UDP datagram is {MAX_UDP_LEN_V4} bytes over IPv4, {MAX_UDP_LEN_V6} over IPv6, and no larger than the path MTU when fragmenting is not allowed"
        )
    } else {
        format!("UDP send failed: {e}")
    }
}

/// A UDP receiving socket with its recvmmsg buffers: each call reads a batch, splits GRO
/// super-datagrams into their segments, and feeds every datagram to the accounting.
pub(crate) struct Receiver {
    sock: UdpSocket,
    slot: usize,
    n: usize,
    bufs: Vec<u8>,
    ctrl: Vec<CmsgSlot>,
    stats: Arc<Mutex<UdpRecv>>,
    bytes: Arc<AtomicU64>,
}

impl Receiver {
    /// Prepare a socket: deep receive buffer, kernel timestamps, GRO when offered.
    pub(crate) fn new(
        sock: UdpSocket,
        len: usize,
        stats: Arc<Mutex<UdpRecv>>,
        bytes: Arc<AtomicU64>,
    ) -> Receiver {
        let fd = sock.as_fd();
        deep_recv_buffer(fd, 8 * 1024 * 1024);
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        let gro = enable_gro(&sock);
        let (slot, n) = if gro {
            (65536, 16)
        } else {
            (len.max(16), MAX_BATCH)
        };
        Receiver {
            sock,
            slot,
            n,
            bufs: vec![0u8; slot * n],
            ctrl: vec![CmsgSlot::default(); n],
            stats,
            bytes,
        }
    }

    /// One recvmmsg call (`flags`: MSG_WAITFORONE to block for the first datagram,
    /// MSG_DONTWAIT to poll). Returns the payload bytes counted.
    pub(crate) fn recv_once(&mut self, flags: libc::c_int) -> std::io::Result<u64> {
        let (slot, n) = (self.slot, self.n);
        let got = recvmmsg(
            self.sock.as_fd(),
            &mut self.bufs,
            slot,
            &mut self.ctrl,
            n,
            flags,
        )?;
        let now_us = realtime_us();
        let mut counted = 0u64;
        let mut st = match self.stats.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for (i, m) in got.iter().enumerate() {
            let (got, ts, seg) = (m.len.min(slot), m.timestamp_us, m.segment);
            let at = ts.unwrap_or(now_us);
            let data = &self.bufs[i * slot..i * slot + got];
            let seg = seg.filter(|&s| s > 0 && s < got).unwrap_or(got.max(1));
            for chunk in data.chunks(seg) {
                if st.on_datagram(chunk, at) {
                    counted += chunk.len() as u64;
                }
            }
        }
        drop(st);
        self.bytes.fetch_add(counted, Relaxed);
        Ok(counted)
    }

    /// Read whatever is already queued (used at TEST_END, so datagrams that arrived but were
    /// not read yet are not counted as lost). Returns the bytes counted.
    pub(crate) fn drain(&mut self) -> u64 {
        let mut total = 0;
        for _ in 0..10_000 {
            match self.recv_once(libc::MSG_DONTWAIT) {
                Ok(0) => {}
                Ok(b) => total += b,
                Err(_) => break,
            }
        }
        total
    }
}

/// Receive datagrams until stopped: recvmmsg in batches, kernel arrival timestamps
/// (SO_TIMESTAMPNS), GRO super-datagrams split into their segments. Each datagram goes through
/// the stream's [`UdpRecv`]; `bytes` counts payload bytes of counted datagrams. On stop, what
/// is already queued is read too.
pub(crate) fn udp_recv_loop(
    sock: UdpSocket,
    len: usize,
    stats: Arc<Mutex<UdpRecv>>,
    bytes: Arc<AtomicU64>,
    shared: Arc<Shared>,
    check_limit: bool,
) {
    let _ = sock.set_read_timeout(Some(crate::engine::tcp::POLL));
    let mut rx = Receiver::new(sock, len, stats, bytes);
    loop {
        if shared.stop.load(Relaxed) {
            let b = rx.drain();
            shared.recv_bytes.fetch_add(b, Relaxed);
            return;
        }
        match rx.recv_once(libc::MSG_WAITFORONE) {
            Ok(counted) => {
                shared.recv_bytes.fetch_add(counted, Relaxed);
                if check_limit && shared.recv_limit_reached() {
                    shared.wake.notify_one();
                }
            }
            Err(e) => match e.kind() {
                std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::Interrupted
                | std::io::ErrorKind::TimedOut => {}
                _ if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
                _ => {
                    if !shared.stop.load(Relaxed) {
                        if let Ok(mut g) = shared.error.lock() {
                            if g.is_none() {
                                *g = Some(format!("UDP receive failed: {e}"));
                            }
                        }
                        shared.wake.notify_one();
                    }
                    return;
                }
            },
        }
    }
}

pub(crate) fn realtime_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgram(seq: u64, sent_us: i64, wide: bool) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        write_header(
            &mut b,
            (sent_us / 1_000_000) as u32,
            (sent_us % 1_000_000) as u32,
            seq,
            wide,
        );
        b
    }

    /// `--trip-times`: each counted datagram's transit goes into the whole-test and the
    /// interval figures (Welford mean/M2 against a direct computation); a duplicate does not;
    /// the interval restarts when taken.
    #[test]
    fn transit_is_measured_per_counted_datagram() {
        let mut r = UdpRecv::new(false);
        r.on_datagram(&dgram(1, 1_000_000, false), 1_000_500);
        assert!(r.transit.is_none(), "measured without being asked");
        let mut r = UdpRecv::new(false);
        r.measure_transit();
        let transits_us = [500i64, 700, 300, 1500, 600];
        for (i, t) in transits_us.iter().enumerate() {
            let sent = 2_000_000 + i as i64 * 10_000;
            assert!(r.on_datagram(&dgram(i as u64 + 1, sent, false), sent + t));
        }
        // A duplicate of datagram 2 is not measured again.
        r.on_datagram(&dgram(2, 2_010_000, false), 2_010_000 + 90_000);
        let t = r.transit.unwrap();
        assert_eq!(t.count, 5);
        let v: Vec<f64> = transits_us.iter().map(|&x| x as f64 / 1e6).collect();
        let mean = v.iter().sum::<f64>() / 5.0;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0;
        assert!((t.mean - 720e-6).abs() < 1e-12 && (mean - t.mean).abs() < 1e-12);
        assert!((t.stdev() - var.sqrt()).abs() < 1e-12, "{}", t.stdev());
        assert_eq!((t.min, t.max), (300e-6, 1500e-6));
        let ms = t.to_ms().unwrap();
        assert!((ms.avg - 0.72).abs() < 1e-9 && (ms.max - 1.5).abs() < 1e-9);
        // Back from ms figures: the same sum and M2 (what the report extension carries).
        let back = Transit::from_ms(&ms);
        assert!((back.sum - t.sum).abs() < 1e-12 && (back.m2 - t.m2).abs() < 1e-15);
        let i = r.take_transit_interval().unwrap();
        assert_eq!(i.count, 5);
        assert_eq!(r.take_transit_interval().unwrap().count, 0);
        r.on_datagram(&dgram(6, 3_000_000, false), 3_000_250);
        assert_eq!(r.take_transit_interval().unwrap().count, 1);
        assert_eq!(r.transit.unwrap().count, 6);
    }

    fn feed(r: &mut UdpRecv, seqs: &[u64]) {
        for (i, s) in seqs.iter().enumerate() {
            r.on_datagram(
                &dgram(*s, 1_000_000 + i as i64 * 100, r.wide),
                5_000_000 + i as i64 * 100,
            );
        }
    }

    #[test]
    fn header_round_trip_matches_the_capture() {
        // control-trace-udp-b100M.txt: 000001c5 000b9de3 00000001
        let b = [
            0x00, 0x00, 0x01, 0xc5, 0x00, 0x0b, 0x9d, 0xe3, 0x00, 0x00, 0x00, 0x01,
        ];
        assert_eq!(
            read_header(&b, false),
            Some((0x1c5 * 1_000_000 + 0x0b9de3, 1))
        );
        let mut w = [0u8; 16];
        write_header(&mut w, 0x488, 0x68a97, 1, true);
        assert_eq!(
            &w,
            &[0, 0, 4, 0x88, 0, 6, 0x8a, 0x97, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(read_header(&w[..15], true), None);
    }

    /// Issue 39's leftover: datagrams lost after the last one received were never lost (the
    /// tryout's 0 lost of 7 while the sender said it sent 9,378). With the sender's count:
    /// the trailing ones, on top of the gaps; reordering and duplicates change nothing, a
    /// count below what was seen adds nothing, a negative or absurd one is not used.
    #[test]
    fn loss_after_the_last_datagram_comes_from_the_sender_s_count() {
        let mut r = UdpRecv::new(false);
        // 1..=7 arrive, 3 late and 5 twice; 4 never: one gap.
        feed(&mut r, &[1, 2, 5, 3, 6, 5, 7]);
        assert_eq!((r.max_seq, r.unique, r.lost()), (7, 6, 1));
        assert_eq!((r.out_of_order, r.duplicates), (1, 1));
        assert_eq!(trailing_loss(9_378, r.max_seq, 10.0), Some(9_371));
        // Lost in all: the gap and the tail, of the sender's total.
        assert_eq!(r.lost() + 9_371, 9_372);
        // The sender numbered no more than was seen (or fewer: a wrong count) adds nothing.
        assert_eq!(trailing_loss(7, r.max_seq, 10.0), Some(0));
        assert_eq!(trailing_loss(3, r.max_seq, 10.0), Some(0));
        assert_eq!(trailing_loss(0, 0, 0.0), Some(0));
        // From the network: negative, or more than 200 M datagrams a second of the test.
        assert_eq!(trailing_loss(-1, 7, 10.0), None);
        assert_eq!(trailing_loss(i64::MIN, 7, 10.0), None);
        assert_eq!(trailing_loss(i64::MAX, 7, 10.0), None);
        assert_eq!(trailing_loss(i64::MAX, 7, f64::INFINITY), None);
        assert_eq!(trailing_loss(i64::MAX, 7, f64::NAN), None);
        let bound = 12 * MAX_CREDIBLE_DATAGRAMS_PER_SEC;
        assert_eq!(trailing_loss(bound as i64, 7, 10.0), Some(bound - 7));
        assert_eq!(trailing_loss(bound as i64 + 1, 7, 10.0), None);
        // Nothing seen at all: every datagram the sender numbered is lost after the last.
        assert_eq!(trailing_loss(45, 0, 1.0), Some(45));
        // A tail shorter than 0.25 s of the sender's rate may be in flight (a queue on the
        // path, TEST_END overtaking the data): not counted. 10,000 in 10 s is 1,000/s, so
        // 249 after the last is 0.249 s, 250 is 0.25 s.
        assert_eq!(trailing_loss(10_000, 9_751, 10.0), Some(0));
        assert_eq!(trailing_loss(10_000, 9_750, 10.0), Some(250));
        // The attacker tryout: 1.2e14 "sent" in a test this host timed at 1 s.
        assert_eq!(trailing_loss(120_960_400_000_000, 5, 1.0), None);
    }

    #[test]
    fn loss_is_expected_minus_unique() {
        let mut r = UdpRecv::new(false);
        feed(&mut r, &[1, 2, 4, 5, 8]);
        assert_eq!((r.max_seq, r.unique, r.lost()), (8, 5, 3));
        assert_eq!(loss_percent(r.lost(), r.max_seq), 37.5);
    }

    #[test]
    fn late_datagram_cancels_its_loss_and_counts_out_of_order() {
        let mut r = UdpRecv::new(false);
        feed(&mut r, &[1, 2, 4, 3, 5]);
        assert_eq!((r.lost(), r.out_of_order, r.duplicates), (0, 1, 0));
    }

    #[test]
    fn duplicates_change_neither_loss_nor_order() {
        let mut r = UdpRecv::new(false);
        feed(&mut r, &[1, 2, 2, 3, 3, 3, 5]);
        assert_eq!(
            (r.lost(), r.out_of_order, r.duplicates, r.unique),
            (1, 0, 3, 4)
        );
        assert!(loss_percent(r.lost(), r.max_seq) <= 100.0);
    }

    #[test]
    fn loss_never_negative_nor_above_100() {
        let mut r = UdpRecv::new(false);
        // Only duplicates of one datagram.
        feed(&mut r, &[7, 7, 7, 7]);
        assert_eq!(r.lost(), 6);
        assert_eq!(loss_percent(r.lost(), r.max_seq), 6.0 * 100.0 / 7.0);
        assert_eq!(loss_percent(10, 5), 100.0);
        assert_eq!(loss_percent(0, 0), 0.0);
    }

    #[test]
    fn sequence_numbers_wrap_across_2_31_and_2_32() {
        for start in [(1u64 << 31) - 3, (1u64 << 32) - 3] {
            let mut r = UdpRecv::new(false);
            // Prime the receiver near `start` with wide arithmetic, then feed 32-bit values.
            let seqs: Vec<u64> = (start..start + 7).filter(|s| s % 5 != 0).collect();
            for (i, s) in seqs.iter().enumerate() {
                let b = dgram(*s & 0xFFFF_FFFF, i as i64 * 100, false);
                r.on_datagram(&b, 1_000 + i as i64 * 100);
            }
            assert_eq!(r.max_seq, start + 6, "start {start}");
            assert_eq!(
                r.lost() as usize,
                7 - seqs.len() + (start as usize - 1),
                "start {start}"
            );
        }
        assert_eq!(extend_seq(2, (1 << 32) - 2), (1 << 32) + 2);
        assert_eq!(extend_seq(u32::MAX - 1, (1 << 32) + 3), (1 << 32) - 2);
        assert_eq!(extend_seq(5, 3), 5);
    }

    #[test]
    fn sixty_four_bit_sequence_numbers() {
        let mut r = UdpRecv::new(true);
        feed(&mut r, &[(1 << 40) + 1, (1 << 40) + 3]);
        assert_eq!(r.max_seq, (1 << 40) + 3);
        assert_eq!(r.lost(), (1 << 40) + 1);
    }

    #[test]
    fn jitter_is_rfc3550_and_ignores_clock_offset() {
        // Transit alternates 1000 and 1300 µs: |D| = 300 µs each time.
        let run = |offset_us: i64| {
            let mut r = UdpRecv::new(false);
            for i in 0..200i64 {
                let sent = 10_000_000 + i * 1000;
                let transit = if i % 2 == 0 { 1000 } else { 1300 };
                r.on_datagram(
                    &dgram(i as u64 + 1, sent, false),
                    sent + transit + offset_us,
                );
            }
            r.jitter
        };
        let j = run(0);
        assert!((j - 300e-6).abs() < 1e-9, "{j}");
        // An hour of clock offset between the hosts: the same jitter.
        assert_eq!(run(3_600_000_000), j);
        assert_eq!(run(-3_600_000_000), j);
        // The first value is the first transit difference, not an absurd start.
        let mut r = UdpRecv::new(false);
        r.on_datagram(&dgram(1, 0, false), 3_600_000_000 + 500);
        assert_eq!(r.jitter, 0.0);
        r.on_datagram(&dgram(2, 1000, false), 3_600_000_000 + 1000 + 700);
        assert!((r.jitter - 200e-6).abs() < 1e-12);
    }

    #[test]
    fn a_batch_with_one_timestamp_is_one_jitter_sample() {
        // Batches of 8 datagrams sent with one timestamp, arriving together; between batches
        // the transit alternates by 400 µs. Jitter must be ~400 µs, not diluted by the zeros.
        let mut r = UdpRecv::new(false);
        let mut seq = 1;
        for b in 0..100i64 {
            let sent = 1_000_000 + b * 1000;
            let arrival = sent + 5_000 + if b % 2 == 0 { 0 } else { 400 };
            for _ in 0..8 {
                r.on_datagram(&dgram(seq, sent, false), arrival);
                seq += 1;
            }
        }
        assert!((r.jitter - 400e-6).abs() < 1e-6, "{}", r.jitter);
        assert_eq!(r.unique, 800);
    }

    #[test]
    fn omit_window_is_excluded_from_both_sides() {
        let mut r = UdpRecv::new(false);
        feed(&mut r, &[1, 3, 4]); // 1 lost during omit
        r.end_omit();
        feed(&mut r, &[5, 6, 8, 9, 10]); // 1 lost after
        assert_eq!(r.expected_after_omit(), 6);
        assert_eq!(r.lost_after_omit(), 1);
        assert_eq!(r.lost(), 2);
        // A late datagram from the omit period does not make post-omit loss negative.
        feed(&mut r, &[2]);
        assert_eq!(r.lost_after_omit(), 1);
    }

    #[test]
    fn strays_are_ignored_and_counted() {
        let mut r = UdpRecv::new(false);
        assert!(!r.on_datagram(&[1, 2, 3], 0));
        assert!(!r.on_datagram(&dgram(0, 0, false), 0));
        assert_eq!((r.stray, r.max_seq, r.unique), (2, 0, 0));
    }

    #[test]
    fn the_busiest_ms_counts_every_datagram_of_a_batch() {
        // 100 Mbit/s in batches of 6 datagrams of 1448 bytes, one sender timestamp per batch,
        // a batch every 695 µs, arrivals 10 µs apart within a batch: the busiest 1 ms holds
        // two batches (17,376 bytes = 139 Mbit/s), not two datagrams (23 Mbit/s).
        let mut r = UdpRecv::new(false);
        let mut seq = 1;
        for b in 0..20i64 {
            let sent = b * 695;
            for i in 0..6i64 {
                let mut d = dgram(seq, sent, false);
                d.resize(1448, 0);
                assert!(r.on_datagram(&d, 5_000 + sent + i * 10));
                seq += 1;
            }
        }
        assert_eq!(r.unique, 120);
        assert_eq!(r.peak_1ms_bps, 2.0 * 6.0 * 1448.0 * 8.0 / 1e-3);
    }

    #[test]
    fn batch_sizes() {
        // About 0.8 ms of traffic per wake-up (1..256 datagrams), 64 unpaced.
        assert_eq!(batch_size(0, 1448, true), 64);
        assert_eq!(batch_size(100_000_000, 1448, true), 6);
        assert_eq!(batch_size(400_000_000, 1448, true), 27);
        assert_eq!(batch_size(1_000_000_000, 1448, true), 69);
        assert_eq!(batch_size(1_000_000_000, 1448, false), 67);
        assert_eq!(batch_size(1_000_000, 1448, true), 1);
        // 0.8 ms at 1 Gbit/s is 195 datagrams of 512 bytes, 262 KB of truesize at a receiver:
        // more than a stock iperf3 -s socket holds (212,992). Cut to 118 (158,592 bytes).
        assert_eq!(batch_size(1_000_000_000, 512, true), 118);
        assert_eq!(batch_size(1_000_000_000, 512, false), 118);
        assert_eq!(batch_size(400_000_000, 512, true), 78);
        assert_eq!(batch_size(1_000_000_000, 64, true), 178);
        assert_eq!(batch_size(10_000_000_000, 18, true), 187);
        // Per kernel call: 64 datagrams, with GSO at most 65000 bytes.
        assert_eq!(call_size(1448, true), 44);
        assert_eq!(call_size(512, true), 64);
        assert_eq!(call_size(16000, true), 4);
        assert_eq!(call_size(1448, false), 256);
    }

    /// A kernel stand-in for the sender: records every datagram's sequence number and the
    /// bytes of every call, refuses GSO with `refuse` (an errno) when set, and stops the
    /// sender after `stop_after` datagrams.
    struct FakeTx {
        len: usize,
        refuse: Option<i32>,
        gso_calls: usize,
        gso_refused: usize,
        mmsg_calls: usize,
        disabled: usize,
        seqs: Vec<u64>,
        largest_send: usize,
        stop_after: usize,
        shared: Arc<Shared>,
        /// An errno every sendmmsg call fails with (a kernel refusing the datagram itself).
        mmsg_err: Option<i32>,
        /// sendmmsg calls of GSO super-datagrams (kernel pacing), and the datagrams of the
        /// largest super-datagram sent.
        gso_many_calls: usize,
        largest_gso: usize,
        /// Every `nobufs_every`-th GSO send is refused with ENOBUFS (this host's queue full);
        /// 0: none.
        nobufs_every: usize,
        /// sendmmsg calls send at most this many messages, the next one refused with ENOBUFS
        /// (kept pending for SO_ERROR, as the kernel does); `None`: all go.
        mmsg_partial: Option<usize>,
        /// Datagrams refused (the fake kernel's own count) and the error kept pending.
        refused: usize,
        pending: Option<i32>,
        /// The next `icmp_fails` sendmmsg calls fail with EHOSTUNREACH (an ICMP error the
        /// socket got: one entry on the error queue each when `icmp_queued`); entries left.
        icmp_fails: usize,
        icmp_queued: bool,
        errqueue: usize,
    }

    impl FakeTx {
        fn new(len: usize, refuse: Option<i32>, stop_after: usize, shared: Arc<Shared>) -> FakeTx {
            FakeTx {
                len,
                refuse,
                gso_calls: 0,
                gso_refused: 0,
                mmsg_calls: 0,
                disabled: 0,
                seqs: Vec::new(),
                largest_send: 0,
                stop_after,
                shared,
                mmsg_err: None,
                gso_many_calls: 0,
                largest_gso: 0,
                nobufs_every: 0,
                mmsg_partial: None,
                refused: 0,
                pending: None,
                icmp_fails: 0,
                icmp_queued: false,
                errqueue: 0,
            }
        }
        fn take(&mut self, buf: &[u8]) {
            self.largest_send = self.largest_send.max(buf.len());
            for d in buf.chunks(self.len) {
                assert_eq!(d.len(), self.len, "a partial datagram");
                let (_, seq) = read_header(d, false).unwrap_or((0, 0));
                self.seqs.push(seq);
            }
            if self.seqs.len() >= self.stop_after {
                self.shared.stop.store(true, Relaxed);
            }
        }
    }

    impl BatchTx for FakeTx {
        fn send_gso_many(&mut self, buf: &[u8], seg: usize, m: usize) -> std::io::Result<usize> {
            self.gso_many_calls += 1;
            for i in 0..m {
                self.send_gso(&buf[i * seg..(i + 1) * seg])?;
            }
            Ok(m)
        }
        fn send_gso(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.largest_gso = self.largest_gso.max(buf.len() / self.len);
            self.gso_calls += 1;
            if self.nobufs_every > 0 && self.gso_calls % self.nobufs_every == 0 {
                self.refused += buf.len() / self.len;
                return Err(std::io::Error::from_raw_os_error(libc::ENOBUFS));
            }
            if let Some(e) = self.refuse {
                self.gso_refused += 1;
                return Err(std::io::Error::from_raw_os_error(e));
            }
            self.take(buf);
            Ok(buf.len())
        }
        fn send_mmsg(&mut self, buf: &[u8], len: usize, n: usize) -> std::io::Result<usize> {
            assert_eq!(len, self.len);
            self.mmsg_calls += 1;
            if let Some(e) = self.mmsg_err {
                return Err(std::io::Error::from_raw_os_error(e));
            }
            if self.icmp_fails > 0 {
                self.icmp_fails -= 1;
                if self.icmp_queued {
                    self.errqueue += 1;
                }
                return Err(std::io::Error::from_raw_os_error(libc::EHOSTUNREACH));
            }
            if let Some(m) = self.mmsg_partial.filter(|&m| m < n) {
                self.take(&buf[..m * len]);
                self.refused += 1;
                if m == 0 {
                    return Err(std::io::Error::from_raw_os_error(libc::ENOBUFS));
                }
                self.pending = Some(libc::ENOBUFS);
                return Ok(m);
            }
            self.take(&buf[..n * len]);
            Ok(n)
        }
        fn disable_gso(&mut self) {
            self.disabled += 1;
        }
        fn take_error(&mut self) -> Option<i32> {
            self.pending.take()
        }
        fn drain_errors(&mut self) -> usize {
            std::mem::take(&mut self.errqueue)
        }
    }

    #[test]
    fn datagrams_this_host_refuses_are_counted_apart_and_never_numbered() {
        // 1 Gbit/s of 1448-byte datagrams, GSO calls of 44 + 25 per wake-up; every third GSO
        // send refused with ENOBUFS (the sending port's qdisc full, reported by IP_RECVERR):
        // a refused super-datagram is all its datagrams. Then the same by sendmmsg, each call
        // sending 10 messages and the 11th refused (the kernel keeps its ENOBUFS pending), or
        // none (the first refused). Whatever the pacer booked is sent or refused, never both;
        // the datagrams sent are numbered 1, 2, 3, … with no gap (the receiver counts none of
        // the refused lost); the count is the fake kernel's own.
        for (gso, every, partial) in [(true, 3, None), (false, 0, Some(10)), (false, 0, Some(0))] {
            let shared = Arc::new(Shared::default());
            let mut tx = FakeTx::new(1448, None, 6 * 69, shared.clone());
            tx.nobufs_every = every;
            tx.mmsg_partial = partial;
            let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
            let mut cfg = send_cfg(1448, 1_000_000_000);
            let dropped = Arc::new(AtomicU64::new(0));
            cfg.dropped_locally = Some(dropped.clone());
            let (pacer, tx) = if partial == Some(0) {
                // The first message of one call in two refused, the rest of it sent by the
                // next call (numbered again from the refused one's number).
                let mut alt = Alternate(tx);
                let pc = run_sender(&mut alt, gso, &cfg, &b, &p, &shared);
                (pc, alt.0)
            } else {
                let pc = run_sender(&mut tx, gso, &cfg, &b, &p, &shared);
                (pc, tx)
            };
            let pacer = pacer.unwrap_or_else(|| panic!("a paced sender has a pacer"));
            let sent = p.load(Relaxed);
            let refused = dropped.load(Relaxed);
            assert_eq!(tx.seqs, (1..=sent).collect::<Vec<_>>(), "{gso} {partial:?}");
            assert_eq!(refused, tx.refused as u64, "{gso} {partial:?}");
            assert!(refused > 0, "{gso} {partial:?}");
            assert_eq!(
                pacer.booked_bytes(),
                (sent + refused) * 1448,
                "{gso} {partial:?}: sent + dropped locally = what the pacer booked"
            );
            assert!(shared.error.lock().is_ok_and(|g| g.is_none()));
        }
    }

    /// A fake kernel that refuses the first message of every other sendmmsg call (ENOBUFS)
    /// and sends the whole of the others.
    struct Alternate(FakeTx);
    impl BatchTx for Alternate {
        fn send_gso(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.send_gso(buf)
        }
        fn send_mmsg(&mut self, buf: &[u8], len: usize, n: usize) -> std::io::Result<usize> {
            self.0.mmsg_partial = (self.0.mmsg_calls % 2 == 0).then_some(0);
            let r = self.0.send_mmsg(buf, len, n);
            let sent = self.0.seqs.len() as u64;
            assert_eq!(self.0.seqs, (1..=sent).collect::<Vec<_>>(), "a gap");
            r
        }
        fn disable_gso(&mut self) {}
    }

    #[test]
    fn an_icmp_error_does_not_stop_the_sender_a_local_one_does() {
        // EHOSTUNREACH with an ICMP entry on the error queue (a router's host unreachable
        // that passed; IP_RECVERR queues each one and the next send returns it): drained, the
        // test goes on, every datagram numbered once. The same errno with nothing queued (no
        // route on this host): the test stops with the error.
        for queued in [true, false] {
            let shared = Arc::new(Shared::default());
            let mut tx = FakeTx::new(1448, None, 3 * 69, shared.clone());
            tx.icmp_fails = 5;
            tx.icmp_queued = queued;
            let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
            let cfg = send_cfg(1448, 100_000_000);
            run_sender(&mut tx, false, &cfg, &b, &p, &shared);
            let err = shared.error.lock().map(|g| g.clone()).unwrap_or_default();
            if queued {
                assert_eq!(err, None);
                assert_eq!(tx.errqueue, 0, "drained");
                let n = p.load(Relaxed);
                assert!(n >= 3 * 69, "{n}");
                assert_eq!(tx.seqs, (1..=n).collect::<Vec<_>>());
            } else {
                assert!(err.is_some_and(|e| e.contains("No route to host")));
                assert_eq!(p.load(Relaxed), 0);
            }
        }
    }

    fn send_cfg(len: usize, rate: u64) -> UdpSendCfg {
        UdpSendCfg {
            len,
            rate,
            wide: false,
            repeating: false,
            gso: true,
            iperf2: None,
            pacer_stats: None,
            gso_off: None,
            skbs: None,
            dropped_locally: None,
            port_unreachable: None,
            pacing: PacingMode::Auto,
            paced_by: None,
        }
    }

    #[test]
    fn a_kernel_refusing_gso_gets_the_same_batch_by_sendmmsg() {
        // 1 Gbit/s of 1448-byte datagrams (69 per wake-up: GSO calls of 44 + 25), GSO
        // refused with EIO (no checksum offload on the route) or EINVAL: the refused datagrams
        // go at once by sendmmsg, every datagram the pacer booked is sent (no part of the
        // schedule lost) and the sequence is continuous from 1.
        // EMSGSIZE is what a kernel answers for a segment above the path MTU (the MTU
        // shrank under a running test): the same fallback, and the stream says why.
        for errno in [libc::EIO, libc::EINVAL, libc::EMSGSIZE] {
            let shared = Arc::new(Shared::default());
            let mut tx = FakeTx::new(1448, Some(errno), 6 * 69, shared.clone());
            let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
            let mut cfg = send_cfg(1448, 1_000_000_000);
            let slot = Arc::new(Mutex::new(None));
            cfg.gso_off = Some(slot.clone());
            let pacer = run_sender(&mut tx, true, &cfg, &b, &p, &shared)
                .unwrap_or_else(|| panic!("a paced sender has a pacer"));
            let off = slot.lock().map(|g| *g).unwrap_or(None);
            assert_eq!(off, Some(GsoOff::Refused { errno }), "errno {errno}");
            assert!(
                shared.error.lock().is_ok_and(|g| g.is_none()),
                "errno {errno}"
            );
            let n = tx.seqs.len() as u64;
            assert_eq!(n, 6 * 69, "errno {errno}");
            assert_eq!(tx.seqs, (1..=n).collect::<Vec<_>>(), "errno {errno}");
            assert_eq!((tx.gso_refused, tx.disabled), (1, 1), "GSO asked for once");
            assert_eq!(tx.gso_calls, 1, "errno {errno}: GSO not tried again");
            // The refused 44 by sendmmsg, the batch's other 25, then one call per batch.
            assert_eq!(tx.mmsg_calls, 7, "errno {errno}");
            assert_eq!(p.load(Relaxed), n);
            assert_eq!(b.load(Relaxed), n * 1448);
            // Rate: the schedule was charged for exactly the datagrams sent (the old loop
            // booked the refused batch, dropped it and booked a second one for the same
            // sequence numbers: a batch of the schedule lost).
            assert_eq!(pacer.booked_bytes(), n * 1448, "errno {errno}");
        }
    }

    #[test]
    fn kernel_paced_batches_are_8_ms_in_half_ms_super_datagrams() {
        // -b 1000M -l 1448 under kernel pacing: 690 datagrams (8 ms) per wake-up, handed over
        // as 16 super-datagrams of 43 (0.5 ms each: fq sends each as one burst) in one
        // sendmmsg call plus the last 2 in a second call; every datagram once, in order.
        assert_eq!(kernel_batch_size(1_000_000_000, 1448), 690);
        let shared = Arc::new(Shared::default());
        let mut tx = FakeTx::new(1448, None, 3 * 690, shared.clone());
        let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
        let cfg = send_cfg(1448, 1_000_000_000);
        let pacer = run_sender_mode(&mut tx, true, Mode::Kernel, &cfg, &b, &p, &shared)
            .unwrap_or_else(|| panic!("a paced sender has a pacer"));
        let n = tx.seqs.len();
        assert_eq!(n, 3 * 690);
        assert_eq!(tx.seqs, (1..=n as u64).collect::<Vec<_>>());
        assert_eq!(tx.largest_gso, 43);
        assert_eq!((tx.gso_many_calls, tx.gso_calls), (3, 3 * 17));
        assert_eq!(pacer.booked_bytes(), (n * 1448) as u64);
        // Without GSO (datagrams above the MTU, say): sendmmsg calls of up to 256.
        let shared = Arc::new(Shared::default());
        let mut tx = FakeTx::new(1448, None, 2 * 690, shared.clone());
        run_sender_mode(&mut tx, false, Mode::Kernel, &cfg, &b, &p, &shared);
        assert_eq!((tx.mmsg_calls, tx.gso_calls), (6, 0));
        // 100M: 69 datagrams per wake-up, 4 per super-datagram.
        assert_eq!(kernel_batch_size(100_000_000, 1448), 69);
        assert_eq!(Pacer::kernel_skb_datagrams(100_000_000, 1448, 44), 4);
        // 10 Mbit/s at 65,507 bytes: one datagram per wake-up (8 ms is 10,000 bytes).
        assert_eq!(kernel_batch_size(10_000_000, 65507), 1);
        // 10 Gbit/s at 64 bytes: 4096 datagrams; 2 MiB at 8000 bytes.
        assert_eq!(kernel_batch_size(10_000_000_000, 64), 4096);
        assert_eq!(kernel_batch_size(10_000_000_000, 8000), 262);
    }

    #[test]
    fn the_kernel_paced_send_buffer_never_overfills_fq() {
        // 1000M, 1448 bytes, 43 per super-datagram: 20 ms at the pacing rate is 3.2 MB, x 2;
        // 80 super-datagrams of 62,264 bytes is 4.98 MB, the bound (the kernel doubles it).
        let skb = 43 * 1448;
        let v = kernel_send_buffer(kernel_pacing_rate(1_000_000_000, 1448, false), skb);
        assert_eq!(v as usize, 80 * skb / 2);
        // 20M, one datagram per super-datagram: 80 x 1448 bytes (whatever the rate asks).
        let v = kernel_send_buffer(kernel_pacing_rate(20_000_000, 1448, false), 1448);
        assert!((v as usize) * 2 <= 80 * 1448, "{v}");
        // 10M: 20 ms of pacing is less than the bound.
        let p = kernel_pacing_rate(10_000_000, 1448, false);
        let v = kernel_send_buffer(p, 1448);
        assert_eq!(v as usize, (p as f64 * 0.020 * 2.0) as usize / 2);
        // Never below 4 KiB, never above i32.
        assert_eq!(kernel_send_buffer(1, 1), 4096);
        assert_eq!(kernel_send_buffer(u64::MAX, usize::MAX), i32::MAX);
    }

    #[test]
    fn kernel_pacing_rate_counts_every_segments_headers() {
        // fq counts Ethernet + IP + UDP headers per segment (qdisc_pkt_len) and paces at 1.25 ×:
        // 1000M of 1448-byte payload is 1490 bytes a frame, 128,625,690.6 B/s on the wire.
        assert!(kernel_pacing_rate(1_000_000_000, 1448, false).abs_diff(160_782_113) <= 1);
        // IPv6: 1510 bytes a frame.
        assert!(kernel_pacing_rate(1_000_000_000, 1448, true).abs_diff(162_940_262) <= 1);
        // 64-byte datagrams: 106 bytes a frame, 1.66 × the payload rate.
        assert!(kernel_pacing_rate(100_000_000, 64, false).abs_diff(25_878_906) <= 1);
        assert_eq!(kernel_pacing_rate(1, 1448, false), 1);
    }

    #[test]
    fn a_block_or_byte_target_is_not_overshot_by_a_batch() {
        // -k 100 and -n 100000 at 1 Gbit/s (batches of 69 datagrams of 1448 bytes): the
        // last batch is cut to what is left, 100 datagrams and 70 (101,360 bytes).
        for (k, n, want) in [(100u64, 0u64, 100usize), (0, 100_000, 70)] {
            let shared = Arc::new(Shared {
                blockcount: k,
                num: n,
                ..Shared::default()
            });
            let mut tx = FakeTx::new(1448, None, want, shared.clone());
            let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
            run_sender(
                &mut tx,
                true,
                &send_cfg(1448, 1_000_000_000),
                &b,
                &p,
                &shared,
            );
            assert_eq!(tx.seqs.len(), want, "-k {k} -n {n}");
            assert_eq!(p.load(Relaxed), want as u64);
        }
    }

    #[test]
    fn another_gso_error_is_not_taken_for_a_refusal() {
        // ENETUNREACH (say) is a real send error: reported, GSO not turned off.
        let shared = Arc::new(Shared::default());
        let mut tx = FakeTx::new(1448, Some(libc::ENETUNREACH), 44, shared.clone());
        let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
        run_sender(
            &mut tx,
            true,
            &send_cfg(1448, 1_000_000_000),
            &b,
            &p,
            &shared,
        );
        assert_eq!((tx.disabled, tx.mmsg_calls, p.load(Relaxed)), (0, 0, 0));
        let err = shared.error.lock().map(|g| g.clone()).unwrap_or_default();
        assert!(err.is_some_and(|e| e.contains("UDP send failed")));
    }

    #[test]
    fn big_datagrams_refused_in_a_gso_batch_all_go_once_each() {
        // The kernel's rule (udp_send_skb): a GSO batch of more than one datagram whose
        // segment plus headers exceeds the path MTU is refused with EMSGSIZE. -l 2000, 8000
        // and 16000 at rates that put 2..64 datagrams in a batch, GSO on at the start (a
        // socket that could not tell its MTU): every datagram is sent exactly once, in
        // order, the counters equal what the kernel took, and no error ends the run.
        for (len, rate) in [
            (2000usize, 50_000_000u64),
            (8000, 200_000_000),
            (16000, 400_000_000),
        ] {
            let want = 5 * batch_size(rate, len, false);
            assert!(batch_size(rate, len, false) > 1, "-l {len} -b {rate}");
            let shared = Arc::new(Shared::default());
            let mut tx = FakeTx::new(len, Some(libc::EMSGSIZE), want, shared.clone());
            let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
            let mut cfg = send_cfg(len, rate);
            let slot = Arc::new(Mutex::new(None));
            cfg.gso_off = Some(slot.clone());
            run_sender(&mut tx, true, &cfg, &b, &p, &shared);
            let n = tx.seqs.len() as u64;
            let what = format!("-l {len} -b {rate}");
            assert!(n >= want as u64, "{what}: {n}");
            assert_eq!(tx.seqs, (1..=n).collect::<Vec<_>>(), "{what}");
            assert_eq!((p.load(Relaxed), b.load(Relaxed)), (n, n * len as u64));
            assert_eq!((tx.gso_calls, tx.disabled), (1, 1), "{what}");
            assert!(shared.error.lock().is_ok_and(|g| g.is_none()), "{what}");
            let note = slot.lock().ok().and_then(|g| *g).map(|o| o.sentence());
            assert!(
                note.as_deref()
                    .is_some_and(|n| n.contains("turned off") && n.contains("too long")),
                "{what}: {note:?}"
            );
        }
    }

    #[test]
    fn a_datagram_too_long_without_gso_is_a_clear_error() {
        // A 65,520-byte datagram over IPv4 (above 65,507): EMSGSIZE from a plain send is no
        // GSO refusal; the run stops with an error that names the length, nothing counted.
        let shared = Arc::new(Shared::default());
        let mut tx = FakeTx::new(65520, None, 10, shared.clone());
        tx.mmsg_err = Some(libc::EMSGSIZE);
        let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
        run_sender(&mut tx, false, &send_cfg(65520, 0), &b, &p, &shared);
        assert_eq!((p.load(Relaxed), b.load(Relaxed), tx.gso_calls), (0, 0, 0));
        let err = shared
            .error
            .lock()
            .ok()
            .and_then(|g| g.clone())
            .unwrap_or_default();
        assert!(
            err.starts_with("UDP send failed: a datagram of 65520 bytes is too long"),
            "{err}"
        );
    }

    #[test]
    fn gso_only_when_every_segment_fits_one_ip_packet() {
        // (len, IPv6, MTU, batch) → GSO, datagrams per call. IPv4 takes 28 bytes of headers,
        // IPv6 48: on MTU 1500 the last GSO length is 1472 (v4) and 1452 (v6).
        let cases: &[(usize, bool, usize, bool, usize)] = &[
            (64, false, 1500, true, 64),
            (1448, false, 1500, true, 44),
            (1472, false, 1500, true, 44),
            (1473, false, 1500, false, 256),
            (2000, false, 1500, false, 256),
            (8000, false, 1500, false, 256),
            (16000, false, 1500, false, 256),
            (65507, false, 1500, false, 256),
            (64, true, 1500, true, 64),
            (1448, true, 1500, true, 44),
            (1452, true, 1500, true, 44),
            (1453, true, 1500, false, 256),
            (1472, true, 1500, false, 256),
            (2000, true, 1500, false, 256),
            (64, false, 9000, true, 64),
            (1473, false, 9000, true, 44),
            (8000, false, 9000, true, 8),
            (8972, false, 9000, true, 7),
            (8973, false, 9000, false, 256),
            (8952, true, 9000, true, 7),
            (8953, true, 9000, false, 256),
            (16000, false, 9000, false, 256),
            (65507, false, 9000, false, 256),
            (16000, false, 65536, true, 4),
            (16385, false, 65536, false, 256),
            (65507, false, 65536, false, 256),
        ];
        for &(len, v6, mtu, gso, per_call) in cases {
            let what = format!("-l {len} v6 {v6} MTU {mtu}");
            let p = gso_plan(len, v6, Some(mtu), 8, true);
            assert_eq!((p.gso, p.per_call), (gso, per_call), "{what}");
            let over = len + if v6 { 48 } else { 28 } > mtu;
            let want_off = over.then_some(GsoOff::Fragmented { len, mtu });
            assert_eq!(p.off, want_off, "{what}");
            assert_eq!(p.fragmented, over, "{what}");
            // One datagram per batch: never GSO (the note stays); not asked for: no note, but
            // still fragmented (no IP_RECVERR: a refused datagram's first fragments left).
            let p = gso_plan(len, v6, Some(mtu), 1, true);
            assert_eq!((p.gso, p.off), (false, want_off), "{what} batch 1");
            let p = gso_plan(len, v6, Some(mtu), 8, false);
            assert_eq!(
                (p.gso, p.off, p.fragmented),
                (false, None, over),
                "{what} not asked"
            );
        }
        // MTU unknown (or nonsense): Ethernet's 1500 is assumed.
        for mtu in [None, Some(0), Some(28)] {
            assert!(gso_plan(1472, false, mtu, 8, true).gso, "{mtu:?}");
            assert!(!gso_plan(1473, false, mtu, 8, true).gso, "{mtu:?}");
        }
        // No overflow at the extremes.
        assert!(!gso_plan(usize::MAX, true, Some(usize::MAX), 8, true).gso);
        assert!(!gso_plan(0, false, Some(1500), 8, true).gso);
    }

    /// The receive-buffer charge (sk_rmem_alloc, /proc/net/udp's rx_queue) of the socket
    /// bound to `port`, bytes.
    fn rx_queue(port: u16) -> Option<usize> {
        let t = std::fs::read_to_string("/proc/net/udp").ok()?;
        let want = format!(":{port:04X}");
        t.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if !f.get(1)?.ends_with(&want) {
                return None;
            }
            usize::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok()
        })
    }

    #[test]
    fn rcv_truesize_is_never_below_the_kernels() {
        // The kernel's own charge on loopback: datagrams sent to a socket that does not read,
        // its rx_queue (sk_rmem_alloc) divided by how many wait. As one GSO send (what the
        // paced sender does up to the MTU) and one by one (sendmmsg): the estimate is never
        // below the kernel's and at most 15 % above (the 512-byte GSO segment: 1,344).
        for len in [18usize, 64, 128, 256, 512, 700, 1000, 1448, 1472, 2000] {
            for gso in [true, false] {
                if gso && len > 1472 {
                    continue;
                }
                let r = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
                let port = r.local_addr().map(|a| a.port()).unwrap_or(0);
                let s = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
                s.connect(("127.0.0.1", port))
                    .unwrap_or_else(|e| panic!("{e}"));
                let n = if gso { (65000 / len).min(64) } else { 16 };
                let buf = vec![7u8; n * len];
                if gso {
                    assert!(enable_gso(&s, len), "GSO on loopback");
                    let sent = send(s.as_fd(), &buf).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(sent, n * len);
                } else {
                    for _ in 0..n {
                        let _ = s.send(&buf[..len]);
                    }
                }
                let mut q = None;
                for _ in 0..50 {
                    q = rx_queue(port).filter(|&q| q > 0);
                    if q.is_some() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let per = q.unwrap_or(0) / n;
                let est = rcv_truesize(len, gso);
                let what = format!("-l {len} gso {gso}: kernel {per}, estimate {est}");
                assert!(per > len && est >= per, "{what}");
                assert!(est as f64 <= per as f64 * 1.15, "{what}");
            }
        }
        assert_eq!(rcv_truesize(512, true), 1344);
        assert_eq!(rcv_truesize(1448, true), 2280);
        assert_eq!(rcv_truesize(1448, false), 2368);
        assert_eq!(rcv_truesize(128, false), 832);
    }

    #[test]
    fn one_wake_up_fits_a_stock_receivers_buffer() {
        // Every rate and length, GSO or not: a paced batch needs at most 3/4 of a stock
        // receiver's 212,992-byte buffer (unless one datagram alone is more), and never more
        // than iperf3 3.21 --gsro's largest batch at 512 bytes (127 datagrams, 170,688).
        for rate in [
            10_000_000u64,
            100_000_000,
            400_000_000,
            1_000_000_000,
            10_000_000_000,
        ] {
            for len in [18usize, 64, 512, 1000, 1448, 8000, 16000, 65507] {
                for gso in [true, false] {
                    let n = batch_size(rate, len, gso);
                    let need = n * rcv_truesize(len, gso);
                    let what = format!("-b {rate} -l {len} gso {gso}: {n} need {need}");
                    assert!(n >= 1, "{what}");
                    assert!(n == 1 || need <= 159_744, "{what}");
                    assert!(n == 1 || need <= 127 * 1344, "{what}");
                }
            }
        }
    }

    #[test]
    fn path_mtu_reads_the_connected_sockets_route() {
        // Loopback's MTU (65536 on Linux; IPv4's IP_MTU stops at 65535) on a connected
        // socket, over IPv4 and IPv6 when the host has it; an unconnected socket cannot tell.
        let a = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path_mtu(&a), None);
        let lo = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .ok()
            .and_then(|m| m.trim().parse::<usize>().ok());
        let b = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        a.connect(b.local_addr().unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path_mtu(&a), lo.map(|m| m.min(65535)));
        assert!(!sends_ipv6(&a));
        if let Ok(c) = UdpSocket::bind("[::1]:0") {
            if let Ok(d) = UdpSocket::bind("[::1]:0") {
                if c.connect(d.local_addr().unwrap_or_else(|e| panic!("{e}")))
                    .is_ok()
                {
                    assert_eq!(path_mtu(&c), lo);
                    assert!(sends_ipv6(&c));
                }
            }
        }
    }

    #[test]
    fn no_send_carries_more_than_the_pacers_window() {
        // Every rate and length, GSO or sendmmsg: one kernel call never carries more bytes
        // than one window cap (1.9 ms of traffic at the rate) unless a single datagram is
        // more, every GSO super-datagram stays within 65000 bytes and 64 datagrams, and each
        // datagram carries its own sequence number (a stock receiver counts every one).
        for rate in [
            1_000_000u64,
            10_000_000,
            100_000_000,
            400_000_000,
            1_000_000_000,
            10_000_000_000,
        ] {
            for len in [64usize, 512, 1448, 8000, 16000, 65507] {
                for gso in [true, false] {
                    let shared = Arc::new(Shared::default());
                    let mut tx = FakeTx::new(len, None, 1, shared.clone());
                    let (b, p) = (AtomicU64::new(0), AtomicU64::new(0));
                    run_sender(&mut tx, gso, &send_cfg(len, rate), &b, &p, &shared);
                    let cap = rate as f64 / 8.0 * super::super::pacer::WINDOW_CAP.as_secs_f64();
                    let what = format!("-b {rate} -l {len} gso {gso}");
                    assert!(
                        tx.largest_send as f64 <= cap.max(len as f64),
                        "{what}: {} bytes in one send, cap {cap:.0}",
                        tx.largest_send
                    );
                    if gso {
                        assert!(tx.largest_send <= 65000.max(len), "{what}");
                        assert!(tx.largest_send <= 64 * len, "{what}");
                    }
                    let n = tx.seqs.len() as u64;
                    assert_eq!(tx.seqs, (1..=n).collect::<Vec<_>>(), "{what}");
                    assert_eq!(p.load(Relaxed), n, "{what}");
                }
            }
        }
    }

    /// xorshift64*: a small deterministic generator for the property tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// Property: for random streams (loss, reordering within a window, duplicates, a random
    /// omit point, 32-bit wire numbers starting anywhere, across 2^31 and 2^32), the accounting
    /// equals a reference model: lost = distinct sequence numbers missing in 1..=max,
    /// out-of-order = first arrivals below the running maximum, duplicates = repeats, loss
    /// within 0..=100 %, and after the omit point only datagrams above it count.
    #[test]
    fn property_accounting_matches_a_reference_model() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for case in 0..400 {
            let start: u64 = match case % 4 {
                0 => 1,
                1 => (1 << 31) - rng.below(50),
                2 => (1 << 32) - rng.below(50),
                _ => 1 + rng.below(1 << 40),
            };
            let wide = case % 3 == 0;
            // 32-bit wire numbers start at 1 and wrap with time: a narrow stream cannot begin
            // above 2^32.
            let start = if wide {
                start
            } else {
                (start % (1 << 32)).max(1)
            };
            let n = 50 + rng.below(400);
            let loss = rng.below(40);
            let mut order: Vec<u64> = (start..start + n)
                .filter(|_| rng.below(100) >= loss)
                .collect();
            // Local reordering: swap neighbours within a few positions.
            for i in 0..order.len() {
                if rng.below(100) < 20 {
                    let j = (i + 1 + rng.below(4) as usize).min(order.len() - 1);
                    order.swap(i, j);
                }
            }
            // Duplicates.
            let mut sent = Vec::new();
            for s in order {
                sent.push(s);
                if rng.below(100) < 5 {
                    sent.push(s);
                }
            }
            let omit_at = rng.below(sent.len() as u64 / 2 + 1) as usize;
            let mut r = UdpRecv::new(wide);
            // The receiver learns where the stream is from its first datagram, as a real one does
            // (32-bit numbers are extended relative to what it has seen).
            let (mut seen, mut max, mut ooo, mut dups) =
                (std::collections::HashSet::new(), 0u64, 0u64, 0u64);
            for (i, &s) in sent.iter().enumerate() {
                if i == omit_at {
                    r.end_omit();
                    assert_eq!(r.omit_max_seq, max);
                }
                let wire = if wide { s } else { s & 0xFFFF_FFFF };
                r.on_datagram(&dgram(wire, i as i64 * 10, wide), 1_000 + i as i64 * 10);
                if !seen.insert(s) {
                    dups += 1;
                } else if s < max {
                    ooo += 1;
                }
                max = max.max(s);
            }
            // Expected values relative to the first sequence the receiver could know about:
            // numbers below the stream's start were never sent, so the reference counts from
            // `start` and the receiver from 1 (its "lost" includes start-1 for a late start).
            assert_eq!(r.max_seq, max, "case {case}");
            assert_eq!(r.unique, seen.len() as u64, "case {case}");
            assert_eq!(r.duplicates, dups, "case {case}");
            assert_eq!(r.out_of_order, ooo, "case {case}");
            let missing_in_range = (max - start + 1) - seen.len() as u64;
            assert_eq!(r.lost(), missing_in_range + (start - 1), "case {case}");
            let pct = loss_percent(r.lost(), r.max_seq);
            assert!((0.0..=100.0).contains(&pct), "case {case}: {pct}");
            // After the omit point: expected and lost over numbers above the omit boundary.
            let exp_after = max - r.omit_max_seq;
            assert_eq!(r.expected_after_omit(), exp_after, "case {case}");
            let uniq_after = seen.iter().filter(|&&s| s > r.omit_max_seq).count() as u64;
            assert_eq!(r.lost_after_omit(), exp_after - uniq_after, "case {case}");
            assert!(r.lost_after_omit() <= r.expected_after_omit());
        }
    }
}
