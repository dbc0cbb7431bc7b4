//! `netperfd -c HOST --iperf2 [-u -b -l -t -n -i -P -r -d -L -p -B -w]` and
//! `netperfd -s --iperf2 [-p -B -i]`: tests against / for iperf 2 peers, printed in iperf 2's
//! style (`[  1] 0.0000-1.0000 sec  1.38 MBytes  11.5 Mbits/sec`). Not for: iperf3 (cli.rs).

use crate::cmd::iperf::IperfArgs;
use crate::engine::iperf2::client::{self, Iperf2Spec};
use crate::engine::iperf2::server::{self, Iperf2ServerConfig};
use crate::engine::iperf2::wire::{self, Return};
use crate::engine::iperf2::{text_line, text_summary, Event, TestInfo};
use crate::engine::report::parse_suffixed;
use crate::model::{RunDirection, RunProtocol, RunStatus};
use std::collections::HashMap;
use std::io::Write;

fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    let _ = o.flush();
}

/// Build the iperf 2 client spec from the flags, or say which flag is wrong.
pub fn spec_from(a: &IperfArgs, host: &str) -> Result<Iperf2Spec, String> {
    let mut s = Iperf2Spec::new(host);
    if a.port.len() > 1 {
        return Err("a client takes one port (-p)".into());
    }
    if let Some(p) = a.port.first() {
        s.port = *p;
    }
    if a.reverse || a.bidir {
        return Err("iperf 2 peers know no -R/--bidir: use -r (after) or -d (at once)".into());
    }
    if a.tradeoff && a.dualtest {
        return Err("-r and -d exclude each other".into());
    }
    s.ret = if a.dualtest {
        Return::Dual
    } else if a.tradeoff {
        Return::Tradeoff
    } else {
        Return::None
    };
    s.udp = a.udp;
    if a.udp {
        s.rate = wire::UDP_DEFAULT_RATE;
    }
    if let Some(b) = &a.bitrate {
        s.rate = parse_suffixed(b, true).map_err(|e| format!("-b: {e}"))?;
    }
    if let Some(l) = &a.length {
        let l = parse_suffixed(l, false).map_err(|e| format!("-l: {e}"))?;
        s.len = u32::try_from(l).map_err(|_| "-l: too large".to_string())?;
    }
    if let Some(n) = &a.bytes {
        s.bytes = parse_suffixed(n, false).map_err(|e| format!("-n: {e}"))?;
    }
    if let Some(t) = a.time {
        s.time = t as f64;
    }
    s.parallel = a.parallel;
    s.listen_port = a.listenport.unwrap_or(0);
    s.trip_times = a.trip_times;
    s.interval = a.interval;
    if let Some(b) = &a.bind {
        // `-B addr%dev` binds the device too, as iperf 2 2.1+ does.
        let (ip, dev) = crate::cmd::iperf::parse_bind(b)?;
        s.bind = Some(ip);
        s.bind_dev = dev;
    }
    if let Some(d) = &a.bind_dev {
        s.bind_dev = Some(d.clone());
    }
    if let Some(w) = &a.window {
        let w = parse_suffixed(w, false).map_err(|e| format!("-w: {e}"))?;
        s.window = Some(u32::try_from(w).map_err(|_| "-w: too large".to_string())?);
    }
    if let Some(ms) = a.connect_timeout {
        s.connect_timeout = std::time::Duration::from_millis(ms.max(1));
    }
    s.validate()?;
    Ok(s)
}

/// The connection line and the column heads; a `--trip-times` client (UDP) adds
/// "(trip-times)" and the latency and PPS columns, as a stock 2.1 server prints them.
fn banner(info: &TestInfo) -> String {
    let p = crate::results::iperf2_summary::Iperf2Params::of_params(&info.params);
    let trip = p.trip_times;
    let recv = info.direction != RunDirection::Send;
    let udp_recv = info.protocol == RunProtocol::Udp && recv;
    // A stock server's words when it will not measure a --trip-times client.
    let ignored = match p.trip_times_ignored.as_deref() {
        Some(why) => format!("WARN: ignore --trip-times because {why}\n"),
        None => String::new(),
    };
    format!(
        "{ignored}[  1] local {} port {} connected with {} port {}{}\n[ ID] Interval       Transfer     Bandwidth{}\n",
        info.local_host,
        info.local_port,
        info.peer_host,
        info.peer_port,
        if trip { " (trip-times)" } else { "" },
        match (udp_recv, trip, recv) {
            (true, true, _) => "        Jitter   Lost/Total Datagrams  Latency avg/min/max/stdev PPS",
            (true, false, _) => "        Jitter   Lost/Total Datagrams",
            (false, true, true) => "       Burst Latency avg/min/max/stdev (cnt/size)",
            _ => "",
        }
    )
}

