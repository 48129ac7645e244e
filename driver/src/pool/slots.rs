//! The connections of one node, slot by slot and shard by shard: the state
//! the refill task writes and every request reads.
//!
//! A node gets `per_node` slots. Until a connection has told whether the
//! node is sharded (Scylla's `SCYLLA_NR_SHARDS`), that is all; once one
//! reports `n` shards the slots are laid out again as `n × per_shard`,
//! shard-major, and every connection already open moves to its shard's
//! slots. A slot is empty, holds an open connection, or holds a connection
//! that closed and waits to be replaced. Sized per host instead (the
//! official `PoolSize::PerHost`), a sharded node's `t` connections go to
//! its shards in turn: `⌈t / n⌉` slots per shard, of which the slots past
//! the `t`-th in that order are never filled (a shard without one is
//! served by another's connection).
//!
//! ```text
//!   reader (request)            refiller (background task)        closer (connection watcher)
//!   pick (shard, else any)      missing → open → install          connection closes
//!        │ read lock                  │ write lock                     │
//!        ▼                            ▼                                ▼
//!   ┌──────────────── Layout { shards, slots } under one RwLock ────────────────┐
//!   └────────────────────────────────────────────────────────────────────────────┘
//!                      refilling flag: who owns the refill job
//! ```
//!
//! The layout and its slots change together under the lock, so a reader
//! never combines one layout's shard count with another's slots. Which task
//! refills is decided by one flag ([`Slots::claim_refill`],
//! [`Slots::release_refill`]): whoever sees a missing connection claims the
//! job unless someone holds it, and the holder re-checks after letting go,
//! so a connection that closes while the refiller is finishing is never
//! left unreplaced. `loom-tests` compiles this file against loom and models
//! these races.
//!
//! No tokio in here: the module is plain shared state.

use crate::sync::{AtomicBool, Ordering, RwLock};

/// What the slots need to know of a connection.
pub(crate) trait PoolConnection: Clone {
    /// Whether the connection closed (for good).
    fn is_closed(&self) -> bool;
    /// Requests in flight on it.
    fn in_flight(&self) -> usize;
    /// `(shard, number of shards)` on a sharded node.
    fn shard(&self) -> Option<(u16, u16)>;
}

/// A connection the refiller should open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wanted<C> {
    /// Any connection: the node is not (known to be) sharded.
    Any,
    /// A connection served by `shard`. `sample` is a connection of the same
    /// node, whose sharding parameters say how to reach the shard.
    Shard {
        /// The shard.
        shard: u16,
        /// Another connection of the node.
        sample: C,
    },
}

/// What [`Slots::install`] did with a connection.
#[derive(Debug)]
pub(crate) struct Installed<C> {
    /// The new connection, given back when it took no slot: every slot of
    /// its shard holds an open connection (a connection through the regular
    /// port landed on a shard already served), or it named a shard the node
    /// does not have.
    pub(crate) surplus: Option<C>,
    /// Connections that left the slots: the closed one the new connection
    /// replaced and, when it changed the node's layout, those that no
    /// longer fit. The caller closes them, outside the lock.
    pub(crate) dropped: Vec<C>,
}

struct Layout<C> {
    /// The node's shard count once a connection reported one.
    shards: Option<u16>,
    /// Slots per shard, on a sharded node.
    per_shard: usize,
    /// Connections wanted in all: fewer than the slots when a host's are
    /// spread over shards they do not divide evenly.
    wanted: usize,
    /// `per_shard × shards` slots, shard-major (`per_node` when unsharded).
    slots: Vec<Option<C>>,
}

impl<C: PoolConnection> Layout<C> {
    fn new(shards: Option<u16>, sizes: Sizes) -> Self {
        let (per_shard, wanted, n) = sizes.layout(shards);
        Layout { shards, per_shard, wanted, slots: (0..n).map(|_| None).collect() }
    }

