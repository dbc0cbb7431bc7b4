//! The iperf3 control connection's I/O on a tokio stream: one state byte, SERVER_ERROR with
//! its code, and length-prefixed JSON documents, each bounded in size and time. The bytes
//! themselves (states, cookie, frame lengths, documents) are `wire`'s, which does no I/O;
//! which message comes when is `control`'s.
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

use super::wire::{frame_len, State, WireError};
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Read exactly `buf.len()` bytes within `limit`.
pub(crate) async fn read_exact_timeout<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
    limit: Duration,
    what: &'static str,
) -> Result<(), WireError> {
    match tokio::time::timeout(limit, r.read_exact(buf)).await {
        Err(_) => Err(WireError::Timeout(what)),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(WireError::Closed),
        Ok(Err(e)) => Err(WireError::Io(e)),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Read one state byte within `limit`.
pub(crate) async fn read_state<R: AsyncRead + Unpin>(
    r: &mut R,
    limit: Duration,
) -> Result<u8, WireError> {
    let mut b = [0u8; 1];
    read_exact_timeout(r, &mut b, limit, "a control message").await?;
    Ok(b[0])
}

/// Write one state byte.
pub(crate) async fn write_state<W: AsyncWrite + Unpin>(
    w: &mut W,
    s: State,
) -> Result<(), WireError> {
    w.write_all(&[s.byte()]).await?;
    Ok(())
}

/// Write `0xFE` + `i_errno` + `errno` (both 4-byte big-endian), as a stock server does on a
/// setup failure.
pub(crate) async fn write_server_error<W: AsyncWrite + Unpin>(
    w: &mut W,
    i_errno: i32,
    errno: i32,
) -> Result<(), WireError> {
    let mut b = [0u8; 9];
    b[0] = State::ServerError.byte();
    b[1..5].copy_from_slice(&i_errno.to_be_bytes());
    b[5..9].copy_from_slice(&errno.to_be_bytes());
    w.write_all(&b).await?;
    Ok(())
}

/// Read a 4-byte big-endian length and that many bytes (the body of a JSON message). The
/// length must be in `1..=max`; the whole message must arrive within `limit` (first byte
/// included). Memory grows with the bytes that actually arrive (at most `max`), not with the
/// announced length.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: u32,
    limit: Duration,
) -> Result<Vec<u8>, WireError> {
    let deadline = tokio::time::Instant::now()
        .checked_add(limit)
        .unwrap_or_else(tokio::time::Instant::now);
    let mut lb = [0u8; 4];
    read_exact_timeout(r, &mut lb, limit, "a JSON length").await?;
    let len = frame_len(lb, max)?;
    let mut body = Vec::with_capacity((len as usize).min(64 * 1024));
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    match tokio::time::timeout(left, r.take(len as u64).read_to_end(&mut body)).await {
        Err(_) => return Err(WireError::Timeout("a JSON body")),
        Ok(Err(e)) => return Err(WireError::Io(e)),
        Ok(Ok(_)) => {}
    }
    if body.len() < len as usize {
        return Err(WireError::Closed);
    }
    Ok(body)
}

/// Read one length-prefixed JSON message (see [`read_frame`]) as a [`Value`]. Only for small
/// documents (params, 8 KiB): a `Value` takes up to ~85 times the text's size.
pub(crate) async fn read_json<R: AsyncRead + Unpin>(
    r: &mut R,
    max: u32,
    limit: Duration,
) -> Result<Value, WireError> {
    let body = read_frame(r, max, limit).await?;
    serde_json::from_slice(&body).map_err(|e| WireError::BadJson(e.to_string()))
}

/// Write a value as compact JSON with its 4-byte big-endian length.
pub(crate) async fn write_json<W: AsyncWrite + Unpin>(
    w: &mut W,
    v: &Value,
) -> Result<(), WireError> {
    let body = serde_json::to_vec(v).map_err(|e| WireError::BadJson(e.to_string()))?;
    let len = u32::try_from(body.len())
        .map_err(|_| WireError::BadJson(format!("{} bytes of JSON", body.len())))?;
    let mut msg = Vec::with_capacity(body.len().saturating_add(4));
    msg.extend_from_slice(&len.to_be_bytes());
    msg.extend_from_slice(&body);
    w.write_all(&msg).await?;
    Ok(())
}
