//! Pacing of the UDP sender on a veth pair (its own test binary, so nothing else runs beside
//! it): the achieved rate is within 1 % of `-b` at 100M, 400M and 1000M, and at 100M the
//! sender's busiest 1 ms (the pacer's own record of when each datagram went) stays below
//! 2 × the target (a repaid debt is spread, not a burst). The receiving netperfd's busiest
//! 1 ms of arrivals (kernel timestamps) is checked too, more loosely: on a loaded machine
//! the receive softirq itself delivers datagrams in bunches (2.2 × seen once in a full run,
//! 4.2 × once beside two compiles, while the sender's own peak stayed under 1.4 ×): it
//! catches a sender that sends ten or more milliseconds of traffic at once.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn udp_pacing_is_accurate_and_burst_free() {
    let mut lab = Lab::new();
    let (pc1, board) = (lab.pc1.clone(), lab.board.clone());
    lab.spawn(&pc1, "netperfd-s", bin(), &["-s", "-J"]);
    lab.wait_port(&pc1, PC1_IP, 5201);
    let mut report = Vec::new();
    let mut sender_peak = 0.0;
    let mut stalls = 0.0;
    for (rate, target) in [("100M", 100e6), ("400M", 400e6), ("1000M", 1000e6)] {
        let name = format!("c-{rate}");
        let (code, out, err) = lab.run(
            &board,
            &name,
            bin(),
            &[
                "-c", PC1_IP, "-u", "-b", rate, "-l", "1448", "-t", "4", "-J",
            ],
            Duration::from_secs(30),
        );
        assert_eq!(code, Some(0), "{rate}: {err}{out}");
        let c = json(&out, "client");
        if rate == "100M" {
            sender_peak = num(&c, "/end/shortfall/sender_peak_1ms_bits_per_second");
            stalls = c
                .pointer("/end/shortfall/sender_stalls")
                .and_then(|v| v.as_f64())
                .unwrap_or(0.0);
        }
        let sent = num(&c, "/end/sum_sent/bits_per_second");
        let got = num(&c, "/end/sum_received/bits_per_second");
        report.push(format!(
            "{rate}: sent {:.2} Mbit/s, received {:.2} Mbit/s",
            sent / 1e6,
            got / 1e6
        ));
        assert!(
            ((target * 0.99)..=(target * 1.01)).contains(&sent),
            "{rate}: sent {sent} bit/s ({report:?})"
        );
        assert!(
            got >= target * 0.98,
            "{rate}: received {got} bit/s ({report:?})"
        );
    }
    // The server printed one -J document per test; the first is the 100M one.
    let (sout, _) = lab.output("netperfd-s");
    let first = sout
        .split("\n}\n")
        .next()
        .map(|d| format!("{d}\n}}"))
        .unwrap_or_default();
    let s = json(&first, "server -J (100M)");
    let peak = num(&s, "/end/streams/0/udp/peak_1ms_bits_per_second");
    eprintln!(
        "{report:?}; 100M busiest 1 ms: sender {:.1} Mbit/s, arrivals {:.1} Mbit/s",
        sender_peak / 1e6,
        peak / 1e6
    );
    // The pacer repays debt (issue 11): small debts (≤ 20 ms) at 1.05 × with no burst, larger
    // ones with at most 1.9 ms of traffic in any 1.2 ms of sending, so the sender's busiest
    // 1 ms stays below 2 × the rate — unless it stalled on a machine loaded for more than 1 s
    // (a full test run beside other builds): then the catch-up levels allow up to 5 ×
    // (engine::pacer::CATCH_UP_CAPS; measured 2.78 × with stalls under such load).
    let bound = if stalls > 0.0 { 5.0 } else { 2.0 };
    assert!(
        (100e6..bound * 100e6).contains(&sender_peak),
        "100M: the sender's busiest 1 ms at {sender_peak} bit/s ({stalls} stalls)"
    );
    assert!(
        (100e6..6.0 * 100e6).contains(&peak),
        "100M: busiest 1 ms of arrivals at {peak} bit/s (sender's {sender_peak})"
    );
}
