/* bench_cpu.c - CPU decode-attention benchmark for neo_attn (a benchmark, not a test).

   WHAT IT MEASURES
   ----------------
   One decode step of attention (neo_attn_decode) for a Llama-3-8B-like layer: 32 query heads,
   8 KV heads, head_dim 128 (--shape names another, e.g. 14,2,64 for Qwen2.5-0.5B), f16 KV cache,
   on a CPU-only runtime, at contexts 4096 and 32768 (--ctx N adds more, e.g. --ctx 131072).
   Decode attention reads every K and V cell once per call and does 4 flops per byte of it at
   Llama-3-8B's shape (each f16 K/V element serves the 4 query heads of its GQA group: one FMA
   for the score, one for the output; a group of G does G), so its ceiling is the machine's
   memory read bandwidth. The program therefore measures that ceiling itself, in the same run
   and with the same thread count, and prints every attention figure as a ratio to it:

   - read bandwidth: the threads sum the uint64 words of a large buffer in 1 MiB pieces taken
     from a shared counter, as the pool takes its tasks, asking for the line 4 KiB ahead as the
     attention kernels do (bench_util.h) (>= 1 GiB, >= 8x the largest KV cache, >= 4x the LLC;
     capped to a third of the available memory), pages touched first, nothing pinned. At the start: the best of 7 reads
     with the benchmark's thread count and of 7 with one thread (the header line). The
     bandwidth of a virtual or shared machine drifts by tens of percent within seconds, so every
     attention row is split into 10 rounds, each starting with one more read of the buffer, and
     the row's read_GB/s is the best of its 10 samples: the row and its ceiling are measured
     over the same seconds, the ceiling as the most the machine did (bench_util.h's best).
   - attention: the cache is filled with random K/V (appended in chunks of 1024 tokens), then
     after a warm-up many neo_attn_decode calls are timed one by one with CLOCK_MONOTONIC (the
     first call after each bandwidth sample is not timed) and the median is reported. KV bytes
     read per call = len * n_head_kv * (head_dim + head_dim_v) * 2 (f16): at the default shape
     16.8 MB at 4096 and 134 MB at 32768.
       hot  - the same layer every call. A 4k cache (16.8 MB) may sit in the last-level cache,
              so this row can beat DRAM bandwidth; it shows the kernel's compute speed.
       cold - the calls rotate over enough distinct layers (>= 2, and >= 4x the LLC in total)
              that every call streams its KV from DRAM, as in a real model with many layers.
              LLC = the larger of sysconf(_SC_LEVEL3_CACHE_SIZE) and /sys (a VM's CPUID can
              report the host's), 64 MiB if neither is known.
              This is the row to compare with the read bandwidth.

   HOW TO READ IT
   --------------
       ctx mode  threads isa     layers  calls  median_us     GB/s read_GB/s  ratio  other
   layers     KV caches the calls rotate over (1 = hot)
   calls      timed decode calls
   median_us  time of one decode call (all 32 heads), median over the timed calls
   GB/s       KV bytes read per call / median_us
   read_GB/s  this machine's read bandwidth with the same thread count, sampled during the row
   ratio      GB/s / read_GB/s: 1.0 means decode runs at memory speed. The cold rows are the
              honest figure; a hot 4k row above 1.0 only means the cache sat in the LLC.
   other      CPU time, in cores, that other processes and the hypervisor (steal) took while
              the row was timed (from /proc/stat). On a 2-core machine anything above ~0.1
              means the row is disturbed, and the program warns on stderr. The last line gives
              the range of all read-bandwidth samples of the run.

   USAGE
   -----
       make bench                 (or build/bench-cpu [options])
       --shape Q,KV,D query heads, KV heads, head_dim (default 32,8,128)
       --ctx N        add context N (repeatable; 4096 and 32768 are always run)
       --threads N    threads for both the attention pool and the bandwidth test (default:
                      online cores)
       --seconds S    time spent timing each row (default 1.5)
       --csv          print CSV (one row per line, machine fields on every row) instead
   Total run time is about 15 s on a 2-core machine with the defaults (35 s with --ctx 131072). */

