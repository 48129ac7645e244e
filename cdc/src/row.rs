//! Borrowed views of CDC log rows.
//!
//! A page of the log comes back from the driver as one [`Rows`] buffer.
//! [`LogSchema`] is computed once per result metadata (the log table's
//! columns): where the `cdc$` metadata columns are and, for every base
//! column `X`, where `X`, `cdc$deleted_X` and `cdc$deleted_elements_X` are.
//! [`LogPage`] then locates every value of the page in one pass, into a
//! caller-owned [`RowIndex`] reused from page to page. That pass is also
//! the page's check: the values' framing (the driver does not walk the
//! values before) and the metadata columns of every row, so a malformed
//! page is refused before any of its rows is handed out, and its rows
//! cannot fail afterwards. It hands out [`CdcRow`]s: small `Copy` views
//! that borrow the page and decode a value only when asked, without
//! copying (`&str` and `&[u8]` values point into the response buffer).
//! Nothing is allocated per row.
//!
//! ```
//! # use shardwise::protocol::rows::Rows;
//! # use shardwise_cdc::row::{LogPage, LogSchema, RowIndex};
//! # fn f(rows: &Rows) -> Result<(), Box<dyn std::error::Error>> {
//! let specs = rows.metadata.specs.as_deref().unwrap_or_default();
//! let schema = LogSchema::new(specs)?; // once per result metadata
//! let mut index = RowIndex::default(); // once per worker
//! for row in &LogPage::new(&schema, rows, &mut index)? {
//!     let v: Option<i32> = row.value("v")?;
//!     println!("{} {:?} v={v:?} deleted={}", row.stream_id(), row.operation(), row.is_deleted("v"));
//! }
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use shardwise::protocol::name_hash::BuildNameHasher;
use shardwise::protocol::rows::Rows;
use shardwise::protocol::types::de::{DeserializeError, DeserializeValue, FrameSlice};
use shardwise::protocol::types::{ColumnSpec, ColumnType};
use uuid::Uuid;

use crate::stream::StreamId;
use crate::time::timeuuid_micros;

const STREAM_ID: &str = "cdc$stream_id";
const TIME: &str = "cdc$time";
const BATCH_SEQ_NO: &str = "cdc$batch_seq_no";
const OPERATION: &str = "cdc$operation";
const TTL: &str = "cdc$ttl";
const END_OF_BATCH: &str = "cdc$end_of_batch";
const DELETED: &str = "cdc$deleted_";
const DELETED_ELEMENTS: &str = "cdc$deleted_elements_";
const METADATA_PREFIX: &str = "cdc$";

/// The kind of change a log row describes (`cdc$operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum Operation {
    /// The row before the change (0).
    PreImage = 0,
    /// An update: cells written without a row marker (1).
    Update = 1,
    /// An insert: row marker and cells (2).
    Insert = 2,
    /// A clustering row deleted (3), or deleted by Scylla itself when its
    /// TTL ran out (−3: [`CdcRow::is_expiration`]), as `scylla-cdc` reads
    /// both: a `match` on row deletes sees expiries too.
    RowDelete = 3,
    /// A partition deleted (4), or expired (−4: [`CdcRow::is_expiration`]).
    PartitionDelete = 4,
    /// Start of a range delete, bound included (5).
    RangeDeleteStartInclusive = 5,
    /// Start of a range delete, bound excluded (6).
    RangeDeleteStartExclusive = 6,
    /// End of a range delete, bound included (7).
    RangeDeleteEndInclusive = 7,
    /// End of a range delete, bound excluded (8).
    RangeDeleteEndExclusive = 8,
    /// The row after the change (9).
    PostImage = 9,
}

impl Operation {
    /// The operation with this code, if any.
    pub fn from_code(code: i8) -> Option<Self> {
        use Operation::*;
        Some(match code {
            0 => PreImage,
            1 => Update,
            2 => Insert,
            3 => RowDelete,
            4 => PartitionDelete,
            5 => RangeDeleteStartInclusive,
            6 => RangeDeleteStartExclusive,
            7 => RangeDeleteEndInclusive,
            8 => RangeDeleteEndExclusive,
            9 => PostImage,
            // Expiries (TTL): the delete they are, told apart by the row.
            -3 => RowDelete,
            -4 => PartitionDelete,
            _ => return None,
        })
    }

    /// The code of the operation in `cdc$operation` (the positive one of a
    /// delete: an expiry's is its negation).
    pub fn code(self) -> i8 {
        self as i8
    }

    /// Whether the row is a pre- or post-image rather than a change.
    pub fn is_image(self) -> bool {
        matches!(self, Operation::PreImage | Operation::PostImage)
    }

    /// Whether the row deletes data (row, partition, range bound, expiry).
    pub fn is_delete(self) -> bool {
        !matches!(self, Operation::PreImage | Operation::Update | Operation::Insert | Operation::PostImage)
    }
}

impl TryFrom<i8> for Operation {
    type Error = RowError;

    fn try_from(code: i8) -> Result<Self, Self::Error> {
        Operation::from_code(code).ok_or(RowError::UnknownOperation(i32::from(code)))
    }
}

/// The columns of a result are not those of a CDC log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A required metadata column is missing.
    #[error("not a CDC log: no column {0}")]
    MissingColumn(&'static str),
    /// A metadata column has an unexpected type.
    #[error("column {column} has type {found}, expected {expected}")]
    WrongType {
        /// The column.
        column: String,
        /// The type a CDC log has there.
        expected: &'static str,
        /// The type found.
        found: String,
    },
}

/// A log row cannot be read as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RowError {
    /// The page has another number of columns than the schema.
    #[error("the page has {actual} columns, the log schema {expected}")]
    ColumnCount {
        /// Columns of the schema.
        expected: usize,
        /// Columns of the page.
        actual: usize,
    },
    /// The page's columns differ from the schema's (the table changed):
    /// compute a new [`LogSchema`].
    #[error("column {index} of the page is {name}, not the schema's")]
    SchemaChanged {
        /// Position of the first differing column.
        index: usize,
        /// Its name in the page.
        name: String,
    },
    /// The page is too large to index (over 2 GiB).
    #[error("the page is too large to index")]
    PageTooLarge,
    /// A metadata column that is never null is null.
    #[error("{0} is null")]
    Null(&'static str),
    /// A value does not have the size of its type.
    #[error("malformed {column}: {len} bytes")]
    Malformed {
        /// The column.
        column: String,
        /// Its length.
        len: usize,
    },
    /// `cdc$operation` holds a code this library does not know.
    #[error("unknown cdc$operation {0}")]
    UnknownOperation(i32),
    /// No such column in the log (or no such companion column: an atomic
    /// column has no `cdc$deleted_elements_`).
    #[error("the log has no column {0}")]
    NoSuchColumn(String),
    /// A value could not be read as the requested type.
    #[error("column {column}: {source}")]
    Value {
        /// The column.
        column: String,
        /// Why.
        source: Box<DeserializeError>,
    },
}

