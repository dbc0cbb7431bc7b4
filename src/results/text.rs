//! Text summaries of stored runs for the CLI and the run page (kinds without an iperf3 text
//! report: forwarding and monitor-only runs).

use crate::model::RunKind;
use crate::store::RunRow;

/// The run's summary as a few lines of text: status, peer figures, per-port rates.
pub fn summary_text(run: &RunRow) -> String {
    let s = &run.summary;
    let rate = |v: &serde_json::Value| {
        v.as_f64()
            .map(crate::model::display::rate)
            .unwrap_or_default()
    };
    let mut out = format!("Run {} ({}): {}\n", run.id, run.kind, run.status);
    if let Some(e) = &run.error {
        out.push_str(&format!("error: {e}\n"));
    }
    match run.kind {
        RunKind::Rfc2544 => {
            out.push_str(&crate::results::rfc2544::text(
                &crate::results::rfc2544::Rfc2544Summary::of_summary(s),
            ));
            return out;
        }
        // The board's view: ports, forwarded rates, conntrack.
        RunKind::Forward | RunKind::Monitor => {}
        // No board view: the peer figures the row has, if any.
        RunKind::Iperf3
        | RunKind::Iperf2
        | RunKind::Multi
        | RunKind::HttpServe
        | RunKind::HttpGet
        | RunKind::TcpSink
        | RunKind::TcpSource
        | RunKind::Latency => {}
    }
    if let (Some(snd), Some(rcv)) = (run.sender_bps, run.receiver_bps) {
        out.push_str(&format!(
            "peer test: sender {}, receiver {}\n",
            crate::model::display::rate(snd),
            crate::model::display::rate(rcv)
        ));
    }
    if let Some(fw) = s.get("forwarded").and_then(|f| f.as_object()) {
        for (dir, v) in fw {
            out.push_str(&format!(
                "forwarded {dir}: {} ({:.0} packets/s)\n",
                rate(&v["bits_per_second"]),
                v["packets_per_second"].as_f64().unwrap_or(0.0)
            ));
        }
    }
    if let Some(ports) = s.get("ports").and_then(|p| p.as_object()) {
        out.push_str(&format!(
            "{:<16} {:>18} {:>18} {:>12} {:>12}\n",
            "port", "rx", "tx", "rx pkt/s", "tx pkt/s"
        ));
        for (name, p) in ports {
            out.push_str(&format!(
                "{:<16} {:>18} {:>18} {:>12.0} {:>12.0}\n",
                name,
                rate(&p["rx_bits_per_second"]),
                rate(&p["tx_bits_per_second"]),
                p["rx_packets_per_second"].as_f64().unwrap_or(0.0),
                p["tx_packets_per_second"].as_f64().unwrap_or(0.0)
            ));
        }
    }
    if let Some(peak) = s.pointer("/conntrack/peak").and_then(|v| v.as_i64()) {
        out.push_str(&format!("conntrack entries: peak {peak}\n"));
    }
    out
}

/// For forwarding and monitor runs, the board's summary ([`summary_text`]) followed by `text`
/// (the peer's iperf3 summary); other runs' `text` unchanged.
pub fn board_text(run: &RunRow, text: Option<String>) -> Option<String> {
    if !run.kind.has_board_summary() || run.summary.is_null() {
        return text;
    }
    let mut t = summary_text(run);
    if let Some(x) = text {
        t.push_str("\nThe peer's test:\n");
        t.push_str(&x);
    }
    Some(t)
}
