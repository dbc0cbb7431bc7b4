//! Errors of actix's extractors (query string, path segment, JSON body) on API routes as
//! the API's JSON error (`{"error": "..."}`, 400) instead of actix's text/plain default.
//! Pages keep the default. Also the extractors of our own: a page's url-encoded [`Form`], and
//! [`ApiWrite`], the CSRF check and JSON body of a state-changing API request.

use super::auth::Auth;
use actix_web::error::{InternalError, JsonPayloadError, PathError, QueryPayloadError};
use actix_web::{http::StatusCode, web, FromRequest, HttpRequest, HttpResponse};

fn api_error<E>(e: E, req: &HttpRequest, what: &str) -> actix_web::Error
where
    E: std::fmt::Display + std::fmt::Debug + Into<actix_web::Error> + 'static,
{
    if super::respond::is_api(req) {
        let msg = format!("invalid {what}: {e}");
        InternalError::from_response(e, super::respond::json_error(StatusCode::BAD_REQUEST, msg))
            .into()
    } else {
        e.into()
    }
}

/// Register the extractor configurations (call from the app's `configure`).
pub(crate) fn configure(cfg: &mut web::ServiceConfig) {
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

/// A form whose only field is the CSRF token (buttons such as delete, stop, confirm).
#[derive(serde::Deserialize)]
pub(crate) struct CsrfForm {
    #[serde(default)]
    pub(crate) csrf: Option<String>,
}

/// How a state-changing API request's body becomes the handler's value ([`ApiWrite`]).
pub(crate) trait ApiBody: Sized + 'static {
    /// Whether the body is read at all (false: routes without one, [`NoBody`]).
    const READS: bool = true;
    /// The value of `body` (the request's bytes, at most actix's payload limit, 256 KiB), or
    /// the API's answer to a body that does not parse (a 400 in the route's error shape).
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse>;
}

/// No body: the request's payload is not read (`DELETE`, stop, confirm).
pub(crate) struct NoBody;

impl ApiBody for NoBody {
    const READS: bool = false;
    fn parse(_: web::Bytes) -> Result<Self, HttpResponse> {
        Ok(NoBody)
    }
}

/// The body's bytes as they came (a module parses them itself: suite definitions).
impl ApiBody for web::Bytes {
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse> {
        Ok(body)
    }
}

/// A JSON body as `T`; one that does not parse gets 400 `{"error": "invalid request body:
/// <serde_json's message>"}`.
pub(crate) struct Json<T>(pub T);

impl<T: serde::de::DeserializeOwned + 'static> ApiBody for Json<T> {
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse> {
        serde_json::from_slice(&body)
            .map(Json)
            .map_err(|e| invalid_body(e.to_string()))
    }
}

/// The 400 of a body that does not parse: `{"error": "invalid request body: <why>"}`.
pub(crate) fn invalid_body(why: impl std::fmt::Display) -> HttpResponse {
    super::respond::json_error(
        StatusCode::BAD_REQUEST,
        format!("invalid request body: {why}"),
    )
}

/// The prologue of a state-changing API handler, as an extractor: the request's credential
/// ([`Auth`]: 401 without one), the `X-CSRF-Token` header checked for a browser session (403
/// `{"error": "missing or invalid CSRF token"}`), then the body read and parsed as `B`
/// ([`ApiBody`]: [`Json`], [`NoBody`], or a module's own rule). Each step runs only when the
/// one before it passed, so a request that fails the CSRF check is refused before its body
/// is read.
pub(crate) struct ApiWrite<B = NoBody> {
    /// Who sent it (the CSRF check passed).
    pub auth: Auth,
    /// The parsed body.
    pub body: B,
}

impl<B: ApiBody> actix_web::FromRequest for ApiWrite<B> {
    type Error = actix_web::Error;
    type Future = futures_util::future::LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        let auth = Auth::from_request(req, payload)
            .into_inner()
            .and_then(|a| a.check_csrf_header(req).map(|()| a));
        let bytes = (B::READS && auth.is_ok()).then(|| web::Bytes::from_request(req, payload));
        Box::pin(async move {
            let auth = auth?;
            let body = match bytes {
                Some(b) => b.await?,
                None => web::Bytes::new(),
            };
            let body = B::parse(body)
                .map_err(|r| InternalError::from_response("invalid request body", r))?;
            Ok(ApiWrite { auth, body })
        })
    }
}

/// Largest form body, bytes (16 KiB, actix-web's `web::Form` default).
pub(crate) const FORM_LIMIT: usize = 16_384;

/// A page's url-encoded form body (`application/x-www-form-urlencoded`, UTF-8, at most
/// [`FORM_LIMIT`] bytes) deserialized into `T` — actix-web's `web::Form` without its decoding
/// of other charsets. That decoding linked all of encoding_rs (about 150 KB of tables and
/// decoders, docs/build-settings.md); our pages are UTF-8 and browsers send their forms in
/// the page's charset, so a form declaring another charset is refused. Errors are actix's own
/// [`UrlencodedError`]s, with their statuses: 415 for another content type or charset, 413
/// above the limit, 411 for an unreadable length, 400 for a body that does not parse.
#[derive(Debug)]
pub(crate) struct Form<T>(pub T);

