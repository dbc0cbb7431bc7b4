//! One run's page (`/runs/{id}`, live through server-sent events), its stop and delete
//! buttons, and its exports (JSON, CSV, text summary).

use super::*;

#[derive(Template)]
#[template(path = "run.html")]
pub(super) struct RunPage {
    pub(super) nav: bool,
    pub(super) csrf: String,
    pub(super) version: String,
    /// Headers of the two protocol-specific interval columns.
    pub(super) col1: String,
    pub(super) col2: String,
    pub(super) run: RunView,
    /// The kind's view: title, command lines, headline cards, facts.
    pub(super) view: crate::results::view::KindView,
    pub(super) live: bool,
    pub(super) intervals: Vec<IntervalView>,
    pub(super) last_rate: String,
    /// The run has a text summary in iperf3's format (`/runs/{id}/summary.txt`; kept off the
    /// page, whose units are `model::display`'s).
    pub(super) text: bool,
    /// The run has an iperf3 report, so its JSON export is iperf3's `-J` document; otherwise
    /// (an RFC 2544, monitor or latency run) it is the run's own document.
    pub(super) iperf3_json: bool,
    /// Forwarding and monitor runs: what the board saw (forwarded rates, ports, conntrack).
    pub(super) board_summary: Option<String>,
    pub(super) analysis: Option<AnalysisView>,
    pub(super) cores: Vec<CoreView>,
    pub(super) legs: Vec<LegView>,
    pub(super) parent_id: Option<i64>,
    /// Pinned runs are never pruned by history retention.
    pub(super) pinned: bool,
    /// Latency runs: the latency result, shown first (the throughput verdict is the load's).
    pub(super) latency: Option<LatencyHead>,
    /// Only the last [`PAGE_INTERVALS`] intervals are shown (the exports hold all).
    pub(super) older_intervals: bool,
    /// Where the lost datagrams went (the loss ledger) and the board's counters that moved.
    pub(super) board: crate::results::view::BoardView,
    /// RFC 2544 runs: the throughput and frame-loss tables, the chart and the trials.
    pub(super) rfc2544: Option<Rfc2544Section>,
    /// A standalone run given pass/fail limits: "PASS"/"FAIL" and its lines
    /// (`results::verdict::run_verdict_lines`).
    pub(super) verdict: Option<(String, Vec<String>)>,
    /// Packet captures started with the run (kept an hour after they ended).
    pub(super) captures: Vec<CaptureLine>,
}

/// A packet capture of a run, as its page lists it.
pub(super) struct CaptureLine {
    pub(super) id: u64,
    /// "capture 3 on eth0 (port 5201): done (time), 41 packets, 5.3 kB".
    pub(super) text: String,
    /// The pcap's download link once it has ended.
    pub(super) pcap: Option<String>,
}

impl CaptureLine {
    /// From a capture's JSON (`crate::web::diag::run_captures`).
    pub(super) fn of(v: &serde_json::Value) -> CaptureLine {
        let id = v["id"].as_u64().unwrap_or(0);
        let state = v["state"].as_str().unwrap_or("?");
        let why = match (&v["ended_by"], &v["error"], &v["removed"]) {
            (serde_json::Value::String(b), _, _) => format!(" ({b})"),
            (_, serde_json::Value::String(e), _) => format!(": {e}"),
            (_, _, serde_json::Value::String(r)) => format!(" ({r})"),
            _ => String::new(),
        };
        let filter = v["filter"].as_str().filter(|f| !f.is_empty());
        CaptureLine {
            id,
            text: format!(
                "capture {id} on {}{}: {state}{why}, {} packets, {}",
                v["port"].as_str().unwrap_or("?"),
                filter.map(|f| format!(" ({f})")).unwrap_or_default(),
                v["packets"].as_u64().unwrap_or(0),
                display::size(v["bytes"].as_f64().unwrap_or(0.0)),
            ),
            pcap: matches!(state, "done" | "failed")
                .then(|| v["pcap"].as_str().map(str::to_string))
                .flatten(),
        }
    }
}

