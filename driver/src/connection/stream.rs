//! Stream ids and the slots where responses meet their requests.
//!
//! Each connection can have up to 32768 requests in flight, one per stream
//! id. Ids live in pages of 64 slots, created on first use, so an idle
//! connection costs one page. A page has a bitmap of used ids (claimed with
//! `fetch_or`, lock-free) and one small mutex-protected slot per id that the
//! reader task fills and the waiting request drains; no channel or
//! allocation per request.
//!
//! ```text
//!            allocate            complete (reader)
//!   Free ───────────────▶ Pending ───────────────▶ Done ──take (request)──▶ Free
//!                          │   │                     ▲          │
//!   (deadline passed) expire   │abandon              │   abandon│ (value dropped)
//!                          ▼   ▼ (request dropped)   │          ▼
//!                  Expired ──take──▶ Abandoned ──complete (reader)──▶ Free
//!                     └───────complete (a late answer)──┘
//! ```
//!
//! Abandoned slots are "orphans": their id stays reserved until the server
//! answers, and their count is exposed so the connection can enforce a
//! budget.
//!
//! Deadlines are kept here too, so that a request waiting for its answer
//! costs no runtime timer: a request claims its id with a deadline (in the
//! connection's ticks), and the connection's sweeper ([`Streams::expire`])
//! moves the slots whose deadline passed to `Expired` and wakes their
//! requests, which take that as their timeout. Each slot has an atomic copy
//! of its deadline, so a sweep reads one word per id in use and locks only
//! the slots that expire.
//!
//! Freeing an id pings the requests waiting for one only when some do
//! ([`Streams::awaited`]): the ping writes a word that every worker's
//! requests share, and answers free ids far more often than anyone waits.
//! The waiters are counted in the same word as the ids in use, so that a
//! free and a waiter's arrival are ordered one way or the other: either
//! the waiter's next claim sees the id free, or the free sees the waiter.

use std::task::{Context, Poll, Waker};

use crate::sync::{AtomicU64, AtomicUsize, Mutex, OnceLock, Ordering};

/// Ids per page.
const PAGE_SIZE: usize = 64;
/// The protocol's limit of concurrent stream ids.
pub(crate) const MAX_STREAMS: usize = 32768;

/// A deadline, in ticks of the connection's clock; `NO_DEADLINE` is none.
pub(crate) type Tick = u64;
/// No deadline.
pub(crate) const NO_DEADLINE: Tick = 0;

enum Slot<T> {
    Free,
    Pending(Option<Waker>),
    Done(T),
    /// The deadline passed before the answer came; the request is told so.
    Expired,
    Abandoned,
}

struct Page<T> {
    used: AtomicU64,
    slots: Box<[Mutex<Slot<T>>]>,
    /// Each slot's deadline while it is pending (else `NO_DEADLINE`),
    /// written under the slot's lock; the sweeper reads them without it.
    deadlines: Box<[AtomicU64]>,
}

impl<T> Page<T> {
    /// A page whose ids set in `reserved` are never handed out.
    fn new(reserved: u64) -> Self {
        Page {
            used: AtomicU64::new(reserved),
            slots: (0..PAGE_SIZE).map(|_| Mutex::new(Slot::Free)).collect(),
            deadlines: (0..PAGE_SIZE).map(|_| AtomicU64::new(NO_DEADLINE)).collect(),
        }
    }

    fn set_deadline(&self, bit: usize, deadline: Tick) {
        // Ordered before the sweeper's loads of the deadlines by the fences
        // of the request and the sweeper (`sweep.rs`).
        self.deadlines[bit].store(deadline, Ordering::Relaxed);
    }

    /// The slot no longer waits for a deadline (answered, expired, given
    /// up); written under the slot's lock.
    fn clear_deadline(&self, bit: usize) {
        self.deadlines[bit].store(NO_DEADLINE, Ordering::Relaxed);
    }
}

/// What [`Streams::poll_response`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer<T> {
    /// The answer (the id is free again).
    Received(T),
    /// The deadline passed first; the id stays reserved until the answer
    /// comes, as an orphan.
    Expired,
    /// Not a request's slot.
    Missing,
}

