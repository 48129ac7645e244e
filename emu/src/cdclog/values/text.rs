//! The text forms Cassandra accepts for varints, decimals, dates, times,
//! timestamps and durations.

use super::*;

/// Digits accepted in a varint or decimal literal (the conversion is
/// quadratic).
const MAX_DIGITS: usize = 4096;

/// A decimal integer (`-123`, huge allowed) as a varint.
pub(super) fn parse_varint(s: &str) -> Option<CqlVarint> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if digits.is_empty() || digits.len() > MAX_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Little-endian base-2^32 limbs, fed 9 decimal digits at a time.
    let mut limbs: Vec<u32> = Vec::new();
    let head = digits.len() % 9;
    let chunks = std::iter::once(&digits[..head])
        .filter(|c| !c.is_empty())
        .chain(digits.as_bytes()[head..].chunks(9).map(|c| std::str::from_utf8(c).unwrap_or("0")));
    for chunk in chunks {
        let mut carry: u64 = chunk.parse().ok()?;
        let scale = 10u64.pow(chunk.len() as u32);
        for limb in limbs.iter_mut() {
            let v = u64::from(*limb) * scale + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            limbs.push(carry as u32);
        }
    }
    let mut be = vec![0u8];
    be.extend(limbs.iter().rev().flat_map(|l| l.to_be_bytes()));
    if negative {
        let mut carry = true;
        for b in be.iter_mut().rev() {
            *b = !*b;
            if carry {
                (*b, carry) = b.overflowing_add(1);
            }
        }
    }
    Some(CqlVarint::from_signed_bytes_be(be))
}

/// `-12.345e3` → unscaled `-12345`, scale 0 (Java's `BigDecimal` rules:
/// scale = fraction digits − exponent).
pub(super) fn parse_decimal(s: &str) -> Option<CqlDecimal> {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i64>().ok()?),
        None => (s, 0),
    };
    let (sign, unsigned) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let unscaled = parse_varint(&format!("{sign}{int}{frac}"))?;
    let scale = i32::try_from(frac.len() as i64 - exponent).ok()?;
    Some(CqlDecimal { unscaled, scale })
}

/// A tiny cursor over ASCII text.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn eat(&mut self, c: u8) -> bool {
        let yes = self.s.get(self.i) == Some(&c);
        self.i += usize::from(yes);
        yes
    }
    /// Between `min` and `max` digits, with how many were read.
    fn digits(&mut self, min: usize, max: usize) -> Option<(u64, usize)> {
        let n = self.s[self.i..].iter().take(max).take_while(|b| b.is_ascii_digit()).count();
        if n < min {
            return None;
        }
        let v = std::str::from_utf8(&self.s[self.i..self.i + n]).ok()?.parse().ok()?;
        self.i += n;
        Some((v, n))
    }
    fn done(&self) -> bool {
        self.i == self.s.len()
    }
}

fn is_integer(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}

/// `[-]yyyy-mm-dd`.
fn ymd(c: &mut Cursor<'_>) -> Option<CqlDate> {
    let negative = c.eat(b'-');
    let (y, _) = c.digits(1, 9)?;
    let year = if negative { -(y as i64) } else { y as i64 };
    c.eat(b'-').then_some(())?;
    let (m, _) = c.digits(1, 2)?;
    c.eat(b'-').then_some(())?;
    let (d, _) = c.digits(1, 2)?;
    CqlDate::from_ymd(year, m as u32, d as u32)
}

/// `hh:mm[:ss[.fffffffff]]` as nanoseconds, seconds required if `seconds`.
fn hms(c: &mut Cursor<'_>, seconds: bool) -> Option<CqlTime> {
    let (h, _) = c.digits(1, 2)?;
    c.eat(b':').then_some(())?;
    let (m, _) = c.digits(2, 2)?;
    let (mut s, mut nanos) = (0, 0);
    if c.eat(b':') {
        s = c.digits(2, 2)?.0;
        if c.eat(b'.') {
            let (f, n) = c.digits(1, 9)?;
            nanos = f * 10u64.pow(9 - n as u32);
        }
    } else if seconds {
        return None;
    }
    CqlTime::from_hms_nano(h as u32, m as u32, s as u32, nanos as u32)
}

