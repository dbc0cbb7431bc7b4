//! The scheduler: once a second it starts the suite of every enabled schedule that is due
//! (see `crate::spec::schedule`), on the same path as *Run now*. A firing is skipped, with
//! the reason logged and kept on the schedule, while the suite run of the schedule's previous
//! firing is still running. Before each firing the history caps are applied to scheduled
//! suite runs (the oldest go first). A schedule that was due while netperfd was down fires
//! once when it is back, then keeps its rhythm from then on; one past its stop date is
//! disabled.

use crate::model::time::now_ms;
use crate::runs::context::RunContext;
use crate::spec::schedule::{from_stored, next_after};
use crate::spec::suite::RunTargetForm;
use crate::store::ScheduleRow;
use std::time::Duration;

/// How often due schedules are looked for.
const TICK: Duration = Duration::from_secs(1);

/// Most schedules the board keeps; creating one more is refused with a clear error (each
/// firing is a suite run on this board: 100 is far more than a board can usefully run).
pub(crate) const MAX_SCHEDULES: usize = 100;

/// Most suite runs started by schedules that run at once. A schedule due while this many
/// run waits (it stays due and fires, oldest due first, when one has ended): 1,000 schedules
/// due at the same second used to start 1,000 suites at once (520 threads, a stock 1 s test
/// took 14 s).
pub(crate) const MAX_SCHEDULED_RUNNING: usize = 2;

/// Start the scheduler in the background (daemon start): one task for every schedule.
pub(crate) fn start(ctx: RunContext) {
    crate::engine::task::spawn(async move {
        let mut t = tokio::time::interval(TICK);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut running = Vec::new();
        loop {
            t.tick().await;
            if let Err(e) = tick(&ctx, now_ms(), &mut running) {
                tracing::error!("scheduler: {e}");
            }
        }
    });
}

/// Fire the schedules due at `now` (Unix ms), oldest due first, while fewer than
/// [`MAX_SCHEDULED_RUNNING`] suite runs of the scheduler (`running`, suite ids; ended ones
/// are dropped from it here) are running; the others stay due. Returns how many suites were
/// started.
pub(crate) fn tick(ctx: &RunContext, now: i64, running: &mut Vec<i64>) -> Result<usize, String> {
    let store = ctx.store();
    running.retain(|sid| store.suite_running(*sid).unwrap_or(false));
    if running.len() >= MAX_SCHEDULED_RUNNING {
        return Ok(0);
    }
    let mut due: Vec<ScheduleRow> = store
        .schedules()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|s| s.enabled && s.next_at.is_some_and(|n| n <= now))
        .collect();
    crate::model::order::sort_by_key(&mut due, |s| (s.next_at, s.id));
    let mut started = 0;
    for s in due {
        if running.len() >= MAX_SCHEDULED_RUNNING {
            break;
        }
        if let Some(sid) = fire(ctx, &s, now)? {
            running.push(sid);
            started += 1;
        }
    }
    Ok(started)
}

/// Fire one due schedule: the suite run's id when one started.
fn fire(ctx: &RunContext, s: &ScheduleRow, now: i64) -> Result<Option<i64>, String> {
    let store = ctx.store();
    let e = |e: crate::store::StoreError| e.to_string();
    let record = |sid: Option<i64>, note: &str, next: Option<i64>| {
        store.schedule_fired(s.id, now, sid, note, next).map_err(e)
    };
    let Some(every) = from_stored(s.every_s, s.daily_at.as_deref()) else {
        record(None, "disabled: the stored schedule has no period", None)?;
        return Ok(None);
    };
    if s.stop_at.is_some_and(|t| now >= t) {
        tracing::info!(schedule = s.id, "schedule reached its stop date; disabled");
        record(None, "ended: the stop date has passed", None)?;
        return Ok(None);
    }
    let next = next_after(every, now, s.stop_at);
    if let Some(prev) = s.last_suite_id {
        if store.suite_running(prev).map_err(e)? {
            let note = format!("skipped: suite run {prev} of the previous firing is still running");
            tracing::warn!(schedule = s.id, suite = prev, "scheduled run {note}");
            record(None, &note, next)?;
            return Ok(None);
        }
    }
    let Some(row) = store.suite_def(s.def_id).map_err(e)? else {
        record(None, "disabled: its suite definition is gone", None)?;
        return Ok(None);
    };
    let target: RunTargetForm = match serde_json::from_value(s.target.clone()) {
        Ok(t) => t,
        Err(x) => {
            record(
                None,
                &format!("disabled: stored target is invalid: {x}"),
                None,
            )?;
            return Ok(None);
        }
    };
    if let Err(x) = store.prune_scheduled(store.retention()) {
        tracing::warn!("history retention: {x}");
    }
    // The stored target's numbers are read here (a bad one: this firing cannot start).
    let started = target
        .to_target()
        .and_then(|t| crate::runs::suites::run::start_def(ctx, &row, &t));
    match started {
        Ok(sid) => {
            tracing::info!(
                schedule = s.id,
                suite = sid,
                "scheduled suite '{}' started",
                row.name
            );
            record(Some(sid), &format!("started suite run {sid}"), next)?;
            Ok(Some(sid))
        }
        Err(x) => {
            tracing::warn!(
                schedule = s.id,
                "scheduled suite '{}' cannot start: {x}",
                row.name
            );
            record(None, &format!("could not start: {x}"), next)?;
            Ok(None)
        }
    }
}
