//! The loss ledger: a UDP or forwarding run's lost datagrams set against the board's counters
//! that moved during the run ([`crate::board::counters::BoardDelta`]), place by place, and
//! what the counters say to try. Only what the counters show: a place that did not move is
//! not named, and what the board cannot account for is `unattributed` (the wire, or a host
//! netperfd cannot read). When the peer is netperfd (its iperf3 server: the daemon or
//! `netperfd -s`) it sends its own drop counters over the test with its results
//! ([`peer_drops`], added by [`with_peer`] as `peer_*` places); a stock peer sends none.
//!
//! Units: the counters count what the kernel counts. Socket, softnet and most NIC counters
//! count datagrams (frames); a qdisc counts a dropped GSO batch (several datagrams sent in one
//! `sendmmsg`/UDP_SEGMENT buffer) as one drop, unless it cut the batch up before queueing it
//! (TBF does when the batch is larger than its burst). Such drops are shown as counted and the
//! rest of the loss stays `unattributed` rather than being guessed.

use crate::board::counters::BoardDelta;
use crate::model::display::count;
use serde::{Deserialize, Serialize};

/// Where datagrams were dropped, as counted by one counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// `board_qdisc`, `board_nic`, `board_softnet`, `board_socket`, or the same of the
    /// peer (`peer_qdisc`, …).
    pub place: String,
    /// The port, for places that belong to one (qdisc, NIC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// Packets the counter moved by during the run.
    pub packets: u64,
    /// The counter, in words (`qdisc tbf drops on eth0`, `Udp RcvbufErrors`).
    pub counter: String,
}

/// A run's lost datagrams and the places that account for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossLedger {
    /// Datagrams the receiver counted lost.
    pub lost: u64,
    /// The board's counters that moved, largest first.
    pub places: Vec<Place>,
    /// `lost` minus the places' sum, never below 0 (when the places add up to more than was
    /// lost, other traffic moved the host-wide counters too; see [`LossLedger::overcounted`]).
    pub unattributed: u64,
}

impl LossLedger {
    /// Packets the places add up to.
    pub fn attributed(&self) -> u64 {
        self.places.iter().map(|p| p.packets).sum()
    }

    /// The places add up to more than the run lost (the counters are host-wide: other
    /// traffic ran at the same time and is in the figures); `unattributed` was clamped to 0.
    pub fn overcounted(&self) -> bool {
        self.attributed() > self.lost
    }
}

/// Which of the board's places a run's datagrams passed: the board sent (its egress queues),
/// received (NIC, softnet, socket), both, or forwarded them (everything but the socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    Sent,
    Received,
    Both,
    Forwarded,
}

impl Path {
    /// The path of a run from its direction word (board's view: send / receive / bidir) and
    /// whether it was a forwarding run.
    pub fn of(direction: &str, forwarding: bool) -> Path {
        match (forwarding, direction) {
            (true, _) => Path::Forwarded,
            (_, "send") => Path::Sent,
            (_, "receive") => Path::Received,
            _ => Path::Both,
        }
    }
    fn egress(self) -> bool {
        self != Path::Received
    }
    fn ingress(self) -> bool {
        self != Path::Sent
    }
}

/// The ledger of a run that lost `lost` datagrams on `ports` (the run's ports on the board)
/// along `path`, from the board's counters over the run.
pub fn ledger(lost: u64, path: Path, ports: &[String], d: &BoardDelta) -> LossLedger {
    let mut places = Vec::new();
    for name in ports {
        let Some(p) = d.ports.get(name) else { continue };
        if path.egress() {
            if let Some((kind, n)) = p.root_qdisc_drops().filter(|(_, n)| *n > 0) {
                places.push(Place {
                    place: "board_qdisc".into(),
                    port: Some(name.clone()),
                    packets: n,
                    counter: format!("qdisc {kind} drops on {name}"),
                });
            }
        }
        if path.ingress() {
            if let Some((counter, n)) = p.nic_rx_drops() {
                places.push(Place {
                    place: "board_nic".into(),
                    port: Some(name.clone()),
                    packets: n,
                    counter: format!("{counter} on {name}"),
                });
            }
        }
    }
    if path.ingress() {
        let sd = d.softnet_dropped();
        if sd > 0 {
            places.push(Place {
                place: "board_softnet".into(),
                port: None,
                packets: sd,
                counter: format!("softnet_stat dropped ({})", cpus_moved(d, |s| s.dropped)),
            });
        }
    }
    if matches!(path, Path::Received | Path::Both) {
        let n = d.snmp("Udp.RcvbufErrors");
        if n > 0 {
            places.push(Place {
                place: "board_socket".into(),
                port: None,
                packets: n,
                counter: "Udp RcvbufErrors".into(),
            });
        }
    }
    crate::model::order::sort_by_key(&mut places, |p| std::cmp::Reverse(p.packets));
    let sum: u64 = places.iter().map(|p| p.packets).sum();
    LossLedger {
        lost,
        places,
        unattributed: lost.saturating_sub(sum),
    }
}

