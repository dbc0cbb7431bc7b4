//! TCP stream loops: one OS thread per stream, blocking writes/reads of `len`-byte blocks with
//! short socket timeouts so a stop request is seen within 200 ms. This is the hot path: no
//! allocation, no locks, two relaxed atomic adds per block (a receiver of a `-n`/`-k` test also
//! stores the time of its latest read: one monotonic clock read and one atomic max; a receiver
//! of a timed test keeps a read low-water mark instead, `ReadMark`: a clock read per read,
//! whose blocks are then whole).
//! Not for: deciding when a test ends (the session does; loops only report limits reached).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a blocked read/write waits before the loop checks the stop flag again.
pub(crate) const POLL: Duration = Duration::from_millis(200);

/// State shared by all stream threads of one test and its control task.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Set to stop every loop.
    pub stop: AtomicBool,
    /// Set to stop the sending loops only (the end of a test: senders stop first, then the
    /// totals are read, then everything stops).
    pub stop_send: AtomicBool,
    /// Bytes written over all sending streams since start (or the omit reset), for `-n`.
    pub sent_bytes: AtomicU64,
    /// Full blocks written over all sending streams, for `-k`.
    pub sent_blocks: AtomicU64,
    /// Bytes read over all receiving streams, for `-n` with `-R`. Counted by TCP receivers
    /// only in a `-n`/`-k` test.
    pub recv_bytes: AtomicU64,
    /// `-n` target in bytes over all streams; 0 = none.
    pub num: u64,
    /// `-k` target in blocks over all streams; 0 = none.
    pub blockcount: u64,
    /// Block size in bytes.
    pub len: u64,
    /// `--skip-rx-copy`: TCP receivers discard what they read (recv with MSG_TRUNC) instead
    /// of copying it into their buffer; the bytes are counted the same.
    pub skip_rx_copy: bool,
    /// `-Z` (`zerocopy` in the parameters): TCP senders send their block with sendfile(2)
    /// from an in-memory file instead of write(2) from user memory, as iperf3 `-Z` does.
    pub zerocopy: bool,
    /// The test set the socket buffers (`-w`): the kernel does not grow a locked receive
    /// buffer, so TCP readers keep no read mark (`ReadMark`).
    pub window_set: bool,
    /// Woken when a byte/block limit is reached or a stream fails.
    pub wake: Notify,
    /// First stream error (text), if any stream failed before stop.
    pub error: Mutex<Option<String>>,
    /// Origin of `last_recv_ns`: when this state was made.
    pub epoch: Epoch,
    /// Nanoseconds from `epoch` to the end of the latest read on any TCP receiving stream;
    /// 0 = nothing read yet. Kept only in a `-n`/`-k` test (the drain's). Read with
    /// [`Shared::last_recv`].
    pub last_recv_ns: AtomicU64,
}

/// A monotonic time origin that defaults to the moment it is made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epoch(pub Instant);

impl Default for Epoch {
    fn default() -> Self {
        Epoch(Instant::now())
    }
}

impl Shared {
    /// True when the sending side has written its `-n`/`-k` target.
    pub(crate) fn send_limit_reached(&self) -> bool {
        (self.num > 0 && self.sent_bytes.load(Relaxed) >= self.num)
            || (self.blockcount > 0 && self.sent_blocks.load(Relaxed) >= self.blockcount)
    }

    /// True when the receiving side has read the `-n`/`-k` target (blocks = bytes / len).
    pub(crate) fn recv_limit_reached(&self) -> bool {
        let r = self.recv_bytes.load(Relaxed);
        (self.num > 0 && r >= self.num)
            || (self.blockcount > 0 && self.len > 0 && r / self.len >= self.blockcount)
    }

    fn fail(&self, e: String) {
        if let Ok(mut g) = self.error.lock() {
            if g.is_none() {
                *g = Some(e);
            }
        }
        self.wake.notify_one();
    }

    /// The first stream error, if any.
    pub(crate) fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|g| g.clone())
    }

    /// When the latest read on any TCP receiving stream returned data; `None` before the
    /// first one. The end of a receiver's measurement when it reads a test to its end
    /// (`docs/iperf3-wire.md` §8.4).
    pub(crate) fn last_recv(&self) -> Option<Instant> {
        match self.last_recv_ns.load(Relaxed) {
            0 => None,
            ns => Some(self.epoch.0 + Duration::from_nanos(ns)),
        }
    }

    fn note_recv(&self) {
        let ns = self.epoch.0.elapsed().as_nanos().clamp(1, u64::MAX as u128) as u64;
        self.last_recv_ns.fetch_max(ns, Relaxed);
    }
}

