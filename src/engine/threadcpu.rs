//! CPU time of netperfd's own stream threads, per thread, from `/proc/self/task/TID/stat`
//! (fields 14 utime and 15 stime, in clock ticks; proc(5)). Each stream thread records its TID
//! when it starts ([`current_tid`]); the data phase samples them every interval, so a run
//! can say whether the test tool itself used a full core (the "tool-bound" verdict).
//! Not for: whole-core load (see [`crate::board::sampler`]).

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A thread busier than this share of one core counts as using a full core, percent.
pub(crate) const FULL_CORE: f64 = 90.0;

/// CPU of one stream thread over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// Kernel thread id.
    pub tid: i32,
    /// Mean CPU over the sampled intervals, percent of one core (user + system).
    pub mean_percent: f64,
    /// Busiest sampled interval, percent of one core.
    pub peak_percent: f64,
    /// Number of intervals sampled.
    pub samples: u32,
}

/// The calling thread's kernel TID.
pub(crate) fn current_tid() -> i32 {
    crate::engine::sys::gettid()
}

/// Add the calling thread's TID to `tids` (a stream thread calls this first thing).
#[cfg(test)]
pub(crate) fn register_current(tids: &std::sync::Mutex<Vec<i32>>) {
    if let Ok(mut g) = tids.lock() {
        g.push(current_tid());
    }
}

/// user + system ticks of `tid` of this process; `None` when the thread has gone.
pub(crate) fn task_ticks(tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    parse_stat_ticks(&s)
}

/// utime + stime from a `stat` line. The command (field 2) is in parentheses and may hold
/// spaces, so fields are counted after the last ')'.
pub(crate) fn parse_stat_ticks(line: &str) -> Option<u64> {
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14 → index 11, stime 15 → index 12.
    let u: u64 = f.get(11)?.parse().ok()?;
    let s: u64 = f.get(12)?.parse().ok()?;
    Some(u + s)
}

fn ticks_per_second() -> f64 {
    crate::engine::sys::clock_ticks_per_second()
}

/// Per-thread sampler: call [`Sampler::sample`] once per interval with the TIDs to watch.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    prev: Vec<(i32, u64)>,
    at: Option<Instant>,
    out: Vec<ThreadCpu>,
    sums: Vec<f64>,
}

impl Sampler {
    /// Read every thread in `tids` and book its share of one core since the previous call.
    /// Windows shorter than 0.2 s are skipped (ticks are 10 ms).
    pub(crate) fn sample(&mut self, tids: &[i32]) {
        let now = Instant::now();
        let cur: Vec<(i32, u64)> = tids
            .iter()
            .filter_map(|&t| task_ticks(t).map(|k| (t, k)))
            .collect();
        let secs = self.at.map(|a| now.duration_since(a).as_secs_f64());
        match secs {
            Some(s) if s < 0.2 => return,
            Some(s) => {
                let hz = ticks_per_second();
                for &(tid, k) in &cur {
                    let Some(&(_, p)) = self.prev.iter().find(|(t, _)| *t == tid) else {
                        continue;
                    };
                    let pct = (k.saturating_sub(p) as f64 / hz / s * 100.0).min(100.0);
                    self.book(tid, pct);
                }
            }
            None => {}
        }
        self.prev = cur;
        self.at = Some(now);
    }

    fn book(&mut self, tid: i32, pct: f64) {
        let i = match self.out.iter().position(|t| t.tid == tid) {
            Some(i) => i,
            None => {
                self.out.push(ThreadCpu {
                    tid,
                    ..Default::default()
                });
                self.sums.push(0.0);
                self.out.len() - 1
            }
        };
        self.sums[i] += pct;
        let t = &mut self.out[i];
        t.samples += 1;
        t.peak_percent = t.peak_percent.max(pct);
        t.mean_percent = self.sums[i] / f64::from(t.samples);
    }

    /// The figures so far, one per thread that was sampled at least once.
    pub(crate) fn result(&self) -> Vec<ThreadCpu> {
        self.out.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_command_with_spaces_and_parens() {
        let line = "4242 (stream 1) x) R 1 2 3 4 5 6 7 8 9 10 250 40 0 0 20 0 1 0";
        // utime 250 + stime 40
        assert_eq!(parse_stat_ticks(line), Some(290));
        assert_eq!(parse_stat_ticks("garbage"), None);
        assert_eq!(parse_stat_ticks("1 (a) R 1"), None);
    }

    #[test]
    fn a_spinning_thread_reads_near_a_full_core() {
        let (spinner, sleeper) = (
            std::sync::Mutex::new(Vec::new()),
            std::sync::Mutex::new(Vec::new()),
        );
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                register_current(&spinner);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            s.spawn(|| {
                register_current(&sleeper);
                std::thread::sleep(std::time::Duration::from_millis(700));
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut sm = Sampler::default();
            let mut ids = spinner.lock().map(|g| g.clone()).unwrap_or_default();
            ids.extend(sleeper.lock().map(|g| g.clone()).unwrap_or_default());
            assert_eq!(ids.len(), 2);
            sm.sample(&ids);
            std::thread::sleep(std::time::Duration::from_millis(500));
            sm.sample(&ids);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let r = sm.result();
            let spin = r.iter().find(|t| t.tid == ids[0]).map(|t| t.mean_percent);
            let idle = r.iter().find(|t| t.tid == ids[1]).map(|t| t.mean_percent);
            // Other tests share the 2 cores: the spinner gets a good share, the sleeper none.
            assert!(spin.unwrap_or(0.0) > 20.0, "{r:?}");
            assert!(idle.unwrap_or(100.0) < 5.0, "{r:?}");
        });
    }
}
