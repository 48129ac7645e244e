//! Envelopes compared with what the ScyllaDB CDC Source Connector writes,
//! as its README and code describe it (`docs/debezium-envelope.md`): the
//! expected JSON below is written from that description, not recorded from
//! this module.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use serde_json::{json, Value};
use shardwise::protocol::types::{CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint};
use shardwise::session::schema::{
    ClusteringOrder, ColumnKind, ColumnMetadata, KeyspaceMetadata, TableMetadata, UserType,
};

use super::*;
use crate::consumer::ChangeColumn;
use crate::stream::StreamId;

const SOURCE: Source<'static> = Source { name: "cluster", keyspace: "ks", table: "t" };
/// 2020-03-23T13:10:40.910883Z, the time of the change below.
const TIME: &str = "b223c55e-6d07-11ea-7654-24e4fb3f20b9";
const NOW_MS: i64 = 1_700_000_000_000;

fn col(name: &str, key: bool, value: Option<CqlValue>, deleted: bool, removed: Vec<CqlValue>) -> ChangeColumn {
    ChangeColumn { name: Arc::from(name), key, value, deleted, deleted_elements: removed }
}

fn change(operation: Operation, columns: Vec<ChangeColumn>) -> Change {
    Change {
        stream_id: StreamId::from_bytes([0x7f; 16]),
        time: uuid::Uuid::parse_str(TIME).unwrap(),
        batch_seq_no: 0,
        operation,
        expiration: false,
        ttl: None,
        end_of_batch: true,
        columns,
    }
}

fn alone(delta: Change) -> ChangeWithImages {
    ChangeWithImages { delta, preimage: None, postimage: None }
}

