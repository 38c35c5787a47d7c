#!/usr/bin/env python3
"""timeline_calls.py - where back-to-back decode calls spend their time, block by block, on the GPU
(not part of the library).

The tensor-core kernel of neo_attn_cuda.cu is copied with time stamps added: each block's thread 0
reads %globaltimer (ns, one clock for the whole GPU) when the block starts, when its wait for the
kernel ahead of it returns, when q is in registers, when warp 0's first tile has landed, when
every warp is done with its tiles, when the warps' combine (and its arrival count) is done, and
when the block ends (after the merge in the block that merges); inside the combine when the
warps' states are in shared memory and just before and after the arrival count, and inside the
merge when its first loads are in registers and when its weights are done; with clock64 for the
same block (the SM's cycles, so the report gives the SM clock too). bench.c is copied too, so that its sweep
(`--sections sweep`) writes the stamps of the last blocks of each shape row at the planner's
split count to a file per row. Neither the library nor build/bench changes: the copies live in
build/timeline.

    make build/floors.o CUDA_ARCHS=90            (the floors kernels the bench links)
    python3 examples/bench/timeline_calls.py build [--arch 90]
    TIMELINE_DIR=dir build/timeline/bench --sections sweep --sweep-ctx 4096
    python3 examples/bench/timeline_calls.py report dir

The report groups the blocks into calls (a call's blocks all start before the next call's: each
block lets the next kernel launch only after it has started; in start order, a block whose
(KV head, query tile, split) was already seen begins the next call), and times every stamp from the
end of the call before (its last block's end): how long after it the wait returns, q arrives,
the tiles are done, the combine and the merge. The stamps add an atomic and a few stores a
block; compare the row's time with the plain bench's. The text changes are made against the
source as it is; if the kernel has moved on, `build` says which anchor it did not find."""
import glob
import os
import statistics
import struct
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUTD = os.path.join(ROOT, "build", "timeline")
CAP = 32768  # records kept (a ring: the last CAP blocks)
WORDS = 16  # u64 a record

STAMPS = r'''
#define NEO_TL_CAP 32768
__device__ unsigned long long neo__tl_buf[NEO_TL_CAP][16];
__device__ unsigned neo__tl_ctr;
__shared__ unsigned long long neo__tl_s[5]; /* the combine's and the merge's stamps (thread 0) */
__device__ __forceinline__ unsigned long long neo__gt() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}
extern "C" void neo__tl_reset(void) {
    unsigned z = 0;
    cudaMemcpyToSymbol(neo__tl_ctr, &z, 4);
}
extern "C" unsigned neo__tl_get(unsigned long long *dst) {
    unsigned n = 0;
    cudaDeviceSynchronize();
    cudaMemcpyFromSymbol(&n, neo__tl_ctr, 4);
    cudaMemcpyFromSymbol(dst, neo__tl_buf, sizeof neo__tl_buf);
    return n;
}
'''

