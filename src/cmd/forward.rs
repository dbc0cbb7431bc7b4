//! `netperfd forward` and `netperfd monitor`: forwarding runs and monitor-only runs from the
//! command line, recorded in the history (`--data DIR`) like the web UI's, with a short table
//! at the end (or the stored summary as JSON). Ctrl-C stops the run cleanly (the peer's test
//! is stopped and forwarding restored). `netperfd peer` is in `peer::agent`.

use crate::board::apply::Controller;
use crate::model::RunStatus;
use crate::runs::forward::{self, ForwardRequest, MonitorRequest};
use crate::runs::live::Hub;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// The path through the board both `netperfd forward` and `netperfd rfc2544` test: the peer
/// agent on PC1, PC2, and the board's two ports.
#[derive(clap::Args, Debug)]
pub struct PeerPathArgs {
    /// The peer agent on PC1 (`netperfd peer`): 'https://HOST[:PORT]#sha256=FINGERPRINT' as the
    /// agent prints it at start (only that certificate is accepted), or http://HOST[:PORT] for
    /// an agent with --plain-http (port default 5280)
    #[arg(long, value_name = "URL")]
    pub peer: String,
    /// File holding the agent's token
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The agent's token (prefer --token-file or $NETPERFD_PEER_TOKEN)
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Host the peer tests to (PC2, running iperf3 -s, or netperfd, which also reports its
    /// own drops)
    #[arg(long = "to", value_name = "HOST")]
    pub to: String,
    /// PC2's iperf3 port
    #[arg(short = 'p', long = "port", default_value_t = 5201)]
    pub port: u16,
    /// Board port the traffic comes in on (PC1's side)
    #[arg(long = "in", value_name = "PORT")]
    pub ingress: String,
    /// Board port the traffic leaves through (PC2's side)
    #[arg(long = "out", value_name = "PORT")]
    pub egress: String,
    /// Turn on forwarding with NAT (MASQUERADE on --out) for the run, and off afterwards
    #[arg(long)]
    pub nat: bool,
}

/// Flags of `netperfd forward`.
#[derive(clap::Args, Debug)]
pub struct ForwardArgs {
    #[command(flatten)]
    pub path: PeerPathArgs,
    /// Seconds
    #[arg(short = 't', long = "time", default_value_t = 10)]
    pub time: u32,
    /// Parallel streams
    #[arg(short = 'P', long = "parallel", default_value_t = 1)]
    pub parallel: u32,
    /// PC2 sends to PC1
    #[arg(short = 'R', long = "reverse")]
    pub reverse: bool,
    /// Both directions at once
    #[arg(long)]
    pub bidir: bool,
    /// UDP instead of TCP
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
    /// Bitrate per stream, e.g. 500M
    #[arg(short = 'b', long = "bitrate")]
    pub bitrate: Option<String>,
    /// Block / datagram size in bytes
    #[arg(short = 'l', long = "length")]
    pub length: Option<String>,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
    /// Print the stored run and its summary as JSON
    #[arg(long)]
    pub json: bool,
}

/// Flags of `netperfd rfc2544` (PC1's agent generates the frames, PC2 receives them).
#[derive(clap::Args, Debug)]
pub struct Rfc2544Args {
    #[command(flatten)]
    pub path: PeerPathArgs,
    /// Frame sizes, bytes with FCS [default: 64,128,256,512,1024,1280,1518]
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Seconds per trial
    #[arg(long, default_value_t = 10)]
    pub trial: u32,
    /// Loss allowed in the throughput test, % of frames
    #[arg(long, default_value = "0")]
    pub loss: String,
    /// Throughput search resolution, % of the rate
    #[arg(long, default_value = "0.5")]
    pub resolution: String,
    /// PC2 generates, PC1 receives
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Both directions at once
    #[arg(long)]
    pub bidir: bool,
    /// Tests: throughput, latency, loss, back-to-back (comma-separated; latency and
    /// back-to-back need throughput; latency needs netperfd's UDP echo on PC2)
    #[arg(long, default_value = "throughput")]
    pub tests: String,
    /// Times the back-to-back search runs per frame size; the result is their mean (RFC
    /// 2544 asks for 50)
    #[arg(long = "b2b-repeat", default_value_t = 1)]
    pub b2b_repeat: u32,
    /// PC2's UDP echo port, for the latency test
    #[arg(long = "echo-port", default_value_t = crate::engine::echo::DEFAULT_PORT)]
    pub echo_port: u16,
    /// The ports' line rate in bit/s, e.g. 1G [default: their link speed]
    #[arg(long = "line-rate", value_name = "RATE")]
    pub line_rate: Option<String>,
    /// Pass/fail: every frame size's throughput at least this % of the line rate (exit code 1
    /// when not)
    #[arg(long = "min-throughput-percent", value_name = "PERCENT")]
    pub min_throughput_percent: Option<String>,
    /// Pass/fail: every frame size's latency (p99 round trip) at most this, ms (needs
    /// `--tests throughput,latency`)
    #[arg(long = "max-latency-ms", value_name = "MS")]
    pub max_latency_ms: Option<String>,
    /// Pass/fail: the busiest core at most this % busy during the run
    #[arg(long = "max-cpu-percent", value_name = "PERCENT")]
    pub max_cpu_percent: Option<String>,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
    /// Print the stored run and its summary as JSON
    #[arg(long)]
    pub json: bool,
}

/// Flags of `netperfd monitor`.
#[derive(clap::Args, Debug)]
pub struct MonitorArgs {
    /// Ports to watch, comma-separated
    #[arg(long, value_name = "PORTS")]
    pub ports: String,
    /// Seconds to record (default: until Ctrl-C)
    #[arg(short = 't', long = "time")]
    pub time: Option<u32>,
    /// What is being watched
    #[arg(long)]
    pub label: Option<String>,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
    /// Print the stored run and its summary as JSON
    #[arg(long)]
    pub json: bool,
}

fn runtime() -> Result<tokio::runtime::Runtime, i32> {
    tokio::runtime::Runtime::new().map_err(|e| {
        eprintln!("netperfd: {e}");
        1
    })
}

/// Run `netperfd forward`; exit code 0 when the run completed.
pub fn forward_main(a: ForwardArgs) -> i32 {
    crate::logging::init("warn");
    let rt = match runtime() {
        Ok(r) => r,
        Err(c) => return c,
    };
    rt.block_on(async move {
        let token =
            match crate::peer::token_from(a.path.token.as_deref(), a.path.token_file.as_deref()) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("netperfd: {e}");
                    return 2;
                }
            };
        let direction = match (a.reverse, a.bidir) {
            (true, true) => {
                eprintln!("netperfd: -R and --bidir exclude each other");
                return 2;
            }
            (true, false) => "receive",
            (false, true) => "bidir",
            _ => "send",
        };
        let req = ForwardRequest {
            peer: a.path.peer.clone(),
            token: Some(token),
            target: a.path.to.clone(),
            port: Some(a.path.port.to_string()),
            ingress: a.path.ingress.clone(),
            egress: a.path.egress.clone(),
            duration: Some(a.time.to_string()),
            parallel: Some(a.parallel.to_string()),
            direction: Some(direction.into()),
            protocol: Some(if a.udp { "udp" } else { "tcp" }.into()),
            bitrate: a.bitrate.clone(),
            length: a.length.clone(),
            nat: Some(a.path.nat.to_string()),
            csrf: None,
        };
        let plan = match req.plan(&crate::board::ports(), None) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 2;
            }
        };
        let store = match Store::open_dir(&a.data) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                eprintln!(
                    "netperfd: cannot open the data directory {}: {e}",
                    a.data.display()
                );
                return 1;
            }
        };
        let ctl = Controller::new(Some(store.clone()), Some(&a.data));
        let hub = Hub::with_board(store.clone(), ctl.clone());
        if !a.json {
            println!(
                "Forwarding run: {} tests to {}:{} through {} → {}{} for {} s",
                plan.client.url(),
                a.path.to,
                a.path.port,
                plan.ingress,
                plan.egress,
                if plan.nat {
                    " (forwarding with NAT for the run)"
                } else {
                    ""
                },
                a.time
            );
        }
        let (id, handle) = match forward::start_forward(&hub, Some(ctl), plan) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 1;
            }
        };
        finish(&hub, &store, id, handle, a.json).await
    })
}

