//! iperf3 server: accepts stock `iperf3 -c` clients (and ours) on one or more ports, several
//! tests at once. Every new connection first sends a 37-byte cookie; a cookie that belongs to
//! a session waiting for its streams makes the connection a data stream of that session,
//! anything else starts a new control session. A session whose client misbehaves or vanishes
//! ends alone, with a logged reason; the listener keeps serving.

use super::control::{ControlError, ServerControl, ServerStep};
use super::drain::{Drain, Interrupted};
use super::framing;
use super::wire::{self, ierr, Params, Protocol, Results, State, COOKIE_SIZE};
use crate::engine::admission::{Admission, Limits, Ticket};
use crate::engine::net;
use crate::engine::report::{self, IntervalRecord, Report, Role};
use crate::engine::session::{
    count_trailing_loss, describe_streams, merge_remote, report_phase, results_with_trailing_loss,
    DataPhase, DataStream,
};
use crate::engine::stats::{CpuMark, CpuUtil};
use crate::model::RunStatus;
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// TCP ports to listen on (`-p`, repeatable), default [5201].
    pub ports: Vec<u16>,
    /// Address to bind (`-B`); default: all addresses, IPv4 and IPv6.
    pub bind: Option<IpAddr>,
    /// Interface to listen on only (`--bind-dev DEV` or `-B addr%DEV`): SO_BINDTODEVICE on
    /// the TCP and UDP listeners. A device that does not exist is an error ("No such device").
    pub bind_dev: Option<String>,
    /// Reporting interval in seconds (`-i`).
    pub interval: f64,
    /// Exit after one test (`-1`).
    pub one_off: bool,
    /// The server's own output is JSON (`-J`): `--get-server-output` then returns JSON.
    pub json: bool,
    /// Time a new connection has to send its 37-byte cookie.
    pub cookie_timeout: Duration,
    /// Time a new session has, from its cookie, to finish the parameter exchange and open
    /// every stream it announced; past it the session is closed and its slot freed.
    pub setup_timeout: Duration,
    /// A running test with no bytes moved for this long is aborted (peer vanished).
    pub stall_timeout: Duration,
    /// Reads this host's drop counters around each test; what moved goes into the results
    /// sent to the client (key `netperfd_drops`). `None`: nothing is read or added.
    pub drops: Option<DropCounters>,
    /// How this server's own UDP senders (a client's `-R` / `--bidir`) are paced
    /// (`--udp-pacing`; local to each end, never on the wire).
    pub udp_pacing: crate::engine::pacer::PacingMode,
}

/// What [`DropCounters`] is given when a test starts: the control connection's local
/// address and this side's direction word (`send`, `receive`, `bidir`).
pub(crate) type DropsBegin = dyn Fn(IpAddr, &'static str) -> DropsEnd + Send + Sync;

/// The second half of a [`DropCounters`] hook: reads the counters again and gives what moved,
/// given the test's own datagrams ([`TestFlow`], so a qdisc's skb drops can be turned into
/// datagrams).
pub(crate) type DropsEnd = Box<dyn FnOnce(TestFlow) -> Option<serde_json::Value> + Send>;

/// A test's own datagrams as one side saw them, for its drop counters (see [`DropsEnd`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestFlow {
    /// UDP payload bytes of one datagram (the test's `-l`); 0 for a TCP test.
    pub payload: u64,
    /// The control connection is IPv6 (an IPv4-mapped address is IPv4 on the wire).
    pub ipv6: bool,
    /// Datagrams this side's own streams sent (omitted seconds included); `None` when it
    /// sent none.
    pub sent: Option<u64>,
    /// Datagrams this side's own receiving streams got (each once: expected − lost);
    /// `None` when it received none.
    pub received: Option<u64>,
    /// Datagrams this side's own streams had refused by this host (its queue full, see
    /// [`crate::engine::report::UdpSummary::sender_dropped_locally`]); `None` when it sent
    /// none.
    pub dropped_locally: Option<u64>,
}

impl TestFlow {
    /// The flow of `report` (this side's: its local streams' own sender counts).
    pub fn of(report: &crate::engine::report::Report) -> TestFlow {
        use crate::engine::params::Protocol;
        if report.params.protocol != Protocol::Udp {
            return TestFlow::default();
        }
        let sent = report
            .streams
            .iter()
            .filter(|s| s.local_sender)
            .filter_map(|s| s.udp.as_ref())
            .filter_map(|u| u.sent_packets.map(|n| n.saturating_add(u.omitted_packets)))
            .reduce(u64::saturating_add);
        let received = report
            .streams
            .iter()
            .filter(|s| !s.local_sender)
            .filter_map(|s| s.udp.as_ref())
            .filter(|u| u.expected.is_some())
            .map(|u| {
                let (lost, total) = u.loss();
                total.saturating_sub(lost)
            })
            .reduce(u64::saturating_add);
        let ipv6 = match report.local_host.parse::<IpAddr>() {
            Ok(IpAddr::V6(a)) => a.to_ipv4_mapped().is_none(),
            _ => false,
        };
        let dropped_locally = report
            .streams
            .iter()
            .filter(|s| s.local_sender)
            .filter_map(|s| s.udp.as_ref()?.sender_dropped_locally)
            .reduce(u64::saturating_add);
        TestFlow {
            payload: u64::from(report.params.len),
            ipv6,
            sent,
            received,
            dropped_locally,
        }
    }
}

/// A hook the server calls at TEST_START (with the test's local address and direction); the
/// function it returns is called before the results are sent and gives the drop counters
/// that moved (a JSON list, see [`wire::Results::netperfd_drops`]) or `None`. Both read
/// the host's counters (a few ms of blocking reads).
#[derive(Clone)]
pub struct DropCounters(pub Arc<DropsBegin>);

impl DropCounters {
    /// Take the first reading for a test whose control connection has local address
    /// `local`, on tokio's blocking pool (the reads block for a few ms); `direction` is this
    /// side's word. `None` if the reading task failed.
    pub async fn begin(&self, local: IpAddr, direction: &'static str) -> Option<DropsEnd> {
        let f = self.0.clone();
        crate::engine::task::spawn_blocking(move || f(local, direction))
            .await
            .ok()
    }
}

/// Finish a [`DropCounters::begin`] reading on the blocking pool: the counters that moved
/// over a test of `flow`.
pub(crate) async fn drops_at_end(
    end: Option<DropsEnd>,
    flow: TestFlow,
) -> Option<serde_json::Value> {
    let end = end?;
    crate::engine::task::spawn_blocking(move || end(flow))
        .await
        .ok()
        .flatten()
}

impl std::fmt::Debug for DropCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DropCounters")
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            ports: vec![wire::DEFAULT_PORT],
            bind: None,
            bind_dev: None,
            interval: 1.0,
            one_off: false,
            json: false,
            cookie_timeout: Duration::from_secs(10),
            setup_timeout: SETUP_TIMEOUT,
            stall_timeout: Duration::from_secs(10),
            drops: None,
            udp_pacing: Default::default(),
        }
    }
}

