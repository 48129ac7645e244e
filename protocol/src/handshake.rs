//! The connection handshake as a state machine without a socket: OPTIONS →
//! SUPPORTED, STARTUP → READY or AUTHENTICATE, then the SASL exchange
//! (AUTH_RESPONSE → AUTH_CHALLENGE … → AUTH_SUCCESS).
//!
//! The shell around it writes what [`Handshake::transmit`] hands out, feeds
//! what the socket reads to [`Handshake::handle_input`], and acts on what
//! [`Handshake::poll`] says: read more, answer an authentication step with
//! [`Handshake::respond`], or take the [`Established`] connection. The
//! machine picks the options (compression when both sides have LZ4,
//! Scylla's tablets routing and LWT mark when offered), switches the
//! decoder and the framer at the points the spec says (v4 LZ4 before
//! STARTUP's answer, v5 segments after it), and tells a server that
//! rejects the protocol version from any other refusal.

use std::borrow::Cow;

use crate::frame::segment::SegmentCompression;
use crate::frame::{FrameDecoder, Framer, ProtocolVersion};
use crate::request::{encode_request, AuthResponse, Options, Request, Startup};
use crate::response::{code, ErrorResponse, Response, ResponseMessage};
use crate::tablets::{TABLETS_ROUTING_V1, TABLETS_ROUTING_V2};
use crate::{DecodeError, EncodeError};

/// Scylla's extension bringing v5's result metadata ids to v4
/// (docs/protocol.md §1.8): negotiated whenever offered.
pub const USE_METADATA_ID: &str = "SCYLLA_USE_METADATA_ID";
/// The informational key with the host id of the node that accepted the
/// connection (docs/protocol.md §1.2): never echoed in STARTUP.
pub const HOST_ID: &str = "SCYLLA_HOST_ID";

/// The node's host id as its SUPPORTED tells it (`SCYLLA_HOST_ID`), when it
/// does and the value is one UUID.
pub fn host_id(supported: &[(String, Vec<String>)]) -> Option<uuid::Uuid> {
    let (_, values) = supported.iter().find(|(k, _)| k == HOST_ID)?;
    match values.as_slice() {
        [one] => uuid::Uuid::try_parse(one).ok(),
        _ => None,
    }
}

/// Scylla's extension marking prepared LWT statements.
pub const LWT_MARK: &str = "SCYLLA_LWT_ADD_METADATA_MARK";
/// The name of the mask in its value.
const LWT_MASK_NAME: &str = "LWT_OPTIMIZATION_META_BIT_MASK";

/// The bit Scylla sets in the flags of a prepared LWT statement's metadata,
/// when it offers `SCYLLA_LWT_ADD_METADATA_MARK` (`LWT_OPTIMIZATION_META_BIT_MASK=<u32>`).
pub fn lwt_mask(supported: &[(String, Vec<String>)]) -> Option<u32> {
    let (_, values) = supported.iter().find(|(k, _)| k == LWT_MARK)?;
    values.iter().find_map(|v| v.strip_prefix(LWT_MASK_NAME)?.strip_prefix('=')?.parse().ok()).filter(|&m| m != 0)
}

/// Who the client says it is in STARTUP (the official driver's
/// `SelfIdentity`): the driver's name and version, and, when set, the
/// application's name and version and a client id. Servers keep them per
/// connection: Cassandra in `system_views.clients` (`driver_name`,
/// `driver_version`, and every option in `client_options`), ScyllaDB in
/// `system.clients`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    driver_name: Cow<'static, str>,
    driver_version: Cow<'static, str>,
    application_name: Option<Cow<'static, str>>,
    application_version: Option<Cow<'static, str>>,
    client_id: Option<Cow<'static, str>>,
}

impl Identity {
    /// The driver `name` at `version`, nothing else said.
    pub fn driver(name: &'static str, version: &'static str) -> Self {
        Identity {
            driver_name: Cow::Borrowed(name),
            driver_version: Cow::Borrowed(version),
            application_name: None,
            application_version: None,
            client_id: None,
        }
    }

