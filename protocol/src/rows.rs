//! Result metadata and zero-copy row sets.
//!
//! A [`Rows`] result keeps the whole response body as one [`Bytes`].
//! Decoding reads the metadata and bounds the row count by the body's size;
//! the framing of the values (every row has `columns_count` `[bytes]`
//! values, and nothing follows the last) is checked where they are read.
//! [`Rows::rows`] checks it before handing out rows, which are then read
//! lazily as views borrowing from that buffer, with the Rust row type
//! checked once against the column specs. A reader that walks every value
//! anyway (the CDC engine indexing a page) checks it in that walk, so its
//! pages are walked once instead of twice.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::types::de::{ColumnIterator, DeserializeError, DeserializeRow, TypeCheckError};
use crate::types::{ColumnSpec, ColumnType};

mod flag {
    pub const GLOBAL_TABLES_SPEC: i32 = 0x0001;
    pub const HAS_MORE_PAGES: i32 = 0x0002;
    pub const NO_METADATA: i32 = 0x0004;
    pub const METADATA_CHANGED: i32 = 0x0008;
}

/// Metadata of a Rows result (also the result metadata of PREPARED).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResultMetadata {
    /// Number of columns of each row.
    pub columns_count: usize,
    /// Paging state when more pages follow (a slice of the response body).
    pub paging_state: Option<Bytes>,
    /// New result metadata id (v5 `Metadata_changed`).
    pub new_metadata_id: Option<Bytes>,
    /// Column specs; `None` when the server omitted them (`No_metadata`,
    /// after the client asked to skip metadata).
    pub specs: Option<Vec<ColumnSpec>>,
}

impl ResultMetadata {
    /// Decodes metadata; `body` is the buffer `r` reads from, so that the
    /// paging state is kept as a slice of it.
    pub fn decode(r: &mut Reader<'_>, body: &Bytes) -> Result<Self, DecodeError> {
        Self::decode_known(r, body, None)
    }

    /// [`Self::decode`], for a result whose columns are expected to be
    /// `known` (a prepared statement's cached result columns): column specs
    /// that the server sent and that equal them are read in place and
    /// left out (`specs: None`, as if the server had skipped them), so a
    /// result that carries its metadata costs no allocation when nothing
    /// changed (complex column types excepted: they are compared decoded).
    /// Specs that differ are decoded in full, so the caller sees the new
    /// columns.
    pub fn decode_known(r: &mut Reader<'_>, body: &Bytes, known: Option<&[ColumnSpec]>) -> Result<Self, DecodeError> {
        let flags = r.i32("metadata flags")?;
        let columns_count = r.len_i32("columns count")?;
        let paging_state =
            if flags & flag::HAS_MORE_PAGES != 0 { r.bytes("paging state")?.map(|p| slice_of(body, p)) } else { None };
        let new_metadata_id = if flags & flag::METADATA_CHANGED != 0 {
            Some(slice_of(body, r.short_bytes("new metadata id")?))
        } else {
            None
        };
        let global = flags & flag::GLOBAL_TABLES_SPEC != 0;
        // Skipped by the server, or read in place and equal to the known ones.
        let left_out = flags & flag::NO_METADATA != 0
            || known.is_some_and(|known| known.len() == columns_count && specs_match(r, global, known));
        let specs = if left_out { None } else { Some(decode_specs(r, global, columns_count)?) };
        Ok(ResultMetadata { columns_count, paging_state, new_metadata_id, specs })
    }

