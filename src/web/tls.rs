//! HTTPS for the web UI and API (issue 41): which certificate serves, what the pages show
//! about it, the HTTPS listener, and the plain HTTP listener that sends pages to HTTPS.
//!
//! * Beyond loopback the web UI serves TLS ([`Config::tls_in_force`]) with rustls and its
//!   `ring` provider. The certificate is the admin's own (`tls_cert`/`tls_key`, PEM) or one
//!   made at first start and kept in the data directory ([`identity`]; the certificate code
//!   itself, shared with the peer agent, is `crate::cert`).
//! * Its SHA-256 fingerprint (`cert::Identity::fingerprint`, what browsers show) is logged at
//!   start and printed with the setup code and on the Settings page; the public key's pin
//!   (`cert::Identity::spki_sha256`) is what `curl --pinnedpubkey` and Chromium's
//!   `--ignore-certificate-errors-spki-list` take.
//! * [`redirect`] answers the optional plain-HTTP listener (`http_redirect`).
//!
//! Not for: the listeners themselves (`cmd::daemon`).

use crate::cert::{generated, key_mode, load, validity_warning, Identity, Names};
use crate::config::Config;
use actix_web::{http::header, HttpRequest, HttpResponse};
use std::path::Path;
use std::sync::Arc;

/// What the pages and the login prompt show about HTTPS: the fingerprint line, or the
/// warning that the web UI is plain HTTP beyond loopback.
#[derive(Debug, Clone, Default)]
pub struct Shown {
    /// `certificate SHA-256 AB:CD:…` when HTTPS is in force.
    pub fingerprint: Option<String>,
    /// The public key's pin (base64), with the fingerprint.
    pub spki_sha256: Option<String>,
    /// The certificate's file (for `curl --cacert` after copying it off the board).
    pub cert_path: Option<String>,
    /// The warning for every page when `plain_http` serves beyond loopback.
    pub plain_warning: Option<String>,
    /// The certificate's validity (`notBefore`, `notAfter`), for [`Shown::validity_warning`].
    pub validity: (
        Option<chrono::DateTime<chrono::Utc>>,
        Option<chrono::DateTime<chrono::Utc>>,
    ),
}

/// The warning logged and shown on every page when `plain_http` serves beyond loopback.
pub(crate) const PLAIN_WARNING: &str = "This board's web UI is plain HTTP beyond loopback (plain_http = true in its config): the admin password, session cookies and API tokens cross the network in clear. Remove plain_http to serve HTTPS.";

/// Set once by the daemon when `plain_http` serves beyond loopback ([`notice`]).
static PLAIN_BEYOND_LOOPBACK: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Say [`PLAIN_WARNING`] on every page from now on (the daemon, at start).
pub(crate) fn warn_on_every_page() {
    PLAIN_BEYOND_LOOPBACK.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The warning every page shows (`templates/base.html`) while `plain_http` serves beyond
/// loopback; `None` otherwise.
pub(crate) fn notice() -> Option<&'static str> {
    PLAIN_BEYOND_LOOPBACK
        .load(std::sync::atomic::Ordering::Relaxed)
        .then_some(PLAIN_WARNING)
}

impl Shown {
    /// What to show for `cfg` and the identity in force (`None`: no TLS).
    pub fn new(cfg: &Config, id: Option<&Identity>) -> Shown {
        let beyond = !cfg.listen.ip().to_canonical().is_loopback();
        Shown {
            fingerprint: id.map(|i| i.fingerprint.clone()),
            spki_sha256: id.map(|i| i.spki_sha256.clone()),
            cert_path: id.map(|i| i.cert_path.display().to_string()),
            plain_warning: (cfg.plain_http && beyond).then(|| PLAIN_WARNING.to_string()),
            validity: id.map(|i| (i.not_before, i.not_after)).unwrap_or_default(),
        }
    }

