//! iperf 2 client: runs a test against `iperf -s` / `iperf -u -s` (2.0.5 … 2.1.x).
//! TCP: each stream connects, writes the 24-byte v1 header, then payload until the time or
//! byte target, and closes; nothing comes back. UDP: datagrams in the 2.1 layout with ids
//! from 0 (counted right by 2.0.5 and 2.1 servers alike), then the FIN and the server report.
//! `-r`/`-d`: we listen on `-L` and receive the server's return streams.

use super::wire::{self, ClientHeader, Layout, Return};
use super::{drive, phase_params, Event, Leg, Outcome, Role, StreamResult, TestInfo, Until};
use crate::engine::net::{self, Family, SockOpts};
use crate::engine::session::{DataPhase, DataStream};
use crate::model::{RunProtocol, RunStatus};
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// What to run: iperf 2's client options.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Iperf2Spec {
    /// Server host (`-c`).
    pub host: String,
    /// Server port (`-p`), default 5001.
    pub port: u16,
    /// UDP instead of TCP (`-u`).
    pub udp: bool,
    /// Rate per stream, bits/s (`-b`); UDP default 1048576, TCP 0 = unlimited.
    pub rate: u64,
    /// Write size (`-l`), bytes; 0 = default (TCP 128 KiB, UDP 1470).
    pub len: u32,
    /// Duration (`-t`), seconds; default 10.
    pub time: f64,
    /// Byte count per stream (`-n`) instead of a duration; 0 = none.
    pub bytes: u64,
    /// Parallel streams (`-P`), 1..=128.
    pub parallel: u32,
    /// `-r` (after) or `-d` (at the same time) return test.
    pub ret: Return,
    /// Port we listen on for the return test (`-L`); 0 = the same as `port`.
    pub listen_port: u16,
    /// Interval between reports, seconds (`-i`).
    pub interval: f64,
    /// Local address to bind (`-B`).
    pub bind: Option<std::net::IpAddr>,
    /// Board port (interface) every socket of the test is bound to (SO_BINDTODEVICE), so the
    /// traffic leaves and the return test arrives through it whatever the routes say; `None` =
    /// routing decides. A source address alone (`bind`) does not pick the port.
    #[serde(default)]
    pub bind_dev: Option<String>,
    /// Socket buffer (`-w`), bytes.
    pub window: Option<u32>,
    /// `--trip-times` (TCP): every write starts with a header carrying its wall-clock send
    /// time, so a 2.1/2.2 server reports each write's one-way latency (the two clocks must
    /// agree). 2.0.x servers ignore it.
    #[serde(default)]
    pub trip_times: bool,
    /// Connect timeout.
    #[serde(skip, default = "default_timeout")]
    pub connect_timeout: Duration,
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

impl Iperf2Spec {
    /// A 10-second TCP test against `host:5001`.
    pub fn new(host: &str) -> Iperf2Spec {
        Iperf2Spec {
            host: host.to_string(),
            port: wire::DEFAULT_PORT,
            udp: false,
            rate: 0,
            len: 0,
            time: 10.0,
            bytes: 0,
            parallel: 1,
            ret: Return::None,
            listen_port: 0,
            interval: 1.0,
            bind: None,
            bind_dev: None,
            window: None,
            trip_times: false,
            connect_timeout: default_timeout(),
        }
    }

    /// Write size in bytes with the defaults applied.
    pub fn write_len(&self) -> usize {
        match (self.len, self.udp) {
            (0, true) => wire::UDP_DEFAULT_LEN,
            (0, false) => wire::TCP_DEFAULT_LEN,
            (l, _) => l as usize,
        }
    }

