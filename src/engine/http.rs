//! HTTP/1.1 as a measurement (seed 003's nginx + axel + curl): the wire pieces the payload
//! server needs (request head, payload sizes, single `Range:` requests, RFC 9110) and the
//! multi-connection download client (axel-style: learn the size, split it into N byte ranges,
//! fetch them in parallel, discard the bytes, report 1 s intervals and the goodput).
//! Plain `http://` only: TLS would measure the board's crypto, not its port.
//! Not for: recording runs or serving sockets (see `crate::runs::traffic`).
// Lengths and sizes here come from the network or from files: checked arithmetic and
// fallible slicing only (issue 37, blocker 3). CI runs clippy with -D warnings.
#![cfg_attr(
    not(test),
    warn(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

use crate::engine::meter::{bps, ConnTotals, Meter};
use crate::engine::net::{self, Family, SockOpts};
use crate::engine::report::IntervalRecord;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

pub use crate::model::units::parse_size;
#[cfg(test)]
use crate::model::units::MAX_PAYLOAD;
/// Largest request head (request line and headers) accepted or response head read, bytes.
pub const MAX_HEAD: usize = 16 * 1024;
/// Most connections one download may open.
pub(crate) const MAX_CONNECTIONS: u32 = 64;

/// What a `Range:` header asks of a body of `total` bytes (RFC 9110 §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAsk {
    /// No range (or one the server ignores: another unit, several ranges): the whole body, 200.
    Full,
    /// Bytes `first..=last`, 206 with `Content-Range: bytes first-last/total`.
    Part { first: u64, last: u64 },
    /// No byte of the range exists: 416 with `Content-Range: bytes */total`.
    Unsatisfiable,
    /// A `bytes=` range that does not parse: 400.
    Invalid,
}

/// Decide a `Range:` header for a body of `total` bytes. One range `bytes=a-b`, `bytes=a-` or
/// `bytes=-n` is served; a multi-range request and other units are ignored (the full body, as
/// RFC 9110 §14.2 allows); a malformed `bytes=` specifier is refused (400).
pub fn parse_range(h: Option<&str>, total: u64) -> RangeAsk {
    let Some(h) = h else {
        return RangeAsk::Full;
    };
    let h = h.trim();
    let Some((unit, spec)) = h.split_once('=') else {
        return RangeAsk::Invalid;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return RangeAsk::Full;
    }
    let spec = spec.trim();
    if spec.contains(',') {
        // Several ranges: validate the syntax, then serve the whole body.
        return if spec.split(',').all(|r| range_syntax(r.trim()).is_some()) {
            RangeAsk::Full
        } else {
            RangeAsk::Invalid
        };
    }
    match range_syntax(spec) {
        None => RangeAsk::Invalid,
        Some((Some(first), last)) => {
            if first >= total {
                return RangeAsk::Unsatisfiable;
            }
            // first < total, so total ≥ 1.
            let last = last.unwrap_or(u64::MAX).min(total.saturating_sub(1));
            RangeAsk::Part { first, last }
        }
        Some((None, Some(n))) => {
            if n == 0 || total == 0 {
                RangeAsk::Unsatisfiable
            } else {
                RangeAsk::Part {
                    first: total.saturating_sub(n),
                    last: total.saturating_sub(1),
                }
            }
        }
        Some((None, None)) => RangeAsk::Invalid,
    }
}

/// `a-b`, `a-`, `-n` → (first, last-or-suffix-length); None when malformed or `b < a`.
fn range_syntax(r: &str) -> Option<(Option<u64>, Option<u64>)> {
    let (a, b) = r.split_once('-')?;
    let num = |x: &str| -> Option<Option<u64>> {
        let x = x.trim();
        if x.is_empty() {
            Some(None)
        } else if x.len() <= 19 && x.bytes().all(|c| c.is_ascii_digit()) {
            x.parse().ok().map(Some)
        } else {
            None
        }
    };
    let (a, b) = (num(a)?, num(b)?);
    match (a, b) {
        (None, None) => None,
        (Some(a), Some(b)) if b < a => None,
        x => Some(x),
    }
}

