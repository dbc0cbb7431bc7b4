//! The one way a run is recorded, whatever its kind: [`Hub::begin`] stores the new run with the
//! network configuration it starts under and makes it live (subscribers, stop, the 1 Hz
//! monitor); [`Recorder::interval`] stores and fans out each interval in order;
//! [`Recorder::finish`] stores the outcome and tells subscribers. A recorder dropped without
//! `finish` (a task that panicked or returned early) marks its run aborted, so no run stays
//! "running" while nothing measures it.

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

impl Recorder {
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
    use crate::store::Store;

    fn client_run() -> NewRun {
        NewRun {
            role: "client".into(),
            protocol: "TCP".into(),
            peer_host: "192.0.2.2".into(),
            peer_port: 5201,
            direction: "send".into(),
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
            assert_eq!(h.store().get_run(id).unwrap().unwrap().status, "running");
            drop(r);
            let row = h.store().get_run(id).unwrap().unwrap();
            assert_eq!(row.status, "aborted");
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
            assert_eq!(row.status, "completed");
            assert_eq!(row.receiver_bps, Some(1e9));
            assert_eq!(row.error, None);
        });
    }
}
