//! The UDP sender's pacer: a schedule at the target rate plus a burst limit, so that a sender
//! that lost CPU time (a loaded board: the daemon, the UI and other processes share the cores
//! with the test) repays its debt quickly enough to reach the asked average, without sending
//! it as a burst. Not for: the send loop itself (see [`crate::engine::udp`]).
//!
//! Two limits hold at once:
//!
//! * the **schedule**: `next` advances by each batch's transmission time at the target rate,
//!   so the average over the run is the target; time lost to a stall is owed, not forgiven
//!   (up to [`MAX_DEBT`]). Small debt (up to [`GENTLE_DEBT`]: a wake-up that came a little
//!   late) is repaid at [`GENTLE_CATCH_UP`] × the rate, one batch at a time, so an idle host
//!   keeps its busiest 1 ms within 1.2 × the rate.
//!   On a loaded host (a debt beyond `GENTLE_DEBT` seen in the last second) a late wake-up
//!   keeps up to [`LOADED_CREDIT`] (1.2 ms) of the gentle bucket it missed and the bucket
//!   runs at [`LOADED_CATCH_UP`] (1.25 ×), so the debt falls to about one wake-up's lateness
//!   instead of sitting at `GENTLE_DEBT`;
//! * the **window**: larger debt is repaid as fast as the sender gets the CPU, but no window
//!   of [`WINDOW`] (1.2 ms) holds more than [`WINDOW_CAP`] (1.9 ms) of traffic at the target
//!   rate: every send is checked against the sends of the window before it, at the times
//!   they really went. The busiest 1 ms is thus at most 1.9 × the rate at the sender —
//!   unless the debt keeps growing at that bound (a core short of CPU): then the cap steps
//!   up to 3.4 and 5.0 ms per window ([`CATCH_UP_CAPS`]), because the asked rate is the
//!   contract and smoothness only how it is kept. Stock iperf3 repays such debt at once
//!   (its busiest 1 ms 11–14 × the rate); the top level stays under half of that.
//!
//! Why a window and not a second token bucket: on a loaded host every sleep costs a wake-up
//! latency L (often more than 1 ms behind busy processes). A peak bucket D deep lets a late
//! sender send only about D × its rate per wake-up, so it reaches about (D + batch) / L of
//! the target (measured with a 250 µs bucket at 1.4 ×: 37–55 % of `-b` with two busy loops
//! and a compile beside them). The window lets each late wake-up send up to 1.9 ms of
//! traffic, so wake-ups up to ~1.7 ms late still repay the debt (except around 1 ms late,
//! when two bursts share one window: 82–89 %), and the 2 × bound holds.
//!
//! What it costs: every batch the pacer admits is a wake-up of the sending thread (a sleep,
//! a context switch and back), which on a paced sender costs more CPU than the datagrams
//! (measured on veth: about 30–40 µs per wake-up against about 0.5 µs per datagram in a GSO
//! super-datagram). So the UDP sender asks for [`BATCH_TIME`] (0.8 ms) of traffic at a
//! time ([`Pacer::batch_datagrams`], never more than one [`WINDOW_CAP`], and never more than
//! a stock receiver's default socket buffer holds with room: `engine::udp::batch_size`, 118
//! datagrams of 512 bytes at 1 Gbit/s instead of 195, which a stock `iperf3 -s` lost 18.7 %
//! of; more wake-ups then, each still booked here, so the catch-up rules are unchanged), and
//! [`Pacer::take`] never busy-waits: it sleeps to the booked time less the host's usual
//! oversleep and sends a wake-up that came up to [`EARLY`] early at once. Sending early
//! never moves the schedule, so the average holds; a wake-up that came late is debt like
//! any other, repaid as above. (Before: batches of 0.2 ms and a spin for the last tens of µs
//! before each: about 3 × the CPU per datagram at 100–1000 Mbit/s, `benches/udp.sh`.)
//!
//! **Kernel pacing.** Where the sender's egress port has an fq root qdisc (see
//! [`crate::engine::netlink::fq_paces`]), the UDP sender sets the socket's
//! `SO_MAX_PACING_RATE` to [`KERNEL_MARGIN`] × the asked rate (in bytes on the wire) and this
//! pacer runs in kernel mode ([`Pacer::new_kernel`]): the same schedule and the same gentle
//! repayment of small debts, but each wake-up hands the kernel [`KERNEL_BATCH_TIME`] (8 ms)
//! of traffic in GSO super-datagrams of [`KERNEL_SKB_TIME`] (0.5 ms) that fq spreads at its
//! pacing rate, so the thread wakes 10 × less often than with [`BATCH_TIME`]. The burst
//! limit is then fq's: no window of the sender's own; instead the pacer models fq's queue
//! (draining at the pacing rate) and never lets it hold more than [`KERNEL_QUEUE`], so a
//! large debt is repaid at the margin (0.25 × the rate) and fq's per-flow limit (100 skbs) is
//! never reached. The kernel cannot raise a UDP socket's pacing rate once set (the option
//! only lowers it), so the margin is fixed for the stream. Without fq (stock board images and
//! this project's lab kernel) every paced sender uses the user-space pacer; `end.pacing` says
//! which (see [`PacedBy`]).
//!
//! **Departure times.** The margin alone repays a stall at 0.25 × the rate at most, so a
//! sender that started or stalled 0.2–1 s late on a loaded host ended its test short. Where
//! the kernel takes SO_TXTIME (Linux ≥ 4.19; fq honours the time since 4.20) the sender turns
//! it on (CLOCK_MONOTONIC) and this pacer runs with [`Pacer::new_kernel_txtime`]: each GSO
//! super-datagram (or datagram, without GSO) carries its own earliest departure in an
//! SCM_TXTIME control message ([`Pacer::plan_departures`], converted by [`txtime_ns`]). On
//! time that is the schedule itself, so the flow keeps it exactly; the batch is handed over
//! [`TXTIME_LEAD`] (4 ms) early, so a late wake-up costs nothing. What is owed departs at
//! [`KERNEL_CATCH_UP`] (2 ×) the rate: fq trusts a timestamped skb's time and does not apply
//! the socket's pacing rate to it (`fq_dequeue`: the socket's rate only for skbs without a
//! time), so the spacing of the catch-up is this pacer's, not fq's; SO_MAX_PACING_RATE is set
//! to 2 × as well, for anything sent untimed. 2 ×: a 300 ms stall is repaid in 300 ms, and the
//! busiest 1 ms stays within 2 × plus one super-datagram (2.5 ×, half of stock iperf3's 5–10 ×
//! after a stall); the CPU is not what limits it (one wake-up carries 8 ms). fq drops an skb
//! timed beyond its `horizon` (default 10 s; with `horizon_drop` off it holds it to the
//! horizon instead), so no departure is ever set more than [`TXTIME_MAX_AHEAD`] (50 ms) ahead;
//! the schedule needs at most 24 ms. An admin's horizon below that drops skbs (fq's
//! `horizon_drops`; measured in the VM with `horizon 10ms`: 90 drops in 3 s at 100M). Where
//! the kernel refuses SO_TXTIME (ENOPROTOOPT, EINVAL) the sender paces as above, at the
//! 1.25 × margin, and `end.pacing` says which: "kernel (fq on eth1, SO_TXTIME departure
//! times)" or "kernel (fq on eth1, SO_MAX_PACING_RATE)".

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Debt up to this much (a wake-up that came a little late, a short preemption) is repaid
/// gently: at [`GENTLE_CATCH_UP`] × the rate with no burst, so an idle host's busiest 1 ms
/// stays within 1.2 × the rate. Larger debt (a sender that really lost the CPU) is repaid
/// within the [`WINDOW`] limit. 20 ms: a one-off stall on an idle host is then repaid
/// without a burst (with 5 ms, one 100M test in a full test run had a debt above it, repaid
/// as a 1.9 ms burst that the receiver saw as 2.43 × in 1 ms). A debt beyond it also marks
/// the host as loaded for a while (see [`LOADED_CREDIT`]), so a sender that keeps waking late
/// repays its small debt too, not only what lies beyond 20 ms.
pub(crate) const GENTLE_DEBT: Duration = Duration::from_millis(20);

/// Gentle repay's credit on a loaded host: 1.2 ms. Without it, a small debt is repaid one
/// batch per wake-up at the catch-up rate counted from the wake-up itself, so a sender whose
/// wake-ups come L late (busy processes share its core) books 0.8 ms of schedule per
/// 0.76 ms + L: the debt grows to [`GENTLE_DEBT`] and sits there, repaid only beyond it, and
/// the run ends 20 ms short (99.5–99.6 % of `-b` over 5 s and 98.9–99.1 % over 2 s with two
/// busy loops on the sender's core, `benches/udp-load.sh PIN=1`). While the host is loaded
/// (see [`LOADED_FOR`]) the gentle bucket counts from up to this long before a late
/// wake-up, so the wake-up sends what the lateness held back. 1.2 ms, not more: such a burst
/// (1.2 ms × [`LOADED_CATCH_UP`] = 1.5 ms of traffic) leaves room under [`WINDOW_CAP`] for
/// the next wake-up; with 2 ms a sender waking 1.5 ms late every time filled each window
/// and waited out the next (69 % of the rate on the pacer's clock).
pub(crate) const LOADED_CREDIT: Duration = Duration::from_micros(1200);

/// The catch-up rate for small debts while the host is loaded: 1.25 × the rate. On a loaded
/// host most wake-ups come on time and a few come milliseconds late; at 1.05 × the debt of
/// one late wake-up took 20 × its length to repay and the next came first, so a 2 s test with
/// two busy loops on the sender's core still ended 20 ms short (98.9–99.1 %; 99.9–100.0 %
/// with 1.25 ×). Batches then go 0.64 ms apart (0.54 ms with [`EARLY`]): still at most two in
/// any 1 ms, 1.6 × the rate, and every send stays within [`WINDOW_CAP`].
pub(crate) const LOADED_CATCH_UP: f64 = 1.25;

/// How long the host counts as loaded after a debt beyond [`GENTLE_DEBT`] (a sender that really
/// lost the CPU), renewed by every debt beyond [`LOADED_CREDIT`] while loaded: 1 s. An idle
/// host's one-off hiccup (under [`GENTLE_DEBT`]) never marks it, and is repaid gently.
pub(crate) const LOADED_FOR: Duration = Duration::from_secs(1);

/// The catch-up rate for small debts (see [`GENTLE_DEBT`]): 1.05 × the rate, one batch at a
/// time. A 20 ms debt is repaid within 400 ms.
pub(crate) const GENTLE_CATCH_UP: f64 = 1.05;

/// Length of the burst-limit window: 1.2 ms. Longer than the 1 ms the busiest-1-ms figure
/// is taken over, so two full windows sent back to back are at least 0.2 ms apart and a
/// receiver whose arrivals bunch (a loaded receiving host) does not see both in one 1 ms.
/// (A 1 ms window with a 1.8 ms cap was measured with three busy loops: the receiver saw
/// 2.09 × and 3.59 × in two of three runs; 1.2 ms / 1.9 ms gave 1.85 × in three of three,
/// each at 99.9 % of the rate.)
pub(crate) const WINDOW: Duration = Duration::from_micros(1200);

