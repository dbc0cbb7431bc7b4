//! Scheduled suite runs as a user asks for them (Schedules page, `/api/schedules`): which
//! suite, where to run it, every N minutes / hours or daily at HH:MM, an optional stop date,
//! checked once; and when such a schedule fires next. Times of day and dates are UTC, like
//! every time the UI shows.

use crate::spec::suite::RunTargetForm;
use chrono::{NaiveDate, NaiveTime, TimeZone, Utc};
use serde::Deserialize;

/// Longest period, seconds (31 days).
pub(crate) const MAX_PERIOD_S: u64 = 31 * 24 * 3600;

/// A schedule as the API and the form send it (all text fields may be numbers).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    /// The suite definition: its id or name.
    pub suite: String,
    /// Peer host name or address.
    pub host: String,
    /// Overrides the definition's peer port.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub port: Option<String>,
    /// Overrides the definition's board port.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub bind: Option<String>,
    /// Overrides every step's seconds.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub time: Option<String>,
    /// Board / change label of the suite runs (default: the board's host name).
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub label: Option<String>,
    /// Period: "30m", "2h", "90s" (a plain number is minutes). Exactly one of `every` and
    /// `daily_at`.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub every: Option<String>,
    /// Daily at "HH:MM" UTC.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub daily_at: Option<String>,
    /// No firing from then on: "YYYY-MM-DD" (the end of that day, UTC) or
    /// "YYYY-MM-DD HH:MM" / "YYYY-MM-DDTHH:MM" UTC.
    #[serde(default, deserialize_with = "crate::model::input::opt_text")]
    pub stop_at: Option<String>,
    /// Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// When a schedule fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    /// Every this many seconds, the first time one period after it was saved.
    Period(u64),
    /// Daily at this UTC time of day (hours, minutes).
    Daily(u32, u32),
}

/// A checked schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub suite: String,
    pub target: serde_json::Value,
    pub every: Every,
    /// Unix ms; no firing at or after it.
    pub stop_at: Option<i64>,
    pub enabled: bool,
}

fn opt(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// "30m", "2h", "90s", "45" (minutes) → seconds.
pub fn parse_period(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 's')) => (&s[..i], 1),
        Some((i, 'm')) => (&s[..i], 60),
        Some((i, 'h')) => (&s[..i], 3600),
        Some((i, 'd')) => (&s[..i], 86400),
        _ => (s, 60),
    };
    let n: u64 = num.trim().parse().map_err(|_| {
        format!(
            "period '{s}' is not a whole number of seconds (s), minutes (m), hours (h) or days (d)"
        )
    })?;
    n.checked_mul(mult)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("period '{s}' must be above 0"))
}

/// "HH:MM" → (hours, minutes).
pub fn parse_time_of_day(s: &str) -> Result<(u32, u32), String> {
    let t = NaiveTime::parse_from_str(s.trim(), "%H:%M")
        .map_err(|_| format!("daily time '{}' is not HH:MM (00:00..23:59)", s.trim()))?;
    use chrono::Timelike;
    Ok((t.hour(), t.minute()))
}

/// A stop date: "YYYY-MM-DD" (end of that day) or "YYYY-MM-DD HH:MM" (also with "T"), UTC →
/// Unix ms.
pub fn parse_stop(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let err = || format!("stop date '{s}' is not YYYY-MM-DD or YYYY-MM-DD HH:MM (UTC)");
    let dt = if s.len() == 10 {
        NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .map_err(|_| err())?
            .succ_opt()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .ok_or_else(err)?
    } else {
        chrono::NaiveDateTime::parse_from_str(&s.replacen('T', " ", 1), "%Y-%m-%d %H:%M")
            .map_err(|_| err())?
    };
    Ok(Utc.from_utc_datetime(&dt).timestamp_millis())
}

impl ScheduleRequest {
    /// Check everything but whether the suite exists. `min_period_s` is the shortest period
    /// allowed; `now` (Unix ms) refuses a stop date already past.
    pub fn check(&self, min_period_s: u64, now: i64) -> Result<Schedule, String> {
        let suite = opt(&Some(self.suite.clone()))
            .ok_or("choose a suite")?
            .to_string();
        let host = self.host.trim();
        if host.is_empty() {
            return Err("a peer host is required".into());
        }
        if !crate::model::names::valid_host(host) {
            return Err(format!("'{host}' is not a host name or address"));
        }
        let every = match (opt(&self.every), opt(&self.daily_at)) {
            (Some(_), Some(_)) => {
                return Err("give either a period or a daily time, not both".into())
            }
            (None, None) => {
                return Err("give a period (e.g. 30m, 2h) or a daily time (HH:MM)".into())
            }
            (Some(p), None) => {
                let s = parse_period(p)?;
                if s < min_period_s {
                    return Err(format!(
                        "period {s} s is shorter than the shortest allowed, {min_period_s} s"
                    ));
                }
                if s > MAX_PERIOD_S {
                    return Err(format!("period {s} s is longer than 31 days"));
                }
                Every::Period(s)
            }
            (None, Some(t)) => {
                let (h, m) = parse_time_of_day(t)?;
                Every::Daily(h, m)
            }
        };
        let stop_at = match opt(&self.stop_at) {
            Some(s) => {
                let t = parse_stop(s)?;
                if t <= now {
                    return Err(format!("stop date '{s}' is in the past"));
                }
                Some(t)
            }
            None => None,
        };
        // Stored as given (text); read into a typed target when it is checked or fires.
        let target = RunTargetForm {
            host: host.to_string(),
            port: opt(&self.port).map(str::to_string),
            bind: opt(&self.bind).map(str::to_string),
            time: opt(&self.time).map(str::to_string),
            label: opt(&self.label).map(str::to_string),
            ..Default::default()
        };
        Ok(Schedule {
            suite,
            target: serde_json::json!({
                "host": target.host, "port": target.port, "bind": target.bind,
                "time": target.time, "label": target.label,
            }),
            every,
            stop_at,
            enabled: self.enabled.unwrap_or(true),
        })
    }
}

