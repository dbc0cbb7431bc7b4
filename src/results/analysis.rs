//! What a result means: the protocol-, IP-version-, MTU- and link-speed-aware ceiling
//! (the most goodput the link can carry), the result as % of it, and a verdict with its
//! evidence. One rule set, first match wins: no result; measurement error (above the
//! ceiling); reached the requested rate; too short to judge; link-bound; tool-bound (a
//! netperfd stream thread used a full core); softirq-bound; all cores saturated; one core
//! saturated; limited elsewhere.
//! Not for: taking the samples (see [`crate::board::sampler`]).

use crate::engine::threadcpu::{ThreadCpu, FULL_CORE};
use crate::model::RunDirection;
use crate::store::{CpuSampleRow, PortSampleRow, RunRow};
use serde::Serialize;

/// Ethernet overhead per frame on the wire beyond the MTU-sized IP packet, bytes:
/// preamble + SFD 8, MAC header 14, FCS 4, inter-frame gap 12 (IEEE 802.3). No VLAN tag.
pub(crate) const ETH_OVERHEAD: u32 = 38;
/// Smallest Ethernet payload, bytes (shorter packets are padded; IEEE 802.3).
pub(crate) const ETH_MIN_PAYLOAD: u32 = 46;
/// TCP timestamps option as sent on every segment (RFC 7323: 10 bytes + 2 NOP), bytes.
pub(crate) const TCP_TIMESTAMPS: u32 = 12;

/// Transport of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Transport {
    Tcp,
    Udp,
}

/// How payload is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Framing {
    pub transport: Transport,
    pub ipv6: bool,
    /// IP MTU of the port, bytes (1500 standard, 9000 jumbo).
    pub mtu: u32,
    /// TCP only: the timestamps option is on (Linux default, `net.ipv4.tcp_timestamps=1`).
    pub tcp_timestamps: bool,
    /// UDP only: datagram payload (`-l`), bytes; `None` = the largest that fits the MTU.
    pub udp_payload: Option<u32>,
}

impl Framing {
    fn ip_header(&self) -> u32 {
        if self.ipv6 {
            40
        } else {
            20
        }
    }

    /// Share of the line rate that is payload (goodput / line rate), from header sizes:
    /// TCP: (MTU − IP − 20 − timestamps) / (MTU + 38); UDP: payload / wire bytes of the
    /// datagram, fragments included. `None` when the MTU cannot carry any payload.
    pub(crate) fn payload_fraction(&self) -> Option<f64> {
        let ip = self.ip_header();
        match self.transport {
            Transport::Tcp => {
                let opts = if self.tcp_timestamps {
                    TCP_TIMESTAMPS
                } else {
                    0
                };
                let payload = self.mtu.checked_sub(ip + 20 + opts)?;
                (payload > 0).then(|| payload as f64 / (self.mtu + ETH_OVERHEAD) as f64)
            }
            Transport::Udp => {
                let max = self.mtu.checked_sub(ip + 8)?;
                let payload = self.udp_payload.unwrap_or(max);
                if payload == 0 || max == 0 {
                    return None;
                }
                let wire = if payload <= max {
                    (payload + 8 + ip).max(ETH_MIN_PAYLOAD) + ETH_OVERHEAD
                } else {
                    // IP fragments: each carries a multiple of 8 bytes of the UDP datagram
                    // (IPv6 adds an 8-byte fragment header to each).
                    let frag_hdr = if self.ipv6 { 8 } else { 0 };
                    let per = (self.mtu.checked_sub(ip + frag_hdr)? / 8) * 8;
                    if per == 0 {
                        return None;
                    }
                    let data = u64::from(payload) + 8;
                    let n = data.div_ceil(u64::from(per));
                    let wire = data + n * u64::from(ip + frag_hdr + ETH_OVERHEAD);
                    return Some(f64::from(payload) / wire as f64);
                };
                Some(f64::from(payload) / f64::from(wire))
            }
        }
    }

    /// Ceiling, bits/s, for a link of `link_bps` bits/s: `link_bps × payload_fraction`.
    /// 1 GbE, MTU 1500: TCP/IPv4 with timestamps 941.48 Mbit/s, without 949.28, UDP/IPv4
    /// 957.09, TCP/IPv6 (timestamps) 928.48.
    pub(crate) fn ceiling_bps(&self, link_bps: f64) -> Option<f64> {
        self.payload_fraction().map(|f| f * link_bps)
    }

    /// "TCP/IPv4 with timestamps, MTU 1500".
    pub(crate) fn describe(&self) -> String {
        let ipv = if self.ipv6 { "IPv6" } else { "IPv4" };
        match self.transport {
            Transport::Tcp => format!(
                "TCP/{ipv} {} timestamps, MTU {}",
                if self.tcp_timestamps {
                    "with"
                } else {
                    "without"
                },
                self.mtu
            ),
            Transport::Udp => match self.udp_payload {
                Some(l) => format!("UDP/{ipv} {l}-byte datagrams, MTU {}", self.mtu),
                None => format!("UDP/{ipv}, MTU {}", self.mtu),
            },
        }
    }
}

