//! The Kafka sink as a library inside an application: a table's changes
//! into a Kafka topic as the ScyllaDB CDC Source Connector's Debezium
//! envelopes, exactly once for `read_committed` consumers (each window is
//! one Kafka transaction with the group's checkpoint; the reader resumes
//! from the checkpoints the sink keeps in Kafka).
//!
//! ```text
//! SCYLLA_URI=127.0.0.1:9042 KAFKA_BROKERS=127.0.0.1:9092 \
//!     cargo run -p shardwise-cdc-kafka --example embedded_sink
//! ```
//!
//! It creates `examples_kafka.orders` (CDC on), writes 100 rows, runs the
//! sink over the writes' time range, and reads the topic back. It needs
//! ScyllaDB or this project's emulation front, and a Kafka broker; `cargo
//! test` runs it through the front over the test suite's Cassandra, with a
//! Kafka broker of its own.

use std::time::{Duration, SystemTime};

use shardwise::protocol::consistency::Consistency;
use shardwise::{SessionBuilder, Statement};
use shardwise_cdc::CdcReaderBuilder;
use shardwise_cdc_kafka::topic::{read_topic, Isolation};
use shardwise_cdc_kafka::{KafkaSink, SinkConfig};

async fn run(uri: &str, brokers: &str) -> Result<(), Box<dyn std::error::Error>> {
    let session = SessionBuilder::new().known_node(uri).default_consistency(Consistency::One).build().await?;
    for ddl in [
        "CREATE KEYSPACE IF NOT EXISTS examples_kafka WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "DROP TABLE IF EXISTS examples_kafka.orders",
        "CREATE TABLE examples_kafka.orders (id bigint PRIMARY KEY, item text) WITH cdc = {'enabled': true}",
    ] {
        session.execute(&Statement::new(ddl), ()).await?;
    }
    let start = SystemTime::now() - Duration::from_secs(1);
    let insert = session.prepare("INSERT INTO examples_kafka.orders (id, item) VALUES (?, ?)").await?;
    for id in 0..100_i64 {
        session.execute(&insert, (id, format!("item {id}").as_str())).await?;
    }

    // The sink: topic `<name>.<keyspace>.<table>` (the connector's), its
    // checkpoints in a topic of their own. Creating it talks to Kafka:
    // off the runtime's workers.
    let mut config = SinkConfig::new(brokers, "example", "examples_kafka", "orders");
    config.topic = format!("example.examples_kafka.orders.{}", std::process::id());
    config.checkpoint_topic = format!("{}.checkpoints", config.topic);
    // Keys of the table's partition key (and the columns' types), read from
    // the schema.
    config.load_table(&session).await?;
    let topic = config.topic.clone();
    let sink = tokio::task::spawn_blocking(move || KafkaSink::new(config)).await??;
    sink.create_topics(1).await?;
    let reader = CdcReaderBuilder::new(session.clone(), "examples_kafka", "orders")
        .start(start)
        .end(SystemTime::now() + Duration::from_secs(1))
        .window_size(Duration::from_secs(1))
        .safety_interval(Duration::from_millis(500))
        .checkpoints(std::sync::Arc::new(sink.checkpoints()), Duration::from_secs(1))
        .build(sink.factory())
        .await?;
    reader.join().await?;
    let stats = sink.stats();

    let brokers = brokers.into();
    let messages = tokio::task::spawn_blocking(move || {
        read_topic(&brokers, &topic, Isolation::ReadCommitted, Duration::from_secs(30))
    })
    .await??
    .unwrap_or_default();
    if messages.len() != 100 {
        return Err(format!("{} messages in the topic, 100 changes written ({stats:?})", messages.len()).into());
    }
    let first = messages.first().and_then(|m| m.value.as_deref()).map(String::from_utf8_lossy).unwrap_or_default();
    println!("100 changes in Kafka, in {} transactions; the first: {first}", stats.windows);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".into());
    let brokers = std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into());
    run(&uri, &brokers).await
}

/// `cargo test` runs the example through the emulation front, into a
/// Kafka broker of its own.
#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_change_reaches_the_topic() {
        use shardwise_emu::{Front, FrontConfig};
        let upstream = testkit::shared_node().expect("a Cassandra node");
        let emu_keyspace = testkit::fresh_keyspace("emu_kafka_example");
        let front = tokio::task::spawn_blocking(move || {
            Front::start(upstream, FrontConfig { shards: 2, emu_keyspace, ..FrontConfig::default() })
        })
        .await
        .expect("join")
        .expect("the front");
        let kafka =
            tokio::task::spawn_blocking(testkit::Kafka::start).await.expect("join").unwrap_or_else(|e| panic!("{e}"));
        super::run(&front.addr().to_string(), &kafka.addr().to_string()).await.expect("the example");
        tokio::task::spawn_blocking(move || drop(kafka)).await.expect("join");
    }
}
