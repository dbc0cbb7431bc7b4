//! Importing a history file (`docs/history-file.md`) as a stream: the document is parsed
//! from a reader one row at a time and every row is checked and inserted at once, all in
//! one transaction (all or nothing). Memory stays bounded whatever the file: only the row
//! being read and the id maps (file id → local id, 16 bytes a run) are held.
//!
//! Every value is checked before it is stored (see [`check_run`], [`check_suite`] and the
//! column types of each table): a file can never put a value into the database that a page
//! cannot read. After the commit, retention runs (in batches) with imported runs pruned
//! first, so an import never evicts this board's own runs.
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

use super::transfer::{bad, run_tables, EXPORT_FORMAT, EXPORT_VERSION};
use super::{now_ms, Result, Store, StoreError};
use crate::model::RunKind;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, OptionalExtension, Transaction};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::io::Read;

use super::transfer::ImportSummary;

/// Earliest time a run may have started: 2000-01-01 00:00 UTC, Unix ms.
pub const MIN_TIME_MS: i64 = 946_684_800_000;
/// Longest `params_json` text of an imported run, bytes (a run's parameters: iperf3 caps its
/// own at 8 KiB).
pub(super) const MAX_PARAMS_JSON: usize = 64 * 1024;

/// Longest `summary_json`, `board_json` and `loss_ledger_json` text of an imported run, bytes.
pub(super) const MAX_SUMMARY_JSON: usize = 1024 * 1024;

/// Longest board id and board label of a history file, characters.
pub(super) const MAX_BOARD_TEXT: usize = 200;

/// The `board` object of a history file: only its id and label are read, and unknown keys are
/// skipped without being kept (a `board` of 10 M empty arrays cost 726 MB when it was read
/// whole as a JSON value).
#[derive(serde::Deserialize)]
struct BoardHead {
    id: Option<String>,
    label: Option<String>,
}

/// How far in this board's future an imported time may be (clock skew between boards), ms.
pub const MAX_SKEW_MS: i64 = 3_600_000;

/// A column of a table, as its schema declares it.
#[derive(Debug, Clone)]
struct Col {
    name: String,
    /// Declared type, upper case (INTEGER, REAL, TEXT).
    ty: String,
}

