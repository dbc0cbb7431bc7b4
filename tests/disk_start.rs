//! Issue 37 items 4, 6 and 16 against the real daemon: a board whose data partition is full
//! after a kill -9 mid forwarding run comes up (read-only, saying so on every page), with the
//! run's NAT off and the files the dead daemon left (a capture, an import spool) removed; once
//! there is room it leaves read-only by itself, marks the run aborted and a later start does
//! not re-apply the run's forwarding. Capture downloads stream (the daemon's peak memory stays
//! flat over 10 parallel downloads of a 64 MiB capture) and at most 4 run at once.

mod common;
use common::http::*;
use common::*;
use serde_json::json;
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const TOKEN: &str = "lab-token-0123456789";
const MIB: u64 = 1024 * 1024;

fn ns_out(ns: &str, prog: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, prog])
        .args(args)
        .output()
        .expect("run in namespace");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn ip_forward(ns: &str) -> String {
    ns_out(ns, "cat", &["/proc/sys/net/ipv4/ip_forward"])
}

/// Whether any netperfd firewall rule is left in `ns` (nft table or iptables chains).
fn our_rules_left(ns: &str) -> bool {
    let nft = Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "list", "table", "inet", "netperfd",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let ipt = ns_out(ns, "iptables-save", &[]);
    nft || ipt.contains("NETPERFD")
}

/// Start `netperfd daemon` as process `name` in the board namespace on 127.0.0.1:8080 with
/// its data in `data`; its index.
fn start(lab: &mut Lab, name: &str, data: &std::path::Path) -> usize {
    let board = lab.board.clone();
    let data = data.to_str().expect("utf-8").to_string();
    let i = lab.spawn(
        &board,
        name,
        bin(),
        &[
            "daemon",
            "--listen",
            "127.0.0.1:8080",
            "--data",
            &data,
            "--iperf3-port",
            "0",
        ],
    );
    lab.wait_port(&board, "127.0.0.1", 8080);
    i
}