/// A parsed HTTP/1.x request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    /// The request target as sent (path and query).
    pub target: String,
    /// HTTP/1.1 (keep-alive by default) rather than HTTP/1.0.
    pub http11: bool,
    /// Header names lower-cased, values trimmed, in order.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The first header of that (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the connection stays open after the response (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    pub fn keep_alive(&self) -> bool {
        let c = self.header("connection").unwrap_or("").to_ascii_lowercase();
        if self.http11 {
            !c.split(',').any(|t| t.trim() == "close")
        } else {
            c.split(',').any(|t| t.trim() == "keep-alive")
        }
    }

    /// The path without the query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// Index of the end of the head (after the blank line) in `buf`, if complete.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        return i.checked_add(4);
    }
    buf.windows(2)
        .position(|w| w == b"\n\n")
        .and_then(|i| i.checked_add(2))
}

/// Parse a request head (everything up to and including the blank line). Errors are the
/// text of a 400 response.
pub fn parse_request(head: &[u8]) -> Result<RequestHead, String> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not text".to_string())?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed request line".into());
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(format!("unsupported protocol version '{version}'")),
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err("malformed method".into());
    }
    if !target.starts_with('/') {
        return Err("the request target must be a path".into());
    }
    let mut headers: Vec<(String, String)> = Vec::new();
    for l in lines {
        if l.is_empty() {
            break;
        }
        if l.starts_with([' ', '\t']) {
            // RFC 9112 §5.2: a server must reject obs-fold in a request (or replace it).
            return Err(
                "a header line continued on the next line (obs-fold) is not accepted".into(),
            );
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err("malformed header line".into());
        };
        if k.is_empty() || !k.bytes().all(is_tchar) {
            return Err("malformed header name".into());
        }
        if let Some(b) = v.bytes().find(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            let what = match b {
                b'\r' => "CR".to_string(),
                0 => "NUL".to_string(),
                b => format!("byte 0x{b:02x}"),
            };
            return Err(format!(
                "header '{}': control character ({what}) in the value",
                k.to_ascii_lowercase()
            ));
        }
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
        if headers.len() > 100 {
            return Err("too many header lines".into());
        }
    }
    let count = |name: &str| headers.iter().filter(|(k, _)| k == name).count();
    // RFC 9112 §6.3: several Content-Length values, or one with Transfer-Encoding, are the
    // stuff of request smuggling: refused, never "first wins".
    if count("content-length") > 1 {
        return Err("more than one Content-Length header".into());
    }
    if let Some((_, v)) = headers.iter().find(|(k, _)| k == "content-length") {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("Content-Length '{v}' is not a number"));
        }
        if count("transfer-encoding") > 0 {
            return Err("both Content-Length and Transfer-Encoding".into());
        }
    }
    // RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one in HTTP/1.0.
    match count("host") {
        0 if http11 => return Err("missing Host header (required in HTTP/1.1)".into()),
        n if n > 1 => return Err("more than one Host header".into()),
        _ => {}
    }
    Ok(RequestHead {
        method: method.into(),
        target: target.into(),
        http11,
        headers,
    })
}

/// A token character of a header name (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

// ---------------------------------------------------------------- download client

/// An `http://host[:port]/path` URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// Path and query, from the first `/` (`/` when the URL has none).
    pub target: String,
}

