//! A connection's own `execute` and `prepare`: one statement on this
//! connection, no plan, no retries. The request is built in place by the
//! statement (see [`crate::execute`]) inside the connection's write, the
//! answer decoded here, `METADATA_CHANGED` followed and `UNPREPARED`
//! answered by preparing again on the same connection.
//!
//! The session's attempts run through here too ([`execute_observed`], with
//! the attempt's deadline and a report of a re-prepare), so that the
//! allocation-free path is one and the same for both callers; the CDC
//! engine's per-shard workers call [`Connection::execute`] directly.

use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use shardwise_protocol::frame::Flags;
use shardwise_protocol::request::{self, Request};
use shardwise_protocol::response::{ErrorKind, Response, ResponseMessage, ResultMessage};
use shardwise_protocol::tablets::{TabletRoute, PAYLOAD_KEY, PAYLOAD_KEY_V2};
use shardwise_protocol::types::ColumnSpec;

use super::{Connection, Deadline, TryWrite};
use crate::error::ExecutionError;
use crate::execute::{Executable, Params, RequestVisitor, SentSpecs};
use crate::result::{Extras, QueryResult};
use crate::statement::{PreparedStatement, ResultShape};

/// The columns of a `Metadata_changed` answer: the ones it sent, or, where
/// they equal the cached ones and were therefore read in place (none
/// decoded), those. Never none: a statement whose shape has an id and no
/// columns would have a later answer read with no columns at all (seen as
/// a race: another request had cached the new columns first).
fn changed_specs(sent: Option<&[ColumnSpec]>, known: Option<&Arc<[ColumnSpec]>>) -> Option<Arc<[ColumnSpec]>> {
    match sent {
        Some(specs) => Some(Arc::from(specs)),
        None => known.cloned(),
    }
}

/// The `tablets-routing-v1` (or `-v2`) payload, when present and valid
/// (an invalid one is ignored: the request itself succeeded).
fn tablet_of(payload: &[(String, Option<Bytes>)]) -> Option<TabletRoute> {
    let (key, value) = payload.iter().find(|(k, _)| k == PAYLOAD_KEY || k == PAYLOAD_KEY_V2)?;
    let value = value.as_deref()?;
    let route = if key == PAYLOAD_KEY { TabletRoute::decode(value) } else { TabletRoute::decode_v2(value) };
    match route {
        Ok(route) => Some(route),
        Err(error) => {
            tracing::debug!(%error, key, "ignoring an invalid tablets routing payload");
            None
        }
    }
}

impl RequestVisitor for TryWrite<'_, '_> {
    type Output = Poll<Result<(), ExecutionError>>;

    fn visit<R: Request>(self, request: &R) -> Self::Output {
        self.write(request)
    }
}

impl Connection {
    /// Runs a statement on this connection (no retries, no failover): the
    /// request is written in place, the answer decoded, `METADATA_CHANGED`
    /// followed and `UNPREPARED` answered by re-preparing here. For callers
    /// that choose their own connection, e.g. per-shard workers running
    /// their own current-thread runtime; rows come back as views over the
    /// response buffer.
    pub async fn execute<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        params: Params<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        execute_observed(self, statement, values, params, None, None, |_| {}).await
    }

    /// Prepares a statement on this connection's node.
    pub async fn prepare(&self, text: &str) -> Result<PreparedStatement, ExecutionError> {
        prepare_until(self, text, None, false).await.map(|(p, _)| p)
    }

    /// [`Connection::prepare`] with tracing on when `tracing`: also the
    /// PREPARE's tracing id.
    pub(crate) async fn prepare_traced(
        &self,
        text: &str,
        tracing: bool,
    ) -> Result<(PreparedStatement, Option<uuid::Uuid>), ExecutionError> {
        prepare_until(self, text, None, tracing).await
    }
}

/// Prepares `text` on `conn` (traced when `tracing`), waiting until
/// `deadline` at most; with the answer's tracing id.
async fn prepare_until(
    conn: &Connection,
    text: &str,
    deadline: Option<&Deadline>,
    tracing: bool,
) -> Result<(PreparedStatement, Option<uuid::Uuid>), ExecutionError> {
    let prepare = request::Prepare { query: text, keyspace: None };
    let flags = if tracing { Flags::TRACING } else { 0 };
    let envelope = conn.send_with(flags, deadline, |write| Ok(write.write(&prepare))).await?;
    let metadata_id = conn.uses_metadata_id();
    let response = Response::decode_ext(&envelope.header, envelope.body, None, metadata_id)?;
    match response.message {
        ResponseMessage::Result(ResultMessage::Prepared(p)) => {
            Ok((PreparedStatement::new(text, *p, conn.lwt_mask()), response.tracing_id))
        }
        ResponseMessage::Error(e) => Err(e.into()),
        _ => Err(ExecutionError::UnexpectedResponse("PREPARE not answered with Prepared")),
    }
}

