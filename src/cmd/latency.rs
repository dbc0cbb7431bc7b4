//! `netperfd latency -c HOST`: latency under load — ICMP probes every 10 ms (`-i`) through an
//! idle phase, a loaded phase (N TCP streams up, down or both to the peer's `iperf3 -s`) and
//! an idle phase; prints RTT percentiles per phase, the increase, RPM and a verdict (or, with
//! `--json`, the run's result document) and records the run (kind `latency`) in the history
//! (`--data DIR`). Exit code 0 only when the run completed.

use crate::model::display;
use crate::results::latency::{DirectionLoad, LatencyResult, Phase};
use crate::runs::context::RunContext;
use crate::runs::registry::LiveEvent;
use crate::spec::latency::{LatencySpec, Load};
use crate::store::{RunRow, Store};
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `netperfd latency`.
#[derive(clap::Args, Debug)]
pub struct LatencyArgs {
    /// Peer host name or address (answers ICMP echo; runs `iperf3 -s` for the load)
    #[arg(short = 'c', long = "client")]
    pub host: String,
    /// The peer's iperf3 port
    #[arg(short = 'p', long = "port", default_value_t = 5201)]
    pub port: u16,
    /// Load direction: up (the board sends), down (the peer sends, iperf3 -R) or both (--bidir)
    #[arg(long = "load", default_value = "down")]
    pub load: String,
    /// TCP streams per direction, 1..32
    #[arg(short = 'P', long = "parallel", default_value_t = 1)]
    pub streams: u32,
    /// Idle phase before and after the load, seconds (0..600)
    #[arg(long = "idle", default_value_t = 5)]
    pub idle: u32,
    /// Loaded phase, seconds (1..3600)
    #[arg(long = "loaded", default_value_t = 10)]
    pub loaded: u32,
    /// Probe interval, milliseconds (1..1000)
    #[arg(short = 'i', long = "interval", default_value_t = 10)]
    pub interval: u32,
    /// Board port (interface) to bind the probes and the load to
    #[arg(long = "bind-dev")]
    pub bind_dev: Option<String>,
    /// TCP congestion control of the load's streams (the peer's too, via iperf3); default cubic
    /// (fills the queue whatever the hosts' own default), "default" keeps each host's own
    #[arg(short = 'C', long = "congestion")]
    pub congestion: Option<String>,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
    /// Print the result as one JSON document instead of text
    #[arg(long)]
    pub json: bool,
}

/// Run it; returns the exit code.
pub fn main(a: LatencyArgs) -> i32 {
    crate::cmd::iperf::run_command(run(a))
}

/// A figure in ms with two decimals ("0.52"); "—" when none or not a number.
fn ms(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.2}"))
        .unwrap_or_else(|| "—".into())
}

async fn run(a: LatencyArgs) -> Result<i32, String> {
    let spec = LatencySpec {
        host: a.host.trim().to_string(),
        port: a.port,
        load: Load::parse(&a.load)?,
        streams: a.streams,
        idle_s: a.idle,
        loaded_s: a.loaded,
        interval_ms: a.interval,
        bind_dev: a.bind_dev.clone().filter(|d| !d.is_empty()),
        congestion: a.congestion.clone().filter(|c| !c.is_empty()),
    };
    // Refuse bad input before touching the history.
    spec.validate()?;
    let store = Arc::new(Store::open_dir(&a.data).map_err(|e| e.to_string())?);
    let hub = RunContext::new(store.clone());
    let (id, handle) = crate::runs::latency::start_latency(&hub, spec.clone(), None).await?;
    let mut rx = hub.registry().subscribe(id);
    if !a.json {
        println!(
            "Latency under load to {}: {} s idle, {} s {} load ({} stream(s)), {} s idle; ICMP every {} ms",
            spec.host,
            spec.idle_s,
            spec.loaded_s,
            spec.load.direction(),
            spec.streams,
            spec.idle_s,
            spec.interval_ms
        );
    }
    if let Some(rx) = rx.as_mut() {
        print_progress(rx, a.json).await;
    }
    let status = handle.await.map_err(|e| e.to_string())?;
    let run = store
        .get_run(id)
        .map_err(|e| e.to_string())?
        .ok_or("the run vanished")?;
    if a.json {
        print_json(id, &run, &spec)?;
    } else {
        print_text(id, &run, &store);
    }
    Ok(if status == crate::model::RunStatus::Completed {
        0
    } else {
        1
    })
}