/// The places of this host's own drop counters over a test, as a netperfd iperf3 server
/// sends them with its results (`netperfd_drops`: `place` without its `board_` prefix:
/// `qdisc`, `nic`, `softnet`, `socket`) for the other side's ledger. `direction` is this
/// side's (`send`, `receive`, `bidir`), `ports` the test's ports on this host.
pub fn peer_drops(direction: &str, ports: &[String], d: &BoardDelta) -> serde_json::Value {
    let l = ledger(0, Path::of(direction, false), ports, d);
    let places: Vec<Place> = l
        .places
        .into_iter()
        .map(|mut p| {
            p.place = p.place.trim_start_matches("board_").to_string();
            p
        })
        .collect();
    serde_json::to_value(places).unwrap_or_default()
}

/// Most places taken from a peer's `netperfd_drops`, and the longest port or counter text
/// (bytes): the list comes from the network.
const PEER_PLACES: usize = 16;
const PEER_TEXT: usize = 120;

/// Ledger `l` with the peer's drop counters (`netperfd_drops` of its results, see
/// [`peer_drops`]) as `peer_*` places; entries that are not a known place, or malformed,
/// are left out. `unattributed` is recomputed.
pub fn with_peer(mut l: LossLedger, drops: &serde_json::Value) -> LossLedger {
    let list = drops.as_array().map(Vec::as_slice).unwrap_or_default();
    for v in list.iter().take(PEER_PLACES) {
        let Ok(p) = serde_json::from_value::<Place>(v.clone()) else {
            continue;
        };
        if !matches!(p.place.as_str(), "qdisc" | "nic" | "softnet" | "socket") || p.packets == 0 {
            continue;
        }
        let cut = |t: String| t.chars().take(PEER_TEXT).collect::<String>();
        l.places.push(Place {
            place: format!("peer_{}", p.place),
            port: p.port.map(cut),
            packets: p.packets,
            counter: cut(p.counter),
        });
    }
    crate::model::order::sort_by_key(&mut l.places, |p| std::cmp::Reverse(p.packets));
    l.unattributed = l.lost.saturating_sub(l.attributed());
    l
}

/// Bytes a frame carries beyond its payload, allowed per packet the ports counted when
/// their traffic is set against a run's own bytes: Ethernet 14 + IPv6 40 + TCP 32 (with
/// timestamps), rounded up. An ACK-only frame of the run fits in it.
const FRAME_OVERHEAD: u64 = 90;

/// Traffic on the board's ports during a run beyond the run's own: the bytes every port
/// (loopback aside) moved both ways, less the run's bytes once per port they crossed
/// (`crossings`: 1 for a run the board sends or receives, 2 for a forwarded or bidirectional
/// one) and [`FRAME_OVERHEAD`] per packet. `Some(bytes)` when that is over 1 MiB and over
/// 5 % of the run's own; `None` otherwise or when the ports' traffic was not read.
pub fn other_traffic(d: &BoardDelta, run_bytes: u64, crossings: u64) -> Option<u64> {
    let t: Vec<_> = d.ports.values().filter_map(|p| p.traffic).collect();
    if t.is_empty() {
        return None;
    }
    let bytes: u64 = t.iter().map(|t| t.rx_bytes + t.tx_bytes).sum();
    let packets: u64 = t.iter().map(|t| t.rx_packets + t.tx_packets).sum();
    let own = run_bytes.saturating_mul(crossings);
    let extra = bytes.saturating_sub(own.saturating_add(packets.saturating_mul(FRAME_OVERHEAD)));
    (extra > (1 << 20) && extra > own / 20).then_some(extra)
}

