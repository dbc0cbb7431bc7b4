//! The "Forwarding" page and its API: forwarding runs (a peer agent tests through the board,
//! optionally with forwarding + NAT set up for the run) and monitor-only runs (record the
//! board's ports while someone else's traffic flows), each one click / one call, stored in the
//! history. The peer agent's token is kept as a setting and never shown back.
//!
//! Routes: `GET /forwarding`, `POST /forwarding/run`, `POST /forwarding/monitor` (forms, CSRF);
//! `POST /api/forward`, `POST /api/monitor`, `POST /api/monitor/{id}/stop`, `GET /api/peer`
//! (API). Runs stop through the usual `/runs/{id}/stop` and `/api/runs/{id}/stop` too.

use super::auth::{Auth, AuthError};
use super::extract::Form;
use super::pages::CsrfForm;
use super::AppState;
use crate::board::apply::Controller;
use crate::engine::report::version_string;
use crate::model::display;
use crate::model::time::fmt_time;
use crate::runs::forward::{self, ForwardRequest, MonitorRequest, TOKEN_KEY, URL_KEY};
use crate::store::{RunFilter, RunRow};
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde_json::{json, Value};
use std::sync::Arc;

/// Register the routes.
pub fn configure(r: &mut super::routes::Routes) {
    use super::routes::{ADMIN, READ, RUN};
    r.get("/forwarding", READ, page)
        .post("/forwarding/run", ADMIN, form_forward)
        .post("/forwarding/monitor", ADMIN, form_monitor)
        .post("/forwarding/stop/{id}", ADMIN, form_stop)
        .post("/api/forward", RUN, api_forward)
        .post("/api/monitor", RUN, api_monitor)
        .post("/api/monitor/{id}/stop", RUN, api_stop)
        .get("/api/peer", READ, api_peer);
}

fn controller(state: &AppState) -> Arc<Controller> {
    state.board.clone()
}

fn stored_token(state: &AppState) -> Option<String> {
    state.store.setting(TOKEN_KEY).ok().flatten()
}

/// Validate and start a forwarding run. The agent address is stored for the next run once
/// the request is valid; a new token only once the run with it has completed (a mistyped
/// token never replaces the stored good one).
fn start_forward(state: &AppState, req: &ForwardRequest) -> Result<i64, String> {
    let stored = stored_token(state);
    let plan = req.plan(&crate::board::ports(), stored.as_deref())?;
    let ctl = controller(state);
    let (id, done) = forward::start_forward(&state.hub, Some(ctl), plan)?;
    remember_token(state, req.token.as_deref(), id, done);
    let _ = state.store.set_setting(URL_KEY, req.peer.trim());
    Ok(id)
}

/// Store `token` (a peer agent token given with run `id`, when it differs from the stored
/// one) once the run has completed, so a mistyped token never replaces the stored good one.
pub(super) fn remember_token(
    state: &AppState,
    token: Option<&str>,
    id: i64,
    done: tokio::task::JoinHandle<crate::model::RunStatus>,
) {
    let stored = stored_token(state);
    let new_token = token
        .map(str::trim)
        .filter(|t| !t.is_empty() && Some(*t) != stored.as_deref())
        .map(String::from);
    if let Some(t) = new_token {
        let store = state.store.clone();
        crate::engine::task::spawn(async move {
            match done.await {
                Ok(crate::model::RunStatus::Completed) => {
                    if let Err(e) = store.set_setting(TOKEN_KEY, &t) {
                        tracing::warn!("cannot store the peer token: {e}");
                    } else {
                        tracing::info!("run {id} completed: its peer token is stored for the next runs");
                    }
                }
                _ => tracing::info!(
                    "run {id} did not complete: the token given for it is not stored (the stored one stays)"
                ),
            }
        });
    }
}

fn start_monitor(state: &AppState, req: &MonitorRequest) -> Result<i64, String> {
    let plan = req.plan(&crate::board::ports())?;
    forward::start_monitor(&state.hub, plan).map(|(id, _)| id)
}

// ---------------------------------------------------------------- page

