//! The engine's system calls: the only `unsafe` code of netperfd. Each function wraps one
//! call (or one family: sendmmsg/recvmmsg with their message headers, TCP_INFO) behind a safe
//! signature whose buffers outlive the call; callers never see a raw pointer.

pub mod ethtool;

use std::os::fd::RawFd;

/// UDP_GRO (linux/udp.h): the segment size of a GRO super-datagram, as a cmsg.
pub const UDP_GRO: libc::c_int = 104;

/// Set this thread's timer slack to 1 ns (PR_SET_TIMERSLACK) for precise pacing sleeps.
/// Returns the slack the kernel then reports (PR_GET_TIMERSLACK, ns), or the error.
///
/// `prctl` is variadic: the kernel reads each argument as an `unsigned long`, 32 bits on armv7.
/// Passing `u64`s there (as this did until 2026-12) puts the value in a register pair on 32-bit
/// ARM and the kernel read garbage (24,836,008 ns of slack: paced sends at 0.4–8 % of the rate),
/// so every argument is a `c_ulong`.
pub fn fine_timer_slack() -> std::io::Result<u64> {
    let one: libc::c_ulong = 1;
    let zero: libc::c_ulong = 0;
    // SAFETY: prctl(PR_SET_TIMERSLACK, unsigned long, …) reads integers only and affects only
    // the calling thread; every variadic argument has the C type the kernel reads.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, one, zero, zero, zero) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    timer_slack_ns()
}

/// This thread's timer slack (PR_GET_TIMERSLACK), nanoseconds.
pub fn timer_slack_ns() -> std::io::Result<u64> {
    let zero: libc::c_ulong = 0;
    // SAFETY: PR_GET_TIMERSLACK reads no memory; the unused arguments are c_ulong zeros.
    let rc = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, zero, zero, zero, zero) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::try_from(rc).unwrap_or(0))
}

/// Fix glibc malloc's mmap threshold at `bytes` (mallopt M_MMAP_THRESHOLD): every allocation
/// of at least that size is its own mapping, returned to the kernel when freed. glibc's default
/// threshold moves up to the size of the largest mapped block freed (up to 32 MiB on 64-bit),
/// so after one login argon2's 19 MiB block came from the per-thread heaps and stayed there:
/// 10 MB at start, 110–127 MB after ten wrong passwords. Setting it also fixes the trim
/// threshold (no dynamic adjustment). True when glibc took it; false elsewhere (musl returns
/// large blocks to the kernel by itself).
pub fn fix_mmap_threshold(bytes: usize) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let Ok(v) = libc::c_int::try_from(bytes) else {
            return false;
        };
        // SAFETY: mallopt takes two ints and only changes malloc's tunables.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, v) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = bytes;
        false
    }
}

/// Monotonic clock as (seconds, microseconds), the sender timestamp iperf3 uses.
pub fn mono_now() -> (u32, u32) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write into.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u32, (ts.tv_nsec / 1000) as u32)
}

pub fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: v is a valid c_int for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// An integer socket option's value (`getsockopt`).
pub fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> std::io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes of their sizes for the duration of the call;
    // the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// SO_MAX_PACING_RATE of a socket, bytes/s (iperf3's `--fq-rate`): TCP paces itself to it
