//! Row streams: every row of a paged result as a [`Stream`] of owned rows,
//! the next page fetched in the background while the current one is read.
//!
//! Back-pressure: the next page is requested once half of the current
//! page has been taken, never earlier, so at most one page is read ahead
//! of the consumer and a slow consumer holds at most two pages in memory.
//! A failed fetch ends the stream with its error (after the rows already
//! received).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use shardwise_protocol::types::de::DeserializeRow;
use tokio::task::JoinHandle;

use super::Session;
use crate::error::{ExecutionError, RowsAccessError};
use crate::execute::Executable;
use crate::result::{PagingState, QueryResult};

/// A row stream ended with an error.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RowStreamError {
    /// Fetching a page failed.
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    /// A page's rows are not rows of the requested type.
    #[error(transparent)]
    Rows(#[from] RowsAccessError),
}

type PageFuture = Pin<Box<dyn Future<Output = Result<QueryResult, ExecutionError>> + Send>>;
type FetchPage = Arc<dyn Fn(Option<PagingState>) -> PageFuture + Send + Sync>;

/// Every row of a statement's result, page after page (see the
/// [module docs](self)).
pub struct RowStream<R> {
    fetch: FetchPage,
    /// The current page's rows not yet taken.
    rows: std::vec::IntoIter<Result<R, RowsAccessError>>,
    /// Rows in the current page.
    page_len: usize,
    /// Where the next page starts; `None` after the last page.
    next: Option<PagingState>,
    /// The next page, being fetched.
    pending: Option<JoinHandle<Result<QueryResult, ExecutionError>>>,
    /// Pages requested so far.
    pages: usize,
    /// The tracing ids of the pages received (with tracing on).
    tracing_ids: Vec<uuid::Uuid>,
    done: bool,
}

// Nothing in a row stream is ever pinned in place: rows are moved out.
impl<R> Unpin for RowStream<R> {}

impl<R> std::fmt::Debug for RowStream<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowStream").field("pages", &self.pages).field("done", &self.done).finish_non_exhaustive()
    }
}

impl Session {
    /// Every row of `statement`'s result as a stream of owned rows of type
    /// `R`, fetching the next page in the background (see
    /// [`RowStream`]). Needs a multi-threaded or current-thread tokio
    /// runtime (the prefetch is a task).
    pub fn execute_stream<E, V, R>(&self, statement: E, values: V) -> RowStream<R>
    where
        E: Executable<V> + Send + Sync + 'static,
        V: Send + Sync + 'static,
        R: for<'a> DeserializeRow<'a>,
    {
        let (session, statement, values) = (self.clone(), Arc::new(statement), Arc::new(values));
        let fetch: FetchPage = Arc::new(move |state: Option<PagingState>| -> PageFuture {
            let (session, statement, values) = (session.clone(), statement.clone(), values.clone());
            Box::pin(async move { session.execute_page(&*statement, &*values, state.as_ref()).await })
        });
        RowStream {
            fetch,
            rows: Vec::new().into_iter(),
            page_len: 0,
            next: None,
            pending: None,
            pages: 0,
            tracing_ids: Vec::new(),
            done: false,
        }
    }
}

impl<R: for<'a> DeserializeRow<'a>> RowStream<R> {
    /// Pages requested so far (the first one included).
    pub fn pages_requested(&self) -> usize {
        self.pages
    }

    /// The tracing id of every page received so far, in order, when the
    /// statement has tracing on (the official `QueryPager::tracing_ids`);
    /// each is read with [`Session::tracing_info`].
    pub fn tracing_ids(&self) -> &[uuid::Uuid] {
        &self.tracing_ids
    }

    /// The next row; `None` after the last one or after an error.
    pub async fn next_row(&mut self) -> Option<Result<R, RowStreamError>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    fn request(&mut self, state: Option<PagingState>) {
        self.pages += 1;
        self.pending = Some(tokio::spawn((self.fetch)(state)));
    }

    /// Takes a fetched page: its rows become the current ones.
    fn take_page(&mut self, page: QueryResult) -> Result<(), RowStreamError> {
        self.next = page.paging_state();
        self.tracing_ids.extend(page.tracing_id());
        let rows: Vec<Result<R, RowsAccessError>> = match page.raw_rows() {
            Some(_) => page.rows::<R>()?.map(|r| r.map_err(RowsAccessError::from)).collect(),
            None => Vec::new(),
        };
        self.page_len = rows.len();
        self.rows = rows.into_iter();
        Ok(())
    }

    fn fail(&mut self, e: impl Into<RowStreamError>) -> Poll<Option<Result<R, RowStreamError>>> {
        self.done = true;
        if let Some(p) = self.pending.take() {
            p.abort();
        }
        Poll::Ready(Some(Err(e.into())))
    }
}

impl<R: for<'a> DeserializeRow<'a>> Stream for RowStream<R> {
    type Item = Result<R, RowStreamError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(row) = this.rows.next() {
                // Half of the page taken: fetch the next one meanwhile.
                let taken = this.page_len - this.rows.len();
                if this.pending.is_none() && taken * 2 >= this.page_len {
                    if let Some(state) = this.next.take() {
                        this.request(Some(state));
                    }
                }
                return match row {
                    Ok(r) => Poll::Ready(Some(Ok(r))),
                    Err(e) => this.fail(e),
                };
            }
            match &mut this.pending {
                Some(handle) => match Pin::new(handle).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(joined) => {
                        this.pending = None;
                        let page = match joined {
                            Ok(Ok(page)) => page,
                            Ok(Err(e)) => return this.fail(e),
                            Err(_) => return this.fail(ExecutionError::UnexpectedResponse("the page fetch task died")),
                        };
                        if let Err(e) = this.take_page(page) {
                            return this.fail(e);
                        }
                    }
                },
                None if this.pages == 0 => this.request(None),
                None => match this.next.take() {
                    Some(state) => this.request(Some(state)),
                    None => {
                        this.done = true;
                        return Poll::Ready(None);
                    }
                },
            }
        }
    }
}

impl<R> Drop for RowStream<R> {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            p.abort();
        }
    }
}
