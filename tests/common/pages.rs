//! Helpers for browser tests that visit every page: the page routes found in the source, and
//! runs started through the API.

use super::http::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The GET routes of the web UI that may be pages (not `/api/`, `/static/` or a file download
/// such as `export.csv`), as registered: `/runs/{id}`. Read from the route table itself
/// (`web::routes::table`), so a page added later is visited without a change here.
pub fn page_routes() -> Vec<String> {
    let mut out: Vec<String> = netperfd::web::routes::table()
        .into_iter()
        .filter(|r| r.method == actix_web::http::Method::GET)
        .map(|r| r.pattern.to_string())
        .filter(|path| {
            let file = path.rsplit('/').next().unwrap_or_default();
            !path.starts_with("/api/") && !path.starts_with("/static/") && !file.contains('.')
        })
        .collect();
    netperfd::model::order::sort(&mut out);
    out.dedup();
    out
}

/// Start a run through the API and wait until it has ended; its id.
pub fn api_run(http: &Http, path: &str, body: Value) -> i64 {
    let r = http.api("POST", path, &body);
    assert_eq!(r.status, 201, "{path} {body}: {}", r.body);
    let id = r.json()["id"].as_i64().expect("id");
    let v = wait_run(http, id, Duration::from_secs(60));
    assert_eq!(v["run"]["status"], "completed", "run {id}: {v}");
    id
}

/// The newest ended run of `kind`: its id.
pub fn newest(http: &Http, kind: &str) -> i64 {
    let t = Instant::now();
    loop {
        let list = http.get_json(&format!("/api/runs?kind={kind}"));
        if let Some(id) = list.as_array().and_then(|a| {
            a.iter()
                .find(|r| r["kind"] == kind && r["status"] != "running")
                .and_then(|r| r["id"].as_i64())
        }) {
            return id;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no {kind} run: {list}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
