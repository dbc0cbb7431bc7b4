//! First start without a shell (issue 12), end to end: the daemon listens on 0.0.0.0 in the
//! board namespace with `setup_issue_file` in a scratch directory. Its log line names the
//! board's real address (http://192.0.2.1:PORT/setup, never 0.0.0.0); the login-prompt snippet
//! holds the same URL and the code, and is renewed (with the log line) when the board gets a
//! second address later; a PC in pc1 enters a wrong code (refused, nothing changes),
//! then the code in lower case with a space instead of the dash, and sets the password; the
//! snippet is gone then, and a restart with a password writes none.

mod common;
use common::http::*;
use common::*;

const WEB_PORT: u16 = 8096;

#[test]
fn the_setup_code_reaches_the_console_and_is_accepted_as_typed() {
    let mut lab = Lab::new();
    let (board, pc1) = (lab.board.clone(), lab.pc1.clone());
    let issue = lab.dir().join("issue.d").join("netperfd.issue");
    let conf = lab.dir().join("netperfd.toml");
    std::fs::write(
        &conf,
        format!("setup_issue_file = \"{}\"\n", issue.display()),
    )
    .expect("config");
    let data = lab.dir().join("data").display().to_string();
    let listen = format!("0.0.0.0:{WEB_PORT}");
    let conf_s = conf.display().to_string();
    let args = [
        "daemon",
        "--listen",
        &listen,
        "--data",
        &data,
        "--config",
        &conf_s,
        // Plain HTTP on 0.0.0.0: tests/https.rs covers the HTTPS URL and fingerprint.
        "--plain-http",
    ];
    let d = lab.spawn(&board, "daemon", bin(), &args);
    lab.wait_port(&board, BOARD_IP, WEB_PORT);

    let (_, log) = lab.output("daemon");
    let line = log
        .lines()
        .find(|l| l.contains("no admin password yet"))
        .unwrap_or_else(|| panic!("no setup line in {log}"));
    eprintln!("log: {line}");
    let url = format!("http://{BOARD_IP}:{WEB_PORT}/setup");
    assert!(line.contains(&format!("open {url} and enter")), "{line}");
    assert!(!line.contains("0.0.0.0"), "{line}");
    let code = setup_code(&log);
    assert_eq!(code.len(), 11, "{code}");
    let snippet = std::fs::read_to_string(&issue).expect("the login prompt's snippet");
    eprintln!("{}: {snippet}", issue.display());
    assert!(
        snippet.contains(&url) && snippet.contains(&code),
        "{snippet}"
    );

    // The snippet makes agetty watch address changes (escapes that print nothing) and is
    // renewed when the board gets another address later, as from a DHCP lease (issue 23
    // item 2, issue 22 item 10: it used to keep the addresses of the start).
    assert!(snippet.contains("\\4{netperfd-no-such-port}"), "{snippet}");
    let late = "192.0.2.77";
    let board_if = lab.board_if.clone();
    let (rc, _, err) = lab.run(
        &board,
        "late-address",
        "ip",
        &["addr", "add", &format!("{late}/24"), "dev", &board_if],
        std::time::Duration::from_secs(5),
    );
    assert_eq!(rc, Some(0), "ip addr add: {err}");
    let late_url = format!("http://{late}:{WEB_PORT}/setup");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let renewed = loop {
        let now = std::fs::read_to_string(&issue).unwrap_or_default();
        if now.contains(&late_url) || std::time::Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        renewed.contains(&late_url) && renewed.contains(&url) && renewed.contains(&code),
        "the snippet was not renewed with {late_url}: {renewed}"
    );
    let (_, log) = lab.output("daemon");
    assert!(
        log.lines()
            .any(|l| l.contains("addresses changed") && l.contains(&late_url)),
        "{log}"
    );

    // A PC on the bench: the wrong code changes nothing.
    let mut pc = Http::new(Some(&pc1), &format!("http://{BOARD_IP}:{WEB_PORT}"));
    let r = pc.form(
        "/setup",
        &[
            ("code", "00000 00000"),
            ("password", "correct horse"),
            ("confirm", "correct horse"),
        ],
    );
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(issue.exists(), "still on the login prompt");
    assert_eq!(pc.get("/setup").status, 200, "setup still open");

    // The code as typed from the console: lower case, a space for the dash.
    let typed = code.to_lowercase().replace('-', " ");
    let r = pc.form(
        "/setup",
        &[
            ("code", &typed),
            ("password", "correct horse"),
            ("confirm", "correct horse"),
        ],
    );
    assert_eq!(r.status, 303, "{typed:?}: {}", r.body);
    pc.take_cookie(&r);
    assert_eq!(pc.get("/").status, 200, "logged in");
    assert!(!issue.exists(), "the code left the login prompt");

    // Restarted with a password: no snippet, no setup line.
    lab.kill(d);
    lab.spawn(&board, "daemon2", bin(), &args);
    lab.wait_port(&board, BOARD_IP, WEB_PORT);
    let (_, log2) = lab.output("daemon2");
    assert!(!log2.contains("setup code"), "{log2}");
    assert!(!issue.exists());
}
