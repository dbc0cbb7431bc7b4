//! The history file importer (`Store::import_history_from`): any bytes either import or are
//! refused with a sentence, never a panic; and what an import stores can always be read back
//! (every run of the store lists and opens with no field marked invalid).
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::store::Store;
use std::sync::OnceLock;

fn store() -> &'static Store {
    static S: OnceLock<Store> = OnceLock::new();
    S.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("netperfd-fuzz-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Store::open_dir(&d).expect("store")
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 1024 * 1024 {
        return;
    }
    let s = store();
    match s.import_history_from(data, 1024 * 1024) {
        Ok(sum) => {
            if sum.runs_added > 0 {
                let f = netperfd::store::RunFilter {
                    limit: Some(5000),
                    ..Default::default()
                };
                for r in s.list_runs(&f).expect("list after import") {
                    let one = s.get_run(r.id).expect("get").expect("run");
                    assert!(one.invalid.is_empty(), "imported run {} reads invalid: {:?}", r.id, one.invalid);
                    s.intervals(r.id).expect("intervals");
                    s.streams(r.id).expect("streams");
                }
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
