//! One-way delays of a latency run's UDP echo (peer = netperfd): each direction's delay
//! relative to its idle-phase minimum, per phase, and the increase under load per direction.
//!
//! The two hosts' clocks are not synchronised: T2 − T1 (up) and T4 − T3 (down) each carry the
//! unknown offset between them (with opposite signs). Against the minimum of the same
//! direction in the idle phase before the load the offset cancels, leaving how much that
//! direction's delay grew (the queueing on that way). Assumes the clocks do not drift apart
//! noticeably during a run (CLOCK_MONOTONIC of two PCs: a few ppm, i.e. µs over seconds).
//! The round trip (T4 − T1) − (T3 − T2) = up + down needs no synchronisation and is a check
//! against the ICMP RTT. Method: `docs/latency.md`, "UDP echo".

use crate::engine::echo::{EchoSample, EchoStats};
use crate::model::stats::{percentile, sorted_finite};
use serde::{Deserialize, Serialize};

/// p50 / p99 of a set of delays, ms (nearest rank, as the RTT statistics).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct Pct {
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub p50: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub p99: f64,
    /// Number of samples.
    pub n: usize,
}

impl Pct {
    /// Of `v` (any order); `None` when empty.
    pub(crate) fn of(v: &[f64]) -> Option<Pct> {
        let s = sorted_finite(v);
        Some(Pct {
            p50: percentile(&s, 50.0)?,
            p99: percentile(&s, 99.0)?,
            n: s.len(),
        })
    }
}

/// One phase's one-way delays: `up` (board → peer) and `down` (peer → board), ms above the
/// idle-phase minimum of that direction; `rtt` the echo's round trip without the peer's
/// turnaround, ms (absolute: comparable with the ICMP RTT).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct PhaseOwd {
    pub up: Option<Pct>,
    pub down: Option<Pct>,
    pub rtt: Option<Pct>,
}

/// The increase of each direction's p50 under load (loaded − idle, ms).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct OwdIncrease {
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub up: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub down: f64,
}

/// What became of the echo over the run (the result's `echo` key).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub(crate) struct EchoSummary {
    /// The peer's UDP echo port.
    pub port: u16,
    /// Whether the peer answered the echo.
    pub answered: bool,
    /// Requests sent, answered, and neither (lost; not counted when the peer never answered).
    pub sent: u64,
    pub replies: u64,
    pub lost: u64,
    /// The idle-phase minimum of each direction the relative delays start from: raw
    /// T2 − T1 and T4 − T3, ms (they include the clock offset; only their sum means something).
    pub base_up_ms: Option<f64>,
    pub base_down_ms: Option<f64>,
    /// Timestamps' clock.
    pub clock: String,
    /// Why there are no one-way delays: "peer has no netperfd echo", …; `None` when there are.
    pub note: Option<String>,
}

/// Idle-phase minimum of each direction, ns: `(up, down)`; `None` without an answered probe
/// sent before `load_start` (s since the run started).
pub(crate) fn bases(samples: &[EchoSample], load_start: f64) -> Option<(i64, i64)> {
    let idle: Vec<&EchoSample> = samples.iter().filter(|s| s.t < load_start).collect();
    let up = idle.iter().map(|s| s.up_ns).min()?;
    let down = idle.iter().map(|s| s.down_ns).min()?;
    Some((up, down))
}

/// One phase's delays: the samples sent in `[start, end)` s, relative to `base` (ns).
pub(crate) fn phase(
    samples: &[EchoSample],
    base: Option<(i64, i64)>,
    start: f64,
    end: f64,
) -> Option<PhaseOwd> {
    let inside: Vec<&EchoSample> = samples
        .iter()
        .filter(|s| s.t >= start && s.t < end)
        .collect();
    if inside.is_empty() {
        return None;
    }
    let rel = |f: fn(&EchoSample) -> i64, b: i64| -> Vec<f64> {
        inside
            .iter()
            .map(|s| (f(s) - b) as f64 / 1e6)
            .collect::<Vec<f64>>()
    };
    Some(PhaseOwd {
        up: base.and_then(|(u, _)| Pct::of(&rel(|s| s.up_ns, u))),
        down: base.and_then(|(_, d)| Pct::of(&rel(|s| s.down_ns, d))),
        rtt: Pct::of(&inside.iter().map(|s| s.rtt_ms).collect::<Vec<f64>>()),
    })
}

