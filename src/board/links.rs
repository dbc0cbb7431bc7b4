//! Port inventory: every network interface of the board with its MAC, driver, link speed and
//! duplex, carrier, MTU, admin state, addresses (with prefix) and counters — what `ifconfig`
//! and `bmon` showed in the seed reports. Read through rtnetlink (links, addresses, 64-bit
//! counters) and sysfs (`/sys/class/net/PORT/{speed,duplex,device/driver}`), never by parsing
//! `ip`/`ifconfig` output. The board's 1 Hz sampler feeds [`PortSampler`], which turns the
//! counters into live rates.
//! Not for: changing anything (see `addresses`, `forwarding`, `apply`).

use super::error::BoardError;
use futures_util::TryStreamExt;
use rtnetlink::packet_route::address::{
    AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage, AddressScope,
};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;
use std::time::Instant;

/// Open an rtnetlink connection in the calling process's network namespace. Its driver task
/// runs on the current tokio runtime and ends when the handle is dropped.
pub(crate) fn netlink() -> Result<rtnetlink::Handle, BoardError> {
    let (conn, handle, _) = rtnetlink::new_connection()
        .map_err(|e| BoardError::System(format!("cannot open a netlink socket: {e}")))?;
    crate::engine::task::spawn(conn);
    Ok(handle)
}

/// Changes of the board's ports as the kernel announces them: the receiver's value goes up by
/// one for each notice of an address added or removed (IPv4 or IPv6) or of a port changing
/// (up, down, carrier, added, removed), in the calling process's network namespace. The
/// listening task runs on the current tokio runtime and ends at the first notice after every
/// receiver is gone. Errors: the netlink socket cannot be opened or subscribed.
pub(crate) fn port_changes() -> Result<tokio::sync::watch::Receiver<u64>, BoardError> {
    use futures_util::StreamExt;
    use rtnetlink::MulticastGroup;
    let (conn, handle, mut messages) = rtnetlink::new_multicast_connection(&[
        MulticastGroup::Link,
        MulticastGroup::Ipv4Ifaddr,
        MulticastGroup::Ipv6Ifaddr,
    ])
    .map_err(|e| BoardError::System(format!("cannot listen for port changes on netlink: {e}")))?;
    let driver = crate::engine::task::spawn(conn);
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    crate::engine::task::spawn(async move {
        let _handle = handle; // the connection lives as long as a handle does
        while messages.next().await.is_some() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
            if tx.is_closed() {
                break;
            }
        }
        driver.abort();
    });
    Ok(rx)
}

/// Turn a netlink error into a user-facing [`BoardError`]; `what` says what was being done
/// ("adding 192.0.2.5/24 to eth0").
pub(crate) fn nl_error(what: &str, e: rtnetlink::Error) -> BoardError {
    if let rtnetlink::Error::NetlinkError(m) = &e {
        if let Some(code) = m.code {
            let errno = -code.get();
            let text = std::io::Error::from_raw_os_error(errno).to_string();
            let text = match text.find(" (os error") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            if errno == libc::EPERM || errno == libc::EACCES {
                return BoardError::ReadOnly(format!(
                    "{what}: {text} (netperfd needs the CAP_NET_ADMIN capability)"
                ));
            }
            return BoardError::System(format!("{what}: {text}"));
        }
    }
    // Not `{e}`: rtnetlink's Display prints an unexpected message with `{:?}`, which links the
    // Debug code of every route message and attribute type (tens of KB) for an answer the
    // kernel does not give.
    let text = match e {
        rtnetlink::Error::UnexpectedMessage(_) => "the kernel sent an unexpected netlink answer",
        rtnetlink::Error::NetlinkError(_) => "the kernel refused the request",
        rtnetlink::Error::RequestFailed => "the netlink request failed",
        rtnetlink::Error::NamespaceError(s) => return BoardError::System(format!("{what}: {s}")),
        rtnetlink::Error::InvalidHardwareAddress(_) => {
            "the kernel sent an invalid hardware address"
        }
        rtnetlink::Error::InvalidIp(_) | rtnetlink::Error::InvalidAddress(..) => {
            "the kernel sent an invalid IP address"
        }
        rtnetlink::Error::InvalidNla(s) => {
            return BoardError::System(format!("{what}: invalid netlink attribute {s}"))
        }
    };
    BoardError::System(format!("{what}: {text}"))
}