    /// Another driver name (`DRIVER_NAME`).
    pub fn with_custom_driver_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.driver_name = name.into();
        self
    }

    /// Another driver version (`DRIVER_VERSION`).
    pub fn with_custom_driver_version(mut self, version: impl Into<Cow<'static, str>>) -> Self {
        self.driver_version = version.into();
        self
    }

    /// The application's name (`APPLICATION_NAME`).
    pub fn with_application_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.application_name = Some(name.into());
        self
    }

    /// The application's version (`APPLICATION_VERSION`).
    pub fn with_application_version(mut self, version: impl Into<Cow<'static, str>>) -> Self {
        self.application_version = Some(version.into());
        self
    }

    /// An id of this client instance (`CLIENT_ID`).
    pub fn with_client_id(mut self, id: impl Into<Cow<'static, str>>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// The STARTUP options it makes, in that order.
    fn options(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("DRIVER_NAME", Some(&self.driver_name)),
            ("DRIVER_VERSION", Some(&self.driver_version)),
            ("APPLICATION_NAME", self.application_name.as_ref()),
            ("APPLICATION_VERSION", self.application_version.as_ref()),
            ("CLIENT_ID", self.client_id.as_ref()),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?.as_ref())))
    }
}

/// What the client asks for.
#[derive(Debug, Clone)]
pub struct HandshakeConfig {
    /// The version to speak.
    pub version: ProtocolVersion,
    /// Use LZ4 if the server offers it.
    pub lz4: bool,
    /// The largest response body accepted.
    pub max_body: usize,
    /// Who the client says it is in STARTUP.
    pub identity: Identity,
    /// Negotiate `TABLETS_ROUTING_V2_EXPERIMENTAL` when the server offers
    /// it (instead of v1, never with it; docs/protocol.md §1.7).
    pub tablets_routing_v2: bool,
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The server does not speak this protocol version: try a lower one.
    #[error("the server rejected protocol v{0}")]
    VersionRejected(u8),
    /// The server refused OPTIONS or STARTUP.
    #[error("the server refused the handshake: {0}")]
    Refused(Box<ErrorResponse>),
    /// The server refused the credentials.
    #[error("the server refused the credentials: {0}")]
    AuthRefused(String),
    /// An answer the protocol does not allow at this point.
    #[error("protocol violation during the handshake: {0}")]
    Unexpected(&'static str),
    /// Bytes that are not a valid frame or message.
    #[error("malformed data during the handshake: {0}")]
    Decode(#[from] DecodeError),
    /// A request that cannot be encoded (an authentication token over 2 GiB).
    #[error("handshake request not encodable: {0}")]
    Encode(#[from] EncodeError),
}

/// What the shell does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send what [`Handshake::transmit`] holds, then read more bytes.
    NeedInput,
    /// The server requires authentication with this authenticator class:
    /// start the exchange and answer with [`Handshake::respond`].
    Authenticate(String),
    /// The server's SASL challenge: answer with [`Handshake::respond`].
    Challenge(Option<Vec<u8>>),
    /// The server accepted the credentials, with its final token (for the
    /// authenticator to check); [`Handshake::poll`] then yields the
    /// established connection.
    AuthSuccess(Option<Vec<u8>>),
    /// The handshake is over: take [`Handshake::finish`].
    Done,
}

/// What a finished handshake established.
#[derive(Debug)]
pub struct Established {
    /// The protocol version.
    pub version: ProtocolVersion,
    /// Whether LZ4 compression was negotiated.
    pub lz4: bool,
    /// The server's SUPPORTED options.
    pub supported: Vec<(String, Vec<String>)>,
    /// `SCYLLA_USE_METADATA_ID` was negotiated: on v4, PREPARED and EXECUTE
    /// carry result metadata ids (decode with `metadata_id` set, e.g.
    /// [`crate::response::Response::decode_ext`]).
    pub metadata_id: bool,
    /// `TABLETS_ROUTING_V2_EXPERIMENTAL` was negotiated: every EXECUTE ends
    /// with a tablet version block (encode through
    /// [`crate::request::Negotiated`]), and answers carry `tablets-routing-v2`.
    pub tablets_v2: bool,
    /// The node's host id from `SCYLLA_HOST_ID`, when it sent one.
    pub host_id: Option<uuid::Uuid>,
    /// The decoder, in the mode the connection continues in, with any bytes
    /// the server sent after its last handshake answer.
    pub decoder: FrameDecoder,
    /// The framer for the connection's requests.
    pub framer: Framer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// OPTIONS sent, waiting for SUPPORTED.
    Options,
    /// STARTUP sent.
    Startup,
    /// AUTHENTICATE or a challenge received, the shell's answer awaited.
    AwaitingResponse,
    /// AUTH_RESPONSE sent.
    Auth,
    /// AUTH_SUCCESS handed to the shell.
    Authenticated,
    Done,
    Failed,
}

/// The handshake's state (see the module docs).
#[derive(Debug)]
pub struct Handshake {
    config: HandshakeConfig,
    state: State,
    decoder: FrameDecoder,
    framer: Framer,
    outgoing: Vec<u8>,
    supported: Vec<(String, Vec<String>)>,
    lz4: bool,
    metadata_id: bool,
    tablets_v2: bool,
}

impl Handshake {
    /// A handshake at `config.version`, with OPTIONS queued.
    pub fn new(config: HandshakeConfig) -> Result<Self, HandshakeError> {
        let decoder = FrameDecoder::new().with_max_body(config.max_body);
        let framer = Framer::new(config.version, false);
        let mut h = Handshake {
            config,
            state: State::Options,
            decoder,
            framer,
            outgoing: Vec::new(),
            supported: Vec::new(),
            lz4: false,
            metadata_id: false,
            tablets_v2: false,
        };
        h.queue(&Options)?;
        Ok(h)
    }

    /// Bytes to write to the socket, once: they are handed out and forgotten.
    pub fn transmit(&mut self) -> Option<Vec<u8>> {
        (!self.outgoing.is_empty()).then(|| std::mem::take(&mut self.outgoing))
    }

    /// Bytes read from the socket.
    pub fn handle_input(&mut self, bytes: &[u8]) {
        self.decoder.feed(bytes);
    }

    /// Whether the server has not answered OPTIONS yet: a server that does
    /// not know the version may just close the connection then.
    pub fn is_negotiating_version(&self) -> bool {
        self.state == State::Options
    }

    /// Advances on the bytes received so far.
    pub fn poll(&mut self) -> Result<Step, HandshakeError> {
        let result = self.advance();
        if result.is_err() {
            self.state = State::Failed;
        }
        result
    }

    fn advance(&mut self) -> Result<Step, HandshakeError> {
        match self.state {
            State::Done => return Ok(Step::Done),
            State::Authenticated => {
                self.state = State::Done;
                return self.done();
            }
            State::AwaitingResponse => {
                return Err(HandshakeError::Unexpected("polled before the answer to the server"))
            }
            State::Failed => return Err(HandshakeError::Unexpected("the handshake already failed")),
            State::Options | State::Startup | State::Auth => {}
        }
        let Some(envelope) = self.decoder.next_envelope()? else { return Ok(Step::NeedInput) };
        if envelope.header.stream != 0 {
            // Events cannot come before REGISTER; anything else is a violation.
            return Err(HandshakeError::Unexpected("an answer on another stream"));
        }
        let response = Response::from_envelope(envelope)?;
        match (self.state, response.message) {
            (State::Options | State::Startup, ResponseMessage::Error(e)) => Err(self.refusal(e)),
            (State::Options, ResponseMessage::Supported(supported)) => {
                self.supported = supported;
                self.startup()?;
                // The answer to STARTUP may have come with this one.
                self.advance()
            }
            (State::Options, _) => Err(HandshakeError::Unexpected("OPTIONS not answered with SUPPORTED")),
            (State::Startup, ResponseMessage::Ready) => {
                self.start_segments();
                self.state = State::Done;
                self.done()
            }
            (State::Startup, ResponseMessage::Authenticate(class)) => {
                self.start_segments();
                self.state = State::AwaitingResponse;
                Ok(Step::Authenticate(class))
            }
            (State::Startup, _) => Err(HandshakeError::Unexpected("STARTUP not answered with READY or AUTHENTICATE")),
            (State::Auth, ResponseMessage::AuthChallenge(token)) => {
                self.state = State::AwaitingResponse;
                Ok(Step::Challenge(token.map(|t| t.to_vec())))
            }
            (State::Auth, ResponseMessage::AuthSuccess(token)) => {
                self.state = State::Authenticated;
                Ok(Step::AuthSuccess(token.map(|t| t.to_vec())))
            }
            (State::Auth, ResponseMessage::Error(e)) => Err(HandshakeError::AuthRefused(e.message)),
            (_, _) => Err(HandshakeError::Unexpected("unexpected answer during authentication")),
        }
    }

    /// Answers the server's AUTHENTICATE or challenge with a SASL token.
    pub fn respond(&mut self, token: &[u8]) -> Result<(), HandshakeError> {
        if self.state != State::AwaitingResponse {
            return Err(HandshakeError::Unexpected("no authentication step to answer"));
        }
        self.queue(&AuthResponse { token: Some(token) })?;
        self.state = State::Auth;
        Ok(())
    }

    /// The established connection, once [`poll`](Self::poll) said
    /// [`Step::Done`]; `None` before.
    pub fn finish(self) -> Option<Established> {
        (self.state == State::Done).then(|| Established {
            version: self.config.version,
            lz4: self.lz4,
            metadata_id: self.metadata_id,
            tablets_v2: self.tablets_v2,
            host_id: host_id(&self.supported),
            supported: self.supported,
            decoder: self.decoder,
            framer: self.framer,
        })
    }

    fn done(&self) -> Result<Step, HandshakeError> {
        // The server speaks only when asked until REGISTER.
        if self.decoder.buffered() != 0 {
            return Err(HandshakeError::Unexpected("unsolicited bytes after the handshake"));
        }
        Ok(Step::Done)
    }

    fn refusal(&self, e: ErrorResponse) -> HandshakeError {
        let m = e.message.to_ascii_lowercase();
        if e.code == code::PROTOCOL_ERROR && (m.contains("protocol version") || m.contains("beta")) {
            HandshakeError::VersionRejected(self.config.version.number())
        } else {
            HandshakeError::Refused(Box::new(e))
        }
    }

    fn startup(&mut self) -> Result<(), HandshakeError> {
        let lz4_offered =
            self.supported.iter().any(|(k, v)| k == "COMPRESSION" && v.iter().any(|c| c.eq_ignore_ascii_case("lz4")));
        self.lz4 = self.config.lz4 && lz4_offered;
        // A copy: the options borrow it while the request is queued (no
        // allocation for the default, borrowed names).
        let identity = self.config.identity.clone();
        let mut options = vec![("CQL_VERSION", "3.0.0")];
        options.extend(identity.options());
        if self.lz4 {
            options.push(("COMPRESSION", "lz4"));
            if self.config.version == ProtocolVersion::V4 {
                // Cassandra compresses its answer to STARTUP already.
                self.decoder.set_v4_lz4(true);
            }
        }
        // Tablets routing: the servers say where a misrouted request's
        // tablet is (v1), or where a request's tablet is when the client's
        // version of it is stale (v2, asked for; v2 replaces v1).
        let offered = |key: &str| self.supported.iter().any(|(k, _)| k == key);
        self.tablets_v2 = self.config.tablets_routing_v2 && offered(TABLETS_ROUTING_V2);
        if self.tablets_v2 {
            options.push((TABLETS_ROUTING_V2, ""));
        } else if offered(TABLETS_ROUTING_V1) {
            options.push((TABLETS_ROUTING_V1, ""));
        }
        // Result metadata ids on v4 (v5 has them anyway; Scylla accepts the key on both).
        self.metadata_id = self.supported.iter().any(|(k, _)| k == USE_METADATA_ID);
        if self.metadata_id {
            options.push((USE_METADATA_ID, ""));
        }
        // Scylla marks prepared conditional statements.
        let lwt = lwt_mask(&self.supported).map(|mask| format!("{LWT_MASK_NAME}={mask}"));
        if let Some(value) = &lwt {
            options.push((LWT_MARK, value));
        }
        self.queue(&Startup { options })?;
        self.state = State::Startup;
        Ok(())
    }

    /// After STARTUP's answer: v5 moves to segments, v4 LZ4 compresses.
    fn start_segments(&mut self) {
        self.framer = Framer::established(self.config.version, self.lz4);
        if self.config.version == ProtocolVersion::V5 {
            let c = if self.lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None };
            self.decoder.set_framed(c);
        }
    }

    fn queue<R: Request>(&mut self, request: &R) -> Result<(), HandshakeError> {
        let mut envelope = Vec::new();
        encode_request(request, self.config.version, 0, 0, &mut envelope)?;
        let wire = self.framer.frame(&envelope)?;
        self.outgoing.extend_from_slice(wire);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::request::AnyRequest;
    use crate::response::ErrorKind;

    /// The server's side of the wire: decodes the client's requests and
    /// frames its answers, switching modes where a server does.
    struct Server {
        version: ProtocolVersion,
        decoder: FrameDecoder,
        framer: Framer,
    }

    /// A request as the server saw it.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Options,
        Startup(Vec<(String, String)>),
        AuthResponse(Option<Vec<u8>>),
    }

    impl Server {
        fn new(version: ProtocolVersion) -> Self {
            Server { version, decoder: FrameDecoder::new(), framer: Framer::new(version, false) }
        }

        fn read(&mut self, bytes: &[u8]) -> Vec<Seen> {
            self.decoder.feed(bytes);
            let mut seen = Vec::new();
            while let Some(env) = self.decoder.next_envelope().expect("client bytes decode") {
                assert_eq!(env.header.stream, 0);
                seen.push(match AnyRequest::decode(env.header.opcode, self.version, &env.body).expect("request") {
                    AnyRequest::Options(_) => Seen::Options,
                    AnyRequest::Startup(s) => {
                        Seen::Startup(s.options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
                    }
                    AnyRequest::AuthResponse(a) => Seen::AuthResponse(a.token.map(<[u8]>::to_vec)),
                    other => panic!("unexpected {:?}", other.opcode()),
                });
            }
            seen
        }

        fn answer(&mut self, message: ResponseMessage) -> Vec<u8> {
            let mut envelope = Vec::new();
            Response::new(message).encode(self.version, 0, &mut envelope).expect("encode");
            self.framer.frame(&envelope).expect("frame").to_vec()
        }

        /// What the server does once it accepted STARTUP with `lz4`.
        fn started(&mut self, lz4: bool) {
            self.framer = Framer::established(self.version, lz4);
            match self.version {
                ProtocolVersion::V5 => {
                    self.decoder.set_framed(if lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None })
                }
                ProtocolVersion::V4 => self.decoder.set_v4_lz4(lz4),
            }
        }
    }

    fn config(version: ProtocolVersion, lz4: bool) -> HandshakeConfig {
        HandshakeConfig {
            version,
            lz4,
            max_body: 1 << 20,
            identity: Identity::driver("shardwise", "0.1.0"),
            tablets_routing_v2: false,
        }
    }

    fn supported(lz4: bool) -> ResponseMessage {
        let mut options = vec![("CQL_VERSION".to_owned(), vec!["3.4.7".to_owned()])];
        if lz4 {
            options.push(("COMPRESSION".to_owned(), vec!["snappy".to_owned(), "lz4".to_owned()]));
        }
        ResponseMessage::Supported(options)
    }

    fn error(code: i32, kind: ErrorKind, message: &str) -> ResponseMessage {
        ResponseMessage::Error(ErrorResponse { code, message: message.to_owned(), kind })
    }

    /// Runs the client until it needs input, returning what it sent.
    fn sent(h: &mut Handshake) -> Vec<u8> {
        h.transmit().unwrap_or_default()
    }

    /// Feeds `bytes` one at a time, polling after each: any chunking works.
    fn feed_slowly(h: &mut Handshake, bytes: &[u8]) -> Step {
        let (last, rest) = bytes.split_last().expect("bytes");
        for &b in rest {
            h.handle_input(&[b]);
            assert_eq!(h.poll().expect("partial input"), Step::NeedInput);
        }
        h.handle_input(&[*last]);
        h.poll().expect("poll")
    }

    fn option<'a>(seen: &'a Seen, key: &str) -> Option<&'a str> {
        let Seen::Startup(options) = seen else { panic!("not STARTUP: {seen:?}") };
        options.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// STARTUP says who the client is: the driver's name and version, and
    /// only the application name, version and client id that were set.
    #[test]
    fn startup_carries_the_identity_set() {
        let startup_of = |identity: Identity| {
            let mut server = Server::new(ProtocolVersion::V4);
            let mut h =
                Handshake::new(HandshakeConfig { identity, ..config(ProtocolVersion::V4, false) }).expect("new");
            server.read(&sent(&mut h));
            feed_slowly(&mut h, &server.answer(supported(false)));
            server.read(&sent(&mut h)).remove(0)
        };
        let plain = startup_of(Identity::driver("shardwise", "0.1.0"));
        assert_eq!(
            (option(&plain, "DRIVER_NAME"), option(&plain, "DRIVER_VERSION")),
            (Some("shardwise"), Some("0.1.0"))
        );
        for key in ["APPLICATION_NAME", "APPLICATION_VERSION", "CLIENT_ID"] {
            assert_eq!(option(&plain, key), None, "{key} not set");
        }
        let service = startup_of(
            Identity::driver("shardwise", "0.1.0")
                .with_custom_driver_name("acme-driver")
                .with_custom_driver_version(String::from("9"))
                .with_application_name("billing")
                .with_application_version("1.2.3")
                .with_client_id("pod-7"),
        );
        let said: Vec<Option<&str>> =
            ["DRIVER_NAME", "DRIVER_VERSION", "APPLICATION_NAME", "APPLICATION_VERSION", "CLIENT_ID"]
                .iter()
                .map(|key| option(&service, key))
                .collect();
        assert_eq!(said, [Some("acme-driver"), Some("9"), Some("billing"), Some("1.2.3"), Some("pod-7")]);
        assert_eq!(option(&service, "CQL_VERSION"), Some("3.0.0"));
    }

