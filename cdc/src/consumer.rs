//! What the application plugs in: a [`Consumer`] per stream group, made by
//! a [`ConsumerFactory`], and the owned [`Change`] for code that wants to
//! keep rows.
//!
//! Consumers are synchronous. A worker thread reads a window of its group,
//! then calls [`Consumer::consume`] for every row of it, in the order the
//! server returned them (each stream's rows in `cdc$time`,
//! `cdc$batch_seq_no` order; the streams of a group one after the other),
//! then [`Consumer::window_end`]. Only after `window_end` succeeds does the
//! group's progress move past the window, so a consumer that buffers
//! writes flushes them there. An error stops the reader (its `join` returns
//! [`CdcError::Consumer`](crate::CdcError::Consumer)) without moving past
//! the window: a reader started again from the last checkpoint reads it
//! again (delivery is at-least-once). Rows are borrowed views: nothing is copied
//! unless the consumer copies it. Anything that needs to await (a network
//! sink) is an [`AsyncConsumer`](crate::AsyncConsumer) (see the
//! `async_consumer` module), or hands the rows (as [`Change`]s) to its own
//! task ([`CdcReaderBuilder::build_stream`](crate::CdcReaderBuilder::build_stream)).

use std::error::Error as StdError;
use std::sync::Arc;

use shardwise::protocol::types::CqlValue;
use uuid::Uuid;

/// The group a consumer is made for is described by the planner; it is
/// re-exported here, next to the factory that receives it.
pub use crate::plan::GroupInfo;
use crate::plan::ReadWindow;
use crate::row::{CdcRow, Operation, RowError};
use crate::stream::StreamId;
use crate::time::timeuuid_micros;

/// A consumer failed: the reader stops, and the window is read again by a
/// reader that resumes from the last checkpoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// A row could not be read as the consumer asked.
    #[error(transparent)]
    Row(#[from] RowError),
    /// The consumer's own failure.
    #[error("consumer failed: {0}")]
    Failed(Box<dyn StdError + Send + Sync>),
    /// The sink refused the window because a later holder of the group
    /// took it over (Kafka fenced the group's producer, say). A reader that
    /// shares the table through leases leaves the group, as when its lease
    /// runs out; any other reader stops with this error.
    #[error("a later holder of the group took it over: {0}")]
    Fenced(Box<dyn StdError + Send + Sync>),
}

impl ConsumerError {
    /// Wraps an application error.
    pub fn failed(e: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        ConsumerError::Failed(e.into())
    }
}

/// Receives the rows of one stream group of one generation.
pub trait Consumer: Send {
    /// One log row.
    fn consume(&mut self, row: CdcRow<'_>) -> Result<(), ConsumerError>;

    /// Every row of `window` was consumed; called before the group's
    /// progress moves past the window.
    fn window_end(&mut self, window: &ReadWindow) -> Result<(), ConsumerError> {
        let _ = window;
        Ok(())
    }

    /// Work this consumer still has to await for what it was handed: asked
    /// after each page and after [`Consumer::window_end`], and awaited (on
    /// the worker's runtime) before the reader reads on or counts the
    /// window as read. `None` (the default): nothing. What the reader's
    /// [`AsyncConsumer`](crate::AsyncConsumer)s run on.
    fn pending(&mut self) -> Option<PendingWork<'_>> {
        None
    }
}

/// A consumer's pending work ([`Consumer::pending`]).
pub type PendingWork<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ConsumerError>> + 'a>>;

/// A closure is a consumer.
impl<F> Consumer for F
where
    F: FnMut(CdcRow<'_>) -> Result<(), ConsumerError> + Send,
{
    fn consume(&mut self, row: CdcRow<'_>) -> Result<(), ConsumerError> {
        self(row)
    }
}

/// Makes a consumer for each stream group of each generation.
pub trait ConsumerFactory: Send + Sync {
    /// The consumer of `group`.
    fn new_consumer(&self, group: &GroupInfo) -> Box<dyn Consumer>;
}

/// A closure is a factory.
impl<F> ConsumerFactory for F
where
    F: Fn(&GroupInfo) -> Box<dyn Consumer> + Send + Sync,
{
    fn new_consumer(&self, group: &GroupInfo) -> Box<dyn Consumer> {
        self(group)
    }
}

/// One base column of a [`Change`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeColumn {
    /// The column's name.
    pub name: Arc<str>,
    /// Part of the base table's primary key (a column without
    /// `cdc$deleted_<name>`).
    pub key: bool,
    /// Its value (`None`: null).
    pub value: Option<CqlValue>,
    /// `cdc$deleted_<name>`.
    pub deleted: bool,
    /// `cdc$deleted_elements_<name>` (empty when null or absent).
    pub deleted_elements: Vec<CqlValue>,
}

/// An owned copy of one log row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `cdc$stream_id`.
    pub stream_id: StreamId,
    /// `cdc$time`.
    pub time: Uuid,
    /// `cdc$batch_seq_no`.
    pub batch_seq_no: i32,
    /// `cdc$operation`.
    pub operation: Operation,
    /// A delete Scylla made itself because the data's TTL ran out
    /// ([`CdcRow::is_expiration`]).
    pub expiration: bool,
    /// `cdc$ttl`.
    pub ttl: Option<i64>,
    /// `cdc$end_of_batch`.
    pub end_of_batch: bool,
    /// The base columns, in result order.
    pub columns: Vec<ChangeColumn>,
}

