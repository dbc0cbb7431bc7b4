//! History between boards in the web UI and API: `GET /api/export` (this board's ended runs,
//! suite runs and suite definitions as one history file, see `docs/history-file.md`),
//! `POST /api/import` (such a file as the request body; one transaction: all or nothing),
//! and the `/transfer` page (download link, file upload through `static/transfer.js`).

use super::auth::{Auth, AuthError};
use super::pages::html;
use super::{json_error, AppState};
use crate::engine::report::version_string;
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use futures_util::StreamExt;

/// Register the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/transfer", web::get().to(page))
        .route("/static/transfer.js", web::get().to(script))
        .route("/api/export", web::get().to(export))
        .route("/api/import", web::post().to(import));
}

async fn script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/javascript; charset=utf-8")
        .body(include_str!("../../static/transfer.js"))
}

#[derive(Template)]
#[template(path = "transfer.html")]
struct Page {
    nav: bool,
    csrf: String,
    version: String,
    board_id: String,
    board: String,
    max_mib: String,
}

async fn page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    html(
        StatusCode::OK,
        &Page {
            nav: true,
            csrf: auth.csrf().into(),
            version: version_string(),
            board_id: state.store.board_id().unwrap_or_default(),
            board: crate::runs::suites::run::board_label(),
            max_mib: format!("{:.0}", state.config.import_max_bytes as f64 / 1048576.0),
        },
    )
}

async fn export(_auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    let st = state.clone();
    let label = crate::runs::suites::run::board_label();
    let doc = web::block(move || {
        st.store
            .export_history(&label)
            .map_err(|e| e.to_string())
            .and_then(|d| serde_json::to_vec(&d).map_err(|e| e.to_string()))
    })
    .await;
    match doc {
        Ok(Ok(body)) => {
            let name = format!(
                "netperfd-history-{}-{}.json",
                crate::runs::suites::run::board_label()
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<String>(),
                chrono::Utc::now().format("%Y%m%d-%H%M%S")
            );
            HttpResponse::Ok()
                .content_type("application/json")
                .insert_header((
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"{name}\""),
                ))
                .body(body)
        }
        Ok(Err(e)) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn import(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    mut body: web::Payload,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf_header(&req)?;
    let max = state.config.import_max_bytes;
    let too_big = || {
        json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the history file is larger than {max} bytes (import_max_bytes); nothing was imported"),
        )
    };
    // A file over the limit is read to its end (up to 4 x the limit, then the connection is
    // dropped) but not kept, so that the client reads the 413 instead of a broken pipe.
    let mut buf = web::BytesMut::new();
    let mut total = 0usize;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(c) => {
                total = total.saturating_add(c.len());
                if total > max.saturating_mul(4) {
                    return Ok(too_big());
                }
                if total <= max {
                    buf.extend_from_slice(&c);
                }
            }
            Err(e) => {
                return Ok(json_error(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request body: {e}"),
                ))
            }
        }
    }
    if total > max {
        return Ok(too_big());
    }
    if buf.is_empty() {
        return Ok(json_error(
            StatusCode::BAD_REQUEST,
            "the request body is empty: send a history file (GET /api/export makes one)",
        ));
    }
    let st = state.clone();
    let r = web::block(move || st.store.import_history(&buf)).await;
    Ok(match r {
        Ok(Ok(sum)) => {
            tracing::info!(
                from = %sum.board_label,
                runs_added = sum.runs_added,
                runs_present = sum.runs_present,
                "history imported"
            );
            HttpResponse::Ok().json(sum)
        }
        Ok(Err(crate::store::StoreError::Import(e))) => json_error(
            StatusCode::BAD_REQUEST,
            format!("{e}; nothing was imported"),
        ),
        Ok(Err(e)) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{e}; nothing was imported"),
        ),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    })
}
