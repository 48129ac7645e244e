//! Scylla's per-table `WITH tablets = {...}` hints, parsed and checked the
//! way ScyllaDB does, so that the front refuses what Scylla refuses, in
//! Scylla's words, instead of letting Cassandra see an option it does not
//! know (or dropping it silently).
//!
//! Source: `db/tablet_options.cc` and `cql3/statements/cf_prop_defs.cc`
//! (<https://github.com/scylladb/scylladb/blob/master/db/tablet_options.cc>,
//! <https://github.com/scylladb/scylladb/blob/master/cql3/statements/cf_prop_defs.cc>):
//!
//! - the keys are `min_tablet_count`, `max_tablet_count`,
//!   `min_per_shard_tablet_count` and `expected_data_size_in_gb`, compared
//!   exactly; any other key is a SyntaxException `Unknown tablet hint '<key>'`;
//! - values are read as C's `atol` (`atof` for `min_per_shard_tablet_count`)
//!   would read them: leading digits only, anything else 0; a negative value
//!   (or a `max_tablet_count` of 0 or less) is a ConfigurationException
//!   `Invalid value '<parsed value>' for <key>`; a minimum whose power of
//!   two lies above the maximum's is refused with Scylla's long message;
//! - in a keyspace without tablets any map is refused before the values are
//!   looked at: `tablet options cannot be used when tablets are disabled for
//!   the keyspace`;
//! - the schema keeps the map as given (an ALTER replaces it whole);
//!   DESCRIBE shows [`TabletOptions::to_map`]: the non-zero hints, sorted by
//!   key, numbers printed plainly.

use std::collections::BTreeMap;

/// Protocol error codes of the refusals.
const SYNTAX_ERROR: i32 = 0x2000;
const CONFIG_ERROR: i32 = 0x2300;

/// Scylla's refusal of a tablets map (code and message as ScyllaDB sends them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TabletOptionsError {
    /// A key Scylla does not know (SyntaxException).
    #[error("Unknown tablet hint '{0}'")]
    UnknownHint(String),
    /// A value out of range (ConfigurationException); the value is printed
    /// as Scylla parsed it.
    #[error("Invalid value '{value}' for {key}")]
    InvalidValue {
        /// The hint.
        key: &'static str,
        /// The parsed value, formatted.
        value: String,
    },
    /// `min_tablet_count` and `max_tablet_count` leave no power of two
    /// between them (ConfigurationException).
    #[error(
        "Invalid tablet count range: min_tablet_count={min} (effective: {effective_min}) and max_tablet_count={max} \
         (effective: {effective_max}) result in conflicting constraints after rounding to powers of 2. Since tablet \
         counts must be powers of 2, min_tablet_count rounds up and max_tablet_count rounds downPlease adjust the \
         values so that the smallest power of 2 greater than min_tablet_count is <= the largest power of 2 <= \
         max_tablet_count."
    )]
    Range {
        /// The minimum given.
        min: i64,
        /// Its power of two (rounded up).
        effective_min: u64,
        /// The maximum given.
        max: i64,
        /// Its power of two (rounded down).
        effective_max: u64,
    },
    /// Tablet options on a table of a keyspace on vnodes (ConfigurationException).
    #[error("tablet options cannot be used when tablets are disabled for the keyspace")]
    TabletsDisabled,
}

impl TabletOptionsError {
    /// The protocol error code ScyllaDB answers with.
    pub fn code(&self) -> i32 {
        match self {
            TabletOptionsError::UnknownHint(_) => SYNTAX_ERROR,
            _ => CONFIG_ERROR,
        }
    }
}

/// A table's tablet hints: the map as written and what Scylla reads from it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TabletOptions {
    /// The map as given (keys and value texts), in key order.
    pub raw: BTreeMap<String, String>,
    /// `min_tablet_count`, when given and non-zero.
    pub min_tablet_count: Option<i64>,
    /// `max_tablet_count`, when given and non-zero.
    pub max_tablet_count: Option<i64>,
    /// `min_per_shard_tablet_count`, when given and non-zero.
    pub min_per_shard_tablet_count: Option<f64>,
    /// `expected_data_size_in_gb`, when given and non-zero.
    pub expected_data_size_in_gb: Option<i64>,
}

/// The hints Scylla knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    MinTabletCount,
    MaxTabletCount,
    MinPerShardTabletCount,
    ExpectedDataSizeInGb,
}

