/* read_compute.c - what the cores read while they also do a decode kernel's arithmetic (a
   benchmark tool, not a test).

   A CPU decode call runs at the host's read rate only if every core keeps reading at its share
   of that rate while it does the kernels' vector work on what it reads. This program measures
   that outside the library, with a loop that does a subset of the kernels' work, so that its
   rate is a ceiling for theirs, for the read-aheads it tries. The threads take 256-cell tasks
   from a shared counter (a KV head's K rows and its V rows, f16, in 64-cell blocks, K then V,
   as a decode task reads them) and for every 16 elements do what the AVX-512 kernels do with
   them: widen them (vcvtph2ps) and feed each to the FMAs of a GQA group of G queries, 4 cells
   x up to 4 queries (2 x up to 8) in 16 accumulators. A K tile's accumulators then meet in a
   tree of adds (part of the work of the scores' lane sums); a V tile's stay for the block, as
   p . v's do. Left out: the rest of the lane sums, the softmax, the merges and the pool. Three
   rates, GB/s of K and V:

       read     the bench's read ceiling (bench_util.h) over the same buffer, same threads
       compute  the arithmetic alone: each thread on one task of its own, held in its L2
       both     the arithmetic on rows streamed from memory past the LLC, with each read-ahead
                scheme below; both / read is the share of the read rate a core keeps while it
                computes, and the best scheme's is the most this program finds for a kernel
                doing this arithmetic (a scheme not tried here could do better)

   Read-ahead schemes (a task asks for its first 4 KB of K rows at once, then each tile for its
   cells' K rows some bytes ahead and for their V rows, which the block's second pass reads):
   the library's (neo__prefetch_cells: 4 KB ahead, into L1 on cores with an L1 of 48 KB or more, else L2,
   and where into L1, the K and V lines NEO__PREFETCH_L2 bytes ahead into L2 as well), none (the
   hardware prefetchers alone), 8 KB into L1, 16 KB into L2. A last row runs the library's own
   kernels (scores, softmax, p . v, with its read-ahead) on the same tasks: the whole of their
   work, where the loop does a part.

       make build/read-compute && build/read-compute [--shape Q,KV,D] [--threads N] [--rounds R]
       defaults: 32,8,128 (Llama-3-8B's layer), online cores, 5 rounds; the best of each rate's
       rounds, and each round reads every rate once, so they sample the same minutes; for each
       scheme also the median over the rounds of its rate against the read rate and against the
       library's read-ahead in the same round, steadier on a machine whose speed drifts.

   x86-64 with AVX-512; head_dim 64 or 128; a group (Q / KV) of 1 to 8. */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include "examples/bench/bench_util.h"

#define RC_CELLS 256 /* a task */
#define RC_SCHEMES 5 /* the last: the library's own kernels */

typedef struct rc_job {
    const uint16_t *k, *v; /* [tasks][RC_CELLS][d] f16 each */
    size_t          tasks, next;
    int             g, d, hot, scheme;
    double          sink[256];
} rc_job;

/* the bytes ahead of a tile's K rows its read-ahead asks for, and the hint; dist < 0: none */
static void rc_scheme(int scheme, int *dist, int *hint) {
    static const int dists[RC_SCHEMES] = {NEO__PREFETCH, -1, 8192, 16384, NEO__PREFETCH};
    const long       l1 = neo__l1d_bytes();
    *dist = dists[scheme];
    *hint = scheme == 0 || scheme == 4 ? (l1 > 0 && l1 < NEO__PREFETCH_L2_BELOW ? 2 : 1) : scheme == 3 ? 2 : 1;
}

/* a task's first K rows at once, as a decode task asks for them (neo__prefetch_first) */
static inline void rc_prefetch_first(const uint16_t *k) {
    for (size_t o = 0; o < NEO__PREFETCH; o += 64)
        __builtin_prefetch((const char *)k + o, 0, 3);
}

