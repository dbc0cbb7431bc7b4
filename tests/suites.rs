//! Saved suites through the daemon's API and pages, against stock `iperf3 -s` in the pc1
//! namespace: built-in definitions, bad definitions refused, a short saved suite run twice
//! (two "boards"), each step's stored run checked against the suite table, the two suites
//! compared with CSV/Markdown exports (web and CLI), unknown ids, and stopping a suite.

mod common;
use common::http::*;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Start the daemon in the board namespace, set the password, log in.
fn logged_in(lab: &mut Lab, port: u16) -> Http {
    let board = lab.board.clone();
    let (_, mut http) = daemon(lab, &board, port, &[]);
    set_up(lab, &mut http);
    http
}

fn wait_suite(http: &Http, sid: i64, limit: Duration) -> Value {
    let t = Instant::now();
    loop {
        let v = http.get_json(&format!("/api/suites/{sid}"));
        let live = v["steps"]
            .as_array()
            .map(|s| s.iter().any(|x| x["status"] == "running"))
            .unwrap_or(false);
        if v["suite"]["status"] != "running" && !live {
            return v;
        }
        assert!(t.elapsed() < limit, "suite {sid} still running: {v}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn run_suite(http: &Http, def: &str, body: Value) -> i64 {
    let r = http.api("POST", &format!("/api/suite-defs/{def}/run"), &body);
    assert_eq!(r.status, 201, "{}", r.body);
    serde_json::from_str::<Value>(&r.body).expect("json")["id"]
        .as_i64()
        .expect("suite id")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Numeric field `i` (0-based, of 29) of a CSV line, counted from the end: the text fields
/// before it (the board label) may hold quoted commas, the numeric ones never do (verdict and
/// reasons are empty in suites without thresholds, the five latency columns for iperf3 rows,
/// lost_where for runs without a loss ledger).
fn csv_num(line: &str, i: usize) -> f64 {
    let fields: Vec<&str> = line.rsplit(',').collect();
    // 29 columns; field i counted from the start is field 28 - i from the end.
    fields[28 - i]
        .parse()
        .unwrap_or_else(|e| panic!("field {i} of {line}: {e}"))
}

/// JSON numbers go through serde_json's fast float parser (may be 1 ULP off the stored value).
fn assert_close(a: f64, b: f64, ctx: &str) {
    assert!((a - b).abs() <= b.abs() * 1e-12, "{a} != {b}: {ctx}");
}

fn mbit(bps: f64) -> String {
    mbit_text(bps)
}

/// Every step's stored run against the suite table; returns the runs.
fn check_steps(http: &Http, sid: i64, v: &Value) -> Vec<Value> {
    assert_eq!(v["suite"]["status"], "completed", "{v}");
    let steps = v["steps"].as_array().cloned().unwrap_or_default();
    let labels: Vec<&str> = steps
        .iter()
        .map(|s| s["label"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(labels, ["TCP send", "TCP receive", "UDP send 50M"], "{v}");
    let mut runs = Vec::new();
    for s in &steps {
        let id = s["run_id"].as_i64().expect("run id");
        let run = http.get_json(&format!("/api/runs/{id}"))["run"].clone();
        assert_eq!(run["suite_id"].as_i64(), Some(sid));
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(s["status"], "completed");
        // The table's numbers are the run's stored figures.
        assert_eq!(f(&s["bitrate_bps"]), f(&run["receiver_bps"]));
        assert_eq!(s["sender_bps"], run["sender_bps"]);
        assert_eq!(s["retransmits"], run["retransmits"]);
        assert_eq!(s["lost"], run["lost_packets"]);
        assert_eq!(s["total"], run["total_packets"]);
        assert_eq!(s["loss_percent"], run["lost_percent"]);
        assert_eq!(s["jitter_ms"], run["jitter_ms"]);
        assert_eq!(run["params"]["time"].as_u64(), Some(2));
        runs.push(run);
    }
    assert_eq!(runs[0]["protocol"], "TCP");
    assert_eq!(runs[0]["direction"], "send");
    assert_eq!(runs[1]["direction"], "receive");
    assert_eq!(runs[2]["protocol"], "UDP");
    // Real traffic over the veth pair: TCP well above 100 Mbit/s, UDP at its 50M target.
    for r in &runs[..2] {
        assert!(f(&r["receiver_bps"]) > 100e6, "{r}");
    }
    let udp = f(&runs[2]["receiver_bps"]);
    assert!((30e6..=55e6).contains(&udp), "UDP 50M received at {udp}");
    assert!(
        runs[2]["total_packets"].as_i64().unwrap_or(0) > 6000,
        "{}",
        runs[2]
    );
    assert!(f(&runs[2]["lost_percent"]) < 1.0, "{}", runs[2]);
    assert_eq!(runs[2]["params"]["len"].as_u64(), Some(1400));
    runs
}

#[test]
fn saved_suite_runs_against_stock_iperf3_and_two_suites_compare() {
    let _one = serial();
    let mut lab = Lab::new();
    let pc1 = lab.pc1.clone();
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let http = logged_in(&mut lab, 8093);

    // Built-in definitions exist on first start.
    let defs = http.get_json("/api/suite-defs");
    let names: Vec<&str> = defs
        .as_array()
        .map(|a| a.iter().map(|d| d["name"].as_str().unwrap_or("")).collect())
        .unwrap_or_default();
    assert_eq!(names, ["seed 001 table", "udp-ladder"], "{defs}");
    let seed = http.get_json("/api/suite-defs/seed%20001%20table");
    assert_eq!(
        seed["definition"]["steps"].as_array().map(Vec::len),
        Some(8)
    );

    // Bad definitions: a clear 400 each, nothing stored.
    let many: Vec<Value> = (0..10_000).map(|_| json!({"kind": "tcp"})).collect();
    let bad = [
        (json!({"name": "x", "steps": []}), "at least one step"),
        (
            json!({"name": "x", "steps": [{"kind": "http-get"}]}),
            "unknown kind 'http-get'",
        ),
        (
            json!({"name": "x", "steps": [{"kind": "tcp", "time": -1}]}),
            "step 1 (tcp): time",
        ),
        (
            json!({"name": "x", "steps": many}),
            "at most 50 steps, got 10000",
        ),
        (
            json!({"name": "seed 001 table", "steps": [{"kind": "tcp"}]}),
            "exists already",
        ),
        (json!([1, 2]), "invalid suite definition"),
    ];
    for (body, want) in &bad {
        let r = http.api("POST", "/api/suite-defs", body);
        assert_eq!(r.status, 400, "{want}: {}", r.body);
        assert!(r.body.contains(want), "{} should mention {want}", r.body);
    }
    let r = http.api(
        "PUT",
        "/api/suite-defs/udp-ladder",
        &json!({"name": "udp-ladder", "steps": [{"kind": "udp", "time": 0, "bitrate": "1M"}]}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        http.get_json("/api/suite-defs"),
        defs,
        "bad input changed nothing"
    );

    // A short saved suite: TCP send 2 s, TCP receive 2 s, UDP 50M send 2 s.
    let quick = json!({"name": "quick", "description": "smoke", "time": 2, "steps": [
        {"kind": "tcp", "direction": "send"},
        {"kind": "tcp", "direction": "receive"},
        {"kind": "udp", "direction": "send", "bitrate": "50M", "length": 1400}
    ]});
    let r = http.api("POST", "/api/suite-defs", &quick);
    assert_eq!(r.status, 201, "{}", r.body);

    let a = run_suite(&http, "quick", json!({"host": PC1_IP, "label": "board A"}));
    let va = wait_suite(&http, a, Duration::from_secs(60));
    assert_eq!(va["label"], "board A");
    let runs_a = check_steps(&http, a, &va);
    let b = run_suite(
        &http,
        "quick",
        json!({"host": PC1_IP, "label": "board | B, rev 2"}),
    );
    let vb = wait_suite(&http, b, Duration::from_secs(60));
    let runs_b = check_steps(&http, b, &vb);

    // CPU column: the busiest core's highest busy share from the monitor's samples.
    let db = rusqlite::Connection::open(lab.dir().join("data").join("netperfd.sqlite"))
        .expect("open the history");
    for s in va["steps"].as_array().into_iter().flatten() {
        let id = s["run_id"].as_i64().unwrap_or(0);
        let want: Option<f64> = db
            .query_row(
                "SELECT MAX(MIN(MAX(100.0 - idle - iowait, 0.0), 100.0)) FROM cpu_samples WHERE run_id=?1 AND cpu >= 0",
                [id],
                |r| r.get(0),
            )
            .expect("cpu samples");
        let want = want.unwrap_or_else(|| panic!("run {id} of 2 s has monitor samples"));
        assert_close(f(&s["cpu_max_percent"]), want, &s.to_string());
        assert!(want > 0.0 && want <= 100.0, "{want}");
    }

    // The suite's own table: page, Markdown and CSV carry the runs' numbers.
    let page = http.get(&format!("/suites/{a}")).body;
    assert!(
        page.contains("board A") && page.contains("Lost/Total"),
        "{page}"
    );
    let md = http.get(&format!("/suites/{a}/export.md")).body;
    let csv = http.get(&format!("/suites/{a}/export.csv")).body;
    for r in &runs_a {
        assert!(md.contains(&mbit(f(&r["receiver_bps"]))), "{md}");
        let id = r["id"].as_i64().unwrap_or(0);
        // By the run_id column: a bare ",{id}," also matches a retransmit count of {id}.
        let line = csv
            .lines()
            .find(|l| l.contains(&format!(",suite,{a},")) && csv_num(l, 6) == id as f64)
            .unwrap_or_else(|| panic!("run {id} in {csv}"));
        assert_close(csv_num(line, 11), f(&r["receiver_bps"]), line);
    }
    let udp_a = &runs_a[2];
    assert!(md.contains(&format!(
        "{}/{}",
        udp_a["lost_packets"], udp_a["total_packets"]
    )));

    // Two suites side by side, as a page and exports; the CLI prints the same Markdown.
    let q = format!("suites={a},{b}");
    let page = http.get(&format!("/compare?{q}"));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("board A"));
    let md = http.get(&format!("/compare.md?{q}")).body;
    let lines: Vec<&str> = md.lines().collect();
    assert!(
        lines[2].starts_with(&format!("| Test | Suite {a} · board A · {PC1_IP}")),
        "{md}"
    );
    assert!(lines[2].contains("board \\| B"), "pipe escaped: {md}");
    assert_eq!(lines[3], "| --- | ---: | ---: |");
    for (ra, rb) in runs_a.iter().zip(&runs_b) {
        let (x, y) = (f(&ra["receiver_bps"]), f(&rb["receiver_bps"]));
        let delta = format!("({:+.1} %)", (y - x) / x * 100.0).replace("-0.0 %", "+0.0 %");
        assert!(md.contains(&mbit(x)), "{md}");
        if rb["protocol"] == "UDP" {
            // A run that lost datagrams also says where (the ledger's headline, e.g. "(not on
            // the board: 43)": 0.48 % lost once with the lab loaded) before the change.
            let head = format!("{}, {:.2} % loss ", mbit(y), f(&rb["lost_percent"]));
            // (Column A may hold the same figures: every place the cell's head occurs counts.)
            let found = md.lines().any(|l| {
                l.match_indices(&head).any(|(at, _)| {
                    let rest = &l[at + head.len()..];
                    rest.starts_with(&delta)
                        || (f(&rb["lost_packets"]) > 0.0
                            && rest.starts_with('(')
                            && rest.contains(&format!(") {delta}")))
                })
            });
            assert!(found, "{head}… {delta} in {md}");
        } else {
            let cell = format!("{} {delta}", mbit(y));
            assert!(md.contains(&cell), "{cell} in {md}");
        }
    }
    let csv = http.get(&format!("/compare.csv?{q}")).body;
    assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
    for r in runs_a.iter().chain(&runs_b) {
        let id = r["id"].as_i64().unwrap_or(0);
        let line = csv
            .lines()
            .find(|l| l.contains(&format!(",{id},completed,")))
            .unwrap_or_else(|| panic!("run {id} in {csv}"));
        assert_close(csv_num(line, 11), f(&r["receiver_bps"]), line);
    }
    assert!(csv.contains(",\"board | B, rev 2\","), "quoted: {csv}");
    let data = lab.dir().join("data");
    let board = lab.board.clone();
    let (code, out, err) = lab.run(
        &board,
        "compare-cli",
        bin(),
        &[
            "compare",
            "--suites",
            &format!("{a},{b}"),
            "--format",
            "md",
            "--data",
            data.to_str().unwrap_or(""),
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, md);

    // The CLI: list, export → import under a new name, run it, print its table.
    let d = data.to_str().unwrap_or("").to_string();
    let (code, out, err) = lab.run(
        &board,
        "cli-list",
        bin(),
        &["suite", "list", "--data", &d],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("seed 001 table") && out.contains("8 tests") && out.contains("quick"),
        "{out}"
    );
    let (code, out, err) = lab.run(
        &board,
        "cli-export",
        bin(),
        &["suite", "export", "quick", "--data", &d],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    let mut exported: Value = serde_json::from_str(&out).expect("exported JSON");
    assert_eq!(exported["steps"][2]["bitrate"], "50M");
    exported["name"] = json!("quick copy");
    exported["steps"] = json!([{"kind": "tcp", "direction": "bidir", "streams": 2}]);
    let file = lab.dir().join("copy.json");
    std::fs::write(&file, exported.to_string()).expect("write");
    let (code, _, err) = lab.run(
        &board,
        "cli-import",
        bin(),
        &["suite", "import", file.to_str().unwrap_or(""), "--data", &d],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = lab.run(
        &board,
        "cli-run",
        bin(),
        &[
            "suite",
            "run",
            "quick copy",
            "--peer",
            PC1_IP,
            "--time",
            "1",
            "--label",
            "cli",
            "--format",
            "md",
            "--data",
            &d,
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("**quick copy** — Suite "), "{out}");
    assert!(out.contains("| TCP bidir ×2 | "), "{out}");
    let (code, _, err) = lab.run(
        &board,
        "cli-bad",
        bin(),
        &["suite", "run", "nope", "--peer", PC1_IP, "--data", &d],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "an unknown suite could not run");
    assert!(err.contains("no suite definition 'nope'"), "{err}");

    // Runs side by side by metric.
    let (r1, r2) = (
        runs_a[0]["id"].as_i64().unwrap_or(0),
        runs_b[0]["id"].as_i64().unwrap_or(0),
    );
    let md = http.get(&format!("/compare.md?runs={r1},{r2}")).body;
    assert!(
        md.contains(&format!(
            "| Bitrate (receiver) | {} |",
            mbit(f(&runs_a[0]["receiver_bps"]))
        )),
        "{md}"
    );
    let v = http.get_json(&format!("/api/compare?run={r1}&run={r2}"));
    assert_eq!(v["comparison"]["columns"].as_array().map(Vec::len), Some(2));

    // Unknown ids and empty selections: clear errors.
    let r = http.get("/compare?suites=999999");
    assert_eq!(r.status, 404);
    assert!(r.body.contains("there is no suite 999999"), "{}", r.body);
    let r = http.get("/compare.csv?runs=999999");
    assert_eq!(r.status, 404);
    assert!(r.body.contains("there is no run 999999"));
    let r = http.get("/compare");
    assert_eq!(r.status, 400);
    assert!(r.body.contains("nothing to compare"), "{}", r.body);
    let r = http.get("/api/compare?runs=1,abc");
    assert_eq!(r.status, 400);
    assert!(r.body.contains("'abc' is not a number"));
    assert_eq!(http.get("/suites/999999/export.md").status, 404);
    assert_eq!(
        http.api("POST", "/api/suite-defs/nope/run", &json!({"host": PC1_IP}))
            .status,
        404
    );

    // The Suites page lists definitions and runs; the history page links compare.
    let page = http.get("/suites").body;
    assert!(
        page.contains("seed 001 table") && page.contains("quick"),
        "{page}"
    );
    assert!(http.get("/runs").body.contains("name=\"run\""));
}

#[test]
fn suite_editor_and_stop() {
    let _one = serial();
    let mut lab = Lab::new();
    let pc1 = lab.pc1.clone();
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let http = logged_in(&mut lab, 8094);

    // The editor: add a step (re-rendered, not saved), then save with a bad time (refused),
    // then a good one.
    let base = [
        ("csrf", http.csrf.as_str()),
        ("name", "edited"),
        ("time", "1"),
        ("s0_kind", "tcp"),
        ("s0_direction", "send"),
    ];
    let mut add = base.to_vec();
    add.push(("action", "add"));
    let r = http.form("/suites/defs/save", &add);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("name=\"s1_kind\""), "a second step row");
    let mut bad = base.to_vec();
    bad.extend([
        ("s1_kind", "udp"),
        ("s1_bitrate", "10M"),
        ("s1_time", "-3"),
        ("action", "save"),
    ]);
    let r = http.form("/suites/defs/save", &bad);
    assert_eq!(r.status, 400);
    assert!(r.body.contains("step 2 (udp): time"), "{}", r.body);
    assert_eq!(
        http.get("/api/suite-defs/edited").status,
        404,
        "nothing stored"
    );
    let mut up = base.to_vec();
    up.extend([
        ("s1_kind", "udp"),
        ("s1_bitrate", "10M"),
        ("action", "up-1"),
    ]);
    let r = http.form("/suites/defs/save", &up);
    assert_eq!(r.status, 200, "{}", r.body);
    let first = r
        .body
        .split("name=\"s0_kind\"")
        .nth(1)
        .and_then(|x| x.split("name=\"s0_direction\"").next())
        .unwrap_or_default();
    assert!(
        first.contains("value=\"udp\" selected"),
        "udp moved up: {first}"
    );
    let mut good = base.to_vec();
    good.push(("action", "save"));
    let r = http.form("/suites/defs/save", &good);
    assert_eq!(
        (r.status, r.location.as_str()),
        (303, "/suites"),
        "{}",
        r.body
    );
    assert_eq!(
        http.get_json("/api/suite-defs/edited")["definition"]["steps"][0]["kind"],
        "tcp"
    );

    // Writes need the session and its CSRF token (form field or X-CSRF-Token header).
    let no_csrf = Http {
        csrf: "0".repeat(32),
        ..http.clone()
    };
    let r = no_csrf.form("/suites/defs/save", &[("name", "x"), ("s0_kind", "tcp")]);
    assert_eq!(r.status, 403, "{}", r.body);
    let r = no_csrf.api(
        "POST",
        "/api/suite-defs",
        &json!({"name": "x", "steps": [{"kind": "tcp"}]}),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = no_csrf.api(
        "POST",
        "/api/suite-defs/edited/run",
        &json!({"host": PC1_IP}),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let anon = Http {
        cookie: None,
        ..http.clone()
    };
    assert_eq!(
        anon.api("DELETE", "/api/suite-defs/edited", &json!({}))
            .status,
        401
    );
    assert_eq!(anon.get("/compare?runs=1").status, 303);
    assert_eq!(anon.get("/suites").status, 303);
    assert_eq!(
        http.get_json("/api/suite-defs").as_array().map(Vec::len),
        Some(3),
        "refused writes stored nothing"
    );

    // A failed test is recorded and the suite goes on (nothing listens on port 5999).
    let r = http.api(
        "POST",
        "/api/suite-defs",
        &json!({"name": "no server", "port": 5999, "time": 1, "steps": [
            {"kind": "tcp"}, {"kind": "udp", "bitrate": "1M"}]}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let sid = run_suite(&http, "no%20server", json!({"host": PC1_IP}));
    let v = wait_suite(&http, sid, Duration::from_secs(30));
    assert_eq!(v["suite"]["status"], "failed", "{v}");
    for s in v["steps"].as_array().into_iter().flatten() {
        assert_eq!(s["status"], "failed", "{v}");
        assert!(s["run_id"].is_i64(), "{v}");
        assert!(s["error"].as_str().unwrap_or("").contains("refused"), "{v}");
    }

    // Stop: the running test ends aborted, the rest are skipped and never run.
    let sid = run_suite(&http, "seed 001 table", json!({"host": PC1_IP, "time": 10}));
    let t = Instant::now();
    loop {
        let v = http.get_json(&format!("/api/suites/{sid}"));
        if v["steps"][0]["status"] == "running" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{v}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The stop comes mid-test: a duration into the 10 s test.
    std::thread::sleep(Duration::from_secs(1));
    let r = http.call("POST", &format!("/api/suites/{sid}/stop"));
    assert_eq!(r.status, 202, "{}", r.body);
    let v = wait_suite(&http, sid, Duration::from_secs(15));
    assert!(
        t.elapsed() < Duration::from_secs(9),
        "stopped well before the 10 s test ended"
    );
    assert_eq!(v["suite"]["status"], "aborted", "{v}");
    let steps = v["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), 8);
    assert_eq!(steps[0]["status"], "aborted", "{v}");
    assert!(
        steps[1..]
            .iter()
            .all(|s| s["status"] == "skipped" && s["run_id"].is_null()),
        "{v}"
    );
    let r = http.call("POST", &format!("/api/suites/{sid}/stop"));
    assert_eq!(r.status, 409, "{}", r.body);
    let page = http.get(&format!("/suites/{sid}")).body;
    assert!(
        page.contains("skipped") && !page.contains("stop-suite"),
        "{page}"
    );
}
