//! A deterministic simulation of readers sharing a table: the
//! [`Coordinator`] of each, driven on a virtual clock against a model of
//! the lease table and the checkpoint store with Cassandra's semantics
//! (conditional batches of one partition, applied whole or not at all,
//! rows that expire with a TTL counted in whole seconds on the clock of
//! the node that wrote them, fencing epochs that only grow).
//!
//! Why a simulation: the guarantees of [`crate::lease`] rest on timing
//! (a lease's deadline against its row's expiry, a fence against a
//! paused holder), which a test against a real cluster exercises a few
//! schedules at a time. Here every message may be slow, time out after
//! applying or before, or be refused; readers join, stop, are killed,
//! pause past their TTL, lose the store behind a partition; the nodes'
//! clocks step within the skew bound; and every schedule is a seed,
//! printed by each run and replayed with `SHARDWISE_SIM_SEED=<n>`.
//!
//! Checked all along:
//! * **one holder**: when a reader ends a window of a group, no other
//!   reader holds that group (reads it, its lease surely held), and no
//!   one fenced the group since this reader did;
//! * **LWTs per heartbeat**: the conditional writes (and serial reads) a
//!   reader's heartbeat sends are bounded by its leases in batches of
//!   [`BATCH_ROWS`] and the groups it moves in batches, plus a constant;
//!   in the steady state, one per [`BATCH_ROWS`] leases held;
//!
//! and once the faults stop:
//! * **takeover**: no group stays unread for longer than a TTL and a
//!   heartbeat (and the skew bound and a few round trips);
//! * **no livelock**: the readers settle on their quotas, and nothing
//!   moves any more.
//!
//! The readers' planners are modelled (owned, epoch, progress saved);
//! the coordinator is the reader's own.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use super::{Answer, Coordinator, Effect, Jitter, Request, Step, Timing, View};
use crate::checkpoint::{Checkpoint, CheckpointError, Fence, GroupProgress};
use crate::lease::{quota, LeaseError, BATCH_ROWS};
use crate::plan::{GroupId, GroupState};
use crate::reader::CdcError;
use crate::stream::StreamId;
use crate::time::Millis;

/// The groups fenced by one conditional batch (as the table store).
const FENCE_ROWS: usize = 64;
/// Refused fence batches tried again (as the table store).
const FENCE_ATTEMPTS: usize = 4;
/// The rows of one checkpoint batch (as the table store).
const SAVE_ROWS: usize = 64;
/// The most requests of one heartbeat: renewals, the grouping, the
/// table, taking back, another generation's releases, a hand-over's save
/// and releases, claims, fences, first records, the saved progress.
const MAX_REQUESTS: usize = 11;
/// The one generation read.
const GENERATION: Millis = Millis(1_000);
/// The grouping every reader records.
const GROUPING: &str = "streams_per_query=64 shards=1 ignore_msb=12";

/// Virtual time, in microseconds.
type Time = u64;

const MS: Time = 1_000;
const SEC: Time = 1_000_000;

fn dur(t: Time) -> Duration {
    Duration::from_micros(t)
}

fn micros(d: Duration) -> Time {
    d.as_micros() as Time
}

/// splitmix64: the simulation's one source of randomness.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)` (`lo` when empty).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next() % (hi - lo)
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// A run's shape.
#[derive(Debug, Clone)]
pub(super) struct Scenario {
    pub(super) readers: usize,
    pub(super) groups: usize,
    /// Faults (and joins, stops, kills) happen before this.
    pub(super) chaos: Time,
    /// Then one reader is killed, and the rest runs without faults.
    pub(super) quiet: Time,
    pub(super) ttl: Duration,
    pub(super) heartbeat: Duration,
    pub(super) clock_skew: Duration,
    /// How far the nodes' clocks may be apart (at most `clock_skew` for
    /// the protocol's assumption to hold).
    pub(super) node_skew: Duration,
    /// Per message: slow, timed out after applying, timed out before,
    /// refused.
    pub(super) slow: f64,
    pub(super) lost_after: f64,
    pub(super) lost_before: f64,
    pub(super) refused: f64,
    /// Per reader and second of chaos: kill, pause past the TTL, cut off
    /// from the store, clean stop; per second: a new reader joins.
    pub(super) kill: f64,
    pub(super) pause: f64,
    pub(super) partition: f64,
    pub(super) stop: f64,
    pub(super) join: f64,
    /// Rule switches, to see the checks fail.
    pub(super) broken: Broken,
}

/// Rules of the protocol's shell turned off, to see the checks catch it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Broken {
    /// Workers read past their leases' deadlines.
    pub(super) no_deadline: bool,
}

impl Scenario {
    pub(super) fn new(readers: usize, groups: usize, chaos_secs: u64, quiet_secs: u64) -> Self {
        Scenario {
            readers,
            groups,
            chaos: chaos_secs * SEC,
            quiet: quiet_secs * SEC,
            ttl: Duration::from_secs(10),
            heartbeat: Duration::from_secs(2),
            clock_skew: Duration::from_millis(500),
            node_skew: Duration::from_millis(500),
            slow: 0.03,
            lost_after: 0.01,
            lost_before: 0.01,
            refused: 0.01,
            kill: 0.002,
            pause: 0.002,
            partition: 0.002,
            stop: 0.001,
            join: 0.02,
            broken: Broken::default(),
        }
    }

    fn held_for(&self) -> Duration {
        Duration::from_secs(self.ttl.as_secs()).saturating_sub(Duration::from_secs(1)).saturating_sub(self.clock_skew)
    }

    fn bound(&self) -> Time {
        micros(self.heartbeat.saturating_mul(2).min(self.held_for()))
    }
}

/// What a run found.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub(super) violations: Vec<String>,
    pub(super) heartbeats: u64,
    pub(super) lwts: u64,
    /// Per heartbeat of the steady state: (readers' leases held, LWTs).
    pub(super) steady: Vec<(usize, u32)>,
    /// The LWTs of each heartbeat during the chaos.
    pub(super) chaos: Vec<u32>,
    /// The longest any group stayed unread after the faults stopped.
    pub(super) longest_unread: Time,
    pub(super) simulated: Time,
    pub(super) kills: u32,
    pub(super) pauses: u32,
    pub(super) partitions: u32,
    pub(super) joins: u32,
    pub(super) stops: u32,
    pub(super) takeovers: u64,
}

// ----------------------------------------------------------------- store

/// A row of the lease partition: its owner, and the second (of the
/// writing node's clock) at which it expires.
#[derive(Debug, Clone)]
struct LeaseRow {
    owner: String,
    expires: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaseKind {
    Claim,
    Renew,
    Release,
}

/// A lease partition row: a group's, or the grouping's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Item {
    Group(StreamId),
    Grouping,
}

#[derive(Debug, Clone)]
enum StoreRequest {
    /// A conditional batch of the lease partition: each row's condition
    /// (claim: absent; renew, release: owned by `owner`, the grouping's
    /// by the grouping), all applied or none.
    Leases {
        kind: LeaseKind,
        items: Vec<Item>,
        owner: String,
    },
    MemberWrite(String),
    MemberDelete(String),
    ReadMembers,
    ReadLeases,
    /// A serial read of the groups' epochs and progress.
    FenceRead(Vec<StreamId>),
    /// Raise each epoch, if epoch and progress are the ones given.
    FenceBatch(Vec<(StreamId, Option<u64>, Option<Millis>)>),
    /// A conditional batch of saves, each if its epoch is current.
    Save(Vec<GroupProgress>),
    LoadGeneration,
}

impl StoreRequest {
    /// Whether the request reads or writes `key`'s rows.
    fn touches(&self, key: StreamId) -> bool {
        match self {
            StoreRequest::Leases { items, .. } => items.contains(&Item::Group(key)),
            StoreRequest::FenceRead(groups) => groups.contains(&key),
            StoreRequest::FenceBatch(rows) => rows.iter().any(|r| r.0 == key),
            StoreRequest::Save(groups) => groups.iter().any(|g| g.group == key),
            _ => false,
        }
    }

    fn is_lwt(&self) -> bool {
        matches!(
            self,
            StoreRequest::Leases { .. }
                | StoreRequest::FenceRead(_)
                | StoreRequest::FenceBatch(_)
                | StoreRequest::Save(_)
        )
    }
}

type Saved = HashMap<StreamId, (Option<u64>, Option<Millis>)>;

