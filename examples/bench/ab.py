#!/usr/bin/env python3
"""ab.py - two builds of build/bench on one machine, run in turn (A B A B ..), every row's time
side by side. The host-side rows (cpu, on, off, e2e) move by 10-30% from one machine of the same
kind to the next, more than most changes do, so a change is judged by an A/B on one machine,
never by two runs on two machines.

    python3 examples/bench/ab.py BENCH_A BENCH_B [--rounds 3] [--out DIR] -- [bench args]
    e.g. python3 examples/bench/ab.py build/bench-old build/bench -- --sections attn --seconds 0.3

Each round runs A then B with the same arguments and a CSV of their own (DIR, default
/tmp/neo-ab). The table: per row, the median over rounds of A's and of B's microseconds, B / A,
and each side's spread (max / min - 1), which says whether B / A means anything.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys


def rows(path):
    out = {}
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if r["section"] == "ceil":
                out[("ceil", r["mode"], "", "")] = float(r["gbs"])
            else:
                out[(r["section"], r["shape"], r["ctx"], r["mode"])] = float(r["us"])
    return out


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description="A/B two bench binaries on one machine")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="/tmp/neo-ab")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds wants 1 or more")
    os.makedirs(args.out, exist_ok=True)
    got = {"A": [], "B": []}
    for r in range(args.rounds):
        for side, exe in (("A", args.a), ("B", args.b)):
            path = os.path.join(args.out, "%s%d.csv" % (side, r))
            log = os.path.join(args.out, "%s%d.txt" % (side, r))
            with open(log, "w") as lf:
                rc = subprocess.call([exe, "--csv", path] + extra, stdout=lf, stderr=subprocess.STDOUT)
            if rc != 0:
                sys.exit("ab.py: %s exited with %d (its output: %s)" % (exe, rc, log))
            got[side].append(rows(path))
            print("round %d %s done" % (r + 1, side), flush=True)

    def spread(v):
        return max(v) / min(v) - 1 if min(v) > 0 else float("nan")

    keys = [k for k in got["A"][0] if all(k in g for g in got["A"] + got["B"])]
    print("%-4s %-12s %8s %-10s %11s %11s %7s %7s %7s" % ("sect", "shape", "ctx", "mode", "A", "B", "B/A", "sprA", "sprB"))
    for k in keys:
        a = [g[k] for g in got["A"]]
        b = [g[k] for g in got["B"]]
        ma, mb = statistics.median(a), statistics.median(b)
        unit = ("GFLOP/s" if k[1] == "cpu_fma" else "GB/s") if k[0] == "ceil" else "us"
        print("%-4s %-12s %8s %-10s %11.1f %11.1f %7.3f %6.1f%% %6.1f%%  %s" %
              (k[0], k[1], k[2], k[3], ma, mb, mb / ma if ma else float("nan"), 100 * spread(a), 100 * spread(b), unit))


if __name__ == "__main__":
    main()
