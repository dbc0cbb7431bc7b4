//! The "Diagnostics" page and its API: what a field engineer would otherwise open a shell for
//! — ping and a tracepath-style path from a chosen port, a name lookup, a packet capture, the
//! neighbour and routing tables, the system (kernel, uptime, load, memory, storage, CPU clocks,
//! temperatures, netperfd's version and config without secrets), the daemon's recent log
//! lines and the unit's journal. Admin only (a session, or an API token of the admin scope —
//! reads too), forms CSRF-checked, each ping, path, lookup, capture and journal read logged
//! with who ran it, bounded (count, interval, size, hops, seconds, packets, bytes), one
//! diagnostic of a kind at a time per user, and no shell: a host or filter that is not valid
//! is refused before anything runs.
//!
//! Routes: `GET /diag` (page), `POST /diag/ping`, `POST /diag/path`, `POST /diag/lookup`,
//! `POST /diag/capture` (forms); `GET /api/diag/system`, `GET /api/diag/neighbours`,
//! `GET /api/diag/routes`, `POST /api/diag/ping`, `POST /api/diag/path`,
//! `POST /api/diag/lookup`, `GET /api/diag/logs`, `GET /api/diag/logs.txt`,
//! `GET /api/diag/journal.txt`, `POST /api/diag/capture`, `GET /api/diag/capture/{id}`,
//! `GET /api/diag/capture/{id}/pcap` (API). Packet captures: see `crate::engine::capture`;
//! files under `DATA/captures/`, removed after download or [`CAPTURE_RETENTION`].

use super::auth::{Auth, AuthError};
use super::extract::{ApiWrite, Form, Json};
use super::respond::html;
use super::AppState;
use crate::board::diag::{self as bd, Host};
use crate::engine::ping::{PingResult, PingSpec, MAX_SIZE, MIN_SIZE};
use crate::engine::report::version_string;
use crate::model::display;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// Most echo requests one ping sends.
pub(crate) const MAX_COUNT: u64 = 100;
/// Shortest time between echo requests, ms.
pub(crate) const MIN_INTERVAL_MS: u64 = 200;
/// Longest time between echo requests, ms.
pub(crate) const MAX_INTERVAL_MS: u64 = 10_000;
/// Longest a ping may send for (count × interval), ms.
pub(crate) const MAX_PING_MS: u64 = 60_000;
/// A request without a reply after this long is lost.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// Default count, interval (ms) and payload size (bytes), as `ping`'s.
pub(crate) const DEFAULT_COUNT: u64 = 4;
pub(crate) const DEFAULT_INTERVAL_MS: u64 = 1000;
pub(crate) const DEFAULT_SIZE: u64 = 56;
/// Log lines the page and `GET /api/diag/logs` show by default, and at most.
pub(crate) const DEFAULT_LOG_LINES: usize = 200;
pub(crate) const MAX_LOG_LINES: usize = crate::logging::RING_LINES;
/// Journal lines `GET /api/diag/journal.txt` returns by default.
pub(crate) const DEFAULT_JOURNAL_LINES: u32 = 200;

/// Register the routes.
pub(crate) fn configure(r: &mut super::routes::Routes) {
    use super::routes::ADMIN;
    r.get("/diag", ADMIN, page)
        .post("/diag/ping", ADMIN, form_ping)
        .post("/diag/lookup", ADMIN, form_lookup)
        .get("/api/diag/system", ADMIN, api_system)
        .get("/api/diag/neighbours", ADMIN, api_neighbours)
        .get("/api/diag/routes", ADMIN, api_routes)
        .post("/api/diag/ping", ADMIN, api_ping)
        .post("/api/diag/lookup", ADMIN, api_lookup)
        .get("/api/diag/logs", ADMIN, api_logs)
        .get("/api/diag/logs.txt", ADMIN, api_logs_text)
        .get("/api/diag/journal.txt", ADMIN, api_journal)
        .post("/diag/path", ADMIN, form_path)
        .post("/api/diag/path", ADMIN, api_path)
        .post("/diag/capture", ADMIN, form_capture)
        .post("/api/diag/capture", ADMIN, api_capture)
        .get("/api/diag/capture/{id}", ADMIN, api_capture_state)
        .get("/api/diag/capture/{id}/pcap", ADMIN, api_capture_pcap)
        // Deleting a capture (issue 37 item 4).
        .delete("/api/diag/capture/{id}", ADMIN, api_capture_delete)
        .post("/diag/capture/{id}/delete", ADMIN, form_capture_delete);
}

// ---------------------------------------------------------------- one at a time per user

static RUNNING: std::sync::Mutex<Vec<(String, &'static str)>> = std::sync::Mutex::new(Vec::new());

/// A diagnostic of one kind running for one user; dropping it frees the slot.
#[derive(Debug)]
struct Slot(String, &'static str);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = g.iter().position(|(u, k)| *u == self.0 && *k == self.1) {
            g.swap_remove(i);
        }
    }
}

/// Who, for the one-at-a-time rule: the browser session, or "API token" (tokens do not say
/// which one they are, so all of them share one slot per kind).
fn user_key(auth: &Auth) -> String {
    match auth {
        Auth::Session { token_hash, .. } => format!("session {token_hash}"),
        Auth::Token(_) => "API token".into(),
    }
}

fn claim(auth: &Auth, kind: &'static str) -> Result<Slot, String> {
    let user = user_key(auth);
    let mut g = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    if g.iter().any(|(u, k)| *u == user && *k == kind) {
        return Err(format!(
            "a {kind} of yours is running: wait for it to finish (one {kind} at a time)"
        ));
    }
    g.push((user.clone(), kind));
    Ok(Slot(user, kind))
}

// ---------------------------------------------------------------- ping

/// A ping request as the API takes it (`port` = board port to send from, `df` = set DF).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PingRequest {
    pub host: String,
    pub count: Option<u64>,
    pub interval_ms: Option<u64>,
    pub size: Option<u64>,
    pub port: Option<String>,
    pub df: Option<bool>,
}

/// The ping form's fields (text, as a browser sends them).
#[derive(Debug, Default, Deserialize)]
struct PingForm {
    csrf: Option<String>,
    #[serde(default)]
    host: String,
    count: Option<String>,
    interval_ms: Option<String>,
    size: Option<String>,
    port: Option<String>,
    df: Option<String>,
}

fn form_num(name: &str, v: &Option<String>) -> Result<Option<u64>, String> {
    match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s
            .parse::<u64>()
            .map(Some)
            .map_err(|_| format!("{name} '{s}' is not a whole number")),
    }
}

impl PingForm {
    fn request(&self) -> Result<PingRequest, String> {
        Ok(PingRequest {
            host: self.host.clone(),
            count: form_num("count", &self.count)?,
            interval_ms: form_num("interval", &self.interval_ms)?,
            size: form_num("size", &self.size)?,
            port: self.port.clone(),
            df: Some(self.df.is_some()),
        })
    }
}

/// A checked ping: the host and everything but the address.
struct PingPlan {
    host: Host,
    shown: String,
    count: u32,
    interval: Duration,
    size: usize,
    port: Option<String>,
    df: bool,
}

/// Check a ping request against the limits and the board's ports. Errors: one sentence
/// naming the field and the limit.
fn plan(r: &PingRequest) -> Result<PingPlan, String> {
    let host = bd::parse_host(&r.host)?;
    let count = r.count.unwrap_or(DEFAULT_COUNT);
    if !(1..=MAX_COUNT).contains(&count) {
        return Err(format!(
            "count {count} is out of range: 1 to {MAX_COUNT} echo requests"
        ));
    }
    let interval = r.interval_ms.unwrap_or(DEFAULT_INTERVAL_MS);
    if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&interval) {
        return Err(format!(
            "interval {interval} ms is out of range: {MIN_INTERVAL_MS} to {MAX_INTERVAL_MS} ms"
        ));
    }
    if count * interval > MAX_PING_MS {
        return Err(format!(
            "{count} requests every {interval} ms take {} s: at most {} s per ping",
            count * interval / 1000,
            MAX_PING_MS / 1000
        ));
    }
    let size = r.size.unwrap_or(DEFAULT_SIZE);
    if !(MIN_SIZE as u64..=MAX_SIZE as u64).contains(&size) {
        return Err(format!(
            "size {size} is out of range: {MIN_SIZE} to {MAX_SIZE} bytes of ICMP payload"
        ));
    }
    let port = r
        .port
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from);
    if let Some(p) = &port {
        let ports = crate::board::ports();
        if !ports.iter().any(|x| &x.name == p) {
            let names: Vec<&str> = ports.iter().map(|x| x.name.as_str()).collect();
            let shown: String = p.chars().take(20).flat_map(char::escape_default).collect();
            return Err(format!(
                "there is no port '{shown}' (ports: {})",
                names.join(", ")
            ));
        }
    }
    Ok(PingPlan {
        shown: r.host.trim().to_string(),
        host,
        count: count as u32,
        interval: Duration::from_millis(interval),
        size: size as usize,
        port,
        df: r.df.unwrap_or(false),
    })
}

