/* test_api.c - every error case of the public API (API.md and neo_attn.h): bad pointers, shapes
   and options give the documented status, change nothing and never crash; plus the small rules
   (status strings, the gpu-heads fraction rule, layer info on a CPU runtime, sinks copied). */
#define NEO__PREFILL_SLICE 64 /* prefills of more than 64 / n_head tokens run in slices (test_prefill_slices) */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"

#include "check.h"
#include "cpu_isa.h"
#include "synth_model.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Huge allocations must come back as NULL (NEO_ERR_NO_MEMORY), not abort inside ASan. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifdef TEST_ASAN
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

static neo_runtime *make_rt(int n_threads) {
    neo_runtime_desc rd = {0};
    neo_runtime *rt = NULL;
    rd.n_threads = n_threads;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return NULL;
    return rt;
}

static void fill(float *p, size_t n, float base) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = base + 0.37f * (float)((i * 7919u) % 23u) - 4.0f;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void poison(float *p, size_t n) {
    uint32_t u = 0x7FC0DEADu;
    size_t i;
    for (i = 0; i < n; i++) memcpy(&p[i], &u, 4);
}

/* An engine's parallel-for, serial: tasks in order, thread i % 3 (no two run at once). */
static int engine_calls;
static void engine_parallel_for(void *user, int n_tasks, neo_task_fn task, void *arg) {
    int i;
    (void)user;
    engine_calls++;
    for (i = 0; i < n_tasks; i++) task(arg, i, i % 3);
}

/* A logger that keeps the last line and its level, and counts the lines. */
static char         log_last[256];
static neo_log_level log_level;
static int          log_lines;
static void test_log(void *user, neo_log_level level, const char *msg) {
    (void)user;
    log_lines++;
    log_level = level;
    snprintf(log_last, sizeof log_last, "%s", msg);
}

/* An allocator that counts, and fails every request from the fail_at-th on (-1: never). */
typedef struct count_alloc {
    long allocs, frees, fail_at;
} count_alloc;
static void *count_alloc_fn(void *user, size_t bytes) {
    count_alloc *c = (count_alloc *)user;
    if (c->fail_at >= 0 && c->allocs >= c->fail_at) return NULL;
    c->allocs++;
    return malloc(bytes);
}
static void count_free_fn(void *user, void *ptr) {
    ((count_alloc *)user)->frees++;
    free(ptr);
}

/* --- status strings, version, isa names, gpu-heads rule --- */

static void test_strings(void) {
    static const char *const want[] = {"ok",
                                       "invalid argument",
                                       "out of host memory",
                                       "out of GPU memory",
                                       "KV cache full",
                                       "CUDA runtime error",
                                       "not supported by this build or machine, or not now",
                                       "file could not be opened or read",
                                       "file is not in the expected format"};
    static const neo_status all[] = {NEO_OK,           NEO_ERR_INVALID_ARG, NEO_ERR_NO_MEMORY,
                                     NEO_ERR_DEVICE_MEMORY, NEO_ERR_FULL,    NEO_ERR_DEVICE,
                                     NEO_ERR_UNSUPPORTED,   NEO_ERR_IO,      NEO_ERR_FORMAT};
    int i;
    check_context("neo_status_string");
    for (i = 0; i < 9; i++) {
        const char *s = neo_status_string(all[i]);
        CHECK(s != NULL && strcmp(s, want[i]) == 0);
    }
    CHECK(strcmp(neo_status_string((neo_status)9), "unknown status") == 0);
    CHECK(strcmp(neo_status_string((neo_status)1000), "unknown status") == 0);
    CHECK(strcmp(neo_status_string((neo_status)-1), "unknown status") == 0);
    CHECK(strcmp(neo_status_string((neo_status)INT_MAX), "unknown status") == 0);

    check_context("version and isa names");
    CHECK(strcmp(neo_attn_version(), NEO_ATTN_VERSION_STRING) == 0);
    CHECK(strcmp(neo_cpu_isa_name(NEO_CPU_AUTO), "auto") == 0);
    CHECK(strcmp(neo_cpu_isa_name(NEO_CPU_SCALAR), "scalar") == 0);
    CHECK(strcmp(neo_cpu_isa_name(NEO_CPU_AVX2), "avx2") == 0);
    CHECK(strcmp(neo_cpu_isa_name(NEO_CPU_AVX512), "avx512") == 0);
    CHECK(strcmp(neo_cpu_isa_name(NEO_CPU_AMX), "amx") == 0);
    CHECK(neo_cpu_isa_name((neo_cpu_isa)5) != NULL);
    CHECK(neo_cpu_isa_name((neo_cpu_isa)-1) != NULL);
}

static void test_gpu_heads_rule(void) {
    check_context("neo_gpu_heads_for_frac");
    CHECK(neo_gpu_heads_for_frac(8, 1.0f) == 0);   /* frac >= 1: no split */
    CHECK(neo_gpu_heads_for_frac(8, 1.5f) == 0);
    CHECK(neo_gpu_heads_for_frac(8, 1e30f) == 0);
    CHECK(neo_gpu_heads_for_frac(1, 0.5f) == 0);   /* n_head_kv <= 1: no split */
    CHECK(neo_gpu_heads_for_frac(0, 0.5f) == 0);
    CHECK(neo_gpu_heads_for_frac(-4, 0.5f) == 0);
    CHECK(neo_gpu_heads_for_frac(1, 0.0f) == 0);
    CHECK(neo_gpu_heads_for_frac(8, 0.5f) == 4);   /* round(frac * n) */
    CHECK(neo_gpu_heads_for_frac(8, 0.25f) == 2);
    CHECK(neo_gpu_heads_for_frac(8, 0.3125f) == 3); /* 2.5 rounds away from zero */
    CHECK(neo_gpu_heads_for_frac(4, 0.375f) == 2);  /* 1.5 -> 2 */
    CHECK(neo_gpu_heads_for_frac(8, 0.3f) == 2);    /* 2.4 -> 2 */
    CHECK(neo_gpu_heads_for_frac(8, 0.99f) == 7);   /* 7.92 -> 8, clamped to n - 1 */
    CHECK(neo_gpu_heads_for_frac(8, 0.9375f) == 7); /* 7.5 -> 8 -> 7 */
    CHECK(neo_gpu_heads_for_frac(8, 0.01f) == 1);   /* 0.08 -> 0, clamped to 1 */
    CHECK(neo_gpu_heads_for_frac(8, 0.0f) == 1);    /* 0 and negative clamp to 1 */
    CHECK(neo_gpu_heads_for_frac(8, -0.5f) == 1);
    CHECK(neo_gpu_heads_for_frac(8, -1e30f) == 1);
    CHECK(neo_gpu_heads_for_frac(2, 0.5f) == 1);
    CHECK(neo_gpu_heads_for_frac(2, 0.9f) == 1);
    CHECK(neo_gpu_heads_for_frac(32, 0.8f) == 26);  /* 25.6 -> 26 */
}

/* --- runtime --- */

/* the probes of an AUTO round that timed the hybrid, by its line: three each of OFF, ON and the
   hybrid, and three more when the line shows a second share */
static int auto_hybrid_probes(const char *line) {
    const char *p = strstr(line, " us at ");
    return p && strstr(p + 1, " us at ") ? 12 : 9;
}

static void test_runtime(void) {
    neo_runtime_desc rd = {0};
    neo_runtime_info ri;
    neo_runtime *rt = NULL;
    static const neo_cpu_isa isas[] = {NEO_CPU_SCALAR, NEO_CPU_AVX2, NEO_CPU_AVX512, NEO_CPU_AMX};
    int i;

    check_context("runtime defaults");
    CHECK_STATUS(neo_runtime_create(NULL, &rt), NEO_OK);
    CHECK(rt != NULL);
    memset(&ri, 0x5A, sizeof ri);
    CHECK_STATUS(neo_runtime_get_info(rt, &ri), NEO_OK);
    CHECK(ri.n_threads == THREADS((int)sysconf(_SC_NPROCESSORS_ONLN)));
    CHECK(ri.gpu == 0);
    CHECK(ri.cpu_isa == test_cpu_best());
    CHECK_STATUS(neo_runtime_get_info(NULL, &ri), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_runtime_get_info(rt, NULL), NEO_ERR_INVALID_ARG);
    neo_runtime_destroy(rt);
    neo_runtime_destroy(NULL);

    check_context("runtime zero desc");
    rt = NULL;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK);
    if (rt) {
        CHECK_STATUS(neo_runtime_get_info(rt, &ri), NEO_OK);
        CHECK(ri.n_threads == THREADS((int)sysconf(_SC_NPROCESSORS_ONLN)) && ri.cpu_isa == test_cpu_best());
    }
    neo_runtime_destroy(rt);

    check_context("runtime bad args");
    CHECK_STATUS(neo_runtime_create(&rd, NULL), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_runtime_create(NULL, NULL), NEO_ERR_INVALID_ARG);
    rd.n_threads = -1;
    rt = NULL;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.n_threads = INT_MIN;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.n_threads = 1;
    rd.cpu_isa = (neo_cpu_isa)5;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.cpu_isa = (neo_cpu_isa)-1;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.cpu_isa = NEO_CPU_AUTO;

    check_context("runtime gpu=1 without NEO_ATTN_CUDA");
    rd.gpu = 1;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_UNSUPPORTED);
    CHECK(rt == NULL);
    rd.gpu_device = 3;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_UNSUPPORTED);
    CHECK(rt == NULL);
    rd.gpu = 0, rd.gpu_device = 0;

    check_context("runtime gpu_standin");
    rd.gpu_standin = 1; /* the stand-in needs gpu = 1 */
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.gpu_standin = 3; /* a late stream too */
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.gpu = 1, rd.gpu_standin = 4;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.gpu_standin = -1;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.gpu_standin = 1, rd.n_threads = -1;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.n_threads = 2;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK);
    if (rt) {
        CHECK_STATUS(neo_runtime_get_info(rt, &ri), NEO_OK);
        CHECK(ri.gpu == 1 && ri.n_threads == THREADS(2) && ri.cpu_isa == test_cpu_best());
    }
    neo_runtime_destroy(rt);
    rd.gpu = 0, rd.gpu_standin = 0, rd.n_threads = 1;

    for (i = 0; i < 4; i++) {
        int has = test_cpu_has(isas[i]);
        check_context("forced cpu_isa %s (cpu has it: %d)", neo_cpu_isa_name(isas[i]), has);
        rd.cpu_isa = isas[i];
        rt = NULL;
        CHECK_STATUS(neo_runtime_create(&rd, &rt), has ? NEO_OK : NEO_ERR_UNSUPPORTED);
        if (has && rt) {
            CHECK_STATUS(neo_runtime_get_info(rt, &ri), NEO_OK);
            CHECK(ri.cpu_isa == isas[i] && ri.n_threads == 1 && ri.gpu == 0);
        }
        if (!has) CHECK(rt == NULL);
        neo_runtime_destroy(rt);
    }
    rd.cpu_isa = NEO_CPU_AUTO;

    for (i = 1; i <= 4; i++) {
        check_context("runtime n_threads %d", i);
        rd.n_threads = i;
        rt = NULL;
        CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK);
        if (rt) {
            CHECK_STATUS(neo_runtime_get_info(rt, &ri), NEO_OK);
            CHECK(ri.n_threads == THREADS(i) && ri.cpu_isa == test_cpu_best());
        }
        neo_runtime_destroy(rt);
    }

    /* an engine's pool: its size is required, it is used as given (threads or not in this
       build), and a decode through it is bitwise a 1-thread runtime's */
    check_context("runtime with the engine's parallel-for");
    rd.parallel_for = engine_parallel_for;
    rd.n_threads = 0;
    rt = NULL;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
    CHECK(rt == NULL);
    rd.n_threads = 3;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK);
    if (rt) {
        neo_runtime *r1 = make_rt(1);
        neo_layer   *l[2] = {NULL, NULL};
        neo_layer_desc d = {0};
        static float k[2048 * 2 * 64], v[2048 * 2 * 64], q[8 * 64], o[2][8 * 64];
        int          j, calls0 = engine_calls;
        CHECK_STATUS(neo_runtime_get_info(rt, &ri), NEO_OK);
        CHECK(ri.n_threads == 3);
        fill(k, 2048 * 2 * 64, 0.5f), fill(v, 2048 * 2 * 64, -0.25f), fill(q, 8 * 64, 0.1f);
        d.n_head = 8, d.n_head_kv = 2, d.head_dim = 64, d.n_ctx = 2048;
        for (j = 0; j < 2 && r1; j++) {
            poison(o[j], 8 * 64);
            if (CHECK_STATUS(neo_layer_create(j ? rt : r1, &d, &l[j]), NEO_OK)) {
                CHECK_STATUS(neo_attn_append(l[j], k, v, 2048), NEO_OK);
                CHECK_STATUS(neo_attn_decode(l[j], q, o[j]), NEO_OK);
            }
        }
        CHECK(same_bits(o[0], o[1], 8 * 64) && engine_calls > calls0);
        if (l[0] && l[1]) { /* one cell: too small a job to split, run without the engine's pool */
            CHECK_STATUS(neo_layer_truncate(l[0], 1), NEO_OK);
            CHECK_STATUS(neo_layer_truncate(l[1], 1), NEO_OK);
            calls0 = engine_calls;
            CHECK_STATUS(neo_attn_decode(l[1], q, o[1]), NEO_OK);
            CHECK(engine_calls == calls0);
            CHECK_STATUS(neo_attn_decode(l[0], q, o[0]), NEO_OK);
            CHECK(same_bits(o[0], o[1], 8 * 64));
        }
        neo_layer_destroy(l[0]), neo_layer_destroy(l[1]);
        neo_runtime_destroy(r1);
    }
    neo_runtime_destroy(rt);
    rd.parallel_for = NULL, rd.n_threads = 1;

    /* the logger: a refused layer says why; without threads in the build, a runtime of 4 says
       it runs 1; AUTO says what it chose */
    check_context("the runtime's logger");
    rd.log = test_log, rd.n_threads = 4;
    log_lines = 0;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK);
    CHECK(log_lines == (THREADS(4) < 4) && (THREADS(4) == 4 || (log_level == NEO_LOG_WARN && strstr(log_last, "1 of 4"))));
    if (rt) {
        neo_layer     *l = NULL;
        neo_layer_desc d = {0};
        d.n_head = 6, d.n_head_kv = 4, d.head_dim = 8, d.n_ctx = 4;
        log_lines = 0;
        CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_ERR_INVALID_ARG);
        CHECK(log_lines == 1 && log_level == NEO_LOG_ERROR && strstr(log_last, "neo_layer_create") && strstr(log_last, "multiple"));
        d.n_head = 4, d.scale = -1.0f;
        CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_ERR_INVALID_ARG);
        CHECK(log_lines == 2 && strstr(log_last, "scale"));
        d.scale = 0.0f, d.head_dim = 1 << 20;
        CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_ERR_UNSUPPORTED);
        CHECK(log_lines == 3 && strstr(log_last, "beyond"));
    }
    neo_runtime_destroy(rt);
    rd.gpu = 1, rd.gpu_standin = 1, rd.n_threads = 2;
    CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK);
    if (rt) {
        neo_layer     *l = NULL;
        neo_layer_desc d = {0};
        static float   k[64 * 4 * 16], v[64 * 4 * 16], q[8 * 16], o[8 * 16];
        int            j;
        fill(k, 64 * 4 * 16, 0.5f), fill(v, 64 * 4 * 16, -1.0f), fill(q, 8 * 16, 0.25f);
        d.n_head = 8, d.n_head_kv = 4, d.head_dim = 16, d.n_ctx = 64, d.gpu_heads = 2, d.pipeline = NEO_PIPELINE_AUTO;
        log_lines = 0;
        /* the host cells fill a stream-back chunk (n_ctx cells at most), so the hybrid is timed
           too: 3 calls each of OFF, ON and the hybrid, 3 more at a second share when its
           probes give one, then the line with the shares */
        if (CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK) && CHECK_STATUS(neo_attn_append(l, k, v, 64), NEO_OK))
            for (j = 0; j < 8; j++) CHECK_STATUS(neo_attn_decode(l, q, o), NEO_OK);
        if (!CHECK(log_lines == 0)) fprintf(stderr, "    %s\n", log_last);
        for (j = 8; j < 12 && log_lines == 0; j++) CHECK_STATUS(neo_attn_decode(l, q, o), NEO_OK);
        CHECK(log_lines == 1 && log_level == NEO_LOG_INFO && strstr(log_last, "AUTO") && strstr(log_last, "2 of 4") &&
              strstr(log_last, "HYBRID") && strstr(log_last, "CPU share of 0."));
        if (!CHECK(j == auto_hybrid_probes(log_last))) fprintf(stderr, "    %d calls: %s\n", j, log_last);
        neo_layer_destroy(l);
    }
    neo_runtime_destroy(rt);
    rd.log = NULL, rd.gpu = 0, rd.gpu_standin = 0, rd.n_threads = 1;

    /* the runtime's allocator: both functions or neither; everything it hands out comes back;
       a split layer (stand-in) decodes bitwise as with malloc; and running out of memory at
       any allocation gives NEO_ERR_NO_MEMORY, never a leak */
    check_context("the runtime's allocator");
    {
        count_alloc    c = {0, 0, -1};
        neo_layer_desc d = {0};
        static float   k[256 * 4 * 16], v[256 * 4 * 16], q[3 * 8 * 16], o[2][3 * 8 * 16];
        int            f, done = 0;
        fill(k, 256 * 4 * 16, 0.5f), fill(v, 256 * 4 * 16, -1.0f), fill(q, 3 * 8 * 16, 0.25f);
        d.n_head = 8, d.n_head_kv = 4, d.head_dim = 16, d.n_ctx = 256, d.gpu_heads = 1, d.pipeline = NEO_PIPELINE_ON;
        rd.allocator.alloc = count_alloc_fn, rd.allocator.user = &c;
        CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
        rd.allocator.alloc = NULL, rd.allocator.free = count_free_fn;
        CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG);
        rd.allocator.alloc = count_alloc_fn;
        rd.gpu = 1, rd.gpu_standin = 1, rd.n_threads = 3;
        for (f = -1; f < 200 && !done; f++) { /* f = -1: no failure, the reference run */
            neo_layer *l = NULL;
            neo_status st;
            c.allocs = c.frees = 0, c.fail_at = f;
            rd.allocator.alloc = f < 0 ? NULL : count_alloc_fn, rd.allocator.free = f < 0 ? NULL : count_free_fn;
            rt = NULL;
            st = neo_runtime_create(&rd, &rt);
            if (st == NEO_OK) st = neo_layer_create(rt, &d, &l);
            if (st == NEO_OK) st = neo_attn_append(l, k, v, 256);
            if (st == NEO_OK) poison(o[f >= 0], 3 * 8 * 16), st = neo_attn_prefill(l, q, 3, o[f >= 0]);
            if (st == NEO_OK && f >= 0) done = 1, CHECK(same_bits(o[0], o[1], 3 * 8 * 16) && c.allocs > 0);
            if (st != NEO_OK && st != NEO_ERR_NO_MEMORY && st != NEO_ERR_DEVICE_MEMORY) CHECK_STATUS(st, NEO_ERR_NO_MEMORY);
            if (f < 0) CHECK_STATUS(st, NEO_OK);
            neo_layer_destroy(l);
            neo_runtime_destroy(rt);
            if (!CHECK(c.allocs == c.frees)) break;
        }
        CHECK(done);
        rd.allocator.alloc = NULL, rd.allocator.free = NULL, rd.allocator.user = NULL;
        rd.gpu = 0, rd.gpu_standin = 0, rd.n_threads = 1;
    }
}

