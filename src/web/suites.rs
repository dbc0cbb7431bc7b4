//! Saved suites and comparisons in the web UI and API.
//!
//! Pages: `/suites` (definitions: run, edit, export, delete, import; recent suite runs),
//! `/suites/defs/new`, `/suites/defs/{id}` (editor: steps added, removed, moved without
//! JavaScript), `/suites/{id}` (a suite run: live table, stop, CSV/Markdown), `/compare`
//! (`?runs=1,2` or `?suites=4,5`, also repeated `run=`/`suite=` from the history's
//! checkboxes; `.csv` and `.md` exports).
//! API: `/api/suite-defs` (GET list, POST create), `/api/suite-defs/{id or name}` (GET, PUT,
//! DELETE), `/api/suite-defs/{id or name}/run` (POST), `/api/suites/{id}/stop` (POST),
//! `/api/compare?runs=…|suites=…&format=json|csv|md|text`.

use super::auth::{Auth, AuthError};
use super::respond::{html, redirect};
use super::routes::{Routes, ADMIN, READ, RUN};
use super::AppState;
use crate::engine::report::version_string;
use crate::results::compare::{self, CompareError, Comparison};
use crate::runs::suites::run;
use crate::spec::suite as def;
use crate::spec::suite::{RunTarget, RunTargetForm, Step, SuiteDef};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde_json::json;

/// Register the routes (before the pages' `/suites/{id}` catch-alls).
pub(crate) fn configure(r: &mut Routes) {
    r.get("/suites", READ, suites_page)
        .get("/suites/defs/new", READ, new_def)
        .post("/suites/defs/save", ADMIN, save_def)
        .post("/suites/defs/import", ADMIN, import_def)
        .get("/suites/defs/{id}", READ, edit_def)
        .post("/suites/defs/{id}/delete", ADMIN, delete_def)
        .post("/suites/defs/{id}/run", ADMIN, run_def)
        .get("/suites/defs/{id}/export.json", READ, export_def)
        .get("/suites/{id}", READ, suite_page)
        .post("/suites/{id}/stop", ADMIN, stop_suite)
        .get("/suites/{id}/export.csv", READ, suite_csv)
        .get("/suites/{id}/export.md", READ, suite_md)
        .get("/compare", READ, compare_page)
        .get("/compare.csv", READ, compare_csv)
        .get("/compare.md", READ, compare_md)
        .get("/api/suite-defs", READ, api_list)
        .post("/api/suite-defs", ADMIN, api_create)
        .get("/api/suite-defs/{key}", READ, api_show)
        .put("/api/suite-defs/{key}", ADMIN, api_update)
        .delete("/api/suite-defs/{key}", ADMIN, api_delete)
        .post("/api/suite-defs/{key}/run", RUN, api_run)
        .post("/api/suites/{id}/stop", RUN, api_stop)
        .get("/api/compare", READ, api_compare);
}

fn message(status: StatusCode, auth: &Auth, heading: &str, text: &str) -> HttpResponse {
    super::respond::message(status, Some(auth), heading, text)
}

use super::extract::{ApiWrite, Form, Json};
use super::respond::json_error as api_error;

fn pairs_get<'a>(p: &'a [(String, String)], k: &str) -> Option<&'a str> {
    p.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

fn nonempty(s: Option<&str>) -> Option<String> {
    s.map(str::trim).filter(|s| !s.is_empty()).map(String::from)
}

fn def_row(state: &AppState, key: &str) -> Result<crate::store::SuiteDefRow, (StatusCode, String)> {
    def::find(&state.store, key)
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e))?
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                format!("there is no suite definition '{key}'"),
            )
        })
}

// ---------------------------------------------------------------- suites page

struct DefView {
    id: i64,
    name: String,
    description: String,
    builtin: bool,
    summary: String,
    error: Option<String>,
    /// The saved board port is not on this board (a definition from another board).
    port_note: Option<String>,
    port: String,
    bind: String,
}

struct SuiteRunView {
    id: i64,
    name: String,
    label: String,
    peer: String,
    when: String,
    status: String,
}

#[derive(Template)]
#[template(path = "suites.html")]
struct SuitesPage {
    nav: bool,
    csrf: String,
    version: String,
    defs: Vec<DefView>,
    runs: Vec<SuiteRunView>,
    ports: Vec<String>,
    board: String,
    error: Option<String>,
}