/// Why a ping did not give a result: the request (400) or the board (500).
#[derive(Debug)]
enum PingError {
    Bad(String),
    Busy(String),
    Board(String),
    /// Not enough free space on the data file system (507).
    NoRoom(String),
}

impl PingError {
    fn status(&self) -> StatusCode {
        match self {
            PingError::Bad(_) => StatusCode::BAD_REQUEST,
            PingError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            PingError::Board(_) => StatusCode::INTERNAL_SERVER_ERROR,
            PingError::NoRoom(_) => StatusCode::INSUFFICIENT_STORAGE,
        }
    }
    fn text(&self) -> &str {
        match self {
            PingError::Bad(s) | PingError::Busy(s) | PingError::Board(s) | PingError::NoRoom(s) => {
                s
            }
        }
    }
}

async fn run_ping(
    auth: &Auth,
    req: &HttpRequest,
    r: &PingRequest,
) -> Result<PingResult, PingError> {
    let p = plan(r).map_err(PingError::Bad)?;
    let _slot = claim(auth, "ping").map_err(PingError::Busy)?;
    let from = p
        .port
        .as_deref()
        .map(|d| format!(" from {d}"))
        .unwrap_or_default();
    super::audit::diag_ran(
        auth,
        req,
        &format!(
            "ping {} ({} requests of {} bytes every {} ms{from}{})",
            p.shown,
            p.count,
            p.size,
            p.interval.as_millis(),
            if p.df { ", DF" } else { "" }
        ),
    );
    let res = web::block(move || {
        let target = bd::target(&p.host, p.port.as_deref()).map_err(PingError::Bad)?;
        crate::engine::ping::ping(&PingSpec {
            target,
            count: p.count,
            interval: p.interval,
            size: p.size,
            bind_dev: p.port.clone(),
            dont_fragment: p.df,
            timeout: REPLY_TIMEOUT,
        })
        .map_err(|e| PingError::Board(format!("cannot ping: {e}")))
    })
    .await;
    match res {
        Ok(r) => r,
        Err(e) => Err(PingError::Board(format!("ping did not finish: {e}"))),
    }
}

async fn api_ping(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: Json(r),
    }: ApiWrite<Json<PingRequest>>,
) -> Result<HttpResponse, AuthError> {
    Ok(match run_ping(&auth, &req, &r).await {
        Ok(res) => HttpResponse::Ok().json(res),
        Err(e) => super::respond::json_error(e.status(), e.text()),
    })
}

async fn form_ping(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<PingForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let mut v = Inputs {
        ping_host: form.host.clone(),
        count: form.count.clone().unwrap_or_default(),
        interval_ms: form.interval_ms.clone().unwrap_or_default(),
        size: form.size.clone().unwrap_or_default(),
        port: form.port.clone().unwrap_or_default(),
        df: form.df.is_some(),
        ..Inputs::default()
    };
    let res = match form.request() {
        Ok(r) => run_ping(&auth, &req, &r).await,
        Err(e) => Err(PingError::Bad(e)),
    };
    let status = match res {
        Ok(r) => {
            v.ping = Some(ping_view(&r));
            StatusCode::OK
        }
        Err(e) => {
            v.ping_error = Some(e.text().to_string());
            e.status()
        }
    };
    Ok(html(status, &build(&state, &auth, v).await))
}

// ---------------------------------------------------------------- path

/// A path request: `max_hops` 1..=30 (default 30), `port` = board port to send from.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathRequest {
    pub host: String,
    pub max_hops: Option<u64>,
    pub port: Option<String>,
}

/// How long a path probe waits for its answer (tried twice).
pub(crate) const PATH_TIMEOUT: Duration = Duration::from_secs(1);

async fn run_path(
    auth: &Auth,
    req: &HttpRequest,
    r: &PathRequest,
) -> Result<crate::engine::path::PathResult, PingError> {
    use crate::engine::path::{PathSpec, MAX_HOPS};
    let host = bd::parse_host(&r.host).map_err(PingError::Bad)?;
    let hops = r.max_hops.unwrap_or(MAX_HOPS as u64);
    if !(1..=MAX_HOPS as u64).contains(&hops) {
        return Err(PingError::Bad(format!(
            "max_hops {hops} is out of range: 1 to {MAX_HOPS}"
        )));
    }
    // The port check of a ping.
    let p = plan(&PingRequest {
        host: r.host.clone(),
        port: r.port.clone(),
        ..PingRequest::default()
    })
    .map_err(PingError::Bad)?;
    let _slot = claim(auth, "path").map_err(PingError::Busy)?;
    super::audit::diag_ran(
        auth,
        req,
        &format!(
            "path to {} (at most {hops} hops{})",
            r.host.trim(),
            p.port
                .as_deref()
                .map(|d| format!(" from {d}"))
                .unwrap_or_default()
        ),
    );
    let res = web::block(move || {
        let target = bd::target(&host, p.port.as_deref()).map_err(PingError::Bad)?;
        crate::engine::path::trace(&PathSpec {
            target,
            max_hops: hops as u8,
            bind_dev: p.port.clone(),
            timeout: PATH_TIMEOUT,
        })
        .map_err(|e| PingError::Board(format!("cannot trace the path: {e}")))
    })
    .await;
    match res {
        Ok(r) => r,
        Err(e) => Err(PingError::Board(format!("path did not finish: {e}"))),
    }
}

async fn api_path(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: Json(r),
    }: ApiWrite<Json<PathRequest>>,
) -> Result<HttpResponse, AuthError> {
    Ok(match run_path(&auth, &req, &r).await {
        Ok(res) => HttpResponse::Ok().json(res),
        Err(e) => super::respond::json_error(e.status(), e.text()),
    })
}

/// The path form's fields.
#[derive(Debug, Default, Deserialize)]
struct PathForm {
    csrf: Option<String>,
    #[serde(default)]
    host: String,
    max_hops: Option<String>,
    port: Option<String>,
}

async fn form_path(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<PathForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let mut v = Inputs {
        path_host: form.host.clone(),
        path_hops: form.max_hops.clone().unwrap_or_default(),
        port: form.port.clone().unwrap_or_default(),
        ..Inputs::default()
    };
    let res = match form_num("max hops", &form.max_hops) {
        Ok(h) => {
            run_path(
                &auth,
                &req,
                &PathRequest {
                    host: form.host.clone(),
                    max_hops: h,
                    port: form.port.clone(),
                },
            )
            .await
        }
        Err(e) => Err(PingError::Bad(e)),
    };
    let status = match res {
        Ok(r) => {
            v.path = Some(PingView {
                summary: format!("{}: {}", r.target, r.summary),
                rows: r
                    .hops
                    .iter()
                    .map(|h| Row {
                        cells: vec![
                            h.ttl.to_string(),
                            opt(h.address),
                            h.rtt_ms
                                .map(|t| format!("{t:.3} ms"))
                                .unwrap_or_else(|| "—".into()),
                            h.mtu.map(|m| m.to_string()).unwrap_or_default(),
                            h.note.clone().unwrap_or_default(),
                        ],
                    })
                    .collect(),
            });
            StatusCode::OK
        }
        Err(e) => {
            v.path_error = Some(e.text().to_string());
            e.status()
        }
    };
    Ok(html(status, &build(&state, &auth, v).await))
}

// ---------------------------------------------------------------- lookup

/// A name lookup request.
#[derive(Debug, Deserialize)]
struct LookupRequest {
    #[serde(default)]
    host: String,
    csrf: Option<String>,
}

