//! A worker: one OS thread with a current-thread runtime, reading the
//! windows of the groups the planner gives it.
//!
//! Several windows, each of another group, have their first page
//! requested at once (as many as the worker's `limit` finds useful, or
//! [`windows_in_flight`](super::CdcReaderBuilder::windows_in_flight)): the shards keep serving while the worker hands the rows of an
//! arrived page to its consumer. Rows are still consumed one window at a
//! time, on this thread, in the order the first pages arrive. A window
//! bigger than a page has its next page requested before the rows of the
//! current one are consumed. A window whose first page is in flight is a
//! window being read for the planner, so checkpoints and handovers see it
//! as such.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use shardwise::execute::Params;
use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::types::CqlTimestamp;
use shardwise::{Connection, ExecutionError, PagingState, PreparedStatement, QueryResult};
use tokio::sync::futures::Notified;

use super::limit::InFlightLimit;
use super::shards::regroup;
use super::{CdcError, Shared};
use crate::consumer::{Consumer, ConsumerError};
use crate::generation::GenerationError;
use crate::plan::{Action, GroupId, ReadWindow};
use crate::row::{LogPage, LogSchema, RowIndex};
use crate::stream::StreamId;
use crate::time::Millis;

/// A (node, shard): where a group's streams are read.
type Place = (SocketAddr, u16);

/// A later page of a window, requested while the one before is consumed.
type PageFetch = Pin<Box<dyn Future<Output = Result<QueryResult, CdcError>>>>;

/// The first page of a window, requested: the window, where it is read,
/// and the answer.
type FirstPage = Pin<Box<dyn Future<Output = (ReadWindow, Place, Result<QueryResult, CdcError>)>>>;

struct Route {
    conn: Connection,
    prepared: PreparedStatement,
    schema: Option<LogSchema>,
}

pub(super) struct Worker {
    index: usize,
    shared: Arc<Shared>,
    /// A consumer per group of a generation (a group id is reused by the
    /// next generation), with the epoch of the hold it was made for: a
    /// group taken again gets a new one, so nothing a consumer buffered
    /// under an earlier hold comes out later.
    consumers: HashMap<(Millis, GroupId), (u64, Box<dyn Consumer>)>,
    routes: HashMap<Place, Route>,
    rows: RowIndex,
    failures: HashMap<GroupId, u32>,
    /// Consecutive timeouts per group.
    timeouts: HashMap<GroupId, u32>,
    /// Per stream, how many rows a window whose read failed on a later page
    /// already handed to the consumer: the retry reads the window again
    /// from its first page and skips that many rows of each stream (a
    /// stream's rows come in clustering order, `cdc$time` then batch
    /// sequence number), so a change is never delivered twice. O(streams),
    /// whatever the window's size. Only a retry of the very same window
    /// (generation, start, hold) skips; any other read of the group drops
    /// the counts and the consumer that saw those rows.
    delivered: HashMap<GroupId, Attempt>,
    /// The windows whose first page is requested, with their group and
    /// when they were.
    in_flight: Vec<(GroupId, Instant, FirstPage)>,
    /// How many may be.
    limit: InFlightLimit,
    /// Checkpoint saves failed in a row.
    save_failures: u32,
}

/// Checkpoint saves that may fail in a row before the reader stops.
const MAX_SAVE_FAILURES: u32 = 5;

/// What a failed attempt at a window delivered.
struct Attempt {
    generation: Millis,
    from: Millis,
    epoch: u64,
    counts: HashMap<StreamId, usize>,
}

impl Attempt {
    fn of(&self, window: &ReadWindow) -> bool {
        (self.generation, self.from, self.epoch) == (window.generation, window.from, window.epoch)
    }
}

/// Sleeps for `d`, or until the reader is woken or stopped after `woken`
/// was taken (`signal.rs`).
async fn sleep(woken: Notified<'_>, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = woken => {}
    }
}

/// How a page is asked for.
#[derive(Clone, Copy)]
struct PageQuery {
    page_size: i32,
    consistency: Consistency,
    timeout: Duration,
}

