//! The stored parameters and summaries of the Traffic page's runs (`runs.params_json` and
//! `runs.summary_json` of kinds `http-serve`, `http-get`, `tcp-sink` and `tcp-source`), typed:
//! written by `runs::traffic` (the payload server, the board's downloads, the TCP sink and
//! source, and their folded runs, see `runs::anon`), read by the run page (`results::view`),
//! the Traffic page's list (`web::traffic`) and `netperfd http-get`.
//!
//! As in [`crate::results::forward_summary`]: field order = stored key order (a stored row read
//! and written back is the same bytes), every key defaults when absent. A key the writer leaves
//! out in some rows, or whose absence a page shows differently from a zero (no transfer line
//! without bytes and seconds), is an `Option` left out when `None`. The sink and the source
//! store the same shapes ([`TcpRawParams`], [`TcpRawSummary`]).

use crate::engine::http::GetResult;
use crate::engine::meter::ConnTotals;
use crate::model::RunKind;
use crate::store::RunRow;
use serde::{Deserialize, Serialize};

/// Stored JSON read as `T`: `None` for `null` (a run without a summary yet, a download that
/// failed before its first byte) or a value that is not a `T` (a mistyped key).
fn read<T: for<'de> Deserialize<'de>>(v: &serde_json::Value) -> Option<T> {
    if v.is_null() {
        return None;
    }
    T::deserialize(v).ok()
}

/// `value` as stored JSON (these types always serialize; `null` if one did not).
fn stored<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// What a payload-server (`http-serve`) run served: the path and size asked for, or, in the
/// run folding a peer's requests beyond its run budget, `(several)`, `folded` and a note.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct HttpServeParams {
    /// The payload's URL path (`/1G`); `(several)` in a folded run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The payload's size, bytes (not in a folded run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The run counts the requests beyond the peer's run budget together.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub folded: bool,
    /// Why the run is folded (a folded run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl HttpServeParams {
    /// Stored parameters read back; the default (every key absent) when they are not these.
    pub(crate) fn of_params(v: &serde_json::Value) -> HttpServeParams {
        read(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.params_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        stored(self)
    }
}

/// How a payload-server run ended: one peer's requests for one payload, bytes and goodput.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct HttpServeSummary {
    /// The payload's URL path, as asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The payload's size, bytes (`u64::MAX` in a folded run).
    pub size: u64,
    /// Most body transfers at once (axel's `-n`).
    pub connections: u64,
    /// TCP connections the requests came over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_connections: Option<u64>,
    /// Requests with a body, and those the peer closed before their end.
    pub requests: u64,
    pub requests_cut_short: u64,
    /// Body bytes the requests asked for.
    pub requested_bytes: u64,
    /// Goodput bytes (requests served to their end, plus what cut ones added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Bytes written to the sockets, requests cut short included.
    pub bytes_sent: u64,
    /// From the first request to the last body byte, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Goodput: bytes × 8 / seconds, bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits_per_second: Option<f64>,
    /// The client's User-Agent (at most 120 characters; "" when none).
    pub user_agent: String,
    /// Each TCP connection's bytes, life (s) and bitrate (bits/s).
    pub per_connection: Vec<ConnTotals>,
}

impl HttpServeSummary {
    /// A stored summary read back; `None` when there is none or it is not this.
    pub(crate) fn of_summary(v: &serde_json::Value) -> Option<HttpServeSummary> {
        read(v)
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        stored(self)
    }

    /// The transfer figures every traffic run's page shows.
    pub(crate) fn transfer(&self) -> Transfer<'_> {
        Transfer {
            bytes: self.bytes,
            seconds: self.seconds,
            bits_per_second: self.bits_per_second,
            per_connection: &self.per_connection,
            sum: None,
            note: None,
        }
    }
}

/// What the board was asked to download (`http-get`; `netperfd http-get`, the Traffic page).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct HttpGetParams {
    /// `http://host[:port]/path`.
    pub url: String,
    /// Parallel connections asked for (0 when absent: read as 1).
    pub connections: u32,
    /// Limit for the whole download, seconds.
    pub timeout: u32,
}

