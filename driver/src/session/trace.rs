//! CQL tracing: what the cluster recorded of a request sent with
//! [`with_tracing(true)`](crate::Statement::with_tracing), read from
//! `system_traces.sessions` and `system_traces.events` by the id the
//! result carries ([`QueryResult::tracing_id`](crate::QueryResult::tracing_id)).
//!
//! The coordinator writes the trace asynchronously, after it answered: the
//! session row appears first and gets its `duration` when the request is
//! finished, events keep arriving from the replicas. So the session row is
//! read again, a few milliseconds apart, until it is complete (as the
//! official drivers do: 10 attempts, 3 ms apart, at consistency ONE), and
//! the events are read once it is.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::types::CqlTimestamp;
use uuid::Uuid;

use super::Session;
use crate::error::{ExecutionError, RowsAccessError};
use crate::statement::Statement;

/// How often the session row is read before the trace counts as incomplete.
pub const TRACING_INFO_ATTEMPTS: u32 = 10;
/// The pause between two reads of the session row.
pub const TRACING_INFO_INTERVAL: Duration = Duration::from_millis(3);

/// How a trace is read ([`SessionConfig::tracing_info_fetch`](crate::SessionConfig::tracing_info_fetch)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracingInfoFetch {
    /// Reads of the session row before the trace counts as incomplete.
    pub attempts: NonZeroU32,
    /// The pause between two of them.
    pub interval: Duration,
    /// The consistency of every read of the trace.
    pub consistency: Consistency,
}

impl Default for TracingInfoFetch {
    fn default() -> Self {
        TracingInfoFetch {
            attempts: NonZeroU32::new(TRACING_INFO_ATTEMPTS).unwrap_or(NonZeroU32::MIN),
            interval: TRACING_INFO_INTERVAL,
            consistency: Consistency::One,
        }
    }
}

/// A traced request, as the coordinator recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct TracingInfo {
    /// The client's address, as the coordinator saw it.
    pub client: Option<IpAddr>,
    /// The kind of request (`QUERY`, `EXECUTE`, ...).
    pub command: Option<String>,
    /// The coordinator.
    pub coordinator: Option<IpAddr>,
    /// How long the coordinator took, in microseconds.
    pub duration: Option<i32>,
    /// What the coordinator noted of the request (the query, consistency,
    /// page size, ...).
    pub parameters: HashMap<String, String>,
    /// A description of the request.
    pub request: Option<String>,
    /// When the request started.
    pub started_at: Option<CqlTimestamp>,
    /// What each node did, in the order they did it.
    pub events: Vec<TracingEvent>,
}

/// One step of a traced request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracingEvent {
    /// Its time-based id.
    pub event_id: Uuid,
    /// What was done.
    pub activity: Option<String>,
    /// The node that did it.
    pub source: Option<IpAddr>,
    /// Microseconds since the request reached that node.
    pub source_elapsed: Option<i32>,
    /// The thread (or shard) that did it.
    pub thread: Option<String>,
}

/// Reading a trace failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracingInfoError {
    /// A read of `system_traces` failed.
    #[error("reading trace {id}: {source}")]
    Query {
        /// The trace.
        id: Uuid,
        /// Why.
        source: ExecutionError,
    },
    /// `system_traces` rows have unexpected columns.
    #[error("reading trace {id}: {source}")]
    Rows {
        /// The trace.
        id: Uuid,
        /// Why.
        source: RowsAccessError,
    },
    /// The session row was missing or unfinished at every attempt.
    #[error("trace {id} is still incomplete after {attempts} reads")]
    Incomplete {
        /// The trace.
        id: Uuid,
        /// Reads made.
        attempts: u32,
    },
}

/// `system_traces.sessions` columns read, in order.
type SessionRow<'a> = (
    Option<IpAddr>,
    Option<&'a str>,
    Option<IpAddr>,
    Option<i32>,
    Option<HashMap<String, String>>,
    Option<&'a str>,
    Option<CqlTimestamp>,
);

impl Session {
    /// The trace of a request sent with tracing on, read once its session
    /// row is complete (see the [module docs](self)), as
    /// [`SessionConfig::tracing_info_fetch`](crate::SessionConfig::tracing_info_fetch)
    /// says.
    pub async fn tracing_info(&self, id: Uuid) -> Result<TracingInfo, TracingInfoError> {
        let fetch = self.inner.config.tracing_info_fetch;
        self.tracing_info_with(id, fetch.attempts.get(), fetch.interval).await
    }

    /// [`tracing_info`](Self::tracing_info) with `attempts` reads of the
    /// session row, `interval` apart (at the session's
    /// `tracing_info_fetch` consistency).
    pub async fn tracing_info_with(
        &self,
        id: Uuid,
        attempts: u32,
        interval: Duration,
    ) -> Result<TracingInfo, TracingInfoError> {
        let consistency = self.inner.config.tracing_info_fetch.consistency;
        let query = |source| TracingInfoError::Query { id, source };
        let rows = |source| TracingInfoError::Rows { id, source };
        let session_row = Statement::new(
            "SELECT client, command, coordinator, duration, parameters, request, started_at \
             FROM system_traces.sessions WHERE session_id = ?",
        )
        .with_consistency(consistency)
        .with_idempotent(true);
        let events = Statement::new(
            "SELECT event_id, activity, source, source_elapsed, thread FROM system_traces.events WHERE session_id = ?",
        )
        .with_consistency(consistency)
        .with_idempotent(true);
        let attempts = attempts.max(1);
        for attempt in 1..=attempts {
            let result = self.execute(&session_row, (id,)).await.map_err(query)?;
            let found = result.first_row::<SessionRow<'_>>().map_err(rows)?;
            let Some((client, command, coordinator, duration @ Some(_), parameters, request, started_at)) = found
            else {
                if attempt < attempts {
                    tokio::time::sleep(interval).await;
                }
                continue;
            };
            let mut info = TracingInfo {
                client,
                command: command.map(str::to_owned),
                coordinator,
                duration,
                parameters: parameters.unwrap_or_default(),
                request: request.map(str::to_owned),
                started_at,
                events: Vec::new(),
            };
            let mut pages = self.execute_pages(&events, (id,));
            while let Some(page) = pages.next_page().await {
                let page = page.map_err(query)?;
                for row in
                    page.rows::<(Uuid, Option<&str>, Option<IpAddr>, Option<i32>, Option<&str>)>().map_err(rows)?
                {
                    let (event_id, activity, source, source_elapsed, thread) = row.map_err(|e| rows(e.into()))?;
                    info.events.push(TracingEvent {
                        event_id,
                        activity: activity.map(str::to_owned),
                        source,
                        source_elapsed,
                        thread: thread.map(str::to_owned),
                    });
                }
            }
            return Ok(info);
        }
        Err(TracingInfoError::Incomplete { id, attempts })
    }
}
