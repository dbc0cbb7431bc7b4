//! Forwarding runs and monitor-only runs end to end (seed 000, scenario 5), in network
//! namespaces: `netperfd peer` in pc1, stock `iperf3 -s` in pc2, the board (CLI or daemon) in
//! the board namespace turning on forwarding with MASQUERADE for the run. Independent
//! observers: the board's /sys/class/net counters, /proc/sys, `nft`/`iptables-save`, and what
//! stock iperf3 on pc2 saw.

mod common;
use common::http::*;
use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const TOKEN: &str = "lab-token-0123456789";

fn ns_out(ns: &str, prog: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, prog])
        .args(args)
        .output()
        .expect("run in namespace");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn counter(ns: &str, dev: &str, what: &str) -> u64 {
    ns_out(
        ns,
        "cat",
        &[&format!("/sys/class/net/{dev}/statistics/{what}")],
    )
    .parse()
    .unwrap_or_else(|_| panic!("no counter {what} of {dev} in {ns}"))
}

fn ip_forward(ns: &str) -> String {
    ns_out(ns, "cat", &["/proc/sys/net/ipv4/ip_forward"])
}

/// Whether any netperfd firewall rule is left in `ns` (nft table or iptables chains).
fn our_rules_left(ns: &str) -> bool {
    let nft = Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "list", "table", "inet", "netperfd",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let ipt = ns_out(ns, "iptables-save", &[]);
    nft || ipt.contains("NETPERFD")
}

fn token_file(lab: &Lab, token: &str) -> String {
    lab.token_file(token)
}

fn data_dir(lab: &Lab) -> String {
    lab.dir().join("data").to_str().expect("utf-8").to_string()
}

/// Seed 000's lab with the agent in pc1 and stock iperf3 -s in pc2 ([`Lab::with_agent`]).
fn seed_lab() -> (Lab, String, String, String) {
    let (lab, _) = Lab::with_agent(TOKEN);
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let pc2 = lab.pc2.clone().expect("pc2");
    assert_eq!(ip_forward(&board), "0");
    (lab, board, pc1, pc2)
}

fn agent_req(ns: &str, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let (m, p, t) = (method.to_string(), path.to_string(), token.to_string());
    in_ns(ns, move || {
        let r = ureq::request(&m, &format!("http://{PC1_IP}:5280{p}"))
            .set("Authorization", &format!("Bearer {t}"))
            .timeout(Duration::from_secs(10));
        let res = match body {
            Some(b) => r.send_json(b),
            None => r.call(),
        };
        let resp = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{m} {p}: {e}"),
        };
        let status = resp.status();
        let v = resp.into_json().unwrap_or(Value::Null);
        (status, v)
    })
}

fn forward_cli(lab: &mut Lab, name: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let data = data_dir(lab);
    let mut a = vec!["forward", "--data", &data, "--json"];
    a.extend_from_slice(args);
    let board = lab.board.clone();
    let (code, out, err) = lab.run(&board, name, bin(), &a, Duration::from_secs(90));
    let v = if out.trim().is_empty() {
        Value::Null
    } else {
        json(&out, "netperfd forward --json")
    };
    (code, v, err)
}

