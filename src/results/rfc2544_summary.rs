//! The stored summary of an RFC 2544 run (`runs.summary_json` of kind `rfc2544`), typed:
//! written by `runs::rfc2544` after every trial, read by the tables, charts, text and CSV of
//! [`crate::results::rfc2544`] and the run page.
//!
//! Each struct's field order is the stored key order, so a summary read and written back is
//! the same bytes (`stored_summaries_read_back_byte_for_byte`). Every key defaults when
//! absent (summaries stored before it was kept, a run that failed early); a key the runner
//! writes only in some rows is an `Option` skipped when `None`, and a key it always writes
//! but whose value may be `null` is a plain `Option`. Where a row holds a key whose value may
//! be `null` only in some rows (a latency row's `bound`, `rtt_ms`, `idle_rtt_ms`), it is an
//! `Option<Option<_>>`: absent, `null`, or a value.

use crate::model::RunDirection;
use crate::results::ledger::Place;
use crate::results::rfc2544::{Bound, BurstLimit, Limit, Verdict};
use crate::spec::rfc2544::Rfc2544Test;
use serde::{Deserialize, Deserializer, Serialize};

/// A key that is present (`Some`, its value possibly `null`) or absent (`None`): for
/// `Option<Option<T>>` fields with `#[serde(default, deserialize_with = "present")]`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

fn yes() -> bool {
    true
}

/// The whole summary of an RFC 2544 run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Rfc2544Summary {
    /// The peer agent on PC1.
    pub peer: PeerRef,
    /// PC2: the address and port the trials' UDP goes to.
    pub target: TargetRef,
    /// The board's ports: where the frames come in and go out.
    pub ingress: String,
    pub egress: String,
    /// The trials' direction (send: PC1 → PC2).
    pub direction: RunDirection,
    /// Forwarding with NAT, asked for and what the run did about it.
    pub nat: NatRecord,
    /// The line rate the percentages are of, bit/s (L1), and where it came from.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub line_bps: f64,
    pub line_source: String,
    /// One trial's length, s.
    pub trial_s: u32,
    /// The loss a throughput trial may have and pass, %.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub loss_percent: f64,
    /// The throughput search's resolution, %.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub resolution_percent: f64,
    /// Frame sizes, bytes with FCS, in the order tested.
    pub sizes: Vec<u32>,
    /// The tests asked for, in the order they run.
    pub tests: Vec<Rfc2544Test>,
    /// §26.1: one row per frame size (its search so far while it runs).
    pub throughput: Vec<ThroughputRecord>,
    /// §26.2: one row per frame size.
    pub latency: Vec<LatencyRecord>,
    /// §26.3: one row per frame size.
    pub loss: Vec<LossRecord>,
    /// §26.4 (RFC 9004): one row per frame size.
    pub back_to_back: Vec<B2bRecord>,
    /// Back-to-back searches per frame size.
    pub b2b_repeat: u32,
    /// PC2's UDP echo port (the latency test's probes).
    pub echo_port: u16,
    /// Why the run did not complete; absent while it runs and when it completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every trial, in the order run (the evidence; rows refer to them by index).
    pub trials: Vec<TrialRecord>,
}

impl Rfc2544Summary {
    /// A stored summary read back; the default (no rows) when it is not one (`null`: the run
    /// ended before its first store; a mistyped key).
    pub(crate) fn of_summary(v: &serde_json::Value) -> Rfc2544Summary {
        Rfc2544Summary::deserialize(v).unwrap_or_default()
    }

    /// The stored JSON (what `runs.summary_json` holds).
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Frame size `frame`'s throughput row, if its search started.
    pub(crate) fn throughput_of(&self, frame: u32) -> Option<&ThroughputRecord> {
        self.throughput.iter().find(|r| r.frame == frame)
    }
}

/// The peer agent: its address, and what its `/peer/v1/info` said (kept as the agent sent
/// it, capped by the peer client).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct PeerRef {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<serde_json::Value>,
}

/// Where the trials' UDP goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TargetRef {
    pub host: String,
    pub port: u16,
}

/// Forwarding with NAT for the run: asked for; whether the run turned it on and how it is
/// undone (the board's own record); whether it was put back. The last three are absent
/// without NAT, and until each is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct NatRecord {
    pub requested: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled_by_run: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored: Option<bool>,
}

