//! The lease table on a real Cassandra, through the Scylla emulation front:
//! a lease has one holder at a time (claims and renewals are lightweight
//! transactions), members are listed, and a reader cannot share a table
//! without a checkpoint store all readers share. Processes sharing a table
//! (three printers, one killed, a fourth joining) are tested in
//! `shardwise-cdc-tools` (`tests/printer.rs`).

use std::sync::Arc;
use std::time::Duration;

use shardwise_cdc::checkpoint::TableCheckpointStore;
use shardwise_cdc::checkpoint::{Checkpoint, CheckpointError, Fence};
use shardwise_cdc::{
    BoxFuture, CdcError, CdcReaderBuilder, CheckpointStore, LeaseConfig, LeaseTable, Millis, StreamId,
};

use crate::common::workload::{collector, front_with_table as setup, SAFETY};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_has_one_holder_at_a_time() {
    let (_front, session, ks) = setup("cdc_lease_table").await;
    let table = LeaseTable::new(session.clone(), &ks, "cdc_leases");
    table.create_table().await.expect("lease table");
    let (log, group) = ("ks.t_scylla_cdc_log", StreamId::from_bytes([7; 16]));
    assert!(table.claim(log, group, "a", 30).await.expect("claim"), "a free lease is taken");
    assert!(!table.claim(log, group, "b", 30).await.expect("claim"), "a held lease is not");
    assert!(!table.renew(log, group, "b", 30).await.expect("renew"), "only the holder renews");
    assert!(!table.release(log, group, "b",).await.expect("release"), "only the holder releases");
    assert!(table.renew(log, group, "a", 30).await.expect("renew"));
    assert_eq!(table.leases(log).await.expect("leases").get(&group).map(String::as_str), Some("a"));
    assert!(table.release(log, group, "a").await.expect("release"));
    assert!(table.claim(log, group, "b", 30).await.expect("claim"), "a released lease is free");
    assert!(table.leases("another log").await.expect("leases").is_empty(), "leases are per log");

    table.heartbeat(log, "b", 30).await.expect("heartbeat");
    table.heartbeat(log, "a", 30).await.expect("heartbeat");
    assert_eq!(table.members(log).await.expect("members"), vec!["a".to_string(), "b".to_string()]);
    table.leave(log, "a").await.expect("leave");
    assert_eq!(table.members(log).await.expect("members"), vec!["b".to_string()]);

    // A lease not renewed expires.
    let other = StreamId::from_bytes([8; 16]);
    assert!(table.claim(log, other, "a", 1).await.expect("claim"));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(table.claim(log, other, "b", 30).await.expect("claim"), "an expired lease is free");
}

/// A lease or checkpoint table that another reader made already is
/// answered with no schema change (`CREATE TABLE IF NOT EXISTS` on a
/// coordinator that knows it), so the driver waited for nothing, while
/// other nodes could still lack it: on three nodes, one of two printers
/// started together failed its first lease request with "table
/// printer_leases does not exist" (nemesis seed 1796307662986711561). Now
/// making a table waits for schema agreement either way, seen here as the
/// session's schema agreement event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn making_a_table_that_exists_waits_until_every_node_knows_it() {
    use shardwise::SessionEvent;

    let (_front, session, ks) = setup("cdc_lease_agree").await;
    let leases = LeaseTable::new(session.clone(), &ks, "cdc_leases");
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    leases.create_table().await.expect("lease table");
    store.create_table().await.expect("checkpoint table");
    let agreed = |events: &mut tokio::sync::broadcast::Receiver<SessionEvent>| {
        std::iter::from_fn(|| events.try_recv().ok()).filter(|e| matches!(e, SessionEvent::SchemaAgreement(_))).count()
    };
    let mut events = session.events();
    leases.create_table().await.expect("lease table again");
    assert_eq!(agreed(&mut events), 1, "the lease table, made already");
    store.create_table().await.expect("checkpoint table again");
    assert!(agreed(&mut events) >= 1, "the checkpoint table, made already");
}

