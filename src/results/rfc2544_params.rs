//! The stored parameters of an RFC 2544 run (`runs.params_json` of kind `rfc2544`), typed:
//! written by `runs::rfc2544` when the run starts, read by the run page's command line and
//! facts, the RFC 2544 page's history and the run's verdict.
//!
//! As in [`crate::results::rfc2544_summary`]: field order = stored key order (a stored row
//! read and written back is the same bytes), every key defaults when absent.

use crate::spec::rfc2544::Rfc2544Test;
use crate::spec::thresholds::Thresholds;
use serde::{Deserialize, Serialize};

/// What an RFC 2544 run was asked for. A key missing reads as the plan's default where it
/// has one (port 5201, 10 s trials, 0.5 % resolution), else empty or 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Rfc2544Params {
    /// The peer agent's URL (PC1, the generator).
    pub peer: String,
    /// PC2: the receiver's address and UDP port.
    pub target: String,
    pub port: u16,
    /// The board's ports: where the frames come in and go out.
    pub ingress: String,
    pub egress: String,
    /// Forwarding with NAT for the run.
    pub nat: bool,
    /// Frame sizes, bytes with FCS, in the order tested.
    pub sizes: Vec<u32>,
    /// One trial's length, s.
    pub trial_s: u32,
    /// The loss a throughput trial may have and pass, %; the search's resolution, %.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub loss_percent: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub resolution_percent: f64,
    /// The tests asked for, in the order they run.
    pub tests: Vec<Rfc2544Test>,
    /// Back-to-back searches per frame size.
    pub b2b_repeat: u32,
    /// PC2's UDP echo port (the latency test's probes).
    pub echo_port: u16,
    /// The line rate the percentages are of, bit/s (L1), and where it came from ("given"
    /// when the run was given it).
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub line_bps: f64,
    pub line_source: String,
    /// Pass/fail limits given with the run; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Thresholds>,
}

impl Default for Rfc2544Params {
    fn default() -> Self {
        Rfc2544Params {
            peer: String::new(),
            target: String::new(),
            port: 5201,
            ingress: String::new(),
            egress: String::new(),
            nat: false,
            sizes: Vec::new(),
            trial_s: 10,
            loss_percent: 0.0,
            resolution_percent: 0.5,
            tests: Vec::new(),
            b2b_repeat: 0,
            echo_port: 0,
            line_bps: f64::NAN,
            line_source: String::new(),
            thresholds: None,
        }
    }
}

impl Rfc2544Params {
    /// Stored parameters read back; the default when they are not these.
    pub(crate) fn of_params(v: &serde_json::Value) -> Rfc2544Params {
        Rfc2544Params::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.params_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored params in the writer's key order (`runs::rfc2544::start_rfc2544` before it was
    /// typed, built from a plan with NAT, two sizes, a given line rate and three limits).
    const WITH_LIMITS: &str = r#"{"peer":"http://192.0.2.2:5280","target":"198.51.100.2","port":5201,"ingress":"eth0","egress":"eth1","nat":true,"sizes":[512,1518],"trial_s":2,"loss_percent":0.0,"resolution_percent":1.0,"tests":["throughput","latency","back-to-back"],"b2b_repeat":2,"echo_port":5299,"line_bps":100000000.0,"line_source":"given","thresholds":{"max_cpu_percent":80.0,"min_throughput_percent":90.0,"max_latency_ms":2.0}}"#;
    /// Without limits (no `thresholds` key) and with the line rate unknown (`null`).
    const NO_LIMITS: &str = r#"{"peer":"http://192.0.2.2:5280","target":"198.51.100.2","port":5202,"ingress":"eth0","egress":"eth1","nat":false,"sizes":[64],"trial_s":10,"loss_percent":0.1,"resolution_percent":0.5,"tests":["throughput"],"b2b_repeat":1,"echo_port":5299,"line_bps":null,"line_source":"the port's link speed"}"#;

    /// Issue 40 item 1: RFC 2544 params read through [`Rfc2544Params`] and written back are
    /// the same bytes (key order, the limits' order, `null` line rate, no `thresholds` when
    /// none were given); `sizes` and `thresholds` read typed.
    #[test]
    fn stored_params_read_back_byte_for_byte() {
        for stored in [WITH_LIMITS, NO_LIMITS] {
            let v: serde_json::Value = serde_json::from_str(stored).unwrap();
            let p = Rfc2544Params::deserialize(&v).expect("RFC 2544 params");
            assert_eq!(serde_json::to_string(&p).unwrap(), stored);
            assert_eq!(serde_json::to_string(&p.to_value()).unwrap(), stored);
        }
        let p = Rfc2544Params::of_params(&serde_json::from_str(WITH_LIMITS).unwrap());
        assert_eq!(p.sizes, [512, 1518]);
        assert_eq!(p.tests.last(), Some(&Rfc2544Test::BackToBack));
        let th = p.thresholds.expect("limits");
        assert_eq!(
            (
                th.min_throughput_percent,
                th.max_latency_ms,
                th.max_cpu_percent
            ),
            (Some(90.0), Some(2.0), Some(80.0))
        );
        let p = Rfc2544Params::of_params(&serde_json::from_str(NO_LIMITS).unwrap());
        assert!(p.line_bps.is_nan() && p.thresholds.is_none());
    }

    /// Params with keys missing read as the plan's defaults (port 5201, 10 s trials, 0.5 %);
    /// not params: the default, no panic.
    #[test]
    fn old_params_still_read() {
        let old = serde_json::json!({"peer": "http://pc1:5280", "sizes": [1518]});
        let p = Rfc2544Params::deserialize(&old).expect("early params read");
        assert_eq!((p.port, p.trial_s, p.resolution_percent), (5201, 10, 0.5));
        assert_eq!((p.sizes.as_slice(), p.thresholds), (&[1518][..], None));
        let wrong = serde_json::json!({"sizes": "64,1518"});
        assert_eq!(Rfc2544Params::of_params(&wrong).sizes, Vec::<u32>::new());
    }
}
