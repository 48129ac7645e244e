//! The pager: a statement's result fetched one page at a time, each request
//! carrying the paging state the previous page returned.

use shardwise_protocol::types::de::DeserializeRow;

use super::Session;
use crate::error::ExecutionError;
use crate::execute::Executable;
use crate::result::{PagingState, QueryResult};

impl Session {
    /// Iterates over every page of a statement's result. (The official
    /// driver's `execute_iter` yields rows; here that is
    /// [`Session::execute_stream`], and this one is named for its pages.)
    pub fn execute_pages<E: Executable<V>, V>(&self, statement: E, values: V) -> Pager<E, V> {
        Pager { session: self.clone(), statement, values, state: None, done: false }
    }
}

/// Pages of a statement's result, fetched one at a time.
pub struct Pager<E, V> {
    session: Session,
    statement: E,
    values: V,
    state: Option<PagingState>,
    done: bool,
}

impl<E: Executable<V>, V> Pager<E, V> {
    /// The next page, or `None` after the last one.
    pub async fn next_page(&mut self) -> Option<Result<QueryResult, ExecutionError>> {
        if self.done {
            return None;
        }
        let result = self.session.execute_page(&self.statement, &self.values, self.state.as_ref()).await;
        match &result {
            Ok(r) => {
                self.state = r.paging_state();
                self.done = self.state.is_none();
            }
            Err(_) => self.done = true,
        }
        Some(result)
    }

    /// All remaining rows as owned values of type `R`, page by page.
    pub async fn collect_rows<R>(&mut self) -> Result<Vec<R>, ExecutionError>
    where
        R: for<'a> DeserializeRow<'a>,
    {
        let mut out = Vec::new();
        while let Some(page) = self.next_page().await {
            let page = page?;
            for row in page.rows::<R>().map_err(|_| ExecutionError::UnexpectedResponse("rows of another type"))? {
                out.push(row.map_err(|_| ExecutionError::UnexpectedResponse("undecodable row"))?);
            }
        }
        Ok(out)
    }
}
