//! The new-test page (index) and its form, the UDP ladder form, the history list, and the
//! run views they share with the run page.

use super::*;

/// A run as the tables show it.
pub(crate) struct RunView {
    pub id: i64,
    /// The kind's label ("iperf3", "forwarding", …) and the run's one-line title.
    pub kind: String,
    pub title: String,
    pub when: String,
    pub role: String,
    pub status: String,
    pub peer: String,
    pub local: String,
    pub direction: String,
    pub protocol: String,
    pub streams: u32,
    pub sender_rate: String,
    pub receiver_rate: String,
    /// What the history's "Retr / Loss" column shows.
    pub retr_or_loss: String,
    pub error: Option<String>,
    /// Imported runs: "imported from LABEL (its run N, board ID)"; empty for runs made here.
    pub origin: String,
    /// The run's own label (monitor and forwarding runs), or its suite's board label.
    pub label: String,
    /// The suite the run belongs to and that suite's name (filled by [`with_suites`]).
    pub suite_id: Option<i64>,
    pub suite_name: String,
    /// Stored fields that could not be read, e.g. "peer_port, report_json" (shown empty);
    /// empty for sound runs.
    pub invalid: String,
}

/// Fill in the suite name (and, for runs without their own label, the suite's board label)
/// of runs that belong to a suite: one query for the names, one per distinct suite.
pub(super) fn with_suites(state: &AppState, mut runs: Vec<RunView>) -> Vec<RunView> {
    if runs.iter().all(|r| r.suite_id.is_none()) {
        return runs;
    }
    let names: std::collections::HashMap<i64, String> = state
        .store
        .suites(5000)
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.id, s.name))
        .collect();
    let mut labels: std::collections::HashMap<i64, String> = std::collections::HashMap::new();
    for r in runs.iter_mut() {
        let Some(sid) = r.suite_id else { continue };
        r.suite_name = names.get(&sid).cloned().unwrap_or_default();
        if r.label.is_empty() {
            r.label = labels
                .entry(sid)
                .or_insert_with(|| {
                    state
                        .store
                        .suite_extra(sid)
                        .ok()
                        .flatten()
                        .and_then(|e| e.label)
                        .unwrap_or_default()
                })
                .clone();
        }
    }
    runs
}

pub(super) fn run_view(r: &RunRow) -> RunView {
    let asked = crate::results::asked::Asked::of(r);
    let kv = crate::results::view::view(r);
    RunView {
        id: r.id,
        kind: kv.kind_label.to_string(),
        title: kv.title.clone(),
        when: fmt_time(r.started_at),
        role: r.role.to_string(),
        status: r.status.to_string(),
        peer: kv.peer,
        local: kv.local,
        direction: if r.kind.forwards() {
            crate::results::view::forward_direction(r).to_string()
        } else {
            r.direction.to_string()
        },
        protocol: r.protocol.to_string(),
        streams: asked
            .parallel
            .or_else(|| crate::results::traffic_summary::connections(r))
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1),
        sender_rate: r
            .sender_bps
            .map(display::rate)
            .unwrap_or_else(|| "—".into()),
        receiver_rate: r
            .receiver_bps
            .map(display::rate)
            .unwrap_or_else(|| "—".into()),
        retr_or_loss: crate::results::view::retr_or_loss(r).unwrap_or_else(|| "—".into()),
        error: r.error.clone(),
        invalid: r.invalid.join(", "),
        label: asked.label.unwrap_or_default(),
        suite_id: r.suite_id,
        suite_name: String::new(),
        origin: String::new(),
    }
}

/// The provenance line of an imported run.
pub(crate) fn origin_text(o: &crate::store::Origin) -> String {
    format!(
        "imported from {} (its run {}, board {})",
        if o.label.is_empty() {
            "another board"
        } else {
            &o.label
        },
        o.id,
        o.board
    )
}

/// Fill in [`RunView::origin`] of the imported runs among `views`.
pub(super) fn mark_origins(store: &crate::store::Store, views: &mut [RunView]) {
    let ids: Vec<i64> = views.iter().map(|v| v.id).collect();
    if let Ok(m) = store.run_origins(&ids) {
        for v in views.iter_mut() {
            if let Some(o) = m.get(&v.id) {
                v.origin = origin_text(o);
            }
        }
    }
}

