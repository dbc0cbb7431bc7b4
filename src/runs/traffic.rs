//! Seed 003's stock-tool tests as daemon services, each transfer recorded as a run:
//! * the **payload server** — `GET /payload/<size>` (any size up to 100G) generated from one
//!   shared 1 MiB block in memory, with `Range:` and several connections, so `axel -n 10`,
//!   `curl` or a browser download it; the parallel connections of one client for one payload
//!   are one run of kind `http-serve`;
//! * the **TCP sink** (`nc board PORT < /dev/zero`) and **TCP source**
//!   (`nc board PORT > /dev/null`): runs of kind `tcp-sink` / `tcp-source`; a source
//!   connection is a run, the sink connections of one client address that overlap in time
//!   (several `nc` in parallel) are one run with a stream each and their sum;
//! * **HTTP downloads** by the board (`http-get`), started from the web UI, the API or the CLI.
//!
//! Not for: the HTTP wire details and the download engine (`engine::http`), rendering (web).

use crate::config::Config;
use crate::engine::admission::{Admission, Limits, Ticket};
use crate::engine::http::{self, GetEvent, GetSpec, RangeAsk, RequestHead};
use crate::engine::meter::{bps, ConnTotals, Counter, Meter};
use crate::engine::net;
use crate::model::{RunDirection, RunFigures, RunProtocol, RunRole, RunStatus};
use crate::results::traffic_summary::{
    HttpGetParams, HttpGetSummary, HttpServeParams, HttpServeSummary, StreamSum, TcpRawParams,
    TcpRawSummary,
};
use crate::runs::context::{RunContext, Started};
use crate::runs::recorder::{Ended, Measured, Sampling, ServedRun};
use crate::store::NewRun;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

/// Most connections the payload server serves at once (more get 503).
pub(crate) const MAX_HTTP_CONNECTIONS: usize = 64;
/// Most connections the TCP sink, and the TCP source, each serve at once (more are closed).
pub(crate) const MAX_RAW_CONNECTIONS: usize = 32;
/// A sink connection that brings no byte for this long is closed (aborted), seconds.
pub(crate) const SINK_IDLE_SECS: u64 = 60;
/// A source or payload connection whose peer takes no byte for this long is closed, seconds.
pub(crate) const STALL_SECS: u64 = 30;
/// A request head (the first one, or the next on a kept-alive connection) must arrive whole
/// within this many seconds of the connection being ready for it, seconds; a sink
/// connection must bring its first byte as fast. Idle or trickling connections cannot hold
/// the service's connection slots for long.
pub(crate) const HEAD_TIMEOUT_SECS: u64 = 10;
/// Most connections one client address may hold on the payload server at once (a download
/// manager uses up to 16); more get 503.
pub(crate) const MAX_HTTP_PER_ADDRESS: usize = 16;
/// Most connections one client address may hold on the TCP sink, and on the TCP source.
pub(crate) const MAX_RAW_PER_ADDRESS: usize = 8;
/// Most connections one client address may hold on the payload server while they wait for
/// a request (or idle between two); more get 503.
pub(crate) const MAX_HTTP_PENDING_PER_ADDRESS: usize = 8;
/// Most idle connections (no byte yet, or moving less than [`SLOW_WINDOW_BYTES`] per
/// [`SLOW_WINDOW_SECS`]) one client address may hold on the TCP sink, and on the TCP source.
pub(crate) const MAX_RAW_PENDING_PER_ADDRESS: usize = 4;
/// The parallel connections of one client for one payload form one run until none has been
/// active for this long, ms.
pub(crate) const GROUP_LINGER_MS: u64 = 1000;

/// What each service listens on (0 = off), for the web page.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Listening {
    pub http_port: Option<u16>,
    pub sink_port: Option<u16>,
    pub source_port: Option<u16>,
    /// Ports that could not be opened, with the reason.
    pub errors: Vec<String>,
}

/// Start the services the configuration turns on. A port that cannot be opened is logged and
/// left out (the iperf3 server and the web UI still start); the result says what listens.
pub(crate) fn start(ctx: &RunContext, cfg: &Config) -> Listening {
    let l = start_services(ctx, cfg);
    ctx.set_listening(l.clone());
    l
}

fn start_services(ctx: &RunContext, cfg: &Config) -> Listening {
    let mut l = Listening::default();
    let mut open = |port: u16, what: &str| -> Option<TcpListener> {
        if port == 0 {
            return None;
        }
        match crate::engine::iperf3::server::bind_listener(None, port) {
            Ok(s) => {
                tracing::info!(port, "{what} listening");
                Some(s)
            }
            Err(e) => {
                let m = format!("{what}: cannot listen on port {port}: {e}");
                tracing::error!("{m}");
                l.errors.push(m);
                None
            }
        }
    };
    if let Some(s) = open(cfg.http_payload_port, "HTTP payload server") {
        l.http_port = Some(cfg.http_payload_port);
        let st = Arc::new(PayloadServer {
            ctx: ctx.clone(),
            block: http::payload_block(),
            groups: Mutex::new(HashMap::new()),
            port: cfg.http_payload_port,
        });
        crate::engine::task::spawn(accept_loop(
            s,
            http_limits(),
            "HTTP payload server",
            true,
            move |c, peer, ticket| {
                let st = st.clone();
                async move { st.serve(c, peer, ticket).await }
            },
        ));
    }
    if let Some(s) = open(cfg.tcp_sink_port, "TCP sink") {
        l.sink_port = Some(cfg.tcp_sink_port);
        let (h, port) = (ctx.clone(), cfg.tcp_sink_port);
        let groups: Arc<RawGroups> = Arc::new(Mutex::new(HashMap::new()));
        crate::engine::task::spawn(accept_loop(
            s,
            raw_limits(),
            "TCP sink",
            true,
            move |c, peer, ticket| {
                raw_conn(
                    h.clone(),
                    Some(groups.clone()),
                    c,
                    peer,
                    port,
                    false,
                    ticket,
                )
            },
        ));
    }
    if let Some(s) = open(cfg.tcp_source_port, "TCP source") {
        l.source_port = Some(cfg.tcp_source_port);
        let (h, port) = (ctx.clone(), cfg.tcp_source_port);
        crate::engine::task::spawn(accept_loop(
            s,
            raw_limits(),
            "TCP source",
            false,
            move |c, peer, ticket| raw_conn(h.clone(), None, c, peer, port, true, ticket),
        ));
    }
    l
}

/// The payload server's admission caps: [`MAX_HTTP_CONNECTIONS`] in all,
/// [`MAX_HTTP_PER_ADDRESS`] per client address, [`MAX_HTTP_PENDING_PER_ADDRESS`] of them
/// waiting for a request.
pub(crate) fn http_limits() -> Limits {
    Limits {
        max: MAX_HTTP_CONNECTIONS,
        per_source: MAX_HTTP_PER_ADDRESS,
        pending_per_source: MAX_HTTP_PENDING_PER_ADDRESS,
        replace_own_after: Duration::from_secs(1),
        fair_share: false,
    }
}

