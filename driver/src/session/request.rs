//! One request, from `Session::execute` to its result: its settings
//! resolved once as it starts (`crate::settings`), its parameters and
//! timeout, speculative execution (the first attempt to succeed wins),
//! retries as the policy decides, and each attempt on the connection the
//! plan picked (run by the connection's own execute, `connection/execute.rs`).
//!
//! Two timeouts, because they answer two questions. The request timeout
//! bounds what the caller waits, everything included, as in the official
//! drivers. The attempt timeout bounds one node's silence: an attempt
//! that timed out is a failure like a lost connection, so the retry policy
//! can send an idempotent statement to the next node while the request
//! timeout still has time left, instead of spending all of it on one
//! stalled node.
//!
//! Neither costs a runtime timer: an attempt hands the earlier of its own
//! deadline and the request's to the connection, together with the error
//! to fail with when it passes (`Timeout` when the request's deadline is
//! the earlier, else `AttemptTimeout`), and the connection's sweeper keeps
//! it (see the `connection` module). Speculative executions, which run
//! attempts side by side, keep one timer for the whole request.

use std::borrow::Borrow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use shardwise_protocol::response::ResultMessage;
use shardwise_protocol::types::ser::DynValues;
use tracing::Instrument;

use super::plan::Ask;
use super::Session;
use crate::connection::{execute_observed, Connection, Deadline, Expiry};
use crate::error::ExecutionError;
use crate::events::SessionEvent;
use crate::execute::{Executable, Params, Route};
use crate::observer::{AttemptInfo, RequestId, RequestObserver};
use crate::profile::{ExecutionProfileHandle, SpeculativePolicy};
use crate::result::{PagingState, QueryResult};
use crate::retry::{RequestInfo, RetryDecision};
use crate::settings::{AttemptSettings, Profiles, Settings};
use crate::statement::PreparedStatement;

