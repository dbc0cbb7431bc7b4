//! UDP against stock iperf3 in network namespaces, both directions, for the flags of the UDP
//! issue; real loss injected with nftables (30 % → 30 ± 2 % on both ends); reordering,
//! duplicates and jitter produced by a hand-made iperf3 client so the server's accounting can be
//! checked against exact values; bad sizes refused before anything is sent.

mod common;
use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

const T: Duration = Duration::from_secs(40);

fn ours_to_stock(flags: &[&str]) -> (Value, Value) {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let srv = lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let mut args = vec!["-c", PC1_IP, "-u", "-J"];
    args.extend_from_slice(flags);
    let (code, out, err) = lab.run(&board, "netperfd-c", bin(), &args, T);
    assert_eq!(code, Some(0), "netperfd -u {flags:?}: {err}\n{out}");
    assert_eq!(
        lab.wait(srv, Duration::from_secs(10)),
        Some(0),
        "stock iperf3 -s failed"
    );
    let (sout, _) = lab.output("iperf3-s");
    (json(&out, "netperfd -J"), json(&sout, "iperf3 -s -J"))
}

fn stock_to_ours(flags: &[&str]) -> (Value, Value) {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let srv = lab.spawn(&board, "netperfd-s", bin(), &["-s", "-1", "-J"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let mut args = vec!["-c", BOARD_IP, "-u", "-J"];
    args.extend_from_slice(flags);
    let (code, out, err) = lab.run(&pc1, "iperf3-c", "iperf3", &args, T);
    assert_eq!(code, Some(0), "stock iperf3 -u {flags:?}: {err}\n{out}");
    assert_eq!(
        lab.wait(srv, Duration::from_secs(10)),
        Some(0),
        "netperfd -s -1 failed"
    );
    let (sout, serr) = lab.output("netperfd-s");
    assert!(!serr.contains("panicked"), "{serr}");
    (json(&out, "iperf3 -c -J"), json(&sout, "netperfd -s -J"))
}

/// Common checks on a client's UDP -J: datagrams sent = datagrams the receiver expected, loss
/// well under 1 % on an idle veth, no NaN.
fn check(c: &Value, what: &str) {
    let text = c.to_string();
    assert!(
        !text.contains("NaN") && !text.contains("null"),
        "{what}: {text}"
    );
    let sent = num(c, "/end/sum_sent/packets");
    let expected = num(c, "/end/sum_received/packets");
    assert!(sent > 0.0, "{what}: nothing sent");
    assert!(
        expected <= sent && expected >= sent * 0.98,
        "{what}: receiver expected {expected} of {sent}"
    );
    let loss = num(c, "/end/sum_received/lost_percent");
    assert!((0.0..1.0).contains(&loss), "{what}: loss {loss} %");
    assert!(num(c, "/end/sum_received/bytes") > 0.0, "{what}");
}

fn both(flags: &[&str], extra: impl Fn(&Value, &Value, &str)) {
    let (c, s) = ours_to_stock(flags);
    check(&c, "netperfd → iperf3");
    extra(&c, &s, "netperfd → iperf3");
    let (c, s) = stock_to_ours(flags);
    check(&c, "iperf3 → netperfd");
    extra(&c, &s, "iperf3 → netperfd");
}

#[test]
fn udp_plain_with_bitrate_and_length() {
    both(&["-b", "20M", "-l", "1200", "-t", "2"], |c, s, w| {
        assert_eq!(num(c, "/start/test_start/blksize"), 1200.0, "{w}");
        let bps = num(c, "/end/sum_received/bits_per_second");
        // The rate as the peer's receiver measured it: interop, not pacing accuracy, is
        // checked here (tests/udp_pacing.rs holds the sender to 1 % on its own).
        assert!((16e6..=21e6).contains(&bps), "{w}: {bps}");
        // The server's own count of datagrams equals what the client was told.
        assert_eq!(
            num(s, "/end/sum_received/packets"),
            num(c, "/end/sum_received/packets"),
            "{w}"
        );
    });
}

#[test]
fn udp_default_rate_is_1_mbit_per_stream() {
    both(&["-t", "2", "-P", "2"], |c, _s, w| {
        let bps = num(c, "/end/sum_received/bits_per_second");
        assert!(
            (1.9e6..=2.3e6).contains(&bps),
            "{w}: two streams at 1 Mbit/s gave {bps}"
        );
        assert_eq!(
            c["end"]["streams"].as_array().map(|a| a.len()),
            Some(2),
            "{w}"
        );
    });
}

#[test]
fn udp_reverse() {
    both(&["-b", "20M", "-t", "2", "-R"], |c, _s, w| {
        assert_eq!(num(c, "/start/test_start/reverse"), 1.0, "{w}");
        assert!(num(c, "/end/sum_received/jitter_ms") >= 0.0, "{w}");
    });
}

#[test]
fn udp_bidir() {
    both(&["-b", "10M", "-t", "2", "--bidir"], |c, _s, w| {
        assert!(
            num(c, "/end/sum_received_bidir_reverse/packets") > 0.0,
            "{w}"
        );
        assert!(num(c, "/end/sum_sent_bidir_reverse/packets") > 0.0, "{w}");
    });
}

#[test]
fn udp_omit() {
    both(&["-b", "10M", "-t", "2", "-O", "1"], |c, _s, w| {
        let iv = c["intervals"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            iv[0].pointer("/sum/omitted"),
            Some(&Value::Bool(true)),
            "{w}"
        );
        // The omitted second is not counted: the summary covers ~2 s (not 3), at 10 Mbit/s
        // over the seconds it says it covers (a loaded machine stretches a run, so the bytes
        // alone are no measure).
        let bytes = num(c, "/end/sum_sent/bytes");
        let secs = num(c, "/end/sum_sent/seconds");
        assert!((1.9..2.9).contains(&secs), "{w}: summary over {secs} s");
        let bps = bytes * 8.0 / secs;
        assert!(
            (9e6..=11e6).contains(&bps),
            "{w}: {bytes} bytes in {secs} s after omit"
        );
    });
}

#[test]
fn udp_bytes_and_blocks() {
    both(&["-b", "50M", "-n", "1M", "-l", "1000"], |c, _s, w| {
        let sent = num(c, "/end/sum_sent/bytes");
        assert!(
            (1048576.0..1048576.0 + 64.0 * 1000.0).contains(&sent),
            "{w}: -n 1M sent {sent}"
        );
    });
    both(&["-b", "50M", "-k", "500", "-l", "1000"], |c, _s, w| {
        let p = num(c, "/end/sum_sent/packets");
        assert!(
            (500.0..564.0).contains(&p),
            "{w}: -k 500 sent {p} datagrams"
        );
    });
}

#[test]
fn udp_64bit_counters_repeating_payload_dont_fragment() {
    both(
        &[
            "-b",
            "10M",
            "-t",
            "1",
            "-l",
            "200",
            "--udp-counters-64bit",
            "--repeating-payload",
            "--dont-fragment",
        ],
        |c, _s, w| {
            assert_eq!(num(c, "/start/test_start/blksize"), 200.0, "{w}");
        },
    );
}

#[test]
fn udp_length_above_ipv4_maximum_is_refused_before_anything_is_sent() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let srv = lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, _) = lab.run(
        &board,
        "big",
        bin(),
        &["-c", PC1_IP, "-u", "-l", "65508", "-J"],
        T,
    );
    assert_eq!(code, Some(1));
    let v = json(&out, "error");
    assert!(
        v["error"].as_str().unwrap_or_default().contains("65507"),
        "{v}"
    );
    // The one-off stock server never saw a connection: it still serves a normal test.
    assert!(lab.alive(srv));
    let (code, out, err) = lab.run(
        &board,
        "ok",
        bin(),
        &["-c", PC1_IP, "-u", "-t", "1", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{out}{err}");
}

fn nft(ns: &str, rules: &str) {
    let mut c = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("nft");
    c.stdin
        .take()
        .expect("stdin")
        .write_all(rules.as_bytes())
        .expect("rules");
    assert!(
        c.wait().expect("nft").success(),
        "nft rules failed:\n{rules}"
    );
}

/// Drop 30 % of the incoming UDP test datagrams (not the 4-byte hellos).
const DROP_30: &str = "table inet impair {
  chain in {
    type filter hook input priority 0; policy accept;
    udp dport 5201 meta length > 200 numgen random mod 100 < 30 drop
  }
}
";

#[test]
fn thirty_percent_loss_is_reported_as_30_on_both_ends() {
    // Stock client in pc1 → our server; the board drops 30 % of the datagrams coming in.
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    nft(&board, DROP_30);
    let srv = lab.spawn(&board, "netperfd-s", bin(), &["-s", "-1", "-J"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &[
            "-c", BOARD_IP, "-u", "-b", "20M", "-l", "1000", "-t", "3", "-J",
        ],
        T,
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(lab.wait(srv, Duration::from_secs(10)), Some(0));
    let c = json(&out, "iperf3 -c");
    let (sout, _) = lab.output("netperfd-s");
    let s = json(&sout, "netperfd -s");
    let client_loss = num(&c, "/end/sum_received/lost_percent");
    let server_loss = num(&s, "/end/sum_received/lost_percent");
    assert!(
        (28.0..=32.0).contains(&client_loss),
        "stock client shows {client_loss} %"
    );
    assert!(
        (28.0..=32.0).contains(&server_loss),
        "netperfd server shows {server_loss} %"
    );

    // Our client on the board → stock server; pc1 drops 30 % of what comes in.
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    nft(&pc1, DROP_30);
    let srv = lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "netperfd-c",
        bin(),
        &[
            "-c", PC1_IP, "-u", "-b", "20M", "-l", "1000", "-t", "3", "-J",
        ],
        T,
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(lab.wait(srv, Duration::from_secs(10)), Some(0));
    let c = json(&out, "netperfd -c");
    let (sout, _) = lab.output("iperf3-s");
    let s = json(&sout, "iperf3 -s");
    let client_loss = num(&c, "/end/sum_received/lost_percent");
    let server_loss = num(&s, "/end/sum_received/lost_percent");
    assert!(
        (28.0..=32.0).contains(&client_loss),
        "netperfd client shows {client_loss} %"
    );
    assert!(
        (28.0..=32.0).contains(&server_loss),
        "stock server shows {server_loss} %"
    );
    // Loss counted apart from order: no reordering on a veth.
    assert_eq!(num(&c, "/end/streams/0/udp/out_of_order"), 0.0);
}

/// A hand-made iperf3 UDP client: sends `order` (sequence numbers) with sender timestamps
/// from `stamp(seq)` (µs) to a `netperfd -s -1 -J` on loopback, completes the protocol, and
/// returns the server's -J document and its results message.
fn crafted(order: &[u64], stamp: impl Fn(u64) -> i64) -> (Value, Value) {
    let port = free_port();
    let log = std::env::temp_dir().join(format!("netperfd-crafted-{port}.json"));
    let mut srv = std::process::Command::new(bin())
        .args(["-s", "-1", "-J", "-p", &port.to_string()])
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("server");
    let mut ctrl = loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    ctrl.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let framed = |v: &Value| {
        let b = v.to_string().into_bytes();
        let mut m = (b.len() as u32).to_be_bytes().to_vec();
        m.extend(b);
        m
    };
    let state = |c: &mut TcpStream, want: u8| {
        let mut b = [0u8; 1];
        c.read_exact(&mut b).expect("state");
        assert_eq!(b[0], want);
    };
    ctrl.write_all(b"craftedcraftedcraftedcraftedcrafted2\0")
        .expect("cookie");
    state(&mut ctrl, 9);
    let params = serde_json::json!({"udp": true, "omit": 0, "time": 2, "num": 0, "blockcount": 0, "parallel": 1,
        "len": 200, "bandwidth": 1000000, "pacing_timer": 1000, "client_version": "3.12"});
    ctrl.write_all(&framed(&params)).expect("params");
    state(&mut ctrl, 10);
    let u = UdpSocket::bind("127.0.0.1:0").expect("udp");
    u.connect(("127.0.0.1", port)).expect("connect");
    u.set_read_timeout(Some(Duration::from_secs(5))).expect("t");
    u.send(b"9876").expect("hello");
    let mut r = [0u8; 16];
    assert_eq!(u.recv(&mut r).expect("reply"), 4);
    assert_eq!(&r[..4], b"6789");
    state(&mut ctrl, 1);
    state(&mut ctrl, 2);
    for &seq in order {
        let t = stamp(seq);
        let mut d = vec![0u8; 200];
        d[0..4].copy_from_slice(&((t / 1_000_000) as u32).to_be_bytes());
        d[4..8].copy_from_slice(&((t % 1_000_000) as u32).to_be_bytes());
        d[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
        u.send(&d).expect("send");
        std::thread::sleep(Duration::from_micros(200));
    }
    // A margin, not an event: the server has read and counted the last datagram before the
    // test ends (its counting shows nowhere outside).
    std::thread::sleep(Duration::from_millis(300));
    ctrl.write_all(&[4]).expect("TEST_END");
    state(&mut ctrl, 13);
    let sent = order.iter().copied().max().unwrap_or(0);
    let mine = serde_json::json!({"cpu_util_total": 1, "cpu_util_user": 0.5, "cpu_util_system": 0.5, "sender_has_retransmits": 0,
        "streams": [{"id": 1, "bytes": order.len() * 200, "retransmits": -1, "jitter": 0, "errors": 0, "packets": sent,
                     "start_time": 0, "end_time": 1}]});
    ctrl.write_all(&framed(&mine)).expect("results");
    let mut len = [0u8; 4];
    ctrl.read_exact(&mut len).expect("len");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    ctrl.read_exact(&mut body).expect("body");
    state(&mut ctrl, 14);
    ctrl.write_all(&[16]).expect("IPERF_DONE");
    let _ = srv.wait();
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (
        json(&out, "server -J"),
        json(&String::from_utf8_lossy(&body), "server results"),
    )
}

#[test]
fn reordering_is_not_loss() {
    // 1000 datagrams; every 4th pair swapped: 25 % reordered, none lost.
    let mut order: Vec<u64> = (1..=1000).collect();
    for i in (0..1000).step_by(8) {
        order.swap(i, i + 1);
        order.swap(i + 4, i + 5);
    }
    let (s, r) = crafted(&order, |seq| 1_000_000 + seq as i64 * 200);
    assert_eq!(num(&r, "/streams/0/errors"), 0.0, "no loss on the wire");
    assert_eq!(num(&r, "/streams/0/packets"), 1000.0);
    assert_eq!(num(&s, "/end/streams/0/udp/lost_packets"), 0.0);
    assert_eq!(num(&s, "/end/streams/0/udp/lost_percent"), 0.0);
    assert_eq!(num(&s, "/end/streams/0/udp/out_of_order"), 250.0);
}

#[test]
fn duplicates_and_gaps_are_counted_apart() {
    // 1..=500 with 10 missing and every 10th sent twice.
    let mut order = Vec::new();
    for seq in 1..=500u64 {
        if seq % 50 == 25 {
            continue;
        }
        order.push(seq);
        if seq % 10 == 0 {
            order.push(seq);
        }
    }
    let (s, r) = crafted(&order, |seq| 5_000_000 + seq as i64 * 200);
    assert_eq!(num(&r, "/streams/0/errors"), 10.0);
    assert_eq!(num(&s, "/end/streams/0/udp/lost_packets"), 10.0);
    assert_eq!(num(&s, "/end/streams/0/udp/lost_percent"), 2.0);
    assert_eq!(num(&s, "/end/streams/0/udp/duplicates"), 50.0);
    assert_eq!(num(&s, "/end/streams/0/udp/out_of_order"), 0.0);
}

#[test]
fn jitter_follows_delay_variation_whatever_the_clock_offset() {
    // Sender timestamps that pretend every other datagram took 2 ms longer: |D| = 2 ms, so
    // RFC 3550 jitter converges to about 2 ms (plus the real ~0.2 ms spacing noise).
    let order: Vec<u64> = (1..=400).collect();
    let spacing = |seq: u64| seq as i64 * 200;
    let (s0, r0) = crafted(&order, |seq| {
        10_000_000 + spacing(seq) - if seq % 2 == 0 { 2000 } else { 0 }
    });
    let j0 = num(&r0, "/streams/0/jitter") * 1000.0;
    assert!((1.6..=2.6).contains(&j0), "jitter {j0} ms");
    // The same with the sender's clock an hour ahead: same jitter (within the noise).
    let (_, r1) = crafted(&order, |seq| {
        3_600_000_000 + 10_000_000 + spacing(seq) - if seq % 2 == 0 { 2000 } else { 0 }
    });
    let j1 = num(&r1, "/streams/0/jitter") * 1000.0;
    assert!((j1 - j0).abs() < 0.3, "offset changed jitter: {j0} vs {j1}");
    assert!((num(&s0, "/end/streams/0/udp/jitter_ms") - j0).abs() < 1e-9);
}

#[test]
fn udp_ladder_from_the_cli_is_recorded_as_a_suite() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let data = lab.dir().join("data");
    let d = data.to_str().unwrap_or("data").to_string();
    let (code, out, err) = lab.run(
        &board,
        "ladder",
        bin(),
        &[
            "ladder", "-c", PC1_IP, "--rates", "10M,20M", "-t", "1", "-l", "1000", "--data", &d,
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out, "ladder --json");
    let rows = v["rows"].as_array().cloned().unwrap_or_default();
    let got: Vec<(u64, String)> = rows
        .iter()
        .map(|r| {
            (
                r["target_bps"].as_u64().unwrap_or(0),
                r["direction"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (10_000_000, "send".into()),
            (10_000_000, "receive".into()),
            (20_000_000, "send".into()),
            (20_000_000, "receive".into())
        ]
    );
    for r in &rows {
        let target = r["target_bps"].as_f64().unwrap_or(0.0);
        let bps = r["bitrate_bps"].as_f64().unwrap_or(0.0);
        assert!((target * 0.8..=target * 1.05).contains(&bps), "{r}");
        assert!(r["lost_percent"].as_f64().unwrap_or(100.0) < 1.0, "{r}");
        assert!(r["total"].as_i64().unwrap_or(0) > 0, "{r}");
        assert_eq!(r["status"], "completed");
    }
    assert_eq!(v["suite"]["status"], "completed");
    // The same history, read back by `runs list`.
    let out = std::process::Command::new(bin())
        .args(["runs", "list", "--json", "--data", &d])
        .output()
        .expect("runs");
    let list = json(&String::from_utf8_lossy(&out.stdout), "runs list");
    assert_eq!(list.as_array().map(|a| a.len()), Some(4));
    assert!(list
        .as_array()
        .into_iter()
        .flatten()
        .all(|r| r["protocol"] == "UDP" && r["suite_id"] == v["suite"]["id"]));
}

#[test]
fn udp_reverse_to_a_pulled_cable_frees_the_session_and_the_server_stays_ready() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn_env(
        &board,
        "netperfd-s",
        bin(),
        &["-s", "-J"],
        &[("RUST_LOG", "warn")],
    );
    lab.wait_port(&board, BOARD_IP, 5201);
    // The board sends UDP to pc1 (-R) for 60 s; then pc1's cable is pulled.
    let cli = lab.spawn(
        &pc1,
        "long",
        "iperf3",
        &["-c", BOARD_IP, "-u", "-b", "10M", "-t", "60", "-R"],
    );
    // The cable goes mid-test: a duration into the 60 s test.
    std::thread::sleep(Duration::from_secs(2));
    let out = std::process::Command::new("ip")
        .args(["-n", &pc1, "link", "set", "eth0", "down"])
        .output()
        .expect("ip");
    assert!(out.status.success());
    let t = std::time::Instant::now();
    loop {
        let (o, _) = lab.output("netperfd-s");
        if o.contains("\"error\"") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "UDP sender session not freed within 15 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    lab.kill(cli);
    // Cable back: the next UDP test passes.
    let out = std::process::Command::new("ip")
        .args(["-n", &pc1, "link", "set", "eth0", "up"])
        .output()
        .expect("ip");
    assert!(out.status.success());
    wait_until(Duration::from_secs(10), "pc1's link to come up", || {
        link_up(&pc1, "eth0") && link_up(&board, "eth0")
    });
    let (code, o, e) = lab.run(
        &pc1,
        "next",
        "iperf3",
        &["-c", BOARD_IP, "-u", "-b", "10M", "-t", "1", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{o}{e}");
    assert!(num(&json(&o, "next"), "/end/sum_received/packets") > 0.0);
}

/// Issue 25 item 2: a paced sender that loses the CPU (stopped 1.6 s into a 4 s run, for 1.6 s:
/// 0.6 s beyond the 1 s the pacer repays) falls short, and the shortfall says why — the
/// sender's lag behind its schedule — in `-J` (iperf3) and in the text summary (`--iperf2`,
/// which printed no shortfall at all).
#[test]
fn a_stalled_sender_falls_short_and_says_why() {
    // (label, netperfd args, stock server program, its args, its port)
    type Case<'a> = (&'a str, Vec<&'a str>, &'a str, Vec<&'a str>, u16);
    let cases: [Case; 2] = [
        (
            "iperf3",
            vec!["-c", PC1_IP, "-u", "-b", "20M", "-t", "4", "-J"],
            "iperf3",
            vec!["-s", "-1"],
            5201,
        ),
        (
            "iperf 2",
            vec!["-c", PC1_IP, "--iperf2", "-u", "-b", "20M", "-t", "4"],
            "iperf",
            vec!["-s", "-u"],
            5001,
        ),
    ];
    for (label, args, prog, sargs, port) in cases {
        let mut lab = Lab::new();
        let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
        lab.spawn(&pc1, "stock-s", prog, &sargs);
        if port == 5201 {
            lab.wait_port(&pc1, PC1_IP, port);
        } else {
            lab.wait_udp(&pc1, port);
        }
        let c = lab.spawn(&board, "netperfd-c", bin(), &args);
        // Stopped 1.6 s into the run, for 1.6 s: durations (the test's subject).
        std::thread::sleep(Duration::from_millis(1600));
        let pid = lab.pid(c).to_string();
        assert!(std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .expect("kill")
            .success());
        std::thread::sleep(Duration::from_millis(1600));
        assert!(std::process::Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .expect("kill")
            .success());
        assert_eq!(lab.wait(c, T), Some(0), "{label}");
        let (out, err) = lab.output("netperfd-c");
        if label == "iperf3" {
            let v = json(&out, "netperfd -J");
            let s = &v["end"]["shortfall"];
            assert_eq!(s["short"], true, "{label}: {s}");
            // 1.6 s of 4 s owed: 0.6 s written off, the rest repaid at most 1.9 x the rate
            // in the 0.8 s left: 60-85 % sent (68 % measured).
            let pct = s["sent_percent"].as_f64().expect("sent_percent");
            assert!((55.0..90.0).contains(&pct), "{label}: {pct}");
            let lag = s["sender_max_lag_ms"].as_f64().expect("sender_max_lag_ms");
            assert!((1500.0..2500.0).contains(&lag), "{label}: lag {lag}");
            assert!(s["sender_peak_1ms_bits_per_second"]
                .as_f64()
                .is_some_and(|p| p > 0.0));
        } else {
            let line = out
                .lines()
                .find(|l| l.starts_with("shortfall: the sender sent"))
                .unwrap_or_else(|| panic!("{label}: no shortfall line in\n{out}\n{err}"));
            assert!(line.contains("of the 20.0 Mbit/s asked"), "{line}");
            assert!(line.contains("ms behind its schedule"), "{line}");
        }
    }
}