/// A `timestamp` string: milliseconds (`'1299038700000'`), or ISO 8601
/// (`2011-02-03`, `2011-02-03 04:05`, `2011-02-03T04:05:00.000Z`,
/// `2011-02-03 04:05+0000`, `... +01:00`, `... UTC`); no zone is UTC.
pub(crate) fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    if is_integer(s) {
        return s.parse().ok();
    }
    let mut c = Cursor { s: s.as_bytes(), i: 0 };
    let date = ymd(&mut c)?;
    let mut ms = i64::from(date.days_since_epoch()) * 86_400_000;
    if c.eat(b' ') || c.eat(b'T') {
        ms += hms(&mut c, false)?.0 / 1_000_000;
    }
    while c.eat(b' ') {}
    let offset_minutes = match std::str::from_utf8(&c.s[c.i..]).ok()? {
        "" | "Z" | "z" | "UTC" | "GMT" => 0,
        _ => {
            let negative = c.eat(b'-');
            if !negative && !c.eat(b'+') {
                return None;
            }
            let (h, _) = c.digits(2, 2)?;
            c.eat(b':');
            let m = if c.done() { 0 } else { c.digits(2, 2)?.0 };
            if !c.done() || h > 18 || m > 59 {
                return None;
            }
            let minutes = (h * 60 + m) as i64;
            if negative {
                -minutes
            } else {
                minutes
            }
        }
    };
    Some(ms - offset_minutes * 60_000)
}

/// A `date` string: `yyyy-mm-dd`, or the raw unsigned day number.
pub(super) fn parse_date(s: &str) -> Option<CqlDate> {
    if is_integer(s) {
        return s.parse::<u32>().ok().map(CqlDate);
    }
    let mut c = Cursor { s: s.as_bytes(), i: 0 };
    let d = ymd(&mut c)?;
    c.done().then_some(d)
}

/// A `time` string: `hh:mm:ss[.fffffffff]`, or nanoseconds.
pub(super) fn parse_time(s: &str) -> Option<CqlTime> {
    if is_integer(s) {
        return s.parse::<i64>().ok().map(CqlTime).filter(|t| t.is_valid());
    }
    let mut c = Cursor { s: s.as_bytes(), i: 0 };
    let t = hms(&mut c, true)?;
    c.done().then_some(t)
}

