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
//!
//! The `lexer` turns text into tokens, the `parser` turns tokens into
//! the AST of [`ast`], re-exported here.

pub mod ast;
pub(crate) mod lexer;
mod parser;

pub use ast::*;
pub use parser::parse;

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
