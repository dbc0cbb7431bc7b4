//! The "Forwarding" page and its API: forwarding runs (a peer agent tests through the board,
//! optionally with forwarding + NAT set up for the run) and monitor-only runs (record the
//! board's ports while someone else's traffic flows), each one click / one call, stored in the
//! history. The peer agent's token is kept as a setting and never shown back.
//!
//! Routes: `GET /forwarding`, `POST /forwarding/run`, `POST /forwarding/monitor` (forms, CSRF);
//! `POST /api/forward`, `POST /api/monitor`, `POST /api/monitor/{id}/stop`, `GET /api/peer`
//! (API). Runs stop through the usual `/runs/{id}/stop` and `/api/runs/{id}/stop` too.

use super::auth::{Auth, AuthError};
use super::extract::CsrfForm;
use super::extract::{invalid_body, ApiBody, ApiWrite, Form};
use super::AppState;
use crate::board::apply::Controller;
use crate::engine::report::version_string;
use crate::model::display;
use crate::model::time::fmt_time;
use crate::results::forward_summary::BoardFigures;
use crate::runs::forward::{self, ForwardRequest, MonitorRequest, TOKEN_KEY, URL_KEY};
use crate::store::{RunFilter, RunRow};
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::Arc;

/// Register the routes.
pub(crate) fn configure(r: &mut super::routes::Routes) {
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

/// Whether `auth` is an admin: a logged-in session or an admin-scope token.
pub(super) fn is_admin(auth: &Auth) -> bool {
    matches!(
        auth,
        Auth::Session { .. } | Auth::Token(super::auth::Scope::Admin)
    )
}

/// The board ports the caller's request travels through, the management ports: the port
/// holding the local address of its HTTP connection (see [`super::limits::LocalAddr`]), and
/// the port the board routes its answers to the caller through. Linux takes a packet for any
/// of its addresses on any port, so a caller on one port that sends to another port's address
/// (a route on the PC: issue 37's tryout) arrives on the first while the local address names
/// the second; the answers' route names the first. Empty when neither can be told.
pub(super) fn management_ports(req: &HttpRequest) -> Vec<String> {
    let ports = crate::board::ports();
    let holder = |ip: IpAddr| {
        ports
            .iter()
            .find(|p| p.addresses.iter().any(|a| a.to_canonical() == ip))
            .map(|p| p.name.clone())
    };
    let mut out = Vec::new();
    if let Some(local) = req.conn_data::<super::limits::LocalAddr>() {
        out.extend(holder(local.0));
    }
    if let Some(peer) = req.peer_addr() {
        if let Some(src) = crate::board::source_address_towards(peer.ip().to_canonical()) {
            out.extend(holder(src).filter(|p| !out.contains(p)));
        }
    }
    out
}

/// Refuse a run that would turn on forwarding with NAT through a port the caller's own
/// request travels through (a management port, [`management_ports`]) unless the caller is an
/// admin: a run-tests token must not bridge the management network into a lab (or out of it).
/// When no management port can be told, only an admin may turn NAT on.
pub(super) fn check_nat_scope(
    auth: &Auth,
    req: &HttpRequest,
    nat: bool,
    ingress: &str,
    egress: &str,
) -> Result<(), String> {
    if !nat || is_admin(auth) {
        return Ok(());
    }
    nat_scope_for(&management_ports(req), ingress, egress)
}

/// [`check_nat_scope`] for a caller whose requests travel through `management` ports.
fn nat_scope_for(management: &[String], ingress: &str, egress: &str) -> Result<(), String> {
    if management.is_empty() {
        return Err(
            "the port this request came in on cannot be told, so forwarding with NAT needs an admin".into(),
        );
    }
    match management
        .iter()
        .find(|m| m.as_str() == ingress.trim() || m.as_str() == egress.trim())
    {
        None => Ok(()),
        Some(m) => Err(format!(
            "forwarding with NAT through {m}, a port this request travels through (the management port), needs an admin: a run-tests token may turn NAT on only between other ports"
        )),
    }
}

/// Remember the agent address and token an admin's run `id` gave, once the run has
/// completed (a mistyped token or address never replaces the stored good pair, and the
/// stored token never becomes bound to an address it was not tried on); nothing for anyone
/// else, or for a run that used the stored token (its address is the stored one).
pub(super) fn remember_agent(
    state: &AppState,
    auth: &Auth,
    peer: &str,
    token: Option<&str>,
    id: i64,
    done: tokio::task::JoinHandle<crate::model::RunStatus>,
) {
    if !is_admin(auth) {
        return;
    }
    remember_pair(state, peer, token, id, done);
}

/// Validate and start a forwarding run. The stored agent token goes only to the stored agent
/// address (see [`forward::stored_token_for`]); NAT through the management port needs an
/// admin ([`check_nat_scope`]). An admin's run that gives a token stores it with its address
/// once it has completed ([`remember_agent`]); other callers change nothing stored.
fn start_forward(
    state: &AppState,
    auth: &Auth,
    http: &HttpRequest,
    req: &ForwardRequest,
) -> Result<i64, String> {
    let stored = forward::stored_token_for(&state.store, &req.peer, req.token.as_deref())?;
    let plan = req.plan(&crate::board::ports(), stored.as_deref())?;
    check_nat_scope(auth, http, plan.nat, &plan.ingress, &plan.egress)?;
    let ctl = controller(state);
    let (id, done) = forward::start_forward(&state.runs, Some(ctl), plan)?;
    remember_agent(state, auth, &req.peer, req.token.as_deref(), id, done);
    Ok(id)
}

/// Store `peer` and `token` (the agent address and token given with run `id`) once the run
/// has completed.
fn remember_pair(
    state: &AppState,
    peer: &str,
    token: Option<&str>,
    id: i64,
    done: tokio::task::JoinHandle<crate::model::RunStatus>,
) {
    let Some(t) = token.map(str::trim).filter(|t| !t.is_empty()) else {
        return;
    };
    let (t, url) = (t.to_string(), peer.trim().to_string());
    let store = state.store.clone();
    crate::engine::task::spawn(async move {
        match done.await {
            Ok(crate::model::RunStatus::Completed) => {
                match store
                    .set_setting(TOKEN_KEY, &t)
                    .and_then(|()| store.set_setting(URL_KEY, &url))
                {
                    Err(e) => tracing::warn!("cannot store the peer agent and token: {e}"),
                    Ok(()) => tracing::info!(
                        "run {id} completed: its peer agent address and token are stored for the next runs"
                    ),
                }
            }
            _ => tracing::info!(
                "run {id} did not complete: the agent address and token given for it are not stored (the stored ones stay)"
            ),
        }
    });
}

fn start_monitor(state: &AppState, req: &MonitorRequest) -> Result<i64, String> {
    let plan = req.plan(&crate::board::ports())?;
    forward::start_monitor(&state.runs, plan).map(|(id, _)| id)
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

fn run_line(r: &RunRow, live: bool) -> RunLine {
    let board = BoardFigures::of(r);
    let rate = |v: f64| {
        if v.is_finite() {
            display::rate(v)
        } else {
            "—".into()
        }
    };
    let forwarded = board
        .forwarded
        .iter()
        .flat_map(|f| &f.0)
        .map(|(d, v)| {
            format!(
                "{}: {} ({:.0} pkt/s)",
                d.replace("->", " → "),
                rate(v.bits_per_second),
                if v.packets_per_second.is_finite() {
                    v.packets_per_second
                } else {
                    0.0
                }
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let ports = board
        .ports
        .iter()
        .map(|(n, p)| {
            let peak = match (p.peak_rx_bits_per_second, p.peak_tx_bits_per_second) {
                (Some(rx), tx) => format!(
                    " (peak {} / {})",
                    rate(rx),
                    tx.map_or_else(|| "—".into(), rate)
                ),
                (None, _) => String::new(),
            };
            format!(
                "{n} rx {} tx {}{peak}",
                rate(p.rx_bits_per_second),
                rate(p.tx_bits_per_second)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let what = if r.kind.forwards() {
        format!(
            "{} {} ({}:{}) via {}",
            r.protocol,
            crate::results::view::forward_direction(r),
            r.peer_host,
            r.peer_port,
            crate::results::view::board_ports(r).unwrap_or_default()
        )
    } else {
        let l = board.label.clone().unwrap_or_else(|| r.peer_host.clone());
        format!(
            "{} {l}",
            crate::results::view::board_ports(r).unwrap_or_default()
        )
    };
    let peer = match (r.sender_bps, r.receiver_bps) {
        (Some(a), Some(b)) => format!("{} / {}", display::rate(a), display::rate(b)),
        _ => String::new(),
    };
    RunLine {
        id: r.id,
        kind: r.kind.as_str().to_string(),
        when: fmt_time(r.started_at),
        status: r.status.to_string(),
        what,
        peer,
        forwarded,
        ports,
        conntrack: board
            .conntrack_peak()
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
            let live = state.runs.registry().is_live(r.id);
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
    super::respond::html(status, &page)
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
    Ok(match start_forward(&state, &auth, &req, &f) {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            super::respond::redirect(&format!("/runs/{id}"))
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
            super::respond::redirect("/forwarding")
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
    state.runs.registry().stop(path.into_inner());
    Ok(super::respond::redirect("/forwarding"))
}

// ---------------------------------------------------------------- API

use super::respond::json_error as api_error;

/// A forwarding or monitor request's JSON body: an object read through `forward::normalize`,
/// then as `T`; 400 `{"error": "invalid request body: …"}` otherwise.
struct Fwd<T>(T);

impl<T: serde::de::DeserializeOwned + 'static> ApiBody for Fwd<T> {
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse> {
        serde_json::from_slice::<Value>(&body)
            .map_err(|e| e.to_string())
            .and_then(forward::normalize)
            .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
            .map(Fwd)
            .map_err(invalid_body)
    }
}

fn created(id: i64) -> HttpResponse {
    HttpResponse::Created()
        .insert_header((header::LOCATION, format!("/api/runs/{id}")))
        .json(json!({"id": id, "url": format!("/runs/{id}")}))
}

async fn api_forward(
    req: HttpRequest,
    ApiWrite { auth, body: Fwd(f) }: ApiWrite<Fwd<ForwardRequest>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    Ok(match start_forward(&state, &auth, &req, &f) {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            created(id)
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, e),
    })
}

async fn api_monitor(
    req: HttpRequest,
    ApiWrite { auth, body: Fwd(m) }: ApiWrite<Fwd<MonitorRequest>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    Ok(match start_monitor(&state, &m) {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            created(id)
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
    Ok(if state.runs.registry().stop(id) {
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

#[cfg(test)]
mod nat_scope_tests {
    use super::*;

    #[test]
    fn nat_through_any_port_the_request_travels_through_needs_an_admin() {
        // Issue 37's tryout: a PC on atkb0 sent to atkb1's address (a route on the PC), so the
        // local address named atkb1 while its packets and our answers used atkb0.
        let m = vec!["atkb1".to_string(), "atkb0".to_string()];
        let e = nat_scope_for(&m, "atkb2", "atkb0").unwrap_err();
        assert!(
            e.starts_with("forwarding with NAT through atkb0, a port this request travels through"),
            "{e}"
        );
        assert!(nat_scope_for(&m, "atkb1", "atkb2").is_err());
        assert_eq!(nat_scope_for(&m, "atkb2", "atkb3"), Ok(()));
        assert_eq!(nat_scope_for(&m, " atkb3 ", "atkb2"), Ok(()));
        assert!(nat_scope_for(&[], "atkb2", "atkb3")
            .unwrap_err()
            .contains("cannot be told"));
    }

    #[test]
    fn the_answers_route_names_the_source_address() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(crate::board::source_address_towards(lo), Some(lo));
        assert_eq!(
            crate::board::source_address_towards("0.0.0.0".parse().unwrap()),
            None
        );
    }
}
