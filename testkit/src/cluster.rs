//! Several nodes on 127.0.0.1, 127.0.0.2, … — one cluster on one machine.
//!
//! All of 127.0.0.0/8 is loopback on Linux, so every node gets its own
//! address with the same two ports, its own directory, and the first node as
//! seed. Nodes are started one at a time (the seed first): Cassandra refuses
//! concurrent bootstraps by default, and on two cores they would only slow
//! each other down. With the default `ring_delay` of 5 s (see
//! [`NodeConfig::ring_delay`]) a joining node is ready in about 20 s instead of
//! about 50 s; a 3-node cluster needs roughly 2 GB of memory.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::config::{Auth, Location, NodeConfig};
use crate::error::{HarnessError, Result};
use crate::node::Node;
use crate::ports::{free_port_pair, loopback_addresses};
use crate::raw::{QueryResult, RawConnection};

/// A running multi-node cluster. Dropping it stops every node.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<Node>,
    /// Directories to remove once every node has stopped: those of a
    /// [`Cluster::start_restartable`] cluster, kept while it runs so that a
    /// killed node can start again on its data.
    owned_dirs: Vec<PathBuf>,
}

impl Cluster {
    /// The configuration [`Cluster::start`] uses: graceful shutdown (peers see
    /// a clean DOWN when one node is stopped), a 5 s ring delay, and a 60 s
    /// grace period for stopping.
    pub fn default_config() -> NodeConfig {
        NodeConfig {
            cluster_name: "shardwise-cluster".into(),
            fast_shutdown: false,
            ring_delay: Some(Duration::from_secs(5)),
            stop_grace: Duration::from_secs(60),
            startup_timeout: Duration::from_secs(180),
            ..NodeConfig::default()
        }
    }

    /// Starts `n` nodes on 127.0.0.1 … 127.0.0.n with [`Cluster::default_config`].
    pub fn start(n: u8) -> Result<Cluster> {
        Cluster::start_with(n, Cluster::default_config())
    }

    /// Starts `n` nodes from `template`. Address, ports and seeds are set per
    /// node (one free native port and one free storage port shared by all);
    /// everything else is taken as it is. Returns once every node knows every
    /// other node's tokens ([`Cluster::wait_for_ring`]).
    pub fn start_with(n: u8, template: NodeConfig) -> Result<Cluster> {
        Cluster::start_each(n, template, |_, _| {})
    }

    /// Starts one node for each location (`GossipingPropertyFileSnitch`),
    /// in that order, with [`Cluster::default_config`]: a cluster of several
    /// racks and datacenters.
    pub fn start_located(locations: &[Location]) -> Result<Cluster> {
        let n = u8::try_from(locations.len())
            .map_err(|_| HarnessError::Config(format!("cannot start a cluster of {} nodes", locations.len())))?;
        Cluster::start_each(n, Cluster::default_config(), |i, cfg| cfg.location = Some(locations[i].clone()))
    }

    /// [`Cluster::start_with`], with `each` adjusting the `i`-th node's configuration.
    fn start_each(n: u8, template: NodeConfig, mut each: impl FnMut(usize, &mut NodeConfig)) -> Result<Cluster> {
        if n == 0 || n == u8::MAX {
            return Err(HarnessError::Config(format!("cannot start a cluster of {n} nodes")));
        }
        let addrs = loopback_addresses(n);
        let (native, storage) = free_port_pair(&addrs)?;
        let seed = SocketAddr::new(addrs[0], storage);
        let mut nodes = Vec::with_capacity(n as usize);
        for (i, addr) in addrs.into_iter().enumerate() {
            let mut cfg = template.clone();
            each(i, &mut cfg);
            cfg.address = addr;
            cfg.native_port = native;
            cfg.storage_port = storage;
            cfg.seeds = vec![seed];
            // On error the nodes started so far are dropped, hence stopped.
            nodes.push(Node::start(cfg)?);
        }
        let cluster = Cluster { nodes, owned_dirs: Vec::new() };
        cluster.wait_for_ring(template.startup_timeout)?;
        Ok(cluster)
    }