    /// Writes the metadata.
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        let global = self.specs.as_deref().and_then(global_table);
        let mut flags = 0;
        if global.is_some() {
            flags |= flag::GLOBAL_TABLES_SPEC;
        }
        if self.paging_state.is_some() {
            flags |= flag::HAS_MORE_PAGES;
        }
        if self.specs.is_none() {
            flags |= flag::NO_METADATA;
        }
        if self.new_metadata_id.is_some() {
            flags |= flag::METADATA_CHANGED;
        }
        if let Some(specs) = &self.specs {
            if specs.len() != self.columns_count {
                return Err(EncodeError::InvalidValue {
                    what: "result metadata",
                    reason: "columns_count differs from the number of specs",
                });
            }
        }
        buf.put_i32(flags);
        buf.put_i32(codec::check_int_len("columns", self.columns_count)? as i32);
        if let Some(p) = &self.paging_state {
            codec::write_bytes(buf, "paging state", Some(p))?;
        }
        if let Some(id) = &self.new_metadata_id {
            codec::write_short_bytes(buf, "metadata id", id)?;
        }
        if let Some(specs) = &self.specs {
            encode_specs(buf, specs, global)?;
        }
        Ok(())
    }
}

fn slice_of(body: &Bytes, part: &[u8]) -> Bytes {
    if part.is_empty() {
        Bytes::new()
    } else {
        body.slice_ref(part)
    }
}

/// The `(keyspace, table)` shared by all specs, if there is one.
fn global_table(specs: &[ColumnSpec]) -> Option<(&str, &str)> {
    let first = specs.first()?;
    specs
        .iter()
        .all(|s| s.keyspace == first.keyspace && s.table == first.table)
        .then_some((first.keyspace.as_str(), first.table.as_str()))
}

/// Whether the specs at `r` are `known`, compared in place; `r` is moved
/// past them only when they are. Anything unreadable is no match: the full
/// decode then reports it.
fn specs_match(r: &mut Reader<'_>, global: bool, known: &[ColumnSpec]) -> bool {
    let mut probe = *r;
    let mut matches = || -> Result<bool, DecodeError> {
        let table = if global { Some((probe.string("keyspace")?, probe.string("table")?)) } else { None };
        for spec in known {
            let (keyspace, table) = match table {
                Some(t) => t,
                None => (probe.string("keyspace")?, probe.string("table")?),
            };
            if keyspace != spec.keyspace || table != spec.table || probe.string("column name")? != spec.name {
                return Ok(false);
            }
            if !spec.typ.is_encoded_at(&mut probe)? {
                return Ok(false);
            }
        }
        Ok(true)
    };
    let matched = matches().unwrap_or(false);
    if matched {
        *r = probe;
    }
    matched
}

fn decode_specs(r: &mut Reader<'_>, global: bool, count: usize) -> Result<Vec<ColumnSpec>, DecodeError> {
    let table = if global { Some((r.string("keyspace")?, r.string("table")?)) } else { None };
    // Each spec takes at least 4 bytes, which bounds hostile counts.
    let mut specs = Vec::with_capacity(count.min(r.remaining() / 4));
    for _ in 0..count {
        let (keyspace, table) = match table {
            Some(t) => t,
            None => (r.string("keyspace")?, r.string("table")?),
        };
        let name = r.string("column name")?;
        let typ = ColumnType::decode(r)?;
        specs.push(ColumnSpec { keyspace: keyspace.into(), table: table.into(), name: name.into(), typ });
    }
    Ok(specs)
}

fn encode_specs(buf: &mut impl BufMut, specs: &[ColumnSpec], global: Option<(&str, &str)>) -> Result<(), EncodeError> {
    if let Some((ks, table)) = global {
        codec::write_string(buf, "keyspace", ks)?;
        codec::write_string(buf, "table", table)?;
    }
    for s in specs {
        if global.is_none() {
            codec::write_string(buf, "keyspace", &s.keyspace)?;
            codec::write_string(buf, "table", &s.table)?;
        }
        codec::write_string(buf, "column name", &s.name)?;
        s.typ.encoded_len()?;
        s.typ.encode(buf);
    }
    Ok(())
}

/// The bind-marker metadata of a PREPARED result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PreparedMetadata {
    /// Flags other than the global-table-spec bit (Scylla's LWT mark lives
    /// here; see [`Self::is_lwt`]).
    pub flags: i32,
    /// Bind-marker indexes of the partition key columns, in key order.
    pub pk_indexes: Vec<u16>,
    /// One spec per bind marker.
    pub specs: Vec<ColumnSpec>,
}

