//! Chart and analysis routes: `GET /api/runs/{id}/chart` and `GET /api/runs/{id}/analysis`
//! (series and verdicts from [`crate::results::charts`]), and the chart library's embedded files.

use super::auth::Auth;
use super::routes::{Routes, READ};
use super::AppState;
use crate::results::charts::{analyze_run, charts_of};
use actix_web::{http::StatusCode, web, HttpResponse};
use serde_json::json;

/// Register the chart routes (the chart scripts are served by `web::assets`).
pub(crate) fn configure(r: &mut Routes) {
    r.get("/api/runs/{id}/chart", READ, chart)
        .get("/api/runs/{id}/analysis", READ, analysis_api);
}

use super::respond::run_not_found as not_found;

async fn chart(_auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    let store = state.store.clone();
    // Off the async workers: a long run's intervals take seconds to read and chart, and the
    // other requests must not wait for them (issue 37, item 9).
    let res = web::block(move || store.get_run(id).map(|r| r.map(|r| charts_of(&store, &r)))).await;
    match res {
        Ok(Ok(Some(c))) => HttpResponse::Ok().json(c),
        Ok(Ok(None)) => not_found(id),
        Ok(Err(e)) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn analysis_api(
    _auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    let id = path.into_inner();
    let store = state.store.clone();
    // Off the async workers, as the chart.
    let res = web::block(move || {
        let Some(r) = store.get_run(id)? else {
            return Ok(None);
        };
        let legs: Vec<serde_json::Value> = if r.kind.has_legs() {
            store
                .children(id)
                .unwrap_or_default()
                .iter()
                .map(
                    |l| json!({"id": l.id, "port": l.bind_dev, "analysis": analyze_run(&store, l)}),
                )
                .collect()
        } else {
            Vec::new()
        };
        Ok::<_, crate::store::StoreError>(Some(json!({
            "run": id,
            "analysis": analyze_run(&store, &r),
            "legs": legs,
        })))
    })
    .await;
    match res {
        Ok(Ok(Some(v))) => HttpResponse::Ok().json(v),
        Ok(Ok(None)) => not_found(id),
        Ok(Err(e)) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => super::respond::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
