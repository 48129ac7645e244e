//! The `OnceLock` stand-in has `OnceLock`'s synchronization, no more: what
//! one thread initializes, another reads only through the cell's state.

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use crate::sync::{AtomicUsize, OnceLock, Ordering};

/// Data written before it is published through the cell, read through it.
struct Published(UnsafeCell<u32>);

impl Published {
    fn new(v: u32) -> Self {
        Published(UnsafeCell::new(v))
    }
    fn read(&self) -> u32 {
        // SAFETY: written only by `new`, before the value was published.
        self.0.with(|p| unsafe { *p })
    }
}

#[test]
fn a_value_read_through_get_is_the_initialized_one() {
    loom::model(|| {
        let cell = Arc::new(OnceLock::<Published>::new());
        let reader = {
            let cell = cell.clone();
            thread::spawn(move || cell.get().map(Published::read))
        };
        let mine = cell.get_or_init(|| Published::new(7)).read();
        assert_eq!(mine, 7);
        assert!(matches!(reader.join().expect("thread"), None | Some(7)));
    });
}

#[test]
fn racing_initializers_run_once_and_agree() {
    loom::model(|| {
        let cell = Arc::new(OnceLock::<Published>::new());
        let runs = Arc::new(AtomicUsize::new(0));
        let other = {
            let (cell, runs) = (cell.clone(), runs.clone());
            thread::spawn(move || {
                cell.get_or_init(|| {
                    runs.fetch_add(1, Ordering::Relaxed);
                    Published::new(1)
                })
                .read()
            })
        };
        let mine = cell
            .get_or_init(|| {
                runs.fetch_add(1, Ordering::Relaxed);
                Published::new(2)
            })
            .read();
        assert_eq!(other.join().expect("thread"), mine, "both see the one value");
        assert_eq!(runs.load(Ordering::Relaxed), 1, "one initializer ran");
        assert_eq!(cell.set(Published::new(3)).map_err(|p| p.read()), Err(3), "set on a full cell");
    });
}
