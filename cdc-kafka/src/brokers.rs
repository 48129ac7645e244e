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

/// A line of a properties file that is not a setting, a comment or blank
/// (its text is not repeated: it may hold a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct BadLine {
    /// The line's number, from 1 (the first of a line continued with `\`).
    pub line: usize,
    /// What is wrong with it.
    pub reason: &'static str,
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

/// The settings of a properties file's text, in order, as Kafka's tools
/// (Java's `Properties`) read them, except that a key and its value must
/// be separated by `=` or `:`:
///
/// * one `key=value` (or `key: value`) a line; whitespace around the key
///   and before the value is dropped;
/// * lines whose first character other than whitespace is `#` or `!` are
///   comments, and blank lines are skipped;
/// * a line that ends with an odd number of `\` goes on on the next one
///   (whose leading whitespace is dropped);
/// * `\t`, `\n`, `\r`, `\f` and `\uXXXX` are escapes, and `\` before any
///   other character stands for that character (`\=`, `\:`, `\#`, `\\`).
///
/// A line with no separator, an empty key or a malformed `\u` escape is
/// an error naming the line.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, BadLine> {
    let is_blank = |c: char| matches!(c, ' ' | '\t' | '\x0c');
    let mut settings = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    while let Some((number, first)) = lines.next() {
        let first = first.trim_start_matches(is_blank);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = String::from(first);
        while ends_continued(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let bad = |reason| BadLine { line: number, reason };
        settings.push(parse_line(&logical).map_err(bad)?);
    }
    Ok(settings)
}

/// Whether `line` ends with an odd number of backslashes.
fn ends_continued(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// One logical line: the key (up to the first unescaped `=` or `:`, trimmed)
/// and the value (its leading whitespace dropped), escapes resolved.
fn parse_line(line: &str) -> Result<(String, String), &'static str> {
    let is_blank = |c: char| matches!(c, ' ' | '\t' | '\x0c');
    let mut chars = line.chars();
    let mut key = String::new();
    let mut separated = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => key.push(unescape(&mut chars)?),
            '=' | ':' => {
                separated = true;
                break;
            }
            c if is_blank(c) => {
                // Whitespace ends the key; `=` or `:` must come next.
                let rest = chars.as_str().trim_start_matches(is_blank);
                chars = rest.chars();
                match chars.next() {
                    Some('=' | ':') => separated = true,
                    _ => return Err("no `=` (or `:`) between a key and its value"),
                }
                break;
            }
            c => key.push(c),
        }
    }
    if !separated {
        return Err("no `=` (or `:`) between a key and its value");
    }
    if key.is_empty() {
        return Err("no key before the `=`");
    }
    let mut chars = chars.as_str().trim_start_matches(is_blank).chars();
    let mut value = String::new();
    while let Some(c) = chars.next() {
        value.push(if c == '\\' { unescape(&mut chars)? } else { c });
    }
    Ok((key, value))
}

/// The character an escape stands for, the backslash just read.
fn unescape(chars: &mut std::str::Chars<'_>) -> Result<char, &'static str> {
    Ok(match chars.next() {
        Some('t') => '\t',
        Some('n') => '\n',
        Some('r') => '\r',
        Some('f') => '\x0c',
        Some('u') => {
            let hex: String = chars.by_ref().take(4).collect();
            let code = (hex.len() == 4 && hex.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(&hex, 16).ok())
                .flatten()
                .and_then(char::from_u32);
            code.ok_or("a `\\u` escape that is not four hexadecimal digits of a character")?
        }
        Some(c) => c,
        None => return Err("a line that ends in a lone `\\`"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pairs(settings: &[(&str, &str)]) -> Vec<(String, String)> {
        settings.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_properties_file_is_read_as_kafkas_tools_read_it() {
        let text = "# a secured cluster\n\
                    ! another comment\n\
                    \n\
                    \t  \n\
                    security.protocol=SASL_SSL\n\
                    \x20 sasl.mechanism = SCRAM-SHA-512\r\n\
                    sasl.username: alice\n\
                    sasl.password=p=a:ss word \n\
                    ssl.ca.location=/etc/kafka/ca.pem\n\
                    client.id=a\\\n\
                    \x20   b\n\
                    escaped\\=key=\\u0041\\t\\\\\\#\n\
                    empty.value=\n\
                    linger.ms=5\n\
                    linger.ms=20";
        assert_eq!(
            parse_properties(text).unwrap(),
            pairs(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "alice"),
                ("sasl.password", "p=a:ss word "),
                ("ssl.ca.location", "/etc/kafka/ca.pem"),
                ("client.id", "ab"),
                ("escaped=key", "A\t\\#"),
                ("empty.value", ""),
                ("linger.ms", "5"),
                ("linger.ms", "20"),
            ])
        );
        assert_eq!(parse_properties("").unwrap(), []);
        // An even number of backslashes ends the line; a last line may end continued.
        assert_eq!(parse_properties("a=x\\\\\nb=y\\").unwrap(), pairs(&[("a", "x\\"), ("b", "y")]));
    }

    #[test]
    fn a_bad_line_is_named_and_its_text_not_repeated() {
        for (text, line, reason) in [
            ("a=1\nsecurity.protocol SASL_SSL\n", 2, "no `=`"),
            ("# c\n\nsasl.password\n", 3, "no `=`"),
            ("a=1\n=secret\n", 2, "no key"),
            ("a=1\\\n  b\nc=\\u00g1\n", 3, "`\\u` escape"),
            ("x=\\u12", 1, "`\\u` escape"),
            ("x=\\uD800", 1, "`\\u` escape"),
        ] {
            let e = parse_properties(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.reason.contains(reason), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
        }
        assert!(!parse_properties("sasl.password\n").unwrap_err().to_string().contains("password"));
    }

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