impl HttpGetParams {
    /// Stored parameters read back; the default (every key absent) when they are not these.
    pub(crate) fn of_params(v: &serde_json::Value) -> HttpGetParams {
        read(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.params_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        stored(self)
    }
}

/// What a download by the board learned and moved (the engine's [`GetResult`] as stored; also
/// what a failed download moved until it failed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct HttpGetSummary {
    /// The URL downloaded.
    pub url: String,
    /// The peer's address and port as connected, and the board's of the first connection.
    pub peer: String,
    pub local: String,
    /// Body size the server announced (Content-Length), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Whether the server accepted byte ranges (`Accept-Ranges: bytes`; absent: not known, no
    /// warning).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranges: Option<bool>,
    /// Connections used (0 when absent: the per-connection list, or the request, tells).
    pub connections: u64,
    /// Body bytes received, all connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// From the first range request to the last byte, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Goodput: bytes × 8 / seconds, bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits_per_second: Option<f64>,
    /// Each connection's bytes, life (s) and bitrate (bits/s).
    pub per_connection: Vec<ConnTotals>,
    /// The byte range each connection asked for (first, last), bytes.
    pub ranges_asked: Vec<(u64, u64)>,
}

impl From<&GetResult> for HttpGetSummary {
    fn from(r: &GetResult) -> HttpGetSummary {
        HttpGetSummary {
            url: r.url.clone(),
            peer: r.peer.clone(),
            local: r.local.clone(),
            size: Some(r.size),
            ranges: Some(r.ranges),
            connections: u64::from(r.connections),
            bytes: Some(r.bytes),
            seconds: Some(r.seconds),
            bits_per_second: Some(r.bits_per_second),
            per_connection: r.per_connection.clone(),
            ranges_asked: r.ranges_asked.clone(),
        }
    }
}

impl HttpGetSummary {
    /// A stored summary read back; `None` when there is none (a download that failed before
    /// a byte) or it is not this.
    pub(crate) fn of_summary(v: &serde_json::Value) -> Option<HttpGetSummary> {
        read(v)
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        stored(self)
    }

    /// The transfer figures every traffic run's page shows.
    pub(crate) fn transfer(&self) -> Transfer<'_> {
        Transfer {
            bytes: self.bytes,
            seconds: self.seconds,
            bits_per_second: self.bits_per_second,
            per_connection: &self.per_connection,
            sum: None,
            note: None,
        }
    }
}

/// What a TCP sink or source run was: the board's port, and in the run that folds a peer's
/// connections beyond its run budget, how many it counted (`Store::fold_into` adds them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TcpRawParams {
    /// The service's TCP port on the board.
    pub port: u16,
    /// Connections counted in a folded run (a folded run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folded_connections: Option<u64>,
}

impl TcpRawParams {
    /// Stored parameters read back; the default when they are not these.
    #[cfg(test)]
    pub(crate) fn of_params(v: &serde_json::Value) -> TcpRawParams {
        read(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.params_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        stored(self)
    }
}

/// How a TCP sink or source run ended: bytes over the run, and with several streams at once
/// each stream and their sum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TcpRawSummary {
    /// The service's TCP port on the board.
    pub port: u16,
    /// Bytes read (sink) or written (source), all streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The longest stream's life, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// bytes × 8 / seconds, bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits_per_second: Option<f64>,
    /// What the bytes count (the board's side of the socket).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Streams at once (only with more than one, as the next two).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u64>,
    /// Each stream's bytes, life (s) and bitrate (bits/s).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_connection: Vec<ConnTotals>,
    /// The streams' sum over the run's span (iperf3's `[SUM]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<StreamSum>,
}

impl TcpRawSummary {
    /// A stored summary read back; `None` when there is none or it is not this.
    pub(crate) fn of_summary(v: &serde_json::Value) -> Option<TcpRawSummary> {
        read(v)
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        stored(self)
    }

    /// The transfer figures every traffic run's page shows.
    pub(crate) fn transfer(&self) -> Transfer<'_> {
        Transfer {
            bytes: self.bytes,
            seconds: self.seconds,
            bits_per_second: self.bits_per_second,
            per_connection: &self.per_connection,
            sum: self.sum.as_ref(),
            note: self.note.as_deref(),
        }
    }
}

/// Several raw TCP streams together over the run's span.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct StreamSum {
    /// Streams summed.
    pub streams: u64,
    /// Their bytes, the run's span (s) and bytes × 8 / span (bits/s).
    pub bytes: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
}

/// The transfer figures a traffic run's page shows, whatever its kind (`view::transfer_facts`
/// and the Goodput / Transfer cards).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Transfer<'a> {
    /// Bytes moved; the transfer's seconds; goodput, bits/s (`None` when not stored).
    pub bytes: Option<u64>,
    pub seconds: Option<f64>,
    pub bits_per_second: Option<f64>,
    /// Each connection's figures (shown with more than one).
    pub per_connection: &'a [ConnTotals],
    /// Several streams' sum (raw TCP only).
    pub sum: Option<&'a StreamSum>,
    /// What the bytes count (raw TCP only).
    pub note: Option<&'a str>,
}

