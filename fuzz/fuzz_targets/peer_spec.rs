//! The peer agent's `POST /peer/v1/run` body: JSON into a test spec, then its validation.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::peer::PeerTestSpec;

fuzz_target!(|data: &[u8]| {
    if data.len() > 64 * 1024 {
        return;
    }
    if let Ok(spec) = serde_json::from_slice::<PeerTestSpec>(data) {
        let _ = spec.run_direction();
        let _ = spec.to_client_spec();
    }
});