/// What the server reports about its sessions.
#[derive(Debug, Clone)]
pub(crate) enum ServerEvent {
    /// Streams are up; the test starts now.
    Started { session: u64, report: Box<Report> },
    /// One interval of a running test.
    Interval {
        session: u64,
        record: IntervalRecord,
    },
    /// The test ended (completed, failed or aborted), with what was measured.
    Finished {
        session: u64,
        report: Box<Report>,
        status: RunStatus,
    },
}

/// Sessions waiting for their data streams, by cookie. Streams carry their accept sequence
/// number: cookies are read concurrently, so they may finish out of order, but roles are
/// assigned in accept order (the client connects its streams one after another).
type Pending = Mutex<HashMap<[u8; COOKIE_SIZE], mpsc::Sender<(u64, TcpStream)>>>;

/// A UDP session waiting for its streams' hellos.
struct UdpPending {
    session: u64,
    /// Local port of the session's control connection (= the UDP port the hellos come to).
    port: u16,
    /// Client address of the control connection.
    peer: IpAddr,
    tx: mpsc::Sender<std::net::UdpSocket>,
}

/// Most control sessions (tests) one server runs at once; the next client gets
/// ACCESS_DENIED ("the server is busy running a test"), as from a busy stock server — but only
/// after the fair admission of [`admission_limits`] found no pending session to evict.
/// Each session holds at most ~1 MiB of control-message buffers ([`wire::MAX_CLIENT_RESULTS_JSON`])
/// and one send block (≤ 1 MiB, shared by its streams).
pub(crate) const MAX_SESSIONS: usize = 8;

/// Sessions one client address may hold at once (running or not): 6 of the 8, so two slots
/// always remain for other addresses.
pub(crate) const MAX_SESSIONS_PER_SOURCE: usize = 6;

/// Sessions one client address may hold while *pending* (cookie sent, parameter exchange or
/// stream set-up not finished).
pub(crate) const MAX_PENDING_PER_SOURCE: usize = 4;

/// Connections one server keeps while they send their 37-byte cookie (each a file
/// descriptor for up to [`ServerConfig::cookie_timeout`]).
pub(crate) const MAX_GREETINGS: usize = 1024;

/// Of [`MAX_GREETINGS`], what one client address may hold: a `-P 128` client opens 129
/// connections at once, twice that leaves room for a second test.
pub(crate) const MAX_GREETINGS_PER_SOURCE: usize = 256;

/// Default [`ServerConfig::setup_timeout`]: 5 s from the cookie to the last announced stream
/// (a stock client on a LAN needs a few ms).
pub(crate) const SETUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The admission caps of the iperf3 server: [`MAX_SESSIONS`] slots, [`MAX_SESSIONS_PER_SOURCE`]
/// and [`MAX_PENDING_PER_SOURCE`] per address; an address at its pending cap replaces its own
/// oldest pending session once that is 1 s old. Running tests are shared fairly
/// ([`Limits::fair_share`]): while another address asks, an address that holds two or more
/// tests more than it would gives up its newest running test (its client is told
/// SERVER_TERMINATE), so 8 slots and 2 addresses settle at 4 + 4, 3 addresses at 3 + 3 + 2.
pub(crate) fn admission_limits() -> Limits {
    Limits {
        max: MAX_SESSIONS,
        per_source: MAX_SESSIONS_PER_SOURCE,
        pending_per_source: MAX_PENDING_PER_SOURCE,
        replace_own_after: Duration::from_secs(1),
        fair_share: true,
    }
}

/// Receive-buffer memory all running tests of one server may hold together, bytes (64 MiB):
/// a TCP stream costs [`crate::engine::tcp::MAX_RECV_BUF`] (128 KiB), a UDP stream
/// [`UDP_STREAM_COST`]. A test that would exceed it is refused like a busy server. With
/// [`MAX_SESSIONS`] this keeps the server's peak RSS under ~100 MB for any client input.
pub(crate) const STREAM_BUDGET: u64 = 64 * 1024 * 1024;

/// Receive-buffer bytes one UDP stream may hold (GRO batch of 16 × 64 KiB).
pub(crate) const UDP_STREAM_COST: u64 = 1024 * 1024;

/// Bytes of [`STREAM_BUDGET`] a test with these params reserves.
pub(crate) fn stream_cost(params: &Params) -> u64 {
    let per = if params.protocol == Protocol::Udp {
        UDP_STREAM_COST
    } else {
        crate::engine::tcp::MAX_RECV_BUF as u64
    };
    params.total_streams() as u64 * per
}

/// Returns what it reserved from a counter when dropped.
struct Reserved {
    counter: Arc<AtomicU64>,
    amount: u64,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.amount, Ordering::Relaxed);
    }
}

/// Reserve `amount` from `counter` if the total stays within `max`.
fn reserve(counter: &Arc<AtomicU64>, amount: u64, max: u64) -> Option<Reserved> {
    let mut cur = counter.load(Ordering::Relaxed);
    loop {
        if cur.saturating_add(amount) > max {
            return None;
        }
        match counter.compare_exchange_weak(cur, cur + amount, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => {
                return Some(Reserved {
                    counter: counter.clone(),
                    amount,
                })
            }
            Err(now) => cur = now,
        }
    }
}

struct Inner {
    cfg: ServerConfig,
    /// Control sessions admitted now (≤ [`MAX_SESSIONS`]), pending or running.
    admission: Admission,
    /// Connections reading their cookie ([`MAX_GREETINGS`], [`MAX_GREETINGS_PER_SOURCE`]).
    greetings: Admission,
    /// Becomes true when the server stops: every session ends at once with "the server has
    /// terminated".
    stopping: watch::Sender<bool>,
    /// Receive-buffer bytes reserved by running tests (≤ [`STREAM_BUDGET`]).
    budget: Arc<AtomicU64>,
    /// A duplicate of each running session's control connection, by session: on shutdown
    /// each gets SERVER_TERMINATE, as from a stock server stopped by a signal.
    controls: Mutex<HashMap<u64, std::net::TcpStream>>,
    pending: Pending,
    udp_pending: Mutex<Vec<UdpPending>>,
    /// Datagrams that reached a hello listener but belong to no pending session.
    stray: AtomicU64,
    next: AtomicU64,
    events: Option<mpsc::UnboundedSender<ServerEvent>>,
    done: Notify,
}

/// Bind a listening socket: `bind` or the IPv6 any-address in dual-stack mode (falling back
/// to IPv4 when the host has no IPv6).
pub(crate) fn bind_listener(bind: Option<IpAddr>, port: u16) -> std::io::Result<TcpListener> {
    bind_listener_dev(bind, None, port)
}

