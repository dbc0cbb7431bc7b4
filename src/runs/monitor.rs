//! The 1 Hz monitor of runs in progress: while a run is watched, every reading of the board's
//! one sampler ([`crate::board::sampler`]) becomes a monitor sample of the run (CPU per core,
//! its ports' counters, conntrack entries), stored and sent to its live subscribers; at the
//! run's end the last part-second is stored and the board's counters over the whole run, with
//! the loss ledger, go into the run's row. Not for: the registry of live runs
//! (`runs::registry`) or the run's own figures (`runs::recorder`).

use super::registry::{relock, LiveEvent};
use crate::board::counters::{BoardDelta, BoardReading, Series};
use crate::board::sampler::{self as sampler, Sampler, Snapshot};
use crate::engine::report::Report;
use crate::model::RunFigures;
use crate::store::{RunRow, Store, SysSampleRow};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::broadcast;

/// A run the monitor samples: its ports (empty = not known yet, resolved from the run's
/// bound device or local address) and the previous reading.
struct Watch {
    started: Instant,
    ports: Vec<String>,
    prev: Arc<Snapshot>,
    tx: broadcast::Sender<LiveEvent>,
    /// The board's counters when the run started (see [`Monitor::board_end`]).
    board: Arc<BoardReading>,
    /// The fast counters second by second.
    series: Series,
}

/// Shortest time a monitor sample covers, s (see [`Monitor::tick`]): 0.5 s.
const MIN_SAMPLE_SECS: f64 = 0.5;

/// The monitor (see the module doc); one per run context, shared through an `Arc`.
pub(crate) struct Monitor {
    store: Arc<Store>,
    watches: Mutex<HashMap<i64, Watch>>,
    /// Whether the task that turns readings into samples is running.
    on: AtomicBool,
    /// The board's 1 Hz sampler whose readings become each watched run's samples.
    sampler: Arc<Sampler>,
    /// The runtime the sampling task runs on (`None`: the caller's).
    rt: Option<tokio::runtime::Handle>,
}

impl Monitor {
    /// A monitor storing samples in `store`, from `sampler`'s readings, its task on `rt`.
    pub(crate) fn new(
        store: Arc<Store>,
        sampler: Arc<Sampler>,
        rt: Option<tokio::runtime::Handle>,
    ) -> Monitor {
        Monitor {
            store,
            watches: Mutex::new(HashMap::new()),
            on: AtomicBool::new(false),
            sampler,
            rt,
        }
    }

