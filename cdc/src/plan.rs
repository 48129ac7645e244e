//! The sans-IO reading plan: which window of which stream group to read
//! next, when to look for the next generation, when to save a checkpoint,
//! and when the run is over.
//!
//! # Model
//!
//! A generation is a timestamp and a set of [`StreamGroup`]s; it covers
//! `[its timestamp, the next generation's timestamp)`. Each group of the
//! current generation has a *progress* `T`: everything before `T` has been
//! read. The group's *upper bound* is `min(end, next generation's
//! timestamp)` (only `end` while the next generation is unknown). The next
//! window of a group is `[T, U)` with
//!
//! ```text
//! U = min(T + window, now − safety_interval, upper bound)
//! ```
//!
//! A window is handed out once it is at least `min(sleep_interval, window,
//! upper − T)` long (and never empty), so a group that caught up with
//! `now − safety_interval` is read every `sleep_interval`, while a group
//! that is behind is read window after window without sleeping. A group is
//! finished when `T` reaches its upper bound; a generation when all its
//! groups are. Then the next generation's groups start at `max(start, its
//! timestamp)`: the last window of generation N ends exactly where the
//! first of N+1 begins. Generations are read one after the other, never
//! overlapping, so that the changes of one partition key (whose stream
//! changes with the generation) are delivered in order.
//!
//! While the next generation is unknown the planner asks for it every
//! `generation_poll_interval`. When every group has reached the end
//! timestamp and no next generation is known, it asks once more (a
//! generation could have been missed, cf. scylla-cdc-rust#72) before it
//! finishes. A generation without streams has nothing to read: it is over
//! as soon as the next one is known (or the clock passed the end).
//!
//! # Calling contract
//!
//! Every output comes from [`Planner::poll`]`(worker, now)`; every input is a
//! mutator:
//!
//! | [`Action`] | the caller does | then calls |
//! |---|---|---|
//! | [`Action::Read`] | reads the window's streams over `[from, to)` | [`Planner::window_done`] or [`Planner::window_failed`] |
//! | [`Action::FetchFirstGeneration`] / [`Action::FetchNextGeneration`] | asks its `GenerationSource` | [`Planner::next_generation_found`], [`Planner::next_generation_not_found`] or [`Planner::generation_fetch_failed`] |
//! | [`Action::SaveCheckpoint`] | saves [`Planner::take_checkpoint`] | nothing |
//! | [`Action::Sleep`] | polls again at that time, or earlier after any mutator call | |
//! | [`Action::Idle`] | polls again after any mutator call | |
//! | [`Action::Finished`] | stops | |
//!
//! A worker may poll again before its windows are done, to read several
//! groups at once; a window being read is never handed out twice. Time
//! must not go backwards between calls. Before the first poll a checkpoint
//! may be restored with [`Planner::restore`].
//!
//! # Sharing a table with other processes
//!
//! With [`Planner::with_leases`] the groups of each generation start
//! unowned: a group is read only after [`Planner::acquire`] (its lease was
//! taken, see [`crate::lease`]) and no longer after [`Planner::release`].
//! A checkpoint then holds only the groups read here, and the progress of
//! the others comes in through [`Planner::observe`] (their holders'
//! checkpoints), so the generation barrier still waits for every group,
//! wherever it is read. The others wait at that barrier for the final
//! progress of the groups read here; so when a generation is left, its
//! checkpoint is handed out for saving before anything else, and the
//! planner leaves no further generation until it is taken
//! ([`Planner::take_checkpoint`]).
//!
//! # One planner, polled per worker
//!
//! The reader runtime runs one worker per thread (per shard); each group is
//! owned by one worker ([`Planner::with_assignment`]: the runtime assigns a
//! group to the worker of the shard its streams live on). There is a single
//! planner for all workers, and each worker polls it with its own index: it
//! gets only its own groups' windows, plus any global duty (a generation
//! fetch, a checkpoint) that is due. One planner rather than one per worker,
//! because the decisions that matter are global: a generation may only be
//! left when *every* group, on every worker, has finished it, and a
//! checkpoint must hold every group's progress. Per-worker planners would
//! need a second protocol to agree on both. The cost is a lock around the
//! planner in the runtime, taken once per window: a poll is a heap
//! operation (tens of nanoseconds) against a CQL round trip per window,
//! and rows are decoded and consumed outside the lock, on the worker.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::time::Duration;

use crate::checkpoint::{Checkpoint, GroupProgress};
use crate::stream::{StreamGroup, StreamId};
use crate::time::{duration_ms, Millis};

/// The settings of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannerConfig {
    /// Read changes from this time on (ignored when a checkpoint is restored).
    pub start: Millis,
    /// Read changes before this time ([`Millis::MAX`]: never stop).
    pub end: Millis,
    /// Longest window one query reads.
    pub window: Duration,
    /// How far behind `now` reading stays, for rows written late (clock
    /// skew, write latency).
    pub safety_interval: Duration,
    /// How long a group that caught up waits before its next read.
    pub sleep_interval: Duration,
    /// How often to look for the next generation while it is unknown.
    pub generation_poll_interval: Duration,
    /// How often to save a checkpoint; `None`: never.
    pub checkpoint_interval: Option<Duration>,
    /// Number of workers polling the planner (at least 1).
    pub workers: usize,
}

impl PlannerConfig {
    /// Defaults from `start`: no end, 60 s windows, 30 s safety interval,
    /// 10 s sleep and generation polling, no checkpoints, one worker.
    pub fn new(start: Millis) -> Self {
        PlannerConfig {
            start,
            end: Millis::MAX,
            window: Duration::from_secs(60),
            safety_interval: Duration::from_secs(30),
            sleep_interval: Duration::from_secs(10),
            generation_poll_interval: Duration::from_secs(10),
            checkpoint_interval: None,
            workers: 1,
        }
    }
}

/// A group of the current generation (its index there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u32);

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group {}", self.0)
    }
}

/// A group of the current generation, as [`Planner::group`] describes it:
/// what a consumer is made for ([`ConsumerFactory::new_consumer`]).
///
/// [`ConsumerFactory::new_consumer`]: crate::ConsumerFactory::new_consumer
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group's generation.
    pub generation: Millis,
    /// The group within its generation.
    pub group: GroupId,
    /// The group's streams.
    pub streams: StreamGroup,
    /// The worker that reads the group.
    pub worker: usize,
    /// The fencing epoch of this reader's hold on the group (readers that
    /// share a table through leases; 0 otherwise): greater with every
    /// takeover, so that a sink can refuse what an earlier holder writes
    /// after it lost the group.
    pub epoch: u64,
}

/// A window to read: the streams of `group` over `[from, to)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadWindow {
    /// The group.
    pub group: GroupId,
    /// The generation the group belongs to.
    pub generation: Millis,
    /// The group's streams.
    pub streams: StreamGroup,
    /// Start of the window (inclusive).
    pub from: Millis,
    /// End of the window (exclusive).
    pub to: Millis,
    /// The fencing epoch of the group's holder ([`GroupInfo::epoch`]).
    pub epoch: u64,
}

/// What the caller should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Read a window, then call [`Planner::window_done`] (or
    /// [`Planner::window_failed`]).
    Read(ReadWindow),
    /// Look up the generation active at `at`, or else the first one after
    /// it; answer with [`Planner::next_generation_found`] or
    /// [`Planner::next_generation_not_found`].
    FetchFirstGeneration {
        /// The time to start reading from.
        at: Millis,
    },
    /// Look up the first generation after `after`; answer as for
    /// [`Action::FetchFirstGeneration`].
    FetchNextGeneration {
        /// The current generation's timestamp.
        after: Millis,
    },
    /// Save [`Planner::take_checkpoint`].
    SaveCheckpoint,
    /// Nothing to do for this worker before this time.
    Sleep(Millis),
    /// Nothing to do for this worker until a mutator is called (its own
    /// windows complete, another worker finishes a generation, a fetch is
    /// answered, ...).
    Idle,
    /// Everything up to the end timestamp has been read.
    Finished,
}

/// A call that does not fit the planner's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The configuration cannot work.
    #[error("invalid planner configuration: {0}")]
    Config(&'static str),
    /// No such group in the current generation.
    #[error("{0} is not a group of the current generation")]
    UnknownGroup(GroupId),
    /// The group has no window being read.
    #[error("{0} has no window being read")]
    NotReading(GroupId),
    /// The reported end is outside the window being read.
    #[error("{group}: {to} is outside the window being read [{from}, {window_end})")]
    OutsideWindow {
        /// The group.
        group: GroupId,
        /// The reported end.
        to: Millis,
        /// The window's start.
        from: Millis,
        /// The window's end.
        window_end: Millis,
    },
    /// A generation that is not after the current one (or a second next one).
    #[error("generation {found} does not follow generation {current} (next known: {next:?})")]
    UnexpectedGeneration {
        /// The generation reported.
        found: Millis,
        /// The current generation.
        current: Millis,
        /// The next generation already known.
        next: Option<Millis>,
    },
    /// More groups than a [`GroupId`] can number.
    #[error("{0} stream groups are too many")]
    TooManyGroups(usize),
    /// A checkpoint can only be restored before the first generation.
    #[error("a checkpoint can only be restored before reading starts")]
    AlreadyStarted,
}

/// Assigns a group to a worker (reduced modulo the number of workers).
pub type AssignFn = dyn Fn(&StreamGroup) -> usize + Send + Sync;

/// The reading plan of one log table. See the [module docs](self).
pub struct Planner {
    start: Millis,
    end: Millis,
    window: i64,
    safety: i64,
    sleep: i64,
    generation_poll: i64,
    checkpoint_interval: Option<i64>,
    workers: usize,
    assign: Option<Box<AssignFn>>,
    /// Groups start unowned: another process may hold them ([`Planner::with_leases`]).
    leased: bool,
    current: Option<Current>,
    next: Option<Generation>,
    fetch: Fetch,
    final_check: FinalCheck,
    resume: Option<HashMap<StreamId, Millis>>,
    /// `resume` holds a progress per stream, not per group
    /// ([`Planner::restore_streams`]).
    resume_per_stream: bool,
    /// The generation a restored checkpoint names: the first one fetched.
    resume_at: Option<Millis>,
    last_checkpoint: Option<Millis>,
    dirty: bool,
    /// The final checkpoint of a generation just left, not yet taken for
    /// saving (leased planners with checkpoints; see the module docs).
    left: Option<Checkpoint>,
    state: RunState,
}

