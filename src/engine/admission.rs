//! Fair admission for the board's servers (iperf3 sessions, the payload server, the TCP sink
//! and source): a fixed number of slots, a cap per source address, a smaller cap on the slots
//! one source may hold while *pending* (not yet doing useful work: a session that has not
//! finished its parameter exchange or opened its streams, a connection that has not sent its
//! request or that moves almost nothing), and eviction: when the table is full, the oldest
//! pending entry of the busiest source makes room for a source that holds fewer, before
//! anyone is refused. Idle connections from a few addresses cannot lock out the rest.
//!
//! Pure bookkeeping, no I/O: the holder of a [`Ticket`] watches [`Ticket::evicted`] and ends
//! its work when told. Not for: deadlines (each server keeps its own timers).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The caps of one table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Slots in all.
    pub max: usize,
    /// Slots one source address may hold (pending or not).
    pub per_source: usize,
    /// Slots one source address may hold while pending.
    pub pending_per_source: usize,
    /// A source at its pending cap may replace its own oldest pending entry once that entry
    /// is this old (a client retrying after its stuck attempt is not refused).
    pub replace_own_after: Duration,
    /// Fair share of *running* entries too: when the table is full and no pending entry can
    /// go, a source also gives up its newest running entry to a source that would still
    /// hold at least two fewer after admission (see [`Admission::admit`]). Only for holders
    /// that watch [`Ticket::evicted`] for the whole of their work (the iperf3 server's
    /// sessions); false keeps running entries safe (they are then only capped per source).
    pub fair_share: bool,
}

/// Why [`Admission::admit`] refused a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The source already holds [`Limits::pending_per_source`] pending entries, all younger
    /// than [`Limits::replace_own_after`].
    SourcePending,
    /// The source already holds [`Limits::per_source`] slots and none of them is pending.
    SourceFull,
    /// Every slot is taken and no other source holds more than this one would, with a
    /// pending entry to give up.
    Busy,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::SourcePending => "too many unfinished sessions from this address",
            Refused::SourceFull => "this address holds its share of the server already",
            Refused::Busy => "every slot is taken by active clients",
        })
    }
}

/// Told to an entry that was evicted.
#[derive(Default)]
struct Evict {
    flag: AtomicBool,
    notify: Notify,
}

struct Entry {
    id: u64,
    source: IpAddr,
    since: Instant,
    pending: bool,
    /// What the holder reserved elsewhere (e.g. receive-buffer bytes), so
    /// [`Admission::evict_holding`] can free it.
    holds: u64,
    evict: Arc<Evict>,
}

#[derive(Default)]
struct Table {
    entries: Vec<Entry>,
    next: u64,
    evictions: u64,
}

/// A table of slots shared by one server's accept loop and its connections.
#[derive(Clone)]
pub(crate) struct Admission {
    table: Arc<Mutex<Table>>,
    limits: Limits,
}

/// One admitted slot; freed when dropped.
pub(crate) struct Ticket {
    table: Arc<Mutex<Table>>,
    id: u64,
    source: IpAddr,
    evict: Arc<Evict>,
}

