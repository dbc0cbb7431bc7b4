//! Changing ports through rtnetlink: add and remove addresses, bring a port up or down, set
//! its MTU, and read or set the default gateway (main routing table). Each function does one
//! kernel operation in the calling process's network namespace and reports a user-facing
//! error. Not for: deciding what to change or undoing it (see `apply`), or validation beyond
//! what the kernel needs (see `netconfig`).

use super::error::BoardError;
use super::links::{nl_error, IfAddr};
use futures_util::TryStreamExt;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteType, RouteVia,
};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::{LinkUnspec, RouteMessageBuilder};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Add `a` to the port with kernel index `index` (a no-op when it is already there).
pub(crate) async fn add_address(
    h: &rtnetlink::Handle,
    index: u32,
    port: &str,
    a: IfAddr,
) -> Result<(), BoardError> {
    if has_address(h, index, a).await? {
        return Ok(());
    }
    h.address()
        .add(index, a.addr, a.prefix)
        .execute()
        .await
        .map_err(|e| nl_error(&format!("adding {a} to {port}"), e))
}

async fn has_address(h: &rtnetlink::Handle, index: u32, a: IfAddr) -> Result<bool, BoardError> {
    Ok(find_address(h, index, a).await?.is_some())
}

async fn find_address(
    h: &rtnetlink::Handle,
    index: u32,
    a: IfAddr,
) -> Result<Option<rtnetlink::packet_route::address::AddressMessage>, BoardError> {
    use rtnetlink::packet_route::address::AddressAttribute;
    let msgs: Vec<_> = h
        .address()
        .get()
        .set_link_index_filter(index)
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl_error("reading the addresses", e))?;
    Ok(msgs.into_iter().find(|m| {
        m.header.index == index
            && m.header.prefix_len == a.prefix
            && (m
                .attributes
                .iter()
                .any(|x| matches!(x, AddressAttribute::Local(ip) if *ip == a.addr))
                || (!m
                    .attributes
                    .iter()
                    .any(|x| matches!(x, AddressAttribute::Local(_)))
                    && m.attributes
                        .iter()
                        .any(|x| matches!(x, AddressAttribute::Address(ip) if *ip == a.addr))))
    }))
}

/// Remove `a` from the port with kernel index `index` (a no-op when it is not there).
pub(crate) async fn del_address(
    h: &rtnetlink::Handle,
    index: u32,
    port: &str,
    a: IfAddr,
) -> Result<(), BoardError> {
    let Some(m) = find_address(h, index, a).await? else {
        return Ok(());
    };
    h.address()
        .del(m)
        .execute()
        .await
        .map_err(|e| nl_error(&format!("removing {a} from {port}"), e))
}

/// Bring a port up or down.
pub(crate) async fn set_up(
    h: &rtnetlink::Handle,
    index: u32,
    port: &str,
    up: bool,
) -> Result<(), BoardError> {
    let b = LinkUnspec::new_with_index(index);
    let msg = if up { b.up() } else { b.down() }.build();
    h.link().set(msg).execute().await.map_err(|e| {
        nl_error(
            &format!("bringing {port} {}", if up { "up" } else { "down" }),
            e,
        )
    })
}

/// Set a port's MTU, in bytes.
pub(crate) async fn set_mtu(
    h: &rtnetlink::Handle,
    index: u32,
    port: &str,
    mtu: u32,
) -> Result<(), BoardError> {
    let msg = LinkUnspec::new_with_index(index).mtu(mtu).build();
    h.link()
        .set(msg)
        .execute()
        .await
        .map_err(|e| nl_error(&format!("setting the MTU of {port} to {mtu}"), e))
}

/// A default route: the next hop and, when given or learnt, the port it leaves through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    /// Next-hop address (IPv4 for the IPv4 default route, IPv6 for the IPv6 one).
    pub via: IpAddr,
    /// Outgoing port; None lets the kernel pick the port whose subnet holds `via`.
    #[serde(default)]
    pub port: Option<String>,
}

impl std::fmt::Display for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.port {
            Some(p) => write!(f, "via {} dev {p}", self.via),
            None => write!(f, "via {}", self.via),
        }
    }
}

fn is_main_default(m: &RouteMessage) -> bool {
    let table = m
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(m.header.table));
    m.header.destination_prefix_length == 0
        && table == u32::from(RouteHeader::RT_TABLE_MAIN)
        && m.header.kind == RouteType::Unicast
}

