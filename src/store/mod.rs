//! SQLite history: runs, their streams and intervals, settings, web sessions and API tokens.
//! WAL mode, versioned migrations (rusqlite_migration). Every interval is written when it
//! arrives, so what the UI shows survives a power cut. Times are Unix milliseconds.
//! Not for: deciding what to run (daemon) or how to show it (web).

use crate::engine::report::{IntervalRecord, Report};
use crate::model::time::now_ms;
use crate::model::{RunDirection, RunFigures, RunKind, RunProtocol, RunRole, RunStatus};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OptionalExtension};
use rusqlite_migration::{Migrations, M};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod board;
mod fleet;
mod import;
mod latency;
mod retention;
mod samples;
mod suite_defs;
mod transfer;
mod words;
pub use board::BoardLogRow;
pub use fleet::{NewSchedule, Origin, RunCount, ScheduleRow};
pub use import::{MAX_SKEW_MS, MIN_TIME_MS};
pub use latency::LatencySampleRow;
pub use retention::{Retention, DEFAULT_MAX_BYTES, DEFAULT_MAX_RUNS};
pub use samples::{CpuSampleRow, PortSampleRow, SysSampleRow};
pub use suite_defs::{SuiteDefRow, SuiteExtra};
pub use transfer::{ImportSummary, EXPORT_FORMAT, EXPORT_VERSION};

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("database migration failed: {0}")]
    Migration(#[from] rusqlite_migration::Error),
    #[error("cannot create data directory {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    #[error("stored JSON is invalid: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no OS random source: {0}")]
    Random(String),
    /// A history file refused on import (nothing was changed).
    #[error("{0}")]
    Import(String),
    /// Writing a streamed answer failed (e.g. the client went away).
    #[error("cannot write: {0}")]
    Io(String),
    /// A filter the caller gave is malformed (e.g. a date); the text says which and why.
    #[error("{0}")]
    Invalid(String),
}

impl StoreError {
    /// Whether the write failed because the data partition is full: SQLite's own code for it
    /// (`SQLITE_FULL`, "database or disk is full"), or the OS's `ENOSPC` ("No space left on
    /// device", `io::ErrorKind::StorageFull`) where the store made its directory itself.
    /// Decided by the error codes, never by the words of a message.
    pub fn is_disk_full(&self) -> bool {
        fn io_full(e: &std::io::Error) -> bool {
            e.kind() == std::io::ErrorKind::StorageFull
        }
        fn sql_full(e: &rusqlite::Error) -> bool {
            e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
        }
        match self {
            StoreError::Sql(e) => sql_full(e),
            StoreError::Migration(rusqlite_migration::Error::RusqliteError { err, .. }) => {
                sql_full(err)
            }
            StoreError::Dir(_, e) => io_full(e),
            _ => false,
        }
    }
}

type Result<T> = std::result::Result<T, StoreError>;

/// Migration 1: runs with their streams and intervals, settings, sessions, API tokens.
const BASE_MIGRATION: &str = r#"
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    role TEXT NOT NULL CHECK (role IN ('client','server')),
    protocol TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running','completed','failed','aborted')),
    peer_host TEXT NOT NULL,
    peer_port INTEGER NOT NULL,
    local_host TEXT NOT NULL DEFAULT '',
    local_port INTEGER NOT NULL DEFAULT 0,
    bind_dev TEXT,
    direction TEXT NOT NULL,
    params_json TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    error TEXT,
    sender_bps REAL,
    receiver_bps REAL,
    bytes INTEGER,
    retransmits INTEGER,
    report_json TEXT
);
CREATE INDEX runs_started ON runs(started_at DESC);
CREATE TABLE streams (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    stream_id INTEGER NOT NULL,
    socket INTEGER NOT NULL,
    local_sender INTEGER NOT NULL,
    sender_bytes INTEGER NOT NULL,
    sender_seconds REAL NOT NULL,
    receiver_bytes INTEGER,
    receiver_seconds REAL,
    retransmits INTEGER NOT NULL,
    max_snd_cwnd INTEGER NOT NULL,
    min_rtt INTEGER NOT NULL,
    mean_rtt INTEGER NOT NULL,
    max_rtt INTEGER NOT NULL,
    PRIMARY KEY (run_id, stream_id)
);
CREATE TABLE intervals (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    stream_id INTEGER NOT NULL,
    socket INTEGER NOT NULL,
    start REAL NOT NULL,
    end REAL NOT NULL,
    bytes INTEGER NOT NULL,
    bits_per_second REAL NOT NULL,
    sender INTEGER NOT NULL,
    omitted INTEGER NOT NULL,
    retransmits INTEGER,
    snd_cwnd INTEGER,
    rtt INTEGER,
    PRIMARY KEY (run_id, seq, stream_id)
);
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    csrf TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
"#;

/// Migration 2: UDP figures (datagrams, loss, jitter) and suites (e.g. the UDP ladder).
const UDP_SUITES_MIGRATION: &str = r#"
CREATE TABLE suites (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    peer_host TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running','completed','failed','aborted')),
    created_at INTEGER NOT NULL,
    ended_at INTEGER
);
ALTER TABLE runs ADD COLUMN suite_id INTEGER REFERENCES suites(id) ON DELETE SET NULL;
ALTER TABLE runs ADD COLUMN lost_packets INTEGER;
ALTER TABLE runs ADD COLUMN total_packets INTEGER;
ALTER TABLE runs ADD COLUMN lost_percent REAL;
ALTER TABLE runs ADD COLUMN jitter_ms REAL;
ALTER TABLE intervals ADD COLUMN packets INTEGER;
ALTER TABLE intervals ADD COLUMN lost INTEGER;
ALTER TABLE intervals ADD COLUMN jitter_ms REAL;
ALTER TABLE intervals ADD COLUMN out_of_order INTEGER;
"#;

fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(BASE_MIGRATION),
        // 2: UDP figures (datagrams, loss, jitter) and suites (e.g. the UDP ladder).
        M::up(UDP_SUITES_MIGRATION),
        // 3: board control (system::apply): confirmed network config, change log, run net config.
        M::up(board::BOARD_MIGRATION),
        // 4: run kinds beyond iperf3 (legs of multi-port runs, forwarding, monitor-only, HTTP,
        // raw TCP, iperf 2) and the 1 Hz monitor samples (CPU per core, port counters).
        M::up(samples::SAMPLES_MIGRATION),
        // 5: saved suite definitions; suite runs keep their definition, label and plan.
        M::up(suite_defs::SUITE_DEFS_MIGRATION),
        // 6: a pin flag on runs for history retention (pinned runs are never pruned).
        M::up(retention::RETENTION_MIGRATION),
        // 7: fleets: scheduled suite runs, the board id, where imported runs came from.
        M::up(fleet::FLEET_MIGRATION),
        // 8: probe samples of latency-under-load runs.
        M::up(latency::LATENCY_MIGRATION),
        // 9: API token scopes (read, run, admin); tokens made before keep what they could do.
        M::up("ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'admin';"),
        // 10: the board's counters over each run and its loss ledger (JSON).
        M::up(board::RUN_BOARD_MIGRATION),
    ])
}

