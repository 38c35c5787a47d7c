/* read_balance.c - the host read rate three ways, on the same buffer and threads (a benchmark
   tool, not a test): what the read ceiling of bench and bench-cpu is made of.

     slices  each thread sums its own contiguous slice (the ceiling's method before 2026-12-02):
             the read ends with the slowest thread's slice
     pieces  the threads take 1 MiB pieces from a shared counter (bench_util.h's bw_read, the
             ceiling's method since): a thread that runs slower reads fewer pieces
     decode  tasks from a shared counter shaped like a CPU decode's: a chunk of K rows (--chunk
             bytes) and the same chunk of V rows elsewhere, in 8 KiB blocks, K's lines read with
             the line 4 KiB ahead and the same offset of V asked for, then the block's V lines

   Every reader asks for the line 4 KiB ahead. Medians of 9 rounds, the three in turn.

       make build/read-balance
       build/read-balance [THREADS [CHUNK_BYTES]]     (default: online cores, 131072) */
#include "examples/bench/bench_util.h"

static bw_state          bw;
static size_t            task_words, half_words, n_tasks, next_task;
static int               mode, n_thr; /* mode 0 slices, 2 decode; -1 ends the workers */
static pthread_barrier_t go, done;
static uint64_t          sums[256];

#define BLOCK_WORDS (8192 / 8)

/* one decode-shaped task: K chunk t and V chunk t (the buffer's two halves), block by block */
static uint64_t decode_task(size_t t) {
    const uint64_t *k = bw.buf + t * task_words, *v = bw.buf + half_words + t * task_words;
    uint64_t        s = 0;
    for (size_t b = 0; b < task_words; b += BLOCK_WORDS) {
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (size_t i = b; i < b + BLOCK_WORDS; i += 8) {
            __builtin_prefetch(k + i + 512);
            __builtin_prefetch(v + i);
            a0 += k[i] + k[i + 1], a1 += k[i + 2] + k[i + 3], a2 += k[i + 4] + k[i + 5], a3 += k[i + 6] + k[i + 7];
        }
        for (size_t i = b; i < b + BLOCK_WORDS; i += 8)
            a0 += v[i] + v[i + 1], a1 += v[i + 2] + v[i + 3], a2 += v[i + 4] + v[i + 5], a3 += v[i + 6] + v[i + 7];
        s += a0 + a1 + a2 + a3;
    }
    return s;
}
static void share(int id) {
    if (mode == 0) {
        size_t per = bw.n_words / (size_t)n_thr, lo = per * (size_t)id, hi = id == n_thr - 1 ? bw.n_words : lo + per;
        sums[id] += sum_words(bw.buf + lo, hi - lo);
        return;
    }
    size_t t;
    while ((t = __atomic_fetch_add(&next_task, 1, __ATOMIC_RELAXED)) < n_tasks)
        sums[id] += decode_task(t);
}
static void *worker(void *p) {
    int id = (int)(intptr_t)p;
    for (;;) {
        pthread_barrier_wait(&go);
        if (mode < 0) return NULL;
        share(id);
        pthread_barrier_wait(&done);
    }
}
/* GB/s of one read of the whole buffer in mode m (0 or 2) */
static double read_mode(int m) {
    mode = m, next_task = 0;
    double t0 = now_s();
    pthread_barrier_wait(&go);
    share(n_thr - 1);
    pthread_barrier_wait(&done);
    return (double)(m == 0 ? bw.n_words : 2 * half_words) * 8.0 / (now_s() - t0) * 1e-9;
}
int main(int argc, char **argv) {
    long      cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t    chunk;
    double    r[3][9];
    pthread_t th[256];
    n_thr = argc > 1 ? (int)parse_flag("read-balance", argv[1], "THREADS", 1, 256)
                     : (int)(cores < 1     ? 1
                             : cores > 256 ? 256
                                           : cores);
    chunk = argc > 2 ? (size_t)parse_flag("read-balance", argv[2], "CHUNK_BYTES", 8192, 1L << 26) / 8192 * 8192 : 131072;
    if (bw_init(&bw, (size_t)4 << 30, n_thr)) return 1;
    task_words = chunk / 8;
    half_words = bw.n_words / 2 / task_words * task_words;
    n_tasks = half_words / task_words;
    if (pthread_barrier_init(&go, NULL, (unsigned)n_thr) || pthread_barrier_init(&done, NULL, (unsigned)n_thr)) return 1;
    for (int i = 0; i < n_thr - 1; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i)) return 1;
    for (int k = 0; k < 9; k++)
        r[0][k] = read_mode(0), r[1][k] = bw_read(&bw, 0), r[2][k] = read_mode(2);
    double s = median(r[0], 9), p = median(r[1], 9), d = median(r[2], 9);
    printf("%d threads, 4 GiB: slices %.1f GB/s, pieces %.1f (%.3f x slices), decode tasks of %zu KiB of K and V %.1f (%.3f)\n",
           n_thr, s, p, p / s, chunk >> 10, d, d / s);
    mode = -1;
    pthread_barrier_wait(&go);
    for (int i = 0; i < n_thr - 1; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n_thr; i++)
        bench_sink += sums[i];
    bw_destroy(&bw);
    return 0;
}
