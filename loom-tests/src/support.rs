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

/// Runs `f` under loom as [`model`] does, for models that read a latency
/// histogram: `max_branches` raised above loom's default of 1,000 (a
/// snapshot is 896 loom loads per stripe), and `f` on a loom thread with a
/// 4 MiB stack (a debug build makes a stripe's loom atomics on the stack
/// before boxing them, past a model thread's default stack: "coroutine
/// has overflowed its stack").
pub(crate) fn model_of_histograms(max_branches: usize, f: fn()) {
    const STACK: usize = 4 << 20;
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.max_branches = max_branches;
    b.check(move || {
        loom::thread::Builder::new().stack_size(STACK).spawn(f).expect("spawn").join().expect("model");
    });
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
