//! The board's network configuration as data: per-port settings (up, MTU, addresses), the
//! default routes, and forwarding — and the changes a user can ask for, validated against the
//! ports the board has. Pure: nothing here touches the system, so every rule ("an MTU out of
//! range", "a subnet that overlaps another port", "forwarding a port to itself") is unit-tested.
//!
//! A [`NetState`] can be partial ("scoped"): it then speaks only of the ports and parts it
//! holds. The same type is the live state (everything), the roll-back snapshot (the parts a
//! change touched, as they were) and the confirmed configuration re-applied at start.

use super::addresses::Gateway;
use super::error::{invalid, BoardError};
use super::forwarding::{rule_safe_name, Forward, Sysctls};
use super::links::{find, IfAddr, Link};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Smallest MTU accepted when the driver does not say (IPv4's minimum), bytes.
pub(crate) const MIN_MTU: u32 = 68;
/// Largest MTU accepted when the driver does not say, bytes.
pub(crate) const MAX_MTU: u32 = 65535;
/// Below this MTU (bytes) the kernel removes a port's IPv6 addresses.
pub(crate) const IPV6_MIN_MTU: u32 = 1280;

/// What netperfd sets on a port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortState {
    /// Administratively up.
    pub up: bool,
    /// MTU in bytes.
    pub mtu: u32,
    /// Permanent addresses (not link-local, not from DHCP/SLAAC), sorted.
    pub addresses: Vec<IfAddr>,
    /// By DHCP (IPv4; IPv6 by SLAAC) through the image's client (see `board::dhcp`); the
    /// client then owns the IPv4 default route. Absent (false) = static.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dhcp: bool,
}

/// The default route of one family: a gateway, or explicitly none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultRoute {
    /// The gateway; None means "no default route".
    pub gateway: Option<Gateway>,
}

/// Forwarding: the forwards our firewall rules implement, the kernel switches, and the
/// switches as they were before netperfd turned forwarding on (restored when the last forward
/// goes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FwState {
    /// Enabled forwards, in the order they were enabled.
    pub forwards: Vec<Forward>,
    /// net.ipv4.ip_forward / net.ipv6.conf.all.forwarding.
    pub sysctls: Sysctls,
    /// The switches before the first forward was enabled.
    #[serde(default)]
    pub saved: Option<Sysctls>,
}

/// A (possibly partial) network configuration. Absent parts are not meant.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NetState {
    /// Per-port settings, by port name.
    #[serde(default)]
    pub ports: BTreeMap<String, PortState>,
    /// The IPv4 default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_default_route: Option<DefaultRoute>,
    /// The IPv6 default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_default_route: Option<DefaultRoute>,
    /// Forwarding and NAT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarding: Option<FwState>,
}

/// Which parts of a [`NetState`] a change touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Port names.
    pub ports: Vec<String>,
    /// The IPv4 default route.
    pub gw4: bool,
    /// The IPv6 default route.
    pub gw6: bool,
    /// Forwarding.
    pub forwarding: bool,
}

impl Scope {
    /// Nothing touched.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty() && !self.gw4 && !self.gw6 && !self.forwarding
    }
}

impl NetState {
    /// Only the parts in `scope` (parts this state lacks stay absent).
    pub fn restrict(&self, scope: &Scope) -> NetState {
        NetState {
            ports: self
                .ports
                .iter()
                .filter(|(k, _)| scope.ports.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            ipv4_default_route: if scope.gw4 {
                self.ipv4_default_route.clone()
            } else {
                None
            },
            ipv6_default_route: if scope.gw6 {
                self.ipv6_default_route.clone()
            } else {
                None
            },
            forwarding: if scope.forwarding {
                self.forwarding.clone()
            } else {
                None
            },
        }
    }

    /// Take every part `other` has (overwriting ours).
    pub fn overlay(&mut self, other: &NetState) {
        for (k, v) in &other.ports {
            self.ports.insert(k.clone(), v.clone());
        }
        if other.ipv4_default_route.is_some() {
            self.ipv4_default_route = other.ipv4_default_route.clone();
        }
        if other.ipv6_default_route.is_some() {
            self.ipv6_default_route = other.ipv6_default_route.clone();
        }
        if other.forwarding.is_some() {
            self.forwarding = other.forwarding.clone();
        }
    }

    /// Take the parts `other` has that we lack (keeping ours).
    pub fn fill_from(&mut self, other: &NetState) {
        for (k, v) in &other.ports {
            self.ports.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if self.ipv4_default_route.is_none() {
            self.ipv4_default_route = other.ipv4_default_route.clone();
        }
        if self.ipv6_default_route.is_none() {
            self.ipv6_default_route = other.ipv6_default_route.clone();
        }
        if self.forwarding.is_none() {
            self.forwarding = other.forwarding.clone();
        }
    }

    /// Whether the state holds nothing.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
            && self.ipv4_default_route.is_none()
            && self.ipv6_default_route.is_none()
            && self.forwarding.is_none()
    }
}

/// The [`PortState`] of an inventory entry.
pub(crate) fn port_state(l: &Link) -> PortState {
    let mut addresses = l.managed_addresses();
    crate::model::order::sort(&mut addresses);
    PortState {
        up: l.up,
        mtu: l.mtu,
        addresses,
        dhcp: false,
    }
}

/// One change a user asks for. The web API takes a list of these as JSON objects with an
/// `op` field (`{"op": "add_address", "port": "eth0", "address": "192.0.2.5/24"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Change {
    /// Add an address with prefix to a port.
    AddAddress {
        /// Port name.
        port: String,
        /// `ADDRESS/PREFIX`.
        address: String,
    },
    /// Remove an address from a port.
    DelAddress {
        /// Port name.
        port: String,
        /// `ADDRESS/PREFIX`.
        address: String,
    },
    /// Bring a port up or down and/or set its MTU.
    Link {
        /// Port name.
        port: String,
        /// true = up, false = down; absent = unchanged.
        #[serde(default)]
        up: Option<bool>,
        /// MTU in bytes (a number or a decimal string); absent = unchanged.
        #[serde(default, deserialize_with = "crate::model::input::opt_text")]
        mtu: Option<String>,
    },
    /// Set (or with an empty `via`, remove) the default route of a family.
    Gateway {
        /// Next hop; empty or absent removes the default route of `family`.
        #[serde(default)]
        via: Option<String>,
        /// Outgoing port (optional).
        #[serde(default)]
        port: Option<String>,
        /// `ipv4` or `ipv6`; needed only when removing (taken from `via` otherwise).
        #[serde(default)]
        family: Option<String>,
    },
    /// Enable forwarding from `in` to `out`, optionally with NAT (MASQUERADE on `out`).
    ForwardEnable {
        /// Ingress port.
        #[serde(rename = "in")]
        ingress: String,
        /// Egress port.
        #[serde(rename = "out")]
        egress: String,
        /// Masquerade on the egress port.
        #[serde(default)]
        nat: bool,
        /// Forward IPv6 too.
        #[serde(default)]
        ipv6: bool,
    },
    /// Switch a port between static addresses and DHCP (IPv4; IPv6 by SLAAC).
    Addressing {
        /// Port name.
        port: String,
        /// `dhcp` or `static`.
        method: String,
        /// Static only: the port's addresses, `ADDRESS/PREFIX`, several separated by commas
        /// or spaces; absent or empty = none (only link-local).
        #[serde(default)]
        address: Option<String>,
        /// Static only: the IPv4 default route's next hop through this port; absent = no
        /// IPv4 default route (the DHCP client's goes with it).
        #[serde(default)]
        gateway: Option<String>,
    },
    /// Disable the forwarding from `in` to `out`.
    ForwardDisable {
        /// Ingress port.
        #[serde(rename = "in")]
        ingress: String,
        /// Egress port.
        #[serde(rename = "out")]
        egress: String,
    },
}

