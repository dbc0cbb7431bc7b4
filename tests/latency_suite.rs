//! Latency under load as a suite step (issue 14): a saved suite with an iperf3 TCP step and a
//! `latency` step runs against stock `iperf3 -s` in the pc1 namespace (ICMP answered by pc1's
//! kernel, over the lab's veth pair); the latency run is recorded as part of the suite, and its
//! figures are in the suite's API JSON, on the suite page, in the CSV / Markdown exports, in
//! compare and in the thresholds' verdict. Bad latency steps are refused with the step named.

mod common;
use common::http::*;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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

#[test]
fn suite_with_a_tcp_and_a_latency_step_against_stock_iperf3() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (_, mut http) = daemon(&mut lab, &board, 8098, &[]);
    set_up(&lab, &mut http);

    // Bad latency steps: 400 naming the step and the field; nothing stored.
    for (step, want) in [
        (
            json!({"kind": "latency", "streams": 0}),
            "step 2 (latency): streams must be 1..32 (-P)",
        ),
        (
            json!({"kind": "latency", "load": "sideways"}),
            "step 2 (latency): load must be up, down or both, not 'sideways'",
        ),
        (
            json!({"kind": "latency", "time": 3}),
            "step 2 (latency): a latency step has no 'time'",
        ),
        (
            json!({"kind": "latency", "loaded": 3, "thresholds": {"max_latency_increase_ms": "5"}}),
            "step 2 (latency): thresholds: max_latency_increase_ms must be a number",
        ),
    ] {
        let body = json!({"name": "bad", "steps": [{"kind": "tcp"}, step]});
        let r = http.api("POST", "/api/suite-defs", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(want), "{body}: {}", r.body);
    }
    assert_eq!(http.get("/api/suite-defs/bad").status, 404);

    let def = json!({"name": "lat", "time": 2, "steps": [
        {"kind": "tcp", "direction": "send"},
        {"kind": "latency", "load": "down", "streams": 1, "idle": 1, "loaded": 3,
         "thresholds": {"max_latency_increase_ms": 1000}}
    ]});
    let r = http.api("POST", "/api/suite-defs", &def);
    assert_eq!(r.status, 201, "{}", r.body);
    let r = http.api(
        "POST",
        "/api/suite-defs/lat/run",
        &json!({"host": PC1_IP, "label": "veth"}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let sid = r.json()["id"].as_i64().expect("suite id");
    let v = wait_suite(&http, sid, Duration::from_secs(60));
    eprintln!("suite: {v}");
    assert_eq!(v["suite"]["status"], "completed", "{v}");
    let steps = v["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["label"], "TCP send");
    assert!(num(&steps[0], "/bitrate_bps") > 1e6, "{}", steps[0]);
    assert!(steps[0].get("latency").is_none(), "{}", steps[0]);

    // The latency row: its figures are the stored run's, which belongs to the suite.
    let l = &steps[1];
    assert_eq!(l["label"], "Latency down");
    assert_eq!(l["status"], "completed");
    let rid = l["run_id"].as_i64().expect("run id");
    let run = http.get_json(&format!("/api/runs/{rid}"));
    assert_eq!(run["run"]["kind"], "latency", "{run}");
    assert_eq!(run["run"]["suite_id"], sid, "{run}");
    let s = &run["run"]["summary"];
    let idle = num(l, "/latency/idle_p50_ms");
    assert!(idle > 0.0 && idle < 1.0, "idle p50 {idle} ms on veth");
    assert_eq!(idle, num(s, "/idle/rtt_ms/p50"));
    assert_eq!(
        num(l, "/latency/loaded_p50_ms"),
        num(s, "/loaded/rtt_ms/p50")
    );
    assert_eq!(
        num(l, "/latency/loaded_p99_ms"),
        num(s, "/loaded/rtt_ms/p99")
    );
    assert_eq!(num(l, "/latency/rpm"), num(s, "/rpm"));
    // 1 + 3 + 1 s at 10 ms: about 500 probes, nearly all answered on veth.
    let sent = num(l, "/latency/probes_sent");
    assert!((400.0..=600.0).contains(&sent), "probes sent {sent}");
    assert_eq!(sent, num(s, "/probes/sent"));
    assert!(num(l, "/latency/probes_lost") < sent * 0.02, "{l}");
    let goodput = num(l, "/latency/bits_per_second");
    assert!(goodput > 1e6, "load goodput {goodput}");
    assert_eq!(num(l, "/bitrate_bps"), goodput);
    // The threshold was checked against the increase.
    assert_eq!(v["verdict"]["result"], "PASS", "{v}");
    let check = &l["verdict"]["checks"][0];
    assert_eq!(check["key"], "max_latency_increase_ms", "{l}");
    assert_eq!(num(check, "/value"), num(s, "/increase_ms"));

    // The suite page: a row with the latency figures.
    let page = http.get(&format!("/suites/{sid}")).body;
    assert!(page.contains("<th>Latency under load</th>"), "{page}");
    let row = page
        .lines()
        .find(|x| x.contains("<td>Latency down</td>"))
        .unwrap_or_else(|| panic!("no latency row: {page}"));
    assert!(
        row.contains(&format!("idle p50 {idle:.2} ms · loaded p50 ")),
        "{row}"
    );
    assert!(row.contains(" · RPM "), "{row}");
    assert!(row.contains(&format!("/runs/{rid}")), "{row}");

    // CSV: the latency columns hold the row's figures, empty for the TCP row (lost_where,
    // the last column, is empty: nothing was lost).
    let csv = http.get(&format!("/suites/{sid}/export.csv")).body;
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].ends_with(
            ",idle_p50_ms,loaded_p50_ms,loaded_p99_ms,latency_increase_ms,rpm,lost_where"
        ),
        "{csv}"
    );
    assert!(lines[1].ends_with(",,,,,,"), "{csv}");
    let f: Vec<&str> = lines[2].rsplit(',').collect();
    assert_eq!(f[0], "", "{csv}");
    assert_eq!(f[5].parse::<f64>().ok(), Some(idle), "{csv}");
    assert_eq!(f[1].parse::<f64>().ok(), Some(num(s, "/rpm")), "{csv}");
    // Markdown and compare.
    let md = http.get(&format!("/suites/{sid}/export.md")).body;
    assert!(md.contains("Latency under load"), "{md}");
    assert!(md.contains("| Latency down |"), "{md}");
    let cmp = http
        .get(&format!("/api/compare?suites={sid}&format=text"))
        .body;
    let line = cmp
        .lines()
        .find(|x| x.starts_with("Latency down"))
        .unwrap_or_else(|| panic!("{cmp}"));
    assert!(
        line.contains("loaded p50 ") && line.contains("RPM "),
        "{line}"
    );
}