    /// Waits until every node lists every other node with its tokens in
    /// `system.peers`. A node answers CQL before gossip has spread the last
    /// node's arrival (a joining node is listed before its tokens are), and a
    /// client (or the emulation front) reading the ring then would see a
    /// partial one. Nodes that accept only TLS are not checked (the probe
    /// speaks plaintext).
    pub fn wait_for_ring(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        for node in &self.nodes {
            let config = node.config();
            if config.client_encryption.as_ref().is_some_and(|e| !e.optional) {
                continue;
            }
            let credentials = (config.auth == Auth::Password).then_some(("cassandra", "cassandra"));
            loop {
                let settled = match peers_with_tokens(node.addr(), credentials) {
                    Ok(n) => n + 1 >= self.nodes.len(),
                    Err(_) => false,
                };
                if settled {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(HarnessError::StartupTimeout {
                        addr: node.addr(),
                        timeout: within,
                        waiting_for: "every peer's tokens in system.peers",
                        log: node.log_path(),
                        tail: node.log_tail(20),
                    });
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        Ok(())
    }

    /// Starts `n` nodes with [`Cluster::default_config`] whose directories
    /// outlive a stop or a kill, so that [`Cluster::restart`] can start a node
    /// again on its own data; they are removed when the cluster is dropped.
    /// Their schema is flushed as it changes (no `unsafe_system`), so a
    /// restart finds it on disk.
    pub fn start_restartable(n: u8) -> Result<Cluster> {
        let config = NodeConfig { keep_dir: true, unsafe_system: false, ..Cluster::default_config() };
        let mut cluster = Cluster::start_with(n, config)?;
        cluster.owned_dirs = cluster.nodes.iter().map(|n| n.dir().to_path_buf()).collect();
        Ok(cluster)
    }

    /// Starts stopped (or killed) node `i` again on its own data: same host
    /// id, tokens and address; a new directory for the configuration and the
    /// log, the first one for everything the node stores. Only for nodes
    /// that keep their directory ([`Cluster::start_restartable`], or
    /// [`NodeConfig::keep_dir`]).
    pub fn restart(&mut self, i: usize) -> Result<()> {
        let old = self.nodes.get(i).ok_or_else(|| HarnessError::Config(format!("no node {i}")))?;
        let data = old.dir().to_path_buf();
        if !old.config().keep_dir {
            return Err(HarnessError::Config(format!("node {i} keeps no directory to restart on")));
        }
        let mut config = old.config().clone();
        if !config.extra_yaml.iter().any(|l| l.starts_with("data_file_directories:")) {
            let path = |sub: &str| format!("'{}'", data.join(sub).display().to_string().replace('\'', "''"));
            config.extra_yaml.extend([
                format!("data_file_directories:\n  - {}", path("data")),
                format!("commitlog_directory: {}", path("commitlog")),
                format!("saved_caches_directory: {}", path("saved_caches")),
                format!("hints_directory: {}", path("hints")),
                format!("cdc_raw_directory: {}", path("cdc_raw")),
            ]);
        }
        let node = Node::start(config)?;
        self.owned_dirs.push(node.dir().to_path_buf());
        self.nodes[i] = node;
        Ok(())
    }

    /// The nodes, seed first.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The nodes, mutably (to stop or kill one in a topology test).
    pub fn nodes_mut(&mut self) -> &mut [Node] {
        &mut self.nodes
    }

    /// The native-protocol addresses of all nodes.
    pub fn contact_points(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(Node::addr).collect()
    }

    /// Stops every node: all are asked at once, then each is waited for.
    pub fn stop(&mut self) -> Result<()> {
        for node in &mut self.nodes {
            node.request_stop();
        }
        let mut first_err = None;
        for node in &mut self.nodes {
            if let Err(e) = node.stop() {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// How many rows of `system.peers` on the node at `addr` have tokens.
fn peers_with_tokens(addr: SocketAddr, credentials: Option<(&str, &str)>) -> Result<usize> {
    let mut probe = RawConnection::connect(addr, Duration::from_secs(5))?;
    probe.startup(credentials)?;
    let QueryResult::Rows(rows) = probe.query("SELECT peer, tokens FROM system.peers")? else {
        return Ok(0);
    };
    let Some(tokens) = rows.column("tokens") else { return Ok(0) };
    // A set<text> cell: a 4-byte element count, then the elements.
    let has_tokens = |cell: &Option<Vec<u8>>| cell.as_ref().is_some_and(|c| c.len() > 4 && c[..4] != [0; 4]);
    Ok(rows.rows.iter().filter(|row| row.get(tokens).is_some_and(has_tokens)).count())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop();
        for dir in &self.owned_dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
