//! The stored summary and parameters of an iperf 2 run (kind `iperf2`: `runs.summary_json`
//! and `runs.params_json`), typed: the summary written by `runs::iperf2` (from the engine's
//! [`Outcome`]), both read by the run page ([`crate::results::view`]), the loss ledger
//! (`runs::monitor`) and the CLI's served-test banner (`cmd::iperf2`).
//!
//! As in [`crate::results::rfc2544_summary`]: field order = stored key order, so a stored
//! summary read and written back is the same bytes (`stored_summaries_read_back_byte_for_byte`,
//! on the fixtures `tests/data/iperf2_*.json`); every key defaults when absent. The streams
//! are the engine's own [`StreamResult`] (what the runner has always stored).

use crate::engine::iperf2::wire::Return;
use crate::engine::iperf2::{stream_sum, Outcome, StreamResult, UdpFigures};
use crate::results::json::f64_or_nan;
use serde::{Deserialize, Serialize};

/// The whole summary of an iperf 2 run: every stream's figures, the notes, and with several
/// streams in a direction their [SUM] (as a stock iperf 2 prints it for `-P`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Iperf2Summary {
    /// Always "iperf 2" (the peer's tool).
    pub peer: String,
    /// One per stream, in the engine's order; `sender` from the board's side.
    pub streams: Vec<StreamResult>,
    /// Notes worth keeping (no server report, a peer that looks like iperf3, …).
    pub notes: Vec<String>,
    /// The [SUM] per direction; absent unless a direction had at least two streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<StreamSums>,
}

/// The [SUM]s of an iperf 2 run, from the board's side; a direction is absent unless it had
/// at least two streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct StreamSums {
    /// The streams the board received on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receive: Option<StreamSum>,
    /// The streams the board sent on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send: Option<StreamSum>,
}

/// One direction's [SUM]: bytes added up, the longest stream's seconds (see
/// [`stream_sum`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct StreamSum {
    /// Streams in this direction (≥ 2).
    pub streams: usize,
    /// Bytes moved, all streams.
    pub bytes: u64,
    /// The longest stream's duration, s.
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds: f64,
    /// `bytes` over `seconds`, bits/s.
    #[serde(deserialize_with = "f64_or_nan")]
    pub bits_per_second: f64,
    /// UDP receiver figures added up (jitter: the streams' mean, ms); `null` over TCP.
    pub udp: Option<UdpFigures>,
}

impl Iperf2Summary {
    /// The summary to store for a finished test.
    pub(crate) fn of_outcome(o: &Outcome) -> Iperf2Summary {
        let sum = |sender: bool| {
            stream_sum(o, sender).map(|s| StreamSum {
                streams: o.streams.iter().filter(|x| x.sender == sender).count(),
                bytes: s.bytes,
                seconds: s.seconds,
                bits_per_second: s.bits_per_second(),
                udp: s.udp,
            })
        };
        let sums = StreamSums {
            receive: sum(false),
            send: sum(true),
        };
        Iperf2Summary {
            peer: "iperf 2".into(),
            streams: o.streams.clone(),
            notes: o.notes.clone(),
            sum: (sums.receive.is_some() || sums.send.is_some()).then_some(sums),
        }
    }