/* --- layer creation --- */

static neo_layer_desc base_desc(void) {
    neo_layer_desc d = {0};
    d.n_head = 8, d.n_head_kv = 2, d.head_dim = 16, d.n_ctx = 32;
    return d;
}

static void expect_create(neo_runtime *rt, const neo_layer_desc *d, neo_status want, const char *what) {
    neo_layer *l = NULL;
    check_context("layer_create: %s", what);
    CHECK_STATUS(neo_layer_create(rt, d, &l), want);
    if (want != NEO_OK) CHECK(l == NULL);
    else CHECK(l != NULL && neo_layer_length(l) == 0);
    neo_layer_destroy(l);
}

static void test_layer_create(neo_runtime *rt) {
    neo_layer_desc d = base_desc();
    neo_layer *l = NULL;
    neo_status s;
    const float fnan = NAN;

    expect_create(rt, &d, NEO_OK, "base");
    check_context("layer_create: NULL arguments");
    CHECK_STATUS(neo_layer_create(NULL, &d, &l), NEO_ERR_INVALID_ARG);
    CHECK(l == NULL);
    CHECK_STATUS(neo_layer_create(rt, NULL, &l), NEO_ERR_INVALID_ARG);
    CHECK(l == NULL);
    CHECK_STATUS(neo_layer_create(rt, &d, NULL), NEO_ERR_INVALID_ARG);

#define BAD(field, value, st)                                                                                          \
    do {                                                                                                               \
        d = base_desc();                                                                                               \
        d.field = value;                                                                                               \
        expect_create(rt, &d, st, #field " = " #value);                                                                \
    } while (0)
    BAD(n_head, 0, NEO_ERR_INVALID_ARG);
    BAD(n_head, -1, NEO_ERR_INVALID_ARG);
    BAD(n_head, INT_MIN, NEO_ERR_INVALID_ARG);
    BAD(n_head, 7, NEO_ERR_INVALID_ARG);  /* 7 % 2 != 0 */
    BAD(n_head, 1, NEO_ERR_INVALID_ARG);  /* fewer query heads than KV heads */
    BAD(n_head_kv, 0, NEO_ERR_INVALID_ARG);
    BAD(n_head_kv, -2, NEO_ERR_INVALID_ARG);
    BAD(n_head_kv, 3, NEO_ERR_INVALID_ARG);  /* 8 % 3 != 0 */
    BAD(n_head_kv, 16, NEO_ERR_INVALID_ARG); /* more KV heads than query heads */
    BAD(head_dim, 0, NEO_ERR_INVALID_ARG);
    BAD(head_dim, -16, NEO_ERR_INVALID_ARG);
    BAD(head_dim_v, -1, NEO_ERR_INVALID_ARG);
    BAD(head_dim_v, INT_MIN, NEO_ERR_INVALID_ARG);
    BAD(n_ctx, 0, NEO_ERR_INVALID_ARG);
    BAD(n_ctx, -1, NEO_ERR_INVALID_ARG);
    BAD(kv_type, (neo_type)-1, NEO_ERR_INVALID_ARG);
    BAD(kv_type, (neo_type)3, NEO_ERR_INVALID_ARG);
    BAD(kv_type, (neo_type)1000, NEO_ERR_INVALID_ARG);
    BAD(pipeline, (neo_pipeline)-1, NEO_ERR_INVALID_ARG);
    BAD(pipeline, (neo_pipeline)4, NEO_ERR_INVALID_ARG);
    BAD(cpu_share, -0.25f, NEO_ERR_INVALID_ARG);
    BAD(cpu_share, 1.0f, NEO_ERR_INVALID_ARG);
    BAD(cpu_share, 7.0f, NEO_ERR_INVALID_ARG);
    BAD(cpu_share, fnan, NEO_ERR_INVALID_ARG);
    BAD(cpu_share, INFINITY, NEO_ERR_INVALID_ARG);
    BAD(gpu_heads, -2, NEO_ERR_INVALID_ARG);
    BAD(gpu_heads, INT_MIN, NEO_ERR_INVALID_ARG);
    BAD(gpu_heads, 3, NEO_ERR_INVALID_ARG); /* > n_head_kv */
    BAD(gpu_heads, INT_MAX, NEO_ERR_INVALID_ARG);
    BAD(scale, -1.0f, NEO_ERR_INVALID_ARG);
    BAD(scale, -1e-30f, NEO_ERR_INVALID_ARG);
    BAD(scale, fnan, NEO_ERR_INVALID_ARG);
    BAD(softcap, -2.0f, NEO_ERR_INVALID_ARG);
    BAD(softcap, fnan, NEO_ERR_INVALID_ARG);
    BAD(max_alibi_bias, -8.0f, NEO_ERR_INVALID_ARG);
    BAD(max_alibi_bias, fnan, NEO_ERR_INVALID_ARG);
    BAD(scale, -fnan, NEO_ERR_INVALID_ARG);

    /* valid corners */
    BAD(n_head_kv, 8, NEO_OK);
    BAD(n_head_kv, 1, NEO_OK);
    BAD(n_head, 6, NEO_OK); /* GQA group 3 */
    BAD(head_dim, 1, NEO_OK);
    BAD(head_dim_v, 0, NEO_OK);
    BAD(head_dim_v, 40, NEO_OK);
    BAD(n_ctx, 1, NEO_OK);
    BAD(kv_type, NEO_TYPE_BF16, NEO_OK);
    BAD(kv_type, NEO_TYPE_F32, NEO_OK);
    BAD(pipeline, NEO_PIPELINE_ON, NEO_OK);
    BAD(pipeline, NEO_PIPELINE_AUTO, NEO_OK);
    BAD(pipeline, NEO_PIPELINE_HYBRID, NEO_OK);
    BAD(cpu_share, 1e-6f, NEO_OK);
    BAD(cpu_share, 0.999f, NEO_OK);
    BAD(gpu_heads, 1, NEO_OK); /* a split asked for on a CPU runtime: every head stays on the host */
    BAD(gpu_heads, 2, NEO_OK);
    BAD(gpu_heads, NEO_GPU_HEADS_NONE, NEO_OK);
    BAD(scale, 0.125f, NEO_OK);
    BAD(softcap, 30.0f, NEO_OK);
    BAD(max_alibi_bias, 8.0f, NEO_OK);
#undef BAD

    /* the largest head count and head sizes a build supports are taken, one more of each is not */
    {
        static const int dims[3][3] = {{NEO__MAX_HEADS, 1, 0}, {1, NEO__MAX_HEAD_DIM, 0}, {1, 1, NEO__MAX_HEAD_DIM}};
        for (int i = 0; i < 3; i++)
            for (int past = 0; past < 2; past++) {
                d = base_desc();
                d.n_head = dims[i][0] + (i == 0) * past, d.n_head_kv = 1, d.n_ctx = 1;
                d.head_dim = dims[i][1] + (i == 1) * past, d.head_dim_v = dims[i][2] + (i == 2) * past;
                expect_create(rt, &d, past ? NEO_ERR_UNSUPPORTED : NEO_OK, past ? "one past a build's limit" : "a build's limit");
            }
    }
    /* 1 PiB of F32 cache: a valid shape whose allocation fails */
    d = base_desc();
    d.n_head = d.n_head_kv = 64, d.head_dim = 1024, d.n_ctx = INT_MAX, d.kv_type = NEO_TYPE_F32;
    expect_create(rt, &d, NEO_ERR_NO_MEMORY, "1 PiB cache");
    /* sizes whose products overflow int and size_t: refused without UB, whatever the status */
    d = base_desc();
    d.n_head = d.n_head_kv = 1 << 16, d.head_dim = 1 << 30, d.head_dim_v = 1 << 30, d.n_ctx = 1 << 30;
    check_context("layer_create: overflowing sizes");
    l = NULL;
    s = neo_layer_create(rt, &d, &l);
    CHECK(s == NEO_ERR_NO_MEMORY || s == NEO_ERR_INVALID_ARG || s == NEO_ERR_UNSUPPORTED);
    CHECK(l == NULL);
    neo_layer_destroy(l);
    d = base_desc();
    d.n_head = d.n_head_kv = INT_MAX, d.head_dim = INT_MAX, d.n_ctx = INT_MAX;
    l = NULL;
    s = neo_layer_create(rt, &d, &l);
    CHECK(s == NEO_ERR_NO_MEMORY || s == NEO_ERR_INVALID_ARG || s == NEO_ERR_UNSUPPORTED);
    CHECK(l == NULL);
    neo_layer_destroy(l);
    neo_layer_destroy(NULL);
}

/* --- append / decode / prefill / truncate on a small layer --- */

static void test_layer_ops(neo_runtime *rt) {
    enum { NH = 4, NKV = 2, HD = 8, HDV = 12, CTX = 8 };
    neo_layer_desc d = {0};
    neo_layer *l = NULL;
    float k[CTX * NKV * HD], v[CTX * NKV * HDV], q[CTX * NH * HD];
    float out[CTX * NH * HDV], out1[NH * HDV], out2[CTX * NH * HDV], keep[CTX * NH * HDV];

    d.n_head = NH, d.n_head_kv = NKV, d.head_dim = HD, d.head_dim_v = HDV, d.n_ctx = CTX;
    check_context("layer ops: create");
    if (!CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK)) return;
    fill(k, sizeof k / sizeof *k, 0.1f), fill(v, sizeof v / sizeof *v, 0.2f), fill(q, sizeof q / sizeof *q, 0.3f);
    poison(out, sizeof out / sizeof *out);
    memcpy(keep, out, sizeof out);

    check_context("layer ops: empty layer");
    CHECK(neo_layer_length(l) == 0);
    CHECK(neo_layer_length(NULL) == 0);
    CHECK_STATUS(neo_attn_decode(l, q, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, q, 1, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, q, 0, out), NEO_ERR_INVALID_ARG);
    CHECK(same_bits(out, keep, sizeof out / sizeof *out));
    CHECK_STATUS(neo_layer_truncate(l, 0), NEO_OK);
    CHECK_STATUS(neo_layer_truncate(l, 1), NEO_ERR_INVALID_ARG);
    CHECK(neo_layer_length(l) == 0);

    check_context("layer ops: append bad args");
    CHECK_STATUS(neo_attn_append(NULL, k, v, 1), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append(l, NULL, v, 1), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append(l, k, NULL, 1), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append(l, k, v, 0), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append(l, k, v, -1), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append(l, k, v, INT_MIN), NEO_ERR_INVALID_ARG);
    CHECK(neo_layer_length(l) == 0);
    CHECK_STATUS(neo_attn_append(l, k, v, CTX + 1), NEO_ERR_FULL);
    CHECK_STATUS(neo_attn_append(l, k, v, INT_MAX), NEO_ERR_FULL);
    CHECK(neo_layer_length(l) == 0);

    check_context("layer ops: append 6, decode");
    CHECK_STATUS(neo_attn_append(l, k, v, 6), NEO_OK);
    CHECK(neo_layer_length(l) == 6);
    CHECK_STATUS(neo_attn_decode(NULL, q, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_decode(l, NULL, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_decode(l, q, NULL), NEO_ERR_INVALID_ARG);
    CHECK(same_bits(out, keep, sizeof out / sizeof *out));
    poison(out1, NH * HDV);
    CHECK_STATUS(neo_attn_decode(l, q, out1), NEO_OK);
    {
        int i, finite = 1;
        for (i = 0; i < NH * HDV; i++) finite &= isfinite(out1[i]) != 0;
        CHECK(finite);
    }

    check_context("layer ops: prefill bad args");
    CHECK_STATUS(neo_attn_prefill(NULL, q, 1, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, NULL, 1, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, q, 1, NULL), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, q, 0, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, q, -1, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, q, 7, out), NEO_ERR_INVALID_ARG); /* > len */
    CHECK_STATUS(neo_attn_prefill(l, q, INT_MAX, out), NEO_ERR_INVALID_ARG);
    CHECK(same_bits(out, keep, sizeof out / sizeof *out));
    CHECK_STATUS(neo_attn_prefill(l, q, 6, out), NEO_OK);
    CHECK_STATUS(neo_attn_prefill(l, q, 1, out), NEO_OK);

    check_context("layer ops: FULL leaves length and data unchanged");
    CHECK_STATUS(neo_attn_prefill(l, q, 6, out2), NEO_OK);
    fill(k, sizeof k / sizeof *k, -1.5f), fill(v, sizeof v / sizeof *v, 2.5f);
    CHECK_STATUS(neo_attn_append(l, k, v, 3), NEO_ERR_FULL);
    CHECK(neo_layer_length(l) == 6);
    poison(out, sizeof out / sizeof *out);
    CHECK_STATUS(neo_attn_decode(l, q, out), NEO_OK);
    CHECK(same_bits(out, out1, NH * HDV));
    poison(out, sizeof out / sizeof *out);
    CHECK_STATUS(neo_attn_prefill(l, q, 6, out), NEO_OK);
    CHECK(same_bits(out, out2, 6 * NH * HDV));
    CHECK_STATUS(neo_attn_append(l, k, v, 2), NEO_OK); /* exactly full */
    CHECK(neo_layer_length(l) == CTX);
    CHECK_STATUS(neo_attn_decode(l, q, out), NEO_OK);
    memcpy(out1, out, sizeof out1);
    CHECK_STATUS(neo_attn_append(l, q, q, 1), NEO_ERR_FULL);
    CHECK(neo_layer_length(l) == CTX);
    poison(out, sizeof out / sizeof *out);
    CHECK_STATUS(neo_attn_decode(l, q, out), NEO_OK);
    CHECK(same_bits(out, out1, NH * HDV));
    CHECK_STATUS(neo_attn_prefill(l, q, CTX, out), NEO_OK);

    check_context("layer ops: truncate");
    CHECK_STATUS(neo_layer_truncate(NULL, 0), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_layer_truncate(l, -1), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_layer_truncate(l, CTX + 1), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_layer_truncate(l, INT_MIN), NEO_ERR_INVALID_ARG);
    CHECK(neo_layer_length(l) == CTX);
    CHECK_STATUS(neo_layer_truncate(l, CTX), NEO_OK);
    CHECK(neo_layer_length(l) == CTX);
    CHECK_STATUS(neo_layer_truncate(l, 3), NEO_OK);
    CHECK(neo_layer_length(l) == 3);
    CHECK_STATUS(neo_layer_truncate(l, 4), NEO_ERR_INVALID_ARG);
    CHECK(neo_layer_length(l) == 3);
    CHECK_STATUS(neo_attn_prefill(l, q, 4, out), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_prefill(l, q, 3, out), NEO_OK);
    CHECK_STATUS(neo_layer_truncate(l, 0), NEO_OK);
    CHECK(neo_layer_length(l) == 0);
    memcpy(keep, out, sizeof out);
    CHECK_STATUS(neo_attn_decode(l, q, out), NEO_ERR_INVALID_ARG);
    CHECK(same_bits(out, keep, sizeof out / sizeof *out));
    CHECK_STATUS(neo_attn_append(l, k, v, CTX), NEO_OK);
    CHECK(neo_layer_length(l) == CTX);
    neo_layer_destroy(l);
}

/* --- layer info on a CPU runtime --- */

static void test_layer_info(neo_runtime *rt) {
    static const neo_type types[] = {NEO_TYPE_F16, NEO_TYPE_BF16, NEO_TYPE_F32};
    static const size_t elsize[] = {2, 2, 4};
    static const neo_pipeline pipes[] = {NEO_PIPELINE_OFF, NEO_PIPELINE_ON, NEO_PIPELINE_AUTO};
    static const int hdv[] = {0, 24, 5};
    static const int gpu_heads[] = {0, 1, 2};
    float k[3 * 2 * 16], v[3 * 2 * 24], q[8 * 16], out[8 * 24];
    neo_layer_info info;
    int t;

    fill(k, sizeof k / sizeof *k, 0.0f), fill(v, sizeof v / sizeof *v, 1.0f), fill(q, sizeof q / sizeof *q, 2.0f);
    CHECK_STATUS(neo_layer_get_info(NULL, &info), NEO_ERR_INVALID_ARG);
    for (t = 0; t < 3; t++) {
        neo_layer_desc d = base_desc();
        neo_layer *l = NULL;
        int i;
        d.kv_type = types[t], d.head_dim_v = hdv[t], d.pipeline = pipes[t], d.gpu_heads = gpu_heads[t];
        d.n_ctx = 37;
        check_context("layer info: kv_type %d head_dim_v %d pipeline %d gpu_heads %d", t, hdv[t], t, gpu_heads[t]);
        if (!CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK)) continue;
        CHECK_STATUS(neo_layer_get_info(l, NULL), NEO_ERR_INVALID_ARG);
        memset(&info, 0x5A, sizeof info);
        CHECK_STATUS(neo_layer_get_info(l, &info), NEO_OK);
        CHECK(info.gpu_heads == 0 && info.cpu_heads == 2);
        CHECK(info.gpu_bytes == 0);
        CHECK(info.host_bytes == (size_t)2 * 37 * (size_t)(16 + (hdv[t] ? hdv[t] : 16)) * elsize[t]);
        CHECK(info.pipeline == pipes[t]);
        CHECK(info.n_decode == 0 && info.n_overlapped == 0);
        CHECK_STATUS(neo_attn_append(l, k, v, 3), NEO_OK);
        for (i = 1; i <= 3; i++) {
            CHECK_STATUS(neo_attn_decode(l, q, out), NEO_OK);
            CHECK_STATUS(neo_layer_get_info(l, &info), NEO_OK);
            CHECK(info.n_decode == i && info.n_overlapped == 0);
        }
        CHECK(info.host_bytes == (size_t)2 * 37 * (size_t)(16 + (hdv[t] ? hdv[t] : 16)) * elsize[t]);
        neo_layer_destroy(l);
    }
}

