//! The tokens of a DML statement: CQL words, quoted identifiers, strings
//! (also `$$`), numbers, blobs, uuids, durations and punctuation, with
//! comments skipped. Comments, strings and quoted identifiers come from the
//! crate's tokenizer (`crate::tokens`); the typed literals are read here.
//! Reserved words are listed here, because whether a word may be an
//! identifier is a property of the token.

use super::DmlError;
use crate::tokens::{self, Kind, Unclosed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    /// An unquoted identifier or keyword, as written.
    Ident(String),
    /// A `"quoted"` identifier, unescaped.
    Quoted(String),
    Str(String),
    Int(String),
    Float(String),
    Uuid(String),
    Blob(Vec<u8>),
    Duration(String),
    Punct(&'static str),
    Eof,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Token {
    /// The lowercased word of an unquoted identifier.
    pub(super) fn keyword(&self) -> Option<String> {
        match &self.tok {
            Tok::Ident(s) => Some(s.to_ascii_lowercase()),
            _ => None,
        }
    }
    pub(super) fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.tok, Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }
    pub(super) fn is_punct(&self, p: &str) -> bool {
        matches!(self.tok, Tok::Punct(q) if q == p)
    }
}

/// Cassandra's reserved words: never identifiers unless quoted.
const RESERVED: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "materialized",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "unset",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// Whether `word` is a reserved word (any case); DESCRIBE quotes names
/// that are.
pub(crate) fn is_reserved(word: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

/// Words that are literals in term position.
pub(super) fn is_literal_word(word: &str) -> bool {
    ["null", "true", "false", "nan", "infinity"].iter().any(|r| r.eq_ignore_ascii_case(word))
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

const PUNCTS: &[&str] =
    &["<=", ">=", "!=", "(", ")", "[", "]", "{", "}", ",", ";", ".", ":", "=", "<", ">", "+", "-", "?", "*"];

const DURATION_UNITS: &[&str] = &["y", "mo", "w", "d", "h", "m", "s", "ms", "us", "µs", "μs", "ns"];

pub(super) struct Lexer<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

impl<'a> Lexer<'a> {
    fn syntax(&self, offset: usize, expected: &str) -> DmlError {
        let found = match self.text.get(offset..).and_then(|s| s.chars().next()) {
            Some(c) => format!("`{c}`"),
            None => "end of input".into(),
        };
        DmlError::Syntax { offset, expected: expected.into(), found }
    }

    /// Position after the run of bytes from `i` that satisfy `f`.
    fn run(&self, mut i: usize, f: impl Fn(u8) -> bool) -> usize {
        let b = self.text.as_bytes();
        while i < b.len() && f(b[i]) {
            i += 1;
        }
        i
    }

    pub(super) fn next(&mut self) -> Result<Token, DmlError> {
        let (text, b) = (self.text, self.text.as_bytes());
        // Whitespace, comments, strings and quoted identifiers are read by
        // the crate's one tokenizer; the typed literals below are this
        // parser's own.
        let shared = tokens::next_token(text, self.pos).map_err(|open| match open {
            Unclosed::Comment => self.syntax(b.len(), "`*/`"),
            Unclosed::Quote(quote) => self.syntax(b.len(), &format!("closing `{quote}`")),
            Unclosed::Dollars => self.syntax(b.len(), "`$$`"),
        })?;
        let Some(shared) = shared else {
            self.pos = b.len();
            return Ok(Token { tok: Tok::Eof, start: b.len(), end: b.len() });
        };
        let start = shared.start;
        self.pos = start;
        let at = |i: usize| b.get(i).copied().unwrap_or(0);
        let tok = if uuid_at(&b[start..]) {
            self.pos += 36;
            Tok::Uuid(text[start..self.pos].into())
        } else if at(start) == b'0' && matches!(at(start + 1), b'x' | b'X') {
            let end = self.run(start + 2, |c| c.is_ascii_hexdigit());
            if is_ident_byte(at(end)) {
                return Err(self.syntax(end, "a hexadecimal digit"));
            }
            self.pos = end;
            Tok::Blob(decode_hex(&text[start + 2..end]).ok_or_else(|| DmlError::Invalid {
                offset: start,
                message: "odd number of hexadecimal digits in a blob literal".into(),
            })?)
        } else if at(start).is_ascii_digit() || (at(start) == b'-' && at(start + 1).is_ascii_digit()) {
            return self.number(start);
        } else if let Some(len) = iso_duration_at(&b[start..]) {
            self.pos += len;
            Tok::Duration(text[start..self.pos].into())
        } else if at(start).is_ascii_alphabetic() {
            // CQL's identifiers: a letter, then letters, digits and `_`
            // (the shared tokenizer also lets `_` start one and `$` follow).
            self.pos = self.run(start, is_ident_byte);
            Tok::Ident(text[start..self.pos].into())
        } else if let (Kind::Str, Some(value)) = (shared.kind, shared.string_value()) {
            self.pos = shared.end;
            Tok::Str(value)
        } else if let (Kind::QuotedIdent, Some(name)) = (shared.kind, shared.ident()) {
            if name.is_empty() {
                return Err(DmlError::Invalid { offset: start, message: "empty quoted identifier".into() });
            }
            self.pos = shared.end;
            Tok::Quoted(name)
        } else if let Some(p) = PUNCTS.iter().find(|p| b[start..].starts_with(p.as_bytes())) {
            self.pos += p.len();
            Tok::Punct(p)
        } else {
            return Err(self.syntax(start, "a token"));
        };
        Ok(Token { tok, start, end: self.pos })
    }

    /// An integer, float or duration starting at `start` (maybe with `-`).
    fn number(&mut self, start: usize) -> Result<Token, DmlError> {
        let b = self.text.as_bytes();
        let at = |i: usize| b.get(i).copied().unwrap_or(0);
        let digits_from = start + usize::from(at(start) == b'-');
        let mut i = self.run(digits_from, |c| c.is_ascii_digit());
        let unit_end = |i: usize| {
            let unit = self.text[i..].chars().take_while(|c| c.is_ascii_alphabetic() || matches!(c, 'µ' | 'μ'));
            i + unit.map(char::len_utf8).sum::<usize>()
        };
        let is_unit = |s: &str| DURATION_UNITS.iter().any(|u| u.eq_ignore_ascii_case(s));
        let tok = if is_unit(&self.text[i..unit_end(i)]) {
            loop {
                i = unit_end(i);
                if !at(i).is_ascii_digit() {
                    break;
                }
                i = self.run(i, |c| c.is_ascii_digit());
                if !is_unit(&self.text[i..unit_end(i)]) {
                    return Err(self.syntax(i, "a duration unit"));
                }
            }
            Tok::Duration(self.text[start..i].into())
        } else {
            let mut float = false;
            if at(i) == b'.' {
                float = true;
                i = self.run(i + 1, |c| c.is_ascii_digit());
            }
            if matches!(at(i), b'e' | b'E') {
                let j = i + 1 + usize::from(matches!(at(i + 1), b'+' | b'-'));
                if at(j).is_ascii_digit() {
                    float = true;
                    i = self.run(j, |c| c.is_ascii_digit());
                }
            }
            let s = self.text[start..i].to_string();
            if float {
                Tok::Float(s)
            } else {
                Tok::Int(s)
            }
        };
        if is_ident_byte(at(i)) || at(i) >= 0x80 {
            return Err(self.syntax(i, "a separator after the number"));
        }
        self.pos = i;
        Ok(Token { tok, start, end: i })
    }
}

/// Whether `b` starts with a UUID (`8-4-4-4-12` hex digits) not followed by
/// an identifier character.
fn uuid_at(b: &[u8]) -> bool {
    b.len() >= 36
        && b[..36].iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
        && !b.get(36).copied().is_some_and(is_ident_byte)
}

/// The length of an ISO 8601 duration (`[-]P...`) at the start of `b`.
fn iso_duration_at(b: &[u8]) -> Option<usize> {
    let sign = usize::from(b.first() == Some(&b'-'));
    if b.get(sign) != Some(&b'P') {
        return None;
    }
    let digits = |i: usize| b[i.min(b.len())..].iter().take_while(|c| c.is_ascii_digit()).count();
    let start = sign + 1;
    // P0001-02-03T04:05:06
    let alternative = b.len() >= start + 19
        && b[start..start + 19].iter().zip(b"0000-00-00T00:00:00").all(|(c, p)| {
            if *p == b'0' {
                c.is_ascii_digit()
            } else {
                c == p
            }
        });
    let mut i = start;
    if alternative {
        i += 19;
    } else if digits(i) > 0 && b.get(i + digits(i)) == Some(&b'W') {
        i += digits(i) + 1;
    } else {
        let components = |i: &mut usize, units: &[u8]| {
            let mut any = false;
            for unit in units {
                let n = digits(*i);
                if n > 0 && b.get(*i + n) == Some(unit) {
                    *i += n + 1;
                    any = true;
                }
            }
            any
        };
        let date = components(&mut i, b"YMD");
        if b.get(i) == Some(&b'T') {
            i += 1;
            if !components(&mut i, b"HMS") {
                return None;
            }
        } else if !date {
            return None;
        }
    }
    (!b.get(i).copied().is_some_and(is_ident_byte)).then_some(i)
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.as_bytes()
        .chunks(2)
        .map(|pair| std::str::from_utf8(pair).ok().and_then(|p| u8::from_str_radix(p, 16).ok()))
        .collect()
}
