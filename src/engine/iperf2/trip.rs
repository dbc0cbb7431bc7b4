//! iperf 2 TCP `--trip-times` (docs/iperf2-wire.md §3.1): a 2.1/2.2 client starts every
//! write ("burst") with a 96-byte header holding the write's wall-clock time and its size;
//! the server takes the time the read that completes the burst returns, minus that write
//! time, as the burst's one-way latency. Here: the burst framing on the receive side
//! ([`BurstReader`], pure, fed with whatever `read` returned), the figures
//! ([`TripStats`], with the reasons a burst gave no figure), and the two stream loops — a
//! receiver that frames the bursts ([`recv_loop`]) and a sender that stamps each block
//! ([`send_loop`]). The plain TCP loops (`engine::tcp`) are untouched: a stream without
//! `--trip-times` never runs this code.
// Lengths and sizes here come from the network: checked arithmetic only.
#![cfg_attr(
    not(test),
    warn(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

use super::wire::{self, BurstHeader, TCP_BURST_HEADER_LEN};
use crate::engine::report::LatencyMs;
use crate::engine::tcp::{Shared, MAX_RECV_BUF, POLL};
use crate::engine::udp::Transit;
use serde::Serialize;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A latency of more than this is not believed (a write time far in the past: garbage or a
/// clock set back), µs: stock iperf 2's limit on a client's start time (600 s).
pub(crate) const MAX_TRANSIT_US: i64 = wire::TRIP_MAX_CLOCK_DIFF_S * 1_000_000;

/// Why a burst gave no latency figure (counts over the whole test).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TripDrops {
    /// Burst headers whose size was below the 96 header bytes: the framing is lost at the
    /// first one, nothing after it is measured (the bytes are still counted).
    pub bad_size: u64,
    /// Write times whose microseconds word was 1 000 000 or more.
    pub bad_time: u64,
    /// Bursts complete before their write time (the clocks are not in sync, or garbage).
    pub future: u64,
    /// Bursts whose write time is more than 600 s before they completed.
    pub too_old: u64,
    /// The stream ended inside a burst (its header or its body).
    pub cut: u64,
    /// Burst ids that did not follow the previous one by 1 (measured anyway; stock prints
    /// "expected burst id").
    pub id_gaps: u64,
}

impl TripDrops {
    fn add(&mut self, o: &TripDrops) {
        self.bad_size = self.bad_size.saturating_add(o.bad_size);
        self.bad_time = self.bad_time.saturating_add(o.bad_time);
        self.future = self.future.saturating_add(o.future);
        self.too_old = self.too_old.saturating_add(o.too_old);
        self.cut = self.cut.saturating_add(o.cut);
        self.id_gaps = self.id_gaps.saturating_add(o.id_gaps);
    }

    /// Bursts that gave no figure (id gaps are measured, so not counted here).
    pub fn dropped(&self) -> u64 {
        [
            self.bad_size,
            self.bad_time,
            self.future,
            self.too_old,
            self.cut,
        ]
        .iter()
        .fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// One line saying why bursts gave no figure; None when none was dropped.
    pub fn sentence(&self) -> Option<String> {
        let parts: Vec<String> = [
            (
                self.future,
                "completed before their write time (clocks not in sync?)",
            ),
            (
                self.too_old,
                "written more than 600 s before they completed",
            ),
            (self.bad_time, "with an invalid write time"),
            (
                self.bad_size,
                "with a size below the 96-byte header (framing lost)",
            ),
            (self.cut, "cut by the end of the stream"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        (!parts.is_empty())
            .then(|| format!("--trip-times: bursts not measured: {}", parts.join(", ")))
    }
}

/// Add `o` into `t` (Welford's parallel form: count, min, max, sum, mean and M2 as if every
/// value of `o` had been added to `t` one by one).
pub(crate) fn merge_transit(t: &mut Transit, o: &Transit) {
    if o.count == 0 {
        return;
    }
    if t.count == 0 {
        *t = *o;
        return;
    }
    let n = t.count.saturating_add(o.count);
    let (a, b, nf) = (t.count as f64, o.count as f64, n as f64);
    let d = o.mean - t.mean;
    t.mean += d * b / nf;
    t.m2 += o.m2 + d * d * a * b / nf;
    t.min = t.min.min(o.min);
    t.max = t.max.max(o.max);
    t.sum += o.sum;
    t.count = n;
}

/// What a receiving `--trip-times` stream measured: per-burst one-way latency (seconds) over
/// the whole test and since the last interval sample, and why bursts gave none.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct TripStats {
    pub total: Transit,
    pub interval: Transit,
    pub drops: TripDrops,
}

impl TripStats {
    fn merge(&mut self, d: &TripStats) {
        merge_transit(&mut self.total, &d.total);
        merge_transit(&mut self.interval, &d.interval);
        self.drops.add(&d.drops);
    }

    fn is_empty(&self) -> bool {
        self.total.count == 0 && self.drops == TripDrops::default()
    }

    /// The interval's figures in ms (count 0 when no burst completed), and a fresh start.
    pub(crate) fn take_interval(&mut self) -> LatencyMs {
        std::mem::take(&mut self.interval)
            .to_ms()
            .unwrap_or_default()
    }

    /// The whole test's figures in ms (count 0 when no burst completed).
    pub(crate) fn total_ms(&self) -> LatencyMs {
        self.total.to_ms().unwrap_or_default()
    }
}

/// A stream's `--trip-times` role.
#[derive(Debug, Clone)]
pub(crate) enum TripMode {
    /// Receiver: frame the bursts and measure into these figures.
    Recv(Arc<Mutex<TripStats>>),
    /// Sender: stamp every block; the client's start time (s, µs) goes in every burst header.
    Send((u32, u32)),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Collecting the 96 header bytes of the next burst (`have` so far).
    Header,
    /// Inside a burst's body: `left` bytes to its end.
    Body,
    /// The framing is lost (a burst size below the header): count bytes, measure nothing.
    Lost,
}

/// The burst framing of a `--trip-times` TCP stream, after the client header: fed with what
/// each read returned, in order; bursts may span reads and a read may hold many bursts.
#[derive(Debug, Clone)]
pub(crate) struct BurstReader {
    state: State,
    hdr: [u8; TCP_BURST_HEADER_LEN],
    have: usize,
    left: u64,
    /// The current burst's write time, µs (None: invalid, counted when it completes).
    sent_us: Option<i64>,
    last_id: Option<u32>,
}

impl Default for BurstReader {
    fn default() -> Self {
        BurstReader {
            state: State::Header,
            hdr: [0; TCP_BURST_HEADER_LEN],
            have: 0,
            left: 0,
            sent_us: None,
            last_id: None,
        }
    }
}

impl BurstReader {
    /// Take the bytes of one read. `now_us` is our wall clock in µs; it is called at most
    /// once, and only when a burst completes in `data` (the read's return is its arrival).
    /// Returns what completed: latencies (s) and drop reasons.
    pub(crate) fn feed(&mut self, mut data: &[u8], now_us: impl FnOnce() -> i64) -> TripStats {
        let mut out = TripStats::default();
        let mut clock = Some(now_us);
        let mut now: Option<i64> = None;
        while !data.is_empty() {
            match self.state {
                State::Lost => break,
                State::Header => {
                    let want = TCP_BURST_HEADER_LEN.saturating_sub(self.have);
                    let take = want.min(data.len());
                    let (head, rest) = data.split_at(take);
                    if let Some(d) = self.hdr.get_mut(self.have..self.have.saturating_add(take)) {
                        d.copy_from_slice(head);
                    }
                    self.have = self.have.saturating_add(take);
                    data = rest;
                    if self.have < TCP_BURST_HEADER_LEN {
                        break;
                    }
                    self.have = 0;
                    let Some(h) = BurstHeader::parse(&self.hdr) else {
                        break;
                    };
                    let size = h.size as usize;
                    if size < TCP_BURST_HEADER_LEN {
                        out.drops.bad_size = out.drops.bad_size.saturating_add(1);
                        self.state = State::Lost;
                        break;
                    }
                    if let Some(last) = self.last_id {
                        if h.id != last.wrapping_add(1) {
                            out.drops.id_gaps = out.drops.id_gaps.saturating_add(1);
                        }
                    }
                    self.last_id = Some(h.id);
                    self.sent_us = h.write_us();
                    self.left = (size as u64).saturating_sub(TCP_BURST_HEADER_LEN as u64);
                    self.state = State::Body;
                    if self.left == 0 {
                        self.complete(&mut out, &mut now, &mut clock);
                    }
                }
                State::Body => {
                    let take = (data.len() as u64).min(self.left);
                    self.left = self.left.saturating_sub(take);
                    data = data
                        .get(usize::try_from(take).unwrap_or(data.len())..)
                        .unwrap_or(&[]);
                    if self.left == 0 {
                        self.complete(&mut out, &mut now, &mut clock);
                    }
                }
            }
        }
        out
    }

    fn complete<F: FnOnce() -> i64>(
        &mut self,
        out: &mut TripStats,
        now: &mut Option<i64>,
        clock: &mut Option<F>,
    ) {
        self.state = State::Header;
        let t = match *now {
            Some(t) => t,
            None => {
                let t = clock.take().map_or(0, |f| f());
                *now = Some(t);
                t
            }
        };
        let Some(sent) = self.sent_us.take() else {
            out.drops.bad_time = out.drops.bad_time.saturating_add(1);
            return;
        };
        match t.checked_sub(sent) {
            Some(d) if d < 0 => out.drops.future = out.drops.future.saturating_add(1),
            Some(d) if d > MAX_TRANSIT_US => {
                out.drops.too_old = out.drops.too_old.saturating_add(1)
            }
            Some(d) => {
                let secs = d as f64 / 1e6;
                out.total.add(secs);
                out.interval.add(secs);
            }
            None => out.drops.too_old = out.drops.too_old.saturating_add(1),
        }
    }

    /// The stream ended: whether it ended inside a burst (a header begun or a body unread).
    pub(crate) fn cut(&self) -> bool {
        match self.state {
            State::Header => self.have > 0,
            State::Body => true,
            State::Lost => false,
        }
    }
}

/// Our wall clock, µs since 1970.
pub(crate) fn wall_us() -> i64 {
    let (s, us) = wire::wall_now();
    i64::from(s)
        .saturating_mul(1_000_000)
        .saturating_add(i64::from(us))
}

fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

fn lock(m: &Mutex<TripStats>) -> std::sync::MutexGuard<'_, TripStats> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Receive a `--trip-times` stream until stopped, EOF or a socket error, counting every byte
/// in `counter` and the bursts' latency in `stats` (locked once per read that completed a
/// burst). No receive low-water mark (unlike `tcp::recv_loop`): a reader woken late would
/// add up to its wake-up delay to every figure.
pub(crate) fn recv_loop(
    sock: TcpStream,
    len: usize,
    counter: Arc<AtomicU64>,
    shared: Arc<Shared>,
    stats: Arc<Mutex<TripStats>>,
) {
    let _ = sock.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; len.clamp(TCP_BURST_HEADER_LEN, MAX_RECV_BUF)];
    let mut r = &sock;
    let mut rd = BurstReader::default();
    loop {
        if shared.stop.load(Relaxed) {
            return;
        }
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                counter.fetch_add(n as u64, Relaxed);
                let d = rd.feed(buf.get(..n).unwrap_or(&[]), wall_us);
                if !d.is_empty() {
                    lock(&stats).merge(&d);
                }
            }
            Err(e) if transient(&e) => continue,
            Err(e) => {
                if !shared.stop.load(Relaxed) {
                    if let Ok(mut g) = shared.error.lock() {
                        g.get_or_insert(format!("stream read failed: {e}"));
                    }
                    shared.wake.notify_one();
                }
                return;
            }
        }
    }
    if rd.cut() {
        let mut g = lock(&stats);
        g.drops.cut = g.drops.cut.saturating_add(1);
    }
}

