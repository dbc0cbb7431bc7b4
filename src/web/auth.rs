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
    /// monitor, forwarding runs). For CI.
    Run,
    /// Everything a token may do: also delete and pin runs, import history, schedules,
    /// suite definitions, retention, the board's network settings. Never tokens or the
    /// password (those need a login).
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

    /// The scope a token needs for `method` on `path`: reads need [`Scope::Read`], starting
    /// and stopping tests [`Scope::Run`], every other change [`Scope::Admin`].
    pub fn needed(method: &actix_web::http::Method, path: &str) -> Scope {
        use actix_web::http::Method;
        // Diagnostics (ping, neighbours, logs, the journal) are for the admin only, reads too.
        if path == "/diag" || path.starts_with("/diag/") || path.starts_with("/api/diag/") {
            return Scope::Admin;
        }
        if method == Method::GET || method == Method::HEAD {
            return Scope::Read;
        }
        if method != Method::POST {
            return Scope::Admin;
        }
        let p = path.trim_end_matches('/');
        let seg: Vec<&str> = p.split('/').collect();
        let run = matches!(
            seg.as_slice(),
            ["", "api", "runs"]
                | ["", "api", "runs", "latency" | "multi" | "rfc2544"]
                | ["", "api", "suites", "udp-ladder"]
                | ["", "api", "http-get" | "monitor" | "forward"]
                | ["", "api", "runs" | "suites" | "monitor", _, "stop"]
                | ["", "api", "suite-defs", _, "run"]
        );
        if run {
            Scope::Run
        } else {
            Scope::Admin
        }
    }
}

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
    /// change the password). A token may run tests and read history, never mint the
    /// credentials that would outlive its own deletion.
    pub fn require_session(&self) -> Result<(), AuthError> {
        match self {
            Auth::Session { .. } => Ok(()),
            Auth::Token(_) => Err(AuthError::Forbidden(
                "API tokens cannot manage tokens or the password: log in",
            )),
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

fn authenticate(req: &HttpRequest) -> Result<Auth, AuthError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| AuthError::Internal("no app state".into()))?;
    let api = req.path().starts_with("/api/");
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
                let need = Scope::needed(req.method(), req.path());
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
    fn scopes_needed_by_route() {
        use actix_web::http::Method;
        let need = |m: Method, p: &str| Scope::needed(&m, p);
        assert_eq!(need(Method::GET, "/api/export"), Scope::Read);
        assert_eq!(need(Method::GET, "/metrics"), Scope::Read);
        assert_eq!(need(Method::POST, "/api/runs"), Scope::Run);
        assert_eq!(need(Method::POST, "/api/runs/12/stop"), Scope::Run);
        assert_eq!(need(Method::POST, "/api/suite-defs/soak/run"), Scope::Run);
        // RFC 2544 is a test like a forwarding run (which sets up MASQUERADE too): a "run
        // tests" token starts it (it needed an admin token, against the README's words).
        assert_eq!(need(Method::POST, "/api/runs/rfc2544"), Scope::Run);
        assert_eq!(need(Method::POST, "/api/forward"), Scope::Run);
        assert_eq!(need(Method::POST, "/api/runs/12/pin"), Scope::Admin);
        assert_eq!(need(Method::DELETE, "/api/runs/12"), Scope::Admin);
        assert_eq!(need(Method::POST, "/api/import"), Scope::Admin);
        assert_eq!(need(Method::POST, "/api/schedules"), Scope::Admin);
        assert_eq!(need(Method::PUT, "/api/board/settings"), Scope::Admin);
        assert_eq!(need(Method::POST, "/api/board/changes"), Scope::Admin);
        assert_eq!(need(Method::GET, "/api/diag/neighbours"), Scope::Admin);
        assert_eq!(need(Method::GET, "/diag"), Scope::Admin);
        assert_eq!(need(Method::POST, "/api/diag/ping"), Scope::Admin);
        assert_eq!(need(Method::GET, "/diagnostics-not"), Scope::Read);
        assert!(Scope::Read < Scope::Run && Scope::Run < Scope::Admin);
        assert_eq!(Scope::parse("bogus"), Scope::Read);
    }

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
        assert!(Auth::Token(Scope::Admin).require_session().is_err());
        let s = Auth::Session {
            token_hash: "h".into(),
            csrf: "c".into(),
        };
        assert!(s.require_session().is_ok());
    }
}
