//! A parser for the DML subset of CQL: `INSERT`, `UPDATE`, `DELETE` and
//! `BEGIN ... APPLY BATCH`, into an AST that keeps every literal as written.
//!
//! The front needs to know what a base write does to every column (and
//! which bound value goes where) to synthesize CDC log rows
//! (`docs/cdc-log.md` §3), without a full CQL grammar. Anything else
//! ([`DmlError::NotDml`]) is left for Cassandra to judge, and so are
//! semantic checks: this parser rejects what it cannot represent, not
//! everything Cassandra would.
//!
//! Bind markers (`?` and `:name`) are numbered in order of appearance over
//! the whole text, batches included, which is how Cassandra numbers bound
//! variables ([`BindMarker::index`]).
//!
//! `{}` is ambiguous (empty map, set or UDT) and is parsed as
//! `Literal::Map(vec![])`: the consumer decides by the column's type. `{a: 1}`
//! with a bare identifier key is a UDT literal, `{'a': 1}` a map, `{1, 2}` a
//! set. Unquoted identifiers are lowercased, keywords are case-insensitive;
//! ISO 8601 duration literals (`P1D`, `PT2H`, `P0001-02-03T04:05:06`) must be
//! written with upper-case letters.

use std::collections::VecDeque;

/// Why a statement could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmlError {
    /// The statement is not an INSERT, UPDATE, DELETE or BATCH (the front
    /// leaves such statements alone).
    #[error("not a DML statement")]
    NotDml,
    /// Valid CQL (or close enough) that this parser does not represent.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The text does not follow the grammar.
    #[error("expected {expected} at offset {offset}, found {found}")]
    Syntax {
        /// Byte offset of the offending token.
        offset: usize,
        /// What the grammar allows there.
        expected: String,
        /// The token found, quoted, or `end of input`.
        found: String,
    },
    /// Well-formed but invalid (a bad literal, a forbidden clause).
    #[error("{message} at offset {offset}")]
    Invalid {
        /// Byte offset of the offending token.
        offset: usize,
        /// What is wrong.
        message: String,
    },
}

/// A parsed DML statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `INSERT INTO ...`
    Insert(Insert),
    /// `UPDATE ...`
    Update(Update),
    /// `DELETE ...`
    Delete(Delete),
    /// `BEGIN [UNLOGGED | COUNTER] BATCH ... APPLY BATCH`
    Batch(Batch),
}

/// `[keyspace.]table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    /// The keyspace, if the statement names one.
    pub keyspace: Option<String>,
    /// The table.
    pub table: String,
}

/// `USING TTL x AND TIMESTAMP y` (any order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Using {
    /// `TIMESTAMP` (an integer literal or a bind marker).
    pub timestamp: Option<Term>,
    /// `TTL` (an integer literal or a bind marker).
    pub ttl: Option<Term>,
    /// Scylla's `TIMEOUT` (a duration literal or a bind marker), which the
    /// front strips before Cassandra sees the statement.
    pub timeout: Option<Term>,
}

/// `INSERT INTO t (c, ...) VALUES (v, ...) [IF NOT EXISTS] [USING ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    /// The table.
    pub table: TableName,
    /// The column names, in the order written.
    pub columns: Vec<String>,
    /// The values, one per column.
    pub values: Vec<Term>,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
    /// `USING ...`.
    pub using: Using,
}

/// One `SET` item of an UPDATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// `c = v`
    Set {
        /// Column.
        column: String,
        /// Value.
        value: Term,
    },
    /// `c = c + v` or `c += v` (also `c = c -1` on counters, as `+ -1`).
    Append {
        /// Column.
        column: String,
        /// Value.
        value: Term,
    },
    /// `c = v + c`
    Prepend {
        /// Column.
        column: String,
        /// Value.
        value: Term,
    },
    /// `c = c - v` or `c -= v`
    Remove {
        /// Column.
        column: String,
        /// Value.
        value: Term,
    },
    /// `m[k] = v`, `l[i] = v`
    SetElement {
        /// Column.
        column: String,
        /// Map key or list index.
        key: Term,
        /// Value.
        value: Term,
    },
    /// `u.f = v`
    SetField {
        /// Column.
        column: String,
        /// UDT field.
        field: String,
        /// Value.
        value: Term,
    },
}

impl Assignment {
    /// The column assigned.
    pub fn column(&self) -> &str {
        match self {
            Assignment::Set { column, .. }
            | Assignment::Append { column, .. }
            | Assignment::Prepend { column, .. }
            | Assignment::Remove { column, .. }
            | Assignment::SetElement { column, .. }
            | Assignment::SetField { column, .. } => column,
        }
    }
}

/// A comparison operator (`!=`, allowed only in IF conditions, is
/// [`ColumnCondition::NotEqual`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// The right side of `IN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InValues {
    /// `IN (a, b, ...)` (for tuple relations, the items are tuple literals
    /// or markers).
    List(Vec<Term>),
    /// `IN ?` / `IN :name`: one marker (always a [`Term::Bind`]) bound to
    /// a whole list.
    Marker(Term),
}

/// The right side of a tuple relation `(c1, c2) op ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiValues {
    /// `(1, ?)`: one term per column.
    List(Vec<Term>),
    /// `?`: one marker (always a [`Term::Bind`]) bound to a whole tuple.
    Marker(Term),
}

/// One relation of a WHERE clause (relations are joined by `AND`).
/// `TOKEN(...)`, `CONTAINS`, `LIKE`, `IS NOT NULL`, `!=`, element relations
/// and tuple `IN` (`(c1, c2) IN (...)`) are [`DmlError::Unsupported`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    /// `c op v`
    Compare {
        /// Column.
        column: String,
        /// Operator.
        op: CompareOp,
        /// Value.
        value: Term,
    },
    /// `c IN (...)` / `c IN ?`
    In {
        /// Column.
        column: String,
        /// Values.
        values: InValues,
    },
    /// `(c1, c2) op (v1, v2)` / `(c1, c2) op ?`
    MultiCompare {
        /// Columns.
        columns: Vec<String>,
        /// Operator.
        op: CompareOp,
        /// Values.
        values: MultiValues,
    },
}

/// A column, a collection element or a UDT field: what DELETE removes and
/// what IF conditions test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteTarget {
    /// `c`
    Column(String),
    /// `c[k]`
    Element {
        /// Column.
        column: String,
        /// Map key or list index.
        key: Term,
    },
    /// `c.f`
    Field {
        /// Column.
        column: String,
        /// UDT field.
        field: String,
    },
}

impl DeleteTarget {
    /// The column named.
    pub fn column(&self) -> &str {
        match self {
            DeleteTarget::Column(column)
            | DeleteTarget::Element { column, .. }
            | DeleteTarget::Field { column, .. } => column,
        }
    }
}

/// One condition of `IF c = v AND ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnCondition {
    /// `c op v`
    Compare {
        /// What is tested.
        target: DeleteTarget,
        /// Operator.
        op: CompareOp,
        /// Value.
        value: Term,
    },
    /// `c != v`
    NotEqual {
        /// What is tested.
        target: DeleteTarget,
        /// Value.
        value: Term,
    },
    /// `c IN (...)` / `c IN ?`
    In {
        /// What is tested.
        target: DeleteTarget,
        /// Values.
        values: InValues,
    },
    /// `c CONTAINS v` / `c CONTAINS KEY v`
    Contains {
        /// What is tested.
        target: DeleteTarget,
        /// `CONTAINS KEY`.
        key: bool,
        /// Value.
        value: Term,
    },
}

/// The IF clause of a conditional (LWT) statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `IF EXISTS` (UPDATE, DELETE)
    IfExists,
    /// `IF NOT EXISTS` (INSERT; kept in [`Insert::if_not_exists`])
    IfNotExists,
    /// `IF c = v AND ...`
    Columns(Vec<ColumnCondition>),
}

/// `UPDATE t [USING ...] SET ... WHERE ... [IF ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// The table.
    pub table: TableName,
    /// `USING ...`.
    pub using: Using,
    /// `SET` items, in order.
    pub assignments: Vec<Assignment>,
    /// `WHERE` relations.
    pub relations: Vec<Relation>,
    /// `IF ...`.
    pub condition: Option<Condition>,
}

