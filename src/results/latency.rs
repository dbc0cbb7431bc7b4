//! What a latency-under-load run measured: RTT percentiles per phase (idle → loaded → idle),
//! the increase under load, responsiveness in round trips per minute, probe loss, and a
//! verdict in words with the queue the increase implies. Pure functions over the probes; the
//! runner stores the result as the run's summary (the `--json` document of
//! `netperfd latency`). Method and sources: `docs/latency.md`.

use crate::engine::latency::{Probe, ProberStats};
use crate::model::display;
use crate::model::stats::{percentile, sorted_finite};
use serde::{Deserialize, Serialize};

/// RTT percentiles of one set of samples, ms. Nearest-rank percentiles (the smallest sample
/// with at least p % of the samples at or below it).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct RttStats {
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub p50: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub p90: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub p99: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub min: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub max: f64,
    /// Number of samples.
    pub n: usize,
}

impl RttStats {
    /// Statistics of `v` (any order); `None` when empty.
    pub(crate) fn of(v: &[f64]) -> Option<RttStats> {
        let s = sorted_finite(v);
        Some(RttStats {
            p50: percentile(&s, 50.0)?,
            p90: percentile(&s, 90.0)?,
            p99: percentile(&s, 99.0)?,
            min: *s.first()?,
            max: *s.last()?,
            n: s.len(),
        })
    }
}

/// One phase of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct Phase {
    /// "idle", "loaded" or "idle after".
    pub name: String,
    /// The load's direction in this phase: "none", "upload", "download" or "both".
    pub direction: String,
    /// Start and end, seconds since the run started.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub start: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub end: f64,
    /// ICMP echo RTT of the answered probes sent in this phase, ms.
    pub rtt_ms: Option<RttStats>,
    /// TCP RTT of the load's sending streams (TCP_INFO `tcpi_rtt`, sampled each interval), ms;
    /// only where the board sends (upload or both).
    pub tcp_rtt_ms: Option<RttStats>,
    /// Probes sent in this phase and lost (no reply within the timeout).
    pub sent: u64,
    pub lost: u64,
    /// The load's goodput in this phase, bits/s (received bytes of every stream; both
    /// directions summed for "both"); `None` in idle phases.
    pub bits_per_second: Option<f64>,
    /// UDP echo one-way delays (peer = netperfd), ms above each direction's idle minimum, and
    /// the echo's round trip; absent when the peer has no echo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_ms: Option<crate::results::owd::PhaseOwd>,
    /// Loaded phase only: loaded − idle p50 of each direction's one-way delay, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd_increase_ms: Option<crate::results::owd::OwdIncrease>,
    /// The loaded phase's streams where the board sends (load up or both).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up: Option<DirectionLoad>,
    /// The loaded phase's streams where the board receives (load down or both).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down: Option<DirectionLoad>,
}

/// The load in one direction (`loaded.up` = the board sends, `loaded.down` = the board
/// receives); with load "both" the two legs of `iperf3 --bidir` apart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct DirectionLoad {
    /// Goodput, bits/s: the receiver's bytes over its time, summed over this direction's
    /// streams (the sender's where no receiver figures came).
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub bits_per_second: f64,
    /// Streams in this direction.
    pub streams: usize,
    /// TCP RTT of the board's sending streams (TCP_INFO `tcpi_rtt` each interval), ms; only
    /// in `up`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_rtt_ms: Option<RttStats>,
}

/// Probe counts over the whole run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct ProbeTotals {
    pub sent: u64,
    pub lost: u64,
    /// lost / sent, percent.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub lost_percent: f64,
    /// Time between probes, ms.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub interval_ms: f64,
    /// "ping socket" or "raw socket".
    pub socket: String,
    /// The probe threads' priority: "nice -10", or "nice 0 (raising it was refused)".
    pub priority: String,
    /// How late the probe clock woke after each deadline, µs: p50, p99, max.
    pub late_us: LateStats,
    /// Slots skipped because the clock woke more than one interval late.
    pub skipped: u64,
    /// Replies that came after their probe was counted lost.
    pub late_replies: u64,
    /// CPU time of the prober's two threads, ms, and as percent of one core over the run.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub cpu_ms: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub cpu_percent: f64,
}

/// Lateness of the probe clock, µs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct LateStats {
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub p50: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub p99: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub max: f64,
}

/// The result of a latency-under-load run: the run's stored summary (written by
/// `runs::latency`, read back with [`LatencyResult::of_summary`]: the same bytes) and the
/// `--json` document of `netperfd latency`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct LatencyResult {
    /// Idle phase before the load.
    #[serde(default)]
    pub idle: Phase,
    /// The loaded phase.
    #[serde(default)]
    pub loaded: Phase,
    /// Idle phase after the load (shows whether the queue drained).
    #[serde(default)]
    pub idle_after: Phase,
    /// loaded p50 − idle p50, ms (ICMP probes).
    #[serde(default)]
    pub increase_ms: Option<f64>,
    /// Responsiveness: round trips per minute at the loaded p50 ICMP RTT = 60 000 / RTT ms
    /// (IETF draft "Responsiveness under Working Conditions": 60 / RTT in seconds).
    #[serde(default)]
    pub rpm: Option<f64>,
    /// The same at the idle p50.
    #[serde(default)]
    pub idle_rpm: Option<f64>,
    /// The queue the increase implies, bytes ([`QueueEstimate`]): each direction's one-way
    /// delay growth × that direction's goodput ÷ 8 when the echo gave one-way delays, else the
    /// ICMP increase × the loaded direction's goodput ÷ 8 (with load "both": an upper bound at
    /// the faster direction's goodput).
    #[serde(default)]
    pub queue_bytes: Option<f64>,
    /// Where that queue is and how it was sized; absent with `queue_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueEstimate>,
    pub probes: ProbeTotals,
    /// The UDP echo (one-way delays): answered or not, and why not; absent when not tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo: Option<crate::results::owd::EchoSummary>,
    /// One sentence: "latency under load grows by 98 ms: a 1.19 MB queue at the bottleneck …".
    #[serde(default)]
    pub verdict: String,
    /// The load's congestion control as its sockets used it (the run page shows it): set on
    /// the stored summary of a run whose load reported; absent from `netperfd latency --json`
    /// and from runs stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<Congestion>,
}

