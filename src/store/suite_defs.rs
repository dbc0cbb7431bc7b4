//! Saved suite definitions (a name and a JSON list of steps, see `crate::runs::suites::SuiteDef`)
//! and what a suite run remembers of its definition: the definition's id, a label for the
//! board or change under test, and the plan (one entry per test, in order).

use super::{now_ms, Result, Store};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

/// Migration 5: `suite_defs`, and the definition, label and plan of each suite run.
/// Steps live in `body_json`, so new step kinds need no migration.
pub(super) const SUITE_DEFS_MIGRATION: &str = r#"
CREATE TABLE suite_defs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    builtin INTEGER NOT NULL DEFAULT 0,
    body_json TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
ALTER TABLE suites ADD COLUMN def_id INTEGER REFERENCES suite_defs(id) ON DELETE SET NULL;
ALTER TABLE suites ADD COLUMN label TEXT;
ALTER TABLE suites ADD COLUMN plan_json TEXT;
"#;

/// A stored suite definition.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SuiteDefRow {
    pub id: i64,
    pub name: String,
    /// Seeded by netperfd on first start (still editable and deletable).
    pub builtin: bool,
    /// The definition as stored (a `SuiteDef` document).
    pub body: serde_json::Value,
    /// Unix ms.
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a suite run keeps besides [`super::SuiteRow`].
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct SuiteExtra {
    /// The definition it was started from (None for the ad-hoc ladder or a deleted one).
    pub def_id: Option<i64>,
    /// Board / change label given at start (e.g. "iMX8QM", "after governor=performance").
    pub label: Option<String>,
    /// The planned tests (JSON array), `Null` for suites started before plans were kept.
    pub plan: serde_json::Value,
}