/// An interface address with its prefix length, written `192.0.2.1/24` or `2001:db8::1/64`.
/// [`IfAddr::parse`] accepts only host addresses a port can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfAddr {
    /// The address.
    pub addr: IpAddr,
    /// Prefix length in bits (1..=32 for IPv4, 1..=128 for IPv6).
    pub prefix: u8,
}

impl std::fmt::Display for IfAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for IfAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IfAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IfAddr::parse_any(&s).map_err(serde::de::Error::custom)
    }
}

fn v4_mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    }
}

fn v6_mask(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix.min(128)))
    }
}

impl IfAddr {
    /// Parse `ADDRESS/PREFIX` as given by a user: the prefix is required, and the address must
    /// be one a port can carry (not unspecified, loopback, multicast, link-local, or the
    /// network/broadcast address of its IPv4 subnet).
    pub fn parse(s: &str) -> Result<IfAddr, String> {
        let a = IfAddr::parse_any(s)?;
        let bad = |why: &str| Err(format!("{a} is {why}, not an address a port can carry"));
        match a.addr {
            IpAddr::V4(v4) => {
                if v4.is_unspecified() {
                    return bad("the unspecified address");
                }
                if v4.is_loopback() {
                    return bad("a loopback address");
                }
                if v4.is_multicast() || v4.is_broadcast() {
                    return bad("a multicast or broadcast address");
                }
                if v4.is_link_local() {
                    return bad("a link-local (169.254/16) address");
                }
                if a.prefix <= 30 {
                    let host = u32::from(v4) & !v4_mask(a.prefix);
                    if host == 0 {
                        return Err(format!(
                            "{} is the network address of {}, not a host address",
                            v4,
                            a.network_string()
                        ));
                    }
                    if host == !v4_mask(a.prefix) {
                        return Err(format!(
                            "{} is the broadcast address of {}, not a host address",
                            v4,
                            a.network_string()
                        ));
                    }
                }
            }
            IpAddr::V6(v6) => {
                if v6.is_unspecified() {
                    return bad("the unspecified address");
                }
                if v6.is_loopback() {
                    return bad("a loopback address");
                }
                if v6.is_multicast() {
                    return bad("a multicast address");
                }
                if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                    return bad("a link-local address (the kernel makes those)");
                }
            }
        }
        Ok(a)
    }

    /// Parse `ADDRESS/PREFIX` syntactically (any address, as the kernel reports them).
    pub fn parse_any(s: &str) -> Result<IfAddr, String> {
        let s = s.trim();
        let Some((a, p)) = s.split_once('/') else {
            if s.parse::<IpAddr>().is_ok() {
                return Err(format!(
                    "'{s}' has no prefix length: write ADDRESS/PREFIX, e.g. 192.0.2.5/24 or 2001:db8::5/64"
                ));
            }
            return Err(format!(
                "'{s}' is not an address with a prefix length (like 192.0.2.5/24 or 2001:db8::5/64)"
            ));
        };
        let addr: IpAddr = a.parse().map_err(|_| {
            format!(
                "'{a}' is not an IPv4 or IPv6 address (in '{s}'; expected e.g. 192.0.2.5/24 or 2001:db8::5/64)"
            )
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let fam = if addr.is_ipv4() { "IPv4" } else { "IPv6" };
        let prefix: u8 = match p.parse::<u8>() {
            Ok(n) if p.bytes().all(|b| b.is_ascii_digit()) && (1..=max).contains(&n) => n,
            _ => {
                return Err(format!(
                    "prefix length must be 1..{max} for an {fam} address, got '{p}' (in '{s}')"
                ))
            }
        };
        Ok(IfAddr { addr, prefix })
    }

    /// True for IPv4.
    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// True for IPv6 link-local (fe80::/10) addresses, which the kernel manages.
    pub fn is_link_local(&self) -> bool {
        match self.addr {
            IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
            IpAddr::V4(v4) => v4.is_link_local(),
        }
    }

    /// The network prefix as text, e.g. `192.0.2.0/24`.
    pub fn network_string(&self) -> String {
        match self.addr {
            IpAddr::V4(v4) => format!(
                "{}/{}",
                Ipv4Addr::from(u32::from(v4) & v4_mask(self.prefix)),
                self.prefix
            ),
            IpAddr::V6(v6) => format!(
                "{}/{}",
                Ipv6Addr::from(u128::from(v6) & v6_mask(self.prefix)),
                self.prefix
            ),
        }
    }

    /// Whether `ip` lies in this address's subnet.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let m = v4_mask(self.prefix);
                u32::from(a) & m == u32::from(b) & m
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let m = v6_mask(self.prefix);
                u128::from(a) & m == u128::from(b) & m
            }
            _ => false,
        }
    }

    /// Whether the two subnets share any address (same family, one contains the other).
    pub fn overlaps(&self, other: &IfAddr) -> bool {
        let p = self.prefix.min(other.prefix);
        let a = IfAddr {
            addr: self.addr,
            prefix: p,
        };
        a.contains(other.addr)
    }
}

