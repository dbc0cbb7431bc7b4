//! The board's counters around a run: per port the driver's statistics (`ethtool -S`), ring
//! sizes (`ethtool -g`), the qdiscs' drops (`tc -s qdisc`, over netlink) and the
//! `/proc/net/dev` drops; `/proc/net/snmp` (Udp, Tcp) and the TcpExt lines of
//! `/proc/net/netstat`; `/proc/net/softnet_stat` per CPU; `/proc/interrupts` lines of the
//! ports' IRQs per CPU; cpufreq per core and thermal zones. [`BoardReading::take`] reads them
//! all; [`BoardReading::since`] gives what moved between two readings ([`BoardDelta`], stored
//! with the run). Anything a kernel or driver does not have is simply absent (empty list,
//! `None`), never an error. The text parsers are pure functions (unit-tested on captured
//! text). Not for: deciding what the numbers mean (see `crate::results::ledger`).
//!
//! Which namespace: `/proc/net/*` (snmp, netstat, dev), qdiscs and the ethtool ioctl follow the
//! reader's network namespace; softnet_stat, interrupts, cpufreq and thermal are the host's.

pub(crate) use crate::engine::netlink::{tc_dump, tc_handle, tc_parent};
use crate::engine::sys::ethtool;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `/proc/net/snmp` and `/proc/net/netstat` counters kept, as `Table.Name`.
pub(crate) const SNMP_KEPT: [&str; 10] = [
    "Ip.ReasmFails",
    "Udp.InErrors",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "Udp.InCsumErrors",
    "Tcp.RetransSegs",
    "TcpExt.TCPBacklogDrop",
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.TCPRcvQDrop",
];

/// At most this many ports are read (a board has a handful; a PC with 200 veths of
/// containers is not worth 200 ioctls a reading).
const MAX_PORTS: usize = 32;

/// Parse the `Table: Name Name…` / `Table: value value…` line pairs of `/proc/net/snmp` and
/// `/proc/net/netstat` into `Table.Name` → value. Negative values (Tcp MaxConn -1) and
/// lines whose header and values do not pair up are skipped.
pub(crate) fn parse_snmp(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.windows(2) {
        let (Some((t1, names)), Some((t2, vals))) =
            (pair[0].split_once(':'), pair[1].split_once(':'))
        else {
            continue;
        };
        if t1 != t2 {
            continue;
        }
        let names: Vec<&str> = names.split_ascii_whitespace().collect();
        let vals: Vec<&str> = vals.split_ascii_whitespace().collect();
        // The header line is the one whose first field is not a number.
        if names.len() != vals.len()
            || names.first().is_none_or(|n| n.parse::<i64>().is_ok())
            || vals.first().is_none_or(|v| v.parse::<i64>().is_err())
        {
            continue;
        }
        for (n, v) in names.iter().zip(vals) {
            if let Ok(v) = v.parse::<u64>() {
                out.insert(format!("{t1}.{n}"), v);
            }
        }
    }
    out
}

/// One CPU's line of `/proc/net/softnet_stat` (packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Softnet {
    /// The CPU: the line's own index column (13 columns and more, Linux 5.10+), else the
    /// line's position (older kernels list online CPUs only, so the position is the CPU
    /// only when none is offline).
    pub cpu: u32,
    /// Frames taken from the backlog / NAPI.
    pub processed: u64,
    /// Frames dropped because the CPU's backlog was full (netdev_max_backlog).
    pub dropped: u64,
    /// NAPI runs cut short by the budget or the time limit (netdev_budget, _usecs).
    pub time_squeeze: u64,
}

/// Parse `/proc/net/softnet_stat` (hexadecimal columns; 11 on older kernels, 13 and more
/// since the backlog length and CPU index were added). Malformed lines are skipped.
pub(crate) fn parse_softnet(text: &str) -> Vec<Softnet> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let cols: Vec<u64> = l
                .split_ascii_whitespace()
                .map(|c| u64::from_str_radix(c, 16))
                .collect::<Result<_, _>>()
                .ok()?;
            if cols.len() < 3 {
                return None;
            }
            let cpu = if cols.len() >= 13 {
                u32::try_from(cols[12]).ok()?
            } else {
                u32::try_from(i).ok()?
            };
            Some(Softnet {
                cpu,
                processed: cols[0],
                dropped: cols[1],
                time_squeeze: cols[2],
            })
        })
        .collect()
}

/// One line of `/proc/interrupts`: the IRQ, its count per CPU and its description (chip,
/// hardware IRQ, trigger, action names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IrqLine {
    /// The IRQ number or name (`57`, `IPI0`).
    pub irq: String,
    /// Interrupts per CPU, CPU 0 first.
    pub per_cpu: Vec<u64>,
    /// The rest of the line (e.g. `GICv3 152 Level eth0`).
    pub desc: String,
}

/// Parse `/proc/interrupts`: a header of `CPUn` names, then `IRQ: counts… description`.
/// Lines with fewer counts than CPUs (e.g. `ERR:`) keep the counts they have.
pub(crate) fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let ncpu = head
        .split_ascii_whitespace()
        .filter(|c| c.starts_with("CPU"))
        .count();
    lines
        .filter_map(|l| {
            let (irq, rest) = l.split_once(':')?;
            let irq = irq.trim();
            if irq.is_empty() {
                return None;
            }
            let mut per_cpu = Vec::with_capacity(ncpu);
            let mut rest = rest.trim_start();
            while per_cpu.len() < ncpu {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let Ok(n) = rest[..end].parse::<u64>() else {
                    break;
                };
                per_cpu.push(n);
                rest = rest[end..].trim_start();
            }
            Some(IrqLine {
                irq: irq.to_string(),
                per_cpu,
                desc: rest.trim().to_string(),
            })
        })
        .collect()
}

/// Whether an interrupt's description names port `port` as an action: a word that is the
/// port's name or starts with it followed by `-`, `:`, `.` or `@` (`eth0`, `eth0-rx-0`,
/// `eth0-TxRx-1`, `eth0:lsc`), so `eth1` does not match `eth10`.
pub(crate) fn irq_is_port(desc: &str, port: &str) -> bool {
    !port.is_empty()
        && desc
            .split(|c: char| c.is_whitespace() || c == ',')
            .any(|w| match w.strip_prefix(port) {
                Some("") => true,
                Some(r) => r.starts_with(['-', ':', '.', '@']),
                None => false,
            })
}

