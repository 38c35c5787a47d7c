/* bench.c - neo_attn on a GPU machine: ceilings, attention rows, the decode loop, capacity
   (a benchmark, not a test). Every figure is printed with the bound it is held to,
   and the bounds come from ceilings measured in the same run.

   BUILD AND RUN
   -------------
       make bench-gpu                  builds build/bench (needs nvcc; links build/neo_attn_cuda.o)
       build/bench [--quick] [--csv FILE] [--sections attn,batch,app,e2e,cap,sweep] [--threads N] [--seconds S]
                   [--cap-ctx N] [--cap-host-heads H] [--e2e-ctx N] [--sweep-ctx N] [--sweep-qwen] [--gpu-reserve-gib G]
                   [--hybrid-share F]
       --quick      a small subset (contexts 4k and 32k, a 256-token decode loop, a 128k capacity row)
       --sections   which of attn, batch, app, e2e, cap to run (the ceilings always run: every bound needs them);
                    sweep (never run by default) times one Llama-3-8B layer's GPU decode at 256-64k cells for
                    every tensor-core block shape and split cap, the planner overridden (its own shape
                    also from a CUDA graph, and from a graph with the splits merged through global
                    memory), and the floors a call of that size meets (a 4-byte memset, a copy of
                    the layer's bytes, and kernels that do only the call's dataflow, its reads and
                    the merge of its splits, on its grid, and one with the arithmetic too, checked
                    against float64: examples/bench/floors.cu; eager and from a graph, back to
                    back); --sweep-ctx N sweeps that one context instead,
                    --sweep-qwen the Qwen2.5-0.5B layer instead
       --threads    CPU attention threads, in the CPU runtime and in the GPU runtime's pool, and the
                    thread count of the DRAM read ceiling (default: online cores)
       --seconds    timing budget of one attention row (default 0.35; --quick 0.12)
       --csv FILE   also write every row as CSV (machine, date and commit on '#' lines first)
       --cap-ctx N  the capacity row's context (default: the smallest of at least 1M tokens, in 64k
                    steps, whose cache does not fit the GPU's free memory less the reserve)
       --cap-host-heads H   H of the 8 KV heads of every capacity layer on the host (default: as
                    neo_plan_gpu_heads places them, as many on the GPU as fit)
       --gpu-reserve-gib G  GPU memory the capacity row leaves free (default 4)
       --hybrid-share F     the hybrid rows' CPU share, 0 < F < 1 (default: the CPU's part of the
                    joint CPU + copy read ceiling); their bounds stay the joint ceiling's
   The whole run takes about two minutes on the H200 machine (16 cores, 128 GiB RAM).

   WHAT EACH SECTION MEASURES
   --------------------------
   ceil  Each ceiling is the best of its samples (bench_util.h's best: the most the machine did),
         the rows medians. HBM device-to-device copy (cudaMemcpyAsync, bytes read + written /
         time, 2 GiB buffers, best of 10, cudaEvents); pinned H2D and D2H (1 GiB, best of 5), and
         pinned H2D of one 1 MiB copy (best of 16: what a short context's stream-back moves);
         pageable H2D (1 GiB, best of 3); host DRAM read with the CPU-attention thread count (the
         pthreads sum a 4 GiB buffer in 1 MiB pieces taken from a shared counter, as the pool
         takes its tasks, reading 4 KiB ahead as the attention kernels do; best of 7;
         bench_util.h) and with one thread; the host's FMA rate with that thread count (16
         register-only FMA chains a thread in AVX-512 or AVX2 vectors, GFLOP/s, best of 5;
         bench_util.h); the CPU and the copy engine reading host memory at the same time (the
         readers on a 512 MiB pinned buffer while 8 back-to-back pinned H2D copies run; each
         side's rate over its window, the rep of 3 with the largest sum; the sum is the hybrid's
         ceiling, and the CPU's part of it the hybrid rows' CPU share); DRAM read again at the
         end. The host's rates drift by 10-30% within a run, so each attn and cap row with a host
         side is held to samples taken just before and just after it instead (best of 3 DRAM
         reads each time, and for hybrid and auto rows one joint sample of 2 copies each time;
         its note gives them; the capacity hybrid row: the joint ceiling sampled at the section's
         start); the bat and e2e rows use the start's ceilings.
   attn  One layer's decode (neo_attn_decode, q and out in device memory, public API) for Llama-3-8B
         (32 q / 8 kv heads, d 128) and Qwen2.5-0.5B (14 q / 2 kv, d 64) shapes, f16 KV, contexts
         4k, 32k, 128k (and 512k for GPU-only). Modes:
           gpu        every head on the GPU; back-to-back calls timed with cudaEvents on the engine
                      stream (ours, passed as gpu_stream)
           gpu-graph  the same calls captured once into a CUDA graph and replayed (no launch gaps)
           cpu        a CPU runtime (--threads threads), host q/out, wall clock
           off-F      split, fraction F of the KV heads on the host, pipeline OFF (stream-back)
           on-F       split, pipeline ON (both halves at once)
           hybrid-F   split, pipeline HYBRID at the CPU share of the joint ceiling
           auto-F     split, pipeline AUTO (every layer's probes run before the row is timed; the note
                      says how many layers chose each mode)
         Split and CPU rows: back-to-back calls, wall clock with a final stream sync. Calls rotate
         over enough layers that the GPU side holds >= 256 MiB and the host side >= 2x the LLC
         (at most 512 layers), so neither the 60 MB L2 nor the CPU's LLC holds the KV. Each row:
         median over repetitions of the per-call time, GB/s = KV bytes read per call / time, and
         the bound (the time the row could take at the ceilings) with ratio = bound / time:
           gpu       KV bytes / HBM copy rate           cpu   KV bytes / DRAM read
           on        max(GPU half / HBM, host half / DRAM read)
           off       max(host half / pinned H2D, both halves / HBM): the copies run beside the
                     GPU half, and the GPU reads the streamed cells too
           hybrid    max(GPU half / HBM, host half / the CPU + DMA joint read)
           auto      the smallest of the three
         The ratios are against these bounds; cpu and on rows also note the host heads' FMA bound
         (their 2 (d + dv) flops a query head and cell at the FMA ceiling); a row short of both
         bounds is held back by its kernel's instruction mix or by the orchestration.
         Notes: on rows time each half alone on the same layers (the device heads' attention on
         the engine stream; the host heads' CPU attention from host q, through library internals)
         and give join = time - max(the two), the orchestration's cost beyond the slower half (ON's
         CPU tasks prefetch their rows while they wait for the queries, which the half timed alone
         cannot: a join below zero is that);
         off rows give the rate the host bytes moved at over the whole call.
   bat   Many sequences of one model layer a step (Llama-3-8B shapes, f16): 64 x 4k, 16 x 32k, and
         64 sequences of lengths drawn uniformly from 512 to 32k (the ctx column is the longest).
         One step = neo_attn_decode_batch over the n layers (one per sequence), median over steps:
         cudaEvents around a step where every head is on the GPU, else wall clock with a
         neo_runtime_sync. Modes: gpu-batch (every head on the GPU), gpu-loop
         (the same layers, n single neo_attn_decode calls a step), on-1/8, off-1/8 and hybrid-1/8
         (one KV head of each sequence on the host; the hybrid at the joint ceiling's CPU share),
         auto-1/8 (AUTO, each layer's probes run as single calls before the batch is timed; the
         note says what the layers chose), on-1/8-loop and hybrid-1/8-loop (single calls),
         none-1/4-on (every fourth sequence with all its heads on the host, NEO_GPU_HEADS_NONE,
         the rest on the GPU). Split rows' steps rotate over copies of the batch, as a model's
         step passes through its other layers, enough that the host side is >= 2x the LLC (and
         256 MiB); the note says how many. Bounds as for the attn rows, over the batch's bytes.
         ON rows note each half alone (medians of 15: the device halves in one varlen launch
         through library internals, the host halves as one pool job) and the join, the step's
         time beyond the slower half. Batched hybrid rows note their parts alone (medians of 15): the device heads'
         launch, every layer's host cells after its cut brought to the device as the batch does
         (read in place in one launch where they fit the bound, else copied as its stream-back
         copies them, back to back), and the CPU cells before it.
   app   The appends of a step of 64 sequences (one Llama-3-8B layer of
         4096 cells each, every head on the GPU): app-batch (one neo_attn_append_batch) against
         app-loop (64 neo_attn_append), and a whole attention step, step-batch (the batch append
         and neo_attn_decode_batch) against step-loop (each layer's append and decode); each eager
         (cudaEvents, median of 20 steps) and -graph (captured once, replayed, with the graph's
         kernel count). Every step appends a row, so the layers grow from 4096 cells over the rows
         (the ctx column: the mean length at the row's start). Step rows are held to the decode's
         KV bytes at the copy rate, at the row's mean length; append rows have no bound.
   e2e   The decode loop: neo_model from a synthetic llama2.c checkpoint built in memory with
         random weights of Qwen2.5-0.5B shapes (dim 896, hidden 4864, 24 layers, 14 heads, 2 kv
         heads, vocab 32000, f32 weights as llama2.c stores them), a session with f16 KV, 4096
         tokens stepped to fill the cache (the session API has no bulk append), then 128 tokens
         timed, the runs' sessions stepping in blocks of 16 in turn so that they share the same
         minutes of the host (each step's argmax moved on by a fixed offset sequence, the same in
         every run, because random weights repeat one token; the argmaxes are compared with B's):
           B  no split                       M  split 1/2, pipeline OFF (stream-back)
           N  split 1/2, pipeline ON         O  no split, mini-chat's --neo-pipeline off (as
                                                tests/gpu_check.sh checks it: the same as B; a
                                                split with the pipeline off is M)
           H  split 1/2, pipeline HYBRID at the joint ceiling's CPU share
           BG B with neo_session_desc.graphs: each step replayed from the session's CUDA graph
           MG M from a CUDA graph: the host heads read in place over the bus
           NG N from a CUDA graph: each layer rings the runtime's listener, which attends the host
              heads on the pool; its note gives one layer's CPU half timed alone, what a ring
              costs beyond it being the handoff
           HG H from a CUDA graph: each layer rings the listener, which attends the host heads'
              cells before the cut, while the GPU reads the rest in place over the bus
         Bound per token: weights + KV bytes over the HBM rate; for splits the host half over
         pinned H2D (M), over DRAM read per layer alongside the GPU half (N), or over the CPU + DMA
         joint read alongside it (H), as for the attention rows. The note gives the median step
         and, of it, the host's time to enqueue the forward pass (launches, and the CPU halves the
         caller takes part in): when the two are close, the host sets the pace.
   cap   Capacity: 32 layers of Llama-3-8B shapes, attention only, at the smallest context >= 1M
         tokens (in 64k steps) whose f16 KV does not fit in the GPU's free memory less a reserve;
         as many KV heads on the GPU as fit, placed by neo_plan_gpu_heads (host heads spread evenly:
         layers differ by at most one), the rest pinned on the host. Filled with neo_attn_append in 16k-token batches of one random batch (the fill
         is timed). One step = neo_attn_decode on each of the 32 layers; pipeline ON, then the same
         layers with the pipeline switched to OFF (the layer's pipeline field, which AUTO switches
         the same way), then to HYBRID at the joint ceiling's CPU share (bound: the host half over
         the joint read), then CPU-only for the whole cache on a CPU runtime: one layer measured,
         times 32 (the whole cache cannot be held in the host's 128 GiB as well).

   Compile with -DNEO_BENCH_COMMIT='"abc1234"' (make bench-gpu does) to stamp the commit. */

#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include "examples/bench/bench_util.h"
#include "examples/bench/floors.h"

#include <cuda_runtime_api.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef NEO_BENCH_COMMIT
#define NEO_BENCH_COMMIT "unknown"
#endif

#define GiB ((size_t)1 << 30)
#define MiB ((size_t)1 << 20)
#define FILL_TOKENS 16384 /* tokens per neo_attn_append while filling */
#define MAX_LAYERS 512    /* layers an attention row rotates over, at most */
#define E2E_BLOCK 16      /* e2e: steps a session takes before the next one steps */
#define L2_BYTES (60 * MiB)

/* --- small helpers --- */

static void die(const char *what, const char *why) {
    fprintf(stderr, "bench: %s: %s\n", what, why);
    exit(1);
}
static void check(neo_status s, const char *what) {
    if (s != NEO_OK) die(what, neo_status_string(s));
}
#define CU(x) cu_check((x), #x, __LINE__)
static void cu_check(cudaError_t e, const char *what, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "bench: line %d: %s: %s\n", line, what, cudaGetErrorString(e));
        exit(1);
    }
}
static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("malloc", "out of memory");
    return p;
}
/* uniform floats in [-scale, scale), filled by several threads (each its own xorshift64*) */
typedef struct fill_job {
    float   *p;
    size_t   n;
    float    scale;
    uint64_t seed;
} fill_job;
static void *fill_worker(void *arg) {
    fill_job *j = (fill_job *)arg;
    uint64_t  s = j->seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    for (size_t i = 0; i < j->n; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        uint64_t r = s * 0x2545F4914F6CDD1Dull;
        j->p[i] = ((float)(r >> 40) * (2.0f / 16777216.0f) - 1.0f) * j->scale;
    }
    return NULL;
}
static void fill_uniform(float *p, size_t n, float scale, uint64_t seed) {
    enum { T = 16 };
    pthread_t th[T];
    fill_job  jobs[T];
    size_t    per = (n + T - 1) / T;
    int       started[T] = {0};
    for (int t = 0; t < T; t++) {
        size_t lo = per * (size_t)t < n ? per * (size_t)t : n, hi = lo + per < n ? lo + per : n;
        jobs[t].p = p + lo;
        jobs[t].n = hi - lo;
        jobs[t].scale = scale;
        jobs[t].seed = seed * 131 + (uint64_t)t + 1;
        started[t] = pthread_create(&th[t], NULL, fill_worker, &jobs[t]) == 0;
        if (!started[t]) fill_worker(&jobs[t]);
    }
    for (int t = 0; t < T; t++)
        if (started[t]) pthread_join(th[t], NULL);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd_u32(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545F4914F6CDD1Dull) >> 32);
}

/* --- machine description --- */

static size_t meminfo_kb(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char               line[256];
    unsigned long long kb = 0;
    size_t             kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            kb = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return (size_t)kb;
}

/* --- options, rows and output --- */

typedef struct options {
    int         quick, threads, attn, batch, app, e2e, cap, sweep, cap_ctx, e2e_ctx, sweep_ctx, sweep_qwen, cap_host;
    double      seconds, reserve_gib;
    double      share;                /* --hybrid-share: the hybrid rows' CPU share (0: the joint ceiling's) */
    const char *csv_path;
} options;
static options opt;

typedef struct ceilings {
    double hbm, h2d, h2d_1m, d2h, h2d_pageable, dram, dram_1t, dram_end, fma; /* GB/s; fma GFLOP/s (0: unknown) */
    double joint_cpu, joint_dma, joint; /* GB/s of the CPU and the copy engine reading host memory together, and their sum */
    float  share;                       /* the CPU's part of the joint rate: the hybrid rows' cpu_share */
} ceilings;
static ceilings C;

