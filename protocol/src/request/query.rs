//! QUERY: `<query [long string]><query_parameters>`, and the query
//! parameters shared with EXECUTE (spec §4.1.4).

use bytes::BufMut;

use super::{flags_len, put_flags, read_flags, v5_only, Request};
use crate::codec::{self, Reader};
use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};
use crate::frame::{Opcode, ProtocolVersion};
use crate::types::ser::{RawValues, SerializeValues};

pub(crate) mod flag {
    pub const VALUES: u32 = 0x01;
    pub const SKIP_METADATA: u32 = 0x02;
    pub const PAGE_SIZE: u32 = 0x04;
    pub const PAGING_STATE: u32 = 0x08;
    pub const SERIAL_CONSISTENCY: u32 = 0x10;
    pub const TIMESTAMP: u32 = 0x20;
    pub const NAMES: u32 = 0x40;
    pub const KEYSPACE: u32 = 0x80;
    pub const NOW_IN_SECONDS: u32 = 0x100;
}

/// The optional fields that QUERY/EXECUTE parameters and BATCH share, in
/// wire order: serial consistency, timestamp, and the v5 keyspace and
/// now-in-seconds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SharedTail<'a> {
    pub(crate) serial_consistency: Option<Consistency>,
    pub(crate) timestamp: Option<i64>,
    pub(crate) keyspace: Option<&'a str>,
    pub(crate) now_in_seconds: Option<i32>,
}

impl<'a> SharedTail<'a> {
    pub(crate) fn flags(&self) -> u32 {
        let mut f = 0;
        if self.serial_consistency.is_some() {
            f |= flag::SERIAL_CONSISTENCY;
        }
        if self.timestamp.is_some() {
            f |= flag::TIMESTAMP;
        }
        if self.keyspace.is_some() {
            f |= flag::KEYSPACE;
        }
        if self.now_in_seconds.is_some() {
            f |= flag::NOW_IN_SECONDS;
        }
        f
    }

    pub(crate) fn encoded_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        let mut n = 0;
        if self.serial_consistency.is_some() {
            n += 2;
        }
        if self.timestamp.is_some() {
            n += 8;
        }
        if let Some(ks) = self.keyspace {
            v5_only(version, "keyspace")?;
            n += codec::string_len("keyspace", ks)?;
        }
        if self.now_in_seconds.is_some() {
            v5_only(version, "now_in_seconds")?;
            n += 4;
        }
        Ok(n)
    }

    pub(crate) fn encode(&self, buf: &mut impl BufMut) {
        if let Some(c) = self.serial_consistency {
            buf.put_u16(c as u16);
        }
        if let Some(t) = self.timestamp {
            buf.put_i64(t);
        }
        if let Some(ks) = self.keyspace {
            codec::put_string(buf, ks);
        }
        if let Some(n) = self.now_in_seconds {
            buf.put_i32(n);
        }
    }

    pub(crate) fn decode(flags: u32, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let serial_consistency = if flags & flag::SERIAL_CONSISTENCY != 0 {
            Some(Consistency::from_u16(r.u16("serial consistency")?)?)
        } else {
            None
        };
        let timestamp = if flags & flag::TIMESTAMP != 0 { Some(r.i64("timestamp")?) } else { None };
        let keyspace = if flags & flag::KEYSPACE != 0 { Some(r.string("keyspace")?) } else { None };
        let now_in_seconds = if flags & flag::NOW_IN_SECONDS != 0 { Some(r.i32("now in seconds")?) } else { None };
        Ok(SharedTail { serial_consistency, timestamp, keyspace, now_in_seconds })
    }
}

/// The `<query_parameters>` of QUERY and EXECUTE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryParameters<'a, V> {
    /// Consistency level.
    pub consistency: Consistency,
    /// Bind values.
    pub values: V,
    /// Ask the server to omit result metadata (the client has it cached).
    pub skip_metadata: bool,
    /// Page size in rows.
    pub page_size: Option<i32>,
    /// Paging state returned by the previous page.
    pub paging_state: Option<&'a [u8]>,
    /// Serial consistency for the Paxos phase of LWTs.
    pub serial_consistency: Option<Consistency>,
    /// Client-side write timestamp, in microseconds.
    pub timestamp: Option<i64>,
    /// Keyspace for this query (v5 only, QUERY only).
    pub keyspace: Option<&'a str>,
    /// "Now" for TTL computations (v5 only; testing aid).
    pub now_in_seconds: Option<i32>,
}

impl<'a, V> QueryParameters<'a, V> {
    /// Parameters with `values` at `consistency`, everything else unset.
    pub fn new(consistency: Consistency, values: V) -> Self {
        QueryParameters {
            consistency,
            values,
            skip_metadata: false,
            page_size: None,
            paging_state: None,
            serial_consistency: None,
            timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        }
    }
}

