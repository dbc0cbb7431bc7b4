//! netperfd entry point: the iperf3-compatible client/server (`-c` / `-s`), the appliance
//! (`daemon`), history (`runs`) and `hash-password`.
use clap::{Parser, Subcommand};
use netperfd::cmd::iperf::{self, IperfArgs};

#[derive(Parser, Debug)]
#[command(
    name = "netperfd",
    about = "Network performance test appliance: iperf3-compatible client/server, web UI, history",
    disable_version_flag = true,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    iperf: IperfArgs,
    /// Show version information and quit
    #[arg(short = 'v', long = "version")]
    version: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the appliance: web UI, JSON API, iperf3 server, history in SQLite
    Daemon(netperfd::cmd::daemon::DaemonArgs),
    /// Read the run history
    Runs(netperfd::cmd::runs::RunsArgs),
    /// Run the UDP ladder of seed 001 (UDP at 100M/400M/1000M, both directions) and record it
    Ladder(netperfd::cmd::ladder::LadderArgs),
    /// Saved test suites: list, show, run NAME --peer HOST, delete, import, export, result
    Suite(netperfd::cmd::suite::SuiteArgs),
    /// Runs or suites side by side: --runs 1,2 | --suites 4,5, as text, Markdown or CSV
    Compare(netperfd::cmd::suite::CompareArgs),
    /// Read a password on stdin and print its argon2 hash (for admin_password_hash)
    HashPassword,
    /// How this binary was built: version, target, the bundled SQLite and its compile options
    BuildInfo,
    /// Board control: ports, addresses, links, default gateway, forwarding/NAT, CPU governor
    Net(netperfd::cmd::net::NetArgs),
    /// Download an http:// URL over N connections (axel-style ranges) and record the goodput
    HttpGet(netperfd::cmd::http_get::HttpGetArgs),
    /// Several ports at once: iperf3 legs, each bound to its board port, started together
    Multi(netperfd::cmd::multi::MultiArgs),
    /// Peer agent for forwarding runs: lets a board run iperf3 tests from this PC (token needed)
    Peer(netperfd::peer::agent::PeerArgs),
    /// Forwarding run: a peer agent tests through the board while the board records its ports
    Forward(netperfd::cmd::forward::ForwardArgs),
    /// Monitor-only run: record the board's ports (rates, conntrack, CPU) until stopped
    Monitor(netperfd::cmd::forward::MonitorArgs),
    /// RFC 2544 benchmark of the board as the DUT: throughput per frame size, frame loss rate
    Rfc2544(netperfd::cmd::forward::Rfc2544Args),
    /// Latency under load: ICMP probes every 10 ms, idle → TCP load (up/down/both) → idle
    Latency(netperfd::cmd::latency::LatencyArgs),
}

fn main() {
    // Started by udhcpc as its script (a port by DHCP): handle the event and exit.
    if let Some(code) = netperfd::board::dhcp::udhcpc_hook_main() {
        std::process::exit(code);
    }
    let args = Cli::parse();
    if args.version {
        println!("{}", netperfd::engine::report::version_string());
        return;
    }
    let code = match args.cmd {
        Some(Cmd::Daemon(d)) => netperfd::cmd::daemon::main(d),
        Some(Cmd::Runs(r)) => netperfd::cmd::runs::main(r),
        Some(Cmd::Ladder(l)) => netperfd::cmd::ladder::main(l),
        Some(Cmd::Suite(a)) => netperfd::cmd::suite::main(a),
        Some(Cmd::Compare(a)) => netperfd::cmd::suite::compare_main(a),
        Some(Cmd::HashPassword) => netperfd::web::auth::hash_password_cli(),
        Some(Cmd::BuildInfo) => build_info(),
        Some(Cmd::Net(n)) => netperfd::cmd::net::main(n),
        Some(Cmd::HttpGet(h)) => netperfd::cmd::http_get::main(h),
        Some(Cmd::Multi(m)) => netperfd::cmd::multi::main(m),
        Some(Cmd::Peer(p)) => {
            netperfd::peer::agent::main(p, Some(netperfd::runs::drops::host_drops()))
        }
        Some(Cmd::Forward(f)) => netperfd::cmd::forward::forward_main(f),
        Some(Cmd::Monitor(m)) => netperfd::cmd::forward::monitor_main(m),
        Some(Cmd::Latency(l)) => netperfd::cmd::latency::main(l),
        Some(Cmd::Rfc2544(r)) => netperfd::cmd::forward::rfc2544_main(r),
        None => iperf_main(args.iperf),
    };
    std::process::exit(code);
}

fn iperf_main(a: IperfArgs) -> i32 {
    if a.client.is_none() && !a.server {
        eprintln!("netperfd: parameter error - must either be a client (-c) or server (-s)\n\nUsage: netperfd [-s|-c host] [options]\n       netperfd daemon | runs | ladder | suite | compare | hash-password\nTry 'netperfd --help' for more information.");
        return 1;
    }
    if a.server && a.client.is_some() {
        eprintln!("netperfd: parameter error - cannot be both server and client");
        return 1;
    }
    if a.server && a.daemon {
        if let Err(e) = nix::unistd::daemon(false, false) {
            eprintln!("netperfd: error - unable to become a daemon: {e}");
            return 1;
        }
    }
    netperfd::logging::init(std::env::var("RUST_LOG").ok().as_deref().unwrap_or("warn"));
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("netperfd: error - {e}");
            return 1;
        }
    };
    if a.iperf2 {
        return rt.block_on(async move {
            match a.client.clone() {
                Some(host) => netperfd::cmd::iperf2::run_client(&a, &host).await,
                None => netperfd::cmd::iperf2::run_server(&a).await,
            }
        });
    }
    rt.block_on(async move {
        match a.client.clone() {
            Some(host) => iperf::run_client(&a, &host).await,
            None => iperf::run_server(&a).await,
        }
    })
}

/// `netperfd build-info`: one `key: value` line each (scripts/check-build-envs.py reads the
/// `sqlite version:` and `sqlite option:` lines). Exit code 1 when SQLite cannot be queried
/// or stdout cannot be written (a closed pipe ends the listing quietly).
fn build_info() -> i32 {
    use std::io::Write;
    let mut lines = vec![
        netperfd::engine::report::version_string(),
        format!(
            "target: {}-{}",
            std::env::consts::ARCH,
            std::env::consts::OS
        ),
    ];
    let code = match netperfd::store::sqlite_build_info() {
        Ok((version, options)) => {
            lines.push(format!("sqlite version: {version}"));
            lines.extend(options.into_iter().map(|o| format!("sqlite option: {o}")));
            0
        }
        Err(e) => {
            eprintln!("netperfd: cannot query the bundled SQLite: {e}");
            1
        }
    };
    let mut out = std::io::stdout().lock();
    for l in lines {
        if writeln!(out, "{l}").is_err() {
            return 1;
        }
    }
    code
}
