//! Helpers for browser tests that visit every page: the page routes found in the source, and
//! runs started through the API.

use super::http::*;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The GET routes of `src/web/*.rs` that may be pages (not `/api/`, `/static/` or a file
/// download such as `export.csv`), as written in the source: `/runs/{id}`.
pub fn page_routes() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/web");
    let mut out = Vec::new();
    for f in std::fs::read_dir(&dir).expect("src/web") {
        let f = f.expect("entry").path();
        if f.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let src: String = std::fs::read_to_string(&f)
            .expect("source")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for part in src.split(".route(\"").skip(1) {
            let Some((path, rest)) = part.split_once('"') else {
                continue;
            };
            let file = path.rsplit('/').next().unwrap_or_default();
            if rest.starts_with(",web::get()")
                && !path.starts_with("/api/")
                && !path.starts_with("/static/")
                && !file.contains('.')
            {
                out.push(path.to_string());
            }
        }
    }
    out.sort();
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
