//! iperf3 runs: client tests started from the web UI, the API, a suite or a multi-port run,
//! and the tests the built-in iperf3 server serves (stored as *server* runs), each through the
//! one start path ([`RunContext::start`]). Also the "auto" peer type: probe, then iperf3 or
//! iperf 2. Not for: the wire protocol and the streams (`engine::iperf3`).

use super::context::{RunContext, Started};
use super::recorder::{Ended, Measured, Sampling, ServedRun};
use crate::engine::iperf3::client::{self, ClientSpec, Event};
use crate::engine::iperf3::server::ServerEvent;
use crate::engine::report::Role;
use crate::model::{RunRole, RunStatus};
use crate::spec::test::TestRequest;
use crate::store::NewRun;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};

/// Record and start a client test; returns the run id at once (the test runs on).
pub(crate) fn start_client(ctx: &RunContext, spec: ClientSpec) -> Result<i64, String> {
    start_client_in(ctx, spec, None).map(|(id, _)| id)
}

/// Like [`start_client`], as part of suite `suite_id`; also returns a handle that resolves
/// when the run has ended.
pub(crate) fn start_client_in(
    ctx: &RunContext,
    spec: ClientSpec,
    suite_id: Option<i64>,
) -> Result<Started, String> {
    launch_client(ctx, spec, suite_id, None, Arc::new(Notify::new()))
}

/// Start a client test as a leg of multi-port run `parent_id` (not sampled on its own: the
/// parent run is); `cancel` stops it.
pub(crate) fn start_leg(
    ctx: &RunContext,
    spec: ClientSpec,
    parent_id: i64,
    cancel: Arc<Notify>,
) -> Result<Started, String> {
    launch_client(ctx, spec, None, Some(parent_id), cancel)
}

/// The run row of client test `spec`.
fn client_run(spec: &ClientSpec, suite_id: Option<i64>, parent_id: Option<i64>) -> NewRun {
    NewRun {
        role: RunRole::Client,
        protocol: spec.params.protocol.into(),
        peer_host: spec.host.clone(),
        peer_port: spec.port,
        local_host: spec.sock.bind.map(|b| b.to_string()).unwrap_or_default(),
        local_port: 0,
        bind_dev: spec.sock.bind_dev.clone(),
        direction: client::run_direction(spec.params.direction, Role::Client),
        params: serde_json::to_value(&spec.params).unwrap_or_default(),
        suite_id,
        parent_id,
        ..Default::default()
    }
}

fn launch_client(
    ctx: &RunContext,
    spec: ClientSpec,
    suite_id: Option<i64>,
    parent_id: Option<i64>,
    cancel: Arc<Notify>,
) -> Result<Started, String> {
    spec.validate()?;
    let run = client_run(&spec, suite_id, parent_id);
    let sampling = if parent_id.is_some() {
        Sampling::Parent
    } else {
        Sampling::Ports(Vec::new())
    };
    ctx.start(
        &run,
        sampling,
        Some(cancel.clone()),
        move |_, rec| async move {
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
                Ok(r) => Ended {
                    status: RunStatus::Completed,
                    measured: Measured::Report(Some(Box::new(r))),
                    summary: None,
                    error: None,
                },
                Err(e) => Ended {
                    status: if e.aborted {
                        RunStatus::Aborted
                    } else {
                        RunStatus::Failed
                    },
                    measured: Measured::Report(e.partial),
                    summary: None,
                    error: Some(e.message),
                },
            }
        },
    )
}

/// Record what the built-in iperf3 server reports, until the channel closes: each test a
/// run of its own (not stoppable here: the client ends it); a test the server never finished
/// is stored aborted when the channel closes.
pub(crate) async fn record_served(ctx: &RunContext, mut rx: mpsc::UnboundedReceiver<ServerEvent>) {
    let mut map: HashMap<u64, ServedRun> = HashMap::new();
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
                match ctx.start_served(&n, Sampling::Ports(Vec::new()), None) {
                    Ok(run) => {
                        map.insert(session, run);
                    }
                    Err(e) => tracing::error!("cannot record a served test: {e}"),
                }
            }
            ServerEvent::Interval { session, record } => {
                if let Some(run) = map.get(&session) {
                    run.recorder().interval(record);
                }
            }
            ServerEvent::Finished {
                session,
                report,
                status,
            } => {
                if let Some(run) = map.remove(&session) {
                    let error = report.error.clone();
                    run.end(Ended {
                        status,
                        measured: Measured::Report(Some(report)),
                        summary: None,
                        error,
                    });
                }
            }
        }
    }
}

/// Start the test this request describes (iperf3, iperf 2, or the one the peer speaks);
/// returns the run id. Bad input starts nothing.
pub(crate) async fn start_request(
    ctx: &RunContext,
    req: &TestRequest,
    ports: &[crate::board::Port],
) -> Result<i64, String> {
    match req.peer_type()? {
        crate::spec::test::PeerType::Iperf3 => start_client(ctx, req.to_spec(ports)?),
        crate::spec::test::PeerType::Iperf2 => {
            crate::runs::iperf2::start_client(ctx, req.to_iperf2_spec(ports)?)
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
                AutoPick::Iperf3 => start_client(
                    ctx,
                    ClientSpec {
                        after_probe: true,
                        ..spec3
                    },
                ),
                AutoPick::Iperf2OnPort => {
                    crate::runs::iperf2::start_client(ctx, on_port.to_iperf2_spec(ports)?)
                }
                AutoPick::Iperf2Default => {
                    crate::runs::iperf2::start_client(ctx, test.to_iperf2_spec(ports)?)
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
}
