//! Groups assigned from outside the reader ([`CdcReaderBuilder::assignment`]):
//! something else decides which of a generation's groups this reader
//! reads, such as a Kafka consumer group's assignment (the Kafka sink's
//! multi-process mode), and the reader follows it.
//!
//! The assignment answers, per group, whether this reader holds it and
//! under which epoch ([`Assignment::holds`]): a number that changes each
//! time the group is given to the reader again. A thread of the reader
//! (like the lease holder, `holder`) follows it every interval:
//!
//! * a group held here but no longer assigned, or assigned again under
//!   another epoch, is left at once (the workers also ask the assignment
//!   before each window and before each window's end);
//! * a group newly assigned is fenced in the checkpoint store
//!   ([`CheckpointStore::fence_all`]) and read from the progress the fence
//!   returns, under the assignment's epoch, which every window and saved
//!   progress of it then carries: a store (or consumer) that knows the
//!   assignment can refuse whatever an earlier hold still tries to write;
//! * the others' progress is read from the store
//!   ([`CheckpointStore::load_generation`]), so that the generation
//!   barrier sees every group.
//!
//! That the assignment gives each group to one reader at a time, and that
//! nothing an earlier holder writes after losing a group counts, is the
//! assignment's and the store's concern: the reader only keeps to what it
//! is told.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checkpoint::{Checkpoint, CheckpointStore, GroupProgress};
use crate::plan::GroupState;
use crate::stream::StreamId;

use super::{CdcError, Shared};

/// Which groups a reader reads, decided outside it
/// ([`CdcReaderBuilder::assignment`](super::CdcReaderBuilder::assignment)).
pub trait Assignment: Send + Sync {
    /// The epoch under which this reader holds `group` (the first stream of
    /// a group, unique across generations) now, or `None` if it is not this
    /// reader's. The epoch is not 0 and changes whenever the group is given
    /// to this reader again; windows and saved progress of the group carry
    /// it ([`crate::ReadWindow::epoch`], [`GroupProgress::epoch`]), except the
    /// final progress of a generation the reader left, saved with epoch 0:
    /// every group in it was read to that generation's end, which no later
    /// save of the group can pass, so a store may write it unfenced.
    fn holds(&self, group: StreamId) -> Option<u64>;
}

/// How long a group taken through an assignment counts as held by the
/// workers' deadlines: for good, until the assignment takes it away.
const FOR_GOOD: Duration = Duration::from_secs(10 * 365 * 86_400);

/// The thread that follows the assignment.
pub(super) struct Assigned {
    shared: Arc<Shared>,
    store: Arc<dyn CheckpointStore>,
    assignment: Arc<dyn Assignment>,
    interval: Duration,
}

impl Assigned {
    pub(super) fn new(
        shared: Arc<Shared>,
        store: Arc<dyn CheckpointStore>,
        assignment: Arc<dyn Assignment>,
        interval: Duration,
    ) -> Self {
        Assigned { shared, store, assignment, interval }
    }

    /// Follows the assignment until the reader is joined or dropped. A
    /// failed round (a fence or a read of the store) is tried again on the
    /// next one; it never stops the reader.
    pub(super) async fn run(self) -> Result<(), CdcError> {
        // Taken before the flag is read: a leave during the round ends the
        // sleep after it at once.
        while let Some(left) = self.shared.leaving.ticket() {
            let next = Instant::now() + self.interval;
            if let Err(e) = self.round().await {
                tracing::warn!(error = %e, "following the CDC group assignment failed; retrying");
            }
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = left => {}
            }
        }
        Ok(())
    }

    /// One round: leave what is no longer assigned, take what newly is,
    /// read the others' progress.
    async fn round(&self) -> Result<(), CdcError> {
        let (generation, groups) = {
            let planner = self.shared.planner();
            (planner.generation(), planner.groups())
        };
        let Some(generation) = generation else { return Ok(()) };
        let mut taking: Vec<(GroupState, u64)> = Vec::new();
        for g in &groups {
            match (self.assignment.holds(g.key), g.owned) {
                (Some(epoch), true) if epoch == g.epoch => {}
                (Some(epoch), owned) => {
                    if owned {
                        tracing::info!(group = %g.key, "a CDC group was assigned here again; it is taken again");
                        self.shared.drop_group(g.key, g.epoch);
                    }
                    taking.push((*g, epoch));
                }
                (None, true) => {
                    tracing::info!(group = %g.key, "a CDC group is no longer assigned here; it is left");
                    self.shared.drop_group(g.key, g.epoch);
                }
                (None, false) => {}
            }
        }
        if !taking.is_empty() {
            self.take(generation, taking).await?;
        }
        if let Some(saved) = self.store.load_generation(&self.shared.log, generation).await? {
            self.shared.planner().observe(&saved);
        }
        self.shared.stopping.wake();
        Ok(())
    }

    /// Fences `taking` (each with the epoch it is assigned under) and reads
    /// them from the progress the fences return. A group whose assignment
    /// changed while it was fenced is not taken (the next round sees it
    /// again); groups never saved get a record at once, so that whoever is
    /// given them next starts where this reader did.
    async fn take(&self, generation: crate::Millis, taking: Vec<(GroupState, u64)>) -> Result<(), CdcError> {
        let keys: Vec<StreamId> = taking.iter().map(|(g, _)| g.key).collect();
        let fences = self.store.fence_all(&self.shared.log, generation, &keys).await;
        let mut fresh = Vec::new();
        for ((g, epoch), fence) in taking.into_iter().zip(fences) {
            let fence = match fence {
                Ok(fence) => fence,
                Err(e) => {
                    tracing::warn!(group = %g.key, error = %e, "fencing an assigned CDC group failed; tried again later");
                    continue;
                }
            };
            if self.assignment.holds(g.key) != Some(epoch) {
                continue;
            }
            let mut planner = self.shared.planner();
            if planner.generation() != Some(generation) {
                return Ok(());
            }
            if let Some(deadlines) = &self.shared.deadlines {
                let until = Instant::now().checked_add(FOR_GOOD).unwrap_or_else(Instant::now);
                deadlines.set(g.key, until);
            }
            planner.acquire_fenced(g.group, fence.progress, epoch)?;
            self.shared.counters.taken();
            if fence.progress.is_none() {
                let progress = planner.progress(g.group).unwrap_or(g.progress);
                fresh.push(GroupProgress { group: g.key, progress, epoch });
            }
        }
        if !fresh.is_empty() {
            self.shared.save(Checkpoint { generation, groups: fresh }).await?;
        }
        Ok(())
    }
}
