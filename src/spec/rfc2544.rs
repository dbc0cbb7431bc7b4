//! An RFC 2544 benchmark of the board as the device under test (DUT), as the web form, the API
//! and `netperfd rfc2544` give it, checked whole into an [`Rfc2544Plan`] before anything
//! starts: a bad request gets one clear message and changes nothing.
//!
//! Frame arithmetic (IPv4 over Ethernet): a frame of `F` bytes counts the Ethernet header
//! (14), the FCS (4), the IPv4 header (20) and the UDP header (8), so the UDP payload the
//! generator sends is `F − 46` bytes (18 for a 64-byte frame). On the wire each frame also
//! takes 20 bytes of preamble, start delimiter and inter-frame gap: the line rate in frames/s
//! of a port of `S` bit/s is `S / (8 × (F + 20))` (RFC 2544 appendix C; 1,488,095 fps for
//! 64-byte frames at 1 Gbit/s). Rates are given three ways: frames/s, L2 bit/s
//! (`8 × F × fps`) and L1 bit/s (`8 × (F + 20) × fps`).

pub(crate) use crate::board::PortFacts;
use crate::model::RunDirection;
use serde::Deserialize;

/// The frame sizes RFC 2544 §9.1 lists for Ethernet, bytes with FCS.
pub(crate) const DEFAULT_SIZES: [u32; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// The smallest Ethernet frame, bytes with FCS.
pub(crate) const MIN_FRAME: u32 = 64;
/// Headers a frame holds around the UDP payload: Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 bytes.
pub(crate) const FRAME_OVERHEAD: u32 = 46;
/// Preamble (7), start-of-frame delimiter (1) and the inter-frame gap (12), bytes.
pub(crate) const L1_OVERHEAD: u32 = 20;
/// Most frame sizes one run may test.
pub(crate) const MAX_SIZES: usize = 16;
/// Longest trial, s (RFC 2544 asks for 60 s at least for the throughput test's final trials).
pub(crate) const MAX_TRIAL_S: u32 = 600;
/// Time between two latency probes of the latency test, ms (100 a second: a 10 s trial gives
/// about 750 loaded round trips, enough for a p99).
pub(crate) const PROBE_INTERVAL_MS: u32 = 10;
/// Most times one run repeats the back-to-back search of a frame size (RFC 2544 §26.4 asks
/// for at least 50, averaged).
pub(crate) const MAX_B2B_REPEAT: u32 = 50;

/// The tests of RFC 2544 §26, in the order they run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Rfc2544Test {
    /// §26.1: the highest rate with loss ≤ the allowed ratio.
    Throughput,
    /// §26.2: the delay through the board at the throughput found, from UDP echo probes
    /// beside a trial at that rate (PC2 answers them: netperfd's daemon or `netperfd peer`).
    Latency,
    /// §26.3: the frame loss rate from 100 % of the line rate down in 10 % steps.
    Loss,
    /// §26.4 as updated by RFC 9004: the longest burst at the line rate the board forwards
    /// without a loss, and the buffer time it implies (needs throughput: the correction
    /// uses the throughput found).
    BackToBack,
}

impl Rfc2544Test {
    /// The word used in `--tests`, the API and the stored summary.
    pub fn word(self) -> &'static str {
        match self {
            Rfc2544Test::Throughput => "throughput",
            Rfc2544Test::Latency => "latency",
            Rfc2544Test::Loss => "loss",
            Rfc2544Test::BackToBack => "back-to-back",
        }
    }

    /// The test a word of `--tests` names (its [`Rfc2544Test::word`] or an alias:
    /// `frame-loss`, `b2b`); `None` for another word.
    pub fn parse(w: &str) -> Option<Rfc2544Test> {
        Some(match w {
            "throughput" => Rfc2544Test::Throughput,
            "loss" | "frame-loss" => Rfc2544Test::Loss,
            "latency" => Rfc2544Test::Latency,
            "back-to-back" | "b2b" => Rfc2544Test::BackToBack,
            _ => return None,
        })
    }
}

/// Payload of the UDP datagrams that make frames of `frame` bytes (with FCS), bytes.
pub(crate) fn payload(frame: u32) -> u32 {
    frame.saturating_sub(FRAME_OVERHEAD)
}

/// Frames/s of a port of `line_bps` bit/s (L1) at frame size `frame` (RFC 2544 appendix C).
pub(crate) fn line_rate_fps(line_bps: f64, frame: u32) -> f64 {
    line_bps / (8.0 * f64::from(frame + L1_OVERHEAD))
}

/// L2 bit/s of `fps` frames/s of `frame` bytes (the frame with FCS, no preamble or gap).
pub(crate) fn l2_bps(fps: f64, frame: u32) -> f64 {
    fps * 8.0 * f64::from(frame)
}

/// L1 bit/s of `fps` frames/s of `frame` bytes (what the frames take on the wire).
pub(crate) fn l1_bps(fps: f64, frame: u32) -> f64 {
    fps * 8.0 * f64::from(frame + L1_OVERHEAD)
}

/// The generator's `-b` for `fps` frames/s of `frame` bytes: UDP payload bit/s (iperf3's
/// bitrate counts the payload only), rounded up so the pacer does not offer less.
pub(crate) fn payload_bps(fps: f64, frame: u32) -> u64 {
    (fps * 8.0 * f64::from(payload(frame))).ceil() as u64
}

