//! Errors of actix's extractors (query string, path segment, JSON body) on API routes as
//! the API's JSON error (`{"error": "..."}`, 400) instead of actix's text/plain default.
//! Pages keep the default.

use actix_web::error::{InternalError, JsonPayloadError, PathError, QueryPayloadError};
use actix_web::{http::StatusCode, web, HttpRequest};

fn api_error<E>(e: E, req: &HttpRequest, what: &str) -> actix_web::Error
where
    E: std::fmt::Display + std::fmt::Debug + Into<actix_web::Error> + 'static,
{
    if req.path().starts_with("/api/") {
        let msg = format!("invalid {what}: {e}");
        InternalError::from_response(e, super::json_error(StatusCode::BAD_REQUEST, msg)).into()
    } else {
        e.into()
    }
}

/// Register the extractor configurations (call from the app's `configure`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::QueryConfig::default()
            .error_handler(|e: QueryPayloadError, req| api_error(e, req, "query string")),
    )
    .app_data(
        web::PathConfig::default().error_handler(|e: PathError, req| api_error(e, req, "path")),
    )
    .app_data(
        web::JsonConfig::default()
            .error_handler(|e: JsonPayloadError, req| api_error(e, req, "JSON body")),
    );
}
