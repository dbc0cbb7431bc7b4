//! Chart and analysis routes: `GET /api/runs/{id}/chart` and `GET /api/runs/{id}/analysis`
//! (series and verdicts from [`crate::results::charts`]), and the chart library's embedded files.

use super::auth::Auth;
use super::routes::{Routes, READ};
use super::AppState;
use crate::results::charts::{analyze_run, charts_of};
use actix_web::{http::StatusCode, web, HttpResponse};
use serde_json::json;

/// Register the chart routes (the chart scripts are served by `web::assets`).
pub fn configure(r: &mut Routes) {
    r.get("/api/runs/{id}/chart", READ, chart)
        .get("/api/runs/{id}/analysis", READ, analysis_api);
}

use super::run_not_found as not_found;

async fn chart(_auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    match state.store.get_run(id) {
        Ok(Some(r)) => HttpResponse::Ok().json(charts_of(&state.store, &r)),
        Ok(None) => not_found(id),
        Err(e) => super::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn analysis_api(
    _auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    let id = path.into_inner();
    match state.store.get_run(id) {
        Ok(Some(r)) => {
            let legs: Vec<serde_json::Value> = if r.kind.has_legs() {
                state
                    .store
                    .children(id)
                    .unwrap_or_default()
                    .iter()
                    .map(|l| json!({"id": l.id, "port": l.bind_dev, "analysis": analyze_run(&state.store, l)}))
                    .collect()
            } else {
                Vec::new()
            };
            HttpResponse::Ok().json(json!({
                "run": id,
                "analysis": analyze_run(&state.store, &r),
                "legs": legs,
            }))
        }
        Ok(None) => not_found(id),
        Err(e) => super::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
