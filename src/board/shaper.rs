//! The board's own shapers: each port's qdiscs and (for HTB) classes with the rate they hold
//! traffic to, read over netlink (what `tc -s qdisc` and `tc -s class` print), for the
//! verdict ("limited by the board's own shaper: tbf 100 Mbit/s on eth0") and the Ports page.
//! Rates as the kernel keeps them: bytes/s in `tc_ratespec.rate` (or the 64-bit attribute
//! above 4 GB/s), here turned into bits/s. Drops and overlimits count skbs (a GSO batch is
//! one), backlog is bytes and packets queued at the reading. Anything the kernel does not
//! give is left out, never an error. Not for: the counters around a run
//! (`crate::board::counters`), deciding what a rate means (`crate::results::shaper`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One qdisc or class of a port, with its rate when it shapes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct TcNode {
    /// `tbf`, `htb`, `cake`, `noqueue`, `pfifo_fast`, …
    pub kind: String,
    /// `major:minor` in hex as tc writes it (`8001:` for a qdisc, `1:10` for a class).
    pub handle: String,
    /// `root`, `ingress`, or the parent's `major:minor`.
    pub parent: String,
    /// A class (of an HTB qdisc), not a qdisc.
    #[serde(default)]
    pub class: bool,
    /// The rate it holds traffic to, bits/s (tbf `rate`, htb class `rate`, cake
    /// `bandwidth`); `None` for qdiscs that do not shape.
    #[serde(default)]
    pub rate_bps: Option<u64>,
    /// HTB classes: the most they may send borrowing from their parent (`ceil`), bits/s.
    #[serde(default)]
    pub ceil_bps: Option<u64>,
    /// Bytes the shaper adds to each packet before charging it (tc `overhead`), bytes.
    #[serde(default)]
    pub overhead: u32,
    /// Packets (skbs) dropped since the qdisc/class was made.
    #[serde(default)]
    pub drops: u64,
    /// Times a packet had to wait because the rate was used up.
    #[serde(default)]
    pub overlimits: u64,
    /// Bytes queued at the reading.
    #[serde(default)]
    pub backlog_bytes: u64,
    /// Packets queued at the reading.
    #[serde(default)]
    pub qlen: u64,
}

impl TcNode {
    /// The port's root qdisc (its counters include its children's).
    pub(crate) fn is_root(&self) -> bool {
        self.parent == "root" && !self.class
    }

    /// The most it lets through, bits/s: an HTB class's `ceil`, else its `rate`.
    pub(crate) fn limit_bps(&self) -> Option<u64> {
        self.ceil_bps.or(self.rate_bps).filter(|r| *r > 0)
    }
}

/// What a qdisc's or class's options say about its rate (see [`parse_rates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Rates {
    /// bits/s.
    pub rate_bps: Option<u64>,
    /// bits/s (HTB `ceil`).
    pub ceil_bps: Option<u64>,
    /// bytes per packet (`tc_ratespec.overhead`).
    pub overhead: u32,
}

/// The attributes nested in `buf` as (type, value); stops at the first malformed one. Every
/// length is checked against the buffer (the bytes come from the kernel, but a short or
/// garbled message must not panic).
fn nlas(buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while let Some(h) = buf.get(off..off.saturating_add(4)) {
        let len = usize::from(u16::from_ne_bytes([h[0], h[1]]));
        let kind = u16::from_ne_bytes([h[2], h[3]]) & 0x3fff;
        let Some(end) = off.checked_add(len) else {
            break;
        };
        let Some(v) = (len >= 4).then(|| buf.get(off + 4..end)).flatten() else {
            break;
        };
        out.push((kind, v));
        off = end.saturating_add(3) & !3;
    }
    out
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_of(b: &[u8]) -> Option<u64> {
    let s: [u8; 8] = b.get(..8)?.try_into().ok()?;
    Some(u64::from_ne_bytes(s))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes([s[0], s[1]]))
}

/// The rate in a `struct tc_ratespec` at `at` (12 bytes: cell_log, linklayer, overhead u16,
/// cell_align, mpu, rate u32 bytes/s): (bytes/s, overhead bytes).
fn ratespec(b: &[u8], at: usize) -> Option<(u64, u32)> {
    Some((
        u64::from(u32_at(b, at.checked_add(8)?)?),
        u32::from(u16_at(b, at.checked_add(2)?)?),
    ))
}

