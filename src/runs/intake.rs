//! What a run accepts from a peer agent's interval polls: at most one interval record per
//! second of the test so far (plus [`SLACK_RECORDS`]), each with at most the test's streams.
//! A hostile agent answered 750,000 rows for a 3 s test (461 MB stored, issue 37 item 9); a
//! real agent reports one record per second with one entry per stream and direction.
//! Not for: polling the agent (`runs::forward`) or capping its answer's size (`peer::client`).

use crate::engine::report::IntervalRecord;
use std::time::{Duration, Instant};

/// Records accepted beyond one per elapsed second: the agent's test starts a little before
/// our clock does and its first record may already be there.
pub(crate) const SLACK_RECORDS: u64 = 2;

/// Streams one record may carry at most, whatever the spec says (iperf3's `-P` 128, both
/// directions).
pub(crate) const MAX_STREAMS: usize = 256;

/// The intake of one peer job's intervals; see the module text.
#[derive(Debug)]
pub(crate) struct IntervalBound {
    t0: Instant,
    streams: usize,
    taken: u64,
    dropped: u64,
}

impl IntervalBound {
    /// For a job of `parallel` streams (default 1), both directions with `bidir`; the
    /// elapsed time counts from now (make it right after the agent accepted the job).
    pub(crate) fn new(parallel: Option<u32>, bidir: bool) -> IntervalBound {
        let per_dir = usize::try_from(parallel.unwrap_or(1).max(1)).unwrap_or(MAX_STREAMS);
        let dirs = if bidir { 2 } else { 1 };
        IntervalBound {
            t0: Instant::now(),
            streams: per_dir.saturating_mul(dirs).min(MAX_STREAMS),
            taken: 0,
            dropped: 0,
        }
    }

    /// The part of a poll's new records this run keeps (see the module text); the rest is
    /// counted in [`IntervalBound::dropped`].
    pub(crate) fn accept(&mut self, fresh: Vec<IntervalRecord>) -> Vec<IntervalRecord> {
        self.accept_at(fresh, self.t0.elapsed())
    }

    /// [`IntervalBound::accept`] at `elapsed` since the job started.
    pub(crate) fn accept_at(
        &mut self,
        fresh: Vec<IntervalRecord>,
        elapsed: Duration,
    ) -> Vec<IntervalRecord> {
        let allowed = elapsed.as_secs().saturating_add(SLACK_RECORDS);
        let room = usize::try_from(allowed.saturating_sub(self.taken)).unwrap_or(usize::MAX);
        let offered = fresh.len();
        let mut kept: Vec<IntervalRecord> = fresh.into_iter().take(room).collect();
        let mut dropped_rows = 0u64;
        for r in &mut kept {
            if r.streams.len() > self.streams {
                dropped_rows = dropped_rows.saturating_add(
                    u64::try_from(r.streams.len() - self.streams).unwrap_or(u64::MAX),
                );
                r.streams.truncate(self.streams);
            }
        }
        let n = u64::try_from(kept.len()).unwrap_or(u64::MAX);
        self.taken = self.taken.saturating_add(n);
        let refused = u64::try_from(offered.saturating_sub(kept.len())).unwrap_or(u64::MAX);
        self.dropped = self
            .dropped
            .saturating_add(refused)
            .saturating_add(dropped_rows);
        kept
    }

    /// Records and stream entries refused so far (records past the time allowance plus
    /// stream entries past the stream count).
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Streams one record may carry.
    #[cfg(test)]
    pub(crate) fn streams(&self) -> usize {
        self.streams
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::report::StreamInterval;

    fn record(streams: usize, at: f64) -> IntervalRecord {
        IntervalRecord {
            streams: (0..streams)
                .map(|i| StreamInterval {
                    id: u32::try_from(i).expect("id") + 1,
                    socket: 5,
                    start: at,
                    end: at + 1.0,
                    bytes: 125_000,
                    bits_per_second: 1e6,
                    sender: true,
                    omitted: false,
                    tcp: None,
                    udp: None,
                    latency: None,
                })
                .collect(),
        }
    }

    /// Issue 37, item 9: a hostile agent answered 750,000 rows for a 3 s test. Its first poll
    /// (1 s in) keeps 3 records (1 s + 2 slack), the poll at 3 s two more, each cut to the
    /// test's 2 streams; everything else is counted as dropped. A well-behaved agent loses
    /// nothing.
    #[test]
    fn a_flood_of_intervals_is_cut_to_elapsed_seconds_times_streams() {
        let mut b = IntervalBound::new(Some(2), false);
        let flood: Vec<IntervalRecord> = (0..75_000).map(|i| record(10, f64::from(i))).collect();
        let kept = b.accept_at(flood, Duration::from_millis(1_200));
        assert_eq!(kept.len(), 3);
        assert!(kept.iter().all(|r| r.streams.len() == 2));
        assert_eq!(b.dropped(), (75_000 - 3) + 3 * 8);
        let kept = b.accept_at(
            (0..75_000).map(|i| record(2, f64::from(i))).collect(),
            Duration::from_millis(3_100),
        );
        assert_eq!(kept.len(), 2);
        assert_eq!(b.dropped(), (75_000 - 3) + 3 * 8 + (75_000 - 2));

        let mut ok = IntervalBound::new(Some(4), true);
        assert_eq!(ok.streams(), 8);
        for s in 1..=30u64 {
            let kept = ok.accept_at(vec![record(8, s as f64)], Duration::from_secs(s));
            assert_eq!(kept.len(), 1);
            assert_eq!(kept[0].streams.len(), 8);
        }
        assert_eq!(ok.dropped(), 0);
    }
}