# (anchor, replacement) pairs for neo_attn_cuda.cu; the stamps that read a value (q, l) test it so
# that the stamp waits for it
KERNEL_EDITS = [
    ("""            sh.wl[warp][2 * c + 1] = l[1];
        }
        __syncthreads();""",
     """            sh.wl[warp][2 * c + 1] = l[1];
        }
        __syncthreads();
        if (threadIdx.x == 0) neo__tl_s[0] = neo__gt();"""),
    ("""        if (tid == 0) {
            unsigned prev;
            asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(p.cnt + unit) : "memory");
            sh.last = prev == (unsigned)(S - 1);""",
     """        if (tid == 0) {
            unsigned prev;
            neo__tl_s[1] = neo__gt();
            asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(p.cnt + unit) : "memory");
            sh.last = prev == (unsigned)(S - 1);
            if (prev != 0xdeadbeefu) neo__tl_s[2] = neo__gt();"""),
    ("""        const bool sink = p.out != NULL && p.sinks;
        for (int i = warp; i < nqb; i += W) {
            if (i != warp) load_ml(i);""",
     """        if (tid == 0 && pf[0].x != 1.2345f && ml[0].x != 1.2345f) neo__tl_s[3] = neo__gt();
        const bool sink = p.out != NULL && p.sinks;
        for (int i = warp; i < nqb; i += W) {
            if (i != warp) load_ml(i);"""),
    ("""        __syncthreads(); /* also: every read of a state's (m, l) above happens before the writes below */
        for (int f = tid; f < nqb * NC; f += NT) finish(f, f == tid, pf, s_w);""",
     """        __syncthreads(); /* also: every read of a state's (m, l) above happens before the writes below */
        if (tid == 0) neo__tl_s[4] = neo__gt();
        for (int f = tid; f < nqb * NC; f += NT) finish(f, f == tid, pf, s_w);"""),
    ("#define NEO__MMA_NQ 8\n", STAMPS + "#define NEO__MMA_NQ 8\n"),
    ("""    K k(p, unit, split, neo__smem, sh);
    k.start();
    int len = 0;
    if constexpr (K::SPEC) len = *p.len; /* requested beside q, used after it */
    float2         qv[K::KS][2];
    k.q_load(qv);
    k.rest(); /* issued behind q's loads, before q is needed */
    uint32_t       qf[K::QP][K::KS][2];
    const float    qdown = k.q_frags(qv, qf);
    if constexpr (K::SPEC) k.settle(len);
    const auto     q = k.lane_queries(qdown);""",
     """    unsigned long long tg[7] = {0, 0, 0, 0, 0, 0, 0}, c0 = 0, cl = 0;
    if (threadIdx.x == 0) {
        for (int i = 0; i < 5; i++) neo__tl_s[i] = 0;
        tg[0] = neo__gt(), c0 = clock64();
    }
    K k(p, unit, split, neo__smem, sh);
    k.start();
    if (threadIdx.x == 0) tg[1] = neo__gt();
    int len = 0;
    if constexpr (K::SPEC) len = *p.len; /* requested beside q, used after it */
    float2         qv[K::KS][2];
    k.q_load(qv);
    k.rest(); /* issued behind q's loads, before q is needed */
    uint32_t       qf[K::QP][K::KS][2];
    const float    qdown = k.q_frags(qv, qf);
    if constexpr (K::SPEC) k.settle(len);
    const auto     q = k.lane_queries(qdown);
    if (threadIdx.x == 0 && q.sce[0] != 1.2345f) tg[2] = neo__gt(), cl = clock64();"""),
    ("""        k.wait(j, stage);
        k.scores(ks, qf, sp);""",
     """        k.wait(j, stage);
        if (threadIdx.x == 0 && j == 0) tg[3] = neo__gt();
        k.scores(ks, qf, sp);"""),
    ("""    __syncthreads(); /* every warp is done with its ring: they become the epilogue's buffers */
    if constexpr (!K::EARLY) neo__pdl_trigger(); /* the next kernel waits for this grid's completion before touching memory */
    if (k.combine(acc, m, l)) {
        if (k.clustered()) k.merge_cluster();
        else k.merge();
    }
}""",
     """    __syncthreads(); /* every warp is done with its ring: they become the epilogue's buffers */
    if (threadIdx.x == 0 && l[0] != 1.2345f) tg[4] = neo__gt(), cl = clock64() - cl;
    if constexpr (!K::EARLY) neo__pdl_trigger(); /* the next kernel waits for this grid's completion before touching memory */
    const bool last = k.combine(acc, m, l);
    if (threadIdx.x == 0) tg[5] = neo__gt();
    if (last) {
        if (k.clustered()) k.merge_cluster();
        else k.merge();
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        tg[6] = neo__gt();
        const unsigned long long ct = clock64() - c0;
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        unsigned long long *r = neo__tl_buf[atomicAdd(&neo__tl_ctr, 1u) % NEO_TL_CAP];
        r[0] = tg[0];
        for (int i = 1; i < 7; i++) r[i] = tg[i] ? tg[i] - tg[0] : 0ull;
        r[7] = (unsigned long long)unit | ((unsigned long long)split << 16) | ((unsigned long long)last << 31) |
               ((unsigned long long)smid << 32) | ((unsigned long long)BPS << 48);
        r[8] = cl;
        r[9] = ct;
        for (int i = 0; i < 5; i++) r[10 + i] = neo__tl_s[i] ? neo__tl_s[i] - tg[0] : 0ull;
        r[15] = 0; /* spare */
    }
}"""),
]