#[test]
fn seed_000_forwarding_run_pc1_to_pc2_through_the_board_with_nat() {
    let (mut lab, board, _pc1, _pc2) = seed_lab();
    let tf = token_file(&lab, TOKEN);
    let eth0_rx = counter(&board, "eth0", "rx_bytes");
    let eth1_tx = counter(&board, "eth1", "tx_bytes");
    let (code, run, err) = forward_cli(
        &mut lab,
        "forward",
        &[
            "--peer",
            "http://192.0.2.2:5280",
            "--token-file",
            &tf,
            "--to",
            PC2_IP,
            "--in",
            "eth0",
            "--out",
            "eth1",
            "--nat",
            "-t",
            "3",
        ],
    );
    assert_eq!(code, Some(0), "{err}\n{run}");
    let eth0_rx = counter(&board, "eth0", "rx_bytes") - eth0_rx;
    let eth1_tx = counter(&board, "eth1", "tx_bytes") - eth1_tx;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["kind"], "forward");
    assert_eq!(run["direction"], "send");
    let s = &run["summary"];
    // The peer's figures (its own iperf3 report, stock server's receiver side).
    let sent = num(s, "/peer_report/end/sum_sent/bytes");
    let received = num(s, "/peer_report/end/sum_received/bytes");
    assert!(received > 10e6, "{s}");
    let rcv_bps = run["receiver_bps"].as_f64().expect("receiver_bps");
    assert!(rcv_bps > 50e6, "forwarded goodput {rcv_bps}");
    // The board really forwarded it: its counters moved by the payload plus headers (a few %).
    let fwd_rx = num(s, "/ports/eth0/rx_bytes");
    let fwd_tx = num(s, "/ports/eth1/tx_bytes");
    for (what, v) in [("eth0 rx", fwd_rx), ("eth1 tx", fwd_tx)] {
        let ratio = v / sent;
        assert!(
            (1.0..1.08).contains(&ratio),
            "{what} {v} bytes vs the peer's {sent} sent: ratio {ratio}"
        );
    }
    assert_eq!(num(s, "/forwarded/eth0->eth1/bytes"), fwd_tx);
    assert!(
        num(s, "/forwarded/eth0->eth1/packets_per_second") > 1000.0,
        "{s}"
    );
    // An independent reading of /sys around the whole command agrees (it also holds the
    // agent's HTTP and the control connection, hence the upper slack).
    for (what, observed, recorded) in [("eth0 rx", eth0_rx, fwd_rx), ("eth1 tx", eth1_tx, fwd_tx)] {
        let r = observed as f64 / recorded;
        assert!(
            (1.0..1.03).contains(&r),
            "{what}: /sys {observed} vs run {recorded}"
        );
    }
    // NAT: pc2's stock iperf3 saw the board's egress address.
    let (server_out, _) = lab.output("iperf3-s");
    assert!(
        server_out.contains(&format!("Accepted connection from {BOARD_IP2}")),
        "{server_out}"
    );
    assert_eq!(s["nat"]["enabled_by_run"], true, "{s}");
    assert_eq!(s["nat"]["restored"], true, "{s}");
    // Conntrack held the NAT'd connections (control + data) while the run went.
    if !ns_out(
        &board,
        "cat",
        &["/proc/sys/net/netfilter/nf_conntrack_count"],
    )
    .is_empty()
    {
        assert!(num(s, "/conntrack/peak") >= 2.0, "{s}");
    }
    // The monitor sampled CPU per core and the ports during the run.
    assert!(
        s["cpu"].as_array().map(|a| a.len()).unwrap_or(0) >= 2,
        "{s}"
    );
    assert!(
        num(s, "/ports/eth1/peak_tx_bits_per_second") >= num(s, "/ports/eth1/tx_bits_per_second"),
        "{s}"
    );
    // The agent's intervals are the run's intervals, stored in the history.
    let id = run["id"].as_i64().expect("run id").to_string();
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &board,
            bin(),
            "runs",
            "--data",
            &data_dir(&lab),
        ])
        .args(["export", &id, "--format", "csv"])
        .output()
        .expect("runs export");
    let csv = String::from_utf8_lossy(&out.stdout);
    let intervals = csv.lines().filter(|l| l.contains(",interval,")).count();
    assert!(intervals >= 3, "{csv}");
    // Nothing left enabled by the run.
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board), "firewall rules left behind");
    println!(
        "forwarded: peer sent {sent} B, received {received} B ({:.1} Mbit/s); board eth0 rx {fwd_rx} B, eth1 tx {fwd_tx} B; conntrack {}",
        rcv_bps / 1e6,
        s["conntrack"]
    );
}

