/* test_cuda_ops.c - every entry of the CUDA bridge's tables (neo_attn_cuda.cu) against float64
   references on the CPU. Needs a CUDA GPU; CI does not run it (make test-cuda-ops does).

       cc -std=c11 -O2 -I. -isystem $CUDA_HOME/include tests/test_cuda_ops.c build/neo_attn_cuda.o \
          -L$CUDA_HOME/lib64 -lcudart -lstdc++ -lm -o build/test_cuda_ops
       ./build/test_cuda_ops            all checks, then a summary table
       ./build/test_cuda_ops --quick    small shapes only (for compute-sanitizer)
       ./build/test_cuda_ops --image    the loaded kernels' ptxVersion and binaryVersion only
       ./build/test_cuda_ops --quick --case "state bf16 d256"   that attention case of the quick
                                        (or full) list alone, under the same plans, no other
                                        check (one kernel's compute-sanitizer report)
       ./build/test_cuda_ops --time     the decode loop's projections (Qwen2.5-0.5B), then decode
                                        attention (32 q / 8 kv heads, d 128, f16, and others)
       ./build/test_cuda_ops --time-short   the projections; 32/8 d128 f16 at 4k / 32k / 128k; 14/2 d64 4k; 64/8 32k
       ./build/test_cuda_ops --time-mv      the projections alone
       ./build/test_cuda_ops --time-batch   the batch launch (attend_batch) for Llama-3-8B shapes,
                                        each block shape and wave count forced
       ./build/test_cuda_ops --time-ctx 64,4096,131072   32 q / 8 kv heads, d 128, f16 at those contexts
       ./build/test_cuda_ops --time-shape 14,2,64 --time-ctx 64,4096   another shape at those contexts
       Every attention case runs under the planner's choice and then under forced plans (the
       tensor-core kernel's wide and narrow blocks, one split, the generic kernel), marked
       [wide] / [narrow] / [S=1] / [generic] in the table.

   Attention: ||out - ref|| / ||ref|| < 1e-4 against a float64 evaluation of the formula in
   API.md on the stored (rounded) K/V, with outputs poisoned (NaN) before every call, the heads
   and cells outside the attended range poisoned in the inputs (so reading them would show), the
   untouched outputs checked to keep their poison, and every case run twice and compared
   bitwise, the second time with the splits merged through global memory (the first may have
   merged them in a thread block cluster). Device-side lengths ("graph" rows): an append (row0 = -1) and an attend (len set)
   captured into a CUDA graph and replayed, each replay against float64 at the length it reaches,
   past n_ctx too, and set_length. Append is checked bit for bit against round-to-nearest-even on the host; the decode
   loop's matvec (each epilogue, with and without its rmsnorm) against float64 (< 1e-5). Inputs are seeded (NEO_TEST_SEED=N). */
#include "neo_attn.h"

#include <cuda_runtime_api.h>

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ATT_TOL 1e-4
#define OPS_TOL 1e-5
#define POISON 0x7fc0deadu /* a quiet NaN with a payload no kernel produces */

static long n_checks, n_fail;
#define CHECK(cond, ...)                                                                                                \
    do {                                                                                                                \
        n_checks++;                                                                                                     \
        if (!(cond)) {                                                                                                  \
            n_fail++;                                                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s  [", __FILE__, __LINE__, #cond);                                   \
            fprintf(stderr, __VA_ARGS__);                                                                               \
            fprintf(stderr, "]\n");                                                                                     \
        }                                                                                                               \
    } while (0)

/* the bridge's three tables' entries side by side, so the tests name every entry alike
   (OPS.copy, OPS.attend) */
static struct {
    int  (*init)(int, void *, void **, char *, size_t);
    void (*release)(void *);
    int  (*dev_alloc)(void *, void **, size_t);
    void (*dev_free)(void *, void *);
    int  (*host_alloc)(void *, void **, size_t);
    void (*host_free)(void *, void *);
    int  (*copy)(void *, void *, const void *, size_t, int);
    int  (*copy2d)(void *, void *, size_t, const void *, size_t, size_t, size_t, int);
    int  (*copy_signal)(void *, void *, size_t, const void *, size_t, size_t, size_t, unsigned *, unsigned, int);
    int  (*await_copy)(void *, void *, size_t, const void *, size_t, size_t, size_t, const unsigned *, unsigned, int);
    int  (*record)(void *, int, int);
    int  (*wait)(void *, int, int);
    int  (*event_sync)(void *, int);
    int  (*stream_sync)(void *, int);
    int  (*capturing)(void *, int, unsigned long long *);
    int  (*launch_async)(void *);
    int  (*append)(void *, const neo__append_args *, int);
    int  (*attend)(void *, const neo__attn_args *, int);
    int  (*merge)(void *, const neo__merge_args *, int);
    int  (*set_length)(void *, int *, int, int);
    int  (*matvec)(void *, const neo__matvec_args *, int);
    int  (*argmax)(void *, int *, const float *, int, int);
} OPS;
static void *ST;

/* Fills OPS from the three tables; NEO_OK when every getter took its ABI version. */
static int get_ops(void) {
    neo__dev_mem   m;
    neo__dev_attn  a;
    neo__dev_model d;
    int            s;
    memset(&m, 0, sizeof m), memset(&a, 0, sizeof a), memset(&d, 0, sizeof d);
    if ((s = neo__cuda_get_mem(NEO__DEV_MEM_ABI, &m)) != NEO_OK || (s = neo__cuda_get_attn(NEO__DEV_ATTN_ABI, &a)) != NEO_OK ||
        (s = neo__cuda_get_model(NEO__DEV_MODEL_ABI, &d)) != NEO_OK)
        return s;
    OPS.init = m.init, OPS.release = m.release, OPS.dev_alloc = m.dev_alloc, OPS.dev_free = m.dev_free;
    OPS.host_alloc = m.host_alloc, OPS.host_free = m.host_free, OPS.copy = m.copy, OPS.copy2d = m.copy2d;
    OPS.record = m.record, OPS.wait = m.wait, OPS.event_sync = m.event_sync, OPS.stream_sync = m.stream_sync;
    OPS.capturing = m.capturing, OPS.set_length = a.set_length;
    OPS.copy_signal = a.copy_signal, OPS.await_copy = a.await_copy, OPS.launch_async = a.launch_async;
    OPS.append = a.append, OPS.attend = a.attend, OPS.merge = a.merge, OPS.matvec = d.matvec, OPS.argmax = d.argmax;
    return NEO_OK;
}

/* neo_attn_cuda.cu's entries for this test (not API): the loaded kernels' architectures, and an
   attend with a forced plan (kernel 0 tensor-core, 1 CUDA-core float32, 2 generic, or -1; shape
   0 wide, 1 narrow, or -1; max_splits > 0 caps the splits), NEO_ERR_UNSUPPORTED when the forced
   kernel or shape cannot serve the attend; the same for a batch (the tensor-core kernel's shape) */
int neo__cu_test_image(int device, int *ptx_version, int *binary_version);
int neo__cu_test_attend(void *state, const neo__attn_args *a, int stream, int kernel, int shape, int max_splits);
int neo__cu_test_attend_global(void *state, const neo__attn_args *a, int stream, int kernel, int shape, int max_splits);
unsigned long long neo__cu_test_clusters(void *state);
int neo__cu_test_hint(void *state, int offset);
int neo__cu_test_attend_batch(void *state, const neo__attn_batch *b, int stream, int shape, int max_splits, int waves);
int neo__cu_test_wide_blocks(void *state, int len, int type, int dc); /* resident blocks an SM, 0 = not asked */

/* The wide tensor-core blocks a runtime asked for so far, each alone on its SM (the planner's
   split count assumes it), also where two would fit their registers and rings (head_dim 64 on
   sm_90): WIDE counts the kernels asked (over every runtime checked), those of head_dim 64 by
   [eager, with len], and whether every one was alone. Checked on each graph case's runtime before
   it is released and on the main one at the end, so that both head_dim 64 kernels are seen. */
static struct {
    int asked, d64[2], alone;
} WIDE = {0, {0, 0}, 1};
static void wide_alone(void *st) {
    for (int len = 0; len < 2; len++)
        for (int ty = 0; ty < 2; ty++)
            for (int dc = 0; dc < 3; dc++) {
                const int n = neo__cu_test_wide_blocks(st, len, ty, dc);
                CHECK(n == 0 || n == 1, "the wide block (len %d, type %d, dc %d) has %d resident an SM", len, ty, dc, n);
                WIDE.alone &= n == 0 || n == 1;
                WIDE.asked += n > 0;
                if (dc == 0) WIDE.d64[len] += n > 0;
            }
}

/* the plan every attention case runs with (see main: each case runs under every plan) */
typedef struct force {
    const char *name;
    int         kernel, shape, max_splits;
} force;
static force FORCE = {"", -1, -1, 0};

/* --- random numbers --- */
static uint64_t rng_s = 0x9e3779b97f4a7c15ull;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_uni(void) { return ((double)(rng_u64() >> 11) + 0.5) / 9007199254740992.0; }
static float  rng_normal(void) { return (float)(sqrt(-2.0 * log(rng_uni())) * cos(6.283185307179586 * rng_uni())); }

/* --- storage types, written independently of the kernels: round to nearest, ties to even --- */
static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t to_f16(float f) {
    uint32_t x = f2u(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (ax >= 0x38800000u) {                                  /* a normal half */
        uint32_t r = ax - 0x38000000u;                        /* exponent rebiased by -112 */
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    if (ax < 0x33000000u) return (uint16_t)sign; /* below half the smallest subnormal: zero */
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, sh = 126 - e; /* units of 2^-24 */
    uint32_t h = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}
static float from_f16(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return u2f(sign | ((e + 112) << 23) | (m << 13));
}
static uint16_t to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float  from_bf16(uint16_t h) { return u2f((uint32_t)h << 16); }
static size_t tsize(int t) { return t == NEO_TYPE_F32 ? 4 : 2; }
/* stores f as type t at element i of raw; returns the stored value widened */
static float store_t(void *raw, size_t i, int t, float f) {
    if (t == NEO_TYPE_F32) {
        ((float *)raw)[i] = f;
        return f;
    }
    uint16_t h = t == NEO_TYPE_F16 ? to_f16(f) : to_bf16(f);
    ((uint16_t *)raw)[i] = h;
    return t == NEO_TYPE_F16 ? from_f16(h) : from_bf16(h);
}
static void poison_t(void *raw, size_t i, int t) {
    if (t == NEO_TYPE_F32) ((uint32_t *)raw)[i] = POISON;
    else ((uint16_t *)raw)[i] = t == NEO_TYPE_F16 ? 0x7e5du : 0x7fd5u;
}
static const char *tname(int t) { return t == NEO_TYPE_F16 ? "f16" : t == NEO_TYPE_BF16 ? "bf16" : "f32"; }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --- device helpers through the ops table --- */
static void *dalloc(size_t bytes) {
    void *p = NULL;
    int   s = OPS.dev_alloc(ST, &p, bytes);
    if (s != NEO_OK || !p) {
        fprintf(stderr, "dev_alloc(%zu) failed: %d\n", bytes, s);
        exit(2);
    }
    return p;
}
static void up(void *dst, const void *src, size_t bytes) {
    if (OPS.copy(ST, dst, src, bytes, NEO__STREAM_MAIN) != NEO_OK || OPS.stream_sync(ST, NEO__STREAM_MAIN) != NEO_OK) {
        fprintf(stderr, "copy failed\n");
        exit(2);
    }
}
#define down up
static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of host memory (%zu)\n", n);
        exit(2);
    }
    return p;
}
static void fill_poison(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) ((uint32_t *)p)[i] = POISON;
}

/* --- results table --- */
typedef struct result {
    char   name[64];
    char   shape[96];
    double err;    /* relative L2 error; -1 = bit-exact check */
    int    det;    /* 1 = two runs bitwise equal; -1 = not applicable */
    int    ok;
} result;
static result results[1024];
static int    n_results;
static result *add_result(const char *name, const char *shape, double err, int det, int ok) {
    result *r = &results[n_results < 1023 ? n_results++ : 1023];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    r->err = err;
    r->det = det;
    r->ok = ok;
    return r;
}

/* =============================================================================================
   attention
   ============================================================================================= */
typedef struct acase {
    const char *name;
    int   type, n_head, n_head_kv, d, dv;
    int   kv_h0, h0, h1;       /* h1 = 0: n_head_kv */
    int   cell_base, kv_cells; /* rows held per head */
    int   c0, c1;              /* attended, absolute; c1 = 0: cell_base + kv_cells */
    int   n_tokens, pos0;      /* pos0 = -1: c1 - n_tokens (the usual decode / prefill) */
    int   n_ranges;            /* [c0, c1) in this many consecutive calls, accumulated */
    float softcap, alibi;
    int   sinks;
    int   mode; /* 0: finish into out; 1: leave the state (checked as m, l, acc); 2: ranges in reverse order */
} acase;

static float alibi_slope(int h, int n_head, float max_bias) {
    int n2 = 1;
    while (n2 * 2 <= n_head) n2 *= 2;
    float m0 = powf(2.0f, -max_bias / (float)n2), m1 = powf(2.0f, -max_bias / (float)(2 * n2));
    return h < n2 ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - n2) + 1));
}

static int run_attend(const acase *cs) {
    acase c = *cs;
    if (!c.h1) c.h1 = c.n_head_kv;
    if (!c.c1) c.c1 = c.cell_base + c.kv_cells;
    if (c.pos0 == -1) c.pos0 = c.c1 - c.n_tokens;
    const int    G = c.n_head / c.n_head_kv, nst = c.n_head_kv - c.kv_h0, d = c.d, dv = c.dv, T = c.n_tokens;
    const size_t es = tsize(c.type);
    const size_t ke = (size_t)nst * c.kv_cells * d, ve = (size_t)nst * c.kv_cells * dv;
    float *kf = (float *)xmalloc(ke * 4), *vf = (float *)xmalloc(ve * 4);
    void  *kraw = xmalloc(ke * es), *vraw = xmalloc(ve * es);
    for (int h = 0; h < nst; h++)
        for (int row = 0; row < c.kv_cells; row++) {
            const int    head = c.kv_h0 + h, cell = c.cell_base + row;
            const int    live = head >= c.h0 && head < c.h1 && cell >= c.c0 && cell < c.c1;
            const size_t kb = ((size_t)h * c.kv_cells + row) * d, vb = ((size_t)h * c.kv_cells + row) * dv;
            for (int j = 0; j < d; j++) {
                if (live) kf[kb + j] = store_t(kraw, kb + j, c.type, rng_normal());
                else poison_t(kraw, kb + j, c.type), kf[kb + j] = NAN;
            }
            for (int j = 0; j < dv; j++) {
                if (live) vf[vb + j] = store_t(vraw, vb + j, c.type, rng_normal());
                else poison_t(vraw, vb + j, c.type), vf[vb + j] = NAN;
            }
        }
    const size_t qe = (size_t)T * c.n_head * d, oe = (size_t)T * c.n_head * dv, se = (size_t)T * c.n_head * (dv + 2);
    float *q = (float *)xmalloc(qe * 4);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < c.n_head; h++)
            for (int j = 0; j < d; j++) {
                const int live = h >= c.h0 * G && h < c.h1 * G;
                q[((size_t)t * c.n_head + h) * d + j] = live ? 1.5f * rng_normal() : u2f(POISON);
            }
    float sinks[256], slopes[256];
    for (int h = 0; h < c.n_head && h < 256; h++) {
        sinks[h] = 2.0f * rng_normal();
        slopes[h] = alibi_slope(h, c.n_head, c.alibi);
    }
    void  *dk = dalloc(ke * es), *dvv = dalloc(ve * es), *dq = dalloc(qe * 4), *dout = dalloc(oe * 4), *dst = dalloc(se * 4);
    float *dsinks = (float *)dalloc(256 * 4), *dslopes = (float *)dalloc(256 * 4);
    up(dk, kraw, ke * es);
    up(dvv, vraw, ve * es);
    up(dq, q, qe * 4);
    up(dsinks, sinks, sizeof sinks);
    up(dslopes, slopes, sizeof slopes);

    float *out[2], *state[2], *pois = (float *)xmalloc((se > oe ? se : oe) * 4);
    fill_poison(pois, se > oe ? se : oe);
    int status_ok = 1, mid_state_ok = 1, skip = 0;
    for (int rep = 0; rep < 2 && !skip; rep++) {
        out[rep] = (float *)xmalloc(oe * 4);
        state[rep] = (float *)xmalloc(se * 4);
        up(dout, pois, oe * 4);
        up(dst, pois, se * 4);
        for (int k = 0; k < c.n_ranges; k++) {
            const int piece = c.mode == 2 ? c.n_ranges - 1 - k : k;
            const int cs0 = c.c0 + (int)((long long)(c.c1 - c.c0) * piece / c.n_ranges);
            const int cs1 = c.c0 + (int)((long long)(c.c1 - c.c0) * (piece + 1) / c.n_ranges);
            if (cs1 <= cs0) continue;
            neo__attn_args a;
            memset(&a, 0, sizeof a);
            a.k = dk;
            a.v = dvv;
            a.kv_cells = c.kv_cells;
            a.kv_h0 = c.kv_h0;
            a.cell_base = c.cell_base;
            a.h0 = c.h0;
            a.h1 = c.h1;
            a.c0 = cs0;
            a.c1 = cs1;
            a.q = (const float *)dq;
            a.n_tokens = T;
            a.pos0 = c.pos0;
            a.state = (c.n_ranges > 1 || c.mode == 1) ? (float *)dst : NULL;
            a.accumulate = k > 0;
            a.out = (k == c.n_ranges - 1 && c.mode != 1) ? (float *)dout : NULL;
            a.sinks = c.sinks ? dsinks : NULL;
            a.slopes = c.alibi > 0 ? dslopes : NULL;
            a.n_head = c.n_head;
            a.n_head_kv = c.n_head_kv;
            a.head_dim = d;
            a.head_dim_v = dv;
            a.kv_type = c.type;
            a.scale = 1.0f / sqrtf((float)d);
            a.softcap = c.softcap;
            /* the second run merges the splits through global memory, where the first may have
               merged them in a cluster: the two must agree bit for bit */
            const int forced = FORCE.kernel >= 0 || FORCE.shape >= 0 || FORCE.max_splits > 0;
            int       s = rep ? neo__cu_test_attend_global(ST, &a, NEO__STREAM_MAIN, FORCE.kernel, FORCE.shape, FORCE.max_splits)
                          : forced ? neo__cu_test_attend(ST, &a, NEO__STREAM_MAIN, FORCE.kernel, FORCE.shape, FORCE.max_splits)
                                   : OPS.attend(ST, &a, NEO__STREAM_MAIN);
            if (forced && s == NEO_ERR_UNSUPPORTED && rep == 0 && k == 0) { /* the forced plan cannot serve this case */
                skip = 1;
                break;
            }
            if (s != NEO_OK) status_ok = 0;
            CHECK(s == NEO_OK, "%s: attend returned %d", c.name, s);
            if (c.mode == 2 && k == 0 && rep == 0 && c.n_ranges > 1) {
                /* the first call's range is after every query: the state must be (-inf, 0, 0) */
                OPS.stream_sync(ST, NEO__STREAM_MAIN);
                down(state[0], dst, se * 4);
                for (int t = 0; t < T; t++)
                    for (int h = c.h0 * G; h < c.h1 * G; h++) {
                        const float *sp = state[0] + ((size_t)t * c.n_head + h) * (dv + 2);
                        int          good = isinf(sp[0]) && sp[0] < 0 && sp[1] == 0.0f;
                        for (int j = 0; j < dv; j++) good &= sp[2 + j] == 0.0f;
                        mid_state_ok &= good;
                    }
                CHECK(mid_state_ok, "%s: a fully masked range must leave m = -inf, l = 0, acc = 0", c.name);
            }
        }
        if (OPS.stream_sync(ST, NEO__STREAM_MAIN) != NEO_OK) status_ok = 0;
        down(out[rep], dout, oe * 4);
        down(state[rep], dst, se * 4);
    }
    if (skip) {
        OPS.stream_sync(ST, NEO__STREAM_MAIN);
        OPS.dev_free(ST, dk), OPS.dev_free(ST, dvv), OPS.dev_free(ST, dq), OPS.dev_free(ST, dout), OPS.dev_free(ST, dst);
        OPS.dev_free(ST, dsinks), OPS.dev_free(ST, dslopes);
        free(kf), free(vf), free(kraw), free(vraw), free(q), free(pois), free(out[0]), free(state[0]);
        return 1;
    }
    const int det = !memcmp(out[0], out[1], oe * 4) && !memcmp(state[0], state[1], se * 4);
    CHECK(det, "%s: two runs differ (the second merged through global memory)", c.name);

    /* the float64 reference, and the checks */
    double  num = 0, den = 0, mmax = 0, lmax = 0;
    int     untouched = 1, finite = 1;
    double *s = (double *)xmalloc((size_t)(c.c1 - c.c0 + 1) * sizeof(double)), *acc = (double *)xmalloc((size_t)dv * 8);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < c.n_head; h++) {
            const int    live = h >= c.h0 * G && h < c.h1 * G;
            const float *o = out[0] + ((size_t)t * c.n_head + h) * dv, *sp = state[0] + ((size_t)t * c.n_head + h) * (dv + 2);
            if (!live) {
                for (int j = 0; j < dv; j++) untouched &= f2u(o[j]) == POISON;
                for (int j = 0; j < dv + 2; j++) untouched &= f2u(sp[j]) == POISON || !(c.n_ranges > 1 || c.mode == 1);
                continue;
            }
            const int    g = h / G, pos = c.pos0 + t, hs = g - c.kv_h0;
            const float *qh = q + ((size_t)t * c.n_head + h) * d;
            const double scale = (double)(1.0f / sqrtf((float)d));
            double       M = c.sinks ? (double)sinks[h] : -INFINITY;
            int          n = 0;
            for (int j = c.c0; j < c.c1 && j <= pos; j++, n++) {
                const float *kr = kf + ((size_t)hs * c.kv_cells + (j - c.cell_base)) * d;
                double       dot = 0;
                for (int x = 0; x < d; x++) dot += (double)qh[x] * (double)kr[x];
                double v = scale * dot;
                if (c.softcap > 0) v = (double)c.softcap * tanh(v / (double)c.softcap);
                if (c.alibi > 0) v -= (double)slopes[h] * (double)(pos - j);
                s[n] = v;
                if (v > M) M = v;
            }
            if (c.mode == 1) { /* the state: m the max, l and acc relative to the GPU's own m */
                double m_ref = -INFINITY;
                for (int x = 0; x < n; x++) m_ref = s[x] > m_ref ? s[x] : m_ref;
                const double mg = sp[0];
                double       l = 0;
                for (int j = 0; j < dv; j++) acc[j] = 0;
                for (int x = 0; x < n; x++) {
                    const double w = exp(s[x] - mg);
                    const float *vr = vf + ((size_t)hs * c.kv_cells + (c.c0 + x - c.cell_base)) * dv;
                    l += w;
                    for (int j = 0; j < dv; j++) acc[j] += w * (double)vr[j];
                }
                const double em = fabs(mg - m_ref) / (fabs(m_ref) > 1 ? fabs(m_ref) : 1), el = fabs(sp[1] - l) / l;
                mmax = em > mmax ? em : mmax;
                lmax = el > lmax ? el : lmax;
                for (int j = 0; j < dv; j++) {
                    finite &= isfinite(sp[2 + j]);
                    num += (sp[2 + j] - acc[j]) * (sp[2 + j] - acc[j]);
                    den += acc[j] * acc[j];
                }
                continue;
            }
            double l = c.sinks ? exp((double)sinks[h] - M) : 0.0;
            for (int j = 0; j < dv; j++) acc[j] = 0;
            for (int x = 0; x < n; x++) {
                const double w = exp(s[x] - M);
                const float *vr = vf + ((size_t)hs * c.kv_cells + (c.c0 + x - c.cell_base)) * dv;
                l += w;
                for (int j = 0; j < dv; j++) acc[j] += w * (double)vr[j];
            }
            for (int j = 0; j < dv; j++) {
                const double r = l > 0 ? acc[j] / l : 0.0; /* no visible cell and no sink: 0 */
                finite &= isfinite(o[j]);
                num += (o[j] - r) * (o[j] - r);
                den += r * r;
            }
        }
    const double err = den > 0 ? sqrt(num / den) : sqrt(num);
    int          ok = status_ok && det && untouched && finite && err < ATT_TOL && mid_state_ok;
    if (c.mode == 1) ok &= mmax < 1e-5 && lmax < ATT_TOL;
    CHECK(untouched, "%s: an output outside the attended heads was written", c.name);
    CHECK(finite, "%s: non-finite output", c.name);
    CHECK(err < ATT_TOL, "%s: relative L2 error %.3g", c.name, err);
    if (c.mode == 1) CHECK(mmax < 1e-5 && lmax < ATT_TOL, "%s: state m err %.3g, l err %.3g", c.name, mmax, lmax);

    char shape[96];
    snprintf(shape, sizeof shape, "%-4s d%d/%d g%d kv%d [%d,%d) t%d r%d%s%s%s%s%s", tname(c.type), d, dv, G, c.h1 - c.h0, c.c0,
             c.c1, T, c.n_ranges, c.softcap > 0 ? " cap" : "", c.alibi > 0 ? " alibi" : "", c.sinks ? " sink" : "",
             c.mode == 1 ? " state" : c.mode == 2 ? " rev" : "", FORCE.name);
    add_result(c.name, shape, err, det, ok);
    printf("%-28s %-58s err %.2e det %d %s\n", c.name, shape, err, det, ok ? "ok" : "FAIL");
    fflush(stdout);

    OPS.dev_free(ST, dk);
    OPS.dev_free(ST, dvv);
    OPS.dev_free(ST, dq);
    OPS.dev_free(ST, dout);
    OPS.dev_free(ST, dst);
    OPS.dev_free(ST, dsinks);
    OPS.dev_free(ST, dslopes);
    free(kf), free(vf), free(kraw), free(vraw), free(q), free(pois), free(s), free(acc);
    for (int rep = 0; rep < 2; rep++) free(out[rep]), free(state[rep]);
    return ok;
}