    /// Whether slot `i` is ever filled: slot `k` of shard `s` is the
    /// `k × shards + s`-th connection of the node.
    fn is_wanted(&self, i: usize) -> bool {
        match self.shards {
            None => true,
            Some(n) => (i % self.per_shard) * usize::from(n) + i / self.per_shard < self.wanted,
        }
    }

    /// The slots serving `shard` (all of them on an unsharded node).
    fn range(&self, shard: Option<u16>) -> std::ops::Range<usize> {
        match (self.shards, shard) {
            (Some(_), Some(s)) => {
                let start = usize::from(s) * self.per_shard;
                start..start + self.per_shard
            }
            _ => 0..self.slots.len(),
        }
    }

    /// Puts `conn` into a free slot of `range`; gives it back when none is.
    fn place(&mut self, range: std::ops::Range<usize>, conn: C) -> Result<Option<C>, C> {
        let free = range.clone().find(|&i| {
            self.is_wanted(i) && self.slots.get(i).is_some_and(|s| s.as_ref().is_none_or(PoolConnection::is_closed))
        });
        match free {
            Some(i) => Ok(self.slots[i].replace(conn)),
            None => Err(conn),
        }
    }
}

/// How many connections a node gets: `per_shard` for each shard of a
/// sharded node (or `per_host` in all, over its shards), `per_node` for a
/// node that is not (or not yet known to be) sharded. Each at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    /// Per shard, on a sharded node.
    pub(crate) per_shard: usize,
    /// Per node, on a node without shards.
    pub(crate) per_node: usize,
    /// In all on a sharded node, spread over its shards (instead of
    /// `per_shard` each).
    pub(crate) per_host: Option<usize>,
}

impl Sizes {
    /// Sizes of `per_shard` per shard and `per_node` on an unsharded node.
    #[cfg(any(test, loom))]
    pub(crate) fn new(per_shard: usize, per_node: usize) -> Self {
        Sizes { per_shard, per_node, per_host: None }
    }

    /// The layout for `shards`: slots per shard, connections wanted, slots.
    fn layout(self, shards: Option<u16>) -> (usize, usize, usize) {
        match (shards.map(usize::from), self.per_host) {
            (None, _) => (self.per_node, self.per_node, self.per_node),
            (Some(n), None) => (self.per_shard, self.per_shard * n, self.per_shard * n),
            (Some(n), Some(total)) => {
                let per_shard = total.div_ceil(n.max(1));
                (per_shard, total, per_shard * n)
            }
        }
    }
}

/// Which of its choices a request keeps to (the session's
/// `ConnectionAffinity`): a thread's lane is a slot index taken modulo the
/// slots it can choose from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// None: the least loaded.
    Shared,
    /// The lane's slot, on any node.
    Own(usize),
    /// The lane's slot on a node without shards; the least loaded of the
    /// shard's on a sharded one.
    OwnUnsharded(usize),
}

impl Lane {
    fn index(self, sharded: bool) -> Option<usize> {
        match self {
            Lane::Own(lane) => Some(lane),
            Lane::OwnUnsharded(lane) if !sharded => Some(lane),
            _ => None,
        }
    }
}

fn usable<C: PoolConnection>(slot: &Option<C>) -> Option<&C> {
    slot.as_ref().filter(|c| !c.is_closed())
}

/// The open connection in slot `lane mod n` of `slots` when a lane is given
/// and that one is open, else the least loaded open connection of `slots`;
/// ties go to the first from slot `seed` on.
fn choose<C: PoolConnection>(slots: &[Option<C>], seed: usize, lane: Option<usize>) -> Option<C> {
    let n = slots.len();
    if n == 0 {
        return None;
    }
    if let Some(own) = lane.and_then(|lane| usable(&slots[lane % n])) {
        return Some(own.clone());
    }
    (0..n).filter_map(|i| usable(&slots[(seed + i) % n])).min_by_key(|c| c.in_flight()).cloned()
}

