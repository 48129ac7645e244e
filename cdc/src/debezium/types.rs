//! The base table's column types, for the envelope's values and Connect
//! schemas, read from the driver's schema metadata (`system_schema` type
//! strings such as `frozen<map<text, int>>`).

use std::fmt::Write as _;

use shardwise::protocol::types::{ColumnType, CqlValue};
use shardwise::session::schema::{ColumnKind, KeyspaceMetadata};

use super::NonFrozen;

/// A column's type could not be learnt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypeError {
    /// The schema metadata could not be read.
    #[error("cannot read the schema: {0}")]
    Schema(String),
    /// The keyspace or table is not in the schema.
    #[error("table {0} not found in the schema")]
    NoTable(String),
    /// A type string this module cannot read.
    #[error("column {column}: cannot read type {typ:?}")]
    Type {
        /// The column.
        column: String,
        /// Its type as the server wrote it.
        typ: String,
    },
}

/// One base column's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    /// Its name.
    pub name: String,
    /// Its type as the base table declares it (a non-frozen list is a
    /// `List`, not the log's `map<timeuuid, T>`).
    pub typ: ColumnType,
    /// Part of the primary key.
    pub key: bool,
    /// A non-frozen collection or UDT: its cell says what the change did to
    /// it, as the connector's delta format does.
    pub non_frozen: bool,
}

impl ColumnInfo {
    /// What kind of non-frozen column this is; `None` when frozen or atomic.
    pub fn non_frozen_kind(&self) -> Option<NonFrozen> {
        if !self.non_frozen {
            return None;
        }
        match self.typ {
            ColumnType::List(_) => Some(NonFrozen::List),
            ColumnType::Set(_) => Some(NonFrozen::Set),
            ColumnType::Map(..) => Some(NonFrozen::Map),
            ColumnType::Udt { .. } => Some(NonFrozen::Udt),
            _ => None,
        }
    }
}

/// The column types of one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableTypes {
    columns: Vec<ColumnInfo>,
}

impl TableTypes {
    /// These columns.
    pub fn new(columns: Vec<ColumnInfo>) -> Self {
        TableTypes { columns }
    }

    /// The column `name`.
    pub fn column(&self, name: &str) -> Option<&ColumnInfo> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Every column.
    pub fn columns(&self) -> &[ColumnInfo] {
        &self.columns
    }
}

pub(super) fn from_metadata(keyspace: &str, ks: &KeyspaceMetadata, table: &str) -> Result<TableTypes, TypeError> {
    let t = ks.tables.get(table).ok_or_else(|| TypeError::NoTable(format!("{keyspace}.{table}")))?;
    let mut columns = Vec::with_capacity(t.columns.len());
    for c in &t.columns {
        let bad = || TypeError::Type { column: c.name.clone(), typ: c.typ.clone() };
        let mut p = Parser { s: c.typ.as_bytes(), at: 0, keyspace, ks };
        let (typ, frozen) = p.typ().ok_or_else(bad)?;
        p.space();
        if p.at != p.s.len() {
            return Err(bad());
        }
        let collection =
            matches!(typ, ColumnType::List(_) | ColumnType::Set(_) | ColumnType::Map(..) | ColumnType::Udt { .. });
        let key = matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering);
        columns.push(ColumnInfo { name: c.name.clone(), typ, key, non_frozen: collection && !frozen && !key });
    }
    Ok(TableTypes { columns })
}

