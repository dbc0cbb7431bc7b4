//! `netperfd multi --leg eth0=PC1 --leg eth1=PC2,receive`: a multi-port run from the command
//! line (every leg started at once, each bound to its board port), recorded in the history
//! (`--data DIR`) with CPU per core and port counters, printed as a legs table with the
//! aggregate and each leg's ceiling and verdict.

use crate::model::display;
use crate::model::RunStatus;
use crate::results::analysis::Analysis;
use crate::results::charts;
use crate::runs::context::RunContext;
use crate::runs::multi;
use crate::spec::test::{parse_bitrate, TestSpec};
use crate::store::{RunRow, Store};
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `netperfd multi`.
#[derive(clap::Args, Debug)]
pub struct MultiArgs {
    /// A leg: PORT=HOST[:PEERPORT][,send|receive|bidir][,tcp|udp][,b=RATE][,P=N]; give 2..8
    #[arg(long = "leg", value_name = "LEG", required = true)]
    pub legs: Vec<String>,
    /// Seconds
    #[arg(short = 't', long = "time", default_value_t = 10)]
    pub time: u32,
    /// Parallel streams per leg
    #[arg(short = 'P', long = "parallel", default_value_t = 1)]
    pub parallel: u32,
    /// UDP on every leg (per leg: ",udp")
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
    /// Bitrate per stream on every leg, e.g. 500M (per leg: ",b=RATE")
    #[arg(short = 'b', long = "bitrate")]
    pub bitrate: Option<String>,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Run it; returns the exit code (1 if any leg failed).
pub fn main(a: MultiArgs) -> i32 {
    crate::cmd::iperf::run_command(run(a))
}

async fn run(a: MultiArgs) -> Result<i32, String> {
    let base = TestSpec {
        duration: Some(a.time.into()),
        parallel: Some(a.parallel.into()),
        udp: a.udp,
        bitrate: a
            .bitrate
            .as_deref()
            .map(|b| parse_bitrate(b).map_err(|e| format!("-b: {e}")))
            .transpose()?,
        ..Default::default()
    };
    let legs = a
        .legs
        .iter()
        .map(|l| multi::parse_leg(l, &base))
        .collect::<Result<Vec<_>, _>>()?;
    let specs = multi::specs(&legs, &crate::board::ports())?;
    let store = Arc::new(Store::open_dir(&a.data).map_err(|e| e.to_string())?);
    let hub = RunContext::new(store.clone());
    if !a.json {
        println!(
            "Multi-port run: {} legs of {} s started together",
            specs.len(),
            a.time
        );
    }
    let (id, handle) = crate::runs::multi::start_multi(&hub, specs, None)?;
    let _ = handle.await;
    let run = store
        .get_run(id)
        .map_err(|e| e.to_string())?
        .ok_or("the run vanished")?;
    let legs = store.children(id).map_err(|e| e.to_string())?;
    let judged: Vec<_> = legs
        .iter()
        .map(|l| charts::analyze_run(&store, l))
        .collect();
    if a.json {
        let out = serde_json::json!({
            "run": run,
            "legs": legs.iter().zip(&judged).map(|(l, j)| serde_json::json!({"run": l, "analysis": j})).collect::<Vec<_>>(),
            "cpu": store.cpu_samples(id).unwrap_or_default(),
            "ports": store.port_samples(id).unwrap_or_default(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
    } else {
        print_text(id, &run, &legs, &judged, &store);
    }
    Ok(if run.status == RunStatus::Completed {
        0
    } else {
        1
    })
}

/// The text result: one line per leg (port, peer, test, status, rates, % of the ceiling,
/// verdict), the total, the cores of the first leg judged, the error.
fn print_text(id: i64, run: &RunRow, legs: &[RunRow], judged: &[Option<Analysis>], store: &Store) {
    let r = |v: Option<f64>| v.map(display::rate).unwrap_or_else(|| "—".into());
    println!(
        "{:<4} {:<8} {:<22} {:<12} {:<10} {:>18} {:>18} {:>10}  Verdict",
        "Leg", "Port", "Peer", "Test", "Status", "Sender", "Receiver", "% ceiling"
    );
    for (i, (l, j)) in legs.iter().zip(judged).enumerate() {
        println!(
            "{:<4} {:<8} {:<22} {:<12} {:<10} {:>18} {:>18} {:>10}  {}",
            i + 1,
            l.bind_dev.clone().unwrap_or_default(),
            format!("{}:{}", l.peer_host, l.peer_port),
            format!("{} {}", l.protocol, l.direction),
            l.status,
            r(l.sender_bps),
            r(l.receiver_bps),
            j.as_ref()
                .and_then(|j| j.percent_of_ceiling)
                .map(|p| format!("{p:.1} %"))
                .unwrap_or_else(|| "unknown".into()),
            j.as_ref().map(|j| j.verdict_text.as_str()).unwrap_or("")
        );
    }
    println!(
        "{:<4} {:<8} {:<22} {:<12} {:<10} {:>18} {:>18}",
        "All",
        "",
        "",
        "",
        run.status,
        r(run.sender_bps),
        r(run.receiver_bps)
    );
    if let Some(j) = judged.iter().flatten().next() {
        for c in j.cores.iter().filter(|c| c.cpu >= 0) {
            println!(
                "cpu{}: {:.0} % busy (user {:.0} %, system {:.0} %, softirq {:.0} %), peak {:.0} %",
                c.cpu, c.busy, c.user, c.system, c.softirq, c.peak_busy
            );
        }
    }
    if let Some(e) = &run.error {
        println!("error: {e}");
    }
    println!("Run {id} recorded in {}", store.path().display());
}
