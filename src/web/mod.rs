//! The web UI and JSON API (actix-web + askama, every asset embedded in the binary).
//! Routes: pages in `pages.rs`, `/api/` in `api.rs`; authentication in `auth.rs`.
//! Not for: measuring or storing (engine, store, live).

pub mod api;
pub mod auth;
pub mod board;
pub mod charts;
pub mod extract;
pub mod forwarding;
pub mod multi;
pub mod pages;
pub mod suites;
pub mod test_request;
pub mod traffic;

use crate::config::Config;
use crate::engine::report::{unit_format, Report};
use crate::live::Hub;
use crate::store::{IntervalRow, RunRow, Store};
use actix_web::{web, HttpResponse};
use std::sync::{Arc, Mutex};

/// Everything the handlers share.
pub struct AppState {
    pub store: Arc<Store>,
    pub hub: Hub,
    pub config: Config,
    /// The one-time code that the first-run setup page requires (None once set up).
    pub setup_code: Mutex<Option<String>>,
    pub limiter: auth::LoginLimiter,
}

impl AppState {
    /// State over a store; makes a setup code when no admin password exists yet.
    pub fn new(store: Arc<Store>, hub: Hub, config: Config) -> AppState {
        let s = AppState {
            store,
            hub,
            config,
            setup_code: Mutex::new(None),
            limiter: auth::LoginLimiter::new(5, std::time::Duration::from_secs(300)),
        };
        if s.needs_setup() {
            let raw = auth::random_hex(5).to_uppercase();
            if let Ok(mut g) = s.setup_code.lock() {
                *g = Some(format!("{}-{}", &raw[..5], &raw[5..]));
            }
        }
        s
    }

    /// The admin password hash in force: one set in the UI, else the config file's.
    pub fn admin_hash(&self) -> Option<String> {
        self.store
            .setting(auth::PASSWORD_KEY)
            .ok()
            .flatten()
            .or_else(|| self.config.admin_password_hash.clone())
    }

    /// True until an admin password exists.
    pub fn needs_setup(&self) -> bool {
        self.admin_hash().is_none()
    }

    /// The first-run setup code, if setup is pending.
    pub fn setup_code(&self) -> Option<String> {
        self.setup_code.lock().ok().and_then(|g| g.clone())
    }
}

/// Register every route.
pub fn configure(cfg: &mut web::ServiceConfig) {
    extract::configure(cfg);
    board::configure(cfg);
    charts::configure(cfg);
    multi::configure(cfg);
    suites::configure(cfg);
    forwarding::configure(cfg);
    pages::configure(cfg);
    api::configure(cfg);
    traffic::configure(cfg);
    cfg.route("/static/style.css", web::get().to(style))
        .route("/static/app.js", web::get().to(script))
        .route("/static/refresh.js", web::get().to(refresh));
}

async fn style() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header(("Cache-Control", "max-age=3600"))
        .body(include_str!("../../static/style.css"))
}

async fn refresh() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/javascript; charset=utf-8")
        .body(include_str!("../../static/refresh.js"))
}

async fn script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/javascript; charset=utf-8")
        .insert_header(("Cache-Control", "max-age=3600"))
        .body(include_str!("../../static/app.js"))
}

/// A JSON API error: `{"error": msg}` with `status`.
pub(crate) fn json_error(
    status: actix_web::http::StatusCode,
    msg: impl Into<String>,
) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({"error": msg.into()}))
}

/// The API's answer for an unknown run id: 404 `{"error": "no run N"}`.
pub(crate) fn run_not_found(id: i64) -> HttpResponse {
    json_error(
        actix_web::http::StatusCode::NOT_FOUND,
        format!("no run {id}"),
    )
}

/// A bitrate as iperf3 prints it: "941 Mbits/sec".
pub fn fmt_rate(bps: f64) -> String {
    format!("{}s/sec", unit_format(bps / 8.0, true).trim())
}