#[derive(Debug, Clone)]
enum StoreReply {
    Applied,
    /// Refused: the current owner of each row of the batch.
    LeasesRefused(HashMap<Item, Option<String>>),
    /// Refused: the current epoch and progress of each row.
    FenceRefused(Saved),
    SaveRefused,
    Members(Vec<String>),
    Leases(HashMap<StreamId, String>),
    Rows(Saved),
    Generation(Option<Checkpoint>),
    /// Timed out (applied or not), unavailable, overloaded.
    Failed,
}

struct Store {
    leases: HashMap<StreamId, LeaseRow>,
    grouping: Option<LeaseRow>,
    members: HashMap<String, i64>,
    /// Per group: its epoch and saved progress.
    checkpoints: HashMap<StreamId, (u64, Option<Millis>)>,
    /// Each node's clock, ahead of the virtual one by this much (µs).
    nodes: Vec<i64>,
}

impl Store {
    fn node_now(&self, node: usize, now: Time) -> i64 {
        now as i64 + self.nodes[node]
    }

    /// Whether a row that expires at `expires` is live on `node`'s clock.
    fn live(&self, node: usize, now: Time, expires: i64) -> bool {
        self.node_now(node, now).div_euclid(SEC as i64) < expires
    }

    fn expiry(&self, node: usize, now: Time, ttl: Duration) -> i64 {
        self.node_now(node, now).div_euclid(SEC as i64) + ttl.as_secs() as i64
    }

    fn owner(&self, item: Item, node: usize, now: Time) -> Option<&str> {
        let row = match item {
            Item::Group(key) => self.leases.get(&key),
            Item::Grouping => self.grouping.as_ref(),
        };
        row.filter(|r| self.live(node, now, r.expires)).map(|r| r.owner.as_str())
    }

    fn apply(&mut self, request: &StoreRequest, node: usize, now: Time, ttl: Duration) -> StoreReply {
        match request {
            StoreRequest::Leases { kind, items, owner } => {
                let wanted = |item: &Item| match item {
                    Item::Grouping => GROUPING,
                    Item::Group(_) => owner.as_str(),
                };
                let holds = |item: &Item| {
                    let current = self.owner(*item, node, now);
                    match kind {
                        LeaseKind::Claim => current.is_none(),
                        LeaseKind::Renew | LeaseKind::Release => current == Some(wanted(item)),
                    }
                };
                if !items.iter().all(holds) {
                    let owners = items.iter().map(|i| (*i, self.owner(*i, node, now).map(str::to_owned))).collect();
                    return StoreReply::LeasesRefused(owners);
                }
                let expires = self.expiry(node, now, ttl);
                for item in items {
                    let row = LeaseRow { owner: wanted(item).to_owned(), expires };
                    match (kind, item) {
                        (LeaseKind::Release, Item::Group(key)) => {
                            self.leases.remove(key);
                        }
                        (LeaseKind::Release, Item::Grouping) => self.grouping = None,
                        (_, Item::Group(key)) => {
                            self.leases.insert(*key, row);
                        }
                        (_, Item::Grouping) => self.grouping = Some(row),
                    }
                }
                StoreReply::Applied
            }
            StoreRequest::MemberWrite(name) => {
                let expires = self.expiry(node, now, ttl);
                self.members.insert(name.clone(), expires);
                StoreReply::Applied
            }
            StoreRequest::MemberDelete(name) => {
                self.members.remove(name);
                StoreReply::Applied
            }
            StoreRequest::ReadMembers => StoreReply::Members(self.members(node, now)),
            StoreRequest::ReadLeases => StoreReply::Leases(
                self.leases
                    .iter()
                    .filter(|(_, r)| self.live(node, now, r.expires))
                    .map(|(k, r)| (*k, r.owner.clone()))
                    .collect(),
            ),
            StoreRequest::FenceRead(groups) => StoreReply::Rows(self.rows(groups.iter().copied())),
            StoreRequest::FenceBatch(rows) => {
                let current = |k: &StreamId| self.checkpoints.get(k).map(|(e, p)| (Some(*e), *p));
                if rows.iter().all(|(k, e, p)| current(k).unwrap_or((None, None)) == (*e, *p)) {
                    for (k, e, p) in rows {
                        self.checkpoints.insert(*k, (e.unwrap_or(0) + 1, *p));
                    }
                    StoreReply::Applied
                } else {
                    StoreReply::FenceRefused(self.rows(rows.iter().map(|r| r.0)))
                }
            }
            StoreRequest::Save(groups) => {
                let current = |g: &GroupProgress| self.checkpoints.get(&g.group).map_or(0, |c| c.0);
                if !groups.iter().all(|g| current(g) == g.epoch) {
                    return StoreReply::SaveRefused;
                }
                for g in groups {
                    let row = self.checkpoints.entry(g.group).or_insert((g.epoch, None));
                    row.1 = Some(g.progress);
                }
                StoreReply::Applied
            }
            StoreRequest::LoadGeneration => {
                let groups: Vec<GroupProgress> = self
                    .checkpoints
                    .iter()
                    .filter_map(|(k, (e, p))| p.map(|p| GroupProgress { group: *k, progress: p, epoch: *e }))
                    .collect();
                StoreReply::Generation((!groups.is_empty()).then_some(Checkpoint { generation: GENERATION, groups }))
            }
        }
    }

    /// The members listed on `node`, in name order.
    fn members(&self, node: usize, now: Time) -> Vec<String> {
        let mut members: Vec<String> =
            self.members.iter().filter(|(_, e)| self.live(node, now, **e)).map(|(m, _)| m.clone()).collect();
        members.sort();
        members
    }

    fn rows(&self, groups: impl Iterator<Item = StreamId>) -> Saved {
        groups.filter_map(|k| self.checkpoints.get(&k).map(|(e, p)| (k, (Some(*e), *p)))).collect()
    }
}

// ------------------------------------------------------------------- ops

/// What an operation does next.
enum OpStep {
    Send(StoreRequest),
    Done(Done),
}

enum Done {
    Answer(Answer),
    /// A save: the groups saved and those refused, or a failure.
    Save(Result<(Vec<GroupProgress>, Vec<GroupProgress>), CdcError>),
}

fn failed() -> CdcError {
    CdcError::Lease(LeaseError::Timeout(Duration::from_secs(2)))
}

/// The client side of one request, as the lease table and the checkpoint
/// store carry it out: batches of a bounded size, a refused batch sent
/// again without the rows its answer shows failing.
enum Op {
    Leases {
        kind: LeaseKind,
        owner: String,
        chunks: Vec<Vec<Item>>,
        left: Vec<Item>,
        applied: Vec<Item>,
        answer: fn(Result<Vec<Item>, CdcError>) -> Answer,
    },
    Table {
        name: String,
        members: Option<Vec<String>>,
        stage: u8,
    },
    Fence {
        chunks: Vec<Vec<StreamId>>,
        chunk: Vec<StreamId>,
        attempt: usize,
        read: bool,
        current: Saved,
        out: Vec<Result<Fence, CdcError>>,
    },
    Save {
        chunks: Vec<Vec<GroupProgress>>,
        chunk: Vec<GroupProgress>,
        /// Refused batch: its groups one by one.
        singles: Vec<GroupProgress>,
        single: Option<GroupProgress>,
        saved: Vec<GroupProgress>,
        refused: Vec<GroupProgress>,
    },
    Simple(StoreRequest, fn(StoreReply) -> Answer),
}

impl Op {
    fn leases(kind: LeaseKind, owner: &str, items: Vec<Item>, answer: fn(Result<Vec<Item>, CdcError>) -> Answer) -> Op {
        let mut chunks: Vec<Vec<Item>> = items.chunks(BATCH_ROWS).map(<[Item]>::to_vec).collect();
        chunks.reverse();
        Op::Leases { kind, owner: owner.to_owned(), chunks, left: Vec::new(), applied: Vec::new(), answer }
    }