/// `DELETE [targets] FROM t [USING TIMESTAMP x] WHERE ... [IF ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    /// The table.
    pub table: TableName,
    /// What is deleted; empty: the whole row / partition / range.
    pub targets: Vec<DeleteTarget>,
    /// `USING TIMESTAMP` (TTL is refused).
    pub using: Using,
    /// `WHERE` relations.
    pub relations: Vec<Relation>,
    /// `IF ...`.
    pub condition: Option<Condition>,
}

/// The kind of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// `BEGIN BATCH`
    Logged,
    /// `BEGIN UNLOGGED BATCH`
    Unlogged,
    /// `BEGIN COUNTER BATCH`
    Counter,
}

/// `BEGIN ... BATCH [USING TIMESTAMP x] stmt; ... APPLY BATCH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Logged, unlogged or counter.
    pub kind: BatchKind,
    /// `USING TIMESTAMP` (TTL is refused).
    pub using: Using,
    /// The statements: only inserts, updates and deletes.
    pub statements: Vec<Statement>,
}

/// A value: a bind marker or a literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// `?` or `:name`
    Bind(BindMarker),
    /// A literal.
    Literal(Literal),
}

/// A bind marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMarker {
    /// Position among all markers of the statement text (0-based).
    pub index: usize,
    /// The name of a `:name` marker.
    pub name: Option<String>,
}

/// A literal, kept as written (numbers as text, so that no precision is
/// lost before the column type is known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer as written, possibly negative, possibly huge.
    Integer(String),
    /// A float as written (`1.5`, `-2e10`, `NaN`, `Infinity`, `-Infinity`).
    Float(String),
    /// `'...'` (with `''` unescaped) or `$$...$$`.
    String(String),
    /// A UUID, as written.
    Uuid(String),
    /// `0x...`
    Blob(Vec<u8>),
    /// A duration as written (`1h30m`, `-2d`, `P1DT2H`, `P0001-02-03T04:05:06`).
    Duration(String),
    /// `[...]`
    List(Vec<Term>),
    /// `{a, b}`
    Set(Vec<Term>),
    /// `{k: v, ...}`; also `{}` (empty map, set or UDT: see the module docs).
    Map(Vec<(Term, Term)>),
    /// `{field: v, ...}` with identifier keys.
    Udt(Vec<(String, Term)>),
    /// `(a, b)`
    Tuple(Vec<Term>),
    /// A function call such as `now()`, `uuid()`, `toTimestamp(now())`;
    /// the name lowercased unless quoted, qualified as written (`system.now`).
    Function {
        /// Function name.
        name: String,
        /// Arguments.
        args: Vec<Term>,
    },
}

/// Parses one DML statement (a trailing `;` is allowed).
pub fn parse(text: &str) -> Result<Statement, DmlError> {
    let mut p = Parser { lexer: Lexer { text, pos: 0 }, ahead: VecDeque::new(), next_bind: 0, depth: 0 };
    // Only the first word decides; anything else is Cassandra's to judge.
    let kw = p.peek(0).map(Token::keyword).map_err(|_| DmlError::NotDml)?;
    if !matches!(kw.as_deref(), Some("insert" | "update" | "delete" | "begin")) {
        return Err(DmlError::NotDml);
    }
    let statement = if kw.as_deref() == Some("begin") { p.batch()? } else { p.simple_statement()? };
    p.eat_punct(";")?;
    p.expect_end()?;
    Ok(statement)
}

impl Statement {
    /// Every bind marker, in order (so `bind_markers()[i].index == i`).
    pub fn bind_markers(&self) -> Vec<&BindMarker> {
        let mut out = Vec::new();
        self.markers(&mut out);
        out.sort_by_key(|m| m.index);
        out
    }

    /// How many values the statement binds.
    pub fn bind_count(&self) -> usize {
        self.bind_markers().len()
    }

    /// Whether the statement (or a statement of the batch) is a lightweight
    /// transaction (`IF ...`).
    pub fn is_conditional(&self) -> bool {
        match self {
            Statement::Insert(i) => i.if_not_exists,
            Statement::Update(u) => u.condition.is_some(),
            Statement::Delete(d) => d.condition.is_some(),
            Statement::Batch(b) => b.statements.iter().any(Statement::is_conditional),
        }
    }

    /// The tables written, in order of appearance, without repetitions.
    pub fn tables(&self) -> Vec<&TableName> {
        let mut out: Vec<&TableName> = Vec::new();
        let mut add = |t| {
            if !out.contains(&t) {
                out.push(t)
            }
        };
        match self {
            Statement::Insert(i) => add(&i.table),
            Statement::Update(u) => add(&u.table),
            Statement::Delete(d) => add(&d.table),
            Statement::Batch(b) => b.statements.iter().flat_map(Statement::tables).for_each(add),
        }
        out
    }

    /// Pushes every marker of the statement onto `out`.
    fn markers<'s>(&'s self, out: &mut Vec<&'s BindMarker>) {
        let using = |u: &'s Using, out: &mut Vec<&'s BindMarker>| {
            u.timestamp.iter().chain(&u.ttl).chain(&u.timeout).for_each(|t| term_markers(t, out));
        };
        match self {
            Statement::Insert(i) => {
                i.values.iter().for_each(|t| term_markers(t, out));
                using(&i.using, out);
            }
            Statement::Update(u) => {
                using(&u.using, out);
                for a in &u.assignments {
                    match a {
                        Assignment::SetElement { key, value, .. } => {
                            term_markers(key, out);
                            term_markers(value, out);
                        }
                        Assignment::Set { value, .. }
                        | Assignment::Append { value, .. }
                        | Assignment::Prepend { value, .. }
                        | Assignment::Remove { value, .. }
                        | Assignment::SetField { value, .. } => term_markers(value, out),
                    }
                }
                relation_markers(&u.relations, out);
                condition_markers(u.condition.as_ref(), out);
            }
            Statement::Delete(d) => {
                d.targets.iter().for_each(|t| target_markers(t, out));
                using(&d.using, out);
                relation_markers(&d.relations, out);
                condition_markers(d.condition.as_ref(), out);
            }
            Statement::Batch(b) => {
                using(&b.using, out);
                b.statements.iter().for_each(|s| s.markers(out));
            }
        }
    }
}

fn target_markers<'s>(t: &'s DeleteTarget, out: &mut Vec<&'s BindMarker>) {
    if let DeleteTarget::Element { key, .. } = t {
        term_markers(key, out);
    }
}

fn in_markers<'s>(v: &'s InValues, out: &mut Vec<&'s BindMarker>) {
    match v {
        InValues::List(items) => items.iter().for_each(|t| term_markers(t, out)),
        InValues::Marker(m) => term_markers(m, out),
    }
}

fn relation_markers<'s>(relations: &'s [Relation], out: &mut Vec<&'s BindMarker>) {
    for r in relations {
        match r {
            Relation::Compare { value, .. } => term_markers(value, out),
            Relation::In { values, .. } => in_markers(values, out),
            Relation::MultiCompare { values: MultiValues::List(items), .. } => {
                items.iter().for_each(|t| term_markers(t, out))
            }
            Relation::MultiCompare { values: MultiValues::Marker(m), .. } => term_markers(m, out),
        }
    }
}

fn condition_markers<'s>(c: Option<&'s Condition>, out: &mut Vec<&'s BindMarker>) {
    let Some(Condition::Columns(conditions)) = c else { return };
    for c in conditions {
        match c {
            ColumnCondition::Compare { target, value, .. }
            | ColumnCondition::NotEqual { target, value }
            | ColumnCondition::Contains { target, value, .. } => {
                target_markers(target, out);
                term_markers(value, out);
            }
            ColumnCondition::In { target, values } => {
                target_markers(target, out);
                in_markers(values, out);
            }
        }
    }
}

fn term_markers<'s>(t: &'s Term, out: &mut Vec<&'s BindMarker>) {
    match t {
        Term::Bind(m) => out.push(m),
        Term::Literal(l) => match l {
            Literal::List(items)
            | Literal::Set(items)
            | Literal::Tuple(items)
            | Literal::Function { args: items, .. } => items.iter().for_each(|t| term_markers(t, out)),
            Literal::Map(entries) => entries.iter().for_each(|(k, v)| {
                term_markers(k, out);
                term_markers(v, out);
            }),
            Literal::Udt(fields) => fields.iter().for_each(|(_, v)| term_markers(v, out)),
            _ => {}
        },
    }
}

// ---------------------------------------------------------------- lexer

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
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
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

