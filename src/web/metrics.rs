//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4), written by hand —
//! a few families of counters and gauges need no metrics registry, and the board keeps no
//! extra crate. Protected like the API (bearer token or session) unless `metrics_open = true`.
//!
//! Families (every name documented in docs/guide/fleets.md):
//! * the board's ports under node_exporter's names (`node_network_receive_bytes_total{device}`
//!   … packets, errs, drop; `node_network_mtu_bytes`, `node_network_speed_bytes` where known)
//!   from `/proc/net/dev` and sysfs, as node_exporter reads them;
//! * CPU time per core, `node_cpu_seconds_total{cpu,mode}` (`/proc/stat` ticks ÷ USER_HZ);
//! * `netperfd_runs_total{kind,status}` (runs made here, in history; pruning old runs lowers
//!   it, which Prometheus reads as a counter reset), `netperfd_runs_in_progress{kind}`;
//! * the newest ended run of each suite per board label: `netperfd_suite_step_*{suite,step,
//!   board}` (rate and sender rate in bytes/s, retransmits, jitter s, loss ratio, busiest-core
//!   ratio, start time s, completed 0/1). Rates are bytes/s (x 8 = bits/s): Prometheus' base
//!   unit is the byte and `promtool check metrics` refuses a `_bits` name;
//! * `netperfd_info{board_id,board,version}` = 1.

use super::auth::Auth;
use super::routes::{Routes, READ};
use super::AppState;
use crate::board::sampler::{link_speed_mtu, Snapshot};
use crate::model::RunKind;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Register `GET /metrics`.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/metrics", READ, metrics);
}

async fn metrics(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    if !state.config.metrics_open && Auth::extract(&req).await.is_err() {
        return HttpResponse::Unauthorized()
            .insert_header(("WWW-Authenticate", "Bearer"))
            .content_type("text/plain; charset=utf-8")
            .body("authentication required: send 'Authorization: Bearer <API token>' (or set metrics_open = true)\n");
    }
    let st = state.clone();
    match web::block(move || render(&st)).await {
        Ok(Ok(body)) => HttpResponse::Ok()
            .content_type("text/plain; version=0.0.4; charset=utf-8")
            .body(body),
        Ok(Err(e)) => HttpResponse::InternalServerError()
            .content_type("text/plain; charset=utf-8")
            .body(format!("cannot read the history: {e}\n")),
        Err(e) => HttpResponse::InternalServerError()
            .content_type("text/plain; charset=utf-8")
            .body(format!("{e}\n")),
    }
}