/// Parse `ethtool -S PORT` text (`NIC statistics:` then `name: value` lines; names may hold
/// spaces and brackets, as dpaa2's `[hw] rx nobuffer discards`). For captured files; the
/// daemon reads the same names and values with the ioctl.
#[cfg(test)]
pub(crate) fn parse_ethtool_s(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (n, v) = l.rsplit_once(':')?;
            let v = v.trim().parse::<u64>().ok()?;
            Some((n.trim().to_string(), v))
        })
        .collect()
}

/// Driver statistics that count frames the NIC (or its driver) dropped on receive: the
/// ring or FIFO was full, or no buffer was free. Names of the common drivers (ixgbe/igb/e1000e
/// `rx_missed_errors`, `rx_no_buffer_count`; mlx5 `rx_out_of_buffer`; fec `IEEE_rx_macerr`,
/// `IEEE_rx_drop`; stmmac/dwmac `rx_missed_cntr`, `rx_overflow_cntr`,
/// `mmc_rx_fifo_overflow`; mvpp2 `rx_fifo_overrun`, `rx_fifo_or_parser_overrun_drops`;
/// dpaa2 `[hw] rx nobuffer discards`, `[hw] rx discarded frames`) and the generic ones.
pub(crate) fn is_nic_rx_drop(name: &str) -> bool {
    const NAMES: [&str; 19] = [
        "rx_missed_errors",
        "rx_missed",
        "rx_fifo_errors",
        "rx_over_errors",
        "rx_no_buffer_count",
        "rx_discards",
        "rx_dropped",
        "rx_out_of_buffer",
        "rx_queue_drops",
        "ieee_rx_macerr",
        "ieee_rx_drop",
        "rx_missed_cntr",
        "rx_overflow_cntr",
        "mmc_rx_fifo_overflow",
        "rx_fifo_overrun",
        "rx_fifo_or_parser_overrun_drops",
        "[hw] rx nobuffer discards",
        "[hw] rx discarded frames",
        "rx_fifo_overflow",
    ];
    let n = name.to_ascii_lowercase();
    NAMES.contains(&n.as_str())
}

/// Ring sizes of a port, descriptors (`ethtool -g`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Rings {
    pub rx: u32,
    pub rx_max: u32,
    pub tx: u32,
    pub tx_max: u32,
}

/// One qdisc's statistics (`tc -s qdisc`): skbs dropped, over the limit, requeued, what it
/// sent, and the backlog (bytes, packets) at the reading.
///
/// Units, as the kernel counts them: `drops`, `overlimits`, `requeues` and `qlen` count skbs
/// (one UDP_SEGMENT/GSO batch of several datagrams is one skb); `sent_packets` counts the
/// segments of what it sent (a GSO skb adds its `gso_segs`: datagrams on the wire) and
/// `sent_bytes` / `backlog_bytes` count each segment with its own headers from the link
/// header up (`qdisc_pkt_len`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Qdisc {
    /// `tbf`, `fq_codel`, `mq`, `pfifo_fast`, …
    pub kind: String,
    /// `major:minor` in hex as tc writes it (`8001:`).
    pub handle: String,
    /// `root`, `ingress`, or the parent's `major:minor`.
    pub parent: String,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    /// Bytes queued at the reading.
    pub backlog_bytes: u64,
    /// Packets queued at the reading.
    pub qlen: u64,
    /// "Sent B bytes": bytes sent, each segment with its headers (Ethernet, IP, UDP).
    /// In a [`PortDelta`]: bytes sent during the run. 0 in rows stored before it was kept.
    #[serde(default)]
    pub sent_bytes: u64,
    /// "Sent … P pkt": segments sent (datagrams, not skbs). In a [`PortDelta`]: during the
    /// run (the kernel's counter is 32 bits: one wrap is undone). 0 in rows stored before.
    #[serde(default)]
    pub sent_packets: u64,
    /// In a [`PortDelta`] only: bytes queued when the run started (`backlog_bytes` is the
    /// end's), so the backlog's change is known.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backlog_start_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Qdisc {
    /// The port's root qdisc (its counters include its children's for mq, tbf, htb…).
    pub(crate) fn is_root(&self) -> bool {
        self.parent == "root"
    }
}

/// Every qdisc of every port of this network namespace, by interface index (one netlink
/// dump, read synchronously). Empty when netlink cannot be read.
pub(crate) fn qdiscs() -> BTreeMap<i32, Vec<Qdisc>> {
    qdiscs_dump().unwrap_or_default()
}

fn qdiscs_dump() -> Option<BTreeMap<i32, Vec<Qdisc>>> {
    use rtnetlink::packet_route::tc::{TcAttribute, TcStats2};
    let mut out: BTreeMap<i32, Vec<Qdisc>> = BTreeMap::new();
    tc_dump(false, 0, |m| {
        let h = &m.header;
        let parent = tc_parent(h);
        let mut q = Qdisc {
            handle: tc_handle(h.handle.major, h.handle.minor),
            parent,
            ..Default::default()
        };
        let mut have_queue = false;
        for a in &m.attributes {
            match a {
                TcAttribute::Kind(k) => q.kind = k.clone(),
                TcAttribute::Stats2(v) => {
                    for s in v {
                        match s {
                            TcStats2::Queue(st) => {
                                q.drops = st.drops.into();
                                q.overlimits = st.overlimits.into();
                                q.requeues = st.requeues.into();
                                q.backlog_bytes = st.backlog.into();
                                q.qlen = st.qlen.into();
                                have_queue = true;
                            }
                            TcStats2::Basic(b) => {
                                q.sent_bytes = b.bytes;
                                q.sent_packets = b.packets.into();
                            }
                            _ => {}
                        }
                    }
                }
                TcAttribute::Stats(st) if !have_queue => {
                    q.sent_bytes = st.bytes;
                    q.sent_packets = st.packets.into();
                    q.drops = st.drops.into();
                    q.overlimits = st.overlimits.into();
                    q.backlog_bytes = st.backlog.into();
                    q.qlen = st.qlen.into();
                }
                _ => {}
            }
        }
        out.entry(h.index).or_default().push(q);
    })?;
    Some(out)
}

