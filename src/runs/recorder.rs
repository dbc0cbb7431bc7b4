//! The one way a run is recorded, whatever its kind: [`Hub::begin`] stores the new run with the
//! network configuration it starts under and makes it live (subscribers, stop, the 1 Hz
//! monitor); [`Recorder::interval`] stores and fans out each interval in order;
//! [`Recorder::finish`] stores the outcome and tells subscribers. A recorder dropped without
//! `finish` (a task that panicked or returned early) marks its run aborted, so no run stays
//! "running" while nothing measures it.
//!
//! A kind starts its runs with [`Hub::start_kind`]: `begin`, the kind's task on the hub's
//! runtime, then the [`Ended`] it returns stored and the recorder finished (see
//! `docs/run-kinds.md`).

use super::live::{Hub, LiveEvent};
use crate::engine::report::{IntervalRecord, Report};
use crate::model::{RunFigures, RunStatus};
use crate::store::NewRun;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use tokio::sync::{broadcast, Notify};

/// Which ports the 1 Hz monitor samples for a run.
#[derive(Debug, Clone)]
pub enum Sampling {
    /// These ports (interface names); empty = the ports that carry the run's addresses.
    Ports(Vec<String>),
    /// None: a leg of a multi-port run, whose parent run is sampled once for all legs.
    Parent,
}

/// What a finished run measured.
pub enum Outcome<'a> {
    /// An iperf3 test's report (`None` when the test ended before it had one).
    Report(Option<&'a Report>),
    /// Any other kind: its headline figures and its own summary (JSON object).
    Figures(&'a RunFigures, Option<&'a serde_json::Value>),
}

/// What a run's task measured: the owned form of [`Outcome`].
pub enum Measured {
    /// An iperf3-like report (`None` when the test ended before it had one); the run's
    /// figures are taken from it.
    Report(Option<Box<Report>>),
    /// The run's headline figures.
    Figures(RunFigures),
}

/// How a run's task ended: what [`Hub::start_kind`] stores.
pub struct Ended {
    pub status: RunStatus,
    pub measured: Measured,
    /// The kind's own summary (a JSON object: the run page's and the export's `summary`).
    pub summary: Option<serde_json::Value>,
    /// Why it failed or was cut short, for people.
    pub error: Option<String>,
}

struct Inner {
    hub: Hub,
    id: i64,
    seq: AtomicI64,
    tx: broadcast::Sender<LiveEvent>,
    finished: AtomicBool,
}

/// A run being recorded. Cheap to clone (the task that measures and the task that forwards
/// its intervals can each hold one); the run is finished once.
#[derive(Clone)]
pub struct Recorder(Arc<Inner>);

impl Hub {
    /// Record a new run and make it live: stored as running, with the network configuration
    /// it starts under; `stop` notifies `cancel`; the monitor samples as `sampling` says.
    /// Errors: the store could not record it (nothing runs then).
    pub fn begin(
        &self,
        run: &NewRun,
        cancel: Option<Arc<Notify>>,
        sampling: Sampling,
    ) -> Result<Recorder, String> {
        let id = self
            .store()
            .create_run(run)
            .map_err(|e| format!("cannot record the run: {e}"))?;
        crate::board::record_net_config(self.store(), id, self.board().map(|b| &**b));
        let tx = match sampling {
            Sampling::Ports(ports) => self.track(id, cancel, ports),
            Sampling::Parent => self.track_unmonitored(id, cancel),
        };
        Ok(Recorder(Arc::new(Inner {
            hub: self.clone(),
            id,
            seq: AtomicI64::new(0),
            tx,
            finished: AtomicBool::new(false),
        })))
    }
}

