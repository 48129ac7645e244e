//! The AST of the DML subset: statements, assignments, relations,
//! conditions and terms, with every literal kept as written (the consumer
//! converts it by the column's type), and the walk that lists a statement's
//! bind markers in order.

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
/// and tuple `IN` (`(c1, c2) IN (...)`) are [`DmlError::Unsupported`](super::DmlError::Unsupported).
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
    /// `c NOT IN (...)` / `c NOT IN ?` (Scylla only: Cassandra's grammar
    /// has no `NOT IN` in conditions)
    NotIn {
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
            ColumnCondition::In { target, values } | ColumnCondition::NotIn { target, values } => {
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
