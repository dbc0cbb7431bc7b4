//! `netperfd ladder -c HOST`: the UDP ladder of seed 001 from the command line — UDP at each
//! bitrate, board sending then receiving — recorded in the history (`--data DIR`) as a suite
//! and printed as one table.

use crate::runs::context::RunContext;
use crate::spec::test::TestSpec;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `netperfd ladder`.
#[derive(clap::Args, Debug)]
pub struct LadderArgs {
    /// Peer running iperf3 -s (or netperfd -s)
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub host: String,
    /// Peer port
    #[arg(short = 'p', long = "port", default_value_t = 5201)]
    pub port: u16,
    /// Bitrates, comma-separated
    #[arg(long, default_value = "100M,400M,1000M")]
    pub rates: String,
    /// Seconds per test
    #[arg(short = 't', long = "time", default_value_t = 10)]
    pub time: u32,
    /// Datagram size in bytes (default: the path MSS)
    #[arg(short = 'l', long = "length")]
    pub length: Option<String>,
    /// Board port (interface) to bind every socket to
    #[arg(long = "bind-dev")]
    pub bind_dev: Option<String>,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
    /// Print the rows as JSON
    #[arg(long)]
    pub json: bool,
}

/// Run the ladder; returns the exit code (1 if any test failed).
pub fn main(a: LadderArgs) -> i32 {
    crate::cmd::iperf::run_command(run(a))
}

async fn run(a: LadderArgs) -> Result<i32, String> {
    let rates = crate::spec::suite::parse_rates(&a.rates)?;
    let length = a.length.as_deref().map(|l| {
        crate::engine::report::parse_suffixed(l, false).map_err(|e| format!("length: {e}"))
    });
    let base = TestSpec {
        port: Some(a.port),
        duration: Some(a.time.into()),
        length: length.transpose()?,
        bind: a.bind_dev.clone(),
        ..TestSpec::new(a.host.clone())
    };
    let specs = crate::runs::suites::ladder_specs(&base, &rates, &crate::board::ports())?;
    let store = Arc::new(Store::open_dir(&a.data).map_err(|e| e.to_string())?);
    let hub = RunContext::new(store.clone());
    let n = specs.len();
    if !a.json {
        println!(
            "UDP ladder against {}:{}: {} tests of {} s (sending, then receiving, per bitrate)",
            a.host, a.port, n, a.time
        );
    }
    let sid = crate::runs::suites::run::start_suite(&hub, crate::spec::suite::UDP_LADDER, specs)?;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let (s, _) = store
            .suite(sid)
            .map_err(|e| e.to_string())?
            .ok_or("the suite vanished")?;
        if s.status != crate::model::RunStatus::Running {
            break;
        }
    }
    let (s, runs) = store
        .suite(sid)
        .map_err(|e| e.to_string())?
        .ok_or("the suite vanished")?;
    let rows = crate::runs::suites::ladder_rows(&runs);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"suite": s, "rows": rows}))
                .map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", crate::runs::suites::ladder_text(&rows));
        println!("Suite {sid} recorded in {}", store.path().display());
        for r in runs.iter().filter(|r| r.error.is_some()) {
            println!("run {}: {}", r.id, r.error.clone().unwrap_or_default());
        }
    }
    Ok(if s.status == crate::model::RunStatus::Completed {
        0
    } else {
        1
    })
}
