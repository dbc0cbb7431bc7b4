//! Saved suite definitions: a name, common defaults (peer port, board port, seconds per test)
//! and an ordered list of steps stored as JSON, so later step kinds (multi-port run, HTTP
//! download, iperf 2 peer) are new `kind` words, not migrations. A definition is checked
//! whole before it is stored or run; a bad one gives one clear message and changes nothing.
//!
//! Step kinds today (all iperf3 tests against a peer running `iperf3 -s`):
//! * `tcp` — TCP, `direction` send (default) / receive (`-R`) / bidir;
//! * `udp` — UDP at `bitrate` (required), `direction` send / receive / bidir;
//! * `udp-ladder` — UDP at each of `rates` (default 100M,400M,1000M), sending then receiving
//!   per rate (seed 001).
//!
//! * `latency` — a latency-under-load run (idle → loaded → idle, ICMP probes beside an iperf3
//!   load) with the fields of `POST /api/runs/latency`: `load`, `streams`, `idle`, `loaded`,
//!   `interval`, `congestion` (see [`crate::spec::suite_latency`]).
//!
//! Every iperf3 step may set `time` (s), `streams` (`-P`), `bitrate` (`-b`, bits/s with K/M/G),
//! `length` (`-l`, bytes), `window` (`-w`, bytes); every step a `label` (the row name in tables).
//!
//! A step is a [`Step`] variant holding only its kind's fields (the stored JSON is
//! `{"kind": "udp", …}` as it always was); a field of another kind is refused when a
//! definition is read, naming the step.

use crate::engine::iperf3::client::ClientSpec;
use crate::engine::iperf3::wire::{Direction, Protocol};
use crate::engine::report::parse_suffixed;
use crate::spec::latency::LatencySpec;
use crate::spec::test::TestRequest;
use crate::spec::thresholds::Thresholds;
use crate::store::Store;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize};

/// Most steps one definition may hold.
pub(crate) const MAX_STEPS: usize = 50;
/// Most tests a definition may expand to (a ladder step is two tests per rate).
pub(crate) const MAX_TESTS: usize = 100;
/// Name of the built-in definition that reproduces seed 001's result tables.
pub(crate) const SEED_001: &str = "seed 001 table";
/// Settings key set once the built-in definitions were seeded (so a deleted one stays gone).
const SEEDED_KEY: &str = "suite_defs_seeded";

/// The kind of a step: its stored `kind` word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum StepKind {
    Tcp,
    Udp,
    UdpLadder,
    Latency,
    Rfc2544,
}

impl StepKind {
    /// Every kind, in declaration order (the editor's list; a unit test checks it is whole).
    pub(crate) const ALL: [StepKind; 5] = [
        StepKind::Tcp,
        StepKind::Udp,
        StepKind::UdpLadder,
        StepKind::Latency,
        StepKind::Rfc2544,
    ];

    /// The stored word: tcp, udp, udp-ladder, latency, rfc2544.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StepKind::Tcp => "tcp",
            StepKind::Udp => "udp",
            StepKind::UdpLadder => "udp-ladder",
            StepKind::Latency => "latency",
            StepKind::Rfc2544 => "rfc2544",
        }
    }

    /// Parse a stored word; `None` for an unknown one.
    pub(crate) fn parse(s: &str) -> Option<StepKind> {
        StepKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// "tcp, udp, udp-ladder, latency, rfc2544".
    pub(crate) fn words() -> String {
        StepKind::ALL.map(StepKind::as_str).join(", ")
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of a suite, stored as a JSON object whose `kind` names the variant
/// (`{"kind": "udp", "bitrate": "100M"}`); each kind takes only its own fields.
///
/// Adding a kind: a variant here and in [`StepKind`], then the compiler points at each
/// `match` (the planner, the editor). Read definitions through [`Step::from_value`] (what
/// [`SuiteDef`]'s `steps` use), which names the step in its errors.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Step {
    /// An iperf3 TCP test.
    Tcp(Iperf3Step),
    /// An iperf3 UDP test at `bitrate` (required).
    Udp(Iperf3Step),
    /// UDP at each of `rates`, sending then receiving per rate (seed 001).
    UdpLadder(LadderStep),
    /// A latency-under-load run (see [`crate::spec::suite_latency`]).
    Latency(LatencyStep),
    /// An RFC 2544 benchmark of the board as the DUT (see [`Rfc2544Step`]).
    Rfc2544(Rfc2544Step),
}

/// The fields of a `tcp` or `udp` step (all text as given: numbers may carry K/M/G).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Iperf3Step {
    /// send (default) / receive (`-R`) / bidir.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub direction: Option<String>,
    /// Seconds (`-t`), 1..86400; default: the definition's `time`, else 10.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub time: Option<String>,
    /// Parallel streams (`-P`), 1..128.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub streams: Option<String>,
    /// Bitrate per stream (`-b`), bits/s with K/M/G suffixes; required for `udp`.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub bitrate: Option<String>,
    /// Block / datagram size (`-l`), bytes with K/M suffixes.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub length: Option<String>,
    /// Socket buffer (`-w`), bytes with K/M suffixes.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<String>,
    /// Row name in result tables (default e.g. "TCP send", "UDP receive 400M").
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<String>,
    /// Pass/fail limits of this step's tests (see [`crate::spec::thresholds`]); replaces the
    /// suite's `thresholds`. Kept as JSON here and checked by [`SuiteDef::validate`], so an
    /// error names the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<serde_json::Value>,
}

/// The fields of a `udp-ladder` step: the iperf3 fields but `bitrate`, plus `rates`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct LadderStep {
    /// Empty or "both" (a ladder runs both directions).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub direction: Option<String>,
    /// Seconds per test (`-t`), as [`Iperf3Step::time`].
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub time: Option<String>,
    /// Parallel streams (`-P`), 1..128.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub streams: Option<String>,
    /// Datagram size (`-l`), bytes with K/M suffixes.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub length: Option<String>,
    /// Socket buffer (`-w`), bytes with K/M suffixes.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<String>,
    /// Comma-separated bitrates, bits/s with K/M/G; default "100M,400M,1000M".
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub rates: Option<String>,
    /// Prefix of the row names ("<label> send 100M").
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<String>,
    /// Pass/fail limits of every test of the ladder, as [`Iperf3Step::thresholds`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<serde_json::Value>,
}

/// The fields of a `latency` step: those of `POST /api/runs/latency`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct LatencyStep {
    /// TCP streams of the load per direction (`-P`), 1..32.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub streams: Option<String>,
    /// The load's direction, up / down / both (default).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub load: Option<String>,
    /// Idle phase before and after the load, s (0..600, default 5).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle: Option<String>,
    /// Loaded phase, s (1..3600, default 10).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub loaded: Option<String>,
    /// Probe interval, ms (1..1000, default 10).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub interval: Option<String>,
    /// TCP congestion control of the load (e.g. "cubic"); default: the hosts'.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub congestion: Option<String>,
    /// Row name in result tables (default e.g. "Latency both ×4").
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<String>,
    /// Pass/fail limits, as [`Iperf3Step::thresholds`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<serde_json::Value>,
}

