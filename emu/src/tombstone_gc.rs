//! ScyllaDB's `tombstone_gc` table option, kept by the front: Cassandra has
//! no such option, so the front takes it out of the statement, checks it as
//! ScyllaDB does, remembers it per table and shows it where ScyllaDB shows
//! it (DESCRIBE of base tables and of CDC logs).
//!
//! From ScyllaDB's sources:
//!
//! - the map (`tombstone_gc_options` in `tombstone_gc_options.cc`): keys
//!   `mode` (`timeout`, `disabled`, `immediate` or `repair`, compared as
//!   written) and `propagation_delay_in_seconds` (a non-negative integer);
//!   anything else is a ConfigurationException in the words of
//!   [`TombstoneGcError`]; a key left out keeps its default (mode
//!   `timeout`, delay 3600 s), so `{'mode': 'repair'}` is repair with 3600 s;
//!   it prints both keys, values quoted (`to_map`, printed by DESCRIBE as
//!   `{'mode': 'repair', 'propagation_delay_in_seconds': '3600'}`);
//! - the default of a table created without it (`get_default_tombstone_gc_mode`
//!   in `tombstone_gc.cc`, used by `cf_prop_defs::apply_to_builder`): `repair`
//!   for every table of a keyspace that is not local, since ScyllaDB 2026.2
//!   (commit 5998a859f7, "tombstone_gc: allow use of repair-mode for RF=1
//!   tables", which made it the default for all tables; `docs/cql/ddl.rst`
//!   says so); before it, `repair` only with tablets and RF > 1. A CDC log
//!   gets `timeout` (`set_default_properties_log_table` in `cdc/log.cc`
//!   asks for a mode without repair), and an `ALTER` of a log to `repair`
//!   is refused ("The 'repair' mode for tombstone_gc is not allowed on CDC
//!   log tables.", `alter_table_statement.cc`);
//! - an `ALTER` without the option keeps the table's (extensions not named
//!   are carried over in `apply_to_builder`).
//!
//! The options given are kept in the front's keyspace (`tombstone_gc`, see
//! [`crate::system_tables`]), so a restarted front still shows them.
//!
//! Deviation: the option is a record only. Cassandra collects tombstones by
//! `gc_grace_seconds` whatever the mode says (there is no repair-driven
//! collection behind the front).

use std::fmt;

/// ScyllaDB's ConfigurationException code.
pub(crate) const CONFIG_ERROR: i32 = 0x2300;

/// ScyllaDB's InvalidRequest code.
pub(crate) const INVALID: i32 = 0x2200;

/// ScyllaDB's default propagation delay (`default_propagation_delay_in_seconds`).
const DEFAULT_PROPAGATION_DELAY: i64 = 3600;

/// The message of an `ALTER` that sets `repair` on a CDC log.
pub(crate) const REPAIR_ON_LOG: &str = "The 'repair' mode for tombstone_gc is not allowed on CDC log tables.";

/// A tombstone GC mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Timeout,
    Disabled,
    Immediate,
    Repair,
}

impl Mode {
    /// The mode's name, as ScyllaDB prints it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Timeout => "timeout",
            Mode::Disabled => "disabled",
            Mode::Immediate => "immediate",
            Mode::Repair => "repair",
        }
    }
}

/// A table's `tombstone_gc` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TombstoneGc {
    pub(crate) mode: Mode,
    pub(crate) propagation_delay_in_seconds: i64,
}

/// ScyllaDB's refusals of a `tombstone_gc` map, in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TombstoneGcError {
    /// A `mode` ScyllaDB does not know.
    #[error("Invalid value for tombstone_gc option mode: {0}")]
    Mode(String),
    /// A delay that is not a non-negative 64-bit integer.
    #[error("Invalid value for tombstone_gc option propagation_delay_in_seconds: {0}")]
    Delay(String),
    /// A key other than `mode` and `propagation_delay_in_seconds`.
    #[error("Invalid tombstone_gc option: {0}")]
    Key(String),
}

impl TombstoneGc {
    /// What a table created without the option gets: `repair` for a base
    /// table, `timeout` for a CDC log (see the module docs).
    pub(crate) fn default_for(log: bool) -> TombstoneGc {
        let mode = if log { Mode::Timeout } else { Mode::Repair };
        TombstoneGc { mode, propagation_delay_in_seconds: DEFAULT_PROPAGATION_DELAY }
    }

