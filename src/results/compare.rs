//! Result tables: one suite's table (a row per test: bitrate, retransmits, jitter,
//! lost/total, loss, CPU), and comparisons of runs or suites side by side (columns = runs or
//! suites with board / peer / date, differences in % against the first column), rendered as
//! text, GitHub-flavoured Markdown, CSV or HTML. Seed 001's summary (boards × tests) is the
//! suites comparison with `layout = boards`.
//! Not for: running anything (suites::run) or storing (store).

use crate::model::{RunProtocol, StepStatus};
use crate::results::suite_table::{run_label, run_result, suite_result, StepResult, SuiteResult};
use crate::store::Store;
use serde::Serialize;

/// Most columns one comparison may have.
pub(crate) const MAX_COLUMNS: usize = 20;

/// Why a comparison cannot be made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CompareError {
    /// Nothing selected.
    Empty,
    /// Bad id list or too many ids.
    Bad(String),
    /// An id that does not exist.
    NotFound(String),
    /// The store failed.
    Store(String),
}

impl std::fmt::Display for CompareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompareError::Empty => {
                f.write_str("nothing to compare: select runs (?runs=1,2) or suites (?suites=4,5)")
            }
            CompareError::Bad(m) | CompareError::NotFound(m) | CompareError::Store(m) => {
                f.write_str(m)
            }
        }
    }
}

/// Parse "1,2,3" (spaces allowed) into ids, keeping order, dropping repeats.
pub(crate) fn parse_ids(what: &str, s: &str) -> Result<Vec<i64>, CompareError> {
    let mut out: Vec<i64> = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let id: i64 = p
            .parse()
            .ok()
            .filter(|&i: &i64| i > 0)
            .ok_or_else(|| CompareError::Bad(format!("{what}: '{p}' is not a number")))?;
        if !out.contains(&id) {
            out.push(id);
        }
    }
    if out.len() > MAX_COLUMNS {
        return Err(CompareError::Bad(format!(
            "{what}: compare at most {MAX_COLUMNS} at once, got {}",
            out.len()
        )));
    }
    Ok(out)
}

/// One column of a comparison: a run or a suite.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Column {
    /// "run" or "suite".
    pub kind: String,
    pub id: i64,
    /// Board label (suites) or board port (runs).
    pub board: String,
    pub peer: String,
    /// "2026-11-30 12:00 UTC".
    pub when: String,
    pub status: String,
    /// Suite name (suites) or test label (runs).
    pub name: String,
    /// Suites with thresholds: "PASS" / "FAIL" (see [`crate::results::verdict`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
}

impl Column {
    /// The header text: "Suite 4 · imx8 · 192.0.2.2 · 2026-11-30 12:00 UTC".
    pub(crate) fn title(&self) -> String {
        let mut t = format!(
            "{} {}",
            if self.kind == "suite" { "Suite" } else { "Run" },
            self.id
        );
        for p in [&self.board, &self.peer, &self.when] {
            if !p.is_empty() {
                t.push_str(" · ");
                t.push_str(p);
            }
        }
        if let Some(v) = &self.verdict {
            t.push_str(" · ");
            t.push_str(v);
        }
        t
    }
}

/// One test row: its label and each column's figures (None where the column lacks it).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct CompareRow {
    pub label: String,
    pub cells: Vec<Option<StepResult>>,
}

/// Runs or suites side by side.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Comparison {
    /// "runs" or "suites".
    pub kind: String,
    pub columns: Vec<Column>,
    pub rows: Vec<CompareRow>,
}

