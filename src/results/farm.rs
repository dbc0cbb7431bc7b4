//! A suite run for board farms and CI: JUnit XML (Jenkins, GitLab) and LAVA test-case
//! signals, written by `netperfd suite run --junit FILE --lava`.
//!
//! JUnit layout (the Ant/Surefire format as Jenkins' JUnit schema accepts it): one
//! `<testsuites>` holding one `<testsuite>` (the suite run), one `<testcase>` per row. The
//! schema has no `<properties>` inside a `<testcase>`, so each row's measurements are
//! properties of the testsuite named `step.NN.KEY` (e.g. `step.01.bits_per_second`, base
//! units: bits/s, %, ms, counts), and each testcase repeats its checks in words in
//! `<system-out>`. A failing row has `<failure message="first reason" type="threshold">`
//! (or `type="test"` when the test itself failed) with all reasons as text.
//!
//! LAVA: one line per row, `<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=NN_label RESULT=pass|fail
//! MEASUREMENT=M UNITS=Mbit/s>`, the measurement being the receiver bitrate in Mbit/s (left
//! out when there is none). TEST_CASE_ID keeps only `A-Z a-z 0-9 _ . -` (LAVA's rule).

use crate::model::StepStatus;
use crate::results::suite_table::{StepResult, SuiteResult};
use crate::results::verdict::step_word;

/// Escape text for XML 1.0 attribute values and character data: `& < > " '` as entities,
/// tabs / line breaks as character references (so attributes keep them), and characters XML
/// 1.0 cannot carry at all (other C0 controls, U+FFFE, U+FFFF) replaced by U+FFFD.
pub(crate) fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// [`xml_escape`] for element text: line breaks stay line breaks (only attribute values need
/// them as references).
fn xml_text(s: &str) -> String {
    xml_escape(s).replace("&#10;", "\n")
}

/// A row passes when its verdict passes, or (no thresholds) when its test completed.
pub(crate) fn row_passed(s: &StepResult) -> bool {
    match step_word(s) {
        "pass" => true,
        "fail" => false,
        _ => s.status == StepStatus::Completed,
    }
}

/// Why a row failed, one sentence each (empty when it passed).
pub(crate) fn row_reasons(s: &StepResult) -> Vec<String> {
    if row_passed(s) {
        return Vec::new();
    }
    match &s.verdict {
        Some(v) if !v.reasons.is_empty() => v.reasons.clone(),
        _ => vec![match &s.error {
            Some(e) if !e.is_empty() => format!("the test failed: {e}"),
            _ => format!("the test ended {}", s.status),
        }],
    }
}

/// Seconds a row's test took (0 when it did not run), from its start and end, Unix ms.
fn seconds(s: &StepResult) -> f64 {
    match (s.started_at, s.ended_at) {
        (Some(a), Some(b)) if b >= a => (b - a) as f64 / 1000.0,
        _ => 0.0,
    }
}

/// The measurements of a row as (key, value) in base units, the ones it has.
pub(crate) fn measurements(s: &StepResult) -> Vec<(&'static str, String)> {
    let mut m = Vec::new();
    let mut put = |k: &'static str, v: Option<String>| {
        if let Some(v) = v {
            m.push((k, v));
        }
    };
    put("bits_per_second", s.bitrate_bps.map(|b| format!("{b:.0}")));
    put(
        "sender_bits_per_second",
        s.sender_bps.map(|b| format!("{b:.0}")),
    );
    put(
        "target_bits_per_second",
        (s.target_bps > 0).then(|| s.target_bps.to_string()),
    );
    put(
        "sent_percent",
        s.rate_check.map(|c| format!("{:.3}", c.sent_percent)),
    );
    put(
        "ceiling_bits_per_second",
        s.ceiling_bps.map(|c| format!("{c:.0}")),
    );
    put("retransmits", s.retransmits.map(|r| r.to_string()));
    put("jitter_ms", s.jitter_ms.map(|j| format!("{j:.3}")));
    put("lost_datagrams", s.lost.map(|l| l.to_string()));
    put("total_datagrams", s.total.map(|t| t.to_string()));
    put("loss_percent", s.loss_percent.map(|l| format!("{l:.4}")));
    put(
        "cpu_max_percent",
        s.cpu_max_percent.map(|c| format!("{c:.1}")),
    );
    if let Some(l) = s.latency {
        let ms = |v: Option<f64>| v.map(|v| format!("{v:.3}"));
        put("idle_rtt_p50_ms", ms(l.idle_p50_ms));
        put("loaded_rtt_p50_ms", ms(l.loaded_p50_ms));
        put("loaded_rtt_p99_ms", ms(l.loaded_p99_ms));
        put("latency_increase_ms", ms(l.increase_ms));
        put("rpm", l.rpm.map(|r| format!("{r:.0}")));
    }
    m
}

