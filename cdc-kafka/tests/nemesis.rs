//! The nemesis: CDC readers in processes of their own, two `kafka-sink`s
//! and two `printer`s, each pair sharing the table through leases, follow a
//! live workload while a seeded schedule of faults hits them, one after
//! the other:
//!
//! * a reader killed with SIGKILL, and started again a little later;
//! * a reader paused with SIGSTOP past its leases, then resumed (SIGCONT);
//! * a reader cut off from the cluster (its fault proxy blackholes what it
//!   has open and what it opens) for up to six seconds, or slowed (every
//!   frame delayed): its lease queries alone, its log reads alone, or
//!   both (each reader keeps its leases on a session of their own, through
//!   a proxy of their own, and connects to the regular port only, so that
//!   every connection it has passes one of its two proxies);
//! * a new CDC generation, or a Cassandra node killed and started again
//!   on its data a few seconds later, while every reader's proxy to it
//!   blackholes (`nemesis`, on three nodes with RF 3, QUORUM reads and
//!   writes): at least once a reader is also started again while that node
//!   is unreachable;
//! * a split or merge of the table's tablets, which starts a new stream set
//!   (`nemesis_over_tablets`, on one node).
//!
//! On three nodes a reader reaches each node through a proxy of its own
//! (its sessions translate the nodes' addresses, `--translate-address`),
//! and its partitions and slow links hit all of them; on one node the
//! lease queries and the log reads have a proxy each and are hit apart.
//!
//! Then a checker reads everything delivered and reports, per acknowledged
//! write, whether it was delivered, how many times, and in which order per
//! key. Required: no write lost by either pair; through Kafka read with
//! `read_committed`, none repeated; printers' repeats bounded (each fault
//! that takes groups over repeats at most what the groups' old holder read
//! after its last checkpoint: here a few windows).
//!
//! The effects of the faults are observed, not read from the schedule: a
//! fault counts as moving groups when the printers' checkpoint table shows
//! a group fenced again (its epoch risen) while it went on, and a
//! partition as cutting a reader off when its proxies swallowed bytes.
//!
//! `NEMESIS_SECONDS` sets how long faults are made (90 s on three nodes
//! and 30 s on tablets by default; `cargo xtask test` runs both);
//! `NEMESIS_SEED` replays a schedule (by default one from the clock). It
//! prints its seed, its schedule and its figures; `cargo xtask nemesis
//! --minutes N --seed S` runs it longer.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shardwise::cluster::DistancePolicy;
use shardwise::protocol::consistency::Consistency;
use shardwise_cdc::Operation;
use shardwise_emu::{FrontHandle, Resize};
use testkit::fault::{Direction, FaultProxy, OnAccept, Rule};
use testkit::{Cluster, Kafka};

use shardwise_cdc_testkit as common;
mod support;
use common::workload::{create_table, plan, safety_arg, write_until};
use common::{exit_of, signal};
use support::{changes_of, committed, Keyed};

/// A small seeded generator (SplitMix64): the schedule is a function of
/// the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

/// One fault of the schedule.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL the reader, start it again after this long.
    Kill(usize, Duration),
    /// SIGSTOP the reader this long (past its TTL), then SIGCONT.
    Pause(usize, Duration),
    /// Blackhole the reader's connections to `Target` this long.
    Partition(usize, Target, Duration),
    /// Delay every frame of the reader to `Target` by the first, for the second.
    Slow(usize, Target, Duration, Duration),
    /// A new CDC generation, two seconds ahead.
    Generation,
    /// Cassandra node `.0` (1 or 2: node 0 coordinates the writes) killed
    /// and every reader's proxy to it blackholed for `.1`, then the node
    /// started again on its data; with `.2`, that reader is also killed
    /// and started again while the node is down.
    NodeDown(usize, Duration, Option<usize>),
    /// The table's tablets split or merged (a new stream set).
    Resize(Resize),
}

/// How the table is distributed, and so which faults change its streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Vnodes on three nodes: new CDC generations, nodes down.
    Vnodes,
    /// Tablets, four to begin with: splits and merges.
    Tablets,
}

/// Which of a reader's sessions a fault hits.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The lease queries (renewals, claims, releases).
    Leases,
    /// The log reads, checkpoints and generations.
    Reads,
    /// Both.
    Both,
}