struct Generation {
    timestamp: Millis,
    groups: Vec<StreamGroup>,
}

struct Current {
    timestamp: Millis,
    groups: Vec<Group>,
    /// When the saved records were made by another grouping of the
    /// streams: the earliest of them, which no group taken over here
    /// resumes past (see `switch_to`).
    regrouped: Option<Millis>,
    /// Groups whose progress is below the upper bound.
    unfinished: usize,
    /// Per worker: idle, unfinished groups by the time they become readable.
    queues: Vec<BinaryHeap<Reverse<(Millis, u32)>>>,
}

struct Group {
    streams: StreamGroup,
    worker: usize,
    progress: Millis,
    /// End of the window being read.
    reading: Option<Millis>,
    /// Its progress was raised (by another reader's checkpoint) while a
    /// window was being read: that window's end may be behind it.
    raised: bool,
    /// Not readable before this time (after a failure).
    not_before: Millis,
    /// Read by this planner's workers (always, without leases).
    owned: bool,
    /// The fencing epoch of this planner's hold (0 without leases).
    epoch: u64,
    /// The furthest progress known to be in the checkpoint store (restored,
    /// fenced, observed, or saved here): what the generation barrier counts
    /// for a group this planner lost.
    saved: Millis,
    /// Its lease was lost ([`Planner::lose`]): what its windows still read
    /// does not count here.
    lost: bool,
}

/// A group of the current generation as [`Planner::groups`] lists it: what
/// a lease holder needs to decide what to claim or release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupState {
    /// The group within its generation.
    pub group: GroupId,
    /// Its first stream: the group's name across processes.
    pub key: StreamId,
    /// Whether this planner's workers read it.
    pub owned: bool,
    /// Whether a window of it is being read.
    pub reading: bool,
    /// Everything before it was read (as far as this planner knows).
    pub progress: Millis,
    /// The fencing epoch of this planner's last hold on it.
    pub epoch: u64,
}

#[derive(Debug, Clone, Copy)]
struct Fetch {
    /// When a generation fetch is wanted; `None`: not wanted.
    due: Option<Millis>,
    in_flight: bool,
}

/// The last look for a missed generation before finishing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FinalCheck {
    NotNeeded,
    Wanted,
    Asked,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunState {
    Running,
    /// Finished; one checkpoint save is still to be handed out.
    FinalSave,
    Finished,
}