    fn save(groups: Vec<GroupProgress>) -> Op {
        let mut chunks: Vec<Vec<GroupProgress>> = groups.chunks(SAVE_ROWS).map(<[GroupProgress]>::to_vec).collect();
        chunks.reverse();
        Op::Save {
            chunks,
            chunk: Vec::new(),
            singles: Vec::new(),
            single: None,
            saved: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// The first step (`None`), or the next after `reply`.
    fn step(&mut self, reply: Option<StoreReply>) -> OpStep {
        match self {
            Op::Leases { kind, owner, chunks, left, applied, answer } => {
                match reply {
                    None => {}
                    Some(StoreReply::Applied) => applied.append(left),
                    Some(StoreReply::LeasesRefused(owners)) => {
                        let before = left.len();
                        let kind = *kind;
                        let keeps = |item: &Item| {
                            let current = owners.get(item).cloned().flatten();
                            match (kind, item) {
                                (LeaseKind::Claim, _) => current.is_none(),
                                (_, Item::Grouping) => current.as_deref() == Some(GROUPING),
                                (_, Item::Group(_)) => current.as_deref() == Some(owner.as_str()),
                            }
                        };
                        left.retain(keeps);
                        if left.len() == before {
                            return OpStep::Done(Done::Answer(answer(Err(LeaseError::Refused.into()))));
                        }
                    }
                    Some(_) => return OpStep::Done(Done::Answer(answer(Err(failed())))),
                }
                if left.is_empty() {
                    match chunks.pop() {
                        Some(next) => *left = next,
                        None => return OpStep::Done(Done::Answer(answer(Ok(std::mem::take(applied))))),
                    }
                }
                OpStep::Send(StoreRequest::Leases { kind: *kind, items: left.clone(), owner: owner.clone() })
            }
            Op::Table { name, members, stage } => {
                let request = match (*stage, reply) {
                    (0, None) => StoreRequest::MemberWrite(name.clone()),
                    (0, Some(StoreReply::Applied)) => StoreRequest::ReadMembers,
                    (1, Some(StoreReply::Members(m))) => {
                        *members = Some(m);
                        StoreRequest::ReadLeases
                    }
                    (2, Some(StoreReply::Leases(leases))) => {
                        let members = members.take().unwrap_or_default();
                        return OpStep::Done(Done::Answer(Answer::Table(Ok((members, leases)))));
                    }
                    _ => return OpStep::Done(Done::Answer(Answer::Table(Err(failed())))),
                };
                if !matches!(request, StoreRequest::MemberWrite(_)) {
                    *stage += 1;
                }
                OpStep::Send(request)
            }
            Op::Fence { chunks, chunk, attempt, read, current, out } => {
                match reply {
                    None => {}
                    Some(StoreReply::Rows(rows)) if *read => {
                        *read = false;
                        *current = rows;
                    }
                    Some(StoreReply::Applied) => {
                        for k in chunk.iter() {
                            let (e, p) = current.get(k).copied().unwrap_or((None, None));
                            out.push(Ok(Fence { epoch: e.unwrap_or(0) + 1, progress: p }));
                        }
                        chunk.clear();
                    }
                    Some(StoreReply::FenceRefused(rows)) if *attempt < FENCE_ATTEMPTS => *current = rows,
                    Some(StoreReply::FenceRefused(_)) => {
                        let key = chunk.first().copied().unwrap_or(StreamId::from_bytes([0; 16]));
                        out.extend(chunk.drain(..).map(|_| Err(CheckpointError::FenceContended(key).into())));
                    }
                    Some(_) => out.extend(chunk.drain(..).map(|_| Err(failed()))),
                }
                if chunk.is_empty() {
                    match chunks.pop() {
                        Some(next) => {
                            *chunk = next;
                            *read = true;
                            *attempt = 0;
                            return OpStep::Send(StoreRequest::FenceRead(chunk.clone()));
                        }
                        None => return OpStep::Done(Done::Answer(Answer::Fenced(std::mem::take(out)))),
                    }
                }
                *attempt += 1;
                let rows = chunk
                    .iter()
                    .map(|k| {
                        let (e, p) = current.get(k).copied().unwrap_or((None, None));
                        (*k, e, p)
                    })
                    .collect();
                OpStep::Send(StoreRequest::FenceBatch(rows))
            }
            Op::Save { chunks, chunk, singles, single, saved, refused } => {
                match reply {
                    None => {}
                    Some(StoreReply::Applied) => match single.take() {
                        Some(g) => saved.push(g),
                        None => saved.append(chunk),
                    },
                    Some(StoreReply::SaveRefused) => match single.take() {
                        Some(g) => refused.push(g),
                        // To learn which: the groups one by one.
                        None => *singles = std::mem::take(chunk),
                    },
                    Some(_) => return OpStep::Done(Done::Save(Err(failed()))),
                }
                if let Some(g) = singles.pop() {
                    *single = Some(g);
                    return OpStep::Send(StoreRequest::Save(vec![g]));
                }
                match chunks.pop() {
                    Some(next) => {
                        *chunk = next;
                        OpStep::Send(StoreRequest::Save(chunk.clone()))
                    }
                    None => OpStep::Done(Done::Save(Ok((std::mem::take(saved), std::mem::take(refused))))),
                }
            }
            Op::Simple(request, answer) => match reply {
                None => OpStep::Send(request.clone()),
                Some(reply) => OpStep::Done(Done::Answer(answer(reply))),
            },
        }
    }
}

/// The index of the group named `key` (the simulation's keys count from 1).
fn index(key: StreamId) -> Option<usize> {
    let bytes = key.as_bytes();
    let mut n = [0u8; 8];
    n.copy_from_slice(&bytes[..8]);
    usize::try_from(u64::from_be_bytes(n)).ok()?.checked_sub(1)
}

fn groups_of(items: Vec<Item>) -> Vec<StreamId> {
    items
        .into_iter()
        .filter_map(|i| match i {
            Item::Group(k) => Some(k),
            Item::Grouping => None,
        })
        .collect()
}

// ---------------------------------------------------------------- reader

/// Who awaits an operation's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Holder,
    /// The workers' periodic save.
    Checkpoint,
}

struct InFlight {
    id: u64,
    op: Op,
    /// The answer if it runs past its bound.
    timeout: Option<Answer>,
}

struct Reader {
    name: String,
    coordinator: Coordinator,
    /// The modelled planner: the groups, and each one's progress saved.
    groups: Vec<GroupState>,
    saved: Vec<Millis>,
    /// Its monotonic clock reads zero at this virtual time.
    origin: Time,
    alive: bool,
    /// Stopped (SIGSTOP) until then.
    paused_until: Option<Time>,
    /// Cut off from the store until then.
    cut_until: Time,
    /// Stopping cleanly: the workers stopped, the leases are given up.
    leaving: bool,
    /// Giving the leases up.
    departing: bool,
    /// When the next heartbeat starts.
    next_beat: Time,
    holder: Option<InFlight>,
    checkpoint: Option<InFlight>,
    /// The holder's wait for idle workers, and until when.
    idle_until: Option<Time>,
    in_beat: bool,
    /// The LWTs of the heartbeat under way, the leases held at its start,
    /// and the groups it moved.
    beat_lwts: u32,
    beat_held: usize,
    beat_moved: usize,
    /// The groups of its saves refused one by one (a cost of its own).
    beat_singles: usize,
    /// Conditional batches refused: each is sent again without the rows
    /// that failed (a race with another reader).
    beat_refusals: usize,
    /// What the heartbeat's requests cost without races: one LWT per
    /// batch, two per fenced chunk (a serial read and a batch).
    beat_budget: usize,
    beat_requests: usize,
    beat_started: Time,
    next_op: u64,
}

impl Reader {
    fn mono(&self, now: Time) -> Duration {
        dur(now.saturating_sub(self.origin))
    }

    /// The coordinator, and the planner as it sees it.
    fn split(&mut self) -> (&mut Coordinator, View<'_>) {
        let view = View {
            generation: Some(GENERATION),
            groups: &self.groups,
            left_pending: false,
            saves_quiet: self.checkpoint.is_none(),
        };
        (&mut self.coordinator, view)
    }

