//! The lease holder: the thread of a reader that shares its table with
//! other processes ([`crate::lease`]).
//!
//! On every heartbeat it renews this reader's leases, takes back a lease
//! the table says it holds but the planner does not read (a claim whose
//! answer was lost), reads the others' progress from the checkpoint store
//! (so the generation barrier sees every group), and moves towards its
//! quota: a group it gives up is first left by the workers, then its
//! progress is saved, and only then is its lease deleted, so the next
//! holder repeats nothing; a group it claims starts at the progress saved
//! last. The leases of a generation the reader left are deleted only once
//! that generation's final checkpoint is saved: readers still in it wait
//! for that progress.
//!
//! Two live readers never read one group: every lease query is bounded
//! ([`LeaseConfig::query_bound`]), each lease has a deadline on the
//! monotonic clock (its renewal sent, plus [`LeaseConfig::held_for`]) that
//! the workers check themselves (`deadlines`), and a group taken is first
//! fenced in the checkpoint store ([`CheckpointStore::fence`]): its
//! progress is read after the fence, and a paused reader that comes back
//! after losing the group can no longer save it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::checkpoint::{Checkpoint, CheckpointStore, Fence, GroupProgress};
use crate::lease::{moves, LeaseConfig, LeaseError};
use crate::plan::GroupState;
use crate::stream::StreamId;
use crate::time::Millis;

use super::{CdcError, Shared};

pub(super) struct Holder {
    shared: Arc<Shared>,
    store: Arc<dyn CheckpointStore>,
    config: LeaseConfig,
    ttl: i32,
}

impl Holder {
    pub(super) fn new(shared: Arc<Shared>, store: Arc<dyn CheckpointStore>, config: LeaseConfig, ttl: i32) -> Self {
        Holder { shared, store, config, ttl }
    }

    /// Heartbeats until the reader is joined or dropped, then gives every
    /// lease up. Failed heartbeats are retried; they never stop the reader
    /// (a lease not renewed in time is left, see [`Holder::expire`]).
    pub(super) async fn run(mut self) -> Result<(), CdcError> {
        while !self.shared.leaving.load(Ordering::Acquire) {
            if let Err(e) = self.heartbeat().await {
                tracing::warn!(error = %e, "a lease heartbeat failed; retrying");
            }
            self.expire();
            tokio::select! {
                _ = tokio::time::sleep(self.config.heartbeat) => {}
                _ = self.shared.leave.notified() => {}
            }
        }
        if let Err(e) = self.leave().await {
            // Nothing is lost: the leases expire after their TTL instead.
            tracing::warn!(error = %e, "giving the CDC leases up failed; they expire instead");
        }
        Ok(())
    }