fn minute(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// Runs `ids` side by side (one test row per run label; the metric layout shows them).
pub(crate) fn compare_runs(store: &Store, ids: &[i64]) -> Result<Comparison, CompareError> {
    if ids.is_empty() {
        return Err(CompareError::Empty);
    }
    let mut columns = Vec::new();
    let mut cells = Vec::new();
    for &id in ids {
        let r = store
            .get_run(id)
            .map_err(|e| CompareError::Store(e.to_string()))?
            .ok_or_else(|| CompareError::NotFound(format!("there is no run {id}")))?;
        let label = run_label(&r);
        let s = run_result(store, columns.len() + 1, &label, &r);
        columns.push(Column {
            kind: "run".into(),
            id,
            board: s.board_port.clone(),
            peer: s.peer.clone(),
            when: minute(r.started_at),
            status: r.status.to_string(),
            name: label,
            verdict: None,
        });
        cells.push(Some(s));
    }
    Ok(Comparison {
        kind: "runs".into(),
        columns,
        rows: vec![CompareRow {
            label: "Run".into(),
            cells,
        }],
    })
}

/// The column of one suite result.
pub(crate) fn suite_column(r: &SuiteResult) -> Column {
    Column {
        kind: "suite".into(),
        id: r.suite.id,
        board: r.label.clone(),
        peer: r.suite.peer_host.clone(),
        when: minute(r.suite.created_at),
        status: r.suite.status.to_string(),
        name: r.suite.name.clone(),
        verdict: r.verdict.as_ref().map(|v| v.result.to_string()),
    }
}

/// Suites `ids` side by side: rows are the tests, matched by label (the n-th "TCP send" of
/// one suite with the n-th of another), in the order they first appear.
pub(crate) fn compare_suites(store: &Store, ids: &[i64]) -> Result<Comparison, CompareError> {
    if ids.is_empty() {
        return Err(CompareError::Empty);
    }
    let mut results = Vec::new();
    for &id in ids {
        results.push(
            suite_result(store, id)
                .map_err(CompareError::Store)?
                .ok_or_else(|| CompareError::NotFound(format!("there is no suite {id}")))?,
        );
    }
    Ok(suites_side_by_side(&results))
}

/// Build the comparison of suite results already loaded.
pub(crate) fn suites_side_by_side(results: &[SuiteResult]) -> Comparison {
    let mut keys: Vec<(String, usize)> = Vec::new();
    let mut rows: Vec<CompareRow> = Vec::new();
    for (c, r) in results.iter().enumerate() {
        let mut seen: std::collections::HashMap<&str, usize> = Default::default();
        for s in &r.steps {
            let k = seen.entry(s.label.as_str()).or_insert(0);
            *k += 1;
            let key = (s.label.clone(), *k);
            let i = match keys.iter().position(|x| *x == key) {
                Some(i) => i,
                None => {
                    keys.push(key);
                    rows.push(CompareRow {
                        label: if *k > 1 {
                            format!("{} #{k}", s.label)
                        } else {
                            s.label.clone()
                        },
                        cells: vec![None; results.len()],
                    });
                    rows.len() - 1
                }
            };
            rows[i].cells[c] = Some(s.clone());
        }
    }
    Comparison {
        kind: "suites".into(),
        columns: results.iter().map(suite_column).collect(),
        rows,
    }
}

// ---------------------------------------------------------------- formatting

/// Difference of `v` against `base` in percent, when `base` is positive.
pub(crate) fn delta_percent(base: Option<f64>, v: Option<f64>) -> Option<f64> {
    match (base, v) {
        (Some(b), Some(v)) if b > 0.0 => Some((v - b) / b * 100.0),
        _ => None,
    }
}

const DASH: &str = "—";

fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| DASH.into())
}

fn finished(s: &StepResult) -> bool {
    matches!(s.status, StepStatus::Completed | StepStatus::Running)
}

fn bitrate_text(s: &StepResult) -> String {
    match s.bitrate_bps {
        Some(b) if finished(s) || b > 0.0 => crate::model::display::rate(b),
        _ => s.status.to_string(),
    }
}

fn jitter_text(s: &StepResult) -> String {
    or_dash(s.jitter_ms.map(|j| format!("{j:.3} ms")))
}

fn lost_total_text(s: &StepResult) -> String {
    or_dash(match (s.lost, s.total) {
        (Some(l), Some(t)) => Some(format!("{l}/{t}")),
        _ => None,
    })
}

fn loss_text(s: &StepResult) -> String {
    or_dash(s.loss_percent.map(|p| format!("{p:.2} %")))
}

fn cpu_text(s: &StepResult) -> String {
    s.cpu_max_percent
        .map(|c| format!("{c:.0} %"))
        .unwrap_or_default()
}

fn retr_text(s: &StepResult) -> String {
    if s.protocol == RunProtocol::Udp {
        DASH.into()
    } else {
        or_dash(s.retransmits.map(|r| r.to_string()))
    }
}

/// " (+2.1 %)"; a change that rounds to zero shows as "+0.0" (never "-0.0").
pub(crate) fn delta_text(d: Option<f64>) -> String {
    d.map(|d| {
        let d = if d.abs() < 0.05 { 0.0 } else { d };
        format!(" ({d:+.1} %)")
    })
    .unwrap_or_default()
}