/// A connection of the shard `shard_of` names, if it names one: see
/// [`choose`].
fn on_shard<C: PoolConnection>(
    layout: &Layout<C>,
    shard_of: impl FnOnce(&C) -> Option<u16>,
    seed: usize,
    lane: Option<usize>,
) -> Option<C> {
    let shards = layout.shards?;
    let sample = layout.slots.iter().flatten().next()?;
    let shard = shard_of(sample)?;
    if shard >= shards {
        return None;
    }
    choose(&layout.slots[layout.range(Some(shard))], seed, lane)
}

/// The connections of one node. See the module docs.
pub(crate) struct Slots<C> {
    sizes: Sizes,
    layout: RwLock<Layout<C>>,
    refilling: AtomicBool,
}

impl<C: PoolConnection> Slots<C> {
    /// Empty slots: `per_shard` connections per shard, and per node while
    /// the node's sharding is unknown or when it is not sharded.
    #[cfg(any(test, loom))]
    pub(crate) fn new(per_shard: usize) -> Self {
        Self::sized(Sizes::new(per_shard, per_shard))
    }

    /// Empty slots for `sizes` connections (each raised to 1 at least).
    pub(crate) fn sized(sizes: Sizes) -> Self {
        let sizes = Sizes {
            per_shard: sizes.per_shard.max(1),
            per_node: sizes.per_node.max(1),
            per_host: sizes.per_host.map(|n| n.max(1)),
        };
        Slots { sizes, layout: RwLock::new(Layout::new(None, sizes)), refilling: AtomicBool::new(false) }
    }

    /// How many connections the node gets.
    pub(crate) fn sizes(&self) -> Sizes {
        self.sizes
    }

    fn read(&self) -> crate::sync::RwLockReadGuard<'_, Layout<C>> {
        self.layout.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The least loaded open connection of the shard that `shard_of` names
    /// (given any connection of the node, for its sharding parameters).
    /// `None` on an unsharded node, or when the shard has no open
    /// connection: the caller then falls back to [`Slots::pick_any`].
    #[cfg(any(test, loom))]
    pub(crate) fn pick_shard(&self, shard_of: impl FnOnce(&C) -> u16) -> Option<C> {
        on_shard(&self.read(), |c| Some(shard_of(c)), 0, None)
    }

    /// The least loaded open connection of the node; ties go to the first
    /// from slot `seed` on, so that equal connections take turns.
    pub(crate) fn pick_any(&self, seed: usize) -> Option<C> {
        choose(&self.read().slots, seed, None)
    }

    /// A connection of the shard `shard_of` names, if it names one and it
    /// has one, else of the node: what a request asks, under one read of
    /// the layout (each read writes the lock's word, which every worker's
    /// requests to the node share). Among those, the one in slot
    /// `lane mod n` when `lane` gives one for this node and it is open,
    /// else the least loaded; ties go to the first from slot `seed` on.
    pub(crate) fn pick(&self, shard_of: impl FnOnce(&C) -> Option<u16>, seed: usize, lane: Lane) -> Option<C> {
        let layout = self.read();
        let lane = lane.index(layout.shards.is_some());
        on_shard(&layout, shard_of, seed, lane).or_else(|| choose(&layout.slots, seed, lane))
    }

    /// Whether some connection is open.
    pub(crate) fn has_open(&self) -> bool {
        self.read().slots.iter().any(|s| usable(s).is_some())
    }

    /// Every open connection.
    pub(crate) fn open_connections(&self) -> Vec<C> {
        self.read().slots.iter().filter_map(usable).cloned().collect()
    }

    /// The node's shard count, once a connection reported it.
    #[allow(dead_code)]
    pub(crate) fn shards(&self) -> Option<u16> {
        self.read().shards
    }

    /// The first slot without an open connection, as what to open for it.
    pub(crate) fn missing(&self) -> Option<Wanted<C>> {
        let layout = self.read();
        let empty = (0..layout.slots.len()).find(|&i| layout.is_wanted(i) && usable(&layout.slots[i]).is_none())?;
        match layout.shards {
            None => Some(Wanted::Any),
            Some(_) => {
                let sample = layout.slots.iter().flatten().next()?.clone();
                let shard = u16::try_from(empty / layout.per_shard).ok()?;
                Some(Wanted::Shard { shard, sample })
            }
        }
    }

