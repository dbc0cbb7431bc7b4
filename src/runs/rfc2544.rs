//! RFC 2544 runs (kind `rfc2544`): the board as the device under test, forwarding between two
//! of its ports while the peer agent on PC1 generates UDP frames of each size to PC2 (stock
//! `iperf3 -s`, or `netperfd -s`, which also reports its own drops). Each trial is one UDP
//! test on the agent at a rate in frames/s; around it the board reads its own counters, so
//! every trial says whose limit its loss showed (`results::rfc2544`). The trials, the
//! throughput per frame size (§26.1) and the frame-loss-rate steps (§26.3) are the run's
//! summary, stored after every trial so the run page shows the search as it goes.
//!
//! Like a forwarding run, it can turn on forwarding with MASQUERADE for the run and undoes
//! only what it turned on; the 1 Hz monitor samples the two ports and the CPU per core
//! (each trial's CPU per core is taken from those samples).

use crate::board::apply::Controller;
use crate::board::counters::{BoardDelta, BoardReading};
use crate::model::{RunDirection, RunFigures, RunKind, RunProtocol, RunRole, RunStatus};
use crate::peer::{PeerClient, PeerTestSpec};
use crate::results::rfc2544::{self as judge, Search, TrialCounts};
use crate::results::rfc2544_params::Rfc2544Params;
use crate::results::rfc2544_summary::{
    B2bRecord, BurstResult, LatencyRecord, LossRecord, LossStep, NatRecord, PeerRef,
    Rfc2544Summary, Rtt, TargetRef, ThroughputRecord, TrialProbes, TrialRecord,
};
use crate::runs::context::RunContext;
use crate::runs::forward::{enable_forwarding, run_peer_job, undo_forwarding, Undo};
use crate::runs::recorder::{Ended, Measured, Sampling};
use crate::spec::rfc2544::{self as frames, Rfc2544Plan, Rfc2544Test};
use crate::store::NewRun;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

pub(crate) use crate::spec::rfc2544::PROBE_INTERVAL_MS;

/// Record and start an RFC 2544 run; its id at once, and a handle that resolves when it has
/// ended. `ctl` changes the board when the plan asks for NAT. Errors: the peer address does
/// not parse, NAT without a controller, or the store could not record the run.
pub(crate) fn start_rfc2544(
    ctx: &RunContext,
    ctl: Option<Arc<Controller>>,
    plan: Rfc2544Plan,
    suite_id: Option<i64>,
) -> Result<crate::runs::context::Started, String> {
    let client = PeerClient::parse_remote(&plan.peer, &plan.token)?;
    if plan.nat && ctl.is_none() {
        return Err("no board controller to set up forwarding with".into());
    }
    let params = Rfc2544Params {
        peer: client.url(),
        target: plan.target.clone(),
        port: plan.port,
        ingress: plan.ingress.clone(),
        egress: plan.egress.clone(),
        nat: plan.nat,
        sizes: plan.sizes.clone(),
        trial_s: plan.trial_s,
        loss_percent: plan.loss * 100.0,
        resolution_percent: plan.resolution * 100.0,
        tests: plan.tests.clone(),
        b2b_repeat: plan.b2b_repeat,
        echo_port: plan.echo_port,
        line_bps: plan.line_bps,
        line_source: plan.line_source.to_string(),
        // What `results::verdict::judge_run` judges the run against.
        thresholds: (!plan.thresholds.is_empty()).then_some(plan.thresholds),
    };
    let ports = vec![plan.ingress.clone(), plan.egress.clone()];
    let cancel = Arc::new(Notify::new());
    ctx.start(
        &NewRun {
            role: RunRole::Client,
            protocol: RunProtocol::Udp,
            peer_host: plan.target.clone(),
            peer_port: plan.port,
            bind_dev: Some(format!("{},{}", plan.ingress, plan.egress)),
            direction: plan.direction.clone(),
            params: params.to_value(),
            kind: RunKind::Rfc2544,
            suite_id,
            ..Default::default()
        },
        Sampling::Ports(ports),
        Some(cancel.clone()),
        move |ctx, rec| {
            let mut r = Runner {
                id: rec.id(),
                ctx,
                plan,
                client,
                cancel,
                stopped: false,
                t0: Instant::now(),
                summary: Rfc2544Summary::default(),
            };
            async move {
                let (status, error) = r.run(ctl).await;
                r.ended(status, error)
            }
        },
    )
}

