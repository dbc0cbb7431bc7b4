//! The data phase of one test, shared by client and server: starts the stream threads (TCP or
//! UDP), takes interval samples (bytes, bits/s; TCP_INFO for TCP senders; datagrams, loss and
//! jitter for UDP), handles the `-O` omit reset, and produces each stream's local totals at the
//! end. Times are seconds since the test start (or omit end).
//! Not for: the control protocol (client.rs / server.rs).

use crate::engine::iperf2::trip::{self, TripMode, TripStats};
use crate::engine::params::{Params, Protocol, Results, StreamResult};
use crate::engine::report::{
    Connected, IntervalRecord, Report, SideTotals, StreamInterval, StreamSummary, TcpSample,
    UdpSample, UdpSummary,
};
use crate::engine::stats::{tcp_congestion, tcp_info};
use crate::engine::tcp::{payload, recv_loop, send_loop, Shared};
use crate::engine::udp::{self, UdpRecv, UdpSendCfg};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

enum Sock {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

impl Sock {
    fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Udp(s) => s.as_raw_fd(),
        }
    }
}

/// One data connection (TCP) or flow (UDP) and what has been measured on it.
pub(crate) struct DataStream {
    /// iperf3 stream id (1, 3, 4, …).
    pub id: u32,
    /// True when this side writes on the stream.
    pub sender: bool,
    sock: Sock,
    /// Local socket number, as shown in iperf3's `[  5]`.
    pub socket_no: i32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    counter: Arc<AtomicU64>,
    packets: Arc<AtomicU64>,
    udp_recv: Option<Arc<Mutex<UdpRecv>>>,
    /// A paced UDP sender's pacer figures (see [`crate::engine::pacer::PacerStats`]).
    pacer_stats: Arc<Mutex<crate::engine::pacer::PacerStats>>,
    /// Why a UDP sender sent without GSO, when it says (see [`crate::engine::udp::GsoOff`]).
    gso_off: Arc<Mutex<Option<crate::engine::udp::GsoOff>>>,
    /// A UDP sender's packets handed to the kernel (see [`crate::engine::udp::UdpSendCfg::skbs`]).
    skbs: Arc<AtomicU64>,
    /// A UDP sender's datagrams this host refused to send (see
    /// [`crate::engine::udp::UdpSendCfg::dropped_locally`]).
    dropped_locally: Arc<AtomicU64>,
    /// A UDP sender's ICMP port unreachable errors (see
    /// [`crate::engine::udp::UdpSendCfg::port_unreachable`]).
    port_unreachable: Arc<AtomicU64>,
    /// Who paced a paced UDP sender (see [`crate::engine::pacer::PacedBy`]).
    paced_by: Arc<Mutex<Option<crate::engine::pacer::PacedBy>>>,
    /// iperf 2 TCP `--trip-times`: this stream stamps (sender) or frames and measures
    /// (receiver) bursts (see `engine::iperf2::trip`); None = a plain TCP stream.
    trip: Option<TripMode>,
    thread: Option<JoinHandle<()>>,
    prev_bytes: u64,
    omit_bytes: u64,
    prev_packets: u64,
    omit_packets: u64,
    prev_max_seq: u64,
    prev_unique: u64,
    prev_ooo: u64,
    retrans_prev: u64,
    retrans_omit: u64,
    max_cwnd: u64,
    /// `tcpi_reord_seen` at the last reading (cumulative).
    reorder: u64,
    max_wnd: u64,
    rtt_min: u32,
    rtt_max: u32,
    rtt_sum: u64,
    rtt_n: u64,
    final_bytes: Option<u64>,
    final_packets: Option<u64>,
    final_retrans: Option<u64>,
}

/// Fill `report` with what a finished data `phase` measured: this side's `cpu` (%), the
/// stream summaries and intervals, and the first stream's `congestion` control as the
/// sender's (when the phase saw retransmits: it sent TCP) or the receiver's.
pub(crate) fn report_phase(
    report: &mut Report,
    phase: &DataPhase,
    cpu: crate::engine::stats::CpuUtil,
    congestion: &Option<String>,
) {
    report.cpu_local = cpu;
    report.streams = phase.local_summaries();
    report.intervals = phase.intervals.clone();
    if phase.has_retransmits() {
        report.sender_congestion = congestion.clone();
    } else {
        report.receiver_congestion = congestion.clone();
    }
}

/// Fill `report`'s list of data connections (`start.connected`) and its socket buffer
/// sizes (bytes, the first stream's) from the test's `streams`.
pub(crate) fn describe_streams(report: &mut Report, streams: &[DataStream]) {
    report.connected = streams
        .iter()
        .map(|s| Connected {
            socket: s.socket_no,
            local_host: crate::engine::net::ip_text(s.local.ip()),
            local_port: s.local.port(),
            remote_host: crate::engine::net::ip_text(s.remote.ip()),
            remote_port: s.remote.port(),
        })
        .collect();
    (report.sndbuf_actual, report.rcvbuf_actual) =
        streams.first().map(|s| s.buffers()).unwrap_or((0, 0));
}

impl DataStream {
    fn build(
        id: u32,
        sender: bool,
        sock: Sock,
        local: SocketAddr,
        remote: SocketAddr,
        udp_recv: Option<Arc<Mutex<UdpRecv>>>,
    ) -> DataStream {
        DataStream {
            id,
            sender,
            socket_no: sock.fd(),
            sock,
            local,
            remote,
            counter: Arc::new(AtomicU64::new(0)),
            packets: Arc::new(AtomicU64::new(0)),
            udp_recv,
            pacer_stats: Default::default(),
            gso_off: Default::default(),
            skbs: Default::default(),
            dropped_locally: Default::default(),
            port_unreachable: Default::default(),
            paced_by: Default::default(),
            trip: None,
            thread: None,
            prev_bytes: 0,
            omit_bytes: 0,
            prev_packets: 0,
            omit_packets: 0,
            prev_max_seq: 0,
            prev_unique: 0,
            prev_ooo: 0,
            retrans_prev: 0,
            retrans_omit: 0,
            max_cwnd: 0,
            reorder: 0,
            max_wnd: 0,
            rtt_min: u32::MAX,
            rtt_max: 0,
            rtt_sum: 0,
            rtt_n: 0,
            final_bytes: None,
            final_packets: None,
            final_retrans: None,
        }
    }

    /// Wrap a connected TCP socket (blocking mode is set here).
    pub(crate) fn new(id: u32, sender: bool, sock: TcpStream) -> std::io::Result<DataStream> {
        sock.set_nonblocking(false)?;
        let local = sock.local_addr()?;
        let remote = sock.peer_addr()?;
        Ok(DataStream::build(
            id,
            sender,
            Sock::Tcp(sock),
            local,
            remote,
            None,
        ))
    }

    /// Wrap a connected UDP socket; `wide` = 64-bit sequence numbers.
    pub(crate) fn new_udp(
        id: u32,
        sender: bool,
        sock: UdpSocket,
        wide: bool,
    ) -> std::io::Result<DataStream> {
        sock.set_nonblocking(false)?;
        let local = sock.local_addr()?;
        let remote = sock.peer_addr()?;
        let recv = if sender {
            None
        } else {
            Some(Arc::new(Mutex::new(UdpRecv::new(wide))))
        };
        Ok(DataStream::build(
            id,
            sender,
            Sock::Udp(sock),
            local,
            remote,
            recv,
        ))
    }

    /// Wrap a connected UDP socket carrying iperf 2 datagrams; `wide` = 64-bit sequence
    /// numbers (HEADER_SEQNO64B).
    pub(crate) fn new_udp_iperf2(
        id: u32,
        sender: bool,
        sock: UdpSocket,
        wide: bool,
    ) -> std::io::Result<DataStream> {
        let mut s = DataStream::new_udp(id, sender, sock, wide)?;
        if !sender {
            s.udp_recv = Some(Arc::new(Mutex::new(UdpRecv::new_iperf2(wide))));
        }
        Ok(s)
    }

    /// Count a datagram that reached this receiving stream another way (the first datagram
    /// of an iperf 2 flow arrives on the listening socket). `arrival_us`: wall clock, µs.
    pub(crate) fn feed_udp(&self, data: &[u8], arrival_us: i64) {
        if let Some(st) = &self.udp_recv {
            if lock(st).on_datagram(data, arrival_us) {
                self.counter.fetch_add(data.len() as u64, Relaxed);
            }
        }
    }

