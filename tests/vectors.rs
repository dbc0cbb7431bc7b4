//! Every captured wire vector of stock iperf3 3.12 (tests/vectors/iperf3-3.12, copied from the
//! project's reference captures) parses, with the values the capture holds — including 3.12's
//! −1 written as 18446744073709551615 — and re-emits in stock form.

use netperfd::engine::iperf3::wire::{Direction, Params, Protocol, Results};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/iperf3-3.12")
}

fn files(prefix: &str) -> Vec<(String, serde_json::Value)> {
    let mut v: Vec<(String, serde_json::Value)> = std::fs::read_dir(dir())
        .expect("vectors dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.ends_with(".json"))
        .map(|n| {
            let t = std::fs::read_to_string(dir().join(&n)).expect("read");
            let j = serde_json::from_str(&t).unwrap_or_else(|e| panic!("{n}: {e}"));
            (n, j)
        })
        .collect();
    netperfd::model::order::sort_by(&mut v, |a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn every_params_vector_parses_and_round_trips() {
    let all = files("params-");
    assert_eq!(all.len(), 13);
    for (name, j) in &all {
        let p = Params::from_json(j).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.client_version.as_deref(), Some("3.12"), "{name}");
        // Re-emitted in stock form, the document is byte-identical to what 3.12 sent.
        let text = std::fs::read_to_string(dir().join(name)).expect("read");
        assert_eq!(
            serde_json::to_string(&p.to_json()).expect("json"),
            text.trim_end(),
            "{name}"
        );
    }
    let get = |n: &str| Params::from_json(&all.iter().find(|(f, _)| f == n).expect(n).1).expect(n);
    let m = get("params-many-flags.json");
    assert_eq!((m.omit, m.time, m.parallel, m.len), (1, 2, 2, 8192));
    assert_eq!(
        (m.mss, m.window, m.bandwidth, m.tos),
        (Some(1400), Some(262_144), 50_000_000, 16)
    );
    assert!(m.nodelay && m.repeating_payload && m.zerocopy);
    assert_eq!(m.congestion.as_deref(), Some("reno"));
    assert_eq!(m.title.as_deref(), Some("mytitle"));
    let u = get("params-udp-64bit.json");
    assert_eq!(u.protocol, Protocol::Udp);
    assert!(u.udp_counters_64bit && u.dont_fragment);
    assert_eq!((u.len, u.bandwidth), (200, 10_000_000));
    assert_eq!(get("params-bidir-P2.json").direction, Direction::Bidir);
    assert_eq!(get("params-reverse.json").direction, Direction::Receive);
    assert_eq!(get("params-bytes-n10M.json").num, 10 * 1024 * 1024);
    assert_eq!(get("params-blocks-k100.json").blockcount, 100);
}

#[test]
fn every_results_vector_parses_with_minus_one_restored() {
    let all: Vec<_> = files("results-");
    assert_eq!(all.len(), 26);
    for (name, j) in &all {
        let r = Results::from_json(j).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!r.streams.is_empty(), "{name}");
        for s in &r.streams {
            assert!(s.retransmits >= -1, "{name}: retransmits {}", s.retransmits);
            assert!([1, 3, 4, 5].contains(&s.id), "{name}: id {}", s.id);
        }
        assert!(
            r.cpu_util_total >= 0.0 && r.cpu_util_total.is_finite(),
            "{name}"
        );
        // What we send back never carries 3.12's unsigned −1 or a null.
        let out = serde_json::to_string(&r.to_json()).expect("json");
        assert!(
            !out.contains("18446744073709551615") && !out.contains("null"),
            "{name}: {out}"
        );
    }
    let get = |n: &str| Results::from_json(&all.iter().find(|(f, _)| f == n).expect(n).1).expect(n);
    let s = get("results-server-tcp.json");
    assert_eq!(s.sender_has_retransmits, -1);
    assert_eq!(s.streams[0].bytes, 4_842_979_116);
    assert_eq!(s.streams[0].retransmits, -1);
    let c = get("results-client-tcp.json");
    assert_eq!(c.sender_has_retransmits, 1);
    assert_eq!(c.streams[0].retransmits, 8);
    assert_eq!(c.congestion_used.as_deref(), Some("bbr"));
    let u = get("results-server-udp-b100M.json");
    assert_eq!((u.streams[0].errors, u.streams[0].packets), (10, 763));
    assert!((u.streams[0].jitter - 5.118_610_225_514_555e-5).abs() < 1e-15);
    let b = get("results-server-bidir-P2.json");
    let ids: Vec<u32> = b.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![1, 3, 4, 5]);
    let t = get("results-server-get-server-output-text.json");
    assert!(t
        .server_output_text
        .as_deref()
        .unwrap_or_default()
        .contains("Accepted connection from 127.0.0.1"));
    let j = get("results-server-get-server-output-json.json");
    assert!(j.server_output_json.is_some());
}

#[test]
fn stock_outputs_are_single_json_documents_we_can_read() {
    // The client/server -J outputs of 3.12: the reader we use in tests and exports copes.
    let mut n = 0;
    for (name, j) in files("client-output-")
        .into_iter()
        .chain(files("server-output-"))
    {
        assert!(j.get("start").is_some() && j.get("end").is_some(), "{name}");
        n += 1;
    }
    assert!(n >= 20, "{n}");
}
