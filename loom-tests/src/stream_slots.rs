//! Models of the stream-id table: id allocation under contention, and the
//! slot state machine when a response races with its request being
//! abandoned, polled, or the connection failing.

use std::sync::atomic::AtomicBool;
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Wake, Waker};

use crate::stream::{Delivery, Streams};
use loom::sync::Arc;
use loom::thread;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: StdArc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

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
        let flag = StdArc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let reader = {
            let s = s.clone();
            thread::spawn(move || s.complete(id, 9))
        };
        let first = s.poll_response(id, &mut cx);
        assert_eq!(reader.join().expect("thread"), Ok(Delivery::Delivered));
        match first {
            Poll::Ready(v) => assert_eq!(v, Some(9)),
            Poll::Pending => {
                // Registered before the response: it must have been woken.
                assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "lost wake-up");
                assert_eq!(s.poll_response(id, &mut cx), Poll::Ready(Some(9)));
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
        assert!(matches!(s.poll_response(a, &mut cx), Poll::Ready(Some(1 | -1))));
        assert_eq!(s.in_flight(), 0, "every id is free");
        assert_eq!(s.orphans(), 0);
    });
}
