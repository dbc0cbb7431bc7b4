//! iperf3 client: drives one test against a stock `iperf3 -s` (or our server) over the control
//! protocol of `docs/iperf3-wire.md` §2, runs the data phase, and returns the
//! merged report. Progress is sent as [`Event`]s while the test runs.

use super::control::{ClientControl, ClientStep, ControlError};
use super::framing;
use super::wire::{self, ierr, Direction, Params, Protocol, Results, State, WireError};
use crate::engine::net::{self, Family, SockOpts};
use crate::engine::report::{IntervalRecord, Report, Role};
use crate::engine::session::{
    count_trailing_loss, describe_streams, merge_remote, report_phase, DataPhase, DataStream,
};
use crate::engine::stats::{CpuMark, CpuUtil};
use crate::model::RunDirection;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

/// Longest test duration and omit period a client accepts, seconds (a day): the one
/// bound the CLI, the web form, the API and suites share.
pub(crate) const MAX_SECONDS: u32 = 86_400;

/// Smallest socket buffer (`-w`) a test may ask for, bytes.
pub(crate) const WINDOW_MIN: u32 = 1024;
/// Largest socket buffer (`-w`) a test may ask for, bytes (1 GiB − 1: the kernel doubles the
/// value into an `int`). The web form, the API and the CLI use the same bounds.
pub(crate) const WINDOW_MAX: u32 = i32::MAX as u32 / 2;

/// What to run: iperf3's client options.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// Server host name or address (`-c`).
    pub host: String,
    /// Server port (`-p`), default 5201.
    pub port: u16,
    /// Parameters sent to the server.
    pub params: Params,
    /// Reporting interval in seconds (`-i`), default 1.
    pub interval: f64,
    /// Socket options: `-B`, `--bind-dev`, `--cport`, `-w`, `-M`, `-N`, `-S`, `-C`.
    pub sock: SockOpts,
    /// `-4` / `-6`.
    pub family: Family,
    /// Control connection timeout (`--connect-timeout`), default 10 s.
    pub connect_timeout: Duration,
    /// While the test runs and this client receives (`-R`, `--bidir`): no data for this
    /// long ends the test with "idle timeout for receiving data" (`--rcv-timeout`, stock
    /// 3.19+'s IENOMSG); default [`DEFAULT_RCV_TIMEOUT`].
    pub rcv_timeout: Duration,
    /// TCP keepalive of the control connection (`--cntl-ka`); `None`: none (stock iperf3
    /// without the flag). [`ClientSpec::new`] starts with [`BOARD_CNTL_KA`].
    pub cntl_ka: Option<CntlKa>,
    /// The server was just probed ([`probe_iperf3`], peer type "auto"): a stock iperf3
    /// server closes and re-opens its listener after the probe's session, so a connection
    /// refused, reset or denied before the parameter exchange is tried again for up to 3 s.
    pub after_probe: bool,
    /// Reads this host's drop counters around the test; what moved goes into the results
    /// sent to the server (key `netperfd_drops`), so a netperfd server (the board) can name
    /// this host's drops in its loss ledger. `None`: nothing is read or added.
    pub drops: Option<super::server::DropCounters>,
    /// Burst mode (RFC 2544 back-to-back frames): the UDP sender sends at most this many
    /// datagrams over all streams, at the rate (`-b`), and then nothing until the test's
    /// duration (`-t`) ends, so the receiver still counts what the path held queued. The
    /// server is not told (it sees a `-t` test that went quiet); `None`: a normal test.
    pub burst: Option<u64>,
}

/// `--rcv-timeout`'s watch: the test ends when the received byte count has not moved for the
/// timeout. Checked every tenth of it (50 ms … 1 s), so it ends between the timeout and the
/// timeout plus two checks after the last data (2.0–2.4 s for 2000 ms, 120–122 s for the
/// default). Stock 3.21 notices only when its select loop has nothing else to do, so its end
/// comes later and varies (12 s for 2000 ms with a stalled server, measured); netperfd keeps
/// the value asked for.
struct IdleWatch {
    timeout: Duration,
    last_rx: u64,
    last_at: tokio::time::Instant,
}

impl IdleWatch {
    /// How often to check a `timeout`.
    fn period(timeout: Duration) -> Duration {
        (timeout / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }

    fn new(timeout: Duration, rx: u64, now: tokio::time::Instant) -> IdleWatch {
        IdleWatch {
            timeout,
            last_rx: rx,
            last_at: now,
        }
    }

    /// One check at `now` with `rx` bytes received so far: true when nothing came for the
    /// timeout.
    fn idle(&mut self, rx: u64, now: tokio::time::Instant) -> bool {
        if rx != self.last_rx {
            (self.last_rx, self.last_at) = (rx, now);
            return false;
        }
        now.saturating_duration_since(self.last_at) >= self.timeout
    }
}

/// The receive idle timeout of a client that receives, as stock iperf3 3.19+ (120 s).
pub(crate) const DEFAULT_RCV_TIMEOUT: Duration = Duration::from_secs(120);

/// Control connection keepalive (`--cntl-ka[=IDLE/INTERVAL/COUNT]`, seconds, seconds,
/// probes), as stock iperf3 3.21: SO_KEEPALIVE on, and only the values given are set — a field
/// left out (all of them for a bare `--cntl-ka`) keeps the kernel's default
/// (`net.ipv4.tcp_keepalive_time` / `_intvl` / `_probes`: 7200 s, 75 s, 9 on Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CntlKa {
    /// TCP_KEEPIDLE, s.
    pub idle: Option<u32>,
    /// TCP_KEEPINTVL, s.
    pub interval: Option<u32>,
    /// TCP_KEEPCNT, probes.
    pub count: Option<u32>,
}

/// The keepalive of the board's own iperf3 runs (web, API, suites; not the iperf3 command
/// line, which follows stock): first probe after 5 s idle, then every 2 s, 3 probes, so a
/// server that vanishes without a FIN is noticed within 11 s.
pub(crate) const BOARD_CNTL_KA: CntlKa = CntlKa {
    idle: Some(5),
    interval: Some(2),
    count: Some(3),
};

impl CntlKa {
    /// Parse `IDLE/INTERVAL/COUNT`, each part optional ("", "30", "30/5", "/5/3"). Errors as
    /// stock iperf3: a number that is not one, or an idle time not above the interval × count
    /// given (a part left out counts 0 here; [`CntlKa::apply`] checks again with the kernel's).
    pub fn parse(s: &str) -> Result<CntlKa, String> {
        let mut parts = s.splitn(3, '/');
        let mut num = |what: &str| -> Result<Option<u32>, String> {
            match parts.next().map(str::trim) {
                None | Some("") => Ok(None),
                Some(x) => x
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .map(Some)
                    .ok_or_else(|| format!("--cntl-ka: {what} '{x}' is not a positive number")),
            }
        };
        let ka = CntlKa {
            idle: num("idle time")?,
            interval: num("interval")?,
            count: num("count")?,
        };
        let (intv, cnt) = (ka.interval.unwrap_or(0), ka.count.unwrap_or(0));
        if let Some(idle) = ka.idle {
            ka.check(idle, intv, cnt)?;
        }
        Ok(ka)
    }

    fn check(&self, idle: u32, intv: u32, cnt: u32) -> Result<(), String> {
        if u64::from(idle) <= u64::from(intv) * u64::from(cnt) {
            return Err(format!(
                "control connection Keepalive period should be larger than the full retry period (interval * count): {idle} <= {intv} * {cnt} (--cntl-ka)"
            ));
        }
        Ok(())
    }