#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include "examples/bench/bench_util.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* the layer's shape: Llama-3-8B's unless --shape names another (head_dim_v = head_dim) */
static int N_HEAD = 32, N_HEAD_KV = 8, HEAD_DIM = 128, HEAD_DIM_V = 128;
#define FILL_CHUNK  1024   /* tokens per neo_attn_append call while filling */
#define MAX_CTX     16     /* distinct contexts */
#define MAX_CALLS   200000 /* timed calls per row, at most */
#define MIN_CALLS   10     /* timed calls per row, at least */

/* --- small helpers --- */

static void check(neo_status s, const char *what) {
    if (s != NEO_OK) {
        fprintf(stderr, "bench-cpu: %s failed: %s\n", what, neo_status_string(s));
        exit(1);
    }
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench-cpu: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rnd(void) {   /* xorshift64*, uniform in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return (float)(r >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static void fill_random(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = rnd();
}

/* --- machine description --- */

/* "32768K" / "32M" / "33554432" -> bytes */
static size_t mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb = 0;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
        fclose(f);
        if (kb) return (size_t)(kb << 10);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) return (size_t)pages * (size_t)psz / 2;
    return (size_t)4 << 30;
}

/* --- what else ran: CPU time of other processes plus hypervisor steal, from /proc/stat --- */

typedef struct usage_snap {
    double wall, own, busy; /* seconds: monotonic clock, this process's CPU time, all CPUs' busy + steal */
} usage_snap;

static usage_snap usage_now(void) {
    usage_snap u;
    struct timespec ts;
    u.wall = now_s();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    u.own = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    u.busy = -1.0;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iow = 0, irq = 0, sirq = 0, steal = 0;
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iow, &irq, &sirq,
                   &steal) == 8) {
            long hz = sysconf(_SC_CLK_TCK);
            u.busy = (double)(user + nice + sys + irq + sirq + steal) / (double)(hz > 0 ? hz : 100);
        }
        fclose(f);
    }
    return u;
}

/* Cores' worth of CPU time used by anything but this process between a and b (-1 if unknown).
   /proc/stat counts in 10 ms ticks, so values below ~0.05 are noise. */
static double other_cores(usage_snap a, usage_snap b) {
    if (a.busy < 0 || b.busy < 0 || b.wall <= a.wall) return -1.0;
    double o = ((b.busy - a.busy) - (b.own - a.own)) / (b.wall - a.wall);
    return o < 0 ? 0.0 : o;
}

/* One multi-thread read sample (bench_util.h), kept in the run's range. */
static double bw_sample(bw_state *b) {
    double g = bw_read(b, 0);
    if (g < b->lo) b->lo = g;
    if (g > b->hi) b->hi = g;
    return g;
}

/* --- attention --- */

static size_t kv_bytes_per_layer(int ctx) {
    return (size_t)ctx * N_HEAD_KV * (HEAD_DIM + HEAD_DIM_V) * 2;
}

static void fill_layer(neo_layer *layer, int ctx, float *k, float *v) {
    for (int pos = 0; pos < ctx; pos += FILL_CHUNK) {
        int n = ctx - pos < FILL_CHUNK ? ctx - pos : FILL_CHUNK;
        fill_random(k, (size_t)n * N_HEAD_KV * HEAD_DIM);
        fill_random(v, (size_t)n * N_HEAD_KV * HEAD_DIM_V);
        check(neo_attn_append(layer, k, v, n), "neo_attn_append");
    }
    if (neo_layer_length(layer) != ctx) {
        fprintf(stderr, "bench-cpu: layer length %d after filling %d tokens\n", neo_layer_length(layer), ctx);
        exit(1);
    }
}

typedef struct row {
    int         ctx;
    const char *mode;
    int         layers, calls;
    long long   n_decode; /* decode calls made, warm-up included */
    double      median_us, gbs, read_gbs, other;
} row;

#define ROUNDS 10 /* read-bandwidth samples interleaved with each row's decode calls */

/* Times decode calls over layers[0..n_layers) in rotation for about `seconds`, in ROUNDS rounds;
   each round starts with one read-bandwidth sample and an untimed call (the sample evicts the
   caches, and a sleeping pool wakes up), then times calls for seconds / ROUNDS. */
