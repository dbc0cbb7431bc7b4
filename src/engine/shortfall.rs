//! Rate checks of paced runs: the rate asked for (`-b`), what the sender sent and what the
//! receiver got, and whether the sender fell short of the target — a first-class result shown
//! in `-J`, the CLI summary, the run page and the suite, ladder and compare tables.
//! Not for: pacing itself (see [`crate::engine::pacer`]).

use crate::engine::params::Direction;
use crate::engine::report::{Report, Role, StreamSummary};
use serde::Serialize;

/// A sender below this share of the asked rate fell short, percent.
pub const SHORTFALL_PERCENT: f64 = 97.0;

/// Target, sent and received rate of one paced direction of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RateCheck {
    /// The rate asked for, all streams of the direction together, bits/s.
    pub target_bits_per_second: f64,
    /// What the sender sent, bits/s (its bytes over its seconds).
    pub sent_bits_per_second: f64,
    /// What the receiver got, bits/s; `None` when the receiver's figures are not known.
    pub received_bits_per_second: Option<f64>,
    /// Sent as % of the target.
    pub sent_percent: f64,
    /// True when the sender sent less than [`SHORTFALL_PERCENT`] % of the target.
    pub short: bool,
    /// The paced sender's largest lag behind its schedule, ms, when this end sent it (a
    /// sender that did not get the CPU); `None` when not known.
    pub sender_max_lag_ms: Option<f64>,
    /// The paced sender's busiest 1 ms as a rate, bits/s, when this end sent it.
    pub sender_peak_1ms_bps: Option<f64>,
}

/// A lag behind the schedule from this many ms is named as the reason of a shortfall.
pub const STALL_MS: f64 = 10.0;

impl RateCheck {
    /// Check `sent_bps` (and `received_bps`) against `target_bps`, all bits/s. `None` when
    /// nothing was asked for (target 0 = unpaced) or nothing was sent.
    pub fn new(target_bps: f64, sent_bps: f64, received_bps: Option<f64>) -> Option<RateCheck> {
        if target_bps <= 0.0 || !target_bps.is_finite() || !sent_bps.is_finite() {
            return None;
        }
        let pct = sent_bps * 100.0 / target_bps;
        Some(RateCheck {
            target_bits_per_second: target_bps,
            sent_bits_per_second: sent_bps,
            received_bits_per_second: received_bps.filter(|r| r.is_finite()),
            sent_percent: pct,
            short: pct < SHORTFALL_PERCENT,
            sender_max_lag_ms: None,
            sender_peak_1ms_bps: None,
        })
    }

    /// With the sender's pacer figures (see the fields), when this end sent.
    pub fn with_sender(mut self, max_lag_ms: Option<f64>, peak_1ms_bps: Option<f64>) -> Self {
        self.sender_max_lag_ms = max_lag_ms.filter(|x| x.is_finite());
        self.sender_peak_1ms_bps = peak_1ms_bps.filter(|x| x.is_finite());
        self
    }

    /// Why the sender fell short, when its figures say: "the sender fell up to 41 ms behind
    /// its schedule (it did not get the CPU: a busy core)".
    pub fn why(&self) -> Option<String> {
        let lag = self
            .sender_max_lag_ms
            .filter(|l| self.short && *l >= STALL_MS)?;
        Some(format!(
            "the sender fell up to {lag:.0} ms behind its schedule (it did not get the CPU: a busy core)"
        ))
    }

    /// True when the sender reached the target (≥ [`SHORTFALL_PERCENT`] %).
    pub fn reached(&self) -> bool {
        !self.short
    }

    /// One sentence for the CLI summary and the run page, e.g. "shortfall: the sender sent
    /// 52.1 Mbit/s of the 100 Mbit/s asked (52.1 %)".
    pub fn sentence(&self) -> String {
        let recv = match self.received_bits_per_second {
            Some(r) => format!(", the receiver got {}", crate::model::display::rate(r)),
            None => String::new(),
        };
        if self.short {
            let why = self.why().map(|w| format!("; {w}")).unwrap_or_default();
            format!(
                "shortfall: the sender sent {} of the {} asked ({:.1} %){recv}{why}",
                crate::model::display::rate(self.sent_bits_per_second),
                crate::model::display::rate(self.target_bits_per_second),
                self.sent_percent
            )
        } else {
            format!(
                "reached the requested rate: the sender sent {} of the {} asked ({:.1} %){recv}",
                crate::model::display::rate(self.sent_bits_per_second),
                crate::model::display::rate(self.target_bits_per_second),
                self.sent_percent
            )
        }
    }

