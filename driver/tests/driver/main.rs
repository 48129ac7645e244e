//! The driver's integration tests, one binary: one module per area, and
//! `common` for what several share. Tests run concurrently here; the few
//! that start Cassandra servers of their own take turns
//! ([`common::own_servers`]). `allocations` stays a binary of its own: its
//! counting global allocator must see nothing but its one test.

mod auth;
mod client_routes;
mod cluster;
mod common;
mod connection;
mod derives;
mod faults;
mod hostile_server;
mod introspection;
mod load_balancing;
mod porting;
mod readme;
mod rediscovery;
mod schema;
mod send;
mod session;
mod shard_port;
mod shards;
mod single_target;
mod tls;
mod topology_refresh;
