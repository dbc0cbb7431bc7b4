//! Board farms and CI (issue 16 part A): `netperfd suite run NAME --peer HOST --junit FILE
//! --lava` against stock `iperf3 -s` in the pc1 namespace. A suite whose thresholds hold exits
//! 0, one whose thresholds break exits 1 (with the failing row and its reason), a suite that
//! cannot run exits 2 (unknown suite, bad arguments, nothing listening on the peer's port).
//! The JUnit file is read back with junitparser (PyPI) and validated with
//! `xmllint --schema tests/data/junit.xsd`; the LAVA lines are matched by a regex of LAVA's
//! signal syntax (tests/data/farm_check.py). The daemon then shows the same verdicts on the
//! suite page, in its API and in compare.

mod common;
use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Import a suite definition from JSON into history `data`.
fn import(lab: &mut Lab, data: &str, def: &Value) {
    let name = def["name"].as_str().unwrap_or("x").replace(' ', "_");
    let file = lab.dir().join(format!("{name}.json"));
    std::fs::write(&file, def.to_string()).expect("write definition");
    let board = lab.board.clone();
    let (code, out, err) = lab.run(
        &board,
        &format!("import-{name}"),
        bin(),
        &[
            "suite",
            "import",
            file.to_str().unwrap_or(""),
            "--data",
            data,
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{out}{err}");
}

/// `xmllint --schema tests/data/junit.xsd FILE`: (valid, messages).
fn xmllint(file: &Path) -> (bool, String) {
    let xsd = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/junit.xsd");
    let o = Command::new("xmllint")
        .args(["--noout", "--schema", xsd])
        .arg(file)
        .output()
        .expect("xmllint (Debian package libxml2-utils; scripts/test.sh installs it)");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The JUnit file and the LAVA lines as junitparser and the regex read them.
fn read_back(junit: &Path, stdout: &str, dir: &Path) -> Value {
    let out_file = dir.join("lava-stdout.txt");
    std::fs::write(&out_file, stdout).expect("write stdout");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/farm_check.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(junit)
        .arg(&out_file)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "farm_check.py failed (pip install junitparser; scripts/test.sh does): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    json(&String::from_utf8_lossy(&o.stdout), "farm_check.py output")
}

fn f(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn suite_run_for_ci_pass_fail_junit_lava_exit_codes() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-p", "5201"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let data = lab.dir().join("data");
    let d = data.to_str().unwrap_or("").to_string();

    // Passing: a TCP floor far below what a veth pair carries, a UDP row at 20M with loss,
    // jitter and shortfall limits a quiet veth pair keeps.
    import(
        &mut lab,
        &d,
        &json!({"name": "farm pass", "time": 2, "steps": [
            {"kind": "tcp", "thresholds": {"min_bits_per_second": 1_000_000, "max_retransmits": 1_000_000_000u64}},
            {"kind": "udp", "bitrate": "20M", "thresholds":
                {"max_loss_percent": 5, "max_jitter_ms": 100, "max_shortfall_percent": 20}}
        ]}),
    );
    // Failing: the suite-level floor (1 Tbit/s, no veth pair carries that) applies to the
    // first row; the second row sets its own, which it keeps.
    import(
        &mut lab,
        &d,
        &json!({"name": "farm fail", "time": 1,
        "thresholds": {"min_bits_per_second": 1e12},
        "steps": [
            {"kind": "tcp"},
            {"kind": "tcp", "direction": "receive", "thresholds": {"min_bits_per_second": 100000}}
        ]}),
    );
    // A bad threshold is refused at import with the reason, and nothing is stored.
    let bad = lab.dir().join("bad.json");
    std::fs::write(
        &bad,
        json!({"name": "farm bad", "steps": [{"kind": "tcp", "thresholds": {"max_loss": 1}}]})
            .to_string(),
    )
    .expect("write");
    let (code, _, err) = lab.run(
        &board,
        "import-bad",
        bin(),
        &["suite", "import", bad.to_str().unwrap_or(""), "--data", &d],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("step 1 (tcp): thresholds: unknown key 'max_loss'"),
        "{err}"
    );

    // PASS → exit 0.
    let junit_pass = lab.dir().join("pass.xml");
    let (code, out, err) = lab.run(
        &board,
        "run-pass",
        bin(),
        &[
            "suite",
            "run",
            "farm pass",
            "--peer",
            PC1_IP,
            "--data",
            &d,
            "--label",
            "farm-board",
            "--junit",
            junit_pass.to_str().unwrap_or(""),
            "--lava",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("PASS: 2 of 2 tests passed the thresholds"),
        "{out}"
    );
    let (valid, msg) = xmllint(&junit_pass);
    assert!(valid, "JUnit file fails the schema: {msg}");
    let v = read_back(&junit_pass, &out, lab.dir());
    let s = &v["suites"][0];
    assert_eq!(s["name"], "farm pass", "{v}");
    assert_eq!(
        (s["tests"].as_i64(), s["failures"].as_i64()),
        (Some(2), Some(0))
    );
    assert_eq!(s["properties"]["verdict"], "PASS");
    assert_eq!(s["properties"]["label"], "farm-board");
    assert_eq!(s["properties"]["peer"], PC1_IP);
    let cases = s["cases"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = cases
        .iter()
        .map(|c| c["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["01 TCP send", "02 UDP send 20M"]);
    assert!(cases.iter().all(|c| c["passed"] == true), "{v}");
    assert!(
        cases
            .iter()
            .all(|c| f(&c["time"]) >= 1.5 && f(&c["time"]) < 20.0),
        "{v}"
    );
    // The measurements as properties, the same figures as the LAVA lines.
    let tcp_bps = f(&s["properties"]["step.01.bits_per_second"]);
    let udp_bps = f(&s["properties"]["step.02.bits_per_second"]);
    assert!(tcp_bps > 1e6, "{v}");
    assert!(
        (15e6..21e6).contains(&udp_bps),
        "UDP at 20M received {udp_bps}"
    );
    assert_eq!(f(&s["properties"]["step.02.target_bits_per_second"]), 20e6);
    assert!(f(&s["properties"]["step.02.loss_percent"]) <= 5.0);
    assert_eq!(
        f(&s["properties"]["step.02.threshold.max_loss_percent"]),
        5.0
    );
    assert!(
        cases[1]["system_out"]
            .as_str()
            .unwrap_or("")
            .contains("ok: loss "),
        "{v}"
    );
    let pass_sid = s["properties"]["suite_id"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let lava = v["lava"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        v["lava_lines"], 2,
        "every LAVA line matches the syntax: {out}"
    );
    assert_eq!(lava.len(), 2, "{out}");
    assert_eq!(lava[0]["id"], "01_TCP_send");
    assert_eq!(lava[1]["id"], "02_UDP_send_20M");
    assert!(lava
        .iter()
        .all(|l| l["result"] == "pass" && l["units"] == "Mbit/s"));
    assert!((f(&lava[0]["measurement"]) - tcp_bps / 1e6).abs() < 0.001);
    assert!((f(&lava[1]["measurement"]) - udp_bps / 1e6).abs() < 0.001);

    // FAIL → exit 1, the failing row with its reason.
    let junit_fail = lab.dir().join("fail.xml");
    let (code, out, err) = lab.run(
        &board,
        "run-fail",
        bin(),
        &[
            "suite",
            "run",
            "farm fail",
            "--peer",
            PC1_IP,
            "--data",
            &d,
            "--junit",
            junit_fail.to_str().unwrap_or(""),
            "--lava",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("FAIL: 1 of 2 tests failed"), "{out}");
    assert!(out.contains("#1 TCP send: receiver bitrate "), "{out}");
    let (valid, msg) = xmllint(&junit_fail);
    assert!(valid, "JUnit file fails the schema: {msg}");
    let v = read_back(&junit_fail, &out, lab.dir());
    let s = &v["suites"][0];
    assert_eq!(
        (s["tests"].as_i64(), s["failures"].as_i64()),
        (Some(2), Some(1))
    );
    assert_eq!(s["properties"]["verdict"], "FAIL");
    let fail = &s["cases"][0]["results"][0];
    assert_eq!(fail["kind"], "Failure", "{v}");
    assert_eq!(fail["type"], "threshold");
    let msg = fail["message"].as_str().unwrap_or("");
    let got = f(&s["properties"]["step.01.bits_per_second"]);
    assert!(
        msg.starts_with("receiver bitrate ") && msg.ends_with(" < 1,000,000.0 Mbit/s"),
        "{msg}"
    );
    assert!(msg.contains(&mbit_text(got)), "{msg} vs {got}");
    assert_eq!(s["cases"][1]["passed"], true, "{v}");
    let lava = v["lava"].as_array().cloned().unwrap_or_default();
    let results: Vec<&str> = lava
        .iter()
        .map(|l| l["result"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(results, ["fail", "pass"], "{out}");

    // The verdict is in the stored suite's JSON and CSV too.
    let sid = s["properties"]["suite_id"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let (code, out, err) = lab.run(
        &board,
        "result-json",
        bin(),
        &["suite", "result", &sid, "--format", "json", "--data", &d],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    let r = json(&out, "suite result");
    assert_eq!(r["verdict"]["result"], "FAIL", "{r}");
    assert_eq!(r["verdict"]["failing"][0]["index"], 1);
    assert_eq!(r["steps"][0]["verdict"]["pass"], false);
    assert_eq!(r["steps"][0]["thresholds"]["min_bits_per_second"], 1e12);
    assert_eq!(r["steps"][1]["verdict"]["checks"][0]["pass"], true);
    let (_, csv, _) = lab.run(
        &board,
        "result-csv",
        bin(),
        &["suite", "result", &sid, "--format", "csv", "--data", &d],
        Duration::from_secs(20),
    );
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].contains(",verdict,reasons,"), "{csv}");
    // The reason holds "3,312.3 Mbit/s" (thousands grouped): a quoted CSV field.
    assert!(lines[1].contains(",fail,\"receiver bitrate "), "{csv}");
    // pass, no reasons, and the five latency columns and lost_where (no loss ledger on a
    // TCP run) empty for an iperf3 row.
    assert!(lines[0].ends_with(",lost_where"), "{csv}");
    assert!(lines[2].ends_with(",pass,,,,,,,"), "{csv}");

    // The same verdicts on the daemon's suite page, in its API and in compare.
    let port = free_port();
    let (_, mut http) = common::http::daemon(&mut lab, &board, port, &[]);
    common::http::set_up(&lab, &mut http);
    let page = http.get(&format!("/suites/{sid}")).body;
    assert!(
        page.contains("id=\"suite-verdict\">FAIL</span>"),
        "suite page without its verdict: {page}"
    );
    assert!(
        page.contains("<li>#1 TCP send: receiver bitrate ")
            && page.contains(" &#60; 1,000,000.0 Mbit/s</li>"),
        "{page}"
    );
    assert!(page.contains("<th>Verdict</th>"), "{page}");
    let page = http.get(&format!("/suites/{pass_sid}")).body;
    assert!(page.contains("id=\"suite-verdict\">PASS</span>"), "{page}");
    let api = http.get_json(&format!("/api/suites/{sid}"));
    assert_eq!(api["verdict"]["result"], "FAIL", "{api}");
    assert_eq!(api["verdict"]["failed"], 1);
    assert_eq!(api["steps"][1]["verdict"]["pass"], true);
    let cmp = http
        .get(&format!("/compare.md?suites={pass_sid},{sid}"))
        .body;
    assert!(
        cmp.contains(&format!("Suite {pass_sid} · farm-board · {PC1_IP}"))
            && cmp.contains(" · PASS |")
            && cmp.contains(" · FAIL |")
            && cmp.contains(" — FAIL |"),
        "{cmp}"
    );

    // Could not run → exit 2: unknown suite, bad arguments, nothing on the peer's port.
    for (name, args, want) in [
        (
            "unknown",
            vec!["suite", "run", "no such suite", "--peer", PC1_IP],
            "no suite definition 'no such suite'",
        ),
        (
            "bad-port",
            vec![
                "suite",
                "run",
                "farm pass",
                "--peer",
                PC1_IP,
                "--port",
                "99999",
            ],
            "invalid value '99999'",
        ),
        (
            "no-junit-file",
            vec!["suite", "run", "farm pass", "--peer", PC1_IP, "--junit"],
            "a value is required for '--junit <FILE>'",
        ),
        (
            "refused",
            vec![
                "suite",
                "run",
                "farm pass",
                "--peer",
                PC1_IP,
                "--port",
                "5299",
                "--lava",
            ],
            "could not run: no test completed",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--data", &d]);
        let (code, out, err) = lab.run(&board, name, bin(), &a, Duration::from_secs(60));
        assert_eq!(code, Some(2), "{name}: {out}{err}");
        assert!(err.contains(want), "{name}: {err}");
        if name == "refused" {
            // The rows are still reported, as failures without a measurement.
            assert!(
                out.contains("<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=01_TCP_send RESULT=fail>"),
                "{out}"
            );
        }
    }
}