/// Start `req` as a step of suite `suite_id`: planned against the board's ports (MTU, link
/// speed), with the stored agent token, and the stored agent address when the step names
/// none (both the Forwarding page's); the run context's board controller turns on NAT when asked.
/// Errors: the plan's message, or no stored token or address.
pub(crate) async fn start_request(
    ctx: &RunContext,
    mut req: crate::spec::rfc2544::Rfc2544Request,
    suite_id: Option<i64>,
) -> Result<crate::runs::context::Started, String> {
    let setting = |k: &str| ctx.store().setting(k).ok().flatten();
    if req.peer.trim().is_empty() {
        req.peer = setting(crate::runs::forward::URL_KEY).ok_or(
            "no peer agent address: set the step's peer, or run a forwarding test first (its address is kept)",
        )?;
    }
    // The stored token goes only to the stored agent address.
    let token =
        crate::runs::forward::stored_token_for(ctx.store(), &req.peer, req.token.as_deref())?;
    let plan = req.plan(&crate::board::port_facts().await, token.as_deref())?;
    start_rfc2544(ctx, ctx.board().cloned(), plan, suite_id)
}

/// The run's end once the forwarding it turned on is undone: its error (the tests' error, and
/// `undone`'s after it; a failed undo fails the run) and whether the forwarding was restored
/// (decided by `undone` itself, never by the words of a message).
fn with_undo(
    error: Option<(RunStatus, String)>,
    undone: Result<(), String>,
) -> (Option<(RunStatus, String)>, bool) {
    match undone {
        Ok(()) => (error, true),
        Err(e) => {
            let error = match error {
                Some((_, m)) => (RunStatus::Failed, format!("{m}; {e}")),
                None => (RunStatus::Failed, e),
            };
            (Some(error), false)
        }
    }
}

/// The rate a lagging generator could not be shown to offer: frames/s asked, and its lag in
/// each try there (ms, in order).
struct LagLimit {
    fps: f64,
    lags_ms: Vec<f64>,
}

struct Runner {
    ctx: RunContext,
    id: i64,
    plan: Rfc2544Plan,
    client: PeerClient,
    cancel: Arc<Notify>,
    /// The run was asked to stop (sticky: a stop that lands while a 1 s trial is ending, or
    /// between trials, still ends the run; before, the trial's own stop took it and the
    /// search went on to a "completed" run with a PASS, from the tryout).
    stopped: bool,
    t0: Instant,
    /// The summary as stored after every trial (its `trials` the evidence).
    summary: Rfc2544Summary,
}

/// The agent's round trips as the summary keeps them.
fn rtt_of(d: &crate::peer::spec::Delays) -> Rtt {
    Rtt {
        min: d.min,
        p50: d.p50,
        p99: d.p99,
        max: d.max,
        n: d.n as u64,
    }
}

/// The agent's probe results as a trial keeps them.
fn probes_of(p: &crate::peer::spec::ProbeSummary) -> TrialProbes {
    TrialProbes {
        sent: p.sent,
        answered: p.answered,
        gave_up: p.gave_up,
        idle: p.idle.as_ref().map(rtt_of),
        loaded: p.loaded.as_ref().map(rtt_of),
    }
}

/// Put `row` as frame size `frame`'s row of `list` (replacing the one there, else appended).
fn put_row<T>(list: &mut Vec<T>, row: T, frame: fn(&T) -> u32) {
    let f = frame(&row);
    match list.iter_mut().find(|r| frame(r) == f) {
        Some(r) => *r = row,
        None => list.push(row),
    }
}

/// Sum of the `packets` of a drop list (`netperfd_drops`), capped at what can be trusted.
fn drops_sum(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .take(16)
                .filter_map(|p| p.get("packets").and_then(Value::as_u64))
                .fold(0u64, u64::saturating_add)
        })
        .unwrap_or(0)
}

