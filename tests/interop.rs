//! Interop with Debian's stock iperf3 in network namespaces, both directions:
//! netperfd client (board) → `iperf3 -s` (pc1), and `iperf3 -c` (pc1) → netperfd server
//! (board). Each case checks that both tools exit 0, that both JSON reports parse, and that
//! the byte counts agree within what can be in flight.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

const T: Duration = Duration::from_secs(40);

/// Bytes that may be in flight when the server closes its streams at TEST_END: the largest
/// send and receive socket buffers (tcp_wmem, tcp_rmem maxima) of each stream, twice over
/// for the kernel's accounting overhead.
fn in_flight(streams: usize) -> f64 {
    let max = |f: &str| -> f64 {
        std::fs::read_to_string(f)
            .ok()
            .and_then(|t| t.split_whitespace().nth(2).and_then(|x| x.parse().ok()))
            .unwrap_or(8.0 * 1024.0 * 1024.0)
    };
    (streams as f64)
        * 2.0
        * (max("/proc/sys/net/ipv4/tcp_wmem") + max("/proc/sys/net/ipv4/tcp_rmem"))
}

fn check_bytes(client: &Value, streams: usize, what: &str) {
    let sent = num(client, "/end/sum_sent/bytes");
    let recv = num(client, "/end/sum_received/bytes");
    assert!(sent > 0.0, "{what}: nothing sent");
    // With -O the two ends reset their counters on their own timers, so in-flight bytes can
    // fall on either side of the omit boundary.
    let omit = num(client, "/start/test_start/omit") > 0.0;
    let slack = if omit { in_flight(streams) } else { 0.0 };
    assert!(
        recv <= sent + slack,
        "{what}: received {recv} > sent {sent}"
    );
    assert!(
        sent - recv <= in_flight(streams),
        "{what}: received {recv} is too far below sent {sent}"
    );
}

/// Our client against stock `iperf3 -s -1 -J`.
fn ours_to_stock(flags: &[&str]) -> (Value, Value) {
    let mut lab = Lab::new();
    let pc1 = lab.pc1.clone();
    let board = lab.board.clone();
    let srv = lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let mut args = vec!["-c", PC1_IP, "-J"];
    args.extend_from_slice(flags);
    let (code, out, err) = lab.run(&board, "netperfd-c", bin(), &args, T);
    assert_eq!(
        code,
        Some(0),
        "netperfd client {flags:?} failed: {err}\n{out}"
    );
    let scode = lab.wait(srv, Duration::from_secs(10));
    assert_eq!(scode, Some(0), "stock iperf3 -s did not finish cleanly");
    let (sout, _) = lab.output("iperf3-s");
    (json(&out, "netperfd -J"), json(&sout, "iperf3 -s -J"))
}

