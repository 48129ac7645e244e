//! CQL tokens: the small tokenizer the statement rewrites, the Scylla-only
//! properties, the vector index DDL, the refusals and the CDC write guard
//! read statements with. Strings, `$$` strings, quoted identifiers and
//! comments come out as single tokens, so nothing inside them is ever
//! mistaken for a keyword; each token keeps its byte range, so callers edit
//! the original text in place.
//!
//! It sits at the bottom of the crate (it imports nothing of it), so every
//! reader of statements can use it without importing the rewrites.

/// Token kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Unquoted identifier or keyword.
    Ident,
    /// `"quoted identifier"`.
    QuotedIdent,
    /// `'string'` or `$$string$$`.
    Str,
    /// Number, duration, blob or other literal starting with a digit.
    Number,
    /// `?`
    Marker,
    /// Any other single character.
    Punct,
}

/// A token: its kind and byte range in the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tok<'a> {
    /// The kind.
    pub kind: Kind,
    /// The text as written.
    pub text: &'a str,
    /// Start offset.
    pub start: usize,
    /// End offset (exclusive).
    pub end: usize,
}

impl Tok<'_> {
    /// Whether this is the unquoted keyword `kw` (any case).
    pub fn is_kw(&self, kw: &str) -> bool {
        self.kind == Kind::Ident && self.text.eq_ignore_ascii_case(kw)
    }
    /// Whether this is the punctuation `c`.
    pub fn is_punct(&self, c: char) -> bool {
        self.kind == Kind::Punct && self.text.len() == c.len_utf8() && self.text.starts_with(c)
    }
    /// The identifier this token names: unquoted ones fold to lowercase.
    pub fn ident(&self) -> Option<String> {
        match self.kind {
            Kind::Ident => Some(self.text.to_ascii_lowercase()),
            Kind::QuotedIdent => Some(self.text[1..self.text.len() - 1].replace("\"\"", "\"")),
            _ => None,
        }
    }
    /// The value of a string literal (quotes removed, `''` unescaped).
    pub fn string_value(&self) -> Option<String> {
        match self.kind {
            Kind::Str if self.text.starts_with('\'') => Some(self.text[1..self.text.len() - 1].replace("''", "'")),
            Kind::Str => Some(self.text[2..self.text.len() - 2].to_string()),
            _ => None,
        }
    }
}

/// Splits a statement into tokens; `None` on an unterminated string,
/// identifier or comment (the statement is then passed on untouched and
/// Cassandra reports the error).
pub fn tokenize(s: &str) -> Option<Vec<Tok<'_>>> {
    let b = s.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let kind = match c {
            _ if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i = s[i..].find('\n').map_or(b.len(), |n| i + n + 1);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = s[i..].find('\n').map_or(b.len(), |n| i + n + 1);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = i + 2 + s[i + 2..].find("*/")? + 2;
                continue;
            }
            b'\'' | b'"' => {
                i += 1;
                loop {
                    if *b.get(i)? == c {
                        if b.get(i + 1) == Some(&c) {
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    i += 1;
                }
                if c == b'\'' {
                    Kind::Str
                } else {
                    Kind::QuotedIdent
                }
            }
            b'$' if b.get(i + 1) == Some(&b'$') => {
                i = i + 2 + s[i + 2..].find("$$")? + 2;
                Kind::Str
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$') {
                    i += 1;
                }
                Kind::Ident
            }
            _ if c.is_ascii_digit() => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
                Kind::Number
            }
            b'?' => {
                i += 1;
                Kind::Marker
            }
            _ => {
                i += s[i..].chars().next().map_or(1, char::len_utf8);
                Kind::Punct
            }
        };
        toks.push(Tok { kind, text: &s[start..i], start, end: i });
    }
    Some(toks)
}
