/* probe_cpu.c - where one CPU decode call's time goes (a benchmark tool, not a test).

   A layer's CPU decode splits each KV head's cells into chunks, one task each, run by the pool;
   the chunks' partial states then merge pairwise up a tree. This program times every task of
   every call through NEO_ATTN_DECODE_HOOK and prints, as medians over the calls:

       call        the neo_attn_decode call, wall clock
       first/last  when the first and the last task started, after the call began: the pool's
                   wake-up and how long the last thread took to join
       task        a task's own attention (start to chunk attended), mean over the call's tasks
       merge       the merging left after the last attention of a head: from the chunk attended
                   to the head's output written, by the task that finished the head (summed over
                   heads)
       tail        the call's return after the last task ended
       max/thread  the most tasks one thread ran in the call
       slowest     the longest task's attention (start to chunk attended)
       end         when the last task's attention ended, after the call began

   Each call is followed by a read of another layer's host bytes through the same pool, in as
   many chunks as the call had tasks (each head's cells cut evenly, one task a chunk), with the
   kernels' read-ahead and no arithmetic: K rows and then V rows, 64 cells at a time, the lines
   summed as integers. Its line gives call, first, last, task (a chunk read) and slowest the same
   way: the pool's wake-up and the reading of this much memory at once, with nothing else, which
   the call does too.

   The calls rotate over --layers copies of the layer (1 = hot; by default enough copies to hold
   twice the last-level cache, at least 2 and at most 4096, so that every call reads memory) and
   are --gap-us apart, spent spinning, as a model's other work would be.

       make probe-cpu && build/probe-cpu [--shape Q,KV,D] [--ctx N] [--threads N] [--layers N]
                                         [--calls N] [--gap-us U] [--isa NAME]
       defaults: 7,1,64 (the Qwen2.5-0.5B layer's host half with 1 of its 2 KV heads on the
       host), ctx 4096, online cores, layers past twice the LLC, 400 calls, 30 us, the best CPU path (--isa
       scalar, avx2, avx512 or amx forces one). */
#include "examples/bench/bench_util.h"

#define MAX_TASKS 4096
static double t_start[MAX_TASKS], t_attended[MAX_TASKS], t_merged[MAX_TASKS];
static int    t_thread[MAX_TASKS];
static double r_start[MAX_TASKS], r_end[MAX_TASKS]; /* the read-only pass's tasks */
static double probe_now_us(void) { return now_s() * 1e6; }
/* each task writes only its own slots; the caller reads them after the call has returned */
static void probe_hook(int event, int task, int thread) {
    if (task < 0 || task >= MAX_TASKS) return;
    double t = probe_now_us();
    if (event == 0) t_start[task] = t, t_thread[task] = thread, t_attended[task] = t_merged[task] = 0.0;
    else if (event == 1) t_attended[task] = t;
    else t_merged[task] = t;
}
#define NEO_ATTN_DECODE_HOOK(event, task, thread) probe_hook(event, task, thread)
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"

/* the read-only pass: task t reads chunk t % n_chunks of KV head t / n_chunks, K then V */
typedef struct read_job {
    const neo_layer *L;
    int              n_chunks, cells; /* chunks a head, cells a chunk */
    uint64_t         sums[MAX_TASKS];
} read_job;
static void read_task(void *arg, int task, int thread) {
    read_job        *J = (read_job *)arg;
    const neo_layer *L = J->L;
    const size_t     kr = (size_t)L->head_dim * 2, vr = (size_t)L->head_dim_v * 2; /* f16 row bytes */
    const int        h = task / J->n_chunks, c0 = task % J->n_chunks * J->cells;
    const int        c1 = c0 + J->cells < L->len ? c0 + J->cells : L->len;
    const char      *k = (const char *)L->k_host + ((size_t)h * L->n_ctx) * kr, *v = (const char *)L->v_host + ((size_t)h * L->n_ctx) * vr;
    const int        pf = L->rt->kern.pf;
    uint64_t         s0 = 0, s1 = 0;
    (void)thread;
    r_start[task] = probe_now_us();
    for (int b = c0; b < c1; b += 64) {
        const int e = b + 64 < c1 ? b + 64 : c1;
        for (int c = b; c < e; c++) {
            const uint64_t *x = (const uint64_t *)(const void *)(k + (size_t)c * kr);
            if (pf) neo__prefetch_cells(k + (size_t)c * kr, kr, v + (size_t)c * vr, vr, pf);
            for (size_t i = 0; i < kr / 8; i += 2) s0 += x[i], s1 += x[i + 1];
        }
        for (int c = b; c < e; c++) {
            const uint64_t *x = (const uint64_t *)(const void *)(v + (size_t)c * vr);
            for (size_t i = 0; i < vr / 8; i += 2) s0 += x[i], s1 += x[i + 1];
        }
    }
    J->sums[task] = s0 + s1;
    r_end[task] = probe_now_us();
}

static void check(neo_status s, const char *what) {
    if (s != NEO_OK) fprintf(stderr, "probe-cpu: %s failed: %s\n", what, neo_status_string(s)), exit(1);
}