fn suites_view(state: &AppState, auth: &Auth, error: Option<String>) -> SuitesPage {
    let placeholder = RunTarget {
        host: "peer.invalid".into(),
        ..Default::default()
    };
    let board_ports: Vec<String> = crate::board::ports()
        .into_iter()
        .filter(|p| !p.loopback)
        .map(|p| p.name)
        .collect();
    let defs = state
        .store
        .suite_defs()
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            let d = def::from_row(&r);
            // The board port is picked when the suite runs: the summary checks the steps
            // only (it once checked the saved port against no ports at all and called every
            // suite with a board port broken, issue 22 item 7).
            let plan = d
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|d| d.plan_any_port(&placeholder));
            let (summary, error) = match &plan {
                Ok(p) => {
                    let secs: u64 = p.iter().map(|t| u64::from(t.spec.seconds())).sum();
                    let labels: Vec<&str> = p.iter().map(|t| t.label.as_str()).collect();
                    (
                        format!("{} tests, {} s: {}", p.len(), secs, labels.join(", ")),
                        None,
                    )
                }
                Err(e) => (String::new(), Some(e.clone())),
            };
            let d = d.unwrap_or_default();
            let bind = d.bind.clone().unwrap_or_default();
            let port_note = (!bind.trim().is_empty()
                && !board_ports.iter().any(|p| p == bind.trim()))
            .then(|| {
                format!(
                    "Saved board port '{}' is not on this board: pick one below to run it.",
                    bind.trim()
                )
            });
            DefView {
                port_note,
                id: r.id,
                name: r.name,
                description: d.description,
                builtin: r.builtin,
                summary,
                error,
                port: d.port.unwrap_or_default(),
                bind: d.bind.unwrap_or_default(),
            }
        })
        .collect();
    let runs = state
        .store
        .suites(30)
        .unwrap_or_default()
        .into_iter()
        .map(|s| SuiteRunView {
            label: state
                .store
                .suite_extra(s.id)
                .ok()
                .flatten()
                .and_then(|x| x.label)
                .unwrap_or_default(),
            id: s.id,
            name: s.name,
            peer: s.peer_host,
            when: crate::model::time::fmt_time(s.created_at),
            status: s.status.to_string(),
        })
        .collect();
    SuitesPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        defs,
        runs,
        ports: board_ports,
        board: run::board_label(),
        error,
    }
}

async fn suites_page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    html(StatusCode::OK, &suites_view(&state, &auth, None))
}

// ---------------------------------------------------------------- editor

#[derive(Default, Clone)]
struct StepForm {
    kind: String,
    direction: String,
    time: String,
    streams: String,
    bitrate: String,
    length: String,
    window: String,
    rates: String,
    /// Latency steps: load (up / down / both), idle and loaded phase (s), probe interval (ms),
    /// congestion control.
    load: String,
    idle: String,
    loaded: String,
    interval: String,
    congestion: String,
    label: String,
    /// Thresholds as JSON text (`{"max_loss_percent": 0.1}`), empty = the suite's.
    thresholds: String,
    /// rfc2544 steps: their own fields as a JSON object (`{"ingress": "eth0", "egress":
    /// "eth1", "sizes": "64,1518"}`; see [`def::Rfc2544Step`]), empty for other kinds.
    rfc2544: String,
}

/// The fields of an rfc2544 step the editor shows as one JSON object (the rest have columns).
const RFC2544_FIELDS: [&str; 12] = [
    "peer",
    "ingress",
    "egress",
    "nat",
    "sizes",
    "trial",
    "loss",
    "resolution",
    "tests",
    "b2b_repeat",
    "echo_port",
    "line_rate",
];

/// Thresholds JSON as the editor shows it ("" when none).
fn thresholds_text(v: &Option<serde_json::Value>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

/// The editor's thresholds text as JSON: empty = none; text that is not JSON is kept as a
/// JSON string, which the definition check refuses with the reason (the form is shown again).
fn thresholds_value(s: &str) -> Option<serde_json::Value> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    Some(serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.to_string())))
}

impl StepForm {
    /// The editor's row of a step: its stored fields as text (through serde, so a new kind's
    /// fields show without code here).
    fn from(s: &Step) -> StepForm {
        let v = serde_json::to_value(s).unwrap_or_default();
        let g = |k: &str| match v.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        StepForm {
            kind: s.kind().as_str().into(),
            direction: g("direction"),
            time: g("time"),
            streams: g("streams"),
            bitrate: g("bitrate"),
            length: g("length"),
            window: g("window"),
            rates: g("rates"),
            load: g("load"),
            idle: g("idle"),
            loaded: g("loaded"),
            interval: g("interval"),
            congestion: g("congestion"),
            label: g("label"),
            thresholds: thresholds_text(&s.thresholds().cloned()),
            rfc2544: {
                let m: serde_json::Map<String, serde_json::Value> = RFC2544_FIELDS
                    .iter()
                    .filter_map(|k| Some((k.to_string(), v.get(*k)?.clone())))
                    .collect();
                if m.is_empty() {
                    String::new()
                } else {
                    serde_json::Value::Object(m).to_string()
                }
            },
        }
    }

    /// Row `n` (1-based) as a step, read as a stored one is (empty fields dropped), so the
    /// editor refuses what the API refuses: a field the kind does not take, an unknown kind.
    fn to_step(&self, n: usize) -> Result<Step, String> {
        let mut m = serde_json::Map::new();
        m.insert("kind".into(), self.kind.trim().into());
        for (k, v) in [
            ("direction", &self.direction),
            ("time", &self.time),
            ("streams", &self.streams),
            ("bitrate", &self.bitrate),
            ("length", &self.length),
            ("window", &self.window),
            ("rates", &self.rates),
            ("load", &self.load),
            ("idle", &self.idle),
            ("loaded", &self.loaded),
            ("interval", &self.interval),
            ("congestion", &self.congestion),
            ("label", &self.label),
        ] {
            if let Some(v) = nonempty(Some(v)) {
                m.insert(k.into(), v.into());
            }
        }
        if let Some(t) = thresholds_value(&self.thresholds) {
            m.insert("thresholds".into(), t);
        }
        match thresholds_value(&self.rfc2544) {
            None => {}
            Some(serde_json::Value::Object(o)) => {
                for (k, v) in o {
                    if k == "kind" || m.contains_key(&k) {
                        return Err(format!(
                            "step {n}: '{k}' has its own column; leave it out of the RFC 2544 fields"
                        ));
                    }
                    m.insert(k, v);
                }
            }
            Some(_) => {
                return Err(format!(
                    "step {n}: the RFC 2544 fields are a JSON object, e.g. {{\"ingress\": \"eth0\", \"egress\": \"eth1\"}}"
                ))
            }
        }
        Step::from_value(n, serde_json::Value::Object(m))
    }
}

