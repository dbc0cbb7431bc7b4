//! The board's own shaper, against the kernel's truth (issue 38 items 2 and 3): a TBF of
//! 100 Mbit/s on the board's egress port, and
//! * a TCP run the board sends (netperfd's iperf3 server, `-R` from stock iperf3 on pc1) and
//!   a UDP one at 150 Mbit/s: the verdict names "tbf", "100 Mbit/s" and "eth0";
//! * a forwarding run whose sender is stock `iperf3 -s` on pc2 (`direction: receive`: pc2 →
//!   board → pc1, leaving by the shaped eth0): the same;
//! * the Ports page and `/api/ports` show the qdisc with the drops `tc -s qdisc` gives (read
//!   by the test itself, the kernel's counter in its unit: skbs), counted in the port's tx
//!   dropped column; in headless Chromium at 390 and 1400 px nothing is wider than the window
//!   (screenshots `target/ui-screens/shaper-<width>-ports.png`);
//! * a clean run (no shaper) names none.
//!
//! Traffic per case at most 3 s.

mod common;

use common::browser::{chromedriver, Browser};
use common::http::{daemon, set_up, wait_run, Http};
use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

fn sh(ns: &str, args: &[&str]) -> String {
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
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The root qdisc's "dropped N" of `tc -s qdisc show dev DEV` in `ns`.
fn tc_drops(ns: &str, dev: &str) -> u64 {
    let t = sh(ns, &["tc", "-s", "qdisc", "show", "dev", dev]);
    let i = t
        .find("dropped ")
        .unwrap_or_else(|| panic!("no drops in {t}"))
        + 8;
    let n: String = t[i..].chars().take_while(char::is_ascii_digit).collect();
    n.parse().unwrap_or_else(|_| panic!("drops in {t}"))
}

fn tbf_100mbit(ns: &str) {
    sh(
        ns,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "32kb",
            "limit", "64kb",
        ],
    );
}

/// The newest served run with an id above `after`, once it has ended.
fn served_after(http: &Http, after: i64) -> Value {
    let t = Instant::now();
    let id = loop {
        let l = http.get_json("/api/runs");
        let id = l.as_array().and_then(|a| {
            a.iter()
                .filter(|r| r["role"] == "server")
                .filter_map(|r| r["id"].as_i64())
                .filter(|i| *i > after)
                .max()
        });
        if let Some(id) = id {
            break id;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no served run: {l}");
        std::thread::sleep(Duration::from_millis(100));
    };
    wait_run(http, id, Duration::from_secs(20))
}

/// Stock iperf3 on pc1 against the board's daemon; the served run as the API gives it.
fn iperf3_to_board(lab: &mut Lab, http: &Http, after: i64, args: &[&str]) -> Value {
    let pc1 = lab.pc1.clone();
    let mut all = vec!["-c", BOARD_IP, "-J"];
    all.extend_from_slice(args);
    let (code, out, err) = lab.run(&pc1, "iperf3-c", "iperf3", &all, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}{err}");
    served_after(http, after)
}

fn verdict(v: &Value) -> String {
    v["analysis"]["verdict_text"]
        .as_str()
        .unwrap_or_else(|| panic!("no verdict: {v}"))
        .to_string()
}

fn names_the_tbf(v: &Value, what: &str) {
    let t = verdict(v);
    assert!(
        t.starts_with("limited by the board's own shaper: tbf 100 Mbit/s on eth0"),
        "{what}: {t}\n{}",
        v["analysis"]
    );
    assert_eq!(v["analysis"]["verdict"], "shaper-bound", "{what}");
}

fn port<'a>(ports: &'a Value, name: &str) -> &'a Value {
    ports
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {ports}"))
}

