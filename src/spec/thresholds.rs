//! Pass/fail thresholds of a suite step (board farms, CI): the limits a test's result must
//! keep, in a step's or a suite's `"thresholds"` object. A suite-level object applies to every
//! step that sets none (a step's own object replaces it whole, it is not merged).
//!
//! Keys (all optional, all JSON numbers, none negative):
//! * `min_bits_per_second` — receiver bitrate (goodput) at least this, bits/s; also as text
//!   with iperf's rate suffix, powers of 1000 (`"900M"` = 900 000 000);
//! * `min_ceiling_percent` — receiver bitrate at least this % of the port's ceiling
//!   (0..100; the ceiling as the run page computes it: link speed × payload / wire bytes);
//! * `max_loss_percent` — UDP: lost datagrams at most this % of those sent (0..100);
//! * `max_jitter_ms` — UDP: receiver jitter (RFC 3550) at most this, ms;
//! * `max_retransmits` — TCP: sender retransmits at most this many (a whole number);
//! * `max_cpu_percent` — busiest core's busy share during the test at most this % (0..100);
//! * `max_shortfall_percent` — paced tests (`-b`): the sender at most this % below the rate
//!   asked for, i.e. sent ≥ (100 − this) % of the target (0..100);
//! * `max_latency_increase_ms` — latency steps: the ICMP RTT p50 under load at most this much
//!   above the idle p50, ms (loaded p50 − idle p50);
//! * `min_throughput_percent` — rfc2544 steps: every frame size's throughput (RFC 2544 §26.1)
//!   at least this % of the line rate (0..100); a PC's lower bound that reaches it passes (the
//!   board forwarded at least that), one below it fails as unproven;
//! * `max_latency_ms` — rfc2544 steps: every frame size's latency (§26.2, the p99 round trip
//!   through the board at the throughput) at most this, ms.
//!
//! Checking is in `results::verdict`; this module only parses and validates.

use serde::{Deserialize, Deserializer, Serialize};

/// The threshold keys this build knows, in the order they are checked and shown.
pub(crate) const THRESHOLD_KEYS: &[&str] = &[
    "min_bits_per_second",
    "min_ceiling_percent",
    "max_loss_percent",
    "max_jitter_ms",
    "max_retransmits",
    "max_cpu_percent",
    "max_shortfall_percent",
    "max_latency_increase_ms",
    "min_throughput_percent",
    "max_latency_ms",
];

/// Largest `min_bits_per_second` accepted: 10 Tbit/s.
const MAX_BPS: f64 = 1e13;
/// Largest `max_jitter_ms` and `max_latency_increase_ms` accepted: one hour, ms.
const MAX_JITTER_MS: f64 = 3_600_000.0;
/// Largest `max_retransmits` accepted.
const MAX_RETRANSMITS: f64 = 1e15;

/// Limits one suite step's result must keep. `None` = not checked.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Thresholds {
    /// Minimum receiver bitrate, bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_bits_per_second: Option<f64>,
    /// Minimum receiver bitrate as % of the port's ceiling (0..100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ceiling_percent: Option<f64>,
    /// UDP: maximum lost datagrams, % of those sent (0..100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_loss_percent: Option<f64>,
    /// UDP: maximum receiver jitter, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_jitter_ms: Option<f64>,
    /// TCP: maximum sender retransmits (count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retransmits: Option<u64>,
    /// Maximum busy share of the busiest core during the test, % (0..100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpu_percent: Option<f64>,
    /// Paced tests: maximum sender shortfall below the target, % (0..100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_shortfall_percent: Option<f64>,
    /// Latency runs: maximum increase of the ICMP RTT p50 under load over the idle p50, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_latency_increase_ms: Option<f64>,
    /// RFC 2544 runs: minimum throughput of every frame size, % of the line rate (0..100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_throughput_percent: Option<f64>,
    /// RFC 2544 runs: maximum latency (p99 round trip) of every frame size, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_latency_ms: Option<f64>,
}

impl Thresholds {
    /// True when no limit is set (an empty object).
    pub fn is_empty(&self) -> bool {
        *self == Thresholds::default()
    }