#[test]
fn wrong_token_gets_401_runs_nothing_and_the_run_fails_with_nothing_left_enabled() {
    let (mut lab, board, _pc1, pc2) = seed_lab();
    // Straight to the agent: 401 with a wrong or missing token, nothing started.
    let spec = json!({"host": PC2_IP, "time": 1});
    let (st, v) = agent_req(
        &board,
        "POST",
        "/peer/v1/run",
        "wrong-token-xyz",
        Some(spec.clone()),
    );
    assert_eq!(st, 401, "{v}");
    assert!(
        v["error"].as_str().unwrap_or_default().contains("token"),
        "{v}"
    );
    let (st, _) = agent_req(&board, "GET", "/peer/v1/info", "", None);
    assert_eq!(st, 401);
    // The right token: info, a bad spec is 400 with the field named, an unknown job 404.
    let (st, v) = agent_req(&board, "GET", "/peer/v1/info", TOKEN, None);
    assert_eq!(st, 200, "{v}");
    assert!(
        v["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == PC1_IP),
        "{v}"
    );
    assert_eq!(v["busy"], false);
    let (st, v) = agent_req(
        &board,
        "POST",
        "/peer/v1/run",
        TOKEN,
        Some(json!({"host": PC2_IP, "parallel": 1000})),
    );
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("parallel"), "{v}");
    let (st, v) = agent_req(
        &board,
        "POST",
        "/peer/v1/run",
        TOKEN,
        Some(json!({"host": "-rf /", "time": 1})),
    );
    assert_eq!(st, 400, "{v}");
    let (st, _) = agent_req(&board, "GET", "/peer/v1/run/999", TOKEN, None);
    assert_eq!(st, 404);
    // One test at a time (the board does not forward yet, so this one hangs in connect).
    let (st, v) = agent_req(&board, "POST", "/peer/v1/run", TOKEN, Some(spec.clone()));
    assert_eq!(st, 201, "{v}");
    let job = v["id"].as_u64().expect("job id");
    let (st, v) = agent_req(&board, "POST", "/peer/v1/run", TOKEN, Some(spec.clone()));
    assert_eq!(st, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("another test"), "{v}");
    let (_, v) = agent_req(&board, "GET", "/peer/v1/info", TOKEN, None);
    assert_eq!(v["busy"], true);
    let (st, v) = agent_req(&board, "GET", &format!("/peer/v1/run/{job}"), TOKEN, None);
    assert_eq!((st, &v["status"]), (200, &json!("running")), "{v}");
    assert_eq!(v["spec"]["host"], PC2_IP);
    let (st, _) = agent_req(
        &board,
        "POST",
        &format!("/peer/v1/run/{job}/stop"),
        "bad-token-xx",
        None,
    );
    assert_eq!(st, 401);
    let (st, _) = agent_req(
        &board,
        "POST",
        &format!("/peer/v1/run/{job}/stop"),
        TOKEN,
        None,
    );
    assert_eq!(st, 202);
    let (server_out, _) = lab.output("iperf3-s");
    assert!(
        !server_out.contains("Accepted connection"),
        "a refused request reached pc2: {server_out}"
    );

    // The board with a wrong token: the run fails with the reason, the board is unchanged.
    let wrong = token_file(&lab, "not-the-lab-token");
    let (code, run, err) = forward_cli(
        &mut lab,
        "forward-bad",
        &[
            "--peer",
            "192.0.2.2",
            "--token-file",
            &wrong,
            "--to",
            PC2_IP,
            "--in",
            "eth0",
            "--out",
            "eth1",
            "--nat",
            "-t",
            "2",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(run["status"], "failed", "{run}");
    let e = run["error"].as_str().unwrap_or_default();
    assert!(e.contains("refused the token (HTTP 401)"), "{e}");
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board));
    // An agent that is not there: a clear error too.
    let tf = token_file(&lab, TOKEN);
    let (code, run, _) = forward_cli(
        &mut lab,
        "forward-gone",
        &[
            "--peer",
            "http://192.0.2.2:5999",
            "--token-file",
            &tf,
            "--to",
            PC2_IP,
            "--in",
            "eth0",
            "--out",
            "eth1",
            "--nat",
            "-t",
            "2",
        ],
    );
    assert_eq!(code, Some(1));
    assert!(
        run["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot reach the peer agent"),
        "{run}"
    );
    assert_eq!(ip_forward(&board), "0");
    // Bad input on the command line: refused before anything is recorded.
    let (code, run, err) = forward_cli(
        &mut lab,
        "forward-input",
        &[
            "--peer",
            "http://192.0.2.2:5280",
            "--token-file",
            &tf,
            "--to",
            PC2_IP,
            "--in",
            "eth0",
            "--out",
            "eth0",
        ],
    );
    assert_eq!(code, Some(2));
    assert_eq!(run, Value::Null);
    assert!(err.contains("two different ports"), "{err}");
    let _ = pc2;
}