BENCH_EDITS = [
    ("""static double time_forced(neo_layer **L, int n, int block_shape, int max_splits, int graph, int global) {
    forced_shape = block_shape, forced_cap = max_splits, forced_global = global, forced_bad = 0;
    const double t = time_ops(op_forced, L, n, graph);""",
     """void     neo__tl_reset(void);
unsigned neo__tl_get(unsigned long long *dst);
static double time_forced(neo_layer **L, int n, int block_shape, int max_splits, int graph, int global) {
    static int                tl_seq;
    static unsigned long long tl_buf[32768][16];
    forced_shape = block_shape, forced_cap = max_splits, forced_global = global, forced_bad = 0;
    neo__tl_reset();
    const double t = time_ops(op_forced, L, n, graph);
    if (max_splits == 0 && !global && getenv("TIMELINE_DIR")) {
        unsigned nrec = neo__tl_get(&tl_buf[0][0]);
        char     fn[512];
        snprintf(fn, sizeof fn, "%s/tl_%d_%d_%d.bin", getenv("TIMELINE_DIR"), tl_seq++, block_shape, graph);
        FILE *f = fopen(fn, "wb");
        if (f) fwrite(&nrec, 4, 1, f), fwrite(tl_buf, sizeof tl_buf, 1, f), fclose(f);
    }"""),
]


def edit(src, edits, name):
    for old, new in edits:
        if src.count(old) != 1:
            sys.exit("timeline: %s has changed: this anchor is not there once:\n%s" % (name, old.splitlines()[0]))
        src = src.replace(old, new)
    return src


def build(arch):
    os.makedirs(OUTD, exist_ok=True)
    cu = edit(open(os.path.join(ROOT, "neo_attn_cuda.cu")).read(), KERNEL_EDITS, "neo_attn_cuda.cu")
    bc = edit(open(os.path.join(ROOT, "examples", "bench", "bench.c")).read(), BENCH_EDITS, "examples/bench/bench.c")
    open(os.path.join(OUTD, "neo_attn_cuda.cu"), "w").write(cu)
    open(os.path.join(OUTD, "bench.c"), "w").write(bc)
    floors = os.path.join(ROOT, "build", "floors.o")
    if not os.path.exists(floors):
        sys.exit("timeline: build/floors.o is missing: make build/floors.o CUDA_ARCHS=%s" % arch)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    run = lambda cmd: subprocess.run(cmd, check=True)
    run(["nvcc", "-O3", "--threads", "0", "-gencode", "arch=compute_%s,code=sm_%s" % (arch, arch), "-I" + ROOT, "-c",
         os.path.join(OUTD, "neo_attn_cuda.cu"), "-o", os.path.join(OUTD, "neo_attn_cuda.o")])
    run(["cc", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-O3", "-g", "-I" + os.path.join(ROOT, "examples", "bench"), "-I" + ROOT,
         "-isystem", cuda + "/include", "-DNEO_ATTN_CUDA=1", '-DNEO_BENCH_COMMIT="timeline"', os.path.join(OUTD, "bench.c"),
         os.path.join(OUTD, "neo_attn_cuda.o"), floors, "-o", os.path.join(OUTD, "bench"), "-Wl,-rpath," + cuda + "/lib64",
         "-L" + cuda + "/lib64", "-lcudart", "-lstdc++", "-lm", "-lpthread"])
    print("timeline: built %s" % os.path.join(OUTD, "bench"))


def q(v, f):  # a quantile of sorted v
    return v[min(len(v) - 1, int(f * len(v)))]


