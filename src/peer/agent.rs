//! The peer agent (`netperfd peer`): an HTTPS/JSON service on a lab PC that runs one iperf3
//! client test at a time, to the host the board names, with our own iperf3 engine.
//!
//! It serves TLS with its own certificate ([`crate::cert::generated`]: ECDSA P-256, made at
//! first start in its data directory — `--data-dir`, default [`default_data_dir`] — and
//! reused later) and prints the certificate's SHA-256 fingerprint at start; the board pins it
//! (`--peer https://PC1:5280#sha256=…`). `--plain-http` serves plain HTTP instead (the token
//! crosses the network in clear).
//!
//! API (every route needs `Authorization: Bearer <token>`; a wrong or missing token gets 401
//! and nothing runs; errors are `{"error": "..."}`):
//! * `GET /peer/v1/info` → `{"version", "hostname", "addresses": [..], "busy": bool}`;
//! * `POST /peer/v1/run` with a [`PeerTestSpec`] → 201 `{"id": N}`; 400 for a bad spec, 409
//!   while another test runs;
//! * `GET /peer/v1/run/N?since=K` → [`JobView`]: status, the intervals from number K on, and
//!   at the end the report (`report`, our `Report`) and iperf3's `-J` document (`iperf3`);
//! * `POST /peer/v1/run/N/stop` → 202 (the test ends with CLIENT_TERMINATE, status aborted).
//!
//! Jobs live in memory; the newest [`KEEP_JOBS`] are kept. Not for: storing history (the board
//! does) or reaching anything but the host in the spec.

use super::spec::PeerTestSpec;
use crate::engine::iperf3::client::{self, Event};
use crate::engine::report::{IntervalRecord, Report};
use crate::model::secrets::{ct_eq, sha256_hex};
use crate::model::RunStatus;
use actix_web::{http::header, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, Notify};

/// Finished jobs kept for the board to fetch.
pub const KEEP_JOBS: usize = 16;
/// Most intervals in one lean view (`?lean=1`, what the board asks for): the board asks again
/// a second later from where it got to.
pub const VIEW_INTERVALS: usize = 8;

/// One test's state as the agent reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobView {
    pub id: u64,
    /// running / completed / failed / aborted.
    pub status: RunStatus,
    /// Why it failed (iperf3's wording where there is one).
    #[serde(default)]
    pub error: Option<String>,
    /// The spec it runs.
    pub spec: PeerTestSpec,
    /// Number of the first interval in `intervals` (the `since` asked for).
    #[serde(default)]
    pub first: usize,
    /// Intervals from number `first` on.
    #[serde(default)]
    pub intervals: Vec<IntervalRecord>,
    /// Intervals so far (ask `since=next` for the following ones).
    #[serde(default)]
    pub next: usize,
    /// The final (or partial, on failure) report, once the test has ended.
    #[serde(default)]
    pub report: Option<Box<Report>>,
    /// The report as iperf3's `-J` document, once the test has ended.
    #[serde(default)]
    pub iperf3: Option<serde_json::Value>,
    /// What the test's latency probes measured (when the spec asked for them), once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<super::spec::ProbeSummary>,
    /// Start and end, Unix ms.
    pub started_at: i64,
    #[serde(default)]
    pub ended_at: Option<i64>,
}

struct Job {
    view: JobView,
    cancel: Arc<Notify>,
}

/// Wrong tokens one client address may send per [`WRONG_TOKEN_WINDOW`] before it gets 429.
pub const WRONG_TOKENS: u32 = 10;
/// Window of the wrong-token limit.
pub const WRONG_TOKEN_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// The agent's shared state.
pub struct Agent {
    token_hash: String,
    /// Wrong tokens per client address: [`WRONG_TOKENS`] per [`WRONG_TOKEN_WINDOW`], then
    /// 429 until the window has passed.
    limiter: crate::model::secrets::LoginLimiter,
    jobs: Mutex<VecDeque<Job>>,
    next_id: Mutex<u64>,
    rt: tokio::runtime::Handle,
    /// Reads this host's drop counters around each test (what moved goes into the report's
    /// `local_drops`, so the board names this PC's drops in a forwarding run's ledger).
    drops: Option<crate::engine::iperf3::server::DropCounters>,
}