async fn run_lookup(auth: &Auth, req: &HttpRequest, host: &str) -> Result<Value, PingError> {
    let h = bd::parse_host(host).map_err(PingError::Bad)?;
    let _slot = claim(auth, "lookup").map_err(PingError::Busy)?;
    super::audit::diag_ran(auth, req, &format!("name lookup of {}", host.trim()));
    let name = match &h {
        Host::Name(n) => n.clone(),
        Host::Addr(a) => a.to_string(),
        Host::LinkLocal(a, d) => format!("{a}%{d}"),
    };
    let t = std::time::Instant::now();
    let res = web::block(move || bd::lookup(&name))
        .await
        .map_err(|e| PingError::Board(format!("lookup did not finish: {e}")))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    match res {
        Ok(a) => Ok(json!({"host": host.trim(), "addresses": a, "ms": ms})),
        Err(e) => Err(PingError::Bad(e)),
    }
}

async fn api_lookup(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: Json(r),
    }: ApiWrite<Json<LookupRequest>>,
) -> Result<HttpResponse, AuthError> {
    Ok(match run_lookup(&auth, &req, &r.host).await {
        Ok(v) => HttpResponse::Ok().json(v),
        Err(e) => super::respond::json_error(e.status(), e.text()),
    })
}

async fn form_lookup(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<LookupRequest>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let mut v = Inputs {
        lookup_host: form.host.clone(),
        ..Inputs::default()
    };
    let status = match run_lookup(&auth, &req, &form.host).await {
        Ok(r) => {
            v.lookup = Some(
                r["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(String::from))
                    .collect(),
            );
            StatusCode::OK
        }
        Err(e) => {
            v.lookup_error = Some(e.text().to_string());
            e.status()
        }
    };
    Ok(html(status, &build(&state, &auth, v).await))
}

// ---------------------------------------------------------------- system, tables

/// netperfd's config as the Diagnostics page shows it: every setting but the admin password
/// hash, which shows only whether one is set.
fn config_json(state: &AppState) -> Value {
    let c = &state.config;
    json!({
        "listen": c.listen.to_string(),
        "data_dir": c.data_dir.display().to_string(),
        "admin_password": if state.needs_setup() { "not set" } else { "set (not shown)" },
        "iperf3_ports": c.iperf3_ports,
        "iperf2_ports": c.iperf2_ports,
        "session_hours": c.session_hours,
        "http_payload_port": c.http_payload_port,
        "tcp_sink_port": c.tcp_sink_port,
        "tcp_source_port": c.tcp_source_port,
        "echo_port": c.echo_port,
        "metrics_open": c.metrics_open,
        "schedule_min_period_s": c.schedule_min_period_s,
        "import_max_bytes": c.import_max_bytes,
        "setup_issue_file": c.setup_issue_file.display().to_string(),
        "capture_max_seconds": c.capture_max_seconds,
        "capture_max_packets": c.capture_max_packets,
        "capture_max_bytes": c.capture_max_bytes,
    })
}

fn system_json(state: &AppState) -> Value {
    let sys = bd::system(&state.config.data_dir);
    let mut v = serde_json::to_value(&sys).unwrap_or_else(|_| json!({}));
    if let Some(m) = v.as_object_mut() {
        m.insert(
            "netperfd".into(),
            json!({"version": version_string(), "config": config_json(state)}),
        );
    }
    v
}

async fn api_system(auth: Auth, state: web::Data<AppState>) -> Result<HttpResponse, AuthError> {
    let _ = auth;
    Ok(HttpResponse::Ok().json(system_json(&state)))
}

async fn api_neighbours(auth: Auth) -> Result<HttpResponse, AuthError> {
    let _ = auth;
    Ok(match bd::neighbours().await {
        Ok(n) => HttpResponse::Ok().json(json!({ "neighbours": n })),
        Err(e) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    })
}

async fn api_routes(auth: Auth) -> Result<HttpResponse, AuthError> {
    let _ = auth;
    Ok(match bd::routes().await {
        Ok(r) => HttpResponse::Ok().json(json!({ "routes": r })),
        Err(e) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    })
}

// ---------------------------------------------------------------- logs

/// Which log lines: `level` (error, warn, info, debug, trace: that and more severe), `q`
/// (text they contain), `lines` (how many of the newest; journal: how many to read).
#[derive(Debug, Default, Deserialize)]
struct LogQuery {
    level: Option<String>,
    q: Option<String>,
    lines: Option<String>,
    /// After `POST /diag/capture` (303 here): the capture just started, to say so.
    capture: Option<String>,
    /// After `POST /diag/capture/{id}/delete` (303 here): the capture just deleted.
    deleted: Option<String>,
}

impl LogQuery {
    fn level(&self) -> Result<Option<&str>, String> {
        match self
            .level
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            None => Ok(None),
            Some(l) if ["error", "warn", "info", "debug", "trace"].contains(&l) => Ok(Some(l)),
            Some(_) => Err("level must be error, warn, info, debug or trace".into()),
        }
    }
    fn lines(&self, default: usize, max: usize) -> Result<usize, String> {
        match self
            .lines
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            None => Ok(default),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(format!("lines must be a whole number from 1 to {max}")),
            },
        }
    }
    fn select(&self) -> Result<Vec<String>, String> {
        let n = self.lines(DEFAULT_LOG_LINES, MAX_LOG_LINES)?;
        Ok(crate::logging::recent(self.level()?, self.q.as_deref(), n))
    }
}

async fn api_logs(auth: Auth, q: web::Query<LogQuery>) -> Result<HttpResponse, AuthError> {
    let _ = auth;
    Ok(match q.select() {
        Ok(l) => HttpResponse::Ok().json(json!({ "lines": l })),
        Err(e) => super::respond::json_error(StatusCode::BAD_REQUEST, e),
    })
}

fn text_file(name: &str, body: String) -> HttpResponse {
    super::respond::download("text/plain; charset=utf-8", name, body)
}

async fn api_logs_text(auth: Auth, q: web::Query<LogQuery>) -> Result<HttpResponse, AuthError> {
    let _ = auth;
    Ok(match q.select() {
        Ok(l) => {
            let mut body = l.join("\n");
            body.push('\n');
            text_file("netperfd-log.txt", body)
        }
        Err(e) => super::respond::json_error(StatusCode::BAD_REQUEST, e),
    })
}

async fn api_journal(
    req: HttpRequest,
    auth: Auth,
    q: web::Query<LogQuery>,
) -> Result<HttpResponse, AuthError> {
    let n = match q.lines(
        DEFAULT_JOURNAL_LINES as usize,
        bd::MAX_JOURNAL_LINES as usize,
    ) {
        Ok(n) => n as u32,
        Err(e) => return Ok(super::respond::json_error(StatusCode::BAD_REQUEST, e)),
    };
    if bd::journalctl().is_none() {
        return Ok(super::respond::json_error(
            StatusCode::NOT_FOUND,
            "journalctl is not installed on this board",
        ));
    }
    let _slot = match claim(&auth, "journal read") {
        Ok(s) => s,
        Err(e) => return Ok(super::respond::json_error(StatusCode::TOO_MANY_REQUESTS, e)),
    };
    super::audit::diag_ran(&auth, &req, &format!("journal ({n} lines)"));
    Ok(match web::block(move || bd::journal(n)).await {
        Ok(Ok(t)) => text_file("netperfd-journal.txt", t),
        Ok(Err(e)) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    })
}

// ---------------------------------------------------------------- packet capture

/// Default length of a capture, seconds.
pub(crate) const DEFAULT_CAPTURE_SECONDS: u64 = 10;
/// Default packet cap of a capture.
pub(crate) const DEFAULT_CAPTURE_PACKETS: u64 = 10_000;
/// Default byte cap of a capture's pcap file (16 MiB).
pub(crate) const DEFAULT_CAPTURE_BYTES: u64 = 16 * 1024 * 1024;
/// Captures running at once, server-wide.
pub(crate) const MAX_RUNNING_CAPTURES: usize = 2;
/// A finished capture's file is removed this long after it ended if nobody downloads it.
pub(crate) const CAPTURE_RETENTION: Duration = Duration::from_secs(600);
/// A capture started with a run is kept this long after it ended, downloads included (it is
/// part of the run's evidence; [`MAX_CAPTURES_KEPT`] and the disk budget bound the disk).
pub(crate) const RUN_CAPTURE_RETENTION: Duration = Duration::from_secs(3600);
/// Captures kept at once (running, or finished and within their retention time). A capture
/// is never forgotten before its time: with this many kept a new one is refused (429) until
/// one expires or an admin deletes one. Removed ones (downloaded, expired, deleted) are
/// forgotten first.
pub(crate) const MAX_CAPTURES_KEPT: usize = 16;
/// The disk budget of captures: a capture is refused (507) when the data file system would be
/// left with less free space than the larger of this (bytes) …
pub(crate) const CAPTURE_MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;
/// … and this share of the file system's size, % — counting the new capture and every running
/// one at their byte caps.
pub(crate) const CAPTURE_MIN_FREE_PERCENT: u64 = 10;
/// Capture files downloaded at once, server-wide; beyond it a download is answered 503 with
/// a reason and `Retry-After`. Each download streams the file in [`PCAP_CHUNK`] reads.
pub(crate) const MAX_PCAP_DOWNLOADS: usize = 4;
/// Bytes of one read of a streamed capture download.
pub(crate) const PCAP_CHUNK: usize = 64 * 1024;

