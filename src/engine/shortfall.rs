//! Rate checks of paced runs: the rate asked for (`-b`), what the sender sent and what the
//! receiver got, and whether the sender fell short of the target — a first-class result shown
//! in `-J`, the CLI summary, the run page and the suite, ladder and compare tables.
//! Not for: pacing itself (see [`crate::engine::pacer`]).

use crate::engine::params::Direction;
use crate::engine::report::{Report, Role, StreamSummary};
use serde::Serialize;

/// A sender below this share of the asked rate fell short, percent.
pub(crate) const SHORTFALL_PERCENT: f64 = 97.0;

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
    /// The paced sender's stalls (times it fell more than 20 ms behind its schedule), when
    /// this end sent it.
    pub sender_stalls: Option<u32>,
    /// What the paced sender still owed its schedule at the end, ms (written-off debt
    /// included), when this end sent it.
    pub sender_owed_ms: Option<f64>,
    /// Who paced the sender, when this end sent UDP paced (see
    /// [`crate::engine::pacer::PacedBy`]): the kernel's fq is named in the sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paced_by: Option<crate::engine::pacer::PacedBy>,
}

/// A lag behind the schedule from this many ms is named as the reason of a shortfall.
pub(crate) const STALL_MS: f64 = 10.0;

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
            sender_stalls: None,
            sender_owed_ms: None,
            paced_by: None,
        })
    }

    /// With who paced the sender (see the field).
    pub fn with_paced_by(mut self, p: Option<crate::engine::pacer::PacedBy>) -> Self {
        self.paced_by = p;
        self
    }

    /// With the sender's pacer figures (see the fields), when this end sent.
    pub fn with_sender(mut self, max_lag_ms: Option<f64>, peak_1ms_bps: Option<f64>) -> Self {
        self.sender_max_lag_ms = max_lag_ms.filter(|x| x.is_finite());
        self.sender_peak_1ms_bps = peak_1ms_bps.filter(|x| x.is_finite());
        self
    }

    /// With the sender's stalls and what it still owed at the end (see the fields).
    pub fn with_catch_up(mut self, stalls: Option<u32>, owed_ms: Option<f64>) -> Self {
        self.sender_stalls = stalls;
        self.sender_owed_ms = owed_ms.filter(|x| x.is_finite() && *x >= 0.0);
        self
    }

    /// How a sender that stalled caught up (the pacing note), when it stalled for at least
    /// [`STALL_MS`]: "the sender fell up to 180 ms behind its schedule in 3 stalls (it did not
    /// get the CPU) and caught up, its busiest 1 ms at 4.6 × the rate", or, when it never
    /// got back, "… and was still 220 ms behind at the end, its busiest 1 ms at 5.0 × the
    /// rate". `None` without a stall.
    pub fn catch_up(&self) -> Option<String> {
        let lag = self.sender_max_lag_ms.filter(|l| *l >= STALL_MS)?;
        let stalls = match self.sender_stalls {
            Some(1) => " in 1 stall".to_string(),
            Some(n) if n > 1 => format!(" in {n} stalls"),
            _ => String::new(),
        };
        let owed = self.sender_owed_ms.filter(|o| *o >= 1.0);
        let how = match owed {
            Some(o) => format!("was still {o:.0} ms behind at the end"),
            None => "caught up".to_string(),
        };
        // Above the 1.9 × bound of an on-time sender (a catch-up level of engine::pacer): a
        // burst a receiver's socket buffer can drop, so a loss is not only the path's.
        let peak = self
            .sender_peak_1ms_bps
            .map(|p| {
                let x = p / self.target_bits_per_second;
                let burst = if x > 2.0 {
                    " (a burst a receiver's socket buffer may drop)"
                } else {
                    ""
                };
                format!(", its busiest 1 ms at {x:.1} × the rate{burst}")
            })
            .unwrap_or_default();
        Some(format!(
            "the sender fell up to {lag:.0} ms behind its schedule{stalls} (it did not get the CPU) and {how}{peak}"
        ))
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
        let kernel = self
            .paced_by
            .and_then(|p| p.note())
            .map(|n| format!("; {n}"))
            .unwrap_or_default();
        if self.short {
            let why = match (self.catch_up(), self.why()) {
                (Some(c), _) if self.sender_stalls.is_some() => format!("; {c}"),
                (_, Some(w)) => format!("; {w}"),
                _ => String::new(),
            };
            format!(
                "shortfall: the sender sent {} of the {} asked ({:.1} %){recv}{why}{kernel}",
                crate::model::display::rate(self.sent_bits_per_second),
                crate::model::display::rate(self.target_bits_per_second),
                self.sent_percent
            )
        } else {
            let note = self
                .catch_up()
                .map(|c| format!("; {c}"))
                .unwrap_or_default();
            format!(
                "reached the requested rate: the sender sent {} of the {} asked ({:.1} %){recv}{note}{kernel}",
                crate::model::display::rate(self.sent_bits_per_second),
                crate::model::display::rate(self.target_bits_per_second),
                self.sent_percent
            )
        }
    }

    /// The `-J` object (`end.shortfall`): target, sent, received (bits/s), sent_percent,
    /// short (bool), threshold_percent; when this end sent paced, `sender_max_lag_ms` and
    /// `sender_peak_1ms_bits_per_second` (with `sender_peak_1ms_ratio` to the target).
    pub fn to_json(self) -> serde_json::Value {
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
        if let Some(n) = self.sender_stalls {
            v["sender_stalls"] = n.into();
        }
        if let Some(o) = self.sender_owed_ms {
            v["sender_owed_ms"] = o.into();
        }
        v
    }
}