fn gateway_of(m: &RouteMessage) -> Option<IpAddr> {
    m.attributes.iter().find_map(|a| match a {
        RouteAttribute::Gateway(RouteAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        RouteAttribute::Gateway(RouteAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        RouteAttribute::Via(RouteVia::Inet(v4)) => Some(IpAddr::V4(*v4)),
        RouteAttribute::Via(RouteVia::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    })
}

fn oif_of(m: &RouteMessage) -> Option<u32> {
    m.attributes.iter().find_map(|a| match a {
        RouteAttribute::Oif(i) => Some(*i),
        _ => None,
    })
}

async fn default_route_messages(
    h: &rtnetlink::Handle,
    v6: bool,
) -> Result<Vec<RouteMessage>, BoardError> {
    let q = if v6 {
        RouteMessageBuilder::<Ipv6Addr>::new().build()
    } else {
        RouteMessageBuilder::<Ipv4Addr>::new().build()
    };
    let family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let all: Vec<RouteMessage> = h
        .route()
        .get(q)
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl_error("reading the routes", e))?;
    Ok(all
        .into_iter()
        .filter(|m| m.header.address_family == family && is_main_default(m))
        .collect())
}

/// The default route of the main table for IPv4 (`v6 = false`) or IPv6, as (next hop, port
/// index); None when there is none (or it has no next hop).
pub(crate) async fn default_route(
    h: &rtnetlink::Handle,
    v6: bool,
) -> Result<Option<(IpAddr, Option<u32>)>, BoardError> {
    Ok(default_route_messages(h, v6)
        .await?
        .iter()
        .find_map(|m| gateway_of(m).map(|g| (g, oif_of(m)))))
}

/// Every default route of the main table for IPv4 (`v6 = false`) or IPv6 with a next hop, as
/// (next hop, port index).
pub(crate) async fn default_routes(
    h: &rtnetlink::Handle,
    v6: bool,
) -> Result<Vec<(IpAddr, Option<u32>)>, BoardError> {
    Ok(default_route_messages(h, v6)
        .await?
        .iter()
        .filter_map(|m| gateway_of(m).map(|g| (g, oif_of(m))))
        .collect())
}

/// Remove the default routes of the family `v6` picks that leave through port `index`.
pub(crate) async fn del_default_routes_via(
    h: &rtnetlink::Handle,
    v6: bool,
    index: u32,
) -> Result<(), BoardError> {
    let mine = default_route_messages(h, v6)
        .await?
        .into_iter()
        .filter(|m| oif_of(m) == Some(index));
    del_routes(h, mine, "removing the old default route")
        .await
        .map(|_| ())
}

/// Delete each route of `routes`; `what` names the step in the error. Returns how many went.
async fn del_routes(
    h: &rtnetlink::Handle,
    routes: impl IntoIterator<Item = RouteMessage>,
    what: &str,
) -> Result<usize, BoardError> {
    let mut n = 0;
    for m in routes {
        h.route()
            .del(m)
            .execute()
            .await
            .map_err(|e| nl_error(what, e))?;
        n += 1;
    }
    Ok(n)
}

/// Make `via` (leaving through port `index` when given) the only default route of its
/// family in the main table; `None` removes every default route of the family `v6` picks.
pub(crate) async fn set_default_route(
    h: &rtnetlink::Handle,
    v6: bool,
    target: Option<(IpAddr, Option<u32>)>,
) -> Result<(), BoardError> {
    let existing = default_route_messages(h, v6).await?;
    if let Some((via, oif)) = target {
        // A route a DHCP client installed (proto dhcp) is the client's: a configured gateway
        // replaces it with a static one even when the next hop is the same, so that the
        // client's deconfig (which takes only proto dhcp routes) leaves the static one alone
        // and a roll-back can tell them apart.
        if existing.iter().any(|m| {
            gateway_of(m) == Some(via)
                && (oif.is_none() || oif_of(m) == oif)
                && m.header.protocol != RouteProtocol::Dhcp
        }) && existing.len() == 1
        {
            return Ok(());
        }
        del_routes(h, existing, "removing the old default route").await?;
        let msg = match via {
            IpAddr::V4(v4) => {
                let mut b = RouteMessageBuilder::<Ipv4Addr>::new().gateway(v4);
                if let Some(i) = oif {
                    b = b.output_interface(i);
                }
                b.build()
            }
            IpAddr::V6(v6a) => {
                let mut b = RouteMessageBuilder::<Ipv6Addr>::new().gateway(v6a);
                if let Some(i) = oif {
                    b = b.output_interface(i);
                }
                b.build()
            }
        };
        h.route()
            .add(msg)
            .replace()
            .execute()
            .await
            .map_err(|e| nl_error(&format!("setting the default route via {via}"), e))
    } else {
        del_routes(h, existing, "removing the default route")
            .await
            .map(|_| ())
    }
}

/// Make `via` through port `index` the IPv4 default route a DHCP lease gives: marked `proto
/// dhcp` (RTPROT_DHCP, 16), so that [`del_dhcp_default_routes`] later takes exactly it. Every
/// other IPv4 default route through `index` goes first (the caller checked that no other
/// port holds the default route; routes through other ports are not touched).
pub(crate) async fn set_dhcp_default_route(
    h: &rtnetlink::Handle,
    via: Ipv4Addr,
    index: u32,
) -> Result<(), BoardError> {
    let existing = default_route_messages(h, false).await?;
    if existing.iter().any(|m| {
        gateway_of(m) == Some(IpAddr::V4(via))
            && oif_of(m) == Some(index)
            && m.header.protocol == RouteProtocol::Dhcp
    }) && existing.iter().all(|m| {
        oif_of(m) != Some(index)
            || gateway_of(m) == Some(IpAddr::V4(via)) && m.header.protocol == RouteProtocol::Dhcp
    }) {
        return Ok(());
    }
    let mine = existing.into_iter().filter(|m| oif_of(m) == Some(index));
    del_routes(h, mine, "removing the old default route").await?;
    let msg = RouteMessageBuilder::<Ipv4Addr>::new()
        .gateway(via)
        .output_interface(index)
        .protocol(RouteProtocol::Dhcp)
        .build();
    h.route()
        .add(msg)
        .replace()
        .execute()
        .await
        .map_err(|e| nl_error(&format!("setting the default route via {via}"), e))
}

/// Remove the IPv4 default routes of the main table that a DHCP lease on port `index` put
/// there: through `index` and marked `proto dhcp`. Another port's default route, and a static
/// one through this port, stay. Returns how many went.
pub(crate) async fn del_dhcp_default_routes(
    h: &rtnetlink::Handle,
    index: u32,
) -> Result<usize, BoardError> {
    let leased = default_route_messages(h, false)
        .await?
        .into_iter()
        .filter(|m| oif_of(m) == Some(index) && m.header.protocol == RouteProtocol::Dhcp);
    del_routes(h, leased, "removing the lease's default route").await
}
