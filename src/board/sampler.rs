//! The board monitor: CPU time per core from `/proc/stat`, port counters from `/proc/net/dev`
//! (both follow the reader's network namespace), link speed and MTU from sysfs, the
//! conntrack entry count, and the fast board counters of a run's per-second series
//! ([`crate::board::counters::FastReading`]: qdisc, NIC and softnet drops, clocks,
//! temperatures). The board's one 1 Hz loop is [`Sampler`]: each second it takes a
//! [`Snapshot`] (which the runs' monitor, [`crate::runs::monitor::Monitor`], turns into each
//! active run's samples) and, on the daemon's board, reads the netlink port inventory whose rates the
//! Ports page shows ([`PortSampler`]). Not for: deciding what the numbers mean (see
//! [`crate::results::analysis`]).

use crate::board::counters::FastReading;
use crate::board::links::{self, PortSampler};
use crate::store::{CpuSampleRow, PortSampleRow};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Seconds between two readings of [`Sampler`]: 1 s.
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// The board's one 1 Hz sampler. Every [`SAMPLE_PERIOD`] it takes a [`Snapshot`] (CPU per
/// core and every port's counters, from /proc) and publishes it to [`Sampler::subscribe`]rs;
/// when [`Sampler::read_inventory`] was asked (the daemon's board controller), it also reads
/// the netlink port inventory into [`Sampler::ports`] (each port's rates between its last two
/// readings, for the Ports page). The loop runs on the runtime given to [`Sampler::start`]
/// for as long as the sampler exists (it holds only a weak reference).
pub struct Sampler {
    latest: watch::Sender<Option<Arc<Snapshot>>>,
    ports: PortSampler,
    inventory: AtomicBool,
    started: AtomicBool,
}

impl Sampler {
    /// A sampler that has not started (no readings until [`Sampler::start`]).
    pub fn new() -> Arc<Sampler> {
        Arc::new(Sampler {
            latest: watch::channel(None).0,
            ports: PortSampler::default(),
            inventory: AtomicBool::new(false),
            started: AtomicBool::new(false),
        })
    }

    /// The port inventory and rates of the last readings (empty unless
    /// [`Sampler::read_inventory`] was asked and the loop has run).
    pub fn ports(&self) -> &PortSampler {
        &self.ports
    }

    /// Also read the netlink port inventory every second (the daemon's board does; one-shot
    /// CLI runs only need the /proc snapshot).
    pub fn read_inventory(&self) {
        self.inventory.store(true, Ordering::SeqCst);
    }

    /// Readings as they are taken: the receiver sees each new [`Snapshot`] (`None` before
    /// the first).
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<Snapshot>>> {
        self.latest.subscribe()
    }

    /// Start the loop on `rt`; a second call does nothing.
    pub fn start(self: &Arc<Self>, rt: &tokio::runtime::Handle) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = Arc::downgrade(self);
        crate::engine::task::spawn_on(rt, async move {
            let mut t = tokio::time::interval(SAMPLE_PERIOD);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                t.tick().await;
                let Ok(snap) = crate::engine::task::spawn_blocking(Snapshot::take).await else {
                    return;
                };
                let Some(s) = me.upgrade() else { return };
                if s.inventory.load(Ordering::SeqCst) {
                    match links::inventory().await {
                        Ok(l) => s.ports.sample(l, Instant::now()),
                        Err(e) => tracing::debug!("port sampler: {e}"),
                    }
                }
                s.latest.send_replace(Some(Arc::new(snap)));
            }
        });
    }
}

/// Cumulative CPU time of one `/proc/stat` line, in jiffies (USER_HZ ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTimes {
    /// All ticks. `guest` and `guest_nice` are already inside `user`/`nice` (proc(5)), so
    /// they are not added again.
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

/// Parse `/proc/stat`: the `cpu` line (index -1) and every `cpuN` line (index N). Lines with
/// fewer than 4 numbers or non-numeric fields are skipped; missing later fields (old kernels)
/// count as 0.
pub(crate) fn parse_proc_stat(text: &str) -> Vec<(i32, CpuTimes)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(rest) = name.strip_prefix("cpu") else {
            continue;
        };
        let idx = if rest.is_empty() {
            -1
        } else {
            match rest.parse::<i32>() {
                Ok(n) if n >= 0 => n,
                _ => continue,
            }
        };
        let nums: Result<Vec<u64>, _> = f.map(str::parse::<u64>).collect();
        let Ok(n) = nums else { continue };
        if n.len() < 4 {
            continue;
        }
        let g = |i: usize| n.get(i).copied().unwrap_or(0);
        out.push((
            idx,
            CpuTimes {
                user: g(0),
                nice: g(1),
                system: g(2),
                idle: g(3),
                iowait: g(4),
                irq: g(5),
                softirq: g(6),
                steal: g(7),
                guest: g(8),
                guest_nice: g(9),
            },
        ));
    }
    out
}

