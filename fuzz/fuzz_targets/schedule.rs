//! Schedule requests (`ScheduleRequest::check`: the API body and the Schedules page) and the
//! period / time-of-day / stop-date words: no panic; a checked schedule's stored form comes
//! back to the same `Every`, and its next firing is in the future (or none).
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::spec::schedule::{self, ScheduleRequest};

/// 2026-12-01 00:00 UTC, Unix ms.
const NOW: i64 = 1_796_083_200_000;

fuzz_target!(|data: &[u8]| {
    if data.len() > 64 * 1024 {
        return;
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = schedule::parse_period(s);
        let _ = schedule::parse_time_of_day(s);
        let _ = schedule::parse_stop(s);
    }
    let Ok(req) = serde_json::from_slice::<ScheduleRequest>(data) else {
        return;
    };
    if let Ok(s) = req.check(60, NOW) {
        let (every_s, daily) = schedule::stored(s.every);
        assert_eq!(schedule::from_stored(every_s, daily.as_deref()), Some(s.every));
        let _ = schedule::describe(s.every);
        if let Some(next) = schedule::next_after(s.every, NOW, s.stop_at) {
            assert!(next > NOW, "next firing {next} not after {NOW}");
        }
    }
});
