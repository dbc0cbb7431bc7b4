//! History past 500 runs (issue 12): 620 runs written through the store before the daemon
//! starts — iperf3 runs, labelled monitor runs, a suite's runs with its board label, 20 of them
//! dated 2026-01-15 — then `/runs` is paged with its "Older runs" links until the oldest run,
//! and filtered by kind and by date range; a date that is not one is refused with a message
//! (page) or a 400 (API) and nothing is listed.

mod common;
use common::http::*;
use common::*;
use netperfd::model::{RunDirection, RunKind, RunProtocol, RunRole};
use netperfd::store::{NewRun, Store};
use serde_json::json;

const WEB_PORT: u16 = 8094;

/// The run ids in the History table of `html`, in order.
fn ids(html: &str) -> Vec<i64> {
    html.split("<td><a href=\"/runs/")
        .skip(1)
        .filter_map(|s| s.split('"').next().and_then(|n| n.parse().ok()))
        .collect()
}

/// The `href` of the element with `id` in `html`, entities decoded.
fn link(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\""))?;
    let start = html[..at].rfind("href=\"")? + 6;
    let end = start + html[start..].find('"')?;
    Some(
        html[start..end]
            .replace("&amp;", "&")
            .replace("&#x2F;", "/")
            .replace("&#x2f;", "/")
            .replace("&#61;", "="),
    )
}

#[test]
fn history_pages_past_500_runs_and_filters_by_kind_label_suite_and_date() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let data = lab.dir().join("data");
    let (mut all, mut monitors, mut in_suite, mut old) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    {
        let store = Store::open_dir(&data).expect("store");
        let suite = store.create_suite("quick", PC1_IP).expect("suite");
        store
            .set_suite_extra(
                suite,
                &netperfd::store::SuiteExtra {
                    def_id: None,
                    label: Some("board A".into()),
                    plan: serde_json::Value::Null,
                },
            )
            .expect("suite label");
        for i in 0..620 {
            let (kind, params, suite_id) = match i % 10 {
                3 => (
                    RunKind::Monitor,
                    json!({"ports": ["eth0"], "label": format!("mon {i}")}),
                    None,
                ),
                7 => (RunKind::Iperf3, json!({}), Some(suite)),
                _ => (RunKind::Iperf3, json!({}), None),
            };
            let id = store
                .create_run(&NewRun {
                    role: RunRole::Client,
                    protocol: RunProtocol::Tcp,
                    peer_host: PC1_IP.into(),
                    peer_port: 5201,
                    direction: RunDirection::Send,
                    params,
                    suite_id,
                    kind,
                    ..Default::default()
                })
                .expect("run");
            all.push(id);
            match i % 10 {
                3 => monitors.push(id),
                7 => in_suite.push(id),
                _ => {}
            }
            if i < 20 {
                old.push(id);
            }
        }
        drop(store);
        // Close every run and date the first 20 in January (started_at is set by the store).
        let db = rusqlite::Connection::open(data.join("netperfd.sqlite")).expect("sqlite");
        db.execute(
            "UPDATE runs SET status='completed', ended_at=started_at+1000",
            [],
        )
        .expect("close runs");
        db.execute(
            "UPDATE runs SET started_at=1768478400000 WHERE id <= ?1", // 2026-01-15 12:00 UTC
            [old.last().copied().unwrap_or(0)],
        )
        .expect("date runs");
    }
    all.reverse();

    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT, &[]);
    set_up(&lab, &mut http);

    // Paging: 100 per page, newest first, every run exactly once, down to the oldest.
    let mut seen = Vec::new();
    let mut url = "/runs".to_string();
    let mut pages = 0;
    loop {
        let r = http.get(&url);
        assert_eq!(r.status, 200, "{url}: {}", r.body);
        let page = ids(&r.body);
        assert!(page.len() <= 100, "{url}: {} rows", page.len());
        pages += 1;
        seen.extend(page);
        match link(&r.body, "older") {
            Some(next) => url = next,
            None => break,
        }
        assert!(pages < 20, "paging does not end");
    }
    assert_eq!(pages, 7, "620 runs at 100 a page");
    assert_eq!(seen, all, "every run once, newest first");
    assert!(
        http.get(&url).body.contains("id=\"newer\""),
        "no way back from {url}"
    );

    // Kind, Label and Suite columns.
    let first = http.get("/runs").body;
    for col in ["<th>Kind</th>", "<th>Label</th>", "<th>Suite</th>"] {
        assert!(first.contains(col), "no column {col}");
    }
    let m = monitors.last().copied().unwrap_or(0);
    let row = first
        .split(&format!("<a href=\"/runs/{m}\">"))
        .nth(1)
        .and_then(|s| s.split("</tr>").next())
        .unwrap_or_default();
    assert!(row.contains(&format!("mon {}", 613)), "monitor row {row}");
    let s = in_suite.last().copied().unwrap_or(0);
    let row = first
        .split(&format!("<a href=\"/runs/{s}\">"))
        .nth(1)
        .and_then(|s| s.split("</tr>").next())
        .unwrap_or_default();
    assert!(
        row.contains("board A") && row.contains("quick #1"),
        "suite row {row}"
    );

    // Filter by kind: only the monitor runs, 62 of them over the pages.
    let mut got = Vec::new();
    let mut url = "/runs?kind=monitor".to_string();
    loop {
        let r = http.get(&url);
        got.extend(ids(&r.body));
        match link(&r.body, "older") {
            Some(next) => url = next,
            None => break,
        }
    }
    monitors.reverse();
    assert_eq!(got, monitors);

    // Date range: 2026-01-15 holds exactly the 20 old runs; a range without it holds none.
    let mut old_desc = old.clone();
    old_desc.reverse();
    assert_eq!(
        ids(&http.get("/runs?from=2026-01-15&to=2026-01-15").body),
        old_desc
    );
    assert_eq!(
        ids(&http.get("/runs?from=2026-01-10&to=2026-01-14").body),
        Vec::<i64>::new()
    );
    let recent = ids(&http.get("/runs?from=2026-01-16").body);
    assert_eq!(recent.len(), 100);
    assert!(recent.iter().all(|id| !old.contains(id)));
    let api = http.get_json("/api/runs?from=2026-01-15&to=2026-01-15&limit=1000");
    assert_eq!(api.as_array().map(Vec::len), Some(20), "{api}");

    // A date that is not one: a message, no rows; the API answers 400.
    let r = http.get("/runs?from=2026-02-30");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("id=\"filter-error\""), "{}", r.body);
    assert!(r.body.contains("not a date (YYYY-MM-DD)"));
    assert!(ids(&r.body).is_empty());
    let r = http.get("/api/runs?to=tomorrow");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("not a date"), "{}", r.body);
}

