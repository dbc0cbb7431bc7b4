//! The engine's system calls: the only `unsafe` code of netperfd. Each function wraps one
//! call (or one family: sendmmsg/recvmmsg with their message headers, TCP_INFO) behind a safe
//! signature whose buffers outlive the call; callers never see a raw pointer.

pub(crate) mod ethtool;

use std::os::fd::{AsRawFd, BorrowedFd};

/// UDP_GRO (linux/udp.h): the segment size of a GRO super-datagram, as a cmsg.
pub(crate) const UDP_GRO: libc::c_int = 104;

/// Set this thread's timer slack to 1 ns (PR_SET_TIMERSLACK) for precise pacing sleeps.
/// Returns the slack the kernel then reports (PR_GET_TIMERSLACK, ns), or the error.
///
/// `prctl` is variadic: the kernel reads each argument as an `unsigned long`, 32 bits on armv7.
/// Passing `u64`s there (as this did until 2026-12) puts the value in a register pair on 32-bit
/// ARM and the kernel read garbage (24,836,008 ns of slack: paced sends at 0.4–8 % of the rate),
/// so every argument is a `c_ulong`.
pub(crate) fn fine_timer_slack() -> std::io::Result<u64> {
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
pub(crate) fn timer_slack_ns() -> std::io::Result<u64> {
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
pub(crate) fn fix_mmap_threshold(bytes: usize) -> bool {
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

/// Give SIGPIPE its default action back (end the process quietly) for a command whose output
/// may go to a pipe that closes early: Rust starts with SIGPIPE ignored, so a write to a closed
/// pipe fails and `println!` panics, which under `panic = "abort"` is an abort with a
/// backtrace (s52 tryout: `netperfd runs list | head`). Only for commands that print and end;
/// never in the daemon or a server, where a peer closing a socket must not end the process.
pub(crate) fn default_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler; nothing else is in flight yet (it
    // is called first thing in a printing command, before any thread starts).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Monotonic clock as (seconds, microseconds), the sender timestamp iperf3 uses.
pub(crate) fn mono_now() -> (u32, u32) {
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

pub(crate) fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: v is a valid c_int for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
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
pub(crate) fn getsockopt_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> std::io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes of their sizes for the duration of the call;
    // the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
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
pub(crate) fn set_max_pacing_rate(fd: BorrowedFd<'_>, bytes_per_s: u64) -> std::io::Result<()> {
    // SAFETY: v is a valid u64 for the duration of the call; the kernel accepts 32 or 64 bits.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
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
pub(crate) fn recv_discard(fd: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: buf is writable for buf.len() bytes for the duration of the call (the kernel
    // does not write to it with MSG_TRUNC on TCP, but may on other socket types).
    let rc = unsafe {
        libc::recv(
            fd.as_raw_fd(),
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
pub(crate) fn memfd_with(data: &[u8]) -> std::io::Result<std::fs::File> {
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
pub(crate) fn sendfile(
    out: BorrowedFd<'_>,
    file: &std::fs::File,
    offset: u64,
    count: usize,
) -> std::io::Result<usize> {
    // sendfile64: off_t is 32 bits on armv7 glibc; off64_t is 64 bits on every target.
    let mut off: libc::off64_t = i64::try_from(offset).unwrap_or(i64::MAX);
    // SAFETY: off is a valid off64_t the kernel may update; both descriptors are open for the
    // duration of the call (file is borrowed, out is the caller's socket).
    let rc = unsafe { libc::sendfile64(out.as_raw_fd(), file.as_raw_fd(), &mut off, count) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// send(2) of `buf` on a connected socket; the bytes sent.
pub(crate) fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes for the duration of the call.
    let rc = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            0,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// sendmmsg(2) of `n` datagrams of `len` bytes each, laid end to end in `buf`; how many went.
/// At most `buf.len() / len` datagrams are sent (the kernel never reads past `buf`; `n`
/// beyond it is clamped, as [`recvmmsg`] clamps to its slots). `len` 0 sends empty datagrams.
pub(crate) fn sendmmsg(
    fd: BorrowedFd<'_>,
    buf: &[u8],
    len: usize,
    n: usize,
) -> std::io::Result<usize> {
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
    let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, 0) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Turn on SO_TXTIME for a socket on CLOCK_MONOTONIC, no flags (no deadline mode, no error
/// reports): from then on each message may carry an [`SCM_TXTIME`](libc::SCM_TXTIME) control
/// message with its earliest departure time, which the fq qdisc (Linux ≥ 4.20) honours and
/// other qdiscs (except etf) ignore. Errors: the kernel's — ENOPROTOOPT on a kernel without
/// the option (before 4.19), EINVAL where it refuses the clock or flags.
pub(crate) fn enable_txtime(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let v = libc::sock_txtime {
        clockid: libc::CLOCK_MONOTONIC,
        flags: 0,
    };
    // SAFETY: v is a valid sock_txtime for the duration of the call, passed with its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TXTIME,
            &v as *const libc::sock_txtime as *const libc::c_void,
            std::mem::size_of::<libc::sock_txtime>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Room for one SCM_TXTIME control message (`CMSG_SPACE(8)`: 24 bytes on 64-bit targets, 20
/// on 32-bit ones), aligned as the kernel's `struct cmsghdr` needs.
#[derive(Clone, Copy, Default)]
#[repr(C, align(8))]
pub(crate) struct TxtimeSlot([u8; 32]);

/// Bytes of one SCM_TXTIME control message with its padding (`CMSG_SPACE(8)`).
// SAFETY: CMSG_SPACE is arithmetic on its argument only.
pub(crate) const TXTIME_CMSG_SPACE: usize = unsafe { libc::CMSG_SPACE(8) } as usize;

/// `CMSG_LEN(8)`: an SCM_TXTIME control message's `cmsg_len` (header and the u64, no padding).
// SAFETY: CMSG_LEN is arithmetic on its argument only.
pub(crate) const TXTIME_CMSG_LEN: usize = unsafe { libc::CMSG_LEN(8) } as usize;

const _: () = assert!(TXTIME_CMSG_SPACE <= std::mem::size_of::<TxtimeSlot>());
const _: () = assert!(std::mem::align_of::<TxtimeSlot>() >= std::mem::align_of::<libc::cmsghdr>());

impl TxtimeSlot {
    /// Write the control message "depart not before `ns`" (SOL_SOCKET / SCM_TXTIME, a u64 of
    /// CLOCK_MONOTONIC nanoseconds, `cmsg_len` = `CMSG_LEN(8)`); the bytes to pass as
    /// `msg_controllen` ([`TXTIME_CMSG_SPACE`]).
    pub(crate) fn set(&mut self, ns: u64) -> usize {
        self.0 = [0; 32];
        // SAFETY: an all-zero cmsghdr is a valid value (integers and, on musl, padding).
        let mut h: libc::cmsghdr = unsafe { std::mem::zeroed() };
        h.cmsg_level = libc::SOL_SOCKET;
        h.cmsg_type = libc::SCM_TXTIME;
        h.cmsg_len = TXTIME_CMSG_LEN as _;
        // SAFETY: the slot holds 32 ≥ size_of::<cmsghdr>() writable bytes (checked above at
        // compile time through TXTIME_CMSG_SPACE ≥ CMSG_LEN(0)); write_unaligned needs no
        // alignment.
        unsafe { std::ptr::write_unaligned(self.0.as_mut_ptr().cast::<libc::cmsghdr>(), h) };
        self.0[CMSG_DATA_OFFSET..CMSG_DATA_OFFSET + 8].copy_from_slice(&ns.to_ne_bytes());
        TXTIME_CMSG_SPACE
    }

    /// The slot's bytes (for tests and the parser).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0[..TXTIME_CMSG_SPACE]
    }
}

/// [`sendmmsg`] with a departure time per message: message `i` (`len` bytes at `i * len` in
/// `buf`) carries an SCM_TXTIME control message of `times_ns[i]` (CLOCK_MONOTONIC ns; the
/// socket needs [`enable_txtime`], else the kernel refuses the call with EINVAL). At most
/// `min(n, buf.len() / len, times_ns.len())` messages; how many went.
pub(crate) fn sendmmsg_txtime(
    fd: BorrowedFd<'_>,
    buf: &[u8],
    len: usize,
    n: usize,
    times_ns: &[u64],
) -> std::io::Result<usize> {
    let n = match buf.len().checked_div(len) {
        Some(fit) => n.min(fit),
        None => n,
    }
    .min(times_ns.len());
    let mut iov: Vec<libc::iovec> = (0..n)
        .map(|i| libc::iovec {
            // In range: i * len + len <= buf.len() by the clamp above.
            iov_base: buf[i * len..].as_ptr() as *mut libc::c_void,
            iov_len: len,
        })
        .collect();
    let mut ctrl: Vec<TxtimeSlot> = vec![TxtimeSlot::default(); n];
    // SAFETY: an all-zero mmsghdr is a valid "no name, no control" header.
    let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (((m, v), c), &t) in msgs
        .iter_mut()
        .zip(iov.iter_mut())
        .zip(ctrl.iter_mut())
        .zip(times_ns)
    {
        let space = c.set(t);
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = c.0.as_mut_ptr() as *mut libc::c_void;
        m.msg_hdr.msg_controllen = space as _;
    }
    // SAFETY: msgs, the iovecs and the control slots they point to live until the call
    // returns; each msg_controllen is within its slot.
    let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, 0) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// One datagram that [`recvmmsg`] read: its length in bytes (before truncation to the slot),
/// the kernel's arrival time (µs since the epoch, SCM_TIMESTAMPNS) and the GRO segment size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecvMsg {
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
pub(crate) struct CmsgSlot([u8; 128]);

const _: () = assert!(std::mem::align_of::<CmsgSlot>() >= std::mem::align_of::<libc::cmsghdr>());

impl Default for CmsgSlot {
    fn default() -> CmsgSlot {
        CmsgSlot([0; 128])
    }
}

/// recvmmsg(2) of up to `n` datagrams into `bufs` (slot `i` at `i * slot`, `slot` bytes) with
/// their control messages in `ctrl` (one [`CmsgSlot`] each). `flags`: MSG_WAITFORONE,
/// MSG_DONTWAIT. Panics never; `bufs`/`ctrl` shorter than `n` slots read fewer datagrams.
/// A datagram whose control messages do not parse ([`parse_cmsgs`]) is returned without a
/// timestamp or segment size.
pub(crate) fn recvmmsg(
    fd: BorrowedFd<'_>,
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
            fd.as_raw_fd(),
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
        .zip(ctrl.iter())
        .take(rc as usize)
        .map(|(m, c)| {
            // The kernel sets msg_controllen to the bytes of control data it wrote.
            #[allow(clippy::unnecessary_cast)] // size_t on glibc, socklen_t on musl
            let used = (m.msg_hdr.msg_controllen as usize).min(c.0.len());
            let cm = parse_cmsgs(&c.0[..used]).unwrap_or_default();
            RecvMsg {
                len: m.msg_len as usize,
                timestamp_us: cm.timestamp_us,
                segment: cm.segment,
            }
        })
        .collect())
}

/// What the control messages of one datagram said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cmsgs {
    /// The kernel's arrival time, µs since the epoch (SCM_TIMESTAMPNS).
    pub timestamp_us: Option<i64>,
    /// The segment size of a GRO super-datagram, bytes (UDP_GRO; only a positive one).
    pub segment: Option<usize>,
}

/// A control buffer that is not a well-formed sequence of cmsgs; `at` is the byte offset of
/// the bad header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmsgError {
    /// `cmsg_len` is below the header's own size (`CMSG_LEN(0)`), 0 included: the walk
    /// cannot step past it.
    LenTooSmall { at: usize, len: usize },
    /// `cmsg_len` reaches past the end of the buffer.
    LenPastEnd { at: usize, len: usize },
}

/// Bytes from a cmsg's start to its data (`CMSG_LEN(0)`: the header, aligned).
// SAFETY: CMSG_LEN is arithmetic on its argument only.
const CMSG_DATA_OFFSET: usize = unsafe { libc::CMSG_LEN(0) } as usize;

/// `CMSG_ALIGN`: cmsgs start at multiples of `size_t` (glibc and musl alike).
fn cmsg_align(len: usize) -> Option<usize> {
    let a = std::mem::size_of::<usize>();
    Some(len.checked_add(a - 1)? & !(a - 1))
}

/// Walk the control bytes the kernel wrote for one datagram (`ctrl`: exactly the
/// `msg_controllen` bytes) and take the timestamp and GRO segment size from them. Every read
/// is checked against `ctrl` and against the cmsg's own `cmsg_len`; nothing is read outside
/// either. A cmsg too short for the type its level and type name is skipped; fewer trailing
/// bytes than a header end the walk (as `CMSG_NXTHDR`). Errors: a `cmsg_len` below the
/// header size or past the buffer's end ([`CmsgError`]).
pub(crate) fn parse_cmsgs(ctrl: &[u8]) -> Result<Cmsgs, CmsgError> {
    const HDR: usize = std::mem::size_of::<libc::cmsghdr>();
    let mut out = Cmsgs::default();
    let mut at = 0usize;
    while let Some(head) = ctrl.get(at..).and_then(|r| r.get(..HDR)) {
        // SAFETY: `head` holds HDR = size_of::<cmsghdr>() readable bytes, and cmsghdr is
        // integers only (any bit pattern is a value); read_unaligned needs no alignment.
        let h: libc::cmsghdr = unsafe { std::ptr::read_unaligned(head.as_ptr().cast()) };
        #[allow(clippy::unnecessary_cast)] // size_t on glibc, socklen_t on musl
        let len = h.cmsg_len as usize;
        if len < CMSG_DATA_OFFSET {
            return Err(CmsgError::LenTooSmall { at, len });
        }
        let Some(cmsg) = at.checked_add(len).and_then(|end| ctrl.get(at..end)) else {
            return Err(CmsgError::LenPastEnd { at, len });
        };
        let data = cmsg.get(CMSG_DATA_OFFSET..).unwrap_or_default();
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_TIMESTAMPNS {
            if let Some(t) = read_timespec(data) {
                out.timestamp_us = timespec_us(&t);
            }
        } else if h.cmsg_level == libc::SOL_UDP && h.cmsg_type == UDP_GRO {
            if let Some(s) = read_int(data) {
                out.segment = usize::try_from(s).ok().filter(|&s| s > 0);
            }
        }
        match cmsg_align(len).and_then(|step| at.checked_add(step)) {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok(out)
}

/// A `timespec` from the start of a cmsg's data; `None` when the data is shorter.
fn read_timespec(data: &[u8]) -> Option<libc::timespec> {
    let bytes = data.get(..std::mem::size_of::<libc::timespec>())?;
    // SAFETY: `bytes` holds size_of::<timespec>() readable bytes; timespec is integers only
    // (any bit pattern is a value); read_unaligned needs no alignment.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<libc::timespec>()) })
}

/// A timespec in µs; `None` when that overflows an `i64`.
#[allow(clippy::unnecessary_cast)] // time_t and c_long are 32 bits on armv7
fn timespec_us(t: &libc::timespec) -> Option<i64> {
    (t.tv_sec as i64)
        .checked_mul(1_000_000)?
        .checked_add(t.tv_nsec as i64 / 1000)
}

/// A `c_int` from the start of a cmsg's data; `None` when the data is shorter.
fn read_int(data: &[u8]) -> Option<libc::c_int> {
    let bytes = data.get(..std::mem::size_of::<libc::c_int>())?;
    Some(libc::c_int::from_ne_bytes(bytes.try_into().ok()?))
}

/// What iperf3 reports from TCP_INFO for a sending stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TcpInfo {
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
pub(crate) fn tcp_info(fd: BorrowedFd<'_>) -> std::io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: raw is a plain repr(C) struct of integers, len is its size; the kernel writes
    // at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
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
pub(crate) fn tcp_congestion(fd: BorrowedFd<'_>) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
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
pub(crate) fn set_tcp_congestion(fd: BorrowedFd<'_>, name: &str) -> std::io::Result<()> {
    // SAFETY: pointer and length describe name's bytes.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
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
pub(crate) fn mono_ns() -> u64 {
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
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Clock ticks per second of /proc's CPU times (sysconf _SC_CLK_TCK); 100 when unknown.
pub(crate) fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no memory side effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Set thread `tid`'s nice value (setpriority PRIO_PROCESS on a TID); false when refused.
pub(crate) fn set_thread_nice(tid: i32, nice: i32) -> bool {
    // SAFETY: setpriority on a thread id; no memory is passed.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) == 0 }
}

/// An AF_PACKET raw socket (packet(7)) bound to port `ifindex` that receives every frame the
/// port sends and receives (ETH_P_ALL), whole, with its Ethernet header; close-on-exec. It is
/// opened with protocol 0 (nothing received) and starts receiving only at the bind, so no
/// frame of another port slips in. Errors: EPERM without CAP_NET_RAW, ENODEV for a port that
/// does not exist.
pub(crate) fn packet_socket(ifindex: u32) -> std::io::Result<std::os::fd::OwnedFd> {
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
    use std::os::fd::AsFd;

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
    fn a_txtime_cmsg_is_one_sol_socket_scm_txtime_message_of_the_u64() {
        let mut slot = TxtimeSlot::default();
        let ns = 0x0123_4567_89ab_cdef_u64;
        let space = slot.set(ns);
        // CMSG_SPACE(8): the header (16 bytes on 64-bit, 12 on 32-bit) and 8 bytes of data.
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        assert_eq!(space, hdr + 8);
        assert_eq!(TXTIME_CMSG_LEN, hdr + 8);
        // Walk it as the kernel does: CMSG_FIRSTHDR / CMSG_DATA / CMSG_NXTHDR on a msghdr.
        // SAFETY (test): a zeroed msghdr is valid; its control points into `slot`, which
        // outlives the walk, and the CMSG_* macros stay within msg_controllen.
        unsafe {
            let mut m: libc::msghdr = std::mem::zeroed();
            m.msg_control = slot.0.as_mut_ptr().cast();
            m.msg_controllen = space as _;
            let c = libc::CMSG_FIRSTHDR(&m);
            assert!(!c.is_null());
            assert_eq!((*c).cmsg_level, libc::SOL_SOCKET);
            assert_eq!((*c).cmsg_type, libc::SCM_TXTIME);
            assert_eq!((*c).cmsg_len as usize, libc::CMSG_LEN(8) as usize);
            let got = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u64>());
            assert_eq!(got, ns);
            // One message, nothing after it.
            assert!(libc::CMSG_NXTHDR(&m, c).is_null());
        }
        // A second set overwrites the time and nothing else.
        slot.set(7);
        assert_eq!(
            &slot.bytes()[CMSG_DATA_OFFSET..CMSG_DATA_OFFSET + 8],
            &7u64.to_ne_bytes()
        );
    }

    #[test]
    fn the_kernel_takes_our_txtime_cmsg_only_after_so_txtime() {
        // The kernel parses the control message: SCM_TXTIME on a socket without SO_TXTIME is
        // EINVAL (so a refusal proves the kernel read our cmsg as SCM_TXTIME); after
        // enable_txtime the same call sends every datagram (loopback's noqueue ignores the
        // time; a malformed cmsg would be EINVAL here too).
        let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(r.local_addr().unwrap()).unwrap();
        let buf = [7u8; 300];
        let now = mono_ns();
        let times = [now, now + 1_000_000, now + 2_000_000];
        let e = sendmmsg_txtime(s.as_fd(), &buf, 100, 3, &times).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        enable_txtime(s.as_fd()).unwrap();
        assert_eq!(sendmmsg_txtime(s.as_fd(), &buf, 100, 3, &times).unwrap(), 3);
        // Never more messages than times.
        assert_eq!(
            sendmmsg_txtime(s.as_fd(), &buf, 100, 3, &times[..2]).unwrap(),
            2
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(drain(&r), vec![100; 5]);
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
            let n = recv_discard(s.as_fd(), &mut buf).unwrap();
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
        assert_eq!(sendmmsg(s.as_fd(), &buf, 300, 10).unwrap(), 3);
        // Exactly as many as fit.
        assert_eq!(sendmmsg(s.as_fd(), &buf, 250, 4).unwrap(), 4);
        // A buffer shorter than one datagram: none (was: a panic or a read past the end).
        assert_eq!(sendmmsg(s.as_fd(), &buf[..10], 300, 2).unwrap(), 0);
        // Empty datagrams are allowed.
        assert_eq!(sendmmsg(s.as_fd(), &[], 0, 2).unwrap(), 2);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(drain(&r), [300, 300, 300, 250, 250, 250, 250, 0, 0]);
    }

    /// One cmsg as the kernel lays it out: a header whose `cmsg_len` is `len`, then `data`,
    /// then zeros up to the next aligned start (CMSG_SPACE of the data).
    fn cmsg(level: libc::c_int, ty: libc::c_int, len: usize, data: &[u8]) -> Vec<u8> {
        // SAFETY (test): an all-zero cmsghdr is a value; its bytes are read as a byte slice
        // of exactly its size.
        let mut h: libc::cmsghdr = unsafe { std::mem::zeroed() };
        h.cmsg_len = len as _;
        h.cmsg_level = level;
        h.cmsg_type = ty;
        let head = unsafe {
            std::slice::from_raw_parts(
                (&h as *const libc::cmsghdr).cast::<u8>(),
                std::mem::size_of::<libc::cmsghdr>(),
            )
        };
        let mut v = head.to_vec();
        v.resize(CMSG_DATA_OFFSET, 0);
        v.extend_from_slice(data);
        // SAFETY (test): CMSG_SPACE is arithmetic.
        v.resize(unsafe { libc::CMSG_SPACE(data.len() as u32) } as usize, 0);
        v
    }

    fn timespec_bytes(sec: i64, nsec: i64) -> Vec<u8> {
        let t = libc::timespec {
            tv_sec: sec as _,
            tv_nsec: nsec as _,
        };
        // SAFETY (test): the bytes of a plain integer struct, exactly its size.
        unsafe {
            std::slice::from_raw_parts(
                (&t as *const libc::timespec).cast::<u8>(),
                std::mem::size_of::<libc::timespec>(),
            )
        }
        .to_vec()
    }

    /// A timestamp cmsg of 2023-11-14 22:13:20.123456789 and a GRO cmsg of 1448 bytes.
    fn ts_cmsg() -> Vec<u8> {
        let ts = timespec_bytes(1_700_000_000, 123_456_789);
        // SAFETY (test): CMSG_LEN is arithmetic.
        let len = unsafe { libc::CMSG_LEN(ts.len() as u32) } as usize;
        cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, len, &ts)
    }

    fn gro_cmsg(seg: libc::c_int) -> Vec<u8> {
        // SAFETY (test): CMSG_LEN is arithmetic.
        let len = unsafe { libc::CMSG_LEN(4) } as usize;
        cmsg(libc::SOL_UDP, UDP_GRO, len, &seg.to_ne_bytes())
    }

    const TS_US: i64 = 1_700_000_000_123_456;

    #[test]
    fn well_formed_cmsgs_give_the_timestamp_and_segment() {
        let ok = |b: &[u8]| parse_cmsgs(b);
        let both = [ts_cmsg(), gro_cmsg(1448)].concat();
        let want = Cmsgs {
            timestamp_us: Some(TS_US),
            segment: Some(1448),
        };
        assert_eq!(ok(&both), Ok(want));
        // Either order; an unknown cmsg between them is stepped over.
        let other = cmsg(
            libc::SOL_IP,
            libc::IP_TTL,
            CMSG_DATA_OFFSET + 4,
            &[64, 0, 0, 0],
        );
        assert_eq!(ok(&[gro_cmsg(1448), other, ts_cmsg()].concat()), Ok(want));
        assert_eq!(ok(&[]), Ok(Cmsgs::default()));
        // The last cmsg without its trailing padding (cmsg_len 20, buffer 20 bytes).
        let g = gro_cmsg(9000);
        assert_eq!(
            ok(&g[..CMSG_DATA_OFFSET + 4]),
            Ok(Cmsgs {
                timestamp_us: None,
                segment: Some(9000)
            })
        );
        // A GRO size that is not positive is no segment size.
        assert_eq!(ok(&gro_cmsg(0)), Ok(Cmsgs::default()));
        assert_eq!(ok(&gro_cmsg(-1)), Ok(Cmsgs::default()));
    }

    #[test]
    fn truncated_cmsg_buffers_are_read_only_within_their_bytes() {
        let ts = ts_cmsg();
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        // Fewer bytes than a header: nothing to read, nothing read.
        assert_eq!(parse_cmsgs(&ts[..hdr - 1]), Ok(Cmsgs::default()));
        // The same after a complete cmsg: the walk ends there, the first one counts.
        let tail = [gro_cmsg(1200), ts[..hdr - 1].to_vec()].concat();
        assert_eq!(parse_cmsgs(&tail).map(|c| c.segment), Ok(Some(1200)));
        // A header whose data was cut off: its cmsg_len (32) passes the buffer's end.
        assert_eq!(
            parse_cmsgs(&ts[..hdr + 4]),
            Err(CmsgError::LenPastEnd {
                at: 0,
                len: CMSG_DATA_OFFSET + 16
            })
        );
    }

    #[test]
    fn a_cmsg_len_too_small_or_zero_is_an_error_not_a_loop() {
        let ts = timespec_bytes(1, 0);
        for len in [0, 1, CMSG_DATA_OFFSET - 1] {
            let bad = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, len, &ts);
            assert_eq!(
                parse_cmsgs(&bad),
                Err(CmsgError::LenTooSmall { at: 0, len })
            );
            // Second in the buffer: reported at its own offset.
            let after = [gro_cmsg(1448), bad].concat();
            assert_eq!(
                parse_cmsgs(&after),
                Err(CmsgError::LenTooSmall {
                    at: gro_cmsg(1448).len(),
                    len
                })
            );
        }
        // Exactly a header: no data, so nothing read (skipped), and the walk goes on.
        let empty = cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            CMSG_DATA_OFFSET,
            &[],
        );
        assert_eq!(
            parse_cmsgs(&[empty, gro_cmsg(1448)].concat()),
            Ok(Cmsgs {
                timestamp_us: None,
                segment: Some(1448)
            })
        );
    }

    #[test]
    fn a_cmsg_len_too_large_is_an_error_and_a_short_one_is_skipped() {
        let ts = timespec_bytes(1_700_000_000, 123_456_789);
        // cmsg_len past the buffer (by 1 byte, and by far; the maximum).
        let whole = ts_cmsg().len();
        for len in [whole + 1, 4096, usize::MAX] {
            let bad = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, len, &ts);
            assert_eq!(parse_cmsgs(&bad), Err(CmsgError::LenPastEnd { at: 0, len }));
        }
        // A timestamp cmsg whose cmsg_len holds 8 bytes of data, too short for a timespec:
        // skipped, the GRO cmsg after it still read.
        let short = cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            CMSG_DATA_OFFSET + 8,
            &ts[..8],
        );
        assert_eq!(
            parse_cmsgs(&[short, gro_cmsg(1448)].concat()),
            Ok(Cmsgs {
                timestamp_us: None,
                segment: Some(1448)
            })
        );
        let short_gro = cmsg(
            libc::SOL_UDP,
            UDP_GRO,
            CMSG_DATA_OFFSET + 3,
            &1448i32.to_ne_bytes(),
        );
        assert_eq!(parse_cmsgs(&short_gro), Ok(Cmsgs::default()));
    }

    /// The kernel's own cmsgs through recvmmsg: a GSO send of 3 × 500 bytes arrives on a
    /// GRO socket as one 1500-byte datagram with segment size 500, and with a kernel
    /// timestamp within a second of the wall clock.
    #[test]
    fn recvmmsg_reads_the_kernels_timestamp_and_gro_segment() {
        let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(r.local_addr().unwrap()).unwrap();
        setsockopt_int(r.as_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).unwrap();
        setsockopt_int(r.as_fd(), libc::SOL_UDP, UDP_GRO, 1).unwrap();
        setsockopt_int(s.as_fd(), libc::SOL_UDP, 103, 500).unwrap(); // UDP_SEGMENT
        assert_eq!(send(s.as_fd(), &[1u8; 1500]).unwrap(), 1500);
        let mut bufs = vec![0u8; 65536];
        let mut ctrl = [CmsgSlot::default()];
        let got = recvmmsg(r.as_fd(), &mut bufs, 65536, &mut ctrl, 1, 0).unwrap();
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64;
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].len, got[0].segment), (1500, Some(500)));
        let ts = got[0].timestamp_us.expect("a kernel timestamp");
        assert!((now_us - ts).abs() < 1_000_000, "{ts} vs {now_us}");
    }
}
