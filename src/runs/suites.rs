//! Suites: several tests run one after another as one job, with one result table. The UDP
//! ladder of seed 001: UDP at each bitrate (default 100M, 400M, 1000M), board sending and then
//! receiving, shown as bitrate, jitter and lost/total datagrams per test. Saved definitions,
//! their runner and result tables are in [`def`] and [`run`].

pub(crate) mod run;

use crate::engine::iperf3::client::ClientSpec;
use crate::engine::iperf3::wire::Direction;
use crate::spec::test::{TestDirection, TestSpec};
use crate::store::RunRow;
use serde::Serialize;

/// The tests of a UDP ladder: for each rate (bits/s), the board sends, then receives (`-R`).
/// `base` gives peer, port, duration, datagram size and board port (its protocol, streams,
/// direction and bitrate are set here).
pub(crate) fn ladder_specs(
    base: &TestSpec,
    rates: &[u64],
    ports: &[crate::board::Port],
) -> Result<Vec<ClientSpec>, String> {
    let spec = TestSpec {
        udp: true,
        parallel: None,
        direction: TestDirection::Send,
        bitrate: None,
        ..base.clone()
    }
    .to_client_spec(ports)?;
    let mut out = Vec::new();
    for &r in rates {
        for d in [Direction::Send, Direction::Receive] {
            let mut s = spec.clone();
            s.params.bandwidth = r;
            s.params.direction = d;
            s.validate()?;
            out.push(s);
        }
    }
    Ok(out)
}

/// One line of the ladder table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct LadderRow {
    pub run_id: i64,
    /// Target bitrate, bits/s.
    pub target_bps: u64,
    /// "send" (board → peer) or "receive".
    pub direction: String,
    /// Receiver bitrate, bits/s.
    pub bitrate_bps: Option<f64>,
    /// Sender bitrate, bits/s.
    pub sender_bps: Option<f64>,
    /// True when the sender sent less than 97 % of the target (see [`crate::shortfall`]).
    pub short: bool,
    pub jitter_ms: Option<f64>,
    pub lost: Option<i64>,
    pub total: Option<i64>,
    pub lost_percent: Option<f64>,
    pub status: crate::model::RunStatus,
}

/// The table rows of a suite's runs.
pub(crate) fn ladder_rows(runs: &[RunRow]) -> Vec<LadderRow> {
    runs.iter()
        .map(|r| LadderRow {
            run_id: r.id,
            target_bps: crate::results::suite_table::RowParams::of(r).bandwidth,
            direction: r.direction.to_string(),
            bitrate_bps: r.receiver_bps,
            sender_bps: r.sender_bps,
            short: crate::results::shortfall::for_run(r).is_some_and(|c| c.short),
            jitter_ms: r.jitter_ms,
            lost: r.lost_packets,
            total: r.total_packets,
            lost_percent: r.lost_percent,
            status: r.status,
        })
        .collect()
}

fn short_rate(bps: u64) -> String {
    if bps >= 1_000_000_000 && bps % 1_000_000 == 0 {
        format!("{}M", bps / 1_000_000)
    } else if bps >= 1_000_000 {
        format!("{}M", bps as f64 / 1e6)
    } else {
        format!("{}K", bps as f64 / 1e3)
    }
}

/// The table as text, like the seed reports' (one line per test): target, direction, sent
/// (marked "short" below 97 % of the target), received, jitter, lost/total, loss, status.
pub(crate) fn ladder_text(rows: &[LadderRow]) -> String {
    let mut t = format!(
        "{:>7}  {:<9}  {:>22}  {:>16}  {:>10}  {:>17}  {:>8}  {}\n",
        "Target", "Direction", "Sent", "Received", "Jitter", "Lost/Total", "Loss", "Status"
    );
    for r in rows {
        let sent = r
            .sender_bps
            .map(crate::model::display::rate)
            .unwrap_or_else(|| "-".into());
        t.push_str(&format!(
            "{:>7}  {:<9}  {:>22}  {:>16}  {:>10}  {:>17}  {:>8}  {}\n",
            short_rate(r.target_bps),
            r.direction,
            if r.short {
                format!("{sent} (short)")
            } else {
                sent
            },
            r.bitrate_bps
                .map(crate::model::display::rate)
                .unwrap_or_else(|| "-".into()),
            r.jitter_ms
                .map(|j| format!("{j:.3} ms"))
                .unwrap_or_else(|| "-".into()),
            match (r.lost, r.total) {
                (Some(l), Some(t)) => format!("{l}/{t}"),
                _ => "-".into(),
            },
            r.lost_percent
                .map(|p| format!("{p:.2} %"))
                .unwrap_or_else(|| "-".into()),
            r.status
        ));
    }
    t
}

/// Whether this spec is a UDP test (for callers assembling suites).
#[cfg(test)]
pub(crate) fn is_udp(s: &ClientSpec) -> bool {
    s.params.protocol == crate::engine::iperf3::wire::Protocol::Udp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::suite::parse_rates;

    #[test]
    fn rates_parse_and_limits() {
        assert_eq!(
            parse_rates("100M, 400M,1000M").unwrap(),
            vec![100_000_000, 400_000_000, 1_000_000_000]
        );
        assert!(parse_rates("").is_err());
        assert!(parse_rates("fast").is_err());
        assert!(parse_rates("0").is_err());
        assert!(parse_rates(&["1M"; 11].join(",")).is_err());
    }

    #[test]
    fn ladder_is_send_then_receive_per_rate() {
        let base = TestSpec {
            duration: Some(5),
            ..TestSpec::new("192.0.2.2")
        };
        let specs = ladder_specs(&base, &[100_000_000, 400_000_000], &[]).unwrap();
        let got: Vec<(u64, Direction)> = specs
            .iter()
            .map(|s| (s.params.bandwidth, s.params.direction))
            .collect();
        assert_eq!(
            got,
            vec![
                (100_000_000, Direction::Send),
                (100_000_000, Direction::Receive),
                (400_000_000, Direction::Send),
                (400_000_000, Direction::Receive)
            ]
        );
        assert!(specs.iter().all(|s| is_udp(s) && s.params.time == 5));
    }
}
