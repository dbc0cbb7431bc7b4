//! The data phase of one test, shared by client and server: starts the stream threads, takes
//! interval samples (bytes, bits/s, TCP_INFO), handles the `-O` omit reset, and produces each
//! stream's local totals at the end. Times are seconds since the test start (or omit end).
//! Not for: the control protocol (client.rs / server.rs).

use crate::engine::iperf3::wire::Params;
use crate::engine::report::{IntervalRecord, SideTotals, StreamInterval, StreamSummary, TcpSample};
use crate::engine::stats::{tcp_congestion, tcp_info};
use crate::engine::tcp::{payload, recv_loop, send_loop, Shared};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// One data connection and what has been measured on it.
pub struct DataStream {
    /// iperf3 stream id (1, 3, 4, …).
    pub id: u32,
    /// True when this side writes on the stream.
    pub sender: bool,
    sock: TcpStream,
    /// Local socket number, as shown in iperf3's `[  5]`.
    pub socket_no: i32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    counter: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    prev_bytes: u64,
    omit_bytes: u64,
    retrans_prev: u64,
    retrans_omit: u64,
    max_cwnd: u64,
    max_wnd: u64,
    rtt_min: u32,
    rtt_max: u32,
    rtt_sum: u64,
    rtt_n: u64,
    final_bytes: Option<u64>,
    final_retrans: Option<u64>,
}

impl DataStream {
    /// Wrap a connected socket (blocking mode is set here).
    pub fn new(id: u32, sender: bool, sock: TcpStream) -> std::io::Result<DataStream> {
        sock.set_nonblocking(false)?;
        let local = sock.local_addr()?;
        let remote = sock.peer_addr()?;
        let socket_no = sock.as_raw_fd();
        Ok(DataStream {
            id,
            sender,
            sock,
            socket_no,
            local,
            remote,
            counter: Arc::new(AtomicU64::new(0)),
            thread: None,
            prev_bytes: 0,
            omit_bytes: 0,
            retrans_prev: 0,
            retrans_omit: 0,
            max_cwnd: 0,
            max_wnd: 0,
            rtt_min: u32::MAX,
            rtt_max: 0,
            rtt_sum: 0,
            rtt_n: 0,
            final_bytes: None,
            final_retrans: None,
        })
    }

    /// Congestion control algorithm in use on the socket.
    pub fn congestion(&self) -> Option<String> {
        tcp_congestion(self.sock.as_raw_fd())
    }

    /// Actual SO_SNDBUF and SO_RCVBUF, bytes.
    pub fn buffers(&self) -> (u32, u32) {
        crate::engine::net::buffer_sizes(&self.sock)
    }

    /// Bytes moved so far (since start; the omit part included).
    pub fn bytes_total(&self) -> u64 {
        self.counter.load(Relaxed)
    }
}

/// The running data phase of a test.
pub struct DataPhase {
    pub params: Params,
    pub streams: Vec<DataStream>,
    pub shared: Arc<Shared>,
    /// When TEST_START happened.
    pub started: Instant,
    /// Start of the measured period (`started`, or the end of the omit period).
    t0: Instant,
    last: Instant,
    interval: f64,
    omitting: bool,
    pub intervals: Vec<IntervalRecord>,
    end: Option<Instant>,
}

impl DataPhase {
    /// Prepare a data phase; nothing runs until [`DataPhase::start`]. `interval` in seconds.
    pub fn new(params: Params, streams: Vec<DataStream>, interval: f64) -> DataPhase {
        let shared = Arc::new(Shared {
            num: params.num,
            blockcount: params.blockcount,
            len: params.len as u64,
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
        }
    }

    /// Start every stream's thread. `check_recv_limit`: wake on a received `-n`/`-k` target
    /// (the client in `-R`/`--bidir`).
    pub fn start(&mut self, check_recv_limit: bool) -> std::io::Result<()> {
        let now = Instant::now();
        self.started = now;
        self.t0 = now;
        self.last = now;
        let rate = self.params.bandwidth;
        let len = self.params.len as usize;
        let block = payload(len, self.params.repeating_payload);
        for s in &mut self.streams {
            let sock = s.sock.try_clone()?;
            let ctr = s.counter.clone();
            let sh = self.shared.clone();
            let name = format!("stream-{}", s.id);
            let handle = if s.sender {
                let buf = block.clone();
                std::thread::Builder::new()
                    .name(name)
                    .spawn(move || send_loop(sock, buf, ctr, sh, rate))?
            } else {
                std::thread::Builder::new()
                    .name(name)
                    .spawn(move || recv_loop(sock, len, ctr, sh, check_recv_limit))?
            };
            s.thread = Some(handle);
        }
        Ok(())
    }

    /// True while inside the `-O` period.
    pub fn omitting(&self) -> bool {
        self.omitting
    }

    /// Seconds since TEST_START.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Total bytes moved on all streams (progress for the watchdog).
    pub fn progress(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes_total()).sum()
    }

