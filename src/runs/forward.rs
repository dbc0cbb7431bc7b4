//! Forwarding runs and monitor-only runs (seed 000, scenario 5: PC1 → board → PC2 with NAT,
//! while watching the board).
//!
//! * A **forwarding run** (kind `forward`): the board optionally turns on forwarding with
//!   MASQUERADE between two of its ports (through the board controller, undoing afterwards only
//!   what the run itself turned on), asks a peer agent (`netperfd peer` on PC1) to run an
//!   iperf3 test to PC2 through the board, stores the agent's intervals and report as the
//!   run's, and summarises what the board saw: forwarded bits/s and packets/s per direction
//!   from its port counters, conntrack entries, CPU per core when the monitor sampled it.
//! * A **monitor-only run** (kind `monitor`): traffic that someone else starts; the board
//!   records its ports until stopped (or for a set time) and summarises mean/peak rates per
//!   port and the peak conntrack count.
//!
//! Both start through `RunContext::start` and are sampled by the 1 Hz monitor (CPU per core,
//! port counters, conntrack); the summaries prefer those samples and fall back to counter readings
//! at the start and end. Not for: the sampling itself (the monitor), the firewall rules
//! (`system::forwarding`), the iperf3 test (the agent).

use crate::board::apply::{ApplyOptions, Controller};
use crate::board::forwarding::rule_safe_name;
use crate::board::links::Counters;
use crate::board::netconfig::Change;
use crate::model::{RunFigures, RunProtocol, RunRole, RunStatus};
use crate::peer::{PeerClient, PeerTestSpec};
use crate::results::forward_params::{ForwardParams, ForwardTest, MonitorParams};
pub(crate) use crate::results::forward_summary::PortFigures;
use crate::results::forward_summary::{
    Conntrack, CoreBusy, ForwardSummary, Forwarded, ForwardedDir, MonitorSummary,
};
use crate::results::rfc2544_summary::{NatRecord, PeerRef, TargetRef};
use crate::runs::context::RunContext;
use crate::runs::recorder::{Ended, Measured, Recorder, Sampling};
use crate::store::NewRun;
use crate::store::{CpuSampleRow, PortSampleRow, SysSampleRow};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Settings key of the peer agent's token (the web form stores it; never shown back in full).
pub(crate) const TOKEN_KEY: &str = "peer.token";
/// Settings key of the last peer agent address used.
pub(crate) const URL_KEY: &str = "peer.url";
/// How long past its duration a peer test may take before the board gives up, seconds.
pub(crate) const GRACE_SECS: u64 = 45;
/// How long a running peer test may show no progress (no new interval that moved bytes)
/// before the board stops it and ends the run (and the NAT it turned on), seconds.
pub(crate) const STALL_SECS: u64 = 30;

/// The stored agent token for a run to the agent at `peer`, with `given` the token the
/// request names: `Ok(None)` when the request gives its own (or no token is stored), the
/// stored token only when `peer` is the stored agent address (same host and port) — never
/// to another address. Errors: a token is stored but `peer` is not the stored address and
/// the request gives none (the sentence names the stored address, never the token).
pub(crate) fn stored_token_for(
    store: &crate::store::Store,
    peer: &str,
    given: Option<&str>,
) -> Result<Option<String>, String> {
    if given.map(str::trim).is_some_and(|t| !t.is_empty()) {
        return Ok(None);
    }
    let Some(token) = store.setting(TOKEN_KEY).ok().flatten() else {
        return Ok(None);
    };
    let url = store.setting(URL_KEY).ok().flatten().unwrap_or_default();
    if crate::peer::client::same_agent_url(&url, peer) {
        return Ok(Some(token));
    }
    Err(format!(
        "the stored peer agent token is only sent to the stored agent address ({}): give the token for {}",
        if url.is_empty() { "none stored" } else { url.as_str() },
        peer.trim()
    ))
}

/// A forwarding run as the web form, the API and the CLI give it (strings, as forms send
/// them; the API also takes numbers and booleans).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ForwardRequest {
    /// Peer agent address, `https://HOST:PORT#sha256=FINGERPRINT` (the agent's certificate
    /// pinned) or `http://HOST:PORT` (an agent with `--plain-http`); port default 5280.
    #[serde(default)]
    pub peer: String,
    /// The agent's token; empty = the stored one.
    #[serde(default)]
    pub token: Option<String>,
    /// Host the peer tests to (PC2, running `iperf3 -s` or netperfd).
    #[serde(default)]
    pub target: String,
    /// Its iperf3 port, default 5201.
    #[serde(default)]
    pub port: Option<String>,
    /// Board port the traffic comes in on (PC1's side).
    #[serde(default)]
    pub ingress: String,
    /// Board port the traffic leaves through (PC2's side; MASQUERADE applies here).
    #[serde(default)]
    pub egress: String,
    /// Seconds, default 10.
    #[serde(default)]
    pub duration: Option<String>,
    /// Parallel streams, default 1.
    #[serde(default)]
    pub parallel: Option<String>,
    /// From PC1's view: "send" (PC1 → PC2, default), "receive" (PC2 → PC1) or "bidir".
    #[serde(default)]
    pub direction: Option<String>,
    /// "tcp" (default) or "udp".
    #[serde(default)]
    pub protocol: Option<String>,
    /// Bitrate per stream, e.g. "500M"; empty = unlimited (TCP), 1M (UDP).
    #[serde(default)]
    pub bitrate: Option<String>,
    /// Block / datagram size, e.g. "1448"; empty = iperf3's default.
    #[serde(default)]
    pub length: Option<String>,
    /// Turn on forwarding with NAT (MASQUERADE on the egress port) for the run.
    #[serde(default)]
    pub nat: Option<String>,
    /// CSRF token (forms only).
    #[serde(default)]
    pub csrf: Option<String>,
}