    /// Turn on SO_KEEPALIVE on `s` and set TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT where
    /// given; returns the values in effect (idle s, interval s, probes), the kernel's where not
    /// given. Errors: a socket option refused, or (stock's IECNTLKA) an idle time given without
    /// interval or count that is not above the interval × count in effect — then nothing
    /// beyond SO_KEEPALIVE was set.
    pub fn apply(&self, s: &std::net::TcpStream) -> Result<(u32, u32, u32), String> {
        let sock = socket2::SockRef::from(s);
        let e = |what: &str, err: std::io::Error| format!("--cntl-ka: {what}: {err}");
        sock.set_keepalive(true).map_err(|x| e("SO_KEEPALIVE", x))?;
        let secs = |d: Duration| u32::try_from(d.as_secs()).unwrap_or(u32::MAX);
        let idle = match self.idle {
            Some(v) => v,
            None => secs(sock.keepalive_time().map_err(|x| e("TCP_KEEPIDLE", x))?),
        };
        let intv = match self.interval {
            Some(v) => v,
            None => secs(
                sock.keepalive_interval()
                    .map_err(|x| e("TCP_KEEPINTVL", x))?,
            ),
        };
        let cnt = match self.count {
            Some(v) => v,
            None => sock.keepalive_retries().map_err(|x| e("TCP_KEEPCNT", x))?,
        };
        // Stock's check at connect, where the kernel's values stand in for those not given
        // (all three given were checked by `parse`; the board's own 5/2/3 is not a user's).
        if self.idle.is_some() && (self.interval.is_none() || self.count.is_none()) {
            self.check(idle, intv, cnt)?;
        }
        let mut ka = socket2::TcpKeepalive::new();
        if let Some(v) = self.idle {
            ka = ka.with_time(Duration::from_secs(v.into()));
        }
        if let Some(v) = self.interval {
            ka = ka.with_interval(Duration::from_secs(v.into()));
        }
        if let Some(v) = self.count {
            ka = ka.with_retries(v);
        }
        sock.set_tcp_keepalive(&ka)
            .map_err(|x| e("keepalive values", x))?;
        Ok((idle, intv, cnt))
    }
}

impl ClientSpec {
    /// A TCP test of `duration` seconds against `host:5201` with iperf3's defaults.
    pub fn new(host: &str) -> ClientSpec {
        ClientSpec {
            host: host.to_string(),
            port: wire::DEFAULT_PORT,
            params: Params::default(),
            interval: 1.0,
            sock: SockOpts::default(),
            family: Family::Any,
            connect_timeout: Duration::from_secs(10),
            rcv_timeout: DEFAULT_RCV_TIMEOUT,
            cntl_ka: Some(BOARD_CNTL_KA),
            after_probe: false,
            drops: None,
            burst: None,
        }
    }

    /// Check the spec before anything is sent. Errors name the option.
    pub fn validate(&self) -> Result<(), String> {
        let p = &self.params;
        if self.host.trim().is_empty() {
            return Err("peer host is empty".into());
        }
        if self.port == 0 {
            return Err("port must be 1..65535".into());
        }
        if p.protocol == Protocol::Sctp {
            return Err("SCTP tests are not supported".into());
        }
        if p.protocol == Protocol::Udp
            && p.len != 0
            && !(16..=crate::engine::udp::MAX_UDP_LEN_V6 as u32).contains(&p.len)
        {
            return Err(format!(
                "UDP datagram size must be 16..{} bytes (65507 over IPv4) (-l)",
                crate::engine::udp::MAX_UDP_LEN_V6
            ));
        }
        if p.parallel == 0 || p.parallel > wire::MAX_PARALLEL {
            return Err(format!(
                "parallel streams must be 1..={} (-P)",
                wire::MAX_PARALLEL
            ));
        }
        if p.protocol == Protocol::Tcp && (p.len == 0 || p.len as usize > wire::MAX_TCP_BLKSIZE) {
            return Err(format!(
                "block size must be 1..={} bytes (-l)",
                wire::MAX_TCP_BLKSIZE
            ));
        }
        if p.time > MAX_SECONDS || p.omit > MAX_SECONDS {
            return Err(format!(
                "duration and omit must be at most {MAX_SECONDS} s (-t, -O)"
            ));
        }
        if p.time == 0 && p.num == 0 && p.blockcount == 0 {
            return Err(
                "a test needs a duration (-t), a byte count (-n) or a block count (-k)".into(),
            );
        }
        if !(self.interval == 0.0 || (0.1..=60.0).contains(&self.interval)) {
            return Err("interval must be 0.1..60 s (-i)".into());
        }
        if let Some(w) = p.window {
            if !(WINDOW_MIN..=WINDOW_MAX).contains(&w) {
                return Err("window must be 1 KiB..1 GiB (-w)".into());
            }
        }
        if let Some(m) = p.mss {
            if !(88..=9000).contains(&m) {
                return Err("MSS must be 88..9000 bytes (-M)".into());
            }
        }
        if let Some(c) = &p.congestion {
            if c.is_empty()
                || c.len() > 15
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(format!("'{c}' is not a congestion control name (-C)"));
            }
        }
        if let Some(d) = &self.sock.bind_dev {
            if d.is_empty() || d.len() > 15 || d.contains('/') {
                return Err(format!("'{d}' is not an interface name (--bind-dev)"));
            }
        }
        if let Some(n) = self.burst {
            if n == 0 || p.protocol != Protocol::Udp || p.time == 0 || p.client_recv_streams() > 0 {
                return Err(
                    "a burst needs a UDP test of a duration (-t) that only this client sends in, of at least 1 datagram".into(),
                );
            }
        }
        let ser = serde_json::to_vec(&p.to_json()).map_err(|e| e.to_string())?;
        if ser.len() > wire::MAX_PARAMS_JSON as usize {
            return Err("title and extra data make the parameters longer than 8 KiB".into());
        }
        Ok(())
    }
}

/// Progress of a running client test.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// Streams are connected; the report so far (header fields only).
    Started(Box<Report>),
    /// One interval sample.
    Interval(IntervalRecord),
}

/// A failed test: the message (iperf3's wording where there is one) and whatever report
/// had been built so far.
#[derive(Debug)]
pub(crate) struct ClientError {
    pub message: String,
    pub partial: Option<Box<Report>>,
    /// True when the user (or a signal) stopped the test.
    pub aborted: bool,
    /// What kind of failure, for callers that act on it (the retry after a probe).
    pub kind: FailKind,
}

/// Kinds of [`ClientError`] a caller may act on; everything else is [`FailKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailKind {
    /// The control connection was refused (nothing listening) or reset by the server.
    RefusedOrReset,
    /// The server answered ACCESS_DENIED (iperf3's "the server is busy running a test").
    AccessDenied,
    /// The server closed the control connection (iperf3's IECTRLCLOSE).
    ControlClosed,
    /// The server said why it ended the test: SERVER_ERROR (with iperf3's error code) or
    /// SERVER_TERMINATE.
    ServerError,
    /// The server sent a byte that is no iperf3 state, or a state out of order
    /// ([`ControlError::OutOfOrder`], [`ControlError::NotAState`]).
    Protocol,
    /// Any other failure.
    Other,
}

