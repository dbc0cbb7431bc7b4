//! The labelled truth set (issue 38): each case is a lab with a label and the kernel's own
//! ground truth, and asserts the figures the product shows for it against that truth.
//!
//! Ground truth here is never the product's own computation: lost datagrams are the sender's
//! own sent count minus the receiver's own received count (a stock iperf3's, where one runs),
//! and a qdisc's drops are its `tc -s` counter in its own unit (skbs: one GSO batch is one).
//! Each case sends at most 3 s of traffic (CI runs them).
//!
//! Cases: (a) the board sends (netperfd: GSO batches) through a TBF on its own port;
//! (b) a forwarding run whose stock iperf3 sender (pc2, one datagram per skb) crosses the
//! board's egress TBF; (c) a clean run: no place invented, nothing unattributed; (d) a
//! `netperfd -s` peer (GSO batches) through its own egress TBF, named by the peer's drops;
//! (e) a forwarding run whose agent sends GSO batches through the board's egress TBF.

mod common;

use common::http::{daemon, set_up, wait_run, Http};
use common::*;
use serde_json::Value;
use std::time::Duration;

/// One lab at a time: the runs load both cores.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn within(a: f64, b: f64, share: f64, what: &str) {
    assert!(
        (a - b).abs() <= b.max(1.0) * share,
        "{what}: {a} vs {b} (more than {:.0} % apart)",
        share * 100.0
    );
}

fn place<'a>(l: &'a Value, name: &str) -> Option<&'a Value> {
    l["places"].as_array()?.iter().find(|p| p["place"] == name)
}

/// Datagrams of [`LEN`] bytes the board's sender sent: its own byte count (the sending
/// streams' `sender_bytes`) over the datagram size.
fn sender_count(v: &Value) -> f64 {
    let bytes: f64 = v["streams"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["local_sender"] == true)
                .filter_map(|s| s["sender_bytes"].as_f64())
                .sum()
        })
        .unwrap_or(0.0);
    bytes / LEN as f64
}

/// The datagram size of every case, bytes (one datagram per frame at MTU 1500).
const LEN: u64 = 1448;

/// The end summary (`end.sum`) of a stock `iperf3 -s -1 -J` that ran one UDP test: as the
/// receiver its `packets` (expected) and `lost_packets`, as the sender (-R) its `packets`.
fn stock_sum(json_text: &str) -> Value {
    json(json_text, "iperf3 -s -J")["end"]["sum"].clone()
}

