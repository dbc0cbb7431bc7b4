//! Chart and analysis routes: `GET /api/runs/{id}/chart` and `GET /api/runs/{id}/analysis`
//! (series and verdicts from [`crate::results::charts`]), and the chart library's embedded files.

use super::auth::Auth;
use super::AppState;
use crate::results::charts::{analyze_run, charts_of};
use actix_web::{http::StatusCode, web, HttpResponse};
use serde_json::json;

/// Register the chart routes and the chart library's files.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/runs/{id}/chart", web::get().to(chart))
        .route("/api/runs/{id}/analysis", web::get().to(analysis_api))
        .route("/static/charts.js", web::get().to(charts_js))
        .route("/static/vendor/uPlot.iife.min.js", web::get().to(uplot_js))
        .route("/static/vendor/uPlot.min.css", web::get().to(uplot_css));
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

fn asset(ct: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ct)
        .insert_header(("Cache-Control", "max-age=3600"))
        .body(body)
}

async fn charts_js() -> HttpResponse {
    asset(
        "application/javascript; charset=utf-8",
        include_str!("../../static/charts.js"),
    )
}

async fn uplot_js() -> HttpResponse {
    asset(
        "application/javascript; charset=utf-8",
        include_str!("../../static/vendor/uPlot.iife.min.js"),
    )
}

async fn uplot_css() -> HttpResponse {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../static/vendor/uPlot.min.css"),
    )
}
