//! The stored parameters of a forwarding run and of a monitor-only run (`runs.params_json` of
//! kinds `forward` and `monitor`), typed: written by `runs::forward` when the run starts
//! (`start_forward`, `start_monitor`, through [`ForwardParams::to_value`] /
//! [`MonitorParams::to_value`]), read by the run page's command lines, title and facts
//! (`results::view`).
//!
//! As in [`crate::results::forward_summary`]: field order = stored key order (a stored row read
//! and written back is the same bytes), every key defaults when absent; a key the writer always
//! writes but a page shows as "?" when missing is an `Option` left out when `None`.

use serde::{Deserialize, Serialize};

/// What a forwarding run was asked for: the peer agent (PC1), the test it ran to PC2, the
/// board's two ports and whether the run turned on forwarding with NAT.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ForwardParams {
    /// The peer agent's URL (`http://HOST:PORT` or `https://HOST:PORT#sha256=…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The iperf3 test the agent ran (its host is PC2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<ForwardTest>,
    /// Board port the traffic came in on (PC1's side), and the one it left through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<String>,
    /// Forwarding with NAT (MASQUERADE on the egress port) for the run.
    pub nat: bool,
}

impl ForwardParams {
    /// Stored parameters read back; the default (every field absent) when they are not these.
    pub(crate) fn of_params(v: &serde_json::Value) -> ForwardParams {
        ForwardParams::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.params_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The test a forwarding run's agent ran, as stored: the shape of the agent's
/// `peer::spec::PeerTestSpec` (what `runs::forward` writes; results do not reach up to `peer`),
/// in its key order, keys it leaves out when `None` left out here too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ForwardTest {
    /// PC2 (`iperf3 -c HOST`).
    pub host: String,
    /// `-p`, `-t` (s), `-P`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<u32>,
    /// `-R`, `--bidir`, `-u`.
    #[serde(default)]
    pub reverse: bool,
    #[serde(default)]
    pub bidir: bool,
    #[serde(default)]
    pub udp: bool,
    /// `-b`, bits/s per stream; `-l`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u32>,
    /// RFC 2544 only (latency probes, back-to-back bursts); kept as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

/// What a monitor-only run was asked for: the ports watched, its label and length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MonitorParams {
    /// Board ports watched, in the order given.
    pub ports: Vec<String>,
    /// What was being watched ("" = none).
    pub label: String,
    /// Seconds to record; `None` (stored `null`) = until stopped.
    pub duration: Option<u32>,
}

impl MonitorParams {
    /// Stored parameters read back; the default (no ports, no label, until stopped) when they
    /// are not these.
    pub(crate) fn of_params(v: &serde_json::Value) -> MonitorParams {
        MonitorParams::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.params_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored params of runs made by the binary before these types (`netperfd forward` and
    /// `netperfd monitor` in a scratch network namespace with two dummy ports, the rows'
    /// `params_json` read from SQLite): a UDP forwarding run with NAT, `-R`, `-P 2`, `-b`,
    /// `-l`, `-p`; a TCP one with the defaults; monitor runs with a length and a label, and
    /// until stopped without one.
    const FIXTURES: &str = include_str!("../../tests/data/forward_params.json");

    fn round_trip<T>(stored: &serde_json::Value) -> T
    where
        T: Serialize + for<'de> Deserialize<'de>,
    {
        // The bytes to keep are the stored Value's written back (see forward_summary's
        // round_trip: the store reads `params_json` into a Value first).
        let untyped = serde_json::to_string(stored).unwrap();
        let p = T::deserialize(stored).expect("stored params");
        assert_eq!(serde_json::to_string(&p).unwrap(), untyped);
        assert_eq!(
            serde_json::to_string(&serde_json::to_value(&p).unwrap()).unwrap(),
            untyped
        );
        p
    }

    /// Issue 40 item 1: stored forwarding and monitor params read through [`ForwardParams`] /
    /// [`MonitorParams`] and written back are the same bytes (key order, the test's keys left
    /// out when not given, `null` duration); the values the run page shows read from them.
    #[test]
    fn stored_params_read_back_byte_for_byte() {
        let rows: serde_json::Value = serde_json::from_str(FIXTURES).unwrap();
        let forward = rows["forward"].as_array().expect("forward rows");
        let monitor = rows["monitor"].as_array().expect("monitor rows");
        assert!(forward.len() >= 2 && monitor.len() >= 2);
        let fw: Vec<ForwardParams> = forward.iter().map(round_trip).collect();
        let mo: Vec<MonitorParams> = monitor.iter().map(round_trip).collect();
        // Every stored key is a field (none falls back to the default).
        for (p, v) in fw.iter().zip(forward) {
            assert_eq!(ForwardParams::of_params(v), *p);
            assert!(p.peer.is_some() && p.test.is_some() && p.ingress.is_some());
        }
        for (p, v) in mo.iter().zip(monitor) {
            assert_eq!(MonitorParams::of_params(v), *p);
            assert!(!p.ports.is_empty());
        }
        // Missing keys read as absent (the page's "?"), not as an error.
        let empty = ForwardParams::of_params(&serde_json::json!({}));
        assert_eq!(empty, ForwardParams::default());
        assert_eq!(serde_json::to_string(&empty).unwrap(), r#"{"nat":false}"#);
        assert_eq!(
            MonitorParams::of_params(&serde_json::json!({"ports": "eth0"})),
            MonitorParams::default()
        );
    }
}
