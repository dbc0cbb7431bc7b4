//! One view per kind of run: what the run page, `GET /api/runs/N`, `netperfd runs show` and the
//! History list say about a run — its title, who ran it, the peer, the equivalent command lines
//! (ours, and the stock tool's a PC would run), the headline cards and the kind's own facts.
//! [`view`] matches on [`RunKind`] without a catch-all arm, so a new kind of run does not
//! compile until it says how it is shown.

use crate::engine::iperf3::wire::{Direction, Params, Protocol, DEFAULT_TCP_BLKSIZE};
use crate::model::display;
use crate::model::time::fmt_time;
use crate::model::{RunDirection, RunKind, RunProtocol, RunRole};
use crate::results::forward_params::{ForwardParams, MonitorParams};
use crate::results::forward_summary::BoardFigures;
use crate::results::iperf2_summary::{Iperf2Params, Iperf2Summary};
use crate::results::latency::{LatencyResult, Phase, ProbeTotals, RttStats};
use crate::results::multi_summary::MultiParams;
use crate::results::rfc2544_params::Rfc2544Params;
use crate::results::traffic_summary::{
    HttpGetParams, HttpGetSummary, HttpServeParams, HttpServeSummary, TcpRawSummary, Transfer,
};
use crate::store::RunRow;
use serde::Serialize;
use serde_json::Value;

/// A headline figure: `label` ("Receiver bitrate"), `value` as shown ("941.5 Mbit/s", "—"
/// when unknown), and a stable `id` the live page updates (`sum-sender`, `sum-receiver`,
/// `sum-loss`, or a kind's own).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Card {
    pub id: String,
    pub label: String,
    pub value: String,
}

/// How a run is shown.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct KindView {
    pub kind: RunKind,
    /// "iperf3", "iperf 2", "multi-port", …
    pub kind_label: &'static str,
    /// One line: "TCP send, 2 streams", "monitor of eth0, eth1", "HTTP download of 1 GB".
    pub title: String,
    /// Who ran it: "this board ran the client", "a peer ran iperf3 -c against this board", …
    pub role_text: String,
    /// The other end as host:port, "—" when there is none (monitor-only runs).
    pub peer: String,
    /// The board's port and address ("eth0 (192.0.2.1)"), "—" when unknown.
    pub local: String,
    /// The command line that does this run with netperfd (empty when a peer started it).
    pub command: String,
    /// The stock tool's command line: what a PC ran (server kinds) or would run by hand.
    pub stock_command: Option<String>,
    /// Headline cards, most important first.
    pub cards: Vec<Card>,
    /// The kind's own facts as (label, value) rows.
    pub facts: Vec<(String, String)>,
}

fn card(id: &str, label: &str, value: String) -> Card {
    Card {
        id: id.into(),
        label: label.into(),
        value,
    }
}

fn rate_or_dash(v: Option<f64>) -> String {
    v.map(display::rate).unwrap_or_else(|| "—".into())
}

/// `x` when it is a number (a stored `null`, NaN or an infinity is none).
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn plural(n: u64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The board's address as a peer would type it: the run's local address, else `<board>`.
fn board_addr(r: &RunRow) -> String {
    if r.local_host.is_empty() {
        "<board>".into()
    } else if r.local_host.contains(':') {
        format!("[{}]", r.local_host)
    } else {
        r.local_host.clone()
    }
}

/// The sender/receiver cards every throughput kind has: bitrates, then retransmits (TCP) or
/// lost/total and jitter (UDP).
fn throughput_cards(r: &RunRow) -> Vec<Card> {
    let mut v = vec![
        card("sum-sender", "Sender bitrate", rate_or_dash(r.sender_bps)),
        card(
            "sum-receiver",
            "Receiver bitrate",
            rate_or_dash(r.receiver_bps),
        ),
    ];
    if r.protocol == RunProtocol::Udp {
        v.push(card(
            "sum-loss",
            "Lost/Total (receiver)",
            match (r.lost_packets, r.total_packets, r.lost_percent) {
                // Grouped and spaced: at 390 px "87450/129310" broke inside a number.
                (Some(l), Some(t), Some(p)) => format!(
                    "{} / {} ({p:.2} %)",
                    display::count(l.max(0) as u64),
                    display::count(t.max(0) as u64)
                ),
                _ => "—".into(),
            },
        ));
        v.push(card(
            "sum-jitter",
            "Jitter",
            r.jitter_ms
                .map(|j| format!("{j:.3} ms"))
                .unwrap_or_else(|| "—".into()),
        ));
    } else {
        v.push(card(
            "sum-retr",
            "Retransmits",
            r.retransmits
                .map(|x| x.to_string())
                .unwrap_or_else(|| "—".into()),
        ));
    }
    v
}

/// Cards of a transfer (HTTP, raw TCP): goodput and bytes.
/// A traffic run's Goodput and Transfer cards: the row's figures, else its summary's `t`.
fn transfer_cards(r: &RunRow, t: &Transfer) -> Vec<Card> {
    let bps = r.receiver_bps.or(r.sender_bps).or(t.bits_per_second);
    let bytes = r.bytes.map(|b| b as f64).or(t.bytes.map(|b| b as f64));
    vec![
        card("sum-receiver", "Goodput", rate_or_dash(bps)),
        card(
            "sum-bytes",
            "Transfer",
            bytes.map(display::size).unwrap_or_else(|| "—".into()),
        ),
    ]
}

/// One stock iperf3 client option as a test's parameters spell it: `value` gives the text
/// after the flag (`Some("")` for a bare flag), or `None` when the test did not use it.
pub(crate) struct Iperf3Opt {
    /// The flag as iperf3's `--help` spells it (`-b`, `--bidir`).
    pub flag: &'static str,
    /// The option's value in `p`, or `None` when it is absent (the stock default).
    pub value: fn(&Params) -> Option<String>,
}

/// Every option of a test's [`Params`] that changes what stock iperf3 measures, in the order
/// the command line prints them. One table prints the "run it with stock iperf3" line; a
/// round-trip test (`cmd::iperf`) parses each printed line with the real command line and
/// must get the same parameters back. Left out on purpose: `--title`, `--extra-data` and
/// `--get-server-output` (they change no number).
pub(crate) const IPERF3_OPTS: &[Iperf3Opt] = &[
    Iperf3Opt {
        flag: "-u",
        value: |p| (p.protocol == Protocol::Udp).then(String::new),
    },
    Iperf3Opt {
        flag: "-t",
        value: |p| (p.num == 0 && p.blockcount == 0 && p.time > 0).then(|| p.time.to_string()),
    },
    Iperf3Opt {
        flag: "-n",
        value: |p| (p.num > 0).then(|| p.num.to_string()),
    },
    Iperf3Opt {
        flag: "-k",
        value: |p| (p.blockcount > 0).then(|| p.blockcount.to_string()),
    },
    Iperf3Opt {
        flag: "-P",
        value: |p| (p.parallel != 1).then(|| p.parallel.to_string()),
    },
    Iperf3Opt {
        flag: "-R",
        value: |p| (p.direction == Direction::Receive).then(String::new),
    },
    Iperf3Opt {
        flag: "--bidir",
        value: |p| (p.direction == Direction::Bidir).then(String::new),
    },
    Iperf3Opt {
        // Always for UDP: its stock default is 1 Mbit/s, so an unlimited test says `-b 0`.
        flag: "-b",
        value: |p| {
            let udp = p.protocol == Protocol::Udp;
            (udp || p.bandwidth > 0 || p.burst > 0).then(|| {
                let rate = iperf3_rate_arg(p.bandwidth);
                if p.burst > 0 {
                    format!("{rate}/{}", p.burst)
                } else {
                    rate
                }
            })
        },
    },
    Iperf3Opt {
        // A UDP datagram size always (the stock default comes from the path's MSS); a TCP
        // block size when it is not the 128 KiB default.
        flag: "-l",
        value: |p| {
            let tcp_default = p.protocol != Protocol::Udp && p.len as usize == DEFAULT_TCP_BLKSIZE;
            (p.len > 0 && !tcp_default).then(|| p.len.to_string())
        },
    },
    Iperf3Opt {
        flag: "-w",
        value: |p| p.window.map(|w| w.to_string()),
    },
    Iperf3Opt {
        flag: "-M",
        value: |p| p.mss.map(|m| m.to_string()),
    },
    Iperf3Opt {
        flag: "-N",
        value: |p| (p.nodelay).then(String::new),
    },
    Iperf3Opt {
        flag: "-S",
        value: |p| (p.tos > 0).then(|| p.tos.to_string()),
    },
    Iperf3Opt {
        flag: "-C",
        value: |p| p.congestion.clone(),
    },
    Iperf3Opt {
        flag: "-O",
        value: |p| (p.omit > 0).then(|| p.omit.to_string()),
    },
    Iperf3Opt {
        flag: "--fq-rate",
        value: |p| (p.fq_rate > 0).then(|| iperf3_rate_arg(p.fq_rate)),
    },
    Iperf3Opt {
        flag: "-Z",
        value: |p| (p.zerocopy).then(String::new),
    },
    Iperf3Opt {
        flag: "--skip-rx-copy",
        value: |p| (p.skip_rx_copy).then(String::new),
    },
    Iperf3Opt {
        flag: "--udp-counters-64bit",
        value: |p| (p.udp_counters_64bit).then(String::new),
    },
    Iperf3Opt {
        flag: "--repeating-payload",
        value: |p| (p.repeating_payload).then(String::new),
    },
    Iperf3Opt {
        flag: "--dont-fragment",
        value: |p| (p.dont_fragment).then(String::new),
    },
];

/// The iperf3 flags of `p` after `-c HOST` (` -u -b 100M -l 1448`), from [`IPERF3_OPTS`].
pub(crate) fn iperf3_flags(p: &Params) -> String {
    let mut c = String::new();
    for o in IPERF3_OPTS {
        if let Some(v) = (o.value)(p) {
            c.push(' ');
            c.push_str(o.flag);
            if !v.is_empty() {
                c.push(' ');
                c.push_str(&v);
            }
        }
    }
    c
}

/// A bitrate in bits/s as a user types it after iperf3's `-b` ([`crate::spec::suite::rate_word`]:
/// iperf3 reads K/M/G as powers of 1000 for rates, so 100000000 is "100M"); 0 stays "0"
/// (unlimited). iperf 2 lines keep bits/s: iperf 2 reads "M" as 2^20.
pub(crate) fn iperf3_rate_arg(bits: u64) -> String {
    if bits == 0 {
        return "0".into();
    }
    crate::spec::suite::rate_word(bits)
}

fn iperf3_view(r: &RunRow) -> KindView {
    let p: Option<Params> = serde_json::from_value(r.params.clone()).ok();
    let streams = p.as_ref().map(|p| p.parallel).unwrap_or(1).max(1);
    let flags = p.as_ref().map(iperf3_flags).unwrap_or_default();
    let (command, stock, role_text) = if r.role == RunRole::Server {
        let line = format!("iperf3 -c {} -p {}{flags}", board_addr(r), r.local_port);
        (
            String::new(),
            Some(line),
            "a peer ran iperf3 -c against this board".to_string(),
        )
    } else {
        let mut bind = String::new();
        if !r.local_host.is_empty() && r.bind_dev.is_some() {
            bind.push_str(&format!(" -B {}", r.local_host));
        }
        if let Some(d) = &r.bind_dev {
            bind.push_str(&format!(" --bind-dev {d}"));
        }
        let target = format!("-c {} -p {}", r.peer_host, r.peer_port);
        (
            format!("netperfd {target}{flags}{bind}"),
            Some(format!("iperf3 {target}{flags}{bind}")),
            "this board ran the client".to_string(),
        )
    };
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!(
            "{} {}, {}",
            r.protocol,
            r.direction,
            plural(streams as u64, "stream")
        ),
        role_text,
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: local_text(r),
        command,
        stock_command: stock,
        cards: throughput_cards(r),
        facts: Vec::new(),
    }
}

