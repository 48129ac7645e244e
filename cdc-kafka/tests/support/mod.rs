//! What the Kafka sink's process tests share: reading the topic back as
//! changes per key, and handling the child processes.

#![allow(dead_code)]

use std::collections::HashMap;
use std::process::Child;
use std::time::Duration;

use shardwise_cdc::Operation;
use shardwise_cdc_kafka::topic::{read_topic, Isolation, TopicMessage};

/// Changes per message key (pk, ck): (operation, v) in order.
pub type Keyed = HashMap<(i32, i32), Vec<(Operation, Option<i64>)>>;

/// The number after `"name":` in `text`.
pub fn number_after(text: &str, name: &str) -> Option<i64> {
    let rest = &text[text.find(name)? + name.len()..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The messages as changes per (pk, ck), in topic order (each key lives in
/// one partition, and messages come partition by partition in offset order).
/// They are keyed as the sink keys them by default: by the partition key
/// alone, so each pk's changes are in one Kafka partition; the clustering
/// key is read from the row.
pub fn changes_of(messages: &[TopicMessage]) -> (Keyed, usize) {
    let mut keyed = Keyed::new();
    let mut partition_of = HashMap::new();
    for m in messages {
        let key = std::str::from_utf8(m.key.as_deref().expect("a key")).expect("utf-8 key");
        let value = std::str::from_utf8(m.value.as_deref().expect("a value")).expect("utf-8 value");
        let pk = number_after(key, "\"pk\":").unwrap_or_else(|| panic!("pk in {key}")) as i32;
        assert!(!key.contains("ck"), "keyed by the partition key alone: {key}");
        let partition = *partition_of.entry(pk).or_insert(m.partition);
        assert_eq!(partition, m.partition, "pk {pk}: every change in one Kafka partition");
        // `before` comes first: a delete's row; `null` otherwise, `after`'s then.
        let row = value.split(r#""before":"#).nth(1).unwrap_or(value);
        let ck = number_after(row, "\"ck\":").unwrap_or_else(|| panic!("ck in {value}")) as i32;
        let (op, v) = if value.contains(r#""op":"c""#) {
            (Operation::Insert, number_after(value, r#""v":{"value":"#))
        } else if value.contains(r#""op":"u""#) {
            (Operation::Update, number_after(value, r#""v":{"value":"#))
        } else {
            assert!(value.contains(r#""op":"d","#) && value.contains(r#""after":null"#), "{value}");
            (Operation::RowDelete, None)
        };
        // The ScyllaDB connector's `source.connector` (docs/debezium-envelope.md).
        assert!(value.contains(r#""connector":"scylla","name":"cluster""#), "{value}");
        keyed.entry((pk, ck)).or_default().push((op, v));
    }
    (keyed, messages.len())
}

/// Every committed message of `topic`, as a `read_committed` consumer
/// sees it now.
pub fn committed(brokers: &str, topic: &str) -> Vec<TopicMessage> {
    read_topic(&brokers.into(), topic, Isolation::ReadCommitted, Duration::from_secs(30))
        .expect("read the topic")
        .unwrap_or_default()
}

/// Child processes, killed when the test ends, whichever way.
pub struct Reap(pub Vec<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