/// One core's clock (cpufreq, kHz as sysfs gives it) and governor.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct CpuFreq {
    pub cpu: u32,
    /// `scaling_cur_freq`, kHz.
    pub cur_khz: Option<u64>,
    /// `scaling_min_freq` / `scaling_max_freq`, kHz.
    pub min_khz: Option<u64>,
    pub max_khz: Option<u64>,
    /// `cpuinfo_max_freq`: the most the core can run at, kHz.
    pub hw_max_khz: Option<u64>,
    pub governor: Option<String>,
}

/// One thermal zone: its type, temperature and trip points (°C).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Thermal {
    /// `thermal_zone0` → 0.
    pub zone: u32,
    /// e.g. `cpu-thermal`.
    pub kind: String,
    /// Temperature, °C.
    pub temp_c: Option<f64>,
    /// Trip points: type (`passive`, `active`, `hot`, `critical`) and temperature, °C.
    pub trips: Vec<(String, f64)>,
}

fn read_trim(p: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_num(p: &std::path::Path) -> Option<u64> {
    read_trim(p)?.parse().ok()
}

/// Numbered entries `prefixN` of directory `dir`, sorted by N.
fn numbered(dir: &str, prefix: &str) -> Vec<(u32, std::path::PathBuf)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(u32, std::path::PathBuf)> = rd
        .filter_map(|e| {
            let e = e.ok()?;
            let n = e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    crate::model::order::sort_by_key(&mut v, |(n, _)| *n);
    v
}

/// cpufreq of every core that has it (none in most VMs).
pub(crate) fn cpufreq() -> Vec<CpuFreq> {
    numbered("/sys/devices/system/cpu", "cpu")
        .into_iter()
        .filter_map(|(cpu, p)| {
            let f = p.join("cpufreq");
            if !f.is_dir() {
                return None;
            }
            Some(CpuFreq {
                cpu,
                cur_khz: read_num(&f.join("scaling_cur_freq")),
                min_khz: read_num(&f.join("scaling_min_freq")),
                max_khz: read_num(&f.join("scaling_max_freq")),
                hw_max_khz: read_num(&f.join("cpuinfo_max_freq")),
                governor: read_trim(&f.join("scaling_governor")),
            })
        })
        .collect()
}

/// Every thermal zone (none in most VMs). Temperatures are read in m°C.
pub(crate) fn thermal() -> Vec<Thermal> {
    numbered("/sys/class/thermal", "thermal_zone")
        .into_iter()
        .map(|(zone, p)| {
            let c = |f: &str| {
                read_trim(&p.join(f))?
                    .parse::<i64>()
                    .ok()
                    .map(|m| m as f64 / 1000.0)
            };
            let mut trips = Vec::new();
            for i in 0..16 {
                let (Some(t), Some(k)) = (
                    c(&format!("trip_point_{i}_temp")),
                    read_trim(&p.join(format!("trip_point_{i}_type"))),
                ) else {
                    break;
                };
                trips.push((k, t));
            }
            Thermal {
                zone,
                kind: read_trim(&p.join("type")).unwrap_or_default(),
                temp_c: c("temp"),
                trips,
            }
        })
        .collect()
}

/// One port's counters in a reading.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct PortReading {
    /// The driver's statistics (`ethtool -S`), empty when it has none.
    pub nic: Vec<(String, u64)>,
    pub rings: Option<Rings>,
    /// Root qdisc first, then its children.
    pub qdiscs: Vec<Qdisc>,
    /// `/proc/net/dev` drop counters, packets.
    pub rx_dropped: Option<u64>,
    pub tx_dropped: Option<u64>,
    /// `/proc/net/dev` traffic: bytes and packets each way.
    #[serde(default)]
    pub traffic: Option<Traffic>,
}

/// A port's traffic (`/proc/net/dev`): bytes and packets received and sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Traffic {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
}

/// One reading of all the board's counters (see the module doc).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct BoardReading {
    /// By port name (loopback left out).
    pub ports: BTreeMap<String, PortReading>,
    /// [`SNMP_KEPT`] counters present on this kernel.
    pub snmp: BTreeMap<String, u64>,
    pub softnet: Vec<Softnet>,
    /// `/proc/interrupts` lines of the ports' IRQs (action names one of the ports).
    pub irqs: Vec<IrqLine>,
    pub cpufreq: Vec<CpuFreq>,
    pub thermal: Vec<Thermal>,
    /// `net.core.rmem_max` / `wmem_max`, bytes.
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
}

impl BoardReading {
    /// Read every counter now (a few ms: two ioctls per port, one netlink dump, a dozen small
    /// files). Whatever cannot be read is left out.
    pub(crate) fn take() -> BoardReading {
        let dev = std::fs::read_to_string("/proc/net/dev")
            .map(|s| super::sampler::parse_proc_net_dev(&s))
            .unwrap_or_default();
        let mut names: Vec<&String> = dev.keys().filter(|n| n.as_str() != "lo").collect();
        crate::model::order::sort(&mut names);
        names.truncate(MAX_PORTS);
        let mut qd = qdiscs();
        let mut ports = BTreeMap::new();
        for n in names {
            let c = dev.get(n).copied().unwrap_or_default();
            let idx = nix::net::if_::if_nametoindex(n.as_str())
                .ok()
                .and_then(|i| i32::try_from(i).ok());
            let mut qdiscs = idx.and_then(|i| qd.remove(&i)).unwrap_or_default();
            crate::model::order::sort_by_key(&mut qdiscs, |q| !q.is_root());
            ports.insert(
                n.clone(),
                PortReading {
                    nic: ethtool::stats(n).unwrap_or_default(),
                    rings: ethtool::rings(n).ok().map(|r| Rings {
                        rx: r.rx,
                        rx_max: r.rx_max,
                        tx: r.tx,
                        tx_max: r.tx_max,
                    }),
                    qdiscs,
                    rx_dropped: Some(c.rx_dropped),
                    tx_dropped: Some(c.tx_dropped),
                    traffic: Some(Traffic {
                        rx_bytes: c.rx_bytes,
                        rx_packets: c.rx_packets,
                        tx_bytes: c.tx_bytes,
                        tx_packets: c.tx_packets,
                    }),
                },
            );
        }
        let mut snmp = std::fs::read_to_string("/proc/net/snmp")
            .map(|s| parse_snmp(&s))
            .unwrap_or_default();
        snmp.extend(
            std::fs::read_to_string("/proc/net/netstat")
                .map(|s| parse_snmp(&s))
                .unwrap_or_default(),
        );
        snmp.retain(|k, _| SNMP_KEPT.contains(&k.as_str()));
        let irqs = std::fs::read_to_string("/proc/interrupts")
            .map(|s| parse_interrupts(&s))
            .unwrap_or_default()
            .into_iter()
            .filter(|l| ports.keys().any(|p| irq_is_port(&l.desc, p)))
            .collect();
        let sysctl = |p: &str| read_num(std::path::Path::new(p));
        BoardReading {
            ports,
            snmp,
            softnet: std::fs::read_to_string("/proc/net/softnet_stat")
                .map(|s| parse_softnet(&s))
                .unwrap_or_default(),
            irqs,
            cpufreq: cpufreq(),
            thermal: thermal(),
            rmem_max: sysctl("/proc/sys/net/core/rmem_max"),
            wmem_max: sysctl("/proc/sys/net/core/wmem_max"),
        }
    }

