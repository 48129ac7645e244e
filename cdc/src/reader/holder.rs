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
//! for that progress. A lease it could not renew in time is dropped before
//! it can expire, so two live readers never read one group.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checkpoint::{Checkpoint, CheckpointStore, GroupProgress};
use crate::lease::{moves, LeaseConfig};
use crate::plan::{GroupState, PlanError};
use crate::stream::StreamId;
use crate::time::Millis;

use super::{CdcError, Shared};

pub(super) struct Holder {
    shared: Arc<Shared>,
    store: Arc<dyn CheckpointStore>,
    config: LeaseConfig,
    ttl: i32,
    /// The leases held, and until when each surely holds (the TTL less a
    /// heartbeat, from when its last renewal was sent).
    valid: HashMap<StreamId, Instant>,
}

impl Holder {
    pub(super) fn new(shared: Arc<Shared>, store: Arc<dyn CheckpointStore>, config: LeaseConfig, ttl: i32) -> Self {
        Holder { shared, store, config, ttl, valid: HashMap::new() }
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

    fn until(&self, sent: Instant) -> Instant {
        sent + Duration::from_secs(self.ttl.unsigned_abs().into()).saturating_sub(self.config.heartbeat)
    }

    async fn heartbeat(&mut self) -> Result<(), CdcError> {
        let (table, name, ttl) = (self.config.table.clone(), self.config.name.clone(), self.ttl);
        let shared = self.shared.clone();
        let log = &shared.log;
        table.heartbeat(log, &name, ttl).await?;
        let members = table.members(log).await?;
        let mut leases = table.leases(log).await?;
        let (generation, groups) = {
            let planner = self.shared.planner();
            (planner.generation(), planner.groups())
        };
        let Some(generation) = generation else { return Ok(()) };
        let by_key: HashMap<StreamId, GroupState> = groups.iter().map(|g| (g.key, *g)).collect();

        for g in groups.iter().filter(|g| g.owned) {
            let sent = Instant::now();
            if table.renew(log, g.key, &name, ttl).await? {
                self.valid.insert(g.key, self.until(sent));
                leases.insert(g.key, name.clone());
            } else {
                tracing::warn!(group = %g.key, "a CDC lease was lost before it was renewed; its group is left");
                self.drop_group(g);
                leases.remove(&g.key);
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
                        table.release(log, key, &name).await?;
                        leases.remove(&key);
                    }
                }
                // Held in the table, not read here: a claim whose answer was lost.
                Some(g) if !g.owned => {
                    let sent = Instant::now();
                    if table.renew(log, key, &name, ttl).await? {
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
            if table.claim(log, g.key, &name, ttl).await? {
                taken.push((*g, sent));
            }
        }

        // Read after the claims: a group handed over was saved before its
        // lease was deleted, so this holds its previous holder's progress.
        let saved = self.store.load_generation(log, generation).await?;
        self.take(&taken, generation, saved.as_ref())?;
        if let Some(saved) = &saved {
            self.shared.planner().observe(saved);
        }
        self.shared.wake.notify_waiters();
        Ok(())
    }

    /// The workers read the groups of `taken` from now on, each from its
    /// progress in `saved`.
    fn take(
        &mut self,
        taken: &[(GroupState, Instant)],
        generation: Millis,
        saved: Option<&Checkpoint>,
    ) -> Result<(), PlanError> {
        let mut planner = self.shared.planner();
        // The generation changed meanwhile: the leases go next heartbeat.
        if planner.generation() != Some(generation) {
            return Ok(());
        }
        for (g, sent) in taken {
            let progress = saved.and_then(|cp| cp.groups.iter().find(|s| s.group == g.key)).map(|s| s.progress);
            self.valid.insert(g.key, self.until(*sent));
            planner.acquire(g.group, progress)?;
        }
        Ok(())
    }

    /// The workers leave `g` at once (its lease is lost or about to be).
    fn drop_group(&mut self, g: &GroupState) {
        self.valid.remove(&g.key);
        // A group of the planner's current generation (listed just before).
        let _ = self.shared.planner().release(g.group);
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
                self.shared.planner().acquire(g.group, None)?;
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let progress = self.shared.planner().progress(g.group).unwrap_or(g.progress);
        let checkpoint = Checkpoint { generation, groups: vec![GroupProgress { group: g.key, progress }] };
        self.store.save(&self.shared.log, &checkpoint).await?;
        self.config.table.release(&self.shared.log, g.key, &self.config.name).await?;
        self.valid.remove(&g.key);
        Ok(())
    }

    /// Leaves the groups whose leases could not be renewed in time.
    fn expire(&mut self) {
        let now = Instant::now();
        let groups = self.shared.planner().groups();
        for g in groups.iter().filter(|g| g.owned) {
            if self.valid.get(&g.key).is_none_or(|until| *until <= now) {
                tracing::warn!(group = %g.key, "a CDC lease could not be renewed in time; its group is left");
                self.drop_group(g);
            }
        }
    }

    /// Gives every lease up (the final checkpoint is saved) and leaves.
    async fn leave(&mut self) -> Result<(), CdcError> {
        let (log, name) = (&self.shared.log, &self.config.name);
        let held: Vec<StreamId> =
            self.config.table.leases(log).await?.into_iter().filter(|(_, o)| o == name).map(|(k, _)| k).collect();
        for key in held {
            self.config.table.release(log, key, name).await?;
        }
        self.config.table.leave(log, name).await?;
        Ok(())
    }
}