/// A table of text cells: what text, Markdown and HTML render.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Grid {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Grid {
    /// Rows become columns (the first header cell stays the corner).
    pub(crate) fn transpose(&self) -> Grid {
        let ncol = self.header.len();
        let mut header = vec![self.header.first().cloned().unwrap_or_default()];
        header.extend(
            self.rows
                .iter()
                .map(|r| r.first().cloned().unwrap_or_default()),
        );
        let rows = (1..ncol)
            .map(|c| {
                let mut row = vec![self.header[c].clone()];
                row.extend(
                    self.rows
                        .iter()
                        .map(|r| r.get(c).cloned().unwrap_or_default()),
                );
                row
            })
            .collect();
        Grid { header, rows }
    }

    /// Aligned plain text (first column left, others right), one line per row.
    pub(crate) fn text(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.header).chain(self.rows.iter()) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::new();
            for (i, width) in w.iter().enumerate() {
                let c = r.get(i).map(String::as_str).unwrap_or("");
                let pad = width.saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(&self.header);
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    /// A GitHub-flavoured Markdown table (`|` in cells escaped, line breaks flattened).
    pub(crate) fn markdown(&self) -> String {
        let row = |r: &Vec<String>| {
            let cells: Vec<String> = (0..self.header.len())
                .map(|i| md_escape(r.get(i).map(String::as_str).unwrap_or("")))
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = row(&self.header);
        let align: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("| {} |\n", align.join(" | ")));
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }
}