impl HttpUrl {
    /// The `Host:` header value.
    pub(crate) fn host_header(&self) -> String {
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

/// Parse a download URL. Only `http://`: `https://` is refused with a reason (the engine
/// measures plain HTTP/1.1; TLS would measure the CPU's crypto). No user info, no fragment.
pub(crate) fn parse_url(s: &str) -> Result<HttpUrl, String> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return Err(format!("'{s}': https is not supported — netperfd measures plain HTTP/1.1 (TLS would measure the CPU's crypto, not the port); use an http:// URL"));
    }
    let Some(rest) = lower.strip_prefix("http://").map(|_| &s[7..]) else {
        return Err(format!(
            "'{s}' is not an http:// URL (e.g. http://192.0.2.2/test.dat)"
        ));
    };
    if s.len() > 2048 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("'{s}': the URL is too long or contains spaces"));
    }
    let (authority, target) = match rest.find(['/', '?']).map(|i| rest.split_at(i)) {
        Some((a, t)) if t.starts_with('/') => (a, t.to_string()),
        Some((a, t)) => (a, format!("/{t}")),
        None => (rest, "/".to_string()),
    };
    let target = target.split('#').next().unwrap_or("/").to_string();
    if authority.contains('@') {
        return Err(format!(
            "'{s}': user names and passwords in URLs are not supported"
        ));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("'{s}': unterminated IPv6 address"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("'{s}': malformed host")),
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'))
    {
        return Err(format!("'{s}': missing or malformed host"));
    }
    let port = match port {
        None => 80,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err(format!("'{s}': port must be 1..65535")),
        },
    };
    Ok(HttpUrl { host, port, target })
}

/// What to download.
#[derive(Debug, Clone)]
pub(crate) struct GetSpec {
    /// `http://host[:port]/path`.
    pub url: String,
    /// Parallel connections, 1..=[`MAX_CONNECTIONS`] (fewer when the body is smaller or the
    /// server does not do ranges).
    pub connections: u32,
    /// Limit for the whole download, seconds (1..=86400).
    pub timeout_secs: u32,
    /// Board port (interface) to bind every socket to (SO_BINDTODEVICE).
    pub bind_dev: Option<String>,
}

impl GetSpec {
    /// Check the values; errors are user-facing.
    pub(crate) fn validate(&self) -> Result<HttpUrl, String> {
        let u = parse_url(&self.url)?;
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return Err(format!("connections must be 1..{MAX_CONNECTIONS}"));
        }
        if self.timeout_secs == 0 || self.timeout_secs > 86_400 {
            return Err("timeout must be 1..86400 s".into());
        }
        if let Some(d) = &self.bind_dev {
            if !crate::model::names::valid_ifname(d) {
                return Err(format!("'{d}' is not a port name"));
            }
        }
        Ok(u)
    }
}

/// What a download learned and moved.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct GetResult {
    pub url: String,
    /// The peer's address and port as connected.
    pub peer: String,
    /// The board's address of the first connection.
    pub local: String,
    /// Body size the server announced (Content-Length), bytes.
    pub size: u64,
    /// Whether the server accepted byte ranges (`Accept-Ranges: bytes`).
    pub ranges: bool,
    /// Connections used.
    pub connections: u32,
    /// Body bytes received, all connections.
    pub bytes: u64,
    /// From the first range request to the last byte, seconds.
    pub seconds: f64,
    /// Goodput: bytes × 8 / seconds, bits/s.
    pub bits_per_second: f64,
    /// Each connection's bytes, life and bitrate.
    pub per_connection: Vec<ConnTotals>,
    /// The byte range each connection asked for (first, last).
    pub ranges_asked: Vec<(u64, u64)>,
}

/// A failed download: the message for the run record, and what was moved until then.
#[derive(Debug)]
pub(crate) struct GetError {
    pub message: String,
    /// Stopped by the user (`cancel`) rather than failed.
    pub aborted: bool,
    pub partial: Option<GetResult>,
}

impl GetError {
    fn new(m: impl Into<String>) -> GetError {
        GetError {
            message: m.into(),
            aborted: false,
            partial: None,
        }
    }
}

/// Events of a download as it runs.
#[derive(Debug)]
pub(crate) enum GetEvent {
    /// Connected: the board's address (the peer's is the URL's).
    Started { local: SocketAddr },
    /// One interval: one stream per connection (the board receives).
    Interval(IntervalRecord),
}

/// A response head: status, reason and lower-cased headers.
#[derive(Debug, Clone)]
struct ResponseHead {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
}

