#!/usr/bin/env python3
"""peers.py - the peers of build/bench's attention rows: torch SDPA decode, f16 KV, on the GPU and
on the CPU, for the same shapes and contexts, printed in the same columns.

    python3 examples/bench/peers.py --ceilings bench.csv [--csv peers.csv] [--quick] [--threads 16]

One query token (q [1, n_head, 1, d]) against K/V [1, n_kv, ctx, d] through
F.scaled_dot_product_attention(..., enable_gqa=True) (or, if this torch lacks it, K/V repeated per
query head once, outside the timing; the note says 'repeated'). Calls rotate over enough K/V sets
that the GPU side holds >= 256 MiB and the CPU side >= 1 GiB, so neither cache holds the KV.
GPU: back-to-back calls timed with CUDA events, median over repetitions of the per-call time;
CPU (torch.set_num_threads(--threads)): wall clock per pass, median. The bounds use bench's
ceilings (its CSV): GPU rows KV bytes / HBM copy rate, CPU rows KV bytes / DRAM read.
"""
import argparse
import csv
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [("llama3-8b", 32, 8, 128), ("qwen2.5-0.5b", 14, 2, 64)]
MiB = 1 << 20


def read_ceilings(path):
    c = {}
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if r["section"] == "ceil":
                c[r["mode"]] = float(r["gbs"])
    return c


def kv_bytes(n_kv, d, ctx):
    return ctx * n_kv * 2 * d * 2


GQA = True


def attend(q, k, v):
    global GQA
    if GQA:
        try:
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        except TypeError:
            GQA = False
            raise
    return F.scaled_dot_product_attention(q, k, v)


def make_sets(n_sets, n_head, n_kv, d, ctx, dtype, device):
    ks, vs = [], []
    for _ in range(n_sets):
        k = torch.rand((1, n_kv, ctx, d), dtype=torch.float32, device="cuda").mul_(2).sub_(1).to(dtype)
        v = torch.rand((1, n_kv, ctx, d), dtype=torch.float32, device="cuda").mul_(2).sub_(1).to(dtype)
        if not GQA:
            k = k.repeat_interleave(n_head // n_kv, dim=1)
            v = v.repeat_interleave(n_head // n_kv, dim=1)
        ks.append(k.to(device))
        vs.append(v.to(device))
    return ks, vs


def time_gpu(q, ks, vs, seconds):
    n = len(ks)
    per = max(8, n)
    for i in range(2 * per):
        attend(q, ks[i % n], vs[i % n])
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    end = time.perf_counter() + seconds
    while len(t) < 5 or (time.perf_counter() < end and len(t) < 40):
        e0.record()
        for i in range(per):
            o = attend(q, ks[i % n], vs[i % n])
        e1.record()
        e1.synchronize()
        t.append(e0.elapsed_time(e1) * 1e-3 / per)
    assert torch.isfinite(o).all()
    return statistics.median(t), len(t) * per


def time_cpu(q, ks, vs, seconds):
    n = len(ks)
    per = max(4, n)
    for i in range(n):
        attend(q, ks[i % n], vs[i % n])
    t = []
    end = time.perf_counter() + seconds
    while len(t) < 3 or (time.perf_counter() < end and len(t) < 20):
        t0 = time.perf_counter()
        for i in range(per):
            o = attend(q, ks[i % n], vs[i % n])
        t.append((time.perf_counter() - t0) / per)
    assert torch.isfinite(o.float()).all()
    return statistics.median(t), len(t) * per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ceilings", required=True, help="build/bench's CSV (its ceil rows)")
    ap.add_argument("--csv", help="write the rows here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=0.3)
    a = ap.parse_args()
    ceil = read_ceilings(a.ceilings)
    hbm, dram = ceil["hbm_copy"], ceil["dram_read"]
    torch.set_num_threads(a.threads)
    out = open(a.csv, "w") if a.csv else None
    if out:
        out.write(f"# torch={torch.__version__}, {torch.cuda.get_device_name(0)}, cpu threads {torch.get_num_threads()}\n")
        out.write("section,shape,ctx,mode,layers,calls,us,gbs,bound_us,ratio,kv_bytes,gpu_bytes,host_bytes,note\n")
    print(f"# peers: torch {torch.__version__}, SDPA decode, f16 KV, bounds from bench: HBM {hbm:.0f} GB/s, "
          f"DRAM read {dram:.1f} GB/s, {torch.get_num_threads()} CPU threads")
    print(f"{'sect':4} {'shape':12} {'ctx':>8} {'mode':10} {'layers':>6} {'calls':>6} {'us':>11} {'GB/s':>9} "
          f"{'bound_us':>11} {'ratio':>6}  note")

    def emit(shape, ctx, mode, n_sets, calls, sec, kvb, rate, note):
        us, gbs, bound = sec * 1e6, kvb / sec * 1e-9, kvb / (rate * 1e9) * 1e6
        print(f"{'peer':4} {shape:12} {ctx:8d} {mode:10} {n_sets:6d} {calls:6d} {us:11.1f} {gbs:9.1f} {bound:11.1f} "
              f"{bound / us:6.3f}  {note}", flush=True)
        if out:
            out.write(f"peer,{shape},{ctx},{mode},{n_sets},{calls},{us:.3f},{gbs:.3f},{bound:.3f},{bound / us:.4f},"
                      f"{kvb},0,0,\"{note}\"\n")
            out.flush()

    gpu_ctx = [4096, 32768] if a.quick else [4096, 32768, 131072, 524288]
    cpu_ctx = [4096, 32768] if a.quick else [4096, 32768, 131072]
    for name, nh, nkv, d in SHAPES:
        for ctx in gpu_ctx:
            kvb = kv_bytes(nkv, d, ctx)
            n_sets = max(2, math.ceil(256 * MiB / kvb))
            q = torch.rand((1, nh, 1, d), device="cuda").mul_(2).sub_(1).half()
            try:
                ks, vs = make_sets(n_sets, nh, nkv, d, ctx, torch.float16, "cuda")
                sec, calls = time_gpu(q, ks, vs, a.seconds)
            except TypeError:  # no enable_gqa in this torch: repeat K/V once
                ks, vs = make_sets(n_sets, nh, nkv, d, ctx, torch.float16, "cuda")
                sec, calls = time_gpu(q, ks, vs, a.seconds)
            emit(name, ctx, "torch-gpu", n_sets, calls, sec, kvb, hbm, "enable_gqa" if GQA else "KV repeated per q head")
            del ks, vs
            torch.cuda.empty_cache()
        for ctx in cpu_ctx:
            kvb = kv_bytes(nkv, d, ctx)
            n_sets = max(2, math.ceil(1024 * MiB / kvb))
            for dt, mname in ((torch.float16, "torch-cpu"), (torch.bfloat16, "torch-cpu-bf16")):
                if dt == torch.bfloat16 and ctx != 32768:
                    continue
                q = torch.rand((1, nh, 1, d)).mul_(2).sub_(1).to(dt)
                ks, vs = make_sets(n_sets, nh, nkv, d, ctx, dt, "cpu")
                sec, calls = time_cpu(q, ks, vs, a.seconds)
                emit(name, ctx, mname, n_sets, calls, sec, kvb, dram, ("f16" if dt == torch.float16 else "bf16") +
                     (", enable_gqa" if GQA else ", KV repeated per q head"))
                del ks, vs
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