/// The congestion control the load's sockets used, each side's (`null` when unknown).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct Congestion {
    pub sender: Option<String>,
    pub receiver: Option<String>,
}

impl LatencyResult {
    /// A stored summary read back (`runs.summary_json` of a latency run); `None` when it is
    /// not one (null: the run failed before it had a result; an object without `probes`:
    /// another kind's). Every other key defaults when absent (summaries stored before it was
    /// kept, partial ones); a NaN or infinite figure stored as `null` reads as NaN.
    pub(crate) fn of_summary(v: &serde_json::Value) -> Option<LatencyResult> {
        LatencyResult::deserialize(v).ok()
    }
}

/// Inputs of [`summarize`].
pub(crate) struct Inputs<'a> {
    /// Every probe (answered and lost), any order.
    pub probes: &'a [Probe],
    /// TCP RTT samples of the load's sending streams: (seconds since start, ms).
    pub tcp_rtt: &'a [(f64, f64)],
    /// Load start and end, seconds since start; `end` = when the run ended.
    pub load_start: f64,
    pub load_end: f64,
    pub end: f64,
    /// "upload", "download" or "both".
    pub direction: &'a str,
    /// The load's goodput, bits/s.
    pub bits_per_second: Option<f64>,
    /// Goodput (bits/s) and stream count of the streams where the board sends (`up`) and
    /// where it receives (`down`); `None` where the load has no such streams.
    pub up: Option<(f64, usize)>,
    pub down: Option<(f64, usize)>,
    pub stats: &'a ProberStats,
    pub interval_ms: f64,
    /// The UDP echo prober's outcome; `None` when it was not started.
    pub echo: Option<&'a crate::engine::echo::EchoStats>,
}

fn phase(
    name: &'static str,
    dir: &str,
    start: f64,
    end: f64,
    i: &Inputs<'_>,
    bps: Option<f64>,
) -> Phase {
    let inside = |t: f64| t >= start && t < end;
    let ps: Vec<&Probe> = i.probes.iter().filter(|p| inside(p.t)).collect();
    let rtts: Vec<f64> = ps.iter().filter_map(|p| p.rtt_ms).collect();
    let tcp: Vec<f64> = i
        .tcp_rtt
        .iter()
        .filter(|(t, _)| inside(*t))
        .map(|x| x.1)
        .collect();
    let tcp_rtt_ms = RttStats::of(&tcp);
    // Only the loaded phase (the one with a goodput) has the load's directions.
    let leg = |v: Option<(f64, usize)>, rtt: Option<RttStats>| {
        v.filter(|_| bps.is_some())
            .map(|(bits_per_second, streams)| DirectionLoad {
                bits_per_second,
                streams,
                tcp_rtt_ms: rtt,
            })
    };
    Phase {
        name: name.into(),
        direction: dir.to_string(),
        start,
        end,
        rtt_ms: RttStats::of(&rtts),
        tcp_rtt_ms,
        sent: ps.len() as u64,
        lost: ps.iter().filter(|p| p.rtt_ms.is_none()).count() as u64,
        bits_per_second: bps,
        owd_ms: None,
        owd_increase_ms: None,
        up: leg(i.up, tcp_rtt_ms),
        down: leg(i.down, None),
    }
}

/// Where the queue a latency run implies sits, and its size.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct QueueEstimate {
    /// Bytes queued at the loaded p50: Σ over the sized directions of delay growth (s) ×
    /// goodput (bits/s) ÷ 8.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub bytes: f64,
    /// "upstream" (board → peer), "downstream" (peer → board), "both ways", or "the
    /// bottleneck" (no one-way delays and one loaded direction).
    pub place: String,
    /// The goodput the queue was sized at, bits/s (the sized directions' sum).
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub bits_per_second: f64,
    /// `true` when the split between directions is unknown (load "both" without one-way
    /// delays): `bytes` is an upper bound, sized at the faster direction's goodput.
    pub upper_bound: bool,
    /// "one-way delays (UDP echo)" or "ICMP round trips".
    pub from: String,
}

/// One-way delay growth below this (ms) is not a queue in that direction (probe jitter on an
/// idle path is tens of µs; 1 ms is the same floor the verdict uses for "stays flat").
const OWD_QUEUE_FLOOR_MS: f64 = 1.0;

