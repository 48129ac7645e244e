//! The CDC generations the front published ([`Generations`]): built from
//! the Cassandra ring for the emulated sharding, written to the stand-in
//! `cdc_generation_timestamps`/`cdc_streams_descriptions_v2` tables and
//! kept in timestamp order.

use std::sync::Mutex;

use super::Shared;
use crate::error::EmuError;
use crate::generation::{self, Generation};
use crate::system_tables;

/// The generations published so far, oldest first.
#[derive(Default)]
pub(crate) struct Generations {
    pub(crate) list: Mutex<Vec<Generation>>,
}

impl Shared {
    pub(crate) async fn create_generation(&self, timestamp_ms: i64) -> Result<Generation, EmuError> {
        let (ring, _) = system_tables::read_ring(&self.admin).await?;
        let g = Generation::build(timestamp_ms, &ring, self.sharder, &mut generation::random_source())
            .ok_or_else(|| EmuError::Protocol("the Cassandra ring has no tokens".into()))?;
        system_tables::write_generation(&self.admin, self.emu(), &g).await?;
        if let Ok(mut gens) = self.generations.list.lock() {
            gens.push(g.clone());
            gens.sort_by_key(|g| g.timestamp_ms);
        }
        Ok(g)
    }
}