/// What limited a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Verdict {
    /// Above the ceiling: the reading cannot be right.
    MeasurementError,
    /// A paced test (`-b`) whose result reached ≥ 97 % of the rate asked for: the rate was
    /// limited by request, nothing else is to blame.
    RateLimited,
    /// Fewer than 2 CPU samples (a run shorter than about 2 s): no evidence to judge on.
    TooShort,
    /// ≥ 95 % of the ceiling.
    LinkBound,
    /// One of netperfd's own stream threads used ≥ 90 % of a core: the test tool is the limit.
    ToolBound,
    /// One core ≥ 90 % busy, mostly softirq/irq (packet processing).
    SoftirqBound,
    /// Every core ≥ 90 % busy.
    AllCoresSaturated,
    /// One core ≥ 90 % busy in user/system time (others not).
    CoreSaturated,
    /// Neither the link nor a board core: the peer, the path, or unknown.
    LimitedElsewhere,
    /// A paced UDP run whose sender, not the board, sent less than
    /// [`crate::engine::shortfall::SHORTFALL_PERCENT`] % of the rate asked: UDP has no flow
    /// control, so neither the board's cores nor the path slowed it (a sender short of CPU,
    /// or its own host's limits).
    SenderShort,
    /// A shaper on one of the board's own ports (a qdisc or class with a rate) let through
    /// about what the run got, or dropped / held back its packets (`results::shaper`).
    ShaperBound,
    /// A paced test whose sender sent the rate asked for but whose receiver got less than
    /// 97 % of it, with no board core to blame (or the board was the sender): the datagrams
    /// were lost on the way or at the receiver.
    LostOnTheWay,
    /// No bitrate to judge (failed or running).
    NoResult,
}

impl Verdict {
    /// Words for the UI.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Verdict::MeasurementError => "measurement error (above the ceiling)",
            Verdict::RateLimited => "reached the requested rate (rate-limited by request)",
            Verdict::TooShort => "too short to judge",
            Verdict::LinkBound => "link-bound",
            Verdict::ToolBound => "tool-bound (a netperfd stream thread used a full core)",
            Verdict::SoftirqBound => "softirq-bound",
            Verdict::AllCoresSaturated => "all cores saturated",
            Verdict::CoreSaturated => "one core saturated",
            Verdict::LimitedElsewhere => "limited elsewhere (peer / unknown)",
            Verdict::SenderShort => "limited by the sender (it sent less than asked)",
            Verdict::ShaperBound => "limited by the board's own shaper",
            Verdict::LostOnTheWay => "lost on the way (the path or the receiver)",
            Verdict::NoResult => "no result",
        }
    }

    /// How the page colours it: "good" (link-bound, reached the rate), "warn" (a board core,
    /// the tool, loss on the way), "bad" (a measurement error) or "" (nothing to blame).
    pub(crate) fn tone(self) -> &'static str {
        match self {
            Verdict::LinkBound | Verdict::RateLimited => "good",
            Verdict::CoreSaturated
            | Verdict::AllCoresSaturated
            | Verdict::SoftirqBound
            | Verdict::ToolBound
            | Verdict::ShaperBound
            | Verdict::SenderShort
            | Verdict::LostOnTheWay => "warn",
            Verdict::MeasurementError => "bad",
            Verdict::TooShort | Verdict::LimitedElsewhere | Verdict::NoResult => "",
        }
    }
}

/// Mean load of one core over a run, percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct CoreLoad {
    /// Core index; -1 = all cores.
    pub cpu: i32,
    pub busy: f64,
    pub user: f64,
    pub system: f64,
    pub irq: f64,
    pub softirq: f64,
    /// Highest 1 s busy value, percent.
    pub peak_busy: f64,
}

/// Share of a core at which it counts as saturated, percent.
pub(crate) const CORE_SATURATED: f64 = 90.0;
/// Share of the ceiling at which a result counts as link-bound, percent.
pub(crate) const LINK_BOUND: f64 = 95.0;

/// Mean per-core load over the samples (all-cores line first, then cores in order).
pub(crate) fn core_loads(samples: &[CpuSampleRow]) -> Vec<CoreLoad> {
    let mut by: std::collections::BTreeMap<i32, Vec<&CpuSampleRow>> = Default::default();
    for s in samples {
        by.entry(s.cpu).or_default().push(s);
    }
    by.into_iter()
        .map(|(cpu, v)| {
            let n = v.len() as f64;
            let mean = |f: fn(&CpuSampleRow) -> f64| v.iter().map(|s| f(s)).sum::<f64>() / n;
            CoreLoad {
                cpu,
                busy: mean(|s| s.busy()),
                user: mean(|s| s.user),
                system: mean(|s| s.system),
                irq: mean(|s| s.irq),
                softirq: mean(|s| s.softirq),
                peak_busy: v.iter().map(|s| s.busy()).fold(0.0, f64::max),
            }
        })
        .collect()
}

/// A result judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Analysis {
    /// The bitrate judged (receiver goodput, else sender), bits/s.
    pub bitrate_bps: Option<f64>,
    /// Ceiling, bits/s; `None` when the link speed is unknown (veth, no carrier).
    pub ceiling_bps: Option<f64>,
    /// How the ceiling was computed, or why it is unknown.
    pub ceiling_basis: String,
    /// Bitrate as % of the ceiling.
    pub percent_of_ceiling: Option<f64>,
    pub verdict: Verdict,
    /// `verdict` in words.
    pub verdict_text: String,
    /// The facts behind the verdict, one sentence each.
    pub evidence: Vec<String>,
    /// Mean CPU per core over the run (-1 = all cores).
    pub cores: Vec<CoreLoad>,
    /// Paced runs: the rate asked for, sent and received, and whether the sender fell short.
    pub rate_check: Option<crate::engine::shortfall::RateCheck>,
    /// CPU of netperfd's stream threads during the run (one per local stream).
    pub threads: Vec<ThreadCpu>,
    /// Paced runs: the sender reached the rate asked for but the receiver got less than
    /// [`crate::engine::shortfall::SHORTFALL_PERCENT`] % of it (received as % of the target).
    pub received_percent_short: Option<f64>,
    /// What the board's counters over the run say (`results::ledger::sentences`): where
    /// the lost datagrams went and what to try, clocks and temperatures worth a word. Empty
    /// when the run has no counters recorded, or nothing moved.
    pub board: Vec<String>,
}