/// A capture request (`max_bytes`: the pcap file's size cap), for `POST /api/diag/capture`
/// and as the `capture` of a new run (`POST /api/runs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaptureRequest {
    pub port: String,
    pub seconds: Option<u64>,
    pub max_packets: Option<u64>,
    pub max_bytes: Option<u64>,
    pub filter: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum CapState {
    Running,
    Done(&'static str),
    Failed(String),
    /// Downloaded, expired or deleted: the file is gone.
    Removed(&'static str),
}

#[derive(Debug)]
struct CaptureJob {
    id: u64,
    port: String,
    filter: String,
    path: std::path::PathBuf,
    /// The pcap file's byte cap (what it may still grow to while running).
    max_bytes: u64,
    progress: std::sync::Arc<crate::engine::capture::Progress>,
    state: std::sync::Mutex<CapState>,
    ended_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// The run it was started with (its first seconds).
    run_id: std::sync::Mutex<Option<i64>>,
}

impl CaptureJob {
    fn new(id: u64, port: &str, filter: &str, path: std::path::PathBuf, max_bytes: u64) -> Self {
        CaptureJob {
            id,
            port: port.to_string(),
            filter: filter.to_string(),
            path,
            max_bytes,
            progress: Default::default(),
            state: std::sync::Mutex::new(CapState::Running),
            ended_at: std::sync::Mutex::new(None),
            run_id: std::sync::Mutex::new(None),
        }
    }
    fn state(&self) -> CapState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn set(&self, s: CapState) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }
    fn run_id(&self) -> Option<i64> {
        *self.run_id.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn ended_at(&self) -> Option<std::time::Instant> {
        *self.ended_at.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn retention(&self) -> Duration {
        if self.run_id().is_some() {
            RUN_CAPTURE_RETENTION
        } else {
            CAPTURE_RETENTION
        }
    }
    /// Kept: running, or finished with its file still there.
    fn kept(&self) -> bool {
        !matches!(self.state(), CapState::Removed(_))
    }
    /// Bytes its file may still grow by (0 once it ended).
    fn may_grow(&self) -> u64 {
        if self.state() == CapState::Running {
            use std::sync::atomic::Ordering::Relaxed;
            self.max_bytes
                .saturating_sub(self.progress.bytes.load(Relaxed))
        } else {
            0
        }
    }
    /// Stop it if running and remove its file; `why` is what the state says.
    fn remove(&self, why: &'static str) {
        self.progress
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.set(CapState::Removed(why));
        let _ = std::fs::remove_file(&self.path);
    }
    fn json(&self) -> Value {
        use std::sync::atomic::Ordering::Relaxed;
        let mut v = json!({
            "id": self.id,
            "port": self.port,
            "filter": self.filter,
            "packets": self.progress.packets.load(Relaxed),
            "bytes": self.progress.bytes.load(Relaxed),
            "max_bytes": self.max_bytes,
            "pcap": format!("/api/diag/capture/{}/pcap", self.id),
        });
        if let Some(r) = self.run_id() {
            v["run_id"] = json!(r);
        }
        let state = self.state();
        if state != CapState::Running {
            v["cpu_ms"] = json!(self.progress.cpu_us.load(Relaxed) as f64 / 1000.0);
        }
        if let (Some(t), true) = (self.ended_at(), self.kept()) {
            let left = self.retention().saturating_sub(t.elapsed());
            v["kept_seconds"] = json!(left.as_secs());
        }
        let (word, extra) = match state {
            CapState::Running => ("running", None),
            CapState::Done(why) => ("done", Some(("ended_by", json!(why)))),
            CapState::Failed(e) => ("failed", Some(("error", json!(e)))),
            CapState::Removed(why) => ("removed", Some(("removed", json!(why)))),
        };
        v["state"] = json!(word);
        if let Some((k, x)) = extra {
            v[k] = x;
        }
        v
    }
}

/// The free space a capture must leave on a file system of `total` bytes: the larger of
/// [`CAPTURE_MIN_FREE_BYTES`] and [`CAPTURE_MIN_FREE_PERCENT`] of `total`.
pub(crate) fn capture_reserve(total: u64) -> u64 {
    CAPTURE_MIN_FREE_BYTES.max(total / 100 * CAPTURE_MIN_FREE_PERCENT)
}

/// The known captures, in the order they were started.
struct CaptureList(std::sync::Mutex<Vec<std::sync::Arc<CaptureJob>>>);

impl CaptureList {
    const fn new() -> Self {
        CaptureList(std::sync::Mutex::new(Vec::new()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::Arc<CaptureJob>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The admission of a new capture and its place in the list, in one step under the
    /// list's lock (so two requests cannot both see a free slot): expire what is due, then
    /// refuse (429) when [`MAX_RUNNING_CAPTURES`] run or [`MAX_CAPTURES_KEPT`] are kept,
    /// refuse (507) when `room` (the data file system, `None` = unknown: not checked) would be
    /// left with less than [`capture_reserve`] with `job` and every running capture at its
    /// byte cap; else add `job` (running).
    fn admit(
        &self,
        job: CaptureJob,
        room: Option<&bd::Storage>,
    ) -> Result<std::sync::Arc<CaptureJob>, PingError> {
        let mut g = self.lock();
        expire(&mut g);
        let running = g.iter().filter(|j| j.state() == CapState::Running).count();
        if running >= MAX_RUNNING_CAPTURES {
            return Err(PingError::Busy(format!(
                "{running} captures are running (at most {MAX_RUNNING_CAPTURES} at once): wait for one to finish"
            )));
        }
        let kept: Vec<&std::sync::Arc<CaptureJob>> = g.iter().filter(|j| j.kept()).collect();
        if kept.len() >= MAX_CAPTURES_KEPT {
            let soonest = kept
                .iter()
                .filter_map(|j| {
                    j.ended_at()
                        .map(|t| j.retention().saturating_sub(t.elapsed()).as_secs())
                })
                .min();
            return Err(PingError::Busy(format!(
                "{} captures are kept (at most {MAX_CAPTURES_KEPT}; a capture stays for its retention time): delete one on the Diagnostics page (or DELETE /api/diag/capture/ID){}",
                kept.len(),
                soonest
                    .map(|s| format!(", or wait {s} s for the next one to expire"))
                    .unwrap_or_default()
            )));
        }
        if let Some(s) = room {
            let reserve = capture_reserve(s.total_bytes);
            let growing: u64 = g.iter().map(|j| j.may_grow()).sum();
            let after = s
                .available_bytes
                .saturating_sub(growing)
                .saturating_sub(job.max_bytes);
            if after < reserve {
                return Err(PingError::NoRoom(format!(
                    "not enough free space for a capture of up to {}: the data file system ({}) has {} free of {}{}, and captures must leave {} free (the larger of {} and {CAPTURE_MIN_FREE_PERCENT} %); delete captures or runs, or ask for a smaller max_bytes",
                    display::size(job.max_bytes as f64),
                    s.path,
                    display::size(s.available_bytes as f64),
                    display::size(s.total_bytes as f64),
                    if growing > 0 {
                        format!(" ({} more held for running captures)", display::size(growing as f64))
                    } else {
                        String::new()
                    },
                    display::size(reserve as f64),
                    display::size(CAPTURE_MIN_FREE_BYTES as f64),
                )));
            }
        }
        let job = std::sync::Arc::new(job);
        g.push(job.clone());
        Ok(job)
    }

    /// Forget capture `id` (it never started: its socket or file could not be opened).
    fn forget(&self, id: u64) {
        self.lock().retain(|j| j.id != id);
    }
}

static CAPTURES: CaptureList = CaptureList::new();
static NEXT_CAPTURE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn captures() -> std::sync::MutexGuard<'static, Vec<std::sync::Arc<CaptureJob>>> {
    CAPTURES.lock()
}

/// Remove the files of captures that ended more than their retention ago ([`CAPTURE_RETENTION`],
/// [`RUN_CAPTURE_RETENTION`] for a run's), and forget the oldest removed ones beyond
/// [`MAX_CAPTURES_KEPT`] (a kept capture is never forgotten early).
fn expire(g: &mut Vec<std::sync::Arc<CaptureJob>>) {
    for j in g.iter() {
        let old = j.ended_at().is_some_and(|t| t.elapsed() >= j.retention());
        if old && !matches!(j.state(), CapState::Removed(_) | CapState::Running) {
            let _ = std::fs::remove_file(&j.path);
            j.set(CapState::Removed("retention time passed"));
        }
    }
    while g.len() > MAX_CAPTURES_KEPT {
        let Some(i) = g.iter().position(|j| !j.kept()) else {
            break;
        };
        g.remove(i);
    }
}

fn expire_captures() {
    expire(&mut captures());
}

fn capture_dir(state: &AppState) -> std::path::PathBuf {
    captures_dir(&state.config.data_dir)
}

/// Where capture files are written: `DATA_DIR/captures`.
pub(crate) fn captures_dir(data_dir: &std::path::Path) -> std::path::PathBuf {
    data_dir.join("captures")
}

/// Remove the capture files a previous daemon left (the list of captures lives in memory, so
/// after a restart nothing could download or expire them): how many, and their bytes. Called
/// once at start, before the store is opened (on a full disk they are what frees it).
pub(crate) fn remove_stale_captures(data_dir: &std::path::Path) -> (usize, u64) {
    let Ok(rd) = std::fs::read_dir(captures_dir(data_dir)) else {
        return (0, 0);
    };
    let mut n = 0;
    let mut bytes = 0u64;
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("capture-") && name.ends_with(".pcap")) {
            continue;
        }
        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
        if std::fs::remove_file(e.path()).is_ok() {
            n += 1;
            bytes = bytes.saturating_add(len);
        }
    }
    (n, bytes)
}

/// The kept captures' files: how many and their bytes (for the storage notice).
pub(crate) fn kept_capture_bytes() -> (usize, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let g = captures();
    let kept: Vec<_> = g.iter().filter(|j| j.kept()).collect();
    (
        kept.len(),
        kept.iter().map(|j| j.progress.bytes.load(Relaxed)).sum(),
    )
}

/// A capture started with a run, refused: why, and the HTTP status that says it (400 bad
/// request, 429 a capture of this user's or two in all are running, or 16 are kept, 507 not
/// enough free space, 500 the board).
#[derive(Debug)]
pub(crate) struct RunCaptureError {
    pub status: StatusCode,
    pub error: String,
}

/// Check `r` and start the capture, before the run it belongs to starts (so its first
/// packets are in it): the capture's id. The same caps, one-per-user slot, disk budget and
/// audit line as `POST /api/diag/capture`. Then [`link_capture`] it to the run, or
/// [`give_up_capture`] when the run did not start.
pub(crate) fn start_run_capture(
    state: &AppState,
    auth: &Auth,
    req: &HttpRequest,
    r: &CaptureRequest,
) -> Result<u64, RunCaptureError> {
    start_capture(state, auth, req, r).map_err(|e| RunCaptureError {
        status: e.status(),
        error: format!("capture: {}", e.text()),
    })
}

/// Mark capture `id` as the run's (kept [`RUN_CAPTURE_RETENTION`], listed with the run).
pub(crate) fn link_capture(id: u64, run_id: i64) {
    if let Some(j) = captures().iter().find(|j| j.id == id) {
        *j.run_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(run_id);
    }
}

/// Stop capture `id` and remove its file (its run did not start).
pub(crate) fn give_up_capture(id: u64) {
    if let Some(j) = captures().iter().find(|j| j.id == id) {
        j.remove("the run did not start");
    }
}

/// The captures of run `run_id`, oldest first, as `GET /api/diag/capture/ID` gives them (`id`,
/// `port`, `filter`, `state`, `packets`, `bytes`, `pcap`, …).
pub(crate) fn run_captures(run_id: i64) -> Vec<Value> {
    expire_captures();
    captures()
        .iter()
        .filter(|j| j.run_id() == Some(run_id))
        .map(|j| j.json())
        .collect()
}

/// The port, seconds, most packets and most bytes of a capture request `r` (defaults put
/// in), checked against the port list and the configuration's caps `c`. Errors: which one
/// is wrong.
fn capture_limits<'a>(
    c: &crate::config::Config,
    r: &'a CaptureRequest,
) -> Result<(&'a str, u64, u64, u64), PingError> {
    let bad = |m: String| PingError::Bad(m);
    let port = r.port.trim();
    if !bd::valid_port_name(port) || !crate::board::ports().iter().any(|p| p.name == port) {
        let shown: String = port
            .chars()
            .take(20)
            .flat_map(char::escape_default)
            .collect();
        return Err(bad(format!("there is no port '{shown}'")));
    }
    let seconds = r.seconds.unwrap_or(DEFAULT_CAPTURE_SECONDS);
    if !(1..=c.capture_max_seconds as u64).contains(&seconds) {
        return Err(bad(format!(
            "seconds {seconds} is out of range: 1 to {} (capture_max_seconds)",
            c.capture_max_seconds
        )));
    }
    let max_packets = r
        .max_packets
        .unwrap_or(DEFAULT_CAPTURE_PACKETS.min(c.capture_max_packets));
    if !(1..=c.capture_max_packets).contains(&max_packets) {
        return Err(bad(format!(
            "max_packets {max_packets} is out of range: 1 to {} (capture_max_packets)",
            c.capture_max_packets
        )));
    }
    let max_bytes = r
        .max_bytes
        .unwrap_or(DEFAULT_CAPTURE_BYTES.min(c.capture_max_bytes));
    if !(1024..=c.capture_max_bytes).contains(&max_bytes) {
        return Err(bad(format!(
            "max_bytes {max_bytes} is out of range: 1024 to {} (capture_max_bytes)",
            c.capture_max_bytes
        )));
    }
    Ok((port, seconds, max_packets, max_bytes))
}

/// Check a capture request, admit it (caps, kept list, disk budget: one step), open its
/// socket and file and start it on its own thread; its id.
fn start_capture(
    state: &AppState,
    auth: &Auth,
    req: &HttpRequest,
    r: &CaptureRequest,
) -> Result<u64, PingError> {
    use crate::engine::capture;
    let bad = |m: String| PingError::Bad(m);
    let (port, seconds, max_packets, max_bytes) = capture_limits(&state.config, r)?;
    let filter_text = r.filter.clone().unwrap_or_default().trim().to_string();
    let filter = capture::Filter::parse(&filter_text).map_err(bad)?;
    let slot = claim(auth, "capture").map_err(PingError::Busy)?;
    let ifindex = nix::net::if_::if_nametoindex(port)
        .map_err(|_| bad(format!("there is no port '{port}'")))?;
    let dir = capture_dir(state);
    std::fs::create_dir_all(&dir)
        .map_err(|e| PingError::Board(format!("cannot make {}: {e}", dir.display())))?;
    let room = bd::storage(&dir).ok();
    let id = NEXT_CAPTURE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("capture-{id}.pcap"));
    let job = CAPTURES.admit(
        CaptureJob::new(id, port, &filter_text, path.clone(), max_bytes),
        room.as_ref(),
    )?;
    let opened = capture::open(ifindex)
        .map_err(|e| PingError::Board(format!("cannot capture on {port}: {e} (needs CAP_NET_RAW)")))
        .and_then(|sock| {
            std::fs::File::create(&path)
                .map(|f| (sock, f))
                .map_err(|e| PingError::Board(format!("cannot write {}: {e}", path.display())))
        });
    let (sock, file) = match opened {
        Ok(x) => x,
        Err(e) => {
            CAPTURES.forget(id);
            return Err(e);
        }
    };
    super::audit::diag_ran(
        auth,
        req,
        &format!(
            "capture {id} on {port} ({seconds} s, at most {max_packets} packets and {max_bytes} bytes, filter '{filter_text}')"
        ),
    );
    let spec = capture::CaptureSpec {
        duration: Duration::from_secs(seconds),
        max_packets,
        max_bytes,
        filter,
    };
    let j = job.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("capture-{id}"))
        .spawn(move || {
            let mut out = std::io::BufWriter::new(file);
            let res = capture::capture(&spec, sock, &mut out, &j.progress);
            drop(out);
            // Free the user's slot before the state says done: a client that sees "done"
            // may start the next capture at once.
            drop(slot);
            // A capture given up (its run did not start) or deleted stays removed.
            if j.state() == CapState::Running {
                j.set(match res {
                    Ok(e) => CapState::Done(e.word()),
                    Err(e) => CapState::Failed(e.to_string()),
                });
            }
            if let Ok(mut t) = j.ended_at.lock() {
                *t = Some(std::time::Instant::now());
            }
            tracing::info!("capture {} ended: {}", j.id, j.json());
        });
    if let Err(e) = spawned {
        let _ = std::fs::remove_file(&path);
        CAPTURES.forget(id);
        return Err(PingError::Board(format!("cannot start the capture: {e}")));
    }
    Ok(id)
}

