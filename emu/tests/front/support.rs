//! What the test modules share: a front on the shared Cassandra, an official
//! `scylla` session through it, a raw protocol client, the clock, and the
//! seed of randomized workloads.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shardwise_protocol::frame::{FrameDecoder, ProtocolVersion};
use shardwise_protocol::request::{encode_request, Request};
use shardwise_protocol::response::{Response, ResponseMessage};

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use shardwise_emu::{Front, FrontConfig, FrontHandle};

/// A front on the shared Cassandra ([`testkit::shared_node`]).
pub fn start_front(config: FrontConfig) -> FrontHandle {
    Front::start(testkit::shared_node().expect("Cassandra"), config).expect("front")
}

/// The official driver connected through `front`.
pub async fn session(front: &FrontHandle) -> Session {
    SessionBuilder::new().known_node_addr(front.addr()).build().await.expect("session")
}

/// A fresh keyspace named after `prefix`, replication factor 1, created through `session`.
pub async fn keyspace(session: &Session, prefix: &str) -> String {
    let ks = testkit::fresh_keyspace(prefix);
    session
        .query_unpaged(
            format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
            &[],
        )
        .await
        .expect("keyspace");
    ks
}

/// Now, in µs since the epoch.
pub fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_micros() as i64
}

/// The seed of a randomized workload: `EMU_CDC_SEED`, else the clock; printed
/// so that a failing run can be repeated.
pub fn seed() -> u64 {
    let seed = std::env::var("EMU_CDC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos() as u64);
    println!("seed {seed} (EMU_CDC_SEED={seed} to repeat)");
    seed
}

/// A minimal blocking client on the shardwise protocol crate.
pub struct Raw {
    stream: TcpStream,
    decoder: FrameDecoder,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Raw { stream, decoder: FrameDecoder::new() }
    }

    /// One request, its answer.
    pub fn request<R: Request>(&mut self, r: &R) -> ResponseMessage {
        self.response(r).message
    }

    /// One request, its whole answer (custom payload, warnings).
    pub fn response<R: Request>(&mut self, r: &R) -> Response {
        self.send(r, 7);
        self.responses(&[7]).remove(&7).expect("answer")
    }

    /// Writes `r` on `stream` without waiting for the answer (requests sent this way are
    /// pipelined: the front sees the next before the first is answered).
    pub fn send<R: Request>(&mut self, r: &R, stream: i16) {
        let mut buf = Vec::new();
        encode_request(r, ProtocolVersion::V4, stream, 0, &mut buf).expect("encode");
        self.stream.write_all(&buf).expect("write");
    }

    /// The answers on `streams`, in whatever order they come.
    pub fn answers(&mut self, streams: &[i16]) -> HashMap<i16, ResponseMessage> {
        self.responses(streams).into_iter().map(|(s, r)| (s, r.message)).collect()
    }

    /// [`Raw::answers`], whole.
    pub fn responses(&mut self, streams: &[i16]) -> HashMap<i16, Response> {
        let mut got = HashMap::new();
        while got.len() < streams.len() {
            if let Some(env) = self.decoder.next_envelope().expect("frame") {
                let stream = env.header.stream;
                assert!(streams.contains(&stream), "an answer on stream {stream}");
                got.insert(stream, Response::from_envelope(env).expect("response"));
                continue;
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "front closed the connection");
            self.decoder.feed(&chunk[..n]);
        }
        got
    }
}