/// The sentence of [`other_traffic`]: "Other traffic at the same time: …".
pub fn other_traffic_sentence(extra: u64, run_bytes: u64) -> String {
    format!(
        "Other traffic at the same time: the board's ports moved {} beyond the run's own {} — the counters here are host-wide and may include it",
        crate::model::display::size(extra as f64),
        crate::model::display::size(run_bytes as f64)
    )
}

/// The ledger in a few words for tables across runs and boards (compare, suites): each place
/// and its packets, then what is unattributed — "board_qdisc eth0 12,001, unattributed 344",
/// "not on the board: 500". `None` when nothing was lost.
pub fn headline(l: &LossLedger) -> Option<String> {
    if l.lost == 0 {
        return None;
    }
    if l.places.is_empty() {
        return Some(format!("not on the board: {}", count(l.lost)));
    }
    let mut parts: Vec<String> = l
        .places
        .iter()
        .map(|p| match &p.port {
            Some(port) => format!("{} {port} {}", p.place, count(p.packets)),
            None => format!("{} {}", p.place, count(p.packets)),
        })
        .collect();
    if l.unattributed > 0 {
        parts.push(format!("unattributed {}", count(l.unattributed)));
    }
    Some(parts.join(", "))
}

/// "CPU 0" / "CPUs 0, 3": the CPUs whose softnet counter `f` moved.
fn cpus_moved(d: &BoardDelta, f: impl Fn(&crate::board::counters::Softnet) -> u64) -> String {
    let v: Vec<String> = d
        .softnet
        .iter()
        .filter(|s| f(s) > 0)
        .map(|s| s.cpu.to_string())
        .collect();
    match v.len() {
        1 => format!("CPU {}", v[0]),
        _ => format!("CPUs {}", v.join(", ")),
    }
}

