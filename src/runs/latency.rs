//! Latency-under-load runs (kind `latency`): ICMP probes to the peer from start to end, an
//! iperf3 client loading the path in the middle (idle → loaded → idle), recorded through the
//! one [`Recorder`] (started through [`RunContext::start`]): the load's intervals (on the run's
//! time axis), the probe samples in batches (the RTT chart reads them live), and at the end the result of
//! [`crate::results::latency::summarize`] as the run's summary.

use crate::engine::iperf3::client::{self, ClientSpec, Event};
use crate::engine::iperf3::wire::Direction;
use crate::engine::latency::{self as probe, EchoSocket, Probe, ProbeSpec, ProberStats};
use crate::engine::net::{self, Family};
use crate::engine::report::Report;
use crate::model::{RunDirection, RunFigures, RunKind, RunProtocol, RunRole, RunStatus};
use crate::results::latency::{summarize, Inputs};
use crate::runs::context::{RunContext, Started};
use crate::runs::recorder::{Ended, Measured, Recorder, Sampling};
use crate::spec::latency::{LatencySpec, Load, DEFAULT_CONGESTION, HOSTS_CONGESTION};
use crate::store::{LatencySampleRow, NewRun};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};

/// A probe without a reply after this long is lost.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The load's goodput, bits/s: received bytes over the receiver's time, summed over every
/// stream (both directions for `--bidir`); the sender's figures where no receiver side came.
pub(crate) fn load_bits_per_second(r: &Report) -> Option<f64> {
    let v: Vec<f64> = r
        .streams
        .iter()
        .map(|s| s.receiver.unwrap_or(s.sender).bits_per_second())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum())
}

/// Goodput (bits/s, as [`load_bits_per_second`]) and stream count of the load's streams in one
/// direction: `board_sends` = the streams this board sends on (up), else those it receives
/// (down); `None` when there are none (e.g. no up streams in a download).
pub(crate) fn direction_bits_per_second(r: &Report, board_sends: bool) -> Option<(f64, usize)> {
    let v: Vec<f64> = r
        .streams
        .iter()
        .filter(|s| s.local_sender == board_sends)
        .map(|s| s.receiver.unwrap_or(s.sender).bits_per_second())
        .collect();
    (!v.is_empty()).then(|| (v.iter().sum(), v.len()))
}

/// Sleep `d` unless `cancel` fires first; true when cancelled.
async fn pause(d: Duration, cancel: &Notify) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = cancel.notified() => true,
    }
}

/// Check `spec`, resolve the peer, open the ICMP socket, record the run and start it;
/// returns the run id and a handle that resolves when the run has ended. Errors (bad
/// input, unknown host, no ICMP socket, the store) leave nothing recorded.
pub(crate) async fn start_latency(
    ctx: &RunContext,
    mut spec: LatencySpec,
    suite_id: Option<i64>,
) -> Result<Started, String> {
    spec.validate()?;
    let params = congestion_params(&mut spec);
    let peer = {
        let (h, p) = (spec.host.clone(), spec.port);
        crate::engine::task::spawn_blocking(move || net::resolve(&h, p, Family::Any))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("unable to resolve host '{}': {e}", spec.host))?
    };
    if let Some(d) = &spec.bind_dev {
        if !crate::board::ports().iter().any(|p| &p.name == d) {
            return Err(format!("the board has no port '{d}'"));
        }
    }
    let sock = EchoSocket::open(peer.ip(), spec.bind_dev.as_deref()).map_err(|e| e.to_string())?;
    let run = NewRun {
        role: RunRole::Client,
        protocol: RunProtocol::Tcp,
        peer_host: spec.host.clone(),
        peer_port: spec.port,
        bind_dev: spec.bind_dev.clone(),
        direction: match spec.load {
            Load::Up => RunDirection::Send,
            Load::Down => RunDirection::Receive,
            Load::Both => RunDirection::Bidir,
        },
        params,
        kind: RunKind::Latency,
        suite_id,
        ..Default::default()
    };
    let cancel = Arc::new(Notify::new());
    ctx.start(
        &run,
        Sampling::Ports(Vec::new()),
        Some(cancel.clone()),
        move |ctx, rec| run_latency(ctx, rec, spec, peer, sock, cancel),
    )
}

