//! Authentication: the admin password (argon2), web sessions (HttpOnly, SameSite=Strict
//! cookie; only its SHA-256 is stored), CSRF tokens, API bearer tokens, the first-run setup
//! code, and a login rate limit. Not for: deciding what a route does.

use super::AppState;
use crate::model::secrets::{bearer_token, ct_eq, sha256_hex};
use actix_web::{
    dev::Payload, http::header, web, FromRequest, HttpRequest, HttpResponse, ResponseError,
};
use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use std::future::{ready, Ready};

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "netperfd_session";
/// Settings key of the admin password hash set through the UI.
pub const PASSWORD_KEY: &str = "admin_password_hash";
/// Shortest password accepted, characters.
pub const MIN_PASSWORD: usize = 8;

/// Random bytes as lowercase hex (`n` bytes → 2n characters).
pub fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    if getrandom::getrandom(&mut b).is_err() {
        // No entropy source at all: refuse to make a guessable secret.
        panic!("no OS random source available");
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Argon2id hash of a password (PHC string).
pub fn hash_password(pw: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(pw.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Check a password against a PHC hash; false for a malformed hash.
pub fn verify_password(hash: &str, pw: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(h) => Argon2::default().verify_password(pw.as_bytes(), &h).is_ok(),
        Err(_) => false,
    }
}

/// Argon2 password checks that may run at once, server-wide. Each takes ~50 ms of CPU here
/// and far more on a board; they run on the blocking pool, never on the two web workers, and
/// a flood of logins beyond this gets "busy" at once instead of queueing.
pub const MAX_ARGON2: usize = 2;

static ARGON2_RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// [`verify_password`] off the async workers, at most [`MAX_ARGON2`] at once. `None` when
/// that many are running already (the caller answers "busy, try again").
pub async fn verify_password_limited(hash: &str, pw: &str) -> Option<bool> {
    use std::sync::atomic::Ordering::SeqCst;
    struct Slot;
    impl Drop for Slot {
        fn drop(&mut self) {
            ARGON2_RUNNING.fetch_sub(1, SeqCst);
        }
    }
    if ARGON2_RUNNING.fetch_add(1, SeqCst) >= MAX_ARGON2 {
        ARGON2_RUNNING.fetch_sub(1, SeqCst);
        return None;
    }
    let _slot = Slot;
    let (h, p) = (hash.to_owned(), pw.to_owned());
    Some(
        web::block(move || verify_password(&h, &p))
            .await
            .unwrap_or(false),
    )
}

/// `netperfd hash-password`: read one line from stdin, print its hash.
pub fn hash_password_cli() -> i32 {
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() {
        eprintln!("netperfd: cannot read the password from stdin");
        return 1;
    }
    let pw = line.trim_end_matches(['\r', '\n']);
    if pw.chars().count() < MIN_PASSWORD {
        eprintln!("netperfd: the password must have at least {MIN_PASSWORD} characters");
        return 1;
    }
    match hash_password(pw) {
        Ok(h) => {
            println!("{h}");
            0
        }
        Err(e) => {
            eprintln!("netperfd: {e}");
            1
        }
    }
}

/// What an API token may do. Each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Read only: every GET (history, exports, `/metrics`, live updates). For Prometheus
    /// and dashboards.
    Read,
    /// Also start and stop tests (runs, suites, multi-port, latency, HTTP download,
    /// monitor, forwarding runs) — without a packet capture (admin only: a capture can record
    /// the management port's passwords, cookies and tokens). For CI.
    Run,
    /// Everything a token may do: also delete and pin runs, import history, schedules,
    /// suite definitions, the board's network settings, the Diagnostics (its reads too) and
    /// packet captures, a run's included. Never tokens, the password or the history's
    /// retention caps (those need a login).
    Admin,
}

impl Scope {
    /// Every scope, least first.
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Run, Scope::Admin];

    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Run => "run",
            Scope::Admin => "admin",
        }
    }

    /// A stored word as a scope; an unknown word counts as [`Scope::Read`] (least power).
    pub fn parse(s: &str) -> Scope {
        match s {
            "admin" => Scope::Admin,
            "run" => Scope::Run,
            _ => Scope::Read,
        }
    }

    /// For people: "read-only", "run tests", "admin".
    pub fn label(self) -> &'static str {
        match self {
            Scope::Read => "read-only",
            Scope::Run => "run tests",
            Scope::Admin => "admin",
        }
    }
}