    /// Whether its workers read.
    fn active(&self, now: Time) -> bool {
        self.alive && !self.leaving && self.paused_until.is_none_or(|t| t <= now)
    }
}

// ------------------------------------------------------------------ world

#[derive(Debug, Clone)]
enum Event {
    Beat(usize),
    /// A worker's round: windows end, a checkpoint is saved now and then.
    Work(usize),
    /// A request reaches the store.
    Arrive {
        reader: usize,
        op: u64,
        node: usize,
        request: StoreRequest,
        reply_lost: bool,
        slow: Time,
    },
    /// A reply reaches the reader.
    Reply {
        reader: usize,
        op: u64,
        reply: StoreReply,
    },
    /// The bound of a holder's request.
    Bound {
        reader: usize,
        op: u64,
    },
    /// The holder's wait for idle workers ends, or is looked at again.
    Idle {
        reader: usize,
    },
    Resume(usize),
    Kill,
    Pause,
    Cut,
    Stop,
    Join,
    StepClock,
    /// The periodic look at every group, once the faults stopped.
    Survey,
}

pub(super) struct Sim {
    scenario: Scenario,
    rng: Rng,
    now: Time,
    seq: u64,
    queue: BinaryHeap<Reverse<(Time, u64)>>,
    events: HashMap<u64, Event>,
    store: Store,
    readers: Vec<Reader>,
    keys: Vec<StreamId>,
    /// Per group: the reader that ended a window of it last.
    last_reader: Vec<Option<usize>>,
    /// Per group: since when no active reader reads it.
    unread_since: Vec<Option<Time>>,
    report: Report,
    /// When the last fault ended.
    calm_from: Time,
    /// Ownership changes seen by the survey.
    moves: u64,
    moves_at_settle: Option<u64>,
    settled_at: Time,
    /// `SHARDWISE_SIM_TRACE=<group>`: that group's history, printed.
    trace: Option<StreamId>,
}

impl Sim {
    pub(super) fn new(scenario: Scenario, seed: u64) -> Sim {
        let mut rng = Rng(seed);
        let skew = micros(scenario.node_skew) as i64;
        let nodes = (0..3).map(|_| rng.range(0, skew as u64 + 1) as i64 - skew / 2).collect();
        let keys: Vec<StreamId> = (0..scenario.groups)
            .map(|i| {
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&(i as u64 + 1).to_be_bytes());
                StreamId::from_bytes(id)
            })
            .collect();
        let store = Store {
            leases: HashMap::new(),
            grouping: None,
            members: HashMap::new(),
            checkpoints: HashMap::new(),
            nodes,
        };
        let groups = scenario.groups;
        let mut sim = Sim {
            scenario,
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            store,
            readers: Vec::new(),
            keys,
            last_reader: vec![None; groups],
            unread_since: vec![Some(0); groups],
            report: Report::default(),
            calm_from: 0,
            moves: 0,
            moves_at_settle: None,
            settled_at: 0,
            trace: None,
        };
        sim.trace = std::env::var("SHARDWISE_SIM_TRACE")
            .ok()
            .and_then(|g| g.parse::<usize>().ok())
            .and_then(|g| sim.keys.get(g).copied());
        for _ in 0..sim.scenario.readers {
            sim.join();
        }
        if sim.scenario.chaos > 0 {
            sim.at(sim.scenario.chaos, Event::Kill);
        }
        sim.at(sim.scenario.chaos, Event::Survey);
        sim.schedule_faults();
        sim
    }

