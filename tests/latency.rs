//! Latency under load (issue 14): a TBF bottleneck of 100 Mbit/s (burst 32 kbit: stock
//! `iperf3 -R` gets 94.7 Mbit/s through it, the TCP goodput ceiling) in front of the prober,
//! stock `iperf3 -s` on the PC, ICMP answered by the PC's kernel. A 1.25 MB queue drains in
//! 100 ms at 100 Mbit/s, so under download load the loaded p50 grows by ~100 ms; with a 30 KB
//! queue (2.4 ms) it stays under 10 ms. Also: the CLI's `--json`, bad input refused without a
//! run, the API and the web page in headless Chromium (RTT chart present, figures shown).
//!
//! Topology: the queue must sit on a hop that forwards, not on the sending host's own qdisc —
//! there TCP Small Queues keep each socket's share of the qdisc near 1 ms of data and the
//! queue never fills (measured: +7 ms instead of +100 ms with TBF on the PC's own egress). So
//! the lab's three namespaces are used as PC (pc1, 192.0.2.2, `iperf3 -s`) — router (the lab's
//! "board" namespace, forwarding, TBF on its port towards the prober) — prober (pc2,
//! 198.51.100.2, where netperfd runs).

mod common;
use common::http::*;
use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

fn ns_run(ns: &str, args: &[&str]) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .expect("run in namespace");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// PC — router (TBF towards the prober) — prober, `iperf3 -s` on the PC.
fn lab(limit: &str) -> Lab {
    let mut lab = Lab::with_pc2();
    let (pc, router) = (lab.pc1.clone(), lab.board.clone());
    let prober = lab.pc2.clone().expect("pc2");
    ns_run(&router, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // A receive window that does not cap the sender below the queue (1.25 MB + BDP).
    ns_run(
        &prober,
        &["sysctl", "-qw", "net.ipv4.tcp_rmem=4096 4194304 16777216"],
    );
    ns_run(
        &pc,
        &["ip", "route", "add", "198.51.100.0/24", "via", BOARD_IP],
    );
    ns_run(
        &prober,
        &["ip", "route", "add", "192.0.2.0/24", "via", BOARD_IP2],
    );
    let out = Command::new("ip")
        .args([
            "netns", "exec", &router, "tc", "qdisc", "replace", "dev", "eth1", "root", "tbf",
        ])
        .args(["rate", "100mbit", "burst", "32kbit", "limit", limit])
        .output()
        .expect("tc");
    assert!(
        out.status.success(),
        "tc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lab.spawn(&pc, "iperf3-s", "iperf3", &["-s", "-B", PC1_IP]);
    lab.wait_port(&pc, PC1_IP, 5201);
    lab
}

/// The TBF's drop count and backlog and the PC's retransmit / reordering counters, for the
/// failure message of a queue that did not fill.
fn queue_report(lab: &Lab) -> String {
    let out = |ns: &str, args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let tbf = out(&lab.board, &["tc", "-s", "qdisc", "show", "dev", "eth1"]);
    let tcp = out(
        &lab.pc1,
        &[
            "nstat",
            "-az",
            "TcpRetransSegs",
            "TcpExtTCPSackRecovery",
            "TcpExtTCPDSACKRecv",
            "TcpExtTCPDSACKUndo",
        ],
    );
    format!("router: {tbf}\nPC: {tcp}")
}

/// The router's TBF backlog (bytes) sampled every 50 ms while a test runs: what the queue
/// actually held, so a delay figure is checked against the queue the load really built (a
/// load that did not fill the queue is a fact about TCP on a loaded machine, not about the
/// measurement: once in a full run 4 cubic streams kept the 100 ms queue 57 % full, nothing
/// dropped, and the echo read +56.7 ms).
struct QueueWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(f64, f64)>>,
}

impl QueueWatch {
    fn start(router: &str) -> QueueWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, router) = (stop.clone(), router.to_string());
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut out = Vec::new();
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                let o = Command::new("ip")
                    .args(["netns", "exec", &router, "tc", "-s", "-j", "qdisc", "show"])
                    .args(["dev", "eth1"])
                    .output();
                let v: Value = o
                    .ok()
                    .and_then(|o| serde_json::from_slice(&o.stdout).ok())
                    .unwrap_or(Value::Null);
                if let Some(b) = v[0]["backlog"].as_f64() {
                    out.push((t0.elapsed().as_secs_f64(), b));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            out
        });
        QueueWatch { stop, thread }
    }

    /// The median backlog (bytes) of the samples taken from `from` to `to` s after the start.
    fn median(self, from: f64, to: f64) -> f64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let all = self.thread.join().expect("queue watch");
        let mut v: Vec<f64> = all
            .iter()
            .filter(|(t, _)| (from..=to).contains(t))
            .map(|(_, b)| *b)
            .collect();
        assert!(
            v.len() >= 20,
            "{} backlog samples in the loaded phase",
            v.len()
        );
        netperfd::model::order::sort_by(&mut v, f64::total_cmp);
        v[v.len() / 2]
    }
}

