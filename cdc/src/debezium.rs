//! Debezium envelopes: a change as the ScyllaDB CDC Source Connector (a
//! Debezium connector) writes it to Kafka, so that what consumes that
//! connector's topics consumes these too. JSON without the schema part
//! (`schemas.enable=false`):
//!
//! - the **key**, the base table's primary key: `{"ck":1,"pk":1}` (a
//!   partition delete has `null` clustering columns; [`message_key`] with
//!   [`KeyColumns::Only`] makes keys of the partition key alone, so that
//!   every change of a partition lands in one Kafka partition);
//! - the **value**: `{"source":{…},"before":…,"after":…,"op":"c","ts_ms":…,"transaction":null}`,
//!   where `source` has `version`, `connector`, `name`, `ts_ms` and `ts_us`
//!   (the write's time, from `cdc$time`), `snapshot`, `db`,
//!   `keyspace_name`, `table_name`, and the `stream_id` this change came
//!   from; `op` is `c` for an insert, `u` for an update and `d` for a row
//!   or partition delete; `ts_ms` outside `source` is when the envelope
//!   was made.
//!
//! In `before` and `after`, key columns are plain values and every other
//! column is a cell, `{"value":…}`, so that "set to null" (`{"value":null}`)
//! differs from "not written" (`null`), as the connector does. `after` of an
//! insert or update and `before` of a delete come from the row's
//! post-image and pre-image when the table writes them
//! ([`ChangeWithImages`]); without images, from what the delta itself says,
//! as the connector does (the delta's columns; for a delete, its key).
//! Values are written as the printer's JSON does ([`JSON_VALUES`]):
//! collections as strings holding their CQL literal, where the connector
//! writes arrays.
//!
//! Range deletes, TTL expirations and lone images make no envelope
//! ([`envelope`] returns `None`): the connector emits no row event for them.
//!
//! [`JSON_VALUES`]: crate::printer::JSON_VALUES

use std::fmt::Write as _;

use crate::consumer::Change;
use crate::images::ChangeWithImages;
use crate::printer::{json_string, json_value};
use crate::row::Operation;

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

/// The key of `change` (its delta) as a JSON object of `columns`, in the
/// order of the change's columns; a column the change does not carry is
/// `null`.
pub fn message_key(change: &Change, columns: KeyColumns<'_>) -> String {
    let mut key = String::with_capacity(32);
    key.push('{');
    let mut first = true;
    let wanted = |c: &&crate::consumer::ChangeColumn| match columns {
        KeyColumns::Primary => c.key,
        KeyColumns::Only(names) => c.key && names.iter().any(|n| **n == *c.name),
    };
    for c in change.columns.iter().filter(wanted) {
        if !std::mem::take(&mut first) {
            key.push(',');
        }
        json_string(&mut key, &c.name);
        key.push(':');
        match &c.value {
            Some(v) => json_value(&mut key, v),
            None => key.push_str("null"),
        }
    }
    key.push('}');
    key
}

/// The envelope of `change`, made at `now_ms` (milliseconds since the
/// epoch); `None` for an operation that makes no row event.
pub fn envelope(change: &ChangeWithImages, source: &Source<'_>, now_ms: i64) -> Option<Envelope> {
    let delta = &change.delta;
    let op = op(delta.operation)?;
    let key = message_key(delta, KeyColumns::Primary);

    let micros = delta.time_micros();
    let mut v = String::with_capacity(256);
    v.push_str("{\"source\":{\"version\":");
    json_string(&mut v, env!("CARGO_PKG_VERSION"));
    v.push_str(",\"connector\":\"shardwise\",\"name\":");
    json_string(&mut v, source.name);
    let _ = write!(v, ",\"ts_ms\":{},\"ts_us\":{micros},\"snapshot\":\"false\",\"db\":", micros.div_euclid(1000));
    json_string(&mut v, source.keyspace);
    v.push_str(",\"keyspace_name\":");
    json_string(&mut v, source.keyspace);
    v.push_str(",\"table_name\":");
    json_string(&mut v, source.table);
    let _ = write!(v, ",\"stream_id\":\"{}\"}},\"before\":", delta.stream_id);
    let deleting = op == "d";
    match (&change.preimage, deleting) {
        (Some(pre), _) => row(&mut v, pre, Cells::Known),
        (None, true) => row(&mut v, delta, Cells::KeyOnly),
        (None, false) => v.push_str("null"),
    }
    v.push_str(",\"after\":");
    match (&change.postimage, deleting) {
        (_, true) => v.push_str("null"),
        (Some(post), false) => row(&mut v, post, Cells::Known),
        (None, false) => row(&mut v, delta, Cells::Written),
    }
    v.push_str(",\"op\":");
    json_string(&mut v, op);
    let _ = write!(v, ",\"ts_ms\":{now_ms},\"transaction\":null}}");
    Some(Envelope { key, value: v })
}

/// Which cells of a row a `before` or `after` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cells {
    /// An image: a column with a value is a cell, one without is `null`.
    Known,
    /// A delta: a column written (a value, or its deleted flag: set to
    /// null) is a cell, one not written is `null`.
    Written,
    /// The key alone (a delete without pre-image).
    KeyOnly,
}

