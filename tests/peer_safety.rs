//! Field safety (issue 22 items 1 and 2): peer type "auto" probes every stock server version
//! without harming it (the server still serves a stock client afterwards), and a run given a
//! board port leaves through that port's device — counted on its counters, nothing on the
//! other port — for every run kind that takes a board port.
//!
//! Stock versions beyond the host's own (iperf 2.1.8, iperf3 3.12) come from
//! `scripts/stock-peers.sh` (Debian's builds of iperf 2.0.14a / 2.2.1 and iperf3 3.9 / 3.18);
//! `scripts/test.sh` fetches them and sets `NETPERFD_STOCK_PEERS`.
mod common;
use common::http::{daemon, set_up, wait_run};
use common::{Lab, PC1_IP};
use serde_json::json;
use std::process::Command;
use std::time::Duration;

/// Stock servers: (label, binary, iperf3?). The versions from stock-peers.sh are required:
/// a missing one fails with the command that fetches it.
fn stock_servers() -> Vec<(String, String, bool)> {
    let dir = std::env::var("NETPERFD_STOCK_PEERS")
        .unwrap_or_else(|_| "/var/cache/netperfd-stock-peers".into());
    let mut v = vec![
        ("iperf 2.1.8".to_string(), "iperf".to_string(), false),
        ("iperf3 3.12".to_string(), "iperf3".to_string(), true),
    ];
    for name in [
        "iperf-2.0.14a",
        "iperf-2.2.1",
        "iperf3-3.9",
        "iperf3-3.18",
        "iperf3-newest",
    ] {
        let path = format!("{dir}/bin/{name}");
        assert!(
            std::path::Path::new(&path).exists(),
            "{path} is missing: run scripts/stock-peers.sh {dir}"
        );
        let (tool, ver) = name.split_once('-').unwrap_or((name, ""));
        v.push((format!("{tool} {ver}"), path, tool == "iperf3"));
    }
    v
}

#[test]
fn auto_probe_leaves_every_stock_server_serving() {
    let servers = stock_servers();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let (_, mut http) = daemon(&mut lab, &board, 8131, &[]);
    set_up(&lab, &mut http);
    for (i, (label, bin, is3)) in servers.iter().enumerate() {
        let port = 5301 + i as u16;
        let p = port.to_string();
        let srv = lab.spawn(&pc1, &format!("srv{i}"), bin, &["-s", "-p", &p]);
        lab.wait_port(&pc1, PC1_IP, port);
        let r = http.api(
            "POST",
            "/api/runs",
            &json!({"host": PC1_IP, "port": p, "peer_type": "auto", "duration": 1}),
        );
        assert_eq!(r.status, 201, "{label}: {}", r.body);
        let id = r.json()["id"].as_i64().expect("run id");
        let v = wait_run(&http, id, Duration::from_secs(30));
        let want = if *is3 { "iperf3" } else { "iperf2" };
        assert_eq!(v["run"]["kind"], want, "{label}: {v}");
        assert_eq!(v["run"]["status"], "completed", "{label}: {v}");
        assert!(
            v["run"]["bytes"].as_i64().unwrap_or(0) > 100_000,
            "{label}: {v}"
        );
        // The probe and our run left the server as it was: its own stock client is served.
        let (code, out, err) = lab.run(
            &board,
            &format!("cli{i}"),
            bin,
            &["-c", PC1_IP, "-p", &p, "-t", "1"],
            Duration::from_secs(20),
        );
        assert_eq!(
            code,
            Some(0),
            "{label}: stock client after auto: {out}{err}"
        );
        if !lab.alive(srv) {
            let (so, se) = lab.output(&format!("srv{i}"));
            let code = lab.wait(srv, Duration::from_secs(1));
            panic!("{label}: the server died (exit {code:?}): {so}{se}");
        }
        lab.kill(srv);
        let (so, se) = lab.output(&format!("srv{i}"));
        assert!(
            !so.contains("failed") && !se.contains("Segmentation"),
            "{label}: server said {so}{se}"
        );
    }
}