/// A run as listed in history.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunRow {
    pub id: i64,
    /// Client (the board ran the test) or server (a peer ran it against the board).
    pub role: RunRole,
    /// TCP, UDP, …; stored as its word (see [`RunProtocol`]).
    pub protocol: RunProtocol,
    /// Running / completed / failed / aborted.
    pub status: RunStatus,
    pub peer_host: String,
    pub peer_port: u16,
    /// The board's address of the control connection, and its port.
    pub local_host: String,
    pub local_port: u16,
    pub bind_dev: Option<String>,
    /// From the board's view: send / receive / bidir (see [`RunDirection`]).
    pub direction: RunDirection,
    /// The iperf3 parameters (as `Params`).
    pub params: serde_json::Value,
    /// Unix ms.
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub error: Option<String>,
    /// Sender bitrate of the main direction, bits/s.
    pub sender_bps: Option<f64>,
    /// Receiver bitrate of the main direction (goodput), bits/s.
    pub receiver_bps: Option<f64>,
    /// Bytes received in the main direction.
    pub bytes: Option<i64>,
    pub retransmits: Option<i64>,
    /// UDP: datagrams lost and total (the sender's count when known), loss %, jitter ms.
    pub lost_packets: Option<i64>,
    pub total_packets: Option<i64>,
    pub lost_percent: Option<f64>,
    pub jitter_ms: Option<f64>,
    /// The suite this run belongs to, if any.
    pub suite_id: Option<i64>,
    /// What ran (stored as its word: iperf3, iperf2, multi, …; see [`RunKind`]).
    pub kind: RunKind,
    /// The multi-port run this run is a leg of.
    pub parent_id: Option<i64>,
    /// Kind-specific result (JSON object) for runs that have no iperf3 report; `Null` if none.
    pub summary: serde_json::Value,
    /// Stored fields that could not be read (out of range, wrong type, JSON that does not
    /// parse), by column name; they are shown empty (0, null) and the run is listed all the
    /// same. Empty for every run this netperfd wrote.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

/// A suite: several runs started together as one job (e.g. the UDP ladder).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SuiteRow {
    pub id: i64,
    /// e.g. "udp-ladder".
    pub name: String,
    pub peer_host: String,
    /// running, then completed / failed / aborted (the `suites.status` column's words).
    pub status: RunStatus,
    /// Unix ms.
    pub created_at: i64,
    pub ended_at: Option<i64>,
}

/// A stream's final figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StreamRow {
    pub stream_id: u32,
    pub socket: i32,
    pub local_sender: bool,
    pub sender_bytes: i64,
    pub sender_seconds: f64,
    pub receiver_bytes: Option<i64>,
    pub receiver_seconds: Option<f64>,
    pub retransmits: i64,
    pub max_snd_cwnd: i64,
    pub min_rtt: i64,
    pub mean_rtt: i64,
    pub max_rtt: i64,
}

/// One stream in one interval.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IntervalRow {
    pub seq: i64,
    pub stream_id: u32,
    pub socket: i32,
    pub start: f64,
    pub end: f64,
    pub bytes: i64,
    pub bits_per_second: f64,
    pub sender: bool,
    pub omitted: bool,
    pub retransmits: Option<i64>,
    pub snd_cwnd: Option<i64>,
    pub rtt: Option<i64>,
    /// UDP: datagrams (sent, or expected by the receiver), lost, jitter (ms), out of order.
    pub packets: Option<i64>,
    pub lost: Option<i64>,
    pub jitter_ms: Option<f64>,
    pub out_of_order: Option<i64>,
}

impl IntervalRow {
    /// The UDP figures as the engine reports them, if this is a UDP interval.
    pub fn udp_sample(&self) -> Option<crate::engine::report::UdpSample> {
        self.packets.map(|p| crate::engine::report::UdpSample {
            packets: p.max(0) as u64,
            lost: self.lost.unwrap_or(0).max(0) as u64,
            jitter_ms: self.jitter_ms.unwrap_or(0.0),
            out_of_order: self.out_of_order.unwrap_or(0).max(0) as u64,
            latency: None,
        })
    }
}

/// What a new run starts with.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub role: RunRole,
    pub protocol: RunProtocol,
    pub peer_host: String,
    pub peer_port: u16,
    pub local_host: String,
    pub local_port: u16,
    pub bind_dev: Option<String>,
    pub direction: RunDirection,
    pub params: serde_json::Value,
    /// The suite this run belongs to.
    pub suite_id: Option<i64>,
    /// What runs (default iperf3).
    pub kind: RunKind,
    /// The multi-port run this run is a leg of.
    pub parent_id: Option<i64>,
}

/// History filters (all optional; `peer` and `port` match substrings).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct RunFilter {
    pub status: Option<String>,
    pub peer: Option<String>,
    /// A local address or bound device (the board's port).
    pub port: Option<String>,
    /// The addresses of the port `port` names (filled by the caller from the board's ports):
    /// a run that bound no device (iperf 2, a peer's run against the board, a sink, a run
    /// started through the API without `bind`) matches by the address it used.
    #[serde(skip)]
    pub port_addrs: Vec<String>,
    /// A kind's stored word (iperf3, iperf2, multi, forward, …).
    pub kind: Option<String>,
    /// Only runs started on or after this day (YYYY-MM-DD, UTC).
    pub from: Option<String>,
    /// Only runs started on or before this day (YYYY-MM-DD, UTC; the whole day counts).
    pub to: Option<String>,
    /// Paging: only runs with an id below this one (the last id of the page before).
    pub before: Option<i64>,
    pub limit: Option<u32>,
}

/// A web session.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub csrf: String,
    pub expires_at: i64,
}

/// An API token as listed (the token itself is never stored, only its SHA-256).
#[derive(Debug, Clone, Serialize)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    pub created_at: i64,
    /// What the token may do: "read", "run" or "admin" (see `web::auth::Scope`).
    pub scope: String,
}