/* --- layer info of split layers on the stand-in GPU --- */

static void test_split_info(void) {
    static const int gh[] = {0, 1, 3, 4};
    neo_runtime_desc rd = {0};
    neo_runtime *rt = NULL;
    float k[4 * 16 * 2], v[4 * 24 * 2], q[8 * 16], out[2][8 * 24];
    int g, p;
    rd.n_threads = 2, rd.gpu = 1, rd.gpu_standin = 1;
    check_context("stand-in GPU runtime");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return;
    fill(k, sizeof k / sizeof *k, 0.0f), fill(v, sizeof v / sizeof *v, 1.0f), fill(q, sizeof q / sizeof *q, 2.0f);
    for (g = 0; g < 4; g++) {
        for (p = 0; p < 4; p++) { /* OFF, ON, AUTO, HYBRID */
            neo_layer_desc d = base_desc();
            neo_layer_info info;
            neo_layer *l = NULL;
            int want_gpu = gh[g] ? gh[g] : 4, i;
            size_t per_head = (size_t)50 * (16 + 24) * 2; /* F16 K + V of one KV head */
            d.n_head_kv = 4, d.head_dim_v = 24, d.n_ctx = 50, d.gpu_heads = gh[g], d.pipeline = (neo_pipeline)p;
            check_context("split layer info: gpu_heads %d of 4, pipeline %d", gh[g], p);
            if (!CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK)) continue;
            memset(&info, 0x5A, sizeof info);
            CHECK_STATUS(neo_layer_get_info(l, &info), NEO_OK);
            CHECK(info.gpu_heads == want_gpu && info.cpu_heads == 4 - want_gpu);
            CHECK(info.gpu_bytes == (size_t)want_gpu * per_head && info.host_bytes == (size_t)(4 - want_gpu) * per_head);
            CHECK(info.pipeline == (neo_pipeline)p && info.n_decode == 0 && info.n_overlapped == 0);
            /* the same errors as on a CPU runtime */
            CHECK_STATUS(neo_attn_decode(l, q, out[0]), NEO_ERR_INVALID_ARG);
            CHECK_STATUS(neo_attn_append(l, k, v, 0), NEO_ERR_INVALID_ARG);
            CHECK_STATUS(neo_attn_append(l, k, v, 2), NEO_OK);
            CHECK_STATUS(neo_attn_prefill(l, q, 3, out[0]), NEO_ERR_INVALID_ARG);
            for (i = 0; i < 8; i++) CHECK_STATUS(neo_attn_decode(l, q, out[0]), NEO_OK);
            CHECK_STATUS(neo_attn_append(l, k, v, 49), NEO_ERR_FULL);
            CHECK(neo_layer_length(l) == 2);
            CHECK_STATUS(neo_attn_decode(l, q, out[1]), NEO_OK);
            CHECK(p == NEO_PIPELINE_AUTO || same_bits(out[0], out[1], 8 * 24)); /* AUTO may switch paths */
            CHECK_STATUS(neo_layer_get_info(l, &info), NEO_OK);
            CHECK(info.n_decode == 9 && info.pipeline == (neo_pipeline)p);
            CHECK(info.n_overlapped >= 0 && info.n_overlapped <= (p == NEO_PIPELINE_OFF ? 0 : 9));
            CHECK_STATUS(neo_layer_truncate(l, 3), NEO_ERR_INVALID_ARG);
            CHECK_STATUS(neo_layer_truncate(l, 1), NEO_OK);
            CHECK(neo_layer_length(l) == 1);
            neo_layer_destroy(l);
        }
    }
    neo_runtime_destroy(rt);
}

/* --- sinks are copied at create --- */

static void test_sinks_copied(neo_runtime *rt) {
    enum { NH = 4, NKV = 2, HD = 8, N = 5 };
    float sinks[NH] = {0.5f, 3.0f, -1.0f, 2.0f};
    float k[N * NKV * HD], v[N * NKV * HD], q[NH * HD];
    float a1[NH * HD], a2[NH * HD], b1[NH * HD], c1[NH * HD];
    neo_layer_desc d = {0};
    neo_layer *la = NULL, *lb = NULL, *lc = NULL;
    int i;

    check_context("sinks copied at create");
    fill(k, sizeof k / sizeof *k, 0.0f), fill(v, sizeof v / sizeof *v, 0.5f), fill(q, sizeof q / sizeof *q, 0.25f);
    d.n_head = NH, d.n_head_kv = NKV, d.head_dim = HD, d.n_ctx = N, d.kv_type = NEO_TYPE_F32;
    CHECK_STATUS(neo_layer_create(rt, &d, &lb), NEO_OK); /* no sinks */
    d.sinks = sinks;
    CHECK_STATUS(neo_layer_create(rt, &d, &la), NEO_OK);
    if (!la || !lb) goto done;
    CHECK_STATUS(neo_attn_append(la, k, v, N), NEO_OK);
    CHECK_STATUS(neo_attn_append(lb, k, v, N), NEO_OK);
    CHECK_STATUS(neo_attn_decode(la, q, a1), NEO_OK);
    CHECK_STATUS(neo_attn_decode(lb, q, b1), NEO_OK);
    CHECK(!same_bits(a1, b1, NH * HD)); /* the sinks matter */
    for (i = 0; i < NH; i++) sinks[i] = 40.0f - 20.0f * (float)i;
    poison(a2, NH * HD);
    CHECK_STATUS(neo_attn_decode(la, q, a2), NEO_OK);
    CHECK(same_bits(a1, a2, NH * HD)); /* ... but only as they were at create */
    CHECK_STATUS(neo_layer_create(rt, &d, &lc), NEO_OK);
    if (lc) {
        CHECK_STATUS(neo_attn_append(lc, k, v, N), NEO_OK);
        CHECK_STATUS(neo_attn_decode(lc, q, c1), NEO_OK);
        CHECK(!same_bits(a1, c1, NH * HD)); /* and the new values would have changed the output */
    }
done:
    neo_layer_destroy(la), neo_layer_destroy(lb), neo_layer_destroy(lc);
}

/* --- model and session --- */

static void test_model_session(neo_runtime *rt) {
    synth_cfg c = {16, 24, 2, 4, 2, 32, 16};
    size_t size = 0;
    unsigned char *buf = synth_build(&c, 7, &size);
    neo_model *m = NULL;
    neo_model_info mi;
    neo_session *s = NULL;
    neo_session_desc sd = {0};
    neo_layer_info li;
    float logits[32], keep[32], first[2][32];
    int i;

    check_context("model load errors");
    neo_model_destroy(NULL);
    neo_session_destroy(NULL);
    CHECK_STATUS(neo_model_load(NULL, &m), NEO_ERR_INVALID_ARG);
    CHECK(m == NULL);
    CHECK_STATUS(neo_model_load("/nonexistent-neo-attn-dir/model.bin", NULL), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_model_load("/nonexistent-neo-attn-dir/model.bin", &m), NEO_ERR_IO);
    CHECK(m == NULL);
    CHECK_STATUS(neo_model_load("/", &m), NEO_ERR_IO); /* a directory cannot be read */
    CHECK(m == NULL);
    if (!CHECK(buf != NULL)) return;
    CHECK_STATUS(neo_model_load_memory(NULL, size, &m), NEO_ERR_INVALID_ARG);
    CHECK(m == NULL);
    CHECK_STATUS(neo_model_load_memory(buf, size, NULL), NEO_ERR_INVALID_ARG);

    check_context("model load from memory");
    CHECK_STATUS(neo_model_load_memory(buf, size, &m), NEO_OK);
    free(buf); /* the bytes were copied */
    if (!m) return;
    CHECK_STATUS(neo_model_get_info(NULL, &mi), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_model_get_info(m, NULL), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_model_get_info(m, &mi), NEO_OK);
    CHECK(mi.dim == 16 && mi.hidden_dim == 24 && mi.n_layers == 2 && mi.n_heads == 4 && mi.n_kv_heads == 2);
    CHECK(mi.vocab_size == 32 && mi.seq_len == 16 && mi.shared_classifier == 1);
    CHECK(mi.weight_bytes == 4 * synth_weight_floats(&c));

    check_context("session create errors");
    CHECK_STATUS(neo_session_create(NULL, m, NULL, &s), NEO_ERR_INVALID_ARG);
    CHECK(s == NULL);
    CHECK_STATUS(neo_session_create(rt, NULL, NULL, &s), NEO_ERR_INVALID_ARG);
    CHECK(s == NULL);
    CHECK_STATUS(neo_session_create(rt, m, NULL, NULL), NEO_ERR_INVALID_ARG);
#define BADS(field, value, st)                                                                                         \
    do {                                                                                                               \
        memset(&sd, 0, sizeof sd);                                                                                     \
        sd.field = value;                                                                                              \
        s = NULL;                                                                                                      \
        check_context("session_create: " #field " = " #value);                                                         \
        CHECK_STATUS(neo_session_create(rt, m, &sd, &s), st);                                                          \
        CHECK((s != NULL) == (st == NEO_OK));                                                                          \
        neo_session_destroy(s);                                                                                        \
        s = NULL;                                                                                                      \
    } while (0)
    BADS(n_ctx, -1, NEO_ERR_INVALID_ARG);
    BADS(n_ctx, INT_MIN, NEO_ERR_INVALID_ARG);
    BADS(kv_type, (neo_type)3, NEO_ERR_INVALID_ARG);
    BADS(kv_type, (neo_type)-1, NEO_ERR_INVALID_ARG);
    BADS(pipeline, (neo_pipeline)4, NEO_ERR_INVALID_ARG);
    BADS(pipeline, NEO_PIPELINE_HYBRID, NEO_OK);
    BADS(cpu_share, 1.5f, NEO_ERR_INVALID_ARG);
    BADS(cpu_share, 0.75f, NEO_OK);
    BADS(gpu_heads, -2, NEO_ERR_INVALID_ARG);
    BADS(gpu_heads, NEO_GPU_HEADS_NONE, NEO_OK);
    BADS(gpu_heads, 3, NEO_ERR_INVALID_ARG); /* > n_kv_heads */
    BADS(gpu_heads, 2, NEO_OK);
    BADS(kv_type, NEO_TYPE_BF16, NEO_OK);
    BADS(n_ctx, 1, NEO_OK);
#undef BADS

    check_context("session with default desc: n_ctx = seq_len");
    CHECK_STATUS(neo_session_create(rt, m, NULL, &s), NEO_OK);
    if (s) {
        for (i = 0; i < 16; i++) CHECK_STATUS(neo_session_step(s, i % 32, logits), NEO_OK);
        CHECK(neo_session_length(s) == 16);
        CHECK_STATUS(neo_session_step(s, 1, logits), NEO_ERR_FULL);
        CHECK(neo_session_length(s) == 16);
        CHECK_STATUS(neo_session_get_info(s, &li), NEO_OK);
        CHECK(li.gpu_heads == 0 && li.cpu_heads == 2 && li.gpu_bytes == 0);
        CHECK(li.host_bytes == (size_t)2 * 2 * 16 * 2 * 4 * 2); /* layers * kv heads * ctx * (K+V) * hs * f16 */
        CHECK(li.n_decode == 2 * 16 && li.pipeline == NEO_PIPELINE_OFF);
        neo_session_destroy(s);
        s = NULL;
    }

    check_context("session step errors");
    memset(&sd, 0, sizeof sd);
    sd.n_ctx = 3, sd.kv_type = NEO_TYPE_F32;
    CHECK_STATUS(neo_session_create(rt, m, &sd, &s), NEO_OK);
    if (!s) goto done;
    poison(logits, 32);
    memcpy(keep, logits, sizeof keep);
    CHECK_STATUS(neo_session_step(NULL, 1, logits), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_step(s, 1, NULL), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_step(s, -1, logits), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_step(s, 32, logits), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_step(s, INT_MAX, logits), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_step(s, INT_MIN, logits), NEO_ERR_INVALID_ARG);
    CHECK(same_bits(logits, keep, 32));
    CHECK(neo_session_length(s) == 0);
    CHECK(neo_session_length(NULL) == 0);
    CHECK_STATUS(neo_session_step(s, 1, logits), NEO_OK);
    memcpy(first[0], logits, sizeof logits);
    CHECK_STATUS(neo_session_step(s, 31, logits), NEO_OK);
    memcpy(first[1], logits, sizeof logits);
    CHECK_STATUS(neo_session_step(s, 0, logits), NEO_OK);
    CHECK(neo_session_length(s) == 3);
    memcpy(keep, logits, sizeof keep);
    CHECK_STATUS(neo_session_step(s, 5, logits), NEO_ERR_FULL);
    CHECK_STATUS(neo_session_step(s, 99, logits), NEO_ERR_INVALID_ARG);
    CHECK(neo_session_length(s) == 3);
    CHECK(same_bits(logits, keep, 32));
    CHECK_STATUS(neo_session_get_info(NULL, &li), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_get_info(s, NULL), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_get_info(s, &li), NEO_OK);
    CHECK(li.n_decode == 2 * 3);
    CHECK(li.host_bytes == (size_t)2 * 2 * 3 * 2 * 4 * 4);

    check_context("session truncate");
    CHECK_STATUS(neo_session_truncate(NULL, 0), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_truncate(s, -1), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_session_truncate(s, 4), NEO_ERR_INVALID_ARG);
    CHECK(neo_session_length(s) == 3);
    CHECK_STATUS(neo_session_truncate(s, 1), NEO_OK);
    CHECK(neo_session_length(s) == 1);
    CHECK_STATUS(neo_session_step(s, 31, logits), NEO_OK);
    CHECK(same_bits(logits, first[1], 32)); /* same position, same history: same logits */
    CHECK_STATUS(neo_session_truncate(s, 0), NEO_OK);
    CHECK_STATUS(neo_session_step(s, 1, logits), NEO_OK);
    CHECK(same_bits(logits, first[0], 32));
    neo_session_destroy(s);
done:
    neo_model_destroy(m);
}

/* --- every refusal is logged: a logger that records is told why, once the call has a runtime --- */

#define EXPECT_LOG(call, st, word)                                                                                     \
    do {                                                                                                               \
        int n0_ = log_lines;                                                                                           \
        check_context("the log of %s", #call);                                                                         \
        CHECK_STATUS(call, st);                                                                                        \
        if (!CHECK(log_lines > n0_ && strstr(log_last, word) != NULL))                                                 \
            fprintf(stderr, "    %d lines, the last: \"%s\" (wanted \"%s\")\n", log_lines - n0_, log_last, word);      \
    } while (0)

/* While the stream is being captured into a CUDA graph (the stand-in's recording), every call a
   graph cannot hold refuses, says why, and leaves the capture valid (a split layer's decode under
   AUTO still measuring among them); a session made before the capture refuses its step and
   truncation, and a session with graphs on a CPU runtime runs without them. A HYBRID decode is
   captured (test_captured_hybrid). */
static void test_capture_refusals(void) {
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_layer       *l = NULL, *hy = NULL, *made = NULL;
    neo_layer_desc   d = base_desc();
    synth_cfg        sc = {16, 24, 2, 4, 2, 32, 3};
    size_t           size = 0;
    unsigned char   *buf = synth_build(&sc, 13, &size);
    neo_model       *m = NULL;
    neo_session     *s = NULL;
    neo_session_desc sd = {0};
    neo__sgraph     *g = NULL;
    static float     k[2 * 16], v[2 * 16], q[8 * 16], out[8 * 16], logits[32];
    rd.log = test_log, rd.n_threads = 2, rd.gpu = 1, rd.gpu_standin = 1;
    check_context("capture refusals: setup");
    if (!CHECK(buf) || !CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) || !CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK) ||
        !CHECK_STATUS(neo_model_load_memory(buf, size, &m), NEO_OK) || !CHECK_STATUS(neo_session_create(rt, m, &sd, &s), NEO_OK))
        goto done;
    d.gpu_heads = 1, d.pipeline = NEO_PIPELINE_AUTO;
    if (!CHECK_STATUS(neo_layer_create(rt, &d, &hy), NEO_OK)) goto done;
    CHECK_STATUS(neo_attn_append(l, k, v, 1), NEO_OK);
    CHECK_STATUS(neo_attn_append(hy, k, v, 1), NEO_OK);
    if (!CHECK_STATUS(neo__standin_capture_begin(rt), NEO_OK)) goto done;
    EXPECT_LOG(neo_layer_create(rt, &d, &made), NEO_ERR_UNSUPPORTED, "captured into a CUDA graph");
    CHECK(made == NULL);
    EXPECT_LOG(neo_attn_prefill(l, q, 1, out), NEO_ERR_UNSUPPORTED, "captured into a CUDA graph");
    EXPECT_LOG(neo_layer_truncate(l, 0), NEO_ERR_UNSUPPORTED, "captured into a CUDA graph");
    EXPECT_LOG(neo_layer_set_gpu_heads(l, 1), NEO_ERR_UNSUPPORTED, "captured into a CUDA graph");
    EXPECT_LOG(neo_runtime_sync(rt), NEO_ERR_UNSUPPORTED, "captured into a CUDA graph");
    EXPECT_LOG(neo_session_step(s, 1, logits), NEO_ERR_UNSUPPORTED, "captured into a CUDA graph");
    EXPECT_LOG(neo_session_truncate(s, 0), NEO_ERR_UNSUPPORTED, "captured into a CUDA graph");
    EXPECT_LOG(neo_attn_decode(hy, q, out), NEO_ERR_UNSUPPORTED, "pipeline AUTO (still measuring)");
    EXPECT_LOG(neo_attn_decode_batch(&hy, 1, q, out), NEO_ERR_UNSUPPORTED, "pipeline AUTO (still measuring)");
    CHECK_STATUS(neo_attn_decode(l, q, out), NEO_OK); /* the capture goes on */
    check_context("capture refusals: the capture is still valid");
    CHECK_STATUS(neo__standin_capture_end(rt, &g), NEO_OK);
    CHECK(g && g->n == 1 && neo_layer_length(l) == 1);
    neo__standin_graph_free(rt, g);
    /* the capture is over: a session's eager step (which takes no capture's check on entry) runs
       eagerly, its 2 layers' decodes counted now and its cache a token longer on the host */
    check_context("capture refusals: an eager step after the capture");
    {
        neo_layer_info li;
        if (CHECK_STATUS(neo_session_step(s, 1, logits), NEO_OK) && CHECK_STATUS(neo_session_get_info(s, &li), NEO_OK))
            CHECK(li.n_decode == 2 && neo_session_length(s) == 1 && neo_layer_length(s->layers[0]) == 1);
    }
done:
    neo_session_destroy(s);
    neo_layer_destroy(l), neo_layer_destroy(hy);
    neo_runtime_destroy(rt);
    if (m) { /* graphs asked of a CPU runtime: steps run without them */
        neo_runtime_desc cd = {0};
        neo_runtime     *crt = NULL;
        check_context("capture refusals: graphs on a CPU runtime");
        cd.n_threads = 1, cd.log = test_log, sd.graphs = 1;
        if (CHECK_STATUS(neo_runtime_create(&cd, &crt), NEO_OK) && CHECK_STATUS(neo_session_create(crt, m, &sd, &s), NEO_OK))
            CHECK_STATUS(neo_session_step(s, 1, logits), NEO_OK), CHECK(s->graph == NULL);
        sd.graphs = 2;
        neo_session *bad = NULL;
        if (crt) EXPECT_LOG(neo_session_create(crt, m, &sd, &bad), NEO_ERR_INVALID_ARG, "graphs");
        neo_session_destroy(s);
        neo_runtime_destroy(crt);
    }
    neo_model_destroy(m);
    free(buf);
}

