//! Logging setup: tracing to stderr at one level — `RUST_LOG` (error, warn, info, debug,
//! trace) or the caller's default. (A plain level, not per-target filters: the env-filter
//! feature would pull a regex engine into a binary that must stay small on the boards.)
//! Every line written also goes to a bounded in-memory ring ([`recent`]) that the
//! Diagnostics page shows: the daemon's recent log without a shell.

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
        .with_writer(|| Escaping(Tee(std::io::stderr())))
        .with_target(false)
        // No colours: the escaping writer would show their escape codes as text.
        .with_ansi(false)
        .try_init();
}

/// Log lines the ring keeps ([`recent`]); older ones are dropped first.
pub const RING_LINES: usize = 2000;
/// Bytes the ring keeps at most (a line longer than 4 KiB is cut).
pub const RING_BYTES: usize = 1 << 20;
const RING_LINE_MAX: usize = 4096;

struct Ring {
    lines: std::collections::VecDeque<String>,
    bytes: usize,
}

static RING: std::sync::Mutex<Ring> = std::sync::Mutex::new(Ring {
    lines: std::collections::VecDeque::new(),
    bytes: 0,
});

/// Keep `line` (as written: escaped, with its line end) in the ring.
pub fn remember(line: &[u8]) {
    let mut s = String::from_utf8_lossy(line)
        .trim_end_matches('\n')
        .to_string();
    if s.len() > RING_LINE_MAX {
        let mut cut = RING_LINE_MAX;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    if s.is_empty() {
        return;
    }
    let mut r = RING.lock().unwrap_or_else(|p| p.into_inner());
    r.bytes += s.len();
    r.lines.push_back(s);
    while r.lines.len() > RING_LINES || r.bytes > RING_BYTES {
        match r.lines.pop_front() {
            Some(old) => r.bytes -= old.len(),
            None => break,
        }
    }
}

/// Severity of a ring line ("ERROR", "WARN", "INFO", "DEBUG", "TRACE"): the first such word
/// among the line's first two (after the time stamp).
pub fn line_level(line: &str) -> Option<&'static str> {
    line.split_whitespace().take(2).find_map(|w| {
        ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"]
            .into_iter()
            .find(|l| *l == w)
    })
}

fn rank(level: &str) -> u8 {
    match level.to_ascii_uppercase().as_str() {
        "ERROR" => 1,
        "WARN" | "WARNING" => 2,
        "INFO" => 3,
        "DEBUG" => 4,
        _ => 5,
    }
}

/// The newest `max` ring lines, oldest first, at `level` or more severe (`None`: all) and
/// containing `text` (case-insensitive; `None` or empty: all).
pub fn recent(level: Option<&str>, text: Option<&str>, max: usize) -> Vec<String> {
    let need = level.filter(|l| !l.is_empty()).map(rank).unwrap_or(5);
    let text = text
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty());
    let r = RING.lock().unwrap_or_else(|p| p.into_inner());
    let mut out: Vec<String> = r
        .lines
        .iter()
        .rev()
        .filter(|l| line_level(l).map(rank).unwrap_or(5) <= need)
        .filter(|l| text.as_ref().is_none_or(|t| l.to_lowercase().contains(t)))
        .take(max)
        .cloned()
        .collect();
    out.reverse();
    out
}

/// Writes to the inner writer and keeps each write (one log line) in the ring.
pub struct Tee<W: std::io::Write>(pub W);

impl<W: std::io::Write> std::io::Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        remember(buf);
        self.0.write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Warnings one peer address may cause per [`PEER_WARN_WINDOW`]; the rest are counted and
/// reported with the next warning after the window (field `suppressed`).
pub const PEER_WARNINGS: u32 = 10;
/// Window of [`PEER_WARNINGS`].
pub const PEER_WARN_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

static PEER_WARN: std::sync::Mutex<Option<PeerWarn>> = std::sync::Mutex::new(None);

type PeerWarn = std::collections::HashMap<std::net::IpAddr, (std::time::Instant, u32, u64)>;

/// Whether a warning about `ip` may be logged now: `Some(n)` with the number of warnings
/// about it suppressed since the last one logged, `None` to stay quiet (it is counted).
/// Keeps at most 4096 addresses (older windows are dropped first).
pub fn peer_budget(ip: std::net::IpAddr) -> Option<u64> {
    let mut g = PEER_WARN.lock().unwrap_or_else(|p| p.into_inner());
    let m = g.get_or_insert_with(Default::default);
    let now = std::time::Instant::now();
    if m.len() >= 4096 && !m.contains_key(&ip) {
        m.retain(|_, (t, _, _)| now.duration_since(*t) < PEER_WARN_WINDOW);
        if m.len() >= 4096 {
            m.clear();
        }
    }
    let e = m.entry(ip).or_insert((now, 0, 0));
    if now.duration_since(e.0) >= PEER_WARN_WINDOW {
        e.0 = now;
        e.1 = 0;
    }
    if e.1 < PEER_WARNINGS {
        e.1 += 1;
        Some(std::mem::take(&mut e.2))
    } else {
        e.2 += 1;
        None
    }
}

