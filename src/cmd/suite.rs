//! `netperfd suite …` (saved suite definitions: list, show, run, delete, import, export, and a
//! suite run's table) and `netperfd compare` (runs or suites side by side), on the history
//! in `--data DIR`. `suite run` runs the tests in this process and records them like the
//! daemon does.

use crate::model::{RunStatus, StepStatus};
use crate::results::compare::{self, CompareError};
use crate::runs::context::RunContext;
use crate::runs::suites::run;
use crate::spec::suite as def;
use crate::spec::suite::{PlannedRun, RunTarget, SuiteDef};
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// Output formats of tables.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned plain text
    #[default]
    Text,
    /// GitHub-flavoured Markdown table
    Md,
    /// CSV, numbers in base units
    Csv,
    /// JSON
    Json,
}

/// Flags of `netperfd suite`.
#[derive(clap::Args, Debug)]
pub struct SuiteArgs {
    #[command(subcommand)]
    pub cmd: SuiteCmd,
    /// Data directory of the history
    #[arg(long, global = true, default_value = "./data")]
    pub data: PathBuf,
}

/// `netperfd suite` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum SuiteCmd {
    /// List saved suite definitions
    List,
    /// Print a definition's steps (and the tests they expand to)
    Show { name: String },
    /// Run a definition against a peer and print its table. Exit status: 0 PASS (or, without
    /// thresholds, every test completed), 1 FAIL, 2 the suite could not run (unknown suite,
    /// bad arguments, peer unreachable: no test completed, or the suite was stopped)
    Run {
        name: String,
        /// Peer running iperf3 -s
        #[arg(long, short = 'c')]
        peer: String,
        /// Peer port (default: the definition's, else 5201)
        #[arg(long, short = 'p')]
        port: Option<u16>,
        /// Board port (interface) to bind every test to
        #[arg(long = "bind-dev")]
        bind_dev: Option<String>,
        /// Seconds per test for every step (overrides the definition)
        #[arg(long, short = 't')]
        time: Option<u32>,
        /// Board or change under test, shown in tables (default: host name)
        #[arg(long)]
        label: Option<String>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write a JUnit XML report (one testcase per step) to FILE ("-" = stdout)
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Print one <LAVA_SIGNAL_TESTCASE …> line per step (for a LAVA test shell)
        #[arg(long)]
        lava: bool,
        /// rfc2544 steps: the peer agent on PC1, https://HOST:PORT#sha256=FINGERPRINT or
        /// http://HOST:PORT (default: the stored one)
        #[arg(long, value_name = "URL")]
        agent: Option<String>,
        /// rfc2544 steps: file holding the agent's token (or $NETPERFD_PEER_TOKEN; default:
        /// the stored one)
        #[arg(long = "agent-token-file", value_name = "FILE")]
        agent_token_file: Option<PathBuf>,
    },
    /// Delete a definition (its past runs stay in history)
    Delete { name: String },
    /// Print a definition as JSON (for `suite import` on another board)
    Export { name: String },
    /// Store a definition from a JSON file ("-" = stdin)
    Import {
        file: PathBuf,
        /// Replace a definition of the same name
        #[arg(long)]
        replace: bool,
    },
    /// Print the table of a suite run
    Result {
        id: i64,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// Flags of `netperfd compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Run ids, comma-separated
    #[arg(long, conflicts_with = "suites")]
    pub runs: Option<String>,
    /// Suite run ids, comma-separated
    #[arg(long)]
    pub suites: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Suites: one row per suite, one column per test (seed 001's layout)
    #[arg(long)]
    pub boards: bool,
    /// Data directory of the history
    #[arg(long, default_value = "./data")]
    pub data: PathBuf,
}

fn open(data: &std::path::Path) -> Result<Arc<Store>, String> {
    let store = Store::open_dir(data).map_err(|e| e.to_string())?;
    def::seed_builtins(&store)?;
    Ok(Arc::new(store))
}

fn exit(r: Result<i32, String>) -> i32 {
    match r {
        Ok(c) => c,
        Err(e) => {
            eprintln!("netperfd: {e}");
            1
        }
    }
}

fn need(store: &Store, name: &str) -> Result<crate::store::SuiteDefRow, String> {
    def::find(store, name)?
        .ok_or_else(|| format!("no suite definition '{name}' (see 'netperfd suite list')"))
}

/// Exit status of `suite run` when the suite could not run.
const COULD_NOT_RUN: i32 = 2;

/// Run `netperfd suite`; returns the exit code (`suite run`: see [`SuiteCmd::Run`]).
pub fn main(a: SuiteArgs) -> i32 {
    crate::logging::init("warn");
    let run = matches!(a.cmd, SuiteCmd::Run { .. });
    match suite(a) {
        Err(e) if run => {
            eprintln!("netperfd: {e}");
            COULD_NOT_RUN
        }
        r => exit(r),
    }
}

fn suite(a: SuiteArgs) -> Result<i32, String> {
    let store = open(&a.data)?;
    match a.cmd {
        SuiteCmd::List => list(&store),
        SuiteCmd::Show { name } => show(&store, &name),
        SuiteCmd::Delete { name } => {
            let r = need(&store, &name)?;
            store.delete_suite_def(r.id).map_err(|e| e.to_string())?;
            println!("Deleted suite definition '{}'.", r.name);
            Ok(0)
        }
        SuiteCmd::Export { name } => {
            let r = need(&store, &name)?;
            let d = def::from_row(&r)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&d).map_err(|e| e.to_string())?
            );
            Ok(0)
        }
        SuiteCmd::Import { file, replace } => import(&store, &file, replace),
        SuiteCmd::Result { id, format } => {
            let r = crate::results::suite_table::suite_result(&store, id)?
                .ok_or(format!("there is no suite {id}"))?;
            print_suite(&r, format);
            Ok(if r.suite.status == RunStatus::Completed {
                0
            } else {
                1
            })
        }
        SuiteCmd::Run {
            name,
            peer,
            port,
            bind_dev,
            time,
            label,
            format,
            junit,
            lava,
            agent,
            agent_token_file,
        } => {
            let row = need(&store, &name)?;
            let agent_token = match (&agent_token_file, std::env::var_os(crate::peer::TOKEN_ENV)) {
                (None, None) => None,
                (f, _) => Some(crate::peer::token_from(None, f.as_deref())?),
            };
            let t = RunTarget {
                bind: bind_dev,
                label,
                agent,
                agent_token,
                ..run_target(peer, port, time)
            };
            let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
            let out = Outputs {
                format,
                junit,
                lava,
            };
            rt.block_on(run_suite(store, row, t, out, &a.data))
        }
    }
}

