//! Low-level measurements the engine takes from the kernel: TCP_INFO (retransmits, cwnd, RTT),
//! process CPU time (getrusage), and the system identification string. Not for: deciding
//! anything about a test; the session code does that.

pub(crate) use super::sys::{set_tcp_congestion, tcp_congestion, tcp_info};
use std::time::Instant;

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
pub(crate) struct CpuMark {
    wall: Instant,
    user_us: i64,
    sys_us: i64,
}

/// A `timeval` as microseconds. `time_t` and `suseconds_t` are 32-bit on armv7 glibc (i.MX6Q,
/// Cyclone V) and 64-bit on aarch64/x86_64: callers widen both with `.into()` first, so the sum
/// is computed in `i64` on every target (saturating: rusage never comes near it).
fn timeval_us(sec: i64, usec: i64) -> i64 {
    sec.saturating_mul(1_000_000).saturating_add(usec)
}

// `.into()` widens on armv7 and is the identity on 64-bit targets (clippy sees only the host).
#[allow(clippy::useless_conversion)]
fn rusage_us() -> (i64, i64) {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(r) => {
            let u = r.user_time();
            let s = r.system_time();
            (
                timeval_us(u.tv_sec().into(), u.tv_usec().into()),
                timeval_us(s.tv_sec().into(), s.tv_usec().into()),
            )
        }
        Err(_) => (0, 0),
    }
}

impl CpuMark {
    /// Take a reading now.
    pub(crate) fn now() -> CpuMark {
        let (user_us, sys_us) = rusage_us();
        CpuMark {
            wall: Instant::now(),
            user_us,
            sys_us,
        }
    }

    /// Utilisation since this reading, in percent. 0 for a zero-length span.
    pub(crate) fn util_since(&self) -> CpuUtil {
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
pub(crate) fn system_info() -> String {
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
    use std::os::fd::AsFd;

    #[test]
    fn tcp_info_on_a_connected_socket_has_mss_and_pmtu() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info(c.as_fd()).unwrap();
        assert!(info.snd_mss > 0);
        assert!(info.pmtu >= 1280);
        assert!(info.snd_cwnd >= info.snd_mss as u64);
        // A UDP socket is not TCP: the call fails instead of returning zeros.
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(u.as_fd()).is_err());
    }

    #[test]
    fn congestion_round_trip() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_tcp_congestion(c.as_fd(), "reno").unwrap();
        assert_eq!(tcp_congestion(c.as_fd()).as_deref(), Some("reno"));
        assert!(set_tcp_congestion(c.as_fd(), "no-such-algo").is_err());
    }
}