    /// Measure the one-way transit of every datagram this receiving UDP stream counts
    /// (iperf 2 `--trip-times`); intervals and the end figures then carry the latency.
    pub(crate) fn measure_transit(&self) {
        if let Some(st) = &self.udp_recv {
            lock(st).measure_transit();
        }
    }

    /// iperf 2 TCP `--trip-times`: a receiving stream frames the client's bursts and
    /// measures each one's one-way latency; a sending stream stamps every block with the
    /// client's `start` time (s, µs) and its own write time. Nothing on a UDP stream. Only
    /// before the phase starts.
    pub(crate) fn trip_times(&mut self, start: (u32, u32)) {
        if matches!(self.sock, Sock::Tcp(_)) {
            self.trip = Some(if self.sender {
                TripMode::Send(start)
            } else {
                TripMode::Recv(Default::default())
            });
        }
    }

    /// A receiving `--trip-times` stream's figures so far (whole test and drop reasons).
    pub(crate) fn trip_stats(&self) -> Option<TripStats> {
        match &self.trip {
            Some(TripMode::Recv(st)) => Some(*st.lock().unwrap_or_else(|p| p.into_inner())),
            _ => None,
        }
    }

    /// Another handle on a UDP stream's socket (for the iperf 2 FIN and report exchange).
    pub(crate) fn try_clone_udp(&self) -> std::io::Result<UdpSocket> {
        match &self.sock {
            Sock::Udp(u) => u.try_clone(),
            Sock::Tcp(_) => Err(std::io::Error::other("not a UDP stream")),
        }
    }

    /// Read what a receiving UDP stream's socket holds after its thread stopped counting
    /// (datagrams still in flight at the end of the test), without blocking, at most
    /// `limit` reads, noting only their sequence numbers ([`UdpRecv::note_late`]). `len`:
    /// the datagram size (a GRO super-datagram is split by it). Returns the highest
    /// sequence number seen late, 0 when none.
    pub(crate) fn read_late(&self, len: usize, limit: usize) -> u64 {
        let (Sock::Udp(u), Some(st)) = (&self.sock, &self.udp_recv) else {
            return 0;
        };
        let mut buf = vec![0u8; 65_536];
        let len = len.max(16);
        for _ in 0..limit {
            match u.recv_from(&mut buf).ok() {
                Some((n, _)) => {
                    let mut g = lock(st);
                    for chunk in buf[..n.min(buf.len())].chunks(len) {
                        g.note_late(chunk);
                    }
                }
                None => break,
            }
        }
        lock(st).late_max_seq
    }

    /// A copy of a receiving UDP stream's accounting.
    pub(crate) fn udp_stats(&self) -> Option<UdpRecv> {
        self.udp_recv.as_ref().map(|st| lock(st).clone())
    }

    /// Datagrams a sending UDP stream has sent so far.
    pub(crate) fn packets_sent(&self) -> u64 {
        self.packets.load(Relaxed)
    }

    /// Whether the stream's thread has ended (a TCP receiver saw EOF, or a socket failed).
    pub(crate) fn thread_done(&self) -> bool {
        self.thread
            .as_ref()
            .map(|t| t.is_finished())
            .unwrap_or(true)
    }

    /// Congestion control algorithm in use on a TCP socket.
    pub(crate) fn congestion(&self) -> Option<String> {
        match &self.sock {
            Sock::Tcp(s) => tcp_congestion(s.as_fd()),
            Sock::Udp(_) => None,
        }
    }

    /// Actual SO_SNDBUF and SO_RCVBUF, bytes.
    pub(crate) fn buffers(&self) -> (u32, u32) {
        let r = match &self.sock {
            Sock::Tcp(s) => socket2::SockRef::from(s),
            Sock::Udp(s) => socket2::SockRef::from(s),
        };
        (
            r.send_buffer_size().unwrap_or(0) as u32,
            r.recv_buffer_size().unwrap_or(0) as u32,
        )
    }

    /// Bytes moved so far (since start; the omit part included).
    pub(crate) fn bytes_total(&self) -> u64 {
        self.counter.load(Relaxed)
    }

    /// A second handle on a TCP stream's socket (`None` for UDP, or when the kernel refuses
    /// the dup).
    pub(crate) fn tcp_clone(&self) -> Option<TcpStream> {
        match &self.sock {
            Sock::Tcp(t) => t.try_clone().ok(),
            Sock::Udp(_) => None,
        }
    }

