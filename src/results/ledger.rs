//! The loss ledger: a UDP or forwarding run's lost datagrams set against the board's counters
//! that moved during the run ([`crate::board::counters::BoardDelta`]), place by place, and
//! what the counters say to try. Only what the counters show: a place that did not move is
//! not named, and what the board cannot account for is `unattributed` (the wire, or a host
//! netperfd cannot read). When the peer is netperfd (its iperf3 server: the daemon or
//! `netperfd -s`) it sends its own drop counters over the test with its results
//! ([`peer_drops`], added by [`with_peer`] as `peer_*` places); a stock peer sends none.
//!
//! Units: the ledger counts datagrams (`unit` of [`LossLedger`] and of each [`Place`]). NIC,
//! softnet and socket counters count frames / datagrams as they are. A qdisc counts skbs: a
//! dropped GSO batch (several datagrams sent in one UDP_SEGMENT buffer, as netperfd sends)
//! is one drop. Its drops are turned into datagrams by conservation over the run
//! ([`qdisc_datagrams`]): the datagrams that entered it (what this host's own sender handed
//! to the kernel, or for a forwarded run what arrived on the run's other ports) less what it
//! sent (its "Sent … bytes", which count every segment with its headers) less what is still
//! queued. The qdisc's own count stays in the place (`counted`, `counted_unit` `skbs`). When
//! the conversion cannot be made (the run's datagram size or sender count unknown, counters
//! from before the qdisc's sent bytes were kept, figures that do not add up) the place keeps
//! the skbs with `unit` `skbs`, is left out of [`LossLedger::attributed`], and the page says
//! so rather than guessing.

use crate::board::counters::{BoardDelta, Qdisc};
use crate::model::display::count;
use crate::model::RunDirection;
use serde::{Deserialize, Serialize};

/// The unit of a place that counts datagrams (see the module doc).
pub(crate) const DATAGRAMS: &str = "datagrams";
/// The unit of a qdisc's drops: one skb is one datagram or a GSO batch of several.
pub(crate) const SKBS: &str = "skbs";
/// The unit of IP reassembly failures (`Ip ReasmFails` of `/proc/net/snmp`): the kernel
/// counts one per fragment it could not queue (reassembly memory full) and one per datagram
/// whose reassembly it gave up (a fragment missing at the timeout), so they are neither
/// datagrams nor fragments and are not added up with the datagrams.
pub(crate) const REASSEMBLY_FAILURES: &str = "reassembly failures";

/// Where datagrams were dropped, as counted by one counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Place {
    /// `board_qdisc`, `board_nic`, `board_softnet`, `board_socket`, or the same of the
    /// peer (`peer_qdisc`, …).
    pub place: String,
    /// The port, for places that belong to one (qdisc, NIC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// What was lost here, in `unit`: datagrams, or (a qdisc whose skbs could not be turned
    /// into datagrams) skbs.
    pub packets: u64,
    /// The unit of `packets`: [`DATAGRAMS`] or [`SKBS`]. Empty in ledgers stored before the
    /// unit was said (their qdisc places counted skbs).
    #[serde(default)]
    pub unit: String,
    /// The counter's own figure when it counts something else than datagrams (a qdisc: its
    /// drops, in `counted_unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<u64>,
    /// The unit of `counted` ([`SKBS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_unit: Option<String>,
    /// The counter, in words (`qdisc tbf drops on eth0`, `Udp RcvbufErrors`).
    pub counter: String,
}

impl Place {
    /// Whether `packets` counts datagrams (ledgers stored before the unit was said count as
    /// they did then).
    pub(crate) fn in_datagrams(&self) -> bool {
        self.unit != SKBS && self.unit != REASSEMBLY_FAILURES
    }
}

/// A run's lost datagrams and the places that account for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LossLedger {
    /// Datagrams the receiver counted lost.
    pub lost: u64,
    /// The unit of `lost` and `unattributed`: [`DATAGRAMS`] (empty in ledgers stored before
    /// it was said).
    #[serde(default)]
    pub unit: String,
    /// The board's counters that moved, largest first.
    pub places: Vec<Place>,
    /// Datagrams this host's own sender did not send because this host refused them (its
    /// queue on the sending port was full: ENOBUFS, see
    /// [`crate::engine::report::UdpSummary::sender_dropped_locally`]). Not in `lost`: they
    /// were never numbered, so the receiver did not miss them. 0 in ledgers stored before
    /// they were counted (those runs counted such drops as sent, and lost).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_locally: u64,
    /// `lost` minus the places counted in datagrams, never below 0 (when the places add up
    /// to more than was lost, other traffic moved the host-wide counters too; see
    /// [`LossLedger::overcounted`]).
    pub unattributed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LossLedger {
    /// Datagrams the places add up to (places still in skbs left out).
    pub(crate) fn attributed(&self) -> u64 {
        self.places
            .iter()
            .filter(|p| p.in_datagrams())
            .map(|p| p.packets)
            .fold(0, u64::saturating_add)
    }

    /// Datagrams the places hold at least: [`LossLedger::attributed`] plus one per skb of the
    /// places still in skbs (a skb holds one datagram or more).
    pub(crate) fn at_least(&self) -> u64 {
        self.places
            .iter()
            .filter(|p| p.unit != REASSEMBLY_FAILURES)
            .map(|p| p.packets)
            .fold(0, u64::saturating_add)
    }

    /// The places add up to more than the run lost (the counters are host-wide: other
    /// traffic ran at the same time and is in the figures); `unattributed` was clamped to 0.
    pub(crate) fn overcounted(&self) -> bool {
        self.attributed() > self.lost
    }

    /// Some place is counted in skbs (its datagrams could not be told): part of
    /// `unattributed` may be in it.
    pub(crate) fn has_skbs(&self) -> bool {
        self.places.iter().any(|p| p.unit == SKBS)
    }
}

/// Which of the board's places a run's datagrams passed: the board sent (its egress queues),
/// received (NIC, softnet, socket), both, or forwarded them (everything but the socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Sent,
    Received,
    Both,
    Forwarded,
}

impl Path {
    /// The path of a run from its direction (board's view: send / receive / bidir) and
    /// whether it was a forwarding run.
    pub(crate) fn of(direction: &RunDirection, forwarding: bool) -> Path {
        match (forwarding, direction) {
            (true, _) => Path::Forwarded,
            (_, RunDirection::Send) => Path::Sent,
            (_, RunDirection::Receive) => Path::Received,
            (
                _,
                RunDirection::Bidir
                | RunDirection::Tradeoff
                | RunDirection::Mixed
                | RunDirection::Unset
                | RunDirection::Other(_),
            ) => Path::Both,
        }
    }
    fn egress(self) -> bool {
        self != Path::Received
    }
    fn ingress(self) -> bool {
        self != Path::Sent
    }
}

/// What the ledger knows of a run's own datagrams, to turn a qdisc's skbs into datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Flow {
    /// UDP payload bytes of one datagram (the run's `-l`); 0 = unknown (no conversion).
    pub payload: u64,
    /// Header bytes of one datagram as ports and qdiscs count them: link (Ethernet, 14) +
    /// IP (20, or 40 for IPv6) + UDP (8).
    pub headers: u64,
    /// Datagrams this host's own sender handed to the kernel over the run (its omitted
    /// seconds included); `None` when it did not send or the count is unknown.
    pub sent: Option<u64>,
    /// Datagrams this host's own receiver got (each once); `None` when it did not receive
    /// or the count is unknown. Turns a socket's RcvbufErrors (skbs: a GRO batch is one)
    /// into datagrams ([`socket_datagrams`]).
    pub received: Option<u64>,
    /// Datagrams this host's own sender had refused by this host (its egress qdisc dropped
    /// them and the send failed with ENOBUFS): they entered the egress qdisc but are not in
    /// `sent`; `None` when not known (0 is said as `Some(0)`).
    pub dropped_locally: Option<u64>,
}

impl Flow {
    /// The flow of UDP datagrams of `payload` bytes over IPv4 or IPv6 on Ethernet ports,
    /// `sent` of them sent by this host (when it sent).
    pub(crate) fn udp(payload: u64, ipv6: bool, sent: Option<u64>) -> Flow {
        Flow {
            payload,
            headers: 14 + if ipv6 { 40 } else { 20 } + 8,
            sent,
            received: None,
            dropped_locally: None,
        }
    }

    /// The flow with this host's sender's local refusals (see [`Flow::dropped_locally`]).
    pub(crate) fn with_dropped_locally(mut self, n: Option<u64>) -> Flow {
        self.dropped_locally = n;
        self
    }

    /// The flow with this host's receiver count (see [`Flow::received`]).
    pub(crate) fn with_received(mut self, received: Option<u64>) -> Flow {
        self.received = received;
        self
    }