fn cols(tx: &Transaction<'_>, table: &str) -> Result<Vec<Col>> {
    let mut st = tx.prepare("SELECT name, upper(type) FROM pragma_table_info(?1) ORDER BY cid")?;
    let rows = st.query_map(params![table], |r| {
        Ok(Col {
            name: r.get(0)?,
            ty: r.get(1)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Ranges of columns read into narrower types than SQLite's (ports, stream ids, sockets,
/// CPU numbers): a value outside is refused.
fn range(table: &str, col: &str) -> Option<(i64, i64)> {
    Some(match (table, col) {
        ("runs", "peer_port" | "local_port") => (0, 65_535),
        ("intervals" | "streams", "stream_id") => (0, u32::MAX as i64),
        ("intervals" | "streams", "socket") | ("cpu_samples", "cpu") => {
            (i32::MIN as i64, i32::MAX as i64)
        }
        (_, "seq") => (0, i64::MAX),
        _ => return None,
    })
}

/// A file value as the SQL value of column `c` of `table`, refused unless it has the
/// column's type (whole number for INTEGER, number for REAL, text for TEXT) or is null.
fn value(table: &str, c: &Col, v: &Value, what: &str) -> Result<SqlValue> {
    let wrong = |want: &str| {
        bad(format!(
            "{what}: \"{}\" must be {want}, got {}",
            c.name,
            short(v)
        ))
    };
    Ok(match (c.ty.as_str(), v) {
        (_, Value::Null) => SqlValue::Null,
        ("INTEGER", Value::Bool(b)) => SqlValue::Integer(*b as i64),
        ("INTEGER", Value::Number(n)) => {
            let i = n.as_i64().ok_or_else(|| wrong("a whole number"))?;
            if let Some((lo, hi)) = range(table, &c.name) {
                if i < lo || i > hi {
                    return Err(bad(format!(
                        "{what}: \"{}\" must be {lo} to {hi}, got {i}",
                        c.name
                    )));
                }
            }
            SqlValue::Integer(i)
        }
        ("INTEGER", _) => return Err(wrong("a whole number")),
        ("REAL", Value::Number(n)) => match n.as_f64() {
            Some(f) if f.is_finite() => SqlValue::Real(f),
            _ => return Err(wrong("a number")),
        },
        ("REAL", _) => return Err(wrong("a number")),
        ("TEXT", Value::String(s)) => SqlValue::Text(s.clone()),
        ("TEXT", _) => return Err(wrong("text")),
        (_, Value::Number(n)) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(0.0)),
        },
        (_, Value::String(s)) => SqlValue::Text(s.clone()),
        (_, Value::Bool(b)) => SqlValue::Integer(*b as i64),
        _ => return Err(wrong("a number, text or null")),
    })
}

/// A value for an error message (at most 40 characters).
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

fn day(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "out of range".into())
}

/// Check a time (Unix ms) of an imported row: from 2000 ([`MIN_TIME_MS`]) to this board's
/// now plus [`MAX_SKEW_MS`] (the upper bound only when this board's clock is set, i.e. past
/// 2000 itself).
fn check_time(m: &Map<String, Value>, k: &str, now: i64, what: &str) -> Result<Option<i64>> {
    let Some(v) = m.get(k).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let t = v.as_i64().ok_or_else(|| {
        bad(format!(
            "{what}: \"{k}\" must be a time in Unix ms, got {}",
            short(v)
        ))
    })?;
    if t < MIN_TIME_MS {
        return Err(bad(format!(
            "{what}: \"{k}\" {t} ({}) is before 2000-01-01",
            day(t)
        )));
    }
    if now >= MIN_TIME_MS && t > now.saturating_add(MAX_SKEW_MS) {
        return Err(bad(format!(
            "{what}: \"{k}\" {t} ({}) is in the future (this board's clock says {})",
            day(t),
            day(now)
        )));
    }
    Ok(Some(t))
}

fn ended_status(m: &Map<String, Value>, what: &str) -> Result<()> {
    match m.get("status").and_then(Value::as_str) {
        Some("completed" | "failed" | "aborted") => Ok(()),
        Some("running") => Err(bad(format!(
            "{what}: status \"running\": only ended runs can be imported (status must be completed, failed or aborted)"
        ))),
        _ => Err(bad(format!(
            "{what}: status must be completed, failed or aborted"
        ))),
    }
}

/// The checks of a run beyond the column types: status, role, kind, times, JSON columns.
pub(super) fn check_run(m: &Map<String, Value>, now: i64, what: &str) -> Result<()> {
    ended_status(m, what)?;
    match m.get("role").and_then(Value::as_str) {
        Some("client" | "server") => {}
        _ => return Err(bad(format!("{what}: role must be client or server"))),
    }
    if let Some(k) = m.get("kind").filter(|v| !v.is_null()) {
        if k.as_str().and_then(RunKind::parse).is_none() {
            return Err(bad(format!(
                "{what}: kind {} is not one this netperfd knows ({})",
                short(k),
                RunKind::ALL.map(|k| k.as_str()).join(", ")
            )));
        }
    }
    let start = check_time(m, "started_at", now, what)?
        .ok_or_else(|| bad(format!("{what}: \"started_at\" is missing")))?;
    if let Some(end) = check_time(m, "ended_at", now, what)? {
        if end < start {
            return Err(bad(format!(
                "{what}: \"ended_at\" is before \"started_at\""
            )));
        }
    }
    // Sizes first: a 24 MB params_json of `[[],[],…]` was accepted and then cost 1.2 GB on
    // every read of the run (issue 37's tryout); real ones are far below these caps.
    for (col, cap) in [
        ("params_json", MAX_PARAMS_JSON),
        ("summary_json", MAX_SUMMARY_JSON),
        ("board_json", MAX_SUMMARY_JSON),
        ("loss_ledger_json", MAX_SUMMARY_JSON),
    ] {
        if let Some(len) = m.get(col).and_then(Value::as_str).map(str::len) {
            if len > cap {
                return Err(bad(format!(
                    "{what}: \"{col}\" is {len} bytes, more than the {cap} this netperfd keeps"
                )));
            }
        }
    }
    match m.get("params_json").and_then(Value::as_str) {
        Some(p) if serde_json::from_str::<Value>(p).is_ok_and(|v| v.is_object()) => {}
        _ => {
            return Err(bad(format!(
                "{what}: \"params_json\" must be the text of a JSON object"
            )))
        }
    }
    if let Some(r) = m.get("report_json").filter(|v| !v.is_null()) {
        let ok = r
            .as_str()
            .is_some_and(|s| serde_json::from_str::<crate::engine::report::Report>(s).is_ok());
        if !ok {
            return Err(bad(format!(
                "{what}: \"report_json\" is not a report this netperfd can read"
            )));
        }
    }
    for col in ["summary_json", "board_json", "loss_ledger_json"] {
        if let Some(s) = m.get(col).filter(|v| !v.is_null()) {
            if s.as_str()
                .is_none_or(|s| serde_json::from_str::<Value>(s).is_err())
            {
                return Err(bad(format!(
                    "{what}: \"{col}\" must be the text of a JSON value"
                )));
            }
        }
    }
    Ok(())
}

/// The checks of a suite run beyond the column types: status, name, times.
pub(super) fn check_suite(m: &Map<String, Value>, now: i64, what: &str) -> Result<()> {
    ended_status(m, what)?;
    if m.get("name")
        .and_then(Value::as_str)
        .is_none_or(|n| n.trim().is_empty())
    {
        return Err(bad(format!("{what}: \"name\" must be a non-empty text")));
    }
    let start = check_time(m, "created_at", now, what)?
        .ok_or_else(|| bad(format!("{what}: \"created_at\" is missing")))?;
    if let Some(end) = check_time(m, "ended_at", now, what)? {
        if end < start {
            return Err(bad(format!(
                "{what}: \"ended_at\" is before \"created_at\""
            )));
        }
    }
    Ok(())
}

/// Which part of the document is being read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Defs,
    Suites,
    Runs,
    Data,
}

struct Importer<'t, 'c> {
    tx: &'t Transaction<'c>,
    me: String,
    now: i64,
    sum: ImportSummary,
    board_seen: bool,
    format_ok: bool,
    version_ok: bool,
    def_ids: HashMap<String, i64>,
    suite_map: HashMap<i64, i64>,
    /// File run id → (local id, added by this import).
    run_map: HashMap<i64, (i64, bool)>,
    suite_cols: Vec<Col>,
    run_cols: Vec<Col>,
    data_tables: Vec<String>,
    data_cols: HashMap<String, Vec<Col>>,
    /// The store error that stopped the parse (the parser's own error is only a carrier).
    err: Option<StoreError>,
}

fn obj(v: Value, what: &str) -> Result<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(bad(format!("{what}: every entry must be an object"))),
    }
}

