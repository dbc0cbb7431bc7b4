//! The driver's own statistics and ring sizes of a port, through the `SIOCETHTOOL` ioctl
//! (what `ethtool -S` and `ethtool -g` print): ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS,
//! ETHTOOL_GSTATS and ETHTOOL_GRINGPARAM (linux/ethtool.h). The ioctl follows the calling
//! thread's network namespace. Callers see names and numbers, never a pointer.
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

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_GRXCSUM: u32 = 0x14;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GSG: u32 = 0x18;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// More statistics than any driver has (mlx5 has ~1,500): a bound on what is allocated.
const MAX_STATS: usize = 16_384;

/// `struct ifreq` with `ifr_data`: name, pointer, and room for the rest of the union.
#[repr(C)]
struct IfReqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 24],
}

/// Ring sizes of a port (`ethtool -g`), descriptors: current and the driver's maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Rings {
    pub rx: u32,
    pub rx_max: u32,
    pub tx: u32,
    pub tx_max: u32,
}

fn socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One SIOCETHTOOL call on port `ifname` with command buffer `buf` (its first u32 is the
/// command). The kernel reads and writes the command's struct; for GSTRINGS and GSTATS that
/// struct's length is the driver's count at the call, so their buffers are [`Guarded`].
fn call(fd: &OwnedFd, ifname: &str, buf: &mut [u64]) -> std::io::Result<()> {
    let b = ifname.as_bytes();
    if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut req = IfReqData {
        name: [0; libc::IFNAMSIZ],
        data: buf.as_mut_ptr() as *mut libc::c_void,
        _pad: [0; 24],
    };
    for (d, s) in req.name.iter_mut().zip(b) {
        *d = *s;
    }
    // SAFETY: req is a valid ifreq whose data points to `buf`, which outlives the call and is
    // large enough for the command's fixed struct; the two commands whose length the kernel
    // decides (GSTRINGS, GSTATS) get a buffer ending at a guard page (`Guarded`), where an
    // overlong write faults in the kernel (EFAULT) instead of reaching other memory.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReqData) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Set u32 number `i` of `buf` (as the kernel's struct lays u32 fields out in memory);
/// nothing when `buf` is too short (callers size it).
fn set_u32(buf: &mut [u64], i: usize, v: u32) {
    let Some(w) = buf.get_mut(i / 2) else {
        return;
    };
    let mut bytes = w.to_ne_bytes();
    let (lo, hi) = bytes.split_at_mut(4);
    let half = if i % 2 == 0 { lo } else { hi };
    half.copy_from_slice(&v.to_ne_bytes());
    *w = u64::from_ne_bytes(bytes);
}

/// u32 number `i` of `buf`; 0 past its end.
fn get_u32(buf: &[u64], i: usize) -> u32 {
    let Some(w) = buf.get(i / 2) else {
        return 0;
    };
    let bytes = w.to_ne_bytes();
    let (lo, hi) = bytes.split_at(4);
    let half = if i % 2 == 0 { lo } else { hi };
    half.try_into().map_or(0, u32::from_ne_bytes)
}

/// A zeroed buffer of `u64` words whose end lies against a `PROT_NONE` guard page.
///
/// ETHTOOL_GSTRINGS and ETHTOOL_GSTATS write as many entries as the driver counts at the
/// time of the call, not the count the caller passed in the request (linux
/// net/ethtool/ioctl.c `ethtool_get_strings`/`ethtool_get_stats` overwrite `len`/`n_stats`),
/// so a driver whose count grew after ETHTOOL_GSSET_INFO would write past a buffer sized
/// from that first answer. Here such a write reaches the guard page, where the kernel's
/// copy to user memory faults and the ioctl fails with EFAULT: nothing else is overwritten.
struct Guarded {
    map: *mut libc::c_void,
    map_len: usize,
    /// Byte offset of the first word in the mapping (the words end at the guard page).
    off: usize,
    words: usize,
}

impl Guarded {
    /// `words` zeroed words. Errors: the size overflows, or mmap/mprotect fail (ENOMEM).
    fn new(words: usize) -> std::io::Result<Guarded> {
        let too_big = || std::io::Error::from_raw_os_error(libc::ENOMEM);
        // SAFETY: sysconf takes no pointers.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| *p >= 8 && p.is_power_of_two())
            .unwrap_or(4096);
        let bytes = words.checked_mul(8).ok_or_else(too_big)?;
        let data = bytes
            .div_ceil(page)
            .max(1)
            .checked_mul(page)
            .ok_or_else(too_big)?;
        let map_len = data.checked_add(page).ok_or_else(too_big)?;
        // SAFETY: an anonymous private mapping; no pointer is passed in.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let g = Guarded {
            map,
            map_len,
            off: data.saturating_sub(bytes),
            words,
        };
        // SAFETY: [map + data, map + data + page) lies inside the mapping made above.
        let rc = unsafe {
            libc::mprotect(
                map.cast::<u8>().wrapping_add(data).cast(),
                page,
                libc::PROT_NONE,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(g)
    }

    fn words(&mut self) -> &mut [u64] {
        // SAFETY: `off` is a multiple of 8 (page and word sizes are), and `off + 8 × words`
        // ends at the guard page, inside the readable and writable part of the mapping,
        // which lives as long as `self`; the mapping is zeroed, a valid `u64` array.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.cast::<u8>().wrapping_add(self.off).cast::<u64>(),
                self.words,
            )
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.map, self.map_len);
        }
    }
}

