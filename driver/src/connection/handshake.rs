//! The connection handshake: OPTIONS → SUPPORTED, STARTUP → READY or
//! AUTHENTICATE, then the SASL exchange. Runs on the raw socket before the
//! reader and writer tasks exist, one request at a time. In v5 everything
//! after the answer to STARTUP is framed in segments.

use bytes::BytesMut;
use shardwise_protocol::frame::compression::compress_body;
use shardwise_protocol::frame::segment::{encode_envelopes, SegmentCompression};
use shardwise_protocol::frame::{Flags, FrameDecoder, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::{encode_request, AuthResponse, Options, Request, Startup};
use shardwise_protocol::response::{code, Response, ResponseMessage};
use shardwise_protocol::tablets::TABLETS_ROUTING_V1;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::{Compression, ConnectionConfig};
use crate::error::ConnectionError;

/// What the handshake learned.
#[derive(Debug)]
pub(crate) struct Handshake {
    pub(crate) version: ProtocolVersion,
    pub(crate) compression: Compression,
    pub(crate) supported: Vec<(String, Vec<String>)>,
    /// The decoder, already in the mode the connection continues in.
    pub(crate) decoder: FrameDecoder,
}

/// Why a handshake at one version failed.
pub(crate) enum Failure {
    /// The server does not speak this version: try a lower one.
    VersionRejected,
    Fatal(ConnectionError),
}

impl From<ConnectionError> for Failure {
    fn from(e: ConnectionError) -> Self {
        Failure::Fatal(e)
    }
}

struct Io<'a, S> {
    socket: &'a mut S,
    decoder: FrameDecoder,
    version: ProtocolVersion,
    framed: Option<SegmentCompression>,
    v4_lz4: bool,
    read_buf: BytesMut,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Io<'_, S> {
    async fn round_trip<R: Request>(&mut self, request: &R) -> Result<Response, ConnectionError> {
        let mut envelope = Vec::new();
        encode_request(request, self.version, 0, 0, &mut envelope)
            .map_err(|_| ConnectionError::Protocol("handshake request too large"))?;
        let wire = match self.framed {
            Some(c) => {
                let mut wire = Vec::new();
                encode_envelopes(&envelope, c, &mut wire)
                    .map_err(|_| ConnectionError::Protocol("handshake request too large"))?;
                wire
            }
            None if self.v4_lz4 && envelope.len() > HEADER_LEN => {
                let mut out = envelope[..HEADER_LEN].to_vec();
                compress_body(&envelope[HEADER_LEN..], &mut out)
                    .map_err(|_| ConnectionError::Protocol("handshake request too large"))?;
                out[1] |= Flags::COMPRESSION;
                let len = (out.len() - HEADER_LEN) as u32;
                out[5..HEADER_LEN].copy_from_slice(&len.to_be_bytes());
                out
            }
            None => envelope,
        };
        self.socket.write_all(&wire).await?;
        loop {
            if let Some(env) = self.decoder.next_envelope()? {
                if env.header.stream != 0 {
                    // Events cannot arrive before REGISTER; anything else is a violation.
                    return Err(ConnectionError::Protocol("unexpected stream during handshake"));
                }
                return Ok(Response::from_envelope(env)?);
            }
            self.read_buf.clear();
            let n = self.socket.read_buf(&mut self.read_buf).await?;
            if n == 0 {
                return Err(ConnectionError::Closed);
            }
            self.decoder.feed(&self.read_buf);
        }
    }
}

/// Scylla's extension marking prepared LWT statements.
const LWT_MARK: &str = "SCYLLA_LWT_ADD_METADATA_MARK";
/// The name of the mask in its value.
const LWT_MASK_NAME: &str = "LWT_OPTIMIZATION_META_BIT_MASK";

/// The bit Scylla sets in the flags of a prepared LWT statement's metadata,
/// when it offers `SCYLLA_LWT_ADD_METADATA_MARK` (`LWT_OPTIMIZATION_META_BIT_MASK=<u32>`).
pub(crate) fn lwt_mask(supported: &[(String, Vec<String>)]) -> Option<u32> {
    let (_, values) = supported.iter().find(|(k, _)| k == LWT_MARK)?;
    values.iter().find_map(|v| v.strip_prefix(LWT_MASK_NAME)?.strip_prefix('=')?.parse().ok()).filter(|&m| m != 0)
}

fn is_version_rejection(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("protocol version") || m.contains("beta")
}