    fn shutdown(&self) {
        if let Sock::Tcp(s) = &self.sock {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn lock(m: &Mutex<UdpRecv>) -> std::sync::MutexGuard<'_, UdpRecv> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// The running data phase of a test.
pub(crate) struct DataPhase {
    pub params: Params,
    pub streams: Vec<DataStream>,
    pub shared: Arc<Shared>,
    /// When TEST_START happened.
    pub started: Instant,
    t0: Instant,
    last: Instant,
    interval: f64,
    omitting: bool,
    pub intervals: Vec<IntervalRecord>,
    end: Option<Instant>,
    /// The end of the measurement on the wall clock, µs since the epoch (the clock UDP
    /// arrival times are on), set with `end`.
    end_wall_us: Option<i64>,
    /// iperf 2 UDP senders: the datagram layout (None = iperf3 datagrams).
    pub iperf2_tx: Option<crate::engine::udp::Iperf2Tx>,
    /// Kernel TID of each stream's thread (same order as `streams`; 0 until it started).
    tids: Vec<Arc<AtomicI32>>,
    /// CPU of the stream threads, sampled every interval (the tool-bound evidence).
    thread_cpu: crate::engine::threadcpu::Sampler,
}

impl DataPhase {
    /// Prepare a data phase; nothing runs until [`DataPhase::start`]. `interval` in seconds.
    pub(crate) fn new(params: Params, streams: Vec<DataStream>, interval: f64) -> DataPhase {
        let shared = Arc::new(Shared {
            num: params.num,
            blockcount: params.blockcount,
            len: params.len as u64,
            skip_rx_copy: params.skip_rx_copy,
            zerocopy: params.zerocopy,
            window_set: params.window.is_some(),
            ..Default::default()
        });
        let now = Instant::now();
        DataPhase {
            omitting: params.omit > 0,
            params,
            streams,
            shared,
            started: now,
            t0: now,
            last: now,
            interval: if interval > 0.0 { interval } else { 1.0 },
            intervals: Vec::new(),
            end: None,
            end_wall_us: None,
            iperf2_tx: None,
            tids: Vec::new(),
            thread_cpu: Default::default(),
        }
    }

    /// Stop the sending streams after `datagrams` blocks over all streams (a `-k` kept on
    /// this side: the parameters the peer saw are unchanged). Only before [`DataPhase::start`];
    /// later (the streams hold the shared state) it changes nothing.
    pub(crate) fn set_send_cap(&mut self, datagrams: u64) {
        if let Some(s) = Arc::get_mut(&mut self.shared) {
            s.blockcount = datagrams;
        }
    }

    /// True for a UDP test.
    pub(crate) fn udp(&self) -> bool {
        self.params.protocol == Protocol::Udp
    }

    /// Start every stream's thread. `check_recv_limit`: wake on a received `-n`/`-k` target
    /// (the client in `-R`/`--bidir`).
    pub(crate) fn start(&mut self, check_recv_limit: bool) -> std::io::Result<()> {
        let now = Instant::now();
        self.started = now;
        self.t0 = now;
        self.last = now;
        let rate = self.params.bandwidth;
        let len = self.params.len as usize;
        // One block shared by every sending stream (-P 128 -l 1M: 1 MiB, not 128 MiB).
        let block: Arc<[u8]> = payload(len, self.params.repeating_payload).into();
        self.tids.clear();
        for s in &mut self.streams {
            let ctr = s.counter.clone();
            let sh = self.shared.clone();
            let tid = Arc::new(AtomicI32::new(0));
            self.tids.push(tid.clone());
            let tid_slot = move || tid.store(crate::engine::threadcpu::current_tid(), Relaxed);
            let name = format!("stream-{}", s.id);
            let b = std::thread::Builder::new().name(name);
            let handle = match (&s.sock, s.sender) {
                (Sock::Tcp(t), true) if matches!(s.trip, Some(TripMode::Send(_))) => {
                    let sock = t.try_clone()?;
                    let start = match s.trip {
                        Some(TripMode::Send(st)) => st,
                        _ => (0, 0),
                    };
                    b.spawn(move || {
                        tid_slot();
                        trip::send_loop(sock, len, ctr, sh, rate, start)
                    })?
                }
                (Sock::Tcp(t), false) if matches!(s.trip, Some(TripMode::Recv(_))) => {
                    let sock = t.try_clone()?;
                    let st = match &s.trip {
                        Some(TripMode::Recv(st)) => st.clone(),
                        _ => Default::default(),
                    };
                    b.spawn(move || {
                        tid_slot();
                        trip::recv_loop(sock, len, ctr, sh, st)
                    })?
                }
                (Sock::Tcp(t), true) => {
                    let sock = t.try_clone()?;
                    let buf = block.clone();
                    b.spawn(move || {
                        tid_slot();
                        send_loop(sock, buf, ctr, sh, rate)
                    })?
                }
                (Sock::Tcp(t), false) => {
                    let sock = t.try_clone()?;
                    b.spawn(move || {
                        tid_slot();
                        recv_loop(sock, len, ctr, sh, check_recv_limit)
                    })?
                }
                (Sock::Udp(u), true) => {
                    let sock = u.try_clone()?;
                    let cfg = UdpSendCfg {
                        len,
                        rate,
                        wide: self.params.udp_counters_64bit,
                        repeating: self.params.repeating_payload,
                        gso: true,
                        iperf2: self.iperf2_tx.clone(),
                        pacer_stats: Some(s.pacer_stats.clone()),
                        gso_off: Some(s.gso_off.clone()),
                        skbs: Some(s.skbs.clone()),
                        dropped_locally: Some(s.dropped_locally.clone()),
                        port_unreachable: Some(s.port_unreachable.clone()),
                        pacing: self.params.udp_pacing,
                        paced_by: Some(s.paced_by.clone()),
                    };
                    let pk = s.packets.clone();
                    b.spawn(move || {
                        tid_slot();
                        udp::udp_send_loop(sock, cfg, ctr, pk, sh)
                    })?
                }
                (Sock::Udp(u), false) => {
                    let sock = u.try_clone()?;
                    let st = s
                        .udp_recv
                        .clone()
                        .unwrap_or_else(|| Arc::new(Mutex::new(UdpRecv::new(false))));
                    b.spawn(move || {
                        tid_slot();
                        udp::udp_recv_loop(sock, len, st, ctr, sh, check_recv_limit)
                    })?
                }
            };
            s.thread = Some(handle);
        }
        Ok(())
    }

    /// True while inside the `-O` period.
    pub(crate) fn omitting(&self) -> bool {
        self.omitting
    }

    /// Seconds since TEST_START.
    pub(crate) fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Bytes received so far on this side's receiving streams (the omit part included).
    pub(crate) fn received_total(&self) -> u64 {
        self.streams
            .iter()
            .filter(|s| !s.sender)
            .map(|s| s.bytes_total())
            .sum()
    }

    /// Total bytes moved on all streams (progress for the watchdog).
    pub(crate) fn progress(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes_total()).sum()
    }

    /// Take an interval sample now. Returns `None` for a zero-length interval.
    pub(crate) fn sample(&mut self) -> Option<IntervalRecord> {
        self.sample_at(Instant::now())
    }

    /// Take an interval sample ending at `now`.
    fn sample_at(&mut self, now: Instant) -> Option<IntervalRecord> {
        let start = self.last.duration_since(self.t0).as_secs_f64();
        let end = now.duration_since(self.t0).as_secs_f64();
        let secs = end - start;
        if secs <= 0.0 {
            return None;
        }
        self.last = now;
        let omitted = self.omitting;
        let tids = self.stream_tids();
        self.thread_cpu.sample(&tids);
        let mut out = Vec::with_capacity(self.streams.len());
        for s in &mut self.streams {
            let cur = s.counter.load(Relaxed);
            let bytes = cur.saturating_sub(s.prev_bytes);
            s.prev_bytes = cur;
            let mut tcp = None;
            let mut udp_s = None;
            let mut latency = None;
            match (&s.sock, s.sender) {
                (Sock::Tcp(t), true) => {
                    tcp = tcp_info(t.as_fd()).ok().map(|ti| {
                        let retr = ti.total_retrans.saturating_sub(s.retrans_prev);
                        s.retrans_prev = ti.total_retrans;
                        if !omitted {
                            s.max_cwnd = s.max_cwnd.max(ti.snd_cwnd);
                            s.reorder = ti.reord_seen;
                            s.max_wnd = s.max_wnd.max(ti.snd_wnd);
                            s.rtt_min = s.rtt_min.min(ti.rtt);
                            s.rtt_max = s.rtt_max.max(ti.rtt);
                            s.rtt_sum += ti.rtt as u64;
                            s.rtt_n += 1;
                        }
                        TcpSample {
                            retransmits: retr,
                            snd_cwnd: ti.snd_cwnd,
                            snd_wnd: ti.snd_wnd,
                            rtt: ti.rtt,
                            rttvar: ti.rttvar,
                            pmtu: ti.pmtu,
                            reorder: ti.reord_seen,
                        }
                    });
                }
                (Sock::Tcp(_), false) => {
                    if let Some(TripMode::Recv(st)) = &s.trip {
                        latency =
                            Some(st.lock().unwrap_or_else(|p| p.into_inner()).take_interval());
                    }
                }
                (Sock::Udp(_), true) => {
                    let p = s.packets.load(Relaxed);
                    udp_s = Some(UdpSample {
                        packets: p.saturating_sub(s.prev_packets),
                        ..Default::default()
                    });
                    s.prev_packets = p;
                }
                (Sock::Udp(_), false) => {
                    if let Some(st) = &s.udp_recv {
                        let mut g = lock(st);
                        let expected = g.max_seq.saturating_sub(s.prev_max_seq);
                        let uniq = g.unique.saturating_sub(s.prev_unique);
                        udp_s = Some(UdpSample {
                            packets: expected,
                            lost: expected.saturating_sub(uniq),
                            jitter_ms: g.jitter * 1000.0,
                            out_of_order: g.out_of_order.saturating_sub(s.prev_ooo),
                            latency: g
                                .take_transit_interval()
                                .map(|t| t.to_ms().unwrap_or_default()),
                        });
                        s.prev_max_seq = g.max_seq;
                        s.prev_unique = g.unique;
                        s.prev_ooo = g.out_of_order;
                    }
                }
            }
            out.push(StreamInterval {
                id: s.id,
                socket: s.socket_no,
                start,
                end,
                bytes,
                bits_per_second: bytes as f64 * 8.0 / secs,
                sender: s.sender,
                omitted,
                tcp,
                udp: udp_s,
                latency,
            });
        }
        let rec = IntervalRecord { streams: out };
        self.intervals.push(rec.clone());
        Some(rec)
    }

    /// The omit period is over: sample what is pending as omitted, then restart the clock and
    /// the baselines (bytes, retransmits, datagrams, `-n`/`-k` send totals) from now.
    pub(crate) fn end_omit(&mut self) -> Option<IntervalRecord> {
        let rec = self.sample();
        self.omitting = false;
        let now = Instant::now();
        self.t0 = now;
        self.last = now;
        for s in &mut self.streams {
            s.omit_bytes = s.counter.load(Relaxed);
            s.retrans_omit = s.retrans_prev;
            s.omit_packets = s.packets.load(Relaxed);
            if let Some(st) = &s.udp_recv {
                lock(st).end_omit();
            }
        }
        self.shared.sent_bytes.store(0, Relaxed);
        self.shared.sent_blocks.store(0, Relaxed);
        rec
    }

    /// Stop the sending threads and wait for them (≤ the 200 ms poll period), so that the
    /// sent totals read next are exactly what was written.
    pub(crate) async fn stop_senders(&mut self) {
        self.shared.stop_send.store(true, Relaxed);
        self.join(|s| s.sender).await;
    }

    async fn join(&mut self, which: impl Fn(&DataStream) -> bool) {
        let hs: Vec<JoinHandle<()>> = self
            .streams
            .iter_mut()
            .filter(|s| which(s))
            .filter_map(|s| s.thread.take())
            .collect();
        let _ = crate::engine::task::spawn_blocking(move || {
            for h in hs {
                let _ = h.join();
            }
        })
        .await;
    }

    /// Stop the senders, then freeze the totals (bytes after this are not counted) and take
    /// the final partial interval if it is worth showing (≥ 10 % of an interval, or the only
    /// one). UDP receivers first read what is already queued, so it is not counted as lost.
    pub(crate) async fn finish(&mut self) -> Option<IntervalRecord> {
        self.finish_at(Instant::now()).await
    }

    /// [`DataPhase::finish`] with the end of the measurement at `t_end` instead of now (a
    /// server that read a `-n`/`-k` test to its end: the time its last byte arrived). A
    /// `t_end` before the last interval sample is taken as that sample's end, so the summary
    /// never ends before its intervals. Totals are frozen now, whatever `t_end` says.
    pub(crate) async fn finish_at(&mut self, t_end: Instant) -> Option<IntervalRecord> {
        let t_end = t_end.max(self.last);
        self.stop_senders().await;
        if self.udp() {
            // The receiving threads read what is queued before they exit.
            self.shared.stop.store(true, Relaxed);
            self.join(|s| !s.sender).await;
        }
        let since_last = t_end.saturating_duration_since(self.last).as_secs_f64();
        let rec = if since_last >= 0.1 * self.interval || self.intervals.is_empty() {
            self.sample_at(t_end)
        } else {
            None
        };
        self.end = Some(t_end);
        let since_end = Instant::now().saturating_duration_since(t_end);
        self.end_wall_us = Some(
            crate::engine::udp::realtime_us()
                .saturating_sub(i64::try_from(since_end.as_micros()).unwrap_or(i64::MAX)),
        );
        for s in &mut self.streams {
            s.final_bytes = Some(s.counter.load(Relaxed));
            s.final_packets = Some(s.packets.load(Relaxed));
            if let (Sock::Tcp(t), true) = (&s.sock, s.sender) {
                if let Ok(ti) = tcp_info(t.as_fd()) {
                    s.final_retrans = Some(ti.total_retrans);
                }
            }
        }
        rec
    }

    /// Bytes received after the omit period, summed over the receiving streams (bytes).
    pub(crate) fn received_after_omit(&self) -> u64 {
        self.streams
            .iter()
            .filter(|s| !s.sender)
            .map(|s| s.counter.load(Relaxed).saturating_sub(s.omit_bytes))
            .sum()
    }

    /// Bytes received after the omit period on the receiving stream with iperf3 id `id`;
    /// `None` for a sending stream or an unknown id.
    pub(crate) fn stream_received_after_omit(&self, id: u32) -> Option<u64> {
        self.streams
            .iter()
            .find(|s| s.id == id && !s.sender)
            .map(|s| s.counter.load(Relaxed).saturating_sub(s.omit_bytes))
    }

    /// Seconds of the measured period (omit excluded), up to `finish` (or now).
    pub(crate) fn measured_seconds(&self) -> f64 {
        self.end
            .unwrap_or_else(Instant::now)
            .duration_since(self.t0)
            .as_secs_f64()
    }

    /// Stop all threads and close the sockets. Blocks up to ~200 ms (the loops' poll period);
    /// call from `spawn_blocking` or a non-async context.
    pub(crate) fn stop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for s in &self.streams {
            s.shutdown();
        }
        for s in &mut self.streams {
            if let Some(h) = s.thread.take() {
                let _ = h.join();
            }
        }
    }

    /// Signal the threads to stop without waiting for them.
    pub(crate) fn request_stop(&self) {
        self.shared.stop.store(true, Relaxed);
    }

    /// Kernel TIDs of the stream threads that have started (0 = not yet), in stream order.
    pub(crate) fn stream_tids(&self) -> Vec<i32> {
        self.tids.iter().map(|t| t.load(Relaxed)).collect()
    }

    /// This side's summary of each stream: local totals filled in, the peer's side left
    /// empty (`receiver: None` for local senders, zero sender totals for local receivers).
    pub(crate) fn local_summaries(&self) -> Vec<StreamSummary> {
        let secs = self.measured_seconds();
        let tids = self.stream_tids();
        let cpu = self.thread_cpu.result();
        self.streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let thread_cpu = tids
                    .get(i)
                    .and_then(|t| cpu.iter().find(|c| c.tid == *t))
                    .copied();
                let total = s.final_bytes.unwrap_or_else(|| s.counter.load(Relaxed));
                let mine = SideTotals {
                    bytes: total.saturating_sub(s.omit_bytes),
                    seconds: secs,
                };
                let retrans = match (&s.sock, s.sender) {
                    (Sock::Tcp(_), true) => s
                        .final_retrans
                        .map(|r| r.saturating_sub(s.retrans_omit) as i64)
                        .unwrap_or(-1),
                    _ => -1,
                };
                let udp_sum = match (&s.sock, s.sender) {
                    (Sock::Udp(_), true) => {
                        let p = s.final_packets.unwrap_or_else(|| s.packets.load(Relaxed));
                        let paced = (self.params.bandwidth > 0)
                            .then(|| s.pacer_stats.lock().map(|g| *g).unwrap_or_default());
                        Some(UdpSummary {
                            sent_packets: Some(p.saturating_sub(s.omit_packets)),
                            omitted_packets: s.omit_packets,
                            sender_max_lag_ms: paced.map(|st| st.max_lag_ms),
                            sender_peak_1ms_bps: paced
                                .map(|st| st.busiest_1ms_bytes as f64 * 8000.0),
                            sender_stalls: paced.map(|st| st.stalls),
                            sender_owed_ms: paced.map(|st| st.owed_ms),
                            gso_off: s.gso_off.lock().map(|g| *g).unwrap_or_default(),
                            sender_skbs: Some(s.skbs.load(Relaxed)),
                            sender_dropped_locally: Some(s.dropped_locally.load(Relaxed)),
                            sender_port_unreachable: Some(s.port_unreachable.load(Relaxed))
                                .filter(|n| *n > 0),
                            paced_by: s.paced_by.lock().map(|g| *g).unwrap_or_default(),
                            ..Default::default()
                        })
                    }
                    (Sock::Udp(_), false) => s.udp_recv.as_ref().map(|st| {
                        let g = lock(st);
                        UdpSummary {
                            sent_packets: None,
                            omitted_packets: 0,
                            expected: Some(g.expected_after_omit()),
                            lost: Some(g.lost_after_omit()),
                            jitter_ms: g.jitter * 1000.0,
                            out_of_order: g.out_of_order,
                            duplicates: g.duplicates,
                            stray: g.stray,
                            peak_1ms_bps: g.peak_1ms_bps,
                            sender_max_lag_ms: None,
                            sender_peak_1ms_bps: None,
                            sender_stalls: None,
                            sender_owed_ms: None,
                            gso_off: None,
                            sender_skbs: None,
                            sender_dropped_locally: None,
                            sender_port_unreachable: None,
                            paced_by: None,
                            highest_seq: Some(g.max_seq),
                            trailing_lost: None,
                            quiet_end_s: self.end_wall_us.filter(|_| g.last_arrival_us > 0).map(
                                |e| (e.saturating_sub(g.last_arrival_us) as f64 / 1e6).max(0.0),
                            ),
                        }
                    }),
                    _ => None,
                };
                StreamSummary {
                    id: s.id,
                    socket: s.socket_no,
                    local_sender: s.sender,
                    sender: if s.sender {
                        mine
                    } else {
                        SideTotals::default()
                    },
                    receiver: if s.sender { None } else { Some(mine) },
                    retransmits: retrans,
                    reorder: s.reorder,
                    max_snd_cwnd: s.max_cwnd,
                    max_snd_wnd: s.max_wnd,
                    max_rtt: s.rtt_max,
                    min_rtt: if s.rtt_n > 0 { s.rtt_min } else { 0 },
                    mean_rtt: s.rtt_sum.checked_div(s.rtt_n).unwrap_or(0) as u32,
                    udp: udp_sum,
                    thread_cpu,
                }
            })
            .collect()
    }

    /// This side's results document for the exchange (§9.2).
    pub(crate) fn results(
        &self,
        cpu: crate::engine::stats::CpuUtil,
        congestion: Option<String>,
        summaries: &[StreamSummary],
    ) -> Results {
        let end = self.measured_seconds();
        let has_tcp_sender = !self.udp() && self.streams.iter().any(|s| s.sender);
        let sender_has_retransmits = if has_tcp_sender {
            1
        } else if self.streams.iter().any(|s| s.sender) {
            0
        } else {
            -1
        };
        let streams = self
            .streams
            .iter()
            .zip(summaries)
            .map(|(s, sum)| {
                let mut r = crate::engine::params::StreamResult {
                    id: s.id,
                    bytes: if s.sender {
                        sum.sender.bytes
                    } else {
                        sum.receiver.map(|x| x.bytes).unwrap_or(0)
                    },
                    retransmits: if s.sender { sum.retransmits } else { -1 },
                    start_time: 0.0,
                    end_time: end,
                    ..Default::default()
                };
                if s.sender {
                    let p = s.final_packets.unwrap_or_else(|| s.packets.load(Relaxed));
                    r.packets = p as i64;
                    r.omitted_packets = s.omit_packets as i64;
                } else if let Some(st) = &s.udp_recv {
                    let g = lock(st);
                    r.packets = g.max_seq as i64;
                    r.omitted_packets = g.omit_max_seq as i64;
                    r.errors = g.lost() as i64;
                    r.omitted_errors = g.omit_max_seq.saturating_sub(g.omit_unique) as i64;
                    r.jitter = g.jitter;
                }
                r
            })
            .collect();
        Results {
            cpu_util_total: cpu.total,
            cpu_util_user: cpu.user,
            cpu_util_system: cpu.system,
            sender_has_retransmits,
            congestion_used: congestion,
            server_output_text: None,
            server_output_json: None,
            netperfd_drops: None,
            netperfd_pacing: None,
            streams,
        }
    }

    /// After the test: read what the receiving UDP streams' sockets still hold (see
    /// [`DataStream::read_late`]) and raise each stream's `highest_seq` in `summaries` to
    /// the highest sequence number that arrived late, so that the loss after the last
    /// datagram received does not count what was in flight when the receiver stopped.
    pub(crate) fn note_late_arrivals(&self, summaries: &mut [StreamSummary]) {
        if !self.udp() {
            return;
        }
        let len = self.params.len as usize;
        for s in self.streams.iter().filter(|s| !s.sender) {
            if let Sock::Udp(u) = &s.sock {
                let _ = u.set_nonblocking(true);
            }
            let late = s.read_late(len, 100_000);
            if let Some(u) = summaries
                .iter_mut()
                .find(|x| x.id == s.id)
                .and_then(|x| x.udp.as_mut())
            {
                if let Some(h) = u.highest_seq.as_mut() {
                    *h = (*h).max(late);
                }
            }
        }
    }

    /// True when any stream sends TCP (and so reports TCP_INFO).
    pub(crate) fn has_retransmits(&self) -> bool {
        !self.udp() && self.streams.iter().any(|s| s.sender)
    }
}