    /// The warning the Settings page shows when the certificate is not valid by the board's
    /// clock now ([`validity_warning`]: expired, not valid yet, or the clock never set) —
    /// at each view, so a clock NTP set after the start ends it.
    pub fn validity_warning(&self) -> Option<String> {
        let path = Path::new(self.cert_path.as_deref()?);
        validity_warning(path, self.validity.0, self.validity.1, chrono::Utc::now())
    }

    /// The line printed with the setup code: `certificate SHA-256 AB:CD:…`.
    pub fn line(&self) -> Option<String> {
        self.fingerprint
            .as_ref()
            .map(|f| format!("certificate SHA-256 {f}"))
    }
}

/// The web UI's certificate for `cfg`: the admin's own files when set ([`load`]), else the
/// one in the data directory, made there at first start ([`generated`]). Errors: a clear
/// sentence naming the file (the daemon stops with it).
pub(crate) fn identity(cfg: &Config) -> Result<Identity, String> {
    match (&cfg.tls_cert, &cfg.tls_key) {
        (Some(c), Some(k)) => {
            let id = load(c, k, false)?;
            if let Some(w) = key_mode(k, false) {
                tracing::warn!("{w}");
            }
            Ok(id)
        }
        _ => generated(&cfg.data_dir, &names(cfg)),
    }
}

/// The names the generated certificate carries: the hostname (when it is a DNS name) and
/// every address the web UI can be reached on (web::first_run's list, loopback left out).
fn names(cfg: &Config) -> Names {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let addresses = super::first_run::reachable_addresses(cfg.listen.ip())
        .into_iter()
        .filter(|a| !a.to_canonical().is_loopback())
        .collect();
    Names { host, addresses }
}

/// How long an HTTPS connection may take from its accept to a finished TLS handshake;
/// then it is closed (a silent connection holds its address's slot no longer).
pub(crate) const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// An HTTPS connection as actix-http serves it: the TLS stream, holding its slot in the
/// per-address count ([`super::limits::admit`], given back when the connection ends) and the
/// board's own address it came to.
pub(crate) type Conn = crate::conn_limit::Counted<
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    (super::limits::Admitted, Option<std::net::IpAddr>),
>;

/// An accepted TCP connection of the HTTPS listener: counted for its client address first
/// (over [`super::limits::MAX_CONNECTIONS_PER_ADDRESS`] it is closed at once, before any
/// TLS work), then the handshake within [`HANDSHAKE_TIMEOUT`]. Errors close the connection.
async fn handshake(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
) -> Result<
    (Conn, actix_http::Protocol, Option<std::net::SocketAddr>),
    actix_http::error::DispatchError,
> {
    use actix_http::error::DispatchError;
    let peer = tcp.peer_addr().ok();
    let Some(slot) = peer.and_then(|p| super::limits::admit(p.ip())) else {
        return Err(DispatchError::Io(std::io::Error::other(
            "too many connections from this address",
        )));
    };
    let local = tcp.local_addr().ok().map(|a| a.ip().to_canonical());
    let io = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
        .await
        .map_err(|_| DispatchError::Io(std::io::ErrorKind::TimedOut.into()))?
        .map_err(DispatchError::Io)?;
    Ok((
        Conn::new(io, (slot, local)),
        actix_http::Protocol::Http1,
        peer,
    ))
}

