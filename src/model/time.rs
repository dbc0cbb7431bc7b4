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

/// A day as typed in a date field ("2026-11-30", UTC): Unix ms at its 00:00:00.
/// Errors name the text and the expected form (YYYY-MM-DD).
pub fn parse_day(s: &str) -> Result<i64, String> {
    chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
        .ok_or_else(|| format!("'{}' is not a date (YYYY-MM-DD)", s.trim()))
}

/// Milliseconds in one day.
pub const DAY_MS: i64 = 86_400_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_parse_to_utc_midnight_and_bad_ones_are_refused() {
        assert_eq!(parse_day("1970-01-02"), Ok(DAY_MS));
        assert_eq!(
            parse_day(" 2026-12-01 ").map(fmt_time),
            Ok("2026-12-01 00:00:00 UTC".into())
        );
        assert!(parse_day("2026-13-01").is_err());
        assert!(parse_day("yesterday").unwrap_err().contains("YYYY-MM-DD"));
    }
}