/// The agent's test for one trial at `fps` frames/s of `frame` bytes (with `burst`: a burst
/// of that many frames, then [`judge::B2B_QUIET_S`] of quiet).
fn trial_spec(
    p: &Rfc2544Plan,
    frame: u32,
    fps: f64,
    probe: Option<crate::peer::spec::ProbeRequest>,
    burst: Option<u64>,
) -> PeerTestSpec {
    let time = match burst {
        Some(n) => (n as f64 / fps.max(1.0) + judge::B2B_QUIET_S).ceil() as u32,
        None => p.trial_s,
    };
    PeerTestSpec {
        host: p.target.clone(),
        port: Some(p.port),
        time: Some(time),
        parallel: Some(1),
        reverse: p.direction == RunDirection::Receive,
        bidir: p.direction == RunDirection::Bidir,
        udp: true,
        bitrate: Some(frames::payload_bps(fps, frame).max(1)),
        length: Some(frames::payload(frame)),
        probe,
        burst,
    }
}

/// A trial's counts from the agent's `report` and the board's counters over the trial
/// (`delta`), and the board's loss ledger of its lost datagrams.
fn trial_counts(
    p: &Rfc2544Plan,
    report: &crate::engine::report::Report,
    delta: &crate::board::counters::BoardDelta,
    frame: u32,
    fps: f64,
) -> (TrialCounts, crate::results::ledger::LossLedger) {
    let (mut offered, mut expected, mut lost, mut seconds) = (0u64, 0u64, 0u64, 0f64);
    let mut lag_ms = 0f64;
    for s in &report.streams {
        if let Some(u) = &s.udp {
            offered += u.sent_packets.unwrap_or(0);
            expected += u.expected.unwrap_or(0);
            lost += u.lost.unwrap_or(0);
            lag_ms = lag_ms.max(u.sender_max_lag_ms.unwrap_or(0.0));
        }
        seconds = seconds.max(s.sender.seconds);
    }
    // The agent is PC1: in a `receive` test PC2 generates and PC1 receives.
    let (receiver, generator) = if p.direction == RunDirection::Receive {
        (&report.local_drops, &report.peer_drops)
    } else {
        (&report.peer_drops, &report.local_drops)
    };
    let (board_in, board_out) = port_frames(delta, &p.ingress, &p.egress, &p.direction, frame);
    let flow = crate::results::ledger::Flow::udp(
        u64::from(frames::payload(frame)),
        p.target.contains(':'),
        None,
    );
    let ports = vec![p.ingress.clone(), p.egress.clone()];
    let ledger = crate::results::ledger::ledger(
        lost,
        crate::results::ledger::Path::Forwarded,
        &ports,
        delta,
        &flow,
    );
    let counts = TrialCounts {
        target_fps: fps,
        offered,
        expected,
        lost,
        seconds,
        board_in,
        board_out,
        board_drops: ledger.at_least(),
        receiver_drops: drops_sum(receiver.as_ref()),
        generator_drops: drops_sum(generator.as_ref()),
        lag_ms,
    };
    (counts, ledger)
}

impl Runner {
    fn store_summary(&self) {
        if let Err(e) = self
            .ctx
            .store()
            .set_run_summary(self.id, &self.summary.to_value())
        {
            tracing::warn!(run = self.id, "cannot store the summary: {e}");
        }
    }