/// The board's ports of a run as every page shows them: a path through the board, in → out,
/// for a forwarding or RFC 2544 run ("eth0 → eth1"), a list otherwise ("eth0, eth1" for a
/// multi-port run's legs); `None` when the run was bound to none.
pub(crate) fn board_ports(r: &RunRow) -> Option<String> {
    let d = r.bind_dev.as_deref().filter(|d| !d.is_empty())?;
    let sep = match r.kind {
        RunKind::Forward | RunKind::Rfc2544 => " → ",
        RunKind::Iperf3
        | RunKind::Iperf2
        | RunKind::Multi
        | RunKind::Monitor
        | RunKind::HttpServe
        | RunKind::HttpGet
        | RunKind::TcpSink
        | RunKind::TcpSource
        | RunKind::Latency => ", ",
    };
    Some(
        d.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join(sep),
    )
}

fn local_text(r: &RunRow) -> String {
    match (board_ports(r), r.local_host.is_empty()) {
        (Some(d), false) => format!("{d} ({})", r.local_host),
        (Some(d), true) => d,
        (None, false) if r.local_port > 0 => format!("{}:{}", r.local_host, r.local_port),
        (None, false) => r.local_host.clone(),
        (None, true) => "—".into(),
    }
}

/// "One-way latency" facts of the receiving streams that measured it (iperf 2
/// `--trip-times`: `udp.latency_ms` of a UDP stream, per datagram; `latency_ms` of a TCP one,
/// per write), one per stream; avg/min/max/stdev in ms.
fn iperf2_latency_facts(s: &Iperf2Summary, facts: &mut Vec<(String, String)>) {
    for st in s.streams_of(false) {
        // UDP: per datagram, in the stream's UDP figures; TCP: per write (burst).
        let udp = st.udp.and_then(|u| u.latency_ms).map(|l| (l, "datagrams"));
        let Some((l, what)) = udp.or(st.latency_ms.map(|l| (l, "writes"))) else {
            continue;
        };
        let n = l.count;
        facts.push((
            format!("One-way latency [{}]", st.id),
            if n == 0 {
                format!("no {what} measured")
            } else {
                format!(
                    "avg {:.3} ms, min {:.3}, max {:.3}, stdev {:.3} over {n} {what} \
                     (--trip-times: needs the two clocks in sync)",
                    l.avg, l.min, l.max, l.stdev
                )
            },
        ));
    }
}

fn iperf2_view(r: &RunRow) -> KindView {
    let p = Iperf2Params::of_params(&r.params);
    let s = Iperf2Summary::of_summary(&r.summary).unwrap_or_default();
    let udp = if r.protocol == RunProtocol::Udp {
        " -u"
    } else {
        ""
    };
    let flags = format!("{udp}{}", p.flags());
    let streams = p.parallel.max(1);
    let (command, stock, role_text) = if r.role == RunRole::Server {
        (
            String::new(),
            Some(format!(
                "iperf -c {} -p {}{flags}",
                board_addr(r),
                r.local_port
            )),
            "a peer ran iperf -c (iperf 2) against this board".to_string(),
        )
    } else {
        let target = format!("-c {} -p {}", r.peer_host, r.peer_port);
        (
            format!("netperfd {target} --iperf2{flags}"),
            Some(format!("iperf {target}{flags}")),
            "this board ran the iperf 2 client".to_string(),
        )
    };
    let mut facts = Vec::new();
    let mut cards = throughput_cards(r);
    // Over TCP an iperf 2 server sends nothing back (docs/iperf2-wire.md): the board's
    // client never learns the receiver's figure, so there is no card to leave at "—".
    if r.role != RunRole::Server && r.protocol != RunProtocol::Udp && r.receiver_bps.is_none() {
        cards.retain(|c| c.id != "sum-receiver");
        facts.push((
            "Receiver bitrate".to_string(),
            "not reported: over TCP an iperf 2 server sends no report back (see the peer's output)"
                .to_string(),
        ));
    }
    iperf2_sum_facts(&s, &mut facts);
    iperf2_latency_facts(&s, &mut facts);
    for n in &s.notes {
        facts.push(("Note".to_string(), n.clone()));
    }
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!(
            "iperf 2 {} {}, {}",
            r.protocol,
            r.direction,
            plural(streams, "stream")
        ),
        role_text,
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: local_text(r),
        command,
        stock_command: stock,
        cards,
        facts,
    }
}

/// `--leg` arguments of a multi-port run, one per leg: `eth0=HOST[:PORT][,receive|bidir]
/// [,udp][,b=RATE][,P=N]`.
fn leg_args(p: &MultiParams) -> Vec<String> {
    p.legs
        .iter()
        .map(|l| {
            let mut a = format!(
                "{}={}",
                l.port.as_deref().unwrap_or("?"),
                if l.peer.is_empty() { "?" } else { &l.peer }
            );
            if l.peer_port != 5201 && l.peer_port != 0 {
                a.push_str(&format!(":{}", l.peer_port));
            }
            match l.direction {
                RunDirection::Receive => a.push_str(",receive"),
                RunDirection::Bidir => a.push_str(",bidir"),
                RunDirection::Send
                | RunDirection::Tradeoff
                | RunDirection::Mixed
                | RunDirection::Unset
                | RunDirection::Other(_) => {}
            }
            if let Some(p) = &l.params {
                if p.protocol == Protocol::Udp {
                    a.push_str(",udp");
                }
                if p.bandwidth > 0 {
                    a.push_str(&format!(",b={}", p.bandwidth));
                }
                if p.parallel > 1 {
                    a.push_str(&format!(",P={}", p.parallel));
                }
            }
            a
        })
        .collect()
}

fn multi_view(r: &RunRow) -> KindView {
    let params = MultiParams::of_params(&r.params);
    let legs = leg_args(&params);
    let mut command = String::from("netperfd multi");
    for l in &legs {
        command.push_str(&format!(" --leg {l}"));
    }
    if params.time > 0 {
        command.push_str(&format!(" -t {}", params.time));
    }
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!(
            "Multi-port run: {} started together, each bound to its port ({}, {})",
            plural(legs.len() as u64, "leg"),
            r.protocol,
            r.direction
        ),
        role_text: "this board ran every leg's client".into(),
        peer: r.peer_host.clone(),
        local: board_ports(r).unwrap_or_else(|| "—".into()),
        command,
        stock_command: None,
        cards: throughput_cards(r),
        facts: Vec::new(),
    }
}

/// A history row's "Retr / Loss" figure: a UDP run's loss in percent ("0.25 % loss"), else its
/// retransmits ("3"); `None` when the run did not store it (the caller shows its own dash).
/// The History page and `netperfd runs list` both show this.
pub(crate) fn retr_or_loss(r: &RunRow) -> Option<String> {
    if r.protocol == RunProtocol::Udp {
        r.lost_percent.map(|p| format!("{p:.2} % loss"))
    } else {
        r.retransmits.map(|x| x.to_string())
    }
}

/// Which way a forwarding run's traffic went through the board, in the page's terms: "PC1 →
/// PC2", "PC2 → PC1" (`-R`), "PC1 ⇄ PC2" (`--bidir`). The run's own direction word is the
/// peer agent's view ("receive" = PC1 received), which read as the board's (issue 22 item 11).
pub(crate) fn forward_direction(r: &RunRow) -> &'static str {
    match r.direction {
        RunDirection::Receive => "PC2 → PC1",
        RunDirection::Bidir => "PC1 ⇄ PC2",
        RunDirection::Send
        | RunDirection::Tradeoff
        | RunDirection::Mixed
        | RunDirection::Unset
        | RunDirection::Other(_) => "PC1 → PC2",
    }
}

fn forward_view(r: &RunRow) -> KindView {
    let p = ForwardParams::of_params(&r.params);
    let t = p.test.as_ref();
    let host = t.map_or(r.peer_host.as_str(), |t| t.host.as_str());
    let peer = p.peer.as_deref().unwrap_or("?");
    let ingress = p.ingress.as_deref().unwrap_or("?");
    let egress = p.egress.as_deref().unwrap_or("?");
    let mut command = format!(
        "netperfd forward --peer {peer} --token-file TOKEN --to {host} --in {ingress} --out {egress}"
    );
    if p.nat {
        command.push_str(" --nat");
    }
    let mut flags = String::new();
    if let Some(t) = t {
        if let Some(x) = t.time {
            flags.push_str(&format!(" -t {x}"));
        }
        if let Some(x) = t.parallel.filter(|x| *x > 1) {
            flags.push_str(&format!(" -P {x}"));
        }
        if t.reverse {
            flags.push_str(" -R");
        }
        if t.bidir {
            flags.push_str(" --bidir");
        }
        if t.udp {
            flags.push_str(" -u");
        }
        if let Some(b) = t.bitrate {
            flags.push_str(&format!(" -b {}", iperf3_rate_arg(b)));
        }
    }
    command.push_str(&flags);
    let mut stock = format!("iperf3 -c {host}");
    if let Some(port) = t.and_then(|t| t.port) {
        stock.push_str(&format!(" -p {port}"));
    }
    stock.push_str(&flags);
    let mut cards = throughput_cards(r);
    let board = BoardFigures::of(r);
    for (dir, v) in board.forwarded.iter().flat_map(|f| &f.0) {
        cards.push(card(
            &format!(
                "fwd-{}",
                dir.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
            ),
            &format!("Forwarded {dir}"),
            rate_or_dash(finite(v.bits_per_second)),
        ));
    }
    let mut facts = vec![
        (
            "Through the board".to_string(),
            format!(
                "{ingress} → {egress}{}",
                if p.nat {
                    ", NAT (MASQUERADE on the egress port) for the run"
                } else {
                    ""
                }
            ),
        ),
        ("Peer agent".to_string(), peer.to_string()),
        (
            "Stock tool runs on".to_string(),
            "the first PC: the peer agent starts it there".to_string(),
        ),
    ];
    if let Some(peak) = board.conntrack_peak() {
        facts.push(("Conntrack entries (peak)".into(), peak.to_string()));
    }
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!(
            "forwarding run: {} {} through the board",
            r.protocol,
            forward_direction(r)
        ),
        role_text: "a peer agent ran the client through this board; the board recorded its ports"
            .into(),
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: board_ports(r).unwrap_or_else(|| "—".into()),
        command,
        stock_command: Some(stock),
        cards,
        facts,
    }
}

