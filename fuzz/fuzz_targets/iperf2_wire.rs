//! iperf 2 wire: the client header (TCP first bytes and UDP first datagram), the UDP
//! datagram id, the server report in a FIN reply, and the iperf2/iperf3 first-bytes sniffing.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::engine::iperf2::wire::{
    classify_udp, ext_rate, looks_like_iperf2, looks_like_iperf3, read_udp_id, ClientHeader,
    ServerReport,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = ClientHeader::parse(data) {
        let _ = h.return_test();
        let _ = h.tcp_len();
        let _ = h.amount();
        let _ = h.check_return();
        let back = ClientHeader::parse(&h.to_bytes()).expect("our own header parses");
        assert_eq!(back.to_bytes(), h.to_bytes());
    }
    let _ = ext_rate(data);
    let _ = classify_udp(data);
    let _ = read_udp_id(data, false);
    let _ = read_udp_id(data, true);
    if let Ok((r, _layout)) = ServerReport::parse(data) {
        let _ = r.seconds();
        let _ = r.jitter_ms();
        let _ = r.bits_per_second();
    }
    for at in [0usize, 12, 16, 36, 40] {
        let _ = ServerReport::parse_at(data, at);
    }
    let _ = looks_like_iperf2(data);
    let _ = looks_like_iperf3(data);
});
