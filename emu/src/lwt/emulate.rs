//! Scylla's LWT dialect where Cassandra 5.0 refuses it: `IF c NOT IN (...)`,
//! `SET x = x ± v` on non-counter numeric columns, and batches that mix
//! `IF EXISTS`, `IF NOT EXISTS` and column conditions on one row
//! (docs/scylla-behaviour-for-the-front.md §5; upstream
//! <https://github.com/scylladb/scylladb/blob/master/docs/kb/lwt-differences.rst>
//! and `test/cqlpy/test_lwt.py`).
//!
//! Scylla runs such a write as one Paxos round: read the rows, evaluate every
//! condition against them, compute the new values, write. Over Cassandra the
//! front does the same in two steps that stay linearizable:
//!
//! 1. read every addressed row at the write's serial consistency;
//! 2. evaluate the conditions here. When one is false (or nothing is left
//!    to write), the answer is that of the serial read, which is itself a
//!    linearization point;
//! 3. otherwise send the writes (conditions removed, arithmetic computed)
//!    as one Cassandra LWT whose condition says "every addressed row is still
//!    as read" (its non-key columns equal the values read, or `IF NOT
//!    EXISTS` / `IF EXISTS` where existence is what the decision rests on).
//!    If that condition fails, another write came in between: start again.
//!
//! The one state such a condition cannot pin is a row that exists with all
//! its non-key columns null when the decision rests both on its existence
//! and on its values; that corner is refused with an error, as are the
//! forms this module does not rewrite (element and field operations,
//! writes to CDC tables). `IN ?` and `NOT IN ?` bind a list, decoded here;
//! bound values of the wrong size are refused in ScyllaDB's words when they
//! are bound.

use std::sync::Arc;

use bytes::Bytes;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::types::ColumnType;

use super::{Shape, Target};
use crate::cdc::{quote, ColumnKind};
use crate::cdclog::dml::{
    Assignment, BindMarker, ColumnCondition, CompareOp, Condition, DeleteTarget, InValues, Literal, Relation,
    Statement, Term,
};
use crate::cdclog::schema::TableSchema;
use crate::cdclog::synth::{raw_rows, Item, OwnedValue};
use crate::cdclog::values::{compare, term_bytes, ValueError};
use crate::shared::Shared;

/// Invalid request.
pub(super) const INVALID: i32 = 0x2200;
/// Server error.
const SERVER: i32 = 0x0000;
/// How many times a lost race is retried before the front gives up.
const ATTEMPTS: usize = 64;

/// An error answer: code and message.
pub(crate) type Refusal = (i32, String);

fn refuse<T>(message: impl Into<String>) -> Result<T, Refusal> {
    Err((INVALID, message.into()))
}

/// One statement with its item (values).
struct Unit<'a> {
    statement: &'a Statement,
    item: &'a Item,
}

/// A value after binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Val {
    Unset,
    Null,
    Bytes(Bytes),
}

/// A row as read: whether it exists and every column's value (schema
/// index order).
#[derive(Debug, Clone)]
struct Row {
    exists: bool,
    values: Vec<Option<Bytes>>,
}

fn numeric(typ: &ColumnType) -> bool {
    matches!(
        typ,
        ColumnType::TinyInt
            | ColumnType::SmallInt
            | ColumnType::Int
            | ColumnType::BigInt
            | ColumnType::Varint
            | ColumnType::Float
            | ColumnType::Double
            | ColumnType::Decimal
    )
}

fn condition_of(statement: &Statement) -> Option<&Condition> {
    match statement {
        Statement::Update(u) => u.condition.as_ref(),
        Statement::Delete(d) => d.condition.as_ref(),
        _ => None,
    }
}

/// The kind of a statement's condition: 0 none, 1 `IF EXISTS`, 2 `IF NOT
/// EXISTS`, 3 column conditions.
fn kind(statement: &Statement) -> u8 {
    match (statement, condition_of(statement)) {
        (Statement::Insert(i), _) if i.if_not_exists => 2,
        (_, Some(Condition::IfExists)) => 1,
        (_, Some(Condition::IfNotExists)) => 2,
        (_, Some(Condition::Columns(_))) => 3,
        _ => 0,
    }
}

pub(super) fn has_not_in(statement: &Statement) -> bool {
    matches!(condition_of(statement), Some(Condition::Columns(c)) if c.iter().any(|c| matches!(c, ColumnCondition::NotIn { .. })))
}

/// Arithmetic on a non-counter numeric regular or static column.
pub(super) fn has_arithmetic(schema: &TableSchema, statement: &Statement) -> bool {
    let Statement::Update(u) = statement else { return false };
    u.assignments.iter().any(|a| match a {
        Assignment::Append { column, .. } | Assignment::Remove { column, .. } => schema
            .index(column)
            .map(|i| &schema.columns[i])
            .is_some_and(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Static) && numeric(&c.typ)),
        _ => false,
    })
}

fn bound(item: &Item, m: &BindMarker) -> Val {
    let v = match (&item.names, &m.name) {
        (Some(names), Some(name)) => {
            names.iter().position(|n| n.eq_ignore_ascii_case(name)).and_then(|i| item.values.get(i))
        }
        _ => item.values.get(m.index),
    };
    match v {
        Some(OwnedValue::Value(b)) => Val::Bytes(b.clone()),
        Some(OwnedValue::Null) => Val::Null,
        Some(OwnedValue::Unset) | None => Val::Unset,
    }
}

