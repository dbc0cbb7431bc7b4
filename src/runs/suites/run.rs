//! Running a suite and reading its result table.
//!
//! Tests run in order, each a normal run in history (`runs.suite_id` = the suite): an iperf3
//! client test, a latency-under-load run (step kind `latency`, through
//! [`crate::runs::latency::start_latency`]) or an RFC 2544 benchmark (step kind `rfc2544`, through
//! [`crate::runs::rfc2544::start_request`]). A failed
//! test is recorded and the suite goes on with the next one (one unreachable rate must not
//! hide the others); the suite then ends `failed`. Stopping the suite (or one of its tests)
//! stops the current test and skips the rest; the suite ends `aborted`. Otherwise it ends
//! `completed`.

use crate::engine::iperf3::client::ClientSpec;
use crate::model::RunStatus;
use crate::runs::context::RunContext;
use crate::spec::suite::{PlanEntry, PlannedRun, PlannedTest, RunTarget};
use crate::store::{Store, SuiteExtra};

/// Pause between tests so a stock `iperf3 -s` (one test at a time) re-arms, ms.
const REARM_MS: u64 = 500;

/// The board's host name (the default label of a suite run).
pub(crate) fn board_label() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Record suite `name` and run `specs` one after another in the background (the UDP
/// ladder form). Returns the suite id at once.
pub(crate) fn start_suite(
    ctx: &RunContext,
    name: &str,
    specs: Vec<ClientSpec>,
) -> Result<i64, String> {
    let tests = specs
        .into_iter()
        .enumerate()
        .map(|(i, spec)| PlannedTest {
            step: i + 1,
            label: crate::spec::suite::spec_label(&spec),
            spec: PlannedRun::Iperf3(spec),
            thresholds: None,
        })
        .collect();
    start_planned(ctx, name, None, None, tests)
}

/// Record a suite run of definition `def_id` (if any) labelled `label` (default: the
/// board's host name) and run `tests` in order in the background; returns the suite id
/// at once. See the module doc for failed and stopped tests.
pub(crate) fn start_planned(
    ctx: &RunContext,
    name: &str,
    def_id: Option<i64>,
    label: Option<String>,
    tests: Vec<PlannedTest>,
) -> Result<i64, String> {
    let host = tests
        .first()
        .map(|t| t.spec.host().to_string())
        .ok_or("a suite needs at least one test")?;
    let plan: Vec<PlanEntry> = tests.iter().map(PlannedTest::entry).collect();
    let store = ctx.store().clone();
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
    let ctx2 = ctx.clone();
    ctx.spawn(async move {
        let mut all_ok = true;
        let n = tests.len();
        for (i, t) in tests.into_iter().enumerate() {
            if !still_running(&store, sid) {
                return;
            }
            let started = match t.spec {
                PlannedRun::Iperf3(spec) => {
                    crate::runs::iperf3::start_client_in(&ctx2, spec, Some(sid))
                }
                PlannedRun::Latency(spec) => {
                    crate::runs::latency::start_latency(&ctx2, spec, Some(sid)).await
                }
                PlannedRun::Rfc2544(req) => {
                    crate::runs::rfc2544::start_request(&ctx2, req, Some(sid)).await
                }
            };
            let status = match started {
                Ok((rid, h)) => {
                    // Stopped between the check above and the start: stop this one too.
                    if !still_running(&store, sid) {
                        ctx2.registry().stop(rid);
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
pub(crate) fn stop_suite(ctx: &RunContext, sid: i64) -> Result<bool, String> {
    let (s, runs) = ctx
        .store()
        .suite(sid)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("there is no suite {sid}"))?;
    if s.status != RunStatus::Running {
        return Ok(false);
    }
    ctx.store()
        .finish_suite_if_running(sid, RunStatus::Aborted)
        .map_err(|e| e.to_string())?;
    for r in runs.iter().filter(|r| r.status == RunStatus::Running) {
        ctx.registry().stop(r.id);
    }
    Ok(true)
}

fn still_running(store: &Store, sid: i64) -> bool {
    matches!(store.suite(sid), Ok(Some((s, _))) if s.status == RunStatus::Running)
}

/// Check definition `row` against `t` and start it; returns the suite id.
pub(crate) fn start_def(
    ctx: &RunContext,
    row: &crate::store::SuiteDefRow,
    t: &RunTarget,
) -> Result<i64, String> {
    let d = crate::spec::suite::from_row(row)?;
    let tests = d.plan(t, &crate::board::ports())?;
    start_planned(ctx, &d.name, Some(row.id), t.label.clone(), tests)
}