#[test]
fn the_agent_refuses_to_start_without_a_usable_token() {
    let mut lab = Lab::new();
    let pc1 = lab.pc1.clone();
    let (code, _, err) = lab.run(
        &pc1,
        "agent-none",
        bin(),
        &["peer", "--listen", "127.0.0.1:5280"],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("token is required"), "{err}");
    // 8 characters were accepted before; 16 is the minimum now.
    let short = token_file(&lab, "8chars!!");
    let (code, _, err) = lab.run(
        &pc1,
        "agent-short",
        bin(),
        &["peer", "--listen", "127.0.0.1:5280", "--token-file", &short],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("16..256"), "{err}");
    let (code, _, err) = lab.run(
        &pc1,
        "agent-missing",
        bin(),
        &["peer", "--token-file", "/nonexistent/token"],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read the token file"), "{err}");
}

#[test]
fn monitor_only_run_records_a_stock_iperf3_flow_through_the_board_until_stopped() {
    let mut lab = Lab::with_pc2();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let pc2 = lab.pc2.clone().expect("pc2");
    // Someone else routes pc1 ↔ pc2 through the board (plain forwarding, routes both ways).
    ns_out(&pc1, "ip", &["route", "add", "default", "via", BOARD_IP]);
    ns_out(&pc2, "ip", &["route", "add", "default", "via", BOARD_IP2]);
    ns_out(&board, "sysctl", &["-qw", "net.ipv4.ip_forward=1"]);
    lab.spawn(&pc2, "iperf3-s", "iperf3", &["-s", "-1"]);
    lab.wait_port(&pc2, PC2_IP, 5201);
    let data = data_dir(&lab);
    let mon = lab.spawn(
        &board,
        "monitor",
        bin(),
        &[
            "monitor",
            "--ports",
            "eth0,eth1",
            "--label",
            "pc1 to pc2",
            "--data",
            &data,
            "--json",
        ],
    );
    // A duration, not an event: the monitor watches an idle link before the flow (its
    // summary's seconds and a peak above the mean are checked).
    std::thread::sleep(Duration::from_millis(1500));
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &["-c", PC2_IP, "-t", "3", "-J"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let client = json(&out, "iperf3 -J");
    let sent = num(&client, "/end/sum_sent/bytes");
    // And a quiet half second after it: a duration.
    std::thread::sleep(Duration::from_millis(500));
    // Stop it as a user would (Ctrl-C).
    let pid = lab.pid(mon).to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let code = lab.wait(mon, Duration::from_secs(15));
    let (out, err) = lab.output("monitor");
    assert_eq!(code, Some(0), "{out}\n{err}");
    let run = json(&out, &format!("netperfd monitor --json ({err})"));
    assert_eq!(run["kind"], "monitor");
    assert_eq!(run["status"], "completed");
    let s = &run["summary"];
    assert_eq!(s["label"], "pc1 to pc2");
    let secs = num(s, "/seconds");
    assert!((4.0..15.0).contains(&secs), "{secs}");
    for (ptr, what) in [
        ("/ports/eth0/rx_bytes", "eth0 rx"),
        ("/ports/eth1/tx_bytes", "eth1 tx"),
    ] {
        let v = num(s, ptr);
        let ratio = v / sent;
        assert!(
            (1.0..1.08).contains(&ratio),
            "{what}: {v} bytes vs stock iperf3's {sent}: {ratio}"
        );
    }
    let mean = num(s, "/ports/eth1/tx_bits_per_second");
    let expect = sent * 8.0 / secs;
    assert!(
        (mean / expect - 1.0).abs() < 0.1,
        "mean tx rate {mean} vs {expect}"
    );
    assert!(num(s, "/ports/eth0/rx_packets_per_second") > 100.0, "{s}");
    // The monitor's 1 s samples give the peak: above the mean over the whole run and near the
    // flow's own rate (it ran 3 of the ~5 s), and below the whole flow in one second.
    let peak = num(s, "/ports/eth1/peak_tx_bits_per_second");
    let flow = sent * 8.0 / 3.0;
    assert!(
        peak > mean && peak > flow * 0.7 && peak < sent * 8.0,
        "peak {peak} vs flow {flow}"
    );
    println!(
        "monitor: iperf3 sent {sent} B; eth0 rx {} B, eth1 tx {} B over {secs:.2} s",
        num(s, "/ports/eth0/rx_bytes"),
        num(s, "/ports/eth1/tx_bytes")
    );
}

// ---------------------------------------------------------------- the daemon: web UI and API

/// The daemon in the board namespace (no iperf3 server), logged in (tests/common/http.rs).
struct Web {
    /// The daemon's index in the lab's processes.
    idx: usize,
    h: Http,
}

impl Web {
    fn start(lab: &mut Lab) -> Web {
        let board = lab.board.clone();
        let (idx, mut h) = daemon(lab, &board, 8080, &["--iperf3-port", "0"]);
        set_up(lab, &mut h);
        Web { idx, h }
    }
    fn get(&self, path: &str) -> (u16, String) {
        let r = self.h.get(path);
        (r.status, r.body)
    }
    fn api(&self, method: &str, path: &str, v: Option<Value>) -> (u16, Value) {
        let r = match v {
            Some(v) => self.h.api(method, path, &v),
            None => self.h.call(method, path),
        };
        let b = r.body;
        (
            r.status,
            serde_json::from_str(&b).unwrap_or(Value::String(b)),
        )
    }
    /// A page form with the session's CSRF field added: status, Location, body.
    fn form(&self, path: &str, fields: &[(&str, &str)]) -> (u16, String, String) {
        let mut all = vec![("csrf", self.h.csrf.as_str())];
        all.extend_from_slice(fields);
        let r = self.h.form(path, &all);
        (r.status, r.location, r.body)
    }
    /// Wait (bounded) until run `id` is no longer live; its API view.
    fn wait_run(&self, id: i64, limit: Duration) -> Value {
        let t = std::time::Instant::now();
        loop {
            let (st, v) = self.api("GET", &format!("/api/runs/{id}"), None);
            assert_eq!(st, 200, "{v}");
            if v["live"] == false && v["run"]["status"] != "running" {
                return v;
            }
            assert!(t.elapsed() < limit, "run {id} still going: {v}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

#[test]
fn web_and_api_one_click_forwarding_and_monitor_runs_stored_in_history() {
    let (mut lab, board, _pc1, _pc2) = seed_lab();
    let w = Web::start(&mut lab);
    // The page offers both forms and the ports.
    let (st, page) = w.get("/forwarding");
    assert_eq!(st, 200);
    assert!(page.contains("action=\"/forwarding/run\"") && page.contains("no token stored yet"));
    assert!(page.contains("<option value=\"eth1\""), "{page}");

    // Bad input: a clear 400, nothing recorded, nothing changed.
    let (st, v) = w.api(
        "POST",
        "/api/forward",
        Some(
            json!({"peer": "http://192.0.2.2:5280", "token": TOKEN, "target": PC2_IP,
                    "ingress": "eth0", "egress": "eth7", "nat": true}),
        ),
    );
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("no port 'eth7'"),
        "{v}"
    );
    let (_, runs) = w.api("GET", "/api/runs", None);
    assert_eq!(runs.as_array().map(|a| a.len()), Some(0), "{runs}");
    // A wrong token: the run fails with the agent's 401, forwarding stays off.
    let (st, v) = w.api(
        "POST",
        "/api/forward",
        Some(
            json!({"peer": "http://192.0.2.2:5280", "token": "wrong-token-12345", "target": PC2_IP,
                    "ingress": "eth0", "egress": "eth1", "nat": true, "duration": 2}),
        ),
    );
    assert_eq!(st, 201, "{v}");
    let bad = w.wait_run(v["id"].as_i64().unwrap(), Duration::from_secs(30));
    assert_eq!(bad["run"]["status"], "failed");
    assert!(
        bad["run"]["error"].as_str().unwrap().contains("HTTP 401"),
        "{bad}"
    );
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board));

    // One click: the form with the right token (stored for later, never shown back).
    let (st, loc, body) = w.form(
        "/forwarding/run",
        &[
            ("peer", "http://192.0.2.2:5280"),
            ("token", TOKEN),
            ("target", PC2_IP),
            ("port", "5201"),
            ("ingress", "eth0"),
            ("egress", "eth1"),
            ("protocol", "tcp"),
            ("direction", "receive"),
            ("duration", "2"),
            ("parallel", "2"),
            ("nat", "on"),
        ],
    );
    assert_eq!(st, 303, "{body}");
    let id: i64 = loc.trim_start_matches("/runs/").parse().expect("run id");
    let v = w.wait_run(id, Duration::from_secs(60));
    let run = &v["run"];
    assert_eq!(run["status"], "completed", "{v}");
    assert_eq!(run["kind"], "forward");
    assert_eq!(run["direction"], "receive");
    assert!(
        v["intervals"].as_array().map(|a| a.len()).unwrap_or(0) >= 4,
        "{v}"
    );
    assert_eq!(v["streams"].as_array().map(|a| a.len()), Some(2), "{v}");
    let s = &run["summary"];
    // -R: PC2 sends, so the board forwards eth1 → eth0.
    let recv = num(s, "/peer_report/end/sum_received/bytes");
    let fwd = num(s, "/forwarded/eth1->eth0/bytes");
    assert!(
        (1.0..1.08).contains(&(fwd / recv)),
        "eth0 tx {fwd} vs received {recv}"
    );
    assert_eq!(s["nat"]["restored"], true);
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board));
    let (_, page) = w.get("/forwarding");
    assert!(page.contains("a token is stored (20 characters)"), "{page}");
    assert!(!page.contains(TOKEN), "the token is shown back");
    assert!(page.contains("eth1 → eth0: "), "{page}");
    let (st, rp) = w.get(&format!("/runs/{id}"));
    assert_eq!(st, 200);
    assert!(
        rp.contains("forwarded eth1-&#62;eth0: ") && rp.contains("conntrack entries: peak"),
        "{rp}"
    );
    let (_, peer) = w.api("GET", "/api/peer", None);
    assert_eq!(
        peer,
        json!({"url": "http://192.0.2.2:5280", "token_stored": true})
    );
    // The API with the stored token, UDP at a set rate.
    let (st, v) = w.api(
        "POST",
        "/api/forward",
        Some(json!({"peer": "http://192.0.2.2:5280", "target": PC2_IP, "ingress": "eth0",
                    "egress": "eth1", "nat": true, "duration": 2, "protocol": "udp", "bitrate": "50M"})),
    );
    assert_eq!(st, 201, "{v}");
    let u = w.wait_run(v["id"].as_i64().unwrap(), Duration::from_secs(60));
    assert_eq!(u["run"]["status"], "completed", "{u}");
    let us = &u["run"]["summary"];
    let pps = num(us, "/forwarded/eth0->eth1/packets_per_second");
    let bps = num(us, "/forwarded/eth0->eth1/bits_per_second");
    // The board's egress sent what the peer's UDP stream carried, plus headers.
    let udp_sent = num(us, "/peer_report/end/sum/bytes");
    let datagrams = num(us, "/peer_report/end/sum/packets");
    let secs = num(us, "/seconds");
    let ratio = num(us, "/forwarded/eth0->eth1/bytes") / udp_sent;
    assert!(
        (1.0..1.08).contains(&ratio),
        "UDP: eth1 tx vs sent {ratio}: {us}"
    );
    // Counters count what the ports pass: on veth a UDP GSO burst is one packet, so the packet
    // rate may be below the datagram rate, never above it.
    assert!(
        pps > 100.0 && pps <= datagrams / secs * 1.02,
        "UDP forwarded {pps} packets/s for {datagrams} datagrams in {secs} s"
    );

    // Stopping a forwarding run: the peer's test ends (aborted), forwarding goes off.
    let (st, v) = w.api(
        "POST",
        "/api/forward",
        Some(
            json!({"peer": "http://192.0.2.2:5280", "target": PC2_IP, "ingress": "eth0",
                    "egress": "eth1", "nat": true, "duration": 30}),
        ),
    );
    assert_eq!(st, 201, "{v}");
    let sid = v["id"].as_i64().unwrap();
    // The stop comes mid-run, the peer's test under way: a duration into the run.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(ip_forward(&board), "1");
    let (st, _) = w.api("POST", &format!("/api/runs/{sid}/stop"), None);
    assert_eq!(st, 202);
    let stopped = w.wait_run(sid, Duration::from_secs(20));
    assert_eq!(stopped["run"]["status"], "aborted", "{stopped}");
    assert_eq!(stopped["run"]["summary"]["nat"]["restored"], true);
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board));

    // Monitor-only: start, stop over the API, summary stored.
    let (st, v) = w.api(
        "POST",
        "/api/monitor",
        Some(json!({"ports": ["eth0", "eth1"], "label": "idle check"})),
    );
    assert_eq!(st, 201, "{v}");
    let mid = v["id"].as_i64().unwrap();
    // A duration, not an event: the monitor watches for a while (its summary's seconds are
    // checked to be at least 1).
    std::thread::sleep(Duration::from_millis(1500));
    let (_, page) = w.get("/forwarding");
    assert!(
        page.contains(&format!("action=\"/forwarding/stop/{mid}\"")),
        "no stop button"
    );
    let (st, _) = w.api("POST", &format!("/api/monitor/{mid}/stop"), None);
    assert_eq!(st, 202);
    let m = w.wait_run(mid, Duration::from_secs(10));
    assert_eq!(m["run"]["kind"], "monitor");
    assert_eq!(m["run"]["status"], "completed");
    assert!(num(&m["run"]["summary"], "/seconds") >= 1.0);
    assert!(m["run"]["summary"]["ports"]["eth1"].is_object(), "{m}");
    let (st, v) = w.api("POST", &format!("/api/monitor/{mid}/stop"), None);
    assert_eq!(st, 409, "{v}");
    let (st, v) = w.api("POST", "/api/monitor", Some(json!({"ports": "eth0,lo"})));
    assert_eq!(st, 400, "{v}");
    println!("web: forwarded eth1->eth0 {fwd} B for {recv} B received; UDP 50M: {bps:.0} bits/s, {pps:.0} packets/s");
}