impl Analysis {
    /// The note under the target / sent / received card and its tone, from the same judgement
    /// as the verdict (issue 22 item 5: a green "reached" card never stands beside an amber
    /// verdict about the same loss). `None` for unpaced runs.
    pub(crate) fn rate_note(&self) -> Option<(String, &'static str)> {
        let c = self.rate_check?;
        Some(if c.short {
            (
                format!("shortfall: sender at {:.1} % of -b", c.sent_percent),
                "bad",
            )
        } else if let Some(p) = self.received_percent_short {
            let tone = match self.verdict.tone() {
                "" | "good" => "warn",
                t => t,
            };
            (
                format!("sent in full; the receiver got only {p:.1} % of it"),
                tone,
            )
        } else {
            ("reached the requested rate".into(), "good")
        })
    }
}

/// The verdict of a paced run whose receiver got `p` % of the rate sent in full.
fn short_text(words: &str, p: f64) -> String {
    format!("{words}: the requested rate was sent, the receiver got {p:.1} % of it")
}

/// The verdict's words when the loss ledger put all the lost datagrams in a receiving
/// socket's buffer (see [`Analysis::place_the_loss`]).
pub(crate) const AT_THE_RECEIVER: &str = "lost at the receiver (its socket buffer)";

impl Analysis {
    /// The verdict of a paced run whose receiver got less than was sent in full, told where
    /// the loss ledger put the lost datagrams: none on any of the board's counters
    /// (`on_board` false) — then a board core or the tool does not explain them, they were
    /// lost on the way; all but 2 % in a receiving socket's buffer (`in_socket`, the board's
    /// or the peer's) — then they were lost at the receiver, not on the path. Other
    /// verdicts are left as they are.
    pub(crate) fn place_the_loss(&mut self, on_board: bool, in_socket: bool) {
        let Some(p) = self.received_percent_short else {
            return;
        };
        let core = matches!(
            self.verdict,
            Verdict::CoreSaturated
                | Verdict::AllCoresSaturated
                | Verdict::SoftirqBound
                | Verdict::ToolBound
        );
        if !on_board && core {
            self.verdict = Verdict::LostOnTheWay;
            self.verdict_text = short_text(self.verdict.text(), p);
        }
        if in_socket && self.verdict == Verdict::LostOnTheWay {
            self.verdict_text = short_text(AT_THE_RECEIVER, p);
        }
    }
}

/// How `run`'s packets are framed on a port of MTU `mtu` (protocol, IP version from its
/// addresses, UDP datagram size from its `len` parameter; `tcp_timestamps` as at its start).
pub(crate) fn run_framing(run: &RunRow, mtu: u32, tcp_timestamps: bool) -> Framing {
    let udp = run.protocol.is_udp();
    Framing {
        transport: if udp { Transport::Udp } else { Transport::Tcp },
        ipv6: run.local_host.contains(':') || run.peer_host.contains(':'),
        mtu,
        tcp_timestamps,
        udp_payload: crate::results::asked::Asked::of(run).len.filter(|_| udp),
    }
}

/// Ports without a physical link (veth, bridges, tunnels, loopback…): no `device` link in
/// sysfs, or (when the port is gone) a name such ports get. `ifname` is not trusted as a path.
pub(crate) fn port_is_virtual(ifname: &str) -> bool {
    const PREFIXES: [&str; 12] = [
        "veth", "lo", "br", "docker", "virbr", "tun", "tap", "wg", "vxlan", "dummy", "bond",
        "macvlan",
    ];
    let safe = !ifname.is_empty() && !ifname.contains('/') && !ifname.starts_with('.');
    if safe {
        let base = std::path::Path::new("/sys/class/net").join(ifname);
        if base.exists() {
            return !base.join("device").exists();
        }
    }
    PREFIXES.iter().any(|p| ifname.starts_with(p))
}

/// Number of distinct CPU sample times (the monitor takes one per second).
fn sample_count(samples: &[CpuSampleRow]) -> usize {
    let mut ts: Vec<i64> = samples.iter().map(|s| (s.t * 1000.0) as i64).collect();
    ts.sort_unstable();
    ts.dedup();
    ts.len()
}

/// Judge `run`'s result from the monitor samples taken during it, without thread CPU figures
/// (see [`analyze_with`]).
#[cfg(test)]
pub(crate) fn analyze(
    run: &RunRow,
    cpus: &[CpuSampleRow],
    ports: &[PortSampleRow],
    port: Option<&str>,
    tcp_timestamps: bool,
) -> Analysis {
    analyze_with(run, cpus, ports, port, tcp_timestamps, &[])
}

/// Judge `run`'s result from the monitor samples taken during it and the CPU of netperfd's
/// stream threads (`threads`, from the run's report). `port` picks the port samples that
/// carried the run (default: the first port sampled). TCP timestamps are taken as
/// `tcp_timestamps` (read `net.ipv4.tcp_timestamps` for the board's setting).
#[cfg(test)]
pub(crate) fn analyze_with(
    run: &RunRow,
    cpus: &[CpuSampleRow],
    ports: &[PortSampleRow],
    port: Option<&str>,
    tcp_timestamps: bool,
    threads: &[ThreadCpu],
) -> Analysis {
    analyze_recorded(run, cpus, ports, port, tcp_timestamps, threads, false)
}

/// [`analyze_with`] for a run recorded on this board (`imported` false) or imported from
/// another (`imported` true): an imported run is judged on its own samples only — this
/// board's ports (whether its `eth0` is virtual, has a carrier) say nothing about the board
/// that ran it (issue 22 item 11: imported runs were called "no carrier").
pub(crate) fn analyze_recorded(
    run: &RunRow,
    cpus: &[CpuSampleRow],
    ports: &[PortSampleRow],
    port: Option<&str>,
    tcp_timestamps: bool,
    threads: &[ThreadCpu],
    imported: bool,
) -> Analysis {
    let f = Facts::gather(run, cpus, ports, port, tcp_timestamps, threads, imported);
    let evidence = f.evidence(run);
    let (verdict, verdict_text, received_short) = f.judge(run);
    Analysis {
        bitrate_bps: f.bitrate,
        ceiling_bps: f.ceiling,
        ceiling_basis: f.basis,
        percent_of_ceiling: f.pct,
        verdict,
        verdict_text,
        evidence,
        cores: f.cores,
        rate_check: f.rate_check,
        threads: threads.to_vec(),
        received_percent_short: received_short,
        board: Vec::new(),
    }
}

