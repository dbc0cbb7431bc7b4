//! JSON API under `/api/`: runs (list, start, show, delete, stop, live events, export) and
//! suites; the board's ports and configuration are in `board.rs`. Authenticated by the
//! browser session (writes need the `X-CSRF-Token` header) or by
//! `Authorization: Bearer <token>`. Errors are `{"error": "..."}` with a 4xx status.

use super::auth::{Auth, AuthError};
use super::extract::{invalid_body, ApiBody, ApiWrite};
use super::routes::{Routes, ADMIN, PUBLIC, READ, RUN};
use super::AppState;
use crate::runs::registry::LiveEvent;
use crate::spec::test::TestRequest;
use crate::store::RunFilter;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Register the API routes.
pub(crate) fn configure(r: &mut Routes) {
    r.get("/api/health", PUBLIC, health)
        .get("/api/runs", READ, list)
        .post("/api/runs", RUN, start)
        .get("/api/runs/{id}", READ, show)
        .delete("/api/runs/{id}", ADMIN, delete)
        .post("/api/runs/{id}/stop", RUN, stop)
        .get("/api/runs/{id}/events", READ, events)
        .get("/api/runs/{id}/export", READ, export)
        .post("/api/suites/udp-ladder", RUN, start_ladder)
        .get("/api/suites/{id}", READ, suite);
}

use super::respond::json_error as error;

use super::respond::internal;

/// `POST /api/runs`'s body: the test request, and `capture` (optional): a packet capture
/// started with the run (`POST /api/diag/capture`'s fields). 400 `{"error": "invalid request
/// body: …"}` when either does not parse.
struct StartBody(TestRequest, Option<super::diag::CaptureRequest>);

impl ApiBody for StartBody {
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse> {
        serde_json::from_slice::<serde_json::Value>(&body)
            .map_err(|e| e.to_string())
            .and_then(|mut v| {
                let capture = match v.as_object_mut().and_then(|m| m.remove("capture")) {
                    None | Some(serde_json::Value::Null) => None,
                    Some(c) => Some(
                        serde_json::from_value::<super::diag::CaptureRequest>(c)
                            .map_err(|e| format!("capture: {e}"))?,
                    ),
                };
                let tr: TestRequest = test_request_json(v)
                    .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))?;
                Ok(StartBody(tr, capture))
            })
            .map_err(invalid_body)
    }
}

/// A JSON object body read through [`normalize`] (numbers where the form sends strings),
/// then as `T`. 400 `{"error": "invalid request body: …"}` otherwise.
pub(super) struct Normalized<T>(pub T);

impl<T: serde::de::DeserializeOwned + 'static> ApiBody for Normalized<T> {
    fn parse(body: web::Bytes) -> Result<Self, HttpResponse> {
        serde_json::from_slice::<serde_json::Value>(&body)
            .map_err(|e| e.to_string())
            .and_then(normalize)
            .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
            .map(Normalized)
            .map_err(invalid_body)
    }
}

use super::respond::run_not_found as not_found;

async fn health() -> HttpResponse {
    HttpResponse::Ok()
        .json(json!({"status": "ok", "version": crate::engine::report::version_string()}))
}

async fn list(_auth: Auth, state: web::Data<AppState>, q: web::Query<RunFilter>) -> HttpResponse {
    let mut f = q.into_inner();
    super::pages::port_filter_addresses(&mut f);
    match state.store.list_runs(&f) {
        Ok(mut r) => {
            state.runs.registry().with_unsaved_ends(&mut r);
            HttpResponse::Ok().json(r)
        }
        Err(crate::store::StoreError::Invalid(e)) => {
            super::respond::json_error(actix_web::http::StatusCode::BAD_REQUEST, e)
        }
        Err(e) => internal(e),
    }
}

async fn start(
    req: HttpRequest,
    ApiWrite {
        auth,
        body: StartBody(tr, capture),
    }: ApiWrite<StartBody>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    let ports = crate::board::ports();
    Ok(
        match start_with_capture(&state, &auth, &req, &tr, capture.as_ref(), &ports).await {
            Ok(id) => {
                super::audit::run_started(&state, &auth, &req, id);
                HttpResponse::Created()
                    .insert_header(("Location", format!("/api/runs/{id}")))
                    .json(json!({"id": id, "url": format!("/runs/{id}")}))
            }
            Err((status, e)) => error(status, e),
        },
    )
}