    /// Bytes of one datagram as a qdisc counts it (headers included); `None` without a
    /// payload size.
    fn wire(&self) -> Option<u64> {
        (self.payload > 0).then(|| self.payload.saturating_add(self.headers))
    }

    /// Datagrams in `bytes` / `packets` that a port received: each skb (a single frame or a
    /// GSO/GRO batch) carries its headers once, the rest is whole payloads.
    fn received(&self, bytes: u64, packets: u64) -> Option<u64> {
        (self.payload > 0)
            .then(|| bytes.saturating_sub(packets.saturating_mul(self.headers)) / self.payload)
    }
}

/// Datagrams root qdisc `q` dropped over a run into which `entered` datagrams of `f` went, by
/// conservation: entered − sent − (backlog at the end − at the start), with what it sent and
/// queued in bytes over one datagram's bytes (so the small packets of other traffic weigh
/// little). `None` when that cannot be told: no payload size, the qdisc's sent bytes not
/// read (a row stored before they were kept), or a result below the qdisc's own skb count
/// (every dropped skb holds at least one datagram: the figures do not add up, e.g. other
/// traffic through the qdisc). At least the skb count, at most `entered`.
pub(crate) fn qdisc_datagrams(q: &Qdisc, entered: u64, f: &Flow) -> Option<u64> {
    let wire = i128::from(f.wire()?);
    if q.sent_bytes == 0 && q.sent_packets == 0 {
        return None;
    }
    let sent = (i128::from(q.sent_bytes) + wire / 2) / wire;
    let queued = (i128::from(q.backlog_bytes) - i128::from(q.backlog_start_bytes)) / wire;
    let lost = i128::from(entered) - sent - queued;
    let skbs = i128::from(q.drops);
    // Noise of a few datagrams (a control packet, rounding) below the skb count is allowed.
    if lost * 100 < skbs * 98 - 200 {
        return None;
    }
    let n = lost.max(skbs).min(i128::from(entered));
    u64::try_from(n).ok()
}

/// Datagrams a socket's buffer had no room for over a run, from its `rcvbuf_errors` (the
/// kernel's UdpRcvbufErrors: one per skb, and a socket with UDP_GRO on — netperfd's
/// receivers — takes a GSO or GRO batch of several datagrams as one skb), by conservation:
/// the datagrams that arrived on the run's ports (`rx`: their received bytes less one set
/// of headers per packet, over the payload) less those the receiver got (`flow.received`)
/// less those dropped before the socket (`before`: NIC and softnet drops). `None` when that
/// cannot be told (no payload size or receiver count) or the figures do not add up (fewer
/// than one datagram per skb, e.g. other traffic on the ports); at most what arrived.
pub(crate) fn socket_datagrams(
    rcvbuf_errors: u64,
    rx: (u64, u64),
    before: u64,
    f: &Flow,
) -> Option<u64> {
    let arrived = f.received(rx.0, rx.1)?;
    let lost = arrived.checked_sub(f.received?)?.saturating_sub(before);
    // Noise of a few datagrams (a control packet, rounding) below the skb count is allowed.
    if (lost as u128) * 100 < (rcvbuf_errors as u128) * 98 && lost + 2 < rcvbuf_errors {
        return None;
    }
    Some(lost.max(rcvbuf_errors).min(arrived))
}

/// The ledger of a run that lost `lost` datagrams on `ports` (the run's ports on the board)
/// along `path`, from the board's counters over the run; `flow` turns qdisc skbs into
/// datagrams (see [`qdisc_datagrams`]): for a run this host sent (on one port) what entered
/// the egress qdisc is `flow.sent`; for a forwarded run, the datagrams received on the run's
/// other ports less softnet drops.
pub(crate) fn ledger(
    lost: u64,
    path: Path,
    ports: &[String],
    d: &BoardDelta,
    flow: &Flow,
) -> LossLedger {
    let mut l = places_of(lost, path, ports, d, flow);
    if path != Path::Forwarded {
        l.dropped_locally = flow.dropped_locally.unwrap_or(0);
    }
    l
}

fn places_of(lost: u64, path: Path, ports: &[String], d: &BoardDelta, flow: &Flow) -> LossLedger {
    let mut places = Vec::new();
    for name in ports {
        let Some(p) = d.ports.get(name) else { continue };
        if path.egress() {
            places.extend(qdisc_place(path, ports, name, p, d, flow));
        }
        if path.ingress() {
            if let Some((counter, n)) = p.nic_rx_drops() {
                places.push(datagram_place(
                    "board_nic",
                    Some(name.clone()),
                    n,
                    format!("{counter} on {name}"),
                ));
            }
        }
    }
    if path.ingress() {
        let sd = d.softnet_dropped();
        if sd > 0 {
            places.push(datagram_place(
                "board_softnet",
                None,
                sd,
                format!("softnet_stat dropped ({})", cpus_moved(d, |s| s.dropped)),
            ));
        }
    }
    if matches!(path, Path::Received | Path::Both) {
        // Datagrams that came in IP fragments and were never put back together: in the
        // kernel's own unit (see [`REASSEMBLY_FAILURES`]), not added up with datagrams.
        let n = d.snmp("Ip.ReasmFails");
        if n > 0 {
            places.push(Place {
                place: "board_reassembly".into(),
                port: None,
                packets: n,
                unit: REASSEMBLY_FAILURES.into(),
                counted: None,
                counted_unit: None,
                counter: "Ip ReasmFails".into(),
            });
        }
        let n = d.snmp("Udp.RcvbufErrors");
        if n > 0 {
            // One receiving leg on the run's ports: the skbs can be turned into datagrams.
            let rx = ports
                .iter()
                .filter_map(|p| d.ports.get(p)?.traffic)
                .fold((0u64, 0u64), |(b, k), t| {
                    (b.saturating_add(t.rx_bytes), k.saturating_add(t.rx_packets))
                });
            let before = places
                .iter()
                .map(|p| p.packets)
                .fold(0u64, u64::saturating_add);
            let datagrams = (path == Path::Received && rx.1 > 0)
                .then(|| socket_datagrams(n, rx, before, flow))
                .flatten();
            let mut p = datagram_place(
                "board_socket",
                None,
                datagrams.unwrap_or(n),
                "Udp RcvbufErrors".into(),
            );
            if datagrams.is_some() {
                p.counted = Some(n);
                p.counted_unit = Some(SKBS.into());
            }
            places.push(p);
        }
    }
    finish(lost, places)
}

/// The place of the drops of port `name`'s (`p`'s) root egress qdisc on `path`, in datagrams
/// when the datagrams that entered it can be told (see [`qdisc_datagrams`]), else in skbs.
/// `None` when it dropped nothing, or only this host's refusals of its own sender's
/// datagrams (they are no place of the lost ones).
fn qdisc_place(
    path: Path,
    ports: &[String],
    name: &str,
    p: &crate::board::counters::PortDelta,
    d: &BoardDelta,
    flow: &Flow,
) -> Option<Place> {
    let q = p.root_qdisc().filter(|q| q.drops > 0)?;
    // (A qdisc whose drops were all this host's refusals of its own sender's
    // datagrams is no place of the lost ones: see below.)
    let entered = match path {
        Path::Forwarded => {
            let rx = ports
                .iter()
                .filter(|o| *o != name)
                .filter_map(|o| d.ports.get(o)?.traffic)
                .map(|t| flow.received(t.rx_bytes, t.rx_packets))
                .try_fold(0u64, |a, n| Some(a.saturating_add(n?)));
            rx.filter(|_| ports.len() > 1)
                .map(|n| n.saturating_sub(d.softnet_dropped()))
        }
        // What the sender sent and what this host refused it: both entered.
        _ => flow
            .sent
            .filter(|_| ports.len() == 1)
            .map(|n| n.saturating_add(flow.dropped_locally.unwrap_or(0))),
    };
    // The datagrams the sender was told of (ENOBUFS) are in `dropped_locally`, not
    // in `lost`: the place keeps only the qdisc's other drops (a GSO batch it
    // split and dropped in part, drops at dequeue), which the receiver did miss.
    let told = if path == Path::Forwarded {
        0
    } else {
        flow.dropped_locally.unwrap_or(0)
    };
    let datagrams = entered
        .and_then(|e| qdisc_datagrams(q, e, flow))
        .map(|n| n.saturating_sub(told));
    (datagrams != Some(0)).then(|| Place {
        place: "board_qdisc".into(),
        port: Some(name.to_string()),
        packets: datagrams.unwrap_or(q.drops),
        unit: if datagrams.is_some() { DATAGRAMS } else { SKBS }.into(),
        counted: Some(q.drops),
        counted_unit: Some(SKBS.into()),
        counter: format!("qdisc {} drops on {name}", q.kind),
    })
}

