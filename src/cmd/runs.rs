//! `netperfd runs list|show|export|export-history|import-history`: the history from the command line (same SQLite file as
//! the daemon; safe while it runs, thanks to WAL).

use crate::model::display;
use crate::model::time::fmt_time;
use crate::results::export::{write_run_csv, write_run_json};
use crate::store::{RunFilter, Store};
use std::io::Write;
use std::path::PathBuf;

/// `netperfd runs …`
#[derive(clap::Args, Debug)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub cmd: RunsCmd,
    /// Data directory
    #[arg(long, global = true, value_name = "DIR", default_value = "./data")]
    pub data: PathBuf,
    /// Print JSON instead of a table
    #[arg(long, global = true)]
    pub json: bool,
}

/// The history commands.
#[derive(clap::Subcommand, Debug)]
pub enum RunsCmd {
    /// List runs, newest first
    List {
        /// Only runs with this status (running, completed, failed, aborted)
        #[arg(long)]
        status: Option<String>,
        /// Only runs whose peer contains this text
        #[arg(long)]
        peer: Option<String>,
        /// Only runs on this board port (interface or address)
        #[arg(long)]
        port: Option<String>,
        /// Only runs of this kind (iperf3, iperf2, multi, forward, monitor, http-serve,
        /// http-get, tcp-sink, tcp-source, latency, rfc2544)
        #[arg(long)]
        kind: Option<String>,
        /// At most this many runs
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show one run: summary and intervals
    Show { id: i64 },
    /// Export one run as iperf3 JSON (default) or CSV
    Export {
        id: i64,
        /// json or csv
        #[arg(long, default_value = "json")]
        format: String,
    },
    /// Write the whole ended history (runs, suite runs, suite definitions) as one history
    /// file for another netperfd ("-" for stdout)
    ExportHistory { file: PathBuf },
    /// Add a history file from another netperfd (all or nothing; runs already here are not
    /// added again)
    ImportHistory { file: PathBuf },
}

/// Run the command; returns the exit code.
pub fn main(a: RunsArgs) -> i32 {
    // Its output is often cut short (`netperfd runs list | head`): end quietly then.
    crate::engine::sys::default_sigpipe();
    match run(a) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("netperfd: {e}");
            1
        }
    }
}

fn run(a: RunsArgs) -> Result<(), String> {
    if let RunsCmd::ImportHistory { file } = &a.cmd {
        return import_history(&a.data, file, a.json);
    }
    if !a.data.join("netperfd.sqlite").exists() {
        return Err(format!(
            "no history in {} (netperfd.sqlite not found; use --data DIR)",
            a.data.display()
        ));
    }
    let store = Store::open_dir(&a.data).map_err(|e| e.to_string())?;
    match a.cmd {
        RunsCmd::List {
            status,
            peer,
            port,
            kind,
            limit,
        } => {
            let filter = RunFilter {
                status,
                peer,
                port,
                kind,
                limit: Some(limit),
                ..Default::default()
            };
            list(&store, filter, a.json)?;
        }
        RunsCmd::Show { id } => show(&store, id, a.json)?,
        RunsCmd::Export { id, format } => export(&store, id, &format)?,
        RunsCmd::ExportHistory { file } => export_history(&store, &file)?,
        RunsCmd::ImportHistory { .. } => {}
    }
    Ok(())
}

/// `runs list`: the runs `filter` picks (its kind and status checked first), newest first,
/// as a table or (`json`) a JSON array.
fn list(store: &Store, filter: RunFilter, json: bool) -> Result<(), String> {
    if let Some(k) = &filter.kind {
        if crate::model::RunKind::parse(k).is_none() {
            let words: Vec<&str> = crate::model::RunKind::ALL
                .iter()
                .map(|k| k.as_str())
                .collect();
            return Err(format!(
                "kind must be one of {}, got '{k}'",
                words.join(", ")
            ));
        }
    }
    if let Some(s) = &filter.status {
        if crate::model::RunStatus::parse(s).is_none() {
            return Err(format!(
                "status must be running, completed, failed or aborted, got '{s}'"
            ));
        }
    }
    let rows = store.list_runs(&filter).map_err(|e| e.to_string())?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "{:>5}  {:<23}  {:<10}  {:<6}  {:<22}  {:<12}  {:>16}  {:>16}  {:>14}  STATUS",
        "ID", "STARTED", "KIND", "ROLE", "PEER", "TEST", "SENDER", "RECEIVER", "RETR/LOSS"
    );
    for r in rows {
        println!(
            "{:>5}  {:<23}  {:<10}  {:<6}  {:<22}  {:<12}  {:>16}  {:>16}  {:>14}  {}",
            r.id,
            fmt_time(r.started_at),
            r.kind.as_str(),
            r.role,
            format!("{}:{}", r.peer_host, r.peer_port),
            r.direction,
            r.sender_bps
                .map(display::rate)
                .unwrap_or_else(|| "-".into()),
            r.receiver_bps
                .map(display::rate)
                .unwrap_or_else(|| "-".into()),
            crate::results::view::retr_or_loss(&r).unwrap_or_else(|| "-".into()),
            r.status
        );
    }
    Ok(())
}

