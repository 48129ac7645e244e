//! How the `printer` application (in `shardwise-cdc-tools`) shows a change:
//! one line per log row, human-readable or as a JSON object (JSON lines).
//! Values are shown as CQL literals, so every type prints without loss; in
//! JSON ([`JSON_VALUES`]) numbers JSON holds exactly are numbers, booleans
//! are booleans, text is a string, and every other value is a string holding
//! its CQL literal. Null columns are left out, deleted flags and deleted
//! elements are listed.

use std::fmt::Write as _;

use shardwise::protocol::types::CqlValue;

use crate::consumer::Change;
use crate::row::Operation;

/// How [`json`] writes values, for usage texts.
pub const JSON_VALUES: &str = "tinyint, smallint, int, and bigint and counter values within ±(2^53 − 1) are JSON \
numbers, as are finite float and double values; booleans are JSON booleans; text and ascii are JSON strings; \
every other value (wider integers, varint, decimal, non-finite floats, uuids, blobs, dates, times, timestamps, \
collections, tuples, UDTs) is a JSON string holding its CQL literal, so no value loses precision.";

/// The largest integer every JSON reader holds exactly (2^53 − 1).
const JSON_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Writes one value as [`JSON_VALUES`] says.
pub(crate) fn json_value(out: &mut String, v: &CqlValue) {
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
        CqlValue::BigInt(n) | CqlValue::Counter(n) if n.unsigned_abs() <= JSON_SAFE_INTEGER.unsigned_abs() => {
            let _ = write!(out, "{n}");
        }
        CqlValue::Float(f) if f.is_finite() => {
            let _ = write!(out, "{f:?}");
        }
        CqlValue::Double(f) if f.is_finite() => {
            let _ = write!(out, "{f:?}");
        }
        CqlValue::Boolean(b) => {
            let _ = write!(out, "{b}");
        }
        CqlValue::Text(t) | CqlValue::Ascii(t) => json_string(out, t),
        other => json_string(out, &other.to_string()),
    }
}

/// A short name of a change's operation: its operation's, or for a TTL
/// expiry `service-row-delete` and `service-partition-delete`.
pub fn change_name(change: &Change) -> &'static str {
    match (change.expiration, change.operation) {
        (true, Operation::RowDelete) => "service-row-delete",
        (true, Operation::PartitionDelete) => "service-partition-delete",
        (_, op) => operation_name(op),
    }
}

/// A short name of an operation.
pub fn operation_name(op: Operation) -> &'static str {
    match op {
        Operation::PreImage => "pre-image",
        Operation::Update => "update",
        Operation::Insert => "insert",
        Operation::RowDelete => "row-delete",
        Operation::PartitionDelete => "partition-delete",
        Operation::RangeDeleteStartInclusive => "range-start-incl",
        Operation::RangeDeleteStartExclusive => "range-start-excl",
        Operation::RangeDeleteEndInclusive => "range-end-incl",
        Operation::RangeDeleteEndExclusive => "range-end-excl",
        Operation::PostImage => "post-image",
    }
}