fn int(m: &Map<String, Value>, k: &str, what: &str) -> Result<i64> {
    m.get(k)
        .and_then(Value::as_i64)
        .ok_or_else(|| bad(format!("{what}: \"{k}\" must be a whole number")))
}

fn identity(m: &Map<String, Value>, what: &str) -> Result<(String, i64)> {
    let b = m
        .get("origin_board")
        .and_then(Value::as_str)
        .filter(|b| !b.is_empty() && b.len() <= 64)
        .ok_or_else(|| bad(format!("{what}: \"origin_board\" is missing")))?;
    Ok((b.to_string(), int(m, "origin_id", what)?))
}

/// Insert one row with a cached statement (column names come from the table's own schema,
/// never from the file).
fn insert(tx: &Transaction<'_>, table: &str, row: &[(&str, SqlValue)]) -> Result<i64> {
    let names: Vec<String> = row.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    let marks: Vec<String> = (1..=row.len()).map(|i| format!("?{i}")).collect();
    let mut st = tx.prepare_cached(&format!(
        "INSERT INTO \"{table}\" ({}) VALUES ({})",
        names.join(", "),
        marks.join(", ")
    ))?;
    st.execute(rusqlite::params_from_iter(row.iter().map(|(_, v)| v)))?;
    Ok(tx.last_insert_rowid())
}