    async fn run(&mut self, ctl: Option<Arc<Controller>>) -> (RunStatus, Option<String>) {
        let p = &self.plan;
        self.summary = Rfc2544Summary {
            peer: PeerRef {
                url: self.client.url(),
                info: None,
            },
            target: TargetRef {
                host: p.target.clone(),
                port: p.port,
            },
            ingress: p.ingress.clone(),
            egress: p.egress.clone(),
            direction: p.direction.clone(),
            nat: NatRecord {
                requested: p.nat,
                ..Default::default()
            },
            line_bps: p.line_bps,
            line_source: p.line_source.to_string(),
            trial_s: p.trial_s,
            loss_percent: p.loss * 100.0,
            resolution_percent: p.resolution * 100.0,
            sizes: p.sizes.clone(),
            tests: p.tests.clone(),
            b2b_repeat: p.b2b_repeat,
            echo_port: p.echo_port,
            ..Default::default()
        };
        match self.client.info().await {
            Ok(info) => self.summary.peer.info = Some(json!(info)),
            Err(e) => return (RunStatus::Failed, Some(e.message)),
        }
        let mut undo = Undo::Nothing;
        if self.plan.nat {
            let Some(c) = &ctl else {
                return (RunStatus::Failed, Some("no board controller".into()));
            };
            match enable_forwarding(c, self.id, &self.plan.ingress, &self.plan.egress).await {
                Ok(u) => {
                    self.summary.nat.enabled_by_run = Some(u != Undo::Nothing);
                    self.summary.nat.undo = Some(json!(u));
                    undo = u;
                }
                Err(e) => return (RunStatus::Failed, Some(e)),
            }
        }
        self.store_summary();
        let mut result = self.tests().await;
        // A stop accepted while the last trial was ending (its permit is still there) ends the
        // run aborted too: the re-tryout's stop 1.99 s into a 2 s run got 202 and a PASS.
        if result.is_ok() && !self.stopped {
            tokio::select! {
                biased;
                _ = self.cancel.notified() => {
                    self.stopped = true;
                    result = Err(stopped());
                }
                _ = std::future::ready(()) => {}
            }
        }
        let undone = match &ctl {
            Some(c) => {
                undo_forwarding(c, self.id, &self.plan.ingress, &self.plan.egress, &undo).await
            }
            None => Ok(()),
        };
        if let Err(e) = &undone {
            tracing::error!(run = self.id, "{e}");
        }
        let (error, restored) = with_undo(result.err(), undone);
        if self.plan.nat {
            self.summary.nat.restored = Some(restored);
        }
        match error {
            None => (RunStatus::Completed, None),
            Some((s, m)) => {
                self.summary.error = Some(m.clone());
                (s, Some(m))
            }
        }
    }

    /// Every test at every size; the status and message of the first trial that could not run.
    async fn tests(&mut self) -> Result<(), (RunStatus, String)> {
        for test in self.plan.tests.clone() {
            for frame in self.plan.sizes.clone() {
                match test {
                    Rfc2544Test::Throughput => self.throughput(frame).await?,
                    Rfc2544Test::Latency => self.latency(frame).await?,
                    Rfc2544Test::Loss => self.loss_curve(frame).await?,
                    Rfc2544Test::BackToBack => self.back_to_back(frame).await?,
                }
            }
        }
        Ok(())
    }

    async fn throughput(&mut self, frame: u32) -> Result<(), (RunStatus, String)> {
        let line = frames::line_rate_fps(self.plan.line_bps, frame);
        let mut search = Search::new(line, self.plan.resolution);
        let mut knee: Option<usize> = None;
        let mut best: Option<usize> = None;
        // The lagging tries in a row at one rate, and those of the series that made a rate
        // the generator's limit (the lowest such rate, as the search keeps it): the page
        // quotes their lags, not the largest lag of the whole search (the tryout's "209 ms"
        // came from a trial far above the limit).
        let mut series: Vec<f64> = Vec::new();
        let mut limit: Option<LagLimit> = None;
        while let Some(rate) = search.next_rate() {
            let asked = search.ask_rate(rate);
            let i = self.trial("throughput", frame, asked, None, None).await?;
            let v = self.summary.trials[i].verdict.clone();
            search.record(asked, &v);
            if !v.passed && v.lagged {
                series.push(self.lag_ms(i));
                if series.len() > judge::LAG_REPEATS as usize {
                    let fps = self.summary.trials[i].target_fps;
                    if limit.as_ref().is_none_or(|l| fps < l.fps) {
                        limit = Some(LagLimit {
                            fps,
                            lags_ms: std::mem::take(&mut series),
                        });
                    }
                    series.clear();
                }
            } else {
                series.clear();
            }
            if v.passed {
                best = Some(i);
            } else if !v.lagged && v.bound == Some(judge::Bound::Dut) {
                knee = Some(i);
            }
            self.set_throughput(frame, &search, best, knee, line, limit.as_ref());
            self.store_summary();
        }
        Ok(())
    }