impl Agent {
    /// An agent accepting `token` (checked with [`super::check_token`] by the caller); tests run
    /// on the current tokio runtime. `drops`: this host's drop-counter reader, if any.
    pub fn new(
        token: &str,
        drops: Option<crate::engine::iperf3::server::DropCounters>,
    ) -> Arc<Agent> {
        Arc::new(Agent {
            drops,
            token_hash: sha256_hex(token),
            limiter: crate::model::secrets::LoginLimiter::new(WRONG_TOKENS, WRONG_TOKEN_WINDOW),
            jobs: Mutex::new(VecDeque::new()),
            next_id: Mutex::new(1),
            rt: tokio::runtime::Handle::current(),
        })
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, VecDeque<Job>> {
        match self.jobs.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether `req` carries the token (compared as SHA-256 digests, in constant time).
    fn authorized(&self, req: &HttpRequest) -> bool {
        let Some(h) = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let Some(tok) = crate::model::secrets::bearer_token(h) else {
            return false;
        };
        ct_eq(&sha256_hex(tok), &self.token_hash)
    }

    /// Let a request through if it carries the token — always, even from an address that
    /// is locked out (the board and a guesser may share an address behind NAT, and the lockout
    /// must not lock the board out). A wrong or missing token gets 401, or 429 once its
    /// address sent [`WRONG_TOKENS`] wrong ones within [`WRONG_TOKEN_WINDOW`]; a right token
    /// does not clear that count (a guesser sharing the address gets no more tries by it).
    /// Guessing stays hopeless either way: tokens are at least [`super::MIN_TOKEN`] printable
    /// characters.
    fn check(&self, req: &HttpRequest) -> Result<(), HttpResponse> {
        if self.authorized(req) {
            return Ok(());
        }
        let ip = req
            .peer_addr()
            .map(|a| a.ip())
            .unwrap_or(std::net::IpAddr::from([0u8, 0, 0, 0]));
        if let Err(wait) = self.limiter.check(ip) {
            return Err(HttpResponse::TooManyRequests()
                .insert_header((header::RETRY_AFTER, wait.to_string()))
                .json(json!({"error": format!("too many wrong tokens from this address; try again in {wait} s")})));
        }
        self.limiter.fail(ip);
        Err(unauthorized())
    }

    fn busy(&self) -> bool {
        self.jobs()
            .iter()
            .any(|j| j.view.status == RunStatus::Running)
    }

    /// Start a test; its id, or why not (400 / 409 with the message).
    pub fn start(self: &Arc<Self>, spec: PeerTestSpec) -> Result<u64, (u16, String)> {
        let mut cs = spec.to_client_spec().map_err(|e| (400, e))?;
        cs.drops = self.drops.clone();
        let cancel = Arc::new(Notify::new());
        let id = {
            let mut jobs = self.jobs();
            if jobs.iter().any(|j| j.view.status == RunStatus::Running) {
                return Err((409, "another test is running on this peer".into()));
            }
            let id = {
                let mut n = match self.next_id.lock() {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                let id = *n;
                *n += 1;
                id
            };
            jobs.push_back(Job {
                view: JobView {
                    id,
                    status: RunStatus::Running,
                    error: None,
                    spec: spec.clone(),
                    first: 0,
                    intervals: Vec::new(),
                    next: 0,
                    report: None,
                    iperf3: None,
                    probes: None,
                    started_at: crate::model::time::now_ms(),
                    ended_at: None,
                },
                cancel: cancel.clone(),
            });
            while jobs.len() > KEEP_JOBS {
                jobs.pop_front();
            }
            id
        };
        tracing::info!(job = id, host = %spec.host, "peer test requested");
        let me = self.clone();
        crate::engine::task::spawn_on(&self.rt, async move {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let m2 = me.clone();
            let rec = crate::engine::task::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    if let Event::Interval(i) = ev {
                        m2.with_job(id, |j| {
                            j.view.intervals.push(i);
                            j.view.next = j.view.intervals.len();
                        });
                    }
                }
            });
            // Latency probes: from PROBE_IDLE before the traffic to its end.
            let time_s = cs.params.time as f64;
            let prober = match spec.probe {
                Some(p) => match start_probes(&spec.host, p).await {
                    Ok(pr) => {
                        tokio::time::sleep(super::spec::PROBE_IDLE).await;
                        Some(pr)
                    }
                    Err(e) => {
                        tracing::warn!(job = id, "{e}");
                        me.with_job(id, |j| {
                            j.view.error = Some(e);
                            j.view.ended_at = Some(crate::model::time::now_ms());
                            j.view.status = RunStatus::Failed;
                        });
                        return;
                    }
                },
                None => None,
            };
            let res = client::run(cs, Some(tx), Some(cancel)).await;
            let _ = rec.await;
            let probes = match prober {
                Some(pr) => {
                    let stats = crate::engine::task::spawn_blocking(move || pr.stop()).await;
                    stats
                        .ok()
                        .map(|st| super::spec::ProbeSummary::of(&st, time_s))
                }
                None => None,
            };
            let (status, report, error) = match res {
                Ok(r) => (RunStatus::Completed, Some(Box::new(r)), None),
                Err(e) => (
                    if e.aborted {
                        RunStatus::Aborted
                    } else {
                        RunStatus::Failed
                    },
                    e.partial,
                    Some(e.message),
                ),
            };
            tracing::info!(job = id, status = status.as_str(), "peer test ended");
            me.with_job(id, |j| {
                j.view.iperf3 = report.as_deref().map(crate::engine::report::to_iperf3_json);
                j.view.report = report;
                j.view.probes = probes;
                j.view.error = error;
                j.view.ended_at = Some(crate::model::time::now_ms());
                j.view.status = status;
            });
        });
        Ok(id)
    }

