//! Multi-port runs (seed 000 scenarios 2 and 4, seed 003 §7): several iperf3 client legs,
//! each bound to its own board port, started together as one run of kind "multi". Each leg
//! is a run of its own (`parent_id` = the multi run) with its own intervals; the multi run
//! carries the monitor samples (CPU per core, every leg's port) and the per-leg and aggregate
//! results. Not for: one test on one port (see [`crate::runs::iperf3::start_client`]).

use crate::engine::iperf3::client::{self, ClientSpec};
use crate::engine::report::Role;
use crate::model::{RunDirection, RunFigures, RunProtocol, RunRole, RunStatus};
pub(crate) use crate::results::multi_summary::LegResult;
use crate::results::multi_summary::{Aggregate, LegParams, MultiParams, MultiSummary};
use crate::runs::context::{RunContext, Started};
use crate::runs::recorder::{Ended, Measured, Sampling};
use crate::spec::test::{parse_bitrate, TestDirection, TestRequest, TestSpec};
use crate::store::{NewRun, RunRow};
use serde::Deserialize;
use std::sync::Arc;
use tokio::sync::Notify;

/// Most legs in one run.
pub(crate) const MAX_LEGS: usize = 8;

/// A multi-port run as the web form and the API send it: one test request per leg,
/// each with its board port (`bind`) set.
#[derive(Debug, Clone, Deserialize, Default)]
pub(crate) struct MultiRequest {
    pub legs: Vec<TestRequest>,
}

/// The legs of a web form or an API request read into typed specs ([`TestRequest::parse`]);
/// an error names the leg ("leg 2: …").
pub(crate) fn parse_legs(legs: &[TestRequest]) -> Result<Vec<TestSpec>, String> {
    legs.iter()
        .enumerate()
        .map(|(i, l)| l.parse().map_err(|e| format!("leg {}: {e}", i + 1)))
        .collect()
}

/// Check the legs: 2..=8 legs, each valid and bound to a board port, no port used twice.
/// Returns the client specs in order, or one message naming the leg at fault.
pub(crate) fn specs(
    legs: &[TestSpec],
    ports: &[crate::board::Port],
) -> Result<Vec<ClientSpec>, String> {
    if legs.len() < 2 {
        return Err(format!(
            "a multi-port run needs at least 2 legs, got {}",
            legs.len()
        ));
    }
    if legs.len() > MAX_LEGS {
        return Err(format!(
            "a multi-port run has at most {MAX_LEGS} legs, got {}",
            legs.len()
        ));
    }
    let mut out: Vec<ClientSpec> = Vec::new();
    for (i, l) in legs.iter().enumerate() {
        let n = i + 1;
        if l.bind.as_deref().map(str::trim).unwrap_or("").is_empty() {
            return Err(format!("leg {n}: choose the board port it runs on"));
        }
        let s = l
            .to_client_spec(ports)
            .map_err(|e| format!("leg {n}: {e}"))?;
        s.validate().map_err(|e| format!("leg {n}: {e}"))?;
        if let Some(prev) = out
            .iter()
            .position(|o| o.sock.bind_dev.is_some() && o.sock.bind_dev == s.sock.bind_dev)
        {
            return Err(format!(
                "leg {n}: port {} is already used by leg {}",
                s.sock.bind_dev.clone().unwrap_or_default(),
                prev + 1
            ));
        }
        out.push(s);
    }
    Ok(out)
}

/// The legs' common value, else `mixed` (a multi run's protocol or direction).
fn same_or_mixed<T: PartialEq + Clone>(v: impl Iterator<Item = T>, mixed: T) -> T {
    let v: Vec<T> = v.collect();
    match v.first() {
        Some(f) if v.iter().all(|x| x == f) => f.clone(),
        _ => mixed,
    }
}

/// One leg's result from its stored row.
fn leg_result(r: &RunRow) -> LegResult {
    LegResult {
        id: r.id,
        port: r.bind_dev.clone().unwrap_or_default(),
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        protocol: r.protocol.clone(),
        direction: r.direction.clone(),
        status: r.status,
        sender_bps: r.sender_bps,
        receiver_bps: r.receiver_bps,
        bytes: r.bytes,
        retransmits: r.retransmits,
        lost_percent: r.lost_percent,
        error: r.error.clone(),
    }
}

