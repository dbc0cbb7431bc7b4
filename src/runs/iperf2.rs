//! iperf 2 runs in history: starts client tests for the web UI/API and records what the
//! built-in iperf 2 server serves, as runs of kind "iperf2" through [`RunContext::start`]
//! (followable, stoppable, intervals stored as they arrive, figures and a JSON summary at the
//! end).

use crate::engine::iperf2::client::{self, Iperf2Spec};
use crate::engine::iperf2::{Event, Outcome, TestInfo};
use crate::model::{RunProtocol, RunRole};
use crate::results::iperf2_summary::Iperf2Summary;
use crate::runs::context::RunContext;
use crate::runs::recorder::{Ended, Measured, Recorder, Sampling, ServedRun};
use crate::store::NewRun;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};

fn new_run(info: &TestInfo) -> NewRun {
    NewRun {
        role: match info.role {
            crate::engine::iperf2::Role::Client => RunRole::Client,
            crate::engine::iperf2::Role::Server => RunRole::Server,
        },
        protocol: info.protocol.clone(),
        peer_host: info.peer_host.clone(),
        peer_port: info.peer_port,
        local_host: info.local_host.clone(),
        local_port: info.local_port,
        bind_dev: None,
        direction: info.direction.clone(),
        params: info.params.clone(),
        kind: crate::model::RunKind::Iperf2,
        ..Default::default()
    }
}

/// The run's summary JSON ([`Iperf2Summary`]): every stream's figures, the notes, and with
/// several streams in a direction their [SUM] under "sum" → "receive" / "send" (the board's
/// side; bytes, seconds, bits_per_second, UDP figures), as a stock iperf 2 prints it for `-P`.
pub(crate) fn summary(o: &Outcome) -> serde_json::Value {
    Iperf2Summary::of_outcome(o).to_value()
}

/// How a test ended, to store: its figures (retransmits from the board's own TCP_INFO counts
/// in the stored intervals, which iperf 2 does not report) and summary.
fn ended(rec: &Recorder, o: &Outcome) -> Ended {
    let mut figures = crate::results::figures::of_iperf2(o);
    if figures.retransmits.is_none() {
        // iperf 2 reports no retransmits; the board's own TCP_INFO counts are in the intervals.
        let iv = rec.store_intervals();
        figures.retransmits = crate::results::figures::retransmits_of(&iv);
    }
    Ended {
        status: o.status,
        measured: Measured::Figures(figures),
        summary: Some(summary(o)),
        error: o.error.clone(),
    }
}

/// Record and start an iperf 2 client test; returns the run id at once.
pub(crate) fn start_client(ctx: &RunContext, spec: Iperf2Spec) -> Result<i64, String> {
    spec.validate()?;
    let run = NewRun {
        role: RunRole::Client,
        protocol: if spec.udp {
            RunProtocol::Udp
        } else {
            RunProtocol::Tcp
        },
        peer_host: spec.host.clone(),
        peer_port: spec.port,
        local_host: spec.bind.map(|b| b.to_string()).unwrap_or_default(),
        direction: crate::engine::iperf2::direction_word(spec.ret, true),
        params: serde_json::to_value(&spec).unwrap_or_default(),
        kind: crate::model::RunKind::Iperf2,
        ..Default::default()
    };
    let cancel = Arc::new(Notify::new());
    let sampling = Sampling::Ports(Vec::new());
    let (id, _) = ctx.start(
        &run,
        sampling,
        Some(cancel.clone()),
        move |_, rec| async move {
            let (etx, mut erx) = mpsc::unbounded_channel();
            let r2 = rec.clone();
            let forward = crate::engine::task::spawn(async move {
                while let Some(ev) = erx.recv().await {
                    match ev {
                        Event::Started { info, .. } => {
                            r2.endpoints(&info.local_host, info.local_port)
                        }
                        Event::Interval { record, .. } => r2.interval(record),
                        Event::Finished { .. } => {}
                    }
                }
            });
            let o = client::run(spec, Some(etx), Some(cancel)).await;
            let _ = forward.await;
            ended(&rec, &o)
        },
    )?;
    Ok(id)
}

