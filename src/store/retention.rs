//! History retention: caps on the number of runs and on the database's size, the oldest
//! unpinned runs pruned first; pinned runs, suite runs and running runs are always kept.
//! Defaults are sized for a 4 GB eMMC: [`DEFAULT_MAX_RUNS`] runs and [`DEFAULT_MAX_BYTES`].

use super::{Result, Store};
use rusqlite::params;

/// Migration 6: a pin flag on runs (pinned runs are never pruned).
pub(super) const RETENTION_MIGRATION: &str = r#"
ALTER TABLE runs ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_prunable ON runs(pinned, started_at);
"#;

/// Default cap on the number of runs kept (20,000: months of real tests).
pub const DEFAULT_MAX_RUNS: u64 = 20_000;
/// Default cap on the database's used size, bytes (512 MiB: an eighth of a 4 GB eMMC).
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// Settings keys that override the caps (whole numbers).
pub(super) const MAX_RUNS_KEY: &str = "retention.max_runs";
pub(super) const MAX_BYTES_KEY: &str = "retention.max_bytes";
/// Bounds a user may set (Settings, API): runs kept.
pub(super) const MAX_RUNS_RANGE: std::ops::RangeInclusive<u64> = 100..=1_000_000;
/// Bounds a user may set (Settings, API): database size, MiB (16 MiB … 64 GiB).
pub(super) const MAX_MIB_RANGE: std::ops::RangeInclusive<u64> = 16..=65_536;
/// Pruning runs after every this many new runs (and at daemon start).
pub(super) const PRUNE_EVERY: i64 = 50;
/// Runs deleted per write while pruning (each write holds the writer for a short time).
pub(super) const PRUNE_BATCH: u64 = 100;

/// Where a run came from. Retention gives each source a fair share of the runs kept
/// ([`shares`]), so one source filling up history cannot evict another's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// Made here by someone logged in (or with a token): client runs, suites run by hand,
    /// forwarding, monitor, latency runs. Weight 2.
    Own = 0,
    /// The runs of suite runs a schedule started. Weight 1.
    Scheduled = 1,
    /// Served to peers that need no login: the iperf3 / iperf 2 server's runs, the payload
    /// server, the TCP sink and source. Weight 1.
    Anonymous = 2,
    /// Imported from another board's history file: only the room the others leave.
    Imported = 3,
}

impl Source {
    /// Every source, in [`Source`] order.
    pub(super) const ALL: [Source; 4] = [
        Source::Own,
        Source::Scheduled,
        Source::Anonymous,
        Source::Imported,
    ];
}

/// The source of a run (`runs` columns), as [`Source`]'s number.
const SOURCE_SQL: &str = "(CASE WHEN origin_board IS NOT NULL THEN 3
    WHEN suite_id IS NOT NULL AND suite_id IN (SELECT id FROM suites WHERE schedule_id IS NOT NULL) THEN 1
    WHEN role = 'server' OR kind IN ('http-serve', 'tcp-sink', 'tcp-source') THEN 2 ELSE 0 END)";

/// Whether a run may be pruned: not pinned, ended, not in a hand-made suite run here (a
/// scheduled suite run counts only when it has ended and holds no pinned run).
const PRUNABLE_SQL: &str = "(pinned = 0 AND status != 'running' AND (suite_id IS NULL OR origin_board IS NOT NULL
    OR suite_id IN (SELECT s.id FROM suites s WHERE s.schedule_id IS NOT NULL AND s.status != 'running'
        AND NOT EXISTS (SELECT 1 FROM runs p WHERE p.suite_id = s.id AND p.pinned = 1))))";

