//! HTML pages: setup, login, new test, history, run detail (live via server-sent events),
//! settings. Every state-changing form carries the session's CSRF token.

use super::auth::{self, Auth, AuthError};
use super::extract::{CsrfForm, Form};
use super::respond::{html, internal_page as internal, message, ok, redirect, storage_message};
use super::routes::{Routes, ADMIN, PUBLIC, READ};
use super::AppState;
use crate::engine::iperf3::wire::Params;
use crate::engine::report::{self, version_string, Report};
use crate::model::display;
use crate::model::time::fmt_time;
use crate::model::{RunKind, RunProtocol};
use crate::spec::test::TestRequest;
use crate::store::{IntervalRow, RunFilter, RunRow};
use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::{http::header, web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

/// Register the page routes.
pub fn configure(r: &mut Routes) {
    r.get("/", READ, index)
        .get("/login", PUBLIC, login_page)
        .post("/login", PUBLIC, login)
        .post("/logout", ADMIN, logout)
        .post("/logout-everywhere", ADMIN, logout_everywhere)
        .get("/setup", PUBLIC, setup_page)
        .post("/setup", PUBLIC, setup)
        .post("/tests", ADMIN, start_test)
        .get("/runs", READ, runs_page)
        .get("/runs/{id}", READ, run_page)
        .post("/runs/{id}/delete", ADMIN, delete_run)
        .post("/runs/{id}/stop", ADMIN, stop_run)
        .get("/runs/{id}/export.json", READ, export_json)
        .get("/runs/{id}/export.csv", READ, export_csv)
        .get("/runs/{id}/summary.txt", READ, export_text)
        .post("/suites/udp-ladder", ADMIN, start_ladder)
        .get("/settings", READ, settings_page)
        .post("/settings/password", ADMIN, change_password)
        .post("/settings/tokens", ADMIN, create_token)
        .post("/settings/tokens/{id}/delete", ADMIN, delete_token);
}

fn client_ip(req: &HttpRequest) -> std::net::IpAddr {
    req.peer_addr()
        .map(|a| a.ip())
        .unwrap_or(std::net::IpAddr::from([0u8, 0, 0, 0]))
}

// ---------------------------------------------------------------- login and setup

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "setup.html")]
struct SetupPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
}

async fn login_page(state: web::Data<AppState>) -> HttpResponse {
    if state.needs_setup() {
        return redirect("/setup");
    }
    ok(&LoginPage {
        nav: false,
        csrf: String::new(),
        version: version_string(),
        error: None,
    })
}

/// A new session's cookie: `HttpOnly`, `SameSite=Strict`, and `Secure` when `req` came over
/// HTTPS (the browser then never sends it over plain HTTP, the redirect listener's included).
fn session_cookie(state: &AppState, req: &HttpRequest) -> Result<Cookie<'static>, String> {
    let token = auth::random_hex(32);
    let csrf = auth::random_hex(16);
    let hours = state.config.session_hours as i64;
    state
        .store
        .create_session(
            &crate::model::secrets::sha256_hex(&token),
            &csrf,
            hours * 3_600_000,
        )
        .map_err(|e| e.to_string())?;
    Ok(Cookie::build(auth::SESSION_COOKIE, token)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(req.app_config().secure())
        .max_age(CookieDuration::hours(hours))
        .finish())
}

#[derive(Deserialize)]
struct LoginForm {
    password: String,
}

async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: Form<LoginForm>,
) -> HttpResponse {
    let ip = client_ip(&req);
    let page = |status, e: String| {
        html(
            status,
            &LoginPage {
                nav: false,
                csrf: String::new(),
                version: version_string(),
                error: Some(e),
            },
        )
    };
    if let Err(wait) = state.limiter.check(ip) {
        return page(
            actix_web::http::StatusCode::TOO_MANY_REQUESTS,
            format!("Too many failed logins. Try again in {wait} s."),
        );
    }
    let Some(hash) = state.admin_hash() else {
        return redirect("/setup");
    };
    let Some(right) = auth::verify_password_limited(&hash, &form.password).await else {
        return page(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            "The board is busy checking other logins. Try again in a moment.".into(),
        );
    };
    if !right {
        state.limiter.fail(ip);
        crate::peer_warn!(ip, %ip, "failed login");
        return page(
            actix_web::http::StatusCode::UNAUTHORIZED,
            "Wrong password.".into(),
        );
    }
    state.limiter.success(ip);
    match session_cookie(&state, &req) {
        Ok(c) => HttpResponse::SeeOther()
            .cookie(c)
            .insert_header((header::LOCATION, "/"))
            .finish(),
        Err(e) => {
            tracing::warn!("login: cannot store the session: {e}");
            page(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                storage_message("the login session cannot be stored", &e),
            )
        }
    }
}

async fn logout(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    if let Auth::Session { token_hash, .. } = &auth {
        let _ = state.store.delete_sessions(Some(token_hash));
    }
    let mut gone = Cookie::build(auth::SESSION_COOKIE, "").path("/").finish();
    gone.make_removal();
    Ok(HttpResponse::SeeOther()
        .cookie(gone)
        .insert_header((header::LOCATION, "/login"))
        .finish())
}

/// Log out everywhere: every web session (this one too) ends and every API token is
/// revoked.
async fn logout_everywhere(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let (s, t) = state
        .store
        .revoke_all_credentials()
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    tracing::info!(sessions = s, tokens = t, "logged out everywhere");
    let mut gone = Cookie::build(auth::SESSION_COOKIE, "").path("/").finish();
    gone.make_removal();
    Ok(HttpResponse::SeeOther()
        .cookie(gone)
        .insert_header((header::LOCATION, "/login"))
        .finish())
}

async fn setup_page(state: web::Data<AppState>) -> HttpResponse {
    if !state.needs_setup() {
        return redirect("/login");
    }
    ok(&SetupPage {
        nav: false,
        csrf: String::new(),
        version: version_string(),
        error: None,
    })
}

#[derive(Deserialize)]
struct SetupForm {
    code: String,
    password: String,
    confirm: String,
}

