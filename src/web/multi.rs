//! The multi-port run page (`/multi`: several legs, each bound to its own board port, started
//! together) and its API (`POST /api/runs/multi` with `{"legs": [TestRequest, …]}`).

use super::auth::{Auth, AuthError};
use super::extract::{ApiWrite, Form, Json};
use super::pages::{port_options, PortOption};
use super::respond::{html, redirect};
use super::routes::{Routes, ADMIN, READ, RUN};
use super::AppState;
use crate::engine::report::version_string;
use crate::runs::multi::{self, MultiRequest};
use crate::spec::test::TestRequest;
use actix_web::{web, HttpResponse};
use askama::Template;
use serde_json::json;
use std::collections::HashMap;

/// Legs the form shows (empty rows are skipped).
const FORM_LEGS: usize = 4;

/// Register the routes.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/multi", READ, page)
        .post("/multi", ADMIN, start)
        .post("/api/runs/multi", RUN, api_start);
}

struct LegForm {
    n: usize,
    bind: String,
    host: String,
    port: String,
    direction: String,
    protocol: String,
    bitrate: String,
}

#[derive(Template)]
#[template(path = "multi.html")]
struct MultiPage {
    nav: bool,
    csrf: String,
    version: String,
    error: Option<String>,
    legs: Vec<LegForm>,
    duration: String,
    parallel: String,
    ports: Vec<PortOption>,
}

fn form_page(auth: &Auth, f: &HashMap<String, String>, error: Option<String>) -> MultiPage {
    let g = |k: &str, d: &str| {
        f.get(k)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| d.to_string())
    };
    let ports = port_options();
    let non_lo: Vec<&PortOption> = ports.iter().filter(|p| p.name != "lo").collect();
    let legs = (1..=FORM_LEGS)
        .map(|n| {
            let default_port = if n <= 2 {
                non_lo.get(n - 1).map(|p| p.name.as_str()).unwrap_or("")
            } else {
                ""
            };
            LegForm {
                n,
                bind: g(&format!("leg{n}_bind"), default_port),
                host: g(&format!("leg{n}_host"), ""),
                port: g(&format!("leg{n}_port"), "5201"),
                direction: g(&format!("leg{n}_direction"), "send"),
                protocol: g(&format!("leg{n}_protocol"), "tcp"),
                bitrate: g(&format!("leg{n}_bitrate"), ""),
            }
        })
        .collect();
    MultiPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error,
        legs,
        duration: g("duration", "10"),
        parallel: g("parallel", "1"),
        ports,
    }
}

/// The legs a form filled in: rows with a peer host, with the common duration and streams.
fn legs_of_form(f: &HashMap<String, String>) -> Vec<TestRequest> {
    let get = |k: String| f.get(&k).cloned().filter(|s| !s.trim().is_empty());
    (1..=multi::MAX_LEGS)
        .filter_map(|n| {
            let host = get(format!("leg{n}_host"))?;
            Some(TestRequest {
                host: host.trim().to_string(),
                bind: get(format!("leg{n}_bind")),
                port: get(format!("leg{n}_port")),
                direction: get(format!("leg{n}_direction")),
                protocol: get(format!("leg{n}_protocol")),
                bitrate: get(format!("leg{n}_bitrate")),
                duration: get("duration".into()),
                parallel: get("parallel".into()),
                ..Default::default()
            })
        })
        .collect()
}

async fn page(auth: Auth) -> HttpResponse {
    html(
        actix_web::http::StatusCode::OK,
        &form_page(&auth, &HashMap::new(), None),
    )
}

async fn start(
    req: actix_web::HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<HashMap<String, String>>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.get("csrf").map(String::as_str))?;
    let legs = legs_of_form(&form);
    let res = if legs.len() < 2 {
        // The grey example addresses are placeholders, not values: say so.
        Err(format!(
            "enter the peer host of at least 2 legs (the grey addresses are only examples); {} filled in",
            legs.len()
        ))
    } else {
        multi::parse_legs(&legs).and_then(|legs| multi::specs(&legs, &crate::board::ports()))
    }
    .and_then(|specs| crate::runs::multi::start_multi(&state.runs, specs, None));
    Ok(match res {
        Ok((id, _)) => {
            super::audit::run_started(&state, &auth, &req, id);
            redirect(&format!("/runs/{id}"))
        }
        Err(e) => html(
            actix_web::http::StatusCode::BAD_REQUEST,
            &form_page(&auth, &form, Some(e)),
        ),
    })
}

async fn api_start(
    ApiWrite { body: Json(v), .. }: ApiWrite<Json<serde_json::Value>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    let bad = |m: String| super::respond::json_error(actix_web::http::StatusCode::BAD_REQUEST, m);
    let legs = match v.get("legs").and_then(|l| l.as_array()) {
        Some(a) => a,
        None => return Ok(bad("expected {\"legs\": [test, test, …]}".into())),
    };
    let mut reqs = Vec::new();
    for (i, l) in legs.iter().enumerate() {
        match super::api::test_request_json(l.clone())
            .and_then(|v| serde_json::from_value::<TestRequest>(v).map_err(|e| e.to_string()))
        {
            Ok(t) => reqs.push(t),
            Err(e) => return Ok(bad(format!("leg {}: {e}", i + 1))),
        }
    }
    let mr = MultiRequest { legs: reqs };
    Ok(
        match multi::parse_legs(&mr.legs)
            .and_then(|legs| multi::specs(&legs, &crate::board::ports()))
            .and_then(|s| crate::runs::multi::start_multi(&state.runs, s, None))
        {
            Ok((id, _)) => HttpResponse::Created()
                .insert_header(("Location", format!("/api/runs/{id}")))
                .json(json!({"id": id, "url": format!("/runs/{id}")})),
            Err(e) => bad(e),
        },
    )
}
