//! History retention at the edge: pinning a run (page button and `POST /api/runs/{id}/pin`)
//! and the caps in Settings (`POST /settings/retention`, `GET`/`PUT /api/settings/retention`).
//! Pinned runs are never pruned; lowering a cap prunes the oldest unpinned runs at once.

use super::auth::{Auth, AuthError};
use super::extract::Form;
use super::extract::{ApiWrite, CsrfForm};
use super::pages::settings;
use super::respond::{json_error, run_not_found};
use super::respond::{ok, redirect};
use super::routes::{Routes, ADMIN, READ};
use super::AppState;
use crate::store::Retention;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::json;

pub(super) fn configure(r: &mut Routes) {
    r.post("/runs/{id}/pin", ADMIN, pin_form)
        .post("/runs/{id}/unpin", ADMIN, unpin_form)
        .post("/settings/retention", ADMIN, caps_form)
        .post("/api/runs/{id}/pin", ADMIN, pin_api)
        .get("/api/settings/retention", READ, caps_get)
        .put("/api/settings/retention", ADMIN, caps_put);
}

fn internal(e: impl std::fmt::Display) -> HttpResponse {
    tracing::error!("retention: {e}");
    json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
}

async fn set_pin(
    auth: Auth,
    state: web::Data<AppState>,
    id: i64,
    form: CsrfForm,
    pinned: bool,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(match state.store.set_pinned(id, pinned) {
        Ok(true) => redirect(&format!("/runs/{id}")),
        Ok(false) => run_not_found(id),
        Err(e) => internal(e),
    })
}

async fn pin_form(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    set_pin(auth, state, path.into_inner(), form.into_inner(), true).await
}

async fn unpin_form(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    set_pin(auth, state, path.into_inner(), form.into_inner(), false).await
}

/// `POST /api/runs/{id}/pin` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PinBody {
    /// true: keep the run forever; false: let retention prune it again.
    pinned: bool,
}

async fn pin_api(
    _: ApiWrite,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    body: web::Json<PinBody>,
) -> Result<HttpResponse, AuthError> {
    let id = path.into_inner();
    Ok(match state.store.set_pinned(id, body.pinned) {
        Ok(true) => HttpResponse::Ok().json(json!({"id": id, "pinned": body.pinned})),
        Ok(false) => run_not_found(id),
        Err(e) => internal(e),
    })
}

fn caps_json(state: &AppState) -> serde_json::Value {
    let r = state.store.retention();
    json!({
        "max_runs": r.max_runs,
        "max_bytes": r.max_bytes,
        "used_bytes": state.store.used_bytes().unwrap_or(0),
        "anonymous_runs_per_peer_per_minute": crate::runs::anon::RUNS_PER_MINUTE,
    })
}

async fn caps_get(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(caps_json(&state))
}

/// `PUT /api/settings/retention` body: runs kept and the size cap in bytes (whole MiB).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CapsBody {
    max_runs: u64,
    max_bytes: u64,
}

async fn caps_put(
    ApiWrite { auth, .. }: ApiWrite,
    state: web::Data<AppState>,
    body: web::Json<CapsBody>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(super::auth::RETENTION_NEEDS_LOGIN)?;
    if body.max_bytes % (1 << 20) != 0 {
        return Ok(json_error(
            StatusCode::BAD_REQUEST,
            format!("max_bytes must be whole MiB, got {}", body.max_bytes),
        ));
    }
    let caps = match Retention::checked(body.max_runs, body.max_bytes >> 20) {
        Ok(c) => c,
        Err(e) => return Ok(json_error(StatusCode::BAD_REQUEST, e)),
    };
    Ok(match state.store.set_retention(caps) {
        Ok(pruned) => {
            let mut v = caps_json(&state);
            v["pruned"] = json!(pruned);
            HttpResponse::Ok().json(v)
        }
        Err(e) => internal(e),
    })
}

/// The Settings form: runs kept and MiB, as typed.
#[derive(Deserialize)]
struct CapsForm {
    #[serde(default)]
    csrf: Option<String>,
    max_runs: String,
    max_mib: String,
}

async fn caps_form(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CapsForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(super::auth::RETENTION_NEEDS_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let parse = |what: &str, v: &str| -> Result<u64, String> {
        v.trim()
            .parse::<u64>()
            .map_err(|_| format!("{what} must be a whole number, got '{}'", v.trim()))
    };
    let caps = parse("runs kept", &form.max_runs)
        .and_then(|runs| Ok((runs, parse("history size", &form.max_mib)?)))
        .and_then(|(runs, mib)| Retention::checked(runs, mib));
    let page = match caps {
        Err(e) => settings(&state, &auth, None, Some(e), None),
        Ok(c) => match state.store.set_retention(c) {
            Ok(pruned) => settings(
                &state,
                &auth,
                Some(format!(
                    "History retention saved: at most {} runs and {} MiB; {pruned} runs pruned now.",
                    c.max_runs,
                    c.max_bytes >> 20
                )),
                None,
                None,
            ),
            Err(e) => return Ok(internal(e)),
        },
    };
    Ok(ok(&page))
}
