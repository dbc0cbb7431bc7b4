//! Loss at the end of a UDP run (issue 39, leftover): a receiver that counts gaps in the
//! sequence numbers never sees the datagrams lost after the last one that arrived. With the
//! sender's count from the results exchange they are lost too. The truth is the kernel's: an
//! iptables DROP rule inserted in the receiving namespace for the last part of the run, its
//! own packet and byte counters (skbs and bytes: a GSO batch of our sender is one packet
//! with one set of headers, so its datagrams are (bytes − 28 × packets) / payload).
//! And a UDP test to a port where nothing listens fails, saying the peer's host answered
//! port unreachable.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);
/// IPv4 + UDP header bytes per packet the rule counts.
const HEADERS: u64 = 28;

fn iptables(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "iptables"])
        .args(args)
        .output()
        .expect("run iptables");
    assert!(
        out.status.success(),
        "iptables {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The datagrams of `len` payload bytes the DROP rule on UDP port `port` dropped (the rule's
/// own counters: packets and bytes).
fn dropped_by_rule(ns: &str, port: u16, len: u64) -> u64 {
    let out = iptables(ns, &["-L", "INPUT", "-v", "-x", "-n"]);
    let dpt = format!("dpt:{port}");
    let line = out
        .lines()
        .find(|l| l.contains("DROP") && l.contains(&dpt))
        .unwrap_or_else(|| panic!("no DROP rule for {dpt}:\n{out}"));
    let mut f = line.split_whitespace();
    let pkts: u64 = f.next().and_then(|x| x.parse().ok()).expect("pkts");
    let bytes: u64 = f.next().and_then(|x| x.parse().ok()).expect("bytes");
    let payload = bytes - HEADERS * pkts;
    assert_eq!(payload % len, 0, "{line}");
    payload / len
}

/// A sender (`prog` with `args`, in the board namespace) to our server on pc1 port `port`;
/// 2 s into the 3 s run every UDP datagram to the port is dropped at pc1's INPUT. Gives the
/// server's -J, the sender's output and the datagrams the rule dropped.
fn run_with_tail_dropped(prog: &str, args: &[&str], port: u16) -> (serde_json::Value, String, u64) {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let p = port.to_string();
    let srv = lab.spawn(&pc1, "srv", bin(), &["-s", "-1", "-J", "-p", &p]);
    lab.wait_port(&pc1, PC1_IP, port);
    let cli = lab.spawn(&board, "cli", prog, args);
    // The tail is dropped from 2 s into the 3 s run: a duration.
    std::thread::sleep(Duration::from_millis(2_000));
    let dport = port.to_string();
    iptables(
        &pc1,
        &["-I", "INPUT", "-p", "udp", "--dport", &dport, "-j", "DROP"],
    );
    assert_eq!(lab.wait(cli, T), Some(0), "{:?}", lab.output("cli"));
    assert_eq!(
        lab.wait(srv, Duration::from_secs(10)),
        Some(0),
        "{:?}",
        lab.output("srv")
    );
    let dropped = dropped_by_rule(&pc1, port, 1200);
    let s = json(&lab.output("srv").0, "netperfd -s -J");
    (s, lab.output("cli").0, dropped)
}

fn check_server(s: &serde_json::Value, dropped: u64, who: &str) {
    let lost = num(s, "/end/sum/lost_packets") as u64;
    let total = num(s, "/end/sum/packets") as u64;
    let after = num(s, "/end/sum/netperfd_lost_after_last") as u64;
    let stream_after = num(s, "/end/streams/0/udp/netperfd_lost_after_last") as u64;
    // About a third of a 3 s run at 20 Mbit/s of 1200-byte datagrams: ~2,000.
    assert!(dropped > 1_000, "{who}: the rule dropped {dropped}");
    assert_eq!(
        lost, dropped,
        "{who}: lost {lost} of {total}, the rule dropped {dropped}"
    );
    assert_eq!(
        after, dropped,
        "{who}: all of them after the last one received"
    );
    assert_eq!(stream_after, dropped, "{who}: the stream's own key");
    // The intervals stay as they were: the tail is known only at the end.
    let in_intervals: f64 = s["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["sum"]["lost_packets"].as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(in_intervals, 0.0, "{who}");
}

#[test]
fn loss_after_the_last_datagram_is_lost_our_client() {
    let _g = serial();
    let args = [
        "-c", PC1_IP, "-p", "5311", "-u", "-l", "1200", "-b", "20M", "-t", "3", "-J",
    ];
    let (s, out, dropped) = run_with_tail_dropped(bin(), &args, 5311);
    check_server(&s, dropped, "netperfd -c");
    // The client's own figures come from the server's results: the same.
    let c = json(&out, "netperfd -c -J");
    assert_eq!(num(&c, "/end/sum_received/lost_packets") as u64, dropped);
    let sent = num(&c, "/end/sum_sent/packets") as u64;
    assert_eq!(num(&c, "/end/sum_received/packets") as u64, sent);
}

#[test]
fn loss_after_the_last_datagram_is_lost_stock_clients() {
    let _g = serial();
    let newest = newest_stock();
    for (prog, port) in [(newest.as_str(), 5312u16), ("/usr/bin/iperf3", 5313)] {
        if !std::path::Path::new(prog).exists() {
            eprintln!("skipping {prog}: not installed");
            continue;
        }
        let p = port.to_string();
        let args = [
            "-c", PC1_IP, "-p", &p, "-u", "-l", "1200", "-b", "20M", "-t", "3", "-J",
        ];
        let (s, out, dropped) = run_with_tail_dropped(prog, &args, port);
        check_server(&s, dropped, prog);
        // Our results carry the tail, so the stock client prints it too.
        let c = json(&out, prog);
        let lost = c["end"]["sum"]["lost_packets"]
            .as_u64()
            .or_else(|| c["end"]["sum_received"]["lost_packets"].as_u64())
            .expect("lost_packets");
        assert_eq!(lost, dropped, "{prog}: its own lost_packets");
    }
}

/// -R: the server sends, our client receives; nothing is dropped, so nothing may be lost
/// after the last datagram either (the server's count stops at TEST_END); then a DROP rule
/// in the client's namespace for the last second.
#[test]
fn reverse_tail_is_lost_and_no_tail_is_not() {
    let _g = serial();
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let srv = lab.spawn(&pc1, "srv", bin(), &["-s", "-p", "5314"]);
    lab.wait_port(&pc1, PC1_IP, 5314);
    let args = [
        "-c", PC1_IP, "-p", "5314", "-u", "-l", "1200", "-b", "20M", "-t", "3", "-R", "-J",
    ];
    let (code, out, err) = lab.run(&board, "clean", bin(), &args, T);
    assert_eq!(code, Some(0), "{err}");
    let c = json(&out, "netperfd -c -R");
    assert_eq!(num(&c, "/end/sum_received/lost_packets"), 0.0, "{out}");
    // The tail dropped at the client's INPUT.
    let cli = lab.spawn(&board, "cli", bin(), &args);
    // The tail is dropped from 1.5 s into the 3 s run: a duration.
    std::thread::sleep(Duration::from_millis(1_500));
    iptables(
        &board,
        &["-I", "INPUT", "-p", "udp", "--sport", "5314", "-j", "DROP"],
    );
    assert_eq!(lab.wait(cli, T), Some(0), "{:?}", lab.output("cli"));
    let out = iptables(&board, &["-L", "INPUT", "-v", "-x", "-n"]);
    let line = out
        .lines()
        .find(|l| l.contains("DROP") && l.contains("spt:5314"))
        .expect("rule");
    let mut f = line.split_whitespace();
    let pkts: u64 = f.next().and_then(|x| x.parse().ok()).expect("pkts");
    let bytes: u64 = f.next().and_then(|x| x.parse().ok()).expect("bytes");
    let dropped = (bytes - HEADERS * pkts) / 1200;
    let c = json(&lab.output("cli").0, "netperfd -c -R");
    assert!(dropped > 500, "{dropped}");
    assert_eq!(num(&c, "/end/sum_received/lost_packets") as u64, dropped);
    assert_eq!(
        num(&c, "/end/sum_received/netperfd_lost_after_last") as u64,
        dropped
    );
    lab.kill(srv);
}

/// `netperfd -c ADDR --iperf2 -u` with no iperf 2 server: the peer's host answers port
/// unreachable; the run fails saying so, with no "reached the requested rate".
#[test]
fn a_udp_test_to_a_closed_port_fails_saying_port_unreachable() {
    let _g = serial();
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let args = [
        "-c", PC1_IP, "-p", "5315", "--iperf2", "-u", "-b", "10M", "-t", "2",
    ];
    let (code, out, err) = lab.run(&board, "closed", bin(), &args, T);
    assert_ne!(code, Some(0), "{out}\n{err}");
    let all = format!("{out}\n{err}");
    assert!(
        all.contains("answered ICMP port unreachable")
            && all.contains("no iperf 2 UDP server listens on port 5315"),
        "{all}"
    );
    assert!(!all.contains("reached the requested rate"), "{all}");
}