/// A board daemon in `lab` with `iperf3 -s -1 -J` on pc1; the board sends UDP at `rate` for
/// 3 s; (the run as the API gives it, datagrams pc1's stock receiver got).
fn board_sends(lab: &mut Lab, port: u16, rate: &str) -> (Value, f64) {
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let srv = lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (_d, mut http) = daemon(lab, &board, port, &[]);
    set_up(lab, &mut http);
    let r = http.api(
        "POST",
        "/api/runs",
        &serde_json::json!({"host": PC1_IP, "protocol": "udp", "bitrate": rate,
            "direction": "send", "duration": "3", "length": LEN.to_string()}),
    );
    assert!(r.status < 300, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("run id");
    let v = wait_run(&http, id, Duration::from_secs(30));
    assert_eq!(v["run"]["status"], "completed", "{v}");
    assert_eq!(lab.wait(srv, Duration::from_secs(10)), Some(0));
    let (out, err) = lab.output("iperf3-s");
    assert!(!out.trim().is_empty(), "no JSON from iperf3 -s: {err}");
    let sum = stock_sum(&out);
    assert_eq!(sum["sender"], false, "{sum}");
    let received = num(&sum, "/packets") - num(&sum, "/lost_packets");
    (with_page(&http, v), received)
}

/// The run with its page's ledger card text under `"page_card"`.
fn with_page(http: &Http, mut v: Value) -> Value {
    let page = http.get(&format!("/runs/{}", v["run"]["id"])).body;
    let card = page
        .find("id=\"ledger\"")
        .map(|i| {
            let rest = &page[i..];
            rest[..rest.find("</section>").unwrap_or(rest.len())].to_string()
        })
        .unwrap_or_default();
    v["page_card"] = card.into();
    v
}

/// (a) Label: the board's own egress TBF (50 Mbit/s, a burst large enough that TBF queues
/// GSO batches whole) drops what netperfd sends at 150 Mbit/s in batches of several
/// datagrams. Truth: netperfd's own sent count − the stock receiver's received count; the
/// TBF's `tc -s` drops (skbs). The ledger's board_qdisc place equals the lost datagrams
/// within 2 %, in datagrams, keeps the qdisc's own skb count, and leaves ≤ 2 % unattributed.
#[test]
fn a_board_egress_tbf_with_netperfd_sending_gso_batches() {
    let _one = serial();
    let mut lab = Lab::new();
    let board = lab.board.clone();
    ns_sh(
        &board,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "50mbit", "burst", "64kb",
            "limit", "64kb",
        ],
    );
    let before = tc_stats(&board, "eth0");
    let (v, received) = board_sends(&mut lab, 8261, "150M");
    let tc = tc_stats(&board, "eth0");
    let tc_drops = (tc.dropped - before.dropped) as f64;
    let sent = sender_count(&v);
    let truth = sent - received;
    let l = &v["loss_ledger"];
    eprintln!(
        "(a) sent {sent}, received {received}, truth lost {truth}, tc drops {tc_drops} skbs, tc sent {} pkt; ledger {l}",
        tc.sent_pkt - before.sent_pkt
    );
    assert!(truth > 10_000.0, "the TBF dropped only {truth} datagrams");
    // The label holds: the qdisc counted batches, several datagrams per drop.
    assert!(
        tc_drops < 0.5 * truth,
        "tc drops {tc_drops} for {truth} lost: netperfd did not send GSO batches"
    );
    within(num(l, "/lost"), truth, 0.02, "the run's lost vs the truth");
    assert_eq!(l["unit"], "datagrams", "{l}");
    let q = place(l, "board_qdisc").unwrap_or_else(|| panic!("no board_qdisc in {l}"));
    assert_eq!(q["unit"], "datagrams", "{q}");
    assert_eq!(q["counted_unit"], "skbs", "{q}");
    assert_eq!(q["counter"], "qdisc tbf drops on eth0");
    within(
        num(q, "/packets"),
        truth,
        0.02,
        "board_qdisc vs the lost datagrams",
    );
    within(
        num(q, "/counted"),
        tc_drops,
        0.01,
        "board_qdisc's own count vs tc -s",
    );
    assert!(
        num(l, "/unattributed") <= 0.02 * truth,
        "unattributed {} of {truth}: {l}",
        l["unattributed"]
    );
    assert_eq!(l["places"].as_array().map(Vec::len), Some(1), "{l}");
    let verdict = v["analysis"]["verdict_text"].as_str().unwrap_or("");
    assert!(
        verdict.contains("lost datagrams were dropped by the board's own egress queue (tbf on eth0); the qdisc counted"),
        "{verdict}"
    );
    // The page says the unit of each figure.
    let card = v["page_card"].as_str().unwrap_or("");
    assert!(
        card.contains("<td>board_qdisc</td><td>eth0</td>")
            && card.contains("<td>datagrams</td><td>qdisc tbf drops on eth0: ")
            && card.contains(" skbs</td>"),
        "{card}"
    );
}

/// (b) Label: a forwarding run, PC2's stock `iperf3 -s` sending (-R: one datagram per skb,
/// no GSO) at 150 Mbit/s through the board (NAT) and out of its eth0 through a 50 Mbit/s
/// TBF to PC1's agent. Truth: the stock sender's own sent count − the agent's received
/// count; the TBF's `tc -s` drops.
#[test]
fn b_forwarding_through_the_board_s_egress_tbf_with_a_stock_iperf3_sender() {
    const TOKEN: &str = "lab-token-0123456789";
    let _one = serial();
    let (mut lab, _) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    ns_sh(
        &board,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "50mbit", "burst", "64kb",
            "limit", "64kb",
        ],
    );
    // Its own one-off stock server (JSON at its exit) beside the lab's.
    let pc2 = lab.pc2.clone().expect("pc2");
    let srv = lab.spawn(
        &pc2,
        "iperf3-s1",
        "iperf3",
        &["-s", "-1", "-J", "-p", "5301"],
    );
    lab.wait_port(&pc2, PC2_IP, 5301);
    let tf = lab.token_file(TOKEN);
    let data = lab.dir().join("data");
    let data = data.to_str().unwrap_or("data").to_string();
    let before = tc_stats(&board, "eth0");
    let len = LEN.to_string();
    let (code, out, err) = lab.run(
        &board,
        "forward",
        bin(),
        &[
            "forward",
            "--data",
            &data,
            "--json",
            "--peer",
            "http://192.0.2.2:5280",
            "--token-file",
            &tf,
            "--to",
            PC2_IP,
            "-p",
            "5301",
            "--in",
            "eth0",
            "--out",
            "eth1",
            "--nat",
            "-u",
            "-b",
            "150M",
            "-l",
            &len,
            "-R",
            "-t",
            "3",
        ],
        Duration::from_secs(90),
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let run = json(&out, "netperfd forward --json");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["direction"], "receive", "{run}");
    let tc = tc_stats(&board, "eth0");
    let tc_drops = (tc.dropped - before.dropped) as f64;
    assert_eq!(lab.wait(srv, Duration::from_secs(10)), Some(0));
    let (s, e) = lab.output("iperf3-s1");
    let sum = stock_sum(&s);
    assert_eq!(sum["sender"], true, "{sum}{e}");
    // The stock sender's own count; the agent's own received count (expected − lost).
    let sent = num(&sum, "/packets");
    let received = num(&run, "/total_packets") - num(&run, "/lost_packets");
    let truth = sent - received;
    let id = run["id"].as_i64().expect("run id").to_string();
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
    eprintln!(
        "(b) stock sender sent {sent}, agent received {received}, truth lost {truth}, tc drops {tc_drops} skbs; ledger {l}"
    );
    assert!(truth > 10_000.0, "the TBF dropped only {truth} datagrams");
    within(num(l, "/lost"), truth, 0.02, "the run's lost vs the truth");
    let q = place(l, "board_qdisc").unwrap_or_else(|| panic!("no board_qdisc in {l}"));
    assert_eq!(q["port"], "eth0");
    assert_eq!(q["unit"], "datagrams", "{q}");
    assert_eq!(q["counted_unit"], "skbs", "{q}");
    within(
        num(q, "/packets"),
        truth,
        0.02,
        "board_qdisc vs the lost datagrams",
    );
    within(
        num(q, "/counted"),
        tc_drops,
        0.01,
        "board_qdisc's own count vs tc -s",
    );
    // One datagram per skb: the qdisc's own count is the datagrams too.
    within(tc_drops, truth, 0.02, "a stock sender's drops in tc -s");
    assert!(
        num(l, "/unattributed") <= 0.02 * truth,
        "unattributed {} of {truth}: {l}",
        l["unattributed"]
    );
    assert!(
        !l["places"].to_string().contains("peer_"),
        "the agent received: nothing of its own dropped: {l}"
    );
}

