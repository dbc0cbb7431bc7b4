//! History between boards: a board's ended runs (with everything they own), suite runs and
//! suite definitions as one versioned JSON document, and its import into another store in one
//! transaction. The document's layout is described in `docs/history-file.md`.
//!
//! Identity: a run (or suite run) is (source board id, its id there). Rows made here have no
//! origin columns and are exported with this board's id; imported rows keep the origin they
//! came with, so a run passed on from board to board stays one run. Importing a run whose
//! identity is already here adds nothing.

use super::{now_ms, Result, Store, StoreError};
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;

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

fn bad(msg: impl Into<String>) -> StoreError {
    StoreError::Import(msg.into())
}

/// Tables whose rows belong to one run (`run_id` → `runs(id)`), found in the schema, so
/// that a table added by a later migration travels without a change here.
fn run_tables(c: &Connection) -> Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT m.name FROM sqlite_master m, pragma_foreign_key_list(m.name) f
         WHERE m.type = 'table' AND f.\"table\" = 'runs' AND f.\"from\" = 'run_id' ORDER BY m.name",
    )?;
    let rows = st.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

fn columns(c: &Connection, table: &str) -> Result<Vec<String>> {
    let mut st = c.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
    let rows = st.query_map(params![table], |r| r.get(0))?;
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

fn to_sql(table: &str, col: &str, v: &Value) -> Result<SqlValue> {
    Ok(match v {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(*b as i64),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        _ => {
            return Err(bad(format!(
                "{table}.{col}: a value must be a number, text or null"
            )))
        }
    })
}

/// Rows of `sql` as JSON objects keyed by column name.
fn dump(c: &Connection, sql: &str) -> Result<Vec<Value>> {
    let mut st = c.prepare(sql)?;
    let names: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
    let mut rows = st.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut m = Map::new();
        for (i, n) in names.iter().enumerate() {
            m.insert(n.clone(), to_json(r.get_ref(i)?));
        }
        out.push(Value::Object(m));
    }
    Ok(out)
}

/// Ended runs only, and only those whose suite and parent run have ended too.
const EXPORTED_RUNS: &str = "status != 'running'
    AND (suite_id IS NULL OR suite_id IN (SELECT id FROM suites WHERE status != 'running'))
    AND (parent_id IS NULL OR parent_id IN (SELECT id FROM runs WHERE status != 'running'))";

impl Store {
    /// The whole ended history as one history document (see the module doc): this board's id
    /// and `board_label`, suite definitions, ended suite runs and runs with all their rows.
    pub fn export_history(&self, board_label: &str) -> Result<Value> {
        let board = self.board_id()?;
        let c = self.r();
        let tx = c.unchecked_transaction()?;
        let defs = dump(
            &tx,
            "SELECT name, builtin, body_json FROM suite_defs ORDER BY id",
        )?
        .into_iter()
        .map(|mut d| {
            let body = d
                .get("body_json")
                .and_then(Value::as_str)
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                .unwrap_or(Value::Null);
            if let Some(m) = d.as_object_mut() {
                m.remove("body_json");
                m.insert("body".into(), body);
                let b = m.get("builtin").and_then(Value::as_i64).unwrap_or(0) != 0;
                m.insert("builtin".into(), Value::Bool(b));
            }
            d
        })
        .collect::<Vec<_>>();
        let origin = |mut v: Value| {
            if let Some(m) = v.as_object_mut() {
                if m.get("origin_board").is_none_or(Value::is_null) {
                    let id = m.get("id").cloned().unwrap_or(Value::Null);
                    m.insert("origin_board".into(), Value::from(board.clone()));
                    m.insert("origin_id".into(), id);
                    m.insert("origin_label".into(), Value::from(board_label));
                }
            }
            v
        };
        let suites: Vec<Value> = dump(
            &tx,
            "SELECT s.*, d.name AS def_name FROM suites s LEFT JOIN suite_defs d ON d.id = s.def_id
             WHERE s.status != 'running' ORDER BY s.id",
        )?
        .into_iter()
        .map(|mut s| {
            if let Some(m) = s.as_object_mut() {
                m.remove("def_id");
                m.remove("schedule_id");
            }
            origin(s)
        })
        .collect();
        let runs: Vec<Value> = dump(
            &tx,
            &format!("SELECT * FROM runs WHERE {EXPORTED_RUNS} ORDER BY id"),
        )?
        .into_iter()
        .map(origin)
        .collect();
        let mut data = Map::new();
        for t in run_tables(&tx)? {
            let rows = dump(
                &tx,
                &format!(
                    "SELECT * FROM \"{t}\" WHERE run_id IN (SELECT id FROM runs WHERE {EXPORTED_RUNS}) ORDER BY rowid"
                ),
            )?;
            data.insert(t, Value::Array(rows));
        }
        tx.finish()?;
        Ok(serde_json::json!({
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "exported_at": now_ms(),
            "board": {"id": board, "label": board_label},
            "suite_defs": defs,
            "suites": suites,
            "runs": runs,
            "run_data": data,
        }))
    }