/// Scylla's name for the class of a literal (`Invalid FLOAT constant ...`).
fn literal_class(lit: &Literal) -> &'static str {
    match lit {
        Literal::Integer(_) => "INTEGER",
        Literal::Float(_) => "FLOAT",
        Literal::String(_) => "STRING",
        Literal::Bool(_) => "BOOLEAN",
        Literal::Uuid(_) => "UUID",
        Literal::Blob(_) => "HEX",
        Literal::Duration(_) => "DURATION",
        _ => "",
    }
}

fn literal_text(lit: &Literal) -> String {
    match lit {
        Literal::Integer(s) | Literal::Float(s) | Literal::String(s) | Literal::Uuid(s) | Literal::Duration(s) => {
            s.clone()
        }
        Literal::Bool(b) => b.to_string(),
        Literal::Blob(b) => format!("0x{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        other => format!("{other:?}"),
    }
}

/// A term's value as a value of `typ` for `column`, with Scylla's text for
/// a literal of the wrong kind (`cql3/expr/prepare_expr.cc`).
pub(super) fn value(item: &Item, term: &Term, typ: &ColumnType, column: &str) -> Result<Val, Refusal> {
    match term {
        Term::Bind(m) => {
            let v = bound(item, m);
            if let Val::Bytes(b) = &v {
                validate(typ, column, b)?;
            }
            Ok(v)
        }
        Term::Literal(Literal::Null) => Ok(Val::Null),
        Term::Literal(lit) => {
            let none = |_: &BindMarker| -> Result<Option<Vec<u8>>, ValueError> {
                Err(ValueError::Unsupported("a bind marker inside a literal".into()))
            };
            match term_bytes(term, typ, &none) {
                Ok(Some(b)) => Ok(Val::Bytes(Bytes::from(b))),
                Ok(None) => Ok(Val::Null),
                Err(ValueError::Literal { .. }) if !literal_class(lit).is_empty() => refuse(format!(
                    "Invalid {} constant ({}) for \"{column}\" of type {typ}",
                    literal_class(lit),
                    literal_text(lit)
                )),
                Err(e) => refuse(format!("Invalid value for \"{column}\" of type {typ}: {e}")),
            }
        }
    }
}

/// ScyllaDB's check of a bound value's size, made when it binds the value
/// (`validate_visitor` in `types/types.cc`, wrapped as `Exception while
/// binding column ...` in `cql3/expr/expression.cc`). An empty value is
/// valid for these types.
fn validate(typ: &ColumnType, column: &str, b: &[u8]) -> Result<(), Refusal> {
    let n = b.len();
    let why = match typ {
        _ if n == 0 => return Ok(()),
        ColumnType::TinyInt if n != 1 => format!("Expected 1 byte for a tinyint ({n})"),
        ColumnType::SmallInt if n != 2 => format!("Expected 2 bytes for a smallint ({n})"),
        ColumnType::Int if n != 4 => {
            format!("Validation failed for type org.apache.cassandra.db.marshal.Int32Type: got {n} bytes")
        }
        ColumnType::BigInt if n != 8 => {
            format!("Validation failed for type org.apache.cassandra.db.marshal.LongType: got {n} bytes")
        }
        ColumnType::Float if n != 4 => format!("Expected 4 bytes for a floating type, got {n}"),
        ColumnType::Double if n != 8 => format!("Expected 8 bytes for a floating type, got {n}"),
        ColumnType::Boolean if n != 1 => format!("Validation failed for boolean, got {n} bytes"),
        ColumnType::Uuid if n != 16 => format!("Validation failed for uuid - got {n} bytes"),
        ColumnType::Timestamp if n != 8 => format!("Validation failed for timestamp - got {n} bytes"),
        _ => return Ok(()),
    };
    refuse(format!("Exception while binding column {column}: marshaling error: {why}"))
}

/// The elements of a bound `list<typ>` (`IN ?` / `NOT IN ?`): an `[int]`
/// count, then each element as `[bytes]` (a negative length is null).
fn bound_list(b: &[u8], typ: &ColumnType, column: &str) -> Result<Vec<Option<Bytes>>, Refusal> {
    let name = format!("in({column})");
    let bad = || (INVALID, format!("Exception while binding column {name}: marshaling error: malformed list value"));
    let int = |at: usize| -> Option<i32> { Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?)) };
    let count = int(0).ok_or_else(bad)?;
    let mut at = 4;
    let mut out = Vec::new();
    for _ in 0..count.max(0) {
        let len = int(at).ok_or_else(bad)?;
        at += 4;
        if len < 0 {
            out.push(None);
            continue;
        }
        let end = at.checked_add(len as usize).filter(|&e| e <= b.len()).ok_or_else(bad)?;
        let element = &b[at..end];
        validate(typ, &name, element)?;
        out.push(Some(Bytes::copy_from_slice(element)));
        at = end;
    }
    if at != b.len() {
        return Err(bad());
    }
    Ok(out)
}