    /// Set limit `key` (a [`THRESHOLD_KEYS`] name) to `n`, in its base unit, checked as
    /// [`Thresholds::from_value`] checks a number. Errors start with `prefix` (e.g.
    /// "thresholds: "): an unknown key (the known ones listed), `n` not finite, negative, a
    /// percentage above 100, a fractional retransmit count, a value beyond the sane range.
    pub fn set(&mut self, key: &str, n: f64, prefix: &str) -> Result<(), String> {
        let k = key;
        if !n.is_finite() {
            return Err(format!("{prefix}{k} must be a finite number"));
        }
        if n < 0.0 {
            return Err(format!("{prefix}{k} must not be negative, got {n}"));
        }
        let pct = |n: f64| -> Result<f64, String> {
            if n > 100.0 {
                Err(format!("{prefix}{k} is a percentage (0..100), got {n}"))
            } else {
                Ok(n)
            }
        };
        let upto = |n: f64, max: f64| -> Result<f64, String> {
            if n > max {
                Err(format!("{prefix}{k} must be at most {max}, got {n}"))
            } else {
                Ok(n)
            }
        };
        let t = self;
        match k {
            "min_bits_per_second" => t.min_bits_per_second = Some(upto(n, MAX_BPS)?),
            "min_ceiling_percent" => t.min_ceiling_percent = Some(pct(n)?),
            "max_loss_percent" => t.max_loss_percent = Some(pct(n)?),
            "max_jitter_ms" => t.max_jitter_ms = Some(upto(n, MAX_JITTER_MS)?),
            "max_retransmits" => {
                if n.fract() != 0.0 {
                    return Err(format!(
                        "{prefix}max_retransmits must be a whole number, got {n}"
                    ));
                }
                t.max_retransmits = Some(upto(n, MAX_RETRANSMITS)? as u64);
            }
            "max_cpu_percent" => t.max_cpu_percent = Some(pct(n)?),
            "max_shortfall_percent" => t.max_shortfall_percent = Some(pct(n)?),
            "max_latency_increase_ms" => t.max_latency_increase_ms = Some(upto(n, MAX_JITTER_MS)?),
            "min_throughput_percent" => t.min_throughput_percent = Some(pct(n)?),
            "max_latency_ms" => t.max_latency_ms = Some(upto(n, MAX_JITTER_MS)?),
            other => {
                return Err(format!(
                    "{prefix}unknown key '{other}' (known: {})",
                    THRESHOLD_KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// Parse a `"thresholds"` JSON value. A value is a JSON number in base units;
    /// `min_bits_per_second` also takes a rate as text with a K/M/G/T suffix (`"900M"`, powers
    /// of 1000 as `-b`). Errors: not an object, an unknown key (the known ones are listed), a
    /// value that is neither, a negative number, a percentage above 100, a fractional
    /// retransmit count, or a value beyond the sane range.
    pub fn from_value(v: &serde_json::Value) -> Result<Thresholds, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| format!("thresholds must be an object of numbers, got {v}"))?;
        let mut t = Thresholds::default();
        for (k, val) in obj {
            if val.is_null() {
                continue;
            }
            let n = match val {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(t) if k == "min_bits_per_second" => {
                    // A rate as -b takes it: "900M" (the suffix is all a field engineer types).
                    let t = t.trim();
                    let t = t
                        .strip_suffix("bit/s")
                        .or_else(|| t.strip_suffix("bps"))
                        .unwrap_or(t)
                        .replace(' ', "");
                    if t.starts_with('-') {
                        return Err(format!("thresholds: {k} must not be negative, got {val}"));
                    }
                    Some(crate::model::units::parse_suffixed(&t, true).map_err(|e| {
                        format!("thresholds: {k} must be a rate in bits/s such as 900M: {e}")
                    })? as f64)
                }
                _ => None,
            }
            .ok_or_else(|| format!("thresholds: {k} must be a number, got {val}"))?;
            t.set(k, n, "thresholds: ")?;
        }
        Ok(t)
    }
}

impl<'de> Deserialize<'de> for Thresholds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Thresholds::from_value(&v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One limit set from a typed number: the checks and words of `from_value`, with the
    /// caller's prefix (the RFC 2544 request's limits no longer go through JSON to get them).
    #[test]
    fn a_limit_set_from_a_number() {
        let mut t = Thresholds::default();
        t.set("max_cpu_percent", 80.0, "p: ").unwrap();
        t.set("max_retransmits", 7.0, "p: ").unwrap();
        t.set("min_throughput_percent", 0.0, "p: ").unwrap();
        t.set("max_latency_ms", 2.5, "p: ").unwrap();
        assert_eq!(
            t,
            Thresholds {
                max_cpu_percent: Some(80.0),
                max_retransmits: Some(7),
                min_throughput_percent: Some(0.0),
                max_latency_ms: Some(2.5),
                ..Thresholds::default()
            }
        );
        for (k, n, words) in [
            (
                "max_cpu_percent",
                f64::NAN,
                "p: max_cpu_percent must be a finite number",
            ),
            (
                "max_cpu_percent",
                -1.0,
                "p: max_cpu_percent must not be negative, got -1",
            ),
            (
                "max_loss_percent",
                100.5,
                "p: max_loss_percent is a percentage (0..100), got 100.5",
            ),
            (
                "max_retransmits",
                1.5,
                "p: max_retransmits must be a whole number, got 1.5",
            ),
            (
                "max_jitter_ms",
                1e12,
                "p: max_jitter_ms must be at most 3600000, got 1000000000000",
            ),
            (
                "min_mbps",
                1.0,
                "p: unknown key 'min_mbps' (known: min_bits_per_second",
            ),
        ] {
            let e = Thresholds::default().set(k, n, "p: ").unwrap_err();
            assert!(e.starts_with(words), "{k} {n}: {e}");
            // The same words through JSON, with its prefix.
            if n.is_finite() {
                let v = serde_json::json!({ k: n });
                let j = Thresholds::from_value(&v).unwrap_err();
                assert_eq!(j, e.replacen("p: ", "thresholds: ", 1), "{k} {n}");
            }
        }
    }

    #[test]
    fn all_keys_parse_and_round_trip() {
        let v = json!({
            "min_bits_per_second": 900_000_000u64,
            "min_ceiling_percent": 90,
            "max_loss_percent": 0.1,
            "max_jitter_ms": 0.5,
            "max_retransmits": 100,
            "max_cpu_percent": 95.5,
            "max_shortfall_percent": 3,
            "max_latency_increase_ms": 25,
            "min_throughput_percent": 90,
            "max_latency_ms": 2.5
        });
        let t = Thresholds::from_value(&v).unwrap();
        assert_eq!(t.min_bits_per_second, Some(9e8));
        assert_eq!(t.min_ceiling_percent, Some(90.0));
        assert_eq!(t.max_loss_percent, Some(0.1));
        assert_eq!(t.max_jitter_ms, Some(0.5));
        assert_eq!(t.max_retransmits, Some(100));
        assert_eq!(t.max_cpu_percent, Some(95.5));
        assert_eq!(t.max_shortfall_percent, Some(3.0));
        assert_eq!(t.max_latency_increase_ms, Some(25.0));
        assert_eq!(t.min_throughput_percent, Some(90.0));
        assert_eq!(t.max_latency_ms, Some(2.5));
        let back: Thresholds = serde_json::from_value(serde_json::to_value(t).unwrap()).unwrap();
        assert_eq!(back, t);
        // Only the keys that are set are written.
        let one = Thresholds::from_value(&json!({"max_jitter_ms": 1})).unwrap();
        assert_eq!(
            serde_json::to_value(one).unwrap(),
            json!({"max_jitter_ms": 1.0})
        );
        assert!(Thresholds::from_value(&json!({})).unwrap().is_empty());
    }

    /// Issue 22 item 11: a field engineer types "900M", as for -b.
    #[test]
    fn rates_take_a_suffix() {
        let t = Thresholds::from_value(
            &json!({"min_bits_per_second": "900M", "max_loss_percent": 0.1}),
        )
        .unwrap();
        assert_eq!(t.min_bits_per_second, Some(9e8));
        assert_eq!(t.max_loss_percent, Some(0.1));
        for (text, bps) in [
            ("1.5G", 1.5e9),
            ("900 Mbit/s", 9e8),
            ("250k", 250e3),
            ("42", 42.0),
        ] {
            let t = Thresholds::from_value(&json!({ "min_bits_per_second": text })).unwrap();
            assert_eq!(t.min_bits_per_second, Some(bps), "{text}");
        }
    }

    #[test]
    fn bad_thresholds_are_refused_with_the_reason() {
        let cases = [
            (json!({"min_bps": 1}), "unknown key 'min_bps'"),
            (json!({"max_loss_percent": "0.1"}), "must be a number"),
            (json!({"min_bits_per_second": "900X"}), "such as 900M"),
            (
                json!({"min_bits_per_second": "-900M"}),
                "must not be negative",
            ),
            (json!({"min_bits_per_second": "100T"}), "at most"),
            (json!({"max_jitter_ms": -1}), "must not be negative"),
            (json!({"min_ceiling_percent": 120}), "percentage (0..100)"),
            (
                json!({"min_throughput_percent": 101}),
                "percentage (0..100)",
            ),
            (json!({"max_latency_ms": -2}), "must not be negative"),
            (json!({"max_retransmits": 1.5}), "whole number"),
            (json!({"max_cpu_percent": true}), "must be a number"),
            (json!({"min_bits_per_second": 1e20}), "at most"),
            (json!([1, 2]), "must be an object"),
            (json!(5), "must be an object"),
        ];
        for (v, want) in cases {
            let e = Thresholds::from_value(&v).unwrap_err();
            assert!(e.contains(want), "{e} should mention {want} ({v})");
        }
    }
}