/* The stand-in's check of the orchestration's events: a stream waits only for a record it has not
   waited for yet, each stream for itself; events and streams out of range are refused. */
static void test_standin_events(void) {
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    void            *S;
    rd.log = test_log, rd.n_threads = 1, rd.gpu = 1, rd.gpu_standin = 1;
    check_context("the stand-in's events");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return;
    S = rt->dev_state;
    EXPECT_LOG((neo_status)rt->mem.wait(S, NEO__STREAM_COPY, NEO__EV_READY0), NEO_ERR_DEVICE, "event 1, not recorded since");
    CHECK_STATUS((neo_status)rt->mem.record(S, NEO__EV_READY0, NEO__STREAM_MAIN), NEO_OK);
    CHECK_STATUS((neo_status)rt->mem.wait(S, NEO__STREAM_COPY, NEO__EV_READY0), NEO_OK);
    CHECK_STATUS((neo_status)rt->mem.wait(S, NEO__STREAM_MAIN, NEO__EV_READY0), NEO_OK);
    EXPECT_LOG((neo_status)rt->mem.wait(S, NEO__STREAM_COPY, NEO__EV_READY0), NEO_ERR_DEVICE, "stream 1 waits for event 1");
    CHECK_STATUS((neo_status)rt->mem.wait(S, NEO__STREAM_COPY, NEO__EV_READY1), NEO_ERR_DEVICE);
    CHECK_STATUS((neo_status)rt->mem.record(S, NEO__EV_READY0, NEO__STREAM_COPY), NEO_OK);
    CHECK_STATUS((neo_status)rt->mem.record(S, NEO__EV_READY0, NEO__STREAM_COPY), NEO_OK);
    CHECK_STATUS((neo_status)rt->mem.wait(S, NEO__STREAM_COPY, NEO__EV_READY0), NEO_OK);
    CHECK_STATUS((neo_status)rt->mem.wait(S, NEO__STREAM_COPY, NEO__EV_READY0), NEO_ERR_DEVICE);
    CHECK_STATUS((neo_status)rt->mem.record(S, NEO__EVENTS, NEO__STREAM_MAIN), NEO_ERR_INVALID_ARG);
    CHECK_STATUS((neo_status)rt->mem.record(S, NEO__EV_START, 2), NEO_ERR_INVALID_ARG);
    CHECK_STATUS((neo_status)rt->mem.wait(S, 2, NEO__EV_START), NEO_ERR_INVALID_ARG);
    CHECK_STATUS((neo_status)rt->mem.wait(S, NEO__STREAM_MAIN, -1), NEO_ERR_INVALID_ARG);
    { /* a recording is begun once at a time */
        neo__sgraph *g = NULL;
        if (CHECK_STATUS(neo__standin_capture_begin(rt), NEO_OK)) {
            CHECK_STATUS(neo__standin_capture_begin(rt), NEO_ERR_INVALID_ARG);
            CHECK_STATUS(neo__standin_capture_end(rt, &g), NEO_OK);
            CHECK(g && g->n == 0);
        }
        neo__standin_graph_free(rt, g);
    }
    neo_runtime_destroy(rt);
}

/* What a captured decode rings with (neo__rings, neo__ring_share): a split layer under ON rings
   with share 0, under HYBRID with its CPU share, under AUTO as its choice (whatever share its
   timings left); a layer with every head on the device, or AUTO that chose OFF, rings not. */
static void test_ring_share(void) {
    static const struct { int pipeline, choice; float share, auto_share; int gpu_heads, rings; float want; } t[] = {
        {NEO_PIPELINE_ON, NEO_PIPELINE_HYBRID, 0.3f, 0.4f, 1, 1, 0.0f},
        {NEO_PIPELINE_HYBRID, NEO_PIPELINE_ON, 0.3f, 0.4f, 1, 1, 0.3f},
        {NEO_PIPELINE_AUTO, NEO_PIPELINE_HYBRID, 0.3f, 0.4f, 1, 1, 0.4f},
        {NEO_PIPELINE_AUTO, NEO_PIPELINE_ON, 0.3f, 0.4f, 1, 1, 0.0f},
        {NEO_PIPELINE_AUTO, NEO_PIPELINE_OFF, 0.3f, 0.4f, 1, 0, 0.0f},
        {NEO_PIPELINE_OFF, NEO_PIPELINE_HYBRID, 0.3f, 0.4f, 1, 0, 0.0f},
        {NEO_PIPELINE_ON, NEO_PIPELINE_ON, 0.0f, 0.0f, 2, 0, 0.0f}};
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    rd.log = test_log, rd.n_threads = 1, rd.gpu = 1, rd.gpu_standin = 1;
    check_context("the share a captured decode rings with");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return;
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        neo_layer L;
        memset(&L, 0, sizeof L);
        L.rt = rt, L.n_head_kv = 2, L.gpu_heads = t[i].gpu_heads;
        L.pipeline = (neo_pipeline)t[i].pipeline, L.auto_choice = t[i].choice, L.cpu_share = t[i].share, L.auto_share = t[i].auto_share;
        if (!CHECK(neo__rings(&L) == t[i].rings && (!t[i].rings || neo__ring_share(&L) == t[i].want)))
            fprintf(stderr, "    case %d: rings %d, share %g\n", (int)i, neo__rings(&L), (double)neo__ring_share(&L));
    }
    neo_runtime_destroy(rt);
}

/* Two choices at their bounds. An OFF decode reads its host heads in place up to exactly
   NEO_ATTN_IN_PLACE_BYTES of valid cells and a GQA group of exactly 8 (head_dim 128, f16 or
   bf16, one token), past either it streams them back. AUTO takes the median of 3 probes and
   keeps the simpler pipeline on a tie of medians: OFF over ON, either over the hybrid, which it
   takes only when it was timed. */
static void test_choices_at_bounds(void) {
    static const struct { int hh, hd, dv, type, group, n_tokens; long long len; int want; } ip[] = {
        {1, 128, 128, NEO_TYPE_F16, 8, 1, NEO_ATTN_IN_PLACE_BYTES / 512, 1},
        {1, 128, 128, NEO_TYPE_F16, 8, 1, NEO_ATTN_IN_PLACE_BYTES / 512 + 1, 0},
        {2, 128, 128, NEO_TYPE_BF16, 4, 1, NEO_ATTN_IN_PLACE_BYTES / 1024, 1},
        {2, 128, 128, NEO_TYPE_BF16, 4, 1, NEO_ATTN_IN_PLACE_BYTES / 1024 + 1, 0},
        {1, 128, 128, NEO_TYPE_F16, 9, 1, 1, 0},
        {1, 128, 128, NEO_TYPE_F16, 8, 2, 1, 0},
        {1, 128, 128, NEO_TYPE_F32, 8, 1, 1, 0},
        {1, 64, 64, NEO_TYPE_F16, 8, 1, 1, 0},
        {1, 128, 64, NEO_TYPE_F16, 8, 1, 1, 0}};
    /* timed: 0 ON and OFF, 1 the hybrid too, 2 its second share too (kept only when faster) */
    static const struct { double off, on, hyb, hyb2; int timed, want; float share; } au[] = {
        {5, 5, 5, 9, 1, NEO_PIPELINE_OFF, 0.6f},    {5, 4, 4, 9, 1, NEO_PIPELINE_ON, 0.6f},
        {4, 5, 4, 9, 1, NEO_PIPELINE_OFF, 0.6f},    {5, 5, 4, 9, 1, NEO_PIPELINE_HYBRID, 0.6f},
        {6, 5, 4, 9, 0, NEO_PIPELINE_ON, 0.6f},     {5, 6, 7, 9, 1, NEO_PIPELINE_OFF, 0.6f},
        {5, 5, 4, 3, 1, NEO_PIPELINE_HYBRID, 0.6f}, {5, 5, 4, 3, 2, NEO_PIPELINE_HYBRID, 0.7f},
        {5, 5, 4, 4, 2, NEO_PIPELINE_HYBRID, 0.6f}, {5, 5, 6, 4, 2, NEO_PIPELINE_HYBRID, 0.7f},
        {3, 5, 4, 3, 2, NEO_PIPELINE_OFF, 0.7f},    {5, 4, 6, 4, 2, NEO_PIPELINE_ON, 0.7f}};
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_layer        L;
    rd.log = test_log, rd.n_threads = 1, rd.gpu = 1, rd.gpu_standin = 1;
    check_context("choices at their bounds");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return;
    for (size_t i = 0; i < sizeof ip / sizeof *ip; i++) {
        memset(&L, 0, sizeof L);
        L.rt = rt, L.n_head_kv = 4, L.gpu_heads = 4 - ip[i].hh, L.head_dim = ip[i].hd, L.head_dim_v = ip[i].dv;
        L.kv_type = (neo_type)ip[i].type, L.group = ip[i].group, L.len = (int)ip[i].len;
        if (!CHECK(neo__in_place(&L, ip[i].n_tokens) == ip[i].want)) fprintf(stderr, "    in place, case %d\n", (int)i);
    }
    for (int p = 0; p < 6; p++) { /* the median of 3 probes, in every order and with a tie */
        static const double perm[6][3] = {{1, 2, 3}, {1, 3, 2}, {2, 1, 3}, {2, 3, 1}, {3, 1, 2}, {3, 2, 1}};
        double tie[3] = {perm[p][0], perm[p][1], perm[p][2]};
        tie[p % 3] = tie[(p + 1) % 3];
        if (!CHECK(neo__median3(perm[p]) == 2.0 && neo__median3(tie) == tie[p % 3]))
            fprintf(stderr, "    median, order %d: %g, tied %g\n", p, neo__median3(perm[p]), neo__median3(tie));
    }
    for (size_t i = 0; i < sizeof au / sizeof *au; i++) {
        memset(&L, 0, sizeof L);
        L.rt = rt, L.n_head = 8, L.n_head_kv = 4, L.gpu_heads = 2, L.head_dim = 16, L.len = 100;
        for (int p = 0; p < NEO__AUTO_PROBES; p++)
            L.auto_us[0][p] = au[i].off, L.auto_us[1][p] = au[i].on, L.auto_us[2][p] = au[i].hyb, L.auto_us[3][p] = au[i].hyb2;
        L.auto_n = (2 + au[i].timed) * NEO__AUTO_PROBES;
        L.auto_share = 0.6f, L.auto_share2 = 0.7f;
        neo__auto_decide(&L);
        if (!CHECK(L.auto_decided && L.auto_choice == au[i].want && L.auto_len == 100 && L.auto_share == au[i].share))
            fprintf(stderr, "    AUTO, case %d: %d\n", (int)i, L.auto_choice);
    }
    neo_runtime_destroy(rt);
}

/* neo_runtime_sync after a replayed append found its layer full: NEO_ERR_FULL, the flag cleared;
   when clearing it fails, that failure (not NEO_ERR_FULL), and the flag still set for the next
   sync to report. */
static int fail_set_length(void *state, int *len, int value, int stream) {
    (void)state, (void)len, (void)value, (void)stream;
    return NEO_ERR_DEVICE;
}
static void test_sync_full(void) {
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_layer       *l = NULL;
    neo_layer_desc   d = base_desc();
    neo__sgraph     *g = NULL;
    static float     k[2 * 16], v[2 * 16];
    rd.log = test_log, rd.n_threads = 1, rd.gpu = 1, rd.gpu_standin = 1;
    d.n_ctx = 2;
    check_context("sync of a layer a replay found full");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) || !CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK) ||
        !CHECK_STATUS(neo_attn_append(l, k, v, 1), NEO_OK) || !CHECK_STATUS(neo__standin_capture_begin(rt), NEO_OK))
        goto done;
    CHECK_STATUS(neo_attn_append(l, k, v, 1), NEO_OK);
    if (!CHECK_STATUS(neo__standin_capture_end(rt, &g), NEO_OK)) goto done;
    CHECK_STATUS(neo__standin_replay(rt, g), NEO_OK);
    CHECK_STATUS(neo_runtime_sync(rt), NEO_OK);
    CHECK(neo_layer_length(l) == 2);
    CHECK_STATUS(neo__standin_replay(rt, g), NEO_OK); /* full: writes nothing, sets the flag */
    {
        int (*set_length)(void *, int *, int, int) = rt->attn.set_length;
        rt->attn.set_length = fail_set_length;
        CHECK_STATUS(neo_runtime_sync(rt), NEO_ERR_DEVICE);
        rt->attn.set_length = set_length;
    }
    EXPECT_LOG(neo_runtime_sync(rt), NEO_ERR_FULL, "found a 8/2/16 layer full");
    CHECK_STATUS(neo_runtime_sync(rt), NEO_OK);
    CHECK(neo_layer_length(l) == 2);
done:
    neo__standin_graph_free(rt, g);
    neo_layer_destroy(l);
    neo_runtime_destroy(rt);
}

/* The stand-in's late streams (gpu_standin 2: COPY, 3: MAIN): an op there waits until the other
   stream waits for an event recorded after it (and no longer: what comes after that record
   stays queued), until the host waits for the late stream (its sync, an event's sync, a free,
   the both-halves call's catch-up), while a sync of the other stream leaves it queued; an op
   that fails there is reported where the queue runs. */
static void test_standin_late(void) {
    for (int mode = 2; mode <= 3; mode++) {
        neo_runtime_desc rd = {0};
        neo_runtime     *rt = NULL;
        neo_layer       *l = NULL;
        neo_layer_desc   d = base_desc();
        neo__attn_args   a;
        static float     k[2 * 16], v[2 * 16], q[8 * 16], out[8 * 16];
        int              late = mode == 2 ? NEO__STREAM_COPY : NEO__STREAM_MAIN, other = 1 - late, src = 7, dst = 0, dst2 = 0;
        int              lens[3] = {0, 0, 0};
        void            *S, *p = NULL;
        rd.log = test_log, rd.n_threads = 1, rd.gpu = 1, rd.gpu_standin = mode;
        check_context("the stand-in's late stream, gpu_standin %d", mode);
        if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) continue;
        S = rt->dev_state;
        /* a wait runs the queue up to its record, not past it */
        CHECK_STATUS((neo_status)rt->mem.copy(S, &dst, &src, sizeof src, late), NEO_OK);
        CHECK_STATUS((neo_status)rt->mem.record(S, NEO__EV_READY0, late), NEO_OK);
        CHECK_STATUS((neo_status)rt->mem.copy(S, &dst2, &src, sizeof src, late), NEO_OK);
        CHECK(dst == 0 && dst2 == 0);
        CHECK_STATUS((neo_status)rt->mem.wait(S, late, NEO__EV_READY0), NEO_OK); /* its own record: nothing runs */
        CHECK(dst == 0);
        CHECK_STATUS((neo_status)rt->mem.wait(S, other, NEO__EV_READY0), NEO_OK);
        CHECK(dst == 7 && dst2 == 0);
        CHECK_STATUS((neo_status)rt->mem.stream_sync(S, other), NEO_OK);
        CHECK(dst2 == 0);
        CHECK_STATUS((neo_status)rt->mem.stream_sync(S, late), NEO_OK);
        CHECK(dst2 == 7);
        /* the other stream's ops run at once; an event's sync; a free; the catch-up */
        src = 8;
        CHECK_STATUS((neo_status)rt->mem.copy(S, &dst, &src, sizeof src, other), NEO_OK);
        CHECK(dst == 8);
        CHECK_STATUS((neo_status)rt->mem.copy(S, &dst2, &src, sizeof src, late), NEO_OK);
        CHECK_STATUS((neo_status)rt->mem.record(S, NEO__EV_USED0, late), NEO_OK);
        CHECK_STATUS((neo_status)rt->mem.event_sync(S, NEO__EV_USED0), NEO_OK);
        CHECK(dst2 == 8);
        src = 9;
        CHECK_STATUS((neo_status)rt->mem.copy(S, &dst, &src, sizeof src, late), NEO_OK);
        CHECK_STATUS((neo_status)rt->mem.dev_alloc(S, &p, 16), NEO_OK);
        CHECK(dst == 8);
        rt->mem.dev_free(S, p);
        CHECK(dst == 9);
        src = 10;
        CHECK_STATUS((neo_status)rt->mem.copy(S, &dst, &src, sizeof src, late), NEO_OK);
        CHECK(rt->attn.launch_async(S) == 0 && dst == 10);
        /* a queued attend that finds no cell at its length fails where the queue runs */
        if (CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK) && CHECK_STATUS(neo_attn_append(l, k, v, 1), NEO_OK)) {
            CHECK_STATUS(neo_runtime_sync(rt), NEO_OK);
            neo__layer_args(l, &a, q, 1, out, 1);
            a.k = l->k_dev, a.v = l->v_dev, a.len = lens;
            CHECK_STATUS((neo_status)rt->attn.attend(S, &a, late), NEO_OK);
            CHECK_STATUS((neo_status)rt->mem.stream_sync(S, late), NEO_ERR_INVALID_ARG);
            CHECK_STATUS((neo_status)rt->mem.stream_sync(S, late), NEO_OK);
            /* cells left but fewer than its queries (a query before the first cell), and a range
               that starts past the length: each fails alone */
            lens[0] = 1, a.n_tokens = 2;
            CHECK_STATUS((neo_status)rt->attn.attend(S, &a, late), NEO_OK);
            CHECK_STATUS((neo_status)rt->mem.stream_sync(S, late), NEO_ERR_INVALID_ARG);
            lens[0] = 3, a.n_tokens = 1, a.c0 = 5, a.c1 = 8;
            CHECK_STATUS((neo_status)rt->attn.attend(S, &a, late), NEO_OK);
            CHECK_STATUS((neo_status)rt->mem.stream_sync(S, late), NEO_ERR_INVALID_ARG);
        }
        neo_layer_destroy(l);
        neo_runtime_destroy(rt);
    }
}

