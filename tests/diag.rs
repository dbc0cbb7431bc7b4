//! Diagnostics (issue 27) end to end, in network namespaces: the daemon in the board
//! namespace pings pc1 through its port (RTT > 0, 0 % loss; IPv6 link-local with `%eth0`;
//! DF refuses a request larger than the MTU, without DF it is fragmented and answered), a link
//! set down gives 100 % loss and says so, an absent host on the port's subnet shows up FAILED
//! in the neighbour table, the routes list the port's connected route, the system reports the
//! kernel release of `uname -r` and no secret; hostile input (shell metacharacters, count
//! 10^9, size over the limit, unknown fields) gets a clear 400 and runs nothing; a second ping
//! of the same user while one runs gets 429; name lookup; the log ring with who ran what;
//! admin only (a read-only API token is refused); the page and its forms with CSRF.

mod common;
use common::http::*;
use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const WEB_PORT: u16 = 8141;

fn ping(http: &Http, body: Value) -> (u16, Value) {
    let r = http.api("POST", "/api/diag/ping", &body);
    let v = serde_json::from_str(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

/// The IPv6 link-local address of eth0 in `ns` once DAD is done.
fn link_local(ns: &str) -> String {
    let t = Instant::now();
    loop {
        let out = Command::new("ip")
            .args(["-n", ns, "-j", "-6", "addr", "show", "dev", "eth0"])
            .output()
            .expect("ip");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let found = v[0]["addr_info"].as_array().and_then(|a| {
            a.iter()
                .find(|x| x["scope"] == "link" && x["tentative"].is_null())
                .and_then(|x| x["local"].as_str().map(String::from))
        });
        if let Some(a) = found {
            return a;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no link-local address in {ns}: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ping_tables_system_and_hostile_input() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &[]);
    set_up(&lab, &mut http);

    // Ping pc1 through the board's port: every request answered, RTT > 0.
    let (st, v) = ping(
        &http,
        json!({"host": PC1_IP, "count": 3, "interval_ms": 200, "port": "eth0"}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["sent"].as_u64(), v["received"].as_u64()),
        (Some(3), Some(3)),
        "{v}"
    );
    assert_eq!(v["loss_percent"].as_f64(), Some(0.0), "{v}");
    let (min, avg, max) = (
        num(&v, "/rtt_ms/min"),
        num(&v, "/rtt_ms/avg"),
        num(&v, "/rtt_ms/max"),
    );
    assert!(min > 0.0 && min <= avg && avg <= max && max < 1000.0, "{v}");
    assert_eq!(v["replies"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(v["replies"][0]["bytes"], 64, "56 bytes of payload + 8: {v}");

    // IPv6 link-local with its port in the host.
    // Both ends' link-local addresses must have passed DAD (the board's is the source).
    link_local(&board);
    let ll = link_local(&lab.pc1);
    let (st, v) = ping(
        &http,
        json!({"host": format!("{ll}%eth0"), "count": 2, "interval_ms": 200}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["received"], 2, "{v}");
    assert_eq!(v["target"], format!("{ll}%eth0"), "{v}");
    // A path to it keeps the scope too (issue 37 item 18: it was dropped).
    let r = http.api(
        "POST",
        "/api/diag/path",
        &json!({"host": format!("{ll}%eth0"), "max_hops": 2}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let p = r.json();
    assert_eq!(p["target"], format!("{ll}%eth0"), "{p}");
    assert_eq!(p["reached"], true, "{p}");
    // Without the port it says how to give one.
    let (st, v) = ping(&http, json!({"host": ll, "count": 1}));
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap_or_default().contains("%PORT"),
        "{v}"
    );

    // DF: 1600 bytes do not fit the 1500-byte MTU; without DF they are fragmented.
    let (st, v) = ping(
        &http,
        json!({"host": PC1_IP, "count": 2, "interval_ms": 200, "size": 1600, "df": true}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["received"], 0, "{v}");
    assert!(
        v["replies"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("message too long"),
        "{v}"
    );
    let (st, v) = ping(
        &http,
        json!({"host": PC1_IP, "count": 2, "interval_ms": 200, "size": 1600}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["received"], 2, "{v}");
    assert_eq!(v["replies"][0]["bytes"], 1608, "{v}");

    // The connected route of the port, with its prefix.
    let routes = http.get_json("/api/diag/routes");
    let rs = routes["routes"].as_array().cloned().unwrap_or_default();
    assert!(
        rs.iter().any(|r| r["destination"] == "192.0.2.0/24"
            && r["port"] == "eth0"
            && r["protocol"] == "kernel"
            && r["scope"] == "link"
            && r["source"] == BOARD_IP),
        "{routes}"
    );

    // An absent host on the port's subnet: 100 % loss, then FAILED in the neighbour table;
    // pc1 is REACHABLE or STALE with its MAC.
    let (st, v) = ping(
        &http,
        json!({"host": "192.0.2.99", "count": 2, "interval_ms": 200, "port": "eth0"}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["received"], 0, "{v}");
    assert_eq!(v["loss_percent"].as_f64(), Some(100.0), "{v}");
    let t = Instant::now();
    let neigh = loop {
        let n = http.get_json("/api/diag/neighbours");
        let failed = n["neighbours"].as_array().is_some_and(|a| {
            a.iter().any(|x| {
                x["address"] == "192.0.2.99" && x["port"] == "eth0" && x["state"] == "FAILED"
            })
        });
        if failed {
            break n;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no FAILED entry: {n}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let pc1 = neigh["neighbours"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["address"] == PC1_IP).cloned())
        .unwrap_or(Value::Null);
    assert!(
        ["REACHABLE", "STALE", "DELAY", "PROBE"].contains(&pc1["state"].as_str().unwrap_or("")),
        "{neigh}"
    );
    assert_eq!(pc1["mac"].as_str().map(str::len), Some(17), "{neigh}");
    let page = http.get("/diag");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("192.0.2.99") && page.body.contains("FAILED"),
        "page shows the FAILED entry"
    );
    // Issue 42 item 6: a board without thermal zones (or cpufreq) is told so, not left out.
    let zones = std::fs::read_dir("/sys/class/thermal")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("thermal_zone"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(
        page.body.contains("id=\"thermal-note\""),
        zones == 0,
        "{zones} thermal zones on this machine"
    );
    assert_eq!(page.body.contains("id=\"thermal-table\""), zones > 0);
    assert!(page.body.contains("id=\"clock-note\""));

    // System: the kernel of `uname -r`, memory, storage of the data directory, no secrets.
    let sys = http.get_json("/api/diag/system");
    let uname = Command::new("uname").arg("-r").output().expect("uname");
    assert_eq!(
        sys["kernel"]["release"].as_str(),
        Some(String::from_utf8_lossy(&uname.stdout).trim()),
        "{sys}"
    );
    assert!(num(&sys, "/memory/total_bytes") > num(&sys, "/memory/available_bytes"));
    assert!(num(&sys, "/storage/total_bytes") > 0.0, "{sys}");
    assert!(
        sys["storage"]["path"]
            .as_str()
            .unwrap_or_default()
            .ends_with("data"),
        "{sys}"
    );
    assert!(
        num(&sys, "/uptime_s") > 0.0 && num(&sys, "/cpus") >= 1.0,
        "{sys}"
    );
    assert_eq!(
        sys["netperfd"]["config"]["admin_password"],
        "set (not shown)"
    );
    assert!(
        sys["netperfd"]["version"]
            .as_str()
            .is_some_and(|s| s.contains("netperfd")),
        "{sys}"
    );
    assert!(!sys.to_string().contains("$argon2"), "{sys}");
    assert_eq!(
        sys["netperfd"]["config"]["capture_max_seconds"], 60,
        "{sys}"
    );

    // Hostile input: a clear 400, nothing run (no file made, no audit line).
    let canary = lab.dir().join("pwned");
    let c = canary.display().to_string();
    for host in [
        format!("192.0.2.2; touch {c}"),
        format!("$(touch {c})"),
        format!("`touch {c}`"),
        "192.0.2.2 -f".to_string(),
        "a|b".to_string(),
    ] {
        let (st, v) = ping(&http, json!({"host": host, "count": 1}));
        assert_eq!(st, 400, "{host}: {v}");
        assert!(
            v["error"].as_str().unwrap_or_default().contains("host"),
            "{v}"
        );
        let r = http.api("POST", "/api/diag/lookup", &json!({"host": host}));
        assert_eq!(r.status, 400, "{host}: {}", r.body);
    }
    assert!(!canary.exists());
    for (body, want) in [
        (
            json!({"host": PC1_IP, "count": 1_000_000_000u64}),
            "count 1000000000 is out of range: 1 to 100",
        ),
        (
            json!({"host": PC1_IP, "count": 0}),
            "count 0 is out of range",
        ),
        (
            json!({"host": PC1_IP, "interval_ms": 1}),
            "interval 1 ms is out of range",
        ),
        (
            json!({"host": PC1_IP, "count": 100, "interval_ms": 10000}),
            "at most 60 s",
        ),
        (
            json!({"host": PC1_IP, "size": 100000}),
            "size 100000 is out of range",
        ),
        (
            json!({"host": PC1_IP, "port": "eth9"}),
            "there is no port 'eth9'",
        ),
        (json!({"host": PC1_IP, "bogus": 1}), "unknown field"),
        (json!({"host": PC1_IP, "count": -1}), "invalid request body"),
    ] {
        let (st, v) = ping(&http, body.clone());
        assert_eq!(st, 400, "{body}: {v}");
        assert!(
            v["error"].as_str().unwrap_or_default().contains(want),
            "{body}: {v}"
        );
    }
    let (_, log) = lab.output("daemon");
    assert!(
        !log.contains("touch"),
        "a refused host reached the log: {log}"
    );
    assert_eq!(log.matches("ran diagnostics: ping").count(), 6, "{log}");

    // One ping at a time per user: the second gets 429 while the first runs.
    let h2 = http.clone();
    let logged = |lab: &Lab| {
        lab.output("daemon")
            .1
            .matches("ran diagnostics: ping")
            .count()
    };
    let pings = logged(&lab);
    let first = std::thread::spawn(move || {
        ping(&h2, json!({"host": PC1_IP, "count": 4, "interval_ms": 500}))
    });
    // The first ping holds the user's slot once it is logged (the log line comes after the
    // claim).
    wait_until(Duration::from_secs(10), "the first ping to start", || {
        logged(&lab) > pings
    });
    let (st, v) = ping(&http, json!({"host": PC1_IP, "count": 1}));
    assert_eq!(st, 429, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or_default()
            .contains("one ping at a time"),
        "{v}"
    );
    let (st, v) = first.join().expect("first ping");
    assert_eq!((st, v["received"].as_u64()), (200, Some(4)), "{v}");
    let (st, v) = ping(&http, json!({"host": PC1_IP, "count": 1}));
    assert_eq!(st, 200, "free again: {v}");

    // Name lookup with the daemon's resolver.
    let r = http.api("POST", "/api/diag/lookup", &json!({"host": "localhost"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert!(
        v["addresses"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "127.0.0.1" || x == "::1")),
        "{v}"
    );

    // The log ring: who ran what, filtered, downloadable.
    let logs = http.get_json("/api/diag/logs?q=ran%20diagnostics&level=info");
    let lines = logs["lines"].as_array().cloned().unwrap_or_default();
    assert!(
        lines.iter().any(|l| l.as_str().is_some_and(|l| l.contains("admin session from 127.0.0.1 ran diagnostics: ping 192.0.2.2 (3 requests of 56 bytes every 200 ms from eth0)"))),
        "{logs}"
    );
    assert!(lines
        .iter()
        .all(|l| l.as_str().is_some_and(|l| l.contains("ran diagnostics"))));
    assert_eq!(
        http.get("/api/diag/logs?q=ran%20diagnostics&level=error")
            .json()["lines"],
        json!([])
    );
    let r = http.get("/api/diag/logs.txt?q=name%20lookup");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("name lookup of localhost"), "{}", r.body);
    assert_eq!(http.get("/api/diag/logs?level=loud").status, 400);
    assert_eq!(http.get("/api/diag/logs?lines=0").status, 400);
    // The journal: fixed arguments, the number checked.
    assert_eq!(http.get("/api/diag/journal.txt?lines=5;reboot").status, 400);
    let j = http.get("/api/diag/journal.txt?lines=5");
    if std::path::Path::new("/usr/bin/journalctl").exists()
        || std::path::Path::new("/bin/journalctl").exists()
    {
        assert!(j.status == 200 || j.status == 500, "{}", j.body);
    } else {
        assert_eq!(j.status, 404, "{}", j.body);
        assert!(j.body.contains("journalctl is not installed"));
    }

    // Admin only: no credentials 401; a read-only API token 403, also for reads.
    let anon = Http::new(Some(&board), &http.base);
    assert_eq!(anon.get("/api/diag/system").status, 401);
    let r = http.form(
        "/settings/tokens",
        &[
            ("csrf", &http.csrf.clone()),
            ("name", "dash"),
            ("scope", "read"),
        ],
    );
    let i = r.body.find("id=\"new-token\">").expect("token") + 15;
    let token = r.body[i..]
        .split('<')
        .next()
        .unwrap_or_default()
        .to_string();
    let bearer = vec![("Authorization".to_string(), format!("Bearer {token}"))];
    let r = anon.req("GET", "/api/diag/neighbours", bearer.clone(), None);
    assert_eq!(r.status, 403, "{}", r.body);
    let r = anon.json("POST", "/api/diag/ping", bearer, &json!({"host": PC1_IP}));
    assert_eq!(r.status, 403, "{}", r.body);

    // The page's forms: CSRF checked; a ping shows its summary, a bad host its error.
    let r = http.form("/diag/ping", &[("host", PC1_IP), ("count", "1")]);
    assert_eq!(r.status, 403, "{}", r.body);
    let csrf = http.csrf.clone();
    let r = http.form(
        "/diag/ping",
        &[
            ("csrf", &csrf),
            ("host", PC1_IP),
            ("count", "2"),
            ("interval_ms", "200"),
            ("port", "eth0"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("id=\"ping-summary\"") && r.body.contains("2 received, 0 % loss"),
        "{}",
        r.body
    );
    let r = http.form("/diag/ping", &[("csrf", &csrf), ("host", "$(reboot)")]);
    assert_eq!(r.status, 400);
    assert!(r.body.contains("id=\"ping-error\""), "{}", r.body);
    let r = http.form("/diag/lookup", &[("csrf", &csrf), ("host", "localhost")]);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("id=\"lookup-addresses\""), "{}", r.body);

    // A link set down: 100 % loss, and the summary says so.
    let out = Command::new("ip")
        .args(["-n", &lab.pc1, "link", "set", "eth0", "down"])
        .output()
        .expect("ip");
    assert!(out.status.success());
    let (st, v) = ping(
        &http,
        json!({"host": PC1_IP, "count": 2, "interval_ms": 200, "port": "eth0"}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["received"].as_u64(), v["loss_percent"].as_f64()),
        (Some(0), Some(100.0)),
        "{v}"
    );
    let s = v["summary"].as_str().unwrap_or_default();
    assert!(s.contains("100 % loss") && s.contains("no reply"), "{v}");
}

/// Records of a classic little-endian pcap file: (bytes kept, bytes on the wire, frame).
fn pcap_records(b: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
    assert!(
        b.len() >= 24,
        "pcap shorter than its header: {} bytes",
        b.len()
    );
    assert_eq!(&b[0..4], &[0xd4, 0xc3, 0xb2, 0xa1], "magic");
    let u32le = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    assert_eq!(u32le(20), 1, "LINKTYPE_ETHERNET");
    let mut out = Vec::new();
    let mut o = 24;
    while o < b.len() {
        assert!(o + 16 <= b.len(), "cut record header at {o}");
        let (kept, wire) = (u32le(o + 8), u32le(o + 12));
        let end = o + 16 + kept as usize;
        assert!(end <= b.len(), "cut record at {o}");
        out.push((kept, wire, b[o + 16..end].to_vec()));
        o = end;
    }
    out
}

/// ICMP echo (type 8 request, 0 reply) frames from `src` to `dst` in the records.
fn icmp_echo(recs: &[(u32, u32, Vec<u8>)], kind: u8, src: &str, dst: &str) -> usize {
    let (s, d): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
        (src.parse().expect("ip"), dst.parse().expect("ip"));
    recs.iter()
        .filter(|(_, _, f)| {
            f.len() >= 14 + 20 + 8
                && f[12..14] == [0x08, 0x00]
                && f[14 + 9] == 1
                && f[26..30] == s.octets()
                && f[30..34] == d.octets()
                && f[14 + (f[14] & 0x0f) as usize * 4] == kind
        })
        .count()
}

/// `count` ICMP echo requests of `size` payload bytes from namespace `ns` to `dst`, `every`
/// apart (netperfd's own ping: the lab has no `ping` binary); replies received.
fn ping_from(ns: &str, dst: &str, count: u32, every: Duration, size: usize) -> u32 {
    let spec = netperfd::engine::ping::PingSpec {
        target: std::net::SocketAddr::new(dst.parse().expect("ip"), 0),
        count,
        interval: every,
        size,
        bind_dev: None,
        dont_fragment: false,
        timeout: Duration::from_secs(1),
    };
    in_ns(ns, move || {
        netperfd::engine::ping::ping(&spec).expect("ping").received
    })
}

fn wait_capture(http: &Http, id: i64) -> Value {
    let t = Instant::now();
    loop {
        let v = http.get_json(&format!("/api/diag/capture/{id}"));
        if v["state"] != "running" {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "capture still running: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pcap_download(http: &Http, id: i64) -> Vec<u8> {
    let (base, cookie) = (http.base.clone(), http.cookie.clone().unwrap_or_default());
    let path = format!("/api/diag/capture/{id}/pcap");
    in_ns(http.ns.as_deref().expect("ns"), move || {
        let r = ureq::get(&format!("{base}{path}"))
            .set("Cookie", &format!("netperfd_session={cookie}"))
            .call()
            .expect("pcap download");
        assert_eq!(r.content_type(), "application/vnd.tcpdump.pcap");
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut b).expect("body");
        b
    })
}

#[test]
fn capture_writes_a_pcap_within_its_caps() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let (d, mut http) = daemon(&mut lab, &board, WEB_PORT + 1, &[]);
    set_up(&lab, &mut http);

    // 3 s of ICMP while pc1 pings the board 5 times.
    let r = http.api(
        "POST",
        "/api/diag/capture",
        &json!({"port": "eth0", "seconds": 3, "filter": "icmp and host 192.0.2.2"}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    let t0 = Instant::now();
    let got = ping_from(&pc1, BOARD_IP, 5, Duration::from_millis(200), 56);
    assert_eq!(got, 5);
    let v = wait_capture(&http, id);
    let took = t0.elapsed();
    assert_eq!(
        (v["state"].as_str(), v["ended_by"].as_str()),
        (Some("done"), Some("time")),
        "{v}"
    );
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(6),
        "{took:?}"
    );
    let pcap = pcap_download(&http, id);
    assert_eq!(pcap.len() as f64, num(&v, "/bytes"), "{v}");
    let recs = pcap_records(&pcap);
    assert_eq!(recs.len() as f64, num(&v, "/packets"), "{v}");
    assert_eq!(
        icmp_echo(&recs, 8, PC1_IP, BOARD_IP),
        5,
        "echo requests pc1 → board"
    );
    assert_eq!(
        icmp_echo(&recs, 0, BOARD_IP, PC1_IP),
        5,
        "echo replies board → pc1"
    );
    assert_eq!(recs.len(), 10, "the filter kept only the ICMP of pc1");
    assert!(
        recs.iter().all(|(k, w, f)| *k == *w && f.len() == 98),
        "whole 98-byte frames"
    );
    // Removed after download.
    let r = http.get(&format!("/api/diag/capture/{id}/pcap"));
    assert_eq!(r.status, 410, "{}", r.body);
    assert!(r.body.contains("removed (downloaded)"), "{}", r.body);
    assert_eq!(
        http.get_json(&format!("/api/diag/capture/{id}"))["state"],
        "removed"
    );
    let files = std::fs::read_dir(lab.dir().join("data/captures"))
        .expect("captures dir")
        .count();
    assert_eq!(files, 0, "no capture file left");

    // A packet cap stops the capture at the cap, long before its time.
    let r = http.api(
        "POST",
        "/api/diag/capture",
        &json!({"port": "eth0", "seconds": 20, "max_packets": 5}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    let t0 = Instant::now();
    ping_from(&pc1, BOARD_IP, 20, Duration::from_millis(50), 56);
    let v = wait_capture(&http, id);
    assert_eq!(
        (v["ended_by"].as_str(), v["packets"].as_u64()),
        (Some("packets"), Some(5)),
        "{v}"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(pcap_records(&pcap_download(&http, id)).len(), 5);
    // A byte cap: the file stays within it.
    let r = http.api(
        "POST",
        "/api/diag/capture",
        &json!({"port": "eth0", "seconds": 20, "max_bytes": 2048}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    ping_from(&pc1, BOARD_IP, 10, Duration::from_millis(50), 600);
    let v = wait_capture(&http, id);
    assert_eq!(v["ended_by"], "bytes", "{v}");
    let pcap = pcap_download(&http, id);
    assert!(
        pcap.len() <= 2048 && pcap.len() > 24 + 16 + 600,
        "{} bytes",
        pcap.len()
    );
    pcap_records(&pcap);

    // Hostile requests: clear 400s, nothing started.
    for (body, want) in [
        (
            json!({"port": "eth0", "filter": "host 1.2.3.4; rm -rf /"}),
            "not an IP address",
        ),
        (
            json!({"port": "eth0", "filter": "icmp or $(reboot)"}),
            "expected 'and'",
        ),
        (
            json!({"port": "eth0", "seconds": 100000}),
            "seconds 100000 is out of range: 1 to 60 (capture_max_seconds)",
        ),
        (
            json!({"port": "eth0", "max_bytes": 104857600}),
            "out of range: 1024 to 67108864 (capture_max_bytes)",
        ),
        (
            json!({"port": "eth0", "max_packets": 1000000}),
            "(capture_max_packets)",
        ),
        (json!({"port": "eth0;ls"}), "there is no port"),
    ] {
        let r = http.api("POST", "/api/diag/capture", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(want), "{body}: {}", r.body);
    }
    // 50 requests at once: one capture runs, the others are refused with a clear answer.
    let hs: Vec<_> = (0..50)
        .map(|_| {
            let h = http.clone();
            std::thread::spawn(move || {
                h.api(
                    "POST",
                    "/api/diag/capture",
                    &json!({"port": "eth0", "seconds": 2}),
                )
            })
        })
        .collect();
    let rs: Vec<Resp> = hs.into_iter().map(|h| h.join().expect("thread")).collect();
    let created: Vec<&Resp> = rs.iter().filter(|r| r.status == 201).collect();
    assert_eq!(
        created.len(),
        1,
        "{:?}",
        rs.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(rs
        .iter()
        .filter(|r| r.status != 201)
        .all(|r| r.status == 429 && r.body.contains("at a time")));
    let id = created[0].json()["id"].as_i64().expect("id");
    assert_eq!(wait_capture(&http, id)["state"], "done");
    // Memory: the captures, the over-cap requests and the 50 at once left the daemon's peak
    // far under the 100 MiB every input surface is held to (a capture streams to its file
    // through one 64 KiB frame buffer).
    let peak = vm_hwm_kib(lab.pid(d));
    eprintln!("daemon VmHWM after the captures: {peak} KiB");
    assert!(peak < 100 * 1024, "daemon peak {peak} KiB");

    // The page: the form (CSRF checked) and the list with a download link.
    let r = http.form("/diag/capture", &[("port", "eth0"), ("seconds", "1")]);
    assert_eq!(r.status, 403);
    let csrf = http.csrf.clone();
    let r = http.form(
        "/diag/capture",
        &[
            ("csrf", &csrf),
            ("port", "eth0"),
            ("seconds", "1"),
            ("filter", "udp"),
        ],
    );
    // Post/redirect/get (issue 38 item 7): the POST answers 303 to a page that a reload only
    // reads; reloading it starts no capture.
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(r.location.starts_with("/diag?capture="), "{}", r.location);
    let started: i64 = r.location["/diag?capture=".len()..]
        .trim_end_matches("#capture")
        .parse()
        .expect("capture id in the Location");
    let page = r.location.trim_end_matches("#capture").to_string();
    let r = http.get(&page);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(http.get(&page).status, 200, "the reload");
    assert_eq!(
        http.get(&format!("/api/diag/capture/{}", started + 1))
            .status,
        404,
        "reloading the page started capture {}",
        started + 1
    );
    assert!(
        r.body.contains("id=\"capture-started\"") && r.body.contains("id=\"capture-table\""),
        "{}",
        r.body
    );
    assert!(
        r.body.contains(&format!("/api/diag/capture/{id}/pcap")),
        "{}",
        r.body
    );
    let r = http.form(
        "/diag/capture",
        &[("csrf", &csrf), ("port", "eth0"), ("filter", "`id`")],
    );
    assert_eq!(r.status, 400);
    assert!(r.body.contains("id=\"capture-error\""));
    let (_, log) = lab.output("daemon");
    assert!(
        log.contains("ran diagnostics: capture 1 on eth0 (3 s"),
        "{log}"
    );
}

/// TCP segments of a pcap's records: (source, source port, destination, destination port,
/// SYN without ACK, payload bytes by the IPv4 total length, so a GSO frame over the snap length
/// counts whole, and the sequence number).
#[allow(clippy::type_complexity)]
fn tcp_segments(recs: &[(u32, u32, Vec<u8>)]) -> Vec<(String, u16, String, u16, bool, u64, u32)> {
    recs.iter()
        .filter(|(_, _, f)| f.len() >= 14 + 20 + 20 && f[12..14] == [0x08, 0x00] && f[23] == 6)
        .map(|(_, _, f)| {
            let ihl = (f[14] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([f[16], f[17]]) as u64;
            let t = 14 + ihl;
            let doff = (f[t + 12] >> 4) as u64 * 4;
            let ip = |o: usize| std::net::Ipv4Addr::new(f[o], f[o + 1], f[o + 2], f[o + 3]);
            let flags = f[t + 13];
            (
                ip(26).to_string(),
                u16::from_be_bytes([f[t], f[t + 1]]),
                ip(30).to_string(),
                u16::from_be_bytes([f[t + 2], f[t + 3]]),
                flags & 0x12 == 0x02,
                total.saturating_sub(ihl as u64 + doff),
                u32::from_be_bytes([f[t + 4], f[t + 5], f[t + 6], f[t + 7]]),
            )
        })
        .collect()
}

/// Issue 27, "capture the first 5 s of this run": a capture asked for with a run starts just
/// before it, so it holds the run's first packet (the control connection's SYN) and, lasting
/// longer than the run, every payload byte the run counted; it is listed on the run (API and
/// page), downloadable more than once. A bad capture starts no run, a bad run no capture, and
/// capture files a previous daemon left are removed at start.
#[test]
fn a_capture_started_with_a_run_holds_the_whole_run() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    // A file the last daemon left: nothing lists it any more.
    let stale = lab.dir().join("data/captures");
    std::fs::create_dir_all(&stale).expect("mkdir");
    std::fs::write(stale.join("capture-7.pcap"), [0u8; 100]).expect("write");
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT + 3, &[]);
    set_up(&lab, &mut http);
    assert!(
        !stale.join("capture-7.pcap").exists(),
        "stale capture file removed at start"
    );
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let runs_now = |h: &Http| h.get_json("/api/runs").as_array().map_or(0, |a| a.len());

    // Refused together: a bad capture starts no run; a bad run starts no capture.
    for (body, want) in [
        (
            json!({"host": PC1_IP, "duration": 2, "capture": {"port": "nope0", "seconds": 3}}),
            "capture: there is no port 'nope0'",
        ),
        (
            json!({"host": PC1_IP, "capture": {"port": "eth0", "filter": "port 5201 or udp"}}),
            "capture: filter: expected 'and'",
        ),
        (
            json!({"host": "-c /etc/passwd", "capture": {"port": "eth0", "seconds": 3}}),
            "not a host",
        ),
    ] {
        let r = http.api("POST", "/api/runs", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(want), "{body}: {}", r.body);
    }
    assert_eq!(runs_now(&http), 0, "nothing started");
    assert_eq!(
        std::fs::read_dir(&stale).expect("dir").count(),
        0,
        "no capture file made"
    );

    // 2 s at 20 Mbit/s, captured for 3 s: the whole run.
    let r = http.api(
        "POST",
        "/api/runs",
        &json!({"host": PC1_IP, "duration": 2, "bitrate": "20M",
                "capture": {"port": "eth0", "seconds": 3, "filter": "tcp and port 5201"}}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    let run = wait_run(&http, id, Duration::from_secs(20));
    assert_eq!(run["run"]["status"], "completed", "{run}");
    let sent = num(&run, "/run/bytes") as u64;
    assert!(sent > 4_000_000, "{sent} bytes sent");
    let t = Instant::now();
    let cap = loop {
        let v = http.get_json(&format!("/api/runs/{id}"));
        let c = v["captures"][0].clone();
        if c["state"] != "running" {
            break c;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{c}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (
            cap["state"].as_str(),
            cap["ended_by"].as_str(),
            cap["run_id"].as_i64()
        ),
        (Some("done"), Some("time"), Some(id)),
        "{cap}"
    );
    let cid = cap["id"].as_i64().expect("id");
    let pcap = pcap_download(&http, cid);
    assert_eq!(
        pcap_download(&http, cid),
        pcap,
        "a run's capture is kept after a download"
    );
    let recs = pcap_records(&pcap);
    assert_eq!(recs.len() as f64, num(&cap, "/packets"), "{cap}");
    let segs = tcp_segments(&recs);
    assert_eq!(segs.len(), recs.len(), "the filter kept TCP only");
    // The first packet is the run's first: the control connection's SYN to the server.
    let first = &segs[0];
    assert_eq!(
        (first.0.as_str(), first.2.as_str(), first.3, first.4),
        (BOARD_IP, PC1_IP, 5201, true),
        "{first:?}"
    );
    // Two connections (control, one stream): the stream is the second SYN; what it carries
    // to the server is every byte the run sent.
    let syns: Vec<u16> = segs.iter().filter(|s| s.4).map(|s| s.1).collect();
    assert_eq!(syns.len(), 2, "{syns:?}");
    // The sequence space the stream covered (a retransmitted segment is captured twice: on a
    // busy machine a sum of payloads read 752 bytes over).
    let stream: Vec<_> = segs
        .iter()
        .filter(|s| s.0 == BOARD_IP && s.1 == syns[1] && s.3 == 5201)
        .collect();
    let isn = stream.iter().find(|s| s.4).expect("the stream's SYN").6;
    let stream_bytes: u64 = stream
        .iter()
        .filter(|s| s.5 > 0)
        .map(|s| u64::from(s.6.wrapping_sub(isn).wrapping_sub(1)) + s.5)
        .max()
        .unwrap_or(0);
    // The stream's first 37 bytes are iperf3's cookie, then the run's payload.
    assert_eq!(
        stream_bytes,
        sent + 37,
        "payload captured = the cookie + the bytes the run sent"
    );

    // The page lists it with its link; the form starts a run with a capture too.
    let page = http.get(&format!("/runs/{id}"));
    assert!(
        page.body.contains(&format!("id=\"capture-{cid}\""))
            && page.body.contains(&format!("/api/diag/capture/{cid}/pcap")),
        "{}",
        page.body
    );
    let csrf = http.csrf.clone();
    let r = http.form(
        "/tests",
        &[
            ("csrf", &csrf),
            ("host", PC1_IP),
            ("duration", "1"),
            ("bitrate", "5M"),
            ("capture_port", "eth0"),
            ("capture_seconds", "many"),
        ],
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("capture seconds must be a whole number"),
        "{}",
        r.body
    );
    assert_eq!(runs_now(&http), 1, "a bad capture field starts no run");
    let r = http.form(
        "/tests",
        &[
            ("csrf", &csrf),
            ("host", PC1_IP),
            ("duration", "1"),
            ("bitrate", "5M"),
            ("capture_port", "eth0"),
            ("capture_seconds", "2"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let id2 = r.run_id();
    let v = wait_run(&http, id2, Duration::from_secs(20));
    assert_eq!(v["captures"][0]["run_id"].as_i64(), Some(id2), "{v}");
    let (_, log) = lab.output("daemon");
    assert!(
        log.contains(&format!("ran diagnostics: capture {cid} on eth0 (3 s")),
        "{log}"
    );
}

/// A namespace this test made itself, deleted when dropped (also on failure).
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn path_shows_two_hops_and_the_smaller_mtu() {
    // board — pc1 (a router) — far, the second link with MTU 1400.
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let far = Netns(board.replacen("npt-b", "npt-f", 1));
    ip(&["netns", "add", &far.0]);
    let sfx = &board["npt-b".len()..];
    let (a, b) = (format!("fa{sfx}"), format!("fb{sfx}"));
    ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
    ip(&["link", "set", &a, "netns", &pc1, "name", "eth1"]);
    ip(&["link", "set", &b, "netns", &far.0, "name", "eth0"]);
    for (ns, dev, addr) in [
        (&pc1, "eth1", "198.51.100.1/24"),
        (&far.0, "eth0", "198.51.100.2/24"),
    ] {
        ip(&["-n", ns, "addr", "add", addr, "dev", dev]);
        ip(&["-n", ns, "link", "set", dev, "mtu", "1400"]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
    ip(&["-n", &far.0, "link", "set", "lo", "up"]);
    ip(&[
        "-n",
        &far.0,
        "route",
        "add",
        "default",
        "via",
        "198.51.100.1",
    ]);
    ip(&[
        "-n",
        &board,
        "route",
        "add",
        "198.51.100.0/24",
        "via",
        PC1_IP,
    ]);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pc1,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])
        .output()
        .expect("sysctl");
    assert!(out.status.success());
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT + 2, &[]);
    set_up(&lab, &mut http);

    let r = http.api(
        "POST",
        "/api/diag/path",
        &json!({"host": "198.51.100.2", "max_hops": 5}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["reached"], true, "{v}");
    let hops = v["hops"].as_array().cloned().unwrap_or_default();
    assert_eq!(hops.len(), 2, "{v}");
    assert_eq!(hops[0]["address"], PC1_IP, "{v}");
    assert_eq!(hops[1]["address"], "198.51.100.2", "{v}");
    assert_eq!(hops[1]["note"], "reached", "{v}");
    assert_eq!(
        hops[1]["mtu"], 1400,
        "the second link's MTU, learned at hop 2: {v}"
    );
    assert_eq!(v["path_mtu"], 1400, "{v}");
    assert!(
        num(&v, "/hops/0/rtt_ms") > 0.0 && num(&v, "/hops/1/rtt_ms") > 0.0,
        "{v}"
    );
    assert!(
        v["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("2 hops, reached, path MTU 1400"),
        "{v}"
    );

    // Hostile and out-of-range requests: 400, nothing traced.
    for (body, want) in [
        (json!({"host": "198.51.100.2; reboot"}), "not an address"),
        (
            json!({"host": "198.51.100.2", "max_hops": 99}),
            "max_hops 99 is out of range: 1 to 30",
        ),
        (
            json!({"host": "198.51.100.2", "port": "eth7"}),
            "there is no port 'eth7'",
        ),
    ] {
        let r = http.api("POST", "/api/diag/path", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(want), "{body}: {}", r.body);
    }
    // The page's form.
    let csrf = http.csrf.clone();
    let r = http.form(
        "/diag/path",
        &[("csrf", &csrf), ("host", "198.51.100.2"), ("max_hops", "4")],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("id=\"path-hops\"") && r.body.contains("path MTU 1400"),
        "{}",
        r.body
    );
    let (_, log) = lab.output("daemon");
    assert_eq!(
        log.matches("ran diagnostics: path to 198.51.100.2").count(),
        2,
        "{log}"
    );
}