/// Whether `target`'s IPv4 default route leaves through `port`.
fn via_port(target: &NetState, port: &str) -> bool {
    target
        .ipv4_default_route
        .as_ref()
        .and_then(|r| r.gateway.as_ref())
        .is_some_and(|g| g.port.as_deref() == Some(port))
}

fn not_loopback<'a>(links: &'a [Link], name: &str) -> Result<&'a Link, BoardError> {
    let l = find(links, name)?;
    if l.loopback {
        return invalid(format!(
            "{name} is the loopback interface; netperfd does not change it"
        ));
    }
    Ok(l)
}

fn port_mut<'a>(
    target: &'a mut NetState,
    links: &[Link],
    name: &str,
) -> Result<&'a mut PortState, BoardError> {
    let l = not_loopback(links, name)?;
    Ok(target
        .ports
        .entry(name.to_string())
        .or_insert_with(|| port_state(l)))
}

fn parse_mtu(s: &str, l: &Link) -> Result<u32, BoardError> {
    let lo = l.min_mtu.unwrap_or(MIN_MTU).max(MIN_MTU);
    let hi = l.max_mtu.unwrap_or(MAX_MTU).min(MAX_MTU);
    let t = s.trim();
    match t.parse::<u32>() {
        Ok(n) if t.bytes().all(|b| b.is_ascii_digit()) && (lo..=hi).contains(&n) => Ok(n),
        _ => invalid(format!(
            "MTU must be {lo}..{hi} bytes for {}, got '{t}'",
            l.name
        )),
    }
}

fn family_word(v6: bool) -> &'static str {
    if v6 {
        "IPv6"
    } else {
        "IPv4"
    }
}

impl Change {
    /// The ports this change names (for messages and scopes).
    pub fn scope(&self) -> Scope {
        match self {
            Change::AddAddress { port, .. }
            | Change::DelAddress { port, .. }
            | Change::Link { port, .. } => Scope {
                ports: vec![port.clone()],
                ..Scope::default()
            },
            Change::Gateway { via, family, .. } => {
                let v6 = match via.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
                    Some(v) => v.contains(':'),
                    None => family.as_deref().map(str::trim) == Some("ipv6"),
                };
                Scope {
                    gw4: !v6,
                    gw6: v6,
                    ..Scope::default()
                }
            }
            Change::ForwardEnable { .. } | Change::ForwardDisable { .. } => Scope {
                forwarding: true,
                ..Scope::default()
            },
            // The DHCP client may set the IPv4 default route, and a static gateway replaces
            // it: the scope holds it so that a roll-back puts the one before back (a route
            // through a port by DHCP is then left to its client).
            Change::Addressing { port, .. } => Scope {
                ports: vec![port.clone()],
                gw4: true,
                ..Scope::default()
            },
        }
    }

    /// Apply the change to `target` (a full live state), checking it against the board's
    /// ports `links`. Returns a one-line description, or a clear error (target may then be
    /// half-changed: callers discard it).
    pub fn apply_to(&self, target: &mut NetState, links: &[Link]) -> Result<String, BoardError> {
        match self {
            Change::AddAddress { port, address } => add_address(target, links, port, address),
            Change::DelAddress { port, address } => del_address(target, links, port, address),
            Change::Link { port, up, mtu } => set_link(target, links, port, *up, mtu.as_deref()),
            Change::Gateway { via, port, family } => set_gateway(
                target,
                links,
                via.as_deref(),
                port.as_deref(),
                family.as_deref(),
            ),
            Change::ForwardEnable {
                ingress,
                egress,
                nat,
                ipv6,
            } => {
                let f = Forward {
                    ingress: ingress.clone(),
                    egress: egress.clone(),
                    nat: *nat,
                    ipv6: *ipv6,
                };
                enable_forward(target, links, f)
            }
            Change::Addressing {
                port,
                method,
                address,
                gateway,
            } => {
                let address = address.as_deref().map(str::trim).unwrap_or("");
                let gateway = gateway.as_deref().map(str::trim).unwrap_or("");
                match method.trim() {
                    "dhcp" => to_dhcp(target, links, port, address, gateway),
                    "static" => to_static(target, links, port, address, gateway),
                    m => invalid(format!("method must be dhcp or static, got '{m}'")),
                }
            }
            Change::ForwardDisable { ingress, egress } => disable_forward(target, ingress, egress),
        }
    }
}