/// The multi run's status, figures, summary and error from its legs' stored rows: completed
/// when every leg completed; failed when any failed (its error named); else aborted. Bitrates
/// and bytes are sums over the legs (the board's aggregate); a sum is `None` when a leg lacks
/// the figure.
pub(crate) fn aggregate(legs: &[RunRow]) -> (RunStatus, RunFigures, MultiSummary, Option<String>) {
    let results: Vec<LegResult> = legs.iter().map(leg_result).collect();
    let sum_f = |f: fn(&LegResult) -> Option<f64>| -> Option<f64> {
        results.iter().map(f).sum::<Option<f64>>()
    };
    let sum_i = |f: fn(&LegResult) -> Option<i64>| -> Option<i64> {
        results.iter().map(f).sum::<Option<i64>>()
    };
    let figures = RunFigures {
        sender_bps: sum_f(|l| l.sender_bps),
        receiver_bps: sum_f(|l| l.receiver_bps),
        bytes: sum_i(|l| l.bytes),
        retransmits: results
            .iter()
            .any(|l| l.retransmits.is_some())
            .then(|| results.iter().filter_map(|l| l.retransmits).sum()),
        ..Default::default()
    };
    let failed: Vec<String> = results
        .iter()
        .enumerate()
        .filter(|(_, l)| l.status != RunStatus::Completed)
        .map(|(i, l)| {
            format!(
                "leg {} ({} → {}): {}",
                i + 1,
                l.port,
                l.peer,
                l.error.clone().unwrap_or_else(|| l.status.to_string())
            )
        })
        .collect();
    let status = if results.is_empty() {
        RunStatus::Failed
    } else if results.iter().all(|l| l.status == RunStatus::Completed) {
        RunStatus::Completed
    } else if results.iter().any(|l| l.status == RunStatus::Failed) {
        RunStatus::Failed
    } else {
        RunStatus::Aborted
    };
    let error = (!failed.is_empty()).then(|| failed.join("; "));
    let summary = MultiSummary {
        legs: results,
        aggregate: Aggregate {
            sender_bps: figures.sender_bps,
            receiver_bps: figures.receiver_bps,
            bytes: figures.bytes,
        },
    };
    (status, figures, summary, error)
}

