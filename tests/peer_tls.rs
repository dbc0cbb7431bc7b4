//! The peer agent link over TLS (issue 41), in network namespaces: `netperfd peer` in pc1
//! serves HTTPS with a certificate it made in its data directory and prints the certificate's
//! SHA-256; the board (`netperfd forward`) pins it in the agent's address
//! (`https://…#sha256=…`). Independent truths: the SHA-256 of the certificate file in the
//! agent's data directory (computed here), the agent's own log of the tests it was asked for,
//! and the board's port counters.
//! * the pinned fingerprint: the forwarding run completes through the board;
//! * another fingerprint: refused with both named, and the agent is never asked for a test;
//! * `https://` without a fingerprint: bad input, nothing recorded;
//! * plain HTTP to an agent with `--plain-http` still works; `http://` to the TLS agent is a
//!   clear error;
//! * a restart of the agent keeps its certificate (same fingerprint).

mod common;
use common::*;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::process::Command;
use std::time::{Duration, Instant};

const TOKEN: &str = "lab-token-0123456789";

fn counter(ns: &str, dev: &str, what: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/{dev}/statistics/{what}"))
        .output()
        .expect("cat counter");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no counter {what} of {dev} in {ns}"))
}

/// The agent's stderr once it has printed its fingerprint line (bounded wait).
fn agent_said(lab: &Lab, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, err) = lab.output(name);
        if err.contains("on the board: --peer") || Instant::now() > deadline {
            return err;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The text after `key` up to the end of its line.
fn after<'a>(text: &'a str, key: &str) -> &'a str {
    let at = text
        .find(key)
        .unwrap_or_else(|| panic!("no '{key}' in {text}"));
    text[at + key.len()..].lines().next().unwrap_or_default()
}

fn forward(lab: &mut Lab, name: &str, peer: &str, tf: &str) -> (Option<i32>, Value, String) {
    let data = lab.dir().join("board-data");
    let data = data.to_str().expect("utf-8").to_string();
    let board = lab.board.clone();
    let args = [
        "forward",
        "--data",
        &data,
        "--json",
        "--peer",
        peer,
        "--token-file",
        tf,
        "--to",
        PC2_IP,
        "--in",
        "eth0",
        "--out",
        "eth1",
        "--nat",
        "-t",
        "2",
    ];
    let (code, out, err) = lab.run(&board, name, bin(), &args, Duration::from_secs(60));
    let v = if out.trim().is_empty() {
        Value::Null
    } else {
        json(&out, "netperfd forward --json")
    };
    (code, v, err)
}

