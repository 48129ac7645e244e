//! The reader when a node stops answering its log queries: a fault proxy
//! between the emulation front and the server drops every EXECUTE (the log
//! reads; the session's own system queries are QUERY frames and pass), so
//! the node accepts the reads and never answers, its connections up.
//!
//! * Stalled for a while, then released: the workers do not hang on the
//!   first read (they time out and retry it), and once the stall is lifted
//!   every change is delivered — count and checksum — none twice (the
//!   stalled reads delivered nothing).
//! * Stalled for good: the reader ends with [`CdcError::QueryTimeout`]
//!   after the configured attempts, instead of waiting forever.
//! * Stalled at the start: a worker has sent as many reads as it may keep
//!   in flight, no more; and the next page of a window is asked for before
//!   a slow consumer has taken the current one.
//! * Every other fault of the proxy, for a while, during a read whose
//!   windows take several pages: answers delayed past the query timeout,
//!   requests dropped, connections blackholed, closed, reset, or cut in the
//!   middle of an answer. Every change is delivered once, in write order per
//!   key: a window whose read failed after some of its pages were delivered
//!   is read again without delivering those rows a second time.
//!
//! The sessions speak protocol v4, so that the front forwards v4 envelopes
//! the proxy can tell apart.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use shardwise::protocol::frame::ProtocolVersion;
use shardwise::SessionBuilder;
use shardwise_cdc::{CdcError, CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo, Operation};
use shardwise_emu::FrontHandle;
use testkit::fault::{Action, Direction, FaultProxy, Rule};

use crate::common::{self, workload};

/// EXECUTE.
const EXECUTE: u8 = 0x0a;
/// RESULT.
const RESULT: u8 = 0x08;

/// Every change delivered, in delivery order: (pk, operation, v).
type Seen = Arc<Mutex<Vec<(i32, Operation, Option<i64>)>>>;

fn collector(seen: Seen) -> Arc<dyn shardwise_cdc::ConsumerFactory> {
    Arc::new(move |_: &GroupInfo| -> Box<dyn Consumer> {
        let seen = seen.clone();
        Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
            let pk: i32 = row.value::<Option<i32>>("pk")?.ok_or_else(|| ConsumerError::failed("no pk"))?;
            let v = row.value::<Option<i64>>("v")?;
            seen.lock().map_err(|_| ConsumerError::failed("poisoned"))?.push((pk, row.operation(), v));
            Ok(())
        })
    })
}

/// A fault proxy in front of the server, the front in front of the proxy,
/// a v4 session through the front, a keyspace with the workload's table.
async fn setup(tag: &str) -> (FaultProxy, FrontHandle, shardwise::Session, String) {
    let proxy = FaultProxy::start(testkit::shared_node().expect("server")).expect("proxy");
    let builder = SessionBuilder::new().protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4);
    let (front, session, ks) = common::front_and_keyspace_with(tag, proxy.addr(), builder).await;
    workload::create_table(&session, &ks).await;
    (proxy, front, session, ks)
}

/// A table written before its reader starts, and the span that reads all
/// of it.
struct Written {
    proxy: FaultProxy,
    /// The front stops when this is dropped: keep it bound.
    front: FrontHandle,
    session: shardwise::Session,
    ks: String,
    plan: Vec<(i32, i32, Operation, Option<i64>)>,
    start: SystemTime,
    /// Past the last change; the log is readable up to it on return.
    end: SystemTime,
}

/// [`setup`], then the changes of `plan` written.
async fn written(tag: &str, plan: Vec<(i32, i32, Operation, Option<i64>)>) -> Written {
    let (proxy, front, session, ks) = setup(tag).await;
    let start = SystemTime::now() - Duration::from_secs(1);
    workload::write(&session, &ks, &plan, plan.len(), Duration::ZERO).await;
    let end = SystemTime::now() + Duration::from_millis(500);
    while SystemTime::now() <= end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Written { proxy, front, session, ks, plan, start, end }
}

fn stall(proxy: &FaultProxy) {
    proxy.set_rules(vec![Rule::new(Action::DropFrame).opcode(EXECUTE).direction(Direction::ToServer)]);
}