fn opt(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// A checkbox or boolean: on/true/1/yes.
pub(crate) fn truthy(s: &Option<String>) -> bool {
    matches!(
        opt(s).map(|v| v.to_ascii_lowercase()).as_deref(),
        Some("on" | "true" | "1" | "yes")
    )
}

/// Turn JSON numbers and booleans into strings (forms send strings; the API may not), and
/// lists of strings or numbers into comma-separated text (`[64, 1518]` → `"64,1518"`).
pub(crate) fn normalize(v: Value) -> Result<Value, String> {
    let Value::Object(m) = v else {
        return Err("expected a JSON object".into());
    };
    let mut out = serde_json::Map::new();
    for (k, v) in m {
        let v = match v {
            Value::Number(n) => Value::String(n.to_string()),
            Value::Bool(b) => Value::String(b.to_string()),
            Value::Array(a) => Value::String(
                a.iter()
                    .map(|x| match x {
                        Value::String(s) => Ok(s.clone()),
                        Value::Number(n) => Ok(n.to_string()),
                        o => Err(format!("{k}: expected a list of names or numbers, got {o}")),
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .join(","),
            ),
            other => other,
        };
        out.insert(k, v);
    }
    Ok(Value::Object(out))
}

/// A validated forwarding run.
#[derive(Debug, Clone)]
pub(crate) struct ForwardPlan {
    pub client: PeerClient,
    pub spec: PeerTestSpec,
    pub ingress: String,
    pub egress: String,
    /// Set up forwarding + MASQUERADE for the run.
    pub nat: bool,
}

impl ForwardPlan {
    /// The run's stored params: the agent's URL, its test, the two ports, NAT.
    fn params(&self) -> ForwardParams {
        ForwardParams {
            peer: Some(self.client.url()),
            test: Some(forward_test(&self.spec)),
            ingress: Some(self.ingress.clone()),
            egress: Some(self.egress.clone()),
            nat: self.nat,
        }
    }
}

/// The agent's test as stored: every field of `s` as it is (the probe request as its JSON).
fn forward_test(s: &PeerTestSpec) -> ForwardTest {
    let PeerTestSpec {
        host,
        port,
        time,
        parallel,
        reverse,
        bidir,
        udp,
        bitrate,
        length,
        probe,
        burst,
    } = s;
    ForwardTest {
        host: host.clone(),
        port: *port,
        time: *time,
        parallel: *parallel,
        reverse: *reverse,
        bidir: *bidir,
        udp: *udp,
        bitrate: *bitrate,
        length: *length,
        probe: probe.and_then(|p| serde_json::to_value(p).ok()),
        burst: *burst,
    }
}

fn check_port(name: &str, what: &str, ports: &[crate::board::Port]) -> Result<String, String> {
    let n = name.trim();
    if n.is_empty() {
        return Err(format!("choose the {what} port"));
    }
    match ports.iter().find(|p| p.name == n) {
        Some(p) if p.loopback => Err(format!("{what} port {n} is the loopback")),
        Some(_) if !rule_safe_name(n) => Err(format!("port name '{n}' cannot be used")),
        Some(_) => Ok(n.to_string()),
        None => Err(format!("the board has no port '{n}' ({what})")),
    }
}

/// The path of a forwarding run, checked: the peer agent (with its token) and two ports of
/// the board. What [`ForwardRequest::plan`] and `netperfd forward` check first; a test to run
/// along it makes the [`ForwardPlan`] ([`ForwardPath::plan`]).
#[derive(Debug, Clone)]
pub(crate) struct ForwardPath {
    pub client: PeerClient,
    pub ingress: String,
    pub egress: String,
}

impl ForwardPath {
    /// Check the agent address `peer` (with `token`, else `stored_token`) and the `ingress`
    /// and `egress` port names against the board's `ports`. Errors, in this order: no token
    /// ("the peer agent's token is missing (none stored yet)"), no address, the address or
    /// token malformed (`PeerClient::parse_remote`'s words), either port missing, the loopback
    /// or unusable in a rule, both the same port.
    pub(crate) fn check(
        peer: &str,
        token: Option<&str>,
        stored_token: Option<&str>,
        ingress: &str,
        egress: &str,
        ports: &[crate::board::Port],
    ) -> Result<ForwardPath, String> {
        let token = match token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .or(stored_token)
        {
            Some(t) => t.to_string(),
            None => return Err("the peer agent's token is missing (none stored yet)".into()),
        };
        if peer.trim().is_empty() {
            return Err(
                "the peer agent address is missing (https://PC1:5280#sha256=…, as `netperfd peer` prints it)"
                    .into(),
            );
        }
        let client = PeerClient::parse_remote(peer, &token)?;
        let ingress = check_port(ingress, "ingress", ports)?;
        let egress = check_port(egress, "egress", ports)?;
        if ingress == egress {
            return Err(format!(
                "ingress and egress must be two different ports (both are {ingress})"
            ));
        }
        Ok(ForwardPath {
            client,
            ingress,
            egress,
        })
    }

    /// The run of `test` along this path (its host is PC2, the target), with forwarding and
    /// NAT turned on for the run when `nat`. Errors: the target is not a host name or
    /// address ("target 'a b' is not a host name or IP address"), else the test's own range
    /// errors ([`TestSpec::to_client_spec`](crate::spec::test::TestSpec::to_client_spec)).
    pub(crate) fn plan(
        self,
        test: &crate::spec::test::TestSpec,
        nat: bool,
    ) -> Result<ForwardPlan, String> {
        let host = test.host.trim();
        if !crate::model::names::valid_host(host) {
            return Err(format!("target '{host}' is not a host name or IP address"));
        }
        test.to_client_spec(&[])?;
        let spec = PeerTestSpec::of_test(test);
        spec.to_client_spec()?;
        Ok(ForwardPlan {
            client: self.client,
            spec,
            ingress: self.ingress,
            egress: self.egress,
            nat,
        })
    }
}

impl ForwardRequest {
    /// Validate against the board's ports; `stored_token` is used when no token is given:
    /// [`ForwardPath::check`], the test's fields read ([`TestRequest::parse`]
    /// (crate::spec::test::TestRequest::parse)), then [`ForwardPath::plan`].
    pub(crate) fn plan(
        &self,
        ports: &[crate::board::Port],
        stored_token: Option<&str>,
    ) -> Result<ForwardPlan, String> {
        let path = ForwardPath::check(
            &self.peer,
            self.token.as_deref(),
            stored_token,
            &self.ingress,
            &self.egress,
            ports,
        )?;
        let test = crate::spec::test::TestRequest {
            host: self.target.clone(),
            protocol: self.protocol.clone(),
            length: self.length.clone(),
            port: self.port.clone(),
            duration: self.duration.clone(),
            parallel: self.parallel.clone(),
            direction: self.direction.clone(),
            bitrate: self.bitrate.clone(),
            ..Default::default()
        }
        .parse()?;
        path.plan(&test, truthy(&self.nat))
    }
}

/// Read the counters of `ports` (netlink, this process's network namespace); ports that are
/// missing are left out.
pub(crate) async fn read_counters(ports: &[String]) -> BTreeMap<String, Counters> {
    match crate::board::links::inventory().await {
        Ok(links) => links
            .into_iter()
            .filter(|l| ports.contains(&l.name))
            .map(|l| (l.name, l.counters))
            .collect(),
        Err(e) => {
            tracing::warn!("cannot read port counters: {e}");
            BTreeMap::new()
        }
    }
}

/// Figures per port from two counter readings `seconds` apart (a counter that went backwards —
/// the port was re-created — counts 0).
pub(crate) fn figures_from_counters(
    start: &BTreeMap<String, Counters>,
    end: &BTreeMap<String, Counters>,
    seconds: f64,
) -> BTreeMap<String, PortFigures> {
    let d = |a: u64, b: u64| b.saturating_sub(a);
    start
        .iter()
        .filter_map(|(name, a)| {
            let b = end.get(name)?;
            let mut f = PortFigures {
                rx_bytes: d(a.rx_bytes, b.rx_bytes),
                tx_bytes: d(a.tx_bytes, b.tx_bytes),
                rx_packets: d(a.rx_packets, b.rx_packets),
                tx_packets: d(a.tx_packets, b.tx_packets),
                rx_dropped: d(a.rx_dropped, b.rx_dropped),
                tx_dropped: d(a.tx_dropped, b.tx_dropped),
                rx_errors: d(a.rx_errors, b.rx_errors),
                tx_errors: d(a.tx_errors, b.tx_errors),
                seconds,
                ..Default::default()
            };
            f.fill_rates();
            Some((name.clone(), f))
        })
        .collect()
}

/// Figures per port from the monitor's samples: sums of the deltas, mean over the sampled
/// seconds, and the peak 1 s rates. Ports without samples are absent.
pub(crate) fn figures_from_samples(samples: &[PortSampleRow]) -> BTreeMap<String, PortFigures> {
    let mut out: BTreeMap<String, PortFigures> = BTreeMap::new();
    let c = |v: i64| v.max(0) as u64;
    let mx = |a: Option<f64>, b: f64| Some(a.map_or(b, |a| a.max(b)));
    for s in samples {
        let f = out.entry(s.ifname.clone()).or_default();
        f.rx_bytes += c(s.rx_bytes);
        f.tx_bytes += c(s.tx_bytes);
        f.rx_packets += c(s.rx_packets);
        f.tx_packets += c(s.tx_packets);
        f.rx_dropped += c(s.rx_dropped);
        f.tx_dropped += c(s.tx_dropped);
        f.rx_errors += c(s.rx_errors);
        f.tx_errors += c(s.tx_errors);
        f.seconds += s.seconds.max(0.0);
        f.peak_rx_bits_per_second = mx(f.peak_rx_bits_per_second, s.rx_bps());
        f.peak_tx_bits_per_second = mx(f.peak_tx_bits_per_second, s.tx_bps());
        f.peak_rx_packets_per_second = mx(f.peak_rx_packets_per_second, s.rx_pps());
        f.peak_tx_packets_per_second = mx(f.peak_tx_packets_per_second, s.tx_pps());
    }
    for f in out.values_mut() {
        f.fill_rates();
    }
    out
}

/// Conntrack figures: the peak and last count over the monitor's samples and the readings
/// the run took itself (at its start, each second of a forwarding run, at its end). `null`
/// `None` (stored `null`) when the kernel has no conntrack.
pub(crate) fn conntrack_summary(sys: &[SysSampleRow], own: &[i64]) -> Option<Conntrack> {
    let sampled: Vec<i64> = sys.iter().filter_map(|s| s.conntrack).collect();
    let peak = *sampled.iter().chain(own).max()?;
    Some(Conntrack {
        peak,
        samples: sampled.len(),
        start: own.first().copied(),
        end: own.last().copied(),
    })
}

/// CPU per core from the monitor's samples: mean and peak busy % (100 − idle − iowait) per
/// core, by core; `None` (stored `null`) without samples.
pub(crate) fn cpu_summary(cpu: &[CpuSampleRow]) -> Option<Vec<CoreBusy>> {
    let mut per: BTreeMap<i32, (f64, f64, usize)> = BTreeMap::new();
    for s in cpu {
        let e = per.entry(s.cpu).or_insert((0.0, 0.0, 0));
        e.0 += s.busy();
        e.1 = e.1.max(s.busy());
        e.2 += 1;
    }
    if per.is_empty() {
        return None;
    }
    Some(
        per.into_iter()
            .map(|(cpu, (sum, peak, n))| CoreBusy {
                cpu,
                mean_busy_percent: sum / n as f64,
                peak_busy_percent: peak,
            })
            .collect(),
    )
}

/// The port figures of a run: totals and means from the run's own counter readings at its
/// start and end (exact: the monitor's 1 s samples miss the part of a second before the run
/// ends), peaks from the monitor's samples (never below the mean). Without own readings (netlink failed), the samples'
/// figures. Returns the figures and where they came from.
fn port_figures(
    ctx: &RunContext,
    id: i64,
    own: BTreeMap<String, PortFigures>,
) -> (BTreeMap<String, PortFigures>, &'static str) {
    let samples = ctx.store().port_samples(id).unwrap_or_default();
    merge_figures(own, figures_from_samples(&samples))
}

/// [`port_figures`] from the run's own counter figures and the samples' figures.
fn merge_figures(
    own: BTreeMap<String, PortFigures>,
    from: BTreeMap<String, PortFigures>,
) -> (BTreeMap<String, PortFigures>, &'static str) {
    if own.is_empty() {
        return (from, "samples");
    }
    if from.is_empty() {
        return (own, "counters");
    }
    let mut out = own;
    for (name, f) in out.iter_mut() {
        if let Some(s) = from.get(name) {
            // The busiest second is never below the mean: 1 s samples that straddle the run's
            // start and end can all fall short of it (seen: 1 % below with both cores busy).
            let at_least = |p: Option<f64>, mean: f64| p.map(|p| p.max(mean));
            f.peak_rx_bits_per_second = at_least(s.peak_rx_bits_per_second, f.rx_bits_per_second);
            f.peak_tx_bits_per_second = at_least(s.peak_tx_bits_per_second, f.tx_bits_per_second);
            f.peak_rx_packets_per_second =
                at_least(s.peak_rx_packets_per_second, f.rx_packets_per_second);
            f.peak_tx_packets_per_second =
                at_least(s.peak_tx_packets_per_second, f.tx_packets_per_second);
        }
    }
    (out, "counters, peaks from samples")
}

/// What a forwarding run changed on the board, to undo at its end (kept in the run's summary
/// while it runs, so a daemon that restarts after a crash can undo it too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Undo {
    /// Nothing (forwarding with NAT was on already, or not asked for).
    Nothing,
    /// Disable the forward the run enabled.
    Disable,
    /// Put back the forward that was there (without NAT).
    Restore(crate::board::forwarding::Forward),
}

fn apply_options(id: i64) -> ApplyOptions {
    ApplyOptions {
        confirm_within: None,
        unchecked: true,
        force: true,
        mgmt: None,
        source: format!("forward run {id}"),
    }
}

/// Turn on forwarding with NAT from `ingress` to `egress` for run `id` (through the board
/// controller); what to undo afterwards (nothing when it was on already). Errors: the
/// controller's, in words.
pub(crate) async fn enable_forwarding(
    ctl: &Arc<Controller>,
    id: i64,
    ingress: &str,
    egress: &str,
) -> Result<Undo, String> {
    let view = ctl
        .view()
        .await
        .map_err(|e| format!("cannot read the board: {e}"))?;
    let existing = view
        .forwarding
        .forwards
        .iter()
        .find(|f| f.ingress == ingress && f.egress == egress)
        .cloned();
    let (undo, ipv6) = match existing {
        Some(f) if f.nat && view.forwarding.ipv4_forwarding => return Ok(Undo::Nothing),
        Some(f) => (Undo::Restore(f.clone()), f.ipv6),
        None => (Undo::Disable, false),
    };
    let change = Change::ForwardEnable {
        ingress: ingress.into(),
        egress: egress.into(),
        nat: true,
        ipv6,
    };
    ctl.apply(std::slice::from_ref(&change), &apply_options(id))
        .await
        .map_err(|e| format!("cannot turn on forwarding {ingress} → {egress} with NAT: {e}"))?;
    Ok(undo)
}

/// Undo what [`enable_forwarding`] turned on for run `id`. Errors: the controller's, in words.
pub(crate) async fn undo_forwarding(
    ctl: &Arc<Controller>,
    id: i64,
    ingress: &str,
    egress: &str,
    undo: &Undo,
) -> Result<(), String> {
    let change = match undo {
        Undo::Nothing => return Ok(()),
        Undo::Disable => Change::ForwardDisable {
            ingress: ingress.into(),
            egress: egress.into(),
        },
        Undo::Restore(f) => Change::ForwardEnable {
            ingress: f.ingress.clone(),
            egress: f.egress.clone(),
            nat: f.nat,
            ipv6: f.ipv6,
        },
    };
    ctl.apply(std::slice::from_ref(&change), &apply_options(id))
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot restore forwarding {ingress} → {egress}: {e}"))
}

/// Forwarding runs still marked running (left by a process that stopped mid-run) that had
/// turned on forwarding: their ids, ports and what to undo. Call before
/// `Store::abort_stale_runs`.
pub(crate) fn stale_forwarding(store: &crate::store::Store) -> Vec<(i64, String, String, Undo)> {
    let runs = store
        .list_runs(&crate::store::RunFilter {
            status: Some("running".into()),
            limit: Some(1000),
            ..Default::default()
        })
        .unwrap_or_default();
    runs.into_iter()
        .filter(|r| r.kind.may_enable_forwarding())
        .filter_map(|r| {
            let s = ForwardSummary::of_summary(&r.summary);
            let undo: Undo = serde_json::from_value(s.nat.undo?).ok()?;
            let known = !s.ingress.is_empty() && !s.egress.is_empty();
            (known && undo != Undo::Nothing).then_some((r.id, s.ingress, s.egress, undo))
        })
        .collect()
}

/// Undo what stale forwarding runs (see [`stale_forwarding`]) had turned on, with the
/// process's board controller; failures are logged. The board is changed even when the store
/// cannot be written (e.g. a full disk: the controller changes the rules, then fails to keep
/// the new configuration); those entries, and any the board refused, are returned, to be
/// tried again once the store can write (the rules are then already as they should be).
pub(crate) async fn undo_stale(
    ctl: &Arc<Controller>,
    stale: Vec<(i64, String, String, Undo)>,
) -> Vec<(i64, String, String, Undo)> {
    let mut again = Vec::new();
    for (id, i, e, undo) in stale {
        match undo_forwarding(ctl, id, &i, &e, &undo).await {
            Ok(()) => tracing::warn!(
                run = id,
                "forwarding {i} → {e} turned on by run {id}, which was cut short, is restored"
            ),
            Err(err) => {
                if undone_on_board(ctl, &i, &e, &undo).await {
                    tracing::warn!(
                        run = id,
                        "forwarding {i} → {e} turned on by run {id}, which was cut short, is restored on the board, but not yet in the stored configuration ({err}); tried again once the store can write"
                    );
                } else {
                    tracing::error!(run = id, "{err}");
                }
                again.push((id, i, e, undo));
            }
        }
    }
    again
}

/// Whether the board's forwarding is as `undo` leaves it for `ingress` → `egress` (false
/// when the board cannot be read).
async fn undone_on_board(ctl: &Arc<Controller>, ingress: &str, egress: &str, undo: &Undo) -> bool {
    let Ok(v) = ctl.view().await else {
        return false;
    };
    let now = v
        .forwarding
        .forwards
        .iter()
        .find(|f| f.ingress == ingress && f.egress == egress);
    match undo {
        Undo::Nothing => true,
        Undo::Disable => now.is_none(),
        Undo::Restore(f) => now.is_some_and(|n| n.nat == f.nat),
    }
}

/// Try again what [`undo_stale`] could not finish: undo on the board what is still on, and
/// store the board's forwarding as it is now. Errors: what is still not done, and why (e.g.
/// the store's "database or disk is full").
pub(crate) async fn retry_stale(
    ctl: &Arc<Controller>,
    again: Vec<(i64, String, String, Undo)>,
) -> Result<(), (Vec<(i64, String, String, Undo)>, String)> {
    if again.is_empty() {
        return Ok(());
    }
    let mut left = Vec::new();
    for (id, i, e, undo) in again {
        if !undone_on_board(ctl, &i, &e, &undo).await {
            if let Err(err) = undo_forwarding(ctl, id, &i, &e, &undo).await {
                tracing::warn!(run = id, "{err}");
            }
        }
        left.push((id, i, e, undo));
    }
    match ctl.store_live_forwarding().await {
        Ok(()) => {
            let mut all = true;
            for (_, i, e, undo) in &left {
                all &= undone_on_board(ctl, i, e, undo).await;
            }
            if all {
                tracing::info!("the forwarding of runs cut short is undone and stored");
                return Ok(());
            }
            Err((left, "the board still forwards for a run cut short".into()))
        }
        Err(e) => Err((left, e.to_string())),
    }
}

/// Record and start a forwarding run; returns its id at once and a handle that resolves when
/// it has ended. `ctl` changes the board when the plan asks for NAT.
pub(crate) fn start_forward(
    ctx: &RunContext,
    ctl: Option<Arc<Controller>>,
    plan: ForwardPlan,
) -> Result<crate::runs::context::Started, String> {
    if plan.nat && ctl.is_none() {
        return Err("no board controller to set up forwarding with".into());
    }
    let params = plan.params().to_value();
    let cancel = Arc::new(Notify::new());
    ctx.start(
        &NewRun {
            role: RunRole::Client,
            protocol: if plan.spec.udp {
                RunProtocol::Udp
            } else {
                RunProtocol::Tcp
            },
            peer_host: plan.spec.host.clone(),
            peer_port: plan.spec.port.unwrap_or(5201),
            local_host: String::new(),
            local_port: 0,
            bind_dev: Some(format!("{},{}", plan.ingress, plan.egress)),
            direction: plan.spec.run_direction(),
            params,
            kind: crate::model::RunKind::Forward,
            ..Default::default()
        },
        Sampling::Ports(vec![plan.ingress.clone(), plan.egress.clone()]),
        Some(cancel.clone()),
        move |ctx, rec| async move {
            let (status, summary, report, error) =
                forward_task(&ctx, rec.id(), &plan, ctl, cancel, &rec).await;
            Ended {
                status,
                measured: Measured::Report(report),
                summary: Some(summary.to_value()),
                error,
            }
        },
    )
}

type Outcome = (
    RunStatus,
    ForwardSummary,
    Option<Box<crate::engine::report::Report>>,
    Option<String>,
);

async fn forward_task(
    ctx: &RunContext,
    id: i64,
    plan: &ForwardPlan,
    ctl: Option<Arc<Controller>>,
    cancel: Arc<Notify>,
    rec: &Recorder,
) -> Outcome {
    let ports = vec![plan.ingress.clone(), plan.egress.clone()];
    let mut summary = ForwardSummary {
        peer: PeerRef {
            url: plan.client.url(),
            info: None,
        },
        target: TargetRef {
            host: plan.spec.host.clone(),
            port: plan.spec.port.unwrap_or(5201),
        },
        ingress: plan.ingress.clone(),
        egress: plan.egress.clone(),
        nat: NatRecord {
            requested: plan.nat,
            ..Default::default()
        },
        ..Default::default()
    };
    let fail = |mut s: ForwardSummary, msg: String| -> Outcome {
        s.error = Some(msg.clone());
        (RunStatus::Failed, s, None, Some(msg))
    };
    // 1. The agent answers and takes the token (nothing on the board changes before).
    match plan.client.info().await {
        Ok(info) => summary.peer.info = Some(json!(info)),
        Err(e) => return fail(summary, e.message),
    }
    // 2. Forwarding with NAT, if asked for.
    let mut undo = Undo::Nothing;
    if plan.nat {
        let Some(c) = &ctl else {
            return fail(summary, "no board controller".into());
        };
        match enable_forwarding(c, id, &plan.ingress, &plan.egress).await {
            Ok(u) => {
                summary.nat.enabled_by_run = Some(u != Undo::Nothing);
                summary.nat.undo = Some(json!(u));
                if let Err(e) = ctx.store().set_run_summary(id, &summary.to_value()) {
                    tracing::warn!(run = id, "cannot store what to undo: {e}");
                }
                undo = u;
            }
            Err(e) => return fail(summary, e),
        }
    }
    // 3. The test.
    let c0 = read_counters(&ports).await;
    let mut conntrack: Vec<i64> = crate::board::sampler::conntrack_count()
        .into_iter()
        .collect();
    let t0 = Instant::now();
    let res = run_peer_test(plan, &cancel, rec, &mut conntrack).await;
    let wall = t0.elapsed().as_secs_f64();
    let c1 = read_counters(&ports).await;
    conntrack.extend(crate::board::sampler::conntrack_count());
    // 4. Undo what the run turned on.
    let mut restore_error = None;
    if let Some(c) = &ctl {
        if let Err(e) = undo_forwarding(c, id, &plan.ingress, &plan.egress, &undo).await {
            tracing::error!(run = id, "{e}");
            restore_error = Some(e);
        }
    }
    if plan.nat {
        summary.nat.restored = Some(restore_error.is_none());
    }
    // 5. Figures.
    let (status, job_error, report, iperf3) = match res {
        Ok(v) => (v.status, v.error, v.report, v.iperf3),
        Err((status, e)) => (status, Some(e), None, None),
    };
    let job_error = match job_error {
        Some(e) => Some(
            explain_agent_error(
                e,
                &plan.client.url(),
                &plan.spec.host,
                &plan.ingress,
                &plan.egress,
                plan.nat,
            )
            .await,
        ),
        None => None,
    };
    // The seconds the traffic flowed: the peer's measured test time when known.
    let secs = report
        .as_ref()
        .and_then(|r| {
            r.streams
                .iter()
                .map(|s| s.sender.seconds)
                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))))
        })
        .filter(|s| *s > 0.0)
        .unwrap_or(wall);
    let own = figures_from_counters(&c0, &c1, secs);
    let (figs, source) = port_figures(ctx, id, own);
    summary.seconds = Some(secs);
    summary.wall_seconds = Some(wall);
    summary.port_source = Some(source.to_string());
    summary.forwarded = Some(forwarded(&figs, &plan.ingress, &plan.egress));
    summary.ports = Some(figs);
    summary.conntrack = Some(conntrack_summary(
        &ctx.store().sys_samples(id).unwrap_or_default(),
        &conntrack,
    ));
    summary.cpu = Some(cpu_summary(
        &ctx.store().cpu_samples(id).unwrap_or_default(),
    ));
    summary.peer_report = Some(iperf3.unwrap_or(Value::Null));
    let mut error = job_error;
    let mut status = status;
    if let Some(e) = restore_error {
        error = Some(match error {
            Some(m) => format!("{m}; {e}"),
            None => e,
        });
        if status == RunStatus::Completed {
            status = RunStatus::Failed;
        }
    }
    summary.error.clone_from(&error);
    (status, summary, report, error)
}