#[derive(Template)]
#[template(path = "suite_edit.html")]
struct EditPage {
    nav: bool,
    csrf: String,
    version: String,
    /// Empty for a new definition.
    id: String,
    name: String,
    description: String,
    port: String,
    bind: String,
    time: String,
    /// Suite-level thresholds as JSON text.
    thresholds: String,
    steps: Vec<StepForm>,
    kinds: Vec<String>,
    directions: Vec<String>,
    error: Option<String>,
}

fn edit_page(auth: &Auth, id: Option<i64>, d: &SuiteDef, error: Option<String>) -> EditPage {
    let steps = d.steps.iter().map(StepForm::from).collect();
    edit_form(auth, id, d, steps, error)
}

/// The editor for definition `d` (its steps not read) with rows `steps`.
fn edit_form(
    auth: &Auth,
    id: Option<i64>,
    d: &SuiteDef,
    steps: Vec<StepForm>,
    error: Option<String>,
) -> EditPage {
    EditPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        id: id.map(|i| i.to_string()).unwrap_or_default(),
        name: d.name.clone(),
        description: d.description.clone(),
        port: d.port.clone().unwrap_or_default(),
        bind: d.bind.clone().unwrap_or_default(),
        time: d.time.clone().unwrap_or_default(),
        thresholds: thresholds_text(&d.thresholds),
        steps,
        kinds: def::StepKind::ALL.map(|k| k.as_str().to_string()).to_vec(),
        directions: ["send", "receive", "bidir"].map(String::from).to_vec(),
        error,
    }
}

async fn new_def(auth: Auth) -> HttpResponse {
    let d = SuiteDef {
        time: Some("10".into()),
        steps: vec![Step::Tcp(def::Iperf3Step {
            direction: Some("send".into()),
            ..Default::default()
        })],
        ..Default::default()
    };
    html(StatusCode::OK, &edit_page(&auth, None, &d, None))
}

async fn edit_def(auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    match def_row(&state, &id.to_string()) {
        Ok(r) => match def::from_row(&r) {
            Ok(d) => html(StatusCode::OK, &edit_page(&auth, Some(r.id), &d, None)),
            Err(e) => message(
                StatusCode::INTERNAL_SERVER_ERROR,
                &auth,
                "Bad definition",
                &e,
            ),
        },
        Err((s, e)) => message(s, &auth, "No such suite", &e),
    }
}

/// Most step rows the editor accepts from a form.
const MAX_FORM_STEPS: usize = def::MAX_STEPS + 1;

async fn save_def(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AuthError> {
    let f = form.into_inner();
    auth.check_csrf(pairs_get(&f, "csrf"))?;
    let id: Option<i64> = match nonempty(pairs_get(&f, "id")) {
        None => None,
        Some(s) => match s.parse() {
            Ok(i) => Some(i),
            Err(_) => {
                return Ok(message(
                    StatusCode::BAD_REQUEST,
                    &auth,
                    "Bad form",
                    "the suite id is not a number",
                ))
            }
        },
    };
    let mut steps = step_forms(&f);
    let action = pairs_get(&f, "action").unwrap_or("save");
    let (save, note) = edit_steps(action, &mut steps);
    let d = form_def(&f);
    if !save {
        return Ok(html(StatusCode::OK, &edit_form(&auth, id, &d, steps, note)));
    }
    let read: Result<Vec<Step>, String> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| s.to_step(i + 1))
        .collect();
    let saved = read.and_then(|read| {
        def::save(
            &state.store,
            id,
            &SuiteDef {
                steps: read,
                ..d.clone()
            },
        )
    });
    Ok(match saved {
        Ok(_) => redirect("/suites"),
        Err(e) => html(
            StatusCode::BAD_REQUEST,
            &edit_form(&auth, id, &d, steps, Some(e)),
        ),
    })
}

/// The step rows of the suite editor's form `f` (`s0_kind`, `s0_time`, … up to
/// [`MAX_FORM_STEPS`]; the rows end at the first without a kind).
fn step_forms(f: &[(String, String)]) -> Vec<StepForm> {
    let mut steps: Vec<StepForm> = Vec::new();
    for i in 0..MAX_FORM_STEPS {
        let g = |k: &str| {
            pairs_get(f, &format!("s{i}_{k}"))
                .unwrap_or_default()
                .to_string()
        };
        if pairs_get(f, &format!("s{i}_kind")).is_none() {
            break;
        }
        steps.push(StepForm {
            kind: g("kind"),
            direction: g("direction"),
            time: g("time"),
            streams: g("streams"),
            bitrate: g("bitrate"),
            length: g("length"),
            window: g("window"),
            rates: g("rates"),
            load: g("load"),
            idle: g("idle"),
            loaded: g("loaded"),
            interval: g("interval"),
            congestion: g("congestion"),
            label: g("label"),
            thresholds: g("thresholds"),
            rfc2544: g("rfc2544"),
        });
    }
    steps
}

