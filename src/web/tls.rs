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

use crate::cert::{generated, key_mode, load, Identity, Names};
use crate::config::Config;
use actix_web::{http::header, HttpRequest, HttpResponse};
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
    /// The warning when the certificate has expired ([`Identity::expiry_warning`], at start).
    pub expired: Option<String>,
}

/// The warning logged and shown on every page when `plain_http` serves beyond loopback.
pub const PLAIN_WARNING: &str = "This board's web UI is plain HTTP beyond loopback (plain_http = true in its config): the admin password, session cookies and API tokens cross the network in clear. Remove plain_http to serve HTTPS.";

/// Set once by the daemon when `plain_http` serves beyond loopback ([`notice`]).
static PLAIN_BEYOND_LOOPBACK: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Say [`PLAIN_WARNING`] on every page from now on (the daemon, at start).
pub fn warn_on_every_page() {
    PLAIN_BEYOND_LOOPBACK.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The warning every page shows (`templates/base.html`) while `plain_http` serves beyond
/// loopback; `None` otherwise.
pub fn notice() -> Option<&'static str> {
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
            expired: id.and_then(|i| i.expiry_warning(chrono::Utc::now())),
        }
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
pub fn identity(cfg: &Config) -> Result<Identity, String> {
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
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// An HTTPS connection as actix-http serves it: the TLS stream, the board's own address it
/// came to, and its slot in the per-address count ([`super::limits::admit`], given back when
/// the connection ends).
pub struct Conn {
    io: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    local: Option<std::net::IpAddr>,
    _slot: super::limits::Admitted,
}

impl tokio::io::AsyncRead for Conn {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Conn {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

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
        Conn {
            io,
            local,
            _slot: slot,
        },
        actix_http::Protocol::Http1,
        peer,
    ))
}

/// The web UI over HTTPS on `listen` with `config` (HTTP/1.1): `workers` actix workers, each
/// serving at most `max_connections` connections (TLS handshakes included). Each accepted
/// connection is counted for its address before its handshake ([`handshake`]), so one
/// address holding silent connections cannot fill the workers. Errors: the address cannot
/// be bound.
pub fn https_server(
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
                    if let Some(l) = io.local {
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

/// Whether `path` is the API's (answered with an error on the redirect listener, never
/// with a redirect: a script must learn to use HTTPS, not follow a hop after its token
/// crossed in clear).
fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/") || path == "/metrics"
}

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
/// `https_port`: a page (GET/HEAD) → 307 to the same path on `https://`; any other page
/// request → 400 naming the HTTPS URL (a form posted there is not forwarded); an API request
/// (`/api/…`, `/metrics`, percent-escapes decoded as the router does) → 400 JSON
/// `{"error": "… use https://…"}`. The host: [`redirect_host`].
pub async fn redirect(req: HttpRequest, https_port: u16) -> HttpResponse {
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
    // The path as the router matches it (percent-escapes of unreserved characters decoded:
    // `/%61pi/runs` is the API's `/api/runs` on the HTTPS listener, so it is here too).
    if is_api(req.match_info().as_str()) {
        let mut msg = format!("this board serves its API over HTTPS only: use {url}");
        if req.headers().contains_key(header::AUTHORIZATION) {
            msg.push_str(
                " (this request's token crossed the network in clear: consider revoking it)",
            );
        }
        return super::json_error(actix_web::http::StatusCode::BAD_REQUEST, msg);
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
}