/// Most traffic any [`WINDOW`] may carry, as time at the target rate: 1.9 ms, so the
/// sender's busiest 1 ms stays below 2 × the rate.
pub(crate) const WINDOW_CAP: Duration = Duration::from_micros(1900);

/// Traffic per wake-up of the sender at the target rate: 0.8 ms (see
/// [`Pacer::batch_datagrams`]). Each wake-up (a sleep, a context switch and back) is the main
/// cost of a paced sender, more than sending a few more datagrams in the same GSO
/// super-datagrams or sendmmsg call, so a batch is as long as the burst limit allows with
/// room: sends spaced 0.8 ms (0.76 ms while repaying at [`GENTLE_CATCH_UP`], less up to
/// [`EARLY`] for a wake-up a little early) put at most two batches into any 1 ms, 1.6 × the
/// rate, and a window's cap admits a batch on time (two batches, 1.6 ms, within the 1.9 ms
/// of [`WINDOW_CAP`]).
pub(crate) const BATCH_TIME: Duration = Duration::from_micros(800);

/// How much before its booked time a send may go when the sleep woke a little early, rather
/// than spinning or sleeping again: at most 0.1 ms (and at most the host's oversleep
/// estimate). Less than the 0.2 ms by which [`WINDOW`] exceeds 1 ms, so the busiest 1 ms
/// (on real send times) stays within [`WINDOW_CAP`].
pub(crate) const EARLY: Duration = Duration::from_micros(100);

/// The window caps of the catch-up levels, as time at the target rate: level 0 is
/// [`WINDOW_CAP`] (1.9 ms: busiest 1 ms < 2 ×), level 1 3.4 ms (< 3.4 ×), level 2 5.0 ms
/// (< 5 ×). A sender on a core short of CPU (its wake-ups come milliseconds late, its
/// receiver's softirq and other processes share the core) gets the CPU about once per
/// wake-up latency L and can send at most one cap per L + [`WINDOW`]: with 1.9 ms and L = 3 ms
/// that is 45 % of the rate (`benches/udp-load.sh PIN=1 RECV_ON_PIN=1`: 65–85 % of 100M
/// where stock iperf3, which sends its debt at once, sent 99.99 % with its busiest 1 ms at
/// 11–14 ×). A debt that keeps growing ([`ESCALATE_DEBT`] beyond where the level was set)
/// raises the level, so the pacer trades smoothness for the rate only as far as the CPU
/// makes it, and stays within half of stock's busiest 1 ms. 5 ms repays a debt while
/// L + 1.2 ms < 5 ms.
pub(crate) const CATCH_UP_CAPS: [Duration; 3] = [
    WINDOW_CAP,
    Duration::from_micros(3400),
    Duration::from_micros(5000),
];

/// How much a large debt (beyond [`GENTLE_DEBT`]) must grow at one catch-up level before the
/// next level is taken: 10 ms. A one-off stall on an idle host (debt that falls at once at
/// level 0) keeps the 1.9 × bound.
pub(crate) const ESCALATE_DEBT: Duration = Duration::from_millis(10);

/// The catch-up levels are taken only after the host has been loaded this long without an
/// idle second: 1 s. A one-off stall, or a loaded second (an RFC 2544 trial is 1 s long: its
/// offered load must stay even, and a 5 × burst into a shaper's 10 ms queue is a loss the board
/// did not cause), keeps the 1.9 × bound; a core that stays short of CPU gets the levels.
/// Measured in `tests/rfc2544.rs` on a loaded machine: with levels from the first stall, trials
/// lagging 20–56 ms burst into the 100 Mbit/s TBF and the 512-byte throughput came out at
/// 19,304 frames/s (the shaper passes 24,606).
pub(crate) const ESCALATE_AFTER: Duration = Duration::from_secs(1);

/// While the host is loaded and a catch-up level above 0 is in force, debt beyond this is
/// repaid at that level rather than by the gentle bucket: 4 ms (a few late wake-ups). Without
/// it the debt of a CPU-short sender grows back to [`GENTLE_DEBT`] between repayments and the
/// run ends up to 20 ms short.
pub(crate) const CPU_SHORT_DEBT: Duration = Duration::from_millis(4);

/// Debt older than this (a stopped process, a suspended VM) is written off rather than repaid;
/// the run then shows a shortfall. 1 s.
pub(crate) const MAX_DEBT: Duration = Duration::from_secs(1);

/// Traffic per wake-up when the kernel paces (fq, see the module docs): 8 ms. fq spreads it;
/// the thread wakes 125 times a second instead of 1,250 ([`BATCH_TIME`]). (With 4 ms and
/// 0.25 ms super-datagrams: 1.46 × iperf3 3.21 `--gsro`'s datagrams per CPU-second at
/// `-b 1000M -l 1448`, `benches/udp.sh`.)
pub(crate) const KERNEL_BATCH_TIME: Duration = Duration::from_millis(8);

/// fq's pacing rate over the asked rate under kernel pacing: 1.25 (as [`LOADED_CATCH_UP`]).
/// The schedule (this pacer) keeps the average; fq's rate only spreads each batch, so it must
/// exceed the rate (or fq's queue grows without end) and bounds the busiest 1 ms (1.25 × and
/// one GSO super-datagram) and how fast a debt is repaid (the margin, 0.25 × the rate).
pub(crate) const KERNEL_MARGIN: f64 = 1.25;

/// Most traffic the pacer lets wait in fq's queue, as time at fq's pacing rate: 12 ms (a
/// batch and a half). A sender that wakes up to ~5 ms late leaves no gap on the wire; fq's
/// per-flow limit (100 skbs, one GSO super-datagram each) is far (12 ms is about 30
/// super-datagrams), and the send buffer bounds the real queue (see
/// `engine::udp::kernel_send_buffer`).
pub(crate) const KERNEL_QUEUE: Duration = Duration::from_millis(12);

/// Traffic per GSO super-datagram under kernel pacing: 0.5 ms. fq paces skbs, so one
/// super-datagram leaves as one burst: 0.5 ms of traffic keeps the busiest 1 ms within about
/// [`KERNEL_MARGIN`] + 0.5 × the rate (at 1 Gbit/s and 1448 bytes: 43 datagrams, 62 KB, as
/// large as the user-space sender's).
pub(crate) const KERNEL_SKB_TIME: Duration = Duration::from_micros(500);

/// Catch-up rate of a kernel-paced sender with departure times (SO_TXTIME, see the module
/// docs): 2 × the rate. fq trusts a timestamped skb's time and ignores the socket's pacing
/// rate for it, so this pacer spaces the departures of what is owed itself: a stall of D is
/// repaid in D. The bound: the busiest 1 ms stays at most 2 × the rate plus one GSO
/// super-datagram ([`KERNEL_SKB_TIME`]), 2.5 ×, half of stock iperf3's lowest busiest 1 ms
/// after a stall (5–10 ×); a CPU-short sender is not the limit here (one wake-up carries
/// [`KERNEL_BATCH_TIME`]).
pub(crate) const KERNEL_CATCH_UP: f64 = 2.0;

/// How long before its schedule a kernel-paced sender with departure times hands a batch
/// over: 4 ms. fq holds it until its time, so a wake-up up to this late still leaves no gap
/// on the wire and owes nothing.
pub(crate) const TXTIME_LEAD: Duration = Duration::from_millis(4);

/// Furthest ahead of the hand-over a departure time is ever set: 50 ms. The schedule needs at
/// most [`TXTIME_LEAD`] + [`KERNEL_BATCH_TIME`] + [`KERNEL_QUEUE`] (24 ms); fq drops (or
/// with `horizon_drop` off, holds back to its horizon) an skb timed beyond its `horizon`
/// (default 10 s), so a departure never comes near it unless an admin set the horizon below
/// 50 ms.
pub(crate) const TXTIME_MAX_AHEAD: Duration = Duration::from_millis(50);

/// CLOCK_MONOTONIC nanoseconds of `at`, given one reading of both clocks (`base` and
/// `base_ns`, taken together): `base_ns` ± the distance from `base` to `at`. Rust's `Instant`
/// is CLOCK_MONOTONIC on Linux, so the distance is the same on both. `None` when the result
/// does not fit a u64 (overflow checked: never a wrapped time, which fq would take as far in
/// the past or beyond its horizon). Pure.
pub(crate) fn txtime_ns(base_ns: u64, base: Instant, at: Instant) -> Option<u64> {
    if at >= base {
        let d = u64::try_from(at.duration_since(base).as_nanos()).ok()?;
        base_ns.checked_add(d)
    } else {
        let d = u64::try_from(base.duration_since(at).as_nanos()).ok()?;
        base_ns.checked_sub(d)
    }
}

/// How a paced UDP sender asks to be paced (`--udp-pacing`): `auto` (the kernel where the
/// egress port's root qdisc is fq, else user space), `kernel` (always hand the kernel
/// [`KERNEL_BATCH_TIME`] per wake-up and set `SO_MAX_PACING_RATE`; without fq nothing
/// spreads the batches: for measuring its CPU cost), `user` (the user-space pacer always).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacingMode {
    #[default]
    Auto,
    Kernel,
    User,
}

impl PacingMode {
    /// The flag's words: "auto", "kernel", "user"; `None` for anything else.
    pub fn parse(s: &str) -> Option<PacingMode> {
        match s {
            "auto" => Some(PacingMode::Auto),
            "kernel" => Some(PacingMode::Kernel),
            "user" => Some(PacingMode::User),
            _ => None,
        }
    }
}

/// A port's name as the kernel keeps it (at most 15 bytes), kept inline so the run's figures
/// stay `Copy`. Serialised as a string.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct PortName([u8; 16]);

impl PortName {
    /// The name, cut at 15 bytes (IFNAMSIZ − 1) on a character boundary.
    pub fn new(name: &str) -> PortName {
        let mut end = name.len().min(15);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let mut b = [0u8; 16];
        b[..end].copy_from_slice(&name.as_bytes()[..end]);
        PortName(b)
    }

    /// The name ("" when not known).
    pub fn as_str(&self) -> &str {
        let n = self.0.iter().position(|&c| c == 0).unwrap_or(16);
        std::str::from_utf8(&self.0[..n]).unwrap_or("")
    }
}

impl std::fmt::Debug for PortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl serde::Serialize for PortName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for PortName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(PortName::new(&s))
    }
}

/// Who paced a UDP sender, decided once per stream by [`decide_pacing`], for `end.pacing`
/// and the run's notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum PacedBy {
    /// fq on `port` paced the socket at `SO_MAX_PACING_RATE`; `forced`: `--udp-pacing
    /// kernel` (`port` empty when no fq was found: then nothing spread the batches).
    Kernel { port: PortName, forced: bool },
    /// fq on `port` paced the socket by departure times: every message carried its own
    /// (SO_TXTIME), the schedule's, and what was owed left at [`KERNEL_CATCH_UP`] × the rate;
    /// `forced` as for [`PacedBy::Kernel`]. Where the kernel refuses SO_TXTIME the sender
    /// stays [`PacedBy::Kernel`] (fq at SO_MAX_PACING_RATE alone).
    KernelTxtime { port: PortName, forced: bool },
    /// This module's user-space pacer, and why.
    UserSpace { why: UserWhy },
}

