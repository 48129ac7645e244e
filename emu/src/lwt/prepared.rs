//! PREPARE of Scylla's LWT dialect: the statements Cassandra refuses to
//! prepare (`IF c NOT IN ...`, `SET x = x ± ?` on a non-counter numeric
//! column in a conditional update) are prepared by the front itself.
//!
//! ScyllaDB prepares them (upstream `test/cqlpy/test_lwt.py`,
//! `test_lwt_counter_syntax_prepared`, `test_lwt_counter_syntax_overflow`,
//! `test_lwt_counter_syntax_float_on_integer`), so the front answers the
//! PREPARE with what ScyllaDB would send:
//!
//! - the id ScyllaDB computes, the MD5 of the client's current keyspace
//!   followed by the text (`query_processor::compute_id`), so that it is the
//!   same for the same text and keyspace after a restart of the front (an
//!   EXECUTE of an id the front does not know is answered UNPREPARED, and
//!   drivers prepare again, getting the same id);
//! - one bind-marker spec per marker, named and typed as ScyllaDB's
//!   receivers are (`cql3/expr/prepare_expr.cc`, `cql3/column_condition.cc`):
//!   the column for `c = ?`, `x = x + ?` and `IF c = ?`, `in(c)` of type
//!   `list<type of c>` for `IN ?` / `NOT IN ?`, `[ttl]`, `[timestamp]` and
//!   `[timeout]` for `USING`; a named marker takes its own name;
//! - the partition key's marker indexes (routing), the LWT mark when the
//!   client negotiated `SCYLLA_LWT_ADD_METADATA_MARK`, and the result
//!   metadata of the conditional answer ([`super::Shape`]);
//! - literals of the wrong type refused at PREPARE in ScyllaDB's words
//!   (`Invalid FLOAT constant (3.5) for "r" of type int`); a bound value of
//!   the wrong size is refused at EXECUTE, as ScyllaDB refuses it when it
//!   binds (`Exception while binding column ...`).
//!
//! EXECUTE of such an id then takes the path of every conditional write
//! ([`super::emulate`]): the values are bound by the marker indexes, and the
//! serial read, evaluation and CAS are those of the unprepared form.
//! Prepared batch texts (`PREPARE 'BEGIN BATCH ...'`) are left to Cassandra.

use std::sync::Arc;

use bytes::Bytes;
use shardwise_protocol::response::Prepared;
use shardwise_protocol::rows::PreparedMetadata;
use shardwise_protocol::types::{ColumnSpec, ColumnType};

use super::emulate::{has_arithmetic, has_not_in, value, Refusal, INVALID};
use super::Shape;
use crate::cdclog::dml::{
    Assignment, ColumnCondition, CompareOp, Condition, DeleteTarget, InValues, Literal, Relation, Statement, Term,
    Using,
};
use crate::cdclog::schema::TableSchema;
use crate::cdclog::synth::Item;
use crate::shared::Shared;

/// The LWT bit of the bind-metadata flags (`SCYLLA_LWT_ADD_METADATA_MARK`'s
/// mask as the front announces it).
const LWT_MARK: i32 = i32::MIN;

/// A statement the front prepared: its PREPARED answer and what EXECUTE
/// needs to route it.
#[derive(Debug, Clone)]
pub(crate) struct Owned {
    pub(crate) prepared: Prepared,
    /// The statement's keyspace and table.
    pub(crate) table: (String, String),
}

/// Whether `statement` may be one Cassandra refuses to prepare: a
/// conditional UPDATE or DELETE with `NOT IN` or with `x = x ± v` (whether
/// `x` is a numeric non-counter column, the schema tells).
pub(crate) fn candidate(statement: &Statement) -> bool {
    let arithmetic = |s: &Statement| match s {
        Statement::Update(u) => {
            u.assignments.iter().any(|a| matches!(a, Assignment::Append { .. } | Assignment::Remove { .. }))
        }
        _ => false,
    };
    matches!(statement, Statement::Update(_) | Statement::Delete(_))
        && statement.is_conditional()
        && (has_not_in(statement) || arithmetic(statement))
}

