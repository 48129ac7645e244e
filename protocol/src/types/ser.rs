//! Serialization of Rust values into CQL bind values.
//!
//! Every value knows its exact encoded size ([`SerializeValue::encoded_len`])
//! before it is written, so a request is written into a buffer reserved once.
//! Nothing here allocates for primitive values.

use bytes::BufMut;

use crate::codec::{self, RawValue};
use crate::error::EncodeError;
use crate::types::{ColumnSpec, ColumnType};

/// A Rust value that can be sent as a CQL value.
pub trait SerializeValue {
    /// Checks that this value can be written as a column of type `typ`.
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError>;
    /// Size on the wire, including the `[int]` length prefix.
    fn encoded_len(&self) -> Result<usize, EncodeError>;
    /// Writes the value with its `[int]` length prefix. Must write exactly
    /// [`Self::encoded_len`] bytes; only called after `encoded_len` succeeded.
    fn encode(&self, buf: &mut impl BufMut);
}

/// A list of bind values: a tuple, a slice, a `Vec` of values, or
/// [`RawValues`] already serialized.
pub trait SerializeValues {
    /// Number of values.
    fn count(&self) -> usize;
    /// Whether values are sent with names (QUERY flag 0x40).
    fn with_names(&self) -> bool {
        false
    }
    /// Checks the values against the bind markers of a prepared statement.
    fn check_types(&self, specs: &[ColumnSpec]) -> Result<(), EncodeError>;
    /// Size of all values (and names) on the wire, without the `[short]` count.
    fn encoded_len(&self) -> Result<usize, EncodeError>;
    /// Writes all values (and names), without the `[short]` count.
    fn encode(&self, buf: &mut impl BufMut);
}

/// Bind values already in wire form, as read from a request (optionally
/// named).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawValues<'a> {
    /// Names, present iff the values were sent with names.
    pub names: Option<Vec<&'a str>>,
    /// The values.
    pub values: Vec<RawValue<'a>>,
}

impl SerializeValues for RawValues<'_> {
    fn count(&self) -> usize {
        self.values.len()
    }
    fn with_names(&self) -> bool {
        self.names.is_some()
    }
    fn check_types(&self, _specs: &[ColumnSpec]) -> Result<(), EncodeError> {
        Ok(())
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        let mut n = self.values.iter().map(|v| v.wire_len()).sum();
        if let Some(names) = &self.names {
            if names.len() != self.values.len() {
                return Err(EncodeError::InvalidValue {
                    what: "named values",
                    reason: "names and values differ in number",
                });
            }
            for name in names {
                n += codec::string_len("value name", name)?;
            }
        }
        Ok(n)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        for (i, v) in self.values.iter().enumerate() {
            if let Some(name) = self.names.as_ref().and_then(|n| n.get(i)) {
                codec::put_string(buf, name);
            }
            v.put(buf);
        }
    }
}

impl SerializeValue for RawValue<'_> {
    fn check_type(&self, _typ: &ColumnType) -> Result<(), EncodeError> {
        Ok(())
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        codec::check_int_len("value", self.as_bytes().map_or(0, <[u8]>::len))?;
        Ok(self.wire_len())
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.put(buf)
    }
}