/// The tables of an RFC 2544 run.
pub(super) struct Rfc2544Section {
    pub(super) throughput: Vec<crate::results::rfc2544::ThroughputRow>,
    /// §26.2 at the throughput found, per frame size.
    pub(super) latency: Vec<crate::results::rfc2544::LatencyRow>,
    pub(super) loss_headings: Vec<String>,
    pub(super) loss: Vec<crate::results::rfc2544::LossRow>,
    /// §26.4 / RFC 9004, per frame size.
    pub(super) b2b: Vec<crate::results::rfc2544::B2bRow>,
    /// The chart as an SVG element (made here from numbers, no user text).
    pub(super) chart: String,
    /// The loss rate by offered frames/s, per frame size (SVG from numbers).
    pub(super) loss_chart: String,
    /// What to do about a PC's limit (the receiving PC, the generator's lag), one line each.
    pub(super) advice: Vec<String>,
    pub(super) trials: Vec<TrialLine>,
}

/// One trial of an RFC 2544 run.
pub(super) struct TrialLine {
    pub(super) n: usize,
    pub(super) test: String,
    pub(super) frame: u64,
    pub(super) target: String,
    pub(super) offered: String,
    pub(super) lost: String,
    pub(super) loss: String,
    pub(super) verdict: String,
    /// The generator's largest lag behind its schedule, ms ("0.4"; "—" unknown).
    pub(super) lag: String,
    /// The lag explains the trial's loss: shown as a warning.
    pub(super) lagged: bool,
    pub(super) cpu: String,
}

impl Rfc2544Section {
    pub(super) fn of(run: &RunRow) -> Option<Rfc2544Section> {
        match run.kind {
            RunKind::Rfc2544 => {}
            RunKind::Iperf3
            | RunKind::Iperf2
            | RunKind::Multi
            | RunKind::Forward
            | RunKind::Monitor
            | RunKind::HttpServe
            | RunKind::HttpGet
            | RunKind::TcpSink
            | RunKind::TcpSource
            | RunKind::Latency => return None,
        }
        use crate::model::display::count;
        use crate::results::rfc2544::Bound;
        let s = &crate::results::rfc2544::Rfc2544Summary::of_summary(&run.summary);
        let trials = s
            .trials
            .iter()
            .take(500)
            .enumerate()
            .map(|(n, t)| {
                let v = &t.verdict;
                let lag = t.sender_lag_ms.filter(|l| l.is_finite());
                let verdict = match (v.passed, v.bound) {
                    (false, _) if v.lagged => format!(
                        "lost frames in PC1's catch-up burst ({:.1} ms behind): not the board's, tried again",
                        lag.unwrap_or(0.0)
                    ),
                    (true, Some(Bound::Generator)) => {
                        "passed; the PC could not offer the rate".to_string()
                    }
                    (true, _) => "passed".to_string(),
                    (false, Some(Bound::Dut)) => "lost frames: the board".to_string(),
                    (false, Some(Bound::Generator)) => "lost frames: the generating PC".to_string(),
                    (false, Some(Bound::Receiver)) => "lost frames: the receiving PC".to_string(),
                    (false, None) => "lost frames".to_string(),
                };
                TrialLine {
                    n: n + 1,
                    test: t.test.clone(),
                    frame: u64::from(t.frame),
                    target: format!(
                        "{} ({:.1} %)",
                        count(t.target_fps.round() as u64),
                        t.target_percent
                    ),
                    offered: match t.burst {
                        Some(_) => format!("a burst of {}", count(t.offered)),
                        None => format!("{} × {:.0} s", count(t.offered), t.seconds),
                    },
                    lost: count(v.lost_frames),
                    loss: format!("{:.3} %", v.loss_ratio * 100.0),
                    verdict,
                    lag: lag.map_or_else(|| "—".to_string(), |l| format!("{l:.1}")),
                    lagged: v.lagged,
                    cpu: Some(
                        t.cpu_busy
                            .iter()
                            .map(|v| format!("{v:.0}"))
                            .collect::<Vec<_>>()
                            .join(" / "),
                    )
                    .filter(|c| !c.is_empty())
                    .map(|c| format!("{c} %"))
                    .unwrap_or_else(|| "—".into()),
                }
            })
            .collect();
        Some(Rfc2544Section {
            throughput: crate::results::rfc2544::throughput_rows(s),
            latency: crate::results::rfc2544::latency_rows(s),
            loss_headings: crate::results::rfc2544::loss_headings(),
            loss: crate::results::rfc2544::loss_rows(s),
            b2b: crate::results::rfc2544::b2b_rows(s),
            chart: crate::results::rfc2544::chart_svg(s),
            loss_chart: crate::results::rfc2544::loss_chart_svg(s),
            advice: crate::results::rfc2544::advice(s),
            trials,
        })
    }
}

