//! Models of the deadline sweeper's wake-up handshake (`sweep.rs`) over the
//! shipped stream table: a request claiming an id with a deadline while the
//! sweeper sweeps never goes unswept. `Notify` is a count of pings (a ping
//! before the sweeper waits is kept as a permit, as `notify_one` keeps it).
//!
//! To see it fail: drop the `fence` in `NextSweep::begin` or in
//! `NextSweep::must_ping` (`driver/src/connection/sweep.rs`): loom finds the
//! sweep that read the page's bitmap without the new id while the request
//! read the wake-up from before the sweep ("a deadline nobody keeps"). So
//! does the handshake this module replaced (`SeqCst` stores and loads of
//! the wake-up and the deadline, no fences).

use loom::sync::Arc;
use loom::thread;

use crate::stream::Streams;
use crate::support::model;
use crate::sweep::NextSweep;
use crate::sync::{AtomicUsize, Ordering};

/// The sweeper woke (its timer for tick 10 fired, for a request answered
/// since) and sweeps at tick 5, with a request of deadline 30 pending,
/// while another claims an id with deadline 20: after the sweep, either the
/// sweeper sleeps until 20 at the latest, or it was pinged (and sweeps
/// again at once).
#[test]
fn a_deadline_stored_during_a_sweep_is_swept_or_pings() {
    model(|| {
        let streams = Arc::new(Streams::<u8>::new(4));
        let next = Arc::new(NextSweep::default());
        let pings = Arc::new(AtomicUsize::new(0));
        streams.allocate_until(30).expect("an id");
        next.end(Some(10));
        let request = {
            let (streams, next, pings) = (streams.clone(), next.clone(), pings.clone());
            thread::spawn(move || {
                streams.allocate_until(20).expect("an id");
                if next.must_ping(20) {
                    pings.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        next.begin();
        let sleeps_until = streams.expire(5);
        next.end(sleeps_until);
        request.join().expect("request");
        let pinged = pings.load(Ordering::Relaxed) > 0;
        assert!(
            pinged || sleeps_until.is_some_and(|t| t <= 20),
            "a deadline nobody keeps: sleeps until {sleeps_until:?}"
        );
    });
}

/// A request whose deadline comes before the sleeping sweeper's wake-up
/// pings it; one after it does not.
#[test]
fn only_an_earlier_deadline_pings_a_sleeping_sweeper() {
    model(|| {
        let next = Arc::new(NextSweep::default());
        next.begin();
        next.end(Some(30));
        let early = {
            let next = next.clone();
            thread::spawn(move || next.must_ping(20))
        };
        assert!(!next.must_ping(40));
        assert!(early.join().expect("request"));
        assert!(!next.must_ping(crate::stream::NO_DEADLINE));
    });
}