impl Change {
    /// Copies a row.
    pub fn from_row(row: &CdcRow<'_>) -> Result<Self, RowError> {
        let mut columns = Vec::with_capacity(row.schema().columns().len());
        for (i, c) in row.schema().columns().iter().enumerate() {
            let deleted_elements = match c.deleted_elements_index() {
                Some(_) => match row.deleted_elements_at::<Option<CqlValue>>(i)? {
                    Some(CqlValue::Set(v) | CqlValue::List(v)) => v,
                    Some(other) => vec![other],
                    None => Vec::new(),
                },
                None => Vec::new(),
            };
            columns.push(ChangeColumn {
                name: c.shared_name().clone(),
                key: c.deleted_index().is_none(),
                value: row.value_at(i)?,
                deleted: row.is_deleted_at(i),
                deleted_elements,
            });
        }
        Ok(Change {
            stream_id: row.stream_id(),
            time: row.time(),
            batch_seq_no: row.batch_seq_no(),
            operation: row.operation(),
            expiration: row.is_expiration(),
            ttl: row.ttl(),
            end_of_batch: row.end_of_batch(),
            columns,
        })
    }

    /// The write time in microseconds, from `cdc$time`.
    pub fn time_micros(&self) -> i64 {
        timeuuid_micros(&self.time)
    }

    /// The base column `name`.
    pub fn column(&self, name: &str) -> Option<&ChangeColumn> {
        self.columns.iter().find(|c| &*c.name == name)
    }

    /// The value of `name`; `None` if null or unknown.
    pub fn value(&self, name: &str) -> Option<&CqlValue> {
        self.column(name)?.value.as_ref()
    }

    /// Whether `cdc$deleted_<name>` is set.
    pub fn is_deleted(&self, name: &str) -> bool {
        self.column(name).is_some_and(|c| c.deleted)
    }

    /// The removed elements of collection `name`.
    pub fn deleted_elements(&self, name: &str) -> &[CqlValue] {
        self.column(name).map_or(&[], |c| &c.deleted_elements)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::plan::GroupId;
    use crate::row::tests::{log_rows, log_specs, STREAM};
    use crate::row::{LogPage, LogSchema, RowIndex};
    use crate::stream::StreamGroup;
    use crate::time::Millis;

    #[test]
    fn change_copies_a_row() {
        let rows = log_rows(
            &[
                (0, 2, Some(9), None, Some(1), Some(vec![(1, "a"), (2, "b")]), 7, Some(5), None, Some(true), None),
                (1, 1, None, Some(true), Some(1), None, 7, None, Some(true), None, Some(vec![3])),
            ],
            true,
        );
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let page = LogPage::new(&schema, &rows, &mut index).unwrap();
        let changes: Vec<Change> = page.iter().map(|r| Change::from_row(&r).unwrap()).collect();

        let c = &changes[0];
        assert_eq!(
            (c.stream_id, c.operation, c.ttl, c.end_of_batch),
            (StreamId::from_bytes(STREAM), Operation::Insert, Some(9), false)
        );
        assert_eq!(c.time_micros(), 1_584_969_040_910_883);
        assert_eq!(c.value("v"), Some(&CqlValue::Int(5)));
        assert_eq!(
            c.value("m"),
            Some(&CqlValue::Map(vec![
                (CqlValue::Int(1), CqlValue::Text("a".into())),
                (CqlValue::Int(2), CqlValue::Text("b".into()))
            ]))
        );
        assert!(c.is_deleted("m") && !c.is_deleted("v"));
        assert!(c.deleted_elements("m").is_empty());
        let names: Vec<&str> = c.columns.iter().map(|c| &*c.name).collect();
        assert_eq!(names, vec!["ck", "m", "pk", "v"]);
        let keys: Vec<&str> = c.columns.iter().filter(|c| c.key).map(|c| &*c.name).collect();
        assert_eq!(keys, vec!["ck", "pk"]);

        let c = &changes[1];
        assert_eq!((c.batch_seq_no, c.operation, c.ttl, c.end_of_batch), (1, Operation::Update, None, true));
        assert_eq!(c.value("v"), None);
        assert!(c.is_deleted("v"));
        assert_eq!(c.deleted_elements("m"), &[CqlValue::Int(3)]);
        assert_eq!(c.value("nope"), None);
        assert!(!c.is_deleted("nope"));
    }

    #[test]
    fn closures_are_consumers_and_factories() {
        let rows = log_rows(&[(0, 1, None, Some(true), None, None, 1, Some(2), None, None, None)], false);
        let schema = LogSchema::new(log_specs()).unwrap();
        let mut index = RowIndex::default();
        let page = LogPage::new(&schema, &rows, &mut index).unwrap();

        let factory = |_: &GroupInfo| -> Box<dyn Consumer> {
            Box::new(
                |row: CdcRow<'_>| {
                    if row.value::<i32>("v")? == 2 {
                        Ok(())
                    } else {
                        Err(ConsumerError::failed("unexpected v"))
                    }
                },
            )
        };
        let group = GroupInfo {
            generation: Millis(0),
            group: GroupId(0),
            streams: StreamGroup::new([StreamId::from_bytes(STREAM)]).unwrap(),
            worker: 0,
            epoch: 0,
        };
        let mut consumer = factory.new_consumer(&group);
        for row in &page {
            consumer.consume(row).unwrap();
        }
        let window = ReadWindow {
            group: GroupId(0),
            generation: Millis(0),
            streams: group.streams.clone(),
            from: Millis(0),
            to: Millis(1),
            epoch: 0,
        };
        consumer.window_end(&window).unwrap();
        // Errors are typed: a row error converts, application errors wrap.
        let mut failing = |row: CdcRow<'_>| -> Result<(), ConsumerError> {
            row.value::<String>("v")?;
            Ok(())
        };
        let err = failing.consume(page.row(0).unwrap()).unwrap_err();
        assert!(matches!(err, ConsumerError::Row(RowError::Value { .. })));
        assert!(ConsumerError::failed("boom").to_string().contains("boom"));
    }
}
