//! Chart data of a run for the run page, the API and the CLI: throughput per stream or leg,
//! CPU per core and port rates on one time axis (seconds since the run started), plus the
//! ceiling and verdict ([`crate::results::analysis`]). Drawn by static/charts.js with uPlot.

use crate::results::analysis::{self, Analysis};
use crate::store::{CpuSampleRow, IntervalRow, PortSampleRow, RunRow, Store};
use serde::Serialize;
use std::collections::BTreeMap;

/// One line of a chart: `values[i]` belongs to the chart's `t[i]`; `null` = no value then.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Series {
    pub label: String,
    pub values: Vec<Option<f64>>,
}

/// A chart: shared time axis `t` (seconds since the run started) and its lines.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub(crate) struct Chart {
    pub t: Vec<f64>,
    pub series: Vec<Series>,
}

impl Chart {
    /// Build from (series label → (t → value)) keeping label order as given.
    fn from_points(order: &[String], pts: &BTreeMap<String, BTreeMap<i64, f64>>) -> Chart {
        let mut ts: Vec<i64> = pts.values().flat_map(|m| m.keys().copied()).collect();
        ts.sort_unstable();
        ts.dedup();
        Chart {
            t: ts.iter().map(|t| *t as f64 / 1000.0).collect(),
            series: order
                .iter()
                .filter_map(|l| {
                    let m = pts.get(l)?;
                    Some(Series {
                        label: l.clone(),
                        values: ts.iter().map(|t| m.get(t).copied()).collect(),
                    })
                })
                .collect(),
        }
    }
}

struct Points {
    order: Vec<String>,
    pts: BTreeMap<String, BTreeMap<i64, f64>>,
}

impl Points {
    fn new() -> Points {
        Points {
            order: Vec::new(),
            pts: BTreeMap::new(),
        }
    }
    fn add(&mut self, label: &str, t: f64, v: f64) {
        if !self.pts.contains_key(label) {
            self.order.push(label.to_string());
        }
        *self
            .pts
            .entry(label.to_string())
            .or_default()
            .entry((t * 1000.0).round() as i64)
            .or_insert(0.0) += v;
    }
    fn chart(&self) -> Chart {
        Chart::from_points(&self.order, &self.pts)
    }
}