/* One pass over a 64-cell block's K (kpass) or V rows, CB cells x NQ queries a tile over D f16
   elements in the kernels' form (neo__scores_tile_avx512's inner loop): every q vector feeds CB
   FMAs, every widened chunk NQ. K tiles end in a tree of adds (a part of what the scores' lane
   sums do), V tiles accumulate over the block as p . v's do, and their sum joins sum once. The
   K pass also asks for its tiles' K rows dist bytes ahead and for their V rows, as the scores
   kernels do (lib: as neo__prefetch_cells asks). */
/* clang-format off */
static inline __attribute__((always_inline, target("avx512f,f16c"))) __m512 rc_pass(const uint16_t *r, const uint16_t *vb,
                                                                                    const float *q, __m512 sum, int NQ, int CB,
                                                                                    int D, int kpass, int dist, int hint, int lib) {
    __m512 a[4][8], t[32];
    for (int b = 0; b < NEO__BLOCK; b += CB) {
        if (kpass || b == 0)
NEO__UNROLL(4)
            for (int c = 0; c < CB; c++)
NEO__UNROLL(8)
                for (int i = 0; i < NQ; i++) a[c][i] = _mm512_setzero_ps();
        const uint16_t *rb = r + (size_t)b * D;
        if (kpass && lib) neo__prefetch_cells((const char *)rb, (size_t)CB * D * 2, (const char *)(vb + (size_t)b * D), (size_t)CB * D * 2, hint);
        else if (kpass && dist >= 0) {
            neo__prefetch_lines((const char *)rb + dist, (size_t)CB * D * 2, hint);
            neo__prefetch_lines((const char *)(vb + (size_t)b * D), (size_t)CB * D * 2, hint);
        }
        for (int j = 0; j < D; j += 16) {
            __m512 x[8], kv[4];
NEO__UNROLL(8)
            for (int i = 0; i < NQ; i++) {
                x[i] = _mm512_loadu_ps(q + (size_t)i * D + j);
                __asm__("" : "+v"(x[i]));
            }
NEO__UNROLL(4)
            for (int c = 0; c < CB; c++) kv[c] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rb + (size_t)c * D + j)));
NEO__UNROLL(4)
            for (int c = 0; c < CB; c++)
NEO__UNROLL(8)
                for (int i = 0; i < NQ; i++) a[c][i] = _mm512_fmadd_ps(x[i], kv[c], a[c][i]);
        }
        if (!kpass && b + CB < NEO__BLOCK) continue;
        int n = 0; /* a tree of adds, so that the tiles do not wait on one chain */
NEO__UNROLL(4)
        for (int c = 0; c < CB; c++)
NEO__UNROLL(8)
            for (int i = 0; i < NQ; i++) t[n++] = a[c][i];
NEO__UNROLL(5)
        for (int w = 1; w < n; w *= 2)
NEO__UNROLL(16)
            for (int u = 0; u + w < n; u += 2 * w) t[u] = _mm512_add_ps(t[u], t[u + w]);
        sum = _mm512_add_ps(sum, t[0]);
    }
    return sum;
}
/* clang-format on */

/* one task: each 64-cell block's K rows, then its V rows */
static inline __attribute__((always_inline, target("avx512f,f16c"))) double
rc_task_t(const uint16_t *k, const uint16_t *v, const float *q, int NQ, int D, int dist, int hint, int lib) {
    const int CB = NQ <= 4 ? 4 : 2;
    __m512    sum = _mm512_setzero_ps();
    if (dist >= 0) rc_prefetch_first(k);
    for (int b0 = 0; b0 < RC_CELLS; b0 += NEO__BLOCK) {
        sum = rc_pass(k + (size_t)b0 * D, v + (size_t)b0 * D, q, sum, NQ, CB, D, 1, dist, hint, lib);
        sum = rc_pass(v + (size_t)b0 * D, v + (size_t)b0 * D, q, sum, NQ, CB, D, 0, dist, hint, lib);
    }
    return _mm512_reduce_add_ps(sum);
}
#define RC_G(NQ) (d == 64 ? rc_task_t(k, v, q, NQ, 64, dist, hint, lib) : rc_task_t(k, v, q, NQ, d, dist, hint, lib))
static __attribute__((target("avx512f,f16c"))) double rc_task(const uint16_t *k, const uint16_t *v, const float *q, int g,
                                                              int d, int dist, int hint, int lib) {
    /* clang-format off */
    switch (g) { /* the group as a constant, so that the tiles' loops unroll */
    case 1: return RC_G(1);
    case 2: return RC_G(2);
    case 3: return RC_G(3);
    case 4: return RC_G(4);
    case 5: return RC_G(5);
    case 6: return RC_G(6);
    case 7: return RC_G(7);
    default: return RC_G(8);
    }
    /* clang-format on */
}