impl Session {
    /// Runs a statement with its values and returns the first page.
    ///
    /// `statement` is a [`Statement`](crate::statement::Statement), a [`PreparedStatement`] or a
    /// [`crate::statement::Batch`]; `values` is a tuple, slice or derived
    /// struct (for a batch: one such per statement).
    pub fn execute<'a, E: Executable<V>, V: 'a>(
        &'a self,
        statement: &'a E,
        values: V,
    ) -> impl Future<Output = Result<QueryResult, ExecutionError>> + use<'a, E, V> {
        // The request's future itself, not one wrapping it: every layer of
        // futures is one more copy of the whole state per request.
        self.request(statement, values, Page::First)
    }

    /// Runs a statement unpaged: the server returns every row in one
    /// response, as the official driver's `execute_unpaged` and
    /// `query_unpaged` do. For results that fit in memory; anything large is
    /// better read with [`Session::execute_stream`] or
    /// [`Session::execute_pages`].
    pub fn execute_unpaged<'a, E: Executable<V>, V: 'a>(
        &'a self,
        statement: &'a E,
        values: V,
    ) -> impl Future<Output = Result<QueryResult, ExecutionError>> + use<'a, E, V> {
        self.request(statement, values, Page::All)
    }

    /// Runs a statement and returns the page after `paging_state`.
    pub fn execute_page<'a, E: Executable<V>, V>(
        &'a self,
        statement: &'a E,
        values: &'a V,
        paging_state: Option<&'a PagingState>,
    ) -> impl Future<Output = Result<QueryResult, ExecutionError>> + use<'a, E, V> {
        self.request(statement, values, paging_state.map_or(Page::First, Page::After))
    }

    /// One request: `values` owned or borrowed.
    async fn request<E: Executable<V>, V, B: Borrow<V>>(
        &self,
        statement: &E,
        values: B,
        page: Page<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        let values = values.borrow();
        if let Some((text, values)) = statement.to_prepare(values) {
            // Boxed: the prepared request's state stays out of every
            // request's future.
            return Box::pin(self.prepared_first(text, values, page)).await;
        }
        let started = Instant::now();
        let options = statement.options();
        // The request's settings, resolved here and nowhere else.
        // The profile the statement's handle points to now, for the whole
        // request (a statement without one costs nothing here).
        let profile = options.profile.as_ref().map(ExecutionProfileHandle::profile);
        let default = self.inner.config.default_profile_handle.as_ref().map(ExecutionProfileHandle::profile);
        let settings = Settings::of(options, Profiles(profile.as_deref(), default.as_deref()), &self.inner.config);
        let params = Params {
            consistency: settings.consistency,
            serial_consistency: settings.serial_consistency,
            page_size: match page {
                Page::All => None,
                _ => Some(options.page_size.unwrap_or(self.inner.config.page_size)),
            },
            paging_state: match page {
                Page::After(state) => Some(state.as_bytes()),
                _ => None,
            },
            timestamp: match (options.timestamp, &self.inner.config.timestamp_generator) {
                (None, Some(generator)) => Some(generator.next_timestamp()),
                (own, _) => own,
            },
        };
        let kind = self.inner.metrics.started(started, params);
        // A timeout past what the clock can count (`Duration::MAX`) is none.
        let deadline = settings.request_timeout.and_then(|t| Some(RequestDeadline { at: started.checked_add(t)?, t }));
        // Rare paths (speculative executions, a schema change; a USE and a
        // re-prepare further down) are boxed: kept inline, their states
        // would make every request's future larger, and each layer of
        // futures copies it once per request.
        // Only the fields used after an await are kept: the whole of
        // `settings` would be carried in the request's future. The attempts'
        // part is lent to the retry loop (and to each speculative
        // execution), which reads it where it needs it: one copy, here.
        let mut attempts = settings.attempts;
        if let Some(observer) = attempts.observer {
            let request = RequestId::next();
            observer.request_started(request);
            attempts.request = Some(request);
        }
        let speculative =
            settings.speculative.filter(|_| options.idempotent && self.with_state(|state| state.nodes.len() > 1));
        // The instant the last attempt ended, read for its node's latency,
        // also ends the request's: one clock read per request fewer.
        let mut ended = None;
        let result = match speculative {
            None => {
                let timing = Timing { started, ended: Some(&mut ended), deadline };
                let plan = PlanStart { seed: super::plan::next_seed(), offset: 0 };
                self.run_with_retries(statement, values, params, &attempts, plan, timing).await
            }
            Some(spec) => Box::pin(self.speculate(statement, values, params, &attempts, spec, deadline)).await,
        };
        let took = ended.map_or_else(|| started.elapsed(), |at: Instant| at.saturating_duration_since(started));
        // The result is handed on by value and never borrowed here: a local
        // borrowed in an async fn keeps its space in the future's state.
        match self.finished(took, kind, result, attempts.observed()) {
            Ok(done) => done,
            Err(rare) => rare.await,
        }
    }

    /// An unprepared statement with values, prepared (through the session's
    /// cache, with the statement's options) and run as the prepared one.
    async fn prepared_first(
        &self,
        statement: &crate::statement::Statement,
        values: &(dyn DynValues + Sync),
        page: Page<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        let prepared = self.prepare(statement.clone()).await?;
        self.request::<_, &(dyn DynValues + Sync), _>(&prepared, values, page).await
    }

    /// Counts the request (and tells the observer), and returns its result,
    /// or the rare path's boxed future after a schema change. Here, not in
    /// `request`: a result borrowed there would keep its space in every
    /// request's future.
    fn finished(
        &self,
        took: std::time::Duration,
        kind: crate::metrics::RequestKind,
        result: Result<QueryResult, ExecutionError>,
        observed: Option<(&Arc<dyn RequestObserver>, RequestId)>,
    ) -> Result<Result<QueryResult, ExecutionError>, RarePath<'_>> {
        self.inner.metrics.request(took, result.is_ok(), kind);
        if let Some((observer, request)) = observed {
            observer.request_finished(request, result.as_ref().map(drop), took);
        }
        match result {
            Ok(r) if r.schema_change().is_some() => Err(self.schema_changed(r)),
            other => Ok(other),
        }
    }

    /// After a schema change: tablets forgotten, schema agreement awaited
    /// (when configured), the schema refreshed. Boxed, and made here (see
    /// `keyspace_set`).
    fn schema_changed(&self, result: QueryResult) -> RarePath<'_> {
        Box::pin(async move {
            if let Some(change) = result.schema_change() {
                self.forget_tablets(change);
                if self.inner.config.await_schema_agreement {
                    self.await_schema_agreement().await?;
                }
                self.refresh_schema().await;
            }
            Ok(result)
        })
    }

    /// Speculative execution: the first attempt to succeed wins, within one
    /// timer for the whole request.
    async fn speculate<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        params: Params<'_>,
        attempts_settings: &AttemptSettings<'_>,
        spec: SpeculativePolicy,
        deadline: Option<RequestDeadline>,
    ) -> Result<QueryResult, ExecutionError> {
        // One plan for every run of attempts, each starting further along
        // it: with a seed of its own, a run's plan is another order, whose
        // next position may well be the node the first run waits on.
        let seed = super::plan::next_seed();
        let delay = match spec.percentile {
            // Out of range, or nothing measured yet: the fixed delay.
            Some(p) => self.inner.metrics.latency_at_percentile(p, Instant::now()).unwrap_or(spec.delay),
            None => spec.delay,
        };
        let speculate = async {
            let mut attempts = vec![Some(Box::pin(self.run_with_retries(
                statement,
                values,
                params,
                attempts_settings,
                PlanStart { seed, offset: 0 },
                Timing::now(),
            )))];
            let mut last_error = None;
            loop {
                let can_add = attempts.len() <= spec.max_extra;
                let add = {
                    let first = first_ok(&mut attempts, &mut last_error);
                    let delay = tokio::time::sleep(delay);
                    tokio::select! {
                        r = first => return r,
                        _ = delay, if can_add => true,
                    }
                };
                if add {
                    let offset = attempts.len();
                    attempts.push(Some(Box::pin(self.run_with_retries(
                        statement,
                        values,
                        params,
                        attempts_settings,
                        PlanStart { seed, offset },
                        Timing::now(),
                    ))));
                }
            }
        };
        match deadline {
            Some(d) => tokio::time::timeout_at(d.at.into(), speculate).await.unwrap_or_else(|_| {
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
        mut params: Params<'_>,
        settings: &AttemptSettings<'_>,
        plan: PlanStart,
        timing: Timing<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        let Timing { started, mut ended, deadline } = timing;
        let options = statement.options();
        let idempotent = options.idempotent;
        let mut retries = 0;
        let mut retry_session = None;
        let route = statement.route(values);
        let (mut position, mut node, mut conn) = self.with_state(|state| {
            let ask =
                Ask { consistency: params.consistency, idempotent, policy: settings.load_balancing.map(|p| &**p) };
            self.pick(state, plan.seed, plan.offset, route, Session::penalty(state, settings.latency_awareness), ask)
        })?;
        let (result, conn) = loop {
            // The first attempt leaves as the request starts: one clock read fewer.
            let sent = if retries == 0 { started } else { Instant::now() };
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
            // The earlier of the attempt's deadline and the request's, with
            // the error that names it.
            let attempt_end = settings.attempt_timeout.and_then(|after| Some((after, sent.checked_add(after)?)));
            let until = match (attempt_end, deadline) {
                (Some((after, at)), request) if request.is_none_or(|r| at < r.at) => Some(Deadline {
                    at,
                    expiry: Expiry::Attempt { after, node: node.addr, shard: conn.sharding().map(|_| conn.shard()) },
                }),
                (_, Some(r)) => Some(Deadline { at: r.at, expiry: Expiry::Request(r.t) }),
                (_, None) => None,
            };
            if let Some((o, request)) = settings.observed() {
                o.attempt_started(&attempt_info(
                    request,
                    node.addr,
                    &conn,
                    retries,
                    plan.offset,
                    params.consistency,
                    route,
                ));
            }
            let reprepared = |p: &PreparedStatement| self.reprepared(&conn, p);
            let block = if conn.uses_tablets_routing_v2() { self.tablet_version_block(route, plan.seed) } else { None };
            let attempt = execute_observed(&conn, statement, values, params, until.as_ref(), block, reprepared);
            // Instrumented only when a subscriber listens: the wrapper is one
            // more copy of the attempt's future per request.
            let result = if span.is_disabled() { attempt.await } else { attempt.instrument(span).await };
            match &result {
                Err(error @ ExecutionError::Timeout(_)) => {
                    self.inner.metrics.timeout();
                    if let Some((o, request)) = settings.observed() {
                        o.attempt_failed(
                            &attempt_info(request, node.addr, &conn, retries, plan.offset, params.consistency, route),
                            error,
                            sent.elapsed(),
                            None,
                        );
                    }
                    return result;
                }
                Err(ExecutionError::AttemptTimeout { .. }) => self.inner.metrics.attempt_timeout(),
                _ => {}
            }
            // An answer was read off the connection: when the reader read it
            // serves as the attempt's end, for a load instead of a clock read.
            let now = if result.is_ok() { conn.answered_at() } else { Instant::now() };
            if let Some(ended) = ended.as_deref_mut() {
                *ended = Some(now);
            }
            let took = now.saturating_duration_since(sent);
            node.latency.record(took);
            if let Some(awareness) = settings.latency_awareness {
                // Only kept where plans read it: a shared word per node, and a
                // clock read, that no request pays for otherwise.
                let took_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
                node.average.record(super::plan::now_ns(), took_ns, awareness.scale);
            }
            let error = match result {
                Ok(mut r) => {
                    // The node by its pool's address: a connection through
                    // the shard-aware port has another port.
                    r.coordinator = r.coordinator.on_node(node.addr);
                    if let Some(policy) = settings.load_balancing {
                        let request = Session::routing_info(route, params.consistency, idempotent, plan.seed);
                        self.tell_policy(&**policy, &request, &node, took, None);
                    }
                    if let Some((o, request)) = settings.observed() {
                        o.attempt_succeeded(
                            &attempt_info(request, node.addr, &conn, retries, plan.offset, params.consistency, route),
                            took,
                        );
                    }
                    if let (Some(tablet), Some(route)) = (r.extras.as_mut().and_then(|e| e.tablet.take()), route) {
                        self.inner.tablets.learn(route.keyspace, route.table, tablet.into());
                    }
                    break (r, conn);
                }
                // Named by the node's address, as results and observers name it.
                Err(e) => e.answered_by(node.addr, conn.sharding().map(|_| conn.shard())),
            };
            self.note_failure(&node, &conn);
            if let Some(policy) = settings.load_balancing {
                let request = Session::routing_info(route, params.consistency, idempotent, plan.seed);
                self.tell_policy(&**policy, &request, &node, took, Some(&error));
            }
            // The request's retry session, made at its first failure.
            let session = retry_session.get_or_insert_with(|| settings.retry_policy.new_session());
            let request = RequestInfo { error: &error, idempotent, consistency: params.consistency, attempt: retries };
            let decision = session.decide(request);
            if let Some((o, request)) = settings.observed() {
                o.attempt_failed(
                    &attempt_info(request, node.addr, &conn, retries, plan.offset, params.consistency, route),
                    &error,
                    took,
                    Some(decision),
                );
            }
            if let RetryDecision::RetrySameNode(Some(c)) | RetryDecision::RetryNextNode(Some(c)) = decision {
                params.consistency = c;
            }
            match decision {
                RetryDecision::DontRetry => return Err(error),
                RetryDecision::IgnoreWriteError => return Ok(QueryResult::void(conn.coordinator().on_node(node.addr))),
                RetryDecision::RetrySameNode(_) => {
                    if let Some(c) = node.connection(plan.seed) {
                        conn = c;
                    }
                }
                RetryDecision::RetryNextNode(_) => {
                    // The view as it is now: a retry may follow a topology change.
                    let state = self.state();
                    let penalty = Session::penalty(&state, settings.latency_awareness);
                    let ask = Ask {
                        consistency: params.consistency,
                        idempotent,
                        policy: settings.load_balancing.map(|p| &**p),
                    };
                    (position, node, conn) =
                        self.pick(&state, plan.seed, position + 1, route, penalty, ask).map_err(|_| error.clone())?;
                }
            }
            retries += 1;
            self.inner.metrics.retry();
            tracing::debug!(%error, retries, "retrying");
        };
        // Out of the loop, so that the rare path's await does not keep the
        // attempt's result alive in every request's future.
        if let ResultMessage::SetKeyspace(_) = result.message() {
            return Ok(self.keyspace_set(result, conn).await);
        }
        Ok(result)
    }

    /// Reports a statement prepared again on `conn`'s node.
    fn reprepared(&self, conn: &Connection, p: &PreparedStatement) {
        tracing::info!(addr = %conn.addr(), text = p.text(), "statement re-prepared");
        self.inner.metrics.reprepare();
        self.inner.emit(SessionEvent::StatementReprepared {
            node: conn.addr(),
            statement: p.text().to_owned(),
            id: p.id().to_vec(),
        });
    }

    /// After a `USE` answered on `conn`: the other connections follow.
    /// Boxed, and made here: a rare path (see `request`) whose state and
    /// result stay out of every request's future.
    fn keyspace_set(
        &self,
        result: QueryResult,
        conn: Connection,
    ) -> Pin<Box<dyn Future<Output = QueryResult> + Send + '_>> {
        Box::pin(async move {
            if let ResultMessage::SetKeyspace(ks) = result.message() {
                self.keyspace_changed(ks, &conn).await;
            }
            result
        })
    }
}

/// What an observer is told of an attempt: made for each call from what the
/// retry loop keeps anyway, so that no request's future carries it across
/// the attempt.
fn attempt_info<'r>(
    request: RequestId,
    node: std::net::SocketAddr,
    conn: &Connection,
    retry: u32,
    speculative: usize,
    consistency: shardwise_protocol::consistency::Consistency,
    route: Option<Route<'r>>,
) -> AttemptInfo<'r> {
    AttemptInfo {
        request,
        node,
        shard: conn.sharding().map(|_| conn.shard()),
        retry,
        speculative,
        consistency,
        table: route.map(|r| (r.keyspace, r.table)),
    }
}