fn monitor_view(r: &RunRow) -> KindView {
    let p = MonitorParams::of_params(&r.params);
    let ports = &p.ports;
    let mut command = format!("netperfd monitor --ports {}", ports.join(","));
    if let Some(t) = p.duration.filter(|t| *t > 0) {
        command.push_str(&format!(" -t {t}"));
    }
    let label = p.label.trim().to_string();
    if !label.is_empty() {
        command.push_str(&format!(" --label {label:?}"));
    }
    let mut cards = Vec::new();
    let board = BoardFigures::of(r);
    for (name, v) in board.ports.iter().take(4) {
        cards.push(card(
            &format!("port-{name}"),
            &format!("{name} rx / tx"),
            format!(
                "{} / {}",
                rate_or_dash(finite(v.rx_bits_per_second)),
                rate_or_dash(finite(v.tx_bits_per_second))
            ),
        ));
    }
    if let Some(peak) = board.conntrack_peak() {
        cards.push(card("conntrack", "Conntrack (peak)", peak.to_string()));
    }
    let mut facts = Vec::new();
    if !label.is_empty() {
        facts.push(("Label".to_string(), label));
    }
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!("monitor of {}", ports.join(", ")),
        role_text: "this board recorded its ports while others' traffic flowed".into(),
        peer: "—".into(),
        local: ports.join(", "),
        command,
        stock_command: Some(format!("bmon -p {}", ports.join(","))),
        cards,
        facts,
    }
}

/// With several streams in a direction (`-P`): each stream's bytes and bitrate, and the
/// [SUM] of them, as the stock tool prints it.
fn iperf2_sum_facts(s: &Iperf2Summary, facts: &mut Vec<(String, String)>) {
    let Some(sum) = &s.sum else {
        return;
    };
    for (d, sender, word) in [(&sum.receive, false, "received"), (&sum.send, true, "sent")] {
        let Some(d) = d else {
            continue;
        };
        let per: Vec<String> = s
            .streams_of(sender)
            .map(|x| {
                let b = x.bytes as f64;
                let rate = display::rate(x.bits_per_second());
                format!("[{}] {} at {rate}", x.id, display::size(b))
            })
            .collect();
        facts.push((format!("Per stream ({word})"), per.join("; ")));
        facts.push((
            format!("[SUM] {word}"),
            format!(
                "{} streams: {} ({} bytes) in {:.2} s at {}",
                d.streams,
                display::size(d.bytes as f64),
                d.bytes,
                d.seconds,
                display::rate(d.bits_per_second)
            ),
        ));
    }
}

/// The stock command line that downloads `url` with `conns` connections: `axel` for several
/// (into a scratch file under /tmp, removed with its `.st` state file afterwards — Debian 12's
/// axel 2.17 cannot write to `/dev/null`: "No state file, cannot resume!"), `curl` for one.
pub(crate) fn download_command(conns: u64, url: &str) -> String {
    if conns > 1 {
        let name = url
            .rsplit('/')
            .next()
            .filter(|n| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            })
            .unwrap_or("download");
        let file = format!("/tmp/netperfd-{name}");
        format!("axel -n {conns} -q -o {file} {url}; rm -f {file} {file}.st")
    } else {
        format!("curl -o /dev/null {url}")
    }
}

fn http_serve_view(r: &RunRow) -> KindView {
    let s = HttpServeSummary::of_summary(&r.summary).unwrap_or_default();
    let p = HttpServeParams::of_params(&r.params);
    let conns = s.connections.max(1);
    let path = p.path.as_deref().unwrap_or("/");
    let url = format!("http://{}:{}{}", board_addr(r), r.local_port, path);
    let stock = download_command(conns, &url);
    let mut facts = vec![("Payload".to_string(), path.to_string())];
    facts.push((
        "Connections".into(),
        format!(
            "{conns} at once ({} TCP connections, {} requests, {} cut short by the peer)",
            s.tcp_connections.unwrap_or(conns),
            s.requests,
            s.requests_cut_short
        ),
    ));
    if !s.user_agent.is_empty() {
        facts.push(("Client".into(), s.user_agent.clone()));
    }
    let t = s.transfer();
    transfer_facts(&t, &mut facts);
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!(
            "HTTP download of {path} from the board, {}",
            plural(conns, "connection")
        ),
        role_text: "a peer downloaded from the board's payload server".into(),
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: local_text(r),
        command: String::new(),
        stock_command: Some(stock),
        cards: transfer_cards(r, &t),
        facts,
    }
}

/// Facts every transfer kind shares: bytes and seconds, goodput per connection, the sum of
/// several raw streams, a note.
fn transfer_facts(t: &Transfer, v: &mut Vec<(String, String)>) {
    if let (Some(b), Some(sec)) = (t.bytes, t.seconds) {
        v.push((
            "Transfer".into(),
            format!("{} ({b} bytes) in {sec:.2} s", display::size(b as f64)),
        ));
    }
    if t.per_connection.len() > 1 {
        let text: Vec<String> = t
            .per_connection
            .iter()
            .map(|c| {
                format!(
                    "#{}: {} at {}",
                    c.id,
                    display::size(c.bytes as f64),
                    display::rate(c.bits_per_second)
                )
            })
            .collect();
        v.push(("Per connection".into(), text.join("; ")));
    }
    if let Some(sum) = t.sum {
        v.push((
            "[SUM]".into(),
            format!(
                "{} streams: {} ({} bytes) in {:.2} s at {}",
                sum.streams,
                display::size(sum.bytes as f64),
                sum.bytes,
                sum.seconds,
                display::rate(sum.bits_per_second)
            ),
        ));
    }
    if let Some(n) = t.note {
        v.push(("Note".into(), n.to_string()));
    }
}

fn http_get_view(r: &RunRow) -> KindView {
    let p = HttpGetParams::of_params(&r.params);
    let s = HttpGetSummary::of_summary(&r.summary).unwrap_or_default();
    let url = p.url;
    let conns = u64::from(p.connections.max(1));
    // What the download really used (a server without ranges gets one connection), as the
    // result says; the request's number until there is a result.
    let used = Some(s.connections)
        .filter(|n| *n > 0)
        .or(Some(s.per_connection.len() as u64).filter(|n| *n > 0))
        .unwrap_or(conns);
    let bind = r
        .bind_dev
        .as_ref()
        .map(|d| format!(" --bind-dev {d}"))
        .unwrap_or_default();
    let mut facts = vec![("URL".to_string(), url.clone())];
    if let Some(sz) = s.size {
        facts.push((
            "Size".into(),
            format!(
                "{} ({sz} bytes){}",
                display::size(sz as f64),
                if s.ranges == Some(false) {
                    " — the server does not do ranges: one connection"
                } else {
                    ""
                }
            ),
        ));
    }
    facts.push((
        "Connections".into(),
        if used == conns {
            conns.to_string()
        } else {
            format!("{used} used of the {conns} asked")
        },
    ));
    let t = s.transfer();
    transfer_facts(&t, &mut facts);
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!(
            "HTTP download by the board of {url}, {}",
            plural(used, "connection")
        ),
        role_text: "this board downloaded from a peer's HTTP server".into(),
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: local_text(r),
        command: format!("netperfd http-get {url} -n {conns}{bind}"),
        stock_command: Some(download_command(conns, &url)),
        cards: transfer_cards(r, &t),
        facts,
    }
}

fn tcp_raw_view(r: &RunRow, source: bool) -> KindView {
    let board = board_addr(r);
    let s = TcpRawSummary::of_summary(&r.summary).unwrap_or_default();
    let t = s.transfer();
    let mut facts = Vec::new();
    transfer_facts(&t, &mut facts);
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: match s.streams.filter(|n| *n > 1) {
            Some(n) if !source => format!("{n} raw TCP streams into the board's TCP sink"),
            _ if source => "raw TCP stream out of the board's TCP source".into(),
            _ => "raw TCP stream into the board's TCP sink".into(),
        },
        role_text: if source {
            "a peer read from the board's TCP source".into()
        } else {
            "a peer sent into the board's TCP sink".into()
        },
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: local_text(r),
        command: String::new(),
        stock_command: Some(if source {
            format!("nc -d {board} {} > /dev/null", r.local_port)
        } else {
            format!("nc {board} {} < /dev/zero", r.local_port)
        }),
        cards: transfer_cards(r, &t),
        facts,
    }
}

/// A latency figure, ms, as the page shows it: "0.52 ms", "104 ms" (whole from 10 ms), "—"
/// when there is none or it is not a number (a stored `null` reads as NaN).
fn ms_text(v: Option<f64>) -> String {
    v.and_then(finite)
        .map(|x| {
            if x.abs() < 10.0 {
                format!("{x:.2} ms")
            } else {
                format!("{x:.0} ms")
            }
        })
        .unwrap_or_else(|| "—".into())
}

/// A word of a latency summary as the page shows it: "?" for the empty word (a key absent
/// from summaries stored before it was kept).
fn word_or_unknown(w: &str) -> &str {
    if w.is_empty() {
        "?"
    } else {
        w
    }
}

/// Statistic `f` (ms) of the RTT set `t`, as [`ms_text`]; "—" without the set.
fn rtt_text(t: Option<&RttStats>, f: fn(&RttStats) -> f64) -> String {
    ms_text(t.map(f))
}

/// A latency run's cards from its summary `s` (`None`: none stored, the run failed first):
/// idle and loaded RTT, the increase, RPM, throughput (each direction's apart when the load
/// ran both), probe loss.
fn latency_cards(r: &RunRow, s: Option<&LatencyResult>) -> Vec<Card> {
    let none = Phase::default();
    let (idle, loaded) = s.map_or((&none, &none), |s| (&s.idle, &s.loaded));
    let dash = || "—".to_string();
    let mut cards = vec![
        card(
            "lat-idle-p50",
            "Idle RTT p50",
            rtt_text(idle.rtt_ms.as_ref(), |t| t.p50),
        ),
        card(
            "lat-loaded-p50",
            "Loaded RTT p50",
            rtt_text(loaded.rtt_ms.as_ref(), |t| t.p50),
        ),
        card(
            "lat-loaded-p99",
            "Loaded RTT p99",
            rtt_text(loaded.rtt_ms.as_ref(), |t| t.p99),
        ),
        card(
            "lat-increase",
            "Increase under load",
            s.and_then(|s| s.increase_ms)
                .map_or_else(dash, display::delta_ms),
        ),
        card(
            "lat-rpm",
            "RPM (loaded)",
            s.and_then(|s| s.rpm).map_or_else(dash, display::whole),
        ),
        card(
            "sum-receiver",
            "Throughput",
            rate_or_dash(loaded.bits_per_second.or(r.receiver_bps)),
        ),
    ];
    // Load both: each direction's goodput apart (up = the board sends).
    if let (Some(up), Some(down)) = (&loaded.up, &loaded.down) {
        cards.push(card(
            "lat-up-bps",
            "Up (board sends)",
            rate_or_dash(finite(up.bits_per_second)),
        ));
        cards.push(card(
            "lat-down-bps",
            "Down (board receives)",
            rate_or_dash(finite(down.bits_per_second)),
        ));
    }
    let loss = s.map_or_else(dash, |s| {
        let p = &s.probes;
        let pct = finite(p.lost_percent).unwrap_or(0.0);
        format!("{}/{} ({pct:.2} %)", p.lost, p.sent)
    });
    cards.push(card("lat-loss", "Probe loss", loss));
    cards
}

