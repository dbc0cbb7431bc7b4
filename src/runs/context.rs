//! What every run is started with: the store, the registry of live runs, the 1 Hz monitor,
//! the runtime runs execute on, the board controller, and the anonymous services' state —
//! and the one way a run starts, [`RunContext::start`]: record the run row, register it
//! (live, stoppable, monitored), run its task on the context's runtime, store the [`Ended`]
//! it returns. A run whose end comes from outside its task (a test the built-in servers
//! serve, a connection to the payload server, TCP sink or source) starts the same way
//! through [`RunContext::start_served`]. Launchers are free functions in their kind's file
//! (`runs::iperf3`, `runs::iperf2`, `runs::multi`, `runs::latency`, `runs::traffic`,
//! `runs::forward`, `runs::rfc2544`, `runs::suites::run`) taking a `&RunContext`.

use super::anon::AnonRuns;
use super::monitor::Monitor;
use super::recorder::{self, Ended, Recorder, Sampling, ServedRun};
use super::registry::{relock, RunRegistry};
use super::traffic::Listening;
use crate::board::apply::Controller;
use crate::board::sampler::Sampler;
use crate::model::RunStatus;
use crate::store::{NewRun, Store};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// A started run: its id in history and a handle resolving to its status once its end is
/// stored.
pub(crate) type Started = (i64, tokio::task::JoinHandle<RunStatus>);

/// The run context (see the module doc). Cheap to clone; every clone shares the same store,
/// registry, monitor and services.
#[derive(Clone)]
pub struct RunContext {
    store: Arc<Store>,
    registry: Arc<RunRegistry>,
    monitor: Arc<Monitor>,
    /// The runtime runs execute on: the one the context was made in (the daemon's main
    /// runtime), never the web server's workers, so a slow store write inside a run cannot
    /// stall pages or live streams. `None` outside a runtime (then the caller's runtime is
    /// used).
    rt: Option<tokio::runtime::Handle>,
    /// The board controller (the daemon's): its port sampler and last read configuration go
    /// into each run's network snapshot, and forwarding runs change the board through it.
    /// `None` in one-shot CLI commands that do not touch the board.
    board: Option<Arc<Controller>>,
    /// Runs per peer a minute of the anonymous services (payload, sink, source): this
    /// context's budget, beyond which one peer's connections are folded into one run.
    anon: Arc<AnonRuns>,
    /// What the services started by [`super::traffic::start`] listen on (all off before).
    services: Arc<Mutex<Listening>>,
}

impl RunContext {
    /// A context over a store, with a board sampler of its own and no board controller.
    pub fn new(store: Arc<Store>) -> RunContext {
        RunContext::build(store, None)
    }

    /// A context over `store` that records runs with `board`'s view of the network and
    /// samples through `board`'s sampler (see the `board` field).
    pub fn with_board(store: Arc<Store>, board: Arc<Controller>) -> RunContext {
        RunContext::build(store, Some(board))
    }

    fn build(store: Arc<Store>, board: Option<Arc<Controller>>) -> RunContext {
        let rt = tokio::runtime::Handle::try_current().ok();
        let sampler = match &board {
            Some(b) => b.sampler().clone(),
            None => Sampler::new(),
        };
        RunContext {
            monitor: Arc::new(Monitor::new(store.clone(), sampler, rt.clone())),
            store,
            registry: Arc::default(),
            rt,
            board,
            anon: Arc::default(),
            services: Arc::default(),
        }
    }

    /// The store runs are recorded in.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The runs in progress: follow, stop, unsaved ends.
    pub fn registry(&self) -> &Arc<RunRegistry> {
        &self.registry
    }

    /// The 1 Hz monitor of runs in progress.
    pub(super) fn monitor(&self) -> &Arc<Monitor> {
        &self.monitor
    }

    /// The board controller, when the context has one.
    pub fn board(&self) -> Option<&Arc<Controller>> {
        self.board.as_ref()
    }

    /// The per-peer run budget of the anonymous services (see [`super::anon`]).
    pub fn anon(&self) -> &AnonRuns {
        &self.anon
    }

    /// What the payload server, TCP sink and TCP source listen on (all `None` before
    /// [`super::traffic::start`], or when turned off).
    pub fn listening(&self) -> Listening {
        relock(&self.services).clone()
    }

    pub(super) fn set_listening(&self, l: Listening) {
        *relock(&self.services) = l;
    }