/// Send `len`-byte blocks (at least 96), each one a burst whose header carries its write
/// time, id (1, 2, …), size `len`, sequence and the client's `start` time, until stopped,
/// the `-n` target, or a socket error; `rate` in bits/s (0 = unlimited) as in
/// `tcp::send_loop`. A block begun is written to its end even when the senders are told to
/// stop (a stock server warns about a burst cut inside its header), unless everything stops.
pub(crate) fn send_loop(
    sock: TcpStream,
    len: usize,
    counter: Arc<AtomicU64>,
    shared: Arc<Shared>,
    rate: u64,
    start: (u32, u32),
) {
    let _ = sock.set_write_timeout(Some(POLL));
    let len = len.max(TCP_BURST_HEADER_LEN);
    let mut block = crate::engine::tcp::payload(len, true);
    let size = u32::try_from(len).unwrap_or(u32::MAX);
    let t0 = Instant::now();
    let mut sent: u64 = 0;
    let mut id: u32 = 0;
    let mut seq: u64 = 1;
    let mut w = &sock;
    let mut off = 0usize;
    loop {
        if shared.stop.load(Relaxed) {
            return;
        }
        if off == 0 {
            if shared.stop_send.load(Relaxed) {
                return;
            }
            if shared.send_limit_reached() {
                shared.wake.notify_one();
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            if rate > 0 {
                let due = sent as f64 * 8.0 / rate as f64;
                let el = t0.elapsed().as_secs_f64();
                if due > el {
                    std::thread::sleep(Duration::from_secs_f64((due - el).min(0.05)));
                    continue;
                }
            }
            id = id.wrapping_add(1);
            seq = seq.saturating_add(len as u64);
            BurstHeader {
                write: wire::wall_now(),
                id,
                size,
                seqno: seq,
            }
            .write_into(&mut block, start);
        }
        match w.write(block.get(off..).unwrap_or(&[])) {
            Ok(0) => return,
            Ok(n) => {
                sent = sent.saturating_add(n as u64);
                counter.fetch_add(n as u64, Relaxed);
                shared.sent_bytes.fetch_add(n as u64, Relaxed);
                off = off.saturating_add(n);
                if off >= block.len() {
                    off = 0;
                    shared.sent_blocks.fetch_add(1, Relaxed);
                }
            }
            Err(e) if transient(&e) => continue,
            Err(e) => {
                if !shared.stop.load(Relaxed) {
                    if let Ok(mut g) = shared.error.lock() {
                        g.get_or_insert(format!("stream write failed: {e}"));
                    }
                    shared.wake.notify_one();
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burst(id: u32, size: u32, write_us: i64) -> Vec<u8> {
        let mut b = vec![b'7'; size.max(96) as usize];
        BurstHeader {
            write: ((write_us / 1_000_000) as u32, (write_us % 1_000_000) as u32),
            id,
            size,
            seqno: 1,
        }
        .write_into(&mut b, (5, 6));
        b.truncate(size as usize);
        b
    }

    const NOW: i64 = 1_800_000_000_000_000;

    #[test]
    fn bursts_spanning_reads_give_one_figure_each() {
        let mut s = Vec::new();
        for i in 1..=5u32 {
            s.extend(burst(i, 1000, NOW - i64::from(i) * 1000));
        }
        // Every split of the stream into two reads, and reads of 1..=97 bytes.
        for cut in 0..s.len() {
            let mut r = BurstReader::default();
            let mut t = r.feed(&s[..cut], || NOW);
            t.merge(&r.feed(&s[cut..], || NOW));
            assert_eq!(t.total.count, 5, "cut at {cut}");
            assert!(!r.cut());
        }
        for step in 1..=97 {
            let mut r = BurstReader::default();
            let mut t = TripStats::default();
            for c in s.chunks(step) {
                t.merge(&r.feed(c, || NOW));
            }
            assert_eq!(t.total.count, 5, "reads of {step}");
            assert_eq!(t.drops, TripDrops::default());
            // 1 … 5 ms.
            assert!((t.total.min - 0.001).abs() < 1e-9 && (t.total.max - 0.005).abs() < 1e-9);
            assert!((t.total.mean - 0.003).abs() < 1e-9);
        }
    }

    #[test]
    fn the_clock_is_read_only_when_a_burst_completes() {
        let b = burst(1, 1000, NOW - 10);
        let mut r = BurstReader::default();
        let t = r.feed(&b[..500], || panic!("no burst completed"));
        assert_eq!(t.total.count, 0);
        let t = r.feed(&b[500..], || NOW);
        assert_eq!(t.total.count, 1);
        assert!((t.total.mean - 10e-6).abs() < 1e-12);
    }

    #[test]
    fn hostile_bursts_are_counted_not_measured() {
        // A write time from the future, one 601 s old, a garbage µs word, a smallest burst.
        let mut s = burst(1, 200, NOW + 5_000);
        s.extend(burst(2, 200, NOW - 601_000_000));
        let mut bad = burst(3, 200, NOW);
        bad[24..28].copy_from_slice(&2_000_000u32.to_be_bytes());
        s.extend(bad);
        s.extend(burst(4, 96, NOW - 2_000));
        // Garbage write seconds (u32::MAX, far future), then an id gap (9 after 5).
        let mut far = burst(5, 96, NOW);
        far[20..24].copy_from_slice(&u32::MAX.to_be_bytes());
        s.extend(far);
        s.extend(burst(9, 100, NOW - 1_000));
        let mut r = BurstReader::default();
        let t = r.feed(&s, || NOW);
        assert_eq!(t.total.count, 2, "{t:?}");
        assert_eq!(
            t.drops,
            TripDrops {
                future: 2,
                too_old: 1,
                bad_time: 1,
                id_gaps: 1,
                ..Default::default()
            }
        );
        assert!((t.total.max - 0.002).abs() < 1e-9);
        assert!(t.drops.sentence().unwrap().contains("2 completed before"));
        // A size below the header: framing lost, counted once, nothing more measured.
        let mut s = burst(1, 95, NOW);
        s.resize(96, 0);
        s.extend(burst(2, 1000, NOW - 1));
        let mut r = BurstReader::default();
        let t = r.feed(&s, || NOW);
        assert_eq!((t.total.count, t.drops.bad_size), (0, 1));
        assert_eq!(r.feed(&burst(3, 1000, NOW - 1), || NOW).total.count, 0);
        assert!(!r.cut());
        // Size 0 and u32::MAX: no panic; the huge one simply never completes.
        for size in [0u32, u32::MAX] {
            let mut h = burst(1, 96, NOW);
            h[48..52].copy_from_slice(&size.to_be_bytes());
            h.extend(vec![0u8; 10_000]);
            let mut r = BurstReader::default();
            let t = r.feed(&h, || NOW);
            assert_eq!(t.total.count, 0);
        }
        // Pure garbage of every length up to 300 bytes: never a panic, never a figure
        // beyond the limits.
        for n in 0..300usize {
            let g: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
            let mut r = BurstReader::default();
            let t = r.feed(&g, || NOW);
            assert!(t.total.count == 0 || (0.0..=600.0).contains(&t.total.max));
        }
    }

    #[test]
    fn a_stream_ending_inside_a_burst_is_cut() {
        let b = burst(1, 1000, NOW);
        let mut r = BurstReader::default();
        r.feed(&b[..40], || NOW);
        assert!(r.cut(), "inside the header");
        let mut r = BurstReader::default();
        r.feed(&b[..400], || NOW);
        assert!(r.cut(), "inside the body");
        let mut r = BurstReader::default();
        r.feed(&b, || NOW);
        assert!(!r.cut());
    }

    #[test]
    fn merged_figures_equal_one_by_one_figures() {
        let xs = [0.5, 0.25, 3.0, 1.0, 0.125, 2.0, 0.75];
        let mut one = Transit::default();
        xs.iter().for_each(|x| one.add(*x));
        let (mut a, mut b) = (Transit::default(), Transit::default());
        xs[..3].iter().for_each(|x| a.add(*x));
        xs[3..].iter().for_each(|x| b.add(*x));
        merge_transit(&mut a, &b);
        assert_eq!((a.count, a.min, a.max), (one.count, one.min, one.max));
        assert!((a.mean - one.mean).abs() < 1e-12 && (a.m2 - one.m2).abs() < 1e-9);
        assert!((a.sum - one.sum).abs() < 1e-12);
    }

    /// Our sender's bursts, read back by our reader over loopback: one figure per block,
    /// ids in sequence, latency ≥ 0 and below the test's length (one host, one clock).
    #[test]
    fn our_sender_and_reader_agree_over_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let shared = Arc::new(Shared {
            num: 1000 * 5000,
            len: 5000,
            ..Default::default()
        });
        let stats = Arc::new(Mutex::new(TripStats::default()));
        let (sh, ctr) = (shared.clone(), Arc::new(AtomicU64::new(0)));
        let t = std::thread::spawn(move || send_loop(c, 5000, ctr, sh, 0, wire::wall_now()));
        let (sh, rc, st) = (shared.clone(), Arc::new(AtomicU64::new(0)), stats.clone());
        let rc2 = rc.clone();
        let r = std::thread::spawn(move || recv_loop(s, 128 * 1024, rc2, sh, st));
        let deadline = Instant::now() + Duration::from_secs(10);
        while rc.load(Relaxed) < 5_000_000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        shared.stop.store(true, Relaxed);
        t.join().unwrap();
        r.join().unwrap();
        let g = *stats.lock().unwrap();
        assert_eq!(g.total.count, 1000);
        assert_eq!(g.drops, TripDrops::default());
        assert!(g.total.min >= 0.0 && g.total.max < 10.0, "{g:?}");
    }
}