/// One frame size's throughput search (§26.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ThroughputRecord {
    /// Frame size, bytes with FCS.
    pub frame: u32,
    /// The throughput (while searching: the best rate that passed so far), frames/s.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub fps: f64,
    /// The same as L1 and L2 bit/s.
    pub l1_bps: Option<f64>,
    pub l2_bps: Option<f64>,
    /// The line rate at this size, frames/s.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub line_fps: f64,
    /// `fps` as % of `line_fps`.
    pub percent_line: Option<f64>,
    /// Whose limit the figure is.
    pub limit: Option<Limit>,
    /// The figure is the board's own (`limit` line rate or the board).
    pub dut: bool,
    /// The search ended (rows stored without it had ended).
    #[serde(default = "yes")]
    pub done: bool,
    /// Trials the search ran.
    pub trials: u64,
    /// The passing trial's loss, 0..1; `null` before one passed.
    pub loss_ratio: Option<f64>,
    /// The first trial the board dropped at (index into the trials), and the board's counters
    /// that moved in it.
    pub knee_trial: Option<u64>,
    pub knee_places: Option<Vec<Place>>,
    /// The generator's lag set the limit: every try at the rate above lagged.
    pub lag_limited: bool,
    /// The largest lag of those tries, ms; their rate (frames/s asked) and each try's lag.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub max_lag_ms: f64,
    pub lag_rate_fps: Option<f64>,
    pub lag_tries_ms: Option<Vec<f64>>,
}

/// One frame size's latency (§26.2): the trial at the throughput found, with the UDP echo
/// probes' round trips; only `frame`, `fps` and `note` when nothing could be measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LatencyRecord {
    pub frame: u32,
    /// The rate of the trial (the throughput found), frames/s.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub fps: f64,
    /// The trial's index, and the tries it took (a lagging generator's are run again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trial: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_fps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// The generator lagged in every try, by `lag_ms` in the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lagged: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_ms: Option<f64>,
    /// Whose limit the trial's loss showed (present with the trial, `null` when none).
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub bound: Option<Option<Bound>>,
    /// Probes sent and answered (present when the agent sent probe results).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered: Option<u64>,
    /// Round trips during the trial and before its traffic (`null`: none answered).
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<Option<Rtt>>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub idle_rtt_ms: Option<Option<Rtt>>,
    /// Why there is no figure, or what to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl LatencyRecord {
    /// The loaded round trips, when measured.
    pub(crate) fn rtt(&self) -> Option<&Rtt> {
        self.rtt_ms.as_ref().and_then(Option::as_ref)
    }

    /// The idle round trips, when measured.
    pub(crate) fn idle_rtt(&self) -> Option<&Rtt> {
        self.idle_rtt_ms.as_ref().and_then(Option::as_ref)
    }
}

/// Round trips of a set of probes, ms (the agent's `Delays`): nearest-rank percentiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Rtt {
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Number of probes.
    pub n: u64,
}

/// One frame size's frame-loss-rate steps (§26.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LossRecord {
    pub frame: u32,
    pub steps: Vec<LossStep>,
}

/// One step of the frame-loss-rate curve: the trial at `percent` of the line rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LossStep {
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub percent: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub target_fps: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub offered_fps: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub loss_ratio: f64,
    pub generator_short: bool,
    pub bound: Option<Bound>,
    /// The trial's index.
    pub trial: u64,
}

/// One frame size's back-to-back result (§26.4, RFC 9004). While searching it holds
/// `searching` (the longest burst that passed so far); when done, the figures from
/// `corrected_s` on (the runner's stored order: `corrected_s` took `searching`'s place).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct B2bRecord {
    pub frame: u32,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub line_fps: f64,
    /// The throughput found at this size, frames/s, and whose limit it was.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub throughput_fps: f64,
    pub throughput_limit: Option<Limit>,
    /// Each search's result.
    pub searches: Vec<BurstResult>,
    /// Trials run so far.
    pub trials: u64,
    #[serde(default = "yes")]
    pub done: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub searching: Option<u64>,
    /// The corrected DUT buffer time, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected_s: Option<f64>,
    /// The searches' mean, frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames: Option<f64>,
    /// The worst limit a search met, and whether it is the board's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<BurstLimit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dut: Option<bool>,
    /// The implied DUT buffer time, s, and the frames the board held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub implied_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffered_frames: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One back-to-back search's result: the longest burst that passed and what stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct BurstResult {
    pub frames: u64,
    pub limit: BurstLimit,
}

