//! The loss ledger (issue 24) in the veth lab, against real counters: a stock iperf3 on the PC
//! against the daemon on the board, loss made in one known place (the board's egress TBF, the
//! board's stopped receiver, the PC's egress TBF), and the ledger checked against the same
//! counter read by the test itself (`tc -s qdisc`, `/proc/net/snmp` of the namespace).

mod common;

use common::http::{daemon, set_up, wait_run, Http};
use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The root qdisc's "dropped N" of `tc -s qdisc show dev eth0` in `ns` (skbs).
fn tc_drops(ns: &str) -> u64 {
    tc_stats(ns, "eth0").dropped
}

/// `Udp RcvbufErrors` of `/proc/net/snmp` in `ns`.
fn rcvbuf_errors(ns: &str) -> u64 {
    let t = ns_sh(ns, &["cat", "/proc/net/snmp"]);
    let udp: Vec<&str> = t.lines().filter(|l| l.starts_with("Udp: ")).collect();
    assert_eq!(udp.len(), 2, "{t}");
    let names: Vec<&str> = udp[0].split_whitespace().collect();
    let vals: Vec<&str> = udp[1].split_whitespace().collect();
    let i = names
        .iter()
        .position(|n| *n == "RcvbufErrors")
        .expect("RcvbufErrors");
    vals[i].parse().expect("a number")
}

/// The newest served run once it has ended.
fn served_run(http: &Http) -> Value {
    let t = Instant::now();
    let id = loop {
        let l = http.get_json("/api/runs");
        let id = l
            .as_array()
            .and_then(|a| {
                a.iter()
                    .filter(|r| r["role"] == "server")
                    .map(|r| r["id"].as_i64())
                    .max()
            })
            .flatten();
        if let Some(id) = id {
            break id;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no served run: {l}");
        std::thread::sleep(Duration::from_millis(100));
    };
    wait_run(http, id, Duration::from_secs(20))
}

fn place<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["loss_ledger"]["places"]
        .as_array()?
        .iter()
        .find(|p| p["place"] == name)
}

/// A place's datagrams (capped at the run's lost count) against the kernel's drop counter:
/// never more than the kernel counted (+1 %), and at least 40 % of it. The run's lost count
/// leaves out what the sender's queue dropped after the last datagram that arrived while
/// datagrams arrived until the end (not counted lost: they may still be queued on the path,
/// docs/iperf3-wire.md): on this lab 1–8 % of ~18,000 in most runs, and up to 47 % when the
/// sender stopped late (s52: 14,870 of 26,572; an open measurement question, in the stop's
/// note). A unit error — skbs counted for datagrams, ×10 and more either way — stays outside;
/// the counter's own count is held to 1 % where it is not capped (`within_1_percent`).
fn within_tail(a: f64, b: f64, what: &str) {
    assert!(
        a <= b.max(1.0) * 1.01 && a >= b * 0.4,
        "{what}: {a} vs {b} (more than the kernel counted, or under 40 % of it)"
    );
}

fn within_1_percent(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= b.max(1.0) * 0.01,
        "{what}: {a} vs {b} (more than 1 % apart)"
    );
}