    /// What moved from `before` to `self` over `seconds` (see [`BoardDelta`]).
    pub(crate) fn since(&self, before: &BoardReading, seconds: f64) -> BoardDelta {
        let ports = self
            .ports
            .iter()
            .filter_map(|(name, p)| Some((name.clone(), p.since(before.ports.get(name)?))))
            .collect();
        let snmp = self
            .snmp
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), diff(*before.snmp.get(k)?, *v))))
            .collect();
        let softnet = self
            .softnet
            .iter()
            .filter_map(|s| {
                let o = before.softnet.iter().find(|o| o.cpu == s.cpu)?;
                Some(Softnet {
                    cpu: s.cpu,
                    processed: diff(o.processed, s.processed),
                    dropped: diff(o.dropped, s.dropped),
                    time_squeeze: diff(o.time_squeeze, s.time_squeeze),
                })
            })
            .collect();
        let irqs = self
            .irqs
            .iter()
            .filter_map(|l| {
                let o = before.irqs.iter().find(|o| o.irq == l.irq)?;
                let per_cpu: Vec<u64> = l
                    .per_cpu
                    .iter()
                    .enumerate()
                    .map(|(i, n)| diff(o.per_cpu.get(i).copied().unwrap_or(*n), *n))
                    .collect();
                Some(IrqLine {
                    irq: l.irq.clone(),
                    per_cpu,
                    desc: l.desc.clone(),
                })
            })
            .collect();
        let mhz = |k: Option<u64>| k.map(|k| k as f64 / 1000.0);
        let cpufreq = self
            .cpufreq
            .iter()
            .map(|c| {
                let o = before.cpufreq.iter().find(|o| o.cpu == c.cpu);
                CpuFreqDelta {
                    cpu: c.cpu,
                    start_mhz: mhz(o.and_then(|o| o.cur_khz)),
                    end_mhz: mhz(c.cur_khz),
                    min_mhz: mhz(c.min_khz),
                    max_mhz: mhz(c.max_khz),
                    hw_max_mhz: mhz(c.hw_max_khz),
                    governor: c.governor.clone(),
                }
            })
            .collect();
        let thermal = self
            .thermal
            .iter()
            .map(|t| ThermalDelta {
                zone: t.zone,
                kind: t.kind.clone(),
                start_c: before
                    .thermal
                    .iter()
                    .find(|o| o.zone == t.zone)
                    .and_then(|o| o.temp_c),
                end_c: t.temp_c,
                trips: t.trips.clone(),
            })
            .collect();
        BoardDelta {
            seconds,
            ports,
            snmp,
            softnet,
            irqs,
            cpufreq,
            thermal,
            rmem_max: self.rmem_max,
            wmem_max: self.wmem_max,
            series: None,
        }
    }
}

/// How much a kernel counter grew from `a` to `b` (0 when it went back: reset).
fn diff(a: u64, b: u64) -> u64 {
    b.saturating_sub(a)
}

/// [`diff`] for a 32-bit kernel counter (a qdisc's sent packets) that may have wrapped once.
fn diff32(a: u64, b: u64) -> u64 {
    if b >= a {
        b - a
    } else if a <= u64::from(u32::MAX) && b <= u64::from(u32::MAX) {
        (b + (1u64 << 32)) - a
    } else {
        0
    }
}

impl PortReading {
    /// What moved on this port since `b` (the same port's earlier reading): driver
    /// statistics that grew, each qdisc's counters, drops and traffic.
    fn since(&self, b: &PortReading) -> PortDelta {
        let old: BTreeMap<&str, u64> = b.nic.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let nic: BTreeMap<String, u64> = self
            .nic
            .iter()
            .filter_map(|(k, v)| {
                let x = diff(*old.get(k.as_str())?, *v);
                (x > 0).then(|| (k.clone(), x))
            })
            .collect();
        let qdiscs = self
            .qdiscs
            .iter()
            .map(|q| {
                let o = b
                    .qdiscs
                    .iter()
                    .find(|x| x.handle == q.handle && x.kind == q.kind && x.parent == q.parent);
                match o {
                    // A qdisc replaced during the run started from 0.
                    None => q.clone(),
                    Some(o) => Qdisc {
                        drops: diff(o.drops, q.drops),
                        overlimits: diff(o.overlimits, q.overlimits),
                        requeues: diff(o.requeues, q.requeues),
                        sent_bytes: diff(o.sent_bytes, q.sent_bytes),
                        sent_packets: diff32(o.sent_packets, q.sent_packets),
                        backlog_start_bytes: o.backlog_bytes,
                        ..q.clone()
                    },
                }
            })
            .collect();
        let dd = |a: Option<u64>, b: Option<u64>| Some(diff(a?, b?));
        PortDelta {
            nic,
            rings: self.rings,
            qdiscs,
            rx_dropped: dd(b.rx_dropped, self.rx_dropped),
            tx_dropped: dd(b.tx_dropped, self.tx_dropped),
            traffic: match (b.traffic, self.traffic) {
                (Some(o), Some(n)) => Some(Traffic {
                    rx_bytes: diff(o.rx_bytes, n.rx_bytes),
                    rx_packets: diff(o.rx_packets, n.rx_packets),
                    tx_bytes: diff(o.tx_bytes, n.tx_bytes),
                    tx_packets: diff(o.tx_packets, n.tx_packets),
                }),
                _ => None,
            },
        }
    }
}