/// Claims, renewals and releases of many leases, each in conditional
/// batches of the lease partition (more groups than one batch holds):
/// only free leases are claimed, only the holder's renewed and released,
/// and a batch refused for some rows still applies to the others. Through
/// the front (ScyllaDB's answer: one row per statement) and straight to
/// Cassandra (its answer: the rows that exist, in clustering order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_claimed_renewed_and_released_in_batches() {
    use shardwise_cdc::lease::BATCH_ROWS;

    let (_front, session, ks) = setup("cdc_lease_batch").await;
    let direct = crate::common::cassandra_session().await;
    for (via, session) in [("front", session), ("cassandra", direct)] {
        let table = LeaseTable::new(session, &ks, &format!("cdc_leases_{via}"));
        table.create_table().await.expect("lease table");
        let log = "ks.t_scylla_cdc_log";
        let group = |n: usize| {
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&(n as u64 + 1).to_be_bytes());
            StreamId::from_bytes(id)
        };
        let many: Vec<StreamId> = (0..BATCH_ROWS + 44).map(group).collect();
        assert_eq!(table.claim_all(log, &many, "a", 30).await.expect("claim"), many, "{via}: all free, all taken");
        let mixed = vec![many[0], group(1000), many[5], group(1001), group(1002)];
        let taken = table.claim_all(log, &mixed, "b", 30).await.expect("claim");
        assert_eq!(taken, vec![group(1000), group(1001), group(1002)], "{via}: only the free ones");

        let renew = vec![many[3], group(1000), many[7], group(2000)];
        assert_eq!(
            table.renew_all(log, &renew, "a", 30).await.expect("renew"),
            vec![many[3], many[7]],
            "{via}: only a's own, not b's, not a missing one"
        );
        assert_eq!(table.renew_all(log, &many, "a", 30).await.expect("renew"), many, "{via}: all of a's, renewed");

        let release = vec![many[1], group(1000), group(1002)];
        assert_eq!(
            table.release_all(log, &release, "b").await.expect("release"),
            vec![group(1000), group(1002)],
            "{via}: b's own only"
        );
        let leases = table.leases(log).await.expect("leases");
        assert_eq!(leases.len(), many.len() + 1, "{via}: a's all kept, b's 1001 kept");
        assert!(many.iter().all(|g| leases.get(g).map(String::as_str) == Some("a")), "{via}");
        assert_eq!(leases.get(&group(1001)).map(String::as_str), Some("b"), "{via}");
        assert_eq!(table.release_all(log, &many, "a").await.expect("release"), many, "{via}");
        assert!(table.claim_all(log, &[], "a", 30).await.expect("nothing").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharing_needs_a_checkpoint_store_and_sane_timing() {
    let (_front, session, ks) = setup("cdc_lease_config").await;
    let table = LeaseTable::new(session.clone(), &ks, "cdc_leases");
    let seen = Default::default();
    let built = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .leases(LeaseConfig::new(table.clone()))
        .build(collector(Arc::clone(&seen)))
        .await;
    assert!(matches!(&built, Err(CdcError::Config(m)) if m.contains("checkpoint")), "{built:?}");
    let store = Arc::new(shardwise_cdc::MemoryCheckpointStore::new());
    let built = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .checkpoints(store, Duration::from_secs(1))
        .leases(LeaseConfig::new(table).timing(Duration::from_secs(2), Duration::from_secs(2)))
        .build(collector(Arc::clone(&seen)))
        .await;
    assert!(matches!(&built, Err(CdcError::Config(m)) if m.contains("heartbeat")), "{built:?}");
    let missing = LeaseTable::new(session.clone(), &ks, "no_such_table");
    let built = CdcReaderBuilder::new(session, &ks, "t")
        .checkpoints(Arc::new(shardwise_cdc::MemoryCheckpointStore::new()), Duration::from_secs(1))
        .leases(LeaseConfig::new(missing))
        .build(collector(seen))
        .await;
    assert!(matches!(&built, Err(CdcError::Lease(_))), "a lease table that does not exist: {built:?}");
}

/// Two readers in one process share a table through leases, across a
/// generation switch: every change is delivered once, by one of them, and
/// the changes of a key come in write order across both (a reader leaves
/// a generation only when the other's groups finished it too). One reader
/// is slower than the other: it used to leave the first generation
/// without saving its groups' final progress there, and both then waited
/// for each other for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_readers_share_a_table_across_a_generation_switch() {
    two_readers_across_a_switch("cdc_lease_gen", |store, _, _| store).await;
}

