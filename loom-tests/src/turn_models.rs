//! Models of whose turn it is to write a connection's socket (`turn.rs`):
//! requests writing their own runs on an idle connection, and the writer
//! task. The socket is a loom cell, so that loom reports two writers
//! writing at once.

use loom::cell::UnsafeCell;
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::support::model;
use crate::turn::{Turn, WriterTurn};

/// The socket: what was written, in order.
struct Socket(UnsafeCell<String>);

impl Socket {
    fn write(&self, s: &str) {
        self.0.with_mut(|p| {
            // SAFETY: only the holder of the turn writes, which the model
            // checks: loom fails on concurrent access to the cell.
            unsafe { (*p).push_str(s) }
        });
    }

    fn written(&self) -> String {
        self.0.with(|p| {
            // SAFETY: called once every writer is done.
            unsafe { (*p).clone() }
        })
    }
}

/// A connection: its turn, its socket, and the rest of a request's run
/// that the socket did not take.
#[derive(Clone)]
struct Connection {
    turn: Arc<Turn>,
    socket: Arc<Socket>,
    rest: Arc<Mutex<String>>,
}

impl Connection {
    fn new() -> Self {
        Connection {
            turn: Arc::new(Turn::default()),
            socket: Arc::new(Socket(UnsafeCell::new(String::new()))),
            rest: Arc::new(Mutex::new(String::new())),
        }
    }

    /// A request writes `run` itself when it gets the turn: the socket
    /// takes its first half when `partial`, and the turn goes to the writer
    /// with the rest. `false`: left to the writer task.
    fn request(&self, run: &str, partial: bool) -> bool {
        if !self.turn.try_requester() {
            return false;
        }
        if partial {
            let (first, rest) = run.split_at(1);
            self.socket.write(first);
            *self.rest.lock().expect("rest") = rest.into();
            self.turn.hand_over();
        } else {
            self.socket.write(run);
            self.turn.end_requester();
        }
        true
    }

    /// [`request`](Self::request) on a thread of its own.
    fn request_on_another_thread(&self, run: &'static str, partial: bool) -> thread::JoinHandle<bool> {
        let conn = self.clone();
        thread::spawn(move || conn.request(run, partial))
    }

    /// The writer task writes `run` in its turn, the rest of a handed-over
    /// run first.
    fn writer(&self, run: &str) {
        loop {
            match self.turn.try_writer() {
                WriterTurn::Taken => {}
                WriterTurn::TakenOwing => self.socket.write(&std::mem::take(&mut *self.rest.lock().expect("rest"))),
                WriterTurn::Busy => {
                    thread::yield_now();
                    continue;
                }
            }
            self.socket.write(run);
            self.turn.end_writer();
            return;
        }
    }
}

/// A request's run the socket took in part is finished, right after its
/// first part, before anything the writer task writes; and the request
/// and the writer task never write at once.
#[test]
fn a_run_written_in_part_is_finished_before_anything_else() {
    model(|| {
        let conn = Connection::new();
        let request = conn.request_on_another_thread("aA", true);
        conn.writer("w");
        let wrote = request.join().expect("thread");
        let written = conn.socket.written();
        // "wa": the request wrote after the writer was done, and handed
        // the rest over to its next write.
        let expected: &[&str] = if wrote { &["aAw", "wa"] } else { &["w"] };
        assert!(expected.contains(&written.as_str()), "written: {written}");
    });
}

/// Two requests that both find the connection idle, and the writer task:
/// one writer at a time, and every run whole.
#[test]
fn two_requests_and_the_writer_take_turns() {
    model(|| {
        let conn = Connection::new();
        let first = conn.request_on_another_thread("bb", false);
        let second = conn.request("cc", false);
        conn.writer("w");
        let first = first.join().expect("thread");
        let written = conn.socket.written();
        for (wrote, run) in [(first, "bb"), (second, "cc")] {
            assert_eq!(written.contains(run), wrote, "written: {written}");
        }
        assert_eq!(written.len(), 1 + 2 * (usize::from(first) + usize::from(second)), "written: {written}");
    });
}