/// What the ledger and the board's counters say, one sentence per place that moved and per
/// clock or temperature worth a word, with what to try. Empty when nothing was lost and
/// nothing on the board is worth saying.
pub fn sentences(l: &LossLedger, d: &BoardDelta) -> Vec<String> {
    let mut out = Vec::new();
    let lost = count(l.lost);
    for p in &l.places {
        let n = count(p.packets);
        let port = p.port.as_deref().unwrap_or("");
        out.push(match p.place.as_str() {
            "board_qdisc" => {
                let kind = p
                    .counter
                    .strip_prefix("qdisc ")
                    .and_then(|c| c.split_once(' '))
                    .map(|(k, _)| k)
                    .unwrap_or("qdisc");
                format!(
                    "{n} of {lost} lost datagrams were dropped by the board's own egress queue ({kind} on {port}): the sender outran the link — lower -b or raise the shaper"
                )
            }
            "board_socket" => {
                let rmem = d
                    .rmem_max
                    .map(|v| format!(" (now {v})"))
                    .unwrap_or_default();
                format!(
                    "RcvbufErrors +{n}: the board's socket buffer overflowed — -w 4M, or raise net.core.rmem_max{rmem}"
                )
            }
            "board_nic" => {
                let counter = p
                    .counter
                    .strip_suffix(&format!(" on {port}"))
                    .unwrap_or(&p.counter);
                let rings = d.ports.get(port).and_then(|x| x.rings);
                match rings {
                    Some(r) if r.rx_max > r.rx => format!(
                        "{counter} +{n} on {port}: the NIC's ring ({} of max {}) overflowed — `ethtool -G {port} rx {}`",
                        r.rx, r.rx_max, r.rx_max
                    ),
                    Some(r) => format!(
                        "{counter} +{n} on {port}: the NIC dropped on receive with its ring at its maximum ({}) — spread the load (RSS, IRQ affinity) or lower -b",
                        r.rx
                    ),
                    None => format!("{counter} +{n} on {port}: the NIC dropped on receive"),
                }
            }
            "board_softnet" => format!(
                "softnet dropped +{n} ({}): a CPU's receive backlog was full — raise net.core.netdev_max_backlog or spread the port's IRQs",
                cpus_moved(d, |s| s.dropped)
            ),
            "peer_qdisc" => {
                let kind = p
                    .counter
                    .strip_prefix("qdisc ")
                    .and_then(|c| c.split_once(' '))
                    .map(|(k, _)| k)
                    .unwrap_or("qdisc");
                format!(
                    "{n} of {lost} lost datagrams were dropped by the peer's own egress queue ({kind} on its {port}): the peer's sender outran its link — lower -b or raise the peer's shaper"
                )
            }
            "peer_socket" => format!(
                "the peer's RcvbufErrors +{n}: the peer's socket buffer overflowed — -w 4M, or raise the peer's net.core.rmem_max"
            ),
            "peer_nic" => format!(
                "{} +{n} on the peer: the peer's NIC dropped on receive",
                p.counter
            ),
            "peer_softnet" => format!(
                "the peer's softnet dropped +{n}: a CPU's receive backlog on the peer was full"
            ),
            _ => format!("{} +{n}", p.counter),
        });
    }
    let on_board = l.places.iter().any(|p| p.place.starts_with("board_"));
    let peer_told = l.places.iter().any(|p| p.place.starts_with("peer_"));
    if l.lost > 0 && l.places.is_empty() {
        out.push(format!(
            "{lost} datagrams lost, not on the board: on the wire or at the peer (none of the board's drop counters moved)"
        ));
    } else if l.lost > 0 && !on_board {
        out.push(format!(
            "not on the board: none of the board's drop counters moved{}",
            if l.unattributed > 0 {
                format!(
                    "; {} of {lost} lost datagrams are on neither side's counters: on the wire",
                    count(l.unattributed)
                )
            } else {
                String::new()
            }
        ));
    } else if l.unattributed > 0 && peer_told {
        out.push(format!(
            "{} of {lost} lost datagrams are on neither the board's nor the peer's counters: on the wire",
            count(l.unattributed)
        ));
    } else if l.unattributed > 0 && !l.places.is_empty() {
        out.push(format!(
            "{} of {lost} lost datagrams are not on the board's counters: on the wire or at the peer",
            count(l.unattributed)
        ));
    }
    if l.overcounted() {
        let whose = if peer_told { "" } else { "board's " };
        out.push(format!(
            "the {whose}counters moved by {} while the run lost {lost}: they are host-wide and also count traffic outside the run (other flows at the same time, datagrams sent after the receiver stopped counting)",
            count(l.attributed())
        ));
    }
    out.extend(board_notes(d));
    out
}