/* NaN and inf (API.md): a masked cell never reaches an output, whatever its K and V hold; a
   visible cell with inf or NaN in K makes its KV head's outputs NaN; a non-finite V element d of
   a visible cell makes output element d non-finite. 4 q heads / 2 KV heads, 70 cells, T tokens
   ending at cell 69; kind 0: V[69][3] of KV head 0 = inf (prefill: only the last token sees
   it); 1: K[5][0] of KV head 0 = NaN; 2: K[5][0] = inf (an infinite score); 3: V[5][7]
   of KV head 1 = inf. The expectation is a float64 evaluation of the same formula over the
   visible cells only, element by element: finite where it is finite (and close), NaN where it is
   NaN, non-finite where it is infinite. */
static void run_nonfinite(int type, int d, int T, int kind) {
    const int    NH = 4, NKV = 2, G = 2, CELLS = 70, pos0 = CELLS - T;
    const size_t es = tsize(type), ke = (size_t)NKV * CELLS * d, qe = (size_t)T * NH * d, oe = (size_t)T * NH * d;
    float       *kf = (float *)xmalloc(ke * 4), *vf = (float *)xmalloc(ke * 4), *q = (float *)xmalloc(qe * 4);
    float       *out = (float *)xmalloc(oe * 4);
    void        *kraw = xmalloc(ke * es), *vraw = xmalloc(ke * es);
    for (size_t i = 0; i < ke; i++) {
        kf[i] = store_t(kraw, i, type, rng_normal());
        vf[i] = store_t(vraw, i, type, rng_normal());
    }
    for (size_t i = 0; i < qe; i++) q[i] = rng_normal();
    const float inf = INFINITY, bad = kind == 1 ? NAN : inf;
    const size_t at = kind == 0 ? (size_t)69 * d + 3 : kind == 3 ? ((size_t)CELLS + 5) * d + 7 : (size_t)5 * d;
    (kind == 0 || kind == 3 ? vf : kf)[at] = store_t(kind == 0 || kind == 3 ? vraw : kraw, at, type, bad);
    void *dk = dalloc(ke * es), *dv = dalloc(ke * es), *dq = dalloc(qe * 4), *dout = dalloc(oe * 4);
    up(dk, kraw, ke * es), up(dv, vraw, ke * es), up(dq, q, qe * 4);
    fill_poison(out, oe);
    up(dout, out, oe * 4);
    neo__attn_args a;
    memset(&a, 0, sizeof a);
    a.k = dk, a.v = dv, a.q = (const float *)dq, a.out = (float *)dout;
    a.kv_cells = CELLS, a.h1 = NKV, a.c1 = CELLS, a.n_tokens = T, a.pos0 = pos0;
    a.n_head = NH, a.n_head_kv = NKV, a.head_dim = d, a.head_dim_v = d, a.kv_type = type, a.scale = 1.0f / sqrtf((float)d);
    const int forced = FORCE.kernel >= 0 || FORCE.shape >= 0 || FORCE.max_splits > 0;
    int       st = forced ? neo__cu_test_attend(ST, &a, NEO__STREAM_MAIN, FORCE.kernel, FORCE.shape, FORCE.max_splits)
                          : OPS.attend(ST, &a, NEO__STREAM_MAIN);
    if (forced && st == NEO_ERR_UNSUPPORTED) goto done;
    CHECK(st == NEO_OK, "nonfinite: attend returned %d", st);
    OPS.stream_sync(ST, NEO__STREAM_MAIN);
    down(out, dout, oe * 4);
    {
        double num = 0, den = 0;
        long   wrong = 0;
        double sc[70], acc[256];
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const int    g = h / G, pos = pos0 + t;
                const float *qh = q + ((size_t)t * NH + h) * d;
                double       M = -INFINITY, l = 0;
                for (int j = 0; j <= pos; j++) {
                    double dot = 0;
                    for (int x = 0; x < d; x++) dot += (double)qh[x] * (double)kf[((size_t)g * CELLS + j) * d + x];
                    sc[j] = isfinite(dot) ? dot * (double)a.scale : NAN; /* an inf score is NaN too */
                    M = sc[j] > M || isnan(sc[j]) ? sc[j] : M;
                }
                for (int x = 0; x < d; x++) acc[x] = 0;
                for (int j = 0; j <= pos; j++) {
                    const double w = exp(sc[j] - M);
                    l += w;
                    for (int x = 0; x < d; x++) acc[x] += w * (double)vf[((size_t)g * CELLS + j) * d + x];
                }
                for (int x = 0; x < d; x++) {
                    const double r = acc[x] / l, o = out[((size_t)t * NH + h) * d + x];
                    if (isnan(r)) wrong += !isnan(o);
                    else if (isinf(r)) wrong += isfinite(o);
                    else if (!isfinite(o)) wrong++;
                    else num += (o - r) * (o - r), den += r * r;
                }
            }
        const double err = den > 0 ? sqrt(num / den) : 0;
        char         shape[96];
        static const char *what[] = {"masked V inf", "K NaN", "K inf", "V inf"};
        snprintf(shape, sizeof shape, "%-4s d%d t%d %s%s", tname(type), d, T, what[kind], FORCE.name);
        CHECK(!wrong && err < ATT_TOL, "nonfinite %s: %ld elements wrong, err %.3g", shape, wrong, err);
        add_result("nan/inf", shape, err, -1, !wrong && err < ATT_TOL);
        printf("%-28s %-58s err %.2e %ld wrong %s\n", "nan/inf", shape, err, wrong, !wrong && err < ATT_TOL ? "ok" : "FAIL");
    }
done:
    OPS.dev_free(ST, dk), OPS.dev_free(ST, dv), OPS.dev_free(ST, dq), OPS.dev_free(ST, dout);
    free(kf), free(vf), free(q), free(out), free(kraw), free(vraw);
}

/* name, type, n_head, n_head_kv, d, dv, kv_h0, h0, h1, cell_base, kv_cells, c0, c1, n_tokens, pos0, n_ranges,
   softcap, alibi, sinks, mode */
