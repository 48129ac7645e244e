//! How a test node is configured: the `cassandra.yaml` it reads, the logback
//! configuration, and the JVM command line.
//!
//! Everything here is pure (strings in, strings out) so it is unit-tested
//! without starting Java. The settings beyond the minimal configuration of
//! `docs/cassandra-on-java17.md` were each checked against the log of a real
//! Cassandra 5.0.4 on this project's 2-core machine; see [`NodeConfig`] for
//! what each buys.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{HarnessError, Result};

/// The `--add-exports` that Cassandra's `conf/jvm17-server.options` supplies.
pub const JVM17_ADD_EXPORTS: &[&str] = &[
    "java.base/jdk.internal.misc",
    "java.base/jdk.internal.ref",
    "java.base/sun.nio.ch",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi",
    "java.rmi/sun.rmi.registry",
    "java.rmi/sun.rmi.server",
    "java.sql/java.sql",
];

/// The `--add-opens` that Cassandra's `conf/jvm17-server.options` supplies.
pub const JVM17_ADD_OPENS: &[&str] = &[
    "java.base/java.lang.module",
    "java.base/jdk.internal.loader",
    "java.base/jdk.internal.ref",
    "java.base/jdk.internal.reflect",
    "java.base/jdk.internal.math",
    "java.base/jdk.internal.module",
    "java.base/jdk.internal.util.jar",
    "jdk.management/com.sun.management.internal",
    "java.base/sun.nio.ch",
    "java.base/java.io",
    "java.base/java.nio",
    "java.base/java.util.concurrent",
    "java.base/java.util",
    "java.base/java.util.concurrent.atomic",
    "java.base/java.lang",
    "java.base/java.math",
    "java.base/java.lang.reflect",
    "java.base/java.net",
];

/// Who may connect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Auth {
    /// `AllowAllAuthenticator` / `AllowAllAuthorizer`: no credentials needed.
    #[default]
    AllowAll,
    /// `PasswordAuthenticator` / `CassandraAuthorizer`. The default superuser
    /// `cassandra`/`cassandra` is created right after startup (the harness sets
    /// `cassandra.superuser_setup_delay_ms=0`; Cassandra's default waits 10 s).
    Password,
}

/// TLS on the native port (`client_encryption_options`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientEncryption {
    /// A JKS or PKCS12 keystore holding the server's key and certificate.
    pub keystore: PathBuf,
    /// Its password.
    pub keystore_password: String,
    /// Also accept plaintext connections on the same port.
    pub optional: bool,
    /// Require client certificates, checked against this truststore.
    pub require_client_auth: Option<(PathBuf, String)>,
}

