//! Board control in the web UI and the JSON API: the Ports page (inventory with live rates,
//! addresses, static or DHCP with the lease, up/down, MTU, default gateway, forwarding with
//! NAT, CPU governor) and its API.
//! Every change goes through `system::apply` (apply → confirm within the window → or roll
//! back) unless "Apply unchecked" is asked for. Without CAP_NET_ADMIN everything is shown
//! read-only, with the reason. Writes need a session plus the CSRF token (form field `csrf`, or
//! the `X-CSRF-Token` header for the API), or a bearer token. API errors are
//! `{"error": "...", "kind": "..."}` with a 4xx/5xx status.
//! Not for: how changes are made or undone (system::apply and friends).

use super::auth::{Auth, AuthError};
use super::extract::{ApiBody, ApiWrite, Form};
use super::routes::{Routes, ADMIN, READ};
use super::AppState;
use crate::board::apply::{self, ApplyOptions, BoardView, Controller};
use crate::board::error::BoardError;
use crate::board::governor;
use crate::board::netconfig::Change;
use crate::board::shaper::TcNode;
use crate::engine::report::version_string;
use crate::model::display;
use crate::model::time::fmt_time;
use actix_web::{http::header, http::StatusCode, web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

/// Register the Ports page, its form posts, the board API and `/static/board.js`.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/ports", READ, ports_page)
        .post("/ports/change", ADMIN, change_form)
        .post("/ports/confirm", ADMIN, confirm_form)
        .post("/ports/rollback", ADMIN, rollback_form)
        .post("/ports/governor", ADMIN, governor_form)
        .post("/ports/settings", ADMIN, settings_form)
        .get("/api/ports", READ, api_ports)
        .get("/api/board", READ, api_board)
        .post("/api/board/changes", ADMIN, api_changes)
        .post("/api/board/confirm", ADMIN, api_confirm)
        .post("/api/board/rollback", ADMIN, api_rollback)
        .put("/api/board/settings", ADMIN, api_settings)
        .post("/api/ports/{port}/addresses", ADMIN, api_add_address)
        .delete(
            "/api/ports/{port}/addresses/{addr}/{prefix}",
            ADMIN,
            api_del_address,
        )
        .post("/api/ports/{port}/link", ADMIN, api_link)
        .put("/api/ports/{port}/addressing", ADMIN, api_addressing)
        .put("/api/gateway", ADMIN, api_set_gateway)
        .delete("/api/gateway", ADMIN, api_del_gateway)
        .post("/api/forwarding", ADMIN, api_forward_enable)
        .delete("/api/forwarding", ADMIN, api_forward_disable)
        .get("/api/governor", READ, api_governor)
        .put("/api/governor", ADMIN, api_set_governor)
        .get("/api/runs/{id}/net-config", READ, api_run_net_config);
}

/// The process's board controller (installed by the daemon at start; made here otherwise).
fn controller(state: &AppState) -> Arc<Controller> {
    state.board.clone()
}

/// The board address the request came in on: the Host header's address when it is one,
/// else the listener's address when it is a specific one.
pub(crate) fn management_address(req: &HttpRequest) -> Option<IpAddr> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let h = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        match host.rsplit_once(':') {
            Some((a, p)) if !a.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => a,
            _ => host,
        }
    };
    if let Ok(ip) = h.parse::<IpAddr>() {
        return Some(ip);
    }
    let local = req.app_config().local_addr().ip();
    (!local.is_unspecified()).then_some(local)
}

fn status(e: &BoardError) -> StatusCode {
    StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn api_error(e: &BoardError) -> HttpResponse {
    let mut body = json!({"error": e.to_string(), "kind": e.kind()});
    if let BoardError::Warning(w) = e {
        body["warning"] = json!(w);
    }
    HttpResponse::build(status(e)).json(body)
}

fn bad_request(msg: impl Into<String>) -> HttpResponse {
    api_error(&BoardError::Invalid(msg.into()))
}

// ---------------------------------------------------------------- API

async fn api_ports(
    _auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<PortsQuery>,
) -> HttpResponse {
    let c = controller(&state);
    match c.inventory().await {
        Ok(l) => {
            let qd = port_qdiscs().await;
            let mut v = with_qdiscs(l, &qd);
            if q.leases.is_some_and(|x| x != 0) {
                match c.addressing().await {
                    Ok((addressing, gw)) => add_addressing(&mut v, &addressing, gw.as_ref()),
                    Err(e) => return api_error(&e),
                }
            }
            HttpResponse::Ok().json(v)
        }
        Err(e) => api_error(&e),
    }
}

/// `GET /api/ports`'s query: `leases=1` adds each port's addressing (what the Ports page
/// refreshes live).
#[derive(Debug, Deserialize)]
struct PortsQuery {
    /// 1: add `dhcp`, `lease_rows` and `default_route` to each port.
    #[serde(default)]
    leases: Option<u8>,
}

/// Add to each port of `/api/ports?leases=1` `dhcp` (bool), `lease_rows` ([label, text]
/// pairs as the page shows them, [`lease_rows`]; empty while none is held) and
/// `default_route` ([`default_route_mark`]; empty when the default route is not there).
fn add_addressing(
    ports: &mut [serde_json::Value],
    addressing: &BTreeMap<String, crate::board::dhcp::PortDhcp>,
    gw: Option<&crate::board::addresses::Gateway>,
) {
    let now = crate::model::time::now_ms();
    for p in ports.iter_mut() {
        let Some(name) = p.get("name").and_then(|n| n.as_str()).map(str::to_string) else {
            continue;
        };
        let a = addressing.get(&name);
        let rows = a
            .and_then(|a| a.lease.as_ref())
            .map(|l| lease_rows(l, now, gw, &name))
            .unwrap_or_default();
        if let Some(o) = p.as_object_mut() {
            o.insert("dhcp".into(), json!(a.is_some_and(|a| a.method == "dhcp")));
            o.insert("lease_rows".into(), json!(rows));
            o.insert("default_route".into(), json!(default_route_mark(gw, &name)));
        }
    }
}

/// Each port's qdiscs and HTB classes by interface index, read now (netlink, off the
/// server's workers); empty when they cannot be read.
async fn port_qdiscs() -> BTreeMap<i32, Vec<TcNode>> {
    web::block(crate::board::shaper::read)
        .await
        .unwrap_or_default()
}

/// `/api/ports`: each port as [`crate::board::links::Link`] plus `qdiscs` (kind, handle,
/// parent, class, rate_bps / ceil_bps in bits/s, overhead, drops, overlimits, backlog_bytes,
/// qlen — the kernel's counters since the qdisc was made, skbs), `qdisc_drops` (the root
/// qdisc's drops, which include its children's) and `qdisc_view` (the page's words for them).
fn with_qdiscs(
    links: Vec<crate::board::links::Link>,
    qd: &BTreeMap<i32, Vec<TcNode>>,
) -> Vec<serde_json::Value> {
    links
        .into_iter()
        .map(|l| {
            let nodes = i32::try_from(l.index)
                .ok()
                .and_then(|i| qd.get(&i))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let mut v = serde_json::to_value(&l).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("qdiscs".into(), json!(nodes));
                o.insert("qdisc_drops".into(), json!(root_drops(nodes)));
                o.insert("qdisc_view".into(), json!(qdisc_views(nodes)));
            }
            v
        })
        .collect()
}

