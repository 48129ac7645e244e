//! ERROR responses: `<code [int]><message [string]>` and a code-specific
//! payload (spec §9 of v4, §8 of v5; Scylla's rate-limit error).

use std::net::IpAddr;

use bytes::BufMut;

use crate::codec::{self, Reader};
use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};
use crate::frame::ProtocolVersion;

/// Error codes.
pub mod code {
    #![allow(missing_docs)]
    pub const SERVER_ERROR: i32 = 0x0000;
    pub const PROTOCOL_ERROR: i32 = 0x000A;
    pub const BAD_CREDENTIALS: i32 = 0x0100;
    pub const UNAVAILABLE: i32 = 0x1000;
    pub const OVERLOADED: i32 = 0x1001;
    pub const IS_BOOTSTRAPPING: i32 = 0x1002;
    pub const TRUNCATE_ERROR: i32 = 0x1003;
    pub const WRITE_TIMEOUT: i32 = 0x1100;
    pub const READ_TIMEOUT: i32 = 0x1200;
    pub const READ_FAILURE: i32 = 0x1300;
    pub const FUNCTION_FAILURE: i32 = 0x1400;
    pub const WRITE_FAILURE: i32 = 0x1500;
    pub const CDC_WRITE_FAILURE: i32 = 0x1600;
    pub const CAS_WRITE_UNKNOWN: i32 = 0x1700;
    pub const SYNTAX_ERROR: i32 = 0x2000;
    pub const UNAUTHORIZED: i32 = 0x2100;
    pub const INVALID: i32 = 0x2200;
    pub const CONFIG_ERROR: i32 = 0x2300;
    pub const ALREADY_EXISTS: i32 = 0x2400;
    pub const UNPREPARED: i32 = 0x2500;
    /// Scylla's rate-limit error as sent today; negotiated through SUPPORTED.
    pub const SCYLLA_RATE_LIMIT: i32 = 0xF000;
}

/// The kind of write that timed out or failed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum WriteType {
    Simple,
    Batch,
    UnloggedBatch,
    Counter,
    BatchLog,
    Cas,
    View,
    Cdc,
    /// A write type this crate does not know.
    Other(String),
}

impl WriteType {
    fn parse(s: &str) -> Self {
        match s {
            "SIMPLE" => WriteType::Simple,
            "BATCH" => WriteType::Batch,
            "UNLOGGED_BATCH" => WriteType::UnloggedBatch,
            "COUNTER" => WriteType::Counter,
            "BATCH_LOG" => WriteType::BatchLog,
            "CAS" => WriteType::Cas,
            "VIEW" => WriteType::View,
            "CDC" => WriteType::Cdc,
            other => WriteType::Other(other.to_owned()),
        }
    }
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::BatchLog => "BATCH_LOG",
            WriteType::Cas => "CAS",
            WriteType::View => "VIEW",
            WriteType::Cdc => "CDC",
            WriteType::Other(s) => s,
        }
    }
}

/// Failures reported by read/write failure errors: a count (v4) or a map of
/// replica address to failure reason code (v5).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Failures {
    /// Number of replicas that failed (v4).
    Count(i32),
    /// Replica address and reason code per failure (v5).
    Reasons(Vec<(IpAddr, u16)>),
}

impl Failures {
    /// Number of failed replicas.
    pub fn count(&self) -> usize {
        match self {
            Failures::Count(n) => usize::try_from(*n).unwrap_or(0),
            Failures::Reasons(r) => r.len(),
        }
    }
}

/// The code-specific part of an error.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum ErrorKind {
    ServerError,
    ProtocolError,
    BadCredentials,
    Unavailable {
        consistency: Consistency,
        required: i32,
        alive: i32,
    },
    Overloaded,
    IsBootstrapping,
    TruncateError,
    WriteTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        write_type: WriteType,
        /// Paxos contentions (v5, CAS writes only).
        contentions: Option<u16>,
    },
    ReadTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    ReadFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        failures: Failures,
        data_present: bool,
    },
    FunctionFailure {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
    },
    WriteFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        failures: Failures,
        write_type: WriteType,
    },
    CdcWriteFailure,
    CasWriteUnknown {
        consistency: Consistency,
        received: i32,
        block_for: i32,
    },
    SyntaxError,
    Unauthorized,
    Invalid,
    ConfigError,
    /// `table` is empty for a keyspace.
    AlreadyExists {
        keyspace: String,
        table: String,
    },
    /// The statement id the server does not know.
    Unprepared {
        id: Vec<u8>,
    },
    /// Scylla per-partition rate limit: `op_type` 0 read, 1 write.
    RateLimitReached {
        op_type: u8,
        rejected_by_coordinator: bool,
    },
    /// A code this crate does not know; its payload, if any, is kept raw.
    Other {
        payload: Vec<u8>,
    },
}