/// One base-table column as it appears in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseColumn {
    name: Arc<str>,
    value: usize,
    deleted: Option<usize>,
    deleted_elements: Option<usize>,
}

impl BaseColumn {
    /// The column's name (as in the base table).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The name, shared.
    pub fn shared_name(&self) -> &Arc<str> {
        &self.name
    }
    /// Position of the value column in the result.
    pub fn value_index(&self) -> usize {
        self.value
    }
    /// Position of `cdc$deleted_<name>` (absent for key columns).
    pub fn deleted_index(&self) -> Option<usize> {
        self.deleted
    }
    /// Position of `cdc$deleted_elements_<name>` (non-frozen collections
    /// and UDTs only).
    pub fn deleted_elements_index(&self) -> Option<usize> {
        self.deleted_elements
    }
}

/// Where everything is in the rows of a log table's result; computed once
/// per result metadata.
#[derive(Debug, Clone)]
pub struct LogSchema {
    specs: Arc<[ColumnSpec]>,
    stream_id: usize,
    time: usize,
    batch_seq_no: usize,
    operation: usize,
    ttl: Option<usize>,
    end_of_batch: Option<usize>,
    columns: Vec<BaseColumn>,
    by_name: HashMap<Arc<str>, usize, BuildNameHasher>,
    /// What each result column must hold, checked when a page is indexed.
    shapes: Box<[Shape]>,
}

/// Base columns up to this many are looked up by name with a scan, which
/// beats hashing the name when there are few.
const SCAN_MAX: usize = 16;

/// What a value of a metadata column must be, so that a [`CdcRow`] can
/// decode it without failing: checked for every row when a page is
/// indexed, while the value is in the cache anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A base column's value: read, and checked, when asked for.
    Any,
    /// Exactly `len` bytes; null only if `required` is `None`.
    Fixed { len: i32, required: Option<&'static str> },
    /// `cdc$operation`: never null, a known code in 1, 2 or 4 bytes.
    Operation,
}

impl Shape {
    /// Checks a value (`len` negative: null; `value` its bytes).
    fn check(self, len: i32, value: &[u8], column: &str) -> Result<(), RowError> {
        let malformed = || RowError::Malformed { column: column.into(), len: value.len() };
        match self {
            Shape::Any => Ok(()),
            Shape::Fixed { len: expected, .. } if len == expected => Ok(()),
            Shape::Fixed { required: Some(name), .. } if len < 0 => Err(RowError::Null(name)),
            Shape::Fixed { required: None, .. } if len < 0 => Ok(()),
            Shape::Fixed { .. } => Err(malformed()),
            Shape::Operation if len < 0 => Err(RowError::Null(OPERATION)),
            Shape::Operation => {
                let code = operation_code(value).ok_or_else(malformed)?;
                match known_operation(code) {
                    Some(_) => Ok(()),
                    None => Err(RowError::UnknownOperation(code)),
                }
            }
        }
    }
}

/// The code in a `cdc$operation` value, stored as a tinyint, smallint or
/// int.
pub(crate) fn operation_code(value: &[u8]) -> Option<i32> {
    match *value {
        [a] => Some(i32::from(i8::from_be_bytes([a]))),
        [a, b] => Some(i32::from(i16::from_be_bytes([a, b]))),
        [a, b, c, d] => Some(i32::from_be_bytes([a, b, c, d])),
        _ => None,
    }
}

/// The operation a `cdc$operation` code names, if this library knows it.
fn known_operation(code: i32) -> Option<Operation> {
    i8::try_from(code).ok().and_then(Operation::from_code)
}

impl LogSchema {
    /// The schema of results with these columns (a `SELECT *` of the log,
    /// or any selection that keeps `cdc$stream_id`, `cdc$time`,
    /// `cdc$batch_seq_no` and `cdc$operation`).
    ///
    /// Base columns are the columns whose name does not start with `cdc$`;
    /// a column `cdc$deleted_elements_X` belongs to `X`, and otherwise
    /// `cdc$deleted_X` does (the longer prefix is stripped first).
    /// Companion columns of a base column not in the result are ignored,
    /// as are unknown `cdc$` columns.
    pub fn new(specs: impl Into<Arc<[ColumnSpec]>>) -> Result<Self, SchemaError> {
        let specs: Arc<[ColumnSpec]> = specs.into();
        let find = |name: &'static str, ok: fn(&ColumnType) -> bool, expected: &'static str| {
            let Some(i) = specs.iter().position(|s| s.name == name) else {
                return Ok(None);
            };
            if ok(&specs[i].typ) {
                Ok(Some(i))
            } else {
                Err(SchemaError::WrongType { column: name.into(), expected, found: specs[i].typ.to_string() })
            }
        };
        let required = |i: Option<usize>, name| i.ok_or(SchemaError::MissingColumn(name));
        let stream_id = required(find(STREAM_ID, |t| *t == ColumnType::Blob, "blob")?, STREAM_ID)?;
        let time = required(find(TIME, |t| matches!(t, ColumnType::Timeuuid | ColumnType::Uuid), "timeuuid")?, TIME)?;
        let batch_seq_no = required(find(BATCH_SEQ_NO, |t| *t == ColumnType::Int, "int")?, BATCH_SEQ_NO)?;
        let operation = required(
            find(OPERATION, |t| matches!(t, ColumnType::TinyInt | ColumnType::SmallInt | ColumnType::Int), "tinyint")?,
            OPERATION,
        )?;
        let ttl = find(TTL, |t| *t == ColumnType::BigInt, "bigint")?;
        let end_of_batch = find(END_OF_BATCH, |t| *t == ColumnType::Boolean, "boolean")?;

        let mut columns = Vec::new();
        let mut by_name = HashMap::default();
        for (i, spec) in specs.iter().enumerate() {
            if !spec.name.starts_with(METADATA_PREFIX) {
                let name: Arc<str> = spec.name.as_str().into();
                by_name.insert(name.clone(), columns.len());
                columns.push(BaseColumn { name, value: i, deleted: None, deleted_elements: None });
            }
        }
        let mut shapes = vec![Shape::Any; specs.len()];
        let fixed = |len, required| Shape::Fixed { len, required };
        shapes[stream_id] = fixed(16, Some(STREAM_ID));
        shapes[time] = fixed(16, Some(TIME));
        shapes[batch_seq_no] = fixed(4, Some(BATCH_SEQ_NO));
        shapes[operation] = Shape::Operation;
        if let Some(i) = ttl {
            shapes[i] = fixed(8, None);
        }
        if let Some(i) = end_of_batch {
            shapes[i] = fixed(1, None);
        }
        for (i, spec) in specs.iter().enumerate() {
            if let Some(base) = spec.name.strip_prefix(DELETED_ELEMENTS) {
                if !matches!(spec.typ, ColumnType::Set(_) | ColumnType::List(_)) {
                    return Err(SchemaError::WrongType {
                        column: spec.name.clone(),
                        expected: "frozen<set<...>>",
                        found: spec.typ.to_string(),
                    });
                }
                if let Some(&c) = by_name.get(base) {
                    columns[c].deleted_elements = Some(i);
                }
            } else if let Some(base) = spec.name.strip_prefix(DELETED) {
                if spec.typ != ColumnType::Boolean {
                    return Err(SchemaError::WrongType {
                        column: spec.name.clone(),
                        expected: "boolean",
                        found: spec.typ.to_string(),
                    });
                }
                if let Some(&c) = by_name.get(base) {
                    columns[c].deleted = Some(i);
                    shapes[i] = fixed(1, None);
                }
            }
        }
        let shapes = shapes.into();
        Ok(LogSchema { specs, stream_id, time, batch_seq_no, operation, ttl, end_of_batch, columns, by_name, shapes })
    }