/// The fields of an `rfc2544` step: those of `POST /api/runs/rfc2544` (all text as given)
/// but `target`, `port` and `token`. PC2 is the suite run's peer host (and its port the suite's
/// port); the agent's token is the one stored on the board (the Forwarding page's), never
/// kept in a definition that may be exported. `peer` defaults to the stored agent address.
/// A run's time overrides `trial`, as it overrides every step's seconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Rfc2544Step {
    /// Peer agent on PC1, `https://HOST:PORT#sha256=FINGERPRINT` or `http://HOST:PORT`;
    /// default: the stored one.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub peer: Option<String>,
    /// Board port the frames come in on (required).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub ingress: Option<String>,
    /// Board port they leave through (required).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub egress: Option<String>,
    /// Forwarding with NAT for the run (on/true/1/yes).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub nat: Option<String>,
    /// Frame sizes, bytes with FCS, comma-separated (default the RFC's seven).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub sizes: Option<String>,
    /// Seconds per trial; default: the definition's `time`, else 10.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub trial: Option<String>,
    /// Loss allowed in the throughput test, % (default 0).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub loss: Option<String>,
    /// Search resolution, % (default 0.5).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub resolution: Option<String>,
    /// send (default) / receive / bidir.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub direction: Option<String>,
    /// throughput, latency, loss, back-to-back (comma-separated; default throughput).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub tests: Option<String>,
    /// Back-to-back searches per frame size (1..50).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub b2b_repeat: Option<String>,
    /// PC2's UDP echo port for the latency test (default 5291).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub echo_port: Option<String>,
    /// The ports' line rate, bit/s with K/M/G (default: their link speed).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub line_rate: Option<String>,
    /// Row name in result tables (default "RFC 2544 eth0 → eth1").
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<String>,
    /// Pass/fail limits, as [`Iperf3Step::thresholds`] (`min_throughput_percent`,
    /// `max_latency_ms` and `max_cpu_percent` apply to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<serde_json::Value>,
}

/// The field `serde` refused as unknown, from its message ("unknown field `x`, expected …").
fn unknown_field(msg: &str) -> Option<&str> {
    msg.strip_prefix("unknown field `")?.split('`').next()
}

fn blank(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

impl Step {
    /// The step's kind.
    pub(crate) fn kind(&self) -> StepKind {
        match self {
            Step::Tcp(_) => StepKind::Tcp,
            Step::Udp(_) => StepKind::Udp,
            Step::UdpLadder(_) => StepKind::UdpLadder,
            Step::Latency(_) => StepKind::Latency,
            Step::Rfc2544(_) => StepKind::Rfc2544,
        }
    }

    /// The row name the step sets, if any.
    pub(crate) fn label(&self) -> Option<&String> {
        match self {
            Step::Tcp(s) | Step::Udp(s) => s.label.as_ref(),
            Step::UdpLadder(s) => s.label.as_ref(),
            Step::Latency(s) => s.label.as_ref(),
            Step::Rfc2544(s) => s.label.as_ref(),
        }
    }

    /// The step's own thresholds (unchecked JSON), if any.
    pub(crate) fn thresholds(&self) -> Option<&serde_json::Value> {
        match self {
            Step::Tcp(s) | Step::Udp(s) => s.thresholds.as_ref(),
            Step::UdpLadder(s) => s.thresholds.as_ref(),
            Step::Latency(s) => s.thresholds.as_ref(),
            Step::Rfc2544(s) => s.thresholds.as_ref(),
        }
    }

    /// Step `n` (1-based, for errors) from its JSON object. A field the kind does not take
    /// is refused naming the kinds that do ("step 2 (tcp): a tcp step has no 'load' (only
    /// latency steps have it)"), unless it is empty or null (as an editor leaves it), which
    /// is dropped. Errors: "step 1: unknown kind 'x' (known: tcp, …)", a field's error.
    pub(crate) fn from_value(n: usize, v: serde_json::Value) -> Result<Step, String> {
        let serde_json::Value::Object(mut m) = v else {
            return Err(format!(
                "step {n}: a step is an object with a kind ({})",
                StepKind::words()
            ));
        };
        let kind = match m.get("kind") {
            Some(serde_json::Value::String(k)) => StepKind::parse(k).ok_or_else(|| {
                format!(
                    "step {n}: unknown kind '{k}' (known: {})",
                    StepKind::words()
                )
            })?,
            Some(other) => {
                return Err(format!(
                    "step {n}: unknown kind {other} (known: {})",
                    StepKind::words()
                ))
            }
            None => {
                return Err(format!(
                    "step {n}: a step needs a kind ({})",
                    StepKind::words()
                ))
            }
        };
        loop {
            let msg = match serde_json::from_value::<Step>(serde_json::Value::Object(m.clone())) {
                Ok(s) => return Ok(s),
                Err(e) => e.to_string(),
            };
            let Some((f, v)) = unknown_field(&msg).and_then(|f| m.get_key_value(f)) else {
                return Err(format!("step {n} ({kind}): {msg}"));
            };
            if blank(v) {
                let f = f.clone();
                m.remove(&f);
                continue;
            }
            let takers: Vec<&str> = StepKind::ALL
                .into_iter()
                .filter(|&k| k != kind && Step::takes(k, f, v))
                .map(StepKind::as_str)
                .collect();
            if takers.is_empty() {
                return Err(format!("step {n} ({kind}): {msg}"));
            }
            let hint = match (kind, f.as_str()) {
                (StepKind::Latency, "time") => "; set 'idle' and 'loaded' (s) instead",
                (StepKind::Rfc2544, "time") => "; set 'trial' (s per trial) instead",
                _ => "",
            };
            return Err(format!(
                "step {n} ({kind}): a {kind} step has no '{f}' (only {} steps have it){hint}",
                takers.join(", ")
            ));
        }
    }

    /// Whether a step of kind `k` has a field `f` (asked of serde, so no list to keep).
    fn takes(k: StepKind, f: &str, v: &serde_json::Value) -> bool {
        let mut m = serde_json::Map::new();
        m.insert("kind".into(), k.as_str().into());
        m.insert(f.into(), v.clone());
        match serde_json::from_value::<Step>(serde_json::Value::Object(m)) {
            Ok(_) => true,
            Err(e) => unknown_field(&e.to_string()).is_none(),
        }
    }
}

/// `SuiteDef::steps` from JSON, each through [`Step::from_value`].
fn steps_de<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Step>, D::Error> {
    Vec::<serde_json::Value>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| Step::from_value(i + 1, v).map_err(D::Error::custom))
        .collect()
}

/// A saved suite: what the Suites page edits and `netperfd suite` runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct SuiteDef {
    /// Unique name, 1..64 characters.
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Peer port, default 5201 (a run may override it).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub port: Option<String>,
    /// Board port (interface) to bind every test to (a run may override it).
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub bind: Option<String>,
    /// Seconds per test for steps that set none, default 10.
    #[serde(
        default,
        deserialize_with = "crate::model::input::opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub time: Option<String>,
    /// Pass/fail limits for every step that sets none (see [`crate::spec::thresholds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<serde_json::Value>,
    #[serde(deserialize_with = "steps_de")]
    pub steps: Vec<Step>,
}

/// Where and how to run a definition (the run-time choices), typed: read once from the web
/// form, the API or a stored schedule ([`RunTargetForm::to_target`]), or built by
/// `netperfd suite run` from its flags.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunTarget {
    /// Peer host name or address.
    pub host: String,
    /// Overrides the definition's peer port (1..65535).
    pub port: Option<u16>,
    /// Overrides the definition's board port.
    pub bind: Option<String>,
    /// Overrides every step's seconds (e.g. a quick 2 s check of a 60 s suite), s
    /// (1..=86400); a latency step's loaded phase, an RFC 2544 step's trial.
    pub time: Option<u32>,
    /// Board or change under test, shown in result tables (default: the board's host name).
    pub label: Option<String>,
    /// rfc2544 steps: the peer agent on PC1 (`https://HOST:PORT#sha256=…` or `http://HOST:PORT`) for steps that name none;
    /// default: the stored one.
    pub agent: Option<String>,
    /// rfc2544 steps: the agent's token (`netperfd suite run --agent-token-file`); default:
    /// the stored one. Never read from a request body (a token is not sent in a form).
    pub agent_token: Option<String>,
}