/// The load's congestion control set in `spec`: asked for, each host's own ("default"), or a
/// loss-based one that fills the queue whatever the PC's default (issue 38: with the PC's
/// default BBR the queue never filled and the page read "stays flat"). Returns the run's
/// stored params (`congestion_default` when netperfd chose it).
fn congestion_params(spec: &mut LatencySpec) -> serde_json::Value {
    let chosen_by_us = match spec.congestion.as_deref() {
        None if crate::board::congestion_available(DEFAULT_CONGESTION) => {
            spec.congestion = Some(DEFAULT_CONGESTION.into());
            true
        }
        Some(HOSTS_CONGESTION) => {
            spec.congestion = None;
            false
        }
        _ => false,
    };
    crate::results::latency::LatencyParams {
        spec,
        congestion_default: chosen_by_us,
    }
    .to_value()
}

/// The probes of a run: ICMP (always), the UDP echo (when it could start), and the task that
/// stores the ICMP samples in batches and keeps them for the result.
struct Probes {
    prober: probe::Prober,
    echo: Option<crate::engine::echo::EchoProber>,
    collector: tokio::task::JoinHandle<Vec<Probe>>,
}

/// What the load phase left: its report (whole or partial), why it failed, whether the run
/// was stopped, and when the load started and ended on the run's time axis, s.
struct LoadPhase {
    report: Option<Report>,
    error: Option<String>,
    aborted: bool,
    start: f64,
    end: f64,
}

/// A run: idle → loaded → idle under the probes, then its result (see the module doc).
async fn run_latency(
    ctx: RunContext,
    rec: Recorder,
    spec: LatencySpec,
    peer: std::net::SocketAddr,
    sock: EchoSocket,
    cancel: Arc<Notify>,
) -> Ended {
    let t0 = Instant::now();
    let probes = match start_probes(&ctx, &rec, &spec, peer, sock, t0) {
        Ok(p) => p,
        Err(e) => {
            return Ended {
                status: RunStatus::Failed,
                measured: Measured::Figures(RunFigures::default()),
                summary: None,
                error: Some(format!("cannot start the probes: {e}")),
            };
        }
    };
    let tcp_rtt: Arc<Mutex<Vec<(f64, f64)>>> = Arc::new(Mutex::new(Vec::new()));
    let idle = Duration::from_secs(spec.idle_s as u64);
    let mut load = if pause(idle, &cancel).await {
        let at = t0.elapsed().as_secs_f64();
        LoadPhase {
            report: None,
            error: None,
            aborted: true,
            start: at,
            end: at,
        }
    } else {
        load_phase(&ctx, &rec, &spec, t0, &tcp_rtt, &cancel).await
    };
    if !load.aborted && load.error.is_none() {
        load.aborted = pause(idle, &cancel).await;
    }
    let end = t0.elapsed().as_secs_f64();
    let tcp = tcp_rtt.lock().map(|g| g.clone()).unwrap_or_default();
    latency_end(&spec, probes, load, &tcp, end).await
}

/// Start the ICMP prober, the UDP echo prober (a peer without netperfd does not answer and it
/// stops after its answer window) and the collector of the ICMP samples. Errors: the ICMP
/// prober could not start.
fn start_probes(
    ctx: &RunContext,
    rec: &Recorder,
    spec: &LatencySpec,
    peer: std::net::SocketAddr,
    sock: EchoSocket,
    t0: Instant,
) -> std::io::Result<Probes> {
    let id = rec.id();
    let pspec = ProbeSpec {
        target: peer.ip(),
        interval: Duration::from_millis(spec.interval_ms as u64),
        timeout: PROBE_TIMEOUT,
    };
    let (ptx, prx) = mpsc::unbounded_channel::<Probe>();
    let prober = probe::start(&pspec, sock, t0, ptx)?;
    // The UDP echo (one-way delays) on the same interval; a peer without netperfd does not
    // answer and the prober stops after its answer window.
    let echo = match crate::engine::echo::start_prober(
        std::net::SocketAddr::new(peer.ip(), crate::engine::echo::DEFAULT_PORT),
        pspec.interval,
        PROBE_TIMEOUT,
        spec.bind_dev.as_deref(),
        t0,
    ) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(run = id, "no UDP echo probes: {e}");
            None
        }
    };
    let collector = crate::engine::task::spawn(collect(ctx.store().clone(), id, prx));
    Ok(Probes {
        prober,
        echo,
        collector,
    })
}