    /// Puts a new connection into a free slot of its shard. A connection
    /// reporting another shard count than the layout's (the first sharded
    /// connection of a node, or a node restarted with another count) lays
    /// the slots out again first.
    pub(crate) fn install(&self, conn: C) -> Installed<C> {
        let reported = conn.shard();
        if reported.is_some_and(|(shard, shards)| shards == 0 || shard >= shards) {
            return Installed { surplus: Some(conn), dropped: Vec::new() };
        }
        let shards = reported.map(|(_, n)| n);
        let mut dropped = Vec::new();
        let mut layout = self.layout.write().unwrap_or_else(|e| e.into_inner());
        if layout.shards != shards {
            let old = std::mem::replace(&mut *layout, Layout::new(shards, self.sizes));
            for c in old.slots.into_iter().flatten() {
                let fits = !c.is_closed() && c.shard().map(|(_, n)| n) == shards;
                if !fits {
                    dropped.push(c);
                    continue;
                }
                let range = layout.range(c.shard().map(|(s, _)| s));
                if let Err(c) = layout.place(range, c) {
                    dropped.push(c);
                }
            }
        }
        let range = layout.range(reported.map(|(s, _)| s));
        match layout.place(range, conn) {
            Ok(replaced) => {
                dropped.extend(replaced);
                Installed { surplus: None, dropped }
            }
            Err(conn) => Installed { surplus: Some(conn), dropped },
        }
    }

    /// Empties every slot (the node left the topology); the caller closes
    /// what it gets.
    pub(crate) fn take_all(&self) -> Vec<C> {
        let mut layout = self.layout.write().unwrap_or_else(|e| e.into_inner());
        layout.slots.iter_mut().filter_map(Option::take).collect()
    }

    /// Claims the refill job: `true` when a connection is missing and no
    /// one else refills. The caller then opens connections until
    /// [`Slots::missing`] is `None` and [`Slots::release_refill`] agrees.
    pub(crate) fn claim_refill(&self) -> bool {
        self.missing().is_some() && !self.refilling.swap(true, Ordering::AcqRel)
    }

    /// The refiller found nothing missing and lets go of the job. `true`
    /// when it may stop; `false` when a connection went missing meanwhile
    /// and it holds the job again. (The release is a read-modify-write so
    /// that a closer whose claim failed against it has its closed
    /// connection seen by the re-check.)
    pub(crate) fn release_refill(&self) -> bool {
        self.refilling.swap(false, Ordering::AcqRel);
        !self.claim_refill()
    }

    /// Gives up the refill job without re-checking (the node is gone).
    pub(crate) fn abandon_refill(&self) {
        self.refilling.store(false, Ordering::Release);
    }