    /// Sample run `id` every second from now until [`Monitor::final_sample`]: CPU per core
    /// and `ports` (interface names; empty = the ports that carry the run's addresses), each
    /// sample stored and sent on `tx`.
    pub(super) fn watch(
        self: &Arc<Self>,
        id: i64,
        ports: Vec<String>,
        tx: broadcast::Sender<LiveEvent>,
    ) {
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
        if self.on.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(rt) = self
            .rt
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok())
        else {
            self.on.store(false, Ordering::SeqCst);
            return;
        };
        self.run_on(&rt);
    }

    /// The task that turns the sampler's readings into samples until no run is watched.
    /// The samples come from the board's one 1 Hz loop, not from a loop of the monitor's own.
    fn run_on(self: &Arc<Self>, rt: &tokio::runtime::Handle) {
        self.sampler.start(rt);
        let mut readings = self.sampler.subscribe();
        readings.borrow_and_update();
        let me = self.clone();
        crate::engine::task::spawn_on(rt, async move {
            loop {
                if readings.changed().await.is_err() {
                    me.on.store(false, Ordering::SeqCst);
                    break;
                }
                let Some(now) = readings.borrow_and_update().clone() else {
                    continue;
                };
                let m = me.clone();
                match crate::engine::task::spawn_blocking(move || m.tick(&now)).await {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        tracing::error!("monitor sample failed: {e}");
                        me.on.store(false, Ordering::SeqCst);
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
            .and_then(sampler::port_of_address)
            .into_iter()
            .collect()
    }

    /// Store a sample of reading `now` for every watched run; false (and the monitor task
    /// ends) when no run is watched. A run watched for less than [`MIN_SAMPLE_SECS`] gets its
    /// first sample at the next reading instead (the sampler's second does not start with the
    /// run).
    fn tick(&self, now: &Arc<Snapshot>) -> bool {
        let unresolved: Vec<i64> = relock(&self.watches)
            .iter()
            .filter(|(_, w)| w.ports.is_empty())
            .map(|(id, _)| *id)
            .collect();
        let resolved: Vec<(i64, Vec<String>)> = unresolved
            .into_iter()
            .map(|id| (id, self.resolve_ports(id)))
            .collect();
        let conntrack = sampler::conntrack_count();
        let mut out = Vec::new();
        {
            let mut ws = relock(&self.watches);
            if ws.is_empty() {
                self.on.store(false, Ordering::SeqCst);
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
    pub(super) fn final_sample(&self, id: i64) {
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
            conntrack: sampler::conntrack_count(),
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
    pub(super) fn board_end(
        &self,
        id: i64,
        figures: &RunFigures,
        report: Option<&Report>,
        summary: Option<&serde_json::Value>,
    ) {
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
        let end = RunEnd {
            run: &run,
            ports: &ports,
            delta: &delta,
            figures,
            report,
        };
        let ledger = end.ledger(summary);
        let board = end.board_json();
        if let Err(e) = self.store.set_run_board(id, &board, ledger.as_ref()) {
            tracing::error!(run = id, "cannot store the board's counters: {e}");
        }
    }
}

/// What is known of a watched run at its end (see [`Monitor::board_end`]).
struct RunEnd<'a> {
    run: &'a RunRow,
    ports: &'a [String],
    delta: &'a BoardDelta,
    figures: &'a RunFigures,
    report: Option<&'a Report>,
}

impl RunEnd<'_> {
    /// The run's loss ledger (JSON) when it is a UDP or forwarding run whose lost datagrams
    /// are known.
    fn ledger(&self, summary: Option<&serde_json::Value>) -> Option<serde_json::Value> {
        let (run, report, ports, delta) = (self.run, self.report, self.ports, self.delta);
        let forwarding = run.kind.forwards();
        let udp = run.protocol.is_udp();
        self.figures
            .lost_packets
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
                    crate::results::ledger::ledger(n.max(0) as u64, path, ports, delta, &flow);
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
            .and_then(|l| serde_json::to_value(l).ok())
    }

    /// What moved on the board during the run (JSON): the counters' delta, the run's ports,
    /// their shapers, and the traffic beyond the run's own.
    fn board_json(&self) -> serde_json::Value {
        let (run, report, ports, delta, figures) =
            (self.run, self.report, self.ports, self.delta, self.figures);
        let forwarding = run.kind.forwards();
        let udp = run.protocol.is_udp();
        let mut board = serde_json::to_value(delta).unwrap_or_default();
        if let Some(o) = board.as_object_mut() {
            o.insert("run_ports".into(), serde_json::json!(ports));
            // The shapers on the run's ports (rates), for the verdict (`results::shaper`).
            let shapers = crate::board::shaper::shapers_of(crate::board::shaper::for_ports(ports));
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
                    ports,
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
                crate::results::ledger::other_traffic(delta, own, crossings, frames.as_ref())
                    .map(|e| (e, own))
            });
            if let Some((extra, own)) = extra {
                o.insert("other_bytes".into(), extra.into());
                o.insert("run_bytes".into(), own.into());
            }
        }
        board
    }
}

/// The flow of a run without an iperf3 report from its stored summary's `streams` (an iperf 2
/// run's: `sender`, `bytes`, `sent_datagrams` each): the datagrams this host's sending
/// streams sent and their mean payload (bytes over datagrams). `None` when no stream of this
/// host sent datagrams.
pub(crate) fn flow_of_streams(
    summary: &serde_json::Value,
    ipv6: bool,
) -> Option<crate::results::ledger::Flow> {
    crate::results::iperf2_summary::Iperf2Summary::of_summary(summary)?.sent_flow(ipv6)
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
