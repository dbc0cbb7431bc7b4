//! Exports of a stored run: CSV (intervals and per-stream totals) and the iperf3 `-J` document.

use crate::engine::report::Report;
use crate::model::RunKind;
use crate::store::{IntervalRow, RunRow, Store, StoreError};
use std::io::Write;

/// What a run's exports are made of, by kind: its intervals (and report), or its trials (an
/// RFC 2544 run has no intervals: its trials are its evidence).
enum Evidence {
    Intervals,
    Trials,
}

impl Evidence {
    fn of(kind: RunKind) -> Evidence {
        match kind {
            RunKind::Rfc2544 => Evidence::Trials,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency => Evidence::Intervals,
        }
    }
}

/// The header line of [`run_csv`].
pub(crate) const CSV_HEADER: &str = "run_id,kind,stream,role,start,end,seconds,bytes,bits_per_second,retransmits,snd_cwnd,rtt_us,omitted,packets,lost,jitter_ms\n";

/// CSV of a run: one row per stream per interval, then the per-stream sender/receiver totals.
/// Columns: kind, stream, role, start, end, seconds, bytes, bits_per_second, retransmits,
/// snd_cwnd (bytes), rtt (µs), omitted.
#[cfg(test)]
pub(crate) fn run_csv(run: &RunRow, intervals: &[IntervalRow], report: Option<&Report>) -> String {
    match Evidence::of(run.kind) {
        Evidence::Trials => {
            return crate::results::rfc2544::trials_csv(
                &crate::results::rfc2544::Rfc2544Summary::of_summary(&run.summary),
            )
        }
        Evidence::Intervals => {}
    }
    let mut out = String::from(CSV_HEADER);
    for i in intervals {
        out.push_str(&csv_interval(run, i));
    }
    out.push_str(&csv_summary(run, report));
    out
}

/// [`run_csv`] written to `w` with the intervals read one row at a time from `store`: memory
/// stays bounded whatever the run's length. Errors: the store's, or `w`'s (e.g. the client
/// went away), as text.
pub(crate) fn write_run_csv(
    w: &mut dyn Write,
    store: &Store,
    run: &RunRow,
    report: Option<&Report>,
) -> Result<(), String> {
    match Evidence::of(run.kind) {
        // The trials are the run's evidence (it has no intervals).
        Evidence::Trials => {
            return w
                .write_all(
                    crate::results::rfc2544::trials_csv(
                        &crate::results::rfc2544::Rfc2544Summary::of_summary(&run.summary),
                    )
                    .as_bytes(),
                )
                .map_err(|e| e.to_string())
        }
        Evidence::Intervals => {}
    }
    w.write_all(CSV_HEADER.as_bytes())
        .map_err(|e| e.to_string())?;
    store
        .for_each_interval(run.id, |i| {
            w.write_all(csv_interval(run, i).as_bytes())
                .map_err(|e| StoreError::Io(e.to_string()))
        })
        .map_err(|e| e.to_string())?;
    w.write_all(csv_summary(run, report).as_bytes())
        .map_err(|e| e.to_string())
}

/// One interval row of [`run_csv`], with its line end.
fn csv_interval(run: &RunRow, i: &IntervalRow) -> String {
    let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    format!(
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
    )
}