/// Why a request not sent yet stops waiting ([`Streams::poll_unsent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsent {
    /// Its deadline passed.
    Expired,
    /// The connection failed it (or the id is not a request's).
    Failed,
}

/// What [`Streams::complete`] did with a value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Handed to the waiting request.
    Delivered,
    /// The request had been dropped; the id is free again.
    Orphan,
}

/// The stream-id table of one connection.
pub(crate) struct Streams<T> {
    pages: Box<[OnceLock<Page<T>>]>,
    /// Ids of the last page beyond the configured maximum.
    last_page_reserved: u64,
    orphans: AtomicUsize,
    /// Ids in use, plus [`WAITER`] per request waiting for one.
    in_flight: AtomicUsize,
}

/// The unit of waiting requests in `Streams::in_flight`, above any count
/// of ids in use (at most 32768).
const WAITER: usize = 1 << 16;

/// A request waiting for a free id, counted until dropped.
pub(crate) struct IdWait<'a, T>(&'a Streams<T>);

impl<T> Drop for IdWait<'_, T> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(WAITER, Ordering::Relaxed);
    }
}

impl<T> Streams<T> {
    /// A table with room for `max_streams` ids (at most 32768), of which only
    /// the first page is allocated now.
    pub(crate) fn new(max_streams: usize) -> Self {
        let max = max_streams.clamp(1, MAX_STREAMS);
        let pages: Box<[OnceLock<Page<T>>]> = (0..max.div_ceil(PAGE_SIZE)).map(|_| OnceLock::new()).collect();
        let last_page_reserved = match max % PAGE_SIZE {
            0 => 0,
            n => !((1u64 << n) - 1),
        };
        let streams =
            Streams { pages, last_page_reserved, orphans: AtomicUsize::new(0), in_flight: AtomicUsize::new(0) };
        streams.page(0);
        streams
    }

    fn page(&self, p: usize) -> Option<&Page<T>> {
        let reserved = if p + 1 == self.pages.len() { self.last_page_reserved } else { 0 };
        Some(self.pages.get(p)?.get_or_init(|| Page::new(reserved)))
    }

    /// Claims a free id and marks its slot pending, or `None` when every id
    /// is in use.
    #[cfg(any(test, loom))]
    pub(crate) fn allocate(&self) -> Option<i16> {
        self.allocate_until(NO_DEADLINE)
    }

    /// [`Streams::allocate`] for a request to be expired at `deadline`.
    pub(crate) fn allocate_until(&self, deadline: Tick) -> Option<i16> {
        for p in 0..self.pages.len() {
            let page = self.page(p)?;
            let mut used = page.used.load(Ordering::Relaxed);
            while used != u64::MAX {
                let bit = used.trailing_ones() as usize;
                let mask = 1u64 << bit;
                let before = page.used.fetch_or(mask, Ordering::Acquire);
                if before & mask == 0 {
                    let mut slot = lock(&page.slots[bit]);
                    *slot = Slot::Pending(None);
                    if deadline != NO_DEADLINE {
                        page.set_deadline(bit, deadline);
                    }
                    drop(slot);
                    self.in_flight.fetch_add(1, Ordering::Relaxed);
                    return Some((p * PAGE_SIZE + bit) as i16);
                }
                used = before | mask;
            }
        }
        None
    }

    fn slot(&self, id: i16) -> Option<(&Page<T>, usize)> {
        let id = usize::try_from(id).ok()?;
        let page = self.pages.get(id / PAGE_SIZE)?.get()?;
        Some((page, id % PAGE_SIZE))
    }

    fn release(&self, page: &Page<T>, bit: usize) {
        page.used.fetch_and(!(1u64 << bit), Ordering::Release);
        // Release: a waiter counting itself after this reads the id free.
        self.in_flight.fetch_sub(1, Ordering::Release);
    }