async fn setup(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: Form<SetupForm>,
) -> HttpResponse {
    if !state.needs_setup() {
        return message(
            actix_web::http::StatusCode::CONFLICT,
            None,
            "Already set up",
            "An admin password exists. Log in, and change it under Settings.",
        );
    }
    let ip = client_ip(&req);
    let err = |status, e: &str| {
        html(
            status,
            &SetupPage {
                nav: false,
                csrf: String::new(),
                version: version_string(),
                error: Some(e.into()),
            },
        )
    };
    if let Err(wait) = state.limiter.check(ip) {
        return err(
            actix_web::http::StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many wrong setup codes. Try again in {wait} s."),
        );
    }
    let code = state.setup_code().unwrap_or_default();
    if !super::first_run::same_code(&form.code, &code) {
        state.limiter.fail(ip);
        return err(
            actix_web::http::StatusCode::UNAUTHORIZED,
            "Wrong setup code. It is on the board's login prompt and in the daemon's log.",
        );
    }
    if form.password.chars().count() < auth::MIN_PASSWORD {
        return err(
            actix_web::http::StatusCode::BAD_REQUEST,
            "The password must have at least 8 characters.",
        );
    }
    if form.password != form.confirm {
        return err(
            actix_web::http::StatusCode::BAD_REQUEST,
            "The two passwords differ.",
        );
    }
    let hash = match auth::hash_password(&form.password) {
        Ok(h) => h,
        Err(e) => return internal(e),
    };
    if let Err(e) = state.store.set_setting(auth::PASSWORD_KEY, &hash) {
        // Nothing changed: the setup code stays valid for another try.
        tracing::warn!("setup: cannot store the admin password: {e}");
        return err(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            &storage_message("the admin password cannot be stored", &e.to_string()),
        );
    }
    if let Ok(mut g) = state.setup_code.lock() {
        *g = None;
    }
    super::first_run::withdraw(&state.config);
    state.limiter.success(ip);
    tracing::info!("admin password set through the setup page");
    match session_cookie(&state, &req) {
        Ok(c) => HttpResponse::SeeOther()
            .cookie(c)
            .insert_header((header::LOCATION, "/"))
            .finish(),
        // The password is stored; only the session is not: say so, and log in later.
        Err(e) => {
            tracing::warn!("setup: cannot store the login session: {e}");
            message(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                None,
                "Password set",
                &format!(
                    "The admin password is set. {}",
                    storage_message("the login session cannot be stored", &e)
                ),
            )
        }
    }
}

// ---------------------------------------------------------------- views

/// A run as the tables show it.
pub struct RunView {
    pub id: i64,
    /// The kind's label ("iperf3", "forwarding", …) and the run's one-line title.
    pub kind: String,
    pub title: String,
    pub when: String,
    pub role: String,
    pub role_text: String,
    pub status: String,
    pub peer: String,
    pub local: String,
    pub direction: String,
    pub protocol: String,
    pub streams: u32,
    pub sender_rate: String,
    pub receiver_rate: String,
    pub retransmits: String,
    /// UDP: "lost/total (x %)"; TCP: empty.
    pub loss: String,
    /// UDP: receiver jitter "0.012 ms"; TCP: empty.
    pub jitter: String,
    /// What the history's "Retr / Loss" column shows.
    pub retr_or_loss: String,
    pub udp: bool,
    pub error: Option<String>,
    /// Imported runs: "imported from LABEL (its run N, board ID)"; empty for runs made here.
    pub origin: String,
    /// The run's own label (monitor and forwarding runs), or its suite's board label.
    pub label: String,
    /// The suite the run belongs to and that suite's name (filled by [`with_suites`]).
    pub suite_id: Option<i64>,
    pub suite_name: String,
    /// Stored fields that could not be read, e.g. "peer_port, report_json" (shown empty);
    /// empty for sound runs.
    pub invalid: String,
}

/// Fill in the suite name (and, for runs without their own label, the suite's board label)
/// of runs that belong to a suite: one query for the names, one per distinct suite.
fn with_suites(state: &AppState, mut runs: Vec<RunView>) -> Vec<RunView> {
    if runs.iter().all(|r| r.suite_id.is_none()) {
        return runs;
    }
    let names: std::collections::HashMap<i64, String> = state
        .store
        .suites(5000)
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.id, s.name))
        .collect();
    let mut labels: std::collections::HashMap<i64, String> = std::collections::HashMap::new();
    for r in runs.iter_mut() {
        let Some(sid) = r.suite_id else { continue };
        r.suite_name = names.get(&sid).cloned().unwrap_or_default();
        if r.label.is_empty() {
            r.label = labels
                .entry(sid)
                .or_insert_with(|| {
                    state
                        .store
                        .suite_extra(sid)
                        .ok()
                        .flatten()
                        .and_then(|e| e.label)
                        .unwrap_or_default()
                })
                .clone();
        }
    }
    runs
}

fn params_of(r: &RunRow) -> Option<Params> {
    serde_json::from_value(r.params.clone()).ok()
}