/// Drops of a port's root qdisc (they include its children's), skbs.
pub(crate) fn root_drops(nodes: &[TcNode]) -> u64 {
    nodes
        .iter()
        .find(|n| n.is_root())
        .map(|n| n.drops)
        .unwrap_or(0)
}

/// A port's queue as the Ports page shows it: the root qdisc and every qdisc or class with
/// a rate, each as ("tbf 100 Mbit/s", "backlog 0.003 MB (2 pkt) · drops 8,839 · overlimits
/// 70,403"); a qdisc with no queue (`noqueue`) has no counters line.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct QdiscView {
    pub what: String,
    pub stats: String,
}

/// See [`QdiscView`].
pub(crate) fn qdisc_views(nodes: &[TcNode]) -> Vec<QdiscView> {
    use crate::results::shaper::setting;
    nodes
        .iter()
        .filter(|n| n.is_root() || n.limit_bps().is_some())
        .map(|n| {
            let mut what = if n.class {
                format!("{} class {}", n.kind, n.handle)
            } else {
                n.kind.clone()
            };
            if let Some(r) = n.rate_bps {
                what = format!("{what} {}", setting(r));
            }
            if let Some(c) = n.ceil_bps.filter(|c| Some(*c) != n.rate_bps) {
                what = format!("{what} (ceil {})", setting(c));
            }
            let stats = if n.kind == "noqueue" {
                String::new()
            } else {
                format!(
                    "backlog {} ({} pkt) · drops {} · overlimits {}",
                    display::size(n.backlog_bytes as f64),
                    display::count(n.qlen),
                    display::count(n.drops),
                    display::count(n.overlimits)
                )
            };
            QdiscView { what, stats }
        })
        .collect()
}

async fn api_board(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    match controller(&state).view().await {
        Ok(v) => HttpResponse::Ok().json(v),
        Err(e) => api_error(&e),
    }
}

/// How to apply, as the API takes it (next to the change's own fields).
#[derive(Debug, Default, Deserialize)]
struct ApplyParams {
    /// Confirmation window, seconds (number or string).
    #[serde(default)]
    confirm_within: Option<serde_json::Value>,
    /// Apply without a confirmation window.
    #[serde(default)]
    unchecked: Option<bool>,
    /// Apply even when it removes the address the request came in on.
    #[serde(default)]
    force: Option<bool>,
}

impl ApplyParams {
    fn options(&self, req: &HttpRequest, source: &str) -> Result<ApplyOptions, BoardError> {
        let confirm_within = match &self.confirm_within {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Number(n)) => Some(
                n.as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| {
                        BoardError::Invalid(format!(
                            "confirm_within must be a whole number of seconds, got {n}"
                        ))
                    })?,
            ),
            Some(serde_json::Value::String(s)) if s.trim().is_empty() => None,
            Some(serde_json::Value::String(s)) => Some(s.trim().parse::<u32>().map_err(|_| {
                BoardError::Invalid(format!(
                    "confirm_within must be a whole number of seconds, got '{s}'"
                ))
            })?),
            Some(other) => {
                return Err(BoardError::Invalid(format!(
                    "confirm_within must be a whole number of seconds, got {other}"
                )))
            }
        };
        Ok(ApplyOptions {
            confirm_within,
            unchecked: self.unchecked.unwrap_or(false),
            force: self.force.unwrap_or(false),
            mgmt: management_address(req),
            source: source.into(),
        })
    }
}

/// A board change's JSON body as `T` (an empty or blank body reads as `{}`); one that does not
/// parse gets the board's 400 (`{"error": "invalid request body: …", "kind": "invalid"}`).
struct Board<T>(T);

impl<T: serde::de::DeserializeOwned + 'static> ApiBody for Board<T> {
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse> {
        let bad = |e: serde_json::Error| bad_request(format!("invalid request body: {e}"));
        if body.iter().all(|b| b.is_ascii_whitespace()) {
            return serde_json::from_str("{}").map(Board).map_err(bad);
        }
        serde_json::from_slice(&body).map(Board).map_err(bad)
    }
}

async fn run_changes(
    req: &HttpRequest,
    state: &AppState,
    changes: Vec<Change>,
    p: &ApplyParams,
) -> HttpResponse {
    let o = match p.options(req, "api") {
        Ok(o) => o,
        Err(e) => return api_error(&e),
    };
    match apply_or_defer(&controller(state), changes, o).await {
        Ok(Done::Applied(out)) => HttpResponse::Ok().json(out),
        Ok(Done::Deferred(p)) => HttpResponse::Accepted().json(json!({
            "applied": p.applied,
            "pending": null,
            "unchecked": true,
            "deferred_ms": DEFER.as_millis() as u64,
            "moved_to": p.moved_to,
            "message": p.cuts_off,
        })),
        Err(e) => api_error(&e),
    }
}

/// How long a change that takes away the request's own address waits, so that the answer
/// leaves first.
const DEFER: std::time::Duration = std::time::Duration::from_millis(500);

enum Done {
    Applied(apply::ApplyOutcome),
    Deferred(apply::Preview),
}

/// Apply, except a change asked for explicitly (unchecked or forced) that takes away the
/// address this request came in on: that one is answered first and applied [`DEFER`] later.
async fn apply_or_defer(
    c: &Arc<Controller>,
    changes: Vec<Change>,
    o: ApplyOptions,
) -> Result<Done, BoardError> {
    if o.mgmt.is_some() && (o.unchecked || o.force) {
        let p = c.preview(&changes, &o).await?;
        if p.cuts_off.is_some() {
            c.apply_later(changes, o, DEFER);
            return Ok(Done::Deferred(p));
        }
    }
    Ok(Done::Applied(c.apply(&changes, &o).await?))
}

/// `http://ADDR:PORT/ports` for each address the browser can continue at.
fn continue_urls(req: &HttpRequest, addrs: &[String]) -> Vec<String> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let port = match host.rsplit_once(':') {
        Some((a, p))
            if (!a.contains(':') || a.ends_with(']')) && p.bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!(":{p}")
        }
        _ => String::new(),
    };
    addrs
        .iter()
        .map(|a| {
            if a.contains(':') {
                format!("http://[{a}]{port}/ports")
            } else {
                format!("http://{a}{port}/ports")
            }
        })
        .collect()
}

#[derive(Deserialize)]
struct ChangesBody {
    changes: Vec<Change>,
    #[serde(flatten)]
    params: ApplyParams,
}

async fn api_changes(
    req: HttpRequest,
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<ChangesBody>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    Ok(run_changes(&req, &state, b.changes, &b.params).await)
}

async fn api_confirm(_: ApiWrite, state: web::Data<AppState>) -> Result<HttpResponse, AuthError> {
    Ok(match controller(&state).confirm().await {
        Ok(c) => HttpResponse::Ok().json(json!({"confirmed": c})),
        Err(e) => api_error(&e),
    })
}