    /// Import a history document (JSON text) in one transaction: either all of it is added
    /// or, on any error (not a history file, another version, a broken reference, a bad
    /// value), nothing changes. Runs and suite runs already here (same origin) are not added
    /// again; suite definitions whose name exists are left alone.
    pub fn import_history(&self, text: &[u8]) -> Result<ImportSummary> {
        let doc: Value =
            serde_json::from_slice(text).map_err(|e| bad(format!("not a JSON document: {e}")))?;
        if doc.get("format").and_then(Value::as_str) != Some(EXPORT_FORMAT) {
            return Err(bad(format!(
                "not a netperfd history file (\"format\" must be \"{EXPORT_FORMAT}\")"
            )));
        }
        match doc.get("version").and_then(Value::as_i64) {
            Some(EXPORT_VERSION) => {}
            Some(v) => {
                return Err(bad(format!(
                    "history file version {v} is not supported (this netperfd reads version {EXPORT_VERSION})"
                )))
            }
            None => return Err(bad("the history file has no version")),
        }
        let text_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let board = doc.get("board").cloned().unwrap_or(Value::Null);
        let src_board =
            text_of(&board, "id").ok_or_else(|| bad("the history file names no board id"))?;
        let src_label = text_of(&board, "label").unwrap_or_default();
        let list = |k: &str| -> Result<Vec<Value>> {
            match doc.get(k) {
                None => Ok(Vec::new()),
                Some(Value::Array(a)) => Ok(a.clone()),
                Some(_) => Err(bad(format!("\"{k}\" must be a list"))),
            }
        };
        let defs = list("suite_defs")?;
        let suites = list("suites")?;
        let mut runs = list("runs")?;
        let data = match doc.get("run_data") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(bad("\"run_data\" must be an object")),
        };
        let me = self.board_id()?;
        let mut sum = ImportSummary {
            board_id: src_board,
            board_label: src_label,
            ..Default::default()
        };

        let obj = |v: &Value, what: &str| -> Result<Map<String, Value>> {
            v.as_object()
                .cloned()
                .ok_or_else(|| bad(format!("{what}: every entry must be an object")))
        };
        let int = |m: &Map<String, Value>, k: &str, what: &str| -> Result<i64> {
            m.get(k)
                .and_then(Value::as_i64)
                .ok_or_else(|| bad(format!("{what}: \"{k}\" must be a whole number")))
        };
        let identity = |m: &Map<String, Value>, what: &str| -> Result<(String, i64)> {
            let b = m
                .get("origin_board")
                .and_then(Value::as_str)
                .filter(|b| !b.is_empty() && b.len() <= 64)
                .ok_or_else(|| bad(format!("{what}: \"origin_board\" is missing")))?;
            Ok((b.to_string(), int(m, "origin_id", what)?))
        };

        let mut c = self.c();
        let tx = c.transaction()?;