static void usage(void) {
    fprintf(stderr, "usage: probe-cpu [--shape Q,KV,D] [--ctx N] [--threads N] [--layers N] [--calls N] [--gap-us U] [--isa NAME]\n"
                    "  the time of one CPU decode call, task by task (see the top of examples/bench/probe_cpu.c)\n");
}

int main(int argc, char **argv) {
    int  nh = 7, nkv = 1, hd = 64, ctx = 4096, n_layers = 0, calls = 400, gap_us = 30; /* n_layers 0: from the LLC */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int  threads = ncpu > 0 ? (int)ncpu : 1;
    neo_cpu_isa isa = NEO_CPU_AUTO;
    for (int i = 1; i < argc; i += 2) { /* every option but --help takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!v) {
            usage();
            return 1;
        }
        if (!strcmp(a, "--shape")) {
            if (sscanf(v, "%d,%d,%d", &nh, &nkv, &hd) != 3 || nkv < 1 || nh < nkv || nh % nkv || hd < 1 || hd > 1024) {
                fprintf(stderr, "probe-cpu: --shape wants q heads,kv heads,head dim (e.g. 7,1,64)\n");
                return 1;
            }
        } else if (!strcmp(a, "--ctx")) ctx = (int)parse_flag("probe-cpu", v, "--ctx", 1, 1 << 22);
        else if (!strcmp(a, "--threads")) threads = (int)parse_flag("probe-cpu", v, "--threads", 1, 256);
        else if (!strcmp(a, "--layers")) n_layers = (int)parse_flag("probe-cpu", v, "--layers", 1, 4096);
        else if (!strcmp(a, "--calls")) calls = (int)parse_flag("probe-cpu", v, "--calls", 1, 1000000);
        else if (!strcmp(a, "--gap-us")) gap_us = (int)parse_flag("probe-cpu", v, "--gap-us", 0, 1000000);
        else if (!strcmp(a, "--isa")) {
            for (isa = NEO_CPU_SCALAR; isa <= NEO_CPU_AMX && strcmp(v, neo_cpu_isa_name(isa)); isa = (neo_cpu_isa)(isa + 1)) {
            }
            if (isa > NEO_CPU_AMX) {
                fprintf(stderr, "probe-cpu: --isa wants scalar, avx2, avx512 or amx\n");
                return 1;
            }
        } else {
            usage();
            return 1;
        }
    }

    neo_runtime     *rt = NULL;
    neo_runtime_desc rd = {0};
    neo_runtime_info ri;
    rd.n_threads = threads, rd.cpu_isa = isa;
    check(neo_runtime_create(&rd, &rt), "neo_runtime_create");
    check(neo_runtime_get_info(rt, &ri), "neo_runtime_get_info");

    neo_layer_desc d;
    memset(&d, 0, sizeof d);
    d.n_head = nh, d.n_head_kv = nkv, d.head_dim = hd, d.n_ctx = ctx, d.kv_type = NEO_TYPE_F16;
    if (!n_layers) { /* twice the LLC in f16 K and V, so that no call finds its layer in the cache */
        size_t llc_sc, llc_sys, llc = llc_bytes(&llc_sc, &llc_sys), lb = (size_t)ctx * nkv * hd * 2 * 2;
        size_t want = (2 * llc + lb - 1) / lb;
        n_layers = want < 2 ? 2 : want > 4096 ? 4096 : (int)want;
    }
    /* k, v: [fill][nkv][hd]; q, out: [nh][hd]; then, per timed call: call, first, last, task,
       merge, tail, max/thread */
    const int    fill = 1024;
    const size_t nkvf = (size_t)fill * nkv * hd, nq = (size_t)nh * hd;
    float       *buf = (float *)malloc(sizeof(float) * (2 * nkvf + 2 * nq));
    enum { N_STATS = 14 };
    double      *st = (double *)malloc(sizeof(double) * N_STATS * (size_t)calls);
    read_job    *rj = (read_job *)calloc(1, sizeof *rj);
    neo_layer  **L = (neo_layer **)calloc((size_t)n_layers, sizeof *L);
    int         *per = (int *)malloc(sizeof(int) * (size_t)ri.n_threads);
    if (!buf || !st || !L || !per || !rj) {
        fprintf(stderr, "probe-cpu: out of memory\n");
        return 1;
    }
    float  *k = buf, *v = k + nkvf, *q = v + nkvf, *out = q + nq;
    double *call = st, *first = call + calls, *last = first + calls, *task = last + calls, *merge = task + calls;
    double *tail = merge + calls, *most = tail + calls, *slow = most + calls, *end_at = slow + calls;
    double *rcall = end_at + calls, *rfirst = rcall + calls, *rlast = rfirst + calls, *rtask = rlast + calls, *rslow = rtask + calls;
    uint64_t r = 0x9E3779B97F4A7C15ull; /* xorshift64* */
    for (size_t i = 0; i < nkvf; i++) {
        r ^= r >> 12, r ^= r << 25, r ^= r >> 27;
        k[i] = (float)((r * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f - 0.5f;
        v[i] = -k[i] * 0.5f;
    }
    for (size_t i = 0; i < nq; i++) q[i] = k[i % nkvf] * 2.0f;
    for (int l = 0; l < n_layers; l++) {
        check(neo_layer_create(rt, &d, &L[l]), "neo_layer_create");
        for (int t = 0; t < ctx; t += fill) check(neo_attn_append(L[l], k, v, ctx - t < fill ? ctx - t : fill), "neo_attn_append");
    }

    enum { WARM = 20 };
    int n_tasks = 0;
    for (int c = -WARM; c < calls; c++) {
        for (int i = 0; i < MAX_TASKS; i++) t_start[i] = 0.0;
        for (double g0 = probe_now_us(); probe_now_us() - g0 < gap_us;) {
        }
        double t0 = probe_now_us();
        check(neo_attn_decode(L[(c + WARM) % n_layers], q, out), "neo_attn_decode");
        double t1 = probe_now_us();
        if (c < 0) continue;
        double lo = 1e300, hi = 0.0, end = 0.0, tsum = 0.0, msum = 0.0, tmax = 0.0, aend = 0.0;
        int    n = 0, mx = 0;
        memset(per, 0, sizeof(int) * (size_t)ri.n_threads);
        for (int i = 0; i < MAX_TASKS && t_start[i] > 0.0; i++, n++) {
            double e = t_merged[i] > 0.0 ? t_merged[i] : t_attended[i];
            lo = t_start[i] < lo ? t_start[i] : lo;
            hi = t_start[i] > hi ? t_start[i] : hi;
            end = e > end ? e : end;
            tsum += t_attended[i] - t_start[i];
            tmax = t_attended[i] - t_start[i] > tmax ? t_attended[i] - t_start[i] : tmax;
            aend = t_attended[i] > aend ? t_attended[i] : aend;
            if (t_merged[i] > 0.0) msum += t_merged[i] - t_attended[i];
            if (t_thread[i] >= 0 && t_thread[i] < ri.n_threads && ++per[t_thread[i]] > mx) mx = per[t_thread[i]];
        }
        if (!n) {
            fprintf(stderr, "probe-cpu: the call ran no decode task\n");
            return 1;
        }
        n_tasks = n;
        call[c] = t1 - t0, first[c] = lo - t0, last[c] = hi - t0, task[c] = tsum / n, merge[c] = msum, tail[c] = t1 - end, most[c] = mx;
        slow[c] = tmax, end_at[c] = aend - t0;

        /* the same chunks of a layer half the rotation away, read only */
        rj->L = L[(c + WARM + n_layers / 2) % n_layers];
        rj->n_chunks = n / nkv, rj->cells = (ctx + rj->n_chunks - 1) / rj->n_chunks;
        for (double g0 = probe_now_us(); probe_now_us() - g0 < gap_us;) {
        }
        t0 = probe_now_us();
        neo__pool_run(&rt->pool, n, read_task, rj);
        t1 = probe_now_us();
        lo = 1e300, hi = 0.0, tsum = 0.0, tmax = 0.0;
        for (int i = 0; i < n; i++) {
            lo = r_start[i] < lo ? r_start[i] : lo;
            hi = r_start[i] > hi ? r_start[i] : hi;
            tsum += r_end[i] - r_start[i];
            tmax = r_end[i] - r_start[i] > tmax ? r_end[i] - r_start[i] : tmax;
        }
        rcall[c] = t1 - t0, rfirst[c] = lo - t0, rlast[c] = hi - t0, rtask[c] = tsum / n, rslow[c] = tmax;
    }
    printf("%d/%d/%d ctx %d, %d thread(s) (%s, read-ahead into L%d: L1d %ld KB), %d layers, %d tasks, %d calls %d us apart (medians, us):\n",
           nh, nkv, hd, ctx, ri.n_threads, neo_cpu_isa_name(ri.cpu_isa), rt->kern.pf, neo__l1d_bytes() >> 10, n_layers, n_tasks, calls,
           gap_us);
    printf("  call %.1f  first %.1f  last %.1f  task %.1f  slowest %.1f  end %.1f  merge %.1f  tail %.1f  max/thread %.0f\n",
           median(call, calls), median(first, calls), median(last, calls), median(task, calls), median(slow, calls),
           median(end_at, calls), median(merge, calls), median(tail, calls), median(most, calls));
    printf("  read only (%.0f MB a call, the same chunks and pool, no arithmetic): call %.1f  first %.1f  last %.1f  task %.1f  slowest %.1f\n",
           (double)ctx * nkv * hd * 4 / 1e6, median(rcall, calls), median(rfirst, calls), median(rlast, calls), median(rtask, calls),
           median(rslow, calls));
    for (int l = 0; l < n_layers; l++) neo_layer_destroy(L[l]);
    neo_runtime_destroy(rt);
    free(L), free(buf), free(st), free(per), free(rj);
    return 0;
}