/// As above, with the slow reader's first save of a generation's final
/// progress failing after longer than a lease's TTL: the final checkpoint is saved whole
/// when it is made again. Its leases were no longer renewed, and the
/// retried save used to drop every group whose lease had lapsed: the other
/// reader waited for that progress for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_save_that_fails_past_the_ttl_orphans_nothing() {
    // The slow reader's: it finishes the generation last, so its final
    // save alone holds its last groups' progress.
    two_readers_across_a_switch("cdc_lease_final", |store, switch, reader| match reader {
        1 => Arc::new(FailingFinalSave { inner: store, switch, failed: std::sync::atomic::AtomicBool::new(false) }),
        _ => store,
    })
    .await;
}

/// A store whose first save of a generation's final progress (every group
/// at `switch`, the next generation's start) fails after 4 s.
struct FailingFinalSave {
    inner: Arc<dyn CheckpointStore>,
    switch: Millis,
    failed: std::sync::atomic::AtomicBool,
}

impl CheckpointStore for FailingFinalSave {
    fn load<'a>(&'a self, table: &'a str) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        self.inner.load(table)
    }
    fn save<'a>(&'a self, table: &'a str, checkpoint: &'a Checkpoint) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let last = checkpoint.generation < self.switch
            && !checkpoint.groups.is_empty()
            && checkpoint.groups.iter().all(|g| g.progress >= self.switch);
        if last && !self.failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Box::pin(async {
                tokio::time::sleep(Duration::from_secs(4)).await;
                Err(CheckpointError::Store("cut off".into()))
            });
        }
        self.inner.save(table, checkpoint)
    }
    fn load_generation<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
    ) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        self.inner.load_generation(table, generation)
    }
    fn fence<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        group: StreamId,
    ) -> BoxFuture<'a, Result<Fence, CheckpointError>> {
        self.inner.fence(table, generation, group)
    }
    fn fence_all<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        groups: &'a [StreamId],
    ) -> BoxFuture<'a, Vec<Result<Fence, CheckpointError>>> {
        self.inner.fence_all(table, generation, groups)
    }
}

