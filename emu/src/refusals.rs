//! Scylla's refusals of CDC-related schema statements, with Scylla's error
//! codes and texts (ScyllaDB's `cdc/log.cc`, its `test/cql/cdc_*` transcripts
//! and `test/cqlpy/test_cdc.py` are the sources).
//!
//! Some are checked before Cassandra sees the statement, because Cassandra
//! knows nothing of CDC log tables and would accept (or refuse differently)
//! what Scylla refuses:
//!
//! - `ALTER TABLE <log> ADD|DROP|ALTER ...`: the columns of a log table
//!   follow its base table only (two texts: CDC on, CDC off on the base);
//! - `ALTER TABLE <log> RENAME ...`: likewise (two texts);
//! - `CREATE MATERIALIZED VIEW ... FROM <log>`;
//! - `DROP TABLE <log>` while its base table has CDC on: Scylla's access
//!   check (`service/client_state.cc`) refuses DROP on a log table that a
//!   base table still writes, as Unauthorized; once CDC is off on the base,
//!   the detached log can be dropped.
//!
//! Others are Cassandra refusals of the same thing in other words, which
//! [`translate`] rewords: adding a counter column to a non-counter table;
//! and a materialized view refused because the Cassandra behind has them
//! disabled (Cassandra 5.0's default), which ScyllaDB would create, is
//! said to be the front's limit.
//! (Nested logs and CDC on counter tables are refused where the front
//! creates the log, in `front`.)

use crate::cdc::LOG_SUFFIX;
use crate::shared::Shared;
use crate::tokens::{tokenize, Tok};

const INVALID: i32 = 0x2200;
const CONFIG_ERROR: i32 = 0x2300;

const ALTER_ACTIVE: &str =
    "You cannot modify the set of columns of a CDC log table directly. Modify the base table instead.";
const ALTER_INACTIVE: &str = "You cannot modify the set of columns of a CDC log table directly. Although the base \
     table has deactivated CDC, this table will continue being a CDC log table until it is dropped. If you want to \
     modify the columns in it, you can only do that by reenabling CDC on the base table, which will reattach this log \
     table. Then you will be able to modify the columns in the base table, and that will have effect on the log table \
     too. Modifying the columns of a CDC log table directly is never allowed.";
const RENAME_ACTIVE: &str = "Cannot rename a column of a CDC log table.";
const RENAME_INACTIVE: &str = "You cannot rename a column of a CDC log table. Although the base table has deactivated \
     CDC, this table will continue being a CDC log table until it is dropped.";
const MV_ON_LOG: &str = "Materialized views cannot be created on CDC Log tables";
const UNAUTHORIZED: i32 = 0x2100;

/// `[ks.]name` at `toks[at]`: the name resolved against `keyspace`, and the
/// index after it.
fn table_at(toks: &[Tok<'_>], at: usize, keyspace: Option<&str>) -> Option<((String, String), usize)> {
    let a = toks.get(at)?.ident()?;
    if toks.get(at + 1).is_some_and(|t| t.is_punct('.')) {
        let t = toks.get(at + 2)?.ident()?;
        Some(((a, t), at + 3))
    } else {
        Some(((keyspace?.to_string(), a), at + 1))
    }
}

/// Scylla's refusal of a schema statement, if it refuses it.
pub(crate) fn check(shared: &Shared, text: &str, keyspace: Option<&str>) -> Option<(i32, String)> {
    let toks = tokenize(text)?;
    let first = toks.first()?;
    let registry = shared.registry.lock().ok()?;
    let is_log = |k: &str, t: &str| registry.is_log(k, t);
    let base_active =
        |k: &str, t: &str| t.strip_suffix(LOG_SUFFIX).and_then(|b| registry.options(k, b)).is_some_and(|o| o.enabled);
    if first.is_kw("ALTER") && toks.get(1).is_some_and(|t| t.is_kw("TABLE") || t.is_kw("COLUMNFAMILY")) {
        let ((k, t), next) = table_at(&toks, 2, keyspace)?;
        if !is_log(&k, &t) {
            return None;
        }
        let action = toks.get(next)?;
        let active = base_active(&k, &t);
        if action.is_kw("ADD") || action.is_kw("DROP") || action.is_kw("ALTER") {
            return Some((INVALID, if active { ALTER_ACTIVE } else { ALTER_INACTIVE }.into()));
        }
        if action.is_kw("RENAME") {
            return Some((INVALID, if active { RENAME_ACTIVE } else { RENAME_INACTIVE }.into()));
        }
        return None;
    }
    if first.is_kw("DROP") && toks.get(1).is_some_and(|t| t.is_kw("TABLE") || t.is_kw("COLUMNFAMILY")) {
        let at = if toks.get(2).is_some_and(|t| t.is_kw("IF")) { 4 } else { 2 };
        let ((k, t), _) = table_at(&toks, at, keyspace)?;
        // Scylla prints the resource as `<table ks.t>`.
        return (is_log(&k, &t) && base_active(&k, &t))
            .then(|| (UNAUTHORIZED, format!("Cannot DROP cdc log table <table {k}.{t}>")));
    }
    if first.is_kw("CREATE") && toks.get(1).is_some_and(|t| t.is_kw("MATERIALIZED")) {
        let mut depth = 0;
        for (i, t) in toks.iter().enumerate() {
            if t.is_punct('(') {
                depth += 1;
            } else if t.is_punct(')') {
                depth -= 1;
            } else if depth == 0 && t.is_kw("FROM") {
                let ((k, name), _) = table_at(&toks, i + 1, keyspace)?;
                return is_log(&k, &name).then(|| (INVALID, MV_ON_LOG.into()));
            }
        }
    }
    None
}

/// Scylla's wording of a Cassandra refusal that means the same thing.
pub(crate) fn translate(code: i32, message: &str) -> Option<(i32, String)> {
    // Cassandra: `ks.t: Cannot have a counter column ("c") in a non counter table`.
    if code == CONFIG_ERROR
        && message.contains("Cannot have a counter column")
        && message.ends_with("non counter table")
    {
        let column = message.split('"').nth(1)?;
        return Some((CONFIG_ERROR, format!("Cannot add a counter column ({column}) in a non counter column family")));
    }
    // Cassandra 5.0 with `materialized_views_enabled: false` (its default):
    // ScyllaDB would create the view, the front cannot.
    if code == INVALID && message.contains("Materialized views are disabled") {
        return Some((INVALID, MV_DISABLED.into()));
    }
    None
}

/// The front's refusal of a materialized view Cassandra has disabled.
const MV_DISABLED: &str = "The Scylla emulation front cannot create materialized views: the Cassandra behind it has \
     them disabled (materialized_views_enabled in cassandra.yaml)";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counter_column_refusal_in_scylla_words() {
        assert_eq!(
            translate(0x2300, "ks.tb3: Cannot have a counter column (\"c1\") in a non counter table").unwrap(),
            (0x2300, "Cannot add a counter column (c1) in a non counter column family".to_string())
        );
        assert_eq!(translate(0x2200, "anything"), None);
    }

    #[test]
    fn disabled_views_are_the_fronts_refusal() {
        let (code, message) =
            translate(0x2200, "Materialized views are disabled. Enable in cassandra.yaml to use.").unwrap();
        assert_eq!(code, 0x2200);
        assert!(message.starts_with("The Scylla emulation front cannot create materialized views"));
    }
}