/// What moved on one port during a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct PortDelta {
    /// Driver statistics that moved, by name: increase.
    #[serde(default)]
    pub nic: BTreeMap<String, u64>,
    /// Ring sizes at the end of the run.
    #[serde(default)]
    pub rings: Option<Rings>,
    /// Every qdisc with its drops, overlimits and requeues during the run; backlog and
    /// qlen as at the end.
    #[serde(default)]
    pub qdiscs: Vec<Qdisc>,
    /// `/proc/net/dev` drop increases.
    #[serde(default)]
    pub rx_dropped: Option<u64>,
    #[serde(default)]
    pub tx_dropped: Option<u64>,
    /// `/proc/net/dev` traffic during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
}

impl PortDelta {
    /// The port's root qdisc (its counters include its children's).
    pub(crate) fn root_qdisc(&self) -> Option<&Qdisc> {
        self.qdiscs.iter().find(|q| q.is_root())
    }

    /// Drops of the port's root qdisc (which include its children's; skbs, see [`Qdisc`]) and
    /// the qdisc's kind.
    #[cfg(test)]
    pub(crate) fn root_qdisc_drops(&self) -> Option<(&str, u64)> {
        self.qdiscs
            .iter()
            .find(|q| q.is_root())
            .map(|q| (q.kind.as_str(), q.drops))
    }

    /// The NIC's receive drops: the largest of the driver's drop counters that moved (drivers
    /// often count one drop in two of them, so they are not added), else `/proc/net/dev`
    /// rx_dropped; with the counter's name.
    pub(crate) fn nic_rx_drops(&self) -> Option<(String, u64)> {
        let best = self
            .nic
            .iter()
            .filter(|(k, v)| is_nic_rx_drop(k) && **v > 0)
            .max_by_key(|(_, v)| **v)
            .map(|(k, v)| (k.clone(), *v));
        best.or_else(|| {
            self.rx_dropped
                .filter(|d| *d > 0)
                .map(|d| ("rx_dropped (/proc/net/dev)".to_string(), d))
        })
    }
}

/// A core's clock at the start and end of a run, MHz, and its limits and governor.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct CpuFreqDelta {
    pub cpu: u32,
    pub start_mhz: Option<f64>,
    pub end_mhz: Option<f64>,
    /// scaling_min / scaling_max, MHz.
    pub min_mhz: Option<f64>,
    pub max_mhz: Option<f64>,
    /// cpuinfo_max_freq, MHz.
    pub hw_max_mhz: Option<f64>,
    pub governor: Option<String>,
}

/// A thermal zone at the start and end of a run, °C, with its trip points.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct ThermalDelta {
    pub zone: u32,
    pub kind: String,
    pub start_c: Option<f64>,
    pub end_c: Option<f64>,
    pub trips: Vec<(String, f64)>,
}

/// The board's counters over one run: increases of every counter kept (see the module doc),
/// clocks and temperatures at start and end. Stored with the run (`board` in its JSON).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct BoardDelta {
    /// Time between the two readings, s.
    pub seconds: f64,
    #[serde(default)]
    pub ports: BTreeMap<String, PortDelta>,
    /// Increases of [`SNMP_KEPT`], by `Table.Name`.
    #[serde(default)]
    pub snmp: BTreeMap<String, u64>,
    /// Per CPU: increases of processed, dropped, time_squeeze.
    #[serde(default)]
    pub softnet: Vec<Softnet>,
    /// The ports' IRQs: increase per CPU.
    #[serde(default)]
    pub irqs: Vec<IrqLine>,
    #[serde(default)]
    pub cpufreq: Vec<CpuFreqDelta>,
    #[serde(default)]
    pub thermal: Vec<ThermalDelta>,
    /// `net.core.rmem_max` / `wmem_max` at the end, bytes.
    #[serde(default)]
    pub rmem_max: Option<u64>,
    #[serde(default)]
    pub wmem_max: Option<u64>,
    /// The per-second series of the fast counters (`None` when the run was not sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Series>,
}

impl BoardDelta {
    /// A counter of [`SNMP_KEPT`] that moved, e.g. `snmp("Udp.RcvbufErrors")`.
    pub(crate) fn snmp(&self, key: &str) -> u64 {
        self.snmp.get(key).copied().unwrap_or(0)
    }

    /// Softnet drops summed over CPUs.
    pub(crate) fn softnet_dropped(&self) -> u64 {
        self.softnet.iter().map(|s| s.dropped).sum()
    }
}

/// The few counters that change fast, read by the 1 Hz sampler every second (the per-second
/// series of a run, [`Series`]): each port's root qdisc drops and NIC receive drop counters,
/// softnet drops, each core's clock and each thermal zone's temperature.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FastReading {
    /// Root qdisc drops by port.
    pub qdisc_drops: BTreeMap<String, u64>,
    /// By port: the driver's receive drop counters ([`is_nic_rx_drop`]) and, last,
    /// `/proc/net/dev` rx_dropped under the name `""`.
    pub nic_rx_drops: BTreeMap<String, Vec<(String, u64)>>,
    /// Softnet drops summed over CPUs.
    pub softnet_dropped: u64,
    /// Each core's clock, MHz.
    pub mhz: Vec<f64>,
    /// Each thermal zone's temperature, °C.
    pub temp_c: Vec<f64>,
}

impl FastReading {
    /// Read them now for `ports` (interface names; loopback and names beyond the first
    /// 32 are skipped). `dev_rx_dropped` is `/proc/net/dev`'s rx_dropped by port, which the
    /// sampler has read already.
    pub fn take(ports: &[&String], dev_rx_dropped: &BTreeMap<String, u64>) -> FastReading {
        let mut qd = qdiscs();
        let mut r = FastReading::default();
        for n in ports.iter().filter(|n| n.as_str() != "lo").take(MAX_PORTS) {
            let idx = nix::net::if_::if_nametoindex(n.as_str())
                .ok()
                .and_then(|i| i32::try_from(i).ok());
            if let Some(q) = idx
                .and_then(|i| qd.remove(&i))
                .and_then(|v| v.into_iter().find(Qdisc::is_root))
            {
                r.qdisc_drops.insert((*n).clone(), q.drops);
            }
            let mut v: Vec<(String, u64)> = ethtool::stats(n)
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| is_nic_rx_drop(k))
                .collect();
            if let Some(d) = dev_rx_dropped.get(*n) {
                v.push((String::new(), *d));
            }
            r.nic_rx_drops.insert((*n).clone(), v);
        }
        r.softnet_dropped = std::fs::read_to_string("/proc/net/softnet_stat")
            .map(|s| parse_softnet(&s).iter().map(|c| c.dropped).sum())
            .unwrap_or(0);
        r.mhz = numbered("/sys/devices/system/cpu", "cpu")
            .into_iter()
            .filter_map(|(_, p)| read_num(&p.join("cpufreq/scaling_cur_freq")))
            .map(|k| k as f64 / 1000.0)
            .collect();
        r.temp_c = numbered("/sys/class/thermal", "thermal_zone")
            .into_iter()
            .filter_map(|(_, p)| read_trim(&p.join("temp"))?.parse::<i64>().ok())
            .map(|m| m as f64 / 1000.0)
            .collect();
        r
    }
}

