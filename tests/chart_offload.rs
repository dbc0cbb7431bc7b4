//! Issue 37, item 9: charts ran on the web server's async workers, so a run with a flood of
//! stored intervals (750,000 rows) hung the other requests for minutes. Now a chart is
//! computed on the blocking pool: while the daemon's two workers each serve a big chart,
//! `/api/health` still answers — before either chart is done (asserted by order, not time).
//! The chart is cut to at most 2,000 time points (here 1,000 intervals of 750 streams: no
//! cut, 751 lines) and its values are the stored ones.

mod common;
use common::http::*;
use common::*;
use netperfd::engine::report::{IntervalRecord, StreamInterval};
use netperfd::model::{RunDirection, RunProtocol, RunRole};
use netperfd::store::{NewRun, Store};
use std::sync::mpsc;
use std::time::Duration;

const STREAMS: u32 = 750;
const RECORDS: i64 = 1000;

/// A finished run with RECORDS × STREAMS stored intervals (750,000 rows): stream `s` of
/// interval `k` at (s + 1) kbit/s, stream 1 of interval 500 at 9 Gbit/s.
fn big_run(data: &std::path::Path) -> i64 {
    std::fs::create_dir_all(data).expect("data dir");
    let s = Store::open_dir(data).expect("store");
    let id = s
        .create_run(&NewRun {
            role: RunRole::Server,
            protocol: RunProtocol::parse("tcp"),
            peer_host: "192.0.2.9".into(),
            peer_port: 5201,
            local_host: "127.0.0.1".into(),
            local_port: 5201,
            bind_dev: None,
            direction: RunDirection::Receive,
            params: serde_json::json!({}),
            suite_id: None,
            kind: Default::default(),
            parent_id: None,
        })
        .expect("run");
    for k in 0..RECORDS {
        let rec = IntervalRecord {
            streams: (1..=STREAMS)
                .map(|sid| StreamInterval {
                    id: sid,
                    socket: 5,
                    start: k as f64,
                    end: (k + 1) as f64,
                    bytes: 1000,
                    bits_per_second: if k == 500 && sid == 1 {
                        9e9
                    } else {
                        f64::from(sid) * 1e3
                    },
                    sender: false,
                    omitted: false,
                    tcp: None,
                    udp: None,
                    latency: None,
                })
                .collect(),
        };
        s.add_interval(id, k, &rec).expect("interval");
    }
    s.mark_ended(
        id,
        netperfd::model::kind::RunStatus::Completed,
        None,
        netperfd::model::time::now_ms(),
    )
    .expect("end");
    id
}

#[test]
fn a_big_chart_does_not_hold_up_other_requests() {
    let mut lab = Lab::new();
    let id = big_run(&lab.dir().join("data"));
    let board = lab.board.clone();
    let (_, mut http) = daemon(&mut lab, &board, 8080, &[]);
    set_up(&lab, &mut http);
    let (tx, rx) = mpsc::channel::<(&'static str, u16, usize)>();
    // Two big charts at once: one for each of the daemon's two workers.
    for _ in 0..2 {
        let (h, tx) = (http.clone(), tx.clone());
        std::thread::spawn(move || {
            let r = h
                .try_req_within(
                    "GET",
                    &format!("/api/runs/{id}/chart"),
                    vec![],
                    None,
                    Duration::from_secs(600),
                )
                .expect("chart");
            let v: serde_json::Value = serde_json::from_str(&r.body).expect("chart JSON");
            let tp = &v["throughput"];
            let points = tp["t"].as_array().map_or(0, Vec::len);
            let lines = tp["series"].as_array().map_or(0, Vec::len);
            assert!(points <= 2000, "{points} points");
            assert_eq!(points, RECORDS as usize);
            assert_eq!(lines, STREAMS as usize + 1, "a line per stream and the sum");
            let stream1 = tp["series"]
                .as_array()
                .and_then(|s| s.iter().find(|l| l["label"] == "stream 1 receiver"))
                .expect("stream 1's line");
            let max = stream1["values"]
                .as_array()
                .expect("values")
                .iter()
                .filter_map(serde_json::Value::as_f64)
                .fold(0.0, f64::max);
            assert_eq!(max, 9e9, "the peak is kept");
            let _ = tx.send(("chart", r.status, points));
        });
    }
    // Let both chart requests reach the workers, then ask for health. A margin, not an
    // event: nothing outside the daemon shows a request taken up by a worker.
    std::thread::sleep(Duration::from_millis(300));
    let h = http.clone();
    let txh = tx.clone();
    std::thread::spawn(move || {
        let r = h.get("/api/health");
        let _ = txh.send(("health", r.status, 0));
    });
    drop(tx);
    let order: Vec<(&str, u16, usize)> = rx.iter().collect();
    assert_eq!(order.len(), 3, "every request answered: {order:?}");
    assert_eq!(
        order.first().map(|o| (o.0, o.1)),
        Some(("health", 200)),
        "health answered while the charts were computed: {order:?}"
    );
    assert!(order.iter().all(|o| o.1 == 200), "{order:?}");
}
