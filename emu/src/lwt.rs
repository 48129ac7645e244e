//! Scylla's answer to a conditional write (LWT).
//!
//! Cassandra answers `[applied]` alone when the write applied, and adds the
//! current values of the tested columns when it did not. Scylla answers the
//! same shape either way (`modification_statement::build_cas_result_set` and
//! its batch counterpart; the expected outputs of `test/cql/lwt_test` and
//! `lwt_batch_test`): `[applied]`, then
//!
//! - for `IF EXISTS` / `IF NOT EXISTS`: every column of the table;
//! - for `IF c = ...`: the columns the conditions test;
//! - in a batch: those of every statement, plus the primary key columns, with
//!   one row per statement,
//!
//! in schema order (partition key, clustering key, static columns, regular
//! columns, each kind by name), holding the row *as it was before the
//! write*, `null` where it did not exist. A statement that names a whole row
//! shows that row (static values included); a statement on the static row
//! alone shows the partition key and the static columns. Scylla's PREPARED
//! carries the same columns as its result metadata.
//!
//! The front reads the old rows before it sends the write, at the serial
//! consistency of the write, so that it sees every earlier conditional write
//! (the read and the write are two Paxos rounds, not one: a write landing
//! between them shows in Cassandra's `[applied]` but not in the row).
//!
//! Submodules: `emulate` (Scylla's LWT dialect run over Cassandra),
//! `prepared` (PREPARE of that dialect, answered by the front) and `md5`
//! (the digest of ScyllaDB's prepared ids).

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::rows::{ResultMetadata, Rows};
use shardwise_protocol::types::{ColumnSpec, ColumnType};

use crate::cdc::{quote, ColumnKind};
use crate::cdclog::dml::{Condition, Statement};
use crate::cdclog::mutation::{self, Binds, Context};
use crate::cdclog::schema::TableSchema;
use crate::cdclog::synth::{raw_rows, Item, OwnedValue};
use crate::shared::Shared;

mod emulate;
mod md5;
pub(crate) mod prepared;

/// The columns of a conditional write's answer.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    schema: Arc<TableSchema>,
    /// Schema indexes, in Scylla's order.
    columns: Vec<usize>,
}

/// The answer's rows: one per statement, values in [`Shape`] order.
pub(crate) type OldRows = Vec<Vec<Option<Bytes>>>;

/// Column indexes in Scylla's schema order.
fn schema_order(schema: &TableSchema) -> Vec<usize> {
    let mut out: Vec<usize> = schema.partition_key.iter().chain(&schema.clustering).copied().collect();
    for kind in [ColumnKind::Static, ColumnKind::Regular] {
        let mut named: Vec<usize> = (0..schema.columns.len()).filter(|&i| schema.columns[i].kind == kind).collect();
        named.sort_by(|&a, &b| schema.columns[a].name.as_bytes().cmp(schema.columns[b].name.as_bytes()));
        out.extend(named);
    }
    out
}

/// The columns a single statement's conditions put in the answer.
fn tested_columns(schema: &TableSchema, statement: &Statement) -> Option<BTreeSet<usize>> {
    let condition = match statement {
        Statement::Insert(i) if i.if_not_exists => return Some((0..schema.columns.len()).collect()),
        Statement::Insert(_) => None,
        Statement::Update(u) => u.condition.as_ref(),
        Statement::Delete(d) => d.condition.as_ref(),
        Statement::Batch(_) => return None,
    };
    match condition {
        None => Some(BTreeSet::new()),
        Some(Condition::IfExists | Condition::IfNotExists) => Some((0..schema.columns.len()).collect()),
        Some(Condition::Columns(conditions)) => {
            let mut set = BTreeSet::new();
            for c in conditions {
                let target = match c {
                    crate::cdclog::dml::ColumnCondition::Compare { target, .. }
                    | crate::cdclog::dml::ColumnCondition::NotEqual { target, .. }
                    | crate::cdclog::dml::ColumnCondition::In { target, .. }
                    | crate::cdclog::dml::ColumnCondition::NotIn { target, .. }
                    | crate::cdclog::dml::ColumnCondition::Contains { target, .. } => target,
                };
                set.insert(schema.index(target.column())?);
            }
            Some(set)
        }
    }
}

impl Shape {
    /// The shape of a single statement (`batch: false`) or of the
    /// statements of a batch, all on `schema`'s table.
    pub(crate) fn of(schema: Arc<TableSchema>, statements: &[&Statement], batch: bool) -> Option<Shape> {
        let mut wanted = BTreeSet::new();
        for s in statements {
            wanted.extend(tested_columns(&schema, s)?);
        }
        if batch {
            wanted.extend(schema.partition_key.iter().chain(&schema.clustering).copied());
        }
        let columns = schema_order(&schema).into_iter().filter(|i| wanted.contains(i)).collect();
        Some(Shape { schema, columns })
    }