/// The queue behind a run's latency increase.
///
/// * With one-way delays (the peer answered the UDP echo): each direction whose delay grew by
///   [`OWD_QUEUE_FLOOR_MS`] or more and carried load holds growth × that direction's goodput ÷
///   8 bytes; the queues of both directions add up. (Before, load "both" sized one queue from
///   the ICMP increase at the two directions' summed goodput: 0.470 MB at 305 Mbit/s where the
///   one-way delays put all the growth upstream, ≈0.147 MB at 95 Mbit/s.)
/// * Without: the ICMP increase × the loaded direction's goodput ÷ 8; with load "both" the
///   round trip's growth may sit in either direction, so the size is an upper bound at the
///   faster direction's goodput.
///
/// `increase_ms` is the ICMP p50 increase, `owd` the loaded − idle one-way delay p50s (ms),
/// `up`/`down` each direction's goodput (bits/s), `total` the load's goodput. `None` when no
/// increase or no goodput is known, or the increase is not positive.
pub(crate) fn queue_estimate(
    increase_ms: Option<f64>,
    owd: Option<&crate::results::owd::OwdIncrease>,
    direction: &str,
    up: Option<f64>,
    down: Option<f64>,
    total: Option<f64>,
) -> Option<QueueEstimate> {
    if let Some(o) = owd {
        let legs: Vec<(&str, f64, f64)> = [("upstream", o.up, up), ("downstream", o.down, down)]
            .into_iter()
            .filter_map(|(w, inc, r)| {
                let r = r.filter(|r| *r > 0.0)?;
                (inc >= OWD_QUEUE_FLOOR_MS).then_some((w, inc, r))
            })
            .collect();
        if !legs.is_empty() {
            let bytes = legs.iter().map(|(_, inc, r)| inc / 1e3 * r / 8.0).sum();
            let bits_per_second = legs.iter().map(|(_, _, r)| r).sum();
            let place = match legs.as_slice() {
                [(w, _, _)] => (*w).to_string(),
                _ => "both ways".to_string(),
            };
            return Some(QueueEstimate {
                bytes,
                place,
                bits_per_second,
                upper_bound: false,
                from: "one-way delays (UDP echo)".into(),
            });
        }
    }
    let inc = increase_ms.filter(|i| *i > 0.0)?;
    let (rate, place, upper_bound) = match direction {
        "upload" => (up.or(total), "upstream", false),
        "download" => (down.or(total), "downstream", false),
        _ => match (up, down) {
            (Some(u), Some(d)) => (Some(u.max(d)), "the bottleneck", true),
            _ => (total, "the bottleneck", true),
        },
    };
    let rate = rate.filter(|r| *r > 0.0)?;
    Some(QueueEstimate {
        bytes: inc / 1e3 * rate / 8.0,
        place: place.into(),
        bits_per_second: rate,
        upper_bound,
        from: "ICMP round trips".into(),
    })
}

/// The words for an increase: "latency under load grows by 98 ms (p50 0.05 → 98 ms): a
/// 1.19 MB queue upstream at 95.1 Mbit/s".
pub(crate) fn verdict(
    idle_p50: Option<f64>,
    loaded_p50: Option<f64>,
    queue: Option<&QueueEstimate>,
    lost_percent: f64,
) -> String {
    let (Some(i), Some(l)) = (idle_p50, loaded_p50) else {
        return "no verdict: no probe was answered in the idle or the loaded phase".into();
    };
    let inc = l - i;
    let ms = |v: f64| {
        // "-0.0 ms" reads as a figure below zero: a value that rounds to 0 is 0.
        let v = if v.abs() < 0.005 { 0.0 } else { v };
        if v.abs() < 10.0 {
            format!("{v:.2} ms")
        } else {
            format!("{v:.0} ms")
        }
    };
    let mut s = if inc < 1.0 {
        format!(
            "latency under load stays flat (p50 {} idle, {} loaded): no standing queue at the bottleneck",
            ms(i),
            ms(l)
        )
    } else {
        let q = queue
            .map(|q| {
                let at = if q.place == "the bottleneck" {
                    "at the bottleneck".to_string()
                } else {
                    q.place.clone()
                };
                format!(
                    ": {}a {} queue {at} at {}",
                    if q.upper_bound { "at most " } else { "" },
                    display::size(q.bytes),
                    display::rate(q.bits_per_second)
                )
            })
            .unwrap_or_default();
        format!(
            "latency under load grows by {} (p50 {} idle → {} loaded){q}",
            ms(inc),
            ms(i),
            ms(l)
        )
    };
    if lost_percent >= 1.0 {
        s.push_str(&format!("; {lost_percent:.1} % of the probes were lost"));
    }
    s
}

/// The headline of a latency run as the page shows it: the stored verdict, except that "stays
/// flat … no standing queue" becomes a caution when `notes` ([`fill_notes`]) say the load may
/// not have filled the queue — a flat line is then not a pass. With its tone: "good" (under
/// 5 ms and nothing speaks against the load), "warn" (30 ms and more), or "".
pub(crate) fn headline(
    verdict: &str,
    increase_ms: Option<f64>,
    notes: &[String],
) -> (String, &'static str) {
    let text = if notes.is_empty() {
        verdict.to_string()
    } else {
        verdict.replace(
            ": no standing queue at the bottleneck",
            ": but the load may not have filled the queue (see below), so this does not show the buffer is small",
        )
    };
    let tone = match increase_ms {
        Some(i) if i < 5.0 && notes.is_empty() => "good",
        Some(i) if i >= 30.0 => "warn",
        _ => "",
    };
    (text, tone)
}