/// How many prunable runs of each source (`prunable`, in [`Source`] order) to keep when
/// `room` runs may be kept in all: weighted max-min fair shares of the own (weight 2),
/// scheduled (1) and anonymous (1) runs, so a source below its share loses nothing and what
/// one leaves unused the others may fill; imported runs get only the room left over.
pub(super) fn shares(room: u64, prunable: [u64; 4]) -> [u64; 4] {
    const W: [u64; 3] = [2, 1, 1];
    let local: u64 = prunable[..3].iter().sum();
    let mut keep = [0u64; 4];
    if local <= room {
        keep[..3].copy_from_slice(&prunable[..3]);
    } else {
        // The largest level L with sum(min(n_i, w_i L)) <= room (binary search on L).
        let (mut lo, mut hi) = (0u64, room);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let s: u64 = (0..3).map(|i| prunable[i].min(W[i] * mid)).sum();
            if s <= room {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        for i in 0..3 {
            keep[i] = prunable[i].min(W[i] * lo);
        }
        // Round-off: the rest to those still short, own runs first.
        let mut left = room - keep[..3].iter().sum::<u64>();
        for i in 0..3 {
            let add = (prunable[i] - keep[i]).min(left);
            keep[i] += add;
            left -= add;
        }
    }
    let used: u64 = keep[..3].iter().sum();
    keep[3] = prunable[3].min(room.saturating_sub(used));
    keep
}

/// The caps in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Retention {
    /// Most runs kept.
    pub max_runs: u64,
    /// Most bytes of database pages in use.
    pub max_bytes: u64,
}

impl Retention {
    /// Caps a user asked for: `max_runs` runs and `max_mib` MiB, both within
    /// [`MAX_RUNS_RANGE`] / [`MAX_MIB_RANGE`].
    ///
    /// # Errors
    /// A sentence naming the value out of range (nothing is changed by the caller then).
    pub fn checked(max_runs: u64, max_mib: u64) -> std::result::Result<Retention, String> {
        if !MAX_RUNS_RANGE.contains(&max_runs) {
            return Err(format!(
                "runs kept must be {} to {}, got {max_runs}",
                MAX_RUNS_RANGE.start(),
                MAX_RUNS_RANGE.end()
            ));
        }
        if !MAX_MIB_RANGE.contains(&max_mib) {
            return Err(format!(
                "history size must be {} to {} MiB, got {max_mib}",
                MAX_MIB_RANGE.start(),
                MAX_MIB_RANGE.end()
            ));
        }
        Ok(Retention {
            max_runs,
            max_bytes: max_mib << 20,
        })
    }
}

impl Store {
    /// Store new caps (both settings in one transaction) and prune to them at once.
    /// Returns how many runs were deleted.
    pub fn set_retention(&self, r: Retention) -> Result<u64> {
        {
            let mut c = self.c();
            let tx = c.transaction()?;
            for (k, v) in [(MAX_RUNS_KEY, r.max_runs), (MAX_BYTES_KEY, r.max_bytes)] {
                tx.execute(
                    "INSERT INTO settings(key, value) VALUES (?1, ?2)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    params![k, v.to_string()],
                )?;
            }
            tx.commit()?;
        }
        self.prune(r)
    }