/// ScyllaDB's id of `text` prepared with `keyspace` current: MD5 of the
/// keyspace (nothing when none) followed by the text.
pub(crate) fn statement_id(keyspace: Option<&str>, text: &str) -> Bytes {
    let mut input = keyspace.unwrap_or("").as_bytes().to_vec();
    input.extend_from_slice(text.as_bytes());
    Bytes::copy_from_slice(&super::md5::digest(&input))
}

fn refuse<T>(message: impl Into<String>) -> Result<T, Refusal> {
    Err((INVALID, message.into()))
}

/// Whether a literal holds a bind marker (`[?, 1]`, `now()` has none).
fn literal_has_marker(lit: &Literal) -> bool {
    let term = |t: &Term| match t {
        Term::Bind(_) => true,
        Term::Literal(l) => literal_has_marker(l),
    };
    match lit {
        Literal::List(ts) | Literal::Set(ts) | Literal::Tuple(ts) => ts.iter().any(term),
        Literal::Map(kv) => kv.iter().any(|(k, v)| term(k) || term(v)),
        Literal::Udt(fs) => fs.iter().any(|(_, v)| term(v)),
        Literal::Function { args, .. } => args.iter().any(term),
        _ => false,
    }
}

/// Collects the specs of one statement's markers, checking its literals.
struct Binder<'a> {
    schema: &'a TableSchema,
    /// An item without values: literals only are converted at PREPARE.
    empty: Item,
    specs: Vec<(usize, ColumnSpec)>,
}

