/* bench_util.h - the helpers both benchmarks (bench_cpu.c, bench.c) use: a monotonic clock, a
   qsort comparator, median and best, a checked integer flag, the CPU's name and last-level cache, and
   the host memory read ceiling. Included once by each program, which may use only some. */
#ifndef NEO_BENCH_UTIL_H
#define NEO_BENCH_UTIL_H
#define NEO_BENCH_UNUSED __attribute__((unused))

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static NEO_BENCH_UNUSED double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static NEO_BENCH_UNUSED int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The integer value of a flag, in [lo, hi]; anything else ends the program with a message. */
static NEO_BENCH_UNUSED long parse_flag(const char *prog, const char *s, const char *flag, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "%s: bad value for %s: '%s' (want %ld..%ld)\n", prog, flag, s, lo, hi);
        exit(1);
    }
    return v;
}

/* median of v[0..n) (sorts v); NAN for n < 1 */
static NEO_BENCH_UNUSED double median(double *v, int n) {
    if (n < 1) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
/* The largest of v[0..n) (NAN for n < 1): how a ceiling is reported. A ceiling is the most the
   machine did, not what it usually does (STREAM reports its best time the same way): on a
   shared host a median sample can fall below what the rows then read, and a bound a row beats
   is no bound. The rows themselves are medians, so their ratios err on the low side. */
static NEO_BENCH_UNUSED double best(const double *v, int n) {
    double b = n > 0 ? v[0] : NAN;
    for (int i = 1; i < n; i++)
        if (v[i] > b) b = v[i];
    return b;
}

/* the "model name" line of /proc/cpuinfo, or "unknown" */
static NEO_BENCH_UNUSED void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (!c) break;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            size_t n = strcspn(c, "\r\n");
            if (n >= cap) n = cap - 1;
            memcpy(buf, c, n);
            buf[n] = 0;
            break;
        }
    }
    fclose(f);
}

/* "32768K", "32M", "1G" -> bytes */
static NEO_BENCH_UNUSED size_t parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10;
    else if (*end == 'M' || *end == 'm') v <<= 20;
    else if (*end == 'G' || *end == 'g') v <<= 30;
    return (size_t)v;
}

/* Largest level-3 cache size this program can find: sysconf and /sys may disagree in VMs
   (CPUID can report the host's total); the larger is the safe choice for "won't fit". */
static NEO_BENCH_UNUSED size_t llc_bytes(size_t *from_sysconf, size_t *from_sys) {
    *from_sysconf = 0;
    *from_sys = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v > 0) *from_sysconf = (size_t)v;
#endif
    for (int idx = 0; idx < 8; idx++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int level = 0;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        if (level != 3) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            size_t s = parse_size(buf);
            if (s > *from_sys) *from_sys = s;
        }
        fclose(f);
    }
    size_t llc = *from_sysconf > *from_sys ? *from_sysconf : *from_sys;
    return llc ? llc : (size_t)64 << 20;
}

/* --- host memory read ceiling ---
   n_threads - 1 persistent workers and the caller sum the uint64 words of a buffer touched once,
   so the ceiling can be sampled again between attention calls without thread start-up. They take
   it in BW_CHUNK pieces from a shared counter, as the attention pool takes its tasks: with one
   fixed slice a thread, the read ends with the slowest thread's slice, and on a virtual machine
   where one of the threads shares its core that reads below what the attention calls reach. Each
   reader asks for the line 4 KiB ahead, as the attention kernels do (NEO__PREFETCH): one core's
   hardware prefetcher alone leaves the read rate short of what those kernels reach, and a
   ceiling below the measured kernel is no ceiling. */