/// Start the test `tr`, with a packet capture started just before it when `capture` is given
/// (the capture is checked first: a bad one starts nothing; a run that does not start takes
/// its capture with it). The run's id, or the HTTP status and message of the refusal: 403
/// [`super::auth::CAPTURE_NEEDS_ADMIN`] for a capture asked by a token below admin.
pub(super) async fn start_with_capture(
    state: &AppState,
    auth: &Auth,
    req: &HttpRequest,
    tr: &TestRequest,
    capture: Option<&super::diag::CaptureRequest>,
    ports: &[crate::board::Port],
) -> Result<i64, (actix_web::http::StatusCode, String)> {
    let bad = actix_web::http::StatusCode::BAD_REQUEST;
    // A capture is the Diagnostics' capture (any port, the management port included): admin
    // only on every path, a run's too, whatever scope the route itself needs.
    if capture.is_some() {
        auth.require_capture()
            .map_err(|e| (actix_web::http::StatusCode::FORBIDDEN, e.to_string()))?;
    }
    // The test request is checked before a capture starts (a bad one captures nothing).
    match tr.peer_type().map_err(|e| (bad, e))? {
        crate::spec::test::PeerType::Iperf2 => tr.to_iperf2_spec(ports).map(|_| ()),
        _ => tr.to_spec(ports).map(|_| ()),
    }
    .map_err(|e| (bad, e))?;
    let cap = match capture {
        Some(c) => Some(
            super::diag::start_run_capture(state, auth, req, c).map_err(|e| (e.status, e.error))?,
        ),
        None => None,
    };
    match crate::runs::iperf3::start_request(&state.runs, tr, ports).await {
        Ok(id) => {
            if let Some(c) = cap {
                super::diag::link_capture(c, id);
            }
            Ok(id)
        }
        Err(e) => {
            if let Some(c) = cap {
                super::diag::give_up_capture(c);
            }
            Err((bad, e))
        }
    }
}

/// A test request's JSON: unknown keys refused ([`TestRequest::check_keys`]), then
/// [`normalize`]d.
pub(super) fn test_request_json(v: serde_json::Value) -> Result<serde_json::Value, String> {
    if let serde_json::Value::Object(m) = &v {
        TestRequest::check_keys(m.keys())?;
    }
    normalize(v)
}

/// Accept numbers where the form sends strings (`{"duration": 5}` and `{"duration": "5"}`).
pub(super) fn normalize(v: serde_json::Value) -> Result<serde_json::Value, String> {
    let serde_json::Value::Object(m) = v else {
        return Err("expected a JSON object".into());
    };
    let mut out = serde_json::Map::new();
    for (k, v) in m {
        let v = match v {
            serde_json::Value::Number(n) if k != "host" => serde_json::Value::String(n.to_string()),
            other => other,
        };
        out.insert(k, v);
    }
    Ok(serde_json::Value::Object(out))
}