    /// Run `fut` on the context's runtime (see the `rt` field): every task that measures or
    /// records a run is started here, whichever thread asked for the run.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.rt {
            Some(rt) => crate::engine::task::spawn_on(rt, fut),
            None => crate::engine::task::spawn(fut),
        }
    }

    /// Start a run, the one way: record `run` (stored as running with the network
    /// configuration it starts under; live; [`RunRegistry::stop`] notifies `cancel`, or
    /// cannot stop it when `None`; sampled as `sampling` says), call `task` with the context
    /// and a recorder (for intervals) — synchronously, so it may start more (legs) before it
    /// returns its future —, run the future on the context's runtime, then store the
    /// [`Ended`] it returns ([`Recorder::end`]). Returns the run's id and a handle resolving
    /// to its status. Errors: the store could not record the run (nothing runs then).
    pub fn start<F, Fut>(
        &self,
        run: &NewRun,
        sampling: Sampling,
        cancel: Option<Arc<Notify>>,
        task: F,
    ) -> Result<Started, String>
    where
        F: FnOnce(RunContext, Recorder) -> Fut,
        Fut: std::future::Future<Output = Ended> + Send + 'static,
    {
        let rec = recorder::begin(self, run, cancel, sampling)?;
        let id = rec.id();
        let fut = task(self.clone(), rec.clone());
        let handle = self.spawn(async move {
            let ended = fut.await;
            rec.end(&ended);
            ended.status
        });
        Ok((id, handle))
    }

    /// Start a run whose end comes from outside its task (see the module doc) through
    /// [`RunContext::start`]: its task waits for [`ServedRun::end`]; a [`ServedRun`] dropped
    /// without an end stores the run aborted. The caller records intervals through
    /// [`ServedRun::recorder`]. Errors: the store could not record the run.
    pub fn start_served(
        &self,
        run: &NewRun,
        sampling: Sampling,
        cancel: Option<Arc<Notify>>,
    ) -> Result<ServedRun, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut rec = None;
        let (_, handle) = self.start(run, sampling, cancel, |_, r| {
            rec = Some(r);
            async move { rx.await.unwrap_or_else(|_| Ended::dropped()) }
        })?;
        let recorder = rec.ok_or("the run's recorder was not made")?;
        Ok(ServedRun::new(recorder, tx, handle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDirection, RunFigures, RunProtocol, RunRole};
    use crate::runs::recorder::Measured;
    use crate::runs::registry::LiveEvent;

    fn served_run() -> NewRun {
        NewRun {
            role: RunRole::Server,
            protocol: RunProtocol::Tcp,
            peer_host: "192.0.2.7".into(),
            peer_port: 40_000,
            direction: RunDirection::Receive,
            ..Default::default()
        }
    }

    /// A served run goes through the one start path: live while it runs, not stoppable
    /// without a notifier, its end stored by its task when the server reports it; dropped
    /// without an end, it is stored aborted.
    #[test]
    fn a_served_run_ends_through_the_start_path() {
        let d = crate::scratch::dir("context-served");
        let ctx = RunContext::new(Arc::new(Store::open_dir(&d).unwrap()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let run = ctx
                .start_served(&served_run(), Sampling::Parent, None)
                .unwrap();
            let id = run.recorder().id();
            assert!(ctx.registry().is_live(id));
            assert!(
                !ctx.registry().stop(id),
                "a served test is not stopped here"
            );
            let figures = RunFigures {
                receiver_bps: Some(9.4e8),
                bytes: Some(1_175_000_000),
                ..Default::default()
            };
            let status = run
                .end_and_wait(Ended {
                    status: RunStatus::Completed,
                    measured: Measured::Figures(figures),
                    summary: Some(serde_json::json!({"port": 5201})),
                    error: None,
                })
                .await;
            assert_eq!(status, Some(RunStatus::Completed));
            let row = ctx.store().get_run(id).unwrap().unwrap();
            assert_eq!(row.status, RunStatus::Completed);
            assert_eq!(row.receiver_bps, Some(9.4e8));
            assert_eq!(row.bytes, Some(1_175_000_000));
            assert!(!ctx.registry().is_live(id));

            let run = ctx
                .start_served(&served_run(), Sampling::Parent, None)
                .unwrap();
            let id = run.recorder().id();
            let mut rx = ctx.registry().subscribe(id).unwrap();
            drop(run);
            match rx.recv().await.unwrap() {
                LiveEvent::Done { status, error } => {
                    assert_eq!(status, RunStatus::Aborted);
                    assert!(error.unwrap().contains("without a result"));
                }
                other => panic!("expected the end, got {other:?}"),
            }
            let row = ctx.store().get_run(id).unwrap().unwrap();
            assert_eq!(row.status, RunStatus::Aborted);
        });
    }
}
