//! Running a suite and reading its result table.
//!
//! Tests run in order, each a normal run in history (`runs.suite_id` = the suite). A failed
//! test is recorded and the suite goes on with the next one (one unreachable rate must not
//! hide the others); the suite then ends `failed`. Stopping the suite (or one of its tests)
//! stops the current test and skips the rest; the suite ends `aborted`. Otherwise it ends
//! `completed`.

use super::def::{PlanEntry, PlannedTest, RunTarget};
use crate::engine::iperf3::client::ClientSpec;
use crate::engine::RunStatus;
use crate::live::Hub;
use crate::store::{RunRow, Store, SuiteExtra, SuiteRow};
use serde::Serialize;

/// Pause between tests so a stock `iperf3 -s` (one test at a time) re-arms, ms.
const REARM_MS: u64 = 500;

/// The board's host name (the default label of a suite run).
pub fn board_label() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Hub {
    /// Record suite `name` and run `specs` one after another in the background (the UDP
    /// ladder form). Returns the suite id at once.
    pub fn start_suite(&self, name: &str, specs: Vec<ClientSpec>) -> Result<i64, String> {
        let tests = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| PlannedTest {
                step: i + 1,
                label: super::def::spec_label(&spec),
                spec,
            })
            .collect();
        self.start_planned(name, None, None, tests)
    }

    /// Record a suite run of definition `def_id` (if any) labelled `label` (default: the
    /// board's host name) and run `tests` in order in the background; returns the suite id
    /// at once. See the module doc for failed and stopped tests.
    pub fn start_planned(
        &self,
        name: &str,
        def_id: Option<i64>,
        label: Option<String>,
        tests: Vec<PlannedTest>,
    ) -> Result<i64, String> {
        let host = tests
            .first()
            .map(|t| t.spec.host.clone())
            .ok_or("a suite needs at least one test")?;
        let plan: Vec<PlanEntry> = tests.iter().map(PlannedTest::entry).collect();
        let store = self.store().clone();
        let sid = store.create_suite(name, &host).map_err(|e| e.to_string())?;
        let extra = SuiteExtra {
            def_id,
            label: Some(
                label
                    .filter(|l| !l.trim().is_empty())
                    .unwrap_or_else(board_label),
            ),
            plan: serde_json::to_value(&plan).unwrap_or_default(),
        };
        if let Err(e) = store.set_suite_extra(sid, &extra) {
            let _ = store.finish_suite(sid, RunStatus::Failed);
            return Err(e.to_string());
        }
        let hub = self.clone();
        tokio::spawn(async move {
            let mut all_ok = true;
            let n = tests.len();
            for (i, t) in tests.into_iter().enumerate() {
                if !still_running(&store, sid) {
                    return;
                }
                let status = match hub.start_client_in(t.spec, Some(sid)) {
                    Ok((rid, h)) => {
                        // Stopped between the check above and the start: stop this one too.
                        if !still_running(&store, sid) {
                            hub.stop(rid);
                        }
                        h.await.unwrap_or(RunStatus::Failed)
                    }
                    Err(e) => {
                        tracing::warn!(suite = sid, "cannot start a suite test: {e}");
                        RunStatus::Failed
                    }
                };
                match status {
                    RunStatus::Completed => {}
                    RunStatus::Aborted => {
                        let _ = store.finish_suite_if_running(sid, RunStatus::Aborted);
                        return;
                    }
                    _ => all_ok = false,
                }
                if i + 1 < n {
                    tokio::time::sleep(std::time::Duration::from_millis(REARM_MS)).await;
                }
            }
            let st = if all_ok {
                RunStatus::Completed
            } else {
                RunStatus::Failed
            };
            if let Err(e) = store.finish_suite_if_running(sid, st) {
                tracing::error!(suite = sid, "cannot store the end of the suite: {e}");
            }
        });
        Ok(sid)
    }

    /// Stop suite `sid`: its current test is stopped and the rest skipped. `Ok(false)` when it
    /// is not running; an error when there is no such suite.
    pub fn stop_suite(&self, sid: i64) -> Result<bool, String> {
        let (s, runs) = self
            .store()
            .suite(sid)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("there is no suite {sid}"))?;
        if s.status != "running" {
            return Ok(false);
        }
        self.store()
            .finish_suite_if_running(sid, RunStatus::Aborted)
            .map_err(|e| e.to_string())?;
        for r in runs.iter().filter(|r| r.status == "running") {
            self.stop(r.id);
        }
        Ok(true)
    }
}

fn still_running(store: &Store, sid: i64) -> bool {
    matches!(store.suite(sid), Ok(Some((s, _))) if s.status == "running")
}

