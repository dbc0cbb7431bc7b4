//! HTML pages: setup, login, new test, history, run detail (live via server-sent events),
//! settings. Every state-changing form carries the session's CSRF token.
//!
//! One module per group of pages: `session` (login, logout, setup), `runs` (new test,
//! history, the UDP ladder form), `run_page` (one run, its exports), `settings` (password,
//! tokens). They share this module's imports and `client_ip`; the routes of all of them are
//! registered here ([`configure`]).

mod run_page;
mod runs;
mod session;
mod settings;

use run_page::*;
use runs::*;
use session::*;
use settings::*;

pub(crate) use run_page::PAGE_INTERVALS;
pub(crate) use runs::{port_filter_addresses, port_options, query_value, PortOption};
pub(crate) use runs::{LadderForm, RunView};
pub(crate) use settings::settings;

use crate::engine::report::{self, version_string, Report};
use crate::model::display;
use crate::model::time::fmt_time;
use crate::model::{RunKind, RunProtocol};
use crate::spec::test::TestRequest;
use crate::store::{IntervalRow, RunFilter, RunRow};
use crate::web::auth::{self, Auth, AuthError};
use crate::web::extract::{CsrfForm, Form};
use crate::web::respond::{
    html, internal_page as internal, message, ok, redirect, storage_message,
};
use crate::web::routes::{Routes, ADMIN, PUBLIC, READ};
use crate::web::AppState;
use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::{http::header, web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

/// Register the page routes.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/", READ, index)
        .get("/login", PUBLIC, login_page)
        .post("/login", PUBLIC, login)
        .post("/logout", ADMIN, logout)
        .post("/logout-everywhere", ADMIN, logout_everywhere)
        .get("/setup", PUBLIC, setup_page)
        .post("/setup", PUBLIC, setup)
        .post("/tests", ADMIN, start_test)
        .get("/runs", READ, runs_page)
        .get("/runs/{id}", READ, run_page)
        .post("/runs/{id}/delete", ADMIN, delete_run)
        .post("/runs/{id}/stop", ADMIN, stop_run)
        .get("/runs/{id}/export.json", READ, export_json)
        .get("/runs/{id}/export.csv", READ, export_csv)
        .get("/runs/{id}/summary.txt", READ, export_text)
        .post("/suites/udp-ladder", ADMIN, start_ladder)
        .get("/settings", READ, settings_page)
        .post("/settings/password", ADMIN, change_password)
        .post("/settings/tokens", ADMIN, create_token)
        .post("/settings/tokens/{id}/delete", ADMIN, delete_token);
}

pub(super) fn client_ip(req: &HttpRequest) -> std::net::IpAddr {
    req.peer_addr()
        .map(|a| a.ip())
        .unwrap_or(std::net::IpAddr::from([0u8, 0, 0, 0]))
}
