//! The board's side of peer mode: a small HTTP/1.1 client (plain HTTP, one request per
//! connection) for the agent's `/peer/v1/` API. Own code rather than a crate because the
//! board's binary has no HTTP client and the agent is ours: JSON bodies, `Content-Length` or
//! chunked answers, nothing else. Answers are capped at [`MAX_ANSWER`] bytes and every call at
//! [`CALL_TIMEOUT`], so a hostile or stuck agent cannot wedge the board.

use super::agent::JobView;
use super::spec::PeerTestSpec;
use crate::model::names::valid_host;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest answer accepted from an agent, bytes.
pub const MAX_ANSWER: usize = 64 * 1024 * 1024;
/// Longest time one call may take (connect, send, read the answer).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a peer agent is and how to authenticate to it.
#[derive(Clone)]
pub struct PeerClient {
    host: String,
    port: u16,
    token: String,
}

impl std::fmt::Debug for PeerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        write!(f, "PeerClient({})", self.url())
    }
}

/// A failed call: the message, and whether the agent refused the token (HTTP 401).
#[derive(Debug, Clone, PartialEq)]
pub struct PeerError {
    pub message: String,
    pub unauthorized: bool,
}

impl std::fmt::Display for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn perr(message: impl Into<String>) -> PeerError {
    PeerError {
        message: message.into(),
        unauthorized: false,
    }
}

impl PeerClient {
    /// Parse the agent's address: `http://HOST[:PORT][/]`, or `HOST[:PORT]` (port default
    /// 5280; IPv6 in brackets), and check the token.
    pub fn parse(url: &str, token: &str) -> Result<PeerClient, String> {
        super::check_token(token)?;
        let u = url.trim();
        if u.starts_with("https://") {
            return Err("the peer agent speaks plain HTTP: use http://HOST:PORT".into());
        }
        let rest = u.strip_prefix("http://").unwrap_or(u);
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('@') || rest.contains('?') {
            return Err(format!(
                "peer agent address '{u}' must be http://HOST:PORT without a path"
            ));
        }
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, p) = r
                .split_once(']')
                .ok_or_else(|| format!("peer agent address '{u}': missing ']'"))?;
            (h.to_string(), p.strip_prefix(':'))
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h.to_string(), Some(p)),
                _ => (rest.to_string(), None),
            }
        };
        let port = match port {
            None => super::DEFAULT_PORT,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("peer agent address '{u}': bad port '{p}'"))?,
        };
        if !valid_host(&host) {
            return Err(format!(
                "peer agent address '{u}': '{host}' is not a host name or IP address"
            ));
        }
        Ok(PeerClient {
            host,
            port,
            token: token.to_string(),
        })
    }

    /// The agent's address as a URL (without the token).
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }

    /// One call: method, path, optional JSON body → status and JSON answer.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, PeerError> {
        let url = self.url();
        let fut = async {
            let mut s = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| perr(format!("cannot reach the peer agent at {url}: {e}")))?;
            let body = body.map(|b| b.to_string()).unwrap_or_default();
            let host_hdr = if self.host.contains(':') {
                format!("[{}]:{}", self.host, self.port)
            } else {
                format!("{}:{}", self.host, self.port)
            };
            let req = format!(
                "{method} {path} HTTP/1.1\r\nHost: {host_hdr}\r\nAuthorization: Bearer {}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                self.token,
                body.len()
            );
            s.write_all(req.as_bytes())
                .await
                .map_err(|e| perr(format!("peer agent at {url}: {e}")))?;
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = s
                    .read(&mut chunk)
                    .await
                    .map_err(|e| perr(format!("peer agent at {url}: {e}")))?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > MAX_ANSWER {
                    return Err(perr(format!(
                        "peer agent at {url}: answer longer than {MAX_ANSWER} bytes"
                    )));
                }
            }
            Ok::<Vec<u8>, PeerError>(buf)
        };
        let raw = tokio::time::timeout(CALL_TIMEOUT, fut)
            .await
            .map_err(|_| {
                perr(format!(
                    "the peer agent at {url} did not answer within {} s",
                    CALL_TIMEOUT.as_secs()
                ))
            })??;
        let (status, body) =
            parse_response(&raw).map_err(|e| perr(format!("peer agent at {url}: {e}")))?;
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|_| {
            serde_json::json!({"error": String::from_utf8_lossy(&body[..body.len().min(200)]).to_string()})
        });
        if status == 401 {
            return Err(PeerError {
                message: format!("the peer agent at {url} refused the token (HTTP 401)"),
                unauthorized: true,
            });
        }
        if !(200..300).contains(&status) {
            let msg = v
                .get("error")
                .and_then(|e| e.as_str())
                .unwrap_or("no reason given");
            return Err(perr(format!("peer agent at {url}: HTTP {status}: {msg}")));
        }
        Ok(v)
    }

    /// `GET /peer/v1/info`: version, hostname, addresses, busy.
    pub async fn info(&self) -> Result<serde_json::Value, PeerError> {
        self.call("GET", "/peer/v1/info", None).await
    }

    /// Start a test; the agent's job id.
    pub async fn start(&self, spec: &PeerTestSpec) -> Result<u64, PeerError> {
        let body = serde_json::to_value(spec).map_err(|e| perr(e.to_string()))?;
        let v = self.call("POST", "/peer/v1/run", Some(&body)).await?;
        v.get("id")
            .and_then(|i| i.as_u64())
            .ok_or_else(|| perr(format!("peer agent at {}: no job id in {v}", self.url())))
    }

    /// A job's state with the intervals from number `since` on.
    pub async fn poll(&self, id: u64, since: usize) -> Result<JobView, PeerError> {
        let v = self
            .call("GET", &format!("/peer/v1/run/{id}?since={since}"), None)
            .await?;
        serde_json::from_value(v).map_err(|e| {
            perr(format!(
                "peer agent at {}: unreadable test state: {e}",
                self.url()
            ))
        })
    }

    /// Ask the agent to stop a job.
    pub async fn stop(&self, id: u64) -> Result<(), PeerError> {
        self.call("POST", &format!("/peer/v1/run/{id}/stop"), None)
            .await
            .map(|_| ())
    }
}

