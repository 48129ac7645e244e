#!/usr/bin/env python3
"""Markdown tables (criterion medians and their 95% CIs, ratio shardwise/official)
from a `cargo bench -p shardwise-benches` run.

Usage: python3 benches/scripts/results_table.py [target/criterion]
"""
import json
import os
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "target/criterion"

PAIRS = [
    ("execute", [
        ("EXECUTE, both into a reused buffer", "shardwise", "official"),
        ("EXECUTE, official via `SerializedRequest::make` (fresh `Vec`)", "shardwise", "official_make"),
    ]),
    ("batch16", [("BATCH of 16 prepared statements, reused buffer", "shardwise", "official")]),
    ("rows1000", [
        ("decode + read borrowed `(i64, i64, &str)`", "shardwise_borrowed", "official_borrowed"),
        ("decode + collect owned `(i64, i64, String)`", "shardwise_owned", "official_owned"),
    ]),
    ("token", [
        ("Murmur3 token, 8-byte key", "shardwise/8B", "official/8B"),
        ("Murmur3 token, 32-byte key", "shardwise/32B", "official/32B"),
    ]),
    ("shard", [("`shard_of` x 1,026 tokens", "shardwise", "official")]),
]


def fmt(ns):
    for factor, unit in [(1e6, "ms"), (1e3, "µs"), (1, "ns")]:
        if ns >= factor:
            v = ns / factor
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{ns:.2f} ns"


def median(group, bench):
    path = os.path.join(ROOT, group, bench, "new", "estimates.json")
    with open(path) as f:
        m = json.load(f)["median"]
    ci = m["confidence_interval"]
    return m["point_estimate"], ci["lower_bound"], ci["upper_bound"]


for group, rows in PAIRS:
    print(f"\n### `{group}`\n")
    print("| operation | shardwise | official | shardwise / official |")
    print("|---|---:|---:|---:|")
    for name, a, b in rows:
        sa, la, ua = median(group, a)
        sb, lb, ub = median(group, b)
        print(f"| {name} | {fmt(sa)} [{fmt(la)}–{fmt(ua)}] | {fmt(sb)} [{fmt(lb)}–{fmt(ub)}] | **{sa / sb:.2f}** |")
