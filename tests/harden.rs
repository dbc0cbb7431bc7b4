//! Regression tests of issue 15's hostile-input review: signals with `-J`, SERVER_TERMINATE on
//! shutdown, `--bind-dev` on the server, IPv6 link-local peers, log escaping and per-peer
//! warning limits, idle connections on the payload/sink/source ports, API token scopes and
//! the API's extractor errors.

mod common;
use common::http::{daemon, set_up};
use common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).expect("kill");
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Some(st.code().unwrap_or(-1)),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

fn wait_listen(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stock `iperf3 -s` on a free loopback port.
fn stock_server() -> (Child, u16) {
    let port = free_port();
    let c = Command::new("iperf3")
        .args(["-s", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 -s");
    wait_listen(port);
    (c, port)
}

#[test]
fn json_client_stopped_by_sigterm_or_sighup_prints_one_error_document() {
    use nix::sys::signal::Signal;
    let (mut srv, port) = stock_server();
    for sig in [Signal::SIGTERM, Signal::SIGHUP] {
        let mut c = Command::new(bin())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "20", "-J"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("client");
        // The signal comes mid-test: a duration into the 20 s test.
        std::thread::sleep(Duration::from_millis(2000));
        signal(&c, sig);
        let code = wait_exit(&mut c, Duration::from_secs(10));
        let mut out = String::new();
        c.stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut out)
            .expect("read");
        assert_eq!(code, Some(1), "{sig}: exit code; stdout:\n{out}");
        let v = json(&out, "netperfd -J output");
        let err = v["error"].as_str().unwrap_or_default();
        assert!(err.contains("interrupt"), "{sig}: error is '{err}'");
        // Stock iperf3 needs a moment before it takes the next client.
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = srv.kill();
    let _ = srv.wait();
}

#[test]
fn server_shutdown_sends_server_terminate_to_stock_clients() {
    use nix::sys::signal::Signal;
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        let port = free_port();
        let mut srv = Command::new(bin())
            .args(["-s", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("server");
        wait_listen(port);
        let mut cli = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "20"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("iperf3 -c");
        // The signal comes mid-test: a duration into the 20 s test.
        std::thread::sleep(Duration::from_millis(2500));
        signal(&srv, sig);
        assert!(
            wait_exit(&mut srv, Duration::from_secs(10)).is_some(),
            "server did not stop"
        );
        let code = wait_exit(&mut cli, Duration::from_secs(10));
        let mut text = String::new();
        let _ = cli.stdout.take().expect("o").read_to_string(&mut text);
        let _ = cli.stderr.take().expect("e").read_to_string(&mut text);
        assert_ne!(code, Some(0), "{text}");
        assert!(
            text.contains("the server has terminated"),
            "{sig}: stock client said:\n{text}"
        );
    }
}

/// Issue 21, item 9: `netperfd -s -J` stopped by SIGTERM, SIGHUP or SIGINT behaves like stock
/// iperf3 3.19+ (iperf_got_sigend → iperf_signormalexit): one JSON document whose `error` is
/// "interrupt - the server has terminated by signal Terminated(15)", exit code 0 — idle (an
/// empty document) or mid-test (the test's document so far). It used to print nothing when
/// idle and "unknown control message (byte 0x10)" mid-test.
#[test]
fn json_server_stopped_by_a_signal_prints_the_stock_3_19_error_document() {
    use nix::sys::signal::Signal;
    let start = || {
        let port = free_port();
        let srv = Command::new(bin())
            .args(["-s", "-p", &port.to_string(), "-J"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("server");
        wait_listen(port);
        (srv, port)
    };
    let stop = |mut srv: Child, sig: Signal| -> (Option<i32>, String) {
        signal(&srv, sig);
        let code = wait_exit(&mut srv, Duration::from_secs(10));
        let mut out = String::new();
        let _ = srv.stdout.take().expect("stdout").read_to_string(&mut out);
        (code, out)
    };
    for (sig, text) in [
        (Signal::SIGTERM, "Terminated(15)"),
        (Signal::SIGHUP, "Hangup(1)"),
        (Signal::SIGINT, "Interrupt(2)"),
    ] {
        let (srv, _) = start();
        // A margin, not an event: the server's signal handlers come with its loop (not with
        // its socket) and it is done with wait_listen's probe connection; nothing outside
        // shows either.
        std::thread::sleep(Duration::from_millis(300));
        let (code, out) = stop(srv, sig);
        assert_eq!(code, Some(0), "{sig} idle: exit code; stdout:\n{out}");
        let v = json(&out, "netperfd -s -J output");
        assert_eq!(
            v["error"],
            format!("interrupt - the server has terminated by signal {text}"),
            "{sig} idle"
        );
        assert_eq!(v["intervals"], json!([]));
    }
    // Mid-test: the running test's document, with what was measured, carries the error.
    let (srv, port) = start();
    let mut cli = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "20"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 -c");
    // The signal comes mid-test, with intervals measured: a duration into the 20 s test.
    std::thread::sleep(Duration::from_millis(2500));
    let (code, out) = stop(srv, Signal::SIGTERM);
    let _ = wait_exit(&mut cli, Duration::from_secs(10));
    assert_eq!(code, Some(0), "mid-test: exit code; stdout:\n{out}");
    let v = json(&out, "netperfd -s -J output mid-test");
    assert_eq!(
        v["error"],
        "interrupt - the server has terminated by signal Terminated(15)"
    );
    let intervals = v["intervals"].as_array().map(|a| a.len()).unwrap_or(0);
    assert!(intervals >= 2, "{intervals} intervals in {out}");
    assert!(num(&v, "/end/sum_received/bytes") > 1e6, "{out}");
}

#[test]
fn server_bind_dev_missing_device_is_an_error() {
    let port = free_port().to_string();
    let mut srv = Command::new(bin())
        .args(["-s", "-p", &port, "--bind-dev", "nosuchdev0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
    let code = wait_exit(&mut srv, Duration::from_secs(10));
    let mut text = String::new();
    let _ = srv.stdout.take().expect("o").read_to_string(&mut text);
    let _ = srv.stderr.take().expect("e").read_to_string(&mut text);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("No such device"), "{text}");
}

#[test]
fn server_bind_dev_listens_only_on_that_interface() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    lab.spawn(
        &board,
        "srv",
        bin(),
        &["-s", "-p", "5201", "--bind-dev", "eth0"],
    );
    lab.wait_port(&board, BOARD_IP, 5201);
    // Through eth0: served.
    let (code, out, err) = lab.run(
        &pc1,
        "via-eth0",
        "iperf3",
        &["-c", BOARD_IP, "-t", "1", "-J"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(num(&json(&out, "iperf3 -J"), "/end/sum_received/bytes") > 0.0);
    // Through lo (another interface): refused.
    let (code, out, err) = lab.run(
        &board,
        "via-lo",
        "iperf3",
        &["-c", "127.0.0.1", "-t", "1"],
        Duration::from_secs(20),
    );
    assert_ne!(code, Some(0), "a test over lo passed:\n{out}{err}");
    assert!(
        format!("{out}{err}").contains("Connection refused"),
        "{out}{err}"
    );
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
fn link_local_peers_with_and_without_an_interface() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    ip(&[
        "-n",
        &board,
        "addr",
        "add",
        "fe80::b1/64",
        "dev",
        "eth0",
        "nodad",
    ]);
    ip(&[
        "-n",
        &pc1,
        "addr",
        "add",
        "fe80::c1/64",
        "dev",
        "eth0",
        "nodad",
    ]);
    lab.spawn(&pc1, "stock", "iperf3", &["-s", "-p", "5201"]);
    lab.wait_port(&pc1, "::", 5201);
    for (name, extra) in [
        ("tcp", &[][..]),
        ("reverse", &["-R"][..]),
        ("udp", &["-u", "-b", "10M"][..]),
    ] {
        let mut args = vec!["-c", "fe80::c1%eth0", "-t", "1", "-J"];
        args.extend_from_slice(extra);
        let (code, out, err) = lab.run(&board, name, bin(), &args, Duration::from_secs(30));
        assert_eq!(code, Some(0), "{name}: {out}{err}");
        let v = json(&out, "netperfd -J");
        let bytes = if name == "udp" {
            num(&v, "/end/sum/bytes")
        } else {
            num(&v, "/end/sum_received/bytes")
        };
        assert!(bytes > 0.0, "{name}: {v}");
        // A gap between back-to-back tests to the stock server (a duration, not an event).
        std::thread::sleep(Duration::from_millis(300));
    }
    let (code, out, err) = lab.run(
        &board,
        "noscope",
        bin(),
        &["-c", "fe80::c1", "-t", "1"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        format!("{out}{err}").contains("fe80::c1%INTERFACE"),
        "{out}{err}"
    );
}

const COOKIE: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz234567abcd\0";

fn framed(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

#[test]
fn client_text_cannot_forge_log_lines_and_warnings_are_limited_per_peer() {
    let port = free_port();
    let log = std::env::temp_dir().join(format!("netperfd-harden-{port}.log"));
    let mut srv = Command::new(bin())
        .args(["-s", "-p", &port.to_string()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("server");
    wait_listen(port);
    // A congestion name with a newline and a terminal escape: the server logs that it cannot
    // set it; the log must stay one line per event.
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("t");
    c.write_all(COOKIE).expect("cookie");
    let mut b = [0u8; 1];
    c.read_exact(&mut b).expect("state");
    let params = br#"{"tcp":true,"time":1,"parallel":1,"len":131072,"congestion":"nosuchcc\n2026-01-01T00:00:00Z  WARN FORGED\u001b[2J"}"#;
    c.write_all(&framed(params)).expect("params");
    c.read_exact(&mut b).expect("state");
    assert_eq!(b[0], 10, "expected CREATE_STREAMS");
    let mut d = TcpStream::connect(("127.0.0.1", port)).expect("stream");
    d.write_all(COOKIE).expect("cookie");
    // The stream is taken and the congestion name tried (and logged) before both go.
    wait_until(
        Duration::from_secs(10),
        "the server's word on the congestion name",
        || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("nosuchcc")
        },
    );
    drop(d);
    drop(c);
    // Then 60 sessions with an impossible params length from the same address.
    for _ in 0..60 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("t");
        let _ = s.write_all(COOKIE);
        let _ = s.write_all(&[0xFF; 4]);
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    }
    // A margin, not an event: the warnings are capped, so the log is read after late ones
    // could have come.
    std::thread::sleep(Duration::from_millis(500));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = srv.kill();
    let _ = srv.wait();
    let _ = std::fs::remove_file(&log);
    assert!(
        text.contains("nosuchcc\\n"),
        "congestion not logged escaped:\n{text}"
    );
    assert!(!text.contains('\x1b'), "raw escape in the log:\n{text}");
    for line in text.lines() {
        assert!(!line.starts_with("2026-01-01"), "forged line:\n{text}");
    }
    // At most 10 warnings a minute about one peer (the 60 bad sessions alone would be 60).
    let warns = text
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("peer="))
        .count();
    assert!(
        warns <= 10,
        "{warns} WARN lines about one peer for 62 connections:\n{text}"
    );
}

/// The daemon's payload (8088), sink (5009) and source (5019) services in the board
/// namespace; pc1 opens idle connections, the board's loopback must still be served.
#[test]
fn idle_connections_from_one_address_do_not_lock_out_another() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let (_, _http) = daemon(&mut lab, &board, 8082, &["--iperf3-port", "0"]);
    for port in [8088u16, 5009, 5019] {
        lab.wait_port(&board, BOARD_IP, port);
    }
    // 70 idle connections to each service from pc1 (more than any service's total cap).
    let idle: Vec<TcpStream> = in_ns(&pc1, || {
        let mut v = Vec::new();
        for port in [8088u16, 5009, 5019] {
            for _ in 0..70 {
                if let Ok(s) = TcpStream::connect((BOARD_IP, port)) {
                    v.push(s);
                }
            }
        }
        v
    });
    assert!(idle.len() >= 150, "only {} connections opened", idle.len());
    // A margin, not an event: the servers take up the idle connections (nothing outside
    // shows they hold them all).
    std::thread::sleep(Duration::from_millis(300));
    // Another address (the board's own) is served at once.
    let t = Instant::now();
    let (status, body, sink_ok, source_got) = in_ns(&board, || {
        let mut s = TcpStream::connect(("127.0.0.1", 8088)).expect("payload");
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("t");
        s.write_all(b"GET /payload/1K HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            .expect("req");
        let mut r = Vec::new();
        let _ = s.read_to_end(&mut r);
        let text = String::from_utf8_lossy(&r).to_string();
        let status = text.split(' ').nth(1).unwrap_or("").to_string();
        let body = r.len();
        let mut k = TcpStream::connect(("127.0.0.1", 5009)).expect("sink");
        let sink_ok = k.write_all(&[0u8; 65536]).is_ok();
        let mut src = TcpStream::connect(("127.0.0.1", 5019)).expect("source");
        src.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("t");
        let mut buf = vec![0u8; 65536];
        let got = src.read(&mut buf).unwrap_or(0);
        (status, body, sink_ok, got)
    });
    assert_eq!(status, "200", "payload answer");
    assert!(body > 1024, "payload body {body} bytes");
    assert!(sink_ok, "sink refused");
    assert!(source_got > 0, "source sent nothing");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "served after {:?}",
        t.elapsed()
    );
    // The idle payload connections are closed by the head timeout (10 s), not after 30 s.
    let mut payload_idle = idle.into_iter().take(70).collect::<Vec<_>>();
    let t = Instant::now();
    for s in &mut payload_idle {
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("t");
        let mut b = [0u8; 512];
        while matches!(s.read(&mut b), Ok(n) if n > 0) {}
    }
    assert!(
        t.elapsed() < Duration::from_secs(13),
        "idle payload connections held for {:?}",
        t.elapsed()
    );
}

/// API tokens may run tests and read history, not manage tokens or the password; the
/// bearer scheme is case-insensitive; extractor errors and bad bodies are JSON errors.
#[test]
fn api_tokens_scopes_and_json_errors() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let (_, mut http) = daemon(&mut lab, &board, 8083, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    let csrf = http.csrf.clone();
    let r = http.form(
        "/settings/tokens",
        &[("csrf", &csrf), ("name", "ci"), ("scope", "run")],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The new token is shown once on the page.
    let i = r.body.find("id=\"new-token\">").expect("token on the page") + 15;
    let token = r.body[i..]
        .split('<')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(token.len() >= 16, "token '{token}'");
    let mut anon = http.clone();
    anon.cookie = None;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let r = anon.req(
            "GET",
            "/api/runs",
            vec![("Authorization".into(), format!("{scheme} {token}"))],
            None,
        );
        assert_eq!(r.status, 200, "{scheme}: {}", r.body);
    }
    let bearer = vec![("Authorization".to_string(), format!("Bearer {token}"))];
    let form = |path: &str, body: &str| {
        anon.req(
            "POST",
            path,
            bearer.clone(),
            Some(("application/x-www-form-urlencoded".into(), body.into())),
        )
    };
    let r = form("/settings/tokens", "name=child");
    assert_eq!(r.status, 403, "a token made a token: {}", r.body);
    let r = form("/settings/tokens/1/delete", "");
    assert_eq!(r.status, 403, "{}", r.body);
    let r = form(
        "/settings/password",
        "current=correct+horse&password=new+password1&confirm=new+password1",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // The session still logs in with the old password: nothing changed.
    let r = http.form("/login", &[("password", "correct horse")]);
    assert_eq!(r.status, 303, "{}", r.body);

    // Extractor errors and refused bodies: JSON errors with 400.
    for path in ["/api/runs?limit=-1", "/api/runs/abc"] {
        let r = anon.req("GET", path, bearer.clone(), None);
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        let v: Value = r.json();
        assert!(
            v["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{path}: {v}"
        );
    }
    for (body, needle) in [
        (json!({"host": "192.0.2.2", "duraton": 5}), "duraton"),
        (json!({"host": "192.0.2.2", "bitrate": "100T"}), "100G"),
    ] {
        let r = anon.json("POST", "/api/runs", bearer.clone(), &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let v: Value = r.json();
        assert!(
            v["error"].as_str().unwrap_or_default().contains(needle),
            "{body}: {v}"
        );
    }
    // A link-local peer with its interface is accepted by the API (the run starts and fails:
    // nothing listens there).
    let r = anon.json(
        "POST",
        "/api/runs",
        bearer.clone(),
        &json!({"host": "fe80::99%eth0", "duration": 1}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
}

/// 2,000 anonymous payload requests with distinct User-Agents from one peer in 15 s add at
/// most 50 runs (5 a minute per peer and service, the rest folded into one run), and sink
/// connections beyond the budget are counted in a folded run.
#[test]
fn anonymous_requests_add_a_bounded_number_of_runs() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let (_, mut http) = daemon(&mut lab, &board, 8084, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, 8088);
    let count = |http: &common::http::Http| -> usize {
        http.get_json("/api/runs?limit=100000")
            .as_array()
            .map(|a| a.len())
            .unwrap_or(0)
    };
    let before = count(&http);
    let sent = in_ns(&pc1, || {
        let t = Instant::now();
        let mut ok = 0;
        for i in 0..2000 {
            let Ok(mut s) = TcpStream::connect((BOARD_IP, 8088)) else {
                continue;
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let req = format!(
                "GET /payload/1K HTTP/1.1\r\nHost: b\r\nUser-Agent: loop-{i}\r\nConnection: close\r\n\r\n"
            );
            if s.write_all(req.as_bytes()).is_ok() {
                let mut r = Vec::new();
                let _ = s.read_to_end(&mut r);
                if r.starts_with(b"HTTP/1.1 200") {
                    ok += 1;
                }
            }
            if t.elapsed() > Duration::from_secs(15) {
                break;
            }
        }
        ok
    });
    assert!(sent >= 500, "only {sent} requests served");
    // 20 sink connections, one after another.
    in_ns(&pc1, || {
        for _ in 0..20 {
            if let Ok(mut s) = TcpStream::connect((BOARD_IP, 5009)) {
                let _ = s.write_all(&[0u8; 1000]);
                let _ = s.shutdown(std::net::Shutdown::Write);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut b = Vec::new();
                let _ = s.read_to_end(&mut b);
            }
        }
    });
    // A duration, not an event: at most so many runs are recorded, so the count is read after
    // late ones could have come.
    std::thread::sleep(Duration::from_secs(3));
    let added = count(&http) - before;
    eprintln!("{sent} payload requests and 20 sink connections added {added} runs");
    assert!(added <= 50, "{added} runs for {sent} requests");
    let settings = http.get("/settings").body;
    assert!(
        settings.contains("At most 20000 runs and 512 MiB of history"),
        "retention not shown in Settings"
    );
    let runs = http.get_json("/api/runs?limit=100000");
    let folded_sink: i64 = runs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["kind"] == "tcp-sink")
        .filter_map(|r| {
            r["params"]["folded_connections"].as_i64().or_else(|| {
                r["params_json"]
                    .as_str()
                    .and_then(|p| serde_json::from_str::<Value>(p).ok())
                    .and_then(|p| p["folded_connections"].as_i64())
            })
        })
        .sum();
    assert_eq!(folded_sink, 15, "sink connections beyond 5 folded");
    let sink_runs = runs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["kind"] == "tcp-sink")
        .count();
    assert_eq!(sink_runs, 6, "5 sink runs and one folded run");
}

/// Retention caps are editable (API and Settings) within bounds; a bad value changes
/// nothing; lowering the cap prunes the oldest unpinned runs at once and a pinned run stays.
#[test]
fn retention_caps_are_editable_and_pinned_runs_stay() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let (_, mut http) = daemon(&mut lab, &board, 8085, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    // 103 runs that fail at once: nothing listens on the PC's port 9.
    let mut ids = Vec::new();
    for _ in 0..103 {
        let r = http.api(
            "POST",
            "/api/runs",
            &json!({"host": PC1_IP, "port": 9, "duration": 1}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(r.json()["id"].as_i64().expect("run id"));
    }
    for &id in &ids {
        common::http::wait_run(&http, id, Duration::from_secs(20));
    }
    let count = |http: &common::http::Http| {
        http.get_json("/api/runs?limit=100000")
            .as_array()
            .map(|a| a.len())
            .unwrap_or(0)
    };
    assert_eq!(count(&http), 103);

    // Pin the oldest run (API) and the second oldest (page button), then unpin the second.
    let r = http.api(
        "POST",
        &format!("/api/runs/{}/pin", ids[0]),
        &json!({"pinned": true}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["pinned"], true);
    assert_eq!(
        http.get_json(&format!("/api/runs/{}", ids[0]))["pinned"],
        true
    );
    let csrf = http.csrf.clone();
    let r = http.form(&format!("/runs/{}/pin", ids[1]), &[("csrf", &csrf)]);
    assert_eq!(r.status, 303, "{}", r.body);
    let page = http.get(&format!("/runs/{}", ids[1])).body;
    assert!(
        page.contains("id=\"unpin\""),
        "no Unpin button on a pinned run"
    );
    let r = http.form(&format!("/runs/{}/unpin", ids[1]), &[("csrf", &csrf)]);
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(
        http.get_json(&format!("/api/runs/{}", ids[1]))["pinned"],
        false
    );
    let r = http.api("POST", "/api/runs/999999/pin", &json!({"pinned": true}));
    assert_eq!(r.status, 404, "{}", r.body);

    // Bad caps: refused with the reason, nothing changed or pruned.
    for (body, needle) in [
        (json!({"max_runs": 5, "max_bytes": 512u64 << 20}), "100 to"),
        (json!({"max_runs": 100, "max_bytes": 1000}), "whole MiB"),
        (json!({"max_runs": 100, "max_bytes": 1u64 << 20}), "16 to"),
        (json!({"max_runs": 100}), "max_bytes"),
    ] {
        let r = http.api("PUT", "/api/settings/retention", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(needle), "{body}: {}", r.body);
    }
    let r = http.form(
        "/settings/retention",
        &[("csrf", &csrf), ("max_runs", "many"), ("max_mib", "512")],
    );
    assert_eq!(r.status, 200);
    assert!(
        r.body
            .contains("runs kept must be a whole number, got &#39;many&#39;"),
        "{}",
        r.body
    );
    let caps = http.get_json("/api/settings/retention");
    assert_eq!(caps["max_runs"], 20000);
    assert_eq!(count(&http), 103);

    // Cap 100 runs: the three oldest unpinned runs go, the pinned oldest stays.
    let r = http.api(
        "PUT",
        "/api/settings/retention",
        &json!({"max_runs": 100, "max_bytes": 512u64 << 20}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["pruned"], 3);
    assert_eq!(count(&http), 100);
    assert_eq!(http.get(&format!("/api/runs/{}", ids[0])).status, 200);
    for &gone in &ids[1..4] {
        assert_eq!(http.get(&format!("/api/runs/{gone}")).status, 404, "{gone}");
    }
    assert_eq!(http.get(&format!("/api/runs/{}", ids[4])).status, 200);
    // The Settings form shows and saves the caps.
    let r = http.form(
        "/settings/retention",
        &[("csrf", &csrf), ("max_runs", "5000"), ("max_mib", "256")],
    );
    assert!(
        r.body
            .contains("History retention saved: at most 5000 runs and 256 MiB; 0 runs pruned now."),
        "{}",
        r.body
    );
    assert!(r.body.contains("name=\"max_runs\" value=\"5000\""));
    assert_eq!(
        http.get_json("/api/settings/retention")["max_bytes"],
        256u64 << 20
    );
}