    fn at(&mut self, time: Time, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((time, self.seq)));
        self.events.insert(self.seq, event);
    }

    /// The chaos: kills, pauses, cuts, stops and joins at random times,
    /// and steps of the nodes' clocks.
    fn schedule_faults(&mut self) {
        let seconds = self.scenario.chaos / SEC;
        let readers = self.scenario.readers as f64;
        for second in 0..seconds {
            let t = second * SEC;
            let draw = |sim: &mut Sim, p: f64, event: Event| {
                let count = (0..4).filter(|_| sim.rng.chance(p * readers / 4.0)).count();
                for _ in 0..count {
                    let when = t + sim.rng.range(0, SEC);
                    sim.at(when, event.clone());
                }
            };
            draw(self, self.scenario.kill, Event::Kill);
            draw(self, self.scenario.pause, Event::Pause);
            draw(self, self.scenario.partition, Event::Cut);
            draw(self, self.scenario.stop, Event::Stop);
            if self.rng.chance(self.scenario.join) {
                let when = t + self.rng.range(0, SEC);
                self.at(when, Event::Join);
            }
            if self.rng.chance(0.05) {
                let when = t + self.rng.range(0, SEC);
                self.at(when, Event::StepClock);
            }
        }
    }

    fn chaos(&self) -> bool {
        self.now < self.scenario.chaos
    }

    fn join(&mut self) {
        let index = self.readers.len();
        let name = format!("r{index:03}");
        let timing = Timing {
            ttl: self.scenario.ttl,
            heartbeat: self.scenario.heartbeat,
            held_for: self.scenario.held_for(),
            query_bound: dur(self.scenario.bound()),
        };
        let jitter = Jitter::new(self.rng.next());
        let groups = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, key)| GroupState {
                group: GroupId(i as u32),
                key: *key,
                owned: false,
                reading: false,
                progress: Millis(GENERATION.0),
                epoch: 0,
            })
            .collect();
        self.readers.push(Reader {
            name: name.clone(),
            coordinator: Coordinator::new(name, GROUPING.into(), timing, jitter),
            groups,
            saved: vec![GENERATION; self.keys.len()],
            origin: self.now.saturating_sub(self.rng.range(0, 1000 * SEC)),
            alive: true,
            paused_until: None,
            cut_until: 0,
            leaving: false,
            departing: false,
            next_beat: 0,
            holder: None,
            checkpoint: None,
            idle_until: None,
            in_beat: false,
            beat_lwts: 0,
            beat_held: 0,
            beat_moved: 0,
            beat_singles: 0,
            beat_refusals: 0,
            beat_budget: 0,
            beat_requests: 0,
            beat_started: 0,
            next_op: 0,
        });
        self.report.joins += 1;
        let first = self.now + self.rng.range(0, micros(self.scenario.heartbeat));
        self.at(first, Event::Beat(index));
        let work = first + self.rng.range(0, 500 * MS);
        self.at(work, Event::Work(index));
    }

    /// A random reader that is alive and not paused, if any.
    fn pick(&mut self) -> Option<usize> {
        let now = self.now;
        let candidates: Vec<usize> = (0..self.readers.len()).filter(|i| self.readers[*i].active(now)).collect();
        if candidates.len() < 2 {
            return None;
        }
        Some(candidates[self.rng.range(0, candidates.len() as u64) as usize])
    }

    pub(super) fn run(mut self) -> Report {
        let end = self.scenario.chaos + self.scenario.quiet;
        while let Some(Reverse((time, seq))) = self.queue.pop() {
            if time > end {
                break;
            }
            self.now = time;
            let Some(event) = self.events.remove(&seq) else { continue };
            // A paused reader does nothing until it resumes: its timers
            // fire, and its messages are read, late.
            if let Some(r) = event.reader() {
                if let Some(until) = self.readers[r].paused_until.filter(|u| *u > time) {
                    self.at(until, event);
                    continue;
                }
                if !self.readers[r].alive && !matches!(event, Event::Arrive { .. }) {
                    continue;
                }
            }
            self.handle(event);
            if self.report.violations.len() > 20 {
                break;
            }
        }
        self.now = end;
        self.finish();
        self.report.simulated = end;
        self.report
    }

    fn handle(&mut self, event: Event) {
        if self.trace.is_some() && matches!(event, Event::Resume(_) | Event::Join) {
            self.log(format!("{event:?}"));
        }
        match event {
            Event::Beat(r) => self.beat(r),
            Event::Work(r) => self.work(r),
            Event::Arrive { reader, op, node, request, reply_lost, slow } => {
                let reply = self.store.apply(&request, node, self.now, self.scenario.ttl);
                if let Some(key) = self.trace.filter(|k| request.touches(*k)) {
                    let name = &self.readers[reader].name;
                    let row = self.store.leases.get(&key);
                    let epoch = self.store.checkpoints.get(&key);
                    self.log(format!(
                        "{name} {request:?} on node {node}: {reply:?}; lease {row:?}, checkpoint {epoch:?}"
                    ));
                }
                if let StoreRequest::FenceBatch(rows) = &request {
                    if matches!(reply, StoreReply::Applied) {
                        self.report.takeovers += rows.len() as u64;
                    }
                }
                if self.cut(reader) && !reply_lost {
                    // Cut off meanwhile: the driver gives up after its timeout.
                    self.at(self.now + 2 * SEC, Event::Reply { reader, op, reply: StoreReply::Failed });
                } else if !reply_lost {
                    let back = self.latency() + slow;
                    self.at(self.now + back, Event::Reply { reader, op, reply });
                }
            }
            Event::Reply { reader, op, reply } => self.reply(reader, op, reply),
            Event::Bound { reader, op } => {
                let rd = &mut self.readers[reader];
                if rd.holder.as_ref().is_some_and(|f| f.id == op) {
                    if let Some(answer) = rd.holder.take().and_then(|f| f.timeout) {
                        self.holder_answer(reader, answer);
                    }
                }
            }
            Event::Idle { reader } => self.idle(reader),
            Event::Resume(r) => self.resume(r),
            Event::Kill => {
                if let Some(r) = self.pick() {
                    if self.trace.is_some() {
                        self.log(format!("{} killed", self.readers[r].name));
                    }
                    self.kill(r);
                }
            }
            Event::Pause => {
                if let Some(r) = self.pick() {
                    let span = micros(self.scenario.ttl) + self.rng.range(0, 3 * micros(self.scenario.ttl));
                    let until = self.now + span;
                    self.readers[r].paused_until = Some(until);
                    self.calm_from = self.calm_from.max(until);
                    if self.trace.is_some() {
                        self.log(format!("{} paused until {:.3}", self.readers[r].name, until as f64 / 1e6));
                    }
                    self.recount(r);
                    self.at(until, Event::Resume(r));
                    self.report.pauses += 1;
                }
            }
            Event::Cut => {
                if let Some(r) = self.pick() {
                    let span = self.rng.range(SEC, 3 * micros(self.scenario.ttl));
                    self.readers[r].cut_until = self.now + span;
                    if self.trace.is_some() {
                        self.log(format!("{} cut off for {:.3} s", self.readers[r].name, span as f64 / 1e6));
                    }
                    self.report.partitions += 1;
                    self.calm_from = self.calm_from.max(self.now + span);
                }
            }
            Event::Stop => {
                if let Some(r) = self.pick() {
                    // The workers stop (and the final checkpoint is
                    // saved); the leases are given up on the next beat.
                    self.readers[r].leaving = true;
                    if self.trace.is_some() {
                        self.log(format!("{} stops", self.readers[r].name));
                    }
                    self.recount(r);
                    self.report.stops += 1;
                }
            }
            Event::Join => self.join(),
            Event::StepClock => {
                let skew = micros(self.scenario.node_skew) as i64;
                let node = self.rng.range(0, self.store.nodes.len() as u64) as usize;
                self.store.nodes[node] = self.rng.range(0, skew as u64 + 1) as i64 - skew / 2;
            }
            Event::Survey => self.survey(),
        }
    }

    fn cut(&self, reader: usize) -> bool {
        self.readers[reader].cut_until > self.now
    }

    fn latency(&mut self) -> Time {
        self.rng.range(500, 5 * MS)
    }

    fn kill(&mut self, r: usize) {
        let reader = &mut self.readers[r];
        reader.alive = false;
        reader.paused_until = None;
        self.recount(r);
        self.report.kills += 1;
        self.calm_from = self.calm_from.max(self.now);
    }

    fn resume(&mut self, r: usize) {
        if self.readers[r].paused_until.is_some_and(|u| u <= self.now) && self.readers[r].alive {
            self.readers[r].paused_until = None;
            self.calm_from = self.calm_from.max(self.now);
            self.recount(r);
        }
    }

    /// A reader stopped or started acting: the groups it holds count as
    /// read or not.
    fn recount(&mut self, r: usize) {
        let owned: Vec<usize> = (0..self.keys.len()).filter(|g| self.readers[r].groups[*g].owned).collect();
        for g in owned {
            self.ownership_changed(g);
        }
    }

    /// Keeps `unread_since` of group `g` up to date after a change of
    /// its owners.
    fn ownership_changed(&mut self, g: usize) {
        let now = self.now;
        let read = self.readers.iter().any(|r| r.active(now) && r.groups[g].owned);
        match (read, self.unread_since[g]) {
            (true, Some(since)) => {
                if !self.chaos() {
                    let unread = now.saturating_sub(since.max(self.calm_from));
                    self.report.longest_unread = self.report.longest_unread.max(unread);
                }
                self.unread_since[g] = None;
            }
            (false, None) => self.unread_since[g] = Some(now),
            _ => {}
        }
        self.moves += 1;
    }

    // ------------------------------------------------------------ holder

    fn beat(&mut self, r: usize) {
        let now = self.now;
        let reader = &mut self.readers[r];
        if reader.in_beat {
            return;
        }
        let mono = reader.mono(now);
        let next = reader.coordinator.next_heartbeat(mono);
        reader.next_beat = reader.origin + micros(next);
        let step = if reader.leaving {
            reader.departing = true;
            reader.coordinator.leave()
        } else {
            let (coordinator, view) = reader.split();
            coordinator.heartbeat(mono, &view)
        };
        reader.in_beat = true;
        reader.beat_lwts = 0;
        reader.beat_held = reader.groups.iter().filter(|g| g.owned).count();
        reader.beat_moved = 0;
        reader.beat_singles = 0;
        reader.beat_refusals = 0;
        reader.beat_budget = 0;
        reader.beat_requests = 0;
        reader.beat_started = now;
        self.holder_step(r, step);
    }

    /// Applies the coordinator's effects and carries out its next request.
    fn holder_step(&mut self, r: usize, step: Step) {
        self.apply(r);
        match step {
            Step::Done(_) => self.beat_done(r),
            Step::Issue(request) => self.issue(r, request),
        }
    }

    fn beat_done(&mut self, r: usize) {
        let now = self.now;
        let reader = &mut self.readers[r];
        reader.in_beat = false;
        if reader.departing {
            reader.alive = false;
            return;
        }
        let (next, leaving) = (reader.next_beat.max(now + 1), reader.leaving);
        self.at(next, Event::Beat(r));
        if leaving {
            return;
        }
        let reader = &mut self.readers[r];
        let mono = reader.mono(now);
        let (coordinator, view) = reader.split();
        coordinator.expire(mono, &view);
        self.apply(r);
        let reader = &self.readers[r];
        self.report.heartbeats += 1;
        self.report.lwts += u64::from(reader.beat_lwts);
        let (held, lwts, moved) = (reader.beat_held, reader.beat_lwts as usize, reader.beat_moved);
        let batches = |n: usize, rows: usize| n.div_ceil(rows);
        // One LWT per batch of each request, one more per batch refused
        // (sent again without the rows that failed: a race), one per group
        // of a refused save; and a bounded number of requests.
        let bound = reader.beat_budget + reader.beat_refusals + reader.beat_singles;
        let active = reader.active(now);
        if self.now < self.scenario.chaos {
            self.report.chaos.push(reader.beat_lwts);
        }
        if lwts > bound || reader.beat_requests > MAX_REQUESTS {
            let name = reader.name.clone();
            let requests = reader.beat_requests;
            self.violation(format!(
                "{name}: {lwts} LWTs and {requests} requests in one heartbeat, holding {held} leases and moving \
                 {moved} groups (bound {bound})"
            ));
        }
        // Heartbeats that started once the readers settled.
        let steady = self.moves_at_settle.is_some() && self.readers[r].beat_started > self.settled_at;
        if !self.chaos() && steady && active {
            let lwts = self.readers[r].beat_lwts;
            self.report.steady.push((held, lwts));
            if lwts as usize != batches(held + 1, BATCH_ROWS) {
                let name = self.readers[r].name.clone();
                self.violation(format!(
                    "{name}: {lwts} LWTs in a heartbeat of the steady state, holding {held} leases"
                ));
            }
        }
    }

    fn apply(&mut self, r: usize) {
        let effects: Vec<Effect> = self.readers[r].coordinator.effects().collect();
        for effect in effects {
            if let Some(key) = self.trace {
                let traced = match &effect {
                    Effect::Hold { key: k, .. } | Effect::Drop { key: k, .. } | Effect::Start { key: k, .. } => {
                        *k == key
                    }
                    Effect::Leave { group, .. } | Effect::Keep { group, .. } => self.keys[group.0 as usize] == key,
                    Effect::Unhold(keys) => keys.contains(&key),
                    _ => false,
                };
                if traced {
                    let reader = &self.readers[r];
                    let mono = reader.mono(self.now).as_secs_f64();
                    let name = reader.name.clone();
                    self.log(format!("{name} (mono {mono:.3}) {effect:?}"));
                }
            }
            match effect {
                Effect::Hold { .. } | Effect::Unhold(_) | Effect::Left(_) | Effect::Wake => {}
                Effect::Drop { key, epoch } => self.drop_group(r, key, epoch),
                Effect::Leave { group, .. } => {
                    self.readers[r].groups[group.0 as usize].owned = false;
                    self.readers[r].beat_moved += 1;
                    self.ownership_changed(group.0 as usize);
                }
                Effect::Keep { group, epoch, .. } => {
                    let g = &mut self.readers[r].groups[group.0 as usize];
                    g.owned = true;
                    g.epoch = epoch;
                    self.ownership_changed(group.0 as usize);
                }
                Effect::Start { group, fence, .. } => {
                    let i = group.0 as usize;
                    let reader = &mut self.readers[r];
                    reader.beat_moved += 1;
                    let g = &mut reader.groups[i];
                    g.owned = true;
                    g.epoch = fence.epoch;
                    if let Some(p) = fence.progress {
                        reader.saved[i] = reader.saved[i].max(p);
                        g.progress = g.progress.max(p);
                    }
                    self.ownership_changed(i);
                }
                Effect::Observe(cp) => {
                    let reader = &mut self.readers[r];
                    for saved in &cp.groups {
                        if let Some(i) = index(saved.group) {
                            reader.saved[i] = reader.saved[i].max(saved.progress);
                            if !reader.groups[i].owned {
                                reader.groups[i].progress = reader.groups[i].progress.max(saved.progress);
                            }
                        }
                    }
                }
            }
        }
    }

    /// `Shared::drop_group`: the group is left if still held with `epoch`,
    /// its progress back to the furthest saved.
    fn drop_group(&mut self, r: usize, key: StreamId, epoch: u64) {
        let Some(i) = index(key).filter(|i| *i < self.keys.len()) else { return };
        let reader = &mut self.readers[r];
        let g = &mut reader.groups[i];
        if g.epoch != epoch || !g.owned {
            return;
        }
        g.owned = false;
        g.progress = reader.saved[i];
        self.ownership_changed(i);
    }

    fn issue(&mut self, r: usize, request: Request) {
        let now = self.now;
        let timeout = timed_out(&request);
        let reader = &mut self.readers[r];
        reader.beat_requests += 1;
        reader.beat_budget += match &request {
            Request::Renew { groups, grouping } => (groups.len() + usize::from(*grouping)).div_ceil(BATCH_ROWS),
            Request::RecordGrouping => 1,
            Request::Release { groups } | Request::Claim { groups } => groups.len().div_ceil(BATCH_ROWS),
            Request::Fence { groups, .. } => 2 * groups.len().div_ceil(FENCE_ROWS),
            Request::Save(cp) => cp.groups.len().div_ceil(SAVE_ROWS),
            _ => 0,
        };
        let name = reader.name.clone();
        let op = match request {
            Request::Renew { groups, grouping } => {
                let items: Vec<Item> =
                    grouping.then_some(Item::Grouping).into_iter().chain(groups.into_iter().map(Item::Group)).collect();
                let answer: fn(Result<Vec<Item>, CdcError>) -> Answer = if grouping {
                    |r| {
                        Answer::Renewed(r.map(|items| {
                            let kept = items.contains(&Item::Grouping);
                            (groups_of(items), kept)
                        }))
                    }
                } else {
                    |r| Answer::Renewed(r.map(|items| (groups_of(items), true)))
                };
                Op::leases(LeaseKind::Renew, &name, items, answer)
            }
            Request::RecordGrouping => Op::leases(LeaseKind::Claim, &name, vec![Item::Grouping], |r| {
                // Refused: the grouping recorded is every reader's.
                Answer::Recorded(match r {
                    Err(CdcError::Lease(LeaseError::Refused)) => Ok(GROUPING.to_owned()),
                    other => other.map(|_| GROUPING.to_owned()),
                })
            }),
            Request::ReadTable => Op::Table { name, members: None, stage: 0 },
            Request::Release { groups } => {
                Op::leases(LeaseKind::Release, &name, groups.into_iter().map(Item::Group).collect(), |r| {
                    Answer::Released(r.map(groups_of))
                })
            }
            Request::Claim { groups } => {
                Op::leases(LeaseKind::Claim, &name, groups.into_iter().map(Item::Group).collect(), |r| {
                    Answer::Claimed(r.map(groups_of))
                })
            }
            Request::Fence { groups, .. } => {
                let mut chunks: Vec<Vec<StreamId>> = groups.chunks(FENCE_ROWS).map(<[StreamId]>::to_vec).collect();
                chunks.reverse();
                Op::Fence {
                    chunks,
                    chunk: Vec::new(),
                    attempt: 0,
                    read: false,
                    current: HashMap::new(),
                    out: Vec::new(),
                }
            }
            Request::Save(checkpoint) => {
                // `Shared::save`: only the groups whose leases are surely held.
                let mono = reader.mono(now);
                let groups =
                    checkpoint.groups.into_iter().filter(|g| reader.coordinator.holds(g.group, mono)).collect();
                Op::save(groups)
            }
            Request::LoadGeneration(_) => Op::Simple(StoreRequest::LoadGeneration, |reply| match reply {
                StoreReply::Generation(cp) => Answer::Loaded(Ok(cp)),
                _ => Answer::Loaded(Err(failed())),
            }),
            Request::AwaitIdle { until, .. } => {
                reader.idle_until = Some(reader.origin + micros(until));
                let at = now + self.rng.range(0, 20 * MS);
                self.at(at, Event::Idle { reader: r });
                return;
            }
            Request::ReadLeases => Op::Simple(StoreRequest::ReadLeases, |reply| match reply {
                StoreReply::Leases(leases) => Answer::Leases(Ok(leases)),
                _ => Answer::Leases(Err(failed())),
            }),
            Request::Depart => Op::Simple(StoreRequest::MemberDelete(name), |reply| match reply {
                StoreReply::Applied => Answer::Departed(Ok(())),
                _ => Answer::Departed(Err(failed())),
            }),
        };
        reader.next_op += 1;
        let id = reader.next_op;
        reader.holder = Some(InFlight { id, op, timeout });
        let bound = self.scenario.bound();
        self.at(now + bound, Event::Bound { reader: r, op: id });
        self.advance(r, Purpose::Holder, None);
    }

    fn idle(&mut self, r: usize) {
        let now = self.now;
        let reader = &mut self.readers[r];
        let Some(until) = reader.idle_until else { return };
        if reader.checkpoint.is_some() && now < until {
            self.at(now + 5 * MS, Event::Idle { reader: r });
            return;
        }
        reader.idle_until = None;
        self.holder_answer(r, Answer::Idle);
    }

    fn holder_answer(&mut self, r: usize, answer: Answer) {
        let now = self.now;
        let reader = &mut self.readers[r];
        let mono = reader.mono(now);
        let (coordinator, view) = reader.split();
        let step = coordinator.answer(answer, mono, &view);
        self.holder_step(r, step);
    }

    /// Moves the operation of `purpose` on with `reply` (none: its start).
    fn advance(&mut self, r: usize, purpose: Purpose, reply: Option<StoreReply>) {
        let reader = &mut self.readers[r];
        let slot = match purpose {
            Purpose::Holder => &mut reader.holder,
            Purpose::Checkpoint => &mut reader.checkpoint,
        };
        let Some(flight) = slot.as_mut() else { return };
        match flight.op.step(reply) {
            OpStep::Send(request) => {
                let id = flight.id;
                if request.is_lwt() && purpose == Purpose::Holder {
                    reader.beat_lwts += 1;
                }
                self.send(r, id, request);
            }
            OpStep::Done(done) => {
                *slot = None;
                match done {
                    Done::Answer(answer) => self.holder_answer(r, answer),
                    Done::Save(result) => self.saved(r, purpose, result),
                }
            }
        }
    }

    fn saved(
        &mut self,
        r: usize,
        purpose: Purpose,
        result: Result<(Vec<GroupProgress>, Vec<GroupProgress>), CdcError>,
    ) {
        let answer = match result {
            Ok((saved, refused)) => {
                for g in &saved {
                    if let Some(i) = index(g.group) {
                        let reader = &mut self.readers[r];
                        reader.saved[i] = reader.saved[i].max(g.progress);
                    }
                }
                for g in refused {
                    self.drop_group(r, g.group, g.epoch);
                }
                Ok(())
            }
            Err(e) => Err(e),
        };
        if purpose == Purpose::Holder {
            self.holder_answer(r, Answer::Saved(answer));
        }
    }

    /// Sends `request` of operation `op` to a node: it may be slow, time
    /// out after applying or before, or be refused; nothing goes through
    /// a partition.
    fn send(&mut self, r: usize, op: u64, request: StoreRequest) {
        let now = self.now;
        let chaos = self.chaos();
        let s = self.scenario.clone();
        let node = self.rng.range(0, self.store.nodes.len() as u64) as usize;
        let there = self.latency();
        if self.cut(r) {
            // Through a partition: the driver gives up after its timeout.
            self.at(now + 2 * SEC, Event::Reply { reader: r, op, reply: StoreReply::Failed });
            return;
        }
        let slow = if chaos && self.rng.chance(s.slow) { self.rng.range(50 * MS, 3 * SEC) } else { 0 };
        if chaos && self.rng.chance(s.refused) {
            self.at(now + there * 2, Event::Reply { reader: r, op, reply: StoreReply::Failed });
            return;
        }
        if chaos && self.rng.chance(s.lost_before) {
            self.at(now + 2 * SEC, Event::Reply { reader: r, op, reply: StoreReply::Failed });
            return;
        }
        let lost_after = chaos && self.rng.chance(s.lost_after);
        if lost_after {
            self.at(now + 2 * SEC + slow, Event::Reply { reader: r, op, reply: StoreReply::Failed });
        }
        let (to, back) = if self.rng.chance(0.5) { (slow, 0) } else { (0, slow) };
        self.at(now + there + to, Event::Arrive { reader: r, op, node, request, reply_lost: lost_after, slow: back });
    }

    fn reply(&mut self, r: usize, op: u64, reply: StoreReply) {
        let reader = &mut self.readers[r];
        if reader.holder.as_ref().is_some_and(|f| f.id == op) {
            if matches!(reply, StoreReply::LeasesRefused(_) | StoreReply::FenceRefused(_)) {
                reader.beat_refusals += 1;
            }
            if let (StoreReply::SaveRefused, Some(InFlight { op: Op::Save { chunk, single: None, .. }, .. })) =
                (&reply, &reader.holder)
            {
                // Its groups are saved again one by one, to learn which.
                reader.beat_singles += chunk.len();
            }
            self.advance(r, Purpose::Holder, Some(reply));
        } else if reader.checkpoint.as_ref().is_some_and(|f| f.id == op) {
            self.advance(r, Purpose::Checkpoint, Some(reply));
        }
    }

    // ----------------------------------------------------------- workers

    /// A worker's round: each group read ends a window if its lease is
    /// surely held (checking that no other reader holds it, and that no
    /// one fenced it since), and is left if not; every 5 s, a checkpoint.
    fn work(&mut self, r: usize) {
        let now = self.now;
        self.at(now + 500 * MS, Event::Work(r));
        if self.readers[r].leaving {
            return;
        }
        let mono = self.readers[r].mono(now);
        let no_deadline = self.scenario.broken.no_deadline;
        let owned: Vec<usize> = (0..self.keys.len()).filter(|g| self.readers[r].groups[*g].owned).collect();
        for g in owned {
            let key = self.keys[g];
            let reader = &self.readers[r];
            if !no_deadline && !reader.coordinator.holds(key, mono) {
                let epoch = reader.groups[g].epoch;
                self.drop_group(r, key, epoch);
                continue;
            }
            if let Some(other) = self.last_reader[g].filter(|o| *o != r) {
                let o = &self.readers[other];
                if o.active(now) && o.groups[g].owned && (no_deadline || o.coordinator.holds(key, o.mono(now))) {
                    let (a, b) = (o.name.clone(), self.readers[r].name.clone());
                    self.violation(format!("group {g} read by {a} and {b} at once"));
                }
            }
            let reader = &self.readers[r];
            let current = self.store.checkpoints.get(&key).map_or(0, |c| c.0);
            if current != reader.groups[g].epoch {
                let (name, epoch) = (reader.name.clone(), reader.groups[g].epoch);
                self.violation(format!("group {g} read by {name} with epoch {epoch}, fenced since (epoch {current})"));
            }
            self.last_reader[g] = Some(r);
            let reader = &mut self.readers[r];
            let progress = Millis(GENERATION.0 + (now / MS) as i64);
            reader.groups[g].progress = reader.groups[g].progress.max(progress);
        }
        let reader = &mut self.readers[r];
        if reader.checkpoint.is_none() && (now / (500 * MS)) % 10 == (r as u64) % 10 {
            // `Shared::save` of the planner's checkpoint: the groups read,
            // less those whose leases are no longer surely held.
            let groups: Vec<GroupProgress> = reader
                .groups
                .iter()
                .filter(|g| g.owned && (no_deadline || reader.coordinator.holds(g.key, mono)))
                .map(|g| GroupProgress { group: g.key, progress: g.progress, epoch: g.epoch })
                .collect();
            if groups.is_empty() {
                return;
            }
            reader.next_op += 1;
            let id = reader.next_op;
            reader.checkpoint = Some(InFlight { id, op: Op::save(groups), timeout: None });
            self.advance(r, Purpose::Checkpoint, None);
        }
    }

    // ------------------------------------------------------------ checks

    fn log(&self, what: String) {
        println!("{:.6} {what}", self.now as f64 / SEC as f64);
    }

    fn violation(&mut self, what: String) {
        let at = self.now as f64 / SEC as f64;
        self.report.violations.push(format!("at {at:.3} s: {what}"));
    }

    /// Once the faults stopped, every second: no group unread for longer
    /// than a TTL and a heartbeat (and the skew bound and a second of
    /// round trips) since the faults stopped (the chaos over, with its
    /// faults of messages, and the last pause, cut or kill behind); and
    /// once every group is read, the readers settle.
    fn survey(&mut self) {
        let now = self.now;
        self.at(now + SEC, Event::Survey);
        let limit = micros(self.scenario.ttl + self.scenario.heartbeat + self.scenario.clock_skew) + SEC;
        let mut unread = 0;
        for g in 0..self.keys.len() {
            if let Some(since) = self.unread_since[g] {
                unread += 1;
                // The faults of messages (slow, lost, refused) go on
                // until the chaos ends, whatever `calm_from` says.
                let span = now.saturating_sub(since.max(self.calm_from).max(self.scenario.chaos));
                self.report.longest_unread = self.report.longest_unread.max(span);
                if span > limit && span <= limit + SEC {
                    self.violation(format!("group {g} unread for {:.1} s after the faults stopped", span as f64 / 1e6));
                }
            }
        }
        // Settling counts from a TTL after the chaos: a renewal that failed
        // in its last seconds lets leases lapse up to then.
        let settling = now > self.calm_from.max(self.scenario.chaos + micros(self.scenario.ttl));
        if unread == 0 && settling && self.moves_at_settle.is_none() && self.balanced() {
            self.moves_at_settle = Some(self.moves);
            self.settled_at = now;
        }
    }

    /// Whether the member rows are those of the readers that read, and
    /// every one of them holds its quota.
    fn balanced(&self) -> bool {
        let now = self.now;
        let mut members: Vec<String> = self.readers.iter().filter(|r| r.active(now)).map(|r| r.name.clone()).collect();
        members.sort();
        self.store.members(0, now) == members
            && self
                .readers
                .iter()
                .filter(|r| r.active(now))
                .all(|r| r.groups.iter().filter(|g| g.owned).count() == quota(&r.name, &members, self.keys.len()))
    }

    fn finish(&mut self) {
        let quiet = micros(self.scenario.ttl) * 4;
        if self.scenario.quiet < quiet {
            return;
        }
        match self.moves_at_settle {
            None => {
                let unread = self.unread_since.iter().filter(|u| u.is_some()).count();
                self.violation(format!(
                    "no settling after the faults stopped: {unread} groups unread, balanced: {}",
                    self.balanced()
                ));
            }
            Some(at) if at != self.moves || !self.balanced() => {
                let moved = self.moves - at;
                self.violation(format!("groups still move after the readers settled ({moved} moves)"));
            }
            Some(_) => {}
        }
    }
}