    fn set_throughput(
        &mut self,
        frame: u32,
        s: &Search,
        best: Option<usize>,
        knee: Option<usize>,
        line: f64,
        lag: Option<&LagLimit>,
    ) {
        let (fps, limit) = s.result();
        let done = s.next_rate().is_none();
        let trials = &self.summary.trials;
        let row = ThroughputRecord {
            frame,
            fps,
            l1_bps: Some(frames::l1_bps(fps, frame)),
            l2_bps: Some(frames::l2_bps(fps, frame)),
            line_fps: line,
            percent_line: Some(if line > 0.0 { 100.0 * fps / line } else { 0.0 }),
            limit: Some(limit),
            dut: limit.is_dut(),
            done,
            trials: s.trials() as u64,
            loss_ratio: best.map(|i| trials[i].verdict.loss_ratio),
            knee_trial: knee.map(|i| i as u64),
            knee_places: knee.map(|i| trials[i].board_places.clone()),
            // The generator's lag set the limit (every try at the rate above lagged): that
            // rate (frames/s asked) and the lag of each of its tries, ms.
            lag_limited: s.lag_limited(),
            max_lag_ms: lag.map_or(0.0, |l| l.lags_ms.iter().copied().fold(0.0, f64::max)),
            lag_rate_fps: lag.map(|l| l.fps),
            lag_tries_ms: lag.map(|l| l.lags_ms.clone()),
        };
        put_row(&mut self.summary.throughput, row, |r| r.frame);
    }

    /// §26.2: one trial at the throughput found for `frame`, with UDP echo probes to PC2
    /// every [`PROBE_INTERVAL_MS`] beside it; the round trips (through the board both ways:
    /// out at the throughput rate, back unloaded) are the latency row of the frame size.
    async fn latency(&mut self, frame: u32) -> Result<(), (RunStatus, String)> {
        let fps = self.summary.throughput_of(frame).map_or(0.0, |r| r.fps);
        let mut row = LatencyRecord {
            frame,
            fps,
            ..Default::default()
        };
        if fps <= 0.0 {
            row.note = Some("no rate passed the throughput test: nothing to measure at".into());
        } else {
            let probe = crate::peer::spec::ProbeRequest {
                port: self.plan.echo_port,
                interval_ms: PROBE_INTERVAL_MS,
            };
            // A try whose generator fell behind its schedule (more than
            // [`judge::LAG_LIMIT_MS`], passed or not) measured PC1's catch-up burst, not the
            // board: it is run again, up to [`judge::LAG_REPEATS`] times.
            let mut tries = 0;
            let i = loop {
                let i = self.trial("latency", frame, fps, Some(probe), None).await?;
                tries += 1;
                if self.lag_ms(i) <= judge::LAG_LIMIT_MS || tries > judge::LAG_REPEATS {
                    break i;
                }
            };
            let lag_ms = self.lag_ms(i);
            let t = &self.summary.trials[i];
            row.trial = Some(i as u64);
            row.tries = Some(u64::from(tries));
            row.offered_fps = Some(t.verdict.offered_fps);
            row.loss_ratio = Some(t.verdict.loss_ratio);
            row.lost = Some(t.verdict.lost_frames);
            row.lagged = Some(lag_ms > judge::LAG_LIMIT_MS);
            row.lag_ms = Some(lag_ms);
            row.bound = Some(t.verdict.bound);
            match &t.latency {
                Some(p) => {
                    row.sent = Some(p.sent);
                    row.answered = Some(p.answered);
                    row.rtt_ms = Some(p.loaded);
                    row.idle_rtt_ms = Some(p.idle);
                    if p.gave_up || p.answered == 0 {
                        row.note = Some(format!(
                            "PC2 did not answer the probes on UDP port {}: run netperfd there (the daemon, or netperfd peer)",
                            self.plan.echo_port
                        ));
                    }
                }
                None => {
                    row.note =
                        Some("the peer agent sent no probe results (an older netperfd?)".into())
                }
            }
        }
        put_row(&mut self.summary.latency, row, |r| r.frame);
        self.store_summary();
        Ok(())
    }