/// The host of an agent URL (`http://192.0.2.2:5280` → `192.0.2.2`, brackets of IPv6 off).
fn url_host(url: &str) -> &str {
    let url = url.split('#').next().unwrap_or(url);
    let rest = url.split("://").nth(1).unwrap_or(url);
    let hostport = rest.split('/').next().unwrap_or(rest);
    match hostport.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => hostport.rsplit_once(':').map_or(hostport, |(h, _)| h),
    }
}

/// When the agent's error `msg` says "Network is unreachable" (PC1's kernel found no route,
/// ENETUNREACH), the error said plainly: it came from PC1, not the board, and the routes the
/// PCs need through the board — `ip route add <PC2's network> via <the board's address on
/// PC1's port>` on PC1 (and the way back on PC2 unless the run masquerades). `agent` is PC1's
/// address (the agent URL's host), `target` PC2's; `ingress` and `egress` the board's
/// addresses on PC1's and PC2's ports. `None` for any other error.
pub(crate) fn route_hint(
    msg: &str,
    agent: &str,
    target: &str,
    ingress: &[crate::board::links::IfAddr],
    egress: &[crate::board::links::IfAddr],
    nat: bool,
) -> Option<String> {
    if !msg.to_ascii_lowercase().contains("network is unreachable") {
        return None;
    }
    let agent_ip: Option<std::net::IpAddr> = agent.parse().ok();
    let target_ip: Option<std::net::IpAddr> = target.parse().ok();
    // The board's address on a port: the one in the subnet of `ip`, else the port's first of
    // the same family.
    let on_port = |addrs: &[crate::board::links::IfAddr], ip: Option<std::net::IpAddr>| {
        let fam = |a: &&crate::board::links::IfAddr| {
            ip.is_none_or(|i| a.addr.is_ipv4() == i.is_ipv4()) && !a.is_link_local()
        };
        ip.and_then(|i| addrs.iter().find(|a| a.contains(i)))
            .or_else(|| addrs.iter().find(fam))
            .cloned()
    };
    let via = on_port(ingress, agent_ip);
    let back = on_port(egress, target_ip);
    let net = |a: &Option<crate::board::links::IfAddr>,
               ip: Option<std::net::IpAddr>,
               host: &str| match (a, ip) {
        (Some(a), Some(i)) if a.contains(i) => a.network_string(),
        (_, Some(std::net::IpAddr::V6(_))) => format!("{host}/128"),
        _ => format!("{host}/32"),
    };
    let via_text = via.as_ref().map_or_else(
        || "<the board's address on PC1's port>".to_string(),
        |a| a.addr.to_string(),
    );
    let mut out = format!(
        "{msg} — this error came from PC1 (the peer agent at {agent}), not from the board: PC1 has no route to {target}. Add one through the board on PC1: ip route add {} via {via_text}",
        net(&back, target_ip, target)
    );
    if !nat {
        if let Some(b) = &back {
            out.push_str(&format!(
                "; and the way back on PC2: ip route add {} via {}",
                net(&via, agent_ip, agent),
                b.addr
            ));
        }
    }
    Some(out)
}