/// Reads a `system_schema` type string.
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    keyspace: &'a str,
    ks: &'a KeyspaceMetadata,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.space();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn name(&mut self) -> Option<String> {
        self.space();
        if self.eat(b'"') {
            let mut name = Vec::new();
            loop {
                match *self.s.get(self.at)? {
                    b'"' if self.s.get(self.at + 1) == Some(&b'"') => {
                        name.push(b'"');
                        self.at += 2;
                    }
                    b'"' => {
                        self.at += 1;
                        return String::from_utf8(name).ok();
                    }
                    c => {
                        name.push(c);
                        self.at += 1;
                    }
                }
            }
        }
        let start = self.at;
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.') {
            self.at += 1;
        }
        (self.at > start).then(|| String::from_utf8_lossy(&self.s[start..self.at]).into_owned())
    }

    fn args(&mut self) -> Option<Vec<ColumnType>> {
        if !self.eat(b'<') {
            return None;
        }
        let mut args = Vec::new();
        loop {
            args.push(self.typ()?.0);
            if self.eat(b'>') {
                return Some(args);
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    /// A type and whether it was written `frozen<…>`.
    fn typ(&mut self) -> Option<(ColumnType, bool)> {
        let name = self.name()?;
        let lower = name.to_ascii_lowercase();
        let one = |mut a: Vec<ColumnType>| (a.len() == 1).then(|| a.pop()).flatten();
        let t = match lower.as_str() {
            "frozen" => {
                let inner = one(self.args()?)?;
                return Some((inner, true));
            }
            "list" => ColumnType::List(Box::new(one(self.args()?)?)),
            "set" => ColumnType::Set(Box::new(one(self.args()?)?)),
            "map" => {
                let mut a = self.args()?;
                let v = a.pop()?;
                let k = a.pop()?;
                if !a.is_empty() {
                    return None;
                }
                ColumnType::Map(Box::new(k), Box::new(v))
            }
            "tuple" => ColumnType::Tuple(self.args()?),
            "vector" => {
                // `vector<T, N>`: kept as a list of T.
                self.eat(b'<').then_some(())?;
                let (inner, _) = self.typ()?;
                self.eat(b',').then_some(())?;
                self.name()?;
                self.eat(b'>').then_some(())?;
                ColumnType::List(Box::new(inner))
            }
            "ascii" => ColumnType::Ascii,
            "bigint" => ColumnType::BigInt,
            "blob" => ColumnType::Blob,
            "boolean" => ColumnType::Boolean,
            "counter" => ColumnType::Counter,
            "decimal" => ColumnType::Decimal,
            "double" => ColumnType::Double,
            "float" => ColumnType::Float,
            "int" => ColumnType::Int,
            "timestamp" => ColumnType::Timestamp,
            "uuid" => ColumnType::Uuid,
            "text" | "varchar" => ColumnType::Text,
            "varint" => ColumnType::Varint,
            "timeuuid" => ColumnType::Timeuuid,
            "inet" => ColumnType::Inet,
            "date" => ColumnType::Date,
            "time" => ColumnType::Time,
            "smallint" => ColumnType::SmallInt,
            "tinyint" => ColumnType::TinyInt,
            "duration" => ColumnType::Duration,
            _ => {
                let udt = self.ks.user_types.get(&name)?;
                let mut fields = Vec::with_capacity(udt.fields.len());
                for (field, typ) in &udt.fields {
                    let mut p = Parser { s: typ.as_bytes(), at: 0, keyspace: self.keyspace, ks: self.ks };
                    fields.push((field.clone(), p.typ()?.0));
                }
                ColumnType::Udt { keyspace: self.keyspace.to_owned(), name, fields }
            }
        };
        Some((t, false))
    }
}

/// A column's Connect schema, as the connector's schema builder makes it
/// (optional, so that a cell's value may be null).
pub(super) fn connect_schema(out: &mut String, typ: &ColumnType, non_frozen: bool) {
    let primitive = |out: &mut String, t: &str| {
        let _ = write!(out, "{{\"type\":\"{t}\",\"optional\":true}}");
    };
    let entry = |out: &mut String, k: Option<&ColumnType>, v: &ColumnType| {
        out.push_str("{\"type\":\"struct\",\"fields\":[");
        if let Some(k) = k {
            let mut s = String::new();
            connect_schema(&mut s, k, false);
            super::push_field(out, &s, "key");
            out.push(',');
        }
        let mut s = String::new();
        connect_schema(&mut s, v, false);
        super::push_field(out, &s, "value");
        out.push_str("],\"optional\":true}");
    };
    match typ {
        ColumnType::Ascii
        | ColumnType::Text
        | ColumnType::Uuid
        | ColumnType::Timeuuid
        | ColumnType::Inet
        | ColumnType::Decimal
        | ColumnType::Varint
        | ColumnType::Duration => primitive(out, "string"),
        ColumnType::BigInt | ColumnType::Counter | ColumnType::Time => primitive(out, "int64"),
        ColumnType::Int => primitive(out, "int32"),
        ColumnType::SmallInt => primitive(out, "int16"),
        ColumnType::TinyInt => primitive(out, "int8"),
        ColumnType::Boolean => primitive(out, "boolean"),
        ColumnType::Double => primitive(out, "float64"),
        ColumnType::Float => primitive(out, "float32"),
        ColumnType::Blob | ColumnType::Custom(_) => primitive(out, "bytes"),
        ColumnType::Timestamp => {
            out.push_str(
                "{\"type\":\"int64\",\"optional\":true,\"name\":\"org.apache.kafka.connect.data.Timestamp\",\"version\":1}",
            );
        }
        ColumnType::Date => {
            out.push_str(
                "{\"type\":\"int32\",\"optional\":true,\"name\":\"org.apache.kafka.connect.data.Date\",\"version\":1}",
            );
        }
        ColumnType::List(e) | ColumnType::Set(e) => {
            out.push_str("{\"type\":\"array\",\"items\":");
            match (typ, non_frozen) {
                (ColumnType::List(_), true) => entry(out, None, e),
                _ => connect_schema(out, e, false),
            }
            out.push_str(",\"optional\":true}");
        }
        ColumnType::Map(k, v) => {
            out.push_str("{\"type\":\"array\",\"items\":");
            entry(out, Some(k), v);
            out.push_str(",\"optional\":true}");
        }
        ColumnType::Tuple(items) => {
            out.push_str("{\"type\":\"struct\",\"fields\":[");
            for (i, t) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let mut s = String::new();
                connect_schema(&mut s, t, false);
                super::push_field(out, &s, &format!("tuple_member_{i}"));
            }
            out.push_str("],\"optional\":true}");
        }
        ColumnType::Udt { fields, .. } => {
            out.push_str("{\"type\":\"struct\",\"fields\":[");
            for (i, (name, t)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let mut s = String::new();
                connect_schema(&mut s, t, false);
                super::push_field(out, &s, name);
            }
            out.push_str("],\"optional\":true}");
        }
        _ => primitive(out, "string"),
    }
}

/// The Connect schema of a column without known type, from its value (an
/// optional string when null).
pub(super) fn value_schema(out: &mut String, v: Option<&CqlValue>) {
    let typ = v.and_then(type_of).unwrap_or(ColumnType::Text);
    connect_schema(out, &typ, false);
}

fn type_of(v: &CqlValue) -> Option<ColumnType> {
    let first = |items: &[CqlValue]| items.first().and_then(type_of).unwrap_or(ColumnType::Text);
    Some(match v {
        CqlValue::Ascii(_) => ColumnType::Ascii,
        CqlValue::BigInt(_) => ColumnType::BigInt,
        CqlValue::Blob(_) => ColumnType::Blob,
        CqlValue::Boolean(_) => ColumnType::Boolean,
        CqlValue::Counter(_) => ColumnType::Counter,
        CqlValue::Custom(_) => ColumnType::Blob,
        CqlValue::Date(_) => ColumnType::Date,
        CqlValue::Decimal(_) => ColumnType::Decimal,
        CqlValue::Double(_) => ColumnType::Double,
        CqlValue::Duration(_) => ColumnType::Duration,
        CqlValue::Empty => return None,
        CqlValue::Float(_) => ColumnType::Float,
        CqlValue::Inet(_) => ColumnType::Inet,
        CqlValue::Int(_) => ColumnType::Int,
        CqlValue::List(items) | CqlValue::Vector(items) => ColumnType::List(Box::new(first(items))),
        CqlValue::Set(items) => ColumnType::Set(Box::new(first(items))),
        CqlValue::Map(entries) => {
            let (k, v) = entries.first().map_or((None, None), |(k, v)| (type_of(k), type_of(v)));
            ColumnType::Map(Box::new(k.unwrap_or(ColumnType::Text)), Box::new(v.unwrap_or(ColumnType::Text)))
        }
        CqlValue::SmallInt(_) => ColumnType::SmallInt,
        CqlValue::Text(_) => ColumnType::Text,
        CqlValue::Time(_) => ColumnType::Time,
        CqlValue::Timestamp(_) => ColumnType::Timestamp,
        CqlValue::Timeuuid(_) => ColumnType::Timeuuid,
        CqlValue::TinyInt(_) => ColumnType::TinyInt,
        CqlValue::Tuple(items) => {
            ColumnType::Tuple(items.iter().map(|e| e.as_ref().and_then(type_of).unwrap_or(ColumnType::Text)).collect())
        }
        CqlValue::Udt { keyspace, name, fields } => ColumnType::Udt {
            keyspace: keyspace.clone(),
            name: name.clone(),
            fields: fields
                .iter()
                .map(|(n, e)| (n.clone(), e.as_ref().and_then(type_of).unwrap_or(ColumnType::Text)))
                .collect(),
        },
        CqlValue::Uuid(_) => ColumnType::Uuid,
        CqlValue::Varint(_) => ColumnType::Varint,
        _ => return None,
    })
}