/// loaded p50 − idle p50 per direction; `None` when either phase lacks one.
pub(crate) fn increase(idle: Option<&PhaseOwd>, loaded: Option<&PhaseOwd>) -> Option<OwdIncrease> {
    let (i, l) = (idle?, loaded?);
    Some(OwdIncrease {
        up: l.up?.p50 - i.up?.p50,
        down: l.down?.p50 - i.down?.p50,
    })
}

/// The `echo` summary of a run from the prober's stats (`None`: the echo was not tried).
pub(crate) fn summary(st: &EchoStats, base: Option<(i64, i64)>) -> EchoSummary {
    let replies = st.samples.len() as u64;
    let answered = replies > 0;
    let note = if !answered {
        Some("peer has no netperfd echo".to_string())
    } else if base.is_none() {
        Some("no echo reply in the idle phase: no one-way delays".to_string())
    } else {
        None
    };
    EchoSummary {
        port: st.port,
        answered,
        sent: st.sent,
        replies,
        lost: if answered {
            st.sent.saturating_sub(replies)
        } else {
            0
        },
        base_up_ms: base.map(|b| b.0 as f64 / 1e6),
        base_down_ms: base.map(|b| b.1 as f64 / 1e6),
        clock: "CLOCK_MONOTONIC".into(),
        note,
    }
}

/// One phase of a stored latency summary as far as the echo rows go: its one-way delays
/// and (the loaded phase) their increase; each absent in runs stored without them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct StoredPhase {
    owd_ms: Option<PhaseOwd>,
    owd_increase_ms: Option<OwdIncrease>,
}

/// What [`facts`] reads of a stored latency summary: the echo's summary and the three
/// phases' one-way delays, read once (keys absent in older runs read as absent).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct StoredOwd {
    echo: Option<EchoSummary>,
    idle: Option<StoredPhase>,
    loaded: Option<StoredPhase>,
    idle_after: Option<StoredPhase>,
}

/// A delay as the rows show it, ms: two decimals under 10 ms, one above; "—" unknown.
fn ms(v: Option<f64>) -> String {
    match v.filter(|x| x.is_finite()) {
        Some(x) if x.abs() < 10.0 => format!("{x:.2} ms"),
        Some(x) => format!("{x:.1} ms"),
        None => "—".into(),
    }
}