impl FailKind {
    /// The kind of an I/O failure on the control connection.
    fn of_io(e: &std::io::Error) -> FailKind {
        match e.kind() {
            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset => {
                FailKind::RefusedOrReset
            }
            _ => FailKind::Other,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn err(message: impl Into<String>) -> ClientError {
    ClientError {
        message: message.into(),
        partial: None,
        aborted: false,
        kind: FailKind::Other,
    }
}

impl ClientError {
    fn kind(mut self, kind: FailKind) -> ClientError {
        self.kind = kind;
        self
    }
}

const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
/// Silence after the cookie that marks the peer as an iperf 2 server.
pub(crate) const IPERF2_SILENCE: Duration = Duration::from_secs(3);

/// Whether `host:port` answers like an iperf3 server. Connects, sends the harmless
/// [`wire::probe_cookie`], half-closes (FIN), and waits up to [`IPERF2_SILENCE`] for the first
/// control byte: PARAM_EXCHANGE, ACCESS_DENIED or SERVER_ERROR mean iperf3 (`Ok(true)`). An
/// iperf 2 server takes the 37 bytes for a plain 37-byte test, ends it at our FIN and closes:
/// end of stream, silence, a reset or another byte mean iperf 2 (`Ok(false)`). A stock iperf3
/// server logs a dropped control connection and serves on.
///
/// The probe goes to `spec.host:spec.port` (`spec.family`) from the test's own source: bound
/// to `spec.sock.bind` / `spec.sock.bind_dev` as the test's control connection is, so it leaves
/// through the board port the test will use. Errors: the host does not resolve, or nothing
/// listens (connect refused — [`ProbeError::refused`] — or timed out after 10 s).
pub(crate) async fn probe_iperf3(spec: &ClientSpec) -> Result<bool, ProbeError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let other = |message: String| ProbeError {
        message,
        refused: false,
    };
    let (host, port, family) = (spec.host.clone(), spec.port, spec.family);
    let peer = crate::engine::task::spawn_blocking(move || net::resolve(&host, port, family))
        .await
        .map_err(|e| other(e.to_string()))?
        .map_err(|e| other(format!("unable to resolve host '{}': {e}", spec.host)))?;
    let opts = SockOpts {
        bind: spec.sock.bind,
        bind_dev: spec.sock.bind_dev.clone(),
        ..Default::default()
    };
    let std_s = crate::engine::task::spawn_blocking(move || {
        net::connect_tcp(peer, &opts, 0, false, Duration::from_secs(10))
    })
    .await
    .map_err(|e| other(e.to_string()))?
    .map_err(|e| ProbeError {
        message: format!("unable to connect to {peer}: {e}"),
        refused: e.kind() == std::io::ErrorKind::ConnectionRefused,
    })?;
    let mut s = std_s
        .set_nonblocking(true)
        .and_then(|()| TcpStream::from_std(std_s))
        .map_err(|e| other(e.to_string()))?;
    s.write_all(&wire::probe_cookie())
        .await
        .map_err(|e| other(format!("unable to send to {peer}: {e}")))?;
    // The FIN ends an iperf 2 server's test at once (no waiting on its read timeout); an
    // iperf3 server has already read all it needs to answer.
    let _ = s.shutdown().await;
    let mut b = [0u8; 1];
    let iperf3 = match tokio::time::timeout(IPERF2_SILENCE, s.read(&mut b)).await {
        Ok(Ok(1)) => matches!(
            ClientControl::new().on_state(b[0]),
            Ok(_) | Err(ControlError::AccessDenied | ControlError::ServerError(_))
        ),
        Ok(Ok(_)) | Ok(Err(_)) | Err(_) => false,
    };
    if iperf3 {
        // Wait (bounded) for the server to close its end: a stock iperf3 server closes the
        // probe's session only after it noticed our FIN, and until then it answers the next
        // connection — the run right after the probe — as busy (a reset, seen with 3.12).
        let mut sink = [0u8; 64];
        let _ = tokio::time::timeout(PROBE_CLOSE_WAIT, async {
            while let Ok(n) = s.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
    }
    Ok(iperf3)
}

/// Why [`probe_iperf3`] could not tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeError {
    /// What went wrong, for the user.
    pub message: String,
    /// The TCP connection was refused: nothing listens on TCP there (a UDP-only iperf 2
    /// server, `iperf -s -u`, may still).
    pub refused: bool,
}

/// How long [`probe_iperf3`] waits for an iperf3 server to close the probe's session.
const PROBE_CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Read the server's next state byte and hand it to the control machine: the step it calls
/// for, or the failure with its kind (the code and errno of a SERVER_ERROR read after it).
async fn await_step(
    ctl: &mut ClientControl,
    ctrl: &mut TcpStream,
    limit: Duration,
) -> Result<ClientStep, ClientError> {
    let b = framing::read_state(ctrl, limit)
        .await
        .map_err(|e| match e {
            WireError::Closed => {
                err(wire::ierr_text(ierr::IECTRLCLOSE)).kind(FailKind::ControlClosed)
            }
            WireError::Io(io) => {
                let kind = FailKind::of_io(&io);
                err(format!(
                    "unable to receive control message: {}",
                    WireError::Io(io)
                ))
                .kind(kind)
            }
            e => err(format!("unable to receive control message: {e}")),
        })?;
    match ctl.on_state(b) {
        Ok(step) => Ok(step),
        Err(e) => Err(control_error(ctrl, e).await),
    }
}

/// The [`ClientError`] for a control failure; a SERVER_ERROR's code and errno are read from
/// the control connection first (5 s and 1 s at most).
async fn control_error(ctrl: &mut TcpStream, e: ControlError) -> ClientError {
    let e = match e {
        ControlError::ServerError(None) => {
            let mut w = [0u8; 8];
            let code = match framing::read_exact_timeout(
                ctrl,
                &mut w[..4],
                Duration::from_secs(5),
                "error",
            )
            .await
            {
                Ok(()) => i32::from_be_bytes([w[0], w[1], w[2], w[3]]),
                Err(_) => ierr::IEMESSAGE,
            };
            let errno = match framing::read_exact_timeout(
                ctrl,
                &mut w[4..],
                Duration::from_secs(1),
                "errno",
            )
            .await
            {
                Ok(()) => i32::from_be_bytes([w[4], w[5], w[6], w[7]]),
                Err(_) => 0,
            };
            e.with_code(code, errno)
        }
        e => e,
    };
    let kind = match e {
        ControlError::AccessDenied => FailKind::AccessDenied,
        ControlError::ServerError(_) | ControlError::ServerTerminate => FailKind::ServerError,
        ControlError::OutOfOrder { .. } | ControlError::NotAState(_) => FailKind::Protocol,
        ControlError::ClientTerminate => FailKind::Other,
    };
    err(e.text()).kind(kind)
}

/// Run one test. `events` receives progress; `cancel` (when notified) stops the test early,
/// telling the server CLIENT_TERMINATE. Returns the final report or an error.
pub(crate) async fn run(
    spec: ClientSpec,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<Arc<Notify>>,
) -> Result<Report, ClientError> {
    if !spec.after_probe {
        return run_once(spec, events, cancel).await;
    }
    let t = tokio::time::Instant::now();
    loop {
        match run_once(spec.clone(), events.clone(), cancel.clone()).await {
            Err(e)
                if e.partial.is_none()
                    && busy_after_probe(e.kind)
                    && t.elapsed() < AFTER_PROBE_RETRY =>
            {
                tracing::debug!(host = %spec.host, "server not ready after the probe ({}); trying again", e.message);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            r => return r,
        }
    }
}

/// How long a run right after [`probe_iperf3`] tries again when the server is not ready.
const AFTER_PROBE_RETRY: Duration = Duration::from_secs(3);

/// A first connection refused, reset or denied: what a stock iperf3 server does for a moment
/// after the probe's session (it closes its listener and opens a new one).
fn busy_after_probe(kind: FailKind) -> bool {
    matches!(
        kind,
        FailKind::RefusedOrReset | FailKind::AccessDenied | FailKind::ControlClosed
    )
}

async fn run_once(
    spec: ClientSpec,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<Arc<Notify>>,
) -> Result<Report, ClientError> {
    spec.validate().map_err(err)?;
    let mut params = spec.params.clone();
    let peer = {
        let (h, p, f) = (spec.host.clone(), spec.port, spec.family);
        crate::engine::task::spawn_blocking(move || net::resolve(&h, p, f))
            .await
            .map_err(|e| err(e.to_string()))?
            .map_err(|e| err(format!("unable to resolve host '{}': {e}", spec.host)))?
    };
    let udp = params.protocol == Protocol::Udp;
    let max_udp = if peer.is_ipv4() {
        crate::engine::udp::MAX_UDP_LEN_V4
    } else {
        crate::engine::udp::MAX_UDP_LEN_V6
    };
    if udp && peer.is_ipv4() && params.len as usize > max_udp {
        return Err(err(format!(
            "UDP datagram size {} is above the IPv4 maximum of {max_udp} bytes (-l)",
            params.len,
        )));
    }
    let started = chrono::Utc::now();
    let cookie = wire::make_cookie();
    let Control {
        mut ctrl,
        mut ctl,
        local,
        mss,
    } = connect(&spec, peer, &cookie).await?;
    if udp && params.len == 0 {
        // iperf3's default UDP size: the control connection's MSS (1460 if unknown).
        params.len = if mss > 0 { mss } else { 1460 }.clamp(16, max_udp as u32);
    }
    // PARAM_EXCHANGE: our parameters; the server answers CREATE_STREAMS.
    framing::write_json(&mut ctrl, &params.to_json())
        .await
        .map_err(|e| err(format!("unable to send parameters to server: {e}")))?;
    await_step(&mut ctl, &mut ctrl, CONTROL_TIMEOUT).await?;
    let streams = create_streams(&spec, &params, peer, local, cookie).await?;

    let mut report = Report::new(
        Role::Client,
        params.clone(),
        wire::cookie_str(&cookie),
        (spec.host.clone(), spec.port),
        local,
        spec.interval,
    );
    report.timestamp = started.timestamp();
    report.timestamp_ms = started.timestamp_millis();
    report.tcp_mss_default = mss;
    describe_streams(&mut report, &streams);
    let congestion = streams.first().and_then(|s| s.congestion());
    let mut phase = DataPhase::new(params, streams, spec.interval);
    if let Some(n) = spec.burst {
        // The senders stop at the burst's datagrams (a local -k the server never hears of).
        phase.set_send_cap(n);
    }
    let mut test = ClientTest {
        spec: &spec,
        ctrl,
        ctl,
        local,
        report,
        phase,
        congestion,
        events: &events,
    };
    let ended = test.run(cancel.as_deref()).await;
    let ClientTest {
        mut ctrl,
        phase,
        report,
        ..
    } = test;
    stop_phase(phase).await;
    ended?;
    // DISPLAY_RESULTS gives one step: IPERF_DONE.
    use tokio::io::AsyncWriteExt;
    let _ = framing::write_state(&mut ctrl, State::IperfDone).await;
    let _ = ctrl.shutdown().await;
    Ok(report)
}

/// The control connection once the server answered the cookie as an iperf3 server does.
struct Control {
    ctrl: TcpStream,
    /// In [`Phase::ParamExchange`](super::control::Phase::ParamExchange).
    ctl: ClientControl,
    /// The control connection's local address.
    local: std::net::SocketAddr,
    /// Its MSS, bytes (0 if unknown).
    mss: u32,
}

/// Connect the control connection to `peer`, send the `cookie` and read the server's first
/// answer (PARAM_EXCHANGE). A server that stays silent, closes, or answers with no state is
/// taken for an iperf 2 server, and the error says so.
async fn connect(
    spec: &ClientSpec,
    peer: std::net::SocketAddr,
    cookie: &[u8; wire::COOKIE_SIZE],
) -> Result<Control, ClientError> {
    let ctrl_opts = SockOpts {
        bind: spec.sock.bind,
        bind_dev: spec.sock.bind_dev.clone(),
        ..Default::default()
    };
    let ct = spec.connect_timeout;
    let std_ctrl = crate::engine::task::spawn_blocking(move || {
        net::connect_tcp(peer, &ctrl_opts, 0, false, ct)
    })
    .await
    .map_err(|e| err(e.to_string()))?
    .map_err(|e| {
        err(format!("unable to connect to server {peer}: {e}")).kind(FailKind::of_io(&e))
    })?;
    if let Some(ka) = &spec.cntl_ka {
        ka.apply(&std_ctrl).map_err(err)?;
    }
    let mss = net::mss(&std_ctrl);
    std_ctrl
        .set_nonblocking(true)
        .map_err(|e| err(e.to_string()))?;
    let local = std_ctrl.local_addr().map_err(|e| err(e.to_string()))?;
    let mut ctrl = TcpStream::from_std(std_ctrl).map_err(|e| err(e.to_string()))?;
    use tokio::io::AsyncWriteExt;
    ctrl.write_all(cookie).await.map_err(|e| {
        err(format!("unable to send cookie to server: {e}")).kind(FailKind::of_io(&e))
    })?;
    // An iperf3 server answers the cookie at once (PARAM_EXCHANGE, or ACCESS_DENIED when
    // busy); an iperf 2 server takes it as a stream header and stays silent.
    let mut ctl = ClientControl::new();
    match tokio::time::timeout(
        IPERF2_SILENCE,
        await_step(&mut ctl, &mut ctrl, CONTROL_TIMEOUT),
    )
    .await
    {
        Ok(Ok(_)) => Ok(Control {
            ctrl,
            ctl,
            local,
            mss,
        }),
        // An iperf3 server's first byte is PARAM_EXCHANGE, ACCESS_DENIED or SERVER_ERROR.
        Ok(Err(e)) if matches!(e.kind, FailKind::AccessDenied | FailKind::ServerError) => Err(e),
        // Closing at once, a failed read or a byte that is no state is an iperf 2 server. A
        // reset keeps its kind (a stock server between two listeners after a probe resets
        // the cookie's connection); a close does not: it is what an iperf 2 server does.
        Ok(Err(e)) => {
            let kind = match e.kind {
                FailKind::RefusedOrReset => FailKind::RefusedOrReset,
                _ => FailKind::Other,
            };
            Err(err(format!(
                "{}: it did not answer the iperf3 cookie as iperf3 does ({})",
                crate::engine::iperf2::LOOKS_LIKE_IPERF2,
                e.message
            ))
            .kind(kind))
        }
        Err(_) => Err(err(format!(
            "{}: no answer to the iperf3 cookie within {} s (an iperf 2 server listens without answering; use peer type iperf 2, or --iperf2 on the command line)",
            crate::engine::iperf2::LOOKS_LIKE_IPERF2,
            IPERF2_SILENCE.as_secs()
        ))),
    }
}

/// CREATE_STREAMS: open the test's data streams (senders first, then receivers for bidir;
/// ids 1, 3, 4, …), each TCP stream announcing itself with the `cookie`, each UDP stream
/// with its hello. `local` is the control connection's address.
async fn create_streams(
    spec: &ClientSpec,
    params: &Params,
    peer: std::net::SocketAddr,
    local: std::net::SocketAddr,
    cookie: [u8; wire::COOKIE_SIZE],
) -> Result<Vec<DataStream>, ClientError> {
    let n_send = params.client_send_streams() as usize;
    let total = params.total_streams() as usize;
    let mut streams = Vec::with_capacity(total);
    let data_opts = SockOpts {
        // The control connection's own address, so the data streams leave the same way;
        // not a link-local one (it binds only with its scope, and the peer's scope already
        // sends the streams out of the right interface).
        bind: spec
            .sock
            .bind
            .or(Some(local.ip()).filter(|ip| !net::is_link_local_v6(*ip))),
        bind_dev: spec.sock.bind_dev.clone(),
        cport: spec.sock.cport,
        window: params.window,
        mss: params.mss,
        nodelay: params.nodelay,
        tos: params.tos,
        congestion: params.congestion.clone(),
        fq_rate: params.fq_rate,
    };
    let ct = spec.connect_timeout;
    for i in 0..total {
        let opts = data_opts.clone();
        let cport = if opts.cport != 0 {
            opts.cport.saturating_add(i as u16)
        } else {
            0
        };
        if params.protocol == Protocol::Udp {
            let reverse_len = params.len as usize;
            let df = params.dont_fragment;
            let wide = params.udp_counters_64bit;
            let s = crate::engine::task::spawn_blocking(move || {
                udp_stream(peer, &opts, cport, df, reverse_len, wide)
            })
            .await
            .map_err(|e| err(e.to_string()))?
            .map_err(|e| err(format!("unable to connect UDP stream: {e}")))?;
            let ds = DataStream::new_udp(wire::stream_id(i), i < n_send, s, wide)
                .map_err(|e| err(e.to_string()))?;
            streams.push(ds);
            continue;
        }
        let s =
            crate::engine::task::spawn_blocking(move || -> std::io::Result<std::net::TcpStream> {
                let mut s = net::connect_tcp(peer, &opts, cport, true, ct)?;
                use std::io::Write;
                s.write_all(&cookie)?;
                Ok(s)
            })
            .await
            .map_err(|e| err(e.to_string()))?
            .map_err(|e| err(format!("unable to connect stream: {e}")))?;
        let ds =
            DataStream::new(wire::stream_id(i), i < n_send, s).map_err(|e| err(e.to_string()))?;
        streams.push(ds);
    }
    Ok(streams)
}

/// A client test with its streams created, through the phases of the iperf3 control flow:
/// start (TEST_START, TEST_RUNNING), data (to TEST_END), results exchange, DISPLAY_RESULTS.
/// The caller stops the data phase whichever way it ended.
struct ClientTest<'a> {
    spec: &'a ClientSpec,
    ctrl: TcpStream,
    ctl: ClientControl,
    /// The control connection's local address.
    local: std::net::SocketAddr,
    report: Report,
    phase: DataPhase,
    /// The first stream's congestion control (TCP).
    congestion: Option<String>,
    events: &'a Option<mpsc::UnboundedSender<Event>>,
}

impl ClientTest<'_> {
    /// Every phase in order, up to and including DISPLAY_RESULTS.
    async fn run(&mut self, cancel: Option<&Notify>) -> Result<(), ClientError> {
        let (timers_from, cpu, drops_end) = self.start().await?;
        let test_end = self.data(cancel, timers_from, &cpu).await?;
        self.exchange_results(test_end, drops_end).await
    }

    /// TEST_START (the -t and -O timers run from it), the first reading of the drop
    /// counters, TEST_RUNNING, the stream threads started.
    async fn start(
        &mut self,
    ) -> Result<
        (
            tokio::time::Instant,
            CpuMark,
            Option<super::server::DropsEnd>,
        ),
        ClientError,
    > {
        await_step(&mut self.ctl, &mut self.ctrl, CONTROL_TIMEOUT).await?;
        // As a stock client's (`create_client_timers`, `create_client_omit_timer` at
        // TEST_START) and as the server's omit timer: a counted window that started later
        // than the server's made it count more than we sent.
        let timers_from = tokio::time::Instant::now();
        let cpu = CpuMark::now();
        let drops_end = match &self.spec.drops {
            Some(d) => {
                let word = direction_word(self.phase.params.direction, Role::Client);
                d.begin(self.local.ip(), word).await
            }
            None => None,
        };
        await_step(&mut self.ctl, &mut self.ctrl, CONTROL_TIMEOUT).await?;
        let check_recv = self.phase.params.client_recv_streams() > 0;
        self.phase
            .start(check_recv)
            .map_err(|e| err(format!("unable to start stream threads: {e}")))?;
        if let Some(tx) = self.events {
            let _ = tx.send(Event::Started(Box::new(self.report.clone())));
        }
        Ok((timers_from, cpu, drops_end))
    }

    /// The data phase until it ends (timer, byte/block target, cancel, or the server), the
    /// totals and this side's CPU since `cpu` frozen into the report. Gives the result of a TCP test's early TEST_END.
    async fn data(
        &mut self,
        cancel: Option<&Notify>,
        timers_from: tokio::time::Instant,
        cpu: &CpuMark,
    ) -> Result<Option<Result<(), WireError>>, ClientError> {
        let phase = &mut self.phase;
        let outcome = drive(
            self.spec,
            phase,
            &mut self.ctl,
            &mut self.ctrl,
            self.events,
            cancel,
            timers_from,
        )
        .await;
        // At the end of a TCP test, TEST_END goes out at once (the senders told to stop, not
        // yet joined), as a stock client sends it when its timer fires: the server counts
        // until it arrives, so every millisecond spent joining threads first was counted by
        // the server and not by us. UDP senders are joined first, so no datagram leaves after
        // TEST_END (the server's datagram count is the one we compare with).
        let test_end = if matches!(outcome, Drive::Ended) && !phase.udp() {
            phase
                .shared
                .stop_send
                .store(true, std::sync::atomic::Ordering::Relaxed);
            Some(framing::write_state(&mut self.ctrl, self.ctl.end_test()).await)
        } else {
            None
        };
        let final_rec = phase.finish().await;
        if let (Some(rec), Some(tx)) = (&final_rec, self.events) {
            let _ = tx.send(Event::Interval(rec.clone()));
        }
        phase.request_stop();
        let report = &mut self.report;
        report_phase(report, phase, cpu.util_since(), &self.congestion);
        match outcome {
            Drive::Ended => Ok(test_end),
            Drive::Failed(msg, aborted) => {
                if aborted {
                    let _ = framing::write_state(&mut self.ctrl, self.ctl.terminate()).await;
                }
                report.error = Some(msg.clone());
                Err(ClientError {
                    message: msg,
                    partial: Some(Box::new(report.clone())),
                    aborted,
                    kind: FailKind::Other,
                })
            }
        }
    }

    /// TEST_END (unless the data phase sent it) → EXCHANGE_RESULTS → our results → theirs
    /// → DISPLAY_RESULTS.
    async fn exchange_results(
        &mut self,
        test_end: Option<Result<(), WireError>>,
        drops_end: Option<super::server::DropsEnd>,
    ) -> Result<(), ClientError> {
        let ctrl = &mut self.ctrl;
        let test_end = match test_end {
            Some(r) => r,
            None => framing::write_state(ctrl, self.ctl.end_test()).await,
        };
        if let Err(e) = test_end {
            return Err(self.fail(format!("unable to send TEST_END: {e}")));
        }
        if let Err(e) = await_step(&mut self.ctl, ctrl, CONTROL_TIMEOUT).await {
            return Err(self.fail(e.message));
        }
        let report = &mut self.report;
        let cpu_local = report.cpu_local;
        let mut mine = self
            .phase
            .results(cpu_local, self.congestion.clone(), &report.streams);
        let flow = super::server::TestFlow::of(report);
        mine.netperfd_drops = super::server::drops_at_end(drops_end, flow).await;
        report.local_drops = mine.netperfd_drops.clone();
        if let Err(e) = framing::write_json(ctrl, &mine.to_json()).await {
            return Err(self.fail(format!("unable to send results: {e}")));
        }
        let theirs = match framing::read_json(ctrl, wire::MAX_RESULTS_JSON, CONTROL_TIMEOUT)
            .await
            .map_err(|e| e.to_string())
            .and_then(|v| Results::from_json(&v).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => return Err(self.fail(format!("unable to receive results: {e}"))),
        };
        self.ctl.on_results();
        let elapsed = self.phase.started.elapsed().as_secs_f64();
        if let Err(e) = merge_remote(&mut report.streams, &theirs, elapsed, &self.phase.params) {
            return Err(self.fail(e));
        }
        // What the server sent until our TEST_END reached it arrived after we stopped
        // counting: late, not lost.
        self.phase.note_late_arrivals(&mut report.streams);
        count_trailing_loss(report, &theirs, elapsed, &self.phase.params);
        report.cpu_remote = CpuUtil {
            total: theirs.cpu_util_total,
            user: theirs.cpu_util_user,
            system: theirs.cpu_util_system,
        };
        if let Some(c) = &theirs.congestion_used {
            if report.sender_congestion.is_none() {
                report.sender_congestion = Some(c.clone());
            } else if report.receiver_congestion.is_none() {
                report.receiver_congestion = Some(c.clone());
            }
        }
        report.server_output_text = theirs.server_output_text;
        report.server_output_json = theirs.server_output_json;
        report.peer_drops = theirs.netperfd_drops;
        report.peer_pacing = theirs.netperfd_pacing;
        if let Err(e) = await_step(&mut self.ctl, &mut self.ctrl, CONTROL_TIMEOUT).await {
            return Err(self.fail(e.message));
        }
        Ok(())
    }

    /// A failure after the data phase: the report so far goes with it, carrying the message.
    fn fail(&self, msg: String) -> ClientError {
        ClientError {
            message: msg.clone(),
            partial: Some(Box::new(Report {
                error: Some(msg),
                ..self.report.clone()
            })),
            aborted: false,
            kind: FailKind::Other,
        }
    }
}

async fn stop_phase(mut phase: DataPhase) {
    let _ = crate::engine::task::spawn_blocking(move || phase.stop()).await;
}

/// Open one UDP stream: a socket connected to the server, the 4-byte hello, and the server's
/// 4-byte reply (datagrams longer than 4 bytes — early data in reverse mode — are skipped).
fn udp_stream(
    peer: std::net::SocketAddr,
    opts: &SockOpts,
    cport: u16,
    df: bool,
    len: usize,
    wide: bool,
) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol as P, SockAddr, Socket, Type};
    let domain = if peer.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(domain, Type::DGRAM, Some(P::UDP))?;
    if let Some(dev) = &opts.bind_dev {
        net::bind_device(&s, dev)?;
    }
    let want = opts.window.map(|w| w as usize).unwrap_or(4 * 1024 * 1024);
    let _ = s.set_recv_buffer_size(want);
    let _ = s.set_send_buffer_size(opts.window.map(|w| w as usize).unwrap_or(1024 * 1024));
    if opts.tos > 0 && peer.is_ipv4() {
        let _ = s.set_tos(opts.tos);
    }
    // `--fq-rate` paces UDP streams too, as stock iperf3's iperf_udp_connect does (an fq
    // qdisc enforces it; measured in the VM lab: 4.8 Mbit/s at --fq-rate 5M).
    net::set_fq_rate(&s, opts.fq_rate);
    if opts.bind.is_some() || cport != 0 {
        let ip = opts.bind.unwrap_or(if peer.is_ipv4() {
            std::net::IpAddr::from([0u8, 0, 0, 0])
        } else {
            std::net::IpAddr::from([0u16; 8])
        });
        s.bind(&SockAddr::from(std::net::SocketAddr::new(ip, cport)))?;
    }
    s.connect(&SockAddr::from(peer))?;
    let sock: std::net::UdpSocket = s.into();
    if df && peer.is_ipv4() {
        crate::engine::udp::set_dont_fragment(&sock)?;
    }
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    sock.send(&crate::engine::udp::HELLO)?;
    let mut buf = vec![0u8; len.max(64) + 64];
    // Datagrams may come before the reply: a previous test's stream from the same server port
    // to a reused local port (seen in a full test run: 185 kB of them in 50 ms failed a -R
    // test when we gave up after 128 datagrams). They are not this test's: skip them until
    // the reply, for at most the hello's own 10 s. The server's own stream is told apart by
    // its first sequence numbers: when the reply was lost on the way (a lossy link, a
    // firewall) and the server's data already flows (`-R`, `--bidir`), the stream was
    // accepted, and its first datagram is left in the socket for the receiver to count.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut skipped = 0usize;
    loop {
        let n = sock.peek(&mut buf).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("no reply to the UDP hello from {peer}: {e}"),
            )
        })?;
        if n == 4 {
            sock.recv(&mut buf)?;
            if skipped > 0 {
                tracing::debug!(%peer, skipped, "datagrams before the UDP hello reply skipped");
            }
            return Ok(sock);
        }
        if let Some(seq) = stream_start_seq(&buf[..n.min(buf.len())], wide) {
            tracing::warn!(
                %peer,
                seq,
                "the server's reply to the UDP hello was lost; its data stream has begun, so the stream is connected"
            );
            return Ok(sock);
        }
        sock.recv(&mut buf)?;
        skipped += n;
        if std::time::Instant::now() >= deadline {
            return Err(std::io::Error::other(format!(
                "no 4-byte UDP reply from {peer} within 10 s ({skipped} bytes of other datagrams came)"
            )));
        }
    }
}

