//! Byte- and block-limited tests (`-n` / `-k`) through a queue: stock `iperf3 -c` in pc1 sends
//! through a 200 Mbit/s TBF with a 2 MB queue on its own egress, so megabytes are still in
//! flight when it sends TEST_END (it does so once it has *written* its total). netperfd's
//! server reads them before it reports (`docs/iperf3-wire.md` §8.4) and counts exactly what
//! the client sent; stock `iperf3 -s` in the same topology stops short, which shows the
//! difference is real.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(40);
/// `-n 50M`, bytes.
const N50M: f64 = 52_428_800.0;
/// iperf3's default TCP block, bytes.
const BLOCK: f64 = 131_072.0;
/// The TBF's rate, bits/s.
const RATE: f64 = 200e6;

/// pc1's egress: 200 Mbit/s token bucket, 128 KB burst, 2 MB queue.
fn bottleneck(lab: &Lab) {
    let st = Command::new("ip")
        .args([
            "netns", "exec", &lab.pc1, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
            "200mbit", "burst", "128kb", "limit", "2mb",
        ])
        .status()
        .expect("tc");
    assert!(st.success(), "tc qdisc add tbf failed");
}

/// Start a one-off server in the board namespace (ours, or stock with `stock`), run stock
/// `iperf3 -c board -J flags` in pc1 through the bottleneck; both JSON documents.
fn through_queue(stock: bool, flags: &[&str]) -> (Value, Value) {
    through_queue_from("iperf3", stock, flags)
}

/// [`through_queue`] with `client` (a program path) as the client.
fn through_queue_from(client: &str, stock: bool, flags: &[&str]) -> (Value, Value) {
    let mut lab = Lab::new();
    bottleneck(&lab);
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    let srv = if stock {
        lab.spawn(&board, "srv", "iperf3", &["-s", "-1", "-J"])
    } else {
        lab.spawn(&board, "srv", bin(), &["-s", "-1", "-J"])
    };
    lab.wait_port(&board, BOARD_IP, 5201);
    let mut args = vec!["-c", BOARD_IP, "-J"];
    args.extend_from_slice(flags);
    let (code, out, err) = lab.run(&pc1, "client", client, &args, T);
    assert_eq!(code, Some(0), "iperf3 -c {flags:?} failed: {err}\n{out}");
    assert_eq!(
        lab.wait(srv, Duration::from_secs(10)),
        Some(0),
        "server did not exit 0"
    );
    let (sout, serr) = lab.output("srv");
    assert!(!serr.contains("panicked"), "server panicked: {serr}");
    (json(&out, "iperf3 -c -J"), json(&sout, "server -J"))
}

/// Our server's figures for the client → server leg against the stock client's.
fn assert_counts_every_byte(c: &Value, s: &Value, what: &str) {
    let sent = num(c, "/end/sum_sent/bytes");
    let got = num(s, "/end/sum_received/bytes");
    let told = num(c, "/end/sum_received/bytes");
    eprintln!(
        "{what}: client sent {sent} B, our server received {got} B, the client was told {told} B"
    );
    assert_eq!(got, sent, "{what}: our server's count");
    assert_eq!(told, sent, "{what}: the client's end.sum_received");
    // The receiver's duration runs to the last byte, after the client's TEST_END: its bitrate
    // cannot be above the bottleneck (ending at TEST_END with every byte counted would be).
    let secs = num(s, "/end/sum_received/seconds");
    let c_secs = num(c, "/end/sum_sent/seconds");
    let bps = num(s, "/end/sum_received/bits_per_second");
    eprintln!(
        "{what}: receiver {secs:.3} s, {:.1} Mbit/s; client sender {c_secs:.3} s",
        bps / 1e6
    );
    assert!(
        secs > c_secs,
        "{what}: receiver {secs} s ends before the sender's TEST_END {c_secs} s"
    );
    assert!(
        (got * 8.0 / secs - bps).abs() < 1.0,
        "{what}: bitrate is bytes / seconds"
    );
    assert!(
        bps <= RATE,
        "{what}: {bps} bit/s through a {RATE} bit/s bottleneck"
    );
    // Intervals: none is a stub, none runs past the summary, and only a tail shorter than a
    // tenth of the interval is left out (iperf3's rule).
    let iv = s["intervals"].as_array().cloned().unwrap_or_default();
    assert!(!iv.is_empty(), "{what}: no intervals");
    for i in &iv {
        assert!(num(i, "/sum/seconds") >= 0.1, "{what}: a stub interval {i}");
    }
    let last_end = num(&iv[iv.len() - 1], "/sum/end");
    let end = num(s, "/end/sum_received/end");
    assert!(
        last_end <= end + 1e-6 && end - last_end < 0.1,
        "{what}: last interval ends at {last_end}, the summary at {end}"
    );
    let iv_bytes: f64 = iv.iter().map(|i| num(i, "/sum/bytes")).sum();
    assert!(
        iv_bytes <= got,
        "{what}: intervals hold {iv_bytes} of {got} bytes"
    );
}

