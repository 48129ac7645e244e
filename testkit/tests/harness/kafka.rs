//! A real Kafka broker: resolved with Maven (once per machine), started as a
//! single KRaft node, answering on its port, and gone, directory and
//! process, once stopped.

use std::time::Duration;

use testkit::kafka::api_versions;
use testkit::Kafka;

#[test]
fn a_broker_starts_answers_and_stops() {
    let _own = crate::support::own_nodes();
    let mut kafka = Kafka::start().unwrap_or_else(|e| panic!("{e}"));
    let apis = api_versions(kafka.addr(), Duration::from_secs(5)).expect("ApiVersions");
    // Produce, Fetch, Metadata, and the transaction APIs among others.
    assert!(apis > 40, "a 3.9 broker lists its APIs: {apis}");
    let (addr, dir) = (kafka.addr(), kafka.dir().to_path_buf());
    assert!(dir.join("server.properties").is_file());
    kafka.stop();
    assert!(api_versions(addr, Duration::from_secs(1)).is_err(), "stopped");
    assert!(!dir.exists(), "its directory is removed");
}