/// Escape a Markdown table cell.
pub(crate) fn md_escape(s: &str) -> String {
    let s = s.replace('\\', "\\\\").replace('|', "\\|");
    s.split(['\r', '\n'])
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quote a CSV field (RFC 4180): fields with a comma, quote or line break are quoted and
/// quotes doubled; text starting with `=`, `+`, `-` or `@` gets a leading `'` so spreadsheets
/// do not run it as a formula.
pub(crate) fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn num<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// The rate asked for (all streams), or "—" for an unpaced test.
fn target_text(s: &StepResult) -> String {
    match s.rate_check {
        Some(c) => crate::model::display::rate(c.target_bits_per_second),
        None if s.target_bps > 0 => crate::model::display::rate(s.target_bps as f64),
        None => DASH.into(),
    }
}

/// The sender's bitrate, marked "short" when it fell below 97 % of the target.
fn sent_text(s: &StepResult) -> String {
    let t = or_dash(s.sender_bps.map(crate::model::display::rate));
    match s.rate_check {
        Some(c) if c.short => format!("{t} (short: {:.1} %)", c.sent_percent),
        _ => t,
    }
}

/// One suite's own table, like seed 001's per-test results: test, target, sent, received
/// (bitrate), retransmits, jitter, lost/total, loss, CPU (busiest core), status, run.
pub(crate) fn suite_grid(r: &SuiteResult) -> Grid {
    let judged = r.steps.iter().any(|s| s.thresholds.is_some());
    let mut g = Grid {
        header: [
            "Test",
            "Target",
            "Sent",
            "Bitrate",
            "Retr",
            "Jitter",
            "Lost/Total",
            "Loss",
            "CPU (max core)",
            "Status",
            "Run",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .steps
            .iter()
            .map(|s| {
                vec![
                    s.label.clone(),
                    target_text(s),
                    sent_text(s),
                    or_dash(s.bitrate_bps.map(crate::model::display::rate)),
                    retr_text(s),
                    jitter_text(s),
                    lost_total_text(s),
                    loss_text(s),
                    cpu_text(s),
                    s.status.to_string(),
                    num(s.run_id),
                ]
            })
            .collect(),
    };
    // Suites with thresholds get a last column: pass / fail per row (reasons below the table).
    if judged {
        g.header.push("Verdict".into());
        for (row, s) in g.rows.iter_mut().zip(&r.steps) {
            row.push(crate::results::verdict::step_word(s).into());
        }
    }
    // Suites with a latency step: its figures in one more column.
    if r.steps.iter().any(|s| s.latency.is_some()) {
        g.header.push("Latency under load".into());
        for (row, s) in g.rows.iter_mut().zip(&r.steps) {
            row.push(latency_text(s));
        }
    }
    // Runs that lost datagrams with a loss ledger: where, in a few words.
    if r.steps.iter().any(|s| s.lost_where.is_some()) {
        g.header.push("Lost where".into());
        for (row, s) in g.rows.iter_mut().zip(&r.steps) {
            row.push(or_dash(s.lost_where.clone()));
        }
    }
    g
}

/// A latency row's figures in one cell (see [`crate::results::latency::LatencyFigures::text`]);
/// empty for other rows.
fn latency_text(s: &StepResult) -> String {
    s.latency.map(|l| l.text()).unwrap_or_default()
}

/// The suite's verdict as lines for text and Markdown: "PASS: 8 of 8 tests passed the
/// thresholds" or "FAIL: 1 of 8 tests failed" and one line per failing row with its reasons;
/// empty without thresholds (or while running).
pub(crate) fn verdict_lines(r: &SuiteResult) -> Vec<String> {
    let Some(v) = &r.verdict else {
        return Vec::new();
    };
    let n = v.passed + v.failed;
    let mut out = vec![if v.pass() {
        format!("PASS: {} of {n} tests passed the thresholds", v.passed)
    } else {
        format!("FAIL: {} of {n} tests failed", v.failed)
    }];
    for f in &v.failing {
        out.push(format!(
            "#{} {}: {}",
            f.index,
            f.label,
            f.reasons.join("; ")
        ));
    }
    out
}

/// Runs compared metric by metric: rows = metrics, columns = runs; the bitrate row shows
/// the difference against the first run.
pub(crate) fn metric_grid(c: &Comparison) -> Grid {
    let cells: Vec<Option<&StepResult>> = c
        .rows
        .first()
        .map(|r| r.cells.iter().map(Option::as_ref).collect())
        .unwrap_or_default();
    let base = cells.first().copied().flatten().and_then(|s| s.bitrate_bps);
    let mut header = vec!["Metric".to_string()];
    header.extend(c.columns.iter().map(Column::title));
    type Metric = (&'static str, fn(&StepResult, Option<f64>, usize) -> String);
    let metrics: [Metric; 10] = [
        ("Test", |s, _, _| s.label.clone()),
        ("Bitrate (receiver)", |s, b, i| {
            let d = if i > 0 {
                delta_percent(b, s.bitrate_bps)
            } else {
                None
            };
            format!("{}{}", bitrate_text(s), delta_text(d))
        }),
        ("Sender bitrate", |s, _, _| sent_text(s)),
        ("Retransmits", |s, _, _| retr_text(s)),
        ("Jitter", |s, _, _| jitter_text(s)),
        ("Lost/Total", |s, _, _| lost_total_text(s)),
        ("Loss", |s, _, _| loss_text(s)),
        ("CPU (max core)", |s, _, _| cpu_text(s)),
        ("Target", |s, _, _| target_text(s)),
        ("Status", |s, _, _| s.status.to_string()),
    ];
    let latency: [Metric; 5] = [
        ("Idle RTT p50", |s, _, _| {
            ms_or_dash(s.latency.and_then(|l| l.idle_p50_ms))
        }),
        ("Loaded RTT p50", |s, _, _| {
            ms_or_dash(s.latency.and_then(|l| l.loaded_p50_ms))
        }),
        ("Loaded RTT p99", |s, _, _| {
            ms_or_dash(s.latency.and_then(|l| l.loaded_p99_ms))
        }),
        ("Latency increase", |s, _, _| {
            ms_or_dash(s.latency.and_then(|l| l.increase_ms))
        }),
        ("RPM", |s, _, _| {
            s.latency
                .and_then(|l| l.rpm)
                .map(|r| format!("{r:.0}"))
                .unwrap_or_else(|| DASH.into())
        }),
    ];
    let with_latency = cells.iter().flatten().any(|s| s.latency.is_some());
    let lost_where: [Metric; 1] = [("Lost where", |s, _, _| {
        s.lost_where.clone().unwrap_or_else(|| DASH.into())
    })];
    let with_ledger = cells.iter().flatten().any(|s| s.lost_where.is_some());
    let rows = metrics
        .iter()
        .chain(lost_where.iter().filter(|_| with_ledger))
        .chain(latency.iter().filter(|_| with_latency))
        .map(|(name, f)| {
            let mut row = vec![name.to_string()];
            row.extend(
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, s)| s.map(|s| f(s, base, i)).unwrap_or_else(|| DASH.into())),
            );
            row
        })
        .collect();
    Grid { header, rows }
}

/// Suites compared test by test: rows = tests, columns = suites; each cell the bitrate (UDP:
/// and loss), with the difference against the first suite.
pub(crate) fn step_grid(c: &Comparison) -> Grid {
    let mut header = vec!["Test".to_string()];
    header.extend(c.columns.iter().map(Column::title));
    let rows = c
        .rows
        .iter()
        .map(|r| {
            let base = r
                .cells
                .first()
                .and_then(|x| x.as_ref())
                .and_then(|s| s.bitrate_bps);
            let mut row = vec![r.label.clone()];
            row.extend(r.cells.iter().enumerate().map(|(i, s)| match s {
                None => DASH.to_string(),
                Some(s) => {
                    let mut t = bitrate_text(s);
                    if s.protocol == RunProtocol::Udp && s.loss_percent.is_some() {
                        t.push_str(&format!(", {} loss", loss_text(s)));
                    }
                    if let Some(w) = &s.lost_where {
                        t.push_str(&format!(" ({w})"));
                    }
                    if let Some(l) = s.latency {
                        t.push_str(&format!(
                            ", loaded p50 {} ({}), RPM {}",
                            ms_or_dash(l.loaded_p50_ms),
                            l.increase_ms
                                .map(crate::model::display::delta_ms)
                                .unwrap_or_else(|| DASH.into()),
                            l.rpm
                                .map(crate::model::display::whole)
                                .unwrap_or_else(|| DASH.into())
                        ));
                    }
                    if let Some(c) = s.rate_check.filter(|c| c.short) {
                        t.push_str(&format!(
                            ", sender short: {} of {}",
                            crate::model::display::rate(c.sent_bits_per_second),
                            crate::model::display::rate(c.target_bits_per_second)
                        ));
                    }
                    if i > 0 {
                        t.push_str(&delta_text(delta_percent(base, s.bitrate_bps)));
                    }
                    if crate::results::verdict::step_word(s) == "fail" {
                        t.push_str(" — FAIL");
                    }
                    t
                }
            }));
            row
        })
        .collect();
    Grid { header, rows }
}

fn ms_or_dash(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1} ms"))
        .unwrap_or_else(|| DASH.into())
}