/// Why a paced UDP sender paced in user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserWhy {
    /// The egress port's root qdisc is not fq (or could not be read).
    NoFq,
    /// `--udp-pacing user`.
    Asked,
    /// The socket already had a pacing rate (`--fq-rate`): it is the user's, left alone.
    FqRate,
    /// As [`UserWhy::FqRate`], and `--udp-pacing kernel` was asked: `--fq-rate` overrode it.
    FqRateOverKernel,
}

impl PacedBy {
    /// The words of `end.pacing`: "kernel (fq on eth1, SO_MAX_PACING_RATE)", "user-space token
    /// bucket", "user-space token bucket (asked: --udp-pacing user)", ….
    pub fn sentence(&self) -> String {
        match *self {
            PacedBy::Kernel { port, forced } if port.as_str().is_empty() => format!(
                "kernel (SO_MAX_PACING_RATE{}; no fq on the egress port, so nothing spread the {} ms batches)",
                if forced { ", forced by --udp-pacing kernel" } else { "" },
                KERNEL_BATCH_TIME.as_millis()
            ),
            PacedBy::KernelTxtime { port, forced } => format!(
                "kernel (fq on {}, SO_TXTIME departure times{})",
                port.as_str(),
                if forced { ", forced by --udp-pacing kernel" } else { "" }
            ),
            PacedBy::Kernel { port, forced } => format!(
                "kernel (fq on {}, SO_MAX_PACING_RATE{})",
                port.as_str(),
                if forced { ", forced by --udp-pacing kernel" } else { "" }
            ),
            PacedBy::UserSpace { why: UserWhy::NoFq } => Pacing::UserSpace.as_str().to_string(),
            PacedBy::UserSpace { why: UserWhy::Asked } => format!(
                "{} (asked: --udp-pacing user)",
                Pacing::UserSpace.as_str()
            ),
            PacedBy::UserSpace { why: UserWhy::FqRate } => format!(
                "{} (the socket's pacing rate is --fq-rate's)",
                Pacing::UserSpace.as_str()
            ),
            PacedBy::UserSpace {
                why: UserWhy::FqRateOverKernel,
            } => format!(
                "{} (--udp-pacing kernel overridden: the socket's pacing rate is --fq-rate's)",
                Pacing::UserSpace.as_str()
            ),
        }
    }

    /// The pacing note's words when the kernel paced: "paced by the kernel (fq on eth1)";
    /// `None` for the user-space pacer (the note's default).
    pub fn note(&self) -> Option<String> {
        match *self {
            PacedBy::Kernel { port, .. } if port.as_str().is_empty() => Some(format!(
                "paced by the kernel, forced without fq (nothing spread its {} ms batches)",
                KERNEL_BATCH_TIME.as_millis()
            )),
            PacedBy::Kernel { port, .. } => {
                Some(format!("paced by the kernel (fq on {})", port.as_str()))
            }
            PacedBy::KernelTxtime { port, .. } => Some(format!(
                "paced by the kernel (fq on {}, departure times)",
                port.as_str()
            )),
            PacedBy::UserSpace { .. } => None,
        }
    }

    /// Whether the kernel paces (the sender hands it [`KERNEL_BATCH_TIME`] per wake-up).
    pub fn is_kernel(&self) -> bool {
        matches!(self, PacedBy::Kernel { .. } | PacedBy::KernelTxtime { .. })
    }

    /// Whether the sender gave every message its departure time (SO_TXTIME).
    pub fn is_txtime(&self) -> bool {
        matches!(self, PacedBy::KernelTxtime { .. })
    }
}

/// Decide who paces a paced UDP sender: `mode` is the user's choice, `fq_port` the egress port
/// when its root qdisc is fq (see [`crate::engine::netlink::fq_egress`]), `rate_set` whether
/// the socket already carries a pacing rate (`--fq-rate`, the user's: left alone, and its
/// rate, not the test's, is what fq enforces). Pure.
pub(crate) fn decide_pacing(mode: PacingMode, fq_port: Option<&str>, rate_set: bool) -> PacedBy {
    let port = PortName::new(fq_port.unwrap_or(""));
    match mode {
        PacingMode::User => PacedBy::UserSpace {
            why: UserWhy::Asked,
        },
        PacingMode::Kernel if rate_set => PacedBy::UserSpace {
            why: UserWhy::FqRateOverKernel,
        },
        _ if rate_set => PacedBy::UserSpace {
            why: UserWhy::FqRate,
        },
        PacingMode::Kernel => PacedBy::Kernel { port, forced: true },
        PacingMode::Auto if fq_port.is_some() => PacedBy::Kernel {
            port,
            forced: false,
        },
        PacingMode::Auto => PacedBy::UserSpace { why: UserWhy::NoFq },
    }
}

/// Which pacing a sender used, reported in `-J` (`end.pacing`) and the run summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pacing {
    /// This module's user-space token bucket.
    UserSpace,
}

impl Pacing {
    /// The word written into `-J` and the run record: "none", "user-space token bucket".
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Pacing::UserSpace => "user-space token bucket",
        }
    }
}

/// What a paced sender went through, for the run's report and verdict: why a rate was missed
/// (a sender far behind its schedule did not get the CPU) and how bursty it sent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct PacerStats {
    /// The largest lag behind the schedule seen when a send was asked for, ms: a thread that
    /// was off the CPU (or stopped) for that long.
    pub max_lag_ms: f64,
    /// Most bytes sent in any 1 ms (the sender's busiest 1 ms, at the times sends went).
    pub busiest_1ms_bytes: u64,
    /// Debt written off (beyond the pacer's `max_debt`), ms: time the run could not repay.
    pub written_off_ms: f64,
    /// Times the sender fell more than [`GENTLE_DEBT`] behind (a stall: it did not get the
    /// CPU), each counted once until it was back within [`LOADED_CREDIT`] of its schedule.
    pub stalls: u32,
    /// The highest catch-up level taken (index into [`CATCH_UP_CAPS`]; 0 = the 1.9 × bound).
    pub catch_up_level: u8,
    /// How far behind its schedule the sender was at its last send, ms, the written-off debt
    /// included (at the end of a run: the schedule it never repaid).
    pub owed_ms: f64,
}

impl PacerStats {
    /// The burst bound of the highest catch-up level taken, × the rate (1.9, 3.4 or 5.0).
    #[cfg(test)]
    pub(crate) fn catch_up_bound(&self) -> f64 {
        let i = usize::from(self.catch_up_level).min(CATCH_UP_CAPS.len() - 1);
        CATCH_UP_CAPS[i].as_secs_f64() * 1000.0
    }
}

/// A sender's pacer at a fixed rate (see the module docs for the two limits).
pub(crate) struct Pacer {
    /// Bytes per second.
    rate: f64,
    /// When the next byte is due at the target rate (may lie in the past: debt).
    next: Instant,
    /// Theoretical arrival time of the gentle catch-up bucket (GCRA at
    /// [`GENTLE_CATCH_UP`] × the rate, no depth): while repaying a small debt, a batch may go
    /// once `now ≥ peak`.
    peak: Instant,
    /// Sends of the last [`WINDOW`]: (when, bytes), oldest first.
    recent: VecDeque<(Instant, usize)>,
    /// Bytes of `recent`.
    recent_bytes: usize,
    /// [`WINDOW_CAP`] in bytes at the target rate.
    window_cap: usize,
    /// [`WINDOW`] in bytes at the target rate (rounded up): what the schedule itself puts into
    /// a window, so the cap never refuses a send that is on time (see [`Pacer::window_room`]).
    window_bytes: usize,
    /// [`WINDOW`].
    window: Duration,
    max_debt: Duration,
    /// Estimated oversleep of `thread::sleep`, ns (an EWMA of this host's wake-up latency).
    oversleep_ns: f64,
    /// Whether anything was booked yet: the schedule starts at the first send, not when the
    /// pacer was made (the time spent setting up a test is no debt to repay in a burst).
    started: bool,
    /// Sends of the last 1 ms at the times they went (for [`PacerStats::busiest_1ms_bytes`]).
    last_ms: VecDeque<(Instant, usize)>,
    /// Bytes of `last_ms`.
    last_ms_bytes: usize,
    stats: PacerStats,
    /// Bytes booked (see [`Pacer::booked_bytes`]).
    booked: u64,
    /// Until when the host counts as loaded (see [`LOADED_CREDIT`]).
    loaded_until: Option<Instant>,
    /// The debt at the last booking, after any write-off (see [`PacerStats::owed_ms`]).
    last_debt: Duration,
    /// The catch-up level in force (index into [`CATCH_UP_CAPS`]).
    level: usize,
    /// Since when the host counts as loaded without an idle second between (see
    /// [`ESCALATE_AFTER`]).
    loaded_since: Option<Instant>,
    /// The debt when `level` was last set or the debt last fell at it (see
    /// [`ESCALATE_DEBT`]).
    level_debt: Duration,
    /// Whether the previous booking was in large debt (repaid within the window).
    in_stall: bool,
    /// Whether a stall (debt beyond [`GENTLE_DEBT`]) was counted since the sender was last
    /// on time.
    stalled: bool,
    /// Kernel mode (see the module docs): fq's queue as this pacer models it.
    kernel: Option<KernelQueue>,
}

/// fq's queue of one kernel-paced sender, modelled: it drains at the pacing rate.
#[derive(Debug, Clone)]
struct KernelQueue {
    /// Payload bytes per second fq lets through ([`KERNEL_MARGIN`] × the rate).
    drain: f64,
    /// When what was handed over so far will have left (in the past: empty).
    empty_at: Instant,
    /// Whether fq spreads the hand-overs. `false`: kernel pacing forced on a port without fq
    /// (`--udp-pacing kernel`), where each batch leaves as one burst.
    spread: bool,
    /// With departure times (SO_TXTIME): bytes per message (one GSO super-datagram, or one
    /// datagram without GSO), each given its own time by [`Pacer::plan_departures`].
    /// `None`: fq spreads at the socket's pacing rate.
    txtime_unit: Option<usize>,
    /// The last booked batch not yet planned: its schedule time and bytes.
    pending: Option<(Instant, usize)>,
    /// The departures of the last planned batch, one per message.
    departs: Vec<Instant>,
}

impl Pacer {
    /// A pacer for `rate_bps` bits/s (> 0) that writes off debt beyond `max_debt`
    /// (normally [`MAX_DEBT`]) and repays smaller debt within the [`WINDOW`] limit.
    pub(crate) fn new(rate_bps: u64, max_debt: Duration) -> Pacer {
        let now = Instant::now();
        let rate = (rate_bps as f64 / 8.0).max(1.0);
        Pacer {
            rate,
            next: now,
            peak: now,
            recent: VecDeque::new(),
            recent_bytes: 0,
            window_cap: (rate * WINDOW_CAP.as_secs_f64()) as usize,
            window_bytes: (rate * WINDOW.as_secs_f64()).ceil() as usize,
            window: WINDOW,
            max_debt,
            oversleep_ns: 10_000.0,
            started: false,
            last_ms: VecDeque::new(),
            last_ms_bytes: 0,
            stats: PacerStats::default(),
            booked: 0,
            loaded_until: None,
            last_debt: Duration::ZERO,
            level: 0,
            loaded_since: None,
            level_debt: Duration::ZERO,
            in_stall: false,
            stalled: false,
            kernel: None,
        }
    }

