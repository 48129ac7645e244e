//! BATCH: the statements in order, each at the batch's timestamp unless it
//! has its own; the mutations of one partition merge into one.

use super::*;

impl Builder<'_, '_> {
    /// A BATCH: every statement at the batch's timestamp unless it has its own;
    /// a counter batch writes no log.
    pub(super) fn batch(&mut self, batch: &Batch) -> Result<()> {
        if batch.kind == BatchKind::Counter {
            return Ok(());
        }
        let ts = match &batch.using.timestamp {
            Some(t) => self.bigint(t)?.unwrap_or(self.cx.timestamp),
            None => self.cx.timestamp,
        };
        for s in &batch.statements {
            self.statement(s, ts)?;
        }
        Ok(())
    }
}