fn run_view(r: &RunRow) -> RunView {
    let p = params_of(r);
    let kv = crate::results::view::view(r);
    RunView {
        id: r.id,
        kind: kv.kind_label.to_string(),
        title: kv.title.clone(),
        when: fmt_time(r.started_at),
        role: r.role.to_string(),
        role_text: kv.role_text.clone(),
        status: r.status.to_string(),
        peer: kv.peer,
        local: kv.local,
        direction: if r.kind.forwards() {
            crate::results::view::forward_direction(r).to_string()
        } else {
            r.direction.to_string()
        },
        protocol: r.protocol.to_string(),
        streams: p
            .as_ref()
            .map(|p| p.parallel)
            .or_else(|| r.summary["connections"].as_u64().map(|c| c as u32))
            .unwrap_or(1),
        sender_rate: r
            .sender_bps
            .map(display::rate)
            .unwrap_or_else(|| "—".into()),
        receiver_rate: r
            .receiver_bps
            .map(display::rate)
            .unwrap_or_else(|| "—".into()),
        retransmits: r
            .retransmits
            .map(|x| x.to_string())
            .unwrap_or_else(|| "—".into()),
        loss: match (r.lost_packets, r.total_packets, r.lost_percent) {
            (Some(l), Some(t), Some(p)) => format!("{l}/{t} ({p:.2} %)"),
            _ => String::new(),
        },
        jitter: r
            .jitter_ms
            .map(|j| format!("{j:.3} ms"))
            .unwrap_or_default(),
        retr_or_loss: if r.protocol == RunProtocol::Udp {
            r.lost_percent
                .map(|p| format!("{p:.2} % loss"))
                .unwrap_or_else(|| "—".into())
        } else {
            r.retransmits
                .map(|x| x.to_string())
                .unwrap_or_else(|| "—".into())
        },
        udp: r.protocol == RunProtocol::Udp,
        error: r.error.clone(),
        invalid: r.invalid.join(", "),
        label: r.params["label"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_string(),
        suite_id: r.suite_id,
        suite_name: String::new(),
        origin: String::new(),
    }
}

/// The provenance line of an imported run.
pub(super) fn origin_text(o: &crate::store::Origin) -> String {
    format!(
        "imported from {} (its run {}, board {})",
        if o.label.is_empty() {
            "another board"
        } else {
            &o.label
        },
        o.id,
        o.board
    )
}

/// Fill in [`RunView::origin`] of the imported runs among `views`.
fn mark_origins(store: &crate::store::Store, views: &mut [RunView]) {
    let ids: Vec<i64> = views.iter().map(|v| v.id).collect();
    if let Ok(m) = store.run_origins(&ids) {
        for v in views.iter_mut() {
            if let Some(o) = m.get(&v.id) {
                v.origin = origin_text(o);
            }
        }
    }
}

struct IntervalView {
    seq: i64,
    id: String,
    role: String,
    range: String,
    transfer: String,
    bitrate: String,
    retr: String,
    cwnd: String,
    bps: f64,
    class: String,
}

fn interval_views(rows: &[IntervalRow]) -> Vec<IntervalView> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let seq = rows[i].seq;
        let group: Vec<&IntervalRow> = rows[i..].iter().take_while(|r| r.seq == seq).collect();
        i += group.len();
        for sender in [true, false] {
            let g: Vec<&&IntervalRow> = group.iter().filter(|r| r.sender == sender).collect();
            for r in &g {
                let (c1, c2) = match r.udp_sample() {
                    Some(u) if r.sender => (String::new(), format!("{} datagrams", u.packets)),
                    Some(u) => (
                        format!("{:.3} ms", u.jitter_ms),
                        format!("{}/{} ({:.2} %)", u.lost, u.packets, u.lost_percent()),
                    ),
                    None => (
                        r.retransmits.map(|x| x.to_string()).unwrap_or_default(),
                        r.snd_cwnd
                            .map(|x| display::size(x as f64))
                            .unwrap_or_default(),
                    ),
                };
                out.push(IntervalView {
                    seq,
                    id: r.stream_id.to_string(),
                    role: if r.sender { "sender" } else { "receiver" }.into(),
                    range: format!(
                        "{:.2}-{:.2} s{}",
                        r.start,
                        r.end,
                        if r.omitted { " (omitted)" } else { "" }
                    ),
                    transfer: display::size(r.bytes as f64),
                    bitrate: display::rate(r.bits_per_second),
                    retr: c1,
                    cwnd: c2,
                    bps: if g.len() == 1 { r.bits_per_second } else { 0.0 },
                    class: if g.len() == 1 {
                        "sum".into()
                    } else {
                        String::new()
                    },
                });
            }
            if g.len() > 1 {
                let bytes: i64 = g.iter().map(|r| r.bytes).sum();
                let bps: f64 = g.iter().map(|r| r.bits_per_second).sum();
                let udp = g.iter().any(|r| r.packets.is_some());
                let retr: Option<i64> = if sender && !udp {
                    Some(g.iter().filter_map(|r| r.retransmits).sum())
                } else {
                    None
                };
                let (pk, lost): (i64, i64) = (
                    g.iter().filter_map(|r| r.packets).sum(),
                    g.iter().filter_map(|r| r.lost).sum(),
                );
                out.push(IntervalView {
                    seq,
                    id: "SUM".into(),
                    role: if sender { "sender" } else { "receiver" }.into(),
                    range: format!("{:.2}-{:.2} s", g[0].start, g[0].end),
                    transfer: display::size(bytes as f64),
                    bitrate: display::rate(bps),
                    retr: retr.map(|x| x.to_string()).unwrap_or_default(),
                    cwnd: match (udp, sender) {
                        (true, true) => format!("{pk} datagrams"),
                        (true, false) => format!(
                            "{lost}/{pk} ({:.2} %)",
                            crate::engine::udp::loss_percent(lost.max(0) as u64, pk.max(0) as u64)
                        ),
                        _ => String::new(),
                    },
                    bps,
                    class: "sum".into(),
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------- new test

/// A port in the "board port" list.
pub(super) struct PortOption {
    pub(super) name: String,
    pub(super) label: String,
}

/// The board's ports for a "Board port" select: name and "eth0 192.0.2.1" label.
pub(super) fn port_options() -> Vec<PortOption> {
    crate::board::ports()
        .into_iter()
        .map(|p| {
            let addrs: Vec<String> = p.addresses.iter().map(|a| a.to_string()).collect();
            PortOption {
                label: format!(
                    "{}{} {}",
                    p.name,
                    if p.running { "" } else { " (no link)" },
                    if addrs.is_empty() {
                        "(no address)".into()
                    } else {
                        addrs.join(", ")
                    }
                ),
                name: p.name,
            }
        })
        .collect()
}

struct FormValues {
    protocol: String,
    length: String,
    host: String,
    port: String,
    duration: String,
    parallel: String,
    direction: String,
    bitrate: String,
    window: String,
    omit: String,
    bind: String,
    peer_type: String,
    mss: String,
    tos: String,
    congestion: String,
    /// The "Advanced" section starts open: one of its settings is filled in (an error about
    /// it is then in view with its field).
    advanced_open: bool,
    /// The capture section: port (empty = none), seconds, filter, and whether it starts open.
    capture_port: String,
    capture_seconds: String,
    capture_filter: String,
    capture_open: bool,
}

impl FormValues {
    fn from(r: Option<&TestRequest>) -> FormValues {
        let g = |o: Option<&Option<String>>, d: &str| {
            o.and_then(|x| x.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| d.to_string())
        };
        FormValues {
            protocol: g(r.map(|r| &r.protocol), "tcp"),
            length: g(r.map(|r| &r.length), ""),
            host: r.map(|r| r.host.clone()).unwrap_or_default(),
            port: g(r.map(|r| &r.port), ""),
            duration: g(r.map(|r| &r.duration), "10"),
            parallel: g(r.map(|r| &r.parallel), "1"),
            direction: g(r.map(|r| &r.direction), "send"),
            bitrate: g(r.map(|r| &r.bitrate), ""),
            window: g(r.map(|r| &r.window), ""),
            omit: g(r.map(|r| &r.omit), "0"),
            bind: g(r.map(|r| &r.bind), ""),
            peer_type: g(r.map(|r| &r.peer_type), "iperf3"),
            mss: g(r.map(|r| &r.mss), ""),
            tos: g(r.map(|r| &r.tos), ""),
            congestion: g(r.map(|r| &r.congestion), ""),
            advanced_open: r.is_some_and(|r| {
                [&r.window, &r.mss, &r.tos, &r.congestion]
                    .iter()
                    .any(|f| f.as_deref().is_some_and(|v| !v.trim().is_empty()))
            }),
            capture_port: String::new(),
            capture_seconds: "5".into(),
            capture_filter: String::new(),
            capture_open: false,
        }
    }
}

#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
    form: FormValues,
    ports: Vec<PortOption>,
    runs: Vec<RunView>,
}

fn index_page(
    state: &AppState,
    auth: &Auth,
    req: Option<&TestRequest>,
    error: Option<String>,
) -> IndexPage {
    let ports = port_options();
    let runs = state
        .store
        .list_runs(&RunFilter {
            limit: Some(10),
            ..Default::default()
        })
        .unwrap_or_default()
        .iter()
        .map(run_view)
        .collect();
    let runs = with_suites(state, runs);
    IndexPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error,
        form: FormValues::from(req),
        ports,
        runs,
    }
}

async fn index(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    ok(&index_page(&state, &auth, None, None))
}

/// The new-test form: the test, and an optional packet capture started with it.
#[derive(Debug, Deserialize)]
pub(super) struct NewTestForm {
    #[serde(flatten)]
    test: TestRequest,
    /// Board port to capture on; empty = no capture.
    #[serde(default)]
    capture_port: String,
    /// Seconds of the capture (the run's first seconds).
    #[serde(default)]
    capture_seconds: String,
    /// The capture's filter (`host ADDR`, `port N`, `tcp`/`udp`/`icmp`, joined by `and`).
    #[serde(default)]
    capture_filter: String,
}

impl NewTestForm {
    /// The capture asked for (`None`: no port chosen). Errors: seconds not a number.
    fn capture(&self) -> Result<Option<super::diag::CaptureRequest>, String> {
        let port = self.capture_port.trim();
        if port.is_empty() {
            return Ok(None);
        }
        let secs = self.capture_seconds.trim();
        let seconds = if secs.is_empty() {
            None
        } else {
            Some(secs.parse::<u64>().map_err(|_| {
                format!(
                    "capture seconds must be a whole number, got '{}'",
                    secs.escape_default()
                )
            })?)
        };
        Ok(Some(super::diag::CaptureRequest {
            port: port.to_string(),
            seconds,
            filter: Some(self.capture_filter.clone()),
            ..Default::default()
        }))
    }
}

async fn start_test(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<NewTestForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.test.csrf.as_deref())?;
    let ports = crate::board::ports();
    let res = match form.capture() {
        Ok(cap) => {
            super::api::start_with_capture(&state, &auth, &req, &form.test, cap.as_ref(), &ports)
                .await
        }
        Err(e) => Err((actix_web::http::StatusCode::BAD_REQUEST, e)),
    };
    Ok(match res {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            redirect(&format!("/runs/{id}"))
        }
        Err((status, e)) => {
            let mut page = index_page(&state, &auth, Some(&form.test), Some(e));
            page.form.capture_port = form.capture_port.clone();
            page.form.capture_seconds = form.capture_seconds.clone();
            page.form.capture_filter = form.capture_filter.clone();
            page.form.capture_open = true;
            html(status, &page)
        }
    })
}

// ---------------------------------------------------------------- history

struct SuiteLink {
    id: i64,
    name: String,
    peer: String,
    when: String,
    status: String,
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    nav: bool,
    csrf: String,
    version: String,
    suites: Vec<SuiteLink>,
    runs: Vec<RunView>,
    statuses: Vec<String>,
    filter_status: String,
    /// (stored word, label) of every kind, for the kind filter.
    kinds: Vec<(String, String)>,
    filter_kind: String,
    filter_peer: String,
    filter_port: String,
    /// Date range (YYYY-MM-DD, UTC) as typed.
    filter_from: String,
    filter_to: String,
    /// A bad filter (e.g. a date that is not one): shown, and no runs listed.
    error: Option<String>,
    /// "Runs 1–100" / "older than run N" text above the table.
    page_note: String,
    /// Link to the next (older) page with the same filters, if there are older runs.
    older: Option<String>,
    /// Link back to the newest page, when this is not the first page.
    newest: Option<String>,
}

/// Runs per History page.
const HISTORY_PAGE: u32 = 100;

/// Percent-encode a query value (everything but unreserved characters).
pub(crate) fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `/runs?…` with the filters of `q` (empty ones left out) and `before`.
fn runs_link(q: &RunFilter, before: Option<i64>) -> String {
    let mut parts = Vec::new();
    for (k, v) in [
        ("status", &q.status),
        ("kind", &q.kind),
        ("peer", &q.peer),
        ("port", &q.port),
        ("from", &q.from),
        ("to", &q.to),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.trim().is_empty()) {
            parts.push(format!("{k}={}", query_value(v)));
        }
    }
    if let Some(b) = before {
        parts.push(format!("before={b}"));
    }
    if parts.is_empty() {
        "/runs".into()
    } else {
        format!("/runs?{}", parts.join("&"))
    }
}