/// [`Change::AddAddress`]: add `address` (`ADDRESS/PREFIX`) to `port`'s static addresses.
fn add_address(
    target: &mut NetState,
    links: &[Link],
    port: &str,
    address: &str,
) -> Result<String, BoardError> {
    let a = IfAddr::parse(address).map_err(BoardError::Invalid)?;
    let p = port_mut(target, links, port)?;
    if p.addresses.contains(&a) {
        return invalid(format!("{a} is already on {port}"));
    }
    p.addresses.push(a);
    crate::model::order::sort(&mut p.addresses);
    Ok(format!("add {a} to {port}"))
}

/// [`Change::DelAddress`]: remove `address` from `port`'s static addresses; one the kernel
/// or a DHCP/SLAAC client put there is refused with a message saying so.
fn del_address(
    target: &mut NetState,
    links: &[Link],
    port: &str,
    address: &str,
) -> Result<String, BoardError> {
    let a = IfAddr::parse_any(address).map_err(BoardError::Invalid)?;
    let l = not_loopback(links, port)?;
    let p = port_mut(target, links, port)?;
    if !p.addresses.contains(&a) {
        if l.addresses.iter().any(|x| x.address == a) {
            return invalid(format!(
                "{a} on {port} comes from DHCP/SLAAC or the kernel; netperfd leaves it alone"
            ));
        }
        let have: Vec<String> = p.addresses.iter().map(|x| x.to_string()).collect();
        return invalid(format!(
            "{a} is not on {port} (it has {})",
            if have.is_empty() {
                "no address".to_string()
            } else {
                have.join(", ")
            }
        ));
    }
    p.addresses.retain(|x| *x != a);
    Ok(format!("remove {a} from {port}"))
}

/// [`Change::Link`]: bring `port` up or down and/or set its MTU (bytes, as text).
fn set_link(
    target: &mut NetState,
    links: &[Link],
    port: &str,
    up: Option<bool>,
    mtu: Option<&str>,
) -> Result<String, BoardError> {
    let l = not_loopback(links, port)?;
    if up.is_none() && mtu.map(str::trim).unwrap_or("").is_empty() {
        return invalid(format!(
            "nothing to change on {port}: give up/down or an MTU"
        ));
    }
    let mtu = match mtu.map(str::trim).filter(|s| !s.is_empty()) {
        Some(m) => Some(parse_mtu(m, l)?),
        None => None,
    };
    let p = port_mut(target, links, port)?;
    let mut what = Vec::new();
    if let Some(u) = up {
        p.up = u;
        what.push(if u { "up" } else { "down" }.to_string());
    }
    if let Some(m) = mtu {
        if m < IPV6_MIN_MTU && p.addresses.iter().any(|a| !a.is_ipv4()) {
            return invalid(format!(
                "an MTU below {IPV6_MIN_MTU} would remove the IPv6 addresses of {port}; remove them first"
            ));
        }
        p.mtu = m;
        what.push(format!("MTU {m}"));
    }
    Ok(format!("set {port} {}", what.join(", ")))
}

/// [`Change::Gateway`]: set the default route through `via` (optionally out of `port`), or
/// with no `via` remove the default route of `family` (`ipv4`, the default, or `ipv6`).
fn set_gateway(
    target: &mut NetState,
    links: &[Link],
    via: Option<&str>,
    port: Option<&str>,
    family: Option<&str>,
) -> Result<String, BoardError> {
    let via = via.map(str::trim).filter(|s| !s.is_empty());
    let port = port.map(str::trim).filter(|s| !s.is_empty());
    let Some(v) = via else {
        let v6 = match family.map(str::trim) {
            Some("ipv6") => true,
            Some("ipv4") | None => false,
            Some(f) => return invalid(format!("family must be ipv4 or ipv6, got '{f}'")),
        };
        let r = Some(DefaultRoute { gateway: None });
        if v6 {
            target.ipv6_default_route = r;
        } else {
            target.ipv4_default_route = r;
        }
        return Ok(format!("remove the {} default route", family_word(v6)));
    };
    let ip: IpAddr = v.parse().map_err(|_| {
        BoardError::Invalid(format!("gateway '{v}' is not an IPv4 or IPv6 address"))
    })?;
    if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
        return invalid(format!("{ip} cannot be a gateway"));
    }
    if let Some(p) = port {
        not_loopback(links, p)?;
    }
    let g = Gateway {
        via: ip,
        port: port.map(String::from),
    };
    let desc = format!("set the default route {g}");
    let r = Some(DefaultRoute { gateway: Some(g) });
    if ip.is_ipv6() {
        target.ipv6_default_route = r;
    } else {
        target.ipv4_default_route = r;
    }
    Ok(desc)
}

