//! Several ports at once and the monitor (issue 5): a multi-port run in the seed-000
//! topology (pc1 — eth0 board eth1 — pc2) with stock iperf3 servers on both PCs; the legs'
//! bytes must show up on their own ports' counters, CPU per core must be sampled every second,
//! and the ceiling of a veth port must be "unknown", never guessed.
mod common;
use common::*;
use std::time::Duration;

fn sum(v: &serde_json::Value, port: &str, field: &str) -> f64 {
    v["ports"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["ifname"] == port)
                .map(|s| s[field].as_f64().unwrap_or(0.0))
                .sum()
        })
        .unwrap_or(0.0)
}

#[test]
fn multi_port_legs_use_their_own_ports() {
    let mut lab = Lab::with_pc2();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let pc2 = lab.pc2.clone().unwrap_or_default();
    lab.spawn(&pc1, "iperf3-pc1", "iperf3", &["-s"]);
    lab.spawn(&pc2, "iperf3-pc2", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    lab.wait_port(&pc2, PC2_IP, 5201);
    let data = lab.dir().join("data");
    let d = data.to_str().unwrap_or("data").to_string();
    // Leg 1 sends 200 Mbit/s out of eth0; leg 2 receives 100 Mbit/s on eth1.
    let (code, out, err) = lab.run(
        &board,
        "multi",
        bin(),
        &[
            "multi",
            "--leg",
            &format!("eth0={PC1_IP},send,b=200M"),
            "--leg",
            &format!("eth1={PC2_IP},receive,b=100M"),
            "-t",
            "3",
            "--data",
            &d,
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out, "multi --json");
    assert_eq!(v["run"]["kind"], "multi");
    assert_eq!(v["run"]["status"], "completed");
    assert_eq!(v["run"]["bind_dev"], "eth0,eth1");
    let legs = v["legs"].as_array().cloned().unwrap_or_default();
    assert_eq!(legs.len(), 2);
    let b1 = num(&legs[0]["run"], "/bytes");
    let b2 = num(&legs[1]["run"], "/bytes");
    assert_eq!(legs[0]["run"]["bind_dev"], "eth0");
    assert_eq!(legs[1]["run"]["direction"], "receive");
    assert_eq!(legs[0]["run"]["parent_id"], v["run"]["id"]);
    // 200 Mbit/s × 3 s = 75 MB; 100 Mbit/s × 3 s = 37.5 MB (paced, within 5 %).
    assert!((b1 - 75e6).abs() < 75e6 * 0.05, "leg 1 moved {b1} bytes");
    assert!(
        (b2 - 37.5e6).abs() < 37.5e6 * 0.05,
        "leg 2 moved {b2} bytes"
    );
    // The aggregate is the legs' sum.
    let agg = num(&v["run"], "/receiver_bps");
    let legs_sum = num(&legs[0]["run"], "/receiver_bps") + num(&legs[1]["run"], "/receiver_bps");
    assert!((agg - legs_sum).abs() < 1.0, "{agg} vs {legs_sum}");

    // Port counters over the run: leg 1's payload left through eth0 (plus headers, < 6 %),
    // leg 2's came in on eth1; the other directions carry only ACKs.
    let eth0_tx = sum(&v, "eth0", "tx_bytes");
    let eth0_rx = sum(&v, "eth0", "rx_bytes");
    let eth1_rx = sum(&v, "eth1", "rx_bytes");
    let eth1_tx = sum(&v, "eth1", "tx_bytes");
    assert!(
        eth0_tx >= b1 && eth0_tx < b1 * 1.06 + 1e6,
        "eth0 tx {eth0_tx} vs leg 1 {b1}"
    );
    assert!(
        eth1_rx >= b2 && eth1_rx < b2 * 1.06 + 1e6,
        "eth1 rx {eth1_rx} vs leg 2 {b2}"
    );
    assert!(eth0_rx < b1 * 0.05, "eth0 rx {eth0_rx}: only ACKs expected");
    assert!(eth1_tx < b2 * 0.05, "eth1 tx {eth1_tx}: only ACKs expected");

    // CPU per core every second: the all-cores line and one per core, shares adding to 100.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = v["cpu"].as_array().cloned().unwrap_or_default();
    let all: Vec<_> = cpu.iter().filter(|c| c["cpu"] == -1).collect();
    assert!(all.len() >= 3, "{} samples in a 3 s run", all.len());
    let times: Vec<f64> = all.iter().map(|c| c["t"].as_f64().unwrap_or(0.0)).collect();
    assert!(
        times.windows(2).all(|w| w[1] > w[0] && w[1] - w[0] <= 1.3),
        "one sample a second: {times:?}"
    );
    assert_eq!(cpu.len(), all.len() * (cores + 1));
    for c in &cpu {
        let total: f64 = [
            "user", "system", "iowait", "irq", "softirq", "steal", "idle",
        ]
        .iter()
        .map(|k| c[*k].as_f64().unwrap_or(-1.0))
        .sum();
        assert!((total - 100.0).abs() < 0.01, "shares add to {total}: {c}");
    }
    // veth is a virtual port: no physical ceiling, never a guessed one.
    for l in &legs {
        assert!(l["analysis"]["ceiling_bps"].is_null(), "{}", l["analysis"]);
        assert!(
            l["analysis"]["ceiling_basis"]
                .as_str()
                .unwrap_or_default()
                .contains("virtual port"),
            "{}",
            l["analysis"]
        );
    }
    // Stored: the history lists the multi run and its legs.
    let (code, out, _) = lab.run(
        &board,
        "runs",
        bin(),
        &["runs", "list", "--data", &d, "--json"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0));
    let runs = json(&out, "runs list");
    assert_eq!(runs.as_array().map(|a| a.len()), Some(3));
}

#[test]
fn multi_port_bad_input_changes_nothing() {
    let mut lab = Lab::with_pc2();
    let board = lab.board.clone();
    let data = lab.dir().join("data");
    let d = data.to_str().unwrap_or("data").to_string();
    for (args, msg) in [
        (vec!["--leg", "eth0=192.0.2.2"], "at least 2 legs"),
        (
            vec!["--leg", "eth0=192.0.2.2", "--leg", "eth0=198.51.100.2"],
            "port eth0 is already used by leg 1",
        ),
        (
            vec!["--leg", "eth0=192.0.2.2", "--leg", "eth1=198.51.100.2,fast"],
            "unknown option 'fast'",
        ),
        (
            vec!["--leg", "eth0=192.0.2.2", "--leg", "nosuch0=198.51.100.2"],
            "leg 2:",
        ),
    ] {
        let mut a = vec!["multi", "-t", "1", "--data", &d];
        a.extend(args.iter().copied());
        let (code, out, err) = lab.run(&board, "multi-bad", bin(), &a, Duration::from_secs(20));
        assert_eq!(code, Some(1), "{args:?}: {out}{err}");
        assert!(err.contains(msg), "{args:?}: expected '{msg}' in {err}");
    }
    // Nothing was recorded.
    if data.join("netperfd.sqlite").exists() {
        let (_, out, _) = lab.run(
            &board,
            "runs",
            bin(),
            &["runs", "list", "--data", &d, "--json"],
            Duration::from_secs(20),
        );
        assert_eq!(json(&out, "runs list").as_array().map(|a| a.len()), Some(0));
    }
}

#[test]
fn multi_port_run_from_the_api_with_charts_and_verdicts() {
    use common::http::*;
    let mut lab = Lab::with_pc2();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let pc2 = lab.pc2.clone().unwrap_or_default();
    lab.spawn(&pc1, "iperf3-pc1", "iperf3", &["-s"]);
    lab.spawn(&pc2, "iperf3-pc2", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    lab.wait_port(&pc2, PC2_IP, 5201);
    let (_, mut http) = daemon(&mut lab, &board, 8095, &[]);
    set_up(&lab, &mut http);

    // Bad input: one leg, a port used twice, a leg without a port — 400, nothing recorded.
    for (legs, msg) in [
        (
            serde_json::json!([{"host": PC1_IP, "bind": "eth0"}]),
            "at least 2 legs",
        ),
        (
            serde_json::json!([{"host": PC1_IP, "bind": "eth0"}, {"host": PC2_IP, "bind": "eth0"}]),
            "already used by leg 1",
        ),
        (
            serde_json::json!([{"host": PC1_IP, "bind": "eth0"}, {"host": PC2_IP}]),
            "leg 2: choose the board port",
        ),
        (
            serde_json::json!([{"host": PC1_IP, "bind": "eth0"}, {"host": PC2_IP, "bind": "eth1", "duration": -3}]),
            "leg 2:",
        ),
    ] {
        let r = http.api(
            "POST",
            "/api/runs/multi",
            &serde_json::json!({ "legs": legs }),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.contains(msg), "expected '{msg}' in {}", r.body);
    }
    assert_eq!(
        http.get_json("/api/runs").as_array().map(|a| a.len()),
        Some(0)
    );
    // Without the CSRF token nothing starts.
    let r = http.json(
        "POST",
        "/api/runs/multi",
        vec![],
        &serde_json::json!({"legs": [{"host": PC1_IP, "bind": "eth0"}, {"host": PC2_IP, "bind": "eth1"}]}),
    );
    assert_eq!(r.status, 403, "{}", r.body);

    let r = http.api(
        "POST",
        "/api/runs/multi",
        &serde_json::json!({"legs": [
            {"host": PC1_IP, "bind": "eth0", "duration": 3, "bitrate": "150M"},
            {"host": PC2_IP, "bind": "eth1", "duration": 3, "bitrate": "50M", "direction": "receive"}
        ]}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("run id");
    let v = wait_run(&http, id, Duration::from_secs(30));
    assert_eq!(v["run"]["status"], "completed", "{v}");
    assert_eq!(v["legs"].as_array().map(|a| a.len()), Some(2));

    let c = http.get_json(&format!("/api/runs/{id}/chart"));
    let labels = |k: &str| -> Vec<String> {
        c[k]["series"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| s["label"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        labels("throughput"),
        ["leg 1 eth0 sender sum", "leg 2 eth1 receiver sum"]
    );
    assert_eq!(
        labels("ports"),
        ["eth0 rx", "eth0 tx", "eth1 rx", "eth1 tx"]
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(labels("cpu").len(), cores + 1);
    // Leg 1's paced 150 Mbit/s shows on eth0 tx in the middle of the run.
    let t = c["ports"]["t"].as_array().cloned().unwrap_or_default();
    let eth0_tx = c["ports"]["series"][1]["values"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mid: Vec<f64> = t
        .iter()
        .zip(&eth0_tx)
        .filter(|(t, _)| t.as_f64().unwrap_or(0.0) > 1.5 && t.as_f64().unwrap_or(0.0) < 3.0)
        .filter_map(|(_, v)| v.as_f64())
        .collect();
    assert!(!mid.is_empty(), "{c}");
    for r in mid {
        assert!(
            r > 120e6 && r < 200e6,
            "eth0 tx {r} bit/s while leg 1 sends 150M"
        );
    }

    let a = http.get_json(&format!("/api/runs/{id}/analysis"));
    for l in a["legs"].as_array().cloned().unwrap_or_default() {
        assert!(l["analysis"]["ceiling_bps"].is_null(), "veth: {l}");
        assert!(l["analysis"]["verdict"].is_string());
    }
    let page = http.get(&format!("/runs/{id}")).body;
    for want in [
        "Multi-port run: 2 legs",
        "<h2>Legs</h2>",
        "eth1",
        "CPU per core",
        "id=\"chart-throughput\"",
        "unknown",
    ] {
        assert!(page.contains(want), "run page lacks {want}");
    }
    let leg_page = http.get(&format!("/runs/{}", a["legs"][0]["id"])).body;
    assert!(leg_page.contains(&format!("multi-port run {id}")));
}
