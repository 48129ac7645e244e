//! loom models of every shared-state structure of the driver and the CDC
//! engine; run with `RUSTFLAGS="--cfg loom" cargo test -p shardwise-loom-tests`.