    /// The result metadata: `[applied]` and the columns (`None` specs when
    /// the client asked to skip metadata).
    pub(crate) fn metadata(&self, skip: bool) -> ResultMetadata {
        let spec = |name: &str, typ: ColumnType| ColumnSpec {
            keyspace: self.schema.keyspace.clone(),
            table: self.schema.table.clone(),
            name: name.to_string(),
            typ,
        };
        let mut specs = vec![spec("[applied]", ColumnType::Boolean)];
        specs.extend(
            self.columns.iter().map(|&i| spec(&self.schema.columns[i].name, self.schema.columns[i].typ.clone())),
        );
        ResultMetadata { columns_count: specs.len(), specs: (!skip).then_some(specs), ..Default::default() }
    }

    /// The answer: `[applied]` then the old rows.
    pub(crate) fn answer(&self, applied: bool, rows: &OldRows, skip: bool) -> Option<ResultMessage> {
        let flag = [u8::from(applied)];
        let raw: Vec<Vec<Option<&[u8]>>> = rows
            .iter()
            .map(|r| std::iter::once(Some(&flag[..])).chain(r.iter().map(|v| v.as_deref())).collect())
            .collect();
        Rows::from_raw(self.metadata(skip), &raw).ok().map(ResultMessage::Rows)
    }
}

/// Which row a statement's answer shows.
enum Target {
    /// A whole row: partition key and clustering key values.
    Row(Vec<Bytes>, Vec<Bytes>),
    /// The static row of a partition.
    Static(Vec<Bytes>),
}

/// One statement of a conditional write with the values it binds.
struct Unit<'a> {
    statement: &'a Statement,
    keyspace: Option<&'a str>,
    item: &'a Item,
}

fn units(items: &[Item]) -> (Vec<Unit<'_>>, bool) {
    let mut out = Vec::new();
    let batch = items.len() > 1 || items.iter().any(|i| matches!(*i.statement, Statement::Batch(_)));
    for item in items {
        let keyspace = item.keyspace.as_deref();
        match &*item.statement {
            Statement::Batch(b) => out.extend(b.statements.iter().map(|statement| Unit { statement, keyspace, item })),
            statement => out.push(Unit { statement, keyspace, item }),
        }
    }
    (out, batch)
}

fn table_of<'a>(unit: &Unit<'a>) -> Option<(&'a str, &'a str)> {
    let t = unit.statement.tables().into_iter().next()?;
    Some((t.keyspace.as_deref().or(unit.keyspace)?, &t.table))
}

impl Shared {
    /// The shape of the answer to a conditional statement (for PREPARED).
    pub(crate) async fn lwt_shape(&self, statement: &Statement, keyspace: Option<&str>) -> Option<Shape> {
        let item = Item {
            statement: Arc::new(statement.clone()),
            keyspace: keyspace.map(str::to_string),
            values: Vec::new(),
            names: None,
        };
        let items = [item];
        let (units, batch) = units(&items);
        let (k, t) = table_of(units.first()?)?;
        if units.iter().any(|u| table_of(u) != Some((k, t))) {
            return None;
        }
        let schema = self.table_schema(k, t).await.ok()??;
        let statements: Vec<&Statement> = units.iter().map(|u| u.statement).collect();
        Shape::of(schema, &statements, batch)
    }

    /// The shape of an answer holding every column of `keyspace.table`
    /// (`IF NOT EXISTS`'s), for a statement the front has no parse of.
    pub(crate) async fn lwt_shape_of_table(&self, keyspace: &str, table: &str) -> Option<Shape> {
        let schema = self.table_schema(keyspace, table).await.ok()??;
        let columns = schema_order(&schema);
        Some(Shape { schema, columns })
    }

    /// The shape of the answer to a conditional write and the rows as they
    /// are before it, read at `serial`; `None` when the front cannot tell
    /// (the client then gets Cassandra's answer).
    pub(crate) async fn lwt_before(&self, items: &[Item], serial: Consistency) -> Option<(Shape, OldRows)> {
        let (units, batch) = units(items);
        let (k, t) = table_of(units.first()?)?;
        if units.iter().any(|u| table_of(u) != Some((k, t))) {
            return None;
        }
        let schema = self.table_schema(k, t).await.ok()??;
        let statements: Vec<&Statement> = units.iter().map(|u| u.statement).collect();
        let shape = Shape::of(schema.clone(), &statements, batch)?;
        let mut rows = Vec::with_capacity(units.len());
        for unit in &units {
            let target = target(&schema, unit)?;
            rows.push(self.lwt_read(&shape, &target, serial).await?);
        }
        Some((shape, rows))
    }