impl Binder<'_> {
    fn spec(&self, name: &str, typ: ColumnType) -> ColumnSpec {
        ColumnSpec {
            keyspace: self.schema.keyspace.clone(),
            table: self.schema.table.clone(),
            name: name.to_string(),
            typ,
        }
    }

    fn column(&self, name: &str) -> Result<(String, ColumnType), Refusal> {
        match self.schema.index(name) {
            Some(i) => Ok((self.schema.columns[i].name.clone(), self.schema.columns[i].typ.clone())),
            None => refuse(format!("Unknown identifier {name}")),
        }
    }

    /// A term received by `name` of type `typ`: a marker gets that spec, a
    /// literal must be a value of `typ`.
    fn term(&mut self, term: &Term, name: &str, typ: &ColumnType) -> Result<(), Refusal> {
        match term {
            Term::Bind(m) => {
                let spec = self.spec(m.name.as_deref().unwrap_or(name), typ.clone());
                self.specs.push((m.index, spec));
                Ok(())
            }
            Term::Literal(lit) if literal_has_marker(lit) => refuse(
                "The Scylla emulation front does not prepare bind markers inside literals in this conditional write",
            ),
            Term::Literal(_) => value(&self.empty, term, typ, name).map(|_| ()),
        }
    }

    fn in_values(&mut self, values: &InValues, name: &str, typ: &ColumnType) -> Result<(), Refusal> {
        match values {
            InValues::Marker(t) => self.term(t, &format!("in({name})"), &ColumnType::List(Box::new(typ.clone()))),
            InValues::List(terms) => terms.iter().try_for_each(|t| self.term(t, name, typ)),
        }
    }

    fn using(&mut self, using: &Using) -> Result<(), Refusal> {
        if let Some(t) = &using.ttl {
            self.term(t, "[ttl]", &ColumnType::Int)?;
        }
        if let Some(t) = &using.timestamp {
            self.term(t, "[timestamp]", &ColumnType::BigInt)?;
        }
        if let Some(t) = &using.timeout {
            self.term(t, "[timeout]", &ColumnType::Duration)?;
        }
        Ok(())
    }

    fn relations(&mut self, relations: &[Relation]) -> Result<(), Refusal> {
        for r in relations {
            match r {
                Relation::Compare { column, value, .. } => {
                    let (name, typ) = self.column(column)?;
                    self.term(value, &name, &typ)?;
                }
                Relation::In { column, values } => {
                    let (name, typ) = self.column(column)?;
                    self.in_values(values, &name, &typ)?;
                }
                Relation::MultiCompare { .. } => {
                    return refuse("a conditional write must name exactly one row (only `=` on its key columns)")
                }
            }
        }
        Ok(())
    }

    fn condition(&mut self, condition: &Option<Condition>) -> Result<(), Refusal> {
        let Some(Condition::Columns(conditions)) = condition else { return Ok(()) };
        for c in conditions {
            let target = match c {
                ColumnCondition::Compare { target, .. }
                | ColumnCondition::NotEqual { target, .. }
                | ColumnCondition::In { target, .. }
                | ColumnCondition::NotIn { target, .. }
                | ColumnCondition::Contains { target, .. } => target,
            };
            let DeleteTarget::Column(column) = target else {
                return refuse(
                    "The Scylla emulation front does not evaluate conditions on collection elements or UDT fields",
                );
            };
            let (name, typ) = self.column(column)?;
            if self.schema.index(column).is_some_and(|i| self.schema.is_key(i)) {
                return refuse(format!("PRIMARY KEY column '{name}' cannot have IF conditions"));
            }
            match c {
                ColumnCondition::Compare { value, .. } | ColumnCondition::NotEqual { value, .. } => {
                    self.term(value, &name, &typ)?
                }
                ColumnCondition::In { values, .. } | ColumnCondition::NotIn { values, .. } => {
                    self.in_values(values, &name, &typ)?
                }
                ColumnCondition::Contains { .. } => {
                    return refuse("The Scylla emulation front does not evaluate CONTAINS conditions in this write")
                }
            }
        }
        Ok(())
    }

    fn statement(&mut self, statement: &Statement) -> Result<(), Refusal> {
        match statement {
            Statement::Update(u) => {
                self.using(&u.using)?;
                for a in &u.assignments {
                    let (name, typ) = self.column(a.column())?;
                    match a {
                        Assignment::Remove { value, .. } if matches!(typ, ColumnType::Map(..)) => {
                            let ColumnType::Map(k, _) = &typ else { return refuse("unreachable") };
                            self.term(value, &name, &ColumnType::Set(k.clone()))?;
                        }
                        Assignment::Set { value, .. }
                        | Assignment::Append { value, .. }
                        | Assignment::Prepend { value, .. }
                        | Assignment::Remove { value, .. } => self.term(value, &name, &typ)?,
                        Assignment::SetElement { .. } | Assignment::SetField { .. } => {
                            return refuse(
                                "The Scylla emulation front does not rewrite element, field or map-key operations in \
                                 this conditional write",
                            )
                        }
                    }
                }
                self.relations(&u.relations)?;
                self.condition(&u.condition)
            }
            Statement::Delete(d) => {
                for t in &d.targets {
                    if !matches!(t, DeleteTarget::Column(_)) {
                        return refuse(
                            "The Scylla emulation front does not rewrite element or field deletions in this \
                             conditional write",
                        );
                    }
                }
                self.using(&d.using)?;
                self.relations(&d.relations)?;
                self.condition(&d.condition)
            }
            _ => refuse("The Scylla emulation front prepares only conditional UPDATE and DELETE statements itself"),
        }
    }
}

/// The specs of `statement`'s bind markers in marker order, its literals
/// checked against their columns' types.
fn bind_specs(schema: &TableSchema, statement: &Statement) -> Result<Vec<ColumnSpec>, Refusal> {
    let empty = Item { statement: Arc::new(statement.clone()), keyspace: None, values: Vec::new(), names: None };
    let mut binder = Binder { schema, empty, specs: Vec::new() };
    binder.statement(statement)?;
    let mut specs = binder.specs;
    specs.sort_by_key(|(i, _)| *i);
    if specs.iter().enumerate().any(|(n, (i, _))| n != *i) {
        return refuse("The Scylla emulation front could not place every bind marker of this statement");
    }
    Ok(specs.into_iter().map(|(_, s)| s).collect())
}