impl Drop for DataPhase {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for s in &self.streams {
            s.shutdown();
        }
    }
}

/// Merge the peer's results into this side's summaries (matched by stream id): for a local
/// sender the peer's received bytes, duration, and (UDP) expected/lost datagrams and jitter;
/// for a local receiver the peer's sent bytes, duration, retransmits and datagrams sent.
/// Errors on an id this side does not know (IESTREAMID), and on a stream whose claimed
/// bytes or seconds no port could give in `elapsed` s of this side's clock (from the data
/// phase's start; see [`credible_claim`]): nothing is merged then.
pub(crate) fn merge_remote(
    summaries: &mut [StreamSummary],
    remote: &Results,
    elapsed: f64,
    params: &Params,
) -> Result<(), String> {
    // A stream named twice would be counted twice (the attacker tryout: its trailing loss
    // tripled); no iperf3 sends that.
    for (i, r) in remote.streams.iter().enumerate() {
        if remote.streams[..i].iter().any(|x| x.id == r.id) {
            return Err(format!("stream id {} appears twice in the results", r.id));
        }
    }
    for r in &remote.streams {
        credible_claim(r, elapsed, params)?;
    }
    for r in &remote.streams {
        let Some(s) = summaries.iter_mut().find(|s| s.id == r.id) else {
            return Err(format!("stream has an invalid id ({})", r.id));
        };
        let secs = r.end_time - r.start_time;
        let secs = if secs.is_finite() { secs } else { 0.0 };
        let t = SideTotals {
            bytes: r.bytes,
            seconds: if secs > 0.0 { secs } else { 0.0 },
        };
        if s.local_sender {
            s.receiver = Some(t);
            if let Some(u) = s.udp.as_mut() {
                // Peers before 3.14 do not send omitted_packets: use our own count of what
                // was sent during the omit period instead.
                let omitted = if r.omitted_packets > 0 {
                    r.omitted_packets
                } else {
                    u.omitted_packets as i64
                };
                // Saturating: the figures come from the network (a peer's ±2^63 overflowed).
                u.expected = Some(r.packets.saturating_sub(omitted).max(0) as u64);
                u.lost = Some(r.errors.saturating_sub(r.omitted_errors).max(0) as u64);
                u.jitter_ms = r.jitter * 1000.0;
            }
        } else {
            s.sender = t;
            s.retransmits = r.retransmits;
            if let Some(u) = s.udp.as_mut() {
                u.sent_packets = Some(r.packets.saturating_sub(r.omitted_packets).max(0) as u64);
            }
        }
    }
    Ok(())
}

