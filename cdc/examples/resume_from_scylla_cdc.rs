//! Switching a CDC consumer from `scylla-cdc` to shardwise-cdc without a
//! gap: stop the `scylla-cdc` reader (its `TableBackedCheckpointSaver`
//! keeps its progress in a table), then start this one with
//! `resume_from_scylla_cdc` naming that table. Each stream resumes where
//! `scylla-cdc` saved it; from then on the reader keeps its own
//! checkpoints, in a table of its own layout.
//!
//! ```text
//! SCYLLA_URI=127.0.0.1:9042 cargo run -p shardwise-cdc --example resume_from_scylla_cdc -- KEYSPACE TABLE CHECKPOINTS
//! ```
//!
//! KEYSPACE.TABLE is the base table, KEYSPACE.CHECKPOINTS the table
//! `scylla-cdc` saved its checkpoints in (and where this reader keeps its
//! own, as `CHECKPOINTS_shardwise`). It prints each change until a line is
//! entered (or standard input ends).
//! The same switch is tested with `scylla-cdc` 0.7 itself in
//! `benches/tests/cutover.rs`.

use std::sync::Arc;
use std::time::Duration;

use shardwise::SessionBuilder;
use shardwise_cdc::checkpoint::TableCheckpointStore;
use shardwise_cdc::{CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".into());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [keyspace, table, checkpoints] = args.as_slice() else {
        return Err("usage: resume_from_scylla_cdc KEYSPACE TABLE CHECKPOINTS".into());
    };
    let session = SessionBuilder::new().known_node(uri).build().await?;
    // shardwise's own checkpoints, beside the ones it takes over from.
    let store = TableCheckpointStore::new(session.clone(), keyspace, &format!("{checkpoints}_shardwise"));
    store.create_table().await?;
    let print = |_: &GroupInfo| -> Box<dyn Consumer> {
        Box::new(|row: CdcRow<'_>| -> Result<(), ConsumerError> {
            println!("{row:?}");
            Ok(())
        })
    };
    let reader = CdcReaderBuilder::new(session, keyspace, table)
        .checkpoints(Arc::new(store), Duration::from_secs(5))
        .resume_from_scylla_cdc(keyspace, checkpoints)
        .build(Arc::new(print))
        .await?;
    let handle = reader.handle();
    // Stopped when standard input ends (Ctrl-D) or a line is entered.
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_line(&mut String::new());
        handle.stop();
    });
    reader.join().await?;
    Ok(())
}