async fn two_readers_across_a_switch(
    tag: &str,
    wrap: impl Fn(Arc<dyn CheckpointStore>, Millis, usize) -> Arc<dyn CheckpointStore>,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;
    use std::time::SystemTime;

    use shardwise_cdc::{CdcRow, Consumer, ConsumerError, GroupInfo, Operation};

    use crate::common::workload::{plan, write};

    let (front, session, ks) = setup(tag).await;
    let (table, store) = shared_tables(&session, &ks).await;

    // Inserts and updates only: a change is known by its value.
    let changes =
        |seed| -> Vec<_> { plan(40, 500, seed).into_iter().filter(|c| c.2 != Operation::RowDelete).collect() };
    let (first, second) = (changes(21), changes(22));
    let start = SystemTime::now() - Duration::from_secs(1);
    write(&session, &ks, &first, first.len(), Duration::ZERO).await;
    let switch = SystemTime::now() + Duration::from_secs(2);
    front.new_generation_at(switch).await.expect("generation");
    let switch = Millis::from_system_time(switch);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // The second batch's values follow the first's.
    let second: Vec<_> = second.into_iter().map(|(pk, ck, op, v)| (pk, ck, op, v.map(|v| v + 10_000))).collect();
    write(&session, &ks, &second, second.len(), Duration::ZERO).await;
    let end = SystemTime::now() + Duration::from_millis(500);

    // Every delivery: (reader, order of delivery over both, pk, v).
    type Delivery = (usize, u64, i32, i64);
    let deliveries: Arc<Mutex<Vec<Delivery>>> = Arc::default();
    let order = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for (index, name) in ["a", "b"].into_iter().enumerate() {
        let (deliveries, order) = (deliveries.clone(), order.clone());
        let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
            let (deliveries, order) = (deliveries.clone(), order.clone());
            Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
                let pk = row.value::<Option<i32>>("pk")?.ok_or_else(|| ConsumerError::failed("no pk"))?;
                let v = row.value::<Option<i64>>("v")?.ok_or_else(|| ConsumerError::failed("no v"))?;
                // Reader b is slow: it finishes each generation after a
                // did, and must still save its final progress there.
                if index == 1 {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let at = order.fetch_add(1, Ordering::SeqCst);
                deliveries.lock().expect("lock").push((index, at, pk, v));
                Ok(())
            })
        };
        let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_secs(2))
            .safety_interval(SAFETY)
            .sleep_interval(Duration::from_millis(50))
            .generation_poll_interval(Duration::from_millis(200))
            .workers(1)
            .streams_per_query(8)
            .checkpoints(wrap(store.clone(), switch, index), Duration::from_millis(200))
            .leases(
                LeaseConfig::new(table.clone()).name(name).timing(Duration::from_secs(3), Duration::from_millis(500)),
            )
            .build(Arc::new(factory))
            .await
            .expect("reader");
        readers.push(reader);
    }
    let handles: Vec<_> = readers.iter().map(|r| r.handle()).collect();
    for reader in readers {
        tokio::time::timeout(Duration::from_secs(180), reader.join())
            .await
            .expect("reader finishes")
            .unwrap_or_else(|e| panic!("a reader failed: {e}"));
    }
    // Each reader counted the groups it took (in both generations) and the
    // bytes of what it delivered.
    for (name, handle) in ["a", "b"].iter().zip(&handles) {
        let p = handle.progress();
        assert!(p.groups_taken >= 2, "reader {name}: {p:?}");
        assert!(p.bytes > 32 * p.rows && p.rows > 0, "reader {name}: {p:?}");
    }
    assert!(table.leases(&format!("{ks}.t_scylla_cdc_log")).await.expect("leases").is_empty(), "leases given up");

    let mut deliveries = deliveries.lock().expect("lock").clone();
    deliveries.sort_by_key(|d| d.1);
    let written: Vec<i64> = first.iter().chain(&second).map(|c| c.3.expect("v")).collect();
    let mut delivered: Vec<i64> = deliveries.iter().map(|d| d.3).collect();
    delivered.sort();
    let mut expected = written.clone();
    expected.sort();
    assert_eq!(delivered, expected, "every change once");
    let mut last: std::collections::HashMap<i32, i64> = std::collections::HashMap::new();
    for &(_, _, pk, v) in &deliveries {
        let previous = last.insert(pk, v);
        assert!(previous.is_none_or(|p| p < v), "pk {pk}: {v} delivered after {previous:?}");
    }
    let by_a = deliveries.iter().filter(|d| d.0 == 0).count();
    assert!(by_a > 0 && by_a < deliveries.len(), "both readers read: {by_a} of {}", deliveries.len());
}

