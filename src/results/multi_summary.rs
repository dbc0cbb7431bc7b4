//! The stored summary and parameters of a multi-port run (kind `multi`: `runs.summary_json`
//! and `runs.params_json`), typed: written by `runs::multi`, read by the run page
//! ([`crate::results::view`]).
//!
//! As in [`crate::results::rfc2544_summary`]: field order = stored key order, so a stored
//! row read and written back is the same bytes (`stored_rows_read_back_byte_for_byte`); every
//! key defaults when absent.

use crate::engine::params::Params;
use crate::model::{RunDirection, RunProtocol, RunStatus};
use serde::{Deserialize, Deserializer, Serialize};

/// The whole summary of a multi-port run: each leg's result, and their sums.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MultiSummary {
    /// One row per leg, in the order the legs were given.
    pub legs: Vec<LegResult>,
    /// The sums over the legs (the board's aggregate).
    pub aggregate: Aggregate,
}

impl MultiSummary {
    /// A stored summary read back; the default when it is not one.
    #[cfg(test)]
    pub(crate) fn of_summary(v: &serde_json::Value) -> MultiSummary {
        MultiSummary::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// One leg's result as kept in the multi run's summary. A row without `status` reads as
/// failed (as a stored run whose status word does not read, `RunRow::invalid`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct LegResult {
    /// The leg's own run.
    pub id: i64,
    /// Board port (interface).
    pub port: String,
    /// `host:port`.
    pub peer: String,
    pub protocol: RunProtocol,
    /// From the board's view: send / receive / bidir.
    pub direction: RunDirection,
    pub status: RunStatus,
    /// Bits/s.
    pub sender_bps: Option<f64>,
    /// Bits/s (goodput).
    pub receiver_bps: Option<f64>,
    pub bytes: Option<i64>,
    pub retransmits: Option<i64>,
    /// Lost datagrams, % (UDP legs).
    pub lost_percent: Option<f64>,
    pub error: Option<String>,
}

impl Default for LegResult {
    fn default() -> Self {
        LegResult {
            id: 0,
            port: String::new(),
            peer: String::new(),
            protocol: RunProtocol::default(),
            direction: RunDirection::default(),
            status: RunStatus::Failed,
            sender_bps: None,
            receiver_bps: None,
            bytes: None,
            retransmits: None,
            lost_percent: None,
            error: None,
        }
    }
}

/// Sums over the legs; `None` (stored `null`) when a leg lacks the figure.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct Aggregate {
    /// Bits/s.
    pub sender_bps: Option<f64>,
    /// Bits/s (goodput).
    pub receiver_bps: Option<f64>,
    pub bytes: Option<i64>,
}

/// What a multi-port run was asked for (its stored `params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MultiParams {
    /// The longest leg's duration, s.
    pub time: u32,
    /// Streams over every leg.
    pub parallel: u32,
    /// One per leg, in the order given.
    pub legs: Vec<LegParams>,
}

impl MultiParams {
    /// Stored parameters read back; the default (no legs) when they are not these.
    pub(crate) fn of_params(v: &serde_json::Value) -> MultiParams {
        MultiParams::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.params_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// One leg as asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LegParams {
    /// The board port the leg is bound to.
    pub port: Option<String>,
    /// The server's host and port.
    pub peer: String,
    pub peer_port: u16,
    /// From the board's view: send, receive or bidir.
    pub direction: RunDirection,
    /// The iperf3 parameters the leg sent (`None`: stored ones that no longer read).
    #[serde(deserialize_with = "lenient")]
    pub params: Option<Params>,
}

/// `Some` when the value reads as a `T`, else `None` (never an error): a leg whose stored
/// iperf3 parameters no longer read still shows its port and peer.
fn lenient<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(T::deserialize(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::params::Protocol;

    /// The stored summary and params of a lab run on the runner before it was typed
    /// (`tests/monitor.rs` `multi_port_legs_use_their_own_ports`, read from SQLite): leg 1
    /// sends 200 Mbit/s out of eth0, leg 2 receives 100 Mbit/s on eth1.
    const LAB_SUMMARY: &str = include_str!("../../tests/data/multi_summary.json");
    const LAB_PARAMS: &str = include_str!("../../tests/data/multi_params.json");

    /// A run with a failed UDP leg, in the runner's key order: `null` figures and sums.
    const FAILED_LEG: &str = r#"{"legs":[{"id":5,"port":"eth0","peer":"192.0.2.2:5201","protocol":"UDP","direction":"bidir","status":"completed","sender_bps":1000000.0,"receiver_bps":999000.0,"bytes":1250000,"retransmits":null,"lost_percent":0.1,"error":null},{"id":6,"port":"eth1","peer":"198.51.100.2:5202","protocol":"UDP","direction":"send","status":"failed","sender_bps":null,"receiver_bps":null,"bytes":null,"retransmits":null,"lost_percent":null,"error":"connection refused"}],"aggregate":{"sender_bps":null,"receiver_bps":null,"bytes":null}}"#;

    fn round_trip<T>(stored: &str) -> T
    where
        T: Serialize + for<'de> Deserialize<'de>,
    {
        // As in `forward_summary`: the bytes to keep are the stored Value's, written back.
        let v: serde_json::Value = serde_json::from_str(stored).unwrap();
        let untyped = serde_json::to_string(&v).unwrap();
        let s = T::deserialize(&v).expect("a stored row");
        assert_eq!(serde_json::to_string(&s).unwrap(), untyped);
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), untyped);
        s
    }