/// (c) Label: a clean run — the board sends 20 Mbit/s for 2 s to pc1's stock receiver, no
/// shaper anywhere. Truth: nothing lost (sent = received). The ledger invents no place and
/// leaves nothing unattributed; the page has no ledger card.
#[test]
fn c_a_clean_run_invents_no_place() {
    let _one = serial();
    let mut lab = Lab::new();
    let (v, received) = board_sends(&mut lab, 8263, "20M");
    let sent = sender_count(&v);
    let l = &v["loss_ledger"];
    eprintln!("(c) sent {sent}, received {received}; ledger {l}");
    assert!(sent > 1000.0, "sent {sent}");
    assert_eq!(sent - received, 0.0, "the clean lab lost datagrams");
    assert_eq!(num(l, "/lost"), 0.0, "{l}");
    assert_eq!(l["places"], serde_json::json!([]), "{l}");
    assert_eq!(num(l, "/unattributed"), 0.0, "{l}");
    assert_eq!(v["page_card"], "", "no ledger card for a clean run");
}

/// (d) Label: the PC's own egress TBF (50 Mbit/s, batches queued whole) drops what its
/// `netperfd -s` sends (GSO batches) at 150 Mbit/s to the board (a `receive` run of the
/// board's daemon). Truth: the PC's sender's own count (its bytes over the datagram size)
/// − the board's receiver's own count; the PC's `tc -s` drops. The peer's place is in
/// datagrams within 2 % and keeps the PC's own skb count.
#[test]
fn d_a_netperfd_peer_s_own_egress_tbf_with_gso_batches() {
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    ns_sh(
        &pc1,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "50mbit", "burst", "64kb",
            "limit", "64kb",
        ],
    );
    lab.spawn(&pc1, "netperfd-s", bin(), &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (_d, mut http) = daemon(&mut lab, &board, 8264, &[]);
    set_up(&lab, &mut http);
    let before = tc_stats(&pc1, "eth0");
    let r = http.api(
        "POST",
        "/api/runs",
        &serde_json::json!({"host": PC1_IP, "protocol": "udp", "bitrate": "150M",
            "direction": "receive", "duration": "3", "length": LEN.to_string()}),
    );
    assert!(r.status < 300, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("run id");
    let v = wait_run(&http, id, Duration::from_secs(30));
    assert_eq!(v["run"]["status"], "completed", "{v}");
    let tc_drops = (tc_stats(&pc1, "eth0").dropped - before.dropped) as f64;
    let sent: f64 = v["streams"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["local_sender"] == false)
                .filter_map(|s| s["sender_bytes"].as_f64())
                .sum()
        })
        .unwrap_or(0.0)
        / LEN as f64;
    let received = num(&v, "/run/total_packets") - num(&v, "/run/lost_packets");
    let truth = sent - received;
    let l = &v["loss_ledger"];
    eprintln!(
        "(d) PC sent {sent}, board received {received}, truth lost {truth}, PC tc drops {tc_drops} skbs; ledger {l}"
    );
    assert!(truth > 10_000.0, "the PC's TBF dropped only {truth}");
    assert!(
        tc_drops < 0.5 * truth,
        "tc drops {tc_drops} for {truth} lost: the PC did not send GSO batches"
    );
    let q = place(l, "peer_qdisc").unwrap_or_else(|| panic!("no peer_qdisc in {l}"));
    assert_eq!(q["unit"], "datagrams", "{q}");
    assert_eq!(q["counted_unit"], "skbs", "{q}");
    within(
        num(q, "/packets"),
        truth,
        0.02,
        "peer_qdisc vs the lost datagrams",
    );
    within(
        num(q, "/counted"),
        tc_drops,
        0.01,
        "peer_qdisc's own count vs the PC's tc -s",
    );
    assert!(
        num(l, "/unattributed") <= 0.02 * truth,
        "unattributed {} of {truth}: {l}",
        l["unattributed"]
    );
    assert!(!l["places"].to_string().contains("board_"), "{l}");
}

