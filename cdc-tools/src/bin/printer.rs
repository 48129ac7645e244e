//! `printer`: follows a CDC-enabled table and prints every change, one line
//! each (human-readable, JSON lines with `--json`, or Debezium envelopes
//! with `--debezium NAME`), with progress (rows per second) on stderr.
//! Ctrl-C stops it after the current window.
//!
//! ```text
//! printer --node 127.0.0.1:9042 --keyspace ks --table t --start-ago 60 --json
//! ```
//!
//! With `--checkpoint-keyspace ks2` it saves its progress in
//! `ks2.cdc_checkpoints` (created if missing; see `TableCheckpointStore`)
//! and a restart resumes there: changes of the last unsaved window may be
//! printed again, none is skipped (`tests/printer.rs` kills it with SIGKILL
//! and restarts it). With `--lease-keyspace ks2` as well, any number of
//! printers share the table: each prints the groups it holds a lease of
//! (see `shardwise_cdc::lease`). `--start-unix-ms`/`--end-unix-ms` give an
//! absolute range, so that a restarted run reads the same one.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use shardwise_cdc::debezium::{Envelopes, JsonSchemas, Source, TableTypes};
use shardwise_cdc::printer::{human, json};
use shardwise_cdc::{CdcRow, Change, ChangeWithImages, Consumer, ConsumerError, GroupInfo, WithImages};
use shardwise_cdc_tools::reading::positive_seconds;

/// Prints the changes of a CDC-enabled table.
#[derive(Debug, Parser)]
#[command(version, after_help = format!("With --json: {}", shardwise_cdc::printer::JSON_VALUES))]
struct Args {
    /// Credentials and TLS.
    #[command(flatten)]
    connect: shardwise_cdc_tools::connect::ConnectArgs,
    /// A node to connect to (host:port).
    #[arg(long, default_value = "127.0.0.1:9042")]
    node: String,
    /// Keyspace of the table.
    #[arg(long)]
    keyspace: String,
    /// The base table (not its `_scylla_cdc_log`).
    #[arg(long)]
    table: String,
    /// Range, window, workers and consistency.
    #[command(flatten)]
    reading: shardwise_cdc_tools::reading::ReadingArgs,
    /// Print JSON lines instead of human-readable lines.
    #[arg(long)]
    json: bool,
    /// Print each change as the ScyllaDB CDC Source Connector's Debezium
    /// envelope, one JSON line `{"topic":…,"key":…,"value":…}`, with NAME
    /// as the connector's logical name (`before` and `after` from the
    /// table's pre- and post-images when it has them).
    #[arg(long, value_name = "NAME", conflicts_with = "json")]
    debezium: Option<String>,
    /// With `--debezium`: key and value as Kafka Connect's JSON converter
    /// writes them with `schemas.enable=true`, `{"schema":…,"payload":…}`.
    #[arg(long, requires = "debezium")]
    debezium_schemas: bool,
    /// Stop after this many seconds of changes from the start (default:
    /// follow forever; instead of `--end-unix-ms`).
    #[arg(long, conflicts_with = "end_unix_ms")]
    duration: Option<u64>,
    /// Checkpoints in a table of the cluster.
    #[command(flatten)]
    checkpoints: shardwise_cdc_tools::checkpointing::CheckpointArgs,
    /// Share the table with other printers (needs `--checkpoint-keyspace`).
    #[command(flatten)]
    leases: shardwise_cdc_tools::leasing::LeaseArgs,
    /// Print at most this many changes per second (per stream group): the
    /// printer then runs as an async consumer that awaits a timer between
    /// changes, and holds the reader back (a window counts as read, and is
    /// checkpointed, only once printed).
    #[arg(long, value_name = "CHANGES_PER_SECOND", conflicts_with = "debezium")]
    pace: Option<f64>,
}

/// The printer with `--pace`: an async consumer that prints a change, then
/// waits its turn.
struct Paced {
    as_json: bool,
    gap: Duration,
    counter: Arc<AtomicU64>,
}