/// The marker indexes of the partition key columns, in key order (empty
/// when a key column is not bound by `pk = ?`).
fn pk_indexes(schema: &TableSchema, statement: &Statement) -> Vec<u16> {
    let relations = match statement {
        Statement::Update(u) => &u.relations,
        Statement::Delete(d) => &d.relations,
        _ => return Vec::new(),
    };
    let mut out = Vec::with_capacity(schema.partition_key.len());
    for &k in &schema.partition_key {
        let found = relations.iter().find_map(|r| match r {
            Relation::Compare { column, op: CompareOp::Eq, value: Term::Bind(m) }
                if schema.index(column) == Some(k) =>
            {
                u16::try_from(m.index).ok()
            }
            _ => None,
        });
        match found {
            Some(i) => out.push(i),
            None => return Vec::new(),
        }
    }
    out
}

/// The PREPARED answer for `statement` on `schema`'s table.
pub(crate) fn build(
    schema: &Arc<TableSchema>,
    statement: &Statement,
    id: Bytes,
    lwt_mark: bool,
) -> Result<Owned, Refusal> {
    let specs = bind_specs(schema, statement)?;
    let Some(shape) = Shape::of(schema.clone(), &[statement], false) else {
        return refuse("The Scylla emulation front could not shape this conditional write's answer");
    };
    let metadata = PreparedMetadata {
        flags: if lwt_mark { LWT_MARK } else { 0 },
        pk_indexes: pk_indexes(schema, statement),
        specs,
    };
    let prepared = Prepared { id, result_metadata_id: None, metadata, result_metadata: shape.metadata(false) };
    Ok(Owned { prepared, table: (schema.keyspace.clone(), schema.table.clone()) })
}

