//! What a run is and how it ended: the run-kind enum and the run status, with the words the
//! store, the API and the exports use for them (unchanged since the first database schema).

use serde::{Deserialize, Serialize};

/// What ran. The stored word (`as_str`, serde) is the `runs.kind` column's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// An iperf3 test: the board's client, or a PC's client served by the board.
    #[default]
    Iperf3,
    /// An iperf 2 test (client or served).
    Iperf2,
    /// Several legs (iperf3 tests bound to their ports) started together; the legs are runs
    /// whose `parent_id` is this run.
    Multi,
    /// A forwarding run: a peer agent tests through the board while the board records.
    Forward,
    /// A monitor-only run: the board's ports and CPU recorded while others' traffic flows.
    Monitor,
    /// The payload server serving one client's HTTP downloads.
    HttpServe,
    /// The board downloading an http:// URL over N connections.
    HttpGet,
    /// One connection into the raw TCP sink.
    TcpSink,
    /// One connection out of the raw TCP source.
    TcpSource,
    /// Latency under load: ICMP probes to a peer while TCP streams load the path
    /// (idle → loaded → idle).
    Latency,
    /// An RFC 2544 benchmark of the board as the device under test: the peer agent on PC1
    /// generates UDP frames of each size through the board to PC2, trial by trial.
    Rfc2544,
}

impl RunKind {
    /// Every kind, in the order History lists them.
    pub const ALL: [RunKind; 11] = [
        RunKind::Iperf3,
        RunKind::Iperf2,
        RunKind::Multi,
        RunKind::Forward,
        RunKind::Monitor,
        RunKind::HttpServe,
        RunKind::HttpGet,
        RunKind::TcpSink,
        RunKind::TcpSource,
        RunKind::Latency,
        RunKind::Rfc2544,
    ];

    /// The stored word: iperf3, iperf2, multi, forward, monitor, http-serve, http-get,
    /// tcp-sink, tcp-source, latency, rfc2544.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Iperf3 => "iperf3",
            RunKind::Iperf2 => "iperf2",
            RunKind::Multi => "multi",
            RunKind::Forward => "forward",
            RunKind::Monitor => "monitor",
            RunKind::HttpServe => "http-serve",
            RunKind::HttpGet => "http-get",
            RunKind::TcpSink => "tcp-sink",
            RunKind::TcpSource => "tcp-source",
            RunKind::Latency => "latency",
            RunKind::Rfc2544 => "rfc2544",
        }
    }

    /// Parse a stored word; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<RunKind> {
        RunKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// A short label for people: "iperf3", "iperf 2", "multi-port", "forwarding",
    /// "monitor", "HTTP serve", "HTTP download", "TCP sink", "TCP source", "latency under load", "RFC 2544".
    pub fn label(self) -> &'static str {
        match self {
            RunKind::Iperf3 => "iperf3",
            RunKind::Iperf2 => "iperf 2",
            RunKind::Multi => "multi-port",
            RunKind::Forward => "forwarding",
            RunKind::Monitor => "monitor",
            RunKind::HttpServe => "HTTP serve",
            RunKind::HttpGet => "HTTP download",
            RunKind::TcpSink => "TCP sink",
            RunKind::TcpSource => "TCP source",
            RunKind::Latency => "latency under load",
            RunKind::Rfc2544 => "RFC 2544",
        }
    }
}

/// What a kind of run has, asked by the pages, charts, exports and the recorder. Each is an
/// exhaustive `match` (no catch-all arm): a new kind does not compile until every capability
/// is decided for it.
impl RunKind {
    /// Whether the run is a parent of legs (runs whose `parent_id` is it): its intervals,
    /// charts and verdicts are its legs'.
    pub fn has_legs(self) -> bool {
        match self {
            RunKind::Multi => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency
            | RunKind::Rfc2544 => false,
        }
    }

    /// Whether the board watches traffic others send (through it or to it) and its summary is
    /// the board's view (ports, CPU, drops): the forwarding page lists these runs, and their
    /// text report starts with that summary.
    pub fn has_board_summary(self) -> bool {
        match self {
            RunKind::Forward | RunKind::Monitor => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency
            | RunKind::Rfc2544 => false,
        }
    }