/// Compare: the baseline column is the user's pick (it moves first; differences are against
/// it), a baseline that is not among the runs is refused, and runs of different durations
/// and peer ports are flagged.
#[test]
fn compare_takes_a_chosen_baseline_and_flags_differing_durations_and_ports() {
    let mut lab = Lab::new();
    let board = lab.board.clone();
    let data = lab.dir().join("data");
    let mut ids = Vec::new();
    {
        let store = Store::open_dir(&data).expect("store");
        for (time, port) in [(10, 5201u16), (30, 5202), (10, 5201)] {
            ids.push(
                store
                    .create_run(&NewRun {
                        role: RunRole::Client,
                        protocol: RunProtocol::Tcp,
                        peer_host: PC1_IP.into(),
                        peer_port: port,
                        direction: RunDirection::Send,
                        params: json!({"time": time}),
                        kind: RunKind::Iperf3,
                        ..Default::default()
                    })
                    .expect("run"),
            );
        }
        drop(store);
        let db = rusqlite::Connection::open(data.join("netperfd.sqlite")).expect("sqlite");
        db.execute("UPDATE runs SET status='completed', ended_at=started_at+1000, receiver_bps=100000000.0*id", [])
            .expect("close runs");
    }
    let (_, mut http) = daemon(&mut lab, &board, WEB_PORT + 10, &[]);
    set_up(&lab, &mut http);
    let (a, b, c) = (ids[0], ids[1], ids[2]);

    let page = http.get(&format!("/compare?runs={a},{b},{c}")).body;
    assert!(page.contains("id=\"baseline\""), "a baseline picker");
    assert!(
        page.contains(&format!(
            "Durations differ: run {a} 10 s, run {b} 30 s, run {c} 10 s."
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "Peer ports differ: run {a} 5201, run {b} 5202, run {c} 5201."
        )),
        "{page}"
    );
    // Same duration and port: no note.
    let same = http.get(&format!("/compare?runs={a},{c}")).body;
    assert!(!same.contains("differ:"), "{same}");

    // Baseline = run c: its column comes first.
    let page = http
        .get(&format!("/compare?runs={a},{b},{c}&baseline={c}"))
        .body;
    let first = |p: &str| {
        let i = p.find("<th>Metric</th><th>").map(|i| i + 19).unwrap_or(0);
        p[i..].split("</th>").next().unwrap_or_default().to_string()
    };
    assert!(
        first(&page).starts_with(&format!("Run {c} ")),
        "{}",
        first(&page)
    );
    assert!(
        page.contains(&format!("value=\"{c},{a},{b}\"")),
        "the picker keeps the order"
    );
    let r = http.get(&format!("/compare?runs={a},{b}&baseline={c}"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r
        .body
        .contains(&format!("the baseline run {c} is not among those compared")));
    assert_eq!(
        http.get(&format!("/compare?runs={a},{b}&baseline=x"))
            .status,
        400
    );
}