/// What a run is judged from: its bitrate against the link's ceiling, the board's cores and
/// netperfd's busiest stream thread during it, and the rate asked for.
struct Facts {
    /// The bitrate judged (receiver goodput, else sender), bits/s.
    bitrate: Option<f64>,
    transport: Transport,
    /// The link's ceiling, bits/s, and how it was found (or why it is unknown).
    ceiling: Option<f64>,
    basis: String,
    /// `bitrate` as % of `ceiling`.
    pct: Option<f64>,
    cores: Vec<CoreLoad>,
    /// The busiest single core.
    hottest: Option<CoreLoad>,
    /// Every single core at least [`CORE_SATURATED`] busy.
    all_saturated: bool,
    /// Distinct CPU sample times.
    n_samples: usize,
    rate_check: Option<crate::engine::shortfall::RateCheck>,
    busiest_thread: Option<ThreadCpu>,
}

impl Facts {
    /// Gather the facts (arguments as [`analyze_recorded`]'s).
    fn gather(
        run: &RunRow,
        cpus: &[CpuSampleRow],
        ports: &[PortSampleRow],
        port: Option<&str>,
        tcp_timestamps: bool,
        threads: &[ThreadCpu],
        imported: bool,
    ) -> Facts {
        let bitrate = run.receiver_bps.or(run.sender_bps).filter(|b| *b > 0.0);
        let transport = if run.protocol.is_udp() {
            Transport::Udp
        } else {
            Transport::Tcp
        };
        let (ceiling, basis) = link_ceiling(run, ports, port, tcp_timestamps, imported, transport);
        let pct = match (bitrate, ceiling) {
            (Some(b), Some(c)) if c > 0.0 => Some(b * 100.0 / c),
            _ => None,
        };
        let cores = core_loads(cpus);
        let hottest = cores
            .iter()
            .filter(|c| c.cpu >= 0)
            .max_by(|a, b| a.busy.total_cmp(&b.busy))
            .copied();
        let per_core: Vec<&CoreLoad> = cores.iter().filter(|c| c.cpu >= 0).collect();
        let all_saturated =
            !per_core.is_empty() && per_core.iter().all(|c| c.busy >= CORE_SATURATED);
        let busiest_thread = threads
            .iter()
            .max_by(|a, b| a.mean_percent.total_cmp(&b.mean_percent))
            .copied();
        Facts {
            bitrate,
            transport,
            ceiling,
            basis,
            pct,
            hottest,
            all_saturated,
            n_samples: sample_count(cpus),
            rate_check: crate::results::shortfall::for_run(run),
            busiest_thread,
            cores,
        }
    }

    /// The facts behind the verdict, one sentence each.
    fn evidence(&self, run: &RunRow) -> Vec<String> {
        let mut evidence = Vec::new();
        if let Some(c) = &self.rate_check {
            evidence.push(c.sentence());
        }
        if let Some(p) = self.pct {
            evidence.push(format!(
                "{} is {:.1} % of the {} ceiling ({})",
                crate::model::display::rate(self.bitrate.unwrap_or(0.0)),
                p,
                crate::model::display::rate(self.ceiling.unwrap_or(0.0)),
                self.basis
            ));
        } else {
            evidence.push(format!("ceiling unknown: {}", self.basis));
        }
        if let Some(h) = self.hottest {
            evidence.push(format!(
                "busiest core cpu{}: {:.0} % busy on average (user {:.0} %, system {:.0} %, irq {:.0} %, softirq {:.0} %), peak {:.0} %",
                h.cpu, h.busy, h.user, h.system, h.irq, h.softirq, h.peak_busy
            ));
        } else {
            evidence.push("no CPU samples".to_string());
        }
        let n_samples = self.n_samples;
        if n_samples < 2 {
            evidence.push(format!(
                "{n_samples} CPU sample(s): the monitor samples once a second"
            ));
        }
        if let Some(t) = self.busiest_thread {
            evidence.push(format!(
                "busiest netperfd stream thread (TID {}): {:.0} % of a core on average, peak {:.0} %, {} samples",
                t.tid, t.mean_percent, t.peak_percent, t.samples
            ));
        }
        if let Some(l) = run.lost_percent.filter(|l| *l > 0.0) {
            evidence.push(format!("UDP loss {l:.2} %"));
        }
        if let Some(r) = run.retransmits.filter(|r| *r > 0) {
            evidence.push(format!("{r} TCP retransmits"));
        }
        evidence
    }

