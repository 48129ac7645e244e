//! The Kafka cluster the sink talks to: its bootstrap servers and the
//! librdkafka settings every client of the sink takes (producers, the
//! admin client that creates topics, the consumers that read checkpoints).
//! That is where a secured cluster's settings go: `security.protocol`,
//! `sasl.mechanism`, `sasl.username`, `sasl.password`, `ssl.*`, or any
//! other librdkafka property. The settings the sink's guarantees rest on
//! are its own and cannot be given ([`SINK_OWNED`]).
//!
//! Settings may also come from a properties file, as Kafka's tools take
//! them ([`read_properties`], [`parse_properties`]): `key=value` lines,
//! `#` and `!` comments.

use std::path::{Path, PathBuf};

use rdkafka::ClientConfig;

use crate::SinkError;

mod properties;
pub use properties::{parse_properties, BadLine};

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

    /// With the settings of the properties file at `path`
    /// ([`read_properties`]), after those given so far: a later
    /// [`with`](Self::with) changes one of them.
    pub fn with_properties_file(mut self, path: impl AsRef<Path>) -> Result<Self, SinkError> {
        self.settings.extend(read_properties(path.as_ref())?);
        Ok(self)
    }

    /// Refuses a setting the sink owns ([`SINK_OWNED`]).
    pub fn check(&self) -> Result<(), SinkError> {
        check_settings(&self.settings)
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

/// Refuses a setting the sink owns ([`SINK_OWNED`]).
fn check_settings(settings: &[(String, String)]) -> Result<(), SinkError> {
    match settings.iter().find(|(k, _)| SINK_OWNED.contains(&k.trim())) {
        Some((key, _)) => Err(SinkError::OwnedSetting(key.clone())),
        None => Ok(()),
    }
}

/// Why a properties file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PropertiesError {
    /// The file could not be read (or is not UTF-8).
    #[error("kafka properties file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a setting, a comment or blank.
    #[error("kafka properties file {}, {source}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, and what is wrong with it.
        source: BadLine,
    },
}

/// The settings of the properties file at `path` ([`parse_properties`]),
/// in file order; a setting the sink owns ([`SINK_OWNED`]) is refused.
pub fn read_properties(path: &Path) -> Result<Vec<(String, String)>, SinkError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| PropertiesError::Read { path: path.to_path_buf(), source })?;
    let settings =
        parse_properties(&text).map_err(|source| PropertiesError::Line { path: path.to_path_buf(), source })?;
    check_settings(&settings)?;
    Ok(settings)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::properties::tests::pairs;
    use super::*;

    #[test]
    fn a_properties_file_names_itself_in_its_errors_and_refuses_the_sinks_settings() {
        let dir = std::env::temp_dir().join(format!("shardwise-properties-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let good = file("good.properties", "security.protocol=SSL\nlinger.ms=5\n");
        let b = Brokers::new("k:9092").with_properties_file(&good).unwrap().with("linger.ms", "20");
        assert_eq!(b.settings, pairs(&[("security.protocol", "SSL"), ("linger.ms", "5"), ("linger.ms", "20")]));
        assert_eq!(b.client(&[]).get("linger.ms"), Some("20"), "a later setting wins over the file's");

        let bad = file("bad.properties", "# ok\nlinger.ms 5\n");
        let e = read_properties(&bad).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("kafka properties file {}, line 2: no `=` (or `:`) between a key and its value", bad.display())
        );
        let missing = dir.join("missing.properties");
        let e = read_properties(&missing).unwrap_err().to_string();
        assert!(e.starts_with(&format!("kafka properties file {}: ", missing.display())) && !e.contains('\n'), "{e}");
        let owned = file("owned.properties", "security.protocol=SSL\nacks=1\n");
        assert!(matches!(read_properties(&owned), Err(SinkError::OwnedSetting(k)) if k == "acks"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