/// A benchmark as the form and the API give it (strings, as forms send them; the API's
/// numbers and lists become text first). The API refuses keys that are not in
/// [`Rfc2544Request::FIELDS`] (a misspelt limit would otherwise run unjudged).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
pub struct Rfc2544Request {
    /// Peer agent address on PC1, `https://HOST:PORT#sha256=FINGERPRINT` or `http://HOST:PORT`
    /// (see `peer::PeerClient::parse`).
    #[serde(default)]
    pub peer: String,
    /// The agent's token; empty = the stored one.
    #[serde(default)]
    pub token: Option<String>,
    /// PC2, running `iperf3 -s` (stock) or `netperfd -s` (which also reports its own drops).
    #[serde(default)]
    pub target: String,
    /// PC2's iperf3 port, default 5201.
    #[serde(default)]
    pub port: Option<String>,
    /// Board port the frames come in on (PC1's side).
    #[serde(default)]
    pub ingress: String,
    /// Board port they leave through (PC2's side; MASQUERADE applies there with `nat`).
    #[serde(default)]
    pub egress: String,
    /// Turn on forwarding with NAT for the run (on/true/1/yes).
    #[serde(default)]
    pub nat: Option<String>,
    /// Frame sizes, bytes with FCS, comma-separated; default [`DEFAULT_SIZES`].
    #[serde(default)]
    pub sizes: Option<String>,
    /// Seconds per trial, default 10.
    #[serde(default)]
    pub trial: Option<String>,
    /// Loss allowed in the throughput test, % of frames, default 0.
    #[serde(default)]
    pub loss: Option<String>,
    /// Throughput search resolution, % of the rate, default 0.5.
    #[serde(default)]
    pub resolution: Option<String>,
    /// send (PC1 → PC2, default), receive (PC2 → PC1) or bidir.
    #[serde(default)]
    pub direction: Option<String>,
    /// Tests, comma-separated: throughput, latency, loss, back-to-back (default throughput).
    #[serde(default)]
    pub tests: Option<String>,
    /// Times the back-to-back search of each frame size runs; the result is their mean.
    /// 1..=[`MAX_B2B_REPEAT`], default 1.
    #[serde(default)]
    pub b2b_repeat: Option<String>,
    /// PC2's UDP echo port for the latency test, default 5291 (netperfd's).
    #[serde(default)]
    pub echo_port: Option<String>,
    /// The ports' line rate, bit/s with K/M/G (default: their link speed; needed when a port
    /// does not report one).
    #[serde(default)]
    pub line_rate: Option<String>,
    /// Pass/fail: every frame size's throughput at least this % of the line rate (0..100;
    /// needs the throughput test). Empty = not judged.
    #[serde(default)]
    pub min_throughput_percent: Option<String>,
    /// Pass/fail: every frame size's latency (p99 round trip) at most this, ms (needs the
    /// latency test). Empty = not judged.
    #[serde(default)]
    pub max_latency_ms: Option<String>,
    /// Pass/fail: the busiest core's busy share during the run at most this % (0..100).
    /// Empty = not judged.
    #[serde(default)]
    pub max_cpu_percent: Option<String>,
    /// CSRF token (forms only).
    #[serde(default)]
    pub csrf: Option<String>,
    /// A suite run's own iperf3 port for PC2 (`netperfd suite run --port`, the run form's),
    /// typed where it was read; in place of [`Self::port`]. Never read from or written to a
    /// request's JSON.
    #[serde(skip)]
    pub run_port: Option<u16>,
    /// A suite run's own seconds per trial (`--time`, the run form's), typed where it was
    /// read; in place of [`Self::trial`]. Never read from or written to a request's JSON.
    #[serde(skip)]
    pub run_trial: Option<u32>,
}

/// A checked benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct Rfc2544Plan {
    pub peer: String,
    pub token: String,
    pub target: String,
    pub port: u16,
    pub ingress: String,
    pub egress: String,
    pub nat: bool,
    /// Frame sizes, bytes with FCS, ascending, no repeats.
    pub sizes: Vec<u32>,
    /// Seconds per trial.
    pub trial_s: u32,
    /// Loss allowed in the throughput test, fraction of frames (0.001 = 0.1 %).
    pub loss: f64,
    /// Search resolution, fraction of the rate.
    pub resolution: f64,
    /// Send, receive or bidir, from PC1's view.
    pub direction: RunDirection,
    /// In the order they run (throughput, latency, loss, back-to-back).
    pub tests: Vec<Rfc2544Test>,
    /// Back-to-back searches per frame size (their mean is the result).
    pub b2b_repeat: u32,
    /// PC2's UDP echo port (the latency test's probes).
    pub echo_port: u16,
    /// Line rate of the tested path, L1 bit/s (the slower of the two ports).
    pub line_bps: f64,
    /// Where the line rate came from: "link speed" or "given".
    pub line_source: &'static str,
    /// The limits a standalone run is judged against (only `min_throughput_percent`,
    /// `max_latency_ms` and `max_cpu_percent`; empty = no verdict). A suite step's limits are
    /// the suite's, not these.
    pub thresholds: crate::spec::thresholds::Thresholds,
}