/// A block of payload: random bytes, or iperf3's repeating "0123456789" pattern.
pub(crate) fn payload(len: usize, repeating: bool) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    if repeating {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = b'0' + (i % 10) as u8;
        }
    } else if getrandom::getrandom(&mut buf).is_err() {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0];
        }
    }
    buf
}

fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Write `buf` repeatedly until stopped, the `-n`/`-k` target is reached, or the socket fails.
/// `rate` is the target in bits/s (0 = unlimited): the loop writes only while the average
/// since its start is below it (iperf3's rule), sleeping until the next block is due.
pub(crate) fn send_loop<B: AsRef<[u8]>>(
    sock: TcpStream,
    buf: B,
    counter: Arc<AtomicU64>,
    shared: Arc<Shared>,
    rate: u64,
) {
    let _ = sock.set_write_timeout(Some(POLL));
    let buf = buf.as_ref();
    let start = Instant::now();
    let mut sent: u64 = 0;
    let mut w = &sock;
    // -Z: the block in an in-memory file, sent with sendfile(2). Without memfd (an old
    // kernel), the stream falls back to write(2): the bytes on the wire are the same.
    let zc = if shared.zerocopy {
        crate::engine::sys::memfd_with(buf)
            .map_err(|e| tracing::warn!("-Z: no in-memory file ({e}); sending with write(2)"))
            .ok()
    } else {
        None
    };
    // Offset into the current block: a write cut short by the send timeout is completed before
    // the next block starts, so a block is counted once, whole (`-k` stays exact).
    let mut off = 0usize;
    loop {
        if shared.stop.load(Relaxed) || shared.stop_send.load(Relaxed) {
            return;
        }
        if off == 0 && shared.send_limit_reached() {
            shared.wake.notify_one();
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        if rate > 0 && off == 0 {
            let due = sent as f64 * 8.0 / rate as f64;
            let el = start.elapsed().as_secs_f64();
            if due > el {
                std::thread::sleep(Duration::from_secs_f64((due - el).min(0.05)));
                continue;
            }
        }
        let wrote = match &zc {
            Some(f) => crate::engine::sys::sendfile(sock.as_fd(), f, off as u64, buf.len() - off),
            None => w.write(&buf[off..]),
        };
        match wrote {
            Ok(0) => return,
            Ok(n) => {
                sent += n as u64;
                counter.fetch_add(n as u64, Relaxed);
                shared.sent_bytes.fetch_add(n as u64, Relaxed);
                off += n;
                if off >= buf.len() {
                    off = 0;
                    shared.sent_blocks.fetch_add(1, Relaxed);
                }
            }
            Err(e) if transient(&e) => continue,
            Err(e) => {
                if !shared.stop.load(Relaxed) {
                    shared.fail(format!("stream write failed: {e}"));
                }
                return;
            }
        }
    }
}

/// How much data, in time at the stream's own rate, a TCP reader lets queue before it is
/// woken (`ReadMark`): the most a reading can lag the wire at an interval's end or TEST_END.
pub(crate) const READ_MARK_TIME: Duration = Duration::from_millis(2);

/// A TCP reader's receive low-water mark (`SO_RCVLOWAT`), kept at about
/// [`READ_MARK_TIME`] of the stream's recent rate and at most one read buffer.
///
/// Without it a reader faster than the wire is woken for every few segments and returns
/// with a few KB, so a stream pays a wake-up and a syscall per few KB; with it the kernel
/// wakes the reader once a block is queued. Measured with `benches/tcp.sh` against iperf3
/// 3.22 on veth (benches/README.md has the table): receiver CPU per GB 0.87× → 0.73× of
/// iperf3's with `-P 1`, 0.95× → 0.89× with `-P 4`. Tied to the rate, not fixed, because a
/// blocked read returns what it has only when the mark is reached or at [`POLL`]: a fixed
/// 128 KiB mark on a 1 Mbit/s stream would hold back up to a second of data. The rate is
/// measured again every [`READ_MARK_RECHECK`] (one clock read per read, a few ns per block)
/// and at once after a read shorter than the mark, so a mark outlives a fall of the rate by
/// one read and 50 ms at most. Not used when the test set `-w` (see [`Shared::window_set`]).
struct ReadMark<'a> {
    fd: BorrowedFd<'a>,
    /// The largest mark, bytes (the read buffer).
    max: usize,
    /// The mark in force, bytes, as the kernel reports it (it caps it at half the receive
    /// buffer).
    set: usize,
    bytes: u64,
    since: Option<Instant>,
}