impl PageQuery {
    /// One page of `window` (the first, or the one `paging` points at),
    /// within the query timeout.
    async fn fetch(
        self,
        conn: &Connection,
        prepared: &PreparedStatement,
        window: &ReadWindow,
        paging: Option<&PagingState>,
    ) -> Result<QueryResult, CdcError> {
        let values = (window.streams.streams(), CqlTimestamp::from(window.from), CqlTimestamp::from(window.to));
        let params = Params {
            page_size: Some(self.page_size),
            paging_state: paging.map(PagingState::as_bytes),
            ..Params::new(self.consistency)
        };
        match tokio::time::timeout(self.timeout, conn.execute(prepared, &values, params)).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(ExecutionError::Timeout(self.timeout).into()),
        }
    }
}

impl Worker {
    pub(super) fn new(index: usize, shared: Arc<Shared>) -> Worker {
        Worker {
            index,
            consumers: HashMap::new(),
            routes: HashMap::new(),
            rows: RowIndex::default(),
            failures: HashMap::new(),
            timeouts: HashMap::new(),
            delivered: HashMap::new(),
            in_flight: Vec::new(),
            limit: shared.windows_in_flight.limit(),
            save_failures: 0,
            shared,
        }
    }

    /// The planner's time: the earlier of the local clock and the
    /// cluster's (see `clock`).
    fn now(&self) -> Millis {
        self.shared.clock.now()
    }

    fn page_query(&self) -> PageQuery {
        PageQuery {
            page_size: self.shared.page_size,
            consistency: self.shared.consistency,
            timeout: self.shared.query_timeout,
        }
    }

    pub(super) async fn run(mut self) -> Result<(), CdcError> {
        let result = self.serve().await;
        // Stopped (or failed) with first pages in flight: those windows are
        // not read, and are read again by whoever reads their group next.
        for (group, ..) in std::mem::take(&mut self.in_flight) {
            let _ = self.shared.planner().window_failed(group, self.now());
        }
        result
    }