#[test]
fn runs_the_board_sends_into_its_own_tbf_name_it_and_the_ports_page_shows_its_drops() {
    let _one = serial();
    let mut lab = Lab::new();
    let board = lab.board.clone();
    tbf_100mbit(&board);
    let (_d, mut http) = daemon(&mut lab, &board, 8251, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);

    // TCP, the board (netperfd) sending.
    let tcp = iperf3_to_board(&mut lab, &http, 0, &["-R", "-t", "3"]);
    let id = tcp["run"]["id"].as_i64().expect("id");
    let got = num(&tcp, "/run/receiver_bps");
    eprintln!("TCP {got} bit/s: {}", verdict(&tcp));
    // What the TBF passes: 100 Mbit/s × 1448 / 1514 = 95.64 Mbit/s.
    assert!((89e6..98.6e6).contains(&got), "{got}");
    names_the_tbf(&tcp, "TCP from the board");
    let ev = tcp["analysis"]["evidence"][0].as_str().unwrap_or_default();
    assert!(ev.contains("95.6 Mbit/s of this run's payload"), "{ev}");

    // UDP at 150 Mbit/s: sent in full, the TBF drops a third.
    let udp = iperf3_to_board(&mut lab, &http, id, &["-u", "-b", "150M", "-R", "-t", "2"]);
    eprintln!("UDP: {}", verdict(&udp));
    names_the_tbf(&udp, "UDP from the board");

    // The Ports API: the qdisc with the kernel's own drop count (skbs), read independently,
    // once nothing is left in the TBF's queue (its counters are final).
    wait_until(Duration::from_secs(10), "the TBF's queue to drain", || {
        sh(&board, &["tc", "-s", "qdisc", "show", "dev", "eth0"]).contains("backlog 0b 0p")
    });
    let tc = tc_drops(&board, "eth0");
    assert!(tc > 100, "the TBF dropped only {tc}");
    let ports = http.get_json("/api/ports");
    let e = port(&ports, "eth0");
    assert_eq!(num(e, "/qdisc_drops") as u64, tc, "{e}");
    let q = &e["qdiscs"][0];
    assert_eq!(q["kind"], "tbf", "{e}");
    assert_eq!(num(q, "/rate_bps"), 100e6, "{e}");
    assert_eq!(num(q, "/drops") as u64, tc, "{e}");
    assert!(num(q, "/overlimits") > 0.0, "{e}");
    let tx_dropped = num(e, "/counters/tx_dropped") as u64;
    // The page: the qdisc, its drops, and the tx dropped column counting them.
    let page = http.get("/ports").body;
    let drops_text = group(tc);
    assert!(
        page.contains(&format!("drops {drops_text} ·")),
        "no qdisc drops {drops_text} on the page"
    );
    assert!(page.contains("<strong>tbf 100 Mbit/s</strong>"), "{page}");
    assert!(
        page.contains(&format!(" / {}</td>", group(tc + tx_dropped))),
        "tx dropped column without the qdisc's {tc}"
    );
    assert!(page.contains("rx / tx incl. qdisc"));

    // As a user sees it, phone and desk.
    const WD: u16 = 9531;
    chromedriver(&mut lab, &board, WD);
    let shots = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-screens");
    std::fs::create_dir_all(&shots).expect("screens dir");
    for (w, h) in [(390u32, 844u32), (1400, 1000)] {
        let b = Browser::open(
            &board,
            WD,
            "http://127.0.0.1:8251",
            w,
            h,
            &lab.dir().join(format!("p{w}")),
        );
        b.log_in("correct horse");
        b.go("/ports");
        // Past the page's first live refresh (1 Hz, /api/ports).
        std::thread::sleep(Duration::from_millis(1500));
        let m = b.js(
            "const q = document.querySelector('tr[data-port=eth0] [data-field=qdisc]');
             const d = document.querySelector('tr[data-port=eth0] [data-field=dropped]');
             const r = q.getBoundingClientRect();
             return {sw: document.documentElement.scrollWidth, iw: window.innerWidth,
                     q: q.innerText, d: d.textContent, qr: Math.round(r.right),
                     font: parseFloat(getComputedStyle(q.querySelector('.hint')).fontSize)};",
        );
        let f = b.screenshot(&shots, &format!("shaper-{w}-ports"));
        eprintln!("{w} px: {m} ({})", f.display());
        assert!(
            m["sw"].as_i64().unwrap_or(i64::MAX) <= m["iw"].as_i64().unwrap_or(0),
            "{w} px: the page scrolls sideways: {m}"
        );
        let qt = m["q"].as_str().unwrap_or_default();
        assert!(
            qt.contains("tbf 100 Mbit/s") && qt.contains(&format!("drops {drops_text}")),
            "{m}"
        );
        assert_eq!(
            m["d"].as_str().unwrap_or_default(),
            format!("0 / {}", group(tc + tx_dropped)),
            "{m}"
        );
        assert!(m["font"].as_f64().unwrap_or(0.0) >= 12.0, "{w} px: {m}");
        if w >= 1000 {
            // On a desk the whole table is on screen, the Queue column too.
            assert!(
                m["qr"].as_i64().unwrap_or(i64::MAX) <= m["iw"].as_i64().unwrap_or(0),
                "{w} px: the Queue column is cut off: {m}"
            );
        }
    }
}

