//! The tablets of the shared state ([`Tablets`] and the methods on the
//! shared state that change it): keyspaces created with tablets, the tablet
//! map of each of their tables, the `system.tablets` rows the front wrote,
//! the CDC stream sets of tables in those keyspaces, per-table hints and the
//! hidden tables of secondary indexes; splits and merges go through one
//! lock so that the map, its rows and its streams change together.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Shared;
use crate::admin::lit;
use crate::cdc;
use crate::clock::now_ms;
use crate::config::TabletsMode;
use crate::error::EmuError;
use crate::generation;
use crate::system_tables;
use crate::tablet_streams::TabletStreams;
use crate::tablets::TabletMap;

/// The most tablets a table gets from `min_tablet_count` (the front writes
/// every tablet and stream to its stand-in tables on each resize).
pub const MAX_EMULATED_TABLETS: u32 = 4096;

/// A change of a table's tablet count, as Scylla's load balancer makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    /// Every tablet halved.
    Split,
    /// Each pair of sibling tablets joined.
    Merge,
}

/// A keyspace created with tablets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TabletKeyspace {
    /// The `initial` tablets option (0: not given).
    pub(crate) initial: i32,
    /// Its replication factor.
    pub(crate) rf: usize,
}

/// The maps the tablets emulation owns.
#[derive(Default)]
pub(crate) struct Tablets {
    /// Keyspaces with tablets: their `initial` option and replication factor.
    pub(crate) keyspaces: Mutex<HashMap<String, TabletKeyspace>>,
    /// The tablet map of each table of those keyspaces, made on first use.
    pub(crate) maps: Mutex<HashMap<(String, String), Arc<TabletMap>>>,
    /// The id and resize sequence number of each table whose map is in
    /// `system.tablets`.
    pub(crate) tables: Mutex<HashMap<(String, String), (uuid::Uuid, i64)>>,
    /// The CDC stream sets of CDC tables in tablets keyspaces (by base table).
    pub(crate) streams: Mutex<HashMap<(String, String), TabletStreams>>,
    /// Held through a resize.
    pub(crate) resize_lock: tokio::sync::Mutex<()>,
    /// Per-table `tablets = {...}` hints ([`crate::tablets_ddl`]).
    pub(crate) options: Mutex<HashMap<(String, String), crate::tablet_options::TabletOptions>>,
    /// The hidden tables of secondary indexes in tablets keyspaces, as
    /// ScyllaDB has them (`<index>_index`, [`crate::tablets_ddl`]): by
    /// (keyspace, index table), the base table and the table id the front
    /// gave it.
    pub(crate) index_tables: Mutex<HashMap<(String, String), (String, uuid::Uuid)>>,
}

impl Shared {
    /// Records a keyspace created with tablets, as Scylla's
    /// `system_schema.scylla_keyspaces` shows it (`initial_tablets`; no row
    /// for a keyspace on vnodes), and gives its tables tablet maps.
    pub(crate) async fn record_tablets(&self, keyspace: &str, initial: i32) -> Result<(), (i32, String)> {
        let cql = format!(
            "INSERT INTO {}.scylla_keyspaces (keyspace_name, initial_tablets) VALUES ({}, {initial})",
            self.emu(),
            lit(keyspace)
        );
        self.admin.query(&cql).await.map(|_| ()).map_err(EmuError::code_and_message)?;
        let rf = system_tables::replication_factor(&self.admin, keyspace).await.map_err(EmuError::code_and_message)?;
        if let Ok(mut k) = self.tablets.keyspaces.lock() {
            k.insert(keyspace.to_owned(), TabletKeyspace { initial, rf });
        }
        Ok(())
    }

    /// After a `CREATE KEYSPACE` that said nothing of tablets: tablets when
    /// the front's [`TabletsMode`] gives them to new keyspaces and the
    /// keyspace's strategy is tablets-aware (NetworkTopologyStrategy; a
    /// SimpleStrategy keyspace stays on vnodes, as on Scylla).
    pub(crate) async fn default_tablets(&self, keyspace: &str) -> Result<(), (i32, String)> {
        if self.config.tablets_mode != TabletsMode::Enabled {
            return Ok(());
        }
        let class =
            system_tables::replication_class(&self.admin, keyspace).await.map_err(EmuError::code_and_message)?;
        if class.is_some_and(|c| c.ends_with("NetworkTopologyStrategy")) {
            self.record_tablets(keyspace, 0).await?;
        }
        Ok(())
    }

    /// The `initial` tablets option of a keyspace with tablets (0: not
    /// given); `None` for a keyspace on vnodes.
    pub(crate) fn initial_tablets(&self, keyspace: &str) -> Option<i32> {
        self.tablets.keyspaces.lock().ok()?.get(keyspace).map(|k| k.initial)
    }

    /// Whether `keyspace` was created with tablets.
    pub(crate) fn uses_tablets(&self, keyspace: &str) -> bool {
        self.tablets.keyspaces.lock().is_ok_and(|k| k.contains_key(keyspace))
    }