    async fn serve(&mut self) -> Result<(), CdcError> {
        let shared = Arc::clone(&self.shared);
        // Taken before the stop flag and the planner are read: a stop, or a
        // wake-up (work for this worker), after that ends the sleep at once.
        while let Some(woken) = shared.stopping.ticket() {
            let action = if self.in_flight.len() < self.limit.get() {
                self.shared.planner().poll(self.index, self.now())
            } else {
                // As many windows in flight as allowed: wait for one.
                Action::Idle
            };
            match action {
                Action::Read(window) if !self.shared.holds(window.streams.key()) => self.lost(&window),
                Action::Read(window) => self.request(window).await?,
                Action::Sleep(until) if !self.in_flight.is_empty() => {
                    self.wait_in_flight(woken, until.duration_since(self.now())).await?;
                }
                Action::Idle if !self.in_flight.is_empty() => {
                    self.wait_in_flight(woken, Duration::from_millis(50)).await?
                }
                Action::FetchFirstGeneration { at } => {
                    self.shared.clock.refresh(&self.shared.session).await;
                    let found = self.shared.source.first_generation(at).await;
                    self.generation_found(found).await?;
                }
                Action::FetchNextGeneration { after } => {
                    self.shared.clock.refresh(&self.shared.session).await;
                    let found = self.shared.source.next_generation_after(after).await;
                    self.generation_found(found).await?;
                }
                Action::SaveCheckpoint => {
                    // Counted before the progress is taken (see `saves`).
                    let shared = self.shared.clone();
                    let _save = shared.saves.begin();
                    let cp = self.shared.planner().take_checkpoint();
                    if let Some(cp) = cp {
                        self.save(cp).await?;
                    }
                }
                // Idle: the cluster's clock is read again when its reading
                // is due (at once otherwise), not only before generation
                // fetches, which may be far apart.
                Action::Sleep(until) => {
                    self.shared.clock.refresh(&self.shared.session).await;
                    let d = until.duration_since(self.now());
                    sleep(woken, d.max(Duration::from_millis(1))).await;
                }
                Action::Idle => {
                    self.shared.clock.refresh(&self.shared.session).await;
                    sleep(woken, Duration::from_millis(50)).await
                }
                Action::Finished => {
                    self.shared.stopping.wake();
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Requests the first page of `window` (opening its route first if
    /// needed); a window that cannot be requested fails as a read would.
    async fn request(&mut self, window: ReadWindow) -> Result<(), CdcError> {
        let place = match self.route(window.streams.key()).await {
            Ok(place) => place,
            Err(e) => return self.finished(&window, Err(e)),
        };
        let Some(route) = self.routes.get(&place) else { return self.finished(&window, Err(CdcError::NoNodes)) };
        let (conn, prepared, query) = (route.conn.clone(), route.prepared.clone(), self.page_query());
        let (group, asked) = (window.group, Instant::now());
        let mut first: FirstPage = Box::pin(async move {
            let result = query.fetch(&conn, &prepared, &window, None).await;
            (window, place, result)
        });
        // One poll queues the request on the connection, so it leaves with
        // the next write whatever the worker does meanwhile.
        match std::future::poll_fn(|cx| Poll::Ready(first.as_mut().poll(cx))).await {
            Poll::Ready((window, place, page)) => {
                let result = self.read(&window, place, page).await;
                self.finished(&window, result)
            }
            Poll::Pending => {
                self.in_flight.push((group, asked, first));
                if self.in_flight.len() >= self.limit.get() {
                    self.limit.reached();
                }
                Ok(())
            }
        }
    }

    /// Waits at most `d` (or until `woken` is) for a first page in flight
    /// to arrive, and reads that window.
    async fn wait_in_flight(&mut self, woken: Notified<'_>, d: Duration) -> Result<(), CdcError> {
        let arrived = {
            let in_flight = &mut self.in_flight;
            let next = std::future::poll_fn(|cx| {
                for i in 0..in_flight.len() {
                    if let Poll::Ready(out) = in_flight[i].2.as_mut().poll(cx) {
                        let (_, asked, _) = in_flight.swap_remove(i);
                        return Poll::Ready((asked, out));
                    }
                }
                Poll::Pending
            });
            tokio::select! {
                out = next => Some(out),
                _ = sleep(woken, d.max(Duration::from_millis(1))) => None,
            }
        };
        if let Some((asked, (window, place, first))) = arrived {
            let now = Instant::now();
            self.limit.answered(now, now.saturating_duration_since(asked));
            let result = self.read(&window, place, first).await;
            self.finished(&window, result)?;
        }
        Ok(())
    }

    /// Saves `checkpoint`. A failed save (the store cut off for a while) is
    /// made again later ([`crate::Planner::save_failed`]) while the reader
    /// reads on; only [`MAX_SAVE_FAILURES`] failures in a row stop it.
    async fn save(&mut self, checkpoint: crate::checkpoint::Checkpoint) -> Result<(), CdcError> {
        match self.shared.save(checkpoint.clone()).await {
            Ok(()) => {
                self.save_failures = 0;
                Ok(())
            }
            Err(e) if self.save_failures + 1 < MAX_SAVE_FAILURES => {
                self.save_failures += 1;
                tracing::warn!(error = %e, failures = self.save_failures, "saving a CDC checkpoint failed; it is saved again later");
                self.shared.planner().save_failed(checkpoint);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The lease of `window`'s group is no longer surely held: the window
    /// is not read (or its end not handed to the consumer), the group is
    /// left, and everything this worker kept for it is dropped.
    fn lost(&mut self, window: &ReadWindow) {
        tracing::warn!(group = %window.streams.key(), "a CDC lease ran out; its group is left");
        let _ = self.shared.planner().window_failed(window.group, self.now());
        self.shared.drop_group(window.streams.key(), window.epoch);
        self.delivered.remove(&window.group);
        self.consumers.remove(&(window.generation, window.group));
    }

    /// Tells the planner how reading `window` went: done, to be retried
    /// after a backoff, or an error that stops the reader.
    fn finished(&mut self, window: &ReadWindow, result: Result<(), CdcError>) -> Result<(), CdcError> {
        let group = window.group;
        match result {
            Err(CdcError::LeaseLost(_)) => {
                self.lost(window);
                Ok(())
            }
            Err(CdcError::Consumer(ConsumerError::Fenced(e))) if self.shared.deadlines.is_some() => {
                tracing::warn!(group = %window.streams.key(), error = %e, "a CDC group was taken over; it is left");
                self.lost(window);
                Ok(())
            }
            Ok(()) => {
                self.failures.remove(&group);
                self.timeouts.remove(&group);
                self.shared.planner().window_done(group, window.to)?;
                self.shared.counters.window();
                self.shared.stopping.wake();
                Ok(())
            }
            Err(e) if transient(&e) => {
                let n = self.failures.entry(group).or_insert(0);
                *n += 1;
                if overload(&e) {
                    self.limit.overloaded();
                }
                if matches!(e, CdcError::Execution(ExecutionError::Timeout(_))) {
                    let timeouts = self.timeouts.entry(group).or_insert(0);
                    *timeouts += 1;
                    if *timeouts >= self.shared.query_attempts {
                        let timeout = self.shared.query_timeout;
                        return Err(CdcError::QueryTimeout { attempts: *timeouts, timeout });
                    }
                } else {
                    self.timeouts.remove(&group);
                }
                tracing::debug!(error = %e, failures = *n, "reading a CDC window failed; retrying");
                let backoff = Duration::from_millis(100).saturating_mul(1 << (*n).min(16)).min(self.shared.max_backoff);
                self.routes.retain(|_, r| !r.conn.is_closed());
                self.shared.planner().window_failed(group, self.now().saturating_add(backoff))?;
                self.shared.counters.retried();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn generation_found(&mut self, found: Result<Option<Millis>, GenerationError>) -> Result<(), CdcError> {
        let ts = match found {
            Ok(Some(ts)) => ts,
            Ok(None) => {
                self.shared.planner().next_generation_not_found(self.now());
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading CDC generations failed; retrying");
                self.shared.planner().generation_fetch_failed(self.now());
                return Ok(());
            }
        };
        match self.shared.source.streams(ts).await {
            Ok(groups) => {
                let streams =
                    regroup(&groups, self.shared.streams_per_query, |vnode, s| self.shared.shard_of(vnode, s));
                if streams.is_empty() {
                    self.shared.planner().generation_fetch_failed(self.now());
                } else {
                    self.shared.planner().next_generation_found(ts, streams)?;
                    self.shared.stopping.wake();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the streams of generation {ts} failed; retrying");
                self.shared.planner().generation_fetch_failed(self.now());
            }
        }
        Ok(())
    }

    /// The connection (and prepared query) for a group: the first replica
    /// of its streams' tokens, on the shard that owns them.
    async fn route(&mut self, stream: StreamId) -> Result<Place, CdcError> {
        let (node, sharding, shard) = self.shared.place(stream)?;
        let key = (node, shard);
        if self.routes.get(&key).is_none_or(|r| r.conn.is_closed()) {
            let session = &self.shared.session;
            let config = &session.config().connection;
            let conn = match &sharding {
                Some(s) => Connection::open_to_shard(node, shard, s, config).await?,
                None => Connection::open(node, config).await?,
            };
            let timeout = self.shared.query_timeout;
            let prepared = tokio::time::timeout(timeout, conn.prepare(&self.shared.text))
                .await
                .map_err(|_| ExecutionError::Timeout(timeout))??;
            let schema = prepared.result_specs().map(LogSchema::new).transpose()?;
            self.routes.insert(key, Route { conn, prepared, schema });
        }
        Ok(key)
    }

    /// Reads `window` from its first page's answer on: its rows to the
    /// group's consumer, then the consumer's `window_end`.
    async fn read(
        &mut self,
        window: &ReadWindow,
        place: Place,
        first: Result<QueryResult, CdcError>,
    ) -> Result<(), CdcError> {
        let consumer_key = (window.generation, window.group);
        let skip = match self.delivered.remove(&window.group) {
            Some(attempt) if attempt.of(window) => attempt.counts,
            Some(_) => {
                // Another window than the one that failed: what the
                // consumer saw of that one is not skipped, so it starts over.
                self.consumers.remove(&consumer_key);
                HashMap::new()
            }
            None => HashMap::new(),
        };
        if self.consumers.get(&consumer_key).is_none_or(|(epoch, _)| *epoch != window.epoch) {
            // The groups of earlier generations are done for good.
            self.consumers.retain(|(generation, _), _| *generation >= window.generation);
            let info = self.shared.planner().group(window.group).filter(|info| info.epoch == window.epoch);
            match info {
                Some(info) => {
                    self.consumers.insert(consumer_key, (window.epoch, self.shared.factory.new_consumer(&info)));
                }
                // Taken again meanwhile, under another epoch.
                None => return Err(CdcError::LeaseLost(window.streams.key())),
            }
        }
        let mut delivered = HashMap::new();
        match self.read_pages(window, place, first, &skip, &mut delivered).await {
            Ok(()) => {
                // The window's end makes it count as read: only under a
                // lease still surely held.
                if !self.shared.holds(window.streams.key()) {
                    return Err(CdcError::LeaseLost(window.streams.key()));
                }
                if let Some((_, consumer)) = self.consumers.get_mut(&consumer_key) {
                    consumer.window_end(window)?;
                    if let Some(work) = consumer.pending() {
                        work.await?;
                    }
                }
                Ok(())
            }
            Err(e) => {
                // What any attempt delivered, should this one have failed
                // before reaching as far as an earlier one.
                for (stream, n) in skip {
                    let seen = delivered.entry(stream).or_insert(0);
                    *seen = (*seen).max(n);
                }
                if !delivered.is_empty() {
                    let attempt = Attempt {
                        generation: window.generation,
                        from: window.from,
                        epoch: window.epoch,
                        counts: delivered,
                    };
                    self.delivered.insert(window.group, attempt);
                }
                Err(e)
            }
        }
    }

    /// Hands the rows of the window's pages to the consumer, skipping the
    /// first `skip[s]` rows of each stream `s` (an earlier attempt's);
    /// while the window spans several pages (or rows are skipped),
    /// `delivered` counts the rows of each stream read so far.
    async fn read_pages(
        &mut self,
        window: &ReadWindow,
        place: Place,
        first: Result<QueryResult, CdcError>,
        skip: &HashMap<StreamId, usize>,
        delivered: &mut HashMap<StreamId, usize>,
    ) -> Result<(), CdcError> {
        let mut next = Some(first);
        let mut prefetched: Option<PageFetch> = None;
        let mut paging: Option<PagingState> = None;
        loop {
            let page = match (next.take(), prefetched.take()) {
                (Some(page), _) => page,
                (None, Some(fetch)) => fetch.await,
                (None, None) => {
                    let Some(route) = self.routes.get(&place) else { return Err(CdcError::NoNodes) };
                    self.page_query().fetch(&route.conn, &route.prepared, window, paging.as_ref()).await
                }
            };
            let result = match page {
                Ok(result) => result,
                Err(e) => {
                    if matches!(e, CdcError::Execution(ExecutionError::Timeout(_))) {
                        // The connection may be the stalled part: the retry opens another.
                        self.routes.remove(&place);
                    }
                    return Err(e);
                }
            };
            // The next page is asked for before this one is consumed, so the
            // shard serves it meanwhile.
            if let (Some(state), Some(route)) = (result.paging_state(), self.routes.get(&place)) {
                let (conn, prepared, query, window) =
                    (route.conn.clone(), route.prepared.clone(), self.page_query(), window.clone());
                let mut fetch: PageFetch =
                    Box::pin(async move { query.fetch(&conn, &prepared, &window, Some(&state)).await });
                // One poll queues the request on the connection; the yield
                // lets the connection's writer send it.
                match std::future::poll_fn(|cx| Poll::Ready(fetch.as_mut().poll(cx))).await {
                    Poll::Ready(page) => next = Some(page),
                    Poll::Pending => {
                        prefetched = Some(fetch);
                        tokio::task::yield_now().await;
                    }
                }
            }
            let Some(route) = self.routes.get_mut(&place) else { return Err(CdcError::NoNodes) };
            // A failure on a later page makes the window be read again:
            // remember what this attempt delivers (a single-page window, the
            // common case, remembers nothing).
            let remember = paging.is_some() || result.has_more_pages();
            if let Some(rows) = result.raw_rows() {
                if route.schema.is_none() {
                    let specs = result
                        .column_specs()
                        .ok_or_else(|| CdcError::Config("the log query returned no column metadata".into()))?;
                    route.schema = Some(LogSchema::new(specs.to_vec())?);
                }
                let consumer = self.consumers.get_mut(&(window.generation, window.group)).map(|(_, c)| c);
                if let (Some(schema), Some(consumer)) = (&route.schema, consumer) {
                    let page = LogPage::new(schema, rows, &mut self.rows)?;
                    let mut consumed = 0;
                    // A generation taken over from scylla-cdc: a stream's
                    // rows before its own start were read by it.
                    let starts = self.shared.stream_starts.as_ref().and_then(|s| s.of(window));
                    if skip.is_empty() && !remember && starts.is_none() {
                        for row in page.iter() {
                            consumer.consume(row)?;
                            consumed += 1;
                        }
                    } else {
                        let mut counts = StreamCounts { skip, delivered, run: None };
                        for row in page.iter() {
                            let stream = row.stream_id();
                            // Counted first: a retried window skips by counts.
                            let admitted = counts.admit(stream);
                            let before_start = starts
                                .and_then(|s| s.get(&stream))
                                .is_some_and(|start| Millis(row.time_micros().div_euclid(1000)) < *start);
                            if admitted && !before_start {
                                consumer.consume(row)?;
                                consumed += 1;
                            }
                        }
                    }
                    self.shared.counters.rows(consumed);
                    self.shared.counters.bytes(rows.raw_rows().len());
                    // An async consumer's work for the page, before the
                    // next: what it holds stays one page.
                    if let Some(work) = consumer.pending() {
                        work.await?;
                    }
                }
            }
            if !result.has_more_pages() {
                break;
            }
            paging = result.paging_state();
        }
        Ok(())
    }
}

/// Counts the rows of each stream a window's attempt reads, and says which
/// an earlier attempt already delivered. A page holds each stream's rows
/// together (the log is ordered by stream, then time), so the maps are
/// touched once per run of a stream instead of hashing every row; the run
/// is written back when another stream starts and when this is dropped,
/// early returns included.
struct StreamCounts<'a> {
    skip: &'a HashMap<StreamId, usize>,
    delivered: &'a mut HashMap<StreamId, usize>,
    /// The current stream, its rows read so far and the rows to skip.
    run: Option<(StreamId, usize, usize)>,
}

impl StreamCounts<'_> {
    /// Counts a row of `stream`; whether it is to be delivered.
    fn admit(&mut self, stream: StreamId) -> bool {
        let run = match &mut self.run {
            Some(run) if run.0 == stream => run,
            _ => {
                self.flush();
                let seen = self.delivered.get(&stream).copied().unwrap_or(0);
                self.run.insert((stream, seen, self.skip.get(&stream).copied().unwrap_or(0)))
            }
        };
        run.1 += 1;
        run.1 > run.2
    }

    fn flush(&mut self) {
        if let Some((stream, seen, _)) = self.run.take() {
            self.delivered.insert(stream, seen);
        }
    }
}

impl Drop for StreamCounts<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Errors that say the server has more than it can take: fewer windows in
/// flight then.
fn overload(e: &CdcError) -> bool {
    match e {
        // Overloaded, read and write timeouts.
        CdcError::Execution(ExecutionError::Db(db)) => matches!(db.code, 0x1001 | 0x1100 | 0x1200),
        CdcError::Execution(ExecutionError::Timeout(_) | ExecutionError::AttemptTimeout { .. }) => true,
        _ => false,
    }
}

/// Errors worth retrying: the server or the network, not the data.
fn transient(e: &CdcError) -> bool {
    match e {
        CdcError::Execution(ExecutionError::Db(db)) => {
            // Unavailable, overloaded, bootstrapping, read/write timeouts and failures.
            matches!(db.code, 0x1000 | 0x1001 | 0x1002 | 0x1100 | 0x1200 | 0x1300 | 0x1500)
        }
        CdcError::Execution(
            ExecutionError::Connection(_)
            | ExecutionError::Timeout(_)
            | ExecutionError::AttemptTimeout { .. }
            | ExecutionError::NoConnection
            | ExecutionError::PlanUnavailable { .. },
        ) => true,
        CdcError::Connection(_) | CdcError::NoNodes => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(n: u8) -> StreamId {
        StreamId::from_bytes([n; 16])
    }

    /// Runs of a stream, a stream seen again after another, rows skipped
    /// for an earlier attempt, and an early drop: the counts come out as
    /// one map update per row would give them.
    #[test]
    fn stream_counts_match_per_row_counting() {
        let skip = HashMap::from([(stream(1), 2), (stream(3), 1)]);
        let mut delivered = HashMap::new();
        let rows = [1, 1, 1, 2, 2, 1, 3, 3];
        let mut admitted = Vec::new();
        {
            let mut counts = StreamCounts { skip: &skip, delivered: &mut delivered, run: None };
            for n in rows {
                admitted.push(counts.admit(stream(n)));
            }
        }
        assert_eq!(admitted, [false, false, true, true, true, true, false, true]);
        assert_eq!(delivered, HashMap::from([(stream(1), 4), (stream(2), 2), (stream(3), 2)]));

        // Dropped in the middle of a run (a consumer's error): what was
        // counted so far is kept.
        let mut delivered = HashMap::new();
        {
            let mut counts = StreamCounts { skip: &skip, delivered: &mut delivered, run: None };
            assert!(!counts.admit(stream(1)));
        }
        assert_eq!(delivered, HashMap::from([(stream(1), 1)]));
    }
}