fn datagram_place(place: &str, port: Option<String>, n: u64, counter: String) -> Place {
    Place {
        place: place.into(),
        port,
        packets: n,
        unit: DATAGRAMS.into(),
        counted: None,
        counted_unit: None,
        counter,
    }
}

/// The ledger of `places`, largest first, with what is left unattributed.
fn finish(lost: u64, mut places: Vec<Place>) -> LossLedger {
    crate::model::order::sort_by_key(&mut places, |p| std::cmp::Reverse(p.packets));
    let mut l = LossLedger {
        lost,
        unit: DATAGRAMS.into(),
        places,
        dropped_locally: 0,
        unattributed: 0,
    };
    l.unattributed = lost.saturating_sub(l.attributed());
    l
}

/// The places of this host's own drop counters over a test, as a netperfd iperf3 server
/// (or client, or peer agent) sends them with its results (`netperfd_drops`: `place`
/// without its `board_` prefix: `qdisc`, `nic`, `softnet`, `socket`; with `unit`, and a
/// qdisc's own skb count in `counted`) for the other side's ledger. `direction` is this
/// side's (`send`, `receive`, `bidir`), `ports` the test's ports on this host, `flow` the
/// test's datagrams (its `sent`: this side's own sender count).
pub(crate) fn peer_drops(
    direction: &str,
    ports: &[String],
    d: &BoardDelta,
    flow: &Flow,
) -> serde_json::Value {
    let l = ledger(
        0,
        Path::of(&RunDirection::parse(direction), false),
        ports,
        d,
        flow,
    );
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
/// are left out. A peer that did not say its unit (netperfd before units were said) counted
/// a qdisc's drops in skbs, everything else in datagrams; a unit other than those two is
/// taken as skbs (not added up). `unattributed` is recomputed.
pub(crate) fn with_peer(mut l: LossLedger, drops: &serde_json::Value) -> LossLedger {
    let list = drops.as_array().map(Vec::as_slice).unwrap_or_default();
    for v in list.iter().take(PEER_PLACES) {
        let Ok(p) = serde_json::from_value::<Place>(v.clone()) else {
            continue;
        };
        if !matches!(
            p.place.as_str(),
            "qdisc" | "nic" | "softnet" | "socket" | "reassembly"
        ) || p.packets == 0
        {
            continue;
        }
        let unit = match p.unit.as_str() {
            _ if p.place == "reassembly" => REASSEMBLY_FAILURES,
            DATAGRAMS => DATAGRAMS,
            "" if p.place != "qdisc" => DATAGRAMS,
            _ => SKBS,
        };
        let cut = |t: String| crate::model::display::peer_text(&t, PEER_TEXT);
        // A peer's count is its word, not a kernel's here: never more than this run lost (a
        // hostile peer's 2^63 read "9,223,372,036,854,775,807 of 500 lost datagrams").
        let packets = p.packets.min(l.lost);
        if packets == 0 {
            continue;
        }
        let counted = p
            .counted
            .filter(|_| matches!(p.place.as_str(), "qdisc" | "socket"))
            .map(|c| c.min(packets));
        l.places.push(Place {
            place: format!("peer_{}", p.place),
            port: p.port.map(cut),
            packets,
            unit: unit.into(),
            counted,
            counted_unit: counted.map(|_| SKBS.into()),
            counter: cut(p.counter),
        });
    }
    if l.unit.is_empty() {
        l.unit = DATAGRAMS.into();
    }
    let lost = l.lost;
    let places = std::mem::take(&mut l.places);
    finish(lost, places)
}

/// Bytes a frame carries beyond its payload, allowed per packet the ports counted when
/// their traffic is set against a run's own bytes: Ethernet 14 + IPv6 40 + TCP 32 (with
/// timestamps), rounded up. An ACK-only frame of the run fits in it.
const FRAME_OVERHEAD: u64 = 90;

/// A UDP run's own frames, for [`other_traffic`]: its `datagrams` (the receiver's expected
/// count), the `headers` bytes each carries as ports count them (see [`Flow::headers`]), and
/// where they passed: `path` on the board's `ports`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunFrames<'a> {
    pub datagrams: u64,
    pub headers: u64,
    pub path: Path,
    pub ports: &'a [String],
    /// The packets (skbs) the board's own sender handed the kernel, when the board sent
    /// ([`crate::engine::report::UdpSummary::sender_skbs`]): on a port that counts skbs
    /// (fewer packets than datagrams went out) the run's own share of its egress packets.
    pub sender_skbs: Option<u64>,
}

/// Traffic on the board's ports during a run beyond the run's own: the bytes every port
/// (loopback aside) moved both ways, less the run's bytes once per port they crossed
/// (`crossings`: 1 for a run the board sends or receives, 2 for a forwarded or bidirectional
/// one) and their headers. A UDP run's headers are known (`frames`): one set per packet
/// the run's ports counted in the direction its datagrams went (a GSO or GRO batch carries
/// them once), at most one per datagram and crossing; other traffic's bytes are left whole.
/// Where the board sent and its egress port counted fewer packets than datagrams (a port
/// that counts GSO batches as one, as a veth does), the run's own egress packets are the
/// skbs its sender handed the kernel (`sender_skbs`), so the packets of other traffic
/// leaving the same way keep their headers (the truth set's case (i): 3 % low before).
/// Without `frames` (TCP, whose segments and ACKs are not counted) [`FRAME_OVERHEAD`] is
/// allowed per packet of every port. `Some(bytes)` when that is over 1 MiB and over 5 % of
/// the run's own; `None` otherwise or when the ports' traffic was not read.
pub(crate) fn other_traffic(
    d: &BoardDelta,
    run_bytes: u64,
    crossings: u64,
    frames: Option<&RunFrames>,
) -> Option<u64> {
    let t: Vec<_> = d.ports.values().filter_map(|p| p.traffic).collect();
    if t.is_empty() {
        return None;
    }
    let bytes: u64 = t.iter().map(|t| t.rx_bytes + t.tx_bytes).sum();
    let own = run_bytes.saturating_mul(crossings);
    let headers = match frames {
        Some(f) => {
            let run_ports = f.ports.iter().filter_map(|p| d.ports.get(p)?.traffic);
            // A port's packets that were the run's, in the direction its datagrams went.
            let own_packets = |n: u64, egress: bool| match f.sender_skbs {
                Some(skbs) if egress && n < f.datagrams => skbs.min(n),
                _ => n.min(f.datagrams),
            };
            let packets = run_ports
                .flat_map(|t| {
                    [
                        (f.path.ingress(), t.rx_packets, false),
                        (f.path.egress(), t.tx_packets, true),
                    ]
                })
                .filter(|(carries, _, _)| *carries)
                .map(|(_, n, egress)| own_packets(n, egress))
                .fold(0u64, u64::saturating_add)
                .min(f.datagrams.saturating_mul(crossings));
            packets.saturating_mul(f.headers)
        }
        None => {
            let packets: u64 = t.iter().map(|t| t.rx_packets + t.tx_packets).sum();
            packets.saturating_mul(FRAME_OVERHEAD)
        }
    };
    let extra = bytes.saturating_sub(own.saturating_add(headers));
    (extra > (1 << 20) && extra > own / 20).then_some(extra)
}

/// The sentence of [`other_traffic`]: "Other traffic at the same time: …".
pub(crate) fn other_traffic_sentence(extra: u64, run_bytes: u64) -> String {
    format!(
        "Other traffic at the same time: the board's ports moved {} beyond the run's own {} — the counters here are host-wide and may include it",
        crate::model::display::size(extra as f64),
        crate::model::display::size(run_bytes as f64)
    )
}

/// The ledger in a few words for tables across runs and boards (compare, suites): each place
/// and its datagrams (a place still in skbs says so), then what is unattributed —
/// "board_qdisc eth0 12,001, unattributed 344", "board_qdisc eth0 884 skbs, unattributed
/// 8,000", "not on the board: 500". `None` when nothing was lost.
pub(crate) fn headline(l: &LossLedger) -> Option<String> {
    if l.lost == 0 {
        return None;
    }
    if l.places.is_empty() {
        return Some(format!("not on the board: {}", count(l.lost)));
    }
    let mut parts: Vec<String> = l
        .places
        .iter()
        .map(|p| {
            let unit = if p.in_datagrams() {
                String::new()
            } else {
                format!(" {}", p.unit)
            };
            match &p.port {
                Some(port) => format!("{} {port} {}{unit}", p.place, count(p.packets)),
                None => format!("{} {}{unit}", p.place, count(p.packets)),
            }
        })
        .collect();
    if l.unattributed > 0 {
        parts.push(format!("unattributed {}", count(l.unattributed)));
    }
    Some(parts.join(", "))
}