typedef struct brow {
    char   section[8], shape[16], mode[20], note[320];
    long   ctx;
    int    layers, calls;
    double us, gbs, bound_us, ratio, kv_bytes, gpu_bytes, host_bytes;
} brow;
#define MAX_ROWS 256
static brow  rows[MAX_ROWS];
static int   n_rows;
static FILE *csv;

static brow row_new(const char *section, const char *shape, long ctx, const char *mode) {
    brow r;
    memset(&r, 0, sizeof r);
    snprintf(r.section, sizeof r.section, "%s", section);
    snprintf(r.shape, sizeof r.shape, "%s", shape);
    snprintf(r.mode, sizeof r.mode, "%s", mode);
    r.ctx = ctx;
    r.us = r.gbs = r.bound_us = r.ratio = NAN;
    return r;
}

/* A row of `layers` layers timed at sec seconds a call or step, moving gb bytes of KV on the GPU
   and hb on the host; the bound and note are the caller's. */
static brow timed_row(const char *section, const char *shape, long ctx, const char *mode, int layers, int calls, double sec, double gb,
                      double hb) {
    brow r = row_new(section, shape, ctx, mode);
    r.layers = layers;
    r.calls = calls;
    r.us = sec * 1e6;
    r.kv_bytes = gb + hb;
    r.gpu_bytes = gb;
    r.host_bytes = hb;
    r.gbs = (gb + hb) / sec * 1e-9;
    return r;
}

static void print_header(void) {
    printf("%-4s %-12s %8s %-10s %6s %6s %11s %9s %11s %6s  %s\n", "sect", "shape", "ctx", "mode", "layers", "calls",
           "us", "GB/s", "bound_us", "ratio", "note");
}

static void emit(brow *r) {
    if (r->us > 0 && r->bound_us > 0) r->ratio = r->bound_us / r->us;
    printf("%-4s %-12s %8ld %-10s %6d %6d %11.1f %9.1f %11.1f %6.3f  %s\n", r->section, r->shape, r->ctx, r->mode, r->layers,
           r->calls, r->us, r->gbs, r->bound_us, r->ratio, r->note);
    fflush(stdout);
    if (n_rows < MAX_ROWS) rows[n_rows++] = *r;
    if (csv) {
        fprintf(csv, "%s,%s,%ld,%s,%d,%d,%.3f,%.3f,%.3f,%.4f,%.0f,%.0f,%.0f,\"%s\"\n", r->section, r->shape, r->ctx, r->mode,
                r->layers, r->calls, r->us, r->gbs, r->bound_us, r->ratio, r->kv_bytes, r->gpu_bytes, r->host_bytes, r->note);
        fflush(csv);
    }
}

/* unit: "GB/s", or "GFLOP/s" for the FMA ceiling (the CSV's gbs column holds either) */
static void ceiling_row(const char *name, double gbs, const char *unit, const char *note) {
    brow r = row_new("ceil", "-", 0, name);
    r.gbs = gbs;
    snprintf(r.note, sizeof r.note, "%s", note);
    printf("%-4s %-26s %9.1f %-7s %s\n", "ceil", name, gbs, unit, note);
    fflush(stdout);
    if (n_rows < MAX_ROWS) rows[n_rows++] = r;
    if (csv) {
        fprintf(csv, "ceil,-,0,%s,0,0,nan,%.3f,nan,nan,0,0,0,\"%s\"\n", name, gbs, note);
        fflush(csv);
    }
}

/* ===============================================================================================
   ceilings
   =============================================================================================== */

static double hbm_copy_rate(size_t bytes, int reps, cudaStream_t st) {
    void       *a, *b;
    cudaEvent_t e0, e1;
    double      t[32];
    CU(cudaMalloc(&a, bytes));
    CU(cudaMalloc(&b, bytes));
    CU(cudaMemsetAsync(a, 0x3C, bytes, st));
    CU(cudaMemsetAsync(b, 0xBC, bytes, st));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int i = 0; i < 2; i++) CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
    if (reps > 32) reps = 32;
    for (int r = 0; r < reps; r++) {
        float ms;
        CU(cudaEventRecord(e0, st));
        CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
        CU(cudaEventRecord(e1, st));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = ms * 1e-3;
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    CU(cudaFree(a));
    CU(cudaFree(b));
    for (int r = 0; r < reps; r++) t[r] = 2.0 * (double)bytes / t[r] * 1e-9;
    return best(t, reps);
}

/* GB/s of host <-> device copies of `bytes` (host: pinned or pageable), the best of reps */
static double pcie_rate(void *host, void *dev, size_t bytes, int to_device, int reps, cudaStream_t st) {
    cudaEvent_t e0, e1;
    double      t[16];
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    if (reps > 16) reps = 16;
    for (int r = -1; r < reps; r++) {
        float ms;
        CU(cudaEventRecord(e0, st));
        if (to_device) CU(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, st));
        else CU(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, st));
        CU(cudaEventRecord(e1, st));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) t[r] = ms * 1e-3;
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    for (int r = 0; r < reps; r++) t[r] = (double)bytes / t[r] * 1e-9;
    return best(t, reps);
}

static bw_state     bw; /* the DRAM read ceiling (bench_util.h), kept for the rows' samples and the end-of-run one */
static cudaStream_t stream;

/* The hybrid's ceiling: the CPU threads read a pinned buffer (whole passes, bench_util.h's
   readers) while the copy engine copies another pinned buffer to the device, k copies back to
   back; the CPU reads until the last copy is done. Each side's rate over its own window (the CPU's
   overruns the copies by less than one pass, a few percent of the window); the joint rate is the
   best rep's sum, and the CPU's part of it is the share that has both sides finish together. The
   buffers stay allocated from the ceilings to the capacity section, so that the split rows can
   sample the ceiling again around themselves (host_sample). */
static struct {
    void       *src, *dev, *cbuf; /* [pb] pinned, [pb] device, [cb] pinned the CPU reads */
    size_t      pb, cb;
    bw_state    jb;
    cudaEvent_t e0, e1;
} JB;
static void joint_open(void) {
    JB.pb = opt.quick ? 512 * MiB : GiB, JB.cb = 512 * MiB;
    CU(cudaHostAlloc(&JB.src, JB.pb, cudaHostAllocPortable));
    CU(cudaHostAlloc(&JB.cbuf, JB.cb, cudaHostAllocPortable));
    memset(JB.src, 0x3C, JB.pb);
    CU(cudaMalloc(&JB.dev, JB.pb));
    if (bw_init_on(&JB.jb, JB.cbuf, JB.cb, opt.threads)) exit(1);
    CU(cudaEventCreate(&JB.e0));
    CU(cudaEventCreate(&JB.e1));
    (void)bw_read(&JB.jb, 0);
    CU(cudaMemcpyAsync(JB.dev, JB.src, JB.pb, cudaMemcpyHostToDevice, stream));
    CU(cudaStreamSynchronize(stream));
}
/* the best of reps samples of k copies each: *cpu + *dma GB/s */
static void joint_sample(int k, int reps, double *cpu, double *dma) {
    *cpu = *dma = 0;
    for (int r = 0; r < reps; r++) {
        double cpu_bytes = 0, t0, tc, td;
        float  ms;
        CU(cudaEventRecord(JB.e0, stream));
        for (int i = 0; i < k; i++) CU(cudaMemcpyAsync(JB.dev, JB.src, JB.pb, cudaMemcpyHostToDevice, stream));
        CU(cudaEventRecord(JB.e1, stream));
        t0 = now_s();
        do {
            (void)bw_read(&JB.jb, 0);
            cpu_bytes += (double)JB.cb;
        } while (cudaEventQuery(JB.e1) == cudaErrorNotReady);
        tc = cpu_bytes / (now_s() - t0) * 1e-9;
        CU(cudaEventSynchronize(JB.e1));
        CU(cudaEventElapsedTime(&ms, JB.e0, JB.e1));
        td = (double)k * (double)JB.pb / (ms * 1e-3) * 1e-9;
        if (tc + td > *cpu + *dma) *cpu = tc, *dma = td;
    }
}
static void joint_close(void) {
    if (!JB.src) return;
    CU(cudaEventDestroy(JB.e0));
    CU(cudaEventDestroy(JB.e1));
    bw_destroy(&JB.jb);
    CU(cudaFree(JB.dev));
    CU(cudaFreeHost(JB.src));
    CU(cudaFreeHost(JB.cbuf));
    JB.src = NULL;
}
static void joint_ceiling(void) {
    const int k = 8, reps = opt.quick ? 2 : 3;
    char      note[200];
    joint_open();
    joint_sample(k, reps, &C.joint_cpu, &C.joint_dma);
    C.joint = C.joint_cpu + C.joint_dma;
    C.share = opt.share > 0 ? (float)opt.share : (float)(C.joint_cpu / C.joint);
    snprintf(note, sizeof note, "%d CPU threads on %zu MiB pinned at %.1f + H2D of %d x %zu MiB pinned at %.1f, together; "
             "best of %d", opt.threads, JB.cb >> 20, C.joint_cpu, k, JB.pb >> 20, C.joint_dma, reps);
    ceiling_row("cpu_dma_read", C.joint, "GB/s", note);
}

/* The host's ceilings around one row: the host drifts by 10-30% over a run, so a row held to its
   read rate is held to samples taken just before and just after it (best of them), not to the
   start's. dram: 3 reads of the DRAM buffer each time; joint (where asked, while the buffers are
   open): one sample of 2 copies. Zeros until sampled. */
typedef struct host_ceil {
    double dram, joint;
} host_ceil;
static void host_sample(host_ceil *h, int joint) {
    double d = bw_best(&bw, 0, 3), c, m;
    if (d > h->dram) h->dram = d;
    if (joint && JB.src) {
        joint_sample(2, 1, &c, &m);
        if (c + m > h->joint) h->joint = c + m;
    }
}

static void measure_ceilings(cudaStream_t st) {
    char   note[200];
    size_t hb = opt.quick ? GiB : 2 * GiB, pb = opt.quick ? 512 * MiB : GiB;
    double t0;
    C.hbm = hbm_copy_rate(hb, 10, st);
    snprintf(note, sizeof note, "cudaMemcpyAsync D2D %zu MiB, (read + write) / time, best of 10", hb >> 20);
    ceiling_row("hbm_copy", C.hbm, "GB/s", note);

    void *pinned, *dev, *pageable;
    t0 = now_s();
    CU(cudaHostAlloc(&pinned, pb, cudaHostAllocPortable));
    memset(pinned, 0x3C, pb);
    double t_pin = now_s() - t0;
    CU(cudaMalloc(&dev, pb));
    CU(cudaMemset(dev, 0x3C, pb));
    C.h2d = pcie_rate(pinned, dev, pb, 1, 5, st);
    snprintf(note, sizeof note, "%zu MiB pinned -> device, best of 5 (pinning took %.2f s)", pb >> 20, t_pin);
    ceiling_row("h2d_pinned", C.h2d, "GB/s", note);
    /* what a stream-back of short contexts moves at once (it is not any row's bound) */
    C.h2d_1m = pcie_rate(pinned, dev, MiB, 1, 16, st);
    ceiling_row("h2d_pinned_1m", C.h2d_1m, "GB/s",
                "1 MiB pinned -> device, one copy between two events, best of 16: a Llama-3-8B KV head's K or V at 4k, "
                "one copy of a stream-back there");
    C.d2h = pcie_rate(pinned, dev, pb, 0, 5, st);
    snprintf(note, sizeof note, "%zu MiB device -> pinned, best of 5", pb >> 20);
    ceiling_row("d2h_pinned", C.d2h, "GB/s", note);
    CU(cudaFreeHost(pinned));
    pageable = xmalloc(pb);
    memset(pageable, 0x3C, pb);
    C.h2d_pageable = pcie_rate(pageable, dev, pb, 1, 3, st);
    snprintf(note, sizeof note, "%zu MiB malloc'd -> device, best of 3", pb >> 20);
    ceiling_row("h2d_pageable", C.h2d_pageable, "GB/s", note);
    free(pageable);
    CU(cudaFree(dev));

    size_t db = 4 * GiB;
    t0 = now_s();
    if (bw_init(&bw, db, opt.threads)) exit(1);
    double t_touch = now_s() - t0;
    (void)bw_read(&bw, 0);
    C.dram = bw_best(&bw, 0, opt.quick ? 5 : 7);
    snprintf(note, sizeof note, "%d threads, 1 MiB pieces of %zu GiB, best of %d (first touch %.2f s)", opt.threads, db >> 30,
             opt.quick ? 5 : 7, t_touch);
    ceiling_row("dram_read", C.dram, "GB/s", note);
    C.dram_1t = bw_best(&bw, 1, 3);
    ceiling_row("dram_read_1t", C.dram_1t, "GB/s", "1 thread, best of 3");
    C.fma = fma_gflops(opt.threads, 5);
    snprintf(note, sizeof note, "%d threads, 16 FMA chains each in %s registers, best of 5", opt.threads,
             fma_lanes() == 16 ? "AVX-512" : "AVX2");
    if (C.fma > 0) ceiling_row("cpu_fma", C.fma, "GFLOP/s", note);
    joint_ceiling();
}

/* ===============================================================================================
   attention rows
   =============================================================================================== */

typedef struct shape {
    const char *name;
    int         n_head, n_kv, d;
} shape;
static const shape LLAMA = {"llama3-8b", 32, 8, 128};
static const shape QWEN = {"qwen2.5-0.5b", 14, 2, 64};

static size_t kv_layer_bytes(const shape *s, long ctx) { return (size_t)ctx * (size_t)s->n_kv * 2 * (size_t)s->d * 2; }

/* A layer of shape s with an f16 cache of ctx cells, gpu_heads KV heads on the GPU (0 = all). */
static neo_layer_desc shape_desc(const shape *s, long ctx, int gpu_heads, neo_pipeline pipe) {
    neo_layer_desc d;
    memset(&d, 0, sizeof d);
    d.n_head = s->n_head;
    d.n_head_kv = s->n_kv;
    d.head_dim = s->d;
    d.n_ctx = (int)ctx;
    d.kv_type = NEO_TYPE_F16;
    d.gpu_heads = gpu_heads;
    d.pipeline = pipe;
    return d;
}

/* the random K/V batch every fill appends, in device and host memory; and q / out */
static float *dK, *dV, *hK, *hV, *dq, *dout, *hq, *hout;
static size_t batch_floats; /* FILL_TOKENS * 8 * 128 */

