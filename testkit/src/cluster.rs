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
use std::time::Duration;

use crate::config::NodeConfig;
use crate::error::{HarnessError, Result};
use crate::node::Node;
use crate::ports::{free_port_pair, loopback_addresses};

/// A running multi-node cluster. Dropping it stops every node.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<Node>,
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
    /// everything else is taken as it is.
    pub fn start_with(n: u8, template: NodeConfig) -> Result<Cluster> {
        if n == 0 || n == u8::MAX {
            return Err(HarnessError::Config(format!("cannot start a cluster of {n} nodes")));
        }
        let addrs = loopback_addresses(n);
        let (native, storage) = free_port_pair(&addrs)?;
        let seed = SocketAddr::new(addrs[0], storage);
        let mut nodes = Vec::with_capacity(n as usize);
        for addr in addrs {
            let mut cfg = template.clone();
            cfg.address = addr;
            cfg.native_port = native;
            cfg.storage_port = storage;
            cfg.seeds = vec![seed];
            // On error the nodes started so far are dropped, hence stopped.
            nodes.push(Node::start(cfg)?);
        }
        Ok(Cluster { nodes })
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

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