/// The web UI over HTTPS on `listen` with `config` (HTTP/1.1): `workers` actix workers, each
/// serving at most `max_connections` connections (TLS handshakes included). Each accepted
/// connection is counted for its address before its handshake ([`handshake`]), so one
/// address holding silent connections cannot fill the workers. Errors: the address cannot
/// be bound.
pub(crate) fn https_server(
    state: actix_web::web::Data<super::AppState>,
    listen: std::net::SocketAddr,
    workers: usize,
    max_connections: usize,
    config: rustls::ServerConfig,
) -> std::io::Result<actix_server::Server> {
    use actix_service::ServiceFactoryExt;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let host = listen.to_string();
    Ok(actix_server::Server::build()
        .workers(workers)
        .max_concurrent_connections(max_connections)
        .bind("web-https", listen, move || {
            let app = actix_web::App::new()
                .app_data(state.clone())
                .configure(super::configure);
            let host = host.clone();
            let http = actix_http::HttpService::build()
                .on_connect_ext(|io: &Conn, ext: &mut actix_http::Extensions| {
                    if let Some(l) = io.held().1 {
                        ext.insert(super::limits::LocalAddr(l));
                    }
                })
                .finish(actix_service::map_config(app, move |_| {
                    // What actix-web's own HttpServer passes (its constructor is crate-private):
                    // `secure` makes the session cookie Secure (web::pages).
                    actix_web::dev::AppConfig::__priv_test_new(true, host.clone(), listen)
                }));
            let acceptor = acceptor.clone();
            actix_service::fn_service(move |tcp: tokio::net::TcpStream| {
                handshake(acceptor.clone(), tcp)
            })
            .and_then(http)
        })?
        .run())
}

/// Whether `path` (as [`resolved_path`] gives it) is the API's: `/api`, `/api/…`, `/metrics`
/// (answered with an error on the redirect listener, never with a redirect: a script must
/// learn to use HTTPS, not follow a hop after its token crossed in clear).
fn is_api(path: &str) -> bool {
    path == "/api"
        || path.starts_with("/api/")
        || path == "/metrics"
        || path.starts_with("/metrics/")
}

/// `routed`, the path as the main listener's router matches it (`req.match_info()`:
/// actix-router's decoding, every escape but `%2F`, `%25` and `%2B`), resolved further as a
/// client, a proxy or a later version of the router might: the same decoder with nothing
/// protected until no escape is left (at most 4 rounds: `%252F` → `%2F` → `/`), `\` read as
/// `/` (browsers do), empty and `.` segments dropped, `..` taking the one before it away (never
/// above `/`), ASCII letters lower case. For the redirect listener's "is this the API"
/// ([`is_api`]), where reading too much as the API costs a clear error, too little a redirect:
/// `/./api/runs`, `//api/runs`, `/api%2Fruns`, `/API`, `/%61pi/`, `/api/../api` → `/api…`.
pub(super) fn resolved_path(routed: &str) -> String {
    let text = unescaped(routed).replace('\\', "/");
    let mut segments: Vec<&str> = Vec::new();
    for seg in text.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    format!("/{}", segments.join("/"))
}

/// `s` with every percent-escape decoded by actix-router's decoder (the router's own, with
/// nothing protected), again until none is left (at most 4 rounds), ASCII lower case.
fn unescaped(s: &str) -> String {
    let quoter = actix_router::Quoter::new(b"", b"");
    let mut bytes = s.as_bytes().to_vec();
    for _ in 0..4 {
        match quoter.requote(&bytes) {
            Some(decoded) => bytes = decoded,
            None => break,
        }
    }
    String::from_utf8_lossy(&bytes).to_ascii_lowercase()
}

/// What in `req` is a credential that crossed the network in clear, in words for the error:
/// an `Authorization` header (any scheme), the session cookie
/// ([`super::auth::SESSION_COOKIE`]), or a query parameter whose name speaks of one
/// (`token`, `password`, `passwd`, `secret`, `session`, `auth`, `key`, in any case and
/// escaping). `None`: none of them.
fn credential(req: &HttpRequest) -> Option<&'static str> {
    if req.headers().contains_key(header::AUTHORIZATION) {
        return Some("this request's Authorization header crossed the network in clear: consider revoking its token");
    }
    if req.cookie(super::auth::SESSION_COOKIE).is_some() {
        return Some("this request's session cookie crossed the network in clear: log out over HTTPS to end that session");
    }
    let secret = req.query_string().split(['&', ';']).any(|pair| {
        let name = unescaped(pair.split('=').next().unwrap_or(""));
        [
            "token", "password", "passwd", "secret", "session", "auth", "key",
        ]
        .iter()
        .any(|w| name.contains(w))
    });
    secret.then_some(QUERY_CREDENTIAL)
}

