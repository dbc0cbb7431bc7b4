//! What the Diagnostics page reads from the board instead of a shell: the neighbour table
//! (ARP/NDP, `ip neigh`) and the routing table (`ip route`) over rtnetlink, the system
//! (`uname`, `uptime`, `free`, `df` of the data directory, device-tree model, CPU clocks and
//! governors, thermal zones) from /proc and /sys, host names checked strictly and resolved
//! with the resolver the daemon uses for peers (getaddrinfo), and the unit's journal through
//! `journalctl` with fixed arguments when it is installed. Nothing here runs a shell or parses
//! `ip` output. Not for: ping itself (`crate::engine::ping`) or the daemon's own log lines
//! (`crate::logging`).
// Lengths and sizes here come from the network or from files: checked arithmetic and
// fallible slicing only (issue 37, blocker 3). CI runs clippy with -D warnings.
#![cfg_attr(
    not(test),
    warn(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

use super::error::BoardError;
use super::links::{netlink, nl_error};
use futures_util::TryStreamExt;
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourState,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::RouteMessageBuilder;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, ToSocketAddrs};
use std::path::Path;

// ---------------------------------------------------------------- neighbours and routes

/// One entry of the neighbour table (ARP for IPv4, NDP for IPv6).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Neighbour {
    /// The port the neighbour is on, e.g. `eth0`.
    pub port: String,
    /// Its IP address.
    pub address: IpAddr,
    /// Its MAC address (`aa:bb:cc:dd:ee:ff`), when known (not for INCOMPLETE or FAILED).
    pub mac: Option<String>,
    /// The kernel's state: REACHABLE, STALE, DELAY, PROBE, INCOMPLETE, FAILED, NOARP,
    /// PERMANENT or NONE — FAILED is the usual cause of "No route to host".
    pub state: String,
    /// An IPv6 router (NTF_ROUTER).
    pub router: bool,
}

/// The name `ip neigh` prints for a state.
pub(crate) fn state_name(s: NeighbourState) -> String {
    match s {
        NeighbourState::Incomplete => "INCOMPLETE".into(),
        NeighbourState::Reachable => "REACHABLE".into(),
        NeighbourState::Stale => "STALE".into(),
        NeighbourState::Delay => "DELAY".into(),
        NeighbourState::Probe => "PROBE".into(),
        NeighbourState::Failed => "FAILED".into(),
        NeighbourState::Noarp => "NOARP".into(),
        NeighbourState::Permanent => "PERMANENT".into(),
        NeighbourState::None => "NONE".into(),
        NeighbourState::Other(n) => format!("0x{n:02x}"),
        _ => "UNKNOWN".into(),
    }
}

fn port_name(index: u32) -> String {
    nix::net::if_::if_indextoname(index)
        .ok()
        .and_then(|c| c.into_string().ok())
        .unwrap_or_else(|| format!("#{index}"))
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The neighbour table of every port (IPv4 then IPv6, by port and address), in the calling
/// process's network namespace. Errors: netlink cannot be opened or read.
pub(crate) async fn neighbours() -> Result<Vec<Neighbour>, BoardError> {
    let h = netlink()?;
    let mut out = Vec::new();
    for fam in [AddressFamily::Inet, AddressFamily::Inet6] {
        let msgs: Vec<_> = h
            .neighbours()
            .get()
            .set_address_family(fam)
            .execute()
            .try_collect()
            .await
            .map_err(|e| nl_error("reading the neighbour table", e))?;
        for m in msgs {
            let mut addr = None;
            let mut lladdr = None;
            for a in &m.attributes {
                match a {
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                        addr = Some(IpAddr::V4(*v4))
                    }
                    NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                        addr = Some(IpAddr::V6(*v6))
                    }
                    NeighbourAttribute::LinkLayerAddress(b) if !b.is_empty() => {
                        lladdr = Some(mac(b))
                    }
                    _ => {}
                }
            }
            let Some(address) = addr else { continue };
            // Multicast entries (NOARP on IPv6) are not neighbours a person looks for.
            if address.is_multicast() {
                continue;
            }
            out.push(Neighbour {
                port: port_name(m.header.ifindex),
                address,
                mac: lladdr,
                state: state_name(m.header.state),
                router: m.header.flags.contains(NeighbourFlags::Router),
            });
        }
    }
    crate::model::order::sort_by(&mut out, |a, b| {
        (a.address.is_ipv6(), &a.port, a.address).cmp(&(b.address.is_ipv6(), &b.port, b.address))
    });
    Ok(out)
}

