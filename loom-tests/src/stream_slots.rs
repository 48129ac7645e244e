//! Models of the stream-id table: id allocation under contention, and the
//! slot state machine when a response races with its request being
//! abandoned, polled, expired by the sweeper (also while it still waits for
//! room to be sent), or the connection failing.

use std::task::{Context, Poll, Waker};

use crate::stream::{Answer, Delivery, Streams, Unsent};
use crate::support::{flagged_waker, model};
use loom::sync::Arc;
use loom::thread;

#[test]
fn concurrent_allocations_get_distinct_ids() {
    model(|| {
        let s = Arc::new(Streams::<u8>::new(2));
        let t = {
            let s = s.clone();
            thread::spawn(move || s.allocate())
        };
        let mine = s.allocate();
        let theirs = t.join().expect("thread");
        assert!(mine.is_some() && theirs.is_some());
        assert_ne!(mine, theirs);
        assert_eq!(s.allocate(), None, "the table holds two ids");
        assert_eq!(s.in_flight(), 2);
    });
}

#[test]
fn response_racing_abandon_frees_the_id_exactly_once() {
    model(|| {
        let s = Arc::new(Streams::<u8>::new(1));
        let id = s.allocate().expect("id");
        let reader = {
            let s = s.clone();
            thread::spawn(move || s.complete(id, 7))
        };
        s.abandon(id);
        let delivery = reader.join().expect("thread");
        assert!(matches!(delivery, Ok(Delivery::Delivered) | Ok(Delivery::Orphan)));
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.orphans(), 0);
        assert_eq!(s.allocate(), Some(id), "the id is free again");
    });
}

#[test]
fn response_racing_poll_is_received_once_and_wakes() {
    model(|| {
        let s = Arc::new(Streams::<u8>::new(1));
        let id = s.allocate().expect("id");
        let (flag, waker) = flagged_waker();
        let mut cx = Context::from_waker(&waker);
        let reader = {
            let s = s.clone();
            thread::spawn(move || s.complete(id, 9))
        };
        let first = s.poll_response(id, &mut cx);
        assert_eq!(reader.join().expect("thread"), Ok(Delivery::Delivered));
        match first {
            Poll::Ready(v) => assert_eq!(v, Answer::Received(9)),
            Poll::Pending => {
                // Registered before the response: it must have been woken.
                assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "lost wake-up");
                assert_eq!(s.poll_response(id, &mut cx), Poll::Ready(Answer::Received(9)));
            }
        }
        assert_eq!(s.in_flight(), 0);
    });
}

#[test]
fn connection_failure_racing_requests_leaves_no_id_behind() {
    model(|| {
        let s = Arc::new(Streams::<i8>::new(2));
        let a = s.allocate().expect("id");
        let b = s.allocate().expect("id");
        let closer = {
            let s = s.clone();
            thread::spawn(move || s.fail_all(|| -1))
        };
        s.abandon(b);
        let _ = s.complete(a, 1);
        closer.join().expect("thread");
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(s.poll_response(a, &mut cx), Poll::Ready(Answer::Received(1 | -1))));
        assert_eq!(s.in_flight(), 0, "every id is free");
        assert_eq!(s.orphans(), 0);
    });
}

/// A sweep of `s` at tick `now`, on a thread of its own.
fn sweep_on_another_thread(s: &Arc<Streams<u8>>, now: u64) -> thread::JoinHandle<Option<u64>> {
    let s = s.clone();
    thread::spawn(move || s.expire(now))
}

/// The sweeper expiring a request while its answer arrives: the request is
/// woken and gets the answer either way (an answer just after the
/// deadline still counts), and the id is free afterwards.
#[test]
fn expiry_racing_the_answer_wakes_and_delivers() {
    model(|| {
        let s = Arc::new(Streams::<u8>::new(1));
        let id = s.allocate_until(5).expect("id");
        let (flag, waker) = flagged_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(s.poll_response(id, &mut cx).is_pending());
        let sweeper = sweep_on_another_thread(&s, 10);
        assert_eq!(s.complete(id, 7), Ok(Delivery::Delivered));
        assert_eq!(sweeper.join().expect("thread"), None);
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "lost wake-up");
        assert_eq!(s.poll_response(id, &mut cx), Poll::Ready(Answer::Received(7)));
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.orphans(), 0);
    });
}

