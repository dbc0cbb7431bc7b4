//! Scheduled suite runs in the web UI and API.
//!
//! Page: `/schedules` (list, add, edit, delete, enable/disable; POST forms with the CSRF
//! field). API: `/api/schedules` (GET list, POST create), `/api/schedules/{id}` (GET, PUT,
//! DELETE). A request is a [`ScheduleRequest`]; a bad one gets 400 and a clear message and
//! changes nothing.

use super::auth::{Auth, AuthError};
use super::extract::{ApiWrite, Form, Json};
use super::respond::json_error;
use super::respond::{html, redirect};
use super::routes::{Routes, ADMIN, READ};
use super::AppState;
use crate::engine::report::version_string;
use crate::model::time::{fmt_time, now_ms};
use crate::spec::schedule::{self as sched, ScheduleRequest};
use crate::store::{NewSchedule, ScheduleRow};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use serde_json::json;

/// Register the routes.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/schedules", READ, page)
        .post("/schedules/save", ADMIN, save_form)
        .post("/schedules/{id}/delete", ADMIN, delete_form)
        .get("/api/schedules", READ, api_list)
        .post("/api/schedules", ADMIN, api_create)
        .get("/api/schedules/{id}", READ, api_show)
        .put("/api/schedules/{id}", ADMIN, api_update)
        .delete("/api/schedules/{id}", ADMIN, api_delete);
}

type Failure = (StatusCode, String);

/// Check `r` and store it as schedule `id` (new when `None`); returns its id.
fn save(state: &AppState, id: Option<i64>, r: &ScheduleRequest) -> Result<i64, Failure> {
    let now = now_ms();
    let bad = |e: String| (StatusCode::BAD_REQUEST, e);
    if id.is_none() {
        let max = crate::runs::schedule::MAX_SCHEDULES;
        let have = state
            .store
            .schedules()
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
            .len();
        if have >= max {
            return Err((
                StatusCode::CONFLICT,
                format!("this board keeps at most {max} schedules ({have} now): delete one before adding another"),
            ));
        }
    }
    let s = r
        .check(state.config.schedule_min_period_s, now)
        .map_err(bad)?;
    let def = crate::spec::suite::find(&state.store, &s.suite)
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e))?
        .ok_or_else(|| bad(format!("there is no suite definition '{}'", s.suite)))?;
    // The definition must plan against this target now (bad host, port, board port …).
    let target: crate::spec::suite::RunTargetForm =
        serde_json::from_value(s.target.clone()).map_err(|e| bad(e.to_string()))?;
    let target = target.to_target();
    crate::spec::suite::from_row(&def)
        .and_then(|d| target.and_then(|t| d.plan(&t, &crate::board::ports())))
        .map_err(|e| bad(format!("suite '{}': {e}", def.name)))?;
    let next = sched::next_after(s.every, now, s.stop_at)
        .ok_or_else(|| bad("it would never fire before its stop date".into()))?;
    let (every_s, daily_at) = sched::stored(s.every);
    let n = NewSchedule {
        def_id: def.id,
        target: s.target,
        every_s,
        daily_at,
        stop_at: s.stop_at,
        enabled: s.enabled,
        next_at: Some(next),
    };
    let e500 = |e: crate::store::StoreError| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    match id {
        None => state.store.create_schedule(&n).map_err(e500),
        Some(id) => {
            if state.store.update_schedule(id, &n).map_err(e500)? {
                Ok(id)
            } else {
                Err((StatusCode::NOT_FOUND, format!("there is no schedule {id}")))
            }
        }
    }
}

/// A schedule as the API and the page show it.
fn view(state: &AppState, s: &ScheduleRow) -> serde_json::Value {
    let suite = state
        .store
        .suite_def(s.def_id)
        .ok()
        .flatten()
        .map(|d| d.name)
        .unwrap_or_default();
    let when = sched::from_stored(s.every_s, s.daily_at.as_deref())
        .map(sched::describe)
        .unwrap_or_default();
    json!({
        "id": s.id,
        "suite": suite,
        "def_id": s.def_id,
        "target": s.target,
        "every_s": s.every_s,
        "daily_at": s.daily_at,
        "when": when,
        "stop_at": s.stop_at,
        "enabled": s.enabled,
        "next_at": s.next_at,
        "last_at": s.last_at,
        "last_suite_id": s.last_suite_id,
        "last_note": s.last_note,
    })
}

// ---------------------------------------------------------------- page

struct Row {
    id: i64,
    suite: String,
    host: String,
    when: String,
    stop: String,
    next: String,
    last: String,
    note: String,
    last_suite: Option<i64>,
    enabled: bool,
    /// Form values for editing.
    every: String,
    daily_at: String,
    stop_at: String,
    port: String,
    bind: String,
    time: String,
    label: String,
}

#[derive(Template)]
#[template(path = "schedules.html")]
struct Page {
    nav: bool,
    csrf: String,
    version: String,
    rows: Vec<Row>,
    suites: Vec<String>,
    min_period: u64,
    error: Option<String>,
}