/// Do the editor's `action` on `steps`: `save`, or `add`, `remove-N`, `up-N`, `down-N`
/// (which edit the rows and show the form again). Returns whether to save, and a note for
/// the form.
fn edit_steps(action: &str, steps: &mut Vec<StepForm>) -> (bool, Option<String>) {
    let idx = |p: &str| {
        action
            .strip_prefix(p)
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n < steps.len())
    };
    let mut note = None;
    let save = match action {
        "save" => true,
        "add" => {
            if steps.len() < def::MAX_STEPS {
                let last = steps.last().cloned().unwrap_or_default();
                steps.push(StepForm {
                    kind: if last.kind.is_empty() {
                        "tcp".into()
                    } else {
                        last.kind
                    },
                    direction: last.direction,
                    ..Default::default()
                });
            } else {
                note = Some(format!("a suite has at most {} steps", def::MAX_STEPS));
            }
            false
        }
        a if a.starts_with("remove-") => {
            if let Some(i) = idx("remove-") {
                steps.remove(i);
            }
            false
        }
        a if a.starts_with("up-") => {
            if let Some(i) = idx("up-").filter(|&i| i > 0) {
                steps.swap(i, i - 1);
            }
            false
        }
        a if a.starts_with("down-") => {
            if let Some(i) = idx("down-").filter(|&i| i + 1 < steps.len()) {
                steps.swap(i, i + 1);
            }
            false
        }
        _ => {
            note = Some(format!("unknown action '{action}'"));
            false
        }
    };
    (save, note)
}

/// The suite definition's fields from the editor's form `f` (its steps apart).
fn form_def(f: &[(String, String)]) -> SuiteDef {
    SuiteDef {
        name: pairs_get(f, "name").unwrap_or_default().trim().to_string(),
        description: pairs_get(f, "description")
            .unwrap_or_default()
            .trim()
            .to_string(),
        port: nonempty(pairs_get(f, "port")),
        bind: nonempty(pairs_get(f, "bind")),
        time: nonempty(pairs_get(f, "time")),
        thresholds: thresholds_value(pairs_get(f, "thresholds").unwrap_or_default()),
        steps: Vec::new(),
    }
}

async fn delete_def(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<super::extract::CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    Ok(match state.store.delete_suite_def(id) {
        Ok(true) => redirect("/suites"),
        Ok(false) => message(
            StatusCode::NOT_FOUND,
            &auth,
            "No such suite",
            "Nothing was deleted.",
        ),
        Err(e) => message(
            StatusCode::INTERNAL_SERVER_ERROR,
            &auth,
            "Error",
            &e.to_string(),
        ),
    })
}

#[derive(serde::Deserialize)]
struct RunForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(flatten)]
    target: RunTargetForm,
}

async fn run_def(
    req: actix_web::HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<RunForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    let row = match def_row(&state, &id.to_string()) {
        Ok(r) => r,
        Err((s, e)) => return Ok(message(s, &auth, "No such suite", &e)),
    };
    // The target's numbers are read here, once; a bad one starts nothing.
    let started = form
        .target
        .to_target()
        .and_then(|t| run::start_def(&state.runs, &row, &t));
    Ok(match started {
        Ok(sid) => {
            super::audit::suite_started(&auth, &req, sid, &row.name);
            redirect(&format!("/suites/{sid}"))
        }
        Err(e) => html(
            StatusCode::BAD_REQUEST,
            &suites_view(
                &state,
                &auth,
                Some(format!("Cannot run '{}': {e}", row.name)),
            ),
        ),
    })
}

async fn export_def(auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    match def_row(&state, &id.to_string())
        .and_then(|r| def::from_row(&r).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e)))
    {
        Ok(d) => download(
            "application/json",
            format!("netperfd-suite-{id}.json"),
            serde_json::to_string_pretty(&d).unwrap_or_default(),
        ),
        Err((s, e)) => message(s, &auth, "No such suite", &e),
    }
}

#[derive(serde::Deserialize)]
struct ImportForm {
    #[serde(default)]
    csrf: Option<String>,
    json: String,
    #[serde(default)]
    replace: Option<String>,
}

fn import(state: &AppState, body: &[u8], replace: bool) -> Result<i64, String> {
    let d = SuiteDef::from_json(body)?;
    let existing = state
        .store
        .suite_def_by_name(d.name.trim())
        .map_err(|e| e.to_string())?;
    match existing {
        Some(r) if replace => def::save(&state.store, Some(r.id), &d),
        _ => def::save(&state.store, None, &d),
    }
}

async fn import_def(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<ImportForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(
        match import(&state, form.json.as_bytes(), form.replace.is_some()) {
            Ok(_) => redirect("/suites"),
            Err(e) => html(
                StatusCode::BAD_REQUEST,
                &suites_view(&state, &auth, Some(format!("Import refused: {e}"))),
            ),
        },
    )
}