/// [`Change::ForwardEnable`]: add forward `f` (replacing one between the same ports), saving
/// the kernel's forwarding switches before the first and turning them on as needed.
fn enable_forward(target: &mut NetState, links: &[Link], f: Forward) -> Result<String, BoardError> {
    let (ingress, egress) = (&f.ingress, &f.egress);
    if ingress == egress {
        return invalid(format!(
            "forwarding needs two different ports; got {ingress} → {egress}"
        ));
    }
    for p in [ingress, egress] {
        not_loopback(links, p)?;
        if !rule_safe_name(p) {
            return invalid(format!("port name '{p}' cannot be used in a firewall rule"));
        }
    }
    let fw = target.forwarding.get_or_insert_with(|| FwState {
        forwards: Vec::new(),
        sysctls: super::forwarding::read_sysctls(),
        saved: None,
    });
    if fw.forwards.contains(&f) {
        return invalid(format!("forwarding {f} is already enabled"));
    }
    if let Some(other) = fw
        .forwards
        .iter()
        .find(|g| g.egress == f.egress && g.ingress != f.ingress && g.nat != f.nat)
    {
        return invalid(format!(
            "NAT is per egress port: {} already forwards to {} {} NAT; enable this one {} NAT too",
            other.ingress,
            other.egress,
            if other.nat { "with" } else { "without" },
            if other.nat { "with" } else { "without" },
        ));
    }
    if fw.forwards.is_empty() && fw.saved.is_none() {
        fw.saved = Some(fw.sysctls);
    }
    fw.forwards
        .retain(|g| !(g.ingress == f.ingress && g.egress == f.egress));
    fw.forwards.push(f.clone());
    let saved6 = fw.saved.map(|s| s.ipv6).unwrap_or(fw.sysctls.ipv6);
    fw.sysctls = Sysctls {
        ipv4: true,
        ipv6: fw.forwards.iter().any(|g| g.ipv6) || saved6,
    };
    Ok(format!("enable forwarding {f}"))
}

/// [`Change::Addressing`] to `dhcp`: hand `port` to the DHCP client (`address` and `gateway`
/// are the request's, trimmed, and must be empty).
fn to_dhcp(
    target: &mut NetState,
    links: &[Link],
    port: &str,
    address: &str,
    gateway: &str,
) -> Result<String, BoardError> {
    if !address.is_empty() || !gateway.is_empty() {
        return invalid(format!(
            "a port by DHCP takes its address and gateway from the lease; leave address and gateway out for {port}"
        ));
    }
    if !super::dhcp::safe_port(port) {
        not_loopback(links, port)?;
        return invalid(format!(
            "port name '{port}' cannot be handed to a DHCP client"
        ));
    }
    let p = port_mut(target, links, port)?;
    if p.dhcp {
        return invalid(format!("{port} is already by DHCP"));
    }
    p.dhcp = true;
    p.addresses.clear();
    // Only a default route through this port goes (the client sets its
    // own); another port's stays, and the client then leaves it alone.
    if via_port(target, port) {
        target.ipv4_default_route = Some(DefaultRoute { gateway: None });
    }
    Ok(format!("{port} by DHCP (IPv6 by SLAAC)"))
}

/// [`Change::Addressing`] to `static`: `port` takes the addresses in `address` (separated by
/// commas or spaces) and, if `gateway` is not empty, the IPv4 default route through it.
fn to_static(
    target: &mut NetState,
    links: &[Link],
    port: &str,
    address: &str,
    gateway: &str,
) -> Result<String, BoardError> {
    let mut addrs = Vec::new();
    for w in address
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        let a = IfAddr::parse(w).map_err(BoardError::Invalid)?;
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    }
    let gw = match gateway {
        "" => None,
        g => {
            let ip: std::net::Ipv4Addr = g.parse().map_err(|_| {
                BoardError::Invalid(format!("gateway '{g}' is not an IPv4 address"))
            })?;
            if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
                return invalid(format!("{ip} cannot be a gateway"));
            }
            Some(Gateway {
                via: IpAddr::V4(ip),
                port: Some(port.to_string()),
            })
        }
    };
    let p = port_mut(target, links, port)?;
    if !p.dhcp {
        return invalid(format!(
            "{port} is already static; add or remove its addresses instead"
        ));
    }
    p.dhcp = false;
    crate::model::order::sort(&mut addrs);
    let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    p.addresses = addrs;
    let mut desc = format!(
        "{port} static ({})",
        if list.is_empty() {
            "no address".to_string()
        } else {
            list.join(", ")
        }
    );
    if let Some(g) = &gw {
        desc.push_str(&format!(", default route {g}"));
    }
    // A gateway given replaces the board's default route; without one,
    // only the client's route through this port goes.
    if gw.is_some() || via_port(target, port) {
        target.ipv4_default_route = Some(DefaultRoute { gateway: gw });
    }
    Ok(desc)
}

/// [`Change::ForwardDisable`]: remove the forward `ingress` → `egress`; after the last one the
/// kernel's forwarding switches go back to what they were before the first.
fn disable_forward(
    target: &mut NetState,
    ingress: &str,
    egress: &str,
) -> Result<String, BoardError> {
    let Some(fw) = target.forwarding.as_mut() else {
        return invalid(format!("forwarding {ingress} → {egress} is not enabled"));
    };
    let Some(i) = fw
        .forwards
        .iter()
        .position(|g| g.ingress == ingress && g.egress == egress)
    else {
        return invalid(format!("forwarding {ingress} → {egress} is not enabled"));
    };
    fw.forwards.remove(i);
    if fw.forwards.is_empty() {
        if let Some(s) = fw.saved.take() {
            fw.sysctls = s;
        }
    } else {
        let saved6 = fw.saved.map(|s| s.ipv6).unwrap_or(false);
        fw.sysctls.ipv6 = fw.forwards.iter().any(|g| g.ipv6) || saved6;
    }
    Ok(format!("disable forwarding {ingress} → {egress}"))
}

