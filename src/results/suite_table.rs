//! Result tables of suites and compared runs: one row of figures per test ([`StepResult`]),
//! a suite's table ([`SuiteResult`]).

use crate::model::{RunKind, RunProtocol, RunStatus, StepStatus};
use crate::spec::suite::PlanEntry;
use crate::store::{RunRow, Store, SuiteRow};
use serde::Serialize;

/// One test's figures as result tables show them (a suite step, or a run being compared).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub(crate) struct StepResult {
    /// 1-based position in the suite (or in the comparison).
    pub index: usize,
    /// Row name: "TCP send", "UDP receive 400M".
    pub label: String,
    pub run_id: Option<i64>,
    /// running / completed / failed / aborted, or pending / skipped for tests not run.
    pub status: StepStatus,
    /// "TCP" / "UDP" (the run's protocol word).
    pub protocol: RunProtocol,
    /// send / receive / bidir (board's view).
    pub direction: String,
    /// Target bitrate per stream, bits/s (0 = unlimited).
    pub target_bps: u64,
    /// The table's bitrate: the receiver's (goodput), else the sender's, bits/s.
    pub bitrate_bps: Option<f64>,
    pub sender_bps: Option<f64>,
    pub receiver_bps: Option<f64>,
    /// Paced runs: target (all streams), sent, received and whether the sender fell short.
    pub rate_check: Option<crate::engine::shortfall::RateCheck>,
    /// TCP retransmits (sender side).
    pub retransmits: Option<i64>,
    /// UDP receiver jitter, ms.
    pub jitter_ms: Option<f64>,
    /// UDP datagrams lost / total and loss %.
    pub lost: Option<i64>,
    pub total: Option<i64>,
    pub loss_percent: Option<f64>,
    /// Busiest core's busy share over the run, % (from the 1 Hz monitor; None without
    /// samples).
    pub cpu_max_percent: Option<f64>,
    /// Board port (bind_dev or local address) and peer.
    pub board_port: String,
    pub peer: String,
    /// Asked duration of the test, seconds (`-t`; the plan's for a test not run yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Unix ms.
    pub started_at: Option<i64>,
    /// When the test ended, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    pub error: Option<String>,
    /// The limits this row is checked against (suite runs with thresholds only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<crate::spec::thresholds::Thresholds>,
    /// The port's ceiling, bits/s (filled when a `min_ceiling_percent` limit needs it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_bps: Option<f64>,
    /// How the ceiling was computed, or why it is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_basis: Option<String>,
    /// Latency runs (suite step kind `latency`): idle and loaded RTT, increase, RPM, goodput.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<crate::results::latency::LatencyFigures>,
    /// RFC 2544 runs (suite step kind `rfc2544`): throughput and latency per frame size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rfc2544: Option<crate::results::rfc2544::Rfc2544Figures>,
    /// Pass / fail against `thresholds` (see [`crate::results::verdict`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::results::verdict::StepVerdict>,
    /// UDP and forwarding runs that lost datagrams: where, in a few words (the loss ledger's
    /// headline, [`crate::results::ledger::headline`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_where: Option<String>,
}

/// Busiest core's highest busy %, over all of a run's samples.
pub(crate) fn cpu_max(store: &Store, run_id: i64) -> Option<f64> {
    store
        .cpu_samples(run_id)
        .ok()?
        .iter()
        .filter(|c| c.cpu >= 0)
        .map(|c| c.busy())
        .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))))
}

/// What a result row shows of a run's stored `params`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RowParams {
    /// Target bitrate per stream, bits/s (0 = unlimited or not said).
    pub bandwidth: u64,
    /// Streams (1 when not said).
    pub parallel: u64,
    /// Asked duration, s; `None` when not said or 0 (`-n`/`-k`).
    pub time_s: Option<f64>,
}

impl RowParams {
    /// `r.params` read once, through the kind's typed params
    /// ([`crate::results::asked::Asked`]); what a kind does not say is as in [`Self::NONE`].
    pub(crate) fn of(r: &RunRow) -> RowParams {
        let a = crate::results::asked::Asked::of(r);
        RowParams {
            bandwidth: a.per_stream_bps.unwrap_or(Self::NONE.bandwidth),
            parallel: a.parallel.unwrap_or(Self::NONE.parallel),
            time_s: a.time_s,
        }
    }

    /// Nothing said: unlimited, one stream, no duration.
    const NONE: RowParams = RowParams {
        bandwidth: 0,
        parallel: 1,
        time_s: None,
    };
}

/// The default row name of a stored run ("TCP send", "UDP receive 400M", "Latency down").
pub(crate) fn run_label(r: &RunRow) -> String {
    match r.kind {
        RunKind::Latency => {
            if let Ok(l) =
                serde_json::from_value::<crate::spec::latency::LatencySpec>(r.params.clone())
            {
                return crate::spec::suite_latency::label(&l);
            }
        }
        RunKind::Iperf3
        | RunKind::Iperf2
        | RunKind::Multi
        | RunKind::Forward
        | RunKind::Monitor
        | RunKind::HttpServe
        | RunKind::HttpGet
        | RunKind::TcpSink
        | RunKind::TcpSource
        | RunKind::Rfc2544 => {}
    }
    let RowParams {
        bandwidth: bw,
        parallel: par,
        ..
    } = RowParams::of(r);
    let mut l = format!("{} {}", r.protocol, r.direction);
    if r.protocol == RunProtocol::Udp || bw > 0 {
        l.push(' ');
        l.push_str(&crate::spec::suite::rate_word(bw));
    }
    if par > 1 {
        l.push_str(&format!(" ×{par}"));
    }
    l
}