async fn api_capture(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: Json(r),
    }: ApiWrite<Json<CaptureRequest>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    Ok(match start_capture(&state, &auth, &req, &r) {
        Ok(id) => HttpResponse::Created()
            .insert_header(("Location", format!("/api/diag/capture/{id}")))
            .json(json!({"id": id, "pcap": format!("/api/diag/capture/{id}/pcap")})),
        Err(e) => super::respond::json_error(e.status(), e.text()),
    })
}

fn find_capture(id: &str) -> Option<std::sync::Arc<CaptureJob>> {
    let id: u64 = id.parse().ok()?;
    captures().iter().find(|j| j.id == id).cloned()
}

async fn api_capture_state(auth: Auth, path: web::Path<String>) -> Result<HttpResponse, AuthError> {
    let _ = auth;
    expire_captures();
    Ok(match find_capture(&path) {
        Some(j) => HttpResponse::Ok().json(j.json()),
        None => super::respond::json_error(StatusCode::NOT_FOUND, "no such capture"),
    })
}

/// Delete capture `id` (stopped first if running): its file is removed at once and it is
/// listed as "removed (deleted)". Errors: 404 no such capture, 410 its file is gone already.
fn delete_capture(auth: &Auth, req: &HttpRequest, id: &str) -> Result<u64, (StatusCode, String)> {
    expire_captures();
    let Some(j) = find_capture(id) else {
        return Err((StatusCode::NOT_FOUND, "no such capture".into()));
    };
    if let CapState::Removed(why) = j.state() {
        return Err((
            StatusCode::GONE,
            format!("the capture file was removed already ({why})"),
        ));
    }
    j.remove("deleted");
    super::audit::diag_ran(auth, req, &format!("deletion of capture {}", j.id));
    Ok(j.id)
}

