//! BATCH: several statements applied together. Statements are generic
//! ([`BatchStatements`] is implemented for slices, arrays, `Vec`s and tuples
//! of [`BatchStatement`]s), so a batch of differently-typed values needs no
//! boxing.

use bytes::BufMut;

use super::query::SharedTail;
use super::{flags_len, put_flags, read_flags, Request};
use crate::codec::{self, Reader};
use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};
use crate::frame::{Opcode, ProtocolVersion};
use crate::request::query::flag;
use crate::types::ser::{RawValues, SerializeValues};

/// The kind of batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum BatchType {
    /// Atomic, through the batch log.
    #[default]
    Logged = 0,
    /// Not atomic.
    Unlogged = 1,
    /// Counter updates only.
    Counter = 2,
}

/// How a statement of a batch is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatementKind<'a> {
    /// Statement text.
    Query(&'a str),
    /// Prepared statement id.
    Prepared(&'a [u8]),
}

/// One statement of a batch with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStatement<'a, V> {
    /// The statement.
    pub kind: StatementKind<'a>,
    /// Its bind values.
    pub values: V,
}

impl<V: SerializeValues> BatchStatement<'_, V> {
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        if self.values.with_names() {
            return Err(EncodeError::InvalidValue {
                what: "batch statement",
                reason: "named values are not supported in batches",
            });
        }
        codec::check_short_len("batch statement values", self.values.count())?;
        let head = match self.kind {
            StatementKind::Query(q) => codec::long_string_len("query", q)?,
            StatementKind::Prepared(id) => codec::short_bytes_len("statement id", id)?,
        };
        Ok(1 + head + 2 + self.values.encoded_len()?)
    }

    fn encode(&self, buf: &mut impl BufMut) {
        match self.kind {
            StatementKind::Query(q) => {
                buf.put_u8(0);
                codec::put_long_string(buf, q);
            }
            StatementKind::Prepared(id) => {
                buf.put_u8(1);
                codec::put_short_bytes(buf, id);
            }
        }
        buf.put_u16(self.values.count() as u16);
        self.values.encode(buf);
    }
}

/// The statements of a batch.
pub trait BatchStatements {
    /// Number of statements.
    fn count(&self) -> usize;
    /// Size of all statements on the wire.
    fn encoded_len(&self) -> Result<usize, EncodeError>;
    /// Writes all statements.
    fn encode(&self, buf: &mut impl BufMut);
}

impl<V: SerializeValues> BatchStatements for [BatchStatement<'_, V>] {
    fn count(&self) -> usize {
        self.len()
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        self.iter().try_fold(0, |acc, s| Ok(acc + s.encoded_len()?))
    }
    fn encode(&self, buf: &mut impl BufMut) {
        for s in self {
            s.encode(buf);
        }
    }
}

impl<V: SerializeValues> BatchStatements for Vec<BatchStatement<'_, V>> {
    fn count(&self) -> usize {
        self.len()
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        self.as_slice().encoded_len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.as_slice().encode(buf)
    }
}

impl<V: SerializeValues, const N: usize> BatchStatements for [BatchStatement<'_, V>; N] {
    fn count(&self) -> usize {
        N
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        self.as_slice().encoded_len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.as_slice().encode(buf)
    }
}

impl<S: BatchStatements + ?Sized> BatchStatements for &S {
    fn count(&self) -> usize {
        (**self).count()
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        (**self).encoded_len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        (**self).encode(buf)
    }
}

macro_rules! tuple_statements {
    ($($v:ident . $i:tt),+) => {
        impl<$($v: SerializeValues),+> BatchStatements for ($(BatchStatement<'_, $v>,)+) {
            fn count(&self) -> usize {
                [$($i),+].len()
            }
            fn encoded_len(&self) -> Result<usize, EncodeError> {
                Ok(0 $(+ self.$i.encoded_len()?)+)
            }
            fn encode(&self, buf: &mut impl BufMut) {
                $(self.$i.encode(buf);)+
            }
        }
    };
}
tuple_statements!(A.0);
tuple_statements!(A.0, B.1);
tuple_statements!(A.0, B.1, C.2);
tuple_statements!(A.0, B.1, C.2, D.3);
tuple_statements!(A.0, B.1, C.2, D.3, E.4);
tuple_statements!(A.0, B.1, C.2, D.3, E.4, F.5);
tuple_statements!(A.0, B.1, C.2, D.3, E.4, F.5, G.6);
tuple_statements!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7);