/// The TCP sink's and the TCP source's admission caps: [`MAX_RAW_CONNECTIONS`] in all,
/// [`MAX_RAW_PER_ADDRESS`] per client address, [`MAX_RAW_PENDING_PER_ADDRESS`] of them idle.
pub(crate) fn raw_limits() -> Limits {
    Limits {
        max: MAX_RAW_CONNECTIONS,
        per_source: MAX_RAW_PER_ADDRESS,
        pending_per_source: MAX_RAW_PENDING_PER_ADDRESS,
        replace_own_after: Duration::from_secs(1),
        fair_share: false,
    }
}

/// Accept connections; each runs `f` with a [`Ticket`] of the service's fair admission
/// table (caps per client address, idle connections of the busiest address evicted for a
/// new one, see [`crate::engine::admission`]). Refused connections run `f` with `None` so
/// it can refuse politely; a new connection starts pending (idle) when `pending_at_start`.
/// Accept failures (EMFILE…) are logged at most once a minute.
async fn accept_loop<F, Fut>(
    l: TcpListener,
    limits: Limits,
    what: &'static str,
    pending_at_start: bool,
    f: F,
) where
    F: Fn(TcpStream, SocketAddr, Option<Ticket>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let table = Admission::new(limits);
    loop {
        match l.accept().await {
            Ok((c, peer)) => {
                let ticket = table.admit_as(peer.ip(), pending_at_start).ok();
                crate::engine::task::spawn(f(c, peer, ticket));
            }
            Err(e) => {
                // EMFILE and friends: wait instead of spinning.
                crate::rate_warn!(what, "{what}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// A sink or source connection that moved no byte for this long counts as idle: while the
/// service is full, a new client address may evict it (see [`crate::engine::admission`]),
/// seconds.
pub(crate) const IDLE_SECS: u64 = 2;

/// Bytes a TCP source connection's peer must take per [`SLOW_WINDOW_SECS`] window, or the
/// connection is closed (a slow reader must not hold a slot indefinitely): 64 KiB.
pub(crate) const SLOW_WINDOW_BYTES: u64 = 64 * 1024;
/// The window of [`SLOW_WINDOW_BYTES`], seconds.
pub(crate) const SLOW_WINDOW_SECS: u64 = 10;

fn keepalive(c: &TcpStream) {
    let s = socket2::SockRef::from(c);
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    let _ = s.set_tcp_keepalive(&ka);
    let _ = s.set_tcp_user_timeout(Some(Duration::from_secs(STALL_SECS)));
}

// ---------------------------------------------------------------- payload server

/// One client (address and User-Agent) downloading one payload size.
type GroupKey = (IpAddr, u64, String);

/// The size in the group key of a peer's folded run (requests beyond its run budget, see
/// `crate::runs::anon`); no real payload has it.
const FOLDED_SIZE: u64 = u64::MAX;

struct Group {
    meter: Arc<Meter>,
    /// The run (`None` when the store could not record it; the download is served all the
    /// same).
    run: Option<ServedRun>,
    /// Notified by the run page's Stop button; `stopped` then cuts every transfer.
    cancel: Arc<Notify>,
    stopped: std::sync::atomic::AtomicBool,
    path: String,
    size: u64,
    user_agent: String,
    /// (requests, bytes asked, requests cut short, active body transfers, peak of those)
    counts: Mutex<GroupCounts>,
}

#[derive(Default)]
struct GroupCounts {
    requests: u64,
    asked: u64,
    cut: u64,
    active: usize,
    peak: usize,
    /// Body bytes of the requests served to their end.
    delivered: u64,
    /// When the last body byte of any request was handed to the kernel.
    last_byte: Option<Instant>,
    /// The payload byte ranges [start, end) of the requests served to their end, and of those
    /// cut short (what was written before the cut), at most [`MAX_RANGES`] each.
    done_ranges: Vec<(u64, u64)>,
    cut_ranges: Vec<(u64, u64)>,
}

/// Most byte ranges a download run keeps of each kind (a few KB; a client making more
/// requests than this in one run is counted by whole requests only beyond them).
const MAX_RANGES: usize = 4096;

/// Bytes of `cut` not covered by `done`: what requests cut short delivered of the payload
/// that no request served to its end delivered again. A download manager (axel) that
/// drops a slow range and fetches its tail anew got the cut range's head from the cut
/// request; a size probe dropped at once overlaps the ranges fetched later and adds nothing.
/// Ranges are [start, end) in payload bytes.
fn cut_bytes_not_served_again(cut: &[(u64, u64)], done: &[(u64, u64)]) -> u64 {
    let union = |v: &[(u64, u64)]| -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = v.iter().copied().filter(|(a, b)| b > a).collect();
        v.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (a, b) in v {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        out
    };
    let done = union(done);
    union(cut)
        .into_iter()
        .map(|(a, b)| {
            let covered: u64 = done
                .iter()
                .map(|(c, d)| b.min(*d).saturating_sub(a.max(*c)))
                .sum();
            (b - a).saturating_sub(covered)
        })
        .sum()
}

struct Slot {
    group: Arc<Group>,
    /// Connections joined and not yet left.
    members: usize,
    idle_since: Option<Instant>,
}

struct PayloadServer {
    ctx: RunContext,
    block: Arc<[u8]>,
    groups: Mutex<HashMap<GroupKey, Slot>>,
    port: u16,
}

const HELP: &str = "netperfd payload server\n\nGET /payload/<size> returns <size> bytes generated in memory (no disk), e.g.\n  curl -o /dev/null http://<board>:<port>/payload/100M\n  axel -n 10 -q -o /tmp/netperfd-1G http://<board>:<port>/payload/1G; rm -f /tmp/netperfd-1G /tmp/netperfd-1G.st\nSizes: bytes, or K/M/G/T (decimal, 100M = 100000000 bytes) or Ki/Mi/Gi (binary); at most 100G.\nSingle Range requests are served (206). Every download is recorded in the board's history.\n";

fn response_head(
    status: u16,
    reason: &str,
    headers: &[(&str, String)],
    keep_alive: bool,
) -> Vec<u8> {
    let mut h = format!(
        "HTTP/1.1 {status} {reason}\r\nServer: netperfd/{}\r\n",
        env!("CARGO_PKG_VERSION")
    );
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    if !keep_alive {
        h.push_str("Connection: close\r\n");
    }
    h.push_str("\r\n");
    h.into_bytes()
}

fn text_response(status: u16, reason: &str, body: &str, extra: &[(&str, String)]) -> Vec<u8> {
    let mut hs = vec![
        ("Content-Type", "text/plain; charset=utf-8".to_string()),
        ("Content-Length", body.len().to_string()),
    ];
    hs.extend(extra.iter().cloned());
    let mut v = response_head(status, reason, &hs, false);
    v.extend_from_slice(body.as_bytes());
    v
}

/// Read one request head into `buf` (which keeps what follows it). Ok(None) when the peer
/// closed or went quiet between requests.
async fn read_request(
    c: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<Option<Vec<u8>>, &'static str> {
    let mut chunk = [0u8; 2048];
    // The whole head within HEAD_TIMEOUT_SECS: a trickle of bytes does not extend it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(HEAD_TIMEOUT_SECS);
    loop {
        if let Some(end) = http::head_end(buf) {
            let head = buf[..end].to_vec();
            buf.drain(..end);
            return Ok(Some(head));
        }
        if buf.len() > http::MAX_HEAD {
            return Err("request head too large");
        }
        let n = match tokio::time::timeout_at(deadline, c.read(&mut chunk)).await {
            Ok(Ok(n)) => n,
            _ => return Ok(None),
        };
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Write `len` bytes of the payload starting at body offset `first`, counting into `c`.
/// Returns the bytes written; an error when the peer stops reading or goes away.
async fn write_payload(
    w: &mut TcpStream,
    block: &[u8],
    first: u64,
    len: u64,
    c: &Counter,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<u64, (u64, String)> {
    let mut sent = 0u64;
    while sent < len {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err((sent, "stopped by the user".into()));
        }
        let off = ((first + sent) % block.len() as u64) as usize;
        let n = ((block.len() - off) as u64).min(len - sent).min(256 * 1024) as usize;
        match tokio::time::timeout(
            Duration::from_secs(STALL_SECS),
            w.write_all(&block[off..off + n]),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err((sent, format!("{e}"))),
            Err(_) => {
                return Err((sent, format!("the peer took no data for {STALL_SECS} s")));
            }
        }
        sent += n as u64;
        c.add(n as u64);
    }
    Ok(sent)
}

/// A payload request the server serves.
struct PayloadAsk {
    /// The response head to send.
    head: Vec<u8>,
    /// The payload's size, bytes.
    size: u64,
    /// The body's first byte in the payload and its length, bytes.
    first: u64,
    len: u64,
    /// A HEAD request: no body.
    head_only: bool,
}

/// What the payload server answers to `req`, or the whole response of a request it does not
/// serve (the connection closes after it).
fn payload_answer(req: &RequestHead) -> Result<PayloadAsk, Vec<u8>> {
    let head_only = match req.method.as_str() {
        "GET" => false,
        "HEAD" => true,
        _ => {
            return Err(text_response(
                405,
                "Method Not Allowed",
                "only GET and HEAD\n",
                &[("Allow", "GET, HEAD".into())],
            ));
        }
    };
    let path = req.path();
    if path == "/" {
        return Err(text_response(200, "OK", HELP, &[]));
    }
    let Some(name) = path.strip_prefix("/payload/") else {
        return Err(text_response(
            404,
            "Not Found",
            "no such path: use /payload/<size>, e.g. /payload/100M\n",
            &[],
        ));
    };
    let name = name.strip_suffix(".bin").unwrap_or(name);
    let size = match http::parse_size(name) {
        Ok(s) => s,
        Err(e) => {
            return Err(text_response(400, "Bad Request", &format!("{e}\n"), &[]));
        }
    };
    let ka = req.keep_alive();
    let mut hs = vec![
        ("Content-Type", "application/octet-stream".to_string()),
        ("Accept-Ranges", "bytes".to_string()),
        ("Cache-Control", "no-store".to_string()),
    ];
    let (status, reason, first, len) = match http::parse_range(req.header("range"), size) {
        RangeAsk::Full => (200, "OK", 0, size),
        RangeAsk::Part { first, last } => {
            hs.push(("Content-Range", format!("bytes {first}-{last}/{size}")));
            (206, "Partial Content", first, last - first + 1)
        }
        RangeAsk::Unsatisfiable => {
            return Err(text_response(
                416,
                "Range Not Satisfiable",
                &format!("the range is outside the {size} bytes of this payload\n"),
                &[("Content-Range", format!("bytes */{size}"))],
            ));
        }
        RangeAsk::Invalid => {
            return Err(text_response(
                400,
                "Bad Request",
                "malformed Range header: use bytes=FIRST-LAST, bytes=FIRST- or bytes=-SUFFIX\n",
                &[],
            ));
        }
    };
    hs.push(("Content-Length", len.to_string()));
    Ok(PayloadAsk {
        head: response_head(status, reason, &hs, ka),
        size,
        first,
        len,
        head_only,
    })
}

impl PayloadServer {
    async fn serve(self: Arc<Self>, mut c: TcpStream, peer: SocketAddr, ticket: Option<Ticket>) {
        let Some(ticket) = ticket else {
            let _ = c
                .write_all(&text_response(
                    503,
                    "Service Unavailable",
                    &format!("too many connections (at most {MAX_HTTP_CONNECTIONS} at once, {MAX_HTTP_PER_ADDRESS} per client address, {MAX_HTTP_PENDING_PER_ADDRESS} of them waiting)\n"),
                    &[("Retry-After", "5".into())],
                ))
                .await;
            return;
        };
        keepalive(&c);
        let local = c.local_addr().ok();
        let mut buf = Vec::new();
        // The group this connection counts in, and its counter there.
        let mut joined: Option<(GroupKey, Arc<Group>, Arc<Counter>)> = None;
        loop {
            // Waiting for a request: idle, so evictable when another address needs the slot.
            ticket.set_pending(true);
            let read = tokio::select! {
                r = read_request(&mut c, &mut buf) => r,
                _ = ticket.evicted() => {
                    crate::peer_warn!(peer.ip(), %peer, "payload connection idle while the server is full: closed for another client");
                    Ok(None)
                }
            };
            ticket.set_pending(false);
            let head = match read {
                Ok(Some(h)) => h,
                Ok(None) => break,
                Err(e) => {
                    let _ = c
                        .write_all(&text_response(400, "Bad Request", &format!("{e}\n"), &[]))
                        .await;
                    break;
                }
            };
            let req = match http::parse_request(&head) {
                Ok(r) => r,
                Err(e) => {
                    let _ = c
                        .write_all(&text_response(400, "Bad Request", &format!("{e}\n"), &[]))
                        .await;
                    break;
                }
            };
            let has_body = req
                .header("content-length")
                .is_some_and(|v| v.trim() != "0")
                || req.header("transfer-encoding").is_some();
            if has_body {
                let _ = c
                    .write_all(&text_response(
                        400,
                        "Bad Request",
                        "requests with a body are not accepted here\n",
                        &[],
                    ))
                    .await;
                break;
            }
            match self.answer(&mut c, &req, peer, local, &mut joined).await {
                Ok(true) if req.keep_alive() => continue,
                _ => break,
            }
        }
        if let Some((key, g, ctr)) = joined.take() {
            ctr.close();
            self.leave(key, &g);
        }
        drop(ticket);
    }

    /// Answer one request; Ok(true) when the connection may carry another.
    async fn answer(
        self: &Arc<Self>,
        c: &mut TcpStream,
        req: &RequestHead,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        joined: &mut Option<(GroupKey, Arc<Group>, Arc<Counter>)>,
    ) -> Result<bool, String> {
        let ask = match payload_answer(req) {
            Ok(a) => a,
            Err(refusal) => {
                c.write_all(&refusal).await.map_err(|e| e.to_string())?;
                return Ok(false);
            }
        };
        c.write_all(&ask.head).await.map_err(|e| e.to_string())?;
        if ask.head_only || ask.len == 0 {
            return Ok(true);
        }
        self.serve_body(c, req, peer, local, joined, &ask).await
    }

    /// Send the body `ask` asks for, counted in the run of this client for this payload
    /// (joined, or one begun); Ok(true) when served to the end.
    async fn serve_body(
        self: &Arc<Self>,
        c: &mut TcpStream,
        req: &RequestHead,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        joined: &mut Option<(GroupKey, Arc<Group>, Arc<Counter>)>,
        ask: &PayloadAsk,
    ) -> Result<bool, String> {
        let (size, first, len) = (ask.size, ask.first, ask.len);
        let ua: String = req
            .header("user-agent")
            .unwrap_or("")
            .chars()
            .take(120)
            .collect();
        let mut key = (http::addr_ip(&peer), size, ua);
        let known =
            self.lock().contains_key(&key) || matches!(joined, Some((k, _, _)) if *k == key);
        if !known {
            if let crate::runs::anon::Record::Fold(_) = self
                .ctx
                .anon()
                .decide(key.0, crate::model::RunKind::HttpServe)
            {
                // Beyond the per-peer run budget: one folded run for this peer's requests.
                key = (key.0, FOLDED_SIZE, String::new());
            }
        }
        let (g, ctr) = match joined {
            Some((k, g, ctr)) if *k == key => (g.clone(), ctr.clone()),
            _ => {
                if let Some((k, g, ctr)) = joined.take() {
                    ctr.close();
                    self.leave(k, &g);
                }
                let g = self.join(key.clone(), peer, local, req);
                let ctr = g.meter.add_stream(c.as_raw_fd());
                *joined = Some((key, g.clone(), ctr.clone()));
                (g, ctr)
            }
        };
        {
            let mut n = g.counts.lock().unwrap_or_else(|p| p.into_inner());
            n.requests += 1;
            n.asked += len;
            n.active += 1;
            n.peak = n.peak.max(n.active);
        }
        ctr.request_started();
        let r = write_payload(c, &self.block, first, len, &ctr, &g.stopped).await;
        ctr.request_done();
        let mut n = g.counts.lock().unwrap_or_else(|p| p.into_inner());
        n.active -= 1;
        n.last_byte = Some(Instant::now());
        match r {
            Ok(sent) => {
                n.delivered += sent;
                if n.done_ranges.len() < MAX_RANGES {
                    n.done_ranges.push((first, first.saturating_add(sent)));
                }
                Ok(true)
            }
            Err((sent, e)) => {
                n.cut += 1;
                if n.cut_ranges.len() < MAX_RANGES {
                    n.cut_ranges.push((first, first.saturating_add(sent)));
                }
                Err(e)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupKey, Slot>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Join (or open) the run of this client for this payload.
    fn join(
        self: &Arc<Self>,
        key: GroupKey,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        req: &RequestHead,
    ) -> Arc<Group> {
        let mut map = self.lock();
        if let Some(s) = map.get_mut(&key) {
            s.members += 1;
            s.idle_since = None;
            return s.group.clone();
        }
        let path = req.path().to_string();
        let run = NewRun {
            role: RunRole::Server,
            protocol: RunProtocol::Http,
            peer_host: net::ip_text(peer.ip()),
            peer_port: peer.port(),
            local_host: local.map(|l| net::ip_text(l.ip())).unwrap_or_default(),
            local_port: self.port,
            direction: RunDirection::Send,
            params: payload_params(&path, key.1).to_value(),
            kind: crate::model::RunKind::HttpServe,
            ..Default::default()
        };
        let cancel = Arc::new(Notify::new());
        let sampling = Sampling::Ports(Vec::new());
        let run = match self.ctx.start_served(&run, sampling, Some(cancel.clone())) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!("cannot record a download: {e}");
                None
            }
        };
        let g = Arc::new(Group {
            meter: Meter::new(true),
            run,
            cancel,
            stopped: std::sync::atomic::AtomicBool::new(false),
            path,
            size: key.1,
            user_agent: req
                .header("user-agent")
                .unwrap_or("")
                .chars()
                .take(120)
                .collect(),
            counts: Mutex::new(GroupCounts::default()),
        });
        map.insert(
            key.clone(),
            Slot {
                group: g.clone(),
                members: 1,
                idle_since: None,
            },
        );
        drop(map);
        let me = self.clone();
        let g2 = g.clone();
        crate::engine::task::spawn(async move { me.watch(key, g2).await });
        g
    }

    fn leave(&self, key: GroupKey, g: &Arc<Group>) {
        let mut map = self.lock();
        if let Some(s) = map.get_mut(&key) {
            if Arc::ptr_eq(&s.group, g) {
                s.members = s.members.saturating_sub(1);
                if s.members == 0 {
                    s.idle_since = Some(Instant::now());
                }
            }
        }
    }

    /// Cut intervals every second; end the run once no member has been active for the linger.
    async fn watch(self: Arc<Self>, key: GroupKey, g: Arc<Group>) {
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let (Some(iv), Some(r)) = (g.meter.cut(0.0), &g.run) {
                        r.recorder().interval(iv);
                    }
                }
                _ = g.cancel.notified() => {
                    g.stopped.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            let done = {
                let mut map = self.lock();
                let over = map.get(&key).is_some_and(|s| {
                    Arc::ptr_eq(&s.group, &g)
                        && s.members == 0
                        && s.idle_since
                            .is_some_and(|t| t.elapsed() >= Duration::from_millis(GROUP_LINGER_MS))
                });
                if over {
                    map.remove(&key);
                }
                over
            };
            if done {
                break;
            }
        }
        let Some(run) = &g.run else {
            return;
        };
        if let Some(iv) = g.meter.cut(0.01) {
            run.recorder().interval(iv);
        }
        run.end(payload_end(&g));
    }
}

/// The stored params of a download run of `path` (`size` bytes; [`FOLDED_SIZE`]: the folded
/// run of a peer's requests beyond its run budget).
fn payload_params(path: &str, size: u64) -> HttpServeParams {
    if size == FOLDED_SIZE {
        HttpServeParams {
            path: Some("(several)".into()),
            folded: true,
            note: Some(format!(
                "requests beyond {} runs a minute from this peer, counted together",
                crate::runs::anon::RUNS_PER_MINUTE
            )),
            ..Default::default()
        }
    } else {
        HttpServeParams {
            path: Some(path.into()),
            size: Some(size),
            ..Default::default()
        }
    }
}

/// The stored summary of download run `g` with counts `n`: `per` its connections (`sent`
/// bytes written in all), `counted` goodput bytes over `seconds`.
fn payload_summary(
    g: &Group,
    n: &GroupCounts,
    (sent, per): (u64, Vec<ConnTotals>),
    counted: u64,
    seconds: f64,
) -> HttpServeSummary {
    HttpServeSummary {
        path: Some(g.path.clone()),
        size: g.size,
        connections: n.peak as u64,
        tcp_connections: Some(per.len() as u64),
        requests: n.requests,
        requests_cut_short: n.cut,
        requested_bytes: n.asked,
        bytes: Some(counted),
        bytes_sent: sent,
        seconds: Some(seconds),
        bits_per_second: Some(bps(counted, seconds)),
        user_agent: g.user_agent.clone(),
        per_connection: per,
    }
}

/// How a download run ended, from its group's counts: status, goodput and bytes, summary.
fn payload_end(g: &Group) -> Ended {
    let (bytes, per) = g.meter.totals();
    let n = g.counts.lock().unwrap_or_else(|p| p.into_inner());
    // Duration: from the first request to the last body byte handed to the kernel.
    let seconds = n
        .last_byte
        .map(|t| t.saturating_duration_since(g.meter.started()).as_secs_f64())
        .unwrap_or(0.0);
    // Goodput counts the requests served to their end, plus what requests cut short
    // delivered that no complete request delivered again (a range axel dropped and
    // fetched the tail of anew): a request the peer dropped at once (axel's size probe)
    // left bytes in socket buffers that it never read, and those overlap the ranges
    // fetched later. When none ended (a dropped or stopped download), what was sent is
    // the best figure there is.
    let complete = n.requests - n.cut;
    let counted = if complete > 0 {
        n.delivered + cut_bytes_not_served_again(&n.cut_ranges, &n.done_ranges)
    } else {
        bytes
    };
    let goodput = bps(counted, seconds);
    let (status, error) = if g.stopped.load(std::sync::atomic::Ordering::Relaxed) {
        (RunStatus::Aborted, Some("stopped by the user".to_string()))
    } else if complete == 0 && n.cut > 0 {
        (
            RunStatus::Aborted,
            Some(format!(
                "the peer closed every request before its end ({bytes} of {} bytes sent)",
                n.asked
            )),
        )
    } else {
        (RunStatus::Completed, None)
    };
    let summary = payload_summary(g, &n, (bytes, per), counted, seconds).to_value();
    let figures = RunFigures {
        sender_bps: Some(goodput),
        bytes: Some(counted as i64),
        ..Default::default()
    };
    Ended {
        status,
        measured: Measured::Figures(figures),
        summary: Some(summary),
        error,
    }
}

// ---------------------------------------------------------------- TCP sink and source

async fn raw_conn(
    ctx: RunContext,
    groups: Option<Arc<RawGroups>>,
    mut c: TcpStream,
    peer: SocketAddr,
    port: u16,
    source: bool,
    ticket: Option<Ticket>,
) {
    let Some(ticket) = ticket else {
        crate::peer_warn!(peer.ip(), %peer, port, "too many connections (at most {MAX_RAW_CONNECTIONS}, {MAX_RAW_PER_ADDRESS} per client address, {MAX_RAW_PENDING_PER_ADDRESS} of them idle); closed");
        return;
    };
    // A source is useful from its first byte on; a sink once its peer sends.
    ticket.set_pending(!source);
    keepalive(&c);
    let run = raw_run(c.local_addr().ok(), peer, port, source);
    // A stream joining the client's open sink run adds no run: the run budget is not asked.
    let joins = groups.as_ref().is_some_and(|g| {
        g.lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&peer.ip())
    });
    let record = if joins {
        crate::runs::anon::Record::Own
    } else {
        ctx.anon().decide(peer.ip(), run.kind)
    };
    if let crate::runs::anon::Record::Fold(fold) = record {
        raw_fold(&ctx, run, fold, c, peer, ticket).await;
        return;
    }
    let Some((group, ctr)) = join_raw(&ctx, groups.as_deref(), &run, peer, c.as_raw_fd()) else {
        return;
    };
    let (status, error) = raw_transfer(&mut c, source, &ticket, &group, &ctr).await;
    ctr.close();
    // Leave the run before the socket closes: a client that connects again once this one is
    // closed (one after another, not in parallel) gets a run of its own.
    leave_raw(&ctx, groups.as_deref(), &group, peer, (status, error)).await;
    drop(c);
    drop(ticket);
}

/// The run row of a sink (`source` false) or source connection from `peer` to `port`.
fn raw_run(local: Option<SocketAddr>, peer: SocketAddr, port: u16, source: bool) -> NewRun {
    let kind = if source {
        crate::model::RunKind::TcpSource
    } else {
        crate::model::RunKind::TcpSink
    };
    NewRun {
        role: RunRole::Server,
        protocol: RunProtocol::Tcp,
        peer_host: net::ip_text(peer.ip()),
        peer_port: peer.port(),
        local_host: local.map(|l| net::ip_text(l.ip())).unwrap_or_default(),
        local_port: port,
        direction: if source {
            RunDirection::Send
        } else {
            RunDirection::Receive
        },
        params: TcpRawParams {
            port,
            folded_connections: None,
        }
        .to_value(),
        kind,
        ..Default::default()
    }
}

/// Serve a connection beyond the per-peer run budget: counted in one folded run of the peer
/// and minute (`fold`: its id once it exists; made here otherwise).
async fn raw_fold(
    ctx: &RunContext,
    run: NewRun,
    fold: Option<i64>,
    c: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
) {
    let (kind, port, source) = (run.kind, run.local_port, run.kind.is_tcp_source());
    // Beyond the per-peer run budget: served, counted in one folded run.
    let fold = match fold {
        Some(f) => Some(f),
        None => {
            let r = NewRun {
                params: TcpRawParams {
                    port,
                    folded_connections: Some(0),
                }
                .to_value(),
                ..run
            };
            let f = ctx.store().create_run(&r).ok();
            if let Some(f) = f {
                ctx.anon().set_fold(peer.ip(), kind, f);
            }
            f
        }
    };
    let bytes = raw_folded(c, source, &ticket).await;
    if let Some(f) = fold {
        if let Err(e) = ctx.store().fold_into(f, bytes) {
            tracing::error!("cannot record a {kind} connection: {e}");
        }
    }
    drop(ticket);
}

/// Move the bytes of a sink or source connection of run `group` until the peer closes, the
/// run is stopped, or a time limit closes it; how the connection ended.
async fn raw_transfer(
    c: &mut TcpStream,
    source: bool,
    ticket: &Ticket,
    group: &RawRun,
    ctr: &Counter,
) -> (RunStatus, Option<String>) {
    let block = if source {
        http::payload_block()
    } else {
        Arc::from(Vec::new())
    };
    let mut rbuf = vec![0u8; 256 * 1024];
    let (mut rd, mut wr) = c.split();
    let mut peer_eof = false;
    let mut off = 0usize;
    let mut last_progress = Instant::now();
    let started = Instant::now();
    let mut got_any = false;
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let mut window = SlowWindow::new();
    loop {
        tokio::select! {
            r = rd.read(&mut rbuf), if !peer_eof => match r {
                Ok(0) => {
                    if !source { break (RunStatus::Completed, None); }
                    // A source peer may half-close and keep reading.
                    peer_eof = true;
                }
                Ok(n) => {
                    if !source {
                        ctr.add(n as u64);
                        window.moved(n);
                        last_progress = Instant::now();
                        if !got_any {
                            got_any = true;
                            ticket.set_pending(false);
                        }
                    }
                }
                // A reset by the peer ends a raw stream normally (Ctrl-C on `nc`).
                Err(_) => break (RunStatus::Completed, None),
            },
            r = wr.write(&block[off..]), if source => match r {
                Ok(n) => {
                    ctr.add(n as u64);
                    window.moved(n);
                    off = (off + n) % block.len();
                    last_progress = Instant::now();
                }
                // The peer closing (EPIPE, ECONNRESET) is how a source run ends.
                Err(_) => break (RunStatus::Completed, None),
            },
            _ = ticket.evicted() => break (RunStatus::Aborted, Some(
                "idle while the service was full: closed for another client".into())),
            _ = check.tick() => {
                if group.stopped.load(Ordering::Relaxed) {
                    break (RunStatus::Aborted, Some("stopped by the user".into()));
                }
                // Idle (evictable for another address): a sink that has sent nothing yet,
                // or any connection that moved no byte for IDLE_SECS.
                let idle = !source && !got_any
                    || last_progress.elapsed() >= Duration::from_secs(IDLE_SECS);
                ticket.set_pending(idle);
                if let Some(slow) = window.check() {
                    if slow && source {
                        break (RunStatus::Aborted, Some(format!(
                            "the peer read less than {} KiB in {SLOW_WINDOW_SECS} s (a slow reader); connection closed",
                            SLOW_WINDOW_BYTES >> 10
                        )));
                    }
                }
                if !source && !got_any && started.elapsed() >= Duration::from_secs(HEAD_TIMEOUT_SECS) {
                    break (RunStatus::Aborted, Some(format!(
                        "the peer sent nothing within {HEAD_TIMEOUT_SECS} s; connection closed"
                    )));
                }
                let limit = if source { STALL_SECS } else { SINK_IDLE_SECS };
                if last_progress.elapsed() >= Duration::from_secs(limit) {
                    break (RunStatus::Aborted, Some(if source {
                        format!("the peer took no data for {limit} s; connection closed")
                    } else {
                        format!("the peer sent no data for {limit} s; connection closed")
                    }));
                }
            }
            _ = group.stop_all.notified() => break (RunStatus::Aborted, Some("stopped by the user".into())),
        }
    }
}

/// The run of raw TCP connections (sink or source) that are one client's streams: the sink's
/// connections from one client address that overlap in time (`nc` run several times in
/// parallel) share it, with per-stream figures and their [SUM]; a source connection has its
/// own.
struct RawRun {
    meter: Arc<Meter>,
    run: ServedRun,
    /// The run page's Stop button (notify_one); the ticker turns it into `stopped` and wakes
    /// every connection through `stop_all`.
    cancel: Arc<Notify>,
    stopped: std::sync::atomic::AtomicBool,
    stop_all: Notify,
    /// Connections open; the run ends when the last one closes (changed under the groups
    /// lock for the sink).
    members: std::sync::atomic::AtomicUsize,
    /// How each connection ended.
    ends: Mutex<Vec<(RunStatus, Option<String>)>>,
    /// Ended: the ticker stops.
    done: Notify,
    kind: crate::model::RunKind,
    port: u16,
    source: bool,
}

/// The sink's open runs by client address.
type RawGroups = Mutex<HashMap<IpAddr, Arc<RawRun>>>;

/// Join the client's open sink run (when `groups` is given and one is open), or begin a run;
/// returns it and this connection's counter. None when the store cannot record it (logged).
fn join_raw(
    ctx: &RunContext,
    groups: Option<&RawGroups>,
    run: &NewRun,
    peer: SocketAddr,
    fd: i32,
) -> Option<(Arc<RawRun>, Arc<crate::engine::meter::Counter>)> {
    let mut map = groups.map(|g| g.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some(g) = map.as_mut().and_then(|m| m.get(&peer.ip()).cloned()) {
        g.members.fetch_add(1, Ordering::Relaxed);
        let ctr = g.meter.add_stream(fd);
        return Some((g, ctr));
    }
    let cancel = Arc::new(Notify::new());
    let served = match ctx.start_served(run, Sampling::Ports(Vec::new()), Some(cancel.clone())) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("cannot record a {} connection: {e}", run.kind);
            return None;
        }
    };
    let g = Arc::new(RawRun {
        meter: Meter::new(run.kind.is_tcp_source()),
        run: served,
        cancel,
        stopped: std::sync::atomic::AtomicBool::new(false),
        stop_all: Notify::new(),
        members: std::sync::atomic::AtomicUsize::new(1),
        ends: Mutex::new(Vec::new()),
        done: Notify::new(),
        kind: run.kind,
        port: run.local_port,
        source: run.kind.is_tcp_source(),
    });
    let ctr = g.meter.add_stream(fd);
    if let Some(m) = map.as_mut() {
        m.insert(peer.ip(), g.clone());
    }
    drop(map);
    let t = g.clone();
    crate::engine::task::spawn(async move {
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Some(iv) = t.meter.cut(0.0) {
                        t.run.recorder().interval(iv);
                    }
                }
                _ = t.cancel.notified() => {
                    t.stopped.store(true, Ordering::Relaxed);
                    t.stop_all.notify_waiters();
                }
                _ = t.done.notified() => break,
            }
        }
    });
    Some((g, ctr))
}

/// A connection of `g` ended with `end`: when it was the last, end the run (figures, per
/// stream and [SUM] with several streams; no run kept for a sink connection that brought no
/// byte).
async fn leave_raw(
    ctx: &RunContext,
    groups: Option<&RawGroups>,
    g: &Arc<RawRun>,
    peer: SocketAddr,
    end: (RunStatus, Option<String>),
) {
    g.ends.lock().unwrap_or_else(|p| p.into_inner()).push(end);
    {
        let mut map = groups.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        if g.members.fetch_sub(1, Ordering::Relaxed) > 1 {
            return;
        }
        if let Some(m) = map.as_mut() {
            if m.get(&peer.ip()).is_some_and(|x| Arc::ptr_eq(x, g)) {
                m.remove(&peer.ip());
            }
        }
    }
    g.done.notify_one();
    let (kind, port, source) = (g.kind, g.port, g.source);
    if let Some(iv) = g.meter.cut(0.01) {
        g.run.recorder().interval(iv);
    }
    let (bytes, per) = g.meter.totals();
    let seconds = per.iter().map(|p| p.seconds).fold(0.0, f64::max);
    let rate = bps(bytes, seconds);
    let ends = g.ends.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (status, error) = if g.stopped.load(Ordering::Relaxed) {
        (RunStatus::Aborted, Some("stopped by the user".to_string()))
    } else if ends.iter().any(|e| e.0 == RunStatus::Completed) {
        (RunStatus::Completed, None)
    } else {
        ends.first()
            .cloned()
            .unwrap_or((RunStatus::Completed, None))
    };
    let summary = raw_summary(port, source, (bytes, per), seconds).to_value();
    let fig = if source {
        RunFigures {
            sender_bps: Some(rate),
            bytes: Some(bytes as i64),
            ..Default::default()
        }
    } else {
        RunFigures {
            receiver_bps: Some(rate),
            bytes: Some(bytes as i64),
            ..Default::default()
        }
    };
    let probe = !source && bytes == 0 && matches!(status, RunStatus::Completed);
    g.run
        .end_and_wait(Ended {
            status,
            measured: Measured::Figures(fig),
            summary: Some(summary),
            error,
        })
        .await;
    if probe {
        // Connected and closed without sending a byte (a port probe, a health check): no
        // run with a meaningless bitrate is kept.
        let id = g.run.recorder().id();
        if let Err(e) = ctx.store().delete_run(id) {
            tracing::warn!("cannot drop the empty {kind} run {id}: {e}");
        } else {
            crate::peer_info!(peer.ip(), %peer, port, "{kind} connection closed without data; no run kept");
        }
    }
}

/// The stored summary of a sink (`source` false) or source run on `port`: `bytes` over its
/// streams `per`, the longest stream's `seconds`.
fn raw_summary(
    port: u16,
    source: bool,
    (bytes, per): (u64, Vec<ConnTotals>),
    seconds: f64,
) -> TcpRawSummary {
    let rate = bps(bytes, seconds);
    let note = if source {
        "bytes the board wrote to the socket; the peer may have read fewer (in flight when it closed)"
    } else {
        "bytes the board read from the socket"
    };
    // Several streams at once (`nc` run in parallel): each, and their sum over the run's
    // span (seed 003 reports the sum).
    let several = per.len() > 1;
    TcpRawSummary {
        port,
        bytes: Some(bytes),
        seconds: Some(seconds),
        bits_per_second: Some(rate),
        note: Some(note.into()),
        streams: several.then_some(per.len() as u64),
        sum: several.then_some(StreamSum {
            streams: per.len() as u64,
            bytes,
            seconds,
            bits_per_second: rate,
        }),
        per_connection: if several { per } else { Vec::new() },
    }
}

/// Bytes moved per [`SLOW_WINDOW_SECS`] window, to tell slow or idle connections.
struct SlowWindow {
    start: Instant,
    bytes: u64,
}

impl SlowWindow {
    fn new() -> SlowWindow {
        SlowWindow {
            start: Instant::now(),
            bytes: 0,
        }
    }

    fn moved(&mut self, n: usize) {
        self.bytes += n as u64;
    }

    /// At the end of a window: whether it moved less than [`SLOW_WINDOW_BYTES`] (a new
    /// window starts); `None` inside a window.
    fn check(&mut self) -> Option<bool> {
        self.check_at(Instant::now())
    }

    /// [`SlowWindow::check`] at `now`. Windows follow each other without drift (the next
    /// starts where the last ended, not when it was checked), so a peer that stops reading is
    /// closed two windows after it started, plus one check tick, however late the checks
    /// come; after a stall longer than a window the next window starts at `now`.
    fn check_at(&mut self, now: Instant) -> Option<bool> {
        let window = Duration::from_secs(SLOW_WINDOW_SECS);
        let elapsed = now.saturating_duration_since(self.start);
        if elapsed < window {
            return None;
        }
        let slow = self.bytes < SLOW_WINDOW_BYTES;
        self.bytes = 0;
        self.start = if elapsed < 2 * window {
            self.start + window
        } else {
            now
        };
        Some(slow)
    }
}

/// Serve a sink or source connection that is not recorded as a run of its own (see
/// `crate::runs::anon`), with the same time limits; returns the bytes moved.
async fn raw_folded(mut c: TcpStream, source: bool, ticket: &Ticket) -> u64 {
    keepalive(&c);
    let block = http::payload_block();
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    let mut off = 0usize;
    let mut window = SlowWindow::new();
    let mut last_progress = Instant::now();
    loop {
        let limit = match (source, bytes) {
            (true, _) => STALL_SECS,
            (false, 0) => HEAD_TIMEOUT_SECS,
            (false, _) => SINK_IDLE_SECS,
        };
        // Reads and writes of a tokio TcpStream are cancel-safe: the 1 s tick loses nothing.
        let io = async {
            if source {
                c.write(&block[off..]).await
            } else {
                c.read(&mut buf).await
            }
        };
        let r = tokio::select! {
            r = io => Some(r),
            _ = ticket.evicted() => return bytes,
            _ = tokio::time::sleep(Duration::from_secs(1)) => None,
        };
        match r {
            Some(Ok(n)) if n > 0 => {
                bytes += n as u64;
                window.moved(n);
                last_progress = Instant::now();
                if source {
                    off = (off + n) % block.len();
                }
            }
            Some(_) => return bytes,
            None => {}
        }
        let idle = last_progress.elapsed();
        if idle >= Duration::from_secs(limit) {
            return bytes;
        }
        ticket.set_pending((!source && bytes == 0) || idle >= Duration::from_secs(IDLE_SECS));
        if window.check() == Some(true) && source {
            return bytes;
        }
    }
}

// ---------------------------------------------------------------- downloads by the board

/// Record and start a download by the board; returns the run id and a handle that resolves
/// when it has ended.
pub(crate) fn start_http_get(ctx: &RunContext, spec: GetSpec) -> Result<Started, String> {
    let u = spec.validate()?;
    let cancel = Arc::new(Notify::new());
    let run = NewRun {
        role: RunRole::Client,
        protocol: RunProtocol::Http,
        peer_host: u.host.clone(),
        peer_port: u.port,
        bind_dev: spec.bind_dev.clone(),
        direction: RunDirection::Receive,
        params: HttpGetParams {
            url: spec.url.clone(),
            connections: spec.connections,
            timeout: spec.timeout_secs,
        }
        .to_value(),
        kind: crate::model::RunKind::HttpGet,
        ..Default::default()
    };
    let sampling = Sampling::Ports(Vec::new());
    ctx.start(
        &run,
        sampling,
        Some(cancel.clone()),
        move |_, recorder| async move {
            let (etx, mut erx) = mpsc::unbounded_channel();
            let r2 = recorder.clone();
            let forward = crate::engine::task::spawn(async move {
                while let Some(ev) = erx.recv().await {
                    match ev {
                        GetEvent::Started { local, .. } => {
                            r2.endpoints(&net::ip_text(local.ip()), local.port())
                        }
                        GetEvent::Interval(i) => r2.interval(i),
                    }
                }
            });
            let res = http::get(spec, Some(etx), Some(cancel)).await;
            let _ = forward.await;
            let fig = |r: &http::GetResult| RunFigures {
                receiver_bps: Some(r.bits_per_second),
                bytes: Some(r.bytes as i64),
                ..Default::default()
            };
            match res {
                Ok(r) => Ended {
                    status: RunStatus::Completed,
                    measured: Measured::Figures(fig(&r)),
                    summary: Some(HttpGetSummary::from(&r).to_value()),
                    error: None,
                },
                Err(e) => {
                    let (f, s) = match &e.partial {
                        Some(p) => (fig(p), Some(HttpGetSummary::from(p).to_value())),
                        None => (RunFigures::default(), None),
                    };
                    Ended {
                        status: if e.aborted {
                            RunStatus::Aborted
                        } else {
                            RunStatus::Failed
                        },
                        measured: Measured::Figures(f),
                        summary: s,
                        error: Some(e.message),
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full run where axel dropped one range (connection 9: 99,908,608 of 100,000,000
    /// bytes from 800,000,000) and fetched its tail anew in five small requests (2,212,700
    /// bytes from 897,787,300), besides nine whole ranges and its dropped size probe: the
    /// run counted 902,212,700 bytes of a 1 GB payload. The cut range's head adds what no
    /// complete request served again: 97,787,300, for 1,000,000,000 in all.
    #[test]
    fn a_range_dropped_and_fetched_again_counts_once() {
        let mut done: Vec<(u64, u64)> = (0..10u64)
            .filter(|i| *i != 8)
            .map(|i| (i * 100_000_000, (i + 1) * 100_000_000))
            .collect();
        let tail = 897_787_300u64;
        for (a, b) in [
            (tail, tail + 1_003_856),
            (tail + 1_003_856, tail + 1_423_864),
            (tail + 1_423_864, tail + 1_866_912),
            (tail + 1_866_912, tail + 2_103_668),
            (tail + 2_103_668, 900_000_000),
        ] {
            done.push((a, b));
        }
        let delivered: u64 = done.iter().map(|(a, b)| b - a).sum();
        assert_eq!(delivered, 902_212_700);
        // The probe (whole payload asked, nothing written) and the dropped range.
        let cut = [(0, 0), (800_000_000, 899_908_608)];
        let extra = cut_bytes_not_served_again(&cut, &done);
        assert_eq!(extra, 97_787_300);
        assert_eq!(delivered + extra, 1_000_000_000);
        // A probe dropped after 4 MB: covered by the first range, adds nothing.
        assert_eq!(cut_bytes_not_served_again(&[(0, 4_000_000)], &done), 0);
        // Two cut requests over the same bytes count them once; nothing done: all of it.
        assert_eq!(cut_bytes_not_served_again(&[(10, 20), (15, 30)], &[]), 20);
    }

    /// A peer that stops reading after the first window is closed at the end of the second,
    /// even when every check comes 0.9 s late (the checks drifted the windows before: 10.9 s,
    /// then 21.8 s, past a deadline a test gave the closing).
    #[test]
    fn slow_windows_do_not_drift_with_late_checks() {
        let t0 = Instant::now();
        let mut w = SlowWindow {
            start: t0,
            bytes: 0,
        };
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        w.moved(3 << 20);
        assert_eq!(w.check_at(at(9_900)), None);
        assert_eq!(w.check_at(at(10_900)), Some(false));
        assert_eq!(
            w.start,
            at(10_000),
            "the next window starts where the first ended"
        );
        assert_eq!(w.check_at(at(19_900)), None);
        assert_eq!(w.check_at(at(20_900)), Some(true), "closed 20.9 s on");
        // 64 KiB is enough; one byte less is slow.
        w.moved(64 * 1024);
        assert_eq!(w.check_at(at(30_100)), Some(false));
        w.moved(64 * 1024 - 1);
        assert_eq!(w.check_at(at(40_100)), Some(true));
        // After a stall longer than a window, the next window starts at the check.
        assert_eq!(w.check_at(at(65_000)), Some(true));
        assert_eq!(w.start, at(65_000));
    }

    /// `n` connections' figures as the meter gives them (odd bytes, fractional seconds).
    fn conns(n: u32) -> Vec<ConnTotals> {
        (1..=n)
            .map(|id| {
                let (bytes, seconds) = (25_000_017 * u64::from(id), 0.731_5 * f64::from(id));
                ConnTotals {
                    id,
                    bytes,
                    seconds,
                    bits_per_second: bps(bytes, seconds),
                }
            })
            .collect()
    }

    fn text(v: &serde_json::Value) -> String {
        serde_json::to_string(v).unwrap()
    }

    /// Issue 40 item 1: the typed writers write the bytes the `json!` writers before them
    /// wrote (those kept here as they were), for a payload run and a folded one, a sink and
    /// a source with one and three streams, a download that worked and its params.
    #[test]
    fn typed_writers_write_what_the_json_writers_wrote() {
        use serde_json::json;
        let folded = json!({"path": "(several)", "folded": true,
            "note": format!("requests beyond {} runs a minute from this peer, counted together", crate::runs::anon::RUNS_PER_MINUTE)});
        assert_eq!(
            text(&payload_params("/x", FOLDED_SIZE).to_value()),
            text(&folded)
        );
        let one = json!({"path": "/payload/1G", "size": 1_000_000_000u64});
        let p = payload_params("/payload/1G", 1_000_000_000).to_value();
        assert_eq!(text(&p), text(&one));
        for (size, ua) in [(1_000_000_000, "axel/2.17.11 (Linux)"), (FOLDED_SIZE, "")] {
            let g = Group {
                meter: Meter::new(true),
                run: None,
                cancel: Arc::new(Notify::new()),
                stopped: std::sync::atomic::AtomicBool::new(false),
                path: "/payload/1G".into(),
                size,
                user_agent: ua.into(),
                counts: Mutex::new(GroupCounts::default()),
            };
            let n = GroupCounts {
                requests: 9,
                asked: 1_000_000_000,
                cut: 2,
                peak: 4,
                ..Default::default()
            };
            let (per, bytes, counted, seconds) = (conns(5), 1_003_000_101u64, 999_999_999, 8.25);
            let goodput = bps(counted, seconds);
            let old = json!({
                "path": g.path,
                "size": g.size,
                "connections": n.peak,
                "tcp_connections": per.len(),
                "requests": n.requests,
                "requests_cut_short": n.cut,
                "requested_bytes": n.asked,
                "bytes": counted,
                "bytes_sent": bytes,
                "seconds": seconds,
                "bits_per_second": goodput,
                "user_agent": g.user_agent,
                "per_connection": per,
            });
            let new = payload_summary(&g, &n, (bytes, per), counted, seconds).to_value();
            assert_eq!(text(&new), text(&old));
        }
        for (source, streams) in [(false, 1), (false, 3), (true, 1), (true, 2)] {
            let per = conns(streams);
            let bytes: u64 = per.iter().map(|p| p.bytes).sum();
            let seconds = per.iter().map(|p| p.seconds).fold(0.0, f64::max);
            let new = raw_summary(5009, source, (bytes, per.clone()), seconds).to_value();
            assert_eq!(
                text(&new),
                text(&old_raw_summary(5009, source, bytes, &per, seconds))
            );
        }
        let port = 5019u16;
        let raw = TcpRawParams {
            port,
            folded_connections: Some(0),
        };
        assert_eq!(
            text(&raw.to_value()),
            text(&json!({"port": port, "folded_connections": 0}))
        );
        let got = http::GetResult {
            url: "http://192.0.2.7:8099/f.bin".into(),
            peer: "192.0.2.7:8099".into(),
            local: "192.0.2.1:40112".into(),
            size: 5_000_000,
            ranges: false,
            connections: 1,
            bytes: 5_000_000,
            seconds: 0.043_2,
            bits_per_second: bps(5_000_000, 0.043_2),
            per_connection: conns(1),
            ranges_asked: vec![(0, 4_999_999)],
        };
        let new = HttpGetSummary::from(&got).to_value();
        assert_eq!(text(&new), text(&serde_json::to_value(&got).unwrap()));
        let spec = GetSpec {
            url: got.url.clone(),
            connections: 4,
            timeout_secs: 600,
            bind_dev: None,
        };
        let old =
            json!({"url": spec.url, "connections": spec.connections, "timeout": spec.timeout_secs});
        let new = HttpGetParams {
            url: spec.url.clone(),
            connections: spec.connections,
            timeout: spec.timeout_secs,
        };
        assert_eq!(text(&new.to_value()), text(&old));
    }

    /// The sink / source summary as `leave_raw` wrote it with `json!` before [`raw_summary`].
    fn old_raw_summary(
        port: u16,
        source: bool,
        bytes: u64,
        per: &[ConnTotals],
        seconds: f64,
    ) -> serde_json::Value {
        use serde_json::json;
        let rate = bps(bytes, seconds);
        let mut summary = json!({
            "port": port,
            "bytes": bytes,
            "seconds": seconds,
            "bits_per_second": rate,
            "note": if source { "bytes the board wrote to the socket; the peer may have read fewer (in flight when it closed)" } else { "bytes the board read from the socket" },
        });
        if per.len() > 1 {
            summary["streams"] = json!(per.len());
            summary["per_connection"] = json!(per);
            summary["sum"] = json!({
                "streams": per.len(),
                "bytes": bytes,
                "seconds": seconds,
                "bits_per_second": rate,
            });
        }
        summary
    }
}