/// One route.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Route {
    /// `ipv4` or `ipv6`.
    pub family: &'static str,
    /// Destination prefix (`192.0.2.0/24`) or `default`.
    pub destination: String,
    /// Next hop, for routes through a router.
    pub gateway: Option<IpAddr>,
    /// The port the route leaves through.
    pub port: Option<String>,
    /// Preferred source address (`src`).
    pub source: Option<IpAddr>,
    /// Metric (`metric`/priority); lower wins.
    pub metric: Option<u32>,
    /// Who made it: `kernel` (the connected route of an address), `boot`, `static`, `dhcp`,
    /// `ra`, …
    pub protocol: String,
    /// `link` (on the port's subnet), `universe` (through a router), `host`.
    pub scope: String,
    /// `unicast`, `blackhole`, `unreachable`, `prohibit`, …
    pub kind: String,
    /// Routing table number (254 = main).
    pub table: u32,
}

fn words<T: std::fmt::Debug>(v: T) -> String {
    format!("{v:?}").to_lowercase()
}

fn addr_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn route_of(m: &RouteMessage) -> Option<Route> {
    let v6 = match m.header.address_family {
        AddressFamily::Inet => false,
        AddressFamily::Inet6 => true,
        _ => return None,
    };
    let mut r = Route {
        family: if v6 { "ipv6" } else { "ipv4" },
        destination: "default".into(),
        gateway: None,
        port: None,
        source: None,
        metric: None,
        protocol: match m.header.protocol {
            RouteProtocol::Ra => "ra".into(),
            RouteProtocol::Dhcp => "dhcp".into(),
            p => words(p),
        },
        scope: match m.header.scope {
            RouteScope::Universe => "universe".into(),
            RouteScope::Link => "link".into(),
            RouteScope::Host => "host".into(),
            s => words(s),
        },
        kind: match m.header.kind {
            RouteType::Unicast => "unicast".into(),
            k => words(k),
        },
        table: m.header.table as u32,
    };
    for a in &m.attributes {
        match a {
            RouteAttribute::Destination(d) => {
                if let Some(ip) = addr_of(d) {
                    r.destination = format!("{ip}/{}", m.header.destination_prefix_length);
                }
            }
            RouteAttribute::Gateway(g) => r.gateway = addr_of(g),
            RouteAttribute::PrefSource(s) => r.source = addr_of(s),
            RouteAttribute::Oif(i) => r.port = Some(port_name(*i)),
            RouteAttribute::Priority(p) => r.metric = Some(*p),
            RouteAttribute::Table(t) => r.table = *t,
            _ => {}
        }
    }
    Some(r)
}

/// The routes of every table but `local` (255: the board's own addresses and broadcasts),
/// IPv4 then IPv6, without IPv6 multicast routes, in the calling process's network
/// namespace. Errors: netlink cannot be opened or read.
pub(crate) async fn routes() -> Result<Vec<Route>, BoardError> {
    let h = netlink()?;
    let mut out = Vec::new();
    for v6 in [false, true] {
        let q = if v6 {
            RouteMessageBuilder::<Ipv6Addr>::new().build()
        } else {
            RouteMessageBuilder::<Ipv4Addr>::new().build()
        };
        let msgs: Vec<RouteMessage> = h
            .route()
            .get(q)
            .execute()
            .try_collect()
            .await
            .map_err(|e| nl_error("reading the routes", e))?;
        let fam = if v6 {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        out.extend(
            msgs.iter()
                .filter(|m| m.header.address_family == fam)
                .filter_map(route_of)
                .filter(|r| r.table != 255 && r.kind != "multicast"),
        );
    }
    Ok(out)
}

// ---------------------------------------------------------------- system

/// The kernel, as `uname -srvm` and `uname -n` print it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Kernel {
    /// `Linux`.
    pub name: String,
    /// `uname -r`, e.g. `6.6.23-v8+`.
    pub release: String,
    /// `uname -v`: build number and date.
    pub version: String,
    /// `uname -m` of this build, e.g. `aarch64`.
    pub machine: String,
    /// `uname -n`.
    pub hostname: String,
}

/// Memory as `/proc/meminfo` gives it, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub(crate) struct Memory {
    pub total_bytes: u64,
    /// What can be used without swapping (MemAvailable).
    pub available_bytes: u64,
    pub free_bytes: u64,
    pub buffers_bytes: u64,
    pub cached_bytes: u64,
    pub swap_total_bytes: u64,
    pub swap_free_bytes: u64,
}

