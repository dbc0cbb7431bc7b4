//! iperf3 UDP datagrams (32- and 64-bit sequence headers) through the receiver's loss,
//! order and jitter accounting, and iperf 2's UDP header through its receiver.
#![no_main]
use libfuzzer_sys::fuzz_target;
use netperfd::engine::datagram::read_header;
use netperfd::engine::udp::UdpRecv;

fuzz_target!(|data: &[u8]| {
    let _ = read_header(data, false);
    let _ = read_header(data, true);
    // First byte: flags; then datagrams of 1..=64 bytes whose lengths come from the input.
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let wide = flags & 1 != 0;
    let mut rx = if flags & 2 != 0 {
        UdpRecv::new_iperf2(wide)
    } else {
        UdpRecv::new(wide)
    };
    let mut t: i64 = 1_000_000;
    while let Some((&n, r)) = rest.split_first() {
        let n = (n as usize % 64 + 1).min(r.len());
        let (dg, r) = r.split_at(n);
        t += (n as i64) * 37;
        let _ = rx.on_datagram(dg, t);
        rest = r;
    }
    let _ = rx.lost();
    let _ = rx.lost_after_omit();
    let _ = rx.expected_after_omit();
});
