//! RFC 2544 runs end to end (issue 26), in seed 000's lab: `netperfd peer` on pc1 generates,
//! stock `iperf3 -s` on pc2 receives, the board forwards with NAT for the run. A TBF on a port
//! is the bottleneck whose rate the search must find (a TBF on a veth counts a frame of F bytes
//! as F − 4: 100 Mbit/s is 100e6 / (8 × (F − 4)) frames/s). Independent observers: `tc -s`
//! of the shaper, /proc/sys and the firewall after the run.

mod common;
use common::browser::{chromedriver, Browser};
use common::http::*;
use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const TOKEN: &str = "lab-token-0123456789";
const WEB_PORT: u16 = 8097;
const WD_PORT: u16 = 9543;

fn ns_out(ns: &str, prog: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, prog])
        .args(args)
        .output()
        .expect("run in namespace");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn sh_ok(ns: &str, prog: &str, args: &[&str]) {
    let st = Command::new("ip")
        .args(["netns", "exec", ns, prog])
        .args(args)
        .status()
        .expect("run in namespace");
    assert!(st.success(), "{prog} {args:?} in {ns}");
}

/// A 100 Mbit/s TBF with a small queue (16 kB bucket, 128 kB = 10 ms queue) as `dev`'s root
/// qdisc. The queue absorbs the generator's catch-up after a stall of a few ms, which a loaded
/// lab gives it: with 32 kB the board dropped at 96 % of the rate, with 64 kB at 94 % once in a
/// full test run (the pacer catching up at up to 2 × after a stall).
fn tbf_100m(ns: &str, dev: &str) {
    sh_ok(
        ns,
        "tc",
        &[
            "qdisc", "add", "dev", dev, "root", "tbf", "rate", "100mbit", "burst", "16kb", "limit",
            "128kb",
        ],
    );
}

/// Drops the root TBF of `dev` counted (`tc -s qdisc`).
fn tbf_drops(ns: &str, dev: &str) -> u64 {
    let out = ns_out(ns, "tc", &["-s", "qdisc", "show", "dev", dev]);
    out.split("dropped ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no drop count in {out}"))
}

fn shaped_fps(frame: f64) -> f64 {
    100e6 / (8.0 * (frame - 4.0))
}

fn rfc_cli(lab: &mut Lab, name: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let data = lab.dir().join("data").to_str().expect("utf-8").to_string();
    let mut a = vec!["rfc2544", "--data", &data, "--json"];
    a.extend_from_slice(args);
    let board = lab.board.clone();
    let (code, out, err) = lab.run(&board, name, bin(), &a, Duration::from_secs(240));
    let v = if out.trim().is_empty() {
        Value::Null
    } else {
        json(&out, "netperfd rfc2544 --json")
    };
    (code, v, err)
}

/// PC1's agent → the board (eth0 → eth1, NAT) → PC2: the path flags of every lab run.
fn path_args(tf: &str) -> Vec<&str> {
    vec![
        "--peer",
        "http://192.0.2.2:5280",
        "--token-file",
        tf,
        "--to",
        PC2_IP,
        "--in",
        "eth0",
        "--out",
        "eth1",
        "--nat",
    ]
}

/// The TBF lab's benchmark: 512 and 1518-byte frames, 1 s trials at `resolution` %, 1 GbE's
/// line rate given, `tests`.
fn tbf_args<'a>(tf: &'a str, resolution: &'a str, tests: &'a str) -> Vec<&'a str> {
    let mut a = path_args(tf);
    a.extend_from_slice(&[
        "--sizes",
        "512,1518",
        "--trial",
        "1",
        "--resolution",
        resolution,
        "--line-rate",
        "1G",
        "--tests",
        tests,
    ]);
    a
}

fn rows<'a>(s: &'a Value, key: &str) -> &'a [Value] {
    s[key].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Every trial's counts add up: nothing received that was not offered, and what was counted
/// lost is within what did not arrive.
fn trials_add_up(s: &Value) {
    let trials = rows(s, "trials");
    assert!(!trials.is_empty(), "{s}");
    for t in trials {
        eprintln!(
            "{} {} B: asked {:.0} fps, offered {:.0} fps ({} in {:.2} s), received {}, lost {}, passed {}, lag {:.1} ms, lagged {}, short {}, bound {}, in {} out {} kept {}, PC drops rcv {} gen {}, places {}",
            t["test"], t["frame"], num(t, "/target_fps"), num(t, "/offered_fps"), t["offered"],
            num(t, "/seconds"), t["received"], t["lost_frames"], t["passed"],
            t["sender_lag_ms"].as_f64().unwrap_or(0.0), t["lagged"], t["generator_short"],
            t["bound"], t["board_in"], t["board_out"], t["board_kept"], t["receiver_drops"],
            t["generator_drops"], t["board_places"]
        );
    }
    for t in trials {
        let (offered, received, lost) = (
            num(t, "/offered"),
            num(t, "/received"),
            num(t, "/lost_frames"),
        );
        assert!(offered > 0.0, "{t}");
        assert!(received <= offered, "{t}");
        assert!(lost <= offered - received, "{t}");
        let ratio = num(t, "/loss_ratio");
        assert!((ratio - lost / offered).abs() < 1e-9, "{t}");
        assert_eq!(t["passed"].as_bool(), Some(lost == 0.0), "{t}");
    }
}