/// [`route_hint`] with the board's addresses on `ingress` and `egress` read now; `msg` as it
/// is for any other error (or when the ports cannot be read).
pub(crate) async fn explain_agent_error(
    msg: String,
    agent_url: &str,
    target: &str,
    ingress: &str,
    egress: &str,
    nat: bool,
) -> String {
    if !msg.to_ascii_lowercase().contains("network is unreachable") {
        return msg;
    }
    let links = crate::board::links::inventory().await.unwrap_or_default();
    let addrs = |port: &str| -> Vec<crate::board::links::IfAddr> {
        links
            .iter()
            .find(|l| l.name == port)
            .map(|l| l.addresses.iter().map(|a| a.address).collect())
            .unwrap_or_default()
    };
    route_hint(
        &msg,
        url_host(agent_url),
        target,
        &addrs(ingress),
        &addrs(egress),
        nat,
    )
    .unwrap_or(msg)
}

/// Forwarded traffic per direction: into `ingress` and out of `egress` (PC1 → PC2), and back.
/// Bits/s and packets/s of the egress transmit (what left the board) and of the ingress
/// receive. `None` (stored `null`) when a port's figures are missing.
pub(crate) fn forwarded(
    figs: &BTreeMap<String, PortFigures>,
    ingress: &str,
    egress: &str,
) -> Option<Forwarded> {
    let (i, e) = (figs.get(ingress)?, figs.get(egress)?);
    let dir = |rx: &PortFigures, tx: &PortFigures| ForwardedDir {
        bytes: tx.tx_bytes,
        packets: tx.tx_packets,
        bits_per_second: tx.tx_bits_per_second,
        packets_per_second: tx.tx_packets_per_second,
        received_bytes: rx.rx_bytes,
        received_bits_per_second: rx.rx_bits_per_second,
        received_packets_per_second: rx.rx_packets_per_second,
        peak_bits_per_second: tx.peak_tx_bits_per_second,
        peak_packets_per_second: tx.peak_tx_packets_per_second,
    };
    Some(Forwarded(vec![
        (format!("{ingress}->{egress}"), dir(i, e)),
        (format!("{egress}->{ingress}"), dir(e, i)),
    ]))
}

/// Run the test on the agent, turning its intervals into this run's; the agent's final view,
/// or the status and message it ended with.
async fn run_peer_test(
    plan: &ForwardPlan,
    cancel: &Notify,
    recorder: &Recorder,
    conntrack: &mut Vec<i64>,
) -> Result<crate::peer::agent::JobView, (RunStatus, String)> {
    run_peer_job(&plan.client, &plan.spec, cancel, |intervals| {
        conntrack.extend(crate::board::sampler::conntrack_count());
        for r in intervals {
            recorder.interval(r);
        }
    })
    .await
}

/// Run `spec` on the peer agent `client` and poll it once a second until it ends, giving each
/// poll's new intervals to `each_poll` (called every second, possibly with none); `cancel`
/// stops the agent's test. The agent's final view (its report completed with the intervals
/// the polls brought, and iperf3's document made from it, when the agent sent a lean view),
/// or the status and message it ended with (the agent refused the test, lost for 5 polls in
/// a row, no progress for [`STALL_SECS`], or still running [`GRACE_SECS`] past its
/// duration). Each poll's answer is capped ([`crate::peer::client::poll_cap`]).
pub(crate) async fn run_peer_job(
    client: &PeerClient,
    spec: &PeerTestSpec,
    cancel: &Notify,
    mut each_poll: impl FnMut(Vec<crate::engine::report::IntervalRecord>),
) -> Result<crate::peer::agent::JobView, (RunStatus, String)> {
    run_peer_job_with(
        client,
        spec,
        cancel,
        Duration::from_secs(STALL_SECS),
        &mut each_poll,
    )
    .await
}

/// Whether `fresh` intervals show progress: one of them moved bytes.
fn progress(fresh: &[crate::engine::report::IntervalRecord]) -> bool {
    fresh.iter().any(|i| i.streams.iter().any(|s| s.bytes > 0))
}

/// [`run_peer_job`] with the no-progress limit `stall`.
async fn run_peer_job_with(
    client: &PeerClient,
    spec: &PeerTestSpec,
    cancel: &Notify,
    stall: Duration,
    each_poll: &mut impl FnMut(Vec<crate::engine::report::IntervalRecord>),
) -> Result<crate::peer::agent::JobView, (RunStatus, String)> {
    let job = client
        .start(spec)
        .await
        .map_err(|e| (RunStatus::Failed, e.message))?;
    let limit = Duration::from_secs(u64::from(spec.time.unwrap_or(10)) + GRACE_SECS);
    let cap = crate::peer::client::poll_cap(spec);
    let t0 = Instant::now();
    let mut bound = super::intake::IntervalBound::new(spec.parallel, spec.bidir);
    let mut last_progress = Instant::now();
    let mut all: Vec<crate::engine::report::IntervalRecord> = Vec::new();
    let (mut since, mut errors, mut stopping) = (0usize, 0u32, false);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = cancel.notified(), if !stopping => {
                stopping = true;
                let _ = client.stop(job).await;
            }
        }
        match client.poll(job, since, cap).await {
            Ok(mut v) => {
                errors = 0;
                let mut fresh = Vec::new();
                if v.first == since {
                    // The agent's count moves on by what it sent; what is kept is
                    // bounded by elapsed time × streams (a flood is cut, not stored).
                    let got = std::mem::take(&mut v.intervals);
                    since = v.first.saturating_add(got.len());
                    fresh = bound.accept(got);
                }
                if progress(&fresh) {
                    last_progress = Instant::now();
                }
                all.extend(fresh.iter().cloned());
                each_poll(fresh);
                // A lean view brings at most a few intervals: poll on until all are in.
                if v.status != RunStatus::Running && since >= v.next {
                    complete_view(&mut v, all);
                    return Ok(v);
                }
                if v.status != RunStatus::Running && last_progress.elapsed() > stall {
                    // Ended, but the intervals it counts never come: what came is the run's.
                    complete_view(&mut v, all);
                    return Ok(v);
                }
                if last_progress.elapsed() > stall {
                    let _ = client.stop(job).await;
                    return Err((
                        RunStatus::Failed,
                        format!(
                            "the peer test showed no progress for {} s (no interval that moved bytes): stopped",
                            stall.as_secs()
                        ),
                    ));
                }
            }
            Err(e) if e.unauthorized => return Err((RunStatus::Failed, e.message)),
            Err(e) => {
                each_poll(Vec::new());
                errors += 1;
                if errors >= 5 {
                    return Err((RunStatus::Failed, format!("lost the peer agent: {e}")));
                }
            }
        }
        if t0.elapsed() > limit || (errors > 0 && last_progress.elapsed() > stall) {
            let _ = client.stop(job).await;
            if t0.elapsed() <= limit {
                return Err((
                    RunStatus::Failed,
                    format!(
                        "the peer test showed no progress for {} s (the agent did not answer): stopped",
                        stall.as_secs()
                    ),
                ));
            }
            return Err((
                RunStatus::Failed,
                format!(
                    "the peer test did not end within {} s of its duration",
                    GRACE_SECS
                ),
            ));
        }
    }
}