/// The rate of a qdisc or class of `kind` from the value of its `TCA_OPTIONS` attribute
/// (the nested attributes): tbf (`TCA_TBF_PARMS` = 1, `TCA_TBF_RATE64` = 4), htb classes
/// (`TCA_HTB_PARMS` = 1 with rate and ceil, `TCA_HTB_RATE64` = 6, `TCA_HTB_CEIL64` = 7),
/// cake (`TCA_CAKE_BASE_RATE64` = 2; 0 = unlimited). Other kinds, and options too short to
/// hold the fields, give no rate.
pub(crate) fn parse_rates(kind: &str, options: &[u8]) -> Rates {
    let mut r = Rates::default();
    let bits = |bytes: u64| Some(bytes.saturating_mul(8)).filter(|b| *b > 0);
    for (t, v) in nlas(options) {
        match (kind, t) {
            ("tbf", 1) => {
                if let Some((rate, ovh)) = ratespec(v, 0) {
                    r.rate_bps = r.rate_bps.or(bits(rate));
                    r.overhead = ovh;
                }
            }
            ("tbf", 4) | ("htb", 6) => r.rate_bps = u64_of(v).and_then(bits).or(r.rate_bps),
            ("htb", 1) => {
                if let (Some((rate, ovh)), Some((ceil, _))) = (ratespec(v, 0), ratespec(v, 12)) {
                    r.rate_bps = r.rate_bps.or(bits(rate));
                    r.ceil_bps = r.ceil_bps.or(bits(ceil));
                    r.overhead = ovh;
                }
            }
            ("htb", 7) => r.ceil_bps = u64_of(v).and_then(bits).or(r.ceil_bps),
            ("cake", 2) => r.rate_bps = u64_of(v).and_then(bits),
            _ => {}
        }
    }
    r
}

/// One netlink dump of qdiscs (`class` false, every port) or of one port's classes (`class`
/// true, `index` the port), by interface index. `None` when netlink cannot be read.
fn dump(class: bool, index: i32) -> Option<BTreeMap<i32, Vec<TcNode>>> {
    use rtnetlink::packet_core::Nla;
    use rtnetlink::packet_route::tc::{TcAttribute, TcOption, TcStats2};
    let mut out: BTreeMap<i32, Vec<TcNode>> = BTreeMap::new();
    super::counters::tc_dump(class, index, |m| {
        let h = &m.header;
        let parent = super::counters::tc_parent(h);
        let mut n = TcNode {
            handle: super::counters::tc_handle(h.handle.major, h.handle.minor),
            parent,
            class,
            ..Default::default()
        };
        let mut options = Vec::new();
        let mut have_queue = false;
        for a in &m.attributes {
            match a {
                TcAttribute::Kind(k) => n.kind = k.clone(),
                TcAttribute::Options(o) => {
                    for x in o {
                        if let TcOption::Other(nla) = x {
                            let mut v = vec![0u8; nla.value_len()];
                            nla.emit_value(&mut v);
                            options = v;
                        }
                    }
                }
                TcAttribute::Stats2(v) => {
                    for st in v {
                        if let TcStats2::Queue(q) = st {
                            n.drops = q.drops.into();
                            n.overlimits = q.overlimits.into();
                            n.backlog_bytes = q.backlog.into();
                            n.qlen = q.qlen.into();
                            have_queue = true;
                        }
                    }
                }
                TcAttribute::Stats(st) if !have_queue => {
                    n.drops = st.drops.into();
                    n.overlimits = st.overlimits.into();
                    n.backlog_bytes = st.backlog.into();
                    n.qlen = st.qlen.into();
                }
                _ => {}
            }
        }
        // An HTB qdisc's own options hold no rate (its classes do).
        if class || n.kind != "htb" {
            let r = parse_rates(&n.kind, &options);
            n.rate_bps = r.rate_bps;
            n.ceil_bps = r.ceil_bps;
            n.overhead = r.overhead;
        }
        out.entry(h.index).or_default().push(n);
    })?;
    Some(out)
}

/// Every qdisc of every port of this network namespace, and the classes of ports with an
/// HTB qdisc, by interface index; root qdisc first on each port. Empty when netlink cannot
/// be read (a few ms: one dump, plus one per HTB port).
pub(crate) fn read() -> BTreeMap<i32, Vec<TcNode>> {
    let mut all = dump(false, 0).unwrap_or_default();
    for (index, nodes) in all.iter_mut() {
        if nodes.iter().any(|n| n.kind == "htb") {
            if let Some(mut c) = dump(true, *index).and_then(|mut m| m.remove(index)) {
                nodes.append(&mut c);
            }
        }
        crate::model::order::sort_by_key(nodes, |n| (!n.is_root(), n.class));
    }
    all
}

