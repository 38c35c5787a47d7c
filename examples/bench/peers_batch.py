#!/usr/bin/env python3
"""peers_batch.py - the peers of build/bench's batch rows (many sequences a step): torch on the GPU
for the same Llama-3-8B layer shapes (32 query / 8 KV heads, head_dim 128, f16) and the same
sequence lengths, printed in bench's columns.

    python3 examples/bench/peers_batch.py --ceilings bench.csv [--csv peers_batch.csv]

Rows, each one decode step over the whole batch, timed with CUDA events (median of 15):
  torch-sdpa-pad   F.scaled_dot_product_attention on a padded batch: q [n, 32, 1, 128], K/V
                   [n, 8, longest, 128] (enable_gqa), with a boolean mask of each sequence's
                   length when the lengths differ
  torch-varlen     torch.nn.attention.varlen.varlen_attn (flash attention over packed sequences:
                   K/V [sum of lengths, heads, 128], cumulative lengths), when this torch has it;
                   K/V heads repeated to 32 outside the timing when it takes no GQA (the note says so)
The bound is the batch's real K/V bytes (not the padding) over bench's HBM copy rate, as bench's
gpu-batch row.
"""
import argparse
import csv
import statistics
import sys

import torch
import torch.nn.functional as F

SPECS = [("64x4k", 64, 4096, 4096), ("16x32k", 16, 32768, 32768), ("64xU512-32k", 64, 512, 32768)]
N_HEAD, N_KV, D = 32, 8, 128


def lengths():
    """the same lengths as build/bench's batch rows (its LCG, one stream over the three specs)"""
    s, out = 0x5EED, []
    for _, n, lo, hi in SPECS:
        ls = []
        for _ in range(n):
            s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            ls.append(lo + (s >> 33) % (hi - lo + 1))
        out.append(ls)
    return out


def read_hbm(path):
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if r["section"] == "ceil" and r["mode"] == "hbm_copy":
                return float(r["gbs"])
    sys.exit("peers_batch: no hbm_copy ceiling in " + path)


def time_it(fn, reps=15):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    t = []
    for _ in range(reps):
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        t.append(e0.elapsed_time(e1) * 1e-3)
    return statistics.median(t)


def sdpa_padded(ls):
    n, L = len(ls), max(ls)
    q = torch.randn((n, N_HEAD, 1, D), dtype=torch.float16, device="cuda")
    k = torch.rand((n, N_KV, L, D), dtype=torch.float16, device="cuda")
    v = torch.rand((n, N_KV, L, D), dtype=torch.float16, device="cuda")
    mask = None
    if min(ls) != L:
        pos = torch.arange(L, device="cuda")
        mask = (pos[None, :] < torch.tensor(ls, device="cuda")[:, None]).view(n, 1, 1, L)
    sec = time_it(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True))
    return sec, "padded to %d%s" % (L, ", length mask" if mask is not None else "")


def varlen(ls):
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None, "torch.nn.attention.varlen not in this torch"
    n, tk = len(ls), sum(ls)
    q = torch.randn((n, N_HEAD, D), dtype=torch.float16, device="cuda")
    k = torch.rand((tk, N_KV, D), dtype=torch.float16, device="cuda")
    v = torch.rand((tk, N_KV, D), dtype=torch.float16, device="cuda")
    cq = torch.arange(n + 1, dtype=torch.int32, device="cuda")
    ck = torch.tensor([0] + list(torch.tensor(ls).cumsum(0)), dtype=torch.int32, device="cuda")
    note = "packed"
    try:
        fn = lambda: varlen_attn(q, k, v, cq, ck, 1, max(ls), enable_gqa=True)
        fn()
    except (TypeError, RuntimeError):
        k, v = k.repeat_interleave(N_HEAD // N_KV, dim=1), v.repeat_interleave(N_HEAD // N_KV, dim=1)
        fn = lambda: varlen_attn(q, k, v, cq, ck, 1, max(ls))
        note = "packed, K/V heads repeated to 32 (4x the bytes)"
    try:
        return time_it(fn), note
    except RuntimeError as e:
        return None, "failed: %s" % str(e).splitlines()[0][:80]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ceilings", required=True)
    ap.add_argument("--csv")
    a = ap.parse_args()
    hbm = read_hbm(a.ceilings)
    out = open(a.csv, "w") if a.csv else None
    if out:
        out.write("# torch=%s, %s\n" % (torch.__version__, torch.cuda.get_device_name(0)))
        out.write("section,shape,ctx,mode,layers,calls,us,gbs,bound_us,ratio,kv_bytes,gpu_bytes,host_bytes,note\n")
    print("# torch %s on %s; bound = K/V bytes / hbm_copy %.1f GB/s" % (torch.__version__, torch.cuda.get_device_name(0), hbm))
    for (name, n, _, _), ls in zip(SPECS, lengths()):
        kv = float(sum(ls)) * N_KV * 2 * D * 2
        bound = kv / (hbm * 1e9)
        for mode, fn in (("torch-sdpa-pad", sdpa_padded), ("torch-varlen", varlen)):
            sec, note = fn(ls)
            us = sec * 1e6 if sec else float("nan")
            ratio = bound / sec if sec else float("nan")
            print("bat  %-12s %8d %-14s %6d %11.1f %9.1f %11.1f %6.3f  %s" % (name, max(ls), mode, n, us, kv / sec * 1e-9 if sec else float("nan"),
                                                                           bound * 1e6, ratio, note))
            if out:
                out.write('bat,%s,%d,%s,%d,15,%.3f,%.3f,%.3f,%.4f,%.0f,%.0f,0,"%s"\n' % (name, max(ls), mode, n, us,
                          kv / sec * 1e-9 if sec else float("nan"), bound * 1e6, ratio, kv, kv, note))
            torch.cuda.empty_cache()
    if out:
        out.close()


if __name__ == "__main__":
    main()