// ---------------------------------------------------------------- a suite run

struct StepView {
    index: usize,
    label: String,
    target: String,
    sent: String,
    bitrate: String,
    retr: String,
    jitter: String,
    lost_total: String,
    loss: String,
    cpu: String,
    status: String,
    run_id: Option<i64>,
    error: String,
    /// "pass" / "fail" / "" (no thresholds, or not done).
    verdict: String,
    /// Every limit checked, in words ("loss 0.012 % ≤ 0.1 %").
    checks: Vec<String>,
    /// Latency rows: idle p50, loaded p50 / p99, increase, RPM, goodput; empty otherwise.
    latency: String,
}

#[derive(Template)]
#[template(path = "suite.html")]
struct SuitePage {
    nav: bool,
    csrf: String,
    version: String,
    suite_id: i64,
    name: String,
    label: String,
    status: String,
    peer: String,
    when: String,
    running: bool,
    progress: String,
    rows: Vec<StepView>,
    /// Some row has thresholds (the table gets a Verdict column).
    judged: bool,
    /// A latency row is in the table: show its column.
    with_latency: bool,
    /// "PASS" / "FAIL", empty without thresholds or while running.
    verdict: String,
    /// The verdict line and the failing rows with their reasons.
    verdict_lines: Vec<String>,
    text: String,
    markdown: String,
}

async fn suite_page(auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    let r = match crate::results::suite_table::suite_result(&state.store, id) {
        Ok(Some(r)) => r,
        Ok(None) => {
            return message(
                StatusCode::NOT_FOUND,
                &auth,
                "No such suite",
                &format!("There is no suite {id}."),
            )
        }
        Err(e) => return message(StatusCode::INTERNAL_SERVER_ERROR, &auth, "Error", &e),
    };
    let grid = compare::suite_grid(&r);
    let done = r.steps.iter().filter(|s| !s.status.is_live()).count();
    let current = r
        .steps
        .iter()
        .find(|s| s.status == crate::model::StepStatus::Running);
    let running = r.suite.status == crate::model::RunStatus::Running || current.is_some();
    let progress = match current {
        Some(c) => format!("test {} of {} running: {}", c.index, r.steps.len(), c.label),
        None if running => format!("{done} of {} tests done", r.steps.len()),
        None => String::new(),
    };
    let rows: Vec<StepView> = r
        .steps
        .iter()
        .zip(grid.rows.iter())
        .map(|(s, g)| StepView {
            index: s.index,
            label: s.label.clone(),
            target: g[1].clone(),
            sent: g[2].clone(),
            bitrate: g[3].clone(),
            retr: g[4].clone(),
            jitter: g[5].clone(),
            lost_total: g[6].clone(),
            loss: g[7].clone(),
            cpu: g[8].clone(),
            status: s.status.to_string(),
            run_id: s.run_id,
            error: s.error.clone().unwrap_or_default(),
            verdict: crate::results::verdict::step_word(s).into(),
            checks: s
                .verdict
                .as_ref()
                .map(|v| {
                    let mut c: Vec<String> = v.checks.iter().map(|c| c.text.clone()).collect();
                    if v.checks.is_empty() {
                        c.extend(v.reasons.iter().cloned());
                    }
                    c
                })
                .unwrap_or_default(),
            latency: s.latency.map(|l| l.text()).unwrap_or_default(),
        })
        .collect();
    let with_latency = rows.iter().any(|r| !r.latency.is_empty());
    html(
        StatusCode::OK,
        &SuitePage {
            nav: true,
            csrf: auth.csrf().into(),
            version: version_string(),
            suite_id: r.suite.id,
            name: r.suite.name.clone(),
            label: r.label.clone(),
            status: r.suite.status.to_string(),
            peer: r.suite.peer_host.clone(),
            when: crate::model::time::fmt_time(r.suite.created_at),
            running,
            progress,
            rows,
            judged: r.steps.iter().any(|s| s.thresholds.is_some()),
            with_latency,
            verdict: r
                .verdict
                .as_ref()
                .map(|v| v.result.to_string())
                .unwrap_or_default(),
            verdict_lines: compare::verdict_lines(&r),
            text: grid.text(),
            markdown: compare::suite_markdown(&r),
        },
    )
}

async fn stop_suite(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<super::extract::CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    Ok(match run::stop_suite(&state.runs, id) {
        Ok(_) => redirect(&format!("/suites/{id}")),
        Err(e) => message(StatusCode::NOT_FOUND, &auth, "No such suite", &e),
    })
}

fn download(ct: &str, name: String, body: String) -> HttpResponse {
    super::respond::download(ct, &name, body)
}

fn plain_error(status: StatusCode, msg: &str) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/plain; charset=utf-8")
        .body(format!("{msg}\n"))
}

fn suite_export(state: &AppState, id: i64, md: bool) -> HttpResponse {
    match crate::results::suite_table::suite_result(&state.store, id) {
        Ok(Some(r)) if md => download(
            "text/markdown; charset=utf-8",
            format!("netperfd-suite-{id}.md"),
            compare::suite_markdown(&r),
        ),
        Ok(Some(r)) => download(
            "text/csv; charset=utf-8",
            format!("netperfd-suite-{id}.csv"),
            compare::suite_csv(&r),
        ),
        Ok(None) => plain_error(StatusCode::NOT_FOUND, &format!("there is no suite {id}")),
        Err(e) => plain_error(StatusCode::INTERNAL_SERVER_ERROR, &e),
    }
}