    /// The tablet map of `keyspace.table` when its keyspace uses tablets
    /// (made on first use: [`TabletMap::new`]).
    pub(crate) fn tablets_of(&self, keyspace: &str, table: &str) -> Option<Arc<TabletMap>> {
        let ks = *self.tablets.keyspaces.lock().ok()?.get(keyspace)?;
        // A CDC log is co-located with its base table: the base's tablets.
        let table = match table.strip_suffix(cdc::LOG_SUFFIX) {
            Some(base) if self.registry.lock().ok()?.logs.contains(&(keyspace.to_owned(), table.to_owned())) => base,
            _ => table,
        };
        let mut maps = self.tablets.maps.lock().ok()?;
        if let Some(m) = maps.get(&(keyspace.to_owned(), table.to_owned())) {
            return Some(m.clone());
        }
        let shards = self.sharder.nr_shards().get();
        let count = match usize::try_from(ks.initial) {
            Ok(n) if n > 0 => n,
            _ => self.nodes.len() * usize::from(shards),
        };
        let count = self.hinted_tablet_count(keyspace, table, count);
        let map = Arc::new(TabletMap::new(count, self.nodes.len(), shards, ks.rf));
        maps.insert((keyspace.to_owned(), table.to_owned()), map.clone());
        Some(map)
    }

    /// Writes the `system.tablets` rows of `keyspace.table` from `map`
    /// (with the next resize sequence number when `resized`).
    pub(super) async fn publish_tablets(
        &self,
        keyspace: &str,
        table: &str,
        map: &TabletMap,
        resized: bool,
    ) -> Result<(), EmuError> {
        let key = (keyspace.to_owned(), table.to_owned());
        let known = self.tablets.tables.lock().ok().and_then(|t| t.get(&key).copied());
        let (id, seq) = match known {
            Some((id, seq)) => (id, if resized { seq + 1 } else { seq }),
            None => match self.tablet_table_id(keyspace, table).await? {
                Some(id) => (id, i64::from(resized)),
                None => return Ok(()),
            },
        };
        let host_id = |n: usize| self.nodes.get(n).and_then(|n| n.host_id);
        system_tables::write_tablets(&self.admin, self.emu(), (keyspace, table, id), map, seq, host_id).await?;
        if let Ok(mut t) = self.tablets.tables.lock() {
            t.insert(key, (id, seq));
        }
        Ok(())
    }

    /// The id `system.tablets` names `keyspace.table` by: a table's or a
    /// materialized view's id in `system_schema`, or the id the front gave
    /// the hidden table of a secondary index.
    pub(super) async fn tablet_table_id(&self, keyspace: &str, table: &str) -> Result<Option<uuid::Uuid>, EmuError> {
        if let Some(id) = system_tables::table_id(&self.admin, keyspace, table).await? {
            return Ok(Some(id));
        }
        if let Some(id) = system_tables::view_id(&self.admin, keyspace, table).await? {
            return Ok(Some(id));
        }
        Ok(self
            .tablets
            .index_tables
            .lock()
            .ok()
            .and_then(|t| t.get(&(keyspace.to_owned(), table.to_owned())).map(|x| x.1)))
    }

    /// Gives the secondary indexes of `keyspace.base` tablet maps and
    /// `system.tablets` rows, and takes them from dropped ones, when the
    /// keyspace uses tablets ([`crate::tablets_ddl`]).
    pub(crate) async fn sync_index_tablets(&self, keyspace: &str, base: &str) -> Result<(), EmuError> {
        if !self.uses_tablets(keyspace) {
            return Ok(());
        }
        let want = system_tables::index_tables(&self.admin, keyspace, base).await?;
        let have: Vec<String> = match self.tablets.index_tables.lock() {
            Ok(t) => {
                t.iter().filter(|((k, _), (b, _))| k == keyspace && b == base).map(|((_, n), _)| n.clone()).collect()
            }
            Err(_) => return Ok(()),
        };
        for gone in have.iter().filter(|n| !want.contains(n)) {
            self.forget_tablets(keyspace, Some(gone)).await?;
        }
        for new in want.iter().filter(|n| !have.contains(n)) {
            let mut random = generation::random_source();
            let id = uuid::Builder::from_random_bytes(
                [random().to_be_bytes(), random().to_be_bytes()].concat().try_into().unwrap_or([0; 16]),
            )
            .into_uuid();
            if let Ok(mut t) = self.tablets.index_tables.lock() {
                t.insert((keyspace.to_owned(), new.clone()), (base.to_owned(), id));
            }
            if let Some(map) = self.tablets_of(keyspace, new) {
                self.publish_tablets(keyspace, new, &map, false).await?;
            }
        }
        Ok(())
    }

