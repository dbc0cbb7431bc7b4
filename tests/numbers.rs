//! Issue 11, "numbers you can trust": a paced UDP run that reached its `-b` says so in `-J`; a
//! sender held back by a tbf-limited egress is flagged as a shortfall; the `-J` layout of a
//! server `--bidir` test and of a UDP sending side matches the captured stock iperf3 3.12
//! documents key by key; iperf 2.1.8 UDP `-r` / `-d` return legs run at the asked rate.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(40);
const VEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/iperf3-3.12/");

fn stock(name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{VEC}{name}")).expect("captured document");
    json(&text, name)
}

fn flag(v: &Value, ptr: &str) -> bool {
    v.pointer(ptr)
        .and_then(Value::as_bool)
        .unwrap_or_else(|| panic!("{ptr} missing or not a bool"))
}

#[test]
fn paced_udp_to_stock_iperf3_reaches_the_requested_rate() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "c",
        bin(),
        &["-c", PC1_IP, "-u", "-b", "20M", "-t", "3", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{err}{out}");
    let c = json(&out, "client -J");
    assert_eq!(num(&c, "/end/sum_sent/target_bits_per_second"), 20e6);
    let sent = num(&c, "/end/sum_sent/bits_per_second");
    assert!(
        sent <= 20.2e6,
        "sent {sent}: above the asked rate; {}",
        c["end"]
    );
    if sent >= 19.4e6 {
        assert_eq!(c["end"]["shortfall"]["short"], false, "{}", c["end"]);
        assert!(num(&c, "/end/shortfall/sent_percent") >= 97.0);
    } else {
        // Seen once in CI (19.39 Mbit/s on a 2-core machine running other lab tests): a sender
        // that did not get the CPU may fall short, but then the run must say so and why — a
        // shortfall with the pacer's lag behind its schedule (the product's reason threshold).
        assert!(sent >= 17e6, "sent {sent}; {}", c["end"]);
        assert_eq!(c["end"]["shortfall"]["short"], true, "{}", c["end"]);
        let lag = num(&c, "/end/shortfall/sender_max_lag_ms");
        assert!(
            lag >= 10.0,
            "sent {sent} with a lag of only {lag} ms: {}",
            c["end"]
        );
    }
    assert_eq!(num(&c, "/end/shortfall/target_bits_per_second"), 20e6);
    let pacing = c["end"]["pacing"].as_str().unwrap_or_default();
    assert!(pacing.starts_with("user-space token bucket"), "{pacing}");
    // Stock's layout on a UDP sending side: end.sum carries the sender's bytes.
    assert_eq!(
        num(&c, "/end/sum/bytes"),
        num(&c, "/end/sum_sent/bytes"),
        "{}",
        c["end"]
    );
}