/// (sent, received) bits/s of a group of streams; sent is `None` when the sender's seconds
/// are not known (0: a peer's figures that never arrived, e.g. a test ended by
/// `--rcv-timeout` before the results exchange), so no shortfall is claimed from them.
fn group_rates(ss: &[&StreamSummary]) -> (Option<f64>, Option<f64>) {
    let sb: u64 = ss.iter().map(|s| s.sender.bytes).sum();
    let secs = ss.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
    let sent = (secs > 0.0).then(|| sb as f64 * 8.0 / secs);
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
pub(crate) fn for_report_leg(report: &Report, local_sender: bool) -> Option<RateCheck> {
    let ss: Vec<&StreamSummary> = report
        .streams
        .iter()
        .filter(|s| s.local_sender == local_sender)
        .collect();
    if ss.is_empty() || report.params.bandwidth == 0 {
        return None;
    }
    let (Some(sent), recv) = group_rates(&ss) else {
        return None;
    };
    let lag = ss
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.sender_max_lag_ms))
        .reduce(f64::max);
    let peak = ss
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.sender_peak_1ms_bps))
        .reduce(|a, b| a + b);
    let stalls = ss
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.sender_stalls))
        .reduce(u32::saturating_add);
    let owed = ss
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.sender_owed_ms))
        .reduce(f64::max);
    let paced_by = ss
        .iter()
        .filter_map(|s| s.udp.and_then(|u| u.paced_by))
        .max_by_key(|p| p.is_kernel());
    RateCheck::new(report.params.bandwidth as f64 * ss.len() as f64, sent, recv).map(|c| {
        c.with_sender(lag, peak)
            .with_catch_up(stalls, owed)
            .with_paced_by(paced_by)
    })
}