/// One address of a port as the kernel reports it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PortAddress {
    /// Address and prefix, e.g. `192.0.2.1/24`.
    pub address: IfAddr,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// `global`, `link` (IPv6 fe80::/10), `host` or `site`.
    pub scope: String,
    /// Set by hand or by netperfd (IFA_F_PERMANENT); false for addresses from DHCP/SLAAC,
    /// which netperfd leaves alone.
    pub permanent: bool,
    /// Seconds the kernel keeps a dynamic address (a DHCP lease's, a SLAAC one's) unless it
    /// is renewed; None for a permanent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_secs: Option<u32>,
}

#[cfg(test)]
impl PortAddress {
    /// A permanent global IPv4 address (`"10.61.1.1/24"`) for tests' port fixtures.
    pub(crate) fn static_v4(a: &str) -> PortAddress {
        PortAddress {
            address: IfAddr::parse_any(a).expect("a test address"),
            family: "ipv4".into(),
            scope: "global".into(),
            permanent: true,
            valid_secs: None,
        }
    }
}

/// Interface counters since the interface was created (IFLA_STATS64): bytes and packets,
/// and the error classes `ifconfig` prints.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Counters {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Receive errors (all classes).
    pub rx_errors: u64,
    /// Transmit errors (all classes).
    pub tx_errors: u64,
    /// Received packets dropped (no buffer space, unknown protocol, …).
    pub rx_dropped: u64,
    /// Packets dropped before sending.
    pub tx_dropped: u64,
    /// Receive ring-buffer overruns (rx_over_errors).
    pub rx_overruns: u64,
    /// Receive FIFO errors (rx_fifo_errors; `ifconfig` prints these as "overruns").
    pub rx_fifo: u64,
    /// Transmit FIFO errors (tx_fifo_errors).
    pub tx_fifo: u64,
    /// Receive frame (alignment) errors.
    pub rx_frame: u64,
    /// Receive CRC errors.
    pub rx_crc: u64,
    /// Transmit carrier errors.
    pub tx_carrier: u64,
    /// Collisions.
    pub collisions: u64,
}

/// Live rates of a port over the last sampling period (about 1 s).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Rates {
    /// Received bits per second (layer-2 payload bytes × 8, as the kernel counts them).
    pub rx_bits_per_second: f64,
    /// Sent bits per second.
    pub tx_bits_per_second: f64,
    /// Received packets per second.
    pub rx_packets_per_second: f64,
    /// Sent packets per second.
    pub tx_packets_per_second: f64,
    /// Length of the period the rates cover, seconds.
    pub seconds: f64,
}

