//! Whose turn it is to write a plain TCP connection's socket: the writer
//! task's, or a request's own while the connection is idle (`direct.rs`).
//!
//! The turn is one word, so the two never write at once, and a request's
//! run is never cut by another's:
//!
//! - A request takes the turn only when nobody has it, writes without
//!   waiting, and gives it back ([`Turn::try_requester`],
//!   [`Turn::end_requester`]). The writer task, finding the turn taken,
//!   yields until then.
//! - A request whose run the socket took only in part hands the rest, and
//!   the turn with it, to the writer task ([`Turn::hand_over`]), which
//!   writes that rest before anything else ([`Turn::try_writer`]).
//!
//! [`Handoff`] is the turn with the buffer its holder writes from: what a
//! request hands the writer task with the turn is in it. The writer task
//! gives the buffer back before the turn, so that the next request to take
//! the turn finds its buffer (and no rest of its own is overwritten).
//!
//! The module is kept free of tokio so that `loom-tests` can model it.

use crate::sync::{AtomicU8, Mutex, Ordering};

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
    /// A request takes the turn, when nobody has it. It must end it with
    /// [`end_requester`](Self::end_requester) or
    /// [`hand_over`](Self::hand_over).
    pub(crate) fn try_requester(&self) -> bool {
        self.state.compare_exchange(FREE, REQUESTER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// The request gives the turn back: its run was written whole.
    pub(crate) fn end_requester(&self) {
        self.state.store(FREE, Ordering::Release);
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

/// The turn, and the buffer of a request's run (`direct.rs`): see the
/// module docs.
#[derive(Debug, Default)]
pub(crate) struct Handoff<R> {
    turn: Turn,
    run: Mutex<R>,
}

impl<R: Default> Handoff<R> {
    /// A request writes with `send` when nobody has the turn (`None`
    /// otherwise, having done nothing). `send` fills the buffer, writes what
    /// the socket takes without waiting, and says whether it left a rest in
    /// the buffer: the turn then passes to the writer task with it (the
    /// caller pings the writer task), else it is given back.
    pub(crate) fn request<T>(&self, send: impl FnOnce(&mut R) -> (T, bool)) -> Option<(T, bool)> {
        if !self.turn.try_requester() {
            return None;
        }
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let (sent, rest) = send(&mut run);
        drop(run);
        if rest {
            self.turn.hand_over();
        } else {
            self.turn.end_requester();
        }
        Some((sent, rest))
    }

    /// The writer task takes the turn: `None` while a request writes (it
    /// never waits: try again after yielding); else the rest of a request's
    /// run to write before anything else, if one was handed over, taken
    /// out of the buffer (no lock is held across its write). The turn ends
    /// with [`end_writer`](Self::end_writer).
    pub(crate) fn try_writer(&self) -> Option<Option<R>> {
        match self.turn.try_writer() {
            WriterTurn::Taken => Some(None),
            WriterTurn::TakenOwing => {
                Some(Some(std::mem::take(&mut *self.run.lock().unwrap_or_else(|e| e.into_inner()))))
            }
            WriterTurn::Busy => None,
        }
    }

    /// The writer task ends its turn, giving back the buffer it took (its
    /// rest written, or the connection failing) first.
    pub(crate) fn end_writer(&self, taken: Option<R>) {
        if let Some(run) = taken {
            *self.run.lock().unwrap_or_else(|e| e.into_inner()) = run;
        }
        self.turn.end_writer();
    }

    /// `f` of the buffer, for tests to look into.
    #[cfg(test)]
    pub(crate) fn peek<T>(&self, f: impl FnOnce(&R) -> T) -> T {
        f(&self.run.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