/// `DELETE /api/diag/capture/{id}` (admin, CSRF header for a session): 200 with the
/// capture's state (removed), 404 / 410 with a reason.
async fn api_capture_delete(
    req: HttpRequest,
    ApiWrite { auth, .. }: ApiWrite,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    Ok(match delete_capture(&auth, &req, &path) {
        Ok(_) => match find_capture(&path) {
            Some(j) => HttpResponse::Ok().json(j.json()),
            None => HttpResponse::Ok().json(json!({"state": "removed"})),
        },
        Err((s, e)) => super::respond::json_error(s, e),
    })
}

/// `POST /diag/capture/{id}/delete` (the page's button, CSRF field): the page again.
async fn form_capture_delete(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: Form<super::extract::CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let mut v = Inputs::default();
    match delete_capture(&auth, &req, &path) {
        Ok(id) => Ok(super::respond::redirect(&format!(
            "/diag?deleted={id}#capture"
        ))),
        Err((s, e)) => {
            v.cap_error = Some(e);
            Ok(html(s, &build(&state, &auth, v).await))
        }
    }
}

/// Capture downloads in progress; see [`MAX_PCAP_DOWNLOADS`].
static DOWNLOADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One of the [`MAX_PCAP_DOWNLOADS`] places; dropping it frees it.
struct DownloadPermit;

impl DownloadPermit {
    fn take() -> Option<DownloadPermit> {
        use std::sync::atomic::Ordering::SeqCst;
        DOWNLOADS
            .fetch_update(SeqCst, SeqCst, |n| {
                (n < MAX_PCAP_DOWNLOADS).then_some(n + 1)
            })
            .ok()
            .map(|_| DownloadPermit)
    }
}

impl Drop for DownloadPermit {
    fn drop(&mut self) {
        DOWNLOADS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The body of a download: `file` read in [`PCAP_CHUNK`] pieces on its own thread, at most
/// two pieces ahead of the client (memory stays at ~3 × 64 KiB whatever the file's size);
/// the thread, and `permit`, end when the file is sent or the client goes away.
fn file_stream(
    mut file: std::fs::File,
    permit: DownloadPermit,
) -> std::io::Result<tokio_stream::wrappers::ReceiverStream<std::io::Result<web::Bytes>>> {
    use std::io::Read;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<web::Bytes>>(2);
    std::thread::Builder::new()
        .name("pcap-download".into())
        .spawn(move || {
            let _permit = permit;
            loop {
                let mut buf = vec![0u8; PCAP_CHUNK];
                match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        buf.truncate(n);
                        if tx.blocking_send(Ok(web::Bytes::from(buf))).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        break;
                    }
                }
            }
        })?;
    Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
}

async fn api_capture_pcap(
    req: HttpRequest,
    auth: Auth,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    expire_captures();
    let Some(j) = find_capture(&path) else {
        return Ok(super::respond::json_error(
            StatusCode::NOT_FOUND,
            "no such capture",
        ));
    };
    match j.state() {
        CapState::Running => {
            return Ok(super::respond::json_error(
                StatusCode::CONFLICT,
                "the capture is still running: download it when its state is done",
            ))
        }
        CapState::Removed(why) => {
            return Ok(super::respond::json_error(
                StatusCode::GONE,
                format!("the capture file was removed ({why})"),
            ))
        }
        CapState::Failed(_) | CapState::Done(_) => {}
    }
    let Some(permit) = DownloadPermit::take() else {
        return Ok(HttpResponse::ServiceUnavailable()
            .insert_header(("Retry-After", "5"))
            .json(json!({"error": format!(
                "{MAX_PCAP_DOWNLOADS} capture downloads are in progress (at most {MAX_PCAP_DOWNLOADS} at once): try again when one has finished"
            )})));
    };
    let opened = std::fs::File::open(&j.path).and_then(|f| {
        let len = f.metadata()?.len();
        Ok((f, len))
    });
    let Ok((file, len)) = opened else {
        return Ok(super::respond::json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot read the capture file",
        ));
    };
    // A run's capture stays for its retention time (downloaded again from the run's page);
    // any other is removed once downloaded (the open file is still read to its end).
    if j.run_id().is_none() {
        let _ = std::fs::remove_file(&j.path);
        j.set(CapState::Removed("downloaded"));
    }
    let body = match file_stream(file, permit) {
        Ok(s) => s,
        Err(e) => {
            return Ok(super::respond::json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot start the download: {e}"),
            ))
        }
    };
    super::audit::diag_ran(&auth, &req, &format!("download of capture {}", j.id));
    Ok(HttpResponse::Ok()
        .content_type("application/vnd.tcpdump.pcap")
        .insert_header((
            "Content-Disposition",
            format!("attachment; filename=\"netperfd-{}-{}.pcap\"", j.port, j.id),
        ))
        .no_chunking(len)
        .streaming(body))
}

/// The capture form's fields.
#[derive(Debug, Default, Deserialize)]
struct CaptureForm {
    csrf: Option<String>,
    #[serde(default)]
    port: String,
    seconds: Option<String>,
    max_packets: Option<String>,
    filter: Option<String>,
}

async fn form_capture(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CaptureForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let mut v = Inputs {
        cap_port: form.port.clone(),
        cap_seconds: form.seconds.clone().unwrap_or_default(),
        cap_packets: form.max_packets.clone().unwrap_or_default(),
        cap_filter: form.filter.clone().unwrap_or_default(),
        ..Inputs::default()
    };
    let r = (|| -> Result<CaptureRequest, String> {
        Ok(CaptureRequest {
            port: form.port.clone(),
            seconds: form_num("seconds", &form.seconds)?,
            max_packets: form_num("max packets", &form.max_packets)?,
            max_bytes: None,
            filter: form.filter.clone(),
        })
    })();
    let res = match r {
        Ok(r) => start_capture(&state, &auth, &req, &r),
        Err(e) => Err(PingError::Bad(e)),
    };
    match res {
        // Post/redirect/get: reloading the page that says "Capture N started" is a GET and
        // starts nothing (it was the POST again, and started another capture).
        Ok(id) => Ok(super::respond::redirect(&format!(
            "/diag?capture={id}#capture"
        ))),
        Err(e) => {
            v.cap_error = Some(e.text().to_string());
            Ok(html(e.status(), &build(&state, &auth, v).await))
        }
    }
}