fn text(v: &serde_json::Value, k: &str) -> String {
    match v.get(k) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn page_view(state: &AppState, auth: &Auth, error: Option<String>) -> Page {
    let rows = state
        .store
        .schedules()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            let v = view(state, s);
            let stop_at = s
                .stop_at
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
                .unwrap_or_default();
            Row {
                id: s.id,
                suite: text(&v, "suite"),
                host: text(&s.target, "host"),
                when: text(&v, "when"),
                stop: s.stop_at.map(fmt_time).unwrap_or_else(|| "-".into()),
                next: match (s.enabled, s.next_at) {
                    (true, Some(n)) => fmt_time(n),
                    _ => "- (disabled)".into(),
                },
                last: s.last_at.map(fmt_time).unwrap_or_else(|| "never".into()),
                note: s.last_note.clone().unwrap_or_default(),
                last_suite: s.last_suite_id,
                enabled: s.enabled,
                every: s.every_s.map(|e| format!("{e}s")).unwrap_or_default(),
                daily_at: s.daily_at.clone().unwrap_or_default(),
                stop_at,
                port: text(&s.target, "port"),
                bind: text(&s.target, "bind"),
                time: text(&s.target, "time"),
                label: text(&s.target, "label"),
            }
        })
        .collect();
    Page {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        rows,
        suites: state
            .store
            .suite_defs()
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.name)
            .collect(),
        min_period: state.config.schedule_min_period_s,
        error,
    }
}

async fn page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    html(StatusCode::OK, &page_view(&state, &auth, None))
}

#[derive(serde::Deserialize)]
struct SaveForm {
    #[serde(default)]
    csrf: Option<String>,
    /// Empty for a new schedule.
    #[serde(default)]
    id: Option<String>,
    suite: String,
    host: String,
    #[serde(default)]
    port: Option<String>,
    #[serde(default)]
    bind: Option<String>,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    label: Option<String>,
    /// "period" or "daily".
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    every: Option<String>,
    #[serde(default)]
    daily_at: Option<String>,
    #[serde(default)]
    stop_at: Option<String>,
    #[serde(default)]
    enabled: Option<String>,
}

async fn save_form(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<SaveForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let f = form.into_inner();
    let id = match f.id.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => match s.parse::<i64>() {
            Ok(i) => Some(i),
            Err(_) => {
                let p = page_view(&state, &auth, Some(format!("'{s}' is not a schedule id")));
                return Ok(html(StatusCode::BAD_REQUEST, &p));
            }
        },
    };
    let daily = f.mode.as_deref() == Some("daily");
    let r = ScheduleRequest {
        suite: f.suite,
        host: f.host,
        port: f.port,
        bind: f.bind,
        time: f.time,
        label: f.label,
        every: if daily { None } else { f.every },
        daily_at: if daily { f.daily_at } else { None },
        stop_at: f.stop_at,
        enabled: Some(f.enabled.is_some()),
    };
    Ok(match save(&state, id, &r) {
        Ok(_) => redirect("/schedules"),
        Err((s, e)) => html(
            s,
            &page_view(&state, &auth, Some(format!("Schedule not saved: {e}"))),
        ),
    })
}

#[derive(serde::Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: Option<String>,
}

async fn delete_form(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(match state.store.delete_schedule(path.into_inner()) {
        Ok(true) => redirect("/schedules"),
        Ok(false) => html(
            StatusCode::NOT_FOUND,
            &page_view(&state, &auth, Some("There is no such schedule.".into())),
        ),
        Err(e) => html(
            StatusCode::INTERNAL_SERVER_ERROR,
            &page_view(&state, &auth, Some(e.to_string())),
        ),
    })
}

// ---------------------------------------------------------------- API

async fn api_list(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    match state.store.schedules() {
        Ok(v) => HttpResponse::Ok().json(v.iter().map(|s| view(&state, s)).collect::<Vec<_>>()),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn api_show(_auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    match state.store.schedule(id) {
        Ok(Some(s)) => HttpResponse::Ok().json(view(&state, &s)),
        Ok(None) => json_error(StatusCode::NOT_FOUND, format!("there is no schedule {id}")),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn api_create(
    ApiWrite { body: Json(r), .. }: ApiWrite<Json<ScheduleRequest>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    Ok(match save(&state, None, &r) {
        Ok(id) => match state.store.schedule(id) {
            Ok(Some(s)) => HttpResponse::Created()
                .insert_header(("Location", format!("/api/schedules/{id}")))
                .json(view(&state, &s)),
            _ => HttpResponse::Created().json(json!({"id": id})),
        },
        Err((s, e)) => json_error(s, e),
    })
}

async fn api_update(
    ApiWrite { body: Json(r), .. }: ApiWrite<Json<ScheduleRequest>>,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, AuthError> {
    let id = path.into_inner();
    Ok(match save(&state, Some(id), &r) {
        Ok(id) => match state.store.schedule(id) {
            Ok(Some(s)) => HttpResponse::Ok().json(view(&state, &s)),
            _ => HttpResponse::Ok().json(json!({"id": id})),
        },
        Err((s, e)) => json_error(s, e),
    })
}

async fn api_delete(
    _: ApiWrite,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, AuthError> {
    let id = path.into_inner();
    Ok(match state.store.delete_schedule(id) {
        Ok(true) => HttpResponse::NoContent().finish(),
        Ok(false) => json_error(StatusCode::NOT_FOUND, format!("there is no schedule {id}")),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    })
}
