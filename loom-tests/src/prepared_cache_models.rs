//! Models of the session's bounded cache of prepared statements
//! (`driver/src/session/prepared_cache.rs`): two requests prepare new
//! statements at once into a cache with room for one more, while a third
//! reads its size. The cache never holds more than its capacity, and a
//! statement just cached is found by its next lookup (one other insert
//! drops the statement used least recently, never the newest).
//!
//! To see it fail (done by hand): in `PreparedCache::insert` decide
//! whether the cache is full under one lock and insert under another
//! (`let full = ...; drop(entries); let mut entries = self.lock();`):
//! loom finds both inserts seeing room and the cache holding three (it
//! printed "assertion `left == right` failed, left: 3, right: 2" at the
//! final length).

use loom::sync::Arc;
use loom::thread;

use crate::prepared_cache::{Key, PreparedCache};
use crate::support::model;

fn key(text: &str) -> Key {
    (None, text.to_owned())
}

#[test]
fn racing_inserts_stay_within_the_capacity() {
    model(|| {
        let cache = Arc::new(PreparedCache::new(Some(2)));
        cache.insert(key("a"), 1u32);
        let inserts: Vec<_> = [("c", 3u32), ("d", 4u32)]
            .into_iter()
            .map(|(text, v)| {
                let cache = cache.clone();
                thread::spawn(move || {
                    cache.insert(key(text), v);
                    assert_eq!(cache.get(&key(text)), Some(v), "{text} just cached is found");
                })
            })
            .collect();
        let len = cache.len();
        assert!(len <= 2, "{len} statements in a cache of 2");
        for t in inserts {
            t.join().expect("insert");
        }
        assert_eq!(cache.len(), 2);
        assert_eq!((cache.get(&key("c")), cache.get(&key("d"))), (Some(3), Some(4)), "the newest two kept");
    });
}
