//! Runs in progress: starts client tests for the web UI/API, records what the built-in iperf3
//! server serves, writes every interval to the store as it arrives and fans it out to
//! server-sent-event subscribers. Not for: rendering (web) or measuring (engine).

use super::recorder::{Outcome, Recorder, Sampling};
use crate::board::apply::Controller;
use crate::board::counters::{BoardReading, Series};
use crate::board::sampler::{self as monitor, Sampler, Snapshot};
use crate::engine::iperf3::client::{self, ClientSpec, Event};
use crate::engine::iperf3::server::ServerEvent;
use crate::engine::report::{IntervalRecord, Report, Role};
use crate::model::{RunFigures, RunRole, RunStatus};
use crate::spec::test::TestRequest;
use crate::store::{CpuSampleRow, NewRun, PortSampleRow, Store, SysSampleRow};
use serde::Serialize;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{broadcast, mpsc, Notify};

/// What live subscribers of a run receive.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum LiveEvent {
    /// One interval (`seq` counts from 0).
    Interval { seq: i64, record: IntervalRecord },
    /// One monitor sample (every second while the run is active): CPU per core (the
    /// all-cores line has `cpu` = -1), the run's ports' counter deltas, conntrack entries.
    Monitor {
        /// Seconds since the run started.
        t: f64,
        cpus: Vec<CpuSampleRow>,
        ports: Vec<PortSampleRow>,
        conntrack: Option<i64>,
    },
    /// The run ended.
    Done {
        status: RunStatus,
        error: Option<String>,
    },
}

struct LiveRun {
    tx: broadcast::Sender<LiveEvent>,
    cancel: Option<Arc<Notify>>,
}

/// A run the monitor samples: its ports (empty = not known yet, resolved from the run's
/// bound device or local address) and the previous reading.
struct Watch {
    started: Instant,
    ports: Vec<String>,
    prev: Arc<Snapshot>,
    tx: broadcast::Sender<LiveEvent>,
    /// The board's counters when the run started (see [`Hub::board_end`]).
    board: Arc<BoardReading>,
    /// The fast counters second by second.
    series: Series,
}

/// The flow of a run without an iperf3 report from its stored summary's `streams` (an iperf 2
/// run's: `sender`, `bytes`, `sent_datagrams` each): the datagrams this host's sending
/// streams sent and their mean payload (bytes over datagrams). `None` when no stream of this
/// host sent datagrams.
pub(crate) fn flow_of_streams(
    summary: &serde_json::Value,
    ipv6: bool,
) -> Option<crate::results::ledger::Flow> {
    let (mut bytes, mut sent) = (0u64, 0u64);
    for s in summary["streams"].as_array()? {
        if s["sender"] != true {
            continue;
        }
        let n = s["sent_datagrams"].as_u64()?;
        sent = sent.checked_add(n)?;
        bytes = bytes.checked_add(s["bytes"].as_u64()?)?;
    }
    let payload = bytes.checked_div(sent).filter(|p| *p > 0)?;
    Some(crate::results::ledger::Flow::udp(payload, ipv6, Some(sent)))
}

/// The registry of active runs.
#[derive(Clone)]
pub struct Hub {
    store: Arc<Store>,
    runs: Arc<Mutex<HashMap<i64, LiveRun>>>,
    watches: Arc<Mutex<HashMap<i64, Watch>>>,
    monitor_on: Arc<AtomicBool>,
    /// The board's 1 Hz sampler whose readings become each watched run's samples: the board
    /// controller's when the hub has one, else the hub's own.
    sampler: Arc<Sampler>,
    /// The runtime runs execute on: the one the hub was made in (the daemon's main runtime),
    /// never the web server's workers, so a slow store write inside a run cannot stall pages
    /// or live streams. `None` outside a runtime (then the caller's runtime is used).
    rt: Option<tokio::runtime::Handle>,
    /// The board controller (the daemon's): its port sampler and last read configuration go
    /// into each run's network snapshot, and forwarding runs change the board through it.
    /// `None` in one-shot CLI commands that do not touch the board.
    board: Option<Arc<Controller>>,
    /// Runs per peer a minute of the anonymous services (payload, sink, source): this hub's
    /// budget, beyond which one peer's connections are folded into one run.
    anon: Arc<super::anon::AnonRuns>,
    /// What the services started by [`super::traffic::start`] listen on (all off before).
    services: Arc<Mutex<super::traffic::Listening>>,
    /// Runs that ended but whose end could not be stored yet (e.g. the disk is full): their
    /// status and error, kept until a retry stores them (see [`Hub::store_end`]).
    unsaved: Arc<Mutex<HashMap<i64, UnsavedEnd>>>,
}

