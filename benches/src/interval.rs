//! How long a phase of a workload runs, in latte's vocabulary: a time
//! (`10s`, `500ms`, `2m`) or a number of cycles (`100000`). Shared by the
//! `workload` and `latte` binaries, so that both read `-d` alike.

use std::time::Duration;

/// How long a phase runs: for a time, or for a number of cycles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Interval {
    /// Until this much time has passed.
    Time(Duration),
    /// This many cycles (calls of the workload function), in all threads together.
    Count(u64),
}

impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interval::Time(d) => write!(f, "{} s", d.as_secs_f64()),
            Interval::Count(n) => write!(f, "{n} cycles"),
        }
    }
}

/// Parses `-d`/`-w`: a plain number is a cycle count (`_` separators
/// allowed), a number with a unit (`ms`, `s`, `m`/`min`, `h`) a time.
pub fn parse_interval(s: &str) -> Result<Interval, String> {
    let s = s.trim();
    if let Ok(n) = s.replace('_', "").parse::<u64>() {
        return Ok(Interval::Count(n));
    }
    let split = s.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(|| format!("bad duration {s:?}"))?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.trim().parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("bad duration unit {unit:?} (ms, s, m, h, or a plain cycle count)")),
    };
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("bad duration {s:?}"));
    }
    Ok(Interval::Time(Duration::from_secs_f64(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_times() {
        assert_eq!(parse_interval("1_000"), Ok(Interval::Count(1000)));
        assert_eq!(parse_interval("250ms"), Ok(Interval::Time(Duration::from_millis(250))));
        assert_eq!(parse_interval("2m"), Ok(Interval::Time(Duration::from_secs(120))));
        assert!(parse_interval("10 parsecs").is_err());
        assert!(parse_interval("s").is_err());
        assert!(parse_interval("").is_err());
    }
}