/// Count the datagrams lost after the last one received into this side's receiving UDP
/// streams' figures, once the peer's results are merged ([`merge_remote`]): the peer's count
/// of what it sent (`packets`, over the whole test) less the highest sequence number this
/// side saw (see [`crate::engine::udp::trailing_loss`]), only for a stream that received
/// nothing in at least the last [`crate::engine::udp::TRAILING_LOSS_MIN_S`] of the test
/// (from its last datagram's arrival to the end of the measurement, `quiet_end_s`, or whole
/// empty intervals, [`quiet_tail_s`]): one that received until the end may have the rest still queued on
/// the path (the new-user tryout: a 3 MB queue in a router drained after TEST_END, and
/// every datagram reached the receiver's socket). Streams this side sends (the peer's
/// receiver's timing is not known here), streams the peer does not name and streams
/// without UDP figures are left as they are.
///
/// `elapsed`: how long the test has run on this host's clock, s (from the data phase's
/// start; never the peer's own times, which a hostile peer sets), for the bounds of
/// [`crate::engine::udp::trailing_loss`]. `params`: the test's; with a bitrate (`-b`, per
/// stream, bits/s) a peer's count above what that rate could number in `elapsed` (see
/// [`credible_count`]) is not used either; without one, the rate is taken as 100 Gbit/s.
pub(crate) fn count_trailing_loss(
    report: &mut Report,
    remote: &Results,
    elapsed: f64,
    params: &Params,
) {
    let most = credible_count(params, elapsed);
    for r in &remote.streams {
        let by_intervals = quiet_tail_s(&report.intervals, r.id);
        let Some(s) = report.streams.iter_mut().find(|s| s.id == r.id) else {
            continue;
        };
        if s.local_sender {
            // The peer's receiver: when its last datagram arrived is not known here, so a
            // tail still queued on the path cannot be told from a lost one.
            continue;
        }
        let Some(u) = s.udp.as_mut() else { continue };
        // The quiet end: from the last datagram's arrival to the end of the measurement
        // (a dark spell inside the last interval counts, s51 tryout: 0.9 s dark at the end of
        // a 10 s test showed 0 lost), or whole empty intervals at the end, whichever is longer.
        let quiet = u
            .quiet_end_s
            .filter(|q| q.is_finite())
            .map_or(by_intervals, |q| q.min(elapsed.max(0.0)).max(by_intervals));
        if quiet < udp::TRAILING_LOSS_MIN_S {
            // Datagrams arrived until the end: what the sender numbered after the last one
            // may still be queued on the path (a deep queue drains after TEST_END), not lost.
            continue;
        }
        if let Some(seen) = u.highest_seq {
            let credible = most.is_none_or(|m| u64::try_from(r.packets).is_ok_and(|p| p <= m));
            if !credible || u.add_trailing_loss(r.packets, seen, elapsed).is_none() {
                tracing::debug!(
                    stream = r.id,
                    packets = r.packets,
                    elapsed,
                    "the peer's datagram count is not credible: loss after the last datagram not counted"
                );
            }
        }
    }
}

