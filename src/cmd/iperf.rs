//! The iperf3-compatible command line: `netperfd -c HOST …` and `netperfd -s …` take iperf3's
//! flags and print iperf3's text table or `-J` document. Not for: the daemon or history
//! commands (see `main.rs`).

use crate::engine::iperf3::client::{self, ClientSpec, Event};
use crate::engine::iperf3::server::{self, ServerConfig, ServerEvent};
use crate::engine::iperf3::wire::{self, Direction, Protocol};
use crate::engine::net::Family;
use crate::engine::report::{self, parse_suffixed, Report};
use clap::Args;
use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// iperf3's options (the subset netperfd implements; same letters, same defaults).
#[derive(Debug, Clone, Args, Default)]
pub struct IperfArgs {
    /// Run in client mode, connecting to HOST
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub client: Option<String>,
    /// Run in server mode
    #[arg(short = 's', long = "server")]
    pub server: bool,
    /// Server port to listen on / connect to (server: repeat or comma-separate for several)
    #[arg(short = 'p', long = "port", value_delimiter = ',', value_name = "PORT")]
    pub port: Vec<u16>,
    /// Time in seconds to transmit for (default 10)
    #[arg(short = 't', long = "time", value_name = "SECS")]
    pub time: Option<u32>,
    /// Number of bytes to transmit (instead of -t), K/M/G suffixes
    #[arg(short = 'n', long = "bytes", value_name = "N[KMG]")]
    pub bytes: Option<String>,
    /// Number of blocks (packets) to transmit (instead of -t or -n)
    #[arg(short = 'k', long = "blockcount", value_name = "N[KMG]")]
    pub blockcount: Option<String>,
    /// Number of parallel client streams to run (1..128)
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1)]
    pub parallel: u32,
    /// Run in reverse mode (server sends, client receives)
    #[arg(short = 'R', long = "reverse")]
    pub reverse: bool,
    /// Run in bidirectional mode (client and server send and receive)
    #[arg(long = "bidir")]
    pub bidir: bool,
    /// Target bitrate in bits/sec per stream (0 for unlimited), K/M/G suffixes, optional /burst
    #[arg(short = 'b', long = "bitrate", value_name = "N[KMG][/burst]")]
    pub bitrate: Option<String>,
    /// Length of buffer to read or write (default 128 KB for TCP)
    #[arg(short = 'l', long = "length", value_name = "N[KMG]")]
    pub length: Option<String>,
    /// Set send/receive socket buffer sizes (window size)
    #[arg(short = 'w', long = "window", value_name = "N[KMG]")]
    pub window: Option<String>,
    /// Set TCP maximum segment size (MTU - 40 bytes)
    #[arg(short = 'M', long = "set-mss", value_name = "BYTES")]
    pub mss: Option<u32>,
    /// Set TCP no delay, disabling Nagle's algorithm
    #[arg(short = 'N', long = "no-delay")]
    pub nodelay: bool,
    /// Set TCP congestion control algorithm
    #[arg(short = 'C', long = "congestion", value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Perform pre-test for N seconds and omit the pre-test statistics
    #[arg(short = 'O', long = "omit", value_name = "N", default_value_t = 0)]
    pub omit: u32,
    /// Seconds between periodic throughput reports (0 to disable)
    #[arg(
        short = 'i',
        long = "interval",
        value_name = "SECS",
        default_value_t = 1.0
    )]
    pub interval: f64,
    /// Bind to the interface associated with the address HOST
    #[arg(short = 'B', long = "bind", value_name = "HOST")]
    pub bind: Option<String>,
    /// Bind to the network interface with SO_BINDTODEVICE
    #[arg(long = "bind-dev", value_name = "DEV")]
    pub bind_dev: Option<String>,
    /// Bind data streams to a specific client port
    #[arg(long = "cport", value_name = "PORT")]
    pub cport: Option<u16>,
    /// Get results from the server
    #[arg(long = "get-server-output")]
    pub get_server_output: bool,
    /// Output in JSON format
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Timeout for the control connection setup, in ms
    #[arg(long = "connect-timeout", value_name = "MS")]
    pub connect_timeout: Option<u64>,
    /// Only use IPv4
    #[arg(short = '4', long = "version4")]
    pub v4: bool,
    /// Only use IPv6
    #[arg(short = '6', long = "version6")]
    pub v6: bool,
    /// Handle one client connection then exit (server)
    #[arg(short = '1', long = "one-off")]
    pub one_off: bool,
    /// Run the server as a daemon
    #[arg(short = 'D', long = "daemon")]
    pub daemon: bool,
    /// Use UDP rather than TCP
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
    /// Enable fair-queuing based socket pacing in bits/s per stream (SO_MAX_PACING_RATE;
    /// TCP, and UDP where an fq qdisc enforces it), K/M/G suffixes
    #[arg(long = "fq-rate", value_name = "N[KMG]")]
    pub fq_rate: Option<String>,
    /// netperfd: who paces a UDP sender at -b: auto (the kernel where the egress port's root
    /// qdisc is fq, else user space), kernel (always: SO_MAX_PACING_RATE and 8 ms batches),
    /// user (the user-space pacer always)
    #[arg(long = "udp-pacing", value_name = "auto|kernel|user")]
    pub udp_pacing: Option<String>,
    /// Prefix every output line with this string
    #[arg(short = 'T', long = "title", value_name = "STR")]
    pub title: Option<String>,
    /// Data string to include in client and server JSON
    #[arg(long = "extra-data", value_name = "STR")]
    pub extra_data: Option<String>,
    /// Set the IP type of service (0-255)
    #[arg(short = 'S', long = "tos", value_name = "N")]
    pub tos: Option<u32>,
    /// Use 64-bit counters in UDP test packets
    #[arg(long = "udp-counters-64bit")]
    pub udp_counters_64bit: bool,
    /// Use repeating pattern in payload, instead of randomized payload
    #[arg(long = "repeating-payload")]
    pub repeating_payload: bool,
    /// Set IPv4 Don't Fragment flag (UDP)
    #[arg(long = "dont-fragment")]
    pub dont_fragment: bool,
    /// Ignore received TCP data instead of copying it (MSG_TRUNC), on whichever side receives
    #[arg(long = "skip-rx-copy")]
    pub skip_rx_copy: bool,
    /// Use a 'zero copy' method of sending data (sendfile from an in-memory file; TCP)
    #[arg(short = 'Z', long = "zerocopy")]
    pub zerocopy: bool,
    /// Output in line-delimited JSON format: one {"event": …, "data": …} per line
    #[arg(long = "json-stream")]
    pub json_stream: bool,
    /// Use control connection TCP keepalive: KEEPIDLE/KEEPINTV/KEEPCNT (s/s/probes), each optional
    #[arg(
        long = "cntl-ka",
        value_name = "IDLE/INTV/CNT",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub cntl_ka: Option<String>,
    /// Emit a timestamp at the start of each output line (optional strftime format, default "%c ")
    #[arg(
        long = "timestamps",
        value_name = "FORMAT",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "%c "
    )]
    pub timestamps: Option<String>,
    /// Idle timeout for receiving data, ms (a receiving client; default 120000): the test ends
    /// this long after the last data (to within a tenth, at most 2 s; stock may take longer)
    #[arg(long = "rcv-timeout", value_name = "MS")]
    pub rcv_timeout: Option<u64>,
    /// Speak iperf 2 (2.0.5 … 2.1.x) instead of iperf3: default port 5001, no control channel
    #[arg(long = "iperf2")]
    pub iperf2: bool,
    /// iperf 2: the server sends back after the test (tradeoff, -r)
    #[arg(short = 'r', long = "tradeoff", requires = "iperf2")]
    pub tradeoff: bool,
    /// iperf 2: the server sends back at the same time (dual test, -d)
    #[arg(short = 'd', long = "dualtest", requires = "iperf2")]
    pub dualtest: bool,
    /// iperf 2: port to listen on for the return test (-r/-d), default the server port
    #[arg(
        short = 'L',
        long = "listenport",
        value_name = "PORT",
        requires = "iperf2"
    )]
    pub listenport: Option<u16>,
    /// iperf 2 (TCP): stamp every write with its send time so a 2.1/2.2 server reports the
    /// one-way latency (needs the two clocks in sync)
    #[arg(long = "trip-times", requires = "iperf2")]
    pub trip_times: bool,
}