    /// Check the options. Errors name the option.
    pub fn validate(&self) -> Result<(), String> {
        if self.host.trim().is_empty() {
            return Err("peer host is empty".into());
        }
        if self.port == 0 {
            return Err("port must be 1..65535 (-p)".into());
        }
        if !(1..=128).contains(&self.parallel) {
            return Err("parallel streams must be 1..=128 (-P)".into());
        }
        if self.bytes == 0 && !(self.time > 0.0 && self.time <= 86_400.0) {
            return Err("duration must be 0..86400 s (-t)".into());
        }
        if self.bytes > i32::MAX as u64 {
            return Err("byte count must be below 2 GiB (-n, iperf 2's header has 31 bits)".into());
        }
        if !(self.interval == 0.0 || (0.1..=60.0).contains(&self.interval)) {
            return Err("interval must be 0.1..60 s (-i)".into());
        }
        if self.udp {
            if self.len != 0 && !(wire::UDP_MIN_LEN as u32..=65507).contains(&self.len) {
                return Err(format!(
                    "UDP datagram size must be {}..65507 bytes (-l)",
                    wire::UDP_MIN_LEN
                ));
            }
            if self.rate > i32::MAX as u64 {
                return Err("UDP rate must be below 2.1 Gbit/s per stream for iperf 2 (-b)".into());
            }
        } else if self.len > 16 * 1024 * 1024 {
            return Err("write size must be 1..16 MiB (-l)".into());
        }
        if self.trip_times {
            if self.udp {
                return Err("--trip-times with --iperf2 is TCP only here (no UDP client)".into());
            }
            if self.len != 0 && (self.len as usize) < wire::TCP_BURST_HEADER_LEN {
                return Err(format!(
                    "--trip-times needs writes of at least {} bytes (-l)",
                    wire::TCP_BURST_HEADER_LEN
                ));
            }
        }
        if let Some(w) = self.window {
            if !(1024..=i32::MAX as u32 / 2).contains(&w) {
                return Err("window must be 1 KiB..1 GiB (-w)".into());
            }
        }
        Ok(())
    }

    /// The v1 header our streams carry.
    fn header(&self) -> ClientHeader {
        let flags = match self.ret {
            Return::None => 0,
            Return::Tradeoff => wire::HEADER_VERSION1,
            Return::Dual => wire::HEADER_VERSION1 | wire::RUN_NOW,
        };
        ClientHeader {
            flags,
            num_threads: self.parallel as i32,
            port: self.return_port() as i32,
            buffer_len: self.len as i32,
            win_band: if self.udp {
                self.rate as i32
            } else {
                self.window.unwrap_or(0) as i32
            },
            amount: if self.bytes > 0 {
                self.bytes as i32
            } else {
                -((self.time * 100.0).round() as i32)
            },
        }
    }

    fn return_port(&self) -> u16 {
        if self.listen_port != 0 {
            self.listen_port
        } else {
            self.port
        }
    }

    fn direction(&self) -> crate::model::RunDirection {
        super::direction_word(self.ret, true)
    }
}

/// Listening sockets for the return streams.
enum Back {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

fn bind_back(spec: &Iperf2Spec, peer: SocketAddr) -> std::io::Result<Back> {
    let ip = spec.bind.unwrap_or(if peer.is_ipv4() {
        std::net::IpAddr::from([0u8, 0, 0, 0])
    } else {
        std::net::IpAddr::from([0u16; 8])
    });
    let addr = SocketAddr::new(ip, spec.return_port());
    if spec.udp {
        let s = super::server::bind_udp_on(addr, None, spec.bind_dev.as_deref())?;
        Ok(Back::Udp(s))
    } else {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )?;
        if let Some(d) = &spec.bind_dev {
            net::bind_device(&s, d)?;
        }
        s.set_reuse_address(true)?;
        s.bind(&addr.into())?;
        s.listen(128)?;
        Ok(Back::Tcp(s.into()))
    }
}