/// How many read-only connections serve reads (pages, API, exports) beside the one writer.
const READERS: usize = 3;

/// The database handle: one writer connection behind a mutex (every write is short) and a
/// few read-only connections, so that pages and the API read (WAL: readers never wait for the
/// writer) while a run writes its intervals and samples.
pub struct Store {
    conn: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    path: PathBuf,
}

/// A run's row, never failing on a bad value: a field that cannot be read (e.g. a port of
/// -5, text in a number column, JSON that does not parse) is shown empty and named in
/// [`RunRow::invalid`]. Only a row without an id fails.
pub(crate) fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    let mut c = Cells {
        r,
        invalid: Vec::new(),
        bad: Vec::new(),
    };
    let id: i64 = r.get("id")?;
    let params = c.text("params_json");
    let params = match serde_json::from_str(&params) {
        Ok(v) => v,
        Err(_) => {
            c.bad.push("params_json");
            serde_json::Value::Null
        }
    };
    // A closed word (kind, status, role) this netperfd does not know is named in `invalid`
    // and shown as its default (an unreadable status as failed: not a result to trust);
    // protocol and direction keep any word (`Other`).
    let kind = c.word("kind", RunKind::parse, RunKind::default());
    let summary = match c.opt_text("summary_json") {
        None => serde_json::Value::Null,
        Some(s) => serde_json::from_str(&s).unwrap_or_else(|_| {
            c.bad.push("summary_json");
            serde_json::Value::Null
        }),
    };
    let mut row = RunRow {
        id,
        role: c.word("role", RunRole::parse, RunRole::Client),
        protocol: RunProtocol::parse(&c.text("protocol")),
        status: c.word("status", RunStatus::parse, RunStatus::Failed),
        peer_host: c.text("peer_host"),
        peer_port: c.int("peer_port"),
        local_host: c.text("local_host"),
        local_port: c.int("local_port"),
        bind_dev: c.opt_text("bind_dev"),
        direction: RunDirection::parse(&c.text("direction")),
        params,
        started_at: c.int("started_at"),
        ended_at: c.opt_int("ended_at"),
        error: c.opt_text("error"),
        sender_bps: c.opt_real("sender_bps"),
        receiver_bps: c.opt_real("receiver_bps"),
        bytes: c.opt_int("bytes"),
        retransmits: c.opt_int("retransmits"),
        lost_packets: c.opt_int("lost_packets"),
        total_packets: c.opt_int("total_packets"),
        lost_percent: c.opt_real("lost_percent"),
        jitter_ms: c.opt_real("jitter_ms"),
        suite_id: c.opt_int("suite_id"),
        kind,
        parent_id: c.opt_int("parent_id"),
        summary,
        invalid: Vec::new(),
    };
    let Cells {
        mut invalid, bad, ..
    } = c;
    for b in bad {
        if !invalid.iter().any(|i| i == b) {
            invalid.push(b.to_string());
        }
    }
    row.invalid = invalid;
    Ok(row)
}

/// Reads the cells of a run's row for [`run_from_row`], an empty value for each that cannot
/// be read or does not fit, noting its column.
struct Cells<'a, 'r> {
    r: &'a rusqlite::Row<'r>,
    /// Columns that could not be read.
    invalid: Vec<String>,
    /// Columns whose value does not fit.
    bad: Vec<&'static str>,
}

impl Cells<'_, '_> {
    /// The column's value, `None` (noted) when it cannot be read.
    fn get(&mut self, name: &str) -> Option<rusqlite::types::Value> {
        match self.r.get::<_, rusqlite::types::Value>(name) {
            Ok(v) => Some(v),
            Err(_) => {
                self.invalid.push(name.to_string());
                None
            }
        }
    }

    /// A required integer of type `T` (0 when missing or out of range).
    fn int<T: TryFrom<i64> + Default>(&mut self, name: &'static str) -> T {
        match self.get(name) {
            Some(SqlValue::Integer(i)) => T::try_from(i).unwrap_or_else(|_| {
                self.bad.push(name);
                T::default()
            }),
            _ => {
                self.bad.push(name);
                T::default()
            }
        }
    }

    /// An integer or NULL.
    fn opt_int(&mut self, name: &'static str) -> Option<i64> {
        match self.get(name) {
            Some(SqlValue::Integer(i)) => Some(i),
            Some(SqlValue::Null) => None,
            _ => {
                self.bad.push(name);
                None
            }
        }
    }

    /// A number (real or integer) or NULL.
    fn opt_real(&mut self, name: &'static str) -> Option<f64> {
        match self.get(name) {
            Some(SqlValue::Real(f)) => Some(f),
            Some(SqlValue::Integer(i)) => Some(i as f64),
            Some(SqlValue::Null) => None,
            _ => {
                self.bad.push(name);
                None
            }
        }
    }

    /// Required text (empty when missing).
    fn text(&mut self, name: &'static str) -> String {
        match self.get(name) {
            Some(SqlValue::Text(t)) => t,
            _ => {
                self.bad.push(name);
                String::new()
            }
        }
    }

    /// Text or NULL.
    fn opt_text(&mut self, name: &'static str) -> Option<String> {
        match self.get(name) {
            Some(SqlValue::Text(t)) => Some(t),
            Some(SqlValue::Null) => None,
            _ => {
                self.bad.push(name);
                None
            }
        }
    }

    /// A closed word read with `parse`; `or` (noted) when it is not one this netperfd knows.
    fn word<T>(&mut self, name: &'static str, parse: impl Fn(&str) -> Option<T>, or: T) -> T {
        let w = self.text(name);
        parse(&w).unwrap_or_else(|| {
            self.bad.push(name);
            or
        })
    }
}

/// Rows of a query, skipping (with a warning) those holding a value that does not fit its
/// field (wrong type, out of range), so one bad stored row never fails a whole page; other
/// errors (the database's) still fail.
pub(crate) fn readable<T>(
    what: &str,
    rows: impl Iterator<Item = rusqlite::Result<T>>,
) -> rusqlite::Result<Vec<T>> {
    let mut out = Vec::new();
    let mut skipped = 0u64;
    for r in rows {
        match r {
            Ok(v) => out.push(v),
            Err(
                rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
                | rusqlite::Error::InvalidColumnType(..),
            ) => skipped += 1,
            Err(e) => return Err(e),
        }
    }
    if skipped > 0 {
        tracing::warn!(
            skipped,
            "{what}: stored rows with invalid values were left out"
        );
    }
    Ok(out)
}