    /// The result's column specs.
    pub fn specs(&self) -> &[ColumnSpec] {
        &self.specs
    }

    /// The base columns, in result order.
    pub fn columns(&self) -> &[BaseColumn] {
        &self.columns
    }

    /// The position of a base column in [`Self::columns`].
    pub fn column_index(&self, name: &str) -> Option<usize> {
        if self.columns.len() <= SCAN_MAX {
            // A byte loop: short names are compared inline, not by a call.
            let same =
                |c: &BaseColumn| c.name.len() == name.len() && c.name.bytes().zip(name.bytes()).all(|(a, b)| a == b);
            self.columns.iter().position(same)
        } else {
            self.by_name.get(name).copied()
        }
    }

    /// The base column called `name`.
    pub fn column(&self, name: &str) -> Option<&BaseColumn> {
        self.columns.get(self.column_index(name)?)
    }

    /// The names of the base columns, in result order.
    pub fn column_names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.columns.iter().map(BaseColumn::name)
    }

    fn check(&self, rows: &Rows) -> Result<(), RowError> {
        let actual = rows.metadata.columns_count;
        if actual != self.specs.len() {
            return Err(RowError::ColumnCount { expected: self.specs.len(), actual });
        }
        if let Some(specs) = &rows.metadata.specs {
            if let Some((index, spec)) = specs
                .iter()
                .enumerate()
                .find(|(i, s)| self.specs.get(*i).is_none_or(|mine| mine.name != s.name || mine.typ != s.typ))
            {
                return Err(RowError::SchemaChanged { index, name: spec.name.clone() });
            }
        }
        Ok(())
    }
}

/// Where each value of a page is: reusable storage for [`LogPage`], so
/// that indexing a page allocates nothing once it has grown to the page
/// size.
#[derive(Debug, Default)]
pub struct RowIndex {
    spans: Vec<Span>,
    /// The layout of the last row walked (see `LogPage::new`).
    layout: Layout,
}

/// Where one value's `[bytes]` starts in the rows: its 4-byte length,
/// then the value (a negative length: null). Half the size of a start and
/// a length, which matters: a page's index is written whole and then read
/// row by row, and at 5,000 rows it no longer fits in the cache.
#[derive(Debug, Clone, Copy)]
struct Span {
    at: u32,
}

/// A page of log rows, indexed. `Copy`: it only borrows.
#[derive(Debug, Clone, Copy)]
pub struct LogPage<'a> {
    schema: &'a LogSchema,
    frame: &'a Bytes,
    raw: &'a [u8],
    spans: &'a [Span],
    rows: usize,
}

impl<'a> LogPage<'a> {
    /// Indexes a page of the log. Fails if its columns are not the
    /// schema's.
    pub fn new(schema: &'a LogSchema, rows: &'a Rows, index: &'a mut RowIndex) -> Result<Self, RowError> {
        schema.check(rows)?;
        let raw = rows.raw_rows();
        let count = rows.rows_count().checked_mul(schema.specs.len()).ok_or(RowError::PageTooLarge)?;
        index.spans.clear();
        // `Rows::decode` bounded the count by the body (4 bytes per value)
        // unless there are no columns at all.
        index.spans.reserve(count.min(raw.len() / 4));
        // This pass is also the check of the values' framing
        // (`Rows::check_framing`) and of the metadata columns' values, so
        // that a page is walked once and its rows cannot fail later: the
        // hottest loop of the reader.
        if u32::try_from(raw.len()).is_err() {
            return Err(RowError::PageTooLarge);
        }
        let malformed = || RowError::Malformed { column: "page".into(), len: raw.len() };
        // Walking a row value by value is a chain of dependent loads: each
        // length says where the next one is. Log rows are alike (fixed-size
        // types, same-size blobs), so a row is first compared with the
        // layout of the one before: its lengths are read at the places that
        // layout says, which do not depend on one another, and only a row
        // that differs is walked.
        let mut layout = std::mem::take(&mut index.layout);
        layout.clear();
        let mut row_size = 0;
        let mut at = 0usize;
        for _ in 0..rows.rows_count() {
            let row = raw.get(at..at + row_size).filter(|_| row_size > 0);
            if row.is_some_and(|row| same_layout(row, &layout, schema.operation)) {
                index.spans.extend(layout.iter().map(|&(offset, _)| Span { at: (at + offset as usize) as u32 }));
                at += row_size;
                continue;
            }
            let end =
                walk_row(schema, raw, at, &mut index.spans, &mut layout).map_err(|e| e.unwrap_or_else(malformed))?;
            row_size = end - at;
            at = end;
        }
        index.layout = layout;
        if at != raw.len() {
            return Err(malformed());
        }
        Ok(LogPage { schema, frame: rows.body(), raw, spans: &index.spans, rows: rows.rows_count() })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether the page has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The schema.
    pub fn schema(&self) -> &'a LogSchema {
        self.schema
    }

