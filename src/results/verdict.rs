//! PASS / FAIL of suite runs: each test row checked against its step's thresholds
//! ([`crate::spec::thresholds`]), and the suite judged from its rows. Used by the suite page,
//! the API, compare, the suite exports and `netperfd suite run` (exit code, JUnit, LAVA).
//!
//! Rules:
//! * a row whose test is still pending or running has no verdict yet, and neither has its
//!   suite;
//! * a row whose test failed, was stopped or was skipped fails ("the test failed: …");
//! * a completed row fails when any of its limits is broken; a limit that does not apply to
//!   the row is left out (loss and jitter are UDP figures, retransmits TCP, shortfall only for
//!   paced tests, the latency increase only latency runs), and a limit whose figure is unknown
//!   (no ceiling on a virtual port, no CPU samples) fails with the reason — a board farm must not pass on what it could not check;
//! * a suite with no thresholds on any row has no verdict; otherwise it passes when every row
//!   passes (rows without thresholds pass when their test completed).

use crate::model::{RunKind, StepStatus};
use crate::results::suite_table::{StepResult, SuiteResult};
use crate::spec::thresholds::Thresholds;
use serde::Serialize;

/// One limit checked against one row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Check {
    /// The threshold key, e.g. "min_ceiling_percent".
    pub key: &'static str,
    /// The measured figure in the unit of [`Check::units`] (`None` when unknown).
    pub value: Option<f64>,
    /// The limit in the same unit (for `min_ceiling_percent`: the bitrate it means, bits/s).
    pub limit: f64,
    /// "bits/s", "%", "ms" or "retransmits".
    pub units: &'static str,
    pub pass: bool,
    /// The check in words, e.g. "receiver bitrate 812.0 Mbit/s < 847.3 Mbit/s (90 % of the
    /// 941.5 Mbit/s ceiling)".
    pub text: String,
}

/// A row's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StepVerdict {
    pub pass: bool,
    /// Every limit checked (passed and failed), in [`crate::spec::thresholds::THRESHOLD_KEYS`]
    /// order.
    pub checks: Vec<Check>,
    /// Why the row failed, one sentence each (empty when it passed).
    pub reasons: Vec<String>,
}

/// A failing row of a suite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FailingRow {
    /// 1-based row number.
    pub index: usize,
    pub label: String,
    pub reasons: Vec<String>,
}

/// A suite run's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SuiteVerdict {
    /// "PASS" or "FAIL".
    pub result: &'static str,
    pub passed: usize,
    pub failed: usize,
    pub failing: Vec<FailingRow>,
}

impl SuiteVerdict {
    /// True for PASS.
    pub(crate) fn pass(&self) -> bool {
        self.result == "PASS"
    }
}

