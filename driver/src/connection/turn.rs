//! Whose turn it is to write a plain TCP connection's socket: the writer
//! task's, or a request's own while the connection is idle.
//!
//! A request alone on its connection gains nothing from waiting for the
//! writer task: there is nothing to coalesce with, and waking the task
//! costs a hop through the runtime. So it takes the turn, queues itself,
//! takes the buffer and writes it, all without waiting (`direct.rs`). The
//! turn is one word, so the two writers never write at once; and it is
//! what keeps queued requests from being stranded:
//!
//! - While a request holds the turn, other requests that queue do not ping
//!   the writer task ([`Turn::requester_writing`]): the turn's holder takes
//!   the buffer with them in it, or pings the writer when it gives the
//!   turn back and finds the buffer not empty ([`Turn::end_requester`]).
//!   Each side writes its own word, puts a `SeqCst` fence, then reads the
//!   other's: either the holder sees their requests, or they see the turn
//!   given back and ping the writer themselves.
//! - A request whose write the socket took only in part hands the rest,
//!   and the turn with it, to the writer task ([`Turn::hand_over`]), which
//!   writes that rest before anything else ([`Turn::try_writer`]).
//!
//! The module is kept free of tokio so that `loom-tests` can model it.

use crate::sync::{fence, AtomicU8, Ordering};

/// Nobody writes.
const FREE: u8 = 0;
/// The writer task writes.
const WRITER: u8 = 1;
/// A request writes its own run.
const REQUESTER: u8 = 2;
/// A request's run was written in part; the writer task owes the rest.
const HANDED: u8 = 3;

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Turn {
    state: AtomicU8,
}

/// What the writer task found when it tried to take the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriterTurn {
    /// Taken: nothing was owed.
    Taken,
    /// Taken, and the rest of a request's run must be written first.
    TakenOwing,
    /// A request is writing; try again after it (it never waits).
    Busy,
}

impl Turn {
    /// A request takes the turn, when nobody has it. It must then queue its
    /// run and end with [`end_requester`](Self::end_requester) or
    /// [`hand_over`](Self::hand_over).
    pub(crate) fn try_requester(&self) -> bool {
        self.state.compare_exchange(FREE, REQUESTER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Whether a request holds the turn, read by a request that just queued
    /// its run: if so, the holder is responsible for that run and the
    /// writer task need not be pinged.
    pub(crate) fn requester_writing(&self) -> bool {
        fence(Ordering::SeqCst);
        self.state.load(Ordering::Relaxed) == REQUESTER
    }

    /// The request gives the turn back. `buffer_empty` then reads the write
    /// buffer; `true` is returned when it is not empty, and the caller must
    /// ping the writer task for what others queued meanwhile.
    pub(crate) fn end_requester(&self, buffer_empty: impl FnOnce() -> bool) -> bool {
        self.state.store(FREE, Ordering::Release);
        fence(Ordering::SeqCst);
        !buffer_empty()
    }

    /// The request's run was written in part: the turn passes to the writer
    /// task, which writes the rest first. The caller stores the rest before
    /// and pings the writer task after.
    pub(crate) fn hand_over(&self) {
        self.state.store(HANDED, Ordering::Release);
    }

    /// The writer task takes the turn before it writes.
    pub(crate) fn try_writer(&self) -> WriterTurn {
        match self.state.compare_exchange(FREE, WRITER, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => WriterTurn::Taken,
            Err(HANDED) => {
                // Only the writer task moves the turn out of HANDED.
                self.state.store(WRITER, Ordering::Relaxed);
                WriterTurn::TakenOwing
            }
            Err(_) => WriterTurn::Busy,
        }
    }

    /// The writer task gives the turn back after its write.
    pub(crate) fn end_writer(&self) {
        self.state.store(FREE, Ordering::Release);
    }
}