    /// `query` within the bound of a lease query: an answer later than that
    /// no longer counts.
    async fn bounded<T, E>(&self, query: impl Future<Output = Result<T, E>>) -> Result<T, CdcError>
    where
        CdcError: From<E>,
    {
        let bound = self.config.query_bound();
        match tokio::time::timeout(bound, query).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(LeaseError::Timeout(bound).into()),
        }
    }

    /// The lease of `group`, renewed or taken with a query sent at `sent`,
    /// is surely held until then.
    fn held(&self, group: StreamId, sent: Instant) {
        if let Some(deadlines) = &self.shared.deadlines {
            deadlines.set(group, sent + self.config.held_for());
        }
    }

    async fn heartbeat(&mut self) -> Result<(), CdcError> {
        let (table, name, ttl) = (self.config.table.clone(), self.config.name.clone(), self.ttl);
        let shared = self.shared.clone();
        let log = &shared.log;
        self.bounded(table.heartbeat(log, &name, ttl)).await?;
        let members = self.bounded(table.members(log)).await?;
        let mut leases = self.bounded(table.leases(log)).await?;
        let (generation, groups) = {
            let planner = self.shared.planner();
            (planner.generation(), planner.groups())
        };
        let Some(generation) = generation else { return Ok(()) };
        let by_key: HashMap<StreamId, GroupState> = groups.iter().map(|g| (g.key, *g)).collect();

        for g in groups.iter().filter(|g| g.owned) {
            let sent = Instant::now();
            match self.bounded(table.renew(log, g.key, &name, ttl)).await {
                Ok(true) => {
                    self.held(g.key, sent);
                    leases.insert(g.key, name.clone());
                }
                Ok(false) => {
                    tracing::warn!(group = %g.key, "a CDC lease was lost before it was renewed; its group is left");
                    self.shared.drop_group(g.key);
                    leases.remove(&g.key);
                }
                // Not renewed: its deadline stands, and the others are
                // still renewed.
                Err(e) => tracing::warn!(group = %g.key, error = %e, "renewing a CDC lease failed"),
            }
        }
        // Leases taken on this heartbeat, with when their LWT was sent.
        let mut taken: Vec<(GroupState, Instant)> = Vec::new();
        let mine: Vec<StreamId> = leases.iter().filter(|(_, o)| **o == name).map(|(k, _)| *k).collect();
        for key in mine {
            match by_key.get(&key) {
                // A group of another generation (finished here), given up
                // once its final progress is saved: the readers still in
                // that generation wait for it.
                None => {
                    if !self.shared.planner().left_pending() && self.shared.saves.quiet() {
                        self.bounded(table.release(log, key, &name)).await?;
                        leases.remove(&key);
                    }
                }
                // Held in the table, not read here: a claim whose answer was lost.
                Some(g) if !g.owned => {
                    let sent = Instant::now();
                    if self.bounded(table.renew(log, key, &name, ttl)).await? {
                        taken.push((*g, sent));
                    } else {
                        leases.remove(&key);
                    }
                }
                Some(_) => {}
            }
        }

        let keys: Vec<StreamId> = groups.iter().map(|g| g.key).collect();
        let plan = moves(&name, &members, &keys, &leases);
        for key in &plan.release {
            if let Some(g) = by_key.get(key) {
                self.hand_over(g, generation).await?;
            }
        }
        for key in &plan.claim {
            let Some(g) = by_key.get(key).filter(|_| taken.len() < plan.wanted) else { break };
            let sent = Instant::now();
            if self.bounded(table.claim(log, g.key, &name, ttl)).await? {
                taken.push((*g, sent));
            }
        }
        // Fenced all at once: one after the other, the fences of many groups
        // could outlast the leases just taken.
        let fences = join_all(taken.iter().map(|(g, _)| self.bounded(self.store.fence(log, generation, g.key)))).await;
        for ((g, sent), fence) in taken.into_iter().zip(fences) {
            self.take(g, sent, generation, fence).await?;
        }

        // The others' progress, so that the generation barrier sees every group.
        if let Some(saved) = self.bounded(self.store.load_generation(log, generation)).await? {
            self.shared.planner().observe(&saved);
        }
        self.shared.wake.notify_waiters();
        Ok(())
    }

    /// The workers read `g`, whose lease was taken with a query sent at
    /// `sent`, from now on: it was fenced first (`fence`), and is read from
    /// the progress saved before the fence; a failed fence gives it back. A group never saved gets a record at once,
    /// so that whoever takes it after this reader starts where this one did.
    async fn take(
        &mut self,
        g: GroupState,
        sent: Instant,
        generation: Millis,
        fence: Result<Fence, CdcError>,
    ) -> Result<(), CdcError> {
        let log = self.shared.log.clone();
        let fence = match fence {
            Ok(fence) => fence,
            Err(e) => {
                // Given back, and claimed again on a later heartbeat.
                tracing::warn!(group = %g.key, error = %e, "fencing a CDC group failed; its lease is given back");
                self.bounded(self.config.table.release(&log, g.key, &self.config.name)).await?;
                return Ok(());
            }
        };
        let progress = {
            let mut planner = self.shared.planner();
            // The generation changed meanwhile: the lease goes next heartbeat.
            if planner.generation() != Some(generation) {
                return Ok(());
            }
            self.held(g.key, sent);
            planner.acquire_fenced(g.group, fence.progress, fence.epoch)?;
            self.shared.counters.taken();
            planner.progress(g.group).unwrap_or(g.progress)
        };
        if fence.progress.is_none() {
            let group = GroupProgress { group: g.key, progress, epoch: fence.epoch };
            self.shared.save(Checkpoint { generation, groups: vec![group] }).await?;
        }
        Ok(())
    }

    /// Gives `g` up: the workers leave it, its progress is saved, then its
    /// lease is deleted.
    async fn hand_over(&mut self, g: &GroupState, generation: Millis) -> Result<(), CdcError> {
        self.shared.planner().release(g.group)?;
        // Wait for a window being read and for checkpoint saves that may
        // hold an older progress of the group; for one heartbeat at most, so
        // that a slow window never holds up the renewal of the other leases.
        // Otherwise the group is read on, and handed over on a later
        // heartbeat.
        let deadline = Instant::now() + self.config.heartbeat;
        loop {
            let reading = self.shared.planner().groups().get(g.group.0 as usize).is_some_and(|s| s.reading);
            if !reading && self.shared.saves.quiet() {
                break;
            }
            if Instant::now() >= deadline {
                // Only the holder changes a group's epoch, and it has not
                // taken `g` again since it was listed.
                self.shared.planner().acquire_fenced(g.group, None, g.epoch)?;
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let progress = self.shared.planner().progress(g.group).unwrap_or(g.progress);
        let checkpoint =
            Checkpoint { generation, groups: vec![GroupProgress { group: g.key, progress, epoch: g.epoch }] };
        self.shared.save(checkpoint).await?;
        if let Some(deadlines) = &self.shared.deadlines {
            deadlines.remove(g.key);
        }
        self.bounded(self.config.table.release(&self.shared.log, g.key, &self.config.name)).await?;
        self.shared.counters.left();
        Ok(())
    }

    /// Leaves the groups whose leases could not be renewed in time.
    fn expire(&mut self) {
        let groups = self.shared.planner().groups();
        for g in groups.iter().filter(|g| g.owned) {
            if !self.shared.holds(g.key) {
                tracing::warn!(group = %g.key, "a CDC lease could not be renewed in time; its group is left");
                self.shared.drop_group(g.key);
            }
        }
    }

    /// Gives every lease up (the final checkpoint is saved) and leaves.
    async fn leave(&mut self) -> Result<(), CdcError> {
        let (log, name) = (&self.shared.log, &self.config.name);
        let held: Vec<StreamId> = self
            .bounded(self.config.table.leases(log))
            .await?
            .into_iter()
            .filter(|(_, o)| o == name)
            .map(|(k, _)| k)
            .collect();
        for key in held {
            self.bounded(self.config.table.release(log, key, name)).await?;
        }
        self.bounded(self.config.table.leave(log, name)).await?;
        Ok(())
    }
}

/// Runs `futures` at once; their outputs, in order.
async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(out) => *output = Some(out),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The futures run at once: the first waits for what the second sends,
    /// which one after the other would never finish.
    #[tokio::test]
    async fn join_all_runs_the_futures_at_once_and_keeps_their_order() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let first = async move { rx.await.unwrap_or(0) + 1 };
        let second = async move {
            let _ = tx.send(41);
            7
        };
        let futures: Vec<std::pin::Pin<Box<dyn Future<Output = u32>>>> = vec![Box::pin(first), Box::pin(second)];
        let outputs = tokio::time::timeout(Duration::from_secs(5), join_all(futures)).await;
        assert_eq!(outputs.ok(), Some(vec![42, 7]));
    }
}
