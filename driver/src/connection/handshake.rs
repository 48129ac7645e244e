//! The handshake's shell: the socket-free machine of
//! `shardwise_protocol::handshake` driven over the raw socket before the
//! reader and writer tasks exist, with the configured authenticator
//! answering its SASL steps.

use bytes::BytesMut;
use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::handshake::{Established, Handshake, HandshakeConfig, HandshakeError, Step};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::auth::AuthenticatorSession;
use crate::config::{Compression, ConnectionConfig};
use crate::error::ConnectionError;

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

impl From<HandshakeError> for Failure {
    fn from(e: HandshakeError) -> Self {
        Failure::Fatal(match e {
            HandshakeError::VersionRejected(_) => return Failure::VersionRejected,
            HandshakeError::Refused(e) => ConnectionError::Handshake(e),
            HandshakeError::AuthRefused(message) => ConnectionError::Auth(message),
            HandshakeError::Unexpected(what) => ConnectionError::Protocol(what),
            HandshakeError::Decode(e) => ConnectionError::Decode(e),
            HandshakeError::Encode(_) => ConnectionError::Protocol("handshake request not encodable"),
            _ => ConnectionError::Protocol("handshake failed"),
        })
    }
}

/// Runs the handshake at `version` on a fresh socket.
pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    socket: &mut S,
    config: &ConnectionConfig,
    version: ProtocolVersion,
) -> Result<Established, Failure> {
    let mut machine = Handshake::new(HandshakeConfig {
        version,
        lz4: config.compression == Compression::Lz4,
        max_body: config.max_response_body,
        identity: config.identity.0.clone(),
        tablets_routing_v2: config.tablets_routing_v2,
    })?;
    // A server that does not know the version may just close the socket.
    let io_failure = |machine: &Handshake, e: ConnectionError| {
        if machine.is_negotiating_version() && version > config.min_version {
            Failure::VersionRejected
        } else {
            Failure::Fatal(e)
        }
    };
    let mut session: Option<Box<dyn AuthenticatorSession>> = None;
    let mut read_buf = BytesMut::with_capacity(4096);
    loop {
        let step = machine.poll()?;
        // What the step queued goes out before the shell waits for answers.
        if let Some(bytes) = machine.transmit() {
            if let Err(e) = socket.write_all(&bytes).await {
                return Err(io_failure(&machine, e.into()));
            }
        }
        match step {
            Step::NeedInput => {
                read_buf.clear();
                match socket.read_buf(&mut read_buf).await {
                    Ok(0) => return Err(io_failure(&machine, ConnectionError::Closed)),
                    Ok(_) => machine.handle_input(&read_buf),
                    Err(e) => return Err(io_failure(&machine, e.into())),
                }
            }
            Step::Authenticate(class) => {
                let provider = config.authenticator.as_ref().ok_or_else(|| {
                    ConnectionError::Auth(format!(
                        "the server requires authentication ({class}) and none is configured"
                    ))
                })?;
                let (token, started) = provider.start(&class).await.map_err(|e| ConnectionError::Auth(e.0))?;
                session = Some(started);
                machine.respond(&token)?;
            }
            Step::Challenge(challenge) => {
                let s = session.as_mut().ok_or(ConnectionError::Protocol("a challenge before AUTHENTICATE"))?;
                let token = s.evaluate_challenge(challenge.as_deref()).await.map_err(|e| ConnectionError::Auth(e.0))?;
                machine.respond(&token)?;
            }
            Step::AuthSuccess(last) => {
                let s = session.as_mut().ok_or(ConnectionError::Protocol("AUTH_SUCCESS before AUTHENTICATE"))?;
                s.success(last.as_deref()).await.map_err(|e| ConnectionError::Auth(e.0))?;
            }
            Step::Done => {
                return machine.finish().ok_or(Failure::Fatal(ConnectionError::Protocol("handshake not finished")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shardwise_protocol::frame::{FrameDecoder, Opcode};
    use shardwise_protocol::response::{Response, ResponseMessage};

    use super::*;

    /// A server that answers each request only once it has read it: the
    /// shell must send what each step queued before it waits (it once sent
    /// STARTUP only after the answer it was waiting for).
    #[tokio::test]
    async fn each_request_is_sent_before_its_answer_is_awaited() {
        let (mut client, mut server) = tokio::io::duplex(4096);
        let serve = tokio::spawn(async move {
            let mut decoder = FrameDecoder::new();
            let mut buf = [0u8; 4096];
            let mut seen = Vec::new();
            while seen.len() < 2 {
                let n = server.read(&mut buf).await.expect("read");
                assert!(n > 0, "the client closed");
                decoder.feed(&buf[..n]);
                while let Some(env) = decoder.next_envelope().expect("request") {
                    let answer = match env.header.opcode {
                        Opcode::Options => ResponseMessage::Supported(Vec::new()),
                        _ => ResponseMessage::Ready,
                    };
                    seen.push(env.header.opcode);
                    let mut out = Vec::new();
                    Response::new(answer).encode(ProtocolVersion::V4, 0, &mut out).expect("encode");
                    server.write_all(&out).await.expect("write");
                }
            }
            seen
        });
        let config = ConnectionConfig::default();
        let done = tokio::time::timeout(Duration::from_secs(5), handshake(&mut client, &config, ProtocolVersion::V4));
        match done.await {
            Ok(Ok(est)) => assert_eq!(est.version, ProtocolVersion::V4),
            Ok(Err(_)) => panic!("the handshake failed"),
            Err(_) => panic!("the handshake hung"),
        }
        assert_eq!(serve.await.expect("server"), [Opcode::Options, Opcode::Startup]);
    }
}