async fn api_rollback(_: ApiWrite, state: web::Data<AppState>) -> Result<HttpResponse, AuthError> {
    Ok(
        match controller(&state).rollback("rolled back by the user").await {
            Ok(c) => HttpResponse::Ok().json(json!({"rolled_back": c})),
            Err(e) => api_error(&e),
        },
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsBody {
    #[serde(default)]
    confirm_window_secs: Option<u32>,
    #[serde(default)]
    firewall: Option<String>,
}

async fn api_settings(
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<SettingsBody>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    let c = controller(&state);
    Ok(
        match c.save_settings(b.confirm_window_secs, b.firewall.as_deref()) {
            Ok(()) => HttpResponse::Ok().json(json!({
                "confirm_window_secs": c.window_secs(),
                "firewall": c.backend_choice().name(),
            })),
            Err(e) => api_error(&e),
        },
    )
}

#[derive(Deserialize)]
struct AddressBody {
    address: String,
    #[serde(flatten)]
    params: ApplyParams,
}

async fn api_add_address(
    req: HttpRequest,
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<AddressBody>>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    let c = Change::AddAddress {
        port: path.into_inner(),
        address: b.address,
    };
    Ok(run_changes(&req, &state, vec![c], &b.params).await)
}

#[derive(Deserialize)]
struct QueryParams {
    #[serde(default)]
    confirm_within: Option<String>,
    #[serde(default)]
    unchecked: Option<String>,
    #[serde(default)]
    force: Option<String>,
    #[serde(default)]
    family: Option<String>,
    #[serde(default, rename = "in")]
    ingress: Option<String>,
    #[serde(default)]
    out: Option<String>,
}

fn truthy(s: &Option<String>) -> Option<bool> {
    s.as_deref()
        .map(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
}

impl QueryParams {
    fn params(&self) -> ApplyParams {
        ApplyParams {
            confirm_within: self.confirm_within.clone().map(serde_json::Value::String),
            unchecked: truthy(&self.unchecked),
            force: truthy(&self.force),
        }
    }
}

async fn api_del_address(
    req: HttpRequest,
    _: ApiWrite,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
    q: web::Query<QueryParams>,
) -> Result<HttpResponse, AuthError> {
    let (port, addr, prefix) = path.into_inner();
    let c = Change::DelAddress {
        port,
        address: format!("{addr}/{prefix}"),
    };
    Ok(run_changes(&req, &state, vec![c], &q.params()).await)
}

#[derive(Deserialize)]
struct LinkBody {
    #[serde(default)]
    up: Option<bool>,
    #[serde(default)]
    mtu: Option<serde_json::Value>,
    #[serde(flatten)]
    params: ApplyParams,
}

async fn api_link(
    req: HttpRequest,
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<LinkBody>>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    let mtu = match b.mtu {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(v) => Some(v.to_string()),
    };
    let c = Change::Link {
        port: path.into_inner(),
        up: b.up,
        mtu,
    };
    Ok(run_changes(&req, &state, vec![c], &b.params).await)
}

/// The body of `PUT /api/ports/{port}/addressing`: an unknown field is refused (400), so the
/// apply parameters are spelled out here (`deny_unknown_fields` does not work through
/// `flatten`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddressingBody {
    method: String,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    gateway: Option<String>,
    #[serde(default)]
    confirm_within: Option<serde_json::Value>,
    #[serde(default)]
    unchecked: Option<bool>,
    #[serde(default)]
    force: Option<bool>,
}

/// `PUT /api/ports/{port}/addressing` `{"method": "dhcp"}` or `{"method": "static",
/// "address": "10.0.0.2/24", "gateway": "10.0.0.1"}`: the port by DHCP or static, applied
/// like every change (confirm within the window, or rolled back).
async fn api_addressing(
    req: HttpRequest,
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<AddressingBody>>,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AuthError> {
    let params = ApplyParams {
        confirm_within: b.confirm_within,
        unchecked: b.unchecked,
        force: b.force,
    };
    let c = Change::Addressing {
        port: path.into_inner(),
        method: b.method,
        address: b.address,
        gateway: b.gateway,
    };
    Ok(run_changes(&req, &state, vec![c], &params).await)
}

#[derive(Deserialize)]
struct GatewayBody {
    via: String,
    #[serde(default)]
    port: Option<String>,
    #[serde(flatten)]
    params: ApplyParams,
}

async fn api_set_gateway(
    req: HttpRequest,
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<GatewayBody>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    if b.via.trim().is_empty() {
        return Ok(bad_request(
            "via is empty; DELETE /api/gateway?family=ipv4 removes the default route",
        ));
    }
    let c = Change::Gateway {
        via: Some(b.via),
        port: b.port,
        family: None,
    };
    Ok(run_changes(&req, &state, vec![c], &b.params).await)
}

async fn api_del_gateway(
    req: HttpRequest,
    _: ApiWrite,
    state: web::Data<AppState>,
    q: web::Query<QueryParams>,
) -> Result<HttpResponse, AuthError> {
    let c = Change::Gateway {
        via: None,
        port: None,
        family: Some(q.family.clone().unwrap_or_else(|| "ipv4".into())),
    };
    Ok(run_changes(&req, &state, vec![c], &q.params()).await)
}

#[derive(Deserialize)]
struct ForwardBody {
    #[serde(rename = "in")]
    ingress: String,
    out: String,
    #[serde(default)]
    nat: bool,
    #[serde(default)]
    ipv6: bool,
    #[serde(flatten)]
    params: ApplyParams,
}

async fn api_forward_enable(
    req: HttpRequest,
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<ForwardBody>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    let c = Change::ForwardEnable {
        ingress: b.ingress,
        egress: b.out,
        nat: b.nat,
        ipv6: b.ipv6,
    };
    Ok(run_changes(&req, &state, vec![c], &b.params).await)
}

async fn api_forward_disable(
    req: HttpRequest,
    _: ApiWrite,
    state: web::Data<AppState>,
    q: web::Query<QueryParams>,
) -> Result<HttpResponse, AuthError> {
    let (Some(i), Some(o)) = (q.ingress.clone(), q.out.clone()) else {
        return Ok(bad_request(
            "give the forwarding to disable as ?in=PORT&out=PORT",
        ));
    };
    let c = Change::ForwardDisable {
        ingress: i,
        egress: o,
    };
    Ok(run_changes(&req, &state, vec![c], &q.params()).await)
}

async fn api_governor(_auth: Auth) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "cores": governor::read(),
        "read_only_reason": governor::read_only_reason(),
    }))
}

#[derive(Deserialize)]
struct GovernorBody {
    governor: String,
}

async fn api_set_governor(
    ApiWrite { body: Board(b), .. }: ApiWrite<Board<GovernorBody>>,
) -> Result<HttpResponse, AuthError> {
    Ok(match governor::set(&b.governor) {
        Ok(c) => HttpResponse::Ok().json(json!({"cores": c})),
        Err(e) => api_error(&e),
    })
}