#define F16 NEO_TYPE_F16
#define BF16 NEO_TYPE_BF16
#define F32 NEO_TYPE_F32
static const acase cases_full[] = {
    /* storage types on the fast path */
    {"type f16", F16, 32, 8, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"type bf16", BF16, 32, 8, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"type f32", F32, 32, 8, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    /* head dims: 64/128/256 fast, the rest generic */
    {"d1", F16, 8, 4, 1, 1, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d8", BF16, 8, 4, 8, 8, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d64", F16, 8, 4, 64, 64, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d64 f32", F32, 8, 4, 64, 64, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d100", BF16, 8, 4, 100, 100, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d128", F16, 8, 4, 128, 128, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d256", F16, 8, 4, 256, 256, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d256 bf16", BF16, 8, 4, 256, 256, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d256 f32", F32, 8, 4, 256, 256, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    /* head_dim_v != head_dim */
    {"dv64 d128", F16, 8, 2, 128, 64, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"dv100 d64", BF16, 8, 2, 64, 100, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"dv128 d192", F32, 8, 2, 192, 128, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"dv300 d1", F16, 4, 2, 1, 300, 0, 0, 0, 0, 500, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"dv1 d300", BF16, 4, 2, 300, 1, 0, 0, 0, 0, 500, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d512 dv1000", F16, 4, 2, 512, 1000, 0, 0, 0, 0, 300, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d16384", BF16, 4, 2, 16384, 16384, 0, 0, 0, 0, 40, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    /* groups */
    {"g1", F16, 4, 4, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"g2", BF16, 8, 4, 128, 128, 0, 0, 0, 0, 100, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"g4", F32, 16, 4, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"g8", F16, 32, 4, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"g8 d100", F16, 32, 4, 100, 100, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"g16", BF16, 32, 2, 128, 128, 0, 0, 0, 0, 1000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"g7 d64 (qwen)", F16, 14, 2, 64, 64, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"g3 d64 f32", F32, 6, 2, 64, 64, 0, 0, 0, 0, 777, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    /* lengths */
    {"len1", F16, 8, 2, 128, 128, 0, 0, 0, 0, 1, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"len1 d100", F16, 8, 2, 100, 100, 0, 0, 0, 0, 1, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"len100", F16, 8, 2, 128, 128, 0, 0, 0, 0, 100, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"len4096", BF16, 8, 2, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"len40000", F16, 8, 2, 128, 128, 0, 0, 0, 0, 40000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"len40000 d100", BF16, 8, 2, 100, 100, 0, 0, 0, 0, 40000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"len40000 g8 f32", F32, 16, 2, 64, 64, 0, 0, 0, 0, 40000, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    /* softcap, ALiBi, sinks */
    {"softcap", F16, 8, 2, 128, 128, 0, 0, 0, 0, 2000, 0, 0, 1, -1, 1, 2.0f, 0, 0, 0},
    {"alibi", F16, 8, 2, 128, 128, 0, 0, 0, 0, 2000, 0, 0, 1, -1, 1, 0, 8.0f, 0, 0},
    {"alibi n_head 12", BF16, 12, 4, 64, 64, 0, 0, 0, 0, 2000, 0, 0, 1, -1, 1, 0, 8.0f, 0, 0},
    {"sinks", F16, 8, 2, 128, 128, 0, 0, 0, 0, 2000, 0, 0, 1, -1, 1, 0, 0, 1, 0},
    {"all three", BF16, 8, 2, 128, 128, 0, 0, 0, 0, 2000, 0, 0, 1, -1, 1, 3.0f, 4.0f, 1, 0},
    {"all three d100", F32, 8, 2, 100, 100, 0, 0, 0, 0, 2000, 0, 0, 1, -1, 1, 3.0f, 4.0f, 1, 0},
    {"sinks len1", F16, 8, 2, 64, 64, 0, 0, 0, 0, 1, 0, 0, 1, -1, 1, 0, 0, 1, 0},
    /* prefill */
    {"prefill t2", F16, 8, 2, 128, 128, 0, 0, 0, 0, 300, 0, 0, 2, -1, 1, 0, 0, 0, 0},
    {"prefill t7 g4", BF16, 8, 2, 128, 128, 0, 0, 0, 0, 1000, 0, 0, 7, -1, 1, 0, 0, 0, 0},
    {"prefill t16 f32", F32, 8, 2, 64, 64, 0, 0, 0, 0, 1000, 0, 0, 16, -1, 1, 0, 0, 0, 0},
    {"prefill t64", F16, 8, 2, 128, 128, 0, 0, 0, 0, 4096, 0, 0, 64, -1, 1, 0, 0, 0, 0},
    {"prefill t64 = len", BF16, 8, 2, 256, 256, 0, 0, 0, 0, 64, 0, 0, 64, -1, 1, 0, 0, 0, 0},
    {"prefill t33 d100", F16, 8, 2, 100, 100, 0, 0, 0, 0, 500, 0, 0, 33, -1, 1, 0, 0, 0, 0},
    {"prefill t64 g1 all", BF16, 4, 4, 128, 128, 0, 0, 0, 0, 2000, 0, 0, 64, -1, 1, 3.0f, 4.0f, 1, 0},
    {"prefill t9 d100 all", F32, 8, 2, 100, 64, 0, 0, 0, 0, 700, 0, 0, 9, -1, 1, 3.0f, 4.0f, 1, 0},
    /* partial ranges, as the stream-back path uses them */
    {"partial heads+cells", F16, 32, 8, 128, 128, 2, 3, 6, 1000, 5000, 1500, 5500, 1, -1, 3, 0, 0, 0, 0},
    {"partial all", BF16, 32, 8, 128, 128, 2, 3, 6, 1000, 5000, 1500, 5500, 1, -1, 3, 3.0f, 4.0f, 1, 0},
    {"partial generic", F32, 32, 8, 100, 72, 2, 3, 6, 1000, 5000, 1500, 5500, 1, -1, 3, 3.0f, 4.0f, 1, 0},
    {"partial prefill", F16, 32, 8, 128, 128, 2, 3, 6, 1000, 5000, 1500, 5500, 16, -1, 4, 0, 4.0f, 1, 0},
    {"partial prefill gen", BF16, 16, 8, 100, 100, 2, 3, 6, 1000, 5000, 1500, 5500, 16, -1, 4, 3.0f, 0, 1, 0},
    {"tiny pieces", F16, 8, 4, 64, 64, 1, 1, 4, 100, 200, 150, 161, 1, -1, 5, 0, 0, 1, 0},
    {"tiny pieces gen", F16, 8, 4, 8, 8, 1, 1, 4, 100, 200, 150, 161, 3, -1, 5, 0, 0, 1, 0},
    {"decode before end", F16, 8, 2, 128, 128, 0, 0, 0, 0, 3000, 0, 0, 1, 1999, 1, 0, 0, 0, 0},
    {"many pieces", BF16, 32, 8, 128, 128, 0, 0, 0, 0, 8192, 0, 0, 1, -1, 8, 0, 4.0f, 1, 0},
    /* state left unnormalised */
    {"state", F16, 16, 4, 128, 128, 1, 1, 3, 500, 3000, 600, 3400, 1, -1, 2, 0, 0, 0, 1},
    {"state gen prefill", BF16, 16, 4, 48, 80, 1, 1, 3, 500, 3000, 600, 3400, 5, -1, 2, 2.0f, 0, 0, 1},
    {"state one call", F32, 8, 2, 64, 64, 0, 0, 0, 0, 999, 0, 0, 1, -1, 1, 0, 0, 0, 1},
    /* fully masked ranges */
    {"masked first", F16, 8, 2, 128, 128, 0, 0, 0, 0, 4000, 0, 0, 1, 1999, 2, 0, 0, 0, 2},
    {"masked first gen", BF16, 8, 2, 100, 100, 0, 0, 0, 0, 4000, 0, 0, 1, 1999, 2, 0, 0, 1, 2},
    {"masked first prefill", F16, 8, 2, 128, 128, 0, 0, 0, 0, 4000, 0, 0, 8, 1000, 2, 0, 4.0f, 0, 2},
    {"no cell, sinks", F16, 8, 2, 128, 128, 0, 0, 0, 0, 400, 100, 400, 8, 98, 1, 0, 0, 1, 0},
    {"no cell, no sinks", BF16, 8, 2, 100, 100, 0, 0, 0, 0, 400, 100, 400, 8, 98, 1, 0, 0, 0, 0},
    /* the tensor-core kernel: query tiles of 8 (7 of them, 3 of them), many splits, d256 */
    {"g7 d64 all", F16, 14, 2, 64, 64, 0, 0, 0, 0, 30000, 0, 0, 1, -1, 1, 3.0f, 4.0f, 1, 0},
    {"g8 prefill t3 bf16", BF16, 32, 4, 128, 128, 0, 0, 0, 0, 5000, 0, 0, 3, -1, 1, 0, 4.0f, 1, 0},
    {"g6 d64 bf16 partial", BF16, 24, 4, 64, 64, 1, 1, 4, 100, 9000, 200, 9100, 2, -1, 3, 2.0f, 0, 1, 0},
    {"one head, 132 splits", F16, 8, 1, 64, 64, 0, 0, 0, 0, 100000, 0, 0, 1, -1, 1, 0, 0, 1, 0},
    {"one head, 132 splits bf16", BF16, 8, 1, 128, 128, 0, 0, 0, 0, 100000, 0, 0, 1, -1, 1, 0, 4.0f, 0, 0},
    {"state bf16 d256", BF16, 8, 4, 256, 256, 1, 1, 3, 500, 3000, 600, 3400, 2, -1, 3, 0, 0, 0, 1},
    {"g16 prefill t5 d256", F16, 32, 2, 256, 256, 0, 0, 0, 0, 20000, 0, 0, 5, -1, 1, 0, 0, 1, 0},
};
static const acase cases_quick[] = {
    {"type f16", F16, 32, 8, 128, 128, 0, 0, 0, 0, 600, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"type bf16 g8", BF16, 32, 4, 64, 64, 0, 0, 0, 0, 600, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"type f32 d256", F32, 16, 8, 256, 256, 0, 0, 0, 0, 300, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"d100 all", F16, 8, 2, 100, 72, 0, 0, 0, 0, 500, 0, 0, 1, -1, 1, 3.0f, 4.0f, 1, 0},
    {"d300", BF16, 4, 2, 300, 300, 0, 0, 0, 0, 100, 0, 0, 1, -1, 1, 0, 0, 0, 0},
    {"prefill t16", F16, 8, 2, 128, 128, 0, 0, 0, 0, 500, 0, 0, 16, -1, 1, 0, 4.0f, 1, 0},
    {"prefill t9 gen", F32, 8, 2, 100, 64, 0, 0, 0, 0, 300, 0, 0, 9, -1, 1, 3.0f, 0, 1, 0},
    {"partial", F16, 32, 8, 128, 128, 2, 3, 6, 1000, 1000, 1100, 2000, 4, -1, 3, 0, 4.0f, 1, 0},
    {"partial gen", BF16, 16, 8, 100, 100, 2, 3, 6, 1000, 1000, 1100, 2000, 4, -1, 3, 3.0f, 0, 1, 0},
    {"state", F16, 16, 4, 128, 128, 1, 1, 3, 500, 1000, 600, 1400, 1, -1, 2, 0, 0, 0, 1},
    {"masked first", F16, 8, 2, 128, 128, 0, 0, 0, 0, 1000, 0, 0, 1, 499, 2, 0, 0, 0, 2},
    {"no cell, no sinks", BF16, 8, 2, 100, 100, 0, 0, 0, 0, 400, 100, 400, 8, 98, 1, 0, 0, 0, 0},
    /* the tensor-core kernel: query tiles of 8 (7 of them, 3 of them), many splits, d256 */
    {"g7 d64 all", F16, 14, 2, 64, 64, 0, 0, 0, 0, 3000, 0, 0, 1, -1, 1, 3.0f, 4.0f, 1, 0},
    {"g8 prefill t3 bf16", BF16, 32, 4, 128, 128, 0, 0, 0, 0, 1000, 0, 0, 3, -1, 1, 0, 4.0f, 1, 0},
    {"one head, 132 splits", F16, 8, 1, 64, 64, 0, 0, 0, 0, 40000, 0, 0, 1, -1, 1, 0, 0, 1, 0},
    {"state bf16 d256", BF16, 8, 4, 256, 256, 1, 1, 3, 500, 3000, 600, 3400, 2, -1, 3, 0, 0, 0, 1},
};

/* =============================================================================================
   append
   ============================================================================================= */
/* Wrong elements of a cache holding heads [first, first + n_stored) x kv_cells rows: heads
   [lo, hi), rows row0 .. row0 + T - 1 must hold src rounded to type, the rest the 0xff fill. */
static long append_wrong(const unsigned char *cache, int type, int dim, int first, int n_stored, int kv_cells, int lo, int hi,
                         int row0, int T, const float *src, int n_head_kv) {
    const size_t  es = tsize(type);
    unsigned char want[4];
    long          bad = 0;
    for (int h = 0; h < n_stored; h++)
        for (int row = 0; row < kv_cells; row++)
            for (int j = 0; j < dim; j++) {
                const int    head = first + h, t = row - row0;
                const size_t at = (((size_t)h * kv_cells + row) * dim + j) * es;
                if (head >= lo && head < hi && t >= 0 && t < T) {
                    store_t(want, 0, type, src[((size_t)t * n_head_kv + head) * dim + j]);
                    bad += memcmp(cache + at, want, es) != 0;
                } else
                    for (size_t b = 0; b < es; b++) bad += cache[at + b] != 0xff;
            }
    return bad;
}

/* Heads [h0, h1) of T new tokens into rows row0.. of a device cache holding heads from kv_h0 on;
   with h2 >= 0, heads from h2 on go to a second cache in pinned host memory instead (a split
   layer's host half), so the first holds only [kv_h0, h2). */
static void test_append(int type, int d, int dv, int n_head_kv, int kv_h0, int h0, int h1, int kv_cells, int row0, int T, int h2) {
    const int    nst = (h2 >= 0 ? h2 : n_head_kv) - kv_h0, nst2 = h2 >= 0 ? n_head_kv - h2 : 0;
    const size_t es = tsize(type), ke = (size_t)nst * kv_cells * d, ve = (size_t)nst * kv_cells * dv;
    const size_t ke2 = (size_t)nst2 * kv_cells * d, ve2 = (size_t)nst2 * kv_cells * dv;
    float *sk = (float *)xmalloc((size_t)T * n_head_kv * d * 4), *sv = (float *)xmalloc((size_t)T * n_head_kv * dv * 4);
    /* normals, with some tiny (half subnormal) and huge (half overflow) values for the rounding */
    for (size_t i = 0; i < (size_t)T * n_head_kv * d; i++) {
        double u = rng_uni();
        sk[i] = rng_normal() * (u < 0.1 ? 1e-6f : u < 0.15 ? 1e5f : 1.0f);
    }
    for (size_t i = 0; i < (size_t)T * n_head_kv * dv; i++) {
        double u = rng_uni();
        sv[i] = rng_normal() * (u < 0.1 ? 3e-7f : u < 0.15 ? 7e4f : 1.0f);
    }
    unsigned char *hk = (unsigned char *)xmalloc(ke * es + 1), *hv = (unsigned char *)xmalloc(ve * es + 1);
    unsigned char *pk = NULL, *pv = NULL; /* pinned: the second cache */
    void *dk = nst ? dalloc(ke * es) : NULL, *dvv = nst ? dalloc(ve * es) : NULL, *dsk = dalloc((size_t)T * n_head_kv * d * 4),
         *dsv = dalloc((size_t)T * n_head_kv * dv * 4);
    memset(hk, 0xff, ke * es);
    memset(hv, 0xff, ve * es);
    if (nst) {
        up(dk, hk, ke * es);
        up(dvv, hv, ve * es);
    }
    if (nst2 && (OPS.host_alloc(ST, (void **)&pk, ke2 * es) != NEO_OK || OPS.host_alloc(ST, (void **)&pv, ve2 * es) != NEO_OK)) {
        fprintf(stderr, "host_alloc failed\n");
        exit(2);
    }
    if (nst2) {
        memset(pk, 0xff, ke2 * es);
        memset(pv, 0xff, ve2 * es);
    }
    up(dsk, sk, (size_t)T * n_head_kv * d * 4);
    up(dsv, sv, (size_t)T * n_head_kv * dv * 4);
    neo__append_args a;
    memset(&a, 0, sizeof a);
    a.k = dk;
    a.v = dvv;
    a.k2 = pk;
    a.v2 = pv;
    a.h2 = h2;
    a.kv_cells = kv_cells;
    a.kv_h0 = kv_h0;
    a.h0 = h0;
    a.h1 = h1;
    a.row0 = row0;
    a.src_k = (const float *)dsk;
    a.src_v = (const float *)dsv;
    a.n_tokens = T;
    a.n_head_kv = n_head_kv;
    a.head_dim = d;
    a.head_dim_v = dv;
    a.kv_type = type;
    int s = OPS.append(ST, &a, NEO__STREAM_MAIN);
    CHECK(s == NEO_OK, "append returned %d", s);
    OPS.stream_sync(ST, NEO__STREAM_MAIN);
    if (nst) {
        down(hk, dk, ke * es);
        down(hv, dvv, ve * es);
    }
    const int hi1 = h2 >= 0 && h2 < h1 ? h2 : h1;
    long      bad = append_wrong(hk, type, d, kv_h0, nst, kv_cells, h0, hi1, row0, T, sk, n_head_kv) +
               append_wrong(hv, type, dv, kv_h0, nst, kv_cells, h0, hi1, row0, T, sv, n_head_kv);
    if (nst2)
        bad += append_wrong(pk, type, d, h2, nst2, kv_cells, h0 > h2 ? h0 : h2, h1, row0, T, sk, n_head_kv) +
               append_wrong(pv, type, dv, h2, nst2, kv_cells, h0 > h2 ? h0 : h2, h1, row0, T, sv, n_head_kv);
    char shape[96];
    if (h2 >= 0)
        snprintf(shape, sizeof shape, "%-4s d%d/%d heads [%d,%d) of %d, from %d to pinned, rows %d+%d of %d", tname(type), d, dv,
                 h0, h1, n_head_kv, h2, row0, T, kv_cells);
    else
        snprintf(shape, sizeof shape, "%-4s d%d/%d heads [%d,%d) of %d from %d, rows %d+%d of %d", tname(type), d, dv, h0, h1,
                 n_head_kv, kv_h0, row0, T, kv_cells);
    CHECK(bad == 0, "append %s: %ld wrong elements", shape, bad);
    add_result("append", shape, -1, -1, s == NEO_OK && bad == 0);
    printf("%-28s %-58s %ld wrong %s\n", "append", shape, bad, bad ? "FAIL" : "ok");
    OPS.dev_free(ST, dk), OPS.dev_free(ST, dvv), OPS.dev_free(ST, dsk), OPS.dev_free(ST, dsv);
    OPS.host_free(ST, pk), OPS.host_free(ST, pv);
    free(sk), free(sv), free(hk), free(hv);
}

/* =============================================================================================
   the decode loop's operations
   ============================================================================================= */
static double rel_l2(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static void op_result(const char *name, const char *shape, int s, double err) {
    CHECK(s == NEO_OK && err < OPS_TOL, "%s %s: status %d, err %.3g", name, shape, s, err);
    add_result(name, shape, err, -1, s == NEO_OK && err < OPS_TOL);
    printf("%-28s %-58s err %.2e %s\n", name, shape, err, s == NEO_OK && err < OPS_TOL ? "ok" : "FAIL");
}
static void fill_normal(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = rng_normal();
}

/* matvec against float64: y = W . x with run.c's rmsnorm first (norm) and the epilogue after,
   the outputs poisoned first (a start value for ADD), every case run twice and compared bitwise.
   misalign shifts w, w_mul, x and norm by one float (the scalar path). RoPE angles are computed
   in float as run.c does: that rounding is part of the function. */
typedef struct mvcase {
    int n, d, epi, norm, misalign, rope_q, rope_k, head_size, pos;
} mvcase;

static void test_matvec(mvcase c) {
    const char  *names[] = {"matvec store", "matvec add", "matvec swiglu", "matvec rope"};
    const size_t nw = (size_t)c.n * c.d + 1, nx = (size_t)c.n + 1, d = (size_t)c.d;
    float       *w = (float *)xmalloc(nw * 4), *wm = (float *)xmalloc(nw * 4), *x = (float *)xmalloc(nx * 4);
    float       *g = (float *)xmalloc(nx * 4), *y0 = (float *)xmalloc(d * 4), *y = (float *)xmalloc(d * 4), *y2 = (float *)xmalloc(d * 4);
    double      *ref = (double *)xmalloc(d * 8), *xn = (double *)xmalloc((size_t)c.n * 8), *dot = (double *)xmalloc(2 * d * 8);
    fill_normal(w, nw), fill_normal(wm, nw), fill_normal(x, nx), fill_normal(g, nx), fill_normal(y0, d);
    if (c.epi != NEO__MV_ADD) fill_poison(y0, d);
    float *dw = (float *)dalloc(nw * 4), *dwm = (float *)dalloc(nw * 4), *dx = (float *)dalloc(nx * 4), *dg = (float *)dalloc(nx * 4);
    float *dy = (float *)dalloc(d * 4);
    up(dw, w, nw * 4), up(dwm, wm, nw * 4), up(dx, x, nx * 4), up(dg, g, nx * 4);
    neo__matvec_args a;
    memset(&a, 0, sizeof a);
    a.y = dy;
    a.w = dw + c.misalign;
    a.w_mul = c.epi == NEO__MV_SWIGLU ? dwm + c.misalign : NULL;
    a.x = dx + c.misalign;
    a.norm = c.norm ? dg + c.misalign : NULL;
    a.n = c.n;
    a.d = c.d;
    a.epilogue = c.epi;
    a.pos = c.pos;
    a.rope_q = c.rope_q;
    a.rope_k = c.rope_k;
    a.head_size = c.head_size;
    int s = NEO_OK;
    for (int run = 0; run < 2; run++) {
        up(dy, y0, d * 4);
        if (s == NEO_OK) s = OPS.matvec(ST, &a, NEO__STREAM_MAIN);
        OPS.stream_sync(ST, NEO__STREAM_MAIN);
        down(run ? y2 : y, dy, d * 4);
    }
    const float *X = x + c.misalign, *G = g + c.misalign, *W = w + c.misalign, *WM = wm + c.misalign;
    double       ss = 0;
    for (int j = 0; j < c.n; j++) ss += (double)X[j] * X[j];
    ss = 1.0 / sqrt(ss / c.n + 1e-5);
    for (int j = 0; j < c.n; j++) xn[j] = c.norm ? (double)G[j] * (ss * X[j]) : X[j];
    for (size_t i = 0; i < d; i++) {
        double a0 = 0, a1 = 0;
        for (int j = 0; j < c.n; j++) a0 += (double)W[i * c.n + j] * xn[j], a1 += (double)WM[i * c.n + j] * xn[j];
        dot[i] = a0, dot[d + i] = a1;
    }
    for (size_t i = 0; i < d; i++)
        ref[i] = c.epi == NEO__MV_ADD ? y0[i] + dot[i] : c.epi == NEO__MV_SWIGLU ? dot[i] / (1.0 + exp(-dot[i])) * dot[d + i] : dot[i];
    if (c.epi == NEO__MV_ROPE)
        for (int r = 0; r < c.rope_q + c.rope_k; r += 2) {
            int    i = r < c.rope_q ? r : r - c.rope_q;
            float  freq = 1.0f / powf(10000.0f, (i % c.head_size) / (float)c.head_size), val = c.pos * freq;
            double fcr = cos((double)val), fci = sin((double)val);
            ref[r] = dot[r] * fcr - dot[r + 1] * fci;
            ref[r + 1] = dot[r] * fci + dot[r + 1] * fcr;
        }
    char shape[96];
    snprintf(shape, sizeof shape, "n %d d %d%s%s", c.n, c.d, c.norm ? " rmsnorm" : "", c.misalign ? " misaligned" : "");
    if (c.epi == NEO__MV_ROPE)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " q %d k %d head %d pos %d", c.rope_q, c.rope_k, c.head_size,
                 c.pos);
    const double err = rel_l2(y, ref, d);
    const int    det = !memcmp(y, y2, d * 4), ok = s == NEO_OK && err < OPS_TOL && det;
    CHECK(ok, "%s %s: status %d, err %.3g, det %d", names[c.epi], shape, s, err, det);
    add_result(names[c.epi], shape, err, det, ok);
    printf("%-28s %-58s err %.2e %s\n", names[c.epi], shape, err, ok ? "ok" : "FAIL");
    OPS.dev_free(ST, dw), OPS.dev_free(ST, dwm), OPS.dev_free(ST, dx), OPS.dev_free(ST, dg), OPS.dev_free(ST, dy);
    free(w), free(wm), free(x), free(g), free(y0), free(y), free(y2), free(ref), free(xn), free(dot);
}

/* The RoPE projection with the token's append folded in (neo__matvec_args.app), for each storage
   type and two layouts: a split layer (head 0 in device buffers, head 1 from h2 = 1 in second
   ones) and a layer with every head in pinned host memory (h2 = 0, no first destination), head_dim
   32 and head_dim_v 16, every cell poisoned; a row given (3: len[0] then 4), a row read from
   len[0] (5, which is RoPE's position too: len[0] moves on to 6), and len[0] at the cache's end
   (nothing written, the full flag raised, RoPE at that position still). y equals the plain RoPE
   projection at the same position bit for bit; the appended row holds y's k and v rows rounded
   to the type as the host rounds (the append op's rounding); every other cell keeps its poison. */
static int mva_case(int t, int none, int mode, const float *dw, const float *dx, const float *dg, float *dy, int *dlen);
static void test_matvec_append(void) {
    enum { N = 256, D = 8 * 32 + 2 * 32 + 2 * 16 };
    float *w = (float *)xmalloc((size_t)D * N * 4), *x = (float *)xmalloc(N * 4), *g = (float *)xmalloc(N * 4);
    float *dw = (float *)dalloc((size_t)D * N * 4), *dx = (float *)dalloc(N * 4), *dg = (float *)dalloc(N * 4), *dy = (float *)dalloc(D * 4);
    int   *dlen = (int *)dalloc(3 * sizeof(int)), ok = 1;
    fill_normal(w, (size_t)D * N), fill_normal(x, N), fill_normal(g, N);
    up(dw, w, (size_t)D * N * 4), up(dx, x, N * 4), up(dg, g, N * 4);
    for (int t = NEO_TYPE_F16; t <= NEO_TYPE_F32; t++)
        for (int none = 0; none < 2; none++)
            for (int mode = 0; mode < 3; mode++) ok &= mva_case(t, none, mode, dw, dx, dg, dy, dlen);
    add_result("matvec rope + append", "f16/bf16/f32, split / all on host, d 32/16: row, len, full", -1, -1, ok);
    printf("%-28s %-58s %s\n", "matvec rope + append", "f16/bf16/f32, split / all on host, d 32/16: row, len, full", ok ? "ok" : "FAIL");
    OPS.dev_free(ST, dw), OPS.dev_free(ST, dx), OPS.dev_free(ST, dg), OPS.dev_free(ST, dy), OPS.dev_free(ST, dlen);
    free(w), free(x), free(g);
}
/* One case of test_matvec_append: 1 when it passed. */
static int mva_case(int t, int none, int mode, const float *dw, const float *dx, const float *dg, float *dy, int *dlen) {
    enum { NH = 8, NKV = 2, HD = 32, HDV = 16, N = 256, CELLS = 10, D = NH * HD + NKV * HD + NKV * HDV };
    const size_t   es = tsize(t), kb = (size_t)NKV * CELLS * HD * es, vb = (size_t)NKV * CELLS * HDV * es; /* both heads' K, V */
    const int      h2 = none ? 0 : 1, len0[3] = {-7, 5, CELLS}, pos = mode == 0 ? 3 : len0[mode], row = mode == 2 ? -1 : pos;
    const int      lw[3] = {mode == 0 ? 4 : mode == 1 ? 6 : CELLS, mode == 2, 0};
    int            lg[3] = {len0[mode], 0, 0}, ok = 1;
    unsigned char *pk = (unsigned char *)xmalloc(kb), *pv = (unsigned char *)xmalloc(vb), *got = (unsigned char *)xmalloc(kb);
    float         *y = (float *)xmalloc(D * 4), *yref = (float *)xmalloc(D * 4);
    void          *buf[4] = {NULL, NULL, NULL, NULL}; /* k, v (heads before h2: device); k2, v2 (from h2 on: device, or pinned) */
    for (size_t i = 0; i < (size_t)NKV * CELLS * HD; i++) poison_t(pk, i, t);
    for (size_t i = 0; i < (size_t)NKV * CELLS * HDV; i++) poison_t(pv, i, t);
    if (!none) buf[0] = dalloc(kb / 2), buf[1] = dalloc(vb / 2), buf[2] = dalloc(kb / 2), buf[3] = dalloc(vb / 2);
    else if (OPS.host_alloc(ST, &buf[2], kb) != NEO_OK || OPS.host_alloc(ST, &buf[3], vb) != NEO_OK) {
        fprintf(stderr, "host_alloc failed\n");
        exit(2);
    }
    const size_t part[4] = {none ? 0 : kb / 2, none ? 0 : vb / 2, none ? kb : kb / 2, none ? vb : vb / 2};
    for (int b = 0; b < 4; b++)
        if (buf[b]) up(buf[b], b & 1 ? pv : pk, part[b]);
    up(dlen, lg, sizeof lg);
    neo__append_args ap;
    neo__matvec_args a;
    memset(&ap, 0, sizeof ap), memset(&a, 0, sizeof a);
    ap.k = buf[0], ap.v = buf[1], ap.k2 = buf[2], ap.v2 = buf[3], ap.h2 = h2, ap.kv_cells = CELLS, ap.h1 = NKV, ap.n_tokens = 1;
    ap.n_head_kv = NKV, ap.head_dim = HD, ap.head_dim_v = HDV, ap.kv_type = t, ap.row0 = mode == 0 ? 3 : -1, ap.len = dlen;
    a.y = dy, a.w = dw, a.x = dx, a.norm = dg, a.n = N, a.d = D, a.epilogue = NEO__MV_ROPE, a.rope_q = NH * HD, a.rope_k = NKV * HD;
    a.head_size = HD, a.pos = mode ? 12345 : pos, a.pos_dev = mode ? dlen : NULL, a.app = &ap; /* pos: must not be read with pos_dev */
    int s = OPS.matvec(ST, &a, NEO__STREAM_MAIN) | OPS.stream_sync(ST, NEO__STREAM_MAIN);
    down(y, dy, D * 4), down(lg, dlen, sizeof lg);
    a.app = NULL, a.pos_dev = NULL, a.pos = pos;
    s |= OPS.matvec(ST, &a, NEO__STREAM_MAIN) | OPS.stream_sync(ST, NEO__STREAM_MAIN);
    down(yref, dy, D * 4);
    /* the expected caches: poison, and the row from yref (K: k rows of head h; V: v rows) */
    for (int h = 0; h < NKV && row >= 0; h++) {
        for (int j = 0; j < HD; j++) (void)store_t(pk, ((size_t)h * CELLS + row) * HD + j, t, yref[NH * HD + h * HD + j]);
        for (int j = 0; j < HDV; j++) (void)store_t(pv, ((size_t)h * CELLS + row) * HDV + j, t, yref[NH * HD + NKV * HD + h * HDV + j]);
    }
    int cells = 1;
    for (int b = 0; b < 4; b++) {
        if (!buf[b]) continue;
        const size_t off = b < 2 ? 0 : (size_t)h2 * CELLS * (b & 1 ? HDV : HD) * es; /* heads from h2 on */
        down(got, buf[b], part[b]);
        cells &= !memcmp(got, (b & 1 ? pv : pk) + off, part[b]);
    }
    const int same = !memcmp(y, yref, D * 4), lok = lg[0] == lw[0] && lg[1] == lw[1] && lg[2] == lw[2];
    ok = s == NEO_OK && same && cells && lok;
    CHECK(ok, "matvec + append %s %s mode %d: status %d, y = plain %d, cache %d, len {%d, %d, %d}", tname(t), none ? "all on host" : "split",
          mode, s, same, cells, lg[0], lg[1], lg[2]);
    for (int b = 0; b < 4; b++)
        if (buf[b] && none) OPS.host_free(ST, buf[b]);
        else if (buf[b]) OPS.dev_free(ST, buf[b]);
    free(pk), free(pv), free(got), free(y), free(yref);
    return ok;
}

/* matvec's argument checks: statuses, and nothing launched */
static void test_matvec_args(void) {
    float           *buf = (float *)dalloc(64 * 4);
    neo__matvec_args a;
    int              ok = 1, s;
    memset(&a, 0, sizeof a);
    a.y = buf, a.w = buf + 16, a.x = buf + 32, a.n = 16, a.d = 4, a.epilogue = NEO__MV_SWIGLU; /* no w_mul */
    ok &= (s = OPS.matvec(ST, &a, NEO__STREAM_MAIN)) == NEO_ERR_INVALID_ARG;
    a.epilogue = NEO__MV_ROPE, a.head_size = 4, a.rope_q = 3; /* odd */
    ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
    a.rope_q = 4, a.rope_k = 2; /* past d */
    ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
    a.rope_k = 0, a.epilogue = 7;
    ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
    a.epilogue = NEO__MV_STORE, a.n = 0;
    ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
    {
        /* appends: on a projection that is not RoPE, with rows that do not fill y, and (on a valid
           RoPE projection of 1 KV head of 2 + 2 rows) a row past the cache or below -1, a second
           destination without its V, h2 past the heads, no first destination for head 0, kv_h0
           not 0, a misaligned length; then the valid one runs */
        neo__append_args ap, bad;
        memset(&ap, 0, sizeof ap);
        ap.k = ap.v = buf + 48, ap.kv_cells = 4, ap.h1 = ap.n_head_kv = 1, ap.n_tokens = 1, ap.head_dim = ap.head_dim_v = 2;
        ap.len = (int *)(buf + 60), ap.row0 = 1;
        a.app = &ap, a.epilogue = NEO__MV_STORE, a.n = 16;
        ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
        a.epilogue = NEO__MV_ROPE, a.head_size = 2, a.rope_q = 0, a.rope_k = 2, a.d = 6; /* v rows 4, not 2 */
        ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
        a.d = 4, a.n = 8; /* w: buf[16, 48), x: buf[32, 40), y: buf[0, 4), the cache at buf + 48, len at buf + 60 */
        for (int c = 0; c < 7; c++) {
            bad = ap;
            if (c == 0) bad.row0 = 4;
            if (c == 1) bad.row0 = -2;
            if (c == 2) bad.k2 = buf + 48, bad.h2 = 0;
            if (c == 3) bad.k2 = bad.v2 = buf + 48, bad.h2 = 2;
            if (c == 4) bad.k = NULL;
            if (c == 5) bad.kv_h0 = 1;
            if (c == 6) bad.row0 = -1, bad.len = (int *)((char *)(buf + 60) + 2);
            a.app = &bad;
            const int sc = OPS.matvec(ST, &a, NEO__STREAM_MAIN);
            CHECK(sc == NEO_ERR_INVALID_ARG, "matvec + append: bad case %d: status %d", c, sc);
            ok &= sc == NEO_ERR_INVALID_ARG;
        }
        a.app = &ap;
        ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_OK;
        a.app = NULL, a.epilogue = NEO__MV_STORE, a.rope_k = 0, a.n = 0;
    }
    a.n = 16, a.d = 0; /* nothing to do */
    ok &= OPS.matvec(ST, &a, NEO__STREAM_MAIN) == NEO_OK;
    ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
    CHECK(ok, "matvec bad arguments");
    add_result("matvec bad args", "no w_mul, odd RoPE rows, bad epilogue, n 0, 9 bad appends", -1, -1, ok);
    OPS.dev_free(ST, buf);
}

/* argmax: the lowest index of the largest value, NaN never winning, 0 when nothing beats -inf;
   err is 0 when the device index equals a host scan's */
static void test_argmax(int n, int kind) {
    float *x = (float *)xmalloc((size_t)n * 4);
    int    want = 0, got = -1, *dout = (int *)dalloc(sizeof(int));
    float *dx = (float *)dalloc((size_t)n * 4), best = -INFINITY;
    fill_normal(x, (size_t)n);
    if (kind == 1) /* ties: the largest value three times, the lowest index must win */
        x[n / 3] = x[n / 2] = x[n - 1] = 1e6f;
    if (kind == 2) { /* NaN before and after the maximum */
        x[0] = NAN, x[n - 1] = NAN, x[n / 2] = 1e6f;
    }
    if (kind == 3)
        for (int i = 0; i < n; i++) x[i] = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > best) best = x[i], want = i;
    up(dx, x, (size_t)n * 4);
    int s = OPS.argmax(ST, dout, dx, n, NEO__STREAM_MAIN);
    OPS.stream_sync(ST, NEO__STREAM_MAIN);
    down(&got, dout, sizeof(int));
    char shape[96];
    snprintf(shape, sizeof shape, "n %d, %s", n, kind == 1 ? "ties" : kind == 2 ? "NaN" : kind == 3 ? "all -inf" : "random");
    op_result("argmax", shape, s, got == want ? 0.0 : 1.0);
    OPS.dev_free(ST, dx), OPS.dev_free(ST, dout);
    free(x);
}

/* The hybrid's merge of two states (m, l, acc) of n_tokens x n_head queries, heads [h0, h1), into
   out, against float64: kind 0 random states; 1 the first state empty (m = -inf, l = 0) for every
   other head; 2 both empty for every third head (out 0, or the sink's share of nothing: 0); 3 a
   NaN m in one head's state (that row all NaN). Rows outside [h0, h1) keep their poison; two runs
   are compared bitwise; bad arguments are refused. */
static void test_merge(int n_tokens, int n_head, int h0, int h1, int dv, int sinks, int kind) {
    const size_t sw = (size_t)dv + 2, ns = (size_t)n_tokens * n_head * sw, no = (size_t)n_tokens * n_head * dv;
    float  *st[2], *out = (float *)xmalloc(no * 4), *out2 = (float *)xmalloc(no * 4);
    float  *sk = (float *)xmalloc((size_t)n_head * 4);
    double *ref = (double *)xmalloc(no * 8);
    float  *dst[2], *dout = (float *)dalloc(no * 4), *dsk = (float *)dalloc((size_t)n_head * 4);
    int     bad = 0, nan_ok = 1;
    for (int i = 0; i < 2; i++) {
        st[i] = (float *)xmalloc(ns * 4);
        dst[i] = (float *)dalloc(ns * 4);
        for (size_t r = 0; r < ns / sw; r++) {
            float *x = st[i] + r * sw;
            int    h = (int)(r % (size_t)n_head);
            x[0] = 3.0f * rng_normal(), x[1] = 1.0f + 40.0f * (float)rng_uni();
            for (int j = 0; j < dv; j++) x[2 + j] = x[1] * rng_normal();
            if ((kind == 1 && i == 0 && h % 2 == 0) || (kind == 2 && h % 3 == 0)) {
                x[0] = -INFINITY, x[1] = 0.0f;
                for (int j = 0; j < dv; j++) x[2 + j] = 0.0f;
            }
            if (kind == 3 && i == 1 && h == h0) x[0] = NAN;
        }
        up(dst[i], st[i], ns * 4);
    }
    for (int h = 0; h < n_head; h++) sk[h] = h % 4 == 3 ? 12.0f : 2.0f * rng_normal();
    up(dsk, sk, (size_t)n_head * 4);
    for (size_t r = 0; r < (size_t)n_tokens * n_head; r++) {
        const float *a = st[0] + r * sw, *b = st[1] + r * sw;
        const int    h = (int)(r % (size_t)n_head);
        double       M = fmax((double)a[0], (double)b[0]), Mf, wa, wb, den;
        if (M == -INFINITY) M = 0.0;
        Mf = sinks && sk[h] > M ? sk[h] : M;
        wa = a[0] == -INFINITY ? 0.0 : exp((double)a[0] - Mf), wb = b[0] == -INFINITY ? 0.0 : exp((double)b[0] - Mf);
        den = a[1] * wa + b[1] * wb + (sinks ? exp((double)sk[h] - Mf) : 0.0);
        for (int j = 0; j < dv; j++) ref[r * dv + j] = den > 0 ? (a[2 + j] * wa + b[2 + j] * wb) / den : 0.0;
    }
    neo__merge_args m;
    memset(&m, 0, sizeof m);
    m.a = dst[0], m.b = dst[1], m.out = dout, m.sinks = sinks ? dsk : NULL;
    m.h0 = h0, m.h1 = h1, m.n_tokens = n_tokens, m.n_head = n_head, m.head_dim_v = dv;
    int s = NEO_OK;
    for (int run = 0; run < 2; run++) {
        fill_poison(run ? out2 : out, no);
        up(dout, run ? out2 : out, no * 4);
        if (s == NEO_OK) s = OPS.merge(ST, &m, NEO__STREAM_MAIN);
        if (OPS.stream_sync(ST, NEO__STREAM_MAIN) != NEO_OK) s = NEO_ERR_DEVICE;
        down(run ? out2 : out, dout, no * 4);
    }
    double num = 0, dn = 0;
    for (size_t r = 0; r < (size_t)n_tokens * n_head; r++) {
        const int h = (int)(r % (size_t)n_head);
        for (int j = 0; j < dv; j++) {
            const float o = out[r * dv + j];
            if (h < h0 || h >= h1) bad += f2u(o) != POISON;
            else if (kind == 3 && h == h0) nan_ok &= isnan(o) && f2u(o) != POISON;
            else num += (o - ref[r * dv + j]) * (o - ref[r * dv + j]), dn += ref[r * dv + j] * ref[r * dv + j];
        }
    }
    const double err = dn > 0 ? sqrt(num / dn) : sqrt(num);
    const int    det = memcmp(out, out2, no * 4) == 0;
    neo__merge_args w = m;
    w.h1 = n_head + 1;
    const int refused = OPS.merge(ST, &w, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
    w = m, w.b = NULL;
    const int refused2 = OPS.merge(ST, &w, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG;
    char shape[96];
    snprintf(shape, sizeof shape, "T %d, heads %d..%d of %d, dv %d%s, %s", n_tokens, h0, h1, n_head, dv, sinks ? ", sinks" : "",
             kind == 1 ? "one empty" : kind == 2 ? "both empty" : kind == 3 ? "NaN m" : "random");
    const int ok = s == NEO_OK && err < OPS_TOL && !bad && nan_ok && det && refused && refused2;
    CHECK(ok, "merge %s: status %d err %.3g, %d poisoned outputs written, NaN row %s, det %d, refused %d %d", shape, s, err,
          bad, nan_ok ? "ok" : "wrong", det, refused, refused2);
    add_result("merge", shape, err, det, ok);
    printf("%-28s %-58s err %.2e %s\n", "merge", shape, err, ok ? "ok" : "FAIL");
    for (int i = 0; i < 2; i++) OPS.dev_free(ST, dst[i]), free(st[i]);
    OPS.dev_free(ST, dout), OPS.dev_free(ST, dsk);
    free(out), free(out2), free(sk), free(ref);
}

/* One decode step over whole caches of ctx cells ([n_head_kv][ctx][d] K and V of type) for the
   queries dq ([n_head][d], device); the caller sets k, v and out. */
static neo__attn_args decode_args(int n_head, int n_head_kv, int d, int ctx, int type, const float *dq) {
    neo__attn_args a;
    memset(&a, 0, sizeof a);
    a.kv_cells = ctx;
    a.h1 = n_head_kv;
    a.c1 = ctx;
    a.q = dq;
    a.n_tokens = 1;
    a.pos0 = ctx - 1;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = d;
    a.head_dim_v = d;
    a.kv_type = type;
    a.scale = 1.0f / sqrtf((float)d);
    return a;
}

/* A batch (attend_batch): n decode entries of one shape, each with its own cache (rows past its
   length poisoned), its own length (from 1 to max_len: one split or many at the batch's chunk),
   its own device heads [0, h1) (the heads after them poisoned in q and expected untouched in
   out), sinks on every other entry, softcap on every third, ALiBi on every fifth. Every entry
   against float64, and two runs bitwise equal. shape: the tensor-core block forced (0 wide,
   1 narrow) or -1; max_splits > 0 caps the splits. */
static void test_batch(int type, int d, int n_head, int n_kv, int n, int max_len, int shape, int max_splits) {
    const int    G = n_head / n_kv, es = (int)tsize(type);
    const size_t qrow = (size_t)n_head * d;
    neo__attn_args *e = (neo__attn_args *)xmalloc((size_t)n * sizeof *e);
    void         **dk = (void **)xmalloc((size_t)n * sizeof(void *)), **dv = (void **)xmalloc((size_t)n * sizeof(void *));
    float        **kf = (float **)xmalloc((size_t)n * sizeof(float *)), **vf = (float **)xmalloc((size_t)n * sizeof(float *));
    int           *len = (int *)xmalloc((size_t)n * sizeof(int)), *h1 = (int *)xmalloc((size_t)n * sizeof(int));
    float         *q = (float *)xmalloc((size_t)n * qrow * 4), *out[2], sinks[256], slopes[256];
    float         *dq = (float *)dalloc((size_t)n * qrow * 4), *dout = (float *)dalloc((size_t)n * qrow * 4);
    float         *dsinks = (float *)dalloc(sizeof sinks), *dslopes = (float *)dalloc(sizeof slopes);
    for (int h = 0; h < n_head && h < 256; h++) sinks[h] = 2.0f * rng_normal(), slopes[h] = alibi_slope(h, n_head, 4.0f);
    up(dsinks, sinks, sizeof sinks), up(dslopes, slopes, sizeof slopes);
    for (int i = 0; i < n; i++) {
        const int    extra = 5;
        len[i] = i == 0 ? 1 : i == 1 ? max_len : 1 + (int)(rng_u64() % (uint64_t)max_len);
        h1[i] = 1 + (int)(rng_u64() % (uint64_t)n_kv);
        const size_t rows = (size_t)len[i] + extra, ne = (size_t)n_kv * rows * d;
        void        *kraw = xmalloc(ne * es), *vraw = xmalloc(ne * es);
        kf[i] = (float *)xmalloc(ne * 4), vf[i] = (float *)xmalloc(ne * 4);
        for (size_t x = 0; x < ne; x++) {
            const int live = (int)(x / d % rows) < len[i] && (int)(x / d / rows) < h1[i];
            if (live) kf[i][x] = store_t(kraw, x, type, rng_normal()), vf[i][x] = store_t(vraw, x, type, rng_normal());
            else poison_t(kraw, x, type), poison_t(vraw, x, type);
        }
        dk[i] = dalloc(ne * es), dv[i] = dalloc(ne * es);
        up(dk[i], kraw, ne * es), up(dv[i], vraw, ne * es);
        free(kraw), free(vraw);
        for (size_t x = 0; x < qrow; x++) q[i * qrow + x] = (int)(x / d) < h1[i] * G ? 1.5f * rng_normal() : u2f(POISON);
        neo__attn_args *a = &e[i];
        memset(a, 0, sizeof *a);
        a->k = dk[i], a->v = dv[i], a->kv_cells = (int)rows, a->h1 = h1[i], a->c1 = len[i];
        a->q = dq + i * qrow, a->n_tokens = 1, a->pos0 = len[i] - 1, a->out = dout + i * qrow;
        a->sinks = i % 2 ? dsinks : NULL, a->slopes = i % 5 == 4 ? dslopes : NULL, a->softcap = i % 3 == 2 ? 5.0f : 0.0f;
        a->n_head = n_head, a->n_head_kv = n_kv, a->head_dim = a->head_dim_v = d, a->kv_type = type;
        a->scale = 1.0f / sqrtf((float)d);
    }
    up(dq, q, (size_t)n * qrow * 4);
    float *pois = (float *)xmalloc((size_t)n * qrow * 4);
    fill_poison(pois, (size_t)n * qrow);
    int status = NEO_OK;
    out[0] = (float *)xmalloc((size_t)n * qrow * 4), out[1] = (float *)xmalloc((size_t)n * qrow * 4);
    for (int rep = 0; rep < 2; rep++) {
        const neo__attn_batch b = {e, n};
        up(dout, pois, (size_t)n * qrow * 4);
        const int s = neo__cu_test_attend_batch(ST, &b, NEO__STREAM_MAIN, shape, max_splits, 0);
        if (s == NEO_ERR_UNSUPPORTED && shape >= 0) { /* the forced block shape does not fit this GPU */
            printf("batch [%s]: the block shape does not fit this GPU's shared memory\n", shape ? "narrow" : "wide");
            status = s;
            break;
        }
        if (s != NEO_OK) status = s;
        if (OPS.stream_sync(ST, NEO__STREAM_MAIN) != NEO_OK) status = NEO_ERR_DEVICE;
        down(out[rep], dout, (size_t)n * qrow * 4);
    }
    double *w = NULL;
    if (status == NEO_ERR_UNSUPPORTED && shape >= 0) goto done;
    const int det = !memcmp(out[0], out[1], (size_t)n * qrow * 4);
    double    num = 0, den = 0, acc[256];
    w = (double *)xmalloc(((size_t)max_len + 1) * 8);
    int       untouched = 1, finite = 1;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < n_head; h++) {
            const float *o = out[0] + i * qrow + (size_t)h * d, *qh = q + i * qrow + (size_t)h * d;
            const size_t rows = (size_t)len[i] + 5, hb = (size_t)(h / G) * rows * d;
            if (h >= h1[i] * G) {
                for (int j = 0; j < d; j++) untouched &= f2u(o[j]) == POISON;
                continue;
            }
            const float *sk = e[i].sinks ? sinks : NULL;
            double       M = sk ? (double)sk[h] : -INFINITY, l = 0;
            for (int c = 0; c < len[i]; c++) {
                double dot = 0;
                for (int j = 0; j < d; j++) dot += (double)qh[j] * (double)kf[i][hb + (size_t)c * d + j];
                double v = (double)e[i].scale * dot;
                if (e[i].softcap > 0) v = (double)e[i].softcap * tanh(v / (double)e[i].softcap);
                if (e[i].slopes) v -= (double)slopes[h] * (double)(len[i] - 1 - c);
                w[c] = v;
                M = v > M ? v : M;
            }
            l = sk ? exp((double)sk[h] - M) : 0.0;
            for (int j = 0; j < d; j++) acc[j] = 0;
            for (int c = 0; c < len[i]; c++) {
                const double p = exp(w[c] - M);
                l += p;
                for (int j = 0; j < d; j++) acc[j] += p * (double)vf[i][hb + (size_t)c * d + j];
            }
            for (int j = 0; j < d; j++) {
                finite &= isfinite(o[j]);
                num += (o[j] - acc[j] / l) * (o[j] - acc[j] / l);
                den += acc[j] / l * (acc[j] / l);
            }
        }
    const double err = sqrt(num / den);
    const int    ok = status == NEO_OK && det && untouched && finite && err < ATT_TOL;
    CHECK(status == NEO_OK, "batch: attend_batch returned %d", status);
    CHECK(det, "batch: two runs differ");
    CHECK(untouched, "batch: an output outside an entry's heads was written");
    CHECK(finite && err < ATT_TOL, "batch: relative L2 error %.3g (finite %d)", err, finite);
    char name[64], shp[96];
    snprintf(name, sizeof name, "batch %d entries%s", n, shape == 0 ? " [wide]" : shape == 1 ? " [narrow]" : max_splits ? " [S<=2]" : "");
    snprintf(shp, sizeof shp, "%-4s d%d g%d kv%d lengths 1..%d", tname(type), d, G, n_kv, max_len);
    add_result(name, shp, err, det, ok);
    printf("%-28s %-58s err %.2e det %d %s\n", name, shp, err, det, ok ? "ok" : "FAIL");
done:
    for (int i = 0; i < n; i++) OPS.dev_free(ST, dk[i]), OPS.dev_free(ST, dv[i]), free(kf[i]), free(vf[i]);
    OPS.dev_free(ST, dq), OPS.dev_free(ST, dout), OPS.dev_free(ST, dsinks), OPS.dev_free(ST, dslopes);
    free(e), free(dk), free(dv), free(kf), free(vf), free(len), free(h1), free(q), free(pois), free(w), free(out[0]), free(out[1]);
}

/* Eager batches that rewrite every one of the runtime's pinned table slots (16) twice. */
#define SLOT_ROUNDS 40
/* The kernel nodes of graph g (-1 when it cannot be read); *all (unless NULL): its nodes of any kind. */
static int graph_kernels(cudaGraph_t g, size_t *all) {
    size_t n = 0;
    int    k = 0;
    if (cudaGraphGetNodes(g, NULL, &n) != cudaSuccess) return -1;
    if (all) *all = n;
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)xmalloc((n ? n : 1) * sizeof *nodes);
    if (cudaGraphGetNodes(g, nodes, &n) != cudaSuccess) k = -1;
    for (size_t i = 0; i < n && k >= 0; i++) {
        enum cudaGraphNodeType t;
        if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) k = -1;
        else k += t == cudaGraphNodeTypeKernel;
    }
    free(nodes);
    return k;
}

/* A batch (lengths given by the host) on a stream being captured into a CUDA graph: one launch,
   its table in device memory of its own, so the graph holds one node, a kernel, and its replay
   gives the same batch's eager outputs bit for bit, also after eager batches have rewritten every
   one of the runtime's table slots. */
static void test_batch_capture(void) {
    const int       lens[3] = {100, 5000, 300}, n = 3;
    const size_t    qrow = 32 * 128;
    neo__attn_args  e[3], e2[3];
    float          *q = (float *)xmalloc(n * qrow * 4), *ref = (float *)xmalloc(n * qrow * 4), *got = (float *)xmalloc(n * qrow * 4);
    float          *dq = (float *)dalloc(n * qrow * 4), *dout = (float *)dalloc(n * qrow * 4), *dout2 = (float *)dalloc(n * qrow * 4);
    cudaStream_t    cs = NULL;
    cudaGraph_t     g = NULL;
    cudaGraphExec_t ge = NULL;
    void           *st2 = NULL;
    int             s = -1, ok, nk = -1;
    size_t          nn = 0;
    for (size_t i = 0; i < n * qrow; i++) q[i] = rng_normal();
    up(dq, q, n * qrow * 4);
    for (int i = 0; i < n; i++) {
        const size_t ne = (size_t)8 * lens[i] * 128;
        uint16_t    *raw = (uint16_t *)xmalloc(ne * 2);
        for (size_t x = 0; x < ne; x++) raw[x] = to_f16(rng_normal());
        memset(&e[i], 0, sizeof e[i]);
        e[i].k = dalloc(ne * 2), e[i].v = dalloc(ne * 2);
        up((void *)e[i].k, raw, ne * 2), up((void *)e[i].v, raw, ne * 2);
        free(raw);
        e[i].kv_cells = lens[i], e[i].h1 = 8, e[i].c1 = lens[i], e[i].q = dq + i * qrow, e[i].n_tokens = 1, e[i].pos0 = lens[i] - 1;
        e[i].out = dout + i * qrow, e[i].n_head = 32, e[i].n_head_kv = 8, e[i].head_dim = e[i].head_dim_v = 128;
        e[i].kv_type = NEO_TYPE_F16, e[i].scale = 0.088f;
        e2[i] = e[i], e2[i].out = dout2 + i * qrow; /* the same batch into other outputs, to rewrite the slots */
    }
    const neo__attn_batch b = {e, n}, b2 = {e2, n};
    if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess && OPS.init(0, cs, &st2, NULL, 0) == NEO_OK) {
        s = neo__cu_test_attend_batch(st2, &b, NEO__STREAM_MAIN, -1, 0, 0) | OPS.stream_sync(st2, NEO__STREAM_MAIN);
        down(ref, dout, n * qrow * 4);
        if (s == NEO_OK && cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed) == cudaSuccess) {
            s = neo__cu_test_attend_batch(st2, &b, NEO__STREAM_MAIN, -1, 0, 0);
            if (cudaStreamEndCapture(cs, &g) != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) s = -2;
            else nk = graph_kernels(g, &nn);
        }
        for (int r = 0; r < SLOT_ROUNDS && s == NEO_OK; r++)
            s = neo__cu_test_attend_batch(st2, &b2, NEO__STREAM_MAIN, -1, 0, 0);
    }
    fill_poison(got, n * qrow);
    up(dout, got, n * qrow * 4);
    if (s == NEO_OK && (cudaGraphLaunch(ge, cs) != cudaSuccess || cudaStreamSynchronize(cs) != cudaSuccess)) s = -3;
    down(got, dout, n * qrow * 4);
    ok = s == NEO_OK && nk == 1 && nn == 1 && !memcmp(got, ref, n * qrow * 4);
    CHECK(ok, "batch under capture: status %d, kernels in the graph %d, replay equals the eager batch %d", s, nk,
          s == NEO_OK && !memcmp(got, ref, n * qrow * 4));
    add_result("batch under capture", "3 entries: one kernel, replayed = eager batch", -1, -1, ok);
    printf("%-28s %-58s %s\n", "batch under capture", "3 entries: one kernel, replayed = eager batch", ok ? "ok" : "FAIL");
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    if (st2) OPS.release(st2);
    if (cs) cudaStreamDestroy(cs);
    (void)cudaGetLastError();
    for (int i = 0; i < n; i++) OPS.dev_free(ST, (void *)e[i].k), OPS.dev_free(ST, (void *)e[i].v);
    OPS.dev_free(ST, dq), OPS.dev_free(ST, dout), OPS.dev_free(ST, dout2);
    free(q), free(ref), free(got);
}

/* One entry of test_append_batch: its layer's shape and where its token goes. h2 >= 0: heads
   from h2 on in pinned host memory (0: all, no first destination); row0 >= 0 with len0 >= 0:
   len[0] = row0 + T stored; row0 = -1: the row at len[0] = len0. */
typedef struct abcase {
    int type, d, dv, nkv, kv_cells, h2, row0, T, len0;
} abcase;
typedef struct abstate {
    abcase           c;
    size_t           es, ke, ve, ke2, ve2;
    void            *dk, *dv, *dsk, *dsv;
    unsigned char   *pk, *pv;
    int             *dlen;
    float           *sk, *sv;
    neo__append_args a;
} abstate;
static void ab_setup(abstate *e, const abcase *c) {
    const int nst = (c->h2 >= 0 ? c->h2 : c->nkv), nst2 = c->h2 >= 0 ? c->nkv - c->h2 : 0;
    memset(e, 0, sizeof *e);
    e->c = *c, e->es = tsize(c->type);
    e->ke = (size_t)nst * c->kv_cells * c->d, e->ve = (size_t)nst * c->kv_cells * c->dv;
    e->ke2 = (size_t)nst2 * c->kv_cells * c->d, e->ve2 = (size_t)nst2 * c->kv_cells * c->dv;
    e->sk = (float *)xmalloc((size_t)c->T * c->nkv * c->d * 4), e->sv = (float *)xmalloc((size_t)c->T * c->nkv * c->dv * 4);
    for (size_t i = 0; i < (size_t)c->T * c->nkv * c->d; i++) e->sk[i] = rng_normal();
    for (size_t i = 0; i < (size_t)c->T * c->nkv * c->dv; i++) e->sv[i] = rng_normal() * (rng_uni() < 0.1 ? 7e4f : 1.0f);
    e->dsk = dalloc((size_t)c->T * c->nkv * c->d * 4), e->dsv = dalloc((size_t)c->T * c->nkv * c->dv * 4);
    up(e->dsk, e->sk, (size_t)c->T * c->nkv * c->d * 4), up(e->dsv, e->sv, (size_t)c->T * c->nkv * c->dv * 4);
    if (nst) e->dk = dalloc(e->ke * e->es), e->dv = dalloc(e->ve * e->es);
    if (nst2 && (OPS.host_alloc(ST, (void **)&e->pk, e->ke2 * e->es) != NEO_OK || OPS.host_alloc(ST, (void **)&e->pv, e->ve2 * e->es) != NEO_OK)) {
        fprintf(stderr, "host_alloc failed\n");
        exit(2);
    }
    if (c->len0 >= 0) e->dlen = (int *)dalloc(3 * sizeof(int));
    neo__append_args *a = &e->a;
    memset(a, 0, sizeof *a);
    a->k = e->dk, a->v = e->dv, a->k2 = e->pk, a->v2 = e->pv, a->h2 = c->h2 >= 0 ? c->h2 : 0, a->kv_cells = c->kv_cells;
    a->h1 = c->nkv, a->row0 = c->row0, a->src_k = (const float *)e->dsk, a->src_v = (const float *)e->dsv, a->n_tokens = c->T;
    a->n_head_kv = c->nkv, a->head_dim = c->d, a->head_dim_v = c->dv, a->kv_type = c->type, a->len = e->dlen;
}
/* Caches back to the 0xff fill, len to {len0, 0, 0}. */
static void ab_reset(abstate *e) {
    unsigned char *f = (unsigned char *)xmalloc(e->ke * e->es + e->ve * e->es + 1);
    memset(f, 0xff, e->ke * e->es + e->ve * e->es);
    if (e->dk) up(e->dk, f, e->ke * e->es), up(e->dv, f, e->ve * e->es);
    if (e->pk) memset(e->pk, 0xff, e->ke2 * e->es), memset(e->pv, 0xff, e->ve2 * e->es);
    if (e->dlen) {
        const int l[3] = {e->c.len0, 0, 0};
        up(e->dlen, l, sizeof l);
    }
    free(f);
}
/* Wrong elements and lengths after k appends of its token (k = 1 eager, or replays): the token's
   rows at rows r .. r + k - 1 that fit (r = row0, or len0), every other element the fill. */
static long ab_wrong(abstate *e, int k) {
    const abcase *c = &e->c;
    const int     nst = (c->h2 >= 0 ? c->h2 : c->nkv), r = c->row0 >= 0 ? c->row0 : c->len0;
    const int     fit = c->row0 >= 0 ? k : (c->kv_cells - r) / c->T < k ? (c->kv_cells - r) / c->T : k, rows = fit * c->T;
    float        *rk = (float *)xmalloc((size_t)(rows + 1) * c->nkv * c->d * 4), *rv = (float *)xmalloc((size_t)(rows + 1) * c->nkv * c->dv * 4);
    for (int i = 0; i < fit; i++) { /* replay i's token rows after the previous ones */
        memcpy(rk + (size_t)i * c->T * c->nkv * c->d, e->sk, (size_t)c->T * c->nkv * c->d * 4);
        memcpy(rv + (size_t)i * c->T * c->nkv * c->dv, e->sv, (size_t)c->T * c->nkv * c->dv * 4);
    }
    unsigned char *hk = (unsigned char *)xmalloc(e->ke * e->es + 1), *hv = (unsigned char *)xmalloc(e->ve * e->es + 1);
    long           bad = 0;
    if (e->dk) {
        down(hk, e->dk, e->ke * e->es), down(hv, e->dv, e->ve * e->es);
        bad += append_wrong(hk, c->type, c->d, 0, nst, c->kv_cells, 0, nst, r, rows, rk, c->nkv) +
               append_wrong(hv, c->type, c->dv, 0, nst, c->kv_cells, 0, nst, r, rows, rv, c->nkv);
    }
    if (e->pk)
        bad += append_wrong(e->pk, c->type, c->d, c->h2, c->nkv - c->h2, c->kv_cells, c->h2, c->nkv, r, rows, rk, c->nkv) +
               append_wrong(e->pv, c->type, c->dv, c->h2, c->nkv - c->h2, c->kv_cells, c->h2, c->nkv, r, rows, rv, c->nkv);
    if (e->dlen) {
        int l[3];
        down(l, e->dlen, sizeof l);
        const int want0 = c->row0 >= 0 ? c->row0 + c->T : r + rows, want1 = c->row0 < 0 && fit < k;
        bad += (l[0] != want0) + (l[1] != want1) + (l[2] != 0);
    }
    free(rk), free(rv), free(hk), free(hv);
    return bad;
}
static void ab_free(abstate *e) {
    OPS.dev_free(ST, e->dk), OPS.dev_free(ST, e->dv), OPS.dev_free(ST, e->dsk), OPS.dev_free(ST, e->dsv), OPS.dev_free(ST, e->dlen);
    OPS.host_free(ST, e->pk), OPS.host_free(ST, e->pv);
    free(e->sk), free(e->sv);
}

/* append_batch: the appends of many layers in one launch, each entry's rows as its own append's
   (bit for bit, the host's rounding), on its own stream's runtime. Eager: f16 / bf16 / f32, head
   dims 16..128 and odd, a split layer (heads from h2 in pinned memory), one with every head
   pinned, rows given with and without len, rows at len[0], one that does not fit (nothing
   written, the full flag), one of 3 tokens. Captured (the entries at len[0]):
   one node, a kernel, replayed 3 times after eager batches have rewritten every one of the
   runtime's table slots, each replay's rows after the last, until the one that does not fit. */
static void test_append_batch(void) {
    static const abcase cs[] = {
        {NEO_TYPE_F16, 64, 64, 4, 16, -1, 5, 1, -1},     {NEO_TYPE_BF16, 128, 64, 4, 16, 3, 0, 3, 0},
        {NEO_TYPE_F32, 32, 32, 2, 16, 0, -1, 1, 7},      {NEO_TYPE_F16, 64, 64, 8, 16, -1, -1, 1, 16},
        {NEO_TYPE_BF16, 16, 16, 1, 16, -1, -1, 1, 14},   {NEO_TYPE_F16, 128, 128, 8, 40, 6, -1, 1, 3},
        {NEO_TYPE_F32, 7, 9, 3, 10, 1, -1, 1, 0},
    };
    enum { N = sizeof cs / sizeof *cs };
    abstate          e[N];
    neo__append_args a[N], g[N];
    cudaStream_t     st = NULL;
    cudaGraph_t      gr = NULL;
    cudaGraphExec_t  ge = NULL;
    void            *st2 = NULL;
    neo__dev_attn    t;
    long             bad_e = 0, bad_g = 0;
    int              s = -1, nk = -1, ng = 0;
    size_t           nn = 0;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < N; i++) ab_setup(&e[i], &cs[i]), a[i] = e[i].a;
    if (neo__cuda_get_attn(NEO__DEV_ATTN_ABI, &t) == NEO_OK && t.append_batch &&
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess && OPS.init(0, st, &st2, NULL, 0) == NEO_OK) {
        for (int i = 0; i < N; i++) ab_reset(&e[i]);
        s = t.append_batch(st2, a, N, NEO__STREAM_MAIN) | OPS.stream_sync(st2, NEO__STREAM_MAIN);
        for (int i = 0; i < N; i++) bad_e += ab_wrong(&e[i], 1);
        /* captured: the entries that read len[0] */
        for (int i = 0; i < N; i++)
            if (cs[i].row0 < 0) g[ng++] = e[i].a;
        for (int i = 0; i < N; i++) ab_reset(&e[i]);
        if (s == NEO_OK && cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
            s = t.append_batch(st2, g, ng, NEO__STREAM_MAIN);
            if (cudaStreamEndCapture(st, &gr) != cudaSuccess || cudaGraphInstantiate(&ge, gr, 0) != cudaSuccess) s = -2;
            else nk = graph_kernels(gr, &nn);
        }
        /* entries 0 and 1: rows given (1 also stores its len; neither is checked after this) */
        for (int r = 0; r < SLOT_ROUNDS && s == NEO_OK; r++) s = t.append_batch(st2, a, 2, NEO__STREAM_MAIN);
        for (int r = 0; r < 3 && s == NEO_OK; r++)
            if (cudaGraphLaunch(ge, st) != cudaSuccess || cudaStreamSynchronize(st) != cudaSuccess) s = -3;
        for (int i = 0; i < N && s == NEO_OK; i++)
            if (cs[i].row0 < 0) bad_g += ab_wrong(&e[i], 3);
    }
    const int ok = s == NEO_OK && nk == 1 && nn == 1 && bad_e == 0 && bad_g == 0;
    CHECK(ok, "append batch: status %d, kernels in the graph %d, wrong: eager %ld, replays %ld", s, nk, bad_e, bad_g);
    add_result("append batch", "7 layers, f16/bf16/f32, split/pinned, row/len/full, replays", -1, -1, ok);
    printf("%-28s %-58s %s\n", "append batch", "7 layers, f16/bf16/f32, split/pinned, row/len/full, replays", ok ? "ok" : "FAIL");
    if (ge) cudaGraphExecDestroy(ge);
    if (gr) cudaGraphDestroy(gr);
    if (st2) OPS.release(st2);
    if (st) cudaStreamDestroy(st);
    (void)cudaGetLastError();
    for (int i = 0; i < N; i++) ab_free(&e[i]);
}