impl ResponseHead {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn parse_response(head: &[u8]) -> Result<ResponseHead, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the response head is not text")?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().unwrap_or("");
    let mut p = first.splitn(3, ' ');
    let (v, code) = (p.next().unwrap_or(""), p.next().unwrap_or(""));
    if !v.starts_with("HTTP/1.") {
        return Err(format!(
            "not an HTTP/1.x response: '{}'",
            first.chars().take(60).collect::<String>()
        ));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| format!("malformed status line '{first}'"))?;
    let reason = p.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    for l in lines {
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok(ResponseHead {
        status,
        reason,
        headers,
    })
}

/// Seconds without a byte after which a connection counts as stuck.
const IDLE_SECS: u64 = 15;

async fn connect(
    addr: SocketAddr,
    bind_dev: Option<&str>,
    deadline: Instant,
) -> Result<TcpStream, String> {
    let opts = SockOpts {
        bind_dev: bind_dev.map(String::from),
        nodelay: true,
        ..Default::default()
    };
    let left = deadline
        .saturating_duration_since(Instant::now())
        .min(Duration::from_secs(10))
        .max(Duration::from_millis(100));
    let s =
        crate::engine::task::spawn_blocking(move || net::connect_tcp(addr, &opts, 0, false, left))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    TcpStream::from_std(s).map_err(|e| e.to_string())
}

/// Read a response head; returns it and the body bytes that came with it.
async fn read_head(s: &mut TcpStream) -> Result<(ResponseHead, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(IDLE_SECS), s.read(&mut chunk))
            .await
            .map_err(|_| format!("no response within {IDLE_SECS} s"))?
            .map_err(|e| format!("reading the response: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection without a response".into());
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or(&chunk));
        if let Some((head, rest)) = head_end(&buf).and_then(|end| buf.split_at_checked(end)) {
            let h = parse_response(head)?;
            return Ok((h, rest.to_vec()));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("response head larger than {MAX_HEAD} bytes"));
        }
    }
}