async fn api_run_net_config(
    _auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    let id = path.into_inner();
    match state.store.get_run(id) {
        Ok(Some(_)) => {}
        Ok(None) => return super::respond::run_not_found(id),
        Err(e) => {
            return super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
    match state.store.run_net_config(id) {
        Ok(c) => HttpResponse::Ok().json(json!({"id": id, "net_config": c})),
        Err(e) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

// ---------------------------------------------------------------- page

/// One address as the page shows it.
pub(crate) struct AddrView {
    /// `192.0.2.1/24`.
    pub text: String,
    /// netperfd may remove it (permanent, not link-local).
    pub managed: bool,
    /// Where it comes from when not managed.
    pub note: String,
}

/// "in 59 min 58 s (22:59:12 UTC)": when a lease runs out, from `now` (Unix ms).
fn expiry_text(at: i64, now: i64) -> String {
    let left = (at - now).max(0) / 1000;
    let (h, m, s) = (left / 3600, left % 3600 / 60, left % 60);
    let rel = if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 && s == 0 {
        format!("{m} min")
    } else if m > 0 {
        format!("{m} min {s} s")
    } else {
        format!("{s} s")
    };
    format!("in {rel} ({})", clock(at))
}

/// The rows of a lease of `port` as the page shows them: address, router, DNS, expiry (each
/// only when the lease has it), and why the lease's router is not the default route — only
/// while the board's IPv4 default route `gw` still leaves through another port (the note was
/// shown after that route had gone, from the new-user tryout).
pub(crate) fn lease_rows(
    l: &crate::board::dhcp::Lease,
    now: i64,
    gw: Option<&crate::board::addresses::Gateway>,
    port: &str,
) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Some(why) = &l.error {
        // One sentence under the "Refused" label: the reason, then what it means.
        let mut t = format!("{why}, so nothing of the DHCP server's lease was applied");
        if let Some(at) = l.error_at {
            t.push_str(&format!(" ({})", clock(at)));
        }
        v.push(("Refused".to_string(), t));
        return v;
    }
    if let Some(a) = &l.address {
        v.push(("Address".to_string(), a.clone()));
    }
    v.push((
        "Router".to_string(),
        l.router
            .map(|r| r.to_string())
            .unwrap_or_else(|| "none given".into()),
    ));
    v.push((
        "DNS".to_string(),
        if l.dns.is_empty() {
            "none given".into()
        } else {
            let mut t = l
                .dns
                .iter()
                .take(crate::board::dhcp::MAX_DNS)
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            if l.dns.len() > crate::board::dhcp::MAX_DNS {
                t.push_str(&format!(
                    " (+{} more)",
                    l.dns.len() - crate::board::dhcp::MAX_DNS
                ));
            }
            t
        },
    ));
    if let Some(d) = &l.domain {
        v.push(("Domain".to_string(), d.clone()));
    }
    let elsewhere = gw.is_some_and(|g| g.port.as_deref().is_some_and(|p| p != port));
    if let Some(n) = l.route_note.as_ref().filter(|_| elsewhere) {
        v.push(("Default route".to_string(), n.clone()));
    }
    if l.lease_secs
        .is_some_and(|s| s >= crate::board::dhcp::INFINITE_LEASE)
    {
        v.push(("Expires".to_string(), "never · lease infinite".to_string()));
    } else if let Some(at) = l.expires_at {
        let mut t = expiry_text(at, now);
        if let Some(s) = l.lease_secs {
            t.push_str(&format!(" · lease {s} s"));
        }
        v.push(("Expires".to_string(), t));
    }
    v
}

/// What the Ports page says on `port` when the board's IPv4 default route `gw` leaves
/// through it: "default route via 192.0.2.1"; empty otherwise (no default route, another
/// port's, or one without a port).
pub(crate) fn default_route_mark(
    gw: Option<&crate::board::addresses::Gateway>,
    port: &str,
) -> String {
    match gw {
        Some(g) if g.port.as_deref() == Some(port) => format!("default route via {}", g.via),
        _ => String::new(),
    }
}

/// One port as the page shows it.
pub(crate) struct PortRow {
    /// Interface name.
    pub name: String,
    /// Loopback (not changeable).
    pub loopback: bool,
    /// Administratively up.
    pub up: bool,
    /// "link" / "no link".
    pub carrier: String,
    /// MAC or "—".
    pub mac: String,
    /// Driver or "—".
    pub driver: String,
    /// "1000 Mb/s full" or "—".
    pub speed: String,
    /// MTU, bytes.
    pub mtu: u32,
    /// Addresses.
    pub addresses: Vec<AddrView>,
    /// By DHCP (else static).
    pub dhcp: bool,
    /// The lease's rows (see [`lease_rows`]); empty while none is held.
    pub lease: Vec<(String, String)>,
    /// "default route via 192.0.2.1" on the port the board's IPv4 default route leaves
    /// through, else empty (see [`default_route_mark`]).
    pub default_route: String,
    /// Live rates, formatted.
    pub rx_rate: String,
    /// Live rates, formatted.
    pub tx_rate: String,
    /// Packets per second, formatted.
    pub rx_pps: String,
    /// Packets per second, formatted.
    pub tx_pps: String,
    /// Totals, formatted.
    pub rx_total: String,
    /// Totals, formatted.
    pub tx_total: String,
    /// Error counters.
    pub errors: String,
    /// Drop counters: rx (`/proc/net/dev`) / tx (`/proc/net/dev` + the root qdisc's drops).
    pub dropped: String,
    /// The port's qdiscs (root, and those with a rate), see [`qdisc_views`].
    pub qdiscs: Vec<QdiscView>,
    /// Overruns (rx_over_errors).
    pub overruns: u64,
    /// FIFO errors rx/tx.
    pub fifo: String,
    /// The NIC facts panel: (what, value) — driver, firmware, speed/duplex, rings, offloads,
    /// IRQ → CPU; only those the port has (see [`nic_fact_rows`]).
    pub facts: Vec<(String, String)>,
}

/// The NIC facts panel of a port as (what, value) rows from what the driver gave and the
/// link's speed/duplex text ("—" when unknown): facts the port lacks are left out.
pub(crate) fn nic_fact_rows(
    f: &crate::board::counters::NicFacts,
    speed: &str,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(d) = &f.driver {
        out.push(("Driver".to_string(), d.clone()));
    }
    if let Some(fw) = &f.firmware {
        out.push(("Firmware".to_string(), fw.clone()));
    }
    if speed != "—" {
        out.push(("Speed / duplex".to_string(), speed.to_string()));
    }
    if let Some(r) = f.rings {
        out.push((
            "Rings".to_string(),
            format!(
                "rx {} of max {}, tx {} of max {}",
                r.rx, r.rx_max, r.tx, r.tx_max
            ),
        ));
    }
    if !f.offloads.is_empty() {
        let list = |on: bool| {
            f.offloads
                .iter()
                .filter(|(_, o)| *o == on)
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (on, off) = (list(true), list(false));
        let mut t = Vec::new();
        if !on.is_empty() {
            t.push(format!("on: {on}"));
        }
        if !off.is_empty() {
            t.push(format!("off: {off}"));
        }
        out.push(("Offloads".to_string(), t.join("; ")));
    }
    if !f.irqs.is_empty() {
        let t: Vec<String> = f
            .irqs
            .iter()
            .map(|(irq, cpus)| format!("IRQ {irq} → CPU {cpus}"))
            .collect();
        out.push(("IRQ → CPU".to_string(), t.join("; ")));
    }
    out
}

struct ForwardRow {
    ingress: String,
    egress: String,
    text: String,
}

struct LogView {
    when: String,
    source: String,
    changes: String,
    outcome: String,
    detail: String,
}

struct CoreView {
    cpu: u32,
    governor: String,
    freq: String,
}

#[derive(Template)]
#[template(path = "ports.html")]
struct PortsPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
    warning: Option<String>,
    /// Fields of the warned-about form, to send again with another mode.
    resubmit: Vec<(String, String)>,
    notice: Option<String>,
    /// The newest decided change when no other notice is shown (see [`outcome_notice`]):
    /// (CSS class, text).
    outcome: Option<(String, String)>,
    /// Seconds after which the page reloads itself (a deferred change's fate is known then).
    return_in: Option<u64>,
    writable: bool,
    read_only_reason: String,
    /// Confirmed addresses something else removed (see `BoardView::missing`).
    missing: Vec<String>,
    pending: bool,
    pending_changes: Vec<String>,
    pending_deadline: i64,
    pending_left: u64,
    ports: Vec<PortRow>,
    port_names: Vec<String>,
    gw4: String,
    gw6: String,
    forwards: Vec<ForwardRow>,
    backend: String,
    backend_error: String,
    backend_choice: String,
    ip_forward: String,
    window: u32,
    cores: Vec<CoreView>,
    governors: Vec<String>,
    /// Why the governor cannot be changed (empty when it can).
    governor_read_only: String,
    /// The image's DHCP client ("udhcpc (busybox /bin/busybox)"), empty when none.
    dhcp_client: String,
    /// Why no port can go to DHCP (empty when one can).
    dhcp_unavailable: String,
    log: Vec<LogView>,
}

impl PortsPage {
    /// Whether any port has NIC facts to show (the panel is left out otherwise).
    fn any_facts(&self) -> bool {
        self.ports.iter().any(|p| !p.facts.is_empty())
    }
}

fn pps(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} kpps", v / 1000.0)
    } else {
        format!("{v:.0} pps")
    }
}

fn port_rows(v: &BoardView, qd: &BTreeMap<i32, Vec<TcNode>>) -> Vec<PortRow> {
    v.ports
        .iter()
        .map(|l| {
            let nodes = i32::try_from(l.index)
                .ok()
                .and_then(|i| qd.get(&i))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let r = l.rates.unwrap_or_default();
            let c = &l.counters;
            let speed = match (l.speed_mbps, &l.duplex) {
                (Some(s), Some(d)) => format!("{s} Mb/s {d}"),
                (Some(s), None) => format!("{s} Mb/s"),
                _ => "—".into(),
            };
            let addressing = v.addressing.get(&l.name);
            PortRow {
                default_route: default_route_mark(v.ipv4_default_route.as_ref(), &l.name),
                dhcp: addressing.is_some_and(|a| a.method == "dhcp"),
                lease: addressing
                    .and_then(|a| a.lease.as_ref())
                    .map(|x| {
                        lease_rows(
                            x,
                            crate::model::time::now_ms(),
                            v.ipv4_default_route.as_ref(),
                            &l.name,
                        )
                    })
                    .unwrap_or_default(),
                name: l.name.clone(),
                loopback: l.loopback,
                up: l.up,
                carrier: if l.carrier { "link" } else { "no link" }.into(),
                mac: l.mac.clone().unwrap_or_else(|| "—".into()),
                driver: l.driver.clone().unwrap_or_else(|| "—".into()),
                speed: speed.clone(),
                mtu: l.mtu,
                addresses: l
                    .addresses
                    .iter()
                    .map(|a| AddrView {
                        text: a.address.to_string(),
                        managed: a.permanent && !a.address.is_link_local() && !l.loopback,
                        note: if a.address.is_link_local() {
                            "link-local".into()
                        } else if !a.permanent && a.address.is_ipv4() {
                            "DHCP".into()
                        } else if !a.permanent {
                            "SLAAC".into()
                        } else {
                            String::new()
                        },
                    })
                    .collect(),
                rx_rate: display::rate(r.rx_bits_per_second),
                tx_rate: display::rate(r.tx_bits_per_second),
                rx_pps: pps(r.rx_packets_per_second),
                tx_pps: pps(r.tx_packets_per_second),
                rx_total: display::size(c.rx_bytes as f64),
                tx_total: display::size(c.tx_bytes as f64),
                errors: format!("{} / {}", c.rx_errors, c.tx_errors),
                dropped: format!(
                    "{} / {}",
                    display::count(c.rx_dropped),
                    display::count(c.tx_dropped.saturating_add(root_drops(nodes)))
                ),
                qdiscs: qdisc_views(nodes),
                overruns: c.rx_overruns,
                fifo: format!("{} / {}", c.rx_fifo, c.tx_fifo),
                facts: if l.loopback {
                    Vec::new()
                } else {
                    nic_fact_rows(&crate::board::counters::nic_facts(&l.name), &speed)
                },
            }
        })
        .collect()
}

struct Notes {
    error: Option<String>,
    warning: Option<String>,
    resubmit: Vec<(String, String)>,
    notice: Option<String>,
    return_in: Option<u64>,
}

/// How long the newest decided change stays on the Ports page as a notice (ms).
const OUTCOME_SHOWN_MS: i64 = 10 * 60 * 1000;

/// "14:03:27 UTC": the time of day of Unix ms `ms`, as the board's log shows it.
fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// The notice for the newest change in the board's log when it was decided in the last
/// [`OUTCOME_SHOWN_MS`] at `now` (Unix ms): confirmed, rolled back (when and why), applied
/// unchecked, or a failed roll-back; None while it is pending or when it is older.
/// Returns (CSS class, text).
/// Changes stacked while one was pending are decided together (one confirm, one roll-back):
/// the notice names every one of them, oldest first (issue 22 item 11).
fn outcome_notice(log: &[crate::store::BoardLogRow], now: i64) -> Option<(String, String)> {
    let first = log.first()?;
    let at = first.decided_at.unwrap_or(first.at);
    if now - at > OUTCOME_SHOWN_MS {
        return None;
    }
    // Decided together: same outcome and reason, decided within a second of the newest.
    let together: Vec<&str> = log
        .iter()
        .take_while(|r| {
            r.outcome == first.outcome
                && r.detail == first.detail
                && r.decided_at.is_some()
                && r.decided_at.is_some_and(|d| (at - d).abs() <= 1000)
        })
        .map(|r| r.changes.as_str())
        .collect();
    let changes = if together.len() > 1 {
        together
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        first.changes.clone()
    };
    let l = crate::store::BoardLogRow {
        changes,
        ..first.clone()
    };
    let why = l
        .detail
        .as_deref()
        .filter(|d| !d.is_empty())
        .map(|d| format!(" — {d}"))
        .unwrap_or_default();
    let (class, text) = match l.outcome.as_str() {
        "confirmed" => ("ok", format!("Confirmed at {}: {}.", clock(at), l.changes)),
        "rolled back" => (
            "warn",
            format!("Rolled back at {}{why}: {}.", clock(at), l.changes),
        ),
        "unchecked" => (
            "ok",
            format!(
                "Applied unchecked at {} (no confirmation, no roll-back): {}.",
                clock(at),
                l.changes
            ),
        ),
        "roll-back failed" => (
            "error",
            format!("Roll-back failed at {}{why}: {}.", clock(at), l.changes),
        ),
        "failed" => (
            "error",
            format!("Failed at {}{why}: {}.", clock(at), l.changes),
        ),
        _ => return None,
    };
    Some((class.to_string(), text))
}

async fn render(state: &AppState, auth: &Auth, status: StatusCode, n: Notes) -> HttpResponse {
    let v = match controller(state).view().await {
        Ok(v) => v,
        Err(e) => {
            return HttpResponse::InternalServerError()
                .content_type("text/plain; charset=utf-8")
                .body(format!("cannot read the board: {e}"))
        }
    };
    let ports = port_rows(&v, &port_qdiscs().await);
    let mut governors: Vec<String> = v
        .governors
        .iter()
        .flat_map(|c| c.available.iter().cloned())
        .collect();
    crate::model::order::sort(&mut governors);
    governors.dedup();
    let outcome = if n.notice.is_none() && n.error.is_none() && n.warning.is_none() {
        outcome_notice(&v.log, crate::model::time::now_ms())
    } else {
        None
    };
    let page = PortsPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error: n.error,
        warning: n.warning,
        resubmit: n.resubmit,
        notice: n.notice,
        outcome,
        return_in: n.return_in,
        writable: v.writable,
        read_only_reason: v.read_only_reason.clone().unwrap_or_default(),
        missing: v.missing.clone(),
        pending: v.pending.is_some(),
        pending_changes: v
            .pending
            .as_ref()
            .map(|p| p.changes.clone())
            .unwrap_or_default(),
        pending_deadline: v.pending.as_ref().map(|p| p.deadline).unwrap_or(0),
        pending_left: v.pending.as_ref().map(|p| p.seconds_left).unwrap_or(0),
        port_names: v
            .ports
            .iter()
            .filter(|l| !l.loopback)
            .map(|l| l.name.clone())
            .collect(),
        ports,
        gw4: v
            .ipv4_default_route
            .as_ref()
            .map(|g| g.to_string())
            .unwrap_or_else(|| "none".into()),
        gw6: v
            .ipv6_default_route
            .as_ref()
            .map(|g| g.to_string())
            .unwrap_or_else(|| "none".into()),
        forwards: v
            .forwarding
            .forwards
            .iter()
            .map(|f| ForwardRow {
                ingress: f.ingress.clone(),
                egress: f.egress.clone(),
                text: f.to_string(),
            })
            .collect(),
        backend: v
            .forwarding
            .backend
            .map(|b| b.name().to_string())
            .unwrap_or_else(|| "none".into()),
        backend_error: v.forwarding.backend_error.clone().unwrap_or_default(),
        backend_choice: v.forwarding.backend_choice.clone(),
        ip_forward: format!(
            "IPv4 {}, IPv6 {}",
            if v.forwarding.ipv4_forwarding {
                "on"
            } else {
                "off"
            },
            if v.forwarding.ipv6_forwarding {
                "on"
            } else {
                "off"
            }
        ),
        window: v.confirm_window_secs,
        cores: v
            .governors
            .iter()
            .map(|c| CoreView {
                cpu: c.cpu,
                governor: c.governor.clone(),
                freq: c
                    .cur_khz
                    .map(|k| format!("{} MHz", k / 1000))
                    .unwrap_or_else(|| "—".into()),
            })
            .collect(),
        governors,
        governor_read_only: if v.governors.is_empty() {
            String::new()
        } else {
            governor::read_only_reason().unwrap_or_default()
        },
        dhcp_client: v.dhcp_client.clone().unwrap_or_default(),
        dhcp_unavailable: v.dhcp_unavailable.clone().unwrap_or_default(),
        log: v
            .log
            .iter()
            .map(|l| LogView {
                when: fmt_time(l.at),
                source: l.source.clone(),
                changes: l.changes.clone(),
                outcome: l.outcome.clone(),
                detail: l.detail.clone().unwrap_or_default(),
            })
            .collect(),
    };
    super::respond::html_no_store(status, &page)
}

