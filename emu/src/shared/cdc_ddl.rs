//! The CDC DDL reactions of the shared state: after Cassandra applied a
//! schema statement (and before the client sees the answer) the front
//! creates, mirrors or drops the CDC log table, records the options, drops
//! cached schemas and keeps tablets in step; a vector index turns CDC on
//! for its table. Kept apart from the tablets and generations, which it
//! calls into.

use std::time::Duration;

use shardwise_protocol::response::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
use shardwise_protocol::token::Partitioner;

use super::Shared;
use crate::admin::{self, lit};
use crate::cdc::{self, log_table_name, BaseColumn, ColumnKind, META_COLUMNS};
use crate::error::EmuError;
use crate::stats::inc;
use crate::vector_index::IndexDdl;
use crate::{system_tables, CdcOptions};

impl Shared {
    /// The columns of a table that exists: on a cluster, the node the
    /// front's own connection uses may learn of a table just created
    /// through another node a moment later (no column yet), so the columns
    /// are read again until they show, for up to 20 s.
    pub(super) async fn visible_columns(&self, keyspace: &str, table: &str) -> Result<Vec<BaseColumn>, EmuError> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let columns = self.base_columns(keyspace, table).await?;
            if !columns.is_empty() {
                return Ok(columns);
            }
            if std::time::Instant::now() >= deadline {
                return Err(EmuError::Server {
                    code: 0x0000,
                    message: format!("table {keyspace}.{table} did not reach every node within 20 s"),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) async fn base_columns(&self, keyspace: &str, table: &str) -> Result<Vec<BaseColumn>, EmuError> {
        let rows = self
            .admin
            .rows(&format!(
                "SELECT column_name, kind, position, type FROM system_schema.columns WHERE keyspace_name = {} AND table_name = {}",
                lit(keyspace),
                lit(table)
            ))
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                // The hidden value column of a COMPACT STORAGE table with
                // only key columns (type `empty`): not a column to clients,
                // and not one Scylla's log has.
                if admin::text(&r[3]).is_some_and(|t| t == "empty") {
                    return None;
                }
                Some(BaseColumn {
                    name: admin::text(&r[0])?,
                    kind: ColumnKind::parse(&admin::text(&r[1])?)?,
                    position: r[2].as_ref().and_then(|v| v.as_i32()).unwrap_or(-1),
                    typ: admin::text(&r[3])?,
                })
            })
            .collect())
    }

    /// Creates (or re-attaches) the log of `keyspace.table` and records the options.
    pub(super) async fn apply_cdc(
        &self,
        keyspace: &str,
        table: &str,
        options: CdcOptions,
        created: bool,
    ) -> Result<(), EmuError> {
        let log = log_table_name(table);
        let invalid = |message: String| EmuError::Server { code: 0x2200, message };
        if self.partitioner_of(keyspace, table) == Partitioner::Cdc {
            return Err(invalid(format!(
                "Cannot create a CDC log for a table {keyspace}.{table}, because creating nested CDC logs is not allowed"
            )));
        }
        if options.enabled {
            let columns = self.visible_columns(keyspace, table).await?;
            let log_exists = !self.base_columns(keyspace, &log).await?.is_empty();
            if log_exists {
                if self.partitioner_of(keyspace, &log) != Partitioner::Cdc {
                    return Err(invalid(format!(
                        "Cannot create CDC log table for table {keyspace}.{table} because a table of name {keyspace}.{log} already exists"
                    )));
                }
                self.sync_log(keyspace, table).await?;
            } else {
                let ddl = cdc::log_table_ddl(keyspace, table, &columns, &options)
                    .map_err(|m| invalid(format!("Cannot create CDC log for table {keyspace}.{table}. {m}")))?;
                self.admin.query(&ddl).await?;
                inc(&self.counters.cdc_logs_created);
                system_tables::record_table(&self.admin, self.emu(), keyspace, &log, Some(Partitioner::Cdc)).await?;
                if let Ok(mut r) = self.registry.lock() {
                    r.logs.insert((keyspace.to_string(), log.clone()));
                }
            }
        }
        if options.enabled {
            self.start_tablet_streams(keyspace, table).await?;
        }
        system_tables::save_cdc_options(&self.admin, self.emu(), keyspace, table, &options).await?;
        if created {
            system_tables::record_table(&self.admin, self.emu(), keyspace, table, None).await?;
        }
        if let Ok(mut r) = self.registry.lock() {
            r.tables.insert((keyspace.to_string(), table.to_string()), options);
        }
        self.admin.wait_schema_agreement(Duration::from_secs(20)).await
    }

    /// Mirrors the base table's columns into its log (after ALTER TABLE).
    pub(super) async fn sync_log(&self, keyspace: &str, table: &str) -> Result<(), EmuError> {
        let log = log_table_name(table);
        let want = cdc::log_columns(&self.base_columns(keyspace, table).await?)
            .map_err(|m| EmuError::Server { code: 0x2200, message: m })?;
        let have: Vec<String> = self.base_columns(keyspace, &log).await?.into_iter().map(|c| c.name).collect();
        let add: Vec<String> =
            want.iter().filter(|(n, _)| !have.contains(n)).map(|(n, t)| format!("{} {t}", cdc::quote(n))).collect();
        let drop: Vec<String> = have
            .iter()
            .filter(|n| !META_COLUMNS.iter().any(|(m, _)| m == n) && !want.iter().any(|(w, _)| w == *n))
            .map(|n| cdc::quote(n))
            .collect();
        let target = format!("{}.{}", cdc::quote(keyspace), cdc::quote(&log));
        if !add.is_empty() {
            self.admin.query(&format!("ALTER TABLE {target} ADD ({})", add.join(", "))).await?;
        }
        if !drop.is_empty() {
            self.admin.query(&format!("ALTER TABLE {target} DROP ({})", drop.join(", "))).await?;
        }
        Ok(())
    }

    /// Runs after a schema statement succeeded, before the client sees the answer.
    pub(crate) async fn on_schema_change(
        &self,
        change: &SchemaChange,
        cdc: Option<CdcOptions>,
    ) -> Result<(), (i32, String)> {
        self.schema_change(change, cdc).await.map_err(EmuError::code_and_message)
    }

    pub(super) async fn schema_change(&self, change: &SchemaChange, cdc: Option<CdcOptions>) -> Result<(), EmuError> {
        self.apply_schema_change(change, cdc).await?;
        // The schema the log rows are built from, loaded now rather than by
        // the first writes: a write's `cdc$time` is taken when it arrives,
        // and a first write that loaded the schema itself (16 at once after
        // CREATE TABLE, each reading `system_schema`) made its log row
        // visible 100-250 ms later, behind a reader's safety interval, which
        // skipped it (`xtask demo`: the first change of each writer lost).
        if let (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Created | SchemaChangeType::Updated) =
            (&change.target, change.change)
        {
            // A failure here is the first write's to report, as before.
            let _ = self.cdc_schema(keyspace, name).await;
        }
        Ok(())
    }

    async fn apply_schema_change(&self, change: &SchemaChange, cdc: Option<CdcOptions>) -> Result<(), EmuError> {
        match (&change.target, change.change) {
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Dropped) => {
                self.forget_tombstone_gc(keyspace, Some(name));
                self.forget_tombstone_gc(keyspace, Some(&log_table_name(name)));
                self.forget_tablets(keyspace, Some(name)).await?
            }
            (SchemaChangeTarget::Keyspace { keyspace }, SchemaChangeType::Dropped) => {
                self.forget_tombstone_gc(keyspace, None);
                self.forget_tablets(keyspace, None).await?
            }
            _ => {}
        }
        match &change.target {
            SchemaChangeTarget::Table { keyspace, name } => self.forget_cdc_schema(keyspace, name),
            SchemaChangeTarget::Keyspace { keyspace } => {
                if let Ok(mut s) = self.schemas.cdc.lock() {
                    s.retain(|(k, _), _| k != keyspace);
                }
                if let Ok(mut s) = self.schemas.tables.lock() {
                    s.retain(|(k, _), _| k != keyspace);
                }
            }
            // A changed user type changes the tables using it.
            _ => {
                if let Ok(mut s) = self.schemas.cdc.lock() {
                    s.clear();
                }
                if let Ok(mut s) = self.schemas.tables.lock() {
                    s.clear();
                }
            }
        }
        if let (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Created) =
            (&change.target, change.change)
        {
            if let Some(map) = self.tablets_of(keyspace, name) {
                self.publish_tablets(keyspace, name, &map, false).await?;
            }
        }
        // CREATE INDEX and DROP INDEX answer as an update of the base table.
        if let (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Created | SchemaChangeType::Updated) =
            (&change.target, change.change)
        {
            self.sync_index_tablets(keyspace, name).await?;
        }
        match (&change.target, change.change) {
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Created) => match cdc {
                Some(options) => {
                    if let Err(e) = self.apply_cdc(keyspace, name, options, true).await {
                        // Scylla creates both tables or neither.
                        let _ = self
                            .admin
                            .query(&format!("DROP TABLE IF EXISTS {}.{}", cdc::quote(keyspace), cdc::quote(name)))
                            .await;
                        return Err(e);
                    }
                    Ok(())
                }
                None => system_tables::record_table(&self.admin, self.emu(), keyspace, name, None).await,
            },
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Updated) => match cdc {
                Some(options) => {
                    // The user's own options: CDC is no longer the index's doing.
                    if let Ok(mut r) = self.registry.lock() {
                        r.cdc_by_index.remove(&(keyspace.clone(), name.clone()));
                    }
                    self.apply_cdc(keyspace, name, options, false).await
                }
                None => {
                    let enabled =
                        self.registry.lock().ok().and_then(|r| r.options(keyspace, name)).is_some_and(|o| o.enabled);
                    if enabled {
                        self.sync_log(keyspace, name).await?;
                    }
                    Ok(())
                }
            },
            (SchemaChangeTarget::Table { keyspace, name }, SchemaChangeType::Dropped) => {
                let had_cdc = self.registry.lock().ok().and_then(|r| r.options(keyspace, name)).is_some();
                if had_cdc {
                    let log = log_table_name(name);
                    self.admin
                        .query(&format!("DROP TABLE IF EXISTS {}.{}", cdc::quote(keyspace), cdc::quote(&log)))
                        .await?;
                    system_tables::forget_table(&self.admin, self.emu(), keyspace, &log).await?;
                    if let Ok(mut r) = self.registry.lock() {
                        r.tables.remove(&(keyspace.clone(), name.clone()));
                        r.logs.remove(&(keyspace.clone(), log));
                    }
                }
                if let Ok(mut r) = self.registry.lock() {
                    r.vector_indexes.retain(|(k, _), t| !(k == keyspace && t == name));
                    r.cdc_by_index.remove(&(keyspace.clone(), name.clone()));
                }
                system_tables::forget_table(&self.admin, self.emu(), keyspace, name).await
            }
            (SchemaChangeTarget::Keyspace { keyspace }, SchemaChangeType::Dropped) => {
                if let Ok(mut r) = self.registry.lock() {
                    r.tables.retain(|(k, _), _| k != keyspace);
                    r.logs.retain(|(k, _)| k != keyspace);
                    r.vector_indexes.retain(|(k, _), _| k != keyspace);
                    r.cdc_by_index.retain(|(k, _)| k != keyspace);
                }
                system_tables::forget_keyspace(&self.admin, self.emu(), keyspace).await
            }
            _ => Ok(()),
        }
    }

    /// Runs after Cassandra created or dropped an index: a vector index
    /// turns CDC on for its table, and dropping the table's last one turns
    /// it off again if the index turned it on (`crate::vector_index`).
    pub(crate) async fn on_vector_index(&self, change: &SchemaChange, ddl: IndexDdl) -> Result<(), (i32, String)> {
        let SchemaChangeTarget::Table { keyspace, name } = &change.target else { return Ok(()) };
        let (keyspace, table) = (keyspace.clone(), name.clone());
        let key = (keyspace.clone(), table.clone());
        let (options, enable) = {
            let Ok(mut r) = self.registry.lock() else { return Ok(()) };
            let current = r.options(&keyspace, &table);
            match ddl {
                IndexDdl::Create { index, .. } => {
                    r.vector_indexes.insert((keyspace.clone(), index), table.clone());
                    if current.is_some_and(|o| o.enabled) {
                        return Ok(());
                    }
                    r.cdc_by_index.insert(key);
                    (current.unwrap_or_default(), true)
                }
                IndexDdl::Drop { index, .. } => {
                    if r.vector_indexes.remove(&(keyspace.clone(), index)).is_none()
                        || r.has_vector_index(&keyspace, &table)
                        || !r.cdc_by_index.contains(&key)
                    {
                        return Ok(());
                    }
                    match current {
                        Some(o) => (o, false),
                        None => return Ok(()),
                    }
                }
            }
        };
        let options = CdcOptions { enabled: enable, ..options };
        self.apply_cdc(&keyspace, &table, options, false).await.map_err(EmuError::code_and_message)
    }
}