    /// The verdict (first rule that matches), in words, and, when the sender reached the rate
    /// asked for but the receiver got less, what it got as % of the target.
    fn judge(&self, run: &RunRow) -> (Verdict, String, Option<f64>) {
        let (rate_check, transport) = (self.rate_check, self.transport);
        // Reached: what arrived (else what was sent) is ≥ 97 % of the rate asked for.
        let reached = rate_check.filter(|c| {
            c.reached()
                && c.received_bits_per_second.unwrap_or(c.sent_bits_per_second) * 100.0
                    >= crate::engine::shortfall::SHORTFALL_PERCENT * c.target_bits_per_second
        });
        let tool_bound = self
            .busiest_thread
            .is_some_and(|t| t.mean_percent >= FULL_CORE && t.samples > 0);
        // The sender reached the rate but the receiver got less: received as % of the target.
        let received_short = rate_check.filter(|c| c.reached()).and_then(|c| {
            let p = c.received_bits_per_second? * 100.0 / c.target_bits_per_second;
            (p < crate::engine::shortfall::SHORTFALL_PERCENT).then_some(p)
        });
        // A UDP sender other than the board fell short: nothing on the board slows a UDP sender.
        let board_sent = run.direction == RunDirection::Send && !run.kind.forwards();
        let sender_short = rate_check
            .filter(|c| c.short && transport == Transport::Udp && !board_sent)
            .map(|c| c.sent_percent);
        // The board's own UDP sender fell short with no core of the board saturated: a share of
        // a core too small (a CPU quota, a higher-priority task) — the truth set's case (h) read
        // "limited elsewhere" while its pacer said it did not get the CPU.
        let board_short = rate_check
            .filter(|c| c.short && transport == Transport::Udp && board_sent)
            .map(|c| c.sent_percent);
        let mut verdict = match (self.bitrate, self.pct, self.hottest) {
            (None, _, _) => Verdict::NoResult,
            // Allow 0.1 % for rounding and clock differences before calling it impossible.
            (_, Some(p), _) if p > 100.1 => Verdict::MeasurementError,
            _ if reached.is_some() => Verdict::RateLimited,
            _ if self.n_samples < 2 => Verdict::TooShort,
            (_, Some(p), _) if p >= LINK_BOUND => Verdict::LinkBound,
            _ if sender_short.is_some() => Verdict::SenderShort,
            _ if tool_bound => Verdict::ToolBound,
            (_, _, Some(h)) if h.busy >= CORE_SATURATED => {
                if h.softirq + h.irq >= h.busy / 2.0 {
                    Verdict::SoftirqBound
                } else if self.all_saturated {
                    Verdict::AllCoresSaturated
                } else {
                    Verdict::CoreSaturated
                }
            }
            _ if board_short.is_some() => Verdict::SenderShort,
            _ => Verdict::LimitedElsewhere,
        };
        let mut verdict_text = verdict.text().to_string();
        if let (Verdict::SenderShort, Some(p)) = (verdict, sender_short.or(board_short)) {
            verdict_text = format!("{verdict_text}: {p:.1} % of the rate asked");
        }
        if let Some(p) = received_short {
            // Nothing on the board to blame, or the board sent it all (its own cores did not lose
            // what went missing): lost on the way.
            if verdict == Verdict::LimitedElsewhere
                || (board_sent
                    && matches!(
                        verdict,
                        Verdict::CoreSaturated
                            | Verdict::AllCoresSaturated
                            | Verdict::SoftirqBound
                            | Verdict::ToolBound
                    ))
            {
                verdict = Verdict::LostOnTheWay;
            }
            verdict_text = short_text(verdict.text(), p);
        }
        (verdict, verdict_text, received_short)
    }
}

