//! History between boards: a board's ended runs (with everything they own), suite runs and
//! suite definitions as one versioned JSON document, and its import into another store in one
//! transaction. The document's layout is described in `docs/history-file.md`.
//!
//! Identity: a run (or suite run) is (source board id, its id there). Rows made here have no
//! origin columns and are exported with this board's id; imported rows keep the origin they
//! came with, so a run passed on from board to board stays one run. Importing a run whose
//! identity is already here adds nothing.
// Lengths and sizes here come from the network or from files: checked arithmetic and
// fallible slicing only (issue 37, blocker 3). CI runs clippy with -D warnings.
#![cfg_attr(
    not(test),
    warn(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

use super::{now_ms, Result, Store, StoreError};
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde::Serialize;
use serde_json::{Map, Value};
use std::io::Write;

/// The `format` word of a history file.
pub const EXPORT_FORMAT: &str = "netperfd-history";
/// The layout version this netperfd writes and reads.
pub const EXPORT_VERSION: i64 = 1;

/// What an import did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct ImportSummary {
    /// The source board (id, label) named in the file.
    pub board_id: String,
    pub board_label: String,
    /// Runs added, and runs of the file already here (not added again).
    pub runs_added: u64,
    pub runs_present: u64,
    /// Suite runs added / already here.
    pub suites_added: u64,
    pub suites_present: u64,
    /// Suite definitions added (names not yet here; an existing name is never overwritten).
    pub defs_added: u64,
}

pub(super) fn bad(msg: impl Into<String>) -> StoreError {
    StoreError::Import(msg.into())
}

/// Tables whose rows belong to one run (`run_id` → `runs(id)`), found in the schema, so
/// that a table added by a later migration travels without a change here.
pub(super) fn run_tables(c: &Connection) -> Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT m.name FROM sqlite_master m, pragma_foreign_key_list(m.name) f
         WHERE m.type = 'table' AND f.\"table\" = 'runs' AND f.\"from\" = 'run_id' ORDER BY m.name",
    )?;
    let rows = st.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

fn to_json(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        // No column holds blobs; should one appear, it travels as null.
        ValueRef::Blob(_) => Value::Null,
    }
}

/// Call `f` with each row of `sql` as a JSON object keyed by column name (one row in memory
/// at a time).
fn each(
    c: &Connection,
    sql: &str,
    mut f: impl FnMut(Map<String, Value>) -> Result<()>,
) -> Result<()> {
    let mut st = c.prepare(sql)?;
    let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let mut m = Map::new();
        for (i, n) in names.iter().enumerate() {
            m.insert(n.clone(), to_json(r.get_ref(i)?));
        }
        f(m)?;
    }
    Ok(())
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

/// Writes a JSON list one element at a time.
struct List<'w, W: Write> {
    w: &'w mut W,
    first: bool,
}

impl<'w, W: Write> List<'w, W> {
    fn open(w: &'w mut W, key: &str) -> Result<Self> {
        write!(w, ",\"{key}\":[").map_err(io)?;
        Ok(List { w, first: true })
    }
    fn push(&mut self, v: &impl Serialize) -> Result<()> {
        if !self.first {
            self.w.write_all(b",").map_err(io)?;
        }
        self.first = false;
        serde_json::to_writer(&mut *self.w, v)?;
        Ok(())
    }
    fn close(self) -> Result<()> {
        self.w.write_all(b"]").map_err(io)
    }
}

/// Ended runs only, and only those whose suite and parent run have ended too.
const EXPORTED_RUNS: &str = "status != 'running'
    AND (suite_id IS NULL OR suite_id IN (SELECT id FROM suites WHERE status != 'running'))
    AND (parent_id IS NULL OR parent_id IN (SELECT id FROM runs WHERE status != 'running'))";

impl Store {
    /// The whole ended history as one history document (see the module doc), in memory:
    /// for tests and small histories; [`Store::export_history_to`] streams it.
    ///
    /// # Errors
    /// The database's.
    pub fn export_history(&self, board_label: &str) -> Result<Value> {
        let mut buf = Vec::new();
        self.export_history_to(&mut buf, board_label)?;
        Ok(serde_json::from_slice(&buf)?)
    }