/// A number without needless decimals: 90, 0.1, 2.5.
fn n(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn is_udp(s: &StepResult) -> bool {
    s.protocol.is_udp()
}

/// Check one minimum (`min = true`) or maximum: value against limit, with the words.
#[allow(clippy::too_many_arguments)]
fn check(
    key: &'static str,
    what: &str,
    value: Option<f64>,
    limit: f64,
    units: &'static str,
    fmt: fn(f64) -> String,
    min: bool,
    note: &str,
) -> Check {
    let (pass, text) = match value {
        None => (false, format!("{what} unknown{note}")),
        Some(v) => {
            let pass = if min { v >= limit } else { v <= limit };
            let op = match (min, pass) {
                (true, true) => "≥",
                (true, false) => "<",
                (false, true) => "≤",
                (false, false) => ">",
            };
            (pass, format!("{what} {} {op} {}{note}", fmt(v), fmt(limit)))
        }
    };
    Check {
        key,
        value,
        limit,
        units,
        pass,
        text,
    }
}

/// Judge one row against `th`. `None` while its test is pending or running.
pub(crate) fn judge_step(s: &StepResult, th: &Thresholds) -> Option<StepVerdict> {
    if let Some(v) = by_status(s) {
        return v;
    }
    let mut checks = Vec::new();
    if let Some(f) = &s.rfc2544 {
        // An RFC 2544 run: its own limits and the board's CPU; the iperf3 ones do not apply.
        rfc2544_checks(&mut checks, f, th);
        if let Some(max) = th.max_cpu_percent {
            checks.push(cpu_check(s, max));
        }
        return Some(verdict_of(checks));
    }
    rate_checks(&mut checks, s, th);
    path_checks(&mut checks, s, th);
    Some(verdict_of(checks))
}

/// The verdict a row gets from its status alone: `Some(None)` while its test is pending or
/// running, `Some(Some(fail))` with the reason when it did not complete, `None` when it
/// completed (its figures are judged).
fn by_status(s: &StepResult) -> Option<Option<StepVerdict>> {
    match s.status {
        StepStatus::Pending | StepStatus::Running => Some(None),
        StepStatus::Completed => None,
        other @ (StepStatus::Failed | StepStatus::Aborted | StepStatus::Skipped) => {
            let why = match other {
                StepStatus::Skipped => "not run (the suite stopped before it)".to_string(),
                StepStatus::Aborted => "the test was stopped".to_string(),
                _ => match &s.error {
                    Some(e) if !e.is_empty() => format!("the test failed: {e}"),
                    _ => format!("the test ended {other}"),
                },
            };
            Some(Some(StepVerdict {
                pass: false,
                checks: Vec::new(),
                reasons: vec![why],
            }))
        }
    }
}

/// The bitrate limits: a minimum, and a share of the port's ceiling.
fn rate_checks(checks: &mut Vec<Check>, s: &StepResult, th: &Thresholds) {
    if let Some(min) = th.min_bits_per_second {
        checks.push(check(
            "min_bits_per_second",
            "receiver bitrate",
            s.bitrate_bps,
            min,
            "bits/s",
            crate::model::display::rate,
            true,
            "",
        ));
    }
    if let Some(p) = th.min_ceiling_percent {
        checks.push(match s.ceiling_bps {
            Some(c) => check(
                "min_ceiling_percent",
                "receiver bitrate",
                s.bitrate_bps,
                c * p / 100.0,
                "bits/s",
                crate::model::display::rate,
                true,
                &format!(
                    " ({} % of the {} ceiling)",
                    n(p),
                    crate::model::display::rate(c)
                ),
            ),
            None => Check {
                key: "min_ceiling_percent",
                value: s.bitrate_bps,
                limit: f64::NAN,
                units: "bits/s",
                pass: false,
                text: format!(
                    "{} % of the ceiling cannot be checked: {}",
                    n(p),
                    s.ceiling_basis
                        .clone()
                        .filter(|b| !b.is_empty())
                        .unwrap_or_else(|| "the port's ceiling is unknown".into())
                ),
            },
        });
    }
}

/// The path's limits: UDP loss and jitter, TCP retransmits, CPU, the sender's shortfall, the
/// latency increase under load.
fn path_checks(checks: &mut Vec<Check>, s: &StepResult, th: &Thresholds) {
    let pct = |v: f64| format!("{} %", n(v));
    let ms = |v: f64| format!("{v:.3} ms");
    let count = |v: f64| format!("{v:.0}");
    if let Some(max) = th.max_loss_percent.filter(|_| is_udp(s)) {
        checks.push(check(
            "max_loss_percent",
            "loss",
            s.loss_percent,
            max,
            "%",
            pct,
            false,
            "",
        ));
    }
    if let Some(max) = th.max_jitter_ms.filter(|_| is_udp(s)) {
        checks.push(check(
            "max_jitter_ms",
            "jitter",
            s.jitter_ms,
            max,
            "ms",
            ms,
            false,
            "",
        ));
    }
    if let Some(max) = th.max_retransmits.filter(|_| !is_udp(s)) {
        checks.push(check(
            "max_retransmits",
            "retransmits",
            s.retransmits.map(|r| r as f64),
            max as f64,
            "retransmits",
            count,
            false,
            "",
        ));
    }
    if let Some(max) = th.max_cpu_percent {
        checks.push(cpu_check(s, max));
    }
    if let (Some(max), Some(rc)) = (th.max_shortfall_percent, s.rate_check) {
        let short = (100.0 - rc.sent_percent).max(0.0);
        checks.push(check(
            "max_shortfall_percent",
            "sender shortfall",
            Some(short),
            max,
            "%",
            pct,
            false,
            &format!(
                " (sent {} of the {} asked)",
                crate::model::display::rate(rc.sent_bits_per_second),
                crate::model::display::rate(rc.target_bits_per_second)
            ),
        ));
    }
    if let (Some(max), Some(l)) = (th.max_latency_increase_ms, s.latency) {
        checks.push(check(
            "max_latency_increase_ms",
            "latency increase under load",
            l.increase_ms,
            max,
            "ms",
            ms,
            false,
            " (loaded p50 − idle p50)",
        ));
    }
}

/// The verdict of `checks`: pass when none failed; the failed ones' words are the reasons.
fn verdict_of(checks: Vec<Check>) -> StepVerdict {
    let reasons: Vec<String> = checks
        .iter()
        .filter(|c| !c.pass)
        .map(|c| c.text.clone())
        .collect();
    StepVerdict {
        pass: reasons.is_empty(),
        checks,
        reasons,
    }
}

fn cpu_check(s: &StepResult, max: f64) -> Check {
    check(
        "max_cpu_percent",
        "busiest core",
        s.cpu_max_percent,
        max,
        "%",
        |v| format!("{} %", n(v)),
        false,
        if s.cpu_max_percent.is_none() {
            " (no CPU samples)"
        } else {
            ""
        },
    )
}

/// An RFC 2544 run's limits, one check per frame size: `min_throughput_percent` against the
/// throughput as % of the line rate (a PC's lower bound that reaches it passes: the board
/// forwarded at least that; one below it fails, unproven), `max_latency_ms` against the p99
/// round trip. A run that measured no size, or no latency, fails the limit with the reason.
fn rfc2544_checks(
    checks: &mut Vec<Check>,
    f: &crate::results::rfc2544::Rfc2544Figures,
    th: &Thresholds,
) {
    let pct = |v: f64| format!("{} %", n(v));
    let ms = |v: f64| format!("{v:.3} ms");
    if let Some(min) = th.min_throughput_percent {
        if f.sizes.is_empty() {
            checks.push(check(
                "min_throughput_percent",
                "throughput",
                None,
                min,
                "%",
                pct,
                true,
                " (no frame size was measured)",
            ));
        }
        for z in &f.sizes {
            let bound = !z.dut && z.throughput_percent.is_some_and(|v| v < min);
            checks.push(check(
                "min_throughput_percent",
                &format!("{} B throughput (% of the line rate)", z.frame),
                z.throughput_percent,
                min,
                "%",
                pct,
                true,
                if bound {
                    " (a PC's lower bound: the board's own figure is unknown)"
                } else {
                    ""
                },
            ));
        }
    }
    if let Some(max) = th.max_latency_ms {
        if !f.latency_tested || f.sizes.is_empty() {
            checks.push(check(
                "max_latency_ms",
                "latency",
                None,
                max,
                "ms",
                ms,
                false,
                " (the step's tests hold no latency)",
            ));
        } else {
            for z in &f.sizes {
                checks.push(check(
                    "max_latency_ms",
                    &format!("{} B latency p99", z.frame),
                    z.latency_p99_ms,
                    max,
                    "ms",
                    ms,
                    false,
                    "",
                ));
            }
        }
    }
}

/// Judge a suite from its rows (each row's `verdict` already set by [`judge_step`] where it
/// has thresholds). `None` when no row has thresholds or a test is still pending or running.
pub(crate) fn judge_suite(steps: &[StepResult]) -> Option<SuiteVerdict> {
    if !steps.iter().any(|s| s.thresholds.is_some()) {
        return None;
    }
    if steps.iter().any(|s| s.status.is_live()) {
        return None;
    }
    let mut failing = Vec::new();
    for s in steps {
        let reasons = match &s.verdict {
            Some(v) if v.pass => continue,
            Some(v) => v.reasons.clone(),
            None if s.status == StepStatus::Completed => continue,
            None => vec![match &s.error {
                Some(e) if !e.is_empty() => format!("the test failed: {e}"),
                _ => format!("the test ended {}", s.status),
            }],
        };
        failing.push(FailingRow {
            index: s.index,
            label: s.label.clone(),
            reasons,
        });
    }
    Some(SuiteVerdict {
        result: if failing.is_empty() { "PASS" } else { "FAIL" },
        passed: steps.len() - failing.len(),
        failed: failing.len(),
        failing,
    })
}

/// Set every row's verdict and the suite's (called when a suite result is built).
pub(crate) fn judge(r: &mut SuiteResult) {
    for s in &mut r.steps {
        s.verdict = s.thresholds.as_ref().and_then(|t| judge_step(s, t));
    }
    r.verdict = judge_suite(&r.steps);
}

/// A standalone run's verdict against the limits given with it (`params.thresholds`, stored
/// when the run started: an RFC 2544 run's `min_throughput_percent` / `max_latency_ms` /
/// `max_cpu_percent`), by the same rules as a suite row ([`judge_step`]). `None` when the run
/// was given no limits, belongs to a suite (the suite judges it), or is still running.
pub(crate) fn judge_run(
    store: &crate::store::Store,
    run: &crate::store::RunRow,
) -> Option<StepVerdict> {
    if run.suite_id.is_some() {
        return None;
    }
    // Only an RFC 2544 run is given limits of its own (`netperfd rfc2544 --max-…`, the form's
    // pass/fail fields), stored with its params.
    let th = match run.kind {
        RunKind::Rfc2544 => {
            crate::results::rfc2544_params::Rfc2544Params::of_params(&run.params).thresholds
        }
        RunKind::Iperf3
        | RunKind::Iperf2
        | RunKind::Multi
        | RunKind::Forward
        | RunKind::Monitor
        | RunKind::HttpServe
        | RunKind::HttpGet
        | RunKind::TcpSink
        | RunKind::TcpSource
        | RunKind::Latency => None,
    }
    .filter(|t| !t.is_empty())?;
    let row = crate::results::suite_table::run_result(
        store,
        1,
        &crate::results::suite_table::run_label(run),
        run,
    );
    judge_step(&row, &th)
}

/// A standalone run's verdict in lines, for its page and the CLI: the headline ("PASS: all 7
/// limits held" / "FAIL: 2 of 7 limits broken" / "FAIL: the test failed: …"), then every check
/// as "pass: …" or "fail: …".
pub(crate) fn run_verdict_lines(v: &StepVerdict) -> Vec<String> {
    let broken = v.checks.iter().filter(|c| !c.pass).count();
    let n = v.checks.len();
    let mut out = vec![match (v.pass, v.checks.is_empty()) {
        (true, _) => format!(
            "PASS: {} held",
            if n == 1 {
                "the limit".to_string()
            } else {
                format!("all {n} limits")
            }
        ),
        (false, true) => format!("FAIL: {}", v.reasons.join("; ")),
        (false, false) => format!("FAIL: {broken} of {n} limits broken"),
    }];
    out.extend(
        v.checks
            .iter()
            .map(|c| format!("{}: {}", if c.pass { "pass" } else { "fail" }, c.text)),
    );
    out
}

/// The row's verdict as one word for tables: "pass", "fail", or "" (no thresholds / not done).
pub(crate) fn step_word(s: &StepResult) -> &'static str {
    match &s.verdict {
        Some(v) if v.pass => "pass",
        Some(_) => "fail",
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::shortfall::RateCheck;

    fn tcp(bps: f64) -> StepResult {
        StepResult {
            index: 1,
            label: "TCP send".into(),
            status: StepStatus::Completed,
            protocol: crate::model::RunProtocol::Tcp,
            direction: "send".into(),
            bitrate_bps: Some(bps),
            receiver_bps: Some(bps),
            sender_bps: Some(bps),
            retransmits: Some(12),
            cpu_max_percent: Some(63.0),
            ..Default::default()
        }
    }

    fn udp(target: f64, sent: f64, got: f64, loss: f64) -> StepResult {
        StepResult {
            index: 2,
            label: "UDP send 400M".into(),
            status: StepStatus::Completed,
            protocol: crate::model::RunProtocol::Udp,
            direction: "send".into(),
            target_bps: target as u64,
            bitrate_bps: Some(got),
            receiver_bps: Some(got),
            sender_bps: Some(sent),
            rate_check: RateCheck::new(target, sent, Some(got)),
            jitter_ms: Some(0.098),
            lost: Some(4374),
            total: Some(365_993),
            loss_percent: Some(loss),
            ..Default::default()
        }
    }

    fn th(v: serde_json::Value) -> Thresholds {
        Thresholds::from_value(&v).unwrap()
    }

    #[test]
    fn ceiling_rule_passes_and_fails_with_the_reason() {
        let t = th(serde_json::json!({"min_ceiling_percent": 90}));
        // 1 GbE, TCP/IPv4 with timestamps: 941.48 Mbit/s ceiling; 90 % = 847.3 Mbit/s.
        let mut s = tcp(812e6);
        s.ceiling_bps = Some(941.48e6);
        let v = judge_step(&s, &t).unwrap();
        assert!(!v.pass);
        assert_eq!(
            v.reasons,
            ["receiver bitrate 812.0 Mbit/s < 847.3 Mbit/s (90 % of the 941.5 Mbit/s ceiling)"]
        );
        assert!((v.checks[0].limit - 847.332e6).abs() < 1.0);
        let mut s = tcp(934.2e6);
        s.ceiling_bps = Some(941.48e6);
        let v = judge_step(&s, &t).unwrap();
        assert!(v.pass, "{v:?}");
        assert!(v.checks[0]
            .text
            .starts_with("receiver bitrate 934.2 Mbit/s ≥ 847.3"));
        // A virtual port has no ceiling: the rule cannot pass.
        let mut s = tcp(20e9);
        s.ceiling_basis = Some("virtual port veth0 — no physical ceiling".into());
        let v = judge_step(&s, &t).unwrap();
        assert!(!v.pass);
        assert!(v.reasons[0].contains("cannot be checked: virtual port veth0"));
    }

    #[test]
    fn udp_limits_from_seed_001() {
        // Seed 001, Apalis iMX6Q receiving at 400M: 4374/365993 lost (1.195 %).
        let s = udp(400e6, 400e6, 395.2e6, 1.195);
        let t = th(
            serde_json::json!({"max_loss_percent": 0.1, "max_jitter_ms": 0.5,
            "max_shortfall_percent": 3, "max_retransmits": 0}),
        );
        let v = judge_step(&s, &t).unwrap();
        assert!(!v.pass);
        assert_eq!(v.reasons, ["loss 1.195 % > 0.1 %"]);
        // retransmits do not apply to UDP: three checks, not four.
        let keys: Vec<&str> = v.checks.iter().map(|c| c.key).collect();
        assert_eq!(
            keys,
            ["max_loss_percent", "max_jitter_ms", "max_shortfall_percent"]
        );
        assert!(v.checks[1].pass && v.checks[1].text == "jitter 0.098 ms ≤ 0.500 ms");
        // iMX8QM: 121/366076 (0.033 %) passes.
        let ok = udp(400e6, 399.9e6, 399.8e6, 0.033);
        assert!(judge_step(&ok, &t).unwrap().pass);
        // A sender at 52.1 % of 100M is 47.9 % short.
        let short = udp(100e6, 52.1e6, 52.1e6, 0.0);
        let v = judge_step(&short, &t).unwrap();
        assert_eq!(
            v.reasons,
            ["sender shortfall 47.9 % > 3 % (sent 52.1 Mbit/s of the 100.0 Mbit/s asked)"]
        );
    }

    /// A standalone run's verdict in lines: the headline counts the broken limits, then every
    /// check; a run that did not complete fails with the reason and no checks.
    #[test]
    fn run_verdict_lines_count_the_broken_limits() {
        let t = th(
            serde_json::json!({"min_bits_per_second": 900e6, "max_retransmits": 10,
            "max_cpu_percent": 50}),
        );
        let v = judge_step(&tcp(934.2e6), &t).unwrap();
        assert_eq!(
            run_verdict_lines(&v),
            [
                "FAIL: 2 of 3 limits broken",
                "pass: receiver bitrate 934.2 Mbit/s ≥ 900.0 Mbit/s",
                "fail: retransmits 12 > 10",
                "fail: busiest core 63 % > 50 %",
            ]
        );
        let t = th(serde_json::json!({"max_cpu_percent": 70}));
        let v = judge_step(&tcp(934.2e6), &t).unwrap();
        assert_eq!(
            run_verdict_lines(&v),
            ["PASS: the limit held", "pass: busiest core 63 % ≤ 70 %"]
        );
        let mut s = tcp(1.0);
        s.status = StepStatus::Failed;
        s.error = Some("the peer agent did not answer".into());
        let v = judge_step(&s, &t).unwrap();
        assert_eq!(
            run_verdict_lines(&v),
            ["FAIL: the test failed: the peer agent did not answer"]
        );
    }

    #[test]
    fn tcp_limits_and_unknown_figures() {
        let t = th(
            serde_json::json!({"min_bits_per_second": 900e6, "max_retransmits": 10,
            "max_cpu_percent": 50, "max_loss_percent": 0}),
        );
        let s = tcp(934.2e6);
        let v = judge_step(&s, &t).unwrap();
        assert_eq!(
            v.reasons,
            ["retransmits 12 > 10", "busiest core 63 % > 50 %"]
        );
        assert_eq!(v.checks.len(), 3, "loss does not apply to TCP");
        let mut s = tcp(934.2e6);
        s.cpu_max_percent = None;
        s.retransmits = Some(3);
        let v = judge_step(&s, &t).unwrap();
        assert_eq!(v.reasons, ["busiest core unknown (no CPU samples)"]);
    }

    /// Issue 26: an RFC 2544 row against `min_throughput_percent` and `max_latency_ms`, per
    /// frame size; a PC's lower bound passes only when it reaches the limit.
    #[test]
    fn rfc2544_rows_are_judged_per_frame_size() {
        use crate::results::rfc2544::{Rfc2544Figures, SizeFigures};
        let size = |frame, pct: Option<f64>, dut, p99: Option<f64>| SizeFigures {
            frame,
            throughput_percent: pct,
            dut,
            latency_p99_ms: p99,
        };
        let row = |sizes: Vec<SizeFigures>, latency_tested| StepResult {
            status: StepStatus::Completed,
            protocol: crate::model::RunProtocol::Udp,
            rfc2544: Some(Rfc2544Figures {
                sizes,
                latency_tested,
            }),
            ..Default::default()
        };
        let t = th(
            serde_json::json!({"min_throughput_percent": 10, "max_latency_ms": 8,
                                      "max_loss_percent": 0.1}),
        );
        let ok = row(
            vec![
                size(512, Some(10.5), true, Some(7.1)),
                size(1518, Some(10.2), true, Some(0.7)),
            ],
            true,
        );
        let v = judge_step(&ok, &t).unwrap();
        assert!(v.pass, "{v:?}");
        // Two sizes × two limits; the UDP loss limit does not apply to a benchmark.
        assert_eq!(v.checks.len(), 4);
        assert_eq!(
            v.checks[0].text,
            "512 B throughput (% of the line rate) 10.5 % ≥ 10 %"
        );
        assert_eq!(v.checks[3].text, "1518 B latency p99 0.700 ms ≤ 8.000 ms");
        let bad = row(
            vec![
                size(512, Some(9.7), true, Some(9.4)),
                size(1518, Some(8.1), false, None),
                size(64, Some(12.0), false, Some(1.0)),
            ],
            true,
        );
        let v = judge_step(&bad, &t).unwrap();
        assert!(!v.pass);
        assert_eq!(
            v.reasons,
            vec![
                "512 B throughput (% of the line rate) 9.7 % < 10 %",
                "1518 B throughput (% of the line rate) 8.1 % < 10 % (a PC's lower bound: the board's own figure is unknown)",
                "512 B latency p99 9.400 ms > 8.000 ms",
                "1518 B latency p99 unknown",
            ]
        );
        // No latency in the step's tests: the limit cannot pass.
        let v = judge_step(&row(vec![size(1518, Some(50.0), true, None)], false), &t).unwrap();
        assert_eq!(
            v.reasons,
            vec!["latency unknown (the step's tests hold no latency)"]
        );
    }

    #[test]
    fn suite_verdict_from_rows() {
        let t = th(serde_json::json!({"min_bits_per_second": 100e6}));
        let mut r = SuiteResult {
            suite: crate::store::SuiteRow {
                id: 1,
                name: "s".into(),
                peer_host: "192.0.2.2".into(),
                status: crate::model::RunStatus::Completed,
                created_at: 0,
                ended_at: None,
            },
            label: String::new(),
            def_id: None,
            steps: vec![tcp(934.2e6), tcp(50e6)],
            verdict: None,
        };
        r.steps[1].index = 2;
        r.steps[1].label = "TCP receive".into();
        judge(&mut r);
        assert!(r.verdict.is_none(), "no thresholds: no verdict");
        for s in &mut r.steps {
            s.thresholds = Some(t);
        }
        judge(&mut r);
        let v = r.verdict.clone().unwrap();
        assert_eq!(v.result, "FAIL");
        assert_eq!((v.passed, v.failed), (1, 1));
        assert_eq!(v.failing[0].index, 2);
        assert_eq!(
            v.failing[0].reasons,
            ["receiver bitrate 50.0 Mbit/s < 100.0 Mbit/s"]
        );
        assert_eq!(step_word(&r.steps[0]), "pass");
        r.steps[1].bitrate_bps = Some(120e6);
        judge(&mut r);
        assert!(r.verdict.as_ref().unwrap().pass());
        // A failed test fails the suite even without thresholds on its row.
        r.steps[1].thresholds = None;
        r.steps[1].status = StepStatus::Failed;
        r.steps[1].error = Some("unable to connect to server: Connection refused".into());
        judge(&mut r);
        assert_eq!(
            r.verdict.clone().unwrap().failing[0].reasons,
            ["the test failed: unable to connect to server: Connection refused"]
        );
        // Still running: no verdict yet.
        r.steps[1].status = StepStatus::Running;
        judge(&mut r);
        assert!(r.verdict.is_none());
    }
}