fn request(u: &HttpUrl, method: &str, range: Option<(u64, u64)>) -> String {
    let mut r = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: netperfd/{}\r\nAccept: */*\r\nAccept-Encoding: identity\r\n",
        u.target,
        u.host_header(),
        env!("CARGO_PKG_VERSION")
    );
    if let Some((a, b)) = range {
        r.push_str(&format!("Range: bytes={a}-{b}\r\n"));
    }
    r.push_str("Connection: close\r\n\r\n");
    r
}

/// Turn a non-success status into the run's error text.
fn status_error(h: &ResponseHead) -> String {
    match h.status {
        300..=399 => format!(
            "the server answered {} {} (redirect to {}): netperfd does not follow redirects; use the final URL",
            h.status,
            h.reason,
            h.header("location").unwrap_or("?")
        ),
        400..=499 => format!("the server answered {} {} (client error: check the URL)", h.status, h.reason),
        500..=599 => format!("the server answered {} {} (server error)", h.status, h.reason),
        _ => format!("unexpected answer {} {}", h.status, h.reason),
    }
}

fn content_length(h: &ResponseHead) -> Option<u64> {
    h.header("content-length")?.trim().parse().ok()
}

/// Split `size` bytes into `n` ranges as even as possible: (first, last) inclusive.
pub(crate) fn split_ranges(size: u64, n: u32) -> Vec<(u64, u64)> {
    let n = u64::from(n).clamp(1, size.max(1));
    let (base, extra) = (size.checked_div(n), size.checked_rem(n));
    let (Some(base), Some(extra)) = (base, extra) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut at = 0u64;
    for i in 0..n {
        // The ranges add up to `size`, so none of these sums overflows.
        let len = base.saturating_add(u64::from(i < extra));
        let Some(last) = len.checked_sub(1) else {
            continue;
        };
        out.push((at, at.saturating_add(last)));
        at = at.saturating_add(len);
    }
    out
}

/// Probe the size with HEAD: (size, ranges supported, peer, local).
async fn probe(
    u: &HttpUrl,
    addr: SocketAddr,
    bind_dev: Option<&str>,
    deadline: Instant,
) -> Result<(u64, bool, SocketAddr, SocketAddr), String> {
    let mut s = connect(addr, bind_dev, deadline).await?;
    let (peer, local) = (
        s.peer_addr().map_err(|e| e.to_string())?,
        s.local_addr().map_err(|e| e.to_string())?,
    );
    s.write_all(request(u, "HEAD", None).as_bytes())
        .await
        .map_err(|e| format!("sending the request: {e}"))?;
    let (h, _) = read_head(&mut s).await?;
    if h.status != 200 {
        return Err(status_error(&h));
    }
    if h.header("transfer-encoding")
        .is_some_and(|t| !t.eq_ignore_ascii_case("identity"))
    {
        return Err("the server sends this body chunked (no Content-Length): netperfd downloads files of a known size".into());
    }
    let size = content_length(&h).ok_or(
        "the server announced no Content-Length: netperfd downloads files of a known size",
    )?;
    let ranges = h
        .header("accept-ranges")
        .is_some_and(|v| v.to_ascii_lowercase().contains("bytes"));
    Ok((size, ranges, peer, local))
}

/// Fetch one range (or the whole body with `range = None`) and count its bytes into `c`.
async fn fetch(
    u: HttpUrl,
    addr: SocketAddr,
    bind_dev: Option<String>,
    deadline: Instant,
    range: Option<(u64, u64)>,
    size: u64,
    meter: Arc<Meter>,
) -> Result<u64, String> {
    let mut s = connect(addr, bind_dev.as_deref(), deadline).await?;
    let c = meter.add_stream(s.as_raw_fd());
    let r = fetch_on(&mut s, &u, range, size, &c).await;
    c.close();
    r
}

async fn fetch_on(
    s: &mut TcpStream,
    u: &HttpUrl,
    range: Option<(u64, u64)>,
    size: u64,
    c: &crate::engine::meter::Counter,
) -> Result<u64, String> {
    s.write_all(request(u, "GET", range).as_bytes())
        .await
        .map_err(|e| format!("sending the request: {e}"))?;
    let (h, early) = read_head(s).await?;
    let want = match range {
        Some((a, b)) => {
            if h.status == 200 {
                return Err("the server ignored the Range request (200 instead of 206)".into());
            }
            if h.status != 206 {
                return Err(status_error(&h));
            }
            let cr = h.header("content-range").unwrap_or("");
            let expect = format!("bytes {a}-{b}/");
            if !cr.starts_with(&expect) {
                return Err(format!("the server sent range '{cr}' for bytes {a}-{b}"));
            }
            // split_ranges gives a ≤ b < size ≤ u64::MAX.
            b.saturating_sub(a).saturating_add(1)
        }
        None => {
            if h.status != 200 {
                return Err(status_error(&h));
            }
            size
        }
    };
    if let Some(cl) = content_length(&h) {
        if cl != want {
            return Err(format!(
                "the server announced {cl} bytes where {want} were asked"
            ));
        }
    }
    let mut got = (early.len() as u64).min(want);
    c.add(got);
    let mut buf = vec![0u8; 256 * 1024];
    while got < want {
        let n = match tokio::time::timeout(Duration::from_secs(IDLE_SECS), s.read(&mut buf)).await {
            Err(_) => {
                return Err(format!(
                    "connection {} stalled: no data for {IDLE_SECS} s after {got} of {want} bytes",
                    c.id
                ))
            }
            Ok(Err(e)) => {
                return Err(format!(
                    "connection {} failed after {got} of {want} bytes: {e}",
                    c.id
                ))
            }
            Ok(Ok(n)) => n as u64,
        };
        if n == 0 {
            return Err(format!(
                "short body: connection {} got {got} of {want} bytes before the server closed it",
                c.id
            ));
        }
        let take = n.min(want.saturating_sub(got));
        got = got.saturating_add(take);
        c.add(take);
    }
    Ok(got)
}

/// Download `spec.url` over `spec.connections` connections, sending an interval every second
/// to `events`; `cancel` stops it (an aborted error with the partial figures).
pub(crate) async fn get(
    spec: GetSpec,
    events: Option<mpsc::UnboundedSender<GetEvent>>,
    cancel: Option<Arc<Notify>>,
) -> Result<GetResult, GetError> {
    let u = spec.validate().map_err(GetError::new)?;
    // validate() keeps timeout_secs within a day.
    let deadline = Instant::now()
        .checked_add(Duration::from_secs(u64::from(spec.timeout_secs)))
        .ok_or_else(|| GetError::new("timeout too long".to_string()))?;
    let (host, port) = (u.host.clone(), u.port);
    let addr = crate::engine::task::spawn_blocking(move || net::resolve(&host, port, Family::Any))
        .await
        .map_err(|e| GetError::new(e.to_string()))?
        .map_err(|e| GetError::new(format!("cannot resolve '{}': {e}", u.host)))?;
    let (size, ranges, peer, local) = probe(&u, addr, spec.bind_dev.as_deref(), deadline)
        .await
        .map_err(GetError::new)?;
    if let Some(tx) = &events {
        let _ = tx.send(GetEvent::Started { local });
    }
    let asked: Vec<(u64, u64)> = if ranges && size > 0 {
        split_ranges(size, spec.connections)
    } else {
        vec![(0, size.saturating_sub(1))]
    };
    let use_range = ranges && size > 0 && asked.len() > 1;
    let meter = Meter::new(false);
    let mut set = tokio::task::JoinSet::new();
    for &r in &asked {
        // One future type (`fetch`'s), so one task harness, as a boxed spawn would give.
        #[allow(clippy::disallowed_methods)]
        set.spawn(fetch(
            u.clone(),
            addr,
            spec.bind_dev.clone(),
            deadline,
            if use_range { Some(r) } else { None },
            size,
            meter.clone(),
        ));
    }
    let result = |meter: &Meter| {
        let (bytes, per) = meter.totals();
        let seconds = meter.elapsed();
        GetResult {
            url: spec.url.clone(),
            peer: format!("{}:{}", net::ip_text(peer.ip()), peer.port()),
            local: net::ip_text(local.ip()),
            size,
            ranges,
            connections: u32::try_from(asked.len()).unwrap_or(u32::MAX),
            bytes,
            seconds,
            bits_per_second: bps(bytes, seconds),
            per_connection: per,
            ranges_asked: asked.clone(),
        }
    };
    let failure = watch_fetches(
        &mut set,
        events.as_ref(),
        &meter,
        cancel.as_deref(),
        deadline,
        spec.timeout_secs,
    )
    .await;
    set.abort_all();
    while set.join_next().await.is_some() {}
    if let (Some(tx), Some(rec)) = (&events, meter.cut(0.01)) {
        let _ = tx.send(GetEvent::Interval(rec));
    }
    let r = result(&meter);
    match failure {
        None => Ok(r),
        Some((message, aborted)) => Err(GetError {
            message,
            aborted,
            partial: Some(r),
        }),
    }
}

/// Watch the connections' tasks in `set` until all are done, sending `meter`'s interval
/// every second to `events`. Returns why it ended early (and whether by `cancel`): a
/// connection failed, the `deadline` (`timeout_secs` after the start) passed, or the user
/// stopped it.
async fn watch_fetches(
    set: &mut tokio::task::JoinSet<Result<u64, String>>,
    events: Option<&mpsc::UnboundedSender<GetEvent>>,
    meter: &Meter,
    cancel: Option<&Notify>,
    deadline: Instant,
    timeout_secs: u32,
) -> Option<(String, bool)> {
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now()
            .checked_add(Duration::from_secs(1))
            .unwrap_or_else(tokio::time::Instant::now),
        Duration::from_secs(1),
    );
    let cancelled = async {
        match cancel {
            Some(c) => c.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(cancelled);
    let until = tokio::time::Instant::from_std(deadline);
    let mut failure: Option<(String, bool)> = None;
    while !set.is_empty() {
        tokio::select! {
            r = set.join_next() => match r {
                Some(Ok(Ok(_))) | None => {}
                Some(Ok(Err(e))) => { failure = Some((e, false)); break; }
                Some(Err(e)) => { failure = Some((format!("a connection task failed: {e}"), false)); break; }
            },
            _ = tick.tick() => {
                if let (Some(tx), Some(rec)) = (events, meter.cut(0.0)) {
                    let _ = tx.send(GetEvent::Interval(rec));
                }
            }
            _ = tokio::time::sleep_until(until) => {
                failure = Some((format!("timeout: the download did not finish within {} s", timeout_secs), false));
                break;
            }
            _ = &mut cancelled => { failure = Some(("stopped by the user".into(), true)); break; }
        }
    }
    failure
}

/// The payload block that served bodies repeat: 1 MiB of xorshift64 bytes (not compressible,
/// the same in every process, so any range can be checked against the full body).
pub(crate) fn payload_block() -> Arc<[u8]> {
    let mut v = Vec::with_capacity(BLOCK);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while v.len() < BLOCK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.into()
}

/// Size of [`payload_block`], bytes (1 MiB).
pub(crate) const BLOCK: usize = 1 << 20;

/// Ip of a socket address as text (IPv4-mapped shown as IPv4).
pub(crate) fn addr_ip(a: &SocketAddr) -> IpAddr {
    match a.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        ip => ip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100M"), Ok(100_000_000));
        assert_eq!(parse_size("1G"), Ok(1_000_000_000));
        assert_eq!(parse_size("10GB"), Ok(10_000_000_000));
        assert_eq!(parse_size("1Gi"), Ok(1 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("4k"), Ok(4000));
        assert_eq!(parse_size("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_size("12345"), Ok(12345));
        assert_eq!(parse_size("100G"), Ok(MAX_PAYLOAD));
        for bad in [
            "",
            "0",
            "101G",
            "1T",
            "-5",
            "1X",
            "M",
            "1.5",
            "1.0000000001K",
            "abc",
            "1e9",
            "١٠",
            "99999999999999999999",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn ranges() {
        use RangeAsk::*;
        assert_eq!(parse_range(None, 100), Full);
        assert_eq!(
            parse_range(Some("bytes=0-9"), 100),
            Part { first: 0, last: 9 }
        );
        assert_eq!(
            parse_range(Some("bytes=90-"), 100),
            Part {
                first: 90,
                last: 99
            }
        );
        assert_eq!(
            parse_range(Some("bytes=90-1000"), 100),
            Part {
                first: 90,
                last: 99
            }
        );
        assert_eq!(
            parse_range(Some("bytes=-10"), 100),
            Part {
                first: 90,
                last: 99
            }
        );
        assert_eq!(
            parse_range(Some("bytes=-1000"), 100),
            Part { first: 0, last: 99 }
        );
        assert_eq!(parse_range(Some("bytes=100-"), 100), Unsatisfiable);
        assert_eq!(parse_range(Some("bytes=-0"), 100), Unsatisfiable);
        assert_eq!(parse_range(Some("bytes=0-1,5-6"), 100), Full);
        assert_eq!(parse_range(Some("items=0-1"), 100), Full);
        for bad in [
            "bytes=9-1",
            "bytes=a-b",
            "bytes=-",
            "bytes=",
            "bytes",
            "bytes=1-2,x",
        ] {
            assert_eq!(parse_range(Some(bad), 100), Invalid, "{bad}");
        }
    }

    #[test]
    fn request_heads() {
        let h =
            parse_request(b"GET /payload/1G?x=1 HTTP/1.1\r\nHost: b\r\nRange: bytes=0-1\r\n\r\n")
                .unwrap();
        assert_eq!(h.method, "GET");
        assert_eq!(h.path(), "/payload/1G");
        assert_eq!(h.header("range"), Some("bytes=0-1"));
        assert!(h.keep_alive());
        let h = parse_request(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!h.keep_alive());
        let h = parse_request(b"GET / HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n").unwrap();
        assert!(!h.keep_alive());
        for bad in [
            &b"GET /\r\n\r\n"[..],
            b"GET / HTTP/2\r\n\r\n",
            b"get / HTTP/1.1\r\n\r\n",
            b"GET x HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            b"GET / HTTP/1.1\r\n\xff: x\r\n\r\n",
        ] {
            assert!(
                parse_request(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    /// Issue 21: two Content-Lengths (first won), obs-fold, missing or duplicate Host and
    /// CR/NUL in values were accepted.
    #[test]
    fn ambiguous_request_heads_are_refused_with_the_reason() {
        for (bad, why) in [
            (
                &b"GET / HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n"[..],
                "more than one Content-Length header",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
                "both Content-Length and Transfer-Encoding",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: b\r\nContent-Length: -1\r\n\r\n",
                "Content-Length '-1' is not a number",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: b\r\nX-A: one\r\n two\r\n\r\n",
                "a header line continued on the next line (obs-fold) is not accepted",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: b\r\nX-A: one\r\n\ttwo\r\n\r\n",
                "a header line continued on the next line (obs-fold) is not accepted",
            ),
            (
                b"GET / HTTP/1.1\r\nRange: bytes=0-1\r\n\r\n",
                "missing Host header (required in HTTP/1.1)",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                "more than one Host header",
            ),
            (
                b"GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n",
                "more than one Host header",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: b\r\nX-A: a\rb\r\n\r\n",
                "header 'x-a': control character (CR) in the value",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: b\0evil\r\n\r\n",
                "header 'host': control character (NUL) in the value",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: b\r\nX(A): a\r\n\r\n",
                "malformed header name",
            ),
        ] {
            assert_eq!(
                parse_request(bad).err().as_deref(),
                Some(why),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // Tabs in a value are fine; HTTP/1.0 needs no Host.
        let h = parse_request(b"GET / HTTP/1.1\r\nHost: b\r\nX-A: a\tb\r\n\r\n").unwrap();
        assert_eq!(h.header("x-a"), Some("a\tb"));
        assert!(parse_request(b"GET / HTTP/1.0\r\n\r\n").is_ok());
    }

    #[test]
    fn urls() {
        let u = parse_url("http://192.0.2.2/test.dat").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str()),
            ("192.0.2.2", 80, "/test.dat")
        );
        assert_eq!(u.host_header(), "192.0.2.2");
        let u = parse_url("http://board:8081").unwrap();
        assert_eq!((u.port, u.target.as_str()), (8081, "/"));
        assert_eq!(u.host_header(), "board:8081");
        let u = parse_url("http://[2001:db8::1]:8080/a?b#c").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str()),
            ("2001:db8::1", 8080, "/a?b")
        );
        assert!(parse_url("https://x/")
            .unwrap_err()
            .contains("https is not supported"));
        for bad in [
            "ftp://x/",
            "http://",
            "http://a b/",
            "http://x:0/",
            "http://x:99999/",
            "http://u:p@x/",
            "x",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_split_evenly_and_cover_everything() {
        assert_eq!(split_ranges(10, 3), vec![(0, 3), (4, 6), (7, 9)]);
        assert_eq!(split_ranges(2, 4), vec![(0, 0), (1, 1)]);
        let r = split_ranges(100_000_000, 10);
        assert_eq!(r.len(), 10);
        assert_eq!(r.iter().map(|(a, b)| b - a + 1).sum::<u64>(), 100_000_000);
        assert!(r.windows(2).all(|w| w[0].1 + 1 == w[1].0));
    }

    #[test]
    fn payload_block_is_fixed() {
        let a = payload_block();
        assert_eq!(a.len(), BLOCK);
        assert_eq!(&a[..], &payload_block()[..]);
        assert_ne!(a[0..8], a[8..16]);
    }
}
