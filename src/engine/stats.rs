//! Low-level measurements the engine takes from the kernel: TCP_INFO (retransmits, cwnd, RTT),
//! process CPU time (getrusage), and the system identification string. Not for: deciding
//! anything about a test; the session code does that.

use std::os::fd::RawFd;
use std::time::Instant;

/// The leading part of Linux `struct tcp_info` (include/uapi/linux/tcp.h) up to
/// `tcpi_snd_wnd` (kernel 5.19+). Older kernels return fewer bytes; missing fields stay 0.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
}

/// What iperf3 reports from TCP_INFO for a sending stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TcpInfo {
    /// Retransmitted segments since the connection started (`tcpi_total_retrans`).
    pub total_retrans: u64,
    /// Congestion window in bytes (`tcpi_snd_cwnd × tcpi_snd_mss`), as iperf3 computes it.
    pub snd_cwnd: u64,
    /// Peer's advertised receive window in bytes (`tcpi_snd_wnd`, 0 before kernel 5.19).
    pub snd_wnd: u64,
    /// Smoothed RTT in µs.
    pub rtt: u32,
    /// RTT variance in µs.
    pub rttvar: u32,
    /// Path MTU in bytes.
    pub pmtu: u32,
    /// Sender MSS in bytes.
    pub snd_mss: u32,
}

/// Read TCP_INFO of a TCP socket. Errors when `fd` is not a TCP socket.
pub fn tcp_info(fd: RawFd) -> std::io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: raw is a plain repr(C) struct of integers, len is its size; the kernel writes
    // at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut raw as *mut RawTcpInfo as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(TcpInfo {
        total_retrans: raw.total_retrans as u64,
        snd_cwnd: raw.snd_cwnd as u64 * raw.snd_mss as u64,
        snd_wnd: raw.snd_wnd as u64,
        rtt: raw.rtt,
        rttvar: raw.rttvar,
        pmtu: raw.pmtu,
        snd_mss: raw.snd_mss,
    })
}

/// Name of the congestion control algorithm in use on a TCP socket.
pub fn tcp_congestion(fd: RawFd) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let end = buf[..len as usize]
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(len as usize);
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Set TCP_CONGESTION on a socket. Errors (ENOENT) when the algorithm is not available.
pub fn set_tcp_congestion(fd: RawFd, name: &str) -> std::io::Result<()> {
    // SAFETY: pointer and length describe name's bytes.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Process CPU utilisation over a wall-clock span, in % of one CPU (user + system; can exceed
/// 100 with threads), the way iperf3 reports `cpu_util_*` (getrusage RUSAGE_SELF).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CpuUtil {
    pub total: f64,
    pub user: f64,
    pub system: f64,
}

/// A CPU-time reading to compute [`CpuUtil`] from later.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    wall: Instant,
    user_us: i64,
    sys_us: i64,
}

fn rusage_us() -> (i64, i64) {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(r) => {
            let u = r.user_time();
            let s = r.system_time();
            (
                u.tv_sec() * 1_000_000 + u.tv_usec(),
                s.tv_sec() * 1_000_000 + s.tv_usec(),
            )
        }
        Err(_) => (0, 0),
    }
}

impl CpuMark {
    /// Take a reading now.
    pub fn now() -> CpuMark {
        let (user_us, sys_us) = rusage_us();
        CpuMark {
            wall: Instant::now(),
            user_us,
            sys_us,
        }
    }

    /// Utilisation since this reading, in percent. 0 for a zero-length span.
    pub fn util_since(&self) -> CpuUtil {
        let now = CpuMark::now();
        let wall_us = now.wall.duration_since(self.wall).as_micros() as f64;
        if wall_us <= 0.0 {
            return CpuUtil::default();
        }
        let user = (now.user_us - self.user_us).max(0) as f64 * 100.0 / wall_us;
        let system = (now.sys_us - self.sys_us).max(0) as f64 * 100.0 / wall_us;
        CpuUtil {
            total: user + system,
            user,
            system,
        }
    }
}

/// `uname -a`-like text for `system_info`, e.g. "Linux board 6.1.55 #1 SMP aarch64".
pub fn system_info() -> String {
    match nix::sys::utsname::uname() {
        Ok(u) => format!(
            "{} {} {} {} {}",
            u.sysname().to_string_lossy(),
            u.nodename().to_string_lossy(),
            u.release().to_string_lossy(),
            u.version().to_string_lossy(),
            u.machine().to_string_lossy()
        ),
        Err(_) => "Linux".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn tcp_info_on_a_connected_socket_has_mss_and_pmtu() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info(c.as_raw_fd()).unwrap();
        assert!(info.snd_mss > 0);
        assert!(info.pmtu >= 1280);
        assert!(info.snd_cwnd >= info.snd_mss as u64);
        // A UDP socket is not TCP: the call fails instead of returning zeros.
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(u.as_raw_fd()).is_err());
    }

    #[test]
    fn congestion_round_trip() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_tcp_congestion(c.as_raw_fd(), "reno").unwrap();
        assert_eq!(tcp_congestion(c.as_raw_fd()).as_deref(), Some("reno"));
        assert!(set_tcp_congestion(c.as_raw_fd(), "no-such-algo").is_err());
    }
}