/// `2026-11-22T04:37:58.123456Z insert [stream 7ffe…] pk=1 ck=2 v='x' deleted(w) ttl=60`
pub fn human(change: &Change) -> String {
    let micros = change.time_micros();
    let secs = micros.div_euclid(1_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let date = shardwise::protocol::types::CqlDate::from_days_since_epoch(days as i32).to_ymd();
    let mut s = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z {} [{}#{}]",
        date.0,
        date.1,
        date.2,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        micros.rem_euclid(1_000_000),
        change_name(change),
        change.stream_id,
        change.batch_seq_no
    );
    for c in &change.columns {
        if let Some(v) = &c.value {
            let _ = write!(s, " {}={}", c.name, v);
        }
        if c.deleted {
            let _ = write!(s, " deleted({})", c.name);
        }
        if !c.deleted_elements.is_empty() {
            let e: Vec<String> = c.deleted_elements.iter().map(ToString::to_string).collect();
            let _ = write!(s, " deleted-elements({})={{{}}}", c.name, e.join(", "));
        }
    }
    if let Some(ttl) = change.ttl {
        let _ = write!(s, " ttl={ttl}");
    }
    s
}

pub(crate) fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One JSON object: `{"time_us":…,"operation":"insert","stream_id":"…",
/// "batch_seq_no":0,"end_of_batch":true,"ttl":null,"columns":{"pk":1},
/// "deleted":["w"],"deleted_elements":{"m":[1]}}` (values as
/// [`JSON_VALUES`] says).
pub fn json(change: &Change) -> String {
    let mut s = String::with_capacity(128);
    let _ = write!(s, "{{\"time_us\":{},\"operation\":", change.time_micros());
    json_string(&mut s, change_name(change));
    let _ = write!(
        s,
        ",\"stream_id\":\"{}\",\"batch_seq_no\":{},\"end_of_batch\":{},\"ttl\":",
        change.stream_id, change.batch_seq_no, change.end_of_batch
    );
    match change.ttl {
        Some(t) => {
            let _ = write!(s, "{t}");
        }
        None => s.push_str("null"),
    }
    s.push_str(",\"columns\":{");
    let mut first = true;
    for c in change.columns.iter().filter(|c| c.value.is_some()) {
        if !first {
            s.push(',');
        }
        first = false;
        json_string(&mut s, &c.name);
        s.push(':');
        match &c.value {
            Some(v) => json_value(&mut s, v),
            None => s.push_str("null"),
        }
    }
    s.push_str("},\"deleted\":[");
    let deleted: Vec<&str> = change.columns.iter().filter(|c| c.deleted).map(|c| &*c.name).collect();
    for (i, name) in deleted.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        json_string(&mut s, name);
    }
    s.push_str("],\"deleted_elements\":{");
    let mut first = true;
    for c in change.columns.iter().filter(|c| !c.deleted_elements.is_empty()) {
        if !first {
            s.push(',');
        }
        first = false;
        json_string(&mut s, &c.name);
        s.push_str(":[");
        for (i, e) in c.deleted_elements.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            json_value(&mut s, e);
        }
        s.push(']');
    }
    s.push_str("}}");
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use shardwise::protocol::types::CqlValue;

    use super::*;
    use crate::consumer::ChangeColumn;
    use crate::stream::StreamId;

    fn change() -> Change {
        let col = |name: &str, value: Option<CqlValue>, deleted: bool| ChangeColumn {
            name: Arc::from(name),
            key: name == "pk",
            value,
            deleted,
            deleted_elements: Vec::new(),
        };
        Change {
            stream_id: StreamId::from_bytes([0x7f; 16]),
            // 2020-03-23T13:10:40.910883Z, the spec's example.
            time: uuid::Uuid::parse_str("b223c55e-6d07-11ea-7654-24e4fb3f20b9").unwrap(),
            batch_seq_no: 0,
            operation: Operation::Insert,
            expiration: false,
            ttl: Some(60),
            end_of_batch: true,
            columns: vec![
                col("pk", Some(CqlValue::Int(1)), false),
                col("v", Some(CqlValue::Text("a \"q\"\n".into())), false),
                col("w", None, true),
            ],
        }
    }

    #[test]
    fn human_line() {
        let line = human(&change());
        assert!(line.starts_with("2020-03-23T13:10:40.910883Z insert ["), "{line}");
        assert!(line.contains(" pk=1 ") && line.contains(" deleted(w)") && line.ends_with(" ttl=60"), "{line}");
    }

    #[test]
    fn json_line() {
        let line = json(&change());
        assert!(line.starts_with("{\"time_us\":1584969040910883,\"operation\":\"insert\""), "{line}");
        assert!(line.contains("\"columns\":{\"pk\":1,\"v\":\"a \\\"q\\\"\\n\"}"), "{line}");
        assert!(line.contains("\"deleted\":[\"w\"]") && line.contains("\"ttl\":60"), "{line}");
    }

    #[test]
    fn json_numbers_where_json_holds_them_exactly() {
        let one = |v: CqlValue| {
            let mut s = String::new();
            json_value(&mut s, &v);
            s
        };
        assert_eq!(one(CqlValue::BigInt(1)), "1");
        assert_eq!(one(CqlValue::BigInt((1 << 53) - 1)), "9007199254740991");
        assert_eq!(one(CqlValue::BigInt(-(1 << 53) + 1)), "-9007199254740991");
        assert_eq!(one(CqlValue::BigInt(1 << 53)), "\"9007199254740992\"", "past 2^53 - 1: a string");
        assert_eq!(one(CqlValue::Counter(i64::MIN)), "\"-9223372036854775808\"");
        assert_eq!(one(CqlValue::TinyInt(-8)), "-8");
        assert_eq!(one(CqlValue::Double(0.5)), "0.5");
        assert_eq!(one(CqlValue::Double(1.0)), "1.0");
        assert_eq!(one(CqlValue::Float(f32::NAN)), "\"NaN\"");
        assert_eq!(one(CqlValue::Boolean(true)), "true");
        assert_eq!(one(CqlValue::Text("a\"b".into())), "\"a\\\"b\"");
        assert_eq!(one(CqlValue::List(vec![CqlValue::Int(1)])), "\"[1]\"", "other values: their CQL literal");
    }
}
