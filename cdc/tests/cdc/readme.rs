//! The CDC example of the README, as a user copies it: compiled here, so
//! that it keeps matching the API (the [`engine`](super::engine) tests run
//! the same builder calls against the front). Change both together.

use std::sync::Arc;

use shardwise::Session;
use shardwise_cdc::{CdcReader, CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo};

/// The README's reader: every change of `ks.orders` from now on, printed
/// with its `qty` borrowed from the page buffer.
#[allow(dead_code)]
async fn readme_reader(session: Session) -> Result<CdcReader, Box<dyn std::error::Error>> {
    let reader = CdcReaderBuilder::new(session, "ks", "orders")
        .start(std::time::SystemTime::now())
        .build(Arc::new(|_: &GroupInfo| -> Box<dyn Consumer> {
            Box::new(|row: CdcRow<'_>| -> Result<(), ConsumerError> {
                let qty: Option<i32> = row.value("qty")?;
                println!("{:?} {qty:?}", row.operation());
                Ok(())
            })
        }))
        .await?;
    Ok(reader)
}
