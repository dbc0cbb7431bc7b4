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
pub const MAX_RUNS_KEY: &str = "retention.max_runs";
pub const MAX_BYTES_KEY: &str = "retention.max_bytes";
/// Bounds a user may set (Settings, API): runs kept.
pub const MAX_RUNS_RANGE: std::ops::RangeInclusive<u64> = 100..=1_000_000;
/// Bounds a user may set (Settings, API): database size, MiB (16 MiB … 64 GiB).
pub const MAX_MIB_RANGE: std::ops::RangeInclusive<u64> = 16..=65_536;
/// Pruning runs after every this many new runs (and at daemon start).
pub const PRUNE_EVERY: i64 = 50;

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

    /// Delete the oldest prunable runs (not pinned, not in a suite, not running) until at
    /// most `r.max_runs` runs remain and the used size is at most `r.max_bytes` (or nothing
    /// prunable is left). Returns how many runs were deleted.
    pub fn prune(&self, r: Retention) -> Result<u64> {
        let mut deleted = 0u64;
        let total: i64 = self
            .c()
            .query_row("SELECT COUNT(*) FROM runs", [], |row| row.get(0))?;
        let over = (total as u64).saturating_sub(r.max_runs);
        if over > 0 {
            deleted += self.delete_oldest(over)?;
        }
        // Size: delete in batches of 200 until under the cap.
        for _ in 0..1000 {
            if self.used_bytes()? <= r.max_bytes {
                break;
            }
            let n = self.delete_oldest(200)?;
            if n == 0 {
                break;
            }
            deleted += n;
        }
        if deleted > 0 {
            tracing::info!(
                deleted,
                "history retention: pruned the oldest unpinned runs"
            );
        }
        Ok(deleted)
    }

    fn delete_oldest(&self, n: u64) -> Result<u64> {
        let c = self.c();
        Ok(c.execute(
            "DELETE FROM runs WHERE id IN (SELECT id FROM runs
               WHERE pinned=0 AND suite_id IS NULL AND status != 'running'
               ORDER BY started_at ASC, id ASC LIMIT ?1)",
            params![n as i64],
        )? as u64)
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
    use crate::store::NewRun;

    #[test]
    fn oldest_unpinned_runs_go_first_pinned_and_suite_runs_stay() {
        let dir = std::env::temp_dir().join(format!("netperfd-retention-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = Store::open_dir(&dir).unwrap();
        let mut ids = Vec::new();
        for i in 0..10 {
            let id = s
                .create_run(&NewRun {
                    role: "server".into(),
                    protocol: "TCP".into(),
                    peer_host: format!("192.0.2.{i}"),
                    direction: "send".into(),
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
