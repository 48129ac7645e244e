//! The recursive-descent parser over the [`lexer`](super::lexer)'s tokens,
//! and [`parse`], the entry point. Bind markers are numbered here, in order
//! of appearance.

use std::collections::VecDeque;

use super::ast::*;
use super::lexer::{is_literal_word, is_reserved, Lexer, Tok, Token};
use super::DmlError;

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
            || t1.is_kw("not")
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
        } else if self.at_kw("not")? && self.peek(1)?.is_kw("in") {
            self.bump()?;
            self.bump()?;
            Ok(ColumnCondition::NotIn { target, values: self.in_values()? })
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
        // Scylla's `NOT IN` condition.
        let u = update("UPDATE t SET v = 1 WHERE pk = 0 IF v NOT IN (1, ?) AND w not in ?");
        let Some(Condition::Columns(c)) = u.condition else { panic!() };
        assert_eq!(
            c,
            [
                ColumnCondition::NotIn {
                    target: DeleteTarget::Column("v".into()),
                    values: InValues::List(vec![int("1"), bind(0)])
                },
                ColumnCondition::NotIn { target: DeleteTarget::Column("w".into()), values: InValues::Marker(bind(1)) },
            ]
        );
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
