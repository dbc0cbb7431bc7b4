//! Fleet bookkeeping in the store: the board's own id (random, made once), where imported
//! runs and suites came from, scheduled suite runs, and the counts `/metrics` reports.
//! Not for: deciding when a schedule fires (`crate::runs::schedule`) or the export file's
//! format (`super::transfer`).

use super::{now_ms, Result, Store};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

/// Migration: schedules, the schedule a suite run came from, and the origin (source board id,
/// its run / suite id there, its label) of imported runs and suites. A local row has no
/// origin; its identity is (this board's id, its id).
pub(super) const FLEET_MIGRATION: &str = r#"
CREATE TABLE schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    def_id INTEGER NOT NULL REFERENCES suite_defs(id) ON DELETE CASCADE,
    target_json TEXT NOT NULL,
    every_s INTEGER,
    daily_at TEXT,
    stop_at INTEGER,
    enabled INTEGER NOT NULL DEFAULT 1,
    next_at INTEGER,
    last_at INTEGER,
    last_suite_id INTEGER,
    last_note TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
ALTER TABLE suites ADD COLUMN schedule_id INTEGER REFERENCES schedules(id) ON DELETE SET NULL;
ALTER TABLE suites ADD COLUMN origin_board TEXT;
ALTER TABLE suites ADD COLUMN origin_id INTEGER;
ALTER TABLE suites ADD COLUMN origin_label TEXT;
CREATE UNIQUE INDEX suites_origin ON suites(origin_board, origin_id) WHERE origin_board IS NOT NULL;
ALTER TABLE runs ADD COLUMN origin_board TEXT;
ALTER TABLE runs ADD COLUMN origin_id INTEGER;
ALTER TABLE runs ADD COLUMN origin_label TEXT;
CREATE UNIQUE INDEX runs_origin ON runs(origin_board, origin_id) WHERE origin_board IS NOT NULL;
"#;

/// Settings key of the board id.
pub(super) const BOARD_ID_KEY: &str = "board.id";

/// Where an imported run or suite came from.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Origin {
    /// The source board's id (32 hex digits).
    pub board: String,
    /// The run's (or suite's) id on that board.
    pub id: i64,
    /// The source board's label (host name) at export time.
    pub label: String,
}

/// A stored schedule (see `crate::spec::schedule` for what the fields mean).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ScheduleRow {
    pub id: i64,
    /// The suite definition it runs.
    pub def_id: i64,
    /// Where to run it (a `RunTargetForm` as JSON: host, port, bind, time, label).
    pub target: serde_json::Value,
    /// Period, seconds (None for daily schedules).
    pub every_s: Option<i64>,
    /// Daily local time "HH:MM" (None for periodic schedules).
    pub daily_at: Option<String>,
    /// No firing at or after this time, Unix ms.
    pub stop_at: Option<i64>,
    pub enabled: bool,
    /// Next firing, Unix ms (None once stopped).
    pub next_at: Option<i64>,
    /// Last firing (run or skipped), Unix ms.
    pub last_at: Option<i64>,
    /// The suite run of the last firing that started one.
    pub last_suite_id: Option<i64>,
    /// What happened at the last firing (started suite N / skipped: why / error).
    pub last_note: Option<String>,
    /// Unix ms.
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a new or edited schedule holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewSchedule {
    pub def_id: i64,
    pub target: serde_json::Value,
    pub every_s: Option<i64>,
    pub daily_at: Option<String>,
    pub stop_at: Option<i64>,
    pub enabled: bool,
    pub next_at: Option<i64>,
}

const SCHED_COLS: &str = "id, def_id, target_json, every_s, daily_at, stop_at, enabled, next_at, last_at, last_suite_id, last_note, created_at, updated_at";

fn sched_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScheduleRow> {
    let t: String = r.get(2)?;
    Ok(ScheduleRow {
        id: r.get(0)?,
        def_id: r.get(1)?,
        target: serde_json::from_str(&t).unwrap_or(serde_json::Value::Null),
        every_s: r.get(3)?,
        daily_at: r.get(4)?,
        stop_at: r.get(5)?,
        enabled: r.get(6)?,
        next_at: r.get(7)?,
        last_at: r.get(8)?,
        last_suite_id: r.get(9)?,
        last_note: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
    })
}

/// Runs in history of one kind and status (`/metrics`).
#[derive(Debug, Clone, PartialEq)]
pub struct RunCount {
    /// The kind's stored word.
    pub kind: String,
    pub status: String,
    pub count: i64,
}

impl Store {
    /// This board's id: 32 random hex digits, made and stored on first use, never changed.
    pub fn board_id(&self) -> Result<String> {
        if let Some(id) = self.setting(BOARD_ID_KEY)? {
            return Ok(id);
        }
        let mut b = [0u8; 16];
        getrandom::getrandom(&mut b).map_err(|e| super::StoreError::Random(e.to_string()))?;
        let id: String = b.iter().map(|x| format!("{x:02x}")).collect();
        // INSERT OR IGNORE: two first callers at once keep the same (first) id.
        self.c().execute(
            "INSERT OR IGNORE INTO settings (key, value) VALUES (?1, ?2)",
            params![BOARD_ID_KEY, id],
        )?;
        Ok(self.setting(BOARD_ID_KEY)?.unwrap_or(id))
    }