/// A run's per-second series of the fast counters ([`FastReading`]), over the run's ports:
/// drops in each second (qdisc, NIC, softnet), the slowest core's clock and the hottest zone.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Series {
    /// Seconds since the run started.
    pub t: Vec<f64>,
    /// Root qdisc drops on the run's ports, packets in the second.
    pub qdisc_drops: Vec<u64>,
    /// NIC receive drops on the run's ports (the largest drop counter of each port).
    pub nic_rx_drops: Vec<u64>,
    /// Softnet drops, all CPUs.
    pub softnet_dropped: Vec<u64>,
    /// The slowest core's clock, MHz (`None` without cpufreq).
    pub mhz_min: Vec<Option<f64>>,
    /// The hottest thermal zone, °C (`None` without thermal zones).
    pub temp_max_c: Vec<Option<f64>>,
}

/// At most this many points per series (a day at 1 Hz); later seconds are not added.
pub(crate) const MAX_SERIES: usize = 86_400;

impl Series {
    /// Add the second from `prev` to `cur` at `t` (s since the run started) over `ports`.
    /// Counters that went backwards give 0.
    pub(crate) fn push(&mut self, t: f64, prev: &FastReading, cur: &FastReading, ports: &[String]) {
        if self.t.len() >= MAX_SERIES {
            return;
        }
        let d = |a: u64, b: u64| b.saturating_sub(a);
        let mut q = 0;
        let mut nic = 0;
        for p in ports {
            if let (Some(a), Some(b)) = (prev.qdisc_drops.get(p), cur.qdisc_drops.get(p)) {
                q += d(*a, *b);
            }
            if let (Some(a), Some(b)) = (prev.nic_rx_drops.get(p), cur.nic_rx_drops.get(p)) {
                let moved = |driver: bool| {
                    b.iter()
                        .filter(|(k, _)| k.is_empty() != driver)
                        .filter_map(|(k, v)| {
                            a.iter().find(|(ka, _)| ka == k).map(|(_, va)| d(*va, *v))
                        })
                        .max()
                        .unwrap_or(0)
                };
                let driver = moved(true);
                nic += if driver > 0 { driver } else { moved(false) };
            }
        }
        self.t.push(t);
        self.qdisc_drops.push(q);
        self.nic_rx_drops.push(nic);
        self.softnet_dropped
            .push(d(prev.softnet_dropped, cur.softnet_dropped));
        self.mhz_min.push(cur.mhz.iter().copied().reduce(f64::min));
        self.temp_max_c
            .push(cur.temp_c.iter().copied().reduce(f64::max));
    }
}

/// What a port's NIC is (the Ports page's facts panel): driver and firmware (`ethtool -i`),
/// ring sizes (`ethtool -g`), offloads on/off (`ethtool -k`) and each of the port's IRQs
/// with the CPUs it may run on (`/proc/irq/N/smp_affinity_list`). What the driver or kernel
/// does not give is absent (`None`, empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct NicFacts {
    pub driver: Option<String>,
    pub firmware: Option<String>,
    pub rings: Option<Rings>,
    /// (offload, on), e.g. ("gro", true).
    pub offloads: Vec<(String, bool)>,
    /// (IRQ, CPU list as the kernel writes it, e.g. "0-3").
    pub irqs: Vec<(String, String)>,
}