/// A request with a deadline at tick 5 polls with `poll` while the sweeper
/// expires it at tick 5: it is woken or sees the expiry (`expired`), so it
/// never keeps waiting. Returns the table and the id for what follows.
fn expiry_racing<R: PartialEq + std::fmt::Debug>(
    poll: impl Fn(&Streams<u8>, i16, &mut Context<'_>) -> Poll<R>,
    expired: R,
) -> (Arc<Streams<u8>>, i16) {
    let s = Arc::new(Streams::<u8>::new(1));
    let id = s.allocate_until(5).expect("id");
    let (flag, waker) = flagged_waker();
    let mut cx = Context::from_waker(&waker);
    let sweeper = sweep_on_another_thread(&s, 5);
    let first = poll(&s, id, &mut cx);
    assert_eq!(sweeper.join().expect("thread"), None);
    match first {
        Poll::Ready(seen) => assert_eq!(seen, expired),
        Poll::Pending => {
            assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "lost wake-up");
            assert_eq!(poll(&s, id, &mut cx), Poll::Ready(expired));
        }
    }
    (s, id)
}

/// The sweeper expiring a request while the request polls for its answer:
/// it stops waiting; its id stays reserved for the answer that may still
/// come, and is free once it came.
#[test]
fn expiry_racing_the_poll_is_never_lost() {
    model(|| {
        let (s, id) = expiry_racing(|s, id, cx| s.poll_response(id, cx), Answer::Expired);
        assert_eq!(s.orphans(), 1);
        assert_eq!(s.complete(id, 1), Ok(Delivery::Orphan));
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.orphans(), 0);
    });
}

/// The sweeper expiring a request that waits for room in the write buffer
/// (not sent yet): it stops waiting, and its id, never sent, is freed at
/// once rather than kept as an orphan.
#[test]
fn expiry_racing_a_request_waiting_for_room_is_never_lost() {
    model(|| {
        let (s, id) = expiry_racing(|s, id, cx| s.poll_unsent(id, cx), Unsent::Expired);
        s.cancel(id);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.orphans(), 0);
    });
}

/// A sweep that read a deadline before the id was answered and claimed
/// again must not expire the new request by the old deadline.
#[test]
fn a_sweep_does_not_expire_a_reused_id_by_its_old_deadline() {
    model(|| {
        let s = Arc::new(Streams::<u8>::new(1));
        let id = s.allocate_until(5).expect("id");
        let sweeper = sweep_on_another_thread(&s, 10);
        // Answered (before or after the deadline was seen), taken, and the
        // id claimed by a request with a later deadline, while the sweeper
        // runs.
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(s.complete(id, 1), Ok(Delivery::Delivered));
        assert_eq!(s.poll_response(id, &mut cx), Poll::Ready(Answer::Received(1)));
        let again = s.allocate_until(50).expect("id");
        let next = sweeper.join().expect("thread");
        assert!(matches!(next, None | Some(50)), "{next:?}");
        assert!(s.poll_response(again, &mut cx).is_pending(), "expired by the old deadline");
    });
}

/// An answer freeing the only id wakes the request waiting for one, though
/// a free pings the waiters only when `Streams::awaited` says some wait:
/// the waiter, counted before its claim, either claims the freed id or is
/// seen by the free. (`pings` stands for tokio's `Notify`: a waiter that
/// read the count before its claim is woken by any later ping.)
#[test]
fn a_freed_id_wakes_a_request_waiting_for_one() {
    use loom::sync::atomic::{AtomicUsize, Ordering};
    model(|| {
        let s = Arc::new(Streams::<u8>::new(1));
        let pings = Arc::new(AtomicUsize::new(0));
        let held = s.allocate().expect("the only id");
        let waiter = {
            let (s, pings) = (s.clone(), pings.clone());
            thread::spawn(move || {
                let _waiting = s.wait_for_id();
                loop {
                    let seen = pings.load(Ordering::Acquire);
                    if let Some(id) = s.allocate() {
                        return id;
                    }
                    while pings.load(Ordering::Acquire) == seen {
                        thread::yield_now();
                    }
                }
            })
        };
        // The answer comes, and its request takes it: the id is free.
        assert_eq!(s.complete(held, 7), Ok(Delivery::Delivered));
        let waker = Waker::noop();
        assert!(matches!(s.poll_response(held, &mut Context::from_waker(waker)), Poll::Ready(Answer::Received(7))));
        if s.awaited() {
            pings.fetch_add(1, Ordering::Release);
        }
        assert_eq!(waiter.join().expect("thread"), held);
        assert_eq!(s.in_flight(), 1);
        assert!(!s.awaited(), "the waiter is still counted");
    });
}