/// Milliseconds a backlog of `bytes` takes to drain at the lab's 100 Mbit/s.
fn drain_ms(bytes: f64) -> f64 {
    bytes * 8.0 / 100e6 * 1e3
}

fn prober(lab: &Lab) -> String {
    lab.pc2.clone().expect("pc2")
}

/// `netperfd latency -c PC --json …` in the prober namespace; its JSON document.
fn cli(lab: &mut Lab, name: &str, extra: &[&str]) -> Value {
    let data = lab.dir().join("data");
    // This kernel defaults to BBR, which keeps queues short by design; bufferbloat is what
    // loss-based TCP (cubic, Linux's usual default) does to a deep queue.
    let mut args = vec![
        "latency",
        "-c",
        PC1_IP,
        "-C",
        "cubic",
        "--json",
        "--data",
        data.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let board = prober(lab);
    let (code, out, err) = lab.run(&board, name, bin(), &args, Duration::from_secs(60));
    assert_eq!(code, Some(0), "latency {extra:?}: {out}\n{err}");
    json(&out, "netperfd latency --json")
}

/// The big-queue tests load with 4 streams. With one stream they failed when the machine was
/// busy (both run in parallel: +19 to +57 ms instead of ~+83 ms in 6 of 8 runs): CPU
/// contention delays packets in a veth's per-CPU backlog, the PC's TCP sees them out of order
/// or late, retransmits spuriously (a DSACK comes back; the TBF dropped nothing), cubic cuts
/// its window to 0.7 × and takes seconds to grow back, so the 1.25 MB queue never fills. Such
/// a cut of one stream of four costs the aggregate ~8 %, and the queue still fills.
const BIG_QUEUE_STREAMS: &str = "4";

#[test]
fn download_through_a_big_tbf_queue_grows_by_its_drain_time() {
    let _one = serial();
    let mut lab = lab("1250000");
    let watch = QueueWatch::start(&lab.board);
    let v = cli(
        &mut lab,
        "big",
        &[
            "--load",
            "down",
            "-P",
            BIG_QUEUE_STREAMS,
            "--idle",
            "2",
            "--loaded",
            "6",
        ],
    );
    let idle = num(&v, "/idle/rtt_ms/p50");
    let loaded = num(&v, "/loaded/rtt_ms/p50");
    let growth = loaded - idle;
    eprintln!(
        "big queue: idle p50 {idle:.3} ms p90 {:.3} p99 {:.3}; loaded p50 {loaded:.1} p90 {:.1} p99 {:.1} max {:.1}; {:.1} Mbit/s; rpm {:.0}; sent {} lost {}; late p50 {} p99 {} µs",
        num(&v, "/idle/rtt_ms/p90"),
        num(&v, "/idle/rtt_ms/p99"),
        num(&v, "/loaded/rtt_ms/p90"),
        num(&v, "/loaded/rtt_ms/p99"),
        num(&v, "/loaded/rtt_ms/max"),
        num(&v, "/loaded/bits_per_second") / 1e6,
        num(&v, "/rpm"),
        num(&v, "/probes/sent"),
        num(&v, "/probes/lost"),
        num(&v, "/probes/late_us/p50"),
        num(&v, "/probes/late_us/p99"),
    );
    assert!(idle < 1.0, "idle p50 {idle} ms");
    // The loaded phase is 2–8 s after the start; its first second is slow start.
    let backlog = watch.median(3.5, 7.5);
    let queued = drain_ms(backlog);
    eprintln!("the TBF's median backlog in the loaded phase: {backlog} B, {queued:.1} ms");
    // The load filled the 1.25 MB (100 ms) queue: at least half of it, 100 ms at most.
    assert!(
        (50.0..=101.0).contains(&queued),
        "median queue {queued} ms\n{}",
        queue_report(&lab)
    );
    // The growth is the queue's drain time: ± 25 % (and 3 ms for the sampling).
    assert!(
        (growth - queued).abs() <= 0.25 * queued + 3.0,
        "growth {growth} ms, queue {queued} ms\n{}",
        queue_report(&lab)
    );
    let bps = num(&v, "/loaded/bits_per_second");
    // A 100 Mbit/s TBF: 85-100 measured alone, 82.9 once in a full test run, 57.4 once in a
    // full run beside two compiles (other binaries' load on the 2 cores of the lab machine: the
    // cubic load recovers slowly from a loss at 100 ms of queue). The queue's growth above is
    // what proves the load filled the bottleneck; this checks the figure is the shaper's
    // order and never above it.
    assert!((50e6..=100e6).contains(&bps), "throughput {bps}");
    assert!((num(&v, "/rpm") - 60_000.0 / loaded).abs() < 1e-6);
    // 2 + 6 + 2 s at 10 ms: about 1000 probes; a full queue drops a few replies at most.
    let sent = num(&v, "/probes/sent");
    assert!((900.0..=1100.0).contains(&sent), "sent {sent}");
    assert!(num(&v, "/probes/lost") < sent * 0.05);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["loaded"]["direction"], "download");
    // The queue the run estimates (its growth × its throughput) is the one the TBF held.
    let q = num(&v, "/queue_bytes");
    assert!(
        (q - backlog).abs() <= 0.3 * backlog,
        "queue {q} B, TBF held {backlog} B"
    );
    assert!(
        v["verdict"].as_str().unwrap().contains("grows by"),
        "{}",
        v["verdict"]
    );
    // The queue drained after the load.
    assert!(num(&v, "/idle_after/rtt_ms/p50") < 1.0);
}