/// Print one event as iperf 2 would; with `json`, only one JSON line per finished test
/// (`{"test", "info", "outcome"}`, byte counts exact).
fn print_event(ev: &Event, infos: &mut HashMap<u64, TestInfo>, json: bool) {
    if json {
        match ev {
            Event::Started { test, info } => {
                infos.insert(*test, (**info).clone());
            }
            Event::Interval { .. } => {}
            Event::Finished { test, outcome } => {
                let doc = serde_json::json!({
                    "test": test,
                    "info": infos.remove(test),
                    "outcome": outcome,
                });
                out(&format!("{doc}\n"));
            }
        }
        return;
    }
    match ev {
        Event::Started { test, info } => {
            out(&banner(info));
            infos.insert(*test, (**info).clone());
        }
        Event::Interval { record, .. } => {
            for s in &record.streams {
                let udp = s
                    .udp
                    .filter(|_| !s.sender)
                    .map(|u| crate::engine::iperf2::UdpFigures {
                        bytes: s.bytes,
                        seconds: s.end - s.start,
                        lost: u.lost,
                        total: u.packets,
                        out_of_order: u.out_of_order,
                        jitter_ms: u.jitter_ms,
                        latency_ms: u.latency,
                    });
                let line = text_line(s.id, s.start, s.end, s.bytes, udp.as_ref());
                match (&s.latency, &udp) {
                    (Some(l), None) => out(&crate::engine::iperf2::with_burst_latency(
                        &line, l, s.bytes,
                    )),
                    _ => out(&line),
                }
            }
        }
        Event::Finished { test, outcome } => {
            infos.remove(test);
            out(&text_summary(outcome));
            if let Some(e) = &outcome.error {
                eprintln!("netperfd: {e}");
            }
        }
    }
}

/// Run an iperf 2 client test; returns the exit code.
pub async fn run_client(a: &IperfArgs, host: &str) -> i32 {
    let spec = match spec_from(a, host) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("netperfd: parameter error - {e}");
            return 1;
        }
    };
    let json = a.json;
    if !json {
        out(&format!(
            "------------------------------------------------------------\nClient connecting to {}, {} port {}\n------------------------------------------------------------\n",
            spec.host,
            if spec.udp { "UDP" } else { "TCP" },
            spec.port
        ));
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = std::sync::Arc::new(tokio::sync::Notify::new());
    let c2 = cancel.clone();
    crate::engine::task::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            c2.notify_one();
        }
    });
    let printer = crate::engine::task::spawn(async move {
        let mut infos = HashMap::new();
        while let Some(ev) = rx.recv().await {
            print_event(&ev, &mut infos, json);
        }
    });
    let o = client::run(spec, Some(tx), Some(cancel)).await;
    let _ = printer.await;
    match o.status {
        RunStatus::Completed => 0,
        _ => 1,
    }
}

