//! The suite step of kind `latency`: a latency-under-load run planned from a step's fields.
//!
//! The step takes the field names of `POST /api/runs/latency` (`load`, `streams`, `idle`,
//! `loaded`, `interval`, `congestion`); the peer host, its iperf3 port and the board port come
//! from the suite run like every step's. The fields go through the one latency parser
//! ([`LatencyForm::to_spec`]), so a suite step and the API accept and refuse the same values.
//!
//! Seconds: a latency step has no `time`; the definition's `time` (the seconds of iperf3
//! steps) does not apply to it, a run-time `time` override (a quick check of a long suite)
//! sets its loaded phase. The iperf3 fields `direction`, `bitrate`, `length`, `window` and
//! `rates` are not fields of [`LatencyStep`], so reading a definition refuses them on a
//! latency step (and the latency fields on the other kinds), naming the step.

use crate::spec::latency::{LatencyForm, LatencySpec, Load};
use crate::spec::suite::{LatencyStep, RunTarget};
use crate::spec::test::TestRequest;

/// The latency spec of step `st` against `base` (its `host`, `port` and `bind` are the suite
/// run's, the port the definition's). `run` is the suite run's target: its typed port replaces
/// the definition's, its seconds set the loaded phase, s. `ports` are the board's ports when
/// the board port is to be checked (empty when only validating). Errors name the field, as
/// the API's do.
pub(crate) fn plan_step(
    st: &LatencyStep,
    base: &TestRequest,
    run: &RunTarget,
    ports: &[crate::board::Port],
) -> Result<LatencySpec, String> {
    let text = |v: &Option<String>| v.clone().map(serde_json::Value::String);
    // The step's own fields, checked even when the run overrides its loaded phase.
    let mut spec = LatencyForm {
        csrf: None,
        host: base.host.clone(),
        port: text(&base.port),
        load: st.load.clone(),
        streams: text(&st.streams),
        idle: text(&st.idle),
        loaded: text(&st.loaded),
        interval: text(&st.interval),
        bind: base.bind.clone(),
        congestion: st.congestion.clone(),
    }
    .to_spec()?;
    if let Some(p) = run.port {
        spec.port = p;
    }
    if let Some(s) = run.time {
        spec.loaded_s = s;
    }
    spec.validate()?;
    if let Some(d) = &spec.bind_dev {
        if !ports.iter().any(|p| &p.name == d) {
            return Err(format!("the board has no port '{d}'"));
        }
    }
    Ok(spec)
}

/// The board's view of the load as the run and the plan store it: send / receive / bidir.
pub(crate) fn board_direction(l: Load) -> &'static str {
    match l {
        Load::Up => "send",
        Load::Down => "receive",
        Load::Both => "bidir",
    }
}

/// The default row name of a latency step: "Latency down", "Latency both ×4".
pub(crate) fn label(s: &LatencySpec) -> String {
    let mut l = format!("Latency {}", s.load.word());
    if s.streams > 1 {
        l.push_str(&format!(" ×{}", s.streams));
    }
    l
}

#[cfg(test)]
mod tests {
    use crate::spec::latency::Load;
    use crate::spec::suite::{PlannedRun, RunTarget, SuiteDef};

    fn def(steps: serde_json::Value) -> Result<SuiteDef, String> {
        SuiteDef::from_json(
            serde_json::json!({"name": "t", "port": 5202, "time": 3, "steps": steps})
                .to_string()
                .as_bytes(),
        )
    }

    fn target(time: Option<u32>) -> RunTarget {
        RunTarget {
            host: "192.0.2.2".into(),
            time,
            ..Default::default()
        }
    }