/// Runs the handshake at `version` on a fresh socket.
pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    config: &ConnectionConfig,
    version: ProtocolVersion,
) -> Result<Handshake, Failure> {
    let decoder = FrameDecoder::new().with_max_body(config.max_response_body);
    let mut io = Io { socket, decoder, version, framed: None, v4_lz4: false, read_buf: BytesMut::with_capacity(4096) };

    let supported = match io.round_trip(&Options).await {
        Ok(Response { message: ResponseMessage::Supported(s), .. }) => s,
        Ok(Response { message: ResponseMessage::Error(e), .. }) => {
            if e.code == code::PROTOCOL_ERROR && is_version_rejection(&e.message) {
                return Err(Failure::VersionRejected);
            }
            return Err(ConnectionError::Handshake(Box::new(e)).into());
        }
        Ok(_) => return Err(ConnectionError::Protocol("OPTIONS not answered with SUPPORTED").into()),
        // A server that does not know the version may just close the socket.
        Err(ConnectionError::Closed) | Err(ConnectionError::Io(_)) if version > config.min_version => {
            return Err(Failure::VersionRejected)
        }
        Err(e) => return Err(e.into()),
    };
    let lz4_offered =
        supported.iter().any(|(k, v)| k == "COMPRESSION" && v.iter().any(|c| c.eq_ignore_ascii_case("lz4")));
    let compression = match config.compression {
        Compression::Lz4 if lz4_offered => Compression::Lz4,
        _ => Compression::None,
    };
    let driver_version = env!("CARGO_PKG_VERSION");
    let mut options = vec![("CQL_VERSION", "3.0.0"), ("DRIVER_NAME", "shardwise"), ("DRIVER_VERSION", driver_version)];
    if compression == Compression::Lz4 {
        options.push(("COMPRESSION", "lz4"));
        // Cassandra compresses its answer to STARTUP already.
        if version == ProtocolVersion::V4 {
            io.decoder.set_v4_lz4(true);
        }
    }
    // Tablets routing: the servers tell where a misrouted request's tablet is.
    if supported.iter().any(|(k, _)| k == TABLETS_ROUTING_V1) {
        options.push((TABLETS_ROUTING_V1, ""));
    }
    // Scylla marks prepared conditional statements (`docs/protocol.md` §1.4).
    let lwt = lwt_mask(&supported).map(|mask| format!("{LWT_MASK_NAME}={mask}"));
    if let Some(value) = &lwt {
        options.push((LWT_MARK, value));
    }
    let answer = io.round_trip(&Startup { options }).await?;
    let start_framing = |io: &mut Io<'_, S>| match version {
        ProtocolVersion::V5 => {
            let c = match compression {
                Compression::Lz4 => SegmentCompression::Lz4,
                Compression::None => SegmentCompression::None,
            };
            io.framed = Some(c);
            io.decoder.set_framed(c);
        }
        ProtocolVersion::V4 => io.v4_lz4 = compression == Compression::Lz4,
    };
    match answer.message {
        ResponseMessage::Ready => start_framing(&mut io),
        ResponseMessage::Authenticate(class) => {
            start_framing(&mut io);
            let provider = config.authenticator.as_ref().ok_or_else(|| {
                ConnectionError::Auth(format!("the server requires authentication ({class}) and none is configured"))
            })?;
            let (token, mut session) = provider.start(&class).map_err(|e| ConnectionError::Auth(e.0))?;
            let mut token = token;
            loop {
                let answer = io.round_trip(&AuthResponse { token: Some(&token) }).await?;
                match answer.message {
                    ResponseMessage::AuthSuccess(t) => {
                        session.success(t.as_deref()).map_err(|e| ConnectionError::Auth(e.0))?;
                        break;
                    }
                    ResponseMessage::AuthChallenge(t) => {
                        token = session.evaluate_challenge(t.as_deref()).map_err(|e| ConnectionError::Auth(e.0))?;
                    }
                    ResponseMessage::Error(e) => return Err(ConnectionError::Auth(e.message).into()),
                    _ => return Err(ConnectionError::Protocol("unexpected answer during authentication").into()),
                }
            }
        }
        ResponseMessage::Error(e) => {
            if e.code == code::PROTOCOL_ERROR && is_version_rejection(&e.message) {
                return Err(Failure::VersionRejected);
            }
            return Err(ConnectionError::Handshake(Box::new(e)).into());
        }
        _ => return Err(ConnectionError::Protocol("STARTUP not answered with READY or AUTHENTICATE").into()),
    }
    if io.decoder.buffered() != 0 {
        return Err(ConnectionError::Protocol("unsolicited bytes after the handshake").into());
    }
    Ok(Handshake { version, compression, supported, decoder: io.decoder })
}