#define BW_CHUNK_WORDS ((size_t)1 << 17) /* 1 MiB */
typedef struct bw_state {
    uint64_t         *buf;
    size_t            n_words;
    size_t            next; /* the next BW_CHUNK_WORDS piece to read (atomic) */
    int               n_threads, quit;
    pthread_barrier_t start, done;
    pthread_t         th[256];
    uint64_t          sums[256];
    double            lo, hi; /* range of the multi-thread samples bench_cpu.c takes during its rows */
    int               borrowed; /* buf is the caller's (bw_init_on): not freed here */
} bw_state;
typedef struct bw_arg {
    bw_state *b;
    int       id;
} bw_arg;
static NEO_BENCH_UNUSED bw_arg     bw_args[256];
volatile uint64_t bench_sink; /* the sums land here, so the reads cannot be optimized away */

/* 8 independent accumulators, so the loads and not the adds are the limit */
static NEO_BENCH_UNUSED uint64_t sum_words(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t   i = 0;
    for (; i + 8 <= n; i += 8) {
        __builtin_prefetch(p + i + 512);
        a0 += p[i + 0];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
        a4 += p[i + 4];
        a5 += p[i + 5];
        a6 += p[i + 6];
        a7 += p[i + 7];
    }
    for (; i < n; i++) a0 += p[i];
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
/* reader id's share of one read: pieces from the counter until none is left */
static NEO_BENCH_UNUSED void bw_slice(bw_state *b, int id) {
    size_t lo;
    while ((lo = __atomic_fetch_add(&b->next, BW_CHUNK_WORDS, __ATOMIC_RELAXED)) < b->n_words) {
        size_t n = b->n_words - lo < BW_CHUNK_WORDS ? b->n_words - lo : BW_CHUNK_WORDS;
        b->sums[id] += sum_words(b->buf + lo, n);
    }
}
static NEO_BENCH_UNUSED void *bw_worker(void *p) {
    bw_arg   *a = (bw_arg *)p;
    bw_state *b = a->b;
    for (;;) {
        pthread_barrier_wait(&b->start);
        if (b->quit) break;
        bw_slice(b, a->id);
        pthread_barrier_wait(&b->done);
    }
    return NULL;
}
/* The readers over buf: [bytes] of the caller's (the joint CPU + DMA ceiling reads pinned
   memory), or NULL for a buffer of its own. 0, or -1 with a message on stderr (no memory, no
   threads) */
static NEO_BENCH_UNUSED int bw_init_on(bw_state *b, void *buf, size_t bytes, int n_threads) {
    memset(b, 0, sizeof *b);
    if (n_threads < 1 || n_threads > 256) n_threads = n_threads < 1 ? 1 : 256;
    b->n_words = bytes / sizeof(uint64_t);
    b->borrowed = buf != NULL;
    b->buf = buf ? (uint64_t *)buf : (uint64_t *)malloc(b->n_words * sizeof(uint64_t));
    if (!b->buf) {
        fprintf(stderr, "bench: no memory for the %zu MiB read buffer\n", bytes >> 20);
        return -1;
    }
    for (size_t i = 0; i < b->n_words; i++) b->buf[i] = i; /* every page present */
    b->n_threads = n_threads;
    b->lo = 1e30;
    if (pthread_barrier_init(&b->start, NULL, (unsigned)n_threads) || pthread_barrier_init(&b->done, NULL, (unsigned)n_threads)) {
        fprintf(stderr, "bench: pthread_barrier_init failed\n");
        return -1;
    }
    for (int t = 0; t < n_threads - 1; t++) {
        bw_args[t].b = b;
        bw_args[t].id = t;
        if (pthread_create(&b->th[t], NULL, bw_worker, &bw_args[t])) {
            fprintf(stderr, "bench: pthread_create failed\n");
            return -1;
        }
    }
    return 0;
}
static NEO_BENCH_UNUSED int bw_init(bw_state *b, size_t bytes, int n_threads) { return bw_init_on(b, NULL, bytes, n_threads); }
static NEO_BENCH_UNUSED void bw_destroy(bw_state *b) {
    if (!b->buf) return;
    b->quit = 1;
    pthread_barrier_wait(&b->start);
    for (int t = 0; t < b->n_threads - 1; t++) pthread_join(b->th[t], NULL);
    pthread_barrier_destroy(&b->start);
    pthread_barrier_destroy(&b->done);
    for (int t = 0; t < b->n_threads; t++) bench_sink += b->sums[t];
    if (!b->borrowed) free(b->buf);
    b->buf = NULL;
}
/* GB/s of one read of the whole buffer: by every thread, or (one = 1) by the calling thread alone */
static NEO_BENCH_UNUSED double bw_read(bw_state *b, int one) {
    double t0 = now_s();
    b->next = 0; /* the workers wait at the start barrier, which orders this before their reads */
    if (one || b->n_threads == 1) b->sums[0] += sum_words(b->buf, b->n_words);
    else {
        pthread_barrier_wait(&b->start);
        bw_slice(b, b->n_threads - 1);
        pthread_barrier_wait(&b->done);
    }
    return (double)(b->n_words * sizeof(uint64_t)) / (now_s() - t0) * 1e-9;
}
/* the best of reps (<= 16) reads */
static NEO_BENCH_UNUSED double bw_best(bw_state *b, int one, int reps) {
    double g[16];
    if (reps > 16) reps = 16;
    for (int r = 0; r < reps; r++) g[r] = bw_read(b, one);
    return best(g, reps);
}

/* --- host FMA ceiling ---
   Every thread runs 16 independent chains of fused multiply-adds in registers (no memory), in
   the widest vectors the CPU kernels use here (AVX-512, else AVX2 + FMA), all threads at once as
   the attention pool runs. Decode attention does 2 (d + dv) flops a query head for each cell's
   d + dv K and V elements: a GQA group of 7 at head_dim 64 asks 7 flops a byte of f16 KV, so a
   kernel that falls short of the memory's rate there may be short of FMA units or of its own
   instruction mix, and this ceiling says which. GFLOP/s; 0 where no such vectors are known. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FMA_CHAINS(T, FMA, SET1)                                                                  \
    T a[16], b = SET1(1.0000001f), c = SET1(1e-7f);                                               \
    for (int i = 0; i < 16; i++) a[i] = SET1((float)i);                                           \
    for (long k = 0; k < n; k++)                                                                  \
        for (int i = 0; i < 16; i++) a[i] = FMA(a[i], b, c);                                      \
    for (int i = 1; i < 16; i++) a[0] = FMA(a[i], b, a[0]);                                       \
    float f[sizeof(T) / sizeof(float)];                                                           \
    memcpy(f, &a[0], sizeof f);                                                                   \
    bench_fsink += f[0];
volatile float bench_fsink;
__attribute__((target("avx512f"))) static void fma_run512(long n) { FMA_CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps) }
__attribute__((target("avx2,fma"))) static void fma_run256(long n) { FMA_CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps) }
#undef FMA_CHAINS
static NEO_BENCH_UNUSED int fma_lanes(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8 : 0;
}
#else
static NEO_BENCH_UNUSED int fma_lanes(void) { return 0; }
#endif
#define FMA_ITERS 4000000L /* 64 M FMAs a chain set: tens of ms a thread */
static NEO_BENCH_UNUSED void *fma_worker(void *arg) {
    (void)arg;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (fma_lanes() == 16) fma_run512(FMA_ITERS);
    else fma_run256(FMA_ITERS);
#endif
    return NULL;
}
/* the best of reps (<= 16) runs on n_threads threads (the caller one of them) */
static NEO_BENCH_UNUSED double fma_gflops(int n_threads, int reps) {
    double    g[16];
    pthread_t th[256];
    int       lanes = fma_lanes();
    if (!lanes) return 0.0;
    if (n_threads < 1 || n_threads > 256) n_threads = n_threads < 1 ? 1 : 256;
    if (reps > 16) reps = 16;
    for (int r = 0; r < reps; r++) {
        int    started = 0;
        double t0 = now_s();
        for (int t = 1; t < n_threads; t++)
            if (!pthread_create(&th[started], NULL, fma_worker, NULL)) started++;
        fma_worker(NULL);
        for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
        g[r] = (double)FMA_ITERS * 16 * lanes * 2 * (started + 1) / (now_s() - t0) * 1e-9;
    }
    return best(g, reps);
}
#endif