/// How a qdisc place counted, after its name: "" when its drops were datagrams already,
/// else "; it counted 884 drops: one per skb, a GSO batch of several datagrams is one".
fn qdisc_counted(p: &Place) -> String {
    match p.counted {
        Some(c) if c != p.packets && p.in_datagrams() => format!(
            "; the qdisc counted {} drops: one per skb, and a GSO batch of several datagrams is one skb unless the qdisc split it into segments (TBF splits a batch larger than its burst)",
            count(c)
        ),
        _ => String::new(),
    }
}

/// A socket place's count: "RcvbufErrors +500", or when the counter counted skbs (GRO
/// batches) and they were turned into datagrams "RcvbufErrors +740 skbs = 9,620 datagrams
/// (one per skb: a GRO batch of several datagrams is one skb)".
fn rcvbuf_errors(p: &Place) -> String {
    match p.counted {
        Some(c) if c != p.packets && p.in_datagrams() => format!(
            "RcvbufErrors +{} skbs = {} datagrams (one per skb: a GRO batch of several datagrams is one skb)",
            count(c),
            count(p.packets)
        ),
        _ => format!("RcvbufErrors +{}", count(p.packets)),
    }
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

/// net.core.rmem_max at or above which a socket buffer overflow is not cured by a bigger
/// buffer (16 MiB: 0.13 s of 1 Gbit/s; what tuning guides raise it to).
const LARGE_RMEM: u64 = 16 << 20;

/// A place too small to advise on: under 100 packets and under 1 % of the `lost` datagrams.
fn trivial(packets: u64, lost: u64) -> bool {
    packets < 100 && packets.saturating_mul(100) < lost
}

/// What the ledger and the board's counters say, one sentence per place that moved and per
/// clock or temperature worth a word, with what to try. Empty when nothing was lost and
/// nothing on the board is worth saying.
pub(crate) fn sentences(l: &LossLedger, d: &BoardDelta) -> Vec<String> {
    let mut out = Vec::new();
    let lost = count(l.lost);
    // The datagrams this host refused its own sender: first when they outnumber the lost
    // (the verdict takes the first sentence), else after the places of the lost.
    let local = (l.dropped_locally > 0).then(|| format!(
        "{} datagrams were not sent: the board's own egress queue was full and refused them (the send failed with ENOBUFS) — counted apart, not among the {lost} the receiver counted lost (they were never numbered): the sender asked for more than the port's queue or shaper takes — lower -b or raise the shaper",
        count(l.dropped_locally)
    ));
    let local_first = l.dropped_locally > l.lost;
    if let Some(s) = local.clone().filter(|_| local_first) {
        out.push(s);
    }
    for p in &l.places {
        let n = count(p.packets);
        if trivial(p.packets, l.lost) {
            // Advice on 3 drops of 40,000 lost sends the user after the wrong thing.
            out.push(format!(
                "{} +{n}: a small part of the {lost} lost, nothing to act on",
                p.counter
            ));
            continue;
        }
        out.push(place_sentence(p, l, d));
    }
    let on_board = l.places.iter().any(|p| p.place.starts_with("board_"));
    let peer_told = l.places.iter().any(|p| p.place.starts_with("peer_"));
    out.extend(unplaced_sentence(l, on_board, peer_told));
    // One queue whose datagrams exceed the lost count already says why (its tail).
    let tail_said =
        matches!(l.places.as_slice(), [p] if p.place == "board_qdisc" && p.in_datagrams());
    if l.overcounted() && !tail_said {
        let whose = if peer_told { "" } else { "board's " };
        out.push(format!(
            "the {whose}counters moved by {} while the run lost {lost}: they are host-wide and also count traffic outside the run (other flows at the same time, datagrams sent after the receiver stopped counting)",
            count(l.attributed())
        ));
    }
    if let Some(s) = local.filter(|_| !local_first) {
        out.push(s);
    }
    out.extend(board_notes(d));
    out
}

/// The sentence for one place the lost datagrams went (`p`, a place of `l`), with what to
/// try; `d` gives the socket buffer limit and the NIC rings.
fn place_sentence(p: &Place, l: &LossLedger, d: &BoardDelta) -> String {
    let lost = count(l.lost);
    let n = count(p.packets);
    let port = p.port.as_deref().unwrap_or("");
    match p.place.as_str() {
        "board_qdisc" => board_qdisc_sentence(p, l),
        "board_socket" => match d.rmem_max {
            // A big buffer that still overflows: the reader is the limit, not the buffer.
            Some(v) if v >= LARGE_RMEM => format!(
                "{}: the board's socket buffer overflowed although net.core.rmem_max is already {} — the receiving thread did not read fast enough: look at its core in CPU per core, or lower -b",
                rcvbuf_errors(p),
                crate::model::display::size(v as f64)
            ),
            // The board's receivers are netperfd's: they ask for 8 MiB whatever the
            // client's -w (`engine::udp::deep_recv_buffer`), beyond net.core.rmem_max with
            // CAP_NET_ADMIN (the unit grants it), capped by it without. "-w 4M" cannot
            // help (the tryout's socket held 16 MiB while the page advised it).
            rmem => format!(
                "{}: the board's socket buffer overflowed — its receiver asks for 8 MiB whatever -w says, so the receiving thread did not read fast enough: look at its core in CPU per core, or lower -b; a daemon without CAP_NET_ADMIN gets at most net.core.rmem_max{}: raise it",
                rcvbuf_errors(p),
                rmem.map(|v| format!(" (now {})", count(v))).unwrap_or_default()
            ),
        },
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
            if p.in_datagrams() {
                format!(
                    "{n} of {lost} lost datagrams were dropped by the peer's own egress queue ({kind} on its {port}){}: the peer's sender outran its link — lower -b or raise the peer's shaper",
                    qdisc_counted(p)
                )
            } else {
                format!(
                    "the peer's own egress queue ({kind} on its {port}) dropped {n} skbs — its unit: a GSO batch of several datagrams is one skb, so they hold {n} or more of the {lost} lost datagrams: the peer's sender outran its link — lower -b or raise the peer's shaper"
                )
            }
        }
        // Only a netperfd receiver on the peer reports its drops, and it asks for 8 MiB
        // whatever -w says (as the board's do): "-w 4M" cannot help (tryout, stop 46).
        "peer_socket" => format!(
            "the peer's {}: the peer's socket buffer overflowed — its netperfd receiver asks for 8 MiB whatever -w says, so its receiving thread did not read fast enough (a busy core on the peer), or the peer's net.core.rmem_max caps the buffer: raise it there, or lower -b",
            rcvbuf_errors(p)
        ),
        "peer_nic" => format!(
            "{} +{n} on the peer: the peer's NIC dropped on receive",
            p.counter
        ),
        "peer_softnet" => format!(
            "the peer's softnet dropped +{n}: a CPU's receive backlog on the peer was full"
        ),
        "board_reassembly" | "peer_reassembly" => format!(
            "{}Ip ReasmFails +{n} (its unit: one per fragment the kernel could not queue, its reassembly memory full, and one per datagram it gave up on, a fragment missing): datagrams larger than the path MTU came in IP fragments and {} never put them back together — send datagrams that fit the MTU (a smaller -l), or raise net.ipv4.ipfrag_high_thresh{}",
            if p.place == "peer_reassembly" { "the peer's " } else { "" },
            if p.place == "peer_reassembly" { "the peer" } else { "the board" },
            if p.place == "peer_reassembly" { " on the peer" } else { "" },
        ),
        _ => format!("{} +{n}", p.counter),
    }
}

/// The sentence for datagrams (or skbs) the board's own egress queue `p` dropped, against
/// the ledger `l`'s lost count.
fn board_qdisc_sentence(p: &Place, l: &LossLedger) -> String {
    let lost = count(l.lost);
    let n = count(p.packets);
    let port = p.port.as_deref().unwrap_or("");
    let kind = p
        .counter
        .strip_prefix("qdisc ")
        .and_then(|c| c.split_once(' '))
        .map(|(k, _)| k)
        .unwrap_or("qdisc");
    if p.in_datagrams() && p.packets > l.lost {
        // The queue's count is the sender's; the receiver's lost stops at the last
        // datagram it saw (the tryout's "87,559 of 87,520 lost").
        format!(
            "{n} lost datagrams were dropped by the board's own egress queue ({kind} on {port}){} — all of the {lost} the receiver counted, and {} after the last one it received, which it does not count: the sender outran the link — lower -b or raise the shaper",
            qdisc_counted(p),
            count(p.packets - l.lost)
        )
    } else if p.in_datagrams() {
        format!(
            "{n} of {lost} lost datagrams were dropped by the board's own egress queue ({kind} on {port}){}: the sender outran the link — lower -b or raise the shaper",
            qdisc_counted(p)
        )
    } else {
        format!(
            "the board's own egress queue ({kind} on {port}) dropped {n} skbs — its unit: a GSO batch of several datagrams is one skb, and its datagrams could not be told from the counters, so they hold {n} or more of the {lost} lost datagrams: the sender outran the link — lower -b or raise the shaper"
        )
    }
}