/// How often a [`ReadMark`] measures its stream's rate again.
pub(crate) const READ_MARK_RECHECK: Duration = Duration::from_millis(50);

impl<'a> ReadMark<'a> {
    fn new(fd: BorrowedFd<'a>, max: usize) -> ReadMark<'a> {
        ReadMark {
            fd,
            max,
            set: 1,
            bytes: 0,
            since: None,
        }
    }

    fn after_read(&mut self, n: usize) {
        self.bytes += n as u64;
        let now = Instant::now();
        let Some(since) = self.since else {
            self.since = Some(now);
            self.bytes = 0;
            return;
        };
        let dt = now.saturating_duration_since(since);
        if (dt < READ_MARK_RECHECK && n >= self.set) || dt < READ_MARK_TIME {
            return;
        }
        let want = mark_for(self.bytes, dt.as_secs_f64(), self.max);
        // Only a change of more than 2x is worth a system call.
        if want > self.set * 2 || want * 2 < self.set {
            let level = libc::SOL_SOCKET;
            let want = want.min(i32::MAX as usize) as i32;
            if crate::engine::sys::setsockopt_int(self.fd, level, libc::SO_RCVLOWAT, want).is_ok() {
                self.set = crate::engine::sys::getsockopt_int(self.fd, level, libc::SO_RCVLOWAT)
                    .map_or(1, |v| v.max(1) as usize);
            }
        }
        self.bytes = 0;
        self.since = Some(now);
    }
}

/// The read mark for a stream that received `bytes` in `secs`: [`READ_MARK_TIME`] of data
/// at that rate, in bytes, 1 ..= `max`.
fn mark_for(bytes: u64, secs: f64, max: usize) -> usize {
    let per_s = bytes as f64 / secs.max(1e-6);
    ((per_s * READ_MARK_TIME.as_secs_f64()) as usize).clamp(1, max)
}

/// Largest receive buffer of one TCP stream, bytes (128 KiB). A larger `-l` (up to 1 MiB)
/// is read in pieces: TCP has no message boundaries, so the byte counts are the same, and a
/// client asking for `-P 128 -l 1M` cannot make the server hold 128 MiB of buffers.
pub(crate) const MAX_RECV_BUF: usize = 128 * 1024;

/// Read into a `len`-byte buffer (at most [`MAX_RECV_BUF`]) until stopped, EOF or a socket error. With `check_limit`
/// (a `-R` client) it wakes the session when the `-n`/`-k` target has been received.
pub(crate) fn recv_loop(
    sock: TcpStream,
    len: usize,
    counter: Arc<AtomicU64>,
    shared: Arc<Shared>,
    check_limit: bool,
) {
    let _ = sock.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; len.clamp(1, MAX_RECV_BUF)];
    let mut r = &sock;
    // Only a byte/block-limited test (-n/-k) needs the total over all streams (the limit) and
    // the time of the last read (its drain, docs/iperf3-wire.md §8.4). A timed test skips both:
    // they are atomics every receiving stream writes (a contended cache line with -P 4) and a
    // clock read, on every read.
    let limited = shared.num > 0 || shared.blockcount > 0;
    // A timed test's reader wakes once per block instead of once per few segments (a
    // limited test reads every byte as it comes: its drain counts them to the last one).
    // A test with `-w` keeps none: its receive buffer is locked, and a mark of half of it
    // would leave the sender only the rest of its window.
    let keep_mark = !limited && !shared.window_set;
    let mut mark = keep_mark.then(|| ReadMark::new(sock.as_fd(), buf.len()));
    loop {
        if shared.stop.load(Relaxed) {
            return;
        }
        let got = if shared.skip_rx_copy {
            crate::engine::sys::recv_discard(sock.as_fd(), &mut buf)
        } else {
            r.read(&mut buf)
        };
        match got {
            Ok(0) => return,
            Ok(n) => {
                counter.fetch_add(n as u64, Relaxed);
                if let Some(m) = &mut mark {
                    m.after_read(n);
                }
                if limited {
                    shared.recv_bytes.fetch_add(n as u64, Relaxed);
                    shared.note_recv();
                    if check_limit && shared.recv_limit_reached() {
                        shared.wake.notify_one();
                    }
                }
            }
            Err(e) if transient(&e) => continue,
            Err(e) => {
                if !shared.stop.load(Relaxed) {
                    shared.fail(format!("stream read failed: {e}"));
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_mark_is_two_ms_of_the_stream_s_rate() {
        let max = MAX_RECV_BUF;
        // 1 Mbit/s: 125 000 B/s, 2 ms of it is 250 B.
        assert_eq!(mark_for(125_000, 1.0, max), 250);
        // 50 Mbit/s over 0.1 s.
        assert_eq!(mark_for(625_000, 0.1, max), 12_500);
        // 1 Gbit/s would be 250 000 B: one read buffer at most.
        assert_eq!(mark_for(125_000_000, 1.0, max), max);
        // Nothing received: the kernel's default of 1 byte.
        assert_eq!(mark_for(0, 0.5, max), 1);
    }

    #[test]
    fn a_fast_stream_gets_its_mark_on_the_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let fd = s.as_fd();
        let level = libc::SOL_SOCKET;
        assert_eq!(
            crate::engine::sys::getsockopt_int(fd, level, libc::SO_RCVLOWAT).unwrap(),
            1
        );
        let mut m = ReadMark::new(fd, 16 * 1024);
        // 65 reads of 64 KiB (the first only starts the clock) over the 50 ms recheck: far
        // above 16 KiB per 2 ms, so the mark is the whole buffer.
        for _ in 0..64 {
            m.after_read(64 * 1024);
        }
        assert_eq!(m.set, 1, "no new mark before the recheck");
        std::thread::sleep(READ_MARK_RECHECK);
        m.after_read(64 * 1024);
        let on_socket = crate::engine::sys::getsockopt_int(fd, level, libc::SO_RCVLOWAT).unwrap();
        assert_eq!(on_socket, 16 * 1024);
        assert_eq!(m.set, 16 * 1024);
        // A short read re-measures at once: 1 KiB over 20 ms is a slow stream (102 B per
        // 2 ms), so the mark falls back under 1 KiB.
        std::thread::sleep(Duration::from_millis(20));
        m.after_read(1024);
        let low = crate::engine::sys::getsockopt_int(fd, level, libc::SO_RCVLOWAT).unwrap();
        assert!((1..=1024).contains(&low), "mark {low} after a slow 50 ms");
        assert_eq!(m.set, low as usize);
        // Full reads of a stream that slowed down: the mark follows within the recheck.
        let mut m = ReadMark::new(fd, 16 * 1024);
        m.after_read(16 * 1024);
        for _ in 0..64 {
            m.after_read(16 * 1024);
        }
        std::thread::sleep(READ_MARK_RECHECK);
        m.after_read(16 * 1024);
        assert_eq!(m.set, 16 * 1024);
        std::thread::sleep(Duration::from_millis(200));
        m.after_read(16 * 1024);
        assert!(m.set <= 1024, "mark {} after 16 KiB in 200 ms", m.set);
        drop(c);
    }

    /// The read mark a timed test's reader has set after 300 ms of a fast loopback stream.
    fn mark_after_a_fast_stream(window_set: bool) -> i32 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let probe = s.try_clone().unwrap();
        let shared = Arc::new(Shared {
            window_set,
            ..Default::default()
        });
        let (sh, ctr) = (shared.clone(), Arc::new(AtomicU64::new(0)));
        let t = std::thread::spawn(move || send_loop(c, payload(128 * 1024, false), ctr, sh, 0));
        let (sh, rc) = (shared.clone(), Arc::new(AtomicU64::new(0)));
        let r = std::thread::spawn(move || recv_loop(s, 128 * 1024, rc, sh, false));
        std::thread::sleep(Duration::from_millis(300));
        let fd = probe.as_fd();
        let mark = crate::engine::sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT);
        shared.stop.store(true, Relaxed);
        t.join().unwrap();
        r.join().unwrap();
        mark.unwrap()
    }

    #[test]
    fn a_timed_reader_keeps_a_mark_unless_the_test_set_a_window() {
        // Loopback runs at Gbit/s: 2 ms of it is more than the 128 KiB buffer (the kernel
        // may cap the mark at half the receive buffer, never below 16 KiB here).
        let mark = mark_after_a_fast_stream(false);
        assert!(mark >= 16 * 1024, "mark {mark}");
        // -w locks the receive buffer: no mark, every segment is read as it comes.
        assert_eq!(mark_after_a_fast_stream(true), 1);
    }

    #[test]
    fn repeating_payload_is_the_digit_pattern() {
        assert_eq!(&payload(12, true), b"012345678901");
    }

    #[test]
    fn send_loop_stops_at_the_byte_target() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let shared = Arc::new(Shared {
            num: 1_000_000,
            len: 1000,
            ..Default::default()
        });
        let ctr = Arc::new(AtomicU64::new(0));
        let rctr = Arc::new(AtomicU64::new(0));
        let (sh, ct) = (shared.clone(), ctr.clone());
        let t = std::thread::spawn(move || send_loop(c, payload(1000, false), ct, sh, 0));
        let (sh, rc) = (shared.clone(), rctr.clone());
        let r = std::thread::spawn(move || recv_loop(s, 1000, rc, sh, false));
        let deadline = Instant::now() + Duration::from_secs(10);
        while rctr.load(Relaxed) < 1_000_000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        shared.stop.store(true, Relaxed);
        t.join().unwrap();
        r.join().unwrap();
        // Whole 1000-byte blocks: exactly the target, not one block more.
        assert_eq!(ctr.load(Relaxed), 1_000_000);
        assert_eq!(rctr.load(Relaxed), 1_000_000);
        assert_eq!(shared.sent_blocks.load(Relaxed), 1000);
        // A -n test keeps the total over all streams and the time of the last read (drain).
        assert_eq!(shared.recv_bytes.load(Relaxed), 1_000_000);
        assert!(shared.last_recv().is_some_and(|t| t <= Instant::now()));
    }