/// A network interface of the board, fully described.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Link {
    /// Kernel interface index.
    pub index: u32,
    /// Interface name, e.g. `eth0`, `fm1-mac9`.
    pub name: String,
    /// Hardware (MAC) address, lowercase `aa:bb:cc:dd:ee:ff`; None when the port has none.
    pub mac: Option<String>,
    /// Kernel driver (sysfs `device/driver`), else the link kind (`veth`, `bridge`, …).
    pub driver: Option<String>,
    /// Link kind from netlink (`veth`, `vlan`, `bridge`, …); None for plain hardware ports.
    pub kind: Option<String>,
    /// Link speed in Mbit/s (sysfs `speed`); None when unknown (no carrier, virtual port).
    pub speed_mbps: Option<u32>,
    /// `full` or `half`; None when unknown.
    pub duplex: Option<String>,
    /// The cable is plugged and the link negotiated (IFF_LOWER_UP).
    pub carrier: bool,
    /// RFC 2863 operational state: `up`, `down`, `lowerlayerdown`, `dormant`, `unknown`, …
    pub oper_state: String,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// The loopback interface.
    pub loopback: bool,
    /// MTU in bytes.
    pub mtu: u32,
    /// Smallest MTU the driver accepts, bytes (when the kernel reports it).
    pub min_mtu: Option<u32>,
    /// Largest MTU the driver accepts, bytes (when the kernel reports it).
    pub max_mtu: Option<u32>,
    /// IPv4 addresses first, then IPv6.
    pub addresses: Vec<PortAddress>,
    /// Counters since the interface came to be.
    pub counters: Counters,
    /// Live rates from the 1 Hz sampler (None until two samples exist).
    pub rates: Option<Rates>,
}

impl Link {
    /// Addresses netperfd manages on this port: permanent and not link-local.
    pub fn managed_addresses(&self) -> Vec<IfAddr> {
        self.addresses
            .iter()
            .filter(|a| a.permanent && !a.address.is_link_local())
            .map(|a| a.address)
            .collect()
    }
}

fn mac_string(b: &[u8]) -> Option<String> {
    if b.is_empty() {
        return None;
    }
    Some(
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
    )
}

fn sysfs_net(name: &str, file: &str) -> Option<String> {
    if !crate::model::names::valid_ifname(name) {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/{file}"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn sysfs_driver(name: &str) -> Option<String> {
    if !crate::model::names::valid_ifname(name) {
        return None;
    }
    std::fs::read_link(format!("/sys/class/net/{name}/device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
}

fn link_from_message(m: &LinkMessage) -> Link {
    let flags = m.header.flags;
    let mut l = Link {
        index: m.header.index,
        name: String::new(),
        mac: None,
        driver: None,
        kind: None,
        speed_mbps: None,
        duplex: None,
        carrier: flags.contains(LinkFlags::LowerUp),
        oper_state: "unknown".into(),
        up: flags.contains(LinkFlags::Up),
        loopback: flags.contains(LinkFlags::Loopback),
        mtu: 0,
        min_mtu: None,
        max_mtu: None,
        addresses: Vec::new(),
        counters: Counters::default(),
        rates: None,
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name = n.clone(),
            LinkAttribute::Address(b) => l.mac = mac_string(b),
            LinkAttribute::Mtu(x) => l.mtu = *x,
            LinkAttribute::MinMtu(x) if *x > 0 => l.min_mtu = Some(*x),
            LinkAttribute::MaxMtu(x) if *x > 0 => l.max_mtu = Some(*x),
            LinkAttribute::OperState(s) => {
                l.oper_state = format!("{s:?}").to_lowercase();
            }
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    if let LinkInfo::Kind(k) = i {
                        l.kind = Some(k.to_string());
                    }
                }
            }
            LinkAttribute::Stats64(s) => {
                l.counters = Counters {
                    rx_bytes: s.rx_bytes,
                    tx_bytes: s.tx_bytes,
                    rx_packets: s.rx_packets,
                    tx_packets: s.tx_packets,
                    rx_errors: s.rx_errors,
                    tx_errors: s.tx_errors,
                    rx_dropped: s.rx_dropped,
                    tx_dropped: s.tx_dropped,
                    rx_overruns: s.rx_over_errors,
                    rx_fifo: s.rx_fifo_errors,
                    tx_fifo: s.tx_fifo_errors,
                    rx_frame: s.rx_frame_errors,
                    rx_crc: s.rx_crc_errors,
                    tx_carrier: s.tx_carrier_errors,
                    collisions: s.collisions,
                };
            }
            _ => {}
        }
    }
    if l.loopback && l.mac.as_deref() == Some("00:00:00:00:00:00") {
        l.mac = None;
    }
    l
}

/// The address protocol (`IFA_PROTO`) the udhcpc hook marks a leased IPv4 address with: such
/// an address counts as dynamic (not managed by netperfd) even when its lifetime is infinite
/// (the kernel then flags it permanent). A private value (the kernel defines 0..=3).
pub(crate) const DHCP_ADDR_PROTO: u8 = 0x4e;