/// A reader whose lease queries hang (its lease session blackholed by a
/// fault proxy, its log reads and checkpoints unharmed) stops handing
/// windows' ends to its consumers before its leases can expire: no window
/// of it ends later than the time a lease is surely held (TTL less a
/// second of rounding and the clock skew bound) after the blackhole began.
/// A second reader takes the groups over once the leases expired, from the
/// first one's saved progress: every change is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_renewals_hang_stops_before_its_leases_expire() {
    use std::sync::Mutex;
    use std::time::{Instant, SystemTime};

    use shardwise::SessionBuilder;
    use shardwise_cdc::{CdcRow, Consumer, ConsumerError, GroupInfo, Operation, ReadWindow};
    use testkit::fault::{FaultProxy, OnAccept};

    use crate::common::workload::{plan, write};

    /// Values consumed, and when each window ended, per reader.
    #[derive(Default)]
    struct Log {
        values: Vec<i64>,
        window_ends: Vec<Instant>,
    }
    struct Recorder(Arc<Mutex<Log>>);
    impl Consumer for Recorder {
        fn consume(&mut self, row: CdcRow<'_>) -> Result<(), ConsumerError> {
            let v = row.value::<Option<i64>>("v")?.ok_or_else(|| ConsumerError::failed("no v"))?;
            self.0.lock().expect("lock").values.push(v);
            Ok(())
        }
        fn window_end(&mut self, _: &ReadWindow) -> Result<(), ConsumerError> {
            self.0.lock().expect("lock").window_ends.push(Instant::now());
            Ok(())
        }
    }

    let (_front, session, ks) = setup("cdc_lease_hang").await;
    let (table, store) = shared_tables(&session, &ks).await;
    // Reader a's lease queries go through the proxy, straight to the server.
    let proxy = FaultProxy::start(testkit::shared_node().expect("server")).expect("proxy");
    let lease_session = SessionBuilder::new().known_node_addr(proxy.addr()).build().await.expect("lease session");

    let changes: Vec<_> = plan(40, 1200, 31).into_iter().filter(|c| c.2 != Operation::RowDelete).collect();
    let start = SystemTime::now() - Duration::from_millis(500);
    let end = SystemTime::now() + Duration::from_secs(25);
    let writer = {
        let (session, ks, changes) = (session.clone(), ks.clone(), changes.clone());
        tokio::spawn(async move { write(&session, &ks, &changes, 10, Duration::from_millis(100)).await })
    };
    let (ttl, heartbeat, skew) = (Duration::from_secs(3), Duration::from_millis(500), Duration::from_millis(500));
    let held_for = ttl - Duration::from_secs(1) - skew;
    let reader = |name: &str, leases: LeaseTable, log: Arc<Mutex<Log>>| {
        let factory = move |_: &GroupInfo| -> Box<dyn Consumer> { Box::new(Recorder(log.clone())) };
        CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_millis(300))
            .safety_interval(SAFETY)
            .sleep_interval(Duration::from_millis(50))
            .workers(1)
            .streams_per_query(8)
            .checkpoints(store.clone(), Duration::from_millis(200))
            .leases(LeaseConfig::new(leases).name(name).timing(ttl, heartbeat).clock_skew(skew))
            .build(Arc::new(factory))
    };
    let (log_a, log_b) = (Arc::new(Mutex::new(Log::default())), Arc::new(Mutex::new(Log::default())));
    let a = reader("a", LeaseTable::new(lease_session, &ks, "cdc_leases"), log_a.clone()).await.expect("reader a");
    let deadline = Instant::now() + Duration::from_secs(30);
    while log_a.lock().expect("lock").values.len() < 100 {
        assert!(Instant::now() < deadline, "reader a delivers");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    proxy.on_accept(OnAccept::Blackhole);
    let hung_at = Instant::now();
    assert!(proxy.blackhole_open_connections() > 0, "the lease session's connections are blackholed");
    tokio::time::sleep(ttl).await;
    let b = reader("b", table.clone(), log_b.clone()).await.expect("reader b");
    writer.await.expect("writer");
    tokio::time::timeout(Duration::from_secs(120), b.join())
        .await
        .expect("reader b finishes")
        .unwrap_or_else(|e| panic!("reader b failed: {e}"));
    // Reader a left the groups whose leases it could not renew, and says so.
    let progress = a.progress();
    assert!(progress.groups_left > 0 && progress.groups_taken > 0, "{progress:?}");
    a.stop();
    tokio::time::timeout(Duration::from_secs(60), a.join()).await.expect("reader a stops").expect("reader a");

    let (log_a, log_b) = (log_a.lock().expect("lock"), log_b.lock().expect("lock"));
    let late: Vec<Duration> =
        log_a.window_ends.iter().filter(|t| **t > hung_at + held_for).map(|t| *t - hung_at).collect();
    assert!(
        late.is_empty(),
        "reader a ended {} windows after its leases' deadline ({held_for:?}), the first {:?}",
        late.len(),
        &late[..late.len().min(5)]
    );
    assert!(!log_b.window_ends.is_empty(), "reader b took the groups over");
    let delivered: std::collections::BTreeSet<i64> = log_a.values.iter().chain(&log_b.values).copied().collect();
    let written: std::collections::BTreeSet<i64> = changes.iter().map(|c| c.3.expect("v")).collect();
    let missing: Vec<&i64> = written.difference(&delivered).collect();
    assert!(missing.is_empty(), "every change delivered; missing {} of {}", missing.len(), written.len());
}

