#!/usr/bin/env python3
"""timeline.py - where one GPU decode call's time goes, block by block, from an instrumented build.

timeline.patch (beside this file) adds per-block stamps to the tensor-core kernel (SM clocks at
each phase, %globaltimer at entry and exit) and has `build/bench --sections sweep` print them for
the last of 64 back-to-back calls, eager and from a CUDA graph. An experiment build only: the
stamps cost about 1.6 us a call. On a GPU machine, in a scratch copy of the repository:

    git apply examples/bench/timeline.patch && make bench-gpu CUDA_ARCHS=90
    build/bench --sections sweep --sweep-ctx 4096 > tl.txt     # --sweep-qwen for Qwen2.5-0.5B
    python3 examples/bench/timeline.py tl.txt

Prints, per run (eager, graph), the spread of entry and exit times over the blocks, each phase's
min / median / max over the blocks from the moment a block's programmatic wait returns, and the
steps of the combine (every block) and of the merge (the blocks that merged).
"""
import statistics as st
import sys

PHASES = [("q read and split", 1, 2), ("start -> first tile landed", 1, 3), ("start -> last tile landed", 1, 5),
          ("last tile landed -> loop done", 5, 6), ("loop done -> sync", 6, 7), ("combine", 7, 8),
          ("merge (merging blocks)", 8, 9)]
STEPS = ["combine: acc to shared memory", "combine: weights", "combine: partial to global memory",
         "combine: (m, l) and sync", "combine: arrival count and sync", "merge: reads issued", "merge: weights",
         "merge: sync", "merge: finish"]


def read(path):
    runs = {}
    for ln in open(path):
        f = ln.split()
        if len(f) < 23 or f[0] != "timeline":
            continue
        v = list(map(int, f[2:]))
        if v[0]:  # blocks of this launch (the array is cleared before it)
            runs.setdefault(f[1], []).append(v)
    return runs


def spread(xs):
    return f"{min(xs):6.2f} {st.median(xs):6.2f} {max(xs):6.2f}"


def main():
    for tag, R in read(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin").items():
        ghz = st.median(r[9] / (r[10] - r[0]) for r in R if r[10] > r[0])  # SM clocks per ns
        us = lambda cycles: cycles / ghz / 1e3
        g0 = min(r[0] for r in R)
        merging = [r for r in R if r[11] & 1]
        print(f"== {tag}: {len(R)} blocks, SM clock {ghz:.2f} GHz, {len(merging)} merging, "
              f"{sum((r[11] >> 1) & 1 for r in R)} in clusters, at most {max((r[11] >> 8) & 255 for r in R)} tiles a warp")
        print(f"   entry (us after the first block's)  min/med/max {spread([(r[0] - g0) / 1e3 for r in R])}")
        print(f"   wait returned                       min/med/max {spread([(r[0] - g0) / 1e3 + us(r[1]) for r in R])}")
        print(f"   exit                                min/med/max {spread([(r[10] - g0) / 1e3 for r in R])}")
        for name, a, b in PHASES:
            rows = merging if b == 9 else R
            print(f"   {name:34s} min/med/max {spread([us(r[b] - r[a]) for r in rows])}")
        for j, name in enumerate(STEPS):  # neo__tl_phase stamps 1..9 at v[12..20], -1 where not reached
            rows = merging if j >= 5 else R
            prev = [(r[7] if j == 0 else r[11 + j], r[12 + j]) for r in rows]
            xs = [us(b - a) for a, b in prev if a >= 0 and b >= 0]
            if xs:
                print(f"   {name:34s} min/med/max {spread(xs)}")


if __name__ == "__main__":
    main()