#[test]
fn a_forwarded_run_stock_iperf3_sending_through_the_board_s_tbf_names_it() {
    let _one = serial();
    const TOKEN: &str = "lab-token-0123456789";
    let (mut lab, _tf) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    // pc2 → board → pc1 leaves the board by eth0: the TBF is on the run's egress port.
    tbf_100mbit(&board);
    let (_d, mut http) = daemon(&mut lab, &board, 8252, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    let r = http.api(
        "POST",
        "/api/forward",
        &json!({"peer": "http://192.0.2.2:5280", "token": TOKEN, "target": PC2_IP,
                "ingress": "eth0", "egress": "eth1", "nat": true, "direction": "receive",
                "duration": 3}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = json(&r.body, "POST /api/forward")["id"]
        .as_i64()
        .expect("id");
    let v = wait_run(&http, id, Duration::from_secs(60));
    assert_eq!(v["run"]["status"], "completed", "{v}");
    let got = num(&v, "/run/receiver_bps");
    eprintln!("forwarded {got} bit/s: {}", verdict(&v));
    assert!((85e6..98.6e6).contains(&got), "{got}");
    names_the_tbf(&v, "forwarded, stock iperf3 sending");
}

#[test]
fn a_clean_run_names_no_shaper() {
    let _one = serial();
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let (_d, mut http) = daemon(&mut lab, &board, 8253, &[]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 5201);
    let v = iperf3_to_board(&mut lab, &http, 0, &["-R", "-t", "2"]);
    let t = verdict(&v);
    eprintln!("clean: {t}");
    assert!(!t.contains("shaper"), "{t}");
    assert_ne!(v["analysis"]["verdict"], "shaper-bound");
    assert!(v["board"].get("shapers").is_none(), "{}", v["board"]);
    let ports = http.get_json("/api/ports");
    let e = port(&ports, "eth0");
    assert_eq!(num(e, "/qdisc_drops"), 0.0, "{e}");
    assert!(e["qdiscs"]
        .as_array()
        .is_some_and(|a| a.iter().all(|q| q["rate_bps"].is_null())));
}

/// 12345 → "12,345", as the pages write counts.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn htb_class_rates_are_read_from_the_kernel() {
    let _one = serial();
    let mut lab = Lab::new();
    let board = lab.board.clone();
    sh(
        &board,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10",
        ],
    );
    sh(
        &board,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate",
            "10mbit", "ceil", "50mbit",
        ],
    );
    let (_d, mut http) = daemon(&mut lab, &board, 8254, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    let ports = http.get_json("/api/ports");
    let e = port(&ports, "eth0");
    let class = e["qdiscs"]
        .as_array()
        .and_then(|a| a.iter().find(|q| q["handle"] == "1:10"))
        .unwrap_or_else(|| panic!("no class 1:10 in {e}"));
    assert_eq!(class["class"], true, "{e}");
    assert_eq!(num(class, "/rate_bps"), 10e6, "{e}");
    assert_eq!(num(class, "/ceil_bps"), 50e6, "{e}");
    assert!(
        e["qdisc_view"]
            .to_string()
            .contains("htb class 1:10 10 Mbit/s (ceil 50 Mbit/s)"),
        "{e}"
    );
}