/// The 403 of an API token creating or deleting tokens or changing the password.
pub const CREDENTIALS_NEED_LOGIN: &str = "API tokens cannot manage tokens or the password: log in";
/// The 403 of an API token changing the history's retention caps.
pub const RETENTION_NEEDS_LOGIN: &str =
    "history retention is set by a logged-in admin only (lowering it deletes runs at once): log in";
/// The 403 of a token below admin asking for a packet capture (with a run, too).
pub const CAPTURE_NEEDS_ADMIN: &str = "packet captures are admin only: a capture records every packet on a port, the management port's passwords, session cookies and API tokens included; use an admin token or log in, or start the run without \"capture\"";

/// How a request proved who it is.
#[derive(Debug, Clone)]
pub enum Auth {
    /// A browser session; writes need its CSRF token.
    Session { token_hash: String, csrf: String },
    /// An API bearer token of this scope; no CSRF needed (no ambient credential).
    Token(Scope),
}

/// Why a request was refused.
#[derive(Debug)]
pub enum AuthError {
    /// No or invalid credentials. Pages redirect to the login (or setup) page.
    Unauthenticated { api: bool, setup: bool },
    /// Missing or wrong CSRF token on a state-changing request.
    Csrf,
    /// Authenticated, but this credential may not do this (an API token managing tokens or
    /// the password: those need a logged-in session).
    Forbidden(&'static str),
    /// An API token whose scope is too small for this request.
    Scope { have: Scope, need: Scope },
    /// Something failed on our side.
    Internal(String),
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthError::Unauthenticated { .. } => f.write_str("authentication required"),
            AuthError::Csrf => f.write_str("missing or invalid CSRF token"),
            AuthError::Forbidden(why) => f.write_str(why),
            AuthError::Scope { have, need } => write!(
                f,
                "this API token is {}; this request needs a token that may {} (Settings → API tokens)",
                have.label(),
                match need {
                    Scope::Read => "read",
                    Scope::Run => "run tests",
                    Scope::Admin => "administer the board",
                }
            ),
            AuthError::Internal(e) => write!(f, "internal error: {e}"),
        }
    }
}

impl ResponseError for AuthError {
    fn error_response(&self) -> HttpResponse {
        match self {
            AuthError::Unauthenticated { api: true, .. } => HttpResponse::Unauthorized()
                .json(serde_json::json!({"error": "authentication required: log in or send 'Authorization: Bearer <token>'"})),
            AuthError::Unauthenticated { api: false, setup } => HttpResponse::SeeOther()
                .insert_header((header::LOCATION, if *setup { "/setup" } else { "/login" }))
                .finish(),
            AuthError::Csrf => HttpResponse::Forbidden()
                .json(serde_json::json!({"error": "missing or invalid CSRF token"})),
            AuthError::Forbidden(why) => {
                HttpResponse::Forbidden().json(serde_json::json!({ "error": why }))
            }
            AuthError::Scope { .. } => {
                HttpResponse::Forbidden().json(serde_json::json!({ "error": self.to_string() }))
            }
            AuthError::Internal(e) => {
                HttpResponse::InternalServerError().json(serde_json::json!({"error": e}))
            }
        }
    }
}

impl Auth {
    /// Check the CSRF token of a state-changing request.
    pub fn check_csrf(&self, provided: Option<&str>) -> Result<(), AuthError> {
        match self {
            Auth::Token(_) => Ok(()),
            Auth::Session { csrf, .. } => match provided {
                Some(p) if ct_eq(p, csrf) => Ok(()),
                _ => Err(AuthError::Csrf),
            },
        }
    }

    /// Refuse API tokens: what only a logged-in admin may do (create or delete tokens,
    /// change the password, the history's retention caps). A token may run tests and read
    /// history, never mint the credentials that would outlive its own deletion. `why` is the
    /// 403's sentence: [`CREDENTIALS_NEED_LOGIN`], [`RETENTION_NEEDS_LOGIN`].
    pub fn require_session(&self, why: &'static str) -> Result<(), AuthError> {
        match self {
            Auth::Session { .. } => Ok(()),
            Auth::Token(_) => Err(AuthError::Forbidden(why)),
        }
    }

