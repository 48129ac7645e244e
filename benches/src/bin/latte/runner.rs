//! Runs a phase: a script function called once per cycle by `-p` request
//! loops in each of `-t` threads, closed loop or at a fixed rate.
//!
//! As in the `workload` runner: thread `k` of `t` runs cycles `k`, `k + t`,
//! … (so cycle numbers are unique across threads); with `-r`, a cycle is due
//! at its place on the rate's timeline and its latency counts from then
//! (open loop: a request that waits behind a slow one shows the wait). A
//! Rune machine runs one call at a time and is not `Send`, so every loop
//! owns a machine and every thread runs its loops on a current-thread
//! runtime of its own; the session (and its connection tasks) is shared.
//! As in latte, a request that timed out or met an overloaded or
//! unavailable server, passed on by the script, is counted; any other
//! failure stops every loop and is the phase's error.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rune::Hash;
use shardwise_benches::interval::Interval;

use crate::context::Context;
use crate::error::LatteError;
use crate::script::{self, Outcome, Script};

/// What a phase runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The script function (`load` or `run`).
    pub function: &'static str,
    /// For how long, or how many cycles in all.
    pub interval: Interval,
    /// Threads.
    pub threads: usize,
    /// Request loops per thread.
    pub concurrency: usize,
    /// Cycles per second for the whole process (open loop), or none.
    pub rate: Option<f64>,
}

/// What a phase measured.
pub struct Measured {
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Latencies of the successful cycles, in nanoseconds.
    pub histogram: Histogram<u64>,
    /// Cycles run (successful or counted as errors).
    pub ops: u64,
    /// Cycles that ended in a timed-out or overloaded request.
    pub errors: u64,
    /// The first such failure.
    pub first_error: Option<String>,
    /// Requests sent.
    pub requests: u64,
    /// Rows returned.
    pub rows: u64,
}

/// Nanoseconds, 1 ns .. 100 s, 3 significant digits.
fn histogram() -> Result<Histogram<u64>, LatteError> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).map_err(|e| LatteError::Runtime(e.to_string()))
}

/// Calls a once-per-phase function (`schema`, `prepare`, `erase`).
pub async fn call_once(script: &Script, ctx: &Context, function: &'static str) -> Result<(), LatteError> {
    let ctx_value = rune::to_value(ctx.clone()).map_err(|e| LatteError::Runtime(e.to_string()))?;
    let mut vm = script.vm();
    match script::call(&mut vm, Hash::type_hash([function]), (ctx_value,)).await {
        Outcome::Done => Ok(()),
        Outcome::Counted(message) | Outcome::Failed(message) => {
            Err(LatteError::Script { function, cycle: None, message })
        }
    }
}

/// Runs `plan`: with one thread, on `session_rt` (the current-thread
/// runtime whose tasks the session's connections are, so it must be the one
/// polled); with more, on `plan.threads` threads of its own, while the
/// session's multi-thread runtime keeps its connection tasks going.
pub fn run_phase(
    script: &Script,
    ctx: &Context,
    plan: &Plan,
    session_rt: &tokio::runtime::Runtime,
) -> Result<Measured, LatteError> {
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    if plan.threads == 1 {
        let t = session_rt.block_on(thread_loops(script, ctx.with_fresh_counters(), plan, 0, start, &stop))?;
        return measured(start.elapsed(), vec![Ok(t)]);
    }
    let thread = |index: usize| -> Result<ThreadStats, LatteError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(LatteError::Start)?;
        let result = rt.block_on(thread_loops(script, ctx.with_fresh_counters(), plan, index as u64, start, &stop));
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        result
    };
    let results: Vec<Result<ThreadStats, LatteError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..plan.threads).map(|i| s.spawn(move || thread(i))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(LatteError::Runtime("a runner thread panicked".into()))))
            .collect()
    });
    measured(start.elapsed(), results)
}

