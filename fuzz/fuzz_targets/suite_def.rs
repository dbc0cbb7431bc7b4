//! Suite definitions (`SuiteDef::from_json`: the API body, the Suites page, an import file):
//! no panic; a definition that parses round-trips through its JSON and plans the same tests.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::spec::suite::SuiteDef;

fuzz_target!(|data: &[u8]| {
    if data.len() > 256 * 1024 {
        return;
    }
    if let Ok(d) = SuiteDef::from_json(data) {
        let text = serde_json::to_vec(&d).expect("serialize");
        let again = SuiteDef::from_json(&text).expect("a valid definition stays valid");
        assert_eq!(again, d);
    }
});