    /// A stored summary read back; `None` when it is not one (no summary, another shape).
    pub(crate) fn of_summary(v: &serde_json::Value) -> Option<Iperf2Summary> {
        Iperf2Summary::deserialize(v).ok()
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The streams the board sent on (`sender`) or received on.
    pub(crate) fn streams_of(&self, sender: bool) -> impl Iterator<Item = &StreamResult> {
        self.streams.iter().filter(move |s| s.sender == sender)
    }

    /// The UDP flow the board sent (datagrams, mean payload = bytes over datagrams), for the
    /// loss ledger; `None` when no sending stream, or one without its datagram count.
    pub(crate) fn sent_flow(&self, ipv6: bool) -> Option<crate::results::ledger::Flow> {
        let (mut bytes, mut sent) = (0u64, 0u64);
        for s in self.streams_of(true) {
            sent = sent.checked_add(s.sent_datagrams?)?;
            bytes = bytes.checked_add(s.bytes)?;
        }
        let payload = bytes.checked_div(sent).filter(|p| *p > 0)?;
        Some(crate::results::ledger::Flow::udp(payload, ipv6, Some(sent)))
    }
}

/// The stored params of an iperf 2 run, read back. The board's client stores its
/// `Iperf2Spec` (key `ret`), a served test the client's header as
/// [`crate::engine::iperf2::ServedParams`] (key `return`; no rate, length, time or bytes):
/// both read into this; keys absent in either (or in older rows) read as their default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(crate) struct Iperf2Params {
    /// `-b`: rate per stream, bits/s; 0 = unlimited / not known.
    pub rate: u64,
    /// `-l`: write size, bytes; 0 = the default.
    pub len: u64,
    /// `-t`: duration, s; 0 = not known.
    pub time: f64,
    /// `-n`: bytes per stream instead of a duration; 0 = none.
    pub bytes: u64,
    /// `-P`: streams; 0 = not known (one).
    pub parallel: u64,
    /// The return test (`-r` tradeoff, `-d` dual); `None` = not known (none).
    #[serde(alias = "return")]
    pub ret: Option<Return>,
    /// `-L`: the client's port for the return test; 0 = the same as the server's.
    pub listen_port: u64,
    /// `--trip-times` asked for.
    pub trip_times: bool,
    /// A served test: why the board did not measure `--trip-times` (stock's words).
    pub trip_times_ignored: Option<String>,
}

impl Iperf2Params {
    /// Stored params read back; the default (no flags) when they do not read.
    pub(crate) fn of_params(v: &serde_json::Value) -> Iperf2Params {
        Iperf2Params::deserialize(v).unwrap_or_default()
    }