    /// Where run `id` came from; `None` for a run made here (or no such run).
    pub fn run_origin(&self, id: i64) -> Result<Option<Origin>> {
        Ok(self
            .r()
            .query_row(
                "SELECT origin_board, origin_id, COALESCE(origin_label, '') FROM runs WHERE id=?1 AND origin_board IS NOT NULL",
                params![id],
                |r| {
                    Ok(Origin {
                        board: r.get(0)?,
                        id: r.get(1)?,
                        label: r.get(2)?,
                    })
                },
            )
            .optional()?)
    }

    /// The origins of the imported runs among `ids` (run id → origin).
    pub fn run_origins(&self, ids: &[i64]) -> Result<std::collections::HashMap<i64, Origin>> {
        let mut out = std::collections::HashMap::new();
        if ids.is_empty() {
            return Ok(out);
        }
        let c = self.r();
        let list: Vec<String> = ids.iter().map(i64::to_string).collect();
        let mut st = c.prepare(&format!(
            "SELECT id, origin_board, origin_id, COALESCE(origin_label, '') FROM runs WHERE origin_board IS NOT NULL AND id IN ({})",
            list.join(",")
        ))?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                Origin {
                    board: r.get(1)?,
                    id: r.get(2)?,
                    label: r.get(3)?,
                },
            ))
        })?;
        for r in rows {
            let (id, o) = r?;
            out.insert(id, o);
        }
        Ok(out)
    }

    /// Where suite `id` came from; `None` for a suite run here.
    pub fn suite_origin(&self, id: i64) -> Result<Option<Origin>> {
        Ok(self
            .r()
            .query_row(
                "SELECT origin_board, origin_id, COALESCE(origin_label, '') FROM suites WHERE id=?1 AND origin_board IS NOT NULL",
                params![id],
                |r| {
                    Ok(Origin {
                        board: r.get(0)?,
                        id: r.get(1)?,
                        label: r.get(2)?,
                    })
                },
            )
            .optional()?)
    }

    /// Runs made here (imported ones left out) by kind and status.
    pub fn run_counts(&self) -> Result<Vec<RunCount>> {
        let c = self.r();
        let mut st = c.prepare(
            "SELECT kind, status, COUNT(*) FROM runs WHERE origin_board IS NULL GROUP BY kind, status ORDER BY kind, status",
        )?;
        let rows = st.query_map([], |r| {
            Ok(RunCount {
                kind: r.get(0)?,
                status: r.get(1)?,
                count: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The newest ended suite run of each (suite name, board label) pair: their ids, newest
    /// first.
    pub fn latest_suites(&self) -> Result<Vec<i64>> {
        let c = self.r();
        let mut st = c.prepare(
            "SELECT s.id FROM suites s WHERE s.status != 'running' AND s.id = (
                 SELECT s2.id FROM suites s2 WHERE s2.name = s.name
                   AND COALESCE(s2.label, '') = COALESCE(s.label, '') AND s2.status != 'running'
                 ORDER BY s2.created_at DESC, s2.id DESC LIMIT 1)
             ORDER BY s.created_at DESC",
        )?;
        let rows = st.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    // ------------------------------------------------------------------ schedules

    /// Every schedule, by id.
    pub fn schedules(&self) -> Result<Vec<ScheduleRow>> {
        let c = self.r();
        let mut st = c.prepare(&format!("SELECT {SCHED_COLS} FROM schedules ORDER BY id"))?;
        let rows = st.query_map([], sched_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// One schedule.
    pub fn schedule(&self, id: i64) -> Result<Option<ScheduleRow>> {
        Ok(self
            .r()
            .query_row(
                &format!("SELECT {SCHED_COLS} FROM schedules WHERE id=?1"),
                params![id],
                sched_from_row,
            )
            .optional()?)
    }

    /// Store a new schedule; returns its id.
    pub fn create_schedule(&self, s: &NewSchedule) -> Result<i64> {
        let c = self.c();
        let now = now_ms();
        c.execute(
            "INSERT INTO schedules (def_id, target_json, every_s, daily_at, stop_at, enabled, next_at, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
            params![s.def_id, serde_json::to_string(&s.target)?, s.every_s, s.daily_at, s.stop_at, s.enabled, s.next_at, now],
        )?;
        Ok(c.last_insert_rowid())
    }

    /// Replace a schedule's settings (its history of firings stays); false if there is none.
    pub fn update_schedule(&self, id: i64, s: &NewSchedule) -> Result<bool> {
        Ok(self.c().execute(
            "UPDATE schedules SET def_id=?2, target_json=?3, every_s=?4, daily_at=?5, stop_at=?6, enabled=?7, next_at=?8, updated_at=?9 WHERE id=?1",
            params![id, s.def_id, serde_json::to_string(&s.target)?, s.every_s, s.daily_at, s.stop_at, s.enabled, s.next_at, now_ms()],
        )? > 0)
    }

    /// Delete a schedule (its suite runs stay); false if there was none.
    pub fn delete_schedule(&self, id: i64) -> Result<bool> {
        Ok(self
            .c()
            .execute("DELETE FROM schedules WHERE id=?1", params![id])?
            > 0)
    }

    /// Record a firing: when, what happened, the suite it started (if any) and the next time
    /// (None: no more firings; the schedule is then disabled).
    pub fn schedule_fired(
        &self,
        id: i64,
        at: i64,
        suite_id: Option<i64>,
        note: &str,
        next_at: Option<i64>,
    ) -> Result<()> {
        self.c().execute(
            "UPDATE schedules SET last_at=?2, last_suite_id=COALESCE(?3, last_suite_id), last_note=?4, next_at=?5,
                 enabled = CASE WHEN ?5 IS NULL THEN 0 ELSE enabled END WHERE id=?1",
            params![id, at, suite_id, note, next_at],
        )?;
        if let Some(sid) = suite_id {
            self.c().execute(
                "UPDATE suites SET schedule_id=?2 WHERE id=?1",
                params![sid, id],
            )?;
        }
        Ok(())
    }

    /// Whether suite `sid` is still running.
    pub fn suite_running(&self, sid: i64) -> Result<bool> {
        Ok(self
            .r()
            .query_row(
                "SELECT 1 FROM suites WHERE id=?1 AND status='running'",
                params![sid],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Retention before a schedule fires: [`Store::prune`] (scheduled suite runs keep their
    /// fair share, pruned a whole suite run at a time). Returns the runs deleted.
    pub fn prune_scheduled(&self, r: super::Retention) -> Result<u64> {
        self.prune(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDirection, RunProtocol, RunRole};
    use crate::store::{NewRun, Retention};

    #[test]
    fn board_id_is_made_once() {
        let d = crate::scratch::dir("fleet-id");
        let s = Store::open_dir(&d).unwrap();
        let a = s.board_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(s.board_id().unwrap(), a);
        drop(s);
        assert_eq!(Store::open_dir(&d).unwrap().board_id().unwrap(), a);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn schedules_crud_and_scheduled_suites_pruned_oldest_first() {
        let d = crate::scratch::dir("fleet-sched");
        let s = Store::open_dir(&d).unwrap();
        let def = s
            .create_suite_def("a", false, &serde_json::json!({"name": "a", "steps": []}))
            .unwrap();
        let n = NewSchedule {
            def_id: def,
            target: serde_json::json!({"host": "192.0.2.2"}),
            every_s: Some(60),
            enabled: true,
            next_at: Some(1000),
            ..Default::default()
        };
        let id = s.create_schedule(&n).unwrap();
        assert_eq!(s.schedule(id).unwrap().unwrap().every_s, Some(60));
        let mut suites = Vec::new();
        for i in 0..3 {
            let sid = s.create_suite("a", "192.0.2.2").unwrap();
            for _ in 0..2 {
                s.create_run(&NewRun {
                    role: RunRole::Client,
                    protocol: RunProtocol::Tcp,
                    peer_host: "192.0.2.2".into(),
                    direction: RunDirection::Send,
                    params: serde_json::json!({}),
                    suite_id: Some(sid),
                    ..Default::default()
                })
                .unwrap();
            }
            s.finish_suite(sid, crate::model::RunStatus::Completed)
                .unwrap();
            s.schedule_fired(id, 1000 + i, Some(sid), "started", Some(2000 + i))
                .unwrap();
            suites.push(sid);
        }
        assert!(!s.suite_running(suites[0]).unwrap());
        let row = s.schedule(id).unwrap().unwrap();
        assert_eq!(row.last_suite_id, Some(suites[2]));
        assert_eq!(row.next_at, Some(2002));
        s.abort_stale_runs().unwrap();
        // 6 runs, cap 3: the two oldest suites (2 runs each) go.
        let n = s
            .prune_scheduled(Retention {
                max_runs: 3,
                max_bytes: u64::MAX,
            })
            .unwrap();
        assert_eq!(n, 4);
        assert!(s.suite(suites[0]).unwrap().is_none());
        assert!(s.suite(suites[1]).unwrap().is_none());
        assert_eq!(s.suite(suites[2]).unwrap().unwrap().1.len(), 2);
        // No next firing: the schedule is disabled.
        s.schedule_fired(id, 3000, None, "past the stop date", None)
            .unwrap();
        assert!(!s.schedule(id).unwrap().unwrap().enabled);
        assert!(s.delete_schedule(id).unwrap());
        assert!(s.schedules().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(d);
    }
}