/// Compute the result of a run.
pub(crate) fn summarize(i: &Inputs<'_>) -> LatencyResult {
    let idle = phase("idle", "none", 0.0, i.load_start, i, None);
    let loaded = phase(
        "loaded",
        i.direction,
        i.load_start,
        i.load_end,
        i,
        i.bits_per_second,
    );
    let mut idle_after = phase("idle after", "none", i.load_end, f64::INFINITY, i, None);
    let mut idle = idle;
    let mut loaded = loaded;
    let echo = i.echo.map(|st| {
        use crate::results::owd;
        let base = owd::bases(&st.samples, i.load_start);
        idle.owd_ms = owd::phase(&st.samples, base, 0.0, i.load_start);
        loaded.owd_ms = owd::phase(&st.samples, base, i.load_start, i.load_end);
        idle_after.owd_ms = owd::phase(&st.samples, base, i.load_end, f64::INFINITY);
        loaded.owd_increase_ms = owd::increase(idle.owd_ms.as_ref(), loaded.owd_ms.as_ref());
        owd::summary(st, base)
    });
    let ip50 = idle.rtt_ms.map(|r| r.p50);
    let lp50 = loaded.rtt_ms.map(|r| r.p50);
    let increase_ms = ip50.zip(lp50).map(|(a, b)| b - a);
    let rpm_of = |ms: f64| (ms > 0.0).then(|| 60_000.0 / ms);
    let sent = i.probes.len() as u64;
    let lost = i.probes.iter().filter(|p| p.rtt_ms.is_none()).count() as u64;
    let lost_percent = if sent > 0 {
        lost as f64 * 100.0 / sent as f64
    } else {
        0.0
    };
    let mut late = i.stats.lateness_us.clone();
    crate::model::order::sort_by(&mut late, f64::total_cmp);
    let cpu_ms = i.stats.cpu_us as f64 / 1e3;
    let queue = queue_estimate(
        increase_ms,
        loaded.owd_increase_ms.as_ref(),
        i.direction,
        i.up.map(|u| u.0),
        i.down.map(|d| d.0),
        i.bits_per_second,
    );
    LatencyResult {
        increase_ms,
        rpm: lp50.and_then(rpm_of),
        idle_rpm: ip50.and_then(rpm_of),
        queue_bytes: queue.as_ref().map(|q| q.bytes),
        verdict: verdict(ip50, lp50, queue.as_ref(), lost_percent),
        queue,
        probes: ProbeTotals {
            sent,
            lost,
            lost_percent,
            interval_ms: i.interval_ms,
            socket: i.stats.socket.to_string(),
            priority: if i.stats.boosted {
                format!("nice {}", crate::engine::latency::PROBE_NICE)
            } else {
                "nice 0 (raising it was refused)".into()
            },
            late_us: LateStats {
                p50: percentile(&late, 50.0).unwrap_or(0.0),
                p99: percentile(&late, 99.0).unwrap_or(0.0),
                max: late.last().copied().unwrap_or(0.0),
            },
            skipped: i.stats.skipped,
            late_replies: i.stats.late_replies,
            cpu_ms,
            cpu_percent: if i.end > 0.0 {
                cpu_ms / 10.0 / i.end
            } else {
                0.0
            },
        },
        echo,
        idle,
        loaded,
        idle_after,
        congestion: None,
    }
}

/// A latency run's headline figures as suite and compare tables show them, read from the
/// run's stored summary (a [`LatencyResult`]). All RTTs are ICMP echo RTTs, ms.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub(crate) struct LatencyFigures {
    /// Idle phase (before the load) RTT p50, ms.
    pub idle_p50_ms: Option<f64>,
    /// Loaded phase RTT p50 and p99, ms.
    pub loaded_p50_ms: Option<f64>,
    pub loaded_p99_ms: Option<f64>,
    /// loaded p50 − idle p50, ms.
    pub increase_ms: Option<f64>,
    /// Round trips per minute at the loaded p50 (60 000 / ms).
    pub rpm: Option<f64>,
    /// The load's goodput, bits/s (both directions summed for load "both").
    pub bits_per_second: Option<f64>,
    /// Probes sent and lost over the run.
    pub probes_sent: u64,
    pub probes_lost: u64,
}

impl LatencyFigures {
    /// The figures of a stored summary; `None` when it is not a latency result (e.g. the run
    /// is still running, or failed before it had one).
    pub(crate) fn of_summary(v: &serde_json::Value) -> Option<LatencyFigures> {
        LatencyResult::of_summary(v).map(|r| LatencyFigures::of(&r))
    }

    /// The figures of a latency result.
    pub(crate) fn of(r: &LatencyResult) -> LatencyFigures {
        LatencyFigures {
            idle_p50_ms: r.idle.rtt_ms.map(|s| s.p50),
            loaded_p50_ms: r.loaded.rtt_ms.map(|s| s.p50),
            loaded_p99_ms: r.loaded.rtt_ms.map(|s| s.p99),
            increase_ms: r.increase_ms,
            rpm: r.rpm,
            bits_per_second: r.loaded.bits_per_second,
            probes_sent: r.probes.sent,
            probes_lost: r.probes.lost,
        }
    }

    /// One line for tables: "idle p50 0.06 ms · loaded p50 83.0 ms, p99 104.2 ms · +82.9 ms ·
    /// RPM 722 · 95.3 Mbit/s"; "—" for a figure that is unknown.
    pub(crate) fn text(&self) -> String {
        let ms = |v: Option<f64>| match v {
            Some(v) if v.abs() < 10.0 => format!("{v:.2} ms"),
            Some(v) => format!("{v:.1} ms"),
            None => "—".into(),
        };
        let inc = match self.increase_ms {
            Some(v) if v >= 0.0 => format!("+{}", ms(Some(v))),
            other => ms(other),
        };
        format!(
            "idle p50 {} · loaded p50 {}, p99 {} · {inc} · RPM {} · {}",
            ms(self.idle_p50_ms),
            ms(self.loaded_p50_ms),
            ms(self.loaded_p99_ms),
            self.rpm.map(display::whole).unwrap_or_else(|| "—".into()),
            self.bits_per_second
                .map(|b| format!("{:.1} Mbit/s", b / 1e6))
                .unwrap_or_else(|| "—".into()),
        )
    }
}

/// A latency run's stored `params`: its spec, and `congestion_default` (written only when
/// netperfd chose the load's congestion control, [`crate::runs`]' latency launcher) after the
/// spec's keys. Written whole by the runner; read back leniently (each key on its own,
/// runs stored before a key was kept still read) as what the page's notes need.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LatencyParams<'a> {
    #[serde(flatten)]
    pub spec: &'a crate::spec::latency::LatencySpec,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub congestion_default: bool,
}