/* A split layer's HYBRID decode under a capture: recorded with the bell's ring and answer, the
   device part's attend from the cut of the length read at replay (at the layer's CPU share) and
   the merge, the capture valid; refused, the capture left valid, in a build without threads (no
   listener to answer the bell). test_ref replays such graphs against float64. */
static void test_captured_hybrid(void) {
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_layer       *hy = NULL;
    neo_layer_desc   d = base_desc();
    neo__sgraph     *g = NULL;
    static float     k[2 * 16], v[2 * 16], q[8 * 16], out[8 * 16];
    rd.log = test_log, rd.n_threads = 2, rd.gpu = 1, rd.gpu_standin = 1;
    d.gpu_heads = 1, d.pipeline = NEO_PIPELINE_HYBRID, d.cpu_share = 0.25f;
    check_context("captured hybrid decode");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) || !CHECK_STATUS(neo_layer_create(rt, &d, &hy), NEO_OK) ||
        !CHECK_STATUS(neo_attn_append(hy, k, v, 1), NEO_OK) || !CHECK_STATUS(neo__standin_capture_begin(rt), NEO_OK))
        goto done;
    if (NEO_ATTN_NO_THREADS) {
        EXPECT_LOG(neo_attn_decode(hy, q, out), NEO_ERR_UNSUPPORTED, "pipeline HYBRID");
        EXPECT_LOG(neo_attn_decode_batch(&hy, 1, q, out), NEO_ERR_UNSUPPORTED, "pipeline HYBRID");
    } else {
        CHECK_STATUS(neo_attn_append(hy, k, v, 1), NEO_OK);
        CHECK_STATUS(neo_attn_decode(hy, q, out), NEO_OK);
    }
    if (CHECK_STATUS(neo__standin_capture_end(rt, &g), NEO_OK) && !NEO_ATTN_NO_THREADS) {
        int kinds[NEO__SG_MERGE + 1] = {0}, cut = 0;
        for (int i = 0; i < g->n; i++) {
            kinds[g->ops[i].kind]++;
            cut += g->ops[i].kind == NEO__SG_ATTEND && g->ops[i].at.cut_share == 0.25f && g->ops[i].at.len && !g->ops[i].at.out;
        }
        CHECK(kinds[NEO__SG_APPEND] == 1 && kinds[NEO__SG_RING] == 1 && kinds[NEO__SG_ANSWER] == 1 && kinds[NEO__SG_MERGE] == 1);
        CHECK(cut == 1 && kinds[NEO__SG_ATTEND] == 2 && neo_layer_length(hy) == 1);
    } else CHECK(g && g->n == 0);
    neo__standin_graph_free(rt, g);
done:
    neo_layer_destroy(hy);
    neo_runtime_destroy(rt);
}

static void test_refusals_logged(void) {
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_layer       *l = NULL;
    neo_layer_desc   d = base_desc();
    neo_layer_info   li;
    synth_cfg        sc = {16, 24, 2, 4, 2, 32, 3};
    size_t           size = 0;
    unsigned char   *buf = synth_build(&sc, 11, &size);
    neo_model       *m = NULL;
    neo_session     *s = NULL;
    neo_session_desc sd = {0};
    static float     k[32 * 2 * 16], v[32 * 2 * 16], q[32 * 8 * 16], out[32 * 8 * 16], logits[32];
    int              next;

    rd.log = test_log, rd.n_threads = 1;
    EXPECT_LOG(neo_runtime_create(&rd, NULL), NEO_ERR_INVALID_ARG, "out is NULL");
    rd.n_threads = -1;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG, "n_threads");
    rd.n_threads = 1, rd.gpu = 2;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG, "gpu must");
    rd.gpu = 1, rd.gpu_device = -1;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG, "gpu_device >= 0");
    rd.gpu = 0; /* gpu_device is read only with gpu = 1 */
    if (CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) neo_runtime_destroy(rt), rt = NULL;
    rd.gpu_device = 0, rd.gpu_standin = 1;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG, "gpu_standin");
    rd.gpu_standin = 0, rd.cpu_isa = (neo_cpu_isa)7;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG, "cpu_isa");
    rd.cpu_isa = NEO_CPU_AUTO, rd.parallel_for = engine_parallel_for, rd.n_threads = 0;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG, "parallel_for");
    rd.parallel_for = NULL, rd.n_threads = 1, rd.allocator.alloc = count_alloc_fn;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_INVALID_ARG, "allocator");
    rd.allocator.alloc = NULL, rd.gpu = 1;
    EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_UNSUPPORTED, "NEO_ATTN_CUDA");
    rd.gpu = 0;
    if (!test_cpu_has(NEO_CPU_AMX)) {
        rd.cpu_isa = NEO_CPU_AMX;
        EXPECT_LOG(neo_runtime_create(&rd, &rt), NEO_ERR_UNSUPPORTED, "amx");
        rd.cpu_isa = NEO_CPU_AUTO;
    }
    CHECK(rt == NULL);
    check_context("refusals logged: runtime");
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) || !CHECK(buf != NULL)) goto done;
    EXPECT_LOG(neo_runtime_get_info(rt, NULL), NEO_ERR_INVALID_ARG, "info");

    EXPECT_LOG(neo_layer_create(rt, NULL, &l), NEO_ERR_INVALID_ARG, "desc is NULL");
    EXPECT_LOG(neo_layer_create(rt, &d, NULL), NEO_ERR_INVALID_ARG, "out is NULL");
    d.n_head_kv = 3;
    EXPECT_LOG(neo_layer_create(rt, &d, &l), NEO_ERR_INVALID_ARG, "n_head");
    d = base_desc(), d.n_head = d.n_head_kv = 64, d.head_dim = 1024, d.n_ctx = INT_MAX, d.kv_type = NEO_TYPE_F32;
    EXPECT_LOG(neo_layer_create(rt, &d, &l), NEO_ERR_NO_MEMORY, "out of host memory");
    d = base_desc();
    check_context("refusals logged: layer");
    if (!CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK)) goto done;
    fill(k, sizeof k / sizeof *k, 0.5f), fill(v, sizeof v / sizeof *v, -1.0f), fill(q, sizeof q / sizeof *q, 0.25f);
    EXPECT_LOG(neo_attn_decode(l, q, out), NEO_ERR_INVALID_ARG, "empty");
    EXPECT_LOG(neo_attn_prefill(l, q, 1, out), NEO_ERR_INVALID_ARG, "outside [1, 0]");
    EXPECT_LOG(neo_attn_append(l, NULL, v, 1), NEO_ERR_INVALID_ARG, "NULL");
    EXPECT_LOG(neo_attn_append(l, k, NULL, 1), NEO_ERR_INVALID_ARG, "NULL");
    EXPECT_LOG(neo_attn_append(l, k, v, 0), NEO_ERR_INVALID_ARG, "n_tokens");
    EXPECT_LOG(neo_attn_append(l, k, v, 33), NEO_ERR_FULL, "n_ctx 32");
    CHECK_STATUS(neo_attn_append(l, k, v, 30), NEO_OK);
    EXPECT_LOG(neo_attn_append(l, k, v, 3), NEO_ERR_FULL, "holds 30 of n_ctx 32");
    CHECK(log_level == NEO_LOG_WARN);
    EXPECT_LOG(neo_attn_decode(l, NULL, out), NEO_ERR_INVALID_ARG, "NULL");
    EXPECT_LOG(neo_attn_decode(l, q, NULL), NEO_ERR_INVALID_ARG, "NULL");
    EXPECT_LOG(neo_attn_prefill(l, NULL, 1, out), NEO_ERR_INVALID_ARG, "NULL");
    EXPECT_LOG(neo_attn_prefill(l, q, 0, out), NEO_ERR_INVALID_ARG, "n_tokens 0");
    EXPECT_LOG(neo_attn_prefill(l, q, 31, out), NEO_ERR_INVALID_ARG, "n_tokens 31 is outside [1, 30]");
    EXPECT_LOG(neo_layer_truncate(l, 31), NEO_ERR_INVALID_ARG, "n_tokens 31 is outside [0, 30]");
    EXPECT_LOG(neo_layer_truncate(l, -1), NEO_ERR_INVALID_ARG, "outside");
    EXPECT_LOG(neo_layer_get_info(l, NULL), NEO_ERR_INVALID_ARG, "info");
    {
        neo_layer *nl[2] = {NULL, l}; /* the first layer NULL: the second's runtime says why */
        EXPECT_LOG(neo_attn_decode_batch(nl, 2, q, out), NEO_ERR_INVALID_ARG, "a layer is NULL");
        EXPECT_LOG(neo_attn_append_batch(nl, 2, k, v), NEO_ERR_INVALID_ARG, "a layer is NULL");
    }
    CHECK(neo_layer_length(l) == 30);
    check_context("refusals logged: the calls that succeed say nothing");
    {
        int n0 = log_lines;
        CHECK_STATUS(neo_attn_decode(l, q, out), NEO_OK);
        CHECK_STATUS(neo_attn_prefill(l, q, 30, out), NEO_OK);
        CHECK_STATUS(neo_layer_truncate(l, 29), NEO_OK);
        CHECK_STATUS(neo_layer_get_info(l, &li), NEO_OK);
        CHECK(log_lines == n0);
    }

    check_context("refusals logged: session");
    if (!CHECK_STATUS(neo_model_load_memory(buf, size, &m), NEO_OK)) goto done;
    EXPECT_LOG(neo_session_create(rt, NULL, NULL, &s), NEO_ERR_INVALID_ARG, "model is NULL");
    EXPECT_LOG(neo_session_create(rt, m, NULL, NULL), NEO_ERR_INVALID_ARG, "out is NULL");
    sd.n_ctx = -1;
    EXPECT_LOG(neo_session_create(rt, m, &sd, &s), NEO_ERR_INVALID_ARG, "n_ctx");
    sd.n_ctx = 0, sd.gpu_heads = 3; /* the session's own check, before any layer's */
    EXPECT_LOG(neo_session_create(rt, m, &sd, &s), NEO_ERR_INVALID_ARG, "gpu_heads must be in [NEO_GPU_HEADS_NONE, the model's n_kv_heads]");
    sd.gpu_heads = NEO_GPU_HEADS_NONE - 1;
    EXPECT_LOG(neo_session_create(rt, m, &sd, &s), NEO_ERR_INVALID_ARG, "gpu_heads must be in [NEO_GPU_HEADS_NONE, the model's n_kv_heads]");
    sd.gpu_heads = 0, sd.kv_type = (neo_type)5;
    EXPECT_LOG(neo_session_create(rt, m, &sd, &s), NEO_ERR_INVALID_ARG, "kv_type");
    sd.kv_type = NEO_TYPE_F16;
    if (!CHECK_STATUS(neo_session_create(rt, m, &sd, &s), NEO_OK)) goto done;
    EXPECT_LOG(neo_session_step(s, 1, NULL), NEO_ERR_INVALID_ARG, "NULL");
    EXPECT_LOG(neo_session_step_argmax(s, 1, NULL), NEO_ERR_INVALID_ARG, "NULL");
    EXPECT_LOG(neo_session_step(s, -1, logits), NEO_ERR_INVALID_ARG, "token -1");
    EXPECT_LOG(neo_session_step_argmax(s, 32, &next), NEO_ERR_INVALID_ARG, "token 32 is outside [0, 32)");
    EXPECT_LOG(neo_session_truncate(s, 1), NEO_ERR_INVALID_ARG, "outside [0, 0]");
    CHECK_STATUS(neo_session_step(s, 1, logits), NEO_OK);
    CHECK_STATUS(neo_session_step(s, 2, logits), NEO_OK);
    CHECK_STATUS(neo_session_step_argmax(s, 3, &next), NEO_OK);
    {
        int n0 = log_lines; /* one line, the session's own, before any layer is tried */
        CHECK_STATUS(neo_session_step(s, 4, logits), NEO_ERR_FULL);
        CHECK(log_lines == n0 + 1 && strstr(log_last, "the session is full") != NULL);
    }
    EXPECT_LOG(neo_session_truncate(s, -1), NEO_ERR_INVALID_ARG, "outside");
    EXPECT_LOG(neo_session_get_info(s, NULL), NEO_ERR_INVALID_ARG, "info");
    CHECK(neo_session_length(s) == 3);
done:
    check_context("%s", "");
    neo_session_destroy(s);
    neo_model_destroy(m);
    neo_layer_destroy(l);
    neo_runtime_destroy(rt);
    free(buf);
}

/* --- out of host memory on a CPU runtime: every allocation failing in turn through the runtime's
   allocator, from the runtime to a session's steps, gives NEO_ERR_NO_MEMORY (never the GPU's
   NEO_ERR_DEVICE_MEMORY) with a log line, and leaks nothing --- */

static void test_cpu_out_of_memory(void) {
    synth_cfg      sc = {16, 24, 2, 4, 2, 32, 8};
    size_t         size = 0;
    unsigned char *buf = synth_build(&sc, 5, &size);
    neo_model     *m = NULL;
    float          logits[2][32];
    int            f, done = 0;
    check_context("CPU runtime out of memory");
    if (!CHECK(buf != NULL) || !CHECK_STATUS(neo_model_load_memory(buf, size, &m), NEO_OK)) goto out;
    for (f = -1; f < 400 && !done; f++) { /* f = -1: no failure, the reference run */
        count_alloc      c = {0, 0, -1};
        neo_runtime_desc rd = {0};
        neo_runtime     *rt = NULL;
        neo_layer       *l = NULL;
        neo_session     *s = NULL;
        neo_layer_desc   d = base_desc();
        neo_status       st;
        float            kv[4 * 2 * 16], q[8 * 16], o[8 * 16];
        int              i;
        c.fail_at = f;
        rd.n_threads = 2, rd.log = test_log;
        rd.allocator.alloc = count_alloc_fn, rd.allocator.free = count_free_fn, rd.allocator.user = &c;
        fill(kv, sizeof kv / sizeof *kv, 0.5f), fill(q, sizeof q / sizeof *q, 0.25f);
        log_lines = 0;
        st = neo_runtime_create(&rd, &rt);
        if (st == NEO_OK) st = neo_layer_create(rt, &d, &l);
        if (st == NEO_OK) st = neo_attn_append(l, kv, kv, 4);
        if (st == NEO_OK) st = neo_attn_decode(l, q, o);
        if (st == NEO_OK) st = neo_session_create(rt, m, NULL, &s);
        for (i = 0; i < 3 && st == NEO_OK; i++) {
            neo_layer_info before, after;
            memset(&before, 0, sizeof before), memset(&after, 0, sizeof after);
            CHECK_STATUS(neo_session_get_info(s, &before), NEO_OK);
            st = neo_session_step(s, i + 1, logits[f >= 0]);
            CHECK_STATUS(neo_session_get_info(s, &after), NEO_OK);
            /* a failed step counts no decode (and leaves the length) */
            if (st != NEO_OK) CHECK(after.n_decode == before.n_decode && neo_session_length(s) == i);
        }
        if (st == NEO_OK) {
            done = f >= 0;
            CHECK(f < 0 || same_bits(logits[0], logits[1], 32)); /* a retry that gets its memory gives the same bits */
        } else if (!CHECK_STATUS(st, NEO_ERR_NO_MEMORY) || !CHECK(log_lines >= 1 && log_level == NEO_LOG_ERROR)) {
            fprintf(stderr, "    allocation %d failed: status %d, %d log lines (last \"%s\")\n", f, (int)st, log_lines, log_lines ? log_last : "");
        }
        neo_session_destroy(s);
        neo_layer_destroy(l);
        neo_runtime_destroy(rt);
        if (!CHECK(c.allocs == c.frees)) break;
        CHECK(f >= 0 || st == NEO_OK);
    }
    CHECK(done);
out:
    neo_model_destroy(m);
    free(buf);
}

/* --- a failed batch decode counts nothing: running out of memory at any allocation of a
   neo_attn_decode_batch gives the status with a log line and leaves every layer's decode
   counters as they were (on a CPU runtime; on the stand-in with a HYBRID layer, whose CPU cells
   join the batch's job and whose states take buffers of their own, two ON layers of different
   device heads, which share the batch's handoff and come up in two runs, and an AUTO layer still
   measuring, which runs as a single call first); and a neo_runtime_sync that fails says why --- */

static void decode_counts(neo_layer *const *L, int n, long long *dec, long long *ovl) {
    *dec = *ovl = 0;
    for (int i = 0; i < n; i++) {
        neo_layer_info li;
        memset(&li, 0, sizeof li);
        CHECK_STATUS(neo_layer_get_info(L[i], &li), NEO_OK);
        *dec += li.n_decode, *ovl += li.n_overlapped;
    }
}