/// Shares of one core's time between two readings, percent (they add up to 100; all 0 except
/// `idle` = 100 when no tick passed or the counters went backwards, e.g. a CPU hot-plugged).
/// `t` is the sample's time stamp (seconds since the run started).
pub(crate) fn cpu_shares(t: f64, cpu: i32, prev: &CpuTimes, cur: &CpuTimes) -> CpuSampleRow {
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let total = cur.total().saturating_sub(prev.total()) as f64;
    if total <= 0.0 || cur.total() < prev.total() {
        return CpuSampleRow {
            t,
            cpu,
            idle: 100.0,
            ..Default::default()
        };
    }
    let p = |v: f64| v * 100.0 / total;
    CpuSampleRow {
        t,
        cpu,
        user: p(d(prev.user, cur.user) + d(prev.nice, cur.nice)),
        system: p(d(prev.system, cur.system)),
        iowait: p(d(prev.iowait, cur.iowait)),
        irq: p(d(prev.irq, cur.irq)),
        softirq: p(d(prev.softirq, cur.softirq)),
        steal: p(d(prev.steal, cur.steal)),
        idle: p(d(prev.idle, cur.idle)),
    }
}

/// Cumulative counters of one port (bytes, packets, errors, drops), as in `/proc/net/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// Parse `/proc/net/dev` (two header lines, then `name: 16 numbers`). Malformed lines are
/// skipped.
pub(crate) fn parse_proc_net_dev(text: &str) -> HashMap<String, PortCounters> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let nums: Result<Vec<u64>, _> = rest.split_ascii_whitespace().map(str::parse).collect();
        let Ok(n) = nums else { continue };
        if n.len() < 12 {
            continue;
        }
        out.insert(
            name.trim().to_string(),
            PortCounters {
                rx_bytes: n[0],
                rx_packets: n[1],
                rx_errors: n[2],
                rx_dropped: n[3],
                tx_bytes: n[8],
                tx_packets: n[9],
                tx_errors: n[10],
                tx_dropped: n[11],
            },
        );
    }
    out
}

/// Counter differences of one port between two readings over `seconds`. A counter that went
/// backwards (driver reset, port re-created) gives 0, not a huge wrapped value.
pub(crate) fn port_delta(
    t: f64,
    ifname: &str,
    seconds: f64,
    prev: &PortCounters,
    cur: &PortCounters,
) -> PortSampleRow {
    let d = |a: u64, b: u64| b.saturating_sub(a).min(i64::MAX as u64) as i64;
    PortSampleRow {
        t,
        ifname: ifname.to_string(),
        seconds,
        rx_bytes: d(prev.rx_bytes, cur.rx_bytes),
        tx_bytes: d(prev.tx_bytes, cur.tx_bytes),
        rx_packets: d(prev.rx_packets, cur.rx_packets),
        tx_packets: d(prev.tx_packets, cur.tx_packets),
        rx_errors: d(prev.rx_errors, cur.rx_errors),
        tx_errors: d(prev.tx_errors, cur.tx_errors),
        rx_dropped: d(prev.rx_dropped, cur.rx_dropped),
        tx_dropped: d(prev.tx_dropped, cur.tx_dropped),
        speed_mbps: None,
        mtu: None,
    }
}

/// One reading of the board: every CPU line and every port's counters, and the fast board
/// counters of the per-second series (qdisc, NIC and softnet drops, clocks, temperatures).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    pub cpus: Vec<(i32, CpuTimes)>,
    pub ports: HashMap<String, PortCounters>,
    pub fast: FastReading,
}

impl Snapshot {
    /// Read `/proc/stat` and `/proc/net/dev` now. A file that cannot be read gives an empty
    /// part (the monitor then stores nothing for it).
    pub fn take() -> Snapshot {
        let cpus = std::fs::read_to_string("/proc/stat")
            .map(|s| parse_proc_stat(&s))
            .unwrap_or_default();
        let ports = std::fs::read_to_string("/proc/net/dev")
            .map(|s| parse_proc_net_dev(&s))
            .unwrap_or_default();
        let mut names: Vec<&String> = ports.keys().collect();
        crate::model::order::sort(&mut names);
        let dropped = ports
            .iter()
            .map(|(k, c)| (k.clone(), c.rx_dropped))
            .collect();
        let fast = FastReading::take(&names, &dropped);
        Snapshot {
            at: Instant::now(),
            cpus,
            ports,
            fast,
        }
    }

