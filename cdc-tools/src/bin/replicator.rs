//! `replicator`: follows a CDC-enabled table and replays every change into
//! another table (same or another cluster) with the source write
//! timestamps and TTLs, so replays are idempotent and order-safe. Progress
//! (rows per second) goes to stderr every second; Ctrl-C stops it after the
//! current window.
//!
//! ```text
//! replicator --node 127.0.0.1:9042 --destination 10.0.0.1:9042 \
//!     --keyspace ks --table t --destination-table t_copy --start-ago 60
//! ```
//!
//! Its flags are the printer's for the same things (`--node`, the reading,
//! checkpoint and lease flags, `--metrics-addr`), and a restart with
//! `--checkpoint-keyspace` resumes where the last run saved.

use clap::Parser;
use shardwise_cdc::replicator::Replicator;

/// Replicates a CDC-enabled table into another table.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Credentials and TLS (for both clusters).
    #[command(flatten)]
    connect: shardwise_cdc_tools::connect::ConnectArgs,
    /// A node of the source cluster (host:port).
    #[arg(long, default_value = "127.0.0.1:9042")]
    node: String,
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
    /// Range, window, workers and consistency, as the printer's.
    #[command(flatten)]
    reading: shardwise_cdc_tools::reading::ReadingArgs,
    /// Checkpoints in a table of the source cluster: a restart resumes
    /// there (replays are idempotent: a window replayed twice writes the
    /// same cells with the same timestamps).
    #[command(flatten)]
    checkpoints: shardwise_cdc_tools::checkpointing::CheckpointArgs,
    /// Share the table with other replicators (needs `--checkpoint-keyspace`).
    #[command(flatten)]
    leases: shardwise_cdc_tools::leasing::LeaseArgs,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> std::process::ExitCode {
    shardwise_cdc_tools::exit("replicator", run(Args::parse()).await)
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    args.reading.check()?;
    args.checkpoints.check(&args.leases)?;
    let source = args.connect.builder(&args.node)?.build().await?;
    let destination = match &args.destination {
        Some(d) if *d != args.node => args.connect.builder(d)?.build().await?,
        _ => source.clone(),
    };
    let dest_ks = args.destination_keyspace.clone().unwrap_or_else(|| args.keyspace.clone());
    let dest_table = args.destination_table.clone().unwrap_or_else(|| args.table.clone());
    if args.destination.as_ref().is_none_or(|d| *d == args.node) && dest_ks == args.keyspace && dest_table == args.table
    {
        return Err("the destination is the source table itself".into());
    }
    let replicator = Replicator::new(&source, &args.keyspace, &args.table, destination, &dest_ks, &dest_table).await?;
    let mut builder = args.reading.builder(source.clone(), &args.keyspace, &args.table)?;
    builder = args.checkpoints.apply(builder, &source, &args.leases).await?;
    if let Some(config) = args.leases.config(&source, &args.connect).await? {
        builder = builder.leases(config);
    }
    let reader = builder.build(replicator.clone()).await?;
    args.reading.serve_metrics("replicator", &reader, &args.keyspace, &args.table).await?;
    shardwise_cdc_tools::log_warnings(args.reading.verbose);

    let replicated = replicator.clone();
    args.reading.report_progress("replicator", "rows", &reader, move || replicated.rows())?;
    let handle = reader.handle();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("stopping after the current window");
            handle.stop();
        }
    });
    let result = reader.join().await;
    eprintln!("{} rows, {} writes", replicator.rows(), replicator.writes());
    result?;
    Ok(())
}