    /// Issue 40 item 1: a multi run's stored summary and params read through
    /// [`MultiSummary`] / [`MultiParams`] and written back are the same bytes (key order,
    /// `null` figures, the direction and protocol words).
    #[test]
    fn stored_rows_read_back_byte_for_byte() {
        let s: MultiSummary = round_trip(LAB_SUMMARY);
        assert_eq!(s.legs.len(), 2);
        assert_eq!(
            (s.legs[0].port.as_str(), s.legs[0].direction.clone()),
            ("eth0", RunDirection::Send)
        );
        assert_eq!(
            (s.legs[1].port.as_str(), s.legs[1].direction.clone()),
            ("eth1", RunDirection::Receive)
        );
        assert_eq!(s.legs[0].protocol, RunProtocol::Tcp);
        assert_eq!(s.legs[1].status, RunStatus::Completed);
        assert_eq!(
            s.aggregate.bytes,
            Some(s.legs.iter().filter_map(|l| l.bytes).sum())
        );

        let p: MultiParams = round_trip(LAB_PARAMS);
        assert_eq!((p.time, p.parallel, p.legs.len()), (3, 2, 2));
        assert_eq!(p.legs[1].port.as_deref(), Some("eth1"));
        assert_eq!(p.legs[1].direction, RunDirection::Receive);
        let leg = p.legs[0].params.as_ref().expect("iperf3 params");
        assert_eq!((leg.protocol, leg.bandwidth), (Protocol::Tcp, 200_000_000));

        let s: MultiSummary = round_trip(FAILED_LEG);
        assert_eq!(s.legs[1].status, RunStatus::Failed);
        assert_eq!(s.legs[1].error.as_deref(), Some("connection refused"));
        assert_eq!(s.aggregate, Aggregate::default());
    }

    /// Rows with keys missing still read: a leg without figures or status (failed), params
    /// without `parallel` or a leg's `peer_port`, a leg whose iperf3 params no longer read
    /// (its port and peer still do). Not a summary: the default, no panic.
    #[test]
    fn old_rows_still_read() {
        let old =
            serde_json::json!({"legs": [{"id": 2, "port": "eth0", "peer": "192.0.2.2:5201"}]});
        let s = MultiSummary::deserialize(&old).expect("an early summary reads");
        assert_eq!(
            (s.legs[0].status, s.legs[0].bytes),
            (RunStatus::Failed, None)
        );
        assert_eq!(s.aggregate, Aggregate::default());

        let old = serde_json::json!({"time": 10, "legs": [
            {"port": "eth0", "peer": "192.0.2.2", "direction": "send", "params": {"protocol": "TCP"}}]});
        let p = MultiParams::deserialize(&old).expect("early params read");
        assert_eq!((p.time, p.parallel), (10, 0));
        assert_eq!(
            (p.legs[0].peer.as_str(), p.legs[0].peer_port),
            ("192.0.2.2", 0)
        );
        assert_eq!(p.legs[0].params, None);

        assert_eq!(
            MultiSummary::of_summary(&serde_json::Value::Null),
            MultiSummary::default()
        );
        assert_eq!(
            MultiParams::of_params(&serde_json::json!({"legs": 3})),
            MultiParams::default()
        );
    }
}