static void batch_init(void) {
    batch_floats = (size_t)FILL_TOKENS * 8 * 128;
    hK = (float *)xmalloc(batch_floats * sizeof(float));
    hV = (float *)xmalloc(batch_floats * sizeof(float));
    fill_uniform(hK, batch_floats, 1.0f, 11);
    fill_uniform(hV, batch_floats, 1.0f, 12);
    CU(cudaMalloc((void **)&dK, batch_floats * sizeof(float)));
    CU(cudaMalloc((void **)&dV, batch_floats * sizeof(float)));
    CU(cudaMemcpy(dK, hK, batch_floats * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dV, hV, batch_floats * sizeof(float), cudaMemcpyHostToDevice));
    size_t qn = 32 * 128;
    hq = (float *)xmalloc(qn * sizeof(float));
    hout = (float *)xmalloc(qn * sizeof(float));
    fill_uniform(hq, qn, 1.0f, 13);
    CU(cudaMalloc((void **)&dq, qn * sizeof(float)));
    CU(cudaMalloc((void **)&dout, qn * sizeof(float)));
    CU(cudaMemcpy(dq, hq, qn * sizeof(float), cudaMemcpyHostToDevice));
}

/* ctx tokens appended in FILL_TOKENS batches (device batch on a GPU runtime, host on a CPU one) */
static void fill_layer(neo_layer *L, const shape *s, long ctx, int gpu) {
    long per = (long)(batch_floats / ((size_t)s->n_kv * (size_t)s->d));
    if (per > FILL_TOKENS) per = FILL_TOKENS;
    for (long pos = 0; pos < ctx; pos += per) {
        int n = (int)(ctx - pos < per ? ctx - pos : per);
        check(neo_attn_append(L, gpu ? dK : hK, gpu ? dV : hV, n), "neo_attn_append");
    }
}

static long long overlapped(neo_layer **L, int n) {
    long long s = 0;
    for (int i = 0; i < n; i++) {
        neo_layer_info li;
        check(neo_layer_get_info(L[i], &li), "neo_layer_get_info");
        s += li.n_overlapped;
    }
    return s;
}