fn plain() -> Notes {
    Notes {
        error: None,
        warning: None,
        resubmit: Vec::new(),
        notice: None,
        return_in: None,
    }
}

/// The Ports page after a form that failed: `e`'s sentence as the page's error, with `e`'s
/// status.
async fn failed(state: &AppState, auth: &Auth, e: &BoardError) -> HttpResponse {
    let n = Notes {
        error: Some(e.to_string()),
        ..plain()
    };
    render(state, auth, status(e), n).await
}

/// The Ports page (200) after the user decided the pending changes: "`what` at 14:03:27
/// UTC`by`: change; change." (`what`: "Confirmed", "Rolled back"; `by`: "" or " (by you)").
async fn decided(
    state: &AppState,
    auth: &Auth,
    what: &str,
    by: &str,
    changes: &[String],
) -> HttpResponse {
    let at = clock(crate::model::time::now_ms());
    let n = Notes {
        notice: Some(format!("{what} at {at}{by}: {}.", changes.join("; "))),
        ..plain()
    };
    render(state, auth, StatusCode::OK, n).await
}

fn see_ports() -> HttpResponse {
    super::respond::redirect("/ports")
}

async fn ports_page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    render(&state, &auth, StatusCode::OK, plain()).await
}

/// The change form: one operation (`op`) with its fields, and how to apply it (`mode`:
/// `apply`, `unchecked` or `force`).
#[derive(Debug, Deserialize, Default)]
struct ChangeForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    op: String,
    #[serde(default)]
    port: Option<String>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    up: Option<String>,
    #[serde(default)]
    mtu: Option<String>,
    #[serde(default)]
    via: Option<String>,
    #[serde(default)]
    family: Option<String>,
    #[serde(default, rename = "in")]
    ingress: Option<String>,
    #[serde(default)]
    out: Option<String>,
    #[serde(default)]
    nat: Option<String>,
    #[serde(default)]
    ipv6: Option<String>,
    /// `dhcp` or `static` (op `addressing`).
    #[serde(default)]
    method: Option<String>,
    /// The static IPv4 default route (op `addressing`).
    #[serde(default)]
    gateway: Option<String>,
    #[serde(default)]
    mode: Option<String>,
}