    /// The iperf 2 flags these params stand for, each with a leading space (" -u" is the
    /// caller's: the protocol is the run's column): ` -b 100000000 -l 1470 -t 10 -P 2 -r -L
    /// 5002 --trip-times -e`.
    pub(crate) fn flags(&self) -> String {
        let mut c = String::new();
        let mut flag = |f: &str, v: String| c.push_str(&format!(" {f} {v}"));
        if self.rate > 0 {
            flag("-b", self.rate.to_string());
        }
        if self.len > 0 {
            flag("-l", self.len.to_string());
        }
        if self.time > 0.0 {
            flag("-t", self.time.to_string());
        }
        if self.bytes > 0 {
            flag("-n", self.bytes.to_string());
        }
        if self.parallel > 1 {
            flag("-P", self.parallel.to_string());
        }
        let back = match self.ret {
            Some(Return::Tradeoff) => " -r",
            Some(Return::Dual) => " -d",
            Some(Return::None) | None => "",
        };
        c.push_str(back);
        if self.listen_port > 0 && !back.is_empty() {
            c.push_str(&format!(" -L {}", self.listen_port));
        }
        if self.trip_times {
            c.push_str(" --trip-times -e");
        }
        c
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    const NAMES: [&str; 5] = [
        "client_tcp",
        "client_udp_trip",
        "client_tcp_tradeoff",
        "served_tcp_p2",
        "served_udp_dual",
    ];

    /// `tests/data/iperf2_{name}.json` read (the stored params and summary of one run).
    pub(crate) fn fixture(name: &str) -> serde_json::Value {
        let path = format!(
            "{}/tests/data/iperf2_{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
    }

    /// Summaries as the binary stored them (`tests/data/iperf2_*.json`, written by the
    /// `json!` writer before it was typed) read back and written again are the same JSON:
    /// key order, `null` kept apart from absent, number text.
    #[test]
    fn stored_summaries_read_back_byte_for_byte() {
        for name in NAMES {
            let stored = fixture(name)["summary"].clone();
            let s = Iperf2Summary::of_summary(&stored).expect(name);
            assert_eq!(s.peer, "iperf 2");
            assert_eq!(
                serde_json::to_string(&s.to_value()).expect("json"),
                serde_json::to_string(&stored).expect("json"),
                "{name}"
            );
        }
        let s = Iperf2Summary::of_summary(&fixture("served_udp_dual")["summary"]).expect("reads");
        let sum = s.sum.expect("sum");
        let send = sum.send.expect("send");
        assert_eq!((send.streams, send.bytes), (2, 2_622_480));
        assert_eq!(send.udp.map(|u| (u.lost, u.total)), Some((7, 1786)));
        assert_eq!(s.streams[3].port_unreachable, Some(3));
        let s = Iperf2Summary::of_summary(&fixture("served_tcp_p2")["summary"]).expect("reads");
        assert_eq!(s.streams[0].latency_ms.map(|l| l.count), Some(4_488));
        assert_eq!(s.streams[1].trip_drops.map(|d| d.cut), Some(1));
    }

    /// Rows missing keys (older versions, hand-made) still read, keys defaulting; a row that
    /// is not an iperf 2 summary gives `None` (the page shows no streams), never a panic.
    #[test]
    fn partial_and_foreign_rows() {
        let s = Iperf2Summary::of_summary(&json!({"streams": [{"id": 2, "sender": true}]}))
            .expect("reads");
        assert_eq!((s.streams[0].id, s.streams[0].bytes), (2, 0));
        assert!(s.notes.is_empty() && s.sum.is_none());
        assert_eq!(Iperf2Summary::of_summary(&json!({"streams": 3})), None);
        assert_eq!(Iperf2Summary::of_summary(&json!("text")), None);
        let nan =
            json!({"sum": {"send": {"streams": 2, "seconds": null, "bits_per_second": null}}});
        let s = Iperf2Summary::of_summary(&nan).expect("reads");
        assert!(s
            .sum
            .and_then(|x| x.send)
            .is_some_and(|x| x.seconds.is_nan()));
    }

    /// Both stored params shapes read: the board's client's spec (`ret`) and a served test's
    /// header params (`return`, no rate/time); a row that does not read gives no flags.
    #[test]
    fn both_params_shapes_read() {
        let p = Iperf2Params::of_params(&fixture("client_tcp_tradeoff")["params"]);
        assert_eq!(p.flags(), " -t 10.5 -r -L 5002");
        let p = Iperf2Params::of_params(&fixture("client_udp_trip")["params"]);
        assert_eq!(p.flags(), " -b 100000000 -l 1470 -t 10 --trip-times -e");
        let p = Iperf2Params::of_params(&fixture("served_udp_dual")["params"]);
        assert_eq!((p.ret, p.parallel), (Some(Return::Dual), 2));
        assert_eq!(p.flags(), " -P 2 -d");
        let p = Iperf2Params::of_params(&fixture("served_tcp_p2")["params"]);
        assert_eq!(p.flags(), " -P 2 --trip-times -e");
        let served = fixture("params_served");
        let p = Iperf2Params::of_params(&served[0]);
        assert!(p.trip_times_ignored.is_some_and(|w| w.contains("2000 s")));
        assert_eq!(Iperf2Params::of_params(&served[1]).flags(), "");
        // An old client row with `return` instead of `ret`, keys missing.
        let p = Iperf2Params::of_params(
            &json!({"host": "h", "return": "tradeoff", "listen_port": 5002}),
        );
        assert_eq!(p.flags(), " -r -L 5002");
        assert_eq!(
            Iperf2Params::of_params(&json!({"ret": "sideways"})),
            Iperf2Params::default()
        );
        assert_eq!(
            Iperf2Params::of_params(&serde_json::Value::Null),
            Iperf2Params::default()
        );
    }
}