impl Event {
    fn reader(&self) -> Option<usize> {
        match self {
            Event::Beat(r) | Event::Work(r) | Event::Resume(r) => Some(*r),
            Event::Arrive { .. } => None,
            Event::Reply { reader, .. } | Event::Bound { reader, .. } | Event::Idle { reader } => Some(*reader),
            _ => None,
        }
    }
}

/// The answer to `request` when it runs past its bound.
fn timed_out(request: &Request) -> Option<Answer> {
    let e = || CdcError::Lease(LeaseError::Timeout(Duration::from_secs(4)));
    Some(match request {
        Request::Renew { .. } => Answer::Renewed(Err(e())),
        Request::RecordGrouping => Answer::Recorded(Err(e())),
        Request::ReadTable => Answer::Table(Err(e())),
        Request::Release { .. } => Answer::Released(Err(e())),
        Request::Claim { .. } => Answer::Claimed(Err(e())),
        Request::Fence { groups, .. } => Answer::Fenced(groups.iter().map(|_| Err(e())).collect()),
        Request::Save(_) => Answer::Saved(Err(e())),
        Request::LoadGeneration(_) => Answer::Loaded(Err(e())),
        Request::AwaitIdle { .. } => return None,
        Request::ReadLeases => Answer::Leases(Err(e())),
        Request::Depart => Answer::Departed(Err(e())),
    })
}