/// A benchmark as `netperfd rfc2544` gives it: what clap types (ports, seconds, counts, the
/// direction, NAT) goes in typed; the lists, percentages and rates are the flags' own text,
/// read by the same readers as a request's fields. [`Rfc2544Flags::plan`] checks it in the
/// order [`Rfc2544Request::plan`] checks a request, with the same words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rfc2544Flags {
    /// Peer agent address on PC1 (see [`Rfc2544Request::peer`]).
    pub peer: String,
    /// The agent's token.
    pub token: String,
    /// PC2, running `iperf3 -s` or `netperfd -s`.
    pub target: String,
    /// PC2's iperf3 port (0 is refused).
    pub port: u16,
    /// Board port the frames come in on.
    pub ingress: String,
    /// Board port they leave through.
    pub egress: String,
    /// Forwarding with NAT for the run.
    pub nat: bool,
    /// Frame sizes, bytes with FCS, comma-separated; `None` = [`DEFAULT_SIZES`].
    pub sizes: Option<String>,
    /// Seconds per trial, 1..=[`MAX_TRIAL_S`].
    pub trial: u32,
    /// Loss allowed in the throughput test, % of frames ("0.1", "0.1%").
    pub loss: String,
    /// Throughput search resolution, % of the rate.
    pub resolution: String,
    /// Send, receive or bidir, from PC1's view.
    pub direction: RunDirection,
    /// Tests, comma-separated (see [`Rfc2544Test::parse`]).
    pub tests: String,
    /// Back-to-back searches per frame size, 1..=[`MAX_B2B_REPEAT`].
    pub b2b_repeat: u32,
    /// PC2's UDP echo port (0 is refused).
    pub echo_port: u16,
    /// The ports' line rate, bit/s with K/M/G; `None` = their link speed.
    pub line_rate: Option<String>,
    /// Pass/fail limits as [`Rfc2544Request`]'s (percent, ms, percent; `None` = not judged).
    pub min_throughput_percent: Option<String>,
    pub max_latency_ms: Option<String>,
    pub max_cpu_percent: Option<String>,
}

impl Rfc2544Flags {
    /// Check the flags against the board's ports (MTU and link speed). Errors: as
    /// [`Rfc2544Request::plan`]'s, word for word.
    pub(crate) fn plan(&self, ports: &[PortFacts]) -> Result<Rfc2544Plan, String> {
        plan_from(self, ports, None, None)
    }
}

/// What a benchmark's settings are read from: a request's text or the command line's typed
/// flags. [`plan_from`] reads each field where its check comes, so a settings' first error is
/// the same whichever way they came. Text fields are returned as given (`None` = absent).
trait Fields {
    fn token(&self) -> Option<&str>;
    fn peer(&self) -> &str;
    fn target(&self) -> &str;
    fn port(&self) -> Result<u16, String>;
    fn ingress(&self) -> &str;
    fn egress(&self) -> &str;
    fn nat(&self) -> bool;
    fn direction(&self) -> Result<RunDirection, String>;
    fn tests(&self) -> Option<&str>;
    fn b2b_repeat(&self) -> Result<u32, String>;
    fn echo_port(&self) -> Result<u16, String>;
    fn sizes(&self) -> Option<&str>;
    fn trial(&self) -> Result<u32, String>;
    fn loss(&self) -> Option<&str>;
    fn resolution(&self) -> Option<&str>;
    fn line_rate(&self) -> Option<&str>;
    /// `min_throughput_percent`, `max_latency_ms`, `max_cpu_percent`.
    fn limits(&self) -> [Option<&str>; 3];
}

fn opt(s: &Option<String>) -> Option<&str> {
    trimmed(s.as_deref())
}