/// The PC runs `netperfd peer` (its UDP echo on 5291) beside stock `iperf3 -s`: the big queue
/// sits on the PC → prober way, so under download load the *down* one-way delay grows by the
/// queue's drain time and the *up* one stays flat.
#[test]
fn netperfd_peer_echo_gives_one_way_delays_per_direction() {
    let _one = serial();
    let mut lab = lab("1250000");
    let pc = lab.pc1.clone();
    let bin_path = bin();
    lab.spawn(
        &pc,
        "peer",
        bin_path,
        &[
            "peer",
            "--listen",
            &format!("{PC1_IP}:5280"),
            "--plain-http",
            "--token",
            "echo-test-token-0123",
        ],
    );
    lab.wait_port(&pc, PC1_IP, 5280);
    let watch = QueueWatch::start(&lab.board);
    let v = cli(
        &mut lab,
        "owd",
        &[
            "--load",
            "down",
            "-P",
            BIG_QUEUE_STREAMS,
            "--idle",
            "2",
            "--loaded",
            "6",
        ],
    );
    let echo = &v["echo"];
    let down = num(&v, "/loaded/owd_increase_ms/down");
    let up = num(&v, "/loaded/owd_increase_ms/up");
    let icmp = num(&v, "/loaded/rtt_ms/p50") - num(&v, "/idle/rtt_ms/p50");
    let echo_rtt = num(&v, "/loaded/owd_ms/rtt/p50");
    eprintln!(
        "one-way: down +{down:.1} ms (loaded p50 {:.1} p99 {:.1}), up {up:+.2} ms (loaded p50 {:.2} p99 {:.2}); echo RTT p50 {echo_rtt:.1} ms vs ICMP loaded p50 {:.1} (ICMP increase {icmp:.1}); echo {echo}",
        num(&v, "/loaded/owd_ms/down/p50"),
        num(&v, "/loaded/owd_ms/down/p99"),
        num(&v, "/loaded/owd_ms/up/p50"),
        num(&v, "/loaded/owd_ms/up/p99"),
        num(&v, "/loaded/rtt_ms/p50"),
    );
    assert_eq!(echo["answered"], true, "{echo}");
    assert!(echo["note"].is_null(), "{echo}");
    // 2 + 6 + 2 s at 10 ms: ~1000 requests, nearly all answered.
    let (sent, replies) = (num(&v, "/echo/sent"), num(&v, "/echo/replies"));
    assert!((900.0..=1100.0).contains(&sent), "echo sent {sent}");
    assert!(replies > sent * 0.95, "echo replies {replies} of {sent}");
    // The queue (1.25 MB at 100 Mbit/s = 100 ms) is on the way down: its drain time, as the
    // TBF held it, ± 25 %, as the ICMP test.
    let held = watch.median(3.5, 7.5);
    let queued = drain_ms(held);
    assert!(
        (50.0..=101.0).contains(&queued),
        "median queue {queued} ms\n{}",
        queue_report(&lab)
    );
    assert!(
        (down - queued).abs() <= 0.25 * queued + 3.0,
        "down increase {down} ms, queue {queued} ms\n{}",
        queue_report(&lab)
    );
    assert!(up < 10.0, "up increase {up} ms");
    // Issue 38 item 4b: the implied queue sits downstream, at the download's rate, and is the
    // backlog the TBF itself held (its own counter, bytes) ± 25 %.
    assert_eq!(v["queue"]["place"], "downstream", "{}", v["queue"]);
    assert_eq!(v["queue"]["upper_bound"], false);
    let implied = num(&v, "/queue_bytes");
    assert!(
        (implied - held).abs() <= 0.25 * held + 20_000.0,
        "implied queue {implied} bytes, the TBF held {held} bytes\n{}",
        queue_report(&lab)
    );
    // Relative to the idle minimum: the idle phase's delays start at 0 and stay small.
    assert!(num(&v, "/idle/owd_ms/down/p50") >= 0.0);
    assert!(num(&v, "/idle/owd_ms/up/p50") < 1.0);
    // The echo's round trip (up + down, without the peer's turnaround) sees the same queue
    // as the ICMP probes.
    let icmp_loaded = num(&v, "/loaded/rtt_ms/p50");
    assert!(
        (echo_rtt - icmp_loaded).abs() < 0.25 * icmp_loaded,
        "echo RTT {echo_rtt} vs ICMP {icmp_loaded}"
    );
    // The ICMP figures are still there, unchanged in shape.
    assert!(
        (icmp - queued).abs() <= 0.25 * queued + 3.0,
        "ICMP increase {icmp}, queue {queued} ms"
    );
}