/// [`credential`]'s words for a query parameter named like a credential.
const QUERY_CREDENTIAL: &str = "this request's query named a token or password, which crossed the network in clear: consider revoking or changing it";

/// The host part of a `Host:` header (`board`, `192.0.2.1`, `[2001:db8::1]`), port
/// dropped; `None` when it holds anything a host name or address cannot.
fn host_only(h: &str) -> Option<&str> {
    let host = if h.starts_with('[') {
        &h[..h.find(']')? + 1]
    } else {
        h.split(':').next()?
    };
    let ok = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    ok.then_some(host)
}

/// The host of the redirect's `https://` URL: the client's `Host:` only when it names this
/// board — the address the connection came to (`local`), `hostname` or `hostname.local`
/// (mDNS); else `local` (the client cannot send itself, or a page's link, to another site
/// through the board: `board.evil.example` is not this board, attacker tryout 2026-12-07).
/// `board` when neither is known.
fn redirect_host(given: Option<&str>, local: Option<std::net::IpAddr>, hostname: &str) -> String {
    let local_host = local.map(super::first_run::url_host);
    if let Some(h) = given.and_then(host_only) {
        let bare = h.trim_start_matches('[').trim_end_matches(']');
        let ours = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) => Some(ip.to_canonical()) == local,
            Err(_) => {
                let h = h.to_ascii_lowercase();
                let name = hostname.to_ascii_lowercase();
                !name.is_empty() && (h == name || h.strip_prefix(name.as_str()) == Some(".local"))
            }
        };
        if ours {
            return h.to_string();
        }
    }
    local_host.unwrap_or_else(|| "board".to_string())
}

