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
    // The secured listeners take connections; the certificate is PEM.
    for secured in [kafka.sasl_addr(), kafka.tls_addr(), kafka.sasl_tls_addr()] {
        std::net::TcpStream::connect_timeout(&secured, Duration::from_secs(5)).expect("a secured listener");
    }
    let pem = std::fs::read_to_string(kafka.ca_pem_path()).expect("the certificate's PEM");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    kafka.stop();
    assert!(api_versions(addr, Duration::from_secs(1)).is_err(), "stopped");
    assert!(!dir.exists(), "its directory is removed");
}