#[test]
fn small_tbf_queue_keeps_latency_flat_and_upload_reads_tcp_rtt() {
    let _one = serial();
    let mut lab = lab("30000");
    let v = cli(
        &mut lab,
        "small",
        &["--load", "down", "--idle", "2", "--loaded", "5"],
    );
    let growth = num(&v, "/increase_ms");
    eprintln!(
        "small queue: idle p50 {:.3} ms, loaded p50 {:.3} p99 {:.3}, growth {growth:.3} ms, {:.1} Mbit/s",
        num(&v, "/idle/rtt_ms/p50"),
        num(&v, "/loaded/rtt_ms/p50"),
        num(&v, "/loaded/rtt_ms/p99"),
        num(&v, "/loaded/bits_per_second") / 1e6
    );
    assert!(growth < 10.0, "growth {growth} ms");
    assert!(num(&v, "/loaded/bits_per_second") > 50e6);
    // Stock iperf3 only on the PC: no UDP echo, the run is ICMP-only and says so.
    assert_eq!(v["echo"]["answered"], false, "{}", v["echo"]);
    assert_eq!(v["echo"]["note"], "peer has no netperfd echo");
    assert_eq!(v["status"], "completed");
    assert!(v["loaded"].get("owd_ms").is_none(), "{}", v["loaded"]);
    assert!(v["loaded"].get("owd_increase_ms").is_none());
    // Upload: the board's own sending streams' TCP_INFO RTT is sampled.
    let u = cli(
        &mut lab,
        "up",
        &[
            "--load", "up", "-P", "2", "--idle", "1", "--loaded", "3", "-i", "20",
        ],
    );
    assert_eq!(u["loaded"]["direction"], "upload");
    assert!(num(&u, "/loaded/tcp_rtt_ms/n") >= 2.0, "{}", u["loaded"]);
    let sent = num(&u, "/probes/sent");
    assert!((200.0..=300.0).contains(&sent), "5 s at 20 ms: {sent}");
}