/// The run page's rows for the echo, from a stored summary: "One-way up (board → peer)" and
/// "One-way down (peer → board)" with p50 / p99 per phase (ms above the idle minimum) and the
/// increase under load, the echo's round trip, or one "UDP echo" row saying why there are none.
/// Empty when the run did not try the echo (older runs) or the summary is not one.
pub(crate) fn facts(s: &serde_json::Value) -> Vec<(String, String)> {
    let Ok(o) = StoredOwd::deserialize(s) else {
        return Vec::new();
    };
    let Some(echo) = &o.echo else {
        return Vec::new();
    };
    let port = echo.port;
    if let Some(note) = &echo.note {
        return vec![(
            "UDP echo".into(),
            format!("{note} (UDP port {port}): round trips from ICMP only"),
        )];
    }
    let owd = |p: &Option<StoredPhase>| p.as_ref().and_then(|p| p.owd_ms);
    let increase = o.loaded.as_ref().and_then(|p| p.owd_increase_ms);
    let mut rows = Vec::new();
    for (up, label) in [
        (true, "One-way up (board → peer)"),
        (false, "One-way down (peer → board)"),
    ] {
        let cell = |phase: &Option<StoredPhase>| {
            let p = owd(phase).and_then(|p| if up { p.up } else { p.down });
            format!(
                "p50 {} / p99 {}",
                ms(p.map(|p| p.p50)),
                ms(p.map(|p| p.p99))
            )
        };
        let inc = increase.map(|i| if up { i.up } else { i.down });
        rows.push((
            label.to_string(),
            format!(
                "idle {} · loaded {} · idle after {} · increase {}{}",
                cell(&o.idle),
                cell(&o.loaded),
                cell(&o.idle_after),
                if inc.is_some_and(|x| x >= 0.0) {
                    "+"
                } else {
                    ""
                },
                ms(inc)
            ),
        ));
    }
    let rtt = owd(&o.loaded).and_then(|p| p.rtt);
    rows.push((
        "UDP echo".into(),
        format!(
            "port {port}, {} of {} answered; one-way delays above each direction's idle minimum \
             (the clocks are not synchronised); loaded round trip without the peer's turnaround \
             p50 {} (= up + down)",
            echo.replies,
            echo.sent,
            ms(rtt.map(|r| r.p50))
        ),
    ));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key-reading rows this module showed before the typed read, kept to check the
    /// typed one against.
    fn old_facts(s: &serde_json::Value) -> Vec<(String, String)> {
        let echo = &s["echo"];
        if !echo.is_object() {
            return Vec::new();
        }
        let port = echo["port"].as_u64().unwrap_or(0);
        if let Some(note) = echo["note"].as_str() {
            return vec![(
                "UDP echo".into(),
                format!("{note} (UDP port {port}): round trips from ICMP only"),
            )];
        }
        let ms = |v: &serde_json::Value| match v.as_f64() {
            Some(x) if x.abs() < 10.0 => format!("{x:.2} ms"),
            Some(x) => format!("{x:.1} ms"),
            None => "—".into(),
        };
        let mut rows = Vec::new();
        for (dir, label) in [
            ("up", "One-way up (board → peer)"),
            ("down", "One-way down (peer → board)"),
        ] {
            let cell = |phase: &str| {
                let p = &s[phase]["owd_ms"][dir];
                format!("p50 {} / p99 {}", ms(&p["p50"]), ms(&p["p99"]))
            };
            let inc = &s["loaded"]["owd_increase_ms"][dir];
            rows.push((
                label.to_string(),
                format!(
                    "idle {} · loaded {} · idle after {} · increase {}{}",
                    cell("idle"),
                    cell("loaded"),
                    cell("idle_after"),
                    if inc.as_f64().is_some_and(|x| x >= 0.0) {
                        "+"
                    } else {
                        ""
                    },
                    ms(inc)
                ),
            ));
        }
        let rtt = &s["loaded"]["owd_ms"]["rtt"];
        rows.push((
            "UDP echo".into(),
            format!(
                "port {port}, {} of {} answered; one-way delays above each direction's idle minimum \
                 (the clocks are not synchronised); loaded round trip without the peer's turnaround \
                 p50 {} (= up + down)",
                echo["replies"].as_u64().unwrap_or(0),
                echo["sent"].as_u64().unwrap_or(0),
                ms(&rtt["p50"])
            ),
        ));
        rows
    }

    /// The typed read shows what the key reads showed: on a stored summary (loaded round
    /// trip `null`), one whose echo did not answer (a note), one with an `idle_after` without
    /// delays, and a summary with no echo (no rows).
    #[test]
    fn typed_rows_equal_the_key_read_rows() {
        let stored: serde_json::Value =
            serde_json::from_str(crate::results::latency::tests::STORED_SUMMARY).unwrap();
        let mut noted = stored.clone();
        noted["echo"]["note"] = "peer has no netperfd echo".into();
        let mut early = stored.clone();
        early.as_object_mut().unwrap().remove("idle_after");
        early["loaded"]
            .as_object_mut()
            .unwrap()
            .remove("owd_increase_ms");
        let mut none = stored.clone();
        none.as_object_mut().unwrap().remove("echo");
        for s in [&stored, &noted, &early, &none] {
            assert_eq!(facts(s), old_facts(s));
        }
        assert_eq!(facts(&stored).len(), 3);
        assert!(
            facts(&stored)[0]
                .1
                .contains("loaded p50 12.4 ms / p99 14.0 ms"),
            "{:?}",
            facts(&stored)
        );
        assert!(facts(&none).is_empty());
    }
    fn sample(seq: u64, t: f64, up_ms: f64, down_ms: f64, offset_ms: f64) -> EchoSample {
        EchoSample {
            seq,
            t,
            up_ns: ((up_ms + offset_ms) * 1e6) as i64,
            down_ns: ((down_ms - offset_ms) * 1e6) as i64,
            rtt_ms: up_ms + down_ms,
        }
    }

    #[test]
    fn relative_delays_cancel_the_clock_offset() {
        // Peer clock 5 s ahead: raw up ≈ +5000 ms, raw down ≈ −5000 ms. Idle 0.2 ms each way
        // (min 0.1), loaded: down +100 ms (the queue), up unchanged.
        let off = 5000.0;
        let mut s = Vec::new();
        for k in 0..200u64 {
            let t = k as f64 * 0.01;
            let jitter = if k % 2 == 0 { 0.1 } else { 0.2 };
            let down = if (1.0..1.5).contains(&t) {
                100.0 + jitter
            } else {
                jitter
            };
            s.push(sample(k, t, jitter, down, off));
        }
        let base = bases(&s, 1.0).unwrap();
        assert!((base.0 as f64 / 1e6 - (0.1 + off)).abs() < 1e-3);
        let idle = phase(&s, Some(base), 0.0, 1.0).unwrap();
        let loaded = phase(&s, Some(base), 1.0, 1.5).unwrap();
        let after = phase(&s, Some(base), 1.5, f64::INFINITY).unwrap();
        assert!(idle.up.unwrap().p50.abs() < 1e-3, "{idle:?}");
        assert!(
            (loaded.down.unwrap().p50 - 100.0).abs() < 1e-3,
            "{loaded:?}"
        );
        assert!(loaded.up.unwrap().p99 < 0.2);
        assert!(after.down.unwrap().p50 < 0.2);
        assert_eq!(loaded.down.unwrap().n, 50);
        let inc = increase(Some(&idle), Some(&loaded)).unwrap();
        assert!(
            (inc.down - 100.0).abs() < 1e-3 && inc.up.abs() < 1e-3,
            "{inc:?}"
        );
        // The round trip carries no offset.
        assert!((loaded.rtt.unwrap().p50 - 100.2).abs() < 0.11);
        let st = EchoStats {
            port: 5291,
            sent: 210,
            samples: s,
            gave_up: false,
            stray: 0,
        };
        let sum = summary(&st, Some(base));
        assert_eq!((sum.answered, sum.replies, sum.lost), (true, 200, 10));
        assert_eq!(sum.note, None);
    }

    #[test]
    fn run_page_rows() {
        let v = serde_json::json!({
            "idle": {"owd_ms": {"up": {"p50": 0.01, "p99": 0.05}, "down": {"p50": 0.02, "p99": 0.06}}},
            "loaded": {"owd_ms": {"up": {"p50": 0.3, "p99": 1.2}, "down": {"p50": 98.4, "p99": 110.0},
                                  "rtt": {"p50": 99.0}},
                       "owd_increase_ms": {"up": 0.29, "down": 98.38}},
            "idle_after": {"owd_ms": {"up": {"p50": 0.01, "p99": 0.04}, "down": {"p50": 0.02, "p99": 0.05}}},
            "echo": {"port": 5291, "answered": true, "sent": 1000, "replies": 998, "note": null}
        });
        let f = facts(&v);
        assert_eq!(f.len(), 3);
        assert_eq!(f[1].0, "One-way down (peer → board)");
        assert_eq!(
            f[1].1,
            "idle p50 0.02 ms / p99 0.06 ms · loaded p50 98.4 ms / p99 110.0 ms · idle after p50 0.02 ms / p99 0.05 ms · increase +98.4 ms"
        );
        assert!(f[2].1.contains("998 of 1000 answered"), "{}", f[2].1);
        let none = serde_json::json!({"echo": {"port": 5291, "note": "peer has no netperfd echo"}});
        let f = facts(&none);
        assert_eq!(f.len(), 1);
        assert!(f[0]
            .1
            .starts_with("peer has no netperfd echo (UDP port 5291)"));
        assert!(facts(&serde_json::json!({})).is_empty());
    }

    #[test]
    fn no_echo_is_said() {
        let st = EchoStats {
            port: 5291,
            sent: 100,
            gave_up: true,
            ..Default::default()
        };
        assert_eq!(bases(&st.samples, 1.0), None);
        assert_eq!(phase(&st.samples, None, 0.0, 1.0), None);
        let sum = summary(&st, None);
        assert!(!sum.answered);
        assert_eq!(sum.lost, 0);
        assert_eq!(sum.note.as_deref(), Some("peer has no netperfd echo"));
        // Replies only after the load started: no base, no relative delays.
        let late = vec![sample(0, 2.0, 0.1, 0.1, 0.0)];
        assert_eq!(bases(&late, 1.0), None);
        let p = phase(&late, None, 1.0, 3.0).unwrap();
        assert!(p.up.is_none() && p.rtt.is_some());
    }
}