    /// Refuse an API token below admin for a packet capture: on every path that starts one
    /// (`POST /api/diag/capture`, a run's `"capture"`), sessions and admin tokens only.
    pub fn require_capture(&self) -> Result<(), AuthError> {
        match self {
            Auth::Token(s) if *s < Scope::Admin => Err(AuthError::Forbidden(CAPTURE_NEEDS_ADMIN)),
            _ => Ok(()),
        }
    }

    /// The CSRF token to put in forms (empty for token auth).
    pub fn csrf(&self) -> &str {
        match self {
            Auth::Session { csrf, .. } => csrf,
            Auth::Token(_) => "",
        }
    }

    /// Check the `X-CSRF-Token` header (API writes from the browser).
    pub fn check_csrf_header(&self, req: &HttpRequest) -> Result<(), AuthError> {
        let h = req
            .headers()
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok());
        self.check_csrf(h)
    }
}

/// The scope an API token needs for the route actix matched for `req`: the access declared
/// where the route was registered ([`super::routes`]), read from the matched resource's data —
/// so no spelling of the path (`%xx`, case of the hex) changes it. A handler reached without
/// that data (a route not registered through [`super::routes::Routes`]) needs
/// [`Scope::Admin`]: fail closed.
pub fn route_scope(req: &HttpRequest) -> Scope {
    req.app_data::<super::routes::Access>()
        .map(|a| a.scope())
        .unwrap_or(Scope::Admin)
}

/// The refusal of a bearer token below `need`, checked before any extractor or handler of the
/// route runs (the route's middleware). `None`: no bearer token, an unknown one (the handler's
/// [`Auth`] answers 401), or one of enough scope. A store that cannot be read refuses.
pub(crate) fn scope_refusal(req: &HttpRequest, need: Scope) -> Option<AuthError> {
    let tok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)?;
    let state = req.app_data::<web::Data<AppState>>()?;
    match state.store.token_scope(&sha256_hex(tok.trim())) {
        Ok(Some(s)) => {
            let have = Scope::parse(&s);
            (have < need).then_some(AuthError::Scope { have, need })
        }
        Ok(None) => None,
        Err(e) => Some(AuthError::Internal(e.to_string())),
    }
}

fn authenticate(req: &HttpRequest) -> Result<Auth, AuthError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| AuthError::Internal("no app state".into()))?;
    let api = super::respond::is_api(req);
    if let Some(h) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        if let Some(tok) = bearer_token(h) {
            let scope = state
                .store
                .token_scope(&sha256_hex(tok.trim()))
                .map_err(|e| AuthError::Internal(e.to_string()))?;
            if let Some(scope) = scope.as_deref().map(Scope::parse) {
                let need = route_scope(req);
                if scope < need {
                    return Err(AuthError::Scope { have: scope, need });
                }
                return Ok(Auth::Token(scope));
            }
            return Err(AuthError::Unauthenticated {
                api: true,
                setup: false,
            });
        }
    }
    if let Some(c) = req.cookie(SESSION_COOKIE) {
        let th = sha256_hex(c.value());
        if let Some(s) = state
            .store
            .session(&th)
            .map_err(|e| AuthError::Internal(e.to_string()))?
        {
            return Ok(Auth::Session {
                token_hash: th,
                csrf: s.csrf,
            });
        }
    }
    Err(AuthError::Unauthenticated {
        api,
        setup: state.needs_setup(),
    })
}

impl FromRequest for Auth {
    type Error = AuthError;
    type Future = Ready<Result<Auth, AuthError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authenticate(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_hash_round_trip() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "wrong horse"));
        assert!(!verify_password("not a hash", "x"));
    }

    #[test]
    fn csrf_checks() {
        let a = Auth::Session {
            token_hash: "h".into(),
            csrf: "abc".into(),
        };
        assert!(a.check_csrf(Some("abc")).is_ok());
        assert!(a.check_csrf(Some("abd")).is_err());
        assert!(a.check_csrf(None).is_err());
        assert!(Auth::Token(Scope::Read).check_csrf(None).is_ok());
        assert!(ct_eq("x", "x") && !ct_eq("x", "xy"));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }

    #[test]
    fn tokens_cannot_manage_credentials() {
        let e = Auth::Token(Scope::Admin)
            .require_session(CREDENTIALS_NEED_LOGIN)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "API tokens cannot manage tokens or the password: log in"
        );
        let s = Auth::Session {
            token_hash: "h".into(),
            csrf: "c".into(),
        };
        assert!(s.require_session(CREDENTIALS_NEED_LOGIN).is_ok());
    }
}
