//! The tablets the session has learned: for tables in tablets keyspaces,
//! which nodes and shards hold each token range. Scylla does not list them
//! to clients up front; a node that receives a request for a tablet it
//! does not hold answers it and attaches the tablet (`tablets-routing-v1`,
//! `docs/protocol.md` §1.6), so the map fills as requests go, and the next
//! request for that range goes to the tablet's replica and shard.
//!
//! Per table, the tablets are kept sorted and non-overlapping: a learned
//! tablet replaces every one it overlaps (a split, a merge or a migration
//! since). Readers take a read lock for two lookups and an `Arc` clone, as
//! the rest of the routing state; writes (rare: one per misroute) copy the
//! table's list, under the write lock from the read to the store, so that
//! tablets learned at once are all kept (`loom-tests` models the map).

use std::collections::HashMap;
use std::sync::Arc;

#[cfg(not(loom))]
use shardwise_protocol::tablets::TabletRoute;
use uuid::Uuid;

use crate::sync::{AtomicBool, Ordering, RwLock};

/// One tablet: the tokens `(first_token, last_token]` and its replicas as
/// (host id, shard), in the tablet's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tablet {
    /// The range start, exclusive.
    pub first_token: i64,
    /// The range end, inclusive.
    pub last_token: i64,
    /// (host id, shard) of each replica.
    pub replicas: Vec<(Uuid, u16)>,
    /// The tablet's version, when learned through tablets routing v2.
    pub version: Option<u64>,
}

#[cfg(not(loom))]
impl From<TabletRoute> for Tablet {
    fn from(r: TabletRoute) -> Tablet {
        Tablet {
            first_token: r.first_token,
            last_token: r.last_token,
            replicas: r.replicas.into_iter().map(|r| (r.host_id, r.shard)).collect(),
            version: r.version,
        }
    }
}

/// A table's known tablets, sorted by token, non-overlapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableTablets {
    tablets: Vec<Tablet>,
}

impl TableTablets {
    /// The tablet holding `token`, when it is known.
    pub fn find(&self, token: i64) -> Option<&Tablet> {
        let i = self.tablets.partition_point(|t| t.last_token < token);
        self.tablets.get(i).filter(|t| t.first_token < token)
    }

    /// Adds `tablet`, dropping every known tablet it overlaps.
    pub fn insert(&mut self, tablet: Tablet) {
        self.tablets.retain(|t| t.last_token <= tablet.first_token || t.first_token >= tablet.last_token);
        let at = self.tablets.partition_point(|t| t.last_token <= tablet.first_token);
        self.tablets.insert(at, tablet);
    }

    /// The known tablets, in token order.
    pub fn tablets(&self) -> &[Tablet] {
        &self.tablets
    }
}

/// Every table's known tablets: keyspace → table → tablets.
#[derive(Debug, Default)]
pub struct TabletMap {
    /// Some tablet was ever learned: until then (a cluster without
    /// tablets) lookups read this flag only, not the lock's shared state.
    learned: AtomicBool,
    tables: RwLock<HashMap<String, HashMap<String, Arc<TableTablets>>>>,
}

impl TabletMap {
    /// The known tablets of `keyspace.table`.
    pub fn table(&self, keyspace: &str, table: &str) -> Option<Arc<TableTablets>> {
        if !self.learned.load(Ordering::Acquire) {
            return None;
        }
        self.tables.read().unwrap_or_else(|e| e.into_inner()).get(keyspace)?.get(table).cloned()
    }

    /// Learns a tablet of `keyspace.table`.
    pub fn learn(&self, keyspace: &str, table: &str, tablet: Tablet) {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        self.learned.store(true, Ordering::Release);
        let slot = tables.entry(keyspace.to_owned()).or_default().entry(table.to_owned()).or_default();
        let mut updated = TableTablets::clone(slot);
        updated.insert(tablet);
        *slot = Arc::new(updated);
    }

    /// Forgets a dropped keyspace (`table: None`) or table.
    pub fn forget(&self, keyspace: &str, table: Option<&str>) {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        match table {
            None => {
                tables.remove(keyspace);
            }
            Some(t) => {
                if let Some(ks) = tables.get_mut(keyspace) {
                    ks.remove(t);
                }
            }
        }
    }

    /// Forgets every tablet with a replica on a host not in `hosts` (a
    /// node that left or was replaced): its next request learns it again.
    pub fn retain_hosts(&self, hosts: &[Uuid]) {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        for ks in tables.values_mut() {
            for slot in ks.values_mut() {
                if slot.tablets.iter().all(|t| t.replicas.iter().all(|(h, _)| hosts.contains(h))) {
                    continue;
                }
                let mut kept = TableTablets::clone(slot);
                kept.tablets.retain(|t| t.replicas.iter().all(|(h, _)| hosts.contains(h)));
                *slot = Arc::new(kept);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn tablet(first: i64, last: i64, host: u128, shard: u16) -> Tablet {
        Tablet { first_token: first, last_token: last, replicas: vec![(Uuid::from_u128(host), shard)], version: None }
    }

    #[test]
    fn lookup_covers_first_exclusive_last_inclusive() {
        let mut t = TableTablets::default();
        t.insert(tablet(0, 100, 1, 0));
        t.insert(tablet(i64::MIN, -100, 1, 1));
        assert_eq!(t.find(i64::MIN + 1).map(|t| t.replicas[0].1), Some(1));
        assert_eq!(t.find(-100).map(|t| t.replicas[0].1), Some(1));
        assert!(t.find(-99).is_none() && t.find(0).is_none(), "gaps are unknown");
        assert_eq!(t.find(1).map(|t| t.replicas[0].1), Some(0));
        assert_eq!(t.find(100).map(|t| t.replicas[0].1), Some(0));
        assert!(t.find(101).is_none());
    }

    #[test]
    fn a_learned_tablet_replaces_every_one_it_overlaps() {
        let mut t = TableTablets::default();
        t.insert(tablet(0, 100, 1, 0));
        t.insert(tablet(100, 200, 1, 1));
        t.insert(tablet(200, 300, 1, 2));
        // A merge of the first two, moved to shard 5.
        t.insert(tablet(0, 200, 2, 5));
        let ranges: Vec<_> = t.tablets().iter().map(|t| (t.first_token, t.last_token, t.replicas[0].1)).collect();
        assert_eq!(ranges, [(0, 200, 5), (200, 300, 2)]);
        // A split of the merged one: only the half learned is known.
        t.insert(tablet(0, 100, 1, 3));
        let ranges: Vec<_> = t.tablets().iter().map(|t| (t.first_token, t.last_token)).collect();
        assert_eq!(ranges, [(0, 100), (200, 300)]);
        assert!(t.find(150).is_none());
    }

    #[test]
    fn forget_tables_keyspaces_and_hosts() {
        let map = TabletMap::default();
        assert!(map.table("ks", "a").is_none());
        map.learn("ks", "a", tablet(0, 100, 1, 0));
        map.learn("ks", "a", tablet(100, 200, 2, 0));
        map.learn("ks", "b", tablet(0, 100, 1, 0));
        map.learn("other", "a", tablet(0, 100, 1, 0));
        map.retain_hosts(&[Uuid::from_u128(1)]);
        assert_eq!(map.table("ks", "a").map(|t| t.tablets().len()), Some(1), "the host-2 tablet is gone");
        map.forget("ks", Some("a"));
        assert!(map.table("ks", "a").is_none());
        assert!(map.table("ks", "b").is_some());
        map.forget("ks", None);
        assert!(map.table("ks", "b").is_none());
        assert!(map.table("other", "a").is_some());
    }
}
