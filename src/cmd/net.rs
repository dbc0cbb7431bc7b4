//! `netperfd net …`: board control from the command line — the same operations, validation and
//! persistence as the web UI. A change is applied at once and kept (stored as the confirmed
//! configuration, re-applied by the daemon at start); with `--confirm-within SECONDS` it must
//! be confirmed on the terminal in time, or it is rolled back (like `iptables-apply`).
//! Runs in the network namespace the command runs in.

use crate::board::apply::{ApplyOptions, BoardView, Controller};
use crate::board::error::BoardError;
use crate::board::netconfig::Change;
use crate::board::{governor, links};
use crate::model::display;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `netperfd net …`
#[derive(clap::Args, Debug)]
pub struct NetArgs {
    #[command(subcommand)]
    pub cmd: NetCmd,
    /// Data directory: the confirmed configuration and the roll-back snapshot (default ./data;
    /// the appliance uses /var/lib/netperfd)
    #[arg(long, global = true, value_name = "DIR", default_value = "./data")]
    pub data: PathBuf,
    /// Print JSON (net show)
    #[arg(long, global = true)]
    pub json: bool,
    /// Roll the change back unless it is confirmed on the terminal within SECONDS
    #[arg(long = "confirm-within", global = true, value_name = "SECONDS")]
    pub confirm_within: Option<u32>,
}

/// The board-control commands.
#[derive(clap::Subcommand, Debug)]
pub enum NetCmd {
    /// Show every port (state, MAC, driver, speed, MTU, addresses, counters), the default
    /// routes, forwarding and the CPU governors
    Show,
    /// Add or remove an address: addr add|del PORT ADDRESS/PREFIX
    Addr {
        /// add or del
        #[arg(value_parser = ["add", "del"])]
        action: String,
        /// Port, e.g. eth0
        port: String,
        /// ADDRESS/PREFIX, e.g. 192.0.2.5/24 or 2001:db8::5/64
        address: String,
    },
    /// Bring a port up or down, or set its MTU: link PORT up|down|mtu N
    Link {
        /// Port, e.g. eth0
        port: String,
        /// up, down or mtu
        #[arg(value_parser = ["up", "down", "mtu"])]
        action: String,
        /// The MTU in bytes (with mtu)
        value: Option<String>,
    },
    /// Enable or disable forwarding between two ports (with --nat: MASQUERADE on --out)
    Forward {
        /// enable or disable
        #[arg(value_parser = ["enable", "disable"])]
        action: String,
        /// Ingress port (traffic comes in here)
        #[arg(long = "in", value_name = "PORT")]
        ingress: String,
        /// Egress port (traffic leaves here)
        #[arg(long = "out", value_name = "PORT")]
        egress: String,
        /// Masquerade on the egress port
        #[arg(long)]
        nat: bool,
        /// Forward IPv6 too
        #[arg(long)]
        ipv6: bool,
    },
    /// Set the default gateway (gateway VIA [--port PORT]) or remove it (gateway none [--ipv6])
    Gateway {
        /// Next-hop address, or "none"
        via: String,
        /// Outgoing port
        #[arg(long)]
        port: Option<String>,
        /// With "none": remove the IPv6 default route instead of the IPv4 one
        #[arg(long)]
        ipv6: bool,
    },
    /// Show the CPU governor per core, or set one on every core (e.g. performance)
    Governor {
        /// Governor to set
        name: Option<String>,
    },
}

/// Run the command; returns the exit code (0 done, 1 failed or rolled back, 2 bad input).
pub fn main(a: NetArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("netperfd: cannot start the runtime: {e}");
            return 1;
        }
    };
    rt.block_on(run(a))
}

fn fail(e: &BoardError) -> i32 {
    eprintln!("netperfd: {e}");
    match e {
        BoardError::Invalid(_) | BoardError::Warning(_) => 2,
        _ => 1,
    }
}

