//! iperf 2 runs in history: starts client tests for the web UI/API and records what the
//! built-in iperf 2 server serves, as runs of kind "iperf2" through [`RunContext::start`]
//! (followable, stoppable, intervals stored as they arrive, figures and a JSON summary at the
//! end).

use crate::engine::iperf2::client::{self, Iperf2Spec};
use crate::engine::iperf2::{Event, Outcome, TestInfo};
use crate::model::{RunProtocol, RunRole};
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

/// The run's summary JSON: every stream's figures, the notes, and with several streams in a
/// direction their [SUM] under "sum" → "receive" / "send" (the board's side; bytes, seconds,
/// bits_per_second, UDP figures), as a stock iperf 2 prints it for `-P`.
pub(crate) fn summary(o: &Outcome) -> serde_json::Value {
    let mut v = serde_json::json!({
        "peer": "iperf 2",
        "streams": o.streams,
        "notes": o.notes,
    });
    let mut sum = serde_json::Map::new();
    for (key, sender) in [("receive", false), ("send", true)] {
        if let Some(s) = crate::engine::iperf2::stream_sum(o, sender) {
            let n = o.streams.iter().filter(|x| x.sender == sender).count();
            sum.insert(
                key.into(),
                serde_json::json!({
                    "streams": n,
                    "bytes": s.bytes,
                    "seconds": s.seconds,
                    "bits_per_second": s.bits_per_second(),
                    "udp": s.udp,
                }),
            );
        }
    }
    if !sum.is_empty() {
        v["sum"] = serde_json::Value::Object(sum);
    }
    v
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