/// Sequence numbers a data stream may show in its first datagrams to the client that have
/// come before the client reads them: 1 up to this (loss on the way may hide the first few).
const STREAM_START_SEQS: u64 = 1000;

/// The sequence number of an iperf3 data datagram (sec, usec, then a 32-bit or, with
/// `wide` (`--udp-counters-64bit`), a 64-bit sequence number, big-endian) when it is among a
/// stream's first [`STREAM_START_SEQS`]; `None` for anything else (a short datagram, a
/// stream well under way).
fn stream_start_seq(d: &[u8], wide: bool) -> Option<u64> {
    let (_, seq) = crate::engine::datagram::read_header(d, wide)?;
    (1..=STREAM_START_SEQS).contains(&seq).then_some(seq)
}

enum Drive {
    Ended,
    Failed(String, bool),
}

/// The running part: interval ticks, the end timer, byte/block targets, the omit timer (both
/// timers from `start`, when TEST_START came), and
/// anything the server says on the control connection meanwhile.
async fn drive(
    spec: &ClientSpec,
    phase: &mut DataPhase,
    ctl: &mut ClientControl,
    ctrl: &mut TcpStream,
    events: &Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<&Notify>,
    start: tokio::time::Instant,
) -> Drive {
    let p = &spec.params;
    let interval = if spec.interval > 0.0 {
        spec.interval
    } else {
        3600.0
    };
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs_f64(interval),
        Duration::from_secs_f64(interval),
    );
    let omit_at = start + Duration::from_secs(p.omit as u64);
    let end_at = if p.time > 0 {
        Some(start + Duration::from_secs((p.time + p.omit) as u64))
    } else {
        None
    };
    let mut omit_pending = p.omit > 0;
    // --rcv-timeout: a receiving client ends the test when nothing arrives for this long.
    let receives = p.client_recv_streams() > 0;
    let mut idle_check = tokio::time::interval(IdleWatch::period(spec.rcv_timeout));
    let mut idle = IdleWatch::new(
        spec.rcv_timeout,
        phase.received_total(),
        tokio::time::Instant::now(),
    );
    let never = Arc::new(Notify::new());
    let cancel = cancel.unwrap_or(&never);
    let mut b = [0u8; 1];
    use tokio::io::AsyncReadExt;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(rec) = phase.sample() {
                    if let Some(tx) = events { let _ = tx.send(Event::Interval(rec)); }
                }
            }
            _ = tokio::time::sleep_until(omit_at), if omit_pending => {
                omit_pending = false;
                if let Some(rec) = phase.end_omit() {
                    if let Some(tx) = events { let _ = tx.send(Event::Interval(rec)); }
                }
                tick.reset();
            }
            _ = async { match end_at { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                if !phase.omitting() { return Drive::Ended; }
            }
            _ = phase.shared.wake.notified() => {
                if let Some(e) = phase.shared.error() {
                    return Drive::Failed(e, false);
                }
                if spec.burst.is_none() && !phase.omitting() && (phase.shared.send_limit_reached() || phase.shared.recv_limit_reached()) {
                    return Drive::Ended;
                }
            }
            _ = cancel.notified() => {
                return Drive::Failed("interrupt - the client has terminated".into(), true);
            }
            _ = idle_check.tick(), if receives => {
                if idle.idle(phase.received_total(), tokio::time::Instant::now()) {
                    return Drive::Failed("idle timeout for receiving data".into(), true);
                }
            }
            r = ctrl.read(&mut b) => {
                match r {
                    Ok(0) | Err(_) => return Drive::Failed(wire::ierr_text(ierr::IECTRLCLOSE), false),
                    Ok(_) => {
                        // Every byte is an error while data flows (SERVER_TERMINATE, …).
                        let e = control_error(ctrl, ctl.refuse(b[0])).await;
                        return Drive::Failed(e.message, false);
                    }
                }
            }
        }
    }
}