pub(super) struct IntervalView {
    pub(super) seq: i64,
    pub(super) id: String,
    pub(super) role: String,
    pub(super) range: String,
    pub(super) transfer: String,
    pub(super) bitrate: String,
    pub(super) retr: String,
    pub(super) cwnd: String,
    pub(super) bps: f64,
    pub(super) class: String,
}

pub(super) fn interval_views(rows: &[IntervalRow]) -> Vec<IntervalView> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let seq = rows[i].seq;
        let group: Vec<&IntervalRow> = rows[i..].iter().take_while(|r| r.seq == seq).collect();
        i += group.len();
        for sender in [true, false] {
            let g: Vec<&&IntervalRow> = group.iter().filter(|r| r.sender == sender).collect();
            for r in &g {
                let (c1, c2) = match r.udp_sample() {
                    Some(u) if r.sender => (String::new(), format!("{} datagrams", u.packets)),
                    Some(u) => (
                        format!("{:.3} ms", u.jitter_ms),
                        format!("{}/{} ({:.2} %)", u.lost, u.packets, u.lost_percent()),
                    ),
                    None => (
                        r.retransmits.map(|x| x.to_string()).unwrap_or_default(),
                        r.snd_cwnd
                            .map(|x| display::size(x as f64))
                            .unwrap_or_default(),
                    ),
                };
                out.push(IntervalView {
                    seq,
                    id: r.stream_id.to_string(),
                    role: if r.sender { "sender" } else { "receiver" }.into(),
                    range: format!(
                        "{:.2}-{:.2} s{}",
                        r.start,
                        r.end,
                        if r.omitted { " (omitted)" } else { "" }
                    ),
                    transfer: display::size(r.bytes as f64),
                    bitrate: display::rate(r.bits_per_second),
                    retr: c1,
                    cwnd: c2,
                    bps: if g.len() == 1 { r.bits_per_second } else { 0.0 },
                    class: if g.len() == 1 {
                        "sum".into()
                    } else {
                        String::new()
                    },
                });
            }
            if g.len() > 1 {
                let bytes: i64 = g.iter().map(|r| r.bytes).sum();
                let bps: f64 = g.iter().map(|r| r.bits_per_second).sum();
                let udp = g.iter().any(|r| r.packets.is_some());
                let retr: Option<i64> = if sender && !udp {
                    Some(g.iter().filter_map(|r| r.retransmits).sum())
                } else {
                    None
                };
                let (pk, lost): (i64, i64) = (
                    g.iter().filter_map(|r| r.packets).sum(),
                    g.iter().filter_map(|r| r.lost).sum(),
                );
                out.push(IntervalView {
                    seq,
                    id: "SUM".into(),
                    role: if sender { "sender" } else { "receiver" }.into(),
                    range: format!("{:.2}-{:.2} s", g[0].start, g[0].end),
                    transfer: display::size(bytes as f64),
                    bitrate: display::rate(bps),
                    retr: retr.map(|x| x.to_string()).unwrap_or_default(),
                    cwnd: match (udp, sender) {
                        (true, true) => format!("{pk} datagrams"),
                        (true, false) => format!(
                            "{lost}/{pk} ({:.2} %)",
                            crate::engine::udp::loss_percent(lost.max(0) as u64, pk.max(0) as u64)
                        ),
                        _ => String::new(),
                    },
                    bps,
                    class: "sum".into(),
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------- new test

/// A port in the "board port" list.
pub(crate) struct PortOption {
    pub(crate) name: String,
    pub(crate) label: String,
}

/// The board's ports for a "Board port" select: name and "eth0 192.0.2.1" label.
pub(crate) fn port_options() -> Vec<PortOption> {
    crate::board::ports()
        .into_iter()
        .map(|p| {
            let addrs: Vec<String> = p.addresses.iter().map(|a| a.to_string()).collect();
            PortOption {
                label: format!(
                    "{}{} {}",
                    p.name,
                    if p.running { "" } else { " (no link)" },
                    if addrs.is_empty() {
                        "(no address)".into()
                    } else {
                        addrs.join(", ")
                    }
                ),
                name: p.name,
            }
        })
        .collect()
}

pub(super) struct FormValues {
    pub(super) protocol: String,
    pub(super) length: String,
    pub(super) host: String,
    pub(super) port: String,
    pub(super) duration: String,
    pub(super) parallel: String,
    pub(super) direction: String,
    pub(super) bitrate: String,
    pub(super) window: String,
    pub(super) omit: String,
    pub(super) bind: String,
    pub(super) peer_type: String,
    pub(super) mss: String,
    pub(super) tos: String,
    pub(super) congestion: String,
    /// The "Advanced" section starts open: one of its settings is filled in (an error about
    /// it is then in view with its field).
    pub(super) advanced_open: bool,
    /// The capture section: port (empty = none), seconds, filter, and whether it starts open.
    pub(super) capture_port: String,
    pub(super) capture_seconds: String,
    pub(super) capture_filter: String,
    pub(super) capture_open: bool,
}

impl FormValues {
    pub(super) fn from(r: Option<&TestRequest>) -> FormValues {
        let g = |o: Option<&Option<String>>, d: &str| {
            o.and_then(|x| x.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| d.to_string())
        };
        FormValues {
            protocol: g(r.map(|r| &r.protocol), "tcp"),
            length: g(r.map(|r| &r.length), ""),
            host: r.map(|r| r.host.clone()).unwrap_or_default(),
            port: g(r.map(|r| &r.port), ""),
            duration: g(r.map(|r| &r.duration), "10"),
            parallel: g(r.map(|r| &r.parallel), "1"),
            direction: g(r.map(|r| &r.direction), "send"),
            bitrate: g(r.map(|r| &r.bitrate), ""),
            window: g(r.map(|r| &r.window), ""),
            omit: g(r.map(|r| &r.omit), "0"),
            bind: g(r.map(|r| &r.bind), ""),
            peer_type: g(r.map(|r| &r.peer_type), "iperf3"),
            mss: g(r.map(|r| &r.mss), ""),
            tos: g(r.map(|r| &r.tos), ""),
            congestion: g(r.map(|r| &r.congestion), ""),
            advanced_open: r.is_some_and(|r| {
                [&r.window, &r.mss, &r.tos, &r.congestion]
                    .iter()
                    .any(|f| f.as_deref().is_some_and(|v| !v.trim().is_empty()))
            }),
            capture_port: String::new(),
            capture_seconds: "5".into(),
            capture_filter: String::new(),
            capture_open: false,
        }
    }
}

#[derive(Template)]
#[template(path = "index.html")]
pub(super) struct IndexPage {
    pub(super) nav: bool,
    pub(super) csrf: String,
    pub(super) version: String,
    pub(super) error: Option<String>,
    pub(super) form: FormValues,
    pub(super) ports: Vec<PortOption>,
    pub(super) runs: Vec<RunView>,
}

pub(super) fn index_page(
    state: &AppState,
    auth: &Auth,
    req: Option<&TestRequest>,
    error: Option<String>,
) -> IndexPage {
    let ports = port_options();
    let mut rows = state
        .store
        .list_runs(&RunFilter {
            limit: Some(10),
            ..Default::default()
        })
        .unwrap_or_default();
    state.runs.registry().with_unsaved_ends(&mut rows);
    let runs = rows.iter().map(run_view).collect();
    let runs = with_suites(state, runs);
    IndexPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        error,
        form: FormValues::from(req),
        ports,
        runs,
    }
}

pub(super) async fn index(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    ok(&index_page(&state, &auth, None, None))
}

/// The new-test form: the test, and an optional packet capture started with it.
#[derive(Debug, Deserialize)]
pub(crate) struct NewTestForm {
    #[serde(flatten)]
    pub(super) test: TestRequest,
    /// Board port to capture on; empty = no capture.
    #[serde(default)]
    pub(super) capture_port: String,
    /// Seconds of the capture (the run's first seconds).
    #[serde(default)]
    pub(super) capture_seconds: String,
    /// The capture's filter (`host ADDR`, `port N`, `tcp`/`udp`/`icmp`, joined by `and`).
    #[serde(default)]
    pub(super) capture_filter: String,
}

impl NewTestForm {
    /// The capture asked for (`None`: no port chosen). Errors: seconds not a number.
    pub(super) fn capture(&self) -> Result<Option<crate::web::diag::CaptureRequest>, String> {
        let port = self.capture_port.trim();
        if port.is_empty() {
            return Ok(None);
        }
        let secs = self.capture_seconds.trim();
        let seconds = if secs.is_empty() {
            None
        } else {
            Some(secs.parse::<u64>().map_err(|_| {
                format!(
                    "capture seconds must be a whole number, got '{}'",
                    secs.escape_default()
                )
            })?)
        };
        Ok(Some(crate::web::diag::CaptureRequest {
            port: port.to_string(),
            seconds,
            filter: Some(self.capture_filter.clone()),
            ..Default::default()
        }))
    }
}

pub(super) async fn start_test(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<NewTestForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.test.csrf.as_deref())?;
    let ports = crate::board::ports();
    let res = match form.capture() {
        Ok(cap) => {
            crate::web::api::start_with_capture(
                &state,
                &auth,
                &req,
                &form.test,
                cap.as_ref(),
                &ports,
            )
            .await
        }
        Err(e) => Err((actix_web::http::StatusCode::BAD_REQUEST, e)),
    };
    Ok(match res {
        Ok(id) => {
            crate::web::audit::run_started(&state, &auth, &req, id);
            redirect(&format!("/runs/{id}"))
        }
        Err((status, e)) => {
            let mut page = index_page(&state, &auth, Some(&form.test), Some(e));
            page.form.capture_port = form.capture_port.clone();
            page.form.capture_seconds = form.capture_seconds.clone();
            page.form.capture_filter = form.capture_filter.clone();
            page.form.capture_open = true;
            html(status, &page)
        }
    })
}

// ---------------------------------------------------------------- history

pub(super) struct SuiteLink {
    pub(super) id: i64,
    pub(super) name: String,
    pub(super) peer: String,
    pub(super) when: String,
    pub(super) status: String,
}

#[derive(Template)]
#[template(path = "runs.html")]
pub(super) struct RunsPage {
    pub(super) nav: bool,
    pub(super) csrf: String,
    pub(super) version: String,
    pub(super) suites: Vec<SuiteLink>,
    pub(super) runs: Vec<RunView>,
    pub(super) statuses: Vec<String>,
    pub(super) filter_status: String,
    /// (stored word, label) of every kind, for the kind filter.
    pub(super) kinds: Vec<(String, String)>,
    pub(super) filter_kind: String,
    pub(super) filter_peer: String,
    pub(super) filter_port: String,
    /// Date range (YYYY-MM-DD, UTC) as typed.
    pub(super) filter_from: String,
    pub(super) filter_to: String,
    /// A bad filter (e.g. a date that is not one): shown, and no runs listed.
    pub(super) error: Option<String>,
    /// "Runs 1–100" / "older than run N" text above the table.
    pub(super) page_note: String,
    /// Link to the next (older) page with the same filters, if there are older runs.
    pub(super) older: Option<String>,
    /// Link back to the newest page, when this is not the first page.
    pub(super) newest: Option<String>,
}

/// Runs per History page.
pub(super) const HISTORY_PAGE: u32 = 100;

/// Percent-encode a query value (everything but unreserved characters).
pub(crate) fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `/runs?…` with the filters of `q` (empty ones left out) and `before`.
pub(super) fn runs_link(q: &RunFilter, before: Option<i64>) -> String {
    let mut parts = Vec::new();
    for (k, v) in [
        ("status", &q.status),
        ("kind", &q.kind),
        ("peer", &q.peer),
        ("port", &q.port),
        ("from", &q.from),
        ("to", &q.to),
    ] {
        if let Some(v) = v.as_deref().filter(|v| !v.trim().is_empty()) {
            parts.push(format!("{k}={}", query_value(v)));
        }
    }
    if let Some(b) = before {
        parts.push(format!("before={b}"));
    }
    if parts.is_empty() {
        "/runs".into()
    } else {
        format!("/runs?{}", parts.join("&"))
    }
}

/// When the History filter names one of the board's ports ("eth0"), also match the runs that
/// used one of its addresses without binding the port (iperf 2, server, sink and API runs
/// record the address only; issue 22 item 11).
pub(crate) fn port_filter_addresses(f: &mut RunFilter) {
    let Some(name) = f.port.as_deref().map(str::trim).filter(|p| !p.is_empty()) else {
        return;
    };
    if let Some(p) = crate::board::ports().into_iter().find(|p| p.name == name) {
        f.port_addrs = p.addresses.iter().map(|a| a.to_string()).collect();
    }
}

pub(super) async fn runs_page(
    auth: Auth,
    state: web::Data<AppState>,
    q: web::Query<RunFilter>,
) -> HttpResponse {
    let mut f = q.clone();
    port_filter_addresses(&mut f);
    f.limit = Some(HISTORY_PAGE + 1);
    let (rows, error) = match state.store.list_runs(&f) {
        Ok(mut r) => {
            state.runs.registry().with_unsaved_ends(&mut r);
            (r, None)
        }
        Err(crate::store::StoreError::Invalid(e)) => (Vec::new(), Some(e)),
        Err(e) => return internal(e),
    };
    let more = rows.len() > HISTORY_PAGE as usize;
    let rows = &rows[..rows.len().min(HISTORY_PAGE as usize)];
    let older = if more {
        rows.last().map(|r| runs_link(&q, Some(r.id)))
    } else {
        None
    };
    let page_note = match (rows.first(), rows.last(), q.before) {
        (Some(a), Some(b), Some(before)) => {
            format!("Runs {} … {} (older than run {before})", a.id, b.id)
        }
        (Some(a), Some(b), None) => format!("Runs {} … {}, newest first", a.id, b.id),
        _ => String::new(),
    };
    let newest = q.before.map(|_| runs_link(&q, None));
    let mut runs = with_suites(&state, rows.iter().map(run_view).collect());
    mark_origins(&state.store, &mut runs);
    let suites = state
        .store
        .suites(20)
        .unwrap_or_default()
        .into_iter()
        .map(|s| SuiteLink {
            id: s.id,
            name: s.name,
            peer: s.peer_host,
            when: fmt_time(s.created_at),
            status: s.status.to_string(),
        })
        .collect();
    ok(&RunsPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        suites,
        runs,
        statuses: ["running", "completed", "failed", "aborted"]
            .map(String::from)
            .to_vec(),
        filter_status: q.status.clone().unwrap_or_default(),
        kinds: crate::model::RunKind::ALL
            .iter()
            .map(|k| (k.as_str().to_string(), k.label().to_string()))
            .collect(),
        filter_kind: q.kind.clone().unwrap_or_default(),
        filter_peer: q.peer.clone().unwrap_or_default(),
        filter_port: q.port.clone().unwrap_or_default(),
        filter_from: q.from.clone().unwrap_or_default(),
        filter_to: q.to.clone().unwrap_or_default(),
        error,
        page_note,
        older,
        newest,
    })
}

// ---------------------------------------------------------------- suites

/// The UDP ladder form (also the JSON body of `POST /api/suites/udp-ladder`).
#[derive(Deserialize, Debug, Clone, Default)]
pub(crate) struct LadderForm {
    #[serde(default)]
    pub csrf: Option<String>,
    pub host: String,
    #[serde(default)]
    pub port: Option<String>,
    /// "100M,400M,1000M".
    #[serde(default)]
    pub rates: Option<String>,
    /// Seconds per test.
    #[serde(default)]
    pub duration: Option<String>,
    /// Datagram size.
    #[serde(default)]
    pub length: Option<String>,
    /// Board port.
    #[serde(default)]
    pub bind: Option<String>,
}

impl LadderForm {
    /// Validate and start the suite; returns its id.
    pub(crate) fn start(&self, state: &AppState) -> Result<i64, String> {
        let rates =
            crate::spec::suite::parse_rates(self.rates.as_deref().unwrap_or("100M,400M,1000M"))?;
        let base = TestRequest {
            host: self.host.clone(),
            port: self.port.clone(),
            duration: self.duration.clone(),
            length: self.length.clone(),
            bind: self.bind.clone(),
            ..Default::default()
        }
        .parse()?;
        let specs = crate::runs::suites::ladder_specs(&base, &rates, &crate::board::ports())?;
        crate::runs::suites::run::start_suite(&state.runs, crate::spec::suite::UDP_LADDER, specs)
    }
}

pub(super) async fn start_ladder(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<LadderForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    Ok(match form.start(&state) {
        Ok(id) => {
            crate::web::audit::suite_started(&auth, &req, id, crate::spec::suite::UDP_LADDER);
            redirect(&format!("/suites/{id}"))
        }
        Err(e) => message(
            actix_web::http::StatusCode::BAD_REQUEST,
            Some(&auth),
            "Cannot start the ladder",
            &e,
        ),
    })
}
