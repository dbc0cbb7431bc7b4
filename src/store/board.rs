//! Board control in the store: the confirmed network configuration (re-applied when the daemon
//! starts), a log of every change with its outcome (confirmed, rolled back, applied unchecked),
//! and the network configuration each run ran under. Not for: the roll-back snapshot of a
//! change awaiting confirmation, which is a file in the data directory so that it survives a
//! crash of the daemon even between two SQLite checkpoints.

use super::{now_ms, Result, Store};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

/// Schema of board control, appended to the migrations.
pub(super) const BOARD_MIGRATION: &str = r#"
ALTER TABLE runs ADD COLUMN net_config_json TEXT;
CREATE TABLE board_config (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    config_json TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE board_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    source TEXT NOT NULL,
    changes TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT,
    decided_at INTEGER
);
"#;

/// The board's counters over each run and the run's loss ledger, appended to the
/// migrations (both JSON; see `board::counters::BoardDelta` and `results::ledger`).
pub(super) const RUN_BOARD_MIGRATION: &str = r#"
ALTER TABLE runs ADD COLUMN board_json TEXT;
ALTER TABLE runs ADD COLUMN loss_ledger_json TEXT;
"#;

/// One entry of the change log.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BoardLogRow {
    /// Log id.
    pub id: i64,
    /// When the change was applied, Unix ms.
    pub at: i64,
    /// Where it came from: `web`, `api`, `cli`, `start`.
    pub source: String,
    /// What was changed, one description per change, joined with "; ".
    pub changes: String,
    /// `pending`, `confirmed`, `rolled back`, `unchecked`, `restored at start`.
    pub outcome: String,
    /// Why (e.g. "not confirmed within 60 s").
    pub detail: Option<String>,
    /// When the outcome was decided, Unix ms.
    pub decided_at: Option<i64>,
}

impl Store {
    /// Record the network configuration (JSON) a run runs under.
    pub fn set_run_net_config(&self, run_id: i64, json: &str) -> Result<()> {
        self.c().execute(
            "UPDATE runs SET net_config_json=?2 WHERE id=?1",
            params![run_id, json],
        )?;
        Ok(())
    }

    /// The network configuration a run ran under (None for runs from before it was recorded,
    /// or no such run).
    pub fn run_net_config(&self, run_id: i64) -> Result<Option<serde_json::Value>> {
        let j: Option<Option<String>> = self
            .r()
            .query_row(
                "SELECT net_config_json FROM runs WHERE id=?1",
                params![run_id],
                |r| r.get(0),
            )
            .optional()?;
        match j.flatten() {
            Some(s) => Ok(Some(serde_json::from_str(&s)?)),
            None => Ok(None),
        }
    }

    /// Store the board's counters over run `run_id` and its loss ledger (`None`: the run has
    /// none, e.g. a TCP run).
    pub fn set_run_board(
        &self,
        run_id: i64,
        board: &serde_json::Value,
        ledger: Option<&serde_json::Value>,
    ) -> Result<()> {
        self.c().execute(
            "UPDATE runs SET board_json=?2, loss_ledger_json=?3 WHERE id=?1",
            params![
                run_id,
                board.to_string(),
                ledger.map(serde_json::Value::to_string)
            ],
        )?;
        Ok(())
    }