    /// Write the whole ended history as one history document to `w`, one row at a time
    /// (memory stays bounded whatever the history's size): this board's id and
    /// `board_label`, suite definitions, ended suite runs and runs with all their rows. Reads
    /// one snapshot on a connection of its own, so a slow reader of `w` holds up no page.
    ///
    /// Returns the runs and suite runs written.
    ///
    /// # Errors
    /// The database's, or [`StoreError::Io`] when `w` fails (e.g. the client went away).
    pub fn export_history_to<W: Write>(&self, w: &mut W, board_label: &str) -> Result<(u64, u64)> {
        let (mut nruns, mut nsuites) = (0u64, 0u64);
        let board = self.board_id()?;
        let c = Connection::open_with_flags(
            self.path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        let tx = c.unchecked_transaction()?;
        write!(
            w,
            "{{\"format\":{},\"version\":{},\"exported_at\":{},\"board\":{}",
            Value::from(EXPORT_FORMAT),
            EXPORT_VERSION,
            now_ms(),
            serde_json::json!({"id": board, "label": board_label})
        )
        .map_err(io)?;
        write_suite_defs(&tx, w)?;
        let origin = |m: &mut Map<String, Value>| {
            if m.get("origin_board").is_none_or(Value::is_null) {
                let id = m.get("id").cloned().unwrap_or(Value::Null);
                m.insert("origin_board".into(), Value::from(board.clone()));
                m.insert("origin_id".into(), id);
                m.insert("origin_label".into(), Value::from(board_label));
            }
        };
        let mut l = List::open(w, "suites")?;
        each(
            &tx,
            "SELECT s.*, d.name AS def_name FROM suites s LEFT JOIN suite_defs d ON d.id = s.def_id
             WHERE s.status != 'running' ORDER BY s.id",
            |mut m| {
                m.remove("def_id");
                m.remove("schedule_id");
                origin(&mut m);
                nsuites = nsuites.saturating_add(1);
                l.push(&m)
            },
        )?;
        l.close()?;
        let mut l = List::open(w, "runs")?;
        each(
            &tx,
            &format!("SELECT * FROM runs WHERE {EXPORTED_RUNS} ORDER BY id"),
            |mut m| {
                origin(&mut m);
                // The loss ledger also as an object (the column stays text, as the others).
                let ledger = m
                    .get("loss_ledger_json")
                    .and_then(Value::as_str)
                    .and_then(|s| serde_json::from_str::<Value>(s).ok());
                if let Some(l) = ledger {
                    m.insert("loss_ledger".into(), l);
                }
                nruns = nruns.saturating_add(1);
                l.push(&m)
            },
        )?;
        l.close()?;
        write_run_data(&tx, w)?;
        w.write_all(b"}}").map_err(io)?;
        w.flush().map_err(io)?;
        tx.finish()?;
        Ok((nruns, nsuites))
    }
}

/// The export's `suite_defs` list: each definition with its body as an object and
/// `builtin` as a boolean.
fn write_suite_defs<W: Write>(tx: &Connection, w: &mut W) -> Result<()> {
    let mut l = List::open(w, "suite_defs")?;
    each(
        tx,
        "SELECT name, builtin, body_json FROM suite_defs ORDER BY id",
        |mut m| {
            let body = m
                .get("body_json")
                .and_then(Value::as_str)
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                .unwrap_or(Value::Null);
            m.remove("body_json");
            m.insert("body".into(), body);
            let b = m.get("builtin").and_then(Value::as_i64).unwrap_or(0) != 0;
            m.insert("builtin".into(), Value::Bool(b));
            l.push(&m)
        },
    )?;
    l.close()?;
    Ok(())
}

/// The export's `run_data` object: per table of the runs' rows (intervals, streams, …) the
/// rows of the exported runs, streamed one at a time.
fn write_run_data<W: Write>(tx: &Connection, w: &mut W) -> Result<()> {
    w.write_all(b",\"run_data\":{").map_err(io)?;
    for (i, t) in run_tables(tx)?.iter().enumerate() {
        if i > 0 {
            w.write_all(b",").map_err(io)?;
        }
        write!(w, "{}:[", Value::from(t.as_str())).map_err(io)?;
        let mut first = true;
        each(
            tx,
            &format!(
                "SELECT * FROM \"{t}\" WHERE run_id IN (SELECT id FROM runs WHERE {EXPORTED_RUNS}) ORDER BY rowid"
            ),
            |m| {
                if !first {
                    w.write_all(b",").map_err(io)?;
                }
                first = false;
                serde_json::to_writer(&mut *w, &m)?;
                Ok(())
            },
        )?;
        w.write_all(b"]").map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::report::{IntervalRecord, StreamInterval};
    use crate::model::{RunDirection, RunProtocol, RunRole};
    use crate::model::{RunFigures, RunStatus};
    use crate::store::NewRun;

    fn store(name: &str) -> (Store, std::path::PathBuf) {
        let d = crate::scratch::dir(name);
        let _ = std::fs::remove_dir_all(&d);
        (Store::open_dir(&d).unwrap(), d)
    }

    fn run(s: &Store, suite: Option<i64>, peer: &str) -> i64 {
        let id = s
            .create_run(&NewRun {
                role: RunRole::Client,
                protocol: RunProtocol::Tcp,
                peer_host: peer.into(),
                peer_port: 5201,
                direction: RunDirection::Send,
                params: serde_json::json!({"time": 1}),
                suite_id: suite,
                ..Default::default()
            })
            .unwrap();
        let rec = IntervalRecord {
            streams: vec![StreamInterval {
                id: 1,
                socket: 5,
                start: 0.0,
                end: 1.0,
                bytes: 1000,
                bits_per_second: 8000.0,
                sender: true,
                omitted: false,
                tcp: None,
                udp: None,
                latency: None,
            }],
        };
        s.add_interval(id, 0, &rec).unwrap();
        let f = RunFigures {
            receiver_bps: Some(8000.0),
            ..Default::default()
        };
        s.finish_run(id, RunStatus::Completed, None, &f, None)
            .unwrap();
        id
    }

    #[test]
    fn export_import_is_idempotent_and_keeps_identity() {
        let (a, da) = store("xfer-a");
        let (b, db) = store("xfer-b");
        a.create_suite_def(
            "soak",
            false,
            &serde_json::json!({"name": "soak", "steps": []}),
        )
        .unwrap();
        let sid = a.create_suite("soak", "192.0.2.2").unwrap();
        let r1 = run(&a, Some(sid), "192.0.2.2");
        a.finish_suite(sid, RunStatus::Completed).unwrap();
        let r2 = run(&a, None, "198.51.100.2");
        let doc = a.export_history("board-a").unwrap();
        let text = doc.to_string();
        let s1 = b.import_history(text.as_bytes()).unwrap();
        assert_eq!((s1.runs_added, s1.suites_added, s1.defs_added), (2, 1, 1));
        let s2 = b.import_history(text.as_bytes()).unwrap();
        assert_eq!((s2.runs_added, s2.runs_present, s2.suites_added), (0, 2, 0));
        let rows = b.list_runs(&Default::default()).unwrap();
        assert_eq!(rows.len(), 2);
        let o = b.run_origin(rows[0].id).unwrap().unwrap();
        assert_eq!(
            (o.board.as_str(), o.id),
            (a.board_id().unwrap().as_str(), r2)
        );
        assert_eq!(o.label, "board-a");
        let leg = rows.iter().find(|r| r.suite_id.is_some()).unwrap();
        assert_eq!(b.run_origin(leg.id).unwrap().unwrap().id, r1);
        assert_eq!(b.intervals(leg.id).unwrap()[0].bytes, 1000);
        // Back to A: all of it is A's own, nothing is added.
        let back = b.export_history("board-b").unwrap().to_string();
        let s3 = a.import_history(back.as_bytes()).unwrap();
        assert_eq!((s3.runs_added, s3.runs_present), (0, 2));
        assert_eq!(a.list_runs(&Default::default()).unwrap().len(), 2);
        let _ = (std::fs::remove_dir_all(da), std::fs::remove_dir_all(db));
    }

    #[test]
    fn the_loss_ledger_travels_as_an_object_and_as_its_column() {
        let (a, da) = store("xfer-ledger-a");
        let (b, db) = store("xfer-ledger-b");
        let id = run(&a, None, "192.0.2.2");
        let ledger = serde_json::json!({"lost": 12345, "places": [{"place": "board_qdisc",
            "port": "eth0", "packets": 12001, "counter": "qdisc tbf drops on eth0"}], "unattributed": 344});
        let board = serde_json::json!({"seconds": 3.0, "run_ports": ["eth0"]});
        a.set_run_board(id, &board, Some(&ledger)).unwrap();
        let doc = a.export_history("board-a").unwrap();
        assert_eq!(doc["runs"][0]["loss_ledger"], ledger);
        assert_eq!(
            doc["runs"][0]["loss_ledger_json"]
                .as_str()
                .map(|s| serde_json::from_str::<Value>(s).unwrap()),
            Some(ledger.clone())
        );
        let s = b.import_history(doc.to_string().as_bytes()).unwrap();
        assert_eq!(s.runs_added, 1);
        let got = b.list_runs(&Default::default()).unwrap()[0].id;
        assert_eq!(b.run_board(got).unwrap(), (Some(board), Some(ledger)));
        // A ledger column that is not JSON is refused, nothing added.
        let mut bad = doc.clone();
        bad["runs"][0]["loss_ledger_json"] = Value::from("{not json");
        let (c, dc) = store("xfer-ledger-c");
        let e = c.import_history(bad.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("loss_ledger_json"), "{e}");
        assert!(c.list_runs(&Default::default()).unwrap().is_empty());
        let _ = (
            std::fs::remove_dir_all(da),
            std::fs::remove_dir_all(db),
            std::fs::remove_dir_all(dc),
        );
    }

    #[test]
    fn bad_files_change_nothing() {
        let (a, da) = store("xfer-bad-a");
        let (b, db) = store("xfer-bad-b");
        run(&a, None, "192.0.2.2");
        let good = a.export_history("a").unwrap();
        let mut wrong_version = good.clone();
        wrong_version["version"] = Value::from(99);
        let mut foreign = good.clone();
        foreign["format"] = Value::from("something-else");
        let mut broken = good.clone();
        broken["run_data"]["intervals"][0]["run_id"] = Value::from(424242);
        let mut bad_status = good.clone();
        bad_status["runs"][0]["status"] = Value::from("running");
        for (doc, want) in [
            (b"not json".to_vec(), "not a JSON document"),
            (wrong_version.to_string().into_bytes(), "version 99"),
            (foreign.to_string().into_bytes(), "not a netperfd history"),
            (broken.to_string().into_bytes(), "run 424242"),
            (bad_status.to_string().into_bytes(), "status must be"),
        ] {
            let e = b.import_history(&doc).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(b.list_runs(&Default::default()).unwrap().is_empty());
        }
        let _ = (std::fs::remove_dir_all(da), std::fs::remove_dir_all(db));
    }
}