impl LatencyParams<'_> {
    /// The params as stored (an object; `Null` only if serialization failed, which a spec
    /// of plain fields does not).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// What the latency page's notes read of a stored run's `params` (see [`LatencyParams`]):
/// `load` ("up", "down", "both"), `streams` per direction, `loaded_s` (s), the asked
/// `congestion` and whether netperfd chose it. Missing or mistyped keys read as absent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(crate) struct StoredLatencyParams {
    pub load: Option<String>,
    pub streams: Option<u64>,
    pub loaded_s: Option<u64>,
    pub congestion: Option<String>,
    pub congestion_default: Option<bool>,
}

impl StoredLatencyParams {
    /// `params` read once; all absent when they are not an object of these keys.
    pub(crate) fn of_params(params: &serde_json::Value) -> StoredLatencyParams {
        StoredLatencyParams::deserialize(params).unwrap_or_default()
    }
}

/// The congestion control of a latency run's load in words: what was asked (`-C`) or, when
/// nothing was, what the sending streams used (the run's `summary.congestion`, read from the
/// sockets); `None` when neither is known (runs recorded before it was kept).
pub(crate) fn congestion_text(
    used: Option<&Congestion>,
    params: &StoredLatencyParams,
) -> Option<String> {
    let sender = used
        .and_then(|c| c.sender.clone())
        .filter(|c| !c.is_empty());
    let receiver = used
        .and_then(|c| c.receiver.clone())
        .filter(|c| !c.is_empty());
    if let Some(c) = params.congestion.as_deref().filter(|c| !c.is_empty()) {
        if params.congestion_default == Some(true) {
            return Some(format!(
                "{c} on both hosts (netperfd's default for a latency load: a loss-based load fills the queue whatever the hosts' own default; -C default keeps theirs)"
            ));
        }
        return Some(format!("{c} (asked with -C, on both hosts)"));
    }
    match (sender, receiver) {
        (Some(a), Some(b)) if a != b => Some(format!(
            "{a} and {b} (each host's default; none asked with -C)"
        )),
        (Some(a), _) | (None, Some(a)) => {
            Some(format!("{a} (the hosts' default; none asked with -C)"))
        }
        (None, None) => None,
    }
}