    /// Row `i` (its metadata columns were checked with the page).
    pub fn row(&self, i: usize) -> Option<CdcRow<'a>> {
        if i >= self.rows {
            return None;
        }
        let columns = self.schema.specs.len();
        let spans = self.spans.get(i * columns..(i + 1) * columns)?;
        Some(CdcRow { schema: self.schema, frame: self.frame, raw: self.raw, spans })
    }

    /// The rows, in result order.
    pub fn iter(&self) -> CdcRows<'a> {
        CdcRows { page: *self, next: 0 }
    }
}

/// Where a row's length words are, from the row's start, and the lengths
/// they held: a row's layout.
type Layout = Vec<(u32, i32)>;

/// Whether `row` (as long as the row `layout` was taken from) has that
/// row's lengths at the same places, and a known `cdc$operation` (the one
/// check that reads a value, not a length). Every length is read before
/// any is compared, so the loads run side by side.
fn same_layout(row: &[u8], layout: &[(u32, i32)], operation: usize) -> bool {
    let length = |offset: u32| {
        let at = offset as usize;
        row.get(at..at + 4).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(i32::from_be_bytes)
    };
    let same = layout.iter().fold(true, |same, &(offset, len)| same & (length(offset) == Some(len)));
    same && layout.get(operation).is_some_and(|&(offset, len)| {
        let at = offset as usize + 4;
        let code = usize::try_from(len).ok().and_then(|len| row.get(at..at + len)).and_then(operation_code);
        code.and_then(known_operation).is_some()
    })
}

/// Walks the row at `at` value by value, checking each value's framing
/// and shape, indexing it into `spans` and recording the row's layout.
/// Returns where the row ends; `Err(None)` for bytes cut short.
fn walk_row(
    schema: &LogSchema,
    raw: &[u8],
    mut at: usize,
    spans: &mut Vec<Span>,
    layout: &mut Layout,
) -> Result<usize, Option<RowError>> {
    let row_start = at;
    layout.clear();
    for (column, &shape) in schema.shapes.iter().enumerate() {
        let Some(&len) = raw.get(at..).and_then(<[u8]>::first_chunk::<4>) else { return Err(None) };
        // `at` is within `raw`, whose length fits in a `u32`.
        spans.push(Span { at: at as u32 });
        let len = i32::from_be_bytes(len);
        layout.push(((at - row_start) as u32, len));
        at += 4;
        let start = at;
        if let Ok(n) = usize::try_from(len) {
            at = at.checked_add(n).filter(|&end| end <= raw.len()).ok_or(None)?;
        }
        if shape != Shape::Any {
            let name = schema.specs.get(column).map_or("", |s| s.name.as_str());
            shape.check(len, raw.get(start..at).unwrap_or_default(), name).map_err(Some)?;
        }
    }
    Ok(at)
}

impl<'a> IntoIterator for &LogPage<'a> {
    type Item = CdcRow<'a>;
    type IntoIter = CdcRows<'a>;

    fn into_iter(self) -> CdcRows<'a> {
        self.iter()
    }
}

/// The rows of a [`LogPage`].
#[derive(Debug, Clone)]
pub struct CdcRows<'a> {
    page: LogPage<'a>,
    next: usize,
}

impl<'a> Iterator for CdcRows<'a> {
    type Item = CdcRow<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let row = self.page.row(self.next)?;
        self.next += 1;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.page.rows.saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for CdcRows<'_> {}

/// One row of the CDC log, borrowed from its page.
///
/// The metadata columns were checked when the page was indexed and are
/// decoded when asked for; base columns are read on demand, by name or by
/// their position in [`LogSchema::columns`].
#[derive(Clone, Copy)]
pub struct CdcRow<'a> {
    schema: &'a LogSchema,
    frame: &'a Bytes,
    raw: &'a [u8],
    spans: &'a [Span],
}

impl fmt::Debug for CdcRow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CdcRow")
            .field("stream_id", &self.stream_id())
            .field("time", &self.time())
            .field("batch_seq_no", &self.batch_seq_no())
            .field("operation", &self.operation())
            .field("expiration", &self.is_expiration())
            .field("ttl", &self.ttl())
            .field("end_of_batch", &self.end_of_batch())
            .finish_non_exhaustive()
    }
}

/// The bytes of a value (`None`: null or no such column).
fn slice<'a>(raw: &'a [u8], spans: &[Span], index: usize) -> Option<&'a [u8]> {
    let at = spans.get(index)?.at as usize;
    let (&len, rest) = raw.get(at..)?.split_first_chunk::<4>()?;
    rest.get(..usize::try_from(i32::from_be_bytes(len)).ok()?)
}

impl<'a> CdcRow<'a> {
    /// A metadata value of `N` bytes; its shape was checked with the page,
    /// so the zeroes are never read.
    fn fixed<const N: usize>(&self, index: usize) -> Option<[u8; N]> {
        slice(self.raw, self.spans, index).and_then(|b| <[u8; N]>::try_from(b).ok())
    }

    /// `cdc$stream_id`.
    pub fn stream_id(&self) -> StreamId {
        StreamId::from_bytes(self.fixed(self.schema.stream_id).unwrap_or_default())
    }

    /// `cdc$time`: the change's timeuuid (shared by all rows of a change).
    pub fn time(&self) -> Uuid {
        Uuid::from_bytes(self.fixed(self.schema.time).unwrap_or_default())
    }

    /// The write time of the change in microseconds, from `cdc$time`.
    pub fn time_micros(&self) -> i64 {
        timeuuid_micros(&self.time())
    }

    /// `cdc$batch_seq_no`: the row's position within its change.
    pub fn batch_seq_no(&self) -> i32 {
        i32::from_be_bytes(self.fixed(self.schema.batch_seq_no).unwrap_or_default())
    }

    /// `cdc$operation`.
    pub fn operation(&self) -> Operation {
        slice(self.raw, self.spans, self.schema.operation)
            .and_then(operation_code)
            .and_then(known_operation)
            // Checked with the page: never taken.
            .unwrap_or(Operation::Update)
    }

    /// Whether Scylla deleted the data itself because its TTL ran out
    /// (`cdc$operation` −3 or −4, read as [`Operation::RowDelete`] and
    /// [`Operation::PartitionDelete`]), as `scylla-cdc`'s `is_expiration`.
    pub fn is_expiration(&self) -> bool {
        slice(self.raw, self.spans, self.schema.operation).and_then(operation_code).is_some_and(|code| code < 0)
    }