/// A reader holding many groups whose lease session is slow (every frame
/// delayed 60 ms each way by a fault proxy; its log reads and checkpoints
/// unharmed) keeps every lease, with no fault and no other reader: all its
/// renewals of a heartbeat are one conditional batch, sent first. It used
/// to renew them one LWT after another, so that the renewals of one
/// heartbeat outlasted the time a lease is surely held: it lost leases
/// every heartbeat and took them back (529 in 55 s with 64 groups and
/// 20 ms). Its conditional writes per heartbeat do not grow with its
/// groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_with_a_slow_lease_link_keeps_every_lease() {
    use std::time::{Instant, SystemTime};

    use shardwise::protocol::frame::ProtocolVersion;
    use shardwise::SessionBuilder;
    use testkit::fault::{Action, Direction, FaultProxy, Rule};

    let (_front, session, ks) = setup("cdc_lease_slow").await;
    let (_, store) = shared_tables(&session, &ks).await;
    let proxy = FaultProxy::start(testkit::shared_node().expect("server")).expect("proxy");
    // Protocol v4: the proxy reads v4 envelopes only.
    let lease_session = SessionBuilder::new()
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .known_node_addr(proxy.addr())
        .build()
        .await
        .expect("lease session");
    let delay = Duration::from_millis(60);
    proxy.set_rules(vec![Rule::new(Action::Delay(delay))]);

    let (ttl, heartbeat) = (Duration::from_secs(3), Duration::from_secs(1));
    let seen = Default::default();
    let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .start(SystemTime::now())
        .window_size(Duration::from_secs(1))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(100))
        .workers(1)
        .streams_per_query(1)
        .checkpoints(store, Duration::from_millis(500))
        .leases(LeaseConfig::new(LeaseTable::new(lease_session, &ks, "cdc_leases")).name("slow").timing(ttl, heartbeat))
        .build(collector(seen))
        .await
        .expect("reader");
    let log = format!("{ks}.t_scylla_cdc_log");
    let table = LeaseTable::new(session.clone(), &ks, "cdc_leases");
    // Settled: it reads every group of the generation, each leased to it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (groups, leases) = (reader.progress().groups.len(), table.leases(&log).await.expect("leases").len());
        if groups >= 12 && groups == leases {
            break;
        }
        assert!(Instant::now() < deadline, "the reader takes every group: reads {groups}, {leases} leases");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let before = reader.progress();
    let batches_before = proxy.frames(Direction::ToServer, 0x0D);
    let beats = 8;
    tokio::time::sleep(heartbeat * beats).await;
    let after = reader.progress();
    let batches = proxy.frames(Direction::ToServer, 0x0D) - batches_before;
    assert!(proxy.frames_acted_on() > 0, "the lease session's frames were delayed");
    assert_eq!(after.groups_left, before.groups_left, "no lease lost: {after:?}");
    assert_eq!(after.groups_taken, before.groups_taken, "none taken again");
    assert_eq!(after.groups.len(), before.groups.len(), "every group still read");
    let groups = after.groups.len();
    assert!(
        batches <= beats as usize + 2,
        "{batches} conditional batches in {beats} heartbeats for {groups} groups: one per heartbeat"
    );
    reader.stop();
    tokio::time::timeout(Duration::from_secs(60), reader.join()).await.expect("stops").expect("reader");
    assert!(table.leases(&log).await.expect("leases").is_empty(), "leases given up");
}

/// The lease table and the checkpoint store that readers of `ks` share,
/// created.
async fn shared_tables(session: &shardwise::Session, ks: &str) -> (LeaseTable, Arc<TableCheckpointStore>) {
    let table = LeaseTable::new(session.clone(), ks, "cdc_leases");
    table.create_table().await.expect("lease table");
    let store = TableCheckpointStore::new(session.clone(), ks, "cdc_checkpoints");
    store.create_table().await.expect("checkpoint table");
    (table, Arc::new(store))
}