/// The row a statement addresses, from its key values.
fn target_of(schema: &TableSchema, unit: &Unit<'_>) -> Result<Target, Refusal> {
    let keys: Vec<usize> = schema.partition_key.iter().chain(&schema.clustering).copied().collect();
    let mut found: Vec<Option<Bytes>> = vec![None; keys.len()];
    let mut set = |column: &str, term: &Term| -> Result<(), Refusal> {
        let Some(pos) = schema.index(column).and_then(|i| keys.iter().position(|&k| k == i)) else {
            return Ok(());
        };
        let c = &schema.columns[keys[pos]];
        match value(unit.item, term, &c.typ, &c.name)? {
            Val::Bytes(b) => found[pos] = Some(b),
            _ => return refuse(format!("Invalid null value for partition key part {}", c.name)),
        }
        Ok(())
    };
    let relations: &[Relation] = match unit.statement {
        Statement::Insert(i) => {
            for (column, term) in i.columns.iter().zip(&i.values) {
                set(column, term)?;
            }
            &[]
        }
        Statement::Update(u) => &u.relations,
        Statement::Delete(d) => &d.relations,
        Statement::Batch(_) => return refuse("nested batches are not supported"),
    };
    for r in relations {
        match r {
            Relation::Compare { column, op: CompareOp::Eq, value } => set(column, value)?,
            _ => return refuse("a conditional write must name exactly one row (only `=` on its key columns)"),
        }
    }
    let npk = schema.partition_key.len();
    let pk: Option<Vec<Bytes>> = found[..npk].iter().cloned().collect();
    let Some(pk) = pk else { return refuse("Some partition key parts are missing") };
    let ck: Vec<Option<Bytes>> = found[npk..].to_vec();
    if ck.iter().all(Option::is_some) {
        return Ok(Target::Row(pk, ck.into_iter().flatten().collect()));
    }
    if ck.iter().all(Option::is_none) {
        return Ok(Target::Static(pk));
    }
    refuse("Some clustering keys are missing")
}

fn same(a: &Target, b: &Target) -> bool {
    match (a, b) {
        (Target::Row(p1, c1), Target::Row(p2, c2)) => p1 == p2 && c1 == c2,
        (Target::Static(p1), Target::Static(p2)) => p1 == p2,
        _ => false,
    }
}

