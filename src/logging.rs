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
        .with_writer(LogWriter(std::io::stderr))
        .with_target(false)
        // No colours: the escaping writer would show their escape codes as text.
        .with_ansi(false)
        .try_init();
}

/// Log lines the ring keeps ([`recent`]); older ones are dropped first.
pub const RING_LINES: usize = 2000;
/// Bytes the ring keeps at most (a line longer than 4 KiB is cut).
pub const RING_BYTES: usize = 1 << 20;
/// Audit lines (who started, stopped or changed what: `web::audit`) kept in their own ring,
/// so no flood of other lines pushes them out ([`audit`]).
pub const AUDIT_LINES: usize = 500;
/// Bytes the audit ring keeps at most.
pub const AUDIT_BYTES: usize = 256 << 10;
const RING_LINE_MAX: usize = 4096;

struct Ring {
    /// (sequence number across both rings, line), oldest first.
    lines: std::collections::VecDeque<(u64, String)>,
    bytes: usize,
}

impl Ring {
    const fn new() -> Ring {
        Ring {
            lines: std::collections::VecDeque::new(),
            bytes: 0,
        }
    }

    fn push(&mut self, seq: u64, s: String, max_lines: usize, max_bytes: usize) {
        self.bytes += s.len();
        self.lines.push_back((seq, s));
        while self.lines.len() > max_lines || self.bytes > max_bytes {
            match self.lines.pop_front() {
                Some((_, old)) => self.bytes -= old.len(),
                None => break,
            }
        }
    }
}

static RING: std::sync::Mutex<Ring> = std::sync::Mutex::new(Ring::new());
static AUDIT_RING: std::sync::Mutex<Ring> = std::sync::Mutex::new(Ring::new());
static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    /// Set while [`audit`] logs: the line written goes to the audit ring.
    static AUDITING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `log` (a `tracing` call) with the lines it writes kept in the audit ring instead of
/// the general one: `logging::audit(|| tracing::info!("… started run 3"))`. The line is
/// written to stderr (the journal) as any other.
pub fn audit<R>(log: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            AUDITING.with(|a| a.set(false));
        }
    }
    AUDITING.with(|a| a.set(true));
    let _reset = Reset;
    log()
}

/// Keep `line` (as written: escaped, with its line end) in the ring (the audit ring inside
/// [`audit`]).
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
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if AUDITING.with(|a| a.get()) {
        let mut r = AUDIT_RING.lock().unwrap_or_else(|p| p.into_inner());
        r.push(seq, s, AUDIT_LINES, AUDIT_BYTES);
    } else {
        let mut r = RING.lock().unwrap_or_else(|p| p.into_inner());
        r.push(seq, s, RING_LINES, RING_BYTES);
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
/// containing `text` (case-insensitive; `None` or empty: all). Audit lines ([`audit`]) are
/// never crowded out by newer other lines: the newest matching ones take up to half of `max`
/// (all of it when there are no other lines), the newest other lines the rest.
pub fn recent(level: Option<&str>, text: Option<&str>, max: usize) -> Vec<String> {
    let need = level.filter(|l| !l.is_empty()).map(rank).unwrap_or(5);
    let text = text
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty());
    let pick = |ring: &std::sync::Mutex<Ring>, n: usize| -> Vec<(u64, String)> {
        let r = ring.lock().unwrap_or_else(|p| p.into_inner());
        r.lines
            .iter()
            .rev()
            .filter(|(_, l)| line_level(l).map(rank).unwrap_or(5) <= need)
            .filter(|(_, l)| text.as_ref().is_none_or(|t| l.to_lowercase().contains(t)))
            .take(n)
            .cloned()
            .collect()
    };
    let audit = pick(&AUDIT_RING, max);
    let other = pick(&RING, max);
    let keep_audit = audit
        .len()
        .min(max.saturating_sub(other.len()).max(max / 2));
    let keep_other = other.len().min(max - keep_audit);
    let mut out: Vec<(u64, String)> = audit.into_iter().take(keep_audit).collect();
    out.extend(other.into_iter().take(keep_other));
    out.sort_unstable_by_key(|(seq, _)| *seq);
    out.into_iter().map(|(_, l)| l).collect()
}

/// Target prefix of the HTTP library's own log lines (actix-http).
const HTTP_LIBRARY: &str = "actix_http";

/// The daemon's log writer over `F` (stderr): each line escaped ([`Escaping`]) and kept in the
/// ring ([`Tee`]), except the warnings and errors the HTTP library logs about a client's bad
/// request ("stream error: request parse error: invalid Header provided"), which any client
/// can cause at will on every listener: at most one per [`RATE_WARN_WINDOW`] ([`rate_budget`]
/// "http library"); the rest are dropped, so a flood of bad requests cannot push the
/// Diagnostics log's other lines out (an attacker tryout: 3,000 bad requests in 0.76 s filled
/// the ring).
pub struct LogWriter<F>(pub F);