    /// `cdc$ttl`: the TTL of the written cells in seconds, if any.
    pub fn ttl(&self) -> Option<i64> {
        self.schema.ttl.and_then(|i| self.fixed(i)).map(i64::from_be_bytes)
    }

    /// `cdc$end_of_batch`: whether this is the last row of its change
    /// (null reads as `false`).
    pub fn end_of_batch(&self) -> bool {
        self.schema.end_of_batch.and_then(|i| self.fixed::<1>(i)).is_some_and(|[b]| b != 0)
    }

    /// The log schema.
    pub fn schema(&self) -> &'a LogSchema {
        self.schema
    }

    /// The names of the base columns.
    pub fn column_names(&self) -> impl ExactSizeIterator<Item = &'a str> + 'a {
        self.schema.column_names()
    }

    /// The value of base column `name` as `T` (`Option<T>` for nullable
    /// values; lists, sets and maps also read null as empty).
    pub fn value<T: DeserializeValue<'a>>(&self, name: &str) -> Result<T, RowError> {
        let c = self.base(name)?;
        self.read(c.value)
    }

    /// The value of base column `column` (its position in
    /// [`LogSchema::columns`]).
    pub fn value_at<T: DeserializeValue<'a>>(&self, column: usize) -> Result<T, RowError> {
        let c = self.base_at(column)?;
        self.read(c.value)
    }

    /// The raw bytes of base column `name`; `None` if null or unknown.
    pub fn raw_value(&self, name: &str) -> Option<&'a [u8]> {
        let c = self.schema.column(name)?;
        slice(self.raw, self.spans, c.value)
    }

    /// The raw bytes of base column `column`; `None` if null or unknown.
    pub fn raw_value_at(&self, column: usize) -> Option<&'a [u8]> {
        let c = self.schema.columns.get(column)?;
        slice(self.raw, self.spans, c.value)
    }

    /// The raw bytes of any column of the result, by its position.
    pub fn raw_column(&self, index: usize) -> Option<&'a [u8]> {
        slice(self.raw, self.spans, index)
    }

    /// Whether `cdc$deleted_<name>` is true: the column was deleted (or set
    /// to null; in an image, its old value was null). `false` for unknown
    /// columns and columns without such a flag.
    pub fn is_deleted(&self, name: &str) -> bool {
        self.schema.column_index(name).is_some_and(|c| self.is_deleted_at(c))
    }

    /// [`Self::is_deleted`] by position in [`LogSchema::columns`].
    pub fn is_deleted_at(&self, column: usize) -> bool {
        let flag = self.schema.columns.get(column).and_then(|c| c.deleted);
        // Flags were checked to be one byte when the row was parsed.
        flag.and_then(|i| slice(self.raw, self.spans, i)).is_some_and(|b| b.first().is_some_and(|&b| b != 0))
    }

    /// `cdc$deleted_elements_<name>` as `T` (e.g. `Vec<K>`, or a
    /// [`ListIter`](shardwise::protocol::types::de::ListIter) to avoid
    /// allocating): the removed map keys, set elements, list timeuuid keys
    /// or UDT field indexes. Null reads as empty.
    pub fn deleted_elements<T: DeserializeValue<'a>>(&self, name: &str) -> Result<T, RowError> {
        let c = self.base(name)?;
        let i = c.deleted_elements.ok_or_else(|| RowError::NoSuchColumn(format!("{DELETED_ELEMENTS}{name}")))?;
        self.read(i)
    }

    /// [`Self::deleted_elements`] by position in [`LogSchema::columns`].
    pub fn deleted_elements_at<T: DeserializeValue<'a>>(&self, column: usize) -> Result<T, RowError> {
        let c = self.base_at(column)?;
        let i = c.deleted_elements.ok_or_else(|| RowError::NoSuchColumn(format!("{DELETED_ELEMENTS}{}", c.name)))?;
        self.read(i)
    }

    fn base(&self, name: &str) -> Result<&'a BaseColumn, RowError> {
        self.schema.column(name).ok_or_else(|| RowError::NoSuchColumn(name.into()))
    }

    fn base_at(&self, column: usize) -> Result<&'a BaseColumn, RowError> {
        self.schema.columns.get(column).ok_or_else(|| RowError::NoSuchColumn(format!("#{column}")))
    }

    /// Reads result column `index` as `T`.
    fn read<T: DeserializeValue<'a>>(&self, index: usize) -> Result<T, RowError> {
        let schema: &'a LogSchema = self.schema;
        let spec = schema.specs.get(index).ok_or_else(|| RowError::NoSuchColumn(format!("#{index}")))?;
        let error = |e: DeserializeError| RowError::Value { column: spec.name.clone(), source: Box::new(e) };
        T::type_check(&spec.typ).map_err(|e| error(e.into()))?;
        let value = slice(self.raw, self.spans, index).map(|b| FrameSlice::new(self.frame, b));
        T::deserialize(&spec.typ, value).map_err(error)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use shardwise::protocol::rows::ResultMetadata;
    use shardwise::protocol::types::de::ListIter;
    use shardwise::protocol::types::ser::SerializeValue;
    use shardwise::protocol::types::CqlValue;

    use super::*;

    pub(crate) fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
        ColumnSpec { keyspace: "ks".into(), table: "t_scylla_cdc_log".into(), name: name.into(), typ }
    }

    /// The log of `t (pk int, ck int, v int, m map<int, text>, PRIMARY KEY
    /// (pk, ck))` as `SELECT *` returns it: keys, then regular columns by name.
    pub(crate) fn log_specs() -> Vec<ColumnSpec> {
        use ColumnType as T;
        vec![
            spec("cdc$stream_id", T::Blob),
            spec("cdc$time", T::Timeuuid),
            spec("cdc$batch_seq_no", T::Int),
            spec("cdc$deleted_elements_m", T::Set(Box::new(T::Int))),
            spec("cdc$deleted_m", T::Boolean),
            spec("cdc$deleted_v", T::Boolean),
            spec("cdc$end_of_batch", T::Boolean),
            spec("cdc$operation", T::TinyInt),
            spec("cdc$ttl", T::BigInt),
            spec("ck", T::Int),
            spec("m", T::Map(Box::new(T::Int), Box::new(T::Text))),
            spec("pk", T::Int),
            spec("v", T::Int),
        ]
    }

    /// A value's bytes without the length prefix.
    pub(crate) fn ser(v: impl SerializeValue) -> Vec<u8> {
        let mut buf = Vec::new();
        v.encode(&mut buf);
        buf.split_off(4)
    }

    pub(crate) const STREAM: [u8; 16] =
        [0x80, 0x7a, 0xe7, 0x3e, 0x07, 0xdb, 0xd4, 0x12, 0x2e, 0x32, 0xd3, 0x6e, 0x08, 0, 0, 0x11];
    pub(crate) const TIME_UUID: &str = "b223c55e-6d07-11ea-7654-24e4fb3f20b9";

    /// Rows of the log in `log_specs()` order: (seq, op, ttl, eob, ck, m,
    /// pk, v, deleted_v, deleted_m, deleted_elements_m).
    #[allow(clippy::type_complexity)]
    pub(crate) fn log_rows(
        rows: &[(
            i32,
            i8,
            Option<i64>,
            Option<bool>,
            Option<i32>,
            Option<Vec<(i32, &str)>>,
            i32,
            Option<i32>,
            Option<bool>,
            Option<bool>,
            Option<Vec<i32>>,
        )],
        with_metadata: bool,
    ) -> Rows {
        let time: Uuid = TIME_UUID.parse().unwrap();
        let encoded: Vec<Vec<Option<Vec<u8>>>> = rows
            .iter()
            .map(|(seq, op, ttl, eob, ck, m, pk, v, del_v, del_m, del_el)| {
                vec![
                    Some(STREAM.to_vec()),
                    Some(time.as_bytes().to_vec()),
                    Some(ser(*seq)),
                    del_el.as_ref().map(|e| ser(e.clone())),
                    del_m.map(ser),
                    del_v.map(ser),
                    eob.map(ser),
                    Some(ser(*op)),
                    ttl.map(ser),
                    ck.map(ser),
                    m.as_ref().map(|m| ser(m.iter().map(|(k, v)| (*k, v.to_string())).collect::<BTreeMap<_, _>>())),
                    Some(ser(*pk)),
                    v.map(ser),
                ]
            })
            .collect();
        let borrowed: Vec<Vec<Option<&[u8]>>> =
            encoded.iter().map(|r| r.iter().map(|c| c.as_deref()).collect()).collect();
        let specs = log_specs();
        let metadata =
            ResultMetadata { columns_count: specs.len(), specs: with_metadata.then_some(specs), ..Default::default() };
        Rows::from_raw(metadata, &borrowed).unwrap()
    }

    pub(crate) fn sample_page(with_metadata: bool) -> Rows {
        log_rows(
            &[
                // UPDATE SET v = 5, m = m + {1: 'a'} USING TTL 30
                (0, 1, Some(30), None, Some(2), Some(vec![(1, "a")]), 7, Some(5), None, None, None),
                // DELETE v, m[3], m[4]
                (1, 1, None, None, Some(2), None, 7, None, Some(true), None, Some(vec![3, 4])),
                // partition delete (−4: expiry), last row of the change
                (2, -4, None, Some(true), None, None, 7, None, None, None, None),
            ],
            with_metadata,
        )
    }

    #[test]
    fn operations() {
        for code in -128..=127i8 {
            match Operation::from_code(code) {
                Some(op) => assert_eq!(op.code(), code.abs(), "an expiry is the delete it is"),
                None => assert_eq!(Operation::try_from(code), Err(RowError::UnknownOperation(i32::from(code)))),
            }
        }
        let known: Vec<i8> = (-128..=127).filter(|c| Operation::from_code(*c).is_some()).collect();
        assert_eq!(known, vec![-4, -3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(Operation::from_code(-3), Some(Operation::RowDelete));
        assert_eq!(Operation::from_code(-4), Some(Operation::PartitionDelete));
        assert!(Operation::PreImage.is_image() && Operation::PostImage.is_image() && !Operation::Insert.is_image());
        assert!(Operation::RangeDeleteEndExclusive.is_delete() && Operation::RowDelete.is_delete());
        assert!(!Operation::Update.is_delete());
    }

    #[test]
    fn schema_classifies_columns() {
        let schema = LogSchema::new(log_specs()).unwrap();
        let names: Vec<&str> = schema.column_names().collect();
        assert_eq!(names, vec!["ck", "m", "pk", "v"]);
        let m = schema.column("m").unwrap();
        assert_eq!((m.value_index(), m.deleted_index(), m.deleted_elements_index()), (10, Some(4), Some(3)));
        let v = schema.column("v").unwrap();
        assert_eq!((v.value_index(), v.deleted_index(), v.deleted_elements_index()), (12, Some(5), None));
        let pk = schema.column("pk").unwrap();
        assert_eq!((pk.deleted_index(), pk.deleted_elements_index()), (None, None));
        assert_eq!(schema.column_index("v"), Some(3));
        assert!(schema.column("cdc$time").is_none());
    }

    #[test]
    fn deleted_elements_prefix_is_stripped_first() {
        use ColumnType as T;
        // A base column named `elements_x` next to a collection `x`.
        let mut specs = log_specs();
        specs.push(spec("cdc$deleted_elements_x", T::Set(Box::new(T::Int))));
        specs.push(spec("cdc$deleted_x", T::Boolean));
        specs.push(spec("cdc$deleted_elements_elements_x", T::Set(Box::new(T::Int))));
        specs.push(spec("cdc$deleted_elements_x_gone", T::Set(Box::new(T::Int))));
        specs.push(spec("cdc$something_new", T::Int));
        specs.push(spec("elements_x", T::Set(Box::new(T::Int))));
        specs.push(spec("x", T::Set(Box::new(T::Int))));
        let schema = LogSchema::new(specs).unwrap();
        let x = schema.column("x").unwrap();
        assert_eq!((x.deleted_index(), x.deleted_elements_index()), (Some(14), Some(13)));
        let ex = schema.column("elements_x").unwrap();
        assert_eq!((ex.deleted_index(), ex.deleted_elements_index()), (None, Some(15)));
        assert_eq!(schema.columns().len(), 6);
    }

    #[test]
    fn schema_errors() {
        let mut specs = log_specs();
        specs.retain(|s| s.name != "cdc$operation");
        assert_eq!(LogSchema::new(specs).unwrap_err(), SchemaError::MissingColumn("cdc$operation"));
        let mut specs = log_specs();
        specs[1].typ = ColumnType::Text;
        assert!(matches!(LogSchema::new(specs), Err(SchemaError::WrongType { expected: "timeuuid", .. })));
        let mut specs = log_specs();
        specs[5].typ = ColumnType::Int;
        assert!(matches!(LogSchema::new(specs), Err(SchemaError::WrongType { expected: "boolean", .. })));
        // Optional metadata columns may be missing.
        let mut specs = log_specs();
        specs.retain(|s| s.name != "cdc$ttl" && s.name != "cdc$end_of_batch");
        assert!(LogSchema::new(specs).is_ok());
    }

    #[test]
    fn reads_rows_as_views() {
        for with_metadata in [true, false] {
            let rows = sample_page(with_metadata);
            let schema = LogSchema::new(log_specs()).unwrap();
            let mut index = RowIndex::default();
            let page = LogPage::new(&schema, &rows, &mut index).unwrap();
            assert_eq!(page.len(), 3);
            let all: Vec<CdcRow<'_>> = page.iter().collect();
            assert_eq!(page.iter().len(), 3);

            let r = all[0];
            assert_eq!(r.stream_id(), StreamId::from_bytes(STREAM));
            assert_eq!(r.time(), TIME_UUID.parse::<Uuid>().unwrap());
            assert_eq!(r.time_micros(), 1_584_969_040_910_883);
            assert_eq!(
                (r.batch_seq_no(), r.operation(), r.ttl(), r.end_of_batch()),
                (0, Operation::Update, Some(30), false)
            );
            assert_eq!(r.value::<i32>("v"), Ok(5));
            assert_eq!(r.value::<Option<i32>>("ck"), Ok(Some(2)));
            assert_eq!(r.value::<BTreeMap<i32, &str>>("m"), Ok(BTreeMap::from([(1, "a")])));
            assert_eq!(r.value_at::<i32>(2), Ok(7), "pk by position");
            assert!(!r.is_deleted("v") && !r.is_deleted("m") && !r.is_deleted("pk") && !r.is_deleted("nope"));
            assert_eq!(r.deleted_elements::<Vec<i32>>("m"), Ok(vec![]), "null reads as empty");
            assert_eq!(r.deleted_elements::<Option<Vec<i32>>>("m"), Ok(None));
            assert_eq!(r.raw_value("v"), Some(&[0, 0, 0, 5][..]));
            assert_eq!(r.raw_value_at(3), Some(&[0, 0, 0, 5][..]));
            assert_eq!(r.column_names().collect::<Vec<_>>(), vec!["ck", "m", "pk", "v"]);
            // A borrowed text points into the response buffer.
            let m: BTreeMap<i32, &str> = r.value("m").unwrap();
            let body = rows.body().as_ptr_range();
            assert!(body.contains(&m[&1].as_ptr()));

            let r = all[1];
            assert_eq!((r.batch_seq_no(), r.ttl()), (1, None));
            assert_eq!(r.value::<Option<i32>>("v"), Ok(None));
            assert!(r.is_deleted("v") && r.is_deleted_at(3) && !r.is_deleted("m"));
            assert_eq!(r.deleted_elements::<Vec<i32>>("m"), Ok(vec![3, 4]));
            let it: ListIter<'_, i32> = r.deleted_elements_at(1).unwrap();
            assert_eq!(it.collect::<Result<Vec<_>, _>>(), Ok(vec![3, 4]));
            assert_eq!(r.raw_value("v"), None);

            let r = all[2];
            assert_eq!(r.operation(), Operation::PartitionDelete, "an expiry is the delete it is");
            assert!(r.is_expiration() && r.end_of_batch());
            assert!(!all[0].is_expiration() && !all[1].is_expiration());
            assert_eq!(r.value::<Option<i32>>("ck"), Ok(None));
            assert!(format!("{r:?}").contains("PartitionDelete") && format!("{r:?}").contains("expiration: true"));
        }
    }

    #[test]
    fn value_errors_are_typed() {
        let rows = sample_page(true);
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let page = LogPage::new(&schema, &rows, &mut index).unwrap();
        let r = page.row(1).unwrap();
        assert_eq!(r.value::<i32>("nope"), Err(RowError::NoSuchColumn("nope".into())));
        assert!(matches!(r.value::<i32>("v"), Err(RowError::Value { ref column, .. }) if column == "v"), "null");
        assert!(matches!(r.value::<String>("pk"), Err(RowError::Value { .. })), "type mismatch");
        assert!(
            matches!(r.deleted_elements::<Vec<i32>>("v"), Err(RowError::NoSuchColumn(c)) if c == "cdc$deleted_elements_v")
        );
        assert_eq!(r.value_at::<i32>(99), Err(RowError::NoSuchColumn("#99".into())));
        assert!(page.row(3).is_none());
        assert_eq!(r.raw_column(0), Some(&STREAM[..]));
    }

    #[test]
    fn index_is_reused_across_pages() {
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let first = sample_page(true);
        let n = LogPage::new(&schema, &first, &mut index).unwrap().len();
        let capacity = index.spans.capacity();
        let second = sample_page(false);
        let page = LogPage::new(&schema, &second, &mut index).unwrap();
        assert_eq!(page.len(), n);
        assert_eq!(index.spans.capacity(), capacity, "no new allocation");
    }

    #[test]
    fn page_must_match_the_schema() {
        let rows = sample_page(true);
        let mut index = RowIndex::default();
        let mut specs = log_specs();
        specs.pop();
        let short = LogSchema::new(specs).unwrap();
        assert_eq!(
            LogPage::new(&short, &rows, &mut index).unwrap_err(),
            RowError::ColumnCount { expected: 12, actual: 13 }
        );
        let mut specs = log_specs();
        specs[12].name = "w".into();
        let other = LogSchema::new(specs).unwrap();
        assert_eq!(
            LogPage::new(&other, &rows, &mut index).unwrap_err(),
            RowError::SchemaChanged { index: 12, name: "v".into() }
        );
    }

    /// `Rows::decode` leaves the values' framing to the reader: indexing
    /// the page is the check, so a page the driver hands over with bytes
    /// missing or left over fails here instead of being read short.
    #[test]
    fn indexing_checks_the_framing() {
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let mut wire = Vec::new();
        sample_page(true).encode(&mut wire).unwrap();
        let decode = |wire: Vec<u8>| Rows::decode(Bytes::from(wire), 4).expect("only the metadata is checked");
        let long = decode([wire.clone(), vec![0]].concat());
        let short = decode(wire[..wire.len() - 1].to_vec());
        for rows in [long, short] {
            assert!(rows.check_framing().is_err());
            assert!(matches!(LogPage::new(&schema, &rows, &mut index), Err(RowError::Malformed { .. })));
        }
        let whole = decode(wire);
        assert_eq!(whole.check_framing(), Ok(()));
        assert_eq!(LogPage::new(&schema, &whole, &mut index).unwrap().len(), 3);
    }

    /// A page of rows of raw values in `log_specs()` order.
    fn raw_page(rows: &[Vec<Option<Vec<u8>>>]) -> Rows {
        let specs = log_specs();
        let borrowed: Vec<Vec<Option<&[u8]>>> =
            rows.iter().map(|values| values.iter().map(|v| v.as_deref()).collect()).collect();
        let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
        Rows::from_raw(metadata, &borrowed).unwrap()
    }

    fn good_row() -> Vec<Option<Vec<u8>>> {
        let mut row = vec![None; 13];
        row[0] = Some(STREAM.to_vec());
        row[1] = Some(TIME_UUID.parse::<Uuid>().unwrap().as_bytes().to_vec());
        row[2] = Some(ser(0i32));
        row[7] = Some(ser(2i8));
        row[11] = Some(ser(1i32));
        row
    }

    /// Rows are compared with the layout of the row before and walked
    /// only when they differ: whatever the mix of alike and different
    /// rows, every value is found where a plain walk finds it, and a bad
    /// metadata value behind a row of the same layout is still refused.
    #[test]
    fn rows_alike_or_not_are_indexed_as_a_walk_finds_them() {
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let mut rows = Vec::new();
        for i in 0..40u8 {
            let mut row = good_row();
            // Runs of alike rows, broken by a null, a longer value or a flag.
            row[10] = match i % 7 {
                0..=2 => Some(vec![i; 3]),
                3 => None,
                _ => Some(vec![i; usize::from(i % 5) + 1]),
            };
            row[12] = (i % 11 != 5).then(|| ser(i32::from(i)));
            row[5] = (i % 13 == 4).then(|| vec![1]);
            row[7] = Some(ser(if i % 3 == 0 { 1i8 } else { 2i8 }));
            rows.push(row);
        }
        let page_rows = raw_page(&rows);
        let page = LogPage::new(&schema, &page_rows, &mut index).unwrap();
        assert_eq!(page.len(), rows.len());
        for (i, expected) in rows.iter().enumerate() {
            let row = page.row(i).unwrap();
            for (c, value) in expected.iter().enumerate() {
                assert_eq!(row.raw_column(c), value.as_deref(), "row {i} column {c}");
            }
        }
        // An unknown operation in a row laid out like the one before it,
        // and a 3-byte `cdc$batch_seq_no` beside a longer `m`: the row's
        // size stays the same, not its layout.
        let cases = [
            (vec![(7, vec![10])], RowError::UnknownOperation(10)),
            (
                vec![(2, vec![0; 3]), (10, vec![2; 4])],
                RowError::Malformed { column: "cdc$batch_seq_no".into(), len: 3 },
            ),
        ];
        for (edits, error) in cases {
            let mut bad = rows.clone();
            let mut row = bad[2].clone();
            for (column, value) in edits {
                row[column] = Some(value);
            }
            bad.insert(3, row);
            assert_eq!(LogPage::new(&schema, &raw_page(&bad), &mut index).unwrap_err(), error);
        }
    }

    #[test]
    fn malformed_metadata_is_an_error_not_a_panic() {
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let cases: Vec<(usize, Option<Vec<u8>>, RowError)> = vec![
            (0, None, RowError::Null("cdc$stream_id")),
            (0, Some(vec![1; 15]), RowError::Malformed { column: "cdc$stream_id".into(), len: 15 }),
            (1, Some(vec![1; 3]), RowError::Malformed { column: "cdc$time".into(), len: 3 }),
            (2, None, RowError::Null("cdc$batch_seq_no")),
            (7, None, RowError::Null("cdc$operation")),
            (7, Some(vec![10]), RowError::UnknownOperation(10)),
            (7, Some(vec![0xfe]), RowError::UnknownOperation(-2)),
            (7, Some(vec![1, 2, 3]), RowError::Malformed { column: "cdc$operation".into(), len: 3 }),
            (8, Some(vec![0; 4]), RowError::Malformed { column: "cdc$ttl".into(), len: 4 }),
            (6, Some(vec![]), RowError::Malformed { column: "cdc$end_of_batch".into(), len: 0 }),
            (5, Some(vec![1, 1]), RowError::Malformed { column: "cdc$deleted_v".into(), len: 2 }),
        ];
        for (column, value, expected) in cases {
            let mut row = good_row();
            row[column] = value;
            // The page is refused as a whole, before any row is handed out,
            // even when the bad row comes after good ones.
            let rows = raw_page(&[good_row(), row]);
            assert_eq!(LogPage::new(&schema, &rows, &mut index).unwrap_err(), expected);
        }
        let rows = raw_page(&[good_row()]);
        let page = LogPage::new(&schema, &rows, &mut index).unwrap();
        let r = page.row(0).unwrap();
        assert_eq!((r.operation(), r.ttl(), r.end_of_batch()), (Operation::Insert, None, false));
        // A malformed base value fails only when read.
        let mut row = good_row();
        row[12] = Some(vec![1, 2]);
        let rows = raw_page(&[row]);
        let page = LogPage::new(&schema, &rows, &mut index).unwrap();
        let r = page.row(0).unwrap();
        assert!(matches!(r.value::<Option<i32>>("v"), Err(RowError::Value { .. })));
        assert!(matches!(r.value::<Option<CqlValue>>("pk"), Ok(Some(CqlValue::Int(1)))));
    }

    #[test]
    fn operation_stored_as_int_is_accepted() {
        let mut specs = log_specs();
        specs[7].typ = ColumnType::Int;
        let schema = LogSchema::new(specs.clone()).unwrap();
        let mut row = good_row();
        row[7] = Some(ser(-3i32));
        let borrowed: Vec<Option<&[u8]>> = row.iter().map(|v| v.as_deref()).collect();
        let metadata = ResultMetadata { columns_count: specs.len(), specs: Some(specs), ..Default::default() };
        let rows = Rows::from_raw(metadata, &[borrowed]).unwrap();
        let mut index = RowIndex::default();
        let page = LogPage::new(&schema, &rows, &mut index).unwrap();
        assert_eq!(page.row(0).unwrap().operation(), Operation::RowDelete);
        assert!(page.row(0).unwrap().is_expiration());
    }
}