/// The schedule of `seed` over `seconds`: a fault every 2 to 6 seconds.
fn schedule(seed: u64, seconds: u64, readers: usize, layout: Layout) -> Vec<(Duration, Fault)> {
    let mut rng = Rng(seed);
    let (mut at, mut faults, mut generations) = (Duration::ZERO, Vec::new(), 0);
    let (mut tablets, mut nodes_down) = (4, 0);
    loop {
        at += Duration::from_millis(rng.range(2000, 6000));
        if at.as_secs() >= seconds {
            return faults;
        }
        let reader = rng.range(0, readers as u64) as usize;
        let ms = |rng: &mut Rng, lo, hi| Duration::from_millis(rng.range(lo, hi));
        let target = |rng: &mut Rng| [Target::Leases, Target::Reads, Target::Both][rng.range(0, 3) as usize];
        let node_down = |rng: &mut Rng, reader| Fault::NodeDown(rng.range(1, 3) as usize, ms(rng, 2000, 8000), reader);
        if layout == Layout::Vnodes && nodes_down == 0 && at.as_secs() >= seconds / 3 {
            // Once in every run: a node down, and a reader started again
            // while it is.
            nodes_down += 1;
            faults.push((at, node_down(&mut rng, Some(reader))));
            continue;
        }
        if generations == 0 && at.as_secs() >= seconds / 2 {
            // Once in every run at least: the streams change (a new
            // generation, or a split of the tablets).
            generations += 1;
            let fault = match layout {
                Layout::Vnodes => Fault::Generation,
                Layout::Tablets => {
                    tablets *= 2;
                    Fault::Resize(Resize::Split)
                }
            };
            faults.push((at, fault));
            continue;
        }
        let fault = match rng.range(0, 11) {
            0..=2 => Fault::Kill(reader, ms(&mut rng, 200, 3000)),
            3..=5 => Fault::Pause(reader, ms(&mut rng, layout.ttl_ms() + 500, layout.ttl_ms() + 3000)),
            6 | 7 => Fault::Partition(reader, target(&mut rng), ms(&mut rng, 500, 6000)),
            8 => Fault::Slow(reader, target(&mut rng), ms(&mut rng, 50, 400), ms(&mut rng, 1000, 5000)),
            9 if generations < 2 && layout == Layout::Vnodes => {
                generations += 1;
                Fault::Generation
            }
            10 if nodes_down <= seconds / 150 && layout == Layout::Vnodes => {
                nodes_down += 1;
                let restarted = (rng.range(0, 2) == 0).then_some(reader);
                node_down(&mut rng, restarted)
            }
            9 | 10 if generations < 3 && layout == Layout::Tablets => {
                generations += 1;
                if tablets <= 4 && rng.range(0, 4) != 0 || tablets == 2 {
                    tablets *= 2;
                    Fault::Resize(Resize::Split)
                } else {
                    tablets /= 2;
                    Fault::Resize(Resize::Merge)
                }
            }
            _ => Fault::Kill(reader, ms(&mut rng, 200, 3000)),
        };
        faults.push((at, fault));
    }
}

/// Every schedule changes the streams at least once (a generation on
/// vnodes, a split or merge on tablets), and the vnodes one takes a node
/// down: a run drawn without them would test less than its seed says.
#[test]
fn every_schedule_changes_the_streams() {
    for seed in 0..500u64 {
        let seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let tablets = schedule(seed, 30, 4, Layout::Tablets);
        assert!(tablets.iter().any(|(_, f)| matches!(f, Fault::Resize(_))), "seed {seed}: no resize: {tablets:?}");
        let vnodes = schedule(seed, 45, 4, Layout::Vnodes);
        assert!(vnodes.iter().any(|(_, f)| matches!(f, Fault::Generation)), "seed {seed}: no generation: {vnodes:?}");
        assert!(vnodes.iter().any(|(_, f)| matches!(f, Fault::NodeDown(..))), "seed {seed}: no node down: {vnodes:?}");
    }
}

impl Layout {
    /// The lease TTL of the readers, and their heartbeat (seconds, as the
    /// readers take it). Longer on three nodes: there an LWT on the
    /// project's 2-core machine, beside three JVMs, often takes more than
    /// the second that a 3 s TTL leaves a lease request, and a reader
    /// then loses its leases over and over (a printer read 5 rows a
    /// second of the 50 written).
    fn ttl_ms(self) -> u64 {
        match self {
            Layout::Vnodes => 6000,
            Layout::Tablets => 3000,
        }
    }