/// Run `netperfd rfc2544`; exit code 0 when the run completed (and passed the limits given
/// with it, if any), 2 for a bad request (nothing started), 1 otherwise.
pub fn rfc2544_main(a: Rfc2544Args) -> i32 {
    crate::logging::init("warn");
    let rt = match runtime() {
        Ok(r) => r,
        Err(c) => return c,
    };
    rt.block_on(async move {
        let token = match crate::peer::token_from(a.path.token.as_deref(), a.path.token_file.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 2;
            }
        };
        let direction = match (a.reverse, a.bidir) {
            (true, true) => {
                eprintln!("netperfd: -R and --bidir exclude each other");
                return 2;
            }
            (true, false) => "receive",
            (false, true) => "bidir",
            _ => "send",
        };
        let req = crate::spec::rfc2544::Rfc2544Request {
            peer: a.path.peer.clone(),
            token: Some(token),
            target: a.path.to.clone(),
            port: Some(a.path.port.to_string()),
            ingress: a.path.ingress.clone(),
            egress: a.path.egress.clone(),
            nat: Some(a.path.nat.to_string()),
            sizes: a.sizes.clone(),
            trial: Some(a.trial.to_string()),
            loss: Some(a.loss.clone()),
            resolution: Some(a.resolution.clone()),
            direction: Some(direction.into()),
            tests: Some(a.tests.clone()),
            b2b_repeat: Some(a.b2b_repeat.to_string()),
            echo_port: Some(a.echo_port.to_string()),
            line_rate: a.line_rate.clone(),
            min_throughput_percent: a.min_throughput_percent.clone(),
            max_latency_ms: a.max_latency_ms.clone(),
            max_cpu_percent: a.max_cpu_percent.clone(),
            csrf: None,
        };
        let plan = match req.plan(&crate::board::port_facts().await, None) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 2;
            }
        };
        let store = match Store::open_dir(&a.data) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                eprintln!(
                    "netperfd: cannot open the data directory {}: {e}",
                    a.data.display()
                );
                return 1;
            }
        };
        let ctl = Controller::new(Some(store.clone()), Some(&a.data));
        let hub = Hub::with_board(store.clone(), ctl.clone());
        if !a.json {
            println!(
                "RFC 2544: {} generates to {}:{} through {} → {}, frames {:?} B, {} s trials, line rate {} ({})",
                plan.peer,
                plan.target,
                plan.port,
                plan.ingress,
                plan.egress,
                plan.sizes,
                plan.trial_s,
                crate::model::display::rate(plan.line_bps),
                plan.line_source
            );
        }
        let (id, handle) = match crate::runs::rfc2544::start_rfc2544(&hub, Some(ctl), plan, None) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 1;
            }
        };
        finish(&hub, &store, id, handle, a.json).await
    })
}