fn need(v: &Option<String>, what: &str) -> Result<String, BoardError> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .ok_or_else(|| BoardError::Invalid(format!("{what} is missing")))
}

impl ChangeForm {
    fn change(&self) -> Result<Change, BoardError> {
        let on = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty() && s != "0");
        Ok(match self.op.as_str() {
            "add_address" => Change::AddAddress {
                port: need(&self.port, "the port")?,
                address: need(&self.address, "the address")?,
            },
            "del_address" => Change::DelAddress {
                port: need(&self.port, "the port")?,
                address: need(&self.address, "the address")?,
            },
            "link" => Change::Link {
                port: need(&self.port, "the port")?,
                up: match self.up.as_deref().map(str::trim) {
                    Some("up") => Some(true),
                    Some("down") => Some(false),
                    None | Some("") => None,
                    Some(o) => {
                        return Err(BoardError::Invalid(format!(
                            "state must be up or down, got '{o}'"
                        )))
                    }
                },
                mtu: self.mtu.clone().filter(|m| !m.trim().is_empty()),
            },
            "gateway" => Change::Gateway {
                via: self.via.clone(),
                port: self.port.clone(),
                family: self.family.clone(),
            },
            "forward_enable" => Change::ForwardEnable {
                ingress: need(&self.ingress, "the ingress port")?,
                egress: need(&self.out, "the egress port")?,
                nat: on(&self.nat),
                ipv6: on(&self.ipv6),
            },
            "addressing" => Change::Addressing {
                port: need(&self.port, "the port")?,
                method: need(&self.method, "the method (dhcp or static)")?,
                address: self.address.clone(),
                gateway: self.gateway.clone(),
            },
            "forward_disable" => Change::ForwardDisable {
                ingress: need(&self.ingress, "the ingress port")?,
                egress: need(&self.out, "the egress port")?,
            },
            o => return Err(BoardError::Invalid(format!("unknown operation '{o}'"))),
        })
    }

    fn fields(&self) -> Vec<(String, String)> {
        let mut v = vec![("op".to_string(), self.op.clone())];
        for (k, x) in [
            ("port", &self.port),
            ("address", &self.address),
            ("up", &self.up),
            ("mtu", &self.mtu),
            ("via", &self.via),
            ("family", &self.family),
            ("in", &self.ingress),
            ("out", &self.out),
            ("nat", &self.nat),
            ("ipv6", &self.ipv6),
            ("method", &self.method),
            ("gateway", &self.gateway),
        ] {
            if let Some(x) = x {
                v.push((k.to_string(), x.clone()));
            }
        }
        v
    }
}

