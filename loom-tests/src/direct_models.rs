//! Models of the direct-write path (`direct.rs`) through the shipped
//! [`Handoff`]: requests on an idle connection write their own runs, the
//! socket taking only part of them, while the writer task writes its own
//! and, when pinged (`Direct::handed`, a count here), the rest a request
//! handed it. The socket is a loom cell, so that loom reports two writers
//! at once; every run must reach it whole, its rest right after its first
//! part.
//!
//! To see it fail: in `Handoff::end_writer` (`driver/src/connection/turn.rs`)
//! end the turn before giving the buffer back: a request that takes the
//! turn in between leaves its rest in the buffer, which the writer task's
//! emptied one then overwrites ("a run lost its rest"). Or weaken
//! `Turn::end_requester` to `Relaxed`: loom reports the socket written from
//! two threads without order.

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use crate::support::model;
use crate::sync::{AtomicUsize, Ordering};
use crate::turn::Handoff;

/// A request's run, as `direct.rs`'s `Run`: the rest the socket did not
/// take.
#[derive(Debug, Default)]
struct Run {
    rest: String,
}

/// The connection: the handoff, the socket, and the writer task's pings.
struct Conn {
    handoff: Handoff<Run>,
    socket: UnsafeCell<String>,
    handed: AtomicUsize,
}

impl Conn {
    fn write(&self, s: &str) {
        // SAFETY: only the holder of the turn writes, which the model
        // checks: loom fails on concurrent access to the cell.
        self.socket.with_mut(|p| unsafe { (*p).push_str(s) });
    }

    /// `Direct::try_write`: the socket takes all of `run`, or its first
    /// byte only when `partial`; whether the request wrote it (else it goes
    /// through the queue).
    fn request(&self, run: &'static str, partial: bool) -> bool {
        let wrote = self.handoff.request(|buf| {
            let (first, rest) = if partial { run.split_at(1) } else { (run, "") };
            self.write(first);
            buf.rest = rest.into();
            ((), partial)
        });
        match wrote {
            Some((_, handed)) => {
                assert_eq!(handed, partial);
                if handed {
                    self.handed.fetch_add(1, Ordering::Release);
                }
                true
            }
            None => false,
        }
    }

    /// `write_in_turn`: the rest a request handed over first, then `run`.
    fn writer(&self, run: &str) {
        let rest = loop {
            match self.handoff.try_writer() {
                Some(rest) => break rest,
                None => thread::yield_now(),
            }
        };
        if let Some(r) = &rest {
            self.write(&r.rest);
        }
        self.write(run);
        self.handoff.end_writer(rest.map(|_| Run::default()));
    }
}

/// A request writing in part and the writer task on one thread, two
/// requests on another, the first writing whole, the second in part; then
/// the writer task once per ping: every run written by a request is on the
/// socket whole, and nothing is left in the buffer.
#[test]
fn every_run_handed_over_is_finished_whole() {
    model(|| {
        let conn = Arc::new(Conn {
            handoff: Handoff::default(),
            socket: UnsafeCell::new(String::new()),
            handed: AtomicUsize::new(0),
        });
        let other = {
            let conn = conn.clone();
            thread::spawn(move || (conn.request("cC", false), conn.request("aA", true)))
        };
        let mine = conn.request("bB", true);
        conn.writer("w");
        let (first, other) = other.join().expect("requests");
        // The writer task's `handed` branch, once per ping not yet served
        // (a ping served early leaves a turn with nothing owed).
        for _ in 0..conn.handed.load(Ordering::Acquire) {
            conn.writer("");
        }
        // SAFETY: every writer is done.
        let written = conn.socket.with(|p| unsafe { (*p).clone() });
        let runs = [(first, "cC"), (other, "aA"), (mine, "bB")];
        for (wrote, run) in runs {
            assert_eq!(written.contains(run), wrote, "a run lost its rest: {written}");
        }
        let requests = runs.iter().filter(|(wrote, _)| *wrote).count();
        assert_eq!(written.len(), 1 + 2 * requests, "written: {written}");
        assert!(matches!(conn.handoff.try_writer(), Some(None)), "a rest left behind: {written}");
    });
}