/// (the kernel's own TCP pacing, with or without the fq qdisc); other sockets only under fq.
/// Errors: the kernel's (e.g. ENOPROTOOPT on a kernel without it).
pub fn set_max_pacing_rate(fd: RawFd, bytes_per_s: u64) -> std::io::Result<()> {
    // SAFETY: v is a valid u64 for the duration of the call; the kernel accepts 32 or 64 bits.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &bytes_per_s as *const u64 as *const libc::c_void,
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// recv(2) with MSG_TRUNC on a TCP socket: up to `buf.len()` bytes are taken from the socket
/// and discarded, not copied into `buf` (tcp(7); iperf3's `--skip-rx-copy`); how many. 0 = EOF.
pub fn recv_discard(fd: RawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: buf is writable for buf.len() bytes for the duration of the call (the kernel
    // does not write to it with MSG_TRUNC on TCP, but may on other socket types).
    let rc = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_TRUNC,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// An anonymous in-memory file (memfd_create(2), close-on-exec) holding `data`, for
/// [`sendfile`]: iperf3's `-Z` sends its block from a file instead of from user memory.
/// Errors when the kernel has no memfd (before 3.17) or memory is short.
pub fn memfd_with(data: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: the name is a NUL-terminated C string literal; the flags are plain bits.
    let fd = unsafe { libc::memfd_create(c"netperfd-zerocopy".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor we own and hand over to the File exactly once.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.write_all(data)?;
    Ok(f)
}

/// sendfile(2): up to `count` bytes of `file` from `offset` to the socket `out` without a
/// copy through user space; the bytes sent (0 at the file's end).
pub fn sendfile(
    out: RawFd,
    file: &std::fs::File,
    offset: u64,
    count: usize,
) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    // sendfile64: off_t is 32 bits on armv7 glibc; off64_t is 64 bits on every target.
    let mut off: libc::off64_t = i64::try_from(offset).unwrap_or(i64::MAX);
    // SAFETY: off is a valid off64_t the kernel may update; both descriptors are open for the
    // duration of the call (file is borrowed, out is the caller's socket).
    let rc = unsafe { libc::sendfile64(out, file.as_raw_fd(), &mut off, count) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// send(2) of `buf` on a connected socket; the bytes sent.
pub fn send(fd: RawFd, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes for the duration of the call.
    let rc = unsafe { libc::send(fd, buf.as_ptr() as *const libc::c_void, buf.len(), 0) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// sendmmsg(2) of `n` datagrams of `len` bytes each, laid end to end in `buf`; how many went.
/// At most `buf.len() / len` datagrams are sent (the kernel never reads past `buf`; `n`
/// beyond it is clamped, as [`recvmmsg`] clamps to its slots). `len` 0 sends empty datagrams.
pub fn sendmmsg(fd: RawFd, buf: &[u8], len: usize, n: usize) -> std::io::Result<usize> {
    let n = match buf.len().checked_div(len) {
        Some(fit) => n.min(fit),
        None => n,
    };
    let mut iov: Vec<libc::iovec> = (0..n)
        .map(|i| libc::iovec {
            // In range: i * len + len <= buf.len() by the clamp above.
            iov_base: buf[i * len..].as_ptr() as *mut libc::c_void,
            iov_len: len,
        })
        .collect();
    // SAFETY: an all-zero mmsghdr is a valid "no name, no control" header.
    let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: msgs and the iovecs they point to live until the call returns.
    let rc = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as libc::c_uint, 0) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// One datagram that [`recvmmsg`] read: its length in bytes (before truncation to the slot),
/// the kernel's arrival time (µs since the epoch, SCM_TIMESTAMPNS) and the GRO segment size.
#[derive(Debug, Clone, Copy)]
pub struct RecvMsg {
    pub len: usize,
    pub timestamp_us: Option<i64>,
    pub segment: Option<usize>,
}

/// Room for one datagram's control messages (a timestamp and a GRO segment size take 48
/// bytes), aligned as the kernel's `struct cmsghdr` needs: the CMSG_* walk reads headers in
/// place, so the alignment is part of the type, not a property of whatever allocation a caller
/// made.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct CmsgSlot([u8; 128]);

const _: () = assert!(std::mem::align_of::<CmsgSlot>() >= std::mem::align_of::<libc::cmsghdr>());

impl Default for CmsgSlot {
    fn default() -> CmsgSlot {
        CmsgSlot([0; 128])
    }
}

/// recvmmsg(2) of up to `n` datagrams into `bufs` (slot `i` at `i * slot`, `slot` bytes) with
/// their control messages in `ctrl` (one [`CmsgSlot`] each). `flags`: MSG_WAITFORONE,
/// MSG_DONTWAIT. Panics never; `bufs`/`ctrl` shorter than `n` slots read fewer datagrams.
pub fn recvmmsg(
    fd: RawFd,
    bufs: &mut [u8],
    slot: usize,
    ctrl: &mut [CmsgSlot],
    n: usize,
    flags: libc::c_int,
) -> std::io::Result<Vec<RecvMsg>> {
    let n = n.min(bufs.len() / slot.max(1)).min(ctrl.len());
    let mut iov: Vec<libc::iovec> = (0..n)
        .map(|i| libc::iovec {
            iov_base: bufs[i * slot..].as_mut_ptr() as *mut libc::c_void,
            iov_len: slot,
        })
        .collect();
    // SAFETY: zeroed mmsghdr is valid; pointers set below outlive the call.
    let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
    for ((m, v), c) in msgs.iter_mut().zip(iov.iter_mut()).zip(ctrl.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = c.0.as_mut_ptr() as *mut libc::c_void;
        m.msg_hdr.msg_controllen = std::mem::size_of::<CmsgSlot>() as _;
    }
    // SAFETY: msgs, iov, bufs and ctrl are valid for the call.
    let rc = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            flags,
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(msgs
        .iter()
        .take(rc as usize)
        .map(|m| {
            let (timestamp_us, segment) = parse_cmsgs(&m.msg_hdr);
            RecvMsg {
                len: m.msg_len as usize,
                timestamp_us,
                segment,
            }
        })
        .collect())
}

/// (kernel arrival time in µs from SCM_TIMESTAMPNS, GRO segment size).
fn parse_cmsgs(h: &libc::msghdr) -> (Option<i64>, Option<usize>) {
    let mut ts = None;
    let mut seg = None;
    // The length a cmsg must have for its data to hold a `T` (CMSG_LEN).
    // cmsg_len is a size_t on glibc and a socklen_t on musl.
    #[allow(clippy::unnecessary_cast)]
    fn holds<T>(c: &libc::cmsghdr) -> bool {
        let need = u32::try_from(std::mem::size_of::<T>()).unwrap_or(u32::MAX);
        // SAFETY: CMSG_LEN is arithmetic on its argument only.
        let need = unsafe { libc::CMSG_LEN(need) } as usize;
        c.cmsg_len as usize >= need
    }
    // SAFETY: CMSG_* walk the control buffer the kernel filled, within msg_controllen; a
    // cmsg's data is read only when its cmsg_len says it holds the type read.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let level = (*c).cmsg_level;
            let ty = (*c).cmsg_type;
            let data = libc::CMSG_DATA(c);
            if !holds::<libc::c_int>(&*c) {
                // Too short for any type read below.
            } else if level == libc::SOL_SOCKET
                && ty == libc::SCM_TIMESTAMPNS
                && holds::<libc::timespec>(&*c)
            {
                let t: libc::timespec = std::ptr::read_unaligned(data as *const libc::timespec);
                ts = Some(t.tv_sec as i64 * 1_000_000 + t.tv_nsec as i64 / 1000);
            } else if level == libc::SOL_UDP && ty == UDP_GRO {
                let s: libc::c_int = std::ptr::read_unaligned(data as *const libc::c_int);
                seg = Some(s as usize);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    (ts, seg)
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
    /// Reordering events the sender has seen since the connection started
    /// (`tcpi_reord_seen`, Linux 4.19+; 0 before), what iperf3 3.19+ reports as `reorder`.
    #[serde(default)]
    pub reord_seen: u64,
}

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
        // 0 before Linux 4.19 (the kernel writes a shorter struct; the rest stays zero).
        reord_seen: raw.reord_seen as u64,
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
    let len = (len as usize).min(buf.len());
    let end = buf[..len].iter().position(|&b| b == 0).unwrap_or(len);
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

/// CLOCK_MONOTONIC in nanoseconds (since an unspecified start, usually boot): the clock of
/// the UDP echo's timestamps (never stepped by NTP or by hand, unlike CLOCK_REALTIME).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write into.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The calling thread's kernel TID.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Clock ticks per second of /proc's CPU times (sysconf _SC_CLK_TCK); 100 when unknown.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no memory side effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Set thread `tid`'s nice value (setpriority PRIO_PROCESS on a TID); false when refused.
pub fn set_thread_nice(tid: i32, nice: i32) -> bool {
    // SAFETY: setpriority on a thread id; no memory is passed.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) == 0 }
}

/// An AF_PACKET raw socket (packet(7)) bound to port `ifindex` that receives every frame the
/// port sends and receives (ETH_P_ALL), whole, with its Ethernet header; close-on-exec. It is
/// opened with protocol 0 (nothing received) and starts receiving only at the bind, so no
/// frame of another port slips in. Errors: EPERM without CAP_NET_RAW, ENODEV for a port that
/// does not exist.
pub fn packet_socket(ifindex: u32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2) with constant arguments; a valid result is owned at once below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll that outlives the call; the length is its size.
    let rc = unsafe {
        libc::bind(
            fd,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Datagrams waiting on `r` (read without blocking), with their lengths.
    fn drain(r: &std::net::UdpSocket) -> Vec<usize> {
        r.set_nonblocking(true).unwrap();
        let mut b = [0u8; 2048];
        let mut got = Vec::new();
        while let Ok(n) = r.recv(&mut b) {
            got.push(n);
        }
        got
    }

    #[test]
    fn timer_slack_is_one_nanosecond_after_fine_timer_slack() {
        // In a thread of its own: the slack is per thread. On armv7 the u64 arguments of the
        // old call left 24,836,008 ns here (the kernel read a register the u64 did not fill).
        let got = std::thread::spawn(|| (fine_timer_slack().unwrap(), timer_slack_ns().unwrap()))
            .join()
            .unwrap();
        assert_eq!(got, (1, 1));
    }

    #[test]
    fn recv_discard_counts_tcp_data_without_copying_it() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(&[9u8; 5000]).unwrap();
        drop(c);
        let mut buf = [0u8; 1024];
        let mut total = 0;
        loop {
            let n = recv_discard(s.as_raw_fd(), &mut buf).unwrap();
            if n == 0 {
                break;
            }
            assert!(n <= 1024);
            total += n;
        }
        assert_eq!(total, 5000);
        assert!(buf.iter().all(|b| *b == 0), "data was copied");
    }

    #[test]
    fn sendmmsg_never_reads_past_its_buffer() {
        let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(r.local_addr().unwrap()).unwrap();
        let buf = [7u8; 1000];
        // 10 datagrams of 300 bytes asked for; 3 fit in 1000 bytes.
        assert_eq!(sendmmsg(s.as_raw_fd(), &buf, 300, 10).unwrap(), 3);
        // Exactly as many as fit.
        assert_eq!(sendmmsg(s.as_raw_fd(), &buf, 250, 4).unwrap(), 4);
        // A buffer shorter than one datagram: none (was: a panic or a read past the end).
        assert_eq!(sendmmsg(s.as_raw_fd(), &buf[..10], 300, 2).unwrap(), 0);
        // Empty datagrams are allowed.
        assert_eq!(sendmmsg(s.as_raw_fd(), &[], 0, 2).unwrap(), 2);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(drain(&r), [300, 300, 300, 250, 250, 250, 250, 0, 0]);
    }
}
