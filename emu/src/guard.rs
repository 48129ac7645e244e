//! The CDC write guard: no write to a CDC table reaches Cassandra unless the
//! front will log it, or the client gets an error.
//!
//! Every path a write can take (QUERY, EXECUTE, BATCH entries of either
//! kind) asks [`judge`] before it forwards. A write is *logged* when its
//! statement parsed and names a CDC table, *plain* when it certainly names
//! none, and *refused* whenever the front cannot tell:
//!
//! - the statement looks like DML but the front's parser could not read it,
//!   and an identifier of the text is the name of a CDC table (anywhere),
//!   or, for `INSERT INTO ks.t JSON ...` (which names its one table), `ks.t`
//!   is a CDC table;
//! - an unqualified table name is a CDC table somewhere, but the
//!   connection's keyspace is unknown (no `USE` seen) or is changing (a
//!   `USE` is on its way to Cassandra, so Cassandra may resolve the name
//!   against either keyspace);
//! - an EXECUTE names a prepared id the front never saw prepared (answered
//!   UNPREPARED by the caller, so the driver prepares it again through the
//!   front).
//!
//! The keyspace of a connection ([`Keyspace`]) is what its last successful
//! `USE` set, learned from Cassandra's SET_KEYSPACE answer (the only
//! reliable source: a `USE` can fail).

use crate::cdclog::dml::Statement;
use crate::shared::Shared;
use crate::tokens::{tokenize, Kind};

/// Invalid request.
const INVALID: i32 = 0x2200;

/// A connection's keyspace for unqualified names.
#[derive(Debug, Default)]
pub(crate) struct Keyspace {
    /// Set by the last successful `USE`.
    pub(crate) current: Option<String>,
    /// `USE` statements sent and not answered yet.
    pub(crate) uses_in_flight: u32,
}

/// Where the unqualified names of a statement point.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolution {
    /// The keyspace, when known.
    pub(crate) keyspace: Option<String>,
    /// A `USE` is in flight and the keyspace came from the connection.
    pub(crate) changing: bool,
}

impl Resolution {
    /// The keyspace a prepared statement was bound to, else the connection's.
    pub(crate) fn of(prepared: Option<&str>, conn: &Keyspace) -> Resolution {
        match prepared {
            Some(k) => Resolution { keyspace: Some(k.to_string()), changing: false },
            None => Resolution { keyspace: conn.current.clone(), changing: conn.uses_in_flight > 0 },
        }
    }
}

/// The verdict on one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No CDC table is written: forward as is.
    Plain,
    /// A CDC table is written: the front logs it.
    Logged,
    /// The front cannot tell: answer this error.
    Refused(i32, String),
}

/// Judges a parsed write.
pub(crate) fn judge(shared: &Shared, statement: &Statement, at: &Resolution) -> Verdict {
    let Ok(registry) = shared.registry.lock() else {
        return Verdict::Refused(0, "the Scylla emulation front lost its CDC registry".into());
    };
    let mut logged = false;
    for t in statement.tables() {
        match (&t.keyspace, &at.keyspace) {
            (Some(k), _) => logged |= registry.options(k, &t.table).is_some_and(|o| o.enabled),
            (None, Some(_)) if at.changing && registry.enabled_anywhere(&t.table) => {
                return Verdict::Refused(
                    INVALID,
                    format!(
                        "The Scylla emulation front cannot tell which keyspace {} is in while a USE is in flight \
                         on this connection; wait for the USE answer or qualify the table name",
                        t.table
                    ),
                );
            }
            (None, Some(k)) => logged |= registry.options(k, &t.table).is_some_and(|o| o.enabled),
            (None, None) if registry.enabled_anywhere(&t.table) => {
                return Verdict::Refused(
                    INVALID,
                    "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename".into(),
                );
            }
            (None, None) => {}
        }
    }
    if logged {
        Verdict::Logged
    } else {
        Verdict::Plain
    }
}

/// Judges a write whose text the front's parser could not read (`why`):
/// refused when any identifier in it names a CDC table.
pub(crate) fn judge_unparsed(shared: &Shared, text: &str, why: &str) -> Verdict {
    let Ok(registry) = shared.registry.lock() else {
        return Verdict::Refused(0, "the Scylla emulation front lost its CDC registry".into());
    };
    let toks = tokenize(text);
    // `INSERT INTO ks.t JSON ...` writes `ks.t` and nothing else (the JSON
    // is one string or marker): judged by that table alone, so that a CDC
    // table of the same name elsewhere does not refuse it.
    if let Some(toks) = &toks {
        let qualified_json_insert = toks.first().is_some_and(|t| t.is_kw("INSERT"))
            && toks.get(1).is_some_and(|t| t.is_kw("INTO"))
            && toks.get(3).is_some_and(|t| t.is_punct('.'))
            && toks.get(5).is_some_and(|t| t.is_kw("JSON"));
        if let (true, Some(ks), Some(table)) =
            (qualified_json_insert, toks.get(2).and_then(|t| t.ident()), toks.get(4).and_then(|t| t.ident()))
        {
            return match registry.options(&ks, &table) {
                Some(o) if o.enabled => Verdict::Refused(
                    INVALID,
                    format!(
                        "The Scylla emulation front cannot log this write to CDC table {table}, so it does not apply it: {why}"
                    ),
                ),
                _ => Verdict::Plain,
            };
        }
    }
    let names: Vec<String> = match toks {
        Some(toks) => toks
            .iter()
            .filter(|t| matches!(t.kind, Kind::Ident | Kind::QuotedIdent))
            .filter_map(|t| t.ident())
            .collect(),
        // Not even tokenizable: Cassandra will refuse it too, unless it is
        // something the front misreads; refuse when a CDC table exists at all.
        None => registry.enabled_names(),
    };
    match names.iter().find(|n| registry.enabled_anywhere(n)) {
        Some(table) => Verdict::Refused(
            INVALID,
            format!(
                "The Scylla emulation front cannot log this write to CDC table {table}, so it does not apply it: {why}"
            ),
        ),
        None => Verdict::Plain,
    }
}