/// How often, and how many times, a run's end that could not be stored is tried again:
/// every 10 s for an hour.
const END_RETRY: std::time::Duration = std::time::Duration::from_secs(10);
const END_RETRIES: u32 = 360;

/// How a run ended whose end is not stored yet: status and error.
type UnsavedEnd = (RunStatus, Option<String>);

/// The write that stores a run's end (tried again while it fails).
type EndWrite = Box<dyn Fn(&Store) -> std::result::Result<(), crate::store::StoreError> + Send>;

/// Shortest time a monitor sample covers, s (see [`Hub::monitor_tick`]): 0.5 s.
const MIN_SAMPLE_SECS: f64 = 0.5;

fn relock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Hub {
    /// A hub over a store.
    pub fn new(store: Arc<Store>) -> Hub {
        Hub {
            store,
            runs: Arc::new(Mutex::new(HashMap::new())),
            watches: Arc::new(Mutex::new(HashMap::new())),
            monitor_on: Arc::new(AtomicBool::new(false)),
            sampler: Sampler::new(),
            rt: tokio::runtime::Handle::try_current().ok(),
            board: None,
            anon: Arc::default(),
            services: Arc::default(),
            unsaved: Arc::default(),
        }
    }

    /// A run that ended while its end could not be stored: its status and error.
    pub fn unsaved_end(&self, id: i64) -> Option<(RunStatus, Option<String>)> {
        relock(&self.unsaved).get(&id).cloned()
    }

    /// Store a run's end with `write`; when that fails (e.g. the disk is full) mark the run
    /// ended with the least write there is ([`Store::mark_ended`]) so it never stays
    /// "running", remember its end in memory, and retry `write` every [`END_RETRY`] on a
    /// thread of its own until it succeeds (or [`END_RETRIES`] times).
    fn store_end(&self, id: i64, status: RunStatus, error: Option<&str>, write: EndWrite) {
        let Err(e) = write(&self.store) else { return };
        tracing::error!(
            run = id,
            "cannot store the end of the run: {e}; retrying every {} s",
            END_RETRY.as_secs()
        );
        let why = format!(
            "{}the end of the run could not be stored at first ({e})",
            error.map(|x| format!("{x}; ")).unwrap_or_default()
        );
        let marked = self.store.mark_ended(id, status, Some(&why));
        relock(&self.unsaved).insert(id, (status, Some(why)));
        if let Err(e2) = &marked {
            tracing::error!(run = id, "cannot mark the run ended either: {e2}");
        }
        let (store, unsaved) = (self.store.clone(), self.unsaved.clone());
        let spawned = std::thread::Builder::new()
            .name("end-retry".into())
            .spawn(move || {
                for _ in 0..END_RETRIES {
                    std::thread::sleep(END_RETRY);
                    // The full end first; else at least the status.
                    let ok = write(&store).is_ok();
                    if ok || store.mark_ended(id, status, None).is_ok() {
                        if ok {
                            tracing::info!(run = id, "the end of the run is stored now");
                        }
                        relock(&unsaved).remove(&id);
                        if ok {
                            return;
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(run = id, "cannot start the retry of the run's end: {e}");
        }
    }

    /// The per-peer run budget of the anonymous services (see [`super::anon`]).
    pub fn anon(&self) -> &super::anon::AnonRuns {
        &self.anon
    }

    /// What the payload server, TCP sink and TCP source of this hub listen on (all `None`
    /// before [`super::traffic::start`], or when turned off).
    pub fn listening(&self) -> super::traffic::Listening {
        relock(&self.services).clone()
    }

    pub(super) fn set_listening(&self, l: super::traffic::Listening) {
        *relock(&self.services) = l;
    }

    /// A hub over `store` that records runs with `board`'s view of the network (see the
    /// `board` field).
    pub fn with_board(store: Arc<Store>, board: Arc<Controller>) -> Hub {
        Hub {
            sampler: board.sampler().clone(),
            board: Some(board),
            ..Hub::new(store)
        }
    }

    /// The board controller, when the hub has one.
    pub fn board(&self) -> Option<&Arc<Controller>> {
        self.board.as_ref()
    }

    /// Run `fut` on the hub's runtime (see the `rt` field): every task that measures or
    /// records a run is started here, whichever thread asked for the run.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.rt {
            Some(rt) => crate::engine::task::spawn_on(rt, fut),
            None => crate::engine::task::spawn(fut),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, LiveRun>> {
        relock(&self.runs)
    }

    /// The store behind this hub.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Subscribe to a run's live events; `None` when it is not running here.
    pub fn subscribe(&self, id: i64) -> Option<broadcast::Receiver<LiveEvent>> {
        self.lock().get(&id).map(|r| r.tx.subscribe())
    }

    /// Whether a run is active in this process.
    pub fn is_live(&self, id: i64) -> bool {
        self.lock().contains_key(&id)
    }

    /// Ask a running client test to stop (CLIENT_TERMINATE); false if it is not one.
    pub fn stop(&self, id: i64) -> bool {
        match self.lock().get(&id).and_then(|r| r.cancel.clone()) {
            Some(c) => {
                c.notify_one();
                true
            }
            // Ended already; only its end is not stored yet (disk full): nothing to stop.
            None => self.unsaved_end(id).is_some(),
        }
    }

    /// Like [`Hub::track`] but without monitor samples (legs of a multi-port run: their
    /// parent run is sampled once for all of them).
    pub(super) fn track_unmonitored(
        &self,
        id: i64,
        cancel: Option<Arc<Notify>>,
    ) -> broadcast::Sender<LiveEvent> {
        let (tx, _) = broadcast::channel(1024);
        self.lock().insert(
            id,
            LiveRun {
                tx: tx.clone(),
                cancel,
            },
        );
        tx
    }

    fn watch(&self, id: i64, ports: Vec<String>, tx: broadcast::Sender<LiveEvent>) {
        relock(&self.watches).insert(
            id,
            Watch {
                started: Instant::now(),
                ports,
                prev: Arc::new(Snapshot::take()),
                tx,
                board: Arc::new(BoardReading::take()),
                series: Series::default(),
            },
        );
        if self.monitor_on.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(rt) = self
            .rt
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok())
        else {
            self.monitor_on.store(false, Ordering::SeqCst);
            return;
        };
        // The samples come from the board's one 1 Hz loop, not from a loop of the hub's own.
        self.sampler.start(&rt);
        let mut readings = self.sampler.subscribe();
        readings.borrow_and_update();
        let hub = self.clone();
        crate::engine::task::spawn_on(&rt, async move {
            loop {
                if readings.changed().await.is_err() {
                    hub.monitor_on.store(false, Ordering::SeqCst);
                    break;
                }
                let Some(now) = readings.borrow_and_update().clone() else {
                    continue;
                };
                let h = hub.clone();
                match crate::engine::task::spawn_blocking(move || h.monitor_tick(&now)).await {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        tracing::error!("monitor sample failed: {e}");
                        hub.monitor_on.store(false, Ordering::SeqCst);
                        break;
                    }
                }
            }
        });
    }

    /// Ports of a run whose ports were not given: its bound device, else the port holding its
    /// local address (known once the control connection is up).
    fn resolve_ports(&self, id: i64) -> Vec<String> {
        let Ok(Some(r)) = self.store.get_run(id) else {
            return Vec::new();
        };
        if let Some(d) = r.bind_dev.filter(|d| !d.is_empty()) {
            return vec![d];
        }
        r.local_host
            .parse::<IpAddr>()
            .ok()
            .and_then(monitor::port_of_address)
            .into_iter()
            .collect()
    }

    /// Store a sample of reading `now` for every watched run; false (and the monitor task
    /// ends) when no run is watched. A run watched for less than [`MIN_SAMPLE_SECS`] gets its
    /// first sample at the next reading instead (the sampler's second does not start with the
    /// run).
    fn monitor_tick(&self, now: &Arc<Snapshot>) -> bool {
        let unresolved: Vec<i64> = relock(&self.watches)
            .iter()
            .filter(|(_, w)| w.ports.is_empty())
            .map(|(id, _)| *id)
            .collect();
        let resolved: Vec<(i64, Vec<String>)> = unresolved
            .into_iter()
            .map(|id| (id, self.resolve_ports(id)))
            .collect();
        let conntrack = monitor::conntrack_count();
        let mut out = Vec::new();
        {
            let mut ws = relock(&self.watches);
            if ws.is_empty() {
                self.monitor_on.store(false, Ordering::SeqCst);
                return false;
            }
            for (id, ports) in resolved {
                if let Some(w) = ws.get_mut(&id) {
                    if w.ports.is_empty() {
                        w.ports = ports;
                    }
                }
            }
            for (id, w) in ws.iter_mut() {
                if now.at.saturating_duration_since(w.prev.at).as_secs_f64() < MIN_SAMPLE_SECS {
                    continue;
                }
                let t = (now.at.saturating_duration_since(w.started).as_secs_f64() * 1000.0)
                    .round()
                    / 1000.0;
                let cpus = now.cpu_since(&w.prev, t);
                let ports = now.ports_since(&w.prev, t, &w.ports);
                w.series.push(t, &w.prev.fast, &now.fast, &w.ports);
                w.prev = now.clone();
                out.push((*id, t, cpus, ports, w.tx.clone()));
            }
        }
        for (id, t, cpus, ports, tx) in out {
            let sys = SysSampleRow { t, conntrack };
            if let Err(e) = self.store.add_samples(id, &cpus, &ports, Some(&sys)) {
                tracing::error!(run = id, "cannot store a monitor sample: {e}");
            }
            let _ = tx.send(LiveEvent::Monitor {
                t,
                cpus,
                ports,
                conntrack,
            });
        }
        true
    }

    /// Stop watching run `id`, storing what happened since the last sample (so the counters
    /// cover the whole run, not only its whole seconds).
    fn final_sample(&self, id: i64) {
        let Some(w) = relock(&self.watches).remove(&id) else {
            return;
        };
        let now = Snapshot::take();
        let secs = now.at.saturating_duration_since(w.prev.at).as_secs_f64();
        if secs <= 0.0 {
            return;
        }
        let ports = if w.ports.is_empty() {
            self.resolve_ports(id)
        } else {
            w.ports
        };
        let t =
            (now.at.saturating_duration_since(w.started).as_secs_f64() * 1000.0).round() / 1000.0;
        // Port counters always (every byte of the run is counted); CPU shares only over a
        // window long enough to mean something (USER_HZ ticks are 10 ms).
        let cpus = if secs >= 0.2 {
            now.cpu_since(&w.prev, t)
        } else {
            Vec::new()
        };
        let ports = now.ports_since(&w.prev, t, &ports);
        let sys = SysSampleRow {
            t,
            conntrack: monitor::conntrack_count(),
        };
        if let Err(e) = self.store.add_samples(id, &cpus, &ports, Some(&sys)) {
            tracing::error!(run = id, "cannot store the last monitor sample: {e}");
        }
    }

    /// Read the board's counters at the end of watched run `id` and store what moved during
    /// it, with the run's loss ledger when it is a UDP or forwarding run whose lost datagrams
    /// are known (`lost`). Called before the run's end is stored, so a run seen ended has
    /// its ledger. A run not watched (a leg of a multi-port run) has none.
    /// `report`: the run's iperf3 report, whose `peer_drops` are the peer's own drop counters
    /// when it is netperfd (see [`crate::results::ledger::with_peer`]); in a forwarding run
    /// its `local_drops` are the peer agent's (the other PC of the path).
    /// `figures`: the run's lost datagrams (for the ledger) and its own bytes, set against
    /// the ports' traffic to tell whether other traffic ran at the same time (`other_bytes`
    /// in the board JSON; the lost datagrams count as the run's own, at their mean size).
    /// `summary`: a run without a report (iperf 2) gives its streams' own sent datagrams
    /// there (see [`flow_of_streams`]).
    fn board_end(
        &self,
        id: i64,
        figures: &RunFigures,
        report: Option<&Report>,
        summary: Option<&serde_json::Value>,
    ) {
        let lost = figures.lost_packets;
        let Some((start, started, ports, series)) = relock(&self.watches).get(&id).map(|w| {
            (
                w.board.clone(),
                w.started,
                w.ports.clone(),
                w.series.clone(),
            )
        }) else {
            return;
        };
        let end = BoardReading::take();
        let mut delta = end.since(&start, started.elapsed().as_secs_f64());
        delta.series = (!series.t.is_empty()).then_some(series);
        let Ok(Some(run)) = self.store.get_run(id) else {
            return;
        };
        let ports = if ports.is_empty() {
            self.resolve_ports(id)
        } else {
            ports
        };
        let forwarding = run.kind.forwards();
        let udp = run.protocol.is_udp();
        let ledger = lost
            .filter(|_| udp || forwarding)
            .map(|n| {
                let path = crate::results::ledger::Path::of(&run.direction, forwarding);
                // The run's datagrams, to turn a qdisc's skbs into datagrams: the board's own
                // sender count (not the agent's in a forwarding run).
                let flow = report
                    .map(|r| {
                        let f = crate::engine::iperf3::server::TestFlow::of(r);
                        let sent = f.sent.filter(|_| !forwarding);
                        crate::results::ledger::Flow::udp(f.payload, f.ipv6, sent)
                            .with_received(f.received)
                            .with_dropped_locally(f.dropped_locally.filter(|_| !forwarding))
                    })
                    .or_else(|| {
                        let ipv6 = run.local_host.contains(':') || run.peer_host.contains(':');
                        summary.and_then(|s| flow_of_streams(s, ipv6))
                    })
                    .unwrap_or_default();
                let mut l =
                    crate::results::ledger::ledger(n.max(0) as u64, path, &ports, &delta, &flow);
                if let Some(p) = report.and_then(|r| r.peer_drops.as_ref()) {
                    l = crate::results::ledger::with_peer(l, p);
                }
                if let Some(p) = report
                    .filter(|_| forwarding)
                    .and_then(|r| r.local_drops.as_ref())
                {
                    l = crate::results::ledger::with_peer(l, p);
                }
                l
            })
            .and_then(|l| serde_json::to_value(l).ok());
        let mut board = serde_json::to_value(&delta).unwrap_or_default();
        if let Some(o) = board.as_object_mut() {
            o.insert("run_ports".into(), serde_json::json!(ports));
            // The shapers on the run's ports (rates), for the verdict (`results::shaper`).
            let shapers = crate::board::shaper::shapers_of(crate::board::shaper::for_ports(&ports));
            if !shapers.is_empty() {
                o.insert("shapers".into(), serde_json::json!(shapers));
            }
            // A forwarded byte crosses two ports; a byte the board sends or receives one. A
            // run with legs both ways (at once or, iperf 2's -r, one after the other) without
            // its reverse leg's bytes counts its main leg twice.
            let both_ways = matches!(run.direction.as_str(), "bidir" | "tradeoff");
            let crossings = if forwarding || (both_ways && figures.reverse_bytes.is_none()) {
                2
            } else {
                1
            };
            // A UDP run's datagrams, one way: their headers are known (see `RunFrames`).
            let ipv6 = run.local_host.contains(':') || run.peer_host.contains(':');
            let path = crate::results::ledger::Path::of(&run.direction, forwarding);
            let frames = figures
                .total_packets
                .and_then(|n| u64::try_from(n).ok())
                .filter(|_| udp && !both_ways && path != crate::results::ledger::Path::Both)
                .map(|datagrams| crate::results::ledger::RunFrames {
                    datagrams,
                    headers: crate::results::ledger::Flow::udp(0, ipv6, None).headers,
                    path,
                    ports: &ports,
                    // The board's own sender's skbs (a run the board sent; a forwarding
                    // run's report is PC1's).
                    sender_skbs: report.filter(|_| !forwarding).and_then(|r| {
                        r.streams
                            .iter()
                            .filter(|s| s.local_sender)
                            .filter_map(|s| s.udp.and_then(|u| u.sender_skbs))
                            .reduce(u64::saturating_add)
                    }),
                });
            let extra = own_bytes(figures).and_then(|own| {
                crate::results::ledger::other_traffic(&delta, own, crossings, frames.as_ref())
                    .map(|e| (e, own))
            });
            if let Some((extra, own)) = extra {
                o.insert("other_bytes".into(), extra.into());
                o.insert("run_bytes".into(), own.into());
            }
        }
        if let Err(e) = self.store.set_run_board(id, &board, ledger.as_ref()) {
            tracing::error!(run = id, "cannot store the board's counters: {e}");
        }
    }

    /// Make run `id` (already created in the store) live: subscribers can follow it, `stop`
    /// notifies `cancel`, and the monitor samples CPU per core and `ports` (interface names;
    /// empty = the ports that carry the run's addresses) every second until the run ends.
    /// Returns the channel that intervals go out on (see [`Hub::interval`]).
    pub(super) fn track(
        &self,
        id: i64,
        cancel: Option<Arc<Notify>>,
        ports: Vec<String>,
    ) -> broadcast::Sender<LiveEvent> {
        let tx = self.track_unmonitored(id, cancel);
        self.watch(id, ports, tx.clone());
        tx
    }

    /// End a tracked iperf3 run with its report (if any): stored, subscribers told.
    pub(super) fn done(
        &self,
        id: i64,
        status: RunStatus,
        report: Option<&Report>,
        error: Option<&str>,
    ) {
        let figures = report
            .map(crate::results::figures::of_report)
            .unwrap_or_default();
        self.board_end(id, &figures, report, None);
        let (rep, err) = (report.cloned(), error.map(String::from));
        self.store_end(
            id,
            status,
            error,
            Box::new(move |s: &Store| {
                s.finish_run(id, status, rep.as_ref(), &figures, err.as_deref())
            }),
        );
        self.untrack(id, status, error);
    }

    /// End a tracked run that has no iperf3 report (HTTP, raw TCP, forwarding, monitor…) with
    /// its figures and kind-specific summary.
    pub(super) fn done_with(
        &self,
        id: i64,
        status: RunStatus,
        figures: &RunFigures,
        summary: Option<&serde_json::Value>,
        error: Option<&str>,
    ) {
        self.board_end(id, figures, None, summary);
        let (fig, sum, err) = (figures.clone(), summary.cloned(), error.map(String::from));
        self.store_end(
            id,
            status,
            error,
            Box::new(move |s: &Store| {
                s.finish_run_with(id, status, &fig, sum.as_ref(), err.as_deref())
            }),
        );
        self.untrack(id, status, error);
    }

    fn untrack(&self, id: i64, status: RunStatus, error: Option<&str>) {
        self.final_sample(id);
        if let Some(r) = self.lock().remove(&id) {
            let _ = r.tx.send(LiveEvent::Done {
                status,
                error: error.map(String::from),
            });
        }
    }

    /// Store interval `seq` (from 0) of run `id` and send it to the run's subscribers.
    pub(super) fn interval(
        &self,
        id: i64,
        seq: i64,
        rec: IntervalRecord,
        tx: &broadcast::Sender<LiveEvent>,
    ) {
        if let Err(e) = self.store.add_interval(id, seq, &rec) {
            tracing::error!(run = id, "cannot store an interval: {e}");
        }
        let _ = tx.send(LiveEvent::Interval { seq, record: rec });
    }

    /// Record and start a client test; returns the run id at once (the test runs on).
    pub fn start_client(&self, spec: ClientSpec) -> Result<i64, String> {
        self.start_client_in(spec, None).map(|(id, _)| id)
    }

    /// Like [`Hub::start_client`], as part of suite `suite_id`; also returns a handle that
    /// resolves when the run has ended.
    pub fn start_client_in(
        &self,
        spec: ClientSpec,
        suite_id: Option<i64>,
    ) -> Result<(i64, tokio::task::JoinHandle<RunStatus>), String> {
        self.launch_client(spec, suite_id, None, Arc::new(Notify::new()))
    }

    /// Start a client test as a leg of multi-port run `parent_id` (not sampled on its own:
    /// the parent run is); `cancel` stops it.
    pub fn start_leg(
        &self,
        spec: ClientSpec,
        parent_id: i64,
        cancel: Arc<Notify>,
    ) -> Result<(i64, tokio::task::JoinHandle<RunStatus>), String> {
        self.launch_client(spec, None, Some(parent_id), cancel)
    }

    fn launch_client(
        &self,
        spec: ClientSpec,
        suite_id: Option<i64>,
        parent_id: Option<i64>,
        cancel: Arc<Notify>,
    ) -> Result<(i64, tokio::task::JoinHandle<RunStatus>), String> {
        spec.validate()?;
        let direction = client::run_direction(spec.params.direction, Role::Client);
        let run = NewRun {
            role: RunRole::Client,
            protocol: spec.params.protocol.into(),
            peer_host: spec.host.clone(),
            peer_port: spec.port,
            local_host: spec.sock.bind.map(|b| b.to_string()).unwrap_or_default(),
            local_port: 0,
            bind_dev: spec.sock.bind_dev.clone(),
            direction,
            params: serde_json::to_value(&spec.params).unwrap_or_default(),
            suite_id,
            parent_id,
            ..Default::default()
        };
        let sampling = if parent_id.is_some() {
            Sampling::Parent
        } else {
            Sampling::Ports(Vec::new())
        };
        let rec = self.begin(&run, Some(cancel.clone()), sampling)?;
        let id = rec.id();
        let handle = self.spawn(async move {
            let (etx, mut erx) = mpsc::unbounded_channel();
            let r2 = rec.clone();
            let forward = crate::engine::task::spawn(async move {
                while let Some(ev) = erx.recv().await {
                    match ev {
                        Event::Started(r) => r2.endpoints(&r.local_host, r.local_port),
                        Event::Interval(i) => r2.interval(i),
                    }
                }
            });
            let res = client::run(spec, Some(etx), Some(cancel)).await;
            let _ = forward.await;
            match res {
                Ok(r) => {
                    rec.finish(RunStatus::Completed, Outcome::Report(Some(&r)), None);
                    RunStatus::Completed
                }
                Err(e) => {
                    let status = if e.aborted {
                        RunStatus::Aborted
                    } else {
                        RunStatus::Failed
                    };
                    rec.finish(
                        status,
                        Outcome::Report(e.partial.as_deref()),
                        Some(&e.message),
                    );
                    status
                }
            }
        });
        Ok((id, handle))
    }

    /// Record what the built-in iperf3 server reports, until the channel closes.
    pub async fn record_server(&self, mut rx: mpsc::UnboundedReceiver<ServerEvent>) {
        let mut map: HashMap<u64, Recorder> = HashMap::new();
        while let Some(ev) = rx.recv().await {
            match ev {
                ServerEvent::Started { session, report } => {
                    let n = NewRun {
                        role: RunRole::Server,
                        protocol: report.params.protocol.into(),
                        peer_host: report.peer_host.clone(),
                        peer_port: report.peer_port,
                        local_host: report.local_host.clone(),
                        local_port: report.local_port,
                        bind_dev: None,
                        direction: client::run_direction(report.params.direction, report.role),
                        params: serde_json::to_value(&report.params).unwrap_or_default(),
                        suite_id: None,
                        ..Default::default()
                    };
                    match self.begin(&n, None, Sampling::Ports(Vec::new())) {
                        Ok(rec) => {
                            map.insert(session, rec);
                        }
                        Err(e) => tracing::error!("cannot record a served test: {e}"),
                    }
                }
                ServerEvent::Interval { session, record } => {
                    if let Some(rec) = map.get(&session) {
                        rec.interval(record);
                    }
                }
                ServerEvent::Finished {
                    session,
                    report,
                    status,
                } => {
                    if let Some(rec) = map.remove(&session) {
                        rec.finish(
                            status,
                            Outcome::Report(Some(&report)),
                            report.error.as_deref(),
                        );
                    }
                }
            }
        }
    }

    /// Start the test this request describes (iperf3, iperf 2, or the one the peer speaks);
    /// returns the run id. Bad input starts nothing.
    pub async fn start_request(
        &self,
        req: &TestRequest,
        ports: &[crate::board::Port],
    ) -> Result<i64, String> {
        match req.peer_type()? {
            crate::spec::test::PeerType::Iperf3 => self.start_client(req.to_spec(ports)?),
            crate::spec::test::PeerType::Iperf2 => {
                self.start_iperf2_client(req.to_iperf2_spec(ports)?)
            }
            crate::spec::test::PeerType::Auto => {
                // Check both readings before probing, so bad input is reported as such.
                let test = req.parse()?;
                let spec3 = test.to_client_spec(ports)?;
                let explicit = test.port.is_some();
                // iperf 2 on the port probed: the typed test with that port, not the request
                // again with the port written back into its text.
                let on_port = crate::spec::test::TestSpec {
                    port: Some(spec3.port),
                    ..test.clone()
                };
                let probe = crate::engine::iperf3::client::probe_iperf3(&spec3).await;
                let udp = spec3.params.protocol == crate::engine::params::Protocol::Udp;
                match auto_pick(probe, explicit, udp)? {
                    AutoPick::Iperf3 => self.start_client(ClientSpec {
                        after_probe: true,
                        ..spec3
                    }),
                    AutoPick::Iperf2OnPort => {
                        self.start_iperf2_client(on_port.to_iperf2_spec(ports)?)
                    }
                    AutoPick::Iperf2Default => {
                        self.start_iperf2_client(test.to_iperf2_spec(ports)?)
                    }
                }
            }
        }
    }
}

/// What peer type "auto" runs after the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AutoPick {
    /// iperf3 on the port probed.
    Iperf3,
    /// iperf 2 on the port probed.
    Iperf2OnPort,
    /// iperf 2 on its own default port (5001; no port was given).
    Iperf2Default,
}

/// The peer type "auto" picks from the probe of the iperf3 port (`explicit`: the user gave
/// the port; `udp`: a UDP test). Nothing listening on a port the user gave is an error, except
/// for a UDP test: an iperf3 server always listens on TCP, a UDP-only iperf 2 server
/// (`iperf -s -u`) never does, so a refused TCP connect there means iperf 2 over UDP.
fn auto_pick(
    probe: Result<bool, crate::engine::iperf3::client::ProbeError>,
    explicit: bool,
    udp: bool,
) -> Result<AutoPick, String> {
    match probe {
        Ok(true) => Ok(AutoPick::Iperf3),
        Ok(false) => Ok(AutoPick::Iperf2OnPort),
        Err(_) if !explicit => Ok(AutoPick::Iperf2Default),
        Err(e) if e.refused && udp => Ok(AutoPick::Iperf2OnPort),
        Err(e) => Err(e.message),
    }
}

/// A run's own bytes, to set against its ports' traffic: its bytes in the main direction
/// plus its lost datagrams at their mean size. `None` when the run has no byte count of its
/// own (an RFC 2544 run, whose trials read the same port counters per trial; a monitor or
/// latency run): then there is nothing to tell other traffic from. (Before, such a run said
/// "the board's ports moved 4,782.1 MB beyond the run's own 0.000 MB".)
/// A bidirectional run's reverse leg counts as its own too (issue 38: a latency run's
/// download leg was "20,359.5 MB beyond the run's own 2,801.8 MB").
fn own_bytes(figures: &RunFigures) -> Option<u64> {
    let bytes = figures.bytes?.max(0) as u64;
    let main = match (figures.lost_packets, figures.total_packets) {
        (Some(l), Some(t)) if l > 0 && t > l => {
            bytes + (bytes as u128 * l as u128 / (t - l) as u128) as u64
        }
        _ => bytes,
    };
    Some(main.saturating_add(figures.reverse_bytes.unwrap_or(0).max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39: auto with an explicit port against a UDP-only `iperf -s -u`: the TCP probe
    /// was refused and no run started. A UDP test now runs iperf 2 on that port; a TCP test
    /// (and any other failure) still says why.
    #[test]
    fn auto_runs_iperf2_udp_where_tcp_is_refused() {
        use crate::engine::iperf3::client::ProbeError;
        let refused = || {
            Err(ProbeError {
                message: "unable to connect to 192.0.2.2:5001: Connection refused".into(),
                refused: true,
            })
        };
        assert_eq!(auto_pick(refused(), true, true), Ok(AutoPick::Iperf2OnPort));
        assert_eq!(
            auto_pick(refused(), true, false),
            Err("unable to connect to 192.0.2.2:5001: Connection refused".into())
        );
        let timeout = Err(ProbeError {
            message: "timed out".into(),
            refused: false,
        });
        assert_eq!(auto_pick(timeout, true, true), Err("timed out".into()));
        assert_eq!(
            auto_pick(refused(), false, true),
            Ok(AutoPick::Iperf2Default)
        );
        assert_eq!(auto_pick(Ok(true), true, true), Ok(AutoPick::Iperf3));
        assert_eq!(
            auto_pick(Ok(false), true, false),
            Ok(AutoPick::Iperf2OnPort)
        );
    }

    #[test]
    fn an_iperf2_run_s_own_sent_datagrams_become_its_flow() {
        // The board sent two UDP streams of 1,470-byte datagrams (iperf 2's default) and
        // received one: the flow is what it sent.
        let summary = serde_json::json!({"peer": "iperf 2", "streams": [
            {"id": 3, "sender": true, "bytes": 14_700_000u64, "seconds": 3.0, "sent_datagrams": 10_000},
            {"id": 4, "sender": true, "bytes": 7_350_000u64, "seconds": 3.0, "sent_datagrams": 5_000},
            {"id": 5, "sender": false, "bytes": 1_470_000u64, "seconds": 3.0, "sent_datagrams": null}]});
        assert_eq!(
            flow_of_streams(&summary, false),
            Some(crate::results::ledger::Flow::udp(1470, false, Some(15_000)))
        );
        assert_eq!(flow_of_streams(&summary, true).map(|f| f.headers), Some(62));
        // A sending stream without its count, or nothing sent: no flow (the ledger keeps skbs).
        let unknown =
            serde_json::json!({"streams": [{"sender": true, "bytes": 5, "sent_datagrams": null}]});
        assert_eq!(flow_of_streams(&unknown, false), None);
        let received = serde_json::json!({"streams": [{"sender": false, "bytes": 5}]});
        assert_eq!(flow_of_streams(&received, false), None);
        assert_eq!(flow_of_streams(&serde_json::json!({}), false), None);
    }

    #[test]
    fn a_run_without_bytes_of_its_own_sets_nothing_against_its_ports() {
        // An RFC 2544 run's figures carry only its headline bitrate.
        let rfc = RunFigures {
            receiver_bps: Some(96.6e6),
            ..Default::default()
        };
        assert_eq!(own_bytes(&rfc), None);
        // A TCP run: its bytes.
        let tcp = RunFigures {
            bytes: Some(37_500_000),
            ..Default::default()
        };
        assert_eq!(own_bytes(&tcp), Some(37_500_000));
        // A UDP run that lost 1 of 4 datagrams: 3 arrived as 3,000 bytes, 4,000 were its own.
        let udp = RunFigures {
            bytes: Some(3_000),
            lost_packets: Some(1),
            total_packets: Some(4),
            ..Default::default()
        };
        assert_eq!(own_bytes(&udp), Some(4_000));
        // A bidirectional run (a latency run's default load): both legs are its own.
        let bidir = RunFigures {
            bytes: Some(2_801_800_000),
            reverse_bytes: Some(20_359_500_000),
            ..Default::default()
        };
        assert_eq!(own_bytes(&bidir), Some(23_161_300_000));
    }
}