/// The changes per key, in delivery order.
fn per_key(seen: &[(i32, Operation, Option<i64>)]) -> workload::Ops {
    let mut per_key = workload::Ops::new();
    for &(pk, op, v) in seen {
        per_key.entry(pk).or_default().push((op, v));
    }
    per_key
}

/// Count and checksum of changes: (pk, v) summed with weights so that a
/// change delivered for another key, or twice, shows.
fn checksum(changes: impl Iterator<Item = (i32, Option<i64>)>) -> (usize, i64) {
    changes.fold((0, 0i64), |(n, sum), (pk, v)| {
        (n + 1, sum.wrapping_add(i64::from(pk).wrapping_mul(1_000_003)).wrapping_add(v.unwrap_or(-1)))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_node_delays_the_reader_without_losing_a_change() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let Written { proxy, front: _front, session, ks, plan, start, end } =
            written("cdc_stall", workload::plan(20, 300, 5)).await;

        stall(&proxy);
        let stalled_from = proxy.frames(Direction::ToServer, EXECUTE);
        let seen: Seen = Arc::default();
        let query_timeout = Duration::from_millis(500);
        let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_secs(1))
            .safety_interval(Duration::from_millis(300))
            .sleep_interval(Duration::from_millis(50))
            .workers(2)
            .query_timeout(query_timeout)
            .query_attempts(1000)
            .build(collector(seen.clone()))
            .await
            .expect("reader");
        let stall_for = Duration::from_secs(4);
        tokio::time::sleep(stall_for).await;
        let reads_during_stall = proxy.frames(Direction::ToServer, EXECUTE) - stalled_from;
        let delivered_during_stall = seen.lock().expect("lock").len();
        assert!(!reader.is_finished(), "the reader ended during the stall");
        proxy.clear_rules();
        let lifted = Instant::now();
        tokio::time::timeout(Duration::from_secs(60), reader.join())
            .await
            .expect("the reader finishes once the stall is lifted")
            .expect("the reader ends without error");
        let caught_up = lifted.elapsed();

        let seen = seen.lock().expect("lock").clone();
        let expected = checksum(plan.iter().map(|&(pk, _, _, v)| (pk, v)));
        let delivered = checksum(seen.iter().map(|&(pk, _, v)| (pk, v)));
        eprintln!(
            "cdc stall: {} reads sent during the {stall_for:?} stall, {delivered_during_stall} changes delivered \
             then; {} changes expected, {} delivered, {} duplicated; caught up {caught_up:?} after the lift",
            reads_during_stall,
            expected.0,
            delivered.0,
            delivered.0.saturating_sub(expected.0),
        );
        // The workers went on: each read timed out and was sent again,
        // several times per worker, instead of one read hanging for good.
        assert!(reads_during_stall >= 4, "{reads_during_stall} log reads during the stall: a worker hung");
        assert_eq!(delivered_during_stall, 0, "the stall did not stall the reads");
        assert_eq!(delivered, expected, "every change once (count, checksum)");
        assert_eq!(per_key(&seen), workload::expected_of(&plan), "every change of every key, in write order");
    })
    .await
    .expect("the test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stalled_for_good_ends_the_reader_with_a_query_timeout() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let Written { proxy, front: _front, session, ks, start, .. } =
            written("cdc_stall_for_good", workload::plan(5, 20, 6)).await;
        stall(&proxy);
        let seen: Seen = Arc::default();
        let query_timeout = Duration::from_millis(300);
        let started = Instant::now();
        let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .window_size(Duration::from_secs(1))
            .safety_interval(Duration::from_millis(300))
            .sleep_interval(Duration::from_millis(50))
            .workers(2)
            .query_timeout(query_timeout)
            .query_attempts(3)
            .build(collector(seen.clone()))
            .await
            .expect("reader");
        let result = tokio::time::timeout(Duration::from_secs(60), reader.join())
            .await
            .expect("the reader ends on its own under a permanent stall");
        eprintln!("cdc stalled for good: ended after {:?} with {result:?}", started.elapsed());
        match result {
            Err(CdcError::QueryTimeout { attempts, timeout }) => {
                assert_eq!((attempts, timeout), (3, query_timeout));
            }
            other => panic!("expected a query timeout, got {other:?}"),
        }
        assert!(seen.lock().expect("lock").is_empty(), "nothing read through a stalled node");
    })
    .await
    .expect("the test hung");
}