#[test]
fn n_through_a_queue_our_server_counts_every_byte() {
    let (c, s) = through_queue(false, &["-n", "50M"]);
    let sent = num(&c, "/end/sum_sent/bytes");
    assert!((N50M..N50M + BLOCK).contains(&sent), "-n 50M sent {sent}");
    assert_counts_every_byte(&c, &s, "-n 50M");
}

#[test]
fn k_through_a_queue_our_server_counts_every_byte() {
    // 400 blocks of 128 KiB = 50 MiB.
    let (c, s) = through_queue(false, &["-k", "400"]);
    let sent = num(&c, "/end/sum_sent/bytes");
    assert!(sent >= 400.0 * BLOCK, "-k 400 sent {sent}");
    assert_counts_every_byte(&c, &s, "-k 400");
}

#[test]
fn n_through_a_queue_stock_server_stops_short() {
    let (c, s) = through_queue(true, &["-n", "50M"]);
    let sent = num(&c, "/end/sum_sent/bytes");
    let got = num(&s, "/end/sum_received/bytes");
    eprintln!("stock server: client sent {sent} B, stock server received {got} B");
    assert!(sent >= N50M, "-n 50M sent {sent}");
    // What was still queued (TBF, socket buffers) when TEST_END came is not counted.
    assert!(
        got < sent,
        "stock iperf3 -s received {got} of {sent}: nothing was in flight?"
    );
    assert_eq!(num(&c, "/end/sum_received/bytes"), got);
}

#[test]
fn bidir_n_through_a_queue_our_server_counts_the_clients_leg() {
    // The server → client leg is not limited, so it reaches 50M first and the client ends
    // the test then: its own leg sent less than -n, and our server counts exactly that.
    let (c, s) = through_queue(false, &["--bidir", "-n", "50M"]);
    let sent = num(&c, "/end/sum_sent/bytes");
    let got = num(&s, "/end/sum_received/bytes");
    let told = num(&c, "/end/sum_received/bytes");
    eprintln!("--bidir -n 50M: client sent {sent} B, our server received {got} B, the client was told {told} B; reverse leg {} B",
        num(&c, "/end/sum_received_bidir_reverse/bytes"));
    assert!(sent > 0.0);
    assert_eq!(got, sent, "our server's count of the client's leg");
    assert_eq!(told, sent, "the client's end.sum_received");
    assert!(num(&c, "/end/sum_received_bidir_reverse/bytes") >= N50M);
}

#[test]
fn n_through_a_queue_from_our_client_our_server_counts_every_byte() {
    // Our client also sends TEST_END once it has written -n, and keeps its sockets open until
    // the results are in, so what it left in flight reaches our server.
    let (c, s) = through_queue_from(bin(), false, &["-n", "50M"]);
    assert_eq!(num(&c, "/end/sum_sent/bytes"), N50M, "-n 50M");
    assert_counts_every_byte(&c, &s, "netperfd -n 50M");
}
