//! What a stored run asked for — its target bitrate, streams, duration, UDP payload length and
//! label — read once from its `params` through the kind's own typed params, by one exhaustive
//! match on the kind: the result tables, the comparison notes, the shortfall check, the
//! framing analysis and the runs list read these instead of the params' keys.

use crate::model::RunKind;
use crate::results::forward_params::{ForwardParams, MonitorParams};
use crate::results::iperf2_summary::Iperf2Params;
use crate::results::multi_summary::MultiParams;
use crate::store::RunRow;
use serde::Deserialize;

/// What a run asked for. A figure its kind does not have, or its params do not say, is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Asked {
    /// Target bitrate per stream, bits/s (iperf3 `-b`, iperf 2 `-b`, a forwarding run's
    /// peer test `bitrate`); `None` unpaced (0) or not said.
    pub per_stream_bps: Option<u64>,
    /// Streams (iperf3 / iperf 2 `-P`, a multi-port run's over every leg, a forwarding run's
    /// peer test `parallel`); `None` when not said (or 0).
    pub parallel: Option<u64>,
    /// Asked duration, s (iperf 2's may be fractional); `None` when not said or 0 (a
    /// byte- or block-limited test).
    pub time_s: Option<f64>,
    /// UDP payload length, bytes (iperf3 / iperf 2 `-l`); `None` when not said or 0.
    pub len: Option<u32>,
    /// The run's label (a monitor run's, trimmed); `None` when empty or not kept.
    pub label: Option<String>,
}

/// The iperf3 run's params as far as these figures go: the engine's `Params` keys, each
/// defaulting on its own (a row written by hand or a partial import holds only some of
/// them, e.g. `{"time": 10}`, which a whole `Params` does not read).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Iperf3Asked {
    bandwidth: u64,
    parallel: u64,
    time: f64,
    len: u64,
}

impl Asked {
    /// `r.params` read through its kind's typed params (a latency run: its TCP streams per
    /// direction). The kinds that ask for none of these (HTTP, sink/source, RFC 2544) give
    /// all `None`.
    pub(crate) fn of(r: &RunRow) -> Asked {
        let nonzero = |n: u64| (n > 0).then_some(n);
        let secs = |t: f64| (t.is_finite() && t > 0.0).then_some(t);
        let len = |l: u64| u32::try_from(l).ok().filter(|l| *l > 0);
        match r.kind {
            RunKind::Iperf3 => {
                let p = Iperf3Asked::deserialize(&r.params).unwrap_or_default();
                Asked {
                    per_stream_bps: nonzero(p.bandwidth),
                    parallel: nonzero(p.parallel),
                    time_s: secs(p.time),
                    len: len(p.len),
                    label: None,
                }
            }
            RunKind::Iperf2 => {
                let p = Iperf2Params::of_params(&r.params);
                Asked {
                    per_stream_bps: nonzero(p.rate),
                    parallel: nonzero(p.parallel),
                    time_s: secs(p.time),
                    len: len(p.len),
                    label: None,
                }
            }
            RunKind::Multi => {
                let p = MultiParams::of_params(&r.params);
                Asked {
                    parallel: nonzero(u64::from(p.parallel)),
                    time_s: secs(f64::from(p.time)),
                    ..Asked::default()
                }
            }
            RunKind::Forward => {
                let t = ForwardParams::of_params(&r.params).test;
                Asked {
                    per_stream_bps: t.as_ref().and_then(|t| t.bitrate).and_then(nonzero),
                    parallel: t
                        .as_ref()
                        .and_then(|t| t.parallel)
                        .and_then(|n| nonzero(u64::from(n))),
                    ..Asked::default()
                }
            }
            RunKind::Monitor => Asked {
                label: Some(MonitorParams::of_params(&r.params).label.trim().to_string())
                    .filter(|l| !l.is_empty()),
                ..Asked::default()
            },
            RunKind::Latency => Asked {
                parallel: crate::results::latency::StoredLatencyParams::of_params(&r.params)
                    .streams
                    .and_then(nonzero),
                ..Asked::default()
            },
            RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Rfc2544 => Asked::default(),
        }
    }