/// The sentence for lost datagrams no counter of the board holds (`on_board`: a board place
/// moved; `peer_told`: the peer reported its counters): on the wire or at the peer. `None`
/// when every lost datagram has a place.
fn unplaced_sentence(l: &LossLedger, on_board: bool, peer_told: bool) -> Option<String> {
    let lost = count(l.lost);
    if l.lost > 0 && l.places.is_empty() {
        Some(format!(
            "{lost} datagrams lost, not on the board: on the wire or at the peer (none of the board's drop counters moved)"
        ))
    } else if l.lost > 0 && !on_board {
        Some(format!(
            "not on the board: none of the board's drop counters moved{}",
            if l.unattributed > 0 {
                format!(
                    "; {} of {lost} lost datagrams are on neither side's counters: on the wire",
                    count(l.unattributed)
                )
            } else {
                String::new()
            }
        ))
    } else if l.unattributed > 0 && l.has_skbs() {
        Some(format!(
            "{} of {lost} lost datagrams are not on any counter in datagrams: part or all of them are in the skbs counted above, the rest on the wire",
            count(l.unattributed)
        ))
    } else if l.unattributed > 0 && peer_told {
        Some(format!(
            "{} of {lost} lost datagrams are on neither the board's nor the peer's counters: on the wire",
            count(l.unattributed)
        ))
    } else if l.unattributed > 0 && !l.places.is_empty() {
        Some(format!(
            "{} of {lost} lost datagrams are not on the board's counters: on the wire or at the peer",
            count(l.unattributed)
        ))
    } else {
        None
    }
}