fn parse(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// The table of every type: `(pk int, ck text, …)` in `ks`, with UDT
/// `addr (street text, no int)`.
fn table_types() -> TableTypes {
    let column = |name: &str, kind, typ: &str| ColumnMetadata {
        name: name.into(),
        kind,
        typ: typ.into(),
        position: -1,
        clustering_order: ClusteringOrder::None,
    };
    let regular = [
        ("a_ascii", "ascii"),
        ("a_bigint", "bigint"),
        ("a_blob", "blob"),
        ("a_boolean", "boolean"),
        ("a_date", "date"),
        ("a_decimal", "decimal"),
        ("a_decimal_e", "decimal"),
        ("a_double", "double"),
        ("a_duration", "duration"),
        ("a_float", "float"),
        ("a_inet4", "inet"),
        ("a_inet6", "inet"),
        ("a_int", "int"),
        ("a_smallint", "smallint"),
        ("a_text", "text"),
        ("a_time", "time"),
        ("a_timestamp", "timestamp"),
        ("a_timeuuid", "timeuuid"),
        ("a_tinyint", "tinyint"),
        ("a_uuid", "uuid"),
        ("a_varint", "varint"),
        ("f_list", "frozen<list<int>>"),
        ("f_map", "frozen<map<int, text>>"),
        ("f_set", "frozen<set<text>>"),
        ("f_tuple", "frozen<tuple<int, text>>"),
        ("f_udt", "frozen<addr>"),
        ("n_list", "list<text>"),
        ("n_map", "map<text, int>"),
        ("n_set", "set<int>"),
        ("n_udt", "addr"),
    ];
    let mut columns = vec![column("pk", ColumnKind::PartitionKey, "int"), column("ck", ColumnKind::Clustering, "text")];
    columns.extend(regular.iter().map(|(n, t)| column(n, ColumnKind::Regular, t)));
    let table = TableMetadata {
        columns,
        partition_key: vec!["pk".into()],
        clustering_key: vec!["ck".into()],
        indexes: BTreeMap::new(),
    };
    let mut ks = KeyspaceMetadata::default();
    ks.tables.insert("t".into(), table);
    ks.user_types.insert(
        "addr".into(),
        UserType { fields: vec![("street".into(), "text".into()), ("no".into(), "int".into())] },
    );
    TableTypes::from_metadata("ks", &ks, "t").unwrap()
}

fn uuid(s: &str) -> uuid::Uuid {
    uuid::Uuid::parse_str(s).unwrap()
}

fn udt(street: Option<&str>, no: Option<i32>) -> CqlValue {
    CqlValue::Udt {
        keyspace: "ks".into(),
        name: "addr".into(),
        fields: vec![("street".into(), street.map(|s| CqlValue::Text(s.into()))), ("no".into(), no.map(CqlValue::Int))],
    }
}

/// An update of every column of the table.
fn every_type() -> Change {
    let v = |name: &str, value: CqlValue| col(name, false, Some(value), false, Vec::new());
    let t1 = uuid("b223c55e-6d07-11ea-7654-24e4fb3f20b9");
    let t2 = uuid("c223c55e-6d07-11ea-7654-24e4fb3f20b9");
    change(
        Operation::Update,
        vec![
            col("ck", true, Some(CqlValue::Text("c".into())), false, Vec::new()),
            col("pk", true, Some(CqlValue::Int(1)), false, Vec::new()),
            v("a_ascii", CqlValue::Ascii("abc".into())),
            v("a_bigint", CqlValue::BigInt(1 << 60)),
            v("a_blob", CqlValue::Blob(vec![0xde, 0xad, 0xbe, 0xef, 0x01])),
            v("a_boolean", CqlValue::Boolean(true)),
            v("a_date", CqlValue::Date(CqlDate::from_days_since_epoch(18_344))),
            v(
                "a_decimal",
                CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from_signed_bytes_be(vec![0x30, 0x39]), scale: 3 }),
            ),
            v(
                "a_decimal_e",
                CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from_signed_bytes_be(vec![0x0c]), scale: -3 }),
            ),
            v("a_double", CqlValue::Double(-2.5)),
            v("a_duration", CqlValue::Duration(CqlDuration { months: 1, days: 2, nanoseconds: 3_000_000_000 })),
            v("a_float", CqlValue::Float(f32::NAN)),
            v("a_inet4", CqlValue::Inet(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))),
            v("a_inet6", CqlValue::Inet(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)))),
            v("a_int", CqlValue::Int(-7)),
            v("a_smallint", CqlValue::SmallInt(300)),
            v("a_text", CqlValue::Text("é \"q\"".into())),
            v("a_time", CqlValue::Time(CqlTime(3_600_000_000_123))),
            v("a_timestamp", CqlValue::Timestamp(CqlTimestamp(1_584_969_040_910))),
            v("a_timeuuid", CqlValue::Timeuuid(t1)),
            v("a_tinyint", CqlValue::TinyInt(-8)),
            v("a_uuid", CqlValue::Uuid(uuid("01234567-89ab-cdef-0123-456789abcdef"))),
            v("a_varint", CqlValue::Varint(CqlVarint::from_signed_bytes_be(vec![0x80, 0, 0, 0, 0, 0, 0, 0, 0]))),
            v("f_list", CqlValue::List(vec![CqlValue::Int(1), CqlValue::Int(2)])),
            v("f_map", CqlValue::Map(vec![(CqlValue::Int(1), CqlValue::Text("one".into()))])),
            v("f_set", CqlValue::Set(vec![CqlValue::Text("a".into())])),
            v("f_tuple", CqlValue::Tuple(vec![Some(CqlValue::Int(5)), None])),
            v("f_udt", udt(Some("Main"), Some(3))),
            // `n_list = n_list + ['x']` and `n_list[1] = null` in one batch: one added, one removed.
            col(
                "n_list",
                false,
                Some(CqlValue::Map(vec![(CqlValue::Timeuuid(t1), CqlValue::Text("x".into()))])),
                false,
                vec![CqlValue::Timeuuid(t2)],
            ),
            // `n_map = n_map + {'a': 1} - {'b'}`.
            col(
                "n_map",
                false,
                Some(CqlValue::Map(vec![(CqlValue::Text("a".into()), CqlValue::Int(1))])),
                false,
                vec![CqlValue::Text("b".into())],
            ),
            // `n_set = n_set - {4}`: removals only.
            col("n_set", false, None, false, vec![CqlValue::Int(4)]),
            // `n_udt.no = 9`.
            col("n_udt", false, Some(udt(None, Some(9))), false, Vec::new()),
        ],
    )
}