/// Record and start a multi-port run: every leg starts at once, each bound to its port.
/// Returns the multi run's id and a handle that resolves when every leg has ended.
/// Stopping the multi run ([`crate::runs::registry::RunRegistry::stop`]) stops every leg.
pub(crate) fn start_multi(
    ctx: &RunContext,
    legs: Vec<ClientSpec>,
    suite_id: Option<i64>,
) -> Result<Started, String> {
    if legs.len() < 2 || legs.len() > MAX_LEGS {
        return Err(format!(
            "a multi-port run needs 2..{MAX_LEGS} legs, got {}",
            legs.len()
        ));
    }
    for (i, l) in legs.iter().enumerate() {
        l.validate().map_err(|e| format!("leg {}: {e}", i + 1))?;
    }
    let ports: Vec<String> = legs
        .iter()
        .filter_map(|l| l.sock.bind_dev.clone())
        .collect();
    let mut peers: Vec<String> = legs.iter().map(|l| l.host.clone()).collect();
    peers.dedup();
    let params = MultiParams {
        time: legs.iter().map(|l| l.params.time).max().unwrap_or(0),
        parallel: legs.iter().map(|l| l.params.parallel).sum(),
        legs: legs
            .iter()
            .map(|l| LegParams {
                port: l.sock.bind_dev.clone(),
                peer: l.host.clone(),
                peer_port: l.port,
                direction: client::run_direction(l.params.direction, Role::Client),
                params: Some(l.params.clone()),
            })
            .collect(),
    };
    let cancel = Arc::new(Notify::new());
    ctx.start(
        &NewRun {
            role: RunRole::Client,
            protocol: same_or_mixed(
                legs.iter().map(|l| RunProtocol::from(l.params.protocol)),
                RunProtocol::Mixed,
            ),
            peer_host: peers.join(", "),
            peer_port: legs[0].port,
            local_host: String::new(),
            local_port: 0,
            bind_dev: Some(ports.join(",")),
            direction: same_or_mixed(
                legs.iter()
                    .map(|l| client::run_direction(l.params.direction, Role::Client)),
                RunDirection::Mixed,
            ),
            params: params.to_value(),
            suite_id,
            kind: crate::model::RunKind::Multi,
            parent_id: None,
        },
        Sampling::Ports(ports),
        Some(cancel.clone()),
        // Legs start here, before the parent's task: a leg that cannot start stops the
        // others and fails the run.
        move |ctx, rec| {
            let id = rec.id();
            let mut handles = Vec::new();
            let mut leg_cancels = Vec::new();
            let mut start_error = None;
            for (i, spec) in legs.into_iter().enumerate() {
                let c = Arc::new(Notify::new());
                match crate::runs::iperf3::start_leg(&ctx, spec, id, c.clone()) {
                    Ok((_, h)) => {
                        handles.push(h);
                        leg_cancels.push(c);
                    }
                    Err(e) => {
                        start_error = Some(format!("leg {}: {e}", i + 1));
                        break;
                    }
                }
            }
            if start_error.is_some() {
                for c in &leg_cancels {
                    c.notify_one();
                }
            }
            async move {
                let stopper = {
                    let cancel = cancel.clone();
                    let leg_cancels = leg_cancels.clone();
                    crate::engine::task::spawn(async move {
                        cancel.notified().await;
                        for c in &leg_cancels {
                            c.notify_one();
                        }
                    })
                };
                for h in handles {
                    let _ = h.await;
                }
                stopper.abort();
                let legs = ctx.store().children(id).unwrap_or_default();
                let (mut status, figures, summary, mut error) = aggregate(&legs);
                if let Some(e) = start_error {
                    status = RunStatus::Failed;
                    error = Some(e);
                }
                Ended {
                    status,
                    measured: Measured::Figures(figures),
                    summary: Some(summary.to_value()),
                    error,
                }
            }
        },
    )
}

