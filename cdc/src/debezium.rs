//! Debezium envelopes: a change as the ScyllaDB CDC Source Connector (a
//! Debezium connector for Kafka Connect) writes it to Kafka in its default
//! (`legacy`) output format, so that what consumes that connector's topics
//! consumes these too. `docs/debezium-envelope.md` compares the two field by
//! field, with links to the connector's code and documentation.
//!
//! - The **key** is the base table's primary key: `{"ck":1,"pk":1}` (a
//!   partition delete has `null` clustering columns; [`KeyColumns::Only`]
//!   makes keys of the partition key alone, so that every change of a
//!   partition lands in one Kafka partition).
//! - The **value** is `{"source":{…},"before":…,"after":…,"op":"c","ts_ms":…,"transaction":null,"ts_us":…,"ts_ns":…}`:
//!   `source` has `version`, `connector` (`"scylla"`), `name`, `ts_ms` and
//!   `ts_us` (the write's time, from `cdc$time`), `snapshot`, `db`,
//!   `keyspace_name` and `table_name`; `op` is `c` for an insert, `u` for an
//!   update and `d` for a row or partition delete; `ts_ms`, `ts_us` and
//!   `ts_ns` outside `source` say when the envelope was made.
//! - With [`JsonSchemas::With`], key and value are each wrapped as Kafka
//!   Connect's `JsonConverter` writes them with `schemas.enable=true`:
//!   `{"schema":{…},"payload":{…}}`, the schema as the connector builds it.
//!
//! In `before` and `after`, key columns are plain values and every other
//! column is a cell, `{"value":…}`, so that "set to null" (`{"value":null}`)
//! differs from "not written" (`null`), as the connector does. `after` of an
//! insert or update and `before` of a delete come from the row's post-image
//! and pre-image when the table writes them ([`ChangeWithImages`]); without
//! images, from what the delta itself says, as the connector does.
//!
//! Values are written as the connector's converter writes them
//! ([`write_value`]): numbers as JSON numbers (all 64 bits), timestamps as
//! milliseconds, dates as days and times as nanoseconds since midnight,
//! blobs in base64, uuids, inets, varints, decimals and durations as
//! strings; frozen lists and sets as arrays, frozen maps as arrays of
//! `{"key":…,"value":…}`, tuples as objects of `tuple_member_<i>` and UDTs
//! as objects. A non-frozen collection's cell holds what the change did to
//! it (added elements and, for the removed ones, `null` values): see
//! [`ColumnInfo::non_frozen`].
//!
//! Range deletes, TTL expirations and lone images make no envelope
//! ([`Envelopes::envelope`] returns `None`): the connector emits no row
//! event for them.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;

use shardwise::protocol::types::{CqlDecimal, CqlValue};
use shardwise::session::schema::KeyspaceMetadata;

use crate::consumer::{Change, ChangeColumn};
use crate::images::ChangeWithImages;
use crate::printer::json_string;
use crate::row::Operation;

mod types;

pub use types::{ColumnInfo, TableTypes, TypeError};

/// Where the changes come from, for the envelope's `source` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    /// The logical name of the cluster (the connector's `topic.prefix`).
    pub name: &'a str,
    /// The base table's keyspace.
    pub keyspace: &'a str,
    /// The base table.
    pub table: &'a str,
}

impl Source<'_> {
    /// The topic the connector writes this table's changes to:
    /// `name.keyspace.table`.
    pub fn topic(&self) -> String {
        format!("{}.{}.{}", self.name, self.keyspace, self.table)
    }
}

/// One change as a Kafka message: key and value, JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The primary key.
    pub key: String,
    /// The Debezium envelope.
    pub value: String,
}

/// Which of Kafka Connect's two JSON shapes the messages take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonSchemas {
    /// The bare payload, as `JsonConverter` writes it with
    /// `schemas.enable=false`.
    #[default]
    Without,
    /// `{"schema":…,"payload":…}`, as `JsonConverter` writes it with
    /// `schemas.enable=true`.
    With,
}

