//! Byte counters of the connections of one run, cut into reporting intervals (iperf3's
//! [`IntervalRecord`] with one [`StreamInterval`] per connection) for the runs that are not
//! iperf3 tests: HTTP downloads served or fetched, raw TCP sink and source.
//! Not for: iperf3 streams (they keep their own interval state in `session.rs`).

use crate::engine::report::{IntervalRecord, StreamInterval};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One connection's counter, shared between the task that moves the bytes and the meter.
#[derive(Debug)]
pub(crate) struct Counter {
    /// Stream id as shown in the interval table (1, 2, …).
    pub id: u32,
    /// Local socket number (file descriptor), shown as iperf3 does.
    pub socket: i32,
    bytes: AtomicU64,
    closed: AtomicBool,
    started: Instant,
    ended: Mutex<Option<Instant>>,
    /// When the connection's last request was served to its end (cleared by the next one).
    idle_since: Mutex<Option<Instant>>,
}

impl Counter {
    /// The connection finished a request (its last byte went out now): an interval that ends
    /// later is cut at this time, not at the interval tick.
    pub(crate) fn request_done(&self) {
        if let Ok(mut g) = self.idle_since.lock() {
            *g = Some(Instant::now());
        }
    }

    /// The connection started a new request.
    pub(crate) fn request_started(&self) {
        if let Ok(mut g) = self.idle_since.lock() {
            *g = None;
        }
    }

    /// When this connection stopped moving bytes for good or for now: closed, or its last
    /// request done; `None` while busy.
    fn finished_at(&self) -> Option<Instant> {
        let ended = self.ended.lock().ok().and_then(|g| *g);
        ended.or_else(|| self.idle_since.lock().ok().and_then(|g| *g))
    }

    /// Count `n` more bytes moved.
    pub(crate) fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes moved so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The connection has ended (idempotent; the first call fixes its end time).
    pub(crate) fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            if let Ok(mut g) = self.ended.lock() {
                *g = Some(Instant::now());
            }
        }
    }

    /// Whether [`Counter::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Seconds from the connection's start to its end (or to now while it is open).
    pub(crate) fn seconds(&self) -> f64 {
        let end = self
            .ended
            .lock()
            .ok()
            .and_then(|g| *g)
            .unwrap_or_else(Instant::now);
        end.duration_since(self.started).as_secs_f64()
    }
}

/// Final figures of one connection (as stored in a traffic run's summary, read back with every
/// key defaulting).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub(crate) struct ConnTotals {
    pub id: u32,
    /// Bytes moved over the connection's life.
    pub bytes: u64,
    /// Connection life, seconds.
    pub seconds: f64,
    /// bytes × 8 / seconds (0 for a zero duration), bits/s.
    pub bits_per_second: f64,
}

struct State {
    streams: Vec<Arc<Counter>>,
    /// Bytes of each stream at the last cut.
    last: Vec<u64>,
    /// Seconds since `t0` of the last cut.
    last_t: f64,
}

/// The counters of one run and the cut of the last interval.
pub(crate) struct Meter {
    t0: Instant,
    sender: bool,
    state: Mutex<State>,
}

/// bits/s of `bytes` over `secs`, never NaN (0 for a zero duration).
pub(crate) fn bps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

