//! The one writer of a run, whatever its kind: [`begin`] stores the new run with the network
//! configuration it starts under and makes it live (the registry: subscribers, stop; the 1 Hz
//! monitor); [`Recorder::interval`] stores and fans out each interval in order;
//! [`Recorder::end`] stores how it ended and tells subscribers. A recorder dropped without an
//! end (a task that panicked or returned early) marks its run aborted, so no run stays
//! "running" while nothing measures it. The recorder holds the store, the registry and the
//! monitor; nothing else writes a run's end.
//!
//! Runs start through [`crate::runs::context::RunContext::start`] (`begin`, the kind's task on
//! the context's runtime, then the [`Ended`] it returns stored; see `docs/run-kinds.md`).

use super::context::RunContext;
use super::monitor::Monitor;
use super::registry::{relock, LiveEvent, RunRegistry};
use crate::engine::report::{IntervalRecord, Report};
use crate::model::{RunFigures, RunStatus};
use crate::store::{NewRun, Store};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, oneshot, Notify};

/// Which ports the 1 Hz monitor samples for a run.
#[derive(Debug, Clone)]
pub enum Sampling {
    /// These ports (interface names); empty = the ports that carry the run's addresses.
    Ports(Vec<String>),
    /// None: a leg of a multi-port run, whose parent run is sampled once for all legs.
    Parent,
}

/// What a finished run measured.
enum Outcome<'a> {
    /// An iperf3 test's report (`None` when the test ended before it had one).
    Report(Option<&'a Report>),
    /// Any other kind: its headline figures and its own summary (JSON object).
    Figures(&'a RunFigures, Option<&'a serde_json::Value>),
}

/// What a run's task measured.
pub enum Measured {
    /// An iperf3-like report (`None` when the test ended before it had one); the run's
    /// figures are taken from it.
    Report(Option<Box<Report>>),
    /// The run's headline figures.
    Figures(RunFigures),
}

/// How a run's task ended: what [`RunContext::start`] stores.
pub struct Ended {
    pub status: RunStatus,
    pub measured: Measured,
    /// The kind's own summary (a JSON object: the run page's and the export's `summary`).
    pub summary: Option<serde_json::Value>,
    /// Why it failed or was cut short, for people.
    pub error: Option<String>,
}

/// The error of a run whose recorder was dropped without an end.
const DROPPED: &str = "the run ended without a result (its recorder was dropped)";

impl Ended {
    /// A run that ended without a result (its recorder, or its [`ServedRun`], was dropped):
    /// aborted, no figures.
    pub fn dropped() -> Ended {
        Ended::aborted(DROPPED)
    }

    /// Aborted with `error`, no figures.
    pub fn aborted(error: &str) -> Ended {
        Ended {
            status: RunStatus::Aborted,
            measured: Measured::Figures(RunFigures::default()),
            summary: None,
            error: Some(error.into()),
        }
    }
}

/// A run started by [`RunContext::start_served`]: its recorder for intervals, and the end
/// its task waits for. Dropped without an end, its run is stored aborted.
pub struct ServedRun {
    recorder: Recorder,
    ending: Mutex<Option<Ending>>,
}

/// Where a served run's end goes, and the handle of its task.
type Ending = (oneshot::Sender<Ended>, tokio::task::JoinHandle<RunStatus>);

impl ServedRun {
    pub(super) fn new(
        recorder: Recorder,
        ending: oneshot::Sender<Ended>,
        handle: tokio::task::JoinHandle<RunStatus>,
    ) -> ServedRun {
        ServedRun {
            recorder,
            ending: Mutex::new(Some((ending, handle))),
        }
    }

    /// The run's recorder (intervals, endpoints, id).
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// End the run with `e` (stored by its task). A second end does nothing.
    pub fn end(&self, e: Ended) {
        self.send(e);
    }

    /// End the run with `e` and wait until its end is stored; its status (`None`: ended
    /// already, or its task failed).
    pub async fn end_and_wait(&self, e: Ended) -> Option<RunStatus> {
        self.send(e)?.await.ok()
    }