    fn with_job(&self, id: u64, f: impl FnOnce(&mut Job)) {
        if let Some(j) = self.jobs().iter_mut().find(|j| j.view.id == id) {
            f(j);
        }
    }

    /// A job's view with the intervals from `since` on; None if unknown. `lean` (what the
    /// board asks for): at most [`VIEW_INTERVALS`] intervals, the report without its
    /// intervals (the board has them from its polls) and no iperf3 document (the board makes
    /// it from the report), so a view stays small however long the test ran.
    pub fn view(&self, id: u64, since: usize, lean: bool) -> Option<JobView> {
        let jobs = self.jobs();
        let j = jobs.iter().find(|j| j.view.id == id)?;
        let v = &j.view;
        let first = since.min(v.intervals.len());
        let upto = if lean {
            first.saturating_add(VIEW_INTERVALS).min(v.intervals.len())
        } else {
            v.intervals.len()
        };
        let report = if lean {
            v.report.as_ref().map(|r| {
                Box::new(Report {
                    intervals: Vec::new(),
                    ..(**r).clone()
                })
            })
        } else {
            v.report.clone()
        };
        Some(JobView {
            id: v.id,
            status: v.status,
            error: v.error.clone(),
            spec: v.spec.clone(),
            first,
            intervals: v.intervals.get(first..upto).unwrap_or_default().to_vec(),
            next: v.intervals.len(),
            report,
            iperf3: if lean { None } else { v.iperf3.clone() },
            probes: v.probes.clone(),
            started_at: v.started_at,
            ended_at: v.ended_at,
        })
    }

    /// Ask a running job to stop: Some(true) when asked, Some(false) when it had ended, None
    /// when unknown.
    pub fn stop(&self, id: u64) -> Option<bool> {
        let jobs = self.jobs();
        let j = jobs.iter().find(|j| j.view.id == id)?;
        if j.view.status != RunStatus::Running {
            return Some(false);
        }
        j.cancel.notify_one();
        Some(true)
    }
}

/// Start the latency probes of a test to `host` (resolved here) on the probe's port. Errors:
/// the host does not resolve or the socket cannot be opened, as a sentence.
async fn start_probes(
    host: &str,
    p: super::spec::ProbeRequest,
) -> Result<crate::engine::echo::EchoProber, String> {
    let addr = tokio::net::lookup_host((host, p.port))
        .await
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("latency probes: cannot resolve '{host}'"))?;
    crate::engine::echo::start_prober(
        addr,
        std::time::Duration::from_millis(u64::from(p.interval_ms)),
        PROBE_TIMEOUT,
        None,
        std::time::Instant::now(),
    )
    .map_err(|e| format!("latency probes to {addr}: {e}"))
}

/// A probe's reply later than this after its request is counted lost.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

fn error(status: u16, msg: impl Into<String>) -> HttpResponse {
    HttpResponse::build(
        actix_web::http::StatusCode::from_u16(status)
            .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST),
    )
    .json(json!({"error": msg.into()}))
}

fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized()
        .insert_header((header::WWW_AUTHENTICATE, "Bearer realm=\"netperfd peer\""))
        .json(json!({"error": "missing or wrong token (send 'Authorization: Bearer <token>')"}))
}

/// Register the agent's routes (the app must hold `web::Data<Arc<Agent>>`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/peer/v1/info", web::get().to(info))
        .route("/peer/v1/run", web::post().to(run))
        .route("/peer/v1/run/{id}", web::get().to(show))
        .route("/peer/v1/run/{id}/stop", web::post().to(stop));
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