fn trimmed(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

fn number(t: Option<&str>, what: &str, default: f64, lo: f64, hi: f64) -> Result<f64, String> {
    let Some(t) = trimmed(t) else {
        return Ok(default);
    };
    let v: f64 = t
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{what} '{t}' is not a number"))?;
    in_range(v, t, what, lo, hi)
}

/// `v` when it is finite and in `lo..=hi`; else the message naming `what` and `shown` (the
/// value as given).
fn in_range(v: f64, shown: &str, what: &str, lo: f64, hi: f64) -> Result<f64, String> {
    if !v.is_finite() || v < lo || v > hi {
        return Err(format!("{what} {shown} is out of range ({lo}..{hi})"));
    }
    Ok(v)
}

/// A whole count of `what` in `1..=hi` from a request's text (`default` when absent);
/// `fraction` words a number with a fraction.
fn whole(
    t: Option<&str>,
    what: &str,
    default: u32,
    hi: u32,
    fraction: impl Fn(f64) -> String,
) -> Result<u32, String> {
    let v = number(t, what, f64::from(default), 1.0, f64::from(hi))?;
    if v.fract() != 0.0 {
        return Err(fraction(v));
    }
    Ok(v as u32)
}

/// A typed count of `what` in `1..=hi`.
fn whole_typed(n: u32, what: &str, hi: u32) -> Result<u32, String> {
    in_range(f64::from(n), &n.to_string(), what, 1.0, f64::from(hi)).map(|_| n)
}

/// A port number from a request's text (`default` when absent); `what` names it.
fn port_text(t: Option<&str>, what: &str, default: u16) -> Result<u16, String> {
    match trimmed(t) {
        None => Ok(default),
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{what} '{p}' is not a port number (1..65535)")),
    }
}

/// A typed port number (0 refused with the words of [`port_text`]).
fn port_typed(p: u16, what: &str) -> Result<u16, String> {
    if p == 0 {
        return Err(format!("{what} '{p}' is not a port number (1..65535)"));
    }
    Ok(p)
}

/// A request's trial, whole seconds in 1..=[`MAX_TRIAL_S`] (default 10).
fn trial_text(t: Option<&str>) -> Result<u32, String> {
    whole(t, "trial (s)", 10, MAX_TRIAL_S, |v| {
        format!("trial {v} s: give whole seconds")
    })
}

impl Fields for Rfc2544Request {
    fn token(&self) -> Option<&str> {
        opt(&self.token)
    }
    fn peer(&self) -> &str {
        &self.peer
    }
    fn target(&self) -> &str {
        &self.target
    }
    fn port(&self) -> Result<u16, String> {
        match self.run_port {
            Some(p) => port_typed(p, "port"),
            None => port_text(self.port.as_deref(), "port", 5201),
        }
    }
    fn ingress(&self) -> &str {
        &self.ingress
    }
    fn egress(&self) -> &str {
        &self.egress
    }
    fn nat(&self) -> bool {
        matches!(
            opt(&self.nat).map(str::to_ascii_lowercase).as_deref(),
            Some("on" | "true" | "1" | "yes")
        )
    }
    fn direction(&self) -> Result<RunDirection, String> {
        match opt(&self.direction).unwrap_or("send") {
            "send" => Ok(RunDirection::Send),
            "receive" | "reverse" => Ok(RunDirection::Receive),
            "bidir" => Ok(RunDirection::Bidir),
            d => Err(format!("direction '{d}': expected send, receive or bidir")),
        }
    }
    fn tests(&self) -> Option<&str> {
        self.tests.as_deref()
    }
    fn b2b_repeat(&self) -> Result<u32, String> {
        whole(
            self.b2b_repeat.as_deref(),
            "back-to-back repeat",
            1,
            MAX_B2B_REPEAT,
            |v| format!("back-to-back repeat {v}: give a whole number"),
        )
    }
    fn echo_port(&self) -> Result<u16, String> {
        port_text(
            self.echo_port.as_deref(),
            "echo port",
            crate::engine::echo::DEFAULT_PORT,
        )
    }
    fn sizes(&self) -> Option<&str> {
        self.sizes.as_deref()
    }
    fn trial(&self) -> Result<u32, String> {
        match self.run_trial {
            Some(t) => whole_typed(t, "trial (s)", MAX_TRIAL_S),
            None => trial_text(self.trial.as_deref()),
        }
    }
    fn loss(&self) -> Option<&str> {
        self.loss.as_deref()
    }
    fn resolution(&self) -> Option<&str> {
        self.resolution.as_deref()
    }
    fn line_rate(&self) -> Option<&str> {
        self.line_rate.as_deref()
    }
    fn limits(&self) -> [Option<&str>; 3] {
        [
            self.min_throughput_percent.as_deref(),
            self.max_latency_ms.as_deref(),
            self.max_cpu_percent.as_deref(),
        ]
    }
}

impl Fields for Rfc2544Flags {
    fn token(&self) -> Option<&str> {
        trimmed(Some(&self.token))
    }
    fn peer(&self) -> &str {
        &self.peer
    }
    fn target(&self) -> &str {
        &self.target
    }
    fn port(&self) -> Result<u16, String> {
        port_typed(self.port, "port")
    }
    fn ingress(&self) -> &str {
        &self.ingress
    }
    fn egress(&self) -> &str {
        &self.egress
    }
    fn nat(&self) -> bool {
        self.nat
    }
    fn direction(&self) -> Result<RunDirection, String> {
        Ok(self.direction.clone())
    }
    fn tests(&self) -> Option<&str> {
        Some(&self.tests)
    }
    fn b2b_repeat(&self) -> Result<u32, String> {
        whole_typed(self.b2b_repeat, "back-to-back repeat", MAX_B2B_REPEAT)
    }
    fn echo_port(&self) -> Result<u16, String> {
        port_typed(self.echo_port, "echo port")
    }
    fn sizes(&self) -> Option<&str> {
        self.sizes.as_deref()
    }
    fn trial(&self) -> Result<u32, String> {
        whole_typed(self.trial, "trial (s)", MAX_TRIAL_S)
    }
    fn loss(&self) -> Option<&str> {
        Some(&self.loss)
    }
    fn resolution(&self) -> Option<&str> {
        Some(&self.resolution)
    }
    fn line_rate(&self) -> Option<&str> {
        self.line_rate.as_deref()
    }
    fn limits(&self) -> [Option<&str>; 3] {
        [
            self.min_throughput_percent.as_deref(),
            self.max_latency_ms.as_deref(),
            self.max_cpu_percent.as_deref(),
        ]
    }
}

fn port<'a>(ports: &'a [PortFacts], name: &str, what: &str) -> Result<&'a PortFacts, String> {
    let n = name.trim();
    if n.is_empty() {
        return Err(format!("choose the {what} port"));
    }
    match ports.iter().find(|p| p.name == n) {
        Some(p) if p.loopback => Err(format!("{what} port {n} is the loopback")),
        Some(p) if !crate::board::forwarding::rule_safe_name(n) => {
            Err(format!("port name '{}' cannot be used", p.name))
        }
        Some(p) => Ok(p),
        None => Err(format!("the board has no port '{n}' ({what})")),
    }
}

/// Who takes part: the agent (address, token), PC2 (address, port).
struct Ends {
    peer: String,
    token: String,
    target: String,
    port: u16,
}

fn ends(f: &impl Fields, stored_token: Option<&str>) -> Result<Ends, String> {
    let token = match f.token().or(stored_token) {
        Some(t) => t.to_string(),
        None => return Err("the peer agent's token is missing (none stored yet)".into()),
    };
    if f.peer().trim().is_empty() {
        return Err(
            "the peer agent address is missing (https://PC1:5280#sha256=…, as `netperfd peer` prints it)"
                .into(),
        );
    }
    let target = f.target().trim();
    if target.is_empty() {
        return Err("the target (PC2, running iperf3 -s) is missing".into());
    }
    if target.starts_with('-')
        || !target
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:_".contains(c))
    {
        return Err(format!("target '{target}' is not a host name or address"));
    }
    Ok(Ends {
        peer: f.peer().trim().to_string(),
        token,
        target: target.to_string(),
        port: f.port()?,
    })
}

/// The board's two ports of the path, checked: present, not the loopback, two different ones.
fn board_path<'a>(
    f: &impl Fields,
    ports: &'a [PortFacts],
) -> Result<(&'a PortFacts, &'a PortFacts), String> {
    let ingress = port(ports, f.ingress(), "ingress")?;
    let egress = port(ports, f.egress(), "egress")?;
    if ingress.name == egress.name {
        return Err(format!(
            "ingress and egress must be two different ports (both are {})",
            ingress.name
        ));
    }
    Ok((ingress, egress))
}