/// The Debezium `op` of an operation; `None` for what makes no row event.
pub fn op(operation: Operation) -> Option<&'static str> {
    match operation {
        Operation::Insert => Some("c"),
        Operation::Update => Some("u"),
        Operation::RowDelete | Operation::PartitionDelete => Some("d"),
        _ => None,
    }
}

/// Which columns make a message's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyColumns<'a> {
    /// The primary key, as the connector keys its messages: a partition
    /// delete (no clustering key) gets another key, and so may land in
    /// another Kafka partition, than the rows of its partition.
    Primary,
    /// Only these columns (the partition key): every change of a partition
    /// gets one key, so Kafka keeps them in one partition, in order.
    Only(&'a [String]),
}

impl KeyColumns<'_> {
    fn wants(&self, c: &ChangeColumn) -> bool {
        match self {
            KeyColumns::Primary => c.key,
            KeyColumns::Only(names) => c.key && names.iter().any(|n| **n == *c.name),
        }
    }
}

/// Makes the envelopes of one table's changes.
#[derive(Debug, Clone)]
pub struct Envelopes {
    name: String,
    keyspace: String,
    table: String,
    types: Option<Arc<TableTypes>>,
    schemas: JsonSchemas,
}

impl Envelopes {
    /// Envelopes of `source`'s changes, without schemas, the columns' types
    /// read from the values (see [`Envelopes::types`]).
    pub fn new(source: &Source<'_>) -> Self {
        Envelopes {
            name: source.name.to_owned(),
            keyspace: source.keyspace.to_owned(),
            table: source.table.to_owned(),
            types: None,
            schemas: JsonSchemas::Without,
        }
    }

    /// The base table's column types ([`TableTypes::load`]): needed to tell
    /// a non-frozen list from a map in the log, to write a non-frozen
    /// collection as the change it made, and for the Connect schema of a
    /// column that is null. Without them, collections are written as
    /// frozen ones and a null column's schema is an optional string.
    pub fn types(mut self, types: Arc<TableTypes>) -> Self {
        self.types = Some(types);
        self
    }

    /// With or without Connect schemas.
    pub fn schemas(mut self, schemas: JsonSchemas) -> Self {
        self.schemas = schemas;
        self
    }

