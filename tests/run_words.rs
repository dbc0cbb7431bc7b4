//! Issue 40 item 1: a run's status, role, protocol and direction are typed at the store edge
//! and stored as the words they always were; the schema refuses other status and role words,
//! and an unknown protocol or direction word is kept as it is.

use netperfd::model::{RunDirection, RunProtocol, RunRole, RunStatus};
use netperfd::store::{NewRun, Store};
use serde_json::json;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("netperfd-test-words-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The words as the columns hold them, read with plain SQL.
fn columns(dir: &std::path::Path, id: i64) -> (String, String, String, String) {
    let c = rusqlite::Connection::open(dir.join("netperfd.sqlite")).expect("open");
    c.query_row(
        "SELECT role, protocol, direction, status FROM runs WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .expect("row")
}

#[test]
fn run_words_are_stored_as_before_and_unknown_ones_are_kept() {
    let dir = tmp("stored");
    let s = Store::open_dir(&dir).expect("store");
    let new = |role, protocol, direction| NewRun {
        role,
        protocol,
        peer_host: "192.0.2.2".into(),
        peer_port: 5201,
        direction,
        params: json!({"time": 1}),
        ..Default::default()
    };
    let served = s
        .create_run(&new(RunRole::Server, RunProtocol::Udp, RunDirection::Bidir))
        .expect("run");
    let monitor = s
        .create_run(&NewRun {
            kind: netperfd::model::RunKind::Monitor,
            ..new(RunRole::Client, RunProtocol::Unset, RunDirection::Unset)
        })
        .expect("run");
    // The same words as before the types: what the columns, the API and exports show.
    let words = |t: (&str, &str, &str, &str)| {
        (
            t.0.to_string(),
            t.1.to_string(),
            t.2.to_string(),
            t.3.to_string(),
        )
    };
    assert_eq!(
        columns(&dir, served),
        words(("server", "UDP", "bidir", "running"))
    );
    assert_eq!(columns(&dir, monitor), words(("client", "", "", "running")));
    s.mark_ended(
        served,
        RunStatus::Completed,
        None,
        netperfd::model::time::now_ms(),
    )
    .expect("end");
    assert_eq!(columns(&dir, served).3, "completed");
    let r = s.get_run(served).expect("read").expect("run");
    assert_eq!(
        (r.role, &r.protocol, &r.direction, r.status),
        (
            RunRole::Server,
            &RunProtocol::Udp,
            &RunDirection::Bidir,
            RunStatus::Completed
        )
    );
    assert!(r.invalid.is_empty());
    let v = serde_json::to_value(&r).expect("json");
    assert_eq!(
        (&v["role"], &v["protocol"], &v["direction"], &v["status"]),
        (
            &json!("server"),
            &json!("UDP"),
            &json!("bidir"),
            &json!("completed")
        )
    );

    // The schema keeps status and role to their words (CHECK constraints): nothing else can
    // be stored, so the closed enums read every row.
    let c = rusqlite::Connection::open(dir.join("netperfd.sqlite")).expect("open");
    for set in ["status = 'paused'", "role = 'peer'"] {
        let e = c
            .execute(&format!("UPDATE runs SET {set} WHERE id = ?1"), [served])
            .expect_err("refused");
        assert!(e.to_string().contains("CHECK constraint failed"), "{e}");
    }
    // Protocol and direction words this netperfd never writes (a hand-edited database, a
    // history file from a later version) are kept and served as they are.
    c.execute(
        "UPDATE runs SET protocol = 'QUIC', direction = 'up' WHERE id = ?1",
        [served],
    )
    .expect("update");
    drop(c);
    let r = s.get_run(served).expect("read").expect("run");
    assert!(r.invalid.is_empty(), "{:?}", r.invalid);
    assert_eq!(
        (&r.protocol, &r.direction),
        (
            &RunProtocol::Other("QUIC".into()),
            &RunDirection::Other("up".into())
        )
    );
    assert!(!r.protocol.is_udp());
    let v = serde_json::to_value(&r).expect("json");
    assert_eq!(
        (&v["protocol"], &v["direction"]),
        (&json!("QUIC"), &json!("up"))
    );
    // The list still shows the row.
    let all = s.list_runs(&Default::default()).expect("list");
    assert_eq!(all.len(), 2);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// s52 tryout: `netperfd runs list | head` panicked ("failed printing to stdout: Broken
/// pipe"; exit 101 with a backtrace). With its reader gone the command now ends as Unix
/// tools do: killed by SIGPIPE, no panic.
#[test]
fn runs_list_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tmp("pipe");
    let s = Store::open_dir(&dir).expect("store");
    for i in 0..200 {
        s.create_run(&NewRun {
            peer_host: format!("192.0.2.{}", i % 250 + 1),
            peer_port: 5201,
            params: json!({"time": 1}),
            ..Default::default()
        })
        .expect("run");
    }
    drop(s);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_netperfd"))
        .args(["runs", "--data"])
        .arg(&dir)
        .arg("list")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The reader leaves before reading anything.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {err}",
        out.status
    );
    let _ = std::fs::remove_dir_all(&dir);
}
