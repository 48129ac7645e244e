//! The lease holder: the thread of a reader that shares its table with
//! other processes ([`crate::lease`]).
//!
//! On every heartbeat it renews this reader's leases, takes back a lease
//! the table says it holds but the planner does not read (a claim whose
//! answer was lost, or a lease kept while its fence is tried again), reads
//! the others' progress from the checkpoint store (so the generation
//! barrier sees every group), and moves towards its quota: groups it gives
//! up are first left by the workers, then their progress is saved, and
//! only then are their leases deleted, so the next holder repeats nothing;
//! groups it claims start at the progress saved last. The leases of a
//! generation the reader left are deleted only once that generation's
//! final checkpoint is saved: readers still in it wait for that progress.
//!
//! What a heartbeat costs does not grow with the groups held: every
//! renewal, claim and release of one heartbeat is one conditional batch of
//! the lease partition ([`LeaseTable::renew_all`]; one Paxos round per
//! [`crate::lease::BATCH_ROWS`] groups), and the groups taken are fenced
//! together ([`CheckpointStore::fence_all`]). In the steady state that is
//! one conditional write per reader per heartbeat, whatever the number of
//! groups. A fence that fails keeps its lease and is tried again on a later
//! heartbeat, after a backoff that doubles with each failure (with jitter),
//! rather than giving the lease back to be claimed again at once. A group
//! that stays free for longer than a TTL (its quota's member cannot take
//! it) is claimed above quota, so a stuck member cannot keep a share
//! unread.
//!
//! Two live readers never read one group: every lease query is bounded
//! ([`LeaseConfig::query_bound`]), each lease has a deadline on the
//! monotonic clock (its renewal sent, plus [`LeaseConfig::held_for`]) that
//! the workers check themselves (`deadlines`), and a group taken is first
//! fenced in the checkpoint store ([`CheckpointStore::fence_all`]): its
//! progress is read after the fence, and a paused reader that comes back
//! after losing the group can no longer save it.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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
    /// Groups whose fence failed: how many times in a row, and when it is
    /// tried again.
    backoff: HashMap<StreamId, (u32, Instant)>,
    /// When each group of the current generation was first seen free.
    free_since: HashMap<StreamId, Instant>,
    /// The state of the jitter's generator.
    jitter: u64,
    /// How this reader groups the log's streams, kept recorded beside the
    /// leases ([`crate::LeaseTable::record_grouping`]).
    grouping: String,
    /// Set when another grouping was recorded meanwhile: the reader stops.
    refused: Option<CdcError>,
}

/// The most heartbeats a failed fence waits before it is tried again.
const MAX_FENCE_BACKOFF: u32 = 8;

