//! Models of a node's per-shard connection slots: a refiller opening and
//! installing connections (the first one revealing the node's shards) while
//! requests pick connections and connections close.
//!
//! What every model checks:
//! - readers never see a torn layout: a connection picked for a shard is
//!   served by that shard, and the slots always match the shard count;
//! - a closed connection is never picked once its closing is visible, and
//!   a slot it frees is refilled, even when it closes while the refiller
//!   is letting go of the job (the claim/release protocol);
//! - when everything is done, every shard has an open connection.

use std::sync::atomic::AtomicUsize as StdUsize;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::slots::{PoolConnection, Slots, Wanted};
use crate::support::model;

const SHARDS: u16 = 2;

/// A connection: its shard and a closed flag, set the way the driver's
/// reader task sets it (release), read the way `is_closed` does (acquire).
#[derive(Clone, Debug)]
struct Fake {
    id: usize,
    shard: Option<(u16, u16)>,
    closed: Arc<AtomicBool>,
}

impl Fake {
    fn new(shard: u16) -> Self {
        static IDS: StdUsize = StdUsize::new(0);
        let id = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Fake { id, shard: Some((shard, SHARDS)), closed: Arc::new(AtomicBool::new(false)) }
    }
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

impl PoolConnection for Fake {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
    fn in_flight(&self) -> usize {
        0
    }
    fn shard(&self) -> Option<(u16, u16)> {
        self.shard
    }
}

/// The refill loop of the session's refill task, with connections that
/// open at once: through the regular port the "server" picks shard 1,
/// through the shard-aware port the wanted shard.
fn refill(slots: &Slots<Fake>) {
    loop {
        let conn = match slots.missing() {
            Some(Wanted::Any) => Fake::new(1),
            Some(Wanted::Shard { shard, .. }) => Fake::new(shard),
            None if slots.release_refill() => return,
            None => continue,
        };
        let installed = slots.install(conn);
        for c in installed.dropped.into_iter().chain(installed.surplus) {
            c.close();
        }
    }
}

/// Picks for each shard; a picked connection must be served by that shard.
fn read(slots: &Slots<Fake>) {
    for shard in 0..SHARDS {
        if let Some(c) = slots.pick_shard(|_| shard) {
            assert_eq!(c.shard, Some((shard, SHARDS)), "picked a connection of another shard");
        }
    }
    let _ = slots.pick_any(0);
    assert!(slots.consistent(), "torn layout");
}

/// Every shard has an open connection and nothing is missing.
fn assert_full(slots: &Slots<Fake>) {
    assert!(slots.missing().is_none(), "a slot was left without a connection");
    for shard in 0..SHARDS {
        let c = slots.pick_shard(|_| shard).expect("every shard has a connection");
        assert!(!c.is_closed());
    }
    assert!(slots.consistent());
}

#[test]
fn first_fill_racing_readers() {
    model(|| {
        let slots = Arc::new(Slots::<Fake>::new(1));
        assert!(slots.claim_refill(), "empty slots: the first claim wins");
        let refiller = {
            let slots = slots.clone();
            thread::spawn(move || refill(&slots))
        };
        read(&slots);
        refiller.join().expect("refiller");
        assert_full(&slots);
    });
}

#[test]
fn connection_closing_while_the_refiller_lets_go_is_replaced() {
    model(|| {
        let slots = Arc::new(Slots::<Fake>::new(1));
        let a = Fake::new(0);
        assert!(slots.install(a.clone()).surplus.is_none());
        // Shard 1 is missing: this refiller holds the job.
        assert!(slots.claim_refill());
        let refiller = {
            let slots = slots.clone();
            thread::spawn(move || refill(&slots))
        };
        // A connection watcher: the connection closes, the watcher tries to
        // claim the job and refills only if it got it.
        a.close();
        if slots.claim_refill() {
            refill(&slots);
        }
        refiller.join().expect("refiller");
        assert_full(&slots);
        assert_ne!(slots.pick_shard(|_| 0).map(|c| c.id), Some(a.id), "the closed connection was replaced");
    });
}

#[test]
fn readers_racing_close_and_replace_never_get_a_visibly_closed_connection() {
    model(|| {
        let slots = Arc::new(Slots::<Fake>::new(1));
        let a = Fake::new(0);
        let b = Fake::new(1);
        assert!(slots.install(a.clone()).surplus.is_none());
        assert!(slots.install(b).surplus.is_none());
        let closer = {
            let slots = slots.clone();
            let a = a.clone();
            thread::spawn(move || {
                a.close();
                if slots.claim_refill() {
                    refill(&slots);
                }
            })
        };
        read(&slots);
        let seen_closed = a.is_closed();
        if let Some(c) = slots.pick_shard(|_| 0) {
            if seen_closed {
                assert_ne!(c.id, a.id, "picked a connection already seen closed");
            }
        }
        closer.join().expect("closer");
        assert_full(&slots);
    });
}