/// Run the iperf 2 server (TCP and UDP on each port, default 5001); returns the exit code.
pub async fn run_server(a: &IperfArgs) -> i32 {
    let mut cfg = Iperf2ServerConfig {
        interval: if a.interval > 0.0 { a.interval } else { 1.0 },
        ..Default::default()
    };
    if !a.port.is_empty() {
        cfg.ports = a.port.clone();
    }
    if cfg.ports.contains(&0) {
        eprintln!("netperfd: parameter error - port must be 1..65535 (-p)");
        return 1;
    }
    if let Some(b) = &a.bind {
        match b.parse() {
            Ok(ip) => cfg.bind = Some(ip),
            Err(_) => {
                eprintln!("netperfd: parameter error - '{b}' is not an IP address (-B)");
                return 1;
            }
        }
    }
    let l = match server::bind(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("netperfd: error - {e}");
            return 1;
        }
    };
    let ports: Vec<String> = cfg.ports.iter().map(|p| p.to_string()).collect();
    let json = a.json;
    if !json {
        out(&format!(
            "------------------------------------------------------------\nServer listening on TCP and UDP port {} (iperf 2)\n------------------------------------------------------------\n",
            ports.join(", ")
        ));
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    crate::engine::task::spawn(async move {
        let mut infos = HashMap::new();
        while let Some(ev) = rx.recv().await {
            print_event(&ev, &mut infos, json);
        }
    });
    let shutdown = std::sync::Arc::new(tokio::sync::Notify::new());
    let s2 = shutdown.clone();
    crate::engine::task::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            s2.notify_one();
        }
    });
    server::serve(l, cfg, Some(tx), Some(shutdown)).await;
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::iperf2::{Role, UdpFigures};
    use crate::engine::report::LatencyMs;

    fn info(trip: bool) -> TestInfo {
        TestInfo {
            role: Role::Server,
            protocol: RunProtocol::Udp,
            peer_host: "127.0.0.1".into(),
            peer_port: 39150,
            local_host: "127.0.0.1".into(),
            local_port: 5999,
            direction: RunDirection::Receive,
            params: serde_json::json!({"iperf2": true, "trip_times": trip}),
        }
    }

    /// A TCP `--trip-times` client: "(trip-times)" and the stock 2.1/2.2 server's burst
    /// latency columns, `avg/min/max/stdev ms (cnt/size)`; the stock WARN line when ignored.
    #[test]
    fn tcp_trip_times_lines_carry_burst_latency() {
        let mut i = info(true);
        i.protocol = RunProtocol::Tcp;
        let b = banner(&i);
        assert!(b.contains("port 39150 (trip-times)\n"), "{b}");
        assert!(
            b.contains("Burst Latency avg/min/max/stdev (cnt/size)"),
            "{b}"
        );
        // Our own sending client: no latency column.
        i.direction = RunDirection::Send;
        assert!(!banner(&i).contains("Latency"));
        let mut ig = info(false);
        ig.protocol = RunProtocol::Tcp;
        ig.params["trip_times_ignored"] = "the client's start time is 2000 s from our clock".into();
        assert!(banner(&ig).starts_with("WARN: ignore --trip-times because the client's"));
        let l = LatencyMs {
            count: 22162,
            avg: 1.9124,
            min: 0.0231,
            max: 68.4594,
            stdev: 4.2991,
        };
        let line = crate::engine::iperf2::with_burst_latency(
            &text_line(1, 0.0, 2.0, 22162 * 131_072, None),
            &l,
            22162 * 131_072,
        );
        assert!(
            line.ends_with("  1.912/0.023/68.459/4.299 ms (22162/131072)\n"),
            "{line}"
        );
        let none = crate::engine::iperf2::with_burst_latency(
            &text_line(1, 0.0, 1.0, 0, None),
            &LatencyMs::default(),
            0,
        );
        assert!(none.ends_with("  -/-/-/- ms (0/0)\n"), "{none}");
    }

    /// A `--trip-times` client: "(trip-times)" and the latency/PPS columns, as the stock
    /// 2.1.8 `-e` server prints them (`0.008/0.002/0.184/0.009 ms 895 pps`); without it the
    /// plain table.
    #[test]
    fn trip_times_lines_carry_latency_and_pps() {
        let b = banner(&info(true));
        assert!(b.contains("port 39150 (trip-times)\n"), "{b}");
        assert!(b.contains("Latency avg/min/max/stdev PPS"), "{b}");
        let plain = banner(&info(false));
        assert!(
            !plain.contains("trip-times") && !plain.contains("Latency"),
            "{plain}"
        );
        let mut u = UdpFigures {
            bytes: 1_312_710,
            seconds: 1.0,
            total: 893,
            jitter_ms: 0.002,
            latency_ms: Some(LatencyMs {
                count: 895,
                avg: 0.0081,
                min: 0.0024,
                max: 0.1838,
                stdev: 0.0093,
            }),
            ..Default::default()
        };
        let line = text_line(1, 0.0, 1.0, u.bytes, Some(&u));
        assert!(
            line.ends_with(" 0/893 (0.00%) 0.008/0.002/0.184/0.009 ms 895 pps\n"),
            "{line}"
        );
        // An interval where nothing arrived: the stock placeholder.
        u.latency_ms = Some(LatencyMs::default());
        let line = text_line(1, 1.0, 2.0, 0, Some(&u));
        assert!(line.ends_with(" -/-/-/- ms 0 pps\n"), "{line}");
        u.latency_ms = None;
        assert!(!text_line(1, 0.0, 1.0, 0, Some(&u)).contains("pps"));
    }
}