    /// A pacer for a sender the kernel paces (fq at [`KERNEL_MARGIN`] × `rate_bps`, see the
    /// module docs): the same schedule and debt rules, no burst window of its own, and never
    /// more than [`KERNEL_QUEUE`] of traffic waiting in fq. `spread`: fq is on the port and
    /// spreads each hand-over, so the busiest 1 ms is at most fq's pacing rate; `false`
    /// (`--udp-pacing kernel` without fq): nothing spreads a hand-over, and the busiest 1 ms
    /// is at least the largest one (a stock receiver lost 79 % of such batches while the figure
    /// said fq's 1.25 ×).
    pub(crate) fn new_kernel(rate_bps: u64, max_debt: Duration, spread: bool) -> Pacer {
        let mut p = Pacer::new(rate_bps, max_debt);
        p.kernel = Some(KernelQueue {
            drain: p.rate * KERNEL_MARGIN,
            empty_at: Instant::now(),
            spread,
            txtime_unit: None,
            pending: None,
            departs: Vec::new(),
        });
        p
    }

    /// A pacer for a sender the kernel paces with departure times (fq on the port, SO_TXTIME;
    /// see the module docs): the same schedule and debt rules; each batch is handed over up
    /// to [`TXTIME_LEAD`] before its time, never with more than [`KERNEL_QUEUE`] waiting in
    /// fq, and [`Pacer::plan_departures`] gives each message of `unit_bytes` (one GSO
    /// super-datagram, or one datagram) its departure: on its schedule, and what is owed at
    /// [`KERNEL_CATCH_UP`] × the rate.
    pub(crate) fn new_kernel_txtime(rate_bps: u64, max_debt: Duration, unit_bytes: usize) -> Pacer {
        let mut p = Pacer::new_kernel(rate_bps, max_debt, true);
        if let Some(k) = p.kernel.as_mut() {
            k.drain = p.rate * KERNEL_CATCH_UP;
            k.txtime_unit = Some(unit_bytes.max(1));
        }
        p
    }

    /// Whether this pacer plans departure times ([`Pacer::new_kernel_txtime`]).
    pub(crate) fn plans_departures(&self) -> bool {
        self.kernel
            .as_ref()
            .is_some_and(|k| k.txtime_unit.is_some())
    }

    /// Give each message of the batch booked last its departure time, for a hand-over at
    /// `now`: message `i` leaves at its schedule (the batch's booked time + `i` messages at
    /// the rate), not before the previous one has left at [`KERNEL_CATCH_UP`] × the rate
    /// (what is owed goes at that rate, not at once: fq honours the times and nothing
    /// else), not before `now`, and never beyond `now` + [`TXTIME_MAX_AHEAD`]. The times
    /// (one per message of the pacer's unit, the last one possibly shorter) stay available
    /// in [`Pacer::departures`] until the next call; the busiest 1 ms is counted on them.
    /// Empty when nothing is pending or the pacer plans no departures.
    pub(crate) fn plan_departures(&mut self, now: Instant) -> &[Instant] {
        let rate = self.rate;
        let Some(k) = self.kernel.as_mut() else {
            return &[];
        };
        k.departs.clear();
        let (Some(unit), Some((sched, n))) = (k.txtime_unit, k.pending.take()) else {
            return &[];
        };
        let fast = rate * KERNEL_CATCH_UP;
        let most = now + TXTIME_MAX_AHEAD;
        let mut prev_end = k.empty_at;
        let mut left = n;
        let mut i = 0u32;
        let mut timed = Vec::new();
        while left > 0 {
            let bytes = left.min(unit);
            let on_time = sched + Duration::from_secs_f64((i as usize * unit) as f64 / rate);
            let d = on_time.max(prev_end).max(now).min(most);
            k.departs.push(d);
            timed.push((d, bytes));
            prev_end = d + Duration::from_secs_f64(bytes as f64 / fast);
            left -= bytes;
            i = i.saturating_add(1);
        }
        k.empty_at = prev_end;
        for (d, bytes) in timed {
            self.last_ms.push_back((d, bytes));
            self.last_ms_bytes += bytes;
            self.count_last_ms();
        }
        match self.kernel.as_ref() {
            Some(k) => &k.departs,
            None => &[],
        }
    }

    /// The departure times [`Pacer::plan_departures`] gave the last batch.
    pub(crate) fn departures(&self) -> &[Instant] {
        self.kernel.as_ref().map_or(&[], |k| &k.departs)
    }

    /// What this pacer's sender went through so far.
    pub(crate) fn stats(&self) -> PacerStats {
        let mut st = self.stats;
        // The debt at the last booking, not now: a sender that stopped asking (an RFC 2544
        // burst trial sends its burst and waits out the trial; `-n`/`-k` reached) owes
        // nothing for the time it did not mean to send (with `now`, a 3 s burst trial read
        // as 3,000 ms behind and was judged generator-bound).
        st.owed_ms = self.last_debt.as_secs_f64() * 1000.0 + st.written_off_ms;
        st
    }

    /// Book `n` bytes asked for at `now` and return when they may go (≥ `now`): on time, not
    /// before the schedule at the target rate; in small debt not before the gentle bucket
    /// ([`GENTLE_CATCH_UP`] × the rate) allows; in larger debt as soon as the last
    /// [`WINDOW`] leaves room for them under [`WINDOW_CAP`]. Debt beyond `max_debt` is
    /// written off first.
    pub(crate) fn book(&mut self, n: usize, now: Instant) -> Instant {
        let cost = Duration::from_secs_f64(n as f64 / self.rate);
        self.booked += n as u64;
        if !self.started {
            self.started = true;
            self.next = now;
            self.peak = now;
        }
        let lag = now.saturating_duration_since(self.next).as_secs_f64() * 1000.0;
        self.stats.max_lag_ms = self.stats.max_lag_ms.max(lag);
        if let Some(floor) = now.checked_sub(self.max_debt) {
            if self.next < floor {
                // Write off only what is beyond the bound; the rest is still repaid.
                self.stats.written_off_ms += floor.duration_since(self.next).as_secs_f64() * 1000.0;
                self.next = floor;
            }
        }
        let debt = now.saturating_duration_since(self.next);
        self.last_debt = debt;
        let mut loaded = self.loaded_until.is_some_and(|u| now < u);
        if !loaded {
            // An idle second: back to the 1.9 × bound.
            self.level = 0;
            self.loaded_since = None;
        }
        let threshold = if loaded && self.level > 0 {
            CPU_SHORT_DEBT
        } else {
            GENTLE_DEBT
        };
        let gentle = debt <= threshold;
        if !gentle || (loaded && debt > LOADED_CREDIT) {
            self.loaded_until = Some(now + LOADED_FOR);
            loaded = true;
            self.loaded_since.get_or_insert(now);
        }
        let short_for = self
            .loaded_since
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        self.track_stall(gentle, debt, short_for >= ESCALATE_AFTER);
        let at = if gentle {
            // On time or a small debt: the schedule, repaid gently, never a burst.
            self.next.max(self.peak).max(now)
        } else {
            // Large debt: as fast as the window (or fq's queue) allows.
            now
        };
        let at = match self.kernel.as_mut() {
            Some(k) if k.txtime_unit.is_some() => {
                // Departure times: fq holds each message until its time, so the batch goes
                // up to TXTIME_LEAD before its schedule (a late wake-up leaves no gap), or at
                // once when owed; never with more than KERNEL_QUEUE of departures waiting.
                let at = if gentle {
                    self.next.checked_sub(TXTIME_LEAD).unwrap_or(now).max(now)
                } else {
                    now
                };
                let full = k.empty_at.checked_sub(KERNEL_QUEUE);
                let at = full.map_or(at, |f| at.max(f));
                k.pending = Some((self.next, n));
                at
            }
            Some(k) => {
                // fq spreads the batch at its pacing rate: only its queue limits the hand-over.
                let drain = Duration::from_secs_f64(n as f64 / k.drain);
                let full = (k.empty_at + drain).checked_sub(KERNEL_QUEUE);
                let at = full.map_or(at, |f| at.max(f));
                k.empty_at = k.empty_at.max(at) + drain;
                // What leaves fq in any 1 ms: at most its pacing rate; unspread, the batch.
                let per_ms = (k.drain / 1000.0) as u64;
                let this = if k.spread {
                    (n as u64).min(per_ms)
                } else {
                    n as u64
                };
                let most = self.stats.busiest_1ms_bytes.max(this);
                self.stats.busiest_1ms_bytes = most;
                at
            }
            None => self.window_room(n, at),
        };
        self.next += cost;
        // The gentle bucket. On an idle host it starts again at each send (`at` is never before
        // `peak` here: it does not carry a late wake-up or a window-limited burst into the next
        // milliseconds). On a loaded host a late wake-up keeps up to LOADED_CREDIT of what it
        // missed, and the bucket never runs ahead of a window-limited send that passed it.
        // (A debt beyond GENTLE_DEBT always marks the host as loaded, above.)
        let (from, catch_up) = if loaded {
            let floor = at.checked_sub(LOADED_CREDIT).unwrap_or(at);
            (self.peak.min(at).max(floor), LOADED_CATCH_UP)
        } else {
            (at, GENTLE_CATCH_UP)
        };
        self.peak = from + cost.div_f64(catch_up);
        if self.kernel.is_some() {
            return at;
        }
        self.recent.push_back((at, n));
        self.recent_bytes += n;
        // Counted for the busiest 1 ms when [`Pacer::sent_at`] says when it really went.
        self.last_ms.push_back((at, n));
        self.last_ms_bytes += n;
        at
    }

    /// Count stalls and their repayment, and move the catch-up level (see
    /// [`CATCH_UP_CAPS`]): up one when a large debt grew [`ESCALATE_DEBT`] beyond where the
    /// level was set (the CPU the sender gets does not repay it at this level); the level stays
    /// while the host is loaded (see [`LOADED_FOR`]).
    fn track_stall(&mut self, gentle: bool, debt: Duration, may_escalate: bool) {
        if debt <= LOADED_CREDIT {
            // On time again (within one late wake-up): the next large debt is a new stall.
            self.stalled = false;
        } else if debt > GENTLE_DEBT && !self.stalled {
            self.stalled = true;
            self.stats.stalls = self.stats.stalls.saturating_add(1);
        }
        if gentle {
            self.in_stall = false;
            return;
        }
        if !self.in_stall {
            self.in_stall = true;
            self.level_debt = debt;
        }
        if debt < self.level_debt {
            self.level_debt = debt;
        } else if may_escalate
            && debt >= self.level_debt + ESCALATE_DEBT
            && self.level + 1 < CATCH_UP_CAPS.len()
        {
            self.level += 1;
            self.level_debt = debt;
            self.stats.catch_up_level = self.stats.catch_up_level.max(self.level as u8);
        }
    }

    /// Drop sends older than 1 ms before the newest and keep the busiest 1 ms.
    fn count_last_ms(&mut self) {
        let Some(&(newest, _)) = self.last_ms.back() else {
            return;
        };
        while let Some(&(when, bytes)) = self.last_ms.front() {
            if newest.saturating_duration_since(when) >= Duration::from_millis(1) {
                self.last_ms.pop_front();
                self.last_ms_bytes -= bytes;
            } else {
                break;
            }
        }
        self.stats.busiest_1ms_bytes = self.stats.busiest_1ms_bytes.max(self.last_ms_bytes as u64);
    }