async fn suite_csv(_auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    suite_export(&state, path.into_inner(), false)
}

async fn suite_md(_auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    suite_export(&state, path.into_inner(), true)
}

// ---------------------------------------------------------------- compare

/// What a comparison's query selects.
struct Selection {
    runs: bool,
    ids: Vec<i64>,
    boards: bool,
    /// The query string that selects the same thing (for export links).
    query: String,
}

fn selection(q: &[(String, String)]) -> Result<Selection, CompareError> {
    let mut runs = String::new();
    let mut suites = String::new();
    for (k, v) in q {
        match k.as_str() {
            "runs" | "run" => {
                runs.push_str(v);
                runs.push(',');
            }
            "suites" | "suite" => {
                suites.push_str(v);
                suites.push(',');
            }
            _ => {}
        }
    }
    let boards = pairs_get(q, "layout") == Some("boards");
    let run_ids = compare::parse_ids("runs", &runs)?;
    let suite_ids = compare::parse_ids("suites", &suites)?;
    if !run_ids.is_empty() && !suite_ids.is_empty() {
        return Err(CompareError::Bad(
            "compare runs or suites, not both at once".into(),
        ));
    }
    let (is_runs, ids) = if suite_ids.is_empty() {
        (true, run_ids)
    } else {
        (false, suite_ids)
    };
    if ids.is_empty() {
        return Err(CompareError::Empty);
    }
    // The baseline (differences are against it) is shown first.
    let mut ids = ids;
    if let Some(b) = pairs_get(q, "baseline").filter(|b| !b.trim().is_empty()) {
        let what = if is_runs { "run" } else { "suite" };
        let b: i64 = b.trim().parse().map_err(|_| {
            CompareError::Bad(format!("baseline '{}' is not a {what} number", b.trim()))
        })?;
        let at = ids.iter().position(|&i| i == b).ok_or_else(|| {
            CompareError::Bad(format!(
                "the baseline {what} {b} is not among those compared"
            ))
        })?;
        let first = ids.remove(at);
        ids.insert(0, first);
    }
    let list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let query = format!(
        "{}={}{}",
        if is_runs { "runs" } else { "suites" },
        list.join(","),
        if boards { "&layout=boards" } else { "" }
    );
    Ok(Selection {
        runs: is_runs,
        ids,
        boards,
        query,
    })
}

fn comparison(
    state: &AppState,
    q: &[(String, String)],
) -> Result<(Selection, Comparison), CompareError> {
    let sel = selection(q)?;
    let c = if sel.runs {
        compare::compare_runs(&state.store, &sel.ids)?
    } else {
        compare::compare_suites(&state.store, &sel.ids)?
    };
    Ok((sel, c))
}

