//! CQL tokens: the small tokenizer the statement rewrites, the Scylla-only
//! properties, the vector index DDL, the refusals and the CDC write guard
//! read statements with. Strings, `$$` strings, quoted identifiers and
//! comments come out as single tokens, so nothing inside them is ever
//! mistaken for a keyword; each token keeps its byte range, so callers edit
//! the original text in place.
//!
//! It sits at the bottom of the crate (it imports nothing of it), so every
//! reader of statements can use it without importing the rewrites. The CDC
//! log's statement parser (`cdclog::dml`) reads through it too, one token at
//! a time ([`next_token`]), and types the literals it needs on top.

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

/// What a statement left open at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unclosed {
    /// A `/* comment`.
    Comment,
    /// A `'string'` or `"identifier"`: its quote.
    Quote(char),
    /// A `$$string`.
    Dollars,
}

/// Splits a statement into tokens; `None` on an unterminated string,
/// identifier or comment (the statement is then passed on untouched and
/// Cassandra reports the error).
pub fn tokenize(s: &str) -> Option<Vec<Tok<'_>>> {
    let mut toks = Vec::new();
    let mut from = 0;
    while let Some(tok) = next_token(s, from).ok()? {
        from = tok.end;
        toks.push(tok);
    }
    Some(toks)
}

/// The first token at or after byte `from` (a character boundary), with
/// whitespace and comments skipped; `Ok(None)` at the end. The CDC log's
/// statement parser reads its comments, strings and quoted identifiers
/// through this, and its typed literals on top.
pub fn next_token(s: &str, from: usize) -> Result<Option<Tok<'_>>, Unclosed> {
    let b = s.as_bytes();
    let mut i = from;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let kind = match c {
            _ if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'-' | b'/' if b.get(i + 1) == Some(&c) => {
                i = s[i..].find('\n').map_or(b.len(), |n| i + n + 1);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = i + 2 + s[i + 2..].find("*/").ok_or(Unclosed::Comment)? + 2;
                continue;
            }
            b'\'' | b'"' => {
                i += 1;
                loop {
                    if *b.get(i).ok_or(Unclosed::Quote(char::from(c)))? == c {
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
                i = i + 2 + s[i + 2..].find("$$").ok_or(Unclosed::Dollars)? + 2;
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
        return Ok(Some(Tok { kind, text: &s[start..i], start, end: i }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<(Kind, &str)> {
        tokenize(s).expect("tokens").into_iter().map(|t| (t.kind, t.text)).collect()
    }

    #[test]
    fn strings_identifiers_and_comments_are_single_tokens() {
        assert_eq!(
            kinds("SELECT \"a\"\"b\", 'it''s -- no' /* x */ FROM t -- rest\nWHERE k = ? AND v = $$ a ' b $$;"),
            [
                (Kind::Ident, "SELECT"),
                (Kind::QuotedIdent, "\"a\"\"b\""),
                (Kind::Punct, ","),
                (Kind::Str, "'it''s -- no'"),
                (Kind::Ident, "FROM"),
                (Kind::Ident, "t"),
                (Kind::Ident, "WHERE"),
                (Kind::Ident, "k"),
                (Kind::Punct, "="),
                (Kind::Marker, "?"),
                (Kind::Ident, "AND"),
                (Kind::Ident, "v"),
                (Kind::Punct, "="),
                (Kind::Str, "$$ a ' b $$"),
                (Kind::Punct, ";"),
            ]
        );
        let toks = tokenize("x 'a''b' \"Q\"\"q\"").expect("tokens");
        assert_eq!(toks[1].string_value().as_deref(), Some("a'b"));
        assert_eq!(toks[2].ident().as_deref(), Some("Q\"q"));
        assert_eq!(toks[0].ident().as_deref(), Some("x"));
        assert_eq!((toks[1].start, toks[1].end), (2, 8));
    }

    #[test]
    fn one_token_at_a_time_names_what_was_left_open() {
        let s = "  a /* c */ 'b'";
        let first = next_token(s, 0).expect("ok").expect("a token");
        assert_eq!((first.text, first.start, first.end), ("a", 2, 3));
        let second = next_token(s, first.end).expect("ok").expect("a token");
        assert_eq!((second.kind, second.start), (Kind::Str, 12));
        assert_eq!(next_token(s, second.end), Ok(None));
        assert_eq!(next_token("a /* open", 1), Err(Unclosed::Comment));
        assert_eq!(next_token("'open", 0), Err(Unclosed::Quote('\'')));
        assert_eq!(next_token("\"open\"\"", 0), Err(Unclosed::Quote('"')));
        assert_eq!(next_token("$$ open $", 0), Err(Unclosed::Dollars));
        assert_eq!(tokenize("x = 'open"), None);
        assert_eq!(next_token("-- only a comment", 0), Ok(None));
    }
}