/// The direction as a word for tables and history: the local side sends, receives, or both.
pub(crate) fn direction_word(d: Direction, role: Role) -> &'static str {
    match run_direction(d, role) {
        RunDirection::Bidir => "bidir",
        RunDirection::Send => "send",
        _ => "receive",
    }
}

/// The run's direction from this side's view, as the store keeps it: bidir, or send when
/// this side sends, else receive ([`direction_word`] is its word).
pub(crate) fn run_direction(d: Direction, role: Role) -> RunDirection {
    match (d, role) {
        (Direction::Bidir, _) => RunDirection::Bidir,
        (Direction::Send, Role::Client) | (Direction::Receive, Role::Server) => RunDirection::Send,
        _ => RunDirection::Receive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "server" on loopback that answers the hello with `stale` 1448-byte datagrams first
    /// (a previous test's stream to a reused port), then the 4-byte reply.
    fn server(stale: usize) -> std::net::SocketAddr {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = s.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut b = [0u8; 64];
            let (_, from) = s.recv_from(&mut b).unwrap();
            for _ in 0..stale {
                s.send_to(&[7u8; 1448], from).unwrap();
            }
            s.send_to(&[0x39, 0x38, 0x37, 0x36], from).unwrap();
        });
        addr
    }

    #[test]
    fn stale_datagrams_before_the_hello_reply_are_skipped() {
        // 200 x 1448 B = 290 kB first: the old bound (128 datagrams of the length) refused it.
        let sock = udp_stream(server(200), &SockOpts::default(), 0, false, 1448, false).unwrap();
        assert!(sock.peer_addr().is_ok());
        // Default length (0), too.
        assert!(udp_stream(server(50), &SockOpts::default(), 0, false, 0, false).is_ok());
    }

    /// `--fq-rate` sets SO_MAX_PACING_RATE on UDP streams as on TCP ones (bytes/s), as stock
    /// iperf3 does; it did nothing for UDP before (issue 39 item 4, seen with fq in the VM lab).
    #[test]
    fn fq_rate_paces_udp_streams_too() {
        use std::os::fd::AsFd;
        let opts = SockOpts {
            fq_rate: 5_000_000,
            ..SockOpts::default()
        };
        let sock = udp_stream(server(0), &opts, 0, false, 1448, false).unwrap();
        let got = crate::engine::sys::getsockopt_int(
            sock.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
        )
        .unwrap();
        assert_eq!(got, 625_000);
        let plain = udp_stream(server(0), &SockOpts::default(), 0, false, 1448, false).unwrap();
        let got = crate::engine::sys::getsockopt_int(
            plain.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
        )
        .unwrap();
        assert_eq!(got, -1, "unpaced: ~0U");
    }

    #[test]
    fn a_lost_hello_reply_is_forgiven_when_the_stream_has_begun() {
        // The server accepted the hello (its reply was lost) and began sending: stale
        // datagrams first, then the stream's datagram 2 (datagram 1 lost too).
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = s.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut b = [0u8; 64];
            let (_, from) = s.recv_from(&mut b).unwrap();
            s.send_to(&[7u8; 1448], from).unwrap();
            let mut d = vec![0u8; 1448];
            crate::engine::datagram::write_header(&mut d, 1, 2, 2, false);
            s.send_to(&d, from).unwrap();
        });
        let sock = udp_stream(addr, &SockOpts::default(), 0, false, 1448, false).unwrap();
        // The stream's datagram is still there for the receiver to count.
        let mut b = vec![0u8; 2048];
        assert_eq!(sock.recv(&mut b).unwrap(), 1448);
        assert_eq!(
            crate::engine::datagram::read_header(&b[..1448], false).map(|h| h.1),
            Some(2)
        );
    }

    fn run_against(addr: std::net::SocketAddr, after_probe: bool) -> ClientError {
        let mut spec = ClientSpec::new(&addr.ip().to_string());
        spec.port = addr.port();
        spec.params.time = 1;
        spec.after_probe = after_probe;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run(spec, None, None)).unwrap_err()
    }

    /// A TCP "server" that answers each connection with `reply` (after reading the cookie)
    /// and then closes it, until told to stop; joining it gives the connections it took.
    struct Answering {
        addr: std::net::SocketAddr,
        stop: Arc<std::sync::atomic::AtomicBool>,
        thread: std::thread::JoinHandle<usize>,
    }

    impl Answering {
        fn new(reply: &'static [u8]) -> Answering {
            use std::io::{Read, Write};
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let halt = stop.clone();
            let thread = std::thread::spawn(move || {
                l.set_nonblocking(true).unwrap();
                let mut took = 0;
                while !halt.load(std::sync::atomic::Ordering::Relaxed) {
                    match l.accept() {
                        Ok((mut c, _)) => {
                            c.set_nonblocking(false).unwrap();
                            let mut cookie = [0u8; 37];
                            let _ = c.read_exact(&mut cookie);
                            let _ = c.write_all(reply);
                            took += 1;
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
                took
            });
            Answering { addr, stop, thread }
        }

        fn took(self) -> usize {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            self.thread.join().unwrap()
        }
    }

    #[test]
    fn failures_carry_their_kind() {
        // Nothing listening: refused.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let e = run_against(addr, false);
        assert_eq!(e.kind, FailKind::RefusedOrReset, "{}", e.message);
        // ACCESS_DENIED (0xFF = -1) after the cookie: denied, with iperf3's words.
        let srv = Answering::new(&[0xFF]);
        let e = run_against(srv.addr, false);
        assert_eq!(e.kind, FailKind::AccessDenied, "{}", e.message);
        assert_eq!(e.message, wire::ierr_text(ierr::IEACCESSDENIED));
        assert_eq!(srv.took(), 1);
        // Closed right after the cookie: an iperf 2 server's way, not a busy iperf3 one.
        let srv = Answering::new(&[]);
        let e = run_against(srv.addr, false);
        assert_eq!(e.kind, FailKind::Other, "{}", e.message);
        assert!(e.message.contains("iperf 2"), "{}", e.message);
        assert_eq!(srv.took(), 1);
    }

    #[test]
    fn after_a_probe_a_denied_run_is_tried_again_for_3_s() {
        // A server that denies every connection: tried again every 200 ms for 3 s, then
        // the denial is the answer (about 15 tries; at least 10 on a slow machine).
        let srv = Answering::new(&[0xFF]);
        let e = run_against(srv.addr, true);
        assert_eq!(e.kind, FailKind::AccessDenied);
        let tries = srv.took();
        assert!((10..=17).contains(&tries), "{tries} tries");
        // Without the probe: one try.
        let srv = Answering::new(&[0xFF]);
        let _ = run_against(srv.addr, false);
        assert_eq!(srv.took(), 1);
    }

    #[test]
    fn only_a_young_stream_counts_as_the_server_s_data() {
        let dgram = |seq: u64, wide: bool| {
            let mut d = vec![0u8; 64];
            crate::engine::datagram::write_header(&mut d, 9, 9, seq, wide);
            d
        };
        assert_eq!(stream_start_seq(&dgram(1, false), false), Some(1));
        assert_eq!(stream_start_seq(&dgram(1000, true), true), Some(1000));
        assert_eq!(stream_start_seq(&dgram(1001, false), false), None);
        assert_eq!(stream_start_seq(&dgram(1 << 40, true), true), None);
        assert_eq!(stream_start_seq(&[7u8; 1448], false), None);
        assert_eq!(stream_start_seq(&[0u8; 11], false), None);
        assert_eq!(stream_start_seq(&dgram(5, true)[..12], true), None);
        assert_eq!(stream_start_seq(&dgram(0, false), false), None);
    }

    /// Issue 39: a bare `--cntl-ka` set 5/2/3 instead of the kernel's values. On a real
    /// loopback connection: SO_KEEPALIVE on, the values not given read back as the kernel's
    /// sysctls (the independent truth), the given ones as given; an idle time not above the
    /// kernel's interval × count is refused as stock 3.21 refuses it at connect.
    #[test]
    fn cntl_ka_sets_only_what_is_given() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let sysctl = |k: &str| -> u32 {
            std::fs::read_to_string(format!("/proc/sys/net/ipv4/tcp_keepalive_{k}"))
                .expect("sysctl")
                .trim()
                .parse()
                .expect("number")
        };
        let kernel = (sysctl("time"), sysctl("intvl"), sysctl("probes"));
        let conn = || std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let read = |c: &std::net::TcpStream| {
            let s = socket2::SockRef::from(c);
            (
                s.keepalive().expect("SO_KEEPALIVE"),
                s.keepalive_time().expect("idle").as_secs() as u32,
                s.keepalive_interval().expect("intvl").as_secs() as u32,
                s.keepalive_retries().expect("cnt"),
            )
        };
        let c = conn();
        assert!(!read(&c).0, "a new socket has no keepalive");
        assert_eq!(CntlKa::default().apply(&c), Ok(kernel));
        assert_eq!(read(&c), (true, kernel.0, kernel.1, kernel.2));
        let c = conn();
        let ka = CntlKa::parse("30/5/4").expect("parse");
        assert_eq!(ka.apply(&c), Ok((30, 5, 4)));
        assert_eq!(read(&c), (true, 30, 5, 4));
        let c = conn();
        let ka = CntlKa::parse("/7").expect("parse");
        assert_eq!(ka.apply(&c), Ok((kernel.0, 7, kernel.2)));
        assert_eq!(read(&c), (true, kernel.0, 7, kernel.2));
        // interval × count passes the parse (nothing else given), not the kernel's check.
        let c = conn();
        let ka = CntlKa::parse(&format!("{}", kernel.1 * kernel.2)).expect("parse");
        assert!(ka.apply(&c).unwrap_err().contains("should be larger"));
        assert_eq!(read(&c).1, kernel.0, "nothing set after the refusal");
        // The board's own runs (5 s, 2 s × 3) connect with theirs.
        let c = conn();
        assert_eq!(BOARD_CNTL_KA.apply(&c), Ok((5, 2, 3)));
        assert_eq!(read(&c), (true, 5, 2, 3));
    }

    /// Issue 39: `--rcv-timeout 2000` ended 3 s after the data stopped (checked once a second,
    /// the last data noticed up to a second late). Data every 5 ms until 1.005 s, checks at
    /// the watch's own period: the end comes 2.0–2.4 s after the last data, never before.
    #[test]
    fn rcv_timeout_ends_at_the_asked_idle_time() {
        for (ms, slack) in [(2000u64, 400u64), (100, 100), (120_000, 2000)] {
            let timeout = Duration::from_millis(ms);
            let period = IdleWatch::period(timeout);
            assert!(period * 2 <= Duration::from_millis(slack));
            let t0 = tokio::time::Instant::now();
            // A datagram every 5 ms, the last at 1.005 s.
            let last_data = Duration::from_millis(1005);
            let rx_at = |t: Duration| (t.min(last_data).as_millis() / 5) as u64;
            let mut w = IdleWatch::new(timeout, 0, t0);
            let mut t = Duration::ZERO;
            let fired = loop {
                t += period;
                if w.idle(rx_at(t), t0 + t) {
                    break t;
                }
                assert!(t < Duration::from_secs(1000), "never fired");
            };
            let after = fired - last_data;
            assert!(after >= timeout, "{ms} ms: ended {after:?} after the data");
            assert!(
                after <= timeout + Duration::from_millis(slack),
                "{ms} ms: ended {after:?} after the data"
            );
        }
    }

    /// Issue 39: the auto probe left through the routed port, not the test's bound one, and
    /// a refused probe was not told from other failures. The listener sees the probe come
    /// from the bound source address (127.0.0.2, not the routed 127.0.0.1); a closed port is
    /// `refused`.
    #[tokio::test]
    async fn probe_leaves_from_the_test_source_and_tells_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = l.local_addr().expect("addr").port();
        let mut spec = ClientSpec::new("127.0.0.1");
        spec.port = port;
        spec.sock.bind = Some(std::net::IpAddr::from([127, 0, 0, 2]));
        let acc = std::thread::spawn(move || {
            let (c, from) = l.accept().expect("accept");
            drop(c);
            from.ip()
        });
        assert_eq!(probe_iperf3(&spec).await, Ok(false));
        assert_eq!(
            acc.join().expect("thread"),
            std::net::IpAddr::from([127, 0, 0, 2])
        );
        // The port is closed now.
        let e = probe_iperf3(&spec).await.expect_err("refused");
        assert!(e.refused, "{e:?}");
        assert!(e.message.contains("refused"), "{e:?}");
    }
}