/// Like [`bind_listener`], listening only on interface `dev` when given (SO_BINDTODEVICE;
/// errors with ENODEV, "No such device", when it does not exist).
pub(crate) fn bind_listener_dev(
    bind: Option<IpAddr>,
    dev: Option<&str>,
    port: u16,
) -> std::io::Result<TcpListener> {
    let mk = |addr: SocketAddr, dual: bool| -> std::io::Result<std::net::TcpListener> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        if let Some(d) = dev {
            net::bind_device(&s, d)?;
        }
        if dual {
            s.set_only_v6(false)?;
        }
        s.bind(&addr.into())?;
        s.listen(128)?;
        s.set_nonblocking(true)?;
        Ok(s.into())
    };
    let l = match bind {
        Some(ip) => mk(SocketAddr::new(ip, port), false)?,
        None => match mk(
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            true,
        ) {
            Ok(l) => l,
            Err(e) if dev.is_some() && e.raw_os_error() == Some(libc::ENODEV) => return Err(e),
            Err(_) => mk(SocketAddr::new(IpAddr::from([0u8, 0, 0, 0]), port), false)?,
        },
    };
    TcpListener::from_std(l)
}

/// Serve until `shutdown` is notified (or after one test with `one_off`). Errors only when a
/// listener cannot be bound.
pub(crate) async fn serve(
    cfg: ServerConfig,
    events: Option<mpsc::UnboundedSender<ServerEvent>>,
    shutdown: Option<Arc<Notify>>,
) -> std::io::Result<()> {
    let mut listeners = Vec::new();
    for &port in &cfg.ports {
        let l = bind_listener_dev(cfg.bind, cfg.bind_dev.as_deref(), port).map_err(|e| {
            std::io::Error::new(e.kind(), format!("unable to listen on port {port}: {e}"))
        })?;
        listeners.push(l);
    }
    serve_listeners(listeners, cfg, events, shutdown).await
}