static row time_decode(neo_layer **layers, int n_layers, int ctx, const char *mode, double seconds, const float *q,
                       float *out, double *times, bw_state *bw) {
    /* warm-up: one pass over every layer, and at least 3 calls */
    int warm = n_layers < 3 ? 3 : n_layers;
    for (int i = 0; i < warm; i++) check(neo_attn_decode(layers[i % n_layers], q, out), "neo_attn_decode");
    int        calls = 0, next = 0;
    double     bws[ROUNDS];
    usage_snap u0 = usage_now();
    for (int round = 0; round < ROUNDS; round++) {
        bws[round] = bw_sample(bw);
        check(neo_attn_decode(layers[next++ % n_layers], q, out), "neo_attn_decode");
        int    n0 = calls, min_calls = (MIN_CALLS + ROUNDS - 1) / ROUNDS;
        double t_end = now_s() + seconds / ROUNDS;
        while (calls < MAX_CALLS && (calls - n0 < min_calls || now_s() < t_end)) {
            neo_layer *l = layers[next++ % n_layers];
            double     t0 = now_s();
            neo_status s = neo_attn_decode(l, q, out);
            double     t1 = now_s();
            check(s, "neo_attn_decode");
            times[calls++] = (t1 - t0) * 1e6;
        }
    }
    usage_snap u1 = usage_now();
    for (int i = 0; i < N_HEAD * HEAD_DIM_V; i++) {
        if (!isfinite(out[i])) {
            fprintf(stderr, "bench-cpu: non-finite output from neo_attn_decode\n");
            exit(1);
        }
    }
    row r;
    r.ctx = ctx;
    r.mode = mode;
    r.layers = n_layers;
    r.calls = calls;
    r.n_decode = warm + ROUNDS + calls;
    r.median_us = median(times, calls);
    r.gbs = (double)kv_bytes_per_layer(ctx) / (r.median_us * 1e-6) * 1e-9;
    r.read_gbs = best(bws, ROUNDS);
    r.other = other_cores(u0, u1);
    return r;
}

/* --- main --- */


static void usage(void) {
    fprintf(stderr, "usage: bench-cpu [--shape Q,KV,D] [--ctx N]... [--threads N] [--seconds S] [--csv]\n"
                    "  CPU decode attention (32 q / 8 kv heads, d 128, f16 KV) vs measured read bandwidth.\n"
                    "  --shape Q,KV,D  query heads, KV heads, head_dim (default 32,8,128; e.g. 14,2,64)\n"
                    "  --ctx N      add a context length (4096 and 32768 always run)\n"
                    "  --threads N  threads (default: online cores)\n"
                    "  --seconds S  timing per row (default 1.5)\n"
                    "  --csv        CSV output\n");
}

