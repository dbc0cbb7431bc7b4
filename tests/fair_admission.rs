//! Issue 21, item 1: fair admission on the payload server, the TCP sink and the TCP source.
//! Idle connections from a few addresses (127.0.0.x in the board namespace: each a distinct
//! client address) must not lock out another address; idle ones are evicted for it, and
//! closed by their deadlines anyway (a slow reader of the source too).

mod common;
use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

const HTTP_PORT: u16 = 8088;
const SINK_PORT: u16 = 5009;
const SOURCE_PORT: u16 = 5019;

/// The daemon in the board namespace with its default service ports; the data directory.
fn daemon(lab: &mut Lab) -> String {
    let data = lab.dir().join("data");
    let cfg = lab.dir().join("netperfd.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:8080\"\ndata_dir = \"{}\"\niperf3_ports = []\n",
            data.display()
        ),
    )
    .expect("config");
    let board = lab.board.clone();
    lab.spawn(
        &board,
        "daemon",
        bin(),
        &["daemon", "--config", cfg.to_str().expect("path")],
    );
    for p in [8080, HTTP_PORT, SINK_PORT, SOURCE_PORT] {
        lab.wait_port(&board, BOARD_IP, p);
    }
    data.display().to_string()
}

/// Connect from source address `from` to 127.0.0.1:`port` (call inside the namespace).
fn connect_from(from: &str, port: u16) -> TcpStream {
    let s =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    // A small receive buffer: a connection that does not read stalls the source sooner.
    let _ = s.set_recv_buffer_size(4096);
    let src: std::net::SocketAddr = format!("{from}:0").parse().expect("source");
    s.bind(&src.into()).expect("bind source");
    let dst: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("dest");
    s.connect(&dst.into()).expect("connect");
    s.into()
}

/// Whether the server closed or answered `s` within `wait` (without us sending anything):
/// `Some(bytes it sent)` when closed or answered, `None` when it still holds it silently.
fn answered(s: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(wait)).expect("timeout");
    let mut b = [0u8; 512];
    match s.read(&mut b) {
        Ok(n) => Some(b[..n].to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => None,
        Err(_) => Some(Vec::new()),
    }
}

/// `n` idle connections to `port` from each of `addrs`: (held, refused). A held source
/// connection is one the server writes to; any other held connection gets nothing.
fn idle_from(addrs: &[String], port: u16, n: usize) -> (Vec<TcpStream>, usize) {
    let source = port == SOURCE_PORT;
    let mut held = Vec::new();
    let mut refused = 0;
    for a in addrs {
        let mut mine = Vec::new();
        for _ in 0..n {
            mine.push(connect_from(a, port));
        }
        std::thread::sleep(Duration::from_millis(200));
        for mut s in mine {
            // A source connection starts writing once its run is recorded (slow on a loaded
            // machine): wait for its first bytes or its close.
            let wait = Duration::from_millis(if source { 5000 } else { 50 });
            match answered(&mut s, wait) {
                None if !source => held.push(s),
                Some(b) if source && !b.is_empty() => held.push(s),
                _ => refused += 1,
            }
        }
    }
    (held, refused)
}

fn addrs(range: std::ops::Range<u8>) -> Vec<String> {
    range.map(|i| format!("127.0.0.{i}")).collect()
}

