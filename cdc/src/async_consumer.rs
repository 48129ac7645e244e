//! Asynchronous consumers, for sinks that await (an HTTP endpoint, another
//! database, a message bus): `async fn`s that take each change, owned, and
//! each window's end.
//!
//! The reader's workers stay as they are: an [`AsyncConsumer`] runs behind
//! a synchronous [`Consumer`] that copies each row of a page into a
//! [`Change`] and, once the page is walked, hands back the work of feeding
//! them to the async consumer ([`Consumer::pending`]), which the worker
//! awaits before it reads on. So an async consumer costs one boxed future
//! per page (not per row), holds at most one page of changes, and pushes
//! back: the worker reads no further page of the group, and the window
//! does not count as read (nor is its progress saved), until the
//! consumer's futures for it have finished. An error stops the reader as a
//! synchronous consumer's does.
//!
//! The futures run on the worker's own (current-thread) runtime, so they
//! need not be `Send`; a session, timers and other tokio I/O work there.

use std::future::Future;
use std::pin::Pin;

use crate::consumer::{Change, Consumer, ConsumerError, GroupInfo, PendingWork};
use crate::plan::ReadWindow;
use crate::row::CdcRow;

/// Receives the changes of one stream group of one generation, in order,
/// and awaits what it does with them.
pub trait AsyncConsumer: Send + 'static {
    /// One change. The next is handed over once this has finished.
    fn consume(&mut self, change: Change) -> impl Future<Output = Result<(), ConsumerError>>;

    /// Every change of `window` was consumed; the group's progress moves
    /// past the window once this has finished.
    fn window_end(&mut self, window: &ReadWindow) -> impl Future<Output = Result<(), ConsumerError>> {
        let _ = window;
        std::future::ready(Ok(()))
    }
}

/// Makes an async consumer for each stream group of each generation.
pub trait AsyncConsumerFactory: Send + Sync + 'static {
    /// The consumer it makes.
    type Consumer: AsyncConsumer;
    /// The consumer of `group`.
    fn new_consumer(&self, group: &GroupInfo) -> Self::Consumer;
}

/// A closure is a factory.
impl<F, C> AsyncConsumerFactory for F
where
    F: Fn(&GroupInfo) -> C + Send + Sync + 'static,
    C: AsyncConsumer,
{
    type Consumer = C;
    fn new_consumer(&self, group: &GroupInfo) -> C {
        self(group)
    }
}

/// The synchronous side of an async consumer: the page's changes, and the
/// window whose end is to be told.
pub(crate) struct Adapter<C> {
    inner: C,
    changes: Vec<Change>,
    ended: Option<ReadWindow>,
}

impl<C: AsyncConsumer> Adapter<C> {
    pub(crate) fn new(inner: C) -> Self {
        Adapter { inner, changes: Vec::new(), ended: None }
    }
}

impl<C: AsyncConsumer> Consumer for Adapter<C> {
    fn consume(&mut self, row: CdcRow<'_>) -> Result<(), ConsumerError> {
        self.changes.push(Change::from_row(&row)?);
        Ok(())
    }

    fn window_end(&mut self, window: &ReadWindow) -> Result<(), ConsumerError> {
        self.ended = Some(window.clone());
        Ok(())
    }

    fn pending(&mut self) -> Option<PendingWork<'_>> {
        if self.changes.is_empty() && self.ended.is_none() {
            return None;
        }
        let Adapter { inner, changes, ended } = self;
        let work: Pin<Box<dyn Future<Output = Result<(), ConsumerError>> + '_>> = Box::pin(async move {
            // Drained as they are handed over: after a failure, nothing of
            // this page is handed over again by this consumer.
            for change in changes.drain(..) {
                inner.consume(change).await?;
            }
            if let Some(window) = ended.take() {
                inner.window_end(&window).await?;
            }
            Ok(())
        });
        Some(work)
    }
}
