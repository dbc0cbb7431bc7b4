//! The peer agent (`netperfd peer`): an HTTP/JSON service on a lab PC that runs one iperf3
//! client test at a time, to the host the board names, with our own iperf3 engine.
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
    let r = rt.block_on(async move {
        let agent = web::Data::new(Agent::new(&token, drops));
        let server = actix_web::HttpServer::new(move || {
            actix_web::App::new()
                .app_data(agent.clone())
                .app_data(web::PayloadConfig::new(64 * 1024))
                .configure(configure)
        })
        .workers(1)
        .bind(a.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", a.listen))?;
        eprintln!(
            "netperfd peer agent on http://{}/peer/v1/ (one test at a time)",
            a.listen
        );
        server.run().await.map_err(|e| e.to_string())
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
