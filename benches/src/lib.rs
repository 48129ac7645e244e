//! Benchmarks of shardwise beside its peers (criterion micro-benchmarks and a
//! latte-style workload runner live here as they are built).
