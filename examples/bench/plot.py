#!/usr/bin/env python3
"""plot.py - docs/bench.png from build/bench's CSV (and peers.py's): decode-attention time per call
against context, one panel per shape, one line per mode, each mode's bound dashed in its colour;
log-log axes.

    python3 examples/bench/plot.py bench.csv [peers.csv] [--out docs/bench.png]
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = [  # mode, colour, marker, draw its bound
    ("gpu", "tab:green", "o", True),
    ("gpu-graph", "tab:olive", "s", False),
    ("cpu", "tab:blue", "o", True),
    ("on-1/2", "tab:red", "^", True),
    ("off-1/2", "tab:purple", "v", True),
    ("auto-1/2", "tab:pink", "x", False),
    ("on-1/8", "tab:orange", "^", True),
    ("off-1/8", "tab:brown", "v", True),
    ("auto-1/8", "tab:gray", "x", False),
    ("torch-gpu", "black", "D", False),
    ("torch-cpu", "tab:cyan", "D", False),
]
SHAPES = [("llama3-8b", "Llama-3-8B: 32 q / 8 kv heads, d 128"), ("qwen2.5-0.5b", "Qwen2.5-0.5B: 14 q / 2 kv heads, d 64")]


def read(paths):
    rows, meta = [], []
    for p in paths:
        with open(p) as f:
            lines = f.readlines()
        meta += [ln[1:].strip() for ln in lines if ln.startswith("#")]
        rows += list(csv.DictReader(ln for ln in lines if not ln.startswith("#")))
    return rows, meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--out", default="docs/bench.png")
    a = ap.parse_args()
    rows, meta = read(a.csv)
    fig, axes = plt.subplots(1, 2, figsize=(15, 6.5))
    for ax, (shape, title) in zip(axes, SHAPES):
        for mode, colour, marker, bound in MODES:
            pts = sorted((int(r["ctx"]), float(r["us"]), float(r["bound_us"])) for r in rows
                         if r["section"] in ("attn", "peer") and r["shape"] == shape and r["mode"] == mode
                         and r["us"] not in ("nan", ""))
            if not pts:
                continue
            x = [p[0] for p in pts]
            ax.plot(x, [p[1] for p in pts], marker=marker, color=colour, label=mode, linewidth=1.4)
            if bound:
                ax.plot(x, [p[2] for p in pts], linestyle="--", color=colour, linewidth=0.9, alpha=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("µs per decode call (one layer)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2, title="solid: measured; dashed: bound", title_fontsize=7)
    date = next((m.split("=", 1)[1] for m in meta if m.startswith("date=")), "")
    commit = next((m.split("=", 1)[1] for m in meta if m.startswith("commit=")), "")
    gpu = next((m.split("=", 1)[1].split(",")[0] for m in meta if m.startswith("gpu=")), "")
    fig.suptitle(f"neo_attn decode attention, f16 KV: {gpu}, {date}, commit {commit}. Bounds: gpu = KV / HBM copy rate; "
                 f"cpu = KV / DRAM read;\non = max(GPU half / HBM, host half / DRAM); off = host half / pinned H2D + "
                 f"GPU half / HBM (all measured in the same run)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(a.out, dpi=110)
    print(f"plot.py: wrote {a.out}")


if __name__ == "__main__":
    main()