    #[test]
    fn ready_in_every_version_and_compression() {
        for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
            for (client_lz4, server_lz4) in [(false, false), (true, false), (false, true), (true, true)] {
                let what = format!("{version:?} client lz4 {client_lz4} server lz4 {server_lz4}");
                let mut server = Server::new(version);
                let mut h = Handshake::new(config(version, client_lz4)).expect("new");
                assert!(h.is_negotiating_version());
                assert_eq!(server.read(&sent(&mut h)), [Seen::Options], "{what}");
                assert_eq!(h.poll().expect("poll"), Step::NeedInput);
                let step = feed_slowly(&mut h, &server.answer(supported(server_lz4)));
                assert_eq!(step, Step::NeedInput, "{what}");
                assert!(!h.is_negotiating_version());
                let startup = server.read(&sent(&mut h));
                let lz4 = client_lz4 && server_lz4;
                assert_eq!(option(&startup[0], "COMPRESSION"), lz4.then_some("lz4"), "{what}");
                assert_eq!(option(&startup[0], "DRIVER_NAME"), Some("shardwise"));
                // Cassandra compresses its v4 answer to STARTUP already; in v5
                // READY is the last bare envelope.
                if version == ProtocolVersion::V4 {
                    server.started(lz4);
                }
                let ready = server.answer(ResponseMessage::Ready);
                assert_eq!(feed_slowly(&mut h, &ready), Step::Done, "{what}");
                assert_eq!(h.poll().expect("poll"), Step::Done);
                let est = h.finish().expect("established");
                assert_eq!((est.version, est.lz4), (version, lz4), "{what}");
                assert_eq!(est.decoder.is_framed(), version == ProtocolVersion::V5, "{what}");
                // The connection's first request reaches the server in its mode.
                server.started(lz4);
                let mut framer = est.framer;
                let mut opts = Vec::new();
                encode_request(&Options, version, 0, 0, &mut opts).expect("encode");
                assert_eq!(server.read(framer.frame(&opts).expect("frame")), [Seen::Options], "{what}");
            }
        }
    }

    #[test]
    fn scylla_extensions_are_taken_when_offered() {
        let mut server = Server::new(ProtocolVersion::V4);
        let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
        server.read(&sent(&mut h));
        let offer = ResponseMessage::Supported(vec![
            (TABLETS_ROUTING_V1.to_owned(), vec![]),
            (LWT_MARK.to_owned(), vec!["LWT_OPTIMIZATION_META_BIT_MASK=2147483648".to_owned()]),
        ]);
        h.handle_input(&server.answer(offer));
        assert_eq!(h.poll().expect("poll"), Step::NeedInput);
        let startup = server.read(&sent(&mut h));
        assert_eq!(option(&startup[0], TABLETS_ROUTING_V1), Some(""));
        assert_eq!(option(&startup[0], LWT_MARK), Some("LWT_OPTIMIZATION_META_BIT_MASK=2147483648"));
        h.handle_input(&server.answer(ResponseMessage::Ready));
        assert_eq!(h.poll().expect("poll"), Step::Done);
        assert_eq!(lwt_mask(&h.finish().expect("established").supported), Some(1 << 31));
    }

    /// Tablets routing v2 replaces v1 when asked for and offered; asked for
    /// and not offered, or offered and not asked for, v1.
    #[test]
    fn tablets_routing_v2_only_when_asked_for_and_offered() {
        for (asked, offered) in [(true, true), (true, false), (false, true)] {
            let mut server = Server::new(ProtocolVersion::V4);
            let mut h =
                Handshake::new(HandshakeConfig { tablets_routing_v2: asked, ..config(ProtocolVersion::V4, false) })
                    .expect("new");
            server.read(&sent(&mut h));
            let mut keys = vec![(TABLETS_ROUTING_V1.to_owned(), vec![])];
            if offered {
                keys.push((TABLETS_ROUTING_V2.to_owned(), vec![]));
            }
            h.handle_input(&server.answer(ResponseMessage::Supported(keys)));
            assert_eq!(h.poll().expect("poll"), Step::NeedInput);
            let startup = server.read(&sent(&mut h));
            let v2 = asked && offered;
            assert_eq!(option(&startup[0], TABLETS_ROUTING_V2), v2.then_some(""), "{asked} {offered}");
            assert_eq!(option(&startup[0], TABLETS_ROUTING_V1), (!v2).then_some(""), "never both");
            h.handle_input(&server.answer(ResponseMessage::Ready));
            assert_eq!(h.poll().expect("poll"), Step::Done);
            assert_eq!(h.finish().expect("established").tablets_v2, v2);
        }
    }

    /// `SCYLLA_USE_METADATA_ID` is echoed when offered (and only then), and
    /// `SCYLLA_HOST_ID` is read but never echoed (docs/protocol.md §1.2, §1.8).
    #[test]
    fn metadata_id_negotiated_and_host_id_known() {
        let host = "6ab4e7a1-1d3c-4d4c-9a57-0e1c1f6f2b11";
        for (offered, host_id) in [(true, Some(host)), (false, None), (true, Some("not a uuid"))] {
            let mut server = Server::new(ProtocolVersion::V4);
            let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
            server.read(&sent(&mut h));
            let mut keys = vec![("CQL_VERSION".to_owned(), vec!["3.3.1".to_owned()])];
            if offered {
                keys.push((USE_METADATA_ID.to_owned(), vec![]));
            }
            if let Some(id) = host_id {
                keys.push((HOST_ID.to_owned(), vec![id.to_owned()]));
            }
            h.handle_input(&server.answer(ResponseMessage::Supported(keys)));
            assert_eq!(h.poll().expect("poll"), Step::NeedInput);
            let startup = server.read(&sent(&mut h));
            assert_eq!(option(&startup[0], USE_METADATA_ID), offered.then_some(""));
            assert_eq!(option(&startup[0], HOST_ID), None, "an informational key is not echoed");
            h.handle_input(&server.answer(ResponseMessage::Ready));
            assert_eq!(h.poll().expect("poll"), Step::Done);
            let est = h.finish().expect("established");
            assert_eq!(est.metadata_id, offered);
            let expected = host_id.and_then(|id| uuid::Uuid::try_parse(id).ok());
            assert_eq!(est.host_id, expected, "{host_id:?}");
        }
        assert_eq!(host_id(&[(HOST_ID.to_owned(), vec![])]), None, "no value");
        assert_eq!(host_id(&[(HOST_ID.to_owned(), vec![host.to_owned(), host.to_owned()])]), None, "two values");
    }

    /// A server that answers before it is asked (or two answers read at
    /// once): the machine goes on with what it has.
    #[test]
    fn answers_read_together() {
        let mut server = Server::new(ProtocolVersion::V4);
        let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
        let mut both = server.answer(supported(false));
        both.extend(server.answer(ResponseMessage::Ready));
        h.handle_input(&both);
        assert_eq!(h.poll().expect("poll"), Step::Done);
        let seen = server.read(&sent(&mut h));
        assert_eq!(seen.len(), 2, "OPTIONS and STARTUP still sent: {seen:?}");
    }

    #[test]
    fn a_sasl_exchange_with_a_challenge() {
        for (version, lz4) in [(ProtocolVersion::V4, true), (ProtocolVersion::V5, true), (ProtocolVersion::V5, false)] {
            let mut server = Server::new(version);
            let mut h = Handshake::new(config(version, lz4)).expect("new");
            server.read(&sent(&mut h));
            h.handle_input(&server.answer(supported(true)));
            h.poll().expect("poll");
            server.read(&sent(&mut h));
            if version == ProtocolVersion::V4 {
                server.started(lz4);
            }
            let class = "org.apache.cassandra.auth.PasswordAuthenticator".to_owned();
            h.handle_input(&server.answer(ResponseMessage::Authenticate(class.clone())));
            assert_eq!(h.poll().expect("poll"), Step::Authenticate(class));
            // Everything after AUTHENTICATE is in the connection's mode.
            server.started(lz4);
            h.respond(b"\0user\0pass").expect("respond");
            assert_eq!(server.read(&sent(&mut h)), [Seen::AuthResponse(Some(b"\0user\0pass".to_vec()))]);
            assert_eq!(h.poll().expect("poll"), Step::NeedInput);
            h.handle_input(&server.answer(ResponseMessage::AuthChallenge(Some(Bytes::from_static(b"nonce")))));
            assert_eq!(h.poll().expect("poll"), Step::Challenge(Some(b"nonce".to_vec())));
            h.respond(b"proof").expect("respond");
            assert_eq!(server.read(&sent(&mut h)), [Seen::AuthResponse(Some(b"proof".to_vec()))]);
            h.handle_input(&server.answer(ResponseMessage::AuthSuccess(None)));
            assert_eq!(h.poll().expect("poll"), Step::AuthSuccess(None));
            assert!(h.respond(b"late").is_err(), "nothing to answer after success");
            assert_eq!(h.poll().expect("poll"), Step::Done);
            assert_eq!(h.finish().expect("established").lz4, lz4);
        }
    }

    #[test]
    fn refusals_are_told_apart() {
        let cases = [
            (
                error(code::PROTOCOL_ERROR, ErrorKind::ProtocolError, "Invalid or unsupported protocol version (5)"),
                "version",
            ),
            (
                error(code::PROTOCOL_ERROR, ErrorKind::ProtocolError, "Beta version of the protocol used (5/v5-beta)"),
                "version",
            ),
            (error(code::PROTOCOL_ERROR, ErrorKind::ProtocolError, "something else"), "refused"),
            (error(0, ErrorKind::ServerError, "overloaded"), "refused"),
            (ResponseMessage::Ready, "unexpected"),
        ];
        for (answer, expected) in cases {
            for at_startup in [false, true] {
                let mut server = Server::new(ProtocolVersion::V5);
                let mut h = Handshake::new(config(ProtocolVersion::V5, false)).expect("new");
                server.read(&sent(&mut h));
                if at_startup {
                    h.handle_input(&server.answer(supported(false)));
                    h.poll().expect("poll");
                    if matches!(answer, ResponseMessage::Ready) {
                        continue;
                    }
                }
                h.handle_input(&server.answer(answer.clone()));
                let got = match h.poll() {
                    Err(HandshakeError::VersionRejected(5)) => "version",
                    Err(HandshakeError::Refused(_)) => "refused",
                    Err(HandshakeError::Unexpected(_)) => "unexpected",
                    other => panic!("{other:?}"),
                };
                assert_eq!(got, expected, "{answer:?} at startup {at_startup}");
                assert!(h.poll().is_err(), "a failed handshake stays failed");
                assert!(h.finish().is_none());
            }
        }
    }

    /// A v4 handshake that just got AUTHENTICATE.
    fn at_authenticate() -> (Server, Handshake) {
        let mut server = Server::new(ProtocolVersion::V4);
        let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
        server.read(&sent(&mut h));
        h.handle_input(&server.answer(supported(false)));
        h.poll().expect("poll");
        server.read(&sent(&mut h));
        h.handle_input(&server.answer(ResponseMessage::Authenticate("a".into())));
        assert_eq!(h.poll().expect("poll"), Step::Authenticate("a".into()));
        (server, h)
    }

    #[test]
    fn bad_credentials_are_an_auth_refusal_and_steps_keep_their_order() {
        let (_, mut h) = at_authenticate();
        assert!(matches!(h.poll(), Err(HandshakeError::Unexpected(_))), "polled before answering");
        assert!(h.respond(b"wrong").is_err(), "a failed handshake takes no answer");
        let (mut server, mut h) = at_authenticate();
        h.respond(b"wrong").expect("respond");
        assert_eq!(server.read(&sent(&mut h)), [Seen::AuthResponse(Some(b"wrong".to_vec()))]);
        h.handle_input(&server.answer(error(code::BAD_CREDENTIALS, ErrorKind::BadCredentials, "bad password")));
        match h.poll() {
            Err(HandshakeError::AuthRefused(m)) => assert_eq!(m, "bad password"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn violations_are_errors() {
        // An answer on another stream.
        let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
        let mut other_stream = Vec::new();
        Response::new(supported(false)).encode(ProtocolVersion::V4, 3, &mut other_stream).expect("encode");
        h.handle_input(&other_stream);
        assert!(matches!(h.poll(), Err(HandshakeError::Unexpected(_))));
        // Bytes after READY.
        let mut server = Server::new(ProtocolVersion::V4);
        let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
        server.read(&sent(&mut h));
        h.handle_input(&server.answer(supported(false)));
        h.poll().expect("poll");
        let mut ready = server.answer(ResponseMessage::Ready);
        ready.extend_from_slice(&ready.clone());
        h.handle_input(&ready);
        assert!(matches!(h.poll(), Err(HandshakeError::Unexpected(_))));
        // Garbage.
        let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
        h.handle_input(&[0x84, 0, 0, 0, 0x06, 0xFF, 0xFF, 0xFF, 0xFF]);
        assert!(matches!(h.poll(), Err(HandshakeError::Decode(_))));
        // Answering when nothing was asked.
        let mut h = Handshake::new(config(ProtocolVersion::V4, false)).expect("new");
        assert!(h.respond(b"x").is_err());
    }
}