    async fn loss_curve(&mut self, frame: u32) -> Result<(), (RunStatus, String)> {
        let line = frames::line_rate_fps(self.plan.line_bps, frame);
        let mut losses = Vec::new();
        let mut steps = Vec::new();
        for share in judge::LOSS_STEPS {
            let i = self.trial("loss", frame, line * share, None, None).await?;
            let t = &self.summary.trials[i];
            losses.push(t.verdict.lost_frames);
            steps.push(LossStep {
                percent: share * 100.0,
                target_fps: t.target_fps,
                offered_fps: t.verdict.offered_fps,
                loss_ratio: t.verdict.loss_ratio,
                generator_short: t.verdict.generator_short,
                bound: t.verdict.bound,
                trial: i as u64,
            });
            let row = LossRecord {
                frame,
                steps: steps.clone(),
            };
            put_row(&mut self.summary.loss, row, |r| r.frame);
            self.store_summary();
            if judge::loss_curve_done(&losses) {
                break;
            }
        }
        Ok(())
    }

    /// §26.4 (RFC 9004): bursts at the line rate, searched for the longest one the board
    /// forwards without a loss, [`Rfc2544Plan::b2b_repeat`] times; the row holds each
    /// search's result, their mean, and the buffer time it implies, corrected for what the
    /// board forwarded during the burst at the throughput found.
    async fn back_to_back(&mut self, frame: u32) -> Result<(), (RunStatus, String)> {
        let line = frames::line_rate_fps(self.plan.line_bps, frame);
        let tp = self.summary.throughput_of(frame);
        let tp_fps = tp.map_or(0.0, |r| r.fps);
        let tp_limit = tp.and_then(|r| r.limit);
        let mut row = B2bRecord {
            frame,
            line_fps: line,
            throughput_fps: tp_fps,
            throughput_limit: tp_limit,
            done: false,
            ..Default::default()
        };
        let skip = if tp_fps <= 0.0 {
            Some("no rate passed the throughput test: the correction has nothing to use")
        } else if tp_limit == Some(judge::Limit::LineRate) {
            Some("the board forwards at the line rate: a burst never fills its buffer (RFC 9004 §5), nothing to measure")
        } else {
            None
        };
        if let Some(note) = skip {
            row.note = Some(note.into());
            row.done = true;
            put_row(&mut self.summary.back_to_back, row, |r| r.frame);
            return Ok(());
        }
        let mut results: Vec<(u64, judge::BurstLimit)> = Vec::new();
        let mut trials = 0u64;
        for _ in 0..self.plan.b2b_repeat.max(1) {
            let mut search = judge::BurstSearch::new(line, self.plan.resolution);
            while let Some(n) = search.next_burst() {
                let i = self
                    .trial("back-to-back", frame, line, None, Some(n))
                    .await?;
                let v = self.summary.trials[i].verdict.clone();
                search.record(n, &v);
                trials += 1;
                row.trials = trials;
                row.searching = Some(search.result().0);
                put_row(&mut self.summary.back_to_back, row.clone(), |r| r.frame);
                self.store_summary();
            }
            results.push(search.result());
            row.searches = results
                .iter()
                .map(|&(frames, limit)| BurstResult { frames, limit })
                .collect();
        }
        let mean = results.iter().map(|(n, _)| *n as f64).sum::<f64>() / results.len() as f64;
        // The worst limit any search met: one lower bound makes the mean a lower bound.
        let limit = results
            .iter()
            .map(|(_, l)| *l)
            .find(|l| !l.is_dut())
            .unwrap_or(judge::BurstLimit::Dut);
        // Stored in `B2bRecord`'s order: `corrected_s` where `searching` was.
        row.searching = None;
        row.corrected_s = Some(judge::corrected_buffer_s(mean, line, tp_fps));
        row.frames = Some(mean);
        row.limit = Some(limit);
        row.dut = Some(limit.is_dut());
        row.implied_s = Some(judge::implied_buffer_s(mean, line));
        row.buffered_frames = Some(judge::buffered_frames(mean, line, tp_fps));
        row.done = true;
        if !tp_limit.is_some_and(judge::Limit::is_dut) {
            row.note = Some(
                "the throughput is a PC's lower bound: the corrected time uses it as it is".into(),
            );
        }
        put_row(&mut self.summary.back_to_back, row, |r| r.frame);
        self.store_summary();
        Ok(())
    }