fn address_from_message(m: &AddressMessage) -> Option<(u32, PortAddress)> {
    let mut local = None;
    let mut address = None;
    let mut permanent = m.header.flags.contains(AddressHeaderFlags::Permanent);
    let mut valid_secs = None;
    let mut leased = false;
    for a in &m.attributes {
        match a {
            AddressAttribute::CacheInfo(c) if c.ifa_valid != u32::MAX => {
                valid_secs = Some(c.ifa_valid)
            }
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            AddressAttribute::Flags(f) => permanent = f.contains(AddressFlags::Permanent),
            AddressAttribute::Protocol(p) if u8::from(*p) == DHCP_ADDR_PROTO => leased = true,
            _ => {}
        }
    }
    // The kernel flags an address with an infinite lifetime permanent; a leased one (an
    // infinite DHCP lease) stays dynamic all the same.
    if leased {
        permanent = false;
    }
    let ip = local.or(address)?;
    let scope = match m.header.scope {
        AddressScope::Universe => "global",
        AddressScope::Site => "site",
        AddressScope::Link => "link",
        AddressScope::Host => "host",
        _ => "other",
    };
    Some((
        m.header.index,
        PortAddress {
            address: IfAddr {
                addr: ip,
                prefix: m.header.prefix_len,
            },
            family: if ip.is_ipv4() { "ipv4" } else { "ipv6" }.into(),
            scope: scope.into(),
            permanent,
            valid_secs: if permanent { None } else { valid_secs },
        },
    ))
}

/// Every interface of the board (this process's network namespace), sorted by name, with
/// addresses and counters; `rates` are left `None` (see [`PortSampler::attach_rates`]).
pub(crate) async fn inventory() -> Result<Vec<Link>, BoardError> {
    let h = netlink()?;
    let msgs: Vec<LinkMessage> = h
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl_error("reading the ports", e))?;
    let mut links: Vec<Link> = msgs.iter().map(link_from_message).collect();
    let addrs: Vec<AddressMessage> = h
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl_error("reading the addresses", e))?;
    let mut by_index: HashMap<u32, Vec<PortAddress>> = HashMap::new();
    for m in &addrs {
        if let Some((i, a)) = address_from_message(m) {
            by_index.entry(i).or_default().push(a);
        }
    }
    for l in &mut links {
        let mut a = by_index.remove(&l.index).unwrap_or_default();
        crate::model::order::sort_by_key(&mut a, |x| {
            (!x.address.is_ipv4(), x.address.is_link_local())
        });
        l.addresses = a;
        l.speed_mbps = sysfs_net(&l.name, "speed")
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&s| s > 0 && s < i64::from(u32::MAX))
            .map(|s| s as u32);
        l.duplex = sysfs_net(&l.name, "duplex").filter(|d| d == "full" || d == "half");
        l.driver = sysfs_driver(&l.name).or_else(|| l.kind.clone());
    }
    crate::model::order::sort_by(&mut links, |a, b| a.name.cmp(&b.name));
    Ok(links)
}

/// Find a port by name in an inventory, with the error a user should see.
pub(crate) fn find<'a>(links: &'a [Link], name: &str) -> Result<&'a Link, BoardError> {
    if !crate::model::names::valid_ifname(name) {
        return Err(BoardError::Invalid(format!(
            "'{name}' is not a valid interface name"
        )));
    }
    links.iter().find(|l| l.name == name).ok_or_else(|| {
        let names: Vec<&str> = links
            .iter()
            .filter(|l| !l.loopback)
            .map(|l| l.name.as_str())
            .collect();
        BoardError::Invalid(format!(
            "the board has no port '{name}' (ports: {})",
            names.join(", ")
        ))
    })
}

// ---------------------------------------------------------------- 1 Hz sampler

#[derive(Default)]
struct SamplerState {
    last: HashMap<String, (Instant, Counters)>,
    rates: HashMap<String, Rates>,
    links: Vec<Link>,
}

/// The port inventory the board's 1 Hz [`Sampler`](super::sampler::Sampler) last read, and
/// each port's rates between its last two readings. The daemon's board
/// [`Controller`](super::apply::Controller) owns the sampler and asks it for the inventory;
/// elsewhere (one-shot CLI commands) it stays empty and readers fall back to a fresh
/// inventory.
#[derive(Default)]
pub struct PortSampler {
    state: Mutex<SamplerState>,
}

