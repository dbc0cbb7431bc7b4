//! Text summaries of stored runs for the CLI and the run page (kinds without an iperf3 text
//! report: forwarding and monitor-only runs).

use crate::model::RunKind;
use crate::results::forward_summary::BoardFigures;
use crate::store::RunRow;

/// The run's summary as a few lines of text: status, peer figures, per-port rates.
pub(crate) fn summary_text(run: &RunRow) -> String {
    let s = &run.summary;
    // A stored `null` (NaN, an infinity) shows as nothing.
    let rate = |v: f64| {
        if v.is_finite() {
            crate::model::display::rate(v)
        } else {
            String::new()
        }
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
    let board = BoardFigures::of(run);
    for (dir, v) in board.forwarded.iter().flat_map(|f| &f.0) {
        out.push_str(&format!(
            "forwarded {dir}: {} ({:.0} packets/s)\n",
            rate(v.bits_per_second),
            or_zero(v.packets_per_second)
        ));
    }
    if !board.ports.is_empty() {
        out.push_str(&format!(
            "{:<16} {:>18} {:>18} {:>12} {:>12}\n",
            "port", "rx", "tx", "rx pkt/s", "tx pkt/s"
        ));
        for (name, p) in &board.ports {
            out.push_str(&format!(
                "{:<16} {:>18} {:>18} {:>12.0} {:>12.0}\n",
                name,
                rate(p.rx_bits_per_second),
                rate(p.tx_bits_per_second),
                or_zero(p.rx_packets_per_second),
                or_zero(p.tx_packets_per_second)
            ));
        }
    }
    if let Some(peak) = board.conntrack_peak() {
        out.push_str(&format!("conntrack entries: peak {peak}\n"));
    }
    out
}

/// `v`, or 0 for a stored `null` (NaN, an infinity).
fn or_zero(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// For forwarding and monitor runs, the board's summary ([`summary_text`]) followed by `text`
/// (the peer's iperf3 summary); other runs' `text` unchanged.
pub(crate) fn board_text(run: &RunRow, text: Option<String>) -> Option<String> {
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
