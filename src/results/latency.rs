//! What a latency-under-load run measured: RTT percentiles per phase (idle → loaded → idle),
//! the increase under load, responsiveness in round trips per minute, probe loss, and a
//! verdict in words with the queue the increase implies. Pure functions over the probes; the
//! runner stores the result as the run's summary (the `--json` document of
//! `netperfd latency`). Method and sources: `docs/latency.md`.

use crate::engine::latency::{Probe, ProberStats};
use crate::model::display;
use crate::model::stats::{percentile, sorted_finite};
use serde::Serialize;

/// RTT percentiles of one set of samples, ms. Nearest-rank percentiles (the smallest sample
/// with at least p % of the samples at or below it).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct RttStats {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
    /// Number of samples.
    pub n: usize,
}

impl RttStats {
    /// Statistics of `v` (any order); `None` when empty.
    pub fn of(v: &[f64]) -> Option<RttStats> {
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
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Phase {
    /// "idle", "loaded" or "idle after".
    pub name: &'static str,
    /// The load's direction in this phase: "none", "upload", "download" or "both".
    pub direction: String,
    /// Start and end, seconds since the run started.
    pub start: f64,
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
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirectionLoad {
    /// Goodput, bits/s: the receiver's bytes over its time, summed over this direction's
    /// streams (the sender's where no receiver figures came).
    pub bits_per_second: f64,
    /// Streams in this direction.
    pub streams: usize,
    /// TCP RTT of the board's sending streams (TCP_INFO `tcpi_rtt` each interval), ms; only
    /// in `up`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_rtt_ms: Option<RttStats>,
}

/// Probe counts over the whole run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProbeTotals {
    pub sent: u64,
    pub lost: u64,
    /// lost / sent, percent.
    pub lost_percent: f64,
    /// Time between probes, ms.
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
    pub cpu_ms: f64,
    pub cpu_percent: f64,
}

/// Lateness of the probe clock, µs.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct LateStats {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The result of a latency-under-load run (the run's summary and `--json` document).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencyResult {
    /// Idle phase before the load.
    pub idle: Phase,
    /// The loaded phase.
    pub loaded: Phase,
    /// Idle phase after the load (shows whether the queue drained).
    pub idle_after: Phase,
    /// loaded p50 − idle p50, ms (ICMP probes).
    pub increase_ms: Option<f64>,
    /// Responsiveness: round trips per minute at the loaded p50 ICMP RTT = 60 000 / RTT ms
    /// (IETF draft "Responsiveness under Working Conditions": 60 / RTT in seconds).
    pub rpm: Option<f64>,
    /// The same at the idle p50.
    pub idle_rpm: Option<f64>,
    /// The queue the increase implies at the loaded throughput: increase_s × bits/s ÷ 8, bytes.
    pub queue_bytes: Option<f64>,
    pub probes: ProbeTotals,
    /// The UDP echo (one-way delays): answered or not, and why not; absent when not tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo: Option<crate::results::owd::EchoSummary>,
    /// One sentence: "latency under load grows by 98 ms: a 1.19 MB queue at the bottleneck …".
    pub verdict: String,
}

/// Inputs of [`summarize`].
pub struct Inputs<'a> {
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
        name,
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

/// The words for an increase: "latency under load grows by 98 ms (p50 0.05 → 98 ms): a
/// 1.19 MB queue at the bottleneck at 95.1 Mbit/s".
pub fn verdict(
    idle_p50: Option<f64>,
    loaded_p50: Option<f64>,
    bps: Option<f64>,
    lost_percent: f64,
) -> String {
    let (Some(i), Some(l)) = (idle_p50, loaded_p50) else {
        return "no verdict: no probe was answered in the idle or the loaded phase".into();
    };
    let inc = l - i;
    let ms = |v: f64| {
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
        let q = bps
            .filter(|b| *b > 0.0)
            .map(|b| {
                format!(
                    ": a {} queue at the bottleneck at {}",
                    display::size(inc / 1e3 * b / 8.0),
                    display::rate(b)
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

/// Compute the result of a run.
pub fn summarize(i: &Inputs<'_>) -> LatencyResult {
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
    LatencyResult {
        increase_ms,
        rpm: lp50.and_then(rpm_of),
        idle_rpm: ip50.and_then(rpm_of),
        queue_bytes: increase_ms
            .zip(i.bits_per_second)
            .map(|(inc, b)| (inc.max(0.0) / 1e3) * b / 8.0),
        verdict: verdict(ip50, lp50, i.bits_per_second, lost_percent),
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
    }
}

/// A latency run's headline figures as suite and compare tables show them, read from the
/// run's stored summary (a [`LatencyResult`]). All RTTs are ICMP echo RTTs, ms.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct LatencyFigures {
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
    pub fn of_summary(v: &serde_json::Value) -> Option<LatencyFigures> {
        let f = |p: &str| v.pointer(p).and_then(serde_json::Value::as_f64);
        let probes_sent = v.pointer("/probes/sent")?.as_u64()?;
        Some(LatencyFigures {
            idle_p50_ms: f("/idle/rtt_ms/p50"),
            loaded_p50_ms: f("/loaded/rtt_ms/p50"),
            loaded_p99_ms: f("/loaded/rtt_ms/p99"),
            increase_ms: f("/increase_ms"),
            rpm: f("/rpm"),
            bits_per_second: f("/loaded/bits_per_second"),
            probes_sent,
            probes_lost: v
                .pointer("/probes/lost")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
        })
    }

    /// One line for tables: "idle p50 0.06 ms · loaded p50 83.0 ms, p99 104.2 ms · +82.9 ms ·
    /// RPM 722 · 95.3 Mbit/s"; "—" for a figure that is unknown.
    pub fn text(&self) -> String {
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
            self.rpm
                .map(|r| format!("{r:.0}"))
                .unwrap_or_else(|| "—".into()),
            self.bits_per_second
                .map(|b| format!("{:.1} Mbit/s", b / 1e6))
                .unwrap_or_else(|| "—".into()),
        )
    }
}

/// The congestion control of a latency run's load in words: what was asked (`-C`) or, when
/// nothing was, what the sending streams used (the run's `summary.congestion`, read from the
/// sockets); `None` when neither is known (runs recorded before it was kept).
pub fn congestion_text(summary: &serde_json::Value, params: &serde_json::Value) -> Option<String> {
    let used = |k: &str| {
        summary["congestion"][k]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(String::from)
    };
    if let Some(c) = params["congestion"].as_str().filter(|c| !c.is_empty()) {
        return Some(format!("{c} (asked with -C, on both hosts)"));
    }
    match (used("sender"), used("receiver")) {
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
/// short by design), a loaded phase under 5 s. From the run's `params` and `summary`.
pub fn fill_notes(summary: &serde_json::Value, params: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let streams = params["streams"].as_u64().unwrap_or(1);
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
        params["congestion"].as_str(),
        summary["congestion"]["sender"].as_str(),
        summary["congestion"]["receiver"].as_str(),
    ];
    if cc.iter().flatten().any(|c| c.starts_with("bbr")) {
        out.push(
            "The load used BBR, which keeps queues short by design: the increase shows BBR's queue, not how deep the buffer is (use -C cubic to fill it).".into(),
        );
    }
    if let Some(l) = params["loaded_s"].as_u64().filter(|l| *l < 5) {
        out.push(format!(
            "The loaded phase was {l} s: loss-based TCP may not have grown into the queue that soon."
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22 item 6: the page says which congestion control loaded the path and when the
    /// load may not have filled the queue.
    #[test]
    fn congestion_and_fill_notes() {
        use serde_json::json;
        let rrul = json!({"streams": 4, "loaded_s": 10, "load": "both"});
        let sum = json!({"congestion": {"sender": "cubic", "receiver": "cubic"}});
        assert_eq!(
            congestion_text(&sum, &rrul).as_deref(),
            Some("cubic (the hosts' default; none asked with -C)")
        );
        assert!(fill_notes(&sum, &rrul).is_empty());
        let one = json!({"streams": 1, "loaded_s": 3, "congestion": "bbr"});
        assert_eq!(
            congestion_text(&sum, &one).as_deref(),
            Some("bbr (asked with -C, on both hosts)")
        );
        let notes = fill_notes(&sum, &one);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0]
            .starts_with("The load may not have filled the queue: 1 TCP stream per direction"));
        assert!(notes[1].contains("BBR"));
        assert!(notes[2].contains("3 s"));
        let mixed = json!({"congestion": {"sender": "bbr", "receiver": "cubic"}});
        assert_eq!(
            congestion_text(&mixed, &rrul).as_deref(),
            Some("bbr and cubic (each host's default; none asked with -C)")
        );
        assert_eq!(fill_notes(&mixed, &rrul).len(), 1);
        assert_eq!(congestion_text(&json!({}), &rrul), None);
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
        // 0.1 s × 95 Mbit/s ÷ 8 = 1 187 500 bytes.
        assert!((r.queue_bytes.unwrap() - 1_187_500.0).abs() < 1.0);
        assert_eq!(r.probes.lost, 10);
        assert!((r.probes.cpu_percent - 0.2).abs() < 1e-9);
        assert!(
            r.verdict.starts_with("latency under load grows by 100 ms"),
            "{}",
            r.verdict
        );
        assert!(r.verdict.contains("1.19 MB queue"), "{}", r.verdict);
        let flat = verdict(Some(0.05), Some(0.3), Some(1e8), 0.0);
        assert!(flat.contains("stays flat"), "{flat}");
        assert!(verdict(None, Some(1.0), None, 0.0).starts_with("no verdict"));
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