/// The driver's statistics of port `ifname`, as name and value, in the driver's order
/// (`ethtool -S`). Errors: the port does not exist (ENODEV), the driver has no statistics
/// (EOPNOTSUPP, or an empty list), the driver's count kept changing between the calls
/// (EAGAIN, after [`STATS_TRIES`] tries), or the ioctl is refused.
pub(crate) fn stats(ifname: &str) -> std::io::Result<Vec<(String, u64)>> {
    let fd = socket()?;
    stats_with(&mut |buf| call(&fd, ifname, buf))
}

/// How often [`stats`] asks again when the driver's count changed between its calls.
pub(crate) const STATS_TRIES: usize = 3;

/// [`stats`] over `call` (one SIOCETHTOOL with the given command buffer), so a driver whose
/// count changes can be played in a test.
///
/// Three calls: ETHTOOL_GSSET_INFO gives the count `n`, and the GSTRINGS and GSTATS buffers
/// are sized by it. Those two write as many entries as the driver counts at their own call
/// and put that count in their header (linux net/ethtool/ioctl.c `ethtool_get_strings`,
/// `ethtool_get_stats`), so: a count that grew past the buffer faults at the guard page
/// ([`Guarded`], EFAULT) before anything else is written; a count that differs from `n` in
/// either header means names and values may not belong together. Both start over from
/// GSSET_INFO, at most [`STATS_TRIES`] times; the names and values returned always come from
/// calls that all answered `n`.
fn stats_with(
    call: &mut dyn FnMut(&mut [u64]) -> std::io::Result<()>,
) -> std::io::Result<Vec<(String, u64)>> {
    for _ in 0..STATS_TRIES {
        // ethtool_sset_info: cmd, reserved, sset_mask (u64), data[1] (u32).
        let mut info = [0u64; 3];
        set_u32(&mut info, 0, ETHTOOL_GSSET_INFO);
        info[1] = 1u64 << ETH_SS_STATS;
        call(&mut info)?;
        if info[1] & (1u64 << ETH_SS_STATS) == 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        let n32 = get_u32(&info, 4);
        let n = usize::try_from(n32).unwrap_or(usize::MAX);
        if n == 0 || n > MAX_STATS {
            return Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        // n ≤ MAX_STATS: the sizes below cannot overflow.
        // ethtool_gstrings: cmd, string_set, len (3 × u32), then len × 32 bytes.
        let mut names_buf = Guarded::new(
            n.saturating_mul(ETH_GSTRING_LEN)
                .div_ceil(8)
                .saturating_add(2),
        )?;
        let names = names_buf.words();
        set_u32(names, 0, ETHTOOL_GSTRINGS);
        set_u32(names, 1, ETH_SS_STATS);
        set_u32(names, 2, n32);
        if count_changed(call(names))? || get_u32(names, 2) != n32 {
            continue;
        }
        // ethtool_stats: cmd, n_stats (2 × u32), then n × u64.
        let mut vals_buf = Guarded::new(n.saturating_add(1))?;
        let vals = vals_buf.words();
        set_u32(vals, 0, ETHTOOL_GSTATS);
        set_u32(vals, 1, n32);
        if count_changed(call(vals))? || get_u32(vals, 1) != n32 {
            continue;
        }
        let bytes: Vec<u8> = names.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let strings = bytes.get(12..).unwrap_or_default();
        return Ok(strings
            .chunks_exact(ETH_GSTRING_LEN)
            .zip(vals.iter().skip(1))
            .take(n)
            .map(|(s, v)| (c_text(s), *v))
            .collect());
    }
    Err(std::io::Error::from_raw_os_error(libc::EAGAIN))
}

/// The answer of a GSTRINGS or GSTATS call: `true` when it faulted at the guard page (the
/// driver's count grew past the buffer: ask again), `false` when it succeeded; other errors
/// are the caller's.
fn count_changed(r: std::io::Result<()>) -> std::io::Result<bool> {
    match r {
        Ok(()) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EFAULT) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Ring sizes of port `ifname` (`ethtool -g`). Errors: no such port, or the driver does not
/// report rings (EOPNOTSUPP; veth does since Linux 5.x, many virtual ports do not).
pub(crate) fn rings(ifname: &str) -> std::io::Result<Rings> {
    let fd = socket()?;
    // ethtool_ringparam: 9 × u32.
    let mut b = [0u64; 5];
    set_u32(&mut b, 0, ETHTOOL_GRINGPARAM);
    call(&fd, ifname, &mut b)?;
    Ok(Rings {
        rx_max: get_u32(&b, 1),
        tx_max: get_u32(&b, 4),
        rx: get_u32(&b, 5),
        tx: get_u32(&b, 8),
    })
}

/// A NUL-padded C string field as text (lossy UTF-8, up to the first NUL).
fn c_text(field: &[u8]) -> String {
    let text = field.split(|&c| c == 0).next().unwrap_or_default();
    String::from_utf8_lossy(text).into_owned()
}

/// Driver name and firmware version of a port (`ethtool -i`); the firmware is `None` when
/// the driver gives none (empty or "N/A"). Errors: no such port, or no driver information.
pub(crate) fn drvinfo(ifname: &str) -> std::io::Result<(String, Option<String>)> {
    let fd = socket()?;
    // ethtool_drvinfo: cmd, driver[32], version[32], fw_version[32], bus_info[32],
    // erom_version[32], reserved2[12], 5 × u32 = 196 bytes.
    let mut b = [0u64; 25];
    set_u32(&mut b, 0, ETHTOOL_GDRVINFO);
    call(&fd, ifname, &mut b)?;
    let bytes: Vec<u8> = b.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let text = |at: usize| {
        let f = bytes.get(at..at.saturating_add(32)).unwrap_or_default();
        c_text(f).trim().to_string()
    };
    let fw = text(4 + 64);
    let fw = (!fw.is_empty() && fw != "N/A").then_some(fw);
    Ok((text(4), fw))
}

/// Offloads of a port that are on (`ethtool -k`'s legacy flags): each of rx-checksumming,
/// tx-checksumming, scatter-gather, TSO, GSO, GRO as (name, on), for those the driver
/// answers; empty when it answers none.
pub(crate) fn offloads(ifname: &str) -> Vec<(&'static str, bool)> {
    let Ok(fd) = socket() else {
        return Vec::new();
    };
    [
        ("rx-checksum", ETHTOOL_GRXCSUM),
        ("tx-checksum", ETHTOOL_GTXCSUM),
        ("scatter-gather", ETHTOOL_GSG),
        ("tso", ETHTOOL_GTSO),
        ("gso", ETHTOOL_GGSO),
        ("gro", ETHTOOL_GGRO),
    ]
    .into_iter()
    .filter_map(|(name, cmd)| {
        // ethtool_value: cmd, data.
        let mut b = [0u64; 1];
        set_u32(&mut b, 0, cmd);
        call(&fd, ifname, &mut b).ok()?;
        Some((name, get_u32(&b, 1) != 0))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u32_fields_round_trip_in_u64_words() {
        let mut b = [0u64; 3];
        for i in 0..6 {
            set_u32(&mut b, i, 100 + i as u32);
        }
        for i in 0..6 {
            assert_eq!(get_u32(&b, i), 100 + i as u32);
        }
    }

    /// Issue 40: a kernel write longer than the buffer (what GSTRINGS/GSTATS do when the
    /// driver's count grew) stops at the guard page with EFAULT or a short count, and the
    /// buffer's own words are all it changed.
    #[test]
    fn a_kernel_write_past_a_guarded_buffer_faults_at_its_end() {
        let mut g = Guarded::new(3).expect("mapping");
        assert_eq!(g.words(), [0, 0, 0]);
        g.words()[2] = 7;
        let zero = std::fs::File::open("/dev/zero").expect("/dev/zero");
        let w = g.words();
        // SAFETY (test): read(2) into the guarded words, asking for 100 bytes more than they
        // hold; the kernel faults at the guard page.
        let rc = unsafe {
            libc::read(
                std::os::fd::AsRawFd::as_raw_fd(&zero),
                w.as_mut_ptr().cast(),
                3 * 8 + 100,
            )
        };
        let e = std::io::Error::last_os_error();
        assert!(
            rc == 24 || (rc < 0 && e.raw_os_error() == Some(libc::EFAULT)),
            "read gave {rc} ({e})"
        );
        assert_eq!(g.words(), [0, 0, 0], "the words /dev/zero wrote");
        // A buffer of a page's words exactly, and an empty one, map and drop cleanly.
        assert_eq!(Guarded::new(512).expect("page").words().len(), 512);
        assert!(Guarded::new(0).expect("empty").words().is_empty());
        assert!(Guarded::new(usize::MAX).is_err());
    }

    #[test]
    fn bad_names_and_missing_ports_are_errors_not_panics() {
        assert!(stats("").is_err());
        assert!(stats("a-name-far-too-long-for-a-port").is_err());
        assert!(stats("nul\0").is_err());
        let e = stats("npt-nosuch0").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
        // Loopback has no driver statistics.
        assert!(stats("lo").is_err());
    }

    /// A driver as net/ethtool/ioctl.c serves it: each call answers with the count the
    /// driver has at that call (`counts[i]` for call `i`, the last one thereafter), writes
    /// that many entries, and faults (EFAULT) where the buffer ends.
    struct FakeDriver {
        counts: Vec<u32>,
        calls: usize,
    }

    impl FakeDriver {
        fn call(&mut self, buf: &mut [u64]) -> std::io::Result<()> {
            let count = self.counts[self.calls.min(self.counts.len() - 1)];
            self.calls += 1;
            let efault = || Err(std::io::Error::from_raw_os_error(libc::EFAULT));
            match get_u32(buf, 0) {
                ETHTOOL_GSSET_INFO => set_u32(buf, 4, count),
                ETHTOOL_GSTRINGS => {
                    set_u32(buf, 2, count);
                    for i in 0..count as usize {
                        let name = format!("stat_{i}_of_{count}");
                        for (j, b) in name.bytes().enumerate() {
                            let at = 12 + i * ETH_GSTRING_LEN + j;
                            let Some(w) = buf.get_mut(at / 8) else {
                                return efault();
                            };
                            let mut bytes = w.to_ne_bytes();
                            bytes[at % 8] = b;
                            *w = u64::from_ne_bytes(bytes);
                        }
                        if buf.len() * 8 < 12 + (i + 1) * ETH_GSTRING_LEN {
                            return efault();
                        }
                    }
                }
                ETHTOOL_GSTATS => {
                    set_u32(buf, 1, count);
                    for i in 0..count as usize {
                        let Some(w) = buf.get_mut(1 + i) else {
                            return efault();
                        };
                        *w = 1000 * u64::from(count) + i as u64;
                    }
                }
                _ => return Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            }
            Ok(())
        }
    }

    fn fake_stats(counts: &[u32]) -> (std::io::Result<Vec<(String, u64)>>, usize) {
        let mut d = FakeDriver {
            counts: counts.to_vec(),
            calls: 0,
        };
        let got = stats_with(&mut |b| d.call(b));
        (got, d.calls)
    }

    fn table(count: u32) -> Vec<(String, u64)> {
        (0..count)
            .map(|i| {
                (
                    format!("stat_{i}_of_{count}"),
                    1000 * u64::from(count) + u64::from(i),
                )
            })
            .collect()
    }

    #[test]
    fn stats_of_a_steady_driver_pair_each_name_with_its_value() {
        let (got, calls) = fake_stats(&[3]);
        assert_eq!(got.unwrap(), table(3));
        assert_eq!(calls, 3);
    }

    /// Issue 40: the count GSTRINGS and GSTATS write is the driver's at their call.
    #[test]
    fn a_driver_count_that_changes_between_calls_is_asked_again() {
        // Grew after GSSET_INFO (3 → 5): GSTRINGS faults at the buffer's end; the second
        // round asks 5 and gets 5.
        let (got, calls) = fake_stats(&[3, 5]);
        assert_eq!(got.unwrap(), table(5));
        assert_eq!(calls, 2 + 3);
        // Shrank after GSSET_INFO (5 → 4): GSTRINGS says 4; asked again, 4 throughout.
        let (got, calls) = fake_stats(&[5, 4]);
        assert_eq!(got.unwrap(), table(4));
        assert_eq!(calls, 2 + 3);
        // Changed between GSTRINGS and GSTATS (names of 3, values of 2, then of 6): never
        // paired; the next round is 2 throughout.
        let (got, calls) = fake_stats(&[3, 3, 2]);
        assert_eq!(got.unwrap(), table(2));
        assert_eq!(calls, 3 + 3);
        let (got, calls) = fake_stats(&[3, 3, 6, 6]);
        assert_eq!(got.unwrap(), table(6));
        assert_eq!(calls, 3 + 3);
        // A count that changes at every call: EAGAIN after STATS_TRIES rounds.
        let (got, calls) = fake_stats(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(got.unwrap_err().raw_os_error(), Some(libc::EAGAIN));
        assert_eq!(calls, 2 * STATS_TRIES);
        // No statistics, or more than any driver has: EOPNOTSUPP at once.
        for n in [0, MAX_STATS as u32 + 1] {
            let (got, calls) = fake_stats(&[n]);
            assert_eq!(got.unwrap_err().raw_os_error(), Some(libc::EOPNOTSUPP));
            assert_eq!(calls, 1);
        }
    }

    /// A veth port in a namespace of its own: the ioctl's names and values are the driver's,
    /// checked against what `ip` says of the pair (veth's `peer_ifindex` is the peer's index).
    #[test]
    fn veth_statistics_name_the_peers_ifindex() {
        use std::os::fd::AsFd;
        use std::process::Command;
        let ns = format!("npt-eth-{}", std::process::id());
        let ip = |args: &[&str]| {
            let o = Command::new("ip").args(args).output().expect("ip");
            assert!(o.status.success(), "ip {args:?}: {:?}", o);
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        ip(&["netns", "add", &ns]);
        struct Gone(String);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::process::Command::new("ip")
                    .args(["netns", "del", &self.0])
                    .status();
            }
        }
        let _gone = Gone(ns.clone());
        ip(&[
            "-n", &ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1",
        ]);
        let line = ip(&["-n", &ns, "-o", "link", "show", "v1"]);
        let peer: u64 = line.split(':').next().unwrap().trim().parse().unwrap();
        let path = format!("/var/run/netns/{ns}");
        let got = std::thread::spawn(move || {
            let f = std::fs::File::open(path).unwrap();
            nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            stats("v0")
        })
        .join()
        .unwrap()
        .unwrap();
        assert_eq!(got.first(), Some(&("peer_ifindex".to_string(), peer)));
        assert!(got.len() > 1, "{got:?}");
    }
}