fn lock(t: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// The address without IPv4-mapping (::ffff:a.b.c.d → a.b.c.d), so a dual-stack listener
/// counts an IPv4 client once.
pub(crate) fn source_of(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

impl Admission {
    /// An empty table with these caps.
    pub(crate) fn new(limits: Limits) -> Admission {
        Admission {
            table: Arc::new(Mutex::new(Table::default())),
            limits,
        }
    }

    /// Admit a new entry from `source`, pending. When the table is full, the oldest pending
    /// entry of the source holding the most slots is evicted first, if that source holds at
    /// least two more than `source` would after admission (no flip-flop between equals);
    /// with [`Limits::fair_share`], failing a pending one, the newest running entry of such
    /// a source goes (it has measured the least). The share rule: while an address asks, no
    /// address keeps more than one slot above it, so a full table of `max` slots shared by
    /// `k` asking addresses settles at ⌊max/k⌋ or ⌈max/k⌉ each (8 slots, 2 addresses: 4 + 4;
    /// 3 addresses: 3 + 3 + 2). A source at its pending cap replaces its own oldest pending
    /// entry once that is older than [`Limits::replace_own_after`].
    pub(crate) fn admit(&self, source: IpAddr) -> Result<Ticket, Refused> {
        self.admit_as(source, true)
    }

    /// Like [`Admission::admit`], the new entry pending or not (a TCP source connection is
    /// useful from its first byte: admitted as working, it does not count against
    /// [`Limits::pending_per_source`] until it stalls).
    pub(crate) fn admit_as(&self, source: IpAddr, pending: bool) -> Result<Ticket, Refused> {
        let source = source_of(source);
        let l = self.limits;
        let now = Instant::now();
        let mut t = lock(&self.table);
        let mine: Vec<&Entry> = t.entries.iter().filter(|e| e.source == source).collect();
        let my_pending = mine.iter().filter(|e| e.pending).count();
        let own_oldest_pending = mine
            .iter()
            .filter(|e| e.pending)
            .min_by_key(|e| e.since)
            .map(|e| (e.id, e.since));
        let my_total = mine.len();
        if pending && my_pending >= l.pending_per_source {
            match own_oldest_pending {
                Some((id, since)) if now.duration_since(since) >= l.replace_own_after => {
                    t.evict_id(id);
                }
                _ => return Err(Refused::SourcePending),
            }
        } else if my_total >= l.per_source {
            match own_oldest_pending {
                Some((id, _)) => t.evict_id(id),
                None => return Err(Refused::SourceFull),
            }
        }
        if t.entries.len() >= l.max {
            let mine_after = t.entries.iter().filter(|e| e.source == source).count() + 1;
            let at_least = mine_after.saturating_add(1);
            let victim = t.victim(|e| e.source != source, at_least).or_else(|| {
                l.fair_share
                    .then(|| t.newest_running_of_busiest(source, at_least))
                    .flatten()
            });
            match victim {
                Some(id) => t.evict_id(id),
                None => return Err(Refused::Busy),
            }
        }
        let id = t.next;
        t.next += 1;
        let evict = Arc::new(Evict::default());
        t.entries.push(Entry {
            id,
            source,
            since: now,
            pending,
            holds: 0,
            evict: evict.clone(),
        });
        Ok(Ticket {
            table: self.table.clone(),
            id,
            source,
            evict,
        })
    }

    /// Evict the oldest pending entry, other than `except`, that holds something (see
    /// [`Ticket::set_holds`]), preferring the source with the most slots and other sources
    /// than `except`'s own. True when one was evicted (its holder frees what it holds as it
    /// ends).
    pub(crate) fn evict_holding(&self, except: &Ticket) -> bool {
        let mut t = lock(&self.table);
        let pick = t
            .victim(|e| e.holds > 0 && e.source != except.source, 0)
            .or_else(|| t.victim(|e| e.holds > 0 && e.id != except.id, 0));
        match pick {
            Some(id) => {
                t.evict_id(id);
                true
            }
            None => false,
        }
    }

    /// Slots taken now.
    pub(crate) fn len(&self) -> usize {
        lock(&self.table).entries.len()
    }

    /// True when no slot is taken.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries evicted since the table was made.
    #[cfg(test)]
    pub(crate) fn evictions(&self) -> u64 {
        lock(&self.table).evictions
    }
}

impl Table {
    /// The oldest pending entry matching `ok` of the source with the most slots, provided
    /// that source holds at least `at_least` slots.
    fn victim(&self, ok: impl Fn(&Entry) -> bool, at_least: usize) -> Option<u64> {
        let mut per: HashMap<IpAddr, usize> = HashMap::new();
        for e in &self.entries {
            *per.entry(e.source).or_insert(0) += 1;
        }
        self.entries
            .iter()
            .filter(|e| e.pending && ok(e))
            .filter(|e| per.get(&e.source).copied().unwrap_or(0) >= at_least)
            // Busiest source first, then the oldest entry.
            .min_by_key(|e| {
                (
                    std::cmp::Reverse(per.get(&e.source).copied().unwrap_or(0)),
                    e.since,
                )
            })
            .map(|e| e.id)
    }

    /// The newest running (not pending) entry of the source, other than `except`, that holds
    /// the most slots, provided that source holds at least `at_least`.
    fn newest_running_of_busiest(&self, except: IpAddr, at_least: usize) -> Option<u64> {
        let mut per: HashMap<IpAddr, usize> = HashMap::new();
        for e in &self.entries {
            let n = per.entry(e.source).or_insert(0);
            *n = n.saturating_add(1);
        }
        let held = |e: &Entry| per.get(&e.source).copied().unwrap_or(0);
        self.entries
            .iter()
            .filter(|e| !e.pending && e.source != except && held(e) >= at_least)
            // Busiest source first, then the newest entry.
            .max_by_key(|e| (held(e), e.since, e.id))
            .map(|e| e.id)
    }

    fn evict_id(&mut self, id: u64) {
        if let Some(i) = self.entries.iter().position(|e| e.id == id) {
            let e = self.entries.swap_remove(i);
            e.evict.flag.store(true, Ordering::Release);
            e.evict.notify.notify_waiters();
            self.evictions += 1;
        }
    }
}

impl Ticket {
    /// Mark the entry pending (idle, evictable) or not (doing useful work).
    pub(crate) fn set_pending(&self, pending: bool) {
        let mut t = lock(&self.table);
        if let Some(e) = t.entries.iter_mut().find(|e| e.id == self.id) {
            e.pending = pending;
        }
    }

    /// Record what the holder reserved elsewhere (0 = nothing), for
    /// [`Admission::evict_holding`].
    pub(crate) fn set_holds(&self, amount: u64) {
        let mut t = lock(&self.table);
        if let Some(e) = t.entries.iter_mut().find(|e| e.id == self.id) {
            e.holds = amount;
        }
    }

    /// True once the entry has been evicted.
    pub(crate) fn is_evicted(&self) -> bool {
        self.evict.flag.load(Ordering::Acquire)
    }

    /// Resolves when the entry is evicted (at once if it already was).
    pub(crate) async fn evicted(&self) {
        loop {
            let n = self.evict.notify.notified();
            if self.is_evicted() {
                return;
            }
            n.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut t = lock(&self.table);
        t.entries.retain(|e| e.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn limits() -> Limits {
        Limits {
            max: 8,
            per_source: 6,
            pending_per_source: 4,
            replace_own_after: Duration::from_secs(3600),
            fair_share: false,
        }
    }

    /// Issue 37, item 11: two addresses running six tests each held all 8 slots of the
    /// iperf3 server (6 + 2) and a third address got "busy". With the fair share, a second
    /// address takes running slots from the first until they hold 4 + 4; a third then gets
    /// one (4 + 3 + 1 → it may grow to 3 + 3 + 2); the newest running entry is the one that
    /// goes, and an address never takes one from an address that holds fewer than two more.
    #[test]
    fn fair_share_takes_running_slots_from_an_address_over_its_share() {
        let a = Admission::new(Limits {
            fair_share: true,
            ..limits()
        });
        let run = |src: u8| {
            let t = a.admit(ip(src));
            if let Ok(t) = &t {
                t.set_pending(false);
            }
            t
        };
        let two: Vec<Ticket> = (0..6).map(|_| run(2).expect("admit")).collect();
        let mut three = Vec::new();
        let mut refused = Vec::new();
        for _ in 0..6 {
            match run(3) {
                Ok(t) => three.push(t),
                Err(e) => refused.push(e),
            }
        }
        let live = |v: &[Ticket]| v.iter().filter(|t| !t.is_evicted()).count();
        assert_eq!((live(&two), three.len()), (4, 4));
        assert_eq!(refused, vec![Refused::Busy, Refused::Busy]);
        // The newest two of the first address went.
        assert!(two[4].is_evicted() && two[5].is_evicted());
        assert!(two[..4].iter().all(|t| !t.is_evicted()));
        assert_eq!(a.len(), 8);
        drop(two);
        let two: Vec<Ticket> = (0..4).map(|_| run(2).expect("admit")).collect();
        // A third address gets its share: 1, 2 (each from an address holding 4), then 3
        // is refused (3 + 3 + 2: nobody holds two more than it would).
        let four: Vec<Ticket> = (0..2).map(|_| run(4).expect("admit")).collect();
        assert_eq!(run(4).err(), Some(Refused::Busy));
        let mut counts = [live(&two), live(&three), live(&four)];
        counts.sort_unstable();
        assert_eq!(counts, [2, 3, 3]);
        assert_eq!(a.len(), 8);
    }

    #[test]
    fn without_fair_share_running_entries_are_never_taken() {
        let a = Admission::new(limits());
        let two: Vec<Ticket> = (0..6)
            .map(|_| {
                let t = a.admit(ip(2)).expect("admit");
                t.set_pending(false);
                t
            })
            .collect();
        let three: Vec<Ticket> = (0..2).map(|_| a.admit(ip(3)).expect("admit")).collect();
        for t in &three {
            t.set_pending(false);
        }
        assert_eq!(a.admit(ip(3)).err(), Some(Refused::Busy));
        assert!(two.iter().all(|t| !t.is_evicted()));
    }

    #[test]
    fn one_source_cannot_hold_more_than_its_pending_cap() {
        let a = Admission::new(limits());
        let held: Vec<Ticket> = (0..4).map(|_| a.admit(ip(2)).expect("admit")).collect();
        assert_eq!(a.admit(ip(2)).err(), Some(Refused::SourcePending));
        // Another source still gets all the other slots.
        let others: Vec<Ticket> = (0..4).map(|_| a.admit(ip(3)).expect("admit")).collect();
        assert_eq!(a.len(), 8);
        assert!(held.iter().chain(&others).all(|t| !t.is_evicted()));
    }

    #[test]
    fn a_new_source_evicts_the_oldest_pending_of_the_busiest() {
        let a = Admission::new(limits());
        let two: Vec<Ticket> = (0..4).map(|_| a.admit(ip(2)).expect("admit")).collect();
        let three: Vec<Ticket> = (0..4).map(|_| a.admit(ip(3)).expect("admit")).collect();
        assert_eq!(a.len(), 8);
        let four = a.admit(ip(4)).expect("a new source gets a slot");
        assert_eq!(a.len(), 8);
        // The oldest pending entry of a source with 4 slots (the first of ip 2) went.
        assert!(two[0].is_evicted());
        assert_eq!(
            two.iter().chain(&three).filter(|t| t.is_evicted()).count(),
            1
        );
        assert!(!four.is_evicted());
        assert_eq!(a.evictions(), 1);
    }

    #[test]
    fn working_entries_are_never_evicted_and_equals_do_not_flip_flop() {
        let a = Admission::new(limits());
        let two: Vec<Ticket> = (0..4).map(|_| a.admit(ip(2)).expect("admit")).collect();
        for t in &two {
            t.set_pending(false);
        }
        let three: Vec<Ticket> = (0..4).map(|_| a.admit(ip(3)).expect("admit")).collect();
        for t in &three {
            t.set_pending(false);
        }
        // Full of working entries: refused, nothing evicted.
        assert_eq!(a.admit(ip(4)).err(), Some(Refused::Busy));
        assert_eq!(a.evictions(), 0);
        drop(three);
        let b: Vec<Ticket> = (0..4).map(|_| a.admit(ip(3)).expect("admit")).collect();
        // ip 3 (4 pending) asks for a 5th while ip 2 holds 4: 4 < 5 + 1, so no eviction.
        assert_eq!(a.admit(ip(3)).err(), Some(Refused::SourcePending));
        assert_eq!(a.evictions(), 0);
        drop(b);
    }

    #[test]
    fn a_source_at_its_cap_replaces_its_own_stale_pending_entry() {
        let a = Admission::new(Limits {
            replace_own_after: Duration::ZERO,
            ..limits()
        });
        let held: Vec<Ticket> = (0..4).map(|_| a.admit(ip(2)).expect("admit")).collect();
        let fifth = a.admit(ip(2)).expect("replaces its own oldest");
        assert!(held[0].is_evicted());
        assert!(!fifth.is_evicted());
        assert_eq!(a.len(), 4);
    }

    #[test]
    fn per_source_cap_counts_working_entries() {
        let a = Admission::new(limits());
        let held: Vec<Ticket> = (0..6)
            .map(|_| {
                let t = a.admit(ip(2)).expect("admit");
                t.set_pending(false);
                t
            })
            .collect();
        assert_eq!(a.admit(ip(2)).err(), Some(Refused::SourceFull));
        // IPv4-mapped IPv6 is the same source.
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().expect("addr");
        assert_eq!(a.admit(mapped).err(), Some(Refused::SourceFull));
        drop(held);
        assert!(a.is_empty());
    }

    #[test]
    fn evict_holding_frees_another_sources_reservation_first() {
        let a = Admission::new(limits());
        let big = a.admit(ip(2)).expect("admit");
        big.set_holds(64 << 20);
        let mine = a.admit(ip(3)).expect("admit");
        mine.set_holds(1);
        assert!(a.evict_holding(&mine));
        assert!(big.is_evicted());
        assert!(!mine.is_evicted());
        // Nothing else holds anything.
        assert!(!a.evict_holding(&mine));
    }

    #[tokio::test]
    async fn evicted_resolves_when_evicted() {
        let a = Admission::new(limits());
        let two: Vec<Ticket> = (0..4).map(|_| a.admit(ip(2)).expect("admit")).collect();
        let _three: Vec<Ticket> = (0..4).map(|_| a.admit(ip(3)).expect("admit")).collect();
        let first = &two[0];
        let waiter = first.evicted();
        let _four = a.admit(ip(4)).expect("admit");
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("evicted() resolved");
    }
}