static void check_out(int gpu, int n) {
    if (gpu) CU(cudaMemcpy(hout, dout, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (!isfinite(hout[i])) die("decode", "non-finite output");
}

/* Median seconds per call over repetitions of back-to-back calls rotating over L[0..n).
   events = 1: cudaEvents on st around the calls; else wall clock with a final stream sync. */
static double time_calls(neo_layer **L, int n, const float *q, float *out, int events, cudaStream_t st, int warm,
                         int *calls_out) {
    cudaEvent_t e0, e1;
    double      t[64];
    int         per = n < 8 ? 8 : n, reps = 0, next = 0;
    for (int i = 0; i < warm; i++) check(neo_attn_decode(L[i % n], q, out), "neo_attn_decode");
    CU(cudaStreamSynchronize(st));
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    double t_end = now_s() + opt.seconds;
    while (reps < 64 && (reps < 5 || (now_s() < t_end && reps < 40))) {
        double w0 = now_s();
        if (events) CU(cudaEventRecord(e0, st));
        for (int i = 0; i < per; i++) check(neo_attn_decode(L[next++ % n], q, out), "neo_attn_decode");
        if (events) {
            float ms;
            CU(cudaEventRecord(e1, st));
            CU(cudaEventSynchronize(e1));
            CU(cudaEventElapsedTime(&ms, e0, e1));
            t[reps++] = ms * 1e-3 / per;
        } else {
            CU(cudaStreamSynchronize(st));
            t[reps++] = (now_s() - w0) / per;
        }
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    *calls_out = reps * per;
    return median(t, reps);
}

/* Seconds a replay of ge on st: two warm-up replays, then cudaEvents around each, median;
   *reps_out (or NULL) the replays timed. */
static double replay_median(cudaGraphExec_t ge, cudaStream_t st, int *reps_out) {
    cudaEvent_t e0, e1;
    double      t[64];
    int         reps = 0;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int i = 0; i < 2; i++) CU(cudaGraphLaunch(ge, st));
    double t_end = now_s() + opt.seconds * 0.5;
    while (reps < 64 && (reps < 5 || (now_s() < t_end && reps < 30))) {
        float ms;
        CU(cudaEventRecord(e0, st));
        CU(cudaGraphLaunch(ge, st));
        CU(cudaEventRecord(e1, st));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        t[reps++] = ms * 1e-3;
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    if (reps_out) *reps_out = reps;
    return median(t, reps);
}

/* The same calls captured into a CUDA graph, replayed; < 0 if capture failed. */
static double time_graph(neo_layer **L, int n, cudaStream_t st, int *calls_out) {
    cudaGraph_t     g = NULL;
    cudaGraphExec_t ge = NULL;
    int             per = n < 8 ? 8 : n, reps = 0, ok = 1;
    CU(cudaStreamSynchronize(st));
    if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    for (int i = 0; i < per && ok; i++) ok = neo_attn_decode(L[i % n], dq, dout) == NEO_OK;
    if (cudaStreamEndCapture(st, &g) != cudaSuccess || !ok || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        if (g) cudaGraphDestroy(g);
        return -1;
    }
    const double sec = replay_median(ge, st, &reps) / per;
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    *calls_out = reps * per;
    return sec;
}

typedef struct mode {
    char         name[16];
    int          cpu;        /* CPU runtime */
    int          host_heads; /* KV heads on the host (GPU runtime); 0 = none */
    neo_pipeline pipe;       /* HYBRID: at the joint ceiling's share (C.share) */
} mode;

static neo_runtime *rt_gpu, *rt_cpu;
static size_t       llc;

/* What AUTO chose in layers L[0..n) (each decides on its own probes; library internals), for a
   row's note after k characters of it; returns the note's new length. */
static int auto_note(char *nt, size_t cap, int k, neo_layer **L, int n) {
    int    nc[4] = {0, 0, 0, 0}, second = 0; /* OFF, ON, HYBRID, still probing; HYBRID at the second share */
    double lo = 1.0, hi = 0.0;
    for (int i = 0; i < n; i++) {
        const int c = !L[i]->auto_decided ? 3 : L[i]->auto_choice == NEO_PIPELINE_HYBRID ? 2 : L[i]->auto_choice == NEO_PIPELINE_ON ? 1 : 0;
        nc[c]++;
        if (c == 2) lo = fmin(lo, L[i]->auto_share), hi = fmax(hi, L[i]->auto_share);
        /* a round that timed the second share ends at 4 probes of each; the share kept is then auto_share2's when that won */
        if (c == 2 && L[i]->auto_n == 4 * NEO__AUTO_PROBES && L[i]->auto_share == L[i]->auto_share2) second++;
    }
    k += snprintf(nt + k, cap - (size_t)k, "; chose OFF / ON / HYBRID in %d / %d / %d of %d layers", nc[0], nc[1], nc[2], n);
    if (nc[2]) k += snprintf(nt + k, cap - (size_t)k, " (HYBRID at CPU shares %.2f-%.2f, the second share in %d)", lo, hi, second);
    if (nc[3]) k += snprintf(nt + k, cap - (size_t)k, ", %d still probing", nc[3]);
    return k;
}

/* AUTO's probes, single decode calls round the split layers of L[0..n) until each has decided
   (up to 4 x NEO__AUTO_PROBES a layer; library internals), so that no probe, which waits for the
   device, falls among the timed calls. Layer i's q and out are at i * stride floats. */
static void auto_settle(neo_layer **L, int n, const float *q, float *out, size_t stride) {
    for (int r = 0, left = 1; left && r < 8 * NEO__AUTO_PROBES; r++) {
        left = 0;
        for (int i = 0; i < n; i++)
            if (neo__is_split(L[i]) && !L[i]->auto_decided) {
                check(neo_attn_decode(L[i], q + (size_t)i * stride, out + (size_t)i * stride), "neo_attn_decode");
                left = 1;
            }
        check(neo_runtime_sync(rt_gpu), "neo_runtime_sync");
    }
}

/* Each half of split layers alone, on the same layers as the ON row (library internals: the
   public API runs only both): the device heads' attention on the engine stream (events around
   batches), and the host heads' CPU attention from host q (wall clock). Medians, seconds per call. */
static void time_halves(neo_layer **L, int n, double *gpu_s, double *cpu_s) {
    neo_runtime   *rt = L[0]->rt;
    neo__attn_args a;
    cudaEvent_t    e0, e1;
    double         tg[32], tc[32];
    int            per = n < 8 ? 8 : n, reps = 0, next = 0;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    double t_end = now_s() + opt.seconds * 0.5;
    while (reps < 32 && (reps < 5 || (now_s() < t_end && reps < 20))) {
        float ms;
        CU(cudaEventRecord(e0, stream));
        for (int i = 0; i < per; i++) {
            neo_layer *l = L[next++ % n];
            neo__layer_args(l, &a, dq, 1, dout, 1);
            a.k = l->k_dev;
            a.v = l->v_dev;
            a.h1 = l->gpu_heads;
            check((neo_status)rt->attn.attend(rt->dev_state, &a, NEO__STREAM_MAIN), "device half");
        }
        CU(cudaEventRecord(e1, stream));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        tg[reps] = ms * 1e-3 / per;
        double w0 = now_s();
        for (int i = 0; i < per; i++) {
            neo_layer *l = L[next++ % n];
            neo__layer_args(l, &a, hq, 1, hout, 0);
            a.k = l->k_host;
            a.v = l->v_host;
            a.kv_h0 = a.h0 = l->gpu_heads;
            a.h1 = l->n_head_kv;
            neo__cpu_attend(rt, &a);
        }
        tc[reps++] = (now_s() - w0) / per;
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    *gpu_s = median(tg, reps);
    *cpu_s = median(tc, reps);
}

static void attn_row(const shape *s, long ctx, const mode *m) {
    size_t kv = kv_layer_bytes(s, ctx);
    int    hh = m->cpu ? s->n_kv : m->host_heads, g = s->n_kv - hh;
    double gb = (double)kv * g / s->n_kv, hb = (double)kv * hh / s->n_kv;
    /* layers: >= 256 MiB on the GPU side, >= 2x LLC (and 256 MiB) on the host side */
    double want = 2;
    double host_target = 2.0 * (double)llc > 256.0 * MiB ? 2.0 * (double)llc : 256.0 * MiB;
    if (gb > 0 && ceil(256.0 * MiB / gb) > want) want = ceil(256.0 * MiB / gb);
    if (hb > 0 && ceil(host_target / hb) > want) want = ceil(host_target / hb);
    if (want > MAX_LAYERS) want = MAX_LAYERS;
    if (gb > 0 && want * gb > 24.0 * GiB) want = floor(24.0 * GiB / gb);
    if (hb > 0 && want * hb > 12.0 * GiB) want = floor(12.0 * GiB / hb);
    if (want < 1) want = 1;
    int          n = (int)want;
    neo_runtime *rt = m->cpu ? rt_cpu : rt_gpu;
    neo_layer  **L = (neo_layer **)xmalloc((size_t)n * sizeof *L);
    neo_layer_desc d = shape_desc(s, ctx, m->cpu ? 0 : g, m->pipe);
    if (m->pipe == NEO_PIPELINE_HYBRID) d.cpu_share = C.share;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        check(neo_layer_create(rt, &d, &L[i]), "neo_layer_create");
        fill_layer(L[i], s, ctx, !m->cpu);
    }
    CU(cudaDeviceSynchronize());
    double t_fill = now_s() - t0;

    const float *q = m->cpu ? hq : dq;
    float       *out = m->cpu ? hout : dout;
    int          split = !m->cpu && hh > 0, calls = 0;
    int       warm = n < 3 ? 3 : n;
    int       host = m->cpu || split, jt = split && (m->pipe == NEO_PIPELINE_HYBRID || m->pipe == NEO_PIPELINE_AUTO);
    host_ceil hc = {0, 0};
    if (m->pipe == NEO_PIPELINE_AUTO && split) auto_settle(L, n, q, out, 0);
    if (host) host_sample(&hc, jt);
    for (int i = 0; i < warm; i++) check(neo_attn_decode(L[i % n], q, out), "neo_attn_decode");
    long long ov0 = overlapped(L, n);
    double    sec = time_calls(L, n, q, out, !m->cpu && !split, stream, 0, &calls);
    long long ov = overlapped(L, n) - ov0;
    if (host) host_sample(&hc, jt);
    const double dram = host ? hc.dram : C.dram, joint = jt ? hc.joint : C.joint;
    check_out(!m->cpu, s->n_head * s->d);

    brow r = row_new("attn", s->name, ctx, m->name);
    r.layers = n;
    r.calls = calls;
    r.us = sec * 1e6;
    r.kv_bytes = (double)kv;
    r.gpu_bytes = gb;
    r.host_bytes = hb;
    r.gbs = (double)kv / sec * 1e-9;
    double b_gpu = gb / (C.hbm * 1e9), b_host_dram = hb / (dram * 1e9), b_host_pcie = hb / (C.h2d * 1e9);
    double b_on = b_gpu > b_host_dram ? b_gpu : b_host_dram, b_off = fmax(b_host_pcie, (gb + hb) / (C.hbm * 1e9));
    double b_host_joint = hb / (joint * 1e9), b_hyb = b_gpu > b_host_joint ? b_gpu : b_host_joint;
    double b_best = b_on < b_off ? b_on : b_off;
    if (b_hyb < b_best) b_best = b_hyb;
    if (m->cpu) r.bound_us = b_host_dram * 1e6;
    else if (!split) r.bound_us = b_gpu * 1e6;
    else if (m->pipe == NEO_PIPELINE_ON) r.bound_us = b_on * 1e6;
    else if (m->pipe == NEO_PIPELINE_OFF) r.bound_us = b_off * 1e6;
    else if (m->pipe == NEO_PIPELINE_HYBRID) r.bound_us = b_hyb * 1e6;
    else r.bound_us = b_best * 1e6;
    char *nt = r.note;
    size_t cap = sizeof r.note;
    int   k = snprintf(nt, cap, "fill %.2fs", t_fill);
    if (host) k += snprintf(nt + k, cap - (size_t)k, "; host read %.1f GB/s around the row", hc.dram);
    if (jt) k += snprintf(nt + k, cap - (size_t)k, ", CPU + DMA %.1f", hc.joint);
    /* the host heads' flops: 2 (d + dv) for each query head and cell */
    double host_flops = 4.0 * (double)ctx * s->n_head * s->d * hh / s->n_kv;
    if (C.fma > 0 && (m->cpu || (split && m->pipe != NEO_PIPELINE_OFF)))
        k += snprintf(nt + k, cap - (size_t)k, "; host FMA bound %.1fus", host_flops / (C.fma * 1e9) * 1e6);
    if (split && m->pipe == NEO_PIPELINE_ON) {
        double gh, ch;
        time_halves(L, n, &gh, &ch);
        gh *= 1e6, ch *= 1e6;
        k += snprintf(nt + k, cap - (size_t)k, "; halves alone: GPU %.1fus, CPU %.1fus; join %.1fus; overlapped %lld/%d", gh, ch,
                      r.us - (gh > ch ? gh : ch), ov, calls);
    } else if (split && m->pipe == NEO_PIPELINE_OFF) {
        k += snprintf(nt + k, cap - (size_t)k, "; host bytes at %.1f GB/s over the call", hb / (r.us * 1e-6) * 1e-9);
    } else if (split && m->pipe == NEO_PIPELINE_HYBRID) {
        k += snprintf(nt + k, cap - (size_t)k, "; CPU share %.2f; overlapped %lld/%d", (double)C.share, ov, calls);
    } else if (split) {
        k = auto_note(nt, cap, k, L, n);
        k += snprintf(nt + k, cap - (size_t)k, "; overlapped %lld/%d", ov, calls);
    }
    emit(&r);

    if (!m->cpu && !split) { /* the same calls from a CUDA graph */
        int    gcalls = 0;
        double gs = time_graph(L, n, stream, &gcalls);
        brow   rg = r;
        snprintf(rg.mode, sizeof rg.mode, "gpu-graph");
        rg.calls = gcalls;
        if (gs > 0) {
            rg.us = gs * 1e6;
            rg.gbs = (double)kv / gs * 1e-9;
            snprintf(rg.note, sizeof rg.note, "%d decode calls captured once, replayed", n < 8 ? 8 : n);
            check_out(1, s->n_head * s->d);
        } else {
            rg.us = rg.gbs = rg.ratio = NAN;
            snprintf(rg.note, sizeof rg.note, "stream capture failed");
        }
        emit(&rg);
    }
    for (int i = 0; i < n; i++) neo_layer_destroy(L[i]);
    free(L);
}

static void run_attn(void) {
    const shape *shapes[2] = {&LLAMA, &QWEN};
    long         ctxs_full[4] = {4096, 32768, 131072, 524288}, ctxs_quick[2] = {4096, 32768};
    const long  *ctxs = opt.quick ? ctxs_quick : ctxs_full;
    int          n_ctx = opt.quick ? 2 : 4;
    for (int si = 0; si < 2; si++) {
        const shape *s = shapes[si];
        for (int ci = 0; ci < n_ctx; ci++) {
            long ctx = ctxs[ci];
            mode m;
            memset(&m, 0, sizeof m);
            snprintf(m.name, sizeof m.name, "gpu");
            attn_row(s, ctx, &m);
            if (ctx > 131072) continue; /* 512k: GPU only */
            snprintf(m.name, sizeof m.name, "cpu");
            m.cpu = 1;
            attn_row(s, ctx, &m);
            m.cpu = 0;
            int fr[2] = {2, 8};
            for (int fi = 0; fi < 2; fi++) {
                int hh = s->n_kv / fr[fi];
                if (hh < 1) continue;
                const neo_pipeline pp[4] = {NEO_PIPELINE_OFF, NEO_PIPELINE_ON, NEO_PIPELINE_HYBRID, NEO_PIPELINE_AUTO};
                const char        *pn[4] = {"off", "on", "hybrid", "auto"};
                for (int pi = 0; pi < 4; pi++) {
                    snprintf(m.name, sizeof m.name, "%s-1/%d", pn[pi], fr[fi]);
                    m.host_heads = hh;
                    m.pipe = pp[pi];
                    attn_row(s, ctx, &m);
                }
            }
        }
    }
}

/* sweep (only with --sections sweep): one layer's GPU decode, Llama-3-8B shapes, for each
   tensor-core block shape (planner's choice, wide, narrow) and cap on the split count, through
   the kernels' test entry (the planner forced), timed as the gpu rows are (events around
   back-to-back calls over >= 256 MiB of layers, median): what the planner leaves at each context.
   The planner's shape also from a CUDA graph (the device's time alone), and from a graph with the
   splits merged through global memory (graph-gm) where the planner would merge them in a thread
   block cluster: what the cluster merge saves. Then the floors (time_ops): what a memset, a copy
   and the call's dataflow alone take (sweep_floors). */
int neo__cu_test_attend(void *state, const neo__attn_args *a, int stream, int kernel, int shape, int max_splits);
int neo__cu_test_attend_global(void *state, const neo__attn_args *a, int stream, int kernel, int shape, int max_splits);

/* One attend of l's every head with the plan forced; global: its splits merged through global
   memory even where a thread block cluster could merge them. 0, or -1 when the forced plan
   cannot serve it (a shape this device or head_dim cannot take). */
static int forced_call(neo_layer *l, int block_shape, int max_splits, int global) {
    neo__attn_args a;
    neo__layer_args(l, &a, dq, 1, dout, 1);
    a.k = l->k_dev, a.v = l->v_dev, a.h1 = l->n_head_kv;
    const int s = global ? neo__cu_test_attend_global(rt_gpu->dev_state, &a, NEO__STREAM_MAIN, -1, block_shape, max_splits)
                         : neo__cu_test_attend(rt_gpu->dev_state, &a, NEO__STREAM_MAIN, -1, block_shape, max_splits);
    return s == NEO_OK ? 0 : -1;
}

/* us an op: 64 back to back over L, timed with events, median of 15; graph: the 64 captured once
   (after an eager pass that sizes the buffers) and the graph replayed, so that no host launch cost
   is in the time. fn(L, n, i) enqueues the i-th op. */
static double time_ops(void (*fn)(neo_layer **, int, int), neo_layer **L, int n, int graph) {
    cudaEvent_t     e0, e1;
    cudaGraphExec_t ge = NULL;
    double          t[15];
    if (graph) {
        cudaGraph_t g;
        for (int i = 0; i < 64; i++) fn(L, n, i);
        CU(cudaStreamSynchronize(stream));
        CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < 64; i++) fn(L, n, i);
        CU(cudaStreamEndCapture(stream, &g));
        CU(cudaGraphInstantiate(&ge, g, 0));
        CU(cudaGraphDestroy(g));
    }
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int r = 0; r < 15; r++) {
        CU(cudaEventRecord(e0, stream));
        if (graph) CU(cudaGraphLaunch(ge, stream));
        for (int i = 0; i < 64 && !graph; i++) fn(L, n, r * 64 + i);
        float ms;
        CU(cudaEventRecord(e1, stream));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        t[r] = ms * 1e3 / 64;
    }
    if (ge) CU(cudaGraphExecDestroy(ge));
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return median(t, 15);
}

/* us a call of forced attends (time_ops); NAN when the forced plan cannot serve the layers, whose
   calls are then skipped */
static int  forced_shape, forced_cap, forced_global, forced_bad;
static void op_forced(neo_layer **L, int n, int i) {
    if (!forced_bad) forced_bad = forced_call(L[i % n], forced_shape, forced_cap, forced_global);
}
static double time_forced(neo_layer **L, int n, int block_shape, int max_splits, int graph, int global) {
    forced_shape = block_shape, forced_cap = max_splits, forced_global = global, forced_bad = 0;
    const double t = time_ops(op_forced, L, n, graph);
    return forced_bad ? NAN : t;
}

/* The floors a call of that size meets on this GPU, timed as the calls are (time_ops). The
   layer's K copied over its V: the call's bytes moved, half read and half written. */
static size_t sweep_k_bytes; /* one layer's K */
static void   op_copy(neo_layer **L, int n, int i) {
    neo_layer *l = L[i % n];
    CU(cudaMemcpyAsync(l->v_dev, l->k_dev, sweep_k_bytes, cudaMemcpyDeviceToDevice, stream));
}
/* the smallest op there is: 4 bytes set */
static void op_set(neo_layer **L, int n, int i) { CU(cudaMemsetAsync(L[i % n]->v_dev, 0, 4, stream)); }
/* a kernel of the call's dataflow (examples/bench/floors.cu): floor_kind over the layer's bytes */
static int  floor_kind;
static void op_floor(neo_layer **L, int n, int i) {
    neo_layer   *l = L[i % n];
    const size_t hs = (size_t)l->n_ctx * (size_t)l->head_dim;
    if (bench_floor(floor_kind, l->k_dev, l->v_dev, hs, hs, stream) != 0) CU(cudaGetLastError()), die("bench_floor", "launch refused");
}
/* the floors of the call's dataflow, eager and from a graph: read; read and merge through global
   memory; in a cluster; with atomic adds; through tagged words, one block merging or every block
   a slice */
static void sweep_floors(const shape *SH, long ctx, neo_layer **L, int n) {
    static const char *names[BENCH_FLOOR_KINDS] = {"read",
                                                   "read + global merge",
                                                   "read + cluster merge",
                                                   "read + atomic adds",
                                                   "read + tagged merge (one block)",
                                                   "read + tagged merge (slices)"};
    /* plain loads in small blocks; the same blocks holding the wide block's 192 KB; bulk copies;
       plain loads in 64 registers a thread, two blocks an SM; the call's arithmetic on such blocks,
       each warp making q's f16 parts or the block making them once */
    /* the last two hold 187 and 192 KB: with the kernel's 6.9 KB of static shared memory and the 1
       KB a block reserves, within the 196 KB shared-memory configuration of an SM and past it (the
       SM then keeps 28 KB of L1 instead of 60) */
    static const char *ways[10] = {"", ", each holding 192 KB of shared memory", ", read by bulk copies into shared memory",
                                   ", plain loads in 64 registers, two blocks an SM",
                                   ", with the arithmetic (read: no merge): K in 64 registers, V by bulk copies, two blocks an SM",
                                   ", with the arithmetic (read: no merge): the same blocks each holding 120 KB, one an SM",
                                   ", with the arithmetic, q's parts made once a block: two blocks an SM",
                                   ", with the arithmetic, q's parts made once a block: one an SM, 120 KB held",
                                   ", with the arithmetic, q's parts made once a block: one an SM, 187 KB held (in 196 KB)",
                                   ", with the arithmetic, q's parts made once a block: one an SM, 192 KB held (past 196 KB)"};
    static const int   readers[10] = {BENCH_FLOOR_PLAIN, BENCH_FLOOR_PLAIN, BENCH_FLOOR_BULK,   BENCH_FLOOR_PLAIN64, BENCH_FLOOR_MMA,
                                      BENCH_FLOOR_MMA,   BENCH_FLOOR_MMA_QB, BENCH_FLOOR_MMA_QB, BENCH_FLOOR_MMA_QB,  BENCH_FLOOR_MMA_QB};
    static const int   held[10] = {0, 192, 0, 0, 0, 120, 0, 120, 187, 192}; /* KB of shared memory each block holds at least */
    for (int way = 0; way < 10; way++) {
        const int S = bench_floor_setup(SH->n_kv, (int)ctx, SH->d, SH->n_head / SH->n_kv, (size_t)held[way] * 1024, readers[way]);
        if (S < 1) {
            printf("# floors of the dataflow%s: not for this shape or GPU\n", ways[way]);
            continue;
        }
        if ((ctx + S - 1) / S * SH->d > 256 * 128) { /* read in rounds: no floor */
            printf("# floors of the dataflow: only for splits of at most 256 cells of head_dim 128\n");
            break;
        }
        printf("# floors of the dataflow (%d x %d blocks of 512 threads, programmatic launches%s), us eager / from a graph:", SH->n_kv,
               S, ways[way]);
        for (floor_kind = 0; floor_kind < BENCH_FLOOR_KINDS; floor_kind++) {
            if (!bench_floor_has(floor_kind)) printf("%s %s -", floor_kind ? ";" : "", names[floor_kind]);
            else printf("%s %s %.2f / %.2f", floor_kind ? ";" : "", names[floor_kind], time_ops(op_floor, L, n, 0), time_ops(op_floor, L, n, 1));
            fflush(stdout);
        }
        if (readers[way] == BENCH_FLOOR_MMA || readers[way] == BENCH_FLOOR_MMA_QB) { /* one more call, on L[0], against float64 */
            const size_t hs = (size_t)L[0]->n_ctx * (size_t)L[0]->head_dim;
            floor_kind = BENCH_FLOOR_GLOBAL;
            op_floor(L, n, 0);
            const double e = bench_floor_check(L[0]->k_dev, L[0]->v_dev, hs, hs);
            if (e < 0.0) die("bench_floor_check", "failed");
            printf("; outputs against float64: max relative L2 error %.2e; %d blocks an SM\n", e, bench_floor_blocks(BENCH_FLOOR_GLOBAL));
            /* where the time goes: the same calls again, each block stamping its SM and its steps */
            if (bench_floor_stamps(1) != 0) die("bench_floor_stamps", "failed");
            for (int kind = BENCH_FLOOR_READ; kind <= BENCH_FLOOR_GLOBAL; kind++)
                for (int graph = 0; graph < 2; graph++) {
                    char what[160];
                    floor_kind = kind;
                    const double us = time_ops(op_floor, L, n, graph);
                    snprintf(what, sizeof what, "%s, %s, %.2f us a call with the stamps", names[kind], graph ? "from a graph" : "eager", us);
                    if (bench_floor_timeline(what) != 0) die("bench_floor_timeline", "failed");
                }
            bench_floor_stamps(0);
            continue;
        }
        printf("\n");
    }
    bench_floor_release();
}

static void run_sweep(void) {
    const shape *SH = opt.sweep_qwen ? &QWEN : &LLAMA;
    const long ctxs[5] = {256, 1024, 4096, 16384, 65536}; /* 256: the fixed cost alone */
    const int  caps[14] = {0, 2, 4, 6, 8, 12, 14, 15, 16, 20, 24, 32, 48, 64};
    for (int ci = 0; ci < 5; ci++) {
        long           ctx = opt.sweep_ctx ? opt.sweep_ctx : ctxs[ci];
        double         gb = (double)kv_layer_bytes(SH, ctx);
        int            n = (int)ceil(256.0 * MiB / gb);
        neo_layer    **L = (neo_layer **)xmalloc((size_t)n * sizeof *L);
        neo_layer_desc d = shape_desc(SH, ctx, SH->n_kv, NEO_PIPELINE_OFF);
        for (int i = 0; i < n; i++) {
            check(neo_layer_create(rt_gpu, &d, &L[i]), "neo_layer_create");
            fill_layer(L[i], SH, ctx, 1);
        }
        CU(cudaDeviceSynchronize());
        printf("# sweep %s %ld: bound %.2f us (HBM copy rate); us by split cap (0 = the planner's count)\n", SH->name, ctx,
               gb / (C.hbm * 1e9) * 1e6);
        printf("# %-8s", "shape");
        for (int k = 0; k < 14; k++) printf(" %6d", caps[k]);
        printf("\n");
        for (int row = 0; row < 5; row++) { /* the planner's shape eager, from a graph, with the global merge; wide; narrow */
            static const char *names[5] = {"planner", "graph", "graph-gm", "wide", "narrow"};
            const int          shp = row < 3 ? -1 : row - 3, graph = row == 1 || row == 2;
            printf("# %-8s", names[row]);
            for (int k = 0; k < 14; k++) printf(" %6.2f", time_forced(L, n, shp, caps[k], graph, row == 2));
            printf("\n");
            fflush(stdout);
        }
        /* the floors of the dataflow first: the arithmetic's kernel is checked against the layer's
           own V, which the copies below overwrite */
        sweep_floors(SH, ctx, L, n);
        sweep_k_bytes = kv_layer_bytes(SH, ctx) / 2;
        printf("# floors, back to back: a 4-byte memset %.2f us; the layer's K copied over its V (its bytes, half read and half "
               "written) %.2f us\n",
               time_ops(op_set, L, n, 0), time_ops(op_copy, L, n, 0));
        for (int i = 0; i < n; i++) neo_layer_destroy(L[i]);
        free(L);
        if (opt.sweep_ctx) break;
    }
}

/* ===============================================================================================
   end to end: the decode loop on a synthetic llama2.c checkpoint
   =============================================================================================== */

static void fill_const(float *p, size_t n, float v) {
    for (size_t i = 0; i < n; i++) p[i] = v;
}

static void put32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)u;
    p[1] = (unsigned char)(u >> 8);
    p[2] = (unsigned char)(u >> 16);
    p[3] = (unsigned char)(u >> 24);
}

