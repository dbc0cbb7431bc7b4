//! The RFC 2544 page (`/rfc2544`: the form, and the recent RFC 2544 runs) and its API
//! (`POST /api/runs/rfc2544` with the form's fields as JSON; numbers, booleans and lists are
//! taken too). The peer agent's address and token are the forwarding page's (one agent on
//! PC1 serves both). Bad input is answered with the form and one clear error; nothing runs.

use super::auth::{Auth, AuthError};
use super::extract::{invalid_body, ApiBody, ApiWrite, Form};
use super::respond::{html, redirect};
use super::routes::{Routes, ADMIN, READ, RUN};
use super::AppState;
use crate::engine::report::version_string;
use crate::model::time::fmt_time;
use crate::model::RunKind;
use crate::runs::forward::{normalize, truthy, TOKEN_KEY, URL_KEY};
use crate::spec::rfc2544::{Rfc2544Request, Rfc2544Test, DEFAULT_SIZES};
use crate::store::RunFilter;
use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use askama::Template;
use serde_json::json;

/// Register the routes (before `/api/runs/{id}`).
pub(crate) fn configure(r: &mut Routes) {
    r.get("/rfc2544", READ, page)
        .post("/rfc2544", ADMIN, start_form)
        .post("/api/runs/rfc2544", RUN, start_api);
}

struct RunLine {
    id: i64,
    when: String,
    path: String,
    sizes: String,
    best: String,
    status: String,
}

#[derive(Template)]
#[template(path = "rfc2544.html")]
struct Rfc2544Page {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
    peer: String,
    token_note: String,
    target: String,
    port: String,
    ingress: String,
    egress: String,
    nat: bool,
    sizes: String,
    trial: String,
    loss: String,
    resolution: String,
    direction: String,
    throughput: bool,
    /// The latency test is ticked; PC2's echo port for it.
    latency_test: bool,
    echo_port: String,
    loss_test: bool,
    /// The back-to-back test is ticked; searches per frame size.
    b2b_test: bool,
    b2b_repeat: String,
    line_rate: String,
    /// Pass/fail limits given with the run (empty = not judged).
    min_throughput_percent: String,
    max_latency_ms: String,
    max_cpu_percent: String,
    port_names: Vec<String>,
    runs: Vec<RunLine>,
}

fn g(o: &Option<String>, d: &str) -> String {
    o.clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| d.to_string())
}

fn stored_token(state: &AppState) -> Option<String> {
    state.store.setting(TOKEN_KEY).ok().flatten()
}

fn build(
    state: &AppState,
    auth: &Auth,
    f: Option<&Rfc2544Request>,
    error: Option<String>,
) -> Rfc2544Page {
    let names: Vec<String> = crate::board::ports()
        .into_iter()
        .filter(|p| !p.loopback)
        .map(|p| p.name)
        .collect();
    let dflt = |i: usize| names.get(i).cloned().unwrap_or_default();
    let r = f.cloned().unwrap_or_default();
    let runs = state
        .store
        .list_runs(&RunFilter {
            kind: Some(RunKind::Rfc2544.as_str().into()),
            limit: Some(20),
            ..Default::default()
        })
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            let rows = crate::results::rfc2544::throughput_rows(
                &crate::results::rfc2544::Rfc2544Summary::of_summary(&r.summary),
            );
            RunLine {
                id: r.id,
                when: fmt_time(r.started_at),
                path: crate::results::view::board_ports(&r).unwrap_or_default(),
                sizes: crate::results::rfc2544_params::Rfc2544Params::of_params(&r.params)
                    .sizes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                best: rows
                    .last()
                    .map(|x| format!("{} B: {} fps ({})", x.frame, x.fps, x.percent))
                    .unwrap_or_else(|| "—".into()),
                status: r.status.to_string(),
            }
        })
        .collect();
    let tests = g(&r.tests, "throughput");
    let sizes_default = DEFAULT_SIZES
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(",");
    Rfc2544Page {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error,
        peer: if r.peer.is_empty() {
            state
                .store
                .setting(URL_KEY)
                .ok()
                .flatten()
                .unwrap_or_default()
        } else {
            r.peer.clone()
        },
        token_note: match stored_token(state) {
            Some(t) => format!(
                "a token is stored ({} characters); leave empty to use it",
                t.len()
            ),
            None => "no token stored yet".into(),
        },
        target: r.target.clone(),
        port: g(&r.port, "5201"),
        ingress: if r.ingress.is_empty() {
            dflt(0)
        } else {
            r.ingress.clone()
        },
        egress: if r.egress.is_empty() {
            dflt(1)
        } else {
            r.egress.clone()
        },
        nat: f.is_none() || truthy(&r.nat),
        sizes: g(&r.sizes, &sizes_default),
        trial: g(&r.trial, "10"),
        loss: g(&r.loss, "0"),
        resolution: g(&r.resolution, "0.5"),
        direction: g(&r.direction, "send"),
        throughput: tests.contains("throughput"),
        latency_test: tests.split(',').any(|t| t.trim() == "latency"),
        loss_test: tests.split(',').any(|t| t.trim() == "loss"),
        b2b_test: tests
            .split(',')
            .any(|t| Rfc2544Test::parse(t.trim()) == Some(Rfc2544Test::BackToBack)),
        b2b_repeat: g(&r.b2b_repeat, "1"),
        echo_port: g(&r.echo_port, "5291"),
        line_rate: g(&r.line_rate, ""),
        min_throughput_percent: g(&r.min_throughput_percent, ""),
        max_latency_ms: g(&r.max_latency_ms, ""),
        max_cpu_percent: g(&r.max_cpu_percent, ""),
        port_names: names,
        runs,
    }
}