    /// CPU shares of every line between `prev` and `self`, the all-cores line (-1) first.
    pub fn cpu_since(&self, prev: &Snapshot, t: f64) -> Vec<CpuSampleRow> {
        let before: HashMap<i32, &CpuTimes> = prev.cpus.iter().map(|(i, c)| (*i, c)).collect();
        let mut v: Vec<CpuSampleRow> = self
            .cpus
            .iter()
            .filter_map(|(i, c)| before.get(i).map(|p| cpu_shares(t, *i, p, c)))
            .collect();
        crate::model::order::sort_by_key(&mut v, |s| s.cpu);
        v
    }

    /// Counter differences of the named ports between `prev` and `self`, with link speed and
    /// MTU; ports missing from either reading are left out.
    pub fn ports_since(&self, prev: &Snapshot, t: f64, names: &[String]) -> Vec<PortSampleRow> {
        let secs = self.at.saturating_duration_since(prev.at).as_secs_f64();
        names
            .iter()
            .filter_map(|n| {
                let (a, b) = (prev.ports.get(n)?, self.ports.get(n)?);
                let mut s = port_delta(t, n, secs, a, b);
                let (speed, mtu) = link_speed_mtu(n);
                s.speed_mbps = speed;
                s.mtu = mtu;
                Some(s)
            })
            .collect()
    }
}

