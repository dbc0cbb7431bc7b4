//! Netlink reads of this network namespace, over rtnetlink's message types (no parsing of our
//! own): the qdisc and class dumps the board's counters and shaper reader use, the port a
//! packet to an address leaves by (`ip route get`), and whether that port's root qdisc is fq,
//! so a paced UDP sender can hand its pacing to the kernel (see [`crate::engine::pacer`]).
//! Not for: changing routes or qdiscs (that is `crate::board`'s).

use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use rtnetlink::packet_route::tc::{TcAttribute, TcHeader, TcMessage};
use rtnetlink::packet_route::RouteNetlinkMessage as M;
use std::net::IpAddr;

/// `major:minor` in hex as tc writes it (`8001:` when the minor is 0).
pub(crate) fn tc_handle(major: u16, minor: u16) -> String {
    if minor == 0 {
        format!("{major:x}:")
    } else {
        format!("{major:x}:{minor:x}")
    }
}

/// `tc`'s name of a qdisc's or class's parent: `root`, `ingress`, or its `major:minor`.
pub(crate) fn tc_parent(h: &TcHeader) -> String {
    if h.parent.major == 0xffff && h.parent.minor == 0xffff {
        "root".to_string()
    } else if h.parent.major == 0xffff && h.parent.minor == 0xfff1 {
        "ingress".to_string()
    } else {
        tc_handle(h.parent.major, h.parent.minor)
    }
}

/// Send one rtnetlink request and hand every answer to `each`: all messages of a dump
/// (`dump`), or the one answer of a plain request. `None` when netlink cannot be read or
/// answers an error. The read is bounded (10,000 datagrams) so a confused socket cannot loop
/// for ever; lengths are checked before any slice.
fn request(req: M, dump: bool, mut each: impl FnMut(M)) -> Option<()> {
    use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
    let mut s = Socket::new(NETLINK_ROUTE).ok()?;
    s.bind_auto().ok()?;
    s.connect(&SocketAddr::new(0, 0)).ok()?;
    let mut req = NetlinkMessage::from(req);
    req.header.flags = if dump {
        NLM_F_REQUEST | NLM_F_DUMP
    } else {
        NLM_F_REQUEST
    };
    req.header.sequence_number = 1;
    req.finalize();
    let mut buf = vec![0u8; req.buffer_len()];
    req.serialize(&mut buf);
    s.send(&buf, 0).ok()?;
    for _ in 0..10_000 {
        let (data, _) = s.recv_from_full().ok()?;
        if data.is_empty() {
            return Some(());
        }
        let mut off = 0usize;
        while let Some(rest) = data.get(off..).filter(|r| !r.is_empty()) {
            let msg = NetlinkMessage::<M>::deserialize(rest).ok()?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Some(()),
                NetlinkPayload::Error(_) => return None,
                NetlinkPayload::InnerMessage(m) => {
                    each(m);
                    if !dump {
                        return Some(());
                    }
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            off = off.saturating_add(len);
        }
    }
    Some(())
}

/// One netlink dump of the qdiscs (`class` false; every port with `index` 0) or of port
/// `index`'s classes (`class` true), each message handed to `each`. `None` when netlink
/// cannot be read or answers an error.
pub(crate) fn tc_dump(class: bool, index: i32, mut each: impl FnMut(&TcMessage)) -> Option<()> {
    let mut msg = TcMessage::default();
    msg.header.index = index;
    let req = if class {
        M::GetTrafficClass(msg)
    } else {
        M::GetQueueDiscipline(msg)
    };
    request(req, true, |m| {
        if let M::NewQueueDiscipline(m) | M::NewTrafficClass(m) = m {
            each(&m)
        }
    })
}

/// The interface index a packet to `dst` leaves by (from `src` when given; `ip route get`),
/// `None` when there is no route or netlink cannot be read. An IPv4-mapped IPv6 address is
/// looked up as IPv4 (a dual-stack socket sends such packets as IPv4).
pub(crate) fn route_oif(dst: IpAddr, src: Option<IpAddr>) -> Option<u32> {
    use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
    use rtnetlink::packet_route::AddressFamily;
    let plain = |a: IpAddr| match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    };
    let addr = |a: IpAddr| match a {
        IpAddr::V4(v4) => RouteAddress::Inet(v4),
        IpAddr::V6(v6) => RouteAddress::Inet6(v6),
    };
    let dst = plain(dst);
    let mut msg = RouteMessage::default();
    let (family, bits) = match dst {
        IpAddr::V4(_) => (AddressFamily::Inet, 32),
        IpAddr::V6(_) => (AddressFamily::Inet6, 128),
    };
    msg.header.address_family = family;
    msg.header.destination_prefix_length = bits;
    msg.attributes.push(RouteAttribute::Destination(addr(dst)));
    if let Some(src) = src.map(plain).filter(|s| s.is_ipv4() == dst.is_ipv4()) {
        if !src.is_unspecified() {
            msg.header.source_prefix_length = bits;
            msg.attributes.push(RouteAttribute::Source(addr(src)));
        }
    }
    let mut oif = None;
    request(M::GetRoute(msg), false, |m| {
        if let M::NewRoute(r) = m {
            oif = r.attributes.iter().find_map(|a| match a {
                RouteAttribute::Oif(i) => Some(*i),
                _ => None,
            });
        }
    })?;
    oif.filter(|&i| i > 0)
}

