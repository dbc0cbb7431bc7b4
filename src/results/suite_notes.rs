//! Notes for the compare page when suites are compared that were not run alike: a different
//! number of steps or other step kinds, other step durations, peer ports or board ports. The
//! figures are still shown; the notes say why they may not be comparable (issue 12).

use crate::results::suite_table::{StepResult, SuiteResult};

/// One line per property in which suites `results` differ, in this order: number of steps,
/// step kinds ("TCP send", "UDP receive", in step order), step durations (seconds), peer
/// ports, board ports. Each line names every suite's value, e.g. "Step durations differ:
/// suite 4 10 s, suite 5 30 s." A suite with several values lists them in step order joined by
/// " / " ("10 s / 30 s"). Steps without a known value (not run yet, no port) are left out of
/// that property; a suite with none at all is not compared on it. Empty when fewer than two
/// suites are given or all agree.
pub(crate) fn suite_differences(results: &[SuiteResult]) -> Vec<String> {
    if results.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let count = |r: &SuiteResult| {
        Some(match r.steps.len() {
            1 => "1 step".to_string(),
            n => format!("{n} steps"),
        })
    };
    note(&mut out, "Numbers of steps", results, count, ", ");
    let kinds = |r: &SuiteResult| {
        let k: Vec<String> = r
            .steps
            .iter()
            .map(|s| format!("{} {}", s.protocol, s.direction))
            .collect();
        (!k.is_empty()).then(|| k.join(", "))
    };
    note(&mut out, "Step kinds", results, kinds, "; ");
    note(
        &mut out,
        "Step durations",
        results,
        |r| distinct(&r.steps, |s| s.duration_s.map(|d| format!("{d} s"))),
        ", ",
    );
    note(
        &mut out,
        "Peer ports",
        results,
        |r| distinct(&r.steps, |s| peer_port(&s.peer)),
        ", ",
    );
    note(
        &mut out,
        "Board ports",
        results,
        |r| {
            distinct(&r.steps, |s| {
                Some(s.board_port.clone()).filter(|p| !p.is_empty())
            })
        },
        ", ",
    );
    out
}

/// Push "`name` differ: suite 4 `a`, suite 5 `b`." when the known values are not all equal.
fn note(
    out: &mut Vec<String>,
    name: &str,
    results: &[SuiteResult],
    value: impl Fn(&SuiteResult) -> Option<String>,
    sep: &str,
) {
    let known: Vec<(i64, String)> = results
        .iter()
        .filter_map(|r| value(r).map(|v| (r.suite.id, v)))
        .collect();
    if known.len() < 2 || known.iter().all(|(_, v)| v == &known[0].1) {
        return;
    }
    let each: Vec<String> = known
        .iter()
        .map(|(id, v)| format!("suite {id} {v}"))
        .collect();
    out.push(format!("{name} differ: {}.", each.join(sep)));
}

/// The distinct known values of the steps, in step order, joined by " / "; None if none.
fn distinct(steps: &[StepResult], f: impl Fn(&StepResult) -> Option<String>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for v in steps.iter().filter_map(f) {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    (!seen.is_empty()).then(|| seen.join(" / "))
}

/// The port of a step's peer "host:port" ("[2001:db8::2]:5201" too); None without one.
fn peer_port(peer: &str) -> Option<String> {
    let (_, p) = peer.rsplit_once(':')?;
    p.parse::<u16>().ok().map(|p| p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SuiteRow;

    fn step(proto: &str, dir: &str, secs: f64, peer: &str, port: &str) -> StepResult {
        StepResult {
            label: format!("{proto} {dir}"),
            status: crate::model::StepStatus::Completed,
            protocol: crate::model::RunProtocol::parse(proto),
            direction: dir.into(),
            duration_s: Some(secs),
            peer: peer.into(),
            board_port: port.into(),
            ..Default::default()
        }
    }

    fn suite(id: i64, steps: Vec<StepResult>) -> SuiteResult {
        SuiteResult {
            suite: SuiteRow {
                id,
                name: "bench".into(),
                peer_host: "192.0.2.2".into(),
                status: crate::model::RunStatus::Completed,
                created_at: 1_764_504_000_000,
                ended_at: None,
            },
            label: String::new(),
            def_id: None,
            steps,
            verdict: None,
        }
    }

    #[test]
    fn alike_suites_get_no_note() {
        let a = || {
            vec![
                step("TCP", "send", 10.0, "192.0.2.2:5201", "eth0"),
                step("UDP", "receive", 10.0, "192.0.2.2:5201", "eth0"),
            ]
        };
        assert!(suite_differences(&[suite(4, a()), suite(5, a())]).is_empty());
        assert!(suite_differences(&[suite(4, a())]).is_empty());
    }

    #[test]
    fn durations_ports_and_steps_that_differ_are_named() {
        let s4 = suite(
            4,
            vec![
                step("TCP", "send", 10.0, "192.0.2.2:5201", "eth0"),
                step("UDP", "receive", 10.0, "192.0.2.2:5201", "eth0"),
            ],
        );
        let s5 = suite(
            5,
            vec![
                step("TCP", "send", 30.0, "[2001:db8::2]:5202", "eth1"),
                step("TCP", "receive", 5.0, "[2001:db8::2]:5202", "eth1"),
                step("UDP", "receive", 30.0, "[2001:db8::2]:5202", "eth1"),
            ],
        );
        assert_eq!(
            suite_differences(&[s4, s5]),
            [
                "Numbers of steps differ: suite 4 2 steps, suite 5 3 steps.",
                "Step kinds differ: suite 4 TCP send, UDP receive; \
                 suite 5 TCP send, TCP receive, UDP receive.",
                "Step durations differ: suite 4 10 s, suite 5 30 s / 5 s.",
                "Peer ports differ: suite 4 5201, suite 5 5202.",
                "Board ports differ: suite 4 eth0, suite 5 eth1.",
            ]
        );
    }

    #[test]
    fn steps_without_a_value_are_not_compared() {
        // Suite 6 has not run yet: its steps have no peer port and no board port.
        let mut pending = step("TCP", "send", 10.0, "192.0.2.2", "");
        pending.status = crate::model::StepStatus::Pending;
        let s4 = suite(4, vec![step("TCP", "send", 10.0, "192.0.2.2:5201", "eth0")]);
        let s6 = suite(6, vec![pending]);
        assert!(suite_differences(&[s4, s6]).is_empty());
    }
}