/// `tracing::warn!` about a peer, rate-limited per address with [`peer_budget`]:
/// `peer_warn!(ip, %peer, "closing connection: {why}")`.
#[macro_export]
macro_rules! peer_warn {
    ($ip:expr, $($arg:tt)+) => {
        match $crate::logging::peer_budget($ip) {
            Some(0) => tracing::warn!($($arg)+),
            Some(n) => tracing::warn!(suppressed = n, $($arg)+),
            None => {}
        }
    };
}

/// Window of [`rate_budget`]: one warning per key per minute.
pub const RATE_WARN_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

static RATE_WARN: std::sync::Mutex<Option<RateWarn>> = std::sync::Mutex::new(None);

type RateWarn = std::collections::HashMap<&'static str, (std::time::Instant, u64)>;

/// Whether a warning of kind `key` (a fixed string, e.g. "accept") may be logged now: at
/// most one per [`RATE_WARN_WINDOW`]. `Some(n)` with the number suppressed since the last
/// one, `None` to stay quiet (it is counted).
pub fn rate_budget(key: &'static str) -> Option<u64> {
    let mut g = RATE_WARN.lock().unwrap_or_else(|p| p.into_inner());
    let m = g.get_or_insert_with(Default::default);
    let now = std::time::Instant::now();
    match m.get_mut(key) {
        Some((t, n)) if now.duration_since(*t) < RATE_WARN_WINDOW => {
            *n += 1;
            None
        }
        Some((t, n)) => {
            *t = now;
            Some(std::mem::take(n))
        }
        None => {
            m.insert(key, (now, 0));
            Some(0)
        }
    }
}

/// `tracing::warn!` at most once a minute per kind (see [`rate_budget`]), for failures that
/// can repeat in a tight loop (accept failing with EMFILE): `rate_warn!("accept", "accept
/// failed: {e}")`. The next line logged says how many were suppressed.
#[macro_export]
macro_rules! rate_warn {
    ($key:expr, $($arg:tt)+) => {
        match $crate::logging::rate_budget($key) {
            Some(0) => tracing::warn!($($arg)+),
            Some(n) => tracing::warn!(suppressed = n, $($arg)+),
            None => {}
        }
    };
}

/// Writes log lines with control characters escaped (`\n` → `\\n`, other C0 bytes and DEL
/// → `\\xNN`), except the newline that ends the line: text a client chose (a congestion
/// name, a User-Agent) cannot forge a log line or send terminal escapes.
pub struct Escaping<W: std::io::Write>(pub W);

/// `line` with control characters escaped as [`Escaping`] writes them.
pub fn escape_controls(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len() + 8);
    let last = line.len().saturating_sub(1);
    for (i, &b) in line.iter().enumerate() {
        match b {
            b'\n' if i == last => out.push(b),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.push(b),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

impl<W: std::io::Write> std::io::Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(&escape_controls(buf))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_recent_lines_and_filters_them() {
        remember(b"2026-01-01T00:00:00Z  INFO ring-test started run 1\n");
        remember(b"2026-01-01T00:00:01Z  WARN ring-test peer went away\n");
        remember(b"2026-01-01T00:00:02Z ERROR ring-test disk full\n");
        let all = recent(None, Some("RING-TEST"), 10);
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all[0].ends_with("started run 1"), "{all:?}");
        assert_eq!(recent(Some("warn"), Some("ring-test"), 10).len(), 2);
        assert_eq!(recent(Some("error"), Some("ring-test"), 10).len(), 1);
        assert_eq!(recent(None, Some("ring-test"), 1)[0], all[2]);
        // Bounded: many lines later the ring holds at most RING_LINES.
        for i in 0..RING_LINES + 50 {
            remember(format!("2026-01-01T00:00:03Z  INFO filler {i}\n").as_bytes());
        }
        assert!(recent(None, Some("ring-test"), 10).is_empty());
        assert_eq!(recent(None, None, usize::MAX).len(), RING_LINES);
    }

    #[test]
    fn rate_budget_allows_one_warning_per_window_and_counts_the_rest() {
        assert_eq!(rate_budget("test-key"), Some(0));
        for _ in 0..5 {
            assert_eq!(rate_budget("test-key"), None);
        }
        // Another key has its own budget.
        assert_eq!(rate_budget("test-other"), Some(0));
    }

    #[test]
    fn control_characters_are_escaped_but_the_line_end_is_kept() {
        let line = b"WARN bad congestion 'cubic\nINFO forged\x1b[31m'\n";
        assert_eq!(
            String::from_utf8(escape_controls(line)).unwrap(),
            "WARN bad congestion 'cubic\\nINFO forged\\x1b[31m'\n"
        );
    }

    #[test]
    fn warnings_per_peer_are_limited_and_counted() {
        let ip: std::net::IpAddr = "192.0.2.77".parse().unwrap();
        let other: std::net::IpAddr = "192.0.2.78".parse().unwrap();
        for _ in 0..PEER_WARNINGS {
            assert_eq!(peer_budget(ip), Some(0));
        }
        for _ in 0..100 {
            assert_eq!(peer_budget(ip), None);
        }
        assert_eq!(peer_budget(other), Some(0));
    }
}