    fn send(&self, e: Ended) -> Option<tokio::task::JoinHandle<RunStatus>> {
        let (tx, handle) = relock(&self.ending).take()?;
        let _ = tx.send(e);
        Some(handle)
    }
}

struct Inner {
    store: Arc<Store>,
    registry: Arc<RunRegistry>,
    monitor: Arc<Monitor>,
    id: i64,
    seq: AtomicI64,
    tx: broadcast::Sender<LiveEvent>,
    finished: AtomicBool,
}

/// A run being recorded. Cheap to clone (the task that measures and the task that forwards
/// its intervals can each hold one); the run is finished once.
#[derive(Clone)]
pub struct Recorder(Arc<Inner>);

/// Record a new run and make it live: stored as running, with the network configuration it
/// starts under; [`RunRegistry::stop`] notifies `cancel`; the monitor samples as `sampling`
/// says. Only [`RunContext::start`] calls it. Errors: the store could not record it (nothing
/// runs then).
pub(super) fn begin(
    ctx: &RunContext,
    run: &NewRun,
    cancel: Option<Arc<Notify>>,
    sampling: Sampling,
) -> Result<Recorder, String> {
    let id = ctx
        .store()
        .create_run(run)
        .map_err(|e| format!("cannot record the run: {e}"))?;
    crate::board::record_net_config(ctx.store(), id, ctx.board().map(|b| &**b));
    let tx = ctx.registry().register(id, cancel);
    if let Sampling::Ports(ports) = sampling {
        ctx.monitor().watch(id, ports, tx.clone());
    }
    Ok(Recorder(Arc::new(Inner {
        store: ctx.store().clone(),
        registry: ctx.registry().clone(),
        monitor: ctx.monitor().clone(),
        id,
        seq: AtomicI64::new(0),
        tx,
        finished: AtomicBool::new(false),
    })))
}

impl Recorder {
    /// Store how the run ended: its summary (when it has one) with its status, what it
    /// measured and its error; subscribers are told. A second end does nothing.
    pub fn end(&self, e: &Ended) {
        match &e.measured {
            Measured::Report(r) => {
                if let Some(s) = &e.summary {
                    if let Err(x) = self.0.store.set_run_summary(self.0.id, s) {
                        tracing::error!(run = self.0.id, "cannot store the summary: {x}");
                    }
                }
                self.finish(e.status, Outcome::Report(r.as_deref()), e.error.as_deref());
            }
            Measured::Figures(f) => self.finish(
                e.status,
                Outcome::Figures(f, e.summary.as_ref()),
                e.error.as_deref(),
            ),
        }
    }

    /// The run's id in history.
    pub fn id(&self) -> i64 {
        self.0.id
    }

    /// The board's address and port of the run, once its connection is up.
    pub fn endpoints(&self, local_host: &str, local_port: u16) {
        if let Err(e) = self
            .0
            .store
            .set_run_endpoints(self.0.id, local_host, local_port)
        {
            tracing::error!(run = self.0.id, "cannot store the run's address: {e}");
        }
    }

    /// Store the next interval (numbered from 0 in arrival order) and send it to subscribers.
    pub fn interval(&self, rec: IntervalRecord) {
        let (id, seq) = (self.0.id, self.0.seq.fetch_add(1, Ordering::SeqCst));
        if let Err(e) = self.0.store.add_interval(id, seq, &rec) {
            tracing::error!(run = id, "cannot store an interval: {e}");
        }
        let _ = self.0.tx.send(LiveEvent::Interval { seq, record: rec });
    }

    /// The intervals stored so far (e.g. to derive a figure the kind's outcome lacks).
    pub fn store_intervals(&self) -> Vec<crate::store::IntervalRow> {
        self.0.store.intervals(self.0.id).unwrap_or_default()
    }

    /// How many intervals were recorded so far.
    pub fn intervals(&self) -> i64 {
        self.0.seq.load(Ordering::SeqCst)
    }