/// Seconds at the end of the test in which this side's receiving stream `id` got nothing:
/// its last intervals with no bytes, added up backwards (0 when the last one had bytes, or
/// the stream is not received here). Intervals shorter than a tenth of the interval are
/// not sampled (see [`DataPhase::finish`]), so a sliver at the end does not count as quiet.
pub(crate) fn quiet_tail_s(intervals: &[IntervalRecord], id: u32) -> f64 {
    let mut secs = 0.0;
    for rec in intervals.iter().rev() {
        let Some(s) = rec.streams.iter().find(|s| s.id == id && !s.sender) else {
            break;
        };
        if s.bytes > 0 {
            break;
        }
        let d = s.end - s.start;
        if d.is_finite() && d > 0.0 {
            secs += d;
        }
    }
    secs
}

/// Check one stream's figures in a peer's results against what any port could carry: its
/// bytes at most [`UNPACED_CREDIBLE_BPS`] over `elapsed` s (this side's clock, from the data
/// phase's start) + 1 s with 25 % to spare, and with a bitrate (`params.bandwidth`, per
/// stream, bits/s; iperf3's `-b`) at most that rate over the same time with the same spare
/// and 1,000 blocks of `params.len` more (as [`credible_count`]); its seconds (`end_time` −
/// `start_time`) at most `elapsed` + 10 % + 2 s; its bytes over its own seconds at most 125
/// Gbit/s; its retransmits at most one per 40 bytes the bound allows (a retransmitted TCP
/// segment is at least 41 bytes on the wire). A hostile client's claim of 10^12 bytes in a
/// 3 s test was stored as 2.67 Tbit/s and judged "reached the requested rate" (s51 tryout),
/// 10^12 retransmits were stored as they came (s52 tryout); a stock iperf3 never comes near
/// these bounds. Errors: the stream, its claim and the bound, in words.
pub(crate) fn credible_claim(
    r: &StreamResult,
    elapsed: f64,
    params: &Params,
) -> Result<(), String> {
    let elapsed = if elapsed.is_finite() && elapsed > 0.0 {
        elapsed.min(604_800.0)
    } else {
        0.0
    };
    let most_bps = UNPACED_CREDIBLE_BPS as f64 * 1.25;
    let most_bytes = most_bps / 8.0 * (elapsed + 1.0);
    let paced_bytes = (params.bandwidth > 0).then(|| {
        params.bandwidth as f64 * 1.25 / 8.0 * (elapsed + 1.0) + 1_000.0 * f64::from(params.len)
    });
    let bytes = r.bytes as f64;
    let secs = r.end_time - r.start_time;
    let refuse = |what: String| {
        Err(format!(
            "the peer's results for stream {} claim {what}: not credible, results refused",
            r.id
        ))
    };
    if bytes > most_bytes {
        return refuse(format!(
            "{} bytes in a test that has run {elapsed:.1} s (more than {} could carry)",
            r.bytes,
            crate::model::display::rate(most_bps)
        ));
    }
    if let Some(most) = paced_bytes.filter(|m| bytes > *m) {
        return refuse(format!(
            "{} bytes in a test paced at {} that has run {elapsed:.1} s (at most {most:.0})",
            r.bytes,
            crate::model::display::rate(params.bandwidth as f64)
        ));
    }
    if r.retransmits > 0 && r.retransmits as f64 > most_bytes / 40.0 {
        return refuse(format!(
            "{} retransmits in a test that has run {elapsed:.1} s",
            r.retransmits
        ));
    }
    if secs.is_finite() && secs > elapsed * 1.1 + 2.0 {
        return refuse(format!(
            "{secs:.1} s of measurement in a test that has run {elapsed:.1} s"
        ));
    }
    if secs.is_finite() && secs > 0.0 && bytes * 8.0 / secs > most_bps {
        return refuse(format!(
            "{} bytes in {secs} s ({}, more than any port carries)",
            r.bytes,
            crate::model::display::rate(bytes * 8.0 / secs)
        ));
    }
    Ok(())
}

/// The bitrate an unpaced UDP sender (`-b 0`) is believed to reach at most, bits/s: 100
/// Gbit/s, more than any port of the boards netperfd runs on (see [`credible_count`]).
pub(crate) const UNPACED_CREDIBLE_BPS: u64 = 100_000_000_000;

/// The most datagrams a sender paced at the test's bitrate (`params.bandwidth`, per stream,
/// bits/s; iperf3's `-b`) of `params.len`-byte datagrams can number in `elapsed` s (+1 s),
/// with 25 % and 1,000 datagrams to spare (a sender catching up after a stall never exceeds
/// its average). Without a bitrate (`-b 0`) the sender is taken at [`UNPACED_CREDIBLE_BPS`]
/// (s51 tryout: a hostile client that sent 1,780 datagrams claimed 999,000,000 at `-b 0`,
/// and the run stored 99.9998 % loss). `None` without a length.
pub(crate) fn credible_count(params: &Params, elapsed: f64) -> Option<u64> {
    if params.len == 0 {
        return None;
    }
    let bandwidth = if params.bandwidth == 0 {
        UNPACED_CREDIBLE_BPS
    } else {
        params.bandwidth
    };
    let secs = if elapsed.is_finite() && elapsed > 0.0 {
        elapsed.min(604_800.0)
    } else {
        0.0
    };
    let per_s = bandwidth as f64 / 8.0 / f64::from(params.len);
    // Saturating float → integer conversion.
    Some(((per_s * (secs + 1.0) * 1.25) as u64).saturating_add(1_000))
}