#[test]
fn the_board_pins_the_agent_s_certificate_and_plain_http_still_works() {
    let mut lab = Lab::with_pc2();
    let (board, pc1, pc2) = (
        lab.board.clone(),
        lab.pc1.clone(),
        lab.pc2.clone().expect("pc2"),
    );
    let st = Command::new("ip")
        .args(["-n", &pc1, "route", "add", "default", "via", BOARD_IP])
        .status()
        .expect("ip route");
    assert!(st.success());
    let tf = lab.token_file(TOKEN);
    let agent_dir = lab.dir().join("agent-data");
    let agent_dir = agent_dir.to_str().expect("utf-8").to_string();
    let tls_args = [
        "peer",
        "--listen",
        "192.0.2.2:5280",
        "--token-file",
        &tf,
        "--data-dir",
        &agent_dir,
    ];
    let tls_agent = lab.spawn(&pc1, "agent-tls", bin(), &tls_args);
    lab.spawn(
        &pc1,
        "agent-plain",
        bin(),
        &[
            "peer",
            "--listen",
            "192.0.2.2:5281",
            "--plain-http",
            "--token-file",
            &tf,
            "--echo-port",
            "0",
        ],
    );
    lab.wait_port(&pc1, PC1_IP, 5280);
    lab.wait_port(&pc1, PC1_IP, 5281);
    lab.spawn(&pc2, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc2, PC2_IP, 5201);

    // The fingerprint printed is SHA-256 of the certificate in the agent's data directory.
    let said = agent_said(&lab, "agent-tls");
    let fp = after(&said, "certificate SHA-256 ")
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let pem = std::fs::read(format!("{agent_dir}/tls-cert.pem")).expect("the agent's certificate");
    let der = rustls::pki_types::CertificateDer::from_pem_slice(&pem).expect("PEM");
    let truth: Vec<String> = Sha256::digest(der.as_ref())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    assert_eq!(fp, truth.join(":"), "{said}");
    let url = format!("https://{PC1_IP}:5280#sha256={fp}");
    assert_eq!(
        after(&said, "on the board: --peer "),
        format!("'{url}'"),
        "{said}"
    );
    assert!(said.contains("made now in"), "{said}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(format!("{agent_dir}/tls-key.pem"))
        .expect("the agent's key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // The pinned certificate: the run completes through the board.
    let tx0 = counter(&board, "eth1", "tx_bytes");
    let (code, run, err) = forward(&mut lab, "fwd-tls", &url, &tf);
    let tx = counter(&board, "eth1", "tx_bytes") - tx0;
    assert_eq!(code, Some(0), "{err}\n{run}");
    assert_eq!(run["status"], "completed", "{run}");
    let received = num(&run["summary"], "/peer_report/end/sum_received/bytes");
    assert!(received > 1e6, "{run}");
    assert!(
        tx as f64 >= received,
        "eth1 sent {tx} B, PC2 received {received} B"
    );
    let asked = |lab: &Lab| {
        lab.output("agent-tls")
            .1
            .matches("peer test requested")
            .count()
    };
    assert_eq!(asked(&lab), 1, "{}", lab.output("agent-tls").1);

    // Another fingerprint: refused before the token is sent, both fingerprints named, the
    // agent never asked for a test.
    let wrong_fp = match fp.strip_prefix("00") {
        Some(rest) => format!("01{rest}"),
        None => format!("00{}", fp.get(2..).unwrap_or_default()),
    };
    let (code, run, err) = forward(
        &mut lab,
        "fwd-wrong",
        &format!("https://{PC1_IP}:5280/#sha256={wrong_fp}"),
        &tf,
    );
    assert_eq!(code, Some(1), "{err}\n{run}");
    assert_eq!(run["status"], "failed", "{run}");
    let e = run["error"].as_str().unwrap_or_default();
    assert!(
        e.contains(&format!(
            "the peer agent at https://{PC1_IP}:5280 presented a certificate with SHA-256 {fp}, not the pinned {wrong_fp}: refused, the token was not sent"
        )),
        "{e}"
    );
    assert_eq!(asked(&lab), 1, "the agent was asked for a test");
    let fwd = Command::new("ip")
        .args([
            "netns",
            "exec",
            &board,
            "cat",
            "/proc/sys/net/ipv4/ip_forward",
        ])
        .output()
        .expect("ip_forward");
    assert_eq!(String::from_utf8_lossy(&fwd.stdout).trim(), "0");

    // https:// without a fingerprint: bad input, nothing recorded.
    let (code, run, err) = forward(
        &mut lab,
        "fwd-nopin",
        &format!("https://{PC1_IP}:5280"),
        &tf,
    );
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(run, Value::Null);
    assert!(
        err.contains("https:// needs the agent's certificate fingerprint"),
        "{err}"
    );

    // http:// to the TLS agent: a clear error.
    let (code, run, _) = forward(
        &mut lab,
        "fwd-http-tls",
        &format!("http://{PC1_IP}:5280"),
        &tf,
    );
    assert_eq!(code, Some(1));
    let e = run["error"].as_str().unwrap_or_default();
    assert!(
        e.contains("is reached with https://HOST:PORT#sha256=FINGERPRINT"),
        "{e}"
    );

    // Plain HTTP to an agent with --plain-http still works.
    let (code, run, err) = forward(&mut lab, "fwd-plain", &format!("http://{PC1_IP}:5281"), &tf);
    assert_eq!(code, Some(0), "{err}\n{run}");
    assert_eq!(run["status"], "completed", "{run}");
    assert!(lab
        .output("agent-plain")
        .1
        .contains("plain HTTP (--plain-http)"));

    // A restart keeps the certificate: the same fingerprint, and the pinned address works.
    lab.kill(tls_agent);
    lab.spawn(&pc1, "agent-tls2", bin(), &tls_args);
    lab.wait_port(&pc1, PC1_IP, 5280);
    let again = agent_said(&lab, "agent-tls2");
    assert!(
        again.contains(&format!("certificate SHA-256 {fp} (kept in")),
        "{again}"
    );
}
