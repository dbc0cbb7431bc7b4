//! iperf 2 server: serves `iperf -c` clients (2.0.5 … 2.1.x) on TCP and UDP (default port
//! 5001), many at once. Each TCP connection and each UDP flow (source address) is one test.
//! TCP: the first 24 bytes are the v1 header; bytes are counted (header included) until EOF.
//! UDP: the first datagram opens the flow (a socket connected to the sender takes it over),
//! the FIN is answered with the server report at the offset the client's layout expects.
//! A header asking for a return test (`-r`/`-d`) makes us connect back to the client's
//! `mPort` and send. A hostile or truncated header ends that test alone, with a logged reason.

use super::wire::{self, ClientHeader, Layout, Return};
use super::LOOKS_LIKE_IPERF3;
use super::{drive, phase_params, Event, Leg, Outcome, Role, StreamResult, TestInfo, Until};
use super::{HeaderParams, ServedParams};
use crate::engine::net::{self, SockOpts};
use crate::engine::session::{DataPhase, DataStream};
use crate::model::{RunProtocol, RunStatus};
use socket2::{Domain, Socket, Type};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};

/// How the server runs.
#[derive(Debug, Clone)]
pub(crate) struct Iperf2ServerConfig {
    /// Ports (TCP and UDP each), default [5001].
    pub ports: Vec<u16>,
    /// Address to bind; default all (IPv6 dual-stack, else IPv4).
    pub bind: Option<IpAddr>,
    /// Interval between reports, seconds.
    pub interval: f64,
    /// A test with no data for this long ends (peer vanished).
    pub stall: Duration,
    /// Most TCP connections open at once, every stream of a `-P` group counted (each has
    /// a receiving thread); more are closed at once. Default [`MAX_TCP_CONNS`].
    pub max_tcp_conns: usize,
}

impl Default for Iperf2ServerConfig {
    fn default() -> Self {
        Iperf2ServerConfig {
            ports: vec![wire::DEFAULT_PORT],
            bind: None,
            interval: 1.0,
            stall: Duration::from_secs(10),
            max_tcp_conns: MAX_TCP_CONNS,
        }
    }
}

/// Bind a UDP socket with SO_REUSEADDR (so per-flow sockets connected to one sender can share
/// the port), optionally connected to `peer`.
pub(crate) fn bind_udp(local: SocketAddr, peer: Option<SocketAddr>) -> std::io::Result<UdpSocket> {
    bind_udp_on(local, peer, None)
}

