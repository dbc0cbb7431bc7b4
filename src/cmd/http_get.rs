//! `netperfd http-get URL -n 10`: the board downloads over N connections (axel-style byte
//! ranges), prints the 1 s intervals and the goodput, and records the run (kind `http-get`)
//! in the history (`--data DIR`). Exit code 0 only when the whole body arrived.

use crate::engine::http::GetSpec;
use crate::model::display;
use crate::results::traffic_summary::HttpGetSummary;
use crate::runs::context::RunContext;
use crate::runs::registry::LiveEvent;
use crate::store::{RunRow, Store};
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `netperfd http-get`.
#[derive(clap::Args, Debug)]
pub struct HttpGetArgs {
    /// http:// URL of the file to download (https is not supported)
    pub url: String,
    /// Parallel connections (byte ranges), 1..64
    #[arg(short = 'n', long = "connections", default_value_t = 4)]
    pub connections: u32,
    /// Give up after this many seconds
    #[arg(short = 't', long = "timeout", default_value_t = 600)]
    pub timeout: u32,
    /// Board port (interface) to bind every socket to
    #[arg(long = "bind-dev")]
    pub bind_dev: Option<String>,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
    /// Print the stored run as JSON at the end instead of text
    #[arg(long)]
    pub json: bool,
}

/// Run the download; returns the exit code.
pub fn main(a: HttpGetArgs) -> i32 {
    crate::cmd::iperf::run_command(run(a))
}

async fn run(a: HttpGetArgs) -> Result<i32, String> {
    let spec = GetSpec {
        url: a.url.clone(),
        connections: a.connections,
        timeout_secs: a.timeout,
        bind_dev: a.bind_dev.clone().filter(|d| !d.is_empty()),
    };
    // Refuse bad input before touching the history.
    spec.validate()?;
    let store = Arc::new(Store::open_dir(&a.data).map_err(|e| e.to_string())?);
    let hub = RunContext::new(store.clone());
    let (id, handle) = crate::runs::traffic::start_http_get(&hub, spec)?;
    let mut rx = hub.registry().subscribe(id);
    if !a.json {
        println!("Downloading {} over {} connection(s)", a.url, a.connections);
    }
    if let Some(rx) = rx.as_mut() {
        while let Ok(ev) = rx.recv().await {
            match ev {
                LiveEvent::Interval { record, .. } if !a.json => {
                    let bytes: u64 = record.streams.iter().map(|s| s.bytes).sum();
                    let rate: f64 = record.streams.iter().map(|s| s.bits_per_second).sum();
                    if let Some(s) = record.streams.first() {
                        println!(
                            "[SUM] {:6.2}-{:<6.2} sec  {:>12}  {:>16}  ({} connection(s))",
                            s.start,
                            s.end,
                            display::size(bytes as f64),
                            display::rate(rate),
                            record.streams.len()
                        );
                    }
                }
                LiveEvent::Done { .. } => break,
                _ => {}
            }
        }
    }
    let status = handle.await.map_err(|e| e.to_string())?;
    let run = store
        .get_run(id)
        .map_err(|e| e.to_string())?
        .ok_or("the run vanished")?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&run).map_err(|e| e.to_string())?
        );
    } else {
        if let Some(s) = HttpGetSummary::of_summary(&run.summary) {
            print_result(&run, &s);
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
    Ok(if status == crate::model::RunStatus::Completed {
        0
    } else {
        1
    })
}

/// Print a download's result: each connection, then the total (bytes, size, seconds, goodput).
fn print_result(run: &RunRow, s: &HttpGetSummary) {
    for c in &s.per_connection {
        println!(
            "[{:>3}] {:>12}  {:>16}  in {:.2} s",
            c.id,
            display::size(c.bytes as f64),
            display::rate(c.bits_per_second),
            c.seconds
        );
    }
    println!(
        "Total: {} of {} in {:.2} s, goodput {}",
        display::size(run.bytes.unwrap_or(0) as f64),
        display::size(s.size.unwrap_or(0) as f64),
        s.seconds.unwrap_or(0.0),
        run.receiver_bps
            .map(display::rate)
            .unwrap_or_else(|| "—".into())
    );
}