#[test]
fn load_both_reports_each_direction() {
    let _one = serial();
    // TBF 100 Mbit/s (30 KB queue) on the router's port towards the prober: the PC → prober
    // leg (down: the board receives) is capped, the prober → PC leg (up) is not.
    let mut lab = lab("30000");
    let v = cli(
        &mut lab,
        "both",
        &["--load", "both", "--idle", "1", "--loaded", "3"],
    );
    let up = num(&v, "/loaded/up/bits_per_second");
    let down = num(&v, "/loaded/down/bits_per_second");
    let total = num(&v, "/loaded/bits_per_second");
    eprintln!(
        "both: up {:.1} Mbit/s, down {:.1} Mbit/s, total {:.1} Mbit/s, up TCP RTT p50 {:.3} ms",
        up / 1e6,
        down / 1e6,
        total / 1e6,
        num(&v, "/loaded/up/tcp_rtt_ms/p50")
    );
    assert_eq!(v["loaded"]["direction"], "both");
    assert!(
        (30e6..=100e6).contains(&down),
        "down through the TBF: {down}"
    );
    assert!(
        up > down,
        "up {up} is not behind the 100 Mbit/s TBF (down {down})"
    );
    assert!(
        (up + down - total).abs() <= total * 1e-9,
        "{up} + {down} != {total}"
    );
    assert_eq!(num(&v, "/loaded/up/streams"), 1.0);
    assert_eq!(num(&v, "/loaded/down/streams"), 1.0);
    // The TCP RTT is the board's sending streams': with the up leg, not the down leg.
    assert!(num(&v, "/loaded/up/tcp_rtt_ms/n") >= 2.0, "{}", v["loaded"]);
    assert_eq!(
        num(&v, "/loaded/up/tcp_rtt_ms/p50"),
        num(&v, "/loaded/tcp_rtt_ms/p50")
    );
    assert!(v["loaded"]["down"].get("tcp_rtt_ms").is_none());
    assert!(v["idle"].get("up").is_none() && v["idle_after"].get("down").is_none());
    // No one-way delays (stock iperf3 only): the split is unknown, so the queue is an upper
    // bound at the faster direction's goodput, never at the two summed.
    if v["queue"].is_object() {
        assert_eq!(v["queue"]["upper_bound"], true, "{}", v["queue"]);
        assert_eq!(num(&v, "/queue/bits_per_second"), up.max(down));
    }
}

#[test]
fn bad_input_is_refused_and_records_nothing() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let data = lab.dir().join("data");
    let d = data.to_str().unwrap().to_string();
    for (args, want) in [
        (vec!["-P", "0"], "streams must be 1..32"),
        (vec!["--loaded", "0"], "loaded phase"),
        (vec!["-i", "5000"], "probe interval"),
        (vec!["--load", "sideways"], "load must be up, down or both"),
    ] {
        let mut a = vec!["latency", "-c", PC1_IP, "--data", &d];
        a.extend_from_slice(&args);
        let (code, out, err) = lab.run(&board, "bad", bin(), &a, Duration::from_secs(10));
        assert_ne!(code, Some(0), "{args:?}: {out}");
        assert!(
            err.contains(want) || out.contains(want),
            "{args:?}: {out} {err}"
        );
    }
    let (code, out, err) = lab.run(
        &board,
        "badhost",
        bin(),
        &["latency", "-c", "no-such-host.invalid", "--data", &d],
        Duration::from_secs(20),
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("no-such-host.invalid") || out.contains("no-such-host.invalid"),
        "{err}"
    );
    let (_, list, _) = lab.run(
        &board,
        "list",
        bin(),
        &["runs", "list", "--json", "--data", &d],
        Duration::from_secs(10),
    );
    let runs = json(&list, "runs list");
    assert_eq!(runs.as_array().map(|a| a.len()), Some(0), "{runs}");
}