impl Meter {
    /// A meter starting now. `sender`: the board sends on these connections (served
    /// downloads, TCP source) rather than receives (downloads, TCP sink).
    pub(crate) fn new(sender: bool) -> Arc<Meter> {
        Arc::new(Meter {
            t0: Instant::now(),
            sender,
            state: Mutex::new(State {
                streams: Vec::new(),
                last: Vec::new(),
                last_t: 0.0,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add a connection (socket number `socket`); its stream id is the next number from 1.
    pub(crate) fn add_stream(&self, socket: i32) -> Arc<Counter> {
        let mut s = self.lock();
        let c = Arc::new(Counter {
            id: s.streams.len() as u32 + 1,
            socket,
            bytes: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            started: Instant::now(),
            ended: Mutex::new(None),
            idle_since: Mutex::new(None),
        });
        s.streams.push(c.clone());
        s.last.push(0);
        c
    }

    /// When the meter started.
    pub(crate) fn started(&self) -> Instant {
        self.t0
    }

    /// Seconds since the meter started.
    pub(crate) fn elapsed(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Cut the interval from the last cut to now: one [`StreamInterval`] per connection that
    /// moved bytes in it or is still open. `None` when no connection qualifies or
    /// the interval is shorter than `min_secs`.
    pub(crate) fn cut(&self, min_secs: f64) -> Option<IntervalRecord> {
        let now = self.elapsed();
        let mut s = self.lock();
        let start = s.last_t;
        if now - start < min_secs {
            return None;
        }
        let mut streams = Vec::new();
        for i in 0..s.streams.len() {
            let c = s.streams[i].clone();
            let total = c.bytes();
            let delta = total.saturating_sub(s.last[i]);
            let was_open = delta > 0 || !c.is_closed();
            s.last[i] = total;
            if !was_open {
                continue;
            }
            // A connection that finished inside this interval is shown up to its last byte
            // (a 0.25 s transfer is 0.00–0.25 s, at its real bitrate).
            let end = match c.finished_at() {
                Some(t) if delta > 0 => {
                    let f = t.saturating_duration_since(self.t0).as_secs_f64();
                    if f > start && f < now {
                        f
                    } else {
                        now
                    }
                }
                _ => now,
            };
            streams.push(StreamInterval {
                id: c.id,
                socket: c.socket,
                start,
                end,
                bytes: delta,
                bits_per_second: bps(delta, end - start),
                sender: self.sender,
                omitted: false,
                tcp: None,
                udp: None,
                latency: None,
            });
        }
        s.last_t = now;
        if streams.is_empty() {
            None
        } else {
            Some(IntervalRecord { streams })
        }
    }

    /// Totals: bytes of every connection, and per connection.
    pub(crate) fn totals(&self) -> (u64, Vec<ConnTotals>) {
        let s = self.lock();
        let per: Vec<ConnTotals> = s
            .streams
            .iter()
            .map(|c| {
                let (b, secs) = (c.bytes(), c.seconds());
                ConnTotals {
                    id: c.id,
                    bytes: b,
                    seconds: secs,
                    bits_per_second: bps(b, secs),
                }
            })
            .collect();
        (per.iter().map(|c| c.bytes).sum(), per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_ends_at_the_last_byte_of_a_finished_request() {
        // Regression (issue 11): a 0.25 s http-serve transfer was shown as 0.00–1.00 s at a
        // quarter of its bitrate. Here: 1 MB in ~60 ms, then idle until the cut at ~200 ms.
        let m = Meter::new(true);
        let a = m.add_stream(5);
        a.request_started();
        std::thread::sleep(std::time::Duration::from_millis(60));
        a.add(1_000_000);
        a.request_done();
        let done = m.elapsed();
        std::thread::sleep(std::time::Duration::from_millis(140));
        let r = m.cut(0.0).expect("an interval");
        let s = &r.streams[0];
        assert_eq!(s.start, 0.0);
        assert!((s.end - done).abs() < 0.005, "end {} vs done {done}", s.end);
        assert!(m.elapsed() - s.end > 0.1, "not truncated: {}", s.end);
        assert!((s.bits_per_second - 8e6 / s.end).abs() < 1.0);
        // The next interval of the still-open, idle connection is a normal empty one.
        let r = m.cut(0.0).expect("the connection is still open");
        assert_eq!(r.streams[0].bytes, 0);
        assert!(r.streams[0].end > r.streams[0].start);
    }

    #[test]
    fn intervals_count_each_byte_once() {
        let m = Meter::new(true);
        let a = m.add_stream(5);
        let b = m.add_stream(6);
        a.add(1000);
        b.add(500);
        let r = m.cut(0.0).expect("an interval");
        assert_eq!(r.streams.len(), 2);
        assert_eq!(r.streams[0].bytes, 1000);
        assert_eq!(r.streams[1].bytes, 500);
        assert_eq!((r.streams[0].id, r.streams[1].id), (1, 2));
        assert!(r
            .streams
            .iter()
            .all(|s| s.sender && s.bits_per_second >= 0.0));
        a.add(10);
        b.close();
        let r = m.cut(0.0).expect("an interval");
        // b is closed and moved nothing since the last cut: not listed again.
        assert_eq!(r.streams.len(), 1);
        assert_eq!(r.streams[0].bytes, 10);
        assert_eq!(r.streams[0].start, r.streams[0].start.max(0.0));
        let (total, per) = m.totals();
        assert_eq!(total, 1510);
        assert_eq!(per[0].bytes, 1010);
        assert_eq!(per[1].bytes, 500);
        assert!(per.iter().all(|c| c.bits_per_second.is_finite()));
        assert_eq!(bps(1000, 0.0), 0.0);
        assert_eq!(bps(1000, 2.0), 4000.0);
    }
}