/// Parse `-B`: an IP address, optionally `%dev` (iperf3's `-B addr%dev`).
pub(crate) fn parse_bind(b: &str) -> Result<(IpAddr, Option<String>), String> {
    let (addr, dev) = match b.split_once('%') {
        Some((a, d)) => (a, Some(d.to_string())),
        None => (b, None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("'{addr}' is not an IP address (-B)"))?;
    Ok((ip, dev))
}

/// Build the client spec from the flags, or say which flag is wrong.
pub fn client_spec(a: &IperfArgs, host: &str) -> Result<ClientSpec, String> {
    let mut spec = ClientSpec::new(host);
    if a.port.len() > 1 {
        return Err("a client takes one port (-p)".into());
    }
    if let Some(p) = a.port.first() {
        spec.port = *p;
    }
    if a.reverse && a.bidir {
        return Err("cannot be both reverse and bidirectional".into());
    }
    if a.v4 && a.v6 {
        return Err("-4 and -6 exclude each other".into());
    }
    set_params(a, &mut spec.params)?;
    set_connection(a, &mut spec)?;
    spec.validate()?;
    Ok(spec)
}

/// The test's parameters from the flags (protocol, direction, amounts, socket and pacing
/// options, title); the error names the flag that is wrong.
fn set_params(a: &IperfArgs, p: &mut crate::engine::params::Params) -> Result<(), String> {
    p.protocol = if a.udp { Protocol::Udp } else { Protocol::Tcp };
    if a.udp {
        p.set_udp_defaults();
    }
    p.udp_counters_64bit = a.udp_counters_64bit;
    p.repeating_payload = a.repeating_payload;
    p.dont_fragment = a.dont_fragment;
    p.skip_rx_copy = a.skip_rx_copy;
    p.zerocopy = a.zerocopy;
    p.direction = if a.bidir {
        Direction::Bidir
    } else if a.reverse {
        Direction::Receive
    } else {
        Direction::Send
    };
    p.parallel = a.parallel;
    p.omit = a.omit;
    set_amounts(a, p)?;
    p.mss = a.mss;
    p.nodelay = a.nodelay;
    p.congestion = a.congestion.clone();
    if let Some(r) = &a.fq_rate {
        p.fq_rate = parse_suffixed(r, true).map_err(|e| format!("--fq-rate: {e}"))?;
    }
    if let Some(m) = &a.udp_pacing {
        p.udp_pacing = crate::engine::pacer::PacingMode::parse(m)
            .ok_or_else(|| format!("--udp-pacing: '{m}' is not auto, kernel or user"))?;
    }
    p.get_server_output = a.get_server_output;
    p.title = a.title.clone();
    p.extra_data = a.extra_data.clone();
    p.tos = a.tos.unwrap_or(0);
    if p.tos > 255 {
        return Err("TOS must be 0..255 (-S)".into());
    }
    Ok(())
}

/// How much the test sends and how: the end condition (-t, -n or -k; only one), the rate
/// and burst (-b), the block or datagram size (-l) and the window (-w).
fn set_amounts(a: &IperfArgs, p: &mut crate::engine::params::Params) -> Result<(), String> {
    if let Some(n) = &a.bytes {
        p.num = parse_suffixed(n, false).map_err(|e| format!("-n: {e}"))?;
    }
    if let Some(k) = &a.blockcount {
        p.blockcount = parse_suffixed(k, false).map_err(|e| format!("-k: {e}"))?;
    }
    // As stock iperf3 (IEENDCONDITIONS): one end condition.
    if [a.time.is_some(), p.num > 0, p.blockcount > 0]
        .iter()
        .filter(|x| **x)
        .count()
        > 1
    {
        return Err("only one test end condition (-t, -n, -k) may be specified".into());
    }
    p.time = match a.time {
        Some(t) => t,
        None if p.num > 0 || p.blockcount > 0 => 0,
        None => 10,
    };
    if let Some(b) = &a.bitrate {
        let (rate, burst) = match b.split_once('/') {
            Some((r, n)) => (r, Some(n)),
            None => (b.as_str(), None),
        };
        p.bandwidth = parse_suffixed(rate, true).map_err(|e| format!("-b: {e}"))?;
        if let Some(n) = burst {
            p.burst = n
                .parse()
                .map_err(|_| format!("-b: burst '{n}' is not a number"))?;
        }
    }
    if let Some(l) = &a.length {
        let len = parse_suffixed(l, false).map_err(|e| format!("-l: {e}"))?;
        if a.udp {
            let max = crate::engine::udp::MAX_UDP_LEN_V6 as u64;
            if !(16..=max).contains(&len) {
                return Err(format!(
                    "UDP datagram size {len} out of range (16..{} bytes; 65507 over IPv4) (-l)",
                    crate::engine::udp::MAX_UDP_LEN_V4
                ));
            }
            p.len = len as u32;
        } else if len == 0 || len > wire::MAX_TCP_BLKSIZE as u64 {
            return Err(format!(
                "block size {len} out of range (1..{} bytes) (-l)",
                wire::MAX_TCP_BLKSIZE
            ));
        } else {
            p.len = len as u32;
        }
    }
    if let Some(w) = &a.window {
        let w = parse_suffixed(w, false).map_err(|e| format!("-w: {e}"))?;
        if w > i32::MAX as u64 {
            return Err("window too large (-w)".into());
        }
        p.window = Some(w as u32);
    }
    Ok(())
}

/// The connection's options from the flags (already in `spec.params`: window, MSS, TOS…):
/// interval, bind address and device, ports, timeouts, keepalive, address family.
fn set_connection(a: &IperfArgs, spec: &mut ClientSpec) -> Result<(), String> {
    let p = &spec.params;
    spec.interval = a.interval;
    spec.sock.window = p.window;
    spec.sock.mss = p.mss;
    spec.sock.nodelay = p.nodelay;
    spec.sock.tos = p.tos;
    spec.sock.congestion = p.congestion.clone();
    if let Some(b) = &a.bind {
        let (ip, dev) = parse_bind(b)?;
        spec.sock.bind = Some(ip);
        if dev.is_some() {
            spec.sock.bind_dev = dev;
        }
    }
    if let Some(d) = &a.bind_dev {
        spec.sock.bind_dev = Some(d.clone());
    }
    spec.sock.cport = a.cport.unwrap_or(0);
    if let Some(ms) = a.connect_timeout {
        spec.connect_timeout = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = a.rcv_timeout {
        // Stock 3.19+: 100 ms … a day; only a client that receives.
        if !(100..=86_400_000).contains(&ms) {
            return Err(
                "receive timeout value is incorrect or not in range (--rcv-timeout: 100..86400000 ms)"
                    .into(),
            );
        }
        if spec.params.direction == Direction::Send {
            return Err("client receive timeout is valid only in receiving mode (--rcv-timeout with -R or --bidir)".into());
        }
        spec.rcv_timeout = Duration::from_millis(ms);
    }
    // As stock 3.21: no keepalive without the flag; the flag's values where given, the
    // kernel's for the rest.
    spec.cntl_ka = match &a.cntl_ka {
        Some(ka) => Some(client::CntlKa::parse(ka)?),
        None => None,
    };
    if let Some(f) = &a.timestamps {
        check_timestamp_format(f)?;
    }
    spec.family = if a.v4 {
        Family::V4
    } else if a.v6 {
        Family::V6
    } else {
        Family::Any
    };
    Ok(())
}

/// Resolves when the process gets SIGINT, SIGTERM or SIGHUP (what Ctrl-C, `kill`, `timeout`
/// and a closed terminal send); stock iperf3 ends a test the same way on all three. If a
/// handler cannot be installed, only the others count.
pub async fn terminate_signal() {
    terminate_signal_named().await;
}

/// Like [`terminate_signal`]: which signal came, as glibc's `strsignal` names it and its
/// number ("Interrupt" 2, "Terminated" 15, "Hangup" 1) — what stock iperf3 3.19+ prints in
/// "interrupt - the server has terminated by signal Terminated(15)".
pub async fn terminate_signal_named() -> (&'static str, i32) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    async fn recv(s: Option<&mut tokio::signal::unix::Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if r.is_err() {
                std::future::pending::<()>().await;
            }
            ("Interrupt", libc::SIGINT)
        }
        _ = recv(term.as_mut()) => ("Terminated", libc::SIGTERM),
        _ = recv(hup.as_mut()) => ("Hangup", libc::SIGHUP),
    }
}

fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    let _ = o.flush();
}

/// What a client's `--udp-pacing` will not do in this test, one warning each (empty when it
/// applies as asked): it paces this end's paced UDP senders only, so TCP, `-b 0` and `-R`
/// (the server sends, paced by its own `--udp-pacing`) ignore it, and `--fq-rate` overrides
/// `--udp-pacing kernel` (the socket's pacing rate is then the user's). Pure.
pub fn pacing_warnings(a: &IperfArgs, p: &crate::engine::params::Params) -> Vec<String> {
    use crate::engine::pacer::PacingMode;
    let Some(word) = a.udp_pacing.as_deref() else {
        return Vec::new();
    };
    let mut w = Vec::new();
    if p.protocol != Protocol::Udp {
        w.push(format!(
            "--udp-pacing {word} ignored: it paces UDP senders, and this is a TCP test"
        ));
    } else if p.bandwidth == 0 {
        w.push(format!(
            "--udp-pacing {word} ignored: -b 0 sends as fast as it can, unpaced"
        ));
    } else if p.direction == Direction::Receive {
        w.push(format!(
            "--udp-pacing {word} ignored: with -R the server sends, paced by its own --udp-pacing"
        ));
    } else if p.udp_pacing == PacingMode::Kernel && p.fq_rate > 0 {
        w.push(
            "--udp-pacing kernel overridden by --fq-rate: the socket's pacing rate is --fq-rate's, and user space paces -b"
                .to_string(),
        );
    }
    w
}

/// Run the client as iperf3 would; returns the process exit code.
pub async fn run_client(a: &IperfArgs, host: &str) -> i32 {
    let mut spec = match client_spec(a, host) {
        Ok(s) => s,
        Err(e) => return fail(Output::of(a), &format!("parameter error - {e}")),
    };
    for w in pacing_warnings(a, &spec.params) {
        eprintln!("netperfd: warning - {w}");
    }
    // This host's drop counters go with its results: a netperfd server (the board) names
    // them in its loss ledger; a stock server ignores the key.
    spec.drops = Some(crate::runs::drops::host_drops());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = std::sync::Arc::new(tokio::sync::Notify::new());
    let c2 = cancel.clone();
    crate::engine::task::spawn(async move {
        terminate_signal().await;
        c2.notify_one();
    });
    let stream = a.json_stream;
    let json = a.json || stream;
    // -T: every text line starts with "TITLE:  ", as stock iperf3's client prints it;
    // --timestamps puts the time before that.
    let prefix = LinePrefix {
        title: a.title.clone(),
        timestamps: a.timestamps.clone(),
    };
    let put = move |t: &str| out(&prefix.apply(t));
    let printer = crate::engine::task::spawn(print_client_events(rx, stream, json, put.clone()));
    let res = client::run(spec, Some(tx), Some(cancel)).await;
    let _ = printer.await;
    print_client_end(res, stream, json, put)
}

