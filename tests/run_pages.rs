//! Every kind of run, as a user sees it in the browser (issue 17): one daemon in the board
//! namespace, stock peers in pc1 and pc2, and one run of each kind — iperf3 client and
//! served, iperf 2 client, multi-port (2 legs), forwarding (the `netperfd peer` agent in pc1,
//! stock `iperf3 -s` in pc2), monitor-only, HTTP serve (curl), HTTP download (nginx), TCP sink
//! and TCP source (nc). Headless Chromium then opens each run page and checks the command line
//! names the right tool, the headline cards carry real figures, and the Intervals table has
//! rows exactly when `GET /api/runs/N` has intervals; History shows each kind and filters by
//! kind. Screenshots go to `$CARGO_TARGET_TMPDIR/screenshots/run-pages/`.

mod common;
use common::http::*;
use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const TOKEN: &str = "lab-token-0123456789";
const WEB_PORT: u16 = 8084;
const WD_PORT: u16 = 9516;

/// WebDriver (chromedriver) over HTTP, from inside the board namespace.
struct Driver {
    http: Http,
    session: String,
}

impl Driver {
    fn start(lab: &mut Lab) -> Driver {
        let board = lab.board.clone();
        let profile = lab.dir().join("chromium-profile");
        let port = format!("--port={WD_PORT}");
        lab.spawn(&board, "chromedriver", "chromedriver", &[&port]);
        lab.wait_port(&board, "127.0.0.1", WD_PORT);
        let wd = Http::new(Some(&board), &format!("http://127.0.0.1:{WD_PORT}"));
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1280,1400",
                     format!("--user-data-dir={}", profile.display())]}}}});
        let r = wd.json("POST", "/session", vec![], &caps);
        assert_eq!(r.status, 200, "chromedriver: {}", r.body);
        let v: Value = serde_json::from_str(&r.body).expect("json");
        Driver {
            http: wd,
            session: v["value"]["sessionId"]
                .as_str()
                .expect("session")
                .to_string(),
        }
    }
    fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("/session/{}{path}", self.session);
        let r = if method == "GET" {
            self.http.req(method, &url, vec![], None)
        } else {
            self.http.json(method, &url, vec![], &body)
        };
        let v: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        assert_eq!(r.status, 200, "webdriver {method} {path}: {}", r.body);
        v["value"].clone()
    }
    fn find(&self, css: &str) -> String {
        let v = self.cmd(
            "POST",
            "/element",
            json!({"using": "css selector", "value": css}),
        );
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(|x| x.as_str())
            .unwrap_or_else(|| panic!("no element {css}"))
            .to_string()
    }
    fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.cmd("POST", &format!("/element/{e}/clear"), json!({}));
        self.cmd(
            "POST",
            &format!("/element/{e}/value"),
            json!({"text": text}),
        );
    }
    fn click(&self, css: &str) {
        let e = self.find(css);
        self.cmd("POST", &format!("/element/{e}/click"), json!({}));
    }
    fn js(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
    }
    fn go(&self, path: &str) {
        let url = format!("http://127.0.0.1:{WEB_PORT}{path}");
        self.cmd("POST", "/url", json!({"url": url}));
    }
    /// Save a PNG of the page as `dir/name.png` (checked to be a real PNG).
    fn screenshot(&self, dir: &std::path::Path, name: &str) {
        use base64::Engine;
        let shot = self.cmd("GET", "/screenshot", Value::Null);
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().unwrap_or_default())
            .expect("base64 PNG");
        assert_eq!(&png[1..4], b"PNG", "{name}: not a PNG");
        std::fs::write(dir.join(format!("{name}.png")), &png).expect("write screenshot");
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let url = format!("/session/{}", self.session);
        let _ = self.http.try_req("DELETE", &url, vec![], None);
    }
}