/// One trial as stored (the evidence of the search).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TrialRecord {
    /// "throughput", "latency", "loss" or "back-to-back".
    pub test: String,
    pub frame: u32,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub target_fps: f64,
    /// The target as % of the line rate.
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub target_percent: f64,
    pub offered: u64,
    pub received: u64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub seconds: f64,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The board's drop counters that moved (ledger places).
    pub board_places: Vec<Place>,
    /// Frames into and out of the board on the trial's path.
    pub board_in: u64,
    pub board_out: u64,
    /// The PCs' own drops (netperfd receivers and the agent send them).
    pub receiver_drops: u64,
    pub generator_drops: u64,
    /// Run-relative start and end, s (the CPU samples' clock).
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub start_s: f64,
    #[serde(deserialize_with = "crate::results::json::f64_or_nan")]
    pub end_s: f64,
    /// Mean busy % per core during the trial, index = core.
    pub cpu_busy: Vec<f64>,
    /// Why the trial did not run to its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A latency trial's probes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<TrialProbes>,
    /// A back-to-back trial's burst, frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// The generator's largest lag behind its schedule, ms; `None` in trials stored before
    /// it was kept.
    pub sender_lag_ms: Option<f64>,
}

/// A latency trial's probes (the agent's `ProbeSummary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TrialProbes {
    pub sent: u64,
    pub answered: u64,
    /// No reply came within the first second.
    pub gave_up: bool,
    pub idle: Option<Rtt>,
    pub loaded: Option<Rtt>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored summaries of two lab runs (the runner before it was typed, `netperfd rfc2544
    /// --json` in `tests/rfc2544.rs`): 512 and 1518-byte frames through a 100 Mbit/s TBF;
    /// throughput, latency and loss; back-to-back and throughput (NAT turned on and undone).
    const LAB_LOSS_LATENCY: &str =
        include_str!("../../tests/data/rfc2544_summary_loss_latency.json");
    const LAB_B2B: &str = include_str!("../../tests/data/rfc2544_summary_b2b.json");

    /// A run stopped mid-search, in the runner's key order: sizes still searching (a
    /// throughput row not done, a back-to-back row with `searching`), a latency row with
    /// nothing to measure at and one whose probes went unanswered (`bound`, `rtt_ms` present
    /// and `null`), a back-to-back row skipped at the line rate, a burst trial, the error.
    const STOPPED: &str = r#"{"peer":{"url":"http://192.0.2.2:5280","info":{"version":"netperfd 0.1.0","hostname":"pc1","addresses":[],"busy":false}},"target":{"host":"198.51.100.2","port":5201},"ingress":"eth0","egress":"eth1","direction":"send","nat":{"requested":false},"line_bps":1000000000.0,"line_source":"the port's link speed","trial_s":1,"loss_percent":0.0,"resolution_percent":1.0,"sizes":[64,1518],"tests":["throughput","latency","back-to-back"],"throughput":[{"frame":64,"fps":0.0,"l1_bps":0.0,"l2_bps":0.0,"line_fps":1488095.238095238,"percent_line":0.0,"limit":"generator","dut":false,"done":true,"trials":3,"loss_ratio":null,"knee_trial":null,"knee_places":null,"lag_limited":true,"max_lag_ms":72.4,"lag_rate_fps":5109.0,"lag_tries_ms":[17.0,40.5,72.4]},{"frame":1518,"fps":40000.0,"l1_bps":492160000.0,"l2_bps":485760000.0,"line_fps":81274.3823146944,"percent_line":49.21581,"limit":"line-rate","dut":true,"done":false,"trials":2,"loss_ratio":0.0,"knee_trial":null,"knee_places":null,"lag_limited":false,"max_lag_ms":0.0,"lag_rate_fps":null,"lag_tries_ms":null}],"latency":[{"frame":64,"fps":0.0,"note":"no rate passed the throughput test: nothing to measure at"},{"frame":1518,"fps":8000.0,"trial":3,"tries":1,"offered_fps":7990.5,"loss_ratio":0.001,"lost":8,"lagged":false,"lag_ms":0.5,"bound":"dut","sent":150,"answered":0,"rtt_ms":null,"idle_rtt_ms":null,"note":"PC2 did not answer the probes on UDP port 5299: run netperfd there (the daemon, or netperfd peer)"}],"loss":[],"back_to_back":[{"frame":64,"line_fps":1488095.238095238,"throughput_fps":0.0,"throughput_limit":"generator","searches":[],"trials":0,"done":true,"note":"no rate passed the throughput test: the correction has nothing to use"},{"frame":1518,"line_fps":81274.3823146944,"throughput_fps":40000.0,"throughput_limit":"dut","searches":[{"frames":120,"limit":"dut"}],"trials":7,"done":false,"searching":105}],"b2b_repeat":2,"echo_port":5299,"error":"stopped before every trial had run","trials":[{"test":"back-to-back","frame":1518,"target_fps":81274.3823146944,"target_percent":100.0,"offered":105,"received":105,"seconds":0.001,"offered_fps":81000.0,"lost_frames":0,"loss_ratio":0.0,"passed":true,"generator_short":false,"bound":null,"board_kept":0,"lagged":false,"board_places":[],"board_in":105,"board_out":105,"receiver_drops":0,"generator_drops":0,"start_s":1.5,"end_s":3.5,"cpu_busy":[],"error":"the agent stopped","burst":105,"sender_lag_ms":0.0}]}"#;

    fn round_trip(stored: &str) -> Rfc2544Summary {
        let v: serde_json::Value = serde_json::from_str(stored).unwrap();
        let s = Rfc2544Summary::deserialize(&v).expect("an RFC 2544 summary");
        assert_eq!(serde_json::to_string(&s).unwrap(), stored);
        // Through a Value too, as the store writes it.
        assert_eq!(serde_json::to_string(&s.to_value()).unwrap(), stored);
        s
    }

    /// Issue 40 item 1: stored summaries read through [`Rfc2544Summary`] and written back are
    /// the same bytes: key order (a finished back-to-back row's `corrected_s` where its
    /// `searching` was), number formatting (`307.0`, `0.0`), `null` kept apart from absent.
    #[test]
    fn stored_summaries_read_back_byte_for_byte() {
        let s = round_trip(LAB_LOSS_LATENCY);
        assert_eq!((s.sizes.as_slice(), s.trials.len()), (&[512, 1518][..], 61));
        assert_eq!(s.latency[0].tries, Some(3));
        assert_eq!(s.latency[0].bound, Some(None));
        assert_eq!(s.latency[0].rtt().map(|r| r.n), Some(75));
        assert_eq!(s.loss[0].steps[0].bound, Some(Bound::Dut));
        assert_eq!(s.throughput[0].limit, Some(Limit::Generator));

        let s = round_trip(LAB_B2B);
        let b = &s.back_to_back[0];
        assert_eq!(
            (b.frames, b.limit, b.searching),
            (Some(307.0), Some(BurstLimit::Dut), None)
        );
        assert_eq!(s.nat.enabled_by_run, Some(true));
        assert_eq!(s.nat.restored, Some(true));
        assert_eq!(s.direction, RunDirection::Send);

        let s = round_trip(STOPPED);
        assert_eq!(
            s.error.as_deref(),
            Some("stopped before every trial had run")
        );
        assert!(!s.throughput[1].done);
        assert_eq!(s.back_to_back[1].searching, Some(105));
        assert_eq!(s.latency[0].bound, None);
        assert_eq!(s.latency[1].bound, Some(Some(Bound::Dut)));
        assert_eq!(s.latency[1].rtt_ms, Some(None));
        assert_eq!(s.trials[0].burst, Some(105));
        assert_eq!(s.nat.undo, None);
    }

    /// Summaries stored before keys were added still read, every missing key its default:
    /// a throughput row without `done` (rows were final before searches were shown),
    /// `lag_*`, `loss`/`back_to_back`/`tests`; a trial without `lagged`, `sender_lag_ms` or
    /// the board's counters; a place without `unit`. Not a summary: no rows, no panic.
    #[test]
    fn old_summaries_still_read() {
        let old = serde_json::json!({
            "line_bps": 1e9, "loss_percent": 0.0,
            "throughput": [{"frame": 512, "fps": 24_500.0, "l2_bps": 100_352_000.0,
                "percent_line": 10.43, "limit": "dut", "trials": 9,
                "knee_places": [{"place": "board_qdisc", "port": "eth1", "packets": 1204,
                    "counter": "qdisc tbf drops on eth1"}]}],
            "trials": [{"test": "throughput", "frame": 512, "target_fps": 24_500.0,
                "offered_fps": 24_499.0, "offered": 244_990, "lost_frames": 0,
                "loss_ratio": 0.0, "passed": true, "generator_short": false, "bound": null}]
        });
        let s = Rfc2544Summary::deserialize(&old).expect("an early summary reads");
        let t = &s.throughput[0];
        assert!(t.done && !t.lag_limited);
        assert_eq!((t.l1_bps, t.l2_bps), (None, Some(100_352_000.0)));
        assert_eq!(t.knee_places.as_ref().map(|p| p[0].unit.as_str()), Some(""));
        assert_eq!(s.trials[0].sender_lag_ms, None);
        assert!(!s.trials[0].verdict.lagged);
        assert!(s.tests.is_empty() && s.back_to_back.is_empty() && s.error.is_none());

        assert_eq!(
            Rfc2544Summary::of_summary(&serde_json::Value::Null),
            Rfc2544Summary::default()
        );
        let wrong = serde_json::json!({"throughput": "none"});
        assert!(Rfc2544Summary::of_summary(&wrong).throughput.is_empty());
    }
}
