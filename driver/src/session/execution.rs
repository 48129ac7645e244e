//! Running a statement: the request's parameters and timeout, speculative
//! execution (the first attempt to succeed wins), retries as the policy
//! decides, and a single attempt on one connection.
//!
//! Two timeouts, because they answer two questions. The request timeout
//! bounds what the caller waits, everything included, as in the official
//! drivers. The attempt timeout bounds one node's silence: an attempt
//! that timed out is a failure like a lost connection, so the retry policy
//! can send an idempotent statement to the next node while the request
//! timeout still has time left, instead of spending all of it on one
//! stalled node.
//!
//! Both are kept with one runtime timer per attempt, not two: each attempt
//! waits until the earlier of its own deadline and the request's, and which
//! of the two passed decides the error. (Speculative executions, which run
//! attempts side by side, keep one timer for the whole request.)

use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::time::Instant as TokioInstant;

use shardwise_protocol::response::ResultMessage;
use tracing::Instrument;

use super::profile::Settings;
use super::Session;
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::events::SessionEvent;
use crate::execute::{Executable, Params};
use crate::result::{PagingState, QueryResult};
use crate::retry::RetryDecision;
use crate::statement::PreparedStatement;

impl Session {
    /// Runs a statement with its values and returns the first page.
    ///
    /// `statement` is a [`Statement`](crate::statement::Statement), a [`PreparedStatement`] or a
    /// [`crate::statement::Batch`]; `values` is a tuple, slice or derived
    /// struct (for a batch: one such per statement).
    pub async fn execute<E: Executable<V>, V>(&self, statement: &E, values: V) -> Result<QueryResult, ExecutionError> {
        self.execute_page(statement, &values, None).await
    }

