//! CQL values for the CDC log: types from their schema text, literals to
//! serialized bytes, serialized collections taken apart and built, and
//! Cassandra's comparator on serialized values.
//!
//! Log rows carry values in the native protocol's serialized form, the form
//! bound values arrive in, so literals of a base write are serialized the
//! same way (scalars through the protocol crate's [`CqlValue`] serializer).
//! Sets and maps are written sorted by their key type's comparator and
//! without duplicates, as Cassandra stores them, so that a log value built
//! from a literal equals one built from a bound value ([`normalize`]); the
//! same comparator ([`compare`]) orders clustering keys.

use std::cmp::Ordering;
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use shardwise_protocol::codec::{self, Reader};
use shardwise_protocol::types::ser::SerializeValue;
use shardwise_protocol::types::{
    ColumnType, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint,
};
use uuid::Uuid;

use super::dml::{BindMarker, Literal, Term};

/// What can go wrong with types and values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A type's text could not be parsed or its user type resolved.
    #[error("invalid type `{text}`: {reason}")]
    Type {
        /// The type text.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A literal does not make a value of the type.
    #[error("invalid {typ} value: {reason}")]
    Literal {
        /// The type, as CQL writes it.
        typ: String,
        /// What is wrong.
        reason: String,
    },
    /// Valid CQL that is not evaluated here (most functions, bind markers
    /// inside literals given to [`literal_bytes`]).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Serialized bytes are not a valid value.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn invalid(typ: &ColumnType, reason: impl Into<String>) -> ValueError {
    ValueError::Literal { typ: typ.to_string(), reason: reason.into() }
}

fn malformed(what: &'static str) -> impl Fn(shardwise_protocol::DecodeError) -> ValueError {
    move |e| ValueError::Malformed { what, reason: e.to_string() }
}

// ---------------------------------------------------------------- types

/// Resolves a user type: (keyspace, type name) → its field names and type
/// texts, in declaration order.
pub type UdtResolver<'a> = dyn Fn(&str, &str) -> Option<Vec<(String, String)>> + 'a;

/// Supplies the value bound to a marker: serialized, `None` for null.
pub type BoundValues<'a> = dyn Fn(&BindMarker) -> Result<Option<Vec<u8>>, ValueError> + 'a;

/// The entries of a serialized map: key, value (`None` for null).
pub type MapEntries<'a> = Vec<(&'a [u8], Option<&'a [u8]>)>;

/// A parsed column type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedType {
    /// The type (`frozen` is not part of [`ColumnType`]).
    pub typ: ColumnType,
    /// `false` only for non-frozen collections and UDTs, whose values are
    /// stored as one cell per element or field (multi-cell columns).
    pub frozen: bool,
}

/// Nesting limit for types, so hostile text (or a UDT resolver that loops)
/// cannot exhaust the stack.
const MAX_TYPE_DEPTH: usize = 32;

/// Parses a type as `system_schema.columns.type` prints it (`int`,
/// `map<int, text>`, `frozen<list<frozen<set<int>>>>`, `tuple<int, text>`,
/// `vector<float, 3>`, `"MyType"`, `frozen<ut>`, `'custom.Class'`). User
/// types are resolved with `udt(keyspace, name)` → field names and type
/// texts, in declaration order; unqualified names are in `keyspace`.
pub fn parse_type(text: &str, keyspace: &str, udt: &UdtResolver<'_>) -> Result<ParsedType, ValueError> {
    TypeParser { text, pos: 0, keyspace, udt }.parse_all(0)
}

struct TypeParser<'a> {
    text: &'a str,
    pos: usize,
    keyspace: &'a str,
    udt: &'a UdtResolver<'a>,
}

enum Word {
    Plain(String),
    Quoted(String),
    Class(String),
}