/// Sentences about the board's state that stand whether or not datagrams were lost: softnet
/// time_squeeze (and on which CPU the ports' IRQs ran), cores below their top clock, thermal
/// zones at a trip point.
pub(crate) fn board_notes(d: &BoardDelta) -> Vec<String> {
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

    /// The ledger without the run's datagrams (size unknown: a qdisc stays in skbs).
    fn led(lost: u64, path: Path, ports: &[String], d: &BoardDelta) -> LossLedger {
        ledger(lost, path, ports, d, &Flow::default())
    }

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

    /// A run the board sent through a 50 Mbit/s TBF on its own port (the case: UDP
    /// 150M, netperfd sending GSO batches of about 10 datagrams): 130,000 datagrams handed
    /// to the kernel, the TBF sent 41,640 segments (62,043,600 bytes at 1,490 bytes each:
    /// 1,448 payload + 42 headers) and held 2 at the end; it counted 8,839 drops (skbs).
    /// Issue 38 item 7: no advice on a handful of drops beside a big loss, and no "raise
    /// rmem_max" when it is already 16 MiB.
    #[test]
    fn a_queue_that_dropped_more_than_the_receiver_counted_says_why() {
        // The tryout: 87,559 datagrams dropped by the TBF (8,756 skbs), the receiver counted
        // 87,520 lost (it stops at the last datagram it received).
        let mut d = BoardDelta::default();
        d.ports.insert(
            "eth0".into(),
            PortDelta {
                qdiscs: vec![Qdisc {
                    kind: "tbf".into(),
                    parent: "root".into(),
                    drops: 8_756,
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        let mut l = led(87_520, Path::Sent, &["eth0".to_string()], &d);
        l.places[0].packets = 87_559;
        l.places[0].unit = DATAGRAMS.into();
        let s = sentences(&l, &d);
        assert!(
            s[0].starts_with(
                "87,559 lost datagrams were dropped by the board's own egress queue (tbf on eth0)"
            ) && s[0].contains(
                "all of the 87,520 the receiver counted, and 39 after the last one it received"
            ),
            "{s:?}"
        );
        assert!(!s.iter().any(|x| x.contains("host-wide")), "{s:?}");
    }

    #[test]
    fn advice_only_on_counts_that_matter_and_never_a_buffer_already_big() {
        let mut d = BoardDelta {
            rmem_max: Some(16 << 20),
            ..Default::default()
        };
        d.snmp.insert("Udp.RcvbufErrors".into(), 39_990);
        d.softnet = vec![Softnet {
            cpu: 1,
            dropped: 3,
            ..Default::default()
        }];
        let l = led(40_000, Path::Received, &[], &d);
        let s = sentences(&l, &d);
        let soft = s.iter().find(|x| x.starts_with("softnet")).unwrap();
        assert!(
            soft.contains("+3: a small part of the 40,000 lost, nothing to act on"),
            "{soft}"
        );
        assert!(!soft.contains("netdev_max_backlog"), "{soft}");
        let sock = s.iter().find(|x| x.starts_with("RcvbufErrors")).unwrap();
        assert!(sock.contains("already 16.8 MB"), "{sock}");
        assert!(!sock.contains("raise net.core.rmem_max"), "{sock}");
        // The same 3 drops when they are the whole loss: advice stands.
        let mut d3 = d.clone();
        d3.snmp.clear();
        let l3 = led(3, Path::Received, &[], &d3);
        assert!(sentences(&l3, &d3)[0].contains("netdev_max_backlog"));
        // A small buffer: raise it, with its size grouped.
        let mut small = d.clone();
        small.rmem_max = Some(212_992);
        let l4 = led(40_000, Path::Received, &[], &small);
        let sock = sentences(&l4, &small)
            .into_iter()
            .find(|x| x.starts_with("RcvbufErrors"))
            .unwrap();
        assert!(
            sock.contains("at most net.core.rmem_max (now 212,992): raise it"),
            "{sock}"
        );
        // Never "-w 4M": the board's receivers ask for 8 MiB whatever -w says.
        assert!(!sock.contains("-w 4M"), "{sock}");
        assert!(
            sock.contains("its receiver asks for 8 MiB whatever -w says"),
            "{sock}"
        );
    }

    fn gso_tbf() -> BoardDelta {
        let mut d = BoardDelta::default();
        d.ports.insert(
            "eth0".into(),
            PortDelta {
                qdiscs: vec![Qdisc {
                    kind: "tbf".into(),
                    handle: "8001:".into(),
                    parent: "root".into(),
                    drops: 8_839,
                    sent_packets: 41_640,
                    sent_bytes: 62_043_600,
                    backlog_bytes: 2_980,
                    qlen: 1,
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        d
    }

    #[test]
    fn drops_the_sender_was_told_of_are_dropped_locally_not_a_place_of_the_lost() {
        // The same TBF (8,839 skbs dropped, 41,640 datagrams out, 2 queued), the sender with
        // IP_RECVERR: it sent 41,642 and was refused 88,358 (ENOBUFS), 130,000 booked. The
        // receiver lost none of the numbered ones: no place, the local drops apart.
        let flow = Flow::udp(1448, false, Some(41_642)).with_dropped_locally(Some(88_358));
        let l = ledger(0, Path::Sent, &["eth0".into()], &gso_tbf(), &flow);
        assert!(l.places.is_empty(), "{l:?}");
        assert_eq!((l.dropped_locally, l.lost, l.unattributed), (88_358, 0, 0));
        let j = serde_json::to_value(&l).unwrap();
        assert_eq!(j["dropped_locally"], 88_358);
        let s = sentences(&l, &gso_tbf());
        assert!(
            s[0].starts_with(
                "88,358 datagrams were not sent: the board's own egress queue was full"
            ),
            "{s:?}"
        );
        // 358 of the qdisc's drops the sender was not told of (a batch TBF split and dropped
        // in part): those the receiver did lose, and they stay the qdisc's place.
        let flow = Flow::udp(1448, false, Some(42_000)).with_dropped_locally(Some(88_000));
        let l = ledger(358, Path::Sent, &["eth0".into()], &gso_tbf(), &flow);
        assert_eq!(l.places.len(), 1, "{l:?}");
        assert_eq!(
            (l.places[0].packets, l.places[0].unit.as_str()),
            (358, "datagrams")
        );
        assert_eq!((l.dropped_locally, l.unattributed), (88_000, 0));
        // The local drops outnumber the lost: their sentence first (the verdict's); else
        // the places of the lost come first.
        assert!(sentences(&l, &gso_tbf())[0].starts_with("88,000 datagrams were not sent"));
        let few = Flow::udp(1448, false, Some(130_000 - 10)).with_dropped_locally(Some(10));
        let l = ledger(88_348, Path::Sent, &["eth0".into()], &gso_tbf(), &few);
        let s = sentences(&l, &gso_tbf());
        assert!(
            s[0].contains("dropped by the board's own egress queue"),
            "{s:?}"
        );
        assert!(
            s.iter()
                .any(|x| x.starts_with("10 datagrams were not sent")),
            "{s:?}"
        );
        // A forwarded run's qdisc: the board's own sender is not in it.
        let l = ledger(0, Path::Forwarded, &["eth0".into()], &gso_tbf(), &flow);
        assert_eq!(l.dropped_locally, 0);
    }

    #[test]
    fn a_sending_run_s_gso_drops_become_datagrams() {
        let flow = Flow::udp(1448, false, Some(130_000));
        assert_eq!(flow.headers, 42);
        let l = ledger(88_360, Path::Sent, &["eth0".into()], &gso_tbf(), &flow);
        assert_eq!(l.places.len(), 1, "{l:?}");
        let q = &l.places[0];
        // 130,000 − 41,640 sent − 2 queued = 88,358 (the receiver lost 88,360).
        assert_eq!((q.packets, q.unit.as_str()), (88_358, "datagrams"));
        assert_eq!(
            (q.counted, q.counted_unit.as_deref()),
            (Some(8_839), Some("skbs"))
        );
        assert_eq!(l.unattributed, 2);
        assert_eq!(l.unit, "datagrams");
        let j = serde_json::to_value(&l).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"lost": 88360, "unit": "datagrams", "places": [{"place": "board_qdisc",
                "port": "eth0", "packets": 88358, "unit": "datagrams", "counted": 8839,
                "counted_unit": "skbs", "counter": "qdisc tbf drops on eth0"}], "unattributed": 2})
        );
        assert_eq!(
            headline(&l).as_deref(),
            Some("board_qdisc eth0 88,358, unattributed 2")
        );
        let s = sentences(&l, &gso_tbf());
        assert_eq!(s[0], "88,358 of 88,360 lost datagrams were dropped by the board's own egress queue (tbf on eth0); the qdisc counted 8,839 drops: one per skb, and a GSO batch of several datagrams is one skb unless the qdisc split it into segments (TBF splits a batch larger than its burst): the sender outran the link — lower -b or raise the shaper");
        assert_eq!(s[1], "2 of 88,360 lost datagrams are not on the board's counters: on the wire or at the peer");
        // A stock sender (one datagram per skb): 100,000 sent, 56,270 out, 4 queued; the
        // qdisc's 43,726 drops are datagrams already (the receiver lost 43,724).
        let mut d = gso_tbf();
        let q = &mut d.ports.get_mut("eth0").unwrap().qdiscs[0];
        (q.drops, q.sent_packets, q.sent_bytes, q.backlog_bytes) =
            (43_726, 56_270, 56_270 * 1490, 4 * 1490);
        let l = ledger(
            43_724,
            Path::Sent,
            &["eth0".into()],
            &d,
            &Flow::udp(1448, false, Some(100_000)),
        );
        assert_eq!(
            (l.places[0].packets, l.places[0].unit.as_str()),
            (43_726, "datagrams")
        );
        assert_eq!(l.unattributed, 0);
        assert!(l.overcounted());
        assert!(
            !sentences(&l, &d)[0].contains("the qdisc counted"),
            "same unit: nothing to say"
        );
    }

    #[test]
    fn a_qdisc_that_cannot_be_converted_stays_in_skbs_and_says_so() {
        // The run's datagram size unknown (or counters stored before the qdisc's sent bytes
        // were kept): the 12,001 drops stay skbs and are not added up as datagrams.
        let l = led(
            12_345,
            Path::Sent,
            &["eth0".into(), "eth1".into()],
            &board(),
        );
        assert_eq!(l.places.len(), 1, "{l:?}");
        let q = &l.places[0];
        assert_eq!(
            (q.place.as_str(), q.packets, q.unit.as_str()),
            ("board_qdisc", 12_001, "skbs")
        );
        assert_eq!(q.counter, "qdisc tbf drops on eth0");
        assert_eq!(l.attributed(), 0);
        assert_eq!(l.at_least(), 12_001);
        assert_eq!(l.unattributed, 12_345);
        assert_eq!(
            headline(&l).as_deref(),
            Some("board_qdisc eth0 12,001 skbs, unattributed 12,345")
        );
        let s = sentences(&l, &board());
        assert_eq!(s[0], "the board's own egress queue (tbf on eth0) dropped 12,001 skbs — its unit: a GSO batch of several datagrams is one skb, and its datagrams could not be told from the counters, so they hold 12,001 or more of the 12,345 lost datagrams: the sender outran the link — lower -b or raise the shaper");
        assert_eq!(s[1], "12,345 of 12,345 lost datagrams are not on any counter in datagrams: part or all of them are in the skbs counted above, the rest on the wire");
        // Sizes known but the qdisc's sent counters not read (a row from before): skbs.
        let flow = Flow::udp(1448, false, Some(130_000));
        let l = ledger(12_345, Path::Sent, &["eth0".into()], &board(), &flow);
        assert_eq!(l.places[0].unit, "skbs");
        // Figures that do not add up (fewer datagrams missing than skbs dropped: other
        // traffic through the qdisc): skbs, not a guess.
        let l = ledger(
            88_360,
            Path::Sent,
            &["eth0".into()],
            &gso_tbf(),
            &Flow::udp(1448, false, Some(45_000)),
        );
        assert_eq!(
            (l.places[0].packets, l.places[0].unit.as_str()),
            (8_839, "skbs")
        );
        // A run on two ports: which one the sender's datagrams went out of is not known.
        let mut two = gso_tbf();
        two.ports.insert("eth1".into(), PortDelta::default());
        let l = ledger(
            88_360,
            Path::Sent,
            &["eth0".into(), "eth1".into()],
            &two,
            &flow,
        );
        assert_eq!(l.places[0].unit, "skbs");
        // A ledger stored before units were said reads back, counting as it did.
        let old: LossLedger = serde_json::from_value(serde_json::json!({"lost": 10, "places": [
            {"place": "board_qdisc", "port": "eth0", "packets": 4, "counter": "qdisc tbf drops on eth0"}],
            "unattributed": 6})).unwrap();
        assert_eq!(
            (
                old.unit.as_str(),
                old.places[0].unit.as_str(),
                old.attributed()
            ),
            ("", "", 4)
        );
    }

    #[test]
    fn a_receiving_run_names_the_nic_ring_and_the_socket_and_clamps() {
        let l = led(14_000, Path::Received, &["eth1".into()], &board());
        let places: Vec<(&str, u64)> = l
            .places
            .iter()
            .map(|p| (p.place.as_str(), p.packets))
            .collect();
        assert_eq!(places, [("board_socket", 9870), ("board_nic", 5000)]);
        assert_eq!(l.unattributed, 0, "14,870 counted > 14,000 lost: clamped");
        assert!(l.overcounted());
        let s = sentences(&l, &board());
        assert_eq!(s[0], "RcvbufErrors +9,870: the board's socket buffer overflowed — its receiver asks for 8 MiB whatever -w says, so the receiving thread did not read fast enough: look at its core in CPU per core, or lower -b; a daemon without CAP_NET_ADMIN gets at most net.core.rmem_max (now 212,992): raise it");
        assert_eq!(s[1], "rx_missed_errors +5,000 on eth1: the NIC's ring (256 of max 4096) overflowed — `ethtool -G eth1 rx 4096`");
        assert!(s[2].contains("traffic outside the run"), "{s:?}");
    }

    /// Issue 38's truth set (tests/truth.rs g): netperfd -s stopped for 1.2 s while netperfd
    /// sent 200 Mbit/s in GSO batches; its socket (UDP_GRO on) took each batch whole, so
    /// UdpRcvbufErrors moved by 743 for 9,659 lost datagrams. The place is in datagrams by
    /// conservation (what arrived on the port less what the receiver got), with the kernel's
    /// 743 skbs kept; a receiver count that does not add up keeps the counter as it is.
    #[test]
    fn a_socket_that_took_gro_batches_counts_datagrams() {
        use crate::board::counters::Traffic;
        let mut d = BoardDelta::default();
        d.snmp.insert("Udp.RcvbufErrors".into(), 743);
        // 51,831 datagrams arrived in 3,990 skbs (headers once each) and 60 control packets
        // of 66 bytes.
        d.ports.insert(
            "eth0".into(),
            PortDelta {
                traffic: Some(Traffic {
                    rx_bytes: 3_990 * 42 + 51_831 * 1448 + 60 * 66,
                    rx_packets: 4_050,
                    tx_bytes: 9_000,
                    tx_packets: 60,
                }),
                ..Default::default()
            },
        );
        let flow = Flow::udp(1448, false, None).with_received(Some(42_172));
        let l = ledger(9_659, Path::Received, &["eth0".into()], &d, &flow);
        let p = &l.places[0];
        assert_eq!(p.place, "board_socket");
        // 51,831 + 60 × 24 / 1448 (0) − 42,172 = 9,659.
        assert_eq!((p.packets, p.unit.as_str()), (9_659, DATAGRAMS));
        assert_eq!(
            (p.counted, p.counted_unit.as_deref()),
            (Some(743), Some(SKBS))
        );
        assert_eq!(l.unattributed, 0);
        assert_eq!(
            sentences(&l, &d)[0],
            "RcvbufErrors +743 skbs = 9,659 datagrams (one per skb: a GRO batch of several datagrams is one skb): the board's socket buffer overflowed — its receiver asks for 8 MiB whatever -w says, so the receiving thread did not read fast enough: look at its core in CPU per core, or lower -b; a daemon without CAP_NET_ADMIN gets at most net.core.rmem_max: raise it"
        );
        // One datagram per skb: the same figure either way.
        assert_eq!(
            socket_datagrams(743, (743 * 1490, 743), 0, &flow.with_received(Some(0))),
            Some(743)
        );
        // Fewer datagrams missing than skbs dropped: the figures do not add up.
        let odd = Flow::udp(1448, false, None).with_received(Some(51_500));
        let l = ledger(9_659, Path::Received, &["eth0".into()], &d, &odd);
        assert_eq!((l.places[0].packets, l.places[0].counted), (743, None));
        // No receiver count: as counted.
        let l = ledger(
            9_659,
            Path::Received,
            &["eth0".into()],
            &d,
            &Flow::udp(1448, false, None),
        );
        assert_eq!((l.places[0].packets, l.places[0].counted), (743, None));
        // The peer's socket keeps its own count too.
        let wire = peer_drops("receive", &["eth0".into()], &d, &flow);
        let l = with_peer(finish(9_659, Vec::new()), &wire);
        // Its advice is a netperfd receiver's (8 MiB whatever -w), never "-w 4M".
        let said = sentences(&l, &BoardDelta::default());
        assert!(
            said[0].starts_with("the peer's RcvbufErrors +743 skbs"),
            "{said:?}"
        );
        assert!(!said[0].contains("-w 4M"), "{}", said[0]);
        assert!(
            said[0].contains("its netperfd receiver asks for 8 MiB whatever -w says"),
            "{}",
            said[0]
        );
        assert_eq!(
            (
                l.places[0].place.as_str(),
                l.places[0].packets,
                l.places[0].counted
            ),
            ("peer_socket", 9_659, Some(743))
        );
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
        let l = led(
            20_000,
            Path::of(&RunDirection::Send, true),
            &["eth1".into(), "eth0".into()],
            &d,
        );
        let places: Vec<(&str, Option<&str>, u64, &str)> = l
            .places
            .iter()
            .map(|p| {
                (
                    p.place.as_str(),
                    p.port.as_deref(),
                    p.packets,
                    p.unit.as_str(),
                )
            })
            .collect();
        assert_eq!(
            places,
            [
                ("board_qdisc", Some("eth0"), 12_001, "skbs"),
                ("board_nic", Some("eth1"), 5000, "datagrams"),
                ("board_softnet", None, 4, "datagrams")
            ]
        );
        assert_eq!(l.places[2].counter, "softnet_stat dropped (CPU 1)");
        assert_eq!(l.unattributed, 20_000 - 5004);
        assert_eq!(Path::of(&RunDirection::Receive, false), Path::Received);
        assert_eq!(Path::of(&RunDirection::Bidir, false), Path::Both);
    }

    #[test]
    fn a_forwarded_run_s_qdisc_drops_from_what_arrived_on_the_other_port() {
        use crate::board::counters::Traffic;
        // PC1 (netperfd, GSO) → eth1 in → eth0 out through a TBF. eth1 received 9,600 skbs
        // holding 95,000 datagrams of 1,448 bytes (each skb with its 42 header bytes once) and
        // 400 small control packets (66 bytes); the TBF sent 80,000 segments and dropped
        // 1,500 skbs; softnet dropped 4.
        let mut d = gso_tbf();
        let q = &mut d.ports.get_mut("eth0").unwrap().qdiscs[0];
        (q.drops, q.sent_packets, q.sent_bytes, q.backlog_bytes) =
            (1_500, 80_000, 80_000 * 1490, 0);
        d.ports.insert(
            "eth1".into(),
            PortDelta {
                traffic: Some(Traffic {
                    rx_bytes: 9_600 * 42 + 95_000 * 1448 + 400 * 66,
                    rx_packets: 10_000,
                    tx_bytes: 30_000,
                    tx_packets: 400,
                }),
                ..Default::default()
            },
        );
        d.softnet = vec![Softnet {
            cpu: 0,
            processed: 10_000,
            dropped: 4,
            time_squeeze: 0,
        }];
        let ports = ["eth1".to_string(), "eth0".to_string()];
        let l = ledger(
            15_010,
            Path::Forwarded,
            &ports,
            &d,
            &Flow::udp(1448, false, None),
        );
        let q = l
            .places
            .iter()
            .find(|p| p.place == "board_qdisc")
            .expect("qdisc");
        // 95,000 + 400×24/1448 (6) − 4 softnet − 80,000 sent = 15,002 datagrams.
        assert_eq!(
            (q.packets, q.unit.as_str(), q.counted),
            (15_002, "datagrams", Some(1_500))
        );
        assert_eq!(l.unattributed, 15_010 - 15_002 - 4);
        // Without the other port's traffic (a row from before it was read): skbs.
        d.ports.get_mut("eth1").unwrap().traffic = None;
        let l = ledger(
            15_010,
            Path::Forwarded,
            &ports,
            &d,
            &Flow::udp(1448, false, None),
        );
        assert_eq!(l.places[0].unit, "skbs");
    }

    /// The tryout's fragment loss: `-l 8000` datagrams whose fragments filled the
    /// receiver's reassembly memory; lost counted from the sender's count (9,371 of 9,378).
    /// Ip ReasmFails moved by 28,000 (one per fragment it could not queue): a place in its
    /// own unit, named, never added up with datagrams; a peer's too.
    #[test]
    fn reassembly_failures_are_a_place_in_their_own_unit() {
        let mut d = BoardDelta::default();
        d.snmp.insert("Ip.ReasmFails".into(), 28_000);
        let l = led(9_371, Path::Received, &["eth0".into()], &d);
        assert_eq!(l.places.len(), 1);
        let p = &l.places[0];
        assert_eq!(
            (
                p.place.as_str(),
                p.packets,
                p.unit.as_str(),
                p.counter.as_str()
            ),
            (
                "board_reassembly",
                28_000,
                REASSEMBLY_FAILURES,
                "Ip ReasmFails"
            )
        );
        assert!(!p.in_datagrams());
        assert_eq!(
            (l.attributed(), l.at_least(), l.unattributed),
            (0, 0, 9_371)
        );
        assert!(!l.overcounted() && !l.has_skbs());
        assert_eq!(
            headline(&l).as_deref(),
            Some("board_reassembly 28,000 reassembly failures, unattributed 9,371")
        );
        let said = sentences(&l, &d);
        assert!(
            said[0].starts_with("Ip ReasmFails +28,000 (its unit: one per fragment"),
            "{said:?}"
        );
        // Sending: the board's reassembly is not on the path.
        assert!(led(9_371, Path::Sent, &["eth0".into()], &d)
            .places
            .is_empty());
        // The peer's (its netperfd receiver's `netperfd_drops`).
        let peer = peer_drops("receive", &["eth0".into()], &d, &Flow::default());
        let l = with_peer(
            led(9_371, Path::Sent, &["eth0".into()], &BoardDelta::default()),
            &peer,
        );
        assert_eq!(l.places[0].place, "peer_reassembly");
        assert_eq!(l.places[0].unit, REASSEMBLY_FAILURES);
        assert_eq!(l.unattributed, 9_371);
    }

    #[test]
    fn nothing_on_the_board_says_so() {
        let l = led(
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
        let none = led(0, Path::Both, &[], &BoardDelta::default());
        assert_eq!(headline(&none), None);
        assert!(sentences(&none, &BoardDelta::default()).is_empty());
    }

    #[test]
    fn the_peers_drops_become_peer_places() {
        // What a netperfd server that sent through its own TBF puts in its results: it sent
        // 60,000 datagrams in GSO batches, its TBF sent 50,010 segments and dropped 999 skbs.
        let mut pc = BoardDelta::default();
        pc.ports.insert(
            "eth0".into(),
            PortDelta {
                qdiscs: vec![Qdisc {
                    kind: "tbf".into(),
                    handle: "8001:".into(),
                    parent: "root".into(),
                    drops: 999,
                    sent_packets: 50_010,
                    sent_bytes: 50_010 * 1490,
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        pc.snmp.insert("Udp.RcvbufErrors".into(), 7);
        let flow = Flow::udp(1448, false, Some(60_000));
        let wire = peer_drops("send", &["eth0".into()], &pc, &flow);
        assert_eq!(
            wire,
            serde_json::json!([{"place": "qdisc", "port": "eth0", "packets": 9990,
                "unit": "datagrams", "counted": 999, "counted_unit": "skbs",
                "counter": "qdisc tbf drops on eth0"}])
        );
        // The board received and lost 10,000, none on its own counters.
        let board = led(
            10_000,
            Path::Received,
            &["eth0".into()],
            &BoardDelta::default(),
        );
        let mut junk = wire.as_array().unwrap().clone();
        junk.push(serde_json::json!({"place": "board_qdisc", "packets": 5, "counter": "x"}));
        junk.push(serde_json::json!({"place": "socket", "packets": "many"}));
        junk.push(serde_json::json!("not a place"));
        let l = with_peer(board.clone(), &serde_json::Value::Array(junk));
        assert_eq!(l.places.len(), 1, "{l:?}");
        assert_eq!(l.places[0].place, "peer_qdisc");
        assert_eq!(l.places[0].packets, 9_990);
        assert_eq!(l.places[0].counted, Some(999));
        assert_eq!(l.unattributed, 10);
        assert_eq!(
            headline(&l).as_deref(),
            Some("peer_qdisc eth0 9,990, unattributed 10")
        );
        assert_eq!(
            sentences(&l, &BoardDelta::default()),
            [
                "9,990 of 10,000 lost datagrams were dropped by the peer's own egress queue (tbf on its eth0); the qdisc counted 999 drops: one per skb, and a GSO batch of several datagrams is one skb unless the qdisc split it into segments (TBF splits a batch larger than its burst): the peer's sender outran its link — lower -b or raise the peer's shaper",
                "not on the board: none of the board's drop counters moved; 10 of 10,000 lost datagrams are on neither side's counters: on the wire",
            ]
        );
        // An older netperfd peer says no unit: its qdisc drops are skbs, its socket's
        // datagrams; a unit it should not send is taken as skbs.
        let old = serde_json::json!([
            {"place": "qdisc", "port": "eth0", "packets": 999, "counter": "qdisc tbf drops on eth0"},
            {"place": "socket", "packets": 7, "counter": "Udp RcvbufErrors"},
            {"place": "nic", "packets": 3, "unit": "furlongs", "counter": "rx_missed_errors on eth0"}]);
        let l = with_peer(board, &old);
        let units: Vec<(&str, &str)> = l
            .places
            .iter()
            .map(|p| (p.place.as_str(), p.unit.as_str()))
            .collect();
        assert_eq!(
            units,
            [
                ("peer_qdisc", "skbs"),
                ("peer_socket", "datagrams"),
                ("peer_nic", "skbs")
            ]
        );
        assert_eq!(l.unattributed, 10_000 - 7);
        // A peer that sent nothing (a stock one) or an empty list changes nothing.
        let same = with_peer(
            led(500, Path::Received, &[], &BoardDelta::default()),
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
            other_traffic(&d, run, 1, None),
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
        let extra = other_traffic(&d, run, 1, None).expect("other traffic");
        // 50,620,000 - 37,500,000 - 34,650 × 90 = 10,001,500.
        assert_eq!(extra, 10_001_500);
        assert_eq!(
            other_traffic_sentence(extra, run),
            "Other traffic at the same time: the board's ports moved 10.0 MB beyond the run's own 37.5 MB — the counters here are host-wide and may include it"
        );
        // The same ports for a forwarded run of 25 MB (in on one port, out on the other):
        // nothing beyond it.
        assert_eq!(other_traffic(&d, 25_000_000, 2, None), None);
        // Not read (runs stored before): nothing said.
        assert_eq!(other_traffic(&BoardDelta::default(), run, 1, None), None);
    }

    /// Issue 38's truth set (tests/truth.rs i): beside a UDP run of 40 Mbit/s the board
    /// sent in GSO batches, pc1 sent 2,590 datagrams of 1,448 bytes (3,859,100 bytes on
    /// the port) to the board's same port. Allowing 90 bytes a packet of every port (the
    /// other flow's too) said 3.37 MB; its headers counted once a batch and the other
    /// flow's bytes left whole, the figure is the other flow's (3,860,815 for 3,859,751).
    #[test]
    fn other_traffic_beside_a_udp_run_counts_the_run_s_headers_per_batch() {
        use crate::board::counters::Traffic;
        let mut d = BoardDelta::default();
        // eth0's traffic: rx bytes, rx packets, tx bytes, tx packets.
        let eth0 = |rx_bytes, rx_packets, tx_bytes, tx_packets| PortDelta {
            traffic: Some(Traffic {
                rx_bytes,
                rx_packets,
                tx_bytes,
                tx_packets,
            }),
            ..Default::default()
        };
        // The run: 10,360 datagrams (15,001,280 bytes) in 1,036 batches out of eth0, 12
        // control packets (2,000 bytes) each way; the other flow in on eth0 with its 6
        // control packets (600 bytes).
        let other = 2_590 * 1_490 + 600;
        d.ports.insert(
            "eth0".into(),
            eth0(
                2_000 + other,
                12 + 2_596,
                15_001_280 + 1_036 * 42 + 2_000,
                1_036 + 12,
            ),
        );
        let ports = ["eth0".to_string()];
        let frames = RunFrames {
            datagrams: 10_360,
            headers: 42,
            path: Path::Sent,
            ports: &ports,
            sender_skbs: None,
        };
        let extra = other_traffic(&d, 15_001_280, 1, Some(&frames)).expect("other traffic");
        // The other flow's 3,859,700 bytes, with the run's 4,000 control bytes and 12 × 42
        // of them taken for headers: within 0.1 %.
        assert_eq!(extra, other + 4_000 - 12 * 42);
        assert!((extra as f64 - other as f64).abs() < 0.002 * other as f64);
        // The same port by the old allowance: 7 % short.
        let old = other_traffic(&d, 15_001_280, 1, None).expect("old figure");
        assert!(old < other * 93 / 100, "{old}");
        // The other flow leaving eth0 the run's way (the board's stock server sending to
        // pc1 beside the run): the port's 2,596 packets more are not the run's. Without the
        // sender's own skb count each took a run datagram's headers: 2.8 % short.
        let run_out = 15_001_280 + 1_036 * 42 + 2_000;
        d.ports.insert(
            "eth0".into(),
            eth0(2_000, 12, run_out + other, 1_036 + 12 + 2_596),
        );
        let before = other_traffic(&d, 15_001_280, 1, Some(&frames)).expect("other traffic");
        assert_eq!(before, other + 4_000 - (12 + 2_596) * 42);
        let sent = RunFrames {
            sender_skbs: Some(1_036),
            ..frames
        };
        assert_eq!(
            other_traffic(&d, 15_001_280, 1, Some(&sent)),
            Some(other + 4_000)
        );
        // A port that counts segments (as many packets as datagrams or more): the sender's
        // skbs say nothing of it; one header set per datagram.
        d.ports.insert(
            "eth0".into(),
            eth0(
                2_000,
                12,
                15_001_280 + 10_360 * 42 + 2_000 + other,
                10_360 + 12 + 2_596,
            ),
        );
        assert_eq!(
            other_traffic(&d, 15_001_280, 1, Some(&sent)),
            Some(other + 4_000)
        );
        // A stock sender's run the board received (one datagram per packet), the other
        // flow in beside it: each run datagram's headers, none of the other flow's.
        d.ports.insert(
            "eth0".into(),
            eth0(10_360 * 1_490 + other, 10_360 + 2_596, 2_000, 12),
        );
        let frames = RunFrames {
            path: Path::Received,
            ..frames
        };
        assert_eq!(
            other_traffic(&d, 15_001_280, 1, Some(&frames)),
            Some(other + 2_000)
        );
        // Nothing beside the run: nothing said.
        d.ports
            .insert("eth0".into(), eth0(10_360 * 1_490, 10_360, 2_000, 12));
        assert_eq!(other_traffic(&d, 15_001_280, 1, Some(&frames)), None);
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