impl Hint {
    fn parse(key: &str) -> Result<Hint, TabletOptionsError> {
        match key {
            "min_tablet_count" => Ok(Hint::MinTabletCount),
            "max_tablet_count" => Ok(Hint::MaxTabletCount),
            "min_per_shard_tablet_count" => Ok(Hint::MinPerShardTabletCount),
            "expected_data_size_in_gb" => Ok(Hint::ExpectedDataSizeInGb),
            other => Err(TabletOptionsError::UnknownHint(other.to_string())),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Hint::MinTabletCount => "min_tablet_count",
            Hint::MaxTabletCount => "max_tablet_count",
            Hint::MinPerShardTabletCount => "min_per_shard_tablet_count",
            Hint::ExpectedDataSizeInGb => "expected_data_size_in_gb",
        }
    }
}

/// C's `atol`: optional leading whitespace and sign, then the longest run
/// of digits; 0 when there are none (saturating instead of overflowing).
pub fn atol(s: &str) -> i64 {
    let t = s.trim_start();
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut n: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        n = n.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if negative {
        -n
    } else {
        n
    }
}

/// C's `atof` for the decimal forms CQL literals take: the longest prefix
/// that reads as a number (`-0.5`, `3`, `1e3`); 0 when none does.
pub fn atof(s: &str) -> f64 {
    let t = s.trim_start();
    (1..=t.len()).rev().filter(|&n| t.is_char_boundary(n)).find_map(|n| t[..n].parse::<f64>().ok()).unwrap_or(0.0)
}