/// The target of `suite run -c PEER [-p PORT] [-t SECONDS]`: the port and seconds as clap
/// read them, typed (the planner checks their range: 1..65535, 1..86400 s).
fn run_target(peer: String, port: Option<u16>, time: Option<u32>) -> RunTarget {
    RunTarget {
        host: peer,
        port,
        time,
        ..Default::default()
    }
}

/// `suite list`: one line per saved definition (its steps and the tests they expand to).
fn list(store: &Store) -> Result<i32, String> {
    let defs = store.suite_defs().map_err(|e| e.to_string())?;
    if defs.is_empty() {
        println!("No suite definitions.");
    }
    for r in defs {
        let d = def::from_row(&r);
        let (steps, tests) = match &d {
            Ok(d) => (
                d.steps.len().to_string(),
                d.plan(
                    &RunTarget {
                        host: "peer.invalid".into(),
                        ..Default::default()
                    },
                    &[],
                )
                .map(|p| p.len().to_string())
                .unwrap_or_else(|_| "?".into()),
            ),
            Err(_) => ("?".into(), "?".into()),
        };
        println!(
            "{:>4}  {:<24}  {:>2} steps  {:>3} tests{}",
            r.id,
            r.name,
            steps,
            tests,
            if r.builtin { "  (built-in)" } else { "" }
        );
    }
    Ok(0)
}

/// `suite show NAME`: the definition's steps, as the tests they expand to.
fn show(store: &Store, name: &str) -> Result<i32, String> {
    let r = need(store, name)?;
    let d = def::from_row(&r)?;
    println!(
        "{} (id {}){}",
        d.name,
        r.id,
        if r.builtin { ", built-in" } else { "" }
    );
    if !d.description.is_empty() {
        println!("{}", d.description);
    }
    let t = RunTarget {
        host: "PEER".into(),
        ..Default::default()
    };
    for p in d.plan(&t, &[])? {
        let how = match &p.spec {
            PlannedRun::Iperf3(c) => format!(
                "-t {}{}",
                c.params.time,
                match c.params.window {
                    Some(w) => format!(" -w {w}"),
                    None => String::new(),
                }
            ),
            PlannedRun::Latency(l) => l.command().replace("netperfd latency -c PEER ", ""),
            PlannedRun::Rfc2544(r) => format!(
                "rfc2544 --in {} --out {} --tests {} (about {} s)",
                r.ingress,
                r.egress,
                r.tests.as_deref().unwrap_or("throughput"),
                p.spec.seconds()
            ),
        };
        println!("  step {:>2}: {:<24} {how}", p.step, p.label);
    }
    Ok(0)
}

