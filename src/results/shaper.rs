//! The board's own shaper in a verdict (issue 38 item 2): when a qdisc or class with a rate
//! on one of the run's ports (`crate::board::shaper`, stored with the run's board counters
//! as `shapers`) let through about what the run got, or dropped / held back packets during
//! the run, the verdict leads with it: "limited by the board's own shaper: tbf 100 Mbit/s on
//! eth0".
//!
//! The rule, with the numbers of a real case: a shaper charges each packet's length as the
//! kernel holds it (IP packet + 14-byte Ethernet header, plus tc's `overhead`), so at rate R
//! it passes R × payload / charged bytes of payload: TCP/IPv4 with timestamps at MTU 1500
//! carries 1448 bytes in 1514 charged, so 100 Mbit/s passes 95.64 Mbit/s (the lab measured
//! 95.6). The run *matches* the shaper when it got between [`MATCH_LOW`] and [`MATCH_HIGH`] %
//! of that; it *hit* the shaper when the port's root qdisc dropped or was over its limit
//! during the run and the run got no more than [`MATCH_HIGH`] % of it. Matching beats hitting;
//! among several, the closest match (else the most drops + overlimits) is named.

use crate::board::counters::BoardDelta;
use crate::board::shaper::TcNode;
use crate::results::analysis::{Analysis, Framing, Transport, Verdict};
use std::collections::BTreeMap;

/// Ethernet header the kernel counts in a packet's length on a shaper (MAC header, no FCS,
/// no preamble), bytes.
pub(crate) const L2_HEADER: u32 = 14;
/// A run matches a shaper from this share of what the shaper passes, percent.
pub(crate) const MATCH_LOW: f64 = 93.0;
/// … up to this share (a TBF's burst lets a little more through at the start), percent.
pub(crate) const MATCH_HIGH: f64 = 103.0;

/// The least share (%) of what a shaper passes a run must have got for the shaper's drops or
/// overlimits to name it: below, something else held the run back.
pub(crate) const HIT_LOW: f64 = 50.0;

/// Share of what a shaper charges that is the run's payload: payload / (IP packet + 14 +
/// `overhead`) per packet (IP fragments for UDP datagrams larger than the MTU: each charged
/// its own headers). `None` when the MTU carries no payload.
pub(crate) fn charged_fraction(f: &Framing, overhead: u32) -> Option<f64> {
    let ip: u32 = if f.ipv6 { 40 } else { 20 };
    let extra = L2_HEADER.checked_add(overhead)?;
    match f.transport {
        Transport::Tcp => {
            let opts = if f.tcp_timestamps { 12 } else { 0 };
            let payload = f.mtu.checked_sub(ip + 20 + opts).filter(|p| *p > 0)?;
            Some(f64::from(payload) / (f64::from(f.mtu) + f64::from(extra)))
        }
        Transport::Udp => {
            let max = f.mtu.checked_sub(ip + 8).filter(|m| *m > 0)?;
            let payload = f.udp_payload.unwrap_or(max);
            if payload == 0 {
                return None;
            }
            if payload <= max {
                return Some(
                    f64::from(payload) / (f64::from(payload) + 8.0 + f64::from(ip + extra)),
                );
            }
            let frag_hdr = if f.ipv6 { 8 } else { 0 };
            let per = (f.mtu.checked_sub(ip + frag_hdr)? / 8) * 8;
            if per == 0 {
                return None;
            }
            let data = u64::from(payload) + 8;
            let n = data.div_ceil(u64::from(per));
            let charged = data + n * u64::from(ip + frag_hdr + extra);
            Some(f64::from(payload) / charged as f64)
        }
    }
}

/// A shaper the run met.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub port: String,
    pub node: TcNode,
    /// The most payload the shaper passes for this run's packets, bits/s.
    pub passes_bps: f64,
    /// The run's bitrate as % of `passes_bps`.
    pub percent: f64,
    /// Within [`MATCH_LOW`]..=[`MATCH_HIGH`] %.
    pub matched: bool,
    /// The port's root qdisc during the run: drops and overlimits (skbs).
    pub drops: u64,
    pub overlimits: u64,
}

