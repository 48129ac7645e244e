//! The front's side of Scylla's tablets DDL: what it refuses before
//! Cassandra sees a statement, and what it records once Cassandra applied
//! the rest ([`crate::rewrite`] takes the `tablets` maps out).
//!
//! - `ALTER KEYSPACE ... AND tablets = {...}`: ScyllaDB keeps a keyspace's
//!   flavour; a map that would turn a vnodes keyspace into a tablets one or
//!   back is an InvalidRequest `Cannot alter replication strategy
//!   vnode/tablets flavor` (`ks_prop_defs::as_ks_metadata_update`,
//!   <https://github.com/scylladb/scylladb/blob/master/cql3/statements/ks_prop_defs.cc>;
//!   `test_alter_cannot_change_vnodes_to_tablets` in `test/cqlpy/test_tablets.py`).
//!   Within a tablets keyspace a new `initial` is recorded
//!   (`scylla_keyspaces.initial_tablets`) and sizes the tables created
//!   afterwards; an ALTER without a map keeps the flavour.
//! - `CREATE TABLE`/`ALTER TABLE ... WITH tablets = {...}`
//!   ([`crate::tablet_options`]): refused in a vnodes keyspace, else
//!   validated; kept per table (an ALTER replaces the map), and the table's
//!   tablet count follows `min_tablet_count`/`max_tablet_count`.
//!
//! - Secondary indexes and materialized views: ScyllaDB keeps an index as a
//!   materialized view on a hidden table `<index>_index`, and in a tablets
//!   keyspace every view is a tablet table of its own (the migration
//!   manager runs the tablet allocator's before-create hook for a new view
//!   as for a table: `service/migration_manager.cc`, "to create tablets for
//!   the new view table"). `test_tablets_are_dropped_when_dropping_index`
//!   and `..._with_view` in `test/cqlpy/test_tablets.py` check that the
//!   index table and the view have rows in `system.tablets` (by keyspace
//!   and table name, `tablet_count` above zero) and lose them when the
//!   index, the view or the base table is dropped. Cassandra has no such
//!   table for an index, so the front makes one up once Cassandra created
//!   the index (CREATE and DROP INDEX answer as an update of the base
//!   table; the front then compares `system_schema.indexes` with what it
//!   has): a random table id, the tablet count any new table of the
//!   keyspace gets. Custom indexes (Scylla's vector index, SAI) have no
//!   view and get none. A materialized view (when the Cassandra behind
//!   allows them) gets its map under its id in `system_schema.views`.
//!
//! The options live in the front's memory only (a restarted front forgets
//! per-table hints and the ids of index tables, not the keyspaces'
//! flavours, which are in `scylla_keyspaces`).

use std::collections::BTreeMap;

use crate::rewrite::Rewrite;
use crate::shared::{Resize, Shared, MAX_EMULATED_TABLETS};
use crate::tablet_options::{TabletOptions, TabletOptionsError};

const INVALID: i32 = 0x2200;

/// ScyllaDB's text for a flavour switch.
pub(crate) const FLAVOR_SWITCH: &str = "Cannot alter replication strategy vnode/tablets flavor";

/// Scylla's refusal of a schema statement's tablets maps, before anything
/// reaches Cassandra; `current` is the connection's keyspace.
pub(crate) fn refusal(shared: &Shared, rw: &Rewrite, current: Option<&str>) -> Option<(i32, String)> {
    if let (Some(choice), Some(keyspace), true) = (rw.tablets, rw.keyspace.as_deref(), rw.alter_keyspace) {
        if shared.uses_tablets(keyspace) != choice.is_some() {
            return Some((INVALID, FLAVOR_SWITCH.to_string()));
        }
    }
    let options = rw.table_tablets.as_ref()?;
    let (keyspace, _) = rw.table.as_ref()?;
    let keyspace = keyspace.as_deref().or(current)?;
    // Scylla looks at the keyspace's flavour before the map's contents.
    if !shared.uses_tablets(keyspace) {
        let e = TabletOptionsError::TabletsDisabled;
        return Some((e.code(), e.to_string()));
    }
    options.as_ref().err().map(|e| (e.code(), e.to_string()))
}

