//! Taking over from `scylla-cdc`: its checkpoint table read, so that a
//! service that switches libraries starts each stream where the old reader
//! stopped, with no gap and nothing read twice that the old one had saved.
//!
//! `scylla-cdc`'s `TableBackedCheckpointSaver` keeps one row per stream,
//! and one marker row for the generation being read:
//!
//! ```text
//! CREATE TABLE <keyspace>.<table> (
//!     stream_id  blob PRIMARY KEY, -- a stream id; 0x00 marks the generation row
//!     generation timestamp,        -- the generation the stream belongs to
//!     time       timestamp         -- everything of the stream before it was read
//! )
//! ```
//!
//! Its reader reads windows `cdc$time >= minTimeuuid(begin) AND cdc$time <
//! minTimeuuid(end)` and saves `begin` of the next window, so a stream's
//! `time` has the meaning shardwise's progress has. Groups differ (the old
//! reader groups a vnode's streams, shardwise a shard's), so each shardwise
//! group starts at the earliest of its streams ([`Planner::restore_streams`](crate::plan::Planner::restore_streams)),
//! and the reader skips the rows of each stream before the stream's own
//! time: a change the old reader had saved as read is not read again.

use std::collections::HashMap;

use shardwise::protocol::types::CqlTimestamp;
use shardwise::{RowsAccessError, Session, Statement};

use super::CheckpointError;
use crate::stream::StreamId;
use crate::time::Millis;

/// The progress `scylla-cdc` saved: its generation and each of its streams'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScyllaCdcCheckpoints {
    /// The generation it was reading.
    pub generation: Millis,
    /// Everything of each stream before its time was read.
    pub streams: HashMap<StreamId, Millis>,
}

impl ScyllaCdcCheckpoints {
    /// Reads `keyspace.table`, the table `scylla-cdc`'s checkpoint saver
    /// wrote (`TableBackedCheckpointSaver::new(session, keyspace, table)`).
    /// `None` when it holds no generation. The generation is the marker
    /// row's (the newest of the streams' where there is none); rows of
    /// other generations are left out.
    pub async fn load(session: &Session, keyspace: &str, table: &str) -> Result<Option<Self>, CheckpointError> {
        let select = Statement::new(format!(
            "SELECT stream_id, generation, time FROM {}.{}",
            crate::reader::quote(keyspace),
            crate::reader::quote(table)
        ))
        .with_idempotent(true);
        let mut pages = session.execute_pages(select, ());
        let mut marker = None;
        let mut rows = Vec::new();
        while let Some(page) = pages.next_page().await {
            let page = page?;
            for row in page.rows::<(&[u8], Option<CqlTimestamp>, Option<CqlTimestamp>)>()? {
                let (id, generation, time) = row.map_err(RowsAccessError::from)?;
                let Some(generation) = generation.map(Millis::from) else { continue };
                if id == GENERATION_ROW {
                    marker = Some(generation);
                } else if let (Ok(stream), Some(time)) = (StreamId::from_slice(id), time) {
                    rows.push((stream, generation, Millis::from(time)));
                }
                // Rows that are neither (another table's shape) are not ours.
            }
        }
        let Some(generation) = marker.or_else(|| rows.iter().map(|r| r.1).max()) else { return Ok(None) };
        let streams = rows.into_iter().filter(|r| r.1 == generation).map(|(s, _, t)| (s, t)).collect();
        Ok(Some(ScyllaCdcCheckpoints { generation, streams }))
    }

    /// Where each stream resumes: its saved time, and `None` for streams
    /// it has none for.
    pub fn start_of(&self, stream: StreamId) -> Option<Millis> {
        self.streams.get(&stream).copied()
    }
}

/// The key of `scylla-cdc`'s generation row.
const GENERATION_ROW: &[u8] = &[0];
