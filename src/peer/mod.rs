//! Peer mode: `netperfd peer` on a lab PC is a small authenticated agent that the board asks
//! to run one iperf3 test (with our own client engine) to a host the board names — for
//! forwarding runs, where the traffic must pass *through* the board, so neither end of the
//! test may be the board itself.
//!
//! * [`spec`]: the test a board asks for ([`PeerTestSpec`]), validated into a `ClientSpec`;
//! * [`agent`]: the HTTP/JSON agent (`/peer/v1/...`, bearer token);
//! * [`client`]: the board's side: a small HTTP/1.1 client for the agent.
//!
//! Not for: changing the board (`system`), or storing anything (the agent keeps its jobs in
//! memory; the board stores the run).

pub mod agent;
pub mod client;
pub(crate) mod spec;

pub use client::PeerClient;
pub use spec::PeerTestSpec;

/// Default TCP port of the agent (`netperfd peer --listen 0.0.0.0:5280`).
pub const DEFAULT_PORT: u16 = 5280;
/// Environment variable holding the agent's token (for `netperfd peer` and `netperfd forward`).
pub const TOKEN_ENV: &str = "NETPERFD_PEER_TOKEN";
/// Shortest token accepted, characters.
pub const MIN_TOKEN: usize = 16;
/// Longest token accepted, characters.
pub const MAX_TOKEN: usize = 256;

/// Check a shared token: 8..=256 printable ASCII characters without spaces (it travels in an
/// HTTP header). The error says what is wrong without echoing the token.
pub fn check_token(t: &str) -> Result<(), String> {
    if t.len() < MIN_TOKEN || t.len() > MAX_TOKEN {
        return Err(format!(
            "the peer token must be {MIN_TOKEN}..{MAX_TOKEN} characters long (got {})",
            t.len()
        ));
    }
    if !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the peer token must be printable ASCII without spaces".into());
    }
    Ok(())
}

/// Read a token from a file (surrounding whitespace and the trailing newline dropped).
pub fn read_token_file(path: &std::path::Path) -> Result<String, String> {
    let t = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    let t = t.trim().to_string();
    check_token(&t)?;
    Ok(t)
}

/// The token from `--token`, `--token-file` or `$NETPERFD_PEER_TOKEN` (in that order), checked.
pub fn token_from(token: Option<&str>, file: Option<&std::path::Path>) -> Result<String, String> {
    if let Some(t) = token {
        check_token(t.trim())?;
        return Ok(t.trim().to_string());
    }
    if let Some(f) = file {
        return read_token_file(f);
    }
    match std::env::var(TOKEN_ENV) {
        Ok(t) if !t.trim().is_empty() => {
            check_token(t.trim())?;
            Ok(t.trim().to_string())
        }
        _ => Err(format!(
            "a shared token is required: --token-file FILE, --token TOKEN or ${TOKEN_ENV}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked() {
        assert!(check_token("s3cret-token-0123").is_ok());
        assert!(check_token("short").unwrap_err().contains("16..256"));
        // 8 characters were enough before: too few to resist guessing over the network.
        assert!(check_token("8chars!!").is_err());
        assert!(check_token("sixteen-chars-ok").is_ok());
        assert!(check_token("has space inside")
            .unwrap_err()
            .contains("printable"));
        assert!(check_token("line\nbreak-token").is_err());
        assert!(token_from(Some("  padded-token-0123 \n"), None).unwrap() == "padded-token-0123");
    }
}