        // Suite definitions by name.
        let mut def_ids: HashMap<String, i64> = HashMap::new();
        for d in &defs {
            let m = obj(d, "suite_defs")?;
            let name = m
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.trim().is_empty())
                .ok_or_else(|| bad("suite_defs: a definition has no name"))?;
            let existing: Option<i64> = tx
                .query_row(
                    "SELECT id FROM suite_defs WHERE name=?1",
                    params![name],
                    |r| r.get(0),
                )
                .optional()?;
            let id = match existing {
                Some(id) => id,
                None => {
                    let body = m.get("body").cloned().unwrap_or(Value::Null);
                    if !body.is_object() {
                        return Err(bad(format!("suite definition '{name}' has no body")));
                    }
                    let now = now_ms();
                    tx.execute(
                        "INSERT INTO suite_defs (name, builtin, body_json, created_at, updated_at) VALUES (?1, 0, ?2, ?3, ?3)",
                        params![name, body.to_string(), now],
                    )?;
                    sum.defs_added += 1;
                    tx.last_insert_rowid()
                }
            };
            def_ids.insert(name.to_string(), id);
        }

        // Suite runs.
        let suite_cols = columns(&tx, "suites")?;
        let mut suite_map: HashMap<i64, i64> = HashMap::new();
        for s in &suites {
            let m = obj(s, "suites")?;
            let fid = int(&m, "id", "suites")?;
            let (ob, oid) = identity(&m, &format!("suite {fid}"))?;
            let local = find_local(&tx, "suites", &me, &ob, oid)?;
            if let Some(l) = local {
                suite_map.insert(fid, l);
                sum.suites_present += 1;
                continue;
            }
            let mut row: Vec<(String, SqlValue)> = Vec::new();
            for col in &suite_cols {
                let v = match col.as_str() {
                    "id" | "schedule_id" => continue,
                    "def_id" => match m.get("def_name").and_then(Value::as_str) {
                        Some(n) => def_ids
                            .get(n)
                            .map(|i| SqlValue::Integer(*i))
                            .unwrap_or(SqlValue::Null),
                        None => SqlValue::Null,
                    },
                    k => match m.get(k) {
                        Some(v) => to_sql("suites", k, v)?,
                        None => continue,
                    },
                };
                row.push((col.clone(), v));
            }
            let id = insert(&tx, "suites", &row)?;
            suite_map.insert(fid, id);
            sum.suites_added += 1;
        }

        // Runs: parents (multi-port runs) before their legs.
        let file_ids: std::collections::HashSet<i64> = runs
            .iter()
            .filter_map(|r| r.get("id").and_then(Value::as_i64))
            .collect();
        runs.sort_by_key(|r| r.get("parent_id").is_some_and(|p| !p.is_null()));
        let run_cols = columns(&tx, "runs")?;
        let mut run_map: HashMap<i64, i64> = HashMap::new();
        let mut added: std::collections::HashSet<i64> = std::collections::HashSet::new();
        for r in &runs {
            let m = obj(r, "runs")?;
            let fid = int(&m, "id", "runs")?;
            let what = format!("run {fid}");
            let (ob, oid) = identity(&m, &what)?;
            let suite = match m.get("suite_id").and_then(Value::as_i64) {
                Some(s) => Some(*suite_map.get(&s).ok_or_else(|| {
                    bad(format!(
                        "{what} refers to suite {s}, which is not in the file"
                    ))
                })?),
                None => None,
            };
            let parent = match m.get("parent_id").and_then(Value::as_i64) {
                Some(p) if file_ids.contains(&p) => Some(*run_map.get(&p).ok_or_else(|| {
                    bad(format!("{what} is a leg of run {p}, which is itself a leg"))
                })?),
                Some(p) => {
                    return Err(bad(format!(
                        "{what} is a leg of run {p}, which is not in the file"
                    )))
                }
                None => None,
            };
            if let Some(l) = find_local(&tx, "runs", &me, &ob, oid)? {
                run_map.insert(fid, l);
                sum.runs_present += 1;
                continue;
            }
            let mut row: Vec<(String, SqlValue)> = Vec::new();
            for col in &run_cols {
                let v = match col.as_str() {
                    "id" => continue,
                    "suite_id" => suite.map(SqlValue::Integer).unwrap_or(SqlValue::Null),
                    "parent_id" => parent.map(SqlValue::Integer).unwrap_or(SqlValue::Null),
                    "status" => match m.get("status").and_then(Value::as_str) {
                        Some(s @ ("completed" | "failed" | "aborted")) => {
                            SqlValue::Text(s.to_string())
                        }
                        _ => {
                            return Err(bad(format!(
                                "{what}: status must be completed, failed or aborted"
                            )))
                        }
                    },
                    k => match m.get(k) {
                        Some(v) => to_sql("runs", k, v)?,
                        None => continue,
                    },
                };
                row.push((col.clone(), v));
            }
            let id = insert(&tx, "runs", &row).map_err(|e| match e {
                StoreError::Sql(e) => bad(format!("{what}: {e}")),
                e => e,
            })?;
            run_map.insert(fid, id);
            added.insert(fid);
            sum.runs_added += 1;
        }

        // What the new runs own.
        let tables = run_tables(&tx)?;
        for (t, rows) in &data {
            if !tables.contains(t) {
                return Err(bad(format!(
                    "run_data.{t}: this netperfd keeps no such table"
                )));
            }
            let Value::Array(rows) = rows else {
                return Err(bad(format!("run_data.{t} must be a list")));
            };
            let cols = columns(&tx, t)?;
            for r in rows {
                let m = obj(r, &format!("run_data.{t}"))?;
                let fid = int(&m, "run_id", &format!("run_data.{t}"))?;
                if !file_ids.contains(&fid) {
                    return Err(bad(format!(
                        "run_data.{t} refers to run {fid}, which is not in the file"
                    )));
                }
                if !added.contains(&fid) {
                    continue;
                }
                let mut row: Vec<(String, SqlValue)> = Vec::new();
                for col in &cols {
                    let v = match col.as_str() {
                        "run_id" => SqlValue::Integer(run_map[&fid]),
                        k => match m.get(k) {
                            Some(v) => to_sql(t, k, v)?,
                            None => continue,
                        },
                    };
                    row.push((col.clone(), v));
                }
                insert(&tx, t, &row).map_err(|e| match e {
                    StoreError::Sql(e) => bad(format!("run_data.{t} of run {fid}: {e}")),
                    e => e,
                })?;
            }
        }
        tx.commit()?;
        Ok(sum)
    }
}