fn change_of(cmd: &NetCmd) -> Result<Option<Change>, BoardError> {
    Ok(Some(match cmd {
        NetCmd::Show | NetCmd::Governor { .. } => return Ok(None),
        NetCmd::Addr {
            action,
            port,
            address,
        } => {
            if action == "add" {
                Change::AddAddress {
                    port: port.clone(),
                    address: address.clone(),
                }
            } else {
                Change::DelAddress {
                    port: port.clone(),
                    address: address.clone(),
                }
            }
        }
        NetCmd::Link {
            port,
            action,
            value,
        } => match (action.as_str(), value) {
            ("up", None) | ("down", None) => Change::Link {
                port: port.clone(),
                up: Some(action == "up"),
                mtu: None,
            },
            ("mtu", Some(v)) => Change::Link {
                port: port.clone(),
                up: None,
                mtu: Some(v.clone()),
            },
            ("mtu", None) => {
                return Err(BoardError::Invalid(
                    "link PORT mtu needs the MTU in bytes, e.g. link eth0 mtu 1500".into(),
                ))
            }
            (a, Some(v)) => {
                return Err(BoardError::Invalid(format!(
                    "link PORT {a} takes no value, got '{v}'"
                )))
            }
            (a, None) => return Err(BoardError::Invalid(format!("unknown link action '{a}'"))),
        },
        NetCmd::Forward {
            action,
            ingress,
            egress,
            nat,
            ipv6,
        } => {
            if action == "enable" {
                Change::ForwardEnable {
                    ingress: ingress.clone(),
                    egress: egress.clone(),
                    nat: *nat,
                    ipv6: *ipv6,
                }
            } else {
                Change::ForwardDisable {
                    ingress: ingress.clone(),
                    egress: egress.clone(),
                }
            }
        }
        NetCmd::Gateway { via, port, ipv6 } => {
            if via == "none" {
                Change::Gateway {
                    via: None,
                    port: None,
                    family: Some(if *ipv6 { "ipv6" } else { "ipv4" }.into()),
                }
            } else {
                Change::Gateway {
                    via: Some(via.clone()),
                    port: port.clone(),
                    family: None,
                }
            }
        }
    }))
}

async fn run(a: NetArgs) -> i32 {
    let change = match change_of(&a.cmd) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    match (&a.cmd, change) {
        (NetCmd::Show, _) => show(&a).await,
        (NetCmd::Governor { name: None }, _) => {
            let cores = governor::read();
            if a.json {
                println!("{}", serde_json::json!({ "cores": cores }));
            } else if cores.is_empty() {
                println!("no CPU frequency scaling on this board");
            } else {
                for c in cores {
                    println!(
                        "cpu{}: {} (available: {})",
                        c.cpu,
                        c.governor,
                        c.available.join(" ")
                    );
                }
            }
            0
        }
        (NetCmd::Governor { name: Some(g) }, _) => match governor::set(g) {
            Ok(cores) => {
                for c in cores {
                    println!("cpu{}: {}", c.cpu, c.governor);
                }
                0
            }
            Err(e) => fail(&e),
        },
        (_, Some(change)) => apply(&a, change).await,
        (_, None) => 0,
    }
}

async fn apply(a: &NetArgs, change: Change) -> i32 {
    let store = match Store::open_dir(&a.data) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!(
                "netperfd: cannot open the data directory {} (--data DIR): {e}",
                a.data.display()
            );
            return 1;
        }
    };
    let c = Controller::new(Some(store), Some(&a.data));
    let o = ApplyOptions {
        confirm_within: a.confirm_within,
        unchecked: a.confirm_within.is_none(),
        force: true,
        mgmt: None,
        source: "cli".into(),
    };
    let out = match c.apply(std::slice::from_ref(&change), &o).await {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    for d in &out.applied {
        println!("{d}");
    }
    let Some(p) = out.pending else {
        return 0;
    };
    eprint!(
        "Keep this configuration? Type y and Enter within {} s, otherwise it is rolled back: ",
        p.window_secs
    );
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = std::io::stdin().read_line(&mut line).map(|_| line);
        let _ = tx.send(r);
    });
    let yes = match tokio::time::timeout(Duration::from_secs(u64::from(p.window_secs)), rx).await {
        Ok(Ok(Ok(line))) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        _ => false,
    };
    eprintln!();
    if yes {
        match c.confirm().await {
            Ok(_) => {
                println!("confirmed");
                0
            }
            Err(e) => fail(&e),
        }
    } else {
        match c.rollback("not confirmed on the command line").await {
            Ok(_) | Err(BoardError::Conflict(_)) => {
                eprintln!("netperfd: not confirmed: the previous configuration was restored");
                1
            }
            Err(e) => fail(&e),
        }
    }
}