/// `runs show ID`: the run's summary and intervals as text, or (`json`) the run, its view,
/// board counters and loss ledger, streams and intervals.
fn show(store: &Store, id: i64, json: bool) -> Result<(), String> {
    let run = store
        .get_run(id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no run {id}"))?;
    let rep = store.report(id).map_err(|e| e.to_string())?;
    if json {
        let (board, ledger) = store.run_board(id).map_err(|e| e.to_string())?;
        let v = serde_json::json!({
            "run": run,
            "view": crate::results::view::view(&run),
            "loss_ledger": ledger,
            "board": board,
            "streams": store.streams(id).map_err(|e| e.to_string())?,
            "intervals": store.intervals(id).map_err(|e| e.to_string())?,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    print!("{}", crate::results::view::view_text(&run));
    if run.kind.has_text_summary() && !run.summary.is_null() {
        print!("{}", crate::results::text::summary_text(&run));
    }
    match rep {
        Some(r) => {
            print!("{}", crate::engine::iperf3::server::server_text(&r));
        }
        None => {
            for i in store.intervals(id).map_err(|e| e.to_string())? {
                println!(
                    "[{:3}] {:6.2}-{:<6.2} sec  {}  {}",
                    i.socket,
                    i.start,
                    i.end,
                    display::size(i.bytes as f64),
                    display::rate(i.bits_per_second)
                );
            }
        }
    }
    Ok(())
}

/// `runs export ID --format json|csv`: the run streamed to stdout as iperf3 JSON or CSV.
fn export(store: &Store, id: i64, format: &str) -> Result<(), String> {
    let run = store
        .get_run(id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no run {id}"))?;
    let rep = store.report(id).map_err(|e| e.to_string())?;
    // Streamed to stdout: the intervals are read one row at a time.
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    match format {
        "json" => {
            write_run_json(&mut w, store, &run, rep.as_ref(), true)?;
            writeln!(w).map_err(|e| e.to_string())?;
        }
        "csv" => write_run_csv(&mut w, store, &run, rep.as_ref())?,
        f => return Err(format!("format must be json or csv, got '{f}'")),
    }
    w.flush().map_err(|e| e.to_string())
}

/// `runs export-history FILE`: the ended history as one history file, to stdout for `-`.
fn export_history(store: &Store, file: &std::path::Path) -> Result<(), String> {
    let label = crate::runs::suites::run::board_label();
    if file.as_os_str() == "-" {
        let out = std::io::stdout();
        let mut w = std::io::BufWriter::new(out.lock());
        store
            .export_history_to(&mut w, &label)
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    // Written beside the target and renamed: a failed export leaves no half file.
    let tmp = file.with_extension("part");
    let f =
        std::fs::File::create(&tmp).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    let mut w = std::io::BufWriter::new(f);
    let r = store.export_history_to(&mut w, &label);
    let (runs, suites) = match r {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("cannot write {}: {e}", file.display()));
        }
    };
    drop(w);
    std::fs::rename(&tmp, file).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "wrote {} ({runs} runs, {suites} suite runs, {len} bytes)",
        file.display()
    );
    Ok(())
}

/// `runs import-history FILE`: the same checks and transaction as `POST /api/import`, with
/// the default size limit of the daemon's `import_max_bytes`.
fn import_history(
    data: &std::path::Path,
    file: &std::path::Path,
    json: bool,
) -> Result<(), String> {
    let max = crate::config::Config::default().import_max_bytes;
    let len = std::fs::metadata(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?
        .len();
    if len > max as u64 {
        return Err(format!(
            "{} is {len} bytes, larger than {max}; nothing was imported",
            file.display()
        ));
    }
    let f =
        std::fs::File::open(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let store = Store::open_dir(data).map_err(|e| e.to_string())?;
    let s = store
        .import_history_from(f, max as u64)
        .map_err(|e| format!("{e}; nothing was imported"))?;
    if json {
        println!("{}", serde_json::to_string(&s).map_err(|e| e.to_string())?);
    } else {
        println!(
            "imported from {} ({}): {} runs added, {} already here; {} suite runs added, {} already here; {} suite definitions added",
            s.board_label, s.board_id, s.runs_added, s.runs_present, s.suites_added, s.suites_present, s.defs_added
        );
    }
    Ok(())
}
