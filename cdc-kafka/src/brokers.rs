//! The Kafka cluster the sink talks to: its bootstrap servers and the
//! librdkafka settings every client of the sink takes (producers, the
//! admin client that creates topics, the consumers that read checkpoints).
//! That is where a secured cluster's settings go: `security.protocol`,
//! `sasl.mechanism`, `sasl.username`, `sasl.password`, `ssl.*`, or any
//! other librdkafka property. The settings the sink's guarantees rest on
//! are its own and cannot be given ([`SINK_OWNED`]).

use rdkafka::ClientConfig;

use crate::SinkError;

/// The librdkafka properties the sink sets itself: exactly once rests on
/// them (idempotence, acknowledgement by every replica, transactions and
/// their timeouts, `read_committed` reads of the checkpoints), or they have
/// a setting of their own (`bootstrap.servers`, the message timeout).
pub const SINK_OWNED: [&str; 12] = [
    "bootstrap.servers",
    "metadata.broker.list",
    "enable.idempotence",
    "acks",
    "request.required.acks",
    "transactional.id",
    "transaction.timeout.ms",
    "message.timeout.ms",
    "isolation.level",
    "group.id",
    "enable.auto.commit",
    "enable.partition.eof",
];

/// A Kafka cluster: bootstrap servers, and librdkafka settings for every
/// client of the sink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Brokers {
    /// `host:port[,host:port…]`.
    pub servers: String,
    /// librdkafka properties, set on every client after the sink's own
    /// defaults (`linger.ms`, say, may be changed; [`SINK_OWNED`] may not).
    pub settings: Vec<(String, String)>,
}

impl Brokers {
    /// The cluster at `servers`, with no settings of its own.
    pub fn new(servers: impl Into<String>) -> Self {
        Brokers { servers: servers.into(), settings: Vec::new() }
    }

    /// With the librdkafka property `key` set to `value`.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((key.into(), value.into()));
        self
    }

    /// Refuses a setting the sink owns ([`SINK_OWNED`]).
    pub fn check(&self) -> Result<(), SinkError> {
        match self.settings.iter().find(|(k, _)| SINK_OWNED.contains(&k.trim())) {
            Some((key, _)) => Err(SinkError::OwnedSetting(key.clone())),
            None => Ok(()),
        }
    }

    /// A client configuration with the servers and `defaults`, then the
    /// settings (which [`check`](Self::check) keeps off the sink's own).
    pub(crate) fn client(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut client = ClientConfig::new();
        client.set("bootstrap.servers", &self.servers);
        for (key, value) in defaults {
            client.set(*key, *value);
        }
        for (key, value) in &self.settings {
            client.set(key.trim(), value);
        }
        client
    }
}

impl From<&str> for Brokers {
    fn from(servers: &str) -> Self {
        Brokers::new(servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_go_on_every_client_but_never_over_the_sinks_own() {
        let b = Brokers::new("k:9092").with("security.protocol", "SASL_PLAINTEXT").with("linger.ms", "20");
        assert!(b.check().is_ok());
        let c = b.client(&[("linger.ms", "5")]);
        assert_eq!(c.get("bootstrap.servers"), Some("k:9092"));
        assert_eq!(c.get("security.protocol"), Some("SASL_PLAINTEXT"));
        assert_eq!(c.get("linger.ms"), Some("20"), "a setting changes a default");
        for owned in SINK_OWNED {
            let e = Brokers::new("k:9092").with(format!(" {owned}"), "x").check().expect_err(owned);
            assert!(e.to_string().contains(owned), "{e}");
        }
    }
}