impl Shared {
    /// The tablet count a new map of `keyspace.table` gets: `count`, moved
    /// by the table's hints, at most [`MAX_EMULATED_TABLETS`].
    pub(crate) fn hinted_tablet_count(&self, keyspace: &str, table: &str, count: usize) -> usize {
        let key = (keyspace.to_owned(), table.to_owned());
        let hinted = match self.tablets.options.lock() {
            Ok(o) => o.get(&key).map_or(count, |o| o.created_count(count)),
            Err(_) => count,
        };
        hinted.min(MAX_EMULATED_TABLETS as usize)
    }

    /// Remembers the hints of a table being created (before its map is
    /// made, so that the map is born with the hinted count).
    pub(crate) fn set_tablet_options(&self, keyspace: &str, table: &str, options: TabletOptions) {
        if let Ok(mut o) = self.tablets.options.lock() {
            o.insert((keyspace.to_owned(), table.to_owned()), options);
        }
    }

    /// `ALTER TABLE ... WITH tablets = {...}`: the new hints replace the
    /// old, and the table splits or merges to the count they call for
    /// ([`TabletOptions::settled_count`]; as Scylla's load balancer would,
    /// each step a resize).
    pub(crate) async fn alter_tablet_options(
        &self,
        keyspace: &str,
        table: &str,
        options: TabletOptions,
    ) -> Result<(), (i32, String)> {
        let Some(map) = self.tablets_of(keyspace, table) else {
            self.set_tablet_options(keyspace, table, options);
            return Ok(());
        };
        let mut count = map.tablets().len();
        let target = options.settled_count(count).min(MAX_EMULATED_TABLETS as usize);
        self.set_tablet_options(keyspace, table, options);
        while count != target {
            let resize = if count < target { Resize::Split } else { Resize::Merge };
            let resized = self
                .resize_tablets(keyspace, table, resize)
                .await
                .map_err(|e| (0, format!("resizing the tablets of {keyspace}.{table}: {e}")))?;
            match resized {
                Some(map) if map.tablets().len() != count => count = map.tablets().len(),
                _ => break,
            }
        }
        Ok(())
    }

    /// After a successful `ALTER KEYSPACE ... AND tablets = {...}` (the
    /// flavour already checked): a tablets keyspace records its new
    /// `initial`; a vnodes one (`'enabled': false`) has nothing to record.
    pub(crate) async fn alter_keyspace_tablets(
        &self,
        keyspace: &str,
        choice: Option<i32>,
    ) -> Result<(), (i32, String)> {
        match choice {
            Some(initial) if self.uses_tablets(keyspace) => self.record_tablets(keyspace, initial).await,
            _ => Ok(()),
        }
    }

    /// For DESCRIBE: the tablet hints of `keyspace.table` as Scylla prints
    /// them (`AND tablets = {'<key>': '<value>', ...}`: the non-zero hints,
    /// by key; Scylla's `tablet_options::to_map`). `None` when the table
    /// was given no `tablets` map through the front.
    pub(crate) fn table_tablet_options(&self, keyspace: &str, table: &str) -> Option<BTreeMap<String, String>> {
        let o = self.tablets.options.lock().ok()?;
        o.get(&(keyspace.to_owned(), table.to_owned())).map(TabletOptions::to_map)
    }

    /// For DESCRIBE: whether `keyspace` uses tablets, and its `initial`
    /// option (`Some(0)`: tablets, no `initial` given; `None`: vnodes).
    pub(crate) fn keyspace_tablets(&self, keyspace: &str) -> Option<i32> {
        self.initial_tablets(keyspace)
    }
}
