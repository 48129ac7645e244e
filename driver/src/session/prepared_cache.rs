//! The session's cache of prepared statements, by the keyspace in effect
//! when each was prepared and its text (an unqualified name is another
//! table after `USE`). Unbounded by default; with a capacity (the official
//! `CachingSession`'s size) the statement used least recently makes room
//! for a new one, so that a service preparing statements it builds at run
//! time keeps a bounded cache. A statement dropped from the cache stays
//! valid wherever it is held; asked for again, it is prepared again.
//!
//! One lock around the map, taken once per lookup (as before the bound);
//! recency is a counter in each entry, written under that lock, and the
//! entry to drop is found by a scan of the map when a new statement does
//! not fit, which only a prepare (a round trip to every node) pays.
//!
//! Generic over what it caches (the session's is of `PreparedStatement`s),
//! so that its loom model (`loom-tests/src/prepared_cache_models.rs`) is
//! compiled from this file without the driver.

use std::collections::HashMap;

use crate::sync::Mutex;

/// (keyspace in effect, text).
pub(crate) type Key = (Option<String>, String);

#[derive(Debug)]
struct Entries<V> {
    map: HashMap<Key, (V, u64)>,
    /// Uses so far: the recency of the next use.
    uses: u64,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct PreparedCache<V> {
    capacity: Option<usize>,
    entries: Mutex<Entries<V>>,
}

impl<V: Clone> PreparedCache<V> {
    /// A cache of at most `capacity` statements; `None`: no bound.
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        PreparedCache { capacity, entries: Mutex::new(Entries { map: HashMap::new(), uses: 0 }) }
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Entries<V>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The statement cached for `key`, now the most recently used.
    pub(crate) fn get(&self, key: &Key) -> Option<V> {
        let mut entries = self.lock();
        entries.uses += 1;
        let now = entries.uses;
        entries.map.get_mut(key).map(|(p, used)| {
            *used = now;
            p.clone()
        })
    }

    /// Caches `p` for `key`, dropping the least recently used statement
    /// when the cache is full.
    pub(crate) fn insert(&self, key: Key, p: V) {
        let mut entries = self.lock();
        if self.capacity == Some(0) {
            return;
        }
        let full = self.capacity.is_some_and(|c| entries.map.len() >= c);
        if full && !entries.map.contains_key(&key) {
            let oldest = entries.map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                entries.map.remove(&oldest);
            }
        }
        entries.uses += 1;
        let now = entries.uses;
        entries.map.insert(key, (p, now));
    }

    /// Every statement cached.
    pub(crate) fn statements(&self) -> Vec<V> {
        self.lock().map.values().map(|(p, _)| p.clone()).collect()
    }

    /// How many statements are cached.
    #[cfg(any(test, loom))]
    pub(crate) fn len(&self) -> usize {
        self.lock().map.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::statement::PreparedStatement;
    use bytes::Bytes;
    use shardwise_protocol::response::Prepared;
    use shardwise_protocol::rows::{PreparedMetadata, ResultMetadata};

    use super::*;

    fn statement(text: &str) -> PreparedStatement {
        let metadata = PreparedMetadata { flags: 0, pk_indexes: Vec::new(), specs: Vec::new() };
        let result_metadata =
            ResultMetadata { columns_count: 0, paging_state: None, new_metadata_id: None, specs: None };
        let id = Bytes::copy_from_slice(text.as_bytes());
        PreparedStatement::new(text, Prepared { id, result_metadata_id: None, metadata, result_metadata }, 0)
    }

    fn key(text: &str) -> Key {
        (None, text.to_owned())
    }

    /// Full, a new statement drops the one used least recently (a lookup
    /// counts as a use); the statements kept are found.
    #[test]
    fn a_full_cache_drops_the_statement_used_least_recently() {
        let cache = PreparedCache::<PreparedStatement>::new(Some(2));
        cache.insert(key("a"), statement("a"));
        cache.insert(key("b"), statement("b"));
        assert!(cache.get(&key("a")).is_some(), "a used again: b is now the oldest");
        cache.insert(key("c"), statement("c"));
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&key("b")).is_none(), "b dropped");
        assert!(cache.get(&key("a")).is_some() && cache.get(&key("c")).is_some());
        cache.insert(key("c"), statement("c"));
        assert_eq!(cache.len(), 2, "a statement cached again takes no more room");
        assert!(cache.get(&key("a")).is_some(), "and drops nothing");
    }

    #[test]
    fn no_bound_keeps_every_statement_and_zero_keeps_none() {
        let unbounded = PreparedCache::<PreparedStatement>::new(None);
        for i in 0..100 {
            unbounded.insert(key(&i.to_string()), statement(&i.to_string()));
        }
        assert_eq!(unbounded.len(), 100);
        let none = PreparedCache::<PreparedStatement>::new(Some(0));
        none.insert(key("a"), statement("a"));
        assert_eq!((none.len(), none.get(&key("a")).is_none()), (0, true));
    }

    /// The keyspace in effect is part of the key: the same text prepared
    /// after `USE` is another statement.
    #[test]
    fn the_keyspace_in_effect_is_part_of_the_key() {
        let cache = PreparedCache::<PreparedStatement>::new(None);
        cache.insert((Some("ks1".into()), "SELECT * FROM t".into()), statement("one"));
        assert!(cache.get(&(Some("ks2".into()), "SELECT * FROM t".into())).is_none());
        assert!(cache.get(&(Some("ks1".into()), "SELECT * FROM t".into())).is_some());
    }
}