/// Link speed (Mbit/s) and MTU (bytes) of a port from sysfs. sysfs shows the network
/// namespace it was mounted in, so the values are used only when its `ifindex` matches the
/// index this process sees for the name; speed is `None` when unknown: no carrier (the
/// kernel reports -1 or an error) or a virtual port without a device (veth reports a fixed
/// 10000 that says nothing about the path).
pub(crate) fn link_speed_mtu(ifname: &str) -> (Option<i64>, Option<i64>) {
    if !crate::model::names::valid_ifname(ifname) {
        return (None, None);
    }
    let read = |f: &str| -> Option<i64> {
        std::fs::read_to_string(format!("/sys/class/net/{ifname}/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let Ok(idx) = nix::net::if_::if_nametoindex(ifname) else {
        return (None, None);
    };
    if read("ifindex") != Some(i64::from(idx)) {
        return (None, None);
    }
    // Virtual ports (veth, bridges, tunnels) have no `device` link; their "speed" is a
    // made-up constant (veth says 10000), so it stays unknown.
    let hardware = std::path::Path::new(&format!("/sys/class/net/{ifname}/device")).exists();
    (read("speed").filter(|s| *s > 0 && hardware), read("mtu"))
}

/// Entries in the conntrack table, if the module is loaded (`nf_conntrack_count`).
pub(crate) fn conntrack_count() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The port that holds local address `addr`, if any (getifaddrs). An IPv4-mapped IPv6
/// address (`::ffff:192.0.2.1`, what a dual-stack listener sees) is its IPv4 address.
pub(crate) fn port_of_address(addr: IpAddr) -> Option<String> {
    let addr = addr.to_canonical();
    if addr.is_unspecified() {
        return None;
    }
    crate::board::ports()
        .into_iter()
        .find(|p| p.addresses.contains(&addr))
        .map(|p| p.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  1000 10 500 8000 40 10 200 0 0 0\n\
cpu0 600 10 300 3000 20 10 60 0 0 0\n\
cpu1 400 0 200 5000 20 0 140 0 0 0\n\
intr 12345 1 2 3\nctxt 999\nbtime 1700000000\nprocesses 42\n";
    // +100 ticks per core: cpu0 70 user 10 nice 10 system 0 idle 10 softirq; cpu1 idle.
    const STAT_B: &str = "cpu  1080 20 510 8090 40 10 210 0 0 0\n\
cpu0 670 20 310 3000 20 10 70 0 0 0\n\
cpu1 410 0 200 5090 20 0 140 0 0 0\n\
intr 12999 1 2 3\n";

    #[test]
    fn proc_stat_lines_and_shares() {
        let a = parse_proc_stat(STAT_A);
        assert_eq!(a.len(), 3);
        assert_eq!(a[0].0, -1);
        assert_eq!(a[1].0, 0);
        assert_eq!(a[2].1.softirq, 140);
        let b = parse_proc_stat(STAT_B);
        let c0 = cpu_shares(1.0, 0, &a[1].1, &b[1].1);
        assert_eq!(c0.user, 80.0, "user includes nice");
        assert_eq!(c0.system, 10.0);
        assert_eq!(c0.softirq, 10.0);
        assert_eq!(c0.idle, 0.0);
        assert_eq!(c0.busy(), 100.0);
        let c1 = cpu_shares(1.0, 1, &a[2].1, &b[2].1);
        assert_eq!(c1.idle, 90.0);
        assert_eq!(c1.user, 10.0);
        let all = cpu_shares(1.0, -1, &a[0].1, &b[0].1);
        // 200 ticks: user 80+10, system 10, idle 90, softirq 10 → 45/5/45/5 %.
        assert_eq!(
            (all.user, all.system, all.idle, all.softirq),
            (45.0, 5.0, 45.0, 5.0)
        );
        let sum = all.user + all.system + all.iowait + all.irq + all.softirq + all.steal + all.idle;
        assert!((sum - 100.0).abs() < 1e-9);
    }

    #[test]
    fn proc_stat_oddities() {
        // Old kernel (4 fields), garbage, "cpufreq"-like names, negative index.
        let v =
            parse_proc_stat("cpu 1 2 3 4\ncpu0 1 x 3 4\ncpux 1 2 3 4\ncpu1 1 2\ncpu-1 1 2 3 4\n");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].1.idle, 4);
        assert_eq!(v[0].1.softirq, 0);
        // No tick passed, or counters went backwards: idle, never NaN or negative.
        let t = CpuTimes {
            user: 5,
            idle: 5,
            ..Default::default()
        };
        let s = cpu_shares(0.0, 0, &t, &t);
        assert_eq!((s.idle, s.user), (100.0, 0.0));
        let back = cpu_shares(0.0, 0, &t, &CpuTimes::default());
        assert_eq!(back.idle, 100.0);
    }

    #[test]
    fn proc_net_dev_and_deltas() {
        let a = "Inter-|   Receive                                                |  Transmit\n \
face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n  \
eth0: 5000000    4000    1    2    0     0          0         0  9000000    7000    3    4    0     0       0          0\n\
broken: 1 2 3\n";
        let m = parse_proc_net_dev(a);
        assert_eq!(m.len(), 2);
        let e = m["eth0"];
        assert_eq!(
            (e.rx_bytes, e.rx_packets, e.rx_errors, e.rx_dropped),
            (5_000_000, 4000, 1, 2)
        );
        assert_eq!(
            (e.tx_bytes, e.tx_packets, e.tx_errors, e.tx_dropped),
            (9_000_000, 7000, 3, 4)
        );
        let later = PortCounters {
            rx_bytes: 5_000_000 + 125_000_000,
            rx_packets: 4000 + 82_000,
            ..e
        };
        let d = port_delta(1.0, "eth0", 1.0, &e, &later);
        assert_eq!(d.rx_bytes, 125_000_000);
        assert_eq!(d.rx_bps(), 1e9);
        assert_eq!(d.rx_pps(), 82_000.0);
        assert_eq!(d.tx_bytes, 0);
        // A reset counter gives 0, not 2^64 - x.
        let reset = port_delta(2.0, "eth0", 1.0, &later, &PortCounters::default());
        assert_eq!(reset.rx_bytes, 0);
    }

    #[test]
    fn live_snapshot_sees_loopback_and_cores() {
        let a = Snapshot::take();
        assert!(a.cpus.iter().any(|(i, _)| *i == -1));
        assert!(a.cpus.iter().filter(|(i, _)| *i >= 0).count() >= 1);
        assert!(a.ports.contains_key("lo"));
        assert_eq!(
            port_of_address("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        assert_eq!(port_of_address("0.0.0.0".parse().unwrap()), None);
        assert_eq!(link_speed_mtu("lo").0, None, "loopback has no link speed");
        assert_eq!(link_speed_mtu("no/such"), (None, None));
    }

    #[test]
    fn one_loop_publishes_readings_and_the_inventory_and_stops_when_dropped() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let s = Sampler::new();
        s.read_inventory();
        s.start(rt.handle());
        s.start(rt.handle()); // a second start adds no second loop
        let mut rx = s.subscribe();
        async fn next(rx: &mut watch::Receiver<Option<Arc<Snapshot>>>) -> Option<Arc<Snapshot>> {
            tokio::time::timeout(Duration::from_secs(5), rx.changed())
                .await
                .ok()?
                .ok()?;
            rx.borrow_and_update().clone()
        }
        let (a, b) = rt.block_on(async { (next(&mut rx).await, next(&mut rx).await) });
        let (a, b) = (a.expect("a first reading"), b.expect("a second reading"));
        // Each reading is a whole snapshot: CPU lines and this namespace's loopback.
        assert!(a.cpus.iter().any(|(i, _)| *i == -1));
        assert!(b.ports.contains_key("lo"));
        // One loop at SAMPLE_PERIOD: two readings about a second apart, not two loops' worth.
        let gap = b.at.duration_since(a.at).as_secs_f64();
        assert!((0.5..2.5).contains(&gap), "{gap} s between readings");
        // The inventory was read for the Ports page too.
        let inv = s.ports().cached().expect("an inventory");
        assert!(inv.iter().any(|l| l.name == "lo"), "{:?}", inv.len());
        // Dropping the sampler ends its loop: the receiver sees the sender gone.
        drop(s);
        let closed = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), rx.changed())
                .await
                .map(|r| r.is_err())
        });
        assert_eq!(closed, Ok(true));
    }
}