/* Qwen2.5-0.5B shapes, shared classifier (vocab > 0 in the header), layout of neo__ckpt_map */
static neo_model *make_model(int seq_len, double *t_build) {
    const int dim = 896, hid = 4864, nl = 24, nh = 14, nkv = 2, voc = 32000;
    size_t    L = nl, hs = dim / nh, kv = hs * nkv;
    size_t    n_emb = (size_t)voc * dim, n_rms = L * dim, n_wq = L * dim * dim, n_wk = L * dim * kv, n_wo = L * dim * dim,
           n_w = L * dim * hid, n_rope = (size_t)seq_len * (hs / 2) * 2;
    size_t n = n_emb + n_rms + n_wq + 2 * n_wk + n_wo + n_rms + 3 * n_w + dim + n_rope;
    size_t bytes = 28 + n * 4;
    double t0 = now_s();
    unsigned char *buf = (unsigned char *)xmalloc(bytes);
    int32_t        hdr[7] = {dim, hid, nl, nh, nkv, voc, seq_len};
    for (int i = 0; i < 7; i++) put32(buf + 4 * i, hdr[i]);
    float *w = (float *)(buf + 28); /* 28 is a multiple of 4 */
    float *p = w;
    fill_uniform(p, n_emb, 1.0f, 21);
    p += n_emb;
    fill_const(p, n_rms, 1.0f); /* rms_att */
    p += n_rms;
    fill_uniform(p, n_wq, 1.0f / sqrtf((float)dim), 22);
    p += n_wq;
    fill_uniform(p, 2 * n_wk, 1.0f / sqrtf((float)dim), 23); /* wk, wv */
    p += 2 * n_wk;
    fill_uniform(p, n_wo, 1.0f / sqrtf((float)dim), 24);
    p += n_wo;
    fill_const(p, n_rms, 1.0f); /* rms_ffn */
    p += n_rms;
    fill_uniform(p, n_w, 1.0f / sqrtf((float)dim), 25); /* w1 */
    p += n_w;
    fill_uniform(p, n_w, 1.0f / sqrtf((float)hid), 26); /* w2 */
    p += n_w;
    fill_uniform(p, n_w, 1.0f / sqrtf((float)dim), 27); /* w3 */
    p += n_w;
    fill_const(p, (size_t)dim, 1.0f); /* rms_final */
    p += dim;
    memset(p, 0, n_rope * 4); /* the legacy RoPE tables: unused by the loop */
    neo_model *m = NULL;
    check(neo_model_load_memory(buf, bytes, &m), "neo_model_load_memory");
    free(buf);
    *t_build = now_s() - t0;
    return m;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* One decode step as neo_session_step takes it, timed in two parts (library internals): the
   host's enqueueing of the forward pass (every launch, and the CPU halves the caller takes part
   in) and the whole step (logits copied back, stream synchronised). Enqueueing that takes as long
   as the step means the host, not the device, sets the pace. */
static void e2e_step(neo_session *s, int token, float *logits, int vocab, double *host_s, double *step_s) {
    double a = now_s();
    check(neo__session_forward(s, token, neo_session_length(s)), "the decode step's forward pass");
    double b = now_s();
    check(neo__dev_copy(s->rt, logits, s->logits, sizeof(float) * (size_t)vocab), "the logits' copy");
    check(neo__dev_sync(s->rt), "the step's synchronisation");
    *host_s = b - a;
    *step_s = now_s() - a;
}

/* The same step (argmax on the device, no logits copy) eager and as a CUDA graph captured once
   and replayed, wall time each, median of reps: what a graph of the step would take off. The
   replay rewrites cell pos, so the session is truncated back after each. The step's eager path is
   captured as it is (host lengths baked in), which a both-halves call refuses: -1 then (the G
   runs capture it the library's way, through neo_session_desc.graphs). */
static void e2e_graph_probe(neo_session *s, int token, double *eager_us, double *graph_us) {
    neo__dev_model *D = &s->rt->model;
    void           *S = s->rt->dev_state;
    int             pos = neo_session_length(s) - 1, V = s->m->info.vocab_size, next, ok;
    cudaGraph_t     g = NULL;
    cudaGraphExec_t ge = NULL;
    double          t[32];
    check(neo_session_truncate(s, pos), "neo_session_truncate"); /* the session is full: step its last cell again */
    for (int r = 0; r < 32; r++) {
        double t0 = now_s();
        check(neo__session_forward(s, token, pos), "the probe's forward pass");
        check((neo_status)D->argmax(S, s->next, s->logits, V, NEO__STREAM_MAIN), "the probe's argmax");
        CU(cudaMemcpyAsync(&next, s->next, sizeof next, cudaMemcpyDeviceToHost, stream));
        CU(cudaStreamSynchronize(stream));
        t[r] = (now_s() - t0) * 1e6;
        check(neo_session_truncate(s, pos), "neo_session_truncate");
    }
    *eager_us = median(t, 32);
    *graph_us = -1;
    CU(cudaStreamSynchronize(stream));
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    ok = neo__session_forward(s, token, pos) == NEO_OK && D->argmax(S, s->next, s->logits, V, NEO__STREAM_MAIN) == NEO_OK;
    if (cudaStreamEndCapture(stream, &g) != cudaSuccess || !ok || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        if (g) CU(cudaGraphDestroy(g));
        check(neo_session_truncate(s, pos), "neo_session_truncate");
        return;
    }
    check(neo_session_truncate(s, pos), "neo_session_truncate");
    for (int r = 0; r < 34; r++) {
        double t0 = now_s();
        CU(cudaGraphLaunch(ge, stream));
        CU(cudaMemcpyAsync(&next, s->next, sizeof next, cudaMemcpyDeviceToHost, stream));
        CU(cudaStreamSynchronize(stream));
        if (r >= 2) t[r - 2] = (now_s() - t0) * 1e6;
    }
    *graph_us = median(t, 32);
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
}

/* The CPU half of one split layer alone, as the listener runs it for a graph's ring (its host
   heads at the layer's length, on the runtime's pool, host queries): median of 64, µs. What a
   ring costs beyond it is the handoff. */
static double e2e_cpu_half_us(neo_session *s) {
    neo_layer     *L = s->layers[0];
    neo__attn_args c;
    size_t         nq = (size_t)L->n_head * (size_t)L->head_dim, no = (size_t)L->n_head * (size_t)L->head_dim_v;
    float         *q = (float *)xmalloc(nq * sizeof(float)), *o = (float *)xmalloc(no * sizeof(float));
    double         t[64];
    for (size_t i = 0; i < nq; i++) q[i] = 0.01f * (float)(i % 97);
    check(neo_runtime_sync(s->rt), "neo_runtime_sync");
    neo__layer_args_at(L, &c, q, 1, o, 0, L->len);
    c.k = L->k_host, c.v = L->v_host, c.kv_h0 = c.h0 = L->gpu_heads, c.h1 = L->n_head_kv;
    for (int r = 0; r < 64; r++) {
        double t0 = now_s();
        neo__cpu_attend(s->rt, &c);
        t[r] = (now_s() - t0) * 1e6;
    }
    free(q), free(o);
    return median(t, 64);
}

static void run_e2e(void) {
    enum { NR = 9 }; /* runs */
    int    ctx = opt.e2e_ctx ? opt.e2e_ctx : opt.quick ? 256 : 4096, gen = opt.quick ? 32 : 128;
    double t_build;
    neo_model *m = make_model(ctx + gen, &t_build);
    neo_model_info mi;
    check(neo_model_get_info(m, &mi), "neo_model_get_info");
    printf("# e2e model: Qwen2.5-0.5B shapes, random f32 weights (%.2f GB, built and loaded in %.1f s), f16 KV, "
           "%d prompt tokens stepped, %d tokens timed\n",
           (double)mi.weight_bytes * 1e-9, t_build, ctx, gen);
    fflush(stdout);
    const struct {
        const char  *name, *what;
        int          gpu_heads;
        neo_pipeline pipe;
        int          graphs;
    } runs[NR] = {{"B", "no split", 0, NEO_PIPELINE_OFF, 0},
                  {"M", "split 1/2, pipeline OFF (stream-back)", 1, NEO_PIPELINE_OFF, 0},
                  {"N", "split 1/2, pipeline ON (both halves)", 1, NEO_PIPELINE_ON, 0},
                  {"O", "no split, --neo-pipeline off", 0, NEO_PIPELINE_OFF, 0},
                  {"H", "split 1/2, pipeline HYBRID (CPU share from the joint ceiling)", 1, NEO_PIPELINE_HYBRID, 0},
                  {"BG", "no split, each step replayed from a CUDA graph", 0, NEO_PIPELINE_OFF, 1},
                  {"MG", "split 1/2, OFF from a CUDA graph (host heads read in place)", 1, NEO_PIPELINE_OFF, 1},
                  {"NG", "split 1/2, ON from a CUDA graph (the listener attends the host heads)", 1, NEO_PIPELINE_ON, 1},
                  {"HG", "split 1/2, HYBRID from a CUDA graph (the listener and the GPU in place)", 1, NEO_PIPELINE_HYBRID, 1}};
    float *logits = (float *)xmalloc((size_t)mi.vocab_size * sizeof(float));
    int   *tok = (int *)xmalloc(NR * (size_t)gen * sizeof(int)); /* [run][gen] */
    double *st_us = (double *)xmalloc(NR * (size_t)gen * sizeof(double));
    double *host_us = (double *)xmalloc(NR * (size_t)gen * sizeof(double));
    double tps[NR] = {0}, t_prefill[NR], t_gen[NR] = {0};
    int    hd = mi.dim / mi.n_heads, t[NR];
    uint32_t offs[NR];
    double W = (double)mi.weight_bytes;
    double kv_tok = (double)mi.n_layers * (ctx + gen / 2.0) * mi.n_kv_heads * 2.0 * hd * 2.0; /* mean over the timed tokens */
    neo_session *S[NR];
    for (int ri = 0; ri < NR; ri++) {
        neo_session_desc sd;
        memset(&sd, 0, sizeof sd);
        sd.n_ctx = ctx + gen;
        sd.kv_type = NEO_TYPE_F16;
        sd.gpu_heads = runs[ri].gpu_heads;
        sd.pipeline = runs[ri].pipe;
        sd.cpu_share = runs[ri].pipe == NEO_PIPELINE_HYBRID ? C.share : 0.0f;
        sd.graphs = runs[ri].graphs;
        check(neo_session_create(rt_gpu, m, &sd, &S[ri]), "neo_session_create");
        rng = 0x1234567ull; /* the same prompt for every run */
        double t0 = now_s();
        for (int i = 0; i < ctx; i++)
            check(neo_session_step(S[ri], (int)(rnd_u32() % (uint32_t)mi.vocab_size), logits), "neo_session_step");
        t_prefill[ri] = now_s() - t0;
        t[ri] = argmax(logits, mi.vocab_size);
        offs[ri] = 0x9E3779B9u;
    }
    /* The runs take their steps in blocks of E2E_BLOCK in turn (B x16, M x16, .., MG x16, B ..),
       so that all of them come from the same minutes of this host: its threads, which N depends on,
       vary from minute to minute. Each block starts with one untimed step, taken back (the
       session truncated to its length before it), because the pool's workers sleep while the
       other sessions step and N's first step wakes them; a decode loop that keeps stepping one
       session does not pay that (step by step in turn, N's mean step was 2433 us against a median
       of 1914). Greedy, except that a fixed offset sequence moves the token on (random weights
       tend to repeat one token); tok keeps the argmax of every step, to compare runs. */
    for (int b0 = 0; b0 < gen; b0 += E2E_BLOCK)
        for (int ri = 0; ri < NR; ri++) {
            double h, st;
            int    len = neo_session_length(S[ri]);
            e2e_step(S[ri], t[ri], logits, mi.vocab_size, &h, &st);
            check(neo_session_truncate(S[ri], len), "neo_session_truncate");
            for (int i = b0; i < b0 + E2E_BLOCK && i < gen; i++) {
                tok[ri * gen + i] = t[ri];
                offs[ri] = offs[ri] * 1664525u + 1013904223u;
                e2e_step(S[ri], (int)(((uint32_t)t[ri] + (offs[ri] >> 8)) % (uint32_t)mi.vocab_size), logits, mi.vocab_size, &h, &st);
                t_gen[ri] += st;
                st_us[ri * gen + i] = st * 1e6;
                host_us[ri * gen + i] = h * 1e6;
                for (int v = 0; v < mi.vocab_size; v++)
                    if (!isfinite(logits[v])) die("e2e", "non-finite logits");
                t[ri] = argmax(logits, mi.vocab_size);
            }
        }
    for (int ri = 0; ri < NR; ri++) {
        double probe_eager = -1, probe_graph = -1, cpu_half = -1;
        if (!runs[ri].graphs) e2e_graph_probe(S[ri], t[ri], &probe_eager, &probe_graph); /* (the session's own graph is the row) */
        else if (runs[ri].pipe == NEO_PIPELINE_ON) cpu_half = e2e_cpu_half_us(S[ri]);
        neo_layer_info li;
        check(neo_session_get_info(S[ri], &li), "neo_session_get_info");
        neo_session_destroy(S[ri]);
        int same = !memcmp(tok + ri * gen, tok, (size_t)gen * sizeof(int));
        tps[ri] = gen / t_gen[ri];

        double kvh = runs[ri].gpu_heads ? kv_tok * (mi.n_kv_heads - runs[ri].gpu_heads) / mi.n_kv_heads : 0, kvg = kv_tok - kvh;
        double bound;
        if (!runs[ri].gpu_heads) bound = (W + kv_tok) / (C.hbm * 1e9);
        else {
            double off = W / (C.hbm * 1e9) + fmax((kvg + kvh) / (C.hbm * 1e9), kvh / (C.h2d * 1e9));
            double g = kvg / (C.hbm * 1e9), h = kvh / (C.dram * 1e9);
            double on = W / (C.hbm * 1e9) + (g > h ? g : h), hj = kvh / (C.joint * 1e9);
            double hyb = W / (C.hbm * 1e9) + (g > hj ? g : hj);
            bound = runs[ri].pipe == NEO_PIPELINE_OFF ? off : runs[ri].pipe == NEO_PIPELINE_ON ? on : hyb;
        }
        char name[20], probe[112];
        snprintf(name, sizeof name, "%s", runs[ri].name);
        if (runs[ri].graphs && cpu_half >= 0)
            snprintf(probe, sizeof probe, "every step replayed from the session's CUDA graph; one layer's CPU half alone %.1fus", cpu_half);
        else if (runs[ri].graphs) snprintf(probe, sizeof probe, "every step replayed from the session's CUDA graph");
        else if (probe_graph < 0) snprintf(probe, sizeof probe, "one step with argmax: eager %.0fus, CUDA graph n/a (the eager path refuses)", probe_eager);
        else snprintf(probe, sizeof probe, "one step with argmax: eager %.0fus, CUDA graph %.0fus", probe_eager, probe_graph);
        brow r = row_new("e2e", "qwen2.5-0.5b", ctx, name);
        r.layers = mi.n_layers;
        r.calls = gen;
        r.us = t_gen[ri] / gen * 1e6;
        r.kv_bytes = kv_tok;
        r.gpu_bytes = kvg;
        r.host_bytes = kvh;
        r.gbs = (W + kv_tok) / (t_gen[ri] / gen) * 1e-9;
        r.bound_us = bound * 1e6;
        snprintf(r.note, sizeof r.note,
                 "%s: %.1f tok/s (bound %.0f), median step %.0fus, of it host enqueueing %.0fus; prefill %.0f tok/s; %s; "
                 "overlapped %lld/%lld; %s",
                 runs[ri].what, tps[ri], 1.0 / bound, median(st_us + ri * gen, gen), median(host_us + ri * gen, gen),
                 ctx / t_prefill[ri], same ? "tokens = B's" : "tokens differ from B's", li.n_overlapped, li.n_decode, probe);
        emit(&r);
    }
    printf("# e2e ratios: N/M = %.3f, N/B = %.3f, M/B = %.3f, O/B = %.3f, H/N = %.3f, H/M = %.3f; with graphs: BG/B = %.3f, "
           "MG/M = %.3f, NG/N = %.3f, NG/MG = %.3f, NG/BG = %.3f, NG/M = %.3f, HG/H = %.3f, HG/NG = %.3f, HG/MG = %.3f\n",
           tps[2] / tps[1], tps[2] / tps[0], tps[1] / tps[0], tps[3] / tps[0], tps[4] / tps[2], tps[4] / tps[1], tps[5] / tps[0],
           tps[6] / tps[1], tps[7] / tps[2], tps[7] / tps[6], tps[7] / tps[5], tps[7] / tps[1], tps[8] / tps[4], tps[8] / tps[7],
           tps[8] / tps[6]);
    fflush(stdout);
    free(tok);
    free(st_us);
    free(host_us);
    free(logits);
    neo_model_destroy(m);
}

