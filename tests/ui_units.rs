//! One unit style on every page (issue 12): the daemon in the board namespace with runs of
//! every kind that has a page (iperf3 TCP and UDP, multi-port, monitor, HTTP payload of 100M,
//! HTTP download, TCP sink, latency under load, two suites, compare of runs and of suites), then
//! every page that `src/web/` serves as HTML is opened in headless Chromium and its visible
//! text (after the pages' scripts have filled in live rates and charts) is checked: bitrates
//! only as "N Mbit/s" (never iperf3's "Mbits/sec" nor another scale such as "Gbit/s"), sizes
//! only as "N MB" (never "MBytes"/"KBytes" nor "KB"/"GB"), as `model::display` writes them
//! (docs/units.md §5); the only other size style allowed is the MiB in which the history
//! limits are typed (Settings, History transfer), never on a page that also shows MB. The 100M payload's run page must say 100.0 MB; the compare page of two
//! suites run with other durations and steps must say so (the notes of
//! `results::suite_notes`).

mod common;
use common::browser::{chromedriver, Browser};
use common::http::*;
use common::pages::{api_run, newest, page_routes};
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

const WEB_PORT: u16 = 8097;
const WD_PORT: u16 = 9524;

/// Run suite definition `def` against pc1 and wait for its end; the suite id.
fn run_suite(http: &Http, def: &str, label: &str) -> i64 {
    let r = http.api(
        "POST",
        &format!("/api/suite-defs/{def}/run"),
        &json!({"host": PC1_IP, "label": label}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let suite = r.json()["id"].as_i64().expect("suite id");
    let t = Instant::now();
    while http.get_json(&format!("/api/suites/{suite}"))["status"] == "running" {
        assert!(t.elapsed() < Duration::from_secs(60), "suite still running");
        std::thread::sleep(Duration::from_millis(250));
    }
    suite
}

/// Every number-with-unit of the page's visible text, by style (distinct matches).
const UNITS: &str = "
const t = document.body.innerText;
const f = re => Array.from(new Set(t.match(re) || []));
// A figure starts a word: 558B inside a random name (a temp dir in a log
// line on /diag) is not a size.
return {
  stock_rates: f(/(?<![\\w.])\\d[\\d.]*\\s?[KMGT]?bits\\/sec/g),
  rates: f(/(?<![\\w.])\\d[\\d.]*\\s?[KMGT]?bit\\/s/g),
  stock_sizes: f(/(?<![\\w.])\\d[\\d.]*\\s?[KMGT]?Bytes\\b/g),
  sizes: f(/(?<![\\w.])\\d[\\d.]*\\s?[KMGT]?i?B\\b/g),
  chars: t.length };";

#[test]
fn every_page_writes_rates_in_mbit_per_second_and_sizes_in_mb() {
    let mut lab = Lab::with_pc2();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let pc2 = lab.pc2.clone().expect("pc2");
    lab.spawn(&pc1, "iperf3-pc1", "iperf3", &["-s"]);
    lab.spawn(&pc2, "iperf3-pc2", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    lab.wait_port(&pc2, PC2_IP, 5201);
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &[]);
    for p in [8088, 5009] {
        lab.wait_port(&board, BOARD_IP, p);
    }
    set_up(&lab, &mut http);

    // Data for the pages.
    let tcp = api_run(
        &http,
        "/api/runs",
        json!({"host": PC1_IP, "duration": 2, "bind": "eth0"}),
    );
    let udp = api_run(
        &http,
        "/api/runs",
        json!({"host": PC1_IP, "duration": 1, "protocol": "udp", "bitrate": "20M"}),
    );
    let multi = api_run(
        &http,
        "/api/runs/multi",
        json!({"legs": [{"host": PC1_IP, "bind": "eth0", "duration": 1},
                        {"host": PC2_IP, "bind": "eth1", "duration": 1}]}),
    );
    let mon = api_run(
        &http,
        "/api/monitor",
        json!({"ports": ["eth0", "eth1"], "duration": "1", "label": "units check"}),
    );
    // A 100M payload: 100 000 000 bytes (decimal, as downloads are quoted).
    let (code, _, err) = lab.run(
        &pc1,
        "curl",
        "curl",
        &[
            "-sS",
            "-o",
            "/dev/null",
            &format!("http://{BOARD_IP}:8088/payload/100M"),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    let serve = newest(&http, "http-serve");
    let v = http.get_json(&format!("/api/runs/{serve}"));
    assert_eq!(v["run"]["bytes"], 100_000_000, "{v}");
    // The board downloads from its own payload server (its address in its namespace).
    let get = api_run(
        &http,
        "/api/http-get",
        json!({"url": format!("http://{BOARD_IP}:8088/payload/10M")}),
    );
    let (code, _, err) = lab.run(
        &pc1,
        "nc-sink",
        "sh",
        &[
            "-c",
            &format!("head -c 5000000 /dev/zero | nc -N {BOARD_IP} 5009"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let sink = newest(&http, "tcp-sink");
    let lat = api_run(
        &http,
        "/api/runs/latency",
        json!({"host": PC1_IP, "load": "down", "idle": "1", "loaded": "2", "streams": 1}),
    );
    // Two suites not run alike: 1 s × 2 steps, then 2 s × 1 step.
    for def in [
        json!({"name": "quick", "time": 1, "steps": [
            {"kind": "tcp", "direction": "send"}, {"kind": "udp", "direction": "send", "bitrate": "10M"}]}),
        json!({"name": "longer", "time": 2, "steps": [{"kind": "tcp", "direction": "send"}]}),
    ] {
        let r = http.api("POST", "/api/suite-defs", &def);
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let def = http.get_json("/api/suite-defs/quick")["id"]
        .as_i64()
        .expect("def id");
    let s1 = run_suite(&http, "quick", "board A");
    let s2 = run_suite(&http, "longer", "board B");

    let mut pages: Vec<(String, String)> = Vec::new();
    let mut problems = Vec::new();
    for route in page_routes() {
        match route.as_str() {
            "/setup" | "/login" => {}
            "/runs/{id}" => {
                for (n, id) in [
                    ("tcp", tcp),
                    ("udp", udp),
                    ("multi", multi),
                    ("monitor", mon),
                    ("http-serve", serve),
                    ("http-get", get),
                    ("tcp-sink", sink),
                    ("latency", lat),
                ] {
                    pages.push((format!("run-{n}"), format!("/runs/{id}")));
                }
            }
            "/suites/defs/{id}" => pages.push(("suite-def".into(), format!("/suites/defs/{def}"))),
            "/suites/{id}" => pages.push(("suite".into(), format!("/suites/{s1}"))),
            "/compare" => {
                pages.push((
                    "compare-runs".into(),
                    format!("/compare?runs={tcp},{udp},{multi}"),
                ));
                pages.push((
                    "compare-suites".into(),
                    format!("/compare?suites={s1},{s2}"),
                ));
            }
            p if !p.contains('{') => {
                let r = http.get(p);
                if r.body.trim_start().starts_with("<!doctype html") {
                    pages.push((p.to_string(), p.to_string()));
                }
            }
            other => problems.push(format!("page route {other} has no example here: add one")),
        }
    }

    chromedriver(&mut lab, &board, WD_PORT);
    let b = Browser::open(
        &board,
        WD_PORT,
        &format!("http://127.0.0.1:{WEB_PORT}"),
        1400,
        1000,
        &lab.dir().join("profile"),
    );
    b.log_in("correct horse");
    let mut with_rates = Vec::new();
    for (name, path) in &pages {
        b.go(path);
        // Let the scripts fill in live rates (the Ports page polls at 1 Hz) and chart legends.
        std::thread::sleep(Duration::from_millis(1500));
        let u = b.js(UNITS);
        eprintln!("{path:<28} {u}");
        let list = |k: &str| -> Vec<String> {
            u[k].as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        for (k, what) in [
            ("stock_rates", "iperf3-style rates"),
            ("stock_sizes", "iperf3-style sizes"),
        ] {
            if !list(k).is_empty() {
                problems.push(format!("{name} ({path}): {what} {:?}", list(k)));
            }
        }
        let rates = list("rates");
        if rates.iter().any(|r| !r.ends_with(" Mbit/s")) {
            problems.push(format!("{name} ({path}): rates in another scale {rates:?}"));
        }
        // Sizes: figures in MB; the retention and import limits are typed in MiB (their
        // settings' unit) on pages that show no figure. Never both on one page.
        let sizes = list("sizes");
        let mut styles: Vec<&str> = sizes
            .iter()
            .filter_map(|s| s.split_whitespace().last())
            .collect();
        netperfd::model::order::sort(&mut styles);
        styles.dedup();
        if styles.len() > 1 || styles.iter().any(|u| *u != "MB" && *u != "MiB") {
            problems.push(format!(
                "{name} ({path}): sizes in more than one style {sizes:?}"
            ));
        }
        if !rates.is_empty() {
            with_rates.push(name.clone());
        }
    }
    // The check saw figures: every run page with a bitrate, the history, the comparisons.
    for want in [
        "run-tcp",
        "run-udp",
        "run-multi",
        "run-http-serve",
        "run-http-get",
        "run-tcp-sink",
        "run-latency",
        "suite",
        "compare-runs",
        "compare-suites",
        "/ports",
    ] {
        assert!(
            with_rates.iter().any(|n| n == want),
            "{want}: no rate seen (pages with rates: {with_rates:?})"
        );
    }

    // The 100M payload reads 100 MB, on the card and in the facts.
    b.go(&format!("/runs/{serve}"));
    assert_eq!(b.wait_text("sum-bytes", "100"), "100.0 MB");
    let facts = b.js("return document.body.innerText;");
    assert!(
        facts
            .as_str()
            .unwrap_or_default()
            .contains("100.0 MB (100000000 bytes)"),
        "{facts}"
    );
    // The stock-format summary is one click away, in iperf3's own units.
    let txt = http.get(&format!("/runs/{tcp}/summary.txt"));
    assert_eq!(txt.status, 200);
    assert!(
        txt.body.contains("bits/sec") && txt.body.contains("Bytes  "),
        "{}",
        txt.body
    );

    // Compare of two suites run with other durations and steps says so.
    b.go(&format!("/compare?suites={s1},{s2}"));
    let notes = b.js(
        "return Array.from(document.querySelectorAll('.compare-note')).map(n => n.textContent);",
    );
    assert_eq!(
        notes,
        json!([
            format!("Numbers of steps differ: suite {s1} 2 steps, suite {s2} 1 step."),
            format!("Step kinds differ: suite {s1} TCP send, UDP send; suite {s2} TCP send."),
            format!("Step durations differ: suite {s1} 1 s, suite {s2} 2 s."),
        ]),
        "compare notes"
    );
    // Alike suites: no note.
    b.go(&format!("/compare?suites={s1},{s1}"));
    let none = b.js("return document.querySelectorAll('.compare-note').length;");
    assert_eq!(none, json!(0));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
