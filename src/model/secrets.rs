//! Secrets: SHA-256 of tokens (only hashes are stored) and a constant-time comparison.

use sha2::{Digest, Sha256};

/// SHA-256 of a string, hex.
pub fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Compare two strings in time independent of where they differ.
pub fn ct_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
