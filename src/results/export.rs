//! Exports of a stored run: CSV (intervals and per-stream totals) and the iperf3 `-J` document.

use crate::engine::report::Report;
use crate::store::{IntervalRow, RunRow};

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