    fn heartbeat(self) -> &'static str {
        match self {
            Layout::Vnodes => "1",
            Layout::Tablets => "0.5",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sink,
    Printer,
}

/// One reader: its process (none while killed), and its proxies to the
/// cluster: on one node, one for its log reads and one for its leases; on
/// three, one per node for both.
struct Reader {
    name: String,
    kind: Kind,
    /// Per node of the cluster, the proxy the reader reaches it through.
    reads: Vec<FaultProxy>,
    /// The proxy of its lease queries, on one node.
    leases: Option<FaultProxy>,
    child: Option<Child>,
    /// One output file per run (printers).
    outputs: Vec<PathBuf>,
}

/// Where the readers read, and until when.
struct Setup {
    /// The keyspace of the leases and checkpoints.
    ks: String,
    /// The keyspace of the table read.
    table_ks: String,
    brokers: String,
    dir: PathBuf,
    range: (u64, u64),
    printer: PathBuf,
    /// The front's node addresses (one, or three).
    nodes: Vec<std::net::SocketAddr>,
    /// The consistency of the reads.
    consistency: &'static str,
    layout: Layout,
}

impl Reader {
    fn start(&mut self, setup: &Setup) {
        let node = self.reads[0].addr().to_string();
        let lease_node = self.leases.as_ref().unwrap_or(&self.reads[0]).addr().to_string();
        let (start, end) = (setup.range.0.to_string(), setup.range.1.to_string());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(setup.dir.join(format!("{}.log", self.name)))
            .expect("reader log");
        let mut command = match self.kind {
            Kind::Sink => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_kafka-sink"));
                // Each window with changes is a Kafka transaction: fewer,
                // larger windows than the printers'.
                c.args(["--brokers", &setup.brokers, "--name", "cluster", "--partitions", "3", "--sleep", "0.5"])
                    .args(["--lease-table", "sink_leases", "--kafka-timeout", "20"])
                    .stdout(Stdio::null());
                c
            }
            Kind::Printer => {
                let out = setup.dir.join(format!("{}-{}.jsonl", self.name, self.outputs.len()));
                let file = std::fs::File::create(&out).expect("printer output");
                self.outputs.push(out);
                let mut c = Command::new(&setup.printer);
                c.args(["--json", "--checkpoint-keyspace", &setup.ks, "--lease-table", "printer_leases"])
                    .args(["--sleep", "0.05"])
                    .stdout(Stdio::from(file));
                c
            }
        };
        command
            .args(["--node", &node, "--keyspace", &setup.table_ks, "--table", "t", "--consistency", setup.consistency])
            .args(["--start-unix-ms", &start, "--end-unix-ms", &end])
            .args(["--window", "1", "--safety", safety_arg().as_str(), "--workers", "2"])
            .args(["--checkpoint-interval", "0.2", "--streams-per-query", "4"])
            .args(["--lease-keyspace", &setup.ks, "--reader-name", &self.name, "--lease-node", &lease_node])
            .arg("--disallow-shard-aware-port")
            .args(self.translations(setup))
            .args(["--lease-ttl", &(setup.layout.ttl_ms() / 1000).to_string()])
            .args(["--lease-heartbeat", setup.layout.heartbeat()])
            .stderr(Stdio::from(log))
            .stdin(Stdio::null());
        self.child = Some(command.spawn().expect("spawn a reader"));
    }
}

impl Reader {
    /// The proxies `target` names: on three nodes, every proxy.
    fn proxies(&self, target: Target) -> Vec<&FaultProxy> {
        let Some(leases) = &self.leases else { return self.reads.iter().collect() };
        match target {
            Target::Leases => vec![leases],
            Target::Reads => self.reads.iter().collect(),
            Target::Both => std::iter::once(leases).chain(&self.reads).collect(),
        }
    }

