//! Issue 22 items 3–7 and the web-page parts of item 11, as a field engineer sees them in
//! headless Chromium at a desk (1400 × 1000), on a phone (390 × 844) and across a resize:
//!
//! * 3 — History, Recent runs, the suite's Verdict column, Forwarding runs and the suite editor
//!   show their headline columns at 1400 px without sideways scrolling (their scroll box does
//!   not scroll); at 390 px the page never scrolls sideways and wide tables scroll in their box;
//! * 4 — charts follow the window: 1400 → 900 → 1400 px redraws them at the box's width;
//! * 5 — a paced UDP run that was sent in full but lost on the way (a 40 Mbit/s TBF at the
//!   sending PC) shows one story: the target/sent/received card and the verdict share a tone
//!   and neither says "reached";
//! * 6 — the latency page defaults to an RRUL-like load (both directions, 4 streams) and the
//!   latency run page leads with the latency verdict, names the load's congestion control and
//!   says when the load may not have filled the queue;
//! * 7 — a suite saved with board port eth0 is not shown as broken on the Suites page;
//! * 11 — no text on a phone breaks inside a word; the run pages of a failed and a monitor run
//!   run app.js without a JavaScript error; a threshold given as "900M" is accepted; a live
//!   multi-port run's leg cells fill in during the run; figures of 1,000 and more have their
//!   thousands grouped (server and units.js).
//!
//! Screenshots: `target/ui-screens/field-<width>-<page>.png`.

mod common;
use common::browser::{chromedriver, Browser};
use common::http::*;
use common::pages::api_run;
use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const WEB_PORT: u16 = 8107;
const WD_PORT: u16 = 9537;

/// A table's layout: the document's and window's width, the table's scroll box (its
/// scrollWidth and clientWidth) and the right edge of the named column headers.
fn table_layout(b: &Browser, table: &str, heads: &[&str]) -> Value {
    let heads = serde_json::to_string(heads).unwrap_or_default();
    b.js(&format!(
        "const t = document.querySelector({table:?});
         if (!t) return null;
         const box = t.closest('.scroll') || t.parentElement;
         const ths = Array.from(t.querySelectorAll('thead th'));
         const cols = {{}};
         {heads}.forEach(h => {{
           const th = ths.find(x => x.textContent.trim() === h);
           cols[h] = th ? Math.round(th.getBoundingClientRect().right) : null;
         }});
         return {{sw: document.documentElement.scrollWidth, iw: window.innerWidth,
                  box_sw: box.scrollWidth, box_cw: box.clientWidth,
                  box_right: Math.round(box.getBoundingClientRect().right), cols: cols}};"
    ))
}

