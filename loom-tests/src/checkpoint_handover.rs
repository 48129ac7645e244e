//! A CDC lease holder hands a group over while a worker saves a checkpoint
//! (`shardwise-cdc`'s `reader/saves.rs`): the worker's snapshot, taken
//! under the planner's lock, holds the group only if it was taken before
//! the holder left the group; such a save is always written before the
//! holder's final save of the group, never after it (which would set the
//! group's progress back for its next holder).
//!
//! `Saves` is the shipped one; the planner is a stand-in (whether the group
//! is held, and its progress, under a loom mutex): `shardwise-cdc`'s
//! `Planner` compiles only with the crate's checkpoint types, which need
//! the driver, so a loom build of it would build tokio under `cfg(loom)`.

use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::saves::Saves;

#[test]
fn a_stale_save_never_lands_after_the_handover() {
    loom::model(|| {
        let saves = Arc::new(Saves::default());
        // The planner: whether the group is held here, and its progress.
        let planner = Arc::new(Mutex::new((true, 10u32)));
        // The checkpoint store: the progress written, in order.
        let store = Arc::new(Mutex::new(Vec::new()));
        let worker = {
            let (saves, planner, store) = (saves.clone(), planner.clone(), store.clone());
            thread::spawn(move || {
                let _save = saves.begin();
                let snapshot = {
                    let p = planner.lock().expect("lock");
                    p.0.then_some(p.1)
                };
                if let Some(progress) = snapshot {
                    store.lock().expect("lock").push(("worker", progress));
                }
            })
        };
        {
            let mut p = planner.lock().expect("lock");
            p.0 = false;
            p.1 = 20;
        }
        while !saves.quiet() {
            thread::yield_now();
        }
        store.lock().expect("lock").push(("holder", 20));
        worker.join().expect("worker");
        let writes = store.lock().expect("lock").clone();
        assert_eq!(writes.last(), Some(&("holder", 20)), "{writes:?}");
    });
}