// ---------------------------------------------------------------- page

struct Row {
    cells: Vec<String>,
}

struct PingView {
    summary: String,
    rows: Vec<Row>,
}

fn ping_view(r: &PingResult) -> PingView {
    PingView {
        summary: format!("{} ({}): {}", r.target, r.socket, r.summary),
        rows: r
            .replies
            .iter()
            .map(|x| Row {
                cells: vec![
                    x.seq.to_string(),
                    x.rtt_ms
                        .map(|t| format!("{t:.3} ms"))
                        .unwrap_or_else(|| "no reply".into()),
                    x.bytes.map(|b| b.to_string()).unwrap_or_default(),
                    x.error.clone().unwrap_or_default(),
                ],
            })
            .collect(),
    }
}

/// What the forms held and what they gave.
#[derive(Default)]
struct Inputs {
    ping_host: String,
    count: String,
    interval_ms: String,
    size: String,
    port: String,
    df: bool,
    ping: Option<PingView>,
    ping_error: Option<String>,
    lookup_host: String,
    lookup: Option<Vec<String>>,
    lookup_error: Option<String>,
    level: String,
    q: String,
    path_host: String,
    path_hops: String,
    path: Option<PingView>,
    path_error: Option<String>,
    cap_port: String,
    cap_seconds: String,
    cap_packets: String,
    cap_filter: String,
    cap_started: Option<u64>,
    cap_deleted: Option<u64>,
    cap_error: Option<String>,
}

#[derive(Template)]
#[template(path = "diag.html")]
struct DiagPage {
    nav: bool,
    csrf: String,
    version: String,
    f: Inputs,
    ports: Vec<String>,
    system: Vec<(String, String)>,
    cores: Vec<Row>,
    thermal: Vec<Row>,
    config: Vec<(String, String)>,
    neighbours: Vec<Row>,
    neighbours_error: Option<String>,
    routes: Vec<Row>,
    routes_error: Option<String>,
    logs: Vec<String>,
    logs_error: Option<String>,
    logs_query: String,
    journal: bool,
    captures: Vec<Row>,
    cap_max_seconds: u32,
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "—".into())
}

fn uptime(s: f64) -> String {
    let s = s as u64;
    let (d, h, m) = (s / 86400, s / 3600 % 24, s / 60 % 60);
    if d > 0 {
        format!("{d} d {h} h {m} min")
    } else {
        format!("{h} h {m} min")
    }
}

