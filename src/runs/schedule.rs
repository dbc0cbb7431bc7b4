//! The scheduler: once a second it starts the suite of every enabled schedule that is due
//! (see `crate::spec::schedule`), on the same path as *Run now*. A firing is skipped, with
//! the reason logged and kept on the schedule, while the suite run of the schedule's previous
//! firing is still running. Before each firing the history caps are applied to scheduled
//! suite runs (the oldest go first). A schedule that was due while netperfd was down fires
//! once when it is back, then keeps its rhythm from then on; one past its stop date is
//! disabled.

use crate::model::time::now_ms;
use crate::runs::live::Hub;
use crate::spec::schedule::{from_stored, next_after};
use crate::spec::suite::RunTarget;
use crate::store::ScheduleRow;
use std::time::Duration;

/// How often due schedules are looked for.
const TICK: Duration = Duration::from_secs(1);

/// Start the scheduler in the background (daemon start).
pub fn start(hub: Hub) {
    tokio::spawn(async move {
        let mut t = tokio::time::interval(TICK);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            t.tick().await;
            if let Err(e) = tick(&hub, now_ms()) {
                tracing::error!("scheduler: {e}");
            }
        }
    });
}

/// Fire every schedule due at `now` (Unix ms); returns how many suites were started.
pub fn tick(hub: &Hub, now: i64) -> Result<usize, String> {
    let store = hub.store();
    let due: Vec<ScheduleRow> = store
        .schedules()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|s| s.enabled && s.next_at.is_some_and(|n| n <= now))
        .collect();
    let mut started = 0;
    for s in due {
        if fire(hub, &s, now)? {
            started += 1;
        }
    }
    Ok(started)
}

fn fire(hub: &Hub, s: &ScheduleRow, now: i64) -> Result<bool, String> {
    let store = hub.store();
    let e = |e: crate::store::StoreError| e.to_string();
    let record = |sid: Option<i64>, note: &str, next: Option<i64>| {
        store.schedule_fired(s.id, now, sid, note, next).map_err(e)
    };
    let Some(every) = from_stored(s.every_s, s.daily_at.as_deref()) else {
        record(None, "disabled: the stored schedule has no period", None)?;
        return Ok(false);
    };
    if s.stop_at.is_some_and(|t| now >= t) {
        tracing::info!(schedule = s.id, "schedule reached its stop date; disabled");
        record(None, "ended: the stop date has passed", None)?;
        return Ok(false);
    }
    let next = next_after(every, now, s.stop_at);
    if let Some(prev) = s.last_suite_id {
        if store.suite_running(prev).map_err(e)? {
            let note = format!("skipped: suite run {prev} of the previous firing is still running");
            tracing::warn!(schedule = s.id, suite = prev, "scheduled run {note}");
            record(None, &note, next)?;
            return Ok(false);
        }
    }
    let Some(row) = store.suite_def(s.def_id).map_err(e)? else {
        record(None, "disabled: its suite definition is gone", None)?;
        return Ok(false);
    };
    let target: RunTarget = match serde_json::from_value(s.target.clone()) {
        Ok(t) => t,
        Err(x) => {
            record(
                None,
                &format!("disabled: stored target is invalid: {x}"),
                None,
            )?;
            return Ok(false);
        }
    };
    if let Err(x) = store.prune_scheduled(store.retention()) {
        tracing::warn!("history retention: {x}");
    }
    match crate::runs::suites::run::start_def(hub, &row, &target) {
        Ok(sid) => {
            tracing::info!(
                schedule = s.id,
                suite = sid,
                "scheduled suite '{}' started",
                row.name
            );
            record(Some(sid), &format!("started suite run {sid}"), next)?;
            Ok(true)
        }
        Err(x) => {
            tracing::warn!(
                schedule = s.id,
                "scheduled suite '{}' cannot start: {x}",
                row.name
            );
            record(None, &format!("could not start: {x}"), next)?;
            Ok(false)
        }
    }
}