/// Record what the built-in iperf 2 server serves, until the channel closes: each test a run
/// of its own (not stoppable here); a test not finished when the channel closes is stored
/// aborted ("server stopped").
pub(crate) async fn record_served(ctx: &RunContext, mut rx: mpsc::UnboundedReceiver<Event>) {
    let mut map: HashMap<u64, ServedRun> = HashMap::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Started { test, info } => {
                match ctx.start_served(&new_run(&info), Sampling::Ports(Vec::new()), None) {
                    Ok(run) => {
                        map.insert(test, run);
                    }
                    Err(e) => tracing::error!("cannot record an iperf 2 test: {e}"),
                }
            }
            Event::Interval { test, record } => {
                if let Some(run) = map.get(&test) {
                    run.recorder().interval(record);
                }
            }
            Event::Finished { test, outcome } => {
                if let Some(run) = map.remove(&test) {
                    let e = ended(run.recorder(), &outcome);
                    run.end(e);
                }
            }
        }
    }
    for (_, run) in map {
        run.end(Ended::aborted("server stopped"));
    }
}

/// Start the built-in iperf 2 server on `ports` (TCP and UDP each), recording every test a
/// peer runs as a run of kind "iperf2", until `shutdown` is notified. A port that cannot be
/// bound is logged as an error; the appliance keeps running without the iperf 2 server.
pub(crate) fn start_server(ctx: &RunContext, ports: &[u16], shutdown: Arc<Notify>) {
    use crate::engine::iperf2::server::{self, Iperf2ServerConfig};
    let cfg = Iperf2ServerConfig {
        ports: ports.to_vec(),
        ..Default::default()
    };
    let l = match server::bind(&cfg) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("iperf 2 server not started: {e}");
            return;
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let c = ctx.clone();
    crate::engine::task::spawn(async move { record_served(&c, rx).await });
    crate::engine::task::spawn(
        async move { server::serve(l, cfg, Some(tx), Some(shutdown)).await },
    );
    tracing::info!(?ports, "iperf 2 server listening (TCP and UDP)");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::iperf2::{StreamResult, UdpFigures};
    use crate::engine::report::LatencyMs;
    use crate::model::RunStatus;

    fn stream(id: u32, sender: bool, bytes: u64, seconds: f64) -> StreamResult {
        StreamResult {
            id,
            local: format!("192.0.2.1 port {}", 45_000 + id),
            remote: "192.0.2.2 port 5001".into(),
            sender,
            bytes,
            seconds,
            ..Default::default()
        }
    }

    /// The board's TCP client, one stream, 10 s (no report comes back over TCP).
    fn client_tcp() -> Outcome {
        Outcome {
            status: RunStatus::Completed,
            error: None,
            streams: vec![stream(1, true, 1_176_633_344, 10.000_412)],
            notes: Vec::new(),
            rate_check: None,
        }
    }

    /// The board's UDP client at 100 Mbit/s with `--trip-times`: the peer's server report
    /// with its latency extension, the pacer's figures.
    fn client_udp_trip() -> Outcome {
        let mut s = stream(1, true, 125_002_260, 10.000_087);
        s.sent_datagrams = Some(85_036);
        s.udp = Some(UdpFigures {
            bytes: 124_986_090,
            seconds: 10.000_913,
            lost: 11,
            total: 85_036,
            out_of_order: 0,
            jitter_ms: 0.012_831,
            latency_ms: Some(LatencyMs {
                count: 85_025,
                avg: 0.183_214,
                min: 0.061,
                max: 2.417,
                stdev: 0.052_911,
            }),
        });
        s.sender_max_lag_ms = Some(0.412_5);
        s.sender_peak_1ms_bps = Some(117_600_000.0);
        Outcome {
            status: RunStatus::Completed,
            error: None,
            streams: vec![s],
            notes: Vec::new(),
            rate_check: None,
        }
    }

    /// A peer's TCP `-P 2 --trip-times` test against the board's server: two receiving
    /// streams with write latency, their [SUM].
    fn served_tcp_p2() -> Outcome {
        let mut a = stream(1, false, 588_316_672, 10.002_118);
        let mut b = stream(2, false, 590_413_824, 10.001_734);
        a.latency_ms = Some(LatencyMs {
            count: 4_488,
            avg: 0.731_2,
            min: 0.118,
            max: 9.826,
            stdev: 0.610_44,
        });
        b.latency_ms = Some(LatencyMs::default());
        b.trip_drops = Some(crate::engine::iperf2::trip::TripDrops {
            cut: 1,
            ..Default::default()
        });
        Outcome {
            status: RunStatus::Completed,
            error: None,
            streams: vec![a, b],
            notes: Vec::new(),
            rate_check: None,
        }
    }

    /// A peer's UDP `-P 2 -d` test: two streams each way, UDP figures, a note, its [SUM]s.
    fn served_udp_dual() -> Outcome {
        let udp = |bytes, lost, total, jitter_ms| UdpFigures {
            bytes,
            seconds: 10.000_5,
            lost,
            total,
            out_of_order: 1,
            jitter_ms,
            latency_ms: None,
        };
        let mut streams = Vec::new();
        for (id, sender) in [(1, false), (2, false), (3, true), (4, true)] {
            let mut s = stream(id, sender, 1_311_240, 10.010_2);
            s.udp = Some(udp(
                1_311_240 - 1_470 * u64::from(id),
                u64::from(id),
                893,
                0.021 * f64::from(id),
            ));
            if sender {
                s.sent_datagrams = Some(893);
                s.sender_max_lag_ms = Some(0.2 * f64::from(id));
                s.sender_peak_1ms_bps = Some(11_760_000.0);
            }
            streams.push(s);
        }
        streams[3].port_unreachable = Some(3);
        Outcome {
            status: RunStatus::Completed,
            error: None,
            streams,
            notes: vec!["no server report came back for the UDP FIN (10 tries)".into()],
            rate_check: None,
        }
    }

    /// The board's TCP client with `-r` (tradeoff): its sending stream, then the server's.
    fn client_tcp_tradeoff() -> Outcome {
        Outcome {
            status: RunStatus::Completed,
            error: None,
            streams: vec![
                stream(1, true, 1_174_142_976, 10.000_233),
                stream(2, false, 1_169_948_672, 10.012_871),
            ],
            notes: Vec::new(),
            rate_check: None,
        }
    }

    use crate::results::iperf2_summary::tests::fixture;

    /// The summaries and client params in `tests/data/iperf2_*.json` are what the binary
    /// stored before the summary was typed (its `json!` writer, on these outcomes): the typed
    /// writer gives the same JSON, key order and number text included.
    #[test]
    fn typed_writer_stores_what_the_old_one_did() {
        for (name, o) in [
            ("client_tcp", client_tcp()),
            ("client_udp_trip", client_udp_trip()),
            ("client_tcp_tradeoff", client_tcp_tradeoff()),
            ("served_tcp_p2", served_tcp_p2()),
            ("served_udp_dual", served_udp_dual()),
        ] {
            let stored = fixture(name)["summary"].clone();
            assert_eq!(summary(&o), stored, "{name}");
            assert_eq!(
                serde_json::to_string(&summary(&o)).expect("json"),
                serde_json::to_string(&stored).expect("json"),
                "{name}"
            );
        }
        let mut spec = Iperf2Spec::new("192.0.2.2");
        assert_eq!(
            serde_json::to_value(&spec).ok(),
            Some(fixture("client_tcp")["params"].clone())
        );
        spec.udp = true;
        spec.rate = 100_000_000;
        spec.len = 1470;
        spec.trip_times = true;
        spec.bind = "192.0.2.1".parse().ok();
        spec.bind_dev = Some("eth1".into());
        let stored = fixture("client_udp_trip")["params"].clone();
        assert_eq!(serde_json::to_value(&spec).ok(), Some(stored));
        let mut spec = Iperf2Spec::new("192.0.2.2");
        spec.ret = crate::engine::iperf2::wire::Return::Tradeoff;
        spec.listen_port = 5002;
        spec.window = Some(262_144);
        spec.time = 10.5;
        let stored = fixture("client_tcp_tradeoff")["params"].clone();
        assert_eq!(serde_json::to_value(&spec).ok(), Some(stored));
    }
}