impl Importer<'_, '_> {
    fn header_done(&self, part: &str) -> Result<()> {
        if !self.format_ok || !self.version_ok {
            return Err(bad(format!(
                "not a netperfd history file (\"format\": \"{EXPORT_FORMAT}\" and \"version\" must come before \"{part}\")"
            )));
        }
        Ok(())
    }

    fn find_local(&self, table: &str, board: &str, id: i64) -> Result<Option<i64>> {
        let (sql, board_arg): (String, Option<&str>) = if board == self.me {
            (
                format!(
                    "SELECT id FROM {table} WHERE id=?1 AND origin_board IS NULL AND ?2 IS NULL"
                ),
                None,
            )
        } else {
            (
                format!("SELECT id FROM {table} WHERE origin_id=?1 AND origin_board=?2"),
                Some(board),
            )
        };
        let mut st = self.tx.prepare_cached(&sql)?;
        Ok(st
            .query_row(params![id, board_arg], |r| r.get(0))
            .optional()?)
    }

    fn def(&mut self, v: Value) -> Result<()> {
        let m = obj(v, "suite_defs")?;
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| bad("suite_defs: a definition has no name"))?;
        let existing: Option<i64> = self
            .tx
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
                self.tx.execute(
                    "INSERT INTO suite_defs (name, builtin, body_json, created_at, updated_at) VALUES (?1, 0, ?2, ?3, ?3)",
                    params![name, body.to_string(), self.now],
                )?;
                self.sum.defs_added = self.sum.defs_added.saturating_add(1);
                self.tx.last_insert_rowid()
            }
        };
        self.def_ids.insert(name.to_string(), id);
        Ok(())
    }

    fn suite(&mut self, v: Value) -> Result<()> {
        let m = obj(v, "suites")?;
        let fid = int(&m, "id", "suites")?;
        let what = format!("suite {fid}");
        let (ob, oid) = identity(&m, &what)?;
        if let Some(l) = self.find_local("suites", &ob, oid)? {
            self.suite_map.insert(fid, l);
            self.sum.suites_present = self.sum.suites_present.saturating_add(1);
            return Ok(());
        }
        check_suite(&m, self.now, &what)?;
        let mut row: Vec<(&str, SqlValue)> = Vec::new();
        for c in &self.suite_cols {
            let v = match c.name.as_str() {
                "id" | "schedule_id" => continue,
                "def_id" => match m.get("def_name").and_then(Value::as_str) {
                    Some(n) => self
                        .def_ids
                        .get(n)
                        .map(|i| SqlValue::Integer(*i))
                        .unwrap_or(SqlValue::Null),
                    None => SqlValue::Null,
                },
                k => match m.get(k) {
                    Some(v) => value("suites", c, v, &what)?,
                    None => continue,
                },
            };
            row.push((&c.name, v));
        }
        let id = insert(self.tx, "suites", &row).map_err(|e| match e {
            StoreError::Sql(e) => bad(format!("{what}: {e}")),
            e => e,
        })?;
        self.suite_map.insert(fid, id);
        self.sum.suites_added = self.sum.suites_added.saturating_add(1);
        Ok(())
    }

    fn run(&mut self, v: Value) -> Result<()> {
        let m = obj(v, "runs")?;
        let fid = int(&m, "id", "runs")?;
        let what = format!("run {fid}");
        if self.run_map.contains_key(&fid) {
            return Err(bad(format!("{what} is in the file twice")));
        }
        let (ob, oid) = identity(&m, &what)?;
        let suite = match m.get("suite_id").filter(|v| !v.is_null()) {
            Some(s) => {
                let s = s
                    .as_i64()
                    .ok_or_else(|| bad(format!("{what}: \"suite_id\" must be a whole number")))?;
                Some(*self.suite_map.get(&s).ok_or_else(|| {
                    bad(format!(
                        "{what} refers to suite {s}, which is not in the file (suites must come before runs)"
                    ))
                })?)
            }
            None => None,
        };
        let parent = match m.get("parent_id").filter(|v| !v.is_null()) {
            Some(p) => {
                let p = p
                    .as_i64()
                    .ok_or_else(|| bad(format!("{what}: \"parent_id\" must be a whole number")))?;
                Some(
                    self.run_map
                        .get(&p)
                        .ok_or_else(|| {
                            bad(format!(
                                "{what} is a leg of run {p}, which is not in the file before it"
                            ))
                        })?
                        .0,
                )
            }
            None => None,
        };
        if let Some(l) = self.find_local("runs", &ob, oid)? {
            self.run_map.insert(fid, (l, false));
            self.sum.runs_present = self.sum.runs_present.saturating_add(1);
            return Ok(());
        }
        check_run(&m, self.now, &what)?;
        let mut row: Vec<(&str, SqlValue)> = Vec::new();
        for c in &self.run_cols {
            let v = match c.name.as_str() {
                "id" => continue,
                "suite_id" => suite.map(SqlValue::Integer).unwrap_or(SqlValue::Null),
                "parent_id" => parent.map(SqlValue::Integer).unwrap_or(SqlValue::Null),
                // Pins are this board's choice, never a file's.
                "pinned" => SqlValue::Integer(0),
                k => match m.get(k) {
                    Some(v) => value("runs", c, v, &what)?,
                    None => continue,
                },
            };
            row.push((&c.name, v));
        }
        let id = insert(self.tx, "runs", &row).map_err(|e| match e {
            StoreError::Sql(e) => bad(format!("{what}: {e}")),
            e => e,
        })?;
        self.run_map.insert(fid, (id, true));
        self.sum.runs_added = self.sum.runs_added.saturating_add(1);
        Ok(())
    }

    fn data_row(&mut self, table: &str, v: Value) -> Result<()> {
        let what = format!("run_data.{table}");
        let m = obj(v, &what)?;
        let fid = int(&m, "run_id", &what)?;
        let Some(&(local, added)) = self.run_map.get(&fid) else {
            return Err(bad(format!(
                "{what} refers to run {fid}, which is not in the file (runs must come before run_data)"
            )));
        };
        if !added {
            return Ok(());
        }
        let Some(cs) = self.data_cols.get(table) else {
            return Err(bad(format!("{what}: this netperfd keeps no such table")));
        };
        let what = format!("{what} of run {fid}");
        let mut row: Vec<(&str, SqlValue)> = Vec::with_capacity(cs.len());
        for c in cs {
            let v = match c.name.as_str() {
                "run_id" => SqlValue::Integer(local),
                k => match m.get(k) {
                    Some(v) => value(table, c, v, &what)?,
                    None => continue,
                },
            };
            row.push((&c.name, v));
        }
        insert(self.tx, table, &row).map_err(|e| match e {
            StoreError::Sql(e) => bad(format!("{what}: {e}")),
            e => e,
        })?;
        Ok(())
    }

    /// Keep `r` as the error that stops the parse.
    fn fail<E: serde::de::Error>(&mut self, e: StoreError) -> E {
        let msg = e.to_string();
        self.err = Some(e);
        E::custom(msg)
    }
}