/// [`bind_udp`] on device `dev` (SO_BINDTODEVICE before the bind and the connect, so a
/// wildcard `local` connected to `peer` takes `dev`'s source address and route, not the
/// routed port's: a flow socket bound after its connect missed the datagrams sent to `dev`'s
/// address).
pub(crate) fn bind_udp_on(
    local: SocketAddr,
    peer: Option<SocketAddr>,
    dev: Option<&str>,
) -> std::io::Result<UdpSocket> {
    let s = Socket::new(
        Domain::for_address(local),
        Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if let Some(d) = dev {
        crate::engine::net::bind_device(&s, d)?;
    }
    s.set_reuse_address(true)?;
    if local.is_ipv6() && local.ip().is_unspecified() {
        s.set_only_v6(false)?;
    }
    let _ = s.set_recv_buffer_size(4 * 1024 * 1024);
    s.bind(&local.into())?;
    if let Some(p) = peer {
        s.connect(&p.into())?;
    }
    Ok(s.into())
}

fn bind_udp_any(bind: Option<IpAddr>, port: u16) -> std::io::Result<UdpSocket> {
    match bind {
        Some(ip) => bind_udp(SocketAddr::new(ip, port), None),
        None => bind_udp(SocketAddr::new(IpAddr::from([0u16; 8]), port), None)
            .or_else(|_| bind_udp(SocketAddr::new(IpAddr::from([0u8; 4]), port), None)),
    }
}

/// Bound sockets of one port, so a busy port is an error before serving starts.
pub(crate) struct Listeners {
    tcp: Vec<TcpListener>,
    udp: Vec<UdpSocket>,
}

/// Bind TCP and UDP on every port. Errors name the port.
pub(crate) fn bind(cfg: &Iperf2ServerConfig) -> Result<Listeners, String> {
    let mut l = Listeners {
        tcp: Vec::new(),
        udp: Vec::new(),
    };
    for &p in &cfg.ports {
        l.tcp.push(
            crate::engine::iperf3::server::bind_listener(cfg.bind, p)
                .map_err(|e| format!("cannot listen for iperf 2 clients on TCP port {p}: {e}"))?,
        );
        l.udp.push(
            bind_udp_any(cfg.bind, p)
                .map_err(|e| format!("cannot listen for iperf 2 clients on UDP port {p}: {e}"))?,
        );
    }
    Ok(l)
}

struct Inner {
    cfg: Iperf2ServerConfig,
    next: AtomicU64,
    events: Option<mpsc::UnboundedSender<Event>>,
    /// Return tests started in the last second, by (client address, port, UDP): a `-P`
    /// client sends the header on every stream, the return test runs once.
    returns: Mutex<HashMap<(IpAddr, i32, bool), Instant>>,
    /// `-P` clients whose connections are still arriving: the first connection's task
    /// collects the others here and serves them all as one test.
    groups: Mutex<HashMap<GroupKey, mpsc::UnboundedSender<Member>>>,
}

/// What makes connections one `-P` client's streams: the source address, the server port and
/// the identical header a stock client writes on each (its `numThreads` says how many).
type GroupKey = (IpAddr, u16, [u8; wire::CLIENT_HEADER_LEN]);

/// One TCP connection of a test, with the bytes read before its stream starts.
struct Member {
    s: tokio::net::TcpStream,
    peer: SocketAddr,
    pre: u64,
    /// Its place under [`Iperf2ServerConfig::max_tcp_conns`], held until its test ends (a
    /// `-P` follower's task ends when it joins its group; the slot travels with it).
    slot: Slot,
    /// Whether its client asked for `--trip-times` (and we measure it).
    trip: Trip,
}

/// A TCP client's `--trip-times`, as its header says.
#[derive(Debug, Clone, PartialEq)]
enum Trip {
    /// Not asked.
    No,
    /// Asked, and measured: the client's start time (s, µs).
    Yes((u32, u32)),
    /// Asked, and ignored (why), as a stock server does when the start time is missing or
    /// more than 600 s from our clock: clocks that far apart give no useful figure.
    Ignored(String),
}

/// Whether to measure a `--trip-times` client, from its header's start time and our clock
/// (`now_s`, seconds since 1970).
fn trip_check(start: Option<(u32, u32)>, now_s: u32) -> Trip {
    let Some(st) = start else {
        return Trip::Ignored("the client's start time is invalid".into());
    };
    let diff = i64::from(now_s) - i64::from(st.0);
    if diff.abs() > wire::TRIP_MAX_CLOCK_DIFF_S {
        return Trip::Ignored(format!(
            "the client's start time is {diff} s from our clock (more than {} s)",
            wire::TRIP_MAX_CLOCK_DIFF_S
        ));
    }
    Trip::Yes(st)
}

/// One open TCP connection counted against the cap; freed when dropped.
struct Slot(Arc<std::sync::atomic::AtomicUsize>);

impl Slot {
    /// Take a place when fewer than `cap` are taken.
    fn take(count: &Arc<std::sync::atomic::AtomicUsize>, cap: usize) -> Option<Slot> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(count.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long the first connection of a `-P` client waits for the others, counted from its
/// header. Stock clients connect all streams at once; a stream that comes later is its own test.
const GROUP_WAIT: Duration = Duration::from_secs(1);

impl Inner {
    fn emit(&self, e: Event) {
        if let Some(tx) = &self.events {
            let _ = tx.send(e);
        }
    }

    fn first_return(&self, ip: IpAddr, port: i32, udp: bool) -> bool {
        let Ok(mut m) = self.returns.lock() else {
            return false;
        };
        m.retain(|_, t| t.elapsed() < Duration::from_secs(1));
        if m.contains_key(&(ip, port, udp)) {
            return false;
        }
        m.insert((ip, port, udp), Instant::now());
        true
    }
}

/// Serve on bound listeners until `shutdown` is notified.
pub(crate) async fn serve(
    l: Listeners,
    cfg: Iperf2ServerConfig,
    events: Option<mpsc::UnboundedSender<Event>>,
    shutdown: Option<Arc<Notify>>,
) {
    let inner = Arc::new(Inner {
        cfg,
        next: AtomicU64::new(1),
        events,
        returns: Mutex::new(HashMap::new()),
        groups: Mutex::new(HashMap::new()),
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in l.tcp {
        let i = inner.clone();
        tasks.push(crate::engine::task::spawn(accept_loop(i, t)));
    }
    let mut udp_addrs = Vec::new();
    for u in l.udp {
        let i = inner.clone();
        let st = stop.clone();
        let rt = tokio::runtime::Handle::current();
        udp_addrs.extend(u.local_addr().ok());
        std::thread::Builder::new()
            .name("iperf2-udp".into())
            .spawn(move || udp_loop(i, u, st, rt))
            .ok();
    }
    match shutdown {
        Some(s) => s.notified().await,
        None => std::future::pending::<()>().await,
    }
    stop.store(true, Ordering::Relaxed);
    for a in udp_addrs {
        crate::engine::echo::wake(a);
    }
    for t in tasks {
        t.abort();
    }
}

/// Default most TCP connections served at once (each has a receiving thread).
pub(crate) const MAX_TCP_CONNS: usize = 128;

async fn accept_loop(inner: Arc<Inner>, l: TcpListener) {
    let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cap = inner.cfg.max_tcp_conns;
    loop {
        match l.accept().await {
            Ok((s, peer)) => {
                let Some(slot) = Slot::take(&active, cap) else {
                    crate::peer_warn!(peer.ip(), %peer, "{cap} iperf 2 connections open; refused");
                    continue;
                };
                let i = inner.clone();
                crate::engine::task::spawn(tcp_test(i, s, peer, slot));
            }
            Err(e) => {
                crate::rate_warn!("iperf2-accept", "iperf 2 accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// A served test's stored settings: the client's header (`None`: it sent none), the UDP
/// header layout, `streams` streams, `--trip-times` measured.
fn served_params(
    hdr: Option<&ClientHeader>,
    layout: Option<Layout>,
    streams: usize,
    trip_times: bool,
) -> ServedParams {
    ServedParams {
        iperf2: true,
        header: hdr.map(HeaderParams::of),
        ret: hdr.map(|h| h.return_test()).unwrap_or(Return::None),
        layout,
        parallel: streams,
        trip_times,
        trip_times_ignored: None,
    }
}

/// What a served test is, from the board's view (the direction from the return test in `p`).
fn info(udp: bool, peer: SocketAddr, local: SocketAddr, p: &ServedParams) -> TestInfo {
    TestInfo {
        role: Role::Server,
        protocol: if udp {
            RunProtocol::Udp
        } else {
            RunProtocol::Tcp
        },
        peer_host: net::ip_text(peer.ip()),
        peer_port: peer.port(),
        local_host: net::ip_text(local.ip()),
        local_port: local.port(),
        direction: super::direction_word(p.ret, false),
        params: p.to_value(),
    }
}

async fn tcp_test(inner: Arc<Inner>, mut s: tokio::net::TcpStream, peer: SocketAddr, slot: Slot) {
    let local = s.local_addr().unwrap_or(peer);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (first, got) = read_opening(&mut s, deadline).await;
    if wire::looks_like_iperf3(&first[..got]) {
        refuse_iperf3(&inner, s, peer, local).await;
        return;
    }
    let mut pre = got as u64;
    if wire::is_auto_probe(&first[..got]) {
        // Peer type "auto" asking whether we speak iperf3 (docs/iperf2-wire.md §6): it
        // half-closes at once. Not a test run unless data follows after all.
        let mut more = [0u8; 4096];
        match tokio::time::timeout(Duration::from_secs(3), s.read(&mut more)).await {
            Ok(Ok(n)) if n > 0 => pre += n as u64,
            _ => {
                tracing::debug!(%peer, "iperf 2 port: a peer-type auto probe, not a test");
                return;
            }
        }
    }
    if got < wire::CLIENT_HEADER_LEN {
        crate::peer_warn!(peer.ip(), %peer, bytes = got, "iperf 2 connection closed before its 24-byte header");
        return;
    }
    let hdr = match ClientHeader::parse(&first[..got]) {
        Ok(h) => h,
        Err(e) => {
            crate::peer_warn!(peer.ip(), %peer, "iperf 2 header: {e}");
            return;
        }
    };
    let mut trip = Trip::No;
    if let Some((have, t)) = read_trip_header(&mut s, deadline, &first[..got], &hdr, peer).await {
        pre = have;
        trip = t;
    }
    let mut members = vec![Member {
        s,
        peer,
        pre,
        slot,
        trip: trip.clone(),
    }];
    if (2..=MAX_TCP_CONNS as i32).contains(&hdr.num_threads) {
        let mut key_hdr = [0u8; wire::CLIENT_HEADER_LEN];
        key_hdr.copy_from_slice(&first[..wire::CLIENT_HEADER_LEN]);
        let key = (peer.ip(), local.port(), key_hdr);
        match join_or_lead(&inner, key, hdr.num_threads as usize, members).await {
            None => return,
            Some(m) => members = m,
        }
    }
    let test = inner.next.fetch_add(1, Ordering::Relaxed);
    let ret_ok = return_allowed(&inner, &hdr, peer, false);
    serve_tcp(inner, test, members, peer, local, hdr, ret_ok).await;
}

/// Read a connection's opening bytes until `deadline`: the 24-byte header, or up to 37 bytes
/// when they may be an iperf3 cookie or our peer-type "auto" probe (whatever comes first).
/// Returns the buffer and how many bytes it holds.
async fn read_opening(
    s: &mut tokio::net::TcpStream,
    deadline: tokio::time::Instant,
) -> ([u8; 37], usize) {
    let mut first = [0u8; 37];
    let mut got = 0;
    while got < wire::CLIENT_HEADER_LEN
        || (got < 37
            && (first[..got].iter().all(|c| c.is_ascii_alphanumeric())
                || wire::could_be_auto_probe(&first[..got])))
    {
        match tokio::time::timeout_at(deadline, s.read(&mut first[got..])).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got += n,
            Err(_) => break,
        }
    }
    (first, got)
}

/// An iperf3 client on the iperf 2 port: recorded as a refused test, and the connection
/// held silent a while before it closes.
async fn refuse_iperf3(
    inner: &Inner,
    mut s: tokio::net::TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
) {
    crate::peer_warn!(peer.ip(), %peer, "iperf 2 port: {LOOKS_LIKE_IPERF3} (sent an iperf3 cookie); closing");
    report_refused(inner, peer, local, false, LOOKS_LIKE_IPERF3);
    // Stay silent a while: an iperf3 client then says the peer looks like iperf 2.x
    // instead of a bare "control socket closed".
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(n) = s.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// A 2.1/2.2 header long enough to hold a start time may ask for --trip-times
/// (docs/iperf2-wire.md §3.1): read all of it (≤ 256 bytes, stock's limit) until `deadline`,
/// so the client's first burst starts at our first data byte. `first` is what was read so
/// far. `None` when the header is not such a one; else the bytes read of it and whether
/// trip times are measured.
async fn read_trip_header(
    s: &mut tokio::net::TcpStream,
    deadline: tokio::time::Instant,
    first: &[u8],
    hdr: &ClientHeader,
    peer: SocketAddr,
) -> Option<(u64, Trip)> {
    let got = first.len();
    let full = hdr.tcp_len();
    if !(hdr.flags & wire::HEADER_EXTEND != 0
        && hdr.flags & wire::HEADER_LEN_BIT != 0
        && (wire::TCP_TRIP_HEADER_LEN - 8..=256).contains(&full)
        && got <= full)
    {
        return None;
    }
    let mut whole = first.to_vec();
    whole.resize(full, 0);
    let mut have = got;
    while have < full {
        match tokio::time::timeout_at(deadline, s.read(&mut whole[have..])).await {
            Ok(Ok(n)) if n > 0 => have += n,
            _ => break,
        }
    }
    let mut trip = Trip::No;
    if have == full && wire::tcp_trip_times(&whole) {
        trip = trip_check(wire::tcp_trip_start(&whole), wire::wall_now().0);
        if let Trip::Ignored(why) = &trip {
            crate::peer_warn!(peer.ip(), %peer, "iperf 2 --trip-times ignored: {why}");
        }
    }
    Some((have as u64, trip))
}

/// Whether the return test `hdr` asks for (if any) is run: its header checks out and it is
/// the first from `peer` for its port (`udp`: a UDP one).
fn return_allowed(inner: &Inner, hdr: &ClientHeader, peer: SocketAddr, udp: bool) -> bool {
    match hdr.return_test() {
        Return::None => false,
        _ => match hdr.check_return() {
            Ok(()) => inner.first_return(peer.ip(), hdr.port, udp),
            Err(e) => {
                crate::peer_warn!(peer.ip(), %peer, "iperf 2 return test refused: {e}");
                false
            }
        },
    }
}

/// Serve a TCP test over its connections `members` (one, or a `-P` client's): announce it
/// as `test`, receive until the client's streams end, then the return leg if `ret_ok`.
async fn serve_tcp(
    inner: Arc<Inner>,
    test: u64,
    members: Vec<Member>,
    peer: SocketAddr,
    local: SocketAddr,
    hdr: ClientHeader,
    ret_ok: bool,
) {
    let n = members.len();
    if n > 1 {
        tracing::debug!(%peer, streams = n, "iperf 2 -P client served as one test");
    }
    let mut streams = Vec::with_capacity(n);
    let mut pres = Vec::with_capacity(n);
    // Every stream's slot stays taken until the test (and its return leg) ends.
    let mut slots = Vec::with_capacity(n);
    let trip_asked = members
        .iter()
        .find(|m| m.trip != Trip::No)
        .map(|m| m.trip.clone());
    for (i, m) in members.into_iter().enumerate() {
        slots.push(m.slot);
        let ds =
            m.s.into_std()
                .and_then(|std| DataStream::new(i as u32 + 1, false, std));
        match ds {
            Ok(mut d) => {
                if let Trip::Yes(start) = m.trip {
                    d.trip_times(start);
                }
                streams.push(d);
                pres.push(m.pre);
            }
            Err(e) => crate::peer_warn!(m.peer.ip(), peer = %m.peer, "{e}"),
        }
    }
    if streams.is_empty() {
        return;
    }
    inner.emit(Event::Started {
        test,
        info: Box::new({
            let trip = matches!(trip_asked, Some(Trip::Yes(_)));
            let mut p = served_params(Some(&hdr), None, streams.len(), trip);
            if let Some(Trip::Ignored(why)) = &trip_asked {
                p.trip_times_ignored = Some(why.clone());
            }
            info(false, peer, local, &p)
        }),
    });
    let phase = DataPhase::new(
        phase_params(false, wire::TCP_DEFAULT_LEN, 0, 0),
        streams,
        inner.cfg.interval,
    );
    let leg = Leg {
        phase,
        until: Until::Recv {
            limit: Duration::from_secs(86_400 + 60),
            stall: inner.cfg.stall,
        },
        udp: Vec::new(),
        pre: pres,
        offset: 0.0,
        layout: Layout::V205,
    };
    run_test(inner, test, leg, peer, hdr, ret_ok, false).await;
    drop(slots);
}

/// A connection whose header asks for several streams (`-P`): hand it to the group of its
/// client already collecting (None: it joined), or become that group's first connection and
/// collect the others for up to [`GROUP_WAIT`] (the members, this one first). As a stock
/// iperf 2 server does, the streams are then one test with a [SUM].
async fn join_or_lead(
    inner: &Inner,
    key: GroupKey,
    expected: usize,
    mut members: Vec<Member>,
) -> Option<Vec<Member>> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    {
        let Ok(mut g) = inner.groups.lock() else {
            return Some(members);
        };
        if let Some(lead) = g.get(&key) {
            let Some(m) = members.pop() else {
                return Some(members);
            };
            match lead.send(m) {
                Ok(()) => return None,
                // That group stopped collecting (its task ended): start a new one.
                Err(mpsc::error::SendError(m)) => members.push(m),
            }
        }
        g.insert(key, tx.clone());
    }
    let deadline = tokio::time::Instant::now() + GROUP_WAIT;
    while members.len() < expected {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(m)) => members.push(m),
            _ => break,
        }
    }
    if let Ok(mut g) = inner.groups.lock() {
        if g.get(&key).is_some_and(|t| t.same_channel(&tx)) {
            g.remove(&key);
        }
    }
    // Joined between the deadline and the removal above.
    while let Ok(m) = rx.try_recv() {
        members.push(m);
    }
    Some(members)
}

/// Run the inbound leg and, when asked, the return leg; then report the outcome.
async fn run_test(
    inner: Arc<Inner>,
    test: u64,
    leg: Leg,
    peer: SocketAddr,
    hdr: ClientHeader,
    ret_ok: bool,
    udp: bool,
) {
    let interval = inner.cfg.interval;
    let ev = inner.events.clone();
    let ret = if ret_ok {
        hdr.return_test()
    } else {
        Return::None
    };
    let (mut streams, mut error, aborted);
    if ret == Return::Dual {
        let back = crate::engine::task::spawn(return_leg(inner.clone(), test, peer, hdr, udp, 0.0));
        let (r, e, a) = drive(leg, test, interval, ev, None).await;
        streams = r;
        error = e;
        aborted = a;
        match back.await {
            Ok(Ok(r2)) => streams.extend(r2),
            Ok(Err(e)) => error = error.or(Some(e)),
            Err(e) => error = error.or(Some(e.to_string())),
        }
    } else {
        let (r, e, a) = drive(leg, test, interval, ev, None).await;
        streams = r;
        error = e;
        aborted = a;
        if ret == Return::Tradeoff && error.is_none() {
            let offset = streams.first().map(|s| s.seconds).unwrap_or(0.0);
            match return_leg(inner.clone(), test, peer, hdr, udp, offset).await {
                Ok(r2) => streams.extend(r2),
                Err(e) => error = Some(e),
            }
        }
    }
    let status = if aborted {
        RunStatus::Aborted
    } else if error.is_some() {
        RunStatus::Failed
    } else {
        RunStatus::Completed
    };
    if let Some(e) = &error {
        crate::peer_warn!(peer.ip(), test, %peer, "iperf 2 test ended: {e}");
    }
    inner.emit(Event::Finished {
        test,
        outcome: Box::new(Outcome {
            status,
            error,
            streams,
            notes: Vec::new(),
            rate_check: None,
        }),
    });
}

/// Connect back to the client (`mPort`, its protocol, `numThreads` streams, no header) and
/// send for the header's amount at its rate and length.
async fn return_leg(
    inner: Arc<Inner>,
    test: u64,
    peer: SocketAddr,
    hdr: ClientHeader,
    udp: bool,
    offset: f64,
) -> Result<Vec<StreamResult>, String> {
    let to = SocketAddr::new(peer.ip(), hdr.port as u16);
    let n = hdr.num_threads as u32;
    let len = if hdr.buffer_len > 0 {
        hdr.buffer_len as usize
    } else if udp {
        wire::UDP_DEFAULT_LEN
    } else {
        wire::TCP_DEFAULT_LEN
    }
    .max(if udp { wire::UDP_MIN_LEN } else { 1 });
    let rate = if udp {
        if hdr.win_band > 0 {
            hdr.win_band as u64
        } else {
            wire::UDP_DEFAULT_RATE
        }
    } else {
        0
    };
    let (secs, bytes) = match hdr.amount() {
        wire::Amount::Time(t) => (t, 0),
        wire::Amount::Bytes(b) => (0.0, b * n as u64),
    };
    let mut streams = Vec::new();
    let mut socks = Vec::new();
    // The client's listener may need a moment to be up (2.0.5 starts it after sending).
    for i in 0..n {
        let id = 101 + i;
        let r = crate::engine::task::spawn_blocking(move || -> std::io::Result<DataStream> {
            if udp {
                let local = SocketAddr::new(
                    if to.is_ipv4() {
                        IpAddr::from([0u8; 4])
                    } else {
                        IpAddr::from([0u16; 8])
                    },
                    0,
                );
                let s = UdpSocket::bind(local)?;
                s.connect(to)?;
                DataStream::new_udp_iperf2(id, true, s, false)
            } else {
                let mut last = None;
                for _ in 0..10 {
                    match net::connect_tcp(
                        to,
                        &SockOpts::default(),
                        0,
                        true,
                        Duration::from_secs(5),
                    ) {
                        Ok(s) => return DataStream::new(id, true, s),
                        Err(e) => last = Some(e),
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(last.unwrap_or_else(|| std::io::Error::other("connect failed")))
            }
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot connect back to {to} for the return test: {e}"))?;
        streams.push(r);
    }
    if udp {
        for s in &streams {
            socks.push(s.try_clone_udp().map_err(|e| e.to_string())?);
        }
    }
    let mut phase = DataPhase::new(phase_params(udp, len, rate, bytes), streams, 1.0);
    if udp {
        phase.iperf2_tx = Some(crate::engine::udp::Iperf2Tx {
            header: Vec::new(),
            first_seq: 0,
        });
    }
    let leg = Leg {
        pre: vec![0; phase.streams.len()],
        phase,
        until: Until::Send { secs },
        udp: socks,
        offset,
        layout: Layout::V21,
    };
    let (r, e, _) = drive(leg, test, inner.cfg.interval, inner.events.clone(), None).await;
    match e {
        Some(e) => Err(e),
        None => Ok(r),
    }
}

fn report_refused(inner: &Inner, peer: SocketAddr, local: SocketAddr, udp: bool, why: &str) {
    let test = inner.next.fetch_add(1, Ordering::Relaxed);
    inner.emit(Event::Started {
        test,
        info: Box::new(info(udp, peer, local, &served_params(None, None, 1, false))),
    });
    inner.emit(Event::Finished {
        test,
        outcome: Box::new(Outcome {
            status: RunStatus::Failed,
            error: Some(why.to_string()),
            streams: Vec::new(),
            notes: Vec::new(),
            rate_check: None,
        }),
    });
}

/// The UDP listener: new sources become flows (a socket connected to the sender takes over,
/// the first datagram is counted there); FINs of flows already finished get their report
/// again; iperf3 hellos are answered in the log.
fn udp_loop(
    inner: Arc<Inner>,
    sock: UdpSocket,
    stop: Arc<std::sync::atomic::AtomicBool>,
    rt: tokio::runtime::Handle,
) {
    let Ok(local) = sock.local_addr() else {
        return;
    };
    // Idle, the thread sleeps in recv (a stop wakes it with an empty datagram); while `-P`
    // groups are still gathering it looks every 200 ms whether one is due. (A fixed 200 ms
    // woke it 5 times a second on an idle board.)
    let (idle, gathering) = (crate::engine::echo::IDLE_WAIT, Duration::from_millis(200));
    let mut wait = idle;
    let _ = sock.set_read_timeout(Some(wait));
    let mut buf = vec![0u8; 65536];
    // Flows by sender: when they started (a datagram from one of them reaching the listener
    // is a race at the start, not a new test).
    let flows: Flows = Arc::new(Mutex::new(HashMap::new()));
    // `-P` clients whose flows are still arriving.
    let mut pending: HashMap<GroupKey, UdpGroup> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        launch_due(&inner, &rt, &flows, &mut pending);
        let want = if pending.is_empty() { idle } else { gathering };
        if want != wait && sock.set_read_timeout(Some(want)).is_ok() {
            wait = want;
        }
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let data = &buf[..n];
        let state = flows.lock().ok().and_then(|m| m.get(&from).cloned());
        match state {
            Some(FlowState::Running(t)) if t.elapsed() < Duration::from_secs(90_000) => continue,
            Some(FlowState::Done(reply, t)) if t.elapsed() < Duration::from_secs(10) => {
                if matches!(wire::read_udp_id(data, false), Some((_, id)) if id < 0) {
                    let _ = sock.send_to(&reply, from);
                }
                continue;
            }
            _ => {}
        }
        if n == 4 && (data == b"9876" || data == b"6789") {
            crate::peer_warn!(from.ip(), %from, "iperf 2 UDP port: {LOOKS_LIKE_IPERF3} (sent an iperf3 UDP hello)");
            continue;
        }
        let Some((_, id)) = wire::read_udp_id(data, false) else {
            tracing::debug!(%from, bytes = n, "short datagram on the iperf 2 port ignored");
            continue;
        };
        if id < 0 {
            // A FIN of a flow we never saw (or forgot): echo it without a report, as iperf 2.
            let _ = sock.send_to(data, from);
            continue;
        }
        let running = flows
            .lock()
            .map(|m| {
                m.values()
                    .filter(|f| matches!(f, FlowState::Running(_)))
                    .count()
            })
            .unwrap_or(0);
        if running >= MAX_UDP_FLOWS {
            crate::peer_warn!(from.ip(), %from, "{running} iperf 2 UDP flows running; new flow ignored");
            continue;
        }
        let Some(mut group) = open_flow(local, from, data, &flows) else {
            continue;
        };
        let (hdr, layout) = (group.hdr, group.layout);
        let hdr_v = hdr.unwrap_or_default();
        // A `-P` client: its flows send the same header from one address; collect them
        // (up to GROUP_WAIT) and serve them as one test, as for TCP.
        if hdr.is_some() && (2..=MAX_UDP_FLOWS as i32).contains(&hdr_v.num_threads) {
            let at = layout.offset();
            let mut key_hdr = [0u8; wire::CLIENT_HEADER_LEN];
            key_hdr.copy_from_slice(&data[at..at + wire::CLIENT_HEADER_LEN]);
            let key = (from.ip(), local.port(), key_hdr);
            group.expected = hdr_v.num_threads as usize;
            match pending.get_mut(&key) {
                Some(g) => g.members.append(&mut group.members),
                None => {
                    pending.insert(key, group);
                }
            }
            launch_due(&inner, &rt, &flows, &mut pending);
            continue;
        }
        launch_udp(&inner, &rt, &flows, group);
    }
}

/// A new flow from `from` to the listener on `local`, whose first datagram is `data`: a socket
/// connected to the sender takes it over (the datagram counted there) and it is noted as
/// running in `flows`. A group of this one flow; `None` (logged) when its socket cannot be
/// made. Once per flow, not per datagram.
fn open_flow(local: SocketAddr, from: SocketAddr, data: &[u8], flows: &Flows) -> Option<UdpGroup> {
    let (layout, wide, mut hdr) = wire::classify_udp(data);
    if let Some(h) = hdr.as_mut() {
        if h.win_band <= 0 {
            h.win_band = wire::ext_rate(&data[layout.offset()..]).unwrap_or(0) as i32;
        }
    }
    let flow = match bind_udp(local, Some(from)) {
        Ok(s) => s,
        Err(e) => {
            crate::peer_warn!(from.ip(), %from, "cannot open the UDP flow socket: {e}");
            return None;
        }
    };
    let clone = match flow.try_clone() {
        Ok(c) => c,
        Err(e) => {
            crate::peer_warn!(from.ip(), %from, "{e}");
            return None;
        }
    };
    let ds = match DataStream::new_udp_iperf2(1, false, flow, wide) {
        Ok(d) => d,
        Err(e) => {
            crate::peer_warn!(from.ip(), %from, "{e}");
            return None;
        }
    };
    // --trip-times (2.1 clients): measure each datagram's one-way latency.
    let trip_times = data.len() > layout.offset() && wire::trip_times(&data[layout.offset()..]);
    if trip_times {
        ds.measure_transit();
    }
    let (s, us) = wire::wall_now();
    ds.feed_udp(data, s as i64 * 1_000_000 + us as i64);
    if let Ok(mut m) = flows.lock() {
        m.retain(|_, st| match st {
            FlowState::Running(_) => true,
            FlowState::Done(_, t) => t.elapsed() < Duration::from_secs(10),
        });
        m.insert(from, FlowState::Running(Instant::now()));
    }
    let member = UdpMember {
        ds,
        sock: clone,
        from,
        trip_times,
    };
    Some(UdpGroup {
        first: Instant::now(),
        expected: 1,
        layout,
        hdr,
        len: data.len(),
        members: vec![member],
    })
}

/// One UDP flow waiting to be served: its socket (connected to the sender) and a clone for
/// the FIN exchange.
struct UdpMember {
    ds: DataStream,
    sock: UdpSocket,
    from: SocketAddr,
    trip_times: bool,
}

/// The flows of one test: one, or a `-P` client's (same address, port and header).
struct UdpGroup {
    /// When the first flow arrived.
    first: Instant,
    /// Flows the header announces (`numThreads`).
    expected: usize,
    layout: Layout,
    hdr: Option<ClientHeader>,
    /// Size of the first datagram, bytes.
    len: usize,
    members: Vec<UdpMember>,
}

/// Serve the `-P` groups that are complete or waited [`GROUP_WAIT`].
fn launch_due(
    inner: &Arc<Inner>,
    rt: &tokio::runtime::Handle,
    flows: &Flows,
    pending: &mut HashMap<GroupKey, UdpGroup>,
) {
    let due: Vec<GroupKey> = pending
        .iter()
        .filter(|(_, g)| g.members.len() >= g.expected || g.first.elapsed() >= GROUP_WAIT)
        .map(|(k, _)| *k)
        .collect();
    for k in due {
        if let Some(g) = pending.remove(&k) {
            launch_udp(inner, rt, flows, g);
        }
    }
}

/// Start one test over a group's flows (streams 1..n in their order of arrival).
fn launch_udp(inner: &Arc<Inner>, rt: &tokio::runtime::Handle, flows: &Flows, g: UdpGroup) {
    let Some(lead) = g.members.first() else {
        return;
    };
    let (from, local, trip_times) = (lead.from, lead.ds.local, lead.trip_times);
    let test = inner.next.fetch_add(1, Ordering::Relaxed);
    let hdr_v = g.hdr.unwrap_or_default();
    let ret_ok = return_allowed(inner, &hdr_v, from, true);
    let n = g.members.len();
    if n > 1 {
        tracing::debug!(%from, streams = n, "iperf 2 UDP -P client served as one test");
    }
    let (mut streams, mut socks, mut froms) = (Vec::new(), Vec::new(), Vec::new());
    for (i, m) in g.members.into_iter().enumerate() {
        let mut ds = m.ds;
        ds.id = i as u32 + 1;
        streams.push(ds);
        socks.push(m.sock);
        froms.push(m.from);
    }
    inner.emit(Event::Started {
        test,
        info: Box::new(info(
            true,
            from,
            local,
            &served_params(g.hdr.as_ref(), Some(g.layout), n, trip_times),
        )),
    });
    let len = g.len.max(wire::UDP_MIN_LEN);
    let phase = DataPhase::new(phase_params(true, len, 0, 0), streams, inner.cfg.interval);
    let leg = Leg {
        pre: vec![0; n],
        phase,
        until: Until::Recv {
            limit: Duration::from_secs(86_400 + 60),
            stall: inner.cfg.stall,
        },
        udp: socks,
        offset: 0.0,
        layout: g.layout,
    };
    let i2 = inner.clone();
    let flows2 = flows.clone();
    let layout = g.layout;
    crate::engine::task::spawn_on(rt, async move {
        run_test_udp(i2, test, leg, froms, hdr_v, ret_ok, layout, flows2).await;
    });
}

/// UDP flows by sender address (see [`udp_loop`]).
type Flows = Arc<Mutex<HashMap<SocketAddr, FlowState>>>;

/// Most UDP flows served at once (each has a receiving thread): a flood of new source
/// addresses cannot exhaust the board.
const MAX_UDP_FLOWS: usize = 64;

#[derive(Clone)]
enum FlowState {
    Running(Instant),
    Done(Vec<u8>, Instant),
}

#[allow(clippy::too_many_arguments)]
async fn run_test_udp(
    inner: Arc<Inner>,
    test: u64,
    leg: Leg,
    froms: Vec<SocketAddr>,
    hdr: ClientHeader,
    ret_ok: bool,
    layout: Layout,
    flows: Flows,
) {
    let Some(&from) = froms.first() else {
        return;
    };
    let len = leg.phase.params.len as usize;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let i2 = Arc::new(Inner {
        cfg: inner.cfg.clone(),
        next: AtomicU64::new(0),
        events: Some(tx),
        returns: Mutex::new(HashMap::new()),
        groups: Mutex::new(HashMap::new()),
    });
    // Share the return-test bookkeeping: only this flow's test runs through i2.
    let outer = inner.clone();
    let fwd = crate::engine::task::spawn(async move {
        // The report of each receiving stream, in stream order (= the flows' order).
        let mut reports = Vec::new();
        while let Some(ev) = rx.recv().await {
            if let Event::Finished { outcome, .. } = &ev {
                reports = outcome
                    .streams
                    .iter()
                    .filter(|s| !s.sender)
                    .map(|s| s.udp.map(|u| u.to_report()))
                    .collect();
            }
            outer.emit(ev);
        }
        reports
    });
    run_test(i2, test, leg, from, hdr, ret_ok, true).await;
    let reports = fwd.await.unwrap_or_default();
    if let Ok(mut m) = flows.lock() {
        for (i, f) in froms.iter().enumerate() {
            match reports.get(i).copied().flatten() {
                Some(r) => {
                    m.insert(
                        *f,
                        FlowState::Done(r.datagram(layout, &[], len), Instant::now()),
                    );
                }
                None => {
                    m.remove(f);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Served tests' params as the binary stored them before they were typed
    /// (`tests/data/iperf2_served_*.json`, `iperf2_params_served.json`): the typed writer
    /// gives the same JSON for the same headers, and they read back byte for byte.
    #[test]
    fn served_params_are_stored_as_before() {
        let peer: SocketAddr = "192.0.2.2:45001".parse().expect("addr");
        let local: SocketAddr = "192.0.2.1:5001".parse().expect("addr");
        let tcp = ClientHeader {
            num_threads: 2,
            port: 5001,
            amount: -1000,
            ..Default::default()
        };
        let udp = ClientHeader {
            flags: wire::HEADER_VERSION1 | wire::RUN_NOW,
            num_threads: 2,
            port: 5002,
            buffer_len: 1470,
            win_band: 1_048_576,
            amount: -1000,
        };
        let file = |name: &str| -> serde_json::Value {
            let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
        };
        let mut ignored = served_params(Some(&tcp), None, 1, false);
        ignored.trip_times_ignored =
            Some("the client's start time is 2000 s from our clock".into());
        let cases = [
            (
                file("iperf2_served_tcp_p2.json")["params"].clone(),
                served_params(Some(&tcp), None, 2, true),
            ),
            (
                file("iperf2_served_udp_dual.json")["params"].clone(),
                served_params(Some(&udp), Some(Layout::V21), 2, false),
            ),
            (file("iperf2_params_served.json")[0].clone(), ignored),
            (
                file("iperf2_params_served.json")[1].clone(),
                served_params(None, None, 1, false),
            ),
        ];
        for (stored, p) in cases {
            assert_eq!(info(false, peer, local, &p).params, stored);
            let back: ServedParams = serde_json::from_value(stored.clone()).expect("reads");
            assert_eq!(back, p);
            assert_eq!(
                serde_json::to_string(&back.to_value()).expect("json"),
                serde_json::to_string(&stored).expect("json")
            );
        }
    }

    /// A `--trip-times` header's start time: within 600 s of our clock it is measured,
    /// beyond (either way) or missing it is ignored with the reason, as stock does.
    #[test]
    fn trip_times_start_time_check() {
        let now = 1_800_000_000u32;
        assert_eq!(
            trip_check(Some((now - 600, 5)), now),
            Trip::Yes((now - 600, 5))
        );
        assert_eq!(
            trip_check(Some((now + 600, 0)), now),
            Trip::Yes((now + 600, 0))
        );
        for st in [now - 601, now + 2000, 0, u32::MAX] {
            match trip_check(Some((st, 0)), now) {
                Trip::Ignored(why) => assert!(why.contains("from our clock"), "{why}"),
                t => panic!("{st}: {t:?}"),
            }
        }
        assert!(matches!(trip_check(None, now), Trip::Ignored(_)));
    }
    use tokio::io::AsyncWriteExt;

    /// Issue 39: an iperf 2 `-r` test (one leg, then the other) was stored as "bidir", the
    /// word for `-d` (both at once). The header's flags decide: -r → "tradeoff", -d → "bidir".
    #[test]
    fn return_tests_get_their_own_direction_word() {
        let peer: SocketAddr = "192.0.2.1:40000".parse().expect("addr");
        let local: SocketAddr = "192.0.2.2:5001".parse().expect("addr");
        let word = |flags: u32| {
            let h = ClientHeader {
                flags,
                ..Default::default()
            };
            info(true, peer, local, &served_params(Some(&h), None, 1, false))
                .direction
                .to_string()
        };
        assert_eq!(word(wire::HEADER_VERSION1), "tradeoff");
        assert_eq!(word(wire::HEADER_VERSION1 | wire::RUN_NOW), "bidir");
        assert_eq!(word(0), "receive");
        assert_eq!(
            info(false, peer, local, &served_params(None, None, 1, false))
                .direction
                .as_str(),
            "receive"
        );
        // The board's own client runs, from the same word list.
        use super::super::direction_word;
        assert_eq!(direction_word(Return::Tradeoff, true).as_str(), "tradeoff");
        assert_eq!(direction_word(Return::Dual, true).as_str(), "bidir");
        assert_eq!(direction_word(Return::None, true).as_str(), "send");
    }

    /// True when the server closed `c` within `within` (it was refused).
    async fn closed_within(c: &mut tokio::net::TcpStream, within: Duration) -> bool {
        let mut b = [0u8; 64];
        matches!(
            tokio::time::timeout(within, c.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    /// Issue 22 item 11: three UDP flows of one `-P 3` client (same address, port and
    /// header) are one test with three streams; each flow gets its own report back; a
    /// `--trip-times` flow is measured.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udp_flows_of_a_parallel_client_are_one_test() {
        let cfg = Iperf2ServerConfig {
            ports: vec![0],
            bind: Some(IpAddr::from([127, 0, 0, 1])),
            stall: Duration::from_secs(3),
            ..Default::default()
        };
        let l = bind(&cfg).expect("bind");
        let addr = l.udp[0].local_addr().expect("addr");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stop = Arc::new(Notify::new());
        let server = crate::engine::task::spawn(serve(l, cfg, Some(tx), Some(stop.clone())));
        let h = ClientHeader {
            num_threads: 3,
            amount: -100,
            ..Default::default()
        };
        let mut hdr = wire::udp_client_header_ext(&h, 1_000_000);
        // --trip-times: upper flag 0x0010 in the extension's flags word.
        hdr[32..36].copy_from_slice(&0x0010_0000u32.to_be_bytes());
        let reports = crate::engine::task::spawn_blocking(move || {
            let socks: Vec<UdpSocket> = (0..3)
                .map(|_| {
                    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
                    s.connect(addr).expect("connect");
                    s.set_read_timeout(Some(Duration::from_millis(250))).ok();
                    s
                })
                .collect();
            let mut d = vec![0u8; 200];
            d[16..16 + hdr.len()].copy_from_slice(&hdr);
            for id in 1..=40i64 {
                for s in &socks {
                    let (sec, usec) = wire::wall_now();
                    wire::write_udp_id(&mut d, id, sec, usec);
                    s.send(&d).expect("send");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // Each flow sends its FIN (as the client's threads do, at about the same time)
            // and repeats it, 10 tries, until its report came.
            let mut reps = vec![None; socks.len()];
            for _ in 0..10 {
                for (s, r) in socks.iter().zip(&reps) {
                    if r.is_none() {
                        let (sec, usec) = wire::wall_now();
                        wire::write_udp_id(&mut d, -41, sec, usec);
                        s.send(&d).ok();
                    }
                }
                for (s, r) in socks.iter().zip(reps.iter_mut()) {
                    let mut b = [0u8; 2048];
                    while r.is_none() {
                        match s.recv(&mut b) {
                            Ok(n) => *r = wire::ServerReport::parse(&b[..n]).ok().map(|x| x.0),
                            Err(_) => break,
                        }
                    }
                }
            }
            reps
        })
        .await
        .expect("client");
        let (mut started, mut finished) = (Vec::new(), Vec::new());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while finished.is_empty() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(Event::Started { info, .. })) => started.push(info),
                Ok(Some(Event::Finished { outcome, .. })) => finished.push(outcome),
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        stop.notify_one();
        let _ = server.await;
        assert_eq!(started.len(), 1, "{started:?}");
        assert_eq!(started[0].params["parallel"], 3);
        assert_eq!(started[0].params["trip_times"], true);
        let o = &finished[0];
        let ids: Vec<u32> = o.streams.iter().map(|s| s.id).collect();
        assert_eq!(ids, [1, 2, 3], "{o:?}");
        for (s, r) in o.streams.iter().zip(&reports) {
            let u = s.udp.expect("udp figures");
            // 40 datagrams and the FIN, none lost.
            assert_eq!((u.total, u.lost), (41, 0), "{s:?}");
            assert_eq!(u.latency_ms.map(|l| l.count), Some(41), "{s:?}");
            let r = r.expect("every flow gets its report");
            assert_eq!((r.datagrams, r.error_cnt), (41, 0));
            assert_eq!(r.ext.map(|e| e.cnt_transit), Some(41));
        }
        let sum = crate::engine::iperf2::stream_sum(o, false).expect("a [SUM]");
        assert_eq!(sum.bytes, 3 * 41 * 200);
    }

    /// Regression: the followers of a `-P` group gave their place under the cap back when
    /// they joined the group's first connection, so a group of N counted as one. With a cap
    /// of 2, a 2-stream group leaves no room; once it ends, the room is back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_stream_of_a_parallel_group_counts_against_the_cap() {
        let cfg = Iperf2ServerConfig {
            ports: vec![0],
            bind: Some(IpAddr::from([127, 0, 0, 1])),
            stall: Duration::from_secs(2),
            max_tcp_conns: 2,
            ..Default::default()
        };
        let l = bind(&cfg).expect("bind");
        let addr = l.tcp[0].local_addr().expect("addr");
        let stop = Arc::new(Notify::new());
        let server = crate::engine::task::spawn(serve(l, cfg, None, Some(stop.clone())));
        // -P 2, 10 s, no return test.
        let hdr = ClientHeader {
            num_threads: 2,
            amount: -1000,
            ..Default::default()
        }
        .to_bytes();
        let mut group = Vec::new();
        for _ in 0..2 {
            let mut c = tokio::net::TcpStream::connect(addr).await.expect("connect");
            c.write_all(&hdr).await.expect("header");
            c.write_all(&[0u8; 8192]).await.expect("data");
            group.push(c);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut third = tokio::net::TcpStream::connect(addr).await.expect("connect");
        assert!(
            closed_within(&mut third, Duration::from_secs(2)).await,
            "a third connection was served while a 2-stream group held the cap of 2"
        );
        // The group ends (both streams close): its two places are free again.
        drop(group);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut fourth = tokio::net::TcpStream::connect(addr).await.expect("connect");
        assert!(
            !closed_within(&mut fourth, Duration::from_secs(1)).await,
            "a connection was refused after the group had ended"
        );
        stop.notify_one();
        let _ = server.await;
    }
}
