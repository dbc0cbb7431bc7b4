//! netperfd entry point: the iperf3-compatible client/server (`-c` / `-s`), the appliance
//! (`daemon`), history (`runs`) and `hash-password`.
use clap::{Parser, Subcommand};
use netperfd::cli::{self, IperfArgs};

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
    Daemon(netperfd::daemon::DaemonArgs),
    /// Read the run history
    Runs(netperfd::runs_cli::RunsArgs),
    /// Run the UDP ladder of seed 001 (UDP at 100M/400M/1000M, both directions) and record it
    Ladder(netperfd::ladder_cli::LadderArgs),
    /// Saved test suites: list, show, run NAME --peer HOST, delete, import, export, result
    Suite(netperfd::suite_cli::SuiteArgs),
    /// Runs or suites side by side: --runs 1,2 | --suites 4,5, as text, Markdown or CSV
    Compare(netperfd::suite_cli::CompareArgs),
    /// Read a password on stdin and print its argon2 hash (for admin_password_hash)
    HashPassword,
    /// Board control: ports, addresses, links, default gateway, forwarding/NAT, CPU governor
    Net(netperfd::net_cli::NetArgs),
    /// Download an http:// URL over N connections (axel-style ranges) and record the goodput
    HttpGet(netperfd::http_cli::HttpGetArgs),
    /// Several ports at once: iperf3 legs, each bound to its board port, started together
    Multi(netperfd::multi_cli::MultiArgs),
    /// Peer agent for forwarding runs: lets a board run iperf3 tests from this PC (token needed)
    Peer(netperfd::peer::agent::PeerArgs),
    /// Forwarding run: a peer agent tests through the board while the board records its ports
    Forward(netperfd::forward_cli::ForwardArgs),
    /// Monitor-only run: record the board's ports (rates, conntrack, CPU) until stopped
    Monitor(netperfd::forward_cli::MonitorArgs),
}

fn main() {
    let args = Cli::parse();
    if args.version {
        println!("{}", netperfd::engine::report::version_string());
        return;
    }
    let code = match args.cmd {
        Some(Cmd::Daemon(d)) => netperfd::daemon::main(d),
        Some(Cmd::Runs(r)) => netperfd::runs_cli::main(r),
        Some(Cmd::Ladder(l)) => netperfd::ladder_cli::main(l),
        Some(Cmd::Suite(a)) => netperfd::suite_cli::main(a),
        Some(Cmd::Compare(a)) => netperfd::suite_cli::compare_main(a),
        Some(Cmd::HashPassword) => netperfd::web::auth::hash_password_cli(),
        Some(Cmd::Net(n)) => netperfd::net_cli::main(n),
        Some(Cmd::HttpGet(h)) => netperfd::http_cli::main(h),
        Some(Cmd::Multi(m)) => netperfd::multi_cli::main(m),
        Some(Cmd::Peer(p)) => netperfd::peer::agent::main(p),
        Some(Cmd::Forward(f)) => netperfd::forward_cli::forward_main(f),
        Some(Cmd::Monitor(m)) => netperfd::forward_cli::monitor_main(m),
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
                Some(host) => netperfd::iperf2_cli::run_client(&a, &host).await,
                None => netperfd::iperf2_cli::run_server(&a).await,
            }
        });
    }
    rt.block_on(async move {
        match a.client.clone() {
            Some(host) => cli::run_client(&a, &host).await,
            None => cli::run_server(&a).await,
        }
    })
}