/// The per-stream total rows of [`run_csv`] (none without a report).
fn csv_summary(run: &RunRow, report: Option<&Report>) -> String {
    let mut out = String::new();
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

/// An RFC 2544 run as an iperf3-like document: iperf3's `start` (who, when), the benchmark
/// under `rfc2544` (the stored summary: throughput per frame size, loss steps, every trial),
/// `end` empty, and `error` when it failed.
fn rfc2544_json(run: &RunRow) -> serde_json::Value {
    let mut doc = no_report_head(run);
    doc["rfc2544"] = run.summary.clone();
    doc["end"] = serde_json::json!({});
    if let Some(e) = &run.error {
        doc["error"] = e.clone().into();
    }
    doc
}

/// The iperf3 `-J` document of a run: the stored report's, or (for a run that never got a
/// report, e.g. cut by a restart) its stored intervals with the error.
#[cfg(test)]
pub(crate) fn run_json(
    run: &RunRow,
    intervals: &[IntervalRow],
    report: Option<&Report>,
) -> serde_json::Value {
    if let Some(r) = report {
        return crate::engine::report::to_iperf3_json(r);
    }
    match Evidence::of(run.kind) {
        Evidence::Trials => return rfc2544_json(run),
        Evidence::Intervals => {}
    }
    let mut by_seq: std::collections::BTreeMap<i64, Vec<serde_json::Value>> = Default::default();
    for i in intervals {
        by_seq.entry(i.seq).or_default().push(interval_json(i));
    }
    let mut doc = no_report_head(run);
    doc["intervals"] = by_seq
        .into_values()
        .map(|s| serde_json::json!({"streams": s}))
        .collect();
    doc["end"] = serde_json::json!({});
    doc["error"] = no_report_error(run).into();
    doc
}

/// [`run_json`] written to `w` (pretty-printed with `pretty`). A run without a report has
/// its intervals read one row at a time from `store`, so memory stays bounded whatever the
/// run's length (a run with a report holds it in memory already). Errors: the store's or
/// `w`'s, as text.
pub(crate) fn write_run_json(
    w: &mut dyn Write,
    store: &Store,
    run: &RunRow,
    report: Option<&Report>,
    pretty: bool,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let put = |w: &mut dyn Write, v: &serde_json::Value| -> std::io::Result<()> {
        if pretty {
            serde_json::to_writer_pretty(&mut *w, v)?;
        } else {
            serde_json::to_writer(&mut *w, v)?;
        }
        Ok(())
    };
    if let Some(r) = report {
        return put(w, &crate::engine::report::to_iperf3_json(r)).map_err(io);
    }
    match Evidence::of(run.kind) {
        Evidence::Trials => return put(w, &rfc2544_json(run)).map_err(io),
        Evidence::Intervals => {}
    }
    // {"start": {...}, "intervals": [{"streams": [...]}, ...], "end": {}, "error": "..."}:
    // the same keys in the same order as run_json; intervals come ordered by sequence number.
    let nl = if pretty { "\n" } else { "" };
    w.write_all(b"{\"start\":").map_err(io)?;
    put(w, &no_report_head(run)["start"]).map_err(io)?;
    write!(w, ",{nl}\"intervals\":[").map_err(io)?;
    let mut seq: Option<i64> = None;
    store
        .for_each_interval(run.id, |i| {
            let sep = match seq {
                None => "{\"streams\":[",
                Some(q) if q == i.seq => ",",
                Some(_) => "]},{\"streams\":[",
            };
            seq = Some(i.seq);
            w.write_all(sep.as_bytes())
                .and_then(|()| {
                    serde_json::to_writer(&mut *w, &interval_json(i)).map_err(Into::into)
                })
                .map_err(|e| StoreError::Io(e.to_string()))
        })
        .map_err(|e| e.to_string())?;
    if seq.is_some() {
        w.write_all(b"]}").map_err(io)?;
    }
    write!(w, "],{nl}\"end\":{{}},{nl}\"error\":").map_err(io)?;
    put(w, &no_report_error(run).into()).map_err(io)?;
    w.write_all(b"}").map_err(io)
}

/// One stored interval as a stream entry of iperf3's `intervals[].streams[]`.
fn interval_json(i: &IntervalRow) -> serde_json::Value {
    serde_json::json!({
        "socket": i.socket, "start": i.start, "end": i.end, "seconds": i.end - i.start,
        "bytes": i.bytes, "bits_per_second": i.bits_per_second, "omitted": i.omitted, "sender": i.sender,
    })
}

/// `{"start": ...}` of a run without a report.
fn no_report_head(run: &RunRow) -> serde_json::Value {
    serde_json::json!({
        "start": {"version": crate::engine::report::version_string(),
                  "connecting_to": {"host": run.peer_host, "port": run.peer_port}},
    })
}

/// The `error` of a run without a report.
fn no_report_error(run: &RunRow) -> String {
    run.error
        .clone()
        .unwrap_or_else(|| "the run has no final report".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::report::{IntervalRecord, StreamInterval};
    use crate::model::{RunDirection, RunProtocol, RunRole};
    use crate::store::NewRun;

    /// A stored run without a report: 3 sequence numbers of 2 streams each.
    fn stored() -> (Store, RunRow, std::path::PathBuf) {
        let d = crate::scratch::dir("export");
        let _ = std::fs::remove_dir_all(&d);
        let s = Store::open_dir(&d).expect("store");
        let id = s
            .create_run(&NewRun {
                role: RunRole::Client,
                protocol: RunProtocol::Tcp,
                peer_host: "192.0.2.2".into(),
                peer_port: 5201,
                direction: RunDirection::Send,
                params: serde_json::json!({"time": 3}),
                ..Default::default()
            })
            .expect("run");
        for seq in 0..3u32 {
            let streams = (1..=2u32)
                .map(|sid| StreamInterval {
                    id: sid,
                    socket: 4 + sid as i32,
                    start: seq as f64,
                    end: seq as f64 + 1.0,
                    bytes: 1000 * (seq as u64 + 1) + sid as u64,
                    bits_per_second: 8000.0 * (seq as f64 + 1.0),
                    sender: true,
                    omitted: false,
                    tcp: None,
                    udp: None,
                    latency: None,
                })
                .collect();
            s.add_interval(id, seq as i64, &IntervalRecord { streams })
                .expect("interval");
        }
        let run = s.get_run(id).expect("read").expect("the run");
        (s, run, d)
    }

    #[test]
    fn streamed_exports_equal_the_in_memory_ones() {
        let (s, run, d) = stored();
        let iv = s.intervals(run.id).expect("intervals");
        assert_eq!(iv.len(), 6);
        for pretty in [false, true] {
            let mut out = Vec::new();
            write_run_json(&mut out, &s, &run, None, pretty).expect("write");
            let streamed: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
            assert_eq!(streamed, run_json(&run, &iv, None), "pretty={pretty}");
            assert_eq!(streamed["intervals"].as_array().map(Vec::len), Some(3));
            assert_eq!(streamed["intervals"][2]["streams"][1]["bytes"], 3002);
            let keys: Vec<&String> = streamed.as_object().expect("object").keys().collect();
            assert_eq!(keys, ["start", "intervals", "end", "error"]);
        }
        let mut out = Vec::new();
        write_run_csv(&mut out, &s, &run, None).expect("write");
        let csv = String::from_utf8(out).expect("utf-8");
        assert_eq!(csv, run_csv(&run, &iv, None));
        assert_eq!(csv.lines().count(), 7);
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_run_with_no_intervals_streams_an_empty_list() {
        let d = crate::scratch::dir("export-empty");
        let _ = std::fs::remove_dir_all(&d);
        let s = Store::open_dir(&d).expect("store");
        let id = s
            .create_run(&NewRun {
                role: RunRole::Server,
                protocol: RunProtocol::Udp,
                direction: RunDirection::Receive,
                ..Default::default()
            })
            .expect("run");
        let run = s.get_run(id).expect("read").expect("the run");
        let mut out = Vec::new();
        write_run_json(&mut out, &s, &run, None, false).expect("write");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(v["intervals"], serde_json::json!([]));
        assert_eq!(v, run_json(&run, &[], None));
        let _ = std::fs::remove_dir_all(d);
    }
}