/// An ERROR response.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("server error {code:#06x} ({kind_name}): {message}", kind_name = self.kind_name())]
pub struct ErrorResponse {
    /// The error code.
    pub code: i32,
    /// The server's message.
    pub message: String,
    /// The code-specific payload.
    pub kind: ErrorKind,
}

impl ErrorResponse {
    /// A short name for the kind.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ErrorKind::ServerError => "server error",
            ErrorKind::ProtocolError => "protocol error",
            ErrorKind::BadCredentials => "bad credentials",
            ErrorKind::Unavailable { .. } => "unavailable",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::IsBootstrapping => "is bootstrapping",
            ErrorKind::TruncateError => "truncate error",
            ErrorKind::WriteTimeout { .. } => "write timeout",
            ErrorKind::ReadTimeout { .. } => "read timeout",
            ErrorKind::ReadFailure { .. } => "read failure",
            ErrorKind::FunctionFailure { .. } => "function failure",
            ErrorKind::WriteFailure { .. } => "write failure",
            ErrorKind::CdcWriteFailure => "cdc write failure",
            ErrorKind::CasWriteUnknown { .. } => "cas write unknown",
            ErrorKind::SyntaxError => "syntax error",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Invalid => "invalid",
            ErrorKind::ConfigError => "config error",
            ErrorKind::AlreadyExists { .. } => "already exists",
            ErrorKind::Unprepared { .. } => "unprepared",
            ErrorKind::RateLimitReached { .. } => "rate limit reached",
            ErrorKind::Other { .. } => "unknown error code",
        }
    }

    /// Decodes the body.
    pub fn decode(version: ProtocolVersion, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let code = r.i32("error code")?;
        let message = r.string("error message")?.to_owned();
        let cl = |r: &mut Reader<'_>| Consistency::from_u16(r.u16("consistency")?);
        let failures = |r: &mut Reader<'_>| -> Result<Failures, DecodeError> {
            match version {
                ProtocolVersion::V4 => Ok(Failures::Count(r.i32("failure count")?)),
                ProtocolVersion::V5 => {
                    let n = r.len_i32("failure count")?;
                    let mut v = Vec::with_capacity(n.min(r.remaining() / 7));
                    for _ in 0..n {
                        v.push((r.inetaddr("failure endpoint")?, r.u16("failure reason")?));
                    }
                    Ok(Failures::Reasons(v))
                }
            }
        };
        let kind = match code {
            code::SERVER_ERROR => ErrorKind::ServerError,
            code::PROTOCOL_ERROR => ErrorKind::ProtocolError,
            code::BAD_CREDENTIALS => ErrorKind::BadCredentials,
            code::UNAVAILABLE => {
                ErrorKind::Unavailable { consistency: cl(r)?, required: r.i32("required")?, alive: r.i32("alive")? }
            }
            code::OVERLOADED => ErrorKind::Overloaded,
            code::IS_BOOTSTRAPPING => ErrorKind::IsBootstrapping,
            code::TRUNCATE_ERROR => ErrorKind::TruncateError,
            code::WRITE_TIMEOUT => {
                let consistency = cl(r)?;
                let received = r.i32("received")?;
                let block_for = r.i32("block for")?;
                let write_type = WriteType::parse(r.string("write type")?);
                // v5 adds contentions for CAS; decode it whenever present.
                let contentions =
                    if write_type == WriteType::Cas && r.remaining() >= 2 { Some(r.u16("contentions")?) } else { None };
                ErrorKind::WriteTimeout { consistency, received, block_for, write_type, contentions }
            }
            code::READ_TIMEOUT => ErrorKind::ReadTimeout {
                consistency: cl(r)?,
                received: r.i32("received")?,
                block_for: r.i32("block for")?,
                data_present: r.u8("data present")? != 0,
            },
            code::READ_FAILURE => ErrorKind::ReadFailure {
                consistency: cl(r)?,
                received: r.i32("received")?,
                block_for: r.i32("block for")?,
                failures: failures(r)?,
                data_present: r.u8("data present")? != 0,
            },
            code::FUNCTION_FAILURE => ErrorKind::FunctionFailure {
                keyspace: r.string("keyspace")?.to_owned(),
                function: r.string("function")?.to_owned(),
                arg_types: r.string_list("arg types")?.into_iter().map(str::to_owned).collect(),
            },
            code::WRITE_FAILURE => ErrorKind::WriteFailure {
                consistency: cl(r)?,
                received: r.i32("received")?,
                block_for: r.i32("block for")?,
                failures: failures(r)?,
                write_type: WriteType::parse(r.string("write type")?),
            },
            code::CDC_WRITE_FAILURE => ErrorKind::CdcWriteFailure,
            code::CAS_WRITE_UNKNOWN => ErrorKind::CasWriteUnknown {
                consistency: cl(r)?,
                received: r.i32("received")?,
                block_for: r.i32("block for")?,
            },
            code::SYNTAX_ERROR => ErrorKind::SyntaxError,
            code::UNAUTHORIZED => ErrorKind::Unauthorized,
            code::INVALID => ErrorKind::Invalid,
            code::CONFIG_ERROR => ErrorKind::ConfigError,
            code::ALREADY_EXISTS => ErrorKind::AlreadyExists {
                keyspace: r.string("keyspace")?.to_owned(),
                table: r.string("table")?.to_owned(),
            },
            code::UNPREPARED => ErrorKind::Unprepared { id: r.short_bytes("statement id")?.to_vec() },
            code::SCYLLA_RATE_LIMIT => ErrorKind::RateLimitReached {
                op_type: r.u8("op type")?,
                rejected_by_coordinator: r.u8("rejected by coordinator")? != 0,
            },
            _ => ErrorKind::Other { payload: r.take_rest().to_vec() },
        };
        Ok(ErrorResponse { code, message, kind })
    }

    /// Writes the body.
    pub fn encode(&self, version: ProtocolVersion, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        buf.put_i32(self.code);
        codec::write_string(buf, "error message", &self.message)?;
        let failures = |buf: &mut _, f: &Failures| -> Result<(), EncodeError> {
            match (version, f) {
                (ProtocolVersion::V4, Failures::Count(n)) => BufMut::put_i32(buf, *n),
                (ProtocolVersion::V5, Failures::Reasons(list)) => {
                    BufMut::put_i32(buf, codec::check_int_len("failures", list.len())? as i32);
                    for (ip, reason) in list {
                        codec::put_inetaddr(buf, ip);
                        BufMut::put_u16(buf, *reason);
                    }
                }
                _ => {
                    return Err(EncodeError::InvalidValue {
                        what: "failures",
                        reason: "a count in v4, a reason map in v5",
                    })
                }
            }
            Ok(())
        };
        match &self.kind {
            ErrorKind::Unavailable { consistency, required, alive } => {
                buf.put_u16(*consistency as u16);
                buf.put_i32(*required);
                buf.put_i32(*alive);
            }
            ErrorKind::WriteTimeout { consistency, received, block_for, write_type, contentions } => {
                buf.put_u16(*consistency as u16);
                buf.put_i32(*received);
                buf.put_i32(*block_for);
                codec::write_string(buf, "write type", write_type.as_str())?;
                if let Some(c) = contentions {
                    buf.put_u16(*c);
                }
            }
            ErrorKind::ReadTimeout { consistency, received, block_for, data_present } => {
                buf.put_u16(*consistency as u16);
                buf.put_i32(*received);
                buf.put_i32(*block_for);
                buf.put_u8((*data_present).into());
            }
            ErrorKind::ReadFailure { consistency, received, block_for, failures: f, data_present } => {
                buf.put_u16(*consistency as u16);
                buf.put_i32(*received);
                buf.put_i32(*block_for);
                failures(&mut *buf, f)?;
                buf.put_u8((*data_present).into());
            }
            ErrorKind::FunctionFailure { keyspace, function, arg_types } => {
                codec::write_string(buf, "keyspace", keyspace)?;
                codec::write_string(buf, "function", function)?;
                codec::write_string_list(buf, "arg types", arg_types)?;
            }
            ErrorKind::WriteFailure { consistency, received, block_for, failures: f, write_type } => {
                buf.put_u16(*consistency as u16);
                buf.put_i32(*received);
                buf.put_i32(*block_for);
                failures(&mut *buf, f)?;
                codec::write_string(buf, "write type", write_type.as_str())?;
            }
            ErrorKind::CasWriteUnknown { consistency, received, block_for } => {
                buf.put_u16(*consistency as u16);
                buf.put_i32(*received);
                buf.put_i32(*block_for);
            }
            ErrorKind::AlreadyExists { keyspace, table } => {
                codec::write_string(buf, "keyspace", keyspace)?;
                codec::write_string(buf, "table", table)?;
            }
            ErrorKind::Unprepared { id } => codec::write_short_bytes(buf, "statement id", id)?,
            ErrorKind::RateLimitReached { op_type, rejected_by_coordinator } => {
                buf.put_u8(*op_type);
                buf.put_u8((*rejected_by_coordinator).into());
            }
            ErrorKind::Other { payload } => buf.put_slice(payload),
            _ => {}
        }
        Ok(())
    }
}