/// A stored run's figures.
pub(crate) fn run_result(store: &Store, index: usize, label: &str, r: &RunRow) -> StepResult {
    let params = RowParams::of(r);
    StepResult {
        index,
        label: label.to_string(),
        run_id: Some(r.id),
        status: r.status.into(),
        protocol: r.protocol.clone(),
        direction: r.direction.to_string(),
        target_bps: params.bandwidth,
        bitrate_bps: r.receiver_bps.or(r.sender_bps),
        sender_bps: r.sender_bps,
        receiver_bps: r.receiver_bps,
        rate_check: crate::results::shortfall::for_run(r),
        retransmits: r.retransmits,
        jitter_ms: r.jitter_ms,
        lost: r.lost_packets,
        total: r.total_packets,
        loss_percent: r.lost_percent,
        cpu_max_percent: cpu_max(store, r.id),
        board_port: match (
            crate::results::view::board_ports(r),
            r.local_host.is_empty(),
        ) {
            (Some(d), _) => d,
            (None, false) => r.local_host.clone(),
            (None, true) => String::new(),
        },
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        duration_s: params.time_s,
        started_at: Some(r.started_at),
        ended_at: r.ended_at,
        error: r.error.clone(),
        latency: r
            .kind
            .has_latency_probes()
            .then(|| crate::results::latency::LatencyFigures::of_summary(&r.summary))
            .flatten(),
        rfc2544: match r.kind {
            RunKind::Rfc2544 => Some(crate::results::rfc2544::Rfc2544Figures::of_summary(
                &r.summary,
            )),
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency => None,
        },
        lost_where: store
            .run_board(r.id)
            .ok()
            .and_then(|(_, l)| l)
            .and_then(|l| serde_json::from_value(l).ok())
            .and_then(|l| crate::results::ledger::headline(&l)),
        ..Default::default()
    }
}

/// A suite run with its result table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SuiteResult {
    pub suite: SuiteRow,
    /// Board / change label.
    pub label: String,
    pub def_id: Option<i64>,
    /// One row per planned test, in order (tests not run yet are pending / skipped).
    pub steps: Vec<StepResult>,
    /// PASS / FAIL with the failing rows; `None` without thresholds or while running.
    pub verdict: Option<crate::results::verdict::SuiteVerdict>,
}

/// Load suite `sid` and build its table; `Ok(None)` if there is no such suite.
pub(crate) fn suite_result(store: &Store, sid: i64) -> Result<Option<SuiteResult>, String> {
    let e = |e: crate::store::StoreError| e.to_string();
    let Some((suite, runs)) = store.suite(sid).map_err(e)? else {
        return Ok(None);
    };
    let extra = store.suite_extra(sid).map_err(e)?.unwrap_or_default();
    let plan: Vec<PlanEntry> = serde_json::from_value(extra.plan.clone()).unwrap_or_default();
    let n = plan.len().max(runs.len());
    let mut steps = Vec::with_capacity(n);
    for i in 0..n {
        let label = plan
            .get(i)
            .map(|p| p.label.clone())
            .or_else(|| runs.get(i).map(run_label))
            .unwrap_or_default();
        let thresholds = plan.get(i).and_then(|p| p.thresholds);
        steps.push(match runs.get(i) {
            Some(r) => {
                let mut s = run_result(store, i + 1, &label, r);
                s.thresholds = thresholds;
                if s.duration_s.is_none() {
                    s.duration_s = plan.get(i).map(|p| f64::from(p.time));
                }
                if thresholds.is_some_and(|t| t.min_ceiling_percent.is_some()) {
                    if let Some(a) = crate::results::charts::analyze_run(store, r) {
                        s.ceiling_bps = a.ceiling_bps;
                        s.ceiling_basis = Some(a.ceiling_basis);
                    }
                }
                s
            }
            None => {
                let p = &plan[i];
                StepResult {
                    index: i + 1,
                    label,
                    status: if suite.status == RunStatus::Running {
                        StepStatus::Pending
                    } else {
                        StepStatus::Skipped
                    },
                    protocol: RunProtocol::parse(&p.protocol),
                    direction: p.direction.clone(),
                    target_bps: p.target_bps,
                    peer: suite.peer_host.clone(),
                    duration_s: Some(f64::from(p.time)),
                    thresholds,
                    ..Default::default()
                }
            }
        });
    }
    let mut r = SuiteResult {
        label: extra.label.unwrap_or_default(),
        def_id: extra.def_id,
        suite,
        steps,
        verdict: None,
    };
    crate::results::verdict::judge(&mut r);
    Ok(Some(r))
}