/// Stock `iperf3 -c … -J` against our `netperfd -s -1 -J`.
fn stock_to_ours(flags: &[&str]) -> (Value, Value) {
    let mut lab = Lab::new();
    let pc1 = lab.pc1.clone();
    let board = lab.board.clone();
    let srv = lab.spawn(&board, "netperfd-s", bin(), &["-s", "-1", "-J"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let mut args = vec!["-c", BOARD_IP, "-J"];
    args.extend_from_slice(flags);
    let (code, out, err) = lab.run(&pc1, "iperf3-c", "iperf3", &args, T);
    assert_eq!(
        code,
        Some(0),
        "stock iperf3 client {flags:?} failed: {err}\n{out}"
    );
    let scode = lab.wait(srv, Duration::from_secs(10));
    assert_eq!(scode, Some(0), "netperfd -s -1 did not exit 0");
    let (sout, serr) = lab.output("netperfd-s");
    assert!(!serr.contains("panicked"), "server panicked: {serr}");
    (json(&out, "iperf3 -c -J"), json(&sout, "netperfd -s -J"))
}

fn both(flags: &[&str], streams: usize, check: impl Fn(&Value, &Value, &str)) {
    let (c, s) = ours_to_stock(flags);
    check_bytes(&c, streams, "netperfd → iperf3");
    check(&c, &s, "netperfd → iperf3");
    let (c, s) = stock_to_ours(flags);
    check_bytes(&c, streams, "iperf3 → netperfd");
    check(&c, &s, "iperf3 → netperfd");
}

fn streams(v: &Value) -> usize {
    v.pointer("/end/streams")
        .and_then(|s| s.as_array())
        .map(|a| a.len())
        .unwrap_or(0)
}

#[test]
fn plain() {
    both(&["-t", "2"], 1, |c, s, w| {
        assert_eq!(streams(c), 1, "{w}");
        assert!(
            num(c, "/end/sum_received/bits_per_second") > 1e8,
            "{w}: under 100 Mbit/s on veth"
        );
        // The server's own view of what it received equals what the client was told.
        assert_eq!(
            num(c, "/end/sum_received/bytes"),
            num(s, "/end/sum_received/bytes"),
            "{w}: the results exchange lost the receiver's count"
        );
        assert!(
            c.pointer("/intervals")
                .and_then(|i| i.as_array())
                .map(|a| a.len())
                .unwrap_or(0)
                >= 2,
            "{w}"
        );
        assert!(num(c, "/end/sum_sent/retransmits") >= 0.0, "{w}");
    });
}

#[test]
fn parallel_4() {
    both(&["-t", "2", "-P", "4"], 4, |c, s, w| {
        assert_eq!(streams(c), 4, "{w}");
        assert_eq!(streams(s), 4, "{w}");
        let sum: f64 = (0..4)
            .map(|i| num(c, &format!("/end/streams/{i}/sender/bytes")))
            .sum();
        assert_eq!(
            sum,
            num(c, "/end/sum_sent/bytes"),
            "{w}: per-stream bytes do not add up"
        );
    });
}

#[test]
fn reverse() {
    both(&["-t", "2", "-R"], 1, |c, s, w| {
        assert_eq!(num(c, "/start/test_start/reverse"), 1.0, "{w}");
        assert_eq!(
            c.pointer("/end/sum_received/sender"),
            Some(&Value::Bool(false)),
            "{w}"
        );
        assert!(
            num(s, "/end/sum_sent/bytes") > 0.0,
            "{w}: server did not send"
        );
        // What the client reports as sent is the server's own count.
        assert_eq!(
            num(c, "/end/sum_sent/bytes"),
            num(s, "/end/sum_sent/bytes"),
            "{w}"
        );
    });
}

#[test]
fn bidir() {
    both(&["-t", "2", "--bidir"], 1, |c, _s, w| {
        assert_eq!(streams(c), 2, "{w}");
        assert!(num(c, "/end/sum_sent/bytes") > 0.0, "{w}");
        assert!(
            num(c, "/end/sum_sent_bidir_reverse/bytes") > 0.0,
            "{w}: no reverse traffic"
        );
        assert!(num(c, "/end/sum_received_bidir_reverse/bytes") > 0.0, "{w}");
    });
}

#[test]
fn bytes_n() {
    both(&["-n", "10M"], 1, |c, s, w| {
        let sent = num(c, "/end/sum_sent/bytes");
        let target = 10.0 * 1024.0 * 1024.0;
        assert!(
            sent >= target && sent <= target + 131072.0,
            "{w}: -n 10M sent {sent}"
        );
        assert_eq!(num(c, "/start/test_start/bytes"), target, "{w}");
        if w.starts_with("iperf3") {
            // Our server counts every byte the stock client sent (docs/iperf3-wire.md §8.4).
            assert_eq!(
                num(s, "/end/sum_received/bytes"),
                sent,
                "{w}: our server's count"
            );
        }
    });
}

#[test]
fn blocks_k() {
    both(&["-k", "100"], 1, |c, s, w| {
        let sent = num(c, "/end/sum_sent/bytes");
        if w.starts_with("netperfd") {
            // Our client: exactly 100 blocks of 128 KiB.
            assert_eq!(
                sent,
                100.0 * 131072.0,
                "{w}: -k 100 is 100 blocks of 128 KiB"
            );
        } else {
            // The stock iperf3 3.12 client sometimes sends one block more than -k asks (seen
            // in about 1 run of 4 here, whatever the server): that count is the stock
            // client's.
            assert!(
                sent == 100.0 * 131072.0 || sent == 101.0 * 131072.0,
                "{w}: -k 100 sent {sent}"
            );
            // Our server reads the streams after TEST_END until what the client says it sent
            // has arrived (docs/iperf3-wire.md §8.4), so its count is exactly the stock
            // client's — 100 or 101 blocks alike — not short by what was in flight (stock
            // iperf3's server is: tests/interop_drain.rs).
            let got = num(s, "/end/sum_received/bytes");
            assert_eq!(got, sent, "{w}: our server received {got} of {sent} bytes");
            assert_eq!(
                num(c, "/end/sum_received/bytes"),
                sent,
                "{w}: the client's end.sum_received"
            );
        }
    });
}

#[test]
fn window() {
    both(&["-t", "2", "-w", "256K"], 1, |c, _s, w| {
        assert_eq!(num(c, "/start/sock_bufsize"), 262144.0, "{w}");
    });
}

#[test]
fn bitrate_limit() {
    both(&["-t", "3", "-b", "50M"], 1, |c, _s, w| {
        let bps = num(c, "/end/sum_received/bits_per_second");
        assert!((45e6..=55e6).contains(&bps), "{w}: -b 50M gave {bps} bit/s");
    });
}

/// `--fq-rate` (SO_MAX_PACING_RATE on the sending side's TCP streams): a stock client's
/// `--fq-rate 100M -R` made `netperfd -s` send unpaced (1.9–5.2 Gbit/s). The receiver sees
/// the pacing rate, and netperfd's `-J` states it (stock 3.12 writes neither key). With `-R`
/// only stock → ours: a stock 3.12 server ignores `fqrate` (stock client or ours alike; 3.21
/// honours it).
#[test]
fn fq_rate() {
    let check = |c: &Value, s: &Value, w: &str| {
        let bps = num(c, "/end/sum_received/bits_per_second");
        assert!(
            (85e6..=105e6).contains(&bps),
            "{w}: --fq-rate 100M gave {bps} bit/s"
        );
        let ours = if w.starts_with("netperfd") { c } else { s };
        assert_eq!(num(ours, "/start/fq_rate"), 1e8, "{w}: start.fq_rate");
        assert_eq!(
            num(ours, "/start/test_start/fqrate"),
            1e8,
            "{w}: test_start.fqrate"
        );
    };
    both(&["-t", "3", "--fq-rate", "100M"], 1, check);
    let (c, s) = stock_to_ours(&["-t", "3", "--fq-rate", "100M", "-R"]);
    check_bytes(&c, 1, "iperf3 → netperfd -R");
    check(&c, &s, "iperf3 → netperfd -R");
}

#[test]
fn omit() {
    both(&["-t", "2", "-O", "1"], 1, |c, _s, w| {
        let iv = c
            .pointer("/intervals")
            .and_then(|i| i.as_array())
            .cloned()
            .unwrap_or_default();
        assert!(iv.len() >= 3, "{w}: {} intervals", iv.len());
        assert_eq!(
            iv[0].pointer("/sum/omitted"),
            Some(&Value::Bool(true)),
            "{w}"
        );
        assert_eq!(
            iv.last().and_then(|l| l.pointer("/sum/omitted")),
            Some(&Value::Bool(false)),
            "{w}"
        );
        // The summary covers the 2 measured seconds, not the omitted one.
        let secs = num(c, "/end/sum_sent/seconds");
        assert!((1.8..2.5).contains(&secs), "{w}: summary over {secs} s");
    });
}

/// Issue 22 item 11: with `-O 1` our client's counted window is the stock server's (timers from
/// TEST_START, TEST_END sent the moment the time is up): the stock server receives what we
/// report as sent within 3 % (0.1–0.33 % measured alone; 2.3 % and 3.2 % once each in full test
/// runs, where a few tens of ms of scheduling at 13 Gbit/s is that much; before the fix the
/// stock server counted 4–116 MB more). A pair outside 3 % is measured twice more and the
/// median of the three must be within it: a scheduling stall is one pair's, a wrong window
/// every pair's. (With -R the server's sent count also holds what was still in its socket
/// buffer at TEST_END — 1.5 % with a stock client too — see `reverse`.)
#[test]
fn omit_counts_what_the_stock_server_counts() {
    for (flags, ours, theirs) in [
        (
            &["-t", "2", "-O", "1"][..],
            "/end/sum_sent/bytes",
            "/end/sum_received/bytes",
        ),
        (
            &["-t", "2", "-O", "1", "-P", "2"][..],
            "/end/sum_sent/bytes",
            "/end/sum_received/bytes",
        ),
    ] {
        let mut gaps = Vec::new();
        for attempt in 1..=3 {
            let (c, s) = ours_to_stock(flags);
            let (o, t) = (num(&c, ours), num(&s, theirs));
            let secs = (
                num(&c, "/end/sum_sent/seconds"),
                num(&s, "/end/sum_received/seconds"),
            );
            eprintln!(
                "{flags:?} #{attempt}: we counted {o}, the stock server {t}; seconds {secs:?}"
            );
            assert!(o > 10_000_000.0, "{flags:?}: {c}");
            gaps.push((t - o).abs() / t);
            if attempt == 1 && gaps[0] <= 0.03 {
                break;
            }
        }
        netperfd::model::order::sort_by(&mut gaps, f64::total_cmp);
        let median = gaps[gaps.len() / 2];
        assert!(
            median <= 0.03,
            "{flags:?}: our count and the stock server's differ by {:?} (fractions)",
            gaps
        );
    }
}

#[test]
fn get_server_output() {
    both(&["-t", "1", "--get-server-output"], 1, |c, _s, w| {
        let so = c
            .get("server_output_json")
            .unwrap_or_else(|| panic!("{w}: no server_output_json in {c}"));
        assert!(
            so.pointer("/end/sum_received/bytes")
                .and_then(|b| b.as_f64())
                .unwrap_or(0.0)
                > 0.0,
            "{w}"
        );
    });
}

#[test]
fn get_server_output_text() {
    // Text mode on both sides: the stock client prints the server's text after "Server output:".
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&board, "netperfd-s", bin(), &["-s", "-1"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &["-c", BOARD_IP, "-t", "1", "--get-server-output"],
        T,
    );
    assert_eq!(code, Some(0), "{err}");
    let tail = out
        .split("Server output:")
        .nth(1)
        .unwrap_or_else(|| panic!("no server output in:\n{out}"));
    assert!(
        tail.contains("Accepted connection from 192.0.2.2"),
        "{tail}"
    );
    assert!(tail.contains("receiver"), "{tail}");
}

#[test]
fn text_output_has_iperf3_shape() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "netperfd-c",
        bin(),
        &["-c", PC1_IP, "-t", "2", "-i", "1"],
        T,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("Connecting to host 192.0.2.2, port 5201\n"),
        "{out}"
    );
    assert!(
        out.contains("[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n"),
        "{out}"
    );
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.ends_with("sender") || l.ends_with("receiver"))
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].contains("0.00-2.0") && lines[0].contains("bits/sec"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("iperf Done."), "{out}");
}