/// This side's results document (`mine`, from [`DataPhase::results`]) with the datagrams
/// its receiving streams lost after the last one received ([`count_trailing_loss`]) in
/// their `errors` and `packets`, so that the peer (a stock client too) shows them.
pub(crate) fn results_with_trailing_loss(mine: &mut Results, summaries: &[StreamSummary]) {
    for r in &mut mine.streams {
        let Some(t) = summaries
            .iter()
            .find(|s| s.id == r.id && !s.local_sender)
            .and_then(|s| s.udp.and_then(|u| u.trailing_lost))
        else {
            continue;
        };
        let t = i64::try_from(t).unwrap_or(i64::MAX);
        r.errors = r.errors.saturating_add(t);
        r.packets = r.packets.saturating_add(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::report::UdpSummary;

    /// A report whose streams are `streams` and whose stream 1 received 1,000 bytes in its
    /// first second, then nothing for `quiet` s.
    fn rep(streams: Vec<StreamSummary>, quiet: f64) -> Report {
        let iv = |start: f64, end: f64, bytes: u64| IntervalRecord {
            streams: vec![StreamInterval {
                id: 1,
                socket: 5,
                start,
                end,
                bytes,
                bits_per_second: 0.0,
                sender: false,
                omitted: false,
                tcp: None,
                udp: None,
                latency: None,
            }],
        };
        let mut r = Report::new(
            crate::engine::report::Role::Server,
            Params::default(),
            "c".into(),
            ("192.0.2.1".into(), 5201),
            "192.0.2.2:5201".parse().expect("addr"),
            1.0,
        );
        r.streams = streams;
        r.intervals = vec![iv(0.0, 1.0, 1_000)];
        if quiet > 0.0 {
            r.intervals.push(iv(1.0, 1.0 + quiet, 0));
        }
        r
    }

    fn udp_params(bandwidth: u64) -> Params {
        Params {
            protocol: Protocol::Udp,
            bandwidth,
            len: 1_000,
            ..Params::default()
        }
    }

    /// The receiver's end figures count what the sender numbered after the last datagram
    /// that arrived (the tryout: lost 0 / total 7 of 9,378 sent), in the summaries (text,
    /// -J, the stored run) and in the results the peer gets, when the stream received
    /// nothing in the last 0.25 s or more; a peer's absurd count changes nothing and panics
    /// nowhere.
    #[test]
    fn the_sender_s_count_adds_the_loss_after_the_last_datagram() {
        let receiving = |expected, lost, highest| StreamSummary {
            id: 1,
            local_sender: false,
            receiver: Some(SideTotals {
                bytes: 0,
                seconds: 10.0,
            }),
            udp: Some(UdpSummary {
                expected: Some(expected),
                lost: Some(lost),
                highest_seq: Some(highest),
                ..Default::default()
            }),
            ..Default::default()
        };
        let theirs = |packets, omitted| Results {
            streams: vec![StreamResult {
                id: 1,
                packets,
                omitted_packets: omitted,
                end_time: 10.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        // 7 seen, none missing between, nothing in the last 9 s; the client numbered 9,378.
        let mut r = rep(vec![receiving(7, 0, 7)], 9.0);
        merge_remote(&mut r.streams, &theirs(9_378, 0), 10.0, &Params::default()).unwrap();
        count_trailing_loss(&mut r, &theirs(9_378, 0), 10.0, &udp_params(0));
        let u = r.streams[0].udp.unwrap();
        assert_eq!(
            (u.lost, u.expected, u.trailing_lost),
            (Some(9_371), Some(9_378), Some(9_371))
        );
        assert_eq!(u.loss(), (9_371, 9_378));
        let mut mine = Results {
            streams: vec![StreamResult {
                id: 1,
                packets: 7,
                errors: 0,
                ..Default::default()
            }],
            ..Default::default()
        };
        results_with_trailing_loss(&mut mine, &r.streams);
        assert_eq!(
            (mine.streams[0].packets, mine.streams[0].errors),
            (9_378, 9_371)
        );
        // The same counts with datagrams arriving until the end (the new-user tryout: a
        // 3 MB queue in a router still held them at TEST_END): nothing added.
        for quiet in [0.0, 0.2] {
            let mut r = rep(vec![receiving(7, 0, 7)], quiet);
            count_trailing_loss(&mut r, &theirs(9_378, 0), 10.0, &udp_params(0));
            let u = r.streams[0].udp.unwrap();
            assert_eq!(
                (u.lost, u.expected, u.trailing_lost),
                (Some(0), Some(7), None)
            );
        }
        // With -O 2: 100 numbered in the omit period; the whole-test counts are compared
        // (12 s on this host's clock: the tail of 100 of 1,000 lasted 1.2 s).
        let mut r = rep(vec![receiving(800, 5, 900)], 1.0);
        count_trailing_loss(&mut r, &theirs(1_000, 100), 12.0, &udp_params(0));
        let u = r.streams[0].udp.unwrap();
        assert_eq!((u.lost, u.expected), (Some(105), Some(900)));
        // A count below the highest seen (a wrong or old peer): nothing added.
        let mut r = rep(vec![receiving(800, 5, 900)], 1.0);
        count_trailing_loss(&mut r, &theirs(10, 0), 10.0, &udp_params(0));
        assert_eq!(r.streams[0].udp.unwrap().lost, Some(5));
        assert_eq!(r.streams[0].udp.unwrap().trailing_lost, Some(0));
        // A tail shorter than 0.25 s of the sender's rate: 100 of 10,000 in 10 s is 0.1 s.
        let mut r = rep(vec![receiving(9_900, 0, 9_900)], 1.0);
        count_trailing_loss(&mut r, &theirs(10_000, 0), 10.0, &udp_params(0));
        let u = r.streams[0].udp.unwrap();
        assert_eq!(
            (u.lost, u.expected, u.trailing_lost),
            (Some(0), Some(9_900), Some(0))
        );
        // Hostile counts: negative, 2^63 − 1; nothing changes.
        for bad in [i64::MIN, -1, i64::MAX] {
            let mut r = rep(vec![receiving(800, 5, 900)], 1.0);
            count_trailing_loss(&mut r, &theirs(bad, i64::MIN), f64::MAX, &udp_params(0));
            let u = r.streams[0].udp.unwrap();
            assert_eq!(
                (u.lost, u.expected, u.trailing_lost),
                (Some(5), Some(800), None),
                "{bad}"
            );
        }
        // Our own sender against a stock receiver: when the receiver's last datagram came
        // is not known here, so nothing is added to its figures.
        let mut r = rep(
            vec![StreamSummary {
                id: 1,
                local_sender: true,
                udp: Some(UdpSummary {
                    sent_packets: Some(950),
                    omitted_packets: 50,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            5.0,
        );
        let stock = Results {
            streams: vec![StreamResult {
                id: 1,
                packets: 900,
                omitted_packets: 50,
                errors: 3,
                end_time: 10.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        merge_remote(&mut r.streams, &stock, 12.0, &Params::default()).unwrap();
        count_trailing_loss(&mut r, &stock, 12.0, &udp_params(0));
        let u = r.streams[0].udp.unwrap();
        assert_eq!(
            (u.lost, u.expected, u.trailing_lost),
            (Some(3), Some(850), None)
        );
    }

    /// The attacker tryout of the trailing loss: a client's results claimed
    /// 120,960,400,000,000 datagrams (its own end_time 604,800 s) in a test this server
    /// timed at 1 s, and the run stored that many lost; a results document naming stream 1
    /// three times tripled the loss. The bounds now use this host's clock and the test's
    /// bitrate, and a stream named twice is refused.
    #[test]
    fn a_peer_s_count_is_bounded_by_this_host_s_clock_and_the_bitrate() {
        let receiving = || StreamSummary {
            id: 1,
            local_sender: false,
            udp: Some(UdpSummary {
                expected: Some(5),
                lost: Some(0),
                highest_seq: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        };
        let theirs = |packets, copies: usize| Results {
            streams: vec![
                StreamResult {
                    id: 1,
                    packets,
                    start_time: 0.0,
                    end_time: 604_800.0,
                    ..Default::default()
                };
                copies
            ],
            ..Default::default()
        };
        // -b 0: only the 200 M datagrams a second bound, on this host's 1 s.
        let mut r = rep(vec![receiving()], 0.5);
        count_trailing_loss(&mut r, &theirs(120_960_400_000_000, 1), 1.0, &udp_params(0));
        assert_eq!(r.streams[0].udp.unwrap().loss(), (0, 5));
        // -b 1M of 1,000-byte datagrams: 125 a second; in 1 s (+1 s) at most
        // 125 × 2 × 1.25 + 1,000 = 1,312.
        assert_eq!(credible_count(&udp_params(1_000_000), 1.0), Some(1_312));
        let mut r = rep(vec![receiving()], 0.5);
        count_trailing_loss(&mut r, &theirs(1_313, 1), 1.0, &udp_params(1_000_000));
        assert_eq!(r.streams[0].udp.unwrap().loss(), (0, 5));
        let mut r = rep(vec![receiving()], 0.5);
        count_trailing_loss(&mut r, &theirs(1_312, 1), 1.0, &udp_params(1_000_000));
        assert_eq!(r.streams[0].udp.unwrap().loss(), (1_307, 1_312));
        // A stream named twice: refused before anything is counted.
        let mut r = rep(vec![receiving()], 0.5);
        assert_eq!(
            merge_remote(&mut r.streams, &theirs(1_000, 3), 10.0, &Params::default()),
            Err("stream id 1 appears twice in the results".to_string())
        );
        assert_eq!(r.streams[0].udp.unwrap().loss(), (0, 5));
    }

    /// The s51 tryout: a path dark for the last 0.9 s of a 10 s test at 1 s intervals hid the
    /// loss (0/7,236 where the router dropped 801): the last interval had 0.1 s of datagrams,
    /// so no whole interval was empty. The quiet end now runs from the last arrival; 0.2 s
    /// (under the 0.25 s a queue may still hold) still counts nothing.
    #[test]
    fn a_dark_spell_inside_the_last_interval_counts() {
        let receiving = |quiet_end_s| StreamSummary {
            id: 1,
            local_sender: false,
            udp: Some(UdpSummary {
                expected: Some(7_236),
                lost: Some(0),
                highest_seq: Some(7_236),
                quiet_end_s,
                ..Default::default()
            }),
            ..Default::default()
        };
        let theirs = Results {
            streams: vec![StreamResult {
                id: 1,
                packets: 8_037,
                end_time: 10.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        // 800 a second at 1,000 B: 6.4 Mbit/s.
        let params = udp_params(6_400_000);
        // The intervals alone (the last one had bytes): nothing counted, as before.
        let mut r = rep(vec![receiving(None)], 0.0);
        count_trailing_loss(&mut r, &theirs, 10.0, &params);
        assert_eq!(r.streams[0].udp.unwrap().loss(), (0, 7_236));
        let mut r = rep(vec![receiving(Some(0.9))], 0.0);
        count_trailing_loss(&mut r, &theirs, 10.0, &params);
        let u = r.streams[0].udp.unwrap();
        assert_eq!((u.loss(), u.trailing_lost), ((801, 8_037), Some(801)));
        let mut r = rep(vec![receiving(Some(0.2))], 0.0);
        count_trailing_loss(&mut r, &theirs, 10.0, &params);
        assert_eq!(r.streams[0].udp.unwrap().loss(), (0, 7_236));
        // A quiet end longer than the test (a clock step) is cut to the test.
        let mut r = rep(vec![receiving(Some(f64::MAX))], 0.0);
        count_trailing_loss(&mut r, &theirs, 10.0, &params);
        assert_eq!(r.streams[0].udp.unwrap().loss(), (801, 8_037));
    }

    /// The s51 tryout's hostile client: 1,780 datagrams sent at `-b 0`, 999,000,000 claimed,
    /// and 99.9998 % loss stored. Without a bitrate the count is held to 100 Gbit/s of the
    /// test's datagrams: 12.5 M a second of 1,000 B, × (10 s + 1 s) × 1.25 + 1,000.
    #[test]
    fn an_unpaced_sender_s_count_is_held_to_100_gbit_s() {
        assert_eq!(credible_count(&udp_params(0), 10.0), Some(171_876_000));
        let receiving = StreamSummary {
            id: 1,
            local_sender: false,
            udp: Some(UdpSummary {
                expected: Some(1_780),
                lost: Some(0),
                highest_seq: Some(1_780),
                quiet_end_s: Some(5.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let theirs = |packets| Results {
            streams: vec![StreamResult {
                id: 1,
                packets,
                end_time: 10.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut r = rep(vec![receiving.clone()], 0.0);
        count_trailing_loss(&mut r, &theirs(999_000_000), 10.0, &udp_params(0));
        assert_eq!(r.streams[0].udp.unwrap().loss(), (0, 1_780));
        let mut r = rep(vec![receiving], 0.0);
        count_trailing_loss(&mut r, &theirs(3_560), 10.0, &udp_params(0));
        assert_eq!(r.streams[0].udp.unwrap().loss(), (1_780, 3_560));
    }

    /// Issue 38's attacker: a client's results with `packets` −2^63 and `omitted_packets`
    /// 2^63 − 1 (any host reaching port 5201) overflowed here and killed the task (a debug
    /// build; release wrapped). Saturated: nothing sent, nothing lost.
    #[test]
    fn a_peer_s_extreme_counts_saturate_instead_of_overflowing() {
        let udp = |local_sender| StreamSummary {
            id: 1,
            local_sender,
            udp: Some(UdpSummary::default()),
            ..Default::default()
        };
        let hostile = Results {
            streams: vec![StreamResult {
                id: 1,
                packets: i64::MIN,
                omitted_packets: i64::MAX,
                errors: i64::MAX,
                omitted_errors: i64::MIN,
                end_time: f64::INFINITY,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut receiver = [udp(false)];
        merge_remote(&mut receiver, &hostile, 10.0, &Params::default()).unwrap();
        assert_eq!(receiver[0].udp.unwrap().sent_packets, Some(0));
        assert_eq!(receiver[0].sender.seconds, 0.0);
        let mut sender = [udp(true)];
        merge_remote(&mut sender, &hostile, 10.0, &Params::default()).unwrap();
        let u = sender[0].udp.unwrap();
        assert_eq!((u.expected, u.lost), (Some(0), Some(i64::MAX as u64)));
        // An honest peer: 1,000 sent after 10 omitted, 30 lost after 1 in the omit period.
        let honest = Results {
            streams: vec![StreamResult {
                id: 1,
                packets: 1_010,
                omitted_packets: 10,
                errors: 31,
                omitted_errors: 1,
                end_time: 5.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut s = [udp(true)];
        merge_remote(&mut s, &honest, 10.0, &Params::default()).unwrap();
        let u = s[0].udp.unwrap();
        assert_eq!((u.expected, u.lost), (Some(1_000), Some(30)));
    }

    /// The s51 tryout: a hostile client's results claimed 10^12 bytes for a 3 s test, stored
    /// as 2.67 Tbit/s and judged "reached the requested rate". Claims beyond what any port
    /// carries in the time the test has run are refused (the session fails with the reason)
    /// and merge nothing; an honest 940 Mbit/s stream and a stock receiver's 10.02 s pass.
    #[test]
    fn a_peer_s_incredible_bytes_or_seconds_are_refused() {
        let tcp = |local_sender| StreamSummary {
            id: 1,
            local_sender,
            ..Default::default()
        };
        let claim = |bytes, end_time| Results {
            streams: vec![StreamResult {
                id: 1,
                bytes,
                end_time,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut s = [tcp(false)];
        let e = merge_remote(
            &mut s,
            &claim(1_000_000_000_000, 3.0),
            3.1,
            &Params::default(),
        )
        .unwrap_err();
        assert!(e.contains("stream 1 claim 1000000000000 bytes"), "{e}");
        assert_eq!(s[0].sender, SideTotals::default());
        // The bound: 125 Gbit/s over the elapsed time + 1 s (3 s: 62,500,000,000 bytes).
        assert!(merge_remote(&mut s, &claim(62_500_000_000, 0.0), 3.0, &Params::default()).is_ok());
        assert!(
            merge_remote(&mut s, &claim(62_500_000_001, 0.0), 3.0, &Params::default()).is_err()
        );
        // Bytes within the elapsed bound but over the claimed seconds: 10 GB in 0.1 s.
        let e =
            merge_remote(&mut s, &claim(10_000_000_000, 0.1), 3.1, &Params::default()).unwrap_err();
        assert!(e.contains("in 0.1 s (800"), "{e}");
        // Seconds: a 3 s test cannot have measured for 60 s (3.41 + 2 s at most).
        let mut r = [tcp(true)];
        assert!(merge_remote(&mut r, &claim(1_000, 60.0), 3.1, &Params::default()).is_err());
        assert_eq!(r[0].receiver, None);
        // Honest: 940 Mbit/s for 10.02 s on a test that has run 10.3 s.
        let mut h = [tcp(false)];
        merge_remote(
            &mut h,
            &claim(1_177_350_000, 10.02),
            10.3,
            &Params::default(),
        )
        .unwrap();
        assert_eq!(h[0].sender.bytes, 1_177_350_000);
        assert!((h[0].sender.bits_per_second() - 940e6).abs() < 1e6);
        // s52 tryout: 10^12 retransmits were stored. At most one per 40 bytes the bound
        // allows (3 s: 62.5 GB → 1,562,500,000).
        let retr = |n| Results {
            streams: vec![StreamResult {
                id: 1,
                bytes: 1_000_000,
                retransmits: n,
                end_time: 3.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let e = merge_remote(&mut h, &retr(1_000_000_000_000), 3.0, &Params::default());
        assert!(e.unwrap_err().contains("1000000000000 retransmits"));
        assert!(merge_remote(&mut h, &retr(1_562_500_000), 3.0, &Params::default()).is_ok());
        // Paced at 10 Mbit/s (1,448-byte blocks): a claim of 100 × what a 3 s test sends is
        // refused; the bound is 10 Mbit/s × 1.25 over 4 s + 1,000 blocks = 7,698,000 bytes.
        let paced = udp_params(10_000_000);
        let paced = Params {
            len: 1_448,
            ..paced
        };
        let mut u = [tcp(false)];
        assert!(merge_remote(&mut u, &claim(375_000_000, 3.0), 3.0, &paced).is_err());
        assert!(merge_remote(&mut u, &claim(7_698_000, 3.0), 3.0, &paced).is_ok());
        assert!(merge_remote(&mut u, &claim(7_698_001, 3.0), 3.0, &paced).is_err());
    }
}