/// Throughput lines of one run's intervals, bits/s at each interval's end: one line per
/// stream and role ("stream 5 sender"), plus the role's sum when there are several streams.
/// The sum adds the streams of one interval (same `seq`, as the Intervals table's SUM row
/// does) and is drawn at the latest end among them: streams whose intervals end a few ms
/// apart (HTTP connections, each on its own clock) still add up (issue 22 item 9).
/// `prefix` names a leg ("leg 1 eth0 ").
fn throughput_points(p: &mut Points, iv: &[IntervalRow], prefix: &str, per_stream: bool) {
    let streams = |sender: bool| {
        let mut ids: Vec<u32> = iv
            .iter()
            .filter(|i| i.sender == sender)
            .map(|i| i.stream_id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    };
    // Legs start together but their intervals end a few ms apart: put them on a 0.1 s grid so
    // the lines share time points (else every point is a gap and the chart draws dots).
    let at = |t: f64| {
        if prefix.is_empty() {
            t
        } else {
            (t * 10.0).round() / 10.0
        }
    };
    for sender in [true, false] {
        let role = if sender { "sender" } else { "receiver" };
        let n = streams(sender);
        let label = if n > 1 || !per_stream {
            format!("{prefix}{role} sum")
        } else {
            format!("{prefix}{role}")
        };
        // seq → (latest end, sum of bits/s), in the order the intervals came; `at_seq` finds
        // a seq's entry (a linear search made a 750,000-interval run take minutes).
        let mut sums: Vec<(i64, f64, f64)> = Vec::new();
        let mut at_seq: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
        for i in iv.iter().filter(|i| i.sender == sender) {
            if per_stream && n > 1 {
                p.add(
                    &format!("{prefix}stream {} {role}", i.stream_id),
                    at(i.end),
                    i.bits_per_second,
                );
            }
            match at_seq.get(&i.seq).and_then(|&k| sums.get_mut(k)) {
                Some(s) => {
                    s.1 = s.1.max(i.end);
                    s.2 += i.bits_per_second;
                }
                None => {
                    at_seq.insert(i.seq, sums.len());
                    sums.push((i.seq, i.end, i.bits_per_second));
                }
            }
        }
        for (_, end, bps) in sums {
            p.add(&label, at(end), bps);
        }
    }
}

/// The three charts of a run.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub(crate) struct RunCharts {
    /// Bits/s per stream / leg.
    pub throughput: Chart,
    /// Busy % per core (100 − idle − iowait), and softirq % of the all-cores line.
    pub cpu: Chart,
    /// Bits/s per port and direction.
    pub ports: Chart,
    /// Round-trip times in ms (latency-under-load runs; empty for other kinds).
    #[serde(skip_serializing_if = "Chart::is_empty")]
    pub rtt: Chart,
    /// Drops on the board per second (packets): root qdisc and NIC receive drops on the
    /// run's ports, softnet drops of all CPUs; from the run's stored per-second series
    /// ([`crate::board::counters::Series`]). Empty when none moved or none was recorded.
    #[serde(skip_serializing_if = "Chart::is_empty")]
    pub drops: Chart,
    /// The slowest core's clock, MHz, per second (empty without cpufreq).
    #[serde(skip_serializing_if = "Chart::is_empty")]
    pub clock: Chart,
    /// The hottest thermal zone, °C, per second (empty without thermal zones).
    #[serde(skip_serializing_if = "Chart::is_empty")]
    pub temperature: Chart,
}

/// The board charts of a run's per-second series ([`RunCharts::drops`], `clock`,
/// `temperature`): each chart only when it has something to show — a drop line only when it
/// moved, clock and temperature only when the board has them.
pub(crate) fn board_charts(s: &crate::board::counters::Series) -> (Chart, Chart, Chart) {
    let t: Vec<f64> = s.t.clone();
    let n = t.len();
    let counts = |label: &str, v: &[u64]| {
        (v.iter().any(|x| *x > 0)).then(|| Series {
            label: label.into(),
            values: v.iter().take(n).map(|x| Some(*x as f64)).collect(),
        })
    };
    let drops: Vec<Series> = [
        counts("qdisc drops", &s.qdisc_drops),
        counts("NIC rx drops", &s.nic_rx_drops),
        counts("softnet drops", &s.softnet_dropped),
    ]
    .into_iter()
    .flatten()
    .collect();
    let gauge = |label: &str, v: &[Option<f64>]| -> Chart {
        if v.iter().all(Option::is_none) {
            return Chart::default();
        }
        Chart {
            t: t.clone(),
            series: vec![Series {
                label: label.into(),
                values: v.iter().take(n).copied().collect(),
            }],
        }
    };
    let drops = if drops.is_empty() {
        Chart::default()
    } else {
        Chart {
            t: t.clone(),
            series: drops,
        }
    };
    (
        drops,
        gauge("slowest core", &s.mhz_min),
        gauge("hottest zone", &s.temp_max_c),
    )
}