impl fmt::Debug for Planner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Planner")
            .field("start", &self.start)
            .field("end", &self.end)
            .field("generation", &self.generation())
            .field("next_generation", &self.next_generation())
            .field("groups", &self.current.as_ref().map_or(0, |c| c.groups.len()))
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Planner {
    /// A planner that has not read anything yet; its first action is
    /// [`Action::FetchFirstGeneration`].
    pub fn new(config: PlannerConfig) -> Result<Self, PlanError> {
        if config.workers == 0 {
            return Err(PlanError::Config("at least one worker is needed"));
        }
        if config.window < Duration::from_millis(1) {
            return Err(PlanError::Config("the window must be at least 1 ms"));
        }
        if config.checkpoint_interval.is_some_and(|i| i.is_zero()) {
            return Err(PlanError::Config("the checkpoint interval must not be zero"));
        }
        Ok(Planner {
            start: config.start,
            end: config.end,
            window: duration_ms(config.window),
            safety: duration_ms(config.safety_interval),
            sleep: duration_ms(config.sleep_interval),
            generation_poll: duration_ms(config.generation_poll_interval),
            checkpoint_interval: config.checkpoint_interval.map(duration_ms),
            workers: config.workers,
            assign: None,
            leased: false,
            current: None,
            next: None,
            fetch: Fetch { due: Some(Millis::MIN), in_flight: false },
            final_check: FinalCheck::NotNeeded,
            resume: None,
            resume_per_stream: false,
            resume_at: None,
            last_checkpoint: None,
            dirty: false,
            left: None,
            state: RunState::Running,
        })
    }

    /// Assigns each group to a worker with `assign` (taken modulo the number
    /// of workers). Without it, group `i` of a generation goes to worker
    /// `i % workers`.
    pub fn with_assignment(mut self, assign: impl Fn(&StreamGroup) -> usize + Send + Sync + 'static) -> Self {
        self.assign = Some(Box::new(assign));
        self
    }

    /// Shares the table with other processes: every group starts unowned,
    /// and is read only after [`Planner::acquire`] (a lease was taken);
    /// the progress of the others' groups comes from their checkpoints
    /// ([`Planner::observe`]), and a generation is left only when every
    /// group, read here or elsewhere, finished it.
    pub fn with_leases(mut self) -> Self {
        self.leased = true;
        self
    }

    // ------------------------------------------------------------ getters

    /// The timestamp of the generation being read.
    pub fn generation(&self) -> Option<Millis> {
        self.current.as_ref().map(|c| c.timestamp)
    }

    /// The timestamp of the next generation, once known.
    pub fn next_generation(&self) -> Option<Millis> {
        self.next.as_ref().map(|n| n.timestamp)
    }

    /// Number of groups of the current generation.
    pub fn group_count(&self) -> usize {
        self.current.as_ref().map_or(0, |c| c.groups.len())
    }

    /// A group of the current generation.
    pub fn group(&self, group: GroupId) -> Option<GroupInfo> {
        let current = self.current.as_ref()?;
        let g = current.groups.get(group.0 as usize)?;
        Some(GroupInfo {
            generation: current.timestamp,
            group,
            streams: g.streams.clone(),
            worker: g.worker,
            epoch: g.epoch,
        })
    }

    /// The progress of a group: everything before it has been read.
    pub fn progress(&self, group: GroupId) -> Option<Millis> {
        Some(self.current.as_ref()?.groups.get(group.0 as usize)?.progress)
    }

    /// The end timestamp.
    pub fn end(&self) -> Millis {
        self.end
    }

    /// Whether the run is over ([`Action::Finished`] was or will be returned).
    pub fn is_finished(&self) -> bool {
        self.state != RunState::Running
    }

    /// What to save: the current generation and the progress of every
    /// group read here (every group, without leases). `None` before the
    /// first generation is known.
    pub fn checkpoint(&self) -> Option<Checkpoint> {
        let current = self.current.as_ref()?;
        let groups = current
            .groups
            .iter()
            .filter(|g| g.owned)
            .map(|g| GroupProgress { group: g.streams.key(), progress: g.progress, epoch: g.epoch })
            .collect();
        Some(Checkpoint { generation: current.timestamp, groups })
    }

    /// What to save on [`Action::SaveCheckpoint`]: the final checkpoint of
    /// a generation just left if it was not taken yet, else
    /// [`Planner::checkpoint`].
    pub fn take_checkpoint(&mut self) -> Option<Checkpoint> {
        self.take_left().or_else(|| self.checkpoint())
    }

    /// Saving `checkpoint` (from [`Planner::take_checkpoint`]) failed: it is
    /// taken again. A generation's final checkpoint comes back at once (its
    /// leases are kept until it is saved), the reader's final save is made
    /// again before it finishes, and a periodic one is due again at the
    /// next interval.
    pub fn save_failed(&mut self, checkpoint: Checkpoint) {
        let current = self.current.as_ref().map(|c| c.timestamp);
        if current != Some(checkpoint.generation) {
            self.left.get_or_insert(checkpoint);
            return;
        }
        if self.state == RunState::Finished {
            self.state = RunState::FinalSave;
        }
        self.dirty = true;
    }

    /// The final checkpoint of a generation just left, if not taken yet
    /// (see the module docs).
    pub fn take_left(&mut self) -> Option<Checkpoint> {
        self.left.take()
    }

    /// Whether a generation was left and its final checkpoint is not
    /// taken yet: its groups' leases are not given up before it is saved.
    pub fn left_pending(&self) -> bool {
        self.left.is_some()
    }

    /// The groups of the current generation (none before the first).
    pub fn groups(&self) -> Vec<GroupState> {
        let Some(current) = self.current.as_ref() else { return Vec::new() };
        (0u32..)
            .zip(&current.groups)
            .map(|(i, g)| GroupState {
                group: GroupId(i),
                key: g.streams.key(),
                owned: g.owned,
                reading: g.reading.is_some(),
                progress: g.progress,
                epoch: g.epoch,
            })
            .collect()
    }

    // ------------------------------------------------------------ mutators

    /// Resumes from a saved checkpoint, before the first poll. Reading
    /// starts at the checkpoint's generation: each group at its saved
    /// progress, and a group without a record at the configured start (or
    /// the generation's timestamp, if later), as on a first run: a restart
    /// never reads history the user chose to skip. The generations after
    /// the checkpoint's are read from their beginning. A window being read when the
    /// checkpoint was taken is read again (at-least-once delivery).
    pub fn restore(&mut self, checkpoint: &Checkpoint) -> Result<(), PlanError> {
        if self.current.is_some() || self.fetch.in_flight {
            return Err(PlanError::AlreadyStarted);
        }
        self.resume_at = Some(checkpoint.generation);
        self.resume = Some(checkpoint.groups.iter().map(|g| (g.group, g.progress)).collect());
        self.dirty = false;
        Ok(())
    }

    /// Resumes from a progress per stream (everything of stream `s` before
    /// `streams[s]` was read) of `generation`, as another library saved it
    /// (`scylla-cdc` keeps one checkpoint row per stream): each group
    /// resumes at the earliest progress of its streams, and a group with a
    /// stream that has none at the configured start (or the generation's
    /// timestamp, if later), as [`Planner::restore`] does. Rows of a stream
    /// before its own progress are the reader's to skip.
    pub fn restore_streams(&mut self, generation: Millis, streams: HashMap<StreamId, Millis>) -> Result<(), PlanError> {
        if self.current.is_some() || self.fetch.in_flight {
            return Err(PlanError::AlreadyStarted);
        }
        self.resume_at = Some(generation);
        self.resume = Some(streams);
        self.resume_per_stream = true;
        self.dirty = false;
        Ok(())
    }

    /// Changes the end timestamp (no effect once the run finished). Windows
    /// already read past a lowered end stay read.
    pub fn set_end(&mut self, end: Millis) {
        self.end = end;
        self.final_check = FinalCheck::NotNeeded;
        if self.current.is_some() && self.next.is_none() && self.fetch.due.is_none() {
            self.fetch.due = Some(Millis::MIN);
        }
        self.requeue_all();
    }

    /// A window handed out by [`Action::Read`] has been read up to `to`
    /// (normally the window's end; at least past its start).
    pub fn window_done(&mut self, group: GroupId, to: Millis) -> Result<(), PlanError> {
        let upper = self.upper();
        let current = self.current.as_mut().ok_or(PlanError::UnknownGroup(group))?;
        let g = current.groups.get_mut(group.0 as usize).ok_or(PlanError::UnknownGroup(group))?;
        let window_end = g.reading.ok_or(PlanError::NotReading(group))?;
        if g.lost {
            // Read after its lease was lost: not this planner's to count.
            g.reading = None;
            self.enqueue(group.0);
            return Ok(());
        }
        if to <= g.progress && g.raised && to <= window_end {
            // The group's progress was raised past this window while it was
            // read (another reader's checkpoint, after the lease moved):
            // nothing to move.
            g.reading = None;
            self.enqueue(group.0);
            return Ok(());
        }
        if to <= g.progress || to > window_end {
            return Err(PlanError::OutsideWindow { group, to, from: g.progress, window_end });
        }
        let was_unfinished = g.progress < upper;
        g.progress = to;
        g.reading = None;
        g.not_before = Millis::MIN;
        if was_unfinished && to >= upper {
            current.unfinished = current.unfinished.saturating_sub(1);
        }
        self.dirty = true;
        self.enqueue(group.0);
        Ok(())
    }

    /// This planner's workers read `group` from now on, from `progress`
    /// (its holder's last checkpoint) if that is further than known here.
    pub fn acquire(&mut self, group: GroupId, progress: Option<Millis>) -> Result<(), PlanError> {
        self.acquire_fenced(group, progress, 0)
    }

    /// [`Planner::acquire`] with the fencing `epoch` of this hold
    /// ([`crate::CheckpointStore::fence`]): its checkpoints and windows
    /// carry it.
    pub fn acquire_fenced(&mut self, group: GroupId, progress: Option<Millis>, epoch: u64) -> Result<(), PlanError> {
        let floor = self.current.as_ref().and_then(|c| c.regrouped);
        let g = self.group_mut(group)?;
        g.owned = true;
        g.lost = false;
        g.epoch = epoch;
        g.not_before = Millis::MIN;
        if let Some(p) = progress {
            let p = floor.map_or(p, |floor| p.min(floor));
            let g = self.group_mut(group)?;
            g.saved = g.saved.max(p);
            self.raise(group, p);
        }
        self.dirty = true;
        self.enqueue(group.0);
        Ok(())
    }

    /// This planner's workers no longer start windows of `group` (a window
    /// being read still ends with [`Planner::window_done`] or
    /// [`Planner::window_failed`]): it is handed over, and its progress
    /// saved next.
    pub fn release(&mut self, group: GroupId) -> Result<(), PlanError> {
        self.group_mut(group)?.owned = false;
        Ok(())
    }

    /// The lease of `group` was lost: it is no longer read here, what its
    /// window being read delivers does not count, and its progress falls
    /// back to the furthest known saved. The generation barrier then waits
    /// for the group's next holder's saves ([`Planner::observe`]) rather
    /// than for progress this planner read but never saved, which nobody
    /// would save.
    pub fn lose(&mut self, group: GroupId) -> Result<(), PlanError> {
        let upper = self.upper();
        let current = self.current.as_mut().ok_or(PlanError::UnknownGroup(group))?;
        let g = current.groups.get_mut(group.0 as usize).ok_or(PlanError::UnknownGroup(group))?;
        g.owned = false;
        g.lost = true;
        if g.saved < g.progress {
            if g.progress >= upper && g.saved < upper {
                current.unfinished += 1;
            }
            g.progress = g.saved;
            g.raised = false;
        }
        Ok(())
    }

    /// `checkpoint` was saved: its progress is in the store.
    pub fn saved(&mut self, checkpoint: &Checkpoint) {
        let Some(current) = self.current.as_mut() else { return };
        if checkpoint.generation != current.timestamp {
            return;
        }
        for saved in &checkpoint.groups {
            if let Some(g) = current.groups.iter_mut().find(|g| g.streams.key() == saved.group) {
                g.saved = g.saved.max(saved.progress);
            }
        }
    }

    /// The progress that other processes saved: raises that of the groups
    /// not read here, when `checkpoint` is of the current generation.
    pub fn observe(&mut self, checkpoint: &Checkpoint) {
        let Some(current) = self.current.as_ref() else { return };
        if checkpoint.generation != current.timestamp {
            return;
        }
        let index: HashMap<StreamId, u32> = (0u32..).zip(&current.groups).map(|(i, g)| (g.streams.key(), i)).collect();
        for saved in &checkpoint.groups {
            if let Some(&i) = index.get(&saved.group) {
                let Some(g) = self.current.as_mut().and_then(|c| c.groups.get_mut(i as usize)) else { continue };
                g.saved = g.saved.max(saved.progress);
                if !g.owned {
                    self.raise(GroupId(i), saved.progress);
                }
            }
        }
    }

    /// Reading a window failed; the group may be read again from its
    /// progress at `retry_at`.
    pub fn window_failed(&mut self, group: GroupId, retry_at: Millis) -> Result<(), PlanError> {
        let current = self.current.as_mut().ok_or(PlanError::UnknownGroup(group))?;
        let g = current.groups.get_mut(group.0 as usize).ok_or(PlanError::UnknownGroup(group))?;
        if g.reading.take().is_none() {
            return Err(PlanError::NotReading(group));
        }
        g.not_before = retry_at;
        self.enqueue(group.0);
        Ok(())
    }

    /// The answer to a generation fetch: the generation with timestamp `ts`
    /// and its stream groups (possibly none). Before the first generation
    /// it becomes the current one; afterwards it must follow the current one
    /// and caps its groups.
    pub fn next_generation_found(&mut self, ts: Millis, groups: Vec<StreamGroup>) -> Result<(), PlanError> {
        let generation = Generation { timestamp: ts, groups };
        match &self.current {
            None => {
                self.fetch = Fetch { due: None, in_flight: false };
                self.switch_to(generation)?;
                if ts >= self.end {
                    // Nothing before the end: no earlier generation exists.
                    self.finish();
                }
            }
            Some(current) => {
                if ts <= current.timestamp || self.next.is_some() {
                    return Err(PlanError::UnexpectedGeneration {
                        found: ts,
                        current: current.timestamp,
                        next: self.next_generation(),
                    });
                }
                self.next = Some(generation);
                self.fetch = Fetch { due: None, in_flight: false };
                self.final_check = FinalCheck::NotNeeded;
                self.requeue_all();
            }
        }
        Ok(())
    }

    /// The answer to a generation fetch: there is none (yet).
    pub fn next_generation_not_found(&mut self, now: Millis) {
        self.fetch.in_flight = false;
        if self.current.is_none() && now.saturating_sub(self.safety_interval()) >= self.end {
            // No generation at all, and the end has passed: nothing to read.
            self.fetch.due = None;
            self.finish();
            return;
        }
        self.fetch.due = match self.final_check {
            FinalCheck::Asked => {
                self.final_check = FinalCheck::Done;
                None
            }
            // Asked before the last group finished: ask again now.
            FinalCheck::Wanted => Some(Millis::MIN),
            FinalCheck::NotNeeded | FinalCheck::Done => Some(Millis(now.0.saturating_add(self.generation_poll))),
        };
    }

    /// A generation fetch failed; it is retried after the poll interval.
    pub fn generation_fetch_failed(&mut self, now: Millis) {
        self.fetch.in_flight = false;
        self.fetch.due = Some(Millis(now.0.saturating_add(self.generation_poll)));
        if self.final_check == FinalCheck::Asked {
            self.final_check = FinalCheck::Wanted;
        }
    }

    // ------------------------------------------------------------ poll

    /// The next thing `worker` should do at `now`.
    pub fn poll(&mut self, worker: usize, now: Millis) -> Action {
        if self.last_checkpoint.is_none() {
            self.last_checkpoint = Some(now);
        }
        self.advance(now);
        if self.left.is_some() {
            return Action::SaveCheckpoint;
        }
        match self.state {
            RunState::Finished => return Action::Finished,
            RunState::FinalSave => {
                self.state = RunState::Finished;
                self.dirty = false;
                return Action::SaveCheckpoint;
            }
            RunState::Running => {}
        }
        if let Some(action) = self.poll_fetch(now) {
            return action;
        }
        if self.checkpoint_due().is_some_and(|due| due <= now) {
            self.last_checkpoint = Some(now);
            self.dirty = false;
            return Action::SaveCheckpoint;
        }
        if let Some(window) = self.poll_read(worker, now) {
            return Action::Read(window);
        }
        let own = self
            .current
            .as_ref()
            .and_then(|c| c.queues.get(worker))
            .and_then(|q| q.peek())
            .map(|Reverse((ready, _))| *ready);
        let fetch = self.fetch.due.filter(|_| !self.fetch.in_flight);
        match [own, fetch, self.checkpoint_due()].into_iter().flatten().min() {
            Some(t) => Action::Sleep(t.max(now)),
            None => Action::Idle,
        }
    }

    fn poll_fetch(&mut self, now: Millis) -> Option<Action> {
        if self.fetch.in_flight || self.fetch.due.is_none_or(|due| due > now) {
            return None;
        }
        self.fetch.in_flight = true;
        if self.final_check == FinalCheck::Wanted {
            self.final_check = FinalCheck::Asked;
        }
        Some(match &self.current {
            None => Action::FetchFirstGeneration { at: self.resume_at.unwrap_or(self.start) },
            Some(c) => Action::FetchNextGeneration { after: c.timestamp },
        })
    }

    fn checkpoint_due(&self) -> Option<Millis> {
        let interval = self.checkpoint_interval?;
        if !self.dirty {
            return None;
        }
        self.last_checkpoint.map(|last| Millis(last.0.saturating_add(interval)))
    }

    fn poll_read(&mut self, worker: usize, now: Millis) -> Option<ReadWindow> {
        let upper = self.upper();
        let horizon = now.saturating_sub(self.safety_interval());
        let window = self.window;
        let current = self.current.as_mut()?;
        let queue = current.queues.get_mut(worker)?;
        while let Some(Reverse((ready, index))) = queue.peek().copied() {
            if ready > now {
                return None;
            }
            queue.pop();
            let Some(g) = current.groups.get_mut(index as usize) else {
                continue;
            };
            if !g.owned || g.reading.is_some() || g.progress >= upper {
                continue;
            }
            let from = g.progress;
            let to = Millis(from.0.saturating_add(window)).min(horizon).min(upper);
            if to <= from {
                // Not readable after all (a clock that went back): try later.
                queue.push(Reverse((Millis(now.0.saturating_add(1)), index)));
                return None;
            }
            g.reading = Some(to);
            g.raised = false;
            return Some(ReadWindow {
                group: GroupId(index),
                generation: current.timestamp,
                streams: g.streams.clone(),
                from,
                to,
                epoch: g.epoch,
            });
        }
        None
    }

    // ------------------------------------------------------------ internals

    fn group_mut(&mut self, group: GroupId) -> Result<&mut Group, PlanError> {
        let current = self.current.as_mut().ok_or(PlanError::UnknownGroup(group))?;
        current.groups.get_mut(group.0 as usize).ok_or(PlanError::UnknownGroup(group))
    }

    /// Raises a group's progress to `to` (no effect if it is further).
    fn raise(&mut self, group: GroupId, to: Millis) {
        let upper = self.upper();
        let Some(current) = self.current.as_mut() else { return };
        let Some(g) = current.groups.get_mut(group.0 as usize) else { return };
        let to = to.max(current.timestamp);
        if to <= g.progress {
            return;
        }
        if g.progress < upper && to >= upper {
            current.unfinished = current.unfinished.saturating_sub(1);
        }
        g.progress = to;
        g.raised = g.reading.is_some();
    }

    /// The safety interval: how far behind the clock reading stays.
    pub fn safety_interval(&self) -> Duration {
        Duration::from_millis(self.safety.unsigned_abs())
    }

    /// Where the current generation's groups stop.
    fn upper(&self) -> Millis {
        match &self.next {
            Some(next) => next.timestamp.min(self.end),
            None => self.end,
        }
    }

    /// Moves on when the current generation is finished.
    fn advance(&mut self, now: Millis) {
        // A generation left is saved before the next one is.
        while self.state == RunState::Running && self.left.is_none() {
            let Some(current) = &self.current else { return };
            // A window still being read (of a group raised to the end by
            // another reader's progress) ends before the groups change.
            if current.unfinished > 0 || current.groups.iter().any(|g| g.reading.is_some()) {
                return;
            }
            match self.next.take() {
                Some(next) if next.timestamp < self.end => {
                    // Even when nothing changed since the last save: that
                    // save's snapshot may not be taken yet (another worker's).
                    if self.leased && self.checkpoint_interval.is_some() {
                        self.left = self.checkpoint().filter(|cp| !cp.groups.is_empty());
                    }
                    if self.switch_to(next).is_err() {
                        // Cannot number the groups: nothing sensible to read.
                        self.finish();
                    }
                }
                Some(next) => {
                    self.next = Some(next);
                    self.finish();
                }
                None => {
                    let upper = self.end;
                    if upper == Millis::MAX || now.saturating_sub(self.safety_interval()) < upper {
                        return;
                    }
                    match self.final_check {
                        FinalCheck::Done => self.finish(),
                        FinalCheck::NotNeeded => {
                            self.final_check = FinalCheck::Wanted;
                            if !self.fetch.in_flight {
                                self.fetch.due = Some(Millis::MIN);
                            }
                            return;
                        }
                        FinalCheck::Wanted | FinalCheck::Asked => return,
                    }
                }
            }
        }
    }

    fn finish(&mut self) {
        self.state =
            if self.checkpoint_interval.is_some() && self.dirty { RunState::FinalSave } else { RunState::Finished };
        self.fetch.due = None;
    }

    /// Makes `generation` the current one.
    fn switch_to(&mut self, generation: Generation) -> Result<(), PlanError> {
        let count = generation.groups.len();
        u32::try_from(count).map_err(|_| PlanError::TooManyGroups(count))?;
        let base = self.start.max(generation.timestamp);
        // Later generations start where they begin: everything before them
        // was read (a restored run's configured start may be later than a
        // generation that followed its checkpoint's).
        self.start = Millis::MIN;
        let resume = self.resume.take().unwrap_or_default();
        let per_stream = std::mem::take(&mut self.resume_per_stream);
        // A record covers its group's streams, and names the group by its
        // first stream. A saved key that is no group here means the streams
        // were grouped otherwise when it was saved (another
        // `streams_per_query` or shard count): a group here may then hold
        // streams of several records, so every group resumes at the
        // earliest record. Repeats, never a stream resumed past its own
        // progress.
        let regrouped = !per_stream && resume.keys().any(|k| !generation.groups.iter().any(|g| g.key() == *k));
        let earliest = resume.values().min().copied();
        let groups = generation
            .groups
            .into_iter()
            .enumerate()
            .map(|(i, streams)| {
                let worker = match &self.assign {
                    Some(assign) => assign(&streams) % self.workers,
                    None => i % self.workers,
                };
                let saved = match (regrouped, earliest) {
                    _ if per_stream => {
                        // The earliest of its streams; none if one has none.
                        streams.streams().iter().try_fold(Millis::MAX, |at, s| resume.get(s).map(|p| at.min(*p)))
                    }
                    (true, Some(earliest)) => Some(earliest),
                    _ => resume.get(&streams.key()).copied(),
                };
                let progress = match saved {
                    Some(saved) => saved.max(generation.timestamp),
                    None => base,
                };
                Group {
                    streams,
                    worker,
                    progress,
                    reading: None,
                    raised: false,
                    not_before: Millis::MIN,
                    owned: !self.leased,
                    epoch: 0,
                    saved: progress,
                    lost: false,
                }
            })
            .collect();
        self.current = Some(Current {
            timestamp: generation.timestamp,
            groups,
            regrouped: earliest.filter(|_| regrouped),
            unfinished: 0,
            queues: Vec::new(),
        });
        self.next = None;
        self.final_check = FinalCheck::NotNeeded;
        self.fetch.due = Some(Millis::MIN);
        self.dirty = true;
        self.requeue_all();
        Ok(())
    }

    /// Recomputes the unfinished count and the queues (after the upper
    /// bound or the generation changed).
    fn requeue_all(&mut self) {
        let upper = self.upper();
        let workers = self.workers;
        let Some(current) = self.current.as_mut() else { return };
        current.unfinished = current.groups.iter().filter(|g| g.progress < upper).count();
        current.queues = (0..workers).map(|_| BinaryHeap::new()).collect();
        for index in 0..current.groups.len() {
            // Fewer than u32::MAX groups (checked by `switch_to`).
            self.enqueue(index as u32);
        }
    }

    /// Queues an idle group by the time its next window becomes readable.
    fn enqueue(&mut self, index: u32) {
        let upper = self.upper();
        let (safety, sleep, window) = (self.safety, self.sleep, self.window);
        let Some(current) = self.current.as_mut() else { return };
        let Some(g) = current.groups.get(index as usize) else {
            return;
        };
        if !g.owned || g.reading.is_some() || g.progress >= upper {
            return;
        }
        // The window must be readable up to its minimum length: at least
        // 1 ms, at most what is left before the upper bound.
        let remaining = upper.0.saturating_sub(g.progress.0);
        let min_len = sleep.min(window).min(remaining).max(1);
        let ready = Millis(g.progress.0.saturating_add(safety).saturating_add(min_len)).max(g.not_before);
        if let Some(queue) = current.queues.get_mut(g.worker) {
            queue.push(Reverse((ready, index)));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const S: i64 = 1000;
    const MIN: i64 = 60 * S;
    /// A base time (2024-ish) so that nothing is near zero.
    const T0: i64 = 1_700_000_000_000;

    fn group(n: u8) -> StreamGroup {
        let mut b = [0u8; 16];
        b[0] = n;
        b[15] = 0x01 | (n << 4);
        StreamGroup::new([StreamId::from_bytes(b)]).unwrap()
    }

    fn groups(range: std::ops::Range<u8>) -> Vec<StreamGroup> {
        range.map(group).collect()
    }

    fn config(start: i64) -> PlannerConfig {
        PlannerConfig {
            start: Millis(start),
            end: Millis::MAX,
            window: Duration::from_secs(60),
            safety_interval: Duration::from_secs(30),
            sleep_interval: Duration::from_secs(10),
            generation_poll_interval: Duration::from_secs(10),
            checkpoint_interval: None,
            workers: 1,
        }
    }

    /// A generation as the cluster knows it: visible from `published`.
    struct Gen {
        ts: i64,
        groups: Vec<StreamGroup>,
        published: i64,
    }

    /// A virtual clock and a fake cluster around a planner.
    struct Sim {
        p: Planner,
        now: i64,
        gens: Vec<Gen>,
        reads: Vec<(i64, ReadWindow)>,
        saves: Vec<(i64, Checkpoint)>,
        fetches: Vec<(i64, Action)>,
        sleeps: Vec<(i64, i64)>,
    }

    impl Sim {
        fn new(p: Planner, now: i64, gens: Vec<Gen>) -> Self {
            Sim { p, now, gens, reads: vec![], saves: vec![], fetches: vec![], sleeps: vec![] }
        }

        fn answer(&mut self, action: &Action) {
            let visible = |g: &&Gen| g.published <= self.now;
            let found = match *action {
                Action::FetchFirstGeneration { at } => self
                    .gens
                    .iter()
                    .filter(visible)
                    .rfind(|g| g.ts <= at.0)
                    .or_else(|| self.gens.iter().filter(visible).find(|g| g.ts > at.0)),
                Action::FetchNextGeneration { after } => self.gens.iter().filter(visible).find(|g| g.ts > after.0),
                _ => unreachable!(),
            };
            match found {
                Some(g) => self.p.next_generation_found(Millis(g.ts), g.groups.clone()).unwrap(),
                None => self.p.next_generation_not_found(Millis(self.now)),
            }
        }

        /// One poll of worker 0, handled; false once finished.
        fn step(&mut self) -> bool {
            let action = self.p.poll(0, Millis(self.now));
            match action {
                Action::Read(w) => {
                    assert!(w.from < w.to, "empty window {w:?}");
                    self.p.window_done(w.group, w.to).unwrap();
                    self.reads.push((self.now, w));
                }
                Action::FetchFirstGeneration { .. } | Action::FetchNextGeneration { .. } => {
                    self.fetches.push((self.now, action.clone()));
                    self.answer(&action);
                }
                Action::SaveCheckpoint => {
                    self.saves.push((self.now, self.p.take_checkpoint().unwrap()));
                }
                Action::Sleep(t) => {
                    assert!(t.0 > self.now, "sleep into the past: {t:?} at {}", self.now);
                    self.sleeps.push((self.now, t.0));
                    self.now = t.0;
                }
                Action::Idle => panic!("a single worker is never idle"),
                Action::Finished => return false,
            }
            true
        }

        /// Steps until finished or the clock passes `until`; true if finished.
        fn run(&mut self, until: i64) -> bool {
            for _ in 0..1_000_000 {
                if self.now > until {
                    return false;
                }
                if !self.step() {
                    return true;
                }
            }
            panic!("no progress");
        }

        /// Windows read per group key, in order.
        fn windows(&self, g: &StreamGroup) -> Vec<(i64, i64)> {
            self.reads.iter().filter(|(_, w)| w.streams == *g).map(|(_, w)| (w.from.0, w.to.0)).collect()
        }
    }

    fn assert_contiguous(windows: &[(i64, i64)], from: i64, to: i64) {
        assert_eq!(windows.first().map(|w| w.0), Some(from), "{windows:?}");
        assert_eq!(windows.last().map(|w| w.1), Some(to), "{windows:?}");
        for pair in windows.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "gap or overlap in {windows:?}");
        }
    }

    #[test]
    fn config_is_checked() {
        let mut c = config(0);
        c.workers = 0;
        assert!(matches!(Planner::new(c), Err(PlanError::Config(_))));
        let mut c = config(0);
        c.window = Duration::ZERO;
        assert!(matches!(Planner::new(c), Err(PlanError::Config(_))));
        let mut c = config(0);
        c.checkpoint_interval = Some(Duration::ZERO);
        assert!(matches!(Planner::new(c), Err(PlanError::Config(_))));
        let d = PlannerConfig::new(Millis(5));
        assert_eq!((d.start, d.end, d.workers, d.checkpoint_interval), (Millis(5), Millis::MAX, 1, None));
    }

    #[test]
    fn catching_up_reads_full_windows_without_sleeping() {
        // Start an hour ago: 60 full windows are readable at once.
        let start = T0 - 60 * MIN;
        let gens = vec![Gen { ts: start - MIN, groups: groups(0..3), published: 0 }];
        let mut sim = Sim::new(Planner::new(config(start)).unwrap(), T0, gens);
        sim.run(T0);
        for g in groups(0..3) {
            let windows = sim.windows(&g);
            assert_contiguous(&windows, start, T0 - 30 * S);
            // All but the last are exactly one window long.
            assert!(windows[..windows.len() - 1].iter().all(|(f, t)| t - f == MIN), "{windows:?}");
            assert_eq!(windows.len(), 60);
        }
        assert!(sim.reads.iter().all(|(at, _)| *at == T0), "no sleep while catching up");
        assert_eq!(sim.p.generation(), Some(Millis(start - MIN)));
    }

    #[test]
    fn live_reading_respects_the_safety_interval_and_sleeps() {
        let gens = vec![Gen { ts: T0 - MIN, groups: groups(0..2), published: 0 }];
        let mut sim = Sim::new(Planner::new(config(T0)).unwrap(), T0, gens);
        sim.run(T0 + 10 * MIN);
        for (at, w) in &sim.reads {
            assert!(w.to.0 <= at - 30 * S, "read {w:?} at {at} is within the safety interval");
            assert!(w.to.0 - w.from.0 <= MIN);
            // Caught up: each window is one sleep interval long.
            assert_eq!(w.to.0 - w.from.0, 10 * S, "{w:?}");
        }
        for g in groups(0..2) {
            let windows = sim.windows(&g);
            assert_eq!(windows[0], (T0, T0 + 10 * S));
            assert_contiguous(&windows, T0, windows.last().unwrap().1);
        }
        // First read only once 10 s are readable: at T0 + 30 s + 10 s.
        assert_eq!(sim.reads[0].0, T0 + 40 * S);
        assert_eq!(sim.sleeps[0], (T0, T0 + 10 * S), "the next generation poll comes first");
        assert!(sim.fetches.len() >= 60, "polls for the next generation every 10 s");
    }

    #[test]
    fn generation_switch_has_no_gap_and_no_overlap() {
        let start = T0 - 10 * MIN;
        let gen2 = start + 3 * MIN + 7 * S; // not on a window boundary
        let gens = vec![
            Gen { ts: start - MIN, groups: groups(0..2), published: 0 },
            Gen { ts: gen2, groups: groups(10..13), published: 0 },
        ];
        let mut sim = Sim::new(Planner::new(config(start)).unwrap(), T0, gens);
        sim.run(T0 + MIN);
        for g in groups(0..2) {
            assert_contiguous(&sim.windows(&g), start, gen2);
        }
        for g in groups(10..13) {
            let windows = sim.windows(&g);
            assert_eq!(windows[0].0, gen2, "the new generation starts where the old one stopped");
            assert_contiguous(&windows, gen2, windows.last().unwrap().1);
        }
        // Every read of generation 1 comes before every read of generation 2.
        let last_old = sim.reads.iter().rposition(|(_, w)| w.generation.0 == start - MIN).unwrap();
        let first_new = sim.reads.iter().position(|(_, w)| w.generation.0 == gen2).unwrap();
        assert!(last_old < first_new);
        assert_eq!(sim.p.generation(), Some(Millis(gen2)));
    }

    #[test]
    fn next_generation_learned_while_reading_caps_the_groups() {
        // Live reading; generation 2 (at T0 + 5 min) is published at T0 + 4 min.
        let gen2 = T0 + 5 * MIN;
        let gens = vec![
            Gen { ts: T0 - MIN, groups: groups(0..1), published: 0 },
            Gen { ts: gen2, groups: groups(5..6), published: T0 + 4 * MIN },
        ];
        let mut sim = Sim::new(Planner::new(config(T0)).unwrap(), T0, gens);
        sim.run(T0 + 8 * MIN);
        assert_contiguous(&sim.windows(&group(0)), T0, gen2);
        let new = sim.windows(&group(5));
        assert_eq!(new[0].0, gen2);
        // The last old window is read once the clock passed gen2 + safety.
        let (at, _) = sim.reads.iter().rfind(|(_, w)| w.streams == group(0)).unwrap();
        assert!(*at >= gen2 + 30 * S);
    }

    #[test]
    fn end_in_the_past_reads_up_to_it_and_finishes() {
        let start = T0 - 10 * MIN;
        let end = start + 4 * MIN + 500;
        let mut c = config(start);
        c.end = Millis(end);
        let gens = vec![Gen { ts: start - MIN, groups: groups(0..2), published: 0 }];
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, gens);
        assert!(sim.run(T0), "finishes without waiting");
        for g in groups(0..2) {
            assert_contiguous(&sim.windows(&g), start, end);
        }
        // The first fetch, one regular poll and the final look for a missed generation.
        assert!(matches!(sim.fetches.last(), Some((_, Action::FetchNextGeneration { .. }))));
        assert!(sim.p.is_finished());
        assert_eq!(sim.p.poll(0, Millis(T0)), Action::Finished);
    }

    #[test]
    fn end_in_the_future_keeps_reading_until_reached() {
        let end = T0 + 5 * MIN;
        let mut c = config(T0);
        c.end = Millis(end);
        let gens = vec![Gen { ts: T0 - MIN, groups: groups(0..1), published: 0 }];
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, gens);
        assert!(sim.run(T0 + 20 * MIN));
        assert_contiguous(&sim.windows(&group(0)), T0, end);
        assert!(sim.now >= end + 30 * S, "the end is read only once it is safe");
        assert!(sim.now < end + 31 * S + 10 * S);
    }

    #[test]
    fn missed_generation_is_found_by_the_final_check() {
        // Generation polling so rare that only the final look finds gen 2,
        // published after the one regular poll.
        let gen2 = T0 + 2 * MIN;
        let end = T0 + 5 * MIN;
        let mut c = config(T0);
        c.end = Millis(end);
        c.generation_poll_interval = Duration::from_secs(86_400);
        let gens = vec![
            Gen { ts: T0 - MIN, groups: groups(0..1), published: 0 },
            Gen { ts: gen2, groups: groups(3..4), published: T0 + MIN },
        ];
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, gens);
        assert!(sim.run(T0 + 20 * MIN));
        // First, next (none), final check (gen 2), next after gen 2 (none),
        // final check of gen 2 (none).
        assert_eq!(sim.fetches.len(), 5);
        // Generation 1 was read up to the end (past gen 2: harmless, its
        // streams take no writes then), then generation 2 from its start.
        assert_contiguous(&sim.windows(&group(0)), T0, end);
        assert_contiguous(&sim.windows(&group(3)), gen2, end);
    }

    #[test]
    fn final_check_is_asked_after_the_last_window() {
        let mut c = config(T0 - 3 * MIN);
        c.end = Millis(T0 - MIN);
        let mut p = Planner::new(c).unwrap();
        let now = Millis(T0);
        assert!(matches!(p.poll(0, now), Action::FetchFirstGeneration { .. }));
        p.next_generation_found(Millis(T0 - 10 * MIN), groups(0..1)).unwrap();
        // A regular look for the next generation, still unanswered when the
        // last window is done.
        assert!(matches!(p.poll(0, now), Action::FetchNextGeneration { .. }));
        for _ in 0..2 {
            let Action::Read(w) = p.poll(0, now) else { panic!() };
            p.window_done(w.group, w.to).unwrap();
        }
        assert_eq!(p.poll(0, now), Action::Idle, "waits for the answer");
        p.next_generation_not_found(now);
        // That answer was asked before the end was reached: ask once more.
        assert!(matches!(p.poll(0, now), Action::FetchNextGeneration { .. }));
        p.next_generation_not_found(now);
        assert_eq!(p.poll(0, now), Action::Finished);
        // A failed final look is retried, not taken for "none".
        let mut c = config(T0 - 3 * MIN);
        c.end = Millis(T0 - 2 * MIN);
        let mut p = Planner::new(c).unwrap();
        assert!(matches!(p.poll(0, now), Action::FetchFirstGeneration { .. }));
        p.next_generation_found(Millis(T0 - 10 * MIN), groups(0..1)).unwrap();
        assert!(matches!(p.poll(0, now), Action::FetchNextGeneration { .. }));
        p.next_generation_not_found(now);
        let Action::Read(w) = p.poll(0, now) else { panic!() };
        p.window_done(w.group, w.to).unwrap();
        assert!(matches!(p.poll(0, now), Action::FetchNextGeneration { .. }));
        p.generation_fetch_failed(now);
        assert_eq!(p.poll(0, now), Action::Sleep(Millis(T0 + 10 * S)));
        assert!(matches!(p.poll(0, Millis(T0 + 10 * S)), Action::FetchNextGeneration { .. }));
        p.next_generation_not_found(Millis(T0 + 10 * S));
        assert_eq!(p.poll(0, Millis(T0 + 10 * S)), Action::Finished);
    }

    #[test]
    fn start_before_the_first_generation() {
        let first = T0 - 5 * MIN;
        let gens = vec![Gen { ts: first, groups: groups(0..1), published: 0 }];
        let mut sim = Sim::new(Planner::new(config(0)).unwrap(), T0, gens);
        sim.run(T0);
        assert!(matches!(sim.fetches[0], (_, Action::FetchFirstGeneration { at: Millis(0) })));
        assert_eq!(sim.windows(&group(0))[0], (first, first + MIN));
    }

    #[test]
    fn no_generation_yet_is_polled_for() {
        let gens = vec![Gen { ts: T0 + MIN, groups: groups(0..1), published: T0 + 45 * S }];
        let mut sim = Sim::new(Planner::new(config(T0)).unwrap(), T0, gens);
        sim.run(T0 + 3 * MIN);
        let first_fetches: Vec<i64> = sim.fetches.iter().take(6).map(|(at, _)| *at).collect();
        assert_eq!(first_fetches, vec![T0, T0 + 10 * S, T0 + 20 * S, T0 + 30 * S, T0 + 40 * S, T0 + 50 * S]);
        assert_eq!(sim.p.generation(), Some(Millis(T0 + MIN)));
        assert_eq!(sim.windows(&group(0))[0].0, T0 + MIN);
    }

    #[test]
    fn no_generation_and_an_end_in_the_past_finishes() {
        let mut c = config(T0 - 10 * MIN);
        c.end = Millis(T0 - 5 * MIN);
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, vec![]);
        assert!(sim.run(T0));
        assert!(sim.reads.is_empty());
    }

    #[test]
    fn first_generation_after_the_end_finishes() {
        let mut c = config(T0 - 10 * MIN);
        c.end = Millis(T0 - 5 * MIN);
        let gens = vec![Gen { ts: T0 - 4 * MIN, groups: groups(0..1), published: 0 }];
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, gens);
        assert!(sim.run(T0));
        assert!(sim.reads.is_empty());
    }

    #[test]
    fn empty_generation_is_skipped_once_the_next_is_known() {
        let start = T0 - 10 * MIN;
        let gen2 = start + 2 * MIN;
        let gens = vec![
            Gen { ts: start - MIN, groups: vec![], published: 0 },
            Gen { ts: gen2, groups: groups(0..1), published: 0 },
        ];
        let mut sim = Sim::new(Planner::new(config(start)).unwrap(), T0, gens);
        sim.run(T0);
        assert_eq!(sim.p.generation(), Some(Millis(gen2)));
        assert_eq!(sim.windows(&group(0))[0].0, gen2);
        assert!(sim.reads.iter().all(|(_, w)| w.generation.0 == gen2));
    }

    #[test]
    fn empty_generation_with_an_end_waits_for_the_end() {
        let mut c = config(T0);
        c.end = Millis(T0 + MIN);
        let gens = vec![Gen { ts: T0 - MIN, groups: vec![], published: 0 }];
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, gens);
        assert!(sim.run(T0 + 10 * MIN));
        assert!(sim.reads.is_empty());
        assert!(sim.now >= T0 + MIN + 30 * S, "a generation could still have appeared before the end");
    }

    #[test]
    fn unbounded_empty_generation_never_finishes() {
        let gens = vec![Gen { ts: T0 - MIN, groups: vec![], published: 0 }];
        let mut sim = Sim::new(Planner::new(config(T0)).unwrap(), T0, gens);
        assert!(!sim.run(T0 + 10 * MIN));
        assert!(sim.fetches.len() > 50);
    }

    #[test]
    fn checkpoints_follow_the_interval() {
        let mut c = config(T0);
        c.checkpoint_interval = Some(Duration::from_secs(60));
        c.end = Millis(T0 + 10 * MIN);
        let gens = vec![Gen { ts: T0 - MIN, groups: groups(0..2), published: 0 }];
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, gens);
        assert!(sim.run(T0 + 20 * MIN));
        let times: Vec<i64> = sim.saves.iter().map(|(at, _)| *at).collect();
        // The last save comes when the run finishes, whatever the interval.
        for pair in times[..times.len() - 1].windows(2) {
            assert!(pair[1] - pair[0] >= MIN, "saves too close: {times:?}");
        }
        // About one per minute, plus the final one at the end.
        assert!((10..=12).contains(&times.len()), "{times:?}");
        let (_, last) = sim.saves.last().unwrap();
        assert_eq!(last.generation, Millis(T0 - MIN));
        assert!(last.groups.iter().all(|g| g.progress == Millis(T0 + 10 * MIN)), "{last:?}");
        assert_eq!(last.groups.len(), 2);
        // Each save holds the progress at that time, never beyond what was read.
        for (at, cp) in &sim.saves {
            assert!(cp.groups.iter().all(|g| g.progress.0 <= at - 30 * S));
        }
    }

    #[test]
    fn no_checkpoint_without_progress() {
        let mut c = config(T0);
        c.checkpoint_interval = Some(Duration::from_secs(1));
        // The only generation has no streams: nothing ever progresses...
        let gens = vec![Gen { ts: T0 - MIN, groups: vec![], published: 0 }];
        let mut sim = Sim::new(Planner::new(c).unwrap(), T0, gens);
        sim.run(T0 + MIN);
        // ...except the switch to the first generation, saved once.
        assert_eq!(sim.saves.len(), 1);
    }

    #[test]
    fn restore_resumes_each_group_at_its_progress() {
        let gen1 = T0 - 30 * MIN;
        let (g0, g1, g2) = (group(0), group(1), group(2));
        let cp = Checkpoint {
            generation: Millis(gen1),
            groups: vec![
                GroupProgress { group: g0.key(), progress: Millis(T0 - 20 * MIN), epoch: 0 },
                GroupProgress { group: g1.key(), progress: Millis(T0 - 10 * MIN), epoch: 0 },
            ],
        };
        // The checkpoint wins over the configured start for the groups it
        // names; the others start at the configured start, not at their
        // generation's beginning (history the user skipped).
        let start = T0 - 15 * MIN;
        let mut p = Planner::new(config(start)).unwrap();
        p.restore(&cp).unwrap();
        let gens = vec![
            Gen { ts: gen1 - MIN, groups: groups(7..8), published: 0 },
            Gen { ts: gen1, groups: vec![g0.clone(), g1.clone(), g2.clone()], published: 0 },
        ];
        let mut sim = Sim::new(p, T0, gens);
        sim.run(T0);
        assert!(matches!(sim.fetches[0], (_, Action::FetchFirstGeneration { at }) if at.0 == gen1));
        assert_eq!(sim.windows(&g0)[0].0, T0 - 20 * MIN);
        assert_eq!(sim.windows(&g1)[0].0, T0 - 10 * MIN);
        assert_eq!(sim.windows(&g2)[0].0, start, "a group missing from the checkpoint starts at the configured start");
        assert!(sim.windows(&group(7)).is_empty());
        // Too late to restore now.
        assert_eq!(sim.p.restore(&cp), Err(PlanError::AlreadyStarted));
    }

    /// Saved by a reader that grouped the streams in twos, resumed by one
    /// that groups them in fours: group {0..3} holds the streams of the
    /// records of 0 and 2, so it resumes at the earlier one, and so does
    /// every group; none resumes a stream past its own progress.
    #[test]
    fn a_regrouped_generation_resumes_every_group_at_the_earliest_record() {
        let gen1 = T0 - 30 * MIN;
        let stream = |n| group(n).key();
        let cp = Checkpoint {
            generation: Millis(gen1),
            groups: vec![
                GroupProgress { group: stream(0), progress: Millis(T0 - 10 * MIN), epoch: 0 },
                GroupProgress { group: stream(2), progress: Millis(T0 - 20 * MIN), epoch: 0 },
                GroupProgress { group: stream(4), progress: Millis(T0 - 5 * MIN), epoch: 0 },
            ],
        };
        let mut p = Planner::new(config(T0 - 15 * MIN)).unwrap();
        p.restore(&cp).unwrap();
        let fours: Vec<StreamGroup> =
            [0..4, 4..6].into_iter().map(|r| StreamGroup::new(r.map(stream)).unwrap()).collect();
        let mut sim = Sim::new(p, T0, vec![Gen { ts: gen1, groups: fours.clone(), published: 0 }]);
        sim.run(T0);
        assert_eq!(sim.windows(&fours[0])[0].0, T0 - 20 * MIN, "the earlier of streams 0 and 2");
        assert_eq!(sim.windows(&fours[1])[0].0, T0 - 20 * MIN, "every group, its own record too");

        // Readers with leases: a group taken over resumes no later either,
        // whatever its own old record says.
        let mut p = Planner::new(config(T0 - 15 * MIN)).unwrap().with_leases();
        p.restore(&cp).unwrap();
        assert_eq!(p.poll(0, Millis(T0)), Action::FetchFirstGeneration { at: Millis(gen1) });
        p.next_generation_found(Millis(gen1), fours).unwrap();
        p.acquire_fenced(GroupId(0), Some(Millis(T0 - 10 * MIN)), 1).unwrap();
        assert_eq!(p.progress(GroupId(0)), Some(Millis(T0 - 20 * MIN)));
    }

    /// A progress per stream (`scylla-cdc`'s checkpoints): each group
    /// resumes at the earliest of its streams, a group with a stream
    /// without one at the configured start.
    #[test]
    fn restore_streams_resumes_each_group_at_its_earliest_stream() {
        let gen1 = T0 - 30 * MIN;
        let stream = |n| group(n).key();
        let pairs: Vec<StreamGroup> =
            [0..2, 2..4, 4..6].into_iter().map(|r| StreamGroup::new(r.map(stream)).unwrap()).collect();
        let progress = HashMap::from([
            (stream(0), Millis(T0 - 10 * MIN)),
            (stream(1), Millis(T0 - 12 * MIN)),
            (stream(2), Millis(T0 - 5 * MIN)),
            (stream(3), Millis(T0 - 5 * MIN)),
            (stream(4), Millis(T0 - MIN)),
        ]);
        let start = T0 - 15 * MIN;
        let mut p = Planner::new(config(start)).unwrap();
        p.restore_streams(Millis(gen1), progress.clone()).unwrap();
        let mut sim = Sim::new(p, T0, vec![Gen { ts: gen1, groups: pairs.clone(), published: 0 }]);
        sim.run(T0);
        assert!(matches!(sim.fetches[0], (_, Action::FetchFirstGeneration { at }) if at.0 == gen1));
        assert_eq!(sim.windows(&pairs[0])[0].0, T0 - 12 * MIN, "the earlier of its two streams");
        assert_eq!(sim.windows(&pairs[1])[0].0, T0 - 5 * MIN);
        assert_eq!(sim.windows(&pairs[2])[0].0, start, "stream 5 has no progress: the configured start");
        assert_eq!(sim.p.restore_streams(Millis(gen1), progress), Err(PlanError::AlreadyStarted));
    }

    #[test]
    fn restore_past_the_next_generation_moves_on() {
        let gen1 = T0 - 30 * MIN;
        let gen2 = T0 - 20 * MIN;
        let cp = Checkpoint {
            generation: Millis(gen1),
            groups: vec![GroupProgress { group: group(0).key(), progress: Millis(gen2), epoch: 0 }],
        };
        let mut p = Planner::new(config(T0)).unwrap();
        p.restore(&cp).unwrap();
        let gens = vec![
            Gen { ts: gen1, groups: groups(0..1), published: 0 },
            Gen { ts: gen2, groups: groups(1..2), published: 0 },
        ];
        let mut sim = Sim::new(p, T0, gens);
        sim.run(T0);
        assert!(sim.windows(&group(0)).is_empty(), "generation 1 was finished");
        assert_eq!(sim.windows(&group(1))[0].0, gen2);
    }

    #[test]
    fn workers_get_their_own_groups_and_wait_at_the_generation_barrier() {
        let start = T0 - 5 * MIN;
        let gen2 = T0 - 3 * MIN;
        let mut c = config(start);
        c.workers = 2;
        let mut p = Planner::new(c).unwrap().with_assignment(|g| usize::from(g.key().as_bytes()[0] % 2));
        let now = Millis(T0);
        assert_eq!(p.poll(1, now), Action::FetchFirstGeneration { at: Millis(start) });
        assert_eq!(p.poll(0, now), Action::Idle, "waits for the fetch another worker does");
        p.next_generation_found(Millis(start - MIN), groups(0..4)).unwrap();
        // Worker 0 owns groups 0 and 2, worker 1 groups 1 and 3.
        assert_eq!(p.poll(0, now), Action::FetchNextGeneration { after: Millis(start - MIN) });
        p.next_generation_found(Millis(gen2), groups(4..6)).unwrap();
        let mut done0 = vec![];
        loop {
            match p.poll(0, now) {
                Action::Read(w) => {
                    assert!(w.streams == group(0) || w.streams == group(2));
                    p.window_done(w.group, w.to).unwrap();
                    done0.push(w);
                }
                Action::Idle => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(done0.len(), 4, "two windows each up to gen 2");
        // Worker 1 has not read yet: generation 1 is not over.
        assert_eq!(p.generation(), Some(Millis(start - MIN)));
        let w = match p.poll(1, now) {
            Action::Read(w) => w,
            other => panic!("{other:?}"),
        };
        assert!(w.streams == group(1) || w.streams == group(3));
        assert!(matches!(p.window_done(w.group, Millis(w.to.0 + 1)), Err(PlanError::OutsideWindow { .. })));
        assert!(matches!(p.window_done(w.group, w.from), Err(PlanError::OutsideWindow { .. })));
        p.window_failed(w.group, Millis(T0 + 5 * S)).unwrap();
        let mut reads = 0;
        let mut now = now;
        loop {
            match p.poll(1, now) {
                Action::Read(w) => {
                    p.window_done(w.group, w.to).unwrap();
                    reads += 1;
                }
                Action::Sleep(t) => {
                    assert_eq!(t, Millis(T0 + 5 * S), "the failed group retries then");
                    now = t;
                }
                Action::FetchNextGeneration { .. } => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(reads, 4);
        assert_eq!(p.generation(), Some(Millis(gen2)), "switched once every worker finished");
        p.next_generation_not_found(now);
        let mut seen = vec![];
        for worker in 0..2 {
            if let Action::Read(w) = p.poll(worker, now) {
                assert_eq!(w.from, Millis(gen2));
                seen.push((worker, w.streams.key().as_bytes()[0]));
            }
        }
        assert_eq!(seen, vec![(0, 4), (1, 5)]);
    }

    /// Reads every window `worker` 0 is handed at `now`; the windows read.
    fn drain(p: &mut Planner, now: Millis) -> Vec<ReadWindow> {
        let mut read = vec![];
        loop {
            match p.poll(0, now) {
                Action::Read(w) => {
                    p.window_done(w.group, w.to).unwrap();
                    read.push(w);
                }
                Action::FetchNextGeneration { .. } => p.next_generation_not_found(now),
                Action::SaveCheckpoint => drop(p.take_checkpoint()),
                _ => return read,
            }
        }
    }

    #[test]
    fn leased_groups_are_read_only_once_acquired_and_others_progress_is_observed() {
        let start = T0 - 5 * MIN;
        let gen2 = T0 - 3 * MIN;
        let mut p = Planner::new(config(start)).unwrap().with_leases();
        let now = Millis(T0);
        assert_eq!(p.poll(0, now), Action::FetchFirstGeneration { at: Millis(start) });
        p.next_generation_found(Millis(start - MIN), groups(0..4)).unwrap();
        assert_eq!(p.poll(0, now), Action::FetchNextGeneration { after: Millis(start - MIN) });
        p.next_generation_found(Millis(gen2), groups(4..6)).unwrap();
        assert!(drain(&mut p, now).is_empty(), "nothing is read before a lease is taken");
        assert!(p.groups().iter().all(|g| !g.owned && !g.reading && g.progress == Millis(start)));
        assert_eq!(p.checkpoint().unwrap().groups, vec![], "a checkpoint holds only the groups read here");

        // Group 1 is taken over from another process's checkpoint.
        p.acquire(GroupId(0), None).unwrap();
        p.acquire(GroupId(1), Some(Millis(start + MIN))).unwrap();
        let read = drain(&mut p, now);
        assert!(read.iter().all(|w| w.group.0 < 2), "{read:?}");
        assert_eq!(read.iter().find(|w| w.group == GroupId(1)).map(|w| w.from), Some(Millis(start + MIN)));
        let cp = p.checkpoint().unwrap();
        assert_eq!(cp.groups.iter().map(|g| g.progress).collect::<Vec<_>>(), vec![Millis(gen2); 2]);
        assert_eq!(p.generation(), Some(Millis(start - MIN)), "groups 2 and 3 are not finished elsewhere yet");

        // Another process's checkpoint: its progress never lowers ours, and
        // once groups 2 and 3 finished there, the generation is left.
        let theirs = |progress: i64| Checkpoint {
            generation: Millis(start - MIN),
            groups: [0u8, 2, 3]
                .iter()
                .map(|&n| GroupProgress { group: group(n).key(), progress: Millis(progress), epoch: 0 })
                .collect(),
        };
        p.observe(&theirs(start));
        assert_eq!(p.progress(GroupId(0)), Some(Millis(gen2)), "an owned group keeps its own progress");
        p.observe(&Checkpoint { generation: Millis(gen2), ..theirs(gen2) });
        assert!(drain(&mut p, now).is_empty());
        assert_eq!(p.generation(), Some(Millis(start - MIN)), "a checkpoint of another generation is not this one's");
        p.observe(&theirs(gen2));
        assert!(drain(&mut p, now).is_empty(), "the new generation's groups are unowned");
        assert_eq!(p.generation(), Some(Millis(gen2)));

        // A released group is not read any more; a window being read ends.
        p.acquire(GroupId(0), None).unwrap();
        let w = match p.poll(0, now) {
            Action::Read(w) => w,
            other => panic!("{other:?}"),
        };
        p.release(GroupId(0)).unwrap();
        assert!(p.groups()[0].reading);
        p.window_done(w.group, w.to).unwrap();
        assert!(drain(&mut p, now).is_empty());
        assert_eq!(p.checkpoint().unwrap().groups, vec![]);
        assert_eq!(p.release(GroupId(9)), Err(PlanError::UnknownGroup(GroupId(9))));

        // A released group whose window is still being read when another
        // reader's checkpoint moves it to the generation's end: the window
        // ends without moving it back, and only then is the generation left.
        p.next_generation_found(Millis(T0 - MIN), groups(6..7)).unwrap();
        p.acquire(GroupId(1), None).unwrap();
        let w = loop {
            match p.poll(0, now) {
                Action::Read(w) if w.group == GroupId(1) => break w,
                Action::Read(w) => p.window_done(w.group, w.to).unwrap(),
                other => panic!("{other:?}"),
            }
        };
        p.release(GroupId(1)).unwrap();
        let upper = Millis(T0 - MIN);
        let done = |n: u8| GroupProgress { group: group(n).key(), progress: upper, epoch: 0 };
        p.observe(&Checkpoint { generation: Millis(gen2), groups: vec![done(4), done(5)] });
        assert_eq!(p.progress(GroupId(1)), Some(upper));
        assert!(drain(&mut p, now).is_empty());
        assert_eq!(p.generation(), Some(Millis(gen2)), "not left while a window of it is read");
        p.window_done(w.group, w.to).unwrap();
        assert_eq!(p.progress(GroupId(1)), Some(upper), "not moved back");
        drain(&mut p, now);
        assert_eq!(p.generation(), Some(Millis(T0 - MIN)), "left once the window ended");
    }

    /// The start and the two generations of [`leased_switch`].
    const LEASED_START: i64 = T0 - 5 * MIN;
    const LEASED_GEN1: Millis = Millis(LEASED_START - MIN);
    const LEASED_GEN2: Millis = Millis(T0 - 3 * MIN);

    /// A leased planner with `workers` workers and checkpoints every
    /// `interval`, polled at `T0` until it reads [`LEASED_GEN1`] (groups
    /// `first`) and knows the next, [`LEASED_GEN2`] (groups `second`).
    fn leased_switch(
        workers: usize,
        interval: Duration,
        first: std::ops::Range<u8>,
        second: std::ops::Range<u8>,
    ) -> Planner {
        let mut c = config(LEASED_START);
        c.workers = workers;
        c.checkpoint_interval = Some(interval);
        let mut p = Planner::new(c).unwrap().with_leases();
        let now = Millis(T0);
        assert_eq!(p.poll(0, now), Action::FetchFirstGeneration { at: Millis(LEASED_START) });
        p.next_generation_found(LEASED_GEN1, groups(first)).unwrap();
        assert_eq!(p.poll(0, now), Action::FetchNextGeneration { after: LEASED_GEN1 });
        p.next_generation_found(LEASED_GEN2, groups(second)).unwrap();
        p
    }

    /// Another reader's checkpoint: group `n` finished [`LEASED_GEN1`].
    fn finished_elsewhere(n: u8) -> Checkpoint {
        Checkpoint {
            generation: LEASED_GEN1,
            groups: vec![GroupProgress { group: group(n).key(), progress: LEASED_GEN2, epoch: 0 }],
        }
    }

    /// Regression: a reader sharing a table left a generation without
    /// saving its groups' final progress when it was the last to finish
    /// them; the other reader, still in that generation, then waited for
    /// that progress forever (and this one for the other's share of the
    /// next generation). The final checkpoint is now handed out first.
    #[test]
    fn a_leased_generation_is_saved_when_it_is_left() {
        let (gen1, gen2) = (LEASED_GEN1, LEASED_GEN2);
        let mut p = leased_switch(1, Duration::from_secs(3600), 0..2, 2..3);
        let now = Millis(T0);
        p.acquire(GroupId(0), None).unwrap();
        let mut last = None;
        while let Action::Read(w) = p.poll(0, now) {
            if w.to == gen2 {
                last = Some(w);
                break;
            }
            p.window_done(w.group, w.to).unwrap();
        }
        let last = last.expect("the last window of group 0");
        // The other reader finished group 1 before this one finished group 0.
        p.observe(&finished_elsewhere(1));
        p.window_done(last.group, last.to).unwrap();

        assert_eq!(p.poll(0, now), Action::SaveCheckpoint);
        assert_eq!(p.generation(), Some(gen2));
        assert!(p.left_pending());
        assert_eq!(p.poll(0, now), Action::SaveCheckpoint, "until it is taken");
        let saved = p.take_checkpoint().unwrap();
        assert_eq!(
            saved,
            Checkpoint {
                generation: gen1,
                groups: vec![GroupProgress { group: group(0).key(), progress: gen2, epoch: 0 }]
            }
        );
        assert!(!p.left_pending());
        // Its save failed (the store was cut off): it is handed out again,
        // and the generation's leases wait for it.
        p.save_failed(saved.clone());
        assert!(p.left_pending());
        assert_eq!(p.poll(0, now), Action::SaveCheckpoint);
        assert_eq!(p.take_checkpoint(), Some(saved));
        assert_eq!(p.take_checkpoint().unwrap().generation, gen2, "then the current generation");
        assert_ne!(p.poll(0, now), Action::SaveCheckpoint);

        // No group read here: nothing is handed out.
        let mut quiet = leased_switch(1, Duration::from_secs(3600), 0..1, 2..3);
        quiet.observe(&finished_elsewhere(0));
        assert_ne!(quiet.poll(0, now), Action::SaveCheckpoint);
        assert_eq!((quiet.generation(), quiet.left_pending()), (Some(gen2), false));
    }

    /// Regression: a group read to the generation's end whose lease was
    /// then lost (its final progress never saved) counted as finished by
    /// its local progress: the planner left the generation, and the
    /// readers still in it waited for that progress, which nobody saved
    /// and nobody claimed. Lost, it counts by what is saved: the generation
    /// is left only once its next holder's progress is observed.
    #[test]
    fn a_lost_group_counts_at_the_barrier_by_its_saved_progress() {
        let (gen1, gen2) = (LEASED_GEN1, LEASED_GEN2);
        let mut p = leased_switch(1, Duration::from_secs(3600), 0..2, 2..3);
        let now = Millis(T0);
        p.acquire(GroupId(0), None).unwrap();
        p.observe(&finished_elsewhere(1));
        while let Action::Read(w) = p.poll(0, now) {
            p.window_done(w.group, w.to).unwrap();
            if w.to == gen2 {
                break;
            }
        }
        // Read to the end here, and saved only part of the way.
        let partway = Millis(LEASED_START + 10);
        p.saved(&Checkpoint {
            generation: gen1,
            groups: vec![GroupProgress { group: group(0).key(), progress: partway, epoch: 0 }],
        });
        p.lose(GroupId(0)).unwrap();
        assert_eq!(p.progress(GroupId(0)), Some(partway), "back to what was saved");
        for _ in 0..3 {
            assert!(!matches!(p.poll(0, now), Action::Read(_)), "a lost group is not read here");
        }
        assert_eq!(p.generation(), Some(gen1), "the barrier waits for the lost group");
        // Its next holder saved it to the end.
        p.observe(&finished_elsewhere(0));
        p.poll(0, now);
        assert_eq!(p.generation(), Some(gen2), "then the generation is left");

        // A window still read when the lease was lost does not count.
        let mut p = leased_switch(1, Duration::from_secs(3600), 0..1, 2..3);
        p.acquire(GroupId(0), None).unwrap();
        let Action::Read(w) = p.poll(0, now) else { panic!("a window") };
        p.lose(GroupId(0)).unwrap();
        p.window_done(w.group, w.to).unwrap();
        assert_eq!(p.progress(GroupId(0)), Some(Millis(LEASED_START)), "{w:?} read after the loss");
        p.acquire(GroupId(0), Some(Millis(LEASED_START + 5))).unwrap();
        assert_eq!(p.progress(GroupId(0)), Some(Millis(LEASED_START + 5)), "taken again from the fence's progress");
    }

    /// Regression: with two workers, one was handed a save whose snapshot
    /// it had not taken yet when the other left the generation; that save
    /// then held the next generation, and the final progress of the one
    /// left was never saved.
    #[test]
    fn a_generation_left_between_a_save_and_its_snapshot_is_still_saved() {
        let (gen1, gen2) = (LEASED_GEN1, LEASED_GEN2);
        let mut p = leased_switch(2, Duration::from_secs(1), 0..3, 3..4);
        let mut now = Millis(T0);
        // Group 0 is worker 0's, group 1 worker 1's; group 2 is read elsewhere.
        p.acquire(GroupId(0), None).unwrap();
        p.acquire(GroupId(1), None).unwrap();
        for worker in [0, 1] {
            loop {
                match p.poll(worker, now) {
                    Action::Read(w) => p.window_done(w.group, w.to).unwrap(),
                    Action::SaveCheckpoint => drop(p.take_checkpoint()),
                    _ => break,
                }
            }
        }
        assert_eq!(p.generation(), Some(gen1), "group 2 is not finished elsewhere yet");
        now = Millis(T0 + 2 * S);
        // Worker 0 is handed a save, and takes its snapshot only later.
        assert_eq!(p.poll(0, now), Action::SaveCheckpoint);
        p.observe(&finished_elsewhere(2));
        // Worker 1 leaves the generation meanwhile.
        p.poll(1, now);
        assert_eq!(p.generation(), Some(gen2));
        let saved = p.take_checkpoint().unwrap();
        assert_eq!(saved.generation, gen1, "worker 0 saves the generation left");
        assert_eq!(saved.groups.iter().map(|g| g.progress).collect::<Vec<_>>(), vec![gen2; 2]);
    }

    #[test]
    fn misuse_is_reported() {
        let mut p = Planner::new(config(T0)).unwrap();
        assert_eq!(p.window_done(GroupId(0), Millis(T0)), Err(PlanError::UnknownGroup(GroupId(0))));
        assert!(p.checkpoint().is_none());
        p.next_generation_found(Millis(T0 - MIN), groups(0..1)).unwrap();
        assert_eq!(p.window_done(GroupId(3), Millis(T0)), Err(PlanError::UnknownGroup(GroupId(3))));
        assert_eq!(p.window_done(GroupId(0), Millis(T0)), Err(PlanError::NotReading(GroupId(0))));
        assert_eq!(p.window_failed(GroupId(0), Millis(T0)), Err(PlanError::NotReading(GroupId(0))));
        assert!(matches!(
            p.next_generation_found(Millis(T0 - MIN), vec![]),
            Err(PlanError::UnexpectedGeneration { .. })
        ));
        p.next_generation_found(Millis(T0 + MIN), vec![]).unwrap();
        assert!(matches!(
            p.next_generation_found(Millis(T0 + 2 * MIN), vec![]),
            Err(PlanError::UnexpectedGeneration { next: Some(_), .. })
        ));
        let info = p.group(GroupId(0)).unwrap();
        assert_eq!((info.generation, info.worker, info.streams), (Millis(T0 - MIN), 0, group(0)));
        assert_eq!(p.progress(GroupId(0)), Some(Millis(T0)));
    }

    #[test]
    fn lowering_the_end_finishes_early() {
        let mut sim = Sim::new(
            Planner::new(config(T0 - 10 * MIN)).unwrap(),
            T0,
            vec![Gen { ts: T0 - 20 * MIN, groups: groups(0..1), published: 0 }],
        );
        // The first generation and the first look for the next one.
        for _ in 0..2 {
            sim.step();
        }
        assert!(sim.reads.is_empty());
        sim.p.set_end(Millis(T0 - 9 * MIN - 30 * S));
        assert!(sim.run(T0));
        assert_contiguous(&sim.windows(&group(0)), T0 - 10 * MIN, T0 - 9 * MIN - 30 * S);
    }
}