/// When the History filter names one of the board's ports ("eth0"), also match the runs that
/// used one of its addresses without binding the port (iperf 2, server, sink and API runs
/// record the address only; issue 22 item 11).
pub(super) fn port_filter_addresses(f: &mut RunFilter) {
    let Some(name) = f.port.as_deref().map(str::trim).filter(|p| !p.is_empty()) else {
        return;
    };
    if let Some(p) = crate::board::ports().into_iter().find(|p| p.name == name) {
        f.port_addrs = p.addresses.iter().map(|a| a.to_string()).collect();
    }
}

async fn runs_page(
    auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<RunFilter>,
) -> HttpResponse {
    let mut f = q.clone();
    port_filter_addresses(&mut f);
    f.limit = Some(HISTORY_PAGE + 1);
    let (rows, error) = match state.store.list_runs(&f) {
        Ok(r) => (r, None),
        Err(crate::store::StoreError::Invalid(e)) => (Vec::new(), Some(e)),
        Err(e) => return internal(e),
    };
    let more = rows.len() > HISTORY_PAGE as usize;
    let rows = &rows[..rows.len().min(HISTORY_PAGE as usize)];
    let older = if more {
        rows.last().map(|r| runs_link(&q, Some(r.id)))
    } else {
        None
    };
    let page_note = match (rows.first(), rows.last(), q.before) {
        (Some(a), Some(b), Some(before)) => {
            format!("Runs {} … {} (older than run {before})", a.id, b.id)
        }
        (Some(a), Some(b), None) => format!("Runs {} … {}, newest first", a.id, b.id),
        _ => String::new(),
    };
    let newest = q.before.map(|_| runs_link(&q, None));
    let mut runs = with_suites(&state, rows.iter().map(run_view).collect());
    mark_origins(&state.store, &mut runs);
    let suites = state
        .store
        .suites(20)
        .unwrap_or_default()
        .into_iter()
        .map(|s| SuiteLink {
            id: s.id,
            name: s.name,
            peer: s.peer_host,
            when: fmt_time(s.created_at),
            status: s.status,
        })
        .collect();
    ok(&RunsPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        suites,
        runs,
        statuses: ["running", "completed", "failed", "aborted"]
            .map(String::from)
            .to_vec(),
        filter_status: q.status.clone().unwrap_or_default(),
        kinds: crate::model::RunKind::ALL
            .iter()
            .map(|k| (k.as_str().to_string(), k.label().to_string()))
            .collect(),
        filter_kind: q.kind.clone().unwrap_or_default(),
        filter_peer: q.peer.clone().unwrap_or_default(),
        filter_port: q.port.clone().unwrap_or_default(),
        filter_from: q.from.clone().unwrap_or_default(),
        filter_to: q.to.clone().unwrap_or_default(),
        error,
        page_note,
        older,
        newest,
    })
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    nav: bool,
    csrf: String,
    version: String,
    /// Headers of the two protocol-specific interval columns.
    col1: String,
    col2: String,
    run: RunView,
    /// The kind's view: title, command lines, headline cards, facts.
    view: crate::results::view::KindView,
    live: bool,
    intervals: Vec<IntervalView>,
    last_rate: String,
    /// The run has a text summary in iperf3's format (`/runs/{id}/summary.txt`; kept off the
    /// page, whose units are `model::display`'s).
    text: bool,
    /// The run has an iperf3 report, so its JSON export is iperf3's `-J` document; otherwise
    /// (an RFC 2544, monitor or latency run) it is the run's own document.
    iperf3_json: bool,
    /// Forwarding and monitor runs: what the board saw (forwarded rates, ports, conntrack).
    board_summary: Option<String>,
    analysis: Option<AnalysisView>,
    cores: Vec<CoreView>,
    legs: Vec<LegView>,
    parent_id: Option<i64>,
    /// Pinned runs are never pruned by history retention.
    pinned: bool,
    /// Latency runs: the latency result, shown first (the throughput verdict is the load's).
    latency: Option<LatencyHead>,
    /// Only the last [`PAGE_INTERVALS`] intervals are shown (the exports hold all).
    older_intervals: bool,
    /// Where the lost datagrams went (the loss ledger) and the board's counters that moved.
    board: crate::results::view::BoardView,
    /// RFC 2544 runs: the throughput and frame-loss tables, the chart and the trials.
    rfc2544: Option<Rfc2544Section>,
    /// A standalone run given pass/fail limits: "PASS"/"FAIL" and its lines
    /// (`results::verdict::run_verdict_lines`).
    verdict: Option<(String, Vec<String>)>,
    /// Packet captures started with the run (kept an hour after they ended).
    captures: Vec<CaptureLine>,
}