/// The whole document (an object).
struct Doc<'a, 't, 'c>(&'a mut Importer<'t, 'c>);
/// One list of rows (`suite_defs`, `suites`, `runs`, or a table of `run_data`).
struct Rows<'a, 't, 'c>(&'a mut Importer<'t, 'c>, Part, &'a str);
/// The `run_data` object (table name → list of rows).
struct Data<'a, 't, 'c>(&'a mut Importer<'t, 'c>);

impl<'de> DeserializeSeed<'de> for Doc<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Doc<'_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a netperfd history document (a JSON object)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<(), A::Error> {
        let imp = self.0;
        while let Some(k) = m.next_key::<String>()? {
            let r = match k.as_str() {
                "format" => {
                    let v: Value = m.next_value()?;
                    if v.as_str() != Some(EXPORT_FORMAT) {
                        Err(bad(format!(
                            "not a netperfd history file (\"format\" must be \"{EXPORT_FORMAT}\")"
                        )))
                    } else {
                        imp.format_ok = true;
                        Ok(())
                    }
                }
                "version" => {
                    let v: Value = m.next_value()?;
                    match v.as_i64() {
                        Some(EXPORT_VERSION) => {
                            imp.version_ok = true;
                            Ok(())
                        }
                        Some(v) => Err(bad(format!(
                            "history file version {v} is not supported (this netperfd reads version {EXPORT_VERSION})"
                        ))),
                        None => Err(bad("the history file has no version")),
                    }
                }
                "board" => {
                    let v: BoardHead = m.next_value()?;
                    let long = |t: &Option<String>| {
                        t.as_ref()
                            .is_some_and(|t| t.chars().count() > MAX_BOARD_TEXT)
                    };
                    if long(&v.id) || long(&v.label) {
                        return Err(imp.fail(bad(format!(
                            "the history file's board id or label is longer than {MAX_BOARD_TEXT} characters"
                        ))));
                    }
                    match v.id {
                        Some(id) => {
                            imp.sum.board_id = id;
                            imp.sum.board_label = v.label.unwrap_or_default();
                            imp.board_seen = true;
                            Ok(())
                        }
                        None => Err(bad("the history file names no board id")),
                    }
                }
                "suite_defs" | "suites" | "runs" => {
                    let part = match k.as_str() {
                        "suite_defs" => Part::Defs,
                        "suites" => Part::Suites,
                        _ => Part::Runs,
                    };
                    match imp.header_done(&k) {
                        Ok(()) => m.next_value_seed(Rows(&mut *imp, part, &k))?,
                        Err(e) => return Err(imp.fail(e)),
                    }
                    Ok(())
                }
                "run_data" => {
                    match imp.header_done(&k) {
                        Ok(()) => m.next_value_seed(Data(&mut *imp))?,
                        Err(e) => return Err(imp.fail(e)),
                    }
                    Ok(())
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                    Ok(())
                }
            };
            if let Err(e) = r {
                return Err(imp.fail(e));
            }
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Rows<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Rows<'_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "\"{}\" to be a list", self.2)
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        // null: an empty list.
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> std::result::Result<(), A::Error> {
        let Rows(imp, part, table) = self;
        while let Some(v) = s.next_element::<Value>()? {
            let r = match part {
                Part::Defs => imp.def(v),
                Part::Suites => imp.suite(v),
                Part::Runs => imp.run(v),
                Part::Data => imp.data_row(table, v),
            };
            if let Err(e) = r {
                return Err(imp.fail(e));
            }
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Data<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Data<'_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("\"run_data\" to be an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<(), A::Error> {
        let imp = self.0;
        while let Some(t) = m.next_key::<String>()? {
            if !imp.data_tables.contains(&t) {
                return Err(imp.fail(bad(format!(
                    "run_data.{t}: this netperfd keeps no such table"
                ))));
            }
            m.next_value_seed(Rows(&mut *imp, Part::Data, &t))?;
        }
        Ok(())
    }
}

/// Bytes read so far, and a cap: reading past it is an error (the file is too large).
struct Counted<R> {
    inner: R,
    n: u64,
    max: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n = self.n.saturating_add(k as u64);
        if self.n > self.max {
            return Err(std::io::Error::other(format!(
                "the history file is larger than {} bytes",
                self.max
            )));
        }
        Ok(k)
    }
}