/// Build a run's charts. `legs` are the legs of a multi-port run with their intervals (empty
/// for other runs, whose own intervals are `iv`).
pub(crate) fn build_charts(
    iv: &[IntervalRow],
    legs: &[(RunRow, Vec<IntervalRow>)],
    cpus: &[CpuSampleRow],
    ports: &[PortSampleRow],
) -> RunCharts {
    let mut tp = Points::new();
    if legs.is_empty() {
        throughput_points(&mut tp, iv, "", true);
    } else {
        for (n, (leg, liv)) in legs.iter().enumerate() {
            let prefix = format!(
                "leg {} {} ",
                n + 1,
                leg.bind_dev.clone().unwrap_or_default()
            );
            throughput_points(&mut tp, liv, &prefix, false);
        }
    }
    let mut cp = Points::new();
    for c in cpus {
        if c.cpu < 0 {
            cp.add("all cores softirq", c.t, c.softirq);
        } else {
            cp.add(&format!("cpu{} busy", c.cpu), c.t, c.busy());
        }
    }
    // Per-core lines first, then the all-cores softirq line.
    let mut order: Vec<String> = cp
        .order
        .iter()
        .filter(|l| l.starts_with("cpu"))
        .cloned()
        .collect();
    crate::model::order::sort_by_key(&mut order, |l| {
        l.trim_start_matches("cpu")
            .split(' ')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    if cp.pts.contains_key("all cores softirq") {
        order.push("all cores softirq".into());
    }
    cp.order = order;
    let mut pp = Points::new();
    for s in ports {
        pp.add(&format!("{} rx", s.ifname), s.t, s.rx_bps());
        pp.add(&format!("{} tx", s.ifname), s.t, s.tx_bps());
    }
    RunCharts {
        throughput: tp.chart(),
        cpu: cp.chart(),
        ports: pp.chart(),
        rtt: Chart::default(),
        drops: Chart::default(),
        clock: Chart::default(),
        temperature: Chart::default(),
    }
}

impl Chart {
    /// No time points.
    pub(crate) fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    /// At most `max_points` time points (at least 2): the time axis is cut into
    /// `max_points / 2` buckets of consecutive points, and each bucket keeps two, at its
    /// first and last time, carrying each line's smallest and largest value of the bucket in
    /// the order they came (min/max decimation). Peaks and dips stay visible whatever the
    /// length (a mean per bucket would flatten a 1 s spike in a 24 h run to nothing); the
    /// figures and the verdict are computed from the stored data, not from the chart. A
    /// line with one value in a bucket shows it at both points, one with none has a gap.
    /// Charts with at most `max_points` points are returned as they are.
    pub(crate) fn downsampled(self, max_points: usize) -> Chart {
        let n = self.t.len();
        if n <= max_points.max(2) {
            return self;
        }
        let buckets = (max_points / 2).max(1);
        let bounds: Vec<(usize, usize)> = (0..buckets)
            .map(|b| {
                (
                    b * n / buckets,
                    ((b + 1) * n / buckets).max(b * n / buckets + 1),
                )
            })
            .collect();
        let mut t = Vec::with_capacity(buckets * 2);
        for &(lo, hi) in &bounds {
            let at = |i: usize| self.t.get(i).copied().unwrap_or_default();
            t.push(at(lo));
            t.push(at(hi - 1));
        }
        let series = self
            .series
            .into_iter()
            .map(|s| {
                let mut values = Vec::with_capacity(buckets * 2);
                for &(lo, hi) in &bounds {
                    let mut min: Option<(usize, f64)> = None;
                    let mut max: Option<(usize, f64)> = None;
                    for (i, v) in s.values.get(lo..hi).unwrap_or_default().iter().enumerate() {
                        let Some(v) = *v else { continue };
                        if min.is_none_or(|(_, m)| v < m) {
                            min = Some((i, v));
                        }
                        if max.is_none_or(|(_, m)| v > m) {
                            max = Some((i, v));
                        }
                    }
                    match (min, max) {
                        (Some(a), Some(b)) => {
                            let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
                            values.push(Some(first.1));
                            values.push(Some(second.1));
                        }
                        _ => {
                            values.push(None);
                            values.push(None);
                        }
                    }
                }
                Series {
                    label: s.label,
                    values,
                }
            })
            .collect();
        Chart { t, series }
    }
}

/// Most time points a chart of [`charts_of`] has (see [`Chart::downsampled`]).
pub(crate) const MAX_CHART_POINTS: usize = 2000;

impl RunCharts {
    /// Every chart cut to at most `max_points` time points ([`Chart::downsampled`]).
    pub(crate) fn downsampled(self, max_points: usize) -> RunCharts {
        RunCharts {
            throughput: self.throughput.downsampled(max_points),
            cpu: self.cpu.downsampled(max_points),
            ports: self.ports.downsampled(max_points),
            rtt: self.rtt.downsampled(max_points),
            drops: self.drops.downsampled(max_points),
            clock: self.clock.downsampled(max_points),
            temperature: self.temperature.downsampled(max_points),
        }
    }
}

/// The RTT chart of a latency run, ms on the run's time axis: one line for the ICMP probes
/// (a lost probe is a gap) and one for the load's TCP RTT (TCP_INFO; the largest of the
/// streams read at the same moment).
pub(crate) fn rtt_chart(samples: &[crate::store::LatencySampleRow]) -> Chart {
    let key = |t: f64| (t * 1000.0).round() as i64;
    let mut icmp: BTreeMap<i64, Option<f64>> = BTreeMap::new();
    let mut tcp: BTreeMap<i64, f64> = BTreeMap::new();
    for s in samples {
        if s.probe == "tcp" {
            if let Some(v) = s.rtt_ms {
                let e = tcp.entry(key(s.t)).or_insert(v);
                *e = e.max(v);
            }
        } else {
            icmp.insert(key(s.t), s.rtt_ms);
        }
    }
    let mut ts: Vec<i64> = icmp.keys().chain(tcp.keys()).copied().collect();
    ts.sort_unstable();
    ts.dedup();
    let mut series = Vec::new();
    if !icmp.is_empty() {
        series.push(Series {
            label: "ICMP RTT".into(),
            values: ts.iter().map(|t| icmp.get(t).copied().flatten()).collect(),
        });
    }
    if !tcp.is_empty() {
        series.push(Series {
            label: "TCP RTT (TCP_INFO)".into(),
            values: ts.iter().map(|t| tcp.get(t).copied()).collect(),
        });
    }
    Chart {
        t: ts.iter().map(|t| *t as f64 / 1000.0).collect(),
        series,
    }
}

/// The run whose monitor samples cover `run` (a leg's are its multi-port parent's) and the
/// port to judge it on.
fn sample_source(run: &RunRow) -> (i64, Option<String>) {
    match run.parent_id {
        Some(p) => (p, run.bind_dev.clone()),
        None => (run.id, run.bind_dev.clone().filter(|d| !d.contains(','))),
    }
}

/// Ceiling and verdict for a run from its (or its parent's) samples. `None` for a multi-port
/// run itself (each leg is judged on its own port).
pub(crate) fn analyze_run(store: &Store, run: &RunRow) -> Option<Analysis> {
    if run.kind.has_legs() {
        return None;
    }
    let (src, port) = sample_source(run);
    let cpus = store.cpu_samples(src).unwrap_or_default();
    let ports = store.port_samples(src).unwrap_or_default();
    let report = store.report(run.id).ok().flatten();
    // The CPU of netperfd's own stream threads, as the run's report recorded it.
    let threads: Vec<_> = report
        .as_ref()
        .map(|r| r.streams.iter().filter_map(|s| s.thread_cpu).collect())
        .unwrap_or_default();
    // An imported run (or a leg of one) is judged on its own samples, not this board's ports.
    let imported = [Some(run.id), run.parent_id]
        .into_iter()
        .flatten()
        .any(|id| store.run_origin(id).ok().flatten().is_some());
    let mut a = analysis::analyze_recorded(
        run,
        &cpus,
        &ports,
        port.as_deref(),
        timestamps_at_start(store, run),
        &threads,
        imported,
    );
    with_shaper(store, run, &ports, timestamps_at_start(store, run), &mut a);
    with_board(store, run, &mut a);
    if let Some(r) = &report {
        with_pacing_note(r, &mut a);
    }
    Some(a)
}

/// The rate check's pacing note from the run's report, when this board sent paced: how far
/// the sender fell behind, in how many stalls, and how it caught up (see
/// [`crate::engine::shortfall::RateCheck::catch_up`]). The stored figures alone give only
/// the rates; the sentence in the evidence is replaced by the fuller one.
fn with_pacing_note(report: &crate::engine::report::Report, a: &mut Analysis) {
    let (Some(c), Some(full)) = (a.rate_check, crate::engine::shortfall::for_report(report)) else {
        return;
    };
    if full.sender_max_lag_ms.is_none() {
        return;
    }
    let noted = c
        .with_sender(full.sender_max_lag_ms, full.sender_peak_1ms_bps)
        .with_catch_up(full.sender_stalls, full.sender_owed_ms);
    let old = c.sentence();
    for e in a.evidence.iter_mut().filter(|e| **e == old) {
        *e = noted.sentence();
    }
    a.rate_check = Some(noted);
}

/// Lead the verdict with the board's own shaper when one on the run's ports limited it (the
/// `shapers` stored with the run's board counters; see [`crate::results::shaper`]).
fn with_shaper(
    store: &Store,
    run: &RunRow,
    samples: &[PortSampleRow],
    tcp_timestamps: bool,
    a: &mut analysis::Analysis,
) {
    let Ok((Some(board), _)) = store.run_board(run.id) else {
        return;
    };
    let Some(shapers) = board
        .get("shapers")
        .and_then(|s| serde_json::from_value(s.clone()).ok())
    else {
        return;
    };
    let delta = serde_json::from_value::<crate::board::counters::BoardDelta>(board).ok();
    let mut mtus = std::collections::BTreeMap::new();
    for p in samples {
        if let Some(m) = p.mtu.and_then(|m| u32::try_from(m).ok()) {
            mtus.insert(p.ifname.clone(), m);
        }
    }
    let framing = analysis::run_framing(run, 1500, tcp_timestamps);
    let found = crate::results::shaper::judge(
        a.bitrate_bps.unwrap_or(0.0),
        framing,
        &mtus,
        &shapers,
        delta.as_ref(),
    );
    if let Some(f) = found {
        crate::results::shaper::lead(a, &f);
    }
}

/// Add what the board's counters over `run` say to its analysis (see
/// [`crate::results::ledger`]); when the run lost datagrams, the ledger's first sentence
/// joins the verdict.
fn with_board(store: &Store, run: &RunRow, a: &mut analysis::Analysis) {
    let Ok((Some(board), ledger)) = store.run_board(run.id) else {
        return;
    };
    let Ok(d) = serde_json::from_value::<crate::board::counters::BoardDelta>(board) else {
        return;
    };
    let ledger =
        ledger.and_then(|l| serde_json::from_value::<crate::results::ledger::LossLedger>(l).ok());
    a.board = match &ledger {
        Some(l) => crate::results::ledger::sentences(l, &d),
        None => crate::results::ledger::board_notes(&d),
    };
    if let Some(l) = ledger.as_ref().filter(|l| l.lost > 0) {
        let on_board = l.places.iter().any(|p| p.place.starts_with("board_"));
        let socket: u64 = l
            .places
            .iter()
            .filter(|p| p.place.ends_with("_socket") && p.in_datagrams())
            .map(|p| p.packets)
            .fold(0, u64::saturating_add);
        a.place_the_loss(
            on_board,
            socket.saturating_mul(100) >= l.lost.saturating_mul(98),
        );
    }
    if let (Some(l), Some(first)) = (&ledger, a.board.first()) {
        if l.lost > 0 {
            a.verdict_text = format!("{}; {first}", a.verdict_text);
        }
    }
}

/// Whether TCP timestamps were on when `run` started (its recorded network configuration, or
/// its multi-port parent's). Runs recorded before the setting was kept count as on (Linux's
/// default): an old run is never judged by today's settings.
fn timestamps_at_start(store: &Store, run: &RunRow) -> bool {
    [Some(run.id), run.parent_id]
        .into_iter()
        .flatten()
        .find_map(|id| store.run_net_config(id).ok().flatten()?["tcp_timestamps"].as_bool())
        .unwrap_or(true)
}

/// All charts of run `id`, each with at most [`MAX_CHART_POINTS`] time points. Reads the
/// run's intervals and samples (seconds for a long run): call it off the web server's
/// workers.
pub(crate) fn charts_of(store: &Store, run: &RunRow) -> RunCharts {
    let iv = store.intervals(run.id).unwrap_or_default();
    let legs: Vec<(RunRow, Vec<IntervalRow>)> = if run.kind.has_legs() {
        store
            .children(run.id)
            .unwrap_or_default()
            .into_iter()
            .map(|l| {
                let i = store.intervals(l.id).unwrap_or_default();
                (l, i)
            })
            .collect()
    } else {
        Vec::new()
    };
    let src = run.parent_id.unwrap_or(run.id);
    let cpus = store.cpu_samples(src).unwrap_or_default();
    let mut ports = store.port_samples(src).unwrap_or_default();
    if run.parent_id.is_some() {
        if let Some(d) = &run.bind_dev {
            ports.retain(|p| &p.ifname == d);
        }
    }
    let mut c = build_charts(&iv, &legs, &cpus, &ports);
    if run.kind.has_latency_probes() {
        c.rtt = rtt_chart(&store.latency_samples(run.id).unwrap_or_default());
    }
    let series = store
        .run_board(run.id)
        .ok()
        .and_then(|(b, _)| b)
        .and_then(|mut b| b.get_mut("series").map(serde_json::Value::take))
        .and_then(|s| serde_json::from_value::<crate::board::counters::Series>(s).ok());
    if let Some(s) = series {
        (c.drops, c.clock, c.temperature) = board_charts(&s);
    }
    c.downsampled(MAX_CHART_POINTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(seq: i64, stream: u32, sender: bool, end: f64, bps: f64) -> IntervalRow {
        IntervalRow {
            seq,
            stream_id: stream,
            socket: 5,
            start: end - 1.0,
            end,
            bytes: (bps / 8.0) as i64,
            bits_per_second: bps,
            sender,
            omitted: false,
            retransmits: None,
            snd_cwnd: None,
            rtt: None,
            packets: None,
            lost: None,
            jitter_ms: None,
            out_of_order: None,
        }
    }

    /// Issue 37, item 9: a run with 750,000 intervals (a hostile agent's flood) gave a
    /// 750,000-point chart and took minutes (a linear search per interval). Its chart now
    /// has at most 2,000 time points per line, keeps the first and last time, the one spike
    /// (9 Gbit/s at interval 500,000) and the one dip (0 at 123,457), and every other point
    /// is the flat 1 Mbit/s.
    #[test]
    fn a_750k_interval_run_charts_at_most_2000_points_with_peaks_kept() {
        let n = 750_000i64;
        let rows: Vec<IntervalRow> = (0..n)
            .map(|k| {
                let bps = match k {
                    500_000 => 9e9,
                    123_457 => 0.0,
                    _ => 1e6,
                };
                let mut r = iv(k, 5, true, (k + 1) as f64 * 0.004, bps);
                r.start = k as f64 * 0.004;
                r
            })
            .collect();
        let c = build_charts(&rows, &[], &[], &[]).downsampled(MAX_CHART_POINTS);
        let tp = &c.throughput;
        assert!(tp.t.len() <= 2000, "{} points", tp.t.len());
        assert_eq!(tp.t.len(), 2000);
        assert_eq!(tp.t.first().copied(), Some(0.004));
        assert_eq!(tp.t.last().copied(), Some(3000.0));
        assert_eq!(tp.series.len(), 1);
        let v: Vec<f64> = tp.series[0]
            .values
            .iter()
            .map(|v| v.expect("value"))
            .collect();
        assert_eq!(v.len(), tp.t.len());
        assert_eq!(v.iter().copied().fold(f64::MIN, f64::max), 9e9);
        assert_eq!(v.iter().copied().fold(f64::MAX, f64::min), 0.0);
        assert_eq!(v.iter().filter(|&&x| x == 9e9).count(), 1);
        assert_eq!(v.iter().filter(|&&x| x == 0.0).count(), 1);
        assert_eq!(v.iter().filter(|&&x| x == 1e6).count(), 1998);
        // The spike sits in the bucket of its time (interval 500,000 ends at 2000.004 s).
        let at = v.iter().position(|&x| x == 9e9).expect("spike");
        assert!(tp.t[at - 1] <= 2000.004 && 2000.004 <= tp.t[at + 1]);
        // A short chart is left as it is.
        let small = build_charts(&rows[..100], &[], &[], &[]);
        assert_eq!(small.clone().downsampled(MAX_CHART_POINTS), small);
    }

    #[test]
    fn board_charts_show_what_moved_and_what_the_board_has() {
        let s = crate::board::counters::Series {
            t: vec![1.0, 2.0, 3.0],
            qdisc_drops: vec![0, 4000, 6100],
            nic_rx_drops: vec![0, 0, 0],
            softnet_dropped: vec![0, 0, 2],
            mhz_min: vec![Some(1800.0), Some(800.0), Some(800.0)],
            temp_max_c: vec![None, None, None],
        };
        let (drops, clock, temp) = board_charts(&s);
        assert_eq!(drops.t, vec![1.0, 2.0, 3.0]);
        let labels: Vec<&str> = drops.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["qdisc drops", "softnet drops"]);
        assert_eq!(
            drops.series[0].values,
            vec![Some(0.0), Some(4000.0), Some(6100.0)]
        );
        assert_eq!(clock.series[0].label, "slowest core");
        assert_eq!(
            clock.series[0].values,
            vec![Some(1800.0), Some(800.0), Some(800.0)]
        );
        assert!(temp.is_empty());
        // Nothing moved, no cpufreq: no board charts at all, and none in the JSON.
        let quiet = crate::board::counters::Series {
            t: vec![1.0],
            qdisc_drops: vec![0],
            nic_rx_drops: vec![0],
            softnet_dropped: vec![0],
            mhz_min: vec![None],
            temp_max_c: vec![None],
        };
        let (d, c, t) = board_charts(&quiet);
        assert!(d.is_empty() && c.is_empty() && t.is_empty());
        let j = serde_json::to_value(build_charts(&[], &[], &[], &[])).unwrap();
        assert!(j.get("drops").is_none() && j.get("clock").is_none(), "{j}");
    }

    #[test]
    fn throughput_per_stream_and_sum() {
        let rows = [
            iv(0, 5, true, 1.0, 400e6),
            iv(0, 7, true, 1.0, 500e6),
            iv(1, 5, true, 2.0, 410e6),
            iv(1, 7, true, 2.0, 490e6),
        ];
        let c = build_charts(&rows, &[], &[], &[]);
        assert_eq!(c.throughput.t, vec![1.0, 2.0]);
        let labels: Vec<&str> = c
            .throughput
            .series
            .iter()
            .map(|s| s.label.as_str())
            .collect();
        assert_eq!(labels, ["stream 5 sender", "stream 7 sender", "sender sum"]);
        assert_eq!(
            c.throughput.series[2].values,
            vec![Some(900e6), Some(900e6)]
        );
        // One stream: one line, named by role.
        let c = build_charts(&rows[..1], &[], &[], &[]);
        assert_eq!(c.throughput.series.len(), 1);
        assert_eq!(c.throughput.series[0].label, "sender");
    }

    /// Issue 22 item 9: HTTP connections' intervals end a few ms apart (each connection on
    /// its own clock); the sum line is the interval's sum (1,957 Mbit/s here), not one
    /// connection's value at each end time.
    #[test]
    fn sum_adds_the_streams_of_an_interval_that_end_apart() {
        let mut rows = Vec::new();
        for seq in 0..3 {
            for (k, bps) in [194e6, 590e6, 600e6, 573e6].into_iter().enumerate() {
                let end = 1.0 + seq as f64 + 0.003 * k as f64;
                rows.push(iv(seq, k as u32 + 1, true, end, bps));
            }
        }
        let c = build_charts(&rows, &[], &[], &[]);
        let sum = c
            .throughput
            .series
            .iter()
            .find(|s| s.label == "sender sum")
            .expect("sum line");
        let pts: Vec<(f64, f64)> = c
            .throughput
            .t
            .iter()
            .zip(&sum.values)
            .filter_map(|(t, v)| v.map(|v| (*t, v)))
            .collect();
        assert_eq!(pts.len(), 3, "{pts:?}");
        for (n, (t, v)) in pts.iter().enumerate() {
            assert!((v - 1957e6).abs() < 1.0, "interval {n}: {v}");
            assert!((t - (1.009 + n as f64)).abs() < 1e-9, "interval {n} at {t}");
        }
        // Every connection keeps its own line.
        let streams = c
            .throughput
            .series
            .iter()
            .filter(|s| s.label.starts_with("stream "))
            .count();
        assert_eq!(streams, 4);
    }

    #[test]
    fn rtt_chart_has_gaps_for_lost_probes_and_the_tcp_line() {
        use crate::store::LatencySampleRow as L;
        let rows = [
            L {
                probe: "icmp",
                t: 0.0,
                rtt_ms: Some(0.2),
            },
            L {
                probe: "icmp",
                t: 0.01,
                rtt_ms: None,
            },
            L {
                probe: "tcp",
                t: 0.01,
                rtt_ms: Some(90.0),
            },
            L {
                probe: "tcp",
                t: 0.01,
                rtt_ms: Some(95.0),
            },
            L {
                probe: "icmp",
                t: 0.02,
                rtt_ms: Some(99.0),
            },
        ];
        let c = rtt_chart(&rows);
        assert_eq!(c.t, vec![0.0, 0.01, 0.02]);
        assert_eq!(c.series[0].values, vec![Some(0.2), None, Some(99.0)]);
        assert_eq!(c.series[1].values, vec![None, Some(95.0), None]);
        assert!(rtt_chart(&[]).is_empty());
    }

    #[test]
    fn cpu_and_port_lines_share_the_time_axis() {
        let cpu = |t: f64, n: i32, idle: f64| CpuSampleRow {
            t,
            cpu: n,
            idle,
            user: 100.0 - idle,
            ..Default::default()
        };
        let cpus = [
            cpu(1.0, -1, 50.0),
            cpu(1.0, 0, 20.0),
            cpu(1.0, 1, 80.0),
            cpu(2.0, 0, 10.0),
            cpu(2.0, 10, 90.0),
        ];
        let ports = [PortSampleRow {
            t: 1.0,
            ifname: "eth0".into(),
            seconds: 1.0,
            rx_bytes: 125_000_000,
            tx_bytes: 1_000,
            ..Default::default()
        }];
        let c = build_charts(&[], &[], &cpus, &ports);
        let labels: Vec<&str> = c.cpu.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            ["cpu0 busy", "cpu1 busy", "cpu10 busy", "all cores softirq"]
        );
        assert_eq!(c.cpu.t, vec![1.0, 2.0]);
        assert_eq!(c.cpu.series[0].values, vec![Some(80.0), Some(90.0)]);
        assert_eq!(c.cpu.series[1].values, vec![Some(20.0), None]);
        assert_eq!(c.ports.series[0].label, "eth0 rx");
        assert_eq!(c.ports.series[0].values, vec![Some(1e9)]);
        assert_eq!(c.ports.series[1].values, vec![Some(8000.0)]);
    }
}