/// Rate of a counter between two readings; 0 when it went backwards (the port was
/// re-created).
fn per_second(new: u64, old: u64, secs: f64) -> f64 {
    if new < old || secs <= 0.0 {
        0.0
    } else {
        (new - old) as f64 / secs
    }
}

/// Rates between two counter readings `secs` apart.
pub(crate) fn rates_between(old: &Counters, new: &Counters, secs: f64) -> Rates {
    Rates {
        rx_bits_per_second: per_second(new.rx_bytes, old.rx_bytes, secs) * 8.0,
        tx_bits_per_second: per_second(new.tx_bytes, old.tx_bytes, secs) * 8.0,
        rx_packets_per_second: per_second(new.rx_packets, old.rx_packets, secs),
        tx_packets_per_second: per_second(new.tx_packets, old.tx_packets, secs),
        seconds: secs,
    }
}

impl PortSampler {
    fn state(&self) -> std::sync::MutexGuard<'_, SamplerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Feed one inventory reading taken at `now` (updates the rates and the cached inventory).
    pub fn sample(&self, links: Vec<Link>, now: Instant) {
        let mut st = self.state();
        let mut rates = HashMap::new();
        let mut last = HashMap::new();
        for l in &links {
            if let Some((t, c)) = st.last.get(&l.name) {
                let secs = now.duration_since(*t).as_secs_f64();
                rates.insert(l.name.clone(), rates_between(c, &l.counters, secs));
            }
            last.insert(l.name.clone(), (now, l.counters));
        }
        st.last = last;
        st.rates = rates;
        st.links = links;
        let r = st.rates.clone();
        for l in &mut st.links {
            l.rates = r.get(&l.name).copied();
        }
    }

    /// The latest rates per port name (empty until the sampler has two readings).
    pub fn rates(&self) -> HashMap<String, Rates> {
        self.state().rates.clone()
    }

    /// Set each port's `rates` from the latest sample (ports the sampler has not seen twice
    /// get `None`).
    pub fn attach_rates(&self, links: &mut [Link]) {
        let st = self.state();
        for l in links {
            l.rates = st.rates.get(&l.name).copied();
        }
    }