/* =============================================================================================
   device-side lengths: calls captured into a CUDA graph and replayed
   ============================================================================================= */
/* A layer's cache of n_ctx rows, filled eagerly to L0 (append with row0 and len), then one
   append (row0 = -1) + one attend (len set, c1 = n_ctx) of T tokens captured and replayed k
   times, fresh K/V rows and queries before each replay, outputs poisoned; kernel / shape force
   the attend's plan (neo__cu_test_attend), -1 = the planner's. */
typedef struct gcase {
    const char *name;
    int         type, n_head, n_kv, d, dv, T;
    int         n_ctx, L0, k;
    int         kernel, shape;
    float       softcap, alibi;
    int         sinks;
} gcase;

/* One case's buffers. The device caches hold n_kv + 1 heads of n_ctx rows, the last a guard
   that no call may touch; kraw / vraw mirror them byte for byte, kf / vf widened. */
typedef struct gstate {
    const gcase   *c;
    void          *st;
    cudaStream_t   cs;
    size_t         es, kh, vh; /* element bytes; elements of one K head, one V head */
    unsigned char *kraw, *vraw;
    float         *kf, *vf, *srck, *srcv, *q, *out, *pois, sinks[256], slopes[256];
    void          *dk, *dv;
    float         *dsrck, *dsrcv, *dq, *dout, *dsinks, *dslopes;
    int           *dlen;
    int            len, full; /* what len[0], len[1] must hold */
} gstate;

