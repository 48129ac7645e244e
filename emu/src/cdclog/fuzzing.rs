//! Fuzzing harness for the CQL text the front parses (the `dml` target in
//! `fuzz/`): the statement is parsed, and when it is DML it is turned into
//! mutations of the spec's example table and split into log rows. Any panic
//! is a bug; errors are expected. Its example table is also the one the
//! `execute_values` harness ([`crate::fuzzing`]) binds values for.

use std::sync::Arc;

use super::dml::{parse, TableName};
use super::mutation::{build, Binds, Context};
use super::schema::TableSchema;
use super::split::{records, Images};
use crate::cdc::{BaseColumn, CdcOptions, ColumnKind, PreImage};

pub(crate) fn schema() -> Option<Arc<TableSchema>> {
    let col = |name: &str, kind: ColumnKind, position: i32, typ: &str| BaseColumn {
        name: name.into(),
        kind,
        position,
        typ: typ.into(),
    };
    let cols = [
        col("pk", ColumnKind::PartitionKey, 0, "int"),
        col("ck", ColumnKind::Clustering, 0, "int"),
        col("ck2", ColumnKind::Clustering, 1, "text"),
        col("s", ColumnKind::Static, -1, "int"),
        col("v1", ColumnKind::Regular, -1, "int"),
        col("v2", ColumnKind::Regular, -1, "text"),
        col("m", ColumnKind::Regular, -1, "map<int, text>"),
        col("st", ColumnKind::Regular, -1, "set<int>"),
        col("l", ColumnKind::Regular, -1, "list<text>"),
        col("u", ColumnKind::Regular, -1, "ut"),
        col("f", ColumnKind::Regular, -1, "frozen<list<tuple<int, text>>>"),
    ];
    let udt = |_: &str, name: &str| {
        (name == "ut").then(|| ["a", "b", "c"].iter().map(|f| (f.to_string(), "int".to_string())).collect())
    };
    let options = CdcOptions { enabled: true, preimage: PreImage::Full, postimage: true, ..CdcOptions::default() };
    TableSchema::new("ks", "t", &cols, &udt, 0, options).ok().map(Arc::new)
}

/// Parses `data` as CQL; for DML, builds the mutations and the log rows.
pub fn dml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(statement) = parse(text) else { return };
    let _ = (statement.bind_count(), statement.is_conditional(), statement.tables());
    let Some(schema) = schema() else { return };
    let schema_of = move |_: &TableName| Some(schema.clone());
    let cx = Context { schema_of: &schema_of, binds: Binds::NONE, timestamp: 1_700_000_000_000_000, list_node: 1 };
    let Ok(built) = build(&statement, &cx) else { return };
    for m in &built.mutations {
        let _ = records(m, &Images::default());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn statements_and_garbage_are_not_panics() {
        for text in [
            "INSERT INTO t (pk, ck, ck2, v1, m, l, u) VALUES (1, 2, 'x', 3, {1: 'a'}, ['a'], {a: 1})",
            "UPDATE t USING TTL 5 SET m = m + {1: 'a'}, st = st - {1}, u.b = null WHERE pk = 1 AND ck = 2 AND ck2 = 'x'",
            "DELETE FROM t WHERE pk = 1 AND (ck, ck2) > (1, 'a') AND ck < 5",
            "BEGIN BATCH DELETE m[1] FROM t WHERE pk = 1 AND ck = 1 AND ck2 = ''; APPLY BATCH",
            "UPDATE t SET v1 = 99999999999 WHERE pk = 1 AND ck = 1 AND ck2 = ''",
            "DELETE FROM t WHERE pk IN (1, 2) AND ck IN (3) AND ck2 > 'z' AND ck2 < 'a'",
            "\u{0}\u{ff}",
        ] {
            super::dml(text.as_bytes());
        }
    }
}