static void test_failed_batch_counts_nothing(void) {
    static float kv[4 * 4 * 16], q[4][8 * 16], o[4][8 * 16];
    static const neo_pipeline pipes[4] = {NEO_PIPELINE_HYBRID, NEO_PIPELINE_ON, NEO_PIPELINE_ON, NEO_PIPELINE_AUTO};
    static const int          dev[4] = {1, 1, 2, 1}; /* of 4 KV heads on the stand-in */
    fill(kv, sizeof kv / sizeof *kv, 0.5f), fill(&q[0][0], sizeof q / sizeof q[0][0], 0.25f);
    for (int standin = 0; standin < 2; standin++) {
        int done = 0;
        for (long f = 0; f < 80 && !done; f++) {
            count_alloc      c = {0, 0, -1};
            neo_runtime_desc rd = {0};
            neo_runtime     *rt = NULL;
            neo_layer       *L[4] = {NULL, NULL, NULL, NULL};
            neo_layer_desc   d = base_desc();
            neo_status       st = NEO_OK;
            long long        dec0, ovl0, dec1, ovl1;
            const int        n = standin ? 4 : 2;
            check_context("neo_attn_decode_batch out of memory at allocation %ld (%s)", f, standin ? "the stand-in" : "a CPU runtime");
            rd.n_threads = 2, rd.log = test_log, rd.gpu = standin, rd.gpu_standin = standin;
            rd.allocator.alloc = count_alloc_fn, rd.allocator.free = count_free_fn, rd.allocator.user = &c;
            d.n_head_kv = standin ? 4 : 2;
            if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return;
            for (int i = 0; i < n && st == NEO_OK; i++) {
                d.pipeline = standin ? pipes[i] : NEO_PIPELINE_AUTO;
                d.gpu_heads = standin ? dev[i] : 0;
                if ((st = neo_layer_create(rt, &d, &L[i])) == NEO_OK) st = neo_attn_append(L[i], kv, kv, 4);
            }
            if (CHECK_STATUS(st, NEO_OK)) {
                decode_counts(L, n, &dec0, &ovl0);
                c.fail_at = c.allocs + f;
                log_lines = 0;
                st = neo_attn_decode_batch(L, n, &q[0][0], &o[0][0]);
                c.fail_at = -1;
                decode_counts(L, n, &dec1, &ovl1);
                if (st == NEO_OK) done = 1, CHECK(dec1 == dec0 + n);
                else {
                    CHECK(st == NEO_ERR_NO_MEMORY || st == NEO_ERR_DEVICE_MEMORY);
                    CHECK(log_lines >= 1 && log_level == NEO_LOG_ERROR);
                    CHECK(dec1 == dec0 && ovl1 == ovl0);
                }
            }
            for (int i = 0; i < n; i++) neo_layer_destroy(L[i]);
            neo_runtime_destroy(rt);
            CHECK(c.allocs == c.frees);
        }
        CHECK(done);
    }
}

static void test_failed_sync_logs(void) {
    synth_cfg        sc = {16, 24, 2, 4, 2, 32, 16};
    size_t           size = 0;
    unsigned char   *buf = synth_build(&sc, 3, &size);
    neo_model       *m = NULL;
    neo_runtime     *rt = NULL;
    neo_session     *s = NULL;
    neo_runtime_desc rd = {0};
    neo_session_desc sd = {0};
    count_alloc      c = {0, 0, -1};
    float            logits[32];
    check_context("neo_runtime_sync out of memory");
    rd.n_threads = 1, rd.log = test_log, rd.gpu = 1, rd.gpu_standin = 1;
    rd.allocator.alloc = count_alloc_fn, rd.allocator.free = count_free_fn, rd.allocator.user = &c;
    sd.graphs = 1;
    if (CHECK(buf != NULL) && CHECK_STATUS(neo_model_load_memory(buf, size, &m), NEO_OK) &&
        CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) && CHECK_STATUS(neo_session_create(rt, m, &sd, &s), NEO_OK) &&
        CHECK_STATUS(neo_session_step(s, 1, logits), NEO_OK) && CHECK_STATUS(neo_session_step(s, 2, logits), NEO_OK)) {
        /* the steps were captured and replayed: sync reads the lengths back through a buffer it grows now */
        c.fail_at = c.allocs;
        log_lines = 0;
        CHECK_STATUS(neo_runtime_sync(rt), NEO_ERR_NO_MEMORY);
        CHECK(log_lines == 1 && log_level == NEO_LOG_ERROR && strstr(log_last, "neo_runtime_sync") != NULL);
        c.fail_at = -1;
        CHECK_STATUS(neo_runtime_sync(rt), NEO_OK);
        CHECK(neo_session_length(s) == 2);
    }
    neo_session_destroy(s);
    neo_runtime_destroy(rt);
    neo_model_destroy(m);
    free(buf);
    CHECK(c.allocs == c.frees);
}

/* --- one call at a time per runtime: a call that overlaps another one on the same runtime (or
   its layers and sessions) is refused with NEO_ERR_INVALID_ARG and a log line, and changes
   nothing; the refused call's runtime works on afterwards --- */

/* What a call entered from inside another one returned, and whether it ran. */
static neo_layer   *inner_layer;   /* set: the next engine parallel-for or log line calls into it */
static neo_session *inner_session;
static neo_status   inner_st[8];
static int          inner_calls;
static void call_inside(void) {
    static float kv[2 * 16], q[8 * 16], o[8 * 16], lg[32];
    neo_layer   *nl = (neo_layer *)(uintptr_t)1;
    neo_layer   *l = inner_layer;
    neo_layer_desc d = base_desc();
    if (!l) return;
    inner_layer = NULL; /* once */
    inner_calls++;
    inner_st[0] = neo_attn_append(l, kv, kv, 1);
    inner_st[1] = neo_attn_decode(l, q, o);
    inner_st[2] = neo_attn_prefill(l, q, 1, o);
    inner_st[3] = neo_layer_truncate(l, 0);
    inner_st[4] = neo_layer_create(l->rt, &d, &nl);
    inner_st[5] = nl == NULL ? NEO_ERR_INVALID_ARG : NEO_OK;
    inner_st[6] = inner_session ? neo_session_step(inner_session, 1, lg) : NEO_ERR_INVALID_ARG;
    inner_st[7] = inner_session ? neo_session_truncate(inner_session, 0) : NEO_ERR_INVALID_ARG;
    neo_layer_destroy(l);            /* refused: the layer lives on */
    neo_session_destroy(inner_session);
    neo_runtime_destroy(l->rt);      /* refused too */
}
static void reentering_parallel_for(void *user, int n_tasks, neo_task_fn task, void *arg) {
    int i;
    (void)user;
    call_inside();
    for (i = 0; i < n_tasks; i++) task(arg, i, i % 2);
}
static void reentering_log(void *user, neo_log_level level, const char *msg) {
    test_log(user, level, msg);
    call_inside();
}
/* A logger that calls into the runtime on every line it is given. */
static neo_runtime *always_rt;
static neo_status   always_st;
static void always_reentering_log(void *user, neo_log_level level, const char *msg) {
    test_log(user, level, msg);
    always_st = neo_runtime_sync(always_rt);
}
static int all_refused(void) {
    int i, ok = inner_calls == 1;
    for (i = 0; i < 8; i++) ok &= inner_st[i] == NEO_ERR_INVALID_ARG;
    return ok;
}

/* The engine's parallel-for that blocks its first job until released (another thread's call
   meanwhile finds the runtime in use). */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  hold_cv = PTHREAD_COND_INITIALIZER;
static int             hold_state; /* 1: hold the next job; 2: a job is held; 3: let it go */
static void holding_parallel_for(void *user, int n_tasks, neo_task_fn task, void *arg) {
    int i;
    (void)user;
    pthread_mutex_lock(&hold_mu);
    if (hold_state == 1) {
        hold_state = 2;
        pthread_cond_broadcast(&hold_cv);
        while (hold_state != 3) pthread_cond_wait(&hold_cv, &hold_mu);
    }
    pthread_mutex_unlock(&hold_mu);
    for (i = 0; i < n_tasks; i++) task(arg, i, i % 2);
}
typedef struct held_call {
    neo_layer  *l;
    const float *q;
    float      *out;
    neo_status  st;
} held_call;
static void *held_decode(void *arg) {
    held_call *h = (held_call *)arg;
    h->st = neo_attn_decode(h->l, h->q, h->out);
    return NULL;
}

/* Two threads decoding on two layers of one runtime, against the rules: each call is refused or
   right, bitwise. */
static int race_lines;
static void race_log(void *user, neo_log_level level, const char *msg) {
    (void)user, (void)level, (void)msg;
    __atomic_add_fetch(&race_lines, 1, __ATOMIC_RELAXED);
}
typedef struct racer {
    neo_layer   *l;
    const float *q, *want;
    int          ok, refused, wrong;
} racer;
static void *race(void *arg) {
    racer *r = (racer *)arg;
    float  o[8 * 64];
    int    i;
    for (i = 0; i < 10000000 && r->ok < 100; i++) { /* until 100 calls of each thread got in between the other's */
        neo_status st = neo_attn_decode(r->l, r->q, o);
        if (st == NEO_OK) r->ok++, r->wrong += !same_bits(o, r->want, 8 * 64);
        else r->refused += st == NEO_ERR_INVALID_ARG, r->wrong += st != NEO_ERR_INVALID_ARG, sched_yield();
    }
    return NULL;
}

static void test_one_call_at_a_time(void) {
    static float     k[2048 * 2 * 64], v[2048 * 2 * 64], q[8 * 64], o[2][8 * 64];
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_layer       *l[2] = {NULL, NULL};
    neo_layer_desc   d = base_desc();
    synth_cfg        sc = {16, 24, 2, 4, 2, 32, 8};
    size_t           size = 0;
    unsigned char   *buf = synth_build(&sc, 9, &size);
    neo_model       *m = NULL;
    neo_session     *s = NULL;
    int              j, n0;

    /* big enough a decode that the runtime hands it to the engine's parallel-for */
    d.n_head = 8, d.n_head_kv = 2, d.head_dim = 64, d.n_ctx = 2048;
    fill(k, 2048 * 2 * 64, 0.5f), fill(v, 2048 * 2 * 64, -0.25f), fill(q, 8 * 64, 0.1f);
    check_context("one call at a time: setup");
    if (!CHECK(buf != NULL) || !CHECK_STATUS(neo_model_load_memory(buf, size, &m), NEO_OK)) goto out;

    /* 1. from a task of the engine's parallel-for */
    rd.parallel_for = reentering_parallel_for, rd.n_threads = 2, rd.log = test_log;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) goto out;
    for (j = 0; j < 2; j++) CHECK_STATUS(neo_layer_create(rt, &d, &l[j]), NEO_OK);
    CHECK_STATUS(neo_session_create(rt, m, NULL, &s), NEO_OK);
    if (!l[0] || !l[1] || !s) goto out;
    for (j = 0; j < 2; j++) CHECK_STATUS(neo_attn_append(l[j], k, v, 2048), NEO_OK);
    CHECK_STATUS(neo_attn_decode(l[0], q, o[0]), NEO_OK); /* the reference: nothing re-enters */
    check_context("one call at a time: entered from the engine's parallel-for");
    inner_layer = l[1], inner_session = s, inner_calls = 0, log_lines = 0;
    poison(o[1], 8 * 64);
    CHECK_STATUS(neo_attn_decode(l[0], q, o[1]), NEO_OK);
    CHECK(all_refused() && same_bits(o[0], o[1], 8 * 64));
    CHECK(log_lines >= 10 && strstr(log_last, "refused") && strstr(log_last, "neo_runtime_destroy"));
    CHECK(neo_layer_length(l[1]) == 2048 && neo_session_length(s) == 0); /* the refused calls changed nothing */
    CHECK_STATUS(neo_attn_decode(l[1], q, o[1]), NEO_OK);                 /* and the flag is free again */
    CHECK(same_bits(o[0], o[1], 8 * 64));
    CHECK_STATUS(neo_session_step(s, 1, o[1]), NEO_OK);
    neo_session_destroy(s), s = NULL;
    neo_layer_destroy(l[1]), l[1] = NULL;
    neo_layer_destroy(l[0]), l[0] = NULL;
    neo_runtime_destroy(rt), rt = NULL;

    /* 2. from the logger, while a refused call holds the runtime */
    check_context("one call at a time: entered from the logger");
    memset(&rd, 0, sizeof rd);
    rd.n_threads = 2, rd.log = reentering_log;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) goto out;
    CHECK_STATUS(neo_layer_create(rt, &d, &l[0]), NEO_OK);
    CHECK_STATUS(neo_session_create(rt, m, NULL, &s), NEO_OK);
    if (!l[0] || !s) goto out;
    inner_layer = l[0], inner_session = s, inner_calls = 0;
    CHECK_STATUS(neo_attn_decode(l[0], q, o[1]), NEO_ERR_INVALID_ARG); /* empty: logged, inside the call */
    CHECK(all_refused() && neo_layer_length(l[0]) == 0);
    CHECK_STATUS(neo_attn_append(l[0], k, v, 16), NEO_OK);
    CHECK(neo_layer_length(l[0]) == 16);
    neo_session_destroy(s), s = NULL;
    neo_layer_destroy(l[0]), l[0] = NULL;
    neo_runtime_destroy(rt), rt = NULL;

    /* 2b. from a logger that calls in on every line: its call is refused and logs nothing (a
       refusal logged to it would call it again, without end) */
    check_context("one call at a time: a logger that calls in on every line");
    memset(&rd, 0, sizeof rd);
    rd.n_threads = 1, rd.log = always_reentering_log;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) goto out;
    always_rt = rt, always_st = NEO_OK, log_lines = 0;
    CHECK_STATUS(neo_layer_create(rt, &d, &l[0]), NEO_OK);
    if (!l[0]) goto out;
    CHECK_STATUS(neo_attn_decode(l[0], q, o[1]), NEO_ERR_INVALID_ARG); /* empty: logged once */
    CHECK(log_lines == 1 && strstr(log_last, "neo_attn_decode") != NULL);
    CHECK_STATUS(always_st, NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_runtime_sync(rt), NEO_OK); /* the flag is free again */
    neo_layer_destroy(l[0]), l[0] = NULL;
    neo_runtime_destroy(rt), rt = NULL;

    /* 3. from another thread, while a call is held inside the engine's parallel-for */
    check_context("one call at a time: another thread");
    memset(&rd, 0, sizeof rd);
    rd.parallel_for = holding_parallel_for, rd.n_threads = 2, rd.log = test_log;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) goto out;
    for (j = 0; j < 2; j++) CHECK_STATUS(neo_layer_create(rt, &d, &l[j]), NEO_OK);
    CHECK_STATUS(neo_session_create(rt, m, NULL, &s), NEO_OK);
    if (!l[0] || !l[1] || !s) goto out;
    for (j = 0; j < 2; j++) CHECK_STATUS(neo_attn_append(l[j], k, v, 2048), NEO_OK);
    {
        held_call h = {l[0], q, o[1], NEO_ERR_DEVICE};
        pthread_t th;
        poison(o[1], 8 * 64);
        hold_state = 1;
        if (CHECK(pthread_create(&th, NULL, held_decode, &h) == 0)) {
            pthread_mutex_lock(&hold_mu);
            while (hold_state != 2) pthread_cond_wait(&hold_cv, &hold_mu);
            pthread_mutex_unlock(&hold_mu);
            n0 = log_lines;
            inner_layer = l[1], inner_session = s, inner_calls = 0;
            call_inside();
            CHECK(all_refused() && log_lines - n0 >= 10 && strstr(log_last, "refused"));
            pthread_mutex_lock(&hold_mu);
            hold_state = 3;
            pthread_cond_broadcast(&hold_cv);
            pthread_mutex_unlock(&hold_mu);
            pthread_join(th, NULL);
            CHECK_STATUS(h.st, NEO_OK);
            CHECK(same_bits(o[0], o[1], 8 * 64)); /* the held call finished undisturbed */
            CHECK(neo_layer_length(l[1]) == 2048 && neo_session_length(s) == 0);
            CHECK_STATUS(neo_attn_decode(l[1], q, o[1]), NEO_OK);
            CHECK(same_bits(o[0], o[1], 8 * 64));
        }
        hold_state = 0;
    }
    neo_session_destroy(s), s = NULL;
    neo_layer_destroy(l[1]), l[1] = NULL;
    neo_layer_destroy(l[0]), l[0] = NULL;
    neo_runtime_destroy(rt), rt = NULL;

    /* 4. two threads racing on one runtime's pool: refused or bitwise right, never wrong or hung */
    check_context("one call at a time: two threads racing");
    memset(&rd, 0, sizeof rd);
    rd.n_threads = 2, rd.log = race_log;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) goto out;
    for (j = 0; j < 2; j++) CHECK_STATUS(neo_layer_create(rt, &d, &l[j]), NEO_OK);
    if (!l[0] || !l[1]) goto out;
    for (j = 0; j < 2; j++) CHECK_STATUS(neo_attn_append(l[j], k, v, 2048), NEO_OK);
    CHECK_STATUS(neo_attn_decode(l[0], q, o[0]), NEO_OK);
    {
        racer     r[2] = {{l[0], q, o[0], 0, 0, 0}, {l[1], q, o[0], 0, 0, 0}};
        pthread_t th[2];
        int       started = 0;
        race_lines = 0;
        for (j = 0; j < 2; j++) started += pthread_create(&th[j], NULL, race, &r[j]) == 0;
        for (j = 0; j < started; j++) pthread_join(th[j], NULL);
        CHECK(started == 2 && r[0].wrong == 0 && r[1].wrong == 0 && r[0].ok == 100 && r[1].ok == 100);
        CHECK(race_lines == r[0].refused + r[1].refused);
        printf("test_api: two threads, one runtime: %d calls right, %d refused, %d wrong\n", r[0].ok + r[1].ok,
               r[0].refused + r[1].refused, r[0].wrong + r[1].wrong);
    }
out:
    check_context("%s", "");
    neo_session_destroy(s);
    neo_layer_destroy(l[1]);
    neo_layer_destroy(l[0]);
    neo_runtime_destroy(rt);
    neo_model_destroy(m);
    free(buf);
}

/* --- a prefill longer than NEO__PREFILL_SLICE queries (lowered to 64 here) runs in slices: each
   query's output is its decode's, on a CPU runtime and on split stand-in layers --- */

