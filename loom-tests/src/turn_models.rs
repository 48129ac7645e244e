//! Models of whose turn it is to write a connection's socket (`turn.rs`):
//! a request writing its own run on an idle connection, other requests
//! queueing meanwhile, and the writer task. The write buffer is a stand-in:
//! a count of queued runs, added to with the acquire-release read-modify-
//! write swap-buffer-queue reserves room with, taken whole as its dequeue
//! swaps the buffers, and read relaxed as its `is_empty` reads it.

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::support::model;
use crate::turn::{Turn, WriterTurn};

/// The connection as the requests see it.
#[derive(Default)]
struct Connection {
    turn: Turn,
    queued: AtomicUsize,
    /// The writer task was pinged.
    pinged: AtomicBool,
}

impl Connection {
    /// A request queues its run; the swap buffer then notifies, which
    /// pings the writer unless a request holds the turn.
    fn queue(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if !self.turn.requester_writing() {
            self.pinged.store(true, Ordering::SeqCst);
        }
    }

    /// A request on an idle connection: it writes itself when it gets the
    /// turn, and gives it back.
    fn request_alone(&self) {
        if !self.turn.try_requester() {
            return self.queue();
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.queued.swap(0, Ordering::AcqRel);
        if self.turn.end_requester(|| self.queued.load(Ordering::Relaxed) == 0) {
            self.pinged.store(true, Ordering::SeqCst);
        }
    }
}

/// A run queued while a request holds the turn is written by that
/// request, or the writer task is pinged for it: it is never left in the
/// buffer with nobody to write it.
#[test]
fn no_run_is_left_queued_without_a_ping() {
    model(|| {
        let conn = Arc::new(Connection::default());
        let other = {
            let conn = conn.clone();
            thread::spawn(move || conn.queue())
        };
        conn.request_alone();
        other.join().expect("thread");
        let left = conn.queued.load(Ordering::SeqCst);
        assert!(left == 0 || conn.pinged.load(Ordering::SeqCst), "{left} run(s) queued, and the writer not pinged");
    });
}

/// The same with two requests that may each find the connection idle.
#[test]
fn no_run_is_left_queued_by_two_requests_alone() {
    model(|| {
        let conn = Arc::new(Connection::default());
        let other = {
            let conn = conn.clone();
            thread::spawn(move || conn.request_alone())
        };
        conn.request_alone();
        other.join().expect("thread");
        let left = conn.queued.load(Ordering::SeqCst);
        assert!(left == 0 || conn.pinged.load(Ordering::SeqCst), "{left} run(s) queued, and the writer not pinged");
    });
}

/// The socket: bytes in the order they were written. A cell, so that
/// loom reports two writers writing at once.
struct Socket(UnsafeCell<Vec<char>>);

impl Socket {
    fn write(&self, s: &str) {
        self.0.with_mut(|p| {
            // SAFETY: only the holder of the turn writes, which the model
            // checks: loom fails on concurrent access to the cell.
            unsafe { (*p).extend(s.chars()) }
        });
    }
}

/// The request and the writer task never write at once, and the rest of a
/// request's run that the socket took in part comes right after its
/// first part, before anything the writer task writes.
#[test]
fn a_run_written_in_part_is_finished_before_anything_else() {
    model(|| {
        let turn = Arc::new(Turn::default());
        let socket = Arc::new(Socket(UnsafeCell::new(Vec::new())));
        let rest = Arc::new(Mutex::new(String::new()));
        let request = {
            let (turn, socket, rest) = (turn.clone(), socket.clone(), rest.clone());
            thread::spawn(move || {
                if turn.try_requester() {
                    socket.write("a");
                    *rest.lock().expect("rest") = "A".into();
                    turn.hand_over();
                }
            })
        };
        // The writer task writes once, in its turn.
        loop {
            match turn.try_writer() {
                WriterTurn::Taken => {}
                WriterTurn::TakenOwing => socket.write(&std::mem::take(&mut *rest.lock().expect("rest"))),
                WriterTurn::Busy => {
                    thread::yield_now();
                    continue;
                }
            }
            socket.write("w");
            turn.end_writer();
            break;
        }
        request.join().expect("thread");
        let written: String = socket.0.with(|p| {
            // SAFETY: both writers are done.
            unsafe { (*p).iter().collect() }
        });
        assert!(["w", "aAw", "wa"].contains(&written.as_str()), "written: {written}");
    });
}
