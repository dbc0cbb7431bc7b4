//! The iperf3 params document (client → server at PARAM_EXCHANGE, at most 8 KiB). Whatever
//! parses must write back a document that parses to the same params.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::engine::iperf3::wire::{Params, MAX_PARAMS_JSON};

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_PARAMS_JSON as usize {
        return;
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(p) = Params::from_json(&v) {
        let back = Params::from_json(&p.to_json()).expect("our own params document parses");
        assert_eq!(back.parallel, p.parallel);
        assert_eq!(back.len, p.len);
        assert_eq!(back.time, p.time);
        assert_eq!(back.protocol, p.protocol);
        assert_eq!(back.direction, p.direction);
    }
});