/* ===============================================================================================
   capacity: 32 layers of Llama-3-8B shapes at a context whose KV does not fit in the GPU
   =============================================================================================== */

static double time_steps(neo_layer **L, int n, const float *q, float *out, int reps, double *t_all) {
    for (int i = 0; i < n; i++) check(neo_attn_decode(L[i], q, out), "neo_attn_decode"); /* warm-up step */
    CU(cudaStreamSynchronize(stream));
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int i = 0; i < n; i++) check(neo_attn_decode(L[i], q, out), "neo_attn_decode");
        CU(cudaStreamSynchronize(stream));
        t_all[r] = now_s() - t0;
    }
    return median(t_all, reps);
}

/* A capacity step's bound at a host rate of `rate` GB/s: the sum of each layer's (they run one
   after another), g: [n] the device half's seconds at HBM, h: [n] the host half's bytes. Both
   halves and the hybrid wait for the slower of a layer's two halves (so a layer with a host head
   waits for it however few such layers there are); the stream-back (off) for the larger of its
   copies and both halves at HBM. */
static double cap_bound(const double *g, const double *h, int n, double rate, int off) {
    double b = 0;
    for (int i = 0; i < n; i++)
        b += off ? fmax(g[i] + h[i] / (C.hbm * 1e9), h[i] / (rate * 1e9)) : fmax(g[i], h[i] / (rate * 1e9));
    return b;
}

static void run_capacity(void) {
    const shape *s = &LLAMA;
    const int    NL = 32;
    size_t       free_b = 0, total_b = 0;
    double       jc, jd, cap_joint = C.joint;
    /* the joint ceiling's last sample, then its buffers go: the section takes all the GPU memory it can */
    if (JB.src) {
        joint_sample(8, opt.quick ? 2 : 3, &jc, &jd);
        cap_joint = jc + jd;
        joint_close();
    }
    CU(cudaDeviceSynchronize());
    CU(cudaMemGetInfo(&free_b, &total_b));
    double budget = (double)free_b - opt.reserve_gib * (double)GiB;
    long   ctx = opt.cap_ctx ? opt.cap_ctx : 1L << 20;
    char   why[200] = "";
    int    gh[32], hmax = 0; /* each layer's gpu_heads; the most host heads of a layer */
    double per_head = (double)ctx * 2 * s->d * 2; /* one KV head of one layer */
    if (opt.quick && !opt.cap_ctx) {
        ctx = 131072;
        per_head = (double)ctx * 2 * s->d * 2;
        for (int i = 0; i < NL; i++) gh[i] = s->n_kv - 1;
        snprintf(why, sizeof why, "quick: ctx 128k, 7 of 8 heads on the GPU by choice");
    } else {
        if (!opt.cap_ctx) {
            while (NL * s->n_kv * per_head <= budget) {
                ctx += 65536;
                per_head = (double)ctx * 2 * s->d * 2;
            }
            if (ctx != 1L << 20)
                snprintf(why, sizeof why, "1M tokens (128 GiB) fit in %.1f GiB free less %.0f GiB reserve: ctx raised to %ld",
                         (double)free_b / GiB, opt.reserve_gib, ctx);
        }
        neo_layer_desc pd[32];
        for (int i = 0; i < NL; i++) pd[i] = shape_desc(s, ctx, 0, NEO_PIPELINE_ON), gh[i] = s->n_kv - opt.cap_host;
        if (opt.cap_host) snprintf(why + strlen(why), sizeof why - strlen(why), "; %d of 8 heads of every layer on the host by choice", opt.cap_host);
        else if (neo_plan_gpu_heads(pd, NL, budget > 0 ? (size_t)budget : 0, gh) < 0) {
            fprintf(stderr, "bench: cap: neo_plan_gpu_heads refused the layers\n");
            return;
        }
    }
    double gb = 0, hb = 0, lg[32], lh[32];
    for (int i = 0; i < NL; i++) {
        int dev = gh[i] == NEO_GPU_HEADS_NONE ? 0 : gh[i] ? gh[i] : s->n_kv;
        lg[i] = dev * per_head / (C.hbm * 1e9), lh[i] = (s->n_kv - dev) * per_head;
        gb += dev * per_head, hb += lh[i];
        if (s->n_kv - dev > hmax) hmax = s->n_kv - dev;
    }
    double kv = gb + hb;
    printf("# cap: 32 layers x %ld tokens, KV %.1f GiB: %.0f of %d KV heads on the GPU (neo_plan_gpu_heads unless chosen), at most %d of 8 "
           "a layer on the host (%.1f GiB; %.1f GiB free of %.1f), %.1f GiB pinned on the host. %s\n",
           ctx, kv / GiB, gb / per_head, NL * s->n_kv, hmax, gb / GiB, (double)free_b / GiB, (double)total_b / GiB, hb / GiB, why);
    fflush(stdout);

    neo_layer *L[32];
    double     t0 = now_s();
    for (int i = 0; i < NL; i++) {
        neo_layer_desc d = shape_desc(s, ctx, gh[i], NEO_PIPELINE_ON);
        neo_status     st = neo_layer_create(rt_gpu, &d, &L[i]);
        if (st != NEO_OK) {
            fprintf(stderr, "bench: cap: layer %d: %s\n", i, neo_status_string(st));
            brow r = row_new("cap", s->name, ctx, "on");
            snprintf(r.note, sizeof r.note, "layer %d of 32 could not be created: %s", i, neo_status_string(st));
            emit(&r);
            for (int j = 0; j < i; j++) neo_layer_destroy(L[j]);
            return;
        }
    }
    double t_alloc = now_s() - t0;
    t0 = now_s();
    for (int i = 0; i < NL; i++) fill_layer(L[i], s, ctx, 1);
    CU(cudaDeviceSynchronize());
    double t_fill = now_s() - t0;
    printf("# cap: allocation (device + pinned) %.1f s; fill by neo_attn_append in %d-token batches %.1f s (%.1f GB/s of f16 KV)\n",
           t_alloc, FILL_TOKENS, t_fill, kv / t_fill * 1e-9);
    fflush(stdout);

    int       reps = opt.quick ? 2 : 3;
    double    ta[8];
    host_ceil hc = {0, 0};
    host_sample(&hc, 0);
    double on_s = time_steps(L, NL, dq, dout, reps, ta);
    host_sample(&hc, 0);
    check_out(1, s->n_head * s->d);
    long long ov = overlapped(L, NL);
    char mname[24];
    snprintf(mname, sizeof mname, "on-%d/8", hmax);
    brow r = timed_row("cap", s->name, ctx, mname, NL, reps, on_s, gb, hb);
    r.bound_us = cap_bound(lg, lh, NL, hc.dram, 0) * 1e6;
    snprintf(r.note, sizeof r.note, "%.1f ms/step (bound %.1f: each layer's slower half, the host's at DRAM read, %.1f GB/s around the row); "
             "%lld overlapped calls; fill %.1fs", on_s * 1e3, r.bound_us * 1e-3, hc.dram, ov, t_fill);
    emit(&r);

    /* the same layers, streamed back: the pipeline field is what AUTO itself switches per call */
    for (int i = 0; i < NL; i++) L[i]->pipeline = NEO_PIPELINE_OFF;
    double off_s = time_steps(L, NL, dq, dout, reps, ta);
    check_out(1, s->n_head * s->d);
    snprintf(mname, sizeof mname, "off-%d/8", hmax);
    r = timed_row("cap", s->name, ctx, mname, NL, reps, off_s, gb, hb);
    r.bound_us = cap_bound(lg, lh, NL, C.h2d, 1) * 1e6;
    snprintf(r.note, sizeof r.note, "%.1f ms/step (bound %.1f: each layer's host half over pinned H2D or both halves at HBM, the larger); OFF / ON = %.2f", off_s * 1e3,
             r.bound_us * 1e-3, off_s / on_s);
    emit(&r);

    /* and the hybrid, at the joint ceiling's share */
    for (int i = 0; i < NL; i++) L[i]->pipeline = NEO_PIPELINE_HYBRID, L[i]->cpu_share = C.share;
    ov = overlapped(L, NL);
    double hyb_s = time_steps(L, NL, dq, dout, reps, ta);
    check_out(1, s->n_head * s->d);
    snprintf(mname, sizeof mname, "hybrid-%d/8", hmax);
    r = timed_row("cap", s->name, ctx, mname, NL, reps, hyb_s, gb, hb);
    r.bound_us = cap_bound(lg, lh, NL, cap_joint, 0) * 1e6;
    snprintf(r.note, sizeof r.note,
             "%.1f ms/step (bound %.1f: each layer's slower half, the host's at the CPU + DMA joint read, %.1f GB/s at the section's "
             "start); CPU share %.2f; HYBRID / ON = %.2f; %lld overlapped calls",
             hyb_s * 1e3, r.bound_us * 1e-3, cap_joint, (double)C.share, hyb_s / on_s, overlapped(L, NL) - ov);
    emit(&r);
    for (int i = 0; i < NL; i++) neo_layer_destroy(L[i]);

    /* CPU-only: the whole cache on the host. One layer (4+ GiB, far past any LLC) is measured and
       the step is 32 of it: 32 would not fit in the host's RAM beside the rest. */
    neo_layer *Lc = NULL;
    neo_layer_desc d = shape_desc(s, ctx, 0, NEO_PIPELINE_OFF);
    r = row_new("cap", s->name, ctx, "cpu-est");
    r.kv_bytes = kv;
    r.host_bytes = kv;
    neo_status cs = neo_layer_create(rt_cpu, &d, &Lc);
    if (cs != NEO_OK) {
        snprintf(r.note, sizeof r.note, "a CPU layer of %.1f GiB could not be allocated: %s", kv / NL / GiB, neo_status_string(cs));
        emit(&r);
        return;
    }
    t0 = now_s();
    fill_layer(Lc, s, ctx, 0);
    double t_cfill = now_s() - t0;
    double tl[16];
    int    nt = opt.quick ? 3 : 5;
    check(neo_attn_decode(Lc, hq, hout), "neo_attn_decode");
    hc.dram = 0;
    host_sample(&hc, 0);
    for (int i = 0; i < nt; i++) {
        double a = now_s();
        check(neo_attn_decode(Lc, hq, hout), "neo_attn_decode");
        tl[i] = now_s() - a;
    }
    host_sample(&hc, 0);
    r.bound_us = kv / (hc.dram * 1e9) * 1e6;
    check_out(0, s->n_head * s->d);
    double cpu_s = median(tl, nt) * NL;
    r.layers = NL;
    r.calls = nt;
    r.us = cpu_s * 1e6;
    r.gbs = kv / cpu_s * 1e-9;
    snprintf(r.note, sizeof r.note, "%.1f ms/step = 32 x one CPU layer's median (all %.1f GiB cannot be in RAM too); "
             "CPU-only / ON = %.2f; CPU fill of the layer %.1fs",
             cpu_s * 1e3, kv / GiB, cpu_s / on_s, t_cfill);
    emit(&r);
    neo_layer_destroy(Lc);
}

/* ===============================================================================================
   batch: many sequences of one model layer in one call
   =============================================================================================== */

/* The host halves of L[0..n) alone on rt's pool, from host q / out (library internals: the
   public batch call runs both halves); seconds, wall clock. */
static double time_cpu_half(neo_layer **L, int n, const float *q, float *out) {
    neo_layer **H = (neo_layer **)xmalloc((size_t)n * sizeof *H);
    int         m = 0;
    for (int i = 0; i < n; i++)
        if (L[i]->gpu_heads < L[i]->n_head_kv) H[m++] = L[i];
    double w0 = now_s();
    if (m) check(neo__batch_cpu(H, m, q, out), "host halves");
    neo__pool_wait(&L[0]->rt->pool);
    double sec = now_s() - w0;
    free(H);
    return sec;
}

/* Seconds between two cudaEvents on the engine's stream: ev_start records the first, ev_stop
   the second, waits for it and frees both. */
typedef struct evpair {
    cudaEvent_t e0, e1;
} evpair;
static void ev_start(evpair *p) {
    CU(cudaEventCreate(&p->e0));
    CU(cudaEventCreate(&p->e1));
    CU(cudaEventRecord(p->e0, stream));
}
static double ev_stop(evpair *p) {
    float ms;
    CU(cudaEventRecord(p->e1, stream));
    CU(cudaEventSynchronize(p->e1));
    CU(cudaEventElapsedTime(&ms, p->e0, p->e1));
    CU(cudaEventDestroy(p->e0));
    CU(cudaEventDestroy(p->e1));
    return ms * 1e-3;
}

/* The device halves of L[0..n) alone in one attend_batch (what a GPU-only batch launches);
   seconds, cudaEvents. */