/// The file system of a directory, as `df` shows it, bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Storage {
    /// The directory asked about (the data directory).
    pub path: String,
    pub total_bytes: u64,
    /// Free for an unprivileged user (df's "Avail").
    pub available_bytes: u64,
    /// Used, % of the total.
    pub used_percent: f64,
}

/// One CPU core's clock and governor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CoreClock {
    pub cpu: u32,
    /// Current clock, MHz.
    pub mhz: Option<f64>,
    /// Highest clock the core can run at, MHz.
    pub max_mhz: Option<f64>,
    pub governor: Option<String>,
}

/// The board as `uname -a`, `uptime`, `free`, `df` and the SoC's sensors show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct System {
    /// Device-tree `model` (e.g. "Raspberry Pi 4 Model B Rev 1.4"); absent on boards
    /// without a device tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub kernel: Kernel,
    /// Seconds since boot.
    pub uptime_s: Option<f64>,
    /// Load average over 1, 5 and 15 minutes.
    pub load: Option<[f64; 3]>,
    /// Cores online.
    pub cpus: usize,
    pub memory: Option<Memory>,
    pub storage: Option<Storage>,
    /// Per core with cpufreq (none in most VMs).
    pub cores: Vec<CoreClock>,
    /// Every thermal zone, °C.
    pub thermal: Vec<super::counters::Thermal>,
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// `/proc/meminfo` text → [`Memory`]; `None` without MemTotal.
pub(crate) fn parse_meminfo(text: &str) -> Option<Memory> {
    let kb = |key: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    let b = |key: &str| kb(key).unwrap_or(0).saturating_mul(1024);
    Some(Memory {
        total_bytes: kb("MemTotal")?.saturating_mul(1024),
        available_bytes: kb("MemAvailable")
            .map(|v| v.saturating_mul(1024))
            .unwrap_or(b("MemFree")),
        free_bytes: b("MemFree"),
        buffers_bytes: b("Buffers"),
        cached_bytes: b("Cached"),
        swap_total_bytes: b("SwapTotal"),
        swap_free_bytes: b("SwapFree"),
    })
}

/// `/proc/loadavg` text → the three load averages.
pub(crate) fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut w = text.split_whitespace().map(|s| s.parse::<f64>().ok());
    Some([w.next()??, w.next()??, w.next()??])
}

/// The device-tree model without its trailing NUL; `None` when there is no device tree.
pub(crate) fn model() -> Option<String> {
    [
        "/proc/device-tree/model",
        "/sys/firmware/devicetree/base/model",
    ]
    .iter()
    .find_map(|p| std::fs::read(p).ok())
    .map(|b| {
        String::from_utf8_lossy(&b)
            .trim_end_matches('\0')
            .trim()
            .to_string()
    })
    .filter(|s| !s.is_empty())
}

/// The file system holding `dir`. Errors: statvfs(3)'s (the directory does not exist).
pub(crate) fn storage(dir: &Path) -> std::io::Result<Storage> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    let frag = s.fragment_size() as u64;
    let total = (s.blocks() as u64).saturating_mul(frag);
    let free = (s.blocks_free() as u64).saturating_mul(frag);
    let avail = (s.blocks_available() as u64).saturating_mul(frag);
    let used = total.saturating_sub(free);
    // As df: used / (used + available).
    let base = used.saturating_add(avail);
    Ok(Storage {
        path: dir.display().to_string(),
        total_bytes: total,
        available_bytes: avail,
        used_percent: if base > 0 {
            used as f64 * 100.0 / base as f64
        } else {
            0.0
        },
    })
}

/// Read everything [`System`] holds; `data_dir` is the directory whose storage is shown.
/// Parts the board does not have are `None` or empty, never an error.
pub(crate) fn system(data_dir: &Path) -> System {
    System {
        model: model(),
        kernel: Kernel {
            name: read_trim("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into()),
            release: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
            version: read_trim("/proc/sys/kernel/version").unwrap_or_default(),
            machine: std::env::consts::ARCH.to_string(),
            hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
        },
        uptime_s: read_trim("/proc/uptime").and_then(|s| s.split_whitespace().next()?.parse().ok()),
        load: read_trim("/proc/loadavg").and_then(|s| parse_loadavg(&s)),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory: std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| parse_meminfo(&s)),
        storage: storage(data_dir).ok(),
        cores: super::counters::cpufreq()
            .into_iter()
            .map(|c| CoreClock {
                cpu: c.cpu,
                mhz: c.cur_khz.map(|k| k as f64 / 1000.0),
                max_mhz: c.hw_max_khz.or(c.max_khz).map(|k| k as f64 / 1000.0),
                governor: c.governor,
            })
            .collect(),
        thermal: super::counters::thermal(),
    }
}