#[test]
fn a_sender_held_back_by_a_tbf_egress_is_a_shortfall() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    // 20 Mbit/s egress with a queue longer than the socket buffer: the UDP socket blocks
    // (back-pressure), so the sender itself falls short of -b 60M.
    let st = Command::new("ip")
        .args([
            "netns", "exec", &board, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
            "20mbit", "burst", "32kb", "limit", "4mb",
        ])
        .status()
        .expect("tc");
    assert!(st.success(), "tc qdisc add tbf failed");
    lab.spawn(&pc1, "ours-s", bin(), &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "c",
        bin(),
        &["-c", PC1_IP, "-u", "-b", "60M", "-t", "3", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{err}{out}");
    let c = json(&out, "client -J");
    let sent = num(&c, "/end/sum_sent/bits_per_second");
    assert!(sent < 30e6, "tbf did not hold the sender back: {sent}");
    assert_eq!(c["end"]["shortfall"]["short"], true, "{}", c["end"]);
    assert!(num(&c, "/end/shortfall/sent_percent") < 50.0);
    // And the text summary says so.
    let (code, out, err) = {
        lab.spawn(&pc1, "ours-s2", bin(), &["-s", "-1"]);
        lab.wait_port(&pc1, PC1_IP, 5201);
        lab.run(
            &board,
            "c-text",
            bin(),
            &["-c", PC1_IP, "-u", "-b", "60M", "-t", "2"],
            T,
        )
    };
    assert_eq!(code, Some(0), "{err}{out}");
    assert!(
        out.contains("shortfall: the sender sent") && out.contains("of the 60"),
        "{out}"
    );
}

#[test]
fn server_bidir_json_layout_matches_stock_key_by_key() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let srv = lab.spawn(&board, "ours-s", bin(), &["-s", "-1", "-J"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &[
            "-c", BOARD_IP, "--bidir", "-P", "2", "-t", "2", "-b", "30M", "-J",
        ],
        T,
    );
    assert_eq!(code, Some(0), "{err}{out}");
    let client = json(&out, "stock client -J");
    // The one-off server prints its document as it exits.
    assert!(
        lab.wait(srv, Duration::from_secs(10)).is_some(),
        "our -1 server did not exit after the test"
    );
    let ours = json(&lab.output("ours-s").0, "our server -J");
    let theirs = stock("server-output-bidir-P2.json");
    for ptr in ["/end", "/intervals/0", "/start/test_start"] {
        let m = missing_keys(&theirs, &ours, ptr, 4);
        assert!(m.is_empty(), "keys stock has and we lack: {m:?}");
    }
    // The client→server leg is in sum_sent / sum_received (sender false on a server), the
    // server→client leg in *_bidir_reverse (sender true), as stock writes it.
    for (k, f) in [
        ("/end/sum_sent/sender", false),
        ("/end/sum_received/sender", false),
        ("/end/sum_sent_bidir_reverse/sender", true),
        ("/end/sum_received_bidir_reverse/sender", true),
        ("/intervals/0/sum/sender", false),
        ("/intervals/0/sum_bidir_reverse/sender", true),
    ] {
        assert_eq!(flag(&theirs, k), f, "stock {k}");
        assert_eq!(flag(&ours, k), f, "ours {k}");
    }
    // Values: the stock client got our figures in the exchange and puts them where stock
    // puts them, so our legs must agree with its document leg for leg.
    for k in [
        "/end/sum_received/bytes",
        "/end/sum_sent_bidir_reverse/bytes",
    ] {
        let (a, b) = (num(&ours, k), num(&client, k));
        assert!(a > 1e6, "{k}: {a}");
        assert!(
            (a - b).abs() <= a * 0.001,
            "{k}: ours {a}, stock client {b}"
        );
    }
}

#[test]
fn udp_send_json_layout_matches_stock_key_by_key() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "c",
        bin(),
        &["-c", PC1_IP, "-u", "-b", "10M", "-t", "2", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{err}{out}");
    let ours = json(&out, "our client -J");
    let theirs = stock("client-output-udp-b100M.json");
    for ptr in ["/end", "/intervals/0", "/start/test_start"] {
        let m = missing_keys(&theirs, &ours, ptr, 4);
        assert!(m.is_empty(), "keys stock has and we lack: {m:?}");
    }
    // Stock (and now ours): end.sum and end.streams[].udp carry the sender's bytes and rate.
    for doc in [&theirs, &ours] {
        assert_eq!(num(doc, "/end/sum/bytes"), num(doc, "/end/sum_sent/bytes"));
        assert_eq!(
            num(doc, "/end/streams/0/udp/bytes"),
            num(doc, "/end/sum_sent/bytes")
        );
        assert_eq!(
            num(doc, "/end/sum/bits_per_second"),
            num(doc, "/end/sum_sent/bits_per_second")
        );
        assert!(flag(doc, "/end/sum/sender"));
        assert!(!flag(doc, "/end/sum_received/sender"));
        // The receiver's loss and jitter stay in end.sum.
        assert_eq!(
            num(doc, "/end/sum/lost_packets"),
            num(doc, "/end/sum_received/lost_packets")
        );
    }
}

/// Bits per second of the return leg (the stream we did not send) in `--iperf2 -J` output.
fn return_leg_bps(out: &str) -> f64 {
    let doc = out
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| json(l, "--iperf2 -J line"))
        .find(|d| d.pointer("/outcome/streams").is_some())
        .unwrap_or_else(|| panic!("no streams document in {out}"));
    let s = doc
        .pointer("/outcome/streams")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|s| s["sender"] == false))
        .unwrap_or_else(|| panic!("no return leg in {doc}"))
        .clone();
    let secs = s["seconds"].as_f64().unwrap_or(0.0);
    let bytes = s["bytes"].as_f64().unwrap_or(0.0);
    assert!(secs > 0.5, "return leg of {secs} s: {s}");
    bytes * 8.0 / secs
}

#[test]
fn iperf2_udp_return_legs_run_at_the_asked_rate() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let server = lab.spawn(&pc1, "iperf-su", "iperf", &["-s", "-u"]);
    lab.wait_udp(&pc1, 5001);
    for (mode, port) in [("-r", "5002"), ("-d", "5003")] {
        // A second apart, as a person starts the next test: once in a full run (with a
        // compile beside it) the stock 2.1.8 server answered nothing to a -d started at once
        // after the -r (neither the return flow nor the report of our FIN); not reproduced
        // in 19 rounds of -r then -d at once. The server's log goes with a failure.
        std::thread::sleep(Duration::from_secs(1));
        let (code, out, err) = lab.run(
            &board,
            &format!("udp{mode}"),
            bin(),
            &[
                "-c", PC1_IP, "--iperf2", "-u", "-b", "100M", "-t", "3", mode, "-L", port, "-J",
            ],
            T,
        );
        if code != Some(0) {
            let alive = lab.alive(server);
            let (sout, serr) = lab.output("iperf-su");
            let tail: String = sout.lines().rev().take(30).collect::<Vec<_>>().join("\n");
            panic!("{mode}: exit {code:?}: {out}{err}\nstock server alive: {alive}; its last lines (newest first):\n{tail}\n{serr}");
        }
        let bps = return_leg_bps(&out);
        // Was 1.05 Mbit/s (2.1.8's default) before the header extension carried the rate.
        assert!(
            (98e6..=102e6).contains(&bps),
            "{mode}: return leg at {:.2} Mbit/s: {out}",
            bps / 1e6
        );
    }
}