fn ns_sh(ns: &str, cmd: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", cmd])
        .output()
        .expect("run in namespace");
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// nginx in pc1 on 192.0.2.2:8080 serving `test.dat` (`size` bytes of zeros).
fn nginx(lab: &mut Lab, size: usize) -> String {
    let dir = lab.dir().display().to_string();
    let www = format!("{dir}/www");
    std::fs::create_dir_all(&www).expect("www");
    std::fs::write(format!("{www}/test.dat"), vec![0u8; size]).expect("file");
    let conf = format!(
        "daemon off;\nuser root;\nworker_processes 1;\npid {dir}/nginx.pid;\nerror_log {dir}/nginx-error.log;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n access_log off;\n default_type application/octet-stream;\n\
         client_body_temp_path {dir}/ngx-body;\n proxy_temp_path {dir}/ngx-proxy;\n fastcgi_temp_path {dir}/ngx-fcgi;\n\
         uwsgi_temp_path {dir}/ngx-uwsgi;\n scgi_temp_path {dir}/ngx-scgi;\n\
         server {{\n  listen {PC1_IP}:8080;\n  root {www};\n }}\n}}\n"
    );
    let cf = format!("{dir}/nginx.conf");
    std::fs::write(&cf, conf).expect("nginx conf");
    let pc1 = lab.pc1.clone();
    lab.spawn(&pc1, "nginx", "nginx", &["-c", &cf, "-p", &dir]);
    lab.wait_port(&pc1, PC1_IP, 8080);
    format!("http://{PC1_IP}:8080/test.dat")
}

/// Start a run through the API (201 + id), wait until it has ended; its `/api/runs/N`.
fn api_run(http: &Http, path: &str, body: Value) -> Value {
    let r = http.api("POST", path, &body);
    assert_eq!(r.status, 201, "{path} {body}: {}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    finished(http, id)
}

/// Wait (bounded) until run `id` is neither live nor running; its `/api/runs/N`.
fn finished(http: &Http, id: i64) -> Value {
    let t = Instant::now();
    loop {
        let v = http.get_json(&format!("/api/runs/{id}"));
        if v["live"] == false && v["run"]["status"] != "running" {
            assert_eq!(v["run"]["status"], "completed", "run {id}: {v}");
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "run {id} still going"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The newest ended run of `kind` that a peer started (role server); its `/api/runs/N`.
fn served(http: &Http, kind: &str) -> Value {
    let t = Instant::now();
    loop {
        let list = http.get_json(&format!("/api/runs?kind={kind}"));
        let hit = list.as_array().and_then(|a| {
            a.iter()
                .find(|r| r["kind"] == kind && r["role"] == "server" && r["status"] != "running")
        });
        if let Some(r) = hit {
            return finished(http, r["id"].as_i64().expect("id"));
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no ended {kind} run: {list}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Bits/s from a card's text ("941.5 Mbit/s", "9,154.8 Mbit/s": every page writes rates in Mbit/s,
/// docs/units.md §5); None for "—" or other text.
fn bps(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let n: f64 = it.next()?.replace(',', "").parse().ok()?;
    match it.next()? {
        "Mbit/s" => Some(n * 1e6),
        _ => None,
    }
}

/// What one kind's page must show.
struct Expect {
    /// Screenshot name.
    name: &'static str,
    /// `/api/runs/N` of the run.
    api: Value,
    /// Our command line's start (`#cmdline`), None when a peer started the run.
    ours: Option<String>,
    /// The stock tool's line's start (`#stock-cmdline`).
    stock: Option<String>,
    /// Card ids whose text must be a bitrate > 0.
    rate_cards: Vec<String>,
    /// Card ids whose text must be a whole number (retransmits).
    count_cards: Vec<&'static str>,
    /// Card ids that must be present and not "—".
    filled_cards: Vec<&'static str>,
    /// Intervals the run has (its own, or its legs' for a multi-port run).
    intervals: usize,
}

#[test]
fn every_kind_of_run_has_a_true_page() {
    let mut lab = Lab::with_pc2();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let pc2 = lab.pc2.clone().expect("pc2");
    // pc1 reaches pc2 through the board (forwarding run, NAT on eth1).
    ns_sh(&pc1, &format!("ip route add default via {BOARD_IP}"));
    let tf = lab.dir().join("agent-token");
    std::fs::write(&tf, format!("{TOKEN}\n")).expect("token file");
    let tf = tf.display().to_string();
    lab.spawn(&pc1, "iperf3-pc1", "iperf3", &["-s"]);
    lab.spawn(&pc1, "iperf-pc1", "iperf", &["-s"]);
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
    lab.spawn(&pc2, "iperf3-pc2", "iperf3", &["-s"]);
    let dl_url = nginx(&mut lab, 20_000_000);
    for p in [5201, 5001, 5280] {
        lab.wait_port(&pc1, PC1_IP, p);
    }
    lab.wait_port(&pc2, PC2_IP, 5201);
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &[]);
    for p in [5201, 5001, 8088, 5009, 5019] {
        lab.wait_port(&board, BOARD_IP, p);
    }
    set_up(&lab, &mut http);

    let mut want: Vec<Expect> = Vec::new();
    let rates = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // iperf3 client: the board against stock `iperf3 -s` in pc1, bound to eth0.
    let v = api_run(
        &http,
        "/api/runs",
        json!({"host": PC1_IP, "duration": 2, "bind": "eth0"}),
    );
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "iperf3-client",
        api: v,
        ours: Some(format!("netperfd -c {PC1_IP} -p 5201 -t 2")),
        stock: Some(format!("iperf3 -c {PC1_IP} -p 5201 -t 2")),
        rate_cards: rates(&["sum-sender", "sum-receiver"]),
        count_cards: vec!["sum-retr"],
        filled_cards: vec![],
        intervals: n,
    });

    // iperf 2 client: the board against Debian's `iperf -s` in pc1.
    let v = api_run(
        &http,
        "/api/runs",
        json!({"host": PC1_IP, "peer_type": "iperf2", "duration": 2}),
    );
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "iperf2-client",
        api: v,
        ours: Some(format!("netperfd -c {PC1_IP} -p 5001 --iperf2")),
        stock: Some(format!("iperf -c {PC1_IP} -p 5001")),
        rate_cards: rates(&["sum-sender"]),
        count_cards: vec!["sum-retr"],
        filled_cards: vec![],
        intervals: n,
    });

    // Multi-port: a leg out of each port, both against stock iperf3.
    let v = api_run(
        &http,
        "/api/runs/multi",
        json!({"legs": [{"host": PC1_IP, "bind": "eth0", "duration": 2},
                        {"host": PC2_IP, "bind": "eth1", "duration": 2}]}),
    );
    let legs = v["legs"].as_array().cloned().unwrap_or_default();
    assert_eq!(legs.len(), 2, "{v}");
    let n: usize = legs
        .iter()
        .map(|l| {
            let id = l["id"].as_i64().expect("leg id");
            let lv = http.get_json(&format!("/api/runs/{id}"));
            lv["intervals"].as_array().map_or(0, |a| a.len())
        })
        .sum();
    want.push(Expect {
        name: "multi",
        api: v,
        ours: Some(format!(
            "netperfd multi --leg eth0={PC1_IP} --leg eth1={PC2_IP}"
        )),
        stock: None,
        rate_cards: rates(&["sum-sender", "sum-receiver"]),
        count_cards: vec!["sum-retr"],
        filled_cards: vec![],
        intervals: n,
    });

    // Forwarding: the agent in pc1 runs iperf3 to pc2 through the board, NAT on eth1.
    let v = api_run(
        &http,
        "/api/forward",
        json!({"peer": "http://192.0.2.2:5280", "token": TOKEN, "target": PC2_IP,
               "ingress": "eth0", "egress": "eth1", "nat": true, "duration": "2"}),
    );
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    let fwd: Vec<String> = v["view"]["cards"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["id"].as_str())
                .filter(|id| id.starts_with("fwd-"))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    assert!(!fwd.is_empty(), "no forwarded card: {}", v["view"]);
    let mut fr = rates(&["sum-sender", "sum-receiver"]);
    fr.extend(fwd);
    want.push(Expect {
        name: "forward",
        api: v,
        ours: Some(
            "netperfd forward --peer http://192.0.2.2:5280 --token-file TOKEN --to 198.51.100.2 --in eth0 --out eth1 --nat -t 2"
                .into(),
        ),
        stock: Some(format!("iperf3 -c {PC2_IP}")),
        rate_cards: fr,
        count_cards: vec![],
        filled_cards: vec![],
        intervals: n,
    });

    // Monitor-only for 3 s while a stock iperf3 in pc1 sends to the board's own server for
    // 1 s (that test is the "iperf3 served" run).
    let r = http.api(
        "POST",
        "/api/monitor",
        &json!({"ports": ["eth0", "eth1"], "duration": "3", "label": "page check"}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let mon = r.json()["id"].as_i64().expect("id");
    // The flow starts inside the monitor's 3 s, not at its start: a duration.
    std::thread::sleep(Duration::from_millis(700));
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &["-c", BOARD_IP, "-t", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = finished(&http, mon);
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "monitor",
        api: v,
        ours: Some("netperfd monitor --ports eth0,eth1 -t 3".into()),
        stock: Some("bmon -p eth0,eth1".into()),
        rate_cards: vec![],
        count_cards: vec![],
        filled_cards: vec!["port-eth0", "port-eth1"],
        intervals: n,
    });
    let v = served(&http, "iperf3");
    assert_eq!(v["run"]["role"], "server", "{v}");
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "iperf3-served",
        api: v,
        ours: None,
        stock: Some(format!("iperf3 -c {BOARD_IP} -p 5201 -t 1")),
        rate_cards: rates(&["sum-sender", "sum-receiver"]),
        count_cards: vec!["sum-retr"],
        filled_cards: vec![],
        intervals: n,
    });

    // HTTP serve: curl in pc1 downloads 20 MB from the board's payload server.
    let (code, _, err) = lab.run(
        &pc1,
        "curl",
        "curl",
        &[
            "-sS",
            "-o",
            "/dev/null",
            &format!("http://{BOARD_IP}:8088/payload/20M"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let v = served(&http, "http-serve");
    assert_eq!(v["run"]["bytes"], 20_000_000, "{v}");
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "http-serve",
        api: v,
        ours: None,
        stock: Some(format!(
            "curl -o /dev/null http://{BOARD_IP}:8088/payload/20M"
        )),
        rate_cards: rates(&["sum-receiver"]),
        count_cards: vec![],
        filled_cards: vec!["sum-bytes"],
        intervals: n,
    });

    // HTTP download: the board fetches 20 MB from nginx in pc1 over 2 connections.
    let v = api_run(
        &http,
        "/api/http-get",
        json!({"url": dl_url, "connections": 2}),
    );
    assert_eq!(v["run"]["bytes"], 20_000_000, "{v}");
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "http-get",
        api: v,
        ours: Some(format!("netperfd http-get {dl_url} -n 2")),
        stock: Some("axel -n 2 -q -o /tmp/netperfd-".into()),
        rate_cards: rates(&["sum-receiver"]),
        count_cards: vec![],
        filled_cards: vec!["sum-bytes"],
        intervals: n,
    });

    // TCP sink and source: nc in pc1.
    let (code, _, err) = lab.run(
        &pc1,
        "nc-sink",
        "sh",
        &[
            "-c",
            &format!("head -c 20000000 /dev/zero | nc -N {BOARD_IP} 5009"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let v = served(&http, "tcp-sink");
    assert_eq!(v["run"]["bytes"], 20_000_000, "{v}");
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "tcp-sink",
        api: v,
        ours: None,
        stock: Some(format!("nc {BOARD_IP} 5009")),
        rate_cards: rates(&["sum-receiver"]),
        count_cards: vec![],
        filled_cards: vec!["sum-bytes"],
        intervals: n,
    });
    let (code, out, err) = lab.run(
        &pc1,
        "nc-source",
        "sh",
        &[
            "-c",
            &format!("nc -d {BOARD_IP} 5019 | head -c 20000000 | wc -c"),
        ],
        Duration::from_secs(30),
    );
    assert_eq!((code, out.trim()), (Some(0), "20000000"), "{err}");
    let v = served(&http, "tcp-source");
    let n = v["intervals"].as_array().map_or(0, |a| a.len());
    want.push(Expect {
        name: "tcp-source",
        api: v,
        ours: None,
        stock: Some(format!("nc -d {BOARD_IP} 5019")),
        rate_cards: rates(&["sum-receiver"]),
        count_cards: vec![],
        filled_cards: vec!["sum-bytes"],
        intervals: n,
    });

    // Every kind once.
    let mut kinds: Vec<&str> = want
        .iter()
        .filter_map(|e| e.api["run"]["kind"].as_str())
        .collect();
    netperfd::model::order::sort(&mut kinds);
    kinds.dedup();
    assert_eq!(kinds.len(), 9, "{kinds:?}");

    // The browser: log in like a user, then each run page.
    let d = Driver::start(&mut lab);
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("screenshots")
        .join("run-pages");
    let _ = std::fs::create_dir_all(&shots);
    d.go("/login");
    d.type_into("input[name=password]", "correct horse");
    d.click("button[type=submit]");
    // Wait for the redirect to "/": the first run page was once fetched before the login
    // landed (every element null in a full test run).
    let t = std::time::Instant::now();
    while d.js("return location.pathname;") != "/" {
        assert!(t.elapsed() < Duration::from_secs(10), "login did not land");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut problems = Vec::new();
    for e in &want {
        let id = e.api["run"]["id"].as_i64().expect("id");
        d.go(&format!("/runs/{id}"));
        d.screenshot(&shots, &format!("{id}-{}", e.name));
        let page = d.js(
            "const t = id => { const e = document.getElementById(id); return e ? e.textContent.trim() : null; };
             const cards = {};
             document.querySelectorAll('#cards .big').forEach(c => { cards[c.id] = c.textContent.trim(); });
             return {kind: t('kind'), title: t('title'), cmd: t('cmdline'), stock: t('stock-cmdline'), cards,
                     chart: t('chart-throughput'),
                     table: document.querySelector('table.intervals') !== null,
                     rows: document.querySelectorAll('#intervals tr').length};",
        );
        let mut bad = |what: String| problems.push(format!("run {id} ({}): {what}", e.name));
        if page["kind"] != e.api["view"]["kind_label"] || page["kind"].is_null() {
            bad(format!(
                "kind {} vs {}",
                page["kind"], e.api["view"]["kind_label"]
            ));
        }
        let title = page["title"].as_str().unwrap_or_default();
        if title.len() < 10 || title.contains(", 1 stream(s)") || title.starts_with(',') {
            bad(format!("title {title:?}"));
        }
        for (sel, want_start) in [("cmd", &e.ours), ("stock", &e.stock)] {
            let got = page[sel].as_str();
            match (want_start, got) {
                (Some(w), Some(g)) if g.starts_with(w.as_str()) => {}
                (None, None) => {}
                _ => bad(format!(
                    "{sel} line {got:?}, want it to start with {want_start:?}"
                )),
            }
        }
        // The page shows the API's view: same command lines.
        let api_cmd = e.api["view"]["command"].as_str().filter(|c| !c.is_empty());
        if page["cmd"].as_str() != api_cmd
            || page["stock"].as_str() != e.api["view"]["stock_command"].as_str()
        {
            bad(format!(
                "page lines {} / {} differ from the API's view {}",
                page["cmd"], page["stock"], e.api["view"]
            ));
        }
        // Every run here completed and measured what its cards show: no card says "—".
        if let Some(m) = page["cards"].as_object() {
            for (id, val) in m {
                if val.as_str().unwrap_or("—").contains('—') {
                    bad(format!("card {id} = {val}"));
                }
            }
        }
        if page["chart"]
            .as_str()
            .unwrap_or_default()
            .contains("no samples yet")
        {
            bad(format!("a finished run's chart says {}", page["chart"]));
        }
        let card = |id: &str| page["cards"][id].as_str().map(String::from);
        for c in &e.rate_cards {
            match card(c).as_deref().and_then(bps) {
                Some(x) if x > 0.0 => {}
                _ => bad(format!("card {c} = {:?}, want a bitrate > 0", card(c))),
            }
        }
        for c in &e.count_cards {
            if card(c).and_then(|t| t.parse::<u64>().ok()).is_none() {
                bad(format!("card {c} = {:?}, want a count", card(c)));
            }
        }
        for c in &e.filled_cards {
            match card(c) {
                Some(t) if !t.is_empty() && !t.contains('—') => {}
                other => bad(format!("card {c} = {other:?}, want a value")),
            }
        }
        let rows = page["rows"].as_u64().unwrap_or(0) as usize;
        if e.intervals > 0 && rows == 0 {
            bad(format!(
                "{} intervals in the API, none on the page",
                e.intervals
            ));
        }
        if e.intervals == 0 && page["table"] == true {
            bad("an empty Intervals table".into());
        }
        eprintln!(
            "run {id} {:<14} cmd {:?} stock {:?} cards {} intervals api {} page {rows}",
            e.name, page["cmd"], page["stock"], page["cards"], e.intervals
        );
    }

    // Monitor: the board's eth0 received pc1's 1 s iperf3 test during the monitor run.
    let mon_card = want
        .iter()
        .find(|e| e.name == "monitor")
        .and_then(|e| e.api["view"]["cards"].as_array().cloned())
        .unwrap_or_default();
    let eth0 = mon_card
        .iter()
        .find(|c| c["id"] == "port-eth0")
        .and_then(|c| c["value"].as_str())
        .unwrap_or_default()
        .to_string();
    match eth0.split(" / ").next().and_then(bps) {
        Some(rx) if rx > 1e6 => {}
        _ => problems.push(format!(
            "monitor eth0 rx / tx = {eth0:?}: rx should be > 1 Mbit/s"
        )),
    }

    // History: the Kind column names each kind; ?kind=forward lists only forwarding runs.
    let history = "return Array.from(document.querySelectorAll('table.runs tbody tr'))
        .filter(tr => tr.children.length > 3)
        .map(tr => [tr.children[1].textContent.trim(), tr.children[3].textContent.trim()]);";
    d.go("/runs");
    d.screenshot(&shots, "history");
    let rows = d.js(history);
    let rows: Vec<(String, String)> = rows
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r[0].as_str().unwrap_or_default().to_string(),
                        r[1].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    for e in &want {
        let id = e.api["run"]["id"].to_string();
        let label = e.api["view"]["kind_label"].as_str().unwrap_or("?");
        match rows.iter().find(|r| r.0 == id) {
            Some(r) if r.1 == label => {}
            other => problems.push(format!(
                "History row of run {id}: {other:?}, want kind {label:?}"
            )),
        }
    }
    d.go("/runs?kind=forward");
    d.screenshot(&shots, "history-forward");
    let rows = d.js(history);
    let fwd_id = want
        .iter()
        .find(|e| e.name == "forward")
        .map(|e| e.api["run"]["id"].to_string())
        .unwrap_or_default();
    let want_rows = json!([[fwd_id, "forwarding"]]);
    if rows != want_rows {
        problems.push(format!("History ?kind=forward: {rows}, want {want_rows}"));
    }
    eprintln!("screenshots: {}", shots.display());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
