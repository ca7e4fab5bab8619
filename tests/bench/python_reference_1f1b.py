#!/usr/bin/env python3
"""A plain Python event simulator of 1F1B (PipeDream-Flush), the reference
issue 15 measures `ppsim simulate` against: per-stage forward and backward
times from a config's costs.fixed, one transfer time for every pipeline
hop, each directed link carrying one transfer at a time in the order they
are handed over, events in a heap. Prints the iteration time and the time
the simulation took.

usage: python3 tests/bench/python_reference_1f1b.py tests/bench/uneven64.yaml [ITERATIONS]

The config needs parallel.pipeline, training.global_batch (micro_batch 1,
no data parallelism) and costs.fixed.forward_s, backward_s (one per stage)
and p2p_s, each on one line; nothing else is read. No optimizer step or
gradient sync: the iteration ends when the last backward does. ITERATIONS
repeats the simulation (default 1), as much work as ppsim's replay of as
many synchronous iterations.
"""
import heapq
import sys
import time


def read_config(path):
    """The few keys this reference reads, from ppsim's YAML without a YAML library."""
    values = {}
    for line in open(path):
        line = line.split("#")[0].rstrip()
        if ":" not in line:
            continue
        key, _, value = line.strip().partition(":")
        values[key.strip()] = value.strip()
    p = int(values["pipeline"])
    m = int(values["global_batch"]) // int(values.get("micro_batch", "1"))
    forward = [float(x) for x in values["forward_s"].strip("[]").split(",")]
    backward = [float(x) for x in values["backward_s"].strip("[]").split(",")]
    return p, m, forward, backward, float(values.get("p2p_s", "0"))


def one_f_one_b(p, m, rank):
    """Rank `rank`'s program: (kind, microbatch) in 1F1B order."""
    warmup = min(p - 1 - rank, m)
    program = [("F", k) for k in range(warmup)]
    for k in range(m - warmup):
        program += [("F", k + warmup), ("B", k)]
    program += [("B", k) for k in range(m - warmup, m)]
    return program


def simulate(p, m, forward, backward, p2p):
    programs = [one_f_one_b(p, m, r) for r in range(p)]
    pos = [0] * p
    busy = [False] * p
    arrived = {}  # (kind, stage, microbatch) -> time its input is there
    link_free = {}  # (src, dst) -> when its last transfer ends
    events = []  # (time, seq, rank)
    seq = 0

    def needs(rank, kind, mb):
        if kind == "F":
            return [] if rank == 0 else [("F", rank, mb)]
        return [] if rank == p - 1 else [("B", rank, mb)]

    def try_start(rank, now):
        nonlocal seq
        if busy[rank] or pos[rank] == len(programs[rank]):
            return
        kind, mb = programs[rank][pos[rank]]
        ready = now
        for key in needs(rank, kind, mb):
            if key not in arrived:
                return
            ready = max(ready, arrived[key])
        duration = forward[rank] if kind == "F" else backward[rank]
        busy[rank] = True
        seq += 1
        heapq.heappush(events, (ready + duration, seq, rank))

    def send(src, dst, key, now):
        start = max(now, link_free.get((src, dst), 0.0))
        link_free[(src, dst)] = start + p2p
        arrived[key] = start + p2p

    for r in range(p):
        try_start(r, 0.0)
    end = 0.0
    while events:
        now, _, rank = heapq.heappop(events)
        end = now
        kind, mb = programs[rank][pos[rank]]
        pos[rank] += 1
        busy[rank] = False
        if kind == "F" and rank + 1 < p:
            send(rank, rank + 1, ("F", rank + 1, mb), now)
            try_start(rank + 1, now)
        if kind == "B" and rank > 0:
            send(rank, rank - 1, ("B", rank - 1, mb), now)
            try_start(rank - 1, now)
        try_start(rank, now)
    return end


def main():
    p, m, forward, backward, p2p = read_config(sys.argv[1])
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    start = time.perf_counter()
    for _ in range(iterations):
        iteration = simulate(p, m, forward, backward, p2p)
    took = time.perf_counter() - start
    print(f"iteration {iteration:.6f} s; {iterations} iteration(s) of {2 * p * m} actions "
          f"simulated in {took * 1e3:.1f} ms")


main()