impl PreparedMetadata {
    /// Decodes the metadata.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let flags = r.i32("prepared metadata flags")?;
        let count = r.len_i32("bind marker count")?;
        let pk_count = r.len_i32("partition key count")?;
        let mut pk_indexes = Vec::with_capacity(pk_count.min(r.remaining() / 2));
        for _ in 0..pk_count {
            let i = r.u16("partition key index")?;
            if usize::from(i) >= count {
                return Err(DecodeError::Invalid { what: "partition key index", reason: "out of range" });
            }
            pk_indexes.push(i);
        }
        let specs = decode_specs(r, flags & flag::GLOBAL_TABLES_SPEC != 0, count)?;
        // The global-table-spec bit is an encoding detail, recomputed on encode.
        Ok(PreparedMetadata { flags: flags & !flag::GLOBAL_TABLES_SPEC, pk_indexes, specs })
    }

    /// Writes the metadata.
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        let global = global_table(&self.specs);
        let flags = if global.is_some() {
            self.flags | flag::GLOBAL_TABLES_SPEC
        } else {
            self.flags & !flag::GLOBAL_TABLES_SPEC
        };
        buf.put_i32(flags);
        buf.put_i32(codec::check_int_len("bind markers", self.specs.len())? as i32);
        buf.put_i32(codec::check_int_len("partition key", self.pk_indexes.len())? as i32);
        for i in &self.pk_indexes {
            buf.put_u16(*i);
        }
        encode_specs(buf, &self.specs, global)
    }

    /// Whether Scylla marked the statement as a lightweight transaction,
    /// given the mask negotiated with `SCYLLA_LWT_ADD_METADATA_MARK`.
    pub fn is_lwt(&self, mask: u32) -> bool {
        mask != 0 && (self.flags as u32) & mask == mask
    }
}

/// A page of rows, borrowing nothing: it owns the response body.
#[derive(Debug, Clone)]
pub struct Rows {
    /// The result metadata.
    pub metadata: ResultMetadata,
    rows_count: usize,
    body: Bytes,
    rows_start: usize,
}

impl PartialEq for Rows {
    /// Equal metadata and rows, wherever the buffers start.
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata && self.rows_count == other.rows_count && self.raw_rows() == other.raw_rows()
    }
}

impl Eq for Rows {}

