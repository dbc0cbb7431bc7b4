//! HTTP request heads (payload, sink and source ports, at most 16 KiB) and the Range and
//! size values the payload server reads from them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::engine::http::{head_end, parse_range, parse_request, parse_size, RangeAsk, MAX_HEAD};

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_HEAD + 4 {
        return;
    }
    let end = head_end(data);
    if let Some(e) = end {
        assert!(e <= data.len());
    }
    let head = &data[..end.unwrap_or(data.len())];
    if let Ok(h) = parse_request(head) {
        let _ = h.keep_alive();
        let _ = h.path();
        let total = h.target.len() as u64 * 1_000_003;
        match parse_range(h.header("range"), total) {
            RangeAsk::Part { first, last } => assert!(first <= last && last < total),
            RangeAsk::Full | RangeAsk::Unsatisfiable | RangeAsk::Invalid => {}
        }
        if let Some(q) = h.target.split('?').nth(1) {
            let _ = parse_size(q);
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        for total in [0u64, 1, 1000, u64::MAX] {
            if let RangeAsk::Part { first, last } = parse_range(Some(s), total) {
                assert!(first <= last && last < total);
            }
        }
        let _ = parse_size(s);
    }
});