async fn build(state: &AppState, auth: &Auth, f: Inputs) -> DiagPage {
    let sys = bd::system(&state.config.data_dir);
    let system = system_rows(&sys);
    let cores = sys
        .cores
        .iter()
        .map(|c| Row {
            cells: vec![
                format!("cpu{}", c.cpu),
                opt(c.mhz.map(|m| format!("{m:.0} MHz"))),
                opt(c.max_mhz.map(|m| format!("{m:.0} MHz"))),
                c.governor.clone().unwrap_or_else(|| "—".into()),
            ],
        })
        .collect();
    let thermal = sys
        .thermal
        .iter()
        .map(|t| Row {
            cells: vec![
                format!("thermal_zone{}", t.zone),
                t.kind.clone(),
                opt(t.temp_c.map(|c| format!("{c:.1} °C"))),
            ],
        })
        .collect();
    let config = config_json(state)
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let s = match v {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default();
    let (neighbours, neighbours_error) = neighbour_rows().await;
    let (routes, routes_error) = route_rows().await;
    let lq = LogQuery {
        level: Some(f.level.clone()),
        q: Some(f.q.clone()),
        ..LogQuery::default()
    };
    let (logs, logs_error) = match lq.select() {
        Ok(l) => (l, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let logs_query = format!(
        "level={}&q={}",
        super::pages::query_value(&f.level),
        super::pages::query_value(&f.q)
    );
    expire_captures();
    DiagPage {
        captures: capture_rows(),
        cap_max_seconds: state.config.capture_max_seconds,
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        ports: crate::board::ports().into_iter().map(|p| p.name).collect(),
        system,
        cores,
        thermal,
        config,
        neighbours,
        neighbours_error,
        routes,
        routes_error,
        logs,
        logs_error,
        logs_query,
        journal: bd::journalctl().is_some(),
        f,
    }
}

/// The System table: (label, value) rows for the board, kernel, load, memory, data
/// directory and netperfd's version.
fn system_rows(sys: &bd::System) -> Vec<(String, String)> {
    let mut system = Vec::new();
    if let Some(m) = &sys.model {
        system.push(("Board model".to_string(), m.clone()));
    }
    let k = &sys.kernel;
    system.push((
        "Kernel".into(),
        format!("{} {} {} {}", k.name, k.release, k.version, k.machine),
    ));
    system.push(("Host name".into(), k.hostname.clone()));
    system.push(("Uptime".into(), opt(sys.uptime_s.map(uptime))));
    system.push((
        "Load (1, 5, 15 min)".into(),
        opt(sys
            .load
            .map(|l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]))),
    ));
    system.push(("CPU cores".into(), sys.cpus.to_string()));
    if let Some(m) = sys.memory {
        system.push((
            "Memory".into(),
            format!(
                "{} total, {} available, swap {} of {} free",
                display::size(m.total_bytes as f64),
                display::size(m.available_bytes as f64),
                display::size(m.swap_free_bytes as f64),
                display::size(m.swap_total_bytes as f64)
            ),
        ));
    }
    if let Some(s) = &sys.storage {
        system.push((
            "Data directory".into(),
            format!(
                "{}: {} free of {} ({:.0} % used)",
                s.path,
                display::size(s.available_bytes as f64),
                display::size(s.total_bytes as f64),
                s.used_percent
            ),
        ));
    }
    system.push(("netperfd".into(), version_string()));
    system
}

/// The neighbour table's rows (port, address, MAC, state), or why it could not be read.
async fn neighbour_rows() -> (Vec<Row>, Option<String>) {
    match bd::neighbours().await {
        Ok(n) => (
            n.into_iter()
                .map(|n| Row {
                    cells: vec![
                        n.port,
                        n.address.to_string(),
                        n.mac.unwrap_or_else(|| "—".into()),
                        n.state,
                    ],
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    }
}

/// The routing table's rows (destination, gateway, port, source, metric, protocol, scope,
/// table), or why it could not be read.
async fn route_rows() -> (Vec<Row>, Option<String>) {
    match bd::routes().await {
        Ok(r) => (
            r.into_iter()
                .map(|r| Row {
                    cells: vec![
                        r.destination,
                        opt(r.gateway),
                        r.port.unwrap_or_else(|| "—".into()),
                        opt(r.source),
                        opt(r.metric),
                        r.protocol,
                        r.scope,
                        if r.table == 254 {
                            "main".into()
                        } else {
                            r.table.to_string()
                        },
                    ],
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    }
}

/// The captures' rows, newest first: id, port, filter, state, packets, size, and the links
/// to download (when it ended) and delete (while its file is kept).
fn capture_rows() -> Vec<Row> {
    captures()
        .iter()
        .rev()
        .map(|j| {
            let v = j.json();
            let state = v["state"].as_str().unwrap_or_default().to_string();
            Row {
                cells: vec![
                    j.id.to_string(),
                    j.port.clone(),
                    if j.filter.is_empty() {
                        "all".into()
                    } else {
                        j.filter.clone()
                    },
                    match (&v["ended_by"], &v["error"], &v["removed"]) {
                        (Value::String(b), _, _) => format!("{state} ({b})"),
                        (_, Value::String(e), _) => format!("{state}: {e}"),
                        (_, _, Value::String(r)) => format!("{state} ({r})"),
                        _ => state.clone(),
                    },
                    v["packets"].to_string(),
                    display::size(v["bytes"].as_f64().unwrap_or(0.0)),
                    if state == "done" || state == "failed" {
                        format!("/api/diag/capture/{}/pcap", j.id)
                    } else {
                        String::new()
                    },
                    if j.kept() {
                        format!("/diag/capture/{}/delete", j.id)
                    } else {
                        String::new()
                    },
                ],
            }
        })
        .collect()
}

async fn page(
    auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<LogQuery>,
) -> Result<HttpResponse, AuthError> {
    // The redirect's query only words a message: said only when the list agrees (a capture
    // that exists; one whose file was deleted), so a crafted link cannot claim either.
    let capture = |v: &Option<String>| v.as_deref().and_then(find_capture);
    let f = Inputs {
        level: q.level.clone().unwrap_or_default(),
        q: q.q.clone().unwrap_or_default(),
        cap_started: capture(&q.capture).map(|j| j.id),
        cap_deleted: capture(&q.deleted)
            .filter(|j| matches!(j.state(), CapState::Removed("deleted")))
            .map(|j| j.id),
        ..Inputs::default()
    };
    Ok(html(StatusCode::OK, &build(&state, &auth, f).await))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(
        host: &str,
        count: Option<u64>,
        interval: Option<u64>,
        size: Option<u64>,
    ) -> PingRequest {
        PingRequest {
            host: host.into(),
            count,
            interval_ms: interval,
            size,
            ..PingRequest::default()
        }
    }

    #[test]
    fn ping_limits_are_clear() {
        let e = |r: PingRequest| plan(&r).err().unwrap_or_default();
        assert!(e(req("192.0.2.2", Some(1_000_000_000), None, None))
            .contains("count 1000000000 is out of range: 1 to 100"));
        assert!(e(req("192.0.2.2", Some(0), None, None)).contains("count 0"));
        assert!(e(req("192.0.2.2", None, Some(10), None)).contains("interval 10 ms"));
        assert!(e(req("192.0.2.2", Some(100), Some(1000), None)).contains("at most 60 s"));
        assert!(e(req("192.0.2.2", None, None, Some(65508))).contains("size 65508"));
        assert!(e(req("192.0.2.2; reboot", None, None, None)).contains("not an address"));
        let mut r = req("192.0.2.2", None, None, None);
        r.port = Some("nope0".into());
        assert!(e(r).contains("no port 'nope0'"));
        let p = plan(&req("192.0.2.2", None, None, None)).unwrap();
        assert_eq!((p.count, p.interval.as_millis(), p.size), (4, 1000, 56));
    }

    #[test]
    fn one_diagnostic_of_a_kind_per_user() {
        let a = Auth::Session {
            token_hash: "t-one".into(),
            csrf: String::new(),
        };
        let b = Auth::Session {
            token_hash: "t-two".into(),
            csrf: String::new(),
        };
        let s = claim(&a, "ping").unwrap();
        assert!(claim(&a, "ping")
            .unwrap_err()
            .contains("one ping at a time"));
        let _other_kind = claim(&a, "lookup").unwrap();
        let _other_user = claim(&b, "ping").unwrap();
        drop(s);
        claim(&a, "ping").unwrap();
    }

    fn job(id: u64, max_bytes: u64) -> CaptureJob {
        CaptureJob::new(
            id,
            "eth0",
            "",
            std::path::PathBuf::from(format!("/nonexistent/capture-{id}.pcap")),
            max_bytes,
        )
    }

    fn done(j: &CaptureJob, ended: std::time::Instant, run: Option<i64>) {
        j.set(CapState::Done("time"));
        *j.ended_at.lock().unwrap() = Some(ended);
        *j.run_id.lock().unwrap() = run;
    }

    /// Issue 37 item 14: the running count and the admission are one step; 8 requests at
    /// once (different users) start exactly 2.
    #[test]
    fn concurrent_admissions_start_at_most_two() {
        for _ in 0..20 {
            let list = std::sync::Arc::new(CaptureList::new());
            let gate = std::sync::Arc::new(std::sync::Barrier::new(8));
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let (l, g) = (list.clone(), gate.clone());
                    std::thread::spawn(move || {
                        g.wait();
                        l.admit(job(i, 1024), None).is_ok()
                    })
                })
                .collect();
            let ok = hs
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|admitted| *admitted)
                .count();
            assert_eq!(ok, MAX_RUNNING_CAPTURES);
            let running = list
                .lock()
                .iter()
                .filter(|j| j.state() == CapState::Running)
                .count();
            assert_eq!(running, MAX_RUNNING_CAPTURES);
        }
    }

    /// Issue 37 item 13: a run's capture kept an hour is not pushed out by the 16-capture
    /// list; a new capture is refused with a clear 429 instead, and gets in once one is
    /// removed (deleted, downloaded) or expired.
    #[test]
    fn kept_captures_are_never_evicted_early() {
        let list = CaptureList::new();
        let now = std::time::Instant::now();
        for i in 0..MAX_CAPTURES_KEPT as u64 {
            let j = list.admit(job(i, 1024), None).unwrap();
            done(&j, now, Some(i as i64));
        }
        let e = list.admit(job(100, 1024), None).unwrap_err();
        assert_eq!(e.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            e.text().starts_with("16 captures are kept (at most 16")
                && e.text().contains("delete one on the Diagnostics page")
                && e.text().contains("wait 3599 s") | e.text().contains("wait 3600 s"),
            "{}",
            e.text()
        );
        {
            let g = list.lock();
            assert_eq!(g.len(), 16);
            assert!(g.iter().all(|j| j.kept()), "none evicted");
        }
        // One deleted: room for one more; the deleted one is forgotten, no kept one.
        list.lock()[3].remove("deleted");
        let j = list.admit(job(101, 1024), None).unwrap();
        done(&j, now, None);
        assert!(list.admit(job(102, 1024), None).is_err());
        {
            let mut g = list.lock();
            expire(&mut g);
            assert_eq!(g.len(), 16);
            assert!(g.iter().all(|j| j.kept()));
            assert!(!g.iter().any(|j| j.id == 3));
        }
        // One past its retention: expired (file removed), then room.
        if let Some(old) = now.checked_sub(CAPTURE_RETENTION + Duration::from_secs(1)) {
            done(&list.lock()[15], old, None);
            assert!(list.admit(job(103, 1024), None).is_ok());
        }
    }

    /// Issue 37 item 4: a capture must leave the larger of 64 MiB and 10 % free, counting
    /// running captures at their caps.
    #[test]
    fn captures_keep_to_the_disk_budget() {
        const MIB: u64 = 1024 * 1024;
        let fs = |total: u64, avail: u64| bd::Storage {
            path: "/data".into(),
            total_bytes: total,
            available_bytes: avail,
            used_percent: 0.0,
        };
        assert_eq!(capture_reserve(150 * MIB), 64 * MIB);
        assert_eq!(capture_reserve(10_000 * MIB), 1_000 * MIB);
        let list = CaptureList::new();
        // 150 MiB partition, 100 MiB free: a 64 MiB capture would leave 36 MiB.
        let e = list
            .admit(job(1, 64 * MIB), Some(&fs(150 * MIB, 100 * MIB)))
            .unwrap_err();
        assert_eq!(e.status(), StatusCode::INSUFFICIENT_STORAGE);
        assert!(
            e.text()
                .starts_with("not enough free space for a capture of up to 67.1 MB")
                && e.text().contains("has 104.9 MB free of 157.3 MB")
                && e.text().contains("must leave 67.1 MB free"),
            "{}",
            e.text()
        );
        assert!(list.lock().is_empty(), "nothing admitted");
        // 16 MiB fits (84 MiB left) …
        list.admit(job(2, 16 * MIB), Some(&fs(150 * MIB, 100 * MIB)))
            .unwrap();
        // … and holds its 16 MiB while it runs: another 16 MiB would leave 68 − 16 = 52 MiB
        // … counted from the 100 MiB free now (the first has written nothing yet).
        let e = list
            .admit(job(3, 24 * MIB), Some(&fs(150 * MIB, 100 * MIB)))
            .unwrap_err();
        assert!(
            e.text().contains("16.8 MB more held for running captures"),
            "{}",
            e.text()
        );
        // A big partition: 10 % of it.
        let e = list
            .admit(job(4, 64 * MIB), Some(&fs(10_000 * MIB, 1_050 * MIB)))
            .unwrap_err();
        assert!(
            e.text().contains("must leave 1,048.6 MB free"),
            "{}",
            e.text()
        );
    }

    #[test]
    fn form_numbers_must_be_numbers() {
        let f = PingForm {
            host: "192.0.2.2".into(),
            count: Some("4; reboot".into()),
            ..PingForm::default()
        };
        assert!(f.request().unwrap_err().contains("count '4; reboot'"));
    }
}