/// The headline of a latency run: the latency verdict, its tone, the load's congestion
/// control, and why the load may not have filled the queue.
pub(super) struct LatencyHead {
    pub(super) verdict: String,
    /// good (under 5 ms, nothing speaks against the load), warn (30 ms and more) or "".
    pub(super) class: String,
    pub(super) congestion: String,
    pub(super) notes: Vec<String>,
}

impl LatencyHead {
    pub(super) fn of(run: &RunRow) -> Option<LatencyHead> {
        if !run.kind.has_latency_probes() {
            return None;
        }
        let s = crate::results::latency::LatencyResult::of_summary(&run.summary)?;
        let used = s.congestion.as_ref();
        let asked = crate::results::latency::StoredLatencyParams::of_params(&run.params);
        let notes = crate::results::latency::fill_notes(used, &asked);
        let (verdict, class) = crate::results::latency::headline(&s.verdict, s.increase_ms, &notes);
        Some(LatencyHead {
            verdict,
            class: class.into(),
            congestion: crate::results::latency::congestion_text(used, &asked)
                .unwrap_or_else(|| "not recorded (each host's default)".into()),
            notes,
        })
    }
}

/// Ceiling and verdict as shown.
pub(super) struct AnalysisView {
    pub(super) ceiling: String,
    pub(super) basis: String,
    pub(super) percent: String,
    pub(super) verdict: String,
    /// Where the packets went, when the verdict carries the ledger's first sentence: shown
    /// after the verdict in normal weight (a 40–50-word bold verdict read 18 lines on a phone).
    pub(super) verdict_detail: String,
    /// CSS class: good (link-bound), warn (core/softirq, loss on the way), bad (measurement
    /// error), "".
    pub(super) class: String,
    pub(super) evidence: Vec<String>,
    /// Paced runs: target / sent / received and the shortfall note.
    pub(super) rate: Option<RateView>,
}

/// A verdict as the page shows it: the judgement in bold, and the ledger's first sentence
/// (`first_board`, which the analysis appends after "; ") apart. `(verdict, "")` when the
/// verdict does not end with it.
pub(super) fn split_verdict(verdict: &str, first_board: Option<&String>) -> (String, String) {
    match first_board.and_then(|f| Some((verdict.strip_suffix(f.as_str())?.strip_suffix("; ")?, f)))
    {
        Some((head, detail)) if !head.is_empty() => (head.to_string(), detail.clone()),
        _ => (verdict.to_string(), String::new()),
    }
}

/// Target, sent and received rate of a paced run, as shown.
pub(super) struct RateView {
    pub(super) target: String,
    pub(super) sent: String,
    pub(super) received: String,
    /// "shortfall: …", "sent in full; the receiver got only …" or "reached the requested rate".
    pub(super) note: String,
    /// "bad" when the sender fell short, the verdict's tone when the receiver got less, else
    /// "good".
    pub(super) class: String,
}

impl AnalysisView {
    pub(super) fn of(a: &crate::results::analysis::Analysis) -> AnalysisView {
        let (verdict, verdict_detail) = split_verdict(&a.verdict_text, a.board.first());
        AnalysisView {
            ceiling: a
                .ceiling_bps
                .map(display::rate)
                .unwrap_or_else(|| "unknown".into()),
            basis: a.ceiling_basis.clone(),
            percent: a
                .percent_of_ceiling
                .map(|p| format!("{p:.1} %"))
                .unwrap_or_else(|| "—".into()),
            verdict,
            verdict_detail,
            class: a.verdict.tone().into(),
            evidence: a.evidence.clone(),
            // The card's note and colour come from the same judgement as the verdict.
            rate: a
                .rate_check
                .zip(a.rate_note())
                .map(|(c, (note, tone))| RateView {
                    target: display::rate(c.target_bits_per_second),
                    sent: display::rate(c.sent_bits_per_second),
                    received: c
                        .received_bits_per_second
                        .map(display::rate)
                        .unwrap_or_else(|| "—".into()),
                    note,
                    class: tone.into(),
                }),
        }
    }
}