/// Print a client's progress as it comes: with `stream` (--json-stream) the start and
/// interval events, in text (not `json`) the header and interval lines through `out`.
async fn print_client_events(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
    stream: bool,
    json: bool,
    out: impl Fn(&str),
) {
    let mut hdr: Option<Report> = None;
    let mut first = true;
    while let Some(ev) = rx.recv().await {
        if stream {
            // --json-stream: the start object, then each interval, as they happen.
            match ev {
                Event::Started(r) => {
                    out_event("start", &report::to_iperf3_json(&r)["start"]);
                    hdr = Some(*r);
                }
                Event::Interval(rec) => {
                    if let Some(h) = &hdr {
                        let one = Report {
                            intervals: vec![rec],
                            ..h.clone()
                        };
                        out_event("interval", &report::to_iperf3_json(&one)["intervals"][0]);
                    }
                }
            }
            continue;
        }
        if json {
            continue;
        }
        match ev {
            Event::Started(r) => {
                out(&report::text_header(&r));
                hdr = Some(*r);
            }
            Event::Interval(rec) => {
                if let Some(h) = &hdr {
                    out(&report::text_interval(h, &rec, first));
                    first = false;
                }
            }
        }
    }
}

/// Print how a client test ended (the end event, the JSON document, or the text summary
/// and server output through `put`); returns the exit code (0 done, 1 failed).
fn print_client_end(
    res: Result<Report, client::ClientError>,
    stream: bool,
    json: bool,
    put: impl Fn(&str),
) -> i32 {
    match res {
        Ok(r) => {
            if stream {
                let doc = report::to_iperf3_json(&r);
                out_event("end", &doc["end"]);
                if let Some(j) = doc.get("server_output_json") {
                    out_event("server_output_json", j);
                }
            } else if json {
                out(&format!("{}\n", json_text(&report::to_iperf3_json(&r))));
            } else {
                put(&report::text_summary(&r));
                if let Some(t) = &r.server_output_text {
                    put(&format!("\nServer output:\n{t}"));
                }
                if let Some(j) = &r.server_output_json {
                    put(&format!("\nServer JSON output:\n{}\n", json_text(j)));
                }
                put("\niperf Done.\n");
            }
            0
        }
        Err(e) => {
            if stream {
                out_error_end(&e.message, e.partial.as_deref());
            } else if json {
                let doc = match &e.partial {
                    Some(p) => report::to_iperf3_json(p),
                    None => report::error_json(&e.message),
                };
                out(&format!("{}\n", json_text(&doc)));
            } else {
                if let Some(p) = &e.partial {
                    put(&report::text_summary(&Report {
                        error: None,
                        ..(**p).clone()
                    }));
                }
                eprintln!("netperfd: error - {}", e.message);
            }
            1
        }
    }
}

/// One `--json-stream` line: `{"event": NAME, "data": DATA}`.
fn out_event(name: &str, data: &serde_json::Value) {
    out(&event_line(name, data));
}

fn event_line(name: &str, data: &serde_json::Value) -> String {
    let line = serde_json::json!({"event": name, "data": data});
    format!("{line}\n")
}

/// The `--json-stream` lines of a test that ended in an error, as stock iperf3 3.17–3.22
/// writes them (`iperf_json_finish`): the `error` event, the server's output if the test got
/// that far, then the closing `end` event — its `end` object as far as the test got (the
/// partial results of a test stopped midway), `{}` when nothing was measured.
fn error_end_lines(msg: &str, partial: Option<&Report>) -> String {
    let mut lines = event_line("error", &serde_json::Value::String(msg.to_string()));
    let doc = partial.map(report::to_iperf3_json);
    if let Some(j) = doc.as_ref().and_then(|d| d.get("server_output_json")) {
        lines.push_str(&event_line("server_output_json", j));
    }
    if let Some(t) = doc.as_ref().and_then(|d| d.get("server_output_text")) {
        lines.push_str(&event_line("server_output_text", t));
    }
    let end = doc
        .as_ref()
        .and_then(|d| d.get("end"))
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    lines.push_str(&event_line("end", &end));
    lines
}

fn out_error_end(msg: &str, partial: Option<&Report>) {
    out(&error_end_lines(msg, partial));
}

/// Check a `--timestamps` strftime format before the test (chrono's formatter would fail
/// on a bad one in the middle of the output).
fn check_timestamp_format(f: &str) -> Result<(), String> {
    use chrono::format::{Item, StrftimeItems};
    if StrftimeItems::new(f).any(|i| matches!(i, Item::Error)) {
        return Err(format!(
            "--timestamps: '{f}' is not a strftime format (e.g. --timestamps='%F %T ')"
        ));
    }
    Ok(())
}

/// What goes before each output line: `--timestamps` (the local time in its strftime
/// format), then `-T`'s `TITLE:  `, as stock iperf3 prints them.
#[derive(Debug, Clone, Default)]
pub struct LinePrefix {
    /// `-T`.
    pub title: Option<String>,
    /// `--timestamps`' format (checked with the flags).
    pub timestamps: Option<String>,
}

impl LinePrefix {
    /// `text` with the prefix before each non-empty line, at the time now.
    pub fn apply(&self, text: &str) -> String {
        let stamp = self.timestamps.as_deref().map(|f| {
            chrono::Local::now()
                .format_with_items(chrono::format::StrftimeItems::new(f))
                .to_string()
        });
        self.apply_with(stamp.as_deref(), text)
    }

    fn apply_with(&self, stamp: Option<&str>, text: &str) -> String {
        let titled = titled(self.title.as_deref(), text);
        match stamp {
            None => titled,
            Some(s) => titled
                .split_inclusive('\n')
                .map(|l| {
                    if l.trim_end_matches('\n').is_empty() {
                        l.to_string()
                    } else {
                        format!("{s}{l}")
                    }
                })
                .collect(),
        }
    }
}

/// `text` with `TITLE:  ` before each non-empty line (`-T`); unchanged without a title.
pub fn titled(title: Option<&str>, text: &str) -> String {
    match title {
        None => text.to_string(),
        Some(t) => text
            .split_inclusive('\n')
            .map(|l| {
                if l.trim_end_matches('\n').is_empty() {
                    l.to_string()
                } else {
                    format!("{t}:  {l}")
                }
            })
            .collect(),
    }
}

fn json_text(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into())
}

/// How the command writes: stock iperf3's text, one `-J` document, or `--json-stream` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    Text,
    Json,
    Stream,
}

impl Output {
    fn of(a: &IperfArgs) -> Output {
        if a.json_stream {
            Output::Stream
        } else if a.json {
            Output::Json
        } else {
            Output::Text
        }
    }
}

/// Say why the command stops (exit code 1): `--json-stream` gets its `error` and `end`
/// events, `-J` an error document, text a line on stderr.
fn fail(how: Output, msg: &str) -> i32 {
    if how == Output::Stream {
        out_error_end(msg, None);
    } else if how == Output::Json {
        out(&format!("{}\n", json_text(&report::error_json(msg))));
    } else {
        eprintln!("netperfd: {msg}");
    }
    1
}