// ----------------------------------------------------------------- tests

/// The seed of a run: `SHARDWISE_SIM_SEED`, or a new one (printed either
/// way, so that a failure can be replayed).
fn seed() -> u64 {
    let seed = std::env::var("SHARDWISE_SIM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Rng(t.as_nanos() as u64).next()
    });
    println!("SHARDWISE_SIM_SEED={seed}");
    seed
}

fn check(scenario: Scenario, seed: u64) -> Report {
    let started = std::time::Instant::now();
    let report = Sim::new(scenario.clone(), seed).run();
    println!(
        "{} readers, {} groups, {:.0} simulated s in {:.2} s: {} heartbeats, {} LWTs, {} takeovers; \
         {} kills, {} pauses, {} partitions, {} stops, {} joins; longest unread after the faults {:.1} s",
        scenario.readers,
        scenario.groups,
        report.simulated as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        report.heartbeats,
        report.lwts,
        report.takeovers,
        report.kills,
        report.pauses,
        report.partitions,
        report.stops,
        report.joins,
        report.longest_unread as f64 / 1e6,
    );
    report
}

fn assert_clean(report: &Report, seed: u64) {
    assert!(report.violations.is_empty(), "replay with SHARDWISE_SIM_SEED={seed}:\n{}", report.violations.join("\n"));
}