    /// The board's counters over a run and its loss ledger, as stored (`None` each for runs
    /// from before they were recorded, runs without one, or no such run).
    pub fn run_board(
        &self,
        run_id: i64,
    ) -> Result<(Option<serde_json::Value>, Option<serde_json::Value>)> {
        let j: Option<(Option<String>, Option<String>)> = self
            .r()
            .query_row(
                "SELECT board_json, loss_ledger_json FROM runs WHERE id=?1",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
        Ok(match j {
            Some((b, l)) => (parse(b), parse(l)),
            None => (None, None),
        })
    }

    /// The confirmed board configuration (JSON of `system::netconfig::NetState`).
    pub fn board_config(&self) -> Result<Option<String>> {
        Ok(self
            .r()
            .query_row("SELECT config_json FROM board_config WHERE id=1", [], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// Replace the confirmed board configuration.
    pub fn set_board_config(&self, json: &str) -> Result<()> {
        self.c().execute(
            "INSERT INTO board_config (id, config_json, updated_at) VALUES (1, ?1, ?2)
             ON CONFLICT(id) DO UPDATE SET config_json=excluded.config_json, updated_at=excluded.updated_at",
            params![json, now_ms()],
        )?;
        Ok(())
    }

    /// Log a change; returns its log id.
    pub fn board_log_add(
        &self,
        source: &str,
        changes: &str,
        outcome: &str,
        detail: Option<&str>,
    ) -> Result<i64> {
        let c = self.c();
        let decided = if outcome == "pending" {
            None
        } else {
            Some(now_ms())
        };
        c.execute(
            "INSERT INTO board_changes (at, source, changes, outcome, detail, decided_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![now_ms(), source, changes, outcome, detail, decided],
        )?;
        Ok(c.last_insert_rowid())
    }

    /// Set the outcome of logged changes.
    pub fn board_log_decide(&self, ids: &[i64], outcome: &str, detail: Option<&str>) -> Result<()> {
        let c = self.c();
        for id in ids {
            c.execute(
                "UPDATE board_changes SET outcome=?2, detail=?3, decided_at=?4 WHERE id=?1",
                params![id, outcome, detail, now_ms()],
            )?;
        }
        Ok(())
    }

    /// The newest `limit` log entries, newest first.
    pub fn board_log(&self, limit: u32) -> Result<Vec<BoardLogRow>> {
        let c = self.r();
        let mut st = c.prepare(
            "SELECT id, at, source, changes, outcome, detail, decided_at FROM board_changes ORDER BY id DESC LIMIT ?1",
        )?;
        let rows = st.query_map(params![limit], |r| {
            Ok(BoardLogRow {
                id: r.get(0)?,
                at: r.get(1)?,
                source: r.get(2)?,
                changes: r.get(3)?,
                outcome: r.get(4)?,
                detail: r.get(5)?,
                decided_at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDirection, RunProtocol, RunRole};
    use crate::store::NewRun;

    #[test]
    fn board_config_log_and_run_net_config() {
        let d = crate::scratch::dir("store-board");
        let s = Store::open_dir(&d).unwrap();
        assert_eq!(s.board_config().unwrap(), None);
        s.set_board_config("{\"ports\":{}}").unwrap();
        s.set_board_config("{\"ports\":{\"eth0\":1}}").unwrap();
        assert_eq!(
            s.board_config().unwrap().as_deref(),
            Some("{\"ports\":{\"eth0\":1}}")
        );
        let a = s
            .board_log_add("web", "add 192.0.2.5/24 to eth0", "pending", None)
            .unwrap();
        let b = s
            .board_log_add("cli", "set eth0 MTU 1400", "unchecked", None)
            .unwrap();
        s.board_log_decide(&[a], "rolled back", Some("not confirmed within 3 s"))
            .unwrap();
        let log = s.board_log(10).unwrap();
        assert_eq!(log.iter().map(|r| r.id).collect::<Vec<_>>(), vec![b, a]);
        assert_eq!(log[1].outcome, "rolled back");
        assert_eq!(log[1].detail.as_deref(), Some("not confirmed within 3 s"));
        assert!(log[1].decided_at.is_some() && log[0].decided_at.is_some());

        let id = s
            .create_run(&NewRun {
                role: RunRole::Client,
                protocol: RunProtocol::Tcp,
                peer_host: "192.0.2.2".into(),
                peer_port: 5201,
                local_host: String::new(),
                local_port: 0,
                bind_dev: None,
                direction: RunDirection::Send,
                params: serde_json::json!({}),
                suite_id: None,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(s.run_net_config(id).unwrap(), None);
        s.set_run_net_config(id, "{\"ports\":[{\"name\":\"eth0\"}]}")
            .unwrap();
        assert_eq!(
            s.run_net_config(id).unwrap().unwrap()["ports"][0]["name"],
            "eth0"
        );
        assert_eq!(s.run_net_config(9999).unwrap(), None);
        let _ = std::fs::remove_dir_all(d);
    }
}
