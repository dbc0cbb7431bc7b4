//! The registry of runs in progress in this process: who follows a run (its live events),
//! how to stop it, and the runs that ended while their end could not be stored yet (kept in
//! memory and written again until the store takes them). Runs enter it through the one start
//! path ([`crate::runs::context::RunContext::start`]) and leave it when their recorder
//! finishes. Not for: sampling the board (`runs::monitor`) or storing intervals
//! (`runs::recorder`).

use crate::engine::report::IntervalRecord;
use crate::model::RunStatus;
use crate::store::{CpuSampleRow, PortSampleRow, Store};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, Notify};

/// What live subscribers of a run receive.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum LiveEvent {
    /// One interval (`seq` counts from 0).
    Interval { seq: i64, record: IntervalRecord },
    /// One monitor sample (every second while the run is active): CPU per core (the
    /// all-cores line has `cpu` = -1), the run's ports' counter deltas, conntrack entries.
    Monitor {
        /// Seconds since the run started.
        t: f64,
        cpus: Vec<CpuSampleRow>,
        ports: Vec<PortSampleRow>,
        conntrack: Option<i64>,
    },
    /// The run ended.
    Done {
        status: RunStatus,
        error: Option<String>,
    },
}

struct LiveRun {
    tx: broadcast::Sender<LiveEvent>,
    cancel: Option<Arc<Notify>>,
}

/// How often, and how many times, a run's end that could not be stored is tried again:
/// every 10 s for an hour.
const END_RETRY: std::time::Duration = std::time::Duration::from_secs(10);
const END_RETRIES: u32 = 360;

/// How a run ended whose end is not stored yet: status and error.
type UnsavedEnd = (RunStatus, Option<String>);

/// The write that stores a run's end (tried again while it fails).
pub(super) type EndWrite =
    Box<dyn Fn(&Store) -> std::result::Result<(), crate::store::StoreError> + Send>;

pub(super) fn relock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// The runs in progress here (see the module doc). Shared through an `Arc` by the run
/// context and every recorder.
#[derive(Default)]
pub struct RunRegistry {
    runs: Mutex<HashMap<i64, LiveRun>>,
    /// Runs that ended but whose end could not be stored yet (e.g. the disk is full): their
    /// status and error, kept until a retry stores them (see [`RunRegistry::store_end`]).
    unsaved: Arc<Mutex<HashMap<i64, UnsavedEnd>>>,
}

/// A run's live events channel holds this many events for a slow subscriber.
const LIVE_CAPACITY: usize = 1024;

impl RunRegistry {
    /// Subscribe to a run's live events; `None` when it is not running here.
    pub fn subscribe(&self, id: i64) -> Option<broadcast::Receiver<LiveEvent>> {
        relock(&self.runs).get(&id).map(|r| r.tx.subscribe())
    }

    /// Whether a run is active in this process.
    pub fn is_live(&self, id: i64) -> bool {
        relock(&self.runs).contains_key(&id)
    }

    /// Ask a running run to stop (a client test: CLIENT_TERMINATE); false if it is not one
    /// that can be stopped here.
    pub fn stop(&self, id: i64) -> bool {
        match relock(&self.runs).get(&id).and_then(|r| r.cancel.clone()) {
            Some(c) => {
                c.notify_one();
                true
            }
            // Ended already; only its end is not stored yet (disk full): nothing to stop.
            None => self.unsaved_end(id).is_some(),
        }
    }

    /// A run that ended while its end could not be stored: its status and error.
    pub fn unsaved_end(&self, id: i64) -> Option<(RunStatus, Option<String>)> {
        relock(&self.unsaved).get(&id).cloned()
    }

    /// A stored row as the run is: a run still "running" in the store whose end is only in
    /// memory (not stored yet, see [`RunRegistry::store_end`]) gets that status and error,
    /// so the history, its API and the run page say what the run's own API says (s51
    /// tryout: `/api/runs/9` said completed while the list and pages said running).
    pub(crate) fn with_unsaved_end(&self, run: &mut crate::store::RunRow) {
        if run.status != RunStatus::Running {
            return;
        }
        if let Some((status, error)) = self.unsaved_end(run.id) {
            run.status = status;
            run.error = error;
        }
    }

    /// [`RunRegistry::with_unsaved_end`] on every row.
    pub(crate) fn with_unsaved_ends(&self, runs: &mut [crate::store::RunRow]) {
        if relock(&self.unsaved).is_empty() {
            return;
        }
        for r in runs {
            self.with_unsaved_end(r);
        }
    }

    /// Make run `id` (already created in the store) live: subscribers can follow it and
    /// [`RunRegistry::stop`] notifies `cancel`. Returns the channel its events go out on.
    pub(super) fn register(
        &self,
        id: i64,
        cancel: Option<Arc<Notify>>,
    ) -> broadcast::Sender<LiveEvent> {
        let (tx, _) = broadcast::channel(LIVE_CAPACITY);
        relock(&self.runs).insert(
            id,
            LiveRun {
                tx: tx.clone(),
                cancel,
            },
        );
        tx
    }

    /// Forget run `id` and tell its subscribers how it ended.
    pub(super) fn unregister(&self, id: i64, status: RunStatus, error: Option<&str>) {
        if let Some(r) = relock(&self.runs).remove(&id) {
            let _ = r.tx.send(LiveEvent::Done {
                status,
                error: error.map(String::from),
            });
        }
    }

    /// Store a run's end with `write`; when that fails (e.g. the disk is full) mark the run
    /// ended with the least write there is ([`Store::mark_ended`]) so it never stays
    /// "running", remember its end in memory, and retry `write` every [`END_RETRY`] on a
    /// thread of its own until it succeeds (or [`END_RETRIES`] times). `ended_at`: when the
    /// run ended, ms since the epoch, stored by every write (s51 tryout: a 5 s run whose end
    /// was stored by a retry showed 25 s).
    pub(super) fn store_end(
        &self,
        store: &Arc<Store>,
        id: i64,
        (status, ended_at): (RunStatus, i64),
        error: Option<&str>,
        write: EndWrite,
    ) {
        let Err(e) = write(store) else { return };
        tracing::error!(
            run = id,
            "cannot store the end of the run: {e}; retrying every {} s",
            END_RETRY.as_secs()
        );
        let why = format!(
            "{}the end of the run could not be stored at first ({e})",
            error.map(|x| format!("{x}; ")).unwrap_or_default()
        );
        let marked = store.mark_ended(id, status, Some(&why), ended_at);
        relock(&self.unsaved).insert(id, (status, Some(why)));
        if let Err(e2) = &marked {
            tracing::error!(run = id, "cannot mark the run ended either: {e2}");
        }
        let (store, unsaved) = (store.clone(), self.unsaved.clone());
        let spawned = std::thread::Builder::new()
            .name("end-retry".into())
            .spawn(move || {
                for _ in 0..END_RETRIES {
                    std::thread::sleep(END_RETRY);
                    // The full end first; else at least the status.
                    let ok = write(&store).is_ok();
                    if ok || store.mark_ended(id, status, None, ended_at).is_ok() {
                        if ok {
                            tracing::info!(run = id, "the end of the run is stored now");
                        }
                        relock(&unsaved).remove(&id);
                        if ok {
                            return;
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(run = id, "cannot start the retry of the run's end: {e}");
        }
    }
}