    /// `-Z`: the block goes out with sendfile(2) from an in-memory file; the receiver gets
    /// exactly the block, repeated, and whole blocks are counted.
    #[test]
    fn zerocopy_sender_sends_the_block_from_a_file() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let shared = Arc::new(Shared {
            num: 300_000,
            len: 3000,
            zerocopy: true,
            ..Default::default()
        });
        let ctr = Arc::new(AtomicU64::new(0));
        let block = payload(3000, false);
        let (sh, ct, b) = (shared.clone(), ctr.clone(), block.clone());
        let t = std::thread::spawn(move || send_loop(c, b, ct, sh, 0));
        let mut got = vec![0u8; 300_000];
        s.read_exact(&mut got).unwrap();
        shared.stop.store(true, Relaxed);
        t.join().unwrap();
        assert_eq!(ctr.load(Relaxed), 300_000);
        assert_eq!(shared.sent_blocks.load(Relaxed), 100);
        for (i, chunk) in got.chunks(3000).enumerate() {
            assert_eq!(chunk, &block[..], "block {i} differs");
        }
    }

    #[test]
    fn rate_limited_sender_keeps_its_average() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let shared = Arc::new(Shared {
            len: 10_000,
            ..Default::default()
        });
        let ctr = Arc::new(AtomicU64::new(0));
        let (sh, ct) = (shared.clone(), ctr.clone());
        // 8 Mbit/s = 1 MB/s for 0.5 s → about 500 kB.
        let t = std::thread::spawn(move || send_loop(c, payload(10_000, false), ct, sh, 8_000_000));
        let (sh, rc) = (shared.clone(), Arc::new(AtomicU64::new(0)));
        let r = std::thread::spawn(move || recv_loop(s, 10_000, rc, sh, false));
        std::thread::sleep(Duration::from_millis(500));
        shared.stop.store(true, Relaxed);
        t.join().unwrap();
        r.join().unwrap();
        let sent = ctr.load(Relaxed);
        assert!((200_000..=620_000).contains(&sent), "sent {sent}");
        // A timed test leaves the shared receive total and clock alone (per-read cost).
        assert_eq!(shared.recv_bytes.load(Relaxed), 0);
        assert_eq!(shared.last_recv(), None);
    }
}