    /// The inventory of the last reading (at most about a second old while started).
    pub fn cached(&self) -> Option<Vec<Link>> {
        Some(self.state().links.clone()).filter(|l| !l.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netlink_errors_are_worded_without_the_message_dump() {
        let e = |err| match nl_error("adding 192.0.2.5/24 to eth0", err) {
            BoardError::System(m) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            e(rtnetlink::Error::RequestFailed),
            "adding 192.0.2.5/24 to eth0: the netlink request failed"
        );
        assert_eq!(
            e(rtnetlink::Error::InvalidNla("IFLA_MTU".into())),
            "adding 192.0.2.5/24 to eth0: invalid netlink attribute IFLA_MTU"
        );
        assert_eq!(
            e(rtnetlink::Error::InvalidIp(vec![1, 2])),
            "adding 192.0.2.5/24 to eth0: the kernel sent an invalid IP address"
        );
    }

    #[test]
    fn addresses_parse_with_clear_errors() {
        let a = IfAddr::parse("192.0.2.5/24").unwrap();
        assert_eq!(a.to_string(), "192.0.2.5/24");
        assert_eq!(a.network_string(), "192.0.2.0/24");
        let b = IfAddr::parse(" 2001:db8::5/64 ").unwrap();
        assert_eq!(b.prefix, 64);
        assert_eq!(b.network_string(), "2001:db8::/64");
        let cases = [
            ("192.0.2.5", "has no prefix length"),
            ("192.0.2.300/24", "is not an IPv4 or IPv6 address"),
            ("192.0.2.5/33", "prefix length must be 1..32"),
            ("192.0.2.5/0", "prefix length must be 1..32"),
            ("192.0.2.5/+4", "prefix length must be 1..32"),
            ("2001:db8::1/129", "prefix length must be 1..128"),
            ("192.0.2.0/24", "is the network address of 192.0.2.0/24"),
            ("192.0.2.255/24", "is the broadcast address of 192.0.2.0/24"),
            ("127.0.0.2/8", "loopback"),
            ("224.0.0.1/4", "multicast"),
            ("fe80::1/64", "link-local"),
            ("0.0.0.0/8", "unspecified"),
            ("eth0", "is not an address with a prefix length"),
            ("", "is not an address with a prefix length"),
        ];
        for (s, want) in cases {
            let e = IfAddr::parse(s).unwrap_err();
            assert!(e.contains(want), "{s}: {e} should contain {want}");
        }
        // /31 and /32 have no network or broadcast address.
        assert!(IfAddr::parse("192.0.2.0/31").is_ok());
        assert!(IfAddr::parse("192.0.2.7/32").is_ok());
    }

    #[test]
    fn subnets_overlap_by_the_shorter_prefix() {
        let p = |s: &str| IfAddr::parse_any(s).unwrap();
        assert!(p("192.0.2.1/24").overlaps(&p("192.0.2.200/24")));
        assert!(p("192.0.2.1/24").overlaps(&p("192.0.2.129/25")));
        assert!(p("192.0.2.129/25").overlaps(&p("192.0.2.1/24")));
        assert!(!p("192.0.2.1/25").overlaps(&p("192.0.2.129/25")));
        assert!(!p("192.0.2.1/24").overlaps(&p("198.51.100.1/24")));
        assert!(!p("192.0.2.1/24").overlaps(&p("2001:db8::1/64")));
        assert!(p("2001:db8::1/48").overlaps(&p("2001:db8:0:5::1/64")));
        assert!(p("10.1.2.3/8").contains("10.200.0.1".parse().unwrap()));
    }

    #[test]
    fn rates_from_counters() {
        let old = Counters {
            rx_bytes: 1_000,
            tx_bytes: 5_000,
            rx_packets: 10,
            tx_packets: 20,
            ..Default::default()
        };
        let new = Counters {
            rx_bytes: 126_000,
            tx_bytes: 4_000, // went backwards: port re-created
            rx_packets: 110,
            tx_packets: 20,
            ..Default::default()
        };
        let r = rates_between(&old, &new, 0.5);
        assert_eq!(r.rx_bits_per_second, 2_000_000.0);
        assert_eq!(r.tx_bits_per_second, 0.0);
        assert_eq!(r.rx_packets_per_second, 200.0);
        assert_eq!(r.tx_packets_per_second, 0.0);
    }

    #[test]
    fn the_sampler_keeps_the_last_inventory_and_the_rates_between_two_readings() {
        let s = PortSampler::default();
        assert!(s.cached().is_none());
        let port = |rx_bytes| Link {
            name: "eth0".into(),
            counters: Counters {
                rx_bytes,
                ..Default::default()
            },
            ..Link::default()
        };
        let t0 = Instant::now();
        s.sample(vec![port(1_000)], t0);
        assert!(s.rates().is_empty(), "one reading has no rate");
        s.sample(vec![port(251_000)], t0 + std::time::Duration::from_secs(2));
        let r = s.rates()["eth0"];
        assert_eq!(r.rx_bits_per_second, 1_000_000.0);
        assert_eq!(r.seconds, 2.0);
        let cached = s.cached().expect("an inventory");
        assert_eq!(
            cached[0].rates.map(|r| r.rx_bits_per_second),
            Some(1_000_000.0)
        );
        let mut fresh = vec![
            port(300_000),
            Link {
                name: "eth1".into(),
                ..Link::default()
            },
        ];
        s.attach_rates(&mut fresh);
        assert_eq!(
            fresh[0].rates.map(|r| r.rx_bits_per_second),
            Some(1_000_000.0)
        );
        assert!(fresh[1].rates.is_none());
    }

    #[test]
    fn loopback_is_in_the_netlink_inventory() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let links = rt.block_on(inventory()).unwrap();
        let lo = links.iter().find(|l| l.loopback).expect("loopback");
        assert!(lo.up);
        assert!(lo.mtu >= 1280);
        assert!(lo
            .addresses
            .iter()
            .any(|a| a.address.to_string() == "127.0.0.1/8" && a.scope == "host"));
        assert!(lo.counters.rx_packets >= lo.counters.rx_errors);
        assert_eq!(find(&links, "lo").map(|l| l.index), Ok(lo.index));
        let e = find(&links, "nosuchport0").unwrap_err();
        assert!(e
            .to_string()
            .contains("the board has no port 'nosuchport0'"));
    }
}