/// The grid a comparison is shown as: runs by metric; suites by test, or with
/// `boards = true` one row per suite and one column per test (seed 001's summary layout).
pub(crate) fn grid(c: &Comparison, boards: bool) -> Grid {
    if c.kind == "runs" {
        metric_grid(c)
    } else if boards {
        step_grid(c).transpose()
    } else {
        step_grid(c)
    }
}

/// CSV of a comparison, one line per test per column, numbers in base units: test, column
/// (kind, id, board, peer, started), run, status, protocol, direction, target_bps,
/// bitrate_bps, sender_bps, receiver_bps, retransmits, jitter_ms, lost, total, loss_percent,
/// cpu_max_percent, delta_percent (bitrate against the first column), verdict (pass / fail /
/// empty without thresholds), reasons (why it failed, "; "-separated), and for latency runs
/// idle_p50_ms, loaded_p50_ms, loaded_p99_ms, latency_increase_ms, rpm (empty otherwise),
/// then lost_where (the loss ledger's headline, e.g. "board_qdisc eth0 12,001, unattributed
/// 344"; empty for runs that lost nothing or have no ledger).
pub(crate) fn csv(c: &Comparison) -> String {
    let mut out = String::from("test,kind,id,board,peer,started,run_id,status,protocol,direction,target_bps,bitrate_bps,sender_bps,receiver_bps,retransmits,jitter_ms,lost,total,loss_percent,cpu_max_percent,delta_percent,verdict,reasons,idle_p50_ms,loaded_p50_ms,loaded_p99_ms,latency_increase_ms,rpm,lost_where\n");
    for r in &c.rows {
        let base = r
            .cells
            .first()
            .and_then(|x| x.as_ref())
            .and_then(|s| s.bitrate_bps);
        for (i, (col, s)) in c.columns.iter().zip(r.cells.iter()).enumerate() {
            let Some(s) = s else { continue };
            let label = if c.kind == "runs" { &s.label } else { &r.label };
            let delta = if i > 0 {
                delta_percent(base, s.bitrate_bps).map(|d| format!("{d:.3}"))
            } else {
                None
            };
            let fields = [
                csv_field(label),
                col.kind.clone(),
                col.id.to_string(),
                csv_field(&col.board),
                csv_field(&col.peer),
                csv_field(&col.when),
                num(s.run_id),
                csv_field(s.status.as_str()),
                s.protocol.to_string(),
                s.direction.clone(),
                s.target_bps.to_string(),
                num(s.bitrate_bps),
                num(s.sender_bps),
                num(s.receiver_bps),
                num(s.retransmits),
                num(s.jitter_ms),
                num(s.lost),
                num(s.total),
                num(s.loss_percent),
                num(s.cpu_max_percent),
                delta.unwrap_or_default(),
                crate::results::verdict::step_word(s).to_string(),
                csv_field(
                    &s.verdict
                        .as_ref()
                        .map(|v| v.reasons.join("; "))
                        .unwrap_or_default(),
                ),
                num(s.latency.and_then(|l| l.idle_p50_ms)),
                num(s.latency.and_then(|l| l.loaded_p50_ms)),
                num(s.latency.and_then(|l| l.loaded_p99_ms)),
                num(s.latency.and_then(|l| l.increase_ms)),
                num(s.latency.and_then(|l| l.rpm)),
                csv_field(s.lost_where.as_deref().unwrap_or_default()),
            ];
            out.push_str(&fields.join(","));
            out.push('\n');
        }
    }
    out
}

