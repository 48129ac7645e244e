//! Test harness: starts the real Apache Cassandra 5.0 server.