    /// The first CDC stream set of `keyspace.table` when it is in a tablets
    /// keyspace and has none yet (CDC turned on), from now on.
    pub(super) async fn start_tablet_streams(&self, keyspace: &str, table: &str) -> Result<(), EmuError> {
        let Some(map) = self.tablets_of(keyspace, table) else { return Ok(()) };
        let key = (keyspace.to_owned(), table.to_owned());
        let streams = match self.tablets.streams.lock() {
            Ok(mut all) if !all.contains_key(&key) => {
                let streams = TabletStreams::new(&map, now_ms(), &mut generation::random_source());
                all.insert(key, streams.clone());
                streams
            }
            _ => return Ok(()),
        };
        system_tables::write_stream_set(&self.admin, self.emu(), (keyspace, table), &streams, 0).await
    }

    /// A new CDC stream set for `keyspace.table` after its tablets became
    /// `map` (when it has CDC streams).
    pub(super) async fn resize_tablet_streams(
        &self,
        keyspace: &str,
        table: &str,
        map: &TabletMap,
    ) -> Result<(), EmuError> {
        let key = (keyspace.to_owned(), table.to_owned());
        let streams = match self.tablets.streams.lock() {
            Ok(mut all) => match all.get_mut(&key) {
                Some(streams) => {
                    streams.resized(map, now_ms(), &mut generation::random_source());
                    streams.clone()
                }
                None => return Ok(()),
            },
            Err(_) => return Ok(()),
        };
        let last = streams.sets().len() - 1;
        system_tables::write_stream_set(&self.admin, self.emu(), (keyspace, table), &streams, last).await
    }

    /// Splits or merges the tablets of `keyspace.table`; the new map, or
    /// `None` when the table has no tablets or cannot resize that way.
    pub(crate) async fn resize_tablets(
        &self,
        keyspace: &str,
        table: &str,
        resize: Resize,
    ) -> Result<Option<Arc<TabletMap>>, EmuError> {
        // One resize at a time: the map, `system.tablets` and the stream
        // sets change together.
        let _resizing = self.tablets.resize_lock.lock().await;
        let is_log = self.registry.lock().is_ok_and(|r| r.logs.contains(&(keyspace.to_owned(), table.to_owned())));
        if is_log || system_tables::table_id(&self.admin, keyspace, table).await?.is_none() {
            // A log has its base table's tablets: resizing is the base's.
            return Ok(None);
        }
        let Some(old) = self.tablets_of(keyspace, table) else { return Ok(None) };
        let new = match resize {
            Resize::Split => old.split(),
            Resize::Merge => old.merge(),
        };
        let Some(new) = new.map(Arc::new) else { return Ok(None) };
        if let Ok(mut maps) = self.tablets.maps.lock() {
            maps.insert((keyspace.to_owned(), table.to_owned()), new.clone());
        }
        self.publish_tablets(keyspace, table, &new, true).await?;
        self.resize_tablet_streams(keyspace, table, &new).await?;
        Ok(Some(new))
    }

    pub(super) async fn forget_tablets(&self, keyspace: &str, table: Option<&str>) -> Result<(), EmuError> {
        // A dropped base table takes its indexes' hidden tables with it.
        let indexes: Vec<String> = match self.tablets.index_tables.lock() {
            Ok(mut t) => {
                let gone: Vec<String> = t
                    .iter()
                    .filter(|((k, n), (b, _))| {
                        k == keyspace && table.is_none_or(|x| x == b.as_str() || x == n.as_str())
                    })
                    .map(|((_, n), _)| n.clone())
                    .collect();
                t.retain(|(k, n), _| !(k == keyspace && gone.contains(n)));
                gone
            }
            Err(_) => Vec::new(),
        };
        if let Some(base) = table {
            for index in indexes.iter().filter(|n| n.as_str() != base) {
                Box::pin(self.forget_tablets(keyspace, Some(index))).await?;
            }
        }
        if let Ok(mut maps) = self.tablets.maps.lock() {
            maps.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
        }
        if let Ok(mut o) = self.tablets.options.lock() {
            o.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
        }
        let gone: Vec<uuid::Uuid> = match self.tablets.tables.lock() {
            Ok(mut tables) => {
                let ids = tables
                    .iter()
                    .filter(|((k, t), _)| k == keyspace && table.is_none_or(|table| t == table))
                    .map(|(_, &(id, _))| id)
                    .collect();
                tables.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
                ids
            }
            Err(_) => Vec::new(),
        };
        for id in gone {
            self.admin.query(&format!("DELETE FROM {}.tablets WHERE table_id = {id}", self.emu())).await?;
        }
        let streams_gone: Vec<(String, String)> = match self.tablets.streams.lock() {
            Ok(mut all) => {
                let gone = all
                    .keys()
                    .filter(|(k, t)| k == keyspace && table.is_none_or(|table| t == table))
                    .cloned()
                    .collect();
                all.retain(|(k, t), _| k != keyspace || table.is_some_and(|table| t != table));
                gone
            }
            Err(_) => Vec::new(),
        };
        for (k, t) in streams_gone {
            system_tables::forget_stream_sets(&self.admin, self.emu(), &k, &t).await?;
        }
        if table.is_none() {
            if let Ok(mut k) = self.tablets.keyspaces.lock() {
                k.remove(keyspace);
            }
        }
        Ok(())
    }
}