/// The chaos of [`Scenario::new`], on a table of `groups` shared by 50
/// readers: a minute of joins, stops, kills, pauses past the TTL,
/// partitions, clock steps and faulty messages, then a last kill and 45 s
/// of calm.
fn fifty_readers(groups: usize) {
    let seed = seed();
    let report = check(Scenario::new(50, groups, 60, 45), seed);
    assert_clean(&report, seed);
    assert!(report.kills > 0 && report.takeovers > 0, "{report:?}");
}

/// Fifty readers, a thousand groups (in the normal suite: a debug build
/// simulates about two seconds per second of this).
#[test]
fn fifty_readers_and_a_thousand_groups_keep_every_invariant() {
    fifty_readers(1_000);
}

/// Fifty readers, ten thousand groups: a few minutes in a debug build
/// (`cargo test -p shardwise-cdc --lib fifty_readers -- --ignored`).
#[test]
#[ignore]
fn fifty_readers_and_ten_thousand_groups_keep_every_invariant() {
    fifty_readers(10_000);
}

/// Smaller tables, many schedules and far more simulated time: forty
/// runs of 22 simulated minutes, with five times the faults.
#[test]
fn small_tables_under_heavy_faults_keep_every_invariant() {
    let base = seed();
    // `SHARDWISE_SIM_RUN=<i>`: that run alone.
    let only: Option<u64> = std::env::var("SHARDWISE_SIM_RUN").ok().and_then(|r| r.parse().ok());
    for i in (0..40).filter(|i| only.is_none_or(|o| o == *i)) {
        let report = check(heavy(i), base.wrapping_add(i));
        assert!(
            report.violations.is_empty(),
            "replay with SHARDWISE_SIM_SEED={base} SHARDWISE_SIM_RUN={i}:\n{}",
            report.violations.join("\n")
        );
    }
}

/// Schedules that once failed, replayed. Seed 16406026764264231434, run
/// 7: fences failed four times under the chaos backed off for up to eight
/// heartbeats, and two groups stayed unread 14 s after it ended (the cap
/// is now two thirds of a TTL). Seed 7683475527608463540, run 31: the
/// check counted a group unread from the last kill, while lost and
/// refused messages went on until the chaos ended. Seed
/// 1979205183747832866, run 15: the readers counted as settled just after
/// the chaos, and then a reader's leases, whose renewal had failed in its
/// last seconds, lapsed and were taken again (settling now counts from a
/// TTL after the chaos).
#[test]
fn schedules_that_once_failed_keep_every_invariant() {
    for (seed, run) in
        [(16_406_026_764_264_231_434_u64, 7), (7_683_475_527_608_463_540, 31), (1_979_205_183_747_832_866, 15)]
    {
        assert_clean(&check(heavy(run), seed.wrapping_add(run)), seed);
    }
}

fn heavy(i: u64) -> Scenario {
    let mut scenario = Scenario::new(2 + (i as usize % 6), 8 + 13 * (i as usize % 9), 1_200, 120);
    scenario.slow = 0.1;
    scenario.lost_after = 0.03;
    scenario.lost_before = 0.03;
    scenario.refused = 0.03;
    scenario.kill = 0.003;
    scenario.pause = 0.005;
    scenario.partition = 0.005;
    scenario.join = 0.01;
    scenario
}

/// The checks can fail: workers that do not check their leases'
/// deadlines read past them (a reader paused past its TTL reads on when
/// it resumes, while another reads the group it took over), and nodes
/// whose clocks differ by more than the skew bound expire leases before
/// their holders' deadlines.
#[test]
fn the_checks_catch_a_broken_rule() {
    let base = seed();
    let caught = |scenario: &dyn Fn(u64) -> Scenario| {
        (0..20).any(|i| !Sim::new(scenario(i), base.wrapping_add(i)).run().violations.is_empty())
    };
    let no_deadline = |i| {
        let mut s = heavy(i);
        s.broken.no_deadline = true;
        s
    };
    assert!(caught(&no_deadline), "reading past the deadline went unseen");
    // Nodes up to 8 s apart (the bound is 0.5 s): about two runs in
    // three break a lease; at 4 s one in eight did, and twenty runs all
    // passed about one time in thirteen.
    let skewed = |i| {
        let mut s = heavy(i);
        s.node_skew = Duration::from_secs(8);
        s
    };
    assert!(caught(&skewed), "clocks skewed past the bound went unseen");
    let mut sound = heavy(0);
    sound.node_skew = sound.clock_skew;
    assert_clean(&Sim::new(sound, base).run(), base);
}

/// LWTs per reader per heartbeat at 100, 1,000 and 10,000 groups: one
/// reader holding every group, and fifty sharing them (steady state, and
/// the heartbeats of a minute of chaos). `cargo test --release -p
/// shardwise-cdc --lib lwts_per_heartbeat -- --ignored --nocapture`.
#[test]
#[ignore]
fn lwts_per_heartbeat() {
    println!(
        "| groups | readers | LWTs/heartbeat, steady state (mean, max) | LWTs/heartbeat under chaos (mean, max) |"
    );
    for groups in [100, 1_000, 10_000] {
        for readers in [1, 50] {
            let mut steady = Scenario::new(readers, groups, 0, 60);
            steady.kill = 0.0;
            let report = Sim::new(steady, 1).run();
            assert_clean(&report, 1);
            let (mean, max) = stats(report.steady.iter().map(|s| s.1));
            let chaos = Sim::new(Scenario::new(readers, groups, 60, 45), 2).run();
            assert_clean(&chaos, 2);
            let (cmean, cmax) = stats(chaos.chaos.iter().copied());
            println!("| {groups} | {readers} | {mean:.2}, {max} | {cmean:.2}, {cmax} |");
        }
    }
}

fn stats(samples: impl Iterator<Item = u32>) -> (f64, u32) {
    let (mut n, mut sum, mut max) = (0u64, 0u64, 0);
    for s in samples {
        n += 1;
        sum += u64::from(s);
        max = max.max(s);
    }
    (sum as f64 / n.max(1) as f64, max)
}
