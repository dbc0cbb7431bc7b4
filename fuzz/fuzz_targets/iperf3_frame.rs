//! iperf3 control framing as the server reads it: a 4-byte big-endian length (checked
//! against the params and results limits), then the body as params and as results.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::engine::iperf3::wire::{frame_len, Params, Results, MAX_CLIENT_RESULTS_JSON, MAX_PARAMS_JSON};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let prefix = [data[0], data[1], data[2], data[3]];
    let body = &data[4..];
    if let Ok(len) = frame_len(prefix, MAX_PARAMS_JSON) {
        assert!((1..=MAX_PARAMS_JSON).contains(&len));
        let body = &body[..body.len().min(len as usize)];
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
            let _ = Params::from_json(&v);
        }
    }
    if let Ok(len) = frame_len(prefix, MAX_CLIENT_RESULTS_JSON) {
        let body = &body[..body.len().min(len as usize)];
        let _ = Results::from_slice(body);
    }
});