async fn info(req: HttpRequest, agent: web::Data<Arc<Agent>>) -> HttpResponse {
    if let Err(r) = agent.check(&req) {
        return r;
    }
    let addresses: Vec<String> = crate::board::ports()
        .iter()
        .filter(|p| !p.loopback)
        .flat_map(|p| p.addresses.iter().map(|a| a.to_string()))
        .collect();
    HttpResponse::Ok().json(json!({
        "version": crate::engine::report::version_string(),
        "hostname": hostname(),
        "addresses": addresses,
        "busy": agent.busy(),
    }))
}

async fn run(req: HttpRequest, agent: web::Data<Arc<Agent>>, body: web::Bytes) -> HttpResponse {
    if let Err(r) = agent.check(&req) {
        return r;
    }
    let spec: PeerTestSpec = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => return error(400, format!("invalid test spec: {e}")),
    };
    match agent.start(spec) {
        Ok(id) => HttpResponse::Created()
            .insert_header((header::LOCATION, format!("/peer/v1/run/{id}")))
            .json(json!({"id": id})),
        Err((code, msg)) => error(code, msg),
    }
}

#[derive(Deserialize)]
struct Since {
    #[serde(default)]
    since: Option<usize>,
    /// `1`: the lean view (see [`Agent::view`]).
    #[serde(default)]
    lean: Option<u8>,
}

async fn show(
    req: HttpRequest,
    agent: web::Data<Arc<Agent>>,
    path: web::Path<String>,
    q: web::Query<Since>,
) -> HttpResponse {
    if let Err(r) = agent.check(&req) {
        return r;
    }
    let Ok(id) = path.parse::<u64>() else {
        return error(404, "no such test");
    };
    match agent.view(id, q.since.unwrap_or(0), q.lean == Some(1)) {
        Some(v) => HttpResponse::Ok().json(v),
        None => error(404, format!("no test {id} on this peer")),
    }
}

async fn stop(
    req: HttpRequest,
    agent: web::Data<Arc<Agent>>,
    path: web::Path<String>,
) -> HttpResponse {
    if let Err(r) = agent.check(&req) {
        return r;
    }
    let Ok(id) = path.parse::<u64>() else {
        return error(404, "no such test");
    };
    match agent.stop(id) {
        Some(true) => HttpResponse::Accepted().json(json!({"id": id, "stopping": true})),
        Some(false) => error(409, format!("test {id} has already ended")),
        None => error(404, format!("no test {id} on this peer")),
    }
}

/// Flags of `netperfd peer`.
#[derive(clap::Args, Debug)]
pub struct PeerArgs {
    /// Address to listen on
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:5280")]
    pub listen: std::net::SocketAddr,
    /// File holding the shared token (the board sends it as a bearer token)
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// The shared token itself (visible in the process list; prefer --token-file or
    /// $NETPERFD_PEER_TOKEN)
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// UDP port of the latency echo responder (one-way delays for a board's latency runs;
    /// 0 turns it off)
    #[arg(long = "echo-port", value_name = "PORT", default_value_t = crate::engine::echo::DEFAULT_PORT)]
    pub echo_port: u16,
    /// Directory of the agent's TLS certificate and key (made at first start, reused later,
    /// so its fingerprint stays the one the board pinned) [default: $XDG_STATE_HOME/netperfd-peer,
    /// else ~/.local/state/netperfd-peer, else /var/lib/netperfd-peer]
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// Serve plain HTTP instead of HTTPS: the token and the tests cross the network in clear
    /// (the board then uses http://HOST:PORT)
    #[arg(long = "plain-http")]
    pub plain_http: bool,
}