fn cmp_status(e: &CompareError) -> StatusCode {
    match e {
        CompareError::Empty | CompareError::Bad(_) => StatusCode::BAD_REQUEST,
        CompareError::NotFound(_) => StatusCode::NOT_FOUND,
        CompareError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    nav: bool,
    csrf: String,
    version: String,
    suites: bool,
    boards: bool,
    query: String,
    /// The same selection in the other layout (suites only).
    other_layout: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    markdown: String,
    /// "runs" or "suites", the compared ids ("4,5,6") and each column's (id, title), for the
    /// baseline picker.
    what: String,
    ids: String,
    columns: Vec<(i64, String)>,
    /// Differences between the compared runs or suites that make the figures less comparable
    /// (durations, peer ports, board ports; for suites also the number and kinds of steps).
    notes: Vec<String>,
}

/// Notes on runs `ids` that differ in duration, peer port or board port: one line per
/// property that differs, naming each run's value ("Durations differ: run 4 10 s, run 5 30 s").
fn run_differences(state: &AppState, ids: &[i64]) -> Vec<String> {
    let rows: Vec<crate::store::RunRow> = ids
        .iter()
        .filter_map(|&id| state.store.get_run(id).ok().flatten())
        .collect();
    let duration = |r: &crate::store::RunRow| -> String {
        match crate::results::asked::Asked::of(r).time_s {
            Some(t) => format!("{t} s"),
            None => match r.ended_at {
                Some(e) => format!("{:.0} s", (e - r.started_at) as f64 / 1000.0),
                None => "running".into(),
            },
        }
    };
    let board = |r: &crate::store::RunRow| -> String {
        crate::results::view::board_ports(r).unwrap_or_else(|| r.local_host.clone())
    };
    type Prop<'a> = (&'a str, &'a dyn Fn(&crate::store::RunRow) -> String);
    let props: [Prop<'_>; 3] = [
        ("Durations", &duration),
        ("Peer ports", &|r| r.peer_port.to_string()),
        ("Board ports", &board),
    ];
    let mut out = Vec::new();
    for (name, f) in props {
        let vals: Vec<String> = rows.iter().map(f).collect();
        if vals.iter().any(|v| v != &vals[0]) {
            let each: Vec<String> = rows
                .iter()
                .zip(&vals)
                .map(|(r, v)| format!("run {} {v}", r.id))
                .collect();
            out.push(format!("{name} differ: {}.", each.join(", ")));
        }
    }
    out
}

/// Notes on suites `ids` that differ in number or kind of steps, step durations, peer ports or
/// board ports ([`crate::results::suite_notes::suite_differences`]); suites that cannot be
/// loaded are left out (the comparison itself reports them).
fn suite_differences(state: &AppState, ids: &[i64]) -> Vec<String> {
    let results: Vec<_> = ids
        .iter()
        .filter_map(|&id| {
            crate::results::suite_table::suite_result(&state.store, id)
                .ok()
                .flatten()
        })
        .collect();
    crate::results::suite_notes::suite_differences(&results)
}

async fn compare_page(
    auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<Vec<(String, String)>>,
) -> HttpResponse {
    match comparison(&state, &q) {
        Ok((sel, c)) => {
            let g = compare::grid(&c, sel.boards);
            let list: Vec<String> = sel.ids.iter().map(|i| i.to_string()).collect();
            html(
                StatusCode::OK,
                &ComparePage {
                    nav: true,
                    csrf: auth.csrf().into(),
                    version: version_string(),
                    suites: !sel.runs,
                    boards: sel.boards,
                    other_layout: format!(
                        "suites={}{}",
                        list.join(","),
                        if sel.boards { "" } else { "&layout=boards" }
                    ),
                    query: sel.query,
                    header: g.header,
                    rows: g.rows,
                    markdown: compare::markdown(&c, sel.boards),
                    what: if sel.runs { "runs" } else { "suites" }.into(),
                    ids: list.join(","),
                    columns: c.columns.iter().map(|col| (col.id, col.title())).collect(),
                    notes: if sel.runs {
                        run_differences(&state, &sel.ids)
                    } else {
                        suite_differences(&state, &sel.ids)
                    },
                },
            )
        }
        Err(e) => message(cmp_status(&e), &auth, "Cannot compare", &e.to_string()),
    }
}

fn compare_export(state: &AppState, q: &[(String, String)], md: bool) -> HttpResponse {
    match comparison(state, q) {
        Ok((sel, c)) if md => download(
            "text/markdown; charset=utf-8",
            "netperfd-compare.md".into(),
            compare::markdown(&c, sel.boards),
        ),
        Ok((_, c)) => download(
            "text/csv; charset=utf-8",
            "netperfd-compare.csv".into(),
            compare::csv(&c),
        ),
        Err(e) => plain_error(cmp_status(&e), &e.to_string()),
    }
}

async fn compare_csv(
    _auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<Vec<(String, String)>>,
) -> HttpResponse {
    compare_export(&state, &q, false)
}

async fn compare_md(
    _auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<Vec<(String, String)>>,
) -> HttpResponse {
    compare_export(&state, &q, true)
}

// ---------------------------------------------------------------- API

async fn api_list(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    match state.store.suite_defs() {
        Ok(rows) => HttpResponse::Ok().json(
            rows.iter()
                .map(|r| json!({"id": r.id, "name": r.name, "builtin": r.builtin, "definition": r.body}))
                .collect::<Vec<_>>(),
        ),
        Err(e) => api_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn api_show(
    _auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> HttpResponse {
    match def_row(&state, &path) {
        Ok(r) => HttpResponse::Ok()
            .json(json!({"id": r.id, "name": r.name, "builtin": r.builtin, "definition": r.body})),
        Err((s, e)) => api_error(s, e),
    }
}

async fn api_create(
    ApiWrite { body, .. }: ApiWrite<web::Bytes>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    Ok(match import(&state, &body, false) {
        Ok(id) => HttpResponse::Created()
            .insert_header(("Location", format!("/api/suite-defs/{id}")))
            .json(json!({"id": id})),
        Err(e) => api_error(StatusCode::BAD_REQUEST, e),
    })
}

async fn api_update(
    ApiWrite { body, .. }: ApiWrite<web::Bytes>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    let row = match def_row(&state, &path) {
        Ok(r) => r,
        Err((s, e)) => return Ok(api_error(s, e)),
    };
    Ok(
        match SuiteDef::from_json(&body).and_then(|d| def::save(&state.store, Some(row.id), &d)) {
            Ok(id) => HttpResponse::Ok().json(json!({"id": id})),
            Err(e) => api_error(StatusCode::BAD_REQUEST, e),
        },
    )
}

async fn api_delete(
    _: ApiWrite,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    Ok(match def_row(&state, &path) {
        Ok(r) => match state.store.delete_suite_def(r.id) {
            Ok(_) => HttpResponse::NoContent().finish(),
            Err(e) => api_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        },
        Err((s, e)) => api_error(s, e),
    })
}

async fn api_run(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: Json(t),
    }: ApiWrite<Json<RunTargetForm>>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    let row = match def_row(&state, &path) {
        Ok(r) => r,
        Err((s, e)) => return Ok(api_error(s, e)),
    };
    // The target's numbers are read here, once; a bad one starts nothing.
    let started = t
        .to_target()
        .and_then(|t| run::start_def(&state.runs, &row, &t));
    Ok(match started {
        Ok(sid) => {
            super::audit::suite_started(&auth, &req, sid, &row.name);
            HttpResponse::Created()
                .insert_header(("Location", format!("/api/suites/{sid}")))
                .json(json!({"id": sid, "url": format!("/suites/{sid}")}))
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, e),
    })
}

async fn api_stop(
    _: ApiWrite,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, AuthError> {
    let id = path.into_inner();
    Ok(match run::stop_suite(&state.runs, id) {
        Ok(true) => HttpResponse::Accepted().json(json!({"id": id, "stopping": true})),
        Ok(false) => api_error(StatusCode::CONFLICT, format!("suite {id} is not running")),
        Err(e) => api_error(StatusCode::NOT_FOUND, e),
    })
}

async fn api_compare(
    _auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<Vec<(String, String)>>,
) -> HttpResponse {
    let (sel, c) = match comparison(&state, &q) {
        Ok(x) => x,
        Err(e) => return api_error(cmp_status(&e), e.to_string()),
    };
    match pairs_get(&q, "format").unwrap_or("json") {
        "json" => HttpResponse::Ok().json(json!({
            "comparison": c,
            "grid": compare::grid(&c, sel.boards),
        })),
        "csv" => HttpResponse::Ok()
            .content_type("text/csv; charset=utf-8")
            .body(compare::csv(&c)),
        "md" => HttpResponse::Ok()
            .content_type("text/markdown; charset=utf-8")
            .body(compare::markdown(&c, sel.boards)),
        "text" => HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body(compare::grid(&c, sel.boards).text()),
        f => api_error(
            StatusCode::BAD_REQUEST,
            format!("format must be json, csv, md or text, got '{f}'"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An rfc2544 step's own fields travel through the editor's JSON column and back unchanged;
    /// the column refuses what is not an object and a field that has its own column.
    #[test]
    fn the_editor_keeps_an_rfc2544_step_whole() {
        let step = Step::from_value(
            1,
            serde_json::json!({"kind": "rfc2544", "ingress": "eth0", "egress": "eth1",
                "sizes": "64,1518", "tests": "throughput,latency", "direction": "send",
                "label": "DUT", "thresholds": {"min_throughput_percent": 90}}),
        )
        .unwrap();
        let f = StepForm::from(&step);
        assert_eq!(
            f.rfc2544,
            r#"{"ingress":"eth0","egress":"eth1","sizes":"64,1518","tests":"throughput,latency"}"#
        );
        assert_eq!((f.direction.as_str(), f.label.as_str()), ("send", "DUT"));
        assert_eq!(f.to_step(1).unwrap(), step);
        // Other kinds have no RFC 2544 fields.
        let tcp = StepForm::from(&Step::Tcp(def::Iperf3Step::default()));
        assert_eq!(tcp.rfc2544, "");
        let bad = |rfc2544: &str| {
            StepForm {
                rfc2544: rfc2544.into(),
                ..f.clone()
            }
            .to_step(2)
            .unwrap_err()
        };
        assert!(bad("eth0").contains("step 2: the RFC 2544 fields are a JSON object"));
        assert!(bad(r#"{"label": "x"}"#).contains("'label' has its own column"));
        let e = StepForm {
            kind: "tcp".into(),
            ..f.clone()
        }
        .to_step(3)
        .unwrap_err();
        assert!(e.contains("a tcp step has no"), "{e}");
    }

    /// Issue 40 item 2: a suite run's target is read once, at the web edge: the form's and
    /// the API's numbers become a typed `RunTarget` before anything is planned, and a bad one
    /// is refused there in a test request's words (`run_def` answers 400 "Cannot run 'NAME':
    /// …", `api_run` 400 `{"error": …}`, and nothing starts).
    #[test]
    fn the_run_form_and_api_read_the_target_once() {
        let form = |body: &str| {
            serde_urlencoded::from_str::<RunForm>(body)
                .expect("form")
                .target
                .to_target()
        };
        let t = form("csrf=x&host=192.0.2.2&port=+5202+&time=2&label=DUT").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.time, t.label.as_deref()),
            ("192.0.2.2", Some(5202), Some(2), Some("DUT"))
        );
        let blank = form("csrf=x&host=h&port=&time=+").unwrap();
        assert_eq!((blank.port, blank.time), (None, None));
        for (body, want) in [
            ("host=h&port=70000", "port must be 1..65535, got 70000"),
            ("host=h&port=0", "port must be 1..65535, got 0"),
            ("host=h&port=x", "port must be a whole number, got 'x'"),
            ("host=h&time=0", "duration must be 1..86400, got 0"),
            (
                "host=h&time=1.5",
                "duration must be a whole number, got '1.5'",
            ),
        ] {
            assert_eq!(form(body).unwrap_err(), want, "{body}");
        }
        // The API's JSON: numbers or text, the same words.
        let api = |j: serde_json::Value| {
            serde_json::from_value::<RunTargetForm>(j)
                .expect("body")
                .to_target()
        };
        let t = api(json!({"host": "h", "port": 5202, "time": "3"})).unwrap();
        assert_eq!((t.port, t.time), (Some(5202), Some(3)));
        assert_eq!(
            api(json!({"host": "h", "time": 90000})).unwrap_err(),
            "duration must be 1..86400, got 90000"
        );
        assert_eq!(
            api(json!({"host": "h", "port": -1})).unwrap_err(),
            "port must be a whole number, got '-1'"
        );
    }
}
