//! Headline figures: the one place that turns what a kind measured into the figures History
//! keeps ([`RunFigures`]).

use crate::engine::iperf2::{Outcome, StreamResult, UdpFigures};
use crate::model::RunFigures;

/// The figures of an iperf 2 test for history: the main direction is the board's sending streams when
/// there are any (iperf 2 clients' view), else its receiving ones.
pub fn of_iperf2(o: &Outcome) -> RunFigures {
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