/// The ceiling (bits/s) of the link that carried `run` — `port`'s samples (default: the first
/// port sampled) give its speed and MTU — and how it was computed, or why it is unknown.
fn link_ceiling(
    run: &RunRow,
    ports: &[PortSampleRow],
    port: Option<&str>,
    tcp_timestamps: bool,
    imported: bool,
    transport: Transport,
) -> (Option<f64>, String) {
    let port = port
        .map(str::to_string)
        .or_else(|| ports.first().map(|p| p.ifname.clone()));
    let mine: Vec<&PortSampleRow> = ports
        .iter()
        .filter(|p| Some(&p.ifname) == port.as_ref())
        .collect();
    let speed = mine.iter().filter_map(|p| p.speed_mbps).max();
    let mtu = mine.iter().filter_map(|p| p.mtu).max();
    let ipv6 = run.local_host.contains(':') || run.peer_host.contains(':');
    let udp_payload = crate::results::asked::Asked::of(run).len;
    match (speed, mtu) {
        (Some(s), Some(m)) if m > 0 => {
            let f = Framing {
                transport,
                ipv6,
                mtu: m as u32,
                tcp_timestamps,
                udp_payload: if transport == Transport::Udp {
                    udp_payload
                } else {
                    None
                },
            };
            match f.ceiling_bps(s as f64 * 1e6) {
                Some(c) => (
                    Some(c),
                    format!(
                        "{} Mbit/s link on {}, {}",
                        s,
                        port.as_deref().unwrap_or("?"),
                        f.describe()
                    ),
                ),
                None => (None, format!("MTU {m} carries no payload")),
            }
        }
        _ => (
            None,
            match &port {
                Some(p) if imported => format!(
                    "link speed of {p} not recorded on the board that ran it (a virtual port, no carrier, or no driver figure)"
                ),
                Some(p) if port_is_virtual(p) => {
                    format!("virtual port {p} — no physical ceiling")
                }
                Some(p) => {
                    format!("link speed of {p} unknown (no carrier, or the driver reports none)")
                }
                None => "no port samples (link speed unknown)".to_string(),
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunProtocol;
    use crate::model::RunStatus;
    use crate::model::{RunDirection, RunRole};

    fn tcp(ipv6: bool, mtu: u32, ts: bool) -> Framing {
        Framing {
            transport: Transport::Tcp,
            ipv6,
            mtu,
            tcp_timestamps: ts,
            udp_payload: None,
        }
    }

    fn mbit(f: Framing, link_mbps: f64) -> f64 {
        let c = f.ceiling_bps(link_mbps * 1e6).unwrap() / 1e6;
        (c * 100.0).round() / 100.0
    }

    #[test]
    fn ceiling_table_1gbe_mtu_1500() {
        assert_eq!(mbit(tcp(false, 1500, true), 1000.0), 941.48);
        assert_eq!(mbit(tcp(false, 1500, false), 1000.0), 949.28);
        assert_eq!(mbit(tcp(true, 1500, true), 1000.0), 928.48);
        let udp = Framing {
            transport: Transport::Udp,
            ipv6: false,
            mtu: 1500,
            tcp_timestamps: false,
            udp_payload: None,
        };
        assert_eq!(mbit(udp, 1000.0), 957.09);
        // -l 1472 is the same datagram.
        assert_eq!(
            mbit(
                Framing {
                    udp_payload: Some(1472),
                    ..udp
                },
                1000.0
            ),
            957.09
        );
    }

    #[test]
    fn ceiling_scales_with_speed_and_mtu() {
        assert_eq!(mbit(tcp(false, 1500, true), 100.0), 94.15);
        assert_eq!(mbit(tcp(false, 1500, true), 2500.0), 2353.71);
        assert_eq!(mbit(tcp(false, 1500, true), 10000.0), 9414.82);
        // Jumbo: (9000-52)/(9000+38).
        assert_eq!(mbit(tcp(false, 9000, true), 1000.0), 990.04);
        assert_eq!(mbit(tcp(false, 9000, true), 10000.0), 9900.42);
    }

    #[test]
    fn ceiling_small_and_fragmented_datagrams() {
        let u = |l| Framing {
            transport: Transport::Udp,
            ipv6: false,
            mtu: 1500,
            tcp_timestamps: false,
            udp_payload: Some(l),
        };
        // 64-byte payload: 64+28 = 92-byte packet, 130 bytes on the wire.
        assert_eq!(mbit(u(64), 1000.0), 492.31);
        // 8-byte payload pads to the 46-byte minimum: 8/84.
        assert_eq!(mbit(u(8), 1000.0), 95.24);
        // 8000 bytes over MTU 1500: 8008 bytes in 6 fragments of ≤1480, each +20+38.
        let f = u(8000).payload_fraction().unwrap();
        assert!((f - 8000.0 / (8008.0 + 6.0 * 58.0)).abs() < 1e-12);
        assert_eq!(tcp(false, 52, true).payload_fraction(), None);
    }

    fn run(proto: &str, bps: f64) -> RunRow {
        RunRow {
            id: 1,
            role: RunRole::Client,
            protocol: RunProtocol::parse(proto),
            status: RunStatus::Completed,
            peer_host: "192.0.2.2".into(),
            peer_port: 5201,
            local_host: "192.0.2.1".into(),
            local_port: 40000,
            bind_dev: None,
            direction: RunDirection::Send,
            params: serde_json::json!({"len": 0}),
            started_at: 0,
            ended_at: Some(10_000),
            error: None,
            sender_bps: Some(bps),
            receiver_bps: Some(bps),
            bytes: None,
            retransmits: Some(0),
            lost_packets: None,
            total_packets: None,
            lost_percent: None,
            jitter_ms: None,
            suite_id: None,
            kind: crate::model::RunKind::Iperf3,
            parent_id: None,
            summary: serde_json::Value::Null,
            invalid: Vec::new(),
        }
    }

    fn port(speed: Option<i64>) -> PortSampleRow {
        PortSampleRow {
            t: 1.0,
            ifname: "eth0".into(),
            seconds: 1.0,
            speed_mbps: speed,
            mtu: Some(1500),
            ..Default::default()
        }
    }

    fn cpu(core: i32, user: f64, softirq: f64) -> CpuSampleRow {
        CpuSampleRow {
            t: 1.0,
            cpu: core,
            user,
            softirq,
            idle: 100.0 - user - softirq,
            ..Default::default()
        }
    }

    /// The same core loads sampled at t = 1 s and t = 2 s (two samples: enough to judge).
    fn twice(v: &[CpuSampleRow]) -> Vec<CpuSampleRow> {
        let mut out = v.to_vec();
        for c in v {
            let mut c2 = *c;
            c2.t = 2.0;
            out.push(c2);
        }
        out
    }

    fn paced(proto: &str, target: u64, sent: f64, received: f64) -> RunRow {
        let mut r = run(proto, sent);
        r.receiver_bps = Some(received);
        r.params = serde_json::json!({"len": 0, "bandwidth": target, "parallel": 1});
        r
    }

    fn thread(pct: f64) -> ThreadCpu {
        ThreadCpu {
            tid: 4242,
            mean_percent: pct,
            peak_percent: pct,
            samples: 4,
        }
    }

    #[test]
    fn verdict_link_bound_and_measurement_error() {
        let p = [port(Some(1000))];
        let calm = twice(&[cpu(0, 20.0, 10.0), cpu(1, 5.0, 0.0)]);
        let a = analyze(&run("TCP", 935e6), &calm, &p, None, true);
        assert_eq!(a.verdict, Verdict::LinkBound);
        assert!((a.percent_of_ceiling.unwrap() - 99.31).abs() < 0.01);
        let a = analyze(&run("TCP", 960e6), &calm, &p, None, true);
        assert_eq!(a.verdict, Verdict::MeasurementError);
        // UDP uses the UDP ceiling: 950 Mbit/s is link-bound, not an error.
        let a = analyze(&run("UDP", 950e6), &calm, &p, None, true);
        assert_eq!(a.verdict, Verdict::LinkBound);
    }

    #[test]
    fn verdict_softirq_bound() {
        let p = [port(Some(1000))];
        let hot_soft = twice(&[cpu(0, 10.0, 85.0), cpu(1, 5.0, 0.0)]);
        let a = analyze(&run("TCP", 600e6), &hot_soft, &p, None, true);
        assert_eq!(a.verdict, Verdict::SoftirqBound);
        assert!(a.evidence.iter().any(|e| e.contains("cpu0: 95 % busy")));
    }

    #[test]
    fn verdict_one_core_saturated() {
        let p = [port(Some(1000))];
        let hot_user = twice(&[cpu(0, 30.0, 0.0), cpu(1, 92.0, 3.0)]);
        let a = analyze(&run("TCP", 600e6), &hot_user, &p, None, true);
        assert_eq!(a.verdict, Verdict::CoreSaturated);
        assert_eq!(a.verdict_text, "one core saturated");
    }

    #[test]
    fn verdict_all_cores_saturated() {
        let p = [port(Some(1000))];
        let all = twice(&[cpu(0, 95.0, 2.0), cpu(1, 93.0, 5.0)]);
        let a = analyze(&run("TCP", 600e6), &all, &p, None, true);
        assert_eq!(a.verdict, Verdict::AllCoresSaturated);
    }

    #[test]
    fn verdict_limited_elsewhere() {
        let p = [port(Some(1000))];
        let calm = twice(&[cpu(0, 20.0, 10.0), cpu(1, 5.0, 0.0)]);
        let a = analyze_with(&run("TCP", 600e6), &calm, &p, None, true, &[thread(40.0)]);
        assert_eq!(a.verdict, Verdict::LimitedElsewhere);
        let mut failed = run("TCP", 0.0);
        failed.receiver_bps = None;
        failed.sender_bps = None;
        assert_eq!(
            analyze(&failed, &calm, &p, None, true).verdict,
            Verdict::NoResult
        );
    }

    #[test]
    fn verdict_reached_the_requested_rate() {
        // A paced 100M UDP test that got there: not "limited elsewhere", not "one core
        // saturated", even with a busy core.
        let p = [port(Some(1000))];
        let hot = twice(&[cpu(0, 30.0, 0.0), cpu(1, 95.0, 3.0)]);
        let a = analyze(
            &paced("UDP", 100_000_000, 100.1e6, 99.9e6),
            &hot,
            &p,
            None,
            true,
        );
        assert_eq!(a.verdict, Verdict::RateLimited);
        assert_eq!(
            a.verdict_text,
            "reached the requested rate (rate-limited by request)"
        );
        assert!(!a.rate_check.unwrap().short);
        // Reached even with a single CPU sample (a short paced run).
        let one = [cpu(0, 10.0, 0.0)];
        let a = analyze(&paced("UDP", 100_000_000, 99e6, 98e6), &one, &p, None, true);
        assert_eq!(a.verdict, Verdict::RateLimited);
    }

    /// Issue 22 item 5: UDP 1000M, sent in full, 11.44 % lost, every core busy. The card
    /// under target / sent / received and the verdict tell one story: not a green "reached"
    /// beside an amber "all cores saturated".
    #[test]
    fn sent_in_full_but_lost_is_one_story() {
        let p = [port(Some(10_000))];
        let all = twice(&[cpu(0, 95.0, 2.0), cpu(1, 96.0, 1.0)]);
        // The board received: its saturated cores explain the loss.
        let mut r = paced("UDP", 1_000_000_000, 999.6e6, 885.2e6);
        r.direction = RunDirection::Receive;
        r.lost_percent = Some(11.44);
        let a = analyze(&r, &all, &p, None, true);
        assert_eq!(a.verdict, Verdict::AllCoresSaturated);
        assert_eq!(
            a.verdict_text,
            "all cores saturated: the requested rate was sent, the receiver got 88.5 % of it"
        );
        let (note, tone) = a.rate_note().unwrap();
        assert_eq!(note, "sent in full; the receiver got only 88.5 % of it");
        assert_eq!((tone, a.verdict.tone()), ("warn", "warn"));
        // The board sent it all: the loss was on the way, whatever its cores did.
        r.direction = RunDirection::Send;
        let a = analyze(&r, &all, &p, None, true);
        assert_eq!(a.verdict, Verdict::LostOnTheWay);
        assert!(
            a.verdict_text.starts_with("lost on the way"),
            "{}",
            a.verdict_text
        );
        assert_eq!(a.rate_note().unwrap().1, a.verdict.tone());
        // Reached at both ends: green card, green verdict.
        let a = analyze(
            &paced("UDP", 100_000_000, 100e6, 99.5e6),
            &all,
            &p,
            None,
            true,
        );
        assert_eq!(
            a.rate_note().unwrap(),
            ("reached the requested rate".into(), "good")
        );
        assert_eq!(a.verdict.tone(), "good");
        // The sender fell short: a red card, never "reached".
        let a = analyze(&paced("UDP", 100_000_000, 52e6, 52e6), &all, &p, None, true);
        assert_eq!(a.rate_note().unwrap().1, "bad");
        assert!(a.received_percent_short.is_none());
    }

    /// Issue 22 item 11: an imported run's port is not looked up on this board.
    #[test]
    fn imported_runs_are_judged_on_their_own_samples() {
        // "lo" exists here and is virtual: a local run on it says so…
        let mut r = run("TCP", 600e6);
        r.bind_dev = Some("lo".into());
        let none = PortSampleRow {
            ifname: "lo".into(),
            speed_mbps: None,
            ..port(None)
        };
        let a = analyze(&r, &[], std::slice::from_ref(&none), Some("lo"), true);
        assert_eq!(a.ceiling_basis, "virtual port lo — no physical ceiling");
        // …an imported one does not borrow this board's port.
        let a = analyze_recorded(&r, &[], &[none], Some("lo"), true, &[], true);
        assert!(
            a.ceiling_basis
                .starts_with("link speed of lo not recorded on the board that ran it"),
            "{}",
            a.ceiling_basis
        );
        // With the speed in its samples it gets its ceiling as any run.
        let a = analyze_recorded(&r, &[], &[port(Some(1000))], Some("eth0"), true, &[], true);
        assert!(a.ceiling_bps.is_some());
    }

    #[test]
    fn verdict_shortfall_is_in_the_evidence_and_not_reached() {
        let p = [port(Some(1000))];
        let calm = twice(&[cpu(0, 20.0, 10.0), cpu(1, 5.0, 0.0)]);
        let a = analyze(
            &paced("UDP", 100_000_000, 52e6, 52e6),
            &calm,
            &p,
            None,
            true,
        );
        assert_ne!(a.verdict, Verdict::RateLimited);
        let c = a.rate_check.unwrap();
        assert!(c.short);
        assert!(
            a.evidence[0].starts_with("shortfall: the sender sent 52"),
            "{:?}",
            a.evidence
        );
    }

    /// Issue 38's truth set: a board-core verdict on a run whose lost datagrams none of the
    /// board's counters hold (a router's queue beyond it) becomes "lost on the way"; one
    /// whose loss a receiving socket holds says so; a core verdict with the loss in the
    /// board's own socket stays (its cores may be why the reader fell behind).
    #[test]
    fn the_loss_ledger_places_the_shortfall() {
        let mut r = paced("UDP", 150_000_000, 150e6, 50e6);
        // The board received (a board that sent is judged lost on the way already).
        r.direction = RunDirection::Receive;
        let hot = twice(&[cpu(-1, 90.0, 5.0), cpu(0, 92.0, 4.0), cpu(1, 93.0, 4.0)]);
        let a = analyze(&r, &hot, &[], None, true);
        assert_eq!(a.verdict, Verdict::AllCoresSaturated);
        let mut beyond = a.clone();
        beyond.place_the_loss(false, false);
        assert_eq!(beyond.verdict, Verdict::LostOnTheWay);
        assert_eq!(
            beyond.verdict_text,
            "lost on the way (the path or the receiver): the requested rate was sent, the receiver got 33.3 % of it"
        );
        let mut own_socket = a.clone();
        own_socket.place_the_loss(true, true);
        assert_eq!(own_socket.verdict, Verdict::AllCoresSaturated);
        let mut peer_socket = a;
        peer_socket.place_the_loss(false, true);
        assert_eq!(
            peer_socket.verdict_text,
            "lost at the receiver (its socket buffer): the requested rate was sent, the receiver got 33.3 % of it"
        );
        // Not short: nothing changes.
        let calm = paced("UDP", 100_000_000, 100e6, 100e6);
        let mut b = analyze(&calm, &hot, &[], None, true);
        let before = b.clone();
        b.place_the_loss(false, true);
        assert_eq!(b, before);
    }

    /// Issue 38's truth set (tests/truth.rs h): stock iperf3 on a PC held to 2 % of a core
    /// sent 46 % of 1 Gbit/s to the board, which lost nothing while the lab's load kept its
    /// cores busy: the sender is the limit (UDP: nothing on the board slows a sender), not
    /// the board's cores. The board's own sender falling short is judged as before.
    #[test]
    fn a_short_udp_sender_elsewhere_is_the_limit() {
        let mut r = paced("UDP", 1_000_000_000, 465e6, 465e6);
        r.direction = RunDirection::Receive;
        let hot = twice(&[cpu(-1, 90.0, 5.0), cpu(0, 92.0, 4.0), cpu(1, 93.0, 4.0)]);
        let a = analyze(&r, &hot, &[], None, true);
        assert_eq!(a.verdict, Verdict::SenderShort);
        assert_eq!(
            a.verdict_text,
            "limited by the sender (it sent less than asked): 46.5 % of the rate asked"
        );
        assert_eq!(a.verdict.tone(), "warn");
        r.direction = RunDirection::Send;
        assert_eq!(
            analyze(&r, &hot, &[], None, true).verdict,
            Verdict::AllCoresSaturated
        );
        // The board's own sender short with its cores idle (a CPU quota: the truth set's
        // case (h) read "limited elsewhere"): the sender is the limit.
        let idle = twice(&[cpu(-1, 5.0, 1.0), cpu(0, 6.0, 1.0), cpu(1, 4.0, 1.0)]);
        let a = analyze(&r, &idle, &[], None, true);
        assert_eq!(a.verdict, Verdict::SenderShort);
        assert_eq!(
            a.verdict_text,
            "limited by the sender (it sent less than asked): 46.5 % of the rate asked"
        );
        let mut tcp = paced("TCP", 1_000_000_000, 465e6, 465e6);
        tcp.direction = RunDirection::Receive;
        assert_ne!(
            analyze(&tcp, &hot, &[], None, true).verdict,
            Verdict::SenderShort
        );
    }

    #[test]
    fn verdict_too_short_to_judge() {
        // A 0.04 s transfer: no CPU sample at all, or one.
        let p = [port(Some(1000))];
        let a = analyze(&run("TCP", 600e6), &[], &p, None, true);
        assert_eq!(a.verdict, Verdict::TooShort);
        let a = analyze(&run("TCP", 600e6), &[cpu(0, 99.0, 0.0)], &p, None, true);
        assert_eq!(a.verdict, Verdict::TooShort);
    }

    #[test]
    fn verdict_tool_bound() {
        // A stream thread at 98 % of a core (seed 001's UDP send stuck at 674 of 949 Mbit/s):
        // the tool is the limit, before the core-saturated rule.
        let p = [port(Some(1000))];
        let hot = twice(&[cpu(0, 30.0, 0.0), cpu(1, 98.0, 2.0)]);
        let a = analyze_with(&run("UDP", 674e6), &hot, &p, None, true, &[thread(98.0)]);
        assert_eq!(a.verdict, Verdict::ToolBound);
        assert!(
            a.evidence
                .iter()
                .any(|e| e.contains("(TID 4242): 98 % of a core")),
            "{:?}",
            a.evidence
        );
    }

    #[test]
    fn virtual_port_has_no_physical_ceiling() {
        let calm = twice(&[cpu(0, 20.0, 10.0), cpu(1, 5.0, 0.0)]);
        let mut veth = port(None);
        veth.ifname = "veth-np0".into();
        let a = analyze(&run("TCP", 20e9), &calm, &[veth], None, true);
        assert_eq!(a.ceiling_bps, None);
        assert_eq!(a.percent_of_ceiling, None);
        assert_eq!(a.verdict, Verdict::LimitedElsewhere);
        assert_eq!(
            a.ceiling_basis,
            "virtual port veth-np0 — no physical ceiling"
        );
        assert!(!a.ceiling_basis.contains("driver"));
        assert!(port_is_virtual("lo"));
    }

    #[test]
    fn core_means_over_samples() {
        let mut a = cpu(0, 40.0, 0.0);
        let mut b = cpu(0, 80.0, 10.0);
        a.t = 1.0;
        b.t = 2.0;
        let l = core_loads(&[a, b, cpu(-1, 30.0, 5.0)]);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].cpu, -1);
        assert_eq!(l[1].busy, 65.0);
        assert_eq!(l[1].peak_busy, 90.0);
        assert_eq!(l[1].softirq, 5.0);
    }
}