/// `suite import FILE`: store a definition from a JSON file ("-" = stdin), replacing one of the
/// same name with `replace`.
fn import(store: &Store, file: &std::path::Path, replace: bool) -> Result<i32, String> {
    let body = if file.as_os_str() == "-" {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut s).map_err(|e| e.to_string())?;
        s
    } else {
        std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?
    };
    if body.len() > 256 * 1024 {
        return Err("a suite definition file is at most 256 KiB".into());
    }
    let d = SuiteDef::from_json(&body)?;
    let existing = store
        .suite_def_by_name(d.name.trim())
        .map_err(|e| e.to_string())?;
    let id = match existing {
        Some(r) if replace => def::save(store, Some(r.id), &d)?,
        _ => def::save(store, None, &d)?,
    };
    println!("Stored suite definition '{}' (id {id}).", d.name.trim());
    Ok(0)
}

fn print_suite(r: &crate::results::suite_table::SuiteResult, format: Format) {
    match format {
        Format::Text => {
            let c = compare::suite_column(r);
            println!("{} — {} ({})", r.suite.name, c.title(), r.suite.status);
            print!("{}", compare::suite_grid(r).text());
            for s in r.steps.iter().filter(|s| s.error.is_some()) {
                println!(
                    "run {}: {}",
                    s.run_id.unwrap_or(0),
                    s.error.clone().unwrap_or_default()
                );
            }
            for l in compare::verdict_lines(r) {
                println!("{l}");
            }
        }
        Format::Md => print!("{}", compare::suite_markdown(r)),
        Format::Csv => print!("{}", compare::suite_csv(r)),
        Format::Json => println!("{}", serde_json::to_string_pretty(r).unwrap_or_default()),
    }
}

/// What `suite run` writes besides its table.
struct Outputs {
    format: Format,
    /// JUnit XML file ("-" = stdout).
    junit: Option<PathBuf>,
    /// LAVA signal lines on stdout.
    lava: bool,
}

/// The exit status of a finished suite run: 2 when it could not run (stopped, or no test
/// completed — the peer was unreachable or refused), else 0 on PASS / 1 on FAIL, or without
/// thresholds 0 when every test completed and 1 otherwise.
pub(crate) fn exit_code(r: &crate::results::suite_table::SuiteResult) -> i32 {
    if r.suite.status == RunStatus::Aborted
        || !r.steps.iter().any(|s| s.status == StepStatus::Completed)
    {
        return COULD_NOT_RUN;
    }
    match &r.verdict {
        Some(v) if v.pass() => 0,
        Some(_) => 1,
        None if r.suite.status == RunStatus::Completed => 0,
        None => 1,
    }
}

/// Write the JUnit report and the LAVA lines of a finished suite.
fn farm_outputs(r: &crate::results::suite_table::SuiteResult, o: &Outputs) -> Result<(), String> {
    if o.lava {
        for l in crate::results::farm::lava_lines(r) {
            println!("{l}");
        }
    }
    if let Some(f) = &o.junit {
        let host = crate::runs::suites::run::board_label();
        let x = crate::results::farm::junit_xml(r, &host);
        if f.as_os_str() == "-" {
            print!("{x}");
        } else {
            std::fs::write(f, x).map_err(|e| format!("{}: {e}", f.display()))?;
        }
    }
    Ok(())
}