/// The rate check of an iperf3 report's main leg: the client→server leg of a `--bidir` test,
/// else the only leg.
pub(crate) fn for_report(report: &Report) -> Option<RateCheck> {
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

    /// The tryout's `-R --rcv-timeout 2000` against a server that stopped: the sender's
    /// figures never arrived (0 bytes over 0 s), so there is no "sent 0.000 Mbit/s" shortfall.
    #[test]
    fn unknown_sender_figures_are_no_shortfall() {
        use crate::engine::report::{SideTotals, StreamSummary};
        let s = StreamSummary {
            sender: SideTotals {
                bytes: 0,
                seconds: 0.0,
            },
            receiver: Some(SideTotals {
                bytes: 6_225_000,
                seconds: 3.0,
            }),
            ..Default::default()
        };
        assert_eq!(group_rates(&[&s]), (None, Some(16_600_000.0)));
        let known = StreamSummary {
            sender: SideTotals {
                bytes: 6_250_000,
                seconds: 1.0,
            },
            ..s.clone()
        };
        assert_eq!(group_rates(&[&known]).0, Some(50_000_000.0));
    }

    /// Issue 39 item 2: the pacing note shows the stall and the repayment, reached or not.
    #[test]
    fn the_note_names_the_kernel_when_fq_paced() {
        use crate::engine::pacer::{PacedBy, PortName, UserWhy};
        let base = RateCheck::new(20e6, 19.99e6, Some(19.98e6)).unwrap();
        let k = base.with_paced_by(Some(PacedBy::Kernel {
            port: PortName::new("a0"),
            forced: false,
        }));
        assert_eq!(
            k.sentence(),
            "reached the requested rate: the sender sent 20.0 Mbit/s of the 20.0 Mbit/s asked (100.0 %), the receiver got 20.0 Mbit/s; paced by the kernel (fq on a0)"
        );
        // The user-space pacer is the default: the sentence is unchanged.
        let u = base.with_paced_by(Some(PacedBy::UserSpace { why: UserWhy::NoFq }));
        assert_eq!(u.sentence(), base.sentence());
        let forced = base.with_paced_by(Some(PacedBy::Kernel {
            port: PortName::new(""),
            forced: true,
        }));
        assert!(forced.sentence().ends_with(
            "; paced by the kernel, forced without fq (nothing spread its 8 ms batches)"
        ));
        assert_eq!(k.to_json()["sent_percent"], base.to_json()["sent_percent"]);
    }

    #[test]
    fn the_pacing_note_shows_the_stall_and_the_repayment() {
        let ok = RateCheck::new(100e6, 99.9e6, Some(99.8e6))
            .unwrap()
            .with_sender(Some(182.4), Some(460e6))
            .with_catch_up(Some(3), Some(0.2));
        assert_eq!(
            ok.sentence(),
            "reached the requested rate: the sender sent 99.9 Mbit/s of the 100.0 Mbit/s asked (99.9 %), the receiver got 99.8 Mbit/s; the sender fell up to 182 ms behind its schedule in 3 stalls (it did not get the CPU) and caught up, its busiest 1 ms at 4.6 × the rate (a burst a receiver's socket buffer may drop)"
        );
        let j = ok.to_json();
        assert_eq!(j["sender_stalls"], 3);
        assert_eq!(j["sender_owed_ms"], 0.2);
        let short = RateCheck::new(100e6, 78e6, None)
            .unwrap()
            .with_sender(Some(223.9), Some(500e6))
            .with_catch_up(Some(1), Some(1101.0));
        assert_eq!(
            short.sentence(),
            "shortfall: the sender sent 78.0 Mbit/s of the 100.0 Mbit/s asked (78.0 %); the sender fell up to 224 ms behind its schedule in 1 stall (it did not get the CPU) and was still 1101 ms behind at the end, its busiest 1 ms at 5.0 × the rate (a burst a receiver's socket buffer may drop)"
        );
        // Within the on-time bound: no caution.
        let gentle = RateCheck::new(100e6, 100e6, None)
            .unwrap()
            .with_sender(Some(30.0), Some(190e6))
            .with_catch_up(Some(1), Some(0.0));
        assert_eq!(
            gentle.catch_up().as_deref(),
            Some("the sender fell up to 30 ms behind its schedule in 1 stall (it did not get the CPU) and caught up, its busiest 1 ms at 1.9 × the rate")
        );
        // No stall, no note; a lag under STALL_MS is none.
        let calm = RateCheck::new(100e6, 100e6, None)
            .unwrap()
            .with_sender(Some(4.0), Some(139e6))
            .with_catch_up(Some(0), Some(0.0));
        assert_eq!(calm.catch_up(), None);
        assert!(!calm.sentence().contains("behind"));
    }
}