/// A latency run's facts from its summary `s` (`raw`: the same summary stored, for the
/// one-way delay rows): the verdict, each load direction, each phase's ICMP and TCP round
/// trips, one-way delays, the implied queue, the prober.
fn latency_facts(s: &LatencyResult, raw: &Value) -> Vec<(String, String)> {
    let mut facts = Vec::new();
    if !s.verdict.is_empty() {
        facts.push(("Verdict".to_string(), s.verdict.clone()));
    }
    facts.extend(load_facts(&s.loaded));
    for (ph, label) in [
        (&s.idle, "Idle"),
        (&s.loaded, "Loaded"),
        (&s.idle_after, "Idle after"),
    ] {
        facts.extend(phase_facts(ph, label));
    }
    facts.extend(crate::results::owd::facts(raw));
    facts.extend(queue_fact(s));
    facts.push(probes_fact(&s.probes));
    facts
}

/// The loaded phase's directions `loaded.up` (the board sends) and `loaded.down`: goodput
/// (bits/s) over N streams, the sending streams' TCP RTT (ms).
fn load_facts(loaded: &Phase) -> Vec<(String, String)> {
    let mut facts = Vec::new();
    for (leg, label) in [
        (&loaded.up, "Load up (board sends)"),
        (&loaded.down, "Load down (board receives)"),
    ] {
        let Some((leg, b)) = leg
            .as_ref()
            .and_then(|l| finite(l.bits_per_second).map(|b| (l, b)))
        else {
            continue;
        };
        let mut t = format!(
            "{} over {}",
            rate_or_dash(Some(b)),
            plural(leg.streams as u64, "stream")
        );
        if let Some(tt) = &leg.tcp_rtt_ms {
            t.push_str(&format!(
                " · TCP RTT p50 {} · p99 {}",
                ms_text(Some(tt.p50)),
                ms_text(Some(tt.p99))
            ));
        }
        facts.push((label.to_string(), t));
    }
    facts
}

/// One phase's ICMP round trips (ms, with its probes sent and lost) and its load's TCP round
/// trips (ms), each where measured.
fn phase_facts(ph: &Phase, label: &str) -> Vec<(String, String)> {
    let mut facts = Vec::new();
    if let Some(rt) = &ph.rtt_ms {
        facts.push((
            format!("{label} RTT (ICMP)"),
            format!(
                "p50 {} · p90 {} · p99 {} · max {} ({} probes, {} lost)",
                ms_text(Some(rt.p50)),
                ms_text(Some(rt.p90)),
                ms_text(Some(rt.p99)),
                ms_text(Some(rt.max)),
                ph.sent,
                ph.lost
            ),
        ));
    }
    if let Some(tt) = &ph.tcp_rtt_ms {
        facts.push((
            format!("{label} TCP RTT (TCP_INFO)"),
            format!(
                "p50 {} · p99 {} · max {}",
                ms_text(Some(tt.p50)),
                ms_text(Some(tt.p99)),
                ms_text(Some(tt.max))
            ),
        ));
    }
    facts
}

/// The queue the increase implies: its size (bytes), where, at what goodput and from what;
/// `None` when the summary has no size.
fn queue_fact(s: &LatencyResult) -> Option<(String, String)> {
    let q = s.queue_bytes?;
    let how = match s
        .queue
        .as_ref()
        .and_then(|e| finite(e.bits_per_second).map(|b| (e, b)))
    {
        Some((e, bps)) => format!(
            " {}{} at {}, from {}{}",
            if e.place == "the bottleneck" {
                "at "
            } else {
                ""
            },
            e.place,
            display::rate(bps),
            word_or_unknown(&e.from),
            if e.upper_bound {
                " — an upper bound: the round trip's growth may sit in either direction"
            } else {
                ""
            }
        ),
        None => String::new(),
    };
    Some((
        "Implied queue".into(),
        format!(
            "{}{how} ({} bytes)",
            display::size(q),
            display::count(q.round() as u64)
        ),
    ))
}

/// The prober: interval (ms), socket, priority, clock lateness (µs) and CPU (% of a core).
fn probes_fact(pr: &ProbeTotals) -> (String, String) {
    let n = |x: f64| finite(x).unwrap_or(0.0);
    (
        "Probes".into(),
        format!(
            "ICMP echo every {} ms over a {} ({}); clock late p50 {:.0} µs, p99 {:.0} µs; prober CPU {:.2} % of a core",
            n(pr.interval_ms),
            word_or_unknown(&pr.socket),
            word_or_unknown(&pr.priority),
            n(pr.late_us.p50),
            n(pr.late_us.p99),
            n(pr.cpu_percent)
        ),
    )
}

fn latency_view(r: &RunRow) -> KindView {
    let spec: crate::spec::latency::LatencySpec =
        serde_json::from_value(r.params.clone()).unwrap_or_default();
    let s = LatencyResult::of_summary(&r.summary);
    let cards = latency_cards(r, s.as_ref());
    let facts = s
        .as_ref()
        .map(|s| latency_facts(s, &r.summary))
        .unwrap_or_default();
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!(
            "latency under {} load, {}, {} s idle / {} s loaded / {} s idle",
            spec.load.direction(),
            plural(spec.streams as u64, "TCP stream"),
            spec.idle_s,
            spec.loaded_s,
            spec.idle_s
        ),
        role_text: "this board probed the peer with ICMP while loading it with iperf3".into(),
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: local_text(r),
        command: spec.command(),
        stock_command: Some(spec.stock_command()),
        cards,
        facts,
    }
}

/// The view of run `r`.
pub(crate) fn view(r: &RunRow) -> KindView {
    match r.kind {
        RunKind::Iperf3 => iperf3_view(r),
        RunKind::Iperf2 => iperf2_view(r),
        RunKind::Multi => multi_view(r),
        RunKind::Forward => forward_view(r),
        RunKind::Monitor => monitor_view(r),
        RunKind::HttpServe => http_serve_view(r),
        RunKind::HttpGet => http_get_view(r),
        RunKind::TcpSink => tcp_raw_view(r, false),
        RunKind::TcpSource => tcp_raw_view(r, true),
        RunKind::Latency => latency_view(r),
        RunKind::Rfc2544 => rfc2544_view(r),
    }
}

fn rfc2544_view(r: &RunRow) -> KindView {
    let p = Rfc2544Params::of_params(&r.params);
    let known = |s: &str| {
        if s.is_empty() {
            "?".to_string()
        } else {
            s.to_string()
        }
    };
    let target = if p.target.is_empty() {
        &r.peer_host
    } else {
        &p.target
    };
    let mut command = format!(
        "netperfd rfc2544 --peer {} --token-file TOKEN --to {} --in {} --out {}",
        known(&p.peer),
        target,
        known(&p.ingress),
        known(&p.egress)
    );
    if p.port != 5201 {
        command.push_str(&format!(" -p {}", p.port));
    }
    if p.nat {
        command.push_str(" --nat");
    }
    if !p.sizes.is_empty() {
        let list: Vec<String> = p.sizes.iter().map(u32::to_string).collect();
        command.push_str(&format!(" --sizes {}", list.join(",")));
    }
    command.push_str(&format!(
        " --trial {} --loss {} --resolution {}",
        p.trial_s, p.loss_percent, p.resolution_percent
    ));
    match r.direction {
        RunDirection::Receive => command.push_str(" -R"),
        RunDirection::Bidir => command.push_str(" --bidir"),
        RunDirection::Send
        | RunDirection::Tradeoff
        | RunDirection::Mixed
        | RunDirection::Unset
        | RunDirection::Other(_) => {}
    }
    if !p.tests.is_empty() {
        let list: Vec<&str> = p.tests.iter().map(|t| t.word()).collect();
        if list != ["throughput"] {
            command.push_str(&format!(" --tests {}", list.join(",")));
        }
    }
    if p.line_source == "given" && p.line_bps.is_finite() {
        command.push_str(&format!(
            " --line-rate {}",
            iperf3_rate_arg(p.line_bps as u64)
        ));
    }
    // The pass/fail limits given with the run (stored as numbers by the plan).
    let th = p.thresholds.unwrap_or_default();
    for (limit, flag) in [
        (th.min_throughput_percent, "--min-throughput-percent"),
        (th.max_latency_ms, "--max-latency-ms"),
        (th.max_cpu_percent, "--max-cpu-percent"),
    ] {
        if let Some(v) = limit.filter(|v| v.is_finite()) {
            command.push_str(&format!(" {flag} {v}"));
        }
    }
    let rows = crate::results::rfc2544::throughput_rows(
        &crate::results::rfc2544::Rfc2544Summary::of_summary(&r.summary),
    );
    let mut cards: Vec<Card> = rows
        .iter()
        .take(3)
        .map(|row| {
            card(
                &format!("rfc-{}", row.frame),
                &format!("Throughput {} B", row.frame),
                match row.fps.strip_suffix(" so far") {
                    // A size still searching: its floor so far, never a figure.
                    Some(floor) => format!("{floor} fps so far"),
                    None if row.fps == "—" => "searching…".into(),
                    None => format!("{} fps", row.fps),
                },
            )
        })
        .collect();
    if cards.is_empty() {
        cards.push(card("rfc-none", "Throughput", "—".into()));
    }
    let facts = vec![
        (
            "Device under test".to_string(),
            format!(
                "this board, {} → {}{}",
                known(&p.ingress),
                known(&p.egress),
                if p.nat {
                    ", NAT (MASQUERADE on the egress port) for the run"
                } else {
                    ""
                }
            ),
        ),
        ("Generator (peer agent on PC1)".to_string(), known(&p.peer)),
        (
            "Receiver (PC2)".to_string(),
            format!("{}:{}", target, p.port),
        ),
        (
            "Line rate".to_string(),
            format!(
                "{} ({})",
                rate_or_dash(finite(p.line_bps)),
                known(&p.line_source)
            ),
        ),
        (
            "Trials".to_string(),
            format!(
                "{} s each; loss allowed {} %; resolution {} %",
                p.trial_s, p.loss_percent, p.resolution_percent
            ),
        ),
    ];
    KindView {
        kind: r.kind,
        kind_label: r.kind.label(),
        title: format!("RFC 2544, {} from PC1's view", r.direction),
        role_text: "the board is the device under test; a peer agent generated the frames".into(),
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        local: board_ports(r).unwrap_or_else(|| "—".into()),
        command,
        stock_command: None,
        cards,
        facts,
    }
}