impl Finding {
    /// "tbf 100 Mbit/s on eth0" / "htb class 1:10 50 Mbit/s on eth1".
    pub(crate) fn name(&self) -> String {
        let what = if self.node.class {
            format!("{} class {}", self.node.kind, self.node.handle)
        } else {
            self.node.kind.clone()
        };
        format!(
            "{what} {} on {}",
            setting(self.node.limit_bps().unwrap_or(0)),
            self.port
        )
    }

    /// The evidence sentence: what the shaper passes, what the run got, what it dropped.
    pub(crate) fn sentence(&self, bitrate_bps: f64) -> String {
        use crate::model::display::{count, rate};
        format!(
            "the board's own shaper {} passes at most {} of this run's payload; the run got {} ({:.1} %){}; during the run its queue dropped {} skbs (a GSO batch of datagrams is one) and was over its limit {} times",
            self.name(),
            rate(self.passes_bps),
            rate(bitrate_bps),
            self.percent,
            if self.matched { ", its rate" } else { "" },
            count(self.drops),
            count(self.overlimits)
        )
    }
}

/// A configured rate as tc users write it, in the pages' unit: 100000000 → "100 Mbit/s",
/// 2500000 → "2.5 Mbit/s", 1000000000 → "1,000 Mbit/s" (up to 3 decimals, trailing zeros
/// dropped).
pub(crate) fn setting(bps: u64) -> String {
    let whole = bps / 1_000_000;
    let frac = (bps % 1_000_000) / 1000;
    let w = crate::model::display::count(whole);
    if frac == 0 {
        format!("{w} Mbit/s")
    } else {
        let f = format!("{frac:03}");
        format!("{w}.{} Mbit/s", f.trim_end_matches('0'))
    }
}

/// The shaper that limited a run of `bitrate_bps` with packets framed as `framing` (its MTU
/// is replaced by each port's from `mtus`, when known), among `shapers` (by port) whose
/// ports' counters during the run are in `delta`. `None` when none matched or was hit (see
/// the module doc), or there is no bitrate.
pub(crate) fn judge(
    bitrate_bps: f64,
    framing: Framing,
    mtus: &BTreeMap<String, u32>,
    shapers: &BTreeMap<String, Vec<TcNode>>,
    delta: Option<&BoardDelta>,
) -> Option<Finding> {
    if !(bitrate_bps.is_finite() && bitrate_bps > 0.0) {
        return None;
    }
    let mut found: Vec<Finding> = Vec::new();
    for (port, nodes) in shapers {
        let (drops, overlimits) = delta
            .and_then(|d| d.ports.get(port))
            .and_then(|p| p.qdiscs.iter().find(|q| q.is_root()))
            .map(|q| (q.drops, q.overlimits))
            .unwrap_or((0, 0));
        let f = Framing {
            mtu: mtus.get(port).copied().unwrap_or(framing.mtu),
            ..framing
        };
        for n in nodes {
            let (Some(limit), Some(frac)) = (n.limit_bps(), charged_fraction(&f, n.overhead))
            else {
                continue;
            };
            let passes = limit as f64 * frac;
            let percent = bitrate_bps * 100.0 / passes;
            let matched = (MATCH_LOW..=MATCH_HIGH).contains(&percent);
            // A shaper that passes more than twice what the run got did not hold it back,
            // whatever its port's root qdisc counted (an idle HTB class of 257 Gbit/s was
            // named for a run that got 0.000 Mbit/s: issue 38's tryout).
            let hit = (drops > 0 || overlimits > 0) && (HIT_LOW..=MATCH_HIGH).contains(&percent);
            if matched || hit {
                found.push(Finding {
                    port: port.clone(),
                    node: n.clone(),
                    passes_bps: passes,
                    percent,
                    matched,
                    drops,
                    overlimits,
                });
            }
        }
    }
    found.into_iter().min_by(|a, b| {
        b.matched.cmp(&a.matched).then_with(|| {
            if a.matched {
                (a.percent - 100.0)
                    .abs()
                    .total_cmp(&(b.percent - 100.0).abs())
            } else {
                (b.drops + b.overlimits).cmp(&(a.drops + a.overlimits))
            }
        })
    })
}