/// A byte count as iperf3 prints it: "1.10 GBytes".
pub fn fmt_bytes(b: f64) -> String {
    format!("{}s", unit_format(b, false).trim())
}

/// Unix ms as "2026-11-30 12:00:05 UTC".
pub fn fmt_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// CSV of a run: one row per stream per interval, then the per-stream sender/receiver totals.
/// Columns: kind, stream, role, start, end, seconds, bytes, bits_per_second, retransmits,
/// snd_cwnd (bytes), rtt (µs), omitted.
pub fn run_csv(run: &RunRow, intervals: &[IntervalRow], report: Option<&Report>) -> String {
    let mut out = String::from(
        "run_id,kind,stream,role,start,end,seconds,bytes,bits_per_second,retransmits,snd_cwnd,rtt_us,omitted,packets,lost,jitter_ms\n",
    );
    let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    for i in intervals {
        out.push_str(&format!(
            "{},interval,{},{},{:.6},{:.6},{:.6},{},{:.3},{},{},{},{},{},{},{}\n",
            run.id,
            i.stream_id,
            if i.sender { "sender" } else { "receiver" },
            i.start,
            i.end,
            i.end - i.start,
            i.bytes,
            i.bits_per_second,
            opt(i.retransmits),
            opt(i.snd_cwnd),
            opt(i.rtt),
            i.omitted,
            opt(i.packets),
            opt(i.lost),
            i.jitter_ms.map(|j| format!("{j:.4}")).unwrap_or_default()
        ));
    }
    if let Some(r) = report {
        for s in &r.streams {
            out.push_str(&format!(
                "{},summary,{},sender,0,{:.6},{:.6},{},{:.3},{},,,false,{},,\n",
                run.id,
                s.id,
                s.sender.seconds,
                s.sender.seconds,
                s.sender.bytes,
                s.sender.bits_per_second(),
                if s.retransmits >= 0 {
                    s.retransmits.to_string()
                } else {
                    String::new()
                },
                s.udp
                    .and_then(|u| u.sent_packets)
                    .map(|p| p.to_string())
                    .unwrap_or_default()
            ));
            if let Some(rc) = s.receiver {
                out.push_str(&format!(
                    "{},summary,{},receiver,0,{:.6},{:.6},{},{:.3},,,,false,{},{},{}\n",
                    run.id,
                    s.id,
                    rc.seconds,
                    rc.seconds,
                    rc.bytes,
                    rc.bits_per_second(),
                    s.udp.map(|u| u.loss().1.to_string()).unwrap_or_default(),
                    s.udp.map(|u| u.loss().0.to_string()).unwrap_or_default(),
                    s.udp
                        .map(|u| format!("{:.4}", u.jitter_ms))
                        .unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// The iperf3 `-J` document of a run: the stored report's, or (for a run that never got a
/// report, e.g. cut by a restart) its stored intervals with the error.
pub fn run_json(
    run: &RunRow,
    intervals: &[IntervalRow],
    report: Option<&Report>,
) -> serde_json::Value {
    if let Some(r) = report {
        return crate::engine::report::to_iperf3_json(r);
    }
    let mut by_seq: std::collections::BTreeMap<i64, Vec<serde_json::Value>> = Default::default();
    for i in intervals {
        by_seq.entry(i.seq).or_default().push(serde_json::json!({
            "socket": i.socket, "start": i.start, "end": i.end, "seconds": i.end - i.start,
            "bytes": i.bytes, "bits_per_second": i.bits_per_second, "omitted": i.omitted, "sender": i.sender,
        }));
    }
    serde_json::json!({
        "start": {"version": crate::engine::report::version_string(),
                  "connecting_to": {"host": run.peer_host, "port": run.peer_port}},
        "intervals": by_seq.into_values().map(|s| serde_json::json!({"streams": s})).collect::<Vec<_>>(),
        "end": {},
        "error": run.error.clone().unwrap_or_else(|| "the run has no final report".into()),
    })
}