    /// The rate asked for over all streams, bits/s: per stream × streams (1 when not said);
    /// `None` unpaced.
    pub(crate) fn total_bps(&self) -> Option<f64> {
        let per = self.per_stream_bps?;
        Some(per as f64 * self.parallel.unwrap_or(1) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(kind: RunKind, params: serde_json::Value) -> RunRow {
        use crate::model::{RunDirection, RunProtocol, RunRole, RunStatus};
        RunRow {
            id: 1,
            role: RunRole::Client,
            protocol: RunProtocol::Tcp,
            status: RunStatus::Completed,
            peer_host: "198.51.100.2".into(),
            peer_port: 5201,
            local_host: "198.51.100.1".into(),
            local_port: 40000,
            bind_dev: None,
            direction: RunDirection::Send,
            params,
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
            kind,
            parent_id: None,
            summary: serde_json::Value::Null,
            invalid: Vec::new(),
        }
    }

    /// Each kind's params read through its own type: the stored shapes of an iperf3 run (a
    /// whole one and a hand-written `{"time": 10}`), an iperf 2 client and served run, a
    /// multi-port run, a forwarding run's peer test, a monitor run's label; HTTP and latency
    /// runs ask for none of these.
    #[test]
    fn each_kind_s_params_read_through_its_type() {
        let whole = serde_json::to_value(crate::engine::params::Params {
            bandwidth: 100_000_000,
            parallel: 4,
            time: 30,
            len: 1_448,
            ..Default::default()
        })
        .unwrap();
        let a = Asked::of(&row(RunKind::Iperf3, whole));
        assert_eq!(
            (a.per_stream_bps, a.parallel, a.time_s, a.len),
            (Some(100_000_000), Some(4), Some(30.0), Some(1_448))
        );
        assert_eq!(a.total_bps(), Some(400_000_000.0));
        let hand = Asked::of(&row(RunKind::Iperf3, json!({"time": 10})));
        assert_eq!(
            (
                hand.per_stream_bps,
                hand.parallel,
                hand.time_s,
                hand.total_bps()
            ),
            (None, None, Some(10.0), None)
        );
        let ip2 = Asked::of(&row(
            RunKind::Iperf2,
            json!({"rate": 5_000_000u64, "len": 1470, "time": 2.5, "bytes": 0, "parallel": 2, "return": "dual"}),
        ));
        assert_eq!(
            (ip2.total_bps(), ip2.time_s, ip2.len),
            (Some(10_000_000.0), Some(2.5), Some(1_470))
        );
        let multi = Asked::of(&row(
            RunKind::Multi,
            json!({"time": 5, "parallel": 6, "legs": []}),
        ));
        assert_eq!((multi.parallel, multi.time_s), (Some(6), Some(5.0)));
        let fwd = Asked::of(&row(
            RunKind::Forward,
            json!({"peer": "http://198.51.100.1:5280", "test": {"host": "198.51.100.2", "time": 10, "parallel": 2, "udp": true, "bitrate": 50_000_000u64}, "nat": false}),
        ));
        assert_eq!(fwd.total_bps(), Some(100_000_000.0));
        assert_eq!(fwd.time_s, None);
        let mon = Asked::of(&row(
            RunKind::Monitor,
            json!({"ports": ["eth0"], "label": " overnight ", "duration": null}),
        ));
        assert_eq!(mon.label.as_deref(), Some("overnight"));
        let get = Asked::of(&row(
            RunKind::HttpGet,
            json!({"url": "http://198.51.100.2/f", "connections": 4, "time": 3}),
        ));
        assert_eq!(get, Asked::default());
        // s52 tryout: History showed 1 stream for a latency run with 2 per direction.
        let lat = Asked::of(&row(
            RunKind::Latency,
            json!({"host": "198.51.100.2", "port": 5201, "load": "both", "streams": 2, "idle_s": 5, "loaded_s": 10, "interval_ms": 10, "bind_dev": null}),
        ));
        assert_eq!((lat.parallel, lat.time_s), (Some(2), None));
        // Not the kind's shape at all: nothing asked, no panic.
        assert_eq!(
            Asked::of(&row(RunKind::Iperf2, json!("x"))),
            Asked::default()
        );
    }
}