/// Markdown document of a comparison: a heading line and the table.
pub(crate) fn markdown(c: &Comparison, boards: bool) -> String {
    let what = if c.kind == "runs" { "Runs" } else { "Suites" };
    let ids: Vec<String> = c.columns.iter().map(|x| x.id.to_string()).collect();
    format!(
        "**{what} {}** (bitrate = receiver's, Mbit/s; differences against the first column)\n\n{}",
        ids.join(", "),
        grid(c, boards).markdown()
    )
}

/// A suite's own table as Markdown, with a heading line (name, label, peer, date, status).
pub(crate) fn suite_markdown(r: &SuiteResult) -> String {
    let col = suite_column(r);
    let mut out = format!(
        "**{}** — {} ({})\n\n{}",
        md_escape(&r.suite.name),
        md_escape(&col.title()),
        r.suite.status,
        suite_grid(r).markdown()
    );
    let lines = verdict_lines(r);
    if let Some((head, rows)) = lines.split_first() {
        out.push_str(&format!("\n**{}**\n", md_escape(head)));
        for l in rows {
            out.push_str(&format!("\n* {}", md_escape(l)));
        }
        if !rows.is_empty() {
            out.push('\n');
        }
    }
    out
}

/// A suite's own table as CSV (the comparison CSV of this one suite).
pub(crate) fn suite_csv(r: &SuiteResult) -> String {
    csv(&suites_side_by_side(std::slice::from_ref(r)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SuiteRow;

    fn step(label: &str, proto: &str, bps: f64) -> StepResult {
        StepResult {
            label: label.into(),
            status: StepStatus::Completed,
            protocol: RunProtocol::parse(proto),
            direction: "send".into(),
            bitrate_bps: Some(bps),
            receiver_bps: Some(bps),
            sender_bps: Some(bps),
            ..Default::default()
        }
    }

    fn suite(id: i64, label: &str, steps: Vec<StepResult>) -> SuiteResult {
        SuiteResult {
            suite: SuiteRow {
                id,
                name: "seed 001 table".into(),
                peer_host: "192.0.2.2".into(),
                status: crate::model::RunStatus::Completed,
                created_at: 1_764_504_000_000,
                ended_at: None,
            },
            label: label.into(),
            def_id: Some(1),
            steps,
            verdict: None,
        }
    }

    /// Seed 001's figures: iMX6Q and iMX8QM.
    fn seed_001() -> Vec<SuiteResult> {
        let mut udp6 = step("UDP receive 400M", "UDP", 400e6);
        udp6.lost = Some(4374);
        udp6.total = Some(365_993);
        udp6.loss_percent = Some(1.195);
        udp6.jitter_ms = Some(0.098);
        let mut udp8 = step("UDP receive 400M", "UDP", 400e6);
        udp8.lost = Some(121);
        udp8.total = Some(366_076);
        udp8.loss_percent = Some(0.033);
        let mut tcp6 = step("TCP send", "TCP", 406e6);
        tcp6.retransmits = Some(0);
        vec![
            suite(
                4,
                "Apalis iMX6Q",
                vec![tcp6, step("TCP receive", "TCP", 574e6), udp6],
            ),
            suite(
                5,
                "Apalis iMX8QM",
                vec![
                    step("TCP send", "TCP", 915e6),
                    step("TCP receive", "TCP", 934e6),
                    udp8,
                ],
            ),
        ]
    }

    #[test]
    fn suites_side_by_side_with_deltas() {
        let c = suites_side_by_side(&seed_001());
        let g = step_grid(&c);
        assert_eq!(
            g.header,
            vec![
                "Test",
                "Suite 4 · Apalis iMX6Q · 192.0.2.2 · 2025-11-30 12:00 UTC",
                "Suite 5 · Apalis iMX8QM · 192.0.2.2 · 2025-11-30 12:00 UTC"
            ]
        );
        assert_eq!(
            g.rows[0],
            vec!["TCP send", "406.0 Mbit/s", "915.0 Mbit/s (+125.4 %)"]
        );
        assert_eq!(
            g.rows[2],
            vec![
                "UDP receive 400M",
                "400.0 Mbit/s, 1.20 % loss",
                "400.0 Mbit/s, 0.03 % loss (+0.0 %)"
            ]
        );
        // Seed 001's own layout: one row per board, one column per test.
        let b = grid(&c, true);
        assert_eq!(
            b.header[1..],
            ["TCP send", "TCP receive", "UDP receive 400M"]
        );
        assert_eq!(b.rows[1][2], "934.0 Mbit/s (+62.7 %)");
    }

    #[test]
    fn the_ledger_headline_is_in_the_tables_across_boards() {
        let mut s = seed_001();
        s[0].steps[2].lost_where = Some("board_socket 1,262".into());
        s[1].steps[2].lost_where = Some("not on the board: 121".into());
        let c = suites_side_by_side(&s);
        assert_eq!(
            step_grid(&c).rows[2][1..],
            [
                "400.0 Mbit/s, 1.20 % loss (board_socket 1,262)",
                "400.0 Mbit/s, 0.03 % loss (not on the board: 121) (+0.0 %)"
            ]
        );
        // Without a ledger the tables are as before.
        assert!(!step_grid(&suites_side_by_side(&seed_001())).rows[2][1].contains('('));
        // A suite's own table (text and Markdown) gets a "Lost where" column.
        let g = suite_grid(&s[0]);
        assert_eq!(g.header.last().map(String::as_str), Some("Lost where"));
        assert_eq!(
            g.rows[2].last().map(String::as_str),
            Some("board_socket 1,262")
        );
        assert_eq!(g.rows[0].last().map(String::as_str), Some(DASH));
        assert!(suite_markdown(&s[0]).contains("| board_socket 1,262 |"));
        assert!(!suite_grid(&seed_001()[0])
            .header
            .iter()
            .any(|h| h == "Lost where"));
        // CSV, suite and comparison: the last column.
        let csv_lines: Vec<String> = suite_csv(&s[1]).lines().map(String::from).collect();
        assert!(
            csv_lines[0].ends_with(",rpm,lost_where"),
            "{}",
            csv_lines[0]
        );
        assert!(
            csv_lines[3].ends_with(",not on the board: 121"),
            "{}",
            csv_lines[3]
        );
        assert!(csv(&c)
            .lines()
            .any(|l| l.ends_with(",\"board_socket 1,262\"")));
    }

    #[test]
    fn markdown_escapes_pipes_and_has_units() {
        let mut s = seed_001();
        s[0].label = "iMX6 | -w 300K".into();
        s[0].steps[0].label = "TCP send\n(-w 300K)".into();
        let md = markdown(&suites_side_by_side(&s), false);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            "**Suites 4, 5** (bitrate = receiver's, Mbit/s; differences against the first column)"
        );
        assert_eq!(
            lines[2],
            "| Test | Suite 4 · iMX6 \\| -w 300K · 192.0.2.2 · 2025-11-30 12:00 UTC | Suite 5 · Apalis iMX8QM · 192.0.2.2 · 2025-11-30 12:00 UTC |"
        );
        assert_eq!(lines[3], "| --- | ---: | ---: |");
        assert_eq!(lines[4], "| TCP send (-w 300K) | 406.0 Mbit/s | — |");
        assert!(md.contains("| TCP send | — | 915.0 Mbit/s |"), "{md}");
        // Every table line has the same number of unescaped separators.
        for l in &lines[2..] {
            assert_eq!(l.replace("\\|", "").matches('|').count(), 4, "{l}");
        }
    }

    #[test]
    fn csv_quotes_and_keeps_raw_numbers() {
        let mut s = seed_001();
        s[1].label = "iMX8QM, \"after\" governor".into();
        s[1].steps[0].label = "=cmd".into();
        let out = csv(&suites_side_by_side(&s));
        let lines: Vec<&str> = out.lines().collect();
        // Suite 5's first test is now "=cmd": its own row, so "TCP send" has suite 4 only.
        assert_eq!(lines.len(), 1 + 6);
        assert_eq!(
            lines[1],
            "TCP send,suite,4,Apalis iMX6Q,192.0.2.2,2025-11-30 12:00 UTC,,completed,TCP,send,0,406000000,406000000,406000000,0,,,,,,,,,,,,,,"
        );
        assert!(out.contains("\"iMX8QM, \"\"after\"\" governor\""), "{out}");
        assert!(out.contains("\n'=cmd,suite,5,"), "{out}");
        let udp8 = lines
            .iter()
            .find(|l| l.starts_with("UDP receive 400M,suite,5"))
            .unwrap();
        assert!(udp8.ends_with(",121,366076,0.033,,0.000,,,,,,,,"), "{udp8}");
        // Every line has the header's field count (quoted commas do not count).
        let n = lines[0].split(',').count();
        assert_eq!(lines[1].split(',').count(), n);
        assert_eq!(csv_field("a\nb"), "\"a\nb\"");
        assert_eq!(csv_field("-1"), "'-1");
    }

    #[test]
    fn suite_table_and_text() {
        let r = &seed_001()[0];
        let g = suite_grid(r);
        assert_eq!(
            g.rows[2],
            vec![
                "UDP receive 400M",
                "—",
                "400.0 Mbit/s",
                "400.0 Mbit/s",
                "—",
                "0.098 ms",
                "4374/365993",
                "1.20 %",
                "",
                "completed",
                ""
            ]
        );
        let t = g.text();
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[1].starts_with("TCP send               —  406.0 Mbit/s  406.0 Mbit/s     0"),
            "{t}"
        );
        let md = suite_markdown(r);
        assert!(md.starts_with("**seed 001 table** — Suite 4 · Apalis iMX6Q · 192.0.2.2 · 2025-11-30 12:00 UTC (completed)\n\n| Test | Target | Sent | Bitrate |"), "{md}");
    }

    #[test]
    fn a_short_sender_is_flagged_in_the_suite_table_and_comparisons() {
        // Issue 11: "UDP send 100M → 93.9 Mbit/s, 0/24318, 0.00 %" hid a sender at 93.9 %.
        let mut s = step("UDP send 100M", "UDP", 93.9e6);
        s.target_bps = 100_000_000;
        s.lost = Some(0);
        s.total = Some(24318);
        s.loss_percent = Some(0.0);
        s.rate_check = crate::engine::shortfall::RateCheck::new(100e6, 93.9e6, Some(93.9e6));
        let mut ok = step("UDP send 100M", "UDP", 100.0e6);
        ok.target_bps = 100_000_000;
        ok.rate_check = crate::engine::shortfall::RateCheck::new(100e6, 100.0e6, Some(100.0e6));
        let r = suite(4, "board", vec![s.clone(), ok]);
        let g = suite_grid(&r);
        assert_eq!(&g.header[1..4], ["Target", "Sent", "Bitrate"]);
        assert_eq!(g.rows[0][1], "100.0 Mbit/s");
        assert_eq!(g.rows[0][2], "93.9 Mbit/s (short: 93.9 %)");
        assert_eq!(g.rows[1][2], "100.0 Mbit/s");
        let c = suites_side_by_side(&[r.clone(), r]);
        let sg = step_grid(&c);
        assert!(
            sg.rows[0][1].contains("sender short: 93.9 Mbit/s of 100.0 Mbit/s"),
            "{:?}",
            sg.rows[0]
        );
    }

    #[test]
    fn runs_by_metric_and_id_lists() {
        let mut a = step("TCP send", "TCP", 940e6);
        a.retransmits = Some(12);
        let b = step("TCP send", "TCP", 470e6);
        let c = Comparison {
            kind: "runs".into(),
            columns: vec![
                Column {
                    kind: "run".into(),
                    id: 1,
                    board: "eth0".into(),
                    peer: "192.0.2.2:5201".into(),
                    when: "w".into(),
                    status: "completed".into(),
                    name: "TCP send".into(),
                    verdict: None,
                },
                Column {
                    kind: "run".into(),
                    id: 2,
                    board: String::new(),
                    peer: "192.0.2.2:5201".into(),
                    when: "w".into(),
                    status: "completed".into(),
                    name: "TCP send".into(),
                    verdict: None,
                },
            ],
            rows: vec![CompareRow {
                label: "Run".into(),
                cells: vec![Some(a), Some(b)],
            }],
        };
        let g = grid(&c, false);
        assert_eq!(g.header[1], "Run 1 · eth0 · 192.0.2.2:5201 · w");
        assert_eq!(g.header[2], "Run 2 · 192.0.2.2:5201 · w");
        assert_eq!(
            g.rows[1],
            vec![
                "Bitrate (receiver)",
                "940.0 Mbit/s",
                "470.0 Mbit/s (-50.0 %)"
            ]
        );
        assert_eq!(g.rows[3], vec!["Retransmits", "12", "—"]);
        assert_eq!(parse_ids("runs", " 3, 1,3 ,").unwrap(), vec![3, 1]);
        assert!(parse_ids("runs", "1,x")
            .unwrap_err()
            .to_string()
            .contains("'x' is not a number"));
        assert!(parse_ids("runs", "-2").is_err());
        let many: Vec<String> = (1..=21).map(|i| i.to_string()).collect();
        assert!(parse_ids("suites", &many.join(",")).is_err());
        assert_eq!(
            delta_text(delta_percent(Some(400.1e6), Some(400.0e6))),
            " (+0.0 %)"
        );
        assert_eq!(delta_text(delta_percent(Some(0.0), Some(400.0e6))), "");
    }
}