    /// The source these envelopes name.
    pub fn source(&self) -> Source<'_> {
        Source { name: &self.name, keyspace: &self.keyspace, table: &self.table }
    }

    fn info(&self, name: &str) -> Option<&ColumnInfo> {
        self.types.as_deref().and_then(|t| t.column(name))
    }

    /// The key of `change` (its delta) as a JSON object of `columns`, in
    /// the order of the change's columns; a column the change does not
    /// carry is `null`.
    pub fn key(&self, change: &Change, columns: KeyColumns<'_>) -> String {
        let mut key = String::with_capacity(32);
        if self.schemas == JsonSchemas::With {
            key.push_str("{\"schema\":");
            self.struct_schema(&mut key, change.columns.iter().filter(|c| columns.wants(c)), "Key", false, false);
            key.push_str(",\"payload\":");
        }
        key.push('{');
        let mut first = true;
        for c in change.columns.iter().filter(|c| columns.wants(c)) {
            if !std::mem::take(&mut first) {
                key.push(',');
            }
            json_string(&mut key, &c.name);
            key.push(':');
            match &c.value {
                Some(v) => write_value(&mut key, v),
                None => key.push_str("null"),
            }
        }
        key.push('}');
        if self.schemas == JsonSchemas::With {
            key.push('}');
        }
        key
    }

    /// The envelope of `change`, made at `now_ms` (milliseconds since the
    /// epoch); `None` for an operation that makes no row event (TTL
    /// expiries included: nobody wrote them).
    pub fn envelope(&self, change: &ChangeWithImages, now_ms: i64) -> Option<Envelope> {
        let delta = &change.delta;
        if delta.expiration {
            return None;
        }
        let op = op(delta.operation)?;
        let key = self.key(delta, KeyColumns::Primary);
        let mut v = String::with_capacity(512);
        if self.schemas == JsonSchemas::With {
            v.push_str("{\"schema\":");
            self.envelope_schema(&mut v, delta);
            v.push_str(",\"payload\":");
        }
        let micros = delta.time_micros();
        v.push_str("{\"source\":{\"version\":");
        json_string(&mut v, env!("CARGO_PKG_VERSION"));
        v.push_str(",\"connector\":\"scylla\",\"name\":");
        json_string(&mut v, &self.name);
        let _ = write!(v, ",\"ts_ms\":{},\"ts_us\":{micros},\"snapshot\":\"false\",\"db\":", micros.div_euclid(1000));
        json_string(&mut v, &self.keyspace);
        v.push_str(",\"keyspace_name\":");
        json_string(&mut v, &self.keyspace);
        v.push_str(",\"table_name\":");
        json_string(&mut v, &self.table);
        v.push_str("},\"before\":");
        let deleting = op == "d";
        match (&change.preimage, deleting) {
            (Some(pre), _) => self.row(&mut v, pre, Cells::Known),
            (None, true) => self.row(&mut v, delta, Cells::KeyOnly),
            (None, false) => v.push_str("null"),
        }
        v.push_str(",\"after\":");
        match (&change.postimage, deleting) {
            (_, true) => v.push_str("null"),
            (Some(post), false) => self.row(&mut v, post, Cells::Known),
            (None, false) => self.row(&mut v, delta, Cells::Written),
        }
        v.push_str(",\"op\":");
        json_string(&mut v, op);
        let _ = write!(
            v,
            ",\"ts_ms\":{now_ms},\"transaction\":null,\"ts_us\":{},\"ts_ns\":{}}}",
            now_ms.saturating_mul(1000),
            now_ms.saturating_mul(1_000_000)
        );
        if self.schemas == JsonSchemas::With {
            v.push('}');
        }
        Some(Envelope { key, value: v })
    }

    fn row(&self, out: &mut String, change: &Change, cells: Cells) {
        out.push('{');
        let mut first = true;
        for c in &change.columns {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
            json_string(out, &c.name);
            out.push(':');
            if c.key {
                match &c.value {
                    Some(v) => write_value(out, v),
                    None => out.push_str("null"),
                }
                continue;
            }
            let non_frozen = self.info(&c.name).and_then(ColumnInfo::non_frozen_kind);
            let cell = match cells {
                Cells::Known => c.value.is_some(),
                Cells::Written => c.value.is_some() || c.deleted || !c.deleted_elements.is_empty(),
                Cells::KeyOnly => false,
            };
            if !cell {
                out.push_str("null");
                continue;
            }
            out.push_str("{\"value\":");
            match non_frozen {
                Some(kind) if c.value.is_some() || !c.deleted_elements.is_empty() => {
                    write_delta(out, kind, c.value.as_ref(), &c.deleted_elements);
                }
                _ => match &c.value {
                    Some(v) => write_value(out, v),
                    None => out.push_str("null"),
                },
            }
            out.push('}');
        }
        out.push('}');
    }

    /// The Connect schema of a struct of `columns` (the key, `Before` or
    /// `After`), named `<name>.<keyspace>.<table>.<suffix>`.
    fn struct_schema<'c>(
        &self,
        out: &mut String,
        columns: impl Iterator<Item = &'c ChangeColumn>,
        suffix: &str,
        cells: bool,
        optional: bool,
    ) {
        out.push_str("{\"type\":\"struct\",\"fields\":[");
        let mut first = true;
        for c in columns {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
            let info = self.info(&c.name);
            let field = |out: &mut String| match info {
                Some(i) => types::connect_schema(out, &i.typ, i.non_frozen),
                None => types::value_schema(out, c.value.as_ref()),
            };
            if cells && !c.key {
                out.push_str("{\"type\":\"struct\",\"fields\":[");
                let mut inner = String::new();
                field(&mut inner);
                push_field(out, &inner, "value");
                out.push_str("],\"optional\":true,\"name\":");
                json_string(out, &format!("{}.{}.{}.{}.Cell", self.name, self.keyspace, self.table, c.name));
                out.push_str(",\"field\":");
                json_string(out, &c.name);
                out.push('}');
            } else {
                let mut inner = String::new();
                field(&mut inner);
                push_field(out, &inner, &c.name);
            }
        }
        let _ = write!(out, "],\"optional\":{optional},\"name\":");
        json_string(out, &format!("{}.{}.{}.{suffix}", self.name, self.keyspace, self.table));
        out.push('}');
    }

    fn envelope_schema(&self, out: &mut String, delta: &Change) {
        out.push_str("{\"type\":\"struct\",\"fields\":[");
        out.push_str(SOURCE_SCHEMA);
        out.push(',');
        let mut before = String::new();
        self.struct_schema(&mut before, delta.columns.iter(), "Before", true, true);
        push_field(out, &before, "before");
        out.push(',');
        let mut after = String::new();
        self.struct_schema(&mut after, delta.columns.iter(), "After", true, true);
        push_field(out, &after, "after");
        out.push_str(ENVELOPE_SCHEMA_TAIL);
        json_string(out, &format!("{}.{}.{}.Envelope", self.name, self.keyspace, self.table));
        out.push('}');
    }
}