/// The view as `netperfd runs show` prints it: title, who, peer, command lines, cards, facts.
pub(crate) fn view_text(r: &RunRow) -> String {
    let v = view(r);
    let mut out = format!(
        "Run {} ({}): {} — {}\n",
        r.id, v.kind_label, r.status, v.title
    );
    out.push_str(&format!("started  {}\n", fmt_time(r.started_at)));
    out.push_str(&format!("who      {}\n", v.role_text));
    out.push_str(&format!("peer     {}\n", v.peer));
    out.push_str(&format!("port     {}\n", v.local));
    if !v.command.is_empty() {
        out.push_str(&format!("command  {}\n", v.command));
    }
    if let Some(s) = &v.stock_command {
        out.push_str(&format!("stock    {s}\n"));
    }
    for c in &v.cards {
        out.push_str(&format!("{:<24} {}\n", c.label, c.value));
    }
    for (k, val) in &v.facts {
        out.push_str(&format!("{k:<24} {val}\n"));
    }
    if let Some(e) = &r.error {
        out.push_str(&format!("error    {e}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunStatus;
    use crate::model::{RunDirection, RunProtocol, RunRole};
    use serde_json::json;

    #[test]
    fn iperf3_rates_read_as_typed() {
        assert_eq!(iperf3_rate_arg(100_000_000), "100M");
        assert_eq!(iperf3_rate_arg(1_000_000_000), "1000M");
        assert_eq!(iperf3_rate_arg(0), "0");
        assert_eq!(iperf3_rate_arg(2_500_000_000), "2500M");
        assert_eq!(iperf3_rate_arg(1_500_000), "1500K");
        assert_eq!(iperf3_rate_arg(1_048_576), "1048576");
        assert_eq!(iperf3_rate_arg(999), "999");
    }

    fn row(kind: RunKind) -> RunRow {
        RunRow {
            id: 7,
            role: RunRole::Client,
            protocol: RunProtocol::Tcp,
            status: RunStatus::Completed,
            peer_host: "192.0.2.2".into(),
            peer_port: 5201,
            local_host: "192.0.2.1".into(),
            local_port: 0,
            bind_dev: None,
            direction: RunDirection::Send,
            params: Value::Null,
            started_at: 0,
            ended_at: Some(10_000),
            error: None,
            sender_bps: Some(941_000_000.0),
            receiver_bps: Some(940_000_000.0),
            bytes: Some(1_175_000_000),
            retransmits: Some(3),
            lost_packets: None,
            total_packets: None,
            lost_percent: None,
            jitter_ms: None,
            suite_id: None,
            kind,
            parent_id: None,
            summary: Value::Null,
            invalid: Vec::new(),
        }
    }

    /// The s51 tryout: `netperfd runs list` showed "-" in RETR/LOSS for every UDP run (it
    /// read the retransmits, which UDP has none of); it now shares the History page's figure.
    #[test]
    fn the_history_column_shows_udp_loss_and_tcp_retransmits() {
        let mut r = row(RunKind::Iperf3);
        assert_eq!(retr_or_loss(&r).as_deref(), Some("3"));
        r.protocol = RunProtocol::Udp;
        r.lost_percent = Some(0.0996);
        assert_eq!(retr_or_loss(&r).as_deref(), Some("0.10 % loss"));
        r.lost_percent = None;
        assert_eq!(retr_or_loss(&r), None);
    }

    fn card_value<'a>(v: &'a KindView, label: &str) -> &'a str {
        v.cards
            .iter()
            .find(|c| c.label == label)
            .map(|c| c.value.as_str())
            .unwrap_or_else(|| panic!("no card {label} in {:?}", v.cards))
    }

    /// Issue 40 item 1: an iperf3 run's `bandwidth`, `parallel` and `time` in the result
    /// tables are read once through the engine's `Params`; the label, target and duration
    /// are those the keys gave. Params that are not a whole `Params` (a run written by hand)
    /// still give their keys; a run without a duration (`-n`) has none.
    #[test]
    fn result_tables_read_an_iperf3_run_s_params_once() {
        use crate::results::suite_table::{run_label, RowParams};
        let mut r = row(RunKind::Iperf3);
        r.protocol = RunProtocol::Udp;
        r.params = serde_json::to_value(Params {
            bandwidth: 400_000_000,
            parallel: 4,
            time: 30,
            ..Params::default()
        })
        .unwrap();
        let p = RowParams::of(&r);
        assert_eq!(
            (p.bandwidth, p.parallel, p.time_s),
            (400_000_000, 4, Some(30.0))
        );
        assert_eq!(run_label(&r), "UDP send 400M ×4");
        r.params = json!({"time": 10});
        let p = RowParams::of(&r);
        assert_eq!((p.bandwidth, p.parallel, p.time_s), (0, 1, Some(10.0)));
        r.params = serde_json::to_value(Params {
            time: 0,
            num: 1 << 20,
            ..Params::default()
        })
        .unwrap();
        assert_eq!(RowParams::of(&r).time_s, None);
        // Another kind's params are read by key as before (an iperf 2 run's seconds).
        let mut r2 = row(RunKind::Iperf2);
        r2.params = json!({"time": 2.5, "parallel": 2});
        let p = RowParams::of(&r2);
        assert_eq!((p.bandwidth, p.parallel, p.time_s), (0, 2, Some(2.5)));
    }

    /// The run page's latency cards and facts as they were read by key before
    /// [`LatencyResult`] (kept to compare).
    mod by_key {
        use super::super::{card, display, plural, rate_or_dash, Card, RunRow};
        use serde_json::Value;

        /// A latency figure as the page shows it: "0.52 ms", "104 ms" (whole from 10 ms), "—" when
        /// `v` is not a number.
        fn old_ms_text(v: &Value) -> String {
            v.as_f64()
                .map(|x| {
                    if x.abs() < 10.0 {
                        format!("{x:.2} ms")
                    } else {
                        format!("{x:.0} ms")
                    }
                })
                .unwrap_or_else(|| "—".into())
        }

        /// A latency run's cards from its summary `s`: idle and loaded RTT, the increase, RPM,
        /// throughput (each direction's apart when the load ran both: `up`, `down`), probe loss.
        pub(super) fn old_latency_cards(
            r: &RunRow,
            s: &Value,
            up: &Value,
            down: &Value,
        ) -> Vec<Card> {
            let cards = vec![
                card(
                    "lat-idle-p50",
                    "Idle RTT p50",
                    old_ms_text(&s["idle"]["rtt_ms"]["p50"]),
                ),
                card(
                    "lat-loaded-p50",
                    "Loaded RTT p50",
                    old_ms_text(&s["loaded"]["rtt_ms"]["p50"]),
                ),
                card(
                    "lat-loaded-p99",
                    "Loaded RTT p99",
                    old_ms_text(&s["loaded"]["rtt_ms"]["p99"]),
                ),
                card(
                    "lat-increase",
                    "Increase under load",
                    s["increase_ms"]
                        .as_f64()
                        .map(display::delta_ms)
                        .unwrap_or_else(|| "—".into()),
                ),
                card(
                    "lat-rpm",
                    "RPM (loaded)",
                    s["rpm"]
                        .as_f64()
                        .map(display::whole)
                        .unwrap_or_else(|| "—".into()),
                ),
                card(
                    "sum-receiver",
                    "Throughput",
                    rate_or_dash(s["loaded"]["bits_per_second"].as_f64().or(r.receiver_bps)),
                ),
            ];
            let mut cards = cards;
            // Load both: each direction's goodput apart (up = the board sends).
            if up.is_object() && down.is_object() {
                cards.push(card(
                    "lat-up-bps",
                    "Up (board sends)",
                    rate_or_dash(up["bits_per_second"].as_f64()),
                ));
                cards.push(card(
                    "lat-down-bps",
                    "Down (board receives)",
                    rate_or_dash(down["bits_per_second"].as_f64()),
                ));
            }
            cards.extend([card(
                "lat-loss",
                "Probe loss",
                match (s["probes"]["lost"].as_u64(), s["probes"]["sent"].as_u64()) {
                    (Some(l), Some(n)) => format!(
                        "{l}/{n} ({:.2} %)",
                        s["probes"]["lost_percent"].as_f64().unwrap_or(0.0)
                    ),
                    _ => "—".into(),
                },
            )]);
            cards
        }

        /// A latency run's facts from its summary `s`: the verdict, each load direction (`up`,
        /// `down`), each phase's ICMP and TCP round trips, one-way delays, the implied queue, the
        /// prober.
        pub(super) fn old_latency_facts(
            s: &Value,
            up: &Value,
            down: &Value,
        ) -> Vec<(String, String)> {
            let mut facts = Vec::new();
            if let Some(v) = s["verdict"].as_str() {
                facts.push(("Verdict".to_string(), v.to_string()));
            }
            for (leg, label) in [
                (up, "Load up (board sends)"),
                (down, "Load down (board receives)"),
            ] {
                if let Some(b) = leg["bits_per_second"].as_f64() {
                    let mut t = format!(
                        "{} over {}",
                        rate_or_dash(Some(b)),
                        plural(leg["streams"].as_u64().unwrap_or(0), "stream")
                    );
                    let tt = &leg["tcp_rtt_ms"];
                    if tt.is_object() {
                        t.push_str(&format!(
                            " · TCP RTT p50 {} · p99 {}",
                            old_ms_text(&tt["p50"]),
                            old_ms_text(&tt["p99"])
                        ));
                    }
                    facts.push((label.to_string(), t));
                }
            }
            for (key, label) in [
                ("idle", "Idle"),
                ("loaded", "Loaded"),
                ("idle_after", "Idle after"),
            ] {
                let ph = &s[key];
                let rt = &ph["rtt_ms"];
                if rt.is_object() {
                    facts.push((
                        format!("{label} RTT (ICMP)"),
                        format!(
                            "p50 {} · p90 {} · p99 {} · max {} ({} probes, {} lost)",
                            old_ms_text(&rt["p50"]),
                            old_ms_text(&rt["p90"]),
                            old_ms_text(&rt["p99"]),
                            old_ms_text(&rt["max"]),
                            ph["sent"].as_u64().unwrap_or(0),
                            ph["lost"].as_u64().unwrap_or(0)
                        ),
                    ));
                }
                let tt = &ph["tcp_rtt_ms"];
                if tt.is_object() {
                    facts.push((
                        format!("{label} TCP RTT (TCP_INFO)"),
                        format!(
                            "p50 {} · p99 {} · max {}",
                            old_ms_text(&tt["p50"]),
                            old_ms_text(&tt["p99"]),
                            old_ms_text(&tt["max"])
                        ),
                    ));
                }
            }
            facts.extend(crate::results::owd::facts(s));
            if let Some(q) = s["queue_bytes"].as_f64() {
                let e = &s["queue"];
                let how = match (e["place"].as_str(), e["bits_per_second"].as_f64()) {
                    (Some(place), Some(bps)) => format!(
                        " {}{place} at {}, from {}{}",
                        if place == "the bottleneck" { "at " } else { "" },
                        display::rate(bps),
                        e["from"].as_str().unwrap_or("?"),
                        if e["upper_bound"].as_bool() == Some(true) {
                            " — an upper bound: the round trip's growth may sit in either direction"
                        } else {
                            ""
                        }
                    ),
                    _ => String::new(),
                };
                facts.push((
                    "Implied queue".into(),
                    format!(
                        "{}{how} ({} bytes)",
                        display::size(q),
                        display::count(q.round() as u64)
                    ),
                ));
            }
            let pr = &s["probes"];
            if pr.is_object() {
                facts.push((
                "Probes".into(),
                format!(
                    "ICMP echo every {} ms over a {} ({}); clock late p50 {:.0} µs, p99 {:.0} µs; prober CPU {:.2} % of a core",
                    pr["interval_ms"].as_f64().unwrap_or(0.0),
                    pr["socket"].as_str().unwrap_or("?"),
                    pr["priority"].as_str().unwrap_or("?"),
                    pr["late_us"]["p50"].as_f64().unwrap_or(0.0),
                    pr["late_us"]["p99"].as_f64().unwrap_or(0.0),
                    pr["cpu_percent"].as_f64().unwrap_or(0.0)
                ),
            ));
            }
            facts
        }
    }

    /// Issue 40 item 1: the latency run's page reads its summary once, typed, and shows what
    /// the key reads showed: a stored summary (NaN CPU, echo, queue, both directions), an
    /// early one without the keys added since, variants of the queue and the echo, none.
    #[test]
    fn latency_page_shows_what_the_key_reads_showed() {
        let stored: Value =
            serde_json::from_str(crate::results::latency::tests::STORED_SUMMARY).unwrap();
        let mut bottleneck = stored.clone();
        bottleneck["queue"]["place"] = json!("the bottleneck");
        bottleneck["queue"]["upper_bound"] = json!(true);
        bottleneck["echo"] = json!({"port": 5291, "note": "peer has no netperfd echo"});
        let mut one_way = stored.clone();
        one_way["loaded"].as_object_mut().unwrap().remove("down");
        for s in [
            stored,
            crate::results::latency::tests::early_summary(),
            bottleneck,
            one_way,
            Value::Null,
        ] {
            let mut r = row(RunKind::Latency);
            r.summary = s;
            let v = view(&r);
            let (up, down) = (&r.summary["loaded"]["up"], &r.summary["loaded"]["down"]);
            let cards = by_key::old_latency_cards(&r, &r.summary, up, down);
            assert_eq!(v.cards, cards, "{}", r.summary);
            assert_eq!(
                v.facts,
                by_key::old_latency_facts(&r.summary, up, down),
                "{}",
                r.summary
            );
        }
    }

    #[test]
    fn latency_both_shows_each_direction() {
        let mut r = row(RunKind::Latency);
        r.params = serde_json::to_value(crate::spec::latency::LatencySpec {
            host: "192.0.2.2".into(),
            load: crate::spec::latency::Load::Both,
            ..Default::default()
        })
        .unwrap();
        r.summary = serde_json::json!({
            "loaded": {"rtt_ms": {"p50": 40.0}, "bits_per_second": 1.5e8,
                "up": {"bits_per_second": 1.2e8, "streams": 1,
                       "tcp_rtt_ms": {"p50": 38.4, "p99": 51.0}},
                "down": {"bits_per_second": 3e7, "streams": 1}},
            "probes": {"sent": 100, "lost": 0}
        });
        let v = view(&r);
        assert_eq!(card_value(&v, "Up (board sends)"), "120.0 Mbit/s");
        assert_eq!(card_value(&v, "Down (board receives)"), "30.0 Mbit/s");
        let fact = |k: &str| {
            v.facts
                .iter()
                .find(|f| f.0 == k)
                .map(|f| f.1.clone())
                .unwrap_or_else(|| panic!("no fact {k} in {:?}", v.facts))
        };
        assert_eq!(
            fact("Load up (board sends)"),
            "120.0 Mbit/s over 1 stream · TCP RTT p50 38 ms · p99 51 ms"
        );
        assert_eq!(
            fact("Load down (board receives)"),
            "30.0 Mbit/s over 1 stream"
        );
        // One direction: no per-direction cards (the throughput card is that direction).
        r.summary["loaded"].as_object_mut().unwrap().remove("down");
        assert!(view(&r).cards.iter().all(|c| c.id != "lat-up-bps"));
    }

    #[test]
    fn iperf3_client_and_server() {
        let mut r = row(RunKind::Iperf3);
        r.params = serde_json::to_value(Params {
            parallel: 2,
            time: 60,
            direction: Direction::Receive,
            window: Some(307_200),
            ..Params::default()
        })
        .unwrap();
        r.bind_dev = Some("eth0".into());
        let v = view(&r);
        assert_eq!(
            v.command,
            "netperfd -c 192.0.2.2 -p 5201 -t 60 -P 2 -R -w 307200 -B 192.0.2.1 --bind-dev eth0"
        );
        assert_eq!(
            v.stock_command.as_deref(),
            Some(
                "iperf3 -c 192.0.2.2 -p 5201 -t 60 -P 2 -R -w 307200 -B 192.0.2.1 --bind-dev eth0"
            )
        );
        assert_eq!(v.title, "TCP send, 2 streams");
        assert_eq!(card_value(&v, "Retransmits"), "3");
        assert_eq!(card_value(&v, "Receiver bitrate"), "940.0 Mbit/s");
        r.role = RunRole::Server;
        r.local_port = 5201;
        r.bind_dev = None;
        let v = view(&r);
        assert_eq!(v.command, "");
        assert_eq!(
            v.stock_command.as_deref(),
            Some("iperf3 -c 192.0.2.1 -p 5201 -t 60 -P 2 -R -w 307200")
        );
        assert!(v.role_text.contains("peer ran iperf3 -c"));
    }

    #[test]
    fn iperf3_udp_cards() {
        let mut r = row(RunKind::Iperf3);
        r.protocol = RunProtocol::Udp;
        (r.lost_packets, r.total_packets, r.lost_percent, r.jitter_ms) =
            (Some(5), Some(1000), Some(0.5), Some(0.0123));
        let v = view(&r);
        assert_eq!(
            card_value(&v, "Lost/Total (receiver)"),
            "5 / 1,000 (0.50 %)"
        );
        assert_eq!(card_value(&v, "Jitter"), "0.012 ms");
        assert!(v.cards.iter().all(|c| c.label != "Retransmits"));
    }

    #[test]
    fn iperf2_client_shows_both_command_lines_and_retransmits() {
        let mut r = row(RunKind::Iperf2);
        r.protocol = RunProtocol::Udp;
        r.peer_port = 5001;
        r.params = json!({"host": "192.0.2.2", "port": 5001, "udp": true, "rate": 100000000u64,
            "len": 1470, "time": 10.0, "bytes": 0, "parallel": 2, "ret": "tradeoff", "listen_port": 5002});
        let v = view(&r);
        assert_eq!(
            v.command,
            "netperfd -c 192.0.2.2 -p 5001 --iperf2 -u -b 100000000 -l 1470 -t 10 -P 2 -r -L 5002"
        );
        assert_eq!(
            v.stock_command.as_deref(),
            Some("iperf -c 192.0.2.2 -p 5001 -u -b 100000000 -l 1470 -t 10 -P 2 -r -L 5002")
        );
        r.protocol = RunProtocol::Tcp;
        r.retransmits = Some(12);
        assert_eq!(card_value(&view(&r), "Retransmits"), "12");
        assert_eq!(card_value(&view(&r), "Receiver bitrate"), "940.0 Mbit/s");
    }

    #[test]
    fn iperf2_tcp_client_has_no_receiver_card_it_cannot_fill() {
        // Over TCP the iperf 2 server reports nothing back: no "—" card, a fact says why.
        let mut r = row(RunKind::Iperf2);
        r.peer_port = 5001;
        r.receiver_bps = None;
        r.params = json!({"host": "192.0.2.2", "port": 5001, "time": 2.0});
        let v = view(&r);
        let ids: Vec<&str> = v.cards.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["sum-sender", "sum-retr"]);
        assert_eq!(card_value(&v, "Sender bitrate"), "941.0 Mbit/s");
        assert!(v
            .facts
            .iter()
            .any(|(k, val)| k == "Receiver bitrate" && val.starts_with("not reported")));
        // UDP has the server report: the card stays (with "—" when the report was lost).
        r.protocol = RunProtocol::Udp;
        assert!(view(&r).cards.iter().any(|c| c.id == "sum-receiver"));
        // A served iperf 2 run measured the receiver itself: the card stays.
        r.protocol = RunProtocol::Tcp;
        r.role = RunRole::Server;
        assert!(view(&r).cards.iter().any(|c| c.id == "sum-receiver"));
    }

    #[test]
    fn parallel_sink_streams_show_each_and_their_sum() {
        let mut r = row(RunKind::TcpSink);
        r.summary = json!({
            "bytes": 60_000_003u64, "seconds": 2.0, "bits_per_second": 240_000_012.0,
            "streams": 3,
            "per_connection": [
                {"id": 1, "bytes": 20_000_000u64, "seconds": 2.0, "bits_per_second": 8e7},
                {"id": 2, "bytes": 20_000_001u64, "seconds": 2.0, "bits_per_second": 8e7},
                {"id": 3, "bytes": 20_000_002u64, "seconds": 2.0, "bits_per_second": 8e7}],
            "sum": {"streams": 3, "bytes": 60_000_003u64, "seconds": 2.0,
                "bits_per_second": 240_000_012.0},
        });
        let v = view(&r);
        assert_eq!(v.title, "3 raw TCP streams into the board's TCP sink");
        let sum = v
            .facts
            .iter()
            .find(|(k, _)| k == "[SUM]")
            .expect("sum fact");
        assert!(sum.1.starts_with("3 streams: "), "{}", sum.1);
        assert!(sum.1.contains("(60000003 bytes) in 2.00 s"), "{}", sum.1);
        assert!(v.facts.iter().any(|(k, _)| k == "Per connection"));
    }

    #[test]
    fn served_iperf2_trip_times_shows_the_latency() {
        let mut r = row(RunKind::Iperf2);
        r.role = RunRole::Server;
        r.protocol = RunProtocol::Udp;
        r.local_port = 5001;
        r.params = json!({"iperf2": true, "parallel": 1, "trip_times": true});
        r.summary = json!({"streams": [{"id": 1, "sender": false, "bytes": 1000u64,
            "seconds": 1.0, "udp": {"latency_ms": {"count": 895, "avg": 0.0111,
            "min": 0.002, "max": 0.588, "stdev": 0.0196}}}]});
        let v = view(&r);
        let l = v
            .facts
            .iter()
            .find(|(k, _)| k == "One-way latency [1]")
            .expect("latency fact");
        assert!(
            l.1.starts_with("avg 0.011 ms, min 0.002, max 0.588, stdev 0.020 over 895"),
            "{}",
            l.1
        );
        assert!(v.stock_command.unwrap().ends_with(" -u --trip-times -e"));
        // TCP: the stream's own latency_ms, per write.
        r.protocol = RunProtocol::Tcp;
        r.summary = json!({"streams": [{"id": 1, "sender": false, "bytes": 1000u64,
            "seconds": 1.0, "udp": null, "latency_ms": {"count": 7920, "avg": 5.551,
            "min": 0.038, "max": 43.105, "stdev": 5.973}}]});
        let v = view(&r);
        let l = v.facts.iter().find(|(k, _)| k == "One-way latency [1]");
        assert_eq!(
            l.map(|x| x.1.as_str()),
            Some(
                "avg 5.551 ms, min 0.038, max 43.105, stdev 5.973 over 7920 writes \
                 (--trip-times: needs the two clocks in sync)"
            )
        );
        // Without --trip-times: no such fact.
        r.summary = json!({"streams": [{"id": 1, "sender": false, "udp": {"jitter_ms": 0.1}}]});
        assert!(view(&r)
            .facts
            .iter()
            .all(|(k, _)| !k.starts_with("One-way")));
    }

    #[test]
    fn served_iperf2_p4_shows_streams_and_sum() {
        let mut r = row(RunKind::Iperf2);
        r.role = RunRole::Server;
        r.params = json!({"iperf2": true, "parallel": 2});
        r.summary = json!({
            "streams": [
                {"id": 1, "sender": false, "bytes": 1000u64, "seconds": 1.0},
                {"id": 2, "sender": false, "bytes": 3000u64, "seconds": 1.0}],
            "sum": {"receive": {"streams": 2, "bytes": 4000u64, "seconds": 1.0,
                "bits_per_second": 32000.0}},
        });
        let v = view(&r);
        assert!(v.title.ends_with("2 streams"), "{}", v.title);
        assert!(v.stock_command.as_deref().unwrap_or("").contains(" -P 2"));
        let sum = v
            .facts
            .iter()
            .find(|(k, _)| k == "[SUM] received")
            .expect("sum fact");
        assert!(sum.1.contains("(4000 bytes) in 1.00 s"), "{}", sum.1);
        let per = v
            .facts
            .iter()
            .find(|(k, _)| k == "Per stream (received)")
            .expect("per stream");
        assert!(per.1.starts_with("[1] "), "{}", per.1);
    }

    #[test]
    fn multi_command_has_every_leg() {
        let mut r = row(RunKind::Multi);
        r.bind_dev = Some("eth0,eth1".into());
        let p = serde_json::to_value(Params {
            protocol: Protocol::Udp,
            bandwidth: 500_000_000,
            ..Params::default()
        })
        .unwrap();
        r.params = json!({"time": 10, "parallel": 2, "legs": [
            {"port": "eth0", "peer": "192.0.2.2", "peer_port": 5201, "direction": "send", "params": p},
            {"port": "eth1", "peer": "198.51.100.2", "peer_port": 5202, "direction": "receive",
             "params": serde_json::to_value(Params::default()).unwrap()}]});
        let v = view(&r);
        assert_eq!(
            v.command,
            "netperfd multi --leg eth0=192.0.2.2,udp,b=500000000 --leg eth1=198.51.100.2:5202,receive -t 10"
        );
        assert!(v.title.starts_with("Multi-port run: 2 legs"));
        assert_eq!(v.local, "eth0, eth1");
    }

    /// Issue 38: one format for a run's board ports on every page — a path through the board
    /// for forwarding and RFC 2544 runs, a list for the others (the run page said "eth0,eth1").
    #[test]
    fn board_ports_are_a_path_or_a_list() {
        let mut r = row(RunKind::Rfc2544);
        r.bind_dev = Some("eth0,eth1".into());
        assert_eq!(board_ports(&r).as_deref(), Some("eth0 → eth1"));
        assert_eq!(view(&r).local, "eth0 → eth1");
        r.kind = RunKind::Forward;
        assert_eq!(board_ports(&r).as_deref(), Some("eth0 → eth1"));
        r.kind = RunKind::Monitor;
        assert_eq!(board_ports(&r).as_deref(), Some("eth0, eth1"));
        r.bind_dev = Some(String::new());
        assert_eq!(board_ports(&r), None);
        r.kind = RunKind::Iperf3;
        r.bind_dev = Some("eth0".into());
        assert_eq!(board_ports(&r).as_deref(), Some("eth0"));
    }

    #[test]
    fn forward_and_monitor_say_what_they_are() {
        let mut r = row(RunKind::Forward);
        r.params = json!({"peer": "http://192.0.2.2:5280", "ingress": "eth0", "egress": "eth1", "nat": true,
            "test": {"host": "198.51.100.2", "time": 10, "parallel": 4, "reverse": false, "bidir": false, "udp": false}});
        r.summary = json!({"forwarded": {"eth0 → eth1": {"bits_per_second": 9.4e8}}, "conntrack": {"peak": 12}});
        let v = view(&r);
        assert_eq!(
            v.command,
            "netperfd forward --peer http://192.0.2.2:5280 --token-file TOKEN --to 198.51.100.2 --in eth0 --out eth1 --nat -t 10 -P 4"
        );
        assert!(v.role_text.contains("peer agent"), "{}", v.role_text);
        assert!(!v.role_text.contains("this board ran the client"));
        assert_eq!(card_value(&v, "Forwarded eth0 → eth1"), "940.0 Mbit/s");
        // The stock line is a command a user can paste, nothing appended.
        assert_eq!(
            v.stock_command.as_deref(),
            Some("iperf3 -c 198.51.100.2 -t 10 -P 4")
        );
        assert_eq!(v.title, "forwarding run: TCP PC1 → PC2 through the board");
        // Issue 22 item 11: -R is PC2 → PC1 (not "UDP receive"), -b as typed ("100M").
        r.protocol = RunProtocol::Udp;
        r.direction = RunDirection::Receive;
        r.params["test"] = json!({"host": "198.51.100.2", "time": 10, "reverse": true, "udp": true, "bitrate": 100_000_000u64});
        let v = view(&r);
        assert_eq!(v.title, "forwarding run: UDP PC2 → PC1 through the board");
        assert_eq!(
            v.stock_command.as_deref(),
            Some("iperf3 -c 198.51.100.2 -t 10 -R -u -b 100M")
        );
        r.direction = RunDirection::Bidir;
        assert_eq!(forward_direction(&r), "PC1 ⇄ PC2");

        let mut m = row(RunKind::Monitor);
        m.protocol = RunProtocol::Unset;
        m.peer_host = "PC1 to PC2".into();
        m.peer_port = 0;
        m.params = json!({"ports": ["eth0", "eth1"], "label": "PC1 to PC2", "duration": 30});
        m.summary =
            json!({"ports": {"eth0": {"rx_bits_per_second": 1.0e8, "tx_bits_per_second": 2.0e6}}});
        let v = view(&m);
        assert_eq!(v.title, "monitor of eth0, eth1");
        assert_eq!(v.peer, "—");
        assert_eq!(
            v.command,
            "netperfd monitor --ports eth0,eth1 -t 30 --label \"PC1 to PC2\""
        );
        assert_eq!(card_value(&v, "eth0 rx / tx"), "100.0 Mbit/s / 2.00 Mbit/s");
    }

    #[test]
    fn transfers_name_the_tool_that_made_them() {
        let mut r = row(RunKind::HttpServe);
        r.role = RunRole::Server;
        r.local_port = 8088;
        r.params = json!({"path": "/payload/100M"});
        r.summary = json!({"connections": 1, "bytes": 100000000u64, "seconds": 1.0, "bits_per_second": 8.0e8});
        let v = view(&r);
        assert_eq!(
            v.stock_command.as_deref(),
            Some("curl -o /dev/null http://192.0.2.1:8088/payload/100M")
        );
        r.summary["connections"] = json!(4);
        assert_eq!(
            view(&r).stock_command.as_deref(),
            Some("axel -n 4 -q -o /tmp/netperfd-100M http://192.0.2.1:8088/payload/100M; rm -f /tmp/netperfd-100M /tmp/netperfd-100M.st")
        );

        let mut g = row(RunKind::HttpGet);
        g.params = json!({"url": "http://192.0.2.2/test.dat", "connections": 3});
        g.bind_dev = Some("eth0".into());
        let v = view(&g);
        assert_eq!(
            v.command,
            "netperfd http-get http://192.0.2.2/test.dat -n 3 --bind-dev eth0"
        );
        assert_eq!(card_value(&v, "Goodput"), "940.0 Mbit/s");
        // Issue 22 item 11: 3 asked, the server has no ranges, 1 used: the page says 1.
        g.summary = json!({"connections": 1, "ranges": false, "size": 1000000u64, "bytes": 1000000u64, "seconds": 0.1});
        let v = view(&g);
        assert!(v.title.ends_with(", 1 connection"), "{}", v.title);
        assert!(
            v.facts.contains(&(
                "Connections".to_string(),
                "1 used of the 3 asked".to_string()
            )),
            "{:?}",
            v.facts
        );

        let mut s = row(RunKind::TcpSink);
        s.local_port = 5009;
        assert_eq!(
            view(&s).stock_command.as_deref(),
            Some("nc 192.0.2.1 5009 < /dev/zero")
        );
        s.kind = RunKind::TcpSource;
        s.local_port = 5019;
        assert_eq!(
            view(&s).stock_command.as_deref(),
            Some("nc -d 192.0.2.1 5019 > /dev/null")
        );
    }

    #[test]
    fn every_kind_has_a_title_and_cards() {
        for k in RunKind::ALL {
            let v = view(&row(k));
            assert!(!v.title.trim().is_empty(), "{k}");
            assert!(!v.role_text.is_empty(), "{k}");
            assert!(
                v.command.len() + v.stock_command.map(|s| s.len()).unwrap_or(0) > 0,
                "{k}"
            );
            assert_eq!(v.kind_label, k.label());
        }
    }
}