/// Lead `a`'s verdict with the shaper `f` (see the module doc): unless there is no result, a
/// measurement error, or the run reached the rate it asked for, the verdict becomes
/// [`Verdict::ShaperBound`] worded "limited by the board's own shaper: tbf 100 Mbit/s on
/// eth0" (what a paced run's receiver got follows it), and the shaper's sentence goes first
/// in the evidence.
pub(crate) fn lead(a: &mut Analysis, f: &Finding) {
    if matches!(
        a.verdict,
        Verdict::NoResult | Verdict::MeasurementError | Verdict::RateLimited
    ) {
        return;
    }
    a.verdict = Verdict::ShaperBound;
    a.verdict_text = format!("{}: {}", Verdict::ShaperBound.text(), f.name());
    if let Some(p) = a.received_percent_short {
        a.verdict_text = format!(
            "{}; the requested rate was sent, the receiver got {p:.1} % of it",
            a.verdict_text
        );
    }
    a.evidence
        .insert(0, f.sentence(a.bitrate_bps.unwrap_or(0.0)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::counters::{PortDelta, Qdisc};

    fn tcp() -> Framing {
        Framing {
            transport: Transport::Tcp,
            ipv6: false,
            mtu: 1500,
            tcp_timestamps: true,
            udp_payload: None,
        }
    }

    fn tbf(rate: u64) -> TcNode {
        TcNode {
            kind: "tbf".into(),
            handle: "8001:".into(),
            parent: "root".into(),
            rate_bps: Some(rate),
            ..Default::default()
        }
    }

    fn on(port: &str, n: Vec<TcNode>) -> BTreeMap<String, Vec<TcNode>> {
        [(port.to_string(), n)].into_iter().collect()
    }

    fn moved(port: &str, drops: u64, overlimits: u64) -> BoardDelta {
        let mut d = BoardDelta::default();
        d.ports.insert(
            port.into(),
            PortDelta {
                qdiscs: vec![Qdisc {
                    kind: "tbf".into(),
                    handle: "8001:".into(),
                    parent: "root".into(),
                    drops,
                    overlimits,
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        d
    }

    #[test]
    fn a_100mbit_tbf_passes_95_64_mbit_of_tcp_and_97_23_of_udp() {
        let f = charged_fraction(&tcp(), 0).unwrap();
        assert_eq!((f * 100e6 / 1e4).round() / 100.0, 95.64);
        let u = Framing {
            transport: Transport::Udp,
            tcp_timestamps: false,
            ..tcp()
        };
        assert_eq!(
            (charged_fraction(&u, 0).unwrap() * 100e6 / 1e4).round() / 100.0,
            97.23
        );
        // A 24-byte overhead (tc … overhead 24) charges 1538 per 1448.
        assert_eq!(
            (charged_fraction(&tcp(), 24).unwrap() * 1e6).round() / 1e6,
            (1448.0f64 / 1538.0 * 1e6).round() / 1e6
        );
        // An 8000-byte datagram at MTU 1500 goes in 6 fragments.
        let big = Framing {
            udp_payload: Some(8000),
            ..u
        };
        let want = 8000.0 / (8008.0 + 6.0 * 34.0);
        assert!((charged_fraction(&big, 0).unwrap() - want).abs() < 1e-12);
    }

    #[test]
    fn the_issue_s_run_95_6_mbit_through_a_100mbit_tbf_names_it() {
        // Issue 38: a TCP run held to 95.6 Mbit/s, the TBF over its limit 70,403 times.
        let f = judge(
            95.6e6,
            tcp(),
            &BTreeMap::new(),
            &on("eth0", vec![tbf(100_000_000)]),
            Some(&moved("eth0", 0, 70_403)),
        )
        .unwrap();
        assert!(f.matched);
        assert!((f.percent - 99.96).abs() < 0.01, "{}", f.percent);
        assert_eq!(f.name(), "tbf 100 Mbit/s on eth0");
        assert!(f.sentence(95.6e6).contains("over its limit 70,403 times"));
        // It matches on its rate alone too (no counters stored).
        assert!(judge(
            95.6e6,
            tcp(),
            &BTreeMap::new(),
            &on("eth0", vec![tbf(100_000_000)]),
            None
        )
        .is_some());
    }

    #[test]
    fn the_match_window_is_93_to_103_percent() {
        let s = on("eth0", vec![tbf(100_000_000)]);
        let m = BTreeMap::new();
        // 93 % of 95.64 = 88.95; 103 % = 98.51.
        for (got, want) in [
            (88.8e6, false),
            (89.1e6, true),
            (98.4e6, true),
            (98.7e6, false),
        ] {
            assert_eq!(
                judge(got, tcp(), &m, &s, None).is_some(),
                want,
                "{got} bit/s"
            );
        }
    }

    #[test]
    fn a_shaper_far_above_what_the_run_got_is_not_named_for_its_port_s_drops() {
        // The tryout's case: HTB root on eth1 over limit, a 257 Gbit/s class, the run got
        // 10 kbit/s: not the shaper's doing.
        let sh = on("eth1", vec![tbf(257_000_000_000)]);
        let d = moved("eth1", 500, 9_000);
        let f = judge(1e4, tcp(), &BTreeMap::new(), &sh, Some(&d));
        assert!(f.is_none(), "{f:?}");
        // The same drops with the run at 60 % of what a 100 Mbit/s one passes: named.
        let f = judge(
            57e6,
            tcp(),
            &BTreeMap::new(),
            &on("eth1", vec![tbf(100_000_000)]),
            Some(&d),
        );
        assert!(f.is_some_and(|f| !f.matched));
    }

    #[test]
    fn a_shaper_that_dropped_is_named_below_its_rate_but_not_above_it() {
        // UDP 150M into a 50 Mbit/s TBF that dropped: the receiver got 32 Mbit/s (not the
        // shaper's rate: a small queue and bursts), the drops still name it.
        let u = Framing {
            transport: Transport::Udp,
            ..tcp()
        };
        let s = on("eth0", vec![tbf(50_000_000)]);
        let f = judge(
            32e6,
            u,
            &BTreeMap::new(),
            &s,
            Some(&moved("eth0", 8_839, 0)),
        )
        .unwrap();
        assert!(!f.matched);
        assert_eq!(f.name(), "tbf 50 Mbit/s on eth0");
        // Drops with the run above what the shaper passes: another port's shaper, not this.
        assert!(judge(600e6, u, &BTreeMap::new(), &s, Some(&moved("eth0", 5, 9))).is_none());
        // Neither at its rate nor any drop or overlimit: not named (a clean run).
        assert!(judge(40e6, u, &BTreeMap::new(), &s, Some(&moved("eth0", 0, 0))).is_none());
        assert!(judge(40e6, u, &BTreeMap::new(), &BTreeMap::new(), None).is_none());
    }

    #[test]
    fn the_closest_match_wins_and_htb_classes_use_ceil() {
        let class = TcNode {
            kind: "htb".into(),
            handle: "1:10".into(),
            parent: "1:".into(),
            class: true,
            rate_bps: Some(10_000_000),
            ceil_bps: Some(200_000_000),
            ..Default::default()
        };
        let mut s = on("eth1", vec![class]);
        s.insert("eth0".into(), vec![tbf(1_000_000_000)]);
        let f = judge(191e6, tcp(), &BTreeMap::new(), &s, None).unwrap();
        assert_eq!(f.name(), "htb class 1:10 200 Mbit/s on eth1");
        // Jumbo frames on eth1: 8948 of 9014 charged.
        let mtus = [("eth1".to_string(), 9000u32)].into_iter().collect();
        let f = judge(198e6, tcp(), &mtus, &s, None).unwrap();
        assert!((f.passes_bps - 200e6 * 8948.0 / 9014.0).abs() < 1.0);
    }

    #[test]
    fn settings_in_mbit() {
        assert_eq!(setting(100_000_000), "100 Mbit/s");
        assert_eq!(setting(2_500_000), "2.5 Mbit/s");
        assert_eq!(setting(1_000_000_000), "1,000 Mbit/s");
        assert_eq!(setting(64_000), "0.064 Mbit/s");
    }
}