/// The answer of the plain-HTTP listener (`http_redirect`) to `req`, the HTTPS listener on
/// `https_port`: an API request ([`is_api`] of the [`resolved_path`]: `/api/…`, `/metrics`,
/// however escaped, dotted or doubled) or any request carrying a credential ([`credential`])
/// → 400 JSON `{"error": "this board serves its API over HTTPS only: use https://… (…)"}`,
/// never a redirect (a client would send the token again); a page (GET/HEAD) → 307 to the
/// same path on `https://`; any other page request → 400 naming the HTTPS URL (a form posted
/// there is not forwarded). The host: [`redirect_host`].
pub(crate) async fn redirect(req: HttpRequest, https_port: u16) -> HttpResponse {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = redirect_host(
        req.headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok()),
        req.conn_data::<super::limits::LocalAddr>().map(|a| a.0),
        hostname.trim(),
    );
    let port = if https_port == 443 {
        String::new()
    } else {
        format!(":{https_port}")
    };
    let pq = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let url = format!("https://{host}{port}{pq}");
    let cred = credential(&req);
    if cred.is_some() || is_api(&resolved_path(req.match_info().as_str())) {
        // A query that named a credential is not sent back (in clear again, into logs).
        let url = if cred == Some(QUERY_CREDENTIAL) {
            format!("https://{host}{port}{}", req.uri().path())
        } else {
            url
        };
        let mut msg = format!("this board serves its API over HTTPS only: use {url}");
        if let Some(c) = cred {
            msg.push_str(&format!(" ({c})"));
        }
        return super::respond::json_error(actix_web::http::StatusCode::BAD_REQUEST, msg);
    }
    let m = req.method();
    if m == actix_web::http::Method::GET || m == actix_web::http::Method::HEAD {
        return HttpResponse::TemporaryRedirect()
            .insert_header((header::LOCATION, url))
            .finish();
    }
    HttpResponse::BadRequest()
        .content_type("text/plain; charset=utf-8")
        .body(format!(
            "This board's web UI is served over HTTPS only: open {url}\n"
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_uses_the_hosts_header_only_when_it_names_this_board() {
        let local = Some("192.0.2.1".parse().unwrap());
        let v6 = Some("2001:db8::1".parse().unwrap());
        let cases = [
            (Some("192.0.2.1"), local, "192.0.2.1"),
            (Some("192.0.2.1:80"), local, "192.0.2.1"),
            (Some("board-7"), local, "board-7"),
            (Some("BOARD-7.local:80"), local, "BOARD-7.local"),
            (Some("board-7.lab.example"), local, "192.0.2.1"),
            (Some("board-7.evil.example"), local, "192.0.2.1"),
            (Some("board-7.local.evil.example"), local, "192.0.2.1"),
            (Some("board-7..evil.example"), local, "192.0.2.1"),
            (Some("board-7.local."), local, "192.0.2.1"),
            (Some("[2001:db8::1]:80"), v6, "[2001:db8::1]"),
            // Not this board: the address the connection came to instead.
            (Some("evil.example"), local, "192.0.2.1"),
            (Some("board-7x"), local, "192.0.2.1"),
            (Some("board-7."), local, "192.0.2.1"),
            (Some("198.51.100.9"), local, "192.0.2.1"),
            (Some("a/b"), local, "192.0.2.1"),
            (None, v6, "[2001:db8::1]"),
            (Some("evil.example"), None, "board"),
        ];
        for (given, local, want) in cases {
            assert_eq!(redirect_host(given, local, "board-7"), want, "{given:?}");
        }
        assert_eq!(redirect_host(Some("x"), local, ""), "192.0.2.1");
    }

    #[test]
    fn the_redirect_listener_names_the_https_url() {
        assert_eq!(host_only("board:80"), Some("board"));
        assert_eq!(host_only("[2001:db8::1]:80"), Some("[2001:db8::1]"));
        assert_eq!(host_only("192.0.2.1"), Some("192.0.2.1"));
        assert_eq!(host_only("evil/path"), None);
        assert_eq!(host_only("a b"), None);
        assert!(is_api("/api/runs") && is_api("/metrics") && is_api("/api"));
        assert!(!is_api("/apiary") && !is_api("/login"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let page = rt.block_on(redirect(
            actix_web::test::TestRequest::get()
                .uri("/runs/3?x=1")
                .insert_header((header::HOST, "evil.example:80"))
                .to_http_request(),
            443,
        ));
        assert_eq!(page.status(), 307);
        assert_eq!(
            page.headers().get(header::LOCATION).unwrap(),
            "https://board/runs/3?x=1",
            "a Host that is not this board's is not used"
        );
        // `/%61pi/…` is the API for the router: refused like `/api/…`, not redirected.
        let escaped = rt.block_on(redirect(
            actix_web::test::TestRequest::get()
                .uri("/%61pi/runs")
                .to_http_request(),
            443,
        ));
        assert_eq!(escaped.status(), 400);
        assert!(escaped.headers().get(header::LOCATION).is_none());
        let api = rt.block_on(redirect(
            actix_web::test::TestRequest::get()
                .uri("/api/runs")
                .insert_header((header::HOST, "192.0.2.1"))
                .insert_header((header::AUTHORIZATION, "Bearer x"))
                .to_http_request(),
            8443,
        ));
        assert_eq!(api.status(), 400);
        assert!(api.headers().get(header::LOCATION).is_none());
        let post = rt.block_on(redirect(
            actix_web::test::TestRequest::post()
                .uri("/login")
                .insert_header((header::HOST, "board"))
                .to_http_request(),
            443,
        ));
        assert_eq!(post.status(), 400);
        assert!(post.headers().get(header::LOCATION).is_none());
    }

    /// Attacker tryout: a certificate whose validity starts later was served without a word.
    /// Warned as an expired one is, and differently when the board's clock was never set.
    #[test]
    fn a_certificate_not_valid_yet_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = crate::cert::self_signed_files(dir.path(), (2090, 3, 1), (2095, 1, 1));
        let id = load(&c, &k, false).unwrap();
        assert_eq!(
            id.not_before.map(|t| t.to_rfc3339()).as_deref(),
            Some("2090-03-01T00:00:00+00:00")
        );
        let at = |t: &str| t.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
        assert_eq!(
            id.validity_warning(at("2026-12-07T10:00:00Z")).unwrap_or_default(),
            format!(
                "the web UI's certificate {} is not valid yet (from 2090-03-01 00:00 UTC; the board's clock says 2026-12-07 10:00 UTC): browsers refuse it until then; use one valid from now (tls_cert, tls_key) or remove both settings to use a certificate the board makes",
                c.display()
            )
        );
        // A board without a battery-backed clock, before NTP: the clock is the thing to fix.
        let w = id
            .validity_warning(at("1970-01-01T00:00:42Z"))
            .unwrap_or_default();
        assert!(
            w.starts_with(
                "the board's clock says 1970-01-01 00:00 UTC, before the web UI's certificate"
            ) && w.contains("(from 2090-03-01 00:00 UTC): the clock looks unset"),
            "{w}"
        );
        assert_eq!(id.validity_warning(at("2090-03-01T00:00:01Z")), None);
        // The Settings page's view: the same warning from the start's dates at each view.
        let shown = Shown::new(&Config::default(), Some(&id));
        assert!(
            shown
                .validity_warning()
                .is_some_and(|w| w.contains("is not valid yet (from 2090-03-01 00:00 UTC")),
            "{shown:?}"
        );
        // The board's own certificate is valid from the Unix epoch (rcgen's default would be
        // 1975): a board at 1970 before NTP never finds it "not valid yet", and browsers,
        // with their own clock, take it whether it was made at 1970 or in 2026.
        let board = Names {
            host: "board".into(),
            addresses: vec!["192.0.2.1".parse().unwrap()],
        };
        let own = generated(&dir.path().join("data"), &board).unwrap();
        assert_eq!(
            own.not_before.map(|t| t.to_rfc3339()).as_deref(),
            Some("1970-01-01T00:00:00+00:00")
        );
        assert_eq!(own.validity_warning(at("1970-01-01T00:00:00Z")), None);
        assert_eq!(own.validity_warning(at("2026-12-07T10:00:00Z")), None);
        assert_eq!(crate::cert::not_before(b"\x30\x03\x30\x01\x00"), None);
    }

    /// The redirect listener as the daemon builds it (`cmd::daemon`): every request to
    /// [`redirect`] through actix's own request parsing and routing. (status, Location, body).
    async fn on_port_80(req: actix_web::test::TestRequest) -> (u16, Option<String>, String) {
        use actix_web::test as at;
        let app = at::init_service(
            actix_web::App::new().default_service(actix_web::web::to(|req| redirect(req, 443))),
        )
        .await;
        let r = at::call_service(&app, req.to_request()).await;
        let status = r.status().as_u16();
        let location = r
            .headers()
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        let body = at::read_body(r).await;
        (
            status,
            location,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    /// Attacker tryout: `/./api/…`, `//api/…` and `/api%2Fruns` got a 307 to https:// (a
    /// client following it sends its token again) instead of the API's error. Every spelling
    /// a client, proxy or router may read as the API gets the error; so does any request with
    /// a credential, whatever its path; pages are still redirected.
    #[actix_web::test]
    async fn port_80_refuses_every_spelling_of_the_api_and_every_credential() {
        use actix_web::test::TestRequest;
        let api = [
            "/./api/runs",
            "//api/runs",
            "/api%2Fruns",
            "/api%2fruns",
            "/API",
            "/API/runs",
            "/%61pi/",
            "/%61pi/runs",
            "/api/../api",
            "/api/../api/runs",
            "/x/../api/runs",
            "/../api/runs",
            "/%2e/api/runs",
            "/%2E%2E/api/runs",
            "/%252Fapi/runs",
            "/%2F%2Fapi%2Fruns",
            "/api",
            "/api/",
            "/api/runs?limit=1",
            "/metrics",
            "//metrics",
            "/Metrics",
            "/metrics/",
        ];
        for path in api {
            let (status, location, body) = on_port_80(TestRequest::get().uri(path)).await;
            assert_eq!(status, 400, "{path}: {body}");
            assert_eq!(location, None, "{path}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            assert_eq!(
                v["error"],
                format!("this board serves its API over HTTPS only: use https://board{path}"),
                "{path}"
            );
        }
        // Not the API: pages go to https:// as before.
        for path in [
            "/",
            "/login",
            "/runs?page=2",
            "/apiary",
            "/runs/3/api",
            "/x/..",
            "/static/app.css",
        ] {
            let (status, location, body) = on_port_80(TestRequest::get().uri(path)).await;
            assert_eq!(status, 307, "{path}: {body}");
            assert_eq!(location, Some(format!("https://board{path}")), "{path}");
        }
        // A credential on a page's path: the error, never a redirect.
        let auth = "this request's Authorization header crossed the network in clear: consider revoking its token";
        let cookie = "this request's session cookie crossed the network in clear: log out over HTTPS to end that session";
        let query = "this request's query named a token or password, which crossed the network in clear: consider revoking or changing it";
        let cases = [
            (
                TestRequest::get()
                    .uri("/runs")
                    .insert_header((header::AUTHORIZATION, "Bearer abc")),
                "/runs",
                auth,
            ),
            (
                TestRequest::get()
                    .uri("/")
                    .insert_header((header::AUTHORIZATION, "Basic YWRtaW46eA==")),
                "/",
                auth,
            ),
            (
                TestRequest::get()
                    .uri("/./api/runs")
                    .insert_header((header::AUTHORIZATION, "Bearer abc")),
                "/./api/runs",
                auth,
            ),
            (
                TestRequest::get()
                    .uri("/runs")
                    .insert_header((header::COOKIE, "theme=dark; netperfd_session=abc")),
                "/runs",
                cookie,
            ),
            (
                TestRequest::get().uri("/runs?token=abc"),
                "/runs?token=abc",
                query,
            ),
            (
                TestRequest::get().uri("/runs?page=1&Access%5FToken=abc"),
                "/runs?page=1&Access%5FToken=abc",
                query,
            ),
            (
                TestRequest::get().uri("/login?password=hunter22"),
                "/login?password=hunter22",
                query,
            ),
            (TestRequest::get().uri("/?API_KEY=x"), "/?API_KEY=x", query),
        ];
        for (req, path, why) in cases {
            let path = if why == query {
                path.split('?').next().unwrap_or(path)
            } else {
                path
            };
            let (status, location, body) = on_port_80(req).await;
            assert_eq!(status, 400, "{path}: {body}");
            assert_eq!(location, None, "{path}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            assert_eq!(
                v["error"],
                format!(
                    "this board serves its API over HTTPS only: use https://board{path} ({why})"
                ),
                "{path}"
            );
        }
        // Another cookie (another service of the same host) is no credential of ours.
        let (status, _, _) = on_port_80(
            TestRequest::get()
                .uri("/runs")
                .insert_header((header::COOKIE, "theme=dark")),
        )
        .await;
        assert_eq!(status, 307);
    }

    #[test]
    fn the_resolved_path_is_what_any_reader_may_take_the_path_for() {
        for (given, want) in [
            ("/./api/runs", "/api/runs"),
            ("//api//runs/", "/api/runs"),
            ("/api%2Fruns", "/api/runs"),
            ("/API", "/api"),
            ("/api/../api", "/api"),
            ("/a/b/../../api/x", "/api/x"),
            ("/../../api", "/api"),
            ("\\api\\runs", "/api/runs"),
            ("/%5Capi/runs", "/api/runs"),
            ("/%25252Fapi", "/api"),
            ("/", "/"),
            ("/login", "/login"),
        ] {
            assert_eq!(resolved_path(given), want, "{given}");
        }
    }
}