    /// Take an interval sample now. Returns `None` for a zero-length interval.
    pub fn sample(&mut self) -> Option<IntervalRecord> {
        let now = Instant::now();
        let start = self.last.duration_since(self.t0).as_secs_f64();
        let end = now.duration_since(self.t0).as_secs_f64();
        let secs = end - start;
        if secs <= 0.0 {
            return None;
        }
        self.last = now;
        let omitted = self.omitting;
        let mut out = Vec::with_capacity(self.streams.len());
        for s in &mut self.streams {
            let cur = s.counter.load(Relaxed);
            let bytes = cur.saturating_sub(s.prev_bytes);
            s.prev_bytes = cur;
            let tcp = if s.sender {
                tcp_info(s.sock.as_raw_fd()).ok().map(|ti| {
                    let retr = ti.total_retrans.saturating_sub(s.retrans_prev);
                    s.retrans_prev = ti.total_retrans;
                    if !omitted {
                        s.max_cwnd = s.max_cwnd.max(ti.snd_cwnd);
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
                    }
                })
            } else {
                None
            };
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
            });
        }
        let rec = IntervalRecord { streams: out };
        self.intervals.push(rec.clone());
        Some(rec)
    }

    /// The omit period is over: sample what is pending as omitted, then restart the clock and
    /// the baselines (bytes, retransmits, `-n`/`-k` send totals) from now.
    pub fn end_omit(&mut self) -> Option<IntervalRecord> {
        let rec = self.sample();
        self.omitting = false;
        let now = Instant::now();
        self.t0 = now;
        self.last = now;
        for s in &mut self.streams {
            s.omit_bytes = s.counter.load(Relaxed);
            s.retrans_omit = s.retrans_prev;
        }
        self.shared.sent_bytes.store(0, Relaxed);
        self.shared.sent_blocks.store(0, Relaxed);
        rec
    }

    /// Stop the sending threads and wait for them (≤ the 200 ms poll period), so that the
    /// sent totals read next are exactly what was written.
    pub async fn stop_senders(&mut self) {
        self.shared.stop_send.store(true, Relaxed);
        let hs: Vec<JoinHandle<()>> = self
            .streams
            .iter_mut()
            .filter(|s| s.sender)
            .filter_map(|s| s.thread.take())
            .collect();
        let _ = tokio::task::spawn_blocking(move || {
            for h in hs {
                let _ = h.join();
            }
        })
        .await;
    }

    /// Stop the senders, then freeze the totals (bytes after this are not counted) and take
    /// the final partial interval if it is worth showing (≥ 10 % of an interval, or the only
    /// one).
    pub async fn finish(&mut self) -> Option<IntervalRecord> {
        self.stop_senders().await;
        let since_last = self.last.elapsed().as_secs_f64();
        let rec = if since_last >= 0.1 * self.interval || self.intervals.is_empty() {
            self.sample()
        } else {
            None
        };
        self.end = Some(Instant::now());
        for s in &mut self.streams {
            s.final_bytes = Some(s.counter.load(Relaxed));
            if s.sender {
                if let Ok(ti) = tcp_info(s.sock.as_raw_fd()) {
                    s.final_retrans = Some(ti.total_retrans);
                }
            }
        }
        rec
    }

    /// Seconds of the measured period (omit excluded), up to `finish` (or now).
    pub fn measured_seconds(&self) -> f64 {
        self.end
            .unwrap_or_else(Instant::now)
            .duration_since(self.t0)
            .as_secs_f64()
    }

    /// Stop all threads and close the sockets for reading and writing. Blocks up to ~200 ms
    /// (the loops' poll period); call from `spawn_blocking` or a non-async context.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for s in &self.streams {
            let _ = s.sock.shutdown(std::net::Shutdown::Both);
        }
        for s in &mut self.streams {
            if let Some(h) = s.thread.take() {
                let _ = h.join();
            }
        }
    }

    /// Signal the threads to stop without waiting for them.
    pub fn request_stop(&self) {
        self.shared.stop.store(true, Relaxed);
    }

    /// This side's summary of each stream: local totals filled in, the peer's side left
    /// empty (`receiver: None` for local senders, zero sender totals for local receivers).
    pub fn local_summaries(&self) -> Vec<StreamSummary> {
        let secs = self.measured_seconds();
        self.streams
            .iter()
            .map(|s| {
                let total = s.final_bytes.unwrap_or_else(|| s.counter.load(Relaxed));
                let mine = SideTotals {
                    bytes: total.saturating_sub(s.omit_bytes),
                    seconds: secs,
                };
                let retrans = if s.sender {
                    s.final_retrans
                        .map(|r| r.saturating_sub(s.retrans_omit) as i64)
                        .unwrap_or(-1)
                } else {
                    -1
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
                    max_snd_cwnd: s.max_cwnd,
                    max_snd_wnd: s.max_wnd,
                    max_rtt: s.rtt_max,
                    min_rtt: if s.rtt_n > 0 { s.rtt_min } else { 0 },
                    mean_rtt: s.rtt_sum.checked_div(s.rtt_n).unwrap_or(0) as u32,
                }
            })
            .collect()
    }

    /// True when any sending stream reports TCP_INFO (Linux: always for TCP).
    pub fn has_retransmits(&self) -> bool {
        self.streams.iter().any(|s| s.sender)
    }
}

impl Drop for DataPhase {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for s in &self.streams {
            let _ = s.sock.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Merge the peer's results into this side's summaries (matched by stream id): for a local
/// sender the peer's received bytes and duration; for a local receiver the peer's sent
/// bytes, duration and retransmits. Errors on an id this side does not know (IESTREAMID).
pub fn merge_remote(
    summaries: &mut [StreamSummary],
    remote: &crate::engine::iperf3::wire::Results,
) -> Result<(), String> {
    for r in &remote.streams {
        let Some(s) = summaries.iter_mut().find(|s| s.id == r.id) else {
            return Err(format!("stream has an invalid id ({})", r.id));
        };
        let secs = r.end_time - r.start_time;
        let t = SideTotals {
            bytes: r.bytes,
            seconds: if secs > 0.0 { secs } else { 0.0 },
        };
        if s.local_sender {
            s.receiver = Some(t);
        } else {
            s.sender = t;
            s.retransmits = r.retransmits;
        }
    }
    Ok(())
}
