//! The board: its network ports (a quick getifaddrs(3) list here; the full netlink inventory in
//! `links`), changing them (`addresses`, `forwarding`, `apply`), the CPU governor, and the
//! 1 Hz sampler of CPU per core and port counters (`sampler`), and the counters read around
//! each run (NIC, qdisc, socket, softnet, IRQ, clock and temperature: `counters`). It knows nothing of tests.
//! Nothing here parses `ip` or `ifconfig` output.

pub(crate) mod addresses;
pub(crate) mod apply;
pub(crate) mod counters;
pub mod dhcp;
pub(crate) mod diag;
pub(crate) mod error;
pub(crate) mod forwarding;
pub(crate) mod governor;
pub(crate) mod links;
pub(crate) mod netconfig;
pub(crate) mod sampler;
pub(crate) mod shaper;

pub use apply::{record_net_config, snapshot_json};
pub use error::BoardError;

use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// A network interface of the board and its addresses.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Port {
    /// Interface name, e.g. `eth0`.
    pub name: String,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// Has carrier (IFF_RUNNING).
    pub running: bool,
    pub loopback: bool,
    /// IPv4 then IPv6 addresses (without prefix).
    pub addresses: Vec<IpAddr>,
}

impl Port {
    /// The first IPv4 address, else the first IPv6 one.
    pub fn primary(&self) -> Option<IpAddr> {
        self.addresses
            .iter()
            .find(|a| a.is_ipv4())
            .or_else(|| self.addresses.first())
            .copied()
    }
}

/// What a benchmark needs to know of a port: its name, MTU (bytes) and link speed (Mbit/s,
/// `None` when the port reports none: no carrier, or a virtual port without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortFacts {
    pub name: String,
    pub mtu: u32,
    pub speed_mbps: Option<u32>,
    pub loopback: bool,
}

/// Every port's [`PortFacts`] (netlink and sysfs, via [`links::inventory`]); empty when the
/// inventory cannot be read.
pub async fn port_facts() -> Vec<PortFacts> {
    links::inventory()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|l| PortFacts {
            name: l.name,
            mtu: l.mtu,
            speed_mbps: l.speed_mbps,
            loopback: l.loopback,
        })
        .collect()
}

/// All interfaces, sorted by name.
/// The board's own source address for packets to `peer`, as the kernel's routing picks it
/// (a UDP socket connected to `peer`, nothing sent): the address of the port the board
/// answers `peer` through. None when there is no route (or `peer` is unspecified).
pub fn source_address_towards(peer: std::net::IpAddr) -> Option<std::net::IpAddr> {
    if peer.is_unspecified() {
        return None;
    }
    let any: std::net::IpAddr = if peer.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let s = std::net::UdpSocket::bind((any, 0)).ok()?;
    s.connect((peer, 9)).ok()?;
    Some(s.local_addr().ok()?.ip().to_canonical())
}

pub fn ports() -> Vec<Port> {
    use nix::net::if_::InterfaceFlags;
    let mut map: BTreeMap<String, Port> = BTreeMap::new();
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    for a in addrs {
        let p = map.entry(a.interface_name.clone()).or_insert_with(|| Port {
            name: a.interface_name.clone(),
            up: a.flags.contains(InterfaceFlags::IFF_UP),
            running: a.flags.contains(InterfaceFlags::IFF_RUNNING),
            loopback: a.flags.contains(InterfaceFlags::IFF_LOOPBACK),
            addresses: Vec::new(),
        });
        if let Some(addr) = a.address {
            if let Some(v4) = addr.as_sockaddr_in() {
                p.addresses.push(IpAddr::V4(v4.ip()));
            } else if let Some(v6) = addr.as_sockaddr_in6() {
                p.addresses.push(IpAddr::V6(v6.ip()));
            }
        }
    }
    let mut v: Vec<Port> = map.into_values().collect();
    for p in &mut v {
        crate::model::order::sort_by_key(&mut p.addresses, |a| a.is_ipv6());
    }
    v
}

/// The board's `net.ipv4.tcp_timestamps` setting (on unless it reads 0).
pub fn tcp_timestamps_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_timestamps")
        .map(|s| s.trim() != "0")
        .unwrap_or(true)
}

/// Whether the board's kernel offers TCP congestion control `name`: listed in
/// `net.ipv4.tcp_available_congestion_control` (the algorithms loaded), or built in as the
/// default (`net.ipv4.tcp_congestion_control`). `false` when neither can be read.
pub fn congestion_available(name: &str) -> bool {
    ["tcp_available_congestion_control", "tcp_congestion_control"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{f}")).ok())
        .any(|s| s.split_whitespace().any(|w| w == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed_with_127_0_0_1() {
        let ps = ports();
        let lo = ps.iter().find(|p| p.loopback).expect("a loopback port");
        assert_eq!(lo.primary(), Some("127.0.0.1".parse().unwrap()));
        assert!(lo.up);
    }
}