/// Sentences about the board's state that stand whether or not datagrams were lost: softnet
/// time_squeeze (and on which CPU the ports' IRQs ran), cores below their top clock, thermal
/// zones at a trip point.
pub fn board_notes(d: &BoardDelta) -> Vec<String> {
    let mut out = Vec::new();
    let squeezed: Vec<u32> = d
        .softnet
        .iter()
        .filter(|s| s.time_squeeze > 0)
        .map(|s| s.cpu)
        .collect();
    if !squeezed.is_empty() {
        let total: u64 = d.softnet.iter().map(|s| s.time_squeeze).sum();
        // The CPUs the ports' IRQs ran on during the run.
        let mut irq_cpus: Vec<usize> = d
            .irqs
            .iter()
            .flat_map(|l| {
                l.per_cpu
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(i, _)| i)
            })
            .collect();
        irq_cpus.sort_unstable();
        irq_cpus.dedup();
        let which = if squeezed.len() == 1 {
            format!("on CPU {} only", squeezed[0])
        } else {
            format!("on CPUs {}", join(&squeezed))
        };
        let irq = match irq_cpus.as_slice() {
            [c] => {
                let ports: Vec<String> = d
                    .ports
                    .keys()
                    .filter(|p| {
                        d.irqs.iter().any(|l| {
                            crate::board::counters::irq_is_port(&l.desc, p)
                                && l.per_cpu.iter().any(|n| *n > 0)
                        })
                    })
                    .cloned()
                    .collect();
                format!(", {}'s IRQ is pinned to CPU {c}", ports.join("/"))
            }
            _ => String::new(),
        };
        out.push(format!(
            "softnet time_squeeze +{} {which}{irq}: the receive processing ran out of budget — raise net.core.netdev_budget or spread the IRQs",
            count(total)
        ));
    }
    for c in &d.cpufreq {
        let top = c.hw_max_mhz.or(c.max_mhz);
        let low = [c.start_mhz, c.end_mhz]
            .into_iter()
            .flatten()
            .fold(f64::INFINITY, f64::min);
        if let Some(top) = top {
            if low.is_finite() && low < top * 0.95 {
                let gov = c
                    .governor
                    .as_deref()
                    .map(|g| format!(" (governor {g})"))
                    .unwrap_or_default();
                out.push(format!(
                    "CPU {} ran at {low:.0} MHz of {top:.0}{gov}",
                    c.cpu
                ));
            }
        }
    }
    for t in &d.thermal {
        let hot = [t.start_c, t.end_c]
            .into_iter()
            .flatten()
            .fold(f64::NEG_INFINITY, f64::max);
        if !hot.is_finite() {
            continue;
        }
        if let Some((kind, at)) = t
            .trips
            .iter()
            .filter(|(_, at)| hot >= *at)
            .max_by(|a, b| a.1.total_cmp(&b.1))
        {
            let what = if kind == "passive" {
                "passive throttling".to_string()
            } else {
                format!("trip point {kind} at {at:.0} °C")
            };
            out.push(format!(
                "thermal zone {} reached {hot:.0} °C, {what}",
                t.kind
            ));
        }
    }
    out
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::counters::{
        CpuFreqDelta, IrqLine, PortDelta, Qdisc, Rings, Softnet, ThermalDelta,
    };

    fn board() -> BoardDelta {
        let mut d = BoardDelta {
            seconds: 5.0,
            rmem_max: Some(212_992),
            ..Default::default()
        };
        d.ports.insert(
            "eth0".into(),
            PortDelta {
                qdiscs: vec![Qdisc {
                    kind: "tbf".into(),
                    handle: "8001:".into(),
                    parent: "root".into(),
                    drops: 12_001,
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        d.ports.insert(
            "eth1".into(),
            PortDelta {
                nic: [("rx_missed_errors".to_string(), 5000)].into(),
                rings: Some(Rings {
                    rx: 256,
                    rx_max: 4096,
                    tx: 256,
                    tx_max: 4096,
                }),
                ..Default::default()
            },
        );
        d.snmp.insert("Udp.RcvbufErrors".into(), 9870);
        d
    }

    #[test]
    fn a_sending_run_is_charged_to_the_egress_queue_only() {
        let l = ledger(
            12_345,
            Path::Sent,
            &["eth0".into(), "eth1".into()],
            &board(),
        );
        assert_eq!(l.places.len(), 1, "{l:?}");
        assert_eq!(l.places[0].place, "board_qdisc");
        assert_eq!(l.places[0].packets, 12_001);
        assert_eq!(l.places[0].counter, "qdisc tbf drops on eth0");
        assert_eq!(l.unattributed, 344);
        let j = serde_json::to_value(&l).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"lost": 12345, "places": [{"place": "board_qdisc", "port": "eth0",
                "packets": 12001, "counter": "qdisc tbf drops on eth0"}], "unattributed": 344})
        );
        assert_eq!(
            headline(&l).as_deref(),
            Some("board_qdisc eth0 12,001, unattributed 344")
        );
        let s = sentences(&l, &board());
        assert_eq!(s[0], "12,001 of 12,345 lost datagrams were dropped by the board's own egress queue (tbf on eth0): the sender outran the link — lower -b or raise the shaper");
        assert_eq!(s[1], "344 of 12,345 lost datagrams are not on the board's counters: on the wire or at the peer");
    }

    #[test]
    fn a_receiving_run_names_the_nic_ring_and_the_socket_and_clamps() {
        let l = ledger(14_000, Path::Received, &["eth1".into()], &board());
        let places: Vec<(&str, u64)> = l
            .places
            .iter()
            .map(|p| (p.place.as_str(), p.packets))
            .collect();
        assert_eq!(places, [("board_socket", 9870), ("board_nic", 5000)]);
        assert_eq!(l.unattributed, 0, "14,870 counted > 14,000 lost: clamped");
        assert!(l.overcounted());
        let s = sentences(&l, &board());
        assert_eq!(s[0], "RcvbufErrors +9,870: the board's socket buffer overflowed — -w 4M, or raise net.core.rmem_max (now 212992)");
        assert_eq!(s[1], "rx_missed_errors +5,000 on eth1: the NIC's ring (256 of max 4096) overflowed — `ethtool -G eth1 rx 4096`");
        assert!(s[2].contains("traffic outside the run"), "{s:?}");
    }

    #[test]
    fn a_forwarded_run_counts_every_port_but_no_socket() {
        let mut d = board();
        d.softnet = vec![Softnet {
            cpu: 1,
            processed: 9,
            dropped: 4,
            time_squeeze: 0,
        }];
        let l = ledger(
            20_000,
            Path::of("send", true),
            &["eth1".into(), "eth0".into()],
            &d,
        );
        let places: Vec<(&str, Option<&str>, u64)> = l
            .places
            .iter()
            .map(|p| (p.place.as_str(), p.port.as_deref(), p.packets))
            .collect();
        assert_eq!(
            places,
            [
                ("board_qdisc", Some("eth0"), 12_001),
                ("board_nic", Some("eth1"), 5000),
                ("board_softnet", None, 4)
            ]
        );
        assert_eq!(l.places[2].counter, "softnet_stat dropped (CPU 1)");
        assert_eq!(l.unattributed, 20_000 - 17_005);
        assert_eq!(Path::of("receive", false), Path::Received);
        assert_eq!(Path::of("bidir", false), Path::Both);
    }

    #[test]
    fn nothing_on_the_board_says_so() {
        let l = ledger(
            500,
            Path::Received,
            &["eth0".into()],
            &BoardDelta::default(),
        );
        assert_eq!((l.lost, l.places.len(), l.unattributed), (500, 0, 500));
        assert_eq!(headline(&l).as_deref(), Some("not on the board: 500"));
        assert_eq!(
            sentences(&l, &BoardDelta::default()),
            ["500 datagrams lost, not on the board: on the wire or at the peer (none of the board's drop counters moved)"]
        );
        // Nothing lost, nothing moved: nothing to say.
        let none = ledger(0, Path::Both, &[], &BoardDelta::default());
        assert_eq!(headline(&none), None);
        assert!(sentences(&none, &BoardDelta::default()).is_empty());
    }

    #[test]
    fn the_peers_drops_become_peer_places() {
        // What a netperfd server that sent through its own TBF puts in its results.
        let mut pc = BoardDelta::default();
        pc.ports.insert(
            "eth0".into(),
            PortDelta {
                qdiscs: vec![Qdisc {
                    kind: "tbf".into(),
                    handle: "8001:".into(),
                    parent: "root".into(),
                    drops: 9_990,
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        pc.snmp.insert("Udp.RcvbufErrors".into(), 7);
        let wire = peer_drops("send", &["eth0".into()], &pc);
        assert_eq!(
            wire,
            serde_json::json!([{"place": "qdisc", "port": "eth0", "packets": 9990,
                "counter": "qdisc tbf drops on eth0"}])
        );
        // The board received and lost 10,000, none on its own counters.
        let board = ledger(
            10_000,
            Path::Received,
            &["eth0".into()],
            &BoardDelta::default(),
        );
        let mut junk = wire.as_array().unwrap().clone();
        junk.push(serde_json::json!({"place": "board_qdisc", "packets": 5, "counter": "x"}));
        junk.push(serde_json::json!({"place": "socket", "packets": "many"}));
        junk.push(serde_json::json!("not a place"));
        let l = with_peer(board, &serde_json::Value::Array(junk));
        assert_eq!(l.places.len(), 1, "{l:?}");
        assert_eq!(l.places[0].place, "peer_qdisc");
        assert_eq!(l.places[0].packets, 9_990);
        assert_eq!(l.unattributed, 10);
        assert_eq!(
            headline(&l).as_deref(),
            Some("peer_qdisc eth0 9,990, unattributed 10")
        );
        assert_eq!(
            sentences(&l, &BoardDelta::default()),
            [
                "9,990 of 10,000 lost datagrams were dropped by the peer's own egress queue (tbf on its eth0): the peer's sender outran its link — lower -b or raise the peer's shaper",
                "not on the board: none of the board's drop counters moved; 10 of 10,000 lost datagrams are on neither side's counters: on the wire",
            ]
        );
        // A peer that sent nothing (a stock one) or an empty list changes nothing.
        let same = with_peer(
            ledger(500, Path::Received, &[], &BoardDelta::default()),
            &serde_json::json!([]),
        );
        assert_eq!((same.places.len(), same.unattributed), (0, 500));
    }

    #[test]
    fn other_traffic_beyond_the_runs_own_bytes() {
        use crate::board::counters::Traffic;
        // A 3 s UDP run at 100 Mbit/s the board sent: 37.5 MB in 25,900 datagrams of 1448
        // bytes, 38.6 MB on the wire (42 bytes of headers each) and a few hundred packets
        // back (control connection).
        let port = |t: Traffic| PortDelta {
            traffic: Some(t),
            ..Default::default()
        };
        let mut d = BoardDelta::default();
        d.ports.insert(
            "eth0".into(),
            port(Traffic {
                rx_bytes: 30_000,
                rx_packets: 400,
                tx_bytes: 38_590_000,
                tx_packets: 25_950,
            }),
        );
        let run = 37_500_000;
        assert_eq!(
            other_traffic(&d, run, 1),
            None,
            "the run's own traffic only"
        );
        // A second flow on eth1 at the same time: 12 MB in 8,300 packets.
        d.ports.insert(
            "eth1".into(),
            port(Traffic {
                rx_bytes: 12_000_000,
                rx_packets: 8_300,
                tx_bytes: 0,
                tx_packets: 0,
            }),
        );
        let extra = other_traffic(&d, run, 1).expect("other traffic");
        // 50,620,000 - 37,500,000 - 34,650 × 90 = 10,001,500.
        assert_eq!(extra, 10_001_500);
        assert_eq!(
            other_traffic_sentence(extra, run),
            "Other traffic at the same time: the board's ports moved 10.0 MB beyond the run's own 37.5 MB — the counters here are host-wide and may include it"
        );
        // The same ports for a forwarded run of 25 MB (in on one port, out on the other):
        // nothing beyond it.
        assert_eq!(other_traffic(&d, 25_000_000, 2), None);
        // Not read (runs stored before): nothing said.
        assert_eq!(other_traffic(&BoardDelta::default(), run, 1), None);
    }

    #[test]
    fn squeeze_clock_and_temperature_notes() {
        let mut d = BoardDelta::default();
        d.ports.insert("eth0".into(), PortDelta::default());
        d.softnet = vec![
            Softnet {
                cpu: 0,
                processed: 100_000,
                dropped: 0,
                time_squeeze: 812,
            },
            Softnet {
                cpu: 1,
                processed: 10,
                dropped: 0,
                time_squeeze: 0,
            },
        ];
        d.irqs = vec![IrqLine {
            irq: "57".into(),
            per_cpu: vec![90_000, 0],
            desc: "GICv3 150 Level eth0".into(),
        }];
        d.cpufreq = vec![
            CpuFreqDelta {
                cpu: 2,
                start_mhz: Some(1800.0),
                end_mhz: Some(800.0),
                min_mhz: Some(800.0),
                max_mhz: Some(1800.0),
                hw_max_mhz: Some(1800.0),
                governor: Some("powersave".into()),
            },
            CpuFreqDelta {
                cpu: 3,
                start_mhz: Some(1800.0),
                end_mhz: Some(1800.0),
                hw_max_mhz: Some(1800.0),
                ..Default::default()
            },
        ];
        d.thermal = vec![ThermalDelta {
            zone: 0,
            kind: "cpu-thermal".into(),
            start_c: Some(71.0),
            end_c: Some(95.0),
            trips: vec![("passive".into(), 85.0), ("critical".into(), 105.0)],
        }];
        assert_eq!(
            board_notes(&d),
            [
                "softnet time_squeeze +812 on CPU 0 only, eth0's IRQ is pinned to CPU 0: the receive processing ran out of budget — raise net.core.netdev_budget or spread the IRQs",
                "CPU 2 ran at 800 MHz of 1800 (governor powersave)",
                "thermal zone cpu-thermal reached 95 °C, passive throttling",
            ]
        );
    }
}
