//! The responses the handlers build, in one place: an HTML page ([`html`], [`ok`],
//! [`html_no_store`]), a 303 redirect ([`redirect`]), a message page ([`message`]), the API's
//! JSON error ([`json_error`], [`run_not_found`], [`internal`]), a download ([`download`],
//! [`download_head`]), the sentence for a store that cannot write ([`storage_message`]), and
//! whether a request is the API's ([`is_api`]: it gets JSON errors, a page gets HTML).
//! Not for: what a page shows (its module's template struct).

use super::auth::Auth;
use crate::engine::report::version_string;
use actix_web::http::{header, StatusCode};
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder};
use askama::Template;

/// The Content-Security-Policy of every page: our own scripts, styles and images only.
const CSP: &str = "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:";

fn page<T: Template>(status: StatusCode, t: &T, no_store: bool) -> HttpResponse {
    match t.render() {
        Ok(body) => {
            let mut b = HttpResponse::build(status);
            b.content_type("text/html; charset=utf-8")
                .insert_header(("X-Frame-Options", "DENY"))
                .insert_header(("Content-Security-Policy", CSP));
            if no_store {
                b.insert_header(("Cache-Control", "no-store"));
            }
            b.body(body)
        }
        Err(e) => HttpResponse::InternalServerError().body(format!("template error: {e}")),
    }
}

/// A rendered page with `status`: `text/html; charset=utf-8`, `X-Frame-Options: DENY` and our
/// Content-Security-Policy; a template that fails to render is a 500 `template error: …`.
pub(crate) fn html<T: Template>(status: StatusCode, t: &T) -> HttpResponse {
    page(status, t, false)
}

/// [`html`] with `Cache-Control: no-store` (a page whose content changes under the browser:
/// the Ports page).
pub(crate) fn html_no_store<T: Template>(status: StatusCode, t: &T) -> HttpResponse {
    page(status, t, true)
}

/// [`html`] with 200.
pub(crate) fn ok<T: Template>(t: &T) -> HttpResponse {
    html(StatusCode::OK, t)
}

/// 303 See Other to `to` (a page path of ours), empty body.
pub(crate) fn redirect(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to))
        .finish()
}

/// A page's 500 for a store error: text/plain `internal error: {e}`.
pub(crate) fn internal_page(e: impl std::fmt::Display) -> HttpResponse {
    HttpResponse::InternalServerError().body(format!("internal error: {e}"))
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage {
    nav: bool,
    csrf: String,
    version: String,
    heading: String,
    text: String,
}

/// A page of one heading and one sentence (errors people read: "No such suite", "Not
/// stoppable"), with the menu when `auth` is a signed-in user.
pub(crate) fn message(
    status: StatusCode,
    auth: Option<&Auth>,
    heading: &str,
    text: &str,
) -> HttpResponse {
    html(
        status,
        &MessagePage {
            nav: auth.is_some(),
            csrf: auth.map(|a| a.csrf().to_string()).unwrap_or_default(),
            version: version_string(),
            heading: heading.into(),
            text: text.into(),
        },
    )
}

/// What to tell a person when the store cannot write (`e` is the store's error): a full data
/// partition ([`crate::store::StoreError::is_disk_full`]) gets its own sentence, anything else
/// the error itself.
pub(crate) fn storage_message(what: &str, e: &crate::store::StoreError) -> String {
    if e.is_disk_full() {
        format!(
            "The board's storage is full: {what}. Nothing stored was lost. Free space on the data partition (delete packet captures on Diagnostics, or other files there) and try again."
        )
    } else {
        format!("The board cannot write its database: {what} ({e}). Try again.")
    }
}

/// A JSON API error: `{"error": msg}` with `status`.
pub(crate) fn json_error(status: StatusCode, msg: impl Into<String>) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({"error": msg.into()}))
}

