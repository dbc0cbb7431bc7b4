//! Socket construction for tests: resolve the peer, create TCP sockets with the test's options
//! (bind address, bind device, client port, window, MSS, TCP_NODELAY, TOS, congestion control)
//! and connect with a timeout. Blocking calls: run them in `spawn_blocking`.

use socket2::{Domain, Protocol as SockProto, SockAddr, Socket, Type};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::time::Duration;

/// IP version restriction (`-4` / `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

/// Options applied to every socket of a test.
#[derive(Debug, Clone, Default)]
pub struct SockOpts {
    /// Local address to bind (`-B`).
    pub bind: Option<IpAddr>,
    /// Device to bind (`--bind-dev`, SO_BINDTODEVICE).
    pub bind_dev: Option<String>,
    /// Local port to bind (`--cport`), 0 = ephemeral.
    pub cport: u16,
    /// SO_SNDBUF/SO_RCVBUF in bytes (`-w`).
    pub window: Option<u32>,
    /// TCP_MAXSEG (`-M`).
    pub mss: Option<u32>,
    /// TCP_NODELAY (`-N`).
    pub nodelay: bool,
    /// IP TOS (`-S`).
    pub tos: u32,
    /// TCP congestion control (`-C`).
    pub congestion: Option<String>,
    /// Socket pacing of each data stream (`--fq-rate`), bits/s; 0 = none.
    pub fq_rate: u64,
}

/// Pace a TCP data stream at `rate_bps` bits/s with SO_MAX_PACING_RATE (iperf3's `--fq-rate`;
/// 0 = leave it). A kernel that refuses is logged, not fatal (as stock iperf3 warns).
pub(crate) fn set_fq_rate(s: &impl AsFd, rate_bps: u64) {
    if rate_bps == 0 {
        return;
    }
    if let Err(e) = crate::engine::sys::set_max_pacing_rate(s.as_fd(), (rate_bps / 8).max(1)) {
        tracing::warn!("unable to set socket pacing (--fq-rate): {e}");
    }
}

/// Whether `ip` is an IPv6 link-local address (fe80::/10): it means something only together
/// with an interface (a scope id, `fe80::1%eth0`).
pub(crate) fn is_link_local_v6(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
}

/// Resolve `host:port`, honouring the family restriction; the first address wins.
/// `fe80::1%eth0` keeps its interface (as the scope id); a link-local address without one
/// is an error that says so.
pub(crate) fn resolve(host: &str, port: u16, family: Family) -> std::io::Result<SocketAddr> {
    let addrs = (host, port).to_socket_addrs()?;
    for a in addrs {
        if let SocketAddr::V6(v6) = a {
            if is_link_local_v6(a.ip()) && v6.scope_id() == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} is an IPv6 link-local address: give its interface as {}%INTERFACE (e.g. %eth0)",
                        v6.ip(),
                        v6.ip()
                    ),
                ));
            }
        }
        match (family, a) {
            (Family::Any, _)
            | (Family::V4, SocketAddr::V4(_))
            | (Family::V6, SocketAddr::V6(_)) => return Ok(a),
            _ => {}
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("no {family:?} address for {host}"),
    ))
}

/// Apply SO_BINDTODEVICE.
pub(crate) fn bind_device(sock: &Socket, dev: &str) -> std::io::Result<()> {
    sock.bind_device(Some(dev.as_bytes()))
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot bind to device '{dev}': {e}")))
}

/// A UDP socket bound to `local`, first bound to device `dev` when given (SO_BINDTODEVICE
/// before bind, so the kernel picks the port's route and source for every datagram).
pub(crate) fn udp_socket(
    local: SocketAddr,
    dev: Option<&str>,
) -> std::io::Result<std::net::UdpSocket> {
    let sock = Socket::new(
        Domain::for_address(local),
        Type::DGRAM,
        Some(SockProto::UDP),
    )?;
    if let Some(d) = dev {
        bind_device(&sock, d)?;
    }
    sock.bind(&local.into())?;
    Ok(sock.into())
}

/// Create a TCP socket for `peer`, apply `opts` (and `cport`), connect within `timeout`.
/// `data` applies the data-stream options (window, MSS, nodelay, TOS, congestion); the
/// control connection gets only binding and TCP_NODELAY.
pub(crate) fn connect_tcp(
    peer: SocketAddr,
    opts: &SockOpts,
    cport: u16,
    data: bool,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let domain = if peer.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM, Some(SockProto::TCP))?;
    if let Some(dev) = &opts.bind_dev {
        bind_device(&sock, dev)?;
    }
    if data {
        if let Some(w) = opts.window {
            sock.set_send_buffer_size(w as usize)?;
            sock.set_recv_buffer_size(w as usize)?;
        }
        if let Some(m) = opts.mss {
            sock.set_mss(m)?;
        }
        if opts.tos > 0 {
            if peer.is_ipv4() {
                sock.set_tos(opts.tos)?;
            } else {
                sock.set_tclass_v6(opts.tos)?;
            }
        }
    }
    if opts.bind.is_some() || cport != 0 {
        let ip = opts.bind.unwrap_or(if peer.is_ipv4() {
            IpAddr::from([0u8, 0, 0, 0])
        } else {
            IpAddr::from([0u16; 8])
        });
        if cport != 0 {
            sock.set_reuse_address(true)?;
        }
        sock.bind(&SockAddr::from(SocketAddr::new(ip, cport)))
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot bind to {ip} port {cport}: {e}"))
            })?;
    }
    sock.connect_timeout(&SockAddr::from(peer), timeout)?;
    if data || opts.nodelay {
        sock.set_nodelay(opts.nodelay || !data)?;
    } else {
        sock.set_nodelay(true)?;
    }
    if data {
        set_fq_rate(&sock, opts.fq_rate);
        if let Some(c) = &opts.congestion {
            crate::engine::stats::set_tcp_congestion(sock.as_fd(), c).map_err(|e| {
                std::io::Error::new(e.kind(), format!("unable to set TCP_CONGESTION '{c}': {e}"))
            })?;
        }
    }
    Ok(sock.into())
}

/// TCP_MAXSEG of a connected socket, bytes.
pub(crate) fn mss(s: &TcpStream) -> u32 {
    socket2::SockRef::from(s).mss().unwrap_or(0)
}

/// TCP_USER_TIMEOUT: unacknowledged data older than this aborts the connection.
pub(crate) fn user_timeout(s: &TcpStream, t: Duration) {
    let _ = socket2::SockRef::from(s).set_tcp_user_timeout(Some(t));
}

/// Text form of an IP for output: IPv4-mapped IPv6 shown as plain IPv4.
pub(crate) fn ip_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        IpAddr::V4(v4) => v4.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_needs_an_interface() {
        let e = resolve("fe80::1", 5201, Family::Any)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("link-local") && e.contains("fe80::1%INTERFACE"),
            "{e}"
        );
        match resolve("fe80::1%lo", 5201, Family::Any).unwrap() {
            SocketAddr::V6(v6) => assert_eq!(v6.scope_id(), 1),
            a => panic!("not IPv6: {a}"),
        }
        assert!(is_link_local_v6("fe80::1".parse().unwrap()));
        assert!(!is_link_local_v6("fd00::1".parse().unwrap()));
    }
}