/// The row set has no column specs of its own (the server skipped them) and
/// none were supplied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowsError {
    /// No metadata to check the row type against.
    #[error("the result carries no column metadata (skip_metadata); pass the prepared statement's")]
    NoMetadata,
    /// The supplied specs do not match the result's column count.
    #[error("{supplied} column specs supplied for rows of {columns} columns")]
    SpecCount {
        /// Specs given.
        supplied: usize,
        /// Columns per row.
        columns: usize,
    },
    /// The Rust row type does not match the columns.
    #[error(transparent)]
    TypeCheck(#[from] TypeCheckError),
    /// The values are not `rows_count` rows of `columns_count` values.
    #[error("malformed rows: {0}")]
    Malformed(#[from] DecodeError),
}

/// The most rows a result without columns may claim (no server sends any:
/// a page of rows holds at least one column).
const MAX_ROWS_WITHOUT_COLUMNS: usize = 1 << 16;

impl Rows {
    /// Decodes a Rows result from `body[start..]` (just after the result
    /// kind) to the end of `body`. The body is moved in, not copied, so
    /// decoding a page allocates nothing beyond its column specs, when the
    /// server sent them.
    ///
    /// The values are not walked here: the row count is only checked
    /// against the body's size (every value takes at least 4 bytes), and
    /// [`Rows::check_framing`] (which [`Rows::rows`] runs) checks the rest.
    pub fn decode(body: Bytes, start: usize) -> Result<Self, DecodeError> {
        Self::decode_known(body, start, None)
    }

    /// [`Self::decode`] for rows whose columns are expected to be `known`
    /// (see [`ResultMetadata::decode_known`]).
    pub fn decode_known(body: Bytes, start: usize, known: Option<&[ColumnSpec]>) -> Result<Self, DecodeError> {
        let rest = body.get(start..).ok_or(DecodeError::UnexpectedEnd {
            what: "rows",
            needed: start,
            remaining: body.len(),
        })?;
        let mut r = Reader::new(rest);
        let metadata = ResultMetadata::decode_known(&mut r, &body, known)?;
        let rows_count = r.len_i32("rows count")?;
        let rows_start = body.len() - r.remaining();
        let plausible = match metadata.columns_count {
            // Rows without columns take no bytes: bound their count by a
            // constant (not by the body's size, which depends on how the
            // metadata was encoded, e.g. a null paging state).
            0 => rows_count <= MAX_ROWS_WITHOUT_COLUMNS,
            // The rows' own bytes bound the count, and they are re-encoded
            // as they are, so the bound holds for the re-encoded result too.
            columns => {
                rows_count.checked_mul(columns).and_then(|v| v.checked_mul(4)).is_some_and(|n| n <= r.remaining())
            }
        };
        if !plausible {
            return Err(DecodeError::Invalid { what: "rows count", reason: "more values than the body can hold" });
        }
        Ok(Rows { metadata, rows_count, body, rows_start })
    }

    /// Checks that the values are `rows_count` rows of `columns_count`
    /// `[bytes]` values with nothing after them. One pass over the values'
    /// lengths; [`Rows::rows`] runs it before handing out rows.
    pub fn check_framing(&self) -> Result<(), DecodeError> {
        let mut r = Reader::new(self.raw_rows());
        for _ in 0..self.rows_count {
            for _ in 0..self.metadata.columns_count {
                r.bytes("row value")?;
            }
        }
        r.finish("rows")
    }

    /// Builds a row set from rows already in wire form (for servers and tests).
    pub fn from_raw(metadata: ResultMetadata, rows: &[Vec<Option<&[u8]>>]) -> Result<Self, EncodeError> {
        let mut buf = Vec::new();
        buf.put_i32(0x0002);
        metadata.encode(&mut buf)?;
        buf.put_i32(codec::check_int_len("rows", rows.len())? as i32);
        let rows_start = buf.len() - 4;
        for row in rows {
            if row.len() != metadata.columns_count {
                return Err(EncodeError::InvalidValue { what: "row", reason: "wrong number of columns" });
            }
            for v in row {
                codec::write_bytes(&mut buf, "value", *v)?;
            }
        }
        let body = Bytes::from(buf).slice(4..);
        Ok(Rows { metadata, rows_count: rows.len(), body, rows_start })
    }

    /// Writes the Rows result (kind included).
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        buf.put_i32(0x0002);
        self.metadata.encode(buf)?;
        buf.put_i32(self.rows_count as i32);
        buf.put_slice(self.raw_rows());
        Ok(())
    }

    /// Number of rows in this page, as the server says (bounded by the
    /// body's size; [`Rows::check_framing`] checks that the values match).
    pub fn rows_count(&self) -> usize {
        self.rows_count
    }

    /// The row data in wire form, framing unchecked (see
    /// [`Rows::check_framing`]).
    pub fn raw_rows(&self) -> &[u8] {
        self.body.get(self.rows_start..).unwrap_or_default()
    }

    /// The response body the rows borrow from.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Rows as `R`, checked against the result's own column specs.
    ///
    /// ```
    /// # use shardwise_protocol::rows::{ResultMetadata, Rows};
    /// # use shardwise_protocol::types::{ColumnSpec, ColumnType};
    /// let spec = |name: &str, typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
    /// let metadata = ResultMetadata {
    ///     columns_count: 2,
    ///     specs: Some(vec![spec("id", ColumnType::Int), spec("name", ColumnType::Text)]),
    ///     ..Default::default()
    /// };
    /// let rows = Rows::from_raw(metadata, &[vec![Some(&7i32.to_be_bytes()[..]), Some(b"seven")]]).unwrap();
    /// for row in rows.rows::<(i32, &str)>().unwrap() {
    ///     let (id, name) = row.unwrap();
    ///     assert_eq!((id, name), (7, "seven"));
    /// }
    /// ```
    pub fn rows<'a, R: DeserializeRow<'a>>(&'a self) -> Result<TypedRows<'a, R>, RowsError> {
        let specs = self.metadata.specs.as_deref().ok_or(RowsError::NoMetadata)?;
        self.rows_with(specs)
    }

    /// Rows as `R`, checked against `specs` (the cached result metadata of a
    /// prepared statement when the server skipped it). The framing of the
    /// values is checked first ([`Rows::check_framing`]), so iterating
    /// cannot meet a malformed row.
    pub fn rows_with<'a, R: DeserializeRow<'a>>(
        &'a self,
        specs: &'a [ColumnSpec],
    ) -> Result<TypedRows<'a, R>, RowsError> {
        if specs.len() != self.metadata.columns_count {
            return Err(RowsError::SpecCount { supplied: specs.len(), columns: self.metadata.columns_count });
        }
        R::type_check(specs)?;
        self.check_framing()?;
        Ok(TypedRows {
            specs,
            body: &self.body,
            reader: Reader::new(self.raw_rows()),
            remaining: self.rows_count,
            _row: PhantomData,
        })
    }
}

