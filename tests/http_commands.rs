//! The HTTP & raw TCP page's commands, exactly as shown, from a PC (issue 12): the daemon
//! listens on every address in the board namespace; a PC in pc1 logs in at 192.0.2.1, reads
//! `/traffic`, and every command line there names the board's real address (never
//! `<board>`, 0.0.0.0 or 127.0.0.1). The curl and axel lines run as they are (`sh -c TEXT`,
//! Debian 12's curl and axel 2.17) and must exit 0 with one completed `http-serve` run of the
//! full size each; the `nc` lines run for 2 s (they run until stopped) and leave a
//! `tcp-sink` / `tcp-source` run with bytes. Probes — connect and close, connect and send
//! garbage to the payload port — leave no run.

mod common;
use common::http::*;
use common::*;
use std::io::Write;
use std::time::{Duration, Instant};

const WEB_PORT: u16 = 8097;

fn unescape(s: &str) -> String {
    s.replace("&#60;", "<")
        .replace("&#62;", ">")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&#x2f;", "/")
        .replace("&#x2F;", "/")
        .replace("&amp;", "&")
}

/// The command lines of the services table.
fn commands(page: &str) -> Vec<String> {
    page.split("<code class=\"cmd\">")
        .skip(1)
        .filter_map(|s| s.split("</code>").next())
        .map(unescape)
        .collect()
}

fn runs_of(http: &Http, kind: &str) -> Vec<serde_json::Value> {
    http.get_json(&format!("/api/runs?kind={kind}"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Wait (bounded) until `kind` has `n` runs, none running; returns them (newest first).
fn settled(http: &Http, kind: &str, n: usize) -> Vec<serde_json::Value> {
    let t = Instant::now();
    loop {
        let r = runs_of(http, kind);
        if r.len() >= n && r.iter().all(|x| x["status"] != "running") {
            return r;
        }
        assert!(t.elapsed() < Duration::from_secs(40), "{kind}: {r:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn the_pages_commands_work_as_shown_and_probes_leave_no_runs() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let data = lab.dir().join("data").display().to_string();
    let listen = format!("0.0.0.0:{WEB_PORT}");
    lab.spawn(
        &board,
        "daemon",
        bin(),
        // Plain HTTP on 0.0.0.0 (the commands as a plain_http board shows them).
        &[
            "daemon",
            "--listen",
            &listen,
            "--data",
            &data,
            "--plain-http",
        ],
    );
    for p in [WEB_PORT, 8088, 5009, 5019] {
        lab.wait_port(&board, BOARD_IP, p);
    }
    let mut pc = Http::new(Some(&pc1), &format!("http://{BOARD_IP}:{WEB_PORT}"));
    set_up(&lab, &mut pc);

    let page = pc.get("/traffic").body;
    let cmds = commands(&page);
    eprintln!("commands: {cmds:#?}");
    assert!(cmds.len() >= 6, "{page}");
    for c in &cmds {
        assert!(c.contains(BOARD_IP), "{c}");
        for bad in ["<board>", "0.0.0.0", "127.0.0.1"] {
            assert!(!c.contains(bad), "{c}");
        }
    }
    let find = |start: &str| -> String {
        cmds.iter()
            .find(|c| c.starts_with(start))
            .cloned()
            .unwrap_or_else(|| panic!("no {start} command in {cmds:?}"))
    };

    // curl and axel as shown: exit 0, one completed run of the whole payload each.
    for (tool, size) in [("curl ", 100_000_000i64), ("axel ", 1_000_000_000)] {
        let cmd = find(tool);
        let before = runs_of(&pc, "http-serve").len();
        let (code, out, err) = lab.run(
            &pc1,
            tool.trim(),
            "sh",
            &["-c", &cmd],
            Duration::from_secs(120),
        );
        assert_eq!(code, Some(0), "{cmd}: {out}{err}");
        let runs = settled(&pc, "http-serve", before + 1);
        assert_eq!(runs.len(), before + 1, "{cmd}: one run");
        let r = &runs[0];
        eprintln!(
            "{cmd}: run {} {} bytes {} bit/s",
            r["id"], r["status"], r["bytes"],
        );
        assert_eq!(r["status"], "completed", "{r}");
        // axel may fetch a few KB twice when it rebalances its last ranges.
        let bytes = r["bytes"].as_i64().unwrap_or(0);
        assert!(bytes >= size && bytes <= size + size / 100, "{r}");
        assert!(
            r["receiver_bps"].as_f64().unwrap_or(0.0) > 1e6
                || r["sender_bps"].as_f64().unwrap_or(0.0) > 1e6,
            "{r}"
        );
    }
    // The axel line cleans up after itself (the scratch file and axel's state file).
    assert!(!std::path::Path::new("/tmp/payload-1G").exists());
    assert!(!std::path::Path::new("/tmp/payload-1G.st").exists());

    // nc into the sink and out of the source, as shown, for 2 s.
    for (start, kind) in [("nc ", "tcp-sink"), ("nc -d ", "tcp-source")] {
        let cmd = cmds
            .iter()
            .find(|c| {
                c.starts_with(start)
                    && !c.contains('|')
                    && (start == "nc -d " || !c.starts_with("nc -d"))
            })
            .cloned()
            .unwrap_or_else(|| panic!("no {start} command"));
        let (code, _, err) = lab.run(
            &pc1,
            kind,
            "timeout",
            &["2", "sh", "-c", &cmd],
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(124), "{cmd} should run until stopped: {err}");
        let runs = settled(&pc, kind, 1);
        eprintln!("{cmd}: {} bytes", runs[0]["bytes"]);
        assert!(
            runs[0]["bytes"].as_i64().unwrap_or(0) > 1_000_000,
            "{}",
            runs[0]
        );
    }

    // Probes: connect and close (sink, payload port), garbage to the payload port.
    let before: usize = ["tcp-sink", "http-serve"]
        .iter()
        .map(|k| runs_of(&pc, k).len())
        .sum();
    in_ns(&pc1, || {
        for port in [5009u16, 8088] {
            let s = std::net::TcpStream::connect((BOARD_IP, port)).expect("connect");
            drop(s);
        }
        let mut s = std::net::TcpStream::connect((BOARD_IP, 8088)).expect("connect");
        let _ = s.write_all(b"\x16\x03\x01garbage\r\n\r\n");
        // The garbage reaches the server before the close (a margin, not an event).
        std::thread::sleep(Duration::from_millis(200));
    });
    // A duration, not an event: that no run appears is checked after a while.
    std::thread::sleep(Duration::from_secs(2));
    let after: usize = ["tcp-sink", "http-serve"]
        .iter()
        .map(|k| runs_of(&pc, k).len())
        .sum();
    assert_eq!(
        after,
        before,
        "probes left runs: {:?}",
        runs_of(&pc, "tcp-sink")
    );
}