impl Store {
    /// Import a history document (JSON text); see [`Store::import_history_from`].
    ///
    /// # Errors
    /// As [`Store::import_history_from`].
    pub fn import_history(&self, text: &[u8]) -> Result<ImportSummary> {
        self.import_history_from(text, u64::MAX)
    }

    /// Import a history document read from `r` (at most `max_bytes` bytes) as a stream, in
    /// one transaction: either all of it is added or, on any error (not a history file,
    /// another version, a broken reference, a value out of range, too large), nothing
    /// changes. Runs and suite runs already here (same origin) are not added again; suite
    /// definitions whose name exists are left alone. Imported runs are never pinned. After
    /// the commit the retention caps are applied (imported runs pruned first).
    ///
    /// # Errors
    /// [`StoreError::Import`] with a sentence saying what is wrong (nothing was changed);
    /// [`StoreError::Sql`] when the database fails (e.g. the disk is full).
    pub fn import_history_from(&self, r: impl Read, max_bytes: u64) -> Result<ImportSummary> {
        let me = self.board_id()?;
        let sum = {
            let mut c = self.c();
            let tx = c.transaction()?;
            let data_tables = run_tables(&tx)?;
            let mut data_cols = HashMap::new();
            for t in &data_tables {
                data_cols.insert(t.clone(), cols(&tx, t)?);
            }
            let mut imp = Importer {
                me,
                now: now_ms(),
                sum: ImportSummary::default(),
                board_seen: false,
                format_ok: false,
                version_ok: false,
                def_ids: HashMap::new(),
                suite_map: HashMap::new(),
                run_map: HashMap::new(),
                suite_cols: cols(&tx, "suites")?,
                run_cols: cols(&tx, "runs")?,
                data_tables,
                data_cols,
                err: None,
                tx: &tx,
            };
            let reader = std::io::BufReader::with_capacity(
                64 * 1024,
                Counted {
                    inner: r,
                    n: 0,
                    max: max_bytes,
                },
            );
            let mut de = serde_json::Deserializer::from_reader(reader);
            let parsed = Doc(&mut imp).deserialize(&mut de).and_then(|()| de.end());
            if let Some(e) = imp.err.take() {
                return Err(e);
            }
            if let Err(e) = parsed {
                return Err(match e.classify() {
                    serde_json::error::Category::Io => bad(e.to_string()),
                    serde_json::error::Category::Data => {
                        bad(format!("not a netperfd history file: {e}"))
                    }
                    _ => bad(format!("not a JSON document: {e}")),
                });
            }
            if !imp.format_ok {
                return Err(bad(format!(
                    "not a netperfd history file (\"format\" must be \"{EXPORT_FORMAT}\")"
                )));
            }
            if !imp.version_ok {
                return Err(bad("the history file has no version"));
            }
            if !imp.board_seen {
                return Err(bad("the history file names no board id"));
            }
            let sum = std::mem::take(&mut imp.sum);
            drop(imp);
            tx.commit()?;
            sum
        };
        if sum.runs_added > 0 {
            self.prune(self.retention())?;
        }
        Ok(sum)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    fn store(name: &str) -> (Store, std::path::PathBuf) {
        let d = crate::scratch::dir(name);
        let _ = std::fs::remove_dir_all(&d);
        (Store::open_dir(&d).unwrap(), d)
    }

    /// A history file of `n` runs from board `b` starting at `t0` (Unix ms), each with one interval.
    pub(crate) fn file(b: &str, n: i64, t0: i64) -> Value {
        let runs: Vec<Value> = (1..=n)
            .map(|i| {
                json!({"id": i, "role": "client", "protocol": "TCP", "status": "completed",
                    "peer_host": "192.0.2.9", "peer_port": 5201, "direction": "send",
                    "params_json": "{}", "started_at": t0 + i, "ended_at": t0 + i + 1000,
                    "kind": "iperf3", "origin_board": b, "origin_id": i, "origin_label": "far"})
            })
            .collect();
        let iv: Vec<Value> = (1..=n)
            .map(|i| {
                json!({"run_id": i, "seq": 0, "stream_id": 1, "socket": 5, "start": 0.0, "end": 1.0,
                    "bytes": 1000, "bits_per_second": 8000.0, "sender": 1, "omitted": 0})
            })
            .collect();
        json!({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "board": {"id": b, "label": "far"},
            "runs": runs, "run_data": {"intervals": iv}})
    }

    #[test]
    fn every_field_is_checked_and_a_bad_file_changes_nothing() {
        let (s, d) = store("import-check");
        let now = now_ms();
        let good = file("ab", 3, now - 100_000);
        assert_eq!(
            s.import_history(good.to_string().as_bytes())
                .unwrap()
                .runs_added,
            3
        );
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|f| f["runs"][1]["started_at"] = json!(4_102_444_800_000i64)),
                "is in the future",
            ),
            (
                Box::new(|f| f["runs"][0]["started_at"] = json!(1000)),
                "before 2000-01-01",
            ),
            (
                Box::new(|f| f["runs"][0]["peer_port"] = json!(-5)),
                "\"peer_port\" must be 0 to 65535, got -5",
            ),
            (
                Box::new(|f| f["runs"][0]["status"] = json!("running")),
                "only ended runs",
            ),
            (
                Box::new(|f| f["runs"][0]["kind"] = json!("warp")),
                "not one this netperfd knows",
            ),
            (
                Box::new(|f| f["runs"][0]["report_json"] = json!("{not json")),
                "report_json",
            ),
            (
                Box::new(|f| f["runs"][0]["params_json"] = json!("[1]")),
                "params_json",
            ),
            (
                Box::new(|f| f["runs"][0]["bytes"] = json!("many")),
                "\"bytes\" must be a whole number",
            ),
            // Issue 37's tryout: 24 MB of `{"x":[[],[],…]}` cost 1.2 GB on every read.
            (
                Box::new(|f| {
                    f["runs"][0]["params_json"] =
                        json!(format!("{{\"x\":[{}[]]}}", "[],".repeat(30_000)))
                }),
                "\"params_json\" is 90010 bytes, more than the 65536 this netperfd keeps",
            ),
            (
                Box::new(|f| f["runs"][0]["summary_json"] = json!(" ".repeat(1024 * 1024 + 1))),
                "\"summary_json\" is 1048577 bytes, more than the 1048576",
            ),
            // A board of many empty arrays was read whole (726 MB for 30 MB): now refused at
            // its first element, and an overlong label is refused.
            (
                Box::new(|f| f["board"] = json!(vec![json!([]); 1000])),
                "invalid type",
            ),
            (
                Box::new(|f| f["board"]["label"] = json!("l".repeat(201))),
                "longer than 200 characters",
            ),
            (
                Box::new(|f| f["run_data"]["intervals"][2]["stream_id"] = json!(-1)),
                "stream_id",
            ),
            (
                Box::new(|f| f["run_data"]["intervals"][2]["bits_per_second"] = json!("x")),
                "must be a number",
            ),
        ];
        for (i, (edit, want)) in cases.iter().enumerate() {
            let mut f = file(&format!("cd{i}"), 3, now - 100_000);
            edit(&mut f);
            let e = s
                .import_history(f.to_string().as_bytes())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "case {i}: {e}");
            assert_eq!(s.list_runs(&Default::default()).unwrap().len(), 3, "{e}");
        }
        // A pin in the file is ignored.
        let mut f = file("ef", 1, now - 100_000);
        f["runs"][0]["pinned"] = json!(1);
        s.import_history(f.to_string().as_bytes()).unwrap();
        let id = s.list_runs(&Default::default()).unwrap()[0].id;
        assert_eq!(s.is_pinned(id).unwrap(), Some(false));
        // Over the byte cap: refused.
        let text = file("gh", 50, now - 100_000).to_string();
        let e = s
            .import_history_from(text.as_bytes(), 1000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than 1000 bytes"), "{e}");
        assert_eq!(s.list_runs(&Default::default()).unwrap().len(), 4);
        let _ = std::fs::remove_dir_all(d);
    }
}