    async fn lwt_read(&self, shape: &Shape, target: &Target, serial: Consistency) -> Option<Vec<Option<Bytes>>> {
        let schema = &shape.schema;
        let name = |i: usize| quote(&schema.columns[i].name);
        let table = format!("{}.{}", quote(&schema.keyspace), quote(&schema.table));
        let nulls = vec![None; shape.columns.len()];
        if shape.columns.is_empty() {
            return Some(nulls);
        }
        // Key columns come last: Cassandra refuses a clustering restriction
        // when only static columns (and partition key columns) are
        // selected. They are not part of the answer.
        let select: Vec<String> = shape
            .columns
            .iter()
            .chain(schema.partition_key.iter().take(1))
            .chain(schema.clustering.iter().take(1))
            .map(|&i| name(i))
            .collect();
        let (keys, values, limit) = match target {
            Target::Row(pk, ck) => {
                let keys: Vec<usize> = schema.partition_key.iter().chain(&schema.clustering).copied().collect();
                (keys, pk.iter().chain(ck).cloned().collect::<Vec<_>>(), "")
            }
            Target::Static(pk) => (schema.partition_key.clone(), pk.clone(), " LIMIT 1"),
        };
        let conditions: Vec<String> = keys.iter().map(|&i| format!("{} = ?", name(i))).collect();
        let text = format!("SELECT {} FROM {table} WHERE {}{limit}", select.join(", "), conditions.join(" AND "));
        let result = self.log_writer.select(&text, &values, serial).await.ok()?;
        let Some(mut row) = raw_rows(result).ok()?.into_iter().next() else { return Some(nulls) };
        row.truncate(shape.columns.len());
        if let Target::Static(_) = target {
            // The static row alone: no clustering or regular values.
            for (v, &i) in row.iter_mut().zip(&shape.columns) {
                if !matches!(schema.columns[i].kind, ColumnKind::PartitionKey | ColumnKind::Static) {
                    *v = None;
                }
            }
        }
        Some(row)
    }
}

/// The row a statement addresses, from the mutation it makes.
fn target(schema: &Arc<TableSchema>, unit: &Unit<'_>) -> Option<Target> {
    let raw: Vec<RawValue<'_>> = unit
        .item
        .values
        .iter()
        .map(|v| match v {
            OwnedValue::Null => RawValue::Null,
            OwnedValue::Unset => RawValue::Unset,
            OwnedValue::Value(b) => RawValue::Value(&b[..]),
        })
        .collect();
    let names: Option<Vec<&str>> = unit.item.names.as_ref().map(|n| n.iter().map(String::as_str).collect());
    let schema_of = |_: &crate::cdclog::dml::TableName| Some(schema.clone());
    let cx = Context {
        schema_of: &schema_of,
        binds: Binds { values: &raw, names: names.as_deref() },
        timestamp: 0,
        list_node: 0,
    };
    let built = mutation::build(unit.statement, &cx).ok()?;
    let [m] = &built.mutations[..] else { return None };
    match &m.rows[..] {
        [(ck, _)] if ck.len() == schema.clustering.len() => Some(Target::Row(m.key.clone(), ck.clone())),
        [] if schema.clustering.is_empty() => Some(Target::Row(m.key.clone(), Vec::new())),
        [] => Some(Target::Static(m.key.clone())),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cdc::{BaseColumn, CdcOptions};

    fn schema() -> Arc<TableSchema> {
        let col =
            |name: &str, kind, position, typ: &str| BaseColumn { name: name.into(), kind, position, typ: typ.into() };
        let columns = [
            col("v", ColumnKind::Regular, -1, "int"),
            col("c", ColumnKind::Clustering, 0, "int"),
            col("s", ColumnKind::Static, -1, "int"),
            col("p", ColumnKind::PartitionKey, 0, "int"),
            col("a", ColumnKind::Regular, -1, "text"),
        ];
        Arc::new(TableSchema::new("ks", "t", &columns, &|_, _| None, 0, CdcOptions::default()).unwrap())
    }

    fn names(shape: &Shape) -> Vec<String> {
        shape.metadata(false).specs.unwrap().into_iter().map(|s| s.name).collect()
    }

    #[test]
    fn exists_conditions_answer_every_column_in_schema_order() {
        let st = crate::cdclog::dml::parse("INSERT INTO t (p, c, v) VALUES (1, 1, 1) IF NOT EXISTS").unwrap();
        let shape = Shape::of(schema(), &[&st], false).unwrap();
        assert_eq!(names(&shape), ["[applied]", "p", "c", "s", "a", "v"]);
    }

    #[test]
    fn column_conditions_answer_the_tested_columns() {
        let st = crate::cdclog::dml::parse("UPDATE t SET a = 'x' WHERE p = 1 AND c = 1 IF v = 2 AND s = 1").unwrap();
        let shape = Shape::of(schema(), &[&st], false).unwrap();
        assert_eq!(names(&shape), ["[applied]", "s", "v"]);
    }

    #[test]
    fn batches_add_the_primary_key() {
        let st = crate::cdclog::dml::parse("UPDATE t SET a = 'x' WHERE p = 1 AND c = 1 IF v = 2").unwrap();
        let plain = crate::cdclog::dml::parse("UPDATE t SET a = 'y' WHERE p = 1 AND c = 2").unwrap();
        let shape = Shape::of(schema(), &[&st, &plain], true).unwrap();
        assert_eq!(names(&shape), ["[applied]", "p", "c", "v"]);
    }
}
