//! A run's word-valued fields beside its kind and status: which end the board was (`RunRole`),
//! what protocol was measured (`RunProtocol`) and which way the data flowed (`RunDirection`).
//! Each is stored, exported and served by the API as the same word it always was (the
//! `runs.role`, `runs.protocol`, `runs.direction` columns; `as_str` is that word, serde uses
//! it).
//!
//! Unknown words: `role` (like `kind` and `status`) is a closed set — the schema's CHECK
//! constraint and an import refuse any other word (should one be read anyway, the field is
//! named in the row's `invalid` list). The protocol and direction were never checked, on
//! import or by the schema, so a word this netperfd does not know (from a hand-edited or
//! future history file) is kept as it is in an `Other` variant and written back unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which end of the test the board was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunRole {
    /// The board ran the test (its client, or the one recording a peer's or its own traffic).
    #[default]
    Client,
    /// A peer ran the test against the board (the board served it).
    Server,
}

impl RunRole {
    /// The stored word: client / server.
    pub fn as_str(self) -> &'static str {
        match self {
            RunRole::Client => "client",
            RunRole::Server => "server",
        }
    }

    /// Parse a stored word; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<RunRole> {
        match s {
            "client" => Some(RunRole::Client),
            "server" => Some(RunRole::Server),
            _ => None,
        }
    }
}

impl std::fmt::Display for RunRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A result table row's status (a suite's step, a compared run): its run's
/// ([`crate::model::RunStatus`]), or `pending` / `skipped` for a planned test without a run
/// (the suite is still running / it ended before the test started). Shown, exported and
/// served as the word (`as_str`, serde).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    /// Not started yet (the suite is running).
    #[default]
    Pending,
    Running,
    Completed,
    Failed,
    Aborted,
    /// Never started: the suite ended first.
    Skipped,
}

impl StepStatus {
    /// The word: pending / running / completed / failed / aborted / skipped.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Completed => "completed",
            StepStatus::Failed => "failed",
            StepStatus::Aborted => "aborted",
            StepStatus::Skipped => "skipped",
        }
    }

    /// Whether the test is still to come or under way (pending or running).
    pub fn is_live(self) -> bool {
        match self {
            StepStatus::Pending | StepStatus::Running => true,
            StepStatus::Completed
            | StepStatus::Failed
            | StepStatus::Aborted
            | StepStatus::Skipped => false,
        }
    }
}

impl From<crate::model::RunStatus> for StepStatus {
    fn from(s: crate::model::RunStatus) -> StepStatus {
        use crate::model::RunStatus;
        match s {
            RunStatus::Running => StepStatus::Running,
            RunStatus::Completed => StepStatus::Completed,
            RunStatus::Failed => StepStatus::Failed,
            RunStatus::Aborted => StepStatus::Aborted,
        }
    }
}

impl std::fmt::Display for StepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Defines a word enum with fixed words plus an `Other(String)` keeping any other word.
macro_rules! open_words {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident => $w:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            $($(#[$vm])* $v,)*
            /// A stored word this netperfd does not write (kept and written back as it is).
            Other(String),
        }

        impl $name {
            /// The stored word.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$v => $w,)*
                    $name::Other(s) => s,
                }
            }

            /// The value of a stored word: a known one, or `Other` keeping it.
            pub fn parse(s: &str) -> $name {
                match s {
                    $($w => $name::$v,)*
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
                Ok($name::parse(&s))
            }
        }
    };
}

open_words! {
    /// What protocol the run measured, as stored: TCP, UDP, SCTP, HTTP, `mixed` (a multi-port
    /// run whose legs differ) or empty (a monitor run measures no protocol of its own).
    RunProtocol {
        /// "TCP".
        Tcp => "TCP",
        /// "UDP".
        Udp => "UDP",
        /// "SCTP".
        Sctp => "SCTP",
        /// "HTTP" (the payload server and the HTTP download).
        Http => "HTTP",
        /// "mixed": a multi-port run's legs use different protocols.
        Mixed => "mixed",
        /// "" (empty, the default): no protocol of its own (a monitor run).
        #[default]
        Unset => "",
    }
}

