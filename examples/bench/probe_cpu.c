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
    double      *st = (double *)malloc(sizeof(double) * 7 * (size_t)calls);
    neo_layer  **L = (neo_layer **)calloc((size_t)n_layers, sizeof *L);
    int         *per = (int *)malloc(sizeof(int) * (size_t)ri.n_threads);
    if (!buf || !st || !L || !per) {
        fprintf(stderr, "probe-cpu: out of memory\n");
        return 1;
    }
    float  *k = buf, *v = k + nkvf, *q = v + nkvf, *out = q + nq;
    double *call = st, *first = call + calls, *last = first + calls, *task = last + calls, *merge = task + calls;
    double *tail = merge + calls, *most = tail + calls;
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
        double lo = 1e300, hi = 0.0, end = 0.0, tsum = 0.0, msum = 0.0;
        int    n = 0, mx = 0;
        memset(per, 0, sizeof(int) * (size_t)ri.n_threads);
        for (int i = 0; i < MAX_TASKS && t_start[i] > 0.0; i++, n++) {
            double e = t_merged[i] > 0.0 ? t_merged[i] : t_attended[i];
            lo = t_start[i] < lo ? t_start[i] : lo;
            hi = t_start[i] > hi ? t_start[i] : hi;
            end = e > end ? e : end;
            tsum += t_attended[i] - t_start[i];
            if (t_merged[i] > 0.0) msum += t_merged[i] - t_attended[i];
            if (t_thread[i] >= 0 && t_thread[i] < ri.n_threads && ++per[t_thread[i]] > mx) mx = per[t_thread[i]];
        }
        if (!n) {
            fprintf(stderr, "probe-cpu: the call ran no decode task\n");
            return 1;
        }
        n_tasks = n;
        call[c] = t1 - t0, first[c] = lo - t0, last[c] = hi - t0, task[c] = tsum / n, merge[c] = msum, tail[c] = t1 - end, most[c] = mx;
    }
    printf("%d/%d/%d ctx %d, %d thread(s) (%s, read-ahead into L%d: L1d %ld KB), %d layers, %d tasks, %d calls %d us apart (medians, us):\n",
           nh, nkv, hd, ctx, ri.n_threads, neo_cpu_isa_name(ri.cpu_isa), rt->kern.pf, neo__l1d_bytes() >> 10, n_layers, n_tasks, calls,
           gap_us);
    printf("  call %.1f  first %.1f  last %.1f  task %.1f  merge %.1f  tail %.1f  max/thread %.0f\n", median(call, calls),
           median(first, calls), median(last, calls), median(task, calls), median(merge, calls), median(tail, calls),
           median(most, calls));
    for (int l = 0; l < n_layers; l++) neo_layer_destroy(L[l]);
    neo_runtime_destroy(rt);
    free(L), free(buf), free(st), free(per);
    return 0;
}