/// A worker keeps several windows in flight, each of another group: with
/// every log read swallowed, one worker has sent exactly as many reads as
/// it may keep in flight (the windows of 4 shards' groups are all ready),
/// and with one in flight, one. Once the reads pass again, every change is
/// delivered once, in write order per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_keeps_several_windows_in_flight() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let Written { proxy, front: _front, session, ks, plan, start, end } =
            written("cdc_in_flight", workload::plan(20, 200, 8)).await;
        for in_flight in [1, 3] {
            stall(&proxy);
            let stalled_from = proxy.frames(Direction::ToServer, EXECUTE);
            let seen: Seen = Arc::default();
            let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
                .start(start)
                .end(end)
                .window_size(Duration::from_secs(10))
                .safety_interval(Duration::from_millis(100))
                .sleep_interval(Duration::from_millis(50))
                .workers(1)
                .windows_in_flight(in_flight)
                .query_timeout(Duration::from_secs(3))
                .build(collector(seen.clone()))
                .await
                .expect("reader");
            // The worker sends what it may keep in flight, and no more
            // while those are unanswered: wait for the reads, then a while
            // longer for any read beyond them.
            let sent_now = || proxy.frames(Direction::ToServer, EXECUTE) - stalled_from;
            let deadline = Instant::now() + Duration::from_secs(20);
            while sent_now() < in_flight && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            let sent = sent_now();
            proxy.clear_rules();
            tokio::time::timeout(Duration::from_secs(60), reader.join())
                .await
                .expect("the reader finishes once the reads pass")
                .expect("the reader ends without error");
            eprintln!("cdc in flight: {sent} reads sent at once with {in_flight} allowed");
            assert_eq!(sent, in_flight, "reads in flight on one worker");
            let seen = seen.lock().expect("lock").clone();
            assert_eq!(per_key(&seen), workload::expected_of(&plan), "every change once, in write order per key");
        }
    })
    .await
    .expect("the test hung");
}

/// The next page of a window is asked for before the rows of the current
/// one are consumed: while the consumer takes its time over the first row,
/// the one worker (one window in flight) has sent two reads, the window's
/// first page and its second (40 keys: no group's window is empty, so the
/// first window read is the one whose row is consumed first). Every change is still delivered once, in
/// write order per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_page_is_requested_before_a_page_is_consumed() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let Written { proxy, front: _front, session, ks, plan, start, end } =
            written("cdc_prefetch", workload::plan(40, 200, 9)).await;
        let proxy = Arc::new(proxy);
        let before = proxy.frames(Direction::ToServer, EXECUTE);
        let seen: Seen = Arc::default();
        let sent_at_first_row: Arc<Mutex<Option<usize>>> = Arc::default();
        let factory = {
            let (seen, sent, proxy) = (seen.clone(), sent_at_first_row.clone(), proxy.clone());
            move |_: &GroupInfo| -> Box<dyn Consumer> {
                let (seen, sent, proxy) = (seen.clone(), sent.clone(), proxy.clone());
                Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
                    let mut first = sent.lock().map_err(|_| ConsumerError::failed("poisoned"))?;
                    if first.is_none() {
                        // A slow consumer, holding its first row until the
                        // next page was asked for (or long enough to tell it
                        // never will be).
                        let sent = || proxy.frames(Direction::ToServer, EXECUTE) - before;
                        let deadline = Instant::now() + Duration::from_secs(5);
                        while sent() < 2 && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        *first = Some(sent());
                    }
                    let pk: i32 = row.value::<Option<i32>>("pk")?.ok_or_else(|| ConsumerError::failed("no pk"))?;
                    let v = row.value::<Option<i64>>("v")?;
                    seen.lock().map_err(|_| ConsumerError::failed("poisoned"))?.push((pk, row.operation(), v));
                    Ok(())
                })
            }
        };
        let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_secs(10))
            .safety_interval(Duration::from_millis(100))
            .sleep_interval(Duration::from_millis(50))
            .workers(1)
            .windows_in_flight(1)
            .page_size(4)
            .build(Arc::new(factory))
            .await
            .expect("reader");
        tokio::time::timeout(Duration::from_secs(60), reader.join())
            .await
            .expect("the reader finishes")
            .expect("the reader ends without error");
        let sent = *sent_at_first_row.lock().expect("lock");
        eprintln!("cdc prefetch: {sent:?} reads sent when the first row was consumed");
        assert_eq!(sent, Some(2), "the first page and the next one");
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(per_key(&seen), workload::expected_of(&plan), "every change once, in write order per key");
    })
    .await
    .expect("the test hung");
}