async fn change_form(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<ChangeForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let change = match form.change() {
        Ok(c) => c,
        Err(e) => return Ok(failed(&state, &auth, &e).await),
    };
    let mode = form.mode.as_deref().unwrap_or("apply");
    let force = mode == "force";
    let o = ApplyOptions {
        confirm_within: None,
        unchecked: mode == "unchecked",
        force: mode == "force",
        mgmt: management_address(&req),
        source: "web".into(),
    };
    Ok(
        match apply_or_defer(&controller(&state), vec![change], o).await {
            Ok(Done::Applied(_)) => see_ports(),
            Ok(Done::Deferred(p)) => {
                let urls = continue_urls(&req, &p.moved_to);
                let mut notice = format!(
                    "Applying in a moment: {}. This browser's address goes away{}",
                    p.applied.join("; "),
                    if urls.is_empty() {
                        ".".to_string()
                    } else {
                        format!("; continue at {}.", urls.join(" or "))
                    }
                );
                let mut return_in = None;
                if force {
                    // Applied after DEFER, then rolled back unless confirmed within the window.
                    let window = controller(&state)
                        .view()
                        .await
                        .map(|v| v.confirm_window_secs);
                    if let Ok(w) = window {
                        let back_ms = DEFER.as_millis() as i64 + i64::from(w) * 1000;
                        let at = crate::model::time::now_ms() + back_ms;
                        notice.push_str(&format!(
                            " Unless it is confirmed there within {w} s, the old configuration \
                             comes back at {} and this page returns by itself then.",
                            clock(at)
                        ));
                        // A few seconds after the roll-back, so that the address is back.
                        return_in = Some(back_ms.unsigned_abs().div_ceil(1000) + 3);
                    }
                } else {
                    notice.push_str(" Applied unchecked: nothing is rolled back.");
                }
                let n = Notes {
                    notice: Some(notice),
                    return_in,
                    ..plain()
                };
                render(&state, &auth, StatusCode::ACCEPTED, n).await
            }
            Err(e @ BoardError::Warning(_)) => {
                let n = Notes {
                    warning: Some(e.to_string()),
                    resubmit: form.fields(),
                    ..plain()
                };
                render(&state, &auth, status(&e), n).await
            }
            Err(e) => failed(&state, &auth, &e).await,
        },
    )
}

use super::extract::CsrfForm;

async fn confirm_form(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(match controller(&state).confirm().await {
        Ok(c) => decided(&state, &auth, "Confirmed", "", &c).await,
        Err(e) => failed(&state, &auth, &e).await,
    })
}

async fn rollback_form(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(
        match controller(&state).rollback("rolled back by the user").await {
            Ok(c) => decided(&state, &auth, "Rolled back", " (by you)", &c).await,
            Err(e) => failed(&state, &auth, &e).await,
        },
    )
}

#[derive(Deserialize)]
struct GovernorForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    governor: String,
}

async fn governor_form(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<GovernorForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(match governor::set(&form.governor) {
        Ok(_) => see_ports(),
        Err(e) => failed(&state, &auth, &e).await,
    })
}

#[derive(Deserialize)]
struct SettingsForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    window: Option<String>,
    #[serde(default)]
    firewall: Option<String>,
}