/// The NIC facts of port `name` (see [`NicFacts`]); a few ioctls and small files.
pub(crate) fn nic_facts(name: &str) -> NicFacts {
    let (driver, firmware) = match ethtool::drvinfo(name) {
        Ok((d, f)) => ((!d.is_empty()).then_some(d), f),
        Err(_) => (None, None),
    };
    let irqs = std::fs::read_to_string("/proc/interrupts")
        .map(|t| parse_interrupts(&t))
        .unwrap_or_default()
        .into_iter()
        .filter(|l| irq_is_port(&l.desc, name) && l.irq.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|l| {
            let cpus =
                std::fs::read_to_string(format!("/proc/irq/{}/smp_affinity_list", l.irq)).ok()?;
            Some((l.irq, cpus.trim().to_string()))
        })
        .collect();
    NicFacts {
        driver,
        firmware,
        rings: ethtool::rings(name).ok().map(|r| Rings {
            rx: r.rx,
            rx_max: r.rx_max,
            tx: r.tx,
            tx_max: r.tx_max,
        }),
        offloads: ethtool::offloads(name)
            .into_iter()
            .map(|(k, on)| (k.to_string(), on))
            .collect(),
        irqs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(name: &str) -> String {
        let p = format!("{}/tests/vectors/board/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn snmp_and_netstat_pairs() {
        let m = parse_snmp(&vector("proc-net-snmp.txt"));
        assert_eq!(m["Udp.InDatagrams"], 4_118_259);
        assert_eq!(m["Udp.RcvbufErrors"], 9870);
        assert_eq!(m["Udp.InErrors"], 9871);
        assert_eq!(m["Udp.SndbufErrors"], 12);
        assert_eq!(m["Udp.InCsumErrors"], 1);
        assert_eq!(m["Tcp.RetransSegs"], 5423);
        assert!(!m.contains_key("Tcp.MaxConn"), "-1 is not a counter");
        assert_eq!(m["UdpLite.InErrors"], 0);
        let n = parse_snmp(&vector("proc-net-netstat.txt"));
        assert_eq!(n["TcpExt.TCPBacklogDrop"], 3);
        assert_eq!(n["TcpExt.ListenOverflows"], 17);
        assert_eq!(n["TcpExt.ListenDrops"], 17);
        assert_eq!(n["IpExt.InOctets"], 5_873_121_145);
        // Mismatched pairs and garbage are skipped, not misread.
        let bad = parse_snmp("Udp: A B\nUdp: 1\nTcp: 1 2\nTcp: X Y\nIp: F\nIcmp: 1\n");
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn softnet_with_13_and_11_columns() {
        // Linux 6.1 on a 4-core Cortex-A72 (13 columns: the last is the CPU index; CPU 2
        // offline, so line 2 is CPU 3).
        let v = parse_softnet(&vector("softnet_stat-13col.txt"));
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].cpu, 0);
        assert_eq!(v[0].processed, 0x0017_8e2a);
        assert_eq!(v[0].dropped, 0x1f4);
        assert_eq!(v[0].time_squeeze, 0x2a);
        assert_eq!(v[2].cpu, 3, "the index column, not the line number");
        assert_eq!(v[2].processed, 0x3c1);
        // Linux 4.19 (11 columns): the line number is the CPU.
        let w = parse_softnet(&vector("softnet_stat-11col.txt"));
        assert_eq!(w.len(), 2);
        assert_eq!(w[1].cpu, 1);
        assert_eq!(w[1].processed, 0x0a8c_16f2);
        assert_eq!(w[1].dropped, 0);
        assert_eq!(w[1].time_squeeze, 0x1c5);
        assert!(parse_softnet("zz 1 2\n1 2\n").is_empty());
    }

    #[test]
    fn interrupts_of_an_arm64_board_with_gicv3_names() {
        let v = parse_interrupts(&vector("interrupts-arm64-gicv3.txt"));
        let l = v.iter().find(|l| l.irq == "11").expect("arch_timer");
        assert_eq!(l.per_cpu, vec![3_275_131, 1_204_466, 998_301, 1_110_934]);
        assert_eq!(l.desc, "GICv3  30 Level     arch_timer");
        let eth0: Vec<&IrqLine> = v.iter().filter(|l| irq_is_port(&l.desc, "eth0")).collect();
        assert_eq!(
            eth0.iter().map(|l| l.irq.as_str()).collect::<Vec<_>>(),
            ["57", "58"]
        );
        assert_eq!(eth0[0].per_cpu, vec![18_204_311, 0, 0, 0]);
        // eth1 (mvpp2 per-queue names) is not eth10's, and not eth0's.
        let eth1: Vec<&str> = v
            .iter()
            .filter(|l| irq_is_port(&l.desc, "eth1"))
            .map(|l| l.irq.as_str())
            .collect();
        assert_eq!(eth1, ["60", "61"]);
        assert!(!irq_is_port("GICv3 99 Level eth10", "eth1"));
        assert!(irq_is_port("ITS-MSI 524288 Edge eth0-TxRx-0", "eth0"));
        // IPI lines and ERR keep their counts.
        let ipi = v.iter().find(|l| l.irq == "IPI0").expect("IPI0");
        assert_eq!(ipi.per_cpu.len(), 4);
        assert!(ipi.desc.starts_with("Rescheduling"));
        let err = v.iter().find(|l| l.irq == "Err").expect("Err");
        assert_eq!(err.per_cpu, vec![0]);
    }

    #[test]
    fn ethtool_s_of_fec_dwmac_mvpp2_dpaa2() {
        let drops = |f: &str| -> Vec<(String, u64)> {
            parse_ethtool_s(&vector(f))
                .into_iter()
                .filter(|(n, _)| is_nic_rx_drop(n))
                .collect()
        };
        let fec = parse_ethtool_s(&vector("ethtool-S-fec.txt"));
        assert_eq!(fec.len(), 60);
        assert_eq!(fec[0], ("tx_dropped".to_string(), 0));
        assert_eq!(
            drops("ethtool-S-fec.txt"),
            [
                ("IEEE_rx_drop".to_string(), 0),
                ("IEEE_rx_macerr".to_string(), 5000)
            ]
        );
        assert_eq!(
            drops("ethtool-S-dwmac.txt"),
            [
                ("mmc_rx_fifo_overflow".to_string(), 1234),
                ("rx_missed_cntr".to_string(), 1234),
                ("rx_overflow_cntr".to_string(), 0)
            ]
        );
        let mv = parse_ethtool_s(&vector("ethtool-S-mvpp2.txt"));
        assert!(mv
            .iter()
            .any(|(n, v)| n == "rxq_0_desc_enqueue" && *v == 91_237));
        assert_eq!(
            drops("ethtool-S-mvpp2.txt"),
            [
                ("rx_fifo_overrun".to_string(), 77),
                ("rx_fifo_or_parser_overrun_drops".to_string(), 77)
            ]
        );
        // dpaa2's names hold spaces and brackets.
        assert_eq!(
            drops("ethtool-S-dpaa2.txt"),
            [
                ("[hw] rx discarded frames".to_string(), 0),
                ("[hw] rx nobuffer discards".to_string(), 31_337)
            ]
        );
    }

    #[test]
    fn deltas_take_the_largest_nic_drop_counter_and_the_root_qdisc() {
        let q = |drops, parent: &str| Qdisc {
            kind: "tbf".into(),
            handle: "8001:".into(),
            parent: parent.into(),
            drops,
            ..Default::default()
        };
        let mut a = BoardReading::default();
        a.ports.insert(
            "eth0".into(),
            PortReading {
                nic: vec![
                    ("rx_missed_cntr".into(), 10),
                    ("mmc_rx_fifo_overflow".into(), 10),
                ],
                qdiscs: vec![q(100, "root")],
                rx_dropped: Some(5),
                ..Default::default()
            },
        );
        a.snmp.insert("Udp.RcvbufErrors".into(), 7);
        a.softnet = vec![Softnet {
            cpu: 0,
            processed: 10,
            dropped: 1,
            time_squeeze: 0,
        }];
        let mut b = a.clone();
        let p = b.ports.get_mut("eth0").unwrap();
        p.nic = vec![
            ("rx_missed_cntr".into(), 510),
            ("mmc_rx_fifo_overflow".into(), 490),
        ];
        p.qdiscs = vec![q(12_101, "root")];
        b.snmp.insert("Udp.RcvbufErrors".into(), 9877);
        b.softnet[0].dropped = 4;
        let d = b.since(&a, 3.0);
        let e = &d.ports["eth0"];
        assert_eq!(e.root_qdisc_drops(), Some(("tbf", 12_001)));
        assert_eq!(e.nic_rx_drops(), Some(("rx_missed_cntr".to_string(), 500)));
        assert_eq!(d.snmp("Udp.RcvbufErrors"), 9870);
        assert_eq!(d.softnet_dropped(), 3);
        // A counter that went backwards (driver reset) is 0, not 2^64 - x.
        let back = a.since(&b, 3.0);
        assert_eq!(back.snmp("Udp.RcvbufErrors"), 0);
        assert_eq!(back.ports["eth0"].nic_rx_drops(), None);
        // No driver counter: /proc/net/dev's rx_dropped.
        let mut c = b.clone();
        let p = c.ports.get_mut("eth0").unwrap();
        p.nic.clear();
        p.rx_dropped = Some(45);
        let mut a2 = a.clone();
        a2.ports.get_mut("eth0").unwrap().nic.clear();
        assert_eq!(
            c.since(&a2, 1.0).ports["eth0"].nic_rx_drops(),
            Some(("rx_dropped (/proc/net/dev)".to_string(), 40))
        );
        // The stored form reads back.
        let j = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<BoardDelta>(&j).unwrap(), d);
    }

    #[test]
    fn a_qdisc_s_sent_counters_and_backlog_over_a_run() {
        // tc -s of a TBF before and after a run: "Sent 1,000 bytes 10 pkt … backlog 0b"
        // then 62,044,600 bytes in 41,650 segments with 2,980 bytes queued; its 32-bit packet
        // counter may wrap once.
        let q = |sent_bytes, sent_packets, backlog_bytes| Qdisc {
            kind: "tbf".into(),
            handle: "8001:".into(),
            parent: "root".into(),
            sent_bytes,
            sent_packets,
            backlog_bytes,
            ..Default::default()
        };
        let port = |q: Qdisc| PortReading {
            qdiscs: vec![q],
            ..Default::default()
        };
        let mut a = BoardReading::default();
        a.ports.insert("eth0".into(), port(q(1_000, 10, 0)));
        let mut b = BoardReading::default();
        b.ports
            .insert("eth0".into(), port(q(62_044_600, 41_650, 2_980)));
        let d = b.since(&a, 3.0);
        let r = d.ports["eth0"].root_qdisc().expect("root");
        assert_eq!((r.sent_bytes, r.sent_packets), (62_043_600, 41_640));
        assert_eq!((r.backlog_start_bytes, r.backlog_bytes), (0, 2_980));
        a.ports
            .insert("eth0".into(), port(q(0, u64::from(u32::MAX) - 9, 1_490)));
        b.ports.insert("eth0".into(), port(q(0, 41_630, 0)));
        let r = b.since(&a, 3.0).ports["eth0"].qdiscs[0].clone();
        assert_eq!(r.sent_packets, 41_640, "one wrap of the 32-bit counter");
        assert_eq!(r.backlog_start_bytes, 1_490);
        // A stored delta from before the sent counters were kept reads back with 0.
        let old: Qdisc =
            serde_json::from_value(serde_json::json!({"kind": "tbf", "handle": "8001:",
            "parent": "root", "drops": 5, "overlimits": 0, "requeues": 0, "backlog_bytes": 0,
            "qlen": 0}))
            .expect("old row");
        assert_eq!((old.sent_bytes, old.sent_packets, old.drops), (0, 0, 5));
    }

    #[test]
    fn series_of_the_fast_counters() {
        let ports = vec!["eth0".to_string()];
        let a = FastReading {
            qdisc_drops: [("eth0".to_string(), 100), ("eth1".to_string(), 5)].into(),
            nic_rx_drops: [(
                "eth0".to_string(),
                vec![
                    ("rx_missed_cntr".to_string(), 10),
                    ("mmc_rx_fifo_overflow".to_string(), 10),
                    (String::new(), 3),
                ],
            )]
            .into(),
            softnet_dropped: 7,
            mhz: vec![1800.0, 1800.0],
            temp_c: vec![60.5, 48.0],
        };
        let mut b = a.clone();
        b.qdisc_drops.insert("eth0".into(), 4100);
        b.qdisc_drops.insert("eth1".into(), 900);
        b.nic_rx_drops.insert(
            "eth0".into(),
            vec![
                ("rx_missed_cntr".to_string(), 510),
                ("mmc_rx_fifo_overflow".to_string(), 400),
                (String::new(), 1000),
            ],
        );
        b.softnet_dropped = 9;
        b.mhz = vec![1800.0, 800.0];
        let mut s = Series::default();
        s.push(1.0, &a, &b, &ports);
        // Only the run's port; the driver's largest counter, not /proc/net/dev's.
        assert_eq!(s.qdisc_drops, [4000]);
        assert_eq!(s.nic_rx_drops, [500]);
        assert_eq!(s.softnet_dropped, [2]);
        assert_eq!(s.mhz_min, [Some(800.0)]);
        assert_eq!(s.temp_max_c, [Some(60.5)]);
        // Backwards (reset) is 0; no cpufreq or thermal is None; no driver counter moved:
        // /proc/net/dev's.
        let mut c = a.clone();
        c.mhz.clear();
        c.temp_c.clear();
        c.nic_rx_drops
            .get_mut("eth0")
            .unwrap()
            .last_mut()
            .unwrap()
            .1 = 13;
        s.push(2.0, &b, &a, &ports);
        s.push(3.0, &a, &c, &ports);
        assert_eq!(s.qdisc_drops, [4000, 0, 0]);
        assert_eq!(s.nic_rx_drops, [500, 0, 10]);
        assert_eq!(s.mhz_min[2], None);
        assert_eq!(s.temp_max_c[2], None);
        assert_eq!(s.t, [1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_live_reading_in_this_namespace() {
        let a = BoardReading::take();
        assert!(!a.ports.contains_key("lo"));
        assert!(a.snmp.contains_key("Udp.RcvbufErrors"), "{:?}", a.snmp);
        assert!(!a.softnet.is_empty());
        assert!(a.rmem_max.is_some_and(|v| v > 0));
        // Every port's root qdisc comes first.
        for p in a.ports.values() {
            assert!(p.qdiscs.iter().skip(1).all(|q| !q.is_root()));
        }
    }
}