    /// Whether run `id` is pinned; `None` when there is no such run.
    pub fn is_pinned(&self, id: i64) -> Result<Option<bool>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .r()
            .query_row("SELECT pinned FROM runs WHERE id=?1", params![id], |r| {
                r.get::<_, i64>(0)
            })
            .optional()?
            .map(|p| p != 0))
    }

    /// The retention caps: settings, else the defaults.
    pub fn retention(&self) -> Retention {
        let get = |k: &str, d: u64| {
            self.setting(k)
                .ok()
                .flatten()
                .and_then(|v| v.trim().parse().ok())
                .filter(|&v: &u64| v > 0)
                .unwrap_or(d)
        };
        Retention {
            max_runs: get(MAX_RUNS_KEY, DEFAULT_MAX_RUNS),
            max_bytes: get(MAX_BYTES_KEY, DEFAULT_MAX_BYTES),
        }
    }

    /// Pin or unpin a run; false when there is no such run.
    pub fn set_pinned(&self, id: i64, pinned: bool) -> Result<bool> {
        Ok(self.c().execute(
            "UPDATE runs SET pinned=?2 WHERE id=?1",
            params![id, pinned as i64],
        )? > 0)
    }

    /// Count one more connection (of `bytes`) in a folded run of an anonymous service
    /// (see `crate::runs::anon`): `params.folded_connections` + 1, `bytes` + `bytes`.
    pub fn fold_into(&self, id: i64, bytes: u64) -> Result<()> {
        self.c().execute(
            "UPDATE runs SET bytes = COALESCE(bytes, 0) + ?2, ended_at = ?3, status = 'completed',
               params_json = json_set(params_json, '$.folded_connections',
                 COALESCE(json_extract(params_json, '$.folded_connections'), 0) + 1)
             WHERE id = ?1",
            params![id, bytes as i64, super::now_ms()],
        )?;
        Ok(())
    }

    /// Bytes of database pages in use (page count less free pages, × page size).
    pub fn used_bytes(&self) -> Result<u64> {
        let c = self.c();
        let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        Ok(((pages - free).max(0) * size) as u64)
    }

    /// Runs of each source (see [`Source`]): (prunable, kept whatever happens). Kept are
    /// pinned and running runs, and the runs of suite runs made here by hand.
    pub fn source_counts(&self) -> Result<[(u64, u64); 4]> {
        let c = self.r();
        let mut st = c.prepare(&format!(
            "SELECT {SOURCE_SQL} AS src, SUM(CASE WHEN {PRUNABLE_SQL} THEN 1 ELSE 0 END), COUNT(*)
             FROM runs GROUP BY src"
        ))?;
        let mut out = [(0u64, 0u64); 4];
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        for row in rows {
            let (src, p, n) = row?;
            if let Some(o) = out.get_mut(src as usize) {
                *o = (p.max(0) as u64, (n - p).max(0) as u64);
            }
        }
        Ok(out)
    }

    /// Delete runs until at most `r.max_runs` remain and the used size is at most
    /// `r.max_bytes` (or nothing prunable is left), each source of runs keeping its fair
    /// share (see [`shares`]): imported runs go first, then the sources over their share,
    /// oldest first; pinned runs, running runs and hand-made suite runs are never deleted.
    /// Works in batches of [`PRUNE_BATCH`] runs (one short write each), so runs being
    /// recorded and the API are never held up for long. Returns how many runs were deleted.
    pub fn prune(&self, r: Retention) -> Result<u64> {
        let mut deleted = 0u64;
        let mut cap = r.max_runs;
        for _ in 0..10_000 {
            let counts = self.source_counts()?;
            let kept: u64 = counts.iter().map(|c| c.1).sum();
            let prunable: [u64; 4] = counts.map(|c| c.0);
            let keep = shares(cap.saturating_sub(kept), prunable);
            let mut n = 0;
            for (i, src) in Source::ALL.iter().enumerate() {
                n += self.delete_oldest(*src, prunable[i].saturating_sub(keep[i]))?;
            }
            deleted += n;
            if self.used_bytes()? <= r.max_bytes {
                break;
            }
            // Over the size cap: aim at fewer runs, a batch at a time.
            let left = prunable.iter().sum::<u64>().saturating_sub(n);
            if left == 0 {
                break;
            }
            cap = cap.min(kept + left).saturating_sub(PRUNE_BATCH);
        }
        if deleted > 0 {
            // Suite runs left without runs (imported or scheduled) go too.
            self.c().execute(
                "DELETE FROM suites WHERE status != 'running' AND (origin_board IS NOT NULL OR schedule_id IS NOT NULL)
                   AND NOT EXISTS (SELECT 1 FROM runs WHERE suite_id = suites.id)",
                [],
            )?;
            tracing::info!(
                deleted,
                "history retention: pruned the oldest runs of the sources over their share"
            );
        }
        Ok(deleted)
    }

    /// Delete the `n` oldest prunable runs of `src`, [`PRUNE_BATCH`] per write. Runs of a
    /// scheduled suite run go with their whole suite run (oldest first), so `n` may be
    /// exceeded by the rest of the last suite run. Returns the runs deleted.
    fn delete_oldest(&self, src: Source, n: u64) -> Result<u64> {
        let mut done = 0u64;
        while done < n {
            let batch = (n - done).min(PRUNE_BATCH) as i64;
            let k = if src == Source::Scheduled {
                let c = self.c();
                let tx = c.unchecked_transaction()?;
                let sids: Vec<i64> = {
                    let mut st = tx.prepare(&format!(
                        "SELECT DISTINCT suite_id FROM (SELECT suite_id FROM runs WHERE {SOURCE_SQL} = 1 AND {PRUNABLE_SQL}
                         ORDER BY started_at ASC, id ASC LIMIT ?1)"
                    ))?;
                    let rows = st.query_map(params![batch], |r| r.get(0))?;
                    rows.collect::<rusqlite::Result<Vec<_>>>()?
                };
                let mut k = 0;
                for sid in sids {
                    k += tx.execute("DELETE FROM runs WHERE suite_id=?1", params![sid])?;
                    tx.execute("DELETE FROM suites WHERE id=?1", params![sid])?;
                }
                tx.commit()?;
                k as u64
            } else {
                self.c().execute(
                    &format!(
                        "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE {SOURCE_SQL} = ?1 AND {PRUNABLE_SQL}
                           ORDER BY started_at ASC, id ASC LIMIT ?2)"
                    ),
                    params![src as i64, batch],
                )? as u64
            };
            if k == 0 {
                break;
            }
            done += k;
        }
        Ok(done)
    }

    /// Prune with the caps in force when `id` (a new run's) is a multiple of [`PRUNE_EVERY`].
    pub(super) fn maybe_prune(&self, id: i64) {
        if id % PRUNE_EVERY == 0 {
            if let Err(e) = self.prune(self.retention()) {
                tracing::warn!("history retention: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDirection, RunProtocol, RunRole};
    use crate::store::NewRun;

    /// Insert `n` ended runs: `role`, `kind`, peer `peer(i)`, suite `suite`, origin board
    /// `origin`, started at `t0 + i` ms. Returns their ids.
    #[allow(clippy::too_many_arguments)]
    fn runs(
        s: &Store,
        n: i64,
        role: &str,
        kind: &str,
        peer: impl Fn(i64) -> String,
        suite: Option<i64>,
        origin: Option<&str>,
        t0: i64,
    ) -> Vec<i64> {
        let c = s.c();
        let tx = c.unchecked_transaction().unwrap();
        let mut ids = Vec::new();
        for i in 0..n {
            tx.execute(
                "INSERT INTO runs (role, protocol, status, peer_host, peer_port, direction, params_json, started_at, ended_at, kind, suite_id, origin_board, origin_id)
                 VALUES (?1, 'TCP', 'completed', ?2, 5201, 'send', '{}', ?3, ?3, ?4, ?5, ?6, ?7)",
                params![role, peer(i), t0 + i, kind, suite, origin, origin.map(|_| i)],
            )
            .unwrap();
            ids.push(tx.last_insert_rowid());
        }
        tx.commit().unwrap();
        ids
    }

    fn count(s: &Store, sql_where: &str) -> i64 {
        s.c()
            .query_row(
                &format!("SELECT COUNT(*) FROM runs WHERE {sql_where}"),
                [],
                |r| r.get(0),
            )
            .unwrap()
    }

    const CAP: Retention = Retention {
        max_runs: 100,
        max_bytes: u64::MAX,
    };

    #[test]
    fn fair_shares() {
        // Room 100, own 60 and 1000 scheduled: own keep all 60.
        assert_eq!(shares(100, [60, 1000, 0, 0]), [60, 40, 0, 0]);
        // All three local sources full: 2:1:1.
        assert_eq!(shares(100, [500, 500, 500, 0]), [50, 25, 25, 0]);
        // Imported only get what is left.
        assert_eq!(shares(100, [30, 0, 20, 1000]), [30, 0, 20, 50]);
        assert_eq!(shares(100, [90, 0, 0, 1000]), [90, 0, 0, 10]);
        // Round-off goes to own runs first; never more than there is.
        assert_eq!(shares(7, [100, 100, 100, 0]).iter().sum::<u64>(), 7);
        assert_eq!(shares(0, [5, 5, 5, 5]), [0, 0, 0, 0]);
    }

    #[test]
    fn schedules_at_the_cap_do_not_delete_ordinary_runs() {
        // Issue 21 item 5, scaled: 1000 scheduled runs (100 suite runs of 10) at cap 100.
        let d = crate::scratch::dir("retention-sched");
        let _ = std::fs::remove_dir_all(&d);
        let s = Store::open_dir(&d).unwrap();
        let own = runs(
            &s,
            60,
            "client",
            "iperf3",
            |_| "192.0.2.2".into(),
            None,
            None,
            2_000_000,
        );
        let def = s
            .create_suite_def(
                "soak",
                false,
                &serde_json::json!({"name": "soak", "steps": []}),
            )
            .unwrap();
        let sched = s
            .create_schedule(&crate::store::NewSchedule {
                def_id: def,
                target: serde_json::json!({"host": "192.0.2.3"}),
                every_s: Some(60),
                enabled: true,
                next_at: Some(1),
                ..Default::default()
            })
            .unwrap();
        for k in 0..100 {
            let sid = s.create_suite("soak", "192.0.2.3").unwrap();
            runs(
                &s,
                10,
                "client",
                "iperf3",
                |_| "192.0.2.3".into(),
                Some(sid),
                None,
                1_000_000 + k * 10,
            );
            s.finish_suite(sid, crate::model::RunStatus::Completed)
                .unwrap();
            s.schedule_fired(sched, k, Some(sid), "started", Some(k + 1))
                .unwrap();
        }
        let deleted = s.prune_scheduled(CAP).unwrap();
        assert_eq!(deleted, 960);
        assert_eq!(count(&s, "suite_id IS NULL"), 60);
        assert_eq!(count(&s, "suite_id IS NOT NULL"), 40);
        for id in own {
            assert!(s.get_run(id).unwrap().is_some());
        }
        // The newest 4 suite runs are kept whole; the emptied suite rows are gone.
        assert_eq!(s.suites(1000).unwrap().len(), 4);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn anonymous_peers_do_not_evict_admin_runs_and_pins_stay() {
        // Issue 21 item 5, scaled: 300 payload-server runs from 50 addresses at cap 100.
        let d = crate::scratch::dir("retention-anon");
        let _ = std::fs::remove_dir_all(&d);
        let s = Store::open_dir(&d).unwrap();
        let admin = runs(
            &s,
            60,
            "client",
            "iperf3",
            |_| "192.0.2.2".into(),
            None,
            None,
            1_000_000,
        );
        let anon = runs(
            &s,
            300,
            "server",
            "http-serve",
            |i| format!("198.51.100.{}", i % 50),
            None,
            None,
            2_000_000,
        );
        s.set_pinned(anon[0], true).unwrap();
        assert_eq!(s.prune(CAP).unwrap(), 260);
        for id in &admin {
            assert!(s.get_run(*id).unwrap().is_some(), "admin run {id} evicted");
        }
        // The pinned one (the oldest) and the 39 newest anonymous runs.
        assert!(s.get_run(anon[0]).unwrap().is_some());
        assert_eq!(count(&s, "role = 'server'"), 40);
        assert!(s.get_run(anon[299]).unwrap().is_some());
        assert!(s.get_run(anon[1]).unwrap().is_none());
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn imported_runs_never_evict_the_boards_own_runs() {
        // Issue 21 item 3, scaled: 285 own runs, then 2,010 imported runs (dated after all of
        // them) at cap 300.
        let d = crate::scratch::dir("retention-import");
        let _ = std::fs::remove_dir_all(&d);
        let s = Store::open_dir(&d).unwrap();
        let own = runs(
            &s,
            285,
            "client",
            "iperf3",
            |_| "192.0.2.2".into(),
            None,
            None,
            1_000_000,
        );
        let t0 = crate::model::time::now_ms() - 10_000_000;
        let f = crate::store::import::tests::file("ffff", 2010, t0);
        s.set_retention(Retention {
            max_runs: 300,
            max_bytes: u64::MAX,
        })
        .unwrap();
        let sum = s.import_history(f.to_string().as_bytes()).unwrap();
        assert_eq!(sum.runs_added, 2010);
        for id in own {
            assert!(s.get_run(id).unwrap().is_some(), "own run {id} evicted");
        }
        assert_eq!(count(&s, "origin_board IS NOT NULL"), 15);
        assert_eq!(count(&s, "1=1"), 300);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn oldest_unpinned_runs_go_first_pinned_and_suite_runs_stay() {
        let dir = std::env::temp_dir().join(format!("netperfd-retention-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = Store::open_dir(&dir).unwrap();
        let mut ids = Vec::new();
        for i in 0..10 {
            let id = s
                .create_run(&NewRun {
                    role: RunRole::Server,
                    protocol: RunProtocol::Tcp,
                    peer_host: format!("192.0.2.{i}"),
                    direction: RunDirection::Send,
                    params: serde_json::json!({}),
                    ..Default::default()
                })
                .unwrap();
            s.abort_stale_runs().unwrap();
            ids.push(id);
        }
        assert!(s.set_pinned(ids[0], true).unwrap());
        let n = s
            .prune(Retention {
                max_runs: 4,
                max_bytes: u64::MAX,
            })
            .unwrap();
        assert_eq!(n, 6);
        let left: Vec<i64> = s
            .c()
            .prepare("SELECT id FROM runs ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        // The pinned oldest stays; of the rest the newest three.
        assert_eq!(left, vec![ids[0], ids[7], ids[8], ids[9]]);
        assert_eq!(s.retention().max_runs, DEFAULT_MAX_RUNS);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