struct RunLine {
    id: i64,
    kind: String,
    when: String,
    status: String,
    what: String,
    peer: String,
    forwarded: String,
    ports: String,
    conntrack: String,
    error: String,
    live: bool,
}

fn rate(v: &Value) -> String {
    v.as_f64().map(display::rate).unwrap_or_else(|| "—".into())
}

fn run_line(r: &RunRow, live: bool) -> RunLine {
    let s = &r.summary;
    let forwarded = s
        .get("forwarded")
        .and_then(|f| f.as_object())
        .map(|m| {
            m.iter()
                .map(|(d, v)| {
                    format!(
                        "{}: {} ({:.0} pkt/s)",
                        d.replace("->", " → "),
                        rate(&v["bits_per_second"]),
                        v["packets_per_second"].as_f64().unwrap_or(0.0)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default();
    let ports = s
        .get("ports")
        .and_then(|p| p.as_object())
        .map(|m| {
            m.iter()
                .map(|(n, p)| {
                    let peak = if p["peak_rx_bits_per_second"].is_f64() {
                        format!(
                            " (peak {} / {})",
                            rate(&p["peak_rx_bits_per_second"]),
                            rate(&p["peak_tx_bits_per_second"])
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "{n} rx {} tx {}{peak}",
                        rate(&p["rx_bits_per_second"]),
                        rate(&p["tx_bits_per_second"])
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default();
    let what = if r.kind.forwards() {
        format!(
            "{} {} ({}:{}) via {}",
            r.protocol,
            crate::results::view::forward_direction(r),
            r.peer_host,
            r.peer_port,
            r.bind_dev.clone().unwrap_or_default().replace(',', " → ")
        )
    } else {
        let l = s["label"].as_str().unwrap_or(&r.peer_host).to_string();
        format!("{} {l}", r.bind_dev.clone().unwrap_or_default())
    };
    let peer = match (r.sender_bps, r.receiver_bps) {
        (Some(a), Some(b)) => format!("{} / {}", display::rate(a), display::rate(b)),
        _ => String::new(),
    };
    RunLine {
        id: r.id,
        kind: r.kind.as_str().to_string(),
        when: fmt_time(r.started_at),
        status: r.status.clone(),
        what,
        peer,
        forwarded,
        ports,
        conntrack: s
            .pointer("/conntrack/peak")
            .and_then(|v| v.as_i64())
            .map(|v| v.to_string())
            .unwrap_or_default(),
        error: r.error.clone().unwrap_or_default(),
        live,
    }
}

struct FwdForm {
    peer: String,
    target: String,
    port: String,
    ingress: String,
    egress: String,
    duration: String,
    parallel: String,
    direction: String,
    protocol: String,
    bitrate: String,
    length: String,
    nat: bool,
    mports: String,
    label: String,
    mduration: String,
}

#[derive(Template)]
#[template(path = "forwarding.html")]
struct ForwardingPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
    form: FwdForm,
    port_names: Vec<String>,
    token_note: String,
    runs: Vec<RunLine>,
}

fn g(o: &Option<String>, d: &str) -> String {
    o.clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| d.to_string())
}

fn render(
    state: &AppState,
    auth: &Auth,
    status: StatusCode,
    error: Option<String>,
    f: Option<&ForwardRequest>,
    m: Option<&MonitorRequest>,
) -> HttpResponse {
    let names: Vec<String> = crate::board::ports()
        .into_iter()
        .filter(|p| !p.loopback)
        .map(|p| p.name)
        .collect();
    let dflt = |i: usize| names.get(i).cloned().unwrap_or_default();
    let fr = f.cloned().unwrap_or_default();
    let form = FwdForm {
        peer: if fr.peer.is_empty() {
            state
                .store
                .setting(URL_KEY)
                .ok()
                .flatten()
                .unwrap_or_default()
        } else {
            fr.peer.clone()
        },
        target: fr.target.clone(),
        port: g(&fr.port, "5201"),
        ingress: if fr.ingress.is_empty() {
            dflt(0)
        } else {
            fr.ingress.clone()
        },
        egress: if fr.egress.is_empty() {
            dflt(1)
        } else {
            fr.egress.clone()
        },
        duration: g(&fr.duration, "10"),
        parallel: g(&fr.parallel, "1"),
        direction: g(&fr.direction, "send"),
        protocol: g(&fr.protocol, "tcp"),
        bitrate: g(&fr.bitrate, ""),
        length: g(&fr.length, ""),
        nat: f.is_none() || forward::truthy(&fr.nat),
        mports: m
            .map(|m| m.ports.clone())
            .unwrap_or_else(|| names.join(",")),
        label: m.and_then(|m| m.label.clone()).unwrap_or_default(),
        mduration: m.and_then(|m| m.duration.clone()).unwrap_or_default(),
    };
    let token_note = match stored_token(state) {
        Some(t) => format!(
            "a token is stored ({} characters); leave empty to use it",
            t.len()
        ),
        None => "no token stored yet".into(),
    };
    let runs = state
        .store
        .list_runs(&RunFilter {
            limit: Some(300),
            ..Default::default()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.kind.has_board_summary())
        .take(20)
        .map(|r| {
            let live = state.hub.is_live(r.id);
            run_line(&r, live)
        })
        .collect();
    let page = ForwardingPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error,
        form,
        port_names: names,
        token_note,
        runs,
    };
    super::pages::html(status, &page)
}

async fn page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    render(&state, &auth, StatusCode::OK, None, None, None)
}

async fn form_forward(
    req: actix_web::HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<ForwardRequest>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let mut f = form.into_inner();
    // A checkbox is absent when unticked.
    if f.nat.is_none() {
        f.nat = Some("off".into());
    }
    Ok(match start_forward(&state, &f) {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            super::pages::see_other(&format!("/runs/{id}"))
        }
        Err(e) => {
            f.token = None;
            render(
                &state,
                &auth,
                StatusCode::BAD_REQUEST,
                Some(e),
                Some(&f),
                None,
            )
        }
    })
}

async fn form_monitor(
    req: actix_web::HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<MonitorRequest>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let m = form.into_inner();
    Ok(match start_monitor(&state, &m) {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            super::pages::see_other("/forwarding")
        }
        Err(e) => render(
            &state,
            &auth,
            StatusCode::BAD_REQUEST,
            Some(e),
            None,
            Some(&m),
        ),
    })
}

async fn form_stop(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    state.hub.stop(path.into_inner());
    Ok(super::pages::see_other("/forwarding"))
}

// ---------------------------------------------------------------- API

use super::json_error as api_error;

fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice::<Value>(body)
        .map_err(|e| e.to_string())
        .and_then(forward::normalize)
        .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
        .map_err(|e| format!("invalid request body: {e}"))
}

fn created(id: i64) -> HttpResponse {
    HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/api/runs/{id}")))
        .json(json!({"id": id, "url": format!("/runs/{id}")}))
}

async fn api_forward(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf_header(&req)?;
    let f: ForwardRequest = match parse_body(&body) {
        Ok(f) => f,
        Err(e) => return Ok(api_error(StatusCode::BAD_REQUEST, e)),
    };
    Ok(match start_forward(&state, &f) {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            created(id)
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, e),
    })
}

async fn api_monitor(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf_header(&req)?;
    let m: MonitorRequest = match parse_body(&body) {
        Ok(m) => m,
        Err(e) => return Ok(api_error(StatusCode::BAD_REQUEST, e)),
    };
    Ok(match start_monitor(&state, &m) {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            created(id)
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, e),
    })
}

async fn api_stop(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf_header(&req)?;
    let id = path.into_inner();
    Ok(if state.hub.stop(id) {
        HttpResponse::Accepted().json(json!({"id": id, "stopping": true}))
    } else {
        api_error(StatusCode::CONFLICT, format!("run {id} is not active here"))
    })
}

async fn api_peer(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "url": state.store.setting(URL_KEY).ok().flatten(),
        "token_stored": stored_token(&state).is_some(),
    }))
}
