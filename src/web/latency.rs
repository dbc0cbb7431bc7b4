//! The latency-under-load page (`/latency`: a form like New test, and the recent latency
//! runs) and its API (`POST /api/runs/latency` with the form's fields as JSON). Bad input is
//! answered with the form and one clear error; nothing runs then.

use super::auth::{Auth, AuthError};
use super::extract::{ApiWrite, Form, Json};
use super::pages::{port_options, PortOption};
use super::respond::{html, redirect};
use super::routes::{Routes, ADMIN, READ, RUN};
use super::AppState;
use crate::engine::report::version_string;
use crate::model::time::fmt_time;
use crate::model::RunKind;
use crate::spec::latency::LatencyForm;
use crate::store::RunFilter;
use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use serde_json::json;

/// Register the routes (before `/api/runs/{id}`).
pub(crate) fn configure(r: &mut Routes) {
    r.get("/latency", READ, page)
        .post("/latency", ADMIN, start_form)
        .post("/api/runs/latency", RUN, start_api);
}

struct RunLine {
    id: i64,
    when: String,
    peer: String,
    load: String,
    idle: String,
    loaded: String,
    increase: String,
    rpm: String,
    status: String,
}

#[derive(Template)]
#[template(path = "latency.html")]
struct LatencyPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
    host: String,
    port: String,
    load: String,
    streams: String,
    idle: String,
    loaded: String,
    interval: String,
    bind: String,
    congestion: String,
    ports: Vec<PortOption>,
    runs: Vec<RunLine>,
}

fn text(v: &Option<serde_json::Value>, d: &str) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => d.to_string(),
        Some(x) => x.to_string(),
    }
}

fn build(state: &AppState, auth: &Auth, f: &LatencyForm, error: Option<String>) -> LatencyPage {
    let ms = |v: Option<f64>| {
        v.map(|x| format!("{x:.2} ms"))
            .unwrap_or_else(|| "—".into())
    };
    let runs = state
        .store
        .list_runs(&RunFilter {
            limit: Some(300),
            ..Default::default()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.kind == RunKind::Latency)
        .take(20)
        .map(|r| {
            let f = crate::results::latency::LatencyResult::of_summary(&r.summary)
                .map(|s| crate::results::latency::LatencyFigures::of(&s));
            RunLine {
                id: r.id,
                when: fmt_time(r.started_at),
                peer: r.peer_host.clone(),
                load: {
                    let p = crate::results::latency::StoredLatencyParams::of_params(&r.params);
                    format!(
                        "{} × {}",
                        p.load.as_deref().unwrap_or("?"),
                        p.streams.unwrap_or(1)
                    )
                },
                idle: ms(f.as_ref().and_then(|f| f.idle_p50_ms)),
                loaded: ms(f.as_ref().and_then(|f| f.loaded_p50_ms)),
                increase: ms(f.as_ref().and_then(|f| f.increase_ms)),
                rpm: f
                    .as_ref()
                    .and_then(|f| f.rpm)
                    .map(crate::model::display::whole)
                    .unwrap_or_else(|| "—".into()),
                status: r.status.to_string(),
            }
        })
        .collect();
    LatencyPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error,
        host: f.host.clone(),
        port: text(&f.port, "5201"),
        load: f
            .load
            .clone()
            .filter(|l| !l.trim().is_empty())
            .unwrap_or_else(|| crate::spec::latency::Load::default().word().into()),
        streams: text(
            &f.streams,
            &crate::spec::latency::DEFAULT_STREAMS.to_string(),
        ),
        idle: text(&f.idle, "5"),
        loaded: text(&f.loaded, "10"),
        interval: text(&f.interval, "10"),
        bind: f.bind.clone().unwrap_or_default(),
        congestion: f.congestion.clone().unwrap_or_default(),
        ports: port_options(),
        runs,
    }
}

async fn page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    html(
        StatusCode::OK,
        &build(&state, &auth, &LatencyForm::default(), None),
    )
}

async fn start_form(
    req: actix_web::HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<LatencyForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let res = match form.to_spec() {
        Ok(s) => crate::runs::latency::start_latency(&state.runs, s, None).await,
        Err(e) => Err(e),
    };
    Ok(match res {
        Ok((id, _)) => {
            super::audit::run_started(&state, &auth, &req, id);
            redirect(&format!("/runs/{id}"))
        }
        Err(e) => html(
            StatusCode::BAD_REQUEST,
            &build(&state, &auth, &form, Some(e)),
        ),
    })
}

async fn start_api(
    req: actix_web::HttpRequest,
    ApiWrite {
        auth,
        body: Json(form),
    }: ApiWrite<Json<LatencyForm>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    let bad = |m: String| super::respond::json_error(StatusCode::BAD_REQUEST, m);
    let res = match form.to_spec() {
        Ok(s) => crate::runs::latency::start_latency(&state.runs, s, None).await,
        Err(e) => Err(e),
    };
    Ok(match res {
        Ok((id, _)) => {
            // Audited as every other start is (s51 tryout: latency runs were not).
            super::audit::run_started(&state, &auth, &req, id);
            HttpResponse::Created()
                .insert_header(("Location", format!("/api/runs/{id}")))
                .json(json!({"id": id, "url": format!("/runs/{id}")}))
        }
        Err(e) => bad(e),
    })
}