static neo__attn_args g_attn(const gstate *g, int c1, int pos0, const int *len) {
    const gcase   *c = g->c;
    neo__attn_args a;
    memset(&a, 0, sizeof a);
    a.k = g->dk, a.v = g->dv, a.kv_cells = c->n_ctx, a.h1 = c->n_kv, a.c1 = c1, a.q = g->dq, a.n_tokens = c->T, a.pos0 = pos0;
    a.out = g->dout, a.sinks = c->sinks ? g->dsinks : NULL, a.slopes = c->alibi > 0 ? g->dslopes : NULL;
    a.n_head = c->n_head, a.n_head_kv = c->n_kv, a.head_dim = c->d, a.head_dim_v = c->dv, a.kv_type = c->type;
    a.scale = 1.0f / sqrtf((float)c->d), a.softcap = c->softcap, a.len = len;
    return a;
}
static neo__append_args g_append(const gstate *g, int row0, int n) {
    const gcase     *c = g->c;
    neo__append_args a;
    memset(&a, 0, sizeof a);
    a.k = g->dk, a.v = g->dv, a.kv_cells = c->n_ctx, a.h1 = c->n_kv, a.row0 = row0, a.src_k = g->dsrck, a.src_v = g->dsrcv;
    a.n_tokens = n, a.n_head_kv = c->n_kv, a.head_dim = c->d, a.head_dim_v = c->dv, a.kv_type = c->type, a.len = g->dlen;
    return a;
}
/* n tokens of fresh K/V rows and T tokens of fresh queries, uploaded; the outputs poisoned */
static void g_fresh(gstate *g, int n) {
    const gcase *c = g->c;
    fill_normal(g->srck, (size_t)n * c->n_kv * c->d), fill_normal(g->srcv, (size_t)n * c->n_kv * c->dv);
    for (size_t i = 0; i < (size_t)c->T * c->n_head * c->d; i++) g->q[i] = 1.5f * rng_normal();
    up(g->dsrck, g->srck, (size_t)n * c->n_kv * c->d * 4), up(g->dsrcv, g->srcv, (size_t)n * c->n_kv * c->dv * 4);
    up(g->dq, g->q, (size_t)c->T * c->n_head * c->d * 4);
    up(g->dout, g->pois, (size_t)c->T * c->n_head * c->dv * 4);
}
/* the host mirror of n rows from g->srck / srcv written at row0 */
static void g_mirror(gstate *g, int row0, int n) {
    const gcase *c = g->c;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < c->n_kv; h++) {
            const size_t kb = h * g->kh + (size_t)(row0 + t) * c->d, vb = h * g->vh + (size_t)(row0 + t) * c->dv;
            for (int j = 0; j < c->d; j++) g->kf[kb + j] = store_t(g->kraw, kb + j, c->type, g->srck[((size_t)t * c->n_kv + h) * c->d + j]);
            for (int j = 0; j < c->dv; j++) g->vf[vb + j] = store_t(g->vraw, vb + j, c->type, g->srcv[((size_t)t * c->n_kv + h) * c->dv + j]);
        }
}
/* out (downloaded into g->out) against float64 at length L over the cells from c0 on: token t at
   position L - T + t sees cells [c0, L - T + t] (none: out = 0); the relative L2 error, inf when
   an output is not finite */
static double g_err_from(gstate *g, int c0, int L) {
    const gcase *c = g->c;
    const int    G = c->n_head / c->n_kv;
    double       num = 0, den = 0, *w = (double *)xmalloc((size_t)L * 8), *acc = (double *)xmalloc((size_t)c->dv * 8);
    down(g->out, g->dout, (size_t)c->T * c->n_head * c->dv * 4);
    for (int t = 0; t < c->T; t++)
        for (int h = 0; h < c->n_head; h++) {
            const int    pos = L - c->T + t, hs = h / G;
            const float *qh = g->q + ((size_t)t * c->n_head + h) * c->d, *o = g->out + ((size_t)t * c->n_head + h) * c->dv;
            double       M = c->sinks ? (double)g->sinks[h] : -INFINITY, l;
            for (int x = c0; x <= pos; x++) {
                double dot = 0;
                for (int j = 0; j < c->d; j++) dot += (double)qh[j] * (double)g->kf[hs * g->kh + (size_t)x * c->d + j];
                double v = (double)(1.0f / sqrtf((float)c->d)) * dot;
                if (c->softcap > 0) v = (double)c->softcap * tanh(v / (double)c->softcap);
                if (c->alibi > 0) v -= (double)g->slopes[h] * (double)(pos - x);
                w[x] = v;
                M = v > M ? v : M;
            }
            l = c->sinks ? exp((double)g->sinks[h] - M) : 0.0;
            for (int j = 0; j < c->dv; j++) acc[j] = 0;
            for (int x = c0; x <= pos; x++) {
                const double p = exp(w[x] - M);
                l += p;
                for (int j = 0; j < c->dv; j++) acc[j] += p * (double)g->vf[hs * g->vh + (size_t)x * c->dv + j];
            }
            for (int j = 0; j < c->dv; j++) {
                const double r = l > 0 ? acc[j] / l : 0.0;
                if (!isfinite(o[j])) num = INFINITY;
                num += (o[j] - r) * (o[j] - r);
                den += r * r;
            }
        }
    free(w), free(acc);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static double g_err(gstate *g, int L) { return g_err_from(g, 0, L); }
/* 1 when the device's len[3] holds what the host expects (the append's count back at 0) */
static int g_len_ok(gstate *g) {
    int dl[3] = {-7, -7, -7};
    down(dl, g->dlen, sizeof dl);
    const int ok = dl[0] == g->len && dl[1] == g->full && dl[2] == 0;
    CHECK(ok, "graph %s: len = {%d, %d, %d}, want {%d, %d, 0}", g->c->name, dl[0], dl[1], dl[2], g->len, g->full);
    return ok;
}

static void g_setup(gstate *g, const gcase *c) {
    memset(g, 0, sizeof *g);
    g->c = c;
    g->es = tsize(c->type), g->kh = (size_t)c->n_ctx * c->d, g->vh = (size_t)c->n_ctx * c->dv;
    const size_t ke = (size_t)(c->n_kv + 1) * g->kh, ve = (size_t)(c->n_kv + 1) * g->vh, nsrc = (size_t)(c->L0 > c->T ? c->L0 : c->T);
    const size_t qe = (size_t)c->T * c->n_head * c->d, oe = (size_t)c->T * c->n_head * c->dv;
    g->kraw = (unsigned char *)xmalloc(ke * g->es), g->vraw = (unsigned char *)xmalloc(ve * g->es);
    g->kf = (float *)xmalloc(ke * 4), g->vf = (float *)xmalloc(ve * 4);
    for (size_t i = 0; i < ke; i++) poison_t(g->kraw, i, c->type), g->kf[i] = NAN;
    for (size_t i = 0; i < ve; i++) poison_t(g->vraw, i, c->type), g->vf[i] = NAN;
    g->srck = (float *)xmalloc(nsrc * c->n_kv * c->d * 4), g->srcv = (float *)xmalloc(nsrc * c->n_kv * c->dv * 4);
    g->q = (float *)xmalloc(qe * 4), g->out = (float *)xmalloc(oe * 4), g->pois = (float *)xmalloc(oe * 4);
    fill_poison(g->pois, oe);
    for (int h = 0; h < c->n_head && h < 256; h++) g->sinks[h] = 2.0f * rng_normal(), g->slopes[h] = alibi_slope(h, c->n_head, c->alibi);
    g->dk = dalloc(ke * g->es), g->dv = dalloc(ve * g->es);
    g->dsrck = (float *)dalloc(nsrc * c->n_kv * c->d * 4), g->dsrcv = (float *)dalloc(nsrc * c->n_kv * c->dv * 4);
    g->dq = (float *)dalloc(qe * 4), g->dout = (float *)dalloc(oe * 4), g->dlen = (int *)dalloc(3 * sizeof(int));
    g->dsinks = (float *)dalloc(sizeof g->sinks), g->dslopes = (float *)dalloc(sizeof g->slopes);
    up(g->dk, g->kraw, ke * g->es), up(g->dv, g->vraw, ve * g->es);
    up(g->dsinks, g->sinks, sizeof g->sinks), up(g->dslopes, g->slopes, sizeof g->slopes);
    if (cudaStreamCreateWithFlags(&g->cs, cudaStreamNonBlocking) != cudaSuccess || OPS.init(0, g->cs, &g->st, NULL, 0) != NEO_OK) {
        fprintf(stderr, "graph %s: stream or runtime init failed\n", c->name);
        exit(2);
    }
}
static void g_free(gstate *g) {
    wide_alone(g->st);
    OPS.release(g->st);
    cudaStreamDestroy(g->cs);
    void *d[] = {g->dk, g->dv, g->dsrck, g->dsrcv, g->dq, g->dout, g->dlen, g->dsinks, g->dslopes};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) OPS.dev_free(ST, d[i]);
    free(g->kraw), free(g->vraw), free(g->kf), free(g->vf), free(g->srck), free(g->srcv), free(g->q), free(g->out), free(g->pois);
}

/* Eager calls with len set: the fill to L0 (append with row0 = 0 stores len[0] = L0), then an
   attend with len (c1 = n_ctx, pos0 left wrong on purpose: it must not be read) against float64
   and against the eager attend of [0, L0): within the tolerance under the plan's own split
   count, bitwise with one split forced, and with two when both ranges hold enough cells for two.
   Returns 0 when the forced plan cannot serve the case (*skip), else the worst error. */
static double g_eager(gstate *g, int *ok, int *bits, int *skip) {
    const gcase *c = g->c;
    double       worst = 0;
    int          s = OPS.set_length(g->st, g->dlen, 0, NEO__STREAM_MAIN);
    g_fresh(g, c->L0);
    neo__append_args ap = g_append(g, 0, c->L0);
    s |= OPS.append(g->st, &ap, NEO__STREAM_MAIN) | OPS.stream_sync(g->st, NEO__STREAM_MAIN);
    g_mirror(g, 0, c->L0);
    g->len = c->L0;
    *ok = s == NEO_OK && g_len_ok(g);
    *bits = 1;
    CHECK(s == NEO_OK, "graph %s: eager fill status %d", c->name, s);
    const int ms[3] = {0, 1, 2};
    for (int i = 0; i < (c->L0 >= 400 ? 3 : 2); i++) {
        const neo__attn_args al = g_attn(g, c->n_ctx, -12345, g->dlen), ae = g_attn(g, c->L0, c->L0 - c->T, NULL);
        float *o1 = (float *)xmalloc((size_t)c->T * c->n_head * c->dv * 4);
        up(g->dout, g->pois, (size_t)c->T * c->n_head * c->dv * 4);
        s = neo__cu_test_attend(g->st, &al, NEO__STREAM_MAIN, c->kernel, c->shape, ms[i]);
        if (s == NEO_ERR_UNSUPPORTED && i == 0) {
            *skip = 1;
            free(o1);
            return 0;
        }
        s |= OPS.stream_sync(g->st, NEO__STREAM_MAIN);
        const double e1 = g_err(g, c->L0);
        memcpy(o1, g->out, (size_t)c->T * c->n_head * c->dv * 4);
        /* the length read early as another (none, shorter, the next chunk's, past the bound, the
           previous step's): the tiles it placed are requested again where they do not fit, and
           the bits stay */
        const int hints[5] = {-(1 << 30), -c->L0 / 2, 16 * 16 + 1, c->n_ctx, -c->T};
        for (int h = 0; h < 5; h++) {
            up(g->dout, g->pois, (size_t)c->T * c->n_head * c->dv * 4);
            s |= neo__cu_test_hint(g->st, hints[h]) | neo__cu_test_attend(g->st, &al, NEO__STREAM_MAIN, c->kernel, c->shape, ms[i]);
            s |= neo__cu_test_hint(g->st, 0) | OPS.stream_sync(g->st, NEO__STREAM_MAIN);
            down(g->out, g->dout, (size_t)c->T * c->n_head * c->dv * 4);
            const int hs = !memcmp(o1, g->out, (size_t)c->T * c->n_head * c->dv * 4);
            *bits &= hs;
            CHECK(hs, "graph %s: max_splits %d: the length read early as %+d cells off changed the bits", c->name, ms[i], hints[h]);
        }
        up(g->dout, g->pois, (size_t)c->T * c->n_head * c->dv * 4);
        s |= neo__cu_test_attend(g->st, &ae, NEO__STREAM_MAIN, c->kernel, c->shape, ms[i]) | OPS.stream_sync(g->st, NEO__STREAM_MAIN);
        const double e2 = g_err(g, c->L0);
        const int    same = !memcmp(o1, g->out, (size_t)c->T * c->n_head * c->dv * 4);
        worst = e1 > worst ? e1 : worst;
        *ok &= s == NEO_OK && e1 < ATT_TOL && e2 < ATT_TOL;
        if (ms[i]) *bits &= same;
        CHECK(s == NEO_OK && e1 < ATT_TOL && e2 < ATT_TOL, "graph %s: eager max_splits %d: status %d, err len %.3g, c1 %.3g", c->name, ms[i], s, e1, e2);
        CHECK(!ms[i] || same, "graph %s: eager attend with len differs from c1 = len, %d split(s) forced", c->name, ms[i]);
        free(o1);
    }
    return worst;
}

/* One replay of ge: fresh rows and queries, the host's model of the append (rows at len, or
   nothing and the full flag), the device's len and the output against float64. */
static double g_replay(gstate *g, cudaGraphExec_t ge, int *ok) {
    const gcase *c = g->c;
    g_fresh(g, c->T);
    const int s = cudaGraphLaunch(ge, g->cs) == cudaSuccess && cudaStreamSynchronize(g->cs) == cudaSuccess;
    CHECK(s, "graph %s: replay failed", c->name);
    if (g->len + c->T <= c->n_ctx) {
        g_mirror(g, g->len, c->T);
        g->len += c->T;
    } else g->full = 1;
    const double e = g_err(g, g->len);
    *ok &= s && g_len_ok(g) && e < ATT_TOL;
    CHECK(e < ATT_TOL, "graph %s: replay at length %d: err %.3g", c->name, g->len, e);
    return e;
}

/* An eager prefill attend of 1024 tokens on the graph's stream under the generic kernel, whose
   split partials (each split [1024 G][dv + 2] floats a KV head, megabytes) outgrow the stream's
   buffer, which a decode plan sizes below that: the graph's buffer must stay alive (retired, not
   freed) for later replays, which compute-sanitizer's memcheck would otherwise see use freed
   memory. */
static int g_grow_work(gstate *g) {
    const gcase   *c = g->c;
    const int      T = 1024;
    const size_t   qe = (size_t)T * c->n_head * c->d, oe = (size_t)T * c->n_head * c->dv;
    float         *q0 = (float *)xmalloc(qe * 4), *dq2 = (float *)dalloc(qe * 4), *dout2 = (float *)dalloc(oe * 4);
    neo__attn_args a = g_attn(g, g->len, g->len - 1, NULL);
    memset(q0, 0, qe * 4);
    up(dq2, q0, qe * 4);
    a.q = dq2, a.out = dout2, a.n_tokens = T;
    const int s = neo__cu_test_attend(g->st, &a, NEO__STREAM_MAIN, 2, -1, 0) | OPS.stream_sync(g->st, NEO__STREAM_MAIN);
    CHECK(s == NEO_OK, "graph %s: eager prefill between replays: status %d", c->name, s);
    OPS.dev_free(ST, dq2), OPS.dev_free(ST, dout2);
    free(q0);
    return s == NEO_OK;
}