/// `schema` (an object) as a field named `name` of a struct schema.
fn push_field(out: &mut String, schema: &str, name: &str) {
    // Every schema this module writes is an object: `{…}`.
    out.push_str(schema.strip_suffix('}').unwrap_or(schema));
    out.push_str(",\"field\":");
    json_string(out, name);
    out.push('}');
}

/// The `source` field's schema, as the connector's README shows it.
const SOURCE_SCHEMA: &str = "{\"type\":\"struct\",\"fields\":[\
{\"type\":\"string\",\"optional\":false,\"field\":\"version\"},\
{\"type\":\"string\",\"optional\":false,\"field\":\"connector\"},\
{\"type\":\"string\",\"optional\":false,\"field\":\"name\"},\
{\"type\":\"int64\",\"optional\":false,\"field\":\"ts_ms\"},\
{\"type\":\"int64\",\"optional\":false,\"field\":\"ts_us\"},\
{\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Enum\",\"version\":1,\
\"parameters\":{\"allowed\":\"true,last,false\"},\"default\":\"false\",\"field\":\"snapshot\"},\
{\"type\":\"string\",\"optional\":false,\"field\":\"db\"},\
{\"type\":\"string\",\"optional\":false,\"field\":\"keyspace_name\"},\
{\"type\":\"string\",\"optional\":false,\"field\":\"table_name\"}],\
\"optional\":false,\"name\":\"com.scylladb.cdc.debezium.connector\",\"field\":\"source\"}";

/// The envelope schema's fields after `after`, up to its name.
const ENVELOPE_SCHEMA_TAIL: &str = ",{\"type\":\"string\",\"optional\":true,\"field\":\"op\"},\
{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ms\"},\
{\"type\":\"struct\",\"fields\":[\
{\"type\":\"string\",\"optional\":false,\"field\":\"id\"},\
{\"type\":\"int64\",\"optional\":false,\"field\":\"total_order\"},\
{\"type\":\"int64\",\"optional\":false,\"field\":\"data_collection_order\"}],\
\"optional\":true,\"field\":\"transaction\"},\
{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_us\"},\
{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ns\"}],\
\"optional\":false,\"name\":";

/// Which cells of a row a `before` or `after` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cells {
    /// An image: a column with a value is a cell, one without is `null`.
    Known,
    /// A delta: a column written (a value, its deleted flag: set to null,
    /// or removed elements) is a cell, one not written is `null`.
    Written,
    /// The key alone (a delete without pre-image).
    KeyOnly,
}

/// The key of `change` without schemas, the types read from the values
/// (see [`Envelopes::key`]).
pub fn message_key(change: &Change, columns: KeyColumns<'_>) -> String {
    Envelopes::new(&Source { name: "", keyspace: "", table: "" }).key(change, columns)
}

/// The envelope of `change` without schemas, the types read from the
/// values (see [`Envelopes::envelope`]).
pub fn envelope(change: &ChangeWithImages, source: &Source<'_>, now_ms: i64) -> Option<Envelope> {
    Envelopes::new(source).envelope(change, now_ms)
}