/// Server config from the flags.
pub fn server_config(a: &IperfArgs) -> Result<ServerConfig, String> {
    if a.client.is_some() {
        return Err("cannot be both client and server".into());
    }
    let mut cfg = ServerConfig {
        one_off: a.one_off,
        json: a.json,
        interval: if a.interval > 0.0 { a.interval } else { 1.0 },
        drops: Some(crate::runs::drops::host_drops()),
        ..ServerConfig::default()
    };
    if !a.port.is_empty() {
        cfg.ports = a.port.clone();
    }
    if cfg.ports.contains(&0) {
        return Err("port must be 1..65535 (-p)".into());
    }
    if let Some(b) = &a.bind {
        let (ip, dev) = parse_bind(b)?;
        cfg.bind = Some(ip);
        cfg.bind_dev = dev;
    }
    if let Some(d) = &a.bind_dev {
        cfg.bind_dev = Some(d.clone());
    }
    // A server paces its own senders (`-R`, `--bidir` tests) by its own flag (the tryout's
    // `-s --udp-pacing bogus` was accepted and `-s --udp-pacing kernel` ignored).
    if let Some(m) = &a.udp_pacing {
        cfg.udp_pacing = crate::engine::pacer::PacingMode::parse(m)
            .ok_or_else(|| format!("--udp-pacing: '{m}' is not auto, kernel or user"))?;
    }
    Ok(cfg)
}

/// Run the server as iperf3 would; returns the exit code.
pub async fn run_server(a: &IperfArgs) -> i32 {
    let cfg = match server_config(a) {
        Ok(c) => c,
        Err(e) => return fail(Output::of(a), &format!("parameter error - {e}")),
    };
    let stream = a.json_stream;
    let json = a.json || stream;
    if let Some(f) = &a.timestamps {
        if let Err(e) = check_timestamp_format(f) {
            return fail(Output::of(a), &format!("parameter error - {e}"));
        }
    }
    let prefix = LinePrefix {
        title: a.title.clone(),
        timestamps: a.timestamps.clone(),
    };
    let put = move |t: &str| out(&prefix.apply(t));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    if !json {
        put(&banner(1, &cfg.ports));
    }
    // The signal that stops the server, and whether a test's document already said so.
    let signalled: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let said = Arc::new(AtomicBool::new(false));
    let printer = ServerPrinter {
        stream,
        json,
        one_off: cfg.one_off,
        ports: cfg.ports.clone(),
        signalled: signalled.clone(),
        said: said.clone(),
    };
    let printer = crate::engine::task::spawn(printer.run(rx, put));
    let shutdown = std::sync::Arc::new(tokio::sync::Notify::new());
    let s2 = shutdown.clone();
    let sig = signalled.clone();
    crate::engine::task::spawn(async move {
        let (name, num) = terminate_signal_named().await;
        *sig.lock().unwrap_or_else(|p| p.into_inner()) = Some(interrupt_message(name, num));
        s2.notify_one();
    });
    let r = server::serve(cfg, Some(tx), Some(shutdown)).await;
    // Let the printer drain what the last session reported.
    let _ = tokio::time::timeout(Duration::from_millis(500), printer).await;
    if let Err(e) = r {
        return fail(Output::of(a), &format!("error - {e}"));
    }
    let stopped = signalled.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(msg) = stopped {
        // Stock iperf3 3.19+ (iperf_got_sigend → iperf_signormalexit): the error in the JSON
        // document (an empty one when idle), or "iperf3: <msg>" on stderr; exit code 0.
        if !json {
            eprintln!("netperfd: {msg}");
        } else if said.load(Ordering::Relaxed) {
            // The test's own document (or --json-stream error event) already said so.
        } else if stream {
            out_error_end(&msg, None);
        } else {
            out(&format!("{}\n", json_text(&report::error_json(&msg))));
        }
    }
    0
}

/// Prints the server's tests as they go: --json-stream events (`stream`), one JSON document
/// per test (`json`), or text.
struct ServerPrinter {
    stream: bool,
    json: bool,
    /// `-1`: the server ends after one test (said in the text after it).
    one_off: bool,
    /// The ports listened on (for the banner between tests).
    ports: Vec<u16>,
    /// The message of the signal that stops the server, once it came.
    signalled: Arc<Mutex<Option<String>>>,
    /// Set when a test's document carried that message.
    said: Arc<AtomicBool>,
}

impl ServerPrinter {
    /// Print every event from `rx` through `out` until the server drops its sender.
    async fn run(
        self,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<ServerEvent>,
        out: impl Fn(&str),
    ) {
        let (stream, json) = (self.stream, self.json);
        let mut reports: HashMap<u64, (Report, bool)> = HashMap::new();
        let mut tests = 1;
        while let Some(ev) = rx.recv().await {
            match ev {
                ServerEvent::Started { session, report } => {
                    if stream {
                        out_event("start", &report::to_iperf3_json(&report)["start"]);
                    } else if !json {
                        out(&report::text_header(&report));
                    }
                    reports.insert(session, (*report, true));
                }
                ServerEvent::Interval { session, record } => {
                    match (stream, json, reports.get_mut(&session)) {
                        (true, _, Some((r, _))) => {
                            let one = Report {
                                intervals: vec![record],
                                ..r.clone()
                            };
                            out_event("interval", &report::to_iperf3_json(&one)["intervals"][0]);
                        }
                        (false, false, Some((r, first))) => {
                            out(&report::text_interval(r, &record, *first));
                            *first = false;
                        }
                        _ => {}
                    }
                }
                ServerEvent::Finished {
                    session, report, ..
                } => {
                    reports.remove(&session);
                    self.finished(*report, &mut tests, &out);
                }
            }
        }
    }

    /// Print a test's end; `tests` counts them for the text's next banner.
    fn finished(&self, mut report: Report, tests: &mut u64, out: &impl Fn(&str)) {
        let stopped = self
            .signalled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let (Some(msg), Some(e)) = (stopped, report.error.as_mut()) {
            // A test cut short by the stop: its document carries stock iperf3's
            // error (3.19+), and the server prints no other.
            if *e == wire::ierr_text(wire::ierr::IESERVERTERM) {
                *e = msg;
                self.said.store(true, Ordering::Relaxed);
            }
        }
        if self.stream {
            match &report.error {
                Some(e) => out_error_end(e, Some(&report)),
                None => out_event("end", &report::to_iperf3_json(&report)["end"]),
            }
        } else if self.json {
            out(&format!(
                "{}\n",
                json_text(&report::to_iperf3_json(&report))
            ));
        } else {
            *tests += 1;
            out(&finished_text(&report, self.one_off, *tests, &self.ports));
        }
    }
}