/// Why the load of a latency run may not have filled the bottleneck's queue, one sentence
/// each (empty when nothing speaks against it): fewer than
/// [`crate::spec::latency::FILLING_STREAMS`] streams per direction, BBR (which keeps queues
/// short by design), a loaded phase under 5 s. From the run's `params` and the congestion
/// control its load used (its summary's).
pub(crate) fn fill_notes(used: Option<&Congestion>, params: &StoredLatencyParams) -> Vec<String> {
    let mut out = Vec::new();
    let streams = params.streams.unwrap_or(1);
    let want = crate::spec::latency::FILLING_STREAMS as u64;
    if streams < want {
        out.push(format!(
            "The load may not have filled the queue: {} per direction (RRUL loads {want} each way); the increase may be understated.",
            if streams == 1 {
                "1 TCP stream".to_string()
            } else {
                format!("{streams} TCP streams")
            }
        ));
    }
    let cc = [
        params.congestion.as_deref(),
        used.and_then(|c| c.sender.as_deref()),
        used.and_then(|c| c.receiver.as_deref()),
    ];
    if cc.iter().flatten().any(|c| c.starts_with("bbr")) {
        out.push(
            "The load used BBR, which keeps queues short by design: the increase shows BBR's queue, not how deep the buffer is (use -C cubic to fill it).".into(),
        );
    }
    if let Some(l) = params.loaded_s.filter(|l| *l < 5) {
        out.push(format!(
            "The loaded phase was {l} s: loss-based TCP may not have grown into the queue that soon."
        ));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {

    /// The typed writer of a latency run's params stores what the runner's `json!` edit
    /// stored (the spec, then `congestion_default: true` only when netperfd chose), and the
    /// page's reader reads both back.
    #[test]
    fn latency_params_are_stored_as_before() {
        let spec = crate::spec::latency::LatencySpec {
            host: "198.51.100.2".into(),
            congestion: Some("cubic".into()),
            bind_dev: Some("eth1".into()),
            ..Default::default()
        };
        for chosen in [false, true] {
            let mut old = serde_json::to_value(&spec).unwrap();
            if chosen {
                old.as_object_mut()
                    .unwrap()
                    .insert("congestion_default".into(), true.into());
            }
            let new = LatencyParams {
                spec: &spec,
                congestion_default: chosen,
            }
            .to_value();
            assert_eq!(new.to_string(), old.to_string());
            let back = StoredLatencyParams::of_params(&new);
            assert_eq!(back.streams, Some(u64::from(spec.streams)));
            assert_eq!(back.congestion.as_deref(), Some("cubic"));
            assert_eq!(back.congestion_default, chosen.then_some(true));
        }
    }
    use super::*;

    /// Issue 22 item 6: the page says which congestion control loaded the path and when the
    /// load may not have filled the queue.
    #[test]
    fn congestion_and_fill_notes() {
        use serde_json::json;
        let p = |v: serde_json::Value| StoredLatencyParams::of_params(&v);
        let rrul = p(json!({"streams": 4, "loaded_s": 10, "load": "both"}));
        let used = |v: serde_json::Value| -> Option<Congestion> {
            serde_json::from_value::<Congestion>(v["congestion"].clone()).ok()
        };
        let sum = used(json!({"congestion": {"sender": "cubic", "receiver": "cubic"}}));
        let sum = sum.as_ref();
        assert_eq!(
            congestion_text(sum, &rrul).as_deref(),
            Some("cubic (the hosts' default; none asked with -C)")
        );
        assert!(fill_notes(sum, &rrul).is_empty());
        let one = p(json!({"streams": 1, "loaded_s": 3, "congestion": "bbr"}));
        assert_eq!(
            congestion_text(sum, &one).as_deref(),
            Some("bbr (asked with -C, on both hosts)")
        );
        let notes = fill_notes(sum, &one);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0]
            .starts_with("The load may not have filled the queue: 1 TCP stream per direction"));
        assert!(notes[1].contains("BBR"));
        assert!(notes[2].contains("3 s"));
        let mixed = used(json!({"congestion": {"sender": "bbr", "receiver": "cubic"}}));
        let mixed = mixed.as_ref();
        assert_eq!(
            congestion_text(mixed, &rrul).as_deref(),
            Some("bbr and cubic (each host's default; none asked with -C)")
        );
        assert_eq!(fill_notes(mixed, &rrul).len(), 1);
        assert_eq!(congestion_text(used(json!({})).as_ref(), &rrul), None);
        // Issue 38 item 4c: chosen by netperfd, not asked for.
        let auto = p(
            json!({"streams": 4, "loaded_s": 10, "congestion": "cubic", "congestion_default": true}),
        );
        assert!(congestion_text(sum, &auto)
            .unwrap()
            .starts_with("cubic on both hosts (netperfd's default for a latency load"));
        assert!(fill_notes(sum, &auto).is_empty());
    }

    /// Issue 38 item 4c: a flat line under a load that may not have filled the queue is not
    /// shown green, nor as "no standing queue".
    #[test]
    fn no_green_headline_when_the_load_may_not_have_filled_the_queue() {
        let v = verdict(Some(0.3), Some(0.9), None, 0.0);
        assert_eq!(headline(&v, Some(0.6), &[]), (v.clone(), "good"));
        let notes = vec!["The load used BBR …".to_string()];
        let (text, tone) = headline(&v, Some(0.6), &notes);
        assert_eq!(tone, "");
        assert!(!text.contains("no standing queue"), "{text}");
        assert!(text.contains("may not have filled the queue"), "{text}");
        assert_eq!(headline("x", Some(45.0), &notes).1, "warn");
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        let s = RttStats::of(&v).unwrap();
        assert_eq!(
            (s.p50, s.p90, s.p99, s.min, s.max, s.n),
            (50.0, 90.0, 99.0, 1.0, 100.0, 100)
        );
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(RttStats::of(&[]), None);
    }

    #[test]
    fn phases_increase_rpm_queue_and_verdict() {
        // 5 s idle at 0.5 ms, 10 s loaded at 100.5 ms with 10 lost, 5 s idle after.
        let mut probes = Vec::new();
        for k in 0..2000u64 {
            let t = k as f64 * 0.01;
            let rtt = if (5.0..15.0).contains(&t) {
                if k % 100 == 0 {
                    None
                } else {
                    Some(100.5)
                }
            } else {
                Some(0.5)
            };
            probes.push(Probe {
                seq: k,
                t,
                rtt_ms: rtt,
            });
        }
        let stats = ProberStats {
            sent: 2000,
            lateness_us: vec![60.0; 2000],
            cpu_us: 40_000,
            socket: "raw socket",
            ..Default::default()
        };
        let r = summarize(&Inputs {
            probes: &probes,
            tcp_rtt: &[(6.0, 101.0), (1.0, 0.2)],
            load_start: 5.0,
            load_end: 15.0,
            end: 20.0,
            direction: "download",
            bits_per_second: Some(95e6),
            up: Some((5e6, 1)),
            down: Some((90e6, 2)),
            stats: &stats,
            interval_ms: 10.0,
            echo: None,
        });
        // Per direction in the loaded phase only; the TCP RTT with the board's sending leg.
        let up = r.loaded.up.as_ref().unwrap();
        assert_eq!((up.bits_per_second, up.streams), (5e6, 1));
        assert_eq!(up.tcp_rtt_ms.unwrap().p50, 101.0);
        let down = r.loaded.down.as_ref().unwrap();
        assert_eq!(
            (down.bits_per_second, down.streams, down.tcp_rtt_ms),
            (90e6, 2, None)
        );
        assert!(r.idle.up.is_none() && r.idle_after.down.is_none());
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["loaded"]["up"]["bits_per_second"], 5e6);
        assert_eq!(j["loaded"]["down"]["bits_per_second"], 90e6);
        assert!(j["idle"].get("up").is_none());
        assert_eq!(r.idle.rtt_ms.unwrap().p50, 0.5);
        assert_eq!(r.loaded.rtt_ms.unwrap().p99, 100.5);
        assert_eq!(r.loaded.sent, 1000);
        assert_eq!(r.loaded.lost, 10);
        assert_eq!(r.idle_after.sent, 500);
        assert_eq!(r.loaded.tcp_rtt_ms.unwrap().n, 1);
        assert_eq!(r.idle.tcp_rtt_ms.unwrap().p50, 0.2);
        assert!((r.increase_ms.unwrap() - 100.0).abs() < 1e-9);
        assert!((r.rpm.unwrap() - 60_000.0 / 100.5).abs() < 1e-9);
        // A download without one-way delays: 0.1 s × the download's 90 Mbit/s ÷ 8 = 1 125 000
        // bytes downstream (not at the 95 Mbit/s of both directions summed).
        assert!((r.queue_bytes.unwrap() - 1_125_000.0).abs() < 1.0);
        assert_eq!(r.queue.as_ref().unwrap().place, "downstream");
        assert_eq!(r.probes.lost, 10);
        assert!((r.probes.cpu_percent - 0.2).abs() < 1e-9);
        assert!(
            r.verdict.starts_with("latency under load grows by 100 ms"),
            "{}",
            r.verdict
        );
        assert!(
            r.verdict.contains(" MB queue downstream at 90.0 Mbit/s"),
            "{}",
            r.verdict
        );
        let flat = verdict(Some(0.05), Some(0.3), None, 0.0);
        assert!(flat.contains("stays flat"), "{flat}");
        assert!(verdict(None, Some(1.0), None, 0.0).starts_with("no verdict"));
    }

    /// Issue 38 item 4b: the field's case — load "both", 305 Mbit/s summed (95 up, 210 down),
    /// ICMP p50 +12.3 ms, one-way delays +12.4 ms up and +0.05 ms down. The queue is upstream,
    /// 12.4 ms × 95 Mbit/s ÷ 8 = 147,250 bytes (before: 12.3 ms × 305 Mbit/s ÷ 8 = 0.470 MB).
    #[test]
    fn the_queue_sits_where_the_one_way_delay_grew_at_that_directions_rate() {
        use crate::results::owd::OwdIncrease;
        let owd = OwdIncrease {
            up: 12.4,
            down: 0.05,
        };
        let q = queue_estimate(
            Some(12.3),
            Some(&owd),
            "both",
            Some(95e6),
            Some(210e6),
            Some(305e6),
        )
        .unwrap();
        assert!((q.bytes - 147_250.0).abs() < 1e-6, "{q:?}");
        assert_eq!((q.place.as_str(), q.bits_per_second), ("upstream", 95e6));
        assert!(!q.upper_bound);
        let v = verdict(Some(0.4), Some(12.7), Some(&q), 0.0);
        assert!(
            v.ends_with(": a 0.147 MB queue upstream at 95.0 Mbit/s"),
            "{v}"
        );
        // Both directions grew: the two queues add up, each at its own rate.
        let both = OwdIncrease { up: 8.0, down: 4.0 };
        let q2 =
            queue_estimate(Some(12.0), Some(&both), "both", Some(1e8), Some(2e8), None).unwrap();
        assert!((q2.bytes - (100_000.0 + 100_000.0)).abs() < 1e-6, "{q2:?}");
        assert_eq!(q2.place, "both ways");
        // No one-way delays with load "both": an upper bound at the faster direction.
        let q3 = queue_estimate(
            Some(12.3),
            None,
            "both",
            Some(95e6),
            Some(210e6),
            Some(305e6),
        )
        .unwrap();
        assert!(q3.upper_bound);
        assert!((q3.bytes - 12.3e-3 * 210e6 / 8.0).abs() < 1e-6);
        let v3 = verdict(Some(0.4), Some(12.7), Some(&q3), 0.0);
        assert!(
            v3.contains(": at most a 0.323 MB queue at the bottleneck at 210.0 Mbit/s"),
            "{v3}"
        );
        // An upload without echo: the upload's rate.
        let q4 = queue_estimate(Some(10.0), None, "upload", Some(8e7), None, Some(8e7)).unwrap();
        assert_eq!((q4.bytes, q4.place.as_str()), (100_000.0, "upstream"));
        // Nothing grew: no queue.
        assert_eq!(
            queue_estimate(Some(-0.2), None, "both", Some(1.0), Some(1.0), None),
            None
        );
        // "-0.0 ms" is 0.00 ms.
        assert!(verdict(Some(0.071), Some(0.069), None, 0.0).contains("idle, 0.07 ms loaded"));
        assert!(!verdict(Some(-0.001), Some(0.5), None, 0.0).contains("-0.00"));
    }

    /// A latency run's summary as stored (every key the runner writes, in its order: a
    /// loaded phase with one-way delays and both directions, the echo, the queue, a NaN
    /// figure stored as `null`, the load's congestion control last).
    /// A latency run's summary as the runner stored it.
    pub(crate) const STORED_SUMMARY: &str = r#"{"idle":{"name":"idle","direction":"none","start":0.0,"end":5.0,"rtt_ms":{"p50":0.5,"p90":0.5,"p99":0.61,"min":0.41,"max":0.7,"n":500},"tcp_rtt_ms":null,"sent":500,"lost":0,"bits_per_second":null,"owd_ms":{"up":{"p50":0.02,"p99":0.05,"n":500},"down":{"p50":0.01,"p99":0.04,"n":500},"rtt":{"p50":0.48,"p99":0.6,"n":500}}},"loaded":{"name":"loaded","direction":"both","start":5.0,"end":15.0,"rtt_ms":{"p50":100.5,"p90":101.0,"p99":104.24,"min":60.2,"max":110.0,"n":990},"tcp_rtt_ms":{"p50":101.0,"p90":101.0,"p99":101.0,"min":101.0,"max":101.0,"n":1},"sent":1000,"lost":10,"bits_per_second":95000000.0,"owd_ms":{"up":{"p50":12.4,"p99":14.0,"n":990},"down":{"p50":0.06,"p99":0.1,"n":990},"rtt":null},"owd_increase_ms":{"up":12.38,"down":0.05},"up":{"bits_per_second":5000000.0,"streams":1,"tcp_rtt_ms":{"p50":101.0,"p90":101.0,"p99":101.0,"min":101.0,"max":101.0,"n":1}},"down":{"bits_per_second":90000000.0,"streams":2}},"idle_after":{"name":"idle after","direction":"none","start":15.0,"end":20.0,"rtt_ms":{"p50":0.5,"p90":0.5,"p99":0.5,"min":0.5,"max":0.5,"n":500},"tcp_rtt_ms":null,"sent":500,"lost":0,"bits_per_second":null},"increase_ms":100.0,"rpm":597.0149253731344,"idle_rpm":120000.0,"queue_bytes":7750.0,"queue":{"bytes":7750.0,"place":"upstream","bits_per_second":5000000.0,"upper_bound":false,"from":"one-way delays (UDP echo)"},"probes":{"sent":2000,"lost":10,"lost_percent":0.5,"interval_ms":10.0,"socket":"raw socket","priority":"nice -10","late_us":{"p50":60.0,"p99":60.0,"max":60.0},"skipped":0,"late_replies":0,"cpu_ms":40.0,"cpu_percent":null},"echo":{"port":5299,"answered":true,"sent":2000,"replies":1990,"lost":10,"base_up_ms":3.25,"base_down_ms":-3.1,"clock":"CLOCK_MONOTONIC","note":null},"verdict":"latency under load grows by 100 ms: a 0.008 MB queue upstream at 5.0 Mbit/s","congestion":{"sender":"cubic","receiver":null}}"#;

    /// An early summary: none of the keys added since (verdict, queue, echo, congestion, the
    /// probe clock's socket and priority).
    pub(crate) fn early_summary() -> serde_json::Value {
        serde_json::json!({
            "idle": {"name": "idle", "direction": "none", "start": 0.0, "end": 5.0,
                "rtt_ms": {"p50": 0.5, "p90": 0.5, "p99": 0.5, "min": 0.5, "max": 0.5, "n": 500},
                "tcp_rtt_ms": null, "sent": 500, "lost": 0, "bits_per_second": null},
            "loaded": {"name": "loaded", "direction": "download", "start": 5.0, "end": 15.0,
                "rtt_ms": {"p50": 83.0, "p90": 90.0, "p99": 104.24, "min": 1.0, "max": 110.0, "n": 990},
                "tcp_rtt_ms": null, "sent": 1000, "lost": 10, "bits_per_second": 95.3e6},
            "idle_after": {"name": "idle after", "direction": "none", "start": 15.0, "end": 20.0,
                "rtt_ms": null, "tcp_rtt_ms": null, "sent": 500, "lost": 0, "bits_per_second": null},
            "increase_ms": 82.5, "rpm": 722.9, "idle_rpm": 120000.0, "queue_bytes": 982875.0,
            "probes": {"sent": 2000, "lost": 10, "lost_percent": 0.5, "interval_ms": 10.0,
                "late_us": {"p50": 60.0, "p99": 60.0, "max": 60.0}, "skipped": 0,
                "late_replies": 0, "cpu_ms": 40.0, "cpu_percent": 0.2}
        })
    }

    /// Issue 40 item 1: a stored summary read through [`LatencyResult`] and written back is
    /// the same bytes (the `null` of a NaN figure included); the runner's typed `congestion`
    /// writes the bytes its JSON insert wrote; a summary stored before the newer keys
    /// (`verdict`, `queue`, `echo`, `congestion`, the probe clock's figures) still reads.
    #[test]
    fn stored_summaries_read_back_byte_for_byte() {
        let v: serde_json::Value = serde_json::from_str(STORED_SUMMARY).unwrap();
        let r = LatencyResult::of_summary(&v).expect("a latency summary");
        assert!(r.probes.cpu_percent.is_nan());
        assert_eq!(r.loaded.owd_increase_ms.map(|o| o.up), Some(12.38));
        assert_eq!(
            r.congestion.as_ref().and_then(|c| c.sender.as_deref()),
            Some("cubic")
        );
        assert_eq!(serde_json::to_string(&r).unwrap(), STORED_SUMMARY);
        // Through a Value too, as the store writes it.
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), STORED_SUMMARY);

        // The runner's former way (insert "congestion" into the serialized result) and the
        // typed field write the same bytes.
        let mut typed = r.clone();
        let congestion = typed.congestion.take();
        let mut inserted = serde_json::to_value(&typed).unwrap();
        if let Some(o) = inserted.as_object_mut() {
            let c = congestion.clone().unwrap();
            o.insert(
                "congestion".into(),
                serde_json::json!({"sender": c.sender, "receiver": c.receiver}),
            );
        }
        typed.congestion = congestion;
        assert_eq!(
            serde_json::to_string(&inserted).unwrap(),
            serde_json::to_string(&serde_json::to_value(&typed).unwrap()).unwrap()
        );

        // An early summary: none of the keys added since.
        let old = early_summary();
        let r = LatencyResult::of_summary(&old).expect("an early summary reads");
        assert_eq!((r.verdict.as_str(), r.probes.socket.as_str()), ("", ""));
        assert!(r.echo.is_none() && r.queue.is_none() && r.congestion.is_none());
        let f = LatencyFigures::of(&r);
        assert_eq!((f.loaded_p50_ms, f.probes_lost), (Some(83.0), 10));
        // Not a latency summary: null, another kind's object.
        assert_eq!(LatencyResult::of_summary(&serde_json::Value::Null), None);
        assert_eq!(
            LatencyResult::of_summary(&serde_json::json!({"ports": {}, "seconds": 3.0})),
            None
        );
    }

    #[test]
    fn figures_of_a_stored_summary() {
        let v = serde_json::json!({
            "idle": {"rtt_ms": {"p50": 0.06}},
            "loaded": {"rtt_ms": {"p50": 83.0, "p99": 104.24}, "bits_per_second": 95.3e6},
            "increase_ms": 82.94, "rpm": 722.9,
            "probes": {"sent": 2100, "lost": 3}
        });
        let f = LatencyFigures::of_summary(&v).unwrap();
        assert_eq!(f.loaded_p99_ms, Some(104.24));
        assert_eq!((f.probes_sent, f.probes_lost), (2100, 3));
        assert_eq!(
            f.text(),
            "idle p50 0.06 ms · loaded p50 83.0 ms, p99 104.2 ms · +82.9 ms · RPM 723 · 95.3 Mbit/s"
        );
        assert_eq!(LatencyFigures::of_summary(&serde_json::Value::Null), None);
    }
}