    /// Whether the run's stored summary has a text form of its own ([`crate::results::text::
    /// summary_text`]): the board's view, or an RFC 2544 run's tables. `netperfd runs show`
    /// prints it.
    pub fn has_text_summary(self) -> bool {
        match self {
            RunKind::Forward | RunKind::Monitor | RunKind::Rfc2544 => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency => false,
        }
    }

    /// Whether the board sends the run's bytes on raw TCP connections it accepted
    /// (`tcp-source`; a `tcp-sink` receives them).
    pub fn is_tcp_source(self) -> bool {
        match self {
            RunKind::TcpSource => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::Latency
            | RunKind::Rfc2544 => false,
        }
    }

    /// Whether the measured traffic is forwarded through the board (a peer agent's test from
    /// one PC to another): its direction is the peer's, its target the agent's `test`, and
    /// what went missing may have been dropped by the board's forwarding.
    pub fn forwards(self) -> bool {
        match self {
            RunKind::Forward => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency
            | RunKind::Rfc2544 => false,
        }
    }

    /// Whether the run stores latency probes (round-trip samples and the idle / loaded
    /// figures in its summary): the RTT chart and the latency head of its page.
    pub fn has_latency_probes(self) -> bool {
        match self {
            RunKind::Latency => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Rfc2544 => false,
        }
    }

    /// Whether the run is the board's own payload traffic (HTTP or raw TCP): the Traffic
    /// page's kinds.
    pub fn is_traffic(self) -> bool {
        match self {
            RunKind::HttpServe | RunKind::HttpGet | RunKind::TcpSink | RunKind::TcpSource => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::Latency
            | RunKind::Rfc2544 => false,
        }
    }

    /// Whether the run may turn on forwarding with NAT on the board for its duration (and
    /// stores what to undo in its summary's `nat.undo`): a daemon that starts after such a
    /// run was cut short undoes it.
    pub fn may_enable_forwarding(self) -> bool {
        match self {
            RunKind::Forward | RunKind::Rfc2544 => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency => false,
        }
    }

    /// Whether the run is always one TCP connection (the raw sink and source).
    pub fn is_one_connection(self) -> bool {
        match self {
            RunKind::TcpSink | RunKind::TcpSource => true,
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::Latency
            | RunKind::Rfc2544 => false,
        }
    }
}

impl std::fmt::Display for RunKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Outcome of a run as stored in history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
    Aborted,
}

impl RunStatus {
    /// The stored word: running / completed / failed / aborted.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Aborted => "aborted",
        }
    }

    /// Parse a stored word.
    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "running" => RunStatus::Running,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            "aborted" => RunStatus::Aborted,
            _ => return None,
        })
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_words_round_trip_and_match_serde() {
        for k in RunKind::ALL {
            assert_eq!(RunKind::parse(k.as_str()), Some(k));
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::Value::String(k.as_str().into())
            );
        }
        assert_eq!(RunKind::HttpServe.as_str(), "http-serve");
        assert_eq!(RunKind::parse("iperf4"), None);
    }

    #[test]
    fn all_lists_every_kind_in_declaration_order() {
        use serde::de::IntoDeserializer;
        // serde reads a variant by its index too: every declared kind, with no list to forget.
        let mut declared = Vec::new();
        for i in 0u32.. {
            let d: serde::de::value::U32Deserializer<serde::de::value::Error> =
                i.into_deserializer();
            match RunKind::deserialize(d) {
                Ok(k) => declared.push(k),
                Err(_) => break,
            }
        }
        assert_eq!(declared, RunKind::ALL);
    }

    #[test]
    fn capabilities() {
        let with = |f: fn(RunKind) -> bool| -> Vec<&str> {
            RunKind::ALL
                .into_iter()
                .filter(|&k| f(k))
                .map(RunKind::as_str)
                .collect()
        };
        assert_eq!(with(RunKind::has_legs), ["multi"]);
        assert_eq!(with(RunKind::has_board_summary), ["forward", "monitor"]);
        assert_eq!(with(RunKind::forwards), ["forward"]);
        assert_eq!(with(RunKind::has_latency_probes), ["latency"]);
        assert_eq!(
            with(RunKind::is_traffic),
            ["http-serve", "http-get", "tcp-sink", "tcp-source"]
        );
        assert_eq!(with(RunKind::is_one_connection), ["tcp-sink", "tcp-source"]);
        assert_eq!(with(RunKind::may_enable_forwarding), ["forward", "rfc2544"]);
    }
}