/// Mean CPU of one core over the run, as shown.
pub(super) struct CoreView {
    pub(super) name: String,
    pub(super) busy: String,
    pub(super) user: String,
    pub(super) system: String,
    pub(super) irq: String,
    pub(super) softirq: String,
    pub(super) peak: String,
    pub(super) hot: bool,
}

/// One leg of a multi-port run, as shown.
pub(super) struct LegView {
    pub(super) n: usize,
    pub(super) id: i64,
    pub(super) port: String,
    pub(super) peer: String,
    pub(super) test: String,
    pub(super) status: String,
    pub(super) sender_rate: String,
    pub(super) receiver_rate: String,
    pub(super) retr_or_loss: String,
    pub(super) percent: String,
    pub(super) verdict: String,
}

pub(super) fn core_views(cores: &[crate::results::analysis::CoreLoad]) -> Vec<CoreView> {
    let f = |v: f64| format!("{v:.0} %");
    cores
        .iter()
        .map(|c| CoreView {
            name: if c.cpu < 0 {
                "all".into()
            } else {
                format!("cpu{}", c.cpu)
            },
            busy: f(c.busy),
            user: f(c.user),
            system: f(c.system),
            irq: f(c.irq),
            softirq: f(c.softirq),
            peak: f(c.peak_busy),
            hot: c.cpu >= 0 && c.busy >= crate::results::analysis::CORE_SATURATED,
        })
        .collect()
}

pub(super) fn leg_views(state: &AppState, run: &RunRow) -> Vec<LegView> {
    if !run.kind.has_legs() {
        return Vec::new();
    }
    state
        .store
        .children(run.id)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let a = crate::results::charts::analyze_run(&state.store, l);
            let v = run_view(l);
            LegView {
                n: i + 1,
                id: l.id,
                port: l.bind_dev.clone().unwrap_or_default(),
                peer: v.peer.clone(),
                test: format!("{} {}", v.protocol, v.direction),
                status: v.status.clone(),
                sender_rate: v.sender_rate.clone(),
                receiver_rate: v.receiver_rate.clone(),
                retr_or_loss: v.retr_or_loss.clone(),
                percent: match a.as_ref().map(|a| (a.percent_of_ceiling, a.ceiling_bps)) {
                    Some((Some(p), _)) => format!("{p:.1} %"),
                    Some((None, None)) => "unknown".into(),
                    _ => "—".into(),
                },
                verdict: a.map(|a| a.verdict_text).unwrap_or_default(),
            }
        })
        .collect()
}

/// A multi-port run's intervals: every leg's, each row's ID naming its leg ("leg 2 · 5").
pub(super) fn leg_intervals(state: &AppState, run: &RunRow) -> Vec<IntervalView> {
    let mut out = Vec::new();
    for (n, leg) in state
        .store
        .children(run.id)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let iv = state.store.intervals(leg.id).unwrap_or_default();
        for mut v in interval_views(&iv) {
            v.id = format!("leg {} · {}", n + 1, v.id);
            out.push(v);
        }
    }
    out
}

/// Interval sequence numbers the run page shows (the last ones; the exports hold all).
pub(crate) const PAGE_INTERVALS: i64 = 1000;

pub(super) fn load(
    state: &AppState,
    auth: &Auth,
    id: i64,
) -> Result<(RunRow, Vec<IntervalRow>, Option<Report>), HttpResponse> {
    load_tail(state, auth, id, None)
}

/// A run and its report, without its intervals (for answers that stream them).
pub(super) fn load_head(
    state: &AppState,
    auth: &Auth,
    id: i64,
) -> Result<(RunRow, Option<Report>), HttpResponse> {
    load_tail(state, auth, id, Some(0)).map(|(r, _, rep)| (r, rep))
}

