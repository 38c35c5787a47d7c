/* test_pool.c - the runtime's thread pool through the public API, built with -fsanitize=thread
   (make test-tsan): runtimes of 2..4 threads, and one of three times as many threads as the
   machine has cores (at most 48; workers that miss jobs), give bitwise the output of a 1-thread runtime for
   many decode and prefill calls on long, many-head layers (chunk splitting and merging); runtimes
   created and destroyed over and over; independent runtimes driven from several threads at once;
   a stories260K session with 4 threads (NEO_MODEL_DIR, default tests/data); captured ON calls
   replayed with the listener thread serving them; and all of that's bitwise checks once more
   through an engine's own parallel-for (neo_runtime_desc.parallel_for) instead of the runtime's
   pool. The seed is printed; NEO_TEST_SEED=N repeats a run. */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"

#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* NEO_TEST_QUICK=1 (make test's TSan run): every scenario, fewer repetitions (decode calls per
   shape, churn rounds, calls per concurrent driver); the plain run does them all. */
static int quick;
static uint64_t rng_s;
static float rng_f(void) { /* xorshift64*, uniform in [-2, 2) */
    rng_s ^= rng_s >> 12, rng_s ^= rng_s << 25, rng_s ^= rng_s >> 27;
    return (float)((double)((rng_s * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}
static float *rng_alloc(size_t n) {
    float *p = (float *)malloc(n * sizeof(float));
    size_t i;
    if (p)
        for (i = 0; i < n; i++) p[i] = rng_f();
    return p;
}

/* --- an engine's parallel-for: threads started per job, as simple as such a pool gets --- */

typedef struct eng_job {
    neo_task_fn task;
    void *arg;
    int n_tasks, next; /* next: atomic */
} eng_job;
typedef struct eng_thread {
    eng_job *job;
    int thread;
} eng_thread;
enum { ENG_THREADS = 3 };
static long eng_calls; /* jobs the engine ran: the path is taken */

static void *eng_main(void *p) {
    eng_thread *t = (eng_thread *)p;
    for (;;) {
        int i = __atomic_fetch_add(&t->job->next, 1, __ATOMIC_SEQ_CST);
        if (i >= t->job->n_tasks) break;
        t->job->task(t->job->arg, i, t->thread);
    }
    return NULL;
}
static void eng_parallel_for(void *user, int n_tasks, neo_task_fn task, void *arg) {
    eng_job job;
    eng_thread th[ENG_THREADS];
    pthread_t pt[ENG_THREADS];
    int i, started[ENG_THREADS] = {0};
    (void)user;
    job.task = task, job.arg = arg, job.n_tasks = n_tasks, job.next = 0;
    __atomic_add_fetch(&eng_calls, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < ENG_THREADS; i++) th[i].job = &job, th[i].thread = i;
    for (i = 1; i < ENG_THREADS; i++) started[i] = pthread_create(&pt[i], NULL, eng_main, &th[i]) == 0;
    eng_main(&th[0]); /* the calling thread is thread 0, and finishes the job alone if no thread started */
    for (i = 1; i < ENG_THREADS; i++)
        if (started[i]) pthread_join(pt[i], NULL);
}

static neo_runtime *make_rt(int n_threads) {
    neo_runtime_desc rd = {0};
    neo_runtime_info ri = {0, 0, NEO_CPU_AUTO};
    neo_runtime *rt = NULL;
    rd.n_threads = n_threads;
    if (n_threads == ENG_THREADS + 100) /* the engine's parallel-for */
        rd.n_threads = ENG_THREADS, rd.parallel_for = eng_parallel_for;
    if (!CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_OK)) return NULL;
    CHECK_STATUS(neo_runtime_get_info(rt, &ri), NEO_OK);
    CHECK(ri.n_threads == rd.n_threads);
    return rt;
}

/* --- the same layers on runtimes of 1..4 threads, on the engine's pool and on an oversubscribed
   runtime, bitwise equal outputs --- */

enum { NRT = 6, N_CELLS = 1500 };

typedef struct shape {
    int n_head, n_head_kv, hd, dv;
    neo_type t;
    int sinks;
} shape;

static void test_threads_bitwise(neo_runtime **rts) {
    static const shape shapes[] = {{32, 8, 64, 64, NEO_TYPE_F16, 0}, {16, 2, 128, 64, NEO_TYPE_BF16, 1},
                                   {8, 8, 32, 32, NEO_TYPE_F32, 0}};
    int si, r;
    for (si = 0; si < 3; si++) {
        const shape *s = &shapes[si];
        neo_layer *l[NRT] = {0};
        neo_layer_desc d = {0};
        float sinks[32];
        size_t rk = (size_t)s->n_head_kv * (size_t)s->hd, rv = (size_t)s->n_head_kv * (size_t)s->dv;
        size_t qn = (size_t)s->n_head * (size_t)s->hd, on = (size_t)s->n_head * (size_t)s->dv;
        float *k = rng_alloc(N_CELLS * rk), *v = rng_alloc(N_CELLS * rv), *q = NULL, *o = NULL;
        int call, ok = 1;
        for (r = 0; r < s->n_head; r++) sinks[r] = rng_f();
        d.n_head = s->n_head, d.n_head_kv = s->n_head_kv, d.head_dim = s->hd, d.head_dim_v = s->dv;
        d.n_ctx = N_CELLS + 10, d.kv_type = s->t, d.sinks = s->sinks ? sinks : NULL, d.softcap = s->sinks ? 4.0f : 0.0f;
        check_context("threads bitwise, shape %d", si);
        q = rng_alloc(64 * qn);
        o = (float *)malloc((size_t)NRT * 64 * on * sizeof(float));
        if (!CHECK(k && v && q && o)) goto next;
        for (r = 0; r < NRT; r++) {
            if (!CHECK_STATUS(neo_layer_create(rts[r], &d, &l[r]), NEO_OK)) goto next;
            /* uneven appends; the last one leaves room for a few more */
            CHECK_STATUS(neo_attn_append(l[r], k, v, 1), NEO_OK);
            CHECK_STATUS(neo_attn_append(l[r], k + rk, v + rv, 700), NEO_OK);
            CHECK_STATUS(neo_attn_append(l[r], k + 701 * rk, v + 701 * rv, N_CELLS - 701), NEO_OK);
        }
        int n_dec = quick ? 6 : 40;
        for (call = 0; call < n_dec + 8; call++) {
            /* decodes at two lengths (each crosses 256-cell chunks), then prefills of several sizes */
            int n_tok = call < n_dec ? 0 : (int[]){1, 2, 7, 16, 33, 64, 3, 5}[call - n_dec];
            int nq = n_tok ? n_tok : 1;
            size_t i;
            if (call == n_dec / 2)
                for (r = 0; r < NRT; r++) CHECK_STATUS(neo_layer_truncate(l[r], 1025), NEO_OK);
            for (i = 0; i < (size_t)nq * qn; i++) q[i] = rng_f();
            for (r = 0; r < NRT; r++) {
                float *out = o + (size_t)r * 64 * on;
                memset(out, 0xFF, (size_t)nq * on * sizeof(float));
                CHECK_STATUS(n_tok ? neo_attn_prefill(l[r], q, n_tok, out) : neo_attn_decode(l[r], q, out), NEO_OK);
                if (r > 0) ok &= memcmp(out, o, (size_t)nq * on * sizeof(float)) == 0;
            }
        }
        CHECK(ok);
    next:
        for (r = 0; r < NRT; r++) neo_layer_destroy(l[r]);
        free(k), free(v), free(q), free(o);
    }
}

/* --- split layers on the stand-in GPU: the CPU half on the pool while the "GPU" half runs --- */

static void test_split_threads(void) {
    enum { NG = 3 }; /* 1 thread, 4 threads, the engine's parallel-for */
    neo_runtime *rg[NG] = {NULL, NULL, NULL};
    int r, p;
    long calls0 = eng_calls;
    for (r = 0; r < NG; r++) {
        neo_runtime_desc rd = {0};
        /* every stream in order; the copy stream late; the engine's stream late */
        rd.n_threads = r == 0 ? 1 : r == 1 ? 4 : ENG_THREADS, rd.gpu = 1, rd.gpu_standin = 1 + r;
        if (r == 2) rd.parallel_for = eng_parallel_for;
        check_context("stand-in GPU runtime x%d%s", rd.n_threads, r == 2 ? ", engine pool" : "");
        CHECK_STATUS(neo_runtime_create(&rd, &rg[r]), NEO_OK);
    }
    for (p = 0; rg[0] && rg[1] && rg[2] && p < 3; p++) {
        neo_layer *l[NG] = {NULL, NULL, NULL};
        neo_layer_desc d = {0};
        float *k = rng_alloc(1200 * 8 * 64), *v = rng_alloc(1200 * 8 * 64), *q = rng_alloc(16 * 32 * 64);
        float *o = (float *)malloc(NG * 16 * 32 * 64 * sizeof(float));
        int call, ok = 1;
        d.n_head = 32, d.n_head_kv = 8, d.head_dim = 64, d.n_ctx = 1200, d.gpu_heads = 3, d.pipeline = (neo_pipeline)p;
        check_context("split layer, pipeline %d, 1 vs 4 threads vs the engine's pool", p);
        if (!CHECK(k && v && q && o)) goto next;
        for (r = 0; r < NG; r++) {
            if (!CHECK_STATUS(neo_layer_create(rg[r], &d, &l[r]), NEO_OK)) goto next;
            CHECK_STATUS(neo_attn_append(l[r], k, v, 1100), NEO_OK);
        }
        for (call = 0; call < 12; call++) {
            int n_tok = call < 9 ? 0 : call == 9 ? 16 : 3, nq = n_tok ? n_tok : 1;
            for (r = 0; r < NG; r++) {
                float *out = o + (size_t)r * 16 * 32 * 64;
                memset(out, 0xFF, (size_t)nq * 32 * 64 * sizeof(float));
                CHECK_STATUS(n_tok ? neo_attn_prefill(l[r], q, n_tok, out) : neo_attn_decode(l[r], q, out), NEO_OK);
                CHECK_STATUS(neo_runtime_sync(rg[r]), NEO_OK);
                if (call == 5) CHECK_STATUS(neo_attn_append(l[r], k, v, 100), NEO_OK);
                if (r > 0 && p != NEO_PIPELINE_AUTO) ok &= memcmp(o, out, (size_t)nq * 32 * 64 * sizeof(float)) == 0;
            }
        }
        CHECK(ok);
    next:
        for (r = 0; r < NG; r++) neo_layer_destroy(l[r]);
        free(k), free(v), free(q), free(o);
    }
    check_context("split layers through the engine's parallel-for");
    CHECK(eng_calls > calls0);
    for (r = 0; r < NG; r++) neo_runtime_destroy(rg[r]);
}

/* --- create and destroy over and over --- */

static void test_churn(const float *k, const float *v, const float *q, const float *want) {
    int i;
    check_context("runtime churn");
    for (i = 0; i < (quick ? 12 : 40); i++) { /* 12: every pair of i % 3 and i % 4 */
        neo_runtime *rt = make_rt(1 + i % 4);
        neo_layer *l = NULL;
        neo_layer_desc d = {0};
        float out[16 * 32];
        if (!rt) continue;
        if (i % 3 != 2) { /* every third runtime is destroyed with its workers just started */
            d.n_head = 16, d.n_head_kv = 4, d.head_dim = 32, d.n_ctx = 600;
            if (CHECK_STATUS(neo_layer_create(rt, &d, &l), NEO_OK)) {
                CHECK_STATUS(neo_attn_append(l, k, v, 600), NEO_OK);
                CHECK_STATUS(neo_attn_decode(l, q, out), NEO_OK);
                CHECK(memcmp(out, want, sizeof out) == 0);
            }
            neo_layer_destroy(l);
        }
        neo_runtime_destroy(rt);
    }
}

/* --- independent runtimes driven from several threads at once --- */

typedef struct driver {
    const float *k, *v, *q, *want; /* want: [16][32] from a 1-thread runtime */
    int n_threads, failures;
} driver;

static void *drive(void *arg) {
    driver *dr = (driver *)arg;
    neo_runtime_desc rd = {0};
    neo_runtime *rt = NULL;
    neo_layer *l = NULL;
    neo_layer_desc d = {0};
    float out[16 * 32];
    int i;
    rd.n_threads = dr->n_threads;
    d.n_head = 16, d.n_head_kv = 4, d.head_dim = 32, d.n_ctx = 600;
    if (neo_runtime_create(&rd, &rt) != NEO_OK || neo_layer_create(rt, &d, &l) != NEO_OK ||
        neo_attn_append(l, dr->k, dr->v, 600) != NEO_OK) {
        dr->failures++;
    } else {
        for (i = 0; i < (quick ? 3 : 12); i++) {
            memset(out, 0, sizeof out);
            if (neo_attn_decode(l, dr->q, out) != NEO_OK || memcmp(out, dr->want, sizeof out) != 0) dr->failures++;
        }
    }
    neo_layer_destroy(l);
    neo_runtime_destroy(rt);
    return NULL;
}

static void test_concurrent_runtimes(const float *k, const float *v, const float *q, const float *want) {
    enum { ND = 3 };
    pthread_t th[ND];
    driver dr[ND];
    int i, started[ND];
    check_context("independent runtimes on %d threads at once", ND);
    for (i = 0; i < ND; i++) {
        dr[i].k = k, dr[i].v = v, dr[i].q = q, dr[i].want = want, dr[i].n_threads = 2 + i % 2, dr[i].failures = 0;
        started[i] = pthread_create(&th[i], NULL, drive, &dr[i]) == 0;
        CHECK(started[i]);
    }
    for (i = 0; i < ND; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        CHECK(dr[i].failures == 0);
    }
}

/* --- a session with 4 threads --- */

static void test_session(neo_runtime *rt1, neo_runtime *rt4) {
    const char *env = getenv("NEO_MODEL_DIR");
    char path[4096];
    neo_model *m = NULL;
    neo_session *s1 = NULL, *s4 = NULL;
    static float l1[512], l4[512];
    int i, tok = 1;
    snprintf(path, sizeof path, "%s/stories260K.bin", env && *env ? env : "tests/data");
    check_context("stories260K session at %s", path);
    if (!CHECK_STATUS(neo_model_load(path, &m), NEO_OK)) {
        fprintf(stderr, "test_pool: FAIL: cannot load %s; set NEO_MODEL_DIR to the folder holding stories260K.bin\n",
                path);
        return;
    }
    CHECK_STATUS(neo_session_create(rt1, m, NULL, &s1), NEO_OK);
    CHECK_STATUS(neo_session_create(rt4, m, NULL, &s4), NEO_OK);
    if (s1 && s4) {
        int ok = 1;
        for (i = 0; i < 10; i++) {
            CHECK_STATUS(neo_session_step(s1, tok, l1), NEO_OK);
            CHECK_STATUS(neo_session_step(s4, tok, l4), NEO_OK);
            ok &= memcmp(l1, l4, sizeof l1) == 0;
            tok = 259 + (i * 97 + 13) % 253;
            if (i == 6) /* both back to 5 tokens; the next steps overwrite cells 5.. */
                CHECK_STATUS(neo_session_truncate(s1, 5), NEO_OK), CHECK_STATUS(neo_session_truncate(s4, 5), NEO_OK);
        }
        CHECK(ok);
        CHECK(neo_session_length(s1) == 8 && neo_session_length(s4) == 8);
    }
    neo_session_destroy(s1), neo_session_destroy(s4);
    neo_model_destroy(m);
}

/* --- the listener of captured ON calls (CUDA GRAPHS) --- */

/* A split ON layer's append + decode recorded by the stand-in (its graph) and replayed: the
   listener thread attends the host heads on a pool of 1 or 4 threads or the engine's; every
   replay's output is bitwise that of the same calls made eagerly on a 1-thread runtime. */
static void test_graph_listener(void) {
    enum { NG = 3 };
    neo_runtime   *rg[NG + 1] = {NULL, NULL, NULL, NULL}; /* [NG]: the eager twin */
    neo_layer     *l[NG + 1] = {NULL, NULL, NULL, NULL};
    neo__sgraph   *g[NG] = {NULL, NULL, NULL};
    neo_layer_desc d = {0};
    float *k = rng_alloc(1000 * 8 * 64), *v = rng_alloc(1000 * 8 * 64), *q = rng_alloc(32 * 64);
    float  kt[8 * 64], vt[8 * 64], qt[32 * 64], out[NG + 1][32 * 64];
    int    r, rep, ok = 1;
    d.n_head = 32, d.n_head_kv = 8, d.head_dim = 64, d.n_ctx = 1200, d.gpu_heads = 3, d.pipeline = NEO_PIPELINE_ON;
    for (r = 0; r <= NG; r++) {
        neo_runtime_desc rd = {0};
        rd.n_threads = r == 1 ? 4 : r == 2 ? ENG_THREADS : 1, rd.gpu = 1, rd.gpu_standin = 1;
        if (r == 2) rd.parallel_for = eng_parallel_for;
        check_context("graph listener: runtime %d", r);
        if (!CHECK_STATUS(neo_runtime_create(&rd, &rg[r]), NEO_OK) || !CHECK_STATUS(neo_layer_create(rg[r], &d, &l[r]), NEO_OK) ||
            !CHECK(k && v && q) || !CHECK_STATUS(neo_attn_append(l[r], k, v, 1000), NEO_OK))
            goto done;
        if (r == NG) break;
        if (!CHECK_STATUS(neo__standin_capture_begin(rg[r]), NEO_OK)) goto done;
        CHECK_STATUS(neo_attn_append(l[r], kt, vt, 1), NEO_OK);
        CHECK_STATUS(neo_attn_decode(l[r], qt, out[r]), NEO_OK);
        if (!CHECK_STATUS(neo__standin_capture_end(rg[r], &g[r]), NEO_OK)) goto done;
    }
    check_context("graph listener: replays");
    for (rep = 0; rep < (quick ? 8 : 40); rep++) {
        for (int i = 0; i < 8 * 64; i++) kt[i] = rng_f(), vt[i] = rng_f();
        for (int i = 0; i < 32 * 64; i++) qt[i] = rng_f();
        memset(out, 0xFF, sizeof out);
        for (r = 0; r < NG; r++) CHECK_STATUS(neo__standin_replay(rg[r], g[r]), NEO_OK);
        CHECK_STATUS(neo_attn_append(l[NG], kt, vt, 1), NEO_OK);
        CHECK_STATUS(neo_attn_decode(l[NG], qt, out[NG]), NEO_OK);
        for (r = 0; r < NG; r++) ok &= memcmp(out[r], out[NG], sizeof out[r]) == 0;
    }
    for (r = 0; r < NG; r++) {
        CHECK_STATUS(neo_runtime_sync(rg[r]), NEO_OK);
        CHECK(neo_layer_length(l[r]) == neo_layer_length(l[NG]));
    }
    CHECK(ok);
done:
    for (r = 0; r <= NG; r++) {
        if (r < NG && rg[r]) neo__standin_graph_free(rg[r], g[r]);
        neo_layer_destroy(l[r]);
        neo_runtime_destroy(rg[r]);
    }
    free(k), free(v), free(q);
}

int main(void) {
    const char *env = getenv("NEO_TEST_SEED");
    unsigned long long seed =
        env && *env ? strtoull(env, NULL, 0) : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
    neo_runtime *rts[NRT] = {0};
    int i;
    rng_s = seed ? seed : 1;
    quick = (env = getenv("NEO_TEST_QUICK")) && *env && strcmp(env, "0") != 0;
    printf("test_pool: seed %llu (NEO_TEST_SEED=%llu repeats this run)%s\n", seed, seed, quick ? ", quick" : "");
    fflush(stdout);
    long cores = sysconf(_SC_NPROCESSORS_ONLN), over = 3 * (cores > 2 ? cores : 2); /* the oversubscribed runtime */
    for (i = 0; i < NRT; i++) rts[i] = make_rt(i < 4 ? i + 1 : i == 4 ? ENG_THREADS + 100 : (int)(over < 48 ? over : 48));
    if (rts[0] && rts[1] && rts[2] && rts[3] && rts[4] && rts[5]) {
        long calls0;
        float *k = rng_alloc(600 * 4 * 32), *v = rng_alloc(600 * 4 * 32), *q = rng_alloc(16 * 32);
        float want[16 * 32];
        neo_layer *l = NULL;
        neo_layer_desc d = {0};
        calls0 = eng_calls;
        test_threads_bitwise(rts);
        check_context("the engine's parallel-for");
        CHECK(eng_calls > calls0);
        test_split_threads();
        test_graph_listener();
        /* the expected output of the churn and concurrency tests, from the 1-thread runtime */
        d.n_head = 16, d.n_head_kv = 4, d.head_dim = 32, d.n_ctx = 600;
        check_context("1-thread reference");
        if (CHECK(k && v && q) && CHECK_STATUS(neo_layer_create(rts[0], &d, &l), NEO_OK) &&
            CHECK_STATUS(neo_attn_append(l, k, v, 600), NEO_OK) && CHECK_STATUS(neo_attn_decode(l, q, want), NEO_OK)) {
            test_churn(k, v, q, want);
            test_concurrent_runtimes(k, v, q, want);
        }
        neo_layer_destroy(l);
        free(k), free(v), free(q);
        test_session(rts[0], rts[3]);
        test_session(rts[0], rts[4]);
    }
    for (i = 0; i < NRT; i++) neo_runtime_destroy(rts[i]);
    check_context("%s", "");
    return check_summary("test_pool");
}