/// Probes go to the store in batches (the chart polls it) and are kept for the result.
async fn collect(
    store: Arc<crate::store::Store>,
    id: i64,
    mut prx: mpsc::UnboundedReceiver<Probe>,
) -> Vec<Probe> {
    let mut all: Vec<Probe> = Vec::new();
    let mut batch: Vec<LatencySampleRow> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            p = prx.recv() => match p {
                Some(p) => {
                    batch.push(LatencySampleRow { probe: "icmp", t: p.t, rtt_ms: p.rtt_ms });
                    all.push(p);
                }
                None => break,
            },
            _ = tick.tick() => {
                if !batch.is_empty() {
                    if let Err(e) = store.add_latency_samples(id, &batch) {
                        tracing::error!(run = id, "cannot store probe samples: {e}");
                    }
                    batch.clear();
                }
            }
        }
    }
    if !batch.is_empty() {
        if let Err(e) = store.add_latency_samples(id, &batch) {
            tracing::error!(run = id, "cannot store probe samples: {e}");
        }
    }
    all
}

/// The load: an iperf3 client for `loaded_s`, its intervals recorded on the run's time axis
/// and its TCP RTT samples stored and kept in `tcp_rtt`; stopped with the run.
async fn load_phase(
    ctx: &RunContext,
    rec: &Recorder,
    spec: &LatencySpec,
    t0: Instant,
    tcp_rtt: &Arc<Mutex<Vec<(f64, f64)>>>,
    cancel: &Notify,
) -> LoadPhase {
    let mut cs = ClientSpec::new(&spec.host);
    cs.port = spec.port;
    cs.params.parallel = spec.streams;
    cs.params.time = spec.loaded_s;
    cs.params.direction = match spec.load {
        Load::Up => Direction::Send,
        Load::Down => Direction::Receive,
        Load::Both => Direction::Bidir,
    };
    cs.sock.bind_dev = spec.bind_dev.clone();
    cs.params.congestion = spec.congestion.clone();
    let (etx, erx) = mpsc::unbounded_channel();
    let forward = crate::engine::task::spawn(forward_load(
        rec.clone(),
        ctx.store().clone(),
        tcp_rtt.clone(),
        t0,
        erx,
    ));
    let mut load = LoadPhase {
        report: None,
        error: None,
        aborted: false,
        start: t0.elapsed().as_secs_f64(),
        end: 0.0,
    };
    let load_cancel = Arc::new(Notify::new());
    let mut client =
        crate::engine::task::spawn(client::run(cs, Some(etx), Some(load_cancel.clone())));
    let res = tokio::select! {
        r = &mut client => r,
        _ = cancel.notified() => {
            load.aborted = true;
            load_cancel.notify_one();
            client.await
        }
    };
    load.end = t0.elapsed().as_secs_f64();
    if let Ok(Some(s)) = forward.await {
        load.start = s;
    }
    match res {
        Ok(Ok(r)) => load.report = Some(r),
        Ok(Err(e)) => {
            if e.aborted {
                load.aborted = true;
            }
            load.report = e.partial.map(|b| *b);
            load.error = Some(format!(
                "load (iperf3 to {}:{}): {}",
                spec.host, spec.port, e.message
            ));
        }
        Err(e) => load.error = Some(format!("the load task failed: {e}")),
    }
    load
}