/// The API's 500 for a store error: `{"error": "<e>"}`.
pub(crate) fn internal(e: impl std::fmt::Display) -> HttpResponse {
    json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// The API's answer for an unknown run id: 404 `{"error": "no run N"}`.
pub(crate) fn run_not_found(id: i64) -> HttpResponse {
    json_error(StatusCode::NOT_FOUND, format!("no run {id}"))
}

/// The head of a download: 200, `content_type`, `Content-Disposition: attachment;
/// filename="<name>"` (`name` is ours: no quote or control characters). Add the body (or a
/// stream, [`super::stream::streamed`]).
pub(crate) fn download_head(content_type: &str, name: &str) -> HttpResponseBuilder {
    let mut b = HttpResponse::Ok();
    b.content_type(content_type).insert_header((
        header::CONTENT_DISPOSITION,
        format!("attachment; filename=\"{name}\""),
    ));
    b
}

/// A whole download: [`download_head`] with `body`.
pub(crate) fn download(content_type: &str, name: &str, body: String) -> HttpResponse {
    download_head(content_type, name).body(body)
}

/// Whether `req` is an API request, so its errors are JSON (a page's are HTML or a redirect):
/// its path as the router matched it (`req.match_info()`, escapes decoded) resolved as
/// [`super::tls::resolved_path`] does is `/api` or under `/api/`. The raw path
/// (`req.path()`) is not used: `/%61pi/runs` reaches the API's handlers too.
pub(crate) fn is_api(req: &HttpRequest) -> bool {
    let p = super::tls::resolved_path(req.match_info().as_str());
    p == "/api" || p.starts_with("/api/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_of<'a>(r: &'a HttpResponse, name: &str) -> &'a str {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The shapes the handlers moved here answer with, byte for byte.
    #[actix_web::test]
    async fn responses_keep_their_shapes() {
        use actix_web::body::to_bytes;
        let body = |r: HttpResponse| async move {
            String::from_utf8(to_bytes(r.into_body()).await.unwrap().to_vec()).unwrap()
        };
        let r = json_error(StatusCode::CONFLICT, "busy");
        assert_eq!(r.status(), 409);
        assert_eq!(header_of(&r, "content-type"), "application/json");
        assert_eq!(body(r).await, r#"{"error":"busy"}"#);
        assert_eq!(body(run_not_found(7)).await, r#"{"error":"no run 7"}"#);
        let r = internal("disk I/O error");
        assert_eq!(r.status(), 500);
        assert_eq!(body(r).await, r#"{"error":"disk I/O error"}"#);
        let r = redirect("/runs/3");
        assert_eq!(r.status(), 303);
        assert_eq!(header_of(&r, "location"), "/runs/3");
        assert_eq!(body(r).await, "");
        let r = internal_page("locked");
        assert_eq!(r.status(), 500);
        assert_eq!(body(r).await, "internal error: locked");
        let r = download(
            "text/csv; charset=utf-8",
            "netperfd-run-3.csv",
            "a,b\n".into(),
        );
        assert_eq!(r.status(), 200);
        assert_eq!(header_of(&r, "content-type"), "text/csv; charset=utf-8");
        assert_eq!(
            header_of(&r, "content-disposition"),
            "attachment; filename=\"netperfd-run-3.csv\""
        );
        assert_eq!(body(r).await, "a,b\n");
        let r = message(StatusCode::NOT_FOUND, None, "No such suite", "a <b>");
        assert_eq!(r.status(), 404);
        assert_eq!(header_of(&r, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header_of(&r, "x-frame-options"), "DENY");
        assert_eq!(header_of(&r, "content-security-policy"), CSP);
        assert!(!r.headers().contains_key("cache-control"));
        let page = body(r).await;
        assert!(
            page.contains("<h1>No such suite</h1><p>a &#60;b&#62;</p>"),
            "{page}"
        );
        let full =
            crate::store::StoreError::Dir("/data".into(), std::io::Error::from_raw_os_error(28));
        assert_eq!(
            storage_message("the run was not saved", &full),
            "The board's storage is full: the run was not saved. Nothing stored was lost. Free space on the data partition (delete packet captures on Diagnostics, or other files there) and try again."
        );
        assert_eq!(
            storage_message("x", &crate::store::StoreError::Invalid("locked".into())),
            format!(
                "The board cannot write its database: x ({}). Try again.",
                crate::store::StoreError::Invalid("locked".into())
            )
        );
    }
}