/// The tests chosen, in the RFC's order, and what they need: direction, back-to-back repeats,
/// the echo port.
struct Tests {
    direction: RunDirection,
    tests: Vec<Rfc2544Test>,
    b2b_repeat: u32,
    echo_port: u16,
}

fn tests(f: &impl Fields) -> Result<Tests, String> {
    let direction = f.direction()?;
    let mut tests = Vec::new();
    for w in trimmed(f.tests())
        .unwrap_or("throughput")
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        let t = Rfc2544Test::parse(w).ok_or_else(|| {
            format!("test '{w}': expected throughput, latency, loss or back-to-back")
        })?;
        if !tests.contains(&t) {
            tests.push(t);
        }
    }
    if tests.is_empty() {
        return Err("choose at least one test".into());
    }
    crate::model::order::sort(&mut tests);
    if tests.contains(&Rfc2544Test::Latency) && !tests.contains(&Rfc2544Test::Throughput) {
        return Err("the latency test runs at the throughput found: choose throughput too".into());
    }
    if tests.contains(&Rfc2544Test::BackToBack) {
        if !tests.contains(&Rfc2544Test::Throughput) {
            return Err(
                "the back-to-back test corrects for the throughput found: choose throughput too"
                    .into(),
            );
        }
        if direction != RunDirection::Send {
            return Err(format!(
                "the back-to-back test sends its bursts from PC1's agent: direction must be send, not {direction}"
            ));
        }
    }
    let b2b_repeat = f.b2b_repeat()?;
    let echo_port = f.echo_port()?;
    Ok(Tests {
        direction,
        tests,
        b2b_repeat,
        echo_port,
    })
}

/// The frame sizes of `list` (default: the RFC's that fit), ascending, each once, each at
/// least 64 bytes and at most what both ports carry.
fn frame_sizes(
    list: Option<&str>,
    ingress: &PortFacts,
    egress: &PortFacts,
) -> Result<Vec<u32>, String> {
    let mtu = ingress.mtu.min(egress.mtu);
    let largest = mtu + 18;
    let mut sizes = Vec::new();
    match trimmed(list) {
        None => sizes.extend(DEFAULT_SIZES.iter().copied().filter(|s| *s <= largest)),
        Some(list) => {
            for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                let f: u32 = w
                    .parse()
                    .map_err(|_| format!("frame size '{w}' is not a whole number of bytes"))?;
                if f < MIN_FRAME {
                    return Err(format!(
                        "frame size {f} is below Ethernet's minimum of {MIN_FRAME} bytes"
                    ));
                }
                if f > largest {
                    return Err(format!(
                        "frame size {f} is beyond the MTU: {} and {} carry frames of at most {largest} bytes (MTU {mtu} + 18)",
                        ingress.name, egress.name
                    ));
                }
                sizes.push(f);
            }
        }
    }
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        return Err("choose at least one frame size".into());
    }
    if sizes.len() > MAX_SIZES {
        return Err(format!(
            "{} frame sizes: at most {MAX_SIZES} per run",
            sizes.len()
        ));
    }
    Ok(sizes)
}

/// The line rate, L1 bit/s, and where it came from: `given`, else the slower port's link speed.
fn line_rate(
    given: Option<&str>,
    ingress: &PortFacts,
    egress: &PortFacts,
) -> Result<(f64, &'static str), String> {
    if let Some(t) = trimmed(given) {
        let v = crate::model::units::parse_suffixed(t, true)
            .map_err(|e| format!("line rate '{t}': {e}"))?;
        if !(1_000_000..=400_000_000_000).contains(&v) {
            return Err(format!("line rate {t} is out of range (1M..400G bit/s)"));
        }
        return Ok((v as f64, "given"));
    }
    match (ingress.speed_mbps, egress.speed_mbps) {
        (Some(a), Some(b)) if a > 0 && b > 0 => Ok((f64::from(a.min(b)) * 1e6, "link speed")),
        _ => {
            let which = if ingress.speed_mbps.is_none() {
                &ingress.name
            } else {
                &egress.name
            };
            Err(format!(
                "{which} reports no link speed: give the line rate (e.g. 1G)"
            ))
        }
    }
}

/// The settings of `f` checked against the board's `ports`, in one order for every source
/// (the first error is the one reported); `stored_token` is used when none is given;
/// `own_trial` replaces `f`'s trial (a suite step's own, checked when a run overrides it).
fn plan_from(
    f: &impl Fields,
    ports: &[PortFacts],
    stored_token: Option<&str>,
    own_trial: Option<&str>,
) -> Result<Rfc2544Plan, String> {
    let ends = ends(f, stored_token)?;
    let (ingress, egress) = board_path(f, ports)?;
    let tests = tests(f)?;
    let sizes = frame_sizes(f.sizes(), ingress, egress)?;
    let trial_s = match own_trial {
        Some(t) => trial_text(Some(t))?,
        None => f.trial()?,
    };
    let loss = number(f.loss(), "loss (%)", 0.0, 0.0, 100.0)?;
    let resolution = number(f.resolution(), "resolution (%)", 0.5, 0.01, 50.0)?;
    let (line_bps, line_source) = line_rate(f.line_rate(), ingress, egress)?;
    let thresholds = limits(f.limits(), &tests.tests)?;
    Ok(Rfc2544Plan {
        peer: ends.peer,
        token: ends.token,
        target: ends.target,
        port: ends.port,
        ingress: ingress.name.clone(),
        egress: egress.name.clone(),
        nat: f.nat(),
        sizes,
        trial_s,
        loss: loss / 100.0,
        resolution: resolution / 100.0,
        direction: tests.direction,
        tests: tests.tests,
        b2b_repeat: tests.b2b_repeat,
        echo_port: tests.echo_port,
        line_bps,
        line_source,
        thresholds,
    })
}

