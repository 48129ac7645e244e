//! Types from their schema text (`list<frozen<ut>>`, user types resolved
//! through the schema), as the protocol crate's [`ColumnType`].

use super::*;

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::*;
    use super::*;

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
}