/// A label value escaped for the exposition format (backslash, double quote, line feed).
pub(crate) fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A sample value: whole numbers without a fraction, others as Rust prints them, NaN and
/// infinities as Prometheus spells them.
fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// One metric family: its samples (labels, value) in order.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Family {
        Family {
            name,
            kind,
            help,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: Vec<(&'static str, String)>, v: f64) {
        self.samples.push((labels, v));
    }

    fn write(&self, out: &mut String) {
        if self.samples.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (labels, v) in &self.samples {
            out.push_str(self.name);
            if !labels.is_empty() {
                out.push('{');
                for (i, (k, val)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape_label(val));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {}", value(*v));
        }
    }
}

fn port_families(snap: &Snapshot) -> Vec<Family> {
    let mut f = vec![
        Family::new(
            "node_network_receive_bytes_total",
            "counter",
            "Network device statistic receive_bytes.",
        ),
        Family::new(
            "node_network_transmit_bytes_total",
            "counter",
            "Network device statistic transmit_bytes.",
        ),
        Family::new(
            "node_network_receive_packets_total",
            "counter",
            "Network device statistic receive_packets.",
        ),
        Family::new(
            "node_network_transmit_packets_total",
            "counter",
            "Network device statistic transmit_packets.",
        ),
        Family::new(
            "node_network_receive_errs_total",
            "counter",
            "Network device statistic receive_errs.",
        ),
        Family::new(
            "node_network_transmit_errs_total",
            "counter",
            "Network device statistic transmit_errs.",
        ),
        Family::new(
            "node_network_receive_drop_total",
            "counter",
            "Network device statistic receive_drop.",
        ),
        Family::new(
            "node_network_transmit_drop_total",
            "counter",
            "Network device statistic transmit_drop.",
        ),
        Family::new(
            "node_network_mtu_bytes",
            "gauge",
            "Network device MTU, bytes.",
        ),
        Family::new(
            "node_network_speed_bytes",
            "gauge",
            "Network device link speed, bytes/s (physical ports with carrier only).",
        ),
    ];
    let ports: BTreeMap<_, _> = snap.ports.iter().collect();
    for (name, c) in ports {
        let l = || vec![("device", name.clone())];
        let vals = [
            c.rx_bytes,
            c.tx_bytes,
            c.rx_packets,
            c.tx_packets,
            c.rx_errors,
            c.tx_errors,
            c.rx_dropped,
            c.tx_dropped,
        ];
        for (fam, v) in f.iter_mut().zip(vals) {
            fam.add(l(), v as f64);
        }
        let (speed, mtu) = link_speed_mtu(name);
        if let Some(m) = mtu {
            f[8].add(l(), m as f64);
        }
        if let Some(s) = speed {
            f[9].add(l(), s as f64 * 1e6 / 8.0);
        }
    }
    f
}

fn cpu_family(snap: &Snapshot) -> Family {
    let mut f = Family::new(
        "node_cpu_seconds_total",
        "counter",
        "Seconds the CPUs spent in each mode.",
    );
    let hz = crate::engine::sys::clock_ticks_per_second();
    let mut cpus: Vec<_> = snap.cpus.iter().filter(|(i, _)| *i >= 0).collect();
    crate::model::order::sort_by_key(&mut cpus, |(i, _)| *i);
    for (i, t) in cpus {
        for (mode, v) in [
            ("idle", t.idle),
            ("iowait", t.iowait),
            ("irq", t.irq),
            ("nice", t.nice),
            ("softirq", t.softirq),
            ("steal", t.steal),
            ("system", t.system),
            ("user", t.user),
        ] {
            f.add(
                vec![("cpu", i.to_string()), ("mode", mode.to_string())],
                v as f64 / hz,
            );
        }
    }
    f
}

const STATUSES: [&str; 4] = ["running", "completed", "failed", "aborted"];

fn run_families(state: &AppState) -> Result<Vec<Family>, String> {
    let counts = state.store.run_counts().map_err(|e| e.to_string())?;
    let mut total = Family::new(
        "netperfd_runs_total",
        "counter",
        "Runs made on this board and kept in its history, by kind and status.",
    );
    let mut live = Family::new(
        "netperfd_runs_in_progress",
        "gauge",
        "Runs in progress on this board, by kind.",
    );
    let n = |k: &str, s: &str| {
        counts
            .iter()
            .filter(|c| c.kind == k && c.status == s)
            .map(|c| c.count)
            .sum::<i64>() as f64
    };
    for k in RunKind::ALL {
        for s in STATUSES {
            total.add(
                vec![("kind", k.as_str().into()), ("status", s.into())],
                n(k.as_str(), s),
            );
        }
        live.add(vec![("kind", k.as_str().into())], n(k.as_str(), "running"));
    }
    Ok(vec![total, live])
}

fn suite_families(state: &AppState) -> Result<Vec<Family>, String> {
    let mut f = vec![
        Family::new(
            "netperfd_suite_step_bytes_per_second",
            "gauge",
            "Rate of the suite step's last run: the receiver's, else the sender's, bytes/s (bits/s / 8).",
        ),
        Family::new(
            "netperfd_suite_step_sender_bytes_per_second",
            "gauge",
            "Sender rate of the suite step's last run, bytes/s (bits/s / 8).",
        ),
        Family::new(
            "netperfd_suite_step_retransmits",
            "gauge",
            "TCP retransmits of the suite step's last run.",
        ),
        Family::new(
            "netperfd_suite_step_jitter_seconds",
            "gauge",
            "UDP receiver jitter of the suite step's last run, seconds.",
        ),
        Family::new(
            "netperfd_suite_step_loss_ratio",
            "gauge",
            "UDP datagrams lost / expected in the suite step's last run (0..1).",
        ),
        Family::new(
            "netperfd_suite_step_cpu_busiest_ratio",
            "gauge",
            "Busiest core's busy share during the suite step's last run (0..1).",
        ),
        Family::new(
            "netperfd_suite_step_timestamp_seconds",
            "gauge",
            "Start of the suite step's last run, Unix seconds.",
        ),
        Family::new(
            "netperfd_suite_step_completed",
            "gauge",
            "1 if the suite step's last run completed, 0 if it failed or was aborted.",
        ),
    ];
    let ids = state.store.latest_suites().map_err(|e| e.to_string())?;
    for sid in ids {
        let Some(r) = crate::results::suite_table::suite_result(&state.store, sid)? else {
            continue;
        };
        let mut seen: Vec<&str> = Vec::new();
        for s in &r.steps {
            if s.run_id.is_none() {
                continue;
            }
            let step = if seen.contains(&s.label.as_str()) {
                format!("{} #{}", s.label, s.index)
            } else {
                s.label.clone()
            };
            seen.push(&s.label);
            let l = || {
                vec![
                    ("suite", r.suite.name.clone()),
                    ("step", step.clone()),
                    ("board", r.label.clone()),
                ]
            };
            let vals = [
                s.bitrate_bps.map(|b| b / 8.0),
                s.sender_bps.map(|b| b / 8.0),
                s.retransmits.map(|v| v as f64),
                s.jitter_ms.map(|j| j / 1000.0),
                s.loss_percent.map(|p| p / 100.0),
                s.cpu_max_percent.map(|p| p / 100.0),
                s.started_at.map(|t| t as f64 / 1000.0),
                Some(if s.status == crate::model::StepStatus::Completed {
                    1.0
                } else {
                    0.0
                }),
            ];
            for (fam, v) in f.iter_mut().zip(vals) {
                if let Some(v) = v.filter(|v| v.is_finite()) {
                    fam.add(l(), v);
                }
            }
        }
    }
    Ok(f)
}

/// The whole exposition text.
fn render(state: &AppState) -> Result<String, String> {
    let mut out = String::new();
    let mut info = Family::new(
        "netperfd_info",
        "gauge",
        "This netperfd: board id, board label (host name) and version; always 1.",
    );
    info.add(
        vec![
            (
                "board_id",
                state.store.board_id().map_err(|e| e.to_string())?,
            ),
            ("board", crate::runs::suites::run::board_label()),
            ("version", env!("CARGO_PKG_VERSION").to_string()),
        ],
        1.0,
    );
    info.write(&mut out);
    let snap = Snapshot::take();
    for f in port_families(&snap) {
        f.write(&mut out);
    }
    cpu_family(&snap).write(&mut out);
    for f in run_families(state)? {
        f.write(&mut out);
    }
    for f in suite_families(state)? {
        f.write(&mut out);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_values_are_escaped_and_spelled_as_prometheus_reads_them() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(value(941_480_000.0), "941480000");
        assert_eq!(value(0.0125), "0.0125");
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::INFINITY), "+Inf");
        let mut f = Family::new("x_total", "counter", "Help.");
        f.add(vec![("device", "eth\"0".into())], 3.0);
        let mut out = String::new();
        f.write(&mut out);
        assert_eq!(
            out,
            "# HELP x_total Help.\n# TYPE x_total counter\nx_total{device=\"eth\\\"0\"} 3\n"
        );
        // A family without samples writes nothing.
        let mut out = String::new();
        Family::new("y", "gauge", "Help.").write(&mut out);
        assert!(out.is_empty());
    }
}