fn runs(lab: &mut Lab, data: &str) -> Vec<Value> {
    let board = lab.board.clone();
    let (code, out, err) = lab.run(
        &board,
        "runs-list",
        bin(),
        &["runs", "--data", data, "--json", "list", "--limit", "500"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    match json(&out, "runs list") {
        Value::Array(a) => a,
        v => panic!("not a list: {v}"),
    }
}

#[test]
fn idle_connections_from_several_addresses_do_not_lock_the_payload_sink_or_source() {
    let mut lab = Lab::new();
    let data = daemon(&mut lab);
    let board = lab.board.clone();

    let (held_http, held_raw, got) = in_ns(&board, || {
        // Payload: 4 addresses x 16 idle connections: 8 each wait for a request (the
        // per-address cap of waiting connections), 8 each get 503 at once.
        let (mut held_http, refused) = idle_from(&addrs(10..14), HTTP_PORT, 16);
        assert_eq!(
            (held_http.len(), refused),
            (32, 32),
            "payload: held, refused"
        );
        // 4 more addresses x 8: the 64 slots are full of idle connections.
        let (more, refused) = idle_from(&addrs(14..18), HTTP_PORT, 8);
        assert_eq!((more.len(), refused), (32, 0));
        held_http.extend(more);
        // Sink: 4 addresses x 8 connections that never send: 4 each held, 4 each closed.
        let (mut held_raw, refused) = idle_from(&addrs(10..14), SINK_PORT, 8);
        assert_eq!((held_raw.len(), refused), (16, 16), "sink: held, refused");
        // Source: 4 addresses x 8 connections that never read: all 32 slots taken.
        let src_opened = Instant::now();
        let (src, refused) = idle_from(&addrs(10..14), SOURCE_PORT, 8);
        assert_eq!((src.len(), refused), (32, 0), "source: held, refused");
        held_raw.extend(src);
        // The non-readers stall (a few s): then they count as idle (a duration of the
        // server's rule, not an event).
        std::thread::sleep(Duration::from_secs(4));

        // A new address is served by all three at once.
        let t = Instant::now();
        let mut s = connect_from("127.0.0.30", HTTP_PORT);
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("t");
        s.write_all(b"GET /payload/1M HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            .expect("request");
        let mut r = Vec::new();
        let _ = s.read_to_end(&mut r);
        let head_end = r
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| i + 4)
            .unwrap_or(r.len());
        let status = String::from_utf8_lossy(&r[..head_end.min(12)]).to_string();
        let body = r.len() - head_end;

        let mut k = connect_from("127.0.0.30", SINK_PORT);
        k.write_all(&vec![0u8; 1 << 20]).expect("sink took 1 MiB");
        k.shutdown(Shutdown::Write).expect("shutdown");
        k.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("t");
        let mut rest = Vec::new();
        let sink_closed_cleanly = k.read_to_end(&mut rest).is_ok();

        let mut src = connect_from("127.0.0.30", SOURCE_PORT);
        src.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("t");
        let mut buf = vec![0u8; 1 << 20];
        src.read_exact(&mut buf).expect("source sent 1 MiB");
        drop(src);
        let took = t.elapsed();
        (
            held_http,
            held_raw,
            (status, body, sink_closed_cleanly, took, src_opened),
        )
    });
    let (status, body, sink_ok, took, src_opened) = got;
    assert_eq!(status, "HTTP/1.1 200", "payload status");
    assert_eq!(body, 1_000_000, "payload body bytes");
    assert!(sink_ok, "sink connection closed cleanly after 1 MiB");
    assert!(took < Duration::from_secs(5), "served after {took:?}");

    // The sink recorded the newcomer's 1 MiB.
    let t = Instant::now();
    loop {
        let all = runs(&mut lab, &data);
        let sink = all.iter().find(|r| {
            r["kind"] == "tcp-sink" && r["peer_host"] == "127.0.0.30" && r["status"] != "running"
        });
        if let Some(r) = sink {
            assert_eq!(r["bytes"].as_u64(), Some(1 << 20), "{r:#}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no sink run of 127.0.0.30"
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // Every idle connection is closed by its deadline: the payload and sink ones by the
    // 10 s head timeout, the non-reading source ones by the slow-reader window (the second
    // 10 s window moves nothing): 21 s after each was accepted at the latest (two windows
    // and a 1 s check tick). Read 24 s after the source connections were opened: 3 s for a
    // loaded machine to accept them (CI once saw 111 of 112 closed at 22 s, with windows that
    // drifted by a late check each). Reading earlier would make the non-readers readers.
    let at = src_opened + Duration::from_secs(24);
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
    let mut closed = 0;
    for mut s in held_http.into_iter().chain(held_raw) {
        s.set_read_timeout(Some(Duration::from_secs(2))).expect("t");
        let mut b = vec![0u8; 1 << 16];
        let mut got = 0usize;
        let eof = loop {
            match s.read(&mut b) {
                Ok(0) => break true,
                Ok(n) => got += n,
                Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
            }
            // What was still queued in the buffers; an open source would go on for ever.
            if got > 16 << 20 {
                break false;
            }
        };
        if eof {
            closed += 1;
        }
    }
    assert_eq!(closed, 64 + 48, "idle connections closed 24 s on");
}

/// Issue 21, item 7: one address with 1,100 idle connections to the web UI cut its
/// availability to 40–54 % for everyone. Now one address holds at most 128 (the next are
/// closed at once) and another address is served while they idle.
#[test]
fn idle_web_connections_from_one_address_are_capped() {
    let mut lab = Lab::new();
    let _data = daemon(&mut lab);
    let board = lab.board.clone();
    let (held, closed, status) = in_ns(&board, || {
        let mut conns: Vec<TcpStream> = (0..300).map(|_| connect_from("127.0.0.2", 8080)).collect();
        // A margin, not an event: the daemon closes the connections over the cap (nothing
        // outside shows it has seen the last one).
        std::thread::sleep(Duration::from_millis(500));
        let (mut held, mut closed) = (0, 0);
        for s in &mut conns {
            match answered(s, Duration::from_millis(20)) {
                None => held += 1,
                Some(_) => closed += 1,
            }
        }
        // Another address, while the 128 idle: answered at once.
        let mut s = connect_from("127.0.0.3", 8080);
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("t");
        s.write_all(b"GET /login HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            .expect("request");
        let mut r = Vec::new();
        let _ = s.read_to_end(&mut r);
        let status = String::from_utf8_lossy(&r[..r.len().min(12)]).to_string();
        drop(conns);
        (held, closed, status)
    });
    assert_eq!(
        (held, closed),
        (128, 172),
        "idle web connections held, closed"
    );
    // A fresh board sends /login to the first-run setup.
    assert_eq!(status, "HTTP/1.1 303", "the other address's answer");
}

/// Issue 21, item 7: 2,000 live-update streams hung the UI. One address may follow a run
/// with at most 8 streams (the 9th gets 429 with the reason), another address still can.
#[test]
fn live_update_streams_are_capped_per_address() {
    use common::http::{daemon as web_daemon, set_up};
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let (_, mut http) = web_daemon(&mut lab, &board, 8134, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    lab.wait_port(&board, BOARD_IP, SINK_PORT);
    // A sink connection that stays open keeps its run running.
    let sink = in_ns(&board, || {
        let mut k = connect_from("127.0.0.5", SINK_PORT);
        k.write_all(&vec![0u8; 65536]).expect("sink");
        k
    });
    let t = Instant::now();
    let id = loop {
        let runs = http.get_json("/api/runs");
        let found = runs.as_array().and_then(|a| {
            a.iter()
                .find(|r| r["kind"] == "tcp-sink" && r["status"] == "running")
                .and_then(|r| r["id"].as_i64())
        });
        if let Some(id) = found {
            break id;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no running sink run: {runs}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let cookie = http.cookie.clone().expect("session cookie");
    let (statuses, other, body) = in_ns(&board, move || {
        let open = |from: &str| {
            let mut s = connect_from(from, 8134);
            s.set_read_timeout(Some(Duration::from_secs(5))).expect("t");
            let req = format!(
                "GET /api/runs/{id}/events HTTP/1.1\r\nHost: b\r\nCookie: netperfd_session={cookie}\r\n\r\n"
            );
            s.write_all(req.as_bytes()).expect("request");
            let mut b = vec![0u8; 4096];
            let n = s.read(&mut b).unwrap_or(0);
            (s, String::from_utf8_lossy(&b[..n]).to_string())
        };
        let mut held = Vec::new();
        let mut statuses = Vec::new();
        let mut last = String::new();
        for _ in 0..9 {
            let (s, text) = open("127.0.0.2");
            statuses.push(text.get(..12).unwrap_or("").to_string());
            last = text;
            held.push(s);
        }
        let (_s, other) = open("127.0.0.3");
        (statuses, other.get(..12).unwrap_or("").to_string(), last)
    });
    drop(sink);
    assert_eq!(statuses[..8], vec!["HTTP/1.1 200".to_string(); 8][..]);
    assert_eq!(statuses[8], "HTTP/1.1 429", "the 9th stream: {body}");
    assert!(
        body.contains("too many live-update streams from this address (at most 8)"),
        "{body}"
    );
    assert_eq!(other, "HTTP/1.1 200", "another address");
}
