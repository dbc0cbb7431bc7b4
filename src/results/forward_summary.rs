//! The stored summaries of forwarding and monitor-only runs (`runs.summary_json` of kinds
//! `forward` and `monitor`), typed: written by `runs::forward`, read by the run page
//! ([`crate::results::view`]), the run's text ([`crate::results::text`]) and the forwarding
//! page.
//!
//! As in [`crate::results::rfc2544_summary`]: each struct's field order is the stored key
//! order, so a summary read and written back is the same bytes
//! (`stored_summaries_read_back_byte_for_byte`); every key defaults when absent; a key the
//! runner writes only in some rows is an `Option` skipped when `None`; a key written only in
//! some rows whose value may be `null` is an `Option<Option<_>>` (absent, `null`, a value).

use crate::model::RunKind;
use crate::results::json::f64_or_nan;
use crate::results::rfc2544_summary::{NatRecord, PeerRef, TargetRef};
use crate::store::RunRow;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// A key that is present (`Some`, its value possibly `null`) or absent (`None`): for
/// `Option<Option<T>>` fields with `#[serde(default, deserialize_with = "present")]`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The whole summary of a forwarding run. While it runs (and when it failed before its
/// test): the peer, target, ports and NAT record, then `error`; the figures from `seconds`
/// on once the test has ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ForwardSummary {
    /// The peer agent on PC1 (its `/peer/v1/info` once it answered).
    pub peer: PeerRef,
    /// PC2: where the peer's test went.
    pub target: TargetRef,
    /// The board's ports: where the traffic comes in (from PC1) and goes out.
    pub ingress: String,
    pub egress: String,
    /// Forwarding with NAT: asked for, what the run turned on and how it is undone, put back.
    pub nat: NatRecord,
    /// The seconds the traffic flowed (the peer's measured test time when known), s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The run's wall-clock time around the test, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<f64>,
    /// Where the port figures came from ("counters", "samples", "counters, peaks from
    /// samples").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_source: Option<String>,
    /// Forwarded traffic per direction (`null`: a port's figures were missing).
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub forwarded: Option<Option<Forwarded>>,
    /// Counter figures per board port, by port name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<BTreeMap<String, PortFigures>>,
    /// Conntrack entries (`null`: the kernel has no conntrack).
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub conntrack: Option<Option<Conntrack>>,
    /// Busy % per core (`null`: no samples).
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Option<Vec<CoreBusy>>>,
    /// The peer's iperf3 `-J` document as the agent sent it (`null`: none came).
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub peer_report: Option<serde_json::Value>,
    /// Why the run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ForwardSummary {
    /// A stored summary read back; the default when it is not one (`null`, a mistyped key).
    pub(crate) fn of_summary(v: &serde_json::Value) -> ForwardSummary {
        ForwardSummary::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The whole summary of a monitor-only run (written once, when it ends).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MonitorSummary {
    /// What was watched, free text.
    pub label: String,
    /// The seconds recorded, s.
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds: f64,
    /// Where the port figures came from (as [`ForwardSummary::port_source`]).
    pub port_source: String,
    /// Counter figures per watched port, by port name.
    pub ports: BTreeMap<String, PortFigures>,
    /// Conntrack entries (`None`, stored `null`: the kernel has no conntrack).
    pub conntrack: Option<Conntrack>,
    /// Busy % per core (`None`, stored `null`: no samples).
    pub cpu: Option<Vec<CoreBusy>>,
}

impl MonitorSummary {
    /// A stored summary read back; the default when it is not one.
    pub(crate) fn of_summary(v: &serde_json::Value) -> MonitorSummary {
        MonitorSummary::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The board's own figures of a forwarding or monitor-only run, as the pages and the text
/// show them; empty for other kinds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BoardFigures {
    /// Forwarded traffic per direction (forwarding runs).
    pub forwarded: Option<Forwarded>,
    /// Counter figures per port.
    pub ports: BTreeMap<String, PortFigures>,
    /// Conntrack entries.
    pub conntrack: Option<Conntrack>,
    /// A monitor-only run's label.
    pub label: Option<String>,
}

impl BoardFigures {
    /// The board's figures of `run`, chosen by its kind.
    pub(crate) fn of(run: &RunRow) -> BoardFigures {
        BoardFigures::of_summary(run.kind, &run.summary)
    }

    /// The board's figures of a run of `kind` whose stored summary is `summary`.
    pub(crate) fn of_summary(kind: RunKind, summary: &serde_json::Value) -> BoardFigures {
        match kind {
            RunKind::Forward => {
                let s = ForwardSummary::of_summary(summary);
                BoardFigures {
                    forwarded: s.forwarded.flatten(),
                    ports: s.ports.unwrap_or_default(),
                    conntrack: s.conntrack.flatten(),
                    label: None,
                }
            }
            RunKind::Monitor => {
                let s = MonitorSummary::of_summary(summary);
                BoardFigures {
                    forwarded: None,
                    ports: s.ports,
                    conntrack: s.conntrack,
                    label: Some(s.label),
                }
            }
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency
            | RunKind::Rfc2544 => BoardFigures::default(),
        }
    }

    /// The peak conntrack count, when the kernel has conntrack.
    pub(crate) fn conntrack_peak(&self) -> Option<i64> {
        self.conntrack.as_ref().map(|c| c.peak)
    }
}

/// Counter deltas of one port over a run, and the rates they give.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct PortFigures {
    /// Bytes and packets received / sent over the run (as the kernel counts them: layer-2
    /// frames without FCS).
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    /// Seconds the figures cover.
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds: f64,
    /// Mean rates over `seconds`: bits/s and packets/s.
    #[serde(deserialize_with = "f64_or_nan")]
    pub rx_bits_per_second: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub tx_bits_per_second: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub rx_packets_per_second: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub tx_packets_per_second: f64,
    /// Peaks over the monitor's 1 s samples (None without samples).
    pub peak_rx_bits_per_second: Option<f64>,
    pub peak_tx_bits_per_second: Option<f64>,
    pub peak_rx_packets_per_second: Option<f64>,
    pub peak_tx_packets_per_second: Option<f64>,
}

impl PortFigures {
    /// Fill the mean rates from the totals and `seconds` (0 when `seconds` is not positive).
    pub(crate) fn fill_rates(&mut self) {
        let per_s = |v: f64| {
            if self.seconds > 0.0 {
                v / self.seconds
            } else {
                0.0
            }
        };
        self.rx_bits_per_second = per_s(self.rx_bytes as f64 * 8.0);
        self.tx_bits_per_second = per_s(self.tx_bytes as f64 * 8.0);
        self.rx_packets_per_second = per_s(self.rx_packets as f64);
        self.tx_packets_per_second = per_s(self.tx_packets as f64);
    }
}

/// Forwarded traffic per direction, in the stored order: `"<ingress>-><egress>"` (PC1 → PC2)
/// first, then the way back. Stored as a JSON object keyed by direction.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Forwarded(pub Vec<(String, ForwardedDir)>);

impl Serialize for Forwarded {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Forwarded {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Forwarded;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of forwarded directions")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Forwarded, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, ForwardedDir>()? {
                    out.push((k, v));
                }
                Ok(Forwarded(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// One direction of forwarded traffic: what left the board on the far port (`bytes` …
/// `packets_per_second`, the peaks) and what came in on the near one (`received_*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ForwardedDir {
    pub bytes: u64,
    pub packets: u64,
    /// Bits/s and packets/s sent out of the far port, mean over the run.
    #[serde(deserialize_with = "f64_or_nan")]
    pub bits_per_second: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub packets_per_second: f64,
    pub received_bytes: u64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub received_bits_per_second: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub received_packets_per_second: f64,
    /// The busiest second out of the far port (None without samples).
    pub peak_bits_per_second: Option<f64>,
    pub peak_packets_per_second: Option<f64>,
}

/// Conntrack entries: the peak and count of the monitor's samples, and the run's own first
/// and last readings (`None` without own readings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Conntrack {
    pub peak: i64,
    pub samples: usize,
    pub start: Option<i64>,
    pub end: Option<i64>,
}

/// One core's busy % (100 − idle − iowait) over the monitor's samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct CoreBusy {
    pub cpu: i32,
    #[serde(deserialize_with = "f64_or_nan")]
    pub mean_busy_percent: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub peak_busy_percent: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored summaries of two lab runs on the runner before it was typed
    /// (`tests/forwarding.rs`, seed 000's lab, the runs' `summary_json` read from SQLite): a
    /// forwarding run PC1 → PC2 through eth0 → eth1 with NAT turned on and undone (the agent's
    /// info, the port figures, both directions, conntrack, CPU per core, the peer's iperf3
    /// document), and a monitor-only run of eth0 and eth1.
    const LAB_FORWARD: &str = include_str!("../../tests/data/forward_summary_nat.json");
    const LAB_MONITOR: &str = include_str!("../../tests/data/monitor_summary.json");

    /// A forwarding run the agent refused, in the runner's key order: no `info`, NAT not asked
    /// for, `error` after the NAT record and no figures.
    const REFUSED: &str = r#"{"peer":{"url":"http://192.0.2.2:5280"},"target":{"host":"198.51.100.2","port":5201},"ingress":"eth0","egress":"eth1","nat":{"requested":false},"error":"peer agent at http://192.0.2.2:5280: the token is wrong (401)"}"#;

    /// A forwarding run whose test failed after NAT was turned on (and put back): the figures
    /// written with a port missing (`forwarded` `null`), no conntrack, no CPU samples, no
    /// peer report, then the error.
    const FAILED_AFTER_NAT: &str = r#"{"peer":{"url":"http://192.0.2.2:5280","info":{"version":"v1","hostname":"pc1","addresses":[],"busy":false}},"target":{"host":"198.51.100.2","port":5201},"ingress":"eth0","egress":"eth1","nat":{"requested":true,"enabled_by_run":true,"undo":{"restore":{"ingress":"eth0","egress":"eth1","nat":false,"ipv6":false}},"restored":true},"seconds":0.5,"wall_seconds":0.51,"port_source":"counters","forwarded":null,"ports":{"eth0":{"rx_bytes":0,"tx_bytes":0,"rx_packets":0,"tx_packets":0,"rx_dropped":0,"tx_dropped":0,"rx_errors":0,"tx_errors":0,"seconds":0.5,"rx_bits_per_second":0.0,"tx_bits_per_second":0.0,"rx_packets_per_second":0.0,"tx_packets_per_second":0.0,"peak_rx_bits_per_second":null,"peak_tx_bits_per_second":null,"peak_rx_packets_per_second":null,"peak_tx_packets_per_second":null}},"conntrack":null,"cpu":null,"peer_report":null,"error":"lost the peer agent: connection refused"}"#;

    fn round_trip<T>(stored: &str) -> T
    where
        T: Serialize + for<'de> Deserialize<'de>,
    {
        // The store reads `summary_json` into a Value; serde_json (without its
        // `float_roundtrip` feature) may read a float's last digit 1 ulp off (the lab
        // forwarding summary's `1877448.2426019285` reads back as `…283`), before and after
        // typing alike. So the bytes to keep are the stored Value's, written back: the same
        // as the stored text but for such digits (the lab runs' summaries: 2 in the
        // forwarding one, 1 in the monitor one).
        let v: serde_json::Value = serde_json::from_str(stored).unwrap();
        let untyped = serde_json::to_string(&v).unwrap();
        let s = T::deserialize(&v).expect("a summary");
        assert_eq!(serde_json::to_string(&s).unwrap(), untyped);
        // Through a Value too, as the store writes it.
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), untyped);
        s
    }

    /// Issue 40 item 1: stored forwarding and monitor summaries read through
    /// [`ForwardSummary`] / [`MonitorSummary`] and written back are the same bytes: key order
    /// (the forwarded directions as the run wrote them, not sorted), `null` kept apart from
    /// absent, number formatting; the figures the pages show read from them.
    #[test]
    fn stored_summaries_read_back_byte_for_byte() {
        let s: ForwardSummary = round_trip(LAB_FORWARD);
        assert_eq!((s.ingress.as_str(), s.egress.as_str()), ("eth0", "eth1"));
        assert_eq!(s.nat.undo, Some(serde_json::json!("disable")));
        assert_eq!(
            (s.nat.enabled_by_run, s.nat.restored),
            (Some(true), Some(true))
        );
        assert_eq!(
            s.port_source.as_deref(),
            Some("counters, peaks from samples")
        );
        let fw = s.forwarded.clone().flatten().expect("both directions");
        let dirs: Vec<&str> = fw.0.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(dirs, ["eth0->eth1", "eth1->eth0"]);
        assert_eq!(fw.0[0].1.bytes, 4_442_739_178);
        assert_eq!(
            s.conntrack,
            Some(Some(Conntrack {
                peak: 6,
                samples: 3,
                start: Some(0),
                end: Some(6)
            }))
        );
        assert_eq!(s.cpu.clone().flatten().map(|c| c.len()), Some(3));
        assert!(s.peer_report.as_ref().is_some_and(|r| r["end"].is_object()));
        assert_eq!(s.error, None);
        let b = BoardFigures::of_summary(
            RunKind::Forward,
            &serde_json::from_str(LAB_FORWARD).unwrap(),
        );
        assert_eq!(b.forwarded, Some(fw));
        assert_eq!(b.conntrack_peak(), Some(6));
        assert_eq!(b.ports.keys().collect::<Vec<_>>(), ["eth0", "eth1"]);

        let s: MonitorSummary = round_trip(LAB_MONITOR);
        assert_eq!(s.label, "pc1 to pc2");
        assert_eq!(s.ports["eth0"].rx_bytes, 2_295_806_336);
        assert_eq!(s.cpu.as_ref().map(|c| c[0].cpu), Some(-1));
        let b = BoardFigures::of_summary(
            RunKind::Monitor,
            &serde_json::from_str(LAB_MONITOR).unwrap(),
        );
        assert_eq!(
            (b.label.as_deref(), b.forwarded),
            (Some("pc1 to pc2"), None)
        );

        let s: ForwardSummary = round_trip(REFUSED);
        assert_eq!(
            (s.peer.info.is_none(), s.seconds, s.forwarded.is_none()),
            (true, None, true)
        );
        assert!(s.error.as_deref().is_some_and(|e| e.contains("401")));

        let s: ForwardSummary = round_trip(FAILED_AFTER_NAT);
        assert_eq!(
            (s.forwarded.clone(), s.conntrack, s.cpu.clone()),
            (Some(None), Some(None), Some(None))
        );
        assert_eq!(s.peer_report, Some(serde_json::Value::Null));
        assert_eq!(
            s.ports.as_ref().map(|p| p["eth0"].peak_rx_bits_per_second),
            Some(None)
        );
        // A kind without board figures has none, whatever its summary holds.
        let b =
            BoardFigures::of_summary(RunKind::Iperf3, &serde_json::from_str(LAB_FORWARD).unwrap());
        assert_eq!(b, BoardFigures::default());
    }

    /// Summaries with keys missing still read, each its default: a forwarding summary without
    /// `port_source`, `cpu`, the NAT record, a direction without `received_*` or peaks, a
    /// port without peaks; a monitor summary without `cpu` and `conntrack`. Not a summary: the
    /// default, no panic.
    #[test]
    fn old_summaries_still_read() {
        let old = serde_json::json!({
            "peer": {"url": "http://192.0.2.2:5280"}, "ingress": "eth0", "egress": "eth1",
            "seconds": 10.0,
            "forwarded": {"eth1->eth0": {"bytes": 10, "packets": 1, "bits_per_second": 8.0,
                "packets_per_second": 0.1}},
            "ports": {"eth0": {"rx_bytes": 5, "seconds": 10.0, "rx_bits_per_second": 4.0}},
            "conntrack": {"peak": 3}
        });
        let s = ForwardSummary::deserialize(&old).expect("an early summary reads");
        assert_eq!((s.port_source, s.cpu, s.wall_seconds), (None, None, None));
        assert!(!s.nat.requested && s.nat.undo.is_none());
        let fw = s.forwarded.flatten().expect("a direction");
        assert_eq!(
            (fw.0[0].1.received_bytes, fw.0[0].1.peak_bits_per_second),
            (0, None)
        );
        let p = &s.ports.as_ref().expect("ports")["eth0"];
        assert_eq!(
            (p.rx_bytes, p.tx_bytes, p.peak_rx_bits_per_second),
            (5, 0, None)
        );
        assert_eq!(
            s.conntrack.flatten().map(|c| (c.peak, c.start)),
            Some((3, None))
        );

        let old = serde_json::json!({"label": "lab", "seconds": 4.0, "ports": {}});
        let s = MonitorSummary::deserialize(&old).expect("an early monitor summary reads");
        assert_eq!((s.label.as_str(), s.cpu, s.conntrack), ("lab", None, None));

        assert_eq!(
            ForwardSummary::of_summary(&serde_json::Value::Null),
            ForwardSummary::default()
        );
        let wrong = serde_json::json!({"ports": "eth0"});
        assert_eq!(
            MonitorSummary::of_summary(&wrong),
            MonitorSummary::default()
        );
        assert_eq!(
            BoardFigures::of_summary(RunKind::Forward, &wrong),
            BoardFigures::default()
        );
    }
}
