//! Wall-clock times as history keeps them: Unix milliseconds.

/// Now, Unix ms.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Unix ms as "2026-11-30 12:00:05 UTC".
pub fn fmt_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}