/// The text server's banner before test `n` (1 for the first).
fn banner(n: u64, ports: &[u16]) -> String {
    let ports: Vec<String> = ports.iter().map(|p| p.to_string()).collect();
    format!(
        "-----------------------------------------------------------\nServer listening on {} (test #{n})\n-----------------------------------------------------------\n",
        ports.join(", ")
    )
}

/// What the text server prints when a test ends: its summary, then the banner for test
/// `next` — none with `-1` (`one_off`), which exits after this test (stock prints none).
fn finished_text(report: &Report, one_off: bool, next: u64, ports: &[u16]) -> String {
    let mut t = report::text_summary(report);
    if !one_off {
        t.push_str(&banner(next, ports));
    }
    t
}

/// Stock iperf3 3.19+'s message for a server stopped by a signal, e.g. "interrupt - the
/// server has terminated by signal Terminated(15)".
pub fn interrupt_message(signal_name: &str, signal_number: i32) -> String {
    format!(
        "interrupt - {} by signal {signal_name}({signal_number})",
        wire::ierr_text(wire::ierr::IESERVERTERM)
    )
}

/// Run a subcommand's async body on a fresh tokio runtime with warnings logged: its exit code,
/// or 1 with "netperfd: <error>" on stderr.
pub fn run_command(fut: impl std::future::Future<Output = Result<i32, String>>) -> i32 {
    crate::logging::init("warn");
    let rt = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("netperfd: {e}");
            return 1;
        }
    };
    match rt.block_on(fut) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netperfd: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut IperfArgs)) -> IperfArgs {
        let mut a = IperfArgs {
            parallel: 1,
            ..Default::default()
        };
        f(&mut a);
        a
    }

    /// The "run it with stock iperf3" line of a stored test (`results::view::IPERF3_OPTS`)
    /// parsed back by this command line gives the test's own parameters, for every option
    /// in the table alone and in mixes. It found that an unlimited UDP test was printed
    /// without `-b` (stock iperf3 would run it at 1 Mbit/s) and that a TCP block size, `-N`,
    /// `-b RATE/BURST`, `--fq-rate`, `-Z`, `--skip-rx-copy`, `--udp-counters-64bit`,
    /// `--repeating-payload` and `--dont-fragment` were not printed at all.
    #[test]
    fn printed_iperf3_flags_parse_back_to_the_same_parameters() {
        use crate::engine::iperf3::wire::Params;
        use crate::results::view::{iperf3_flags, IPERF3_OPTS};
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: IperfArgs,
        }
        let tcp = Params::default();
        let udp = Params {
            protocol: Protocol::Udp,
            len: 1448,
            bandwidth: 1 << 20,
            ..Params::default()
        };
        type Edit = fn(&mut Params);
        let edits: &[(&str, Edit)] = &[
            ("-t", |p| p.time = 3),
            ("-n", |p| {
                p.num = 10 << 20;
                p.time = 0
            }),
            ("-k", |p| {
                p.blockcount = 100;
                p.time = 0
            }),
            ("-P", |p| p.parallel = 4),
            ("-R", |p| p.direction = Direction::Receive),
            ("--bidir", |p| p.direction = Direction::Bidir),
            ("-b", |p| p.bandwidth = 0),
            ("-b", |p| p.bandwidth = 250_000_000),
            ("-b", |p| p.bandwidth = 12_345_678),
            ("-b", |p| {
                p.bandwidth = 100_000_000;
                p.burst = 10
            }),
            ("-l", |p| {
                p.len = if p.protocol == Protocol::Udp {
                    18
                } else {
                    65536
                }
            }),
            ("-w", |p| p.window = Some(262_144)),
            ("-M", |p| p.mss = Some(1400)),
            ("-N", |p| p.nodelay = true),
            ("-S", |p| p.tos = 0x10),
            ("-C", |p| p.congestion = Some("bbr".into())),
            ("-O", |p| p.omit = 2),
            ("--fq-rate", |p| p.fq_rate = 50_000_000),
            ("-Z", |p| p.zerocopy = true),
            ("--skip-rx-copy", |p| p.skip_rx_copy = true),
            ("--udp-counters-64bit", |p| p.udp_counters_64bit = true),
            ("--repeating-payload", |p| p.repeating_payload = true),
            ("--dont-fragment", |p| p.dont_fragment = true),
        ];
        // Every field of Params, with the stock flag that carries it, "" when none does. The
        // destructuring has no `..`: a new iperf3 field does not compile here until its flag
        // (or that it has none) is decided.
        let Params {
            protocol: _,
            omit: _,
            time: _,
            num: _,
            blockcount: _,
            mss: _,
            nodelay: _,
            parallel: _,
            direction: _,
            window: _,
            len: _,
            bandwidth: _,
            burst: _,
            tos: _,
            title: _,
            extra_data: _,
            congestion: _,
            fq_rate: _,
            get_server_output: _,
            udp_counters_64bit: _,
            repeating_payload: _,
            zerocopy: _,
            dont_fragment: _,
            skip_rx_copy: _,
            client_version: _,
            udp_pacing: _,
        } = Params::default();
        let field_flags: &[(&str, &[&str])] = &[
            ("protocol", &["-u"]),
            ("omit", &["-O"]),
            ("time", &["-t"]),
            ("num", &["-n"]),
            ("blockcount", &["-k"]),
            ("mss", &["-M"]),
            ("nodelay", &["-N"]),
            ("parallel", &["-P"]),
            ("direction", &["-R", "--bidir"]),
            ("window", &["-w"]),
            ("len", &["-l"]),
            ("bandwidth", &["-b"]),
            ("burst", &["-b"]),
            ("tos", &["-S"]),
            ("congestion", &["-C"]),
            ("fq_rate", &["--fq-rate"]),
            ("udp_counters_64bit", &["--udp-counters-64bit"]),
            ("repeating_payload", &["--repeating-payload"]),
            ("zerocopy", &["-Z"]),
            ("dont_fragment", &["--dont-fragment"]),
            ("skip_rx_copy", &["--skip-rx-copy"]),
            // Change no number (left out of the table on purpose, see IPERF3_OPTS).
            ("title", &[]),
            ("extra_data", &[]),
            ("get_server_output", &[]),
            // Not options: the peer's version, and netperfd's own pacing choice.
            ("client_version", &[]),
            ("udp_pacing", &[]),
        ];
        assert_eq!(field_flags.len(), 26, "one row per field of Params");
        let printed: Vec<&str> = IPERF3_OPTS.iter().map(|o| o.flag).collect();
        let decided: Vec<&str> = field_flags
            .iter()
            .flat_map(|(_, f)| f.iter().copied())
            .collect();
        for f in &printed {
            assert!(decided.contains(f), "{f} is printed but no field's flag");
        }
        for f in &decided {
            assert!(printed.contains(f), "{f} is a field's flag but not printed");
        }
        // Every option of the table is exercised.
        for o in IPERF3_OPTS {
            assert!(
                o.flag == "-u" || edits.iter().any(|(f, _)| *f == o.flag),
                "{} has no case",
                o.flag
            );
        }
        let round_trip = |p: &Params| {
            let line = format!("iperf3 -c 192.0.2.2{}", iperf3_flags(p));
            let cli =
                Cli::try_parse_from(line.split(' ')).unwrap_or_else(|e| panic!("{line}: {e}"));
            let spec = client_spec(&cli.a, "192.0.2.2").unwrap_or_else(|e| panic!("{line}: {e}"));
            (line, spec.params)
        };
        let mut cases = 0;
        for base in [&tcp, &udp] {
            let mut all = base.clone();
            for (flag, edit) in edits {
                let mut p = base.clone();
                edit(&mut p);
                let (line, got) = round_trip(&p);
                assert_eq!(got, p, "{line}");
                assert!(p == *base || line.contains(flag), "{line} lacks {flag}");
                cases += 1;
                // The mix: every edit that keeps one end condition and one direction.
                if !matches!(*flag, "-n" | "-k" | "-R") {
                    edit(&mut all);
                }
            }
            let (line, got) = round_trip(&all);
            assert_eq!(got, all, "{line}");
        }
        assert_eq!(cases, 2 * edits.len());
        // What the page printed for an unlimited UDP test before: no -b, i.e. 1 Mbit/s.
        let unlimited = Params {
            bandwidth: 0,
            ..udp.clone()
        };
        assert_eq!(iperf3_flags(&unlimited), " -u -t 10 -b 0 -l 1448");
    }

    #[test]
    fn one_end_condition_as_stock() {
        let e = "only one test end condition (-t, -n, -k) may be specified";
        let both = args(|a| {
            a.time = Some(5);
            a.bytes = Some("1M".into());
        });
        assert_eq!(client_spec(&both, "192.0.2.2").unwrap_err(), e);
        let nk = args(|a| {
            a.bytes = Some("1M".into());
            a.blockcount = Some("10".into());
        });
        assert_eq!(client_spec(&nk, "192.0.2.2").unwrap_err(), e);
        let n = client_spec(&args(|a| a.bytes = Some("1M".into())), "192.0.2.2").unwrap();
        assert_eq!((n.params.time, n.params.num), (0, 1_048_576));
        let t = client_spec(&args(|a| a.time = Some(5)), "192.0.2.2").unwrap();
        assert_eq!((t.params.time, t.params.num), (5, 0));
    }

    #[test]
    fn timestamps_go_before_the_title_on_every_line() {
        let p = LinePrefix {
            title: Some("b7".into()),
            timestamps: Some("%F %T ".into()),
        };
        assert_eq!(
            p.apply_with(Some("2026-12-03 14:00:00 "), "a\n\nb\n"),
            "2026-12-03 14:00:00 b7:  a\n\n2026-12-03 14:00:00 b7:  b\n"
        );
        // The real clock in the asked format: "YYYY-MM-DD HH:MM:SS " then the line.
        let line = p.apply("x\n");
        assert_eq!(line.len(), 20 + "b7:  x\n".len(), "{line:?}");
        assert!(
            line.ends_with(" b7:  x\n") && line.as_bytes()[4] == b'-',
            "{line:?}"
        );
        assert!(check_timestamp_format("%c ").is_ok());
        let bad = client_spec(&args(|a| a.timestamps = Some("%Q%".into())), "192.0.2.2");
        assert!(bad.unwrap_err().starts_with("--timestamps: '%Q%'"));
    }

    #[test]
    fn rcv_timeout_and_cntl_ka_as_stock() {
        let recv = |f: fn(&mut IperfArgs)| {
            client_spec(
                &args(|a| {
                    a.reverse = true;
                    f(a)
                }),
                "192.0.2.2",
            )
        };
        let s = recv(|a| a.rcv_timeout = Some(1500)).unwrap();
        assert_eq!(s.rcv_timeout, Duration::from_millis(1500));
        assert_eq!(
            client_spec(&args(|_| {}), "192.0.2.2").unwrap().rcv_timeout,
            Duration::from_secs(120)
        );
        assert!(recv(|a| a.rcv_timeout = Some(99))
            .unwrap_err()
            .starts_with("receive timeout value is incorrect or not in range"));
        let send = client_spec(&args(|a| a.rcv_timeout = Some(1000)), "192.0.2.2");
        assert!(send
            .unwrap_err()
            .starts_with("client receive timeout is valid only in receiving mode"));
        let ka = |v: &str| client::CntlKa::parse(v);
        let given = |k: client::CntlKa| (k.idle, k.interval, k.count);
        // Issue 39: a bare flag set 5/2/3; stock sets none (the kernel's defaults stay).
        assert_eq!(given(ka("").unwrap()), (None, None, None));
        assert_eq!(given(ka("30").unwrap()), (Some(30), None, None));
        assert_eq!(given(ka("30/5/4").unwrap()), (Some(30), Some(5), Some(4)));
        assert_eq!(given(ka("/5").unwrap()), (None, Some(5), None));
        // Idle must exceed interval × count (stock's IECNTLKA).
        assert!(ka("20/5/4").unwrap_err().contains("20 <= 5 * 4"));
        assert!(ka("x")
            .unwrap_err()
            .contains("'x' is not a positive number"));
        let s = client_spec(&args(|a| a.cntl_ka = Some("60/10/5".into())), "192.0.2.2").unwrap();
        assert_eq!(s.cntl_ka.map(given), Some((Some(60), Some(10), Some(5))));
        // Issue 39: without the flag the command line sets no keepalive (stock); the board's
        // own runs keep theirs.
        assert_eq!(
            client_spec(&args(|_| {}), "192.0.2.2").unwrap().cntl_ka,
            None
        );
        assert_eq!(
            ClientSpec::new("192.0.2.2").cntl_ka,
            Some(client::BOARD_CNTL_KA)
        );
    }

    /// Issue 39: `-s -1` printed a second "Server listening" banner after its only test.
    #[test]
    fn one_off_server_prints_no_second_banner() {
        let r = Report::new(
            crate::engine::report::Role::Server,
            Default::default(),
            "c".into(),
            ("192.0.2.1".into(), 40000),
            "192.0.2.2:5201".parse().expect("addr"),
            1.0,
        );
        let once = finished_text(&r, true, 2, &[5201]);
        assert!(!once.contains("Server listening"), "{once}");
        assert_eq!(once, report::text_summary(&r));
        let again = finished_text(&r, false, 2, &[5201, 5202]);
        assert!(
            again.ends_with("Server listening on 5201, 5202 (test #2)\n-----------------------------------------------------------\n"),
            "{again}"
        );
    }

    /// Issue 39: after an error `--json-stream` wrote only the `error` event; stock iperf3
    /// 3.21/3.22 (measured: a refused connection, a server's busy port, a signal) always closes
    /// with `{"event":"end","data":{}}`, or the partial `end` of a test stopped midway.
    #[test]
    fn json_stream_error_is_followed_by_end() {
        let lines = error_end_lines("unable to connect to server: Connection refused", None);
        assert_eq!(
            lines,
            "{\"event\":\"error\",\"data\":\"unable to connect to server: Connection refused\"}\n\
             {\"event\":\"end\",\"data\":{}}\n"
        );
        let mut partial = Report::new(
            crate::engine::report::Role::Client,
            Default::default(),
            "c".into(),
            ("192.0.2.2".into(), 5201),
            "192.0.2.1:40000".parse().expect("addr"),
            1.0,
        );
        partial.streams = vec![crate::engine::report::StreamSummary {
            local_sender: true,
            sender: crate::engine::report::SideTotals {
                bytes: 4096,
                seconds: 0.5,
            },
            ..Default::default()
        }];
        let lines = error_end_lines("interrupt", Some(&partial));
        let events: Vec<serde_json::Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
            .collect();
        assert_eq!(events.len(), 2, "{lines}");
        assert_eq!(events[0]["event"], "error");
        assert_eq!(events[1]["event"], "end");
        assert_eq!(events[1]["data"]["sum_sent"]["bytes"], 4096);
    }

    #[test]
    fn zerocopy_goes_into_the_parameters() {
        let s = client_spec(&args(|a| a.zerocopy = true), "192.0.2.2").unwrap();
        assert!(s.params.zerocopy);
        assert_eq!(s.params.to_json()["zerocopy"], 1);
    }

    #[test]
    fn title_prefixes_every_text_line_as_stock() {
        let t = "[  5]   0.00-1.00   sec   112 MBytes   941 Mbits/sec\n\niperf Done.\n";
        assert_eq!(
            titled(Some("board7"), t),
            "board7:  [  5]   0.00-1.00   sec   112 MBytes   941 Mbits/sec\n\nboard7:  iperf Done.\n"
        );
        assert_eq!(titled(None, t), t);
        assert_eq!(titled(Some("x"), "no newline"), "x:  no newline");
    }

    #[test]
    fn a_server_takes_udp_pacing_for_its_own_senders() {
        use crate::engine::pacer::PacingMode;
        let mut a = args(|a| a.udp_pacing = Some("kernel".into()));
        a.client = None;
        a.server = true;
        assert_eq!(
            server_config(&a).map(|c| c.udp_pacing),
            Ok(PacingMode::Kernel)
        );
        a.udp_pacing = Some("bogus".into());
        assert_eq!(
            server_config(&a)
                .map(|c| c.udp_pacing)
                .map_err(|e| e.to_string()),
            Err("--udp-pacing: 'bogus' is not auto, kernel or user".to_string())
        );
        a.udp_pacing = None;
        assert_eq!(
            server_config(&a).map(|c| c.udp_pacing),
            Ok(PacingMode::Auto)
        );
    }

    #[test]
    fn udp_pacing_takes_its_three_words() {
        use crate::engine::pacer::PacingMode;
        for (w, m) in [
            ("auto", PacingMode::Auto),
            ("kernel", PacingMode::Kernel),
            ("user", PacingMode::User),
        ] {
            let s = client_spec(&args(|a| a.udp_pacing = Some(w.into())), "192.0.2.2").unwrap();
            assert_eq!(s.params.udp_pacing, m, "{w}");
        }
        let s = client_spec(&args(|_| {}), "192.0.2.2").unwrap();
        assert_eq!(s.params.udp_pacing, PacingMode::Auto);
        let bad = args(|a| a.udp_pacing = Some("fq".into()));
        let err = client_spec(&bad, "192.0.2.2").unwrap_err();
        assert!(err.starts_with("--udp-pacing: 'fq'"), "{err}");
    }

    #[test]
    fn udp_pacing_says_when_it_does_not_apply() {
        let warn = |f: &dyn Fn(&mut IperfArgs)| {
            let a = args(f);
            let s = client_spec(&a, "192.0.2.2").unwrap_or_else(|e| panic!("{e}"));
            pacing_warnings(&a, &s.params)
        };
        // TCP, -b 0, -R: ignored, each said.
        let tcp = warn(&|a| a.udp_pacing = Some("kernel".into()));
        assert_eq!(
            tcp,
            ["--udp-pacing kernel ignored: it paces UDP senders, and this is a TCP test"]
        );
        let unpaced = warn(&|a| {
            a.udp = true;
            a.bitrate = Some("0".into());
            a.udp_pacing = Some("user".into());
        });
        assert_eq!(
            unpaced,
            ["--udp-pacing user ignored: -b 0 sends as fast as it can, unpaced"]
        );
        let reverse = warn(&|a| {
            a.udp = true;
            a.reverse = true;
            a.bitrate = Some("100M".into());
            a.udp_pacing = Some("kernel".into());
        });
        assert_eq!(reverse.len(), 1);
        assert!(
            reverse[0].contains("with -R the server sends"),
            "{reverse:?}"
        );
        // --fq-rate overrides kernel pacing.
        let fq = warn(&|a| {
            a.udp = true;
            a.bitrate = Some("20M".into());
            a.fq_rate = Some("5M".into());
            a.udp_pacing = Some("kernel".into());
        });
        assert_eq!(fq.len(), 1);
        assert!(fq[0].starts_with("--udp-pacing kernel overridden by --fq-rate"));
        // Where it applies: nothing to say.
        let ok = warn(&|a| {
            a.udp = true;
            a.bitrate = Some("100M".into());
            a.udp_pacing = Some("kernel".into());
        });
        assert!(ok.is_empty(), "{ok:?}");
        assert!(warn(&|a| a.udp = true).is_empty());
    }

    #[test]
    fn fq_rate_takes_rate_suffixes() {
        let s = client_spec(&args(|a| a.fq_rate = Some("100M".into())), "192.0.2.2").unwrap();
        assert_eq!(s.params.fq_rate, 100_000_000);
        let bad = args(|a| a.fq_rate = Some("fast".into()));
        assert!(client_spec(&bad, "192.0.2.2")
            .unwrap_err()
            .starts_with("--fq-rate"));
    }
}