/// A packet capture of a run, as its page lists it.
struct CaptureLine {
    id: u64,
    /// "capture 3 on eth0 (port 5201): done (time), 41 packets, 5.3 kB".
    text: String,
    /// The pcap's download link once it has ended.
    pcap: Option<String>,
}

impl CaptureLine {
    /// From a capture's JSON (`super::diag::run_captures`).
    fn of(v: &serde_json::Value) -> CaptureLine {
        let id = v["id"].as_u64().unwrap_or(0);
        let state = v["state"].as_str().unwrap_or("?");
        let why = match (&v["ended_by"], &v["error"], &v["removed"]) {
            (serde_json::Value::String(b), _, _) => format!(" ({b})"),
            (_, serde_json::Value::String(e), _) => format!(": {e}"),
            (_, _, serde_json::Value::String(r)) => format!(" ({r})"),
            _ => String::new(),
        };
        let filter = v["filter"].as_str().filter(|f| !f.is_empty());
        CaptureLine {
            id,
            text: format!(
                "capture {id} on {}{}: {state}{why}, {} packets, {}",
                v["port"].as_str().unwrap_or("?"),
                filter.map(|f| format!(" ({f})")).unwrap_or_default(),
                v["packets"].as_u64().unwrap_or(0),
                display::size(v["bytes"].as_f64().unwrap_or(0.0)),
            ),
            pcap: matches!(state, "done" | "failed")
                .then(|| v["pcap"].as_str().map(str::to_string))
                .flatten(),
        }
    }
}

/// The tables of an RFC 2544 run.
struct Rfc2544Section {
    throughput: Vec<crate::results::rfc2544::ThroughputRow>,
    /// §26.2 at the throughput found, per frame size.
    latency: Vec<crate::results::rfc2544::LatencyRow>,
    loss_headings: Vec<String>,
    loss: Vec<crate::results::rfc2544::LossRow>,
    /// §26.4 / RFC 9004, per frame size.
    b2b: Vec<crate::results::rfc2544::B2bRow>,
    /// The chart as an SVG element (made here from numbers, no user text).
    chart: String,
    /// The loss rate by offered frames/s, per frame size (SVG from numbers).
    loss_chart: String,
    /// What to do about a PC's limit (the receiving PC, the generator's lag), one line each.
    advice: Vec<String>,
    trials: Vec<TrialLine>,
}

/// One trial of an RFC 2544 run.
struct TrialLine {
    n: usize,
    test: String,
    frame: u64,
    target: String,
    offered: String,
    lost: String,
    loss: String,
    verdict: String,
    /// The generator's largest lag behind its schedule, ms ("0.4"; "—" unknown).
    lag: String,
    /// The lag explains the trial's loss: shown as a warning.
    lagged: bool,
    cpu: String,
}

impl Rfc2544Section {
    fn of(run: &RunRow) -> Option<Rfc2544Section> {
        match run.kind {
            RunKind::Rfc2544 => {}
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency => return None,
        }
        use crate::model::display::count;
        use crate::results::rfc2544::Bound;
        let s = &crate::results::rfc2544::Rfc2544Summary::of_summary(&run.summary);
        let trials = s
            .trials
            .iter()
            .take(500)
            .enumerate()
            .map(|(n, t)| {
                let v = &t.verdict;
                let lag = t.sender_lag_ms.filter(|l| l.is_finite());
                let verdict = match (v.passed, v.bound) {
                    (false, _) if v.lagged => format!(
                        "lost frames in PC1's catch-up burst ({:.1} ms behind): not the board's, tried again",
                        lag.unwrap_or(0.0)
                    ),
                    (true, Some(Bound::Generator)) => {
                        "passed; the PC could not offer the rate".to_string()
                    }
                    (true, _) => "passed".to_string(),
                    (false, Some(Bound::Dut)) => "lost frames: the board".to_string(),
                    (false, Some(Bound::Generator)) => "lost frames: the generating PC".to_string(),
                    (false, Some(Bound::Receiver)) => "lost frames: the receiving PC".to_string(),
                    (false, None) => "lost frames".to_string(),
                };
                TrialLine {
                    n: n + 1,
                    test: t.test.clone(),
                    frame: u64::from(t.frame),
                    target: format!(
                        "{} ({:.1} %)",
                        count(t.target_fps.round() as u64),
                        t.target_percent
                    ),
                    offered: match t.burst {
                        Some(_) => format!("a burst of {}", count(t.offered)),
                        None => format!("{} × {:.0} s", count(t.offered), t.seconds),
                    },
                    lost: count(v.lost_frames),
                    loss: format!("{:.3} %", v.loss_ratio * 100.0),
                    verdict,
                    lag: lag.map_or_else(|| "—".to_string(), |l| format!("{l:.1}")),
                    lagged: v.lagged,
                    cpu: Some(
                        t.cpu_busy
                            .iter()
                            .map(|v| format!("{v:.0}"))
                            .collect::<Vec<_>>()
                            .join(" / "),
                    )
                    .filter(|c| !c.is_empty())
                    .map(|c| format!("{c} %"))
                    .unwrap_or_else(|| "—".into()),
                }
            })
            .collect();
        Some(Rfc2544Section {
            throughput: crate::results::rfc2544::throughput_rows(s),
            latency: crate::results::rfc2544::latency_rows(s),
            loss_headings: crate::results::rfc2544::loss_headings(),
            loss: crate::results::rfc2544::loss_rows(s),
            b2b: crate::results::rfc2544::b2b_rows(s),
            chart: crate::results::rfc2544::chart_svg(s),
            loss_chart: crate::results::rfc2544::loss_chart_svg(s),
            advice: crate::results::rfc2544::advice(s),
            trials,
        })
    }
}

/// The headline of a latency run: the latency verdict, its tone, the load's congestion
/// control, and why the load may not have filled the queue.
struct LatencyHead {
    verdict: String,
    /// good (under 5 ms, nothing speaks against the load), warn (30 ms and more) or "".
    class: String,
    congestion: String,
    notes: Vec<String>,
}

impl LatencyHead {
    fn of(run: &RunRow) -> Option<LatencyHead> {
        if !run.kind.has_latency_probes() {
            return None;
        }
        let s = crate::results::latency::LatencyResult::of_summary(&run.summary)?;
        let used = s.congestion.as_ref();
        let notes = crate::results::latency::fill_notes(used, &run.params);
        let (verdict, class) = crate::results::latency::headline(&s.verdict, s.increase_ms, &notes);
        Some(LatencyHead {
            verdict,
            class: class.into(),
            congestion: crate::results::latency::congestion_text(used, &run.params)
                .unwrap_or_else(|| "not recorded (each host's default)".into()),
            notes,
        })
    }
}