    /// Trial `i`'s generator lag, ms.
    fn lag_ms(&self, i: usize) -> f64 {
        self.summary.trials[i].sender_lag_ms.unwrap_or(0.0)
    }

    /// Run one trial at `fps` frames/s of `frame` bytes (with `burst`: a burst of that many
    /// frames at `fps`, then [`judge::B2B_QUIET_S`] of quiet); its index in the summary's `trials`.
    async fn trial(
        &mut self,
        test: &'static str,
        frame: u32,
        fps: f64,
        probe: Option<crate::peer::spec::ProbeRequest>,
        burst: Option<u64>,
    ) -> Result<usize, (RunStatus, String)> {
        let spec = trial_spec(&self.plan, frame, fps, probe, burst);
        if self.stopped {
            return Err(stopped());
        }
        let before = reading().await;
        let start_s = self.t0.elapsed().as_secs_f64();
        // The run's stop reaches the agent's job through `job_stop`, and is kept.
        let job_stop = Notify::new();
        let job = run_peer_job(&self.client, &spec, &job_stop, |_| {});
        tokio::pin!(job);
        let res = loop {
            tokio::select! {
                r = &mut job => break r,
                _ = self.cancel.notified(), if !self.stopped => {
                    self.stopped = true;
                    job_stop.notify_one();
                }
            }
        };
        if self.stopped {
            return Err(stopped());
        }
        let end_s = self.t0.elapsed().as_secs_f64();
        let delta = reading().await.since(&before, end_s - start_s);
        let view = match res {
            Ok(v) => v,
            Err((status, msg)) => {
                let msg = self.explain(msg).await;
                return Err((
                    status,
                    format!("{frame}-byte trial at {fps:.0} frames/s: {msg}"),
                ));
            }
        };
        if view.status != RunStatus::Completed {
            let msg = view
                .error
                .clone()
                .unwrap_or_else(|| format!("the trial ended {}", view.status.as_str()));
            let msg = self.explain(msg).await;
            return Err((
                view.status,
                format!("{frame}-byte trial at {fps:.0} frames/s: {msg}"),
            ));
        }
        let Some(report) = view.report.as_deref() else {
            return Err((
                RunStatus::Failed,
                format!("{frame}-byte trial: the agent sent no report"),
            ));
        };
        let p = &self.plan;
        let (counts, ledger) = trial_counts(p, report, &delta, frame, fps);
        let (offered, expected, lost, seconds, lag_ms) = (
            counts.offered,
            counts.expected,
            counts.lost,
            counts.seconds,
            counts.lag_ms,
        );
        let (board_in, board_out) = (counts.board_in, counts.board_out);
        let verdict = match burst {
            Some(n) => judge::judge_burst(&counts, n, lag_ms),
            None => judge::judge(&counts, p.loss),
        };
        let line = frames::line_rate_fps(p.line_bps, frame);
        let cpu_busy = self.cpu_between(start_s, end_s);
        self.summary.trials.push(TrialRecord {
            test: test.to_string(),
            frame,
            target_fps: fps,
            target_percent: if line > 0.0 { 100.0 * fps / line } else { 0.0 },
            offered,
            received: expected.saturating_sub(lost),
            seconds,
            verdict,
            board_places: ledger.places.clone(),
            board_in,
            board_out,
            receiver_drops: counts.receiver_drops,
            generator_drops: counts.generator_drops,
            start_s,
            end_s,
            cpu_busy,
            error: None,
            latency: view.probes.as_ref().map(probes_of),
            burst,
            sender_lag_ms: Some(lag_ms),
        });
        Ok(self.summary.trials.len() - 1)
    }

    /// The agent's error `msg`, with who said it and the route PC1 needs when it says the
    /// network is unreachable ([`crate::runs::forward::route_hint`]).
    async fn explain(&self, msg: String) -> String {
        let p = &self.plan;
        crate::runs::forward::explain_agent_error(
            msg,
            &self.client.url(),
            &p.target,
            &p.ingress,
            &p.egress,
            p.nat,
        )
        .await
    }