/// Where the agent keeps its certificate without `--data-dir`: `$XDG_STATE_HOME/netperfd-peer`,
/// else `$HOME/.local/state/netperfd-peer`, else `/var/lib/netperfd-peer` (a service without a
/// home). Relative values of the variables are ignored (XDG's rule).
pub fn default_data_dir() -> std::path::PathBuf {
    let abs = |k: &str| {
        std::env::var_os(k)
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(d) = abs("XDG_STATE_HOME") {
        return d.join("netperfd-peer");
    }
    if let Some(h) = abs("HOME") {
        return h.join(".local/state/netperfd-peer");
    }
    std::path::PathBuf::from("/var/lib/netperfd-peer")
}

/// The agent's certificate, from `dir` (made there at first start): its names are this
/// host's name and non-loopback addresses (for `curl --cacert`; the board checks the
/// fingerprint only). Errors: the directory cannot be made or written, as a sentence.
pub fn identity(dir: &std::path::Path) -> Result<crate::cert::Identity, String> {
    let names = crate::cert::Names {
        host: hostname(),
        addresses: crate::board::ports()
            .iter()
            .filter(|p| !p.loopback)
            .flat_map(|p| p.addresses.iter().copied())
            .collect(),
    };
    crate::cert::generated(dir, &names)
}

/// How long a connection may take from its accept to a finished TLS handshake, and then
/// (over TLS or plain HTTP) to its first request's head; then it is closed, so a silent
/// connection holds its address's slot no longer. The board's listener uses the same.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Most connections the agent serves at once, all addresses (the board makes one at a
/// time); more wait in the listen backlog. 512: an attacker needs 32 addresses at their
/// per-address cap to fill it (a recheck of the tryout: at 64, 8 addresses × 16 idle
/// connections delayed the board's request 3–6 s; a PC holds 512 idle connections easily).
pub const MAX_CONNECTIONS: usize = 512;
/// Connections one client address may hold open to the agent; more are closed at once, when
/// accepted (before any TLS work): one address cannot take every slot (an attacker tryout:
/// 600 idle connections from one address made the board's `forward --peer` fail).
pub const MAX_CONNECTIONS_PER_ADDRESS: usize = 16;

/// Count the connection `tcp` for its client address in `limit`: `None` (and the connection
/// shut down) when the address already holds [`MAX_CONNECTIONS_PER_ADDRESS`] or it has none.
fn admit(
    limit: &Arc<crate::conn_limit::ConnLimit>,
    tcp: &tokio::net::TcpStream,
) -> Option<crate::conn_limit::Slot> {
    let ip = tcp.peer_addr().ok()?.ip();
    match limit.take(ip) {
        Ok(slot) => Some(slot),
        Err(_) => {
            let _ = socket2::SockRef::from(tcp).shutdown(std::net::Shutdown::Both);
            crate::rate_warn!(
                "peer-agent-per-address",
                %ip,
                "peer agent: {MAX_CONNECTIONS_PER_ADDRESS} connections from {ip} already; closing the next"
            );
            None
        }
    }
}

/// Serve `agent` on `listen`: over TLS with `tls`, else plain HTTP (HTTP/1.1 both). One
/// worker, at most [`MAX_CONNECTIONS`] connections and [`MAX_CONNECTIONS_PER_ADDRESS`] per
/// client address (counted at accept, before the handshake), [`HANDSHAKE_TIMEOUT`] for the
/// handshake and the first request; bodies of at most 64 KiB. Errors: the address cannot be
/// bound, or the server fails.
pub async fn serve(
    agent: web::Data<Arc<Agent>>,
    listen: std::net::SocketAddr,
    tls: Option<rustls::ServerConfig>,
) -> Result<(), String> {
    use actix_service::ServiceFactoryExt;
    let bind_err = |e: std::io::Error| format!("cannot listen on {listen}: {e}");
    // As web::tls::https_server: actix-server accepts, the connection is counted for its
    // address, tokio-rustls does the handshake (with a timeout), actix-http serves HTTP/1.1
    // (no HTTP/2 pulled in).
    let acceptor = tls.map(|c| tokio_rustls::TlsAcceptor::from(Arc::new(c)));
    let secure = acceptor.is_some();
    let limit = crate::conn_limit::ConnLimit::new(usize::MAX, MAX_CONNECTIONS_PER_ADDRESS);
    let host = listen.to_string();
    let server = actix_server::Server::build()
        .workers(1)
        .max_concurrent_connections(MAX_CONNECTIONS)
        .bind("peer-agent", listen, move || {
            let app = actix_web::App::new()
                .app_data(agent.clone())
                .app_data(web::PayloadConfig::new(64 * 1024))
                .configure(configure);
            let host = host.clone();
            let http = actix_http::HttpService::build()
                .client_request_timeout(HANDSHAKE_TIMEOUT)
                .finish(actix_service::map_config(app, move |_| {
                    actix_web::dev::AppConfig::__priv_test_new(secure, host.clone(), listen)
                }));
            let (acceptor, limit) = (acceptor.clone(), limit.clone());
            actix_service::fn_service(move |tcp: tokio::net::TcpStream| {
                let (acceptor, limit) = (acceptor.clone(), limit.clone());
                async move {
                    use actix_http::error::DispatchError;
                    let peer = tcp.peer_addr().ok();
                    let Some(slot) = admit(&limit, &tcp) else {
                        return Err(DispatchError::Io(std::io::Error::other(
                            "too many connections from this address",
                        )));
                    };
                    let io: Box<dyn Io> = match acceptor {
                        None => Box::new(crate::conn_limit::Counted::new(tcp, slot)),
                        Some(acceptor) => {
                            let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
                                .await
                                .map_err(|_| {
                                    DispatchError::Io(std::io::ErrorKind::TimedOut.into())
                                })?
                                .map_err(DispatchError::Io)?;
                            Box::new(crate::conn_limit::Counted::new(tls, slot))
                        }
                    };
                    Ok::<_, DispatchError>((io, actix_http::Protocol::Http1, peer))
                }
            })
            .and_then(http)
        })
        .map_err(bind_err)?
        .run();
    server.await.map_err(|e| e.to_string())
}

/// A connection's stream as the agent's HTTP service reads it: plain TCP or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The address to give the board for an agent on `listen` with `fingerprint`:
/// `https://ADDR:PORT#sha256=…` — the listen address, or (on 0.0.0.0 / ::) this host's first
/// non-loopback address, else its hostname.
pub fn board_url(listen: std::net::SocketAddr, fingerprint: &str) -> String {
    let ip = listen.ip();
    let host = if ip.is_unspecified() {
        crate::board::ports()
            .iter()
            .filter(|p| !p.loopback)
            .flat_map(|p| p.addresses.iter().copied())
            .find(|a| a.is_ipv4() == ip.is_ipv4())
            .map(|a| a.to_string())
            .unwrap_or_else(|| {
                let h = hostname();
                if h.is_empty() {
                    "THIS-PC".to_string()
                } else {
                    h
                }
            })
    } else {
        ip.to_string()
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    format!("https://{host}:{}#sha256={fingerprint}", listen.port())
}

/// Run the agent until killed; returns the exit code (2 without a usable token). `drops`:
/// this host's drop-counter reader (see [`Agent::new`]).
pub fn main(a: PeerArgs, drops: Option<crate::engine::iperf3::server::DropCounters>) -> i32 {
    crate::logging::init("info");
    let token = match super::token_from(a.token.as_deref(), a.token_file.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("netperfd peer: {e}; refusing to start without one");
            return 2;
        }
    };
    let tls = if a.plain_http {
        eprintln!(
            "netperfd peer: plain HTTP (--plain-http): the token and the tests cross the network in clear"
        );
        None
    } else {
        let dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
        match identity(&dir) {
            Ok(id) => Some(id),
            Err(e) => {
                eprintln!(
                    "netperfd peer: {e} (give --data-dir DIR for the agent's certificate, or --plain-http)"
                );
                return 1;
            }
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("netperfd peer: {e}");
            return 1;
        }
    };
    let _echo = if a.echo_port != 0 {
        match crate::engine::echo::Responder::start(a.echo_port) {
            Ok(r) => {
                eprintln!("netperfd peer: UDP echo (latency) on port {}", a.echo_port);
                Some(r)
            }
            Err(e) => {
                eprintln!(
                    "netperfd peer: cannot listen for the UDP echo on port {}: {e} (latency runs against this host get round trips only)",
                    a.echo_port
                );
                None
            }
        }
    } else {
        None
    };
    let listen = a.listen;
    let r = rt.block_on(async move {
        let agent = web::Data::new(Agent::new(&token, drops));
        match tls {
            Some(id) => {
                eprintln!(
                    "netperfd peer agent on https://{listen}/peer/v1/ (one test at a time)\nnetperfd peer: certificate SHA-256 {} ({} {})\nnetperfd peer: on the board: --peer '{}'",
                    id.fingerprint,
                    if id.made { "made now in" } else { "kept in" },
                    id.cert_path.display(),
                    board_url(listen, &id.fingerprint)
                );
                serve(agent, listen, Some(id.server)).await
            }
            None => {
                eprintln!("netperfd peer agent on http://{listen}/peer/v1/ (one test at a time)");
                serve(agent, listen, None).await
            }
        }
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("netperfd peer: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{test, App};

    const TOKEN: &str = "right-token-0123456";

    /// Issue 37 item 17: ten wrong tokens from an address locked the right one out too (the
    /// board behind the same NAT as a guesser could not run its tests). Now the right token
    /// still gets in while wrong ones stay limited, and does not reset their count.
    #[actix_web::test]
    async fn a_right_token_gets_in_while_wrong_ones_are_locked_out() {
        let agent = web::Data::new(Agent::new(TOKEN, None));
        let app = test::init_service(App::new().app_data(agent.clone()).configure(configure)).await;
        let from: std::net::SocketAddr = "192.0.2.50:40000".parse().unwrap();
        let info = |token: &str| {
            test::TestRequest::get()
                .uri("/peer/v1/info")
                .peer_addr(from)
                .insert_header(("Authorization", format!("Bearer {token}")))
                .to_request()
        };
        for i in 0..WRONG_TOKENS {
            let r = test::call_service(&app, info("wrong-token-000000")).await;
            assert_eq!(r.status(), 401, "wrong token {i}");
        }
        let r = test::call_service(&app, info("wrong-token-000000")).await;
        assert_eq!(r.status(), 429);
        assert!(r.headers().contains_key("retry-after"));
        // The right token from the same address: in.
        let r = test::call_service(&app, info(TOKEN)).await;
        assert_eq!(r.status(), 200);
        let v: serde_json::Value = test::read_body_json(r).await;
        assert_eq!(v["busy"], false);
        // ...and wrong ones stay locked out after it.
        let r = test::call_service(&app, info("wrong-token-000001")).await;
        assert_eq!(r.status(), 429);
        // Another address is not affected.
        let other = test::TestRequest::get()
            .uri("/peer/v1/info")
            .peer_addr("192.0.2.51:40000".parse().unwrap())
            .insert_header(("Authorization", "Bearer wrong-token-000000"))
            .to_request();
        assert_eq!(test::call_service(&app, other).await.status(), 401);
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;

    const TOKEN: &str = "right-token-0123456";

    /// A free loopback port (bound, then let go).
    fn free_port() -> std::net::SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }

    /// A real agent over TLS on loopback with its generated certificate: the board's client
    /// pinned to the printed fingerprint gets the agent's info; pinned to another, it is
    /// refused before the token is sent, with both fingerprints named; a plain-HTTP client to
    /// the TLS agent, and a TLS client to a plain agent, are clear errors; plain HTTP to a
    /// plain agent still works.
    #[test]
    fn the_board_reaches_the_agent_over_tls_only_with_the_pinned_certificate() {
        use crate::peer::PeerClient;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let id = identity(dir.path()).unwrap();
        // The fingerprint is SHA-256 of the certificate's DER in the data directory.
        let pem = std::fs::read(dir.path().join(crate::cert::CERT_FILE)).unwrap();
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(&pem).unwrap();
        use sha2::Digest;
        let hex: Vec<String> = sha2::Sha256::digest(der.as_ref())
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        assert_eq!(id.fingerprint, hex.join(":"));
        let fp = id.fingerprint.clone();
        let (tls_at, plain_at) = (free_port(), free_port());
        rt.block_on(async {
            let agent = web::Data::new(Agent::new(TOKEN, None));
            let a2 = agent.clone();
            crate::engine::task::spawn(serve(agent, tls_at, Some(id.server)));
            crate::engine::task::spawn(serve(a2, plain_at, None));
            for at in [tls_at, plain_at] {
                for _ in 0..100 {
                    if tokio::net::TcpStream::connect(at).await.is_ok() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
            let client = |url: String| {
                PeerClient::parse(&url, TOKEN)
                    .unwrap()
                    .allowing_own_addresses()
            };
            let p = tls_at.port();
            let info = client(format!("https://127.0.0.1:{p}#sha256={fp}"))
                .info()
                .await
                .unwrap();
            assert!(!info.busy);
            assert!(info.version.contains("netperfd"), "{info:?}");
            let wrong = fp.replace(&fp[..2], if &fp[..2] == "00" { "01" } else { "00" });
            let e = client(format!("https://127.0.0.1:{p}#sha256={wrong}"))
                .info()
                .await
                .unwrap_err();
            assert!(
                e.message.contains(&format!("presented a certificate with SHA-256 {fp}, not the pinned {wrong}: refused, the token was not sent")),
                "{e}"
            );
            let e = client(format!("http://127.0.0.1:{p}")).info().await.unwrap_err();
            assert!(e.message.contains("is reached with https://HOST:PORT#sha256=FINGERPRINT"), "{e}");
            let q = plain_at.port();
            let e = client(format!("https://127.0.0.1:{q}#sha256={fp}"))
                .info()
                .await
                .unwrap_err();
            assert!(
                e.message.contains("did not complete a TLS handshake") && e.message.contains("--plain-http"),
                "{e}"
            );
            let info = client(format!("http://127.0.0.1:{q}")).info().await.unwrap();
            assert!(info.version.contains("netperfd"), "{info:?}");
            // A wrong token over TLS: the agent's 401, as in plain HTTP.
            let e = PeerClient::parse(&format!("https://127.0.0.1:{p}#sha256={fp}"), "wrong-token-0000000")
                .unwrap()
                .allowing_own_addresses()
                .info()
                .await
                .unwrap_err();
            assert!(e.unauthorized, "{e}");
        });
        // A restart keeps the certificate: the same fingerprint.
        assert_eq!(identity(dir.path()).unwrap().fingerprint, fp);
    }

    /// An attacker tryout: 600 idle connections (no TLS, no token) from one address made the
    /// board's `forward --peer` fail ("did not answer within 15 s"): the agent's 64 slots were
    /// shared by everyone. Now, with 100 idle connections from 127.0.0.1 held open, only
    /// [`MAX_CONNECTIONS_PER_ADDRESS`] of them stay open (the rest are closed at once), and a
    /// request from 127.0.0.2 is answered within 2 s — over TLS and over plain HTTP.
    #[test]
    fn idle_connections_from_one_address_do_not_lock_out_another() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const IDLE: usize = 100;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let id = identity(dir.path()).unwrap();
        let fp = id.fingerprint.clone();
        let (tls_at, plain_at) = (free_port(), free_port());
        rt.block_on(async {
            let agent = web::Data::new(Agent::new(TOKEN, None));
            let a2 = agent.clone();
            crate::engine::task::spawn(serve(agent, tls_at, Some(id.server)));
            crate::engine::task::spawn(serve(a2, plain_at, None));
            for at in [tls_at, plain_at] {
                for _ in 0..100 {
                    if tokio::net::TcpStream::connect(at).await.is_ok() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
            // Let the probe connections above end (they count for 127.0.0.1 until closed).
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            for (at, tls) in [(tls_at, true), (plain_at, false)] {
                let mut idle = Vec::new();
                for _ in 0..IDLE {
                    idle.push(std::net::TcpStream::connect(at).unwrap());
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                // Closed ones read EOF (or a reset); open ones have nothing to read yet.
                let open = idle
                    .iter()
                    .filter(|c| {
                        let mut c: &std::net::TcpStream = c;
                        c.set_nonblocking(true).unwrap();
                        let mut b = [0u8; 1];
                        matches!(std::io::Read::read(&mut c, &mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                    })
                    .count();
                assert_eq!(open, MAX_CONNECTIONS_PER_ADDRESS, "tls {tls}: idle connections left open");
                // A request from another loopback address, while those are held.
                let t0 = std::time::Instant::now();
                let sock = tokio::net::TcpSocket::new_v4().unwrap();
                sock.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                let tcp = sock.connect(at).await.unwrap();
                let req = format!(
                    "GET /peer/v1/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
                );
                let ask = async {
                    let mut answer = Vec::new();
                    if tls {
                        let verifier = Arc::new(crate::peer::client::PinnedVerifier::new(&fp));
                        let cfg = verifier.client_config().unwrap();
                        let conn = tokio_rustls::TlsConnector::from(Arc::new(cfg));
                        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
                        let mut s = conn.connect(name, tcp).await.unwrap();
                        s.write_all(req.as_bytes()).await.unwrap();
                        let _ = s.read_to_end(&mut answer).await;
                    } else {
                        let mut s = tcp;
                        s.write_all(req.as_bytes()).await.unwrap();
                        let _ = s.read_to_end(&mut answer).await;
                    }
                    answer
                };
                let answer = tokio::time::timeout(std::time::Duration::from_secs(5), ask)
                    .await
                    .unwrap_or_default();
                let took = t0.elapsed();
                let text = String::from_utf8_lossy(&answer);
                assert!(text.starts_with("HTTP/1.1 200"), "tls {tls}: {text:?} after {took:?}");
                assert!(text.contains("netperfd"), "tls {tls}: {text}");
                assert!(took < std::time::Duration::from_secs(2), "tls {tls}: answered after {took:?}");
                drop(idle);
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
        });
    }

    #[test]
    fn the_board_url_names_an_address_and_the_fingerprint() {
        let u = board_url("192.0.2.2:5280".parse().unwrap(), "AB:CD");
        assert_eq!(u, "https://192.0.2.2:5280#sha256=AB:CD");
        let u = board_url("[2001:db8::2]:6000".parse().unwrap(), "AB:CD");
        assert_eq!(u, "https://[2001:db8::2]:6000#sha256=AB:CD");
        assert!(board_url("0.0.0.0:5280".parse().unwrap(), "AB:CD").ends_with(":5280#sha256=AB:CD"));
    }
}