def report_file(fn):
    b = open(fn, "rb").read()
    n = struct.unpack_from("<I", b, 0)[0]
    recs = [struct.unpack_from("<%dQ" % WORDS, b, 4 + i * 8 * WORDS) for i in range(min(n, CAP))]
    if not recs:
        return
    per = len({r[7] & 0x7fffffff for r in recs})  # (unit, split) pairs: a call's blocks
    recs.sort(key=lambda r: r[0])
    groups, seen = [[]], set()  # in entry order a call's blocks come together; a repeated (unit, split) starts the next call
    for r in recs:
        if (r[7] & 0x7fffffff) in seen:
            groups.append([])
            seen = set()
        seen.add(r[7] & 0x7fffffff)
        groups[-1].append(r)
    calls = [c for c in groups[1:-1] if len(c) == per]  # the ring's oldest call may be partial
    if len(calls) < 3:
        print("%s: too few whole calls" % os.path.basename(fn))
        return
    end = [max(r[0] + r[6] for r in c) for c in calls]
    period = sorted(end[i + 1] - end[i] for i in range(len(end) - 1))
    stamps = {"start": 0, "wait returned": 1, "q in registers": 2, "first tile landed": 3, "tiles done": 4, "combine done": 5,
              "block end": 6}
    since = {k: [] for k in list(stamps) + ["merge end"]}
    for i in range(1, len(calls)):
        for r in calls[i]:
            for k, j in stamps.items():
                if j == 0 or r[j]:
                    since[k].append(r[0] + (r[j] if j else 0) - end[i - 1])
            if (r[7] >> 31) & 1:
                since["merge end"].append(r[0] + r[6] - end[i - 1])
    clock = [r[9] / r[6] for r in recs if r[6] > 0]  # cycles / ns
    loop_cycles = sorted(r[8] for r in recs)
    sms = {(r[7] >> 32) & 0xffff for r in calls[len(calls) // 2]}
    print("%s: %d blocks a call (tensor-core shape BPS %d), %d calls, %d SMs a call" % (os.path.basename(fn), per, (recs[0][7] >> 48) & 0xff,
                                                                                  len(calls), len(sms)))
    print("  a call: %.2f us from one call's end to the next's (median; p10 %.2f, p90 %.2f); SM clock %.2f GHz; "
          "q to tiles done %.0f cycles (median)" % (statistics.median(period) / 1e3, q(period, 0.1) / 1e3, q(period, 0.9) / 1e3,
                                                    statistics.median(clock), statistics.median(loop_cycles)))
    print("  us after the previous call's end, median [p10, p90] over its blocks:")
    for k, v in since.items():
        if v:
            v.sort()
            print("    %-18s %7.2f [%7.2f, %7.2f]" % (k, statistics.median(v) / 1e3, q(v, 0.1) / 1e3, q(v, 0.9) / 1e3))
    # each block's own steps: wait -> q, q -> tiles done, tiles done -> combine done, combine done -> end (the merge)
    steps = {"q read": (1, 2), "tiles": (2, 4), "combine": (4, 5), "merge (merging blocks)": (5, 6),
             "combine: acc to shared": (4, 10), "combine: weights and the partial's stores": (10, 11),
             "combine: the arrival count": (11, 12), "combine: its barrier": (12, 5), "merge: loads in": (5, 13),
             "merge: weights": (13, 14), "merge: the sums and stores": (14, 6)}
    parts = []
    for k, (a, b) in steps.items():
        v = sorted(r[b] - r[a] for c in calls for r in c if r[a] and r[b] and (b != 6 or (r[7] >> 31) & 1))
        if v:
            parts.append("%s %.2f [%.2f, %.2f]" % (k, statistics.median(v) / 1e3, q(v, 0.1) / 1e3, q(v, 0.9) / 1e3))
    print("  us within a block, median [p10, p90]: " + ", ".join(parts))
    critical(calls, end)


def us(v):  # "median [p10, p90]" of ns values, in us
    v = sorted(v)
    return "%.2f [%.2f, %.2f]" % (statistics.median(v) / 1e3, q(v, 0.1) / 1e3, q(v, 0.9) / 1e3)


def critical(calls, end):
    """Which step makes a query tile's merging block (the last of its splits to arrive) last: for
    each stamp, how much later it is there than the median block of its tile, and how often it is
    the tile's latest; and the blocks that start after the previous call's end (end[i]: call i's)."""
    at = lambda r, j: r[0] + (r[j] if j else 0)  # a stamp in ns on the GPU's clock
    marks = [("start", 0), ("wait returned", 1), ("q in registers", 2), ("first tile landed", 3), ("tiles done", 4),
             ("arrival counted", 12)]
    late = {k: [] for k, _ in marks}
    latest = {k: 0 for k, _ in marks}
    spread = []  # last arrival - first arrival within a tile
    n = 0
    on_prev, off_prev = [], []  # start after the previous call's end: blocks on its merging SMs, the others
    ends = {True: [], False: []}  # a tile's merge end after the previous call's end: with a block that started after it, without
    which = {}  # (query tile, split): calls in which that block started after the previous call's end
    ended_late = 0  # calls whose last merge is a tile's with such a block
    prev_last = {}
    for i, c in enumerate(calls):
        tiles = {}
        for r in c:
            tiles.setdefault(r[7] & 0xffff, []).append(r)
        if i > 0:
            e = end[i - 1]
            for r in c:
                ((on_prev if ((r[7] >> 32) & 0xffff) in prev_last else off_prev)).append(r[0] - e)
                if r[0] > e:
                    k = (r[7] & 0xffff, (r[7] >> 16) & 0x7fff)
                    which[k] = which.get(k, 0) + 1
            tile_end = {}
            for u, blocks in tiles.items():
                late_start = any(r[0] > e for r in blocks)
                tile_end[u] = (max(at(r, 6) for r in blocks), late_start)
                ends[late_start].append(tile_end[u][0] - e)
            ended_late += max(tile_end.values())[1]
        prev_last = {(r[7] >> 32) & 0xffff for r in c if (r[7] >> 31) & 1}
        for blocks in tiles.values():
            m = [r for r in blocks if (r[7] >> 31) & 1]
            if len(m) != 1 or any(not r[12] for r in blocks):
                continue
            m = m[0]
            n += 1
            arr = sorted(at(r, 12) for r in blocks)
            spread.append(arr[-1] - arr[0])
            for k, j in marks:
                if j and not all(r[j] for r in blocks):
                    continue
                v = sorted(at(r, j) for r in blocks)
                late[k].append(at(m, j) - statistics.median(v))
                latest[k] += at(m, j) == v[-1]
    if not n:
        return
    print("  the merging block of a query tile against its tile's median block (us, median [p10, p90]; how often it is the latest):")
    for k, _ in marks:
        v = sorted(late[k])
        if v:
            print("    %-18s %+6.2f [%+6.2f, %+6.2f]  latest in %3.0f%%" % (k, statistics.median(v) / 1e3, q(v, 0.1) / 1e3,
                                                                          q(v, 0.9) / 1e3, 100.0 * latest[k] / len(v)))
    print("    first to last arrival within a tile %s us over %d tiles" % (us(spread), n))
    for name, v in (("on the SMs where the previous call merged", on_prev), ("on the others", off_prev)):
        if v:
            print("  blocks %s: %d, start %s us after the previous call's end, %.0f%% after it" %
                  (name, len(v), us(v), 100.0 * sum(x > 0 for x in v) / len(v)))
    for late_start in (True, False):
        v = ends[late_start]
        if v:
            print("  query tiles %s a block that started after the previous call's end: %d, their merge ends %s us after it" %
                  ("with" if late_start else "without", len(v), us(v)))
    print("  calls whose last merge was a tile's with such a block: %d of %d" % (ended_late, len(calls) - 1))
    top = sorted(which.items(), key=lambda kv: -kv[1])[:6]
    print("  the blocks (query tile, split) that most often started after it: " + ", ".join("%s in %d calls" % kv for kv in top))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "build":
        arch = sys.argv[sys.argv.index("--arch") + 1] if "--arch" in sys.argv else "90"
        build(arch)
    elif len(sys.argv) == 3 and sys.argv[1] == "report":
        for fn in sorted(glob.glob(os.path.join(sys.argv[2], "tl_*.bin"))):
            report_file(fn)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