impl Shared {
    /// Prepares `statement` in the front when Cassandra would refuse to
    /// (see the module docs); `None` when Cassandra can prepare it (or the
    /// front does not know its table: Cassandra then answers).
    pub(crate) async fn lwt_prepare(
        &self,
        statement: &Statement,
        keyspace: Option<&str>,
        id: Bytes,
        lwt_mark: bool,
    ) -> Option<Result<Owned, Refusal>> {
        if !candidate(statement) {
            return None;
        }
        let table = statement.tables().into_iter().next()?;
        let k = table.keyspace.as_deref().or(keyspace)?;
        let schema = self.table_schema(k, &table.table).await.ok()??;
        if !(has_not_in(statement) || has_arithmetic(&schema, statement)) {
            return None;
        }
        Some(build(&schema, statement, id, lwt_mark))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cdc::{BaseColumn, CdcOptions, ColumnKind};
    use crate::cdclog::dml::parse;

    /// The table of upstream `test_lwt.py`'s `table1`.
    fn schema() -> Arc<TableSchema> {
        let col =
            |name: &str, kind, position, typ: &str| BaseColumn { name: name.into(), kind, position, typ: typ.into() };
        let columns = [
            col("p", ColumnKind::PartitionKey, 0, "int"),
            col("c", ColumnKind::Clustering, 0, "int"),
            col("r", ColumnKind::Regular, -1, "int"),
            col("s", ColumnKind::Static, -1, "int"),
        ];
        Arc::new(TableSchema::new("ks", "t", &columns, &|_, _| None, 0, CdcOptions::default()).unwrap())
    }

    fn owned(text: &str) -> Result<Owned, Refusal> {
        build(&schema(), &parse(text).unwrap(), statement_id(Some("ks"), text), true)
    }

    fn names(specs: &[ColumnSpec]) -> Vec<(String, String)> {
        specs.iter().map(|s| (s.name.clone(), s.typ.to_string())).collect()
    }

    #[test]
    fn increments_bind_a_value_of_the_column_type() {
        let o = owned("UPDATE t SET r = r + ? WHERE p = ? AND c = ? IF EXISTS").unwrap();
        let m = &o.prepared.metadata;
        let want = [("r", "int"), ("p", "int"), ("c", "int")].map(|(a, b)| (a.to_string(), b.to_string()));
        assert_eq!(names(&m.specs), want);
        assert_eq!(m.pk_indexes, [1]);
        assert!(m.is_lwt(0x8000_0000));
        // IF EXISTS: the answer shows every column.
        let result: Vec<String> =
            o.prepared.result_metadata.specs.unwrap().into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(result, ["[applied]", "p", "c", "s", "r"]);
        assert_eq!(o.table, ("ks".to_string(), "t".to_string()));
    }

    #[test]
    fn not_in_a_marker_binds_a_list_named_in() {
        let o = owned("UPDATE t SET r = ? WHERE p = ? AND c = ? IF r NOT IN ?").unwrap();
        let want = [("r", "int"), ("p", "int"), ("c", "int"), ("in(r)", "list<int>")]
            .map(|(a, b)| (a.to_string(), b.to_string()));
        assert_eq!(names(&o.prepared.metadata.specs), want);
        let o = owned("DELETE FROM t USING TIMESTAMP ? WHERE p = ? AND c = 1 IF r NOT IN (?, 5)").unwrap();
        let want = [("[timestamp]", "bigint"), ("p", "int"), ("r", "int")].map(|(a, b)| (a.to_string(), b.to_string()));
        assert_eq!(names(&o.prepared.metadata.specs), want);
        // Conditions on r: the answer shows r.
        let result: Vec<String> = o.prepared.result_metadata.specs.unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(result, ["[applied]", "r"]);
    }

    #[test]
    fn named_markers_keep_their_names() {
        let o = owned("UPDATE t SET r = r - :delta WHERE p = :key AND c = 1 IF r >= :delta2").unwrap();
        let got: Vec<String> = o.prepared.metadata.specs.iter().map(|s| s.name.clone()).collect();
        assert_eq!(got, ["delta", "key", "delta2"]);
        assert_eq!(o.prepared.metadata.pk_indexes, [1]);
    }

    /// Upstream `test_lwt_counter_syntax_float_on_integer`: a float constant
    /// added to an int column is refused at PREPARE, with `of type int`.
    #[test]
    fn wrong_literals_are_refused_at_prepare() {
        let (code, message) = owned("UPDATE t SET r = r + 3.5 WHERE p = ? AND c = ? IF EXISTS").unwrap_err();
        assert_eq!(code, INVALID);
        assert!(message.contains("of type int"), "{message}");
        let (_, message) = owned("UPDATE t SET r = 1 WHERE p = ? AND c = 1 IF r NOT IN ('a')").unwrap_err();
        assert!(message.contains("of type int"), "{message}");
        let (_, message) = owned("UPDATE t SET r = r + 1 WHERE p = 1 AND c = 1 IF p NOT IN (1)").unwrap_err();
        assert!(message.contains("PRIMARY KEY"), "{message}");
    }

    #[test]
    fn candidates_are_conditional_dialect_writes() {
        let yes = ["UPDATE t SET r = r + ? WHERE p = 1 AND c = 1 IF EXISTS", "DELETE FROM t WHERE p = 1 IF s NOT IN ?"];
        for text in yes {
            assert!(candidate(&parse(text).unwrap()), "{text}");
        }
        let no = [
            "UPDATE t SET r = r + ? WHERE p = 1 AND c = 1",
            "UPDATE t SET r = ? WHERE p = 1 AND c = 1 IF r IN ?",
            "INSERT INTO t (p, c, r) VALUES (?, ?, ?) IF NOT EXISTS",
        ];
        for text in no {
            assert!(!candidate(&parse(text).unwrap()), "{text}");
        }
    }

    /// Scylla's id: MD5 of the keyspace then the text; stable, and
    /// different per keyspace.
    #[test]
    fn ids_are_md5_of_keyspace_and_text() {
        let text = "UPDATE t SET r = r + ? WHERE p = ? AND c = ? IF EXISTS";
        let id = statement_id(Some("ks"), text);
        assert_eq!(id, statement_id(Some("ks"), text));
        assert_eq!(&id[..], &crate::lwt::md5::digest(format!("ks{text}").as_bytes())[..]);
        assert_ne!(id, statement_id(None, text));
        assert_eq!(&statement_id(None, "abc")[..], &crate::lwt::md5::digest(b"abc")[..]);
    }
}