impl RunTarget {
    /// The typed values in range: `port` 1..65535, `time` 1..86400 s. Errors as a test
    /// request's: "port must be 1..65535, got 0", "duration must be 1..86400, got 0".
    fn check(&self) -> Result<(), String> {
        if let Some(p) = self.port {
            crate::spec::test::check_port(u64::from(p))?;
        }
        if let Some(s) = self.time {
            crate::spec::test::check_duration(u64::from(s))?;
        }
        Ok(())
    }
}

/// A suite run's target as the web form, the JSON API and a stored schedule give it
/// (numbers may be text or JSON numbers; blank = not given). Stored schedules keep this
/// shape (`spec::schedule`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RunTargetForm {
    /// Peer host name or address.
    pub host: String,
    /// Overrides the definition's peer port.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub port: Option<String>,
    /// Overrides the definition's board port.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub bind: Option<String>,
    /// Overrides every step's seconds.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub time: Option<String>,
    /// Board or change under test.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub label: Option<String>,
    /// rfc2544 steps: the peer agent on PC1.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub agent: Option<String>,
}

impl RunTargetForm {
    /// The target, its numbers read once: `port` 1..65535, `time` whole seconds 1..86400.
    /// Errors in a test request's words: "port must be a whole number, got 'x'", "port must
    /// be 1..65535, got 0", "duration must be a whole number, got 'x'", "duration must be
    /// 1..86400, got 0".
    pub(crate) fn to_target(&self) -> Result<RunTarget, String> {
        Ok(RunTarget {
            host: self.host.clone(),
            port: opt(&self.port)
                .map(crate::spec::test::parse_port)
                .transpose()?,
            bind: self.bind.clone(),
            time: opt(&self.time)
                .map(crate::spec::test::parse_duration)
                .transpose()?,
            label: self.label.clone(),
            agent: self.agent.clone(),
            agent_token: None,
        })
    }
}

/// What one planned test runs.
// A plan holds at most MAX_TESTS of these: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum PlannedRun {
    /// An iperf3 client test (step kinds `tcp`, `udp`, `udp-ladder`).
    Iperf3(ClientSpec),
    /// A latency-under-load run (step kind `latency`).
    Latency(LatencySpec),
    /// An RFC 2544 benchmark (step kind `rfc2544`): the request, checked against the board's
    /// port names; planned again when it starts, with the ports' MTU and speed and the stored
    /// agent token and address.
    Rfc2544(crate::spec::rfc2544::Rfc2544Request),
}

impl PlannedRun {
    /// The peer host the test runs against.
    pub fn host(&self) -> &str {
        match self {
            PlannedRun::Iperf3(c) => &c.host,
            PlannedRun::Latency(l) => &l.host,
            PlannedRun::Rfc2544(r) => &r.target,
        }
    }

    /// How long the test runs, s (a latency run: idle + loaded + idle; an RFC 2544 run: an
    /// estimate, [`crate::spec::rfc2544::Rfc2544Request::estimated_seconds`]).
    pub fn seconds(&self) -> u32 {
        match self {
            PlannedRun::Iperf3(c) => c.params.time,
            PlannedRun::Latency(l) => 2 * l.idle_s + l.loaded_s,
            PlannedRun::Rfc2544(r) => r.estimated_seconds(),
        }
    }
}

/// One test of a planned suite.
#[derive(Debug, Clone)]
pub struct PlannedTest {
    /// 1-based step number it came from.
    pub step: usize,
    /// Row name in result tables.
    pub label: String,
    pub spec: PlannedRun,
    /// Limits its result must keep (the step's, else the suite's); `None` = no verdict.
    pub thresholds: Option<Thresholds>,
}

/// What the store keeps of a planned test (the suite page shows pending tests from it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanEntry {
    pub step: usize,
    pub label: String,
    /// The run kind when it is not an iperf3 test: "latency"; absent for iperf3 tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// "TCP" / "UDP".
    pub protocol: String,
    /// send / receive / bidir.
    pub direction: String,
    /// Target bitrate per stream, bits/s (0 = unlimited).
    pub target_bps: u64,
    /// Seconds.
    pub time: u32,
    /// Limits the result must keep (absent in suites run before thresholds existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Thresholds>,
}

impl PlannedTest {
    /// The entry stored in the suite's plan.
    pub fn entry(&self) -> PlanEntry {
        let thresholds = self.thresholds.filter(|t| !t.is_empty());
        match &self.spec {
            PlannedRun::Iperf3(c) => PlanEntry {
                step: self.step,
                label: self.label.clone(),
                kind: None,
                protocol: c.params.protocol.name().into(),
                direction: crate::engine::iperf3::client::direction_word(
                    c.params.direction,
                    crate::engine::report::Role::Client,
                )
                .into(),
                target_bps: c.params.bandwidth,
                time: c.params.time,
                thresholds,
            },
            PlannedRun::Latency(l) => PlanEntry {
                step: self.step,
                label: self.label.clone(),
                kind: Some("latency".into()),
                protocol: "TCP".into(),
                direction: crate::spec::suite_latency::board_direction(l.load).into(),
                target_bps: 0,
                time: self.spec.seconds(),
                thresholds,
            },
            PlannedRun::Rfc2544(r) => PlanEntry {
                step: self.step,
                label: self.label.clone(),
                kind: Some("rfc2544".into()),
                protocol: "UDP".into(),
                direction: opt(&r.direction).unwrap_or("send").into(),
                target_bps: 0,
                time: self.spec.seconds(),
                thresholds,
            },
        }
    }

    /// The iperf3 spec of an iperf3 test (tests only; panics on a latency test).
    #[cfg(test)]
    pub(crate) fn client(&self) -> &ClientSpec {
        match &self.spec {
            PlannedRun::Iperf3(c) => c,
            PlannedRun::Latency(_) | PlannedRun::Rfc2544(_) => panic!("not an iperf3 test"),
        }
    }
}

/// `spec` with the run's typed overrides `t`: the peer port and the seconds, checked again.
fn with_target(mut spec: ClientSpec, t: &RunTarget) -> Result<ClientSpec, String> {
    if let Some(p) = t.port {
        spec.port = p;
    }
    if let Some(s) = t.time {
        spec.params.time = s;
    }
    spec.validate()?;
    Ok(spec)
}