impl shardwise_cdc::AsyncConsumer for Paced {
    async fn consume(&mut self, change: Change) -> Result<(), ConsumerError> {
        let line = if self.as_json { json(&change) } else { human(&change) };
        writeln!(std::io::stdout().lock(), "{line}").map_err(ConsumerError::failed)?;
        self.counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(self.gap).await;
        Ok(())
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> std::process::ExitCode {
    shardwise_cdc_tools::exit("printer", run(Args::parse()).await)
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    args.reading.check()?;
    args.checkpoints.check(&args.leases)?;
    let session = args.connect.builder(&args.node)?.build().await?;
    let mut builder = args.reading.builder(session.clone(), &args.keyspace, &args.table)?;
    if let Some(d) = args.duration {
        builder = builder.duration(Duration::from_secs(d));
    }
    builder = args.checkpoints.apply(builder, &session, &args.leases).await?;
    if let Some(config) = args.leases.config(&session, &args.connect).await? {
        builder = builder.leases(config);
    }
    let rows = Arc::new(AtomicU64::new(0));
    let no_event = Arc::new(AtomicU64::new(0));
    let reader = match args.debezium.clone() {
        Some(name) => {
            let (counter, no_event) = (rows.clone(), no_event.clone());
            let source = Source { name: &name, keyspace: &args.keyspace, table: &args.table };
            let (topic, types) = (source.topic(), TableTypes::load(&session, &args.keyspace, &args.table).await?);
            let schemas = if args.debezium_schemas { JsonSchemas::With } else { JsonSchemas::Without };
            let envelopes = Envelopes::new(&source).types(Arc::new(types)).schemas(schemas);
            let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
                let (counter, no_event) = (counter.clone(), no_event.clone());
                let (envelopes, topic) = (envelopes.clone(), topic.clone());
                Box::new(WithImages::new(move |change: ChangeWithImages| -> Result<(), ConsumerError> {
                    counter.fetch_add(1, Ordering::Relaxed);
                    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
                    let Some(e) = envelopes.envelope(&change, now_ms) else {
                        no_event.fetch_add(1, Ordering::Relaxed);
                        return Ok(());
                    };
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{{\"topic\":\"{topic}\",\"key\":{},\"value\":{}}}", e.key, e.value)
                        .map_err(ConsumerError::failed)
                }))
            };
            builder.build(Arc::new(factory)).await?
        }
        None if args.pace.is_some() => {
            let rate = args.pace.unwrap_or(1.0);
            let gap = positive_seconds("pace", 1.0 / rate)
                .map_err(|_| format!("--pace {rate}: expected a positive number of changes per second"))?;
            let (as_json, counter) = (args.json, rows.clone());
            let factory = move |_: &GroupInfo| Paced { as_json, gap, counter: counter.clone() };
            builder.build_async(factory).await?
        }
        None => {
            let (as_json, counter) = (args.json, rows.clone());
            let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
                let counter = counter.clone();
                Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
                    let change = Change::from_row(&row)?;
                    let line = if as_json { json(&change) } else { human(&change) };
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{line}").map_err(ConsumerError::failed)?;
                    counter.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
            };
            builder.build(Arc::new(factory)).await?
        }
    };
    args.reading.serve_metrics("printer", &reader, &args.keyspace, &args.table).await?;
    shardwise_cdc_tools::log_warnings(args.reading.verbose);
    let printed = rows.clone();
    args.reading.report_progress("printer", "rows", &reader, move || printed.load(Ordering::Relaxed))?;
    let handle = reader.handle();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            handle.stop();
        }
    });
    reader.join().await?;
    let skipped = no_event.load(Ordering::Relaxed);
    if skipped > 0 {
        eprintln!(
            "[printer] {skipped} changes make no Debezium row event (range deletes, TTL expirations): not printed"
        );
    }
    eprintln!("[printer] done: {} rows", rows.load(Ordering::Relaxed));
    Ok(())
}