/// The pass/fail limits given with the settings (`min_throughput_percent`, `max_latency_ms`,
/// `max_cpu_percent`), checked as a suite's `thresholds` are
/// ([`crate::spec::thresholds::Thresholds::from_value`]: numbers, percentages 0..100) and
/// against the tests chosen: a throughput limit needs the throughput test, a latency limit the
/// latency test. Errors name the field.
fn limits(
    given: [Option<&str>; 3],
    tests: &[Rfc2544Test],
) -> Result<crate::spec::thresholds::Thresholds, String> {
    // Every given limit read first, then each checked (the order of the messages).
    let mut read = Vec::new();
    for ((key, what), v) in [
        (
            "min_throughput_percent",
            "minimum throughput (% of the line rate)",
        ),
        ("max_latency_ms", "maximum latency (ms)"),
        ("max_cpu_percent", "maximum CPU (%)"),
    ]
    .into_iter()
    .zip(given)
    {
        let Some(t) = trimmed(v) else { continue };
        let n: f64 = t
            .trim_end_matches('%')
            .trim()
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite())
            .ok_or_else(|| format!("{what} '{t}' is not a number"))?;
        read.push((key, n));
    }
    let mut th = crate::spec::thresholds::Thresholds::default();
    for (key, n) in read {
        th.set(key, n, "pass/fail limit: ")?;
    }
    if th.min_throughput_percent.is_some() && !tests.contains(&Rfc2544Test::Throughput) {
        return Err("a minimum throughput needs the throughput test".into());
    }
    if th.max_latency_ms.is_some() && !tests.contains(&Rfc2544Test::Latency) {
        return Err("a maximum latency needs the latency test".into());
    }
    Ok(th)
}

impl Rfc2544Request {
    /// Every key of the request (the API's JSON), in the order of the fields.
    pub const FIELDS: [&'static str; 20] = [
        "peer",
        "token",
        "target",
        "port",
        "ingress",
        "egress",
        "nat",
        "sizes",
        "trial",
        "loss",
        "resolution",
        "direction",
        "tests",
        "b2b_repeat",
        "echo_port",
        "line_rate",
        "min_throughput_percent",
        "max_latency_ms",
        "max_cpu_percent",
        "csrf",
    ];

    /// `Err("unknown field `k`, expected one of …")` for the first key of `keys` that is not a
    /// request field.
    pub fn check_keys<'a>(keys: impl IntoIterator<Item = &'a String>) -> Result<(), String> {
        super::check_keys(keys, &Self::FIELDS)
    }

    /// Check the request against the board's ports; `stored_token` is used when none is given.
    /// Errors name the field and the allowed range.
    pub fn plan(
        &self,
        ports: &[PortFacts],
        stored_token: Option<&str>,
    ) -> Result<Rfc2544Plan, String> {
        plan_from(self, ports, stored_token, None)
    }
}

/// The token [`Rfc2544Request::check_names`] checks with (a request may use the stored one,
/// which is only read when it starts).
const PLACEHOLDER_TOKEN: &str = "placeholder-token-for-checks";

impl Rfc2544Request {
    /// Check everything but what needs the board's ports' MTU and speed and the stored
    /// token and address (a suite step, checked when its definition is saved and again when
    /// it starts): every field's range, and the port names against `ports` when given (any
    /// name otherwise). The ports are taken as 1 Gbit/s with a 9000-byte MTU here.
    pub fn check_names(&self, ports: Option<&[crate::board::Port]>) -> Result<(), String> {
        self.check_with(ports, None)
    }

    /// [`Rfc2544Request::check_names`] with `trial` in place of the request's own: a suite
    /// step's trial, checked where a request's is (after the ports, tests and sizes, with the
    /// port names taken as given) even when a run's time overrides it (a bad definition
    /// stays bad).
    pub fn check_step_trial(&self, trial: &str) -> Result<(), String> {
        self.check_with(None, Some(trial))
    }

    fn check_with(
        &self,
        ports: Option<&[crate::board::Port]>,
        own_trial: Option<&str>,
    ) -> Result<(), String> {
        let fact = |name: &str, loopback: bool| PortFacts {
            name: name.to_string(),
            mtu: 9000,
            speed_mbps: Some(1000),
            loopback,
        };
        let facts: Vec<PortFacts> = match ports {
            Some(list) => list.iter().map(|p| fact(&p.name, p.loopback)).collect(),
            None => [&self.ingress, &self.egress]
                .into_iter()
                .map(|n| n.trim())
                .filter(|n| !n.is_empty())
                .map(|n| fact(n, false))
                .collect(),
        };
        let mut r = self.clone();
        if r.peer.trim().is_empty() {
            r.peer = "http://peer.invalid:5280".into();
        }
        plan_from(&r, &facts, Some(PLACEHOLDER_TOKEN), own_trial).map(|_| ())
    }

