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
//!
//! The decisions are not made here: they are the sans-IO
//! [`crate::coordination::Coordinator`]'s, which the simulator in its tests
//! drives too. This file carries out its requests on the lease table and
//! the checkpoint store, each within the bound of a lease query, and
//! applies its effects to the planner and the deadlines.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checkpoint::{CheckpointStore, Fence};
use crate::coordination::{Answer, Coordinator, Effect, Jitter, Request, Step, Timing, View};
use crate::lease::{LeaseConfig, LeaseError};

use super::{CdcError, Shared};

pub(super) struct Holder {
    shared: Arc<Shared>,
    store: Arc<dyn CheckpointStore>,
    config: LeaseConfig,
    ttl: i32,
    /// The origin of the coordinator's monotonic time.
    origin: Instant,
    /// What to do on each heartbeat.
    coordinator: Coordinator,
}

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
        let timing = Timing {
            ttl: config.ttl,
            heartbeat: config.heartbeat,
            held_for: config.held_for(),
            query_bound: config.query_bound(),
        };
        let coordinator = Coordinator::new(config.name.clone(), grouping, timing, Jitter::new(seed));
        Holder { shared, store, config, ttl, origin: Instant::now(), coordinator }
    }

    /// The coordinator's time.
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Heartbeats until the reader is joined or dropped, then gives every
    /// lease up. Failed heartbeats are retried; they never stop the reader
    /// (a lease not renewed in time is left, see [`Coordinator::expire`]).
    pub(super) async fn run(mut self) -> Result<(), CdcError> {
        let shared = Arc::clone(&self.shared);
        // Taken before the flag is read: a leave during the round ends the
        // sleep after it at once.
        while let Some(left) = shared.leaving.ticket() {
            // Heartbeats start a heartbeat apart however long each takes
            // (up to a tenth early, so that readers drift apart).
            let now = self.now();
            let next = self.origin + self.coordinator.next_heartbeat(now);
            let step = look(&self.shared, |view| self.coordinator.heartbeat(now, view));
            if let Err(e) = self.drive(step).await {
                tracing::warn!(error = %e, "a lease heartbeat failed; retrying");
            }
            let now = self.now();
            look(&self.shared, |view| self.coordinator.expire(now, view));
            if let Err(e) = self.apply() {
                tracing::warn!(error = %e, "leaving the CDC groups whose leases ran out failed");
            }
            if self.coordinator.is_refused() {
                self.shared.stop();
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = left => {}
            }
        }
        let step = self.coordinator.leave();
        if let Err(e) = self.drive(step).await {
            // Nothing is lost: the leases expire after their TTL instead.
            tracing::warn!(error = %e, "giving the CDC leases up failed; they expire instead");
        }
        self.coordinator.take_refused().map_or(Ok(()), Err)
    }

    /// Carries out the coordinator's requests from `step` on, applying its
    /// effects before each, until it is done.
    async fn drive(&mut self, mut step: Step) -> Result<(), CdcError> {
        loop {
            self.apply()?;
            let request = match step {
                Step::Done(result) => return result,
                Step::Issue(request) => request,
            };
            let answer = self.carry_out(request).await;
            let now = self.now();
            step = look(&self.shared, |view| self.coordinator.answer(answer, now, view));
        }
    }

    /// Applies the coordinator's effects, in order; after a failure the
    /// rest of them are dropped with the heartbeat.
    fn apply(&mut self) -> Result<(), CdcError> {
        let effects: Vec<Effect> = self.coordinator.effects().collect();
        for effect in effects {
            match effect {
                Effect::Hold { key, until } => {
                    if let Some(deadlines) = &self.shared.deadlines {
                        deadlines.set(key, self.origin + until);
                    }
                }
                Effect::Unhold(keys) => {
                    if let Some(deadlines) = &self.shared.deadlines {
                        for key in keys {
                            deadlines.remove(key);
                        }
                    }
                }
                Effect::Drop { key, epoch } => self.shared.drop_group(key, epoch),
                Effect::Leave { generation, group } => {
                    let mut planner = self.shared.planner();
                    if planner.generation() == Some(generation) {
                        planner.release(group)?;
                    }
                }
                Effect::Keep { generation, group, epoch } => {
                    let mut planner = self.shared.planner();
                    if planner.generation() == Some(generation) {
                        planner.acquire_fenced(group, None, epoch)?;
                    }
                }
                Effect::Start { generation, group, key: _, fence } => {
                    let mut planner = self.shared.planner();
                    // The generation changed meanwhile: the lease goes next heartbeat.
                    if planner.generation() == Some(generation) {
                        planner.acquire_fenced(group, fence.progress, fence.epoch)?;
                        self.shared.counters.taken();
                    }
                }
                Effect::Left(count) => {
                    for _ in 0..count {
                        self.shared.counters.left();
                    }
                }
                Effect::Observe(saved) => self.shared.planner().observe(&saved),
                Effect::Wake => self.shared.stopping.wake(),
            }
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

    /// Carries out one request of the coordinator's.
    async fn carry_out(&self, request: Request) -> Answer {
        let (table, log, name, ttl) = (&self.config.table, &self.shared.log, &self.config.name, self.ttl);
        match request {
            Request::Renew { groups, grouping: true } => Answer::Renewed(
                self.bounded(table.renew_with_grouping(log, &groups, name, self.coordinator.grouping(), ttl)).await,
            ),
            Request::Renew { groups, grouping: false } => {
                Answer::Renewed(self.bounded(table.renew_all(log, &groups, name, ttl)).await.map(|r| (r, true)))
            }
            Request::RecordGrouping => {
                Answer::Recorded(self.bounded(table.record_grouping(log, self.coordinator.grouping(), ttl)).await)
            }
            Request::ReadTable => Answer::Table(
                async {
                    self.bounded(table.heartbeat(log, name, ttl)).await?;
                    let members = self.bounded(table.members(log)).await?;
                    Ok((members, self.bounded(table.leases(log)).await?))
                }
                .await,
            ),
            Request::Release { groups } => Answer::Released(self.bounded(table.release_all(log, &groups, name)).await),
            Request::Claim { groups } => Answer::Claimed(self.bounded(table.claim_all(log, &groups, name, ttl)).await),
            Request::Fence { generation, groups } => {
                let bound = self.config.query_bound();
                Answer::Fenced(
                    match tokio::time::timeout(bound, self.store.fence_all(log, generation, &groups)).await {
                        Ok(fences) => fences.into_iter().map(|f| f.map_err(CdcError::from)).collect::<Vec<_>>(),
                        Err(_) => groups.iter().map(|_| Err::<Fence, _>(LeaseError::Timeout(bound).into())).collect(),
                    },
                )
            }
            Request::Save(checkpoint) => Answer::Saved(self.bounded(self.shared.save(checkpoint)).await),
            Request::LoadGeneration(generation) => {
                Answer::Loaded(self.bounded(self.store.load_generation(log, generation)).await)
            }
            Request::AwaitIdle { groups, until } => {
                let reading = |shared: &Shared| {
                    let planner = shared.planner();
                    let states = planner.groups();
                    groups.iter().any(|g| states.get(g.0 as usize).is_some_and(|s| s.reading))
                };
                while (reading(&self.shared) || !self.shared.saves.quiet()) && self.now() < until {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Answer::Idle
            }
            Request::ReadLeases => Answer::Leases(self.bounded(table.leases(log)).await),
            Request::Depart => Answer::Departed(self.bounded(table.leave(log, name)).await),
        }
    }
}

/// `f` of the planner as the coordinator sees it now.
fn look<T>(shared: &Shared, f: impl FnOnce(&View<'_>) -> T) -> T {
    let (generation, groups, left_pending) = {
        let planner = shared.planner();
        (planner.generation(), planner.groups(), planner.left_pending())
    };
    f(&View { generation, groups: &groups, left_pending, saves_quiet: shared.saves.quiet() })
}
