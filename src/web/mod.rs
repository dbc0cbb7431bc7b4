//! The web UI and JSON API (actix-web + askama, every asset embedded in the binary).
//! Routes: pages in `pages/`, `/api/` in `api.rs`; authentication in `auth.rs`; the responses
//! and extractors every handler shares in `respond.rs` and `extract.rs`.
//! Not for: measuring or storing (engine, store, live).

pub(crate) mod api;
mod assets;
pub(crate) mod audit;
pub mod auth;
pub(crate) mod board;
pub(crate) mod charts;
pub(crate) mod diag;
pub(crate) mod extract;
pub(crate) mod first_run;
pub(crate) mod forwarding;
pub(crate) mod latency;
pub(crate) mod limits;
pub(crate) mod metrics;
pub(crate) mod multi;
pub(crate) mod pages;
pub(crate) mod respond;
pub(crate) mod retention;
pub(crate) mod rfc2544;
pub mod routes;
pub(crate) mod schedules;
pub(crate) mod storage;
pub(crate) mod stream;
pub(crate) mod suites;
pub(crate) mod tls;
pub(crate) mod traffic;
pub(crate) mod transfer;

use crate::config::Config;
use crate::runs::context::RunContext;
use crate::store::Store;
use actix_web::web;
use std::sync::{Arc, Mutex};

/// Everything the handlers share.
pub struct AppState {
    pub store: Arc<Store>,
    /// Where runs start and are followed (store, live registry, monitor, board).
    pub runs: RunContext,
    pub config: Config,
    /// The one-time code that the first-run setup page requires (None once set up).
    pub setup_code: Mutex<Option<String>>,
    pub limiter: crate::model::secrets::LoginLimiter,
    /// The board controller: the run context's, else one made for this state.
    pub board: Arc<crate::board::apply::Controller>,
    /// HTTPS as the pages and the login prompt show it (the daemon sets it at start).
    pub tls: tls::Shown,
}

impl AppState {
    /// State over a store; makes a setup code when no admin password exists yet.
    pub fn new(store: Arc<Store>, runs: RunContext, config: Config) -> AppState {
        let board = runs.board().cloned().unwrap_or_else(|| {
            crate::board::apply::Controller::new(Some(store.clone()), Some(&config.data_dir))
        });
        let s = AppState {
            board,
            store,
            runs,
            config,
            setup_code: Mutex::new(None),
            tls: tls::Shown::default(),
            limiter: crate::model::secrets::LoginLimiter::new(
                5,
                std::time::Duration::from_secs(300),
            ),
        };
        if s.needs_setup() {
            let raw = auth::random_hex(5).to_uppercase();
            if let Ok(mut g) = s.setup_code.lock() {
                *g = Some(format!("{}-{}", &raw[..5], &raw[5..]));
            }
        }
        s
    }

    /// The admin password hash in force: one set in the UI, else the config file's.
    pub fn admin_hash(&self) -> Option<String> {
        self.store
            .setting(auth::PASSWORD_KEY)
            .ok()
            .flatten()
            .or_else(|| self.config.admin_password_hash.clone())
    }

    /// True until an admin password exists.
    pub fn needs_setup(&self) -> bool {
        self.admin_hash().is_none()
    }

    /// The first-run setup code, if setup is pending.
    pub fn setup_code(&self) -> Option<String> {
        self.setup_code.lock().ok().and_then(|g| g.clone())
    }
}

/// Register every route (each with its access: [`routes`]).
pub fn configure(cfg: &mut web::ServiceConfig) {
    register(&mut routes::Routes::new(cfg));
}

/// Every module's routes, through the one registration helper ([`routes::Routes`]); the route
/// table ([`routes::table`]) is made from the same calls.
pub(crate) fn register(r: &mut routes::Routes) {
    extract::configure(r.config());
    board::configure(r);
    charts::configure(r);
    multi::configure(r);
    latency::configure(r);
    rfc2544::configure(r);
    suites::configure(r);
    forwarding::configure(r);
    diag::configure(r);
    pages::configure(r);
    api::configure(r);
    traffic::configure(r);
    retention::configure(r);
    metrics::configure(r);
    schedules::configure(r);
    transfer::configure(r);
    assets::configure(r);
}

/// The page menu's links (`templates/nav.html`), written by `templates/base.html` for a
/// signed-in user: kept as one string rather than as literal text inlined into each of the 20
/// page templates that extend the base.
pub(crate) const NAV: &str = include_str!("../../templates/nav.html");
