//! `netperfd forward` and `netperfd monitor`: forwarding runs and monitor-only runs from the
//! command line, recorded in the history (`--data DIR`) like the web UI's, with a short table
//! at the end (or the stored summary as JSON). Ctrl-C stops the run cleanly (the peer's test
//! is stopped and forwarding restored). `netperfd peer` is in `peer::agent`.

use crate::board::apply::Controller;
use crate::model::units::parse_suffixed;
use crate::model::{RunDirection, RunStatus};
use crate::runs::context::RunContext;
use crate::runs::forward;
use crate::spec::test::{parse_bitrate, TestDirection, TestSpec};
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

/// The flags of `netperfd forward` checked into a plan against the board's `ports`, with the
/// agent's `token`. Errors: the sentence printed for a bad command line (exit code 2).
fn forward_plan(
    a: &ForwardArgs,
    token: String,
    ports: &[crate::board::Port],
) -> Result<forward::ForwardPlan, String> {
    let direction = match (a.reverse, a.bidir) {
        (true, true) => return Err("-R and --bidir exclude each other".into()),
        (true, false) => TestDirection::Receive,
        (false, true) => TestDirection::Bidir,
        _ => TestDirection::Send,
    };
    let path = forward::ForwardPath::check(
        &a.path.peer,
        Some(&token),
        None,
        &a.path.ingress,
        &a.path.egress,
        ports,
    )?;
    // The flags typed by clap go into the test as they are; only the two that take units
    // ("500M", "128K") are read here, with the same words as a form's fields.
    let size = |t: &Option<String>, name: &str| {
        t.as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| parse_suffixed(t, false).map_err(|e| format!("{name}: {e}")))
            .transpose()
    };
    let length = size(&a.length, "length")?;
    let bitrate = a
        .bitrate
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(parse_bitrate)
        .transpose()?;
    let test = TestSpec {
        port: Some(a.path.port),
        udp: a.udp,
        length,
        duration: Some(u64::from(a.time)),
        parallel: Some(u64::from(a.parallel)),
        direction,
        bitrate,
        ..TestSpec::new(a.path.to.clone())
    };
    path.plan(&test, a.path.nat)
}