/// Ceiling and verdict as shown.
struct AnalysisView {
    ceiling: String,
    basis: String,
    percent: String,
    verdict: String,
    /// Where the packets went, when the verdict carries the ledger's first sentence: shown
    /// after the verdict in normal weight (a 40–50-word bold verdict read 18 lines on a phone).
    verdict_detail: String,
    /// CSS class: good (link-bound), warn (core/softirq, loss on the way), bad (measurement
    /// error), "".
    class: String,
    evidence: Vec<String>,
    /// Paced runs: target / sent / received and the shortfall note.
    rate: Option<RateView>,
}

/// A verdict as the page shows it: the judgement in bold, and the ledger's first sentence
/// (`first_board`, which the analysis appends after "; ") apart. `(verdict, "")` when the
/// verdict does not end with it.
fn split_verdict(verdict: &str, first_board: Option<&String>) -> (String, String) {
    match first_board.and_then(|f| Some((verdict.strip_suffix(f.as_str())?.strip_suffix("; ")?, f)))
    {
        Some((head, detail)) if !head.is_empty() => (head.to_string(), detail.clone()),
        _ => (verdict.to_string(), String::new()),
    }
}

/// Target, sent and received rate of a paced run, as shown.
struct RateView {
    target: String,
    sent: String,
    received: String,
    /// "shortfall: …", "sent in full; the receiver got only …" or "reached the requested rate".
    note: String,
    /// "bad" when the sender fell short, the verdict's tone when the receiver got less, else
    /// "good".
    class: String,
}

impl AnalysisView {
    fn of(a: &crate::results::analysis::Analysis) -> AnalysisView {
        let (verdict, verdict_detail) = split_verdict(&a.verdict_text, a.board.first());
        AnalysisView {
            ceiling: a
                .ceiling_bps
                .map(display::rate)
                .unwrap_or_else(|| "unknown".into()),
            basis: a.ceiling_basis.clone(),
            percent: a
                .percent_of_ceiling
                .map(|p| format!("{p:.1} %"))
                .unwrap_or_else(|| "—".into()),
            verdict,
            verdict_detail,
            class: a.verdict.tone().into(),
            evidence: a.evidence.clone(),
            // The card's note and colour come from the same judgement as the verdict.
            rate: a
                .rate_check
                .zip(a.rate_note())
                .map(|(c, (note, tone))| RateView {
                    target: display::rate(c.target_bits_per_second),
                    sent: display::rate(c.sent_bits_per_second),
                    received: c
                        .received_bits_per_second
                        .map(display::rate)
                        .unwrap_or_else(|| "—".into()),
                    note,
                    class: tone.into(),
                }),
        }
    }
}

/// Mean CPU of one core over the run, as shown.
struct CoreView {
    name: String,
    busy: String,
    user: String,
    system: String,
    irq: String,
    softirq: String,
    peak: String,
    hot: bool,
}

/// One leg of a multi-port run, as shown.
struct LegView {
    n: usize,
    id: i64,
    port: String,
    peer: String,
    test: String,
    status: String,
    sender_rate: String,
    receiver_rate: String,
    retr_or_loss: String,
    percent: String,
    verdict: String,
}

fn core_views(cores: &[crate::results::analysis::CoreLoad]) -> Vec<CoreView> {
    let f = |v: f64| format!("{v:.0} %");
    cores
        .iter()
        .map(|c| CoreView {
            name: if c.cpu < 0 {
                "all".into()
            } else {
                format!("cpu{}", c.cpu)
            },
            busy: f(c.busy),
            user: f(c.user),
            system: f(c.system),
            irq: f(c.irq),
            softirq: f(c.softirq),
            peak: f(c.peak_busy),
            hot: c.cpu >= 0 && c.busy >= crate::results::analysis::CORE_SATURATED,
        })
        .collect()
}

fn leg_views(state: &AppState, run: &RunRow) -> Vec<LegView> {
    if !run.kind.has_legs() {
        return Vec::new();
    }
    state
        .store
        .children(run.id)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let a = crate::results::charts::analyze_run(&state.store, l);
            let v = run_view(l);
            LegView {
                n: i + 1,
                id: l.id,
                port: l.bind_dev.clone().unwrap_or_default(),
                peer: v.peer.clone(),
                test: format!("{} {}", v.protocol, v.direction),
                status: v.status.clone(),
                sender_rate: v.sender_rate.clone(),
                receiver_rate: v.receiver_rate.clone(),
                retr_or_loss: v.retr_or_loss.clone(),
                percent: match a.as_ref().map(|a| (a.percent_of_ceiling, a.ceiling_bps)) {
                    Some((Some(p), _)) => format!("{p:.1} %"),
                    Some((None, None)) => "unknown".into(),
                    _ => "—".into(),
                },
                verdict: a.map(|a| a.verdict_text).unwrap_or_default(),
            }
        })
        .collect()
}

/// A multi-port run's intervals: every leg's, each row's ID naming its leg ("leg 2 · 5").
fn leg_intervals(state: &AppState, run: &RunRow) -> Vec<IntervalView> {
    let mut out = Vec::new();
    for (n, leg) in state
        .store
        .children(run.id)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let iv = state.store.intervals(leg.id).unwrap_or_default();
        for mut v in interval_views(&iv) {
            v.id = format!("leg {} · {}", n + 1, v.id);
            out.push(v);
        }
    }
    out
}

/// Interval sequence numbers the run page shows (the last ones; the exports hold all).
pub const PAGE_INTERVALS: i64 = 1000;

fn load(
    state: &AppState,
    auth: &Auth,
    id: i64,
) -> Result<(RunRow, Vec<IntervalRow>, Option<Report>), HttpResponse> {
    load_tail(state, auth, id, None)
}

/// A run and its report, without its intervals (for answers that stream them).
fn load_head(
    state: &AppState,
    auth: &Auth,
    id: i64,
) -> Result<(RunRow, Option<Report>), HttpResponse> {
    load_tail(state, auth, id, Some(0)).map(|(r, _, rep)| (r, rep))
}

/// [`load`] with only the intervals of the last `tail` sequence numbers (all with `None`).
fn load_tail(
    state: &AppState,
    auth: &Auth,
    id: i64,
    tail: Option<i64>,
) -> Result<(RunRow, Vec<IntervalRow>, Option<Report>), HttpResponse> {
    match state.store.get_run(id) {
        Ok(Some(r)) => {
            let iv = match tail {
                Some(n) => state.store.intervals_tail(id, n),
                None => state.store.intervals(id),
            }
            .map_err(internal)?;
            let rep = state.store.report(id).map_err(internal)?;
            Ok((r, iv, rep))
        }
        Ok(None) => Err(message(
            actix_web::http::StatusCode::NOT_FOUND,
            Some(auth),
            "No such run",
            &format!("There is no run {id}. It may have been deleted."),
        )),
        Err(e) => Err(internal(e)),
    }
}