/// Bytes the board's eth0 and eth1 sent plus received, read in the board's namespace.
fn port_bytes(board: &str) -> (u64, u64) {
    let read = |port: &str| -> u64 {
        ["tx_bytes", "rx_bytes"]
            .iter()
            .map(|c| {
                let o = Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        board,
                        "cat",
                        &format!("/sys/class/net/{port}/statistics/{c}"),
                    ])
                    .output()
                    .expect("read counter");
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
            })
            .sum()
    };
    (read("eth0"), read("eth1"))
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip");
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The same host address, 203.0.113.5, lives in pc1 (behind eth0) and in pc2 (behind eth1);
/// the board's main route prefers eth1. A run told to use eth0 must leave through eth0: with
/// the source address alone it would follow the route out of eth1 (the field report: 3
/// Gbit/s out of eth1 while the page said eth0).
#[test]
fn a_chosen_board_port_carries_the_run_for_every_kind() {
    const HOST: &str = "203.0.113.5";
    let mut lab = Lab::with_pc2();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let pc2 = lab.pc2.clone().expect("pc2");
    for ns in [&pc1, &pc2] {
        ip(&["-n", ns, "addr", "add", &format!("{HOST}/32"), "dev", "lo"]);
    }
    // pc2 can answer 192.0.2.1 too, so a run that leaks out of eth1 would complete and be
    // caught by the counters rather than by a timeout.
    ip(&[
        "-n",
        &pc2,
        "route",
        "add",
        "192.0.2.0/24",
        "via",
        "198.51.100.1",
    ]);
    ip(&[
        "-n",
        &board,
        "route",
        "add",
        HOST,
        "via",
        "198.51.100.2",
        "dev",
        "eth1",
        "metric",
        "10",
    ]);
    ip(&[
        "-n",
        &board,
        "route",
        "add",
        HOST,
        "via",
        "192.0.2.2",
        "dev",
        "eth0",
        "metric",
        "20",
    ]);
    let www = lab.dir().join("www");
    std::fs::create_dir_all(&www).expect("www");
    std::fs::write(www.join("blob"), vec![7u8; 20_000_000]).expect("blob");
    let www_s = www.to_string_lossy().to_string();
    for ns in [&pc1, &pc2] {
        let tag = if *ns == pc1 { "1" } else { "2" };
        lab.spawn(ns, &format!("i3-{tag}"), "iperf3", &["-s"]);
        lab.spawn(ns, &format!("i2-{tag}"), "iperf", &["-s"]);
        lab.spawn(ns, &format!("i2u-{tag}"), "iperf", &["-s", "-u"]);
        lab.spawn(
            ns,
            &format!("www-{tag}"),
            "python3",
            &[
                "-m",
                "http.server",
                "8099",
                "--bind",
                HOST,
                "--directory",
                &www_s,
            ],
        );
        lab.wait_port(ns, HOST, 5201);
        lab.wait_port(ns, HOST, 5001);
        lab.wait_port(ns, HOST, 8099);
    }
    let (_, mut http) = daemon(&mut lab, &board, 8132, &[]);
    set_up(&lab, &mut http);

    let kinds: Vec<(&str, &str, serde_json::Value)> = vec![
        (
            "iperf3 TCP",
            "/api/runs",
            json!({"host": HOST, "bind": "eth0", "duration": 2, "bitrate": "50M"}),
        ),
        (
            "iperf 2 TCP",
            "/api/runs",
            json!({"host": HOST, "bind": "eth0", "peer_type": "iperf2", "duration": 2, "bitrate": "50M"}),
        ),
        (
            "iperf 2 UDP",
            "/api/runs",
            json!({"host": HOST, "bind": "eth0", "peer_type": "iperf2", "protocol": "udp", "duration": 2, "bitrate": "50M"}),
        ),
        (
            "http-get",
            "/api/http-get",
            json!({"url": format!("http://{HOST}:8099/blob"), "bind": "eth0", "connections": 2}),
        ),
    ];
    for (label, route, body) in kinds {
        let before = port_bytes(&board);
        let r = http.api("POST", route, &body);
        assert!(
            r.status == 201 || r.status == 200,
            "{label}: {} {}",
            r.status,
            r.body
        );
        let id = r.json()["id"].as_i64().expect("run id");
        let v = wait_run(&http, id, Duration::from_secs(40));
        assert_eq!(v["run"]["status"], "completed", "{label}: {v}");
        let after = port_bytes(&board);
        let (d0, d1) = (after.0 - before.0, after.1 - before.1);
        // 50 Mbit/s for 2 s is 12.5 MB sent; the download receives the 20 MB blob.
        assert!(d0 > 10_000_000, "{label}: eth0 carried {d0} B, eth1 {d1} B");
        assert!(
            d1 < 100_000,
            "{label}: eth1 carried {d1} B (eth0 {d0} B): the run left the wrong port"
        );
    }
}
