//! Models of the CDC reader's stop and leave signals (`reader/signal.rs`):
//! a flag raised, or a wake-up given, while a worker (or the lease holder)
//! checks for it and goes to sleep. `Notify` is a count of
//! `notify_waiters` calls: a ticket (a `Notified`) is woken by every call
//! after it was taken, polled or not, as tokio guarantees; no permit is
//! kept for a ticket taken later.
//!
//! To see it fail: in `Signal::ticket` read the flag before taking the
//! ticket (what the reader's loops did before: check the flag, work, then
//! create the `Notified` to sleep on): loom finds the raise between the
//! two, which the sleep then misses until its timer ("a raise missed").

use loom::sync::Arc;
use loom::thread;

use crate::signal::{Signal, Wakes};
use crate::support::model;
use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// `notify_waiters` calls.
#[derive(Debug, Default)]
struct Calls(AtomicUsize);

/// A `Notified`: the count of calls when it was taken.
struct Ticket<'a> {
    calls: &'a Calls,
    taken: usize,
}

impl Ticket<'_> {
    /// Whether its wait ends at once.
    fn woken(&self) -> bool {
        self.calls.0.load(Ordering::Acquire) != self.taken
    }
}

impl Wakes for Calls {
    type Ticket<'a> = Ticket<'a>;

    fn ticket(&self) -> Ticket<'_> {
        Ticket { calls: self, taken: self.0.load(Ordering::Acquire) }
    }

    fn wake_all(&self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// The reader is stopped (or left) while a worker starts a round: the
/// worker sees the flag, or the ticket it then sleeps on is woken.
#[test]
fn a_raise_ends_the_next_sleep_or_is_seen() {
    model(|| {
        let signal = Arc::new(Signal::<Calls>::default());
        let stopper = {
            let signal = signal.clone();
            thread::spawn(move || signal.raise())
        };
        let sleeps_on = signal.ticket();
        stopper.join().expect("stop");
        if let Some(ticket) = sleeps_on {
            assert!(ticket.woken(), "a raise missed until the sleep's timer");
        }
        assert!(signal.is_raised() && signal.ticket().is_none());
    });
}

/// Work for a worker comes (a window ready: the planner changed, then
/// `wake`) while it polls the planner with a ticket taken first: it finds
/// the work, or its sleep is woken.
#[test]
fn work_that_comes_during_a_round_ends_its_sleep_or_is_found() {
    model(|| {
        let signal = Arc::new(Signal::<Calls>::default());
        let work = Arc::new(AtomicBool::new(false));
        let other = {
            let (signal, work) = (signal.clone(), work.clone());
            thread::spawn(move || {
                work.store(true, Ordering::Release);
                signal.wake();
            })
        };
        let ticket = signal.ticket().expect("not stopped");
        let found = work.load(Ordering::Acquire);
        other.join().expect("wake");
        assert!(found || ticket.woken(), "work missed until the sleep's timer");
        assert!(!signal.is_raised());
    });
}