fn measured(elapsed: Duration, results: Vec<Result<ThreadStats, LatteError>>) -> Result<Measured, LatteError> {
    let mut m =
        Measured { elapsed, histogram: histogram()?, ops: 0, errors: 0, first_error: None, requests: 0, rows: 0 };
    for r in results {
        let t = r?;
        // Same bounds on both sides: adding cannot fail.
        let _ = m.histogram.add(&t.histogram);
        m.ops += t.ops;
        m.errors += t.errors;
        m.first_error = m.first_error.or(t.first_error);
        m.requests += t.requests;
        m.rows += t.rows;
    }
    Ok(m)
}

struct ThreadStats {
    histogram: Histogram<u64>,
    ops: u64,
    errors: u64,
    first_error: Option<String>,
    requests: u64,
    rows: u64,
}

/// What the loops of one thread share (one thread: no locks needed).
struct Loops<'a> {
    script: &'a Script,
    plan: &'a Plan,
    ctx: rune::Value,
    function: Hash,
    index: u64,
    threads: u64,
    next: Cell<u64>,
    limit: u64,
    deadline: Option<Instant>,
    start: Instant,
    rate_per_thread: Option<f64>,
    stop: &'a AtomicBool,
    stats: RefCell<ThreadStats>,
}

async fn thread_loops(
    script: &Script,
    ctx: Context,
    plan: &Plan,
    index: u64,
    start: Instant,
    stop: &AtomicBool,
) -> Result<ThreadStats, LatteError> {
    let threads = plan.threads as u64;
    let ctx_value = rune::to_value(ctx.clone()).map_err(|e| LatteError::Runtime(e.to_string()))?;
    let loops = Loops {
        script,
        plan,
        ctx: ctx_value,
        function: Hash::type_hash([plan.function]),
        index,
        threads,
        next: Cell::new(0),
        limit: match plan.interval {
            Interval::Count(n) => (n + threads - 1 - index) / threads,
            Interval::Time(_) => u64::MAX,
        },
        deadline: match plan.interval {
            Interval::Time(d) => Some(start + d),
            Interval::Count(_) => None,
        },
        start,
        rate_per_thread: plan.rate.map(|r| r / threads as f64),
        stop,
        stats: RefCell::new(ThreadStats {
            histogram: histogram()?,
            ops: 0,
            errors: 0,
            first_error: None,
            requests: 0,
            rows: 0,
        }),
    };
    let results = futures::future::join_all((0..plan.concurrency).map(|_| one_loop(&loops))).await;
    for r in results {
        r?;
    }
    let mut stats = loops.stats.into_inner();
    stats.requests = ctx.counters().requests.load(Ordering::Relaxed);
    stats.rows = ctx.counters().rows.load(Ordering::Relaxed);
    Ok(stats)
}

async fn one_loop(l: &Loops<'_>) -> Result<(), LatteError> {
    let mut vm = l.script.vm();
    loop {
        if l.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let local = l.next.get();
        if local >= l.limit {
            return Ok(());
        }
        l.next.set(local + 1);
        let due = l.rate_per_thread.map(|rate| l.start + Duration::from_secs_f64(local as f64 / rate));
        if let Some(due) = due {
            tokio::time::sleep_until(due.into()).await;
        }
        let now = Instant::now();
        if l.deadline.is_some_and(|d| now >= d) {
            return Ok(());
        }
        let t0 = due.unwrap_or(now);
        let cycle = local * l.threads + l.index;
        let outcome = script::call(&mut vm, l.function, (l.ctx.clone(), cycle as i64)).await;
        let ns = t0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        let mut s = l.stats.borrow_mut();
        s.ops += 1;
        match outcome {
            Outcome::Done => s.histogram.saturating_record(ns.max(1)),
            Outcome::Counted(message) => {
                s.errors += 1;
                if s.first_error.is_none() {
                    s.first_error = Some(message);
                }
            }
            Outcome::Failed(message) => {
                l.stop.store(true, Ordering::Relaxed);
                return Err(LatteError::Script { function: l.plan.function, cycle: Some(cycle), message });
            }
        }
    }
}