/// The local id of a row with this identity: one made here (`origin_board` is this board's
/// id) or one imported before.
fn find_local(c: &Connection, table: &str, me: &str, board: &str, id: i64) -> Result<Option<i64>> {
    let q = |sql: String, p: &[&dyn rusqlite::ToSql]| c.query_row(&sql, p, |r| r.get(0)).optional();
    Ok(if board == me {
        q(
            format!("SELECT id FROM {table} WHERE id=?1 AND origin_board IS NULL"),
            &[&id],
        )?
    } else {
        q(
            format!("SELECT id FROM {table} WHERE origin_board=?1 AND origin_id=?2"),
            &[&board, &id],
        )?
    })
}

/// Insert one row (column names come from the table's own schema, never from the file).
fn insert(c: &Connection, table: &str, row: &[(String, SqlValue)]) -> Result<i64> {
    let names: Vec<String> = row.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    let marks: Vec<String> = (1..=row.len()).map(|i| format!("?{i}")).collect();
    c.execute(
        &format!(
            "INSERT INTO \"{table}\" ({}) VALUES ({})",
            names.join(", "),
            marks.join(", ")
        ),
        rusqlite::params_from_iter(row.iter().map(|(_, v)| v)),
    )?;
    Ok(c.last_insert_rowid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::report::{IntervalRecord, StreamInterval};
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
                role: "client".into(),
                protocol: "TCP".into(),
                peer_host: peer.into(),
                peer_port: 5201,
                direction: "send".into(),
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