int main(int argc, char **argv) {
    int  ctxs[MAX_CTX] = {4096, 32768};
    int  n_ctx = 2;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    int    threads = (int)ncpu, csv = 0;
    double seconds = 1.5;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv")) {
            csv = 1;
        } else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) {
            int c = (int)parse_flag("bench-cpu", argv[++i], "--ctx", 1, 1 << 22);
            int dup = 0;
            for (int j = 0; j < n_ctx; j++) dup |= ctxs[j] == c;
            if (!dup) {
                if (n_ctx == MAX_CTX) {
                    fprintf(stderr, "bench-cpu: at most %d contexts\n", MAX_CTX);
                    return 1;
                }
                ctxs[n_ctx++] = c;
            }
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d,%d", &N_HEAD, &N_HEAD_KV, &HEAD_DIM) != 3 || N_HEAD_KV < 1 || N_HEAD < N_HEAD_KV ||
                N_HEAD % N_HEAD_KV || HEAD_DIM < 1 || HEAD_DIM > 1024) {
                fprintf(stderr, "bench-cpu: --shape wants query heads,KV heads,head_dim (e.g. 14,2,64)\n");
                return 1;
            }
            HEAD_DIM_V = HEAD_DIM;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = (int)parse_flag("bench-cpu", argv[++i], "--threads", 1, 256);
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0 && seconds <= 600)) {
                fprintf(stderr, "bench-cpu: bad value for --seconds\n");
                return 1;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else {
            usage();
            return 1;
        }
    }
    for (int i = 1; i < n_ctx; i++) /* ascending */
        for (int j = i; j > 0 && ctxs[j - 1] > ctxs[j]; j--) {
            int t = ctxs[j];
            ctxs[j] = ctxs[j - 1];
            ctxs[j - 1] = t;
        }

    /* machine */
    char model[256], date[64];
    cpu_model(model, sizeof model);
    time_t    tnow = time(NULL);
    struct tm tm_utc;
    gmtime_r(&tnow, &tm_utc);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm_utc);
    size_t llc_sc, llc_sys;
    size_t llc = llc_bytes(&llc_sc, &llc_sys);
    size_t avail = mem_available_bytes();

    /* runtime first, so the ISA is known for the header */
    neo_runtime     *rt = NULL;
    neo_runtime_desc rd;
    memset(&rd, 0, sizeof rd);
    rd.n_threads = threads;
    check(neo_runtime_create(&rd, &rt), "neo_runtime_create");
    neo_runtime_info ri;
    check(neo_runtime_get_info(rt, &ri), "neo_runtime_get_info");
    const char *isa = neo_cpu_isa_name(ri.cpu_isa);
    if (ri.n_threads != threads)
        fprintf(stderr, "bench-cpu: warning: runtime runs %d threads, %d asked\n", ri.n_threads, threads);

    /* read bandwidth, same thread count: >= 1 GiB, >= 8x the largest KV, >= 4x the LLC */
    size_t kv_max = kv_bytes_per_layer(ctxs[n_ctx - 1]);
    size_t bw_bytes = (size_t)1 << 30;
    if (8 * kv_max > bw_bytes) bw_bytes = 8 * kv_max;
    if (4 * llc > bw_bytes) bw_bytes = 4 * llc;
    if (bw_bytes > avail / 3) bw_bytes = avail / 3;
    bw_bytes &= ~(size_t)4095;
    avail = avail > bw_bytes ? avail - bw_bytes : 0; /* what the KV caches may use */
    static bw_state bw;
    if (bw_init(&bw, bw_bytes, threads)) return 1;
    (void)bw_read(&bw, 0); /* warm-up */
    usage_snap u0 = usage_now();
    double     bw_mt = bw_best(&bw, 0, 7);
    double     bw_1t = threads == 1 ? bw_mt : bw_best(&bw, 1, 7);
    double     bw_other = other_cores(u0, usage_now());
    bw.lo = bw.hi = bw_mt;

    if (csv) {
        printf("date,machine,cores,ctx,mode,threads,isa,layers,calls,median_us,gbs,read_gbs,ratio,read_gbs_1t,"
               "other_cores\n");
    } else {
        printf("# %s | %s | %ld cores (L1d %ld KB: the kernels' read-ahead into L%d) | neo_attn %s\n", date, model, ncpu,
               neo__l1d_bytes() >> 10, rt->kern.pf, neo_attn_version());
        char bw_text[96];
        if (threads == 1) snprintf(bw_text, sizeof bw_text, "%.1f GB/s with 1 thread", bw_mt);
        else snprintf(bw_text, sizeof bw_text, "%.1f GB/s with %d threads, %.1f GB/s with 1", bw_mt, threads, bw_1t);
        /* each f16 K or V element (2 bytes) feeds one FMA (2 flops) per query head of its group */
        int group = N_HEAD / N_HEAD_KV;
        printf("# decode, %d q / %d kv heads, d %d, f16 KV | LLC %zu MiB (sysconf %zu, /sys %zu) | read bandwidth over "
               "%.2f GiB: %s (other load %.2f cores) | FMA %.0f GFLOP/s with %d threads (this shape needs %.0f at the read "
               "bandwidth: %d flops a byte of KV)\n",
               N_HEAD, N_HEAD_KV, HEAD_DIM, llc >> 20, llc_sc >> 20, llc_sys >> 20, (double)bw_bytes / (1 << 30), bw_text, bw_other,
               fma_gflops(threads, 3), threads, bw_mt * group, group);
        printf("%8s %-5s %7s %-7s %6s %6s %10s %8s %9s %6s %6s\n", "ctx", "mode", "threads", "isa", "layers", "calls",
               "median_us", "GB/s", "read_GB/s", "ratio", "other");
    }
    fflush(stdout);
    double max_other = bw_other;

    float  *k = (float *)xmalloc((size_t)FILL_CHUNK * N_HEAD_KV * HEAD_DIM * sizeof(float));
    float  *v = (float *)xmalloc((size_t)FILL_CHUNK * N_HEAD_KV * HEAD_DIM_V * sizeof(float));
    float  *q = (float *)xmalloc((size_t)N_HEAD * HEAD_DIM * sizeof(float));
    float  *out = (float *)xmalloc((size_t)N_HEAD * HEAD_DIM_V * sizeof(float));
    double *times = (double *)xmalloc((size_t)MAX_CALLS * sizeof(double));
    fill_random(q, (size_t)N_HEAD * HEAD_DIM);

    for (int ci = 0; ci < n_ctx; ci++) {
        int    ctx = ctxs[ci];
        size_t lb = kv_bytes_per_layer(ctx);
        /* cold: >= 2 layers and >= 4x the LLC in total, within the memory there is */
        size_t want = (4 * llc + lb - 1) / lb;
        if (want < 2) want = 2;
        size_t fit = (avail * 3 / 4) / lb;
        if (want > fit) want = fit;
        if (want < 1) {
            fprintf(stderr, "bench-cpu: ctx %d: a KV cache of %zu bytes does not fit in memory\n", ctx, lb);
            return 1;
        }
        if (want * lb < 4 * llc)
            fprintf(stderr, "bench-cpu: warning: ctx %d: cold layers hold only %zu MiB (LLC %zu MiB)\n", ctx,
                    (want * lb) >> 20, llc >> 20);
        int         n_layers = (int)want;
        neo_layer **layers = (neo_layer **)xmalloc((size_t)n_layers * sizeof *layers);
        neo_layer_desc d;
        memset(&d, 0, sizeof d);
        d.n_head = N_HEAD;
        d.n_head_kv = N_HEAD_KV;
        d.head_dim = HEAD_DIM;
        d.head_dim_v = HEAD_DIM_V;
        d.n_ctx = ctx;
        d.kv_type = NEO_TYPE_F16;
        for (int l = 0; l < n_layers; l++) {
            check(neo_layer_create(rt, &d, &layers[l]), "neo_layer_create");
            fill_layer(layers[l], ctx, k, v);
        }

        row rows[2];
        rows[0] = time_decode(layers, 1, ctx, "hot", seconds, q, out, times, &bw);
        rows[1] = time_decode(layers, n_layers, ctx, "cold", seconds, q, out, times, &bw);

        long long n_decode = 0;
        for (int l = 0; l < n_layers; l++) {
            neo_layer_info li;
            check(neo_layer_get_info(layers[l], &li), "neo_layer_get_info");
            n_decode += li.n_decode;
        }
        if (n_decode != rows[0].n_decode + rows[1].n_decode)
            fprintf(stderr, "bench-cpu: warning: the layers count %lld decode calls, not %lld\n", n_decode,
                    rows[0].n_decode + rows[1].n_decode);

        for (int r = 0; r < 2; r++) {
            const row *x = &rows[r];
            double     ratio = x->gbs / x->read_gbs;
            if (x->other > max_other) max_other = x->other;
            if (csv)
                printf("%s,\"%s\",%ld,%d,%s,%d,%s,%d,%d,%.1f,%.2f,%.2f,%.3f,%.2f,%.2f\n", date, model, ncpu, x->ctx,
                       x->mode, ri.n_threads, isa, x->layers, x->calls, x->median_us, x->gbs, x->read_gbs, ratio, bw_1t, x->other);
            else
                printf("%8d %-5s %7d %-7s %6d %6d %10.1f %8.2f %9.2f %6.3f %6.2f\n", x->ctx, x->mode, ri.n_threads, isa,
                       x->layers, x->calls, x->median_us, x->gbs, x->read_gbs, ratio, x->other);
        }
        fflush(stdout);
        for (int l = 0; l < n_layers; l++) neo_layer_destroy(layers[l]);
        free(layers);
    }

    if (!csv)
        printf("# read bandwidth samples over the run (%d thread%s): %.1f to %.1f GB/s; each row's ratio uses the "
               "samples taken during it\n",
               threads, threads == 1 ? "" : "s", bw.lo, bw.hi);
    fflush(stdout);
    if (max_other > 0.1)
        fprintf(stderr,
                "bench-cpu: warning: other processes or the hypervisor took up to %.2f cores during a measurement; "
                "rerun on a quiet machine\n",
                max_other);
    bw_destroy(&bw);

    free(times);
    free(out);
    free(q);
    free(v);
    free(k);
    neo_runtime_destroy(rt);
    return 0;
}