/// Record the load's events: intervals shifted from the load's start to the run's axis, the
/// senders' TCP RTTs stored as samples and kept in `tcp_rtt`. Returns when the load started
/// on the run's axis, s (`None` when it never did).
async fn forward_load(
    rec: Recorder,
    store: Arc<crate::store::Store>,
    tcp_rtt: Arc<Mutex<Vec<(f64, f64)>>>,
    t0: Instant,
    mut erx: mpsc::UnboundedReceiver<Event>,
) -> Option<f64> {
    let id = rec.id();
    // Intervals count from the load's start; the run's axis from the run's start.
    let mut off = t0.elapsed().as_secs_f64();
    let mut start = None;
    while let Some(ev) = erx.recv().await {
        match ev {
            Event::Started(r) => {
                off = t0.elapsed().as_secs_f64();
                start = Some(off);
                rec.endpoints(&r.local_host, r.local_port);
            }
            Event::Interval(mut iv) => {
                let mut rows = Vec::new();
                for s in iv.streams.iter_mut() {
                    s.start += off;
                    s.end += off;
                    if let (true, Some(t)) = (s.sender, s.tcp) {
                        if t.rtt > 0 {
                            rows.push(LatencySampleRow {
                                probe: "tcp",
                                t: s.end,
                                rtt_ms: Some(t.rtt as f64 / 1e3),
                            });
                        }
                    }
                }
                if !rows.is_empty() {
                    if let Err(e) = store.add_latency_samples(id, &rows) {
                        tracing::error!(run = id, "cannot store TCP RTT samples: {e}");
                    }
                    if let Ok(mut g) = tcp_rtt.lock() {
                        g.extend(rows.iter().filter_map(|r| Some((r.t, r.rtt_ms?))));
                    }
                }
                rec.interval(iv);
            }
        }
    }
    start
}

/// Stop the probes and make the run's end: figures, the summary of
/// [`crate::results::latency::summarize`] and the status.
async fn latency_end(
    spec: &LatencySpec,
    probes: Probes,
    load: LoadPhase,
    tcp: &[(f64, f64)],
    end: f64,
) -> Ended {
    let Probes {
        prober,
        echo,
        collector,
    } = probes;
    let stats: ProberStats = crate::engine::task::spawn_blocking(move || prober.stop())
        .await
        .unwrap_or_default();
    let echo_stats = match echo {
        Some(p) => crate::engine::task::spawn_blocking(move || p.stop())
            .await
            .ok(),
        None => None,
    };
    let probes = collector.await.unwrap_or_default();
    let report = load.report;
    let bps = report.as_ref().and_then(load_bits_per_second);
    let mut result = summarize(&Inputs {
        probes: &probes,
        tcp_rtt: tcp,
        load_start: load.start,
        load_end: load.end,
        end,
        direction: spec.load.direction(),
        bits_per_second: bps,
        up: report
            .as_ref()
            .and_then(|r| direction_bits_per_second(r, true)),
        down: report
            .as_ref()
            .and_then(|r| direction_bits_per_second(r, false)),
        stats: &stats,
        interval_ms: spec.interval_ms as f64,
        echo: echo_stats.as_ref(),
    });
    let mut figures = report
        .as_ref()
        .map(crate::results::figures::of_report)
        .unwrap_or_default();
    if spec.load == Load::Both {
        figures.receiver_bps = bps;
    }
    let status = if load.aborted {
        RunStatus::Aborted
    } else if load.error.is_some() {
        RunStatus::Failed
    } else {
        RunStatus::Completed
    };
    // The load's congestion control as its sockets used it (the run page shows it).
    result.congestion = report
        .as_ref()
        .map(|r| crate::results::latency::Congestion {
            sender: r.sender_congestion.clone(),
            receiver: r.receiver_congestion.clone(),
        });
    let summary = serde_json::to_value(&result).unwrap_or_default();
    Ended {
        status,
        measured: Measured::Figures(figures),
        summary: Some(summary),
        error: load.error,
    }
}