static void test_prefill_slices(void) {
    enum { NH = 8, NKV = 2, HD = 16, DV = 8, N = 37 }; /* head_dim_v apart from head_dim: q and out strides differ */
    static float k[N * NKV * HD], v[N * NKV * DV], q[N * NH * HD], o[N * NH * DV], one[NH * DV];
    int          r;
    fill(k, sizeof k / sizeof *k, 0.5f), fill(v, sizeof v / sizeof *v, -1.0f), fill(q, sizeof q / sizeof *q, 0.25f);
    for (r = 0; r < 3; r++) { /* CPU, stand-in OFF, stand-in ON */
        neo_runtime_desc rd = {0};
        neo_runtime     *rt = NULL;
        neo_layer       *l = NULL;
        neo_layer_desc   d = base_desc();
        int              t, worst_ok = 1;
        rd.n_threads = 2, rd.gpu = r > 0, rd.gpu_standin = r > 0;
        d.n_head = NH, d.n_head_kv = NKV, d.head_dim = HD, d.head_dim_v = DV, d.n_ctx = N, d.gpu_heads = 1, d.pipeline = r == 2 ? NEO_PIPELINE_ON : NEO_PIPELINE_OFF;
        check_context("prefill in slices of %d tokens, runtime %d", NEO__PREFILL_SLICE / NH, r);
        if (CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) && CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK) &&
            CHECK_STATUS(neo_attn_append(l, k, v, N), NEO_OK)) {
            poison(o, N * NH * DV);
            CHECK_STATUS(neo_attn_prefill(l, q, N, o), NEO_OK);
            CHECK(neo_layer_length(l) == N);
            for (t = N - 1; t >= 0; t--) { /* token t is the decode of a layer of t + 1 cells */
                int e;
                CHECK_STATUS(neo_layer_truncate(l, t + 1), NEO_OK);
                CHECK_STATUS(neo_attn_decode(l, q + (size_t)t * NH * HD, one), NEO_OK);
                for (e = 0; e < NH * DV; e++) worst_ok &= fabsf(o[(size_t)t * NH * DV + e] - one[e]) <= 1e-5f * (1.0f + fabsf(one[e]));
            }
            CHECK(worst_ok);
        }
        neo_layer_destroy(l);
        neo_runtime_destroy(rt);
    }
}

/* --- AUTO asks again: a decided layer measures afresh when its length has doubled since it
   decided (single and batch calls) and when its heads move, and not otherwise; a layer shorter
   than a stream-back chunk times OFF and ON only; a whole chunk times the hybrid too, at the share
   OFF / (ON + OFF) within [0.05, 0.95], and at a second share when its probes give one, three
   calls more; the choice is the fastest time the line shows --- */

static int auto_lines; /* "AUTO:" lines since reset */
static char auto_last[256];
static void auto_log(void *user, neo_log_level level, const char *msg) {
    (void)user, (void)level;
    if (strncmp(msg, "AUTO:", 5) == 0) auto_lines++, snprintf(auto_last, sizeof auto_last, "%s", msg);
}

/* the last AUTO line against its own figures */
static int auto_line_ok(int cells, int host_heads) {
    char   name[16], want[64];
    double on = 0, off = 0, hyb = -1, share = -1, hyb2 = -1, share2 = -1;
    int    from = -1;
    const char *p = strstr(auto_last, " runs ");
    snprintf(want, sizeof want, " with %d of 4 KV heads on the host", host_heads);
    if (!p || !strstr(auto_last, want) || sscanf(p, " runs %15s from %d cells (ON %lf us, OFF %lf us", name, &from, &on, &off) != 4)
        return 0;
    if ((p = strstr(auto_last, ", HYBRID ")) != NULL) {
        int n = 0;
        if (sscanf(p, ", HYBRID %lf us at a CPU share of %lf%n", &hyb, &share, &n) != 2) return 0;
        if (strncmp(p + n, ", ", 2) == 0 && (sscanf(p + n, ", %lf us at %lf", &hyb2, &share2) != 2 || share2 < 0.05 || share2 > 0.95))
            return 0;
    }
    if (from != cells) return 0;
    if (hyb >= 0) { /* the share from the medians as printed (0.1 us), so within rounding */
        double r = off / (on + off);
        r = r < 0.05 ? 0.05 : r > 0.95 ? 0.95 : r;
        if (fabs(share - r) > 0.02 + 0.1 / (on + off)) return 0;
    }
    {
        double best = on < off ? on : off;
        const char *fastest = on < off ? "ON" : "OFF";
        if (hyb >= 0 && hyb < best) best = hyb, fastest = "HYBRID";
        if (hyb2 >= 0 && hyb2 < best) best = hyb2, fastest = "HYBRID";
        /* printed times 0.1 apart or more: the choice is the fastest */
        if ((on - best >= 0.1 || !strcmp(fastest, "ON")) && (off - best >= 0.1 || !strcmp(fastest, "OFF")) &&
            (hyb < 0 || hyb - best >= 0.1 || !strcmp(fastest, "HYBRID")) && (hyb2 < 0 || hyb2 - best >= 0.1 || !strcmp(fastest, "HYBRID")))
            return strcmp(name, fastest) == 0;
    }
    return 1;
}

/* decode calls of l (batch calls of l alone when batch) until an AUTO line comes, at most 13: how
   many, 0 on a failed call */
static int auto_round(neo_layer *l, int batch, const float *q, float *o) {
    int before = auto_lines;
    for (int n = 1; n <= 13; n++) {
        if (!CHECK_STATUS(batch ? neo_attn_decode_batch(&l, 1, q, o) : neo_attn_decode(l, q, o), NEO_OK)) return 0;
        if (auto_lines != before) return n;
    }
    return 13;
}

static void test_auto_again(void) {
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_layer       *l = NULL;
    neo_layer_desc   d = {0};
    static float     k[64 * 4 * 16], v[64 * 4 * 16], q[8 * 16], o[8 * 16];
    int              j, ok = 1;
    fill(k, 64 * 4 * 16, 0.5f), fill(v, 64 * 4 * 16, -1.0f), fill(q, 8 * 16, 0.25f);
    rd.gpu = 1, rd.gpu_standin = 1, rd.n_threads = 2, rd.log = auto_log;
    d.n_head = 8, d.n_head_kv = 4, d.head_dim = 16, d.n_ctx = 64, d.gpu_heads = 2, d.pipeline = NEO_PIPELINE_AUTO;
    check_context("AUTO asks again");
    { /* the checker itself, on lines of each choice (which one a machine's timings give varies) */
        static const struct { const char *line; int ok; } ls[] = {
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs ON from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 5.0 us at a CPU share of 0.75)", 1},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs HYBRID from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 2.0 us at a CPU share of 0.75)", 1},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs OFF from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 2.0 us at a CPU share of 0.75)", 0},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs HYBRID from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 2.0 us at a CPU share of 0.25)", 0},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs HYBRID from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 5.0 us at a CPU share of 0.75, 2.0 us at 0.86)", 1},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs ON from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 5.0 us at a CPU share of 0.75, 2.0 us at 0.86)", 0},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs HYBRID from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 2.0 us at a CPU share of 0.75, 2.0 us at 0.99)", 0},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs HYBRID from 64 cells (ON 3.0 us, OFF 9.0 us, HYBRID 2.0 us at a CPU share of 0.75, 2.0)", 0},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs OFF from 64 cells (ON 9.0 us, OFF 3.0 us)", 1},
            {"AUTO: a 8/4/16 layer with 2 of 4 KV heads on the host runs ON from 64 cells (ON 9.0 us, OFF 3.0 us)", 0}};
        for (j = 0; j < (int)(sizeof ls / sizeof *ls); j++) {
            snprintf(auto_last, sizeof auto_last, "%s", ls[j].line);
            CHECK(auto_line_ok(64, 2) == ls[j].ok);
        }
    }
    auto_lines = 0;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) || !CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK) ||
        !CHECK_STATUS(neo_attn_append(l, k, v, 16), NEO_OK))
        goto done;
    /* 16 cells, under a chunk of 64: OFF and ON three times each, then the line, no hybrid */
    for (j = 0; j < 6 && ok; j++) ok = CHECK_STATUS(neo_attn_decode(l, q, o), NEO_OK);
    CHECK(auto_lines == 1 && auto_line_ok(16, 2) && !strstr(auto_last, "HYBRID"));
    for (j = 0; j < 12 && ok; j++) ok = CHECK_STATUS(neo_attn_decode(l, q, o), NEO_OK); /* decided: quiet */
    CHECK_STATUS(neo_attn_append(l, k, v, 15), NEO_OK);
    for (j = 0; j < 6 && ok; j++) ok = CHECK_STATUS(neo_attn_decode(l, q, o), NEO_OK); /* 31 cells: not yet doubled */
    CHECK(auto_lines == 1);
    CHECK_STATUS(neo_attn_append(l, k, v, 1), NEO_OK); /* 32: doubled, asked again */
    for (j = 0; j < 6 && ok; j++) ok = CHECK_STATUS(neo_attn_decode(l, q, o), NEO_OK);
    CHECK(auto_lines == 2 && auto_line_ok(32, 2));
    CHECK_STATUS(neo_attn_append(l, k, v, 32), NEO_OK); /* 64, a whole chunk: the hybrid is timed too */
    if (ok) ok = CHECK((j = auto_round(l, 1, q, o)) > 0);
    CHECK(auto_lines == 3 && auto_line_ok(64, 2) && strstr(auto_last, "HYBRID") != NULL && j == auto_hybrid_probes(auto_last));
    CHECK_STATUS(neo_layer_set_gpu_heads(l, 1), NEO_OK); /* moved: asked again */
    if (ok) ok = CHECK((j = auto_round(l, 0, q, o)) > 0);
    CHECK(auto_lines == 4 && auto_line_ok(64, 3) && j == auto_hybrid_probes(auto_last));
    for (j = 0; j < 9 && ok; j++) ok = CHECK_STATUS(neo_attn_decode_batch(&l, 1, q, o), NEO_OK);
    CHECK(auto_lines == 4);
    if (auto_lines != 4 || !auto_line_ok(64, 3)) fprintf(stderr, "    %d lines, the last: %s\n", auto_lines, auto_last);
    /* the rules on given timings (medians of three, one sample far off): the hybrid's share, kept
       in [0.05, 0.95], and the choice, the hybrid only when faster than both */
    if (ok) {
        static const struct { double off, on, hyb; float share; int choice; } cs[] = {
            {30, 10, 20, 0.75f, NEO_PIPELINE_ON},   {30, 10, 5, 0.75f, NEO_PIPELINE_HYBRID},
            {10, 30, 20, 0.25f, NEO_PIPELINE_OFF},  {10, 30, 25, 0.25f, NEO_PIPELINE_OFF},
            {100, 1, 50, 0.95f, NEO_PIPELINE_ON},   {1, 100, 0.5, 0.05f, NEO_PIPELINE_HYBRID}};
        for (j = 0; j < (int)(sizeof cs / sizeof *cs); j++) {
            for (int i = 0; i < NEO__AUTO_PROBES; i++) {
                double far = i == 1 ? 1000.0 : 1.0; /* the median ignores it */
                l->auto_us[0][i] = cs[j].off * far, l->auto_us[1][i] = cs[j].on * far, l->auto_us[2][i] = cs[j].hyb * far;
            }
            check_context("AUTO's rules, case %d", j);
            CHECK(l->len >= l->stage_cells && neo__auto_hybrid(l) == 1 && fabsf(l->auto_share - cs[j].share) < 1e-6f);
            l->auto_n = 3 * NEO__AUTO_PROBES;
            neo__auto_decide(l);
            CHECK(l->auto_decided && l->auto_choice == cs[j].choice);
        }
    }
    /* the second share on given timings: the CPU half's rate against the device side's, the call's
       when the CPU half finished more than 5% before it, else the stream-back's alone; none when a
       probe ran no CPU half, when it is a NaN, or when it is within 0.01 of the first */
    if (ok) {
        static const struct { double off, hyb, cpu; float share; int timed; double want; } cs[] = {
            {30, 20, 10, 0.75f, 1, 0.075 / 0.0875},          /* the device side last: 0.25 in 20 us */
            {30, 20, 19.5, 0.75f, 1, (0.75 / 19.5) / (0.75 / 19.5 + 1.0 / 30)}, /* the CPU last */
            {40, 20.5, 20, 0.5f, 0, 0},                      /* the same share again */
            {30, 20, 0, 0.75f, 0, 0},                        /* a probe with no CPU half */
            {30, 20, 1, 0.9f, 1, 0.95},                      /* kept inside [0.05, 0.95] */
            {30, 20, 1, 0.95f, 0, 0},                        /* there already */
            {NAN, 20, 19.5, 0.75f, 0, 0}};                   /* no OFF timing to go by */
        for (j = 0; j < (int)(sizeof cs / sizeof *cs); j++) {
            for (int i = 0; i < NEO__AUTO_PROBES; i++) {
                double far = i == 2 ? 1000.0 : 1.0; /* the median ignores it */
                l->auto_us[0][i] = cs[j].off * far, l->auto_us[2][i] = cs[j].hyb * far;
                l->auto_cpu[i] = cs[j].cpu > 0 ? cs[j].cpu * far : i == 0 ? 0.0 : 10.0 * far; /* 0: a probe ran none */
            }
            l->auto_share = cs[j].share, l->auto_share2 = -1.0f;
            check_context("AUTO's second share, case %d", j);
            if (!CHECK(neo__auto_hybrid2(l) == cs[j].timed && (!cs[j].timed || fabs(l->auto_share2 - cs[j].want) < 1e-6)))
                fprintf(stderr, "    share %g\n", l->auto_share2);
        }
    }
done:
    neo_layer_destroy(l);
    neo_runtime_destroy(rt);
}

/* --- the v1 calls: placement, moving heads, batches, sync --- */

/* heads a neo_plan_gpu_heads value puts on the GPU */
static int plan_dev(int g, int n_kv) { return g == NEO_GPU_HEADS_NONE ? 0 : g == 0 ? n_kv : g; }

/* the most GPU bytes of any placement of n <= 3 layers within budget, each layer's heads a[i] bytes */
static size_t plan_most(const neo_layer_desc *d, const size_t *a, int n, size_t budget) {
    size_t most = 0;
    for (int x = 0; x <= d[0].n_head_kv; x++)
        for (int y = 0; y <= (n > 1 ? d[1].n_head_kv : 0); y++)
            for (int z = 0; z <= (n > 2 ? d[2].n_head_kv : 0); z++) {
                size_t u = x * a[0] + (n > 1 ? y * a[1] : 0) + (n > 2 ? z * a[2] : 0);
                if (u <= budget && u > most) most = u;
            }
    return most;
}

/* every placement of up to 3 layers of small shapes, every budget up to all of them: the GPU
   bytes fit and are the most of any placement, the count returned is the host heads, no layer
   could take one more head, and layers of one shape differ by at most one host head (for one
   shape: as many as fit) */
static void plan_case(const neo_layer_desc *d, int n) {
    size_t b[3], all = 0;
    int    same = 1;
    for (int i = 0; i < n; i++) {
        b[i] = (size_t)d[i].n_ctx * (size_t)(d[i].head_dim + d[i].head_dim_v) * (d[i].kv_type == NEO_TYPE_F32 ? 4 : 2);
        all += b[i] * (size_t)d[i].n_head_kv;
        same &= memcmp(&d[i], &d[0], sizeof *d) == 0;
    }
    for (size_t budget = 0; budget <= all + 1; budget++) {
        int    g[3] = {-7, -7, -7}, host = 0, ok = 1, dev[3], total = 0;
        size_t used = 0;
        int    r = neo_plan_gpu_heads(d, n, budget, g);
        for (int i = 0; i < n; i++) {
            ok &= g[i] == NEO_GPU_HEADS_NONE || (g[i] >= 0 && g[i] < d[i].n_head_kv);
            dev[i] = plan_dev(g[i], d[i].n_head_kv);
            used += (size_t)dev[i] * b[i], host += d[i].n_head_kv - dev[i], total += d[i].n_head_kv;
        }
        ok &= r == host && used <= budget && used == plan_most(d, b, n, budget);
        for (int i = 0; i < n; i++) {
            ok &= dev[i] == d[i].n_head_kv || used + b[i] > budget; /* maximal */
            for (int j = 0; j < n; j++)
                if (memcmp(&d[i], &d[j], sizeof *d) == 0) ok &= abs(dev[i] - dev[j]) <= 1; /* even */
        }
        if (same) ok &= total - host == (int)(budget / b[0] < (size_t)total ? budget / b[0] : (size_t)total);
        if (!CHECK(ok)) {
            fprintf(stderr, "    plan: %d layers, budget %zu: returned %d, gpu_heads %d %d %d\n", n, budget, r, g[0], g[1], g[2]);
            return;
        }
    }
}