/// (e) Label: a forwarding run the other way: PC1's agent (netperfd, GSO batches) sends at
/// 150 Mbit/s into the board's eth0 and out of its eth1 through a 50 Mbit/s TBF to PC2's
/// stock `iperf3 -s -1 -J`. Truth: the agent's own sent count (its bytes over the datagram
/// size) − the stock receiver's own received count; the TBF's `tc -s` drops (skbs).
#[test]
fn e_forwarding_netperfd_gso_batches_through_the_board_s_egress_tbf() {
    const TOKEN: &str = "lab-token-0123456789";
    let _one = serial();
    let (mut lab, _) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    ns_sh(
        &board,
        &[
            "tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "50mbit", "burst", "64kb",
            "limit", "64kb",
        ],
    );
    let pc2 = lab.pc2.clone().expect("pc2");
    let srv = lab.spawn(
        &pc2,
        "iperf3-s1",
        "iperf3",
        &["-s", "-1", "-J", "-p", "5302"],
    );
    lab.wait_port(&pc2, PC2_IP, 5302);
    let tf = lab.token_file(TOKEN);
    let data = lab.dir().join("data");
    let data = data.to_str().unwrap_or("data").to_string();
    let before = tc_stats(&board, "eth1");
    let len = LEN.to_string();
    let (code, out, err) = lab.run(
        &board,
        "forward",
        bin(),
        &[
            "forward",
            "--data",
            &data,
            "--json",
            "--peer",
            "http://192.0.2.2:5280",
            "--token-file",
            &tf,
            "--to",
            PC2_IP,
            "-p",
            "5302",
            "--in",
            "eth0",
            "--out",
            "eth1",
            "--nat",
            "-u",
            "-b",
            "150M",
            "-l",
            &len,
            "-t",
            "3",
        ],
        Duration::from_secs(90),
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let run = json(&out, "netperfd forward --json");
    assert_eq!(run["status"], "completed", "{run}");
    let tc_drops = (tc_stats(&board, "eth1").dropped - before.dropped) as f64;
    assert_eq!(lab.wait(srv, Duration::from_secs(10)), Some(0));
    let (s, e) = lab.output("iperf3-s1");
    let sum = stock_sum(&s);
    assert_eq!(sum["sender"], false, "{sum}{e}");
    let received = num(&sum, "/packets") - num(&sum, "/lost_packets");
    let id = run["id"].as_i64().expect("run id").to_string();
    let (code, out, err) = lab.run(
        &board,
        "runs-show",
        bin(),
        &["runs", "--data", &data, "show", &id, "--json"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out, "runs show --json");
    let sent = sender_count(&v);
    let truth = sent - received;
    let l = &v["loss_ledger"];
    eprintln!(
        "(e) agent sent {sent}, stock receiver got {received}, truth lost {truth}, tc drops {tc_drops} skbs; ledger {l}"
    );
    assert!(truth > 10_000.0, "the TBF dropped only {truth} datagrams");
    assert!(
        tc_drops < 0.5 * truth,
        "tc drops {tc_drops} for {truth} lost: the agent did not send GSO batches"
    );
    let q = place(l, "board_qdisc").unwrap_or_else(|| panic!("no board_qdisc in {l}"));
    assert_eq!(q["port"], "eth1");
    assert_eq!(q["unit"], "datagrams", "{q}");
    within(
        num(q, "/packets"),
        truth,
        0.02,
        "board_qdisc vs the lost datagrams",
    );
    within(
        num(q, "/counted"),
        tc_drops,
        0.01,
        "board_qdisc's own count vs tc -s",
    );
    assert!(
        num(l, "/unattributed") <= 0.02 * truth,
        "unattributed {} of {truth}: {l}",
        l["unattributed"]
    );
}