    /// The `-J` object (`end.shortfall`): target, sent, received (bits/s), sent_percent,
    /// short (bool), threshold_percent; when this end sent paced, `sender_max_lag_ms` and
    /// `sender_peak_1ms_bits_per_second` (with `sender_peak_1ms_ratio` to the target).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "target_bits_per_second": self.target_bits_per_second,
            "sent_bits_per_second": self.sent_bits_per_second,
            "received_bits_per_second": self.received_bits_per_second,
            "sent_percent": self.sent_percent,
            "threshold_percent": SHORTFALL_PERCENT,
            "short": self.short,
        });
        if let Some(l) = self.sender_max_lag_ms {
            v["sender_max_lag_ms"] = l.into();
        }
        if let Some(p) = self.sender_peak_1ms_bps {
            v["sender_peak_1ms_bits_per_second"] = p.into();
            v["sender_peak_1ms_ratio"] = (p / self.target_bits_per_second).into();
        }
        v
    }
}

fn group_rates(ss: &[&StreamSummary]) -> (f64, Option<f64>) {
    let sb: u64 = ss.iter().map(|s| s.sender.bytes).sum();
    let secs = ss.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
    let sent = if secs > 0.0 {
        sb as f64 * 8.0 / secs
    } else {
        0.0
    };
    let recv = if !ss.is_empty() && ss.iter().all(|s| s.receiver.is_some()) {
        let rb: u64 = ss.iter().filter_map(|s| s.receiver.map(|r| r.bytes)).sum();
        let rs = ss
            .iter()
            .filter_map(|s| s.receiver.map(|r| r.seconds))
            .fold(0.0, f64::max);
        (rs > 0.0).then(|| rb as f64 * 8.0 / rs)
    } else {
        None
    };
    (sent, recv)
}

/// The rate check of an iperf3 report's leg: `local_sender` picks the streams this end sends
/// (true) or receives (false). `-b` is per stream (iperf3), so the target is `-b` × streams.
/// `None` when the test was not paced or the leg has no streams.
pub fn for_report_leg(report: &Report, local_sender: bool) -> Option<RateCheck> {
    let ss: Vec<&StreamSummary> = report
        .streams
        .iter()
        .filter(|s| s.local_sender == local_sender)
        .collect();
    if ss.is_empty() || report.params.bandwidth == 0 {
        return None;
    }
    let (sent, recv) = group_rates(&ss);
    let lag = ss
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.sender_max_lag_ms))
        .reduce(f64::max);
    let peak = ss
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.sender_peak_1ms_bps))
        .reduce(|a, b| a + b);
    RateCheck::new(report.params.bandwidth as f64 * ss.len() as f64, sent, recv)
        .map(|c| c.with_sender(lag, peak))
}

/// The rate check of an iperf3 report's main leg: the client→server leg of a `--bidir` test,
/// else the only leg.
pub fn for_report(report: &Report) -> Option<RateCheck> {
    let leg = if report.params.direction == Direction::Bidir {
        report.role == Role::Client
    } else {
        report.streams.first().map(|s| s.local_sender)?
    };
    for_report_leg(report, leg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortfall_threshold_is_97_percent() {
        let c = RateCheck::new(100e6, 52e6, Some(51e6)).unwrap();
        assert!(c.short);
        assert_eq!(c.sent_percent, 52.0);
        assert!(c.sentence().starts_with("shortfall: the sender sent 52"));
        let ok = RateCheck::new(100e6, 97.0e6, None).unwrap();
        assert!(!ok.short && ok.reached());
        assert!(RateCheck::new(100e6, 96.9e6, None).unwrap().short);
        assert_eq!(RateCheck::new(0.0, 5e6, None), None);
        let j = c.to_json();
        assert_eq!(j["short"], true);
        assert_eq!(j["target_bits_per_second"], 100e6);
        assert!(j.get("sender_max_lag_ms").is_none());
    }

    #[test]
    fn a_stalled_sender_is_named_as_the_reason() {
        let c = RateCheck::new(100e6, 62e6, Some(61e6))
            .unwrap()
            .with_sender(Some(41.3), Some(190e6));
        assert_eq!(
            c.sentence(),
            "shortfall: the sender sent 62.0 Mbit/s of the 100.0 Mbit/s asked (62.0 %), the receiver got 61.0 Mbit/s; the sender fell up to 41 ms behind its schedule (it did not get the CPU: a busy core)"
        );
        let j = c.to_json();
        assert_eq!(j["sender_max_lag_ms"], 41.3);
        assert_eq!(j["sender_peak_1ms_ratio"], 1.9);
        // A short lag is no reason; a reached rate needs none.
        let small = RateCheck::new(100e6, 62e6, None)
            .unwrap()
            .with_sender(Some(3.0), None);
        assert_eq!(small.why(), None);
        let ok = RateCheck::new(100e6, 99e6, None)
            .unwrap()
            .with_sender(Some(80.0), None);
        assert_eq!(ok.why(), None);
    }
}