    /// Mean busy % per core over the monitor's samples that ended within (start, end] s.
    fn cpu_between(&self, start: f64, end: f64) -> Vec<f64> {
        let rows = self.ctx.store().cpu_samples(self.id).unwrap_or_default();
        let mut sums: Vec<(f64, u32)> = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.cpu >= 0 && r.t > start && r.t <= end)
        {
            let i = r.cpu as usize;
            if i >= 1024 {
                continue;
            }
            if sums.len() <= i {
                sums.resize(i + 1, (0.0, 0));
            }
            sums[i].0 += 100.0 - r.idle - r.iowait;
            sums[i].1 += 1;
        }
        sums.into_iter()
            .map(|(s, n)| if n > 0 { s / f64::from(n) } else { 0.0 })
            .collect()
    }

    /// What the run ended with: its status, the headline figure (the largest frame size's
    /// throughput as L2 bit/s, what a board's datasheet quotes first), the summary with every
    /// trial, and the error.
    fn ended(&self, status: RunStatus, error: Option<String>) -> Ended {
        let best = self
            .summary
            .throughput
            .iter()
            .max_by_key(|r| r.frame)
            .and_then(|r| r.l2_bps);
        Ended {
            status,
            measured: Measured::Figures(RunFigures {
                receiver_bps: best,
                ..Default::default()
            }),
            summary: Some(self.summary.to_value()),
            error,
        }
    }
}

/// How a run the user stopped ends: aborted, so that it is never judged PASS.
fn stopped() -> (RunStatus, String) {
    (
        RunStatus::Aborted,
        "stopped before every trial had run".into(),
    )
}

/// The board's counters, read on the blocking pool (a few ms of file reads).
async fn reading() -> BoardReading {
    crate::engine::task::spawn_blocking(BoardReading::take)
        .await
        .unwrap_or_default()
}

/// Frames into the board on the trial's incoming port(s) and out of its outgoing one(s), from
/// their byte and packet counters ([`judge::port_frames`]: a GSO batch crosses a virtual port
/// as one packet): `send` = in on `ingress`, out on `egress`; `receive` the other way; `bidir`
/// both.
fn port_frames(
    d: &BoardDelta,
    ingress: &str,
    egress: &str,
    direction: &RunDirection,
    frame: u32,
) -> (u64, u64) {
    let t = |port: &str| {
        d.ports
            .get(port)
            .and_then(|p| p.traffic)
            .unwrap_or_default()
    };
    let (i, e) = (t(ingress), t(egress));
    let rx =
        |p: crate::board::counters::Traffic| judge::port_frames(p.rx_bytes, p.rx_packets, frame);
    let tx =
        |p: crate::board::counters::Traffic| judge::port_frames(p.tx_bytes, p.tx_packets, frame);
    match direction {
        RunDirection::Receive => (rx(e), tx(i)),
        RunDirection::Bidir => (rx(i) + rx(e), tx(i) + tx(e)),
        RunDirection::Send
        | RunDirection::Tradeoff
        | RunDirection::Mixed
        | RunDirection::Unset
        | RunDirection::Other(_) => (rx(i), tx(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The NAT-restore outcome comes from the undo's result: before, a run was marked "not
    /// restored" when any error message held "cannot restore" (the words of the undo's own
    /// error), so a trial failing with those words read as a failed restore, and a reworded
    /// undo error as a good one.
    #[test]
    fn the_restore_outcome_is_the_undo_s_result_not_its_words() {
        let aborted = || Some((RunStatus::Aborted, "stopped".to_string()));
        assert_eq!(with_undo(None, Ok(())), (None, true));
        assert_eq!(with_undo(aborted(), Ok(())), (aborted(), true));
        let odd = Some((
            RunStatus::Failed,
            "the agent says: cannot restore its socket".to_string(),
        ));
        assert_eq!(with_undo(odd.clone(), Ok(())), (odd, true));
        assert_eq!(
            with_undo(None, Err("the controller refused".into())),
            (
                Some((RunStatus::Failed, "the controller refused".into())),
                false
            )
        );
        assert_eq!(
            with_undo(
                aborted(),
                Err("cannot restore forwarding eth0 → eth1: busy".into())
            ),
            (
                Some((
                    RunStatus::Failed,
                    "stopped; cannot restore forwarding eth0 → eth1: busy".into()
                )),
                false
            )
        );
    }
}