#[test]
fn throughput_through_a_100_mbit_tbf_is_the_shaped_frame_rate() {
    let _one = serial();
    let (mut lab, tf) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    tbf_100m(&board, "eth1");
    // PC2 answers the latency probes (netperfd's UDP echo on 5291) beside stock iperf3 -s.
    let pc2 = lab.pc2.clone().expect("pc2");
    lab.spawn(
        &pc2,
        "pc2-peer",
        bin(),
        &[
            "peer",
            "--listen",
            "198.51.100.2:5280",
            "--plain-http",
            "--token-file",
            &tf,
        ],
    );
    lab.wait_port(&pc2, PC2_IP, 5280);
    // Pass/fail limits given with the run (issue 38): the shaper passes ~10 % of 1 GbE, so
    // 50 % fails both sizes; their latency through it stays far below 1 s.
    let mut args = tbf_args(&tf, "1", "loss,latency,throughput");
    args.extend_from_slice(&["--min-throughput-percent", "50", "--max-latency-ms", "1000"]);
    let (code, run, err) = rfc_cli(&mut lab, "rfc2544", &args);
    assert_eq!(code, Some(1), "a FAIL exits 1\n{err}\n{run}");
    assert_eq!(run["kind"], "rfc2544");
    assert_eq!(run["status"], "completed", "{run}");
    let s = &run["summary"];
    trials_add_up(s);
    let tp = rows(s, "throughput");
    assert_eq!(tp.len(), 2, "{s}");
    let v = &run["verdict"];
    assert_eq!(v["pass"], false, "{v}");
    let checks = v["checks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    assert_eq!(checks.len(), 4, "{v}");
    for (c, row) in checks[..2].iter().zip(tp) {
        assert_eq!(c["key"], "min_throughput_percent", "{c}");
        assert_eq!(c["pass"], false, "{c}");
        assert_eq!(c["limit"], 50.0, "{c}");
        assert_eq!(c["value"], row["percent_line"], "{c} vs {row}");
    }
    for c in &checks[2..] {
        assert_eq!(c["key"], "max_latency_ms", "{c}");
        assert_eq!(c["pass"], true, "{c}");
        assert!(num(c, "/value") > 0.0 && num(c, "/value") < 1000.0, "{c}");
    }
    assert_eq!(
        v["reasons"].as_array().map(Vec::len),
        Some(2),
        "one reason per broken limit: {v}"
    );
    for (row, frame) in tp.iter().zip([512.0, 1518.0]) {
        assert_eq!(num(row, "/frame"), frame);
        // The board's figure; or, on a lab so loaded that PC1 lagged in every try near the
        // shaper's rate (348 ms once in a full test run), a generator-limited lower bound that
        // says so (issue 38) — never a lag's loss charged to the board.
        // Or a receiver-limited lower bound: on a loaded machine the stock `iperf3 -s` on PC2
        // lost 23 frames at 22,346 fps that the board had passed (it kept none), and the page
        // said so — the board was not charged.
        assert!(
            row["limit"] == "dut"
                || (row["limit"] == "generator" && row["lag_limited"] == true)
                || (row["limit"] == "receiver" && row["dut"] == false),
            "{frame} B: {row}"
        );
        let want = shaped_fps(frame);
        let got = num(row, "/fps");
        eprintln!(
            "{frame} B: {got:.0} frames/s (shaped {want:.0}), {} trials, limit {}",
            row["trials"], row["limit"]
        );
        if row["limit"] == "dut" {
            assert!(
                (got - want).abs() <= 0.05 * want,
                "{frame} B: {got} frames/s vs the shaper's {want}"
            );
        } else {
            // A lower bound: never above what the shaper passes, and not far below it.
            assert!(
                got <= 1.05 * want && got >= 0.8 * want,
                "{frame} B: {got} frames/s (a PC's limit) vs the shaper's {want}"
            );
        }
        // L1 and L2 rates follow from the frame rate.
        assert!(
            (num(row, "/l2_bps") - got * 8.0 * frame).abs() < 1.0,
            "{row}"
        );
        assert!(
            (num(row, "/l1_bps") - got * 8.0 * (frame + 20.0)).abs() < 1.0,
            "{row}"
        );
        // At the knee the board names its own queue.
        let knee = row["knee_places"].to_string();
        assert!(
            knee.contains("qdisc tbf drops on eth1"),
            "{frame} B knee: {row}"
        );
    }
    // Every failing throughput trial was the board's (or lagged: repeated, not charged), and
    // the board's own qdisc counted drops.
    for t in rows(s, "trials") {
        if t["passed"] == false && t["lagged"] != true {
            // A receiver's loss is charged to the receiver only when the board kept nothing.
            let receivers = t["bound"] == "receiver" && t["board_kept"] == 0;
            assert!(t["bound"] == "dut" || receivers, "{t}");
        }
    }
    assert!(tbf_drops(&board, "eth1") > 1000);
    // Latency (§26.2) at each throughput found: the probes' round trips. Nothing was lost at
    // that rate, so the 128 kB queue never overflowed: a probe waited at most its drain time
    // at 100 Mbit/s (10.5 ms) on the way out (the way back is unshaped).
    let lat = rows(s, "latency");
    assert_eq!(lat.len(), 2, "{s}");
    for (row, tp) in lat.iter().zip(tp) {
        eprintln!("latency {row}");
        assert_eq!(row["frame"], tp["frame"], "{row}");
        assert_eq!(num(row, "/fps"), num(tp, "/fps"), "at the throughput found");
        assert!(row["note"].is_null(), "{row}");
        // The found rate sits at the knee within the search's resolution: a latency trial
        // there can still lose a few frames (CI: 247 of 24,783 at 512 B), and then probes
        // waited in, or were dropped from, a full queue; a generator that lagged in every try
        // burst. Both are stored with the row (and said on the page); the strict bounds
        // below hold for a clean trial.
        let clean = num(row, "/lost") == 0.0 && row["lagged"] == false;
        assert!(num(row, "/tries") >= 1.0, "{row}");
        // 1 s trial, probes every 10 ms: 0.5 s idle, then from 0.25 s into the traffic.
        let (sent, answered) = (num(row, "/sent"), num(row, "/answered"));
        let answered_share = if clean { 0.95 } else { 0.8 };
        assert!(sent >= 120.0 && answered >= answered_share * sent, "{row}");
        assert!(num(row, "/rtt_ms/n") >= 50.0, "{row}");
        let idle = num(row, "/idle_rtt_ms/p50");
        assert!(idle > 0.0 && idle < 1.0, "idle round trip {idle} ms");
        // Never above a full queue's drain time plus the path (measured: 512 B p50 3.7–4.0
        // ms, p99 6.9–7.3; 1518 B p50 0.13–7.6, p99 0.7–10.1: a rate found a little above the
        // shaper's fills its queue). Not bounded below by the idle round trips: a rate below
        // the shaper's (a generator-limited size) builds no queue, and idle probes can be the
        // slower ones (sleeping cores: 0.100 ms idle minimum, 0.066 ms loaded p50 under load;
        // the page explains it).
        let (lo, p50, p99) = (
            num(row, "/rtt_ms/min"),
            num(row, "/rtt_ms/p50"),
            num(row, "/rtt_ms/p99"),
        );
        // A full queue is still at most its drain time; a burst adds the lag it repaid.
        let slack = if clean {
            3.0
        } else {
            3.0 + num(row, "/lag_ms")
        };
        assert!(
            lo > 0.0 && p50 >= lo && p99 >= p50 && p99 < 10.5 + slack,
            "{row}: loaded min {lo} p50 {p50} p99 {p99}"
        );
        let trial = &rows(s, "trials")[num(row, "/trial") as usize];
        assert_eq!(trial["test"], "latency", "{trial}");
    }
    let text = ns_out(
        &board,
        bin(),
        &[
            "runs",
            "--data",
            lab.dir().join("data").to_str().expect("utf-8"),
            "show",
            &run["id"].to_string(),
        ],
    );
    assert!(text.contains("Latency (RFC 2544 §26.2)"), "{text}");
    // The loss curve at 100 % of 1 GbE: the shaper passes at most its rate and drops the rest.
    // (At most: a generator stalled by a loaded lab sends in bursts the 16 kB bucket cannot
    // bank, and then the shaper passes less — 61 % of its rate once in a full run.)
    let loss = rows(s, "loss");
    assert_eq!(loss.len(), 2, "{s}");
    for (row, frame) in loss.iter().zip([512.0, 1518.0]) {
        let steps = rows(row, "steps");
        let first = &steps[0];
        assert_eq!(num(first, "/percent"), 100.0);
        let offered = num(first, "/offered_fps");
        let want = 1.0 - shaped_fps(frame) / offered;
        let got = num(first, "/loss_ratio");
        assert!(
            got > want - 0.05 && got < 1.0,
            "{frame} B at 100 %: loss {got}, the shaper implies at least {want} (offered {offered} fps)"
        );
        let trial = &rows(s, "trials")[num(first, "/trial") as usize];
        let passed_fps = num(trial, "/received") / num(trial, "/seconds");
        assert!(
            passed_fps <= shaped_fps(frame) * 1.05,
            "{frame} B at 100 %: {passed_fps} frames/s passed a shaper of {}",
            shaped_fps(frame)
        );
        // It ends after two steps in a row without loss, or at 10 %.
        let last = steps.last().expect("a step");
        assert!(
            num(last, "/percent") < 15.0 || steps.len() >= 3,
            "{frame} B: {steps:?}"
        );
    }
    // Nothing left enabled by the run.
    assert_eq!(
        ns_out(&board, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "0"
    );
    assert_eq!(s["nat"]["restored"], true, "{s}");
}

/// Back-to-back (§26.4, RFC 9004) through the same 100 Mbit/s TBF: the shaper absorbs its
/// 16 kB bucket and its 128 kB queue, (16,384 + 131,072) / (F − 4) frames, and forwards
/// 100e6 / (8 × (F − 4)) frames/s meanwhile. A burst at 1 GbE's line rate fills it with
/// N × (1 − T / R) frames, so the longest burst without a loss lies between the queue itself
/// (frames arriving at once: a GSO batch crosses a veth in one go) and Q / (1 − T / R) (frames
/// arriving at the line rate). `tc -s` is the independent observer of the drops.
#[test]
fn back_to_back_through_a_100_mbit_tbf_is_its_queue() {
    let _one = serial();
    let (mut lab, tf) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    tbf_100m(&board, "eth1");
    let (code, run, err) = rfc_cli(
        &mut lab,
        "rfc2544-b2b",
        &tbf_args(&tf, "5", "back-to-back,throughput"),
    );
    assert_eq!(code, Some(0), "{err}\n{run}");
    assert_eq!(run["status"], "completed", "{run}");
    let s = &run["summary"];
    trials_add_up(s);
    let b2b = rows(s, "back_to_back");
    assert_eq!(b2b.len(), 2, "{s}");
    for (row, frame) in b2b.iter().zip([512.0, 1518.0]) {
        eprintln!("back-to-back {row}");
        assert_eq!(num(row, "/frame"), frame);
        assert_eq!(row["limit"], "dut", "{row}");
        let queue = (16_384.0 + 131_072.0) / (frame - 4.0);
        let line = 1e9 / (8.0 * (frame + 20.0));
        let tp = num(row, "/throughput_fps");
        let shaped = shaped_fps(frame);
        // The search itself is checked at 1 % above; at 5 % resolution on a busy lab a
        // 1 s trial's wobble took it 6.4 % below once.
        assert!(
            (tp - shaped).abs() <= 0.1 * shaped,
            "{frame} B throughput {tp}"
        );
        let most = queue / (1.0 - shaped / line);
        let got = num(row, "/frames");
        assert!(
            got >= 0.85 * queue && got <= 1.1 * most,
            "{frame} B: {got} back-to-back frames, the shaper holds {queue:.0}..{most:.0}"
        );
        // RFC 9004 §5.4: implied = frames / line rate; corrected = what the board held.
        assert!((num(row, "/implied_s") - got / line).abs() < 1e-9, "{row}");
        let held = got - tp * got / line;
        assert!((num(row, "/buffered_frames") - held).abs() < 1e-6, "{row}");
        assert!(
            (num(row, "/corrected_s") - held / line).abs() < 1e-9,
            "{row}"
        );
    }
    // Every burst went whole (the sender stopped at its burst), in a test long enough for
    // the queue to drain (the burst plus 2 s); a burst that lost frames lost them in the board.
    let bursts: Vec<&Value> = rows(s, "trials")
        .iter()
        .filter(|t| t["test"] == "back-to-back")
        .collect();
    assert!(bursts.len() >= 6, "{s}");
    for t in &bursts {
        assert_eq!(t["offered"], t["burst"], "{t}");
        assert!(num(t, "/seconds") >= 2.9, "{t}");
        if t["passed"] == false {
            assert_eq!(t["bound"], "dut", "{t}");
        }
    }
    assert!(bursts.iter().any(|t| t["passed"] == false));
    assert!(tbf_drops(&board, "eth1") > 0);
    let text = ns_out(
        &board,
        bin(),
        &[
            "runs",
            "--data",
            lab.dir().join("data").to_str().expect("utf-8"),
            "show",
            &run["id"].to_string(),
        ],
    );
    assert!(
        text.contains("Back-to-back frames (RFC 2544 §26.4, RFC 9004)"),
        "{text}"
    );
}

/// RFC 2544 as a suite step (board farms, CI): a definition with two rfc2544 steps through
/// the 100 Mbit/s TBF, one whose limit the board keeps (throughput ≥ 8 % of 1 GbE: the shaper
/// is 10.2 %, and 1 s trials at 5 % resolution found 9.4–10.2 %) and one it cannot (≥ 50 %); `netperfd suite run` exits 1 and its JUnit report
/// has one failure, naming the frame size and the figure.
#[test]
fn a_suite_step_benchmarks_the_board_against_thresholds() {
    let _one = serial();
    let (mut lab, tf) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    tbf_100m(&board, "eth1");
    let data = lab.dir().join("data");
    let data = data.to_str().expect("utf-8").to_string();
    let step = |min: u32| {
        json!({"kind": "rfc2544", "ingress": "eth0", "egress": "eth1", "nat": "on",
               "sizes": "1518", "trial": 1, "resolution": 5, "line_rate": "1G",
               "label": format!("DUT ≥ {min} %"),
               "thresholds": {"min_throughput_percent": min}})
    };
    let def = json!({"name": "dut", "steps": [step(8), step(50)]});
    let file = lab.dir().join("dut.json");
    std::fs::write(&file, def.to_string()).expect("write the definition");
    let (code, _, err) = lab.run(
        &board,
        "import",
        bin(),
        &[
            "suite",
            "--data",
            &data,
            "import",
            file.to_str().expect("utf-8"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let junit = lab.dir().join("junit.xml");
    let (code, out, err) = lab.run(
        &board,
        "suite",
        bin(),
        &[
            "suite",
            "--data",
            &data,
            "run",
            "dut",
            "--peer",
            PC2_IP,
            "--agent",
            "http://192.0.2.2:5280",
            "--agent-token-file",
            &tf,
            "--junit",
            junit.to_str().expect("utf-8"),
        ],
        Duration::from_secs(240),
    );
    assert_eq!(code, Some(1), "one step fails its limit: {out}\n{err}");
    let x = std::fs::read_to_string(&junit).expect("the JUnit report");
    eprintln!("{x}");
    assert!(
        x.contains(r#"tests="2""#) && x.contains(r#"failures="1""#),
        "{x}"
    );
    assert!(x.contains("DUT ≥ 50 %") && x.contains("DUT ≥ 8 %"), "{x}");
    // The failure names the size and the figure: the shaper's ~10.2 % of the line rate.
    let fail = x
        .split("<failure")
        .nth(1)
        .unwrap_or_else(|| panic!("no failure in {x}"));
    let pct: f64 = fail
        .split("1518 B throughput (% of the line rate) ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no throughput figure in {fail}"));
    let shaped = 100.0 * shaped_fps(1518.0) / (1e9 / (8.0 * 1538.0));
    assert!(
        pct >= 0.85 * shaped && pct <= 1.02 * shaped,
        "{pct} % vs the shaper's {shaped:.2} %"
    );
    assert!(fail.contains("&lt; 50 %"), "{fail}");
    // Both steps are RFC 2544 runs of the suite, in history; forwarding is off again.
    let list = ns_out(
        &board,
        bin(),
        &[
            "runs", "--data", &data, "--json", "list", "--kind", "rfc2544",
        ],
    );
    let runs: Value = serde_json::from_str(&list).unwrap_or(Value::Null);
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{list}");
    assert_eq!(
        ns_out(&board, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "0"
    );
}

/// Without a shaper the board forwards 1518-byte frames at the line rate given (1 GbE): the
/// throughput found equals what a plain forwarding UDP run of the same frames reaches with no
/// loss, within the resolution (1 %), and every trial's counts add up. PC2 receives with
/// `netperfd -s` (recvmmsg): a stock iperf3 3.x receiver on this 2-core lab loses frames in
/// its own socket from ~35 k frames/s, which the search reports as the receiving PC's limit.
#[test]
fn unshaped_throughput_is_what_a_forwarding_run_carries_without_loss() {
    let _one = serial();
    let (mut lab, tf) = Lab::with_agent(TOKEN);
    let pc2 = lab.pc2.clone().expect("pc2");
    lab.spawn(&pc2, "netperfd-s", bin(), &["-s", "-p", "5202"]);
    lab.wait_port(&pc2, PC2_IP, 5202);
    let mut path = path_args(&tf);
    path.extend_from_slice(&["-p", "5202"]);
    let mut a = path.to_vec();
    a.extend_from_slice(&[
        "--sizes",
        "1518",
        "--trial",
        "2",
        "--resolution",
        "1",
        "--line-rate",
        "1G",
        "--min-throughput-percent",
        "99",
    ]);
    let (code, run, err) = rfc_cli(&mut lab, "rfc2544-unshaped", &a);
    assert_eq!(code, Some(0), "{err}\n{run}");
    // The limit given with the run held: PASS, its one check at the run's own figure.
    assert_eq!(run["verdict"]["pass"], true, "{run}");
    assert_eq!(
        run["verdict"]["checks"][0]["value"],
        rows(&run["summary"], "throughput")[0]["percent_line"],
        "{run}"
    );
    let s = &run["summary"];
    trials_add_up(s);
    let row = &rows(s, "throughput")[0];
    assert_eq!(row["limit"], "line-rate", "{row}");
    let fps = num(row, "/fps");
    let line = 1e9 / (8.0 * 1538.0);
    assert!((fps - line).abs() < 1.0, "{fps} vs the line rate {line}");
    // The same frames as a plain forwarding run at that rate (iperf3 counts the payload).
    let bitrate = format!("{}", (fps * 8.0 * 1472.0).ceil() as u64);
    let data = lab.dir().join("data").to_str().expect("utf-8").to_string();
    let mut f = vec!["forward", "--data", &data, "--json"];
    f.extend_from_slice(&path);
    f.extend_from_slice(&["-u", "-b", &bitrate, "-l", "1472", "-t", "3"]);
    let board = lab.board.clone();
    let (code, out, err) = lab.run(&board, "forward-1518", bin(), &f, Duration::from_secs(90));
    assert_eq!(code, Some(0), "{out}\n{err}");
    let fwd = json(&out, "netperfd forward --json");
    assert_eq!(fwd["status"], "completed", "{fwd}");
    let lost = num(&fwd, "/lost_packets");
    let total = num(&fwd, "/total_packets");
    assert_eq!(
        lost, 0.0,
        "the forwarding run lost frames at the throughput: {fwd}"
    );
    // Its received frames/s: the receiver's bitrate over the payload.
    let got = num(&fwd, "/receiver_bps") / (8.0 * 1472.0);
    eprintln!("forwarding run: {total} datagrams, {got:.0} frames/s; RFC 2544: {fps:.0}");
    assert!(
        (got - fps).abs() <= 0.01 * fps + 0.01 * fps,
        "a forwarding run carried {got:.0} frames/s, the search found {fps:.0}"
    );
}

/// A PC that cannot send the rate (pc1's own egress shaped to 100 Mbit/s) is never the board's
/// throughput; the API starts the run, the result page says it is a lower bound, and the form
/// refuses a bad size with nothing started.
#[test]
fn a_generator_bound_search_is_a_lower_bound_on_the_page() {
    let _one = serial();
    let (mut lab, _tf) = Lab::with_agent(TOKEN);
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    tbf_100m(&pc1, "eth0");
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    // Bad input: a clear 400 for each, and no run recorded.
    let base = json!({"peer": "http://192.0.2.2:5280", "token": TOKEN, "target": PC2_IP,
                      "ingress": "eth0", "egress": "eth1", "nat": true, "line_rate": "1G"});
    for (k, v, want) in [
        ("sizes", json!("63"), "below Ethernet's minimum of 64"),
        ("sizes", json!("9217"), "beyond the MTU"),
        ("loss", json!(101), "loss (%) 101 is out of range"),
        ("trial", json!(0), "trial (s) 0 is out of range"),
        ("egress", json!("eth7"), "no port 'eth7'"),
        ("tests", json!("back-to-back"), "choose throughput too"),
        (
            "b2b_repeat",
            json!(0),
            "back-to-back repeat 0 is out of range",
        ),
        (
            "min_throughput_percent",
            json!(101),
            "min_throughput_percent is a percentage (0..100)",
        ),
        (
            "min_throughput_percent",
            json!("ten"),
            "minimum throughput (% of the line rate) 'ten' is not a number",
        ),
        (
            "max_latency_ms",
            json!(5),
            "a maximum latency needs the latency test",
        ),
        // A misspelt limit was accepted and the run went unjudged (tryout, stop 46).
        (
            "max_latency",
            json!(5),
            "unknown field `max_latency`, expected one of peer, token",
        ),
    ] {
        let mut b = base.clone();
        b[k] = v;
        let r = http.api("POST", "/api/runs/rfc2544", &b);
        assert_eq!(r.status, 400, "{b}: {}", r.body);
        let e = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(e.contains(want), "{b}: {e}");
    }
    assert_eq!(http.get_json("/api/runs?kind=rfc2544"), json!([]));
    let mut b = base.clone();
    b["sizes"] = json!([1518]);
    b["trial"] = json!(1);
    b["resolution"] = json!(5);
    // PC2 runs stock iperf3 only: the latency row says why it has no figure. The bursts of
    // the back-to-back test fill PC1's own shaper first: a lower bound, never the board's.
    b["tests"] = json!("throughput,latency,back-to-back");
    // Pass/fail limits given with the run: the PC's lower bound (~10 % of 1 GbE) reaches 5 %,
    // the latency PC2 never answered cannot be checked, so the run fails on that alone.
    b["min_throughput_percent"] = json!(5);
    b["max_latency_ms"] = json!(50);
    let r = http.api("POST", "/api/runs/rfc2544", &b);
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    let v = wait_run(&http, id, Duration::from_secs(180));
    assert_eq!(v["run"]["status"], "completed", "{v}");
    // The ports' counters are the trials' own evidence: nothing is set against a run with no
    // byte count of its own (it said "the board's ports moved … beyond the run's own 0.000 MB").
    assert!(v["board"].is_object(), "{v}");
    assert!(v["board"].get("other_bytes").is_none(), "{}", v["board"]);
    let s = &v["run"]["summary"];
    trials_add_up(s);
    let row = &rows(s, "throughput")[0];
    assert_eq!(row["limit"], "generator", "{row}");
    assert_eq!(row["dut"], false);
    // The shaped PC passes about 100 Mbit/s: the search stops near its rate, from below.
    let got = num(row, "/fps");
    assert!(
        got <= shaped_fps(1518.0) * 1.02 && got >= shaped_fps(1518.0) * 0.85,
        "{got} frames/s: {row}"
    );
    for t in rows(s, "trials") {
        assert_ne!(t["bound"], "dut", "a PC's loss charged to the board: {t}");
        if t["passed"] == false {
            assert_eq!(t["bound"], "generator", "{t}");
        }
    }
    assert!(tbf_drops(&pc1, "eth0") > 1000);
    let lat = &rows(s, "latency")[0];
    assert!(
        lat["note"]
            .as_str()
            .is_some_and(|n| n.contains("did not answer the probes on UDP port 5291")),
        "{lat}"
    );
    assert_eq!(lat["answered"], 0, "{lat}");
    let verdict = &v["verdict"];
    assert_eq!(verdict["pass"], false, "{verdict}");
    assert_eq!(
        verdict["checks"][0]["value"], row["percent_line"],
        "{verdict}"
    );
    assert_eq!(verdict["checks"][0]["pass"], true, "{verdict}");
    assert_eq!(verdict["checks"][1]["key"], "max_latency_ms", "{verdict}");
    assert_eq!(verdict["checks"][1]["value"], Value::Null, "{verdict}");
    assert_eq!(verdict["checks"][1]["pass"], false, "{verdict}");
    let b2b = &rows(s, "back_to_back")[0];
    assert_eq!(b2b["limit"], "generator", "{b2b}");
    assert_eq!(b2b["dut"], false, "{b2b}");
    assert!(num(b2b, "/frames") >= 1.0, "{b2b}");
    assert!(
        b2b["note"]
            .as_str()
            .is_some_and(|n| n.contains("lower bound")),
        "{b2b}"
    );

    // The pages, as a user sees them.
    chromedriver(&mut lab, &board, WD_PORT);
    let shots = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-screens");
    let base_url = format!("http://127.0.0.1:{WEB_PORT}");
    let _ = std::fs::create_dir_all(&shots);
    for (w, h) in [(1400, 1000), (390, 844)] {
        let profile = lab.dir().join(format!("chrome-{w}"));
        let b = Browser::open(&board, WD_PORT, &base_url, w, h, &profile);
        b.log_in("correct horse");
        b.go(&format!("/runs/{id}"));
        // Its JSON export is the run's own document, not iperf3's.
        let export = b.js("return document.querySelector('#export-json').textContent;");
        assert_eq!(export, json!("Export JSON"), "{w} px");
        let verdict = b.js("return document.querySelector('#verdict').innerText;");
        let verdict = verdict.as_str().unwrap_or_default();
        assert!(
            verdict.starts_with("FAIL: 1 of 2 limits broken")
                && verdict.contains("pass: 1518 B throughput (% of the line rate)")
                && verdict.contains("fail: 1518 B latency p99 unknown"),
            "{w} px: {verdict}"
        );
        let cmd = b.js("return document.querySelector('#cmdline').innerText;");
        assert!(
            cmd.as_str()
                .is_some_and(|c| c.ends_with("--min-throughput-percent 5 --max-latency-ms 50")),
            "{w} px: {cmd}"
        );
        let table = b.js("return document.querySelector('#rfc-throughput').innerText;");
        let table = table.as_str().unwrap_or_default();
        assert!(table.contains("≥ "), "{w} px: {table}");
        assert!(table.contains("lower bound"), "{w} px: {table}");
        assert!(b.displayed("#rfc-chart"), "{w} px: no chart");
        let b2b = b.js("return document.querySelector('#rfc-b2b').innerText;");
        let b2b = b2b.as_str().unwrap_or_default();
        assert!(
            b2b.contains("≥ ") && b2b.contains("generating PC could not send a longer burst"),
            "{w} px: {b2b}"
        );
        let sw = b.js("return document.documentElement.scrollWidth - window.innerWidth;");
        assert!(
            sw.as_i64().unwrap_or(1) <= 0,
            "{w} px: the run page scrolls sideways by {sw}"
        );
        b.screenshot(&shots, &format!("{w}-rfc2544-run"));
        // No ceiling verdict: the trials are the verdicts.
        assert_eq!(
            b.js("return document.getElementById('analysis') === null;"),
            json!(true),
            "{w} px: a ceiling verdict on an RFC 2544 run"
        );
        b.js("document.getElementById('rfc2544').scrollIntoView(); return 0;");
        b.screenshot(&shots, &format!("{w}-rfc2544-tables"));
        // The form: a bad size is refused with the message, and nothing starts.
        b.go("/rfc2544");
        b.js("document.querySelector('#rfc2544-form [name=sizes]').value = '63'; return 0;");
        b.type_into("#rfc2544-form [name=target]", PC2_IP);
        b.js("document.querySelector('#rfc2544-form [name=peer]').value = 'http://192.0.2.2:5280'; return 0;");
        assert!(
            b.displayed("#rfc2544-form [name=test_b2b]"),
            "{w} px: no back-to-back"
        );
        assert!(
            b.displayed("#rfc2544-form [name=b2b_repeat]"),
            "{w} px: no repeat"
        );
        b.click("#rfc2544-form button[type=submit]");
        let e = b.wait_text("form-error", "frame size 63");
        assert!(e.contains("below Ethernet's minimum of 64"), "{e}");
        let sw = b.js("return document.documentElement.scrollWidth - window.innerWidth;");
        assert!(
            sw.as_i64().unwrap_or(1) <= 0,
            "{w} px: the form scrolls sideways by {sw}"
        );
        b.screenshot(&shots, &format!("{w}-rfc2544-form"));
    }
    // A stop ends the run at once, aborted and FAIL — never a search that runs on to a
    // "completed" PASS (the tryout: 1 s trials, the stop taken by a trial that was ending).
    let mut b = base.clone();
    b["sizes"] = json!("1518,1280,1024,512");
    b["trial"] = json!(1);
    b["min_throughput_percent"] = json!(1);
    let r = http.api("POST", "/api/runs/rfc2544", &b);
    assert_eq!(r.status, 201, "{}", r.body);
    let id2 = r.json()["id"].as_i64().expect("id");
    // The stop comes mid-search: a duration into the run (trials of 1 s).
    std::thread::sleep(Duration::from_secs(3));
    let t0 = std::time::Instant::now();
    assert_eq!(
        http.call("POST", &format!("/api/runs/{id2}/stop")).status,
        202
    );
    let v = wait_run(&http, id2, Duration::from_secs(30));
    eprintln!("stopped after {:?}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    assert_eq!(v["run"]["status"], "aborted", "{v}");
    assert_eq!(v["verdict"]["pass"], false, "{}", v["verdict"]);
    assert_eq!(
        v["verdict"]["reasons"],
        json!(["the test was stopped"]),
        "{}",
        v["verdict"]
    );
    let list = http.get_json("/api/runs?kind=rfc2544");
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
    assert_eq!(
        ns_out(&board, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "0"
    );
}

/// Bad input on the command line: exit 2 and one clear message, nothing recorded; a peer
/// that does not answer fails the run before anything on the board changes.
#[test]
fn bad_input_and_a_peer_that_is_down_start_nothing() {
    let _one = serial();
    let (mut lab, tf) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    let base = [
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
        "--line-rate",
        "1G",
    ];
    for (extra, want) in [
        (&["--sizes", "63"][..], "below Ethernet's minimum of 64"),
        (&["--sizes", "9217"][..], "beyond the MTU"),
        (&["--loss", "101"][..], "loss (%) 101 is out of range"),
        (&["--trial", "0"][..], "trial (s) 0 is out of range"),
        (&["--tests", "latency"][..], "choose throughput too"),
        (&["--tests", "back-to-back"][..], "choose throughput too"),
        (
            &["--tests", "throughput,b2b", "-R"][..],
            "direction must be send, not receive",
        ),
        (
            &["--tests", "throughput,b2b", "--b2b-repeat", "51"][..],
            "back-to-back repeat 51 is out of range (1..50)",
        ),
    ] {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        let (code, out, err) = rfc_cli(&mut lab, "bad", &a);
        assert_eq!(code, Some(2), "{extra:?}: {out} {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    let mut a: Vec<&str> = base.to_vec();
    a[9] = "eth9";
    let (code, _, err) = rfc_cli(&mut lab, "bad-port", &a);
    assert_eq!(code, Some(2));
    assert!(err.contains("no port 'eth9'"), "{err}");
    // Nothing was recorded: the history was not even opened (its directory does not exist).
    let data = lab.dir().join("data");
    assert!(!data.exists(), "a refused request opened the history");
    // The agent is down (nothing listens on 5999): the run fails, forwarding never went on.
    let mut a: Vec<&str> = base.to_vec();
    a[1] = "http://192.0.2.2:5999";
    let (code, run, err) = rfc_cli(&mut lab, "down", &a);
    assert_eq!(code, Some(1), "{run} {err}");
    assert_eq!(run["status"], "failed", "{run}");
    assert!(
        run["summary"]["trials"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{run}"
    );
    assert!(
        run["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{run}"
    );
    assert_eq!(
        ns_out(&board, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "0"
    );
}

/// Issue 38 item 5: PC1's generator that stalls (the agent stopped 25 ms every 600 ms with
/// SIGSTOP, as a PC that lost its core) and then repays what it owes in a burst, through the
/// 100 Mbit/s TBF with its 10 ms queue. The bursts overflow the queue at rates the shaper
/// passes at a constant rate (24,606 frames/s at 512 B); before, those losses set the
/// board's throughput below the shaper (22,197 frames/s in the issue). Now every failing
/// trial near the shaper's rate that lagged is tried again, and the size ends as a
/// generator-limited lower bound. Independent truth: the stall we imposed (each lagged trial's
/// measured lag is at least it) and the shaper's rate (never exceeded by the figure).
#[test]
fn a_generator_that_stalls_and_bursts_is_a_lower_bound_never_the_board_s() {
    let _one = serial();
    let (mut lab, tf) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    tbf_100m(&board, "eth1");
    let agent = nix::unistd::Pid::from_raw(lab.pid(0) as i32);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stalls = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            use nix::sys::signal::{kill, Signal};
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(600));
                let _ = kill(agent, Signal::SIGSTOP);
                std::thread::sleep(Duration::from_millis(25));
                let _ = kill(agent, Signal::SIGCONT);
            }
        })
    };
    let mut a = path_args(&tf);
    a.extend_from_slice(&[
        "--sizes",
        "512",
        "--trial",
        "1",
        "--resolution",
        "5",
        "--line-rate",
        "1G",
    ]);
    let (code, run, err) = rfc_cli(&mut lab, "rfc2544-stalls", &a);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = stalls.join();
    assert_eq!(code, Some(0), "{err}\n{run}");
    let s = &run["summary"];
    trials_add_up(s);
    let trials = rows(s, "trials");
    for t in trials {
        eprintln!(
            "{:.0} fps asked: lag {} ms, lost {}, passed {}, lagged {}",
            num(t, "/target_fps"),
            t["sender_lag_ms"],
            t["lost_frames"],
            t["passed"],
            t["lagged"]
        );
    }
    let row = &rows(s, "throughput")[0];
    eprintln!("throughput {row}");
    let shaped = shaped_fps(512.0);
    let got = num(row, "/fps");
    assert!(
        got <= shaped * 1.01,
        "{got} frames/s through a shaper of {shaped}"
    );
    // Every lagged trial did lag: at least most of the 25 ms stall, as the agent measured.
    let lagged: Vec<&Value> = trials.iter().filter(|t| t["lagged"] == true).collect();
    assert!(!lagged.is_empty(), "no trial lagged: {s}");
    for t in &lagged {
        assert_eq!(t["passed"], false, "{t}");
        assert!(num(t, "/sender_lag_ms") >= 20.0, "{t}");
    }
    // A figure below the shaper's rate is never the board's: either the lag limited it (and
    // the row says so), or the board really dropped at a rate no stall explains.
    if got < shaped * 0.95 {
        assert_eq!(
            row["limit"], "generator",
            "{got} fps charged to the board: {row}"
        );
        assert_eq!(row["lag_limited"], true, "{row}");
        assert!(num(row, "/max_lag_ms") >= 20.0, "{row}");
        // The lagged rate was tried three times in a row (1 + 2 repeats).
        let repeats = trials
            .windows(3)
            .filter(|w| {
                w.iter()
                    .all(|t| t["lagged"] == true && t["target_fps"] == w[0]["target_fps"])
            })
            .count();
        assert!(repeats >= 1, "{s}");
        // The row quotes the tries at the limiting rate, each with its own lag (not the
        // largest lag of the search).
        let quoted: Vec<f64> = row["lag_tries_ms"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        assert_eq!(quoted.len(), 3, "{row}");
        assert!(
            trials.windows(3).any(|w| w
                .iter()
                .zip(&quoted)
                .all(|(t, l)| t["target_fps"] == row["lag_rate_fps"]
                    && t["lagged"] == true
                    && num(t, "/sender_lag_ms") == *l)),
            "{row}"
        );
        let text = ns_out(
            &board,
            bin(),
            &[
                "runs",
                "--data",
                lab.dir().join("data").to_str().expect("utf-8"),
                "show",
                &run["id"].to_string(),
            ],
        );
        assert!(
            text.contains("generator-limited lower bound: PC1 fell ")
                && text.contains("behind its schedule in each of the 3 tries at"),
            "{text}"
        );
        assert!(text.contains(&format!("≥ {}", fmt_count(got))), "{text}");
    } else {
        assert_eq!(row["limit"], "dut", "{row}");
    }
    // The page, at a phone's and a desktop's width, when asked (NETPERFD_SHOTS=1: about
    // 15 s more, kept out of CI's share): each trial's lag, the framing, the two charts.
    if std::env::var_os("NETPERFD_SHOTS").is_none() {
        return;
    }
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    chromedriver(&mut lab, &board, WD_PORT);
    let shots = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-screens");
    let _ = std::fs::create_dir_all(&shots);
    let base_url = format!("http://127.0.0.1:{WEB_PORT}");
    for (w, h) in [(1400, 1000), (390, 844)] {
        let profile = lab.dir().join(format!("chrome-{w}"));
        let b = Browser::open(&board, WD_PORT, &base_url, w, h, &profile);
        b.log_in("correct horse");
        b.go(&format!("/runs/{}", run["id"]));
        let trials = b.js("return document.querySelector('#rfc-trials').innerText;");
        let trials = trials.as_str().unwrap_or_default();
        assert!(trials.contains("PC1 lag (ms)"), "{w} px: {trials}");
        assert!(b.displayed("#rfc-framing"), "{w} px");
        assert!(b.displayed("#rfc-loss-chart"), "{w} px");
        assert_eq!(
            b.js("return document.getElementById('chart-throughput') === null;"),
            json!(true),
            "{w} px"
        );
        let sw = b.js("return document.documentElement.scrollWidth - window.innerWidth;");
        assert!(
            sw.as_i64().unwrap_or(1) <= 0,
            "{w} px: scrolls sideways by {sw}"
        );
        b.screenshot(&shots, &format!("{w}-rfc2544-lag"));
        b.js("document.getElementById('rfc2544').scrollIntoView(); return 0;");
        b.screenshot(&shots, &format!("{w}-rfc2544-lag-tables"));
        b.js("document.getElementById('rfc-trials').scrollIntoView(); return 0;");
        b.screenshot(&shots, &format!("{w}-rfc2544-lag-trials"));
    }
}

/// Issue 38 item 6: PC1 without a route to PC2's network. The agent's "Network is unreachable"
/// is PC1's: the run says so and names the route PC1 needs through the board, for an RFC 2544
/// and a forwarding run; nothing stays enabled on the board.
#[test]
fn an_agent_without_a_route_names_pc1_and_the_route() {
    let _one = serial();
    let mut lab = Lab::with_pc2();
    let (pc1, pc2, board) = (
        lab.pc1.clone(),
        lab.pc2.clone().expect("pc2"),
        lab.board.clone(),
    );
    let tf = lab.token_file(TOKEN);
    lab.spawn(
        &pc1,
        "agent",
        bin(),
        &[
            "peer",
            "--listen",
            "192.0.2.2:5280",
            "--plain-http",
            "--token-file",
            &tf,
        ],
    );
    lab.wait_port(&pc1, PC1_IP, 5280);
    lab.spawn(&pc2, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc2, PC2_IP, 5201);
    let route = "ip route add 198.51.100.0/24 via 192.0.2.1";
    let mut a = path_args(&tf);
    a.extend_from_slice(&["--sizes", "1518", "--trial", "1", "--line-rate", "1G"]);
    let (code, run, err) = rfc_cli(&mut lab, "rfc2544-noroute", &a);
    assert_eq!(code, Some(1), "{err}\n{run}");
    assert_eq!(run["status"], "failed", "{run}");
    let e = run["error"].as_str().unwrap_or_default();
    assert!(e.contains("Network is unreachable"), "{e}");
    assert!(
        e.contains("this error came from PC1 (the peer agent at 192.0.2.2)"),
        "{e}"
    );
    assert!(e.contains(route), "{e}");
    // A forwarding run, without NAT: PC2 needs the way back too.
    let data = lab.dir().join("data").to_str().expect("utf-8").to_string();
    let mut f = vec!["forward", "--data", &data, "--json"];
    f.extend_from_slice(&path_args(&tf)[..10]);
    f.extend_from_slice(&["-u", "-b", "10M", "-t", "1"]);
    let (code, out, err) = lab.run(
        &board,
        "forward-noroute",
        bin(),
        &f,
        Duration::from_secs(60),
    );
    let fwd = json(&out, "netperfd forward --json");
    assert_ne!(code, Some(0), "{out}\n{err}");
    let e = fwd["error"].as_str().unwrap_or_default();
    assert!(e.contains("came from PC1") && e.contains(route), "{e}");
    assert!(
        e.contains("on PC2: ip route add 192.0.2.0/24 via 198.51.100.1"),
        "{e}"
    );
    assert_eq!(
        ns_out(&board, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "0"
    );
}

/// 24606 → "24,606" (the pages' count style).
fn fmt_count(v: f64) -> String {
    let s = format!("{:.0}", v.round());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