/// [`load`] with only the intervals of the last `tail` sequence numbers (all with `None`).
pub(super) fn load_tail(
    state: &AppState,
    auth: &Auth,
    id: i64,
    tail: Option<i64>,
) -> Result<(RunRow, Vec<IntervalRow>, Option<Report>), HttpResponse> {
    match state.store.get_run(id) {
        Ok(Some(mut r)) => {
            state.runs.registry().with_unsaved_end(&mut r);
            let iv = match tail {
                Some(n) => state.store.intervals_tail(id, n),
                None => state.store.intervals(id),
            }
            .map_err(internal)?;
            let rep = state.store.report(id).map_err(internal)?;
            Ok((r, iv, rep))
        }
        Ok(None) => Err(message(
            actix_web::http::StatusCode::NOT_FOUND,
            Some(auth),
            "No such run",
            &format!("There is no run {id}. It may have been deleted."),
        )),
        Err(e) => Err(internal(e)),
    }
}

pub(super) async fn run_page(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    let id = path.into_inner();
    let (run, iv, rep) = match load_tail(&state, &auth, id, Some(PAGE_INTERVALS)) {
        Ok(x) => x,
        Err(resp) => return resp,
    };
    let older_intervals = iv.first().is_some_and(|r| r.seq > 0);
    let intervals = if run.kind.has_legs() {
        leg_intervals(&state, &run)
    } else {
        interval_views(&iv)
    };
    let last_rate = intervals
        .iter()
        .rev()
        .find(|i| i.class == "sum")
        .map(|i| i.bitrate.clone())
        .unwrap_or_else(|| "—".into());
    let text = run_text(&run, rep.as_ref()).is_some();
    let board_summary = (run.kind.has_board_summary() && !run.summary.is_null())
        .then(|| crate::results::text::summary_text(&run));
    let udp = run.protocol == RunProtocol::Udp;
    let analysis = crate::results::charts::analyze_run(&state.store, &run);
    let cores = match &analysis {
        Some(a) => core_views(&a.cores),
        // A multi-port run is judged per leg; its CPU table covers all legs.
        None => core_views(&crate::results::analysis::core_loads(
            &state.store.cpu_samples(id).unwrap_or_default(),
        )),
    };
    let legs = leg_views(&state, &run);
    let latency = LatencyHead::of(&run);
    let rfc2544 = Rfc2544Section::of(&run);
    let mut view = crate::results::view::view(&run);
    if latency.is_some() {
        // The verdict leads the page; Details keep the figures.
        view.facts.retain(|f| f.0 != "Verdict");
    }
    ok(&RunPage {
        latency,
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        col1: if udp { "Jitter" } else { "Retr" }.into(),
        col2: if udp { "Lost/Total" } else { "Cwnd" }.into(),
        live: state.runs.registry().is_live(id),
        view,
        run: {
            let mut v = [run_view(&run)];
            mark_origins(&state.store, &mut v);
            let [v] = v;
            v
        },
        intervals,
        last_rate,
        text,
        iperf3_json: rep.is_some(),
        board_summary,
        // An RFC 2544 run's verdicts are its trials' (the tables below): no ceiling verdict.
        analysis: analysis
            .as_ref()
            .filter(|a| a.bitrate_bps.is_some() && rfc2544.is_none())
            .map(AnalysisView::of),
        rfc2544,
        verdict: crate::results::verdict::judge_run(&state.store, &run).map(|v| {
            (
                if v.pass { "PASS" } else { "FAIL" }.to_string(),
                crate::results::verdict::run_verdict_lines(&v),
            )
        }),
        captures: crate::web::diag::run_captures(id)
            .iter()
            .map(CaptureLine::of)
            .collect(),
        cores,
        legs,
        parent_id: run.parent_id,
        pinned: state
            .store
            .is_pinned(run.id)
            .ok()
            .flatten()
            .unwrap_or(false),
        older_intervals,
        board: {
            let (b, l) = state.store.run_board(id).unwrap_or_default();
            crate::results::view::board_view(b.as_ref(), l.as_ref())
        },
    })
}