/// Everything that varies between test nodes. Build one with
/// [`NodeConfig::default`] and the `with_*`/field setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// `cluster_name`.
    pub cluster_name: String,
    /// `listen_address` and `rpc_address`: any of 127.0.0.0/8 works on Linux.
    pub address: IpAddr,
    /// `native_transport_port` (CQL).
    pub native_port: u16,
    /// `storage_port` (internode).
    pub storage_port: u16,
    /// Seed nodes' internode addresses; empty means "this node is its own seed".
    pub seeds: Vec<SocketAddr>,
    /// `num_tokens`.
    pub num_tokens: u16,
    /// Authentication and authorization.
    pub auth: Auth,
    /// TLS on the native port.
    pub client_encryption: Option<ClientEncryption>,
    /// `-Xms`. Defaults to `256M`: with `-Xms1G` Cassandra's `mlockall` (it
    /// locks all committed memory at startup) takes 4.5 s longer here and the
    /// node sits at 1.4 GB RSS instead of 0.65 GB.
    pub heap_initial: String,
    /// `-Xmx` (memtable and cache sizes derive from it). Defaults to `1G`.
    pub heap_max: String,
    /// Extra YAML: each entry is a snippet of one or more top-level keys. A key
    /// that the generated file also sets replaces the generated entry
    /// (Cassandra rejects duplicate keys), anything else is appended.
    pub extra_yaml: Vec<String>,
    /// Extra JVM arguments (before the main class).
    pub extra_jvm_args: Vec<String>,
    /// `-Dcassandra.ring_delay_ms`: how long a joining node waits for ring
    /// information and for pending ranges (default 30 s). The harness uses
    /// 5 s for nodes that bootstrap into a cluster: a join then takes ~20 s
    /// instead of ~50 s; at 1 s the node was seen to pick its tokens before
    /// gossip had shown it the seed, so 5 s it is.
    pub ring_delay: Option<Duration>,
    /// Skip the shutdown niceties (2 s "announce shutdown" sleep, 2 s wait for
    /// internode messaging to quiesce): SIGTERM to exit then takes ~0.7 s
    /// instead of ~5 s. Right for single nodes; multi-node clusters keep the
    /// graceful path so that peers see a clean DOWN.
    pub fast_shutdown: bool,
    /// `-Dcassandra.skip_sync=true`: no fsync of commit log and sstables
    /// (Cassandra logs "Skip fsync enabled"). Test data need not survive a
    /// power cut.
    pub skip_fsync: bool,
    /// `-Dcassandra.unsafesystem=true`: schema changes and other writes to
    /// the system keyspaces are not flushed to sstables at once (they stay in
    /// memtables and the commit log). Every CREATE, ALTER or DROP otherwise
    /// flushes the dozen schema tables: 100 tables created, written and
    /// dropped took 12.2 s of node CPU instead of 15.6 s, and 10 s instead of
    /// 12.9 s. On by default; off for nodes that are started again on their
    /// own data ([`crate::Cluster::start_restartable`]), whose schema must
    /// be on disk.
    pub unsafe_system: bool,
    /// `-XX:TieredStopAtLevel=1`: the JVM compiles with C1 only. A node that
    /// lives for a test spends its CPU serving instead of optimizing code it
    /// will not run for long (a start took 6.4 s of CPU here, 4.2 s with C1
    /// only). On by default; benchmarks turn it off, since a long-running
    /// server's steady state is what they measure.
    pub quick_jit: bool,
    /// How long [`crate::Node::start`] waits for "Startup complete" and a CQL
    /// answer.
    pub startup_timeout: Duration,
    /// How long [`crate::Node::stop`] waits after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
    /// Keep the node's directory (data, yaml, log) after it stops. Also set by
    /// the environment variable `SHARDWISE_KEEP_NODE_DIRS=1`.
    pub keep_dir: bool,
    /// Where to create the node's directory; defaults to the system temp dir.
    pub base_dir: Option<PathBuf>,
    /// The node's datacenter and rack (`GossipingPropertyFileSnitch`);
    /// `None`: `SimpleSnitch`, which puts every node in `datacenter1`,
    /// `rack1`.
    pub location: Option<Location>,
}

/// A node's datacenter and rack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The datacenter's name.
    pub datacenter: String,
    /// The rack's name.
    pub rack: String,
}

impl Location {
    /// `rack` in `datacenter`.
    pub fn new(datacenter: impl Into<String>, rack: impl Into<String>) -> Location {
        Location { datacenter: datacenter.into(), rack: rack.into() }
    }

    /// The `cassandra-rackdc.properties` the snitch reads.
    pub fn rackdc_properties(&self) -> String {
        format!("dc={}\nrack={}\n", self.datacenter, self.rack)
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            cluster_name: "shardwise".into(),
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            native_port: 9042,
            storage_port: 7000,
            seeds: Vec::new(),
            num_tokens: 16,
            auth: Auth::AllowAll,
            client_encryption: None,
            heap_initial: "256M".into(),
            heap_max: "1G".into(),
            extra_yaml: Vec::new(),
            extra_jvm_args: Vec::new(),
            ring_delay: None,
            fast_shutdown: true,
            skip_fsync: true,
            unsafe_system: true,
            quick_jit: true,
            startup_timeout: Duration::from_secs(120),
            stop_grace: Duration::from_secs(30),
            keep_dir: false,
            base_dir: None,
            location: None,
        }
    }
}

/// Where one node keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDirs {
    /// The node's own directory; everything below is inside it.
    pub root: PathBuf,
}