    /// Correct the time of the last booked send to when it really went (a sender that slept
    /// until its booked time wakes late on a loaded host, or up to [`EARLY`] before it), so
    /// the [`WINDOW`] counts it where it was sent; it then counts towards
    /// [`PacerStats::busiest_1ms_bytes`]. `t` is not before the previous send.
    pub(crate) fn sent_at(&mut self, t: Instant) {
        if self.kernel.is_some() {
            return;
        }
        if let Some(last) = self.recent.back_mut() {
            last.0 = t;
        }
        if let Some(last) = self.last_ms.back_mut() {
            last.0 = t;
        }
        self.count_last_ms();
    }

    /// The earliest time ≥ `t` at which `n` more bytes keep every [`WINDOW`] within
    /// [`WINDOW_CAP`] (sends older than a window before `t` are forgotten).
    ///
    /// The cap is never below one window of the schedule plus the send itself: a window of
    /// length W holds up to W × rate + n bytes of sends that are exactly on time. With
    /// datagrams of 0.7 ms or more at the rate (e.g. `-b 10M`, 1448 B: 1.16 ms), 1.9 ms of
    /// traffic is less than that, and the cap alone admitted one datagram per 1.2 ms when
    /// the schedule asked for one per 1.16 ms (`-b 10M` sent 9.6 Mbit/s).
    fn window_room(&mut self, n: usize, t: Instant) -> Instant {
        while let Some(&(when, bytes)) = self.recent.front() {
            if t.saturating_duration_since(when) >= self.window {
                self.recent.pop_front();
                self.recent_bytes -= bytes;
            } else {
                break;
            }
        }
        let cap = if self.level == 0 {
            self.window_cap
        } else {
            (self.rate * CATCH_UP_CAPS[self.level].as_secs_f64()) as usize
        };
        let cap = cap.max(self.window_bytes + n);
        let mut over = (self.recent_bytes + n).saturating_sub(cap);
        if over == 0 {
            return t;
        }
        // Wait until enough of the oldest sends have left the window.
        for &(when, bytes) in &self.recent {
            over = over.saturating_sub(bytes);
            if over == 0 {
                return (when + self.window).max(t);
            }
        }
        t
    }

    /// Wait until `n` bytes may go, then book them. Returns false if `stop` became true while
    /// waiting.
    ///
    /// No busy wait: the thread sleeps until the booked time less this host's usual
    /// oversleep (an EWMA of how late `thread::sleep` wakes), and a wake-up that comes at
    /// most [`EARLY`] (and at most that estimate) before the booked time sends at once
    /// rather than spinning or sleeping again. The send is recorded at the time it really
    /// went, so the busiest 1 ms is counted on real times; an early send never moves the
    /// schedule (`next`), so the average rate is unchanged. The [`WINDOW`] is 0.2 ms longer
    /// than 1 ms and `EARLY` is below that, so the busiest 1 ms stays within [`WINDOW_CAP`].
    pub(crate) fn take(&mut self, n: usize, stop: &dyn Fn() -> bool) -> bool {
        let at = self.book(n, Instant::now());
        loop {
            let now = Instant::now();
            let est = Duration::from_nanos(self.oversleep_ns as u64);
            let early = est.min(EARLY);
            if now + early >= at {
                self.sent_at(now);
                if self.plans_departures() {
                    self.plan_departures(now);
                }
                break;
            }
            if stop() {
                return false;
            }
            let rem = at - now;
            // rem > early here, so both choices are > 0: sleep the estimate short of the
            // booked time, or (when the estimate is longer than the wait) to `EARLY` before it.
            let ask = match rem.checked_sub(est) {
                Some(a) if !a.is_zero() => a,
                _ => rem - early,
            };
            let ask = ask.min(Duration::from_millis(50));
            let t0 = Instant::now();
            std::thread::sleep(ask);
            let over = t0.elapsed().saturating_sub(ask).as_nanos() as f64;
            self.oversleep_ns += (over.min(200_000.0) - self.oversleep_ns) / 16.0;
        }
        true
    }

    /// Bytes booked so far (every [`Pacer::book`] and [`Pacer::take`]): what the schedule
    /// has been charged for. A sender that sends every booked byte has `booked_bytes` equal
    /// to its bytes sent.
    #[cfg(test)]
    pub(crate) fn booked_bytes(&self) -> u64 {
        self.booked
    }

    /// Datagrams of `len` bytes per wake-up of a kernel-paced sender at `rate_bps` bits/s:
    /// about [`KERNEL_BATCH_TIME`] of traffic, 1..=`max`.
    pub(crate) fn kernel_batch_datagrams(rate_bps: u64, len: usize, max: usize) -> usize {
        let by_time = rate_bps as f64 / 8.0 * KERNEL_BATCH_TIME.as_secs_f64() / len.max(1) as f64;
        (by_time as usize).clamp(1, max.max(1))
    }

    /// Datagrams of `len` bytes per GSO super-datagram of a kernel-paced sender at
    /// `rate_bps` bits/s: about [`KERNEL_SKB_TIME`] of traffic, 1..=`max`.
    pub(crate) fn kernel_skb_datagrams(rate_bps: u64, len: usize, max: usize) -> usize {
        let by_time = rate_bps as f64 / 8.0 * KERNEL_SKB_TIME.as_secs_f64() / len.max(1) as f64;
        (by_time as usize).clamp(1, max.max(1))
    }

