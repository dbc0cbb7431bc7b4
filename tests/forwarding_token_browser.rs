//! The agent token rule of the Forwarding page, as a user meets it in headless Chromium
//! (issue 12: "a new token replaces the stored one only after it worked"). pc1 runs the peer
//! agent with the lab token, pc2 stock `iperf3 -s`, the daemon in the board namespace:
//! 1. a forwarding run from the form with the good token completes, and the page then says a
//!    token of its length is stored;
//! 2. the same form with a mistyped token: the run page says the run failed because the agent
//!    refused the token (HTTP 401), and the Forwarding page still says the good token's length
//!    is stored (never the token itself);
//! 3. a run with the token field left empty uses the stored token and completes, forwarding is
//!    off again afterwards.

mod common;
use common::browser::{chromedriver, Browser};
use common::http::*;
use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const WEB_PORT: u16 = 8098;
const WD_PORT: u16 = 9525;
const TOKEN: &str = "lab-token-0123456789";
const WRONG: &str = "lab-token-0123456780x";

fn ns_out(ns: &str, prog: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, prog])
        .args(args)
        .output()
        .expect("run in namespace");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Poll the API until run `id` is no longer live; its API view.
fn ended(http: &Http, id: i64) -> Value {
    let t = Instant::now();
    loop {
        let v = http.get_json(&format!("/api/runs/{id}"));
        if v["live"] == false && v["run"]["status"] != "running" {
            return v;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "run {id}: {v}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Fill the forwarding form (token as given, empty = use the stored one), start the run from
/// the browser and wait for its end; (run id, the run page's status and error text).
fn form_run(lab: &Lab, b: &Browser, http: &Http, token: &str) -> (i64, String, String) {
    b.go("/forwarding");
    b.type_into("input[name=peer]", &format!("http://{PC1_IP}:5280"));
    b.type_into("input[name=token]", token);
    b.type_into("input[name=target]", PC2_IP);
    b.type_into("input[name=duration]", "1");
    b.js(
        "document.querySelector('select[name=ingress]').value = 'eth0';
          document.querySelector('select[name=egress]').value = 'eth1';
          document.querySelector('input[name=nat]').checked = true;",
    );
    b.click("form[action='/forwarding/run'] button[type=submit]");
    let t = Instant::now();
    let id = loop {
        let p = b.path();
        if let Some(id) = p.strip_prefix("/runs/").and_then(|s| s.parse::<i64>().ok()) {
            break id;
        }
        let err = b.js(
            "const e = document.getElementById('form-error'); return e ? e.textContent : null;",
        );
        assert!(err.is_null(), "the form refused the run: {err}");
        assert!(t.elapsed() < Duration::from_secs(10), "still on {p}");
        std::thread::sleep(Duration::from_millis(100));
    };
    ended(http, id);
    // A token given is stored (or not) after the run's end: the daemon logs which.
    if !token.is_empty() {
        let said = [
            format!("run {id} completed: its peer agent address and token are stored"),
            format!("run {id} did not complete: the agent address and token given"),
        ];
        wait_until(
            Duration::from_secs(10),
            "the daemon's word on the token",
            || {
                let (_, log) = lab.output("daemon");
                said.iter().any(|s| log.contains(s))
            },
        );
    }
    b.go(&format!("/runs/{id}"));
    let status = b.wait_text("status", "");
    let error = b
        .js("const e = document.querySelector('dd.error'); return e ? e.textContent : '';")
        .as_str()
        .unwrap_or_default()
        .to_string();
    (id, status, error)
}

/// What the Forwarding page says about the stored token (the token field's placeholder) and
/// what the field holds.
fn token_field(b: &Browser) -> (String, String) {
    b.go("/forwarding");
    let v = b.js(
        "const i = document.querySelector('input[name=token]'); return [i.placeholder, i.value];",
    );
    (
        v[0].as_str().unwrap_or_default().to_string(),
        v[1].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn a_mistyped_token_fails_the_run_and_the_good_stored_token_stays() {
    let mut lab = Lab::with_pc2();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let pc2 = lab.pc2.clone().expect("pc2");
    ns_out(&pc1, "ip", &["route", "add", "default", "via", BOARD_IP]);
    let tf = lab.dir().join("token");
    std::fs::write(&tf, format!("{TOKEN}\n")).expect("token file");
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
            tf.to_str().expect("utf-8"),
        ],
    );
    lab.wait_port(&pc1, PC1_IP, 5280);
    lab.spawn(&pc2, "iperf3-s", "iperf3", &["-s"]);
    lab.wait_port(&pc2, PC2_IP, 5201);
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &["--iperf3-port", "0"]);
    set_up(&lab, &mut http);
    chromedriver(&mut lab, &board, WD_PORT);
    let b = Browser::open(
        &board,
        WD_PORT,
        &format!("http://127.0.0.1:{WEB_PORT}"),
        1400,
        1000,
        &lab.dir().join("profile"),
    );
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|p| p.join("ui-screens"))
        .expect("target dir");
    let _ = std::fs::create_dir_all(&shots);
    b.log_in("correct horse");
    assert_eq!(token_field(&b).0, "no token stored yet");

    // 1. The good token: the run completes, the token is stored (its length shown, not it).
    let (good, status, error) = form_run(&lab, &b, &http, TOKEN);
    assert_eq!(status, "completed", "run {good}: {error}");
    let (note, value) = token_field(&b);
    assert_eq!(
        note,
        "a token is stored (20 characters); leave empty to use it"
    );
    assert_eq!(value, "", "the token field is sent back empty");

    // 2. A mistyped token (21 characters): the run fails and says why.
    let (bad, status, error) = form_run(&lab, &b, &http, WRONG);
    b.screenshot(&shots, "forwarding-wrong-token-run");
    assert_eq!(status, "failed", "run {bad}");
    assert!(
        error.contains("refused the token (HTTP 401)"),
        "run {bad} error: {error}"
    );
    assert_eq!(
        ns_out(&board, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "0"
    );
    // The stored token is still the good one: 20 characters, not the 21 just typed.
    let (note, value) = token_field(&b);
    b.screenshot(&shots, "forwarding-after-wrong-token");
    assert_eq!(
        note,
        "a token is stored (20 characters); leave empty to use it"
    );
    assert_eq!(value, "");
    let page = b.js("return document.body.innerText;");
    let page = page.as_str().unwrap_or_default();
    assert!(
        !page.contains(TOKEN) && !page.contains(WRONG),
        "a token is shown"
    );
    assert!(
        page.contains("refused the token"),
        "the failed run's error is listed"
    );

    // 3. The field left empty: the stored (good) token is used and the run completes.
    let (again, status, error) = form_run(&lab, &b, &http, "");
    assert_eq!(status, "completed", "run {again}: {error}");
    let v = http.get_json(&format!("/api/runs/{again}"));
    assert!(
        num(&v["run"]["summary"], "/peer_report/end/sum_received/bytes") > 0.0,
        "{v}"
    );
    assert_eq!(
        ns_out(&board, "cat", &["/proc/sys/net/ipv4/ip_forward"]),
        "0"
    );
    assert_eq!(
        token_field(&b).0,
        "a token is stored (20 characters); leave empty to use it"
    );
}