impl<'a, V: SerializeValues> QueryParameters<'a, V> {
    fn tail(&self) -> SharedTail<'a> {
        SharedTail {
            serial_consistency: self.serial_consistency,
            timestamp: self.timestamp,
            keyspace: self.keyspace,
            now_in_seconds: self.now_in_seconds,
        }
    }

    fn flags(&self) -> u32 {
        let mut f = self.tail().flags();
        if self.values.count() > 0 {
            f |= flag::VALUES;
            if self.values.with_names() {
                f |= flag::NAMES;
            }
        }
        if self.skip_metadata {
            f |= flag::SKIP_METADATA;
        }
        if self.page_size.is_some() {
            f |= flag::PAGE_SIZE;
        }
        if self.paging_state.is_some() {
            f |= flag::PAGING_STATE;
        }
        f
    }

    /// Exact encoded size for `version`.
    pub fn encoded_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        let mut n = 2 + flags_len(version);
        let count = self.values.count();
        if count > 0 {
            codec::check_short_len("values", count)?;
            n += 2 + self.values.encoded_len()?;
        }
        if self.page_size.is_some() {
            n += 4;
        }
        if let Some(p) = self.paging_state {
            n += 4 + codec::check_int_len("paging state", p.len())?;
        }
        Ok(n + self.tail().encoded_len(version)?)
    }

    /// Writes the parameters (after [`Self::encoded_len`] succeeded).
    pub fn encode(&self, version: ProtocolVersion, buf: &mut impl BufMut) {
        buf.put_u16(self.consistency as u16);
        put_flags(version, self.flags(), buf);
        let count = self.values.count();
        if count > 0 {
            buf.put_u16(count as u16);
            self.values.encode(buf);
        }
        if let Some(p) = self.page_size {
            buf.put_i32(p);
        }
        if let Some(p) = self.paging_state {
            codec::put_bytes(buf, Some(p));
        }
        self.tail().encode(buf);
    }
}

impl<'a> QueryParameters<'a, RawValues<'a>> {
    /// Decodes parameters, keeping values in wire form.
    pub fn decode(version: ProtocolVersion, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let consistency = Consistency::from_u16(r.u16("consistency")?)?;
        let flags = read_flags(version, r)?;
        let known = match version {
            ProtocolVersion::V4 => 0x7f,
            ProtocolVersion::V5 => 0x1ff,
        };
        if flags & !known != 0 {
            return Err(DecodeError::UnknownCode { what: "query flags", value: flags.into() });
        }
        let mut values = RawValues::default();
        if flags & flag::VALUES != 0 {
            let n = r.u16("value count")? as usize;
            let with_names = flags & flag::NAMES != 0;
            let mut names = Vec::new();
            values.values.reserve(n.min(r.remaining() / 4));
            for _ in 0..n {
                if with_names {
                    names.push(r.string("value name")?);
                }
                values.values.push(r.value("value")?);
            }
            // Names of zero values are no names: keep one form, so re-encoding round-trips.
            if with_names && n > 0 {
                values.names = Some(names);
            }
        }
        let page_size = if flags & flag::PAGE_SIZE != 0 { Some(r.i32("page size")?) } else { None };
        let paging_state = if flags & flag::PAGING_STATE != 0 {
            Some(r.bytes("paging state")?.ok_or(DecodeError::Invalid { what: "paging state", reason: "null" })?)
        } else {
            None
        };
        let SharedTail { serial_consistency, timestamp, keyspace, now_in_seconds } = SharedTail::decode(flags, r)?;
        Ok(QueryParameters {
            consistency,
            values,
            skip_metadata: flags & flag::SKIP_METADATA != 0,
            page_size,
            paging_state,
            serial_consistency,
            timestamp,
            keyspace,
            now_in_seconds,
        })
    }
}

/// The QUERY request: an unprepared statement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query<'a, V> {
    /// Statement text.
    pub query: &'a str,
    /// Parameters and values.
    pub params: QueryParameters<'a, V>,
}

impl<'a> Query<'a, RawValues<'a>> {
    /// Decodes the body.
    pub fn decode(version: ProtocolVersion, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let query = r.long_string("query")?;
        Ok(Query { query, params: QueryParameters::decode(version, r)? })
    }
}

impl<V: SerializeValues> Request for Query<'_, V> {
    const OPCODE: Opcode = Opcode::Query;
    fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        Ok(codec::long_string_len("query", self.query)? + self.params.encoded_len(version)?)
    }
    fn encode_body(&self, version: ProtocolVersion, buf: &mut impl BufMut) {
        codec::put_long_string(buf, self.query);
        self.params.encode(version, buf);
    }
}
