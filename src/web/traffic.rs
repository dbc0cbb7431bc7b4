//! The "HTTP & raw TCP" page (seed 003): the payload server, TCP sink and source with the
//! stock-tool command lines to use them, the board's download form (one click), and the runs
//! of those kinds; `POST /api/http-get` for scripts. Also what the run page shows for these
//! kinds (facts and an equivalent command line).
//! Not for: serving payloads or measuring (see `crate::runs::traffic`, `engine::http`).

use super::auth::{Auth, AuthError};
use super::extract::{ApiWrite, Form, Json};
use super::routes::{Routes, ADMIN, READ, RUN};
use super::AppState;
use crate::engine::http::GetSpec;
use crate::engine::report::version_string;
use crate::model::display;
use crate::model::time::fmt_time;
use crate::model::RunKind;
use crate::results::traffic_summary::{self, HttpGetParams, HttpServeParams, HttpServeSummary};
use crate::store::{RunFilter, RunRow};
use actix_web::{http::header, http::StatusCode, web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;
use serde_json::json;

/// Register the routes.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/traffic", READ, page)
        .post("/traffic/http-get", ADMIN, start_form)
        .post("/api/http-get", RUN, start_api)
        .get("/api/traffic", READ, services_api);
}

/// The download form (also the JSON body of `POST /api/http-get`; numbers may be strings).
#[derive(Deserialize, Debug, Clone, Default)]
pub(crate) struct HttpGetForm {
    #[serde(default)]
    pub csrf: Option<String>,
    /// `http://host[:port]/path`.
    pub url: String,
    /// Parallel connections, 1..64 (default 4).
    #[serde(default)]
    pub connections: Option<serde_json::Value>,
    /// Seconds before giving up, 1..86400 (default 600).
    #[serde(default)]
    pub timeout: Option<serde_json::Value>,
    /// Board port to bind to; empty = routing decides.
    #[serde(default)]
    pub bind: Option<String>,
}

fn num_field(v: &Option<serde_json::Value>, name: &str, default: u32) -> Result<u32, String> {
    match v {
        None => Ok(default),
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| format!("{name} must be a whole number")),
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => Ok(default),
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| format!("{name} must be a whole number, not '{s}'")),
        Some(_) => Err(format!("{name} must be a number")),
    }
}

impl HttpGetForm {
    /// Validate into a download spec (the port must be one of the board's).
    pub(crate) fn to_spec(&self) -> Result<GetSpec, String> {
        let bind = self
            .bind
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        if let Some(b) = bind {
            if !crate::board::ports().iter().any(|p| p.name == b) {
                return Err(format!("the board has no port '{b}'"));
            }
        }
        let spec = GetSpec {
            url: self.url.trim().to_string(),
            connections: num_field(&self.connections, "connections", 4)?,
            timeout_secs: num_field(&self.timeout, "timeout", 600)?,
            bind_dev: bind.map(String::from),
        };
        spec.validate()?;
        Ok(spec)
    }
}

struct ServiceView {
    name: String,
    port: String,
    commands: Vec<String>,
}

struct TrafficRunView {
    id: i64,
    when: String,
    kind: String,
    peer: String,
    what: String,
    connections: String,
    bytes: String,
    rate: String,
    status: String,
}

#[derive(Template)]
#[template(path = "traffic.html")]
struct TrafficPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
    url: String,
    connections: String,
    timeout: String,
    bind: String,
    ports: Vec<(String, String)>,
    services: Vec<ServiceView>,
    /// The board's other addresses (the commands use the first one).
    other_hosts: Vec<String>,
    service_errors: Vec<String>,
    runs: Vec<TrafficRunView>,
}