/// The run page's "Where the packets went" card: the loss ledger as rows and the sentences
/// that say what to try; and its "Board during the run" section: the board's counters that
/// moved, one (label, value) line each.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct BoardView {
    /// Lost datagrams, grouped ("12,345"); `None` when the run has no ledger or lost none.
    pub lost: Option<String>,
    /// Place, port ("—" when none), the place's count (grouped), its unit (`datagrams`, or
    /// `skbs (GSO batches)` when they could not be turned into datagrams), the counter (with
    /// its own count when it counts skbs: "qdisc tbf drops on eth0: 884 skbs").
    pub places: Vec<[String; 5]>,
    /// Datagrams the board's own sender did not send because the board's egress queue
    /// refused them ([`crate::results::ledger::LossLedger::dropped_locally`]), grouped;
    /// `None` when none (or the run has no ledger).
    pub dropped_locally: Option<String>,
    /// Unattributed datagrams, grouped.
    pub unattributed: String,
    /// What the counters say (`results::ledger::sentences`).
    pub sentences: Vec<String>,
    /// The counters that moved during the run, e.g. ("eth0 qdisc tbf 8001:", "drops +12,001,
    /// overlimits +40,210").
    pub moved: Vec<(String, String)>,
    /// The board's counters are host-wide: a line saying so when the run has them.
    pub note: Option<String>,
}