fn def_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SuiteDefRow> {
    let body: String = r.get(3)?;
    Ok(SuiteDefRow {
        id: r.get(0)?,
        name: r.get(1)?,
        builtin: r.get(2)?,
        body: serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

const DEF_COLS: &str = "id, name, builtin, body_json, created_at, updated_at";

impl Store {
    /// Every suite definition, by name.
    pub fn suite_defs(&self) -> Result<Vec<SuiteDefRow>> {
        let c = self.r();
        let mut st = c.prepare(&format!(
            "SELECT {DEF_COLS} FROM suite_defs ORDER BY name COLLATE NOCASE"
        ))?;
        let rows = st.query_map([], def_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// One definition by id.
    pub fn suite_def(&self, id: i64) -> Result<Option<SuiteDefRow>> {
        Ok(self
            .r()
            .query_row(
                &format!("SELECT {DEF_COLS} FROM suite_defs WHERE id=?1"),
                params![id],
                def_from_row,
            )
            .optional()?)
    }

    /// One definition by its exact name.
    pub fn suite_def_by_name(&self, name: &str) -> Result<Option<SuiteDefRow>> {
        Ok(self
            .r()
            .query_row(
                &format!("SELECT {DEF_COLS} FROM suite_defs WHERE name=?1"),
                params![name],
                def_from_row,
            )
            .optional()?)
    }

    /// Store a new definition; returns its id. A taken name is a SQL constraint error
    /// (callers check with [`Store::suite_def_by_name`] first for a clear message).
    pub fn create_suite_def(
        &self,
        name: &str,
        builtin: bool,
        body: &serde_json::Value,
    ) -> Result<i64> {
        let c = self.c();
        let now = now_ms();
        c.execute(
            "INSERT INTO suite_defs (name, builtin, body_json, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
            params![name, builtin, serde_json::to_string(body)?, now],
        )?;
        Ok(c.last_insert_rowid())
    }

    /// Replace a definition's name and body; false if there is none.
    pub fn update_suite_def(&self, id: i64, name: &str, body: &serde_json::Value) -> Result<bool> {
        Ok(self.c().execute(
            "UPDATE suite_defs SET name=?2, body_json=?3, updated_at=?4 WHERE id=?1",
            params![id, name, serde_json::to_string(body)?, now_ms()],
        )? > 0)
    }

    /// Delete a definition (its past suite runs stay); false if there was none.
    pub fn delete_suite_def(&self, id: i64) -> Result<bool> {
        Ok(self
            .c()
            .execute("DELETE FROM suite_defs WHERE id=?1", params![id])?
            > 0)
    }

    /// Remember a suite run's definition, label and plan.
    pub fn set_suite_extra(&self, suite_id: i64, extra: &SuiteExtra) -> Result<()> {
        self.c().execute(
            "UPDATE suites SET def_id=?2, label=?3, plan_json=?4 WHERE id=?1",
            params![
                suite_id,
                extra.def_id,
                extra.label,
                serde_json::to_string(&extra.plan)?
            ],
        )?;
        Ok(())
    }

    /// A suite run's definition, label and plan (`None` if there is no such suite).
    pub fn suite_extra(&self, suite_id: i64) -> Result<Option<SuiteExtra>> {
        Ok(self
            .c()
            .query_row(
                "SELECT def_id, label, plan_json FROM suites WHERE id=?1",
                params![suite_id],
                |r| {
                    let plan: Option<String> = r.get(2)?;
                    Ok(SuiteExtra {
                        def_id: r.get(0)?,
                        label: r.get(1)?,
                        plan: plan
                            .and_then(|p| serde_json::from_str(&p).ok())
                            .unwrap_or(serde_json::Value::Null),
                    })
                },
            )
            .optional()?)
    }

    /// Mark suites left 'running' by a previous process as aborted; returns how many.
    pub fn abort_stale_suites(&self) -> Result<usize> {
        self.abort_suites_created_before(i64::MAX)
    }

    /// [`Store::abort_stale_suites`] for suites created before `t` (Unix ms) only (see
    /// [`Store::abort_runs_started_before`]).
    pub fn abort_suites_created_before(&self, t: i64) -> Result<usize> {
        Ok(self.c().execute(
            "UPDATE suites SET status='aborted', ended_at=?1 WHERE status='running' AND created_at < ?2",
            params![now_ms(), t],
        )?)
    }

    /// Set a running suite's final status; false if it had already ended (e.g. stopped).
    pub fn finish_suite_if_running(
        &self,
        id: i64,
        status: crate::model::RunStatus,
    ) -> Result<bool> {
        Ok(self.c().execute(
            "UPDATE suites SET status=?2, ended_at=?3 WHERE id=?1 AND status='running'",
            params![id, status.as_str(), now_ms()],
        )? > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defs_crud_and_suite_extra() {
        let d = crate::scratch::dir("defs");
        let s = Store::open_dir(&d).unwrap();
        let body = serde_json::json!({"name": "a", "steps": [{"kind": "tcp"}]});
        let id = s.create_suite_def("a", false, &body).unwrap();
        assert!(
            s.create_suite_def("a", false, &body).is_err(),
            "names are unique"
        );
        assert_eq!(s.suite_def_by_name("a").unwrap().unwrap().body, body);
        assert!(s.update_suite_def(id, "b", &body).unwrap());
        assert_eq!(s.suite_defs().unwrap()[0].name, "b");
        let sid = s.create_suite("b", "192.0.2.2").unwrap();
        let extra = SuiteExtra {
            def_id: Some(id),
            label: Some("iMX8QM".into()),
            plan: serde_json::json!([{"label": "TCP send"}]),
        };
        s.set_suite_extra(sid, &extra).unwrap();
        assert_eq!(s.suite_extra(sid).unwrap().unwrap(), extra);
        // Deleting the definition keeps the suite run and forgets the link.
        assert!(s.delete_suite_def(id).unwrap());
        assert!(!s.delete_suite_def(id).unwrap());
        assert_eq!(s.suite_extra(sid).unwrap().unwrap().def_id, None);
        assert!(s
            .finish_suite_if_running(sid, crate::model::RunStatus::Aborted)
            .unwrap());
        assert!(!s
            .finish_suite_if_running(sid, crate::model::RunStatus::Completed)
            .unwrap());
        assert_eq!(
            s.suite(sid).unwrap().unwrap().0.status,
            crate::model::RunStatus::Aborted
        );
        let _ = std::fs::remove_dir_all(d);
    }
}