/// Reads a table written before the reader starts while `rules` act for
/// `fault_for`, from when the first rows are delivered. A few keys with many
/// changes each and small pages make most answers a later page of a window
/// whose earlier pages were delivered. Then checks that every change was
/// delivered once, in write order per key.
async fn read_through(tag: &str, rules: Vec<Rule>, fault_for: Duration) {
    tokio::time::timeout(Duration::from_secs(150), async {
        let Written { proxy, front: _front, session, ks, plan, start, end } =
            written(tag, workload::plan(4, 400, 7)).await;

        let seen: Seen = Arc::default();
        let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_secs(1))
            .safety_interval(Duration::from_millis(300))
            .sleep_interval(Duration::from_millis(50))
            .page_size(4)
            .workers(2)
            .query_timeout(Duration::from_millis(500))
            .query_attempts(1000)
            .build(collector(seen.clone()))
            .await
            .expect("reader");
        // Once the first pages are delivered, most answers still to come are
        // later pages of a window that is partly delivered.
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.lock().expect("lock").len() < 8 {
            assert!(Instant::now() < deadline, "the reader delivered nothing");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        proxy.set_rules(rules);
        tokio::time::sleep(fault_for).await;
        proxy.clear_rules();
        let acted_on = proxy.frames_acted_on();
        let lifted = Instant::now();
        tokio::time::timeout(Duration::from_secs(60), reader.join())
            .await
            .expect("the reader finishes once the fault is lifted")
            .expect("the reader ends without error");

        let seen = seen.lock().expect("lock").clone();
        let expected = checksum(plan.iter().map(|&(pk, _, _, v)| (pk, v)));
        let delivered = checksum(seen.iter().map(|&(pk, _, v)| (pk, v)));
        eprintln!(
            "cdc {tag}: the proxy acted on {acted_on} frames; {} changes expected, {} delivered, {} duplicated; \
             done {:?} after the fault was lifted",
            expected.0,
            delivered.0,
            delivered.0.saturating_sub(expected.0),
            lifted.elapsed(),
        );
        assert!(acted_on > 0, "the fault never acted: the test proves nothing");
        assert_eq!(delivered, expected, "every change once (count, checksum)");
        assert_eq!(per_key(&seen), workload::expected_of(&plan), "every change of every key once, in write order");
    })
    .await
    .expect("the test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_delayed_past_the_query_timeout() {
    let delay = Rule::new(Action::Delay(Duration::from_millis(800))).opcode(RESULT).direction(Direction::ToClient);
    read_through("cdc_delay", vec![delay], Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_requests() {
    let drop = Rule::new(Action::DropFrame).opcode(EXECUTE).direction(Direction::ToServer).times(8);
    read_through("cdc_drop_frames", vec![drop], Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholed_connections() {
    let blackhole = Rule::new(Action::Blackhole).opcode(EXECUTE).direction(Direction::ToServer).times(3);
    read_through("cdc_blackhole", vec![blackhole], Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_mid_window() {
    let close = Rule::new(Action::DropConnection).opcode(RESULT).direction(Direction::ToClient).times(4);
    read_through("cdc_drop_connections", vec![close], Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_reset_mid_window() {
    let reset = Rule::new(Action::Reset).opcode(EXECUTE).direction(Direction::ToServer).times(4);
    read_through("cdc_reset", vec![reset], Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_cut_in_half() {
    let cut = Rule::new(Action::CutFrame).opcode(RESULT).direction(Direction::ToClient).times(4);
    read_through("cdc_cut", vec![cut], Duration::from_secs(2)).await;
}
