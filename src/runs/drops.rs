//! This host's drop counters around each iperf3 test its server runs (the daemon's, and
//! `netperfd -s`) or its command-line client runs (`netperfd -c`), sent with its results as
//! `netperfd_drops`: the board on the other end adds them to its loss ledger as `peer_*`
//! places. Stock clients and servers ignore the key.

use crate::board::counters::BoardReading;
use crate::board::sampler::port_of_address;
use crate::engine::iperf3::server::{DropCounters, TestFlow};
use crate::results::ledger::Flow;
use std::sync::Arc;
use std::time::Instant;

/// The hook of a server or client: reads the host's counters at TEST_START and again before
/// the results go out, and gives the places that moved on the test's port (the one holding its local
/// address) along this side's direction (`crate::results::ledger::peer_drops`), a qdisc's
/// skbs turned into datagrams with the test's own sender count and datagram size.
pub fn host_drops() -> DropCounters {
    DropCounters(Arc::new(|local, direction| {
        let ports: Vec<String> = port_of_address(local).into_iter().collect();
        let start = BoardReading::take();
        let t0 = Instant::now();
        Box::new(move |f: TestFlow| {
            let d = BoardReading::take().since(&start, t0.elapsed().as_secs_f64());
            let flow = Flow::udp(f.payload, f.ipv6, f.sent)
                .with_received(f.received)
                .with_dropped_locally(f.dropped_locally);
            Some(crate::results::ledger::peer_drops(
                direction, &ports, &d, &flow,
            ))
        })
    }))
}