static double time_gpu_half(neo_layer **L, int n, const float *q, float *out) {
    neo_runtime    *rt = L[0]->rt;
    neo__attn_args *e = (neo__attn_args *)xmalloc((size_t)n * sizeof *e);
    neo__attn_batch b;
    evpair          ev;
    double          sec;
    int             m = 0;
    for (int i = 0; i < n; i++) {
        if (L[i]->gpu_heads == 0) continue;
        neo__layer_args(L[i], &e[m], q + (size_t)i * 32 * 128, 1, out + (size_t)i * 32 * 128, 1);
        e[m].k = L[i]->k_dev, e[m].v = L[i]->v_dev, e[m++].h1 = L[i]->gpu_heads;
    }
    b.entries = e, b.n = m;
    ev_start(&ev);
    if (m) check((neo_status)rt->attn.attend_batch(rt->dev_state, &b, NEO__STREAM_MAIN), "device halves");
    sec = ev_stop(&ev);
    free(e);
    return sec;
}

/* A hybrid batch's host cells after each layer's cut alone, as its batch call brings them to
   the device: the layers whose cells there fit the bound for reading in place attended so in one
   launch (each into its state in st, device memory of [n][32][130] floats), then the others'
   copied as their stream-back copies them, K then V (a block of its host heads each), back to
   back into d (device memory of at least any layer's host half), all on the engine's stream,
   whose order the library's copy stream keeps too; seconds, cudaEvents. */
static double time_hyb_stream(neo_layer **L, int n, const float *q, char *d, float *st) {
    neo__attn_args *e = (neo__attn_args *)xmalloc((size_t)n * sizeof *e);
    neo__attn_batch b;
    evpair          ev;
    double          sec;
    int             m = 0;
    for (int i = 0; i < n; i++) {
        neo_layer *H = L[i];
        const int  cut = neo__batch_cut(H);
        if (H->gpu_heads == H->n_head_kv || cut == H->len || !neo__in_place_cells(H, 1, H->len - cut)) continue;
        neo__layer_args(H, &e[m], q + (size_t)i * 32 * 128, 1, NULL, 1);
        neo__host_in_place(H, &e[m]);
        e[m].c0 = cut;
        e[m++].state = st + (size_t)i * 32 * 130;
    }
    b.entries = e, b.n = m;
    ev_start(&ev);
    if (m) check((neo_status)rt_gpu->attn.attend_batch(rt_gpu->dev_state, &b, NEO__STREAM_MAIN), "host cells in place");
    for (int i = 0; i < n; i++) {
        const neo_layer *H = L[i];
        const size_t     es = neo__type_size(H->kv_type), hh = (size_t)(H->n_head_kv - H->gpu_heads);
        const int        cut = neo__batch_cut(H);
        const size_t     kw = (size_t)(H->len - cut) * H->head_dim * es, vw = (size_t)(H->len - cut) * H->head_dim_v * es;
        if (!hh || !kw || neo__in_place_cells(H, 1, H->len - cut)) continue;
        CU(cudaMemcpy2DAsync(d, kw, (const char *)H->k_host + (size_t)cut * H->head_dim * es, (size_t)H->n_ctx * H->head_dim * es, kw, hh,
                             cudaMemcpyHostToDevice, stream));
        CU(cudaMemcpy2DAsync(d + kw * hh, vw, (const char *)H->v_host + (size_t)cut * H->head_dim_v * es,
                             (size_t)H->n_ctx * H->head_dim_v * es, vw, hh, cudaMemcpyHostToDevice, stream));
    }
    sec = ev_stop(&ev);
    free(e);
    return sec;
}

/* A hybrid batch's CPU cells alone: time_cpu_half with each split layer's length at its cut
   (the cells before it, the query after them all). */
static double time_hyb_cpu(neo_layer **L, int n, const float *q, float *out) {
    int   *len = (int *)xmalloc((size_t)n * sizeof *len);
    double sec;
    for (int i = 0; i < n; i++) {
        len[i] = L[i]->len;
        if (L[i]->gpu_heads < L[i]->n_head_kv) L[i]->len = neo__batch_cut(L[i]);
    }
    sec = time_cpu_half(L, n, q, out);
    for (int i = 0; i < n; i++) L[i]->len = len[i];
    free(len);
    return sec;
}

/* Ends the capture begun on stream (ok: the captured calls returned OK), counts the graph's
   kernel nodes into *kernels and replays it (replay_median); seconds a replay, < 0 when the
   capture failed. */
static double replay_capture(int ok, int *kernels) {
    cudaGraph_t     g = NULL;
    cudaGraphExec_t ge = NULL;
    size_t          nn = 0;
    *kernels = 0;
    if (cudaStreamEndCapture(stream, &g) != cudaSuccess || !ok || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        if (g) cudaGraphDestroy(g);
        return -1;
    }
    CU(cudaGraphGetNodes(g, NULL, &nn));
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)xmalloc((nn ? nn : 1) * sizeof *nodes);
    CU(cudaGraphGetNodes(g, nodes, &nn));
    for (size_t i = 0; i < nn; i++) {
        enum cudaGraphNodeType ty;
        CU(cudaGraphNodeGetType(nodes[i], &ty));
        *kernels += ty == cudaGraphNodeTypeKernel;
    }
    free(nodes);
    const double sec = replay_median(ge, stream, NULL);
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    return sec;
}

/* One step of L[0..n) (the batch call, or n single calls with loop) captured into a CUDA graph
   and replayed (the lengths read on the device); seconds a step, cudaEvents, median; < 0 when the
   capture failed. *kernels: the graph's kernel nodes. */
static double time_batch_graph(neo_layer **L, int n, int loop, float *q, float *out, int *kernels) {
    int ok = 1;
    *kernels = 0;
    CU(cudaStreamSynchronize(stream));
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    if (loop)
        for (int i = 0; i < n && ok; i++) ok = neo_attn_decode(L[i], q + (size_t)i * 32 * 128, out + (size_t)i * 32 * 128) == NEO_OK;
    else ok = neo_attn_decode_batch(L, n, q, out) == NEO_OK;
    return replay_capture(ok, kernels);
}

typedef struct bmode {
    const char  *name;
    int          loop;       /* single calls one after another instead of one batch call */
    int          host_heads; /* KV heads of each split sequence on the host */
    int          none_every; /* > 0: every none_every-th sequence has all its heads on the host */
    neo_pipeline pipe;
} bmode;

/* A split batch row's note (r->note, k characters long): its halves or parts each timed alone
   on the same layers (the nl copies of the batch in L[0..nl * n) in turn), medians of 15. ON:
   the device halves and the host halves, and the join, the step's time beyond the slower.
   HYBRID: the device heads' launch, the host cells after each layer's cut read in place or
   copied (time_hyb_stream) and the CPU cells before it. */
static void halves_note(brow *r, int k, neo_layer **L, int n, int nl, neo_pipeline pipe, const float *q, float *out,
                        const float *hq_b, float *hout_b) {
    double ag[15], ay[15], ac[15];
    size_t most = 0; /* the largest host half, for the copies' device buffer */
    char  *d = NULL;
    float *st = NULL; /* the in-place reads' states */
    if (pipe != NEO_PIPELINE_ON && pipe != NEO_PIPELINE_HYBRID) return;
    for (int i = 0; i < n * nl; i++) {
        const size_t b = (size_t)(L[i]->n_head_kv - L[i]->gpu_heads) * (size_t)L[i]->len * (size_t)(L[i]->head_dim + L[i]->head_dim_v) *
                         neo__type_size(L[i]->kv_type);
        if (b > most) most = b;
    }
    if (pipe == NEO_PIPELINE_HYBRID) {
        CU(cudaMalloc((void **)&d, most));
        CU(cudaMalloc((void **)&st, (size_t)n * 32 * 130 * sizeof(float)));
    }
    for (int i = 0; i < 15; i++) {
        neo_layer **Li = L + (size_t)(i % nl) * n;
        ag[i] = time_gpu_half(Li, n, q, out);
        ay[i] = d ? time_hyb_stream(Li, n, q, d, st) : 0;
        check(neo_runtime_sync(rt_gpu), "sync");
        ac[i] = pipe == NEO_PIPELINE_HYBRID ? time_hyb_cpu(Li, n, hq_b, hout_b) : time_cpu_half(Li, n, hq_b, hout_b);
    }
    const double tg = median(ag, 15), ty = median(ay, 15), tc = median(ac, 15);
    if (d) CU(cudaFree(d)), CU(cudaFree(st));
    if (pipe == NEO_PIPELINE_ON)
        snprintf(r->note + k, sizeof r->note - (size_t)k, "; halves alone (medians of 15): GPU %.1fus, CPU %.1fus; join %.1fus", tg * 1e6,
                 tc * 1e6, r->us - 1e6 * (tg > tc ? tg : tc));
    else
        snprintf(r->note + k, sizeof r->note - (size_t)k,
                 "; parts alone (medians of 15): device heads %.1fus, the cells after the cut to the device %.1fus, CPU cells before it %.1fus",
                 tg * 1e6, ty * 1e6, tc * 1e6);
}

/* The host heads of sequence i of a batch row: all of them (every none_every-th sequence), none,
   or host_heads. */
static int batch_host_heads(const bmode *m, int i) {
    return m->none_every > 0 ? (i % m->none_every == 0 ? LLAMA.n_kv : 0) : m->host_heads;
}

/* One batch row: n Llama-3-8B layers (one per sequence) of lengths len[], decoded together. A
   model's step passes through its other layers between two steps of one, so the steps rotate
   over nl copies of the batch (L[c * n + i]), as many as make the host side 2x the LLC (and 256
   MiB), so that it does not hold the host heads from one step to the next. */