/// Like [`serve`], on listeners bound by the caller.
pub(crate) async fn serve_listeners(
    listeners: Vec<TcpListener>,
    cfg: ServerConfig,
    events: Option<mpsc::UnboundedSender<ServerEvent>>,
    shutdown: Option<Arc<Notify>>,
) -> std::io::Result<()> {
    let mut udp_listeners = Vec::new();
    for l in &listeners {
        let addr = l.local_addr()?;
        let u = bind_udp(addr, None, cfg.bind_dev.as_deref()).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("unable to listen for UDP on port {}: {e}", addr.port()),
            )
        })?;
        udp_listeners.push(u);
    }
    let inner = Arc::new(Inner {
        cfg,
        admission: Admission::new(admission_limits()),
        greetings: Admission::new(Limits {
            max: MAX_GREETINGS,
            per_source: MAX_GREETINGS_PER_SOURCE,
            pending_per_source: MAX_GREETINGS_PER_SOURCE,
            replace_own_after: Duration::from_secs(1),
            fair_share: false,
        }),
        stopping: watch::channel(false).0,
        budget: Arc::new(AtomicU64::new(0)),
        controls: Mutex::new(HashMap::new()),
        pending: Mutex::new(HashMap::new()),
        udp_pending: Mutex::new(Vec::new()),
        stray: AtomicU64::new(0),
        next: AtomicU64::new(1),
        events,
        done: Notify::new(),
    });
    let mut tasks = Vec::new();
    let accepted = Arc::new(AtomicU64::new(0));
    for l in listeners {
        let inner = inner.clone();
        let accepted = accepted.clone();
        tasks.push(crate::engine::task::spawn(async move {
            loop {
                match l.accept().await {
                    Ok((s, peer)) => {
                        let inner = inner.clone();
                        let seq = accepted.fetch_add(1, Ordering::Relaxed);
                        crate::engine::task::spawn(async move {
                            handle_conn(inner, s, peer, seq).await
                        });
                    }
                    Err(e) => {
                        crate::rate_warn!("iperf3-accept", "iperf3 server: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }));
    }
    for u in udp_listeners {
        let inner = inner.clone();
        tasks.push(crate::engine::task::spawn(async move {
            udp_hellos(inner, u).await
        }));
    }
    let never = Arc::new(Notify::new());
    let shutdown = shutdown.unwrap_or(never);
    tokio::select! {
        _ = shutdown.notified() => {}
        _ = inner.done.notified(), if inner.cfg.one_off => {}
    }
    for t in tasks {
        t.abort();
    }
    // Sessions see this first, so a client's answer to SERVER_TERMINATE is not taken for a
    // protocol error; then the clients are told.
    inner.stopping.send_replace(true);
    terminate_sessions(&inner).await;
    // Let every session end and report what it measured (≤ 2 s).
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    while !inner.admission.is_empty() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Why a running test was ended for another address (see [`admission_limits`]).
const PREEMPTED: &str = "another address needed its fair share of the server: an address holding two tests more than another that asks gives up its newest";

/// How long a stopping server waits between sending SERVER_TERMINATE and closing the
/// sessions: 200 ms.
const TERMINATE_GRACE: Duration = Duration::from_millis(200);

/// Send SERVER_TERMINATE on every running session's control connection, give the clients
/// [`TERMINATE_GRACE`] to read it, then shut the connections down: stock clients then report
/// "the server has terminated". (Closing at once raced with a client in the middle of a data
/// write, which then reported "unable to write to stream socket: Broken pipe" instead.)
async fn terminate_sessions(inner: &Inner) {
    let controls: Vec<(u64, std::net::TcpStream)> = match inner.controls.lock() {
        Ok(mut m) => m.drain().collect(),
        Err(_) => return,
    };
    for (id, c) in &controls {
        use std::io::Write;
        let _ = (&*c).write_all(&[State::ServerTerminate.byte()]);
        tracing::info!(session = id, "server shutting down: sent SERVER_TERMINATE");
    }
    if !controls.is_empty() {
        tokio::time::sleep(TERMINATE_GRACE).await;
    }
    for (_, c) in controls {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
}

/// The address without IPv4-mapping (::ffff:a.b.c.d → a.b.c.d).
fn canon(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// A UDP socket on `local` (SO_REUSEADDR, dual-stack for the IPv6 any-address), connected to
/// `peer` when given. Several such sockets share the port: the kernel hands each connected one
/// the datagrams of its peer, the unconnected listener the rest.
fn bind_udp(
    local: SocketAddr,
    peer: Option<SocketAddr>,
    dev: Option<&str>,
) -> std::io::Result<std::net::UdpSocket> {
    let s = Socket::new(
        Domain::for_address(local),
        Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    s.set_reuse_address(true)?;
    if let Some(d) = dev {
        net::bind_device(&s, d)?;
    }
    if local.is_ipv6() && local.ip().is_unspecified() {
        s.set_only_v6(false)?;
    }
    let _ = s.set_recv_buffer_size(4 * 1024 * 1024);
    let _ = s.set_send_buffer_size(1024 * 1024);
    s.bind(&local.into())?;
    if let Some(p) = peer {
        s.connect(&p.into())?;
    }
    Ok(s.into())
}

/// Whether a datagram looks like iperf 2 UDP data: id, timestamp, then an iperf 2 client
/// header at offset 16 (2.0.10+/2.1) or 12 (2.0.5).
fn looks_like_iperf2_datagram(d: &[u8]) -> bool {
    use crate::engine::iperf2::wire::{looks_like_iperf2, CLIENT_HEADER_LEN};
    [16usize, 12]
        .iter()
        .any(|&at| d.len() >= at + CLIENT_HEADER_LEN && looks_like_iperf2(&d[at..]))
}

/// Answer UDP hellos on one port: a 4-byte datagram from the address of a session waiting
/// for its UDP streams becomes that session's next stream (a socket connected to the sender,
/// which sends the reply). Anything else is counted as stray and dropped.
async fn udp_hellos(inner: Arc<Inner>, sock: std::net::UdpSocket) {
    let local = match sock.local_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    if sock.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(sock) = tokio::net::UdpSocket::from_std(sock) else {
        return;
    };
    let mut buf = vec![0u8; 65536];
    // iperf 2 UDP clients already named in the log (bounded: a flood logs at most 64).
    let mut named_iperf2: Vec<std::net::IpAddr> = Vec::new();
    loop {
        let (n, from) = match sock.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let target = if n == 4 {
            let g = inner.udp_pending.lock().ok();
            g.and_then(|g| {
                let same_port: Vec<&UdpPending> =
                    g.iter().filter(|p| p.port == local.port()).collect();
                same_port
                    .iter()
                    .find(|p| p.peer == canon(from.ip()))
                    .or_else(|| {
                        if same_port.len() == 1 {
                            same_port.first()
                        } else {
                            None
                        }
                    })
                    .map(|p| (p.session, p.tx.clone()))
            })
        } else {
            None
        };
        let Some((session, tx)) = target else {
            inner.stray.fetch_add(1, Ordering::Relaxed);
            if n > 4
                && !named_iperf2.contains(&from.ip())
                && named_iperf2.len() < 64
                && looks_like_iperf2_datagram(&buf[..n])
            {
                named_iperf2.push(from.ip());
                tracing::warn!(
                    %from,
                    port = local.port(),
                    "UDP datagrams from {from}: peer looks like iperf 2.x (an iperf 2 UDP client \
                     on the iperf3 port); use `--iperf2` / the iperf 2 server on port 5001"
                );
            }
            tracing::debug!(%from, bytes = n, "stray UDP datagram ignored");
            continue;
        };
        // Reply "6789", or "9876" to a big-endian 3.12–3.16 client that sent "6789".
        let reply = if buf[..4] == crate::engine::udp::REPLY {
            crate::engine::udp::HELLO
        } else {
            crate::engine::udp::REPLY
        };
        match bind_udp(local, Some(from), inner.cfg.bind_dev.as_deref()) {
            Ok(s) => {
                if let Err(e) = s.send(&reply) {
                    tracing::warn!(session, %from, "cannot answer the UDP hello: {e}");
                    continue;
                }
                let _ = tx.try_send(s);
            }
            Err(e) => tracing::warn!(session, %from, "cannot open the UDP stream socket: {e}"),
        }
    }
}

async fn handle_conn(inner: Arc<Inner>, mut s: TcpStream, peer: SocketAddr, seq: u64) {
    let _ = s.set_nodelay(true);
    // Connections still sending their cookie are capped too (file descriptors): per address,
    // and a new address evicts the oldest of the busiest one when all are taken.
    let Ok(greeting) = inner.greetings.admit(peer.ip()) else {
        crate::peer_warn!(peer.ip(), %peer, "closing connection: too many connections waiting for their cookie ({MAX_GREETINGS} at most, {MAX_GREETINGS_PER_SOURCE} per address)");
        return;
    };
    let mut cookie = [0u8; COOKIE_SIZE];
    let read = tokio::select! {
        r = framing::read_exact_timeout(&mut s, &mut cookie, inner.cfg.cookie_timeout, "the cookie") => r.map_err(|e| e.to_string()),
        _ = greeting.evicted() => Err("evicted: another address needed the slot".to_string()),
    };
    drop(greeting);
    if let Err(e) = read {
        crate::peer_warn!(peer.ip(), %peer, "closing connection: unable to receive cookie at server ({e})");
        return;
    }
    if crate::engine::iperf2::wire::looks_like_iperf2(&cookie) {
        refuse_iperf2(&inner, &s, peer);
        return;
    }
    let tx = inner
        .pending
        .lock()
        .ok()
        .and_then(|m| m.get(&cookie).cloned());
    if let Some(tx) = tx {
        if let Err(
            mpsc::error::TrySendError::Full((_, mut s))
            | mpsc::error::TrySendError::Closed((_, mut s)),
        ) = tx.try_send((seq, s))
        {
            crate::peer_warn!(peer.ip(), %peer, "extra data stream refused");
            let _ = s.write_all(&[State::AccessDenied.byte()]).await;
        }
        return;
    }
    if *inner.stopping.borrow() {
        return;
    }
    let ticket = match inner.admission.admit(peer.ip()) {
        Ok(t) => t,
        Err(why) => {
            crate::peer_warn!(peer.ip(), %peer, "closing connection: server busy ({why}; {} sessions at most, {MAX_SESSIONS_PER_SOURCE} per address, {MAX_PENDING_PER_SOURCE} unfinished)", MAX_SESSIONS);
            let _ = s.write_all(&[State::AccessDenied.byte()]).await;
            return;
        }
    };
    let id = inner.next.fetch_add(1, Ordering::Relaxed);
    // A client whose cable is pulled sends no FIN: keepalive probes (after 5 s idle, every
    // 2 s, 3 of them) end the control connection within ~11 s even while this side only
    // sends (UDP -R), where no stall of received data would show it.
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(2))
        .with_retries(3);
    let _ = socket2::SockRef::from(&s).set_tcp_keepalive(&ka);
    let dup = socket2::SockRef::from(&s).try_clone();
    if let (Ok(d), Ok(mut m)) = (dup, inner.controls.lock()) {
        m.insert(id, d.into());
    }
    session(inner.clone(), s, peer, cookie, id, ticket).await;
    if let Ok(mut m) = inner.controls.lock() {
        m.remove(&id);
    }
}

/// An iperf 2 client reached the iperf3 port (its first bytes are an iperf 2 header or the
/// digit filler, not a cookie): say so in the log and in a failed run record, then close.
fn refuse_iperf2(inner: &Inner, s: &TcpStream, peer: SocketAddr) {
    let msg = format!(
        "{}: its first bytes are an iperf 2 header, not an iperf3 cookie (iperf 2 clients belong on port 5001)",
        crate::engine::iperf2::LOOKS_LIKE_IPERF2
    );
    crate::peer_warn!(peer.ip(), %peer, "closing connection: {msg}");
    let local = s.local_addr().unwrap_or(peer);
    let id = inner.next.fetch_add(1, Ordering::Relaxed);
    let mut report = Report::new(
        Role::Server,
        Params::default(),
        String::new(),
        (net::ip_text(peer.ip()), peer.port()),
        local,
        inner.cfg.interval,
    );
    report.error = Some(msg);
    emit(
        inner,
        ServerEvent::Started {
            session: id,
            report: Box::new(report.clone()),
        },
    );
    emit(
        inner,
        ServerEvent::Finished {
            session: id,
            report: Box::new(report),
            status: RunStatus::Failed,
        },
    );
}

/// Why a session ended early.
struct Stop {
    status: RunStatus,
    reason: String,
}

fn stop(status: RunStatus, reason: impl Into<String>) -> Stop {
    Stop {
        status,
        reason: reason.into(),
    }
}

/// Runs its closure when dropped.
struct Unregister<F: FnMut()>(F);

impl<F: FnMut()> Drop for Unregister<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// What a session has once its set-up is done.
struct Setup {
    params: Params,
    streams: Vec<DataStream>,
    /// The session's share of [`STREAM_BUDGET`], returned when dropped.
    buffers: Reserved,
}

/// Why a session's set-up ended without a test.
enum SetupEnd {
    /// Already answered and logged.
    Done,
    /// Another client needed the slot or the buffers (see [`Admission`]).
    Evicted,
    /// [`ServerConfig::setup_timeout`] passed.
    Timeout,
    /// The server is stopping.
    Stopping,
}

/// Reserve the test's stream buffers; when the budget is short, evict the oldest pending
/// session of another address that holds some (an announced `-u -P 64` that opens nothing
/// must not lock the server) and wait for it to let go, 1 s at most.
async fn reserve_buffers(inner: &Inner, ticket: &Ticket, cost: u64) -> Option<Reserved> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut evicted_at: Option<tokio::time::Instant> = None;
    loop {
        if let Some(r) = reserve(&inner.budget, cost, STREAM_BUDGET) {
            ticket.set_holds(cost);
            return Some(r);
        }
        let now = tokio::time::Instant::now();
        if cost > STREAM_BUDGET || now >= give_up {
            return None;
        }
        if evicted_at.is_none_or(|t| now - t >= Duration::from_millis(200)) {
            if inner.admission.evict_holding(ticket) {
                evicted_at = Some(now);
            } else if evicted_at.is_none() {
                return None;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The set-up of a session: parameter exchange, stream buffers, streams. Runs under the
/// session's set-up deadline; what it registers is unregistered however it ends.
async fn setup(
    inner: &Arc<Inner>,
    ctrl: &mut TcpStream,
    ctl: &mut ServerControl,
    peer: SocketAddr,
    cookie: [u8; COOKIE_SIZE],
    id: u64,
    ticket: &Ticket,
) -> Result<Setup, SetupEnd> {
    let local_port = ctrl.local_addr().map_or(0, |a| a.port());
    if framing::write_state(ctrl, ctl.on_cookie()).await.is_err() {
        return Err(SetupEnd::Done);
    }
    let params = read_params(inner, ctrl, peer, id).await?;
    let Some(buffers) = reserve_buffers(inner, ticket, stream_cost(&params)).await else {
        crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: {} streams would exceed the server's stream buffer budget ({} MiB)", params.total_streams(), STREAM_BUDGET >> 20);
        let _ = framing::write_state(ctrl, State::AccessDenied).await;
        return Err(SetupEnd::Done);
    };
    let total = params.total_streams() as usize;
    let n_recv = params.client_send_streams() as usize;
    let streams = if params.protocol == Protocol::Udp {
        if !(16..=crate::engine::udp::MAX_UDP_LEN_V6 as u32).contains(&params.len) {
            crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: UDP datagram size {} out of range", params.len);
            let _ = framing::write_server_error(ctrl, ierr::IERECVPARAMS, 0).await;
            return Err(SetupEnd::Done);
        }
        let Some(socks) = udp_streams(inner, ctrl, ctl, id, peer, local_port, total).await else {
            return Err(SetupEnd::Done);
        };
        let mut streams = Vec::with_capacity(total);
        for (i, s) in socks.into_iter().enumerate() {
            // `--fq-rate` paces UDP streams too (stock iperf_udp_accept sets it).
            net::set_fq_rate(&s, params.fq_rate);
            match DataStream::new_udp(
                wire::stream_id(i),
                i >= n_recv,
                s,
                params.udp_counters_64bit,
            ) {
                Ok(d) => streams.push(d),
                Err(e) => {
                    tracing::warn!(session = id, "closing session: {e}");
                    return Err(SetupEnd::Done);
                }
            }
        }
        streams
    } else {
        tcp_streams(inner, ctrl, ctl, peer, cookie, id, &params).await?
    };
    Ok(Setup {
        params,
        streams,
        buffers,
    })
}

/// Read the client's parameters (this server's own UDP pacing choice put in); a bad or
/// SCTP one is answered with its error and ends the session.
async fn read_params(
    inner: &Arc<Inner>,
    ctrl: &mut TcpStream,
    peer: SocketAddr,
    id: u64,
) -> Result<Params, SetupEnd> {
    let params = match framing::read_json(ctrl, wire::MAX_PARAMS_JSON, Duration::from_secs(30))
        .await
        .map_err(|e| e.to_string())
        .and_then(|v| Params::from_json(&v).map_err(|e| e.to_string()))
    {
        // The client's pacing choice is its own; this server's senders follow its own flag.
        Ok(p) => Params {
            udp_pacing: inner.cfg.udp_pacing,
            ..p
        },
        Err(e) => {
            crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: bad parameters: {e}");
            let _ = framing::write_server_error(ctrl, ierr::IERECVPARAMS, 0).await;
            return Err(SetupEnd::Done);
        }
    };
    if params.protocol == Protocol::Sctp {
        crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: SCTP tests are not supported");
        let _ = framing::write_server_error(ctrl, ierr::IEUNIMP, 0).await;
        return Err(SetupEnd::Done);
    }
    Ok(params)
}

/// The TCP streams of session `id`: registered under its `cookie` for the listener to hand
/// over, CREATE_STREAMS sent, then every stream awaited (30 s at most; the client closing or
/// refusing ends it), in the order the client opened them.
async fn tcp_streams(
    inner: &Arc<Inner>,
    ctrl: &mut TcpStream,
    ctl: &mut ServerControl,
    peer: SocketAddr,
    cookie: [u8; COOKIE_SIZE],
    id: u64,
    params: &Params,
) -> Result<Vec<DataStream>, SetupEnd> {
    let total = params.total_streams() as usize;
    let n_recv = params.client_send_streams() as usize;
    let (tx, mut rx) = mpsc::channel::<(u64, TcpStream)>(total);
    if let Ok(mut m) = inner.pending.lock() {
        m.insert(cookie, tx);
    }
    // Unregistered however the set-up ends (its future may be dropped at the deadline).
    let registered = Unregister(|| {
        if let Ok(mut m) = inner.pending.lock() {
            m.remove(&cookie);
        }
    });
    if framing::write_state(ctrl, ctl.on_params()).await.is_err() {
        return Err(SetupEnd::Done);
    }
    let mut socks = Vec::with_capacity(total);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut b = [0u8; 1];
    while socks.len() < total {
        tokio::select! {
            s = rx.recv() => match s { Some(s) => socks.push(s), None => break },
            r = ctrl.read(&mut b) => {
                let why = match r { Ok(0) | Err(_) => "client closed the control connection while streams were being created".to_string(),
                    Ok(_) => format!("{} while streams were being created", ctl.refuse(b[0]).text()) };
                crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: {why}");
                return Err(SetupEnd::Done);
            }
            _ = tokio::time::sleep_until(deadline) => {
                crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: only {} of {total} streams arrived within 30 s", socks.len());
                return Err(SetupEnd::Done);
            }
        }
    }
    drop(registered);
    drop(rx);
    crate::model::order::sort_by_key(&mut socks, |(seq, _)| *seq);

    let mut streams = Vec::with_capacity(total);
    for (i, (_, s)) in socks.into_iter().enumerate() {
        let std = match s.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(session = id, "closing session: {e}");
                return Err(SetupEnd::Done);
            }
        };
        apply_stream_opts(&std, params);
        match DataStream::new(wire::stream_id(i), i >= n_recv, std) {
            Ok(d) => streams.push(d),
            Err(e) => {
                tracing::warn!(session = id, "closing session: {e}");
                return Err(SetupEnd::Done);
            }
        }
    }
    Ok(streams)
}

/// The set-up phase under its deadline (parameter exchange, stream buffers, streams): what
/// the test needs, or `None` when the session ended there (answered and logged).
async fn admit(
    inner: &Arc<Inner>,
    ctrl: &mut TcpStream,
    ctl: &mut ServerControl,
    peer: SocketAddr,
    cookie: [u8; COOKIE_SIZE],
    id: u64,
    ticket: &Ticket,
) -> Option<Setup> {
    let mut stopping = inner.stopping.subscribe();
    let ended = tokio::select! {
        r = setup(inner, ctrl, ctl, peer, cookie, id, ticket) => r,
        _ = ticket.evicted() => Err(SetupEnd::Evicted),
        _ = tokio::time::sleep(inner.cfg.setup_timeout) => Err(SetupEnd::Timeout),
        _ = stopping.wait_for(|s| *s) => Err(SetupEnd::Stopping),
    };
    let why = match ended {
        Ok(s) => return Some(s),
        Err(SetupEnd::Done | SetupEnd::Stopping) => return None,
        Err(SetupEnd::Evicted) => {
            "its set-up was not finished and another client needed the slot (evicted)".to_string()
        }
        Err(SetupEnd::Timeout) => format!(
            "parameter exchange and stream set-up not finished within {} s",
            inner.cfg.setup_timeout.as_secs_f64()
        ),
    };
    crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: {why}");
    let _ = ctrl.write_all(&[State::AccessDenied.byte()]).await;
    None
}

/// One control session: set-up ([`admit`]), then the test's phases ([`Test::run`]); the
/// run record is finished the same way whichever phase ended it.
async fn session(
    inner: Arc<Inner>,
    mut ctrl: TcpStream,
    peer: SocketAddr,
    cookie: [u8; COOKIE_SIZE],
    id: u64,
    ticket: Ticket,
) {
    let local = ctrl.local_addr().unwrap_or(peer);
    let mut ctl = ServerControl::new();
    let Some(Setup {
        params,
        streams,
        buffers: _buffers,
    }) = admit(&inner, &mut ctrl, &mut ctl, peer, cookie, id, &ticket).await
    else {
        return;
    };
    // Set up: from now on only the fair share ([`admission_limits`]) evicts it.
    ticket.set_pending(false);
    ticket.set_holds(0);
    let mut report = Report::new(
        Role::Server,
        params.clone(),
        wire::cookie_str(&cookie),
        (net::ip_text(peer.ip()), peer.port()),
        local,
        inner.cfg.interval,
    );
    describe_streams(&mut report, &streams);
    tracing::info!(session = id, %peer, streams = streams.len(), direction = ?params.direction, "test started");
    emit(
        &inner,
        ServerEvent::Started {
            session: id,
            report: Box::new(report.clone()),
        },
    );
    let mut test = Test {
        inner: &inner,
        id,
        peer,
        local,
        ctrl,
        ctl,
        congestion: streams.first().and_then(|s| s.congestion()),
        report,
        open: None,
        cpu: CpuMark::now(),
        drain: None,
    };
    // A test evicted for another address's fair share ends like one of a stopping server:
    // SERVER_TERMINATE, a grace for the client to read it, then the streams close.
    let ended = tokio::select! {
        r = test.run(params, streams) => r,
        _ = ticket.evicted() => Err(stop(RunStatus::Aborted, PREEMPTED)),
    };
    if ticket.is_evicted() && matches!(&ended, Err(s) if s.reason == PREEMPTED) {
        crate::peer_warn!(peer.ip(), session = id, %peer, "ending test: {PREEMPTED}");
        let _ = test.ctrl.write_all(&[State::ServerTerminate.byte()]).await;
        tokio::time::sleep(TERMINATE_GRACE).await;
    }
    test.close().await;
    let Test { report, .. } = test;
    match ended {
        Ok(()) => {
            tracing::info!(session = id, %peer, "test completed");
            finish(&inner, id, report, RunStatus::Completed, None);
        }
        Err(s) => finish(&inner, id, report, s.status, Some(s.reason)),
    }
}

/// A set-up session's test, through the phases of the iperf3 control flow: start
/// (TEST_START, TEST_RUNNING), data (until TEST_END), the drain of a `-n`/`-k` test, the
/// results exchange, display. The report stays here so that every way out fills it alike.
struct Test<'a> {
    inner: &'a Inner,
    id: u64,
    peer: SocketAddr,
    local: SocketAddr,
    ctrl: TcpStream,
    ctl: ServerControl,
    /// The first stream's congestion control (TCP), for the report and the results.
    congestion: Option<String>,
    report: Report,
    /// The data phase from its start until [`Test::close`].
    open: Option<DataPhase>,
    /// This side's CPU from TEST_START (reset when the streams start).
    cpu: CpuMark,
    /// Set when a `-n`/`-k` test in which this side receives drains after TEST_END.
    drain: Option<Drain>,
}

impl Test<'_> {
    /// Every phase in order; `Err` says why the test ended early.
    async fn run(&mut self, params: Params, streams: Vec<DataStream>) -> Result<(), Stop> {
        let drops_end = self.start(&params, streams).await?;
        if let Err(s) = self.data(&params).await {
            crate::peer_warn!(self.peer.ip(), session = self.id, peer = %self.peer, "test ended early: {}", s.reason);
            return Err(s);
        }
        // This host's clock for the test (never the client's own times): the bounds of
        // the client's datagram counts.
        let started = self.open.as_ref().map(|p| p.started);
        // Without a drain the totals freeze at TEST_END, as a stock server's do.
        let mine = if self.drain.is_none() {
            self.close().await
        } else {
            None
        };
        self.exchange_results(&params, mine, drops_end, started)
            .await
    }

    /// TEST_START and TEST_RUNNING, the first reading of the drop counters, the streams
    /// started. Gives the drop counters' second half.
    async fn start(
        &mut self,
        params: &Params,
        streams: Vec<DataStream>,
    ) -> Result<Option<DropsEnd>, Stop> {
        let mut phase = DataPhase::new(params.clone(), streams, self.inner.cfg.interval);
        let msg = self.ctl.streams_ready().map(State::byte);
        if self.ctrl.write_all(&msg[..]).await.is_err() {
            return Err(stop(
                RunStatus::Aborted,
                "client closed the control connection at test start",
            ));
        }
        let drops_end = match &self.inner.cfg.drops {
            Some(d) => {
                let word = super::client::direction_word(params.direction, Role::Server);
                d.begin(self.local.ip(), word).await
            }
            None => None,
        };
        self.cpu = CpuMark::now();
        phase
            .start(false)
            .map_err(|e| stop(RunStatus::Failed, format!("unable to start streams: {e}")))?;
        self.open = Some(phase);
        Ok(drops_end)
    }

    /// The data phase until the client's TEST_END; then, for a `-n`/`-k` test in which we
    /// receive, what is still in flight up to the announced total (§8.4).
    async fn data(&mut self, params: &Params) -> Result<(), Stop> {
        let Some(phase) = self.open.as_mut() else {
            return Ok(());
        };
        run_phase(self.inner, self.id, phase, &mut self.ctl, &mut self.ctrl).await?;
        let Some(d) = Drain::new(params, std::time::Instant::now()) else {
            return Ok(());
        };
        phase.stop_senders().await;
        let drained = d.until_total(phase, &mut self.ctrl).await;
        let id = self.id;
        let (received, total) = (phase.received_after_omit(), d.total());
        self.drain = Some(d);
        match drained {
            Ok(ended) => {
                tracing::debug!(
                    session = id,
                    ?ended,
                    received,
                    total,
                    "drained to the -n/-k total"
                );
                Ok(())
            }
            Err(i) => Err(drain_stop(&mut self.ctl, i)),
        }
    }

    /// EXCHANGE_RESULTS: read the client's results first (and drain to its sent counts),
    /// then send ours (`mine` when the data phase is already closed), DISPLAY_RESULTS, and
    /// wait briefly for IPERF_DONE.
    async fn exchange_results(
        &mut self,
        params: &Params,
        mut mine: Option<Results>,
        drops_end: Option<DropsEnd>,
        started: Option<std::time::Instant>,
    ) -> Result<(), Stop> {
        let ctrl = &mut self.ctrl;
        if framing::write_state(ctrl, self.ctl.exchange_results())
            .await
            .is_err()
        {
            return Err(stop(
                RunStatus::Aborted,
                "client vanished before the results exchange",
            ));
        }
        let theirs =
            framing::read_frame(ctrl, wire::MAX_CLIENT_RESULTS_JSON, Duration::from_secs(30))
                .await
                .and_then(|b| Results::from_slice(&b))
                .map_err(|e| stop(RunStatus::Failed, format!("unable to receive results: {e}")))?;
        if let (Some(d), Some(p)) = (&self.drain, &self.open) {
            // The client's own counts: it may have sent more than the promised total.
            let ended = d.until_client_counts(p, &theirs).await;
            let received = p.received_after_omit();
            tracing::debug!(
                session = self.id,
                ?ended,
                received,
                "drained to the client's sent bytes"
            );
        }
        if let Some(r) = self.close().await {
            mine = Some(r);
        }
        let report = &mut self.report;
        let elapsed = started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        if let Err(e) = merge_remote(&mut report.streams, &theirs, elapsed, params) {
            tracing::warn!(session = self.id, "client's results refused: {e}");
            let _ = framing::write_server_error(&mut self.ctrl, ierr::IESTREAMID, 0).await;
            return Err(stop(RunStatus::Failed, e));
        }
        // The client's datagram counts: what it sent after the last datagram that arrived
        // is lost too (a gap count never sees it), here and in the results it gets.
        count_trailing_loss(report, &theirs, elapsed, params);
        report.cpu_remote = CpuUtil {
            total: theirs.cpu_util_total,
            user: theirs.cpu_util_user,
            system: theirs.cpu_util_system,
        };
        if let Some(c) = theirs.congestion_used.clone() {
            if report.sender_congestion.is_none() {
                report.sender_congestion = Some(c);
            } else if report.receiver_congestion.is_none() {
                report.receiver_congestion = Some(c);
            }
        }
        let mut mine = mine.unwrap_or_default();
        results_with_trailing_loss(&mut mine, &report.streams);
        let flow = TestFlow::of(report);
        mine.netperfd_drops = drops_at_end(drops_end, flow).await;
        // Who paced this server's senders, for a -R client's end.pacing.
        mine.netperfd_pacing = report::pacing_sentence(report);
        // A netperfd client's own drop counters (`netperfd -c` on the PC): the peer's places
        // in this host's ledger.
        report.peer_drops = theirs.netperfd_drops.clone();
        if params.get_server_output {
            if self.inner.cfg.json {
                mine.server_output_json = Some(report::to_iperf3_json(report));
            } else {
                mine.server_output_text = Some(server_text(report));
            }
        }
        let ctrl = &mut self.ctrl;
        let display = self.ctl.on_results();
        if framing::write_json(ctrl, &mine.to_json()).await.is_err()
            || framing::write_state(ctrl, display).await.is_err()
        {
            return Err(stop(
                RunStatus::Aborted,
                "client vanished during the results exchange",
            ));
        }
        // IPERF_DONE, or the client just closes: either is a normal end.
        if let Ok(b) = framing::read_state(ctrl, Duration::from_secs(5)).await {
            if let Err(e) = self.ctl.on_state(b) {
                tracing::debug!(session = self.id, "after the results: {}", e.text());
            }
        }
        Ok(())
    }

    /// End the data phase if it is still open: freeze the totals (at the drain's end time
    /// when there was one), emit the final interval, fill the report's streams, intervals, CPU
    /// and congestion, close the sockets; this side's results document. `None` when it was
    /// already closed (or never started).
    async fn close(&mut self) -> Option<Results> {
        let mut phase = self.open.take()?;
        let last = match &self.drain {
            Some(d) => {
                let t_end = d.end_time(&phase);
                phase.finish_at(t_end).await
            }
            None => phase.finish().await,
        };
        if let Some(rec) = last {
            emit(
                self.inner,
                ServerEvent::Interval {
                    session: self.id,
                    record: rec,
                },
            );
        }
        let report = &mut self.report;
        report_phase(report, &phase, self.cpu.util_since(), &self.congestion);
        let mine = phase.results(report.cpu_local, self.congestion.clone(), &report.streams);
        let _ = crate::engine::task::spawn_blocking(move || phase.stop()).await;
        Some(mine)
    }
}

/// The server's text for one test, as `--get-server-output` returns it.
pub(crate) fn server_text(report: &Report) -> String {
    let mut t = report::text_header(report);
    for (i, rec) in report.intervals.iter().enumerate() {
        t.push_str(&report::text_interval(report, rec, i == 0));
    }
    t.push_str(&report::text_summary(report));
    t
}

fn apply_stream_opts(s: &std::net::TcpStream, p: &Params) {
    let sock = socket2::SockRef::from(s);
    if let Some(w) = p.window {
        let _ = sock.set_send_buffer_size(w as usize);
        let _ = sock.set_recv_buffer_size(w as usize);
    }
    if p.nodelay {
        let _ = sock.set_nodelay(true);
    }
    if p.tos > 0 {
        let _ = sock.set_tos(p.tos);
    }
    net::set_fq_rate(s, p.fq_rate);
    if let Some(c) = &p.congestion {
        use std::os::fd::AsFd;
        if let Err(e) = crate::engine::stats::set_tcp_congestion(s.as_fd(), c) {
            tracing::warn!("congestion control '{c}' not set on the server: {e}");
        }
    }
    // A client that vanishes with data unacknowledged fails the writes within 10 s.
    net::user_timeout(s, Duration::from_secs(10));
}

fn emit(inner: &Inner, ev: ServerEvent) {
    if let Some(tx) = &inner.events {
        let _ = tx.send(ev);
    }
}

fn finish(inner: &Inner, id: u64, mut report: Report, status: RunStatus, error: Option<String>) {
    report.error = error;
    emit(
        inner,
        ServerEvent::Finished {
            session: id,
            report: Box::new(report),
            status,
        },
    );
    inner.done.notify_one();
}

/// Why a session ends when its control connection speaks or closes during the drain.
fn drain_stop(ctl: &mut ServerControl, i: Interrupted) -> Stop {
    match i {
        Interrupted::Closed => stop(
            RunStatus::Aborted,
            "the client has unexpectedly closed the connection",
        ),
        // After TEST_END the client has nothing to say until EXCHANGE_RESULTS.
        Interrupted::Byte(b) => control_stop(ctl.refuse(b)),
    }
}

/// How a session ends on a control error: CLIENT_TERMINATE is an abort (the user stopped
/// the client), anything else a protocol failure.
fn control_stop(e: ControlError) -> Stop {
    match e {
        ControlError::ClientTerminate => stop(RunStatus::Aborted, e.text()),
        e => stop(RunStatus::Failed, e.text()),
    }
}

/// Collect a UDP session's `total` streams from the hello listener (30 s at most, and only
/// while the control connection stays up). `None` when the session must end.
async fn udp_streams(
    inner: &Arc<Inner>,
    ctrl: &mut TcpStream,
    ctl: &mut ServerControl,
    id: u64,
    peer: SocketAddr,
    port: u16,
    total: usize,
) -> Option<Vec<std::net::UdpSocket>> {
    let (tx, mut rx) = mpsc::channel::<std::net::UdpSocket>(total.max(1));
    if let Ok(mut g) = inner.udp_pending.lock() {
        g.push(UdpPending {
            session: id,
            port,
            peer: canon(peer.ip()),
            tx,
        });
    }
    // Unregistered however this ends (the set-up future may be dropped at its deadline).
    let _registered = Unregister(|| {
        if let Ok(mut g) = inner.udp_pending.lock() {
            g.retain(|p| p.session != id);
        }
    });
    if framing::write_state(ctrl, ctl.on_params()).await.is_err() {
        return None;
    }
    let mut socks = Vec::with_capacity(total);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut b = [0u8; 1];
    while socks.len() < total {
        tokio::select! {
            s = rx.recv() => match s { Some(s) => socks.push(s), None => break },
            r = ctrl.read(&mut b) => {
                let _ = r;
                crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: the client went away while UDP streams were being created");
                return None;
            }
            _ = tokio::time::sleep_until(deadline) => {
                crate::peer_warn!(peer.ip(), session = id, %peer, "closing session: only {} of {total} UDP streams said hello within 30 s", socks.len());
                return None;
            }
        }
    }
    Some(socks)
}

async fn run_phase(
    inner: &Inner,
    id: u64,
    phase: &mut DataPhase,
    ctl: &mut ServerControl,
    ctrl: &mut TcpStream,
) -> Result<(), Stop> {
    let p = phase.params.clone();
    let interval = inner.cfg.interval.max(0.1);
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval_at(
        start + Duration::from_secs_f64(interval),
        Duration::from_secs_f64(interval),
    );
    let mut watchdog = tokio::time::interval(Duration::from_secs(1));
    let omit_at = start + Duration::from_secs(p.omit as u64);
    let mut omit_pending = p.omit > 0;
    let deadline = if p.time > 0 {
        Some(start + Duration::from_secs((p.time + p.omit) as u64) + Duration::from_secs(10))
    } else {
        None
    };
    let mut last_progress = (0u64, tokio::time::Instant::now());
    let mut b = [0u8; 1];
    let mut stopping = inner.stopping.subscribe();
    let terminated = || stop(RunStatus::Aborted, wire::ierr_text(ierr::IESERVERTERM));
    loop {
        tokio::select! {
            // (The guard wait_for returns is dropped inside the block, before the grace.)
            _ = async { let _ = stopping.wait_for(|s| *s).await; } => {
                // The data streams stay open while the client reads SERVER_TERMINATE (sent
                // right after this), so a client in the middle of a write is not cut off
                // with a broken pipe first.
                tokio::time::sleep(TERMINATE_GRACE).await;
                return Err(terminated());
            }
            _ = tick.tick() => {
                if let Some(rec) = phase.sample() {
                    emit(inner, ServerEvent::Interval { session: id, record: rec });
                }
            }
            _ = tokio::time::sleep_until(omit_at), if omit_pending => {
                omit_pending = false;
                if let Some(rec) = phase.end_omit() {
                    emit(inner, ServerEvent::Interval { session: id, record: rec });
                }
                tick.reset();
            }
            _ = watchdog.tick() => {
                let prog = phase.progress();
                let sending_done = phase.shared.send_limit_reached();
                if prog != last_progress.0 || sending_done {
                    last_progress = (prog, tokio::time::Instant::now());
                } else if last_progress.1.elapsed() >= inner.cfg.stall_timeout {
                    return Err(stop(RunStatus::Aborted, format!(
                        "no data for {} s: the client vanished", inner.cfg.stall_timeout.as_secs())));
                }
                if let Some(d) = deadline {
                    if tokio::time::Instant::now() >= d {
                        return Err(stop(RunStatus::Aborted, "the client did not end the test in time (duration + omit + 10 s)"));
                    }
                }
            }
            _ = phase.shared.wake.notified() => {
                if let Some(e) = phase.shared.error() {
                    return Err(stop(RunStatus::Aborted, format!("data stream failed, the client vanished ({e})")));
                }
            }
            r = ctrl.read(&mut b) => {
                if *inner.stopping.borrow() {
                    // The client answering our SERVER_TERMINATE (IPERF_DONE), or closing.
                    return Err(terminated());
                }
                match r {
                    Ok(0) | Err(_) => return Err(stop(RunStatus::Aborted, "the client has unexpectedly closed the connection")),
                    Ok(_) => match ctl.on_state(b[0]) {
                        Ok(ServerStep::EndTest) => return Ok(()),
                        Ok(ServerStep::Ignore) => {}
                        Ok(ServerStep::Done) => return Err(control_stop(ControlError::OutOfOrder { phase: ctl.phase(), byte: b[0] })),
                        Err(e) => return Err(control_stop(e)),
                    },
                }
            }
        }
    }
}