/// Iterator over the rows of a [`Rows`] result, decoded as `R`.
#[derive(Debug)]
pub struct TypedRows<'a, R> {
    specs: &'a [ColumnSpec],
    body: &'a Bytes,
    reader: Reader<'a>,
    remaining: usize,
    _row: PhantomData<R>,
}

impl<'a, R: DeserializeRow<'a>> Iterator for TypedRows<'a, R> {
    type Item = Result<R, DeserializeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let row = ColumnIterator::new(self.specs, self.body, self.reader);
        // Skip to the next row; `rows_with` checked the framing.
        let mut skip = row.clone();
        for column in skip.by_ref() {
            if let Err(e) = column {
                self.remaining = 0;
                return Some(Err(DeserializeError::Malformed { cql_type: "row".into(), source: e }));
            }
        }
        self.reader = skip.reader();
        Some(R::deserialize(row))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<'a, R: DeserializeRow<'a>> ExactSizeIterator for TypedRows<'a, R> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(table: &str, name: &str, typ: ColumnType) -> ColumnSpec {
        ColumnSpec { keyspace: "ks".into(), table: table.into(), name: name.into(), typ }
    }

    fn encoded(metadata: &ResultMetadata) -> Bytes {
        let mut buf = Vec::new();
        metadata.encode(&mut buf).expect("encode");
        buf.extend_from_slice(&[0, 0, 0, 0]);
        Bytes::from(buf)
    }

    /// Metadata the server sent that equals the cached columns is left out
    /// (read in place); metadata that differs is decoded whole, globally
    /// specified or not.
    #[test]
    fn known_columns_are_read_in_place_and_changed_ones_decoded() {
        let list = ColumnType::List(Box::new(ColumnType::Text));
        let known = vec![spec("t", "pk", ColumnType::Int), spec("t", "v", list.clone())];
        let added = vec![known[0].clone(), known[1].clone(), spec("t", "b", ColumnType::Text)];
        let retyped = vec![known[0].clone(), spec("t", "v", ColumnType::Set(Box::new(ColumnType::Text)))];
        let renamed = vec![known[0].clone(), spec("t", "w", list.clone())];
        let other_table = vec![known[0].clone(), spec("u", "v", list)];
        for (sent, same) in
            [(&known, true), (&added, false), (&retyped, false), (&renamed, false), (&other_table, false)]
        {
            let metadata =
                ResultMetadata { columns_count: sent.len(), specs: Some(sent.clone()), ..Default::default() };
            let body = encoded(&metadata);
            let rows = Rows::decode_known(body.clone(), 0, Some(&known)).expect("decode");
            assert_eq!(rows.metadata.specs.is_none(), same, "{sent:?}");
            if !same {
                assert_eq!(rows.metadata.specs.as_ref(), Some(sent), "decoded whole");
            }
            assert_eq!(rows.rows_count(), 0);
            assert_eq!(Rows::decode(body, 0).expect("decode").metadata.specs.as_ref(), Some(sent), "nothing known");
        }
    }
}
