//! What the models share: how they are run, and a waker that records
//! being woken.

use std::sync::atomic::AtomicBool;
use std::sync::Arc as StdArc;
use std::task::{Wake, Waker};

/// Runs `f` under loom, every interleaving with up to 3 preemptions.
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Raised when its waker is woken.
pub(crate) struct Flag(pub(crate) AtomicBool);

impl Wake for Flag {
    fn wake(self: StdArc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A waker that raises the flag it comes with.
pub(crate) fn flagged_waker() -> (StdArc<Flag>, Waker) {
    let flag = StdArc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    (flag, waker)
}