/// Checks across the whole target that a single change cannot see: a new address must not
/// overlap a subnet of another port, and a gateway must lie in a subnet the board has.
pub(crate) fn validate(
    target: &NetState,
    live: &NetState,
    links: &[Link],
) -> Result<(), BoardError> {
    // Every port's addresses as they will be: the target's for ports it holds, else what the
    // kernel has (dynamic ones included).
    let mut all: Vec<(String, IfAddr)> = Vec::new();
    for l in links.iter().filter(|l| !l.loopback) {
        match target.ports.get(&l.name) {
            Some(p) => {
                all.extend(p.addresses.iter().map(|a| (l.name.clone(), *a)));
                all.extend(
                    l.addresses
                        .iter()
                        .filter(|a| !a.permanent && !a.address.is_link_local())
                        .map(|a| (l.name.clone(), a.address)),
                );
            }
            None => all.extend(
                l.addresses
                    .iter()
                    .filter(|a| !a.address.is_link_local())
                    .map(|a| (l.name.clone(), a.address)),
            ),
        }
    }
    for (name, p) in &target.ports {
        let before = live.ports.get(name).map(|x| x.addresses.as_slice());
        for a in &p.addresses {
            if before.is_some_and(|b| b.contains(a)) {
                continue;
            }
            if let Some((other, b)) = all
                .iter()
                .find(|(o, b)| o != name && b.is_ipv4() == a.is_ipv4() && a.overlaps(b))
            {
                return invalid(format!(
                    "{a} on {name} overlaps {b} on {other}: two ports cannot share a subnet"
                ));
            }
        }
    }
    for (r, was, v6) in [
        (&target.ipv4_default_route, &live.ipv4_default_route, false),
        (&target.ipv6_default_route, &live.ipv6_default_route, true),
    ] {
        // Only a gateway being set is checked: a route the board already has is its business.
        if r == was {
            continue;
        }
        let Some(Some(g)) = r.as_ref().map(|r| r.gateway.as_ref()) else {
            continue;
        };
        if g.via.is_ipv6() != v6 {
            continue;
        }
        let on_port = |(n, a): &&(String, IfAddr)| {
            g.port.as_ref().is_none_or(|p| p == n) && a.contains(g.via)
        };
        if !all.iter().any(|x| on_port(&x)) {
            return invalid(match &g.port {
                Some(p) => format!(
                    "gateway {} is not in a subnet of {p}; give {p} an address in its subnet first",
                    g.via
                ),
                None => format!(
                    "gateway {} is not in the subnet of any port; give a port an address in its subnet first",
                    g.via
                ),
            });
        }
        if all.iter().any(|(_, a)| a.addr == g.via) {
            return invalid(format!(
                "{} is the board's own address, not a gateway",
                g.via
            ));
        }
    }
    Ok(())
}

/// When the target takes away `mgmt` — the board address the browser came in on — say so:
/// the address is removed, or its port goes down. `links` (the live inventory) finds the port
/// even when the address is a DHCP one that netperfd does not manage.
pub(crate) fn management_warning(
    links: &[Link],
    live: &NetState,
    target: &NetState,
    mgmt: IpAddr,
) -> Option<String> {
    let port = links
        .iter()
        .find(|l| l.addresses.iter().any(|a| a.address.addr == mgmt))?;
    let name = &port.name;
    let before = live.ports.get(name)?;
    let after = target.ports.get(name)?;
    if before.addresses.iter().any(|a| a.addr == mgmt)
        && !after.addresses.iter().any(|a| a.addr == mgmt)
    {
        return Some(format!(
            "This change removes {mgmt} from {name}, the address this browser is connected to. \
             You could not confirm it from here, so it would be rolled back. \
             To move the management address on purpose, use \"Apply unchecked\"."
        ));
    }
    if before.dhcp
        && !after.dhcp
        && !after.addresses.iter().any(|a| a.addr == mgmt)
        && port
            .addresses
            .iter()
            .any(|a| a.address.addr == mgmt && !a.permanent)
    {
        return Some(format!(
            "This change ends DHCP on {name}, and with it the lease of {mgmt}, the address this browser is connected to. \
             You could not confirm it from here, so it would be rolled back. \
             To move the management address on purpose, use \"Apply unchecked\"."
        ));
    }
    if before.up && !after.up {
        return Some(format!(
            "This change brings {name} down, the port this browser is connected to ({mgmt}). \
             You could not confirm it from here, so it would be rolled back. \
             To do it anyway, use \"Apply unchecked\"."
        ));
    }
    None
}