impl NodeDirs {
    /// The generated `cassandra.yaml`.
    pub fn yaml(&self) -> PathBuf {
        self.root.join("cassandra.yaml")
    }
    /// The generated `cassandra-rackdc.properties` (with a [`Location`]).
    pub fn rackdc(&self) -> PathBuf {
        self.root.join("cassandra-rackdc.properties")
    }
    /// The generated logback configuration.
    pub fn logback(&self) -> PathBuf {
        self.root.join("logback.xml")
    }
    /// stdout and stderr of the JVM (the log).
    pub fn log(&self) -> PathBuf {
        self.root.join("node.log")
    }
    fn sub(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

/// The logback configuration: INFO to stdout (which goes to `node.log`).
/// Without one, logback's default is DEBUG for everything, which triples the
/// log and costs CPU on a 2-core machine.
pub const LOGBACK_XML: &str = r#"<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"#;

/// Quotes a string as a YAML single-quoted scalar.
fn yq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn yq_path(p: &Path) -> String {
    yq(&p.display().to_string())
}

/// The top-level keys a YAML snippet sets: lines that start with a key
/// character (no indentation, not a comment or list item) and contain `:`.
fn top_level_keys(snippet: &str) -> Vec<&str> {
    snippet
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_'))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.trim()))
        .collect()
}

impl NodeConfig {
    /// The native-protocol address clients connect to.
    pub fn native_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.native_port)
    }