/// Whether the write needs the front (Cassandra would refuse it).
fn needed(schema: &TableSchema, units: &[Unit<'_>], targets: &[Target]) -> bool {
    if units.iter().any(|u| has_not_in(u.statement) || has_arithmetic(schema, u.statement)) {
        return true;
    }
    for (i, a) in units.iter().enumerate() {
        for (j, b) in units.iter().enumerate().skip(i + 1) {
            let (ka, kb) = (kind(a.statement), kind(b.statement));
            if ka != 0 && kb != 0 && ka != kb && same(&targets[i], &targets[j]) {
                return true;
            }
        }
    }
    false
}

/// `a op b` as Scylla's LWT conditions evaluate it: `null` is an ordinary
/// value for `=` and `!=`; an order comparison with `null` is false.
fn holds(typ: &ColumnType, have: Option<&[u8]>, op: Option<CompareOp>, want: Option<&[u8]>) -> bool {
    use std::cmp::Ordering::*;
    let eq = match (have, want) {
        (None, None) => true,
        (Some(a), Some(b)) => compare(typ, a, b) == Equal,
        _ => false,
    };
    match op {
        None => !eq,
        Some(CompareOp::Eq) => eq,
        Some(op) => {
            let (Some(a), Some(b)) = (have, want) else { return false };
            let o = compare(typ, a, b);
            match op {
                CompareOp::Lt => o == Less,
                CompareOp::Le => o != Greater,
                CompareOp::Gt => o == Greater,
                CompareOp::Ge => o != Less,
                CompareOp::Eq => o == Equal,
            }
        }
    }
}

fn to_opt(v: Val) -> Option<Bytes> {
    match v {
        Val::Bytes(b) => Some(b),
        _ => None,
    }
}

/// Evaluates a statement's condition against its row.
fn evaluate(schema: &TableSchema, unit: &Unit<'_>, row: &Row) -> Result<bool, Refusal> {
    if let Statement::Insert(i) = unit.statement {
        return Ok(!i.if_not_exists || !row.exists);
    }
    let conditions = match condition_of(unit.statement) {
        None => return Ok(true),
        Some(Condition::IfExists) => return Ok(row.exists),
        Some(Condition::IfNotExists) => return Ok(!row.exists),
        Some(Condition::Columns(c)) => c,
    };
    for c in conditions {
        let (target, ok) = match c {
            ColumnCondition::Compare { target, .. }
            | ColumnCondition::NotEqual { target, .. }
            | ColumnCondition::In { target, .. }
            | ColumnCondition::NotIn { target, .. } => (target, true),
            ColumnCondition::Contains { target, .. } => (target, false),
        };
        let DeleteTarget::Column(column) = target else {
            return refuse(
                "The Scylla emulation front does not evaluate conditions on collection elements or UDT fields",
            );
        };
        if !ok {
            return refuse("The Scylla emulation front does not evaluate CONTAINS conditions in this write");
        }
        let Some(i) = schema.index(column) else { return refuse(format!("Undefined column name {column}")) };
        let col = &schema.columns[i];
        let have = row.values[i].as_deref();
        // `None`: a null list, which nothing is in or not in.
        let list = |values: &InValues| -> Result<Option<Vec<Option<Bytes>>>, Refusal> {
            match values {
                InValues::List(terms) => terms
                    .iter()
                    .map(|t| value(unit.item, t, &col.typ, &col.name).map(to_opt))
                    .collect::<Result<_, _>>()
                    .map(Some),
                InValues::Marker(Term::Bind(m)) => match bound(unit.item, m) {
                    Val::Bytes(b) => bound_list(&b, &col.typ, &col.name).map(Some),
                    Val::Null => Ok(None),
                    Val::Unset => refuse(format!("Invalid unset value for column {}", col.name)),
                },
                InValues::Marker(Term::Literal(_)) => refuse("IN and NOT IN take a list or a bind marker"),
            }
        };
        let result = match c {
            ColumnCondition::Compare { op, value: v, .. } => {
                let want = to_opt(value(unit.item, v, &col.typ, &col.name)?);
                holds(&col.typ, have, Some(*op), want.as_deref())
            }
            ColumnCondition::NotEqual { value: v, .. } => {
                let want = to_opt(value(unit.item, v, &col.typ, &col.name)?);
                holds(&col.typ, have, None, want.as_deref())
            }
            ColumnCondition::In { values, .. } => list(values)?
                .is_some_and(|l| l.iter().any(|w| holds(&col.typ, have, Some(CompareOp::Eq), w.as_deref()))),
            ColumnCondition::NotIn { values, .. } => list(values)?
                .is_some_and(|l| !l.iter().any(|w| holds(&col.typ, have, Some(CompareOp::Eq), w.as_deref()))),
            ColumnCondition::Contains { .. } => false,
        };
        if !result {
            return Ok(false);
        }
    }
    Ok(true)
}

fn overflow(column: &str, typ: &ColumnType, add: bool) -> Refusal {
    let op = if add { '+' } else { '-' };
    (INVALID, format!("Arithmetic overflow in {column} = {column} {op} <value> on {typ} column {column}"))
}

/// Minimal big-endian two's complement bytes of `v`.
fn varint_bytes(v: i128) -> Vec<u8> {
    let b = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (x, next) = (b[start], b[start + 1]);
        if (x == 0 && next & 0x80 == 0) || (x == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    b[start..].to_vec()
}

fn varint_of(b: &[u8]) -> Option<i128> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let fill = if b[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - b.len()..].copy_from_slice(b);
    Some(i128::from_be_bytes(full))
}

/// `old ± delta` in `typ`, refusing overflow as Scylla does (fixed-width
/// integers never wrap).
fn arithmetic(typ: &ColumnType, column: &str, old: &[u8], delta: &[u8], add: bool) -> Result<Vec<u8>, Refusal> {
    let bad = || (INVALID, format!("Invalid value of type {typ} for column {column}"));
    macro_rules! fixed {
        ($t:ty) => {{
            let a = <$t>::from_be_bytes(old.try_into().map_err(|_| bad())?);
            let b = <$t>::from_be_bytes(delta.try_into().map_err(|_| bad())?);
            let r = if add { a.checked_add(b) } else { a.checked_sub(b) };
            r.map(|r| r.to_be_bytes().to_vec()).ok_or_else(|| overflow(column, typ, add))
        }};
    }
    match typ {
        ColumnType::TinyInt => fixed!(i8),
        ColumnType::SmallInt => fixed!(i16),
        ColumnType::Int => fixed!(i32),
        ColumnType::BigInt => fixed!(i64),
        ColumnType::Float => {
            let a = f32::from_be_bytes(old.try_into().map_err(|_| bad())?);
            let b = f32::from_be_bytes(delta.try_into().map_err(|_| bad())?);
            Ok((if add { a + b } else { a - b }).to_be_bytes().to_vec())
        }
        ColumnType::Double => {
            let a = f64::from_be_bytes(old.try_into().map_err(|_| bad())?);
            let b = f64::from_be_bytes(delta.try_into().map_err(|_| bad())?);
            Ok((if add { a + b } else { a - b }).to_be_bytes().to_vec())
        }
        ColumnType::Varint => {
            let (a, b) = (varint_of(old), varint_of(delta));
            let (Some(a), Some(b)) = (a, b) else { return refuse(wide(column)) };
            let r = if add { a.checked_add(b) } else { a.checked_sub(b) };
            r.map(varint_bytes).ok_or_else(|| (INVALID, wide(column)))
        }
        ColumnType::Decimal => {
            let split = |b: &[u8]| -> Option<(i32, i128)> {
                let scale = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
                Some((scale, varint_of(b.get(4..)?)?))
            };
            let (Some((sa, ua)), Some((sb, ub))) = (split(old), split(delta)) else { return refuse(wide(column)) };
            let scale = sa.max(sb);
            let align = |s: i32, u: i128| -> Option<i128> {
                let diff = u32::try_from(scale.checked_sub(s)?).ok()?;
                u.checked_mul(10i128.checked_pow(diff)?)
            };
            let (Some(a), Some(b)) = (align(sa, ua), align(sb, ub)) else { return refuse(wide(column)) };
            let r = if add { a.checked_add(b) } else { a.checked_sub(b) };
            let Some(r) = r else { return refuse(wide(column)) };
            let mut out = scale.to_be_bytes().to_vec();
            out.extend(varint_bytes(r));
            Ok(out)
        }
        _ => refuse(format!("Invalid operation on non-numeric column {column}")),
    }
}

fn wide(column: &str) -> String {
    format!(
        "The Scylla emulation front computes {column} = {column} ± <value> on varint and decimal values of up to \
         128 bits only"
    )
}

/// A statement of the write the front sends: text and bound values.
struct Out {
    text: String,
    values: Vec<Bytes>,
    target: usize,
    insert: bool,
}

fn push(term: Val, values: &mut Vec<Bytes>) -> String {
    match term {
        Val::Bytes(b) => {
            values.push(b);
            "?".into()
        }
        _ => "null".into(),
    }
}

fn where_clause(schema: &TableSchema, target: &Target, values: &mut Vec<Bytes>) -> String {
    let (keys, vals): (Vec<usize>, Vec<Bytes>) = match target {
        Target::Row(pk, ck) => (
            schema.partition_key.iter().chain(&schema.clustering).copied().collect(),
            pk.iter().chain(ck).cloned().collect(),
        ),
        Target::Static(pk) => (schema.partition_key.clone(), pk.clone()),
    };
    let mut parts = Vec::new();
    for (k, v) in keys.into_iter().zip(vals) {
        values.push(v);
        parts.push(format!("{} = ?", quote(&schema.columns[k].name)));
    }
    parts.join(" AND ")
}

fn ttl_clause(unit: &Unit<'_>, ttl: &Option<Term>, values: &mut Vec<Bytes>) -> Result<String, Refusal> {
    match ttl {
        None => Ok(String::new()),
        Some(t) => match value(unit.item, t, &ColumnType::Int, "[ttl]")? {
            Val::Bytes(b) => {
                values.push(b);
                Ok(" USING TTL ?".into())
            }
            _ => Ok(String::new()),
        },
    }
}

/// The statement the front sends for `unit` (no condition), `None` when it
/// writes nothing.
fn rewrite(
    schema: &TableSchema,
    unit: &Unit<'_>,
    target: &Target,
    row: &Row,
    index: usize,
) -> Result<Option<Out>, Refusal> {
    let table = format!("{}.{}", quote(&schema.keyspace), quote(&schema.table));
    let column = |name: &str| -> Result<usize, Refusal> {
        schema.index(name).ok_or_else(|| (INVALID, format!("Undefined column name {name}")))
    };
    let mut values = Vec::new();
    let text = match unit.statement {
        Statement::Insert(i) => {
            if i.using.timestamp.is_some() {
                return refuse("Cannot provide custom timestamp for conditional updates");
            }
            let (mut names, mut marks) = (Vec::new(), Vec::new());
            for (name, term) in i.columns.iter().zip(&i.values) {
                let c = &schema.columns[column(name)?];
                let v = value(unit.item, term, &c.typ, &c.name)?;
                if v == Val::Unset {
                    continue;
                }
                names.push(quote(&c.name));
                marks.push(push(v, &mut values));
            }
            let ttl = ttl_clause(unit, &i.using.ttl, &mut values)?;
            format!("INSERT INTO {table} ({}) VALUES ({}){ttl}", names.join(", "), marks.join(", "))
        }
        Statement::Update(u) => {
            if u.using.timestamp.is_some() {
                return refuse("Cannot provide custom timestamp for conditional updates");
            }
            let mut head = Vec::new();
            let ttl = ttl_clause(unit, &u.using.ttl, &mut head)?;
            let mut sets = Vec::new();
            for a in &u.assignments {
                let i = column(a.column())?;
                let c = &schema.columns[i];
                let name = quote(&c.name);
                let arith = matches!(a, Assignment::Append { .. } | Assignment::Remove { .. })
                    && matches!(c.kind, ColumnKind::Regular | ColumnKind::Static)
                    && numeric(&c.typ);
                match a {
                    Assignment::Append { value: t, .. } | Assignment::Remove { value: t, .. } if arith => {
                        let add = matches!(a, Assignment::Append { .. });
                        if matches!(t, Term::Literal(Literal::Null)) {
                            return refuse("Invalid null value for counter increment/decrement");
                        }
                        let delta = value(unit.item, t, &c.typ, &c.name)?;
                        // `null ± v` is null: the column is left alone.
                        let (Some(old), Val::Bytes(delta)) = (&row.values[i], delta) else { continue };
                        let new = arithmetic(&c.typ, &c.name, old, &delta, add)?;
                        values.push(Bytes::from(new));
                        sets.push(format!("{name} = ?"));
                    }
                    Assignment::Set { value: t, .. } => {
                        let v = value(unit.item, t, &c.typ, &c.name)?;
                        if v != Val::Unset {
                            let m = push(v, &mut values);
                            sets.push(format!("{name} = {m}"));
                        }
                    }
                    Assignment::Append { value: t, .. } | Assignment::Prepend { value: t, .. } => {
                        if let Val::Bytes(b) = value(unit.item, t, &c.typ, &c.name)? {
                            values.push(b);
                            sets.push(if matches!(a, Assignment::Append { .. }) {
                                format!("{name} = {name} + ?")
                            } else {
                                format!("{name} = ? + {name}")
                            });
                        }
                    }
                    Assignment::Remove { value: t, .. } if !matches!(c.typ, ColumnType::Map(..)) => {
                        if let Val::Bytes(b) = value(unit.item, t, &c.typ, &c.name)? {
                            values.push(b);
                            sets.push(format!("{name} = {name} - ?"));
                        }
                    }
                    _ => {
                        return refuse(
                            "The Scylla emulation front does not rewrite element, field or map-key operations in \
                             this conditional write",
                        )
                    }
                }
            }
            if sets.is_empty() {
                return Ok(None);
            }
            let mut all = head;
            all.extend(values);
            values = all;
            let w = where_clause(schema, target, &mut values);
            format!("UPDATE {table}{ttl} SET {} WHERE {w}", sets.join(", "))
        }
        Statement::Delete(d) => {
            if d.using.timestamp.is_some() {
                return refuse("Cannot provide custom timestamp for conditional updates");
            }
            let mut names = Vec::new();
            for t in &d.targets {
                let DeleteTarget::Column(name) = t else {
                    return refuse(
                        "The Scylla emulation front does not rewrite element or field deletions in this conditional \
                         write",
                    );
                };
                names.push(quote(&schema.columns[column(name)?].name));
            }
            let w = where_clause(schema, target, &mut values);
            let cols = if names.is_empty() { String::new() } else { format!("{} ", names.join(", ")) };
            format!("DELETE {cols}FROM {table} WHERE {w}")
        }
        Statement::Batch(_) => return refuse("nested batches are not supported"),
    };
    Ok(Some(Out { text, values, target: index, insert: matches!(unit.statement, Statement::Insert(_)) }))
}

/// The columns that say whether a row changed: the non-key columns a
/// statement on it can see.
fn guard_columns(schema: &TableSchema, target: &Target) -> Vec<usize> {
    (0..schema.columns.len())
        .filter(|&i| match schema.columns[i].kind {
            ColumnKind::Static => true,
            ColumnKind::Regular => matches!(target, Target::Row(..)),
            _ => false,
        })
        .collect()
}

impl Shared {
    /// Runs a conditional write in Scylla's dialect when Cassandra would
    /// refuse it (see the module docs): `None` when Cassandra can take the
    /// write as it is.
    pub(crate) async fn lwt_emulate(
        &self,
        items: &[Item],
        serial: Consistency,
        cl: Consistency,
        skip: bool,
    ) -> Option<Result<ResultMessage, Refusal>> {
        let (units, batch) = super::units(items);
        let (k, t) = super::table_of(units.first()?)?;
        if units.iter().any(|u| super::table_of(u) != Some((k, t))) {
            return None;
        }
        let schema = self.table_schema(k, t).await.ok()??;
        let units: Vec<Unit<'_>> = units.iter().map(|u| Unit { statement: u.statement, item: u.item }).collect();
        let needs_front =
            units.iter().any(|u| has_not_in(u.statement) || has_arithmetic(&schema, u.statement)) || batch;
        if !needs_front {
            return None;
        }
        let targets: Vec<Target> = match units.iter().map(|u| target_of(&schema, u)).collect::<Result<_, _>>() {
            Ok(t) => t,
            // Cassandra words its own refusal of a malformed write.
            Err(e) if !units.iter().any(|u| has_not_in(u.statement) || has_arithmetic(&schema, u.statement)) => {
                let _ = e;
                return None;
            }
            Err(e) => return Some(Err(e)),
        };
        if !needed(&schema, &units, &targets) {
            return None;
        }
        if schema.options.enabled {
            return Some(refuse(
                "The Scylla emulation front does not run this conditional write (Scylla-only LWT syntax) on a CDC \
                 table",
            ));
        }
        let statements: Vec<&Statement> = units.iter().map(|u| u.statement).collect();
        let Some(shape) = Shape::of(schema.clone(), &statements, batch) else {
            return Some(refuse("The Scylla emulation front could not shape this conditional write's answer"));
        };
        Some(self.lwt_emulate_run(&schema, &shape, &units, &targets, serial, cl, skip).await)
    }

    #[allow(clippy::too_many_arguments)]
    async fn lwt_emulate_run(
        &self,
        schema: &Arc<TableSchema>,
        shape: &Shape,
        units: &[Unit<'_>],
        targets: &[Target],
        serial: Consistency,
        cl: Consistency,
        skip: bool,
    ) -> Result<ResultMessage, Refusal> {
        // Distinct rows, in order of first mention.
        let mut distinct: Vec<&Target> = Vec::new();
        let which: Vec<usize> = targets
            .iter()
            .map(|t| match distinct.iter().position(|d| same(d, t)) {
                Some(i) => i,
                None => {
                    distinct.push(t);
                    distinct.len() - 1
                }
            })
            .collect();
        for _ in 0..ATTEMPTS {
            let mut rows = Vec::with_capacity(distinct.len());
            for t in &distinct {
                rows.push(self.lwt_full_read(schema, t, serial).await?);
            }
            let mut all = true;
            for (u, &w) in units.iter().zip(&which) {
                all &= evaluate(schema, u, &rows[w])?;
            }
            let answer_rows: Vec<Vec<Option<Bytes>>> =
                which.iter().zip(targets).map(|(&w, t)| project(shape, t, &rows[w])).collect();
            let answer = |applied: bool| {
                shape
                    .answer(applied, &answer_rows, skip)
                    .ok_or((SERVER, "the Scylla emulation front could not encode its LWT answer".to_string()))
            };
            if !all {
                return answer(false);
            }
            let mut outs = Vec::new();
            for ((u, &w), t) in units.iter().zip(&which).zip(targets) {
                if let Some(o) = rewrite(schema, u, t, &rows[w], w)? {
                    outs.push(o);
                }
            }
            if outs.is_empty() {
                // Nothing to write: the serial read was the transaction.
                return answer(true);
            }
            self.add_guards(schema, units, &which, &distinct, &rows, &mut outs)?;
            let (text, values) = if outs.len() == 1 {
                let o = outs.remove(0);
                (o.text, o.values)
            } else {
                let mut text = String::from("BEGIN UNLOGGED BATCH ");
                let mut values = Vec::new();
                for o in outs {
                    text.push_str(&o.text);
                    text.push_str("; ");
                    values.extend(o.values);
                }
                text.push_str("APPLY BATCH");
                (text, values)
            };
            let result = self.log_writer.select(&text, &values, cl).await.map_err(|e| (SERVER, e.to_string()))?;
            let applied = raw_rows(result)
                .ok()
                .and_then(|r| r.into_iter().next())
                .and_then(|r| r.into_iter().next())
                .flatten()
                .is_some_and(|b| b[..] == [1]);
            if applied {
                return answer(true);
            }
        }
        Err((SERVER, format!("The Scylla emulation front lost the race for this conditional write {ATTEMPTS} times")))
    }

    /// Adds to `outs` the condition that every row the decision rests on is
    /// still as read.
    fn add_guards(
        &self,
        schema: &TableSchema,
        units: &[Unit<'_>],
        which: &[usize],
        distinct: &[&Target],
        rows: &[Row],
        outs: &mut [Out],
    ) -> Result<(), Refusal> {
        for (w, target) in distinct.iter().enumerate() {
            let row = &rows[w];
            let on_row: Vec<&Unit<'_>> = units.iter().zip(which).filter(|(_, &x)| x == w).map(|(u, _)| u).collect();
            let existence = on_row.iter().any(|u| matches!(kind(u.statement), 1 | 2));
            let by_value = on_row.iter().any(|u| kind(u.statement) == 3 || has_arithmetic(schema, u.statement));
            let columns = guard_columns(schema, target);
            let any_value = columns.iter().any(|&i| row.values[i].is_some());
            let carrier = |insert_ok: bool| outs.iter().position(|o| o.target == w && (insert_ok || !o.insert));
            let cannot = || {
                refuse(
                    "The Scylla emulation front cannot run this conditional write atomically over Cassandra (the \
                     row's existence and values both decide it, and no column holds a value)",
                )
            };
            let (at, guard) = if !row.exists {
                match carrier(true).filter(|&i| outs[i].insert) {
                    Some(i) => (i, " IF NOT EXISTS".to_string()),
                    None if columns.is_empty() => return cannot(),
                    None => match carrier(false) {
                        Some(i) => (i, column_guard(schema, &columns, row, &mut outs[i].values)),
                        None => return cannot(),
                    },
                }
            } else if any_value || (!existence && !columns.is_empty()) {
                match carrier(false) {
                    Some(i) => (i, column_guard(schema, &columns, row, &mut outs[i].values)),
                    None => return cannot(),
                }
            } else if existence && !by_value {
                match carrier(false) {
                    Some(i) => (i, " IF EXISTS".to_string()),
                    None => return cannot(),
                }
            } else {
                return cannot();
            };
            outs[at].text.push_str(&guard);
        }
        Ok(())
    }

    /// Every column of a row (and the partition's static values), read at
    /// `serial`.
    async fn lwt_full_read(&self, schema: &TableSchema, target: &Target, serial: Consistency) -> Result<Row, Refusal> {
        let n = schema.columns.len();
        let names: Vec<String> = schema.columns.iter().map(|c| quote(&c.name)).collect();
        let table = format!("{}.{}", quote(&schema.keyspace), quote(&schema.table));
        let read = |keys: Vec<usize>, values: Vec<Bytes>, limit: &'static str| {
            let conditions: Vec<String> = keys.iter().map(|&i| format!("{} = ?", names[i])).collect();
            let text = format!("SELECT {} FROM {table} WHERE {}{limit}", names.join(", "), conditions.join(" AND "));
            async move {
                let result =
                    self.log_writer.select(&text, &values, serial).await.map_err(|e| (SERVER, e.to_string()))?;
                Ok::<_, Refusal>(raw_rows(result).map_err(|e| (SERVER, e.to_string()))?.into_iter().next().map(
                    |mut r| {
                        r.resize(n, None);
                        r
                    },
                ))
            }
        };
        let has_static = schema.columns.iter().any(|c| c.kind == ColumnKind::Static);
        match target {
            Target::Row(pk, ck) => {
                let keys = schema.partition_key.iter().chain(&schema.clustering).copied().collect();
                let row = read(keys, pk.iter().chain(ck).cloned().collect(), "").await?;
                let exists = row.is_some();
                let mut values = row.unwrap_or_else(|| vec![None; n]);
                if !exists && has_static {
                    // The partition's static values show even when the row
                    // does not exist (Scylla's issue #10081).
                    if let Some(s) = read(schema.partition_key.clone(), pk.clone(), " LIMIT 1").await? {
                        for ((v, c), read) in values.iter_mut().zip(&schema.columns).zip(s) {
                            if c.kind == ColumnKind::Static {
                                *v = read;
                            }
                        }
                    }
                }
                Ok(Row { exists, values })
            }
            Target::Static(pk) => {
                let row = read(schema.partition_key.clone(), pk.clone(), " LIMIT 1").await?;
                let mut values = row.unwrap_or_else(|| vec![None; n]);
                for (v, c) in values.iter_mut().zip(&schema.columns) {
                    if !matches!(c.kind, ColumnKind::Static | ColumnKind::PartitionKey) {
                        *v = None;
                    }
                }
                let exists =
                    values.iter().zip(&schema.columns).any(|(v, c)| c.kind == ColumnKind::Static && v.is_some());
                Ok(Row { exists, values })
            }
        }
    }
}

/// `IF c1 = ? AND c2 = null ...` over `columns`, as `row` holds them.
fn column_guard(schema: &TableSchema, columns: &[usize], row: &Row, values: &mut Vec<Bytes>) -> String {
    let parts: Vec<String> = columns
        .iter()
        .map(|&i| {
            let m = push(row.values[i].clone().map_or(Val::Null, Val::Bytes), values);
            format!("{} = {m}", quote(&schema.columns[i].name))
        })
        .collect();
    format!(" IF {}", parts.join(" AND "))
}

/// A row's values in the answer's column order.
fn project(shape: &Shape, target: &Target, row: &Row) -> Vec<Option<Bytes>> {
    shape
        .columns
        .iter()
        .map(|&i| {
            let c = &shape.schema.columns[i];
            let hidden =
                matches!(target, Target::Static(_)) && !matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Static);
            // A missing row shows no key values.
            let absent = !row.exists && matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering);
            if hidden || absent {
                None
            } else {
                row.values[i].clone()
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_arithmetic_refuses_overflow() {
        let max = i32::MAX.to_be_bytes();
        let one = 1i32.to_be_bytes();
        let e = arithmetic(&ColumnType::Int, "r", &max, &one, true).unwrap_err();
        assert!(e.1.contains("overflow"), "{e:?}");
        let min = i32::MIN.to_be_bytes();
        assert!(arithmetic(&ColumnType::Int, "r", &min, &one, false).is_err());
        // -1 - MIN is MAX: no overflow.
        let r = arithmetic(&ColumnType::Int, "r", &(-1i32).to_be_bytes(), &min, false).unwrap();
        assert_eq!(r, max.to_vec());
        let r = arithmetic(&ColumnType::TinyInt, "r", &[127], &[1], true);
        assert!(r.is_err());
    }

    #[test]
    fn varint_and_decimal_arithmetic() {
        assert_eq!(varint_bytes(255), vec![0, 255]);
        assert_eq!(varint_bytes(-1), vec![255]);
        assert_eq!(varint_bytes(0), vec![0]);
        assert_eq!(arithmetic(&ColumnType::Varint, "v", &[0x7f], &[1], true).unwrap(), vec![0, 0x80]);
        // 1.5 + 2 = 3.5 (scale 1, unscaled 35).
        let a = [0, 0, 0, 1, 15];
        let b = [0, 0, 0, 0, 2];
        assert_eq!(arithmetic(&ColumnType::Decimal, "d", &a, &b, true).unwrap(), vec![0, 0, 0, 1, 35]);
    }

    /// A bound value of the wrong size is refused when bound, in ScyllaDB's
    /// words (`validate_visitor`, `Exception while binding column`).
    #[test]
    fn bound_values_of_the_wrong_size_are_refused() {
        let (code, message) = validate(&ColumnType::Int, "r", &3.5f64.to_be_bytes()).unwrap_err();
        assert_eq!(code, INVALID);
        assert_eq!(
            message,
            "Exception while binding column r: marshaling error: Validation failed for type \
             org.apache.cassandra.db.marshal.Int32Type: got 8 bytes"
        );
        assert!(validate(&ColumnType::Int, "r", &[0, 0, 0, 1]).is_ok());
        assert!(validate(&ColumnType::Int, "r", &[]).is_ok(), "an empty value is valid");
        assert!(validate(&ColumnType::TinyInt, "r", &[0, 1]).unwrap_err().1.contains("tinyint"));
        assert!(validate(&ColumnType::Text, "t", &[1, 2, 3]).is_ok());
    }

    #[test]
    fn bound_lists_decode_and_refuse_malformed_values() {
        let mut b = 2i32.to_be_bytes().to_vec();
        b.extend(4i32.to_be_bytes());
        b.extend(7i32.to_be_bytes());
        b.extend((-1i32).to_be_bytes());
        let got = bound_list(&b, &ColumnType::Int, "r").unwrap();
        assert_eq!(got, vec![Some(Bytes::copy_from_slice(&7i32.to_be_bytes())), None]);
        assert!(bound_list(&b[..10], &ColumnType::Int, "r").is_err(), "truncated");
        let mut extra = b.clone();
        extra.push(0);
        assert!(bound_list(&extra, &ColumnType::Int, "r").is_err(), "trailing bytes");
        let mut wide = 1i32.to_be_bytes().to_vec();
        wide.extend(8i32.to_be_bytes());
        wide.extend(1i64.to_be_bytes());
        let (_, message) = bound_list(&wide, &ColumnType::Int, "r").unwrap_err();
        assert!(message.starts_with("Exception while binding column in(r)"), "{message}");
        assert!(bound_list(&(-5i32).to_be_bytes(), &ColumnType::Int, "r").unwrap().is_empty());
    }

    #[test]
    fn null_is_an_ordinary_value_for_equality() {
        let t = ColumnType::Int;
        let one = 1i32.to_be_bytes();
        assert!(holds(&t, None, Some(CompareOp::Eq), None));
        assert!(holds(&t, Some(&one), None, None));
        assert!(!holds(&t, None, None, None));
        assert!(!holds(&t, None, Some(CompareOp::Ge), Some(&one)));
        assert!(holds(&t, Some(&one), Some(CompareOp::Ge), Some(&one)));
    }
}
