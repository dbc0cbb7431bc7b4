//! The daemon's log line for every run a user starts from the web UI or the API: who (the
//! admin's browser session or an API token, and the client address), what (the run's kind and
//! title, as its page shows them) and the run id — so `journalctl -u netperfd` tells who ran
//! what when. These lines are kept in their own ring (`logging::audit`): no flood of other
//! lines pushes them out of the Diagnostics log.

use super::auth::Auth;
use super::AppState;
use actix_web::HttpRequest;

/// "admin session from 192.0.2.2" / "API token from 192.0.2.2".
pub(crate) fn who(auth: &Auth, req: &HttpRequest) -> String {
    let from = req
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|| "?".into());
    match auth {
        Auth::Session { .. } => format!("admin session from {from}"),
        Auth::Token(s) => format!("API token ({}) from {from}", s.as_str()),
    }
}

/// Log that run `id` was started (INFO, target `netperfd::web::audit`).
pub(crate) fn run_started(state: &AppState, auth: &Auth, req: &HttpRequest, id: i64) {
    let what = match state.store.get_run(id) {
        Ok(Some(r)) => {
            let v = crate::results::view::view(&r);
            format!("{}: {}", v.kind_label, v.title)
        }
        _ => "a run".to_string(),
    };
    let who = who(auth, req);
    crate::logging::audit(|| tracing::info!(run = id, "{who} started run {id} ({what})"));
}

/// Log that suite run `id` (`name`) was started.
pub(crate) fn suite_started(auth: &Auth, req: &HttpRequest, id: i64, name: &str) {
    let who = who(auth, req);
    crate::logging::audit(|| tracing::info!(suite = id, "{who} started suite {id} ({name})"));
}

/// Log that a diagnostic ran (INFO, target `netperfd::web::audit`): `what` is e.g.
/// "ping 192.0.2.2 (4 requests from eth0)".
pub(crate) fn diag_ran(auth: &Auth, req: &HttpRequest, what: &str) {
    let who = who(auth, req);
    crate::logging::audit(|| tracing::info!("{who} ran diagnostics: {what}"));
}