pub(super) async fn delete_run(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    if state.runs.registry().is_live(id) {
        return Ok(message(
            actix_web::http::StatusCode::CONFLICT,
            Some(&auth),
            "Run is active",
            "Stop the run before deleting it.",
        ));
    }
    Ok(match state.store.delete_run(id) {
        Ok(true) => redirect("/runs"),
        Ok(false) => message(
            actix_web::http::StatusCode::NOT_FOUND,
            Some(&auth),
            "No such run",
            "Nothing was deleted.",
        ),
        Err(e) => internal(e),
    })
}

pub(super) async fn stop_run(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    Ok(if state.runs.registry().stop(id) {
        redirect(&format!("/runs/{id}"))
    } else {
        message(
            actix_web::http::StatusCode::CONFLICT,
            Some(&auth),
            "Not stoppable",
            "Only a running test started from this board can be stopped.",
        )
    })
}

/// `GET /runs/{id}/export.json`: the run's iperf3 `-J` document as a download, streamed.
pub(super) async fn export_json(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    let id = path.into_inner();
    let (run, rep) = match load_head(&state, &auth, id) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let b =
        crate::web::respond::download_head("application/json", &format!("netperfd-run-{id}.json"));
    let st = state.clone();
    crate::web::stream::streamed(b, "run export", move |w| {
        crate::results::export::write_run_json(w, &st.store, &run, rep.as_ref(), true)
    })
}

/// The run's summary as stock iperf3 prints it (its own units: "Mbits/sec", "MBytes"); for
/// forwarding and monitor runs the board's summary first. None when there is neither.
pub(super) fn run_text(run: &RunRow, rep: Option<&Report>) -> Option<String> {
    let text = rep.map(|r| {
        let mut t = report::text_header(r);
        t.push_str(&report::text_summary(r));
        t
    });
    // Forwarding and monitor runs: what the board saw (ports, forwarded rates, conntrack) first.
    crate::results::text::board_text(run, text)
}

/// `GET /runs/{id}/summary.txt`: [`run_text`] as text/plain; 404 when the run has none.
pub(super) async fn export_text(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    let id = path.into_inner();
    match load(&state, &auth, id) {
        Ok((run, _, rep)) => match run_text(&run, rep.as_ref()) {
            Some(t) => HttpResponse::Ok()
                .content_type("text/plain; charset=utf-8")
                .body(t),
            None => message(
                actix_web::http::StatusCode::NOT_FOUND,
                Some(&auth),
                "No text summary",
                &format!("Run {id} has no iperf3-format summary."),
            ),
        },
        Err(r) => r,
    }
}

/// `GET /runs/{id}/export.csv`: the run's CSV as a download, streamed.
pub(super) async fn export_csv(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
) -> HttpResponse {
    let id = path.into_inner();
    let (run, rep) = match load_head(&state, &auth, id) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let b = crate::web::respond::download_head(
        "text/csv; charset=utf-8",
        &format!("netperfd-run-{id}.csv"),
    );
    let st = state.clone();
    crate::web::stream::streamed(b, "run export", move |w| {
        crate::results::export::write_run_csv(w, &st.store, &run, rep.as_ref())
    })
}

#[cfg(test)]
mod tests {
    use super::split_verdict;

    /// Issue 38 item 7: the ledger's sentence leaves the bold verdict; nothing else is cut.
    #[test]
    fn the_ledger_sentence_is_shown_apart_from_the_verdict() {
        let first = "87,559 of 87,520 lost datagrams were dropped by the board's own egress queue (tbf on eth0): the sender outran the link — lower -b or raise the shaper".to_string();
        let v = format!("limited by the board's own shaper: tbf 50 Mbit/s on eth0; the requested rate was sent, the receiver got 32.4 % of it; {first}");
        let (head, detail) = split_verdict(&v, Some(&first));
        assert_eq!(
            head,
            "limited by the board's own shaper: tbf 50 Mbit/s on eth0; the requested rate was sent, the receiver got 32.4 % of it"
        );
        assert_eq!(detail, first);
        // No ledger sentence in the verdict, or none at all: the verdict whole.
        assert_eq!(
            split_verdict("link-bound", Some(&first)),
            ("link-bound".to_string(), String::new())
        );
        assert_eq!(split_verdict("link-bound", None).0, "link-bound");
        assert_eq!(split_verdict(&first, Some(&first)).0, first);
    }
}