#[test]
fn a_full_disk_after_kill_9_mid_forwarding_run_comes_up_read_only_with_nat_off() {
    let (mut lab, _) = Lab::with_agent(TOKEN);
    let board = lab.board.clone();
    let data = lab.dir().join("data");
    let _fs = Tmpfs::mount(&data, 24);
    let (idx, mut http) = daemon(&mut lab, &board, 8080, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    let r = http.api(
        "POST",
        "/api/forward",
        &json!({"peer": "http://192.0.2.2:5280", "token": TOKEN, "target": PC2_IP,
                "ingress": "eth0", "egress": "eth1", "nat": true, "duration": 60}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().expect("run id");
    let t = Instant::now();
    while ip_forward(&board) != "1" || !our_rules_left(&board) {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "forwarding never came on"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // What the run turned on is in its stored summary (what a restart undoes) before the kill.
    wait_until(
        Duration::from_secs(15),
        "the run's stored forwarding change",
        || !http.get_json(&format!("/api/runs/{id}"))["run"]["summary"]["nat"]["undo"].is_null(),
    );
    // What a dead daemon leaves: a capture file and an import spool. The test keeps them
    // open, so removing them frees nothing: the store still cannot write after they go.
    std::fs::create_dir_all(data.join("captures")).expect("captures dir");
    let stale_capture = data.join("captures/capture-7.pcap");
    let stale_spool = data.join("import-999999-0.part");
    std::fs::write(&stale_capture, vec![7u8; MIB as usize]).expect("capture");
    std::fs::write(&stale_spool, vec![9u8; MIB as usize]).expect("spool");
    let held = (
        std::fs::File::open(&stale_capture).expect("open"),
        std::fs::File::open(&stale_spool).expect("open"),
    );
    lab.kill(idx);
    assert_eq!(ip_forward(&board), "1", "still on after the crash");
    // The history's WAL emptied into the database (this connection stays open, so the WAL
    // file is kept, empty): every write of the next daemon needs a new page. Then the
    // partition is filled.
    let db = rusqlite::Connection::open(data.join("netperfd.sqlite")).expect("db");
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    fill(&data);

    // The next start: up, forwarding off, leftovers gone, read-only said on every page.
    let d2 = start(&mut lab, "daemon2", &data);
    assert_eq!(ip_forward(&board), "0", "ip_forward after the restart");
    assert!(!our_rules_left(&board), "MASQUERADE left after the restart");
    assert!(!stale_capture.exists(), "stale capture removed");
    assert!(!stale_spool.exists(), "stale import spool removed");
    assert!(lab.alive(d2), "daemon exited");
    let (_, log) = lab.output("daemon2");
    assert!(
        log.contains("is restored on the board, but not yet in the stored configuration"),
        "{log}"
    );
    assert!(log.contains("comes up read-only"), "{log}");
    assert!(log.contains("removed 1 capture file(s) (1.05 MB)"), "{log}");
    assert!(
        log.contains("removed 1 import spool file(s) (1.05 MB)"),
        "{log}"
    );
    for page in ["/", "/runs", "/diag"] {
        let r = http.get(page);
        assert_eq!(r.status, 200, "{page}: {}", r.body);
        assert!(
            r.body.contains("id=\"storage-notice\"")
                && r.body
                    .contains("Read-only: netperfd cannot write its history")
                && r.body.contains("database or disk is full")
                && r.body.contains("other files there: fill ")
                && r.body.contains("Delete packet captures"),
            "{page}: {}",
            r.body
        );
    }
    let login = Http::new(Some(&board), &http.base).get("/login");
    assert!(
        login.body.contains("id=\"storage-notice\""),
        "{}",
        login.body
    );
    // The disk budget on the real (full) file system: a capture is refused, 507, saying why.
    let r = http.api(
        "POST",
        "/api/diag/capture",
        &json!({"port": "eth0", "seconds": 1, "max_bytes": 1024}),
    );
    assert_eq!(r.status, 507, "{}", r.body);
    assert!(
        r.body.contains("not enough free space for a capture"),
        "{}",
        r.body
    );

    // Room again: within the retry period read-only ends, the run is aborted.
    drop(held);
    std::fs::remove_file(data.join("fill")).expect("free");
    let t = Instant::now();
    loop {
        let page = http.get("/runs");
        let v = http.get_json(&format!("/api/runs/{id}"));
        if !page.body.contains("storage-notice") && v["run"]["status"] == "aborted" {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "still read-only: {v} {}",
            page.body
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (_, log) = lab.output("daemon2");
    assert!(log.contains("read-only ends"), "{log}");
    // The undone forwarding was stored: one more crash and start leave NAT off.
    lab.kill(d2);
    drop(db);
    start(&mut lab, "daemon3", &data);
    assert_eq!(ip_forward(&board), "0");
    assert!(
        !our_rules_left(&board),
        "a later start re-applied the run's NAT"
    );
    let (_, log) = lab.output("daemon3");
    assert!(!log.contains("read-only"), "{log}");
    assert!(!log.contains("is restored"), "{log}");
}

/// A raw GET of `path` with the session cookie from namespace `ns` that reads only the
/// answer's head and keeps the connection open without reading on (a slow client).
fn slow_get(ns: &str, port: u16, path: &str, cookie: &str) -> (String, std::net::TcpStream) {
    let (p, c) = (path.to_string(), cookie.to_string());
    in_ns(ns, move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        write!(
            s,
            "GET {p} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: netperfd_session={c}\r\n\r\n"
        )
        .expect("send");
        let mut head = vec![0u8; 512];
        let n = s.read(&mut head).expect("head");
        (String::from_utf8_lossy(&head[..n]).to_string(), s)
    })
}

#[test]
fn pcap_downloads_stream_in_bounded_memory_and_at_most_four_at_once() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let port = 8147;
    let (d, mut http) = daemon(&mut lab, &board, port, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    // A run's capture (kept after downloads) filled to the 64 MiB cap by a 3 s TCP test.
    let r = http.api(
        "POST",
        "/api/runs",
        &json!({"host": PC1_IP, "duration": 3, "capture": {"port": "eth0", "seconds": 5,
                "max_packets": 100000, "max_bytes": 64 * MIB, "filter": "tcp and port 5201"}}),
    );
    assert!(r.status < 300, "{}", r.body);
    let run = r.json()["id"].as_i64().expect("run id");
    wait_run(&http, run, Duration::from_secs(30));
    let t = Instant::now();
    let cap = loop {
        let v = http.get_json(&format!("/api/runs/{run}"));
        let c = v["captures"][0].clone();
        if c["state"] == "done" {
            break c;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{v}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let size = cap["bytes"].as_u64().expect("bytes");
    assert!(size > 60 * MIB, "capture of {size} bytes: {cap}");
    let path = format!("/api/diag/capture/{}/pcap", cap["id"]);
    let cookie = http.cookie.clone().expect("cookie");
    let base = vm_hwm_kib(lab.pid(d));

    // Four slow clients hold the four places; a fifth is refused with a reason.
    let slow: Vec<_> = (0..4)
        .map(|_| slow_get(&board, port, &path, &cookie))
        .collect();
    for (head, _) in &slow {
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains(&format!("content-length: {size}")), "{head}");
    }
    let r = http.get(&path);
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(
        r.body
            .contains("4 capture downloads are in progress (at most 4 at once)"),
        "{}",
        r.body
    );
    drop(slow);
    // The daemon has let go of the slow downloads (and their slots).
    wait_conns_closed(&board, port, Duration::from_secs(10));

    // 10 whole downloads at once: each one the whole file or a 503; memory stays flat.
    let hs: Vec<_> = (0..10)
        .map(|_| {
            let (ns, base_url, p, c) = (
                board.clone(),
                http.base.clone(),
                path.clone(),
                cookie.clone(),
            );
            std::thread::spawn(move || {
                in_ns(&ns, move || {
                    let r = ureq::get(&format!("{base_url}{p}"))
                        .set("Cookie", &format!("netperfd_session={c}"))
                        .call();
                    match r {
                        Ok(r) => {
                            let mut n = 0u64;
                            let mut rd = r.into_reader();
                            let mut buf = vec![0u8; 256 * 1024];
                            loop {
                                match rd.read(&mut buf) {
                                    Ok(0) => break,
                                    Ok(k) => n += k as u64,
                                    Err(e) => panic!("body: {e}"),
                                }
                            }
                            (200u16, n)
                        }
                        Err(ureq::Error::Status(s, _)) => (s, 0),
                        Err(e) => panic!("download: {e}"),
                    }
                })
            })
        })
        .collect();
    let rs: Vec<(u16, u64)> = hs.into_iter().map(|h| h.join().expect("thread")).collect();
    let whole = rs.iter().filter(|r| r.0 == 200).count();
    assert!(whole >= 4, "{rs:?}");
    assert!(
        rs.iter()
            .all(|&(s, n)| (s == 200 && n == size) || (s == 503 && n == 0)),
        "{rs:?}"
    );
    let peak = vm_hwm_kib(lab.pid(d));
    eprintln!(
        "daemon VmHWM {base} KiB before, {peak} KiB after {whole} whole downloads of {size} bytes (10 asked)"
    );
    assert!(
        peak.saturating_sub(base) < 8 * 1024,
        "downloads raised the peak from {base} to {peak} KiB"
    );
}

/// A second session of the same admin (a user of its own for the one-capture-per-user rule).
fn log_in(http: &Http) -> Http {
    let mut h = Http::new(http.ns.as_deref(), &http.base);
    let r = h.form("/login", &[("password", "correct horse")]);
    assert_eq!(r.status, 303, "{}", r.body);
    h.take_cookie(&r);
    h.fetch_csrf();
    h
}

/// Issue 37 items 14 and 4: six users asking at once start exactly 2 captures (the cap), the
/// others get a clear 429; an admin deletes a capture (API and page), its file goes at once.
#[test]
fn concurrent_captures_start_two_at_most_and_an_admin_deletes_them() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let (_, mut http) = daemon(&mut lab, &board, 8148, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    let users: Vec<Http> = (0..6).map(|_| log_in(&http)).collect();
    let gate = std::sync::Arc::new(std::sync::Barrier::new(users.len()));
    let hs: Vec<_> = users
        .into_iter()
        .map(|u| {
            let g = gate.clone();
            std::thread::spawn(move || {
                g.wait();
                u.api(
                    "POST",
                    "/api/diag/capture",
                    &json!({"port": "eth0", "seconds": 3}),
                )
            })
        })
        .collect();
    let rs: Vec<Resp> = hs.into_iter().map(|h| h.join().expect("thread")).collect();
    let created: Vec<i64> = rs
        .iter()
        .filter(|r| r.status == 201)
        .map(|r| r.json()["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(
        created.len(),
        2,
        "{:?}",
        rs.iter().map(|r| (r.status, &r.body)).collect::<Vec<_>>()
    );
    for r in rs.iter().filter(|r| r.status != 201) {
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(r.body.contains("at most 2 at once"), "{}", r.body);
    }
    // Delete one while it runs (API), the other once done (page).
    let file = |id: i64| lab.dir().join(format!("data/captures/capture-{id}.pcap"));
    assert!(file(created[0]).exists());
    let r = http.call("DELETE", &format!("/api/diag/capture/{}", created[0]));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["state"], "removed", "{}", r.body);
    assert_eq!(r.json()["removed"], "deleted", "{}", r.body);
    assert!(!file(created[0]).exists(), "file removed at once");
    let r = http.get(&format!("/api/diag/capture/{}/pcap", created[0]));
    assert_eq!(r.status, 410, "{}", r.body);
    assert!(r.body.contains("removed (deleted)"), "{}", r.body);
    let r = http.call("DELETE", &format!("/api/diag/capture/{}", created[0]));
    assert_eq!(r.status, 410, "{}", r.body);
    let r = http.call("DELETE", "/api/diag/capture/999");
    assert_eq!(r.status, 404, "{}", r.body);
    let t = Instant::now();
    while http.get_json(&format!("/api/diag/capture/{}", created[1]))["state"] == "running" {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(200));
    }
    let page = http.get("/diag");
    let form = format!("action=\"/diag/capture/{}/delete\"", created[1]);
    assert!(page.body.contains(&form), "{}", page.body);
    let r = http.form(
        &format!("/diag/capture/{}/delete", created[1]),
        &[("csrf", &http.csrf)],
    );
    // Post/redirect/get: 303 to the page that says so.
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location, format!("/diag?deleted={}#capture", created[1]));
    let r = http.get(&format!("/diag?deleted={}", created[1]));
    assert!(r.body.contains("id=\"capture-deleted\""), "{}", r.body);
    // A crafted link claims nothing about a capture that never was.
    for q in [
        "deleted=18446744073709551615",
        "capture=18446744073709551615",
        "deleted=x",
    ] {
        let r = http.get(&format!("/diag?{q}"));
        assert_eq!(r.status, 200);
        assert!(
            !r.body.contains("id=\"capture-deleted\"")
                && !r.body.contains("id=\"capture-started\""),
            "{q}"
        );
    }
    assert!(!r.body.contains(&form), "no delete button once removed");
    assert!(!file(created[1]).exists());
    let r = http.form(&format!("/diag/capture/{}/delete", created[1]), &[]);
    assert_eq!(r.status, 403, "CSRF checked: {}", r.body);
    let (_, log) = lab.output("daemon");
    assert!(
        log.contains(&format!(
            "ran diagnostics: deletion of capture {}",
            created[0]
        )),
        "{log}"
    );
}