/// Print the load's intervals as they come (not with `json`), until the run is done.
async fn print_progress(rx: &mut tokio::sync::broadcast::Receiver<LiveEvent>, json: bool) {
    while let Ok(ev) = rx.recv().await {
        match ev {
            LiveEvent::Interval { record, .. } if !json => {
                let rate: f64 = record.streams.iter().map(|s| s.bits_per_second).sum();
                if let Some(s) = record.streams.first() {
                    println!(
                        "[load] {:6.2}-{:<6.2} sec  {:>16}",
                        s.start,
                        s.end,
                        display::rate(rate)
                    );
                }
            }
            LiveEvent::Done { .. } => break,
            _ => {}
        }
    }
}

/// `--json`: the run's id, status, error and host with its summary's keys.
fn print_json(id: i64, run: &RunRow, spec: &LatencySpec) -> Result<(), String> {
    let s = &run.summary;
    let mut doc = serde_json::json!({
        "run_id": id,
        "status": run.status,
        "error": run.error,
        "host": spec.host,
    });
    if let (Some(d), Some(m)) = (doc.as_object_mut(), s.as_object()) {
        for (k, v) in m {
            d.insert(k.clone(), v.clone());
        }
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// The text summary: per phase the probes, lost and RTT percentiles, the load's throughput,
/// TCP RTT and one-way delays, the increase and RPM, the verdict.
fn print_text(id: i64, run: &RunRow, store: &Store) {
    let s = LatencyResult::of_summary(&run.summary);
    print_phases(s.as_ref());
    if let Some(s) = &s {
        print_load(&s.loaded);
    }
    // The UDP echo's one-way delays (or why there are none), as on the run page.
    for (label, value) in crate::results::owd::facts(&run.summary) {
        println!("{label}: {value}");
    }
    println!(
        "increase: {} ms   RPM: {}",
        ms(s.as_ref().and_then(|s| s.increase_ms)),
        s.as_ref()
            .and_then(|s| s.rpm)
            .map(|x| format!("{x:.0}"))
            .unwrap_or_else(|| "—".into())
    );
    if let Some(s) = s.as_ref().filter(|s| !s.verdict.is_empty()) {
        println!("{}", s.verdict);
    }
    if let Some(e) = &run.error {
        println!("Error: {e}");
    }
    println!(
        "Run {id} ({}) recorded in {}",
        run.status,
        store.path().display()
    );
}

/// The phases' table: probes sent and lost, RTT p50/p90/p99/max (ms); zeros and "—" for a
/// run without a summary `s`.
fn print_phases(s: Option<&LatencyResult>) {
    let none = Phase::default();
    let (idle, loaded, after) = s.map_or((&none, &none, &none), |s| {
        (&s.idle, &s.loaded, &s.idle_after)
    });
    println!("phase        probes  lost   p50 ms   p90 ms   p99 ms   max ms");
    for (p, label) in [(idle, "idle"), (loaded, "loaded"), (after, "idle after")] {
        let r = p.rtt_ms.as_ref();
        println!(
            "{label:<11} {:>7} {:>5} {:>8} {:>8} {:>8} {:>8}",
            p.sent,
            p.lost,
            ms(r.map(|r| r.p50)),
            ms(r.map(|r| r.p90)),
            ms(r.map(|r| r.p99)),
            ms(r.map(|r| r.max))
        );
    }
}

/// The loaded phase's goodput (bits/s; each direction's with load both) and its TCP RTT (ms).
fn print_load(loaded: &Phase) {
    if let Some(b) = loaded.bits_per_second {
        println!("throughput under load: {}", display::rate(b));
    }
    let leg = |l: &Option<DirectionLoad>| {
        l.as_ref()
            .map(|l| l.bits_per_second)
            .filter(|b| b.is_finite())
    };
    if let (Some(u), Some(d)) = (leg(&loaded.up), leg(&loaded.down)) {
        println!(
            "  up (board sends): {}   down (board receives): {}",
            display::rate(u),
            display::rate(d)
        );
    }
    if let Some(t) = &loaded.tcp_rtt_ms {
        println!(
            "TCP RTT of the load (TCP_INFO): p50 {} ms, p99 {} ms",
            ms(Some(t.p50)),
            ms(Some(t.p99))
        );
    }
}
