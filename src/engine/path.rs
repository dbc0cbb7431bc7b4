//! A tracepath-style path for the Diagnostics page: UDP probes to the target with rising TTL
//! (hop limit), DF set, as large as the path allows. Each hop's answer comes back through the
//! socket's error queue (IP_RECVERR / IPV6_RECVERR, read with recvmsg(MSG_ERRQUEUE) through
//! nix's safe wrappers): "time exceeded" names the hop, "fragmentation needed" / "packet too big"
//! (or the kernel's own EMSGSIZE) gives the smaller MTU and the probe is sent again smaller,
//! "port unreachable" from the target ends the path. One probe at a time, one thread,
//! blocking. Not for: resolving names or deciding limits (the caller does).
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

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, SockaddrStorage};
use serde::Serialize;
use std::io::IoSliceMut;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

/// First UDP port probed (traceroute's).
pub(crate) const BASE_PORT: u16 = 33434;
/// Most hops a path follows.
pub(crate) const MAX_HOPS: u8 = 30;

/// What to trace.
#[derive(Debug, Clone)]
pub(crate) struct PathSpec {
    /// The target (its port is ignored: probes go to [`BASE_PORT`]).
    pub target: SocketAddr,
    /// Most hops, 1..=[`MAX_HOPS`].
    pub max_hops: u8,
    /// Board port to send from (SO_BINDTODEVICE).
    pub bind_dev: Option<String>,
    /// A probe without an answer after this long is tried once more, then the hop is silent.
    pub timeout: Duration,
}

/// One hop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Hop {
    /// TTL (hop limit) of the probe, from 1.
    pub ttl: u8,
    /// Who answered; `None` = no answer.
    pub address: Option<IpAddr>,
    /// Round-trip time of the answer, ms.
    pub rtt_ms: Option<f64>,
    /// The path MTU learned at this hop (bytes), when it shrank here.
    pub mtu: Option<u32>,
    /// "reached", "no reply", "host unreachable", …
    pub note: Option<String>,
}

/// What a path trace found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PathResult {
    pub target: String,
    pub hops: Vec<Hop>,
    /// Whether the target answered.
    pub reached: bool,
    /// The path MTU at the end, bytes (IP packet).
    pub path_mtu: u32,
    /// "2 hops, reached, path MTU 1400".
    pub summary: String,
}

enum Answer {
    Hop(IpAddr),
    Reached(IpAddr),
    Unreachable(IpAddr, String),
    Mtu(u32, Option<IpAddr>),
}

fn answer(v6: bool, e: &libc::sock_extended_err, from: Option<IpAddr>) -> Option<Answer> {
    const LOCAL: u8 = 1; // SO_EE_ORIGIN_LOCAL
    if e.ee_origin == LOCAL && e.ee_errno == libc::EMSGSIZE as u32 {
        return Some(Answer::Mtu(e.ee_info, None));
    }
    let from = from?;
    let (time_exceeded, unreachable, too_big) = if v6 { (3, 1, 2) } else { (11, 3, 255) };
    if e.ee_type == time_exceeded {
        return Some(Answer::Hop(from));
    }
    if e.ee_type == too_big || (!v6 && e.ee_type == 3 && e.ee_code == 4) {
        return Some(Answer::Mtu(e.ee_info, Some(from)));
    }
    if e.ee_type == unreachable {
        let port_unreachable = if v6 { 4 } else { 3 };
        if e.ee_code == port_unreachable {
            return Some(Answer::Reached(from));
        }
        let what = match (v6, e.ee_code) {
            (false, 0) | (true, 0) => "network unreachable",
            (false, 1) | (true, 3) => "host unreachable",
            (false, 13) | (true, 1) => "administratively prohibited",
            _ => "unreachable",
        };
        return Some(Answer::Unreachable(from, what.to_string()));
    }
    None
}