#[test]
fn json_error_is_one_document_and_nonzero_exit() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    // Nothing listens on pc1: connection refused.
    let (code, out, _) = lab.run(
        &board,
        "netperfd-c",
        bin(),
        &["-c", PC1_IP, "-t", "1", "-J"],
        T,
    );
    assert_eq!(code, Some(1));
    let v = json(&out, "error -J");
    let e = v.get("error").and_then(|e| e.as_str()).unwrap_or_default();
    assert!(e.contains("unable to connect"), "{e}");
    assert!(!out.contains("NaN") && !out.contains("null"), "{out}");
}

#[test]
fn bind_address_and_device_bind_every_socket() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "netperfd-c",
        bin(),
        &[
            "-c",
            PC1_IP,
            "-t",
            "1",
            "-B",
            BOARD_IP,
            "--bind-dev",
            "eth0",
            "--cport",
            "40100",
            "-P",
            "2",
            "--bidir",
            "-J",
        ],
        T,
    );
    // -J puts the error in the document on stdout (seen once in a full run: exit 1 and an
    // empty stderr).
    assert_eq!(code, Some(0), "{err}\n{out}");
    let c = json(&out, "client");
    let conns = c
        .pointer("/start/connected")
        .and_then(|x| x.as_array())
        .cloned()
        .unwrap_or_default();
    assert_eq!(conns.len(), 4);
    for (i, k) in conns.iter().enumerate() {
        assert_eq!(k["local_host"], BOARD_IP);
        assert_eq!(
            k["local_port"].as_u64(),
            Some(40100 + i as u64),
            "--cport gives consecutive ports"
        );
    }
    let (sout, _) = lab.output("iperf3-s");
    let s = json(&sout, "server");
    assert_eq!(
        s.pointer("/start/accepted_connection/host")
            .and_then(|h| h.as_str()),
        Some(BOARD_IP)
    );
}