    /// The internode address.
    pub fn storage_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.storage_port)
    }

    /// Sets the address (builder style).
    pub fn with_address(mut self, address: IpAddr) -> Self {
        self.address = address;
        self
    }

    /// Sets both ports (builder style).
    pub fn with_ports(mut self, native_port: u16, storage_port: u16) -> Self {
        self.native_port = native_port;
        self.storage_port = storage_port;
        self
    }

    /// Picks a free native port and a free storage port on [`Self::address`].
    pub fn with_free_ports(self) -> Result<Self> {
        let (native, storage) = crate::ports::free_port_pair(&[self.address])?;
        Ok(self.with_ports(native, storage))
    }

    /// Sets the authentication mode (builder style).
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Adds a YAML snippet (builder style); see [`Self::extra_yaml`].
    pub fn with_yaml(mut self, snippet: impl Into<String>) -> Self {
        self.extra_yaml.push(snippet.into());
        self
    }

    /// Checks what the YAML and the command line cannot express.
    pub fn validate(&self) -> Result<()> {
        if self.cluster_name.is_empty() {
            return Err(HarnessError::Config("cluster_name is empty".into()));
        }
        if self.native_port == 0 || self.storage_port == 0 {
            return Err(HarnessError::Config("ports must be chosen before starting (use with_free_ports)".into()));
        }
        if self.native_port == self.storage_port {
            return Err(HarnessError::Config(format!("native and storage port are both {}", self.native_port)));
        }
        if self.num_tokens == 0 {
            return Err(HarnessError::Config("num_tokens must be at least 1".into()));
        }
        for heap in [&self.heap_initial, &self.heap_max] {
            let digits = heap.trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G']);
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return Err(HarnessError::Config(format!("bad heap size {heap:?} (want e.g. 512M, 1G)")));
            }
        }
        Ok(())
    }

    /// The seed list as Cassandra wants it: `"host:port,host:port"`.
    pub fn seeds_value(&self) -> String {
        if self.seeds.is_empty() {
            self.storage_addr().to_string()
        } else {
            self.seeds.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",")
        }
    }

    /// The generated `cassandra.yaml` for a node living in `dirs`.
    pub fn cassandra_yaml(&self, dirs: &NodeDirs) -> String {
        let snitch = if self.location.is_some() { "GossipingPropertyFileSnitch" } else { "SimpleSnitch" };
        let (authenticator, authorizer) = match self.auth {
            Auth::AllowAll => ("AllowAllAuthenticator", "AllowAllAuthorizer"),
            Auth::Password => ("PasswordAuthenticator", "CassandraAuthorizer"),
        };
        // (key, full text of the entry). Order is kept for readability.
        let mut entries: Vec<(&str, String)> = vec![
            ("cluster_name", format!("cluster_name: {}", yq(&self.cluster_name))),
            ("num_tokens", format!("num_tokens: {}", self.num_tokens)),
            // ScyllaDB's `batch_size_fail_threshold_in_kb` (1024; Cassandra's
            // default is 50 KiB), so that the emulation front refuses batches
            // where ScyllaDB does. The warning threshold stays Cassandra's (the
            // front strips batch warnings, as ScyllaDB sends none).
            ("batch_size_fail_threshold", "batch_size_fail_threshold: 1024KiB".into()),
            // Materialized views on, as ScyllaDB has them (Cassandra 5.0
            // keeps them off by default), so that views made through the
            // emulation front are made.
            ("materialized_views_enabled", "materialized_views_enabled: true".into()),
            ("partitioner", "partitioner: org.apache.cassandra.dht.Murmur3Partitioner".into()),
            (
                "data_file_directories",
                format!("data_file_directories:\n  - {}", yq_path(&dirs.sub("data"))),
            ),
            ("commitlog_directory", format!("commitlog_directory: {}", yq_path(&dirs.sub("commitlog")))),
            (
                "saved_caches_directory",
                format!("saved_caches_directory: {}", yq_path(&dirs.sub("saved_caches"))),
            ),
            ("hints_directory", format!("hints_directory: {}", yq_path(&dirs.sub("hints")))),
            ("cdc_raw_directory", format!("cdc_raw_directory: {}", yq_path(&dirs.sub("cdc_raw")))),
            ("commitlog_sync", "commitlog_sync: periodic".into()),
            ("commitlog_sync_period", "commitlog_sync_period: 10000ms".into()),
            (
                "seed_provider",
                format!(
                    "seed_provider:\n  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n    parameters:\n      - seeds: \"{}\"",
                    self.seeds_value()
                ),
            ),
            ("listen_address", format!("listen_address: {}", self.address)),
            ("rpc_address", format!("rpc_address: {}", self.address)),
            ("native_transport_port", format!("native_transport_port: {}", self.native_port)),
            ("storage_port", format!("storage_port: {}", self.storage_port)),
            ("endpoint_snitch", format!("endpoint_snitch: {snitch}")),
            ("start_native_transport", "start_native_transport: true".into()),
            ("authenticator", format!("authenticator: {authenticator}")),
            ("authorizer", format!("authorizer: {authorizer}")),
            // No snapshot on every DROP/TRUNCATE: tests drop many keyspaces and
            // the snapshots would only fill the temp dir.
            ("auto_snapshot", "auto_snapshot: false".into()),
        ];
        if let Some(tls) = &self.client_encryption {
            let mut s = format!(
                "client_encryption_options:\n  enabled: true\n  optional: {}\n  keystore: {}\n  keystore_password: {}",
                tls.optional,
                yq_path(&tls.keystore),
                yq(&tls.keystore_password)
            );
            match &tls.require_client_auth {
                Some((truststore, password)) => s.push_str(&format!(
                    "\n  require_client_auth: true\n  truststore: {}\n  truststore_password: {}",
                    yq_path(truststore),
                    yq(password)
                )),
                None => s.push_str("\n  require_client_auth: false"),
            }
            entries.push(("client_encryption_options", s));
        }
        let overridden: Vec<&str> = self.extra_yaml.iter().flat_map(|s| top_level_keys(s)).collect();
        let mut out = String::from("# Generated by shardwise testkit; see testkit/src/config.rs.\n");
        for (key, text) in &entries {
            if !overridden.contains(key) {
                out.push_str(text);
                out.push('\n');
            }
        }
        for snippet in &self.extra_yaml {
            out.push_str(snippet.trim_end());
            out.push('\n');
        }
        out
    }

    /// The JVM arguments up to and including the main class, for a node in
    /// `dirs` with the jars of `classpath`.
    pub fn jvm_args(&self, dirs: &NodeDirs, classpath: &str) -> Vec<String> {
        let mut a = vec![
            format!("-Xms{}", self.heap_initial),
            format!("-Xmx{}", self.heap_max),
            // Die loudly instead of limping on after an OOM (Cassandra warns
            // about this at startup otherwise).
            "-XX:+ExitOnOutOfMemoryError".to_string(),
            "-Djava.net.preferIPv4Stack=true".to_string(),
        ];
        a.extend(JVM17_ADD_EXPORTS.iter().map(|m| format!("--add-exports={m}=ALL-UNNAMED")));
        a.extend(JVM17_ADD_OPENS.iter().map(|m| format!("--add-opens={m}=ALL-UNNAMED")));
        a.push(format!("-Dcassandra.config=file://{}", dirs.yaml().display()));
        a.push("-Dcassandra-foreground=yes".to_string());
        a.push(format!("-Dcassandra.storagedir={}", dirs.root.display()));
        a.push(format!("-Dcassandra.logdir={}", dirs.sub("logs").display()));
        a.push(format!("-Dlogback.configurationFile={}", dirs.logback().display()));
        // A single node has nobody to wait for; a joining node has its seed
        // already settled.
        a.push("-Dcassandra.skip_wait_for_gossip_to_settle=0".to_string());
        // Skip the ~1.5 s startup measurement of the memtable row overhead
        // (181 bytes on this JVM) by stating it.
        a.push("-Dcassandra.memtable.row_overhead_size=180".to_string());
        // Create the default superuser right away instead of after 10 s.
        a.push("-Dcassandra.superuser_setup_delay_ms=0".to_string());
        if self.skip_fsync {
            a.push("-Dcassandra.skip_sync=true".to_string());
        }
        if self.unsafe_system {
            a.push("-Dcassandra.unsafesystem=true".to_string());
        }
        if self.quick_jit {
            a.push("-XX:TieredStopAtLevel=1".to_string());
        }
        if self.fast_shutdown {
            a.push("-Dcassandra.shutdown_announce_in_ms=0".to_string());
            a.push("-Dcassandra.test.messagingService.nonGracefulShutdown=true".to_string());
        }
        if let Some(d) = self.ring_delay {
            a.push(format!("-Dcassandra.ring_delay_ms={}", d.as_millis()));
        }
        if self.location.is_some() {
            a.push(format!("-Dcassandra-rackdc.properties=file://{}", dirs.rackdc().display()));
        }
        a.extend(self.extra_jvm_args.iter().cloned());
        a.push("-cp".to_string());
        a.push(classpath.to_string());
        a.push(crate::dist::MAIN_CLASS.to_string());
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> NodeDirs {
        NodeDirs { root: PathBuf::from("/tmp/sw node'1") }
    }

    #[test]
    fn yaml_has_the_minimal_settings() {
        let cfg = NodeConfig::default().with_ports(19042, 17000);
        let y = cfg.cassandra_yaml(&dirs());
        for needle in [
            "cluster_name: 'shardwise'\n",
            "num_tokens: 16\n",
            "partitioner: org.apache.cassandra.dht.Murmur3Partitioner\n",
            "data_file_directories:\n  - '/tmp/sw node''1/data'\n",
            "commitlog_directory: '/tmp/sw node''1/commitlog'\n",
            "hints_directory: '/tmp/sw node''1/hints'\n",
            "cdc_raw_directory: '/tmp/sw node''1/cdc_raw'\n",
            "saved_caches_directory: '/tmp/sw node''1/saved_caches'\n",
            "commitlog_sync_period: 10000ms\n",
            "      - seeds: \"127.0.0.1:17000\"\n",
            "listen_address: 127.0.0.1\n",
            "rpc_address: 127.0.0.1\n",
            "native_transport_port: 19042\n",
            "storage_port: 17000\n",
            "endpoint_snitch: SimpleSnitch\n",
            "start_native_transport: true\n",
            "authenticator: AllowAllAuthenticator\n",
            "authorizer: AllowAllAuthorizer\n",
            "auto_snapshot: false\n",
        ] {
            assert!(y.contains(needle), "missing {needle:?} in\n{y}");
        }
        assert!(!y.contains("client_encryption_options"));
    }

    #[test]
    fn yaml_auth_seeds_and_tls() {
        let mut cfg = NodeConfig::default().with_address("127.0.0.3".parse().unwrap()).with_auth(Auth::Password);
        cfg.seeds = vec!["127.0.0.1:7000".parse().unwrap(), "127.0.0.2:7000".parse().unwrap()];
        cfg.client_encryption = Some(ClientEncryption {
            keystore: "/k/s.jks".into(),
            keystore_password: "it's".into(),
            optional: true,
            require_client_auth: None,
        });
        let y = cfg.cassandra_yaml(&dirs());
        assert!(y.contains("authenticator: PasswordAuthenticator\n"));
        assert!(y.contains("authorizer: CassandraAuthorizer\n"));
        assert!(y.contains("seeds: \"127.0.0.1:7000,127.0.0.2:7000\""));
        assert!(y.contains("listen_address: 127.0.0.3\n"));
        assert!(y.contains(
            "client_encryption_options:\n  enabled: true\n  optional: true\n  keystore: '/k/s.jks'\n  keystore_password: 'it''s'\n  require_client_auth: false\n"
        ));
    }

    #[test]
    fn extra_yaml_overrides_and_appends() {
        let cfg = NodeConfig::default()
            .with_yaml("num_tokens: 4")
            .with_yaml("# comment\nmaterialized_views_enabled: true\nauto_snapshot: true\n");
        let y = cfg.cassandra_yaml(&dirs());
        assert_eq!(y.matches("num_tokens:").count(), 1);
        assert!(y.contains("num_tokens: 4\n"));
        assert_eq!(y.matches("auto_snapshot:").count(), 1);
        assert!(y.contains("auto_snapshot: true\n"));
        assert!(y.contains("materialized_views_enabled: true\n"));
    }

    #[test]
    fn top_level_keys_ignores_nested_lines() {
        let keys = top_level_keys("a: 1\n  b: 2\n- c: 3\n# d: 4\ne_f:\n  - x\n");
        assert_eq!(keys, vec!["a", "e_f"]);
    }

    #[test]
    fn jvm_args_order_and_content() {
        let cfg = NodeConfig::default();
        let a = cfg.jvm_args(&dirs(), "/lib/*");
        assert_eq!(a[0], "-Xms256M");
        assert_eq!(a[1], "-Xmx1G");
        assert!(a.contains(&"--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED".to_string()));
        assert!(a.contains(&"--add-opens=java.base/java.net=ALL-UNNAMED".to_string()));
        assert_eq!(a.iter().filter(|x| x.starts_with("--add-exports=")).count(), JVM17_ADD_EXPORTS.len());
        assert_eq!(a.iter().filter(|x| x.starts_with("--add-opens=")).count(), JVM17_ADD_OPENS.len());
        assert!(a.contains(&"-Dcassandra.config=file:///tmp/sw node'1/cassandra.yaml".to_string()));
        assert!(a.contains(&"-Dcassandra-foreground=yes".to_string()));
        assert!(a.contains(&"-Dcassandra.storagedir=/tmp/sw node'1".to_string()));
        assert!(a.contains(&"-Dcassandra.shutdown_announce_in_ms=0".to_string()));
        assert!(!a.iter().any(|x| x.starts_with("-Dcassandra.ring_delay_ms")));
        assert!(a.contains(&"-XX:TieredStopAtLevel=1".to_string()));
        assert!(a.contains(&"-Dcassandra.unsafesystem=true".to_string()));
        let n = a.len();
        assert_eq!(&a[n - 3..], ["-cp", "/lib/*", "org.apache.cassandra.service.CassandraDaemon"]);
    }

    #[test]
    fn jvm_args_cluster_options() {
        let cfg = NodeConfig {
            fast_shutdown: false,
            skip_fsync: false,
            unsafe_system: false,
            quick_jit: false,
            ring_delay: Some(Duration::from_secs(5)),
            heap_initial: "1G".into(),
            extra_jvm_args: vec!["-XX:+UseSerialGC".into()],
            ..NodeConfig::default()
        };
        let a = cfg.jvm_args(&dirs(), "/lib/*");
        assert_eq!(a[0], "-Xms1G");
        assert!(a.contains(&"-Dcassandra.ring_delay_ms=5000".to_string()));
        assert!(a.contains(&"-XX:+UseSerialGC".to_string()));
        assert!(!a.iter().any(|x| x.contains("shutdown_announce")));
        assert!(!a.iter().any(|x| x.contains("skip_sync")));
        assert!(!a.iter().any(|x| x.contains("TieredStopAtLevel")));
        assert!(!a.iter().any(|x| x.contains("unsafesystem")));
    }

    #[test]
    fn validation() {
        assert!(NodeConfig::default().validate().is_ok());
        assert!(NodeConfig::default().with_ports(0, 7000).validate().is_err());
        assert!(NodeConfig::default().with_ports(7000, 7000).validate().is_err());
        let bad = NodeConfig { heap_max: "lots".into(), ..NodeConfig::default() };
        assert!(bad.validate().is_err());
    }
}