static void batch_row(const char *spec, const int *len, int n, const bmode *m) {
    size_t      per = (size_t)n * 32 * 128;
    float      *q = NULL, *out = NULL, *hq_b = (float *)xmalloc(per * sizeof(float)), *hout_b = (float *)xmalloc(per * sizeof(float));
    double      gb = 0, hb = 0, t[64], want = 1;
    long        maxlen = 0;
    int         reps = 0, split = 0, nl;
    for (int i = 0; i < n; i++) {
        const int hh = batch_host_heads(m, i);
        gb += (double)kv_layer_bytes(&LLAMA, len[i]) * (LLAMA.n_kv - hh) / LLAMA.n_kv;
        hb += (double)kv_layer_bytes(&LLAMA, len[i]) * hh / LLAMA.n_kv;
        split |= hh > 0;
        if (len[i] > maxlen) maxlen = len[i];
    }
    if (hb > 0) want = ceil(fmax(2.0 * (double)llc, 256.0 * MiB) / hb);
    if (want * gb > 24.0 * GiB) want = floor(24.0 * GiB / gb);
    nl = want < 1 ? 1 : (int)want;
    neo_layer **L = (neo_layer **)xmalloc((size_t)nl * n * sizeof *L);
    fill_uniform(hq_b, per, 1.0f, 21);
    CU(cudaMalloc((void **)&q, per * sizeof(float)));
    CU(cudaMalloc((void **)&out, per * sizeof(float)));
    CU(cudaMemcpy(q, hq_b, per * sizeof(float), cudaMemcpyHostToDevice));
    for (int j = 0; j < nl * n; j++) {
        const int      i = j % n, hh = batch_host_heads(m, i);
        neo_layer_desc d = shape_desc(&LLAMA, len[i], hh == LLAMA.n_kv ? NEO_GPU_HEADS_NONE : LLAMA.n_kv - hh, m->pipe);
        if (hh == 0) d.gpu_heads = 0;
        if (m->pipe == NEO_PIPELINE_HYBRID) d.cpu_share = C.share;
        check(neo_layer_create(rt_gpu, &d, &L[j]), "neo_layer_create");
        fill_layer(L[j], &LLAMA, len[i], 1);
    }
    CU(cudaDeviceSynchronize());
    /* a batch runs a layer that is still measuring as a single call of its own */
    for (int c = 0; c < nl && m->pipe == NEO_PIPELINE_AUTO; c++) auto_settle(L + (size_t)c * n, n, q, out, (size_t)32 * 128);
    double      t_end = now_s() + opt.seconds * 2;
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    /* GPU-only steps: cudaEvents on the engine stream; split ones: wall clock with a sync */
    for (int w = -2; reps < 64 && (reps < 5 || (now_s() < t_end && reps < 30)); w++) {
        neo_layer **Lw = L + (size_t)((w + 2) % nl) * n;
        double     w0 = now_s();
        float      ms = 0;
        if (!split) CU(cudaEventRecord(e0, stream));
        if (m->loop)
            for (int i = 0; i < n; i++) check(neo_attn_decode(Lw[i], q + (size_t)i * 32 * 128, out + (size_t)i * 32 * 128), "neo_attn_decode");
        else check(neo_attn_decode_batch(Lw, n, q, out), "neo_attn_decode_batch");
        if (!split) {
            CU(cudaEventRecord(e1, stream));
            CU(cudaEventSynchronize(e1));
            CU(cudaEventElapsedTime(&ms, e0, e1));
        }
        check(neo_runtime_sync(rt_gpu), "neo_runtime_sync");
        if (w >= 0) t[reps++] = split ? now_s() - w0 : ms * 1e-3;
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    CU(cudaMemcpy(hout_b, out, per * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < per; i++)
        if (!isfinite(hout_b[i])) die("decode batch", "non-finite output");
    double sec = median(t, reps);
    brow   r = timed_row("bat", spec, maxlen, m->name, n, reps, sec, gb, hb);
    double b_gpu = gb / (C.hbm * 1e9), b_dram = hb / (C.dram * 1e9), b_pcie = hb / (C.h2d * 1e9);
    double b_off = fmax(b_pcie, (gb + hb) / (C.hbm * 1e9)), b_hyb = fmax(b_gpu, hb / (C.joint * 1e9));
    double b_on = fmax(b_gpu, b_dram);
    r.bound_us = 1e6 * (!split                            ? b_gpu
                        : m->pipe == NEO_PIPELINE_OFF    ? b_off
                        : m->pipe == NEO_PIPELINE_HYBRID ? b_hyb
                        : m->pipe == NEO_PIPELINE_AUTO   ? fmin(fmin(b_on, b_off), b_hyb)
                                                         : b_on);
    int k = snprintf(r.note, sizeof r.note, "%s; %s", m->loop ? "single calls a step" : "one call a step",
                     split ? "wall clock with a sync" : "cudaEvents");
    if (nl > 1) k += snprintf(r.note + k, sizeof r.note - (size_t)k, "; steps over %d copies of the batch in turn", nl);
    if (m->pipe == NEO_PIPELINE_HYBRID) k += snprintf(r.note + k, sizeof r.note - (size_t)k, "; CPU share %.2f", (double)C.share);
    if (m->pipe == NEO_PIPELINE_AUTO) k = auto_note(r.note, sizeof r.note, k, L, nl * n);
    if (split && !m->loop) halves_note(&r, k, L, n, nl, m->pipe, q, out, hq_b, hout_b);
    emit(&r);
    if (!split) { /* the same step from a CUDA graph */
        int    nk = 0;
        double gs = time_batch_graph(L, n, m->loop, q, out, &nk);
        brow   rg = r;
        snprintf(rg.mode, sizeof rg.mode, "%s-graph", m->name);
        if (gs > 0) {
            rg.us = gs * 1e6;
            rg.gbs = gb / gs * 1e-9;
            rg.ratio = rg.bound_us / rg.us;
            snprintf(rg.note, sizeof rg.note, "%s captured once, replayed (lengths read on the device); %d kernels in the graph",
                     m->loop ? "single calls" : "one call", nk);
        } else {
            rg.us = rg.gbs = rg.ratio = NAN;
            snprintf(rg.note, sizeof rg.note, "stream capture failed");
        }
        emit(&rg);
    }
    for (int j = 0; j < nl * n; j++) neo_layer_destroy(L[j]);
    CU(cudaFree(q));
    CU(cudaFree(out));
    free(L), free(hq_b), free(hout_b);
}

/* What one step of the append rows runs on L[0..n): 0 neo_attn_append_batch, 1 n
   neo_attn_append, 2 the batch append and neo_attn_decode_batch, 3 each layer's append and
   decode. The token's k and v come from the fill's random batch. 1 when every call returned OK. */
static int append_step(neo_layer **L, int n, int what, float *q, float *out) {
    const size_t kv = (size_t)LLAMA.n_kv * LLAMA.d, qo = (size_t)LLAMA.n_head * LLAMA.d;
    int          ok = 1;
    if (what == 0 || what == 2) ok = neo_attn_append_batch(L, n, dK, dV) == NEO_OK;
    if (what == 2 && ok) ok = neo_attn_decode_batch(L, n, q, out) == NEO_OK;
    for (int i = 0; i < n && ok && (what == 1 || what == 3); i++) {
        ok = neo_attn_append(L[i], dK + i * kv, dV + i * kv, 1) == NEO_OK;
        if (what == 3 && ok) ok = neo_attn_decode(L[i], q + i * qo, out + i * qo) == NEO_OK;
    }
    return ok;
}

/* append_step's median µs, eager (cudaEvents around 20 steps after 2) or captured into a CUDA
   graph once and replayed (replay_median); *kernels the graph's kernel nodes. < 0 when the
   capture failed. Each step appends a row to every layer. */
static double time_append_step(neo_layer **L, int n, int what, int graph, float *q, float *out, int *kernels) {
    double t[20];
    *kernels = 0;
    CU(cudaStreamSynchronize(stream));
    if (!graph) {
        cudaEvent_t e0, e1;
        CU(cudaEventCreate(&e0));
        CU(cudaEventCreate(&e1));
        for (int r = -2; r < 20; r++) {
            float ms;
            CU(cudaEventRecord(e0, stream));
            if (!append_step(L, n, what, q, out)) die("append rows", "a call failed");
            CU(cudaEventRecord(e1, stream));
            CU(cudaEventSynchronize(e1));
            CU(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 0) t[r] = ms * 1e-3;
        }
        CU(cudaEventDestroy(e0));
        CU(cudaEventDestroy(e1));
        return median(t, 20);
    }
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return (void)cudaGetLastError(), -1;
    return replay_capture(append_step(L, n, what, q, out), kernels);
}

/* The appends of a step of 64 sequences (one Llama-3-8B layer each, every head on the GPU, 4096
   cells and room for the rows the rows append): the batch append against single appends, eager
   and from a CUDA graph, then a whole attention step (append + decode of every sequence) both
   ways. Append rows have no bound (their bytes are a few hundred KB); step rows are held to the
   decode's KV bytes at the copy rate. */
static void run_append(void) {
    enum { N = 64, CTX = 4096 };
    static const char *names[4] = {"app-batch", "app-loop", "step-batch", "step-loop"};
    neo_layer        *L[N];
    const size_t      per = (size_t)N * LLAMA.n_head * LLAMA.d;
    float            *q = NULL, *out = NULL, *h = (float *)xmalloc(per * sizeof(float));
    fill_uniform(h, per, 1.0f, 23);
    CU(cudaMalloc((void **)&q, per * sizeof(float)));
    CU(cudaMalloc((void **)&out, per * sizeof(float)));
    CU(cudaMemcpy(q, h, per * sizeof(float), cudaMemcpyHostToDevice));
    for (int i = 0; i < N; i++) {
        neo_layer_desc d = shape_desc(&LLAMA, CTX + 512, LLAMA.n_kv, NEO_PIPELINE_OFF);
        check(neo_layer_create(rt_gpu, &d, &L[i]), "neo_layer_create");
        fill_layer(L[i], &LLAMA, CTX, 1);
    }
    for (int what = 0; what < 4; what++)
        for (int graph = 0; graph < 2; graph++) {
            int  nk = 0;
            long c0 = 0, c1 = 0; /* the layers' cells before and after the row */
            check(neo_runtime_sync(rt_gpu), "neo_runtime_sync");
            for (int i = 0; i < N; i++) c0 += neo_layer_length(L[i]);
            const double sec = time_append_step(L, N, what, graph, q, out, &nk);
            check(neo_runtime_sync(rt_gpu), "neo_runtime_sync");
            for (int i = 0; i < N; i++) c1 += neo_layer_length(L[i]);
            const double gb = (double)kv_layer_bytes(&LLAMA, 1) * (double)(c0 + c1) / 2;
            char         mname[20];
            snprintf(mname, sizeof mname, "%s%s", names[what], graph ? "-graph" : "");
            brow r = timed_row("app", "64x4k", c0 / N, mname, N, (what & 1 ? N : 1) * (what >= 2 ? 2 : 1), sec > 0 ? sec : NAN, what >= 2 ? gb : 0, 0);
            r.bound_us = what >= 2 ? 1e6 * gb / (C.hbm * 1e9) : 0;
            if (sec <= 0) snprintf(r.note, sizeof r.note, "stream capture failed");
            else if (graph) snprintf(r.note, sizeof r.note, "captured once, replayed (lengths on the device); %d kernels in the graph", nk);
            else snprintf(r.note, sizeof r.note, "eager, cudaEvents, median of 20");
            emit(&r);
        }
    CU(cudaStreamSynchronize(stream));
    for (int i = 0; i < N; i++) neo_layer_destroy(L[i]);
    CU(cudaFree(q));
    CU(cudaFree(out));
    free(h);
}

static void run_batch(void) {
    static const struct {
        const char *name;
        int         n, lo, hi;
    } specs[3] = {{"64x4k", 64, 4096, 4096}, {"16x32k", 16, 32768, 32768}, {"64xU512-32k", 64, 512, 32768}};
    static const bmode modes[9] = {{"gpu-batch", 0, 0, 0, NEO_PIPELINE_ON},          {"gpu-loop", 1, 0, 0, NEO_PIPELINE_ON},
                                   {"on-1/8", 0, 1, 0, NEO_PIPELINE_ON},             {"off-1/8", 0, 1, 0, NEO_PIPELINE_OFF},
                                   {"hybrid-1/8", 0, 1, 0, NEO_PIPELINE_HYBRID},     {"auto-1/8", 0, 1, 0, NEO_PIPELINE_AUTO},
                                   {"on-1/8-loop", 1, 1, 0, NEO_PIPELINE_ON},        {"hybrid-1/8-loop", 1, 1, 0, NEO_PIPELINE_HYBRID},
                                   {"none-1/4-on", 0, 0, 4, NEO_PIPELINE_ON}};
    uint64_t s = 0x5eed;
    for (int si = 0; si < 3; si++) {
        int len[64];
        for (int i = 0; i < specs[si].n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            len[i] = specs[si].lo + (int)((s >> 33) % (uint64_t)(specs[si].hi - specs[si].lo + 1));
        }
        for (int mi = 0; mi < 9; mi++)
            if (!opt.quick || mi < 3) batch_row(specs[si].name, len, specs[si].n, &modes[mi]);
    }
}

/* ===============================================================================================
   main
   =============================================================================================== */

static void usage(void) {
    fprintf(stderr, "usage: bench [--quick] [--csv FILE] [--sections attn,batch,app,e2e,cap,sweep] [--threads N] [--seconds S]\n"
                    "             [--cap-ctx N] [--cap-host-heads H] [--e2e-ctx N] [--sweep-ctx N] [--sweep-qwen]\n"
                    "             [--gpu-reserve-gib G] [--hybrid-share F]\n"
                    "  neo_attn on the GPU machine: ceilings, attention rows, decode loop, capacity (see the top of\n"
                    "  examples/bench/bench.c for what each row measures).\n");
}


int main(int argc, char **argv) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    opt.threads = ncpu > 0 ? (int)ncpu : 1;
    opt.attn = opt.batch = opt.app = opt.e2e = opt.cap = 1;
    opt.seconds = -1;
    opt.reserve_gib = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick")) opt.quick = 1;
        else if (!strcmp(a, "--csv") && i + 1 < argc) opt.csv_path = argv[++i];
        else if (!strcmp(a, "--threads") && i + 1 < argc) opt.threads = (int)parse_flag("bench", argv[++i], a, 1, 256);
        else if (!strcmp(a, "--cap-ctx") && i + 1 < argc) opt.cap_ctx = (int)parse_flag("bench", argv[++i], a, 256, 1 << 30);
        else if (!strcmp(a, "--e2e-ctx") && i + 1 < argc) opt.e2e_ctx = (int)parse_flag("bench", argv[++i], a, 1, 1 << 20);
        else if (!strcmp(a, "--sweep-qwen")) opt.sweep_qwen = 1;
        else if (!strcmp(a, "--cap-host-heads") && i + 1 < argc) opt.cap_host = (int)parse_flag("bench", argv[++i], a, 1, 8);
        else if (!strcmp(a, "--sweep-ctx") && i + 1 < argc) opt.sweep_ctx = (int)parse_flag("bench", argv[++i], a, 1, 1 << 20);
        else if (!strcmp(a, "--seconds") && i + 1 < argc) opt.seconds = strtod(argv[++i], NULL);
        else if (!strcmp(a, "--gpu-reserve-gib") && i + 1 < argc) opt.reserve_gib = strtod(argv[++i], NULL);
        else if (!strcmp(a, "--hybrid-share") && i + 1 < argc) {
            opt.share = strtod(argv[++i], NULL);
            if (!(opt.share > 0 && opt.share < 1)) {
                fprintf(stderr, "bench: --hybrid-share must be in (0, 1)\n");
                return 1;
            }
        }
        else if (!strcmp(a, "--sections") && i + 1 < argc) {
            const char *l = argv[++i];
            opt.attn = strstr(l, "attn") != NULL;
            opt.batch = strstr(l, "batch") != NULL;
            opt.app = strstr(l, "app") != NULL;
            opt.e2e = strstr(l, "e2e") != NULL;
            opt.cap = strstr(l, "cap") != NULL;
            opt.sweep = strstr(l, "sweep") != NULL;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        } else {
            usage();
            return 1;
        }
    }
    if (!(opt.seconds > 0)) opt.seconds = opt.quick ? 0.12 : 0.35;
    double t_start = now_s();

    /* machine */
    char   model[256], date[64];
    time_t tnow = time(NULL);
    struct tm tm_utc;
    gmtime_r(&tnow, &tm_utc);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm_utc);
    cpu_model(model, sizeof model);
    {
        size_t sc, sys;
        llc = llc_bytes(&sc, &sys);
    }
    struct cudaDeviceProp prop;
    int                   drv = 0, rtv = 0;
    CU(cudaSetDevice(0));
    CU(cudaGetDeviceProperties(&prop, 0));
    CU(cudaDriverGetVersion(&drv));
    CU(cudaRuntimeGetVersion(&rtv));
    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    neo_runtime_desc rd;
    memset(&rd, 0, sizeof rd);
    rd.n_threads = opt.threads;
    check(neo_runtime_create(&rd, &rt_cpu), "neo_runtime_create (CPU)");
    rd.gpu = 1;
    rd.gpu_stream = stream;
    check(neo_runtime_create(&rd, &rt_gpu), "neo_runtime_create (GPU)");
    neo_runtime_info ri;
    check(neo_runtime_get_info(rt_cpu, &ri), "neo_runtime_get_info");

    if (opt.csv_path) {
        if (!(csv = fopen(opt.csv_path, "w"))) die(opt.csv_path, strerror(errno));
        fprintf(csv, "# date=%s\n# commit=%s\n# gpu=%s, %d SMs, %.1f GiB, L2 %d MiB, driver %d, runtime %d\n", date, NEO_BENCH_COMMIT,
                prop.name, prop.multiProcessorCount, (double)prop.totalGlobalMem / GiB, prop.l2CacheSize >> 20, drv, rtv);
        fprintf(csv, "# cpu=%s, %ld cores, %d threads, %s, LLC %zu MiB, RAM %.1f GiB\n# quick=%d\n", model, ncpu, ri.n_threads,
                neo_cpu_isa_name(ri.cpu_isa), llc >> 20, (double)meminfo_kb("MemTotal") / (1 << 20), opt.quick);
        fprintf(csv, "section,shape,ctx,mode,layers,calls,us,gbs,bound_us,ratio,kv_bytes,gpu_bytes,host_bytes,note\n");
    }
    printf("# neo_attn %s bench | %s | commit %s%s\n", neo_attn_version(), date, NEO_BENCH_COMMIT, opt.quick ? " | --quick" : "");
    printf("# GPU %s, %d SMs, %.1f GiB, L2 %d MiB, driver %d, runtime %d\n", prop.name, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / GiB, prop.l2CacheSize >> 20, drv, rtv);
    printf("# CPU %s, %ld cores, %d attention threads, %s kernels, LLC %zu MiB, RAM %.1f GiB (MemTotal now)\n", model, ncpu,
           ri.n_threads, neo_cpu_isa_name(ri.cpu_isa), llc >> 20, (double)meminfo_kb("MemTotal") / (1 << 20));
    fflush(stdout);

    measure_ceilings(stream);
    batch_init();
    print_header();
    if (opt.attn) run_attn();
    if (opt.app) run_append();
    if (opt.batch) run_batch();
    if (opt.e2e) run_e2e();
    if (opt.cap) run_capacity();
    if (opt.sweep) run_sweep();

    C.dram_end = bw_best(&bw, 0, 3);
    char note[160];
    snprintf(note, sizeof note, "%d threads, best of 3, at the end of the run (start: %.1f)", opt.threads, C.dram);
    ceiling_row("dram_read_end", C.dram_end, "GB/s", note);
    printf("# the host read %.1f GB/s at the start and %.1f at the end: the attn and cap rows with a host side are held to "
           "samples taken around each of them (their notes), the bat and e2e rows to the start's\n",
           C.dram, C.dram_end);
    joint_close();
    bw_destroy(&bw);
    printf("# total %.1f s\n", now_s() - t_start);

    CU(cudaFree(dK));
    CU(cudaFree(dV));
    CU(cudaFree(dq));
    CU(cudaFree(dout));
    free(hK);
    free(hV);
    free(hq);
    free(hout);
    neo_runtime_destroy(rt_gpu);
    neo_runtime_destroy(rt_cpu);
    CU(cudaStreamDestroy(stream));
    if (csv) fclose(csv);
    return 0;
}
