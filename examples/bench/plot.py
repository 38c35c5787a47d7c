#!/usr/bin/env python3
"""plot.py - docs/bench.png, the headline plot, from build/bench's CSV and peers.py's.

Left: time of one decode-attention call against context for one shape (Llama-3-8B by default),
log-log: the GPU alone, a split layer with both halves at once, the same split streamed back,
the same split with its host half read by the CPU and the copy engine together (hybrid), the CPU
alone, and torch SDPA on the GPU and on the CPU beside them (dashed). Right: the capacity
row, a decode step over a cache larger than the GPU's memory. Needs matplotlib (only for this
plot: pip install matplotlib).

    python3 examples/bench/plot.py docs/bench_gpu.csv docs/bench_gpu_peers.csv [--out docs/bench.png]
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINES = [  # mode in the CSV, label, colour, line style, marker
    ("gpu", "neo_attn, GPU only", "tab:green", "-", "o"),
    ("on-1/2", "neo_attn, both halves at once (half the KV heads in host memory)", "tab:red", "-", "^"),
    ("off-1/2", "neo_attn, stream-back (the same split)", "tab:purple", "-", "v"),
    ("hybrid-1/2", "neo_attn, hybrid (the same split, host half read by CPU and copy engine)", "tab:orange", "-", "P"),
    ("cpu", "neo_attn, CPU only", "tab:blue", "-", "s"),
    ("torch-gpu", "torch SDPA, GPU", "black", "--", "D"),
    ("torch-cpu", "torch SDPA, CPU (f16)", "tab:cyan", "--", "D"),
]
CAPACITY = [("on-1/8", "both halves at once", "tab:red"), ("hybrid-1/8", "hybrid", "tab:orange"),
            ("off-1/8", "stream-back", "tab:purple"), ("cpu-est", "CPU only (estimate)", "tab:blue")]
SHAPES = {"llama3-8b": "Llama-3-8B layer: 32 query / 8 KV heads, head_dim 128",
          "qwen2.5-0.5b": "Qwen2.5-0.5B layer: 14 query / 2 KV heads, head_dim 64"}


def read(paths):
    rows, meta = [], {}
    for p in paths:
        with open(p) as f:
            lines = f.readlines()
        for ln in lines:
            if ln.startswith("#") and "=" in ln:
                key, val = ln[1:].strip().split("=", 1)
                meta.setdefault(key, val)
        rows += list(csv.DictReader(ln for ln in lines if not ln.startswith("#")))
    return rows, meta


def label_ctx(n):
    return f"{n // (1 << 20)}M" if n >= 1 << 20 else f"{n // 1024}k"


def attention_panel(ax, rows, shape):
    ticks = set()
    for mode, label, colour, style, marker in LINES:
        pts = sorted((int(r["ctx"]), float(r["us"])) for r in rows
                     if r["section"] in ("attn", "peer") and r["shape"] == shape and r["mode"] == mode
                     and r["us"] not in ("nan", ""))
        if not pts:
            continue
        ticks.update(p[0] for p in pts)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=style, marker=marker, color=colour,
                label=label, linewidth=1.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(ticks), [label_ctx(t) for t in sorted(ticks)])
    ax.minorticks_off()
    ax.set_xlabel("context (tokens in the KV cache)")
    ax.set_ylabel("µs per decode call, one layer (lower is better)")
    ax.set_title(SHAPES.get(shape, shape) + ", f16 KV", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)


def capacity_panel(ax, rows):
    cap = {r["mode"]: r for r in rows if r["section"] == "cap"}
    bars = [(label, float(cap[mode]["us"]) / 1000.0, colour) for mode, label, colour in CAPACITY if mode in cap]
    if not bars:
        ax.set_axis_off()
        return
    first = next(iter(cap.values()))
    ctx, layers = int(first["ctx"]), int(first["layers"])
    gib = int(first["kv_bytes"]) / 2**30
    gpu_share = int(first["gpu_bytes"]) / max(1, int(first["kv_bytes"]))
    y = range(len(bars))
    ax.barh(list(y), [b[1] for b in bars], color=[b[2] for b in bars])
    ax.set_yticks(list(y), [b[0] for b in bars])
    ax.invert_yaxis()
    for i, b in enumerate(bars):
        ax.text(b[1], i, f" {b[1]:.0f} ms", va="center", fontsize=9)
    ax.set_xlim(0, max(b[1] for b in bars) * 1.25)
    ax.set_xlabel("ms per decode step, all layers (lower is better)")
    ax.set_title(f"Capacity: {layers} layers x {ctx / 1e6:.2f}M tokens = {gib:.0f} GiB of KV,\n"
                 f"more than the GPU holds: {gpu_share:.1%} in GPU memory,\n{(1 - gpu_share) * gib:.1f} GiB on the host",
                 fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+", help="build/bench's CSV, then peers.py's (optional)")
    ap.add_argument("--out", default="docs/bench.png")
    ap.add_argument("--shape", default="llama3-8b", choices=sorted(SHAPES))
    a = ap.parse_args()
    rows, meta = read(a.csv)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 6.2), gridspec_kw={"width_ratios": [1.6, 1]})
    attention_panel(left, rows, a.shape)
    capacity_panel(right, rows)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    gpu = meta.get("gpu", "").split(",")[0]
    cpu = meta.get("cpu", "").split(",")
    host = f"{cpu[1].strip().replace(' cores', '-core')} {cpu[0].replace('(R)', '')}" if len(cpu) > 1 else "its"
    fig.suptitle(f"neo_attn decode attention on an {gpu} and its {host} host\n"
                 f"bench run {meta.get('date', '')}, commit {meta.get('commit', '')}", fontsize=11)
    fig.tight_layout(rect=(0, 0.09, 1, 0.95))
    fig.savefig(a.out, dpi=100)
    print(f"plot.py: wrote {a.out}")


if __name__ == "__main__":
    main()