/// Which part of a result a request asks for.
#[derive(Debug, Clone, Copy)]
enum Page<'a> {
    /// The first page.
    First,
    /// The page after this paging state.
    After(&'a PagingState),
    /// Every row, unpaged.
    All,
}

/// A rare path's boxed future (see `request`).
type RarePath<'a> = Pin<Box<dyn Future<Output = Result<QueryResult, ExecutionError>> + Send + 'a>>;

/// When a request must be answered by, and its timeout (for the error).
#[derive(Debug, Clone, Copy)]
struct RequestDeadline {
    at: Instant,
    t: std::time::Duration,
}

/// Where a run of attempts starts in its request's plan: the request's
/// seed (which orders the plan) and the position of its first node (0 for
/// the request's own run, `n` for its `n`th speculative execution).
#[derive(Debug, Clone, Copy)]
struct PlanStart {
    seed: usize,
    offset: usize,
}

/// When a run of attempts started, where it writes when its last attempt
/// ended (the instant its node's latency was read at, which the request's
/// own latency reuses instead of reading the clock again), and the
/// request's deadline it hands to each attempt.
struct Timing<'a> {
    started: Instant,
    ended: Option<&'a mut Option<Instant>>,
    deadline: Option<RequestDeadline>,
}

impl Timing<'_> {
    /// Starting now, its end not asked for, no deadline of its own (a
    /// speculative attempt: the request keeps one timer for all of them).
    fn now() -> Self {
        Timing { started: Instant::now(), ended: None, deadline: None }
    }
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

