#!/usr/bin/env python3
"""tables.py - the per-layer tables of docs/BENCHMARKS.md from one run's CSVs (a benchmark tool).

    python3 examples/bench/tables.py bench.csv peers.csv

prints, for the Llama-3-8B and Qwen2.5-0.5B layers, each context's median µs per decode call
and, in brackets, its ratio to the bound measured in the same run; torch SDPA's times beside."""
import csv
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def us(x):
    return f"{x:,.0f}" if x >= 1000 else f"{x:.1f}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    bench = {(r["shape"], int(r["ctx"]), r["mode"]): r for r in rows(sys.argv[1]) if r["section"] == "attn"}
    peers = {(r["shape"], int(r["ctx"]), r["mode"]): r for r in rows(sys.argv[2])}
    layers = [("llama3-8b", ["gpu", "on-1/2", "off-1/2", "hybrid-1/2", "on-1/8", "off-1/8", "hybrid-1/8", "cpu"],
               "| context | GPU only | both halves, 1/2 on host | stream-back, 1/2 | hybrid, 1/2 | both halves, 1/8 on host"
               " | stream-back, 1/8 | hybrid, 1/8 | CPU only | torch SDPA, GPU | torch SDPA, CPU |"),
              ("qwen2.5-0.5b", ["gpu", "on-1/2", "off-1/2", "hybrid-1/2", "cpu"],
               "| context | GPU only | both halves, 1/2 on host | stream-back, 1/2 | hybrid, 1/2 | CPU only"
               " | torch SDPA, GPU | torch SDPA, CPU |")]
    for shape, modes, head in layers:
        print(head)
        print("| ---: " * (len(modes) + 3) + "|")
        for ctx, name in [(4096, "4k"), (32768, "32k"), (131072, "128k"), (524288, "512k")]:
            cells = []
            for m in modes:
                r = bench.get((shape, ctx, m))
                cells.append(f"{us(float(r['us']))} ({float(r['ratio']):.2f})" if r else "-")
            for m in ["torch-gpu", "torch-cpu"]:
                r = peers.get((shape, ctx, m))
                cells.append(us(float(r["us"])) if r else "-")
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()
    for shape in ["llama3-8b", "qwen2.5-0.5b"]:
        auto = [(k[1], k[2], float(r["us"]), r["note"]) for k, r in bench.items() if k[0] == shape and k[2].startswith("auto")]
        for ctx, mode, t, note in sorted(auto):
            choice = note[note.find("chose"):].split(";")[0] if "chose" in note else "?"
            print(f"{shape} {ctx} {mode}: {us(t)} us, {choice}")


if __name__ == "__main__":
    main()