const INTERVAL_COLS: &str = "seq, stream_id, socket, start, end, bytes, bits_per_second, sender, omitted, retransmits, snd_cwnd, rtt, packets, lost, jitter_ms, out_of_order";

fn interval_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IntervalRow> {
    Ok(IntervalRow {
        seq: r.get(0)?,
        stream_id: r.get(1)?,
        socket: r.get(2)?,
        start: r.get(3)?,
        end: r.get(4)?,
        bytes: r.get(5)?,
        bits_per_second: r.get(6)?,
        sender: r.get(7)?,
        omitted: r.get(8)?,
        retransmits: r.get(9)?,
        snd_cwnd: r.get(10)?,
        rtt: r.get(11)?,
        packets: r.get(12)?,
        lost: r.get(13)?,
        jitter_ms: r.get(14)?,
        out_of_order: r.get(15)?,
    })
}

pub(crate) const RUN_COLS: &str = "id, role, protocol, status, peer_host, peer_port, local_host, local_port, bind_dev, direction, params_json, started_at, ended_at, error, sender_bps, receiver_bps, bytes, retransmits, lost_packets, total_packets, lost_percent, jitter_ms, suite_id, kind, parent_id, summary_json";

/// The bundled SQLite as this binary was built: its version (`sqlite_version()`) and its
/// compile options (`PRAGMA compile_options`, e.g. `THREADSAFE=1`, without the `SQLITE_`
/// prefix), for `netperfd build-info` and the build checks (scripts/check-build-envs.py).
/// Errors: SQLite cannot open an in-memory database or run the queries (message text).
pub fn sqlite_build_info() -> std::result::Result<(String, Vec<String>), String> {
    let db = Connection::open_in_memory().map_err(|e| e.to_string())?;
    let version: String = db
        .query_row("SELECT sqlite_version()", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    let mut stmt = db
        .prepare("PRAGMA compile_options")
        .map_err(|e| e.to_string())?;
    let options = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(|e| e.to_string())?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok((version, options))
}

impl Store {
    /// Open (creating if needed) `dir/netperfd.sqlite`, migrate it, and enable WAL.
    pub fn open_dir(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Dir(dir.to_path_buf(), e))?;
        Store::open(&dir.join("netperfd.sqlite"))
    }

    /// Open `dir/netperfd.sqlite` for reading only (every write fails with SQLite's "attempt
    /// to write a readonly database"): the daemon's fallback when [`Store::open_dir`] cannot
    /// write (e.g. a full data partition). Errors: the file is missing or unreadable, or its
    /// schema is not this version's (a migration would have to write).
    pub fn open_dir_read_only(dir: &Path) -> Result<Store> {
        let path = dir.join("netperfd.sqlite");
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let pending = migrations().pending_migrations(&conn)?;
        if pending != 0 {
            return Err(StoreError::Invalid(format!(
                "the history in {} is not of this netperfd's schema ({pending} migration(s) apart): it cannot be opened read-only",
                path.display()
            )));
        }
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let r = Connection::open_with_flags(&path, flags)?;
            r.busy_timeout(std::time::Duration::from_secs(5))?;
            readers.push(Mutex::new(r));
        }
        Ok(Store {
            conn: Mutex::new(conn),
            readers,
            path,
        })
    }

    /// Open a database file.
    pub fn open(path: &Path) -> Result<Store> {
        let mut conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        migrations().to_latest(&mut conn)?;
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let r = Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            r.busy_timeout(std::time::Duration::from_secs(5))?;
            readers.push(Mutex::new(r));
        }
        Ok(Store {
            conn: Mutex::new(conn),
            readers,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A read-only connection: the first one free, else (all busy) the first one.
    fn r(&self) -> std::sync::MutexGuard<'_, Connection> {
        for m in &self.readers {
            match m.try_lock() {
                Ok(g) => return g,
                Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
        match self.readers[0].lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn c(&self) -> std::sync::MutexGuard<'_, Connection> {
        match self.conn.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Mark runs left 'running' by a previous process as aborted; returns how many.
    pub fn abort_stale_runs(&self) -> Result<usize> {
        self.abort_runs_started_before(i64::MAX)
    }

    /// [`Store::abort_stale_runs`] for runs started before `t` (Unix ms) only: the daemon
    /// passes its start time, so a retry after a failed write (e.g. a full disk) never ends
    /// a run this process started. Returns how many.
    pub fn abort_runs_started_before(&self, t: i64) -> Result<usize> {
        Ok(self.c().execute(
            "UPDATE runs SET status='aborted', ended_at=?1, error='netperfd stopped while the run was active' WHERE status='running' AND started_at < ?2",
            params![now_ms(), t],
        )?)
    }

    /// Record a new run in state 'running'; returns its id.
    pub fn create_run(&self, n: &NewRun) -> Result<i64> {
        let c = self.c();
        c.execute(
            "INSERT INTO runs (role, protocol, status, peer_host, peer_port, local_host, local_port, bind_dev, direction, params_json, started_at, suite_id, kind, parent_id)
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![n.role, n.protocol, n.peer_host, n.peer_port, n.local_host, n.local_port, n.bind_dev, n.direction,
                serde_json::to_string(&n.params)?, now_ms(), n.suite_id,
                n.kind, n.parent_id],
        )?;
        let id = c.last_insert_rowid();
        drop(c);
        self.maybe_prune(id);
        Ok(id)
    }

    /// The least write that ends a run: its status, end time and error only (no report, no
    /// streams), for when the full [`Store::finish_run`] cannot be written (e.g. the disk is
    /// full: this changes one existing row and needs almost no new space). Only a run still
    /// marked running is changed; returns whether one was.
    /// `ended_at`: when the run ended, ms since the epoch (a retry stores the real end, not
    /// the time of the retry).
    pub fn mark_ended(
        &self,
        id: i64,
        status: RunStatus,
        error: Option<&str>,
        ended_at: i64,
    ) -> Result<bool> {
        Ok(self.c().execute(
            "UPDATE runs SET status=?2, ended_at=?3, error=COALESCE(?4, error) WHERE id=?1 AND status='running'",
            params![id, status.as_str(), ended_at, error],
        )? > 0)
    }

    /// Update the addresses of a run once the connection is up.
    pub fn set_run_endpoints(&self, id: i64, local_host: &str, local_port: u16) -> Result<()> {
        self.c().execute(
            "UPDATE runs SET local_host=?2, local_port=?3 WHERE id=?1",
            params![id, local_host, local_port],
        )?;
        Ok(())
    }

    /// Store one interval (sequence number `seq` within the run).
    pub fn add_interval(&self, run_id: i64, seq: i64, rec: &IntervalRecord) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT OR REPLACE INTO intervals (run_id, seq, stream_id, socket, start, end, bytes, bits_per_second, sender, omitted, retransmits, snd_cwnd, rtt, packets, lost, jitter_ms, out_of_order)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            )?;
            for s in &rec.streams {
                st.execute(params![
                    run_id,
                    seq,
                    s.id,
                    s.socket,
                    s.start,
                    s.end,
                    s.bytes as i64,
                    s.bits_per_second,
                    s.sender,
                    s.omitted,
                    s.tcp.map(|t| t.retransmits as i64),
                    s.tcp.map(|t| t.snd_cwnd as i64),
                    s.tcp.map(|t| t.rtt as i64),
                    s.udp.map(|u| u.packets as i64),
                    s.udp.filter(|_| !s.sender).map(|u| u.lost as i64),
                    s.udp.filter(|_| !s.sender).map(|u| u.jitter_ms),
                    s.udp.filter(|_| !s.sender).map(|u| u.out_of_order as i64),
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Close a run now: [`Store::finish_run_at`] with the current time.
    pub fn finish_run(
        &self,
        id: i64,
        status: RunStatus,
        report: Option<&Report>,
        f: &RunFigures,
        error: Option<&str>,
    ) -> Result<()> {
        self.finish_run_at(id, status, report, f, error, now_ms())
    }

    /// Close a run: status, error text, and (when there is one) the final report with its
    /// per-stream summaries; `ended_at` ms since the epoch (when the run ended: a retry after
    /// a full disk stores the real end, not the time of the retry).
    pub(crate) fn finish_run_at(
        &self,
        id: i64,
        status: RunStatus,
        report: Option<&Report>,
        f: &RunFigures,
        error: Option<&str>,
        ended_at: i64,
    ) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        if let Some(r) = report {
            tx.execute("DELETE FROM streams WHERE run_id=?1", params![id])?;
            for s in &r.streams {
                tx.execute(
                    "INSERT INTO streams (run_id, stream_id, socket, local_sender, sender_bytes, sender_seconds, receiver_bytes, receiver_seconds, retransmits, max_snd_cwnd, min_rtt, mean_rtt, max_rtt)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    params![id, s.id, s.socket, s.local_sender, s.sender.bytes as i64, s.sender.seconds,
                        s.receiver.map(|x| x.bytes as i64), s.receiver.map(|x| x.seconds), s.retransmits,
                        s.max_snd_cwnd as i64, s.min_rtt, s.mean_rtt, s.max_rtt],
                )?;
            }
        }
        let report_json = match report {
            Some(r) => Some(serde_json::to_string(r)?),
            None => None,
        };
        tx.execute(
            "UPDATE runs SET status=?2, ended_at=?3, error=?4, sender_bps=?5, receiver_bps=?6, bytes=?7, retransmits=?8, report_json=COALESCE(?9, report_json),
                 lost_packets=?10, total_packets=?11, lost_percent=?12, jitter_ms=?13 WHERE id=?1",
            params![id, status.as_str(), ended_at, error, f.sender_bps, f.receiver_bps, f.bytes, f.retransmits, report_json,
                f.lost_packets, f.total_packets, f.lost_percent, f.jitter_ms],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Runs, newest first, filtered.
    pub fn list_runs(&self, f: &RunFilter) -> Result<Vec<RunRow>> {
        let c = self.r();
        let mut sql = format!("SELECT {RUN_COLS} FROM runs WHERE 1=1");
        let mut args: Vec<String> = Vec::new();
        if let Some(s) = f.status.as_deref().filter(|s| !s.is_empty()) {
            args.push(s.to_string());
            sql.push_str(&format!(" AND status = ?{}", args.len()));
        }
        if let Some(p) = f.peer.as_deref().filter(|s| !s.is_empty()) {
            args.push(format!("%{p}%"));
            sql.push_str(&format!(" AND peer_host LIKE ?{}", args.len()));
        }
        if let Some(p) = f.port.as_deref().filter(|s| !s.is_empty()) {
            args.push(format!("%{p}%"));
            let n = args.len();
            let mut any = format!(
                "local_host LIKE ?{n} OR bind_dev LIKE ?{n} OR CAST(local_port AS TEXT) LIKE ?{n}"
            );
            for a in &f.port_addrs {
                args.push(a.clone());
                any.push_str(&format!(" OR local_host = ?{}", args.len()));
            }
            sql.push_str(&format!(" AND ({any})"));
        }
        if let Some(k) = f.kind.as_deref().filter(|s| !s.is_empty()) {
            args.push(k.to_string());
            sql.push_str(&format!(" AND kind = ?{}", args.len()));
        }
        let day = |d: &str| crate::model::time::parse_day(d).map_err(StoreError::Invalid);
        if let Some(d) = f.from.as_deref().filter(|s| !s.trim().is_empty()) {
            sql.push_str(&format!(" AND started_at >= {}", day(d)?));
        }
        if let Some(d) = f.to.as_deref().filter(|s| !s.trim().is_empty()) {
            let end = day(d)? + crate::model::time::DAY_MS;
            sql.push_str(&format!(" AND started_at < {end}"));
        }
        if let Some(b) = f.before {
            sql.push_str(&format!(" AND id < {b}"));
        }
        sql.push_str(&format!(
            " ORDER BY id DESC LIMIT {}",
            f.limit.unwrap_or(500).min(5000)
        ));
        let mut st = c.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(args.iter()), run_from_row)?;
        Ok(readable("runs", rows)?)
    }

    /// One run (its stored report, when it does not parse, is named in `invalid`).
    pub fn get_run(&self, id: i64) -> Result<Option<RunRow>> {
        let c = self.r();
        let mut run = c
            .query_row(
                &format!("SELECT {RUN_COLS} FROM runs WHERE id=?1"),
                params![id],
                run_from_row,
            )
            .optional()?;
        if let Some(run) = run.as_mut() {
            let rep: Option<String> = c
                .query_row(
                    "SELECT report_json FROM runs WHERE id=?1",
                    params![id],
                    |r| r.get::<_, rusqlite::types::Value>(0),
                )
                .map(|v| match v {
                    rusqlite::types::Value::Text(t) => Some(t),
                    rusqlite::types::Value::Null => None,
                    _ => Some(String::new()),
                })?;
            if rep.is_some_and(|t| serde_json::from_str::<Report>(&t).is_err()) {
                run.invalid.push("report_json".into());
            }
        }
        Ok(run)
    }

    /// The stored final report of a run, if it has one.
    pub fn report(&self, id: i64) -> Result<Option<Report>> {
        let c = self.r();
        let j: Option<Option<String>> = c
            .query_row(
                "SELECT report_json FROM runs WHERE id=?1",
                params![id],
                |r| r.get(0),
            )
            .optional()?;
        match j.flatten() {
            Some(s) => match serde_json::from_str(&s) {
                Ok(r) => Ok(Some(r)),
                Err(e) => {
                    // Shown as a run without a report (get_run marks the field invalid).
                    tracing::warn!(run = id, "stored report does not parse: {e}");
                    Ok(None)
                }
            },
            None => Ok(None),
        }
    }

    /// A run's streams.
    pub fn streams(&self, id: i64) -> Result<Vec<StreamRow>> {
        let c = self.r();
        let mut st = c.prepare(
            "SELECT stream_id, socket, local_sender, sender_bytes, sender_seconds, receiver_bytes, receiver_seconds, retransmits, max_snd_cwnd, min_rtt, mean_rtt, max_rtt FROM streams WHERE run_id=?1 ORDER BY stream_id",
        )?;
        let rows = st.query_map(params![id], |r| {
            Ok(StreamRow {
                stream_id: r.get(0)?,
                socket: r.get(1)?,
                local_sender: r.get(2)?,
                sender_bytes: r.get(3)?,
                sender_seconds: r.get(4)?,
                receiver_bytes: r.get(5)?,
                receiver_seconds: r.get(6)?,
                retransmits: r.get(7)?,
                max_snd_cwnd: r.get(8)?,
                min_rtt: r.get(9)?,
                mean_rtt: r.get(10)?,
                max_rtt: r.get(11)?,
            })
        })?;
        Ok(readable("streams", rows)?)
    }

    /// A run's intervals, in order.
    pub fn intervals(&self, id: i64) -> Result<Vec<IntervalRow>> {
        let c = self.r();
        let mut st = c.prepare(&format!(
            "SELECT {INTERVAL_COLS} FROM intervals WHERE run_id=?1 ORDER BY seq, stream_id"
        ))?;
        let rows = st.query_map(params![id], interval_from_row)?;
        Ok(readable("intervals", rows)?)
    }

    /// The intervals of a run's last `seqs` sequence numbers (what a live view shows on
    /// connect), in order.
    pub fn intervals_tail(&self, id: i64, seqs: i64) -> Result<Vec<IntervalRow>> {
        let c = self.r();
        let mut st = c.prepare(&format!(
            "SELECT {INTERVAL_COLS} FROM intervals WHERE run_id=?1
               AND seq > (SELECT COALESCE(MAX(seq), 0) FROM intervals WHERE run_id=?1) - ?2
             ORDER BY seq, stream_id"
        ))?;
        let rows = st.query_map(params![id, seqs], interval_from_row)?;
        Ok(readable("intervals", rows)?)
    }

    /// Call `f` with each interval of a run, in order, one row in memory at a time, on a
    /// connection of its own (a slow `f`, e.g. a streamed answer, holds up no page). Rows
    /// with invalid values are left out.
    ///
    /// # Errors
    /// The database's, or the first error of `f` (which stops the walk).
    pub fn for_each_interval(
        &self,
        id: i64,
        mut f: impl FnMut(&IntervalRow) -> Result<()>,
    ) -> Result<()> {
        let c = Connection::open_with_flags(
            &self.path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        let mut st = c.prepare(&format!(
            "SELECT {INTERVAL_COLS} FROM intervals WHERE run_id=?1 ORDER BY seq, stream_id"
        ))?;
        let mut rows = st.query(params![id])?;
        while let Some(r) = rows.next()? {
            if let Ok(iv) = interval_from_row(r) {
                f(&iv)?;
            }
        }
        Ok(())
    }

    /// Delete a run and everything it owns; false if there was none.
    pub fn delete_run(&self, id: i64) -> Result<bool> {
        Ok(self
            .c()
            .execute("DELETE FROM runs WHERE id=?1", params![id])?
            > 0)
    }

    /// Record a new suite (status running); returns its id.
    pub fn create_suite(&self, name: &str, peer_host: &str) -> Result<i64> {
        let c = self.c();
        c.execute(
            "INSERT INTO suites (name, peer_host, status, created_at) VALUES (?1, ?2, 'running', ?3)",
            params![name, peer_host, now_ms()],
        )?;
        Ok(c.last_insert_rowid())
    }

    /// Close a suite.
    pub fn finish_suite(&self, id: i64, status: RunStatus) -> Result<()> {
        self.c().execute(
            "UPDATE suites SET status=?2, ended_at=?3 WHERE id=?1",
            params![id, status.as_str(), now_ms()],
        )?;
        Ok(())
    }

    /// One suite and its runs (in order).
    pub fn suite(&self, id: i64) -> Result<Option<(SuiteRow, Vec<RunRow>)>> {
        let c = self.r();
        let s = c
            .query_row(
                "SELECT id, name, peer_host, status, created_at, ended_at FROM suites WHERE id=?1",
                params![id],
                |r| {
                    Ok(SuiteRow {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        peer_host: r.get(2)?,
                        status: r.get(3)?,
                        created_at: r.get(4)?,
                        ended_at: r.get(5)?,
                    })
                },
            )
            .optional()?;
        let Some(s) = s else { return Ok(None) };
        let mut st = c.prepare(&format!(
            "SELECT {RUN_COLS} FROM runs WHERE suite_id=?1 ORDER BY id"
        ))?;
        let runs = st.query_map(params![id], run_from_row)?;
        let runs = readable("runs", runs)?;
        Ok(Some((s, runs)))
    }

    /// Suites, newest first.
    pub fn suites(&self, limit: u32) -> Result<Vec<SuiteRow>> {
        let c = self.r();
        let mut st = c.prepare("SELECT id, name, peer_host, status, created_at, ended_at FROM suites ORDER BY id DESC LIMIT ?1")?;
        let rows = st.query_map(params![limit], |r| {
            Ok(SuiteRow {
                id: r.get(0)?,
                name: r.get(1)?,
                peer_host: r.get(2)?,
                status: r.get(3)?,
                created_at: r.get(4)?,
                ended_at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// A setting.
    pub fn setting(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .r()
            .query_row(
                "SELECT value FROM settings WHERE key=?1",
                params![key],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Set a setting.
    pub fn set_setting(&self, key: &str, value: &str) -> Result<()> {
        self.c().execute(
            "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Store a web session (by the SHA-256 of its cookie value).
    pub fn create_session(&self, token_hash: &str, csrf: &str, ttl_ms: i64) -> Result<()> {
        let now = now_ms();
        let c = self.c();
        c.execute("DELETE FROM sessions WHERE expires_at < ?1", params![now])?;
        c.execute(
            "INSERT INTO sessions (token_hash, csrf, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
            params![token_hash, csrf, now, now + ttl_ms],
        )?;
        Ok(())
    }

    /// A live (unexpired) session.
    pub fn session(&self, token_hash: &str) -> Result<Option<SessionRow>> {
        Ok(self
            .r()
            .query_row(
                "SELECT csrf, expires_at FROM sessions WHERE token_hash=?1 AND expires_at >= ?2",
                params![token_hash, now_ms()],
                |r| {
                    Ok(SessionRow {
                        csrf: r.get(0)?,
                        expires_at: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    /// End a session (or all with `None`, as after a password change).
    pub fn delete_sessions(&self, token_hash: Option<&str>) -> Result<()> {
        match token_hash {
            Some(h) => self
                .c()
                .execute("DELETE FROM sessions WHERE token_hash=?1", params![h])?,
            None => self.c().execute("DELETE FROM sessions", [])?,
        };
        Ok(())
    }

    /// Add an API token (its SHA-256) with its scope word; returns its id.
    pub fn create_token(&self, name: &str, token_hash: &str, scope: &str) -> Result<i64> {
        let c = self.c();
        c.execute(
            "INSERT INTO api_tokens (name, token_hash, created_at, scope) VALUES (?1, ?2, ?3, ?4)",
            params![name, token_hash, now_ms(), scope],
        )?;
        Ok(c.last_insert_rowid())
    }

    /// API tokens, newest first.
    pub fn tokens(&self) -> Result<Vec<TokenRow>> {
        let c = self.r();
        let mut st =
            c.prepare("SELECT id, name, created_at, scope FROM api_tokens ORDER BY id DESC")?;
        let rows = st.query_map([], |r| {
            Ok(TokenRow {
                id: r.get(0)?,
                name: r.get(1)?,
                created_at: r.get(2)?,
                scope: r.get(3)?,
            })
        })?;
        Ok(readable("api_tokens", rows)?)
    }

    /// The scope word of the stored token with this hash; `None` when there is none.
    pub fn token_scope(&self, token_hash: &str) -> Result<Option<String>> {
        Ok(self
            .r()
            .query_row(
                "SELECT scope FROM api_tokens WHERE token_hash=?1",
                params![token_hash],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Whether a token hash belongs to a stored token.
    pub fn token_valid(&self, token_hash: &str) -> Result<bool> {
        Ok(self.token_scope(token_hash)?.is_some())
    }

    /// Delete a token; false if there was none.
    pub fn delete_token(&self, id: i64) -> Result<bool> {
        Ok(self
            .c()
            .execute("DELETE FROM api_tokens WHERE id=?1", params![id])?
            > 0)
    }

    /// Log out everywhere: end every web session and revoke every API token, in one
    /// transaction (as after a password change). Returns (sessions, tokens) removed.
    pub fn revoke_all_credentials(&self) -> Result<(u64, u64)> {
        let mut c = self.c();
        let tx = c.transaction()?;
        let s = tx.execute("DELETE FROM sessions", [])?;
        let t = tx.execute("DELETE FROM api_tokens", [])?;
        tx.commit()?;
        Ok((s as u64, t as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk is told by SQLite's code (a real `SQLITE_FULL`, from a database capped at
    /// two pages) and the OS's `ENOSPC`, not by words: before, any store error whose text
    /// held "full" read as a full partition.
    #[test]
    fn a_full_disk_is_known_by_its_code() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "PRAGMA page_size = 512; CREATE TABLE t (b BLOB); PRAGMA max_page_count = 2;",
        )
        .unwrap();
        let full = c
            .execute("INSERT INTO t VALUES (zeroblob(100000))", [])
            .unwrap_err();
        let full = StoreError::from(full);
        assert_eq!(full.to_string(), "database error: database or disk is full");
        assert!(full.is_disk_full());
        let no_space = StoreError::Dir("/data".into(), std::io::Error::from_raw_os_error(28));
        assert!(no_space.is_disk_full(), "{no_space}");
        let busy = c.execute("INSERT INTO nothing VALUES (1)", []).unwrap_err();
        assert!(!StoreError::from(busy).is_disk_full());
        assert!(!StoreError::Invalid("the queue is full".into()).is_disk_full());
        assert!(!StoreError::Io("No space left on device".into()).is_disk_full());
        let denied = StoreError::Dir("/data".into(), std::io::Error::from_raw_os_error(13));
        assert!(!denied.is_disk_full());
    }
    use crate::engine::report::{StreamInterval, TcpSample};

    fn tmp() -> (Store, PathBuf) {
        let d = crate::scratch::dir("store");
        let _ = std::fs::remove_dir_all(&d);
        (Store::open_dir(&d).unwrap(), d)
    }

    fn new_run(peer: &str) -> NewRun {
        NewRun {
            role: RunRole::Client,
            protocol: RunProtocol::Tcp,
            peer_host: peer.into(),
            peer_port: 5201,
            local_host: "192.0.2.1".into(),
            local_port: 40000,
            bind_dev: Some("eth0".into()),
            direction: RunDirection::Send,
            params: serde_json::json!({"time": 2}),
            suite_id: None,
            ..Default::default()
        }
    }

    /// Issue 37 item 4: the daemon's retry of its start-up writes ends only runs older than
    /// itself (a run it started meanwhile stays running); the read-only open reads, refuses
    /// writes with SQLite's error, and changes nothing.
    #[test]
    fn start_up_aborts_only_older_runs_and_read_only_opens_read() {
        let (s, d) = tmp();
        let old = s.create_run(&new_run("192.0.2.2")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let start = now_ms();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let new = s.create_run(&new_run("192.0.2.3")).unwrap();
        let ro = Store::open_dir_read_only(&d).unwrap();
        assert_eq!(ro.get_run(old).unwrap().unwrap().status, RunStatus::Running);
        let e = ro.abort_runs_started_before(start).unwrap_err().to_string();
        assert!(e.contains("readonly"), "{e}");
        assert_eq!(s.abort_runs_started_before(start).unwrap(), 1);
        assert_eq!(s.get_run(old).unwrap().unwrap().status, RunStatus::Aborted);
        assert_eq!(s.get_run(new).unwrap().unwrap().status, RunStatus::Running);
        let missing = crate::scratch::dir("store-ro-missing");
        let _ = std::fs::remove_dir_all(&missing);
        assert!(Store::open_dir_read_only(&missing).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn migrations_are_valid() {
        assert!(migrations().validate().is_ok());
    }

    #[test]
    fn run_lifecycle_and_filters() {
        let (s, d) = tmp();
        let a = s.create_run(&new_run("192.0.2.2")).unwrap();
        let b = s.create_run(&new_run("198.51.100.2")).unwrap();
        let rec = IntervalRecord {
            streams: vec![StreamInterval {
                id: 1,
                socket: 5,
                start: 0.0,
                end: 1.0,
                bytes: 117_000_000,
                bits_per_second: 936e6,
                sender: true,
                omitted: false,
                tcp: Some(TcpSample {
                    retransmits: 3,
                    snd_cwnd: 400_000,
                    ..Default::default()
                }),
                udp: None,
                latency: None,
            }],
        };
        s.add_interval(a, 0, &rec).unwrap();
        let iv = s.intervals(a).unwrap();
        assert_eq!(iv.len(), 1);
        assert_eq!(iv[0].bytes, 117_000_000);
        assert_eq!(iv[0].retransmits, Some(3));
        s.finish_run(
            b,
            RunStatus::Failed,
            None,
            &RunFigures::default(),
            Some("unable to connect"),
        )
        .unwrap();
        let rows = s.list_runs(&RunFilter::default()).unwrap();
        assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), vec![b, a]);
        let f = RunFilter {
            status: Some("running".into()),
            ..Default::default()
        };
        assert_eq!(s.list_runs(&f).unwrap().len(), 1);
        let f = RunFilter {
            peer: Some("198.51".into()),
            ..Default::default()
        };
        let r = s.list_runs(&f).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].error.as_deref(), Some("unable to connect"));
        let f = RunFilter {
            port: Some("eth0".into()),
            ..Default::default()
        };
        assert_eq!(s.list_runs(&f).unwrap().len(), 2);
        // A run that bound no device (a peer's run against the board, iperf 2, a sink): the
        // port filter finds it by the port's address (issue 22 item 11), and only by it.
        let served = s
            .create_run(&NewRun {
                role: RunRole::Server,
                bind_dev: None,
                local_host: "192.0.2.1".into(),
                ..new_run("192.0.2.2")
            })
            .unwrap();
        let other = s
            .create_run(&NewRun {
                bind_dev: None,
                local_host: "203.0.113.1".into(),
                ..new_run("203.0.113.2")
            })
            .unwrap();
        let ids =
            |f: &RunFilter| -> Vec<i64> { s.list_runs(f).unwrap().iter().map(|r| r.id).collect() };
        assert_eq!(ids(&f), vec![b, a]);
        let f = RunFilter {
            port: Some("eth0".into()),
            port_addrs: vec!["192.0.2.1".into(), "2001:db8::1".into()],
            ..Default::default()
        };
        assert_eq!(ids(&f), vec![served, b, a]);
        assert!(!ids(&f).contains(&other));
        assert!(s.delete_run(served).unwrap() && s.delete_run(other).unwrap());
        // A restart marks the still-running run as aborted.
        assert_eq!(s.abort_stale_runs().unwrap(), 1);
        assert_eq!(s.get_run(a).unwrap().unwrap().status, RunStatus::Aborted);
        assert!(s.delete_run(a).unwrap());
        assert!(s.intervals(a).unwrap().is_empty());
        assert!(!s.delete_run(a).unwrap());
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn one_bad_row_never_fails_a_read() {
        // Issue 21 item 4: a run with peer_port -5, a report that does not parse, text in a
        // number column, and an interval with a negative stream id.
        let (s, d) = tmp();
        let good = s.create_run(&new_run("192.0.2.2")).unwrap();
        let bad = s.create_run(&new_run("192.0.2.3")).unwrap();
        s.abort_stale_runs().unwrap();
        s.c()
            .execute(
                "UPDATE runs SET peer_port = -5, report_json = '{not json', bytes = 'many', kind = 'warp' WHERE id = ?1",
                params![bad],
            )
            .unwrap();
        s.c()
            .execute(
                "INSERT INTO intervals (run_id, seq, stream_id, socket, start, end, bytes, bits_per_second, sender, omitted)
                 VALUES (?1, 0, -1, 5, 0, 1, 10, 80, 1, 0), (?1, 1, 1, 5, 1, 2, 10, 80, 1, 0)",
                params![bad],
            )
            .unwrap();
        let rows = s.list_runs(&RunFilter::default()).unwrap();
        assert_eq!(
            rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            vec![bad, good]
        );
        assert_eq!(rows[0].peer_port, 0);
        assert_eq!(rows[0].bytes, None);
        assert_eq!(rows[0].invalid, vec!["kind", "peer_port", "bytes"]);
        assert!(rows[1].invalid.is_empty());
        let one = s.get_run(bad).unwrap().unwrap();
        assert_eq!(
            one.invalid,
            vec!["kind", "peer_port", "bytes", "report_json"]
        );
        assert!(s.report(bad).unwrap().is_none());
        let iv = s.intervals(bad).unwrap();
        assert_eq!(iv.len(), 1);
        assert_eq!(iv[0].seq, 1);
        // Serialized for the API, the invalid fields are named.
        let v = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(v["invalid"][1], "peer_port");
        assert!(serde_json::to_value(&rows[1])
            .unwrap()
            .get("invalid")
            .is_none());
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn sessions_expire_and_tokens_match_by_hash() {
        let (s, d) = tmp();
        s.create_session("h1", "c1", 60_000).unwrap();
        s.create_session("h2", "c2", -1).unwrap();
        assert_eq!(s.session("h1").unwrap().unwrap().csrf, "c1");
        assert!(s.session("h2").unwrap().is_none());
        let id = s.create_token("ci", "th", "read").unwrap();
        assert_eq!(s.token_scope("th").unwrap().as_deref(), Some("read"));
        assert!(s.token_valid("th").unwrap());
        assert!(!s.token_valid("other").unwrap());
        assert!(s.delete_token(id).unwrap());
        assert!(!s.token_valid("th").unwrap());
        s.create_token("a", "t1", "admin").unwrap();
        s.create_token("b", "t2", "run").unwrap();
        // Sessions h1 and (expired) h2, tokens t1 and t2.
        assert_eq!(s.revoke_all_credentials().unwrap(), (2, 2));
        assert!(s.session("h1").unwrap().is_none());
        assert!(s.tokens().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(d);
    }
}