/// The board view of a run from its stored board counters and loss ledger (both JSON as
/// `GET /api/runs/N` gives them; `None` for runs recorded before they were kept).
pub(crate) fn board_view(board: Option<&Value>, ledger: Option<&Value>) -> BoardView {
    use crate::board::counters::BoardDelta;
    use crate::results::ledger::{self, LossLedger};
    let d: Option<BoardDelta> = board.and_then(|b| serde_json::from_value(b.clone()).ok());
    let l: Option<LossLedger> = ledger.and_then(|l| serde_json::from_value(l.clone()).ok());
    let mut v = BoardView::default();
    // The card only for runs that lost datagrams or had some refused by the board itself
    // (the ledger of a clean run says nothing).
    if let Some(l) = l.as_ref().filter(|l| l.lost > 0 || l.dropped_locally > 0) {
        v.dropped_locally = (l.dropped_locally > 0).then(|| display::count(l.dropped_locally));
        v.lost = Some(display::count(l.lost));
        v.places = l
            .places
            .iter()
            .map(|p| {
                let counter = match (p.counted, &p.counted_unit) {
                    (Some(c), Some(u)) => format!("{}: {} {u}", p.counter, display::count(c)),
                    _ => p.counter.clone(),
                };
                let unit = match p.unit.as_str() {
                    ledger::SKBS => "skbs (GSO batches: one or more datagrams each)",
                    "" => "as counted",
                    u => u,
                };
                [
                    p.place.clone(),
                    p.port.clone().unwrap_or_else(|| "—".into()),
                    display::count(p.packets),
                    unit.to_string(),
                    counter,
                ]
            })
            .collect();
        v.unattributed = display::count(l.unattributed);
    }
    let Some(d) = d else {
        return v;
    };
    v.sentences = match &l {
        Some(l) => ledger::sentences(l, &d),
        None => ledger::board_notes(&d),
    };
    let other = |k: &str| board.and_then(|b| b.get(k)).and_then(Value::as_u64);
    if let (Some(extra), Some(own)) = (other("other_bytes"), other("run_bytes")) {
        v.sentences.push(ledger::other_traffic_sentence(extra, own));
    }
    v.note = Some(
        "Counters are the board's, not the run's: traffic that ran at the same time is in them too."
            .into(),
    );
    let plus = |n: u64| format!("+{}", display::count(n));
    for (port, p) in &d.ports {
        for q in &p.qdiscs {
            let mut parts = Vec::new();
            for (what, n) in [
                ("drops", q.drops),
                ("overlimits", q.overlimits),
                ("requeues", q.requeues),
            ] {
                if n > 0 {
                    parts.push(format!("{what} {}", plus(n)));
                }
            }
            // The qdisc's units: drops are skbs, its sent packets are segments (datagrams).
            if !parts.is_empty() && q.sent_packets > 0 {
                parts.push(format!(
                    "sent {} segments in {} bytes (drops count skbs: a GSO batch is one unless the qdisc split it)",
                    plus(q.sent_packets),
                    plus(q.sent_bytes)
                ));
            }
            if !parts.is_empty() {
                v.moved.push((
                    format!("{port} qdisc {} {} ({})", q.kind, q.handle, q.parent),
                    parts.join(", "),
                ));
            }
        }
        for (what, n) in [("rx_dropped", p.rx_dropped), ("tx_dropped", p.tx_dropped)] {
            if let Some(n) = n.filter(|n| *n > 0) {
                v.moved
                    .push((format!("{port} {what} (/proc/net/dev)"), plus(n)));
            }
        }
        if !p.nic.is_empty() {
            let mut nic: Vec<(&String, &u64)> = p.nic.iter().collect();
            // Drop and error counters first, then the busiest.
            crate::model::order::sort_by_key(&mut nic, |(k, n)| {
                let bad = crate::board::counters::is_nic_rx_drop(k)
                    || k.contains("err")
                    || k.contains("drop")
                    || k.contains("miss");
                (!bad, std::cmp::Reverse(**n))
            });
            let shown: Vec<String> = nic
                .iter()
                .take(12)
                .map(|(k, n)| format!("{k} {}", plus(**n)))
                .collect();
            let more = nic.len().saturating_sub(12);
            let more = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            v.moved
                .push((format!("{port} NIC"), format!("{}{more}", shown.join(", "))));
        }
        if let Some(r) = p.rings {
            v.moved.push((
                format!("{port} rings"),
                format!("rx {} of {}, tx {} of {}", r.rx, r.rx_max, r.tx, r.tx_max),
            ));
        }
    }
    let snmp: Vec<String> = d
        .snmp
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{} {}", k.replace('.', " "), plus(*n)))
        .collect();
    if !snmp.is_empty() {
        v.moved.push(("Protocols".into(), snmp.join(", ")));
    }
    for s in &d.softnet {
        if s.dropped > 0 || s.time_squeeze > 0 || s.processed > 0 {
            v.moved.push((
                format!("softnet CPU {}", s.cpu),
                format!(
                    "processed {}, dropped {}, time_squeeze {}",
                    plus(s.processed),
                    plus(s.dropped),
                    plus(s.time_squeeze)
                ),
            ));
        }
    }
    for i in &d.irqs {
        if i.per_cpu.iter().any(|n| *n > 0) {
            let per: Vec<String> = i
                .per_cpu
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(c, n)| format!("CPU {c} {}", plus(*n)))
                .collect();
            v.moved
                .push((format!("IRQ {} ({})", i.irq, i.desc), per.join(", ")));
        }
    }
    let mhz = |x: Option<f64>| x.map(|m| format!("{m:.0}")).unwrap_or_else(|| "—".into());
    for c in &d.cpufreq {
        v.moved.push((
            format!("CPU {} clock", c.cpu),
            format!(
                "{} → {} MHz (limits {}–{}, max {}){}",
                mhz(c.start_mhz),
                mhz(c.end_mhz),
                mhz(c.min_mhz),
                mhz(c.max_mhz),
                mhz(c.hw_max_mhz),
                c.governor
                    .as_deref()
                    .map(|g| format!(", governor {g}"))
                    .unwrap_or_default()
            ),
        ));
    }
    for t in &d.thermal {
        let c = |x: Option<f64>| x.map(|m| format!("{m:.1}")).unwrap_or_else(|| "—".into());
        v.moved.push((
            format!("thermal {} ({})", t.zone, t.kind),
            format!("{} → {} °C", c(t.start_c), c(t.end_c)),
        ));
    }
    if let Some(s) = &d.series {
        let low = s.mhz_min.iter().flatten().copied().reduce(f64::min);
        let hot = s.temp_max_c.iter().flatten().copied().reduce(f64::max);
        let peak = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
        let mut parts = Vec::new();
        for (what, p) in [
            ("qdisc drops", peak(&s.qdisc_drops)),
            ("NIC rx drops", peak(&s.nic_rx_drops)),
            ("softnet drops", peak(&s.softnet_dropped)),
        ] {
            if p > 0 {
                parts.push(format!("{what} {} in one second", display::count(p)));
            }
        }
        if let Some(m) = low {
            parts.push(format!("slowest core {m:.0} MHz"));
        }
        if let Some(t) = hot {
            parts.push(format!("hottest zone {t:.1} °C"));
        }
        if !parts.is_empty() {
            v.moved
                .push(("Peaks (1 s samples)".into(), parts.join(", ")));
        }
    }
    v
}

