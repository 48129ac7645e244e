//! `replicator`: follows a CDC-enabled table and replays every change into
//! another table (same or another cluster) with the source write
//! timestamps and TTLs, so replays are idempotent and order-safe. Progress
//! (rows per second) goes to stderr every second; Ctrl-C stops it after the
//! current window.
//!
//! ```text
//! replicator --source 127.0.0.1:9042 --destination 10.0.0.1:9042 \
//!     --keyspace ks --table t --destination-table t_copy --start 60
//! ```

use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use shardwise_cdc::replicator::Replicator;
use shardwise_cdc::CdcReaderBuilder;

/// Replicates a CDC-enabled table into another table.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Credentials and TLS (for both clusters).
    #[command(flatten)]
    connect: shardwise_cdc_tools::connect::ConnectArgs,
    /// A node of the source cluster (host:port).
    #[arg(long, default_value = "127.0.0.1:9042")]
    source: String,
    /// A node of the destination cluster (default: the source).
    #[arg(long)]
    destination: Option<String>,
    /// Keyspace of the source table.
    #[arg(long)]
    keyspace: String,
    /// The source table (not its `_scylla_cdc_log`).
    #[arg(long)]
    table: String,
    /// Destination keyspace (default: the source's).
    #[arg(long)]
    destination_keyspace: Option<String>,
    /// Destination table (default: the source's).
    #[arg(long)]
    destination_table: Option<String>,
    /// Start this many seconds ago (0: now).
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Window size in seconds.
    #[arg(long, default_value_t = 60)]
    window: u64,
    /// Safety interval in seconds.
    #[arg(long, default_value_t = 30)]
    safety: u64,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Serve the reader's progress and lag (per group) as Prometheus text
    /// at http://ADDR/metrics, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> std::process::ExitCode {
    shardwise_cdc_tools::exit("replicator", run(Args::parse()).await)
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let source = args.connect.builder(&args.source)?.build().await?;
    let destination = match &args.destination {
        Some(d) if *d != args.source => args.connect.builder(d)?.build().await?,
        _ => source.clone(),
    };
    let dest_ks = args.destination_keyspace.clone().unwrap_or_else(|| args.keyspace.clone());
    let dest_table = args.destination_table.clone().unwrap_or_else(|| args.table.clone());
    if args.destination.as_ref().is_none_or(|d| *d == args.source)
        && dest_ks == args.keyspace
        && dest_table == args.table
    {
        return Err("the destination is the source table itself".into());
    }
    let replicator = Replicator::new(&source, &args.keyspace, &args.table, destination, &dest_ks, &dest_table).await?;
    let mut builder = CdcReaderBuilder::new(source, &args.keyspace, &args.table)
        .start(SystemTime::now() - Duration::from_secs(args.start))
        .window_size(Duration::from_secs(args.window.max(1)))
        .safety_interval(Duration::from_secs(args.safety));
    if let Some(w) = args.workers {
        builder = builder.workers(w);
    }
    let reader = builder.build(replicator.clone()).await?;
    if let Some(addr) = args.metrics_addr {
        let at = shardwise_cdc_tools::metrics::serve_flag(addr, &reader, &args.keyspace, &args.table).await?;
        eprintln!("metrics at http://{at}/metrics");
    }
    shardwise_cdc_tools::log_warnings(false);

    let progress = {
        let replicator = replicator.clone();
        tokio::spawn(async move {
            let mut last = (Instant::now(), 0u64);
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                let (now, rows) = (Instant::now(), replicator.rows());
                let rate = (rows - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
                eprintln!("{rows} rows, {} writes, {rate:.0} rows/s", replicator.writes());
                last = (now, rows);
            }
        })
    };
    let handle = reader.handle();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("stopping after the current window");
            handle.stop();
        }
    });
    let result = reader.join().await;
    progress.abort();
    eprintln!("{} rows, {} writes", replicator.rows(), replicator.writes());
    result?;
    Ok(())
}