/// Wait up to `limit` for one entry of the error queue we understand.
fn next_error(fd: BorrowedFd<'_>, limit: Duration) -> Option<Answer> {
    let end = Instant::now()
        .checked_add(limit)
        .unwrap_or_else(Instant::now);
    let mut data = [0u8; 2048];
    let mut cmsg = nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in6);
    loop {
        let mut iov = [IoSliceMut::new(&mut data)];
        match recvmsg::<SockaddrStorage>(
            fd.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(m) => {
                let mut found = None;
                if let Ok(cm) = m.cmsgs() {
                    for c in cm {
                        found = match c {
                            ControlMessageOwned::Ipv4RecvErr(e, a) => answer(
                                false,
                                &e,
                                a.map(|s| {
                                    IpAddr::V4(std::net::Ipv4Addr::from(u32::from_be(
                                        s.sin_addr.s_addr,
                                    )))
                                }),
                            ),
                            ControlMessageOwned::Ipv6RecvErr(e, a) => answer(
                                true,
                                &e,
                                a.map(|s| {
                                    IpAddr::V6(std::net::Ipv6Addr::from(s.sin6_addr.s6_addr))
                                }),
                            ),
                            _ => None,
                        };
                        if found.is_some() {
                            break;
                        }
                    }
                }
                if let Some(a) = found {
                    return Some(a);
                }
            }
            Err(_) => {
                if Instant::now() >= end {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}

/// Trace the path to `spec.target`. Takes at most max_hops × 2 × timeout (plus resends for
/// a shrinking MTU). Errors: the socket cannot be opened, bound to the port, or set up.
pub(crate) fn trace(spec: &PathSpec) -> std::io::Result<PathResult> {
    let v6 = spec.target.is_ipv6();
    let s = probe_socket(spec)?;
    let hdr: u32 = if v6 { 48 } else { 28 };
    let mut mtu: u32 = 65535;
    let mut hops = Vec::new();
    let mut reached = false;
    let buf = vec![0u8; 65536];
    for ttl in 1..=spec.max_hops.clamp(1, MAX_HOPS) {
        if v6 {
            s.set_unicast_hops_v6(ttl as u32)?;
        } else {
            s.set_ttl(ttl as u32)?;
        }
        let (hop, end) = probe_hop(&s, spec, ttl, hdr, &mut mtu, &buf);
        hops.push(hop);
        match end {
            HopEnd::Next => {}
            HopEnd::Reached => {
                reached = true;
                break;
            }
            HopEnd::Stop => break,
        }
    }
    let n = hops.len();
    let summary = format!(
        "{n} hop{}, {}, path MTU {mtu}",
        if n == 1 { "" } else { "s" },
        if reached { "reached" } else { "not reached" }
    );
    Ok(PathResult {
        target: crate::engine::ping::target_text(&spec.target),
        hops,
        reached,
        path_mtu: mtu,
        summary,
    })
}

/// The UDP socket the probes go out on: bound to `spec.bind_dev` if set, ICMP errors queued
/// (RECVERR), the DF bit set without the kernel's path MTU applied (PMTUDISC_PROBE),
/// connected to the target's [`BASE_PORT`].
fn probe_socket(spec: &PathSpec) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let v6 = spec.target.is_ipv6();
    let s = Socket::new(
        if v6 { Domain::IPV6 } else { Domain::IPV4 },
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if let Some(d) = &spec.bind_dev {
        s.bind_device(Some(d.as_bytes()))?;
    }
    let fd = s.as_fd();
    let (lvl, recverr, mtu_disc, probe) = if v6 {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_RECVERR,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        )
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_RECVERR,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    };
    crate::engine::sys::setsockopt_int(fd, lvl, recverr, 1)?;
    crate::engine::sys::setsockopt_int(fd, lvl, mtu_disc, probe)?;
    let mut dest = spec.target;
    dest.set_port(BASE_PORT);
    s.connect(&dest.into())?;
    Ok(s)
}

/// How probing a hop ended: go on to the next TTL, the target answered, or stop (the target
/// unreachable, or a probe could not be sent).
enum HopEnd {
    Next,
    Reached,
    Stop,
}

/// Probe the hop at `ttl` (already set on `s`): probes of the path MTU `mtu` less the
/// headers `hdr` (bytes from `buf`), resent smaller when a smaller MTU comes back (`mtu`
/// lowered), twice without a reply.
fn probe_hop(
    s: &socket2::Socket,
    spec: &PathSpec,
    ttl: u8,
    hdr: u32,
    mtu: &mut u32,
    buf: &[u8],
) -> (Hop, HopEnd) {
    let fd = s.as_fd();
    let mut hop = Hop {
        ttl,
        address: None,
        rtt_ms: None,
        mtu: None,
        note: None,
    };
    let mut tries = 0u32;
    let mut resends = 0u32;
    loop {
        let len = mtu.saturating_sub(hdr).max(8) as usize;
        let t = Instant::now();
        let sent = s.send(buf.get(..len).unwrap_or(buf));
        if let Err(e) = &sent {
            if e.raw_os_error() != Some(libc::EMSGSIZE) {
                hop.note = Some(format!("cannot send: {e}"));
                return (hop, HopEnd::Stop);
            }
        }
        let wait = if sent.is_err() {
            Duration::from_millis(50)
        } else {
            spec.timeout
        };
        match next_error(fd, wait) {
            Some(Answer::Mtu(m, from)) if m >= 68 && m < *mtu && resends < 16 => {
                *mtu = m;
                hop.mtu = Some(m);
                if hop.address.is_none() {
                    hop.address = from;
                }
                resends = resends.saturating_add(1);
                continue;
            }
            Some(Answer::Hop(a)) => {
                hop.address = Some(a);
                hop.rtt_ms = Some(t.elapsed().as_secs_f64() * 1e3);
                return (hop, HopEnd::Next);
            }
            Some(Answer::Reached(a)) => {
                hop.address = Some(a);
                hop.rtt_ms = Some(t.elapsed().as_secs_f64() * 1e3);
                hop.note = Some("reached".into());
                return (hop, HopEnd::Reached);
            }
            Some(Answer::Unreachable(a, why)) => {
                hop.address = Some(a);
                hop.rtt_ms = Some(t.elapsed().as_secs_f64() * 1e3);
                hop.note = Some(why);
                return (hop, HopEnd::Stop);
            }
            Some(Answer::Mtu(..)) | None => {
                if sent.is_err() {
                    // EMSGSIZE without a queued MTU: step down as tracepath does.
                    *mtu = match *mtu {
                        m if m > 1500 => 1500,
                        m if m > 1280 => 1280,
                        _ => 576,
                    };
                    resends = resends.saturating_add(1);
                    if resends < 16 {
                        continue;
                    }
                }
                tries = tries.saturating_add(1);
                if tries < 2 {
                    continue;
                }
                hop.note = Some("no reply".into());
                return (hop, HopEnd::Next);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37 item 18: a path answer keeps the IPv6 `%scope` it was asked with (here lo,
    /// index 1, on ::1: the kernel ignores a loopback address's scope, the answer keeps it).
    #[test]
    fn the_target_keeps_its_ipv6_scope() {
        let lo = nix::net::if_::if_nametoindex("lo").unwrap();
        let a = SocketAddr::V6(std::net::SocketAddrV6::new(
            std::net::Ipv6Addr::LOCALHOST,
            0,
            0,
            lo,
        ));
        assert_eq!(crate::engine::ping::target_text(&a), "::1%lo");
        let ll: SocketAddr = "[fe80::1%999999]:0".parse().unwrap();
        assert_eq!(crate::engine::ping::target_text(&ll), "fe80::1%999999");
        let plain: SocketAddr = "[2001:db8::1]:0".parse().unwrap();
        assert_eq!(crate::engine::ping::target_text(&plain), "2001:db8::1");
        if let Ok(r) = trace(&PathSpec {
            target: a,
            max_hops: 2,
            bind_dev: None,
            timeout: Duration::from_millis(500),
        }) {
            assert_eq!(r.target, "::1%lo", "{r:?}");
        }
    }

    #[test]
    fn loopback_is_reached_in_one_hop() {
        let r = trace(&PathSpec {
            target: "127.0.0.1:0".parse().unwrap(),
            max_hops: 5,
            bind_dev: None,
            timeout: Duration::from_millis(500),
        })
        .unwrap();
        assert!(r.reached, "{r:?}");
        assert_eq!(r.hops.len(), 1, "{r:?}");
        assert_eq!(r.hops[0].address, Some("127.0.0.1".parse().unwrap()));
        // Loopback's MTU is 65536: the first probe (65535 bytes) fits.
        assert_eq!(r.path_mtu, 65535, "{r:?}");
    }
}
