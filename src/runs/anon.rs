//! How many runs anonymous services (payload server, TCP sink, TCP source) record per peer:
//! at most [`RUNS_PER_MINUTE`] per peer address and service per minute; the connections
//! beyond are served all the same and counted together in one "folded" run per peer, service
//! and minute (its `params.folded_connections` and bytes grow). A client looping on the
//! payload URL with a new User-Agent each time thus adds a handful of runs a minute, not
//! thousands.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Runs one peer address may add per service per [`WINDOW`].
pub(crate) const RUNS_PER_MINUTE: u32 = 5;
/// The window of [`RUNS_PER_MINUTE`].
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// What to do with a new connection's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// A run of its own.
    Own,
    /// Count it in the folded run of this peer and minute (`Some(id)` once it exists).
    Fold(Option<i64>),
}

struct Entry {
    since: Instant,
    runs: u32,
    fold: Option<i64>,
}

/// The per-peer, per-service counter (one per process, see [`global`]).
#[derive(Default)]
pub struct AnonRuns {
    m: Mutex<HashMap<(IpAddr, crate::model::RunKind), Entry>>,
}

impl AnonRuns {
    /// Decide for a new connection of `kind` from `ip`.
    pub fn decide(&self, ip: IpAddr, kind: crate::model::RunKind) -> Record {
        let mut m = self.m.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if m.len() > 10_000 {
            m.retain(|_, e| now.duration_since(e.since) < WINDOW);
        }
        let e = m.entry((ip.to_canonical(), kind)).or_insert(Entry {
            since: now,
            runs: 0,
            fold: None,
        });
        if now.duration_since(e.since) >= WINDOW {
            *e = Entry {
                since: now,
                runs: 0,
                fold: None,
            };
        }
        if e.runs < RUNS_PER_MINUTE {
            e.runs += 1;
            Record::Own
        } else {
            Record::Fold(e.fold)
        }
    }

    /// Remember the folded run created for `ip` and `kind` in the current window.
    pub fn set_fold(&self, ip: IpAddr, kind: crate::model::RunKind, id: i64) {
        let mut m = self.m.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.get_mut(&(ip.to_canonical(), kind)) {
            e.fold = Some(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_runs_a_minute_then_one_folded_run() {
        let a = AnonRuns::default();
        let ip: IpAddr = "192.0.2.5".parse().unwrap();
        for _ in 0..RUNS_PER_MINUTE {
            assert_eq!(a.decide(ip, crate::model::RunKind::TcpSink), Record::Own);
        }
        assert_eq!(
            a.decide(ip, crate::model::RunKind::TcpSink),
            Record::Fold(None)
        );
        a.set_fold(ip, crate::model::RunKind::TcpSink, 42);
        assert_eq!(
            a.decide(ip, crate::model::RunKind::TcpSink),
            Record::Fold(Some(42))
        );
        // Another service and another peer have their own budget.
        assert_eq!(a.decide(ip, crate::model::RunKind::TcpSource), Record::Own);
        assert_eq!(
            a.decide("192.0.2.6".parse().unwrap(), crate::model::RunKind::TcpSink),
            Record::Own
        );
    }
}