fn opt(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// "100M" for 100 000 000 bits/s (how the seed reports name their UDP tests).
pub(crate) fn rate_word(bps: u64) -> String {
    if bps == 0 {
        "unlimited".into()
    } else if bps % 1_000_000_000 == 0 && bps >= 10_000_000_000 {
        format!("{}G", bps / 1_000_000_000)
    } else if bps % 1_000_000 == 0 {
        format!("{}M", bps / 1_000_000)
    } else if bps % 1_000 == 0 {
        format!("{}K", bps / 1_000)
    } else {
        bps.to_string()
    }
}

/// The default row name of a test: "TCP send", "UDP receive 400M", "TCP bidir ×4".
pub(crate) fn spec_label(s: &ClientSpec) -> String {
    let dir = match s.params.direction {
        Direction::Send => "send",
        Direction::Receive => "receive",
        Direction::Bidir => "bidir",
    };
    let mut l = format!("{} {dir}", s.params.protocol.name());
    if s.params.protocol == Protocol::Udp || s.params.bandwidth > 0 {
        l.push(' ');
        l.push_str(&rate_word(s.params.bandwidth));
    }
    if s.params.parallel > 1 {
        l.push_str(&format!(" ×{}", s.params.parallel));
    }
    l
}

fn check_text(what: &str, s: &str, max: usize) -> Result<(), String> {
    if s.chars().count() > max {
        return Err(format!("{what} is longer than {max} characters"));
    }
    if s.chars().any(char::is_control) {
        return Err(format!("{what} contains control characters"));
    }
    Ok(())
}

impl SuiteDef {
    /// Parse and check a definition from JSON (the API body, an import file).
    pub fn from_json(v: &[u8]) -> Result<SuiteDef, String> {
        let d: SuiteDef =
            serde_json::from_slice(v).map_err(|e| format!("invalid suite definition: {e}"))?;
        d.validate()?;
        Ok(d)
    }

    /// Check everything that does not depend on the board or peer: name, step count, kinds,
    /// every step's numbers. Errors name the step (1-based) and field.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let placeholder = RunTarget {
            host: "peer.invalid".into(),
            ..Default::default()
        };
        self.plan_with(&placeholder, None).map(|_| ())
    }

    /// The tests to run against `t`, checked, in order. `ports` are the board's ports (to
    /// check and resolve the board port).
    pub(crate) fn plan(
        &self,
        t: &RunTarget,
        ports: &[crate::board::Port],
    ) -> Result<Vec<PlannedTest>, String> {
        self.plan_with(t, Some(ports))
    }

    /// The tests to run against `t`, checked, in order, without the board port: what the
    /// Suites page lists before a run, when the port is still to be picked (the saved one, or
    /// another in the run form). A saved port is checked against the board when it runs.
    pub(crate) fn plan_any_port(&self, t: &RunTarget) -> Result<Vec<PlannedTest>, String> {
        self.plan_with(t, None)
    }

    fn plan_with(
        &self,
        t: &RunTarget,
        ports: Option<&[crate::board::Port]>,
    ) -> Result<Vec<PlannedTest>, String> {
        self.check_head()?;
        let bind = match ports {
            Some(_) => opt(&t.bind).or(opt(&self.bind)).map(String::from),
            None => None,
        };
        t.check()?;
        // The definition's own port; the run's (typed) replaces it in each planned test.
        let base = TestRequest {
            host: t.host.clone(),
            port: opt(&self.port).map(String::from),
            bind,
            ..Default::default()
        };
        // The definition's own numbers are checked even when the run overrides them.
        if base.port.is_some() {
            base.to_spec(&[]).map_err(|e| format!("port: {e}"))?;
        }
        let suite_th = match &self.thresholds {
            Some(v) => Some(Thresholds::from_value(v)?),
            None => None,
        };
        let planner = StepPlanner {
            def: self,
            t,
            ports: ports.unwrap_or(&[]),
            base,
        };
        let mut out = Vec::new();
        for (i, st) in self.steps.iter().enumerate() {
            let n = i + 1;
            planner
                .plan_step(n, st, suite_th, &mut out)
                .map_err(|m| format!("step {n} ({}): {m}", st.kind()))?;
            if out.len() > MAX_TESTS {
                return Err(format!(
                    "a suite runs at most {MAX_TESTS} tests; these steps make more"
                ));
            }
        }
        Ok(out)
    }

    /// Check the definition's own text and step count (the first checks of a plan). Errors
    /// name the field.
    fn check_head(&self) -> Result<(), String> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err("a suite needs a name".into());
        }
        check_text("the name", name, 64)?;
        check_text("the description", &self.description, 1000)?;
        if self.steps.is_empty() {
            return Err("a suite needs at least one step".into());
        }
        if self.steps.len() > MAX_STEPS {
            return Err(format!(
                "a suite has at most {MAX_STEPS} steps, got {}",
                self.steps.len()
            ));
        }
        Ok(())
    }
}

/// What every step of one plan reads: the definition, the run's typed overrides, the board's
/// ports (empty when only validating) and the definition's own request (host, port, bind).
struct StepPlanner<'a> {
    def: &'a SuiteDef,
    t: &'a RunTarget,
    ports: &'a [crate::board::Port],
    base: TestRequest,
}

impl StepPlanner<'_> {
    /// Plan step `n` (1-based) `st` onto `out`: one test, or two per rate for a ladder. Its
    /// thresholds are its own, else `suite_th`. Errors are the bare message (the field); the
    /// caller names the step.
    fn plan_step(
        &self,
        n: usize,
        st: &Step,
        suite_th: Option<Thresholds>,
        out: &mut Vec<PlannedTest>,
    ) -> Result<(), String> {
        if let Some(l) = st.label() {
            check_text("the label", l, 80)?;
        }
        let thresholds = match st.thresholds() {
            Some(v) => Some(Thresholds::from_value(v)?),
            None => suite_th,
        };
        let test = |label: String, spec: PlannedRun| PlannedTest {
            step: n,
            label,
            spec,
            thresholds,
        };
        match st {
            Step::Latency(l) => {
                self.check_def_time()?;
                let spec =
                    crate::spec::suite_latency::plan_step(l, &self.base, self.t, self.ports)?;
                let label = step_label(st, crate::spec::suite_latency::label(&spec));
                out.push(test(label, PlannedRun::Latency(spec)));
            }
            Step::Rfc2544(r) => {
                self.check_def_time()?;
                let req = self.rfc2544(r)?;
                let label = step_label(
                    st,
                    format!("RFC 2544 {} → {}", req.ingress.trim(), req.egress.trim()),
                );
                out.push(test(label, PlannedRun::Rfc2544(req)));
            }
            Step::Tcp(s) | Step::Udp(s) => {
                let spec = self.iperf3(s, matches!(st, Step::Udp(_)))?;
                let label = step_label(st, spec_label(&spec));
                out.push(test(label, PlannedRun::Iperf3(spec)));
            }
            Step::UdpLadder(s) => {
                for (label, sp) in self.ladder(s)? {
                    out.push(test(label, PlannedRun::Iperf3(sp)));
                }
            }
        }
        Ok(())
    }

    /// Check the definition's `time` (steps that take no other seconds of it check it too).
    fn check_def_time(&self) -> Result<(), String> {
        if let Some(v) = opt(&self.def.time) {
            check_time(v)?;
        }
        Ok(())
    }

    /// The iperf3 request of a step with these fields: the step's time, else the
    /// definition's (the run's, typed, replaces it: [`with_target`]). Both are checked
    /// when a run overrides them (a bad definition stays bad).
    fn iperf3_req(
        &self,
        own_time: &Option<String>,
        streams: &Option<String>,
        length: &Option<String>,
        window: &Option<String>,
    ) -> Result<TestRequest, String> {
        for v in [own_time, &self.def.time] {
            if let Some(v) = opt(v) {
                check_time(v)?;
            }
        }
        Ok(TestRequest {
            duration: opt(own_time).or(opt(&self.def.time)).map(String::from),
            parallel: streams.clone(),
            length: length.clone(),
            window: window.clone(),
            ..self.base.clone()
        })
    }

    /// The test of a `tcp` step, or of a `udp` one (`udp`: which needs a bitrate), with the
    /// run's overrides.
    fn iperf3(&self, s: &Iperf3Step, udp: bool) -> Result<ClientSpec, String> {
        let mut req = TestRequest {
            bitrate: s.bitrate.clone(),
            direction: s.direction.clone(),
            ..self.iperf3_req(&s.time, &s.streams, &s.length, &s.window)?
        };
        if udp {
            if opt(&s.bitrate).is_none() {
                return Err("a udp step needs a bitrate, e.g. 100M".into());
            }
            req.protocol = Some("udp".into());
        }
        with_target(req.to_spec(self.ports)?, self.t)
    }

    /// The tests of a `udp-ladder` step, (row name, test) in order: per rate, send then
    /// receive.
    fn ladder(&self, s: &LadderStep) -> Result<Vec<(String, ClientSpec)>, String> {
        if let Some(d) = opt(&s.direction).filter(|d| *d != "both") {
            return Err(format!(
                "a ladder runs both directions; direction must be empty or 'both', got '{d}'"
            ));
        }
        let req = self.iperf3_req(&s.time, &s.streams, &s.length, &s.window)?;
        let rates = parse_rates(opt(&s.rates).unwrap_or("100M,400M,1000M"))?;
        // Check the common fields once as UDP (parallel, window, length, time).
        let mut probe = req.clone();
        probe.protocol = Some("udp".into());
        probe.bitrate = Some("1M".into());
        let spec = with_target(probe.to_spec(self.ports)?, self.t)?;
        let mut out = Vec::new();
        for &r in &rates {
            for d in [Direction::Send, Direction::Receive] {
                let mut sp = spec.clone();
                sp.params.bandwidth = r;
                sp.params.direction = d;
                sp.validate()?;
                let mut label = spec_label(&sp);
                if let Some(l) = opt(&s.label) {
                    label = format!("{l} {}", label.trim_start_matches("UDP "));
                }
                out.push((label, sp));
            }
        }
        Ok(out)
    }

    /// The RFC 2544 request of an `rfc2544` step, its trial and names checked.
    fn rfc2544(&self, r: &Rfc2544Step) -> Result<crate::spec::rfc2544::Rfc2544Request, String> {
        let t = self.t;
        let req = crate::spec::rfc2544::Rfc2544Request {
            peer: opt(&r.peer)
                .or(opt(&t.agent))
                .unwrap_or_default()
                .to_string(),
            token: t.agent_token.clone(),
            target: t.host.clone(),
            // The step's words (the definition's text, read when the run starts); the
            // run's own port and seconds stay typed beside them (`run_port`, `run_trial`).
            port: self.base.port.clone(),
            run_port: t.port,
            ingress: r.ingress.clone().unwrap_or_default(),
            egress: r.egress.clone().unwrap_or_default(),
            nat: r.nat.clone(),
            sizes: r.sizes.clone(),
            trial: opt(&r.trial).or(opt(&self.def.time)).map(String::from),
            run_trial: t.time,
            loss: r.loss.clone(),
            resolution: r.resolution.clone(),
            direction: r.direction.clone(),
            tests: r.tests.clone(),
            b2b_repeat: r.b2b_repeat.clone(),
            echo_port: r.echo_port.clone(),
            line_rate: r.line_rate.clone(),
            // A suite judges its steps by its own thresholds.
            min_throughput_percent: None,
            max_latency_ms: None,
            max_cpu_percent: None,
            csrf: None,
        };
        if let Some(v) = opt(&r.trial) {
            req.check_step_trial(v)?;
        }
        let ports = self.ports;
        req.check_names(if ports.is_empty() { None } else { Some(ports) })?;
        Ok(req)
    }
}