/// `after` of that update as the connector's README describes it.
fn every_type_after() -> Value {
    json!({
        "ck": "c",
        "pk": 1,
        "a_ascii": {"value": "abc"},
        "a_bigint": {"value": 1_152_921_504_606_846_976_i64},
        "a_blob": {"value": "3q2+7wE="},
        "a_boolean": {"value": true},
        "a_date": {"value": 18_344},
        "a_decimal": {"value": "12.345"},
        "a_decimal_e": {"value": "1.2E+4"},
        "a_double": {"value": -2.5},
        "a_duration": {"value": "Duration(1, 2, 3000000000)"},
        "a_float": {"value": "NaN"},
        "a_inet4": {"value": "10.0.0.1"},
        "a_inet6": {"value": "2001:db8:0:0:0:0:0:1"},
        "a_int": {"value": -7},
        "a_smallint": {"value": 300},
        "a_text": {"value": "é \"q\""},
        "a_time": {"value": 3_600_000_000_123_i64},
        "a_timestamp": {"value": 1_584_969_040_910_i64},
        "a_timeuuid": {"value": "b223c55e-6d07-11ea-7654-24e4fb3f20b9"},
        "a_tinyint": {"value": -8},
        "a_uuid": {"value": "01234567-89ab-cdef-0123-456789abcdef"},
        "a_varint": {"value": "-2361183241434822606848"},
        "f_list": {"value": [1, 2]},
        "f_map": {"value": [{"key": 1, "value": "one"}]},
        "f_set": {"value": ["a"]},
        "f_tuple": {"value": {"tuple_member_0": 5, "tuple_member_1": null}},
        "f_udt": {"value": {"street": "Main", "no": 3}},
        "n_list": {"value": [{"value": "x"}, {"value": null}]},
        "n_map": {"value": [{"key": "a", "value": 1}, {"key": "b", "value": null}]},
        "n_set": {"value": [4]},
        "n_udt": {"value": {"street": null, "no": 9}},
    })
}

fn source_payload() -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "connector": "scylla",
        "name": "cluster",
        "ts_ms": 1_584_969_040_910_i64,
        "ts_us": 1_584_969_040_910_883_i64,
        "snapshot": "false",
        "db": "ks",
        "keyspace_name": "ks",
        "table_name": "t",
    })
}

#[test]
fn every_type_is_written_as_the_connector_writes_it() {
    let envelopes = Envelopes::new(&SOURCE).types(Arc::new(table_types()));
    let e = envelopes.envelope(&alone(every_type()), NOW_MS).unwrap();
    assert_eq!(parse(&e.key), json!({"ck": "c", "pk": 1}));
    let want = json!({
        "source": source_payload(),
        "before": null,
        "after": every_type_after(),
        "op": "u",
        "ts_ms": NOW_MS,
        "transaction": null,
        "ts_us": NOW_MS * 1000,
        "ts_ns": NOW_MS * 1_000_000,
    });
    assert_eq!(parse(&e.value), want, "{}", e.value);
}

#[test]
fn without_types_collections_are_still_arrays_and_objects() {
    // Without the table's types, a column is written from its value: a
    // collection as a frozen one.
    let e = envelope(&alone(every_type()), &SOURCE, NOW_MS).unwrap();
    let after = &parse(&e.value)["after"];
    assert_eq!(after["f_map"], json!({"value": [{"key": 1, "value": "one"}]}));
    assert_eq!(after["f_list"], json!({"value": [1, 2]}));
    assert_eq!(after["f_udt"], json!({"value": {"street": "Main", "no": 3}}));
    assert_eq!(after["a_bigint"], json!({"value": 1_152_921_504_606_846_976_i64}));
}

/// A change of `(pk int, ck int, v text, w int)`: `v` written, `w` set to null when asked.
fn small(operation: Operation, v: Option<&str>, w_deleted: bool) -> Change {
    change(
        operation,
        vec![
            col("ck", true, Some(CqlValue::Int(1)), false, Vec::new()),
            col("pk", true, Some(CqlValue::Int(7)), false, Vec::new()),
            col("v", false, v.map(|v| CqlValue::Text(v.into())), false, Vec::new()),
            col("w", false, None, w_deleted, Vec::new()),
        ],
    )
}