    #[test]
    fn latency_step_is_planned_with_the_api_fields() {
        let d = def(serde_json::json!([
            {"kind": "tcp"},
            {"kind": "latency", "load": "both", "streams": 2, "idle": 1, "loaded": "4",
             "interval": 20, "congestion": "cubic",
             "thresholds": {"max_latency_increase_ms": 30}}
        ]))
        .unwrap();
        let p = d.plan(&target(None), &[]).unwrap();
        assert_eq!(p.len(), 2);
        let PlannedRun::Latency(l) = &p[1].spec else {
            panic!("step 2 is not a latency test")
        };
        assert_eq!(
            (l.host.as_str(), l.port, l.load, l.streams),
            ("192.0.2.2", 5202, Load::Both, 2)
        );
        assert_eq!((l.idle_s, l.loaded_s, l.interval_ms), (1, 4, 20));
        assert_eq!(l.congestion.as_deref(), Some("cubic"));
        assert_eq!(p[1].label, "Latency both ×2");
        // The definition's time is for iperf3 steps only; 1 + 4 + 1 s.
        assert_eq!(p[0].spec.seconds(), 3);
        assert_eq!(p[1].spec.seconds(), 6);
        let e = p[1].entry();
        assert_eq!(e.kind.as_deref(), Some("latency"));
        assert_eq!((e.direction.as_str(), e.time), ("bidir", 6));
        assert_eq!(e.thresholds.unwrap().max_latency_increase_ms, Some(30.0));
        // A run-time time override sets the loaded phase.
        let q = d.plan(&target(Some(2)), &[]).unwrap();
        let PlannedRun::Latency(l) = &q[1].spec else {
            panic!("step 2 is not a latency test")
        };
        assert_eq!((l.idle_s, l.loaded_s), (1, 2));
        // Defaults are the API's: both, 4 streams each way, 5 / 10 / 5 s, 10 ms.
        let d = def(serde_json::json!([{"kind": "latency"}])).unwrap();
        let PlannedRun::Latency(l) = &d.plan(&target(None), &[]).unwrap()[0].spec else {
            panic!("not a latency test")
        };
        assert_eq!(
            (l.load, l.streams, l.idle_s, l.loaded_s, l.interval_ms),
            (Load::Both, 4, 5, 10, 10)
        );
    }

    #[test]
    fn bad_latency_steps_are_refused_naming_the_step() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (
                serde_json::json!([{"kind": "tcp"}, {"kind": "latency", "load": "sideways"}]),
                "step 2 (latency): load must be up, down or both, not 'sideways'",
            ),
            (
                serde_json::json!([{"kind": "latency", "streams": 33}]),
                "step 1 (latency): streams must be 1..32 (-P)",
            ),
            (
                serde_json::json!([{"kind": "latency", "loaded": 0}]),
                "step 1 (latency): loaded phase must be 1..3600 s (--loaded)",
            ),
            (
                serde_json::json!([{"kind": "latency", "idle": "x"}]),
                "step 1 (latency): idle must be a whole number, not 'x'",
            ),
            (
                serde_json::json!([{"kind": "latency", "interval": 0}]),
                "step 1 (latency): probe interval must be 1..1000 ms (-i)",
            ),
            (
                serde_json::json!([{"kind": "latency", "congestion": "a b"}]),
                "step 1 (latency): 'a b' is not a congestion control name (-C)",
            ),
            (
                serde_json::json!([{"kind": "latency", "time": 5}]),
                "step 1 (latency): a latency step has no 'time'",
            ),
            (
                serde_json::json!([{"kind": "latency", "bitrate": "10M"}]),
                "step 1 (latency): a latency step has no 'bitrate'",
            ),
            (
                serde_json::json!([{"kind": "tcp", "load": "up"}]),
                "step 1 (tcp): a tcp step has no 'load' (only latency steps have it)",
            ),
            (
                serde_json::json!([{"kind": "udp-ladder", "idle": 1}]),
                "step 1 (udp-ladder): a udp-ladder step has no 'idle' (only latency steps have it)",
            ),
            (
                serde_json::json!([{"kind": "latency", "lod": "up"}]),
                "unknown field `lod`",
            ),
            (
                serde_json::json!([{"kind": "latency", "thresholds": {"max_latency_increase_ms": -1}}]),
                "step 1 (latency): thresholds: max_latency_increase_ms must not be negative",
            ),
        ];
        for (steps, want) in cases {
            let e = def(steps.clone()).unwrap_err();
            assert!(e.contains(want), "{e} should contain {want} ({steps})");
        }
        // A bad loaded phase stays bad when a run overrides the time.
        let d = SuiteDef {
            name: "t".into(),
            steps: vec![crate::spec::suite::Step::Latency(
                crate::spec::suite::LatencyStep {
                    loaded: Some("0".into()),
                    ..Default::default()
                },
            )],
            ..Default::default()
        };
        assert!(d
            .plan(&target(Some(2)), &[])
            .unwrap_err()
            .contains("loaded phase"));
        // An unknown board port is refused when the run is planned on the board.
        let d = SuiteDef::from_json(br#"{"name": "t", "steps": [{"kind": "latency"}]}"#).unwrap();
        let t = RunTarget {
            bind: Some("eth9".into()),
            ..target(None)
        };
        assert_eq!(
            d.plan(&t, &[]).unwrap_err(),
            "step 1 (latency): the board has no port 'eth9'"
        );
    }
}