/// The board's addresses for peers' commands: the one this browser came in on first (unless
/// loopback), then every other non-loopback address (the services listen on all of them).
fn board_hosts(req: &HttpRequest) -> Vec<std::net::IpAddr> {
    let mut out: Vec<std::net::IpAddr> = super::board::management_address(req)
        .filter(|a| !a.is_loopback() && !a.is_unspecified())
        .into_iter()
        .collect();
    let any = std::net::IpAddr::from([0u8, 0, 0, 0]);
    for a in super::first_run::reachable_addresses(any) {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

fn build_page(
    state: &AppState,
    auth: &Auth,
    req: &HttpRequest,
    form: Option<&HttpGetForm>,
    error: Option<String>,
) -> TrafficPage {
    let l = state.runs.listening();
    let hosts = board_hosts(req);
    let host = hosts
        .first()
        .map(|a| super::first_run::url_host(*a))
        .unwrap_or_else(|| "127.0.0.1".into());
    let other_hosts: Vec<String> = hosts.iter().skip(1).map(|a| a.to_string()).collect();
    let mut services = Vec::new();
    let off = |p: Option<u16>| p.map(|x| x.to_string()).unwrap_or_else(|| "off".into());
    services.push(ServiceView {
        name: "HTTP payload server".into(),
        port: off(l.http_port),
        commands: l
            .http_port
            .map(|p| {
                vec![
                    format!("curl -o /dev/null http://{host}:{p}/payload/100M"),
                    crate::results::view::download_command(
                        10,
                        &format!("http://{host}:{p}/payload/1G"),
                    ),
                    format!("http://{host}:{p}/payload/10G  (in a browser)"),
                ]
            })
            .unwrap_or_default(),
    });
    services.push(ServiceView {
        name: "TCP sink (the peer sends)".into(),
        port: off(l.sink_port),
        commands: l
            .sink_port
            .map(|p| {
                vec![
                    format!("nc {host} {p} < /dev/zero"),
                    format!("pv /dev/urandom | nc {host} {p}"),
                ]
            })
            .unwrap_or_default(),
    });
    services.push(ServiceView {
        name: "TCP source (the peer receives)".into(),
        port: off(l.source_port),
        commands: l
            .source_port
            .map(|p| {
                vec![
                    format!("nc -d {host} {p} > /dev/null"),
                    format!("nc -d {host} {p} | pv > /dev/null"),
                ]
            })
            .unwrap_or_default(),
    });
    let runs = state
        .store
        .list_runs(&RunFilter {
            limit: Some(300),
            ..Default::default()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.kind.is_traffic())
        .take(30)
        .map(|r| TrafficRunView {
            id: r.id,
            when: fmt_time(r.started_at),
            kind: r.kind.as_str().to_string(),
            peer: format!("{}:{}", r.peer_host, r.peer_port),
            what: what(&r),
            connections: traffic_summary::connections(&r)
                .map(|c| c.to_string())
                .unwrap_or_else(|| {
                    if r.kind.is_one_connection() {
                        "1".into()
                    } else {
                        "—".into()
                    }
                }),
            bytes: r
                .bytes
                .map(|b| display::size(b as f64))
                .unwrap_or_else(|| "—".into()),
            rate: r
                .receiver_bps
                .or(r.sender_bps)
                .map(display::rate)
                .unwrap_or_else(|| "—".into()),
            status: r.status.to_string(),
        })
        .collect();
    let ports = crate::board::ports()
        .into_iter()
        .filter(|p| !p.loopback)
        .map(|p| {
            let a: Vec<String> = p.addresses.iter().map(|a| a.to_string()).collect();
            (p.name.clone(), format!("{} {}", p.name, a.join(", ")))
        })
        .collect();
    let v = |o: Option<&serde_json::Value>, d: &str| match o {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(x) => x.to_string(),
        None => d.to_string(),
    };
    TrafficPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error,
        url: form.map(|f| f.url.clone()).unwrap_or_default(),
        connections: v(form.and_then(|f| f.connections.as_ref()), "4"),
        timeout: v(form.and_then(|f| f.timeout.as_ref()), "600"),
        bind: form.and_then(|f| f.bind.clone()).unwrap_or_default(),
        ports,
        services,
        other_hosts,
        service_errors: l.errors.clone(),
        runs,
    }
}

/// What a traffic run moved, for the Traffic page's list ("served /payload/1G").
fn what(r: &RunRow) -> String {
    match r.kind {
        RunKind::HttpServe => format!(
            "served {}",
            HttpServeSummary::of_summary(&r.summary)
                .and_then(|s| s.path)
                .or(HttpServeParams::of_params(&r.params).path)
                .unwrap_or_default()
        ),
        RunKind::HttpGet => format!("downloaded {}", HttpGetParams::of_params(&r.params).url),
        RunKind::TcpSink => format!("received on port {}", r.local_port),
        RunKind::TcpSource => format!("sent from port {}", r.local_port),
        RunKind::Iperf3
        | RunKind::Iperf2
        | RunKind::Multi
        | RunKind::Forward
        | RunKind::Monitor
        | RunKind::Latency
        | RunKind::Rfc2544 => String::new(),
    }
}

fn render(status: StatusCode, p: &TrafficPage) -> HttpResponse {
    super::respond::html(status, p)
}

async fn page(auth: Auth, req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    render(StatusCode::OK, &build_page(&state, &auth, &req, None, None))
}

async fn start_form(
    auth: Auth,
    req: HttpRequest,
    state: web::Data<AppState>,
    form: Form<HttpGetForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let res = form
        .to_spec()
        .and_then(|s| crate::runs::traffic::start_http_get(&state.runs, s));
    Ok(match res {
        Ok((id, _)) => {
            super::audit::run_started(&state, &auth, &req, id);
            HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/runs/{id}")))
                .finish()
        }
        Err(e) => render(
            StatusCode::BAD_REQUEST,
            &build_page(&state, &auth, &req, Some(&form), Some(e)),
        ),
    })
}

async fn start_api(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: Json(form),
    }: ApiWrite<Json<HttpGetForm>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    let bad = |m: String| super::respond::json_error(actix_web::http::StatusCode::BAD_REQUEST, m);
    Ok(
        match form
            .to_spec()
            .and_then(|s| crate::runs::traffic::start_http_get(&state.runs, s))
        {
            Ok((id, _)) => {
                super::audit::run_started(&state, &auth, &req, id);
                HttpResponse::Created()
                    .insert_header(("Location", format!("/api/runs/{id}")))
                    .json(json!({"id": id, "url": format!("/runs/{id}")}))
            }
            Err(e) => bad(e),
        },
    )
}

async fn services_api(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(state.runs.listening())
}