// ---------------------------------------------------------------- host names

/// Longest host name accepted, characters (RFC 1035's 253).
pub(crate) const MAX_HOST: usize = 253;

/// A checked host: an address (with its port for a link-local IPv6 one), or a name made of
/// letters, digits, `-`, `_` and dots.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Host {
    Addr(IpAddr),
    /// `fe80::1%eth0`: a link-local IPv6 address and its port.
    LinkLocal(Ipv6Addr, String),
    Name(String),
}

/// A valid port (interface) name: 1–15 characters, no `/`, whitespace or `%`.
pub(crate) fn valid_port_name(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}

/// Check `s` strictly (nothing is resolved or run). Errors: a clear sentence naming what is
/// wrong; anything with shell metacharacters, spaces or control characters is refused.
pub(crate) fn parse_host(s: &str) -> Result<Host, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("host is empty: give an address or a host name".into());
    }
    let shown: String = s.chars().take(64).flat_map(char::escape_default).collect();
    if s.len() > MAX_HOST {
        return Err(format!(
            "host '{shown}…' is too long ({} characters, at most {MAX_HOST})",
            s.len()
        ));
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(Host::Addr(ip));
    }
    if let Some((a, dev)) = s.split_once('%') {
        let ip: Ipv6Addr = a
            .parse()
            .map_err(|_| format!("host '{shown}': only an IPv6 address may carry %PORT"))?;
        if !valid_port_name(dev) {
            return Err(format!("host '{shown}': '{dev}' is not a port name"));
        }
        return Ok(Host::LinkLocal(ip, dev.to_string()));
    }
    let ok_label = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let name = s.strip_suffix('.').unwrap_or(s);
    if name.split('.').all(ok_label) {
        Ok(Host::Name(name.to_string()))
    } else {
        Err(format!(
            "host '{shown}' is not an address or a host name (letters, digits, '-', '_' and dots; \
             an IPv6 link-local address as fe80::1%eth0)"
        ))
    }
}

/// Every address `name` resolves to, with the resolver the daemon uses for peers (the C
/// library's getaddrinfo: /etc/hosts, DNS), IPv4 first, without duplicates. Blocks for as
/// long as the resolver takes. Errors: the resolver's ("failed to lookup address
/// information: Name or service not known").
pub(crate) fn lookup(name: &str) -> Result<Vec<IpAddr>, String> {
    let mut v: Vec<IpAddr> = (name, 0u16)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{name}': {e}"))?
        .map(|a| a.ip())
        .collect();
    crate::model::order::sort_by_key(&mut v, |a| a.is_ipv6());
    let mut seen = std::collections::HashSet::new();
    v.retain(|a| seen.insert(*a));
    if v.is_empty() {
        return Err(format!("'{name}' has no address"));
    }
    Ok(v)
}

/// The address to send to for `host` (resolved when it is a name: the first address), with
/// the scope of a link-local IPv6 address: its own `%port`, else `port`. Errors: the port
/// does not exist, a link-local address without a port, or the name does not resolve.
pub(crate) fn target(host: &Host, port: Option<&str>) -> Result<SocketAddr, String> {
    let index = |dev: &str| {
        nix::net::if_::if_nametoindex(dev).map_err(|_| format!("there is no port '{dev}'"))
    };
    let ip = match host {
        Host::Addr(ip) => *ip,
        Host::LinkLocal(ip, dev) => {
            return Ok(SocketAddr::V6(SocketAddrV6::new(*ip, 0, 0, index(dev)?)));
        }
        Host::Name(n) => lookup(n)?
            .first()
            .copied()
            .ok_or_else(|| format!("'{n}' has no address"))?,
    };
    match ip {
        IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => match port {
            Some(dev) => Ok(SocketAddr::V6(SocketAddrV6::new(v6, 0, 0, index(dev)?))),
            None => Err(format!(
                "{v6} is an IPv6 link-local address: give its port as {v6}%PORT (e.g. %eth0) or choose the port"
            )),
        },
        ip => Ok(SocketAddr::new(ip, 0)),
    }
}

// ---------------------------------------------------------------- journal

/// Most journal lines [`journal`] returns.
pub(crate) const MAX_JOURNAL_LINES: u32 = 5000;