async fn run_suite(
    store: Arc<Store>,
    row: crate::store::SuiteDefRow,
    t: RunTarget,
    out: Outputs,
    data: &std::path::Path,
) -> Result<i32, String> {
    let format = out.format;
    // An rfc2544 step may turn on forwarding with NAT: it needs the board's controller, as
    // `netperfd rfc2544` does.
    let needs_board = def::from_row(&row)
        .is_ok_and(|d| d.steps.iter().any(|s| matches!(s, def::Step::Rfc2544(_))));
    let hub = if needs_board {
        let ctl = crate::board::apply::Controller::new(Some(store.clone()), Some(data));
        RunContext::with_board(store.clone(), ctl)
    } else {
        RunContext::new(store.clone())
    };
    let sid = run::start_def(&hub, &row, &t)?;
    if format == Format::Text {
        println!(
            "Suite '{}' against {}: suite run {sid} (Ctrl-C stops it)",
            row.name, t.host
        );
    }
    let mut shown = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
            _ = tokio::signal::ctrl_c() => {
                let _ = crate::runs::suites::run::stop_suite(&hub, sid);
            }
        }
        let r =
            crate::results::suite_table::suite_result(&store, sid)?.ok_or("the suite vanished")?;
        if format == Format::Text {
            for s in r.steps.iter().skip(shown) {
                if s.status.is_live() {
                    break;
                }
                println!(
                    "  {:>2}/{}  {:<22} {}",
                    s.index,
                    r.steps.len(),
                    s.label,
                    match s.bitrate_bps {
                        Some(b) if s.status == StepStatus::Completed => {
                            crate::model::display::rate(b)
                        }
                        _ => s.status.to_string(),
                    }
                );
                shown += 1;
            }
        }
        // The suite is over once no test of it is live any more.
        if r.suite.status != RunStatus::Running
            && !r.steps.iter().any(|s| s.status == StepStatus::Running)
        {
            print_suite(&r, format);
            if format == Format::Text {
                println!("Recorded in {}", store.path().display());
            }
            let code = exit_code(&r);
            if let Err(e) = farm_outputs(&r, &out) {
                eprintln!("netperfd: {e}");
                return Ok(COULD_NOT_RUN);
            }
            if code == COULD_NOT_RUN {
                eprintln!(
                    "netperfd: suite run {sid} could not run: {}",
                    if r.suite.status == RunStatus::Aborted {
                        "it was stopped".to_string()
                    } else {
                        format!("no test completed (is iperf3 -s running on {}?)", t.host)
                    }
                );
            }
            return Ok(code);
        }
    }
}

/// Run `netperfd compare`; returns the exit code.
pub fn compare_main(a: CompareArgs) -> i32 {
    crate::logging::init("warn");
    exit(compare_cmd(a))
}

fn compare_cmd(a: CompareArgs) -> Result<i32, String> {
    let store = open(&a.data)?;
    let e = |e: CompareError| e.to_string();
    let c = match (&a.runs, &a.suites) {
        (Some(r), _) => compare::compare_runs(&store, &compare::parse_ids("runs", r).map_err(e)?),
        (None, Some(s)) => {
            compare::compare_suites(&store, &compare::parse_ids("suites", s).map_err(e)?)
        }
        (None, None) => Err(CompareError::Empty),
    }
    .map_err(e)?;
    match a.format {
        Format::Text => print!("{}", compare::grid(&c, a.boards).text()),
        Format::Md => print!("{}", compare::markdown(&c, a.boards)),
        Format::Csv => print!("{}", compare::csv(&c)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&c).map_err(|e| e.to_string())?
        ),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        a: SuiteArgs,
    }

    /// The target of a `suite run` command line.
    fn target(args: &[&str]) -> RunTarget {
        let cli = Cli::try_parse_from(args).expect("flags");
        let SuiteCmd::Run {
            peer, port, time, ..
        } = cli.a.cmd
        else {
            panic!("not suite run")
        };
        run_target(peer, port, time)
    }

    /// Issue 40 item 2: `suite run -p PORT -t SECONDS` hands its typed flags to the planner
    /// as they are (no text in between): the planned tests carry them, and a value out of
    /// range is refused in a test request's words.
    #[test]
    fn suite_run_passes_its_typed_port_and_time() {
        let t = target(&[
            "x",
            "run",
            "seed 001",
            "-c",
            "192.0.2.2",
            "-p",
            "5202",
            "-t",
            "2",
        ]);
        assert_eq!(
            (t.host.as_str(), t.port, t.time),
            ("192.0.2.2", Some(5202), Some(2))
        );
        let d = def::builtin_defs().remove(0);
        let p = d.plan(&t, &[]).expect("plan");
        assert!(p
            .iter()
            .all(|x| x.client().port == 5202 && x.client().params.time == 2));
        let zero = target(&["x", "run", "s", "-c", "h", "-t", "0"]);
        assert_eq!(
            d.plan(&zero, &[]).unwrap_err(),
            "duration must be 1..86400, got 0"
        );
        let port0 = target(&["x", "run", "s", "-c", "h", "-p", "0"]);
        assert_eq!(
            d.plan(&port0, &[]).unwrap_err(),
            "port must be 1..65535, got 0"
        );
    }
}