    /// The options of a map's entries (keys and values unquoted), checked
    /// in ScyllaDB's order (its map is sorted by key, the first bad entry
    /// is the one named).
    pub(crate) fn parse(entries: &[(String, String)]) -> Result<TombstoneGc, TombstoneGcError> {
        let mut sorted: Vec<&(String, String)> = entries.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = TombstoneGc { mode: Mode::Timeout, propagation_delay_in_seconds: DEFAULT_PROPAGATION_DELAY };
        for (key, value) in sorted {
            match key.as_str() {
                "mode" => {
                    out.mode = [Mode::Timeout, Mode::Disabled, Mode::Immediate, Mode::Repair]
                        .into_iter()
                        .find(|m| m.as_str() == value)
                        .ok_or_else(|| TombstoneGcError::Mode(value.clone()))?;
                }
                "propagation_delay_in_seconds" => {
                    // `boost::lexical_cast<int64_t>`: the whole text, an
                    // optional sign and digits only.
                    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
                    let seconds = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| value.parse::<i64>().ok())
                        .flatten()
                        .filter(|s| *s >= 0)
                        .ok_or_else(|| TombstoneGcError::Delay(value.clone()))?;
                    out.propagation_delay_in_seconds = seconds;
                }
                _ => return Err(TombstoneGcError::Key(key.clone())),
            }
        }
        Ok(out)
    }
}

impl fmt::Display for TombstoneGc {
    /// The map as DESCRIBE prints it (`map_as_cql_param` of `to_map`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{'mode': '{}', 'propagation_delay_in_seconds': '{}'}}",
            self.mode.as_str(),
            self.propagation_delay_in_seconds
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &str)]) -> Vec<(String, String)> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_mode_scylla_knows_is_kept_with_the_default_delay_filled_in() {
        for mode in ["timeout", "disabled", "immediate", "repair"] {
            let gc = TombstoneGc::parse(&map(&[("mode", mode)])).unwrap();
            assert_eq!(gc.to_string(), format!("{{'mode': '{mode}', 'propagation_delay_in_seconds': '3600'}}"));
        }
        let gc = TombstoneGc::parse(&map(&[("propagation_delay_in_seconds", "17"), ("mode", "immediate")])).unwrap();
        assert_eq!(gc.to_string(), "{'mode': 'immediate', 'propagation_delay_in_seconds': '17'}");
        // Only the delay: the mode stays `timeout`.
        let gc = TombstoneGc::parse(&map(&[("propagation_delay_in_seconds", "0")])).unwrap();
        assert_eq!(gc, TombstoneGc { mode: Mode::Timeout, propagation_delay_in_seconds: 0 });
        assert_eq!(TombstoneGc::parse(&[]).unwrap(), TombstoneGc::default_for(true));
    }

    #[test]
    fn bad_maps_get_scyllas_words() {
        let err = |e: &[(&str, &str)]| TombstoneGc::parse(&map(e)).unwrap_err().to_string();
        assert_eq!(err(&[("mode", "Repair")]), "Invalid value for tombstone_gc option mode: Repair");
        assert_eq!(err(&[("mode", "")]), "Invalid value for tombstone_gc option mode: ");
        for bad in ["-1", "1.5", "", "12s", "99999999999999999999", "+"] {
            assert_eq!(
                err(&[("propagation_delay_in_seconds", bad)]),
                format!("Invalid value for tombstone_gc option propagation_delay_in_seconds: {bad}")
            );
        }
        assert_eq!(err(&[("mode", "timeout"), ("period", "1")]), "Invalid tombstone_gc option: period");
        // Sorted: `mode` is read before `propagation...`, both bad.
        assert_eq!(
            err(&[("propagation_delay_in_seconds", "x"), ("mode", "y")]),
            "Invalid value for tombstone_gc option mode: y"
        );
    }

    #[test]
    fn defaults_are_repair_for_bases_and_timeout_for_logs() {
        assert_eq!(
            TombstoneGc::default_for(false).to_string(),
            "{'mode': 'repair', 'propagation_delay_in_seconds': '3600'}"
        );
        assert_eq!(
            TombstoneGc::default_for(true).to_string(),
            "{'mode': 'timeout', 'propagation_delay_in_seconds': '3600'}"
        );
    }
}