/// Prepares `p` again on `conn` (the node answered UNPREPARED), and takes
/// the result shape it answers with.
async fn reprepare(
    conn: &Connection,
    p: &PreparedStatement,
    deadline: Option<&Deadline>,
) -> Result<(), ExecutionError> {
    tracing::debug!(addr = %conn.addr(), text = p.text(), "re-preparing");
    let (fresh, _) = prepare_until(conn, p.text(), deadline, false).await?;
    if fresh.id() != p.id() {
        return Err(ExecutionError::UnexpectedResponse("re-prepare returned another statement id"));
    }
    p.set_shape(ResultShape { metadata_id: fresh.with_shape(|s| s.metadata_id.clone()), specs: fresh.result_specs() });
    Ok(())
}

/// How many times one attempt prepares its statement again.
const MAX_REPREPARES: u32 = 3;

/// Runs `statement` on one chosen connection: builds the request in place,
/// decodes the answer, follows `METADATA_CHANGED` and re-prepares on
/// `UNPREPARED`, calling `on_reprepared` with the prepared statement once it
/// was prepared again (before the retry), all of it until `deadline`. This is the allocation-free path
/// `Session::execute` uses for each attempt (which reports a re-prepare as
/// [`crate::SessionEvent::StatementReprepared`]), and `Connection::execute`
/// for callers that pick their own connection (the CDC engine's per-shard
/// workers). `tablet_version_block` ends the EXECUTE on a connection with
/// tablets routing v2.
pub(crate) async fn execute_observed<E: Executable<V>, V>(
    conn: &Connection,
    statement: &E,
    values: &V,
    params: Params<'_>,
    deadline: Option<&Deadline>,
    tablet_version_block: Option<u8>,
    on_reprepared: impl FnOnce(&PreparedStatement),
) -> Result<QueryResult, ExecutionError> {
    let mut on_reprepared = Some(on_reprepared);
    let flags = if statement.options().tracing { Flags::TRACING } else { 0 };
    // A node may forget the statement again right after it was prepared
    // there (a schema change of its table invalidates it while requests
    // race it): a few times, within the deadline.
    let mut reprepares = 0;
    let sent = SentSpecs::default();
    loop {
        // Only references to the statement and the values are held across
        // the await; the request is built inside the connection's write.
        let envelope = conn
            .send_execute(flags, tablet_version_block, deadline, |write| {
                statement.with_request_noting(values, params, write, &sent)
            })
            .await?;
        // The answer lives in this block only, so that the rare re-prepare
        // below does not keep it in every request's future.
        let forgotten = {
            // Result columns that equal the cached ones are read in place:
            // the ones this request was sent with, whose metadata id let
            // the server skip them.
            let known = sent.take();
            let response =
                Response::decode_ext(&envelope.header, envelope.body, known.as_deref(), conn.uses_metadata_id())?;
            match response.message {
                ResponseMessage::Result(result) => {
                    if let (ResultMessage::Rows(rows), Some(p)) = (&result, statement.as_prepared()) {
                        if let Some(id) = &rows.metadata.new_metadata_id {
                            // The table changed: the server sent the new columns and their id.
                            p.set_shape(ResultShape {
                                metadata_id: Some(Bytes::copy_from_slice(id)),
                                specs: changed_specs(rows.metadata.specs.as_deref(), known.as_ref()),
                            });
                        } else if let (Some(specs), Some(_)) = (&rows.metadata.specs, &known) {
                            // Without a metadata id (v4): the columns sent
                            // differ from the cached ones, which follow.
                            // (One update: a metadata id another answer
                            // set meanwhile is kept.)
                            p.update_shape(|s| ResultShape {
                                metadata_id: s.metadata_id.clone(),
                                specs: Some(Arc::from(specs.clone())),
                            });
                        }
                    }
                    // Only rows read the specs: a write's answer takes no
                    // reference to them. The ones the rows were decoded
                    // against: another request may have replaced the
                    // statement's meanwhile (a table altered), and rows
                    // whose columns were left out as equal to these must be
                    // read with these.
                    let specs = match &result {
                        ResultMessage::Rows(_) => known,
                        _ => None,
                    };
                    return Ok(QueryResult {
                        specs,
                        result,
                        coordinator: conn.coordinator(),
                        extras: Extras::of(response.tracing_id, response.warnings, tablet_of(&response.custom_payload)),
                    });
                }
                ResponseMessage::Error(e) => {
                    let forgotten = match &e.kind {
                        ErrorKind::Unprepared { id } => {
                            statement.prepared_with_id(id).filter(|_| reprepares < MAX_REPREPARES)
                        }
                        _ => None,
                    };
                    match forgotten {
                        Some(p) => p,
                        None => return Err(e.into()),
                    }
                }
                _ => return Err(ExecutionError::UnexpectedResponse("request not answered with RESULT or ERROR")),
            }
        };
        // The node forgot the statement (restart, eviction): prepare it again
        // there and retry; retry policies do not count this. Boxed: a rare
        // path that would otherwise enlarge every request's future.
        Box::pin(reprepare(conn, forgotten, deadline)).await?;
        if let Some(report) = on_reprepared.take() {
            report(forgotten);
        }
        reprepares += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use shardwise_protocol::consistency::Consistency;
    use shardwise_protocol::frame::{FrameDecoder, Framer, ProtocolVersion, HEADER_LEN};
    use shardwise_protocol::handshake::Established;
    use shardwise_protocol::response::Prepared;
    use shardwise_protocol::rows::{PreparedMetadata, ResultMetadata, Rows};
    use shardwise_protocol::types::ColumnType;

    use super::*;
    use crate::config::ConnectionConfig;
    use crate::connection::direct::Shared;

    fn spec(name: &str) -> ColumnSpec {
        ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ: ColumnType::Int }
    }

    /// Regression (`session::prepared_select_follows_alter_table`, v5): an
    /// answer with a new metadata id whose columns equalled the cached ones
    /// (another request had cached them first) left the statement with an
    /// id and no columns, and a request racing it read its rows with none.
    #[test]
    fn a_metadata_change_read_in_place_keeps_the_cached_columns() {
        let known: Arc<[ColumnSpec]> = Arc::from(vec![spec("pk"), spec("a"), spec("b")]);
        assert_eq!(changed_specs(None, Some(&known)).as_deref(), Some(&known[..]));
        let sent = [spec("pk"), spec("c")];
        assert_eq!(changed_specs(Some(&sent), Some(&known)).as_deref(), Some(&sent[..]));
        assert_eq!(changed_specs(Some(&sent), None).as_deref(), Some(&sent[..]));
    }

    /// Regression (`session::prepared_select_follows_alter_table`, v5, a
    /// CI run): a request sent with the old metadata id got its rows
    /// without metadata, but was read with the columns another request had
    /// cached meanwhile (the table altered), and failed with a column
    /// count mismatch. The rows are read with the columns the request was
    /// sent with. A scripted node answers after the cache changed.
    #[tokio::test]
    async fn rows_without_metadata_are_read_with_the_columns_they_were_asked_with() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut node, _) = listener.accept().expect("accept");
        node.set_read_timeout(Some(std::time::Duration::from_secs(5))).expect("timeout");
        let (read, write) = client.into_split();
        let established = Established {
            version: ProtocolVersion::V4,
            lz4: false,
            supported: Vec::new(),
            metadata_id: true,
            tablets_v2: false,
            host_id: None,
            decoder: FrameDecoder::new(),
            framer: Framer::established(ProtocolVersion::V4, false),
        };
        let config = ConnectionConfig { heartbeat_interval: None, ..Default::default() };
        let conn = Connection::start(addr, read, Shared(Arc::new(write)), established, &config);

        let two = vec![spec("pk"), spec("a")];
        let select = PreparedStatement::new(
            "SELECT * FROM ks.t WHERE pk = ?",
            Prepared {
                id: Bytes::from_static(b"id"),
                result_metadata_id: Some(Bytes::from_static(b"two")),
                metadata: PreparedMetadata { flags: 0, pk_indexes: vec![0], specs: vec![spec("pk")] },
                result_metadata: ResultMetadata {
                    columns_count: 2,
                    paging_state: None,
                    new_metadata_id: None,
                    specs: Some(two.clone()),
                },
            },
            0,
        );
        let (sent, cache_changed) = std::sync::mpsc::channel::<()>();
        let changer = select.clone();
        let script = std::thread::spawn(move || {
            let mut header = [0u8; HEADER_LEN];
            node.read_exact(&mut header).expect("the request's header");
            let mut body = vec![0; u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize];
            node.read_exact(&mut body).expect("the request's body");
            sent.send(()).expect("test");
            // The table gained a column, and another answer cached it.
            changer.set_shape(ResultShape {
                metadata_id: Some(Bytes::from_static(b"three")),
                specs: Some(Arc::from(vec![spec("pk"), spec("a"), spec("b")])),
            });
            // This request's rows, as the server read them before the
            // change: 2 columns, left out as equal to the id sent.
            let metadata = ResultMetadata { columns_count: 2, paging_state: None, new_metadata_id: None, specs: None };
            let one = 1i32.to_be_bytes();
            let ten = 10i32.to_be_bytes();
            let rows = Rows::from_raw(metadata, &[vec![Some(&one[..]), Some(&ten[..])]]).expect("rows");
            let mut answer = Vec::new();
            Response::new(ResponseMessage::Result(ResultMessage::Rows(rows)))
                .encode(ProtocolVersion::V4, i16::from_be_bytes([header[2], header[3]]), &mut answer)
                .expect("encodes");
            node.write_all(&answer).expect("answer");
            body
        });
        let r = conn.execute(&select, &(1i32,), Params::new(Consistency::One)).await.expect("answered");
        cache_changed.recv().expect("the node saw the request");
        let body = script.join().expect("node");
        assert!(body.windows(3).any(|w| w == b"two"), "sent with the old metadata id");
        assert_eq!(r.first_row::<(i32, i32)>().expect("the columns asked with"), Some((1, 10)));
        assert_eq!(select.result_specs().expect("specs").len(), 3, "the newer cache is kept");
    }
}