impl Holder {
    pub(super) fn new(
        shared: Arc<Shared>,
        store: Arc<dyn CheckpointStore>,
        config: LeaseConfig,
        ttl: i32,
        grouping: String,
    ) -> Self {
        // Readers started together must not heartbeat in step: the seed
        // differs with the name and the start.
        let mut seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        for b in config.name.bytes() {
            seed = (seed ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Holder {
            shared,
            store,
            config,
            ttl,
            backoff: HashMap::new(),
            free_since: HashMap::new(),
            jitter: seed | 1,
            grouping,
            refused: None,
        }
    }

    /// A number in `[0, 1)` (xorshift; jitter needs no better).
    fn random(&mut self) -> f64 {
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        (self.jitter >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Heartbeats until the reader is joined or dropped, then gives every
    /// lease up. Failed heartbeats are retried; they never stop the reader
    /// (a lease not renewed in time is left, see [`Holder::expire`]).
    pub(super) async fn run(mut self) -> Result<(), CdcError> {
        while !self.shared.leaving.load(Ordering::Acquire) {
            // Heartbeats start a heartbeat apart however long each takes
            // (up to a tenth early, so that readers drift apart).
            let next = Instant::now() + self.config.heartbeat.mul_f64(1.0 - self.random() / 10.0);
            if let Err(e) = self.heartbeat().await {
                tracing::warn!(error = %e, "a lease heartbeat failed; retrying");
            }
            self.expire();
            if self.refused.is_some() {
                self.shared.stop();
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = self.shared.leave.notified() => {}
            }
        }
        if let Err(e) = self.leave().await {
            // Nothing is lost: the leases expire after their TTL instead.
            tracing::warn!(error = %e, "giving the CDC leases up failed; they expire instead");
        }
        self.refused.take().map_or(Ok(()), Err)
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

    /// Renews the leases of `groups` in one conditional batch: those
    /// renewed, with when the batch was sent. A group read here is held
    /// for another period, or left when the table says it is no longer
    /// this reader's; when the batch fails, deadlines stand.
    ///
    /// With `grouping`, the batch also keeps the reader's grouping recorded;
    /// a grouping that expired is recorded again, and another one recorded
    /// meanwhile stops the reader ([`CdcError::Grouping`]).
    async fn renew(&mut self, groups: &[GroupState], grouping: bool) -> Vec<(GroupState, Instant)> {
        if groups.is_empty() && !grouping {
            return Vec::new();
        }
        let keys: Vec<StreamId> = groups.iter().map(|g| g.key).collect();
        let sent = Instant::now();
        let (table, log, name, ttl) = (&self.config.table, &self.shared.log, &self.config.name, self.ttl);
        let answer = if grouping {
            self.bounded(table.renew_with_grouping(log, &keys, name, &self.grouping, ttl)).await
        } else {
            self.bounded(table.renew_all(log, &keys, name, ttl)).await.map(|renewed| (renewed, true))
        };
        let (renewed, kept) = match answer {
            Ok((renewed, kept)) => (renewed.into_iter().collect::<HashSet<StreamId>>(), kept),
            Err(e) => {
                tracing::warn!(error = %e, leases = keys.len(), "renewing the CDC leases failed");
                return Vec::new();
            }
        };
        if !kept {
            match self.bounded(table.record_grouping(log, &self.grouping, ttl)).await {
                Ok(recorded) if recorded != self.grouping => {
                    self.refused = Some(CdcError::Grouping { recorded, ours: self.grouping.clone() });
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "recording the CDC reader's grouping again failed"),
            }
        }
        let mut out = Vec::with_capacity(renewed.len());
        for g in groups {
            if renewed.contains(&g.key) {
                if g.owned {
                    self.held(g.key, sent);
                }
                out.push((*g, sent));
            } else if g.owned {
                tracing::warn!(group = %g.key, "a CDC lease was lost before it was renewed; its group is left");
                self.shared.drop_group(g.key, g.epoch);
            }
        }
        out
    }

    async fn heartbeat(&mut self) -> Result<(), CdcError> {
        // The leases read here first: the heartbeat's other queries never
        // delay their renewal.
        let owned: Vec<GroupState> = self.shared.planner().groups().into_iter().filter(|g| g.owned).collect();
        self.renew(&owned, true).await;

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
        let now = Instant::now();
        self.free_since.retain(|k, _| by_key.contains_key(k) && !leases.contains_key(k));
        self.backoff.retain(|k, _| by_key.contains_key(k));
        for g in &groups {
            if !leases.contains_key(&g.key) {
                self.free_since.entry(g.key).or_insert(now);
            }
        }

        // Held in the table, not read here: a claim whose answer was lost,
        // or a lease kept while its fence waits to be tried again.
        let back: Vec<GroupState> =
            groups.iter().filter(|g| !g.owned && leases.get(&g.key).is_some_and(|o| *o == name)).copied().collect();
        // Leases taken on this heartbeat, with when their LWT was sent.
        let mut taken = self.renew(&back, false).await;
        let renewed: HashSet<StreamId> = taken.iter().map(|(g, _)| g.key).collect();
        leases.retain(|k, o| *o != name || !back.iter().any(|g| g.key == *k) || renewed.contains(k));

        // Leases of another generation (finished here), given up once its
        // final progress is saved: the readers still in that generation
        // wait for it.
        let other: Vec<StreamId> =
            leases.iter().filter(|(k, o)| **o == name && !by_key.contains_key(k)).map(|(k, _)| *k).collect();
        if !other.is_empty() && !self.shared.planner().left_pending() && self.shared.saves.quiet() {
            self.bounded(table.release_all(log, &other, &name)).await?;
            leases.retain(|k, _| by_key.contains_key(k));
        }

        let keys: Vec<StreamId> = groups.iter().map(|g| g.key).collect();
        let plan = moves(&name, &members, &keys, &leases);
        let release: Vec<GroupState> = plan.release.iter().filter_map(|k| by_key.get(k)).copied().collect();
        if !release.is_empty() {
            self.hand_over(release, generation).await?;
        }
        let mut claim: Vec<StreamId> = plan.claim.iter().take(plan.wanted).copied().collect();
        // Free for longer than a TTL: the member whose share it is cannot
        // take it, and it is taken above quota.
        let ttl_span = self.config.ttl;
        let stale: Vec<StreamId> = keys
            .iter()
            .filter(|k| !claim.contains(k) && !leases.contains_key(k))
            .filter(|k| self.free_since.get(k).is_some_and(|t| now.duration_since(*t) > ttl_span))
            .copied()
            .collect();
        claim.extend(stale);
        if !claim.is_empty() {
            let sent = Instant::now();
            for key in self.bounded(table.claim_all(log, &claim, &name, ttl)).await? {
                if let Some(g) = by_key.get(&key) {
                    taken.push((*g, sent));
                }
            }
        }

        // Fenced together, past their backoff; the others keep their
        // leases and are fenced on a later heartbeat.
        taken.retain(|(g, _)| self.backoff.get(&g.key).is_none_or(|(_, at)| *at <= now));
        let keys: Vec<StreamId> = taken.iter().map(|(g, _)| g.key).collect();
        let bound = self.config.query_bound();
        let fences: Vec<Result<Fence, CdcError>> =
            match tokio::time::timeout(bound, self.store.fence_all(log, generation, &keys)).await {
                Ok(fences) => fences.into_iter().map(|f| f.map_err(CdcError::from)).collect(),
                Err(_) => keys.iter().map(|_| Err(LeaseError::Timeout(bound).into())).collect(),
            };
        let mut fresh = Vec::new();
        for ((g, sent), fence) in taken.into_iter().zip(fences) {
            if let Some(saved) = self.take(g, sent, generation, fence)? {
                fresh.push(saved);
            }
        }
        // Groups never saved get a record at once, so that whoever takes
        // them after this reader starts where this one did.
        if !fresh.is_empty() {
            self.bounded(self.shared.save(Checkpoint { generation, groups: fresh })).await?;
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
    /// the progress saved before the fence. A failed fence keeps the lease
    /// and is tried again after a backoff. A group never saved comes back
    /// as the record to save for it.
    fn take(
        &mut self,
        g: GroupState,
        sent: Instant,
        generation: Millis,
        fence: Result<Fence, CdcError>,
    ) -> Result<Option<GroupProgress>, CdcError> {
        let fence = match fence {
            Ok(fence) => {
                self.backoff.remove(&g.key);
                fence
            }
            Err(e) => {
                let failures = self.backoff.get(&g.key).map_or(0, |b| b.0).saturating_add(1);
                let beats = 2u32.saturating_pow(failures - 1).min(MAX_FENCE_BACKOFF);
                let wait = self.config.heartbeat.mul_f64(f64::from(beats) * (0.5 + self.random()));
                self.backoff.insert(g.key, (failures, Instant::now() + wait));
                tracing::warn!(group = %g.key, error = %e, failures, ?wait, "fencing a CDC group failed; tried again later");
                return Ok(None);
            }
        };
        let mut planner = self.shared.planner();
        // The generation changed meanwhile: the lease goes next heartbeat.
        if planner.generation() != Some(generation) {
            return Ok(None);
        }
        self.held(g.key, sent);
        planner.acquire_fenced(g.group, fence.progress, fence.epoch)?;
        self.shared.counters.taken();
        let progress = planner.progress(g.group).unwrap_or(g.progress);
        Ok(fence.progress.is_none().then_some(GroupProgress { group: g.key, progress, epoch: fence.epoch }))
    }

    /// Gives `groups` up: the workers leave them, their progress is saved,
    /// then their leases are deleted.
    async fn hand_over(&mut self, groups: Vec<GroupState>, generation: Millis) -> Result<(), CdcError> {
        for g in &groups {
            self.shared.planner().release(g.group)?;
        }
        // Wait for windows being read and for checkpoint saves that may
        // hold an older progress of them; for one heartbeat at most, so
        // that a slow window never holds up the renewal of the other
        // leases. A group still read then is read on, and handed over on a
        // later heartbeat.
        let deadline = Instant::now() + self.config.heartbeat;
        let reading = |shared: &Shared, g: &GroupState| {
            shared.planner().groups().get(g.group.0 as usize).is_some_and(|s| s.reading)
        };
        loop {
            let done = groups.iter().all(|g| !reading(&self.shared, g)) && self.shared.saves.quiet();
            if done || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let quiet = self.shared.saves.quiet();
        let mut leaving = Vec::new();
        for g in groups {
            if quiet && !reading(&self.shared, &g) {
                leaving.push(g);
            } else {
                // Only the holder changes a group's epoch, and it has not
                // taken `g` again since it was listed.
                self.shared.planner().acquire_fenced(g.group, None, g.epoch)?;
            }
        }
        if leaving.is_empty() {
            return Ok(());
        }
        let saved: Vec<GroupProgress> = {
            let planner = self.shared.planner();
            leaving
                .iter()
                .map(|g| GroupProgress {
                    group: g.key,
                    progress: planner.progress(g.group).unwrap_or(g.progress),
                    epoch: g.epoch,
                })
                .collect()
        };
        if let Err(e) = self.bounded(self.shared.save(Checkpoint { generation, groups: saved })).await {
            // Not saved: they are lost rather than handed over, and the
            // barrier waits for their next holder's progress.
            for g in &leaving {
                self.shared.drop_group(g.key, g.epoch);
            }
            return Err(e);
        }
        let keys: Vec<StreamId> = leaving.iter().map(|g| g.key).collect();
        if let Some(deadlines) = &self.shared.deadlines {
            for key in &keys {
                deadlines.remove(*key);
            }
        }
        self.bounded(self.config.table.release_all(&self.shared.log, &keys, &self.config.name)).await?;
        for _ in &keys {
            self.shared.counters.left();
        }
        Ok(())
    }

    /// Leaves the groups whose leases could not be renewed in time.
    fn expire(&mut self) {
        let groups = self.shared.planner().groups();
        for g in groups.iter().filter(|g| g.owned) {
            if !self.shared.holds(g.key) {
                tracing::warn!(group = %g.key, "a CDC lease could not be renewed in time; its group is left");
                self.shared.drop_group(g.key, g.epoch);
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
        self.bounded(self.config.table.release_all(log, &held, name)).await?;
        self.bounded(self.config.table.leave(log, name)).await?;
        Ok(())
    }
}