const WEB_PORT: u16 = 8094;
const WD_PORT: u16 = 9526;

fn wd(http: &Http, session: &str, method: &str, path: &str, body: Value) -> Value {
    let url = format!("/session/{session}{path}");
    let r = if method == "GET" {
        http.req(method, &url, vec![], None)
    } else {
        http.json(method, &url, vec![], &body)
    };
    assert_eq!(r.status, 200, "webdriver {method} {path}: {}", r.body);
    serde_json::from_str::<Value>(&r.body).unwrap_or(Value::Null)["value"].clone()
}

#[test]
fn api_and_web_page_in_chromium() {
    let _one = serial();
    let mut lab = lab("1250000");
    let board = prober(&lab);
    let (_d, mut http) = daemon(&mut lab, &board, WEB_PORT, &[]);
    set_up(&lab, &mut http);

    // Bad input through the API: 400 with the reason, no run.
    for (body, want) in [
        (json!({"host": "a b"}), "is not a host name"),
        (
            json!({"host": PC1_IP, "streams": 99}),
            "streams must be 1..32",
        ),
        (json!({"host": PC1_IP, "loaded": 0}), "loaded phase"),
        (json!({"host": PC1_IP, "idle": 9999}), "idle phase"),
        (json!({"host": PC1_IP, "colour": "red"}), "unknown field"),
    ] {
        let r = http.api("POST", "/api/runs/latency", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(want), "{body}: {}", r.body);
    }
    assert_eq!(
        http.get_json("/api/runs?kind=latency")
            .as_array()
            .map(|a| a.len()),
        Some(0)
    );

    let r = http.api(
        "POST",
        "/api/runs/latency",
        &json!({"host": PC1_IP, "load": "down", "idle": "1", "loaded": "4", "streams": BIG_QUEUE_STREAMS, "congestion": "cubic"}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    let v = wait_run(&http, id, Duration::from_secs(40));
    assert_eq!(v["run"]["status"], "completed", "{v}");
    assert_eq!(v["run"]["kind"], "latency");
    // Audited as every other start (s51 tryout: latency runs started by the API were not).
    let (_, log) = lab.output("daemon");
    assert_eq!(
        log.matches(&format!("started run {id} (latency")).count(),
        1,
        "{log}"
    );
    let s = &v["run"]["summary"];
    let growth = num(s, "/increase_ms");
    assert!(
        (60.0..=140.0).contains(&growth),
        "growth {growth}\n{}",
        queue_report(&lab)
    );
    let chart = http.get_json(&format!("/api/runs/{id}/chart"));
    let rtt_points = chart["rtt"]["t"].as_array().map(|a| a.len()).unwrap_or(0);
    assert!(rtt_points > 400, "rtt chart points {rtt_points}");
    assert!(!chart["throughput"]["t"].as_array().unwrap().is_empty());

    // The page as a user sees it.
    lab.spawn(
        &board,
        "chromedriver",
        "chromedriver",
        &[&format!("--port={WD_PORT}")],
    );
    lab.wait_port(&board, "127.0.0.1", WD_PORT);
    let w = Http::new(Some(&board), &format!("http://127.0.0.1:{WD_PORT}"));
    let profile = lab.dir().join("chromium-profile");
    let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
        "binary": "/usr/bin/chromium",
        "args": ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1400",
                 format!("--user-data-dir={}", profile.display())]}}}});
    let r = w.json("POST", "/session", vec![], &caps);
    assert_eq!(r.status, 200, "chromedriver: {}", r.body);
    let sess = serde_json::from_str::<Value>(&r.body).unwrap()["value"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let go = |p: &str| {
        wd(
            &w,
            &sess,
            "POST",
            "/url",
            json!({"url": format!("http://127.0.0.1:{WEB_PORT}{p}")}),
        );
    };
    let js = |s: &str| {
        wd(
            &w,
            &sess,
            "POST",
            "/execute/sync",
            json!({"script": s, "args": []}),
        )
    };
    // A script for polling: None when it could not run (the page was being replaced).
    let try_js = |s: &str| -> Option<Value> {
        let body = json!({"script": s, "args": []});
        let r = w
            .try_req(
                "POST",
                &format!("/session/{sess}/execute/sync"),
                vec![],
                Some(("application/json".into(), body.to_string())),
            )
            .ok()
            .filter(|r| r.status == 200)?;
        serde_json::from_str::<Value>(&r.body)
            .ok()
            .map(|v| v["value"].clone())
    };
    go("/login");
    js("var f=document.querySelector('input[name=password]'); f.value='correct horse'; f.form.submit();");
    wait_until(Duration::from_secs(15), "the login to land", || {
        try_js("return location.pathname;")
            .is_some_and(|p| p.as_str().is_some_and(|p| p != "/login"))
    });
    go(&format!("/runs/{id}"));
    let mut ok = Value::Null;
    for _ in 0..40 {
        ok = js("var c=document.getElementById('chart-rtt'); return {chart: !!(c && c.querySelector('canvas')), series: c ? c.getAttribute('data-series') : null, idle: (document.getElementById('lat-idle-p50')||{}).textContent, loaded: (document.getElementById('lat-loaded-p50')||{}).textContent, rpm: (document.getElementById('lat-rpm')||{}).textContent, tput: (document.getElementById('sum-receiver')||{}).textContent, stock: (document.getElementById('stock-cmdline')||{}).textContent, cmd: (document.getElementById('cmdline')||{}).textContent, cpu: !!document.querySelector('#chart-cpu canvas')};");
        if ok["chart"] == true {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("run page: {ok}");
    assert_eq!(ok["chart"], true, "{ok}");
    assert_eq!(
        ok["series"], "1",
        "download: ICMP line only (no sending stream) {ok}"
    );
    assert!(ok["idle"].as_str().unwrap().ends_with(" ms"), "{ok}");
    let loaded: f64 = ok["loaded"]
        .as_str()
        .unwrap()
        .trim_end_matches(" ms")
        .parse()
        .unwrap();
    assert!((loaded - num(s, "/loaded/rtt_ms/p50")).abs() < 1.0, "{ok}");
    assert!(ok["tput"].as_str().unwrap().contains(" Mbit/s"), "{ok}");
    assert!(ok["rpm"].as_str().unwrap().parse::<f64>().is_ok(), "{ok}");
    assert!(
        ok["stock"].as_str().unwrap().starts_with("ping -i 0.01"),
        "{ok}"
    );
    assert!(
        ok["stock"]
            .as_str()
            .unwrap()
            .contains("iperf3 -c 192.0.2.2 -P 4 -t 4 -R -C cubic"),
        "{ok}"
    );
    assert!(
        ok["cmd"]
            .as_str()
            .unwrap()
            .starts_with("netperfd latency -c 192.0.2.2"),
        "{ok}"
    );
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots/latency");
    std::fs::create_dir_all(&shots).unwrap();
    let png = |name: &str| {
        use base64::Engine;
        let shot = wd(&w, &sess, "GET", "/screenshot", Value::Null);
        let b = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().unwrap_or_default())
            .unwrap();
        assert_eq!(&b[1..4], b"PNG");
        std::fs::write(shots.join(format!("{name}.png")), b).unwrap();
    };
    png("run");

    // The form: a bad field shows the error and starts nothing; the nav has the entry.
    go("/latency");
    let nav = js("return Array.from(document.querySelectorAll('nav a')).some(a => a.getAttribute('href')==='/latency' && a.textContent==='Latency');");
    assert_eq!(nav, true);
    js(&format!("var f=document.getElementById('latency-form'); f.host.value='{PC1_IP}'; f.streams.value='0'; f.submit();"));
    wait_until(Duration::from_secs(15), "the form's error", || {
        try_js("return (document.getElementById('form-error')||{}).textContent;")
            .is_some_and(|e| e.as_str().is_some_and(|e| !e.is_empty()))
    });
    let err = js("return (document.getElementById('form-error')||{}).textContent;");
    assert!(
        err.as_str().unwrap_or("").contains("streams must be 1..32"),
        "{err}"
    );
    png("form-error");
    assert_eq!(
        http.get_json("/api/runs?kind=latency")
            .as_array()
            .map(|a| a.len()),
        Some(1)
    );
    let _ = w.try_req("DELETE", &format!("/session/{sess}"), vec![], None);
}
