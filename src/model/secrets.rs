//! Secrets: SHA-256 of tokens (only hashes are stored), a constant-time comparison, the bearer
//! token of an `Authorization` header, and a per-address limiter of wrong passwords/tokens.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// SHA-256 of a string, hex.
pub(crate) fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Compare two strings in time independent of where they differ.
pub(crate) fn ct_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer <token>` value; the scheme name is
/// case-insensitive (RFC 9110 §11.1), spaces after it are skipped.
pub(crate) fn bearer_token(h: &str) -> Option<&str> {
    let (scheme, rest) = h.trim_start().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let tok = rest.trim();
    (!tok.is_empty()).then_some(tok)
}

/// Failed-login limiter: at most `max` failures per address in `window`.
pub struct LoginLimiter {
    max: u32,
    window: Duration,
    fails: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl LoginLimiter {
    /// A limiter allowing `max` failures per `window`.
    pub fn new(max: u32, window: Duration) -> LoginLimiter {
        LoginLimiter {
            max,
            window,
            fails: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(seconds to wait)` when the address is locked out.
    pub fn check(&self, ip: IpAddr) -> Result<(), u64> {
        let mut m = self.fails.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((n, t)) = m.get(&ip).copied() {
            if t.elapsed() >= self.window {
                m.remove(&ip);
            } else if n >= self.max {
                return Err((self.window - t.elapsed()).as_secs().max(1));
            }
        }
        Ok(())
    }

    /// Count a failure.
    pub fn fail(&self, ip: IpAddr) {
        let mut m = self.fails.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() > 10_000 {
            m.retain(|_, (_, t)| t.elapsed() < self.window);
        }
        let e = m.entry(ip).or_insert((0, Instant::now()));
        if e.1.elapsed() >= self.window {
            *e = (0, Instant::now());
        }
        e.0 += 1;
    }

    /// Forget failures after a success.
    pub fn success(&self, ip: IpAddr) {
        self.fails
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_locks_after_max_failures() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let ip: IpAddr = "192.0.2.9".parse().unwrap();
        for _ in 0..3 {
            assert!(l.check(ip).is_ok());
            l.fail(ip);
        }
        let wait = l.check(ip).unwrap_err();
        assert!((1..=60).contains(&wait));
        // Another address is not affected.
        assert!(l.check("192.0.2.10".parse().unwrap()).is_ok());
        l.success(ip);
        assert!(l.check(ip).is_ok());
    }
}