async fn start_ladder(
    req: actix_web::HttpRequest,
    ApiWrite {
        auth,
        body: Normalized(form),
    }: ApiWrite<Normalized<super::pages::LadderForm>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AuthError> {
    Ok(match form.start(&state) {
        Ok(id) => {
            // Audited as the form's start is (s51 tryout: API-started ladders were not).
            super::audit::suite_started(&auth, &req, id, crate::spec::suite::UDP_LADDER);
            HttpResponse::Created().json(json!({"id": id, "url": format!("/suites/{id}")}))
        }
        Err(e) => error(actix_web::http::StatusCode::BAD_REQUEST, e),
    })
}

async fn suite(_auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    match state.store.suite(id) {
        Ok(Some((s, runs))) => {
            let table = crate::results::suite_table::suite_result(&state.store, id)
                .ok()
                .flatten();
            HttpResponse::Ok().json(json!({
                "suite": s,
                "rows": crate::runs::suites::ladder_rows(&runs),
                "text": crate::runs::suites::ladder_text(&crate::runs::suites::ladder_rows(&runs)),
                "label": table.as_ref().map(|t| t.label.clone()),
                "def_id": table.as_ref().and_then(|t| t.def_id),
                "steps": table.as_ref().map(|t| t.steps.clone()).unwrap_or_default(),
                "verdict": table.as_ref().and_then(|t| t.verdict.clone()),
                "markdown": table.as_ref().map(crate::results::compare::suite_markdown),
            }))
        }
        Ok(None) => error(
            actix_web::http::StatusCode::NOT_FOUND,
            format!("no suite {id}"),
        ),
        Err(e) => internal(e),
    }
}

/// One run as JSON; its intervals are streamed from the store one row at a time (a run of
/// 200,000 intervals is never held in memory).
async fn show(_auth: Auth, state: web::Data<AppState>, path: web::Path<i64>) -> HttpResponse {
    let id = path.into_inner();
    let mut run = match state.store.get_run(id) {
        Ok(Some(r)) => r,
        Ok(None) => return not_found(id),
        Err(e) => return internal(e),
    };
    // Ended, but its end is not stored yet (e.g. the disk is full): say how it ended.
    state.runs.registry().with_unsaved_end(&mut run);
    let streams = state.store.streams(id).unwrap_or_default();
    let analysis = crate::results::charts::analyze_run(&state.store, &run);
    let legs = if run.kind.has_legs() {
        state.store.children(id).unwrap_or_default()
    } else {
        Vec::new()
    };
    let view = crate::results::view::view(&run);
    let (board, ledger) = state.store.run_board(id).unwrap_or_default();
    let head = json!({
        "run": run,
        "view": view,
        "live": state.runs.registry().is_live(id),
        "pinned": state.store.is_pinned(id).ok().flatten().unwrap_or(false),
        "streams": streams,
        "analysis": analysis,
        "legs": legs,
        "origin": state.store.run_origin(id).ok().flatten(),
        "loss_ledger": ledger,
        "board": board,
        "captures": super::diag::run_captures(id),
        // A standalone run given pass/fail limits (`params.thresholds`): PASS/FAIL and checks.
        "verdict": crate::results::verdict::judge_run(&state.store, &run),
    });
    let mut head = head.to_string();
    head.pop(); // the closing brace: the intervals follow
    let st = state.clone();
    let mut b = HttpResponse::Ok();
    b.content_type("application/json");
    super::stream::streamed(b, "run view", move |w| {
        use std::io::Write;
        let io = |e: std::io::Error| e.to_string();
        w.write_all(head.as_bytes()).map_err(io)?;
        w.write_all(b",\"intervals\":[").map_err(io)?;
        let mut first = true;
        st.store
            .for_each_interval(id, |iv| {
                if !first {
                    w.write_all(b",")
                        .map_err(|e| crate::store::StoreError::Io(e.to_string()))?;
                }
                first = false;
                serde_json::to_writer(&mut *w, iv)?;
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        w.write_all(b"]}").map_err(io)
    })
}

async fn delete(
    _: ApiWrite,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, AuthError> {
    let id = path.into_inner();
    if state.runs.registry().is_live(id) {
        return Ok(error(
            actix_web::http::StatusCode::CONFLICT,
            "the run is active; stop it first",
        ));
    }
    Ok(match state.store.delete_run(id) {
        Ok(true) => HttpResponse::NoContent().finish(),
        Ok(false) => not_found(id),
        Err(e) => internal(e),
    })
}

async fn stop(
    _: ApiWrite,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> Result<HttpResponse, AuthError> {
    let id = path.into_inner();
    Ok(if state.runs.registry().stop(id) {
        HttpResponse::Accepted().json(json!({"id": id, "stopping": true}))
    } else {
        error(
            actix_web::http::StatusCode::CONFLICT,
            "only a running test started from this board can be stopped",
        )
    })
}

#[derive(Deserialize)]
struct ExportQuery {
    #[serde(default)]
    format: Option<String>,
}

async fn export(
    _auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    q: web::Query<ExportQuery>,
) -> HttpResponse {
    let id = path.into_inner();
    let run = match state.store.get_run(id) {
        Ok(Some(r)) => r,
        Ok(None) => return not_found(id),
        Err(e) => return internal(e),
    };
    // Streamed: the intervals are read one row at a time (bounded memory for any run).
    let rep = state.store.report(id).ok().flatten();
    let st = state.clone();
    match q.format.as_deref().unwrap_or("json") {
        "json" => {
            let mut b = HttpResponse::Ok();
            b.content_type("application/json");
            super::stream::streamed(b, "run export", move |w| {
                crate::results::export::write_run_json(w, &st.store, &run, rep.as_ref(), false)
            })
        }
        "csv" => {
            let mut b = HttpResponse::Ok();
            b.content_type("text/csv; charset=utf-8");
            super::stream::streamed(b, "run export", move |w| {
                crate::results::export::write_run_csv(w, &st.store, &run, rep.as_ref())
            })
        }
        f => error(
            actix_web::http::StatusCode::BAD_REQUEST,
            format!("format must be json or csv, got '{f}'"),
        ),
    }
}

fn sse(ev: &LiveEvent) -> web::Bytes {
    web::Bytes::from(format!(
        "data: {}\n\n",
        serde_json::to_string(ev).unwrap_or_else(|_| "{}".into())
    ))
}

/// Sequence numbers of stored intervals a live-update stream sends on connect (the last ones;
/// 10 minutes at 1 s intervals), so that a connection to a long run costs bounded memory.
pub(crate) const LIVE_BACKLOG: i64 = 600;

/// Server-sent events: the last [`LIVE_BACKLOG`] stored intervals first, then live ones,
/// then `done`.
async fn events(
    req: actix_web::HttpRequest,
    _auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    // Capped in all and per address (429 / 503); the slot goes with the response body.
    let slot = match super::limits::live_slot(req.peer_addr()) {
        Ok(s) => s,
        Err(refused) => return refused,
    };
    let id = path.into_inner();
    let run = match state.store.get_run(id) {
        Ok(Some(r)) => r,
        Ok(None) => return not_found(id),
        Err(e) => return internal(e),
    };
    // Subscribe before reading the stored intervals so none falls in between.
    let live = state.runs.registry().subscribe(id);
    let mut first: Vec<web::Bytes> = Vec::new();
    let rows = state
        .store
        .intervals_tail(id, LIVE_BACKLOG)
        .unwrap_or_default();
    let mut i = 0;
    while i < rows.len() {
        let seq = rows[i].seq;
        let group: Vec<_> = rows[i..].iter().take_while(|r| r.seq == seq).collect();
        i += group.len();
        let rec = crate::engine::report::IntervalRecord {
            streams: group
                .iter()
                .map(|r| crate::engine::report::StreamInterval {
                    id: r.stream_id,
                    socket: r.socket,
                    start: r.start,
                    end: r.end,
                    bytes: r.bytes.max(0) as u64,
                    bits_per_second: r.bits_per_second,
                    sender: r.sender,
                    omitted: r.omitted,
                    udp: r.udp_sample(),
                    latency: None,
                    tcp: r.retransmits.map(|x| crate::engine::report::TcpSample {
                        retransmits: x.max(0) as u64,
                        snd_cwnd: r.snd_cwnd.unwrap_or(0).max(0) as u64,
                        rtt: r.rtt.unwrap_or(0).max(0) as u32,
                        ..Default::default()
                    }),
                })
                .collect(),
        };
        first.push(sse(&LiveEvent::Interval { seq, record: rec }));
    }
    let head = futures_util::stream::iter(first.into_iter().map(Ok::<_, actix_web::Error>));
    let body: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<web::Bytes, actix_web::Error>>>,
    > = match live {
        Some(rx) => {
            let liv = tokio_stream::wrappers::BroadcastStream::new(rx)
                .filter_map(|r| async move { r.ok() })
                .take_while(|ev| {
                    let more = !matches!(ev, LiveEvent::Done { .. });
                    async move { more }
                });
            // take_while swallows the Done event; the stream ends with a plain one instead.
            let tail = futures_util::stream::once(async move {
                Ok::<_, actix_web::Error>(web::Bytes::from_static(b"data: {\"type\":\"done\"}\n\n"))
            });
            let ping = tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(
                Duration::from_secs(15),
            ))
            .map(|_| Ok::<_, actix_web::Error>(web::Bytes::from_static(b": keep-alive\n\n")));
            let main = liv
                .map(|ev| Ok::<_, actix_web::Error>(sse(&ev)))
                .chain(tail);
            Box::pin(head.chain(TakeUntilDone::new(main, ping)))
        }
        None => {
            let done = LiveEvent::Done {
                status: run.status,
                error: run.error.clone(),
            };
            Box::pin(head.chain(futures_util::stream::once(async move { Ok(sse(&done)) })))
        }
    };
    let body = body.map(move |chunk| {
        let _held = &slot;
        chunk
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body)
}

/// Merge the event stream with keep-alive pings, ending when the event stream ends.
struct TakeUntilDone<A, B> {
    main: std::pin::Pin<Box<A>>,
    ping: std::pin::Pin<Box<B>>,
    done: bool,
}

impl<A, B> TakeUntilDone<A, B> {
    fn new(main: A, ping: B) -> Self {
        TakeUntilDone {
            main: Box::pin(main),
            ping: Box::pin(ping),
            done: false,
        }
    }
}

impl<A, B, T> futures_util::Stream for TakeUntilDone<A, B>
where
    A: futures_util::Stream<Item = T>,
    B: futures_util::Stream<Item = T>,
{
    type Item = T;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        use std::task::Poll;
        if self.done {
            return Poll::Ready(None);
        }
        match self.main.as_mut().poll_next(cx) {
            Poll::Ready(Some(x)) => return Poll::Ready(Some(x)),
            Poll::Ready(None) => {
                self.done = true;
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        match self.ping.as_mut().poll_next(cx) {
            Poll::Ready(Some(x)) => Poll::Ready(Some(x)),
            _ => Poll::Pending,
        }
    }
}
