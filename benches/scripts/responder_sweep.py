#!/usr/bin/env python3
"""What each driver adds, measured against the responder (a CQL server that
answers at once, `src/bin/responder.rs`).

For each runtime (current-thread: `-t 1`; multi-thread: `-t 2`) and workload:
a closed-loop `workload compare` (CPU per request, each driver's peak), then
open-loop comparisons at 10%, 25%, 50%, 75% and 90% of the official driver's
median closed-loop peak (latency from when each request was due). Every
comparison alternates the drivers (A B B A ...), one process per run.

The responder runs pinned to RESPONDER_CPUS, the drivers to DRIVER_CPUS
(taskset), when the machine has at least two CPUs.

Usage:
  python3 benches/scripts/responder_sweep.py [--rounds 5] [--duration 2s]
      [--warmup 500ms] [--workloads write,read] [--threads 1,2] [--out DIR]

Writes DIR/<workload>-t<threads>-closed.{json,md}, ...-r<pct>.{json,md},
and DIR/summary.md (the ratio tables).
"""
import argparse
import json
import os
import subprocess
import sys
import time

FRACTIONS = [0.10, 0.25, 0.50, 0.75, 0.90]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", default="2s")
    ap.add_argument("--warmup", default="500ms")
    ap.add_argument("--concurrency", default="128")
    ap.add_argument("--workloads", default="write,read")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shards", default="2")
    ap.add_argument("--port", default="19142")
    ap.add_argument("--responder-cpus", default="0")
    ap.add_argument("--driver-cpus", default="1")
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--out", default="target/responder-sweep")
    ap.add_argument("--summary-only", action="store_true",
                    help="only write DIR/summary.md from the JSON files already in DIR")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.summary_only:
        summary = []
        for workload in a.workloads.split(","):
            for threads in a.threads.split(","):
                s = collected(a, workload, threads)
                if s:
                    summary.append(s)
        md = summary_markdown(a, summary)
        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write(md)
        print(md)
        return
    pin = os.cpu_count() >= 2
    responder_cmd = [
        os.path.join(a.bin, "responder"),
        "--port", a.port,
        "--shard-aware-port", str(int(a.port) + 1),
        "--shards", a.shards,
    ]
    if pin:
        responder_cmd = ["taskset", "-c", a.responder_cpus] + responder_cmd
    responder = subprocess.Popen(responder_cmd, stdout=subprocess.PIPE, text=True)
    line = responder.stdout.readline()
    if not line.startswith("LISTENING"):
        sys.exit(f"responder: {line!r}")
    print(f"responder: {line.strip()} ({' '.join(responder_cmd)})", flush=True)
    summary = []
    try:
        for workload in a.workloads.split(","):
            for threads in a.threads.split(","):
                summary.append(sweep(a, pin, workload, threads))
    finally:
        responder.terminate()
        responder.wait()
    md = summary_markdown(a, summary)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(md)
    print(md)


def compare(a, pin, workload, threads, name, rate=None):
    base = os.path.join(a.out, f"{workload}-t{threads}-{name}")
    cmd = [
        os.path.join(a.bin, "workload"), "compare", workload,
        "--rounds", str(a.rounds), "-d", a.duration, "-w", a.warmup,
        "-t", threads, "-p", a.concurrency,
        "--node", f"127.0.0.1:{a.port}",
        "--json", base + ".json", "--markdown", base + ".md",
        "--label", f"against the responder, {name}",
    ]
    if rate is not None:
        cmd += ["-r", f"{rate:.0f}"]
    if pin:
        cmd = ["taskset", "-c", a.driver_cpus] + cmd
    print(f"$ {' '.join(cmd)}", flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"  {time.time() - t0:.0f} s", flush=True)
    with open(base + ".json") as f:
        return json.load(f)


def med(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def sweep(a, pin, workload, threads):
    closed = compare(a, pin, workload, threads, "closed")
    peak = med([r["official"]["throughput"] for r in closed["runs"]])
    cells = [("closed", None, closed)]
    for frac in FRACTIONS:
        rate = peak * frac
        cells.append((f"r{int(frac * 100)}", rate, compare(a, pin, workload, threads, f"r{int(frac * 100)}", rate)))
    return {"workload": workload, "threads": threads, "peak": peak, "cells": cells}


def collected(a, workload, threads):
    """The cells of one sweep already on disk (a sweep cut short has fewer)."""
    cells = []
    for name in ["closed"] + [f"r{int(f * 100)}" for f in FRACTIONS]:
        path = os.path.join(a.out, f"{workload}-t{threads}-{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            c = json.load(f)
        cells.append((name, c.get("rate"), c))
    if not cells or cells[0][0] != "closed":
        return None
    peak = med([r["official"]["throughput"] for r in cells[0][2]["runs"]])
    return {"workload": workload, "threads": threads, "peak": peak, "cells": cells}


def summary_markdown(a, summary):
    out = []
    for s in summary:
        runtime = "current-thread" if s["threads"] == "1" else f"multi-thread, {s['threads']} workers"
        out.append(
            f"#### {s['workload']}, {runtime}, {a.concurrency} in flight — official closed-loop peak "
            f"{s['peak']:.0f}/s\n"
        )
        out.append(
            "| load | rate/s | CPU µs/req shardwise | official | CPU ratio | p50 ms s / o | p99 ms s / o | "
            "p99.9 ms s / o | max ms s / o | p50 ratio | p99 ratio | p99.9 ratio | max ratio | "
            "p99 ratio per round | from the send: p99 ratio | p99.9 ratio |"
        )
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for name, rate, c in s["cells"]:
            runs = c["runs"]
            ms = lambda d, k: med([r[d][k] for r in runs])
            m = c["median"]
            per_round = ", ".join(f"{r['p99']:.2f}" for r in c["ratios"])
            label = "closed loop" if rate is None else f"{name[1:]}% of peak"
            out.append(
                f"| {label} | {rate or ms('official', 'throughput'):.0f} | "
                f"{c['median_cpu_us_per_op']['shardwise']:.2f} | {c['median_cpu_us_per_op']['official']:.2f} | "
                f"**{m['cpu_per_op']:.3f}** | "
                f"{ms('shardwise', 'p50_ms'):.3f} / {ms('official', 'p50_ms'):.3f} | "
                f"{ms('shardwise', 'p99_ms'):.3f} / {ms('official', 'p99_ms'):.3f} | "
                f"{ms('shardwise', 'p999_ms'):.3f} / {ms('official', 'p999_ms'):.3f} | "
                f"{ms('shardwise', 'max_ms'):.3f} / {ms('official', 'max_ms'):.3f} | "
                f"{m['p50']:.3f} | **{m['p99']:.3f}** | **{m['p999']:.3f}** | {m['max']:.3f} | {per_round} | "
                f"{m.get('svc_p99', float('nan')):.3f} | {m.get('svc_p999', float('nan')):.3f} |"
            )
        out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