async fn run_page(auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    let (run, iv, rep) = match load_tail(&state, &auth, id, Some(PAGE_INTERVALS)) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let older_intervals = iv.first().is_some_and(|r| r.seq > 0);
    let intervals = if run.kind.has_legs() {
        leg_intervals(&state, &run)
    } else {
        interval_views(&iv)
    };
    let last_rate = intervals
        .iter()
        .rev()
        .find(|i| i.class == "sum")
        .map(|i| i.bitrate.clone())
        .unwrap_or_else(|| "—".into());
    let text = run_text(&run, rep.as_ref()).is_some();
    let board_summary = (run.kind.has_board_summary() && !run.summary.is_null())
        .then(|| crate::results::text::summary_text(&run));
    let udp = run.protocol == RunProtocol::Udp;
    let analysis = crate::results::charts::analyze_run(&state.store, &run);
    let cores = match &analysis {
        Some(a) => core_views(&a.cores),
        // A multi-port run is judged per leg; its CPU table covers all legs.
        None => core_views(&crate::results::analysis::core_loads(
            &state.store.cpu_samples(id).unwrap_or_default(),
        )),
    };
    let legs = leg_views(&state, &run);
    let latency = LatencyHead::of(&run);
    let rfc2544 = Rfc2544Section::of(&run);
    let mut view = crate::results::view::view(&run);
    if latency.is_some() {
        // The verdict leads the page; Details keep the figures.
        view.facts.retain(|f| f.0 != "Verdict");
    }
    ok(&RunPage {
        latency,
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        col1: if udp { "Jitter" } else { "Retr" }.into(),
        col2: if udp { "Lost/Total" } else { "Cwnd" }.into(),
        live: state.hub.is_live(id),
        view,
        run: {
            let mut v = [run_view(&run)];
            mark_origins(&state.store, &mut v);
            let [v] = v;
            v
        },
        intervals,
        last_rate,
        text,
        iperf3_json: rep.is_some(),
        board_summary,
        // An RFC 2544 run's verdicts are its trials' (the tables below): no ceiling verdict.
        analysis: analysis
            .as_ref()
            .filter(|a| a.bitrate_bps.is_some() && rfc2544.is_none())
            .map(AnalysisView::of),
        rfc2544,
        verdict: crate::results::verdict::judge_run(&state.store, &run).map(|v| {
            (
                if v.pass { "PASS" } else { "FAIL" }.to_string(),
                crate::results::verdict::run_verdict_lines(&v),
            )
        }),
        captures: super::diag::run_captures(id)
            .iter()
            .map(CaptureLine::of)
            .collect(),
        cores,
        legs,
        parent_id: run.parent_id,
        pinned: state
            .store
            .is_pinned(run.id)
            .ok()
            .flatten()
            .unwrap_or(false),
        older_intervals,
        board: {
            let (b, l) = state.store.run_board(id).unwrap_or_default();
            crate::results::view::board_view(b.as_ref(), l.as_ref())
        },
    })
}

async fn delete_run(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    if state.hub.is_live(id) {
        return Ok(message(
            actix_web::http::StatusCode::CONFLICT,
            Some(&auth),
            "Run is active",
            "Stop the run before deleting it.",
        ));
    }
    Ok(match state.store.delete_run(id) {
        Ok(true) => redirect("/runs"),
        Ok(false) => message(
            actix_web::http::StatusCode::NOT_FOUND,
            Some(&auth),
            "No such run",
            "Nothing was deleted.",
        ),
        Err(e) => internal(e),
    })
}

async fn stop_run(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    Ok(if state.hub.stop(id) {
        redirect(&format!("/runs/{id}"))
    } else {
        message(
            actix_web::http::StatusCode::CONFLICT,
            Some(&auth),
            "Not stoppable",
            "Only a running test started from this board can be stopped.",
        )
    })
}

/// `GET /runs/{id}/export.json`: the run's iperf3 `-J` document as a download, streamed.
async fn export_json(auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    let (run, rep) = match load_head(&state, &auth, id) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let b = super::respond::download_head("application/json", &format!("netperfd-run-{id}.json"));
    let st = state.clone();
    super::stream::streamed(b, "run export", move |w| {
        crate::results::export::write_run_json(w, &st.store, &run, rep.as_ref(), true)
    })
}

/// The run's summary as stock iperf3 prints it (its own units: "Mbits/sec", "MBytes"); for
/// forwarding and monitor runs the board's summary first. None when there is neither.
fn run_text(run: &RunRow, rep: Option<&Report>) -> Option<String> {
    let text = rep.map(|r| {
        let mut t = report::text_header(r);
        t.push_str(&report::text_summary(r));
        t
    });
    // Forwarding and monitor runs: what the board saw (ports, forwarded rates, conntrack) first.
    crate::results::text::board_text(run, text)
}

/// `GET /runs/{id}/summary.txt`: [`run_text`] as text/plain; 404 when the run has none.
async fn export_text(auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    match load(&state, &auth, id) {
        Ok((run, _, rep)) => match run_text(&run, rep.as_ref()) {
            Some(t) => HttpResponse::Ok()
                .content_type("text/plain; charset=utf-8")
                .body(t),
            None => message(
                actix_web::http::StatusCode::NOT_FOUND,
                Some(&auth),
                "No text summary",
                &format!("Run {id} has no iperf3-format summary."),
            ),
        },
        Err(r) => r,
    }
}

/// `GET /runs/{id}/export.csv`: the run's CSV as a download, streamed.
async fn export_csv(auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    let (run, rep) = match load_head(&state, &auth, id) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let b =
        super::respond::download_head("text/csv; charset=utf-8", &format!("netperfd-run-{id}.csv"));
    let st = state.clone();
    super::stream::streamed(b, "run export", move |w| {
        crate::results::export::write_run_csv(w, &st.store, &run, rep.as_ref())
    })
}

// ---------------------------------------------------------------- suites

/// The UDP ladder form (also the JSON body of `POST /api/suites/udp-ladder`).
#[derive(Deserialize, Debug, Clone, Default)]
pub struct LadderForm {
    #[serde(default)]
    pub csrf: Option<String>,
    pub host: String,
    #[serde(default)]
    pub port: Option<String>,
    /// "100M,400M,1000M".
    #[serde(default)]
    pub rates: Option<String>,
    /// Seconds per test.
    #[serde(default)]
    pub duration: Option<String>,
    /// Datagram size.
    #[serde(default)]
    pub length: Option<String>,
    /// Board port.
    #[serde(default)]
    pub bind: Option<String>,
}

impl LadderForm {
    /// Validate and start the suite; returns its id.
    pub fn start(&self, state: &AppState) -> Result<i64, String> {
        let rates =
            crate::spec::suite::parse_rates(self.rates.as_deref().unwrap_or("100M,400M,1000M"))?;
        let base = TestRequest {
            host: self.host.clone(),
            port: self.port.clone(),
            duration: self.duration.clone(),
            length: self.length.clone(),
            bind: self.bind.clone(),
            ..Default::default()
        }
        .parse()?;
        let specs = crate::runs::suites::ladder_specs(&base, &rates, &crate::board::ports())?;
        state.hub.start_suite(crate::spec::suite::UDP_LADDER, specs)
    }
}

async fn start_ladder(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<LadderForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(match form.start(&state) {
        Ok(id) => {
            super::audit::suite_started(&auth, &req, id, crate::spec::suite::UDP_LADDER);
            redirect(&format!("/suites/{id}"))
        }
        Err(e) => message(
            actix_web::http::StatusCode::BAD_REQUEST,
            Some(&auth),
            "Cannot start the ladder",
            &e,
        ),
    })
}