impl Hub {
    /// Start a run of a kind, the one way: record `run` ([`Hub::begin`], with a stop
    /// notifier that [`Hub::stop`] notifies), call `task` with the hub, a recorder (for
    /// intervals) and that notifier — synchronously, so it may start more (legs) before it
    /// returns its future —, run the future on the hub's runtime, then store the [`Ended`] it
    /// returns ([`Recorder::end`]). Returns the run's id and a handle resolving to its status.
    /// Errors: the store could not record the run (nothing runs then).
    pub fn start_kind<F, Fut>(
        &self,
        run: &NewRun,
        sampling: Sampling,
        task: F,
    ) -> Result<(i64, tokio::task::JoinHandle<RunStatus>), String>
    where
        F: FnOnce(Hub, Recorder, Arc<Notify>) -> Fut,
        Fut: std::future::Future<Output = Ended> + Send + 'static,
    {
        let cancel = Arc::new(Notify::new());
        let rec = self.begin(run, Some(cancel.clone()), sampling)?;
        let id = rec.id();
        let fut = task(self.clone(), rec.clone(), cancel);
        let handle = self.spawn(async move {
            let ended = fut.await;
            rec.end(&ended);
            ended.status
        });
        Ok((id, handle))
    }
}

impl Recorder {
    /// Store how the run ended: its summary (when it has one), then [`Recorder::finish`] with
    /// its status, outcome and error.
    pub fn end(&self, e: &Ended) {
        match &e.measured {
            Measured::Report(r) => {
                if let Some(s) = &e.summary {
                    if let Err(x) = self.0.hub.store().set_run_summary(self.0.id, s) {
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
            .hub
            .store()
            .set_run_endpoints(self.0.id, local_host, local_port)
        {
            tracing::error!(run = self.0.id, "cannot store the run's address: {e}");
        }
    }

    /// Store the next interval (numbered from 0 in arrival order) and send it to subscribers.
    pub fn interval(&self, rec: IntervalRecord) {
        let seq = self.0.seq.fetch_add(1, Ordering::SeqCst);
        self.0.hub.interval(self.0.id, seq, rec, &self.0.tx);
    }

    /// The intervals stored so far (e.g. to derive a figure the kind's outcome lacks).
    pub fn store_intervals(&self) -> Vec<crate::store::IntervalRow> {
        self.0.hub.store().intervals(self.0.id).unwrap_or_default()
    }

    /// How many intervals were recorded so far.
    pub fn intervals(&self) -> i64 {
        self.0.seq.load(Ordering::SeqCst)
    }

    /// Store the run's end: its status, what it measured and its error, if any; subscribers
    /// are told. A second call does nothing.
    pub fn finish(&self, status: RunStatus, outcome: Outcome<'_>, error: Option<&str>) {
        if self.0.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        match outcome {
            Outcome::Report(r) => self.0.hub.done(self.0.id, status, r, error),
            Outcome::Figures(f, s) => self.0.hub.done_with(self.0.id, status, f, s, error),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.finished.swap(true, Ordering::SeqCst) {
            self.hub.done_with(
                self.id,
                RunStatus::Aborted,
                &RunFigures::default(),
                None,
                Some("the run ended without a result (its recorder was dropped)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDirection, RunProtocol, RunRole};
    use crate::store::Store;

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

    fn hub() -> Hub {
        let d = crate::scratch::dir("recorder");
        Hub::new(Arc::new(Store::open_dir(&d).unwrap()))
    }

    #[test]
    fn a_dropped_recorder_aborts_its_run_and_finish_is_once() {
        let h = hub();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let r = h.begin(&client_run(), None, Sampling::Parent).unwrap();
            let id = r.id();
            assert!(h.is_live(id));
            assert_eq!(
                h.store().get_run(id).unwrap().unwrap().status,
                RunStatus::Running
            );
            drop(r);
            let row = h.store().get_run(id).unwrap().unwrap();
            assert_eq!(row.status, RunStatus::Aborted);
            assert!(row.error.unwrap().contains("without a result"));
            assert!(!h.is_live(id));

            let r = h.begin(&client_run(), None, Sampling::Parent).unwrap();
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