/// The BATCH request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch<'a, S> {
    /// Logged, unlogged or counter.
    pub kind: BatchType,
    /// The statements.
    pub statements: S,
    /// Consistency level.
    pub consistency: Consistency,
    /// Serial consistency for conditional batches.
    pub serial_consistency: Option<Consistency>,
    /// Client-side timestamp in microseconds.
    pub timestamp: Option<i64>,
    /// Keyspace (v5 only).
    pub keyspace: Option<&'a str>,
    /// "Now" for TTL computations (v5 only).
    pub now_in_seconds: Option<i32>,
}

impl<'a> Batch<'a, Vec<BatchStatement<'a, RawValues<'a>>>> {
    /// Decodes the body.
    pub fn decode(version: ProtocolVersion, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let kind = match r.u8("batch type")? {
            0 => BatchType::Logged,
            1 => BatchType::Unlogged,
            2 => BatchType::Counter,
            other => return Err(DecodeError::UnknownCode { what: "batch type", value: other.into() }),
        };
        let n = r.u16("statement count")? as usize;
        let mut statements = Vec::with_capacity(n.min(r.remaining() / 5));
        for _ in 0..n {
            let kind = match r.u8("statement kind")? {
                0 => StatementKind::Query(r.long_string("query")?),
                1 => StatementKind::Prepared(r.short_bytes("statement id")?),
                other => return Err(DecodeError::UnknownCode { what: "statement kind", value: other.into() }),
            };
            let count = r.u16("value count")? as usize;
            let mut values = RawValues::default();
            values.values.reserve(count.min(r.remaining() / 4));
            for _ in 0..count {
                values.values.push(r.value("value")?);
            }
            statements.push(BatchStatement { kind, values });
        }
        let consistency = Consistency::from_u16(r.u16("consistency")?)?;
        let flags = read_flags(version, r)?;
        let known = flag::SERIAL_CONSISTENCY
            | flag::TIMESTAMP
            | if version == ProtocolVersion::V5 { flag::KEYSPACE | flag::NOW_IN_SECONDS } else { 0 };
        if flags & !known != 0 {
            return Err(DecodeError::UnknownCode { what: "batch flags", value: flags.into() });
        }
        let SharedTail { serial_consistency, timestamp, keyspace, now_in_seconds } = SharedTail::decode(flags, r)?;
        Ok(Batch { kind, statements, consistency, serial_consistency, timestamp, keyspace, now_in_seconds })
    }
}

impl<'a, S: BatchStatements> Batch<'a, S> {
    fn tail(&self) -> SharedTail<'a> {
        SharedTail {
            serial_consistency: self.serial_consistency,
            timestamp: self.timestamp,
            keyspace: self.keyspace,
            now_in_seconds: self.now_in_seconds,
        }
    }
}

impl<S: BatchStatements> Request for Batch<'_, S> {
    const OPCODE: Opcode = Opcode::Batch;
    fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        codec::check_short_len("batch statements", self.statements.count())?;
        let n = 1 + 2 + self.statements.encoded_len()? + 2 + flags_len(version);
        Ok(n + self.tail().encoded_len(version)?)
    }
    fn encode_body(&self, version: ProtocolVersion, buf: &mut impl BufMut) {
        buf.put_u8(self.kind as u8);
        buf.put_u16(self.statements.count() as u16);
        self.statements.encode(buf);
        buf.put_u16(self.consistency as u16);
        let tail = self.tail();
        put_flags(version, tail.flags(), buf);
        tail.encode(buf);
    }
}