open_words! {
    /// Which way the data flowed, from the board's point of view (a forwarding run: the peer
    /// agent's), as stored: send, receive, bidir, tradeoff (iperf 2), `mixed` (a multi-port run
    /// whose legs differ) or empty (a monitor run).
    RunDirection {
        /// "send": the board (or the agent) sent.
        Send => "send",
        /// "receive".
        Receive => "receive",
        /// "bidir": both ways at once.
        Bidir => "bidir",
        /// "tradeoff": iperf 2's one way, then the other.
        Tradeoff => "tradeoff",
        /// "mixed": a multi-port run's legs go different ways.
        Mixed => "mixed",
        /// "" (empty, the default): no direction (a monitor run).
        #[default]
        Unset => "",
    }
}

impl RunProtocol {
    /// Whether the run measured UDP (also an unknown stored word spelling it in another
    /// case, as the readers always took it).
    pub fn is_udp(&self) -> bool {
        match self {
            RunProtocol::Udp => true,
            RunProtocol::Other(w) => w.eq_ignore_ascii_case("udp"),
            RunProtocol::Tcp
            | RunProtocol::Sctp
            | RunProtocol::Http
            | RunProtocol::Mixed
            | RunProtocol::Unset => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_serde_and_parse() {
        for p in [
            RunProtocol::Tcp,
            RunProtocol::Udp,
            RunProtocol::Sctp,
            RunProtocol::Http,
            RunProtocol::Mixed,
            RunProtocol::Unset,
            RunProtocol::Other("QUIC".into()),
        ] {
            let v = serde_json::to_value(&p).unwrap();
            assert_eq!(v, serde_json::Value::String(p.as_str().into()));
            assert_eq!(serde_json::from_value::<RunProtocol>(v).unwrap(), p);
            assert_eq!(RunProtocol::parse(p.as_str()), p);
        }
        assert_eq!(RunProtocol::parse("UDP"), RunProtocol::Udp);
        // Case matters: the stored word is upper case.
        assert_eq!(RunProtocol::parse("udp"), RunProtocol::Other("udp".into()));
        for d in [
            RunDirection::Send,
            RunDirection::Receive,
            RunDirection::Bidir,
            RunDirection::Tradeoff,
            RunDirection::Mixed,
            RunDirection::Unset,
            RunDirection::Other("up".into()),
        ] {
            let v = serde_json::to_value(&d).unwrap();
            assert_eq!(v, serde_json::Value::String(d.as_str().into()));
            assert_eq!(serde_json::from_value::<RunDirection>(v).unwrap(), d);
        }
        assert_eq!(RunDirection::Unset.as_str(), "");
        for (st, w) in [
            (StepStatus::Pending, "pending"),
            (StepStatus::Running, "running"),
            (StepStatus::Completed, "completed"),
            (StepStatus::Failed, "failed"),
            (StepStatus::Aborted, "aborted"),
            (StepStatus::Skipped, "skipped"),
        ] {
            assert_eq!(st.as_str(), w);
            assert_eq!(serde_json::to_value(st).unwrap(), serde_json::json!(w));
            assert_eq!(serde_json::from_value::<StepStatus>(w.into()).unwrap(), st);
            assert_eq!(format!("{st:<10}|"), format!("{w:<10}|"));
        }
        assert_eq!(
            StepStatus::from(crate::model::RunStatus::Aborted),
            StepStatus::Aborted
        );
        for r in [RunRole::Client, RunRole::Server] {
            assert_eq!(RunRole::parse(r.as_str()), Some(r));
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::Value::String(r.as_str().into())
            );
        }
        assert_eq!(RunRole::parse("peer"), None);
    }
}