async fn settings_form(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<SettingsForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let window = match form
        .window
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => Ok(None),
        Some(w) => w.parse::<u32>().map(Some).map_err(|_| {
            BoardError::Invalid(format!(
                "the confirmation window must be a whole number of seconds, got '{w}'"
            ))
        }),
    };
    let r = window.and_then(|w| {
        controller(&state)
            .save_settings(w, form.firewall.as_deref().filter(|s| !s.trim().is_empty()))
    });
    Ok(match r {
        Ok(()) => see_ports(),
        Err(e) => failed(&state, &auth, &e).await,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn lease_rows_show_a_refusal_an_infinite_lease_and_at_most_3_dns() {
        use crate::board::dhcp::Lease;
        let refused = Lease {
            error: Some("the router 10.99.2.1 is outside the subnet 10.99.1.50/24".into()),
            error_at: Some(0),
            ..Lease::default()
        };
        assert_eq!(
            super::lease_rows(&refused, 0, None, "eth1"),
            vec![(
                "Refused".to_string(),
                "the router 10.99.2.1 is outside the subnet 10.99.1.50/24, so nothing of the DHCP server's lease was applied (00:00:00 UTC)".to_string()
            )]
        );
        let infinite = Lease {
            address: Some("10.99.1.50/24".into()),
            lease_secs: Some(4_294_967_295),
            dns: (1..=60)
                .map(|i| format!("10.0.0.{i}").parse().unwrap())
                .collect(),
            ..Lease::default()
        };
        let rows = super::lease_rows(&infinite, 0, None, "eth1");
        let get = |k: &str| rows.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
        assert_eq!(get("Expires"), Some("never · lease infinite"));
        assert_eq!(get("DNS"), Some("10.0.0.1, 10.0.0.2, 10.0.0.3 (+57 more)"));
        // Why the lease's router is not the default route: only while another port holds it.
        let noted = Lease {
            route_note: Some("not the board's default route: it stays via 10.0.0.1 on eth0".into()),
            ..infinite.clone()
        };
        let gw = |port: &str| crate::board::addresses::Gateway {
            via: "10.0.0.1".parse().unwrap(),
            port: Some(port.into()),
        };
        let note = |g: Option<&crate::board::addresses::Gateway>| {
            super::lease_rows(&noted, 0, g, "eth1")
                .into_iter()
                .find(|(k, _)| k == "Default route")
                .map(|(_, v)| v)
        };
        assert_eq!(
            note(Some(&gw("eth0"))).as_deref(),
            Some("not the board's default route: it stays via 10.0.0.1 on eth0")
        );
        assert_eq!(note(None), None, "no default route any more");
        assert_eq!(
            note(Some(&gw("eth1"))),
            None,
            "the lease's port holds it now"
        );
    }

    #[test]
    fn the_queue_column_shows_the_root_qdisc_and_every_shaper_with_the_kernel_s_counts() {
        use super::{qdisc_views, root_drops, QdiscView};
        use crate::board::shaper::TcNode;
        let tbf = TcNode {
            kind: "tbf".into(),
            handle: "8001:".into(),
            parent: "root".into(),
            rate_bps: Some(100_000_000),
            drops: 8_839,
            overlimits: 70_403,
            backlog_bytes: 3_028,
            qlen: 2,
            ..Default::default()
        };
        assert_eq!(
            qdisc_views(std::slice::from_ref(&tbf)),
            vec![QdiscView {
                what: "tbf 100 Mbit/s".into(),
                stats: "backlog 0.003 MB (2 pkt) · drops 8,839 · overlimits 70,403".into()
            }]
        );
        assert_eq!(root_drops(std::slice::from_ref(&tbf)), 8_839);
        // HTB: the root qdisc (its drops are the port's), a class with rate and ceil; a class
        // without a rate and a leaf qdisc without one are left out.
        let nodes = vec![
            TcNode {
                kind: "htb".into(),
                handle: "1:".into(),
                parent: "root".into(),
                drops: 12,
                ..Default::default()
            },
            TcNode {
                kind: "htb".into(),
                handle: "1:10".into(),
                parent: "1:".into(),
                class: true,
                rate_bps: Some(10_000_000),
                ceil_bps: Some(50_000_000),
                drops: 12,
                ..Default::default()
            },
            TcNode {
                kind: "pfifo".into(),
                handle: "10:".into(),
                parent: "1:10".into(),
                drops: 12,
                ..Default::default()
            },
        ];
        let v = qdisc_views(&nodes);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].what, "htb");
        assert_eq!(v[1].what, "htb class 1:10 10 Mbit/s (ceil 50 Mbit/s)");
        assert_eq!(root_drops(&nodes), 12);
        let none = TcNode {
            kind: "noqueue".into(),
            handle: "0:".into(),
            parent: "root".into(),
            ..Default::default()
        };
        assert_eq!(qdisc_views(std::slice::from_ref(&none))[0].stats, "");
        assert_eq!(root_drops(&[]), 0);
    }

    #[test]
    fn nic_facts_rows_say_what_the_port_has_and_leave_out_the_rest() {
        use crate::board::counters::{NicFacts, Rings};
        let f = NicFacts {
            driver: Some("fec".into()),
            firmware: Some("1.2.3".into()),
            rings: Some(Rings {
                rx: 256,
                rx_max: 4096,
                tx: 512,
                tx_max: 4096,
            }),
            offloads: vec![("gro".into(), true), ("tso".into(), false)],
            irqs: vec![("57".into(), "0".into()), ("58".into(), "0-3".into())],
        };
        assert_eq!(
            nic_fact_rows(&f, "1000 Mb/s full"),
            [
                ("Driver", "fec"),
                ("Firmware", "1.2.3"),
                ("Speed / duplex", "1000 Mb/s full"),
                ("Rings", "rx 256 of max 4096, tx 512 of max 4096"),
                ("Offloads", "on: gro; off: tso"),
                ("IRQ → CPU", "IRQ 57 → CPU 0; IRQ 58 → CPU 0-3"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert!(nic_fact_rows(&NicFacts::default(), "—").is_empty());
    }

    use super::*;
    use actix_web::test::TestRequest;

    fn row(
        outcome: &str,
        detail: Option<&str>,
        decided_at: Option<i64>,
    ) -> crate::store::BoardLogRow {
        crate::store::BoardLogRow {
            id: 1,
            at: 1_764_597_600_000, // 2025-12-01 14:00:00 UTC
            source: "web".into(),
            changes: "add 203.0.113.7/24 to eth1".into(),
            outcome: outcome.into(),
            detail: detail.map(String::from),
            decided_at,
        }
    }

    #[test]
    fn each_decided_outcome_is_a_notice_with_its_time_and_reason() {
        let t = 1_764_597_600_000;
        let rb = row(
            "rolled back",
            Some("not confirmed within 60 s"),
            Some(t + 61_000),
        );
        assert_eq!(
            outcome_notice(&[rb], t + 62_000),
            Some((
                "warn".into(),
                "Rolled back at 14:01:01 UTC — not confirmed within 60 s: add 203.0.113.7/24 to eth1."
                    .into()
            ))
        );
        let ok = row("confirmed", None, Some(t + 5_000));
        assert_eq!(
            outcome_notice(&[ok], t + 6_000).map(|n| n.1),
            Some("Confirmed at 14:00:05 UTC: add 203.0.113.7/24 to eth1.".into())
        );
        // Two changes stacked while the first was pending, rolled back together: both named,
        // in the order they were made (the newest row comes first in the log).
        let mut a = row(
            "rolled back",
            Some("not confirmed within 60 s"),
            Some(t + 61_000),
        );
        let mut b = a.clone();
        b.id = 2;
        b.changes = "set eth1 MTU 9000".into();
        b.decided_at = Some(t + 61_001);
        let older = row("confirmed", None, Some(t - 5_000));
        assert_eq!(
            outcome_notice(&[b.clone(), a.clone(), older.clone()], t + 62_000).map(|n| n.1),
            Some(
                "Rolled back at 14:01:01 UTC — not confirmed within 60 s: add 203.0.113.7/24 to eth1; set eth1 MTU 9000."
                    .into()
            )
        );
        // A change decided on its own is not mixed with an earlier decision.
        a.outcome = "confirmed".into();
        a.detail = None;
        assert_eq!(
            outcome_notice(&[b, a], t + 62_000).map(|n| n.1),
            Some(
                "Rolled back at 14:01:01 UTC — not confirmed within 60 s: set eth1 MTU 9000."
                    .into()
            )
        );
        let un = row("unchecked", None, None);
        assert!(outcome_notice(&[un], t + 1_000)
            .is_some_and(|n| n.1.starts_with("Applied unchecked at 14:00:00 UTC")));
        assert_eq!(outcome_notice(&[row("pending", None, None)], t), None);
        // Old news is not repeated.
        let old = row("confirmed", None, Some(t));
        assert_eq!(outcome_notice(&[old], t + OUTCOME_SHOWN_MS + 1), None);
        assert_eq!(outcome_notice(&[], t), None);
    }

    #[test]
    fn management_address_from_the_host_header() {
        let r = TestRequest::default()
            .insert_header(("Host", "192.0.2.1:8080"))
            .to_http_request();
        assert_eq!(management_address(&r), Some("192.0.2.1".parse().unwrap()));
        let r = TestRequest::default()
            .insert_header(("Host", "[2001:db8::1]:80"))
            .to_http_request();
        assert_eq!(management_address(&r), Some("2001:db8::1".parse().unwrap()));
        let r = TestRequest::default()
            .insert_header(("Host", "198.51.100.1"))
            .to_http_request();
        assert_eq!(
            management_address(&r),
            Some("198.51.100.1".parse().unwrap())
        );
    }

    #[test]
    fn forms_become_changes() {
        let f = ChangeForm {
            op: "link".into(),
            port: Some("eth0".into()),
            up: Some("down".into()),
            mtu: Some("".into()),
            ..Default::default()
        };
        assert_eq!(
            f.change().unwrap(),
            Change::Link {
                port: "eth0".into(),
                up: Some(false),
                mtu: None
            }
        );
        let f = ChangeForm {
            op: "forward_enable".into(),
            ingress: Some("eth0".into()),
            out: Some("eth1".into()),
            nat: Some("on".into()),
            ..Default::default()
        };
        assert_eq!(
            f.change().unwrap(),
            Change::ForwardEnable {
                ingress: "eth0".into(),
                egress: "eth1".into(),
                nat: true,
                ipv6: false
            }
        );
        let f = ChangeForm {
            op: "add_address".into(),
            port: Some("eth0".into()),
            ..Default::default()
        };
        assert_eq!(
            f.change().unwrap_err().to_string(),
            "the address is missing"
        );
        let f = ChangeForm {
            op: "reboot".into(),
            ..Default::default()
        };
        assert!(f
            .change()
            .unwrap_err()
            .to_string()
            .contains("unknown operation"));
    }
}