/// Run `netperfd monitor`; exit code 0 when the run completed.
pub fn monitor_main(a: MonitorArgs) -> i32 {
    crate::logging::init("warn");
    let rt = match runtime() {
        Ok(r) => r,
        Err(c) => return c,
    };
    rt.block_on(async move {
        let req = MonitorRequest {
            ports: a.ports.clone(),
            label: a.label.clone(),
            duration: a.time.map(|t| t.to_string()),
            csrf: None,
        };
        let plan = match req.plan(&crate::board::ports()) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 2;
            }
        };
        let store = match Store::open_dir(&a.data) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                eprintln!(
                    "netperfd: cannot open the data directory {}: {e}",
                    a.data.display()
                );
                return 1;
            }
        };
        let hub = Hub::new(store.clone());
        if !a.json {
            match plan.seconds {
                Some(s) => println!("Watching {} for {s} s", plan.ports.join(", ")),
                None => println!("Watching {} until Ctrl-C", plan.ports.join(", ")),
            }
        }
        let (id, handle) = match forward::start_monitor(&hub, plan) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 1;
            }
        };
        finish(&hub, &store, id, handle, a.json).await
    })
}

/// Wait for the run (Ctrl-C or SIGTERM stops it), then print it.
async fn finish(
    hub: &Hub,
    store: &Store,
    id: i64,
    mut handle: tokio::task::JoinHandle<crate::model::RunStatus>,
    json: bool,
) -> i32 {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let stop = async {
        match term.as_mut() {
            Some(t) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = t.recv() => {}
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    tokio::select! {
        _ = &mut handle => {}
        _ = stop => {
            hub.stop(id);
            let _ = (&mut handle).await;
        }
    }
    let run = match store.get_run(id) {
        Ok(Some(r)) => r,
        _ => {
            eprintln!("netperfd: run {id} is not in the history");
            return 1;
        }
    };
    // The limits given with the run (`--min-throughput-percent`, …): FAIL exits 1.
    let verdict = crate::results::verdict::judge_run(store, &run);
    if json {
        // The stored run, and its verdict when it was given limits (an added key).
        let doc = serde_json::to_value(&run).map(|mut v| {
            if let (Some(o), Some(verdict)) = (v.as_object_mut(), &verdict) {
                o.insert("verdict".into(), serde_json::json!(verdict));
            }
            v
        });
        match doc.and_then(|v| serde_json::to_string_pretty(&v)) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("netperfd: {e}"),
        }
    } else {
        print!("{}", crate::results::text::summary_text(&run));
        if let Some(v) = &verdict {
            for (i, l) in crate::results::verdict::run_verdict_lines(v)
                .iter()
                .enumerate()
            {
                println!("{}{l}", if i == 0 { "" } else { "  " });
            }
        }
        println!("Run {id} recorded in {}", store.path().display());
    }
    if run.status == RunStatus::Completed && verdict.is_none_or(|v| v.pass) {
        0
    } else {
        1
    }
}