/* The captured append + attend replayed k times (past n_ctx when L0 + k T passes it: then no
   row is written, len[1] = 1, and the attend still sees the n_ctx cells), then an eager prefill
   that grows the stream's partial buffer (g_grow_work), a captured set_length truncating to
   about half, and one more replay over the shorter cache and its new row; the whole caches, the
   guard head included, equal the host's mirror at the end. */
static double g_graphs(gstate *g, int *ok) {
    const gcase     *c = g->c;
    cudaGraph_t      gr = NULL, gr2 = NULL;
    cudaGraphExec_t  ge = NULL, ge2 = NULL;
    double           worst = 0;
    neo__append_args ap = g_append(g, -1, c->T);
    neo__attn_args   al = g_attn(g, c->n_ctx, -12345, g->dlen);
    int              s = cudaStreamBeginCapture(g->cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess ? NEO_OK : -1;
    const int        cap = OPS.capturing(g->st, NEO__STREAM_MAIN, NULL), cap2 = OPS.capturing(g->st, NEO__STREAM_COPY, NULL);
    s |= OPS.append(g->st, &ap, NEO__STREAM_MAIN) | neo__cu_test_attend(g->st, &al, NEO__STREAM_MAIN, c->kernel, c->shape, 0);
    if (cudaStreamEndCapture(g->cs, &gr) != cudaSuccess || cudaGraphInstantiate(&ge, gr, 0) != cudaSuccess) s |= -1;
    *ok = s == NEO_OK && cap == 1 && cap2 == 0 && OPS.capturing(g->st, NEO__STREAM_MAIN, NULL) == 0;
    CHECK(*ok, "graph %s: capture: status %d, capturing %d / %d (MAIN / COPY)", c->name, s, cap, cap2);
    for (int i = 0; i < c->k && *ok; i++) {
        const double e = g_replay(g, ge, ok);
        worst = e > worst ? e : worst;
    }
    *ok &= g_grow_work(g);
    const int half = g->len / 2 > c->T ? g->len / 2 : c->T;
    s = cudaStreamBeginCapture(g->cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess ? NEO_OK : -1;
    s |= OPS.set_length(g->st, g->dlen, half - c->T, NEO__STREAM_MAIN);
    if (cudaStreamEndCapture(g->cs, &gr2) != cudaSuccess || cudaGraphInstantiate(&ge2, gr2, 0) != cudaSuccess) s |= -1;
    if (s == NEO_OK && cudaGraphLaunch(ge2, g->cs) == cudaSuccess && cudaStreamSynchronize(g->cs) == cudaSuccess) {
        g->len = half - c->T, g->full = 0;
        *ok &= g_len_ok(g);
        const double e = g_replay(g, ge, ok);
        worst = e > worst ? e : worst;
    } else *ok = 0;
    CHECK(s == NEO_OK, "graph %s: captured set_length: status %d", c->name, s);
    const size_t kb = (size_t)(c->n_kv + 1) * g->kh * g->es, vb = (size_t)(c->n_kv + 1) * g->vh * g->es;
    unsigned char *hk = (unsigned char *)xmalloc(kb), *hv = (unsigned char *)xmalloc(vb);
    down(hk, g->dk, kb), down(hv, g->dv, vb);
    const int same = !memcmp(hk, g->kraw, kb) && !memcmp(hv, g->vraw, vb);
    CHECK(same, "graph %s: the caches differ from the appends' rows (a row written past n_ctx or at a wrong length?)", c->name);
    *ok &= same;
    free(hk), free(hv);
    if (ge) cudaGraphExecDestroy(ge);
    if (ge2) cudaGraphExecDestroy(ge2);
    if (gr) cudaGraphDestroy(gr);
    if (gr2) cudaGraphDestroy(gr2);
    (void)cudaGetLastError();
    return worst;
}

/* The hybrid's device part in a graph (cut_share with len): the cells from the cut of the length
   the attend reads, floor(fma(share, L, 0.5)) as the host's listener cuts, finished into out
   against float64 over [cut, L); and into a state, merged (merge) with an eager state of
   [0, cut) (an empty one when the cut is 0, as the listener answers), against float64 over
   [0, L). Shares put the cut at 0, at L, on a tie (L share = k + 1/2: the half goes up) and
   inside; the case's plan with the planner's split count and with one and two splits. */
static double g_cut(gstate *g, int *ok) {
    const gcase *c = g->c;
    const int    L = g->len, tz = __builtin_ctz((unsigned)L);
    const float  shares[4] = {0.4f / (float)L, 1.0f - 0.4f / (float)L, ldexpf(1.0f, -(tz + 1)), 0.3f};
    const size_t sn = (size_t)c->T * c->n_head * (c->dv + 2), on = (size_t)c->T * c->n_head * c->dv;
    float       *dst = (float *)dalloc(2 * sn * 4), *hst = (float *)xmalloc(sn * 4);
    double       worst = 0;
    for (int si = 0; si < 4; si++)
        for (int ms = 0; ms < 3; ms++) {
            const double cd = floor(fma((double)shares[si], (double)L, 0.5));
            const int    cut = cd > (double)L ? L : (int)cd;
            neo__attn_args a = g_attn(g, c->n_ctx, -12345, g->dlen), e = g_attn(g, cut, L - c->T, NULL);
            neo__merge_args m;
            a.cut_share = shares[si];
            up(g->dout, g->pois, on * 4);
            int s = neo__cu_test_attend(g->st, &a, NEO__STREAM_MAIN, c->kernel, c->shape, ms) | OPS.stream_sync(g->st, NEO__STREAM_MAIN);
            const double e1 = g_err_from(g, cut, L);
            a.out = NULL, a.state = dst + sn; /* the device's part */
            e.out = NULL, e.state = dst;      /* the CPU's */
            for (size_t i = 0; i < sn; i++) hst[i] = i % (size_t)(c->dv + 2) ? 0.0f : -INFINITY;
            up(dst, hst, sn * 4), up(g->dout, g->pois, on * 4);
            s |= neo__cu_test_attend(g->st, &a, NEO__STREAM_MAIN, c->kernel, c->shape, ms);
            if (cut > 0) s |= neo__cu_test_attend(g->st, &e, NEO__STREAM_MAIN, c->kernel, c->shape, ms);
            memset(&m, 0, sizeof m);
            m.a = dst, m.b = dst + sn, m.out = g->dout, m.sinks = c->sinks ? g->dsinks : NULL, m.h1 = c->n_head;
            m.n_tokens = c->T, m.n_head = c->n_head, m.head_dim_v = c->dv;
            s |= OPS.merge(g->st, &m, NEO__STREAM_MAIN) | OPS.stream_sync(g->st, NEO__STREAM_MAIN);
            const double e2 = g_err(g, L);
            *ok &= s == NEO_OK && e1 < ATT_TOL && e2 < ATT_TOL;
            CHECK(s == NEO_OK && e1 < ATT_TOL && e2 < ATT_TOL, "graph %s: cut at share %.6g of %d = %d, max_splits %d: status %d, "
                  "err from the cut %.3g, merged %.3g", c->name, (double)shares[si], L, cut, ms, s, e1, e2);
            worst = e1 > worst ? e1 : worst, worst = e2 > worst ? e2 : worst;
        }
    OPS.dev_free(ST, dst);
    free(hst);
    return worst;
}

static void test_graph_len(const gcase *c) {
    gstate g;
    int    ok = 0, bits = 0, skip = 0, ok2 = 0;
    char   shape[96], name[64];
    g_setup(&g, c);
    const double e1 = g_eager(&g, &ok, &bits, &skip);
    snprintf(shape, sizeof shape, "%-4s d%d/%d g%d kv%d t%d n_ctx %d L0 %d%s%s%s", tname(c->type), c->d, c->dv, c->n_head / c->n_kv,
             c->n_kv, c->T, c->n_ctx, c->L0, c->softcap > 0 ? " cap" : "", c->alibi > 0 ? " alibi" : "", c->sinks ? " sink" : "");
    if (skip) { /* the forced block shape does not fit this GPU */
        printf("graph %s: the forced plan does not fit this GPU\n", c->name);
        g_free(&g);
        return;
    }
    snprintf(name, sizeof name, "graph eager %s", c->name);
    add_result(name, shape, e1, bits, ok && bits);
    printf("%-28s %-58s err %.2e det %d %s\n", name, shape, e1, bits, ok && bits ? "ok" : "FAIL");
    int          okc = 1;
    const double ec = g_cut(&g, &okc);
    snprintf(name, sizeof name, "graph cut %s", c->name);
    snprintf(shape, sizeof shape, "%-4s d%d/%d t%d at %d: cut 0, %d, a tie, inside; merged", tname(c->type), c->d, c->dv, c->T, g.len,
             g.len);
    add_result(name, shape, ec, -1, okc);
    printf("%-28s %-58s err %.2e %s\n", name, shape, ec, okc ? "ok" : "FAIL");
    const double e2 = g_graphs(&g, &ok2);
    snprintf(name, sizeof name, "graph replay %s", c->name);
    snprintf(shape, sizeof shape, "%-4s d%d/%d t%d %d replays %d..%d of %d%s, set_length", tname(c->type), c->d, c->dv, c->T, c->k,
             c->L0, c->L0 + c->k * c->T, c->n_ctx, g.full ? " (full)" : "");
    add_result(name, shape, e2, -1, ok2);
    printf("%-28s %-58s err %.2e %s\n", name, shape, e2, ok2 ? "ok" : "FAIL");
    fflush(stdout);
    g_free(&g);
}

/* A batch with device-side lengths captured into a CUDA graph, as a decode step's: five entries
   in two launch groups (f16 head_dim 128 GQA 4 of 300, 6000 and 1000 cells; bf16 head_dim 64 GQA
   7 of 2000 and 64, softcap, ALiBi and sinks among them), their whole caches filled, captured
   once: the graph holds one kernel a group. Then replayed at lengths set on the device before
   each replay (1, the whole cache and lengths between), fresh queries, outputs poisoned: every
   entry against float64 at its length, and bit for bit the same batch run eagerly at those
   lengths (the same plan: the splits fixed at the caches' sizes), also with the lengths read
   early (before the kernel's wait, sm_90) moved. */
static void test_batch_graph(void) {
    enum { N = 5, R = 4 };
    static const gcase cs[N] = {
        {"bg0", F16, 32, 8, 128, 128, 1, 300, 300, 0, -1, -1, 0, 0, 1},     {"bg1", F16, 32, 8, 128, 128, 1, 6000, 6000, 0, -1, -1, 0, 0, 0},
        {"bg2", F16, 32, 8, 128, 128, 1, 1000, 1000, 0, -1, -1, 3.0f, 0, 0}, {"bg3", BF16, 14, 2, 64, 64, 1, 2000, 2000, 0, -1, -1, 0, 4.0f, 1},
        {"bg4", BF16, 14, 2, 64, 64, 1, 64, 64, 0, -1, -1, 0, 0, 0},
    };
    static const int lens[R][N] = {{300, 6000, 1000, 2000, 64}, {1, 1, 1, 1, 1}, {17, 4097, 999, 1500, 33}, {150, 2500, 512, 1, 64}};
    gstate           g[N];
    neo__attn_args   e[N];
    float           *got[N];
    cudaGraph_t      gr = NULL;
    cudaGraphExec_t  ge = NULL;
    double           worst = 0;
    int              s = NEO_OK, nk = -1, same = 1;
    for (int i = 0; i < N; i++) {
        const size_t on = (size_t)cs[i].n_head * cs[i].dv;
        g_setup(&g[i], &cs[i]);
        s |= OPS.set_length(g[i].st, g[i].dlen, 0, NEO__STREAM_MAIN);
        g_fresh(&g[i], cs[i].n_ctx);
        neo__append_args ap = g_append(&g[i], 0, cs[i].n_ctx);
        s |= OPS.append(g[i].st, &ap, NEO__STREAM_MAIN) | OPS.stream_sync(g[i].st, NEO__STREAM_MAIN);
        g_mirror(&g[i], 0, cs[i].n_ctx);
        e[i] = g_attn(&g[i], cs[i].n_ctx, -12345, g[i].dlen);
        got[i] = (float *)xmalloc(on * 4);
    }
    const neo__attn_batch b = {e, N};
    CHECK(s == NEO_OK, "batch graph: the fill: status %d", s);
    if (s == NEO_OK && cudaStreamBeginCapture(g[0].cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        s = neo__cu_test_attend_batch(g[0].st, &b, NEO__STREAM_MAIN, -1, 0, 0);
        const cudaError_t ee = cudaStreamEndCapture(g[0].cs, &gr), ei = ee == cudaSuccess ? cudaGraphInstantiate(&ge, gr, 0) : ee;
        CHECK(s == NEO_OK && ee == cudaSuccess && ei == cudaSuccess, "batch graph: capture: status %d, end: %s, instantiate: %s", s,
              cudaGetErrorString(ee), cudaGetErrorString(ei));
        if (ee != cudaSuccess || ei != cudaSuccess) s |= -2;
        else nk = graph_kernels(gr, NULL);
    } else s |= -1;
    for (int r = 0; r < R && s == NEO_OK; r++) {
        for (int i = 0; i < N; i++) {
            s |= OPS.set_length(g[0].st, g[i].dlen, lens[r][i], NEO__STREAM_MAIN);
            g_fresh(&g[i], 0);
        }
        if (cudaGraphLaunch(ge, g[0].cs) != cudaSuccess || cudaStreamSynchronize(g[0].cs) != cudaSuccess) s |= -3;
        for (int i = 0; i < N && s == NEO_OK; i++) {
            const double err = g_err(&g[i], lens[r][i]);
            CHECK(err < ATT_TOL, "batch graph: replay %d entry %d at length %d: err %.3g", r, i, lens[r][i], err);
            worst = err > worst ? err : worst;
            memcpy(got[i], g[i].out, (size_t)cs[i].n_head * cs[i].dv * 4);
            up(g[i].dout, g[i].pois, (size_t)cs[i].n_head * cs[i].dv * 4);
        }
        s |= neo__cu_test_attend_batch(g[0].st, &b, NEO__STREAM_MAIN, -1, 0, 0) | OPS.stream_sync(g[0].st, NEO__STREAM_MAIN);
        for (int i = 0; i < N && s == NEO_OK; i++) {
            down(g[i].out, g[i].dout, (size_t)cs[i].n_head * cs[i].dv * 4);
            same &= !memcmp(got[i], g[i].out, (size_t)cs[i].n_head * cs[i].dv * 4);
        }
        /* the lengths read early as others (0, 257 cells on, past every bound): the same bits */
        const int hints[3] = {-(1 << 30), 257, 1 << 20};
        for (int h = 0; h < 3 && s == NEO_OK; h++) {
            for (int i = 0; i < N; i++) up(g[i].dout, g[i].pois, (size_t)cs[i].n_head * cs[i].dv * 4);
            s |= neo__cu_test_hint(g[0].st, hints[h]) | neo__cu_test_attend_batch(g[0].st, &b, NEO__STREAM_MAIN, -1, 0, 0);
            s |= neo__cu_test_hint(g[0].st, 0) | OPS.stream_sync(g[0].st, NEO__STREAM_MAIN);
            for (int i = 0; i < N && s == NEO_OK; i++) {
                down(g[i].out, g[i].dout, (size_t)cs[i].n_head * cs[i].dv * 4);
                const int hs = !memcmp(got[i], g[i].out, (size_t)cs[i].n_head * cs[i].dv * 4);
                same &= hs;
                CHECK(hs, "batch graph: replay %d entry %d: the lengths read early %+d cells off changed the bits", r, i, hints[h]);
            }
        }
    }
    const int ok = s == NEO_OK && nk == 2 && same && worst < ATT_TOL;
    CHECK(s == NEO_OK && nk == 2, "batch graph: status %d, kernels in the graph %d (want 2)", s, nk);
    CHECK(same, "batch graph: a replay differs from the same batch run eagerly");
    add_result("batch graph, device lengths", "f16 d128 x3 + bf16 d64 x2: 2 kernels, 4 replays, = eager", worst, same, ok);
    printf("%-28s %-58s err %.2e det %d %s\n", "batch graph, device lengths", "f16 d128 x3 + bf16 d64 x2: 2 kernels, 4 replays, = eager",
           worst, same, ok ? "ok" : "FAIL");
    if (ge) cudaGraphExecDestroy(ge);
    if (gr) cudaGraphDestroy(gr);
    (void)cudaGetLastError();
    for (int i = 0; i < N; i++) g_free(&g[i]), free(got[i]);
}

/* bad arguments of the device-side lengths are statuses */
static void test_graph_args(void) {
    int             *dlen = (int *)dalloc(3 * sizeof(int));
    void            *dk = dalloc(4 * 16 * 8 * 2), *src = dalloc(4 * 8 * 4);
    neo__append_args a;
    memset(&a, 0, sizeof a);
    a.k = a.v = dk, a.kv_cells = 16, a.h1 = 4, a.row0 = -1, a.src_k = a.src_v = (const float *)src, a.n_tokens = 1, a.n_head_kv = 4;
    a.head_dim = a.head_dim_v = 8, a.kv_type = NEO_TYPE_F16;
    const int s1 = OPS.append(ST, &a, NEO__STREAM_MAIN); /* row0 = -1 without len */
    a.row0 = -2, a.len = dlen;
    const int s2 = OPS.append(ST, &a, NEO__STREAM_MAIN);
    const int s3 = OPS.set_length(ST, dlen, -1, NEO__STREAM_MAIN), s4 = OPS.set_length(ST, NULL, 0, NEO__STREAM_MAIN);
    const int s5 = OPS.capturing(ST, NEO__STREAM_MAIN, NULL), s6 = OPS.capturing(ST, 7, NULL);
    /* cut_share without len, or outside (0, 1) */
    neo__attn_args at;
    memset(&at, 0, sizeof at);
    at.k = at.v = dk, at.q = (const float *)src, at.out = (float *)src, at.kv_cells = 16, at.h1 = 4, at.c1 = 16, at.pos0 = 15;
    at.n_tokens = 1, at.n_head = at.n_head_kv = 4, at.head_dim = at.head_dim_v = 8, at.kv_type = NEO_TYPE_F16, at.scale = 1.0f;
    at.cut_share = 0.5f;
    const int s7 = OPS.attend(ST, &at, NEO__STREAM_MAIN);
    at.len = dlen, at.cut_share = 1.0f;
    const int s8 = OPS.attend(ST, &at, NEO__STREAM_MAIN);
    at.cut_share = -0.5f;
    const int s9 = OPS.attend(ST, &at, NEO__STREAM_MAIN);
    const int ok = s1 == NEO_ERR_INVALID_ARG && s2 == NEO_ERR_INVALID_ARG && s3 == NEO_ERR_INVALID_ARG && s4 == NEO_ERR_INVALID_ARG &&
                   s5 == 0 && s6 == 0 && s7 == NEO_ERR_INVALID_ARG && s8 == NEO_ERR_INVALID_ARG && s9 == NEO_ERR_INVALID_ARG;
    CHECK(ok, "graph args: %d %d %d %d capturing %d %d cut %d %d %d", s1, s2, s3, s4, s5, s6, s7, s8, s9);
    add_result("graph bad args", "row0 -1 w/o len, row0 -2, set_length -1 / NULL, cut_share", -1, -1, ok);
    printf("%-28s %-58s %s\n", "graph bad args", "row0 -1 w/o len, row0 -2, set_length -1 / NULL, cut_share", ok ? "ok" : "FAIL");
    OPS.dev_free(ST, dlen), OPS.dev_free(ST, dk), OPS.dev_free(ST, src);
}

static const gcase gcases_full[] = {
    /* the tensor-core kernel, wide and narrow, across split and tile boundaries from 1000 */
    {"f16 d128 wide", F16, 32, 8, 128, 128, 1, 2048, 1000, 40, 0, 0, 0, 0, 0},
    {"f16 d128 narrow sinks", F16, 32, 8, 128, 128, 1, 2048, 1000, 40, 0, 1, 0, 0, 1},
    {"bf16 d64 g7 all", BF16, 14, 2, 64, 64, 1, 1024, 1, 40, -1, -1, 3.0f, 4.0f, 1},
    {"f16 d256 t3", F16, 16, 4, 256, 256, 3, 1024, 500, 20, -1, -1, 0, 4.0f, 0},
    /* the CUDA-core float32 kernel and the generic one */
    {"f32 d128 fast sinks", F32, 32, 8, 128, 128, 1, 2048, 1000, 40, 1, -1, 0, 0, 1},
    {"f32 d64 fast from 1", F32, 8, 2, 64, 64, 1, 512, 1, 40, -1, -1, 2.0f, 0, 0},
    {"f16 d96 generic", F16, 8, 2, 96, 96, 1, 2048, 1000, 40, -1, -1, 3.0f, 0, 1},
    {"bf16 d128/64 generic", BF16, 8, 2, 128, 64, 1, 1024, 1, 40, -1, -1, 0, 4.0f, 0},
    {"f16 d128 generic t2", F16, 8, 2, 128, 128, 2, 1024, 300, 20, 2, -1, 0, 0, 1},
    /* past n_ctx: full + 3 more replays */
    {"full f16 d128", F16, 32, 8, 128, 128, 1, 64, 60, 7, -1, -1, 0, 0, 1},
    {"full bf16 d100/72", BF16, 8, 2, 100, 72, 1, 64, 62, 5, -1, -1, 0, 4.0f, 0},
    {"full f32 d64 t2", F32, 8, 2, 64, 64, 2, 64, 58, 6, -1, -1, 0, 0, 0},
};
static const gcase gcases_quick[] = {
    {"f16 d128 wide", F16, 32, 8, 128, 128, 1, 1024, 500, 12, 0, 0, 0, 0, 0},
    /* the narrow block and head_dim 256's three-stage rings with a device-side length */
    {"f16 d128 narrow sinks", F16, 32, 8, 128, 128, 1, 1024, 500, 12, 0, 1, 0, 0, 1},
    {"f16 d256 t3", F16, 16, 4, 256, 256, 3, 512, 200, 12, -1, -1, 0, 4.0f, 0},
    {"bf16 d64 g7 all", BF16, 14, 2, 64, 64, 1, 256, 1, 12, -1, -1, 3.0f, 4.0f, 1},
    {"f32 d128 fast", F32, 8, 2, 128, 128, 1, 512, 200, 12, 1, -1, 0, 0, 1},
    {"f16 d96 generic", F16, 8, 2, 96, 96, 1, 256, 1, 12, -1, -1, 0, 0, 0},
    {"full f16 d128", F16, 32, 8, 128, 128, 1, 64, 60, 7, -1, -1, 0, 0, 1},
};

/* attend on MAIN and COPY at once (each has its own partial buffer and arrival counters): every
   output bitwise equal to the same call run alone */
static void test_two_streams(int ctx) {
    const int    n_head = 32, n_head_kv = 8, d = 128, REPS = 20;
    const size_t kve = (size_t)n_head_kv * ctx * d, qe = (size_t)n_head * d;
    uint16_t    *kh = (uint16_t *)xmalloc(kve * 2);
    float       *q = (float *)xmalloc(qe * 4), *ref = (float *)xmalloc(qe * 4), *got = (float *)xmalloc(qe * 4);
    for (size_t i = 0; i < kve; i++) kh[i] = to_f16(rng_normal());
    fill_normal(q, qe);
    void  *dk = dalloc(kve * 2), *dv = dalloc(kve * 2);
    float *dq = (float *)dalloc(qe * 4), *dout[2 * REPS];
    up(dk, kh, kve * 2);
    for (size_t i = 0; i < kve; i++) kh[i] = to_f16(rng_normal());
    up(dv, kh, kve * 2);
    up(dq, q, qe * 4);
    for (int i = 0; i < 2 * REPS; i++) dout[i] = (float *)dalloc(qe * 4);
    neo__attn_args a = decode_args(n_head, n_head_kv, d, ctx, NEO_TYPE_F16, dq);
    a.k = dk;
    a.v = dv;
    int ok = 1;
    a.out = dout[0];
    ok &= OPS.attend(ST, &a, NEO__STREAM_MAIN) == NEO_OK;
    ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
    down(ref, dout[0], qe * 4);
    for (int i = 0; i < REPS; i++) {
        a.out = dout[2 * i];
        ok &= OPS.attend(ST, &a, NEO__STREAM_MAIN) == NEO_OK;
        a.out = dout[2 * i + 1];
        ok &= OPS.attend(ST, &a, NEO__STREAM_COPY) == NEO_OK;
    }
    ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK && OPS.stream_sync(ST, NEO__STREAM_COPY) == NEO_OK;
    int same = 1;
    for (int i = 0; i < 2 * REPS; i++) {
        down(got, dout[i], qe * 4);
        same &= !memcmp(got, ref, qe * 4);
    }
    CHECK(ok && same, "two streams: status %d, outputs equal %d", ok, same);
    char shape[96];
    snprintf(shape, sizeof shape, "f16 d128 g4 kv8 ctx %d, MAIN + COPY x %d", ctx, REPS);
    add_result("two streams at once", shape, -1, same, ok && same);
    printf("%-28s %-58s %s\n", "two streams at once", shape, ok && same ? "ok" : "FAIL");
    for (int i = 0; i < 2 * REPS; i++) OPS.dev_free(ST, dout[i]);
    OPS.dev_free(ST, dk), OPS.dev_free(ST, dv), OPS.dev_free(ST, dq);
    free(kh), free(q), free(ref), free(got);
}

/* The both-halves handoff. copy_signal: rows of floats (3 rows of 1000 floats, pitches 1200 and
   1100) to pinned memory, then the flag, which the host polls. await_copy: enqueued before the
   host writes its rows, so the output equals those rows only if the kernel waited for the flag. */
static int test_handoff(unsigned char *pin, unsigned char *d1, unsigned char *d2) {
    unsigned *fl = NULL;
    int       ok = OPS.host_alloc(ST, (void **)&fl, 256) == NEO_OK && fl;
    if (!ok) return 0;
    memset(fl, 0, 256);
    float *src = (float *)xmalloc(3 * 1200 * 4), *h = (float *)pin, *got = (float *)xmalloc(3 * 1200 * 4);
    for (int i = 0; i < 3 * 1200; i++) src[i] = (float)rng_normal();
    memset(pin, 0x5a, 3 * 1200 * 4);
    ok &= OPS.copy(ST, d1, src, 3 * 1200 * 4, NEO__STREAM_MAIN) == NEO_OK;
    ok &= OPS.copy_signal(ST, h, 1100 * 4, d1, 1200 * 4, 1000 * 4, 3, fl, 5u, NEO__STREAM_MAIN) == NEO_OK;
    double t0 = now_s();
    while (__atomic_load_n(fl, __ATOMIC_ACQUIRE) != 5u && now_s() - t0 < 10.0) {}
    int signalled = __atomic_load_n(fl, __ATOMIC_ACQUIRE) == 5u, rows = 1;
    for (int r = 0; r < 3; r++) {
        rows &= !memcmp(h + r * 1100, src + r * 1200, 1000 * 4);
        rows &= r == 2 || ((unsigned char *)(h + r * 1100 + 1000))[0] == 0x5a; /* the gap is untouched */
    }
    CHECK(signalled && rows, "copy_signal: flag set %d, rows equal %d", signalled, rows);
    ok &= signalled && rows;
    ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
    ok &= OPS.await_copy(ST, d2, 1200 * 4, h, 1100 * 4, 1000 * 4, 3, fl + 32, 9u, NEO__STREAM_MAIN) == NEO_OK;
    t0 = now_s();
    while (now_s() - t0 < 0.02) {}
    for (int i = 0; i < 3 * 1100; i++) h[i] = (float)i;
    __atomic_store_n(fl + 32, 9u, __ATOMIC_RELEASE);
    ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
    down(got, d2, 3 * 1200 * 4);
    rows = 1;
    for (int r = 0; r < 3; r++) rows &= !memcmp(got + r * 1200, h + r * 1100, 1000 * 4);
    CHECK(rows, "await_copy: the rows written after it was enqueued");
    ok &= rows;
    /* a batch's rows: 70 of 300 floats (pitches 320 and 310), more rows than the kernel's warps */
    {
        float *dev = (float *)xmalloc(70 * 320 * 4), *back = (float *)xmalloc(70 * 320 * 4);
        int    many = 1;
        for (int i = 0; i < 70 * 320; i++) dev[i] = (float)rng_normal();
        up(d1, dev, 70 * 320 * 4);
        memset(pin, 0x5a, 70 * 310 * 4);
        ok &= OPS.copy_signal(ST, h, 310 * 4, d1, 320 * 4, 300 * 4, 70, fl, 7u, NEO__STREAM_MAIN) == NEO_OK;
        ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
        for (int r = 0; r < 70; r++) many &= !memcmp(h + r * 310, dev + r * 320, 300 * 4) && (r == 69 || ((unsigned char *)(h + r * 310 + 300))[0] == 0x5a);
        ok &= OPS.await_copy(ST, d2, 320 * 4, h, 310 * 4, 300 * 4, 70, fl + 32, 12u, NEO__STREAM_MAIN) == NEO_OK;
        for (int i = 0; i < 70 * 310; i++) h[i] = (float)(i % 9973);
        __atomic_store_n(fl + 32, 12u, __ATOMIC_RELEASE);
        ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
        down(back, d2, 70 * 320 * 4);
        for (int r = 0; r < 70; r++) many &= !memcmp(back + r * 320, h + r * 310, 300 * 4);
        CHECK(many && __atomic_load_n(fl, __ATOMIC_ACQUIRE) == 7u, "handoff of 70 rows");
        ok &= many;
        free(dev), free(back);
    }
    /* widths and pitches that are not whole floats */
    CHECK(OPS.copy_signal(ST, h, 1100 * 4, d1, 1200 * 4, 1002, 3, fl, 6u, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG, "copy_signal width 1002");
    CHECK(OPS.await_copy(ST, d2, 1201, h, 1100 * 4, 1000 * 4, 3, fl + 32, 10u, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG, "await_copy pitch 1201");
    CHECK(OPS.copy_signal(ST, h, 4, d1, 4, 4, 1, NULL, 6u, NEO__STREAM_MAIN) == NEO_ERR_INVALID_ARG, "copy_signal no flag");
    /* on an engine stream being captured into a graph: a status, not a kernel that would wait forever */
    {
        cudaStream_t cs = NULL;
        cudaGraph_t  g = NULL;
        void        *st2 = NULL;
        int          s1 = -1, s2 = -1;
        if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) == cudaSuccess && OPS.init(0, cs, &st2, NULL, 0) == NEO_OK &&
            cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed) == cudaSuccess) {
            s1 = OPS.copy_signal(st2, h, 1100 * 4, d1, 1200 * 4, 1000 * 4, 3, fl, 11u, NEO__STREAM_MAIN);
            s2 = OPS.await_copy(st2, d2, 1200 * 4, h, 1100 * 4, 1000 * 4, 3, fl + 32, 11u, NEO__STREAM_MAIN);
            if (cudaStreamEndCapture(cs, &g) == cudaSuccess && g) cudaGraphDestroy(g);
        }
        CHECK(s1 == NEO_ERR_UNSUPPORTED && s2 == NEO_ERR_UNSUPPORTED, "handoff while capturing: %d %d", s1, s2);
        ok &= s1 == NEO_ERR_UNSUPPORTED && s2 == NEO_ERR_UNSUPPORTED;
        if (st2) OPS.release(st2);
        if (cs) cudaStreamDestroy(cs);
        (void)cudaGetLastError();
    }
    printf("%-28s %-58s %s\n", "handoff", "copy_signal + await_copy, 3 rows of 1000 floats, 70 of 300", ok ? "ok" : "FAIL");
    free(src), free(got);
    OPS.host_free(ST, fl);
    return ok;
}

/* copies on every stream, 2-D copies, events between streams, bad arguments, allocation failure */
static void test_plumbing(void) {
    int ok = 1, s;
    const size_t n = 1 << 20;
    unsigned char *a = (unsigned char *)xmalloc(n), *b = (unsigned char *)xmalloc(n), *pin = NULL;
    for (size_t i = 0; i < n; i++) a[i] = (unsigned char)rng_u64();
    s = OPS.host_alloc(ST, (void **)&pin, n);
    CHECK(s == NEO_OK && pin, "host_alloc: %d", s);
    ok &= s == NEO_OK && pin;
    if (pin) {
        unsigned char *d1 = (unsigned char *)dalloc(n), *d2 = (unsigned char *)dalloc(n);
        memcpy(pin, a, n);
        /* pinned -> device on COPY, event, MAIN waits and copies device -> device, COPY waits for MAIN, device -> pinned */
        ok &= OPS.copy(ST, d1, pin, n, NEO__STREAM_COPY) == NEO_OK;
        ok &= OPS.record(ST, 3, NEO__STREAM_COPY) == NEO_OK;
        ok &= OPS.wait(ST, NEO__STREAM_MAIN, 3) == NEO_OK;
        ok &= OPS.copy(ST, d2, d1, n, NEO__STREAM_MAIN) == NEO_OK;
        ok &= OPS.record(ST, 7, NEO__STREAM_MAIN) == NEO_OK;
        ok &= OPS.wait(ST, NEO__STREAM_COPY, 7) == NEO_OK;
        ok &= OPS.copy(ST, pin, d2, n / 2, NEO__STREAM_COPY) == NEO_OK;
        ok &= OPS.record(ST, 0, NEO__STREAM_COPY) == NEO_OK;
        ok &= OPS.event_sync(ST, 0) == NEO_OK;
        ok &= memcmp(pin, a, n / 2) == 0;
        CHECK(ok, "copies and events across streams");
        /* 2-D: rows of 100 bytes from a pitch of 256 into a pitch of 128 */
        memset(b, 0x5a, n);
        ok &= OPS.copy(ST, d1, a, n, NEO__STREAM_MAIN) == NEO_OK;
        ok &= OPS.copy(ST, d2, b, n, NEO__STREAM_MAIN) == NEO_OK;
        ok &= OPS.copy2d(ST, d2, 128, d1, 256, 100, 1000, NEO__STREAM_MAIN) == NEO_OK;
        ok &= OPS.copy(ST, b, d2, 128 * 1000, NEO__STREAM_MAIN) == NEO_OK;
        ok &= OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
        int good2d = 1;
        for (int r = 0; r < 1000; r++)
            for (int x = 0; x < 128; x++) good2d &= b[r * 128 + x] == (x < 100 ? a[r * 256 + x] : 0x5a);
        CHECK(good2d, "copy2d");
        ok &= good2d;
        ok &= test_handoff(pin, d1, d2);
        OPS.dev_free(ST, d1);
        OPS.dev_free(ST, d2);
        OPS.host_free(ST, pin);
    }
    /* bad arguments are statuses, not crashes */
    s = OPS.record(ST, NEO__EVENTS, NEO__STREAM_MAIN);
    CHECK(s == NEO_ERR_INVALID_ARG, "record bad event: %d", s);
    ok &= s == NEO_ERR_INVALID_ARG;
    s = OPS.stream_sync(ST, 3);
    CHECK(s == NEO_ERR_INVALID_ARG, "bad stream: %d", s);
    ok &= s == NEO_ERR_INVALID_ARG;
    void *p = (void *)1;
    s = OPS.dev_alloc(ST, &p, (size_t)1 << 50);
    CHECK(s == NEO_ERR_DEVICE_MEMORY && p == NULL, "dev_alloc 1 PiB: %d", s);
    ok &= s == NEO_ERR_DEVICE_MEMORY;
    p = (void *)1;
    s = OPS.host_alloc(ST, &p, (size_t)1 << 50);
    CHECK(s == NEO_ERR_NO_MEMORY && p == NULL, "host_alloc 1 PiB: %d", s);
    ok &= s == NEO_ERR_NO_MEMORY;
    /* the failures above must not poison later launches */
    s = OPS.copy(ST, b, a, 0, NEO__STREAM_MAIN);
    ok &= s == NEO_OK && OPS.stream_sync(ST, NEO__STREAM_MAIN) == NEO_OK;
    add_result("plumbing", "copies, copy2d, events, bad args, alloc failure", -1, -1, ok);
    printf("%-28s %-58s %s\n", "plumbing", "copies, copy2d, events, bad args, alloc failure", ok ? "ok" : "FAIL");
    free(a), free(b);
}

/* =============================================================================================
   timing: decode attention, cudaEvents around each call, KV rotated over buffers beyond L2
   ============================================================================================= */
static atomic_int gate;
static void CUDART_CB hold_stream(void *user) {
    (void)user;
    while (!atomic_load(&gate)) {
    }
}
/* a failed call while the stream is held: exit would wait for the stream, so open it first */
static void fail_held(void) {
    atomic_store(&gate, 1);
    exit(2);
}
static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
#define CU(x)                                                                                                           \
    do {                                                                                                                \
        cudaError_t e_ = (x);                                                                                           \
        if (e_ != cudaSuccess) {                                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                        \
            exit(2);                                                                                                    \
        }                                                                                                               \
    } while (0)

/* median and mean of per-call times (us) of decode attention on n_sets rotating KV sets */
static void time_decode(cudaStream_t stream, int n_head, int n_head_kv, int d, int ctx, int type, double hbm) {
    const size_t es = tsize(type), set_bytes = (size_t)2 * n_head_kv * ctx * d * es;
    int n_sets = (int)((((size_t)512 << 20) + set_bytes - 1) / set_bytes);
    if (n_sets < 3) n_sets = 3;
    if (n_sets > 64) n_sets = 64;
    void  **kv = (void **)xmalloc(sizeof(void *) * n_sets);
    size_t  half = set_bytes / 2;
    uint16_t *h = (uint16_t *)xmalloc(half);
    /* random values (never zeros), a pattern of 1M values repeated (the host is the slow part here) */
    const size_t pat = (size_t)1 << 20, nh = half / 2;
    for (size_t i = 0; i < nh && i < pat; i++) h[i] = to_f16((float)((int)(rng_u64() % 2001) - 1000) * 0.002f);
    for (size_t i = pat; i < nh; i += pat) memcpy(h + i, h, (nh - i < pat ? nh - i : pat) * 2);
    for (int i = 0; i < n_sets; i++) {
        kv[i] = dalloc(set_bytes);
        up(kv[i], h, half);
        up((char *)kv[i] + half, h, half);
    }
    float *q = (float *)xmalloc((size_t)n_head * d * 4);
    fill_normal(q, (size_t)n_head * d);
    float *dq = (float *)dalloc((size_t)n_head * d * 4), *dout = (float *)dalloc((size_t)n_head * d * 4);
    up(dq, q, (size_t)n_head * d * 4);
    neo__attn_args a = decode_args(n_head, n_head_kv, d, ctx, type, dq);
    a.out = dout;
    enum { BATCH = 40, BATCHES = 5 };
    cudaEvent_t ev[BATCH + 1];
    for (int i = 0; i <= BATCH; i++) CU(cudaEventCreate(&ev[i]));
    float times[BATCH * BATCHES];
    int   nt = 0, call = 0;
    double sum = 0;
    for (int w = 0; w < 20; w++) { /* warm-up */
        a.k = kv[call % n_sets];
        a.v = (char *)kv[call % n_sets] + half;
        call++;
        if (OPS.attend(ST, &a, NEO__STREAM_MAIN) != NEO_OK) exit(2);
    }
    CU(cudaStreamSynchronize(stream));
    for (int bt = 0; bt < BATCHES; bt++) {
        /* hold the stream until the whole batch is queued, so the calls run back to back and the
           events time the GPU, not the host's launch rate */
        atomic_store(&gate, 0);
        CU(cudaLaunchHostFunc(stream, hold_stream, NULL));
        CU(cudaEventRecord(ev[0], stream));
        for (int i = 0; i < BATCH; i++) {
            a.k = kv[call % n_sets];
            a.v = (char *)kv[call % n_sets] + half;
            call++;
            if (OPS.attend(ST, &a, NEO__STREAM_MAIN) != NEO_OK) fail_held();
            CU(cudaEventRecord(ev[i + 1], stream));
        }
        atomic_store(&gate, 1);
        CU(cudaStreamSynchronize(stream));
        for (int i = 0; i < BATCH; i++) {
            float ms;
            CU(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
            times[nt++] = ms * 1000.0f;
            sum += ms * 1000.0;
        }
    }
    /* the same without events between the calls (as an engine calls it): the batch's time over
       its calls, median of the batches */
    enum { B2B = 9 };
    float bmeans[B2B], hosts[B2B];
    for (int bt = 0; bt < B2B; bt++) {
        float ms;
        atomic_store(&gate, 0);
        CU(cudaLaunchHostFunc(stream, hold_stream, NULL));
        CU(cudaEventRecord(ev[0], stream));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < BATCH; i++) {
            a.k = kv[call % n_sets];
            a.v = (char *)kv[call % n_sets] + half;
            call++;
            if (OPS.attend(ST, &a, NEO__STREAM_MAIN) != NEO_OK) fail_held();
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        hosts[bt] = (float)(((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / BATCH);
        CU(cudaEventRecord(ev[1], stream));
        atomic_store(&gate, 1);
        CU(cudaStreamSynchronize(stream));
        CU(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        bmeans[bt] = ms * 1000.0f / BATCH;
    }
    qsort(times, (size_t)nt, sizeof(float), cmp_float);
    qsort(bmeans, B2B, sizeof(float), cmp_float);
    qsort(hosts, B2B, sizeof(float), cmp_float);
    const double med = times[nt / 2], mean = sum / nt, bytes = (double)set_bytes, b2b = bmeans[B2B / 2];
    printf("| %2d/%d d%-3d %-4s | %7d | %6.1f MB | %8.2f | %8.2f | %8.2f | %7.0f | %5.2f | %5.2f | %2d |\n", n_head, n_head_kv, d,
           tname(type), ctx, bytes / 1e6, med, mean, b2b, bytes / b2b * 1e-3, bytes / b2b * 1e-3 / hbm, hosts[B2B / 2], n_sets);
    fflush(stdout);
    for (int i = 0; i <= BATCH; i++) cudaEventDestroy(ev[i]);
    for (int i = 0; i < n_sets; i++) OPS.dev_free(ST, kv[i]);
    OPS.dev_free(ST, dq), OPS.dev_free(ST, dout);
    free(kv), free(h), free(q);
}

/* One decode-loop projection (neo__matvec_args), weights rotated over sets beyond L2: the median
   over batches of 40 back-to-back calls. Values do not matter here, only bytes moved. */
static void time_matvec(cudaStream_t stream, int n, int d, int epi, int norm, double hbm) {
    const size_t wb = (size_t)n * d * 4, set_bytes = wb * (epi == NEO__MV_SWIGLU ? 2 : 1);
    int n_sets = (int)((((size_t)512 << 20) + set_bytes - 1) / set_bytes);
    if (n_sets < 3) n_sets = 3;
    if (n_sets > 64) n_sets = 64;
    float **w = (float **)xmalloc(sizeof(float *) * n_sets);
    for (int i = 0; i < n_sets; i++) {
        w[i] = (float *)dalloc(set_bytes);
        CU(cudaMemsetAsync(w[i], 0x3c, set_bytes, stream)); /* 0.0115 everywhere */
    }
    float *dx = (float *)dalloc((size_t)n * 4), *dg = (float *)dalloc((size_t)n * 4), *dy = (float *)dalloc((size_t)d * 4);
    CU(cudaMemsetAsync(dx, 0x3c, (size_t)n * 4, stream));
    CU(cudaMemsetAsync(dg, 0x3c, (size_t)n * 4, stream));
    CU(cudaMemsetAsync(dy, 0, (size_t)d * 4, stream));
    neo__matvec_args a;
    memset(&a, 0, sizeof a);
    a.y = dy, a.x = dx, a.norm = norm ? dg : NULL, a.n = n, a.d = d, a.epilogue = epi;
    if (epi == NEO__MV_ROPE) a.rope_q = d - 256, a.rope_k = 128, a.head_size = 64, a.pos = 4096;
    enum { BATCH = 40, B2B = 9 };
    float       bmeans[B2B];
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    int call = 0;
    /* a warm-up batch, ungated: the first launch of a kernel loads its module (CUDA's lazy
       loading), which waits for the stream, and would wait forever behind a closed gate */
    for (; call < BATCH; call++) {
        a.w = w[call % n_sets];
        a.w_mul = epi == NEO__MV_SWIGLU ? w[call % n_sets] + (size_t)n * d : NULL;
        if (OPS.matvec(ST, &a, NEO__STREAM_MAIN) != NEO_OK) exit(2);
    }
    CU(cudaStreamSynchronize(stream));
    for (int bt = 0; bt < B2B; bt++) {
        float ms;
        atomic_store(&gate, 0);
        CU(cudaLaunchHostFunc(stream, hold_stream, NULL));
        CU(cudaEventRecord(e0, stream));
        for (int i = 0; i < BATCH; i++, call++) {
            a.w = w[call % n_sets];
            a.w_mul = epi == NEO__MV_SWIGLU ? w[call % n_sets] + (size_t)n * d : NULL;
            if (OPS.matvec(ST, &a, NEO__STREAM_MAIN) != NEO_OK) fail_held();
        }
        CU(cudaEventRecord(e1, stream));
        atomic_store(&gate, 1);
        CU(cudaStreamSynchronize(stream));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        bmeans[bt] = ms * 1000.0f / BATCH;
    }
    qsort(bmeans, B2B, sizeof(float), cmp_float);
    const char *names[] = {"store", "add", "swiglu", "rope"};
    const double us = bmeans[B2B / 2];
    printf("| %5d x %-5d %-6s %-4s | %8.1f MB | %8.2f | %7.0f | %5.2f |\n", d, n, names[epi], norm ? "norm" : "", set_bytes / 1e6, us,
           set_bytes / us * 1e-3, set_bytes / us * 1e-3 / hbm);
    fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    for (int i = 0; i < n_sets; i++) OPS.dev_free(ST, w[i]);
    OPS.dev_free(ST, dx), OPS.dev_free(ST, dg), OPS.dev_free(ST, dy);
    free(w);
}

static void decode_header(void) {
    printf("\n| shape            |     ctx |  KV bytes | med (us) | mean(us) | b2b (us) |    GB/s | x HBM |  host | KV sets |\n");
    printf("|------------------|---------|-----------|----------|----------|----------|---------|-------|-------|---------|\n");
}

/* ctx_list: "a,b,.." contexts for 32 q / 8 kv heads, d 128, f16 only (NULL: the fixed lists) */
static int tshape[3] = {32, 8, 128}; /* --time-ctx's shape: q heads, KV heads, head dim (--time-shape) */

static void run_timing(cudaStream_t stream, int short_list, int mv_only, const char *ctx_list) {
    /* the copy ceiling: a device-to-device copy of 2 GB, bytes read + written */
    const size_t n = (size_t)2 << 30;
    void *a = dalloc(n), *b = dalloc(n);
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    CU(cudaMemsetAsync(a, 1, n, stream));
    float best = 1e30f;
    for (int i = 0; i < 6; i++) {
        float ms;
        CU(cudaEventRecord(e0, stream));
        CU(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, stream));
        CU(cudaEventRecord(e1, stream));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (i && ms < best) best = ms;
    }
    const double hbm = 2.0 * n / (best * 1e-3) / 1e9;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    OPS.dev_free(ST, a);
    OPS.dev_free(ST, b);
    printf("\nHBM device-to-device copy: %.0f GB/s (read + write)\n", hbm);
    printf("med / mean: events around each call; b2b: median over batches of 40 back-to-back calls, events around the batch;\n"
           "GB/s and x HBM from b2b; host: us of the host per attend call (enqueue)\n");
    if (ctx_list) {
        decode_header();
        for (const char *c = ctx_list; *c;) {
            char *end;
            long  ctx = strtol(c, &end, 10);
            if (end == c || ctx < 1 || ctx > (1L << 24)) {
                fprintf(stderr, "test_cuda_ops: bad context list '%s'\n", ctx_list);
                exit(2);
            }
            time_decode(stream, tshape[0], tshape[1], tshape[2], (int)ctx, NEO_TYPE_F16, hbm);
            c = *end == ',' ? end + 1 : end;
        }
        return;
    }
    /* the decode loop's projections, Qwen2.5-0.5B: wq|wk|wv with RoPE, wo, w1|w3, w2, classifier;
       x HBM: weight bytes read / time against the copy rate (read + write) */
    printf("\n| rows x cols, epilogue   |   weights | b2b (us) |    GB/s | x HBM |\n");
    printf("|-------------------------|-----------|----------|---------|-------|\n");
    time_matvec(stream, 896, 1152, NEO__MV_ROPE, 1, hbm);
    time_matvec(stream, 896, 896, NEO__MV_ADD, 0, hbm);
    time_matvec(stream, 896, 4864, NEO__MV_SWIGLU, 1, hbm);
    time_matvec(stream, 4864, 896, NEO__MV_ADD, 0, hbm);
    time_matvec(stream, 896, 32000, NEO__MV_STORE, 1, hbm);
    if (mv_only) return;
    decode_header();
    const int ctxs[] = {4096, 32768, 131072};
    for (int i = 0; i < 3; i++) time_decode(stream, 32, 8, 128, ctxs[i], NEO_TYPE_F16, hbm);
    time_decode(stream, 14, 2, 64, 4096, NEO_TYPE_F16, hbm);
    time_decode(stream, 64, 8, 128, 32768, NEO_TYPE_F16, hbm);
    if (!short_list) {
        time_decode(stream, 32, 8, 128, 32768, NEO_TYPE_BF16, hbm);
        time_decode(stream, 14, 2, 64, 32768, NEO_TYPE_F16, hbm);
        time_decode(stream, 14, 2, 64, 131072, NEO_TYPE_F16, hbm);
        time_decode(stream, 64, 8, 128, 4096, NEO_TYPE_F16, hbm);
        time_decode(stream, 64, 8, 128, 131072, NEO_TYPE_F16, hbm);
        time_decode(stream, 32, 8, 128, 524288, NEO_TYPE_F16, hbm);
    }
}

/* --time-batch: the batch launch alone (attend_batch, cudaEvents, median of 15) for Llama-3-8B
   shapes (32 q / 8 kv heads, d 128, f16, every head on the device): 64 x 4k, 16 x 32k, 64
   lengths drawn from 512 to 32k, 1 and 16 x 128k; under the planner's choice, each block shape
   and wave count forced, and as single attends back to back, against the HBM copy rate measured
   in the same run (bytes read + written / time). */
/* the median of n seconds (t is sorted) */
static double median_s(float *t, int n) {
    qsort(t, (size_t)n, sizeof(float), cmp_float);
    return n % 2 ? t[n / 2] : 0.5 * ((double)t[n / 2 - 1] + t[n / 2]);
}
static void time_batch(cudaStream_t stream) {
    static const struct {
        const char *name;
        int         n, lo, hi;
    } specs[5] = {{"64 x 4k", 64, 4096, 4096},           {"16 x 32k", 16, 32768, 32768}, {"64 x U(512, 32k)", 64, 512, 32768},
                  {"1 x 128k", 1, 131072, 131072}, {"16 x 128k", 16, 131072, 131072}};
    static const int forced[][2] = {{-1, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 8}, {1, 1}, {1, 2}, {1, 4}, {1, 8}};
    cudaEvent_t      e0, e1;
    float            t[16];
    float            ms;
    void            *a, *b;
    const size_t     cb = (size_t)1 << 30;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    CU(cudaMalloc(&a, cb));
    CU(cudaMalloc(&b, cb));
    CU(cudaMemset(a, 1, cb));
    for (int r = -1; r < 9; r++) {
        CU(cudaEventRecord(e0, stream));
        CU(cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice, stream));
        CU(cudaEventRecord(e1, stream));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) t[r] = ms * 1e-3;
    }
    const double hbm = 2.0 * (double)cb / median_s(t, 9);
    CU(cudaFree(a));
    CU(cudaFree(b));
    printf("hbm copy rate %.1f GB/s\n", hbm * 1e-9);
    uint64_t s = 0x5eed;
    for (int si = 0; si < 5; si++) {
        const int       n = specs[si].n;
        neo__attn_args *e = (neo__attn_args *)xmalloc((size_t)n * sizeof *e);
        double          bytes = 0;
        float          *dq = (float *)dalloc((size_t)n * 32 * 128 * 4), *dout = (float *)dalloc((size_t)n * 32 * 128 * 4);
        CU(cudaMemset(dq, 0, (size_t)n * 32 * 128 * 4));
        for (int i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const int len = specs[si].lo + (int)((s >> 33) % (uint64_t)(specs[si].hi - specs[si].lo + 1));
            memset(&e[i], 0, sizeof e[i]);
            e[i].k = dalloc((size_t)8 * len * 128 * 2), e[i].v = dalloc((size_t)8 * len * 128 * 2);
            CU(cudaMemset((void *)e[i].k, 0x11, (size_t)8 * len * 128 * 2));
            CU(cudaMemset((void *)e[i].v, 0x11, (size_t)8 * len * 128 * 2));
            e[i].kv_cells = len, e[i].h1 = 8, e[i].c1 = len, e[i].q = dq + (size_t)i * 32 * 128, e[i].n_tokens = 1;
            e[i].pos0 = len - 1, e[i].out = dout + (size_t)i * 32 * 128, e[i].n_head = 32, e[i].n_head_kv = 8;
            e[i].head_dim = e[i].head_dim_v = 128, e[i].kv_type = NEO_TYPE_F16, e[i].scale = 0.088f;
            bytes += (double)8 * len * 128 * 2 * 2;
        }
        const neo__attn_batch bt = {e, n};
        for (size_t f = 0; f < sizeof forced / sizeof *forced; f++) {
            const int shape = forced[f][0], waves = forced[f][1] ? forced[f][1] : 0;
            for (int r = -2; r < 15; r++) {
                CU(cudaEventRecord(e0, stream));
                int st = neo__cu_test_attend_batch(ST, &bt, NEO__STREAM_MAIN, f ? shape : -1, 0, f ? waves : 0);
                CU(cudaEventRecord(e1, stream));
                CU(cudaEventSynchronize(e1));
                CU(cudaEventElapsedTime(&ms, e0, e1));
                if (st != NEO_OK) {
                    printf("%s: status %d\n", specs[si].name, st);
                    break;
                }
                if (r >= 0) t[r] = ms * 1e-3;
            }
            const double sec = median_s(t, 15);
            printf("batch %-18s %-8s waves %-3s %9.1f us %8.1f GB/s  %.3f of the copy rate\n", specs[si].name,
                   !f ? "planner" : shape ? "narrow" : "wide", f ? (waves == 1 ? "1" : waves == 2 ? "2" : waves == 4 ? "4" : "8") : "-",
                   sec * 1e6, bytes / sec * 1e-9, bytes / sec / hbm);
        }
        for (int r = -2; r < 15; r++) { /* the same entries as single attends, back to back */
            CU(cudaEventRecord(e0, stream));
            for (int i = 0; i < n; i++) OPS.attend(ST, &e[i], NEO__STREAM_MAIN);
            CU(cudaEventRecord(e1, stream));
            CU(cudaEventSynchronize(e1));
            CU(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 0) t[r] = ms * 1e-3;
        }
        const double sec = median_s(t, 15);
        printf("batch %-18s %-8s waves -   %9.1f us %8.1f GB/s  %.3f of the copy rate\n", specs[si].name, "singles", sec * 1e6,
               bytes / sec * 1e-9, bytes / sec / hbm);
        for (int i = 0; i < n; i++) OPS.dev_free(ST, (void *)e[i].k), OPS.dev_free(ST, (void *)e[i].v);
        OPS.dev_free(ST, dq), OPS.dev_free(ST, dout);
        free(e);
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
}

int main(int argc, char **argv) {
    int         quick = 0, timing = 0, short_list = 0, mv_only = 0, image_only = 0, batch_timing = 0;
    const char *ctx_list = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--time")) timing = 1;
        else if (!strcmp(argv[i], "--time-short")) timing = short_list = 1;
        else if (!strcmp(argv[i], "--time-mv")) timing = mv_only = 1;
        else if (!strcmp(argv[i], "--image")) image_only = 1;
        else if (!strcmp(argv[i], "--time-batch")) batch_timing = 1;
        else if (!strcmp(argv[i], "--time-ctx") && i + 1 < argc) timing = 1, ctx_list = argv[++i];
        else if (!strcmp(argv[i], "--time-shape") && i + 1 < argc &&
                 (sscanf(argv[++i], "%d,%d,%d", &tshape[0], &tshape[1], &tshape[2]) != 3 || tshape[0] < 1 || tshape[1] < 1 ||
                  tshape[0] % tshape[1] || tshape[2] < 1 || tshape[2] > 256)) {
            fprintf(stderr, "test_cuda_ops: --time-shape wants q heads,kv heads,head dim (e.g. 14,2,64)\n");
            return 2;
        }
    }
    /* which code runs: ptxVersion is the architecture the kernels were compiled for (80 on the
       sm_80 path), binaryVersion the one they run as (the GPU's when the driver compiled PTX) */
    int ptxv = 0, binv = 0, si = neo__cu_test_image(0, &ptxv, &binv);
    printf("image: ptxVersion %d binaryVersion %d (status %d)\n", ptxv, binv, si);
    if (image_only) return si != NEO_OK;
    const char *seed = getenv("NEO_TEST_SEED");
    if (seed) rng_s = strtoull(seed, NULL, 10);
    printf("test_cuda_ops: seed %llu%s\n", (unsigned long long)rng_s, quick ? " (quick)" : "");

    /* the ABI check */
    neo__dev_mem   bad_m;
    neo__dev_attn  bad_a;
    neo__dev_model bad_d;
    int s = neo__cuda_get_mem(NEO__DEV_MEM_ABI + 1, &bad_m);
    CHECK(s == NEO_ERR_UNSUPPORTED, "wrong memory-table ABI version gave %d", s);
    s = neo__cuda_get_attn(NEO__DEV_ATTN_ABI + 1, &bad_a);
    CHECK(s == NEO_ERR_UNSUPPORTED, "wrong attention-table ABI version gave %d", s);
    s = neo__cuda_get_model(NEO__DEV_MODEL_ABI + 1, &bad_d);
    CHECK(s == NEO_ERR_UNSUPPORTED, "wrong model-table ABI version gave %d", s);
    s = get_ops();
    CHECK(s == NEO_OK, "get_ops gave %d", s);
    const int all = OPS.init && OPS.release && OPS.dev_alloc && OPS.dev_free && OPS.host_alloc && OPS.host_free && OPS.copy &&
                    OPS.copy2d && OPS.copy_signal && OPS.await_copy && OPS.record && OPS.wait && OPS.event_sync &&
                    OPS.stream_sync && OPS.capturing && OPS.launch_async && OPS.append && OPS.attend && OPS.merge &&
                    OPS.set_length && OPS.matvec && OPS.argmax;
    CHECK(all, "an ops entry is NULL");
    add_result("abi", "wrong versions -> UNSUPPORTED, every entry set", -1, -1, s == NEO_OK && all);
    if (s != NEO_OK) return 1;
    void *tmp = (void *)1;
    char  why[160] = "";
    s = OPS.init(999, NULL, &tmp, why, sizeof why);
    CHECK(s == NEO_ERR_DEVICE && tmp == NULL && why[0], "init on device 999 gave %d (%s)", s, why);
    add_result("init bad device", "device 999 -> NEO_ERR_DEVICE", -1, -1, s == NEO_ERR_DEVICE);

    cudaStream_t stream;
    CU(cudaSetDevice(0));
    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    s = OPS.init(0, stream, &ST, NULL, 0);
    CHECK(s == NEO_OK, "init gave %d", s);
    if (s != NEO_OK) return 1;
    if (timing || batch_timing) {
        if (batch_timing) time_batch(stream);
        else run_timing(stream, short_list, mv_only, ctx_list);
        OPS.release(ST);
        cudaStreamDestroy(stream);
        return 0;
    }
    /* a runtime with its own streams, released at once */
    void *own = NULL;
    s = OPS.init(0, NULL, &own, NULL, 0);
    CHECK(s == NEO_OK, "init without an engine stream gave %d", s);
    OPS.release(own);

    /* an error left pending by the engine (a failed cudaMalloc, not sticky) is not a launch's own,
       and the calls leave the thread's current device as it was */
    {
        void *big = NULL;
        int  *dlen = NULL, got = -1, dev = -1, sl, sy;
        s = OPS.dev_alloc(ST, (void **)&dlen, 3 * sizeof(int));
        CHECK(s == NEO_OK, "dev_alloc gave %d", s);
        if (s == NEO_OK) {
            CHECK(cudaMalloc(&big, (size_t)1 << 50) != cudaSuccess, "a 1 PiB cudaMalloc succeeded");
            sl = OPS.set_length(ST, dlen, 5, NEO__STREAM_MAIN); /* a <<<>>> launch */
            sy = OPS.stream_sync(ST, NEO__STREAM_MAIN);
            CU(cudaMemcpy(&got, dlen, sizeof got, cudaMemcpyDeviceToHost));
            CU(cudaGetDevice(&dev));
            CHECK(sl == NEO_OK && sy == NEO_OK && got == 5 && dev == 0, "after a pending error: set_length %d, sync %d, "
                  "length %d, current device %d", sl, sy, got, dev);
            add_result("pending error", "an engine's failed cudaMalloc before a launch: the launch is ok", -1, -1,
                       sl == NEO_OK && sy == NEO_OK && got == 5 && dev == 0);
            OPS.dev_free(ST, dlen);
        }
    }

    const acase *cases = quick ? cases_quick : cases_full;
    const size_t n_cases = quick ? sizeof cases_quick / sizeof *cases_quick : sizeof cases_full / sizeof *cases_full;
    size_t       n_only = 0;
    for (size_t i = 0; only && i < n_cases; i++) n_only += !strcmp(cases[i].name, only);
    if (only && !n_only) {
        fprintf(stderr, "test_cuda_ops: no attention case named \"%s\" in the %s list\n", only, quick ? "quick" : "full");
        return 2;
    }
    if (!only) {
        test_plumbing();
        test_append(NEO_TYPE_F16, 100, 64, 8, 2, 3, 7, 50, 5, 3, -1);
        test_append(NEO_TYPE_BF16, 128, 128, 4, 0, 0, 4, 20, 0, 20, -1);
        test_append(NEO_TYPE_F32, 7, 9, 3, 1, 1, 2, 10, 9, 1, -1);
        test_append(NEO_TYPE_F16, 64, 64, 2, 0, 1, 2, 300, 17, 257, -1);
        /* a split layer's rows: device heads and host heads in one launch, and the host half alone */
        test_append(NEO_TYPE_F16, 128, 128, 8, 0, 0, 8, 40, 7, 1, 5);
        test_append(NEO_TYPE_BF16, 64, 96, 4, 0, 0, 4, 300, 3, 257, 1);
        test_append(NEO_TYPE_F32, 7, 9, 3, 0, 0, 3, 10, 2, 4, 0);
        /* n, d, epilogue, norm, misalign, RoPE q rows, k rows, head size, pos: shapes of the decode
           loop's projections (Qwen2.5-0.5B, stories) and odd ones; R = 1..8 warps a row */
        const mvcase mv[] = {{4096, 1000, NEO__MV_STORE, 0, 0, 0, 0, 0, 0},       {1001, 333, NEO__MV_STORE, 0, 1, 0, 0, 0, 0},
                             {768, 32000, NEO__MV_STORE, 1, 0, 0, 0, 0, 0},       {896, 896, NEO__MV_ADD, 0, 0, 0, 0, 0, 0},
                             {4864, 896, NEO__MV_ADD, 0, 0, 0, 0, 0, 0},          {1001, 77, NEO__MV_ADD, 1, 1, 0, 0, 0, 0},
                             {896, 4864, NEO__MV_SWIGLU, 1, 0, 0, 0, 0, 0},       {1001, 333, NEO__MV_SWIGLU, 0, 1, 0, 0, 0, 0},
                             {896, 1152, NEO__MV_ROPE, 1, 0, 896, 128, 64, 1000}, {4096, 6144, NEO__MV_ROPE, 1, 0, 4096, 1024, 128, 70000},
                             {288, 288, NEO__MV_ROPE, 0, 0, 288, 0, 48, 0},       {64, 32, NEO__MV_ROPE, 1, 1, 0, 16, 8, 255},
                             /* few rows of many columns: 8 warps a unit on the float4 path */
                             {4096, 64, NEO__MV_STORE, 1, 0, 0, 0, 0, 0},         {2048, 40, NEO__MV_SWIGLU, 0, 0, 0, 0, 0, 0},
                             {2048, 64, NEO__MV_ROPE, 1, 0, 64, 0, 64, 5}};
        for (size_t i = 0; i < sizeof mv / sizeof *mv; i++) test_matvec(mv[i]);
        test_matvec_args();
        test_matvec_append();
        test_argmax(32000, 0), test_argmax(512, 1), test_argmax(151936, 2), test_argmax(7, 3), test_argmax(1, 0);
        /* the hybrid's merge: a decode's host heads (the tail of the heads), all heads, prefill rows,
           head_dim_v past a block's threads, empty and NaN states */
        test_merge(1, 32, 28, 32, 128, 0, 0), test_merge(1, 14, 7, 14, 64, 1, 0), test_merge(1, 8, 0, 8, 300, 1, 1);
        test_merge(3, 16, 4, 16, 24, 1, 2), test_merge(1, 4, 1, 3, 7, 0, 2), test_merge(2, 8, 2, 8, 64, 1, 3);
    }
    /* every case under the planner's own choice, then under forced plans so that every kernel
       and block shape runs whatever this GPU's plan would be: the tensor-core kernel's wide and
       narrow blocks, one split (its in-block finish), and the generic kernel for every shape */
    const force plans[] = {{"", -1, -1, 0}, {" [wide]", 0, 0, 0}, {" [narrow]", 0, 1, 0}, {" [S=1]", -1, -1, 1}, {" [generic]", 2, -1, 0}};
    for (size_t f = 0; f < sizeof plans / sizeof *plans; f++) {
        if (quick && f != 0 && f != 2) continue; /* compute-sanitizer's time: the planner's plan and the narrow blocks */
        FORCE = plans[f];
        for (size_t i = 0; i < n_cases; i++)
            if (!only || !strcmp(cases[i].name, only)) run_attend(&cases[i]);
        /* NaN and inf: every kernel (f16 / bf16 tensor-core, f32 CUDA-core, d100 generic), decode
           and prefill; prefill tiles of 8 queries put cell 69 beside queries that must not see it */
        const int nf_type[] = {NEO_TYPE_F16, NEO_TYPE_BF16, NEO_TYPE_F32, NEO_TYPE_F16}, nf_d[] = {128, 64, 64, 100};
        for (int ty = 0; ty < 4 && (!quick || f == 0) && !only; ty++)
            for (int kind = 0; kind < 4; kind++)
                for (int T = 1; T <= 10; T += 9) run_nonfinite(nf_type[ty], nf_d[ty], T, kind);
    }
    FORCE = plans[0];
    if (!only) {
        /* every case above also ran with the global merge and matched it bit for bit, which shows
           nothing about the cluster merge unless some of them took it: on an sm_90 image they must */
        {
            const unsigned long long ncl = neo__cu_test_clusters(ST);
            const int                want = ptxv >= 90 && !quick;
            char                     what[96];
            CHECK(!want || ncl > 0, "no attend merged its splits in a cluster on an sm_90 image");
            snprintf(what, sizeof what, "%llu attends merged in a cluster%s", ncl, ptxv >= 90 ? "" : " (not an sm_90 image)");
            add_result("cluster merge ran", what, -1, -1, !want || ncl > 0);
        }
        /* batches: the planner's shape, each shape forced, few splits; past 32 entries (the block's
           entry search counts 32 a step); head_dim 64 / 256, bf16 */
        test_batch(NEO_TYPE_F16, 128, 32, 8, quick ? 5 : 40, quick ? 700 : 20000, -1, 0);
        test_batch(NEO_TYPE_F16, 128, 32, 8, quick ? 5 : 9, quick ? 700 : 5000, 0, 0);
        test_batch(NEO_TYPE_BF16, 128, 32, 8, quick ? 5 : 9, quick ? 700 : 5000, 1, 0);
        test_batch(NEO_TYPE_F16, 128, 8, 8, quick ? 3 : 70, quick ? 300 : 3000, -1, 2);
        if (!quick) {
            test_batch(NEO_TYPE_BF16, 64, 14, 2, 33, 9000, -1, 0);
            test_batch(NEO_TYPE_F16, 256, 8, 4, 6, 3000, -1, 0);
        }
        test_batch_capture();
        test_append_batch();
        /* device-side lengths: eager calls with len, then append + attend captured and replayed */
        test_graph_args();
        const gcase *gc = quick ? gcases_quick : gcases_full;
        const size_t n_gc = quick ? sizeof gcases_quick / sizeof *gcases_quick : sizeof gcases_full / sizeof *gcases_full;
        for (size_t i = 0; i < n_gc; i++) test_graph_len(&gc[i]);
        test_batch_graph();
        test_two_streams(quick ? 2048 : 32768);
        wide_alone(ST);
        {
            char what[96];
            CHECK(WIDE.d64[0] && WIDE.d64[1], "no head_dim 64 tensor-core attend asked for the wide block's residency, eager and with len");
            snprintf(what, sizeof what, "%d residencies asked, each one block an SM", WIDE.asked);
            add_result("wide block alone on an SM", what, -1, -1, WIDE.alone && WIDE.d64[0] && WIDE.d64[1]);
        }
    }

    OPS.release(ST);
    cudaStreamDestroy(stream);

    double worst = 0;
    int    fails = 0;
    printf("\n| case                         | shape                                                      | rel err  | det | ok   |\n");
    printf("|------------------------------|------------------------------------------------------------|----------|-----|------|\n");
    for (int i = 0; i < n_results; i++) {
        const result *r = &results[i];
        char          e[16];
        if (r->err < 0) snprintf(e, sizeof e, "exact");
        else snprintf(e, sizeof e, "%.2e", r->err);
        if (r->err > worst && strcmp(r->name, "append")) worst = r->err;
        fails += !r->ok;
        printf("| %-28s | %-58s | %-8s | %-3s | %-4s |\n", r->name, r->shape, e, r->det < 0 ? "-" : r->det ? "yes" : "NO",
               r->ok ? "ok" : "FAIL");
    }
    printf("test_cuda_ops: %ld checks, %ld failures, %d failed rows, worst relative error %.2e\n", n_checks, n_fail, fails, worst);
    return n_fail || fails;
}
