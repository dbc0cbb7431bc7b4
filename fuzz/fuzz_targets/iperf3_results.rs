//! The iperf3 results document: the server's bounded typed parse (from bytes) and the
//! client's (from a `Value`) must agree, and what parses must survive a round trip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::engine::iperf3::wire::{Results, MAX_CLIENT_RESULTS_JSON};

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_CLIENT_RESULTS_JSON as usize {
        return;
    }
    let typed = Results::from_slice(data);
    if let Ok(r) = &typed {
        assert!(r.streams.len() <= 256);
        let again = Results::from_json(&r.to_json()).expect("our own results document parses");
        assert_eq!(again.streams.len(), r.streams.len());
    }
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        if let (Ok(a), Ok(mut b)) = (&typed, Results::from_json(&v)) {
            b.server_output_json = None;
            assert_eq!(a.streams, b.streams);
            assert_eq!(a.sender_has_retransmits, b.sender_has_retransmits);
        }
    }
});
