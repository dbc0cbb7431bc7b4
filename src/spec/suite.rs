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

use crate::engine::iperf3::client::ClientSpec;
use crate::engine::iperf3::wire::{Direction, Protocol};
use crate::engine::report::parse_suffixed;
use crate::spec::latency::LatencySpec;
use crate::spec::test::TestRequest;
use crate::spec::thresholds::Thresholds;
use crate::store::Store;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize};

/// Most steps one definition may hold.
pub const MAX_STEPS: usize = 50;
/// Most tests a definition may expand to (a ladder step is two tests per rate).
pub const MAX_TESTS: usize = 100;
/// The step kinds this build knows.
pub const STEP_KINDS: &[&str] = &["tcp", "udp", "udp-ladder", "latency"];
/// Name of the built-in definition that reproduces seed 001's result tables.
pub const SEED_001: &str = "seed 001 table";
/// Settings key set once the built-in definitions were seeded (so a deleted one stays gone).
const SEEDED_KEY: &str = "suite_defs_seeded";

/// A number or text in JSON (`5` or `"5"`, `"100M"`) as text; `null` as none.
fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s)),
        serde_json::Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(D::Error::custom(format!(
            "expected a number or text, got {other}"
        ))),
    }
}

/// One step of a suite.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// One of [`STEP_KINDS`].
    pub kind: String,
    /// send / receive / bidir (tcp, udp).
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub direction: Option<String>,
    /// Seconds (`-t`), 1..86400; default: the definition's `time`, else 10.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub time: Option<String>,
    /// Parallel streams (`-P`), 1..128.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub streams: Option<String>,
    /// Bitrate per stream (`-b`), bits/s with K/M/G suffixes; required for `udp`.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub bitrate: Option<String>,
    /// Block / datagram size (`-l`), bytes with K/M suffixes.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub length: Option<String>,
    /// Socket buffer (`-w`), bytes with K/M suffixes.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<String>,
    /// `udp-ladder`: comma-separated bitrates, default "100M,400M,1000M".
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub rates: Option<String>,
    /// `latency`: the load's direction, up / down (default) / both.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub load: Option<String>,
    /// `latency`: idle phase before and after the load, s (0..600, default 5).
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub idle: Option<String>,
    /// `latency`: loaded phase, s (1..3600, default 10).
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub loaded: Option<String>,
    /// `latency`: probe interval, ms (1..1000, default 10).
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub interval: Option<String>,
    /// `latency`: TCP congestion control of the load (e.g. "cubic"); default: the hosts'.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub congestion: Option<String>,
    /// Row name in result tables (default e.g. "TCP send", "UDP receive 400M").
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<String>,
    /// Pass/fail limits of this step's tests (see [`crate::spec::thresholds`]); replaces the
    /// suite's `thresholds`. Kept as JSON here and checked by [`SuiteDef::validate`], so an
    /// error names the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<serde_json::Value>,
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
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub port: Option<String>,
    /// Board port (interface) to bind every test to (a run may override it).
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub bind: Option<String>,
    /// Seconds per test for steps that set none, default 10.
    #[serde(
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub time: Option<String>,
    /// Pass/fail limits for every step that sets none (see [`crate::spec::thresholds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<serde_json::Value>,
    pub steps: Vec<Step>,
}

/// Where and how to run a definition (the run-time choices).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunTarget {
    /// Peer host name or address.
    pub host: String,
    /// Overrides the definition's peer port.
    #[serde(default, deserialize_with = "opt_text")]
    pub port: Option<String>,
    /// Overrides the definition's board port.
    #[serde(default, deserialize_with = "opt_text")]
    pub bind: Option<String>,
    /// Overrides every step's seconds (e.g. a quick 2 s check of a 60 s suite).
    #[serde(default, deserialize_with = "opt_text")]
    pub time: Option<String>,
    /// Board or change under test, shown in result tables (default: the board's host name).
    #[serde(default, deserialize_with = "opt_text")]
    pub label: Option<String>,
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
}

impl PlannedRun {
    /// The peer host the test runs against.
    pub fn host(&self) -> &str {
        match self {
            PlannedRun::Iperf3(c) => &c.host,
            PlannedRun::Latency(l) => &l.host,
        }
    }

    /// How long the test runs, s (a latency run: idle + loaded + idle).
    pub fn seconds(&self) -> u32 {
        match self {
            PlannedRun::Iperf3(c) => c.params.time,
            PlannedRun::Latency(l) => 2 * l.idle_s + l.loaded_s,
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
        }
    }