/// Complete an agent's final lean view: its report's intervals are the ones the polls brought
/// (`all`), and iperf3's document is made from the report as the agent would have.
fn complete_view(
    v: &mut crate::peer::agent::JobView,
    all: Vec<crate::engine::report::IntervalRecord>,
) {
    if let Some(r) = v.report.as_deref_mut() {
        if r.intervals.is_empty() {
            r.intervals = all;
        }
    }
    if v.iperf3.is_none() {
        v.iperf3 = v
            .report
            .as_deref()
            .map(crate::engine::report::to_iperf3_json);
    }
}

/// A monitor-only run as the web form, the API and the CLI give it.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct MonitorRequest {
    /// Ports to watch, comma-separated (the API also takes a list).
    #[serde(default)]
    pub ports: String,
    /// What is being watched, free text (at most 100 characters).
    #[serde(default)]
    pub label: Option<String>,
    /// Seconds to record; empty = until stopped (at most 86400).
    #[serde(default)]
    pub duration: Option<String>,
    /// CSRF token (forms only).
    #[serde(default)]
    pub csrf: Option<String>,
}

/// A validated monitor-only run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MonitorPlan {
    pub ports: Vec<String>,
    pub label: String,
    /// None = until stopped.
    pub seconds: Option<u32>,
}

impl MonitorPlan {
    /// The run's stored params: the ports watched, the label, the length (s).
    fn params(&self) -> MonitorParams {
        MonitorParams {
            ports: self.ports.clone(),
            label: self.label.clone(),
            duration: self.seconds,
        }
    }
}

/// Longest monitor-only run with a set duration, s (a day).
pub(crate) const MONITOR_MAX_S: u32 = 86_400;

impl MonitorPlan {
    /// A monitor-only run of the comma-separated port names `watched` (checked against the
    /// board's `ports`; blanks and repeats dropped), labelled `label` (blank = none), for
    /// `seconds` (`None` = until stopped). Errors: a port missing, the loopback or unusable
    /// ("the board has no port 'eth9' (watched)"), none or more than 16 ports, a label over
    /// 100 characters or on more than one line, `seconds` outside 1..=[`MONITOR_MAX_S`]
    /// ("duration must be 1..86400 s, got '0'").
    pub(crate) fn new(
        watched: &str,
        label: Option<&str>,
        seconds: Option<u32>,
        ports: &[crate::board::Port],
    ) -> Result<MonitorPlan, String> {
        let mut names = Vec::new();
        for n in watched.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let n = check_port(n, "watched", ports)?;
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if names.is_empty() {
            return Err("choose at least one port to watch".into());
        }
        if names.len() > 16 {
            return Err("at most 16 ports can be watched at once".into());
        }
        let label = label.map(str::trim).unwrap_or_default().to_string();
        if label.chars().count() > 100 || label.chars().any(char::is_control) {
            return Err("the label must be at most 100 characters on one line".into());
        }
        if let Some(s) = seconds.filter(|s| !(1..=MONITOR_MAX_S).contains(s)) {
            return Err(monitor_seconds_error(&s.to_string()));
        }
        Ok(MonitorPlan {
            ports: names,
            label,
            seconds,
        })
    }
}

fn monitor_seconds_error(d: &str) -> String {
    format!("duration must be 1..{MONITOR_MAX_S} s, got '{d}'")
}

impl MonitorRequest {
    /// Validate against the board's ports ([`MonitorPlan::new`], the duration read from its
    /// text).
    pub(crate) fn plan(&self, ports: &[crate::board::Port]) -> Result<MonitorPlan, String> {
        let plan = MonitorPlan::new(&self.ports, opt(&self.label), None, ports)?;
        let seconds = match opt(&self.duration) {
            None => None,
            Some(d) => Some(
                d.parse::<u32>()
                    .ok()
                    .filter(|s| (1..=MONITOR_MAX_S).contains(s))
                    .ok_or_else(|| monitor_seconds_error(d))?,
            ),
        };
        Ok(MonitorPlan { seconds, ..plan })
    }
}