    /// A rough length of the run, s, for plans and schedules: per frame size, about 10
    /// throughput trials, one latency trial, 5 loss steps and 8 bursts of ~4 s per
    /// back-to-back search, each trial with ~1 s of the agent's set-up.
    pub fn estimated_seconds(&self) -> u32 {
        let sizes = opt(&self.sizes)
            .map(|l| l.split(',').filter(|w| !w.trim().is_empty()).count())
            .unwrap_or(DEFAULT_SIZES.len())
            .clamp(1, MAX_SIZES) as u64;
        let trial = self
            .run_trial
            .map(u64::from)
            .or_else(|| opt(&self.trial).and_then(|t| t.parse::<u64>().ok()))
            .unwrap_or(10)
            .clamp(1, u64::from(MAX_TRIAL_S))
            + 1;
        let repeat = opt(&self.b2b_repeat)
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(1)
            .clamp(1, u64::from(MAX_B2B_REPEAT));
        let mut per = 0u64;
        for w in opt(&self.tests).unwrap_or("throughput").split(',') {
            per += match Rfc2544Test::parse(w.trim()) {
                Some(Rfc2544Test::Throughput) => 10 * trial,
                Some(Rfc2544Test::Latency) => trial,
                Some(Rfc2544Test::Loss) => 5 * trial,
                Some(Rfc2544Test::BackToBack) => 8 * 4 * repeat,
                None => 0,
            };
        }
        u32::try_from(sizes * per).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    /// The API's key list is the request's fields, no more, no fewer (a field added without
    /// its key would be refused; a key without a field would be accepted and ignored).
    #[test]
    fn the_api_keys_are_the_request_fields() {
        let v = serde_json::to_value(Rfc2544Request::default()).expect("serializes");
        let keys: Vec<&str> = v
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut want = Rfc2544Request::FIELDS.to_vec();
        let mut got = keys.clone();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
        let typo = ["min_throughput_pct".to_string()];
        let e = Rfc2544Request::check_keys(&typo).expect_err("a misspelt key");
        assert!(
            e.starts_with("unknown field `min_throughput_pct`, expected one of peer, token, "),
            "{e}"
        );
        assert!(e.ends_with("max_cpu_percent, csrf"), "{e}");
        let fine: Vec<String> = Rfc2544Request::FIELDS
            .iter()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(Rfc2544Request::check_keys(&fine), Ok(()));
    }

    use super::*;

    fn ports() -> Vec<PortFacts> {
        let p = |n: &str, mtu, speed| PortFacts {
            name: n.into(),
            mtu,
            speed_mbps: speed,
            loopback: false,
        };
        vec![
            p("eth0", 1500, Some(1000)),
            p("eth1", 1500, Some(10000)),
            p("eth2", 9000, None),
            PortFacts {
                name: "lo".into(),
                mtu: 65536,
                speed_mbps: None,
                loopback: true,
            },
        ]
    }

    fn req() -> Rfc2544Request {
        Rfc2544Request {
            peer: "http://192.0.2.2:5280".into(),
            token: Some("t".repeat(20)),
            target: "198.51.100.2".into(),
            ingress: "eth0".into(),
            egress: "eth1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn frame_arithmetic_follows_rfc_2544_appendix_c() {
        // 1 GbE, 64-byte frames: 1,488,095 frames/s; 1518: 81,274.
        assert_eq!(line_rate_fps(1e9, 64).floor(), 1_488_095.0);
        assert_eq!(line_rate_fps(1e9, 1518).floor(), 81_274.0);
        assert_eq!(payload(64), 18);
        assert_eq!(payload(1518), 1472);
        let fps = line_rate_fps(1e9, 64);
        assert!((l1_bps(fps, 64) - 1e9).abs() < 1.0);
        assert!((l2_bps(fps, 64) - 761_904_761.9).abs() < 1.0);
        // The generator's -b is the payload: 18 of 64 bytes.
        assert_eq!(payload_bps(1000.0, 64), 144_000);
    }

    #[test]
    fn a_default_request_plans_the_rfc_sizes_at_the_slower_port() {
        let p = req().plan(&ports(), None).expect("plan");
        assert_eq!(p.sizes, DEFAULT_SIZES.to_vec());
        assert_eq!((p.trial_s, p.loss, p.resolution), (10, 0.0, 0.005));
        assert_eq!(p.line_bps, 1e9);
        assert_eq!(p.line_source, "link speed");
        assert_eq!(p.tests, vec![Rfc2544Test::Throughput]);
        assert_eq!((p.port, p.direction.as_str(), p.nat), (5201, "send", false));
        let q = Rfc2544Request {
            sizes: Some("1518, 512,512".into()),
            trial: Some("2".into()),
            loss: Some("0.1".into()),
            resolution: Some("1".into()),
            tests: Some("loss,throughput,loss".into()),
            direction: Some("bidir".into()),
            nat: Some("on".into()),
            ..req()
        }
        .plan(&ports(), None)
        .expect("plan");
        assert_eq!(q.sizes, vec![512, 1518]);
        assert_eq!((q.trial_s, q.loss, q.resolution), (2, 0.001, 0.01));
        // Run in the RFC's order, each once.
        assert_eq!(q.tests, vec![Rfc2544Test::Throughput, Rfc2544Test::Loss]);
        assert_eq!((q.direction.as_str(), q.nat), ("bidir", true));
    }

    #[test]
    fn pass_fail_limits_are_checked_with_the_plan() {
        let p = Rfc2544Request {
            tests: Some("throughput,latency".into()),
            min_throughput_percent: Some("90%".into()),
            max_latency_ms: Some(" 2.5 ".into()),
            max_cpu_percent: Some("".into()),
            ..req()
        }
        .plan(&ports(), None)
        .expect("plan");
        assert_eq!(p.thresholds.min_throughput_percent, Some(90.0));
        assert_eq!(p.thresholds.max_latency_ms, Some(2.5));
        assert_eq!(p.thresholds.max_cpu_percent, None);
        assert!(req()
            .plan(&ports(), None)
            .expect("plan")
            .thresholds
            .is_empty());
        for (r, want) in [
            (
                Rfc2544Request {
                    min_throughput_percent: Some("100.5".into()),
                    ..req()
                },
                "pass/fail limit: min_throughput_percent is a percentage (0..100), got 100.5",
            ),
            (
                Rfc2544Request {
                    max_cpu_percent: Some("-1".into()),
                    ..req()
                },
                "pass/fail limit: max_cpu_percent must not be negative, got -1",
            ),
            (
                Rfc2544Request {
                    max_latency_ms: Some("NaN".into()),
                    tests: Some("throughput,latency".into()),
                    ..req()
                },
                "maximum latency (ms) 'NaN' is not a number",
            ),
            (
                Rfc2544Request {
                    max_latency_ms: Some("3".into()),
                    ..req()
                },
                "a maximum latency needs the latency test",
            ),
            (
                Rfc2544Request {
                    min_throughput_percent: Some("3".into()),
                    tests: Some("loss".into()),
                    ..req()
                },
                "a minimum throughput needs the throughput test",
            ),
        ] {
            assert_eq!(r.plan(&ports(), None).expect_err(want), want);
        }
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let bad = |r: Rfc2544Request, want: &str| {
            let e = r.plan(&ports(), None).expect_err(want);
            assert!(e.contains(want), "{e:?} should say {want:?}");
        };
        bad(
            Rfc2544Request {
                sizes: Some("63".into()),
                ..req()
            },
            "below Ethernet's minimum of 64",
        );
        bad(
            Rfc2544Request {
                sizes: Some("9217".into()),
                ..req()
            },
            "at most 1518 bytes",
        );
        bad(
            Rfc2544Request {
                sizes: Some("9217".into()),
                ingress: "eth2".into(),
                egress: "eth1".into(),
                line_rate: Some("1G".into()),
                ..req()
            },
            "at most 1518",
        );
        bad(
            Rfc2544Request {
                sizes: Some("64,big".into()),
                ..req()
            },
            "'big' is not a whole number",
        );
        bad(
            Rfc2544Request {
                loss: Some("101".into()),
                ..req()
            },
            "loss (%) 101 is out of range",
        );
        bad(
            Rfc2544Request {
                trial: Some("0".into()),
                ..req()
            },
            "trial (s) 0 is out of range",
        );
        bad(
            Rfc2544Request {
                trial: Some("1.5".into()),
                ..req()
            },
            "whole seconds",
        );
        bad(
            Rfc2544Request {
                resolution: Some("0".into()),
                ..req()
            },
            "resolution (%) 0 is out of range",
        );
        bad(
            Rfc2544Request {
                ingress: "eth9".into(),
                ..req()
            },
            "no port 'eth9'",
        );
        bad(
            Rfc2544Request {
                egress: "eth0".into(),
                ..req()
            },
            "two different ports",
        );
        bad(
            Rfc2544Request {
                egress: "lo".into(),
                ..req()
            },
            "is the loopback",
        );
        bad(
            Rfc2544Request {
                egress: "eth2".into(),
                ..req()
            },
            "eth2 reports no link speed",
        );
        bad(
            Rfc2544Request {
                target: "-x".into(),
                ..req()
            },
            "not a host name",
        );
        bad(
            Rfc2544Request {
                target: String::new(),
                ..req()
            },
            "target",
        );
        bad(
            Rfc2544Request {
                tests: Some("latency".into()),
                ..req()
            },
            "runs at the throughput found: choose throughput too",
        );
        bad(
            Rfc2544Request {
                tests: Some("latency,throughput".into()),
                echo_port: Some("0".into()),
                ..req()
            },
            "echo port '0' is not a port number",
        );
        let p = Rfc2544Request {
            tests: Some("loss,latency,throughput".into()),
            ..req()
        }
        .plan(&ports(), None)
        .unwrap();
        assert_eq!(
            (p.tests.as_slice(), p.echo_port),
            (
                &[
                    Rfc2544Test::Throughput,
                    Rfc2544Test::Latency,
                    Rfc2544Test::Loss
                ][..],
                5291
            ),
            "run in RFC order"
        );
        bad(
            Rfc2544Request {
                tests: Some("back-to-back".into()),
                ..req()
            },
            "corrects for the throughput found: choose throughput too",
        );
        bad(
            Rfc2544Request {
                tests: Some("b2b,throughput".into()),
                direction: Some("receive".into()),
                ..req()
            },
            "direction must be send, not receive",
        );
        for (r, want) in [
            ("0", "back-to-back repeat 0 is out of range (1..50)"),
            ("51", "back-to-back repeat 51 is out of range (1..50)"),
            ("2.5", "back-to-back repeat 2.5: give a whole number"),
            ("x", "back-to-back repeat 'x' is not a number"),
        ] {
            bad(
                Rfc2544Request {
                    tests: Some("throughput,back-to-back".into()),
                    b2b_repeat: Some(r.into()),
                    ..req()
                },
                want,
            );
        }
        let p = Rfc2544Request {
            tests: Some("back-to-back,throughput".into()),
            b2b_repeat: Some("3".into()),
            ..req()
        }
        .plan(&ports(), None)
        .unwrap();
        assert_eq!(
            (p.tests.as_slice(), p.b2b_repeat),
            (&[Rfc2544Test::Throughput, Rfc2544Test::BackToBack][..], 3)
        );
        assert_eq!(req().plan(&ports(), None).unwrap().b2b_repeat, 1);
        bad(
            Rfc2544Request {
                tests: Some("speed".into()),
                ..req()
            },
            "test 'speed'",
        );
        bad(
            Rfc2544Request {
                direction: Some("up".into()),
                ..req()
            },
            "direction 'up'",
        );
        bad(
            Rfc2544Request {
                line_rate: Some("10".into()),
                ..req()
            },
            "out of range",
        );
        bad(
            Rfc2544Request {
                token: None,
                ..req()
            },
            "token is missing",
        );
        bad(
            Rfc2544Request {
                port: Some("0".into()),
                ..req()
            },
            "not a port number",
        );
        // A jumbo port pair takes jumbo frames, with a given line rate.
        let p = Rfc2544Request {
            sizes: Some("9018".into()),
            ingress: "eth2".into(),
            egress: "eth2".into(),
            ..req()
        };
        assert!(p.plan(&ports(), None).is_err());
    }
}
