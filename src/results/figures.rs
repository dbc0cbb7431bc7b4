//! Headline figures: the one place that turns what a kind measured into the figures History
//! keeps ([`RunFigures`]).

use crate::engine::iperf2::{Outcome, StreamResult, UdpFigures};
use crate::engine::report::Report;
use crate::model::RunFigures;

/// The figures of an iperf 2 test for history: the main direction is the board's sending streams when
/// there are any (iperf 2 clients' view), else its receiving ones.
pub(crate) fn of_iperf2(o: &Outcome) -> RunFigures {
    let send: Vec<&StreamResult> = o.streams.iter().filter(|s| s.sender).collect();
    let recv: Vec<&StreamResult> = o.streams.iter().filter(|s| !s.sender).collect();
    let main = if send.is_empty() { &recv } else { &send };
    let sum_bps = |v: &[&StreamResult]| v.iter().map(|s| s.bits_per_second()).sum::<f64>();
    let mut f = RunFigures::default();
    if main.is_empty() {
        return f;
    }
    let udp: Vec<UdpFigures> = main.iter().filter_map(|s| s.udp).collect();
    if main[0].sender {
        f.sender_bps = Some(sum_bps(main));
        if !udp.is_empty() {
            f.receiver_bps = Some(udp.iter().map(|u| u.bits_per_second()).sum());
            f.bytes = Some(udp.iter().map(|u| u.bytes as i64).sum());
        } else {
            f.bytes = Some(main.iter().map(|s| s.bytes as i64).sum());
        }
    } else {
        f.receiver_bps = Some(sum_bps(main));
        f.bytes = Some(main.iter().map(|s| s.bytes as i64).sum());
    }
    if !udp.is_empty() {
        let lost: u64 = udp.iter().map(|u| u.lost).sum();
        let total: u64 = udp.iter().map(|u| u.total).sum();
        f.lost_packets = Some(lost as i64);
        f.total_packets = Some(total as i64);
        f.lost_percent = Some(crate::engine::udp::loss_percent(lost, total));
        f.jitter_ms = Some(udp.iter().map(|u| u.jitter_ms).sum::<f64>() / udp.len() as f64);
    }
    f
}

/// The figures of an iperf3 report: the main direction is the first stream's (the board's
/// sending streams when it sends first); sender bitrate = bytes × 8 / the longest sender time,
/// receiver bitrate the same over the receiver's bytes and time (only when every main stream
/// has a receiver side), retransmits summed where known, UDP lost/total summed over streams
/// with an expected count, loss % from those ([`crate::engine::udp::loss_percent`]) and jitter
/// the streams' mean (ms).
pub(crate) fn of_report(r: &Report) -> RunFigures {
    let mut f = RunFigures::default();
    let primary = r.streams.first().map(|s| s.local_sender).unwrap_or(true);
    let main: Vec<_> = r
        .streams
        .iter()
        .filter(|s| s.local_sender == primary)
        .collect();
    if main.is_empty() {
        return f;
    }
    let sb: u64 = main.iter().map(|s| s.sender.bytes).sum();
    let ss = main.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
    if ss > 0.0 {
        f.sender_bps = Some(sb as f64 * 8.0 / ss);
    }
    if main.iter().all(|s| s.receiver.is_some()) {
        let rb: u64 = main
            .iter()
            .filter_map(|s| s.receiver.map(|x| x.bytes))
            .sum();
        let rs = main
            .iter()
            .filter_map(|s| s.receiver.map(|x| x.seconds))
            .fold(0.0, f64::max);
        f.bytes = Some(rb as i64);
        if rs > 0.0 {
            f.receiver_bps = Some(rb as f64 * 8.0 / rs);
        }
    }
    let reverse: Vec<_> = r
        .streams
        .iter()
        .filter(|s| s.local_sender != primary)
        .collect();
    if !reverse.is_empty() {
        // The receiver's bytes where it reported, else the sender's.
        let b: u64 = reverse
            .iter()
            .map(|s| s.receiver.map_or(s.sender.bytes, |x| x.bytes))
            .sum();
        f.reverse_bytes = i64::try_from(b).ok();
    }
    if main.iter().any(|s| s.retransmits >= 0) {
        f.retransmits = Some(main.iter().map(|s| s.retransmits.max(0)).sum::<i64>());
    }
    let us: Vec<_> = main
        .iter()
        .filter_map(|s| s.udp)
        .filter(|u| u.expected.is_some())
        .collect();
    if !us.is_empty() {
        let (l, t) = us
            .iter()
            .map(|u| u.loss())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        f.lost_packets = Some(l as i64);
        f.total_packets = Some(t as i64);
        f.lost_percent = Some(crate::engine::udp::loss_percent(l, t));
        f.jitter_ms = Some(us.iter().map(|u| u.jitter_ms).sum::<f64>() / us.len() as f64);
    }
    f
}

/// Retransmits of a run from its stored intervals: the sum over the board's sending streams'
/// intervals (each interval carries that stream's retransmits in it, from TCP_INFO); `None`
/// when no interval carries a count (UDP, or a receiving side).
pub(crate) fn retransmits_of(intervals: &[crate::store::IntervalRow]) -> Option<i64> {
    let counts: Vec<i64> = intervals
        .iter()
        .filter(|i| i.sender)
        .filter_map(|i| i.retransmits)
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::IntervalRow;

    fn iv(sender: bool, retr: Option<i64>) -> IntervalRow {
        IntervalRow {
            seq: 0,
            stream_id: 1,
            socket: 3,
            start: 0.0,
            end: 1.0,
            bytes: 1,
            bits_per_second: 8.0,
            sender,
            omitted: false,
            retransmits: retr,
            snd_cwnd: None,
            rtt: None,
            packets: None,
            lost: None,
            jitter_ms: None,
            out_of_order: None,
        }
    }

    #[test]
    fn retransmits_sum_the_sending_intervals() {
        let rows = [iv(true, Some(3)), iv(true, Some(4)), iv(false, None)];
        assert_eq!(retransmits_of(&rows), Some(7));
        assert_eq!(retransmits_of(&[iv(false, None)]), None);
        assert_eq!(retransmits_of(&[iv(true, None)]), None);
    }
}