/// Check and start a run; as on the forwarding page, the agent address is kept for the next
/// run, and a new token once the run with it has completed. Its id, or the message to show.
/// The stored token goes only to the stored agent address, NAT through the management port
/// needs an admin, and only an admin's run changes the stored address and token (see
/// [`super::forwarding::remember_agent`]).
async fn start(
    state: &AppState,
    auth: &Auth,
    http: &HttpRequest,
    req: &Rfc2544Request,
) -> Result<i64, String> {
    let stored =
        crate::runs::forward::stored_token_for(&state.store, &req.peer, req.token.as_deref())?;
    let plan = req.plan(&crate::board::port_facts().await, stored.as_deref())?;
    super::forwarding::check_nat_scope(auth, http, plan.nat, &plan.ingress, &plan.egress)?;
    let (id, done) =
        crate::runs::rfc2544::start_rfc2544(&state.runs, Some(state.board.clone()), plan, None)?;
    super::forwarding::remember_agent(state, auth, &req.peer, req.token.as_deref(), id, done);
    Ok(id)
}

async fn page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    html(StatusCode::OK, &build(&state, &auth, None, None))
}

/// The form's test checkboxes (`test_throughput`, `test_latency`, `test_loss`, `test_b2b`)
/// become `tests`.
#[derive(serde::Deserialize)]
struct FormBody {
    #[serde(flatten)]
    req: Rfc2544Request,
    #[serde(default)]
    test_throughput: Option<String>,
    #[serde(default)]
    test_latency: Option<String>,
    #[serde(default)]
    test_loss: Option<String>,
    #[serde(default)]
    test_b2b: Option<String>,
}

async fn start_form(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<FormBody>,
) -> Result<HttpResponse, AuthError> {
    let FormBody {
        req: mut r,
        test_throughput,
        test_latency,
        test_loss,
        test_b2b,
    } = form.into_inner();
    auth.check_csrf(r.csrf.as_deref())?;
    if r.nat.is_none() {
        r.nat = Some("off".into());
    }
    let mut tests = Vec::new();
    if truthy(&test_throughput) {
        tests.push("throughput");
    }
    if truthy(&test_latency) {
        tests.push("latency");
    }
    if truthy(&test_loss) {
        tests.push("loss");
    }
    if truthy(&test_b2b) {
        tests.push("back-to-back");
    }
    r.tests = Some(tests.join(","));
    Ok(match start(&state, &auth, &req, &r).await {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            redirect(&format!("/runs/{id}"))
        }
        Err(e) => {
            r.token = None;
            html(
                StatusCode::BAD_REQUEST,
                &build(&state, &auth, Some(&r), Some(e)),
            )
        }
    })
}

/// `POST /api/runs/rfc2544`'s body: unknown keys refused, numbers read as the form's strings,
/// then the request; 400 `{"error": "invalid request body: …"}` otherwise.
struct Rfc2544Body(Rfc2544Request);

impl ApiBody for Rfc2544Body {
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse> {
        serde_json::from_slice::<serde_json::Value>(&body)
            .map_err(|e| e.to_string())
            .and_then(|v| {
                if let serde_json::Value::Object(m) = &v {
                    Rfc2544Request::check_keys(m.keys())?;
                }
                normalize(v)
            })
            .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
            .map(Rfc2544Body)
            .map_err(invalid_body)
    }
}

async fn start_api(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: Rfc2544Body(r),
    }: ApiWrite<Rfc2544Body>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    let bad = |m: String| super::respond::json_error(StatusCode::BAD_REQUEST, m);
    Ok(match start(&state, &auth, &req, &r).await {
        Ok(id) => {
            super::audit::run_started(&state, &auth, &req, id);
            HttpResponse::Created()
                .insert_header(("Location", format!("/api/runs/{id}")))
                .json(json!({"id": id, "url": format!("/runs/{id}")}))
        }
        Err(e) => bad(e),
    })
}