    /// Store the run's end: its status, what it measured and its error, if any; subscribers
    /// are told. A second call does nothing.
    fn finish(&self, status: RunStatus, outcome: Outcome<'_>, error: Option<&str>) {
        if self.0.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        match outcome {
            Outcome::Report(r) => self.0.done(status, r, error),
            Outcome::Figures(f, s) => self.0.done_with(status, f, s, error),
        }
    }
}

impl Inner {
    /// End an iperf3 run with its report (if any): the board's counters, the end stored,
    /// subscribers told.
    fn done(&self, status: RunStatus, report: Option<&Report>, error: Option<&str>) {
        let id = self.id;
        let figures = report
            .map(crate::results::figures::of_report)
            .unwrap_or_default();
        self.monitor.board_end(id, &figures, report, None);
        let (rep, err) = (report.cloned(), error.map(String::from));
        let ended = crate::model::time::now_ms();
        self.registry.store_end(
            &self.store,
            id,
            (status, ended),
            error,
            Box::new(move |s: &Store| {
                s.finish_run_at(id, status, rep.as_ref(), &figures, err.as_deref(), ended)
            }),
        );
        self.untrack(status, error);
    }

    /// End a run that has no iperf3 report (HTTP, raw TCP, forwarding, monitor…) with its
    /// figures and kind-specific summary.
    fn done_with(
        &self,
        status: RunStatus,
        figures: &RunFigures,
        summary: Option<&serde_json::Value>,
        error: Option<&str>,
    ) {
        let id = self.id;
        self.monitor.board_end(id, figures, None, summary);
        let (fig, sum, err) = (figures.clone(), summary.cloned(), error.map(String::from));
        let ended = crate::model::time::now_ms();
        self.registry.store_end(
            &self.store,
            id,
            (status, ended),
            error,
            Box::new(move |s: &Store| {
                s.finish_run_with(id, status, &fig, sum.as_ref(), err.as_deref(), ended)
            }),
        );
        self.untrack(status, error);
    }

    /// The last monitor sample, then out of the registry (subscribers told).
    fn untrack(&self, status: RunStatus, error: Option<&str>) {
        self.monitor.final_sample(self.id);
        self.registry.unregister(self.id, status, error);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.finished.swap(true, Ordering::SeqCst) {
            self.done_with(
                RunStatus::Aborted,
                &RunFigures::default(),
                None,
                Some(DROPPED),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDirection, RunProtocol, RunRole};

    fn client_run() -> NewRun {
        NewRun {
            role: RunRole::Client,
            protocol: RunProtocol::Tcp,
            peer_host: "192.0.2.2".into(),
            peer_port: 5201,
            direction: RunDirection::Send,
            ..Default::default()
        }
    }

    fn ctx() -> RunContext {
        let d = crate::scratch::dir("recorder");
        RunContext::new(Arc::new(Store::open_dir(&d).unwrap()))
    }

    #[test]
    fn a_dropped_recorder_aborts_its_run_and_finish_is_once() {
        let h = ctx();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let r = begin(&h, &client_run(), None, Sampling::Parent).unwrap();
            let id = r.id();
            assert!(h.registry().is_live(id));
            assert_eq!(
                h.store().get_run(id).unwrap().unwrap().status,
                RunStatus::Running
            );
            drop(r);
            let row = h.store().get_run(id).unwrap().unwrap();
            assert_eq!(row.status, RunStatus::Aborted);
            assert!(row.error.unwrap().contains("without a result"));
            assert!(!h.registry().is_live(id));

            let r = begin(&h, &client_run(), None, Sampling::Parent).unwrap();
            let figures = RunFigures {
                receiver_bps: Some(1e9),
                ..Default::default()
            };
            r.finish(RunStatus::Completed, Outcome::Figures(&figures, None), None);
            let id = r.id();
            r.finish(RunStatus::Failed, Outcome::Report(None), Some("late"));
            drop(r);
            let row = h.store().get_run(id).unwrap().unwrap();
            assert_eq!(row.status, RunStatus::Completed);
            assert_eq!(row.receiver_bps, Some(1e9));
            assert_eq!(row.error, None);
        });
    }
}