/// A duration literal: `1y2mo3w4d5h6m7s8ms9us10ns` (units in any case, `µs`
/// too), ISO 8601 `P1Y2M3DT4H5M6S` / `P2W`, or `P0001-02-03T04:05:06`; a
/// leading `-` negates it.
pub(crate) fn parse_duration(s: &str) -> Result<CqlDuration, String> {
    let bad = || format!("invalid duration {s}");
    let (negative, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    // months, days, nanoseconds
    let mut total: [i128; 3] = [0; 3];
    let mut add = |n: u64, unit: &str| -> Option<()> {
        let (slot, factor): (usize, i128) = match unit {
            "y" => (0, 12),
            "mo" => (0, 1),
            "w" => (1, 7),
            "d" => (1, 1),
            "h" => (2, 3_600_000_000_000),
            "m" => (2, 60_000_000_000),
            "s" => (2, 1_000_000_000),
            "ms" => (2, 1_000_000),
            "us" | "µs" | "μs" => (2, 1000),
            "ns" => (2, 1),
            _ => return None,
        };
        total[slot] = total[slot].checked_add(i128::from(n).checked_mul(factor)?)?;
        Some(())
    };
    if let Some(iso) = body.strip_prefix('P') {
        let b = iso.as_bytes();
        let alternative = b.len() == 19
            && b.iter().zip(b"0000-00-00T00:00:00").all(|(c, p)| if *p == b'0' { c.is_ascii_digit() } else { c == p });
        if alternative {
            let num = |r: std::ops::Range<usize>| iso[r].parse::<u64>().unwrap_or(0);
            for (r, unit) in [(0..4, "y"), (5..7, "mo"), (8..10, "d"), (11..13, "h"), (14..16, "m"), (17..19, "s")] {
                add(num(r), unit).ok_or_else(bad)?;
            }
        } else if let Some(weeks) = iso.strip_suffix('W') {
            add(weeks.parse().map_err(|_| bad())?, "w").ok_or_else(bad)?;
        } else {
            let (date, time) = iso.split_once('T').map_or((iso, None), |(d, t)| (d, Some(t)));
            let mut components = |part: &str, units: &[(char, &str)]| -> Option<usize> {
                let mut rest = part;
                let mut count = 0;
                for (letter, unit) in units {
                    let n = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                    if n > 0 && rest[n..].starts_with(*letter) {
                        add(rest[..n].parse().ok()?, unit)?;
                        rest = &rest[n + 1..];
                        count += 1;
                    }
                }
                rest.is_empty().then_some(count)
            };
            let d = components(date, &[('Y', "y"), ('M', "mo"), ('D', "d")]).ok_or_else(bad)?;
            let t = match time {
                Some(t) => components(t, &[('H', "h"), ('M', "m"), ('S', "s")]).filter(|n| *n > 0).ok_or_else(bad)?,
                None => 0,
            };
            if d + t == 0 {
                return Err(bad());
            }
        }
    } else {
        let mut rest = body;
        if rest.is_empty() {
            return Err(bad());
        }
        while !rest.is_empty() {
            let n = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            let u = rest[n..].find(|c: char| c.is_ascii_digit()).map_or(rest.len(), |u| n + u);
            if n == 0 || u == n {
                return Err(bad());
            }
            add(rest[..n].parse().map_err(|_| bad())?, &rest[n..u].to_lowercase()).ok_or_else(bad)?;
            rest = &rest[u..];
        }
    }
    let sign = if negative { -1 } else { 1 };
    let too_big = || format!("duration {s} is out of range");
    Ok(CqlDuration {
        months: i32::try_from(sign * total[0]).map_err(|_| too_big())?,
        days: i32::try_from(sign * total[1]).map_err(|_| too_big())?,
        nanoseconds: i64::try_from(sign * total[2]).map_err(|_| too_big())?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn varints_are_minimal_twos_complement() {
        for n in [
            0i128,
            1,
            -1,
            127,
            128,
            -128,
            -129,
            255,
            256,
            32767,
            -32768,
            i64::MAX.into(),
            i64::MIN.into(),
            i128::MAX,
            i128::MIN + 1,
        ] {
            assert_eq!(bytes(&n.to_string(), &T::Varint), CqlVarint::from(n).as_signed_bytes_be(), "{n}");
        }
        assert_eq!(bytes("-0", &T::Varint), [0]);
        assert_eq!(bytes("000128", &T::Varint), [0, 128]);
        let huge = "-123456789012345678901234567890123456789012345678901234567890";
        let CqlValue::Varint(v) = value(huge, &T::Varint) else { panic!() };
        assert_eq!(v.to_string(), huge);
        assert!(matches!(fails(&"9".repeat(MAX_DIGITS + 1), &T::Varint), ValueError::Literal { .. }));
    }

    #[test]
    fn durations_in_every_format() {
        let d = |months, days, nanoseconds| CqlDuration { months, days, nanoseconds };
        let cases = [
            ("1y2mo3w4d5h6m7s8ms9us10ns", d(14, 25, 5 * 3_600_000_000_000 + 6 * 60_000_000_000 + 7_008_009_010)),
            ("1Y2MO", d(14, 0, 0)),
            ("-2d", d(0, -2, 0)),
            ("3µs", d(0, 0, 3000)),
            ("90m", d(0, 0, 5_400_000_000_000)),
            ("1h30m", d(0, 0, 5_400_000_000_000)),
            ("P1Y2M3DT4H5M6S", d(14, 3, 4 * 3_600_000_000_000 + 5 * 60_000_000_000 + 6_000_000_000)),
            ("PT5M", d(0, 0, 300_000_000_000)),
            ("P1D", d(0, 1, 0)),
            ("P2W", d(0, 14, 0)),
            ("-P1Y", d(-12, 0, 0)),
            ("P0001-02-03T04:05:06", d(14, 3, 4 * 3_600_000_000_000 + 5 * 60_000_000_000 + 6_000_000_000)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
            assert_eq!(value(text, &T::Duration), CqlValue::Duration(want), "{text}");
        }
        for bad in
            ["", "P", "PT", "P1DT", "1", "d", "1x", "P1H", "PT1D", "P1M1Y", "3000000000d", "9999999999999999999ns", "-"]
        {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