impl<'a, F, W> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter<F>
where
    F: Fn() -> W + 'a,
    W: std::io::Write,
{
    type Writer = tracing_subscriber::fmt::writer::OptionalWriter<Escaping<Tee<W>>>;

    fn make_writer(&'a self) -> Self::Writer {
        tracing_subscriber::fmt::writer::OptionalWriter::some(Escaping(Tee((self.0)())))
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        let client_caused =
            meta.target().starts_with(HTTP_LIBRARY) && *meta.level() <= tracing::Level::WARN;
        if client_caused && rate_budget("http library").is_none() {
            tracing_subscriber::fmt::writer::OptionalWriter::none()
        } else {
            self.make_writer()
        }
    }
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
/// Lines all peer addresses together may cause per [`PEER_WARN_WINDOW`]: a remote peer with
/// many addresses (a /8 of loopback, a lab subnet) cannot flush the log ring either.
pub const PEER_LINES_TOTAL: u32 = 100;
/// Window of [`PEER_WARNINGS`] and [`PEER_LINES_TOTAL`].
pub const PEER_WARN_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// Per-address and overall budgets of lines about remote peers.
#[derive(Default)]
struct PeerLog {
    /// Address (IPv6: its /64) → (window start, lines logged in it, lines suppressed since
    /// the last one logged).
    per: std::collections::HashMap<std::net::IpAddr, (std::time::Instant, u32, u64)>,
    /// (window start, lines logged in it), all addresses.
    total: Option<(std::time::Instant, u32)>,
}

/// The address a peer's budget is kept under: IPv4 (IPv4-mapped IPv6 too) as is, other IPv6
/// by its /64 (one host usually holds a whole /64).
fn peer_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                std::net::IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

impl PeerLog {
    fn allow(&mut self, ip: std::net::IpAddr, now: std::time::Instant) -> Option<u64> {
        let key = peer_key(ip);
        if self.per.len() >= 4096 && !self.per.contains_key(&key) {
            self.per
                .retain(|_, (t, _, _)| now.duration_since(*t) < PEER_WARN_WINDOW);
            if self.per.len() >= 4096 {
                self.per.clear();
            }
        }
        let total = self.total.get_or_insert((now, 0));
        if now.duration_since(total.0) >= PEER_WARN_WINDOW {
            *total = (now, 0);
        }
        let e = self.per.entry(key).or_insert((now, 0, 0));
        if now.duration_since(e.0) >= PEER_WARN_WINDOW {
            e.0 = now;
            e.1 = 0;
        }
        if e.1 < PEER_WARNINGS && total.1 < PEER_LINES_TOTAL {
            e.1 += 1;
            total.1 += 1;
            Some(std::mem::take(&mut e.2))
        } else {
            e.2 += 1;
            None
        }
    }
}

static PEER_WARN: std::sync::Mutex<Option<PeerLog>> = std::sync::Mutex::new(None);

/// Whether a line about `ip` (a remote peer: what it sent, how it behaved) may be logged now:
/// `Some(n)` with the number of lines about it suppressed since the last one logged, `None`
/// to stay quiet (it is counted). At most [`PEER_WARNINGS`] per address (IPv6: per /64) and
/// [`PEER_LINES_TOTAL`] for all addresses per [`PEER_WARN_WINDOW`]; keeps at most 4096
/// addresses (older windows are dropped first).
pub fn peer_budget(ip: std::net::IpAddr) -> Option<u64> {
    let mut g = PEER_WARN.lock().unwrap_or_else(|p| p.into_inner());
    g.get_or_insert_with(Default::default)
        .allow(ip, std::time::Instant::now())
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

/// `tracing::info!` about a peer, within the same budget as [`peer_warn!`]: what a remote peer
/// can make us log at will (a connection closed without data).
#[macro_export]
macro_rules! peer_info {
    ($ip:expr, $($arg:tt)+) => {
        match $crate::logging::peer_budget($ip) {
            Some(0) => tracing::info!($($arg)+),
            Some(n) => tracing::info!(suppressed = n, $($arg)+),
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

    /// The rings are the process's: tests that fill them take turns.
    static RINGS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn the_ring_keeps_recent_lines_and_filters_them() {
        let _turn = RINGS.lock().unwrap_or_else(|p| p.into_inner());
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
        assert_eq!(
            RING.lock().unwrap_or_else(|p| p.into_inner()).lines.len(),
            RING_LINES
        );
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
        let mut p = PeerLog::default();
        let now = std::time::Instant::now();
        let ip: std::net::IpAddr = "192.0.2.77".parse().unwrap();
        let other: std::net::IpAddr = "192.0.2.78".parse().unwrap();
        for _ in 0..PEER_WARNINGS {
            assert_eq!(p.allow(ip, now), Some(0));
        }
        for _ in 0..100 {
            assert_eq!(p.allow(ip, now), None);
        }
        assert_eq!(p.allow(other, now), Some(0));
        // The same address spelled IPv4-mapped, and one /64, share a budget.
        let mapped: std::net::IpAddr = "::ffff:192.0.2.77".parse().unwrap();
        assert_eq!(p.allow(mapped, now), None);
        let a: std::net::IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: std::net::IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        for _ in 0..PEER_WARNINGS {
            assert!(p.allow(a, now).is_some());
        }
        assert_eq!(p.allow(b, now), None);
        // A window later the address may warn again, with the count of what was suppressed.
        let later = now + PEER_WARN_WINDOW;
        assert_eq!(p.allow(ip, later), Some(101));
    }

    #[test]
    fn many_addresses_cannot_exceed_the_total() {
        let mut p = PeerLog::default();
        let now = std::time::Instant::now();
        let logged = (0..5000u32)
            .filter(|i| {
                p.allow(
                    std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)),
                    now,
                )
                .is_some()
            })
            .count();
        assert_eq!(logged, PEER_LINES_TOTAL as usize);
    }

    /// Attacker tryout: 3,000 malformed requests logged 3,000 lines of the HTTP library's
    /// "stream error: request parse error" and pushed every other line out of the Diagnostics
    /// log. Through the daemon's writer: at most one such line a minute; the library's info
    /// lines and our own errors are kept.
    #[test]
    fn the_http_library_s_errors_about_bad_requests_are_rate_limited() {
        let _turn = RINGS.lock().unwrap_or_else(|p| p.into_inner());
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(LogWriter(std::io::sink))
            .with_target(false)
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(sub, || {
            tracing::info!("http-flood-test: before");
            for i in 0..3000 {
                tracing::error!(
                    target: "actix_http::h1::dispatcher",
                    "stream error: request parse error: http-flood-test {i}"
                );
            }
            tracing::info!(target: "actix_http::h1::service", "http-flood-test: library info");
            tracing::error!("http-flood-test: our own error");
        });
        let lines = recent(None, Some("http-flood-test"), RING_LINES);
        let flood = lines.iter().filter(|l| l.contains("stream error")).count();
        assert!(flood <= 1, "{flood} of 3000 library error lines kept");
        assert!(lines.iter().any(|l| l.contains("http-flood-test: before")));
        assert!(lines
            .iter()
            .any(|l| l.contains("http-flood-test: library info")));
        assert!(lines
            .iter()
            .any(|l| l.contains("http-flood-test: our own error")));
    }

    /// Issue 37 (12): 5,000 bad connections from 5,000 addresses used to log a line each and
    /// flush every audit line from the Diagnostics log. Through the daemon's own writer stack:
    /// the audit lines are still shown, and the flood logged at most [`PEER_LINES_TOTAL`].
    #[test]
    fn a_flood_of_peer_lines_keeps_the_audit_lines() {
        let _turn = RINGS.lock().unwrap_or_else(|p| p.into_inner());
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(|| Escaping(Tee(std::io::sink())))
            .with_target(false)
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(sub, || {
            audit(|| tracing::info!("flood-test: admin session from 192.0.2.1 started run 7"));
            for i in 0..5000u32 {
                let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x7f00_0000 + i));
                crate::peer_warn!(ip, %ip, "flood-test closing connection: bad cookie");
            }
            // Other lines (not about a peer) still flush the general ring…
            for i in 0..RING_LINES + 10 {
                tracing::info!("flood-test filler {i}");
            }
        });
        let peer_lines = recent(None, Some("flood-test closing"), usize::MAX).len();
        assert!(
            peer_lines <= PEER_LINES_TOTAL as usize,
            "{peer_lines} peer lines logged"
        );
        // …but the audit line is kept, and shown among the newest 200 (the page's default).
        let shown = recent(None, Some("flood-test"), 200);
        assert_eq!(shown.len(), 200);
        assert!(
            shown[0].ends_with("INFO flood-test: admin session from 192.0.2.1 started run 7"),
            "{:?}",
            &shown[..2]
        );
        assert!(
            shown[199].ends_with("flood-test filler 2009"),
            "{}",
            shown[199]
        );
    }
}