    /// Datagrams of `len` bytes per send (one sendmmsg call or one GSO super-datagram) at
    /// `rate_bps` bits/s: about [`BATCH_TIME`] of traffic, at least 1 and at most `max`, and
    /// never more bytes than one [`WINDOW_CAP`] at the rate (unless a single datagram is
    /// already more), so one send alone never exceeds the burst limit. `rate_bps` 0
    /// (unpaced): `max`.
    pub(crate) fn batch_datagrams(rate_bps: u64, len: usize, max: usize) -> usize {
        let max = max.max(1);
        if rate_bps == 0 {
            return max;
        }
        let len = len.max(1) as f64;
        let rate = rate_bps as f64 / 8.0;
        let by_time = (rate * BATCH_TIME.as_secs_f64() / len) as usize;
        let by_cap = (rate * WINDOW_CAP.as_secs_f64() / len) as usize;
        by_time.min(by_cap).clamp(1, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_hiccup_is_repaid_gently() {
        // 100 Mbit/s of 1448-byte datagrams (8.63 per ms); the sender wakes 1 ms late once.
        let mut p = Pacer::new(100_000_000, MAX_DEBT);
        let t0 = Instant::now();
        let mut now = t0;
        let mut times = Vec::new();
        for i in 0..400 {
            let at = p.book(1448, now);
            times.push(at.duration_since(t0).as_micros() as u64);
            now = if i == 50 {
                at + Duration::from_millis(1)
            } else {
                at
            };
        }
        let busiest = (0..times[times.len() - 1])
            .step_by(50)
            .map(|s| times.iter().filter(|t| **t >= s && **t < s + 1000).count())
            .max()
            .unwrap_or(0);
        // 1.2 x 8.63 = 10.4 datagrams in any 1 ms.
        assert!(busiest <= 10, "busiest 1 ms: {busiest} datagrams");
        // And the debt is repaid: 400 datagrams took the scheduled 46.3 ms (+ one datagram).
        let last = times[times.len() - 1];
        assert!((46_200..=46_500).contains(&last), "last at {last} us");
    }

    #[test]
    fn time_before_the_first_send_is_no_debt() {
        // A pacer made 300 ms before its first send (connection set-up): the first sends go
        // one per 115.84 µs at 100 Mbit/s of 1448-byte datagrams, not as a catch-up burst.
        let mut p = Pacer::new(100_000_000, MAX_DEBT);
        let t0 = Instant::now() + Duration::from_millis(300);
        let mut now = t0;
        let mut times = Vec::new();
        for _ in 0..20 {
            let at = p.book(1448, now);
            times.push(at.duration_since(t0).as_micros() as u64);
            now = at;
        }
        // 1 ms holds at most 9 datagrams at the rate (8.63 per ms), never 16.
        let in_first_ms = times.iter().filter(|t| **t < 1000).count();
        assert!(
            in_first_ms <= 9,
            "{in_first_ms} datagrams in the first ms: {times:?}"
        );
        assert_eq!(times[1], 115, "{times:?}");
    }

    /// A sender that sends each batch the moment the pacer allows it, on a simulated clock
    /// that can stall: the send times, in µs since the start.
    fn simulate(
        p: &mut Pacer,
        t0: Instant,
        len: usize,
        until_us: u64,
        stall: (u64, u64),
    ) -> Vec<u64> {
        let mut now = t0;
        let mut out = Vec::new();
        let mut stalled = false;
        loop {
            let at = p.book(len, now);
            let us = at.duration_since(t0).as_micros() as u64;
            if us >= until_us {
                return out;
            }
            out.push(us);
            now = at;
            if !stalled && us >= stall.0 {
                // The thread loses the CPU for stall.1 µs after this send.
                now += Duration::from_micros(stall.1);
                stalled = true;
            }
        }
    }

    /// Most sends in any window of `w` µs.
    fn busiest(sends: &[u64], w: u64) -> usize {
        let mut best = 0;
        let mut j = 0;
        for i in 0..sends.len() {
            while sends[i] - sends[j] >= w {
                j += 1;
            }
            best = best.max(i - j + 1);
        }
        best
    }

    #[test]
    fn a_stall_is_repaid_in_full_without_a_burst() {
        // 100 Mbit/s, 1250-byte datagrams: one per 100 µs. A 30 ms stall at 200 ms.
        let t0 = Instant::now();
        let mut p = Pacer::new(100_000_000, MAX_DEBT);
        p.next = t0;
        p.peak = t0;
        let s = simulate(&mut p, t0, 1250, 1_000_000, (200_000, 30_000));
        // The average holds: 1 s of schedule → 10000 datagrams (the stall repaid in full;
        // the old pacer forgave stalls > 100 ms and repaid at 1.05 ×).
        assert!((9998..=10_000).contains(&s.len()), "{} datagrams", s.len());
        // Repaid within the window: the busiest 1 ms carries at most 19 datagrams (1.9 ×),
        // never 2 ×.
        assert_eq!(busiest(&s, 1000), 19, "busiest 1 ms");
        // Fast repay down to GENTLE_DEBT: (30 − 20) / 0.58 = 17 ms after the stall; the stall
        // marked the host as loaded, so the last 20 ms go at 1.25 × (80 ms): by 300 ms about
        // 6 ms behind the schedule (at 1.05 × it was still 12–20 ms: 2800–2880 datagrams).
        let by = s.iter().filter(|&&t| t < 300_000).count();
        assert!((2920..=2960).contains(&by), "{by} datagrams by 300 ms");
        // Before the stall, no catch-up: 10 per ms.
        assert_eq!(busiest(&s[..1900], 1000), 10);
    }

    /// Like [`simulate`] for a loaded host: every wait for a later send time wakes `late_us`
    /// µs late (the wake-up latency behind busy processes). The send times, µs since the start.
    fn simulate_late_wakeups(
        p: &mut Pacer,
        t0: Instant,
        len: usize,
        until_us: u64,
        late_us: u64,
    ) -> Vec<u64> {
        let mut now = t0;
        let mut out = Vec::new();
        loop {
            let at = p.book(len, now);
            if at > now {
                now = at + Duration::from_micros(late_us);
                p.sent_at(now);
            }
            let us = now.duration_since(t0).as_micros() as u64;
            if us >= until_us {
                return out;
            }
            out.push(us);
        }
    }

    #[test]
    fn late_wakeups_are_repaid_within_the_window_limit() {
        // 100 Mbit/s of 1250-byte datagrams (one per 100 µs) for 1 s, every sleep waking
        // `late` µs late (a loaded host). Each late wake-up may send up to 1.9 ms of traffic
        // (19 datagrams) when the last 1.2 ms leave room, so the sender keeps the rate while it
        // gets the CPU often enough: ≥ 99.8 % up to 1.5 ms late and 97.9 % at 1.7 ms, except
        // 0.75–1.1 ms late, where two bursts share one window (93, 89, 85, 81 %). Beyond that
        // each cycle is the window plus the lateness: 2 ms late gives 1.9 / (1.2 + 2) = 59 %
        // in this first second; a host loaded longer than ESCALATE_AFTER gets the catch-up
        // levels (see `a_core_short_of_cpu_repays_at_a_higher_level`). (The old 250 µs bucket at 1.4 × sent about one bucket
        // per wake-up: 37–55 % measured under load. Before LOADED_CREDIT the last 20 ms of
        // debt was never repaid: 9780–9810 of 10000 at 0.5–0.8 and 1.2–1.7 ms late; the
        // credit's burst of 1.2 × 1.25 ms moved the start of the dip from 0.9 to 0.75 ms.)
        let cases = [
            (100, 9990..=10_000),
            (500, 9990..=10_000),
            (700, 9990..=10_000),
            (800, 9250..=9400),
            (900, 8800..=8950),
            (1000, 8400..=8550),
            (1100, 8050..=8150),
            (1200, 9980..=10_000),
            (1500, 9980..=10_000),
            (1700, 9750..=9810),
            (2000, 5780..=5880),
        ];
        for (late, want) in cases {
            let t0 = Instant::now();
            let mut p = Pacer::new(100_000_000, MAX_DEBT);
            let s = simulate_late_wakeups(&mut p, t0, 1250, 1_000_000, late);
            assert!(
                want.contains(&s.len()),
                "{late} µs late: {} of 10000 datagrams, want {want:?}",
                s.len()
            );
            // Never more than 19 in any 1 ms (1.9 ×) at level 0, and never more than the
            // level's bound (3.4 ×, 5 ×) when the debt kept growing.
            let peak = busiest(&s, 1000);
            let bound = (p.stats().catch_up_bound() * 10.0).round() as usize;
            assert!(
                peak <= bound,
                "{late} µs late: busiest 1 ms {peak}, bound {bound}"
            );
        }
    }

    /// An RFC 2544 burst trial sends its burst and then waits out the trial: the time it did
    /// not mean to send is no debt (read at `now`, a 3 s trial said 3,000 ms behind and was
    /// judged generator-bound).
    #[test]
    fn a_sender_that_stopped_asking_owes_nothing() {
        let mut p = Pacer::new(100_000_000, MAX_DEBT);
        let t0 = Instant::now();
        let mut at = t0;
        for _ in 0..10 {
            at = p.book(1448, at);
            p.sent_at(at);
        }
        std::thread::sleep(Duration::from_millis(30));
        let st = p.stats();
        assert_eq!(st.owed_ms, 0.0, "{st:?}");
        assert_eq!(st.max_lag_ms, 0.0, "{st:?}");
        // A sender 40 ms behind at its last send owes those 40 ms.
        let mut q = Pacer::new(100_000_000, MAX_DEBT);
        let first = q.book(1448, t0);
        q.sent_at(first);
        q.book(1448, first + Duration::from_millis(40));
        let owed = q.stats().owed_ms;
        assert!((39.8..=40.0).contains(&owed), "{owed}");
    }

    #[test]
    fn a_core_short_of_cpu_repays_at_a_higher_level() {
        // Issue 39 item 2: sender, receiver softirq and two busy loops on one core. Every
        // sleep wakes `late` ms late (about one CFS slice of each other task), for 5 s of
        // schedule at 100 Mbit/s in the UDP sender's 0.8 ms batches. At the 1.9 ms cap each
        // wake-up sent 1.9 ms of traffic per late + 1.2 ms: 59 % at 2 ms, 45 % at 3 ms and 30 %
        // at 5 ms (the bench measured 65–85 %). With the catch-up levels the debt stops
        // growing once the cap covers a cycle, after the first second at the 1.9 × bound
        // (ESCALATE_AFTER): ≥ 98 % up to 3 ms late (88 % at 3.5), and the busiest 1 ms stays within the top
        // level's 5 ×. At 5 ms late the top level's 5 ms per 6.2 ms cycle is the limit.
        let rate = 100_000_000u64;
        let n = Pacer::batch_datagrams(rate, 1448, 256) * 1448;
        let per_ms = rate as f64 / 8.0 / 1000.0;
        for (late_us, want) in [(2000u64, 0.985), (3000, 0.98), (3500, 0.85), (5000, 0.65)] {
            let t0 = Instant::now();
            let mut p = Pacer::new(rate, MAX_DEBT);
            let (mut now, mut sent) = (t0, 0u64);
            let until = t0 + Duration::from_secs(5);
            loop {
                let at = p.book(n, now);
                if at > now {
                    now = at + Duration::from_micros(late_us);
                }
                if now >= until {
                    break;
                }
                p.sent_at(now);
                sent += n as u64;
            }
            let share = sent as f64 / (rate as f64 / 8.0 * 5.0);
            let st = p.stats();
            assert!(share >= want, "{late_us} µs late: sent {share:.4}, {st:?}");
            assert!(share <= 1.0005, "{late_us} µs late: ahead, {share:.4}");
            let busiest = st.busiest_1ms_bytes as f64 / per_ms;
            assert!(
                busiest <= 5.0,
                "{late_us} µs late: busiest 1 ms {busiest:.2} x"
            );
            assert!(st.catch_up_level >= 1, "{late_us} µs late: {st:?}");
            assert!(st.stalls >= 1, "{st:?}");
        }
    }

    #[test]
    fn a_loaded_host_repays_its_small_debt_too() {
        // The field case of `benches/udp-load.sh PIN=1` (two busy loops on the sender's core):
        // 100 Mbit/s in batches of 0.8 ms, most wake-ups on time and every 40th 4 ms late.
        // At 1.05 × the 39 on-time batches repaid 1.5 ms of each 4 ms, the debt grew to
        // GENTLE_DEBT and stayed: 2 s sent 98.9 % of the schedule. Loaded (the first
        // debt beyond GENTLE_DEBT marks it), the bucket runs at 1.25 × and repays 6 ms per
        // 40 batches: ≥ 99.8 % by 2 s, and no 1 ms holds more than two batches.
        let rate = 100_000_000u64;
        let n = Pacer::batch_datagrams(rate, 1448, 256) * 1448;
        let t0 = Instant::now();
        let mut p = Pacer::new(rate, MAX_DEBT);
        let (mut now, mut wakes, mut sent) = (t0, 0u64, 0u64);
        let until = t0 + Duration::from_secs(2);
        loop {
            let at = p.book(n, now);
            if at > now {
                wakes += 1;
                now = at
                    + if wakes % 40 == 0 {
                        Duration::from_millis(4)
                    } else {
                        Duration::ZERO
                    };
            }
            if now >= until {
                break;
            }
            p.sent_at(now);
            sent += n as u64;
        }
        let share = sent as f64 / (rate as f64 / 8.0 * 2.0);
        assert!(share >= 0.998, "sent {:.4} of 2 s at the rate", share);
        assert!(share <= 1.0005, "sent {:.4}: ahead of the schedule", share);
        let per_ms = rate as f64 / 8.0 / 1000.0;
        let busiest = p.stats().busiest_1ms_bytes as f64;
        assert!(
            busiest <= 2.0 * n as f64,
            "busiest 1 ms {busiest} bytes, batch {n}"
        );
        assert!(
            busiest < 1.9 * per_ms + 1.0,
            "busiest 1 ms {:.2} x",
            busiest / per_ms
        );
    }

    #[test]
    fn every_rate_and_length_is_reached_on_the_pacers_clock() {
        // A sender that sends each datagram the moment the pacer allows (an idle host), for
        // 2 s of schedule or 4000 datagrams, whichever is shorter: every rate from 1 Mbit/s
        // to 10 Gbit/s and every datagram length from 64 to 65507 bytes reaches ≥ 99.9 % of
        // the rate. (The window cap alone once held rates whose datagram gap is 0.95–1.2 ms
        // to one datagram per 1.2 ms: -b 10M at 1448 B sent 9.6 Mbit/s, -l 8000 -b 60M 47.7.)
        let rates: [u64; 13] = [
            1_000_000,
            8_000_000,
            10_000_000,
            11_000_000,
            12_000_000,
            60_000_000,
            100_000_000,
            120_000_000,
            400_000_000,
            1_000_000_000,
            2_500_000_000,
            5_000_000_000,
            10_000_000_000,
        ];
        let lens: [usize; 9] = [64, 512, 1000, 1448, 1470, 8000, 16000, 32768, 65507];
        for rate in rates {
            for len in lens {
                let gap_s = len as f64 * 8.0 / rate as f64;
                let n = ((2.0 / gap_s) as usize).clamp(50, 4000);
                let t0 = Instant::now();
                let mut p = Pacer::new(rate, MAX_DEBT);
                let mut now = t0;
                let mut last = t0;
                for _ in 0..n {
                    let at = p.book(len, now);
                    p.sent_at(at);
                    last = at;
                    now = at;
                }
                // n datagrams on schedule take (n − 1) gaps from the first send.
                let span = last.duration_since(t0).as_secs_f64();
                let want = (n - 1) as f64 * gap_s;
                let share = want / span.max(1e-12);
                assert!(
                    share >= 0.999,
                    "-b {rate} -l {len}: {:.2} % of the rate ({n} datagrams in {span:.6} s, \
                     schedule {want:.6} s)",
                    share * 100.0
                );
            }
        }
    }

    #[test]
    fn the_field_cases_are_reached() {
        // The rates of the report: -b 10M/11M/12M at 1448 B, -l 1000 -b 8M, -l 8000 -b 60M,
        // -l 16000 -b 120M, each within 0.1 % over 1 s of schedule.
        for (rate, len) in [
            (10_000_000u64, 1448usize),
            (11_000_000, 1448),
            (12_000_000, 1448),
            (8_000_000, 1000),
            (60_000_000, 8000),
            (120_000_000, 16000),
        ] {
            let t0 = Instant::now();
            let mut p = Pacer::new(rate, MAX_DEBT);
            let s = simulate(&mut p, t0, len, 1_000_000, (u64::MAX, 0));
            let want = rate as f64 / (len as f64 * 8.0);
            assert!(
                s.len() as f64 >= want * 0.999,
                "-b {rate} -l {len}: {} datagrams in 1 s, want {want:.1}",
                s.len()
            );
        }
    }

    #[test]
    fn debt_beyond_the_bound_is_written_off() {
        let t0 = Instant::now();
        let mut p = Pacer::new(100_000_000, Duration::from_millis(50));
        p.next = t0;
        p.peak = t0;
        // A 100 ms stall: only 50 ms (500 datagrams) are repaid, the rest written off.
        let s = simulate(&mut p, t0, 1250, 1_000_000, (50_000, 100_000));
        assert!((9495..=9501).contains(&s.len()), "{} datagrams", s.len());
        assert!(busiest(&s, 1000) <= 19);
    }

    #[test]
    fn real_time_pacing_never_runs_ahead() {
        // 8 Mbit/s = 1 MB/s, 1000-byte datagrams: one per ms. On the real clock (other tests
        // share the cores, so only "never ahead" and "no burst" are asserted).
        let _ = crate::engine::udp::fine_timer_slack();
        let mut p = Pacer::new(8_000_000, MAX_DEBT);
        let t = Instant::now();
        let mut n = 0;
        while t.elapsed() < Duration::from_millis(200) {
            p.take(1000, &|| false);
            n += 1;
        }
        assert!(n <= 202, "{n} datagrams in 200 ms");
        std::thread::sleep(Duration::from_millis(30));
        let t = Instant::now();
        let mut k = 0;
        while t.elapsed() < Duration::from_millis(10) {
            p.take(1000, &|| false);
            k += 1;
        }
        // A 1000-byte datagram is 1 ms at the rate, so a window (1.2 ms) holds its schedule
        // plus one datagram: 2. Ten ms hold at most 9 windows' pairs, and the real clock's
        // edges one more pair: ≤ 20, not the 30 a burst would send.
        assert!(k <= 20, "{k} datagrams in 10 ms after a 30 ms stall");
    }

    #[test]
    fn a_batch_never_carries_more_than_the_window_cap() {
        // Every rate and length, with the sender's 64-datagram limit and with none: a batch is
        // at most 0.8 ms of traffic (so at most one window cap, 1.9 ms) unless one datagram
        // is already more, and at least one datagram.
        for rate in [
            1_000_000u64,
            10_000_000,
            100_000_000,
            400_000_000,
            1_000_000_000,
            10_000_000_000,
            100_000_000_000,
        ] {
            for len in [18usize, 64, 512, 1448, 8000, 65507] {
                for max in [64usize, usize::MAX] {
                    let n = Pacer::batch_datagrams(rate, len, max);
                    let bytes = (n * len) as f64;
                    let per_s = rate as f64 / 8.0;
                    let what = format!("-b {rate} -l {len} max {max}: {n} datagrams");
                    assert!(n >= 1 && n <= max, "{what}");
                    if n > 1 {
                        assert!(bytes <= per_s * WINDOW_CAP.as_secs_f64(), "{what}");
                        assert!(bytes <= per_s * BATCH_TIME.as_secs_f64(), "{what}");
                    }
                }
            }
        }
        // Unpaced: the sender's limit.
        assert_eq!(Pacer::batch_datagrams(0, 1448, 64), 64);
    }

    #[test]
    fn batched_senders_keep_the_rate_and_the_burst_limit() {
        // A sender that sends batches of `batch_datagrams` (at most 256, as the UDP sender
        // does), each up to EARLY before its booked time (a wake-up a little
        // early sends at once), on the pacer's clock: every rate × length reaches ≥ 99.9 %
        // and the busiest 1 ms of real send times stays below 2 × the rate (the window cap).
        for rate in [
            10_000_000u64,
            100_000_000,
            400_000_000,
            1_000_000_000,
            2_500_000_000,
        ] {
            for len in [64usize, 512, 1448, 8000] {
                let batch = Pacer::batch_datagrams(rate, len, 256);
                let n = batch * len;
                let t0 = Instant::now();
                let mut p = Pacer::new(rate, MAX_DEBT);
                let mut now = t0;
                let mut last = t0;
                let mut sends = 0u64;
                let until = t0 + Duration::from_millis(500);
                while now < until {
                    let at = p.book(n, now);
                    let went = at.checked_sub(EARLY).unwrap_or(at).max(last).max(now);
                    p.sent_at(went);
                    last = went;
                    now = went;
                    sends += 1;
                }
                let per_s = rate as f64 / 8.0;
                let span = last.duration_since(t0).as_secs_f64();
                // `sends` batches on schedule take (sends − 1) batch times from the first.
                let want = (sends - 1) as f64 * n as f64 / per_s;
                let what = format!("-b {rate} -l {len}, {batch} per send");
                assert!(
                    want / span >= 0.999,
                    "{what}: {want} s of schedule in {span} s"
                );
                let busiest = p.stats().busiest_1ms_bytes as f64;
                // (A single datagram longer than 1 ms at the rate, -l 8000 at 10M, is alone.)
                assert!(
                    busiest < 2.0 * per_s * 1e-3 || busiest <= n as f64,
                    "{what}: busiest 1 ms {busiest} bytes"
                );
            }
        }
    }

    #[test]
    fn who_paces_fq_present_absent_forced() {
        let k = |port: &str, forced| PacedBy::Kernel {
            port: PortName::new(port),
            forced,
        };
        let u = |why| PacedBy::UserSpace { why };
        // auto: the kernel where fq is, else user space.
        assert_eq!(
            decide_pacing(PacingMode::Auto, Some("eth1"), false),
            k("eth1", false)
        );
        assert_eq!(
            decide_pacing(PacingMode::Auto, None, false),
            u(UserWhy::NoFq)
        );
        // forced either way.
        assert_eq!(decide_pacing(PacingMode::Kernel, None, false), k("", true));
        assert_eq!(
            decide_pacing(PacingMode::Kernel, Some("a0"), false),
            k("a0", true)
        );
        assert_eq!(
            decide_pacing(PacingMode::User, Some("a0"), false),
            u(UserWhy::Asked)
        );
        assert_eq!(
            decide_pacing(PacingMode::User, None, false),
            u(UserWhy::Asked)
        );
        // --fq-rate set the socket's rate: the user's, left alone (user space paces -b).
        assert_eq!(
            decide_pacing(PacingMode::Auto, Some("a0"), true),
            u(UserWhy::FqRate)
        );
        // --udp-pacing kernel with --fq-rate: overridden, and the words say so.
        assert_eq!(
            decide_pacing(PacingMode::Kernel, Some("a0"), true),
            u(UserWhy::FqRateOverKernel)
        );
        assert_eq!(
            decide_pacing(PacingMode::Kernel, None, true),
            u(UserWhy::FqRateOverKernel)
        );
        assert_eq!(
            u(UserWhy::FqRateOverKernel).sentence(),
            "user-space token bucket (--udp-pacing kernel overridden: the socket's pacing rate is --fq-rate's)"
        );
        assert_eq!(
            u(UserWhy::FqRate).sentence(),
            "user-space token bucket (the socket's pacing rate is --fq-rate's)"
        );
        // The words of end.pacing.
        assert_eq!(
            k("eth1", false).sentence(),
            "kernel (fq on eth1, SO_MAX_PACING_RATE)"
        );
        assert_eq!(
            k("a0", true).sentence(),
            "kernel (fq on a0, SO_MAX_PACING_RATE, forced by --udp-pacing kernel)"
        );
        assert!(k("", true).sentence().contains("no fq on the egress port"));
        assert_eq!(u(UserWhy::NoFq).sentence(), "user-space token bucket");
        assert!(u(UserWhy::Asked)
            .sentence()
            .starts_with("user-space token bucket (asked"));
        assert!(k("a0", false).is_kernel() && !u(UserWhy::NoFq).is_kernel());
        // Port names: at most 15 bytes, a JSON string both ways.
        assert_eq!(
            PortName::new("a-very-long-port-name").as_str(),
            "a-very-long-por"
        );
        let j = serde_json::to_string(&k("eth1", false)).unwrap_or_default();
        assert_eq!(j, r#"{"by":"kernel","port":"eth1","forced":false}"#);
        let back: PacedBy = serde_json::from_str(&j).unwrap_or(u(UserWhy::Asked));
        assert_eq!(back, k("eth1", false));
        assert_eq!(PacingMode::parse("kernel"), Some(PacingMode::Kernel));
        assert_eq!(PacingMode::parse("Kernel"), None);
    }

    /// A kernel-paced sender on the pacer's clock for `secs` of schedule: batches of
    /// `kernel_batch_datagrams`, each sent when booked, the thread stalled `stall` once at
    /// 100 ms. Returns (wake-ups, share of the schedule sent, the pacer, the most bytes ever
    /// waiting in the modelled fq queue, as time at its pacing rate).
    fn kernel_run(rate: u64, len: usize, secs: f64, stall: Duration) -> (u64, f64, Pacer, f64) {
        let n = Pacer::kernel_batch_datagrams(rate, len, 1024) * len;
        let t0 = Instant::now();
        let mut p = Pacer::new_kernel(rate, MAX_DEBT, true);
        let drain = rate as f64 / 8.0 * KERNEL_MARGIN;
        let (mut now, mut sent, mut wakes, mut queue, mut last) = (t0, 0u64, 0u64, 0.0f64, t0);
        let mut stalled = false;
        let until = t0 + Duration::from_secs_f64(secs);
        loop {
            let at = p.book(n, now);
            if at > now {
                wakes += 1;
                now = at;
            }
            if !stalled && now >= t0 + Duration::from_millis(100) {
                stalled = true;
                now += stall;
            }
            if now >= until {
                break;
            }
            // fq's queue: drained since the last hand-over, then this batch.
            let dt = now.duration_since(last).as_secs_f64();
            queue = (queue - dt * drain).max(0.0) + n as f64;
            last = now;
            p.sent_at(now);
            sent += n as u64;
            let q_ms = queue / drain * 1000.0;
            assert!(
                q_ms <= 12.0 + 1e-6 + n as f64 / drain * 1000.0,
                "{q_ms} ms queued"
            );
        }
        let share = sent as f64 / (rate as f64 / 8.0 * secs);
        (wakes, share, p, queue)
    }

    #[test]
    fn kernel_pacing_keeps_the_rate_in_a_fifth_of_the_wake_ups() {
        // 1000M and 100M of 1448 bytes for 2 s on time: 125 wake-ups a second (8 ms batches)
        // against 1,250 (0.8 ms) in user space, the schedule held within 0.1 %.
        for rate in [1_000_000_000u64, 100_000_000] {
            let (wakes, share, p, _) = kernel_run(rate, 1448, 2.0, Duration::ZERO);
            // (Up to one 8 ms batch over 2 s ahead: handed over when booked.)
            assert!((0.999..=1.005).contains(&share), "-b {rate}: {share}");
            assert!(
                (240..=260).contains(&wakes),
                "-b {rate}: {wakes} wake-ups in 2 s"
            );
            // The busiest 1 ms fq lets out: its pacing rate, 1.25 × the rate.
            let per_ms = rate as f64 / 8.0 / 1000.0;
            let busiest = p.stats().busiest_1ms_bytes as f64 / per_ms;
            assert!((1.0..=1.2501).contains(&busiest), "-b {rate}: {busiest}");
            let mut u = Pacer::new(rate, MAX_DEBT);
            let n = Pacer::batch_datagrams(rate, 1448, 256) * 1448;
            let (mut now, mut uw) = (Instant::now(), 0u64);
            let until = now + Duration::from_secs(2);
            while now < until {
                let at = u.book(n, now);
                if at > now {
                    uw += 1;
                    now = at;
                }
                u.sent_at(now);
            }
            assert!(
                uw >= 4 * wakes,
                "-b {rate}: user space {uw}, kernel {wakes}"
            );
        }
    }

    #[test]
    fn unspread_kernel_pacing_reports_its_batches_as_the_busiest_ms() {
        // --udp-pacing kernel on a port without fq: each 8 ms hand-over (1000M, 690 datagrams
        // of 1448 bytes: 999,120 bytes) leaves as one burst. The pacer's own figure is that
        // batch, 8 × the rate's 125,000 bytes per ms; with fq, its pacing rate (156,250).
        let n = Pacer::kernel_batch_datagrams(1_000_000_000, 1448, 1024) * 1448;
        assert_eq!(n, 999_120);
        for (spread, want) in [(false, 999_120u64), (true, 156_250)] {
            let mut p = Pacer::new_kernel(1_000_000_000, MAX_DEBT, spread);
            let mut now = Instant::now();
            for _ in 0..20 {
                now = p.book(n, now);
                p.sent_at(now);
            }
            assert_eq!(p.stats().busiest_1ms_bytes, want, "spread {spread}");
        }
    }

    #[test]
    fn kernel_pacing_repays_a_stall_without_overfilling_fq() {
        // A 50 ms stall at 1000M: the pacer hands over at most 12 ms of fq's time beyond what
        // has drained (asserted at every hand-over in kernel_run), and the debt is repaid at
        // fq's margin (0.25 ×): 200 ms, well within 2 s. A 3 s stall: 2 s written off (less the
        // 8 ms already in fq), and 0.25 × leaves half of the 1 s kept unpaid after 1.9 s.
        let (_, share, p, _) = kernel_run(1_000_000_000, 1448, 2.0, Duration::from_millis(50));
        assert!((0.999..=1.005).contains(&share), "{share}");
        let st = p.stats();
        assert_eq!(st.stalls, 1, "{st:?}");
        // The stall less the 8 ms batch already handed to fq (which covered that much of it).
        assert!((41.0..=42.5).contains(&st.max_lag_ms), "{st:?}");
        let (_, share, p, _) = kernel_run(100_000_000, 1448, 5.0, Duration::from_secs(3));
        assert!(p.stats().written_off_ms >= 1990.0, "{:?}", p.stats());
        assert!(share < 0.7, "{share}");
    }

    #[test]
    fn schedule_times_become_monotonic_ns_overflow_checked() {
        let base = Instant::now();
        let later = base + Duration::from_micros(1500);
        // Forward and backward from one reading of both clocks, to the nanosecond.
        assert_eq!(txtime_ns(1_000_000_000, base, later), Some(1_001_500_000));
        assert_eq!(txtime_ns(1_000_000_000, later, base), Some(998_500_000));
        assert_eq!(txtime_ns(42, base, base), Some(42));
        // Never a wrapped time: past u64::MAX, or before 0.
        assert_eq!(txtime_ns(u64::MAX - 10, base, later), None);
        assert_eq!(txtime_ns(1_000, later, base), None);
        assert_eq!(txtime_ns(u64::MAX - 1_500_000, base, later), Some(u64::MAX));
    }

    /// A txtime sender on the pacer's clock: batches of 8 ms in messages of 0.5 ms, each
    /// handed over when the pacer says; one stall of `stall` at 100 ms. Returns the pacer,
    /// every message's (departure, bytes) in order, and the most messages ever waiting in fq
    /// (handed over, not departed) right after a hand-over.
    fn txtime_run(rate: u64, secs: f64, stall: Duration) -> (Pacer, Vec<(Instant, usize)>, usize) {
        let len = 1448;
        let unit = Pacer::kernel_skb_datagrams(rate, len, 44) * len;
        let n = Pacer::kernel_batch_datagrams(rate, len, 4096) * len;
        let mut p = Pacer::new_kernel_txtime(rate, MAX_DEBT, unit);
        let t0 = Instant::now();
        let (mut now, mut out, mut stalled) = (t0, Vec::new(), false);
        let mut queued = 0;
        let until = t0 + Duration::from_secs_f64(secs);
        while now < until {
            now = now.max(p.book(n, now));
            if !stalled && now >= t0 + Duration::from_millis(100) {
                stalled = true;
                now += stall;
            }
            let d = p.plan_departures(now).to_vec();
            assert_eq!(d.len(), n.div_ceil(unit));
            for (i, t) in d.iter().enumerate() {
                // Never before the hand-over, never beyond the furthest ahead.
                assert!(*t >= now && *t <= now + TXTIME_MAX_AHEAD);
                out.push((*t, unit.min(n - i * unit)));
            }
            queued = queued.max(out.iter().rev().take_while(|(t, _)| *t > now).count());
        }
        (p, out, queued)
    }

    /// The most bytes leaving in any 1 ms, each message at its departure as one burst.
    fn busiest_ms(d: &[(Instant, usize)]) -> usize {
        let mut most = 0;
        for (i, (t, _)) in d.iter().enumerate() {
            let sum: usize = d[i..]
                .iter()
                .take_while(|(u, _)| u.duration_since(*t) < Duration::from_millis(1))
                .map(|(_, b)| b)
                .sum();
            most = most.max(sum);
        }
        most
    }

    #[test]
    fn txtime_departures_keep_the_schedule_on_time() {
        // 100M on time: every message departs on its schedule (0.5 ms of traffic each, one
        // every 0.5 ms, in order), each batch handed over 4 ms before its first departure.
        let (p, d, queued) = txtime_run(100_000_000, 1.0, Duration::ZERO);
        // Handed over 4 ms ahead: that (9 messages of 4 datagrams, 0.46 ms each) and the 8 ms
        // batch (18) wait in fq.
        assert!(queued <= 27, "{queued}");
        let rate = 100e6 / 8.0;
        let t0 = d[0].0;
        let mut bytes = 0usize;
        for (t, b) in &d {
            let on = Duration::from_secs_f64(bytes as f64 / rate);
            let at = t.duration_since(t0);
            assert!(
                at.abs_diff(on) < Duration::from_micros(2),
                "{at:?} vs {on:?}"
            );
            bytes += b;
        }
        assert!(d.windows(2).all(|w| w[0].0 <= w[1].0));
        // The busiest 1 ms: the rate and one message (5 datagrams of 1448 at 100M: 7,240
        // bytes) at most; the pacer's own figure counts the same.
        let per_ms = rate / 1000.0;
        let most = busiest_ms(&d) as f64 / per_ms;
        assert!((1.0..=1.6).contains(&most), "{most}");
        assert_eq!(p.stats().busiest_1ms_bytes as usize, busiest_ms(&d));
        assert_eq!(p.stats().stalls, 0);
    }

    #[test]
    fn txtime_repays_a_stall_at_twice_the_rate() {
        // 400M, a 300 ms stall at 100 ms: what was owed departs at 2 x the rate, so after
        // 300 ms more the schedule is met again, and 3 s of schedule are all sent by 3 s
        // (+ the last batch's lead). The busiest 1 ms: 2 x and one 0.5 ms message, 2.5 x.
        let rate = 400_000_000u64;
        let (p, d, queued) = txtime_run(rate, 3.0, Duration::from_millis(300));
        let per_s = rate as f64 / 8.0;
        let t0 = d[0].0;
        let sent_by = |t: Duration| -> f64 {
            d.iter()
                .filter(|(u, _)| u.duration_since(t0) < t)
                .map(|(_, b)| *b as f64)
                .sum::<f64>()
        };
        // Right after the stall (400 ms): 100 ms sent of 400 (and the 8 ms queued).
        let at400 = sent_by(Duration::from_millis(400)) / per_s;
        assert!((0.10..=0.12).contains(&at400), "{at400}");
        // Repaid at 2 x: by 700 ms the schedule is met (within one batch).
        let at700 = sent_by(Duration::from_millis(700)) / per_s;
        assert!(at700 >= 0.7 - 0.01, "{at700}");
        let at3 = sent_by(Duration::from_secs(3)) / (per_s * 3.0);
        assert!((0.995..=1.005).contains(&at3), "{at3}");
        let most = busiest_ms(&d) as f64 / (per_s / 1000.0);
        assert!((1.9..=2.51).contains(&most), "{most}");
        assert_eq!(p.stats().busiest_1ms_bytes as usize, busiest_ms(&d));
        assert_eq!(p.stats().stalls, 1);
        // fq never holds more than KERNEL_QUEUE of departures at 2 x (49 messages of 17
        // datagrams, 0.25 ms each at 2 x, some of them a batch's shorter last one) and the
        // batch just handed over (17): under 70, below its per-flow limit of 100.
        assert!((45..=70).contains(&queued), "{queued}");
    }

    #[test]
    fn pacing_words() {
        assert_eq!(Pacing::UserSpace.as_str(), "user-space token bucket");
    }

    #[test]
    fn stats_name_the_stall_and_the_busiest_ms() {
        // 100 Mbit/s of 1448-byte datagrams; the sender loses the CPU for 8 ms once.
        let mut p = Pacer::new(100_000_000, MAX_DEBT);
        let t0 = Instant::now();
        let mut now = t0;
        for i in 0..2000 {
            let at = p.book(1448, now);
            p.sent_at(at);
            now = if i == 500 {
                at + Duration::from_millis(8)
            } else {
                at
            };
        }
        let st = p.stats();
        // The lag is the stall less the one datagram (116 µs) the schedule had advanced by.
        assert!((7.85..7.9).contains(&st.max_lag_ms), "{st:?}");
        // An 8 ms debt is small (GENTLE_DEBT): repaid at 1.05 x, so the busiest 1 ms holds
        // 9-11 datagrams (12,500 bytes at the rate), far from the 1.9 x window cap.
        assert!((12_500..=16_000).contains(&st.busiest_1ms_bytes), "{st:?}");
        // A 40 ms stall is repaid within the window cap (1.9 ms of traffic in 1.2 ms).
        let mut w = Pacer::new(100_000_000, MAX_DEBT);
        let mut now = t0;
        for i in 0..2000 {
            let at = w.book(1448, now);
            w.sent_at(at);
            now = if i == 500 {
                at + Duration::from_millis(40)
            } else {
                at
            };
        }
        let ws = w.stats();
        assert!((20_000..=25_200).contains(&ws.busiest_1ms_bytes), "{ws:?}");
        assert!((12_500..=25_200).contains(&st.busiest_1ms_bytes), "{st:?}");
        assert_eq!(st.written_off_ms, 0.0);
        // A 3 s stall: 2 s beyond MAX_DEBT are written off.
        let mut q = Pacer::new(100_000_000, MAX_DEBT);
        let at = q.book(1448, t0);
        q.sent_at(at);
        q.book(1448, at + Duration::from_secs(3));
        let st = q.stats();
        assert!((1999.0..2001.0).contains(&st.written_off_ms), "{st:?}");
        assert!((2999.0..3001.0).contains(&st.max_lag_ms), "{st:?}");
    }
}