    /// On three nodes, `--translate-address` for each: the reader reaches
    /// every node through its own proxy.
    fn translations(&self, setup: &Setup) -> Vec<String> {
        if setup.nodes.len() < 2 {
            return Vec::new();
        }
        let pairs = setup.nodes.iter().zip(&self.reads);
        pairs
            .flat_map(|(node, proxy)| ["--translate-address".to_owned(), format!("{}={}", node.ip(), proxy.addr())])
            .collect()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = signal_quietly(child, "CONT");
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn signal_quietly(child: &Child, signal: &str) -> std::io::Result<std::process::ExitStatus> {
    Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status()
}

/// The `printer` of `shardwise-cdc-tools`: the one `cargo xtask test` built
/// (`SHARDWISE_PRINTER`), else built here beside this package's binaries (a
/// test sees only its own package's); its path.
fn printer() -> PathBuf {
    if let Some(built) = std::env::var_os("SHARDWISE_PRINTER").map(PathBuf::from).filter(|p| p.is_file()) {
        return built;
    }
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "shardwise-cdc-tools", "--bin", "printer"])
        .status()
        .expect("cargo build");
    assert!(status.success(), "building the printer: {status}");
    let dir = std::path::Path::new(env!("CARGO_BIN_EXE_kafka-sink")).parent().expect("the binaries' directory");
    dir.join(format!("printer{}", std::env::consts::EXE_SUFFIX))
}

/// How many times the printers fenced a group that had been fenced before
/// (each takeover raises its epoch), over every generation: the sum of
/// `epoch - 1` in their checkpoint table (0 before it exists; `None` when
/// it cannot be read now).
async fn refences(session: &shardwise::Session, ks: &str) -> Option<i64> {
    let query = shardwise::Statement::new(format!("SELECT epoch FROM {ks}.cdc_checkpoints"));
    let result = match session.execute(&query, ()).await {
        Ok(result) => result,
        // 0x2200: no such table yet.
        Err(shardwise::ExecutionError::Db(e)) if e.code == 0x2200 => return Some(0),
        Err(_) => return None,
    };
    let rows = result.rows::<(Option<i64>,)>().ok()?;
    Some(rows.filter_map(Result::ok).filter_map(|(e,)| e).map(|e| (e - 1).max(0)).sum())
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value}: not a number")))
}

/// The nemesis on a table of a vnodes keyspace on three nodes: faults, new
/// generations, nodes down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nemesis() {
    run(Layout::Vnodes, 90).await;
}

/// Three Cassandra nodes whose data outlives a kill, a front over them
/// (two shards a node), a writer session that coordinates through node 0
/// only (never killed: with RF 3 at QUORUM its writes need one more node
/// alive), and a keyspace with RF 3.
async fn three_nodes() -> (Cluster, FrontHandle, shardwise::Session, String) {
    let started = Instant::now();
    let cluster = tokio::task::spawn_blocking(|| Cluster::start_restartable(3)).await.expect("join").expect("3 nodes");
    eprintln!("nemesis: three nodes up in {:.0} s", started.elapsed().as_secs_f64());
    let front = common::front_over(cluster.contact_points(), "nemesis", 2).await;
    let coordinator = front.nodes()[0].addr;
    let distance = DistancePolicy { allow: Some(vec![coordinator.ip()]), ..DistancePolicy::default() };
    let session = shardwise::SessionBuilder::new()
        .known_node_addr(coordinator)
        .disallow_shard_aware_port(true)
        .distance_policy(distance)
        .default_consistency(Consistency::Quorum)
        .build()
        .await
        .expect("session");
    let ks = testkit::fresh_keyspace("nemesis");
    common::run(&session, &testkit::create_keyspace(&ks, 3)).await;
    (cluster, front, session, ks)
}

/// The nemesis on a table of a tablets keyspace: faults, and splits and
/// merges of its tablets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nemesis_over_tablets() {
    run(Layout::Tablets, 30).await;
}