impl TypeParser<'_> {
    fn error(&self, reason: &str) -> ValueError {
        ValueError::Type { text: self.text.into(), reason: format!("{reason} at offset {}", self.pos) }
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn skip_ws(&mut self) {
        self.pos = self.text.len() - self.rest().trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        let yes = self.rest().starts_with(c);
        if yes {
            self.pos += c.len_utf8();
        }
        yes
    }

    fn expect(&mut self, c: char) -> Result<(), ValueError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{c}`")))
        }
    }

    fn parse_all(&mut self, depth: usize) -> Result<ParsedType, ValueError> {
        let (typ, frozen) = self.parse(depth)?;
        self.skip_ws();
        if self.pos != self.text.len() {
            return Err(self.error("unexpected text after the type"));
        }
        Ok(ParsedType { typ, frozen })
    }

    /// An identifier, a `"quoted"` name or a `'custom class'`.
    fn word(&mut self) -> Result<Word, ValueError> {
        self.skip_ws();
        let text = self.text;
        let rest = &text[self.pos..];
        let Some(first) = rest.chars().next() else { return Err(self.error("expected a type")) };
        if first == '"' || first == '\'' {
            let mut out = String::new();
            let mut chars = rest.char_indices().skip(1).peekable();
            while let Some((i, c)) = chars.next() {
                if c != first {
                    out.push(c);
                } else if chars.peek().is_some_and(|(_, n)| *n == first) {
                    out.push(first);
                    chars.next();
                } else {
                    self.pos += i + 1;
                    return Ok(if first == '"' { Word::Quoted(out) } else { Word::Class(out) });
                }
            }
            return Err(self.error("unterminated quote"));
        }
        let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if len == 0 {
            return Err(self.error("expected a type"));
        }
        self.pos += len;
        Ok(Word::Plain(rest[..len].into()))
    }

    fn parse(&mut self, depth: usize) -> Result<(ColumnType, bool), ValueError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(self.error("type nested too deeply"));
        }
        let name = match self.word()? {
            Word::Class(class) => {
                let t = ColumnType::from_custom_class(&class).map_err(|e| self.error(&e.to_string()))?;
                return Ok((t, true));
            }
            Word::Quoted(name) => return self.user_type(None, name, depth),
            Word::Plain(name) => name.to_ascii_lowercase(),
        };
        let inner = |p: &mut Self, close: char| -> Result<Box<ColumnType>, ValueError> {
            let t = p.parse(depth + 1)?.0;
            p.expect(close)?;
            Ok(Box::new(t))
        };
        Ok(match name.as_str() {
            "frozen" => {
                self.expect('<')?;
                (*inner(self, '>')?, true)
            }
            "list" | "set" => {
                self.expect('<')?;
                let e = inner(self, '>')?;
                (if name == "list" { ColumnType::List(e) } else { ColumnType::Set(e) }, false)
            }
            "map" => {
                self.expect('<')?;
                (ColumnType::Map(inner(self, ',')?, inner(self, '>')?), false)
            }
            "tuple" => {
                self.expect('<')?;
                let mut types = vec![self.parse(depth + 1)?.0];
                while self.eat(',') {
                    types.push(self.parse(depth + 1)?.0);
                }
                self.expect('>')?;
                (ColumnType::Tuple(types), true)
            }
            "vector" => {
                self.expect('<')?;
                let e = inner(self, ',')?;
                let n = match self.word()? {
                    Word::Plain(n) => n.parse::<u32>().ok().filter(|n| *n > 0),
                    _ => None,
                };
                let n = n.ok_or_else(|| self.error("expected a positive dimension"))?;
                self.expect('>')?;
                (ColumnType::Vector(e, n), true)
            }
            _ => match native_type(&name) {
                Some(t) => (t, true),
                None if self.eat('.') => {
                    let typ = match self.word()? {
                        Word::Plain(n) => n.to_ascii_lowercase(),
                        Word::Quoted(n) => n,
                        Word::Class(_) => return Err(self.error("expected a type name")),
                    };
                    return self.user_type(Some(name), typ, depth);
                }
                None => return self.user_type(None, name, depth),
            },
        })
    }

    fn user_type(
        &mut self,
        keyspace: Option<String>,
        name: String,
        depth: usize,
    ) -> Result<(ColumnType, bool), ValueError> {
        let keyspace = keyspace.unwrap_or_else(|| self.keyspace.to_string());
        let fields =
            (self.udt)(&keyspace, &name).ok_or_else(|| self.error(&format!("unknown type {keyspace}.{name}")))?;
        let mut parsed = Vec::with_capacity(fields.len());
        for (field, text) in fields {
            let typ = TypeParser { text: &text, pos: 0, keyspace: &keyspace, udt: self.udt }.parse_all(depth + 1)?.typ;
            parsed.push((field, typ));
        }
        Ok((ColumnType::Udt { keyspace, name, fields: parsed }, false))
    }
}

fn native_type(name: &str) -> Option<ColumnType> {
    use ColumnType as T;
    Some(match name {
        "ascii" => T::Ascii,
        "bigint" => T::BigInt,
        "blob" => T::Blob,
        "boolean" => T::Boolean,
        "counter" => T::Counter,
        "date" => T::Date,
        "decimal" => T::Decimal,
        "double" => T::Double,
        "duration" => T::Duration,
        "float" => T::Float,
        "inet" => T::Inet,
        "int" => T::Int,
        "smallint" => T::SmallInt,
        "text" | "varchar" => T::Text,
        "time" => T::Time,
        "timestamp" => T::Timestamp,
        "timeuuid" => T::Timeuuid,
        "tinyint" => T::TinyInt,
        "uuid" => T::Uuid,
        "varint" => T::Varint,
        _ => return None,
    })
}

// ---------------------------------------------------------------- literals

/// Serializes a literal as a value of `typ` (`None` for `null`). Literals
/// are accepted as Cassandra accepts them: integers for integer, float,
/// decimal, timestamp, date and time types; strings for text, timestamps,
/// dates, times and addresses; `{}` for empty sets, maps and UDTs. Function
/// calls `now()`, `currentTimeUUID()`, `uuid()`, `currentTimestamp()`,
/// `currentDate()`, `currentTime()`, `toTimestamp(now())`, `toDate(now())`
/// and `toUnixTimestamp(now())` are evaluated here, to fresh values (a front
/// must substitute them into the base write too for the log to match).
/// Bind markers inside the literal are [`ValueError::Unsupported`]: see
/// [`term_bytes`].
pub fn literal_bytes(lit: &Literal, typ: &ColumnType) -> Result<Option<Vec<u8>>, ValueError> {
    literal(lit, typ, &|_| Err(ValueError::Unsupported("a bind marker inside a literal".into())))
}

/// Serializes a term as a value of `typ`, taking the values of bind
/// markers (also those nested in literals) from `bound` (serialized, `None`
/// for null); bound sets and maps are [normalized](normalize).
pub fn term_bytes(term: &Term, typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Option<Vec<u8>>, ValueError> {
    match term {
        Term::Bind(m) => bound(m)?.map(|b| normalize(typ, &b)).transpose(),
        Term::Literal(lit) => literal(lit, typ, bound),
    }
}

fn describe(lit: &Literal) -> &'static str {
    match lit {
        Literal::Null => "null",
        Literal::Bool(_) => "a boolean",
        Literal::Integer(_) => "an integer",
        Literal::Float(_) => "a float",
        Literal::String(_) => "a string",
        Literal::Uuid(_) => "a UUID",
        Literal::Blob(_) => "a blob",
        Literal::Duration(_) => "a duration",
        Literal::List(_) => "a list",
        Literal::Set(_) => "a set",
        Literal::Map(_) => "a map",
        Literal::Udt(_) => "a UDT literal",
        Literal::Tuple(_) => "a tuple",
        Literal::Function { .. } => "a function call",
    }
}

fn literal(lit: &Literal, typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Option<Vec<u8>>, ValueError> {
    use ColumnType as T;
    use Literal as L;
    let number = |s: &str| -> Result<i128, ValueError> {
        s.parse::<i128>().map_err(|_| invalid(typ, format!("{s} is out of range")))
    };
    let fit = |s: &str, min: i128, max: i128| -> Result<i128, ValueError> {
        number(s).and_then(|n| {
            if (min..=max).contains(&n) {
                Ok(n)
            } else {
                Err(invalid(typ, format!("{s} is out of range")))
            }
        })
    };
    let value = match (lit, typ) {
        (L::Null, _) => return Ok(None),
        (L::Function { name, args }, _) => return function(name, args, typ).map(Some),
        (L::String(s), T::Ascii) if !s.is_ascii() => return Err(invalid(typ, "non-ASCII characters")),
        (L::String(s), T::Ascii) => CqlValue::Ascii(s.clone()),
        (L::String(s), T::Text) => CqlValue::Text(s.clone()),
        (L::Integer(s), T::BigInt) => CqlValue::BigInt(fit(s, i64::MIN.into(), i64::MAX.into())? as i64),
        (L::Integer(s), T::Counter) => CqlValue::Counter(fit(s, i64::MIN.into(), i64::MAX.into())? as i64),
        (L::Integer(s), T::Int) => CqlValue::Int(fit(s, i32::MIN.into(), i32::MAX.into())? as i32),
        (L::Integer(s), T::SmallInt) => CqlValue::SmallInt(fit(s, i16::MIN.into(), i16::MAX.into())? as i16),
        (L::Integer(s), T::TinyInt) => CqlValue::TinyInt(fit(s, i8::MIN.into(), i8::MAX.into())? as i8),
        (L::Integer(s), T::Varint) => {
            CqlValue::Varint(parse_varint(s).ok_or_else(|| invalid(typ, format!("{s} is not an integer")))?)
        }
        (L::Integer(s) | L::Float(s), T::Decimal) => {
            CqlValue::Decimal(parse_decimal(s).ok_or_else(|| invalid(typ, format!("{s} is not a decimal number")))?)
        }
        (L::Integer(s) | L::Float(s), T::Double) => {
            CqlValue::Double(s.parse().map_err(|_| invalid(typ, format!("{s} is not a number")))?)
        }
        (L::Integer(s) | L::Float(s), T::Float) => {
            CqlValue::Float(s.parse().map_err(|_| invalid(typ, format!("{s} is not a number")))?)
        }
        (L::Bool(b), T::Boolean) => CqlValue::Boolean(*b),
        (L::Uuid(s), T::Uuid | T::Timeuuid) => {
            let u = Uuid::parse_str(s).map_err(|e| invalid(typ, e.to_string()))?;
            if *typ == T::Timeuuid {
                CqlValue::Timeuuid(u)
            } else {
                CqlValue::Uuid(u)
            }
        }
        (L::Integer(s), T::Timestamp) => {
            CqlValue::Timestamp(CqlTimestamp(fit(s, i64::MIN.into(), i64::MAX.into())? as i64))
        }
        (L::String(s), T::Timestamp) => CqlValue::Timestamp(CqlTimestamp(
            parse_timestamp(s).ok_or_else(|| invalid(typ, format!("unable to parse '{s}'")))?,
        )),
        (L::Integer(s), T::Date) => CqlValue::Date(CqlDate(fit(s, 0, u32::MAX.into())? as u32)),
        (L::String(s), T::Date) => {
            CqlValue::Date(parse_date(s).ok_or_else(|| invalid(typ, format!("unable to parse '{s}'")))?)
        }
        (L::Integer(s), T::Time) => CqlValue::Time(CqlTime(fit(s, 0, (CqlTime::NANOS_PER_DAY - 1).into())? as i64)),
        (L::String(s), T::Time) => {
            CqlValue::Time(parse_time(s).ok_or_else(|| invalid(typ, format!("unable to parse '{s}'")))?)
        }
        (L::String(s), T::Inet) => {
            CqlValue::Inet(s.parse::<IpAddr>().map_err(|_| invalid(typ, format!("'{s}' is not an address")))?)
        }
        (L::Blob(b), T::Blob | T::Custom(_)) => return Ok(Some(b.clone())),
        (L::Duration(s), T::Duration) => CqlValue::Duration(parse_duration(s).map_err(|e| invalid(typ, e))?),
        (L::List(items), T::List(e)) => {
            return Ok(Some(build_collection(elements(items, e, bound)?.iter().map(|v| &v[..]))))
        }
        (L::Set(items), T::Set(e)) => return Ok(Some(build_set(e, elements(items, e, bound)?.iter().map(|v| &v[..])))),
        (L::Map(entries), T::Set(_)) if entries.is_empty() => return Ok(Some(build_collection([]))),
        (L::Map(entries), T::Map(kt, vt)) => {
            let mut pairs = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                pairs.push((element(k, kt, bound)?, element(v, vt, bound)?));
            }
            return Ok(Some(build_sorted_map(kt, pairs.iter().map(|(k, v)| (&k[..], &v[..])))));
        }
        (L::Map(entries), T::Udt { fields, .. }) if entries.is_empty() => {
            return Ok(Some(build_udt(&vec![None; fields.len()])))
        }
        (L::Udt(given), T::Udt { fields, .. }) => {
            for (i, (name, _)) in given.iter().enumerate() {
                if !fields.iter().any(|(f, _)| f == name) {
                    return Err(invalid(typ, format!("unknown field {name}")));
                }
                if given[..i].iter().any(|(n, _)| n == name) {
                    return Err(invalid(typ, format!("field {name} given twice")));
                }
            }
            let mut values = Vec::with_capacity(fields.len());
            for (name, ft) in fields {
                values.push(match given.iter().find(|(n, _)| n == name) {
                    Some((_, t)) => term_bytes(t, ft, bound)?,
                    None => None,
                });
            }
            return Ok(Some(build_udt(&values.iter().map(Option::as_deref).collect::<Vec<_>>())));
        }
        (L::Tuple(items), T::Tuple(types)) => {
            if items.len() > types.len() {
                return Err(invalid(typ, format!("{} elements for {} components", items.len(), types.len())));
            }
            let mut out = Vec::new();
            for (t, ct) in items.iter().zip(types) {
                codec::put_bytes(&mut out, term_bytes(t, ct, bound)?.as_deref());
            }
            return Ok(Some(out));
        }
        (L::List(items), T::Vector(e, n)) => {
            if items.len() != *n as usize {
                return Err(invalid(typ, format!("{} elements for dimension {n}", items.len())));
            }
            let mut out = Vec::new();
            for v in elements(items, e, bound)? {
                match e.fixed_size() {
                    Some(size) if v.len() != size => return Err(invalid(typ, format!("element of {} bytes", v.len()))),
                    Some(_) => {}
                    None => codec::put_unsigned_vint(&mut out, v.len() as u64),
                }
                out.extend_from_slice(&v);
            }
            return Ok(Some(out));
        }
        _ => return Err(invalid(typ, format!("{} is not a {typ} literal", describe(lit)))),
    };
    cql_bytes(&value, typ).map(Some)
}

/// A non-null element of a collection.
fn element(t: &Term, typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Vec<u8>, ValueError> {
    term_bytes(t, typ, bound)?.ok_or_else(|| invalid(typ, "null is not supported inside collections"))
}

fn elements(items: &[Term], typ: &ColumnType, bound: &BoundValues<'_>) -> Result<Vec<Vec<u8>>, ValueError> {
    items.iter().map(|t| element(t, typ, bound)).collect()
}

/// The serialized value (without its length) through the protocol crate.
fn cql_bytes(v: &CqlValue, typ: &ColumnType) -> Result<Vec<u8>, ValueError> {
    let bad = |e: shardwise_protocol::EncodeError| invalid(typ, e.to_string());
    v.check_type(typ).map_err(bad)?;
    let mut out = Vec::with_capacity(v.encoded_len().map_err(bad)?);
    v.encode(&mut out);
    out.drain(..4.min(out.len()));
    Ok(out)
}

fn function(name: &str, args: &[Term], typ: &ColumnType) -> Result<Vec<u8>, ValueError> {
    let short = |n: &str| n.strip_prefix("system.").unwrap_or(n).to_string();
    let is_now = |t: &Term| {
        matches!(t, Term::Literal(Literal::Function { name, args })
            if args.is_empty() && matches!(short(name).as_str(), "now" | "currenttimeuuid"))
    };
    let micros = now_micros();
    let ms = micros.div_euclid(1000);
    let name = short(name);
    let value = match (name.as_str(), args) {
        ("now" | "currenttimeuuid", []) => CqlValue::Timeuuid(Uuid::from_bytes(timeuuid_from_micros(micros, random()))),
        ("uuid", []) => {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&random().to_be_bytes());
            b[8..].copy_from_slice(&random().to_be_bytes());
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            CqlValue::Uuid(Uuid::from_bytes(b))
        }
        ("currenttimestamp", []) => CqlValue::Timestamp(CqlTimestamp(ms)),
        ("totimestamp", [a]) if is_now(a) => CqlValue::Timestamp(CqlTimestamp(ms)),
        ("tounixtimestamp", [a]) if is_now(a) => CqlValue::BigInt(ms),
        ("currentdate", []) => CqlValue::Date(CqlDate::from_days_since_epoch(ms.div_euclid(86_400_000) as i32)),
        ("todate", [a]) if is_now(a) => {
            CqlValue::Date(CqlDate::from_days_since_epoch(ms.div_euclid(86_400_000) as i32))
        }
        ("currenttime", []) => CqlValue::Time(CqlTime(micros.rem_euclid(86_400_000_000) * 1000)),
        _ => return Err(ValueError::Unsupported(format!("function {name}()"))),
    };
    cql_bytes(&value, typ)
}

fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

fn random() -> u64 {
    crate::generation::random_source()()
}

// ---------------------------------------------------------------- text forms

/// Digits accepted in a varint or decimal literal (the conversion is
/// quadratic).
const MAX_DIGITS: usize = 4096;

/// A decimal integer (`-123`, huge allowed) as a varint.
fn parse_varint(s: &str) -> Option<CqlVarint> {
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
fn parse_decimal(s: &str) -> Option<CqlDecimal> {
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
fn parse_date(s: &str) -> Option<CqlDate> {
    if is_integer(s) {
        return s.parse::<u32>().ok().map(CqlDate);
    }
    let mut c = Cursor { s: s.as_bytes(), i: 0 };
    let d = ymd(&mut c)?;
    c.done().then_some(d)
}

/// A `time` string: `hh:mm:ss[.fffffffff]`, or nanoseconds.
fn parse_time(s: &str) -> Option<CqlTime> {
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

// ---------------------------------------------------------------- collections

/// The elements of a serialized list, set (or IN list): `[int]` count, then
/// `[bytes]` each; `None` for a null (only lists of old protocols have them).
pub fn collection_elements(bytes: &[u8]) -> Result<Vec<Option<&[u8]>>, ValueError> {
    const WHAT: &str = "collection";
    let mut r = Reader::new(bytes);
    let n = r.len_i32(WHAT).map_err(malformed(WHAT))?;
    let mut out = Vec::with_capacity(n.min(r.remaining() / 4));
    for _ in 0..n {
        out.push(r.bytes(WHAT).map_err(malformed(WHAT))?);
    }
    r.finish(WHAT).map_err(malformed(WHAT))?;
    Ok(out)
}

/// The entries of a serialized map; keys are never null.
pub fn collection_entries(bytes: &[u8]) -> Result<MapEntries<'_>, ValueError> {
    const WHAT: &str = "map";
    let mut r = Reader::new(bytes);
    let n = r.len_i32(WHAT).map_err(malformed(WHAT))?;
    let mut out = Vec::with_capacity(n.min(r.remaining() / 8));
    for _ in 0..n {
        let key = r
            .bytes(WHAT)
            .map_err(malformed(WHAT))?
            .ok_or_else(|| ValueError::Malformed { what: WHAT, reason: "null key".into() })?;
        out.push((key, r.bytes(WHAT).map_err(malformed(WHAT))?));
    }
    r.finish(WHAT).map_err(malformed(WHAT))?;
    Ok(out)
}

/// Serializes a list or set from its elements, in the order given.
pub fn build_collection<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![0; 4];
    let mut n: i32 = 0;
    for e in elements {
        codec::put_bytes(&mut out, Some(e));
        n += 1;
    }
    out[..4].copy_from_slice(&n.to_be_bytes());
    out
}

/// Serializes a map from its entries, in the order given.
pub fn build_map<'a>(entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = vec![0; 4];
    let mut n: i32 = 0;
    for (k, v) in entries {
        codec::put_bytes(&mut out, Some(k));
        codec::put_bytes(&mut out, Some(v));
        n += 1;
    }
    out[..4].copy_from_slice(&n.to_be_bytes());
    out
}

/// Serializes a set as Cassandra stores it: elements sorted by `elem`'s
/// comparator, duplicates (equal by it) dropped, the first kept.
pub fn build_set<'a>(elem: &ColumnType, elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut v: Vec<&[u8]> = elements.into_iter().collect();
    v.sort_by(|a, b| compare(elem, a, b));
    v.dedup_by(|b, a| compare(elem, a, b) == Ordering::Equal);
    build_collection(v)
}

/// Serializes a map as Cassandra stores it: entries sorted by `key`'s
/// comparator; of entries with equal keys the last one given wins.
pub fn build_sorted_map<'a>(key: &ColumnType, entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut v: Vec<(&[u8], &[u8])> = entries.into_iter().collect();
    v.sort_by(|a, b| compare(key, a.0, b.0));
    let mut out: Vec<(&[u8], &[u8])> = Vec::with_capacity(v.len());
    for e in v {
        match out.last_mut() {
            Some(last) if compare(key, last.0, e.0) == Ordering::Equal => *last = e,
            _ => out.push(e),
        }
    }
    build_map(out)
}

/// The fields of a serialized UDT (or tuple) of `n` fields: missing
/// trailing fields are `None`, like null ones.
pub fn udt_fields(bytes: &[u8], n: usize) -> Result<Vec<Option<&[u8]>>, ValueError> {
    const WHAT: &str = "user type value";
    let mut r = Reader::new(bytes);
    let mut out = Vec::with_capacity(n);
    while !r.is_empty() {
        if out.len() == n {
            return Err(ValueError::Malformed { what: WHAT, reason: format!("more than {n} fields") });
        }
        out.push(r.bytes(WHAT).map_err(malformed(WHAT))?);
    }
    out.resize(n, None);
    Ok(out)
}

/// Serializes a UDT (or tuple) value: every field, nulls as length −1.
pub fn build_udt(fields: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        codec::put_bytes(&mut out, *f);
    }
    out
}

/// Puts a serialized value in the form Cassandra stores: sets sorted and
/// de-duplicated, maps sorted by key (last duplicate wins), recursively
/// inside lists, maps, tuples and UDTs. Other values are returned as they
/// are.
pub fn normalize(typ: &ColumnType, bytes: &[u8]) -> Result<Vec<u8>, ValueError> {
    fn non_null<'b>(typ: &ColumnType, e: Option<&'b [u8]>) -> Result<&'b [u8], ValueError> {
        e.ok_or_else(|| invalid(typ, "null is not supported inside collections"))
    }
    match typ {
        ColumnType::List(e) | ColumnType::Set(e) => {
            let mut v = Vec::new();
            for x in collection_elements(bytes)? {
                v.push(normalize(e, non_null(typ, x)?)?);
            }
            let items = v.iter().map(|x| &x[..]);
            Ok(if matches!(typ, ColumnType::Set(_)) { build_set(e, items) } else { build_collection(items) })
        }
        ColumnType::Map(kt, vt) => {
            let mut v = Vec::new();
            for (k, x) in collection_entries(bytes)? {
                v.push((normalize(kt, k)?, normalize(vt, non_null(typ, x)?)?));
            }
            Ok(build_sorted_map(kt, v.iter().map(|(k, x)| (&k[..], &x[..]))))
        }
        ColumnType::Tuple(_) | ColumnType::Udt { .. } => {
            let types: Vec<&ColumnType> = match typ {
                ColumnType::Tuple(ts) => ts.iter().collect(),
                ColumnType::Udt { fields, .. } => fields.iter().map(|(_, t)| t).collect(),
                _ => Vec::new(),
            };
            let given = udt_fields(bytes, types.len())?;
            let given = &given[..read_field_count(bytes)];
            let mut v = Vec::with_capacity(given.len());
            for (f, t) in given.iter().zip(types) {
                v.push(f.map(|f| normalize(t, f)).transpose()?);
            }
            Ok(build_udt(&v.iter().map(Option::as_deref).collect::<Vec<_>>()))
        }
        _ => Ok(bytes.to_vec()),
    }
}

/// How many `[bytes]` fields a tuple or UDT value holds (no more fields are
/// invented by [`normalize`]).
fn read_field_count(bytes: &[u8]) -> usize {
    let mut r = Reader::new(bytes);
    let mut n = 0;
    while !r.is_empty() && r.bytes("field").is_ok() {
        n += 1;
    }
    n
}

// ---------------------------------------------------------------- comparator

/// Cassandra's comparator on serialized values of `typ`: signed integers,
/// bytewise text, blobs, addresses and booleans, `Double.compare` order for
/// floats (−0 < 0, NaN last), UUIDs as `UUIDType` (version, then time for
/// version 1, then bytes unsigned) and timeuuids as `TimeUUIDType` (time,
/// then the low 8 bytes as signed bytes), biased dates unsigned, varints and
/// decimals numerically, collections, tuples, UDTs and vectors element-wise
/// (then by size). Empty values sort first. Malformed values compare
/// bytewise (never a panic).
pub fn compare(typ: &ColumnType, a: &[u8], b: &[u8]) -> Ordering {
    if a.is_empty() || b.is_empty() {
        return a.len().cmp(&b.len());
    }
    typed_cmp(typ, a, b).unwrap_or_else(|| a.cmp(b))
}

/// [`compare`] for non-empty values; `None` if one is malformed.
fn typed_cmp(typ: &ColumnType, a: &[u8], b: &[u8]) -> Option<Ordering> {
    use ColumnType as T;
    Some(match typ {
        T::TinyInt | T::SmallInt | T::Int | T::BigInt | T::Counter | T::Timestamp | T::Time | T::Varint => {
            varint_cmp(a, b)
        }
        T::Double => java_cmp(f64::from_be_bytes(a.try_into().ok()?), f64::from_be_bytes(b.try_into().ok()?)),
        T::Float => {
            java_cmp(f32::from_be_bytes(a.try_into().ok()?).into(), f32::from_be_bytes(b.try_into().ok()?).into())
        }
        T::Uuid | T::Timeuuid => uuid_cmp(a.try_into().ok()?, b.try_into().ok()?, *typ == T::Timeuuid),
        T::Decimal => decimal_key(a)?.cmp_with(&decimal_key(b)?),
        T::List(e) | T::Set(e) => {
            let (x, y) = (collection_elements(a).ok()?, collection_elements(b).ok()?);
            let pairs = x.iter().zip(&y).map(|(p, q)| option_cmp(e, *p, *q));
            pairs.fold(Ordering::Equal, Ordering::then).then(x.len().cmp(&y.len()))
        }
        T::Map(kt, vt) => {
            let (x, y) = (collection_entries(a).ok()?, collection_entries(b).ok()?);
            let pairs = x.iter().zip(&y).map(|(p, q)| compare(kt, p.0, q.0).then_with(|| option_cmp(vt, p.1, q.1)));
            pairs.fold(Ordering::Equal, Ordering::then).then(x.len().cmp(&y.len()))
        }
        T::Tuple(ts) => fields_cmp(a, b, |i| ts.get(i))?,
        T::Udt { fields, .. } => fields_cmp(a, b, |i| fields.get(i).map(|(_, t)| t))?,
        T::Vector(e, n) => {
            let (x, y) = (vector_elements(e, *n, a)?, vector_elements(e, *n, b)?);
            x.iter().zip(&y).map(|(p, q)| compare(e, p, q)).fold(Ordering::Equal, Ordering::then)
        }
        // Bytewise: text, ascii, blob, inet, boolean, date (biased), duration, custom.
        _ => a.cmp(b),
    })
}

fn option_cmp(typ: &ColumnType, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => compare(typ, a, b),
        _ => a.is_some().cmp(&b.is_some()),
    }
}

/// Two's-complement big-endian integers of any length.
fn varint_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let negative = |x: &[u8]| x[0] & 0x80 != 0;
    fn trim(mut x: &[u8]) -> &[u8] {
        while x.len() > 1 && ((x[0] == 0 && x[1] & 0x80 == 0) || (x[0] == 0xff && x[1] & 0x80 != 0)) {
            x = &x[1..];
        }
        x
    }
    match (negative(a), negative(b)) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (neg, _) => {
            let (a, b) = (trim(a), trim(b));
            match a.len().cmp(&b.len()) {
                Ordering::Equal => a.cmp(b),
                longer if neg => longer.reverse(),
                longer => longer,
            }
        }
    }
}

/// Java's `Double.compare`: numeric, then −0 < 0 and NaN above everything.
fn java_cmp(a: f64, b: f64) -> Ordering {
    let bits = |v: f64| if v.is_nan() { 0x7ff8_0000_0000_0000_i64 } else { v.to_bits() as i64 };
    a.partial_cmp(&b).filter(|o| o.is_ne()).unwrap_or_else(|| bits(a).cmp(&bits(b)))
}

fn uuid_cmp(a: [u8; 16], b: [u8; 16], time_uuid: bool) -> Ordering {
    let halves = |u: [u8; 16]| (u128::from_be_bytes(u) >> 64) as u64;
    let (am, bm) = (halves(a), halves(b));
    let (al, bl) = (u128::from_be_bytes(a) as u64, u128::from_be_bytes(b) as u64);
    // time_hi, time_mid, time_low: the 60-bit timestamp (version on top).
    let time = |m: u64| ((m << 48) | ((m << 16) & 0xFFFF_0000_0000) | (m >> 32)) as i64;
    let version = |m: u64| (m >> 12) & 0xf;
    if time_uuid {
        let signed_bytes = |l: u64| (l ^ 0x0080_8080_8080_8080) as i64;
        return time(am).cmp(&time(bm)).then(signed_bytes(al).cmp(&signed_bytes(bl)));
    }
    let high = match version(am).cmp(&version(bm)) {
        Ordering::Equal if version(am) == 1 => time(am).cmp(&time(bm)),
        Ordering::Equal => am.cmp(&bm),
        other => other,
    };
    high.then(al.cmp(&bl))
}

/// A decimal as sign, exponent and significant digits: the value is
/// `sign × 0.digits × 10^exponent` (digits without trailing zeros).
struct DecimalKey {
    sign: i8,
    exponent: i64,
    digits: String,
}

impl DecimalKey {
    fn cmp_with(&self, other: &DecimalKey) -> Ordering {
        let magnitude = || (self.exponent, &self.digits).cmp(&(other.exponent, &other.digits));
        match self.sign.cmp(&other.sign) {
            Ordering::Equal if self.sign == 0 => Ordering::Equal,
            Ordering::Equal if self.sign < 0 => magnitude().reverse(),
            Ordering::Equal => magnitude(),
            other => other,
        }
    }
}

fn decimal_key(b: &[u8]) -> Option<DecimalKey> {
    let scale = i32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    let unscaled = b.get(4..).filter(|u| !u.is_empty())?;
    let text = CqlVarint::from_signed_bytes_be_slice(unscaled).to_string();
    let (negative, all) = text.strip_prefix('-').map_or((false, text.as_str()), |d| (true, d));
    let digits = all.trim_end_matches('0');
    if digits.is_empty() {
        return Some(DecimalKey { sign: 0, exponent: 0, digits: String::new() });
    }
    Some(DecimalKey {
        sign: if negative { -1 } else { 1 },
        exponent: all.len() as i64 - i64::from(scale),
        digits: digits.to_string(),
    })
}

/// Tuples and UDTs: field by field, null first; a value with fewer fields
/// sorts first.
fn fields_cmp<'t>(a: &[u8], b: &[u8], types: impl Fn(usize) -> Option<&'t ColumnType>) -> Option<Ordering> {
    let (mut x, mut y) = (Reader::new(a), Reader::new(b));
    let mut i = 0;
    while !x.is_empty() && !y.is_empty() {
        let (p, q) = (x.bytes("field").ok()?, y.bytes("field").ok()?);
        let o = match types(i) {
            Some(t) => option_cmp(t, p, q),
            None => p.cmp(&q),
        };
        if o.is_ne() {
            return Some(o);
        }
        i += 1;
    }
    Some(y.is_empty().cmp(&x.is_empty()))
}

/// The elements of a serialized vector (fixed-size ones without lengths,
/// others with an unsigned vint length).
fn vector_elements<'a>(elem: &ColumnType, n: u32, bytes: &'a [u8]) -> Option<Vec<&'a [u8]>> {
    if let Some(size) = elem.fixed_size() {
        return (size > 0 && Some(bytes.len()) == size.checked_mul(n as usize)).then(|| bytes.chunks(size).collect());
    }
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    for _ in 0..n {
        let len = usize::try_from(r.unsigned_vint("vector element").ok()?).ok()?;
        out.push(r.take(len, "vector element").ok()?);
    }
    r.is_empty().then_some(out)
}

// ---------------------------------------------------------------- timeuuids

/// The offset of UUID time (100 ns since 1582-10-15) from the Unix epoch.
const UUID_EPOCH_OFFSET: i64 = 0x01B2_1DD2_1381_4000;

/// A version-1 UUID whose 60-bit timestamp is `micros × 10 +
/// 0x01B21DD213814000` (so the exact microsecond can be read back), with
/// clock sequence and node from `random` and the variant bits `10`, as
/// Scylla builds `cdc$time` (`docs/cdc-log.md` §3.2). The timestamp wraps
/// outside years 1582–5236.
pub fn timeuuid_from_micros(micros: i64, random: u64) -> [u8; 16] {
    let t = (i128::from(micros) * 10 + i128::from(UUID_EPOCH_OFFSET)) as u64 & 0x0FFF_FFFF_FFFF_FFFF;
    let msb = (t << 32) | ((t >> 16) & 0xFFFF_0000) | 0x1000 | (t >> 48);
    let lsb = (random & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    ((u128::from(msb) << 64) | u128::from(lsb)).to_be_bytes()
}

/// The microseconds since the Unix epoch of a version-1 UUID's timestamp
/// (rounded down to a microsecond).
pub fn micros_of_timeuuid(uuid: &[u8; 16]) -> i64 {
    let msb = (u128::from_be_bytes(*uuid) >> 64) as u64;
    let t = ((msb & 0x0FFF) << 48) | ((msb >> 16) & 0xFFFF) << 32 | (msb >> 32);
    (t as i64 - UUID_EPOCH_OFFSET).div_euclid(10)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashMap;

    use bytes::Bytes;
    use shardwise_protocol::types::de::{DeserializeValue, FrameSlice};
    use shardwise_protocol::types::CqlVector;

    use super::super::dml::{parse, Statement};
    use super::*;
    use ColumnType as T;

    fn udts() -> HashMap<(&'static str, &'static str), Vec<(String, String)>> {
        let f = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        HashMap::from([
            (("ks", "ut"), f(&[("a", "int"), ("b", "text")])),
            (("ks", "MyType"), f(&[("x", "frozen<ut>"), ("Y", "list<int>")])),
            (("other", "loop"), f(&[("me", "loop")])),
        ])
    }

    fn ty(text: &str) -> ParsedType {
        let u = udts();
        parse_type(text, "ks", &|k, n| u.get(&(k, n)).cloned()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn ut() -> ColumnType {
        ty("ut").typ
    }

    /// The literal of `INSERT INTO t (c) VALUES (<text>)`.
    fn lit(text: &str) -> Literal {
        match parse(&format!("INSERT INTO t (c) VALUES ({text})")) {
            Ok(Statement::Insert(mut i)) => match i.values.remove(0) {
                Term::Literal(l) => l,
                other => panic!("{other:?}"),
            },
            other => panic!("{text}: {other:?}"),
        }
    }

    fn bytes(text: &str, typ: &ColumnType) -> Vec<u8> {
        literal_bytes(&lit(text), typ).unwrap_or_else(|e| panic!("{text} as {typ}: {e}")).unwrap()
    }

    fn decode(typ: &ColumnType, b: &[u8]) -> CqlValue {
        let frame = Bytes::copy_from_slice(b);
        CqlValue::deserialize(typ, Some(FrameSlice::whole(&frame))).unwrap_or_else(|e| panic!("{typ}: {e}"))
    }

    /// The literal serialized for `typ`, decoded by the protocol crate.
    fn value(text: &str, typ: &ColumnType) -> CqlValue {
        decode(typ, &bytes(text, typ))
    }

    fn fails(text: &str, typ: &ColumnType) -> ValueError {
        literal_bytes(&lit(text), typ).expect_err(text)
    }

    fn ser(v: &CqlValue) -> Vec<u8> {
        cql_bytes(v, &T::Blob).unwrap_or_else(|_| {
            let mut out = Vec::new();
            v.encode(&mut out);
            out.split_off(4)
        })
    }

    #[test]
    fn types_from_schema_text() {
        let cases: Vec<(&str, ColumnType, bool)> = vec![
            ("int", T::Int, true),
            ("varchar", T::Text, true),
            ("TEXT", T::Text, true),
            ("duration", T::Duration, true),
            ("map<int, text>", T::Map(Box::new(T::Int), Box::new(T::Text)), false),
            ("set<frozen<list<int>>>", T::Set(Box::new(T::List(Box::new(T::Int)))), false),
            ("frozen<list<frozen<set<int>>>>", T::List(Box::new(T::Set(Box::new(T::Int)))), true),
            (
                "tuple<int, text, frozen<map<uuid, blob>>>",
                T::Tuple(vec![T::Int, T::Text, T::Map(Box::new(T::Uuid), Box::new(T::Blob))]),
                true,
            ),
            ("frozen<tuple<int>>", T::Tuple(vec![T::Int]), true),
            ("vector<float, 3>", T::Vector(Box::new(T::Float), 3), true),
            ("'org.apache.cassandra.db.marshal.DurationType'", T::Duration, true),
            ("'com.example.Custom'", T::Custom("com.example.Custom".into()), true),
        ];
        for (text, typ, frozen) in cases {
            assert_eq!(ty(text), ParsedType { typ, frozen }, "{text}");
        }
        let ut = T::Udt {
            keyspace: "ks".into(),
            name: "ut".into(),
            fields: vec![("a".into(), T::Int), ("b".into(), T::Text)],
        };
        assert_eq!(ty("ut"), ParsedType { typ: ut.clone(), frozen: false });
        assert_eq!(ty("frozen<ut>"), ParsedType { typ: ut.clone(), frozen: true });
        assert_eq!(ty("ks.ut").typ, ut);
        let my = ty("\"MyType\"");
        assert!(!my.frozen);
        assert_eq!(
            my.typ,
            T::Udt {
                keyspace: "ks".into(),
                name: "MyType".into(),
                fields: vec![("x".into(), ut.clone()), ("Y".into(), T::List(Box::new(T::Int)))]
            }
        );
        assert_eq!(ty("map<int, frozen<\"MyType\">>").typ, T::Map(Box::new(T::Int), Box::new(my.typ)));
        let u = udts();
        let resolve = |k: &str, n: &str| u.get(&(k, n)).cloned();
        for bad in ["", "int int", "list<int", "map<int>", "vector<float, 0>", "vector<float, x>", "nope", "\"MyType",
                    "frozen<>", "other.loop", "list<frozen<list<frozen<list<frozen<list<frozen<list<frozen<list<frozen<list<\
                     frozen<list<frozen<list<frozen<list<frozen<list<frozen<list<frozen<list<frozen<list<frozen<list<frozen<list<\
                     frozen<list<int>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>"] {
            assert!(matches!(parse_type(bad, "ks", &resolve), Err(ValueError::Type { .. })), "{bad}");
        }
    }

    #[test]
    fn scalar_literals_round_trip_through_the_protocol_crate() {
        let uuid = Uuid::parse_str("123e4567-e89b-12d3-a456-426614174000").unwrap();
        let v1 = Uuid::parse_str("b223c55e-6d07-11ea-7654-24e4fb3f20b9").unwrap();
        let cases: Vec<(&str, ColumnType, CqlValue)> = vec![
            ("'abc'", T::Ascii, CqlValue::Ascii("abc".into())),
            ("'héllo ''✓'''", T::Text, CqlValue::Text("héllo '✓'".into())),
            ("$$x$$", T::Text, CqlValue::Text("x".into())),
            ("-9223372036854775808", T::BigInt, CqlValue::BigInt(i64::MIN)),
            ("42", T::Counter, CqlValue::Counter(42)),
            ("-2147483648", T::Int, CqlValue::Int(i32::MIN)),
            ("32767", T::SmallInt, CqlValue::SmallInt(32767)),
            ("-128", T::TinyInt, CqlValue::TinyInt(-128)),
            ("1.5", T::Double, CqlValue::Double(1.5)),
            ("7", T::Double, CqlValue::Double(7.0)),
            ("-2.5e-3", T::Float, CqlValue::Float(-2.5e-3)),
            ("Infinity", T::Double, CqlValue::Double(f64::INFINITY)),
            ("-Infinity", T::Float, CqlValue::Float(f32::NEG_INFINITY)),
            ("NaN", T::Double, CqlValue::Double(f64::NAN)),
            ("true", T::Boolean, CqlValue::Boolean(true)),
            ("123e4567-e89b-12d3-a456-426614174000", T::Uuid, CqlValue::Uuid(uuid)),
            ("b223c55e-6d07-11ea-7654-24e4fb3f20b9", T::Timeuuid, CqlValue::Timeuuid(v1)),
            ("1299038700000", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_299_038_700_000))),
            ("'2011-02-03 04:05+0000'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_296_705_900_000))),
            ("'2011-02-03T04:05:00.000Z'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_296_705_900_000))),
            (
                "'2011-02-03T04:05:06.789+01:00'",
                T::Timestamp,
                CqlValue::Timestamp(CqlTimestamp(1_296_705_906_789 - 3_600_000)),
            ),
            (
                "'2011-02-03 04:05:06 -0130'",
                T::Timestamp,
                CqlValue::Timestamp(CqlTimestamp(1_296_705_906_000 + 5_400_000)),
            ),
            ("'2011-02-03'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_296_691_200_000))),
            ("'1969-12-31 23:59:59.999 UTC'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(-1))),
            ("'1299038700000'", T::Timestamp, CqlValue::Timestamp(CqlTimestamp(1_299_038_700_000))),
            ("'1970-01-01'", T::Date, CqlValue::Date(CqlDate::EPOCH)),
            ("'2024-02-29'", T::Date, CqlValue::Date(CqlDate::from_ymd(2024, 2, 29).unwrap())),
            ("'-0044-03-15'", T::Date, CqlValue::Date(CqlDate::from_ymd(-44, 3, 15).unwrap())),
            ("2147483648", T::Date, CqlValue::Date(CqlDate::EPOCH)),
            ("'13:05:09.123456789'", T::Time, CqlValue::Time(CqlTime::from_hms_nano(13, 5, 9, 123_456_789).unwrap())),
            ("'08:12:54.1'", T::Time, CqlValue::Time(CqlTime::from_hms_nano(8, 12, 54, 100_000_000).unwrap())),
            ("'00:00:01'", T::Time, CqlValue::Time(CqlTime(1_000_000_000))),
            ("86399999999999", T::Time, CqlValue::Time(CqlTime(86_399_999_999_999))),
            ("'192.168.0.1'", T::Inet, CqlValue::Inet("192.168.0.1".parse().unwrap())),
            ("'2001:db8::1'", T::Inet, CqlValue::Inet("2001:db8::1".parse().unwrap())),
            ("0xcafe", T::Blob, CqlValue::Blob(vec![0xca, 0xfe])),
            ("0x", T::Blob, CqlValue::Blob(vec![])),
            ("0x01", T::Custom("x.Y".into()), CqlValue::Custom(vec![1])),
            (
                "-12345678901234567890123456789",
                T::Varint,
                CqlValue::Varint(CqlVarint::from(-12_345_678_901_234_567_890_123_456_789_i128)),
            ),
            ("-12.345e3", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(-12345), scale: 0 })),
            ("0.001", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(1), scale: 3 })),
            ("1e3", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(1), scale: -3 })),
            ("1.50", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(150), scale: 2 })),
            ("7", T::Decimal, CqlValue::Decimal(CqlDecimal { unscaled: CqlVarint::from(7), scale: 0 })),
        ];
        for (text, typ, want) in cases {
            assert_eq!(value(text, &typ), want, "{text} as {typ}");
        }
        assert_eq!(literal_bytes(&Literal::Null, &T::Int), Ok(None));
        assert_eq!(bytes("1", &T::Int), [0, 0, 0, 1]);
        // Doubles keep the sign of zero and the exact NaN Java writes.
        assert_eq!(bytes("-0.0", &T::Double), (-0.0f64).to_be_bytes());
    }

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
    fn bad_literals_are_errors() {
        let literal_errors = [
            ("128", T::TinyInt),
            ("-32769", T::SmallInt),
            ("2147483648", T::Int),
            ("9223372036854775808", T::BigInt),
            ("99999999999999999999999999999999999999999", T::BigInt),
            ("1.5", T::Int),
            ("'1'", T::Int),
            ("1", T::Text),
            ("'é'", T::Ascii),
            ("NaN", T::Decimal),
            ("Infinity", T::Decimal),
            ("0f9b0e52-7b5c-4e9f-a1f4-3a8d1c2b5e6f", T::Timeuuid),
            ("'2011-02-30'", T::Date),
            ("'2011-02-03 25:00'", T::Timestamp),
            ("'2011-02-03 04:05 +99'", T::Timestamp),
            ("'2011-02-03 04:05 PST'", T::Timestamp),
            ("'yesterday'", T::Timestamp),
            ("'24:00:00'", T::Time),
            ("'12:00'", T::Time),
            ("86400000000000", T::Time),
            ("-1", T::Date),
            ("4294967296", T::Date),
            ("'localhost'", T::Inet),
            ("1", T::Boolean),
            ("'abc'", T::Blob),
            ("[1]", T::Set(Box::new(T::Int))),
            ("{1}", T::List(Box::new(T::Int))),
            ("{}", T::List(Box::new(T::Int))),
            ("[1, null]", T::List(Box::new(T::Int))),
            ("{1: null}", T::Map(Box::new(T::Int), Box::new(T::Int))),
            ("[1, 2]", T::Vector(Box::new(T::Float), 3)),
            ("(1, 2, 3)", T::Tuple(vec![T::Int, T::Int])),
            ("{c: 1}", ut()),
            ("{a: 1, a: 2}", ut()),
            ("{a: 'x'}", ut()),
            ("1x", T::Duration),
        ];
        for (text, typ) in literal_errors {
            if text == "1x" {
                assert!(parse_duration("1x").is_err());
                continue;
            }
            assert!(
                matches!(fails(text, &typ), ValueError::Literal { .. }),
                "{text} as {typ}: {:?}",
                literal_bytes(&lit(text), &typ)
            );
        }
        assert_eq!(
            fails("[1, ?]", &T::List(Box::new(T::Int))),
            ValueError::Unsupported("a bind marker inside a literal".into())
        );
        assert_eq!(fails("token(1)", &T::BigInt), ValueError::Unsupported("function token()".into()));
        assert_eq!(fails("now(1)", &T::Timeuuid), ValueError::Unsupported("function now()".into()));
        assert!(fails("'x'", &T::Int).to_string().contains("a string is not a int literal"));
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

    #[test]
    fn collections_sorted_as_cassandra_stores_them() {
        let ints = |v: &[i32]| CqlValue::List(v.iter().map(|i| CqlValue::Int(*i)).collect());
        let list = T::List(Box::new(T::Int));
        assert_eq!(value("[3, 1, 3]", &list), ints(&[3, 1, 3]));
        assert_eq!(value("[]", &list), ints(&[]));
        let set = T::Set(Box::new(T::Int));
        assert_eq!(
            value("{3, -1, 2, 3, -1}", &set),
            CqlValue::Set(vec![CqlValue::Int(-1), CqlValue::Int(2), CqlValue::Int(3)])
        );
        assert_eq!(value("{}", &set), CqlValue::Set(vec![]));
        let texts = T::Set(Box::new(T::Text));
        let CqlValue::Set(t) = value("{'b', 'a', 'B', 'é', 'a'}", &texts) else { panic!() };
        assert_eq!(t.iter().map(|v| v.as_str().unwrap()).collect::<Vec<_>>(), ["B", "a", "b", "é"]);
        // Equal decimals are one element (the first kept).
        let decimals = T::Set(Box::new(T::Decimal));
        let CqlValue::Set(d) = value("{1.00, 0.5, 1.0}", &decimals) else { panic!() };
        assert_eq!(d.iter().map(ToString::to_string).collect::<Vec<_>>(), ["0.5", "1.00"]);
        let map = T::Map(Box::new(T::Int), Box::new(T::Text));
        let entry = |k, v: &str| (CqlValue::Int(k), CqlValue::Text(v.into()));
        assert_eq!(value("{2: 'b', 1: 'a', 2: 'c'}", &map), CqlValue::Map(vec![entry(1, "a"), entry(2, "c")]));
        assert_eq!(value("{}", &map), CqlValue::Map(vec![]));
        let nested = T::Map(Box::new(T::Text), Box::new(T::Set(Box::new(T::Int))));
        assert_eq!(
            value("{'k': {2, 1}}", &nested),
            CqlValue::Map(vec![(CqlValue::Text("k".into()), CqlValue::Set(vec![CqlValue::Int(1), CqlValue::Int(2)]))])
        );
        // Sets of frozen collections sort element-wise, then by size.
        let lists = T::Set(Box::new(T::List(Box::new(T::Int))));
        assert_eq!(value("{[2], [1, 5], [1]}", &lists), CqlValue::Set(vec![ints(&[1]), ints(&[1, 5]), ints(&[2])]));
    }

    #[test]
    fn tuples_udts_and_vectors() {
        let tuple = T::Tuple(vec![T::Int, T::Text, T::Boolean]);
        assert_eq!(
            value("(1, null, true)", &tuple),
            CqlValue::Tuple(vec![Some(CqlValue::Int(1)), None, Some(CqlValue::Boolean(true))])
        );
        assert_eq!(bytes("(1)", &tuple), [0, 0, 0, 4, 0, 0, 0, 1]);
        let u = ut();
        let udt = |a: Option<i32>, b: Option<&str>| CqlValue::Udt {
            keyspace: "ks".into(),
            name: "ut".into(),
            fields: vec![("a".into(), a.map(CqlValue::Int)), ("b".into(), b.map(|b| CqlValue::Text(b.into())))],
        };
        assert_eq!(value("{b: 'x', a: 1}", &u), udt(Some(1), Some("x")));
        assert_eq!(value("{b: 'x'}", &u), udt(None, Some("x")));
        assert_eq!(bytes("{}", &u), [0xff; 8]);
        assert_eq!(bytes("{a: null}", &u), [0xff; 8]);
        let my = ty("frozen<\"MyType\">").typ;
        let CqlValue::Udt { fields, .. } = value("{x: {a: 7}, \"Y\": [1]}", &my) else { panic!() };
        assert_eq!(fields[1], ("Y".into(), Some(CqlValue::List(vec![CqlValue::Int(1)]))));
        let floats = T::Vector(Box::new(T::Float), 3);
        assert_eq!(
            bytes("[1, 2.5, -3]", &floats),
            ser(&CqlValue::Vector(vec![CqlValue::Float(1.0), CqlValue::Float(2.5), CqlValue::Float(-3.0)]))
        );
        assert_eq!(
            value("[1, 2.5, -3]", &floats),
            CqlValue::Vector(vec![CqlValue::Float(1.0), CqlValue::Float(2.5), CqlValue::Float(-3.0)])
        );
        let texts = T::Vector(Box::new(T::Text), 2);
        let mut want = Vec::new();
        CqlVector(vec!["x", "yz"]).encode(&mut want);
        assert_eq!(bytes("['x', 'yz']", &texts), want[4..]);
        let shorts = T::Vector(Box::new(T::SmallInt), 2);
        assert_eq!(bytes("[1, 2]", &shorts), [2, 0, 1, 2, 0, 2]);
    }

    #[test]
    fn functions_give_fresh_values() {
        let before = now_micros();
        let t = bytes("now()", &T::Timeuuid);
        let u: [u8; 16] = t.clone().try_into().unwrap();
        assert_eq!(Uuid::from_bytes(u).get_version_num(), 1);
        assert!((before..before + 60_000_000).contains(&micros_of_timeuuid(&u)));
        assert_ne!(bytes("now()", &T::Timeuuid), t);
        assert_eq!(bytes("currentTimeUUID()", &T::Uuid).len(), 16);
        let v4 = Uuid::from_bytes(bytes("uuid()", &T::Uuid).try_into().unwrap());
        assert_eq!((v4.get_version_num(), v4.get_variant()), (4, uuid::Variant::RFC4122));
        let ms = |b: Vec<u8>| i64::from_be_bytes(b.try_into().unwrap());
        for f in ["currentTimestamp()", "toTimestamp(now())", "system.totimestamp(system.now())"] {
            assert!((before / 1000..before / 1000 + 60_000).contains(&ms(bytes(f, &T::Timestamp))), "{f}");
        }
        assert!((before / 1000..before / 1000 + 60_000).contains(&ms(bytes("toUnixTimestamp(now())", &T::BigInt))));
        let CqlValue::Date(d) = value("currentDate()", &T::Date) else { panic!() };
        assert_eq!(i64::from(d.days_since_epoch()), before / 86_400_000_000);
        assert_eq!(value("toDate(now())", &T::Date), CqlValue::Date(d));
        let CqlValue::Time(time) = value("currentTime()", &T::Time) else { panic!() };
        assert!(time.is_valid());
        assert!(matches!(fails("uuid()", &T::Timeuuid), ValueError::Literal { .. }));
        assert!(matches!(fails("now()", &T::Int), ValueError::Literal { .. }));
        assert!(matches!(fails("toTimestamp(1)", &T::Timestamp), ValueError::Unsupported(_)));
    }

    #[test]
    fn terms_with_bound_values() {
        let set = T::Set(Box::new(T::Int));
        let unsorted = build_collection([&[0, 0, 0, 2][..], &[0, 0, 0, 1], &[0, 0, 0, 2]]);
        let sorted = build_collection([&[0, 0, 0, 1][..], &[0, 0, 0, 2]]);
        let bound = |m: &BindMarker| Ok(if m.index == 0 { Some(unsorted.clone()) } else { None });
        let term = |text: &str| match parse(&format!("INSERT INTO t (c) VALUES ({text})")) {
            Ok(Statement::Insert(mut i)) => i.values.remove(0),
            other => panic!("{other:?}"),
        };
        assert_eq!(term_bytes(&term("?"), &set, &bound), Ok(Some(sorted.clone())));
        assert_eq!(term_bytes(&term("?"), &T::Int, &|_| Ok(None)), Ok(None));
        let nested = T::List(Box::new(set.clone()));
        assert_eq!(
            term_bytes(&term("[?, {1}]"), &nested, &bound),
            Ok(Some(build_collection([&sorted[..], &build_collection([&[0, 0, 0, 1][..]])])))
        );
        assert!(matches!(term_bytes(&term("[?, ?]"), &nested, &bound), Err(ValueError::Literal { .. })));
        assert_eq!(
            term_bytes(&term("{a: ?}"), &ut(), &|_| Ok(Some(vec![0, 0, 0, 9]))),
            Ok(Some(vec![0, 0, 0, 4, 0, 0, 0, 9, 255, 255, 255, 255]))
        );
    }

    #[test]
    fn normalize_sorts_nested_sets_and_maps() {
        let inner = T::Set(Box::new(T::Int));
        let typ = T::Map(Box::new(T::Int), Box::new(inner.clone()));
        let s21 = build_collection([&[0, 0, 0, 2][..], &[0, 0, 0, 1]]);
        let s12 = build_collection([&[0, 0, 0, 1][..], &[0, 0, 0, 2]]);
        let raw =
            build_map([(&[0, 0, 0, 5][..], &s21[..]), (&[0, 0, 0, 3][..], &s21[..]), (&[0, 0, 0, 5][..], &s12[..])]);
        assert_eq!(
            normalize(&typ, &raw),
            Ok(build_map([(&[0, 0, 0, 3][..], &s12[..]), (&[0, 0, 0, 5][..], &s12[..])]))
        );
        let tuple = T::Tuple(vec![inner.clone(), T::Int]);
        assert_eq!(normalize(&tuple, &build_udt(&[Some(&s21), None])), Ok(build_udt(&[Some(&s12), None])));
        assert_eq!(normalize(&tuple, &build_udt(&[Some(&s21)])), Ok(build_udt(&[Some(&s12)])));
        assert_eq!(normalize(&T::Int, &[1, 2]), Ok(vec![1, 2]));
        assert!(normalize(&inner, &[0, 0, 0, 1]).is_err());
        assert!(normalize(&inner, &build_collection([])[..3]).is_err());
    }

    #[test]
    fn serialized_collections_apart_and_back() {
        let e = [&b"a"[..], b"", b"bc"];
        let list = build_collection(e);
        assert_eq!(list, [0, 0, 0, 3, 0, 0, 0, 1, b'a', 0, 0, 0, 0, 0, 0, 0, 2, b'b', b'c']);
        assert_eq!(collection_elements(&list), Ok(e.iter().map(|x| Some(*x)).collect()));
        let with_null = [&[0u8, 0, 0, 1][..], &[0xff; 4]].concat();
        assert_eq!(collection_elements(&with_null), Ok(vec![None]));
        let map = build_map([(&b"k"[..], &b"v"[..]), (b"", b"")]);
        assert_eq!(collection_entries(&map), Ok(vec![(&b"k"[..], Some(&b"v"[..])), (&b""[..], Some(&b""[..]))]));
        assert!(collection_entries(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]).is_err());
        for bad in [
            &[][..],
            &[0, 0, 0],
            &[0, 0, 0, 1],
            &[0, 0, 0, 1, 0, 0, 0, 2, 1],
            &[0xff, 0xff, 0xff, 0xfe],
            &[0, 0, 0, 0, 7],
        ] {
            assert!(matches!(collection_elements(bad), Err(ValueError::Malformed { .. })), "{bad:?}");
            assert!(collection_entries(bad).is_err(), "{bad:?}");
        }
        assert!(collection_elements(&[0x7f, 0xff, 0xff, 0xff]).is_err());
        let udt = build_udt(&[Some(b"x"), None]);
        assert_eq!(udt, [0, 0, 0, 1, b'x', 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(udt_fields(&udt, 3), Ok(vec![Some(&b"x"[..]), None, None]));
        assert_eq!(udt_fields(&[], 2), Ok(vec![None, None]));
        assert!(udt_fields(&udt, 1).is_err());
        assert!(udt_fields(&udt[..7], 2).is_err());
    }

    #[test]
    fn comparator_orders_like_cassandra() {
        let sorted = |typ: &ColumnType, values: &[&str]| {
            let b: Vec<Vec<u8>> = values.iter().map(|v| bytes(v, typ)).collect();
            for i in 0..b.len() {
                for j in 0..b.len() {
                    assert_eq!(compare(typ, &b[i], &b[j]), i.cmp(&j), "{typ}: {} vs {}", values[i], values[j]);
                }
            }
        };
        sorted(&T::Int, &["-2147483648", "-1", "0", "1", "2147483647"]);
        sorted(&T::BigInt, &["-9223372036854775808", "-256", "-1", "0", "255", "9223372036854775807"]);
        sorted(&T::TinyInt, &["-128", "-1", "0", "127"]);
        sorted(&T::Timestamp, &["-1", "0", "'2011-02-03'"]);
        sorted(&T::Time, &["0", "'00:00:01'", "'23:59:59.999999999'"]);
        sorted(
            &T::Varint,
            &["-100000000000000000000", "-129", "-128", "-1", "0", "1", "127", "128", "100000000000000000000"],
        );
        sorted(&T::Decimal, &["-1e10", "-1.5", "-1.25", "-0.001", "0", "0.001", "0.5", "1", "1.05", "10", "1e10"]);
        sorted(&T::Double, &["-Infinity", "-1e300", "-1", "-0.0", "0.0", "1e-300", "1", "Infinity", "NaN"]);
        sorted(&T::Float, &["-Infinity", "-1", "-0.0", "0", "1", "Infinity", "NaN"]);
        sorted(&T::Text, &["''", "'A'", "'B'", "'a'", "'ab'", "'b'", "'é'"]);
        sorted(&T::Blob, &["0x", "0x00", "0x0000", "0x01", "0xff"]);
        sorted(&T::Boolean, &["false", "true"]);
        sorted(&T::Inet, &["'::1'", "'1.2.3.4'", "'9.0.0.0'"]);
        sorted(&T::Date, &["'-0044-03-15'", "'1969-12-31'", "'1970-01-01'", "'2024-02-29'"]);
        // Time-based UUIDs by time; other versions after version 1, by bytes (unsigned).
        sorted(
            &T::Uuid,
            &[
                "ffffffff-ffff-1000-8000-000000000000",
                "00000000-0000-1001-0000-000000000000",
                "00000000-0000-1001-ff00-000000000000",
                "00000000-0000-4000-8000-000000000000",
                "ffffffff-0000-4000-8000-000000000000",
            ],
        );
        // Timeuuids: by time (including the 100-ns digit), then low bytes as signed bytes.
        sorted(
            &T::Timeuuid,
            &[
                "00000001-0000-1000-ff00-000000000000",
                "00000001-0000-1000-0000-000000000000",
                "00000001-0000-1000-7f00-000000000000",
                "00000002-0000-1000-8000-000000000000",
                "00000000-0001-1000-8000-000000000000",
                "00000000-0000-1001-8000-000000000000",
            ],
        );
        sorted(&T::List(Box::new(T::Int)), &["[-1]", "[-1, 0]", "[1]", "[1, -5]", "[2]"]);
        sorted(&T::Map(Box::new(T::Int), Box::new(T::Int)), &["{1: 1}", "{1: 2}", "{1: 2, 3: 9}", "{2: 0}"]);
        sorted(&T::Tuple(vec![T::Int, T::Text]), &["(-1)", "(-1, null)", "(-1, 'a')", "(1, null)", "(1, 'a')"]);
        sorted(&ut(), &["{a: null}", "{a: -1}", "{a: 1, b: 'a'}", "{a: 1, b: 'b'}"]);
        sorted(&T::Vector(Box::new(T::Float), 2), &["[-1, 5]", "[0, -1]", "[0, 0]"]);
        sorted(&T::Vector(Box::new(T::Text), 2), &["['a', 'z']", "['b', '']", "['b', 'a']"]);
        // Empty values first; malformed values bytewise, never a panic.
        assert_eq!(compare(&T::Int, &[], &[0x80, 0, 0, 0]), Ordering::Less);
        assert_eq!(compare(&T::Int, &[], &[]), Ordering::Equal);
        for typ in [
            T::Double,
            T::Float,
            T::Uuid,
            T::Timeuuid,
            T::Decimal,
            T::List(Box::new(T::Int)),
            T::Map(Box::new(T::Int), Box::new(T::Int)),
            T::Tuple(vec![T::Int]),
            T::Vector(Box::new(T::Int), 2),
            T::Vector(Box::new(T::Text), 2),
        ] {
            assert_eq!(compare(&typ, &[1, 2, 3], &[1, 2, 4]), Ordering::Less, "{typ}");
            assert_eq!(compare(&typ, &[0xff], &[0xff]), Ordering::Equal, "{typ}");
        }
    }

    #[test]
    fn any_literal_for_any_type_never_panics() {
        let texts = [
            "null",
            "true",
            "0",
            "-1",
            "99999999999999999999999",
            "1.5e300",
            "-0.0",
            "NaN",
            "-Infinity",
            "''",
            "'x'",
            "'2011-02-03 04:05:06.123456789+05:30'",
            "'12:00:00'",
            "'::1'",
            "'1'",
            "0x",
            "0xff",
            "123e4567-e89b-12d3-a456-426614174000",
            "1h",
            "P1W",
            "P0001-02-03T04:05:06",
            "[]",
            "[1, 2]",
            "['a']",
            "{}",
            "{1}",
            "{1: 'a'}",
            "{a: 1}",
            "{b: 'x', a: null}",
            "(1, 'a')",
            "(null)",
            "now()",
            "uuid()",
            "currentDate()",
            "f(1)",
            "[[1], [2, 3]]",
            "{'k': {1, 2}}",
            "[1.5, 2, 3]",
        ];
        let mut types = vec![
            T::Ascii,
            T::BigInt,
            T::Blob,
            T::Boolean,
            T::Counter,
            T::Date,
            T::Decimal,
            T::Double,
            T::Duration,
            T::Float,
            T::Inet,
            T::Int,
            T::SmallInt,
            T::Text,
            T::Time,
            T::Timestamp,
            T::Timeuuid,
            T::TinyInt,
            T::Uuid,
            T::Varint,
            T::Custom("x".into()),
            ut(),
            T::Tuple(vec![T::Int, T::Text]),
            T::Vector(Box::new(T::Float), 3),
            T::Vector(Box::new(T::Text), 1),
        ];
        for t in types.clone() {
            types.push(T::List(Box::new(t.clone())));
            types.push(T::Set(Box::new(t.clone())));
            types.push(T::Map(Box::new(t.clone()), Box::new(t)));
        }
        for text in texts {
            let l = lit(text);
            for t in &types {
                if let Ok(Some(b)) = literal_bytes(&l, t) {
                    assert_eq!(compare(t, &b, &b), Ordering::Equal, "{text} as {t}");
                    assert_eq!(normalize(t, &b).as_ref(), Ok(&b), "{text} as {t} is already normal");
                    let _ = decode(t, &b);
                }
                for b in [&[][..], &[0xff; 3], &[0, 0, 0, 1, 0, 0, 0, 9], &[0x80; 17]] {
                    let _ = (compare(t, b, &[0, 0, 0, 0]), normalize(t, b));
                }
            }
        }
    }

    #[test]
    fn timeuuids_carry_the_exact_microsecond() {
        // docs/cdc-log.md §3.2: b223c55e-6d07-11ea-7654-24e4fb3f20b9 → 1584969040910883 µs.
        let doc = *Uuid::parse_str("b223c55e-6d07-11ea-7654-24e4fb3f20b9").unwrap().as_bytes();
        assert_eq!(micros_of_timeuuid(&doc), 1_584_969_040_910_883);
        let made = timeuuid_from_micros(1_584_969_040_910_883, 0x7654_24e4_fb3f_20b9);
        assert_eq!(made[..8], doc[..8]);
        assert_eq!(made[8..], [0xb6, 0x54, 0x24, 0xe4, 0xfb, 0x3f, 0x20, 0xb9], "variant bits forced to 10");
        for micros in [0, 1, -1, 1_700_000_000_123_456, -12_219_292_800_000_000] {
            for random in [0, u64::MAX, 0x1234_5678_9abc_def0] {
                let u = timeuuid_from_micros(micros, random);
                let parsed = Uuid::from_bytes(u);
                assert_eq!((parsed.get_version_num(), parsed.get_variant()), (1, uuid::Variant::RFC4122));
                assert_eq!(micros_of_timeuuid(&u), micros);
            }
        }
        // Later microseconds sort later whatever the random bits.
        let a = timeuuid_from_micros(1_000_000, u64::MAX);
        let b = timeuuid_from_micros(1_000_001, 0);
        assert_eq!(compare(&T::Timeuuid, &a, &b), Ordering::Less);
    }
}