#[test]
fn forwarding_turned_on_by_a_run_cut_short_by_kill_9_goes_off_at_the_next_start() {
    let (mut lab, board, _pc1, _pc2) = seed_lab();
    let w = Web::start(&mut lab);
    let (st, v) = w.api(
        "POST",
        "/api/forward",
        Some(
            json!({"peer": "http://192.0.2.2:5280", "token": TOKEN, "target": PC2_IP,
                    "ingress": "eth0", "egress": "eth1", "nat": true, "duration": 60}),
        ),
    );
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_i64().unwrap();
    let t = std::time::Instant::now();
    while ip_forward(&board) != "1" || !our_rules_left(&board) {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "forwarding never came on"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // What the run turned on is in its stored summary (what a restart undoes) before the kill.
    wait_until(
        Duration::from_secs(15),
        "the run's stored forwarding change",
        || {
            !w.api("GET", &format!("/api/runs/{id}"), None).1["run"]["summary"]["nat"]["undo"]
                .is_null()
        },
    );
    lab.kill(w.idx);
    assert_eq!(ip_forward(&board), "1", "still on after the crash");
    let data = data_dir(&lab);
    lab.spawn(
        &board,
        "daemon2",
        bin(),
        &[
            "daemon",
            "--listen",
            "127.0.0.1:8080",
            "--data",
            &data,
            "--iperf3-port",
            "0",
        ],
    );
    lab.wait_port(&board, "127.0.0.1", 8080);
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board), "rules left after the restart");
    let (st, v) = w.api("GET", &format!("/api/runs/{id}"), None);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["run"]["status"], "aborted", "{v}");
    let (_, log) = lab.output("daemon2");
    assert!(log.contains("is restored"), "{log}");
}