/// What a non-frozen collection or UDT is in the base table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonFrozen {
    /// `list<T>`: the log holds `map<timeuuid, T>`, removals by timeuuid.
    List,
    /// `set<T>`.
    Set,
    /// `map<K, V>`.
    Map,
    /// A UDT: removals by field index.
    Udt,
}

/// A non-frozen column's change: a list as `[{"value":e},…]` (removed
/// elements `{"value":null}`), a set as the elements added and removed, a
/// map as `[{"key":k,"value":v},…]` (removed keys with a `null` value), a
/// UDT as an object of its fields (those not written, or removed, `null`).
fn write_delta(out: &mut String, kind: NonFrozen, value: Option<&CqlValue>, removed: &[CqlValue]) {
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
    };
    match kind {
        NonFrozen::Udt => match value {
            Some(v) => write_value(out, v),
            None => out.push_str("null"),
        },
        NonFrozen::Set => {
            out.push('[');
            let added = match value {
                Some(CqlValue::Set(v) | CqlValue::List(v)) => v.as_slice(),
                _ => &[],
            };
            for e in added.iter().chain(removed) {
                sep(out);
                write_value(out, e);
            }
            out.push(']');
        }
        NonFrozen::List | NonFrozen::Map => {
            out.push('[');
            let entries = match value {
                Some(CqlValue::Map(m)) => m.as_slice(),
                _ => &[],
            };
            for (k, v) in entries {
                sep(out);
                if kind == NonFrozen::Map {
                    out.push_str("{\"key\":");
                    write_value(out, k);
                    out.push_str(",\"value\":");
                } else {
                    out.push_str("{\"value\":");
                }
                write_value(out, v);
                out.push('}');
            }
            for k in removed {
                sep(out);
                if kind == NonFrozen::Map {
                    out.push_str("{\"key\":");
                    write_value(out, k);
                    out.push_str(",\"value\":null}");
                } else {
                    out.push_str("{\"value\":null}");
                }
            }
            out.push(']');
        }
    }
}

/// Writes one value as the connector's converter writes it (see the
/// module's documentation).
pub fn write_value(out: &mut String, v: &CqlValue) {
    match v {
        CqlValue::TinyInt(n) => {
            let _ = write!(out, "{n}");
        }
        CqlValue::SmallInt(n) => {
            let _ = write!(out, "{n}");
        }
        CqlValue::Int(n) => {
            let _ = write!(out, "{n}");
        }
        CqlValue::BigInt(n) | CqlValue::Counter(n) => {
            let _ = write!(out, "{n}");
        }
        CqlValue::Float(f) => float(out, f64::from(*f), f.is_finite(), || format!("{f:?}")),
        CqlValue::Double(f) => float(out, *f, f.is_finite(), || format!("{f:?}")),
        CqlValue::Boolean(b) => {
            let _ = write!(out, "{b}");
        }
        CqlValue::Text(t) | CqlValue::Ascii(t) => json_string(out, t),
        CqlValue::Blob(b) | CqlValue::Custom(b) => {
            out.push('"');
            base64(out, b);
            out.push('"');
        }
        CqlValue::Uuid(u) | CqlValue::Timeuuid(u) => {
            let _ = write!(out, "\"{u}\"");
        }
        CqlValue::Varint(n) => {
            let _ = write!(out, "\"{n}\"");
        }
        CqlValue::Decimal(d) => {
            out.push('"');
            java_decimal(out, d);
            out.push('"');
        }
        CqlValue::Inet(ip) => {
            out.push('"');
            java_inet(out, ip);
            out.push('"');
        }
        CqlValue::Timestamp(t) => {
            let _ = write!(out, "{}", t.0);
        }
        CqlValue::Date(d) => {
            let _ = write!(out, "{}", d.days_since_epoch());
        }
        CqlValue::Time(t) => {
            let _ = write!(out, "{}", t.0);
        }
        CqlValue::Duration(d) => {
            let _ = write!(out, "\"Duration({}, {}, {})\"", d.months, d.days, d.nanoseconds);
        }
        CqlValue::Empty => out.push_str("null"),
        CqlValue::List(items) | CqlValue::Set(items) | CqlValue::Vector(items) => {
            out.push('[');
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, e);
            }
            out.push(']');
        }
        CqlValue::Map(entries) => {
            out.push('[');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("{\"key\":");
                write_value(out, k);
                out.push_str(",\"value\":");
                write_value(out, v);
                out.push('}');
            }
            out.push(']');
        }
        CqlValue::Tuple(items) => {
            out.push('{');
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "\"tuple_member_{i}\":");
                optional(out, e.as_ref());
            }
            out.push('}');
        }
        CqlValue::Udt { fields, .. } => {
            out.push('{');
            for (i, (name, e)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(out, name);
                out.push(':');
                optional(out, e.as_ref());
            }
            out.push('}');
        }
        // A value this library does not know: its CQL literal.
        other => json_string(out, &other.to_string()),
    }
}