/// The JUnit XML document of suite run `r`; `hostname` names the board (the testsuite's
/// `hostname`). See the module doc for the layout.
pub(crate) fn junit_xml(r: &SuiteResult, hostname: &str) -> String {
    let failures = r.steps.iter().filter(|s| !row_passed(s)).count();
    let total: f64 = r.steps.iter().map(seconds).sum();
    let stamp = chrono::DateTime::from_timestamp_millis(r.suite.created_at)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default();
    let class = format!("netperfd.{}", test_id(&r.suite.name));
    let a = xml_escape;
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"netperfd\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{total:.3}\">\n",
        r.steps.len()
    ));
    x.push_str(&format!(
        "  <testsuite name=\"{}\" id=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{total:.3}\" timestamp=\"{stamp}\" hostname=\"{}\">\n",
        a(&r.suite.name),
        r.suite.id,
        r.steps.len(),
        a(hostname)
    ));
    x.push_str("    <properties>\n");
    let prop = |x: &mut String, k: &str, v: &str| {
        x.push_str(&format!(
            "      <property name=\"{}\" value=\"{}\"/>\n",
            a(k),
            a(v)
        ));
    };
    prop(&mut x, "suite_id", &r.suite.id.to_string());
    prop(&mut x, "peer", &r.suite.peer_host);
    prop(&mut x, "label", &r.label);
    prop(&mut x, "status", r.suite.status.as_str());
    if let Some(v) = &r.verdict {
        prop(&mut x, "verdict", v.result);
    }
    for s in &r.steps {
        let p = format!("step.{:02}", s.index);
        prop(&mut x, &format!("{p}.label"), &s.label);
        prop(&mut x, &format!("{p}.status"), s.status.as_str());
        for (k, v) in measurements(s) {
            prop(&mut x, &format!("{p}.{k}"), &v);
        }
        if let Some(t) = &s.thresholds {
            if let Ok(serde_json::Value::Object(o)) = serde_json::to_value(t) {
                for (k, v) in o {
                    prop(&mut x, &format!("{p}.threshold.{k}"), &v.to_string());
                }
            }
        }
    }
    x.push_str("    </properties>\n");
    for s in &r.steps {
        x.push_str(&format!(
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">\n",
            a(&format!("{:02} {}", s.index, s.label)),
            a(&class),
            seconds(s)
        ));
        let reasons = row_reasons(s);
        if let Some(first) = reasons.first() {
            let kind = if s.status == StepStatus::Completed {
                "threshold"
            } else {
                "test"
            };
            x.push_str(&format!(
                "      <failure message=\"{}\" type=\"{kind}\">{}</failure>\n",
                a(first),
                xml_text(&reasons.join("\n"))
            ));
        }
        let mut out: Vec<String> = measurements(s)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if let Some(v) = &s.verdict {
            out.extend(
                v.checks
                    .iter()
                    .map(|c| format!("{} {}", if c.pass { "ok:" } else { "FAILED:" }, c.text)),
            );
        }
        if let Some(id) = s.run_id {
            out.push(format!("run {id}"));
        }
        x.push_str(&format!(
            "      <system-out>{}</system-out>\n",
            xml_text(&out.join("\n"))
        ));
        x.push_str("    </testcase>\n");
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// A LAVA test case id: only `A-Z a-z 0-9 _ . -`, other characters (spaces, ×) become `_`,
/// runs of `_` collapse, at most 100 characters.
pub(crate) fn test_id(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let out = out.trim_matches('_');
    out.chars().take(100).collect()
}

/// One `<LAVA_SIGNAL_TESTCASE …>` line per row, in order.
pub(crate) fn lava_lines(r: &SuiteResult) -> Vec<String> {
    r.steps
        .iter()
        .map(|s| {
            let id = test_id(&format!("{:02}_{}", s.index, s.label));
            let result = if row_passed(s) { "pass" } else { "fail" };
            match s.bitrate_bps {
                Some(b) => format!(
                    "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID={id} RESULT={result} MEASUREMENT={:.3} UNITS=Mbit/s>",
                    b / 1e6
                ),
                None => format!("<LAVA_SIGNAL_TESTCASE TEST_CASE_ID={id} RESULT={result}>"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::thresholds::Thresholds;

    fn result() -> SuiteResult {
        let th =
            Thresholds::from_value(&serde_json::json!({"min_bits_per_second": 500e6})).unwrap();
        let ok = StepResult {
            index: 1,
            label: "TCP send".into(),
            run_id: Some(7),
            status: StepStatus::Completed,
            protocol: crate::model::RunProtocol::Tcp,
            bitrate_bps: Some(934.2e6),
            retransmits: Some(0),
            started_at: Some(1_764_504_000_000),
            ended_at: Some(1_764_504_010_250),
            thresholds: Some(th),
            ..Default::default()
        };
        let bad = StepResult {
            index: 2,
            label: "UDP receive 400M ×2 <\"&'>".into(),
            run_id: Some(8),
            status: StepStatus::Completed,
            protocol: crate::model::RunProtocol::Udp,
            bitrate_bps: Some(395.2e6),
            jitter_ms: Some(0.098),
            lost: Some(4374),
            total: Some(365_993),
            loss_percent: Some(1.195),
            thresholds: Some(th),
            ..Default::default()
        };
        let failed = StepResult {
            index: 3,
            label: "TCP receive".into(),
            status: StepStatus::Failed,
            protocol: crate::model::RunProtocol::Tcp,
            error: Some("unable to connect\u{1}: refused".into()),
            ..Default::default()
        };
        let mut r = SuiteResult {
            suite: crate::store::SuiteRow {
                id: 12,
                name: "seed 001 table".into(),
                peer_host: "192.0.2.2".into(),
                status: crate::model::RunStatus::Failed,
                created_at: 1_764_504_000_000,
                ended_at: None,
            },
            label: "imx8".into(),
            def_id: Some(1),
            steps: vec![ok, bad, failed],
            verdict: None,
        };
        crate::results::verdict::judge(&mut r);
        r
    }

    #[test]
    fn lava_lines_per_row() {
        let r = result();
        assert_eq!(
            lava_lines(&r),
            [
                "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=01_TCP_send RESULT=pass MEASUREMENT=934.200 UNITS=Mbit/s>",
                "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=02_UDP_receive_400M_2 RESULT=fail MEASUREMENT=395.200 UNITS=Mbit/s>",
                "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=03_TCP_receive RESULT=fail>",
            ]
        );
    }

    #[test]
    fn junit_counts_failures_and_escapes() {
        let r = result();
        let x = junit_xml(&r, "board&1");
        assert!(x.contains(
            "<testsuite name=\"seed 001 table\" id=\"12\" tests=\"3\" failures=\"2\" errors=\"0\""
        ));
        assert!(x.contains("hostname=\"board&amp;1\""));
        assert!(x.contains("time=\"10.250\""));
        assert!(x.contains("<property name=\"step.01.bits_per_second\" value=\"934200000\"/>"));
        assert!(x.contains("<property name=\"step.02.loss_percent\" value=\"1.1950\"/>"));
        assert!(x.contains(
            "<property name=\"step.01.threshold.min_bits_per_second\" value=\"500000000.0\"/>"
        ));
        assert!(x.contains("name=\"02 UDP receive 400M ×2 &lt;&quot;&amp;&apos;&gt;\""));
        assert!(x.contains("<failure message=\"receiver bitrate 395.2 Mbit/s &lt; 500.0 Mbit/s\" type=\"threshold\">"));
        // The control character is replaced; XML 1.0 cannot carry it even as a reference.
        assert!(x.contains("<failure message=\"the test failed: unable to connect\u{FFFD}: refused\" type=\"test\">"));
        assert!(!x.chars().any(|c| (c as u32) < 0x20 && c != '\n'));
        assert_eq!(x.matches("<testcase ").count(), 3);
        assert_eq!(x.matches("<failure ").count(), 2);
    }
}