    /// The iperf3 spec of an iperf3 test (tests only; panics on a latency test).
    #[cfg(test)]
    fn client(&self) -> &ClientSpec {
        match &self.spec {
            PlannedRun::Iperf3(c) => c,
            PlannedRun::Latency(_) => panic!("not an iperf3 test"),
        }
    }
}

fn opt(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// "100M" for 100 000 000 bits/s (how the seed reports name their UDP tests).
pub fn rate_word(bps: u64) -> String {
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
pub fn spec_label(s: &ClientSpec) -> String {
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
    pub fn validate(&self) -> Result<(), String> {
        let placeholder = RunTarget {
            host: "peer.invalid".into(),
            ..Default::default()
        };
        self.plan_with(&placeholder, None).map(|_| ())
    }

    /// The tests to run against `t`, checked, in order. `ports` are the board's ports (to
    /// check and resolve the board port).
    pub fn plan(
        &self,
        t: &RunTarget,
        ports: &[crate::board::Port],
    ) -> Result<Vec<PlannedTest>, String> {
        self.plan_with(t, Some(ports))
    }

    /// The tests to run against `t`, checked, in order, without the board port: what the
    /// Suites page lists before a run, when the port is still to be picked (the saved one, or
    /// another in the run form). A saved port is checked against the board when it runs.
    pub fn plan_any_port(&self, t: &RunTarget) -> Result<Vec<PlannedTest>, String> {
        self.plan_with(t, None)
    }

    fn plan_with(
        &self,
        t: &RunTarget,
        ports: Option<&[crate::board::Port]>,
    ) -> Result<Vec<PlannedTest>, String> {
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
        let bind = match ports {
            Some(_) => opt(&t.bind).or(opt(&self.bind)).map(String::from),
            None => None,
        };
        let base = TestRequest {
            host: t.host.clone(),
            port: opt(&t.port).or(opt(&self.port)).map(String::from),
            bind,
            ..Default::default()
        };
        // The definition's own numbers are checked even when the run overrides them.
        if let Some(p) = opt(&self.port) {
            TestRequest {
                port: Some(p.into()),
                ..base.clone()
            }
            .to_spec(&[])
            .map_err(|e| format!("port: {e}"))?;
        }
        let suite_th = match &self.thresholds {
            Some(v) => Some(Thresholds::from_value(v)?),
            None => None,
        };
        let mut out = Vec::new();
        for (i, st) in self.steps.iter().enumerate() {
            let n = i + 1;
            let e = |m: String| format!("step {n} ({}): {m}", st.kind);
            if let Some(l) = &st.label {
                check_text("the label", l, 80).map_err(e)?;
            }
            let thresholds = match &st.thresholds {
                Some(v) => Some(Thresholds::from_value(v).map_err(e)?),
                None => suite_th,
            };
            let time = opt(&t.time)
                .or(opt(&st.time))
                .or(opt(&self.time))
                .map(String::from);
            // Check the step's own time too when a run overrides it (a bad definition
            // stays bad).
            for (what, v) in [("time", &st.time), ("time", &self.time)] {
                if let Some(v) = opt(v) {
                    TestRequest {
                        duration: Some(v.into()),
                        ..TestRequest {
                            host: "peer.invalid".into(),
                            ..Default::default()
                        }
                    }
                    .to_spec(&[])
                    .map_err(|m| e(format!("{what}: {m}")))?;
                }
            }
            let mut req = TestRequest {
                duration: time,
                parallel: st.streams.clone(),
                bitrate: st.bitrate.clone(),
                length: st.length.clone(),
                window: st.window.clone(),
                direction: st.direction.clone(),
                ..base.clone()
            };
            if st.kind != "latency" {
                crate::spec::suite_latency::refuse_latency_fields(st).map_err(e)?;
            }
            let ports = ports.unwrap_or(&[]);
            match st.kind.as_str() {
                "latency" => {
                    let spec =
                        crate::spec::suite_latency::plan_step(st, &base, opt(&t.time), ports)
                            .map_err(e)?;
                    let label = opt(&st.label)
                        .map(String::from)
                        .unwrap_or_else(|| crate::spec::suite_latency::label(&spec));
                    out.push(PlannedTest {
                        step: n,
                        label,
                        spec: PlannedRun::Latency(spec),
                        thresholds,
                    });
                }
                "tcp" | "udp" => {
                    if st.rates.is_some() {
                        return Err(e("'rates' is only for udp-ladder steps".into()));
                    }
                    if st.kind == "udp" {
                        if opt(&st.bitrate).is_none() {
                            return Err(e("a udp step needs a bitrate, e.g. 100M".into()));
                        }
                        req.protocol = Some("udp".into());
                    }
                    let spec = req.to_spec(ports).map_err(e)?;
                    let label = opt(&st.label)
                        .map(String::from)
                        .unwrap_or_else(|| spec_label(&spec));
                    out.push(PlannedTest {
                        step: n,
                        label,
                        spec: PlannedRun::Iperf3(spec),
                        thresholds,
                    });
                }
                "udp-ladder" => {
                    if let Some(d) = opt(&st.direction).filter(|d| *d != "both") {
                        return Err(e(format!(
                            "a ladder runs both directions; direction must be empty or 'both', got '{d}'"
                        )));
                    }
                    if opt(&st.bitrate).is_some() {
                        return Err(e("a ladder takes 'rates', not 'bitrate'".into()));
                    }
                    req.direction = None;
                    let rates =
                        parse_rates(opt(&st.rates).unwrap_or("100M,400M,1000M")).map_err(e)?;
                    // Check the common fields once as UDP (parallel, window, length, time).
                    let mut probe = req.clone();
                    probe.protocol = Some("udp".into());
                    probe.bitrate = Some("1M".into());
                    let spec = probe.to_spec(ports).map_err(e)?;
                    for &r in &rates {
                        for d in [Direction::Send, Direction::Receive] {
                            let mut s = spec.clone();
                            s.params.bandwidth = r;
                            s.params.direction = d;
                            s.validate().map_err(e)?;
                            let mut label = spec_label(&s);
                            if let Some(l) = opt(&st.label) {
                                label = format!("{l} {}", label.trim_start_matches("UDP "));
                            }
                            out.push(PlannedTest {
                                step: n,
                                label,
                                spec: PlannedRun::Iperf3(s),
                                thresholds,
                            });
                        }
                    }
                }
                k => {
                    return Err(format!(
                        "step {n}: unknown kind '{k}' (known: {})",
                        STEP_KINDS.join(", ")
                    ))
                }
            }
            if out.len() > MAX_TESTS {
                return Err(format!(
                    "a suite runs at most {MAX_TESTS} tests; these steps make more"
                ));
            }
        }
        Ok(out)
    }
}

/// The definitions seeded on first start.
pub fn builtin_defs() -> Vec<SuiteDef> {
    let tcp = |d: &str| Step {
        kind: "tcp".into(),
        direction: Some(d.into()),
        ..Default::default()
    };
    let udp = |d: &str, r: &str| Step {
        kind: "udp".into(),
        direction: Some(d.into()),
        bitrate: Some(r.into()),
        // 1 GbE defaults: up to 400M the port must carry UDP without loss worth the name
        // (≤ 0.1 %) and the sender must keep the rate (≤ 3 % short); at 1000M (above the
        // 957 Mbit/s UDP ceiling) the suite-level ceiling rule applies instead.
        thresholds: (r != "1000M")
            .then(|| serde_json::json!({"max_loss_percent": 0.1, "max_shortfall_percent": 3})),
        ..Default::default()
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
            steps: vec![Step {
                kind: "udp-ladder".into(),
                rates: Some("100M,400M,1000M".into()),
                ..Default::default()
            }],
            ..Default::default()
        },
    ]
}

/// Store the built-in definitions the first time netperfd opens this history (a later
/// deletion sticks); returns how many were added.
pub fn seed_builtins(store: &Store) -> Result<usize, String> {
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
pub fn from_row(r: &crate::store::SuiteDefRow) -> Result<SuiteDef, String> {
    let d: SuiteDef = serde_json::from_value(r.body.clone())
        .map_err(|e| format!("stored suite '{}' is invalid: {e}", r.name))?;
    Ok(SuiteDef {
        name: r.name.clone(),
        ..d
    })
}

/// Find a definition by id ("12") or name.
pub fn find(store: &Store, key: &str) -> Result<Option<crate::store::SuiteDefRow>, String> {
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
pub fn save(store: &Store, id: Option<i64>, d: &SuiteDef) -> Result<i64, String> {
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
pub const UDP_LADDER: &str = "udp-ladder";

/// Parse "100M,400M,1000M" into bits/s; 1 to 10 rates, each 1 kbit/s..100 Gbit/s.
pub fn parse_rates(s: &str) -> Result<Vec<u64>, String> {
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
        let quick = RunTarget {
            time: Some("2".into()),
            ..t
        };
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
                    port: Some("5202".into()),
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