#[cfg(test)]
mod board_view_tests {
    use super::*;

    #[test]
    fn other_traffic_is_said_when_the_board_json_has_it() {
        let board = serde_json::json!({"seconds": 3.0, "ports": {}, "other_bytes": 10_001_500u64,
            "run_bytes": 37_500_000u64});
        let v = board_view(Some(&board), None);
        assert_eq!(
            v.sentences,
            ["Other traffic at the same time: the board's ports moved 10.0 MB beyond the run's own 37.5 MB — the counters here are host-wide and may include it"]
        );
        let quiet = serde_json::json!({"seconds": 3.0, "ports": {}});
        assert!(board_view(Some(&quiet), None).sentences.is_empty());
    }

    #[test]
    fn ledger_rows_and_what_moved() {
        let ledger = serde_json::json!({"lost": 12345, "places": [{"place": "board_qdisc", "port": "eth0",
            "packets": 12001, "counter": "qdisc tbf drops on eth0"}], "unattributed": 344});
        let board = serde_json::json!({"seconds": 3.0,
            "ports": {"eth0": {"nic": {"tx_queue_0_xdp_xmit": 120, "rx_queue_0_xdp_drops": 3},
                "qdiscs": [{"kind": "tbf", "handle": "8001:", "parent": "root", "drops": 12001,
                    "overlimits": 40210, "requeues": 0, "backlog_bytes": 0, "qlen": 0}],
                "rx_dropped": 0, "tx_dropped": 0}},
            "snmp": {"Udp.RcvbufErrors": 0, "Udp.SndbufErrors": 12001},
            "softnet": [{"cpu": 0, "processed": 0, "dropped": 0, "time_squeeze": 0}],
            "irqs": [], "cpufreq": [], "thermal": [], "rmem_max": 212992,
            "series": {"t": [1.0, 2.0], "qdisc_drops": [4000, 6100], "nic_rx_drops": [0, 0],
                "softnet_dropped": [0, 0], "mhz_min": [null, null], "temp_max_c": [null, null]}});
        let v = board_view(Some(&board), Some(&ledger));
        assert_eq!(v.lost.as_deref(), Some("12,345"));
        assert_eq!(
            v.places,
            [[
                "board_qdisc".to_string(),
                "eth0".into(),
                "12,001".into(),
                "as counted".into(),
                "qdisc tbf drops on eth0".into()
            ]]
        );
        assert_eq!(v.unattributed, "344");
        // A ledger that says its unit: the datagrams, and the qdisc's own skbs beside them.
        let said = serde_json::json!({"lost": 88360, "unit": "datagrams", "places": [{"place": "board_qdisc",
            "port": "eth0", "packets": 88358, "unit": "datagrams", "counted": 8839,
            "counted_unit": "skbs", "counter": "qdisc tbf drops on eth0"}], "unattributed": 2});
        assert_eq!(
            board_view(Some(&board), Some(&said)).places,
            [[
                "board_qdisc".to_string(),
                "eth0".into(),
                "88,358".into(),
                "datagrams".into(),
                "qdisc tbf drops on eth0: 8,839 skbs".into()
            ]]
        );
        assert!(v.sentences[0].starts_with("12,001 of 12,345 lost datagrams"));
        assert_eq!(
            v.moved,
            [
                (
                    "eth0 qdisc tbf 8001: (root)".to_string(),
                    "drops +12,001, overlimits +40,210".to_string()
                ),
                (
                    "eth0 NIC".into(),
                    "rx_queue_0_xdp_drops +3, tx_queue_0_xdp_xmit +120".into()
                ),
                ("Protocols".into(), "Udp SndbufErrors +12,001".into()),
                (
                    "Peaks (1 s samples)".into(),
                    "qdisc drops 6,100 in one second".into()
                ),
            ]
        );
        // A clean run has no ledger card, only its counters.
        let clean = serde_json::json!({"lost": 0, "places": [], "unattributed": 0});
        let c = board_view(Some(&board), Some(&clean));
        assert_eq!(c.lost, None);
        assert_eq!(c.moved, v.moved);
        // A run from before the counters were kept has nothing to show.
        assert_eq!(board_view(None, None), BoardView::default());
    }
}