    /// Checks the layout's invariants: every connection in a shard's slots
    /// reports that shard and the layout's shard count. For tests and
    /// models.
    #[allow(dead_code)]
    pub(crate) fn consistent(&self) -> bool {
        let layout = self.read();
        layout.slots.len() == self.sizes.layout(layout.shards).2
            && layout.slots.iter().enumerate().all(|(i, slot)| match (slot, layout.shards) {
                (None, _) => true,
                (Some(_), Some(_)) if !layout.is_wanted(i) => false,
                (Some(c), None) => c.shard().is_none(),
                (Some(c), Some(n)) => c.shard() == u16::try_from(i / layout.per_shard).ok().map(|s| (s, n)),
            })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicBool as StdBool;
    use std::sync::Arc;

    use super::*;

    #[derive(Clone, Debug)]
    struct Fake {
        id: u32,
        shard: Option<(u16, u16)>,
        closed: Arc<StdBool>,
        load: usize,
    }

    impl Fake {
        fn new(id: u32, shard: Option<(u16, u16)>) -> Self {
            Fake { id, shard, closed: Arc::new(StdBool::new(false)), load: 0 }
        }
        fn close(&self) {
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl PartialEq for Fake {
        fn eq(&self, other: &Self) -> bool {
            self.id == other.id
        }
    }

    impl PoolConnection for Fake {
        fn is_closed(&self) -> bool {
            self.closed.load(std::sync::atomic::Ordering::SeqCst)
        }
        fn in_flight(&self) -> usize {
            self.load
        }
        fn shard(&self) -> Option<(u16, u16)> {
            self.shard
        }
    }

    fn placed(i: Installed<Fake>) -> Vec<Fake> {
        assert!(i.surplus.is_none(), "surplus {:?}", i.surplus);
        i.dropped
    }

    fn surplus(i: Installed<Fake>) -> bool {
        i.surplus.is_some()
    }

    #[test]
    fn unsharded_node_fills_per_node_slots() {
        let s = Slots::new(2);
        assert_eq!(s.missing(), Some(Wanted::Any));
        assert!(placed(s.install(Fake::new(1, None))).is_empty());
        assert_eq!(s.missing(), Some(Wanted::Any));
        assert!(placed(s.install(Fake::new(2, None))).is_empty());
        assert_eq!(s.missing(), None);
        assert!(surplus(s.install(Fake::new(3, None))));
        assert_eq!(s.pick_shard(|_| 0), None, "no shards");
        assert!(s.pick_any(0).is_some());
        assert!(s.consistent());
    }

    /// Sized per host (the official `PoolSize::PerHost`): a sharded node's
    /// connections go to its shards in turn, no more than asked for; a
    /// shard without one is served by another's.
    #[test]
    fn per_host_sizes_spread_the_hosts_connections_over_its_shards() {
        let wanted_shards = |s: &Slots<Fake>| match s.missing() {
            Some(Wanted::Shard { shard, .. }) => Some(shard),
            _ => None,
        };
        let s = Slots::sized(Sizes { per_host: Some(3), ..Sizes::new(1, 3) });
        placed(s.install(Fake::new(1, Some((0, 8)))));
        assert_eq!(wanted_shards(&s), Some(1));
        placed(s.install(Fake::new(2, Some((1, 8)))));
        assert_eq!(wanted_shards(&s), Some(2));
        assert!(surplus(s.install(Fake::new(9, Some((5, 8))))), "shard 5 gets none of the three");
        placed(s.install(Fake::new(3, Some((2, 8)))));
        assert_eq!(s.missing(), None, "three in all");
        assert_eq!(s.open_connections().len(), 3);
        assert!(s.pick(|_| Some(5), 0, Lane::Shared).is_some(), "another shard's connection serves shard 5");
        assert!(s.consistent());

        // Ten over eight shards: two on shards 0 and 1, one on the others.
        let s = Slots::sized(Sizes { per_host: Some(10), ..Sizes::new(1, 10) });
        let mut id = 0;
        placed(s.install(Fake::new(id, Some((0, 8)))));
        while let Some(shard) = wanted_shards(&s) {
            id += 1;
            placed(s.install(Fake::new(id, Some((shard, 8)))));
        }
        let mut per_shard = [0; 8];
        for c in s.open_connections() {
            per_shard[usize::from(c.shard.expect("sharded").0)] += 1;
        }
        assert_eq!(per_shard, [2, 2, 1, 1, 1, 1, 1, 1]);
        assert!(surplus(s.install(Fake::new(99, Some((3, 8))))), "shard 3 has its one");
        assert!(s.consistent());
    }

    #[test]
    fn first_sharded_connection_lays_out_shards_and_refill_asks_per_shard() {
        let s = Slots::new(1);
        assert!(placed(s.install(Fake::new(1, Some((2, 4))))).is_empty());
        assert_eq!(s.shards(), Some(4));
        match s.missing() {
            Some(Wanted::Shard { shard, sample }) => {
                assert_eq!(shard, 0);
                assert_eq!(sample.id, 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.pick_shard(|_| 2).map(|c| c.id), Some(1));
        assert_eq!(s.pick_shard(|_| 1), None, "shard 1 has no connection yet");
        assert_eq!(s.pick_shard(|_| 9), None, "a shard the node does not have");
        // Through the regular port a connection may land on a served shard.
        assert!(surplus(s.install(Fake::new(2, Some((2, 4))))));
        for (id, shard) in [(3, 0), (4, 1), (5, 3)] {
            placed(s.install(Fake::new(id, Some((shard, 4)))));
        }
        assert_eq!(s.missing(), None);
        assert!(s.consistent());
        assert!(surplus(s.install(Fake::new(6, Some((4, 4))))), "shard out of range");
    }

    #[test]
    fn closed_connection_frees_its_slot_and_is_replaced() {
        let s = Slots::new(1);
        let a = Fake::new(1, Some((0, 2)));
        placed(s.install(a.clone()));
        placed(s.install(Fake::new(2, Some((1, 2)))));
        assert_eq!(s.missing(), None);
        a.close();
        assert_eq!(s.pick_shard(|_| 0), None, "a closed connection is never picked");
        assert_eq!(s.pick_any(0).map(|c| c.id), Some(2));
        assert!(matches!(s.missing(), Some(Wanted::Shard { shard: 0, .. })));
        let dropped = placed(s.install(Fake::new(3, Some((0, 2)))));
        assert_eq!(dropped.iter().map(|c| c.id).collect::<Vec<_>>(), vec![1], "the closed one is handed back");
        assert_eq!(s.pick_shard(|_| 0).map(|c| c.id), Some(3));
    }

    /// `pick`: the named shard's connection, else any (no shard named, an
    /// unsharded node, a shard without a connection or out of range).
    #[test]
    fn pick_takes_the_shard_named_else_any() {
        let s = Slots::new(1);
        placed(s.install(Fake::new(1, None)));
        assert_eq!(s.pick(|_| Some(0), 0, Lane::Shared).map(|c| c.id), Some(1), "unsharded: any");
        let s = Slots::new(1);
        placed(s.install(Fake::new(1, Some((0, 3)))));
        placed(s.install(Fake::new(2, Some((2, 3)))));
        assert_eq!(s.pick(|_| Some(2), 0, Lane::Shared).map(|c| c.id), Some(2));
        assert_eq!(s.pick(|_| Some(0), 1, Lane::Shared).map(|c| c.id), Some(1));
        let asked = std::cell::Cell::new(0);
        let any = s.pick(
            |_| {
                asked.set(asked.get() + 1);
                None
            },
            0,
            Lane::Shared,
        );
        assert!(any.is_some(), "no shard named: any");
        assert_eq!(asked.get(), 1, "the shard is asked for once");
        assert!(s.pick(|_| Some(1), 0, Lane::Shared).is_some(), "shard 1 has no connection: any");
        assert!(s.pick(|_| Some(7), 0, Lane::Shared).is_some(), "out of range: any");
    }

    #[test]
    fn shard_count_change_relays_out_and_drops_what_no_longer_fits() {
        let s = Slots::new(1);
        placed(s.install(Fake::new(1, None)));
        // The node now reports shards: the unsharded connection no longer fits.
        let dropped = placed(s.install(Fake::new(2, Some((1, 2)))));
        assert_eq!(dropped.iter().map(|c| c.id).collect::<Vec<_>>(), vec![1]);
        let dropped = placed(s.install(Fake::new(3, Some((0, 3)))));
        assert_eq!(dropped.iter().map(|c| c.id).collect::<Vec<_>>(), vec![2], "another shard count");
        assert_eq!(s.shards(), Some(3));
        assert!(s.consistent());
    }

    #[test]
    fn least_loaded_wins_and_ties_rotate() {
        let s = Slots::new(3);
        let mut busy = Fake::new(1, None);
        busy.load = 5;
        placed(s.install(busy));
        placed(s.install(Fake::new(2, None)));
        placed(s.install(Fake::new(3, None)));
        assert_eq!(s.pick_any(0).map(|c| c.id), Some(2));
        assert_eq!(s.pick_any(2).map(|c| c.id), Some(3));
    }

    /// A lane keeps to its own slot of the shard, busier or not, and falls
    /// back to the least loaded while that slot's connection is closed.
    #[test]
    fn a_lane_keeps_to_its_slot_while_it_is_open() {
        let s = Slots::new(2);
        let mut busy = Fake::new(1, Some((1, 2)));
        busy.load = 5;
        placed(s.install(busy));
        let idle = Fake::new(2, Some((1, 2)));
        placed(s.install(idle.clone()));
        placed(s.install(Fake::new(3, Some((0, 2)))));
        let on_1 = |lane| s.pick(|_| Some(1), 0, lane).map(|c| c.id);
        assert_eq!(on_1(Lane::Shared), Some(2), "no lane: the least loaded");
        assert_eq!(on_1(Lane::Own(0)), Some(1), "lane 0: its slot, busier as it is");
        assert_eq!(on_1(Lane::Own(3)), Some(2), "lane 3: slot 1 of the shard");
        assert_eq!(on_1(Lane::OwnUnsharded(0)), Some(2), "a sharded node: the least loaded");
        idle.close();
        assert_eq!(on_1(Lane::Own(1)), Some(1), "its slot closed: the least loaded open one");
        // No shard named: the lane's slot among all of the node's.
        assert_eq!(s.pick(|_| None, 0, Lane::Own(0)).map(|c| c.id), Some(3));
    }

    /// `ConnectionAffinity::Auto`: a node without shards gets `per_node`
    /// connections, each lane keeping to its own; once the node reports
    /// shards, `per_shard` each, and the least loaded is taken.
    #[test]
    fn lanes_and_per_node_slots_on_a_node_without_shards_only() {
        let s = Slots::sized(Sizes::new(1, 3));
        assert!(s.consistent());
        let mut busy = Fake::new(1, None);
        busy.load = 5;
        placed(s.install(busy));
        placed(s.install(Fake::new(2, None)));
        assert_eq!(s.missing(), Some(Wanted::Any), "three per node");
        placed(s.install(Fake::new(3, None)));
        assert_eq!(s.missing(), None);
        assert!(s.consistent());
        let pick = |lane| s.pick(|_| None, 0, lane).map(|c| c.id);
        assert_eq!(pick(Lane::OwnUnsharded(0)), Some(1), "its own, busier as it is");
        assert_eq!(pick(Lane::OwnUnsharded(4)), Some(2), "lane 4: slot 1");
        assert_eq!(pick(Lane::Shared), Some(2), "no lane: the least loaded");
        // The node turns out sharded (a restart as ScyllaDB): one per shard.
        let dropped = placed(s.install(Fake::new(4, Some((1, 2)))));
        assert_eq!(dropped.len(), 3, "the unsharded connections no longer fit");
        assert!(s.consistent());
        assert!(matches!(s.missing(), Some(Wanted::Shard { shard: 0, .. })));
        placed(s.install(Fake::new(5, Some((0, 2)))));
        assert_eq!(s.missing(), None, "one per shard");
    }

    #[test]
    fn refill_job_is_claimed_once_and_released_with_a_recheck() {
        let s = Slots::new(1);
        assert!(s.claim_refill(), "empty: claim");
        assert!(!s.claim_refill(), "already claimed");
        let a = Fake::new(1, None);
        placed(s.install(a.clone()));
        assert!(s.release_refill(), "full: may stop");
        assert!(!s.claim_refill(), "nothing missing");
        a.close();
        assert!(s.claim_refill());
        assert!(!s.release_refill(), "still missing: the job is kept");
        s.abandon_refill();
        assert_eq!(s.take_all().len(), 1);
    }
}