impl Token {
    /// The lowercased word of an unquoted identifier.
    fn keyword(&self) -> Option<String> {
        match &self.tok {
            Tok::Ident(s) => Some(s.to_ascii_lowercase()),
            _ => None,
        }
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.tok, Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }
    fn is_punct(&self, p: &str) -> bool {
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

fn is_reserved(word: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

/// Words that are literals in term position.
fn is_literal_word(word: &str) -> bool {
    ["null", "true", "false", "nan", "infinity"].iter().any(|r| r.eq_ignore_ascii_case(word))
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

const PUNCTS: &[&str] =
    &["<=", ">=", "!=", "(", ")", "[", "]", "{", "}", ",", ";", ".", ":", "=", "<", ">", "+", "-", "?", "*"];

const DURATION_UNITS: &[&str] = &["y", "mo", "w", "d", "h", "m", "s", "ms", "us", "µs", "μs", "ns"];

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
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

    fn skip_trivia(&mut self) -> Result<(), DmlError> {
        let b = self.text.as_bytes();
        loop {
            let rest = &b[self.pos..];
            if rest.first().is_some_and(u8::is_ascii_whitespace) {
                self.pos += 1;
            } else if rest.starts_with(b"--") || rest.starts_with(b"//") {
                self.pos = self.run(self.pos, |c| c != b'\n');
            } else if rest.starts_with(b"/*") {
                let end = self.text[self.pos + 2..].find("*/").ok_or_else(|| self.syntax(b.len(), "`*/`"))?;
                self.pos += 2 + end + 2;
            } else {
                return Ok(());
            }
        }
    }

    fn next(&mut self) -> Result<Token, DmlError> {
        self.skip_trivia()?;
        let (text, b, start) = (self.text, self.text.as_bytes(), self.pos);
        let at = |i: usize| b.get(i).copied().unwrap_or(0);
        let tok = if start >= b.len() {
            Tok::Eof
        } else if uuid_at(&b[start..]) {
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
            self.pos = self.run(start, is_ident_byte);
            Tok::Ident(text[start..self.pos].into())
        } else if at(start) == b'"' || at(start) == b'\'' {
            let quote = text[start..=start].chars().next().unwrap_or('"');
            let s = self.quoted(start, quote)?;
            if quote == '\'' {
                Tok::Str(s)
            } else if s.is_empty() {
                return Err(DmlError::Invalid { offset: start, message: "empty quoted identifier".into() });
            } else {
                Tok::Quoted(s)
            }
        } else if b[start..].starts_with(b"$$") {
            let end = text[start + 2..].find("$$").ok_or_else(|| self.syntax(b.len(), "`$$`"))?;
            self.pos = start + 2 + end + 2;
            Tok::Str(text[start + 2..start + 2 + end].into())
        } else if let Some(p) = PUNCTS.iter().find(|p| b[start..].starts_with(p.as_bytes())) {
            self.pos += p.len();
            Tok::Punct(p)
        } else {
            return Err(self.syntax(start, "a token"));
        };
        Ok(Token { tok, start, end: self.pos })
    }

    /// A `'string'` or `"identifier"` whose opening quote is at `start`;
    /// a doubled quote stands for one.
    fn quoted(&mut self, start: usize, quote: char) -> Result<String, DmlError> {
        let mut out = String::new();
        let mut chars = self.text[start + 1..].char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != quote {
                out.push(c);
            } else if chars.peek().is_some_and(|(_, n)| *n == quote) {
                out.push(quote);
                chars.next();
            } else {
                self.pos = start + 1 + i + 1;
                return Ok(out);
            }
        }
        Err(self.syntax(self.text.len(), &format!("closing `{quote}`")))
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

// ---------------------------------------------------------------- parser

/// Nesting limit for literals, so hostile input cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    lexer: Lexer<'a>,
    ahead: VecDeque<Token>,
    next_bind: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&mut self, n: usize) -> Result<&Token, DmlError> {
        while self.ahead.len() <= n {
            let t = self.lexer.next()?;
            self.ahead.push_back(t);
        }
        Ok(&self.ahead[n])
    }

    fn bump(&mut self) -> Result<Token, DmlError> {
        match self.ahead.pop_front() {
            Some(t) => Ok(t),
            None => self.lexer.next(),
        }
    }

    fn expected<T>(&mut self, what: &str) -> Result<T, DmlError> {
        let t = self.peek(0)?.clone();
        let found = match t.tok {
            Tok::Eof => "end of input".to_string(),
            _ => format!("`{}`", &self.lexer.text[t.start..t.end]),
        };
        Err(DmlError::Syntax { offset: t.start, expected: what.into(), found })
    }

    fn invalid<T>(&mut self, offset: usize, message: &str) -> Result<T, DmlError> {
        Err(DmlError::Invalid { offset, message: message.into() })
    }

    fn at_kw(&mut self, kw: &str) -> Result<bool, DmlError> {
        Ok(self.peek(0)?.is_kw(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> Result<bool, DmlError> {
        let yes = self.at_kw(kw)?;
        if yes {
            self.bump()?;
        }
        Ok(yes)
    }

    fn expect_kw(&mut self, kw: &str) -> Result<(), DmlError> {
        if self.eat_kw(kw)? {
            Ok(())
        } else {
            self.expected(&format!("`{}`", kw.to_ascii_uppercase()))
        }
    }

    fn eat_punct(&mut self, p: &str) -> Result<bool, DmlError> {
        let yes = self.peek(0)?.is_punct(p);
        if yes {
            self.bump()?;
        }
        Ok(yes)
    }

    fn expect_punct(&mut self, p: &str) -> Result<(), DmlError> {
        if self.eat_punct(p)? {
            Ok(())
        } else {
            self.expected(&format!("`{p}`"))
        }
    }

    fn expect_end(&mut self) -> Result<(), DmlError> {
        if self.peek(0)?.tok == Tok::Eof {
            Ok(())
        } else {
            self.expected("end of statement")
        }
    }

    /// `item (, item)*` followed by `close`.
    fn list<T>(
        &mut self,
        close: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, DmlError>,
    ) -> Result<Vec<T>, DmlError> {
        let mut out = vec![item(self)?];
        while self.eat_punct(",")? {
            out.push(item(self)?);
        }
        self.expect_punct(close)?;
        Ok(out)
    }

    /// An identifier: unquoted (lowercased, not reserved) or quoted.
    fn ident(&mut self, what: &str) -> Result<String, DmlError> {
        let name = match &self.peek(0)?.tok {
            Tok::Ident(s) if !is_reserved(s) => s.to_ascii_lowercase(),
            Tok::Quoted(s) => s.clone(),
            _ => return self.expected(what),
        };
        self.bump()?;
        Ok(name)
    }

    fn table_name(&mut self) -> Result<TableName, DmlError> {
        let first = self.ident("a table name")?;
        if self.eat_punct(".")? {
            Ok(TableName { keyspace: Some(first), table: self.ident("a table name")? })
        } else {
            Ok(TableName { keyspace: None, table: first })
        }
    }

    fn simple_statement(&mut self) -> Result<Statement, DmlError> {
        match self.peek(0)?.keyword().as_deref() {
            Some("insert") => self.insert(),
            Some("update") => self.update(),
            Some("delete") => self.delete(),
            _ => self.expected("`INSERT`, `UPDATE` or `DELETE`"),
        }
    }

    fn insert(&mut self) -> Result<Statement, DmlError> {
        self.expect_kw("insert")?;
        self.expect_kw("into")?;
        let table = self.table_name()?;
        if self.at_kw("json")? {
            return Err(DmlError::Unsupported("INSERT JSON".into()));
        }
        self.expect_punct("(")?;
        let columns = self.list(")", |p| p.ident("a column name"))?;
        self.expect_kw("values")?;
        let offset = self.peek(0)?.start;
        self.expect_punct("(")?;
        let values = self.list(")", Self::term)?;
        if columns.len() != values.len() {
            return self.invalid(offset, "unmatched column names/values");
        }
        let (mut if_not_exists, mut using) = (false, None);
        loop {
            if !if_not_exists && self.eat_kw("if")? {
                self.expect_kw("not")?;
                self.expect_kw("exists")?;
                if_not_exists = true;
            } else if using.is_none() && self.at_kw("using")? {
                using = Some(self.using(true)?);
            } else {
                break;
            }
        }
        Ok(Statement::Insert(Insert { table, columns, values, if_not_exists, using: using.unwrap_or_default() }))
    }

    fn update(&mut self) -> Result<Statement, DmlError> {
        self.expect_kw("update")?;
        let table = self.table_name()?;
        let using = if self.at_kw("using")? { self.using(true)? } else { Using::default() };
        self.expect_kw("set")?;
        let mut assignments = vec![self.assignment()?];
        while self.eat_punct(",")? {
            assignments.push(self.assignment()?);
        }
        let relations = self.where_clause()?;
        let condition = self.condition()?;
        Ok(Statement::Update(Update { table, using, assignments, relations, condition }))
    }

    fn delete(&mut self) -> Result<Statement, DmlError> {
        self.expect_kw("delete")?;
        let mut targets = Vec::new();
        if !self.at_kw("from")? {
            targets.push(self.target()?);
            while self.eat_punct(",")? {
                targets.push(self.target()?);
            }
        }
        self.expect_kw("from")?;
        let table = self.table_name()?;
        let using = if self.at_kw("using")? { self.using(false)? } else { Using::default() };
        let relations = self.where_clause()?;
        let condition = self.condition()?;
        Ok(Statement::Delete(Delete { table, targets, using, relations, condition }))
    }

    fn batch(&mut self) -> Result<Statement, DmlError> {
        self.expect_kw("begin")?;
        let kind = if self.eat_kw("unlogged")? {
            BatchKind::Unlogged
        } else if self.eat_kw("counter")? {
            BatchKind::Counter
        } else {
            BatchKind::Logged
        };
        self.expect_kw("batch")?;
        let using = if self.at_kw("using")? { self.using(false)? } else { Using::default() };
        let mut statements = Vec::new();
        while !self.at_kw("apply")? {
            match self.peek(0)?.keyword().as_deref() {
                Some("insert" | "update" | "delete") => statements.push(self.simple_statement()?),
                _ => return self.expected("`INSERT`, `UPDATE`, `DELETE` or `APPLY BATCH`"),
            }
            self.eat_punct(";")?;
        }
        self.expect_kw("apply")?;
        self.expect_kw("batch")?;
        Ok(Statement::Batch(Batch { kind, using, statements }))
    }

    /// `USING item (AND item)*`; TTL only where `ttl` allows it.
    fn using(&mut self, ttl: bool) -> Result<Using, DmlError> {
        self.expect_kw("using")?;
        let mut u = Using::default();
        loop {
            let t = self.peek(0)?.clone();
            let (slot, value) = match t.keyword().as_deref() {
                Some("ttl") if !ttl => return self.invalid(t.start, "USING TTL is not allowed here (only TIMESTAMP)"),
                Some("ttl") => (&mut u.ttl, self.bump().and_then(|_| self.int_value())?),
                Some("timestamp") => (&mut u.timestamp, self.bump().and_then(|_| self.int_value())?),
                Some("timeout") => (&mut u.timeout, self.bump().and_then(|_| self.duration_value())?),
                _ => return self.expected("`TTL`, `TIMESTAMP` or `TIMEOUT`"),
            };
            if slot.replace(value).is_some() {
                return self.invalid(t.start, "repeated USING option");
            }
            if !self.eat_kw("and")? {
                return Ok(u);
            }
        }
    }

    fn int_value(&mut self) -> Result<Term, DmlError> {
        if matches!(self.peek(0)?.tok, Tok::Int(_)) || self.at_marker()? {
            self.term()
        } else {
            self.expected("an integer or a bind marker")
        }
    }

    fn duration_value(&mut self) -> Result<Term, DmlError> {
        if matches!(self.peek(0)?.tok, Tok::Duration(_)) || self.at_marker()? {
            self.term()
        } else {
            self.expected("a duration or a bind marker")
        }
    }

    fn assignment(&mut self) -> Result<Assignment, DmlError> {
        let column = self.ident("a column name")?;
        if self.eat_punct("[")? {
            let key = self.term()?;
            self.expect_punct("]")?;
            self.expect_punct("=")?;
            return Ok(Assignment::SetElement { column, key, value: self.term()? });
        }
        if self.eat_punct(".")? {
            let field = self.ident("a field name")?;
            self.expect_punct("=")?;
            return Ok(Assignment::SetField { column, field, value: self.term()? });
        }
        for (op, append) in [("+", true), ("-", false)] {
            if self.peek(0)?.is_punct(op) && self.peek(1)?.is_punct("=") {
                self.bump()?;
                self.bump()?;
                let value = self.term()?;
                return Ok(if append {
                    Assignment::Append { column, value }
                } else {
                    Assignment::Remove { column, value }
                });
            }
        }
        self.expect_punct("=")?;
        let next_is_call = { self.peek(1)?.is_punct("(") || self.peek(1)?.is_punct(".") };
        let column_ref = match &self.peek(0)?.tok {
            Tok::Ident(s) => !is_literal_word(s) && !is_reserved(s) && !next_is_call,
            Tok::Quoted(_) => !next_is_call,
            _ => false,
        };
        if column_ref {
            self.same_column(&column)?;
            if self.eat_punct("+")? {
                Ok(Assignment::Append { column, value: self.term()? })
            } else if self.eat_punct("-")? {
                Ok(Assignment::Remove { column, value: self.term()? })
            } else if matches!(&self.peek(0)?.tok, Tok::Int(s) if s.starts_with('-')) {
                // `c = c -1` lexes as `c`, `-1`: an addition, as in Cassandra.
                Ok(Assignment::Append { column, value: self.term()? })
            } else {
                self.expected("`+` or `-`")
            }
        } else {
            let value = self.term()?;
            if self.eat_punct("+")? {
                self.same_column(&column)?;
                Ok(Assignment::Prepend { column, value })
            } else {
                Ok(Assignment::Set { column, value })
            }
        }
    }

    /// The column of `c = c + v` / `c = v + c` must be the assigned one.
    fn same_column(&mut self, column: &str) -> Result<(), DmlError> {
        let offset = self.peek(0)?.start;
        if self.ident("a column name")? == column {
            Ok(())
        } else {
            self.invalid(
                offset,
                &format!("only `{column} = {column} + <value>`, `- <value>` or `<value> + {column}` are supported"),
            )
        }
    }

    fn target(&mut self) -> Result<DeleteTarget, DmlError> {
        let column = self.ident("a column name")?;
        if self.eat_punct("[")? {
            let key = self.term()?;
            self.expect_punct("]")?;
            Ok(DeleteTarget::Element { column, key })
        } else if self.eat_punct(".")? {
            Ok(DeleteTarget::Field { column, field: self.ident("a field name")? })
        } else {
            Ok(DeleteTarget::Column(column))
        }
    }

    fn where_clause(&mut self) -> Result<Vec<Relation>, DmlError> {
        self.expect_kw("where")?;
        let mut relations = vec![self.relation()?];
        while self.eat_kw("and")? {
            relations.push(self.relation()?);
        }
        Ok(relations)
    }

    /// A comparison operator; `None` is `!=`.
    fn operator(&mut self) -> Result<Option<CompareOp>, DmlError> {
        let op = match self.peek(0)?.tok {
            Tok::Punct("=") => Some(CompareOp::Eq),
            Tok::Punct("!=") => None,
            Tok::Punct("<") => Some(CompareOp::Lt),
            Tok::Punct("<=") => Some(CompareOp::Le),
            Tok::Punct(">") => Some(CompareOp::Gt),
            Tok::Punct(">=") => Some(CompareOp::Ge),
            _ => return self.expected("an operator"),
        };
        self.bump()?;
        Ok(op)
    }

    /// A comparison operator other than `!=` (not allowed in WHERE).
    fn where_op(&mut self) -> Result<CompareOp, DmlError> {
        self.operator()?.ok_or_else(|| DmlError::Unsupported("`!=` in WHERE".into()))
    }

    fn relation(&mut self) -> Result<Relation, DmlError> {
        if self.at_kw("token")? && self.peek(1)?.is_punct("(") {
            return Err(DmlError::Unsupported("TOKEN() relations".into()));
        }
        if self.eat_punct("(")? {
            let columns = self.list(")", |p| p.ident("a column name"))?;
            if self.at_kw("in")? {
                return Err(DmlError::Unsupported("tuple IN relations".into()));
            }
            let op = self.where_op()?;
            let values = if let Some(m) = self.marker()? {
                MultiValues::Marker(Term::Bind(m))
            } else if self.eat_punct("(")? {
                MultiValues::List(self.list(")", Self::term)?)
            } else {
                return self.expected("a tuple or a bind marker");
            };
            return Ok(Relation::MultiCompare { columns, op, values });
        }
        let column = self.ident("a column name")?;
        if self.peek(0)?.is_punct("[") || self.peek(0)?.is_punct(".") {
            return Err(DmlError::Unsupported("relations on collection elements or fields".into()));
        }
        if self.eat_kw("in")? {
            return Ok(Relation::In { column, values: self.in_values()? });
        }
        if let Some(kw @ ("contains" | "like" | "is")) = self.peek(0)?.keyword().as_deref() {
            return Err(DmlError::Unsupported(format!("{} relations", kw.to_ascii_uppercase())));
        }
        let op = self.where_op()?;
        Ok(Relation::Compare { column, op, value: self.term()? })
    }

    /// After `IN`: `?`, `:name` or `(term, ...)` (possibly empty).
    fn in_values(&mut self) -> Result<InValues, DmlError> {
        if let Some(m) = self.marker()? {
            return Ok(InValues::Marker(Term::Bind(m)));
        }
        self.expect_punct("(")?;
        if self.eat_punct(")")? {
            return Ok(InValues::List(Vec::new()));
        }
        Ok(InValues::List(self.list(")", Self::term)?))
    }

    fn condition(&mut self) -> Result<Option<Condition>, DmlError> {
        if !self.eat_kw("if")? {
            return Ok(None);
        }
        // `IF EXISTS`, unless `exists` is a column being tested.
        let t1 = self.peek(1)?.clone();
        let tests_column = ["=", "!=", "<", "<=", ">", ">=", "[", "."].iter().any(|p| t1.is_punct(p))
            || t1.is_kw("in")
            || t1.is_kw("contains");
        if self.at_kw("exists")? && !tests_column {
            self.bump()?;
            return Ok(Some(Condition::IfExists));
        }
        let mut conditions = vec![self.column_condition()?];
        while self.eat_kw("and")? {
            conditions.push(self.column_condition()?);
        }
        Ok(Some(Condition::Columns(conditions)))
    }

    fn column_condition(&mut self) -> Result<ColumnCondition, DmlError> {
        let target = self.target()?;
        if self.eat_kw("in")? {
            Ok(ColumnCondition::In { target, values: self.in_values()? })
        } else if self.eat_kw("contains")? {
            let key = self.eat_kw("key")?;
            Ok(ColumnCondition::Contains { target, key, value: self.term()? })
        } else {
            let op = self.operator()?;
            let value = self.term()?;
            Ok(match op {
                Some(op) => ColumnCondition::Compare { target, op, value },
                None => ColumnCondition::NotEqual { target, value },
            })
        }
    }

    fn at_marker(&mut self) -> Result<bool, DmlError> {
        let t = self.peek(0)?;
        Ok(t.is_punct("?") || t.is_punct(":"))
    }

    /// A bind marker, if one is next.
    fn marker(&mut self) -> Result<Option<BindMarker>, DmlError> {
        let name = if self.eat_punct("?")? {
            None
        } else if self.eat_punct(":")? {
            Some(self.ident("a bind marker name")?)
        } else {
            return Ok(None);
        };
        self.next_bind += 1;
        Ok(Some(BindMarker { index: self.next_bind - 1, name }))
    }

    fn term(&mut self) -> Result<Term, DmlError> {
        self.depth += 1;
        let r = if self.depth > MAX_DEPTH {
            let offset = self.peek(0)?.start;
            self.invalid(offset, "literal nested too deeply")
        } else {
            self.term_inner()
        };
        self.depth -= 1;
        r
    }

    fn term_inner(&mut self) -> Result<Term, DmlError> {
        if let Some(m) = self.marker()? {
            return Ok(Term::Bind(m));
        }
        let t = self.peek(0)?.clone();
        let literal = match &t.tok {
            Tok::Str(s) => Literal::String(s.clone()),
            Tok::Int(s) => Literal::Integer(s.clone()),
            Tok::Float(s) => Literal::Float(s.clone()),
            Tok::Uuid(s) => Literal::Uuid(s.clone()),
            Tok::Blob(b) => Literal::Blob(b.clone()),
            Tok::Duration(s) => Literal::Duration(s.clone()),
            Tok::Punct("-") => {
                self.bump()?;
                return match self.peek(0)?.keyword().as_deref() {
                    Some(w @ ("nan" | "infinity")) => {
                        let s = if w == "nan" { "-NaN" } else { "-Infinity" };
                        self.bump()?;
                        Ok(Term::Literal(Literal::Float(s.into())))
                    }
                    _ => self.expected("a number"),
                };
            }
            Tok::Punct("[") => {
                self.bump()?;
                let items = if self.eat_punct("]")? { Vec::new() } else { self.list("]", Self::term)? };
                return Ok(Term::Literal(Literal::List(items)));
            }
            Tok::Punct("{") => return self.braces(),
            Tok::Punct("(") => return self.tuple(),
            Tok::Ident(word) if is_literal_word(word) => match word.to_ascii_lowercase().as_str() {
                "null" => Literal::Null,
                "true" => Literal::Bool(true),
                "false" => Literal::Bool(false),
                "nan" => Literal::Float("NaN".into()),
                _ => Literal::Float("Infinity".into()),
            },
            Tok::Ident(_) | Tok::Quoted(_) if self.peek(1)?.is_punct("(") || self.peek(1)?.is_punct(".") => {
                return self.function();
            }
            _ => return self.expected("a term"),
        };
        self.bump()?;
        Ok(Term::Literal(literal))
    }

    /// A function name (not checked against reserved words: `token` is
    /// one) as written, lowercased unless quoted.
    fn function_name_part(&mut self) -> Result<String, DmlError> {
        let name = match &self.peek(0)?.tok {
            Tok::Ident(s) => s.to_ascii_lowercase(),
            Tok::Quoted(s) => s.clone(),
            _ => return self.expected("a function name"),
        };
        self.bump()?;
        Ok(name)
    }

    fn function(&mut self) -> Result<Term, DmlError> {
        let mut name = self.function_name_part()?;
        if self.eat_punct(".")? {
            name = format!("{name}.{}", self.function_name_part()?);
        }
        self.expect_punct("(")?;
        let args = if self.eat_punct(")")? { Vec::new() } else { self.list(")", Self::term)? };
        Ok(Term::Literal(Literal::Function { name, args }))
    }

    /// `{}`, `{a, b}`, `{k: v}`, `{field: v}`.
    fn braces(&mut self) -> Result<Term, DmlError> {
        self.expect_punct("{")?;
        if self.eat_punct("}")? {
            return Ok(Term::Literal(Literal::Map(Vec::new())));
        }
        let field_key = match &self.peek(0)?.tok {
            Tok::Ident(s) => !is_literal_word(s),
            Tok::Quoted(_) => true,
            _ => false,
        };
        if field_key && self.peek(1)?.is_punct(":") {
            let fields = self.list("}", |p| {
                let name = p.ident("a field name")?;
                p.expect_punct(":")?;
                Ok((name, p.term()?))
            })?;
            return Ok(Term::Literal(Literal::Udt(fields)));
        }
        let first = self.term()?;
        if self.eat_punct(":")? {
            let mut entries = vec![(first, self.term()?)];
            while self.eat_punct(",")? {
                let k = self.term()?;
                self.expect_punct(":")?;
                entries.push((k, self.term()?));
            }
            self.expect_punct("}")?;
            return Ok(Term::Literal(Literal::Map(entries)));
        }
        let mut items = vec![first];
        if self.eat_punct(",")? {
            items.extend(self.list("}", Self::term)?);
        } else {
            self.expect_punct("}")?;
        }
        Ok(Term::Literal(Literal::Set(items)))
    }

    /// `(a, b, ...)`; a type hint `(int) ?` is unsupported.
    fn tuple(&mut self) -> Result<Term, DmlError> {
        self.expect_punct("(")?;
        let hint = match &self.peek(0)?.tok {
            Tok::Ident(s) => !is_literal_word(s),
            Tok::Quoted(_) => true,
            _ => false,
        };
        if hint && (self.peek(1)?.is_punct(")") || self.peek(1)?.is_punct("<")) {
            return Err(DmlError::Unsupported("type hints such as `(int) ?`".into()));
        }
        Ok(Term::Literal(Literal::Tuple(self.list(")", Self::term)?)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn p(text: &str) -> Statement {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }
    fn err(text: &str) -> DmlError {
        parse(text).expect_err(text)
    }
    fn lit(l: Literal) -> Term {
        Term::Literal(l)
    }
    fn int(s: &str) -> Term {
        lit(Literal::Integer(s.into()))
    }
    fn text(s: &str) -> Term {
        lit(Literal::String(s.into()))
    }
    fn bind(index: usize) -> Term {
        Term::Bind(BindMarker { index, name: None })
    }
    fn named(index: usize, name: &str) -> Term {
        Term::Bind(BindMarker { index, name: Some(name.into()) })
    }
    fn table(ks: Option<&str>, t: &str) -> TableName {
        TableName { keyspace: ks.map(Into::into), table: t.into() }
    }
    fn insert(text: &str) -> Insert {
        match p(text) {
            Statement::Insert(i) => i,
            other => panic!("{other:?}"),
        }
    }
    fn update(text: &str) -> Update {
        match p(text) {
            Statement::Update(u) => u,
            other => panic!("{other:?}"),
        }
    }
    fn delete(text: &str) -> Delete {
        match p(text) {
            Statement::Delete(d) => d,
            other => panic!("{other:?}"),
        }
    }
    /// The literal of `INSERT INTO t (c) VALUES (<value>)`.
    fn value(value: &str) -> Literal {
        match insert(&format!("INSERT INTO t (c) VALUES ({value})")).values.remove(0) {
            Term::Literal(l) => l,
            other => panic!("{other:?}"),
        }
    }
    fn syntax(text: &str) -> (usize, String, String) {
        match err(text) {
            DmlError::Syntax { offset, expected, found } => (offset, expected, found),
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn insert_with_using_in_both_orders() {
        let i = insert("INSERT INTO ks.t (pk, \"CK\", v) VALUES (1, ?, :v) USING TTL 5 AND TIMESTAMP ?;");
        assert_eq!(i.table, table(Some("ks"), "t"));
        assert_eq!(i.columns, ["pk", "CK", "v"]);
        assert_eq!(i.values, [int("1"), bind(0), named(1, "v")]);
        assert_eq!(i.using, Using { ttl: Some(int("5")), timestamp: Some(bind(2)), timeout: None });
        assert!(!i.if_not_exists);
        let i = insert("insert into T (A) values ('x') using timestamp 123 and ttl :t");
        assert_eq!((i.table.table.as_str(), i.columns[0].as_str()), ("t", "a"));
        assert_eq!(i.using, Using { ttl: Some(named(0, "t")), timestamp: Some(int("123")), timeout: None });
        let s = p("INSERT INTO t (a) VALUES (1) IF NOT EXISTS USING TTL 1");
        assert!(s.is_conditional());
        let Statement::Insert(i) = &s else { panic!() };
        assert!(i.if_not_exists && i.using.ttl.is_some());
        let i = insert("INSERT INTO t (a) VALUES (1) USING TIMESTAMP 1 IF NOT EXISTS");
        assert!(i.if_not_exists && i.using.timestamp.is_some());
        let i = insert("INSERT INTO t (a) VALUES (1) USING TIMEOUT 5s AND TTL ?");
        assert_eq!(i.using.timeout, Some(lit(Literal::Duration("5s".into()))));
        assert!(matches!(err("INSERT INTO t (a) VALUES (1) USING TTL 1 AND TTL 2"), DmlError::Invalid { .. }));
        assert!(matches!(err("INSERT INTO t (a, b) VALUES (1)"), DmlError::Invalid { offset: 28, .. }));
        assert_eq!(err("INSERT INTO t JSON '{\"a\": 1}'"), DmlError::Unsupported("INSERT JSON".into()));
        assert_eq!(syntax("INSERT INTO t (a) VALUES (1) USING TTL 'x'").1, "an integer or a bind marker");
    }

    #[test]
    fn every_assignment_form() {
        let u = update(
            "UPDATE t USING TTL 3 SET a = 1, b = b + [1], c = [2] + c, d = d - {3}, m[?] = 'x', u.f = 2, \
             e += {1}, f -= {2}, n = n -1, l[0] = null, \"Q\" = \"Q\" + ? WHERE pk = 0",
        );
        use Assignment as A;
        assert_eq!(
            u.assignments,
            [
                A::Set { column: "a".into(), value: int("1") },
                A::Append { column: "b".into(), value: lit(Literal::List(vec![int("1")])) },
                A::Prepend { column: "c".into(), value: lit(Literal::List(vec![int("2")])) },
                A::Remove { column: "d".into(), value: lit(Literal::Set(vec![int("3")])) },
                A::SetElement { column: "m".into(), key: bind(0), value: text("x") },
                A::SetField { column: "u".into(), field: "f".into(), value: int("2") },
                A::Append { column: "e".into(), value: lit(Literal::Set(vec![int("1")])) },
                A::Remove { column: "f".into(), value: lit(Literal::Set(vec![int("2")])) },
                A::Append { column: "n".into(), value: int("-1") },
                A::SetElement { column: "l".into(), key: int("0"), value: lit(Literal::Null) },
                A::Append { column: "Q".into(), value: bind(1) },
            ]
        );
        assert_eq!(u.assignments[4].column(), "m");
        assert_eq!(u.using.ttl, Some(int("3")));
        assert_eq!(u.relations, [Relation::Compare { column: "pk".into(), op: CompareOp::Eq, value: int("0") }]);
        assert!(u.condition.is_none());
        // A function call on the right is a value, not a column.
        let u = update("UPDATE t SET a = now(), b = ? + b WHERE pk = 0");
        assert_eq!(
            u.assignments[0],
            A::Set { column: "a".into(), value: lit(Literal::Function { name: "now".into(), args: vec![] }) }
        );
        assert_eq!(u.assignments[1], A::Prepend { column: "b".into(), value: bind(0) });
        assert!(matches!(err("UPDATE t SET a = b + 1 WHERE pk = 0"), DmlError::Invalid { offset: 17, .. }));
        assert!(matches!(err("UPDATE t SET a = 1 + b WHERE pk = 0"), DmlError::Invalid { offset: 21, .. }));
        assert_eq!(syntax("UPDATE t SET a = a * 2 WHERE pk = 0").1, "`+` or `-`");
    }

    #[test]
    fn delete_forms() {
        let d = delete("DELETE FROM t WHERE pk = 0");
        assert!(d.targets.is_empty() && d.condition.is_none());
        let d = delete("DELETE FROM ks.t USING TIMESTAMP ? WHERE pk = ? AND ck = 1");
        assert_eq!(d.using.timestamp, Some(bind(0)));
        assert_eq!(d.relations[1], Relation::Compare { column: "ck".into(), op: CompareOp::Eq, value: int("1") });
        let d = delete("DELETE FROM t WHERE pk = 0 AND ck > 1 AND ck <= 2 AND c2 < 3 AND c3 >= 4");
        let ops: Vec<CompareOp> = d
            .relations
            .iter()
            .map(|r| match r {
                Relation::Compare { op, .. } => *op,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ops, [CompareOp::Eq, CompareOp::Gt, CompareOp::Le, CompareOp::Lt, CompareOp::Ge]);
        let d = delete("DELETE FROM t WHERE pk = 0 AND (ck1, ck2) > (1, ?) AND (ck1, ck2) <= ?");
        assert_eq!(
            d.relations[1..],
            [
                Relation::MultiCompare {
                    columns: vec!["ck1".into(), "ck2".into()],
                    op: CompareOp::Gt,
                    values: MultiValues::List(vec![int("1"), bind(0)]),
                },
                Relation::MultiCompare {
                    columns: vec!["ck1".into(), "ck2".into()],
                    op: CompareOp::Le,
                    values: MultiValues::Marker(bind(1)),
                },
            ]
        );
        let d = delete("DELETE FROM t WHERE pk IN ? AND ck IN (1, ?, 3) AND c2 IN ()");
        assert_eq!(d.relations[0], Relation::In { column: "pk".into(), values: InValues::Marker(bind(0)) });
        assert_eq!(
            d.relations[1],
            Relation::In { column: "ck".into(), values: InValues::List(vec![int("1"), bind(1), int("3")]) }
        );
        assert_eq!(d.relations[2], Relation::In { column: "c2".into(), values: InValues::List(vec![]) });
        let d = delete("DELETE v, m[?], u.f, \"X\" FROM t WHERE pk = ?");
        assert_eq!(
            d.targets,
            [
                DeleteTarget::Column("v".into()),
                DeleteTarget::Element { column: "m".into(), key: bind(0) },
                DeleteTarget::Field { column: "u".into(), field: "f".into() },
                DeleteTarget::Column("X".into()),
            ]
        );
        assert_eq!(d.targets[2].column(), "u");
        assert_eq!(p("DELETE v, m[?], u.f, \"X\" FROM t WHERE pk = ?").bind_count(), 2);
        assert!(matches!(err("DELETE FROM t USING TTL 5 WHERE pk = 0"), DmlError::Invalid { offset: 20, .. }));
        assert_eq!(err("DELETE FROM t WHERE pk = 0 AND ck != 1"), DmlError::Unsupported("`!=` in WHERE".into()));
        assert_eq!(err("DELETE FROM t WHERE token(pk) > 0"), DmlError::Unsupported("TOKEN() relations".into()));
        assert_eq!(
            err("DELETE FROM t WHERE pk = 0 AND s CONTAINS 1"),
            DmlError::Unsupported("CONTAINS relations".into())
        );
        assert_eq!(
            err("DELETE FROM t WHERE pk = 0 AND (a, b) IN ((1, 2))"),
            DmlError::Unsupported("tuple IN relations".into())
        );
        assert!(matches!(err("DELETE FROM t WHERE m[1] = 2"), DmlError::Unsupported(_)));
    }

    #[test]
    fn conditions() {
        let s = p("UPDATE t SET v = 1 WHERE pk = 0 IF EXISTS");
        assert!(s.is_conditional());
        let Statement::Update(u) = s else { panic!() };
        assert_eq!(u.condition, Some(Condition::IfExists));
        let d = delete("DELETE FROM t WHERE pk = 0 IF EXISTS");
        assert_eq!(d.condition, Some(Condition::IfExists));
        let s = p("UPDATE t SET v = ? WHERE pk = ? IF v = 1 AND m[?] != 2 AND u.f > ? AND x IN (1, ?) AND y IN ? \
                   AND s CONTAINS KEY ? AND l CONTAINS 3");
        assert_eq!(s.bind_count(), 7);
        assert!(s.bind_markers().iter().enumerate().all(|(i, m)| m.index == i));
        let Statement::Update(u) = s else { panic!() };
        let Some(Condition::Columns(c)) = u.condition else { panic!() };
        assert_eq!(c.len(), 7);
        assert_eq!(
            c[0],
            ColumnCondition::Compare { target: DeleteTarget::Column("v".into()), op: CompareOp::Eq, value: int("1") }
        );
        assert_eq!(
            c[1],
            ColumnCondition::NotEqual {
                target: DeleteTarget::Element { column: "m".into(), key: bind(2) },
                value: int("2")
            }
        );
        assert_eq!(
            c[4],
            ColumnCondition::In { target: DeleteTarget::Column("y".into()), values: InValues::Marker(bind(5)) }
        );
        assert_eq!(
            c[5],
            ColumnCondition::Contains { target: DeleteTarget::Column("s".into()), key: true, value: bind(6) }
        );
        // `exists` can be a column.
        let u = update("UPDATE t SET v = 1 WHERE pk = 0 IF exists = true");
        assert!(matches!(u.condition, Some(Condition::Columns(_))));
        assert!(!p("UPDATE t SET v = 1 WHERE pk = 0").is_conditional());
        assert!(parse("UPDATE t SET v = 1 WHERE pk = 0 IF NOT EXISTS").is_err());
    }

    #[test]
    fn named_markers_and_quoted_identifiers() {
        let s = p("UPDATE \"Ks\".\"My\"\"Table\" SET \"Val\" = :\"Name\", w = :w WHERE \"PK\" = :pk AND ck = ?");
        let names: Vec<Option<&str>> = s.bind_markers().iter().map(|m| m.name.as_deref()).collect();
        assert_eq!(names, [Some("Name"), Some("w"), Some("pk"), None]);
        assert_eq!(s.tables(), [&table(Some("Ks"), "My\"Table")]);
        let Statement::Update(u) = s else { panic!() };
        assert_eq!(u.assignments[0].column(), "Val");
        assert!(matches!(&u.relations[0], Relation::Compare { column, .. } if column == "PK"));
        assert!(matches!(err("UPDATE t SET \"\" = 1 WHERE pk = 0"), DmlError::Invalid { offset: 13, .. }));
        // Reserved words need quotes; unreserved keywords do not.
        let i = insert("INSERT INTO t (key, ttl, timestamp, \"select\") VALUES (1, 2, 3, 4)");
        assert_eq!(i.columns, ["key", "ttl", "timestamp", "select"]);
        assert_eq!(syntax("INSERT INTO t (select) VALUES (1)").1, "a column name");
    }

    #[test]
    fn every_literal_kind() {
        use Literal as L;
        let cases: Vec<(&str, Literal)> = vec![
            ("null", L::Null),
            ("TRUE", L::Bool(true)),
            ("false", L::Bool(false)),
            ("-12", L::Integer("-12".into())),
            ("123456789012345678901234567890", L::Integer("123456789012345678901234567890".into())),
            ("1.5", L::Float("1.5".into())),
            ("-2.5e-3", L::Float("-2.5e-3".into())),
            ("1E10", L::Float("1E10".into())),
            ("3.", L::Float("3.".into())),
            ("NaN", L::Float("NaN".into())),
            ("Infinity", L::Float("Infinity".into())),
            ("-Infinity", L::Float("-Infinity".into())),
            ("- NaN", L::Float("-NaN".into())),
            ("'it''s'", L::String("it's".into())),
            ("''", L::String(String::new())),
            ("'héllo ✓'", L::String("héllo ✓".into())),
            ("$$a'b$c$$", L::String("a'b$c".into())),
            ("0xCAFE01", L::Blob(vec![0xca, 0xfe, 0x01])),
            ("0x", L::Blob(vec![])),
            ("123e4567-e89b-12d3-a456-426614174000", L::Uuid("123e4567-e89b-12d3-a456-426614174000".into())),
            ("ABCDEF01-0000-1000-8000-000000000000", L::Uuid("ABCDEF01-0000-1000-8000-000000000000".into())),
            ("1h30m", L::Duration("1h30m".into())),
            ("-2d", L::Duration("-2d".into())),
            ("1mo2w3µs4NS", L::Duration("1mo2w3µs4NS".into())),
            ("P1DT2H", L::Duration("P1DT2H".into())),
            ("PT5M", L::Duration("PT5M".into())),
            ("P2W", L::Duration("P2W".into())),
            ("-P1Y", L::Duration("-P1Y".into())),
            ("P0001-02-03T04:05:06", L::Duration("P0001-02-03T04:05:06".into())),
            ("[]", L::List(vec![])),
            ("[1, [2, 3]]", L::List(vec![int("1"), lit(L::List(vec![int("2"), int("3")]))])),
            ("{1, 2}", L::Set(vec![int("1"), int("2")])),
            ("{'a'}", L::Set(vec![text("a")])),
            ("{}", L::Map(vec![])),
            (
                "{'a': 1, 'b': {2: 3}}",
                L::Map(vec![(text("a"), int("1")), (text("b"), lit(L::Map(vec![(int("2"), int("3"))])))]),
            ),
            ("{true: false}", L::Map(vec![(lit(L::Bool(true)), lit(L::Bool(false)))])),
            (
                "{a: 1, \"B\": 'x', c: null}",
                L::Udt(vec![("a".into(), int("1")), ("B".into(), text("x")), ("c".into(), lit(L::Null))]),
            ),
            ("(1, 'a', null)", L::Tuple(vec![int("1"), text("a"), lit(L::Null)])),
            ("(1)", L::Tuple(vec![int("1")])),
            ("now()", L::Function { name: "now".into(), args: vec![] }),
            (
                "toTimestamp(now())",
                L::Function {
                    name: "totimestamp".into(),
                    args: vec![lit(L::Function { name: "now".into(), args: vec![] })],
                },
            ),
            ("system.uuid()", L::Function { name: "system.uuid".into(), args: vec![] }),
            ("\"MyFn\"(1, 'a')", L::Function { name: "MyFn".into(), args: vec![int("1"), text("a")] }),
            ("[{a: (1, 2)}]", L::List(vec![lit(L::Udt(vec![("a".into(), lit(L::Tuple(vec![int("1"), int("2")])))]))])),
        ];
        for (text, want) in cases {
            assert_eq!(value(text), want, "{text}");
        }
        assert_eq!(value("{:k: ?}"), L::Map(vec![(named(0, "k"), bind(1))]));
        assert!(matches!(err("INSERT INTO t (c) VALUES (0xABC)"), DmlError::Invalid { offset: 26, .. }));
        assert_eq!(
            err("INSERT INTO t (c) VALUES ((int) ?)"),
            DmlError::Unsupported("type hints such as `(int) ?`".into())
        );
        assert_eq!(syntax("INSERT INTO t (c) VALUES (1abc)").0, 27);
        assert_eq!(syntax("INSERT INTO t (c) VALUES (1h3)").1, "a duration unit");
        assert_eq!(syntax("INSERT INTO t (c) VALUES (1¢)"), (27, "a separator after the number".into(), "`¢`".into()));
        assert_eq!(syntax("INSERT INTO t (c) VALUES (1h2¢)").1, "a duration unit");
        assert_eq!(syntax("INSERT INTO t (c) VALUES (- 1)").1, "a number");
        assert_eq!(syntax("INSERT INTO t (c) VALUES (abc)").1, "a term");
        assert_eq!(syntax("INSERT INTO t (c) VALUES ('abc)"), (31, "closing `'`".into(), "end of input".into()));
        assert_eq!(syntax("INSERT INTO t (c) VALUES ($$abc)").1, "`$$`");
        assert_eq!(syntax("INSERT INTO t (c) VALUES ({1: 2, 3})").1, "`:`");
        let deep = format!("INSERT INTO t (c) VALUES ({}1{})", "[".repeat(100), "]".repeat(100));
        assert!(matches!(err(&deep), DmlError::Invalid { .. }));
    }

    #[test]
    fn batches() {
        let s = p("BEGIN BATCH USING TIMESTAMP 10 \
                   INSERT INTO t (pk, v) VALUES (?, ?); \
                   UPDATE ks.u SET v = ? WHERE pk = ? \
                   DELETE FROM t WHERE pk = ?; \
                   APPLY BATCH;");
        assert_eq!(s.bind_count(), 5);
        assert_eq!(s.tables(), [&table(None, "t"), &table(Some("ks"), "u")]);
        assert!(!s.is_conditional());
        let Statement::Batch(b) = s else { panic!() };
        assert_eq!((b.kind, b.using.timestamp.clone(), b.statements.len()), (BatchKind::Logged, Some(int("10")), 3));
        let Statement::Update(u) = &b.statements[1] else { panic!() };
        assert_eq!(u.assignments[0], Assignment::Set { column: "v".into(), value: bind(2) });
        let Statement::Delete(d) = &b.statements[2] else { panic!() };
        assert_eq!(d.relations[0], Relation::Compare { column: "pk".into(), op: CompareOp::Eq, value: bind(4) });
        let s = p(
            "begin unlogged batch insert into t (a) values (1) update t set a = 2 where pk = 1 if exists apply batch",
        );
        assert!(s.is_conditional());
        assert!(matches!(s, Statement::Batch(Batch { kind: BatchKind::Unlogged, .. })));
        let s = p("BEGIN COUNTER BATCH USING TIMESTAMP ? UPDATE t SET c = c + ? WHERE pk = ? APPLY BATCH");
        assert!(matches!(&s, Statement::Batch(Batch { kind: BatchKind::Counter, .. })));
        assert_eq!(s.bind_markers().iter().map(|m| m.index).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(
            matches!(p("BEGIN BATCH APPLY BATCH"), Statement::Batch(Batch { statements, .. }) if statements.is_empty())
        );
        assert!(matches!(
            err("BEGIN BATCH USING TTL 5 INSERT INTO t (a) VALUES (1) APPLY BATCH"),
            DmlError::Invalid { offset: 18, .. }
        ));
        let (_, expected, found) = syntax("BEGIN BATCH SELECT * FROM t; APPLY BATCH");
        assert_eq!((expected.as_str(), found.as_str()), ("`INSERT`, `UPDATE`, `DELETE` or `APPLY BATCH`", "`SELECT`"));
        assert!(parse("BEGIN BATCH BEGIN BATCH APPLY BATCH APPLY BATCH").is_err());
        assert_eq!(syntax("BEGIN BATCH INSERT INTO t (a) VALUES (1)").2, "end of input");
    }

    #[test]
    fn error_messages() {
        let e = err("UPDATE t WHERE pk = 1");
        assert_eq!(e, DmlError::Syntax { offset: 9, expected: "`SET`".into(), found: "`WHERE`".into() });
        assert_eq!(e.to_string(), "expected `SET` at offset 9, found `WHERE`");
        assert_eq!(syntax("DELETE FROM t WHERE"), (19, "a column name".into(), "end of input".into()));
        assert_eq!(syntax("UPDATE t SET a = 1 WHERE pk = 1 garbage").1, "end of statement");
        assert_eq!(syntax("UPDATE t SET a = 1 WHERE pk = 1;;").1, "end of statement");
        assert_eq!(syntax("INSERT INTO t (a) VALUES (1) /* open").1, "`*/`");
        assert_eq!(syntax("INSERT INTO t (a) VALUES (#)").2, "`#`");
        assert_eq!(syntax("INSERT INTO t (a) VALUES (é)").2, "`é`");
        assert_eq!(syntax("DELETE FROM t WHERE pk + 1").1, "an operator");
        assert_eq!(syntax("DELETE FROM t WHERE pk ~ 1").1, "a token");
        for text in [
            "SELECT * FROM t",
            "CREATE TABLE t (a int PRIMARY KEY)",
            "",
            "  ",
            "-- only a comment",
            "use ks",
            ")))",
            "'unterminated",
            "/* x */ select 1",
            "TRUNCATE t",
            "APPLY BATCH",
        ] {
            assert_eq!(parse(text), Err(DmlError::NotDml), "{text:?}");
        }
    }

    #[test]
    fn comments_and_case() {
        let s = p("-- leading\ninsert /* inline */ INTO Ks.T (A) // trailing\n VaLuEs (1) ; -- after");
        assert_eq!(s.tables(), [&table(Some("ks"), "t")]);
        let d = delete("DeLeTe FrOm t WhErE pk = 1 AnD ck iN (1)");
        assert_eq!(d.relations.len(), 2);
    }

    #[test]
    fn prefixes_and_mutations_never_panic() {
        let statements = [
            "INSERT INTO ks.t (pk, \"CK\", v) VALUES (1, ?, :v) IF NOT EXISTS USING TTL 5 AND TIMESTAMP ?;",
            "UPDATE t USING TTL 3 SET a = 1, b = b + [1], c = [2] + c, m[?] = 'x''y', u.f = 2, n = n -1 WHERE pk = 0 IF a = 1",
            "DELETE v, m[?], u.f FROM t USING TIMESTAMP 5 WHERE pk IN ? AND (ck1, ck2) > (1, ?) IF EXISTS",
            "BEGIN UNLOGGED BATCH USING TIMESTAMP 1 INSERT INTO t (a) VALUES ({a: [1.5e3, NaN], b: {1: 0xff}}); APPLY BATCH",
            "INSERT INTO t (a, b, c, d) VALUES (123e4567-e89b-12d3-a456-426614174000, P1DT2H, 1h30m, $$x$$) -- c",
            "UPDATE \"T\" SET \"V\" = toTimestamp(now()) /* c */ WHERE k = -1.5 AND (x, y) <= ?",
        ];
        for s in statements {
            assert!(parse(s).is_ok(), "{s}: {:?}", parse(s));
            for (i, _) in s.char_indices() {
                let _ = parse(&s[..i]);
                let _ = parse(&s[i..]);
                let mut removed = s.to_string();
                removed.remove(i);
                let _ = parse(&removed);
                for c in ['(', '\'', '"', '?', ':', '{', '-', '/', '$', 'P', '0', 'µ', '¢', 'é', '\0'] {
                    let mut inserted = s.to_string();
                    inserted.insert(i, c);
                    let _ = parse(&inserted);
                }
            }
        }
    }
}