/// One nemesis at a time: each loads the machine as much as it takes.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Faults for `NEMESIS_SECONDS` (else `default_seconds`), then the checker.
async fn run(layout: Layout, default_seconds: u64) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let seconds = env_u64("NEMESIS_SECONDS").unwrap_or(default_seconds);
    let seed = env_u64("NEMESIS_SEED")
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos() as u64);
    let faults = schedule(seed, seconds, 4, layout);
    eprintln!("nemesis ({layout:?}): seed {seed} (NEMESIS_SEED={seed} replays this schedule), {seconds} s of faults:");
    for (at, fault) in &faults {
        eprintln!("  {:>6.1} s  {fault:?}", at.as_secs_f64());
    }
    let printer = printer();
    let mut kafka = tokio::task::spawn_blocking(Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
    // The writers keep to the regular port too: the front's shard-aware
    // port is then for no one, and any connection to it is a reader's.
    let (cluster, front, session, ks) = match layout {
        Layout::Vnodes => {
            let (cluster, front, session, ks) = three_nodes().await;
            (Some(Arc::new(Mutex::new(cluster))), front, session, ks)
        }
        Layout::Tablets => {
            let cassandra = testkit::shared_node().expect("server");
            let writers = shardwise::SessionBuilder::new().disallow_shard_aware_port(true);
            let (front, session, ks) = common::front_and_keyspace_with("nemesis", cassandra, writers).await;
            (None, front, session, ks)
        }
    };
    let nodes: Vec<_> = front.nodes().iter().map(|n| n.addr).collect();
    // The leases and checkpoints live in `ks`, the table read in `table_ks`.
    let table_ks = match layout {
        Layout::Vnodes => ks.clone(),
        Layout::Tablets => common::tablets_keyspace(&session, "nemesis_tablets", 4).await,
    };
    create_table(&session, &table_ks).await;
    let dir = std::env::temp_dir().join(format!("shardwise-nemesis-{}-{ks}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64;

    // The workload spans the faults: a tenth of `per_second` changes every
    // 100 ms at most (as many as the machine takes), until the faults end;
    // on three nodes (QUORUM reads and writes, three JVMs on the machine)
    // half as many as on one, so that the readers keep up over a long run.
    // Inserts and updates only, so that a printed change is known by its
    // value.
    let per_second = if layout == Layout::Vnodes { 50 } else { 100 };
    let mut plan: Vec<_> =
        plan(50, (seconds + 5) as i64 * per_second, seed).into_iter().filter(|c| c.2 != Operation::RowDelete).collect();
    let start = SystemTime::now() - Duration::from_millis(500);
    let end = SystemTime::now() + Duration::from_secs(seconds + 40);
    let setup = Setup {
        ks: ks.clone(),
        table_ks: table_ks.clone(),
        brokers: kafka.addr().to_string(),
        dir: dir.clone(),
        range: (ms(start), ms(end)),
        printer,
        nodes: nodes.clone(),
        consistency: if nodes.len() > 1 { "QUORUM" } else { "ONE" },
        layout,
    };
    let mut readers: Vec<Reader> =
        [("k0", Kind::Sink), ("k1", Kind::Sink), ("p0", Kind::Printer), ("p1", Kind::Printer)]
            .into_iter()
            .map(|(name, kind)| Reader {
                name: name.into(),
                kind,
                reads: nodes.iter().map(|&n| FaultProxy::start(n).expect("proxy")).collect(),
                leases: (nodes.len() == 1).then(|| FaultProxy::start(nodes[0]).expect("proxy")),
                child: None,
                outputs: Vec::new(),
            })
            .collect();
    let shard_aware =
        |front: &shardwise_emu::FrontHandle| front.stats().nodes.iter().map(|n| n.shard_aware_accepted).sum::<u64>();
    for r in &mut readers {
        r.start(&setup);
    }
    let writer = {
        let (session, ks, plan) = (session.clone(), table_ks.clone(), plan.clone());
        let until = Instant::now() + Duration::from_secs(seconds + 5);
        let tick = Duration::from_millis(100);
        tokio::spawn(
            async move { write_until(&session, &ks, &plan, per_second as usize / 10, tick, Some(until)).await },
        )
    };

    // The faults, one after the other; each counts as moving groups when
    // the printers fenced a group again while it went on.
    let began = Instant::now();
    let (mut takeovers, mut refenced, mut last) = (0, refences(&session, &ks).await.unwrap_or(0), None);
    let mut partitions: Vec<usize> = Vec::new();
    // A node started again while the faults go on (it takes half a minute
    // on a loaded machine); the next node down waits for it.
    let mut restarting: Option<tokio::task::JoinHandle<()>> = None;
    for (at, fault) in &faults {
        tokio::time::sleep((began + *at).saturating_duration_since(Instant::now())).await;
        if let Some(now) = refences(&session, &ks).await {
            if now > refenced {
                takeovers += 1;
                eprintln!("nemesis: groups fenced again ({refenced} -> {now}) after {last:?}");
            }
            (refenced, last) = (now, Some(*fault));
        }
        match *fault {
            Fault::Kill(i, down) => {
                let r = &mut readers[i];
                if let Some(mut child) = r.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                tokio::time::sleep(down).await;
                r.start(&setup);
            }
            Fault::Pause(i, paused) => {
                let child = readers[i].child.as_ref().expect("running");
                signal(child, "STOP");
                tokio::time::sleep(paused).await;
                signal(child, "CONT");
            }
            Fault::Partition(i, target, cut) => {
                let proxies = readers[i].proxies(target);
                let swallowed = |proxies: &[&FaultProxy]| proxies.iter().map(|p| p.bytes_swallowed()).sum::<usize>();
                let before = swallowed(&proxies);
                for proxy in &proxies {
                    proxy.on_accept(OnAccept::Blackhole);
                    proxy.blackhole_open_connections();
                }
                tokio::time::sleep(cut).await;
                for proxy in &proxies {
                    proxy.on_accept(OnAccept::Forward);
                }
                partitions.push(swallowed(&proxies) - before);
            }
            Fault::Slow(i, target, delay, lasting) => {
                let proxies = readers[i].proxies(target);
                for proxy in &proxies {
                    proxy.set_rules(vec![Rule::new(testkit::fault::Action::Delay(delay))]);
                }
                tokio::time::sleep(lasting).await;
                for proxy in &proxies {
                    proxy.clear_rules();
                }
            }
            Fault::NodeDown(node, down, restarted) => {
                if let Some(previous) = restarting.take() {
                    previous.await.expect("a node started again");
                }
                let cluster = cluster.clone().expect("three nodes");
                tokio::task::block_in_place(|| cluster.lock().expect("cluster").nodes_mut()[node].kill());
                for r in &readers {
                    r.reads[node].on_accept(OnAccept::Blackhole);
                    r.reads[node].blackhole_open_connections();
                }
                if let Some(i) = restarted {
                    let r = &mut readers[i];
                    if let Some(mut child) = r.child.take() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                    r.start(&setup);
                }
                tokio::time::sleep(down).await;
                for r in &readers {
                    r.reads[node].on_accept(OnAccept::Forward);
                }
                restarting = Some(tokio::task::spawn_blocking(move || {
                    let began = Instant::now();
                    cluster.lock().expect("cluster").restart(node).expect("a node started again on its data");
                    eprintln!("nemesis: node {node} back after {:.0} s", began.elapsed().as_secs_f64());
                }));
            }
            Fault::Generation => {
                front.new_generation_at(SystemTime::now() + Duration::from_secs(2)).await.expect("a generation");
            }
            Fault::Resize(resize) => {
                let resized = front.resize_tablets(&table_ks, "t", resize).await.expect("a resize");
                assert!(resized.is_some(), "{resize:?} of {table_ks}.t");
            }
        }
    }
    plan.truncate(writer.await.expect("writer"));
    assert!(SystemTime::now() + Duration::from_secs(3) < end, "the writes ended before the readers' end");
    if let Some(last) = restarting.take() {
        last.await.expect("a node started again");
    }
    eprintln!("nemesis: faults and writes done after {:.0} s", began.elapsed().as_secs_f64());

    // Every reader runs to the end.
    // Readers behind after a long run catch up at their own pace.
    let deadline = Instant::now() + Duration::from_secs(240 + seconds);
    for r in &mut readers {
        let child = r.child.as_mut().expect("running");
        let status = exit_of(child, deadline, &format!("{} (its log is in {})", r.name, dir.display())).await;
        r.child = None;
        assert!(status.success(), "{} finished cleanly: {status:?}; its log is in {}", r.name, dir.display());
        eprintln!("nemesis: {} finished after {:.0} s", r.name, began.elapsed().as_secs_f64());
    }
    let now = refences(&session, &ks).await.expect("the printers' checkpoints");
    if now > refenced {
        takeovers += 1;
        eprintln!("nemesis: groups fenced again ({refenced} -> {now}) after {last:?}");
    }
    // A partition counts when it cut something off (one shorter than the
    // reader's pauses between requests may find nothing to swallow).
    let cut = partitions.iter().filter(|&&n| n > 0).count();
    eprintln!("nemesis: bytes each partition swallowed: {partitions:?}");

    // Every connection of the readers passed their proxies: none reached
    // the shard-aware port, and each proxy carried requests.
    assert_eq!(shard_aware(&front), 0, "a reader connected to the shard-aware port");
    for r in &readers {
        for (what, proxy) in [("reads", Some(&r.reads[0])), ("leases", r.leases.as_ref())] {
            let Some(proxy) = proxy else { continue };
            let requests = proxy.frames(Direction::ToServer, 0x0a) + proxy.frames(Direction::ToServer, 0x07);
            assert!(requests > 0, "{}: no request through its {what} proxy", r.name);
        }
        if r.reads.len() > 1 {
            let others = r.reads[1..].iter().map(|p| p.frames(Direction::ToServer, 0x0a)).sum::<usize>();
            assert!(others > 0, "{}: no request through its proxies to the other nodes", r.name);
        }
    }

    // The checker. Per acknowledged write (known by its value): delivered
    // through Kafka how many times, and by the printers how many times.
    let written: BTreeMap<i64, (i32, i32)> =
        plan.iter().map(|&(pk, ck, _, v)| (v.expect("a value"), (pk, ck))).collect();
    let mut expected = Keyed::new();
    for &(pk, ck, op, v) in &plan {
        expected.entry((pk, ck)).or_default().push((op, v));
    }
    let (brokers, topic) = (setup.brokers.clone(), format!("cluster.{table_ks}.t"));
    let messages = tokio::task::spawn_blocking(move || committed(&brokers, &topic)).await.expect("join");
    let (through_kafka, n) = changes_of(&messages);
    let mut kafka_times: HashMap<i64, usize> = HashMap::new();
    for v in through_kafka.values().flatten().filter_map(|(_, v)| *v) {
        *kafka_times.entry(v).or_default() += 1;
    }
    let mut printed_times: HashMap<i64, usize> = HashMap::new();
    for out in readers.iter().flat_map(|r| &r.outputs) {
        let text = std::fs::read_to_string(out).expect("printer output");
        // A line cut by a kill has no newline: it was not delivered.
        let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
        for line in complete.lines() {
            let v = support::number_after(line, "\"v\":").unwrap_or_else(|| panic!("no v in {line}"));
            *printed_times.entry(v).or_default() += 1;
        }
    }
    let lost = |times: &HashMap<i64, usize>| written.keys().filter(|v| !times.contains_key(v)).count();
    let repeated = |times: &HashMap<i64, usize>| times.values().map(|&t| t.saturating_sub(1)).sum::<usize>();
    let (kafka_lost, kafka_repeated) = (lost(&kafka_times), repeated(&kafka_times));
    let (printer_lost, printer_repeated) = (lost(&printed_times), repeated(&printed_times));
    let out_of_order = expected.iter().filter(|(key, ops)| through_kafka.get(key) != Some(ops)).count();
    eprintln!(
        "nemesis: seed {seed}: {} acknowledged writes, {} faults ({takeovers} that moved groups, {cut} of {} \
         partitions that cut something off); \
         Kafka (read_committed): {n} messages, {kafka_lost} lost, {kafka_repeated} repeated, {out_of_order} keys \
         out of order; printers: {printer_lost} lost, {printer_repeated} repeated",
        written.len(),
        faults.len(),
        partitions.len()
    );
    assert_eq!(kafka_lost, 0, "seed {seed}: no write lost through Kafka");
    assert_eq!(kafka_repeated, 0, "seed {seed}: no write repeated through Kafka");
    assert_eq!(out_of_order, 0, "seed {seed}: every key's changes in write order through Kafka");
    assert_eq!(n, written.len(), "seed {seed}: nothing in the topic that was not written");
    assert_eq!(printer_lost, 0, "seed {seed}: no write lost by the printers");
    // Each fault that moved groups (seen in the checkpoint table) repeats
    // at most what their old holder read after its last checkpoint (0.2 s)
    // and the window under way, and a pause also what the paused holder
    // printed before it saw its lease gone: a few windows of a few groups.
    // Bounded here by two seconds of the workload per such fault.
    let bound = (takeovers + 1) * 2 * per_second as usize;
    assert!(printer_repeated <= bound, "seed {seed}: printers repeated {printer_repeated} > {bound}");
    if std::env::var_os("NEMESIS_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    kafka.stop();
    if let Some(cluster) = cluster {
        tokio::task::spawn_blocking(move || drop(cluster)).await.expect("join");
    }
}