fn row(out: &mut String, change: &Change, cells: Cells) {
    out.push('{');
    let mut first = true;
    for c in &change.columns {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
        json_string(out, &c.name);
        out.push(':');
        let cell = match cells {
            _ if c.key => {
                match &c.value {
                    Some(v) => json_value(out, v),
                    None => out.push_str("null"),
                }
                continue;
            }
            Cells::Known => c.value.is_some(),
            Cells::Written => c.value.is_some() || c.deleted,
            Cells::KeyOnly => false,
        };
        if !cell {
            out.push_str("null");
            continue;
        }
        out.push_str("{\"value\":");
        match &c.value {
            Some(v) => json_value(out, v),
            None => out.push_str("null"),
        }
        out.push('}');
    }
    out.push('}');
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use shardwise::protocol::types::CqlValue;

    use super::*;
    use crate::consumer::ChangeColumn;
    use crate::stream::StreamId;

    /// A change of `(pk int, ck int, v text, w int)`: `v` written, `w` set to null when asked.
    fn change(operation: Operation, v: Option<&str>, w_deleted: bool) -> Change {
        let col = |name: &str, key, value, deleted| ChangeColumn {
            name: Arc::from(name),
            key,
            value,
            deleted,
            deleted_elements: Vec::new(),
        };
        Change {
            stream_id: StreamId::from_bytes([0x7f; 16]),
            // 2020-03-23T13:10:40.910883Z.
            time: uuid::Uuid::parse_str("b223c55e-6d07-11ea-7654-24e4fb3f20b9").unwrap(),
            batch_seq_no: 0,
            operation,
            ttl: None,
            end_of_batch: true,
            columns: vec![
                col("ck", true, Some(CqlValue::Int(1)), false),
                col("pk", true, Some(CqlValue::Int(7)), false),
                col("v", false, v.map(|v| CqlValue::Text(v.into())), false),
                col("w", false, None, w_deleted),
            ],
        }
    }

    const SOURCE: Source<'static> = Source { name: "cluster", keyspace: "ks", table: "t" };

    fn value(c: ChangeWithImages) -> String {
        let e = envelope(&c, &SOURCE, 1_700_000_000_000).unwrap();
        assert_eq!(e.key, r#"{"ck":1,"pk":7}"#);
        e.value
    }

    fn alone(delta: Change) -> ChangeWithImages {
        ChangeWithImages { delta, preimage: None, postimage: None }
    }

    #[test]
    fn an_insert_without_images_says_what_the_delta_wrote() {
        let v = value(alone(change(Operation::Insert, Some("a \"b\""), true)));
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            v,
            format!(
                "{{\"source\":{{\"version\":\"{version}\",\"connector\":\"shardwise\",\"name\":\"cluster\",\
                 \"ts_ms\":1584969040910,\"ts_us\":1584969040910883,\"snapshot\":\"false\",\"db\":\"ks\",\
                 \"keyspace_name\":\"ks\",\"table_name\":\"t\",\"stream_id\":\"{}\"}},\"before\":null,\
                 \"after\":{{\"ck\":1,\"pk\":7,\"v\":{{\"value\":\"a \\\"b\\\"\"}},\"w\":{{\"value\":null}}}},\
                 \"op\":\"c\",\"ts_ms\":1700000000000,\"transaction\":null}}",
                StreamId::from_bytes([0x7f; 16])
            )
        );
    }

    #[test]
    fn images_fill_before_and_after() {
        let update = ChangeWithImages {
            delta: change(Operation::Update, Some("new"), false),
            preimage: Some(change(Operation::PreImage, Some("old"), false)),
            postimage: Some(change(Operation::PostImage, Some("new"), false)),
        };
        let v = value(update);
        assert!(v.contains(r#""before":{"ck":1,"pk":7,"v":{"value":"old"},"w":null}"#), "{v}");
        assert!(v.contains(r#""after":{"ck":1,"pk":7,"v":{"value":"new"},"w":null}"#), "{v}");
        assert!(v.contains(r#""op":"u""#));
        // An update without images: `w` not written is null, not a cell.
        let v = value(alone(change(Operation::Update, Some("new"), false)));
        assert!(v.contains(r#""before":null,"after":{"ck":1,"pk":7,"v":{"value":"new"},"w":null}"#), "{v}");
    }

    #[test]
    fn a_delete_has_a_before_and_no_after() {
        let v = value(alone(change(Operation::RowDelete, None, false)));
        assert!(v.contains(r#""before":{"ck":1,"pk":7,"v":null,"w":null},"after":null,"op":"d""#), "{v}");
        let with_image = ChangeWithImages {
            delta: change(Operation::RowDelete, None, false),
            preimage: Some(change(Operation::PreImage, Some("last"), false)),
            postimage: None,
        };
        let v = value(with_image);
        assert!(v.contains(r#""before":{"ck":1,"pk":7,"v":{"value":"last"},"w":null},"after":null"#), "{v}");
    }

    #[test]
    fn a_partition_key_mode_keys_a_partition_delete_as_its_rows() {
        let row = change(Operation::Update, Some("a"), false);
        let mut delete = change(Operation::PartitionDelete, None, false);
        delete.columns[0].value = None;
        let pk = ["pk".to_owned()];
        assert_eq!(message_key(&row, KeyColumns::Primary), r#"{"ck":1,"pk":7}"#);
        assert_eq!(message_key(&delete, KeyColumns::Primary), r#"{"ck":null,"pk":7}"#);
        assert_eq!(message_key(&row, KeyColumns::Only(&pk)), r#"{"pk":7}"#);
        assert_eq!(message_key(&delete, KeyColumns::Only(&pk)), message_key(&row, KeyColumns::Only(&pk)));
        // A value column named in the list is no key column: left out.
        assert_eq!(message_key(&row, KeyColumns::Only(&["v".to_owned()])), "{}");
    }

    #[test]
    fn what_makes_no_row_event_makes_no_envelope() {
        for op in [Operation::RangeDeleteStartInclusive, Operation::ServiceRowDelete, Operation::PostImage] {
            assert!(envelope(&alone(change(op, None, false)), &SOURCE, 0).is_none(), "{op:?}");
        }
        assert_eq!(SOURCE.topic(), "cluster.ks.t");
    }
}