/// A step's own row name when it has one (trimmed), else `default`.
fn step_label(st: &Step, default: String) -> String {
    st.label()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .map(String::from)
        .unwrap_or(default)
}

/// Check seconds as a step's `time` takes them. Errors: "time: …".
fn check_time(v: &str) -> Result<(), String> {
    crate::spec::test::parse_duration(v)
        .map(|_| ())
        .map_err(|m| format!("time: {m}"))
}

/// The definitions seeded on first start.
pub(crate) fn builtin_defs() -> Vec<SuiteDef> {
    let tcp = |d: &str| {
        Step::Tcp(Iperf3Step {
            direction: Some(d.into()),
            ..Default::default()
        })
    };
    let udp = |d: &str, r: &str| {
        Step::Udp(Iperf3Step {
            direction: Some(d.into()),
            bitrate: Some(r.into()),
            // 1 GbE defaults: up to 400M the port must carry UDP without loss worth the name
            // (≤ 0.1 %) and the sender must keep the rate (≤ 3 % short); at 1000M (above the
            // 957 Mbit/s UDP ceiling) the suite-level ceiling rule applies instead.
            thresholds: (r != "1000M")
                .then(|| serde_json::json!({"max_loss_percent": 0.1, "max_shortfall_percent": 3})),
            ..Default::default()
        })
    };
    let mut seed = vec![tcp("send"), tcp("receive")];
    for d in ["send", "receive"] {
        for r in ["100M", "400M", "1000M"] {
            seed.push(udp(d, r));
        }
    }
    vec![
        SuiteDef {
            name: SEED_001.into(),
            description: "Seed 001's comparison (Apalis iMX8QM vs iMX6Q): TCP send and receive, \
                          then UDP at 100M, 400M and 1000M sending and receiving. The seed ran \
                          60 s per test (iperf3 -t 60); set time to 60 for the same figures. \
                          Thresholds for a 1 GbE port: TCP and UDP 1000M reach 90 % of the \
                          port's ceiling; UDP up to 400M loses at most 0.1 % and the sender \
                          stays within 3 % of the rate."
                .into(),
            time: Some("10".into()),
            thresholds: Some(serde_json::json!({"min_ceiling_percent": 90})),
            steps: seed,
            ..Default::default()
        },
        SuiteDef {
            name: UDP_LADDER.into(),
            description: "UDP at each bitrate, sending then receiving: bitrate, jitter and \
                          lost/total datagrams per test."
                .into(),
            time: Some("10".into()),
            steps: vec![Step::UdpLadder(LadderStep {
                rates: Some("100M,400M,1000M".into()),
                ..Default::default()
            })],
            ..Default::default()
        },
    ]
}

/// Store the built-in definitions the first time netperfd opens this history (a later
/// deletion sticks); returns how many were added.
pub(crate) fn seed_builtins(store: &Store) -> Result<usize, String> {
    let e = |e: crate::store::StoreError| e.to_string();
    if store.setting(SEEDED_KEY).map_err(e)?.is_some() {
        return Ok(0);
    }
    let mut n = 0;
    for d in builtin_defs() {
        if store.suite_def_by_name(&d.name).map_err(e)?.is_none() {
            let body = serde_json::to_value(&d).map_err(|x| x.to_string())?;
            store.create_suite_def(&d.name, true, &body).map_err(e)?;
            n += 1;
        }
    }
    store.set_setting(SEEDED_KEY, "1").map_err(e)?;
    Ok(n)
}

/// Parse a stored definition (refusing one that no longer validates).
pub(crate) fn from_row(r: &crate::store::SuiteDefRow) -> Result<SuiteDef, String> {
    let d: SuiteDef = serde_json::from_value(r.body.clone())
        .map_err(|e| format!("stored suite '{}' is invalid: {e}", r.name))?;
    Ok(SuiteDef {
        name: r.name.clone(),
        ..d
    })
}

/// Find a definition by id ("12") or name.
pub(crate) fn find(store: &Store, key: &str) -> Result<Option<crate::store::SuiteDefRow>, String> {
    let e = |e: crate::store::StoreError| e.to_string();
    if let Some(r) = store.suite_def_by_name(key).map_err(e)? {
        return Ok(Some(r));
    }
    match key.parse::<i64>() {
        Ok(id) => store.suite_def(id).map_err(e),
        Err(_) => Ok(None),
    }
}

/// Store a checked definition: new (`id` None) or replacing `id`. Names are unique.
pub(crate) fn save(store: &Store, id: Option<i64>, d: &SuiteDef) -> Result<i64, String> {
    d.validate()?;
    let e = |e: crate::store::StoreError| e.to_string();
    let name = d.name.trim();
    if let Some(other) = store.suite_def_by_name(name).map_err(e)? {
        if Some(other.id) != id {
            return Err(format!("a suite named '{name}' exists already"));
        }
    }
    let d = SuiteDef {
        name: name.to_string(),
        ..d.clone()
    };
    let body = serde_json::to_value(&d).map_err(|x| x.to_string())?;
    match id {
        None => store.create_suite_def(name, false, &body).map_err(e),
        Some(id) => {
            if store.update_suite_def(id, name, &body).map_err(e)? {
                Ok(id)
            } else {
                Err(format!("there is no suite definition {id}"))
            }
        }
    }
}

/// Name of the UDP ladder suite in history.
pub(crate) const UDP_LADDER: &str = "udp-ladder";