/// [`read`] for the named ports (names the namespace does not have are left out).
pub(crate) fn for_ports(ports: &[String]) -> BTreeMap<String, Vec<TcNode>> {
    let mut all = read();
    ports
        .iter()
        .filter_map(|p| {
            let i = i32::try_from(nix::net::if_::if_nametoindex(p.as_str()).ok()?).ok()?;
            Some((p.clone(), all.remove(&i)?))
        })
        .collect()
}

/// Most shaping nodes kept per port: a run's board JSON with 1,500 HTB classes was 250 KB
/// (issue 38's tryout); the root and the first classes are the ones a verdict can name.
pub(crate) const MAX_SHAPERS_PER_PORT: usize = 32;

/// Only the nodes that shape (have a rate), of each port (ports with none left out), at
/// most [`MAX_SHAPERS_PER_PORT`] each.
pub(crate) fn shapers_of(ports: BTreeMap<String, Vec<TcNode>>) -> BTreeMap<String, Vec<TcNode>> {
    ports
        .into_iter()
        .filter_map(|(p, v)| {
            let v: Vec<TcNode> = v
                .into_iter()
                .filter(|n| n.limit_bps().is_some())
                .take(MAX_SHAPERS_PER_PORT)
                .collect();
            (!v.is_empty()).then_some((p, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(kind: u16, v: &[u8]) -> Vec<u8> {
        let len = u16::try_from(4 + v.len()).unwrap();
        let mut b = len.to_ne_bytes().to_vec();
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(v);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        b
    }

    fn spec(rate_bytes: u32, overhead: u16) -> Vec<u8> {
        let mut b = vec![0u8, 1];
        b.extend_from_slice(&overhead.to_ne_bytes());
        b.extend_from_slice(&0i16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&rate_bytes.to_ne_bytes());
        b
    }

    #[test]
    fn tbf_100mbit_is_12_5_mb_per_s_in_its_parms() {
        // `tc qdisc add … tbf rate 100mbit burst 1600 limit 30kb`: rate 12,500,000 B/s.
        let mut parms = spec(12_500_000, 0);
        parms.extend(spec(0, 0));
        parms.extend([0u8; 12]);
        let r = parse_rates("tbf", &nla(1, &parms));
        assert_eq!(r.rate_bps, Some(100_000_000));
        assert_eq!(r.ceil_bps, None);
        // Above 4 GB/s the 64-bit attribute holds the rate (40 Gbit/s = 5e9 B/s).
        let mut big = nla(1, &parms);
        big.extend(nla(4, &5_000_000_000u64.to_ne_bytes()));
        assert_eq!(parse_rates("tbf", &big).rate_bps, Some(40_000_000_000));
    }

    #[test]
    fn htb_class_rate_ceil_and_overhead() {
        let mut parms = spec(1_250_000, 24);
        parms.extend(spec(6_250_000, 24));
        parms.extend([0u8; 20]);
        let r = parse_rates("htb", &nla(1, &parms));
        assert_eq!(r.rate_bps, Some(10_000_000));
        assert_eq!(r.ceil_bps, Some(50_000_000));
        assert_eq!(r.overhead, 24);
        let n = TcNode {
            rate_bps: r.rate_bps,
            ceil_bps: r.ceil_bps,
            ..Default::default()
        };
        assert_eq!(n.limit_bps(), Some(50_000_000));
    }

    #[test]
    fn cake_bandwidth_and_unlimited() {
        let o = nla(2, &12_500_000u64.to_ne_bytes());
        assert_eq!(parse_rates("cake", &o).rate_bps, Some(100_000_000));
        let o = nla(2, &0u64.to_ne_bytes());
        assert_eq!(parse_rates("cake", &o).rate_bps, None);
    }

    #[test]
    fn short_or_garbled_options_give_no_rate_and_no_panic() {
        for b in [
            vec![],
            vec![1u8],
            vec![200, 0, 1, 0, 1, 2],
            vec![2, 0, 1, 0],
            nla(1, &[1, 2, 3]),
        ] {
            assert_eq!(parse_rates("tbf", &b), Rates::default(), "{b:?}");
            assert_eq!(parse_rates("htb", &b), Rates::default(), "{b:?}");
        }
        assert_eq!(
            parse_rates("pfifo_fast", &nla(1, &spec(1, 0))),
            Rates::default()
        );
    }
}