async fn show(a: &NetArgs) -> i32 {
    let store = if a.data.join("netperfd.sqlite").exists() {
        Store::open_dir(&a.data).ok().map(Arc::new)
    } else {
        None
    };
    let c = Controller::new(store, None);
    let v: BoardView = match c.view().await {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    if a.json {
        match serde_json::to_string_pretty(&v) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("netperfd: {e}");
                return 1;
            }
        }
        return 0;
    }
    print!("{}", show_text(&v));
    0
}

/// `net show` as text, `ifconfig`-like.
pub fn show_text(v: &BoardView) -> String {
    let mut s = String::new();
    for l in &v.ports {
        s.push_str(&port_text(l));
    }
    let gw = |g: &Option<crate::board::addresses::Gateway>| {
        g.as_ref()
            .map(|g| g.to_string())
            .unwrap_or_else(|| "none".into())
    };
    s.push_str(&format!(
        "default route: IPv4 {}, IPv6 {}\n",
        gw(&v.ipv4_default_route),
        gw(&v.ipv6_default_route)
    ));
    let f = &v.forwarding;
    s.push_str(&format!(
        "forwarding: kernel IPv4 {}, IPv6 {}; firewall {}\n",
        if f.ipv4_forwarding { "on" } else { "off" },
        if f.ipv6_forwarding { "on" } else { "off" },
        f.backend
            .map(|b| b.name().to_string())
            .or_else(|| f.backend_error.clone())
            .unwrap_or_default()
    ));
    for fw in &f.forwards {
        s.push_str(&format!("  {fw}\n"));
    }
    for c in &v.governors {
        s.push_str(&format!("cpu{}: governor {}\n", c.cpu, c.governor));
    }
    if let Some(r) = &v.read_only_reason {
        s.push_str(&format!("read-only: {r}\n"));
    }
    s
}

fn port_text(l: &links::Link) -> String {
    let c = &l.counters;
    let mut s = format!(
        "{}: {} {} mtu {}",
        l.name,
        if l.up { "UP" } else { "DOWN" },
        if l.carrier { "LINK" } else { "NO-LINK" },
        l.mtu
    );
    if let Some(m) = &l.mac {
        s.push_str(&format!(" ether {m}"));
    }
    if let Some(d) = &l.driver {
        s.push_str(&format!(" driver {d}"));
    }
    if let Some(sp) = l.speed_mbps {
        s.push_str(&format!(" {sp}Mb/s"));
        if let Some(d) = &l.duplex {
            s.push_str(&format!(" {d}"));
        }
    }
    s.push('\n');
    for a in &l.addresses {
        s.push_str(&format!(
            "    inet{} {}{}\n",
            if a.address.is_ipv4() { "" } else { "6" },
            a.address,
            if a.permanent { "" } else { " dynamic" }
        ));
    }
    s.push_str(&format!(
        "    RX {} packets {} errors {} dropped {} overruns {} fifo {}\n",
        display::size(c.rx_bytes as f64),
        c.rx_packets,
        c.rx_errors,
        c.rx_dropped,
        c.rx_overruns,
        c.rx_fifo
    ));
    s.push_str(&format!(
        "    TX {} packets {} errors {} dropped {} fifo {} carrier {} collisions {}\n",
        display::size(c.tx_bytes as f64),
        c.tx_packets,
        c.tx_errors,
        c.tx_dropped,
        c.tx_fifo,
        c.tx_carrier,
        c.collisions
    ));
    if let Some(r) = &l.rates {
        s.push_str(&format!(
            "    rate RX {} TX {}\n",
            display::rate(r.rx_bits_per_second),
            display::rate(r.tx_bits_per_second)
        ));
    }
    s
}