fn optional(out: &mut String, v: Option<&CqlValue>) {
    match v {
        Some(v) => write_value(out, v),
        None => out.push_str("null"),
    }
}

/// A finite float as a JSON number; the others as the strings Jackson
/// writes for them (`"NaN"`, `"Infinity"`, `"-Infinity"`).
fn float(out: &mut String, f: f64, finite: bool, shown: impl FnOnce() -> String) {
    if finite {
        out.push_str(&shown());
    } else if f.is_nan() {
        out.push_str("\"NaN\"");
    } else if f > 0.0 {
        out.push_str("\"Infinity\"");
    } else {
        out.push_str("\"-Infinity\"");
    }
}

/// Standard base64 with padding, as `JsonConverter` writes bytes.
fn base64(out: &mut String, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
}

/// A decimal as Java's `BigDecimal.toString()` writes it: plain unless the
/// scale is negative or the adjusted exponent is below -6, then one digit,
/// the others after a point, and `E` with the exponent.
fn java_decimal(out: &mut String, d: &CqlDecimal) {
    let text = d.unscaled.to_string();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    if negative {
        out.push('-');
    }
    let scale = i64::from(d.scale);
    let len = digits.len() as i64;
    let adjusted = len - 1 - scale;
    if scale >= 0 && adjusted >= -6 {
        if scale == 0 {
            out.push_str(digits);
        } else if len > scale {
            let (int, frac) = digits.split_at((len - scale) as usize);
            let _ = write!(out, "{int}.{frac}");
        } else {
            out.push_str("0.");
            for _ in 0..scale - len {
                out.push('0');
            }
            out.push_str(digits);
        }
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        if adjusted != 0 {
            let sign = if adjusted > 0 { "+" } else { "" };
            let _ = write!(out, "E{sign}{adjusted}");
        }
    }
}

/// An address as Java's `InetAddress.getHostAddress()` writes it: IPv4
/// dotted (an IPv4-mapped IPv6 address too), IPv6 as eight groups of hex
/// without leading zeros or `::`.
fn java_inet(out: &mut String, ip: &IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            let _ = write!(out, "{v4}");
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => {
                let _ = write!(out, "{v4}");
            }
            None => {
                for (i, g) in v6.segments().iter().enumerate() {
                    if i > 0 {
                        out.push(':');
                    }
                    let _ = write!(out, "{g:x}");
                }
            }
        },
    }
}

impl TableTypes {
    /// The types of `table`'s columns in a keyspace's metadata (from
    /// [`Session::schema`](shardwise::Session::schema)).
    pub fn from_metadata(keyspace: &str, metadata: &KeyspaceMetadata, table: &str) -> Result<Self, TypeError> {
        types::from_metadata(keyspace, metadata, table)
    }

    /// Reads the types of `keyspace.table`'s columns from the session's
    /// schema metadata.
    pub async fn load(session: &shardwise::Session, keyspace: &str, table: &str) -> Result<Self, TypeError> {
        let schema = session.schema().await.map_err(|e| TypeError::Schema(e.to_string()))?;
        let ks = schema.keyspaces.get(keyspace).ok_or_else(|| TypeError::NoTable(format!("{keyspace}.{table}")))?;
        Self::from_metadata(keyspace, ks, table)
    }
}

#[cfg(test)]
mod tests;