/* one task through the library's kernels, block by block as a decode task runs them (neo__attend's
   path for full blocks of finite scores) */
static NEO__AVX512 double rc_lib_task(const uint16_t *k, const uint16_t *v, const float *q, int g, int d, int pf) {
    float s[8 * NEO__BLOCK], acc[8 * 128] = {0}, m[8], l[8];
    for (int i = 0; i < g; i++)
        m[i] = -INFINITY, l[i] = 0.0f;
    rc_prefetch_first(k);
    for (int b0 = 0; b0 < RC_CELLS; b0 += NEO__BLOCK) {
        const char *kb = (const char *)(k + (size_t)b0 * d), *vb = (const char *)(v + (size_t)b0 * d);
        neo__scores_avx512(s, q, kb, vb, NEO_TYPE_F16, g, NEO__BLOCK, d, d, pf);
        neo__softmax_avx512(s, g, m, l, acc, d);
        neo__pv_avx512(acc, s, vb, NEO_TYPE_F16, g, NEO__BLOCK, d);
    }
    return acc[0] + l[0];
}

static pthread_barrier_t rc_bar;
static rc_job           *rc_cur;

static void *rc_worker(void *p) {
    const int id = (int)(intptr_t)p;
    float     q[8 * 128];
    for (int i = 0; i < 8 * 128; i++)
        q[i] = 0.001f * (float)(i % 17);
    for (;;) {
        pthread_barrier_wait(&rc_bar);
        rc_job *j = rc_cur;
        if (!j) return NULL;
        int    dist, hint;
        size_t t;
        rc_scheme(j->scheme, &dist, &hint);
        const size_t task_elems = (size_t)RC_CELLS * j->d;
        while ((t = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->tasks) {
            const size_t u = j->hot ? (size_t)id : t; /* hot: this thread's own task, again */
            const uint16_t *tk = j->k + u * task_elems, *tv = j->v + u * task_elems;
            j->sink[id] += j->scheme == RC_SCHEMES - 1 ? rc_lib_task(tk, tv, q, j->g, j->d, hint)
                                                       : rc_task(tk, tv, q, j->g, j->d, dist, hint, j->scheme == 0);
        }
        pthread_barrier_wait(&rc_bar);
    }
}
/* GB/s of one pass of every thread over the job's tasks */
static double rc_run(rc_job *j) {
    j->next = 0;
    rc_cur = j;
    const double t0 = now_s();
    pthread_barrier_wait(&rc_bar); /* go */
    pthread_barrier_wait(&rc_bar); /* done */
    return (double)j->tasks * RC_CELLS * j->d * 4 / (now_s() - t0) * 1e-9;
}

int main(int argc, char **argv) {
    int nq = 32, nkv = 8, d = 128, threads = (int)sysconf(_SC_NPROCESSORS_ONLN), rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc && sscanf(argv[i + 1], "%d,%d,%d", &nq, &nkv, &d) == 3)
            i++;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (int)parse_flag("read-compute", argv[++i], "--threads", 1, 256);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (int)parse_flag("read-compute", argv[++i], "--rounds", 1, 100);
        else {
            fprintf(stderr, "usage: read-compute [--shape Q,KV,D] [--threads N] [--rounds R]\n");
            return 2;
        }
    }
    const int g = nkv > 0 && nq % nkv == 0 ? nq / nkv : 0;
    if (g < 1 || g > 8 || (d != 64 && d != 128)) {
        fprintf(stderr, "read-compute: a group of 1 to 8 queries and head_dim 64 or 128 only\n");
        return 2;
    }
    if (!__builtin_cpu_supports("avx512f")) {
        fprintf(stderr, "read-compute: this CPU lacks AVX-512\n");
        return 1;
    }
    size_t llc_c, llc_s, llc = llc_bytes(&llc_c, &llc_s), bytes = (size_t)1 << 30;
    if (bytes < 4 * llc) bytes = 4 * llc;
    const size_t task_bytes = (size_t)RC_CELLS * d * 2, tasks = bytes / 2 / task_bytes, half = tasks * task_bytes;
    /* K then V in one buffer, which the read ceiling reads whole: as many bytes as the loop streams */
    uint16_t *k = (uint16_t *)malloc(2 * half), *v = k + half / 2;
    bw_state  bw;
    if (!k || bw_init_on(&bw, k, 2 * half, threads) != 0) {
        fprintf(stderr, "read-compute: no memory for %zu MiB\n", (2 * half) >> 20);
        return 1;
    }
    for (size_t i = 0; i < half; i++) /* bw_init_on wrote words: f16 now (finite values) */
        k[i] = neo__f32_to_f16((float)(i % 1000) * 1e-3f);

    pthread_t th[256];
    if (pthread_barrier_init(&rc_bar, NULL, (unsigned)threads + 1)) return 1;
    for (int t = 0; t < threads; t++)
        if (pthread_create(&th[t], NULL, rc_worker, (void *)(intptr_t)t)) return 1;

    double rd[100], comp[100], both[RC_SCHEMES][100];
    rc_job job = {k, v, tasks, 0, g, d, 0, 0, {0}};
    rc_job hot = job;
    hot.hot = 1;
    hot.scheme = 1;                    /* no read-ahead: its lines past the task would come from memory */
    hot.tasks = (size_t)threads * 512; /* each thread its own task 512 times, on average */
    for (int r = 0; r < rounds; r++) {
        rd[r] = bw_read(&bw, 0);
        comp[r] = rc_run(&hot);
        for (int s = 0; s < RC_SCHEMES; s++) {
            job.scheme = s;
            both[s][r] = rc_run(&job);
        }
    }
    rc_cur = NULL;
    pthread_barrier_wait(&rc_bar);
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);

    char model[128];
    cpu_model(model, sizeof model);
    int dist, hint;
    rc_scheme(0, &dist, &hint);
    printf(
        "# %s | %d threads | shape %d/%d/%d (a group of %d, f16) | LLC %zu MiB, %zu MiB streamed a pass | best of %d rounds\n",
        model, threads, nq, nkv, d, g, llc >> 20, (2 * tasks * task_bytes) >> 20, rounds);
    const double       R = best(rd, rounds);
    static const char *names[RC_SCHEMES] = {"both, the library's read-ahead", "both, no read-ahead", "both, 8 KB ahead into L1",
                                            "both, 16 KB ahead into L2", "the library's kernels"};
    printf("%-34s %8.1f GB/s\n", "read", R);
    printf("%-34s %8.1f GB/s  %.2f of read\n", "compute (in L2)", best(comp, rounds), best(comp, rounds) / R);
    for (int s = 0; s < RC_SCHEMES; s++) {
        const double b = best(both[s], rounds);
        double       of_read[100], of_lib[100];
        for (int r = 0; r < rounds; r++)
            of_read[r] = both[s][r] / rd[r], of_lib[r] = both[s][r] / both[0][r];
        printf("%-34s %8.1f GB/s  %.2f of read%-11s  median %.3f of read, %.3f of the first row\n", names[s], b, b / R,
               s == 0 ? (hint == 1 ? " (into L1)" : " (into L2)") : "", median(of_read, rounds), median(of_lib, rounds));
    }
    for (int t = 0; t < threads; t++)
        bench_sink += (uint64_t)(job.sink[t] + hot.sink[t]);
    bw_destroy(&bw);
    free(k);
    return 0;
}