/// Most transfers at once a traffic run's summary holds (`None` for a raw TCP run, a run
/// without a summary and the other kinds).
pub(crate) fn connections(run: &RunRow) -> Option<u64> {
    match run.kind {
        RunKind::HttpServe => HttpServeSummary::of_summary(&run.summary).map(|s| s.connections),
        RunKind::HttpGet => HttpGetSummary::of_summary(&run.summary).map(|s| s.connections),
        RunKind::TcpSink
        | RunKind::TcpSource
        | RunKind::Iperf3
        | RunKind::Iperf2
        | RunKind::Multi
        | RunKind::Forward
        | RunKind::Monitor
        | RunKind::Latency
        | RunKind::Rfc2544 => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored params and summaries of runs made by the binary before these types (a daemon in
    /// a scratch network namespace on loopback: curl and axel downloads of payloads, more
    /// than the run budget of them, `nc` into the sink and out of the source, one and three
    /// at once, a peer's folded sink and source runs, and `netperfd http-get`, one that
    /// worked with four connections and one that failed), the rows' JSON read from SQLite.
    const FIXTURES: &str = include_str!("../../tests/data/traffic_runs.json");

    /// `stored` read as `T` and written back: the same bytes (see forward_summary's round_trip:
    /// the store reads the JSON into a Value first).
    fn round_trip<T>(stored: &serde_json::Value) -> T
    where
        T: Serialize + for<'de> Deserialize<'de>,
    {
        let untyped = serde_json::to_string(stored).unwrap();
        let typed = T::deserialize(stored).expect("stored JSON");
        assert_eq!(serde_json::to_string(&typed).unwrap(), untyped);
        assert_eq!(
            serde_json::to_string(&serde_json::to_value(&typed).unwrap()).unwrap(),
            untyped
        );
        typed
    }

    /// The fixture rows of `kind`: (params, summary) of each.
    fn rows(kind: &str) -> Vec<(serde_json::Value, serde_json::Value)> {
        let all: serde_json::Value = serde_json::from_str(FIXTURES).unwrap();
        let rows: Vec<_> = all[kind]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| (r["params"].clone(), r["summary"].clone()))
            .collect();
        assert!(!rows.is_empty(), "{kind}");
        rows
    }

    /// Issue 40 item 1: every stored traffic row's params and summary read through their type
    /// and written back are the same bytes.
    #[test]
    fn stored_summaries_read_back_byte_for_byte() {
        for (p, s) in rows("http-serve") {
            round_trip::<HttpServeParams>(&p);
            let t: HttpServeSummary = round_trip(&s);
            assert!(t.path.is_some() && t.bytes.is_some() && t.tcp_connections.is_some());
        }
        for (p, s) in rows("http-get") {
            let t: HttpGetParams = round_trip(&p);
            assert!(!t.url.is_empty() && t.connections > 0);
            if !s.is_null() {
                let t: HttpGetSummary = round_trip(&s);
                assert!(t.size.is_some() && t.bytes.is_some());
            }
        }
        for kind in ["tcp-sink", "tcp-source"] {
            for (p, s) in rows(kind) {
                let t: TcpRawParams = round_trip(&p);
                assert_eq!(TcpRawParams::of_params(&p), t);
                assert!(t.port > 0);
                if !s.is_null() {
                    let t: TcpRawSummary = round_trip(&s);
                    assert!(t.bytes.is_some() && t.note.is_some());
                }
            }
        }
    }

    /// Rows from before a key existed read with it absent; `null` or a mistyped row reads as
    /// no summary and default params, never a panic.
    #[test]
    fn missing_and_mistyped_rows_still_read() {
        let old = serde_json::json!({"path": "/1G", "connections": 2, "bytes": 10});
        let s = HttpServeSummary::of_summary(&old).expect("old summary");
        assert_eq!((s.tcp_connections, s.seconds), (None, None));
        assert_eq!(s.transfer().bytes, Some(10));
        assert!(
            HttpGetSummary::of_summary(&serde_json::json!({})).is_some_and(|s| s.ranges.is_none())
        );
        assert_eq!(HttpGetSummary::of_summary(&serde_json::Value::Null), None);
        assert_eq!(
            TcpRawSummary::of_summary(&serde_json::json!({"bytes": "many"})),
            None
        );
        let bad = serde_json::json!({"url": 5});
        assert_eq!(HttpGetParams::of_params(&bad), HttpGetParams::default());
        assert_eq!(
            HttpServeParams::of_params(&serde_json::json!([1])),
            HttpServeParams::default()
        );
    }
}