/// A number as `fmt::to_string` prints it: the shortest form that reads
/// back, without a trailing `.0` (`0.8`, `2`).
pub fn format_double(v: f64) -> String {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn pow2_ceil(n: i64) -> u64 {
    (n.max(1) as u64).next_power_of_two()
}

fn pow2_floor(n: i64) -> u64 {
    let n = n.max(1) as u64;
    1 << (63 - n.leading_zeros())
}

/// Equality is used on whole statements' rewrites only; a NaN hint (which
/// `atof("nan")` can give) makes two reads of one map unequal, which is harmless.
impl Eq for TabletOptions {}

impl TabletOptions {
    /// Checks a `tablets = {...}` map of a table as Scylla's `validate`
    /// does (not the keyspace's flavour: see [`TabletOptionsError::TabletsDisabled`])
    /// and reads it as Scylla's constructor does (zero values are not kept).
    pub fn parse(entries: &[(String, String)]) -> Result<TabletOptions, TabletOptionsError> {
        let mut o = TabletOptions::default();
        for (key, value) in entries {
            let hint = Hint::parse(key)?;
            let invalid = |value: String| TabletOptionsError::InvalidValue { key: hint.name(), value };
            match hint {
                Hint::MinTabletCount | Hint::ExpectedDataSizeInGb => {
                    let v = atol(value);
                    if v < 0 {
                        return Err(invalid(v.to_string()));
                    }
                    let slot = if hint == Hint::MinTabletCount {
                        &mut o.min_tablet_count
                    } else {
                        &mut o.expected_data_size_in_gb
                    };
                    *slot = (v != 0).then_some(v);
                }
                Hint::MaxTabletCount => {
                    let v = atol(value);
                    if v <= 0 {
                        return Err(invalid(v.to_string()));
                    }
                    o.max_tablet_count = Some(v);
                }
                Hint::MinPerShardTabletCount => {
                    let v = atof(value);
                    if v < 0.0 {
                        return Err(invalid(format_double(v)));
                    }
                    o.min_per_shard_tablet_count = (v != 0.0).then_some(v);
                }
            }
            o.raw.insert(key.clone(), value.clone());
        }
        // Scylla compares the powers of two only when both were given (a
        // zero minimum counts: it was given).
        let min_given = entries.iter().rev().find(|(k, _)| k == "min_tablet_count").map(|(_, v)| atol(v));
        if let (Some(min), Some(max)) = (min_given, o.max_tablet_count) {
            let (effective_min, effective_max) = (pow2_ceil(min), pow2_floor(max));
            if effective_min > effective_max {
                return Err(TabletOptionsError::Range { min, effective_min, max, effective_max });
            }
        }
        Ok(o)
    }

    /// The hints as DESCRIBE prints them (Scylla's `tablet_options::to_map`):
    /// the non-zero ones, by key, numbers printed plainly.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        if let Some(v) = self.min_tablet_count {
            m.insert("min_tablet_count".to_string(), v.to_string());
        }
        if let Some(v) = self.max_tablet_count {
            m.insert("max_tablet_count".to_string(), v.to_string());
        }
        if let Some(v) = self.min_per_shard_tablet_count {
            m.insert("min_per_shard_tablet_count".to_string(), format_double(v));
        }
        if let Some(v) = self.expected_data_size_in_gb {
            m.insert("expected_data_size_in_gb".to_string(), v.to_string());
        }
        m
    }

    /// The tablet count of a table created with these hints, `initial`
    /// being its keyspace's count: at least `min_tablet_count` rounded up to
    /// a power of two, at most `max_tablet_count` rounded down to one.
    /// (`min_per_shard_tablet_count` and the size hint are not applied: the
    /// front's tables are small.)
    pub fn created_count(&self, initial: usize) -> usize {
        let mut count = initial.max(1) as u64;
        if let Some(min) = self.min_tablet_count {
            count = count.max(pow2_ceil(min));
        }
        self.capped(count)
    }

    /// The count a table of `current` tablets settles at after an ALTER to
    /// these hints, as Scylla's load balancer sizes a small table: its
    /// minimum (rounded up to a power of two) when one is given, else its
    /// count; at most the maximum (rounded down).
    pub fn settled_count(&self, current: usize) -> usize {
        let count = self.min_tablet_count.map_or(current.max(1) as u64, pow2_ceil);
        self.capped(count)
    }

    fn capped(&self, count: u64) -> usize {
        let count = self.max_tablet_count.map_or(count, |max| count.min(pow2_floor(max)));
        usize::try_from(count).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(entries: &[(&str, &str)]) -> Result<TabletOptions, TabletOptionsError> {
        let v: Vec<(String, String)> = entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TabletOptions::parse(&v)
    }

    #[test]
    fn c_number_parsing() {
        assert_eq!((atol("12"), atol("-3"), atol(" 7x"), atol("abc"), atol("1.9")), (12, -3, 7, 0, 1));
        assert_eq!((atof("0.8"), atof("-0.5"), atof("x"), atof("2e1")), (0.8, -0.5, 0.0, 20.0));
        assert_eq!(
            (format_double(0.8), format_double(2.0), format_double(-0.5)),
            ("0.8".into(), "2".into(), "-0.5".into())
        );
    }

    #[test]
    fn scylla_refusals() {
        let e = parse(&[("foo", "1")]).unwrap_err();
        assert_eq!((e.code(), e.to_string()), (0x2000, "Unknown tablet hint 'foo'".to_string()));
        let e = parse(&[("min_tablet_count", "-1")]).unwrap_err();
        assert_eq!((e.code(), e.to_string()), (0x2300, "Invalid value '-1' for min_tablet_count".to_string()));
        assert_eq!(
            parse(&[("max_tablet_count", "0")]).unwrap_err().to_string(),
            "Invalid value '0' for max_tablet_count"
        );
        assert_eq!(
            parse(&[("min_per_shard_tablet_count", "-0.5")]).unwrap_err().to_string(),
            "Invalid value '-0.5' for min_per_shard_tablet_count"
        );
        assert_eq!(
            parse(&[("expected_data_size_in_gb", "-2.5")]).unwrap_err().to_string(),
            "Invalid value '-2' for expected_data_size_in_gb"
        );
        let e = parse(&[("min_tablet_count", "5"), ("max_tablet_count", "7")]).unwrap_err();
        assert!(e.to_string().starts_with(
            "Invalid tablet count range: min_tablet_count=5 (effective: 8) and max_tablet_count=7 (effective: 4)"
        ));
        assert_eq!(TabletOptionsError::TabletsDisabled.code(), 0x2300);
        assert!(parse(&[("MIN_TABLET_COUNT", "1")]).is_err(), "keys are exact");
    }

    #[test]
    fn describe_map_and_count() {
        let o = parse(&[
            ("min_tablet_count", "100"),
            ("min_per_shard_tablet_count", "0.8"),
            ("expected_data_size_in_gb", "50"),
        ])
        .unwrap();
        let m: Vec<(String, String)> = o.to_map().into_iter().collect();
        assert_eq!(
            m,
            vec![
                ("expected_data_size_in_gb".into(), "50".into()),
                ("min_per_shard_tablet_count".into(), "0.8".into()),
                ("min_tablet_count".into(), "100".into())
            ]
        );
        assert_eq!((o.created_count(8), o.created_count(256), o.settled_count(256)), (128, 256, 128));
        let o = parse(&[("min_tablet_count", "0"), ("max_tablet_count", "6")]).unwrap();
        assert!(!o.to_map().contains_key("min_tablet_count"), "a zero hint is not kept");
        assert_eq!((o.created_count(16), o.created_count(2), o.settled_count(2)), (4, 2, 2));
    }
}