/// Where `journalctl` is installed, if it is (looked up in the usual directories only).
pub(crate) fn journalctl() -> Option<&'static str> {
    ["/usr/bin/journalctl", "/bin/journalctl"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
}

/// The last `lines` (1..=[`MAX_JOURNAL_LINES`]) lines of the netperfd unit's journal:
/// `journalctl -u netperfd -n LINES --no-pager -o short-iso`, run directly (no shell, fixed
/// arguments but the number). Errors: journalctl is not installed, cannot run, or fails.
pub(crate) fn journal(lines: u32) -> Result<String, String> {
    let Some(bin) = journalctl() else {
        return Err("journalctl is not installed on this board".into());
    };
    let n = lines.clamp(1, MAX_JOURNAL_LINES).to_string();
    let out = std::process::Command::new(bin)
        .args(["-u", "netperfd", "-n", &n, "--no-pager", "-o", "short-iso"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run journalctl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "journalctl failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_loadavg_are_parsed() {
        let m = parse_meminfo(
            "MemTotal:        8000000 kB\nMemFree:          100 kB\nMemAvailable:    4000000 kB\n\
             Buffers:  10 kB\nCached: 20 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
        )
        .unwrap();
        assert_eq!(m.total_bytes, 8_192_000_000);
        assert_eq!(m.available_bytes, 4_096_000_000);
        assert_eq!(m.cached_bytes, 20_480);
        assert_eq!(parse_meminfo("nothing"), None);
        assert_eq!(
            parse_loadavg("0.52 0.58 0.59 1/467 12345\n"),
            Some([0.52, 0.58, 0.59])
        );
        assert_eq!(parse_loadavg("x"), None);
    }

    #[test]
    fn hosts_are_checked_strictly() {
        assert_eq!(
            parse_host(" 192.0.2.1 "),
            Ok(Host::Addr("192.0.2.1".parse().unwrap()))
        );
        assert_eq!(
            parse_host("fe80::1%eth0"),
            Ok(Host::LinkLocal("fe80::1".parse().unwrap(), "eth0".into()))
        );
        assert_eq!(
            parse_host("pc-1.lab.example."),
            Ok(Host::Name("pc-1.lab.example".into()))
        );
        for bad in [
            "a;b",
            "$(reboot)",
            "a b",
            "`id`",
            "a|b",
            "x&&y",
            "-rf",
            "a..b",
            "192.0.2.1%eth0",
            "fe80::1%eth0;ls",
            "ho\nst",
            "a>b",
        ] {
            let e = parse_host(bad).expect_err(bad);
            assert!(e.contains("host"), "{bad}: {e}");
        }
        assert!(parse_host(&"a".repeat(300))
            .unwrap_err()
            .contains("too long"));
        assert!(parse_host("").unwrap_err().contains("empty"));
    }

    #[test]
    fn link_local_needs_a_port() {
        let e = target(&Host::Addr("fe80::1".parse().unwrap()), None).unwrap_err();
        assert!(e.contains("%PORT"), "{e}");
        let e = target(
            &Host::LinkLocal("fe80::1".parse().unwrap(), "nope0".into()),
            None,
        )
        .unwrap_err();
        assert!(e.contains("no port 'nope0'"), "{e}");
        let a = target(
            &Host::LinkLocal("fe80::1".parse().unwrap(), "lo".into()),
            None,
        )
        .unwrap();
        assert!(matches!(a, SocketAddr::V6(v) if v.scope_id() > 0));
    }

    #[test]
    fn localhost_resolves() {
        let v = lookup("localhost").unwrap();
        assert!(v.iter().any(|a| a.is_loopback()), "{v:?}");
    }

    #[test]
    fn system_reads_this_machine() {
        let s = system(Path::new("/"));
        assert_eq!(
            s.kernel.release,
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap()
                .trim()
        );
        let m = s.memory.expect("meminfo");
        assert!(m.total_bytes > m.available_bytes && m.available_bytes > 0);
        let st = s.storage.expect("statvfs /");
        assert!(st.total_bytes > 0 && st.used_percent >= 0.0 && st.used_percent <= 100.0);
        assert!(s.uptime_s.unwrap() > 0.0);
    }

    #[test]
    fn loopback_route_tables_are_read() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (r, n) = rt.block_on(async { (routes().await, neighbours().await) });
        // The local table is left out: 127.0.0.1's host route never shows.
        let r = r.unwrap();
        assert!(r.iter().all(|x| x.table != 255), "{r:?}");
        n.unwrap();
    }
}