static void test_plan(void) {
    static const int kv[3] = {1, 2, 3}, ctx[2] = {1, 3};
    neo_layer_desc d[3], shapes[18];
    int            g[3] = {5, 5, 5}, ns = 0;
    memset(shapes, 0, sizeof shapes);
    /* heads of 4, 12 and 6 bytes a cell: sizes 4 to 36 bytes, some not multiples of others (4, 6,
       18, 12), so that taking the largest heads first is not always the most bytes (one 6-byte
       head and two 4-byte ones in 8 bytes: the two) */
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 2; c++)
            for (int t = 0; t < 3; t++, ns++) {
                neo_layer_desc *s = &shapes[ns];
                s->n_head = s->n_head_kv = kv[a], s->head_dim = 1, s->head_dim_v = t ? 2 : 1, s->n_ctx = ctx[c];
                s->kv_type = t == 1 ? NEO_TYPE_F32 : NEO_TYPE_F16, s->gpu_heads = t ? NEO_GPU_HEADS_NONE : 0; /* ignored */
            }
    check_context("neo_plan_gpu_heads, every small case");
    for (int x = 0; x < ns; x++) {
        d[0] = shapes[x], plan_case(d, 1);
        for (int y = 0; y < ns; y++) {
            d[1] = shapes[y], plan_case(d, 2);
            for (int z = 0; z < ns; z++) d[2] = shapes[z], plan_case(d, 3);
        }
    }
    check_context("neo_plan_gpu_heads: a model's layers");
    {
        neo_layer_desc m[32];
        int            gh[32], r;
        for (int i = 0; i < 32; i++) {
            memset(&m[i], 0, sizeof m[i]);
            m[i].n_head = 32, m[i].n_head_kv = 8, m[i].head_dim = 128, m[i].n_ctx = 32768;
        }
        /* room for 200 of the 256 heads: 56 on the host, 1 or 2 a layer */
        r = neo_plan_gpu_heads(m, 32, (size_t)200 * 32768 * 256 * 2 + 12345, gh);
        CHECK(r == 56);
        for (int i = 0; i < 32; i++) CHECK(gh[i] == 6 || gh[i] == 7);
        CHECK(neo_plan_gpu_heads(m, 32, (size_t)-1, gh) == 0 && gh[5] == 0);
        CHECK(neo_plan_gpu_heads(m, 32, 0, gh) == 256 && gh[31] == NEO_GPU_HEADS_NONE);
    }
    check_context("neo_plan_gpu_heads: sliding-window layers (heads of two sizes)");
    {
        /* a global layer of 16 MiB heads and a local one (n_ctx the window) of 0.5 MiB heads, room
           for 5 global heads: those 80 MiB beat 4 global and 8 local heads (68 MiB) */
        neo_layer_desc m[2];
        int            gh[2];
        for (int i = 0; i < 2; i++) {
            memset(&m[i], 0, sizeof m[i]);
            m[i].n_head = 32, m[i].n_head_kv = 8, m[i].head_dim = 128, m[i].n_ctx = i ? 1024 : 32768;
        }
        CHECK(neo_plan_gpu_heads(m, 2, (size_t)80 << 20, gh) == 11 && gh[0] == 5 && gh[1] == NEO_GPU_HEADS_NONE);
        CHECK(neo_plan_gpu_heads(m, 2, ((size_t)80 << 20) - 1, gh) == 4 && gh[0] == 4 && gh[1] == 0);
    }
    check_context("neo_plan_gpu_heads: many head sizes (past the search) and many heads of few");
    for (int sizes = 6; sizes <= 40; sizes += 34) {
        neo_layer_desc m[40];
        int            gh[40], host = 0, r;
        size_t         used = 0, budget = 0, b[40];
        for (int i = 0; i < sizes; i++) {
            memset(&m[i], 0, sizeof m[i]);
            m[i].n_head = m[i].n_head_kv = 1 + i % 7 * 20, m[i].head_dim = 1, m[i].n_ctx = 97 + 13 * i;
            b[i] = (size_t)m[i].n_ctx * 2 * 2; /* f16 */
            budget += b[i] * (size_t)m[i].n_head_kv * 3 / 5;
        }
        r = neo_plan_gpu_heads(m, sizes, budget, gh);
        for (int i = 0; i < sizes; i++) {
            int dev = plan_dev(gh[i], m[i].n_head_kv);
            used += (size_t)dev * b[i], host += m[i].n_head_kv - dev;
        }
        CHECK(r == host && used <= budget);
        for (int i = 0; i < sizes; i++) CHECK(plan_dev(gh[i], m[i].n_head_kv) == m[i].n_head_kv || used + b[i] > budget);
    }
    check_context("neo_plan_gpu_heads: bad arguments write nothing");
    d[0] = shapes[3], d[1] = shapes[4];
    CHECK(neo_plan_gpu_heads(NULL, 2, 100, g) == -1);
    CHECK(neo_plan_gpu_heads(d, 2, 100, NULL) == -1);
    CHECK(neo_plan_gpu_heads(d, 0, 100, g) == -1);
    CHECK(neo_plan_gpu_heads(d, -1, 100, g) == -1);
    d[1].n_head_kv = 0;
    CHECK(neo_plan_gpu_heads(d, 2, 100, g) == -1);
    d[1] = shapes[4], d[1].gpu_heads = -5; /* ignored, as every gpu_heads */
    CHECK(neo_plan_gpu_heads(d, 2, 100, g) >= 0);
    d[1].kv_type = (neo_type)9;
    g[0] = g[1] = 5;
    CHECK(neo_plan_gpu_heads(d, 2, 100, g) == -1 && g[0] == 5 && g[1] == 5);
}

/* NEO_GPU_HEADS_NONE and neo_layer_set_gpu_heads on a CPU runtime: every head on the host
   whatever is asked, nothing moves, the output keeps its bits; bad values change nothing */
static void test_cpu_placement(neo_runtime *rt) {
    static float   k[40 * 2 * 16], v[40 * 2 * 16], q[8 * 16], o[3][8 * 16];
    static const int vals[] = {NEO_GPU_HEADS_NONE, 0, 1, 2, NEO_GPU_HEADS_NONE};
    neo_layer_desc d = base_desc();
    neo_layer     *a = NULL, *b = NULL;
    neo_layer_info li;
    memset(&li, 0, sizeof li);
    fill(k, sizeof k / sizeof *k, 0.1f), fill(v, sizeof v / sizeof *v, -0.3f), fill(q, sizeof q / sizeof *q, 0.7f);
    check_context("NEO_GPU_HEADS_NONE on a CPU runtime");
    d.gpu_heads = NEO_GPU_HEADS_NONE;
    if (!CHECK_STATUS(neo_layer_create(rt, &d, &a), NEO_OK)) return;
    d.gpu_heads = 0;
    if (CHECK_STATUS(neo_layer_create(rt, &d, &b), NEO_OK)) {
        CHECK_STATUS(neo_layer_get_info(a, &li), NEO_OK);
        CHECK(li.gpu_heads == 0 && li.cpu_heads == 2 && li.gpu_bytes == 0);
        CHECK_STATUS(neo_attn_append(a, k, v, 30), NEO_OK);
        CHECK_STATUS(neo_attn_append(b, k, v, 30), NEO_OK);
        poison(o[0], 8 * 16), poison(o[1], 8 * 16);
        CHECK_STATUS(neo_attn_decode(a, q, o[0]), NEO_OK);
        CHECK_STATUS(neo_attn_decode(b, q, o[1]), NEO_OK);
        CHECK(same_bits(o[0], o[1], 8 * 16));
        check_context("neo_layer_set_gpu_heads on a CPU runtime");
        for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
            CHECK_STATUS(neo_layer_set_gpu_heads(a, vals[i]), NEO_OK);
            CHECK_STATUS(neo_layer_get_info(a, &li), NEO_OK);
            CHECK(li.gpu_heads == 0 && li.cpu_heads == 2 && neo_layer_length(a) == 30);
            poison(o[2], 8 * 16);
            CHECK_STATUS(neo_attn_decode(a, q, o[2]), NEO_OK);
            CHECK(same_bits(o[0], o[2], 8 * 16));
        }
        CHECK_STATUS(neo_layer_set_gpu_heads(NULL, 0), NEO_ERR_INVALID_ARG);
        CHECK_STATUS(neo_layer_set_gpu_heads(a, -2), NEO_ERR_INVALID_ARG);
        CHECK_STATUS(neo_layer_set_gpu_heads(a, 3), NEO_ERR_INVALID_ARG);
        CHECK_STATUS(neo_layer_set_gpu_heads(a, INT_MIN), NEO_ERR_INVALID_ARG);
        CHECK(neo_layer_length(a) == 30);
    }
    neo_layer_destroy(a);
    neo_layer_destroy(b);
}

/* bad batches: every one a status, no length moves, no output is written */
static void batch_errors(neo_runtime *rt, neo_runtime *other, const char *what) {
    static float    k[4 * 2 * 16], v[4 * 2 * 16], q[4 * 8 * 16], o[4 * 8 * 16];
    neo_layer_desc  d = base_desc(), e = base_desc();
    neo_layer      *l[4] = {NULL, NULL, NULL, NULL}, *x = NULL, *y = NULL, *z = NULL;
    fill(k, sizeof k / sizeof *k, 0.1f), fill(v, sizeof v / sizeof *v, 0.2f), fill(q, sizeof q / sizeof *q, 0.3f);
    check_context("batch errors on %s: layers", what);
    d.n_ctx = 3, d.gpu_heads = 1, d.pipeline = NEO_PIPELINE_ON;
    e.head_dim_v = 8;
    for (int i = 0; i < 3; i++) CHECK_STATUS(neo_layer_create(rt, &d, &l[i]), NEO_OK);
    CHECK_STATUS(neo_layer_create(rt, &e, &x), NEO_OK);       /* another head_dim_v */
    CHECK_STATUS(neo_layer_create(other, &d, &y), NEO_OK);    /* another runtime */
    d.n_ctx = 5;
    CHECK_STATUS(neo_layer_create(rt, &d, &z), NEO_OK);       /* the same shape, more room */
    if (!l[0] || !l[1] || !l[2] || !x || !y || !z) goto done;
    check_context("batch errors on %s", what);
    CHECK_STATUS(neo_attn_append_batch(l, 3, k, v), NEO_OK);
    CHECK_STATUS(neo_attn_append(l[1], k, v, 1), NEO_OK);
    CHECK_STATUS(neo_attn_append(l[1], k, v, 1), NEO_OK);    /* l[1] full */
    poison(o, sizeof o / sizeof *o);
    CHECK_STATUS(neo_attn_decode_batch(NULL, 2, q, o), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_decode_batch(l, 0, q, o), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_decode_batch(l, -3, q, o), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_decode_batch(l, 2, NULL, o), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_decode_batch(l, 2, q, NULL), NEO_ERR_INVALID_ARG);
    l[3] = NULL;
    CHECK_STATUS(neo_attn_decode_batch(l, 4, q, o), NEO_ERR_INVALID_ARG);
    l[3] = l[0];
    CHECK_STATUS(neo_attn_decode_batch(l, 4, q, o), NEO_ERR_INVALID_ARG); /* l[0] twice */
    l[3] = x;
    CHECK_STATUS(neo_attn_decode_batch(l, 4, q, o), NEO_ERR_INVALID_ARG);
    l[3] = y;
    CHECK_STATUS(neo_attn_decode_batch(l, 4, q, o), NEO_ERR_INVALID_ARG);
    l[3] = z;
    CHECK_STATUS(neo_attn_decode_batch(l, 4, q, o), NEO_ERR_INVALID_ARG); /* z is empty */
    CHECK(isnan(o[0]) && isnan(o[4 * 8 * 16 - 1]));
    CHECK_STATUS(neo_attn_append_batch(NULL, 2, k, v), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append_batch(l, 0, k, v), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append_batch(l, 2, NULL, v), NEO_ERR_INVALID_ARG);
    CHECK_STATUS(neo_attn_append_batch(l, 2, k, NULL), NEO_ERR_INVALID_ARG);
    l[3] = l[2];
    CHECK_STATUS(neo_attn_append_batch(l, 4, k, v), NEO_ERR_INVALID_ARG);
    l[3] = x;
    CHECK_STATUS(neo_attn_append_batch(l, 4, k, v), NEO_ERR_INVALID_ARG);
    l[3] = z;
    CHECK_STATUS(neo_attn_append_batch(l, 4, k, v), NEO_ERR_FULL); /* l[1] is full: no layer changes */
    CHECK(neo_layer_length(l[0]) == 1 && neo_layer_length(l[1]) == 3 && neo_layer_length(l[2]) == 1 && neo_layer_length(z) == 0);
    {
        neo_layer *full_first[2] = {l[1], l[0]};
        CHECK_STATUS(neo_attn_append_batch(full_first, 2, k, v), NEO_ERR_FULL);
        CHECK(neo_layer_length(l[0]) == 1 && neo_layer_length(l[1]) == 3);
    }
    l[3] = l[1], l[1] = z, z = l[3]; /* the full one out */
    CHECK_STATUS(neo_attn_append_batch(l, 3, k, v), NEO_OK);
    CHECK(neo_layer_length(l[0]) == 2 && neo_layer_length(l[1]) == 1 && neo_layer_length(l[2]) == 2);
    CHECK_STATUS(neo_attn_decode_batch(l, 3, q, o), NEO_OK);
    CHECK(!isnan(o[0]) && !isnan(o[3 * 8 * 16 - 1]) && isnan(o[3 * 8 * 16]));
    CHECK_STATUS(neo_runtime_sync(rt), NEO_OK);
    CHECK_STATUS(neo_runtime_sync(NULL), NEO_ERR_INVALID_ARG);
done:
    for (int i = 0; i < 3; i++) neo_layer_destroy(l[i]);
    neo_layer_destroy(x), neo_layer_destroy(y), neo_layer_destroy(z);
}

/* A move that runs out of memory at any allocation moves nothing: the layer reports and decodes
   as before, and everything allocated comes back. */
static void test_move_no_memory(void) {
    static float     k[100 * 4 * 16], v[100 * 4 * 16], q[8 * 16], o[2][8 * 16];
    static const int to[] = {NEO_GPU_HEADS_NONE, 0, 3};
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL, *cpu = NULL;
    fill(k, sizeof k / sizeof *k, 0.4f), fill(v, sizeof v / sizeof *v, -0.6f), fill(q, sizeof q / sizeof *q, 0.2f);
    for (size_t t = 0; t < sizeof to / sizeof *to; t++) {
        int done = 0;
        for (long f = 0; f < 40 && !done; f++) {
            count_alloc    c = {0, 0, -1};
            neo_layer_desc d = base_desc();
            neo_layer     *l = NULL;
            neo_layer_info before, after;
            neo_status     st;
            memset(&before, 0, sizeof before), memset(&after, 0, sizeof after);
            rd.n_threads = 2, rd.gpu = 1, rd.gpu_standin = 1;
            rd.allocator.alloc = count_alloc_fn, rd.allocator.free = count_free_fn, rd.allocator.user = &c;
            d.n_head_kv = 4, d.n_ctx = 100, d.gpu_heads = 1, d.pipeline = NEO_PIPELINE_ON;
            check_context("set_gpu_heads %d out of memory at allocation %ld", to[t], f);
            if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return;
            if (CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK) && CHECK_STATUS(neo_attn_append(l, k, v, 100), NEO_OK) &&
                CHECK_STATUS(neo_attn_decode(l, q, o[0]), NEO_OK)) {
                CHECK_STATUS(neo_layer_get_info(l, &before), NEO_OK);
                c.fail_at = c.allocs + f;
                st = neo_layer_set_gpu_heads(l, to[t]);
                c.fail_at = -1;
                CHECK_STATUS(neo_layer_get_info(l, &after), NEO_OK);
                poison(o[1], 8 * 16);
                CHECK_STATUS(neo_attn_decode(l, q, o[1]), NEO_OK);
                if (st == NEO_OK) done = 1, CHECK(after.gpu_heads == plan_dev(to[t], 4));
                else {
                    CHECK(st == NEO_ERR_NO_MEMORY || st == NEO_ERR_DEVICE_MEMORY);
                    CHECK(after.gpu_heads == before.gpu_heads && after.gpu_bytes == before.gpu_bytes &&
                          after.host_bytes == before.host_bytes && same_bits(o[0], o[1], 8 * 16));
                }
            }
            neo_layer_destroy(l);
            neo_runtime_destroy(rt);
            CHECK(c.allocs == c.frees);
        }
        CHECK(done);
    }
    /* sync and batches of a CPU runtime too */
    cpu = make_rt(2);
    rd.allocator.alloc = NULL, rd.allocator.free = NULL, rd.allocator.user = NULL;
    if (CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK) && cpu) {
        batch_errors(rt, cpu, "the stand-in");
        batch_errors(cpu, rt, "a CPU runtime");
    }
    neo_runtime_destroy(rt);
    neo_runtime_destroy(cpu);
}

/* neo_session_desc.layer_gpu_heads: each layer its own placement (a plan's), the same tokens */
static void test_session_placement(void) {
    synth_cfg        c = {16, 24, 2, 4, 2, 32, 16};
    size_t           size = 0;
    unsigned char   *buf = synth_build(&c, 11, &size);
    neo_model       *m = NULL;
    neo_runtime_desc rd = {0};
    neo_runtime     *rt = NULL;
    neo_session     *a = NULL, *b = NULL;
    neo_session_desc sd = {0};
    neo_layer_info   li;
    static const int place[2] = {NEO_GPU_HEADS_NONE, 1}, bad[2] = {0, -2};
    float            la[32], lb[32];
    memset(&li, 0, sizeof li);
    check_context("session with layer_gpu_heads");
    rd.n_threads = 2, rd.gpu = 1, rd.gpu_standin = 1;
    if (!CHECK(buf != NULL) || !CHECK_STATUS(neo_model_load_memory(buf, size, &m), NEO_OK) ||
        !CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK))
        goto done;
    sd.layer_gpu_heads = bad;
    CHECK_STATUS(neo_session_create(rt, m, &sd, &a), NEO_ERR_INVALID_ARG);
    CHECK(a == NULL);
    sd.layer_gpu_heads = place, sd.pipeline = NEO_PIPELINE_ON, sd.gpu_heads = 2; /* gpu_heads is overridden */
    if (!CHECK_STATUS(neo_session_create(rt, m, &sd, &a), NEO_OK)) goto done;
    sd.layer_gpu_heads = NULL, sd.gpu_heads = 0;
    if (!CHECK_STATUS(neo_session_create(rt, m, &sd, &b), NEO_OK)) goto done;
    CHECK_STATUS(neo_session_get_info(a, &li), NEO_OK);
    CHECK(li.gpu_heads == 1 && li.cpu_heads == 1);
    CHECK(li.gpu_bytes == (size_t)16 * 2 * 4 * 2 && li.host_bytes == (size_t)3 * 16 * 2 * 4 * 2); /* heads * ctx * (K+V) * hs * f16 */
    for (int t = 0; t < 10; t++) {
        double num = 0, den = 0;
        CHECK_STATUS(neo_session_step(a, (t * 7) % 32, la), NEO_OK);
        CHECK_STATUS(neo_session_step(b, (t * 7) % 32, lb), NEO_OK);
        for (int i = 0; i < 32; i++) num += ((double)la[i] - lb[i]) * ((double)la[i] - lb[i]), den += (double)lb[i] * lb[i];
        CHECK(sqrt(num) <= 1e-4 * sqrt(den));
    }
done:
    neo_session_destroy(a), neo_session_destroy(b);
    neo_runtime_destroy(rt);
    neo_model_destroy(m);
    free(buf);
}

int main(void) {
    neo_runtime *rt;
    test_strings();
    test_gpu_heads_rule();
    test_runtime();
    rt = make_rt(2);
    if (rt) {
        test_layer_create(rt);
        test_layer_ops(rt);
        test_layer_info(rt);
        test_sinks_copied(rt);
        test_split_info();
        test_model_session(rt);
        test_plan();
        test_cpu_placement(rt);
        test_move_no_memory();
        test_session_placement();
        neo_runtime_destroy(rt);
    }
    test_refusals_logged();
    test_capture_refusals();
    test_standin_events();
    test_standin_late();
    test_sync_full();
    test_ring_share();
    test_choices_at_bounds();
    test_captured_hybrid();
    test_cpu_out_of_memory();
    test_failed_batch_counts_nothing();
    test_failed_sync_logs();
    test_one_call_at_a_time();
    test_prefill_slices();
    test_auto_again();
    check_context("%s", "");
    return check_summary("test_api");
}