    /// Counts a request that will wait for a free id, from before its next
    /// claim until the returned guard is dropped: every id freed meanwhile
    /// either goes to that claim or sees it counted ([`Streams::awaited`]).
    pub(crate) fn wait_for_id(&self) -> IdWait<'_, T> {
        // Acquire: after a free counted before this, the claim sees it.
        self.in_flight.fetch_add(WAITER, Ordering::Acquire);
        IdWait(self)
    }

    /// Whether a request waits for a free id: asked after freeing one, to
    /// ping the waiters only then. The load comes after the free's own
    /// update of the same word, so it sees every waiter counted before it.
    pub(crate) fn awaited(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) >= WAITER
    }

    /// Polls for the response of `id`.
    pub(crate) fn poll_response(&self, id: i16, cx: &mut Context<'_>) -> Poll<Answer<T>> {
        let Some((page, bit)) = self.slot(id) else { return Poll::Ready(Answer::Missing) };
        let mut slot = lock(&page.slots[bit]);
        match std::mem::replace(&mut *slot, Slot::Free) {
            Slot::Done(value) => {
                drop(slot);
                self.release(page, bit);
                Poll::Ready(Answer::Received(value))
            }
            Slot::Pending(waker) => {
                *slot = Slot::Pending(Some(refresh(waker, cx)));
                Poll::Pending
            }
            Slot::Expired => {
                *slot = Slot::Abandoned;
                self.orphans.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(Answer::Expired)
            }
            other => {
                // Not a request's slot: leave it as it was.
                *slot = other;
                Poll::Ready(Answer::Missing)
            }
        }
    }

    /// For a request not sent yet (waiting for room in the write buffer):
    /// `Pending`, keeping `cx`'s waker in the slot so that the sweeper
    /// wakes it when its deadline passes, as it wakes a request waiting
    /// for its answer; else why it must stop waiting.
    pub(crate) fn poll_unsent(&self, id: i16, cx: &mut Context<'_>) -> Poll<Unsent> {
        let Some((page, bit)) = self.slot(id) else { return Poll::Ready(Unsent::Failed) };
        let mut slot = lock(&page.slots[bit]);
        match &mut *slot {
            Slot::Pending(waker) => {
                *waker = Some(refresh(waker.take(), cx));
                Poll::Pending
            }
            Slot::Expired => Poll::Ready(Unsent::Expired),
            // Failed with the connection.
            _ => Poll::Ready(Unsent::Failed),
        }
    }

    /// Moves every pending slot whose deadline is at or before `now` to
    /// `Expired` and wakes its request. Returns the earliest deadline still
    /// to come, if any: when the sweeper should run next.
    pub(crate) fn expire(&self, now: Tick) -> Option<Tick> {
        let mut next: Option<Tick> = None;
        for page in self.pages.iter().filter_map(OnceLock::get) {
            let mut used = page.used.load(Ordering::Acquire);
            while used != 0 {
                let bit = used.trailing_zeros() as usize;
                used &= used - 1;
                let Some(hint) = page.deadlines.get(bit) else { break };
                let deadline = hint.load(Ordering::SeqCst);
                if deadline == NO_DEADLINE {
                    continue;
                }
                if deadline > now {
                    next = Some(next.map_or(deadline, |n| n.min(deadline)));
                    continue;
                }
                let mut slot = lock(&page.slots[bit]);
                // Read again under the lock: the id may have been freed and
                // claimed again since.
                let deadline = hint.load(Ordering::SeqCst);
                if deadline == NO_DEADLINE || deadline > now {
                    continue;
                }
                match std::mem::replace(&mut *slot, Slot::Free) {
                    Slot::Pending(waker) => {
                        *slot = Slot::Expired;
                        page.clear_deadline(bit);
                        drop(slot);
                        if let Some(w) = waker {
                            w.wake();
                        }
                    }
                    other => *slot = other,
                }
            }
        }
        next
    }

    /// The request of `id` was never sent: free the id at once (also when
    /// a connection failure already failed it: no one will take that).
    pub(crate) fn cancel(&self, id: i16) {
        let Some((page, bit)) = self.slot(id) else { return };
        let mut slot = lock(&page.slots[bit]);
        if let Slot::Pending(_) | Slot::Done(_) | Slot::Expired = &*slot {
            page.clear_deadline(bit);
            let value = std::mem::replace(&mut *slot, Slot::Free);
            drop(slot);
            drop(value);
            self.release(page, bit);
        }
    }

    /// The request of `id` was dropped before taking its response.
    pub(crate) fn abandon(&self, id: i16) {
        let Some((page, bit)) = self.slot(id) else { return };
        let mut slot = lock(&page.slots[bit]);
        match std::mem::replace(&mut *slot, Slot::Free) {
            Slot::Pending(_) | Slot::Expired => {
                // Nobody waits for the deadline any more.
                page.clear_deadline(bit);
                *slot = Slot::Abandoned;
                self.orphans.fetch_add(1, Ordering::Relaxed);
            }
            Slot::Done(value) => {
                drop(slot);
                drop(value);
                self.release(page, bit);
            }
            other => *slot = other,
        }
    }

    /// Delivers the response for `id`. `Err(value)` means no request waits
    /// on that id (a server bug, or a stale id).
    pub(crate) fn complete(&self, id: i16, value: T) -> Result<Delivery, T> {
        let Some((page, bit)) = self.slot(id) else { return Err(value) };
        let mut slot = lock(&page.slots[bit]);
        match std::mem::replace(&mut *slot, Slot::Free) {
            Slot::Pending(waker) => {
                page.clear_deadline(bit);
                *slot = Slot::Done(value);
                drop(slot);
                if let Some(w) = waker {
                    w.wake();
                }
                Ok(Delivery::Delivered)
            }
            // An answer just after the deadline is still the answer (its
            // request was woken by the expiry and takes this instead).
            Slot::Expired => {
                *slot = Slot::Done(value);
                Ok(Delivery::Delivered)
            }
            Slot::Abandoned => {
                drop(slot);
                self.orphans.fetch_sub(1, Ordering::Relaxed);
                self.release(page, bit);
                Ok(Delivery::Orphan)
            }
            other => {
                *slot = other;
                Err(value)
            }
        }
    }

    /// Fails every pending request with `error()` and frees abandoned ids
    /// (the connection is gone; no response will come).
    pub(crate) fn fail_all(&self, error: impl Fn() -> T) {
        for page in self.pages.iter().filter_map(OnceLock::get) {
            for (bit, slot) in page.slots.iter().enumerate() {
                let mut slot = lock(slot);
                match std::mem::replace(&mut *slot, Slot::Free) {
                    Slot::Pending(waker) => {
                        page.clear_deadline(bit);
                        *slot = Slot::Done(error());
                        drop(slot);
                        if let Some(w) = waker {
                            w.wake();
                        }
                    }
                    Slot::Abandoned => {
                        drop(slot);
                        self.orphans.fetch_sub(1, Ordering::Relaxed);
                        self.release(page, bit);
                    }
                    other => *slot = other,
                }
            }
        }
    }

    /// Requests abandoned before their response arrived.
    pub(crate) fn orphans(&self) -> usize {
        self.orphans.load(Ordering::Relaxed)
    }

    /// Ids in use (including orphans).
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed) % WAITER
    }
}