/// Readers that would group the log's streams otherwise (here another
/// `streams_per_query`) than the readers already sharing the table are
/// refused with an error naming both groupings: they used to apply one
/// grouping's leases and progress to the other's groups, skipping streams
/// or reading them twice. A reader with the same settings joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_group_the_streams_otherwise_are_refused() {
    let (_front, session, ks) = setup("cdc_lease_grouping").await;
    let (table, store) = shared_tables(&session, &ks).await;
    let reader = |name: &str, streams: usize| {
        CdcReaderBuilder::new(session.clone(), &ks, "t")
            .window_size(Duration::from_secs(1))
            .safety_interval(SAFETY)
            .workers(1)
            .streams_per_query(streams)
            .checkpoints(store.clone(), Duration::from_millis(500))
            .leases(
                LeaseConfig::new(table.clone()).name(name).timing(Duration::from_secs(3), Duration::from_millis(500)),
            )
            .build(collector(Default::default()))
    };
    let first = reader("a", 8).await.expect("the first reader records its grouping");
    match reader("b", 4).await {
        Err(CdcError::Grouping { recorded, ours }) => {
            assert!(recorded.starts_with("streams_per_query=8 "), "{recorded}");
            assert!(ours.starts_with("streams_per_query=4 "), "{ours}");
            let message = CdcError::Grouping { recorded, ours }.to_string();
            assert!(message.contains("streams_per_query=8") && message.contains("streams_per_query=4"), "{message}");
        }
        other => panic!("another grouping must be refused: {other:?}"),
    }
    let same = reader("c", 8).await.expect("the same grouping joins");
    for r in [first, same] {
        r.stop();
        tokio::time::timeout(Duration::from_secs(60), r.join()).await.expect("stops").expect("reader");
    }
}

/// A consumer that panics stops the whole reader with an error, and its
/// leases are given up: it used to end only its own worker, while the
/// others read on and the holder renewed the leases of groups that nobody
/// read, for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_consumer_stops_the_reader_and_its_leases_are_given_up() {
    use std::time::SystemTime;

    use shardwise_cdc::{CdcRow, Consumer, ConsumerError, GroupInfo, Operation};

    use crate::common::workload::{plan, write};

    let (_front, session, ks) = setup("cdc_lease_panic").await;
    let (table, store) = shared_tables(&session, &ks).await;
    let start = SystemTime::now() - Duration::from_secs(1);
    let changes: Vec<_> = plan(40, 200, 41).into_iter().filter(|c| c.2 != Operation::RowDelete).collect();
    write(&session, &ks, &changes, changes.len(), Duration::ZERO).await;
    // One group's consumer panics; the others' take their rows.
    let panicked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
        if panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Box::new(|_: CdcRow<'_>| -> Result<(), ConsumerError> { Ok(()) });
        }
        Box::new(|_: CdcRow<'_>| -> Result<(), ConsumerError> { panic!("the consumer's own bug") })
    };
    let reader = CdcReaderBuilder::new(session.clone(), &ks, "t")
        .start(start)
        .window_size(Duration::from_secs(1))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(50))
        .workers(2)
        .streams_per_query(8)
        .checkpoints(store, Duration::from_millis(200))
        .leases(LeaseConfig::new(table.clone()).name("p").timing(Duration::from_secs(3), Duration::from_millis(500)))
        .build(Arc::new(factory))
        .await
        .expect("reader");
    let result = tokio::time::timeout(Duration::from_secs(60), reader.join()).await.expect("the reader stops");
    match result {
        Err(CdcError::Worker(message)) => assert!(message.contains("the consumer's own bug"), "{message}"),
        other => panic!("the panic is the reader's error: {other:?}"),
    }
    let log = format!("{ks}.t_scylla_cdc_log");
    assert!(table.leases(&log).await.expect("leases").is_empty(), "leases given up");
}