/// The addresses of `confirmed` that none of `ports` carries now, as `192.0.2.1/24 on eth0`
/// (`eth0 is gone` for a port that no longer exists), in the confirmed configuration's order.
pub(crate) fn missing_addresses(confirmed: &NetState, ports: &[Link]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, want) in &confirmed.ports {
        let Some(link) = ports.iter().find(|l| &l.name == name) else {
            if !want.addresses.is_empty() {
                out.push(format!("{name} is gone"));
            }
            continue;
        };
        for a in &want.addresses {
            if !link.addresses.iter().any(|p| p.address == *a) {
                out.push(format!("{a} on {name}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::links::{Counters, PortAddress};

    fn link(name: &str, index: u32, addrs: &[&str]) -> Link {
        Link {
            index,
            name: name.into(),
            mac: Some("02:00:00:00:00:01".into()),
            driver: Some("veth".into()),
            kind: Some("veth".into()),
            speed_mbps: Some(10000),
            duplex: Some("full".into()),
            carrier: true,
            oper_state: "up".into(),
            up: true,
            loopback: name == "lo",
            mtu: 1500,
            min_mtu: Some(68),
            max_mtu: Some(9000),
            addresses: addrs.iter().map(|a| PortAddress::static_v4(a)).collect(),
            counters: Counters::default(),
            rates: None,
        }
    }

    #[test]
    fn addresses_something_else_removed_are_named() {
        // networkctl reconfigure (or a DHCP client) dropped 198.51.100.1 from eth1 behind
        // netperfd's back, and the USB port eth2 is gone: the Ports page says so.
        let (links, mut confirmed) = board();
        assert!(missing_addresses(&confirmed, &links).is_empty());
        confirmed.ports.insert(
            "eth2".into(),
            PortState {
                up: true,
                mtu: 1500,
                addresses: vec![IfAddr::parse_any("203.0.113.1/24").unwrap()],
                dhcp: false,
            },
        );
        let now = vec![
            link("eth0", 2, &["192.0.2.1/24"]),
            link("eth1", 3, &[]),
            link("lo", 1, &["127.0.0.1/8"]),
        ];
        assert_eq!(
            missing_addresses(&confirmed, &now),
            vec!["198.51.100.1/24 on eth1".to_string(), "eth2 is gone".into()]
        );
        // Another prefix length is another address.
        let now = vec![
            link("eth0", 2, &["192.0.2.1/25"]),
            link("eth1", 3, &["198.51.100.1/24"]),
        ];
        assert_eq!(
            missing_addresses(&confirmed, &now),
            vec!["192.0.2.1/24 on eth0".to_string(), "eth2 is gone".into()]
        );
    }

    fn board() -> (Vec<Link>, NetState) {
        let links = vec![
            link("eth0", 2, &["192.0.2.1/24"]),
            link("eth1", 3, &["198.51.100.1/24"]),
            link("lo", 1, &["127.0.0.1/8"]),
        ];
        let live = NetState {
            ports: links
                .iter()
                .filter(|l| !l.loopback)
                .map(|l| (l.name.clone(), port_state(l)))
                .collect(),
            ipv4_default_route: Some(DefaultRoute { gateway: None }),
            ipv6_default_route: Some(DefaultRoute { gateway: None }),
            forwarding: Some(FwState {
                forwards: vec![],
                sysctls: Sysctls {
                    ipv4: false,
                    ipv6: false,
                },
                saved: None,
            }),
        };
        (links, live)
    }

    fn try_changes(changes: &[Change]) -> Result<NetState, String> {
        let (links, live) = board();
        let mut t = live.clone();
        for c in changes {
            c.apply_to(&mut t, &links).map_err(|e| e.to_string())?;
        }
        validate(&t, &live, &links).map_err(|e| e.to_string())?;
        Ok(t)
    }

    fn add(port: &str, a: &str) -> Change {
        Change::AddAddress {
            port: port.into(),
            address: a.into(),
        }
    }

    #[test]
    fn bad_input_gets_a_clear_error() {
        let cases: Vec<(Change, &str)> = vec![
            (
                add("eth9", "192.0.2.5/24"),
                "the board has no port 'eth9' (ports: eth0, eth1)",
            ),
            (
                add("eth0", "192.0.2.300/24"),
                "'192.0.2.300' is not an IPv4 or IPv6 address",
            ),
            (add("eth0", "192.0.2.5"), "has no prefix length"),
            (add("eth0", "192.0.2.5/33"), "prefix length must be 1..32"),
            (
                add("eth0", "198.51.100.7/24"),
                "198.51.100.7/24 on eth0 overlaps 198.51.100.1/24 on eth1",
            ),
            (
                add("eth0", "198.51.0.1/16"),
                "overlaps 198.51.100.1/24 on eth1",
            ),
            (
                add("eth0", "192.0.2.1/24"),
                "192.0.2.1/24 is already on eth0",
            ),
            (add("lo", "127.0.0.2/8"), "loopback"),
            (
                Change::DelAddress {
                    port: "eth0".into(),
                    address: "192.0.2.9/24".into(),
                },
                "192.0.2.9/24 is not on eth0 (it has 192.0.2.1/24)",
            ),
            (
                Change::Link {
                    port: "eth0".into(),
                    up: None,
                    mtu: Some("70000".into()),
                },
                "MTU must be 68..9000 bytes for eth0, got '70000'",
            ),
            (
                Change::Link {
                    port: "eth0".into(),
                    up: None,
                    mtu: Some("67".into()),
                },
                "MTU must be 68..9000 bytes for eth0, got '67'",
            ),
            (
                Change::Link {
                    port: "eth0".into(),
                    up: None,
                    mtu: Some("15OO".into()),
                },
                "MTU must be 68..9000",
            ),
            (
                Change::Link {
                    port: "eth0".into(),
                    up: None,
                    mtu: None,
                },
                "nothing to change on eth0",
            ),
            (
                Change::ForwardEnable {
                    ingress: "eth0".into(),
                    egress: "eth0".into(),
                    nat: true,
                    ipv6: false,
                },
                "forwarding needs two different ports; got eth0 → eth0",
            ),
            (
                Change::ForwardEnable {
                    ingress: "eth0".into(),
                    egress: "wlan7".into(),
                    nat: true,
                    ipv6: false,
                },
                "the board has no port 'wlan7'",
            ),
            (
                Change::ForwardDisable {
                    ingress: "eth0".into(),
                    egress: "eth1".into(),
                },
                "forwarding eth0 → eth1 is not enabled",
            ),
            (
                Change::Gateway {
                    via: Some("203.0.113.1".into()),
                    port: None,
                    family: None,
                },
                "gateway 203.0.113.1 is not in the subnet of any port",
            ),
            (
                Change::Gateway {
                    via: Some("192.0.2.254".into()),
                    port: Some("eth1".into()),
                    family: None,
                },
                "gateway 192.0.2.254 is not in a subnet of eth1",
            ),
            (
                Change::Gateway {
                    via: Some("192.0.2.1".into()),
                    port: None,
                    family: None,
                },
                "is the board's own address",
            ),
            (
                Change::Gateway {
                    via: Some("gw.example".into()),
                    port: None,
                    family: None,
                },
                "gateway 'gw.example' is not an IPv4 or IPv6 address",
            ),
        ];
        for (c, want) in cases {
            let e = try_changes(std::slice::from_ref(&c)).unwrap_err();
            assert!(e.contains(want), "{c:?}: '{e}' should contain '{want}'");
        }
    }

    #[test]
    fn good_changes_build_the_target() {
        let t = try_changes(&[
            add("eth0", "192.0.2.7/24"),
            add("eth0", "2001:db8::1/64"),
            Change::Link {
                port: "eth1".into(),
                up: Some(false),
                mtu: Some("9000".into()),
            },
            Change::Gateway {
                via: Some("192.0.2.254".into()),
                port: Some("eth0".into()),
                family: None,
            },
        ])
        .unwrap();
        let e0: Vec<String> = t.ports["eth0"]
            .addresses
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(e0, vec!["192.0.2.1/24", "192.0.2.7/24", "2001:db8::1/64"]);
        assert_eq!(
            t.ports["eth1"],
            PortState {
                up: false,
                mtu: 9000,
                addresses: vec![IfAddr::parse("198.51.100.1/24").unwrap()],
                dhcp: false,
            }
        );
        assert_eq!(
            t.ipv4_default_route
                .as_ref()
                .and_then(|r| r.gateway.as_ref())
                .map(|g| g.to_string()),
            Some("via 192.0.2.254 dev eth0".into())
        );
        // Moving an address between ports in one change list is fine.
        assert!(try_changes(&[
            Change::DelAddress {
                port: "eth1".into(),
                address: "198.51.100.1/24".into()
            },
            add("eth0", "198.51.100.9/24"),
        ])
        .is_ok());
    }

    #[test]
    fn forwarding_saves_and_restores_the_switches() {
        let (links, live) = board();
        let mut t = live.clone();
        let en = Change::ForwardEnable {
            ingress: "eth0".into(),
            egress: "eth1".into(),
            nat: true,
            ipv6: false,
        };
        assert_eq!(
            en.apply_to(&mut t, &links).unwrap(),
            "enable forwarding eth0 → eth1 with NAT"
        );
        let fw = t.forwarding.clone().unwrap();
        assert_eq!(
            fw.sysctls,
            Sysctls {
                ipv4: true,
                ipv6: false
            }
        );
        assert_eq!(
            fw.saved,
            Some(Sysctls {
                ipv4: false,
                ipv6: false
            })
        );
        assert!(en
            .apply_to(&mut t, &links)
            .unwrap_err()
            .to_string()
            .contains("already enabled"));
        // NAT is per egress port.
        let mut t2 = t.clone();
        let links3 = {
            let mut l = links.clone();
            l.push(link("eth2", 4, &["203.0.113.1/24"]));
            l
        };
        let e = Change::ForwardEnable {
            ingress: "eth2".into(),
            egress: "eth1".into(),
            nat: false,
            ipv6: false,
        }
        .apply_to(&mut t2, &links3)
        .unwrap_err();
        assert!(e.to_string().contains("NAT is per egress port"), "{e}");
        let dis = Change::ForwardDisable {
            ingress: "eth0".into(),
            egress: "eth1".into(),
        };
        dis.apply_to(&mut t, &links).unwrap();
        let fw = t.forwarding.unwrap();
        assert!(fw.forwards.is_empty());
        assert_eq!(
            fw.sysctls,
            Sysctls {
                ipv4: false,
                ipv6: false
            }
        );
        assert_eq!(fw.saved, None);
    }

    #[test]
    fn warns_before_cutting_the_browser_off() {
        let (links, live) = board();
        let mgmt: IpAddr = "192.0.2.1".parse().unwrap();
        let mut t = live.clone();
        Change::DelAddress {
            port: "eth0".into(),
            address: "192.0.2.1/24".into(),
        }
        .apply_to(&mut t, &links)
        .unwrap();
        let w = management_warning(&links, &live, &t, mgmt).unwrap();
        assert!(w.contains("removes 192.0.2.1 from eth0"), "{w}");
        let mut t = live.clone();
        Change::Link {
            port: "eth0".into(),
            up: Some(false),
            mtu: None,
        }
        .apply_to(&mut t, &links)
        .unwrap();
        assert!(management_warning(&links, &live, &t, mgmt)
            .unwrap()
            .contains("brings eth0 down"));
        let mut t = live.clone();
        Change::Link {
            port: "eth1".into(),
            up: Some(false),
            mtu: None,
        }
        .apply_to(&mut t, &links)
        .unwrap();
        assert_eq!(management_warning(&links, &live, &t, mgmt), None);
        // A DHCP address is not netperfd's to remove, but taking its port down still warns.
        let mut dhcp = links.clone();
        dhcp[0].addresses[0].permanent = false;
        let mut live2 = live.clone();
        live2.ports.insert("eth0".into(), port_state(&dhcp[0]));
        let mut t = live2.clone();
        Change::Link {
            port: "eth0".into(),
            up: Some(false),
            mtu: None,
        }
        .apply_to(&mut t, &dhcp)
        .unwrap();
        assert!(management_warning(&dhcp, &live2, &t, mgmt)
            .unwrap()
            .contains("brings eth0 down"));
    }

    #[test]
    fn a_gateway_the_board_already_has_does_not_block_other_changes() {
        let (links, mut live) = board();
        // An on-link route to an address outside every subnet, set up by someone else.
        live.ipv4_default_route = Some(DefaultRoute {
            gateway: Some(Gateway {
                via: "203.0.113.1".parse().unwrap(),
                port: Some("eth0".into()),
            }),
        });
        let mut t = live.clone();
        add("eth1", "198.51.100.2/24")
            .apply_to(&mut t, &links)
            .unwrap();
        assert_eq!(validate(&t, &live, &links), Ok(()));
    }

    #[test]
    fn scopes_restrict_and_overlay() {
        let (_, live) = board();
        let s = Scope {
            ports: vec!["eth1".into()],
            forwarding: true,
            ..Scope::default()
        };
        let r = live.restrict(&s);
        assert_eq!(r.ports.keys().collect::<Vec<_>>(), vec!["eth1"]);
        assert!(r.forwarding.is_some() && r.ipv4_default_route.is_none());
        let mut base = NetState::default();
        base.overlay(&r);
        assert_eq!(base, r);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<NetState>(&json).unwrap(), r);
        let c: Change = serde_json::from_str(r#"{"op":"link","port":"eth0","mtu":1400}"#).unwrap();
        assert_eq!(
            c,
            Change::Link {
                port: "eth0".into(),
                up: None,
                mtu: Some("1400".into())
            }
        );
        assert!(serde_json::from_str::<Change>(r#"{"op":"reboot"}"#).is_err());
    }

    #[test]
    fn a_port_by_dhcp_and_back_to_static() {
        let m = |method: &str, address: Option<&str>, gateway: Option<&str>| Change::Addressing {
            port: "eth1".into(),
            method: method.into(),
            address: address.map(String::from),
            gateway: gateway.map(String::from),
        };
        assert_eq!(
            m("dhcp", None, None).scope(),
            Scope {
                ports: vec!["eth1".into()],
                gw4: true,
                ..Scope::default()
            }
        );
        let t = try_changes(&[m("dhcp", None, None)]).unwrap();
        assert!(t.ports["eth1"].dhcp);
        assert!(
            t.ports["eth1"].addresses.is_empty(),
            "the static address goes"
        );
        assert_eq!(t.ipv4_default_route, Some(DefaultRoute { gateway: None }));
        // Back to static with two addresses and a gateway through the port.
        let t = try_changes(&[
            m("dhcp", None, None),
            m(
                "static",
                Some("198.51.100.1/24, 198.51.100.7/24"),
                Some("198.51.100.254"),
            ),
        ])
        .unwrap();
        assert!(!t.ports["eth1"].dhcp);
        assert_eq!(
            t.ports["eth1"].addresses,
            vec![
                IfAddr::parse("198.51.100.1/24").unwrap(),
                IfAddr::parse("198.51.100.7/24").unwrap()
            ]
        );
        assert_eq!(
            t.ipv4_default_route.unwrap().gateway.unwrap().to_string(),
            "via 198.51.100.254 dev eth1"
        );
        for (changes, want) in [
            (
                vec![m("bootp", None, None)],
                "method must be dhcp or static, got 'bootp'",
            ),
            (
                vec![m("dhcp", Some("10.0.0.2/24"), None)],
                "takes its address and gateway from the lease",
            ),
            (
                vec![m("static", Some("10.0.0.2/24"), None)],
                "eth1 is already static",
            ),
            (
                vec![m("dhcp", None, None), m("dhcp", None, None)],
                "eth1 is already by DHCP",
            ),
            (
                vec![m("dhcp", None, None), m("static", Some("10.0.0.2"), None)],
                "10.0.0.2",
            ),
            (
                vec![
                    m("dhcp", None, None),
                    m("static", None, Some("2001:db8::1")),
                ],
                "gateway '2001:db8::1' is not an IPv4 address",
            ),
        ] {
            let e = try_changes(&changes).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        let lo = Change::Addressing {
            port: "lo".into(),
            method: "dhcp".into(),
            address: None,
            gateway: None,
        };
        assert!(try_changes(&[lo]).unwrap_err().contains("loopback"));
        // The confirmed configuration of a static port reads as before (no `dhcp` key).
        let (_, live) = board();
        let j = serde_json::to_string(&live.ports["eth1"]).unwrap();
        assert!(!j.contains("dhcp"), "{j}");
    }

    #[test]
    fn dhcp_on_one_port_keeps_another_ports_default_route() {
        let (links, mut live) = board();
        let via = |gw: &str, port: &str| {
            Some(DefaultRoute {
                gateway: Some(Gateway {
                    via: gw.parse().unwrap(),
                    port: Some(port.into()),
                }),
            })
        };
        let m = |method: &str, gateway: Option<&str>| Change::Addressing {
            port: "eth1".into(),
            method: method.into(),
            address: None,
            gateway: gateway.map(String::from),
        };
        // The default route leaves through eth0: eth1 to DHCP and back leaves it there.
        live.ipv4_default_route = via("192.0.2.254", "eth0");
        let mut t = live.clone();
        m("dhcp", None).apply_to(&mut t, &links).unwrap();
        assert_eq!(t.ipv4_default_route, via("192.0.2.254", "eth0"));
        m("static", None).apply_to(&mut t, &links).unwrap();
        assert_eq!(t.ipv4_default_route, via("192.0.2.254", "eth0"));
        // A gateway given with static replaces it (the user asked for it).
        m("dhcp", None).apply_to(&mut t, &links).unwrap();
        m("static", Some("198.51.100.254"))
            .apply_to(&mut t, &links)
            .unwrap();
        assert_eq!(t.ipv4_default_route, via("198.51.100.254", "eth1"));
        // A default route through eth1 itself goes when eth1 goes to DHCP (the client sets
        // its own), and when it goes static without a gateway.
        live.ipv4_default_route = via("198.51.100.254", "eth1");
        let mut t = live.clone();
        m("dhcp", None).apply_to(&mut t, &links).unwrap();
        assert_eq!(t.ipv4_default_route, Some(DefaultRoute { gateway: None }));
        let mut t = live.clone();
        t.ports.get_mut("eth1").unwrap().dhcp = true;
        m("static", None).apply_to(&mut t, &links).unwrap();
        assert_eq!(t.ipv4_default_route, Some(DefaultRoute { gateway: None }));
    }
}
