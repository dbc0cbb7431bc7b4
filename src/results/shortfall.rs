//! The shortfall of a stored run (target / sent / received from its figures), with the rule
//! of [`crate::engine::shortfall`].

use crate::engine::shortfall::RateCheck;
use crate::store::RunRow;

/// The rate asked for by a stored run, bits/s (all streams): iperf3 `bandwidth` × `parallel`,
/// iperf 2 `rate` × `parallel`, a forwarding run's peer test `bitrate` × `parallel` (what
/// the peer agent was asked to send through the board), read through the kind's typed params
/// ([`crate::results::asked::Asked`]); `None` when unpaced.
pub(crate) fn run_target_bps(run: &RunRow) -> Option<f64> {
    crate::results::asked::Asked::of(run).total_bps()
}

/// The rate check of a stored run from its figures (sender and receiver bits/s of the main
/// leg). `None` when the run was not paced or has no sender figure.
pub(crate) fn for_run(run: &RunRow) -> Option<RateCheck> {
    let target = run_target_bps(run)?;
    RateCheck::new(target, run.sender_bps?, run.receiver_bps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunStatus;
    use crate::model::{RunDirection, RunProtocol, RunRole};

    /// Issue 22 item 11: a forwarding UDP run has a target (the peer agent's `-b` × `-P`)
    /// and so a shortfall check, like a run the board made itself.
    #[test]
    fn forwarding_runs_have_a_target() {
        let mut r = RunRow {
            kind: crate::model::RunKind::Forward,
            protocol: RunProtocol::Udp,
            params: serde_json::json!({"test": {"host": "198.51.100.2", "udp": true, "bitrate": 100_000_000u64, "parallel": 2}, "nat": false}),
            sender_bps: Some(150e6),
            receiver_bps: Some(149e6),
            ..test_row()
        };
        assert_eq!(run_target_bps(&r), Some(200e6));
        let c = for_run(&r).unwrap();
        assert!(c.short);
        r.params =
            serde_json::json!({"test": {"host": "198.51.100.2", "udp": false}, "nat": false});
        assert_eq!(run_target_bps(&r), None);
    }

    fn test_row() -> RunRow {
        RunRow {
            id: 1,
            role: RunRole::Client,
            protocol: RunProtocol::Tcp,
            status: RunStatus::Completed,
            peer_host: "198.51.100.2".into(),
            peer_port: 5201,
            local_host: String::new(),
            local_port: 0,
            bind_dev: Some("eth0,eth1".into()),
            direction: RunDirection::Send,
            params: serde_json::Value::Null,
            started_at: 0,
            ended_at: Some(10_000),
            error: None,
            sender_bps: None,
            receiver_bps: None,
            bytes: None,
            retransmits: None,
            lost_packets: None,
            total_packets: None,
            lost_percent: None,
            jitter_ms: None,
            suite_id: None,
            kind: crate::model::RunKind::Iperf3,
            parent_id: None,
            summary: serde_json::Value::Null,
            invalid: Vec::new(),
        }
    }
}