/// Parse "100M,400M,1000M" into bits/s; 1 to 10 rates, each 1 kbit/s..100 Gbit/s.
pub(crate) fn parse_rates(s: &str) -> Result<Vec<u64>, String> {
    let rates: Vec<u64> = s
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| parse_suffixed(r, true).map_err(|e| format!("rates: {e}")))
        .collect::<Result<_, _>>()?;
    if rates.is_empty() || rates.len() > 10 {
        return Err("rates: give 1 to 10 bitrates, e.g. 100M,400M,1000M".into());
    }
    if let Some(r) = rates
        .iter()
        .find(|&&r| !(1_000..=100_000_000_000).contains(&r))
    {
        return Err(format!("rates: {r} bit/s is outside 1K..100G"));
    }
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(steps: serde_json::Value) -> Result<SuiteDef, String> {
        SuiteDef::from_json(
            serde_json::json!({"name": "t", "steps": steps})
                .to_string()
                .as_bytes(),
        )
    }

    #[test]
    fn seed_001_plan_matches_the_report() {
        let d = builtin_defs().remove(0);
        let t = RunTarget {
            host: "192.0.2.2".into(),
            ..Default::default()
        };
        let p = d.plan(&t, &[]).unwrap();
        let labels: Vec<&str> = p.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "TCP send",
                "TCP receive",
                "UDP send 100M",
                "UDP send 400M",
                "UDP send 1000M",
                "UDP receive 100M",
                "UDP receive 400M",
                "UDP receive 1000M"
            ]
        );
        assert_eq!(p[4].client().params.bandwidth, 1_000_000_000);
        assert_eq!(p[5].client().params.direction, Direction::Receive);
        assert!(p.iter().all(|x| x.client().params.time == 10));
        // A run-time override of the time applies to every test.
        let quick = RunTarget { time: Some(2), ..t };
        assert!(d
            .plan(&quick, &[])
            .unwrap()
            .iter()
            .all(|x| x.client().params.time == 2));
        // Built-ins survive a JSON round trip (they are stored that way).
        let j = serde_json::to_vec(&d).unwrap();
        assert_eq!(SuiteDef::from_json(&j).unwrap(), d);
    }

    #[test]
    fn thresholds_per_step_or_from_the_suite() {
        let d = SuiteDef::from_json(
            serde_json::json!({"name": "t", "thresholds": {"min_bits_per_second": 9e8},
            "steps": [
                {"kind": "tcp"},
                {"kind": "udp", "bitrate": "400M", "thresholds": {"max_loss_percent": 0.1}},
                {"kind": "udp-ladder", "rates": "10M", "thresholds": {}}
            ]})
            .to_string()
            .as_bytes(),
        )
        .unwrap();
        let p = d
            .plan(
                &RunTarget {
                    host: "h".into(),
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        assert_eq!(p[0].thresholds.unwrap().min_bits_per_second, Some(9e8));
        // A step's own object replaces the suite's whole (no merge).
        let own = p[1].thresholds.unwrap();
        assert_eq!(own.max_loss_percent, Some(0.1));
        assert_eq!(own.min_bits_per_second, None);
        // An empty object turns the suite's limits off for that step (both ladder tests).
        assert!(p[2].thresholds.unwrap().is_empty() && p[3].thresholds.unwrap().is_empty());
        assert_eq!(p[2].entry().thresholds, None);
        assert_eq!(p[0].entry().thresholds, p[0].thresholds);
        // Errors name the step, or the suite.
        let e = def(serde_json::json!([{"kind": "tcp"}, {"kind": "tcp", "thresholds": {"max_loss_percent": -1}}]))
            .unwrap_err();
        assert_eq!(
            e,
            "step 2 (tcp): thresholds: max_loss_percent must not be negative, got -1"
        );
        let e = SuiteDef::from_json(
            br#"{"name": "t", "thresholds": {"min_mbps": 900}, "steps": [{"kind": "tcp"}]}"#,
        )
        .unwrap_err();
        assert!(
            e.starts_with("thresholds: unknown key 'min_mbps' (known: min_bits_per_second"),
            "{e}"
        );
    }

    #[test]
    fn seed_001_has_1gbe_thresholds() {
        let d = builtin_defs().remove(0);
        let p = d
            .plan(
                &RunTarget {
                    host: "h".into(),
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        let th: Vec<(String, Thresholds)> = p
            .iter()
            .map(|x| (x.label.clone(), x.thresholds.unwrap_or_default()))
            .collect();
        for (label, t) in &th {
            if label.starts_with("TCP") || label.ends_with("1000M") {
                assert_eq!(t.min_ceiling_percent, Some(90.0), "{label}");
                assert_eq!(t.max_loss_percent, None, "{label}");
            } else {
                assert_eq!(t.max_loss_percent, Some(0.1), "{label}");
                assert_eq!(t.max_shortfall_percent, Some(3.0), "{label}");
                assert_eq!(t.min_ceiling_percent, None, "{label}");
            }
        }
    }

    #[test]
    fn ladder_step_is_send_then_receive_per_rate() {
        let d = def(serde_json::json!([{"kind": "udp-ladder", "rates": "20M,40M", "time": 1, "length": 1000}])).unwrap();
        let p = d
            .plan(
                &RunTarget {
                    host: "h".into(),
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        let got: Vec<(String, u64, u32, u32)> = p
            .iter()
            .map(|x| {
                (
                    x.label.clone(),
                    x.client().params.bandwidth,
                    x.client().params.time,
                    x.client().params.len,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("UDP send 20M".into(), 20_000_000, 1, 1000),
                ("UDP receive 20M".into(), 20_000_000, 1, 1000),
                ("UDP send 40M".into(), 40_000_000, 1, 1000),
                ("UDP receive 40M".into(), 40_000_000, 1, 1000),
            ]
        );
    }

    #[test]
    fn per_step_options_reach_the_spec() {
        let d = def(serde_json::json!([
            {"kind": "tcp", "direction": "receive", "window": "300K", "streams": 4, "time": "3", "label": "iMX6 receive -w 300K"},
            {"kind": "udp", "direction": "bidir", "bitrate": 50000000, "length": 1200}
        ]))
        .unwrap();
        let p = d
            .plan(
                &RunTarget {
                    host: "192.0.2.2".into(),
                    port: Some(5202),
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        assert_eq!(p[0].label, "iMX6 receive -w 300K");
        assert_eq!(p[0].client().params.window, Some(300 * 1024));
        assert_eq!(p[0].client().params.parallel, 4);
        assert_eq!(p[0].client().params.time, 3);
        assert_eq!(p[0].client().port, 5202);
        assert_eq!(p[1].label, "UDP bidir 50M");
        assert_eq!(p[1].client().params.len, 1200);
        assert_eq!(p[1].client().params.protocol, Protocol::Udp);
    }

    /// The exact words for a bad `time`, whichever step kind and level it is on (pinned before
    /// `check_time` became a duration parser rather than a whole fake test request).
    #[test]
    fn a_bad_time_gets_the_same_words_at_every_level() {
        let suite = |time: &str, steps: serde_json::Value| {
            SuiteDef::from_json(
                serde_json::json!({"name": "t", "time": time, "steps": steps})
                    .to_string()
                    .as_bytes(),
            )
            .unwrap_err()
        };
        for (time, words) in [
            ("x", "duration must be a whole number, got 'x'"),
            ("1.5", "duration must be a whole number, got '1.5'"),
            ("-1", "duration must be a whole number, got '-1'"),
            ("0", "duration must be 1..86400, got 0"),
            ("86401", "duration must be 1..86400, got 86401"),
            (
                "99999999999999999999",
                "duration must be a whole number, got '99999999999999999999'",
            ),
        ] {
            assert_eq!(
                def(serde_json::json!([{"kind": "tcp", "time": time}])).unwrap_err(),
                format!("step 1 (tcp): time: {words}")
            );
            for kind in ["tcp", "latency", "rfc2544"] {
                let step = if kind == "rfc2544" {
                    serde_json::json!([{"kind": kind, "ingress": "eth0", "egress": "eth1"}])
                } else {
                    serde_json::json!([{"kind": kind}])
                };
                assert_eq!(
                    suite(time, step),
                    format!("step 1 ({kind}): time: {words}"),
                    "suite time {time:?}, {kind} step"
                );
            }
        }
        assert_eq!(
            def(serde_json::json!([{"kind": "tcp", "time": " 7 "}]))
                .map(|d| d.steps.len())
                .unwrap(),
            1
        );
    }

    #[test]
    fn bad_definitions_are_refused_with_the_reason() {
        let many: Vec<serde_json::Value> = (0..10_000)
            .map(|_| serde_json::json!({"kind": "tcp"}))
            .collect();
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (serde_json::json!([]), "at least one step"),
            (
                serde_json::json!([{"kind": "http-get"}]),
                "step 1: unknown kind 'http-get'",
            ),
            (
                serde_json::json!([{"kind": "tcp"}, {"kind": "tcp", "time": -1}]),
                "step 2 (tcp): time",
            ),
            (
                serde_json::json!([{"kind": "tcp", "time": 0}]),
                "duration must be 1..86400",
            ),
            (
                serde_json::Value::Array(many),
                "at most 50 steps, got 10000",
            ),
            (serde_json::json!([{"kind": "udp"}]), "needs a bitrate"),
            (
                serde_json::json!([{"kind": "tcp", "direction": "up"}]),
                "direction must be",
            ),
            (
                serde_json::json!([{"kind": "tcp", "tme": 5}]),
                "unknown field `tme`",
            ),
            (
                serde_json::json!([{"kind": "udp-ladder", "rates": "fast"}]),
                "rates:",
            ),
            (
                serde_json::json!([{"kind": "udp-ladder", "direction": "send"}]),
                "both directions",
            ),
            (
                serde_json::json!([{"kind": "tcp", "streams": 500}]),
                "parallel streams must be 1..128",
            ),
            (
                serde_json::json!([{"kind": "tcp", "time": [1]}]),
                "expected a number or text",
            ),
        ];
        for (steps, want) in cases {
            let e = def(steps.clone()).unwrap_err();
            assert!(e.contains(want), "{e} should mention {want} ({steps})");
        }
        let long: Vec<serde_json::Value> = (0..30)
            .map(|_| serde_json::json!({"kind": "udp-ladder", "rates": "1M,2M"}))
            .collect();
        assert!(def(serde_json::Value::Array(long))
            .unwrap_err()
            .contains("at most 100 tests"));
        assert!(
            SuiteDef::from_json(br#"{"name": " ", "steps": [{"kind": "tcp"}]}"#)
                .unwrap_err()
                .contains("needs a name")
        );
    }

    /// Definitions stored before steps were an enum (every field of every kind, in the old
    /// struct's order) read and write back byte for byte.
    #[test]
    fn stored_steps_of_every_kind_round_trip_byte_for_byte() {
        let old = r#"{"name":"all kinds","description":"d","port":"5202","bind":"eth0","time":"3","thresholds":{"min_ceiling_percent":90},"steps":[{"kind":"tcp","direction":"receive","time":"5","streams":"4","bitrate":"0","length":"128K","window":"300K","label":"TCP in","thresholds":{"max_retransmits":10}},{"kind":"udp","direction":"bidir","time":"2","streams":"2","bitrate":"100M","length":"1400","window":"1M","label":"UDP both","thresholds":{"max_loss_percent":0.1,"max_shortfall_percent":3}},{"kind":"udp-ladder","direction":"both","time":"1","streams":"1","length":"1000","window":"2M","rates":"10M,20M","label":"Ladder","thresholds":{}},{"kind":"latency","streams":"2","load":"up","idle":"1","loaded":"4","interval":"20","congestion":"cubic","label":"Bufferbloat","thresholds":{"max_latency_increase_ms":30}},{"kind":"rfc2544","ingress":"eth0","egress":"eth1","nat":"on","sizes":"64,1518","trial":"2","tests":"throughput,latency,back-to-back","b2b_repeat":"3","line_rate":"1G","label":"DUT","thresholds":{"max_latency_ms":2,"min_throughput_percent":90}},{"kind":"tcp"}]}"#;
        let d = SuiteDef::from_json(old.as_bytes()).unwrap();
        let kinds: Vec<StepKind> = d.steps.iter().map(Step::kind).collect();
        use StepKind::*;
        assert_eq!(kinds, [Tcp, Udp, UdpLadder, Latency, Rfc2544, Tcp]);
        // The store keeps `to_value` of a definition.
        assert_eq!(
            serde_json::to_string(&serde_json::to_value(&d).unwrap()).unwrap(),
            old
        );
        assert_eq!(serde_json::to_string(&d).unwrap(), old);
        // Numbers as JSON numbers are read as text (as before) and written as text.
        let d = def(serde_json::json!([{"kind": "udp", "bitrate": 5e7, "time": 3}])).unwrap();
        assert_eq!(
            serde_json::to_string(&d.steps[0]).unwrap(),
            r#"{"kind":"udp","time":"3","bitrate":"50000000.0"}"#
        );
        // The built-ins as they were stored since seed 001's table was added.
        let seed = &builtin_defs()[0];
        let steps = serde_json::to_string(&seed.steps).unwrap();
        let udp = |d: &str, r: &str| match r {
            "1000M" => format!(r#"{{"kind":"udp","direction":"{d}","bitrate":"{r}"}}"#),
            _ => format!(
                r#"{{"kind":"udp","direction":"{d}","bitrate":"{r}","thresholds":{{"max_loss_percent":0.1,"max_shortfall_percent":3}}}}"#
            ),
        };
        let mut want = vec![
            r#"{"kind":"tcp","direction":"send"}"#.to_string(),
            r#"{"kind":"tcp","direction":"receive"}"#.to_string(),
        ];
        for d in ["send", "receive"] {
            for r in ["100M", "400M", "1000M"] {
                want.push(udp(d, r));
            }
        }
        assert_eq!(steps, format!("[{}]", want.join(",")));
        assert_eq!(
            serde_json::to_string(&builtin_defs()[1].steps).unwrap(),
            r#"[{"kind":"udp-ladder","rates":"100M,400M,1000M"}]"#
        );
    }

    #[test]
    fn step_fields_are_checked_per_kind() {
        let e = |steps: serde_json::Value| def(steps).unwrap_err();
        assert!(
            e(serde_json::json!([{"kind": "tcp"}, {"kind": "rfc1149"}])).contains(
                "step 2: unknown kind 'rfc1149' (known: tcp, udp, udp-ladder, latency, rfc2544)"
            )
        );
        assert!(e(serde_json::json!([{"direction": "send"}]))
            .contains("step 1: a step needs a kind (tcp, udp, udp-ladder, latency, rfc2544)"));
        assert!(e(serde_json::json!([{"kind": 3}])).contains("step 1: unknown kind 3"));
        assert!(e(serde_json::json!(["tcp"])).contains("step 1: a step is an object"));
        assert!(e(serde_json::json!([{"kind": "tcp", "rates": "1M"}]))
            .contains("step 1 (tcp): a tcp step has no 'rates' (only udp-ladder steps have it)"));
        assert!(e(serde_json::json!([{"kind": "udp-ladder", "bitrate": "1M"}])).contains(
            "step 1 (udp-ladder): a udp-ladder step has no 'bitrate' (only tcp, udp steps have it)"
        ));
        assert!(e(serde_json::json!([{"kind": "latency", "time": 5}])).contains(
            "a latency step has no 'time' (only tcp, udp, udp-ladder steps have it); set 'idle'"
        ));
        // A field no kind has: serde's list of the fields this kind takes.
        let m = e(serde_json::json!([{"kind": "udp", "bitrate": "1M", "rate": "2M"}]));
        assert!(
            m.contains("step 1 (udp): unknown field `rate`, expected one of `direction`"),
            "{m}"
        );
        // Empty or null fields of another kind (as an editor leaves them) are dropped.
        let d = def(serde_json::json!([{"kind": "tcp", "load": "", "rates": null, "idle": " "}]))
            .unwrap();
        assert_eq!(d.steps, [Step::Tcp(Iperf3Step::default())]);
    }

    /// Issue 26: an RFC 2544 benchmark as a suite step, PC2 the run's peer, with its own
    /// thresholds; its fields are checked when the definition is read.
    #[test]
    fn rfc2544_steps_plan_a_benchmark_to_the_run_s_peer() {
        let d = def(
            serde_json::json!([{"kind": "rfc2544", "ingress": "eth0", "egress": "eth1",
            "nat": "on", "sizes": "512,1518", "trial": 2, "tests": "throughput,back-to-back",
            "line_rate": "1G", "thresholds": {"min_throughput_percent": 9, "max_latency_ms": 5}}]),
        )
        .unwrap();
        let t = RunTarget {
            host: "198.51.100.2".into(),
            port: Some(5202),
            ..Default::default()
        };
        let p = d.plan(&t, &[]).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].label, "RFC 2544 eth0 → eth1");
        let PlannedRun::Rfc2544(r) = &p[0].spec else {
            panic!("not an rfc2544 test")
        };
        // The run's port stays typed beside the step's words (issue 40 item 2: no typed →
        // text → typed round trip).
        assert_eq!(
            (r.target.as_str(), r.port.as_deref(), r.run_port),
            ("198.51.100.2", None, Some(5202))
        );
        assert_eq!((r.trial.as_deref(), r.token.as_deref()), (Some("2"), None));
        let th = p[0].thresholds.unwrap();
        assert_eq!(
            (th.min_throughput_percent, th.max_latency_ms),
            (Some(9.0), Some(5.0))
        );
        // Two sizes: throughput 10 × 3 s + back-to-back 8 × 4 s each.
        assert_eq!(p[0].spec.seconds(), 2 * (30 + 32));
        let e = p[0].entry();
        assert_eq!(
            (e.kind.as_deref(), e.protocol.as_str()),
            (Some("rfc2544"), "UDP")
        );
        // A run's time sets the trials, as it sets every step's seconds.
        let quick = RunTarget {
            time: Some(1),
            ..t.clone()
        };
        let PlannedRun::Rfc2544(r) = &d.plan(&quick, &[]).unwrap()[0].spec else {
            panic!()
        };
        assert_eq!((r.trial.as_deref(), r.run_trial), (Some("2"), Some(1)));
        // Two sizes: throughput 10 × 2 s + back-to-back 8 × 4 s each.
        assert_eq!(
            d.plan(&quick, &[]).unwrap()[0].spec.seconds(),
            2 * (20 + 32)
        );
        // Planned when it starts: the run's port and seconds, typed, win.
        let facts: Vec<crate::spec::rfc2544::PortFacts> = ["eth0", "eth1"]
            .into_iter()
            .map(|n| crate::spec::rfc2544::PortFacts {
                name: n.into(),
                mtu: 1500,
                speed_mbps: Some(1000),
                loopback: false,
            })
            .collect();
        let mut started = r.clone();
        started.peer = "http://198.51.100.1:5280".into();
        let plan = started.plan(&facts, Some("token")).unwrap();
        assert_eq!((plan.port, plan.trial_s), (5202, 1));
        let e = |steps: serde_json::Value| def(steps).unwrap_err();
        for (step, want) in [
            (
                serde_json::json!({"kind": "rfc2544", "egress": "eth1"}),
                "step 1 (rfc2544): choose the ingress port",
            ),
            (
                serde_json::json!({"kind": "rfc2544", "ingress": "eth0", "egress": "eth1", "sizes": "63"}),
                "step 1 (rfc2544): frame size 63 is below Ethernet's minimum of 64",
            ),
            (
                serde_json::json!({"kind": "rfc2544", "ingress": "eth0", "egress": "eth1", "trial": 0}),
                "trial (s) 0 is out of range",
            ),
            (
                serde_json::json!({"kind": "rfc2544", "ingress": "eth0", "egress": "eth1", "time": 5}),
                "a rfc2544 step has no 'time' (only tcp, udp, udp-ladder steps have it); set 'trial'",
            ),
            (
                serde_json::json!({"kind": "rfc2544", "ingress": "eth0", "egress": "eth1", "token": "x"}),
                "unknown field `token`",
            ),
            (
                serde_json::json!({"kind": "tcp", "ingress": "eth0"}),
                "a tcp step has no 'ingress' (only rfc2544 steps have it)",
            ),
        ] {
            let m = e(serde_json::json!([step]));
            assert!(m.contains(want), "{m} should say {want}");
        }
        // Against the board's ports, a port it does not have is refused.
        let lo = crate::board::Port {
            name: "eth0".into(),
            up: true,
            running: true,
            loopback: false,
            addresses: Vec::new(),
        };
        let m = d.plan(&t, &[lo]).unwrap_err();
        assert!(m.contains("the board has no port 'eth1'"), "{m}");
    }

    #[test]
    fn step_kinds_list_every_variant() {
        use serde::de::IntoDeserializer;
        // Every variant of StepKind by its index (no list to forget), in ALL's order.
        let mut declared = Vec::new();
        for i in 0u32.. {
            let d: serde::de::value::U32Deserializer<serde::de::value::Error> =
                i.into_deserializer();
            match StepKind::deserialize(d) {
                Ok(k) => declared.push(k),
                Err(_) => break,
            }
        }
        assert_eq!(declared, StepKind::ALL);
        // Each word reads as a step of that kind and is serde's tag …
        for k in StepKind::ALL {
            let st = Step::from_value(1, serde_json::json!({"kind": k.as_str()})).unwrap();
            assert_eq!(st.kind(), k);
            assert_eq!(
                serde_json::to_value(&st).unwrap(),
                serde_json::json!({"kind": k.as_str()})
            );
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        // … and serde knows no other tags.
        let e = serde_json::from_value::<Step>(serde_json::json!({"kind": "x"}))
            .unwrap_err()
            .to_string();
        let tags = StepKind::ALL.map(|k| format!("`{k}`")).join(", ");
        assert!(e.ends_with(&format!("expected one of {tags}")), "{e}");
    }

    #[test]
    fn seeding_is_once_and_save_keeps_names_unique() {
        let d = crate::scratch::dir("seed");
        let s = Store::open_dir(&d).unwrap();
        assert_eq!(seed_builtins(&s).unwrap(), 2);
        let row = find(&s, SEED_001).unwrap().unwrap();
        assert!(row.builtin);
        assert_eq!(from_row(&row).unwrap().steps.len(), 8);
        assert!(s.delete_suite_def(row.id).unwrap());
        assert_eq!(
            seed_builtins(&s).unwrap(),
            0,
            "a deleted built-in stays deleted"
        );
        let mine = def(serde_json::json!([{"kind": "tcp"}])).unwrap();
        let id = save(&s, None, &mine).unwrap();
        assert!(save(&s, None, &mine)
            .unwrap_err()
            .contains("exists already"));
        assert_eq!(save(&s, Some(id), &mine).unwrap(), id);
        assert_eq!(find(&s, &id.to_string()).unwrap().unwrap().name, "t");
        let bad = SuiteDef {
            steps: vec![],
            ..mine
        };
        assert!(save(&s, Some(id), &bad).is_err());
        assert_eq!(
            from_row(&find(&s, "t").unwrap().unwrap())
                .unwrap()
                .steps
                .len(),
            1
        );
        let _ = std::fs::remove_dir_all(d);
    }
}