/// Split an HTTP/1.x answer into status code and body (Content-Length, chunked, or up to the
/// end of the connection).
pub fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP header in the answer")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "HTTP header is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    let proto = parts.next().unwrap_or_default();
    if !proto.starts_with("HTTP/1.") {
        return Err(format!("not an HTTP answer: '{status_line}'"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad HTTP status line '{status_line}'"))?;
    let (mut len, mut chunked) = (None, false);
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                len = Some(
                    v.parse::<usize>()
                        .map_err(|_| format!("bad Content-Length '{v}'"))?,
                );
            } else if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            }
        }
    }
    let body = &raw[end + 4..];
    if chunked {
        return dechunk(body).map(|b| (status, b));
    }
    match len {
        Some(n) if n > body.len() => Err(format!("answer cut short ({} of {n} bytes)", body.len())),
        Some(n) => Ok((status, body[..n].to_vec())),
        None => Ok((status, body.to_vec())),
    }
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunked encoding")?;
        let size_text = std::str::from_utf8(&b[..eol]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("answer cut short inside a chunk".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_addresses() {
        let t = "s3cret-token-0123";
        let c = PeerClient::parse("http://192.0.2.2:5280/", t).unwrap();
        assert_eq!(c.url(), "http://192.0.2.2:5280");
        assert_eq!(
            PeerClient::parse("pc1.lab", t).unwrap().url(),
            "http://pc1.lab:5280"
        );
        assert_eq!(
            PeerClient::parse("[2001:db8::2]:6000", t).unwrap().url(),
            "http://[2001:db8::2]:6000"
        );
        for bad in [
            "https://pc1:5280",
            "http://pc1:5280/x",
            "http://user@pc1",
            "pc1:0",
            "pc1:99999",
            "-x",
            "a b",
        ] {
            assert!(PeerClient::parse(bad, t).is_err(), "{bad} accepted");
        }
        assert!(PeerClient::parse("pc1", "short").is_err());
        assert!(
            !format!("{c:?}").contains(t),
            "Debug must not show the token"
        );
    }

    #[test]
    fn answers_with_length_chunks_or_eof() {
        let r = b"HTTP/1.1 201 Created\r\ncontent-length: 8\r\n\r\n{\"id\":1}trailing";
        assert_eq!(parse_response(r).unwrap(), (201, b"{\"id\":1}".to_vec()));
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), (200, b"{\"a\":1}".to_vec()));
        let r = b"HTTP/1.0 401 Unauthorized\r\n\r\n{}";
        assert_eq!(parse_response(r).unwrap(), (401, b"{}".to_vec()));
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n{}").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffff\r\nab")
                .is_err()
        );
    }
}
