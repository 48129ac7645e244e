//! Codec micro-benchmarks, each operation timed for shardwise and for the
//! official driver (`scylla-cql` / `scylla`) in the same criterion group,
//! so a run gives ratios measured on one machine at one time.
//!
//! `cargo bench -p shardwise-benches -- --warm-up-time 1 --measurement-time 3`
//!
//! What each side does is in `pairs/mod.rs`; `tests/equivalence.rs` checks
//! that both sides produce the same bytes, rows, tokens and shards.
//!
//! Clock: by default the CPU time of the benchmarking thread
//! (`CLOCK_THREAD_CPUTIME_ID`), not wall-clock time, so that time spent
//! preempted by other processes on a shared machine is not counted. Set
//! `BENCH_CLOCK=wall` for criterion's usual wall clock.

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use scylla_cql::serialize::row::RowSerializationContext;

#[path = "../pairs/mod.rs"]
mod pairs;

use pairs::*;

fn execute<M: Measurement>(c: &mut Criterion<M>) {
    let sw_specs = sw_specs();
    let off_specs = off_specs();
    let ctx = RowSerializationContext::from_specs(&off_specs);
    let mut g = c.benchmark_group("execute");
    let mut buf = Vec::with_capacity(256);
    g.bench_function("shardwise", |b| b.iter(|| sw_execute(&mut buf, black_box(&sw_specs), black_box(&ROW))));
    let mut buf = Vec::with_capacity(256);
    g.bench_function("official", |b| b.iter(|| off_execute(&mut buf, black_box(&ctx), black_box(&ROW))));
    g.bench_function("official_make", |b| b.iter(|| off_execute_make(black_box(&ctx), black_box(&ROW))));
    g.finish();
}

fn batch<M: Measurement>(c: &mut Criterion<M>) {
    let sw_specs = sw_specs();
    let off_specs = off_specs();
    let statements = off_batch_statements();
    let rows = [ROW; BATCH_LEN];
    let mut g = c.benchmark_group("batch16");
    let mut buf = Vec::with_capacity(2048);
    g.bench_function("shardwise", |b| b.iter(|| sw_batch(&mut buf, black_box(&sw_specs), black_box(&rows))));
    let mut buf = Vec::with_capacity(2048);
    g.bench_function("official", |b| {
        b.iter(|| off_batch(&mut buf, black_box(&statements), black_box(&off_specs), black_box(&rows)))
    });
    g.finish();
}

fn rows<M: Measurement>(c: &mut Criterion<M>) {
    let body = rows_body();
    let mut g = c.benchmark_group("rows1000");
    g.throughput(Throughput::Elements(PAGE_ROWS as u64));
    g.bench_function("shardwise_borrowed", |b| b.iter(|| sw_rows_borrowed(black_box(&body))));
    g.bench_function("official_borrowed", |b| b.iter(|| off_rows_borrowed(black_box(&body))));
    g.bench_function("shardwise_owned", |b| b.iter(|| sw_rows_owned(black_box(&body))));
    g.bench_function("official_owned", |b| b.iter(|| off_rows_owned(black_box(&body))));
    g.finish();
}

fn token<M: Measurement>(c: &mut Criterion<M>) {
    let mut g = c.benchmark_group("token");
    for (name, key) in [("8B", &KEY_8[..]), ("32B", &KEY_32[..])] {
        g.bench_with_input(BenchmarkId::new("shardwise", name), key, |b, k| b.iter(|| sw_token(black_box(k))));
        g.bench_with_input(BenchmarkId::new("official", name), key, |b, k| b.iter(|| off_token(black_box(k))));
    }
    g.finish();
}

fn shard<M: Measurement>(c: &mut Criterion<M>) {
    let tokens = shard_tokens();
    let sw = sw_sharder(NR_SHARDS, IGNORE_MSB);
    let off = off_sharder(NR_SHARDS, IGNORE_MSB);
    let mut g = c.benchmark_group("shard");
    g.throughput(Throughput::Elements(tokens.len() as u64));
    g.bench_function("shardwise", |b| b.iter(|| sw_shards(black_box(&sw), black_box(&tokens))));
    g.bench_function("official", |b| b.iter(|| off_shards(black_box(&off), black_box(&tokens))));
    g.finish();
}

/// Thread CPU time in nanoseconds, formatted like wall time.
struct ThreadCpuTime {
    wall: WallTime,
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the
    // call, and CLOCK_THREAD_CPUTIME_ID is a clock every Linux kernel has.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Values are nanoseconds, as wall time's are.
        self.wall.formatter()
    }
}

fn all<M: Measurement>(c: &mut Criterion<M>) {
    execute(c);
    batch(c);
    rows(c);
    token(c);
    shard(c);
}

fn wall_clock() -> bool {
    std::env::var("BENCH_CLOCK").is_ok_and(|v| v == "wall")
}

fn benches() {
    if wall_clock() {
        all(&mut Criterion::default().configure_from_args());
    } else {
        let cpu = ThreadCpuTime { wall: WallTime };
        all(&mut Criterion::default().with_measurement(cpu).configure_from_args());
    }
}

criterion_main!(benches);
