//! Models of a connection closing while requests claim stream ids, send,
//! wait for a free id and drop their futures: the shipped steps of
//! `closing.rs` over the shipped stream table, around stand-ins for what
//! cannot run under loom (the write buffer, the oversized-request channel,
//! tokio's `Notify`).

use loom::sync::Arc;
use loom::thread;

use crate::closing::{begin_close, claim, closed_error, drop_request, Dropped};
use crate::stream::{Answer, Streams};
use crate::support::model;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, OnceLock, Ordering};

type Delivered = Result<u8, &'static str>;

/// What `Inner` holds, minus the I/O.
struct Conn {
    closed: AtomicBool,
    error: OnceLock<&'static str>,
    streams: Streams<Delivered>,
    /// The swap buffer: refuses requests once closed (`None`).
    queue: Mutex<Option<Vec<i16>>>,
    /// The oversized-request channel: it stays open until the writer task
    /// has ended, which is after the close.
    oversized: Mutex<Vec<i16>>,
    /// `freed.notify_waiters()` calls: a waiter that read the count before
    /// trying to claim an id is woken by any later call (what tokio's
    /// `Notified` guarantees from its creation).
    freed: AtomicUsize,
    /// Times the close failed the in-flight requests.
    fail_alls: AtomicUsize,
    max_orphans: usize,
}

impl Conn {
    fn new(max_streams: usize) -> Self {
        Conn {
            closed: AtomicBool::new(false),
            error: OnceLock::new(),
            streams: Streams::new(max_streams),
            queue: Mutex::new(Some(Vec::new())),
            oversized: Mutex::new(Vec::new()),
            freed: AtomicUsize::new(0),
            fail_alls: AtomicUsize::new(0),
            max_orphans: 0,
        }
    }

    /// `Inner::close`.
    fn close(&self, reason: &'static str) {
        let Some(error) = begin_close(&self.closed, &self.error, reason, || "closed") else { return };
        *self.queue.lock().expect("lock") = None;
        self.fail_alls.fetch_add(1, Ordering::Relaxed);
        self.streams.fail_all(|| Err(error));
        self.freed.fetch_add(1, Ordering::Release);
    }

    /// `Inner::send_with` up to the wait for the answer: the id it waits
    /// on, or the error it returns.
    fn send(&self, oversized: bool) -> Result<i16, &'static str> {
        let id = loop {
            let seen = self.freed.load(Ordering::Acquire);
            match claim(&self.closed, &self.error, &self.streams, crate::stream::NO_DEADLINE, || "closed")? {
                Some(id) => break id,
                None => {
                    while self.freed.load(Ordering::Acquire) == seen {
                        thread::yield_now();
                    }
                }
            }
        };
        let written = if oversized {
            self.oversized.lock().expect("lock").push(id);
            true
        } else {
            match self.queue.lock().expect("lock").as_mut() {
                Some(q) => {
                    q.push(id);
                    true
                }
                None => false,
            }
        };
        if !written {
            assert_eq!(drop_request(&self.streams, id, false), Dropped::Cancelled);
            return Err(closed_error(&self.error, || "closed"));
        }
        Ok(id)
    }

    /// `ResponseFuture::drop` before the answer was taken.
    fn drop_response(&self, id: i16, sent: bool) {
        if let Dropped::Abandoned { orphans } = drop_request(&self.streams, id, sent) {
            if orphans > self.max_orphans {
                self.close("too many orphans");
            }
        }
    }
}

/// A request that was written waits on its id; with no reader left after
/// the close, only the close's `fail_all` can answer it.
fn answer_after_close(conn: &Conn, id: i16) -> Option<Delivered> {
    let waker = std::task::Waker::noop();
    match conn.streams.poll_response(id, &mut std::task::Context::from_waker(waker)) {
        std::task::Poll::Ready(Answer::Received(v)) => Some(v),
        _ => None,
    }
}

/// `close` racing a request through either write path: the request fails
/// at once, or it waits and the close answers it. Never does it wait on an
/// id nobody will answer.
#[test]
fn close_racing_send_answers_or_refuses_every_request() {
    for oversized in [false, true] {
        model(move || {
            let conn = Arc::new(Conn::new(2));
            let sender = {
                let conn = conn.clone();
                thread::spawn(move || conn.send(oversized))
            };
            conn.close("reset");
            match sender.join().expect("thread") {
                Ok(id) => {
                    assert_eq!(
                        answer_after_close(&conn, id),
                        Some(Err("reset")),
                        "a request waits forever ({oversized:?})"
                    );
                }
                Err(e) => assert_eq!(e, "reset"),
            }
            assert_eq!(conn.streams.in_flight(), 0, "an id is left behind");
            assert_eq!(conn.fail_alls.load(Ordering::Relaxed), 1);
        });
    }
}

/// A request waiting for a free id when the connection closes is woken
/// and fails.
#[test]
fn close_wakes_a_request_waiting_for_an_id() {
    model(|| {
        let conn = Arc::new(Conn::new(1));
        let held = conn.send(false).expect("the only id");
        let waiter = {
            let conn = conn.clone();
            thread::spawn(move || conn.send(false))
        };
        conn.close("reset");
        assert_eq!(waiter.join().expect("thread"), Err("reset"));
        assert_eq!(answer_after_close(&conn, held), Some(Err("reset")));
        assert_eq!(conn.streams.in_flight(), 0);
    });
}

/// Dropping request futures (one sent, one never written) racing the
/// close, whose `fail_all` meets them half-way; the dropped sent request
/// may itself close the connection (orphan budget 0): one close fails the
/// requests, with the first reason, and every id is free afterwards.
#[test]
fn response_future_drop_racing_fail_all() {
    model(|| {
        let conn = Arc::new(Conn::new(2));
        let sent = conn.send(false).expect("id");
        let unsent = conn.streams.allocate().expect("id");
        let dropper = {
            let conn = conn.clone();
            thread::spawn(move || {
                conn.drop_response(sent, true);
                conn.drop_response(unsent, false);
            })
        };
        conn.close("reset");
        dropper.join().expect("thread");
        assert_eq!(conn.fail_alls.load(Ordering::Relaxed), 1, "the requests were failed once");
        assert!(matches!(conn.error.get(), Some(&("reset" | "too many orphans"))));
        assert_eq!(conn.streams.orphans(), 0, "an orphan outlived the connection");
        assert_eq!(conn.streams.in_flight(), 0, "an id is left behind");
        let a = conn.streams.allocate();
        let b = conn.streams.allocate();
        assert!(a.is_some() && b.is_some() && a != b, "both ids are free again");
    });
}
