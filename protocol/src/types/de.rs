//! Zero-copy deserialization of CQL values and rows.
//!
//! A result set keeps the response body as one [`Bytes`]; values are read
//! as views borrowing from it (`&str`, `&[u8]`, [`Bytes`] slices via
//! [`FrameSlice::to_bytes`], lazy collection iterators). Types are checked
//! once per result set ([`DeserializeRow::type_check`]), then each row is
//! decoded without allocating.

use bytes::Bytes;

use crate::codec::Reader;
use crate::error::DecodeError;
use crate::types::{ColumnSpec, ColumnType};

/// A value's bytes together with the buffer they live in, so that an owned
/// [`Bytes`] handle can be made without copying.
#[derive(Debug, Clone, Copy)]
pub struct FrameSlice<'a> {
    frame: &'a Bytes,
    slice: &'a [u8],
}

impl<'a> FrameSlice<'a> {
    /// A view of `slice`, which must lie inside `frame` (or be any slice when
    /// `to_bytes` may copy).
    pub fn new(frame: &'a Bytes, slice: &'a [u8]) -> Self {
        FrameSlice { frame, slice }
    }
    /// A view of a whole buffer.
    pub fn whole(frame: &'a Bytes) -> Self {
        FrameSlice { frame, slice: frame.as_ref() }
    }
    /// The bytes.
    pub fn as_slice(&self) -> &'a [u8] {
        self.slice
    }
    /// The buffer the bytes live in.
    pub fn frame(&self) -> &'a Bytes {
        self.frame
    }
    /// An owned handle on the same bytes, sharing the buffer (no copy).
    pub fn to_bytes(&self) -> Bytes {
        let range = self.frame.as_ptr_range();
        let inside = range.start <= self.slice.as_ptr()
            && self.slice.as_ptr_range().end <= range.end;
        if inside && !self.slice.is_empty() {
            self.frame.slice_ref(self.slice)
        } else {
            Bytes::copy_from_slice(self.slice)
        }
    }
    /// A sub-view of the same buffer.
    pub fn sub(&self, slice: &'a [u8]) -> FrameSlice<'a> {
        FrameSlice { frame: self.frame, slice }
    }
}

/// A Rust type cannot hold values of a CQL type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rust_type} cannot hold values of CQL type {cql_type}{}", column.as_ref().map(|c| format!(" (column {c})")).unwrap_or_default())]
pub struct TypeCheckError {
    /// The Rust type requested.
    pub rust_type: &'static str,
    /// The CQL type of the column, as written in CQL.
    pub cql_type: String,
    /// The column name, when known.
    pub column: Option<String>,
}

impl TypeCheckError {
    /// A mismatch between `T` and `typ`.
    pub fn new<T: ?Sized>(typ: &ColumnType) -> Self {
        TypeCheckError {
            rust_type: std::any::type_name::<T>(),
            cql_type: typ.to_string(),
            column: None,
        }
    }
}

/// A value could not be deserialized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeserializeError {
    /// The Rust type does not match the column type.
    #[error(transparent)]
    TypeCheck(#[from] TypeCheckError),
    /// A null was found where the Rust type cannot represent it (use `Option`).
    #[error("unexpected null for {rust_type}")]
    UnexpectedNull {
        /// The Rust type requested.
        rust_type: &'static str,
    },
    /// The bytes are not a valid value of the column type.
    #[error("malformed {cql_type} value: {source}")]
    Malformed {
        /// The CQL type.
        cql_type: String,
        /// What was wrong.
        source: DecodeError,
    },
    /// The value does not fit the Rust type (e.g. a varint into `i64`).
    #[error("{cql_type} value does not fit in {rust_type}")]
    Overflow {
        /// The CQL type.
        cql_type: String,
        /// The Rust type requested.
        rust_type: &'static str,
    },
    /// A row has a different number of columns than the Rust type expects.
    #[error("row has {actual} columns, {expected} expected")]
    ColumnCount {
        /// Columns the Rust type wants.
        expected: usize,
        /// Columns in the result.
        actual: usize,
    },
    /// Deserializing one column failed.
    #[error("column {index} ({name}): {source}")]
    Column {
        /// Column index.
        index: usize,
        /// Column name.
        name: String,
        /// What failed.
        source: Box<DeserializeError>,
    },
}

impl DeserializeError {
    /// A [`DeserializeError::Malformed`] for `typ`.
    pub fn malformed(typ: &ColumnType, source: DecodeError) -> Self {
        DeserializeError::Malformed { cql_type: typ.to_string(), source }
    }
}

/// A Rust type that can be read from a CQL value borrowed from a frame.
pub trait DeserializeValue<'a>: Sized {
    /// Checks whether this Rust type can hold values of `typ`.
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError>;
    /// Reads a value (`None` is null). `typ` passed [`Self::type_check`].
    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError>;
}

/// One column of a row: its spec and its raw bytes (`None` is null).
#[derive(Debug, Clone, Copy)]
pub struct RawColumn<'a> {
    /// Position in the row.
    pub index: usize,
    /// The column's spec.
    pub spec: &'a ColumnSpec,
    /// The bytes, `None` for null.
    pub value: Option<FrameSlice<'a>>,
}

/// Iterates over the columns of one row, reading their lengths lazily.
#[derive(Debug, Clone)]
pub struct ColumnIterator<'a> {
    specs: &'a [ColumnSpec],
    frame: &'a Bytes,
    reader: Reader<'a>,
    index: usize,
}

impl<'a> ColumnIterator<'a> {
    /// Columns of the row starting at `reader`.
    pub fn new(specs: &'a [ColumnSpec], frame: &'a Bytes, reader: Reader<'a>) -> Self {
        ColumnIterator { specs, frame, reader, index: 0 }
    }
    /// Column specs of the row.
    pub fn specs(&self) -> &'a [ColumnSpec] {
        self.specs
    }
    /// Columns not yet read.
    pub fn columns_remaining(&self) -> usize {
        self.specs.len() - self.index
    }
    /// The reader positioned after the columns read so far.
    pub fn reader(&self) -> Reader<'a> {
        self.reader
    }
}

impl<'a> Iterator for ColumnIterator<'a> {
    type Item = Result<RawColumn<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let spec = self.specs.get(self.index)?;
        let index = self.index;
        self.index += 1;
        Some(self.reader.bytes("column value").map(|b| RawColumn {
            index,
            spec,
            value: b.map(|s| FrameSlice::new(self.frame, s)),
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.columns_remaining();
        (n, Some(n))
    }
}

/// A Rust type built from a whole row: tuples of [`DeserializeValue`]s,
/// [`crate::types::de::Row`] views, or derived structs.
pub trait DeserializeRow<'a>: Sized {
    /// Checks the Rust type against the column specs of the result, once per
    /// result set.
    fn type_check(specs: &[ColumnSpec]) -> Result<(), TypeCheckError>;
    /// Reads one row. `specs` passed [`Self::type_check`].
    fn deserialize(row: ColumnIterator<'a>) -> Result<Self, DeserializeError>;
}