#[test]
fn several_clients_at_once_are_never_busy() {
    let mut lab = Lab::with_pc2();
    let (board, pc1, pc2) = (
        lab.board.clone(),
        lab.pc1.clone(),
        lab.pc2.clone().expect("pc2"),
    );
    lab.spawn(&board, "netperfd-s", bin(), &["-s", "-p", "5201,5202"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    lab.wait_port(&board, BOARD_IP, 5202);
    // Three stock clients at once, from two PCs, on both ports.
    let a = lab.spawn(&pc1, "c1", "iperf3", &["-c", BOARD_IP, "-t", "3", "-J"]);
    let b = lab.spawn(
        &pc1,
        "c2",
        "iperf3",
        &["-c", BOARD_IP, "-t", "3", "-R", "-J"],
    );
    let c = lab.spawn(
        &pc2,
        "c3",
        "iperf3",
        &["-c", BOARD_IP2, "-p", "5202", "-t", "3", "-J"],
    );
    for (i, name) in [(a, "c1"), (b, "c2"), (c, "c3")] {
        let code = lab.wait(i, T);
        let (out, err) = lab.output(name);
        assert_eq!(code, Some(0), "{name}: {out}{err}");
        let v = json(&out, name);
        assert!(v.get("error").is_none(), "{name}: {}", v["error"]);
        assert!(num(&v, "/end/sum_received/bytes") > 0.0, "{name}");
    }
}

#[test]
fn per_session_state_n1_then_reverse() {
    // iperf3 issue: a -n 1 test followed by a -R test on the same server; both must be right.
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    lab.spawn(&board, "netperfd-s", bin(), &["-s"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let (code, out, err) = lab.run(&pc1, "n1", "iperf3", &["-c", BOARD_IP, "-n", "1", "-J"], T);
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out, "-n 1");
    // One block written (iperf3 writes whole blocks), and the server received all of it.
    assert_eq!(num(&v, "/end/sum_sent/bytes"), 131072.0);
    let (code, out, err) = lab.run(
        &pc1,
        "rev",
        "iperf3",
        &["-c", BOARD_IP, "-R", "-t", "2", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v = json(&out, "-R");
    let secs = num(&v, "/end/sum_received/seconds");
    assert!(
        (1.9..2.6).contains(&secs),
        "the -R test ran its own 2 s, not the previous -n: {secs}"
    );
    assert!(num(&v, "/end/sum_received/bytes") > 1e6);
}

/// `--skip-rx-copy` (stock 3.19+; Debian's 3.12 and 3.18 lack it): whichever side receives
/// discards with MSG_TRUNC and counts the same bytes. netperfd to netperfd, both directions;
/// the server learns it from `skip_rx_copy` in the parameters.
#[test]
fn skip_rx_copy() {
    for reverse in [false, true] {
        let mut lab = Lab::new();
        let pc1 = lab.pc1.clone();
        let board = lab.board.clone();
        let srv = lab.spawn(&board, "netperfd-s", bin(), &["-s", "-1", "-J"]);
        lab.wait_port(&board, BOARD_IP, 5201);
        let mut args = vec!["-c", BOARD_IP, "-J", "-t", "2", "--skip-rx-copy"];
        if reverse {
            args.push("-R");
        }
        let (code, out, err) = lab.run(&pc1, "netperfd-c", bin(), &args, T);
        assert_eq!(code, Some(0), "{err}\n{out}");
        assert_eq!(lab.wait(srv, Duration::from_secs(10)), Some(0));
        let c = json(&out, "netperfd -c --skip-rx-copy");
        check_bytes(&c, 1, &format!("--skip-rx-copy reverse={reverse}"));
        assert!(num(&c, "/end/sum_received/bytes") > 1e6);
    }
}

/// iperf3 3.19–3.22's options and JSON against the newest stock iperf3: its client's `-Z -R
/// --json-stream` against our server (we send with sendfile; every line one event), our
/// client's `-J` against its server with every key its own client writes (`reorder`,
/// `timemillisecs`, `test_start.interval`/`gso`/`gro`), our `--json-stream`, and
/// `--rcv-timeout` ending a receiving client whose server stopped sending.
#[test]
fn newest_stock_iperf3_options_and_keys() {
    let newest = newest_stock();
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let (_, v, _) = lab.run(&pc1, "version", &newest, &["-v"], T);
    let version = v.lines().next().unwrap_or_default().to_string();
    assert!(version.starts_with("iperf 3."), "{v}");

    // 1. Its client, -Z -R --json-stream, against our server.
    let srv = lab.spawn(&board, "ours-s", bin(), &["-s"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let (code, out, err) = lab.run(
        &pc1,
        "stream-c",
        &newest,
        &["-c", BOARD_IP, "-t", "2", "-R", "-Z", "--json-stream"],
        T,
    );
    assert_eq!(code, Some(0), "{version} -Z -R --json-stream: {err}{out}");
    let events: Vec<Value> = out
        .lines()
        .map(|l| json(l, "a --json-stream line"))
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(names.first(), Some(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert!(
        names.iter().filter(|n| **n == "interval").count() >= 2,
        "{names:?}"
    );
    let end = &events[events.len() - 1]["data"];
    let sent = num(end, "/sum_sent/bytes");
    let recv = num(end, "/sum_received/bytes");
    assert!(sent > 10e6, "{version}: our sendfile sender sent {sent}");
    assert!(recv <= sent && sent - recv <= in_flight(1), "{sent} {recv}");

    // 2. Its own client's -J against its server: the keys it writes.
    lab.kill(srv);
    let s1 = lab.spawn(&pc1, "stock-s1", &newest, &["-s", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, theirs, err) = lab.run(
        &board,
        "stock-c",
        &newest,
        &["-c", PC1_IP, "-t", "1", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{err}");
    lab.wait(s1, Duration::from_secs(10));
    let theirs = json(&theirs, "stock -J");
    let s2 = lab.spawn(&pc1, "stock-s2", &newest, &["-s", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, ours, err) = lab.run(&board, "ours-c", bin(), &["-c", PC1_IP, "-t", "1", "-J"], T);
    assert_eq!(code, Some(0), "{err}");
    lab.wait(s2, Duration::from_secs(10));
    let ours = json(&ours, "our -J");
    for (ptr, depth) in [
        ("/start", 1),
        ("/start/test_start", 1),
        ("/start/timestamp", 1),
        ("/intervals/0/streams/0", 1),
        ("/end/streams/0/sender", 1),
        ("/end", 1),
    ] {
        let lack = missing_keys(&theirs, &ours, ptr, depth);
        assert!(
            lack.is_empty(),
            "keys {version} writes and we lack: {lack:?}"
        );
    }
    assert_eq!(num(&ours, "/start/test_start/interval"), 1.0);
    let (secs, ms) = (
        num(&ours, "/start/timestamp/timesecs"),
        num(&ours, "/start/timestamp/timemillisecs"),
    );
    assert!(
        ms >= secs * 1000.0 && ms < (secs + 1.0) * 1000.0,
        "{secs} {ms}"
    );

    // 3. Our --json-stream against its server: the same events.
    let s3 = lab.spawn(&pc1, "stock-s3", &newest, &["-s", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "ours-stream",
        bin(),
        &["-c", PC1_IP, "-t", "2", "-u", "-b", "10M", "--json-stream"],
        T,
    );
    assert_eq!(code, Some(0), "{err}{out}");
    lab.wait(s3, Duration::from_secs(10));
    let events: Vec<Value> = out
        .lines()
        .map(|l| json(l, "our --json-stream line"))
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(names, ["start", "interval", "interval", "end"], "{out}");
    let sent = num(&events[3]["data"], "/sum_sent/bytes");
    assert!((2.3e6..=2.7e6).contains(&sent), "10 Mbit/s for 2 s: {sent}");

    // 4. --rcv-timeout: the server stops sending (SIGSTOP) after a second; our receiving
    // client ends with stock's IENOMSG text instead of waiting for it.
    let s4 = lab.spawn(&pc1, "stock-s4", &newest, &["-s", "-1"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let c = lab.spawn(
        &board,
        "ours-idle",
        bin(),
        &[
            "-c",
            PC1_IP,
            "-t",
            "30",
            "-R",
            "-b",
            "10M",
            "--rcv-timeout",
            "1000",
        ],
    );
    // Stopped mid-test: a duration into the 30 s test.
    std::thread::sleep(Duration::from_millis(1500));
    let pid = lab.pid(s4).to_string();
    let st = std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status();
    assert!(st.is_ok_and(|s| s.success()));
    let t = std::time::Instant::now();
    let code = lab.wait(c, Duration::from_secs(10));
    let waited = t.elapsed();
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status();
    lab.kill(s4);
    let (out, err) = lab.output("ours-idle");
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("idle timeout for receiving data"), "{err}");
    assert!(
        waited < Duration::from_secs(4),
        "ended {waited:?} after the stop"
    );
}

/// `netperfd -s` adds its own drop counters to the results it sends (`netperfd_drops`,
/// issue 24): a stock client reads those results as ever (its `--debug` shows the key it
/// skipped) and reports the run. UDP -R through a 20 Mbit/s TBF on the server's port, so the
/// list has the server's qdisc drops in it.
#[test]
fn stock_client_reads_results_with_netperfd_drops() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let tc = std::process::Command::new("ip")
        .args([
            "netns", "exec", &board, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf",
        ])
        .args(["rate", "20mbit", "burst", "1600", "limit", "30kb"])
        .status()
        .expect("tc");
    assert!(tc.success());
    lab.spawn(&board, "netperfd-s", bin(), &["-s", "-1"]);
    lab.wait_port(&board, BOARD_IP, 5201);
    let (code, out, err) = lab.run(
        &pc1,
        "iperf3-c",
        "iperf3",
        &[
            "-c", BOARD_IP, "-u", "-b", "40M", "-R", "-t", "1", "--debug",
        ],
        T,
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    let i = out
        .find("\"netperfd_drops\":")
        .unwrap_or_else(|| panic!("no netperfd_drops in the server's results:\n{out}"));
    let drops = &out[i..out.len().min(i + 300)];
    assert!(
        drops.contains("\"qdisc\"") && drops.contains("\"qdisc tbf drops on eth0\""),
        "{drops}"
    );
    // The stock client still reports the run's loss from those results.
    let summary = out
        .lines()
        .find(|l| l.contains("receiver"))
        .unwrap_or_else(|| panic!("no receiver line:\n{out}"));
    assert!(summary.contains('%') && summary.contains('/'), "{summary}");
}

/// A `-R` UDP run whose 4-byte hello reply is lost on the way (the board's firewall drops
/// exactly that datagram): the stock server accepted the stream and sends, so our client
/// takes its data as the answer and counts every datagram (stock 3.12 would stall; our
/// client used to give up after 10 s with "no 4-byte UDP reply").
#[test]
fn reverse_udp_survives_a_lost_hello_reply() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let nft = |args: &[&str]| {
        let mut a = vec!["netns", "exec", board.as_str(), "nft"];
        a.extend_from_slice(args);
        std::process::Command::new("ip")
            .args(&a)
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(nft(&["add", "table", "ip", "lostreply"]));
    assert!(nft(&[
        "add chain ip lostreply p { type filter hook prerouting priority 0 ; }"
    ]));
    // UDP length 12: an 8-byte header and the 4-byte reply, nothing else.
    assert!(nft(&[
        "add rule ip lostreply p udp sport 5201 udp length 12 counter drop"
    ]));
    let srv = lab.spawn(&pc1, "iperf3-s", "iperf3", &["-s", "-1", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let (code, out, err) = lab.run(
        &board,
        "netperfd-c",
        bin(),
        &["-c", PC1_IP, "-u", "-b", "10M", "-t", "2", "-R", "-J"],
        T,
    );
    assert_eq!(code, Some(0), "{err}\n{out}");
    assert_eq!(lab.wait(srv, Duration::from_secs(10)), Some(0));
    let listing = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &board,
            "nft",
            "list",
            "table",
            "ip",
            "lostreply",
        ])
        .output()
        .expect("nft list");
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(
        listing.contains("packets 1 "),
        "the reply was not dropped:\n{listing}"
    );
    let c = json(&out, "netperfd -J");
    // None lost, the first datagram included (had our client taken it as the reply, the
    // stream would start at sequence 2: one lost); every datagram whole; and the count is
    // 10 Mbit/s of 1448-byte datagrams over the seconds the test itself measured (a loaded
    // machine stretches a stock server's 2 s: 1,912 datagrams once, so no wall-time window).
    let total = num(&c, "/end/sum_received/packets");
    let lost = num(&c, "/end/sum_received/lost_packets");
    assert_eq!(lost, 0.0, "{out}");
    assert!(total > 0.0, "{out}");
    assert_eq!(num(&c, "/end/sum_received/bytes"), total * 1448.0, "{out}");
    let secs = num(&c, "/end/sum_received/seconds");
    let want = 10e6 * secs / (1448.0 * 8.0);
    assert!(
        (total - want).abs() <= want * 0.05 + 2.0,
        "{total} datagrams in {secs} s, want {want:.0} ± 5 %"
    );
}

/// Our command-line client adds its drop counters (`netperfd_drops`) to the results it sends;
/// every stock iperf3 server (3.9, 3.12, 3.18, the newest) reads those results and ends the
/// test cleanly, TCP and UDP.
#[test]
fn stock_servers_read_client_results_with_netperfd_drops() {
    let dir = std::env::var("NETPERFD_STOCK_PEERS")
        .unwrap_or_else(|_| "/var/cache/netperfd-stock-peers".into());
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let servers = [
        format!("{dir}/bin/iperf3-3.9"),
        "iperf3".to_string(),
        format!("{dir}/bin/iperf3-3.18"),
        newest_stock(),
    ];
    for (i, srv_bin) in servers.iter().enumerate() {
        for udp in [false, true] {
            let name = format!("srv{i}{udp}");
            let srv = lab.spawn(&pc1, &name, srv_bin, &["-s", "-1", "-J"]);
            lab.wait_port(&pc1, PC1_IP, 5201);
            let mut args = vec!["-c", PC1_IP, "-t", "1", "-J"];
            if udp {
                args.extend_from_slice(&["-u", "-b", "10M"]);
            }
            let (code, out, err) = lab.run(&board, &format!("c{i}{udp}"), bin(), &args, T);
            assert_eq!(code, Some(0), "{srv_bin} udp={udp}: {err}\n{out}");
            assert_eq!(
                lab.wait(srv, Duration::from_secs(10)),
                Some(0),
                "{srv_bin} udp={udp}"
            );
            let (sout, _) = lab.output(&name);
            let s = json(&sout, "stock -s -J");
            assert!(s.get("error").is_none(), "{srv_bin} udp={udp}: {sout}");
            // The server counted what our client sent (3.9's UDP server writes its -J before
            // the results exchange: packets, not bytes).
            let c = json(&out, "netperfd -J");
            assert!(num(&c, "/end/sum_sent/bytes") > 0.0);
            let srv_got = if udp {
                num(&s, "/end/streams/0/udp/packets")
            } else {
                num(&s, "/end/sum_received/bytes")
            };
            assert!(srv_got > 0.0, "{srv_bin} udp={udp}: {sout}");
        }
    }
}