impl<T> Form<T> {
    /// The deserialized form.
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Form<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Form<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// True when a `Content-Type` header value is a url-encoded form in UTF-8 (no charset
/// parameter, or `utf-8`/`utf8` in any case).
fn utf8_form(content_type: &str) -> bool {
    let mut parts = content_type.split(';').map(str::trim);
    let essence = parts.next().unwrap_or("");
    if !essence.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
        return false;
    }
    parts.all(|p| match p.split_once('=') {
        Some((k, v)) if k.trim().eq_ignore_ascii_case("charset") => {
            let v = v.trim().trim_matches('"');
            v.eq_ignore_ascii_case("utf-8") || v.eq_ignore_ascii_case("utf8")
        }
        _ => true,
    })
}

impl<T: serde::de::DeserializeOwned + 'static> FromRequest for Form<T> {
    type Error = actix_web::Error;
    type Future = futures_util::future::LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut actix_web::dev::Payload) -> Self::Future {
        use actix_web::error::UrlencodedError;
        use futures_util::StreamExt;
        let header = |name| {
            req.headers()
                .get(name)
                .map(|v| v.to_str().map(str::to_string))
        };
        let content_type = header(actix_web::http::header::CONTENT_TYPE);
        let length = header(actix_web::http::header::CONTENT_LENGTH);
        let mut stream = payload.take();
        Box::pin(async move {
            match content_type {
                Some(Ok(ct)) if utf8_form(&ct) => {}
                _ => return Err(UrlencodedError::ContentType.into()),
            }
            if let Some(l) = length {
                let l = l
                    .ok()
                    .and_then(|l| l.trim().parse::<usize>().ok())
                    .ok_or(UrlencodedError::UnknownLength)?;
                if l > FORM_LIMIT {
                    let limit = FORM_LIMIT;
                    return Err(UrlencodedError::Overflow { size: l, limit }.into());
                }
            }
            let mut body = web::BytesMut::with_capacity(1024);
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(UrlencodedError::Payload)?;
                let size = body.len() + chunk.len();
                if size > FORM_LIMIT {
                    let limit = FORM_LIMIT;
                    return Err(UrlencodedError::Overflow { size, limit }.into());
                }
                body.extend_from_slice(&chunk);
            }
            serde_urlencoded::from_bytes(&body)
                .map(Form)
                .map_err(|e| UrlencodedError::Parse(e).into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{test::TestRequest, FromRequest};
    use std::collections::HashMap;

    async fn read<T: serde::de::DeserializeOwned + 'static>(
        ct: Option<&str>,
        body: &'static [u8],
    ) -> Result<T, u16> {
        let mut req = TestRequest::default();
        if let Some(ct) = ct {
            req = req.insert_header(("content-type", ct));
        }
        let (req, mut pl) = req.set_payload(body).to_http_parts();
        Form::<T>::from_request(&req, &mut pl)
            .await
            .map(Form::into_inner)
            .map_err(|e| e.as_response_error().status_code().as_u16())
    }

    async fn form(ct: Option<&str>, body: &'static [u8]) -> Result<HashMap<String, String>, u16> {
        read(ct, body).await
    }

    #[actix_web::test]
    async fn forms_are_read_as_actix_reads_utf8_ones() {
        let ct = "application/x-www-form-urlencoded";
        let f = form(Some(ct), b"host=192.0.2.2&label=caf%C3%A9+1")
            .await
            .unwrap();
        assert_eq!(f["host"], "192.0.2.2");
        assert_eq!(f["label"], "café 1");
        let with_charset = "application/x-www-form-urlencoded; charset=UTF-8";
        assert_eq!(form(Some(with_charset), b"a=1").await.unwrap()["a"], "1");
        // Another content type or charset: 415, as actix says it.
        assert_eq!(form(Some("application/json"), b"{}").await, Err(415));
        assert_eq!(form(None, b"a=1").await, Err(415));
        let latin1 = "application/x-www-form-urlencoded; charset=ISO-8859-1";
        assert_eq!(form(Some(latin1), b"a=1").await, Err(415));
        // Above 16 KiB: 413.
        let big: &'static [u8] = Box::leak(vec![b'a'; FORM_LIMIT + 1].into_boxed_slice());
        assert_eq!(form(Some(ct), big).await, Err(413));
        // A body that is not a form of T: 400.
        #[derive(serde::Deserialize, Debug)]
        struct Count {
            n: u32,
        }
        assert_eq!(read::<Count>(Some(ct), b"n=many").await.unwrap_err(), 400);
        assert_eq!(read::<Count>(Some(ct), b"n=7").await.unwrap().n, 7);
    }

    #[test]
    fn only_utf8_forms() {
        assert!(utf8_form("application/x-www-form-urlencoded"));
        assert!(utf8_form(
            "Application/X-WWW-Form-Urlencoded; Charset=\"utf8\""
        ));
        assert!(!utf8_form(
            "application/x-www-form-urlencoded; charset=shift_jis"
        ));
        assert!(!utf8_form("multipart/form-data; boundary=x"));
    }
}