/// Words split across two lines in headline text (cards, verdicts, titles, badges): each
/// word's text range must lie on one line.
const BROKEN_WORDS: &str = "
const out = [];
document.querySelectorAll('main .big, main .verdict, main h1, main h2, main .badge, main th, main .label')
  .forEach(el => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    let n;
    while ((n = walker.nextNode())) {
      const re = /\\S+/g; let m;
      while ((m = re.exec(n.textContent))) {
        const r = document.createRange();
        r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const tops = new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
  });
return out;";

/// Figures of 1000 and more written without a thousands separator ("9154.8 Mbit/s").
const UNGROUPED: &str =
    "return Array.from(new Set(document.body.innerText.match(/\\b\\d{4,}\\.\\d+ (Mbit\\/s|MB)/g) || []));";

/// Run app.js again on the open page (a second `<script src>`, as the page's CSP allows) and
/// report the errors it raised ("ok" when none).
fn app_js_error(b: &Browser) -> String {
    let v = b.cmd(
        "POST",
        "/execute/async",
        json!({"script": "const done = arguments[arguments.length - 1];
            const errs = [];
            window.addEventListener('error', e => errs.push(e.message));
            const sc = document.createElement('script');
            sc.src = '/static/app.js?again';
            sc.onload = () => setTimeout(() => done(errs.length ? errs.join('; ') : 'ok'), 50);
            sc.onerror = () => done('app.js did not load');
            document.body.appendChild(sc);", "args": []}),
    );
    v.as_str().unwrap_or_default().to_string()
}

fn shot(b: &Browser, dir: &Path, w: u32, name: &str) {
    b.screenshot(dir, &format!("field-{w}-{name}"));
}

/// Wait until a run has ended (any status); its `GET /api/runs/N`.
fn ended(http: &Http, id: i64) -> Value {
    let t = Instant::now();
    loop {
        let v = http.get_json(&format!("/api/runs/{id}"));
        if v["run"]["status"] != "running" {
            return v;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "run {id}: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The chart widths on the open run page: each uPlot's width, its box's, the document's and
/// the window's.
fn chart_widths(b: &Browser) -> Value {
    b.js("const out = {iw: window.innerWidth, sw: document.documentElement.scrollWidth, charts: []};
          document.querySelectorAll('#charts .chart').forEach(el => {
            const u = el.querySelector('.uplot');
            if (u) out.charts.push([el.id, Math.round(u.getBoundingClientRect().width), el.clientWidth]);
          });
          return out;")
}

#[test]
fn field_pages_at_a_desk_on_a_phone_and_across_a_resize() {
    let mut lab = Lab::with_pc2();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let pc2 = lab.pc2.clone().expect("pc2");
    lab.spawn(&pc1, "iperf3-pc1", "iperf3", &["-s"]);
    lab.spawn(&pc2, "iperf3-pc2", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    lab.wait_port(&pc2, PC2_IP, 5201);
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &[]);
    chromedriver(&mut lab, &board, WD_PORT);
    set_up(&lab, &mut http);
    let base = format!("http://127.0.0.1:{WEB_PORT}");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|p| p.join("ui-screens"))
        .expect("target dir");
    let _ = std::fs::create_dir_all(&shots);

    // Runs for the pages.
    let tcp = api_run(
        &http,
        "/api/runs",
        json!({"host": PC1_IP, "duration": 3, "bind": "eth0", "parallel": 2}),
    );
    let _tcp2 = api_run(
        &http,
        "/api/runs",
        json!({"host": PC2_IP, "duration": 1, "protocol": "udp", "bitrate": "20M"}),
    );
    // Item 5: PC1 sends UDP at 40M and the board's prerouting drops 12 % of it (after the
    // sender, no back-pressure): sent in full, 12 % lost on the way.
    let nft = |args: &[&str]| {
        let mut a = vec!["netns", "exec", board.as_str(), "nft"];
        a.extend_from_slice(args);
        std::process::Command::new("ip")
            .args(&a)
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(nft(&["add", "table", "ip", "lossy"]));
    assert!(nft(&[
        "add chain ip lossy p { type filter hook prerouting priority 0 ; }"
    ]));
    assert!(nft(&[
        "add rule ip lossy p udp sport 5201 numgen random mod 100 lt 12 drop"
    ]));
    let lossy = api_run(
        &http,
        "/api/runs",
        json!({"host": PC1_IP, "duration": 3, "protocol": "udp", "bitrate": "40M", "direction": "receive"}),
    );
    assert!(nft(&["delete", "table", "ip", "lossy"]));
    // A failed run and a monitor-only run: pages without an Intervals table.
    let r = http.api(
        "POST",
        "/api/runs",
        &json!({"host": PC1_IP, "port": "5999", "duration": 1}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let failed = r.json()["id"].as_i64().expect("id");
    assert_eq!(ended(&http, failed)["run"]["status"], "failed");
    let mon = api_run(
        &http,
        "/api/monitor",
        json!({"ports": ["eth0", "eth1"], "duration": "1", "label": "monitor for the width check"}),
    );
    // Item 6: a latency run with the page's defaults (short phases).
    let r = http.api(
        "POST",
        "/api/runs/latency",
        &json!({"host": PC1_IP, "idle": 1, "loaded": 2}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let lat = r.json()["id"].as_i64().expect("id");
    let lv = ended(&http, lat);
    assert_eq!(lv["run"]["status"], "completed", "{lv}");
    assert_eq!(lv["run"]["params"]["streams"], 4, "RRUL-like default");
    assert_eq!(lv["run"]["params"]["load"], "both", "RRUL-like default");
    // Item 7 and 11: a suite saved with a board port and a threshold as "900M".
    let def = json!({"name": "bound", "description": "saved with a board port", "time": 1,
        "bind": "eth0", "thresholds": {"min_bits_per_second": "900M"},
        "steps": [{"kind": "tcp", "direction": "send"}, {"kind": "udp", "direction": "send", "bitrate": "10M"}]});
    let r = http.api("POST", "/api/suite-defs", &def);
    assert_eq!(r.status, 201, "thresholds \"900M\": {}", r.body);
    let def_id = r.json()["id"].as_i64().expect("def id");
    let r = http.api(
        "POST",
        "/api/suite-defs/bound/run",
        &json!({"host": PC1_IP, "label": "board A"}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let suite = r.json()["id"].as_i64().expect("suite id");
    let t = Instant::now();
    while http.get_json(&format!("/api/suites/{suite}"))["suite"]["status"] == "running" {
        assert!(t.elapsed() < Duration::from_secs(60), "suite still running");
        std::thread::sleep(Duration::from_millis(250));
    }
    // The "900M" threshold was applied as 900 Mbit/s to each row.
    let sv = http.get_json(&format!("/api/suites/{suite}")).to_string();
    assert!(
        sv.contains("\"min_bits_per_second\":900000000.0"),
        "the threshold: {sv}"
    );

    let mut problems: Vec<String> = Vec::new();
    let runs_heads = ["Sender", "Receiver", "Retr / Loss", "Status"];
    let tables: Vec<(&str, String, &str, Vec<&str>)> = vec![
        ("history", "/runs".into(), "table.runs", runs_heads.to_vec()),
        ("index", "/".into(), "table.runs", runs_heads.to_vec()),
        (
            "suite",
            format!("/suites/{suite}"),
            "table.suite-table",
            vec!["Bitrate", "Status", "Verdict"],
        ),
        (
            "forwarding",
            "/forwarding".into(),
            "table.runs",
            vec!["Forwarded", "Status"],
        ),
        (
            "suite-edit",
            format!("/suites/defs/{def_id}"),
            "table.steps",
            vec!["Kind", "Bitrate", "Thresholds"],
        ),
    ];

    for (w, h) in [(1400u32, 1000u32), (390, 844)] {
        let b = Browser::open(
            &board,
            WD_PORT,
            &base,
            w,
            h,
            &lab.dir().join(format!("f{w}")),
        );
        b.log_in("correct horse");

        // Item 11: a live multi-port run's leg cells fill in during the run.
        if w >= 1000 {
            let r = http.api(
                "POST",
                "/api/runs/multi",
                &json!({"legs": [{"host": PC1_IP, "bind": "eth0", "duration": 6},
                                 {"host": PC2_IP, "bind": "eth1", "duration": 6}]}),
            );
            assert_eq!(r.status, 201, "{}", r.body);
            let multi = r.json()["id"].as_i64().expect("id");
            b.go(&format!("/runs/{multi}"));
            let t = Instant::now();
            let cells = loop {
                let v = b.js(
                    "return {status: document.getElementById('status').textContent,
                             cells: Array.from(document.querySelectorAll('tr[data-leg] .leg-sender')).map(c => c.textContent),
                             now: (document.getElementById('now-rate') || {}).textContent || ''};",
                );
                let filled = v["cells"].as_array().is_some_and(|c| {
                    c.len() == 2
                        && c.iter()
                            .all(|x| x.as_str().unwrap_or("").ends_with("Mbit/s"))
                });
                if filled || t.elapsed() > Duration::from_secs(5) {
                    break v;
                }
                std::thread::sleep(Duration::from_millis(250));
            };
            shot(&b, &shots, w, "run-multi-live");
            // Thousands grouped by units.js as by the server ("3,365.5 Mbit/s").
            let ungrouped = b.js(UNGROUPED);
            assert_eq!(ungrouped, json!([]), "live figures without separators");
            eprintln!("live multi-port run {multi}: {cells}");
            assert_eq!(
                cells["status"], "running",
                "filled only at the end: {cells}"
            );
            assert!(
                cells["cells"].as_array().is_some_and(|c| c.len() == 2
                    && c.iter()
                        .all(|x| x.as_str().unwrap_or("").ends_with("Mbit/s"))),
                "leg cells during the run: {cells}"
            );
            assert!(
                cells["now"].as_str().is_some_and(|n| n.ends_with("Mbit/s")),
                "{cells}"
            );
            ended(&http, multi);
        }

        // Item 3: the tables.
        for (name, path, table, heads) in &tables {
            b.go(path);
            let m = table_layout(&b, table, heads);
            shot(&b, &shots, w, name);
            eprintln!("{w:>4} px {path:<22} {m}");
            if m.is_null() {
                problems.push(format!("{w} px {path}: no {table}"));
                continue;
            }
            let ungrouped = b.js(UNGROUPED);
            if ungrouped != json!([]) {
                problems.push(format!("{w} px {path}: thousands not grouped {ungrouped}"));
            }
            let n = |k: &str| m[k].as_i64().unwrap_or(i64::MAX);
            if n("sw") > n("iw") {
                problems.push(format!("{w} px {path}: the page scrolls sideways: {m}"));
            }
            if w >= 1000 {
                if n("box_sw") > n("box_cw") + 1 {
                    problems.push(format!(
                        "{w} px {path}: {table} scrolls inside its box ({} of {} px shown): {m}",
                        n("box_cw"),
                        n("box_sw")
                    ));
                }
                for h in heads {
                    let right = m["cols"][h].as_i64();
                    if right.is_none_or(|r| r > n("box_right") + 1 || r > n("iw")) {
                        problems.push(format!("{w} px {path}: column {h} off screen: {m}"));
                    }
                }
            } else if *name == "history" && n("box_sw") <= n("box_cw") {
                // A phone keeps the in-box scroll: the table is wider than its box.
                problems.push(format!(
                    "{w} px {path}: the table no longer scrolls in its box: {m}"
                ));
            }
        }

        // Item 5: one story on the lossy UDP run's page.
        b.go(&format!("/runs/{lossy}"));
        shot(&b, &shots, w, "run-udp-lossy");
        let v = b.js("const q = s => document.querySelector(s);
             return {rate: q('#rate-check').className, note: q('#shortfall').textContent,
                     verdict: q('#verdict').className, vtext: q('#verdict').textContent,
                     sw: document.documentElement.scrollWidth, iw: window.innerWidth};");
        eprintln!("{w} px lossy UDP run {lossy}: {v}");
        let class = |s: &Value| {
            s.as_str()
                .unwrap_or_default()
                .split(' ')
                .find(|c| ["good", "warn", "bad"].contains(c))
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(class(&v["rate"]), "warn", "{v}");
        assert_eq!(class(&v["verdict"]), class(&v["rate"]), "one tone: {v}");
        let note = v["note"].as_str().unwrap_or_default();
        assert!(
            note.starts_with("sent in full; the receiver got only"),
            "{v}"
        );
        let vtext = v["vtext"].as_str().unwrap_or_default();
        assert!(
            vtext.contains("the receiver got") && !vtext.contains("reached"),
            "{v}"
        );

        // Item 6: the latency page and run page.
        b.go("/latency");
        let f = b.js("return [document.querySelector('select[name=load]').value,
                              document.querySelector('input[name=streams]').value];");
        assert_eq!(f, json!(["both", "4"]), "latency form defaults");
        b.go(&format!("/runs/{lat}"));
        shot(&b, &shots, w, "run-latency");
        let v = b.js(
            "const q = s => document.querySelector(s);
             const head = q('#latency-head'), cards = q('#cards');
             return {first: !!head && !!(head.compareDocumentPosition(cards) & Node.DOCUMENT_POSITION_FOLLOWING),
                     verdict: head ? q('#latency-verdict').textContent : '',
                     cc: head ? q('#latency-cc').textContent : '',
                     notes: Array.from(document.querySelectorAll('.fill-note')).map(n => n.textContent),
                     details: Array.from(document.querySelectorAll('dl.facts dt')).map(d => d.textContent),
                     load: q('#verdict') ? q('#verdict').previousElementSibling.textContent : ''};",
        );
        eprintln!("{w} px latency run {lat}: {v}");
        assert_eq!(v["first"], true, "the latency verdict leads: {v}");
        assert!(
            v["verdict"]
                .as_str()
                .is_some_and(|s| s.starts_with("latency under load")),
            "{v}"
        );
        let cc = v["cc"].as_str().unwrap_or_default();
        assert!(
            cc.starts_with("Congestion control of the load: ") && !cc.contains("not recorded"),
            "{v}"
        );
        assert!(
            v["notes"]
                .as_array()
                .is_some_and(|n| n.iter().any(|x| x.as_str().unwrap_or("").contains("2 s"))),
            "a 2 s loaded phase is named: {v}"
        );
        assert!(
            !v["details"]
                .as_array()
                .is_some_and(|d| d.iter().any(|x| x == "Verdict")),
            "{v}"
        );
        if v["load"] != "" {
            assert_eq!(v["load"], "Load verdict (throughput)", "{v}");
        }

        // Item 7: the suite saved with eth0 is not shown broken.
        b.go("/suites");
        shot(&b, &shots, w, "suites");
        let v = b.js(&format!(
            "const d = document.getElementById('def-{def_id}');
             return {{errors: Array.from(d.querySelectorAll('.error')).map(e => e.textContent),
                      plan: (d.querySelector('.plan') || {{}}).textContent || '',
                      notes: Array.from(d.querySelectorAll('.port-note')).map(e => e.textContent)}};"
        ));
        assert_eq!(v["errors"], json!([]), "{v}");
        assert_eq!(v["notes"], json!([]), "eth0 is on this board: {v}");
        assert!(
            v["plan"].as_str().is_some_and(|p| p.starts_with("2 tests")),
            "{v}"
        );

        // Item 11: no JavaScript error on a failed or a monitor run page.
        for (name, id) in [("run-failed", failed), ("run-monitor", mon)] {
            b.go(&format!("/runs/{id}"));
            shot(&b, &shots, w, name);
            assert_eq!(
                b.js("return document.getElementById('intervals') === null;"),
                json!(true),
                "{name}: the page has no Intervals table (the case that threw)"
            );
            assert_eq!(app_js_error(&b), "ok", "{name} /runs/{id}");
        }

        // Item 11: on a phone no word breaks across lines.
        if w < 500 {
            for path in [
                format!("/runs/{lossy}"),
                format!("/runs/{lat}"),
                format!("/runs/{tcp}"),
                format!("/suites/{suite}"),
                "/runs".to_string(),
            ] {
                b.go(&path);
                let broken = b.js(BROKEN_WORDS);
                if broken != json!([]) {
                    problems.push(format!("{w} px {path}: words broken across lines {broken}"));
                }
            }
        }

        // Item 4: charts follow the window (at the desk: 1400 → 900 → 1400 px).
        if w >= 1000 {
            b.go(&format!("/runs/{tcp}"));
            let t = Instant::now();
            let mut before = chart_widths(&b);
            while before["charts"].as_array().is_none_or(|c| c.len() < 2) {
                assert!(t.elapsed() < Duration::from_secs(10), "no charts: {before}");
                std::thread::sleep(Duration::from_millis(200));
                before = chart_widths(&b);
            }
            for (width, label) in [(900u32, "narrow"), (1400, "wide")] {
                b.cmd(
                    "POST",
                    "/window/rect",
                    json!({"width": width, "height": 1000}),
                );
                let t = Instant::now();
                let after = loop {
                    std::thread::sleep(Duration::from_millis(300));
                    let a = chart_widths(&b);
                    let fits = a["charts"].as_array().is_some_and(|c| {
                        c.iter().all(|x| {
                            (x[1].as_i64().unwrap_or(0) - x[2].as_i64().unwrap_or(0)).abs() <= 2
                        })
                    });
                    if (fits && a["iw"].as_i64() != before["iw"].as_i64())
                        || t.elapsed() > Duration::from_secs(5)
                    {
                        break a;
                    }
                };
                shot(&b, &shots, width, &format!("run-tcp-{label}"));
                eprintln!("charts {before} → {after}");
                let iw = after["iw"].as_i64().unwrap_or(0);
                assert!(
                    iw < before["iw"].as_i64().unwrap_or(0) || label == "wide",
                    "the window did not resize: {after}"
                );
                assert!(
                    after["sw"].as_i64().unwrap_or(i64::MAX) <= iw,
                    "{label}: the page scrolls sideways after the resize: {after}"
                );
                for c in after["charts"].as_array().into_iter().flatten() {
                    let (u, bx) = (c[1].as_i64().unwrap_or(0), c[2].as_i64().unwrap_or(0));
                    assert!(
                        (u - bx).abs() <= 2,
                        "{label}: chart {} is {u} px in a {bx} px box: {after}",
                        c[0]
                    );
                }
                before = after;
            }
        }
    }
    eprintln!("screenshots: {}", shots.display());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
