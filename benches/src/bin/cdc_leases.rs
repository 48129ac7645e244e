//! What sharing a CDC log costs the cluster per heartbeat: one reader's
//! lease renewals at 100, 1,000 and 10,000 groups, as the lease holder makes
//! them (one conditional batch per 256 groups, `LeaseTable::renew_all`)
//! beside one lightweight transaction per group (`LeaseTable::renew`, how
//! the holder renewed before), against a real Cassandra.
//!
//! The session reaches the server through a fault proxy that only counts
//! (`testkit::fault`), so the conditional writes per heartbeat are counted
//! on the wire rather than inferred. Without `--node`, the suite's shared
//! Cassandra node is started (`testkit::shared_node`).
//!
//! ```text
//! cargo run --release -p shardwise-benches --bin cdc_leases -- [--node HOST:PORT] [--groups 100,1000,10000]
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use shardwise::protocol::frame::ProtocolVersion;
use shardwise::{SessionBuilder, Statement};
use shardwise_cdc::{LeaseTable, StreamId};
use testkit::fault::{Direction, FaultProxy};

/// BATCH and QUERY opcodes: a conditional batch, a single statement.
const BATCH: u8 = 0x0d;
const QUERY: u8 = 0x07;

#[derive(Parser)]
#[command(about = "LWTs and time per lease heartbeat at several group counts")]
struct Cli {
    /// A Cassandra node (default: start the suite's shared node).
    #[arg(long)]
    node: Option<String>,
    /// The group counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000, 10000])]
    groups: Vec<usize>,
    /// Heartbeats measured per count (the median is printed).
    #[arg(long, default_value_t = 5)]
    heartbeats: usize,
    /// Measure one LWT per group only up to this many groups (it takes a
    /// round trip per group).
    #[arg(long, default_value_t = 1000)]
    per_group_up_to: usize,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let node: SocketAddr = match &cli.node {
        Some(n) => {
            use std::net::ToSocketAddrs;
            n.to_socket_addrs()?.next().ok_or_else(|| anyhow!("{n}: no address"))?
        }
        None => testkit::shared_node().context("starting Cassandra")?,
    };
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(&cli, node))
}

fn group(n: usize) -> StreamId {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(n as u64 + 1).to_be_bytes());
    StreamId::from_bytes(id)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

async fn run(cli: &Cli, node: SocketAddr) -> Result<()> {
    let proxy = FaultProxy::start(node)?;
    // Protocol v4: the proxy counts v4 frames.
    let session = SessionBuilder::new()
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .known_node_addr(proxy.addr())
        .build()
        .await?;
    let ks = testkit::fresh_keyspace("cdc_leases_bench");
    session.execute(&Statement::new(testkit::create_keyspace(&ks, 1)), ()).await?;
    let table = LeaseTable::new(session.clone(), &ks, "leases");
    table.create_table().await?;
    let lwts = || proxy.frames(Direction::ToServer, BATCH) + proxy.frames(Direction::ToServer, QUERY);

    println!("| groups | LWTs per heartbeat, batched | heartbeat, batched | LWTs per heartbeat, one per group | heartbeat, one per group |");
    println!("|---:|---:|---:|---:|---:|");
    for &count in &cli.groups {
        let log = format!("bench/{count}");
        let groups: Vec<StreamId> = (0..count).map(group).collect();
        let claimed = table.claim_all(&log, &groups, "r", 600).await?;
        anyhow::ensure!(claimed.len() == count, "claimed {} of {count}", claimed.len());

        let (mut batched, mut batched_lwts) = (Vec::new(), 0);
        for _ in 0..cli.heartbeats {
            let (before, started) = (lwts(), Instant::now());
            let renewed = table.renew_all(&log, &groups, "r", 600).await?;
            batched.push(started.elapsed());
            batched_lwts = lwts() - before;
            anyhow::ensure!(renewed.len() == count, "renewed {} of {count}", renewed.len());
        }

        let per_group = if count <= cli.per_group_up_to {
            let mut times = Vec::new();
            let mut sent = 0;
            for _ in 0..cli.heartbeats.min(3) {
                let (before, started) = (lwts(), Instant::now());
                for g in &groups {
                    anyhow::ensure!(table.renew(&log, *g, "r", 600).await?, "lost {g}");
                }
                times.push(started.elapsed());
                sent = lwts() - before;
            }
            format!("{sent} | {:.0} ms", median(times).as_secs_f64() * 1000.0)
        } else {
            "— | —".to_string()
        };
        println!("| {count} | {batched_lwts} | {:.0} ms | {per_group} |", median(batched).as_secs_f64() * 1000.0);
        table.release_all(&log, &groups, "r").await?;
    }
    Ok(())
}