#[cfg(test)]
mod tests {
    use crate::statement::PreparedStatement;
    use crate::Session;

    /// The size of the future `f` makes, without making it.
    fn future_size<F, Fut>(_: F) -> usize
    where
        F: FnOnce(&'static Session, &'static PreparedStatement) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// A tripwire: each layer of futures under `execute` copies the whole
    /// state once per request, and each layer returns the result, so
    /// neither must grow unnoticed. The future is 1,264 bytes in a debug
    /// build here: 1,224 before the attempt noted the result columns its
    /// request was built against (`SentSpecs`, kept across the wait for
    /// the answer: rows without metadata are read with them, not with
    /// ones another request cached meanwhile); 1,200 before tablets routing v2's version block (an
    /// argument of the attempt and of the connection's write, which keeps
    /// it until a stream id is free) and the policy's callbacks; 1,192 before the plan's seed was handed to each run of
    /// attempts (speculative executions walk the request's plan, not one
    /// of their own); 1,184 before the request's id for its observer (an
    /// `Option<RequestId>` of 8 bytes among the attempts' settings); 1,176 before the load-balancing policy of a profile (a
    /// reference among the attempts' settings, which the request keeps);
    /// 1,160 before the profile handles (the profiles the
    /// statement's and the session's default handle point to, held for the
    /// request: the settings borrow from them); 1,152 before the settings were resolved once per request
    /// (the retry loop resolved them again; it now borrows the request's);
    /// 1,112 before a retry session per request, the observer
    /// and unpaged requests (their values kept across the attempt; an
    /// observer call that borrowed the result in `request` cost 200 more,
    /// hence `finished`); 1,232 before the sweeper also kept the deadline of a
    /// request waiting for room (its timer was inline); 2,592 before the
    /// rare paths were boxed, the request timers moved to the connection
    /// and the wrapper layers went; 1,768
    /// before the wait for a stream id and the re-prepare were boxed, the
    /// tracing span's wrapper was made only when a subscriber listens, and
    /// the result stopped being borrowed across an await. The result is
    /// 208 bytes: 168 before it recorded its coordinator inline (a
    /// `SocketAddr` and the shard, 36 bytes, padded to 40; boxed it would
    /// be an allocation per request, and few results carry extras to share
    /// a box with); 320 before a prepared answer and the rare extras were
    /// boxed.
    #[test]
    fn the_request_future_stays_small() {
        let write = future_size(|s, p| s.execute(p, (1_i64, 2_i64, "text")));
        let result = std::mem::size_of::<crate::QueryResult>();
        eprintln!("execute: {write} bytes, result: {result} bytes");
        assert!(write <= 1_264, "the request future grew to {write} bytes");
        assert!(result <= 208, "the result grew to {result} bytes");
    }
}