// ---------------------------------------------------------------- settings

struct TokenView {
    id: i64,
    name: String,
    created: String,
    /// read-only / run tests / admin.
    scope: &'static str,
}

#[derive(Template)]
#[template(path = "settings.html")]
pub(super) struct SettingsPage {
    nav: bool,
    csrf: String,
    version: String,
    message: Option<String>,
    error: Option<String>,
    new_token: Option<String>,
    tokens: Vec<TokenView>,
    /// History retention in force, one line of text.
    retention: String,
    /// The caps in force, for the form: runs kept and MiB.
    max_runs: u64,
    max_mib: u64,
    /// HTTPS in force: the certificate's fingerprint and pin, or the plain-HTTP warning.
    tls: super::tls::Shown,
    /// The scheme of this board's web UI in curl examples: `https` or `http`.
    scheme: &'static str,
}

pub(super) fn settings(
    state: &AppState,
    auth: &Auth,
    message: Option<String>,
    error: Option<String>,
    new_token: Option<String>,
) -> SettingsPage {
    SettingsPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        message,
        error,
        new_token,
        tokens: state
            .store
            .tokens()
            .unwrap_or_default()
            .into_iter()
            .map(|t| TokenView {
                id: t.id,
                name: t.name,
                created: fmt_time(t.created_at),
                scope: auth::Scope::parse(&t.scope).label(),
            })
            .collect(),
        max_runs: state.store.retention().max_runs,
        max_mib: state.store.retention().max_bytes >> 20,
        tls: state.tls.clone(),
        scheme: if state.config.tls_in_force() {
            "https"
        } else {
            "http"
        },
        retention: {
            let r = state.store.retention();
            format!(
                "At most {} runs and {} MiB of history ({} MiB in use). Imported runs are deleted first, then the oldest of whichever source is over its fair share (own runs 2 parts, scheduled and anonymous runs 1 part each); pinned, running and hand-started suite runs are kept. Anonymous services (payload, sink, source) record at most {} runs per peer a minute, the rest counted in one folded run.",
                r.max_runs,
                r.max_bytes >> 20,
                state.store.used_bytes().unwrap_or(0) >> 20,
                crate::runs::anon::RUNS_PER_MINUTE
            )
        },
    }
}

async fn settings_page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    ok(&settings(&state, &auth, None, None, None))
}

#[derive(Deserialize)]
struct PasswordForm {
    #[serde(default)]
    csrf: Option<String>,
    current: String,
    password: String,
    confirm: String,
}

async fn change_password(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<PasswordForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let ip = client_ip(&req);
    let bad = |e: &str| {
        html(
            actix_web::http::StatusCode::BAD_REQUEST,
            &settings(&state, &auth, None, Some(e.into()), None),
        )
    };
    if state.limiter.check(ip).is_err() {
        return Ok(bad("Too many wrong passwords. Try again later."));
    }
    let Some(hash) = state.admin_hash() else {
        return Ok(bad("No password is set."));
    };
    let Some(right) = auth::verify_password_limited(&hash, &form.current).await else {
        return Ok(bad(
            "The board is busy checking passwords. Try again in a moment.",
        ));
    };
    if !right {
        state.limiter.fail(ip);
        return Ok(bad("The current password is wrong. Nothing was changed."));
    }
    if form.password.chars().count() < auth::MIN_PASSWORD {
        return Ok(bad(
            "The new password must have at least 8 characters. Nothing was changed.",
        ));
    }
    if form.password != form.confirm {
        return Ok(bad("The two new passwords differ. Nothing was changed."));
    }
    let h = auth::hash_password(&form.password).map_err(AuthError::Internal)?;
    state
        .store
        .set_setting(auth::PASSWORD_KEY, &h)
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    // Whoever knew the old password is out: every session and API token ends; this browser
    // gets a new session.
    let (s, t) = state
        .store
        .revoke_all_credentials()
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    tracing::info!(
        sessions = s,
        tokens = t,
        "password changed: sessions ended, tokens revoked"
    );
    let cookie = session_cookie(&state, &req).map_err(AuthError::Internal)?;
    let csrf = state
        .store
        .session(&crate::model::secrets::sha256_hex(cookie.value()))
        .ok()
        .flatten()
        .map(|r| r.csrf)
        .unwrap_or_default();
    let me = Auth::Session {
        token_hash: crate::model::secrets::sha256_hex(cookie.value()),
        csrf,
    };
    let msg = format!(
        "Password changed. Every other session was logged out and all {t} API tokens were revoked (make new ones below)."
    );
    let mut resp = ok(&settings(&state, &me, Some(msg), None, None));
    let _ = resp.add_cookie(&cookie);
    Ok(resp)
}

#[derive(Deserialize)]
struct TokenForm {
    #[serde(default)]
    csrf: Option<String>,
    name: String,
    /// read / run / admin (default read: the least a token may do).
    #[serde(default)]
    scope: Option<String>,
}

async fn create_token(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<TokenForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let name = form.name.trim();
    if name.is_empty() || name.chars().count() > 64 {
        return Ok(html(
            actix_web::http::StatusCode::BAD_REQUEST,
            &settings(
                &state,
                &auth,
                None,
                Some("A token name has 1 to 64 characters.".into()),
                None,
            ),
        ));
    }
    let scope = match form.scope.as_deref().unwrap_or("read") {
        w @ ("read" | "run" | "admin") => auth::Scope::parse(w),
        _ => {
            return Ok(html(
                actix_web::http::StatusCode::BAD_REQUEST,
                &settings(
                    &state,
                    &auth,
                    None,
                    Some("A token's scope is read, run or admin.".into()),
                    None,
                ),
            ))
        }
    };
    let token = auth::random_hex(24);
    state
        .store
        .create_token(
            name,
            &crate::model::secrets::sha256_hex(&token),
            scope.as_str(),
        )
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    Ok(ok(&settings(&state, &auth, None, None, Some(token))))
}

async fn delete_token(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let _ = state.store.delete_token(path.into_inner());
    Ok(redirect("/settings"))
}

#[cfg(test)]
mod tests {
    use super::split_verdict;

    /// Issue 38 item 7: the ledger's sentence leaves the bold verdict; nothing else is cut.
    #[test]
    fn the_ledger_sentence_is_shown_apart_from_the_verdict() {
        let first = "87,559 of 87,520 lost datagrams were dropped by the board's own egress queue (tbf on eth0): the sender outran the link — lower -b or raise the shaper".to_string();
        let v = format!("limited by the board's own shaper: tbf 50 Mbit/s on eth0; the requested rate was sent, the receiver got 32.4 % of it; {first}");
        let (head, detail) = split_verdict(&v, Some(&first));
        assert_eq!(
            head,
            "limited by the board's own shaper: tbf 50 Mbit/s on eth0; the requested rate was sent, the receiver got 32.4 % of it"
        );
        assert_eq!(detail, first);
        // No ledger sentence in the verdict, or none at all: the verdict whole.
        assert_eq!(
            split_verdict("link-bound", Some(&first)),
            ("link-bound".to_string(), String::new())
        );
        assert_eq!(split_verdict("link-bound", None).0, "link-bound");
        assert_eq!(split_verdict(&first, Some(&first)).0, first);
    }
}