/// Check definition `row` against `t` and start it; returns the suite id.
pub fn start_def(hub: &Hub, row: &crate::store::SuiteDefRow, t: &RunTarget) -> Result<i64, String> {
    let d = super::def::from_row(row)?;
    let tests = d.plan(t, &crate::system::ports())?;
    hub.start_planned(&d.name, Some(row.id), t.label.clone(), tests)
}

/// One test's figures as result tables show them (a suite step, or a run being compared).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct StepResult {
    /// 1-based position in the suite (or in the comparison).
    pub index: usize,
    /// Row name: "TCP send", "UDP receive 400M".
    pub label: String,
    pub run_id: Option<i64>,
    /// running / completed / failed / aborted, or pending / skipped for tests not run.
    pub status: String,
    /// "TCP" / "UDP".
    pub protocol: String,
    /// send / receive / bidir (board's view).
    pub direction: String,
    /// Target bitrate per stream, bits/s (0 = unlimited).
    pub target_bps: u64,
    /// The table's bitrate: the receiver's (goodput), else the sender's, bits/s.
    pub bitrate_bps: Option<f64>,
    pub sender_bps: Option<f64>,
    pub receiver_bps: Option<f64>,
    /// Paced runs: target (all streams), sent, received and whether the sender fell short.
    pub rate_check: Option<crate::shortfall::RateCheck>,
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
    /// Unix ms.
    pub started_at: Option<i64>,
    pub error: Option<String>,
}

/// Busiest core's highest busy %, over all of a run's samples.
pub fn cpu_max(store: &Store, run_id: i64) -> Option<f64> {
    store
        .cpu_samples(run_id)
        .ok()?
        .iter()
        .filter(|c| c.cpu >= 0)
        .map(|c| c.busy())
        .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))))
}

/// The default row name of a stored run ("TCP send", "UDP receive 400M").
pub fn run_label(r: &RunRow) -> String {
    let bw = r
        .params
        .get("bandwidth")
        .and_then(|b| b.as_u64())
        .unwrap_or(0);
    let par = r
        .params
        .get("parallel")
        .and_then(|b| b.as_u64())
        .unwrap_or(1);
    let mut l = format!("{} {}", r.protocol, r.direction);
    if r.protocol == "UDP" || bw > 0 {
        l.push(' ');
        l.push_str(&super::def::rate_word(bw));
    }
    if par > 1 {
        l.push_str(&format!(" ×{par}"));
    }
    l
}

/// A stored run's figures.
pub fn run_result(store: &Store, index: usize, label: &str, r: &RunRow) -> StepResult {
    StepResult {
        index,
        label: label.to_string(),
        run_id: Some(r.id),
        status: r.status.clone(),
        protocol: r.protocol.clone(),
        direction: r.direction.clone(),
        target_bps: r
            .params
            .get("bandwidth")
            .and_then(|b| b.as_u64())
            .unwrap_or(0),
        bitrate_bps: r.receiver_bps.or(r.sender_bps),
        sender_bps: r.sender_bps,
        receiver_bps: r.receiver_bps,
        rate_check: crate::shortfall::for_run(r),
        retransmits: r.retransmits,
        jitter_ms: r.jitter_ms,
        lost: r.lost_packets,
        total: r.total_packets,
        loss_percent: r.lost_percent,
        cpu_max_percent: cpu_max(store, r.id),
        board_port: match (&r.bind_dev, r.local_host.is_empty()) {
            (Some(d), _) => d.clone(),
            (None, false) => r.local_host.clone(),
            (None, true) => String::new(),
        },
        peer: format!("{}:{}", r.peer_host, r.peer_port),
        started_at: Some(r.started_at),
        error: r.error.clone(),
    }
}

/// A suite run with its result table.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteResult {
    pub suite: SuiteRow,
    /// Board / change label.
    pub label: String,
    pub def_id: Option<i64>,
    /// One row per planned test, in order (tests not run yet are pending / skipped).
    pub steps: Vec<StepResult>,
}

/// Load suite `sid` and build its table; `Ok(None)` if there is no such suite.
pub fn suite_result(store: &Store, sid: i64) -> Result<Option<SuiteResult>, String> {
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
        steps.push(match runs.get(i) {
            Some(r) => run_result(store, i + 1, &label, r),
            None => {
                let p = &plan[i];
                StepResult {
                    index: i + 1,
                    label,
                    status: if suite.status == "running" {
                        "pending"
                    } else {
                        "skipped"
                    }
                    .into(),
                    protocol: p.protocol.clone(),
                    direction: p.direction.clone(),
                    target_bps: p.target_bps,
                    peer: suite.peer_host.clone(),
                    ..Default::default()
                }
            }
        });
    }
    Ok(Some(SuiteResult {
        label: extra.label.unwrap_or_default(),
        def_id: extra.def_id,
        suite,
        steps,
    }))
}