#[test]
fn board_sending_into_its_own_tbf_is_charged_to_the_board_qdisc() {
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    // 100 Mbit/s on the board's egress. A qdisc counts a dropped GSO batch (the daemon sends
    // UDP with GSO) as one drop whatever its datagrams; a burst of one datagram (1600 bytes)
    // makes TBF cut every batch into datagrams before it queues them, so its drops count
    // datagrams (with a larger burst a dropped batch of 2 counts once, and half the loss is
    // left unattributed: measured 6,972 drops for 13,934 lost). A 30 kB queue keeps what is
    // still queued at the end small.
    ns_sh(
        &board,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "1600",
            "limit", "30kb",
        ],
    );
    let (_d, mut http) = daemon(&mut lab, &board, 8241, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);
    let before = tc_drops(&board);
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &["-c", BOARD_IP, "-u", "-b", "150M", "-R", "-t", "3", "-J"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = served_run(&http);
    let tc = (tc_drops(&board) - before) as f64;
    assert!(tc > 1000.0, "the TBF dropped only {tc}");
    eprintln!("tc drops {tc}, ledger {}", v["loss_ledger"]);
    let l = &v["loss_ledger"];
    let lost = num(l, "/lost");
    assert_eq!(lost, num(&v, "/run/lost_packets"), "{l}");
    let q = place(&v, "board_qdisc").unwrap_or_else(|| panic!("no board_qdisc in {l}"));
    assert_eq!(q["port"], "eth0");
    assert_eq!(q["counter"], "qdisc tbf drops on eth0");
    // The qdisc's own count (skbs) is tc's; with a burst of one datagram TBF cut every
    // batch before queueing, so its skbs were datagrams and the place's datagrams match it.
    within_1_percent(num(q, "/counted"), tc, "board_qdisc's own count vs tc -s");
    assert_eq!(q["counted_unit"], "skbs");
    assert_eq!(q["unit"], "datagrams");
    within_tail(num(q, "/packets"), tc, "board_qdisc vs tc -s");
    // A sending run charges nothing to the board's receive path.
    assert_eq!(l["places"].as_array().map(Vec::len), Some(1), "{l}");
    let attributed = num(q, "/packets").min(lost);
    assert!(
        attributed >= 0.99 * lost,
        "only {attributed} of {lost} lost datagrams attributed: {l}"
    );
    assert_eq!(
        num(l, "/unattributed"),
        (lost - num(q, "/packets")).max(0.0)
    );
    // Only the run's own traffic crossed the ports: no "other traffic" said.
    assert!(v["board"].get("other_bytes").is_none(), "{}", v["board"]);
    // The verdict says where they went and what to try.
    let verdict = v["analysis"]["verdict_text"].as_str().unwrap_or("");
    assert!(
        verdict.contains("dropped by the board's own egress queue (tbf on eth0)")
            && verdict.contains("lower -b or raise the shaper"),
        "{verdict}"
    );
    // The board's counters of the run: the qdisc's drops are the ledger's.
    let root = &v["board"]["ports"]["eth0"]["qdiscs"][0];
    assert_eq!(root["kind"], "tbf");
    assert_eq!(root["drops"], q["counted"]);
    // The per-second series saw the drops second by second (whole seconds of the run only).
    let series: Vec<f64> = v["board"]["series"]["qdisc_drops"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let in_series: f64 = series.iter().sum();
    assert!(
        series.len() >= 2 && in_series > 0.3 * tc && in_series <= tc,
        "series {series:?} vs {tc} drops"
    );
    // The run page's charts draw that series: a "qdisc drops" line with the same values on
    // the series' time axis; no clock or temperature chart (this lab has neither).
    let chart = http.get_json(&format!("/api/runs/{}/chart", v["run"]["id"]));
    let drops = &chart["drops"];
    assert_eq!(drops["t"], v["board"]["series"]["t"], "{chart}");
    assert_eq!(drops["series"][0]["label"], "qdisc drops", "{drops}");
    let drawn: Vec<f64> = drops["series"][0]["values"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    assert_eq!(drawn, series);
    assert!(
        chart.get("clock").is_none() && chart.get("temperature").is_none(),
        "{chart}"
    );
    // The run page: the ledger card and the board's counters that moved.
    let page = http.get(&format!("/runs/{}", v["run"]["id"])).body;
    let card = &page[page
        .find("Where the packets went")
        .unwrap_or_else(|| panic!("no ledger card:\n{page}"))..];
    let group = |packets: u64| {
        let t = packets.to_string();
        let mut g = String::new();
        for (i, c) in t.chars().enumerate() {
            if i > 0 && (t.len() - i) % 3 == 0 {
                g.push(',');
            }
            g.push(c);
        }
        g
    };
    let (grouped, counted) = (
        group(num(q, "/packets") as u64),
        group(num(q, "/counted") as u64),
    );
    assert!(
        card.contains(&format!(
            "<td>board_qdisc</td><td>eth0</td><td>{grouped}</td><td>datagrams</td><td>qdisc tbf drops on eth0: {counted} skbs</td>"
        )),
        "{card}"
    );
    let board_section = &page[page.find("Board during the run").expect("board section")..];
    assert!(
        board_section.contains("<dt>eth0 qdisc tbf ")
            && board_section.contains(&format!(" (root)</dt><dd>drops +{counted}")),
        "{board_section}"
    );
    // The same ledger from the CLI and in the history export.
    let data = lab.dir().join("data");
    let id = v["run"]["id"].as_i64().expect("id").to_string();
    let (code, out, err) = lab.run(
        &board,
        "runs-show",
        bin(),
        &[
            "runs",
            "--data",
            data.to_str().unwrap_or(""),
            "show",
            &id,
            "--json",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(json(&out, "runs show --json")["loss_ledger"], *l);
    let export = http.get_json("/api/export");
    let run = export["runs"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["id"] == v["run"]["id"]))
        .unwrap_or_else(|| panic!("run {id} not exported"));
    assert_eq!(run["loss_ledger"], *l);
}

#[test]
fn a_stopped_receiver_is_charged_to_the_board_socket() {
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let (d, mut http) = daemon(&mut lab, &board, 8242, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);
    let before = rcvbuf_errors(&board);
    let cli = lab.spawn(
        &pc1,
        "iperf3-c",
        "iperf3",
        &[
            "-c", BOARD_IP, "-u", "-b", "300M", "-w", "64K", "-t", "4", "-J",
        ],
    );
    // Stop the board's receiver for 0.5 s in the middle of the run.
    std::thread::sleep(Duration::from_millis(1800));
    let pid = nix::unistd::Pid::from_raw(lab.pid(d) as i32);
    // `ip netns exec` execs the daemon: the pid is the daemon's.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
    let code = lab.wait(cli, Duration::from_secs(30));
    let (out, err) = lab.output("iperf3-c");
    assert_eq!(code, Some(0), "{out}{err}");
    let v = served_run(&http);
    let snmp = (rcvbuf_errors(&board) - before) as f64;
    assert!(snmp > 1000.0, "the stall overflowed only {snmp} datagrams");
    let l = &v["loss_ledger"];
    let s = place(&v, "board_socket").unwrap_or_else(|| panic!("no board_socket in {l}"));
    assert_eq!(s["counter"], "Udp RcvbufErrors");
    within_1_percent(num(s, "/packets"), snmp, "board_socket vs /proc/net/snmp");
    assert!(place(&v, "board_qdisc").is_none(), "{l}");
    // The datagrams the socket dropped crossed the port too: they are the run's own.
    assert!(v["board"].get("other_bytes").is_none(), "{}", v["board"]);
    let verdict = v["analysis"]["verdict_text"].as_str().unwrap_or("");
    assert!(
        verdict.contains("the board's socket buffer overflowed")
            && verdict.contains("net.core.rmem_max (now "),
        "{verdict}"
    );
}

#[test]
fn loss_at_the_pc_is_not_charged_to_the_board() {
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    ns_sh(
        &pc1,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "1600",
            "limit", "30kb",
        ],
    );
    let (_d, mut http) = daemon(&mut lab, &board, 8243, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);
    let before = tc_drops(&pc1);
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &["-c", BOARD_IP, "-u", "-b", "150M", "-t", "3", "-J"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = served_run(&http);
    let pc_drops = tc_drops(&pc1) - before;
    assert!(pc_drops > 5000, "the PC's TBF dropped only {pc_drops}");
    let l = &v["loss_ledger"];
    assert!(num(l, "/lost") > 5000.0, "{l}");
    assert_eq!(l["places"], serde_json::json!([]), "{l}");
    assert_eq!(num(l, "/unattributed"), num(l, "/lost"));
    let verdict = v["analysis"]["verdict_text"].as_str().unwrap_or("");
    assert!(
        verdict.contains("not on the board: on the wire or at the peer"),
        "{verdict}"
    );
}

#[test]
fn a_netperfd_peer_names_its_own_egress_drops() {
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    // 100 Mbit/s on the PC's egress; the PC is netperfd's iperf3 server and sends (-R).
    ns_sh(
        &pc1,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "1600",
            "limit", "30kb",
        ],
    );
    lab.spawn(&pc1, "netperfd-s", bin(), &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (_d, mut http) = daemon(&mut lab, &board, 8244, &[]);
    set_up(&lab, &mut http);
    let before = tc_drops(&pc1);
    let r = http.api(
        "POST",
        "/api/runs",
        &serde_json::json!({"host": PC1_IP, "protocol": "udp", "bitrate": "150M",
            "direction": "receive", "duration": "3"}),
    );
    assert!(r.status < 300, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("run id");
    let v = wait_run(&http, id, Duration::from_secs(30));
    assert_eq!(v["run"]["status"], "completed", "{v}");
    let pc_drops = (tc_drops(&pc1) - before) as f64;
    assert!(pc_drops > 5000.0, "the PC's TBF dropped only {pc_drops}");
    let l = &v["loss_ledger"];
    eprintln!("tc drops on the PC {pc_drops}, ledger {l}");
    let q = place(&v, "peer_qdisc").unwrap_or_else(|| panic!("no peer_qdisc in {l}"));
    assert_eq!(q["port"], "eth0");
    assert_eq!(q["counter"], "qdisc tbf drops on eth0");
    within_tail(num(q, "/packets"), pc_drops, "peer_qdisc vs the PC's tc -s");
    // Nothing charged to the board.
    let board_places: Vec<&Value> = l["places"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|p| p["place"].as_str().is_some_and(|s| s.starts_with("board_")))
                .collect()
        })
        .unwrap_or_default();
    assert!(board_places.is_empty(), "{l}");
    let lost = num(l, "/lost");
    assert!(
        num(q, "/packets").min(lost) >= 0.99 * lost,
        "peer_qdisc {} of {lost} lost",
        q["packets"]
    );
    let verdict = v["analysis"]["verdict_text"].as_str().unwrap_or("");
    assert!(
        verdict.contains("dropped by the peer's own egress queue (tbf on its eth0)"),
        "{verdict}"
    );
    let board_text = v["analysis"]["board"].to_string();
    assert!(
        board_text.contains("not on the board: none of the board's drop counters moved"),
        "{board_text}"
    );
}

/// The other way round: the board serves and the PC runs `netperfd -c` (it sends, through a
/// 100 Mbit/s TBF on its own egress): the PC's client sends its drop counters with its
/// results, and the board's ledger of the served run names them as `peer_qdisc`.
#[test]
fn a_netperfd_client_names_its_own_egress_drops_to_the_serving_board() {
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    ns_sh(
        &pc1,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "1600",
            "limit", "30kb",
        ],
    );
    let (_d, mut http) = daemon(&mut lab, &board, 8245, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);
    let before = tc_drops(&pc1);
    let (code, out, err) = lab.run(
        &pc1,
        "netperfd-c",
        bin(),
        &["-c", BOARD_IP, "-u", "-b", "150M", "-t", "3"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = served_run(&http);
    let pc_drops = (tc_drops(&pc1) - before) as f64;
    assert!(pc_drops > 5000.0, "the PC's TBF dropped only {pc_drops}");
    let l = &v["loss_ledger"];
    eprintln!("tc drops on the PC {pc_drops}, ledger {l}");
    let q = place(&v, "peer_qdisc").unwrap_or_else(|| panic!("no peer_qdisc in {l}"));
    assert_eq!(q["port"], "eth0");
    assert_eq!(q["counter"], "qdisc tbf drops on eth0");
    within_tail(num(q, "/packets"), pc_drops, "peer_qdisc vs the PC's tc -s");
    let lost = num(l, "/lost");
    assert!(
        num(q, "/packets").min(lost) >= 0.99 * lost,
        "peer_qdisc {} of {lost} lost",
        q["packets"]
    );
    assert!(
        !l["places"].to_string().contains("board_"),
        "nothing is the board's: {l}"
    );
}

/// The run page draws the board's drops per second under the other charts (a phone and a
/// desk), and only the charts the board has: no clock or temperature chart in this lab.
#[test]
fn the_run_page_draws_the_board_s_drops_per_second() {
    use common::browser::{chromedriver, Browser};
    const WD_PORT: u16 = 9541;
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    ns_sh(
        &board,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "1600",
            "limit", "30kb",
        ],
    );
    let (_d, mut http) = daemon(&mut lab, &board, 8246, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &["-c", BOARD_IP, "-u", "-b", "150M", "-R", "-t", "3"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = served_run(&http);
    let id = v["run"]["id"].as_i64().expect("id");
    chromedriver(&mut lab, &board, WD_PORT);
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|p| p.join("ui-screens"))
        .expect("target dir");
    let _ = std::fs::create_dir_all(&shots);
    for (w, h) in [(1400u32, 1000u32), (390, 844)] {
        let b = Browser::open(
            &board,
            WD_PORT,
            "http://127.0.0.1:8246",
            w,
            h,
            &lab.dir().join(format!("b{w}")),
        );
        b.log_in("correct horse");
        b.go(&format!("/runs/{id}"));
        let t = Instant::now();
        let drawn = loop {
            let d = b.js("const el = document.querySelector('#chart-drops');
                 return el && el.querySelector('.uplot') ? {series: el.getAttribute('data-series'),
                   title: el.querySelector('.u-title').textContent,
                   w: Math.round(el.getBoundingClientRect().width), iw: window.innerWidth,
                   sw: document.documentElement.scrollWidth,
                   clock: !!document.querySelector('#chart-clock'),
                   temp: !!document.querySelector('#chart-temperature')} : null;");
            if !d.is_null() {
                break d;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "no drops chart at {w} px"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(drawn["series"], "1", "{drawn}");
        assert_eq!(drawn["title"], "Drops on the board", "{drawn}");
        assert_eq!(drawn["clock"], false, "{drawn}");
        assert_eq!(drawn["temp"], false, "{drawn}");
        assert!(
            drawn["sw"].as_i64() <= drawn["iw"].as_i64()
                && drawn["w"].as_i64() <= drawn["iw"].as_i64(),
            "the page scrolls sideways at {w} px: {drawn}"
        );
        b.js("document.querySelector('#chart-drops').scrollIntoView(); return 0;");
        b.screenshot(&shots, &format!("run-board-drops-{w}"));
    }
}

/// A second flow really running beside the run (stock iperf3 from the board's namespace to
/// the PC, not the daemon's): the run's board counters say other traffic ran at the same
/// time, about as much as that flow moved during the run, and the page says so.
#[test]
fn a_second_flow_beside_the_run_is_said_as_other_traffic() {
    let _one = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let (_d, mut http) = daemon(&mut lab, &board, 8247, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);
    // The other flow: 40 Mbit/s of UDP for 6 s, board namespace → pc1, around the run.
    lab.spawn(&pc1, "other-s", "iperf3", &["-s", "-p", "5302", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5302);
    let other = lab.spawn(
        &board,
        "other-c",
        "iperf3",
        &["-c", PC1_IP, "-p", "5302", "-u", "-b", "40M", "-t", "6"],
    );
    // The other flow runs a second before the run starts (a duration: it is around the run).
    std::thread::sleep(Duration::from_millis(1000));
    // The run: 20 Mbit/s of UDP for 3 s, pc1 → the daemon.
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &["-c", BOARD_IP, "-u", "-b", "20M", "-t", "3"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = served_run(&http);
    assert_eq!(lab.wait(other, Duration::from_secs(15)), Some(0));
    let b = &v["board"];
    let extra = b["other_bytes"]
        .as_f64()
        .unwrap_or_else(|| panic!("no other traffic said: {b}"));
    // The run's board window (about 3 s plus the ends) held 40 Mbit/s = 5 MB/s of the other
    // flow: 10–25 MB beyond the run's own 7.5 MB (20 Mbit/s for 3 s; measured 15.3 MB).
    assert!((10e6..25e6).contains(&extra), "other bytes {extra}: {b}");
    let own = num(b, "/run_bytes");
    assert!((6.5e6..9e6).contains(&own), "run bytes {own}");
    let page = http.get(&format!("/runs/{}", v["run"]["id"])).body;
    assert!(
        page.contains("Other traffic at the same time: the board&#39;s ports moved")
            && page.contains("beyond the run&#39;s own "),
        "no sentence on the page: {}",
        &page[page.find("<main").unwrap_or(0)..]
    );
}