/// The first firing strictly after `after` (Unix ms), or `None` when that is at or past
/// `stop_at`. A period counts from `after`.
pub fn next_after(every: Every, after: i64, stop_at: Option<i64>) -> Option<i64> {
    let next = match every {
        Every::Period(s) => after.checked_add(i64::try_from(s).ok()?.checked_mul(1000)?)?,
        Every::Daily(h, m) => {
            let now = Utc.timestamp_millis_opt(after).single()?;
            let today = now.date_naive().and_hms_opt(h, m, 0)?;
            let mut t = Utc.from_utc_datetime(&today).timestamp_millis();
            if t <= after {
                t += 86_400_000;
            }
            t
        }
    };
    match stop_at {
        Some(s) if next >= s => None,
        _ => Some(next),
    }
}

/// The stored form of `every`: (period seconds, daily "HH:MM").
pub fn stored(every: Every) -> (Option<i64>, Option<String>) {
    match every {
        Every::Period(s) => (Some(s as i64), None),
        Every::Daily(h, m) => (None, Some(format!("{h:02}:{m:02}"))),
    }
}

/// Back from the stored form; `None` for a row with neither (or a bad time).
pub fn from_stored(every_s: Option<i64>, daily_at: Option<&str>) -> Option<Every> {
    match (every_s, daily_at) {
        (Some(s), _) if s > 0 => Some(Every::Period(s as u64)),
        (_, Some(t)) => parse_time_of_day(t).ok().map(|(h, m)| Every::Daily(h, m)),
        _ => None,
    }
}

/// "every 30 min", "every 2 h", "daily at 06:30 UTC".
pub fn describe(every: Every) -> String {
    match every {
        Every::Period(s) if s % 3600 == 0 => format!("every {} h", s / 3600),
        Every::Period(s) if s % 60 == 0 => format!("every {} min", s / 60),
        Every::Period(s) => format!("every {s} s"),
        Every::Daily(h, m) => format!("daily at {h:02}:{m:02} UTC"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> ScheduleRequest {
        ScheduleRequest {
            suite: "soak".into(),
            host: "192.0.2.2".into(),
            every: Some("30m".into()),
            ..Default::default()
        }
    }

    #[test]
    fn periods_times_and_stop_dates_parse() {
        assert_eq!(parse_period("30m").unwrap(), 1800);
        assert_eq!(parse_period("2h").unwrap(), 7200);
        assert_eq!(parse_period("90s").unwrap(), 90);
        assert_eq!(parse_period("45").unwrap(), 2700);
        assert!(parse_period("0m").is_err());
        assert!(parse_period("fast").is_err());
        assert_eq!(parse_time_of_day("06:30").unwrap(), (6, 30));
        assert!(parse_time_of_day("24:00").is_err());
        // 2026-12-02 ends at 2026-12-03 00:00 UTC = 1796256000 s.
        assert_eq!(parse_stop("2026-12-02").unwrap(), 1_796_256_000_000);
        assert_eq!(parse_stop("2026-12-02T06:30").unwrap(), 1_796_193_000_000);
        assert!(parse_stop("02.12.2026").is_err());
    }

    #[test]
    fn checks_refuse_bad_schedules() {
        let now = 1_796_000_000_000;
        assert_eq!(req().check(60, now).unwrap().every, Every::Period(1800));
        let mut r = req();
        r.every = Some("30s".into());
        assert!(r.check(60, now).unwrap_err().contains("shortest"));
        assert_eq!(r.check(1, now).unwrap().every, Every::Period(30));
        r.daily_at = Some("06:00".into());
        assert!(r.check(1, now).unwrap_err().contains("not both"));
        let mut r = req();
        r.every = None;
        assert!(r.check(60, now).is_err());
        let mut r = req();
        r.stop_at = Some("2020-01-01".into());
        assert!(r.check(60, now).unwrap_err().contains("past"));
        let mut r = req();
        r.host = "bad host;".into();
        assert!(r.check(60, now).is_err());
    }

    #[test]
    fn next_firing() {
        // 2026-12-02 06:30 UTC.
        let t = 1_796_193_000_000;
        assert_eq!(next_after(Every::Period(60), t, None), Some(t + 60_000));
        assert_eq!(
            next_after(Every::Daily(7, 0), t, None),
            Some(t + 30 * 60_000)
        );
        assert_eq!(
            next_after(Every::Daily(6, 30), t, None),
            Some(t + 86_400_000)
        );
        assert_eq!(next_after(Every::Period(60), t, Some(t + 60_000)), None);
        assert_eq!(from_stored(Some(60), None), Some(Every::Period(60)));
        assert_eq!(from_stored(None, Some("07:05")), Some(Every::Daily(7, 5)));
        assert_eq!(describe(Every::Period(7200)), "every 2 h");
    }
}