/// Accept the server's `n` return streams (within `limit`) and make them a receiving leg.
fn accept_back(
    back: Back,
    dev: Option<&str>,
    n: usize,
    peer: std::net::IpAddr,
    len: usize,
    limit: Duration,
    stall: Duration,
) -> Result<Leg, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut streams = Vec::new();
    let mut udp = Vec::new();
    let mut pending_first = Vec::new();
    let mut layout = Layout::V21;
    match back {
        Back::Tcp(l) => {
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            while streams.len() < n {
                match l.accept() {
                    Ok((s, from)) => {
                        if net::ip_text(from.ip()) != net::ip_text(peer) {
                            continue;
                        }
                        let id = 101 + streams.len() as u32;
                        streams.push(DataStream::new(id, false, s).map_err(|e| e.to_string())?);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if std::time::Instant::now() > deadline {
                            return Err(format!(
                                "the server opened {} of {n} return streams within 10 s",
                                streams.len()
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => return Err(format!("cannot accept a return stream: {e}")),
                }
            }
        }
        Back::Udp(l) => {
            let local = l.local_addr().map_err(|e| e.to_string())?;
            let _ = l.set_read_timeout(Some(Duration::from_millis(100)));
            let mut buf = vec![0u8; 65536];
            let mut seen: Vec<SocketAddr> = Vec::new();
            while streams.len() < n {
                if std::time::Instant::now() > deadline {
                    return Err(format!(
                        "the server opened {} of {n} return flows within 10 s \
                         (iperf 2.0.x servers do not run UDP return tests (-r/-d) for this \
                         client; iperf 2.1 and later do)",
                        streams.len()
                    ));
                }
                let Ok((k, from)) = l.recv_from(&mut buf) else {
                    continue;
                };
                if net::ip_text(from.ip()) != net::ip_text(peer) || seen.contains(&from) {
                    continue;
                }
                seen.push(from);
                // 2.1 senders write the high id word (0) at 12; 2.0.5 senders write filler.
                layout = if k >= 16 && buf[12..16] == [0, 0, 0, 0] {
                    Layout::V21
                } else {
                    Layout::V205
                };
                // On the device before the connect: the flow socket must take `dev`'s address,
                // the one the server sends to, not the routed port's (issue 39).
                let s = super::server::bind_udp_on(local, Some(from), dev)
                    .map_err(|e| e.to_string())?;
                udp.push(s.try_clone().map_err(|e| e.to_string())?);
                let id = 101 + streams.len() as u32;
                let ds =
                    DataStream::new_udp_iperf2(id, false, s, false).map_err(|e| e.to_string())?;
                pending_first.push(buf[..k].to_vec());
                streams.push(ds);
            }
        }
    }
    let udp_mode = !udp.is_empty();
    let now_us = crate::engine::iperf2::wire::wall_now();
    let arrival = now_us.0 as i64 * 1_000_000 + now_us.1 as i64;
    for (s, first) in streams.iter().zip(pending_first.iter()) {
        s.feed_udp(first, arrival);
    }
    let mut phase = DataPhase::new(phase_params(udp_mode, len, 0, 0), streams, 1.0);
    phase.iperf2_tx = None;
    Ok(Leg {
        pre: vec![0; phase.streams.len()],
        phase,
        until: Until::Recv { limit, stall },
        udp,
        offset: 0.0,
        layout,
    })
}

/// The pause between the end of one iperf 2 UDP test and the start of the next to the same
/// server (address and port): stock iperf 2.1.8's server dies when a new UDP flow starts right
/// after the previous one ended (seen in the interop matrix with back-to-back steps).
pub(crate) const UDP_GAP: Duration = Duration::from_secs(1);

/// When the last UDP tests to each server ended (entries older than [`UDP_GAP`] are dropped).
#[derive(Debug, Default)]
struct GapBook {
    ends: Vec<(SocketAddr, std::time::Instant)>,
}

impl GapBook {
    /// How long a UDP test to `peer` must still wait at `now`.
    fn left(&self, peer: SocketAddr, now: std::time::Instant) -> Duration {
        self.ends
            .iter()
            .filter(|(p, _)| *p == peer)
            .map(|(_, t)| UDP_GAP.saturating_sub(now.saturating_duration_since(*t)))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// A UDP test to `peer` ended at `now`.
    fn ended(&mut self, peer: SocketAddr, now: std::time::Instant) {
        self.ends
            .retain(|(p, t)| *p != peer && now.saturating_duration_since(*t) < UDP_GAP);
        self.ends.push((peer, now));
    }
}

/// The process's UDP test ends (the daemon runs every client test in one process).
static UDP_ENDS: std::sync::Mutex<GapBook> = std::sync::Mutex::new(GapBook { ends: Vec::new() });

/// Notes the end of a UDP test to its server when dropped, however the test ends.
struct UdpEndMark(SocketAddr);

impl Drop for UdpEndMark {
    fn drop(&mut self) {
        UDP_ENDS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ended(self.0, std::time::Instant::now());
    }
}

/// A failure before anything ran.
fn failed(msg: String) -> Outcome {
    Outcome {
        status: RunStatus::Failed,
        error: Some(msg),
        streams: Vec::new(),
        notes: Vec::new(),
        rate_check: None,
    }
}

/// Run one iperf 2 client test. Events go out as test 0 (`Started` once, intervals, and
/// `Finished`); the outcome is also returned. `cancel` stops it early (status aborted).
pub(crate) async fn run(
    spec: Iperf2Spec,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<Arc<Notify>>,
) -> Outcome {
    let o = run_inner(&spec, events.clone(), cancel).await;
    if let Some(tx) = &events {
        let _ = tx.send(Event::Finished {
            test: 0,
            outcome: Box::new(o.clone()),
        });
    }
    o
}

async fn run_inner(
    spec: &Iperf2Spec,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<Arc<Notify>>,
) -> Outcome {
    if let Err(e) = spec.validate() {
        return failed(e);
    }
    let peer = match resolve_peer(spec).await {
        Ok(a) => a,
        Err(e) => return failed(e),
    };
    // Back-to-back UDP tests: leave [`UDP_GAP`] after the last one to this server ended.
    let _udp_end = if spec.udp {
        Some(wait_udp_gap(peer).await)
    } else {
        None
    };
    let len = spec.write_len();
    let back = if spec.ret != Return::None {
        match bind_back(spec, peer) {
            Ok(b) => Some(b),
            Err(e) => {
                return failed(format!(
                    "cannot listen on port {} for the return test (-L): {e}",
                    spec.return_port()
                ))
            }
        }
    } else {
        None
    };
    let hdr = spec.header();
    // --trip-times (TCP): the 80-byte 2.1 header with the start time, then stamped blocks.
    let trip_start = (spec.trip_times && !spec.udp).then(wire::wall_now);
    let (streams, udp_socks) = match open_streams(spec, peer, &hdr, trip_start).await {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    send_started(spec, peer, &streams[0], events.as_ref());
    let out_leg = out_leg(spec, &hdr, len, trip_start, streams, udp_socks);
    let ran = run_legs(spec, peer, len, out_leg, back, events, cancel).await;
    conclude(spec, peer, ran)
}

/// Resolve the server's address (`-c` host, `-p` port); the error is the message the test
/// fails with.
async fn resolve_peer(spec: &Iperf2Spec) -> Result<SocketAddr, String> {
    let (h, p) = (spec.host.clone(), spec.port);
    match crate::engine::task::spawn_blocking(move || net::resolve(&h, p, Family::Any)).await {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e)) => Err(format!("unable to resolve host '{}': {e}", spec.host)),
        Err(e) => Err(e.to_string()),
    }
}

/// Sleep until [`UDP_GAP`] has passed since the last UDP test to `peer` ended; the mark
/// returned notes this test's end when dropped.
async fn wait_udp_gap(peer: SocketAddr) -> UdpEndMark {
    let wait = UDP_ENDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .left(peer, std::time::Instant::now());
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    UdpEndMark(peer)
}

/// Open the test's `-P` sending streams to `peer` (TCP: connected, the header `hdr` written,
/// with `trip_start` the --trip-times one); with them the UDP sockets' clones (empty for
/// TCP). The error is the message the test fails with.
async fn open_streams(
    spec: &Iperf2Spec,
    peer: SocketAddr,
    hdr: &ClientHeader,
    trip_start: Option<(u32, u32)>,
) -> Result<(Vec<DataStream>, Vec<UdpSocket>), String> {
    let opts = SockOpts {
        bind: spec.bind,
        bind_dev: spec.bind_dev.clone(),
        window: spec.window,
        ..Default::default()
    };
    let mut streams = Vec::new();
    let mut udp_socks = Vec::new();
    for i in 0..spec.parallel {
        let id = i + 1;
        if spec.udp {
            let s = open_udp(&opts, peer).await?;
            udp_socks.push(s.try_clone().map_err(|e| e.to_string())?);
            streams
                .push(DataStream::new_udp_iperf2(id, true, s, false).map_err(|e| e.to_string())?);
        } else {
            let bytes = match trip_start {
                Some(st) => wire::tcp_client_header_trip(hdr, st),
                None => hdr.to_bytes().to_vec(),
            };
            let s = open_tcp(&opts, peer, spec.connect_timeout, bytes).await?;
            let mut d = DataStream::new(id, true, s).map_err(|e| e.to_string())?;
            if let Some(st) = trip_start {
                d.trip_times(st);
            }
            streams.push(d);
        }
    }
    Ok((streams, udp_socks))
}

/// One UDP sending socket, bound as `o` says and connected to `peer`.
async fn open_udp(o: &SockOpts, peer: SocketAddr) -> Result<UdpSocket, String> {
    let o = o.clone();
    let r = crate::engine::task::spawn_blocking(move || -> std::io::Result<UdpSocket> {
        let local = SocketAddr::new(
            o.bind.unwrap_or(if peer.is_ipv4() {
                std::net::IpAddr::from([0u8, 0, 0, 0])
            } else {
                std::net::IpAddr::from([0u16; 8])
            }),
            0,
        );
        let s = net::udp_socket(local, o.bind_dev.as_deref())?;
        if let Some(w) = o.window {
            let _ = socket2::SockRef::from(&s).set_send_buffer_size(w as usize);
        }
        s.connect(peer)?;
        Ok(s)
    })
    .await;
    match r {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("unable to open a UDP socket to {peer}: {e}")),
        Err(e) => Err(e.to_string()),
    }
}

/// One TCP sending stream: connected to `peer` within `ct`, the stream header `bytes` written.
async fn open_tcp(
    o: &SockOpts,
    peer: SocketAddr,
    ct: Duration,
    bytes: Vec<u8>,
) -> Result<std::net::TcpStream, String> {
    let o = o.clone();
    let r = crate::engine::task::spawn_blocking(move || -> std::io::Result<std::net::TcpStream> {
        let mut s = net::connect_tcp(peer, &o, 0, true, ct)?;
        use std::io::Write;
        s.write_all(&bytes)?;
        Ok(s)
    })
    .await;
    match r {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("unable to connect to {peer}: {e}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Send `Started` (test 0) with the test's description; `first` is the first stream.
fn send_started(
    spec: &Iperf2Spec,
    peer: SocketAddr,
    first: &DataStream,
    events: Option<&mpsc::UnboundedSender<Event>>,
) {
    let info = TestInfo {
        role: Role::Client,
        protocol: if spec.udp {
            RunProtocol::Udp
        } else {
            RunProtocol::Tcp
        },
        peer_host: net::ip_text(peer.ip()),
        peer_port: peer.port(),
        local_host: net::ip_text(first.local.ip()),
        local_port: first.local.port(),
        direction: spec.direction(),
        params: serde_json::to_value(spec).unwrap_or_default(),
    };
    if let Some(tx) = events {
        let _ = tx.send(Event::Started {
            test: 0,
            info: Box::new(info),
        });
    }
}

/// The sending leg over the opened `streams` (`udp_socks`: the UDP sockets' clones): rate,
/// byte target and time from `spec`, and the header bytes already written per stream.
fn out_leg(
    spec: &Iperf2Spec,
    hdr: &ClientHeader,
    len: usize,
    trip_start: Option<(u32, u32)>,
    streams: Vec<DataStream>,
    udp_socks: Vec<UdpSocket>,
) -> Leg {
    // With -n the target is per stream in iperf 2; the shared counter sums all streams.
    let rate = if spec.udp && spec.rate == 0 {
        wire::UDP_DEFAULT_RATE
    } else {
        spec.rate
    };
    let mut phase = DataPhase::new(
        phase_params(spec.udp, len, rate, spec.bytes * spec.parallel as u64),
        streams,
        spec.interval,
    );
    if spec.udp {
        // 2.1+ servers take the rate of a UDP return test (-r/-d) from the header extension.
        phase.iperf2_tx = Some(crate::engine::udp::Iperf2Tx {
            header: wire::udp_client_header_ext(hdr, rate),
            first_seq: 0,
        });
    }
    let pre = if spec.udp {
        vec![0; spec.parallel as usize]
    } else if trip_start.is_some() {
        vec![wire::TCP_TRIP_HEADER_LEN as u64; spec.parallel as usize]
    } else {
        vec![wire::CLIENT_HEADER_LEN as u64; spec.parallel as usize]
    };
    Leg {
        phase,
        until: Until::Send {
            secs: if spec.bytes > 0 { 0.0 } else { spec.time },
        },
        udp: udp_socks,
        pre,
        offset: 0.0,
        layout: Layout::V21,
    }
}

/// What the legs of a client test gave: every stream's result, the first error, whether it
/// was cancelled, and notes for the outcome.
struct Ran {
    results: Vec<StreamResult>,
    error: Option<String>,
    aborted: bool,
    notes: Vec<String>,
}

/// Run the sending leg and, with `back` (`-d`: at the same time; `-r`: after it), the return
/// streams the server opens to us.
async fn run_legs(
    spec: &Iperf2Spec,
    peer: SocketAddr,
    len: usize,
    out_leg: Leg,
    back: Option<Back>,
    events: Option<mpsc::UnboundedSender<Event>>,
    cancel: Option<Arc<Notify>>,
) -> Ran {
    let interval = if spec.interval > 0.0 {
        spec.interval
    } else {
        1e9
    };
    let back_secs = if spec.bytes > 0 { 3600.0 } else { spec.time };
    let limit = Duration::from_secs_f64(back_secs + 15.0);
    let stall = Duration::from_secs(10);
    let n_back = spec.parallel as usize;
    let dev = spec.bind_dev.clone();
    let mut notes = Vec::new();
    let (mut results, mut error, mut aborted);
    match (back, spec.ret) {
        (Some(back), Return::Dual) => {
            let peer_ip = peer.ip();
            let acc = crate::engine::task::spawn_blocking(move || {
                accept_back(back, dev.as_deref(), n_back, peer_ip, len, limit, stall)
            });
            let ev = events.clone();
            let c = cancel.clone();
            let out = crate::engine::task::spawn(drive(out_leg, 0, interval, ev, c));
            let back_res = match acc.await {
                Ok(Ok(leg)) => Some(drive(leg, 0, interval, events.clone(), cancel.clone()).await),
                Ok(Err(e)) => {
                    notes.push(e);
                    None
                }
                Err(e) => {
                    notes.push(e.to_string());
                    None
                }
            };
            let (r, e, a) = out
                .await
                .unwrap_or_else(|e| (Vec::new(), Some(e.to_string()), false));
            results = r;
            error = e;
            aborted = a;
            if let Some((r2, e2, a2)) = back_res {
                results.extend(r2);
                error = error.or(e2);
                aborted |= a2;
            } else {
                error = error.or_else(|| notes.first().cloned());
            }
        }
        (Some(back), Return::Tradeoff) => {
            let (r, e, a) = drive(out_leg, 0, interval, events.clone(), cancel.clone()).await;
            results = r;
            error = e;
            aborted = a;
            let offset = results.first().map(|r| r.seconds).unwrap_or(0.0);
            if !aborted && error.is_none() {
                let peer_ip = peer.ip();
                let acc = crate::engine::task::spawn_blocking(move || {
                    accept_back(back, dev.as_deref(), n_back, peer_ip, len, limit, stall)
                })
                .await;
                match acc {
                    Ok(Ok(mut leg)) => {
                        leg.offset = offset;
                        let (r2, e2, a2) = drive(leg, 0, interval, events.clone(), cancel).await;
                        results.extend(r2);
                        error = e2;
                        aborted = a2;
                    }
                    Ok(Err(e)) => error = Some(e),
                    Err(e) => error = Some(e.to_string()),
                }
            }
        }
        _ => {
            let (r, e, a) = drive(out_leg, 0, interval, events.clone(), cancel).await;
            results = r;
            error = e;
            aborted = a;
        }
    }
    Ran {
        results,
        error,
        aborted,
        notes,
    }
}

/// The outcome from what ran: the missing UDP server report, nobody listening (ICMP port
/// unreachable) and the rate check.
fn conclude(spec: &Iperf2Spec, peer: SocketAddr, ran: Ran) -> Outcome {
    let Ran {
        results,
        mut error,
        aborted,
        mut notes,
    } = ran;
    let no_report = spec.udp && results.iter().any(|r| r.sender && r.udp.is_none()) && !aborted;
    if no_report {
        notes.push("no server report came back for the UDP FIN (10 tries)".into());
    }
    let mut check = super::rate_check(spec.rate, &results);
    if let Some(e) = nobody_listening(&results, no_report, peer) {
        // Nothing received: no rate was reached, whatever the sender sent.
        check = None;
        error = error.or(Some(e));
    } else if let Some(n) = results
        .iter()
        .filter(|r| r.sender)
        .filter_map(|r| r.port_unreachable)
        .reduce(u64::saturating_add)
    {
        // A stray one (the server's socket not open yet, or closed at the end) in a run
        // that has a receiver: said, not a failure.
        notes.push(crate::engine::report::port_unreachable_sentence(
            n,
            &net::ip_text(peer.ip()),
        ));
    }
    Outcome {
        rate_check: check,
        ..finish(results, error, aborted, notes)
    }
}

/// The error of a UDP test whose receiver never answered (`no_report`: no server report came
/// back for the FIN) while the peer's host answered ICMP port unreachable to its sending
/// streams: nothing listens on the port. `None` when a report came back or no such ICMP
/// error did.
fn nobody_listening(results: &[StreamResult], no_report: bool, peer: SocketAddr) -> Option<String> {
    if !no_report {
        return None;
    }
    let n = results
        .iter()
        .filter(|r| r.sender)
        .filter_map(|r| r.port_unreachable)
        .reduce(u64::saturating_add)?;
    Some(format!(
        "nothing received: the peer's host {} answered ICMP port unreachable {} time{} and no server report came back: no iperf 2 UDP server listens on port {} (start one with iperf -s -u)",
        net::ip_text(peer.ip()),
        crate::model::display::count(n),
        if n == 1 { "" } else { "s" },
        peer.port()
    ))
}

fn finish(
    streams: Vec<StreamResult>,
    error: Option<String>,
    aborted: bool,
    notes: Vec<String>,
) -> Outcome {
    let status = if aborted {
        RunStatus::Aborted
    } else if error.is_some() {
        RunStatus::Failed
    } else {
        RunStatus::Completed
    };
    Outcome {
        status,
        error,
        streams,
        notes,
        rate_check: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39: back-to-back iperf 2 UDP steps crashed stock 2.1.8's server. A test to the
    /// same server waits out 1 s after the last one ended; another server or a second later
    /// does not wait.
    #[test]
    fn udp_tests_to_one_server_are_a_second_apart() {
        let a: SocketAddr = "192.0.2.2:5001".parse().expect("addr");
        let b: SocketAddr = "192.0.2.3:5001".parse().expect("addr");
        let t0 = std::time::Instant::now();
        let mut book = GapBook::default();
        assert_eq!(book.left(a, t0), Duration::ZERO);
        book.ended(a, t0);
        assert_eq!(book.left(a, t0), Duration::from_secs(1));
        assert_eq!(
            book.left(a, t0 + Duration::from_millis(300)),
            Duration::from_millis(700)
        );
        assert_eq!(book.left(b, t0), Duration::ZERO);
        assert_eq!(book.left(a, t0 + Duration::from_secs(1)), Duration::ZERO);
        // A later end replaces the earlier one; old entries go.
        book.ended(a, t0 + Duration::from_secs(5));
        book.ended(b, t0 + Duration::from_secs(7));
        assert_eq!(book.ends.len(), 1);
        assert_eq!(book.left(a, t0 + Duration::from_secs(7)), Duration::ZERO);
    }
}