    /// Runs a statement and returns the page after `paging_state`.
    pub async fn execute_page<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        paging_state: Option<&PagingState>,
    ) -> Result<QueryResult, ExecutionError> {
        let started = Instant::now();
        let options = statement.options();
        let settings = Settings::of(options, &self.inner.config);
        let params = Params {
            consistency: settings.consistency,
            serial_consistency: settings.serial_consistency,
            page_size: Some(options.page_size.unwrap_or(self.inner.config.page_size)),
            paging_state: paging_state.map(PagingState::as_bytes),
            timestamp: options.timestamp,
        };
        let deadline = settings.request_timeout.map(|t| RequestDeadline { at: TokioInstant::from_std(started) + t, t });
        let result = self.run(statement, values, params, deadline).await;
        self.inner.metrics.request(started.elapsed(), result.is_ok());
        let result = result?;
        // Rare paths (here a schema change; a USE and a re-prepare further
        // down) are boxed: kept inline, their states would make every
        // request's future larger, and a future is moved several times as
        // it is wrapped and spawned.
        if let Some(change) = result.schema_change() {
            self.forget_tablets(change);
            if self.inner.config.await_schema_agreement {
                Box::pin(self.await_schema_agreement()).await?;
            }
            Box::pin(self.refresh_schema()).await;
        }
        Ok(result)
    }

    async fn run<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        params: Params<'_>,
        deadline: Option<RequestDeadline>,
    ) -> Result<QueryResult, ExecutionError> {
        let options = statement.options();
        let idempotent = options.idempotent;
        let speculative = Settings::of(options, &self.inner.config).speculative;
        let speculative = speculative.filter(|_| idempotent && self.state().nodes.len() > 1);
        let Some(spec) = speculative else {
            return self.run_with_retries(statement, values, params, 0, deadline).await;
        };
        // Speculative execution: the first attempt to succeed wins, within
        // one timer for the whole request.
        let speculate = async {
            let mut attempts = vec![Some(Box::pin(self.run_with_retries(statement, values, params, 0, None)))];
            let mut last_error = None;
            loop {
                let can_add = attempts.len() <= spec.max_extra;
                let add = {
                    let first = first_ok(&mut attempts, &mut last_error);
                    let delay = tokio::time::sleep(spec.delay);
                    tokio::select! {
                        r = first => return r,
                        _ = delay, if can_add => true,
                    }
                };
                if add {
                    let offset = attempts.len();
                    attempts.push(Some(Box::pin(self.run_with_retries(statement, values, params, offset, None))));
                }
            }
        };
        match deadline {
            Some(d) => tokio::time::timeout_at(d.at, speculate).await.unwrap_or_else(|_| {
                self.inner.metrics.timeout();
                Err(ExecutionError::Timeout(d.t))
            }),
            None => speculate.await,
        }
    }

    async fn run_with_retries<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        params: Params<'_>,
        node_offset: usize,
        deadline: Option<RequestDeadline>,
    ) -> Result<QueryResult, ExecutionError> {
        let options = statement.options();
        let idempotent = options.idempotent;
        let Settings { attempt_timeout, retry_policy, latency_awareness, .. } =
            Settings::of(options, &self.inner.config);
        let mut retries = 0;
        let seed = self.inner.next_node.fetch_add(1, Ordering::Relaxed);
        let route = statement.route(values);
        let state = self.state();
        let penalty = Session::penalty(&state, latency_awareness);
        let (mut position, mut node, mut conn) = self.pick(&state, seed, node_offset, route, penalty)?;
        loop {
            let sent = Instant::now();
            // One span per attempt: nothing is formatted or allocated unless a
            // subscriber listens at DEBUG.
            let span = tracing::debug_span!(
                "request",
                keyspace = route.map(|r| r.keyspace),
                table = route.map(|r| r.table),
                node = %conn.addr(),
                shard = conn.shard(),
                attempt = retries,
            );
            let attempt = self.attempt(&conn, statement, values, params).instrument(span);
            // One timer: the earlier of the attempt's deadline and the request's.
            let attempt_deadline = attempt_timeout.map(|t| TokioInstant::from_std(sent) + t);
            let wait_until = [attempt_deadline, deadline.map(|r| r.at)].into_iter().flatten().min();
            let result = match wait_until {
                Some(at) => match tokio::time::timeout_at(at, attempt).await {
                    Ok(r) => r,
                    Err(_) => match deadline.filter(|r| r.at <= at) {
                        Some(r) => {
                            self.inner.metrics.timeout();
                            return Err(ExecutionError::Timeout(r.t));
                        }
                        None => {
                            self.inner.metrics.attempt_timeout();
                            Err(ExecutionError::AttemptTimeout {
                                after: attempt_timeout.unwrap_or_default(),
                                node: conn.addr(),
                                shard: conn.sharding().map(|_| conn.shard()),
                            })
                        }
                    },
                },
                None => attempt.await,
            };
            let took = sent.elapsed();
            node.latency.record(took);
            let scale = latency_awareness.unwrap_or_default().scale;
            node.average.record(super::plan::now_ns(), u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), scale);
            let error = match result {
                Ok(mut r) => {
                    if let (Some(tablet), Some(route)) = (r.tablet.take(), route) {
                        self.inner.tablets.learn(route.keyspace, route.table, tablet.into());
                    }
                    return Ok(r);
                }
                Err(e) => e.answered_by(conn.addr(), conn.sharding().map(|_| conn.shard())),
            };
            self.note_failure(&node, &conn);
            match retry_policy.decide(&error, retries, idempotent) {
                RetryDecision::DontRetry => return Err(error),
                RetryDecision::RetrySameNode => {
                    if let Some(c) = node.connection(seed) {
                        conn = c;
                    }
                }
                RetryDecision::RetryNextNode => {
                    (position, node, conn) =
                        self.pick(&state, seed, position + 1, route, penalty).map_err(|_| error.clone())?;
                }
            }
            retries += 1;
            self.inner.metrics.retry();
            tracing::debug!(%error, retries, "retrying");
        }
    }

    async fn attempt<E: Executable<V>, V>(
        &self,
        conn: &Connection,
        statement: &E,
        values: &V,
        params: Params<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        let reprepared = |p: &PreparedStatement| {
            tracing::info!(addr = %conn.addr(), text = p.text(), "statement re-prepared");
            self.inner.emit(SessionEvent::StatementReprepared {
                node: conn.addr(),
                statement: p.text().to_owned(),
                id: p.id().to_vec(),
            });
        };
        let result = crate::execute::execute_observed(conn, statement, values, params, reprepared).await?;
        if let ResultMessage::SetKeyspace(ks) = result.message() {
            // Boxed: a rare path (see `execute_page`).
            Box::pin(self.keyspace_changed(ks, conn)).await;
        }
        Ok(result)
    }
}

/// When a request must be answered by, and its timeout (for the error).
#[derive(Debug, Clone, Copy)]
struct RequestDeadline {
    at: TokioInstant,
    t: std::time::Duration,
}

/// Polls every running attempt; resolves with the first success, or the
/// last error once all failed. Finished attempts are removed (set to `None`)
/// so they are never polled again.
async fn first_ok<F>(
    attempts: &mut [Option<std::pin::Pin<Box<F>>>],
    last_error: &mut Option<ExecutionError>,
) -> Result<QueryResult, ExecutionError>
where
    F: std::future::Future<Output = Result<QueryResult, ExecutionError>>,
{
    std::future::poll_fn(|cx| {
        for slot in attempts.iter_mut() {
            let Some(attempt) = slot else { continue };
            if let std::task::Poll::Ready(r) = attempt.as_mut().poll(cx) {
                *slot = None;
                match r {
                    Ok(v) => return std::task::Poll::Ready(Ok(v)),
                    Err(e) => *last_error = Some(e),
                }
            }
        }
        if attempts.iter().all(Option::is_none) {
            return std::task::Poll::Ready(Err(last_error.take().unwrap_or(ExecutionError::NoConnection)));
        }
        std::task::Poll::Pending
    })
    .await
}