/// Record and start a monitor-only run; it ends when stopped (`RunRegistry::stop`) or after its
/// duration. Returns its id and a handle that resolves when it has ended.
pub(crate) fn start_monitor(
    ctx: &RunContext,
    plan: MonitorPlan,
) -> Result<crate::runs::context::Started, String> {
    let cancel = Arc::new(Notify::new());
    ctx.start(
        &NewRun {
            role: RunRole::Client,
            protocol: RunProtocol::Unset,
            peer_host: plan.label.clone(),
            bind_dev: Some(plan.ports.join(",")),
            params: plan.params().to_value(),
            kind: crate::model::RunKind::Monitor,
            ..Default::default()
        },
        Sampling::Ports(plan.ports.clone()),
        Some(cancel.clone()),
        move |ctx, rec| async move {
            let id = rec.id();
            let c0 = read_counters(&plan.ports).await;
            let mut conntrack: Vec<i64> = crate::board::sampler::conntrack_count()
                .into_iter()
                .collect();
            let t0 = Instant::now();
            let until = async {
                match plan.seconds {
                    Some(s) => tokio::time::sleep(Duration::from_secs(u64::from(s))).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = until => {}
                _ = cancel.notified() => {}
            }
            let secs = t0.elapsed().as_secs_f64();
            let c1 = read_counters(&plan.ports).await;
            conntrack.extend(crate::board::sampler::conntrack_count());
            let own = figures_from_counters(&c0, &c1, secs);
            let (figs, source) = port_figures(&ctx, id, own);
            let summary = MonitorSummary {
                label: plan.label.clone(),
                seconds: secs,
                port_source: source.to_string(),
                ports: figs,
                conntrack: conntrack_summary(
                    &ctx.store().sys_samples(id).unwrap_or_default(),
                    &conntrack,
                ),
                cpu: cpu_summary(&ctx.store().cpu_samples(id).unwrap_or_default()),
            };
            Ended {
                status: RunStatus::Completed,
                measured: Measured::Figures(RunFigures::default()),
                summary: Some(summary.to_value()),
                error: None,
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_s_peak_second_is_never_below_its_mean() {
        let own = |tx: f64| PortFigures {
            tx_bits_per_second: tx,
            tx_packets_per_second: tx / 12_000.0,
            seconds: 3.0,
            ..Default::default()
        };
        let sampled = |peak: f64| PortFigures {
            peak_tx_bits_per_second: Some(peak),
            peak_tx_packets_per_second: Some(peak / 12_000.0),
            peak_rx_bits_per_second: Some(0.0),
            ..Default::default()
        };
        // Samples straddling the run's ends came out 1 % below its mean (seen in a full run).
        let (m, src) = merge_figures(
            BTreeMap::from([("eth1".to_string(), own(950e6))]),
            BTreeMap::from([("eth1".to_string(), sampled(940.5e6))]),
        );
        assert_eq!(src, "counters, peaks from samples");
        assert_eq!(m["eth1"].peak_tx_bits_per_second, Some(950e6));
        assert_eq!(m["eth1"].tx_bits_per_second, 950e6);
        // A real peak above the mean is kept.
        let (m, _) = merge_figures(
            BTreeMap::from([("eth1".to_string(), own(500e6))]),
            BTreeMap::from([("eth1".to_string(), sampled(900e6))]),
        );
        assert_eq!(m["eth1"].peak_tx_bits_per_second, Some(900e6));
        assert_eq!(m["eth1"].peak_rx_bits_per_second, Some(0.0));
        // No samples: no peaks.
        let (m, src) = merge_figures(
            BTreeMap::from([("eth1".to_string(), own(1.0))]),
            BTreeMap::new(),
        );
        assert_eq!((src, m["eth1"].peak_tx_bits_per_second), ("counters", None));
    }

    fn port(name: &str) -> crate::board::Port {
        crate::board::Port {
            name: name.into(),
            up: true,
            running: true,
            loopback: name == "lo",
            addresses: vec![],
        }
    }

    fn ports() -> Vec<crate::board::Port> {
        vec![port("eth0"), port("eth1"), port("lo")]
    }

    fn req() -> ForwardRequest {
        ForwardRequest {
            peer: "http://192.0.2.222:5280".into(),
            token: Some("s3cret-token-0123".into()),
            target: "198.51.100.2".into(),
            ingress: "eth0".into(),
            egress: "eth1".into(),
            nat: Some("on".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_forward_request_becomes_a_plan() {
        let p = ForwardRequest {
            duration: Some("5".into()),
            parallel: Some("2".into()),
            direction: Some("receive".into()),
            protocol: Some("udp".into()),
            bitrate: Some("100M".into()),
            ..req()
        }
        .plan(&ports(), None)
        .unwrap();
        assert_eq!(p.client.url(), "http://192.0.2.222:5280");
        assert_eq!(
            (p.ingress.as_str(), p.egress.as_str(), p.nat),
            ("eth0", "eth1", true)
        );
        assert_eq!(p.spec.host, "198.51.100.2");
        assert_eq!(p.spec.time, Some(5));
        assert_eq!(p.spec.parallel, Some(2));
        assert!(p.spec.reverse && p.spec.udp && !p.spec.bidir);
        assert_eq!(p.spec.bitrate, Some(100_000_000));
        // The stored token stands in for a missing one.
        let p = ForwardRequest {
            token: None,
            nat: None,
            ..req()
        }
        .plan(&ports(), Some("stored-token-0123"))
        .unwrap();
        assert!(!p.nat);
    }

    #[test]
    fn a_forwarded_udp_test_at_bitrate_0_stays_unlimited_at_the_agent() {
        // The plan's agent spec was rebuilt from the client spec's bandwidth, where 0 read as
        // "not given": the agent then ran UDP at iperf3's default 1 Mbit/s.
        let udp = |bitrate: Option<&str>| {
            ForwardRequest {
                protocol: Some("udp".into()),
                bitrate: bitrate.map(Into::into),
                ..req()
            }
            .plan(&ports(), None)
            .unwrap()
            .spec
        };
        let unlimited = udp(Some("0"));
        assert_eq!(unlimited.bitrate, Some(0));
        assert_eq!(unlimited.to_client_spec().unwrap().params.bandwidth, 0);
        let default = udp(None);
        assert_eq!(default.bitrate, None);
        assert_eq!(
            default.to_client_spec().unwrap().params.bandwidth,
            1024 * 1024
        );
        assert_eq!(
            udp(Some("250M")).to_client_spec().unwrap().params.bandwidth,
            250_000_000
        );
    }

    #[test]
    fn bad_forward_requests_name_the_problem() {
        let bad = |r: ForwardRequest, want: &str| {
            let e = r.plan(&ports(), None).unwrap_err();
            assert!(e.contains(want), "{e} should mention {want}");
        };
        bad(
            ForwardRequest {
                token: None,
                ..req()
            },
            "token is missing",
        );
        bad(
            ForwardRequest {
                token: Some("short".into()),
                ..req()
            },
            "16..256",
        );
        bad(
            ForwardRequest {
                peer: "https://pc1".into(),
                ..req()
            },
            "https:// needs the agent's certificate fingerprint: https://pc1#sha256=AB:CD:…",
        );
        bad(
            ForwardRequest {
                egress: "eth0".into(),
                ..req()
            },
            "two different ports",
        );
        bad(
            ForwardRequest {
                egress: "eth9".into(),
                ..req()
            },
            "no port 'eth9'",
        );
        bad(
            ForwardRequest {
                ingress: "lo".into(),
                ..req()
            },
            "loopback",
        );
        bad(
            ForwardRequest {
                target: "a b".into(),
                ..req()
            },
            "target 'a b'",
        );
        bad(
            ForwardRequest {
                duration: Some("0".into()),
                ..req()
            },
            "duration",
        );
    }

    /// Issue 37 item 7: the stored agent token went to any address a run-tests token named.
    #[test]
    fn the_stored_token_goes_only_to_the_stored_address() {
        let d = crate::scratch::dir("stored-token");
        let store = crate::store::Store::open_dir(&d).unwrap();
        let stored = "stored-token-0123456";
        // Nothing stored: nothing to give; the plan then asks for a token.
        assert_eq!(
            stored_token_for(&store, "http://192.0.2.2:5280", None),
            Ok(None)
        );
        store.set_setting(TOKEN_KEY, stored).unwrap();
        // A token but no address (stored before addresses were checked): not sent anywhere.
        let e = stored_token_for(&store, "http://192.0.2.2:5280", None).unwrap_err();
        assert!(
            e.contains("only sent to the stored agent address (none stored)"),
            "{e}"
        );
        store.set_setting(URL_KEY, "http://192.0.2.2:5280").unwrap();
        for same in [
            "http://192.0.2.2:5280",
            "192.0.2.2",
            "http://192.0.2.2:5280/",
        ] {
            assert_eq!(
                stored_token_for(&store, same, None),
                Ok(Some(stored.to_string())),
                "{same}"
            );
        }
        for other in [
            "http://192.0.2.2:5281",
            "http://192.0.2.9:5280",
            "http://127.0.0.1:8080",
            "",
        ] {
            let e = stored_token_for(&store, other, Some("  ")).unwrap_err();
            assert!(
                e.contains("only sent to the stored agent address (http://192.0.2.2:5280)"),
                "{other}: {e}"
            );
            assert!(!e.contains(stored), "{e}");
            // With its own token a request needs none of the stored one.
            assert_eq!(
                stored_token_for(&store, other, Some("own-token-0123456")),
                Ok(None)
            );
        }
    }

    /// The typed constructor gives the text request's words for the same values.
    #[test]
    fn a_monitor_plan_from_typed_values() {
        let p =
            MonitorPlan::new(" eth1,eth0 ,eth1,", Some(" board "), Some(86_400), &ports()).unwrap();
        assert_eq!(
            p,
            MonitorPlan {
                ports: vec!["eth1".into(), "eth0".into()],
                label: "board".into(),
                seconds: Some(86_400),
            }
        );
        assert_eq!(
            MonitorPlan::new("eth0", None, None, &ports())
                .unwrap()
                .seconds,
            None
        );
        let many = (0..17).map(|i| format!("eth{i}")).collect::<Vec<_>>();
        let lots: Vec<crate::board::Port> = many.iter().map(|n| port(n)).collect();
        let long = "x".repeat(101);
        for (watched, label, secs, words) in [
            ("", None, None, "choose at least one port to watch"),
            (" , ", None, None, "choose at least one port to watch"),
            ("eth7", None, None, "the board has no port 'eth7' (watched)"),
            ("lo", None, None, "watched port lo is the loopback"),
            (
                "eth0",
                Some(long.as_str()),
                None,
                "the label must be at most 100 characters on one line",
            ),
            (
                "eth0",
                Some("a\nb"),
                None,
                "the label must be at most 100 characters on one line",
            ),
            (
                "eth0",
                None,
                Some(0),
                "duration must be 1..86400 s, got '0'",
            ),
            (
                "eth0",
                None,
                Some(86_401),
                "duration must be 1..86400 s, got '86401'",
            ),
        ] {
            assert_eq!(
                MonitorPlan::new(watched, label, secs, &ports()).unwrap_err(),
                words,
                "{watched:?} {label:?} {secs:?}"
            );
            let text = MonitorRequest {
                ports: watched.into(),
                label: label.map(String::from),
                duration: secs.map(|s| s.to_string()),
                csrf: None,
            };
            assert_eq!(text.plan(&ports()).unwrap_err(), words);
        }
        assert_eq!(
            MonitorPlan::new(&many.join(","), None, None, &lots).unwrap_err(),
            "at most 16 ports can be watched at once"
        );
        let e = MonitorRequest {
            ports: "eth0".into(),
            duration: Some("x".into()),
            ..Default::default()
        };
        assert_eq!(
            e.plan(&ports()).unwrap_err(),
            "duration must be 1..86400 s, got 'x'"
        );
    }

    /// `ForwardPath` and its plan from typed values: the words of the text request.
    #[test]
    fn a_forward_path_and_plan_from_typed_values() {
        let ok =
            |peer, token, stored, i, e| ForwardPath::check(peer, token, stored, i, e, &ports());
        let path = ok(
            "http://192.0.2.222:5280",
            Some(" s3cret-token-0123 "),
            None,
            "eth0",
            "eth1",
        )
        .unwrap();
        assert_eq!(path.client.url(), "http://192.0.2.222:5280");
        assert_eq!(
            (path.ingress.as_str(), path.egress.as_str()),
            ("eth0", "eth1")
        );
        // A blank token is no token: the stored one stands in.
        assert!(ok(
            "http://192.0.2.222:5280",
            Some(" "),
            Some("stored-token-0123"),
            "eth0",
            "eth1"
        )
        .is_ok());
        for (peer, token, i, e, words) in [
            ("http://pc1", None, "eth0", "eth1", "the peer agent's token is missing (none stored yet)"),
            ("http://pc1", Some(""), "eth0", "eth1", "the peer agent's token is missing (none stored yet)"),
            (" ", Some("s3cret-token-0123"), "eth0", "eth1", "the peer agent address is missing (https://PC1:5280#sha256=…, as `netperfd peer` prints it)"),
            ("http://pc1", Some("s3cret-token-0123"), "", "eth1", "choose the ingress port"),
            ("http://pc1", Some("s3cret-token-0123"), "eth0", "eth9", "the board has no port 'eth9' (egress)"),
            ("http://pc1", Some("s3cret-token-0123"), "lo", "eth1", "ingress port lo is the loopback"),
            ("http://pc1", Some("s3cret-token-0123"), "eth1", "eth1", "ingress and egress must be two different ports (both are eth1)"),
        ] {
            assert_eq!(ok(peer, token, None, i, e).unwrap_err(), words);
        }
        let short = ok("http://pc1", Some("short"), None, "eth0", "eth1").unwrap_err();
        assert_eq!(
            short,
            PeerClient::parse_remote("http://pc1", "short").unwrap_err()
        );
        let test = crate::spec::test::TestSpec {
            udp: true,
            bitrate: Some(0),
            duration: Some(3),
            direction: crate::spec::test::TestDirection::Bidir,
            ..crate::spec::test::TestSpec::new("198.51.100.2")
        };
        let p = path.clone().plan(&test, true).unwrap();
        assert!(p.nat && p.spec.udp && p.spec.bidir && !p.spec.reverse);
        assert_eq!((p.spec.bitrate, p.spec.time), (Some(0), Some(3)));
        for (t, words) in [
            (
                crate::spec::test::TestSpec::new(" a b "),
                "target 'a b' is not a host name or IP address",
            ),
            (
                crate::spec::test::TestSpec {
                    parallel: Some(0),
                    ..crate::spec::test::TestSpec::new("pc2")
                },
                "parallel streams must be 1..128, got 0",
            ),
            (
                crate::spec::test::TestSpec {
                    port: Some(0),
                    ..crate::spec::test::TestSpec::new("pc2")
                },
                "port must be 1..65535, got 0",
            ),
            (
                crate::spec::test::TestSpec {
                    direction: crate::spec::test::TestDirection::Tradeoff,
                    ..crate::spec::test::TestSpec::new("pc2")
                },
                "direction must be send, receive or bidir, got 'tradeoff'",
            ),
        ] {
            assert_eq!(path.clone().plan(&t, false).unwrap_err(), words);
        }
    }

    #[test]
    fn monitor_requests() {
        let p = MonitorRequest {
            ports: "eth0, eth1,eth0".into(),
            label: Some("pc1 to pc2".into()),
            duration: Some("30".into()),
            csrf: None,
        }
        .plan(&ports())
        .unwrap();
        assert_eq!(p.ports, vec!["eth0", "eth1"]);
        assert_eq!(p.seconds, Some(30));
        for (ports_, dur, want) in [
            ("", None, "at least one"),
            ("eth7", None, "no port 'eth7'"),
            ("eth0", Some("0"), "duration"),
            ("eth0", Some("x"), "duration"),
        ] {
            let e = MonitorRequest {
                ports: ports_.into(),
                duration: dur.map(String::from),
                ..Default::default()
            }
            .plan(&ports())
            .unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        let v = normalize(json!({"ports": ["eth0", "eth1"], "duration": 5, "nat": true})).unwrap();
        assert_eq!(v["ports"], "eth0,eth1");
        assert_eq!(v["duration"], "5");
        assert_eq!(v["nat"], "true");
        // Numbers in a list (an RFC 2544 run's frame sizes) become text too; objects do not.
        let v = normalize(json!({"sizes": [64, 1518]})).unwrap();
        assert_eq!(v["sizes"], "64,1518");
        assert!(normalize(json!({"ports": [{"name": "eth0"}]})).is_err());
    }

    #[test]
    fn figures_from_counter_readings() {
        let c = |rx: u64, tx: u64, rp: u64, tp: u64| Counters {
            rx_bytes: rx,
            tx_bytes: tx,
            rx_packets: rp,
            tx_packets: tp,
            ..Default::default()
        };
        let start = BTreeMap::from([
            ("eth0".to_string(), c(1000, 500, 10, 5)),
            ("eth1".to_string(), c(200, 300, 2, 3)),
        ]);
        let end = BTreeMap::from([
            (
                "eth0".to_string(),
                c(1000 + 125_000_000, 500 + 1_000_000, 10 + 85_000, 5 + 20_000),
            ),
            (
                "eth1".to_string(),
                c(200 + 1_000_000, 300 + 124_000_000, 2 + 20_000, 3 + 85_000),
            ),
        ]);
        let f = figures_from_counters(&start, &end, 10.0);
        assert_eq!(f["eth0"].rx_bytes, 125_000_000);
        assert_eq!(f["eth0"].rx_bits_per_second, 100_000_000.0);
        assert_eq!(f["eth1"].tx_packets_per_second, 8_500.0);
        let fw = forwarded(&f, "eth0", "eth1").expect("both ports");
        let (there, back) = (&fw.0[0], &fw.0[1]);
        assert_eq!(
            (there.0.as_str(), back.0.as_str()),
            ("eth0->eth1", "eth1->eth0")
        );
        assert_eq!(there.1.bytes, 124_000_000);
        assert_eq!(there.1.bits_per_second, 99_200_000.0);
        assert_eq!(there.1.received_bits_per_second, 100_000_000.0);
        assert_eq!(back.1.packets_per_second, 2_000.0);
        assert_eq!(forwarded(&f, "eth0", "eth9"), None);
        // A counter that went backwards (port re-created) counts 0, never negative.
        let f = figures_from_counters(&end, &start, 1.0);
        assert_eq!(f["eth0"].rx_bytes, 0);
    }

    #[test]
    fn figures_from_monitor_samples() {
        let s = |t: f64, ifname: &str, secs: f64, rx: i64, rp: i64| PortSampleRow {
            t,
            ifname: ifname.into(),
            seconds: secs,
            rx_bytes: rx,
            rx_packets: rp,
            ..Default::default()
        };
        let samples = vec![
            s(1.0, "eth0", 1.0, 100_000_000, 70_000),
            s(2.0, "eth0", 1.0, 50_000_000, 30_000),
            s(2.5, "eth0", 0.5, 0, 0),
            s(1.0, "eth1", 1.0, 10, 1),
        ];
        let f = figures_from_samples(&samples);
        assert_eq!(f["eth0"].rx_bytes, 150_000_000);
        assert_eq!(f["eth0"].seconds, 2.5);
        assert_eq!(f["eth0"].rx_bits_per_second, 480_000_000.0);
        assert_eq!(f["eth0"].peak_rx_bits_per_second, Some(800_000_000.0));
        assert_eq!(f["eth0"].peak_rx_packets_per_second, Some(70_000.0));
        assert_eq!(f["eth1"].rx_packets, 1);
        let ct = conntrack_summary(
            &[
                SysSampleRow {
                    t: 1.0,
                    conntrack: Some(3),
                },
                SysSampleRow {
                    t: 2.0,
                    conntrack: Some(9),
                },
            ],
            &[1],
        );
        let ct = ct.expect("conntrack");
        assert_eq!((ct.peak, ct.samples), (9, 2));
        let ct = conntrack_summary(&[], &[4, 2]).expect("conntrack");
        assert_eq!((ct.peak, ct.start, ct.end), (4, Some(4), Some(2)));
        assert_eq!(conntrack_summary(&[], &[]), None);
        let cpu = cpu_summary(&[
            CpuSampleRow {
                t: 1.0,
                cpu: 0,
                idle: 30.0,
                ..Default::default()
            },
            CpuSampleRow {
                t: 2.0,
                cpu: 0,
                idle: 70.0,
                ..Default::default()
            },
        ]);
        let cpu = cpu.expect("samples");
        assert_eq!(cpu[0].peak_busy_percent, 70.0);
        assert_eq!(cpu[0].mean_busy_percent, 50.0);
    }
}

#[cfg(test)]
mod params_tests {
    use super::*;

    /// Params of runs made by the binary before the typed writer (see
    /// `results::forward_params`' round trip).
    const FIXTURES: &str = include_str!("../../tests/data/forward_params.json");

    /// The forwarding run's writer before [`ForwardParams`].
    fn old_forward(plan: &ForwardPlan) -> Value {
        json!({
            "peer": plan.client.url(),
            "test": plan.spec,
            "ingress": plan.ingress,
            "egress": plan.egress,
            "nat": plan.nat,
        })
    }

    /// The monitor run's writer before [`MonitorParams`].
    fn old_monitor(plan: &MonitorPlan) -> Value {
        json!({"ports": plan.ports, "label": plan.label, "duration": plan.seconds})
    }

    /// Same Value, same bytes (key order included), and the stored row when given.
    fn same(new: Value, old: Value, stored: Option<&Value>) {
        let bytes = serde_json::to_string(&new).unwrap();
        assert_eq!(bytes, serde_json::to_string(&old).unwrap());
        assert_eq!(new, old);
        if let Some(s) = stored {
            assert_eq!(bytes, serde_json::to_string(s).unwrap());
        }
    }

    /// The plan a stored forwarding row was written from (an https agent gets a pin: the
    /// stored URL leaves it out).
    fn forward_plan(stored: &Value) -> ForwardPlan {
        let mut url = stored["peer"].as_str().unwrap().to_string();
        if url.starts_with("https") {
            url.push_str(&format!("#sha256={}", "ab".repeat(32)));
        }
        let word = |k: &str| stored[k].as_str().unwrap().to_string();
        ForwardPlan {
            client: PeerClient::parse(&url, "s3cret-token-0123").unwrap(),
            spec: serde_json::from_value(stored["test"].clone()).unwrap(),
            ingress: word("ingress"),
            egress: word("egress"),
            nat: stored["nat"].as_bool().unwrap(),
        }
    }

    /// Issue 40 item 1: forwarding and monitor params written through [`ForwardParams`] /
    /// [`MonitorParams`] are the Value the `json!` writer gave, byte for byte: for the plans
    /// of the stored rows and for an RFC 2544 test's probe and burst.
    #[test]
    fn typed_params_write_what_json_wrote() {
        let rows: Value = serde_json::from_str(FIXTURES).unwrap();
        let forward = rows["forward"].as_array().unwrap();
        for stored in forward {
            let plan = forward_plan(stored);
            same(plan.params().to_value(), old_forward(&plan), Some(stored));
        }
        let mut plan = forward_plan(&forward[0]);
        plan.spec.probe = Some(crate::peer::spec::ProbeRequest {
            port: 5291,
            interval_ms: 10,
        });
        plan.spec.burst = Some(1000);
        same(plan.params().to_value(), old_forward(&plan), None);
        for stored in rows["monitor"].as_array().unwrap() {
            let plan = MonitorPlan {
                ports: serde_json::from_value(stored["ports"].clone()).unwrap(),
                label: stored["label"].as_str().unwrap().into(),
                seconds: serde_json::from_value(stored["duration"].clone()).unwrap(),
            };
            same(plan.params().to_value(), old_monitor(&plan), Some(stored));
        }
    }
}

#[cfg(test)]
mod route_hint_tests {
    use super::*;
    use crate::board::links::IfAddr;

    fn a(s: &str) -> IfAddr {
        IfAddr::parse_any(s).unwrap()
    }

    /// Issue 38 item 6: "Network is unreachable" from the agent is PC1's, and names the route.
    #[test]
    fn an_unreachable_network_names_pc1_and_its_route() {
        let msg = "connect: Network is unreachable (os error 101)";
        let ingress = [a("fe80::1/64"), a("192.0.2.1/24")];
        let egress = [a("198.51.100.1/24")];
        let h = route_hint(msg, "192.0.2.2", "198.51.100.2", &ingress, &egress, true).unwrap();
        assert!(h.starts_with(msg), "{h}");
        assert!(
            h.contains("this error came from PC1 (the peer agent at 192.0.2.2)"),
            "{h}"
        );
        assert!(
            h.contains("ip route add 198.51.100.0/24 via 192.0.2.1"),
            "{h}"
        );
        assert!(!h.contains("way back"), "NAT needs no route back: {h}");
        let h = route_hint(msg, "192.0.2.2", "198.51.100.2", &ingress, &egress, false).unwrap();
        assert!(
            h.contains("on PC2: ip route add 192.0.2.0/24 via 198.51.100.1"),
            "{h}"
        );
        // PC2 beyond the board's own subnet: a host route; no address known: a placeholder.
        let h = route_hint(msg, "192.0.2.2", "203.0.113.9", &ingress, &egress, true).unwrap();
        assert!(
            h.contains("ip route add 203.0.113.9/32 via 192.0.2.1"),
            "{h}"
        );
        let h = route_hint(msg, "192.0.2.2", "198.51.100.2", &[], &egress, true).unwrap();
        assert!(h.contains("via <the board's address on PC1's port>"), "{h}");
        // Any other error is left alone.
        assert_eq!(
            route_hint(
                "Connection refused",
                "192.0.2.2",
                "198.51.100.2",
                &ingress,
                &egress,
                true
            ),
            None
        );
        assert_eq!(url_host("http://192.0.2.2:5280"), "192.0.2.2");
        assert_eq!(url_host("http://[2001:db8::2]:5280"), "2001:db8::2");
    }
}

/// Runs against a fake peer agent: a std `TcpListener` on loopback in the test, answering
/// each call as the test says (the client is allowed the board's own addresses for it).
#[cfg(test)]
mod fake_agent_tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::Mutex;

    /// What the fake agent answers: a function of the request line (method and path) →
    /// whole raw answer bytes (None: close without answering).
    type Answer = Box<dyn Fn(&str) -> Option<Vec<u8>> + Send + Sync>;

    /// Start the fake agent; its URL and the request lines it received.
    fn fake_agent(answer: Answer) -> (String, Arc<Mutex<Vec<String>>>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && c.read(&mut b).unwrap_or(0) == 1 {
                    head.push(b[0]);
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let line = text.lines().next().unwrap_or_default().to_string();
                // The body (a start's spec) is not needed; drain what is there.
                c.set_read_timeout(Some(Duration::from_millis(50))).ok();
                let _ = c.read(&mut [0u8; 4096]);
                seen2.lock().unwrap().push(line.clone());
                if let Some(a) = answer(&line) {
                    let _ = c.write_all(&a);
                }
            }
        });
        (url, seen)
    }

    fn json_answer(status: &str, v: Value) -> Vec<u8> {
        let b = v.to_string();
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        )
        .into_bytes()
    }

    fn spec() -> PeerTestSpec {
        PeerTestSpec {
            host: "198.51.100.2".into(),
            time: Some(2),
            ..Default::default()
        }
    }

    fn job_view(status: &str, intervals: Value, next: usize) -> Vec<u8> {
        json_answer(
            "200 OK",
            json!({"id": 1, "status": status, "spec": spec(), "first": 0,
                   "intervals": intervals, "next": next, "started_at": 1}),
        )
    }

    fn plan(url: &str) -> ForwardPlan {
        ForwardPlan {
            client: PeerClient::parse(url, "s3cret-token-0123")
                .unwrap()
                .allowing_own_addresses(),
            spec: spec(),
            ingress: "npt-none-a".into(),
            egress: "npt-none-b".into(),
            nat: false,
        }
    }

    fn ctx(name: &str) -> RunContext {
        let d = crate::scratch::dir(name);
        RunContext::new(Arc::new(crate::store::Store::open_dir(&d).unwrap()))
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// Issue 37 item 5: a 60 MB info answer was read whole (4.4 GB peak) and stored as the
    /// run's summary (90 MB). Now every form of a huge answer ends the run with the fixed
    /// reason, and what is stored is small.
    #[test]
    fn a_huge_agent_answer_fails_the_run_and_stores_little() {
        let huge: Vec<(&str, Answer)> = vec![
            (
                "content-length",
                Box::new(|_: &str| {
                    let mut a =
                        b"HTTP/1.1 200 OK\r\nContent-Length: 60000000\r\n\r\n{\"version\":\""
                            .to_vec();
                    a.resize(60_000_000, b'a');
                    Some(a)
                }),
            ),
            (
                "chunked",
                Box::new(|_: &str| {
                    let mut a = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                    for _ in 0..600 {
                        a.extend_from_slice(b"186a0\r\n");
                        a.extend(std::iter::repeat_n(b'a', 100_000));
                        a.extend_from_slice(b"\r\n");
                    }
                    a.extend_from_slice(b"0\r\n\r\n");
                    Some(a)
                }),
            ),
            (
                "until-eof",
                Box::new(|_: &str| {
                    let mut a = b"HTTP/1.1 200 OK\r\n\r\n{\"hostname\":\"".to_vec();
                    a.resize(60_000_000, b'a');
                    Some(a)
                }),
            ),
        ];
        let rt = rt();
        for (what, answer) in huge {
            let (url, _) = fake_agent(answer);
            let h = ctx("fake-agent-huge");
            let (id, done) = rt
                .block_on(async { start_forward(&h, None, plan(&url)) })
                .unwrap();
            let status = rt.block_on(done).unwrap();
            assert_eq!(status, RunStatus::Failed, "{what}");
            let row = h.store().get_run(id).unwrap().unwrap();
            let err = row.error.clone().unwrap_or_default();
            assert_eq!(
                err,
                format!("peer agent at {url}: the answer is longer than 64 KiB"),
                "{what}"
            );
            let stored = row.summary.to_string();
            assert!(stored.len() < 2048, "{what}: {} bytes stored", stored.len());
            assert!(row.summary["peer"].get("info").is_none(), "{what}");
        }
    }

    /// Issue 37 items 5 and 8: only the known fields of an agent's info are kept, capped, and
    /// an agent's foreign body never lands in the run's error (the review saw
    /// `no job id in {"db_password":...}`).
    #[test]
    fn only_known_info_fields_are_kept_and_foreign_bodies_never_reach_errors() {
        let rt = rt();
        let secret = "db_password=hunter2";
        for (what, start, want) in [
            (
                "no job id",
                json_answer("201 Created", json!({"db_password": secret})),
                "the answer has no job id",
            ),
            (
                "an error status",
                json_answer("500 Internal Server Error", json!({"error": secret})),
                "HTTP 500: the agent failed",
            ),
            (
                "a refused spec",
                json_answer("400 Bad Request", json!({"error": secret})),
                "HTTP 400: the agent refused the request (a test it cannot run)",
            ),
            (
                "not JSON",
                format!(
                    "HTTP/1.1 201 Created\r\nContent-Length: {}\r\n\r\n{secret}",
                    secret.len()
                )
                .into_bytes(),
                "HTTP 201: the answer is not the agent's JSON",
            ),
        ] {
            let (url, _) = fake_agent(Box::new(move |line: &str| {
                if line.starts_with("GET /peer/v1/info") {
                    Some(json_answer(
                        "200 OK",
                        json!({"version": "v1", "hostname": "h".repeat(5000), "busy": true,
                               "addresses": vec!["192.0.2.2"; 500], "extra": "x".repeat(30_000)}),
                    ))
                } else {
                    Some(start.clone())
                }
            }));
            let h = ctx("fake-agent-foreign");
            let (id, done) = rt
                .block_on(async { start_forward(&h, None, plan(&url)) })
                .unwrap();
            assert_eq!(rt.block_on(done).unwrap(), RunStatus::Failed, "{what}");
            let row = h.store().get_run(id).unwrap().unwrap();
            let err = row.error.clone().unwrap_or_default();
            assert_eq!(err, format!("peer agent at {url}: {want}"), "{what}");
            let stored = row.summary.to_string();
            assert!(!stored.contains("hunter2"), "{what}: {stored}");
            let info = &row.summary["peer"]["info"];
            assert_eq!(info["version"], "v1");
            assert_eq!(info["hostname"].as_str().unwrap().len(), 255);
            assert_eq!(info["addresses"].as_array().unwrap().len(), 16);
            assert_eq!(info["busy"], true);
            assert!(info.get("extra").is_none());
            assert!(stored.len() < 2048, "{what}: {} bytes", stored.len());
        }
    }

    /// Issue 37 item 10: a fake agent answering "running" forever (no intervals, or
    /// intervals that move nothing) held the run — and its NAT — for the test's whole
    /// duration plus grace (24 h). Now the run ends after the no-progress limit, and the
    /// agent is told to stop.
    #[test]
    fn an_agent_without_progress_is_stopped() {
        let rt = rt();
        let zero = json!([{"streams": [{"id": 1, "socket": 5, "start": 0.0, "end": 1.0, "bytes": 0,
            "bits_per_second": 0.0, "sender": true, "omitted": false}]}]);
        for (what, intervals, next) in [("no intervals", json!([]), 0), ("zero bytes", zero, 1)] {
            let (url, seen) = fake_agent(Box::new(move |line: &str| {
                if line.starts_with("POST /peer/v1/run ") {
                    Some(json_answer("201 Created", json!({"id": 1})))
                } else if line.contains("/stop") {
                    Some(json_answer(
                        "202 Accepted",
                        json!({"id": 1, "stopping": true}),
                    ))
                } else {
                    // Zero-byte intervals: a new one on every poll.
                    let first: usize = line
                        .split("since=")
                        .nth(1)
                        .and_then(|s| s.split('&').next())
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    let v = if next == 0 {
                        job_view("running", intervals.clone(), 0)
                    } else {
                        let b =
                            json!({"id": 1, "status": "running", "spec": spec(), "first": first,
                            "intervals": intervals, "next": first + 1, "started_at": 1})
                            .to_string();
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{b}", b.len())
                            .into_bytes()
                    };
                    Some(v)
                }
            }));
            let mut s = spec();
            s.time = Some(86_400);
            let client = plan(&url).client;
            let t0 = Instant::now();
            let mut polls = 0;
            let res = rt.block_on(run_peer_job_with(
                &client,
                &s,
                &Notify::new(),
                Duration::from_secs(3),
                &mut |_| polls += 1,
            ));
            let took = t0.elapsed();
            let (status, msg) = res.unwrap_err();
            assert_eq!(status, RunStatus::Failed, "{what}");
            assert!(msg.contains("no progress for 3 s"), "{what}: {msg}");
            assert!(took < Duration::from_secs(8), "{what}: {took:?}");
            assert!(polls >= 3, "{what}: {polls} polls");
            let seen = seen.lock().unwrap();
            assert!(
                seen.iter()
                    .any(|l| l.starts_with("POST /peer/v1/run/1/stop")),
                "{what}: {seen:?}"
            );
            assert!(
                seen.iter().any(|l| l.contains("since=0&lean=1")),
                "{what}: {seen:?}"
            );
        }
    }

    /// A lean final view: the board polls until it has every interval the agent counts, then
    /// puts them into the report and makes iperf3's document from it.
    #[test]
    fn a_lean_final_view_is_completed_from_the_polls() {
        let rt = rt();
        let iv = |n: usize| {
            json!({"streams": [{"id": 1, "socket": 5, "start": n as f64, "end": n as f64 + 1.0,
                "bytes": 1000, "bits_per_second": 8000.0, "sender": true, "omitted": false}]})
        };
        let (url, _) = fake_agent(Box::new(move |line: &str| {
            if line.starts_with("POST /peer/v1/run ") {
                return Some(json_answer("201 Created", json!({"id": 1})));
            }
            let since: usize = line
                .split("since=")
                .nth(1)
                .and_then(|s| s.split('&').next())
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            // 3 intervals, at most 2 per answer; ended from the start. (No more than the
            // board's elapsed seconds + 2: runs::intake keeps no more than that from an
            // agent, so 12 intervals answered within a second would be cut to 3.)
            let upto = (since + 2).min(3);
            let ivs: Vec<Value> = (since..upto).map(iv).collect();
            Some(json_answer(
                "200 OK",
                json!({"id": 1, "status": "completed", "spec": spec(), "first": since,
                       "intervals": ivs, "next": 3, "started_at": 1, "ended_at": 2}),
            ))
        }));
        let client = plan(&url).client;
        let mut got = 0;
        let v = rt
            .block_on(run_peer_job(&client, &spec(), &Notify::new(), |f| {
                got += f.len()
            }))
            .unwrap();
        assert_eq!(got, 3);
        assert_eq!(v.status, RunStatus::Completed);
    }
}