/// A UDP forwarding run whose generator (the peer agent on pc1) sends faster than its own
/// egress shaper: the agent reports its drop counters with its report, and the board's
/// ledger of the forwarding run names them (`peer_qdisc` on the agent's eth0, equal to pc1's
/// own `tc -s` delta within 1 %); nothing is charged to the board.
#[test]
fn the_peer_agent_s_own_drops_are_named_in_the_forwarding_ledger() {
    let (mut lab, board, pc1, _pc2) = seed_lab();
    let tc = |args: &[&str]| ns_out(&pc1, "tc", args);
    tc(&[
        "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "1600", "limit",
        "30kb",
    ]);
    let drops = || -> u64 {
        let t = ns_out(&pc1, "tc", &["-s", "qdisc", "show", "dev", "eth0"]);
        let i = t.find("dropped ").map(|i| i + 8).unwrap_or(0);
        t[i..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or_else(|_| panic!("no drops in {t}"))
    };
    let before = drops();
    let tf = token_file(&lab, TOKEN);
    let (code, run, err) = forward_cli(
        &mut lab,
        "forward",
        &[
            "--peer",
            "http://192.0.2.2:5280",
            "--token-file",
            &tf,
            "--to",
            PC2_IP,
            "--in",
            "eth0",
            "--out",
            "eth1",
            "--nat",
            "-u",
            "-b",
            "150M",
            "-t",
            "3",
        ],
    );
    assert_eq!(code, Some(0), "{err}\n{run}");
    let pc_drops = (drops() - before) as f64;
    assert!(pc_drops > 5000.0, "pc1's TBF dropped only {pc_drops}");
    let id = run["id"].as_i64().expect("run id").to_string();
    let data = data_dir(&lab);
    let (code, out, err) = lab.run(
        &board,
        "runs-show",
        bin(),
        &["runs", "--data", &data, "show", &id, "--json"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out, "runs show --json");
    let l = &v["loss_ledger"];
    eprintln!("pc1 tc drops {pc_drops}, ledger {l}");
    let places = l["places"].as_array().cloned().unwrap_or_default();
    let q = places
        .iter()
        .find(|p| p["place"] == "peer_qdisc")
        .unwrap_or_else(|| panic!("no peer_qdisc in {l}"));
    assert_eq!(q["port"], "eth0");
    assert_eq!(q["counter"], "qdisc tbf drops on eth0");
    let n = num(q, "/packets");
    assert!(
        (n - pc_drops).abs() <= pc_drops * 0.01,
        "peer_qdisc {n} vs pc1's tc -s {pc_drops}"
    );
    assert!(
        !places
            .iter()
            .any(|p| p["place"].as_str().is_some_and(|s| s.starts_with("board_"))),
        "{l}"
    );
}

/// A new API token of `scope` (Settings → API tokens, as the admin).
fn new_token(admin: &Http, scope: &str) -> String {
    let r = admin.form(
        "/settings/tokens",
        &[
            ("csrf", &admin.csrf.clone()),
            ("name", scope),
            ("scope", scope),
        ],
    );
    let i = r.body.find("id=\"new-token\">").expect("token") + 15;
    r.body[i..]
        .split('<')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Issue 37 items 7, 8 and 10 through the daemon. The daemon listens on every address; the
/// admin uses loopback, a script on PC1 reaches it through eth0 (its management port) with a
/// run-tests token:
/// * the stored agent token is not sent to another address the script names (a listener
///   there receives nothing of it), and the script's runs never change the stored address;
/// * the board's own addresses are refused as agent addresses, with nothing started;
/// * the script may not turn on NAT through eth0 (its own request's port); an admin token
///   from the same place may; without NAT the script's run uses the stored token.
#[test]
fn a_run_token_neither_moves_the_stored_agent_nor_bridges_its_own_port() {
    let (mut lab, board, pc1, _pc2) = seed_lab();
    let data = data_dir(&lab);
    lab.spawn(
        &board,
        "daemon",
        bin(),
        &[
            "daemon",
            "--listen",
            "0.0.0.0:8086",
            "--data",
            &data,
            "--iperf3-port",
            "0",
            "--plain-http",
        ],
    );
    lab.wait_port(&board, "127.0.0.1", 8086);
    let mut admin = Http::new(Some(&board), "http://127.0.0.1:8086");
    set_up(&lab, &mut admin);
    let run_token = new_token(&admin, "run");
    let admin_token = new_token(&admin, "admin");
    let script = Http::new(Some(&pc1), &format!("http://{BOARD_IP}:8086"));
    let bearer = |t: &str| vec![("Authorization".to_string(), format!("Bearer {t}"))];
    let wait = |id: i64| wait_run(&admin, id, Duration::from_secs(40));
    let stored_url = "http://192.0.2.2:5280";
    let body = |peer: &str, token: Option<&str>, nat: bool| {
        let mut v = json!({"peer": peer, "target": PC2_IP, "ingress": "eth0", "egress": "eth1",
                           "nat": nat, "duration": 1});
        if let Some(t) = token {
            v["token"] = json!(t);
        }
        v
    };

    // The admin's run stores the agent's address and (once completed) its token.
    let r = admin.api("POST", "/api/forward", &body(stored_url, Some(TOKEN), true));
    assert_eq!(r.status, 201, "{}", r.body);
    let v = wait(r.json()["id"].as_i64().unwrap());
    assert_eq!(v["run"]["status"], "completed", "{v}");
    wait_until(
        Duration::from_secs(10),
        "the run's token to be stored",
        || admin.get_json("/api/peer")["token_stored"] == json!(true),
    );
    let p = admin.get_json("/api/peer");
    assert_eq!(
        (p["url"].as_str(), &p["token_stored"]),
        (Some(stored_url), &json!(true)),
        "{p}"
    );

    // A listener at another address on PC1: what reaches it is kept.
    lab.spawn(
        &pc1,
        "trap",
        "python3",
        &[
            "-u",
            "-c",
            "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('192.0.2.2',5281))\ns.listen()\nwhile True:\n  c,_=s.accept()\n  print(repr(c.recv(65536)), flush=True)\n  c.close()\n",
        ],
    );
    lab.wait_port(&pc1, PC1_IP, 5281);
    let other = "http://192.0.2.2:5281";
    // Item 7: no token given, another address: refused, the stored token goes nowhere.
    let r = script.json(
        "POST",
        "/api/forward",
        bearer(&run_token),
        &body(other, None, false),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.json()["error"].as_str().unwrap_or_default().contains(
            "the stored peer agent token is only sent to the stored agent address (http://192.0.2.2:5280)"
        ),
        "{}",
        r.body
    );
    // With its own token the script's run goes there — and the stored address stays.
    let r = script.json(
        "POST",
        "/api/forward",
        bearer(&run_token),
        &body(other, Some("script-token-0123456"), false),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let v = wait(r.json()["id"].as_i64().unwrap());
    assert_eq!(v["run"]["status"], "failed", "{v}");
    let p = admin.get_json("/api/peer");
    assert_eq!(p["url"].as_str(), Some(stored_url), "{p}");
    let (trap, _) = lab.output("trap");
    assert!(trap.contains("script-token-0123456"), "{trap}");
    assert!(
        !trap.contains(TOKEN),
        "the stored token reached another address: {trap}"
    );

    // Item 8: the board's own addresses are refused, nothing recorded.
    let before = admin.get_json("/api/runs").as_array().map(|a| a.len());
    for own in [
        "http://127.0.0.1:8086",
        "http://192.0.2.1:8086",
        "http://[::1]:8086",
    ] {
        let r = script.json(
            "POST",
            "/api/forward",
            bearer(&run_token),
            &body(own, Some("x-token-0123456789"), false),
        );
        assert_eq!(r.status, 400, "{own}: {}", r.body);
        assert!(
            r.body.contains("this board's own address: refused"),
            "{own}: {}",
            r.body
        );
    }
    assert_eq!(
        admin.get_json("/api/runs").as_array().map(|a| a.len()),
        before
    );

    // Item 10: NAT through eth0, the port the script's request arrives on: admin only.
    let r = script.json(
        "POST",
        "/api/forward",
        bearer(&run_token),
        &body(stored_url, None, true),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("forwarding with NAT through eth0, a port this request travels through (the management port), needs an admin"),
        "{}",
        r.body
    );
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board));
    // Without NAT the script's run goes to the stored agent with the stored token.
    let r = script.json(
        "POST",
        "/api/forward",
        bearer(&run_token),
        &body(stored_url, None, false),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    // The agent takes the stored token and runs the test (which cannot reach PC2 without
    // forwarding: "unable to connect"), never "refused the token (HTTP 401)".
    let v = wait(r.json()["id"].as_i64().unwrap());
    let err = v["run"]["error"].as_str().unwrap_or_default().to_string();
    assert!(err.contains("unable to connect to server"), "{v}");
    assert!(!err.contains("401"), "{v}");
    // An admin token from the same place may turn NAT on; it is off again afterwards.
    let r = script.json(
        "POST",
        "/api/forward",
        bearer(&admin_token),
        &body(stored_url, None, true),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let v = wait(r.json()["id"].as_i64().unwrap());
    assert_eq!(v["run"]["status"], "completed", "{v}");
    assert_eq!(v["run"]["summary"]["nat"]["restored"], true, "{v}");
    assert_eq!(ip_forward(&board), "0");
    assert!(!our_rules_left(&board));
}
