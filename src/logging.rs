//! Logging setup: tracing to stderr at one level — `RUST_LOG` (error, warn, info, debug,
//! trace) or the caller's default. (A plain level, not per-target filters: the env-filter
//! feature would pull a regex engine into a binary that must stay small on the boards.)

use tracing_subscriber::filter::LevelFilter;

/// Initialise tracing once; `default` is a level name such as "info".
pub fn init(default: &str) {
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.trim().parse::<LevelFilter>().ok())
        .or_else(|| default.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