/// One qdisc of a port as the pacing decision needs it: its kind (`fq`, `mq`, …), handle and
/// parent in tc's words (see [`tc_handle`], [`tc_parent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QdiscKind {
    pub kind: String,
    pub handle: String,
    pub parent: String,
}

/// The qdiscs of port `index` (an empty list when netlink cannot be read).
pub(crate) fn port_qdiscs(index: i32) -> Vec<QdiscKind> {
    let mut out = Vec::new();
    let _ = tc_dump(false, 0, |m| {
        if m.header.index != index {
            return;
        }
        let kind = m.attributes.iter().find_map(|a| match a {
            TcAttribute::Kind(k) => Some(k.clone()),
            _ => None,
        });
        out.push(QdiscKind {
            kind: kind.unwrap_or_default(),
            handle: tc_handle(m.header.handle.major, m.header.handle.minor),
            parent: tc_parent(&m.header),
        });
    });
    out
}

/// Whether every packet a port sends passes an fq qdisc, which paces each socket at its
/// SO_MAX_PACING_RATE: the root qdisc is `fq`, or it is `mq` (one queue per hardware TX
/// queue, what `net.core.default_qdisc=fq` gives a multi-queue NIC) and each of its children
/// is `fq`. Anything else (pfifo_fast, fq_codel, noqueue, a shaper with fq below it: its own
/// rate decides, not the socket's) does not count. Pure.
pub(crate) fn fq_paces(qdiscs: &[QdiscKind]) -> bool {
    let Some(root) = qdiscs.iter().find(|q| q.parent == "root") else {
        return false;
    };
    match root.kind.as_str() {
        "fq" => true,
        "mq" => {
            let mut children = qdiscs.iter().filter(|q| {
                q.parent.split(':').next() == root.handle.split(':').next() && q.parent != "root"
            });
            let mut any = false;
            let all = children.all(|q| {
                any = true;
                q.kind == "fq"
            });
            any && all
        }
        _ => false,
    }
}

/// The name of the port a connected socket's packets leave by, when every packet it sends
/// passes fq there (see [`fq_paces`]): the port the socket is bound to (SO_BINDTODEVICE),
/// else the route to its peer. `None`: no fq on that port, or it cannot be told (not
/// connected, netlink unreadable).
pub(crate) fn fq_egress(sock: &std::net::UdpSocket) -> Option<String> {
    use std::os::fd::AsFd;
    let peer = sock.peer_addr().ok()?;
    let bound =
        crate::engine::sys::getsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_BINDTOIFINDEX)
            .ok()
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i > 0);
    let local = sock.local_addr().ok().map(|a| a.ip());
    let index = match bound {
        Some(i) => i,
        None => route_oif(peer.ip(), local)?,
    };
    if !fq_paces(&port_qdiscs(i32::try_from(index).ok()?)) {
        return None;
    }
    nix::net::if_::if_indextoname(index)
        .ok()
        .and_then(|n| n.into_string().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(kind: &str, handle: &str, parent: &str) -> QdiscKind {
        QdiscKind {
            kind: kind.into(),
            handle: handle.into(),
            parent: parent.into(),
        }
    }

    #[test]
    fn fq_paces_only_where_every_packet_meets_fq() {
        // fq at the root.
        assert!(fq_paces(&[q("fq", "8001:", "root")]));
        // mq with fq on every TX queue (net.core.default_qdisc=fq on a multi-queue NIC).
        assert!(fq_paces(&[
            q("mq", "0:", "root"),
            q("fq", "0:", "0:1"),
            q("fq", "0:", "0:2"),
        ]));
        assert!(fq_paces(&[
            q("mq", "1:", "root"),
            q("fq", "8002:", "1:1"),
            q("fq", "8003:", "1:2"),
        ]));
        // mq with one queue under fq_codel: some packets are not paced.
        assert!(!fq_paces(&[
            q("mq", "1:", "root"),
            q("fq", "8002:", "1:1"),
            q("fq_codel", "8003:", "1:2"),
        ]));
        // mq with nothing below it (cannot tell): no.
        assert!(!fq_paces(&[q("mq", "1:", "root")]));
        // The lab's and most boards' defaults, and a shaper with fq below it.
        for root in ["pfifo_fast", "fq_codel", "noqueue", "tbf", "htb", "etf"] {
            assert!(
                !fq_paces(&[q(root, "1:", "root"), q("fq", "10:", "1:1")]),
                "{root}"
            );
        }
        // An ingress fq-like qdisc is no egress root; nothing at all: no.
        assert!(!fq_paces(&[q("fq", "ffff:", "ingress")]));
        assert!(!fq_paces(&[]));
    }

    #[test]
    fn loopback_has_no_fq_and_a_route() {
        // The lab kernel has no fq: loopback's root is noqueue (or nothing).
        let lo = nix::net::if_::if_nametoindex("lo").unwrap_or(1);
        assert_eq!(
            route_oif(IpAddr::from([127, 0, 0, 1]), None),
            Some(lo),
            "ip route get 127.0.0.1"
        );
        assert!(!fq_paces(&port_qdiscs(lo as i32)));
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        a.connect("127.0.0.1:9").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fq_egress(&a), None);
    }
}