/// The flags of `netperfd rfc2544` checked into a plan against the board's `ports` (MTU and
/// link speed), with the agent's `token`. Errors: the sentence printed for a bad command line
/// (exit code 2).
fn rfc2544_plan(
    a: &Rfc2544Args,
    token: String,
    ports: &[crate::board::PortFacts],
) -> Result<crate::spec::rfc2544::Rfc2544Plan, String> {
    let direction = match (a.reverse, a.bidir) {
        (true, true) => return Err("-R and --bidir exclude each other".into()),
        (true, false) => RunDirection::Receive,
        (false, true) => RunDirection::Bidir,
        _ => RunDirection::Send,
    };
    crate::spec::rfc2544::Rfc2544Flags {
        peer: a.path.peer.clone(),
        token,
        target: a.path.to.clone(),
        port: a.path.port,
        ingress: a.path.ingress.clone(),
        egress: a.path.egress.clone(),
        nat: a.path.nat,
        sizes: a.sizes.clone(),
        trial: a.trial,
        loss: a.loss.clone(),
        resolution: a.resolution.clone(),
        direction,
        tests: a.tests.clone(),
        b2b_repeat: a.b2b_repeat,
        echo_port: a.echo_port,
        line_rate: a.line_rate.clone(),
        min_throughput_percent: a.min_throughput_percent.clone(),
        max_latency_ms: a.max_latency_ms.clone(),
        max_cpu_percent: a.max_cpu_percent.clone(),
    }
    .plan(ports)
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
        let plan = match forward_plan(&a, token, &crate::board::ports()) {
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
        let hub = RunContext::with_board(store.clone(), ctl.clone());
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
        let plan = match rfc2544_plan(&a, token, &crate::board::port_facts().await) {
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
        let hub = RunContext::with_board(store.clone(), ctl.clone());
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
        let plan = match forward::MonitorPlan::new(
            &a.ports,
            a.label.as_deref(),
            a.time,
            &crate::board::ports(),
        ) {
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
        let hub = RunContext::new(store.clone());
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
    hub: &RunContext,
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
            hub.registry().stop(id);
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

#[cfg(test)]
mod tests {
    //! The command lines' messages for bad flags, pinned: the flags become typed specs
    //! directly (no request text in between), with the same words as before.
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Forward {
        #[command(flatten)]
        a: ForwardArgs,
    }

    #[derive(Parser)]
    struct Rfc2544 {
        #[command(flatten)]
        a: Rfc2544Args,
    }

    const PATH: [&str; 8] = [
        "--peer",
        "http://192.0.2.222:5280",
        "--to",
        "198.51.100.2",
        "--in",
        "eth0",
        "--out",
        "eth1",
    ];
    const TOKEN: &str = "s3cret-token-0123";

    fn ports() -> Vec<crate::board::Port> {
        ["eth0", "eth1", "lo"]
            .map(|n| crate::board::Port {
                name: n.into(),
                up: true,
                running: true,
                loopback: n == "lo",
                addresses: vec![],
            })
            .to_vec()
    }

    fn facts() -> Vec<crate::board::PortFacts> {
        let p = |n: &str, mtu, speed| crate::board::PortFacts {
            name: n.into(),
            mtu,
            speed_mbps: speed,
            loopback: n == "lo",
        };
        vec![
            p("eth0", 1500, Some(1000)),
            p("eth1", 1500, Some(10000)),
            p("eth2", 9000, None),
            p("lo", 65536, None),
        ]
    }

    /// `args` after the path flags, with `replace` (flag, value) swapped into them.
    fn argv(replace: &[(&str, &str)], args: &[&str]) -> Vec<String> {
        let mut v = vec!["netperfd".to_string()];
        for pair in PATH.chunks(2) {
            let value = replace
                .iter()
                .find(|(f, _)| *f == pair[0])
                .map_or(pair[1], |(_, v)| *v);
            v.push(format!("{}={value}", pair[0]));
        }
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }

    fn forward(replace: &[(&str, &str)], args: &[&str]) -> Result<forward::ForwardPlan, String> {
        let a = Forward::try_parse_from(argv(replace, args))
            .expect("flags parse")
            .a;
        forward_plan(&a, TOKEN.into(), &ports())
    }

    fn rfc2544(
        replace: &[(&str, &str)],
        args: &[&str],
    ) -> Result<crate::spec::rfc2544::Rfc2544Plan, String> {
        let a = Rfc2544::try_parse_from(argv(replace, args))
            .expect("flags parse")
            .a;
        rfc2544_plan(&a, TOKEN.into(), &facts())
    }

    #[test]
    fn forward_flags_become_the_plan() {
        let p = forward(
            &[],
            &["-t", "5", "-P", "2", "-R", "-u", "-b", "100M", "--nat"],
        )
        .unwrap();
        assert_eq!(p.client.url(), "http://192.0.2.222:5280");
        assert_eq!(
            (p.ingress.as_str(), p.egress.as_str(), p.nat),
            ("eth0", "eth1", true)
        );
        let s = &p.spec;
        assert_eq!(s.host, "198.51.100.2");
        assert_eq!((s.port, s.time, s.parallel), (Some(5201), Some(5), Some(2)));
        assert!(s.reverse && s.udp && !s.bidir);
        assert_eq!((s.bitrate, s.length), (Some(100_000_000), None));
        let p = forward(&[], &["--bidir", "-l", "128K", "-p", "5202"]).unwrap();
        assert!(p.spec.bidir && !p.spec.reverse && !p.spec.udp && !p.nat);
        assert_eq!((p.spec.length, p.spec.port), (Some(128 * 1024), Some(5202)));
        assert_eq!((p.spec.time, p.spec.parallel), (Some(10), Some(1)));
        assert_eq!(p.spec.bitrate, None);
        let p = forward(&[], &["-u", "-b", "0"]).unwrap();
        assert_eq!(p.spec.bitrate, Some(0));
    }

    #[test]
    fn bad_forward_flags_get_the_same_words() {
        let mut wrong = Vec::new();
        for (replace, args, want) in [
            (&[][..], &["-R", "--bidir"][..], "-R and --bidir exclude each other"),
            (
                &[("--peer", "https://pc1")][..],
                &[][..],
                "peer agent address 'https://pc1': https:// needs the agent's certificate fingerprint: https://pc1#sha256=AB:CD:… (`netperfd peer` prints it at start; the board accepts only that certificate)",
            ),
            (&[("--peer", " ")], &[], "the peer agent address is missing (https://PC1:5280#sha256=…, as `netperfd peer` prints it)"),
            (&[("--out", "eth0")], &[], "ingress and egress must be two different ports (both are eth0)"),
            (&[("--out", "eth9")], &[], "the board has no port 'eth9' (egress)"),
            (&[("--in", "lo")], &[], "ingress port lo is the loopback"),
            (&[("--in", "")], &[], "choose the ingress port"),
            (&[("--to", "a b")], &[], "target 'a b' is not a host name or IP address"),
            (&[("--to", "")], &[], "target '' is not a host name or IP address"),
            (&[], &["-t", "0"], "duration must be 1..86400, got 0"),
            (&[], &["-t", "86401"], "duration must be 1..86400, got 86401"),
            (&[], &["-P", "0"], "parallel streams must be 1..128, got 0"),
            (&[], &["-p", "0"], "port must be 1..65535, got 0"),
            (&[], &["-b", "5x"], "bitrate: "),
            (&[], &["-b", "200G"], "bitrate: '200G' is above the maximum of 100G (100000000000 bits/s)"),
            (&[], &["-l", "big"], "length: "),
            (&[], &["-l", "0"], "length must be 1..1048576 bytes, got 0"),
            (&[], &["-u", "-l", "8"], "length must be 16..65507 bytes, got 8"),
            (&[("--peer", "http://pc1")], &["-b", "5x", "-t", "0"], "bitrate: "),
        ] {
            let got = forward(replace, args).unwrap_err();
            // The same words as the request the command line was lowered into before.
            let text = if args.contains(&"-R") && args.contains(&"--bidir") {
                // The command line's own check, before any request.
                got.clone()
            } else {
                as_request(replace, args).plan(&ports(), None).unwrap_err()
            };
            if got != text || !(got == want || (want.ends_with(": ") && got.starts_with(want))) {
                wrong.push(format!("{replace:?} {args:?}: {got:?} (text: {text:?})"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// The `ForwardRequest` the command line used to be written into (its text), to compare.
    fn as_request(replace: &[(&str, &str)], args: &[&str]) -> forward::ForwardRequest {
        let a = Forward::try_parse_from(argv(replace, args))
            .expect("flags parse")
            .a;
        forward::ForwardRequest {
            peer: a.path.peer.clone(),
            token: Some(TOKEN.into()),
            target: a.path.to.clone(),
            port: Some(a.path.port.to_string()),
            ingress: a.path.ingress.clone(),
            egress: a.path.egress.clone(),
            duration: Some(a.time.to_string()),
            parallel: Some(a.parallel.to_string()),
            direction: Some(
                if a.reverse {
                    "receive"
                } else if a.bidir {
                    "bidir"
                } else {
                    "send"
                }
                .into(),
            ),
            protocol: Some(if a.udp { "udp" } else { "tcp" }.into()),
            bitrate: a.bitrate.clone(),
            length: a.length.clone(),
            nat: Some(a.path.nat.to_string()),
            csrf: None,
        }
    }

    /// The `Rfc2544Request` the command line used to be written into (its text), to compare.
    fn as_rfc2544_request(
        replace: &[(&str, &str)],
        args: &[&str],
    ) -> crate::spec::rfc2544::Rfc2544Request {
        let a = Rfc2544::try_parse_from(argv(replace, args))
            .expect("flags parse")
            .a;
        crate::spec::rfc2544::Rfc2544Request {
            peer: a.path.peer.clone(),
            token: Some(TOKEN.into()),
            target: a.path.to.clone(),
            port: Some(a.path.port.to_string()),
            ingress: a.path.ingress.clone(),
            egress: a.path.egress.clone(),
            nat: Some(a.path.nat.to_string()),
            sizes: a.sizes.clone(),
            trial: Some(a.trial.to_string()),
            loss: Some(a.loss.clone()),
            resolution: Some(a.resolution.clone()),
            direction: Some(
                if a.reverse {
                    "receive"
                } else if a.bidir {
                    "bidir"
                } else {
                    "send"
                }
                .into(),
            ),
            tests: Some(a.tests.clone()),
            b2b_repeat: Some(a.b2b_repeat.to_string()),
            echo_port: Some(a.echo_port.to_string()),
            line_rate: a.line_rate.clone(),
            min_throughput_percent: a.min_throughput_percent.clone(),
            max_latency_ms: a.max_latency_ms.clone(),
            max_cpu_percent: a.max_cpu_percent.clone(),
            run_port: None,
            run_trial: None,
            csrf: None,
        }
    }

    #[test]
    fn rfc2544_flags_become_the_plan() {
        use crate::spec::rfc2544::Rfc2544Test;
        let p = rfc2544(&[], &[]).unwrap();
        assert_eq!(p.sizes, crate::spec::rfc2544::DEFAULT_SIZES.to_vec());
        assert_eq!((p.trial_s, p.loss, p.resolution), (10, 0.0, 0.005));
        assert_eq!((p.port, p.echo_port, p.b2b_repeat), (5201, 5291, 1));
        assert_eq!(p.direction, crate::model::RunDirection::Send);
        assert_eq!(p.tests, vec![Rfc2544Test::Throughput]);
        assert_eq!(
            (p.line_bps, p.line_source, p.nat),
            (1e9, "link speed", false)
        );
        assert!(p.thresholds.is_empty());
        assert_eq!(
            (p.peer.as_str(), p.token.as_str()),
            ("http://192.0.2.222:5280", TOKEN)
        );
        let p = rfc2544(
            &[],
            &[
                "--sizes",
                "1518, 64,64",
                "--trial",
                "3",
                "--loss",
                "0.1",
                "--resolution",
                "1",
                "--tests",
                "latency,throughput,b2b",
                "--b2b-repeat",
                "4",
                "--echo-port",
                "7",
                "--line-rate",
                "100M",
                "--max-latency-ms",
                "2.5",
                "--min-throughput-percent",
                "90%",
                "--max-cpu-percent",
                "80",
                "-p",
                "5202",
                "--nat",
            ],
        )
        .unwrap();
        assert_eq!(p.sizes, vec![64, 1518]);
        assert_eq!((p.trial_s, p.loss, p.resolution), (3, 0.001, 0.01));
        assert_eq!(
            (p.port, p.echo_port, p.b2b_repeat, p.nat),
            (5202, 7, 4, true)
        );
        assert_eq!(
            p.tests,
            vec![
                Rfc2544Test::Throughput,
                Rfc2544Test::Latency,
                Rfc2544Test::BackToBack
            ]
        );
        assert_eq!((p.line_bps, p.line_source), (1e8, "given"));
        assert_eq!(p.thresholds.max_latency_ms, Some(2.5));
        assert_eq!(p.thresholds.min_throughput_percent, Some(90.0));
        assert_eq!(p.thresholds.max_cpu_percent, Some(80.0));
        for (flag, dir) in [("-R", "receive"), ("--bidir", "bidir")] {
            assert_eq!(rfc2544(&[], &[flag]).unwrap().direction.as_str(), dir);
        }
        // The same plan as the request the command line was lowered into before.
        for args in [
            &[][..],
            &["-R", "--sizes", "512", "--loss", "0.5%", "--nat"][..],
            &[
                "--tests",
                "throughput,latency,loss",
                "--max-latency-ms",
                "2",
                "--trial",
                "600",
            ][..],
            // tests/rfc2544.rs's back-to-back run through a shaper.
            &[
                "--sizes",
                "512,1518",
                "--trial",
                "1",
                "--resolution",
                "5",
                "--line-rate",
                "1G",
                "--tests",
                "back-to-back,throughput",
            ][..],
        ] {
            assert_eq!(
                rfc2544(&[], args),
                as_rfc2544_request(&[], args).plan(&facts(), None),
                "{args:?}"
            );
        }
    }

    #[test]
    fn bad_rfc2544_flags_get_the_same_words() {
        let mut wrong = Vec::new();
        for (replace, args, want) in [
            (&[][..], &["-R", "--bidir"][..], "-R and --bidir exclude each other"),
            (&[("--to", "-x")][..], &[][..], "target '-x' is not a host name or address"),
            (&[("--to", " ")], &[], "the target (PC2, running iperf3 -s) is missing"),
            (&[("--peer", "")], &[], "the peer agent address is missing (https://PC1:5280#sha256=…, as `netperfd peer` prints it)"),
            (&[("--out", "eth0")], &[], "ingress and egress must be two different ports (both are eth0)"),
            (&[("--out", "eth2")], &[], "eth2 reports no link speed: give the line rate (e.g. 1G)"),
            (&[], &["-p", "0"], "port '0' is not a port number (1..65535)"),
            (&[], &["--trial", "0"], "trial (s) 0 is out of range (1..600)"),
            (&[], &["--trial", "601"], "trial (s) 601 is out of range (1..600)"),
            (&[], &["--tests", "throughput,b2b", "--b2b-repeat", "0"], "back-to-back repeat 0 is out of range (1..50)"),
            (&[], &["--tests", "throughput,b2b", "--b2b-repeat", "51"], "back-to-back repeat 51 is out of range (1..50)"),
            (&[], &["--tests", "throughput,latency", "--echo-port", "0"], "echo port '0' is not a port number (1..65535)"),
            (&[], &["--tests", "throughput,b2b", "-R"], "the back-to-back test sends its bursts from PC1's agent: direction must be send, not receive"),
            (&[], &["--tests", "speed"], "test 'speed': expected throughput, latency, loss or back-to-back"),
            (&[], &["--tests", ","], "choose at least one test"),
            (&[], &["--tests", "latency"], "the latency test runs at the throughput found: choose throughput too"),
            (&[], &["--loss", "101%"], "loss (%) 101% is out of range (0..100)"),
            (&[], &["--loss", "x"], "loss (%) 'x' is not a number"),
            (&[], &["--resolution", "0"], "resolution (%) 0 is out of range (0.01..50)"),
            (&[], &["--sizes", "63"], "frame size 63 is below Ethernet's minimum of 64 bytes"),
            (&[], &["--sizes", "64,big"], "frame size 'big' is not a whole number of bytes"),
            (&[], &["--sizes", "9000"], "frame size 9000 is beyond the MTU: eth0 and eth1 carry frames of at most 1518 bytes (MTU 1500 + 18)"),
            (&[], &["--line-rate", "10"], "line rate 10 is out of range (1M..400G bit/s)"),
            (&[], &["--min-throughput-percent", "101"], "pass/fail limit: min_throughput_percent is a percentage (0..100), got 101"),
            (&[], &["--max-latency-ms", "3"], "a maximum latency needs the latency test"),
        ] {
            let got = rfc2544(replace, args).unwrap_err();
            // The same words as the request the command line was lowered into before.
            let text = if args.contains(&"-R") && args.contains(&"--bidir") {
                got.clone()
            } else {
                as_rfc2544_request(replace, args)
                    .plan(&facts(), None)
                    .unwrap_err()
            };
            if got != want || got != text {
                wrong.push(format!("{replace:?} {args:?}: {got:?} (text: {text:?})"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