/// The waker to keep: the one already stored when it would wake the same
/// task (no clone), else the context's.
fn refresh(stored: Option<Waker>, cx: &Context<'_>) -> Waker {
    match stored {
        Some(w) if w.will_wake(cx.waker()) => w,
        _ => cx.waker().clone(),
    }
}

/// Slot locks are never held across user code, so a poisoned lock only means
/// another thread panicked mid-update of a plain enum; take the data anyway.
fn lock<T>(m: &Mutex<T>) -> crate::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn ids_are_unique_until_released_and_pages_grow_lazily() {
        let s: Streams<u32> = Streams::new(200);
        assert_eq!(s.pages.iter().filter(|p| p.get().is_some()).count(), 1);
        let ids: Vec<i16> = (0..200).map(|_| s.allocate().expect("id")).collect();
        assert_eq!(s.allocate(), None, "all ids in use");
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 200);
        assert_eq!(s.in_flight(), 200);
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(s.poll_response(ids[70], &mut cx).is_pending());
        assert_eq!(s.complete(ids[70], 7), Ok(Delivery::Delivered));
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "woken");
        assert_eq!(s.poll_response(ids[70], &mut cx), Poll::Ready(Answer::Received(7)));
        assert_eq!(s.allocate(), Some(ids[70]), "freed id is reused");
    }

    #[test]
    fn abandoned_requests_are_orphans_until_answered() {
        let s: Streams<u32> = Streams::new(64);
        let id = s.allocate().expect("id");
        s.abandon(id);
        assert_eq!(s.orphans(), 1);
        assert_eq!(s.complete(id, 1), Ok(Delivery::Orphan));
        assert_eq!(s.orphans(), 0);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.complete(id, 2), Err(2), "stale id");
        assert_eq!(s.complete(-1, 3), Err(3));
        assert_eq!(s.complete(10_000, 4), Err(4));
    }

    #[test]
    fn fail_all_fails_pending_and_frees_orphans() {
        let s: Streams<i32> = Streams::new(64);
        let a = s.allocate().expect("id");
        let b = s.allocate().expect("id");
        s.abandon(b);
        s.fail_all(|| -1);
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(s.poll_response(a, &mut cx), Poll::Ready(Answer::Received(-1)));
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.orphans(), 0);
    }

    #[test]
    fn a_sweep_expires_what_is_due_wakes_its_request_and_names_the_next_deadline() {
        let s: Streams<u32> = Streams::new(200);
        let due = s.allocate_until(10).expect("id");
        let later = s.allocate_until(30).expect("id");
        let forever = s.allocate().expect("id");
        // On another page, and answered in time.
        let filler: Vec<i16> = (0..70).map(|_| s.allocate().expect("id")).collect();
        let answered = s.allocate_until(5).expect("id");
        assert!(answered >= 64);
        assert_eq!(s.complete(answered, 1), Ok(Delivery::Delivered));

        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(s.poll_response(due, &mut cx).is_pending());
        assert_eq!(s.expire(9), Some(10), "nothing due yet");
        assert!(!flag.0.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(s.expire(10), Some(30));
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst), "the expired request is woken");
        assert_eq!(s.poll_response(due, &mut cx), Poll::Ready(Answer::Expired));
        assert_eq!(s.orphans(), 1, "its id waits for the answer");
        assert_eq!(s.complete(due, 2), Ok(Delivery::Orphan));
        assert_eq!(s.orphans(), 0);

        assert_eq!(s.expire(100), None, "the later one expired too; the others have no deadline");
        assert_eq!(s.poll_response(later, &mut cx), Poll::Ready(Answer::Expired));
        assert!(s.poll_response(forever, &mut cx).is_pending());
        assert_eq!(s.poll_response(answered, &mut cx), Poll::Ready(Answer::Received(1)));
        for id in filler {
            s.cancel(id);
        }
        s.abandon(later);
        assert_eq!(s.expire(1_000), None);
    }

    /// An id freed and claimed again carries the new request's deadline,
    /// not the old one's.
    #[test]
    fn a_reused_id_is_not_expired_by_its_previous_deadline() {
        let s: Streams<u32> = Streams::new(64);
        let first = s.allocate_until(10).expect("id");
        assert_eq!(s.complete(first, 1), Ok(Delivery::Delivered));
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(s.poll_response(first, &mut cx), Poll::Ready(Answer::Received(1)));
        let again = s.allocate().expect("id");
        assert_eq!(again, first);
        assert_eq!(s.expire(50), None);
        assert!(s.poll_response(again, &mut cx).is_pending(), "not expired");
        // A late answer to an expired request is still delivered.
        s.cancel(again);
        let late = s.allocate_until(20).expect("id");
        assert_eq!(s.expire(20), None);
        assert_eq!(s.complete(late, 3), Ok(Delivery::Delivered));
        assert_eq!(s.poll_response(late, &mut cx), Poll::Ready(Answer::Received(3)));
        assert_eq!(s.in_flight(), 0);
        // Unsent and expired: cancelling frees the id at once.
        let unsent = s.allocate_until(1).expect("id");
        assert_eq!(s.expire(2), None);
        s.cancel(unsent);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.orphans(), 0);
    }
}