/// Parse a CLI leg: `PORT=HOST[:PEERPORT][,send|receive|bidir][,tcp|udp][,b=RATE][,P=N]`,
/// e.g. `eth0=192.0.2.2`, `eth1=198.51.100.2:5202,receive,udp,b=100M`. Options not given come
/// from `base` (the command's common flags, already typed); ranges are checked by [`specs`].
pub(crate) fn parse_leg(s: &str, base: &TestSpec) -> Result<TestSpec, String> {
    let (port, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("leg '{s}': expected PORT=HOST[,options]"))?;
    let mut parts = rest.split(',');
    let target = parts.next().unwrap_or("").trim();
    let mut r = TestSpec {
        bind: Some(port.trim().to_string()).filter(|p| !p.is_empty()),
        ..base.clone()
    };
    // HOST:PORT, but an IPv6 address keeps its colons ([v6]:port for a port).
    let (host, peer_port) = if let Some(v6) = target.strip_prefix('[') {
        let (h, p) = v6
            .split_once(']')
            .ok_or_else(|| format!("leg '{s}': missing ']'"))?;
        (h, p.strip_prefix(':'))
    } else if target.matches(':').count() == 1 {
        let (h, p) = target.split_once(':').unwrap_or((target, ""));
        (h, Some(p))
    } else {
        (target, None)
    };
    r.host = host.to_string();
    if let Some(p) = peer_port {
        r.port = Some(
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("leg '{s}': port must be 1..65535, got '{p}'"))?,
        );
    }
    for o in parts.map(str::trim).filter(|o| !o.is_empty()) {
        match o {
            "send" => r.direction = TestDirection::Send,
            "receive" => r.direction = TestDirection::Receive,
            "bidir" => r.direction = TestDirection::Bidir,
            "tcp" => r.udp = false,
            "udp" => r.udp = true,
            _ => {
                if let Some(b) = o.strip_prefix("b=") {
                    r.bitrate = Some(parse_bitrate(b).map_err(|e| format!("leg '{s}': {e}"))?);
                } else if let Some(n) = o.strip_prefix("P=") {
                    r.parallel =
                        Some(n.parse().map_err(|_| {
                            format!("leg '{s}': P must be a whole number, got '{n}'")
                        })?);
                } else {
                    return Err(format!(
                        "leg '{s}': unknown option '{o}' (send, receive, bidir, tcp, udp, b=RATE, P=N)"
                    ));
                }
            }
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::Port;
    use crate::model::{RunDirection, RunProtocol};
    use serde_json::json;

    fn ports() -> Vec<Port> {
        ["eth0", "eth1"]
            .iter()
            .map(|n| Port {
                name: n.to_string(),
                up: true,
                running: true,
                loopback: false,
                addresses: vec![],
            })
            .collect()
    }

    fn leg(port: &str, host: &str) -> TestSpec {
        TestSpec {
            host: host.into(),
            bind: Some(port.into()).filter(|p: &String| !p.is_empty()),
            ..Default::default()
        }
    }

    #[test]
    fn legs_are_checked() {
        let p = ports();
        assert!(specs(&[leg("eth0", "192.0.2.2")], &p)
            .unwrap_err()
            .contains("at least 2 legs"));
        let ok = specs(&[leg("eth0", "192.0.2.2"), leg("eth1", "198.51.100.2")], &p).unwrap();
        assert_eq!(ok[1].sock.bind_dev.as_deref(), Some("eth1"));
        assert_eq!(
            specs(&[leg("eth0", "192.0.2.2"), leg("eth0", "198.51.100.2")], &p).unwrap_err(),
            "leg 2: port eth0 is already used by leg 1"
        );
        assert_eq!(
            specs(&[leg("eth0", "192.0.2.2"), leg("", "198.51.100.2")], &p).unwrap_err(),
            "leg 2: choose the board port it runs on"
        );
        let bad = specs(&[leg("eth0", "192.0.2.2"), leg("eth1", "-x")], &p).unwrap_err();
        assert!(bad.starts_with("leg 2: "), "{bad}");
        let nine: Vec<TestSpec> = (0..9).map(|i| leg(&format!("e{i}"), "h")).collect();
        assert!(specs(&nine, &p).unwrap_err().contains("at most 8"));
    }

    #[test]
    fn cli_legs() {
        let base = TestSpec {
            duration: Some(5),
            ..Default::default()
        };
        let l = parse_leg("eth1=198.51.100.2:5202,receive,udp,b=100M,P=2", &base).unwrap();
        assert_eq!(l.bind.as_deref(), Some("eth1"));
        assert_eq!(l.host, "198.51.100.2");
        assert_eq!(l.port, Some(5202));
        assert_eq!(l.direction, TestDirection::Receive);
        assert!(l.udp);
        assert_eq!(l.bitrate, Some(100_000_000));
        assert_eq!(l.parallel, Some(2));
        assert_eq!(l.duration, Some(5));
        let v6 = parse_leg("eth0=[2001:db8::2]:5201", &base).unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("2001:db8::2", Some(5201)));
        let v6b = parse_leg("eth0=2001:db8::2", &base).unwrap();
        assert_eq!((v6b.host.as_str(), v6b.port), ("2001:db8::2", None));
        assert!(parse_leg("eth0", &base).unwrap_err().contains("PORT=HOST"));
        assert!(parse_leg("eth0=h,fast", &base)
            .unwrap_err()
            .contains("unknown option 'fast'"));
        assert!(parse_leg("eth0=h:0", &base)
            .unwrap_err()
            .contains("port must be 1..65535, got '0'"));
        assert!(parse_leg("eth0=h,P=two", &base)
            .unwrap_err()
            .contains("P must be a whole number, got 'two'"));
        assert!(parse_leg("eth0=h,b=fast", &base).is_err());
        // A leg's typed values reach the client spec as they are, and the ranges are checked
        // there with the same messages as the form's.
        let p = ports();
        let two = [
            parse_leg("eth0=192.0.2.2,udp,b=0", &base).unwrap(),
            parse_leg("eth1=198.51.100.2,P=2", &base).unwrap(),
        ];
        let s = specs(&two, &p).unwrap();
        assert_eq!((s[0].params.bandwidth, s[0].params.time), (0, 5));
        assert_eq!(s[1].params.parallel, 2);
        let many = [
            parse_leg("eth0=192.0.2.2", &base).unwrap(),
            parse_leg("eth1=198.51.100.2,P=200", &base).unwrap(),
        ];
        assert!(specs(&many, &p).unwrap_err().starts_with("leg 2: parallel"));
    }

    #[test]
    fn form_legs_are_read_with_their_number() {
        let reqs = [
            TestRequest {
                host: "192.0.2.2".into(),
                bind: Some("eth0".into()),
                duration: Some("3".into()),
                ..Default::default()
            },
            TestRequest {
                host: "198.51.100.2".into(),
                bind: Some("eth1".into()),
                duration: Some("three".into()),
                ..Default::default()
            },
        ];
        assert_eq!(
            parse_legs(&reqs).unwrap_err(),
            "leg 2: duration must be a whole number, got 'three'"
        );
        let ok = parse_legs(&reqs[..1]).unwrap();
        assert_eq!(
            (ok[0].duration, ok[0].bind.as_deref()),
            (Some(3), Some("eth0"))
        );
    }

    fn row(id: i64, port: &str, status: &str, s: Option<f64>, r: Option<f64>) -> RunRow {
        RunRow {
            id,
            role: RunRole::Client,
            protocol: RunProtocol::Tcp,
            status: RunStatus::parse(status).expect("a status word"),
            peer_host: "192.0.2.2".into(),
            peer_port: 5201,
            local_host: String::new(),
            local_port: 0,
            bind_dev: Some(port.into()),
            direction: RunDirection::Send,
            params: json!({}),
            started_at: 0,
            ended_at: None,
            error: (status == "failed").then(|| "connection refused".to_string()),
            sender_bps: s,
            receiver_bps: r,
            bytes: r.map(|b| (b / 8.0 * 10.0) as i64),
            retransmits: Some(2),
            lost_packets: None,
            total_packets: None,
            lost_percent: None,
            jitter_ms: None,
            suite_id: None,
            kind: crate::model::RunKind::Iperf3,
            parent_id: Some(9),
            summary: serde_json::Value::Null,
            invalid: Vec::new(),
        }
    }

    #[test]
    fn aggregate_sums_legs() {
        let legs = [
            row(1, "eth0", "completed", Some(941e6), Some(940e6)),
            row(2, "eth1", "completed", Some(500e6), Some(499e6)),
        ];
        let (st, f, sum, err) = aggregate(&legs);
        assert_eq!(st, RunStatus::Completed);
        assert_eq!(f.sender_bps, Some(1441e6));
        assert_eq!(f.receiver_bps, Some(1439e6));
        assert_eq!(f.bytes, Some(1_175_000_000 + 623_750_000));
        assert_eq!(f.retransmits, Some(4));
        assert_eq!(sum.legs[1].port, "eth1");
        assert_eq!(err, None);
        let legs = [
            row(1, "eth0", "completed", Some(941e6), Some(940e6)),
            row(2, "eth1", "failed", None, None),
        ];
        let (st, f, _, err) = aggregate(&legs);
        assert_eq!(st, RunStatus::Failed);
        assert_eq!(f.receiver_bps, None, "no sum when a leg has no figure");
        assert_eq!(
            err.as_deref(),
            Some("leg 2 (eth1 → 192.0.2.2:5201): connection refused")
        );
        let legs = [
            row(1, "eth0", "completed", Some(1.0), Some(1.0)),
            row(2, "eth1", "aborted", Some(1.0), Some(1.0)),
        ];
        assert_eq!(aggregate(&legs).0, RunStatus::Aborted);
    }
}