fn value(c: ChangeWithImages) -> Value {
    let e = envelope(&c, &SOURCE, NOW_MS).unwrap();
    assert_eq!(e.key, r#"{"ck":1,"pk":7}"#);
    parse(&e.value)
}

#[test]
fn the_readmes_insert_update_and_delete() {
    // README "INSERT example" and "Cell representation": a written column
    // is `{"value":…}`, one set to null `{"value":null}`, one not written `null`.
    let v = value(alone(small(Operation::Insert, Some("a \"b\""), true)));
    assert_eq!(v["op"], "c");
    assert_eq!(v["before"], Value::Null);
    assert_eq!(v["after"], json!({"ck": 1, "pk": 7, "v": {"value": "a \"b\""}, "w": {"value": null}}));
    assert_eq!(v["source"], source_payload());
    assert_eq!(v["transaction"], Value::Null);
    let v = value(alone(small(Operation::Update, Some("new"), false)));
    assert_eq!((&v["op"], &v["before"]), (&json!("u"), &Value::Null));
    assert_eq!(v["after"], json!({"ck": 1, "pk": 7, "v": {"value": "new"}, "w": null}));
    // README "DELETE example": the key in `before`, every other column null.
    let v = value(alone(small(Operation::RowDelete, None, false)));
    assert_eq!((&v["op"], &v["after"]), (&json!("d"), &Value::Null));
    assert_eq!(v["before"], json!({"ck": 1, "pk": 7, "v": null, "w": null}));
}

#[test]
fn images_fill_before_and_after() {
    let update = ChangeWithImages {
        delta: small(Operation::Update, Some("new"), false),
        preimage: Some(small(Operation::PreImage, Some("old"), false)),
        postimage: Some(small(Operation::PostImage, Some("new"), false)),
    };
    let v = value(update);
    assert_eq!(v["before"], json!({"ck": 1, "pk": 7, "v": {"value": "old"}, "w": null}));
    assert_eq!(v["after"], json!({"ck": 1, "pk": 7, "v": {"value": "new"}, "w": null}));
    let delete = ChangeWithImages {
        delta: small(Operation::RowDelete, None, false),
        preimage: Some(small(Operation::PreImage, Some("last"), false)),
        postimage: None,
    };
    let v = value(delete);
    assert_eq!(v["before"], json!({"ck": 1, "pk": 7, "v": {"value": "last"}, "w": null}));
    assert_eq!(v["after"], Value::Null);
}

#[test]
fn a_partition_key_mode_keys_a_partition_delete_as_its_rows() {
    let row = small(Operation::Update, Some("a"), false);
    let mut delete = small(Operation::PartitionDelete, None, false);
    delete.columns[0].value = None;
    let pk = ["pk".to_owned()];
    assert_eq!(message_key(&row, KeyColumns::Primary), r#"{"ck":1,"pk":7}"#);
    assert_eq!(message_key(&delete, KeyColumns::Primary), r#"{"ck":null,"pk":7}"#);
    assert_eq!(message_key(&row, KeyColumns::Only(&pk)), r#"{"pk":7}"#);
    assert_eq!(message_key(&delete, KeyColumns::Only(&pk)), message_key(&row, KeyColumns::Only(&pk)));
    assert_eq!(message_key(&row, KeyColumns::Only(&["v".to_owned()])), "{}");
    assert_eq!(op(Operation::PartitionDelete), Some("d"));
}

#[test]
fn what_makes_no_row_event_makes_no_envelope() {
    for op in [Operation::RangeDeleteStartInclusive, Operation::PostImage] {
        assert!(envelope(&alone(small(op, None, false)), &SOURCE, 0).is_none(), "{op:?}");
    }
    let expired = Change { expiration: true, ..small(Operation::RowDelete, None, false) };
    assert!(envelope(&alone(expired), &SOURCE, 0).is_none(), "a TTL expiry");
    assert!(envelope(&alone(small(Operation::RowDelete, None, false)), &SOURCE, 0).is_some());
    assert_eq!(SOURCE.topic(), "cluster.ks.t");
}

fn field<'a>(schema: &'a Value, name: &str) -> &'a Value {
    schema["fields"].as_array().unwrap().iter().find(|f| f["field"] == name).unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn with_schemas_key_and_value_are_schema_and_payload() {
    let envelopes = Envelopes::new(&SOURCE).types(Arc::new(table_types())).schemas(JsonSchemas::With);
    let e = envelopes.envelope(&alone(every_type()), NOW_MS).unwrap();
    // README "Data change event key".
    let key = parse(&e.key);
    assert_eq!(
        key,
        json!({
            "schema": {
                "type": "struct",
                "fields": [
                    {"type": "string", "optional": true, "field": "ck"},
                    {"type": "int32", "optional": true, "field": "pk"},
                ],
                "optional": false,
                "name": "cluster.ks.t.Key",
            },
            "payload": {"ck": "c", "pk": 1},
        })
    );
    let value = parse(&e.value);
    assert_eq!(value["payload"]["after"], every_type_after());
    assert_eq!(value["payload"]["source"], source_payload());
    let schema = &value["schema"];
    assert_eq!((&schema["name"], &schema["optional"]), (&json!("cluster.ks.t.Envelope"), &json!(false)));
    // README "INSERT example": the source block's schema.
    let source = field(schema, "source");
    assert_eq!(source["name"], "com.scylladb.cdc.debezium.connector");
    assert_eq!(field(source, "ts_us"), &json!({"type": "int64", "optional": false, "field": "ts_us"}));
    assert_eq!(field(source, "snapshot")["name"], "io.debezium.data.Enum");
    assert_eq!(field(schema, "op"), &json!({"type": "string", "optional": true, "field": "op"}));
    assert_eq!(field(schema, "ts_ms"), &json!({"type": "int64", "optional": true, "field": "ts_ms"}));
    assert_eq!(field(schema, "transaction")["optional"], true);
    let after = field(schema, "after");
    assert_eq!((&after["name"], &after["optional"]), (&json!("cluster.ks.t.After"), &json!(true)));
    assert_eq!(field(schema, "before")["name"], "cluster.ks.t.Before");
    // Key columns plain, the others in a `<name>.<ks>.<table>.<column>.Cell` struct.
    assert_eq!(field(after, "pk"), &json!({"type": "int32", "optional": true, "field": "pk"}));
    let cell = |column: &str, value: Value| {
        json!({
            "type": "struct",
            "fields": [value],
            "optional": true,
            "name": format!("cluster.ks.t.{column}.Cell"),
            "field": column,
        })
    };
    let prim = |t: &str| json!({"type": t, "optional": true, "field": "value"});
    for (column, t) in [
        ("a_ascii", "string"),
        ("a_bigint", "int64"),
        ("a_blob", "bytes"),
        ("a_boolean", "boolean"),
        ("a_decimal", "string"),
        ("a_double", "float64"),
        ("a_duration", "string"),
        ("a_float", "float32"),
        ("a_inet4", "string"),
        ("a_int", "int32"),
        ("a_smallint", "int16"),
        ("a_text", "string"),
        ("a_time", "int64"),
        ("a_timeuuid", "string"),
        ("a_tinyint", "int8"),
        ("a_uuid", "string"),
        ("a_varint", "string"),
    ] {
        assert_eq!(field(after, column), &cell(column, prim(t)), "{column}");
    }
    let logical =
        |t: &str, name: &str| json!({"type": t, "optional": true, "name": name, "version": 1, "field": "value"});
    assert_eq!(
        field(after, "a_timestamp"),
        &cell("a_timestamp", logical("int64", "org.apache.kafka.connect.data.Timestamp"))
    );
    assert_eq!(field(after, "a_date"), &cell("a_date", logical("int32", "org.apache.kafka.connect.data.Date")));
    let value_of = |column: &str| field(after, column)["fields"][0].clone();
    assert_eq!(
        value_of("f_list"),
        json!({"type": "array", "items": {"type": "int32", "optional": true}, "optional": true, "field": "value"})
    );
    assert_eq!(
        value_of("f_map")["items"],
        json!({"type": "struct", "fields": [
            {"type": "int32", "optional": true, "field": "key"},
            {"type": "string", "optional": true, "field": "value"},
        ], "optional": true})
    );
    assert_eq!(
        value_of("n_list")["items"],
        json!({"type": "struct", "fields": [{"type": "string", "optional": true, "field": "value"}], "optional": true})
    );
    assert_eq!(value_of("n_set")["items"], json!({"type": "int32", "optional": true}));
    assert_eq!(
        value_of("f_tuple")["fields"],
        json!([
            {"type": "int32", "optional": true, "field": "tuple_member_0"},
            {"type": "string", "optional": true, "field": "tuple_member_1"},
        ])
    );
    assert_eq!(
        value_of("n_udt")["fields"],
        json!([
            {"type": "string", "optional": true, "field": "street"},
            {"type": "int32", "optional": true, "field": "no"},
        ])
    );
    // The same payload as without schemas.
    let bare = Envelopes::new(&SOURCE).types(Arc::new(table_types())).envelope(&alone(every_type()), NOW_MS).unwrap();
    assert_eq!(value["payload"], parse(&bare.value));
    assert_eq!(key["payload"], parse(&bare.key));
}

#[test]
fn type_strings_are_read_with_frozen_and_udts() {
    let types = table_types();
    let n_list = types.column("n_list").unwrap();
    assert_eq!((n_list.non_frozen_kind(), n_list.key), (Some(NonFrozen::List), false));
    assert_eq!(types.column("f_list").unwrap().non_frozen_kind(), None);
    assert_eq!(types.column("n_udt").unwrap().non_frozen_kind(), Some(NonFrozen::Udt));
    assert!(types.column("pk").unwrap().key);
    let mut ks = KeyspaceMetadata::default();
    ks.tables.insert(
        "t".into(),
        TableMetadata {
            columns: vec![ColumnMetadata {
                name: "x".into(),
                kind: ColumnKind::Regular,
                typ: "list<nosuchtype>".into(),
                position: -1,
                clustering_order: ClusteringOrder::None,
            }],
            ..TableMetadata::default()
        },
    );
    assert!(matches!(TableTypes::from_metadata("ks", &ks, "t"), Err(TypeError::Type { .. })));
    assert!(matches!(TableTypes::from_metadata("ks", &ks, "u"), Err(TypeError::NoTable(_))));
}
