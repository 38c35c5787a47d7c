/* test_ref.c - CPU attention against a float64 evaluation of the formula in API.md on the stored
   (rounded to kv_type) K/V: ||out - ref||_2 / ||ref||_2 < 1e-4 for every call, every CPU path
   (scalar, AVX2, AVX-512, AMX where the CPU has them) and thread count; outputs bitwise identical
   across thread counts for one path. Inputs come from a seeded xorshift: the seed is printed,
   NEO_TEST_SEED=N repeats a run; NEO_TEST_ONLY="in place" (a group's name as the run prints it)
   runs that group alone, NEO_TEST_ONLY_SPLIT=N the split and hybrid groups N times. Split layers (GPU heads + host heads, every pipeline) run on the
   header's stand-in GPU, with small stream-back chunks so that they take many, and a small bound
   on the OFF decodes that read their host heads in place, so that a layer's first decodes read
   them in place and its later ones stream them back. */
#define NEO_ATTN_STAGE_BYTES 8192u
#define NEO_ATTN_IN_PLACE_BYTES 16384u
/* every task the AMX tile path can take goes through it here, however few its queries (the
   library sends tasks of fewer than NEO__TILE_MIN_QUERIES to the AVX-512 kernels, tested as the
   avx512 path) */
#define NEO__TILE_MIN_QUERIES 1
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"

#include "check.h"
#include "cpu_isa.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOL 1e-4

/* NEO_TEST_QUICK=1 (make test's sanitizer runs): every case, path and kind of call, with fewer
   repetitions: each CPU path once per shape case (not the best one twice), 1 and 3 threads in
   the determinism cases, and prefills of at most one prefill task's tokens plus one (a full task
   and a partial one at every GQA group). The plain runs do everything. */
static int quick;

/* With NEO_TEST_CUDA=1 (make test-cuda: NEO_ATTN_CUDA=1, linked with neo_attn_cuda.cu) every
   case also runs on a real GPU runtime: the shape cases with no split, the split cases as they
   are; q, k, v and out go through device memory. */
#ifndef NEO_TEST_CUDA
#define NEO_TEST_CUDA 0
#endif
#if NEO_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

/* --- random numbers --- */

static uint64_t rng_s;
static uint64_t rng_u64(void) { /* xorshift64* */
    rng_s ^= rng_s >> 12, rng_s ^= rng_s << 25, rng_s ^= rng_s >> 27;
    return rng_s * 2685821657736338717ull;
}
static float rng_f(float lo, float hi) { return lo + (hi - lo) * (float)((double)(rng_u64() >> 11) / 9007199254740992.0); }
static void rng_fill(float *p, size_t n, float lo, float hi) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = rng_f(lo, hi);
}

/* --- the storage types, written independently of neo_attn: round to nearest, ties to even --- */

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

static uint16_t f32_to_f16(float f) {
    uint32_t x = f2u(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu, h, rem;
    if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);    /* NaN */
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);   /* >= 65520 rounds to infinity */
    if (ax < 0x38800000u) /* below 2^-14: a multiple of 2^-24, exact scaling, then nearbyint (ties even) */
        return (uint16_t)(sign | (uint32_t)nearbyintf(u2f(ax) * 16777216.0f));
    h = ((((ax >> 23) - 127u + 15u) << 10) | ((ax & 0x7FFFFFu) >> 13));
    rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    float mag;
    if (e == 0) mag = (float)m / 16777216.0f;
    else if (e == 31) mag = m ? u2f(0x7FC00000u) : u2f(0x7F800000u);
    else mag = u2f(((e - 15u + 127u) << 23) | (m << 13));
    return u2f(f2u(mag) | sign);
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

static float stored(neo_type t, float x) {
    if (t == NEO_TYPE_F16) return f16_to_f32(f32_to_f16(x));
    if (t == NEO_TYPE_BF16) return bf16_to_f32(f32_to_bf16(x));
    return x;
}

static void test_conversions(void) {
    check_context("the test's own f16/bf16 rounding");
    CHECK(f32_to_f16(1.0f) == 0x3C00 && f32_to_f16(-2.0f) == 0xC000 && f32_to_f16(65504.0f) == 0x7BFF);
    CHECK(f32_to_f16(65519.0f) == 0x7BFF && f32_to_f16(65520.0f) == 0x7C00);
    CHECK(f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00);            /* tie -> even */
    CHECK(f32_to_f16(1.0f + 3.0f / 2048) == 0x3C02);            /* tie -> even (up) */
    CHECK(f32_to_f16(1.0f + 1.0f / 2048 + 1.0f / 65536) == 0x3C01);
    CHECK(f32_to_f16(ldexpf(1.0f, -24)) == 0x0001 && f32_to_f16(ldexpf(1.0f, -25)) == 0x0000);
    CHECK(f32_to_f16(ldexpf(3.0f, -25)) == 0x0002 && f32_to_f16(ldexpf(1.0f, -14)) == 0x0400);
    CHECK(f32_to_f16(ldexpf(1023.5f, -24)) == 0x0400);          /* rounds up into the normals */
    CHECK(f16_to_f32(0x3555) == 0x1.554p-2f && f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    CHECK(f16_to_f32(0x83FF) == -ldexpf(1023.0f, -24) && f16_to_f32(0x7C00) == INFINITY);
    CHECK(f32_to_bf16(1.0f) == 0x3F80 && f32_to_bf16(1.0f + 1.0f / 256) == 0x3F80);
    CHECK(f32_to_bf16(1.0f + 3.0f / 256) == 0x3F82 && f32_to_bf16(-1.0f - 1.0f / 128) == 0xBF81);
    CHECK(bf16_to_f32(0x4049) == 3.140625f);
    {
        int i, ok = 1;
        for (i = 0; i < 100000; i++) { /* round trip of every f16 value near the ones the tests draw */
            uint16_t h = (uint16_t)(i % 0x7C00);
            ok &= f32_to_f16(f16_to_f32(h)) == h;
            ok &= f32_to_bf16(bf16_to_f32(h)) == h;
        }
        CHECK(ok);
    }
}

#if NEO__X86
/* The AVX-512 scores kernel sums the lanes of a tile's dot products with neo__hsum16x16 and of
   single cells with neo__hsum4x16; a score must not depend on which one ran, so they must agree
   bit for bit. Lanes of mixed magnitude and sign, so that any other order of additions rounds
   differently. */
NEO__AVX512 static int lane_sums_agree(void) {
    int ok = 1;
    for (int rep = 0; rep < 200; rep++) {
        float  in[16][16], want[16], got[16];
        __m512 x[16];
        for (int v = 0; v < 16; v++) {
            for (int l = 0; l < 16; l++) in[v][l] = rng_f(-1.0f, 1.0f) * ldexpf(1.0f, (int)(rng_u64() % 40) - 20);
            x[v] = _mm512_loadu_ps(in[v]);
        }
        for (int v = 0; v < 16; v += 4) _mm_storeu_ps(want + v, neo__hsum4x16(x[v], x[v + 1], x[v + 2], x[v + 3]));
        _mm512_storeu_ps(got, neo__hsum16x16(x));
        for (int f = 0; f < 16; f++) ok &= f2u(got[f]) == f2u(want[NEO__HSUM16_SRC(f)]);
    }
    return ok;
}
/* The AVX2 scores kernel sums the lanes of 8 dot products with neo__hsum8x8 and of 4 or fewer
   with neo__hsum4x8: the same agreement, the same inputs. */
NEO__AVX2 static int lane_sums_agree_avx2(void) {
    int ok = 1;
    for (int rep = 0; rep < 200; rep++) {
        float  in[8][8], want[8], got[8];
        __m256 x[8];
        for (int v = 0; v < 8; v++) {
            for (int l = 0; l < 8; l++) in[v][l] = rng_f(-1.0f, 1.0f) * ldexpf(1.0f, (int)(rng_u64() % 40) - 20);
            x[v] = _mm256_loadu_ps(in[v]);
        }
        for (int v = 0; v < 8; v += 4) _mm_storeu_ps(want + v, neo__hsum4x8(x[v], x[v + 1], x[v + 2], x[v + 3]));
        _mm256_storeu_ps(got, neo__hsum8x8(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]));
        for (int f = 0; f < 8; f++) ok &= f2u(got[f]) == f2u(want[f]);
    }
    return ok;
}
#endif
static void test_lane_sums(void) {
#if NEO__X86
    if (test_cpu_has(NEO_CPU_AVX2)) {
        check_context("AVX2 lane sums: neo__hsum8x8 against neo__hsum4x8");
        CHECK(lane_sums_agree_avx2());
    }
    if (!test_cpu_has(NEO_CPU_AVX512)) return;
    check_context("AVX-512 lane sums: neo__hsum16x16 against neo__hsum4x16");
    CHECK(lane_sums_agree());
#endif
}

/* --- the runtimes: every CPU path this machine has, with 1 to 4 threads --- */

/* the paths: the CPU ISAs, then the stand-in GPU and the real GPU */
enum { N_ISA = 4, P_STANDIN = N_ISA, P_CUDA, N_PATH };
static const neo_cpu_isa isa_list[N_ISA] = {NEO_CPU_SCALAR, NEO_CPU_AVX2, NEO_CPU_AVX512, NEO_CPU_AMX};
static int isa_ok[N_ISA];
static neo_runtime *rts[N_ISA][5]; /* [isa][n_threads] */
static neo_runtime *rts_gpu[5]; /* stand-in GPU, best CPU path, [n_threads]: 1 MAIN late, 2 in order, 3 COPY late */
static neo_runtime *rt_cuda;    /* a real GPU (NEO_TEST_CUDA), online cores */
static double max_err[N_PATH];  /* [path] */
static long n_calls[N_PATH];
static const char *const path_names[N_PATH] = {"scalar", "avx2", "avx512", "amx", "gpu-standin", "cuda"};
static const char *const pipe_names[4] = {"OFF", "ON", "AUTO", "HYBRID"};

/* Where the SIMD scores kernels send their prefetches (neo__kernels.pf: none, L1 or L2) must
   change no score: each shape's scores, bit for bit, with pf 0, 1 and 2; and the table's own
   choice follows this CPU's L1 data cache. */
static void test_prefetch_target(void) {
    static const neo_type types[3] = {NEO_TYPE_F16, NEO_TYPE_BF16, NEO_TYPE_F32};
    static const int      shapes[][3] = {{7, 64, 64}, {4, 64, 128}, {12, 37, 128}, {1, 5, 72}, {8, 64, 256}}; /* nq, nk, d */
    for (int i = 1; i < N_ISA; i++) {
        neo__kernels kr;
        if (!neo__kernels_init(&kr, isa_list[i])) continue;
        long l1 = neo__l1d_bytes();
        check_context("prefetch target: %s (L1 data cache %ld bytes)", path_names[i], l1);
        CHECK(kr.pf == (l1 > 0 && l1 < NEO__PREFETCH_L2_BELOW ? 2 : 1));
        for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
            for (int ti = 0; ti < 3; ti++) {
                int    nq = shapes[c][0], nk = shapes[c][1], d = shapes[c][2], ok = 1;
                size_t es = neo__type_size(types[ti]), nkv = (size_t)nk * d;
                float *q = (float *)malloc(sizeof(float) * (size_t)nq * d), *s[3];
                char  *kv = (char *)malloc(2 * nkv * es);
                rng_fill(q, (size_t)nq * d, -1.0f, 1.0f);
                for (size_t e = 0; e < 2 * nkv; e++) {
                    float x = rng_f(-1.0f, 1.0f);
                    if (types[ti] == NEO_TYPE_F32) memcpy(kv + e * 4, &x, 4);
                    else {
                        uint16_t h = types[ti] == NEO_TYPE_F16 ? f32_to_f16(x) : f32_to_bf16(x);
                        memcpy(kv + e * 2, &h, 2);
                    }
                }
                for (int pf = 0; pf < 3; pf++) {
                    s[pf] = (float *)malloc(sizeof(float) * (size_t)nq * NEO__BLOCK);
                    memset(s[pf], 0xff, sizeof(float) * (size_t)nq * NEO__BLOCK); /* NaN: every score written is seen */
                    kr.scores(s[pf], q, kv, kv + nkv * es, types[ti], nq, nk, d, d, pf);
                }
                for (int r = 0; r < nq; r++)
                    for (int b = 0; b < nk; b++)
                        ok &= f2u(s[0][r * NEO__BLOCK + b]) == f2u(s[1][r * NEO__BLOCK + b]) &&
                              f2u(s[0][r * NEO__BLOCK + b]) == f2u(s[2][r * NEO__BLOCK + b]) && s[0][r * NEO__BLOCK + b] == s[0][r * NEO__BLOCK + b];
                if (!CHECK(ok)) fprintf(stderr, "    nq %d nk %d d %d type %d\n", nq, nk, d, (int)types[ti]);
                for (int pf = 0; pf < 3; pf++) free(s[pf]);
                free(q);
                free(kv);
            }
    }
}

/* The calls a case makes, with activations in device memory on the real GPU. */
#if NEO_TEST_CUDA
static void *to_dev(const void *src, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (src && cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}
static float *dev_of(const float *src, size_t n) { return (float *)to_dev(src, n * sizeof(float)); }
#endif
/* The stand-in driven as an engine drives a GPU: q, k and v written and out read on the engine's
   stream (MAIN), through buffers of the stand-in's that live until a sync of their runtime has
   run what reads them (a late stream may run an op long after its call returned). */
static struct staged { neo_runtime *rt; float *p; } *staged;
static size_t n_staged, cap_staged;
/* a staged buffer of n floats for rt, or NULL */
static float *stage_new(neo_runtime *rt, size_t n) {
    float *p = (float *)malloc((n ? n : 1) * sizeof(float));
    if (n_staged == cap_staged) {
        struct staged *g = (struct staged *)realloc(staged, (cap_staged ? 2 * cap_staged : 64) * sizeof *g);
        if (!g) return free(p), (float *)NULL;
        staged = g, cap_staged = cap_staged ? 2 * cap_staged : 64;
    }
    if (p) staged[n_staged].rt = rt, staged[n_staged++].p = p;
    return p;
}
/* a buffer of n floats that MAIN fills with src[n] (poisoned until then; src is copied at once,
   as a copy from pageable memory reads it before it returns), or NULL */
static float *stage_in(neo_runtime *rt, const float *src, size_t n) {
    float *h = stage_new(rt, n), *p = stage_new(rt, n);
    if (!h || !p) return NULL;
    memcpy(h, src, n * sizeof(float));
    for (size_t e = 0; e < n; e++) p[e] = u2f(0x7FC0BEEFu);
    return rt->mem.copy(rt->dev_state, p, h, n * sizeof(float), NEO__STREAM_MAIN) == NEO_OK ? p : NULL;
}
/* neo_runtime_sync, then rt's staged buffers freed */
static neo_status stage_sync(neo_runtime *rt) {
    neo_status st = neo_runtime_sync(rt);
    size_t     j = 0;
    for (size_t i = 0; i < n_staged; i++)
        if (staged[i].rt == rt) free(staged[i].p);
        else staged[j++] = staged[i];
    n_staged = j;
    return st;
}
/* out[n] <- the staged so on MAIN, then the sync */
static neo_status stage_out(neo_runtime *rt, neo_status st, float *out, const float *so, size_t n) {
    if (st == NEO_OK) st = (neo_status)rt->mem.copy(rt->dev_state, out, so, n * sizeof(float), NEO__STREAM_MAIN);
    return stage_sync(rt) != NEO_OK && st == NEO_OK ? NEO_ERR_DEVICE : st;
}

static neo_status t_append(neo_layer *l, int on_gpu, const float *k, const float *v, size_t kn, size_t vn, int n) {
#if NEO_TEST_CUDA
    if (on_gpu) {
        float *dk = (float *)to_dev(k, kn * sizeof(float)), *dv = (float *)to_dev(v, vn * sizeof(float));
        neo_status st = dk && dv ? neo_attn_append(l, dk, dv, n) : NEO_ERR_DEVICE_MEMORY;
        if (cudaDeviceSynchronize() != cudaSuccess) st = NEO_ERR_DEVICE;
        cudaFree(dk), cudaFree(dv);
        return st;
    }
#endif
    (void)on_gpu;
    if (l->rt->gpu) { /* the stand-in */
        float *sk = stage_in(l->rt, k, kn), *sv = stage_in(l->rt, v, vn);
        return sk && sv ? neo_attn_append(l, sk, sv, n) : NEO_ERR_NO_MEMORY;
    }
    (void)kn, (void)vn;
    return neo_attn_append(l, k, v, n);
}
/* n_tok 0: decode. out: [nq][n_head][dv], poisoned by the caller; on the GPU it is poisoned there too. */
static neo_status t_query(neo_layer *l, int on_gpu, const float *q, size_t qn, int n_tok, float *out, size_t on) {
#if NEO_TEST_CUDA
    if (on_gpu) {
        float *dq = (float *)to_dev(q, qn * sizeof(float)), *dout = (float *)to_dev(out, on * sizeof(float));
        neo_status st = dq && dout ? (n_tok ? neo_attn_prefill(l, dq, n_tok, dout) : neo_attn_decode(l, dq, dout))
                                   : NEO_ERR_DEVICE_MEMORY;
        if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(out, dout, on * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
            st = NEO_ERR_DEVICE;
        cudaFree(dq), cudaFree(dout);
        return st;
    }
#endif
    (void)on_gpu;
    if (l->rt->gpu) { /* the stand-in; out comes poisoned */
        float     *sq = stage_in(l->rt, q, qn), *so = stage_in(l->rt, out, on);
        neo_status st = !sq || !so ? NEO_ERR_NO_MEMORY : n_tok ? neo_attn_prefill(l, sq, n_tok, so) : neo_attn_decode(l, sq, so);
        return stage_out(l->rt, st, out, so, on);
    }
    (void)qn, (void)on;
    return n_tok ? neo_attn_prefill(l, q, n_tok, out) : neo_attn_decode(l, q, out);
}

/* A batch decode of n layers (q: qn floats, out: on floats, poisoned by the caller) as an engine
   calls it on the GPU, the stand-in or the CPU, synced. */
static neo_status t_decode_batch(neo_runtime *rt, int on_gpu, neo_layer *const *ls, int n, const float *q, size_t qn, float *out,
                                 size_t on) {
    neo_status st;
#if NEO_TEST_CUDA
    if (on_gpu) {
        float *dq = dev_of(q, qn), *dout = dev_of(out, on);
        st = dq && dout ? neo_attn_decode_batch(ls, n, dq, dout) : NEO_ERR_DEVICE_MEMORY;
        if (neo_runtime_sync(rt) != NEO_OK || (dout && cudaMemcpy(out, dout, on * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess))
            st = st == NEO_OK ? NEO_ERR_DEVICE : st;
        cudaFree(dq), cudaFree(dout);
        return st;
    }
#endif
    (void)on_gpu;
    if (rt->gpu) { /* the stand-in (t_query) */
        float *sq = stage_in(rt, q, qn), *so = stage_in(rt, out, on);
        st = sq && so ? neo_attn_decode_batch(ls, n, sq, so) : NEO_ERR_NO_MEMORY;
        return stage_out(rt, st, out, so, on);
    }
    st = neo_attn_decode_batch(ls, n, q, out);
    return st == NEO_OK ? neo_runtime_sync(rt) : st;
}

static void open_runtimes(void) {
    int i, t;
    for (i = 0; i < N_ISA; i++) {
        isa_ok[i] = test_cpu_has(isa_list[i]);
        if (!isa_ok[i]) { /* reported at the end as not run, never counted */
            neo_runtime_desc rd = {0};
            neo_runtime     *rt = NULL;
            rd.n_threads = 1, rd.cpu_isa = isa_list[i];
            check_context("runtime %s, which this CPU or build lacks", neo_cpu_isa_name(isa_list[i]));
            CHECK_STATUS(neo_runtime_create(&rd, &rt), NEO_ERR_UNSUPPORTED);
            CHECK(rt == NULL);
            continue;
        }
        for (t = 1; t <= 4; t++) {
            neo_runtime_desc rd = {0};
            neo_runtime_info ri = {0, 0, NEO_CPU_AUTO};
            rd.n_threads = t, rd.cpu_isa = isa_list[i];
            check_context("runtime %s x%d", neo_cpu_isa_name(isa_list[i]), t);
            if (!CHECK_STATUS(neo_runtime_create(&rd, &rts[i][t]), NEO_OK)) {
                isa_ok[i] = 0;
                continue;
            }
            CHECK_STATUS(neo_runtime_get_info(rts[i][t], &ri), NEO_OK);
            CHECK(ri.cpu_isa == isa_list[i] && ri.n_threads == THREADS(t));
        }
    }
    for (t = 1; t <= 3; t++) {
        neo_runtime_desc rd = {0};
        neo_runtime_info ri = {0, 0, NEO_CPU_AUTO};
        rd.n_threads = t, rd.gpu = 1, rd.gpu_standin = t == 1 ? 3 : t == 2 ? 1 : 2;
        check_context("stand-in GPU runtime x%d", t);
        if (CHECK_STATUS(neo_runtime_create(&rd, &rts_gpu[t]), NEO_OK)) {
            CHECK_STATUS(neo_runtime_get_info(rts_gpu[t], &ri), NEO_OK);
            CHECK(ri.gpu == 1 && ri.n_threads == THREADS(t));
        }
    }
#if NEO_TEST_CUDA
    {
        neo_runtime_desc rd = {0};
        const char *th = getenv("NEO_TEST_CUDA_THREADS");
        rd.gpu = 1;
        rd.n_threads = th && *th ? atoi(th) : 0;
        check_context("CUDA runtime");
        if (!CHECK_STATUS(neo_runtime_create(&rd, &rt_cuda), NEO_OK)) rt_cuda = NULL;
    }
#endif
}

/* relative L2 error of out: [n][dv] against ref */
static double rel_err(const float *out, const double *ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t e = 0; e < n; e++) {
        double diff = (double)out[e] - ref[e];
        num += diff * diff, den += ref[e] * ref[e];
    }
    return sqrt(num) / sqrt(den);
}
static void note_err(int path, double err) {
    if (!(err <= max_err[path])) max_err[path] = err;
    n_calls[path]++;
}

/* --- one test case: a desc, the same cache in several layers (one per runtime), a mirror of the stored K/V --- */

enum { MAXL = 4 * N_ISA + 1 }; /* mode 1: every ISA at 1-4 threads, and the GPU */
typedef struct tcase {
    neo_layer_desc d;
    float sinks[64];
    int n, isa[MAXL], thr[MAXL]; /* a path: an ISA, P_STANDIN or P_CUDA */
    int bitwise;                 /* outputs of one path must match bitwise across thread counts */
    neo_layer *l[MAXL];
    float *ks, *vs; /* [n_ctx][n_head_kv][head_dim(_v)] as stored */
    int len, dv;
} tcase;

static int case_no;

/* mode 0: each CPU path once with a thread count that varies by case, the best path twice;
   mode 1: every CPU path with 1, 2, 3 and 4 threads;
   mode 2: the stand-in GPU with 1, 2 and 3 threads, MAIN late, no stream late, COPY late (bitwise
   equal unless the pipeline is AUTO, whose choice comes from timing). */
static int tc_open(tcase *c, const neo_layer_desc *d, int mode, const char *name) {
    int i, t;
    memset(c, 0, sizeof *c);
    c->d = *d;
    if (d->sinks) {
        memcpy(c->sinks, d->sinks, (size_t)d->n_head * sizeof(float));
        c->d.sinks = c->sinks;
    }
    c->dv = d->head_dim_v ? d->head_dim_v : d->head_dim;
    c->bitwise = mode != 2 || d->pipeline != NEO_PIPELINE_AUTO;
    case_no++;
    check_context("case %d %s: create", case_no, name);
    for (t = 1; mode == 2 && t <= 3; t++) {
        if (!rts_gpu[t] || !CHECK_STATUS(neo_layer_create(rts_gpu[t], &c->d, &c->l[c->n]), NEO_OK)) return 0;
        c->isa[c->n] = P_STANDIN, c->thr[c->n] = t, c->n++;
    }
    for (i = 0; i < N_ISA && mode != 2; i++) {
        int best = i == (isa_ok[3] ? 3 : isa_ok[2] ? 2 : isa_ok[1] ? 1 : 0), tsel = 1 + (case_no + i) % 4;
        if (!isa_ok[i]) continue;
        for (t = 1; t <= 4; t++) {
            if (mode == 0 && t != tsel && !(best && !quick && t == 1 + tsel % 4)) continue;
            if (mode == 1 && quick && t % 2 == 0) continue;
            if (!CHECK_STATUS(neo_layer_create(rts[i][t], &c->d, &c->l[c->n]), NEO_OK)) return 0;
            c->isa[c->n] = i, c->thr[c->n] = t, c->n++;
        }
    }
    if (rt_cuda) { /* the real GPU takes every case: with no split unless the case is a split one */
        if (!CHECK_STATUS(neo_layer_create(rt_cuda, &c->d, &c->l[c->n]), NEO_OK)) return 0;
        c->isa[c->n] = P_CUDA, c->thr[c->n] = 0, c->n++;
    }
    c->ks = (float *)malloc((size_t)d->n_ctx * (size_t)d->n_head_kv * (size_t)d->head_dim * sizeof(float));
    c->vs = (float *)malloc((size_t)d->n_ctx * (size_t)d->n_head_kv * (size_t)c->dv * sizeof(float));
    check_context("case %d %s", case_no, name);
    return CHECK(c->ks && c->vs && c->n > 0);
}

static void tc_close(tcase *c) {
    int i;
    for (i = 0; i < c->n; i++) {
        if (c->l[i] && c->l[i]->rt->gpu) stage_sync(c->l[i]->rt);
        neo_layer_destroy(c->l[i]);
    }
    free(c->ks), free(c->vs);
}

/* appends n tokens of k: [n][n_head_kv][head_dim], v: [n][n_head_kv][head_dim_v] to every layer and the mirror */
static void tc_append_vals(tcase *c, const float *k, const float *v, int n) {
    size_t rk = (size_t)c->d.n_head_kv * (size_t)c->d.head_dim, rv = (size_t)c->d.n_head_kv * (size_t)c->dv, j;
    int full = c->len + n > c->d.n_ctx, i;
    for (i = 0; i < c->n; i++) {
        CHECK_STATUS(t_append(c->l[i], c->isa[i] == P_CUDA, k, v, (size_t)n * rk, (size_t)n * rv, n), full ? NEO_ERR_FULL : NEO_OK);
        CHECK(neo_layer_length(c->l[i]) == (full ? c->len : c->len + n));
    }
    if (!full) {
        for (j = 0; j < (size_t)n * rk; j++) c->ks[(size_t)c->len * rk + j] = stored(c->d.kv_type, k[j]);
        for (j = 0; j < (size_t)n * rv; j++) c->vs[(size_t)c->len * rv + j] = stored(c->d.kv_type, v[j]);
        c->len += n;
    }
}

static void tc_append(tcase *c, int n) {
    size_t rk = (size_t)c->d.n_head_kv * (size_t)c->d.head_dim, rv = (size_t)c->d.n_head_kv * (size_t)c->dv;
    float *k = (float *)malloc((size_t)n * rk * sizeof(float)), *v = (float *)malloc((size_t)n * rv * sizeof(float));
    if (CHECK(k && v)) {
        rng_fill(k, (size_t)n * rk, -2.0f, 2.0f), rng_fill(v, (size_t)n * rv, -2.0f, 2.0f);
        tc_append_vals(c, k, v, n);
    }
    free(k), free(v);
}

static void tc_truncate(tcase *c, int n) {
    int i;
    for (i = 0; i < c->n; i++) {
        CHECK_STATUS(neo_layer_truncate(c->l[i], n), NEO_OK);
        CHECK(neo_layer_length(c->l[i]) == n);
    }
    c->len = n;
}

static double alibi_slope(int h, int n_head, double max_bias) {
    int n2 = 1;
    while (n2 * 2 <= n_head) n2 *= 2;
    if (h < n2) return pow(pow(2.0, -max_bias / n2), h + 1);
    return pow(pow(2.0, -max_bias / (2.0 * n2)), 2 * (h - n2) + 1);
}

/* float64 attention of n_tok queries (the last n_tok positions) over the mirror */
/* The float64 oracle is the test's own arithmetic, not the library's: the sanitizer runs leave
   it uninstrumented (a quarter of their time went to checking its loads). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define NEO_TEST_ORACLE __attribute__((no_sanitize("address", "undefined", "thread")))
#else
#define NEO_TEST_ORACLE
#endif
NEO_TEST_ORACLE static void reference(const tcase *c, const float *q, int n_tok, double *ref) {
    const neo_layer_desc *d = &c->d;
    int hd = d->head_dim, dv = c->dv, group = d->n_head / d->n_head_kv, i, h, j, e;
    double scale = d->scale > 0 ? (double)d->scale : 1.0 / sqrt((double)hd);
    double *s = (double *)malloc((size_t)c->len * sizeof(double));
    if (!s) return;
    for (i = 0; i < n_tok; i++) {
        int p = c->len - n_tok + i;
        for (h = 0; h < d->n_head; h++) {
            const float *qh = q + ((size_t)i * (size_t)d->n_head + (size_t)h) * (size_t)hd;
            int kh = h / group;
            double m = -INFINITY, den = 0.0, slope = d->max_alibi_bias > 0 ? alibi_slope(h, d->n_head, d->max_alibi_bias) : 0;
            double *o = ref + ((size_t)i * (size_t)d->n_head + (size_t)h) * (size_t)dv;
            for (j = 0; j <= p; j++) {
                const float *kj = c->ks + ((size_t)j * (size_t)d->n_head_kv + (size_t)kh) * (size_t)hd;
                double dot = 0.0;
                for (e = 0; e < hd; e++) dot += (double)qh[e] * (double)kj[e];
                dot *= scale;
                if (d->softcap > 0) dot = (double)d->softcap * tanh(dot / (double)d->softcap);
                if (d->max_alibi_bias > 0) dot -= slope * (double)(p - j);
                s[j] = dot;
                if (dot > m) m = dot;
            }
            if (d->sinks && (double)d->sinks[h] > m) m = (double)d->sinks[h];
            for (e = 0; e < dv; e++) o[e] = 0.0;
            for (j = 0; j <= p; j++) {
                const float *vj = c->vs + ((size_t)j * (size_t)d->n_head_kv + (size_t)kh) * (size_t)dv;
                double w = exp(s[j] - m);
                den += w;
                for (e = 0; e < dv; e++) o[e] += w * (double)vj[e];
            }
            if (d->sinks) den += exp((double)d->sinks[h] - m);
            for (e = 0; e < dv; e++) o[e] /= den;
        }
    }
    free(s);
}

/* n_tok 0: decode; else prefill of n_tok queries. Every layer against the reference, and bitwise
   against the first layer of the same CPU path. */
static void tc_query_q(tcase *c, int n_tok, const float *qv);
static void tc_query(tcase *c, int n_tok) { tc_query_q(c, n_tok, NULL); }
/* the same with the queries given: qv: [n_tok or 1][n_head][head_dim], NULL = random */
static void tc_query_q(tcase *c, int n_tok, const float *qv) {
    int cap = neo__prefill_tokens(c->d.n_head / c->d.n_head_kv) + 1;
    if (quick && n_tok > cap && n_tok <= c->len) n_tok = cap;
    int nq = n_tok ? n_tok : 1, i, first[N_PATH] = {-1, -1, -1, -1, -1, -1};
    size_t nqe = (size_t)nq * (size_t)c->d.n_head * (size_t)c->d.head_dim;
    size_t no = (size_t)nq * (size_t)c->d.n_head * (size_t)c->dv, e;
    float *q = (float *)malloc(nqe * sizeof(float)), *out = (float *)malloc((size_t)c->n * no * sizeof(float));
    double *ref = (double *)malloc(no * sizeof(double));
    if (!CHECK(q && out && ref)) goto done;
    if (qv) memcpy(q, qv, nqe * sizeof(float));
    else rng_fill(q, nqe, -2.0f, 2.0f);
    for (e = 0; e < (size_t)c->n * no; e++) out[e] = u2f(0x7FC0DEADu); /* a missed write stays NaN */
    if (c->len == 0 || nq > c->len) {
        for (i = 0; i < c->n; i++)
            CHECK_STATUS(t_query(c->l[i], c->isa[i] == P_CUDA, q, nqe, n_tok, out, no), NEO_ERR_INVALID_ARG);
        goto done;
    }
    reference(c, q, nq, ref);
    for (i = 0; i < c->n; i++) {
        float *o = out + (size_t)i * no;
        double num = 0.0, den = 0.0, err;
        neo_status st = t_query(c->l[i], c->isa[i] == P_CUDA, q, nqe, n_tok, o, no);
        CHECK_STATUS(st, NEO_OK);
        for (e = 0; e < no; e++) {
            double diff = (double)o[e] - ref[e];
            num += diff * diff, den += ref[e] * ref[e];
        }
        err = sqrt(num) / sqrt(den);
        if (!CHECK(err < TOL))
            fprintf(stderr, "    %s x%d: %s n_tok %d len %d: rel err %.3g\n", path_names[c->isa[i]], c->thr[i],
                    n_tok ? "prefill" : "decode", n_tok, c->len, err);
        if (!(err <= max_err[c->isa[i]])) max_err[c->isa[i]] = err;
        n_calls[c->isa[i]]++;
        if (first[c->isa[i]] < 0) first[c->isa[i]] = i;
        else if (c->bitwise && !CHECK(memcmp(o, out + (size_t)first[c->isa[i]] * no, no * sizeof(float)) == 0))
            fprintf(stderr, "    %s: x%d and x%d differ (%s n_tok %d len %d)\n", path_names[c->isa[i]],
                    c->thr[first[c->isa[i]]], c->thr[i], n_tok ? "prefill" : "decode", n_tok, c->len);
    }
done:
    free(q), free(out), free(ref);
}

/* decode, then prefill of n_tok (if > 0) */
static void tc_both(tcase *c, int n_tok) {
    tc_query(c, 0);
    if (n_tok > 0) tc_query(c, n_tok);
}

static neo_layer_desc shape(int n_head, int n_head_kv, int hd, int dv, int n_ctx, neo_type t) {
    neo_layer_desc d = {0};
    d.n_head = n_head, d.n_head_kv = n_head_kv, d.head_dim = hd, d.head_dim_v = dv, d.n_ctx = n_ctx, d.kv_type = t;
    return d;
}

static void set_sinks(float *s, int n) {
    int h;
    for (h = 0; h < n; h++) s[h] = h % 4 == 3 ? 16.0f : rng_f(-3.0f, 3.0f); /* every 4th head a large sink */
}

/* appends in uneven chunks, each followed by a decode and a prefill of the chunk; prefill == len early on */
static void uneven_chunks(tcase *c) {
    tc_append(c, 1), tc_both(c, 1);
    tc_append(c, 7), tc_both(c, 8); /* prefill of the whole cache */
    tc_append(c, 300), tc_both(c, 300);
    tc_append(c, 33), tc_both(c, 33);
}

static void test_head_dims(void) {
    static const int hds[] = {1, 2, 3, 7, 8, 16, 31, 64, 100, 128, 256};
    static const int gqa[][2] = {{4, 2}, {2, 1}, {6, 3}, {8, 4}, {4, 1}, {3, 3}};
    int i;
    for (i = 0; i < (int)(sizeof hds / sizeof *hds); i++) {
        char name[96];
        tcase c;
        neo_layer_desc d = shape(gqa[i % 6][0], gqa[i % 6][1], hds[i], 0, 341, (neo_type)(i % 3));
        snprintf(name, sizeof name, "head_dim %d, %d/%d heads, kv_type %d", hds[i], d.n_head, d.n_head_kv, i % 3);
        if (tc_open(&c, &d, 0, name)) {
            uneven_chunks(&c); /* fills n_ctx exactly */
            tc_append(&c, 1);  /* NEO_ERR_FULL */
            tc_both(&c, 2);
        }
        tc_close(&c);
    }
}

static void test_head_dim_v(void) {
    static const int hv[][2] = {{64, 32}, {8, 24}, {128, 64}, {3, 5}, {16, 1}, {32, 96}};
    int i;
    for (i = 0; i < (int)(sizeof hv / sizeof *hv); i++) {
        char name[96];
        tcase c;
        neo_layer_desc d = shape(8, 2, hv[i][0], hv[i][1], 400, (neo_type)((i + 1) % 3));
        snprintf(name, sizeof name, "head_dim %d head_dim_v %d, kv_type %d", hv[i][0], hv[i][1], (i + 1) % 3);
        if (tc_open(&c, &d, 0, name)) uneven_chunks(&c);
        tc_close(&c);
    }
}

static void test_gqa(void) {
    static const int g[][2] = {{1, 1}, {3, 3}, {4, 2}, {8, 2}, {12, 3}, {16, 2}, {32, 4}, {16, 1}, {64, 4}};
    int i;
    for (i = 0; i < (int)(sizeof g / sizeof *g); i++) {
        char name[96];
        tcase c;
        neo_layer_desc d = shape(g[i][0], g[i][1], 32, 0, 700, (neo_type)(i % 3));
        snprintf(name, sizeof name, "GQA %d/%d heads (group %d), kv_type %d", g[i][0], g[i][1], g[i][0] / g[i][1], i % 3);
        if (tc_open(&c, &d, 0, name)) {
            uneven_chunks(&c);
            tc_append(&c, 259), tc_both(&c, 5);
        }
        tc_close(&c);
    }
}

/* each option alone and all together, for every kv_type; n_head 12 so both ALiBi slope branches run */
static void test_options(void) {
    static const char *names[] = {"none", "scale", "softcap", "alibi", "sinks", "all", "alibi 5 heads", "weak alibi"};
    int t, o;
    for (t = 0; t < 3; t++) {
        for (o = 0; o < 8; o++) {
            char name[96];
            tcase c;
            float sinks[12];
            neo_layer_desc d = shape(12, 4, 32, o == 5 ? 48 : 0, 1100, (neo_type)t);
            if (o == 1) d.scale = 0.37f;
            if (o == 2) d.softcap = 1.5f;
            if (o == 3) d.max_alibi_bias = 8.0f;
            if (o == 4 || o == 5) set_sinks(sinks, 12), d.sinks = sinks;
            if (o == 5) d.scale = 0.2f, d.softcap = 3.0f, d.max_alibi_bias = 4.0f;
            if (o == 6) d.n_head = 5, d.n_head_kv = 1, d.max_alibi_bias = 8.0f;
            if (o == 7) d.max_alibi_bias = 0.25f; /* slopes small enough that far cells still count */
            snprintf(name, sizeof name, "options %s, kv_type %d", names[o], t);
            if (tc_open(&c, &d, 0, name)) {
                tc_append(&c, 1), tc_both(&c, 1);
                tc_append(&c, 7), tc_both(&c, 8);
                tc_append(&c, 300), tc_both(&c, 60);
                tc_append(&c, 33), tc_both(&c, 33);
                tc_append(&c, 700), tc_both(&c, 9);
            }
            tc_close(&c);
        }
    }
}

/* Scores far from 0, where the softmax must subtract its running maximum, and the sink's when the
   sink is larger (exp overflows float past 88.7): every score near -120; one cell's near +120 and
   the others' near 0 (the first cell, which a maximum must not skip); a sink of 89.5 over scores
   near 0 with values near 1e30, so that the output, near 1e-8, is all in the sink's tail. K rows
   are a random direction k0 plus noise, and q is a multiple of k0. Decode and a prefill of 2. */
static void test_large_scores(void) {
    static const char *names[] = {"every score near -120", "the first cell's score near +120", "a sink 89.5 above the scores"};
    int t, kind, j, e, h;
    for (kind = 0; kind < 3; kind++) {
        for (t = 0; t < 3; t++) {
            char name[96];
            tcase c;
            float sinks[4], k0[64], *k = NULL, *v = NULL, q[2 * 4 * 64];
            const int n = 300, hd = 64;
            neo_layer_desc d = shape(4, 1, hd, 0, n, (neo_type)t);
            if (kind == 2 && t == NEO_TYPE_F16) continue; /* values of 1e30 are past f16 */
            if (kind == 2) sinks[0] = sinks[1] = sinks[2] = sinks[3] = 89.5f, d.sinks = sinks;
            snprintf(name, sizeof name, "large scores: %s, kv_type %d", names[kind], t);
            if (tc_open(&c, &d, 0, name) && CHECK((k = (float *)malloc(sizeof(float) * n * hd)) != NULL) &&
                CHECK((v = (float *)malloc(sizeof(float) * n * hd)) != NULL)) {
                float beta = 0.0f, kk = 0.0f;
                rng_fill(k0, hd, -1.0f, 1.0f);
                for (e = 0; e < hd; e++) kk += k0[e] * k0[e];
                for (j = 0; j < n; j++)
                    for (e = 0; e < hd; e++) {
                        float noise = rng_f(-0.05f, 0.05f);
                        k[j * hd + e] = kind == 1 ? (j == 0 ? k0[e] : noise) : k0[e] + noise;
                        v[j * hd + e] = rng_f(-2.0f, 2.0f) * (kind == 2 ? 1e30f : 1.0f);
                    }
                /* score = beta * kk / sqrt(hd) for k0 itself */
                beta = kind == 2 ? 0.0f : (kind == 0 ? -120.0f : 120.0f) * 8.0f / kk;
                for (h = 0; h < 2 * 4; h++)
                    for (e = 0; e < hd; e++) q[h * hd + e] = beta * k0[e] + (kind == 2 ? rng_f(-1e-3f, 1e-3f) : 0.0f);
                tc_append_vals(&c, k, v, n);
                tc_query_q(&c, 0, q);
                tc_query_q(&c, 2, q);
            }
            free(k), free(v);
            tc_close(&c);
        }
    }
}

/* contexts across the implementation's chunking (256 cells, more when long), up to a full cache */
static void test_long(void) {
    static const int lens[] = {1, 255, 256, 257, 1000, 3000, 5000};
    int t, i;
    for (t = 0; t < 3; t++) {
        char name[96];
        tcase c;
        float sinks[8];
        neo_layer_desc d = shape(8, 2, 64, 0, 5000, (neo_type)t);
        if (t == 2) set_sinks(sinks, 8), d.sinks = sinks, d.softcap = 2.0f;
        snprintf(name, sizeof name, "long context, kv_type %d", t);
        if (tc_open(&c, &d, 0, name)) {
            for (i = 0; i < 7; i++) {
                tc_append(&c, lens[i] - c.len);
                tc_both(&c, lens[i] == 1000 ? 100 : lens[i] == 5000 ? 16 : lens[i] < 3 ? 1 : 3);
            }
            tc_append(&c, 1); /* full: NEO_ERR_FULL, nothing changes */
            tc_both(&c, 2);
        }
        tc_close(&c);
    }
    /* past 256 chunks of 256 cells the chunks grow: a small shape across that edge */
    for (t = 0; t < 2; t++) {
        static const int vlens[] = {65535, 65536, 65537, 66000, 70001};
        char name[96];
        tcase c;
        float sinks[4];
        neo_layer_desc d = shape(4, 2, 16, 8, 70001, t ? NEO_TYPE_F32 : NEO_TYPE_BF16);
        set_sinks(sinks, 4), d.sinks = t ? sinks : NULL;
        snprintf(name, sizeof name, "very long context, kv_type %d", d.kv_type);
        if (tc_open(&c, &d, 0, name)) {
            for (i = 0; i < 5; i++) tc_append(&c, vlens[i] - c.len), tc_both(&c, i == 4 ? 5 : 2);
            tc_append(&c, 1);
            tc_both(&c, 0);
        }
        tc_close(&c);
    }
}

static void test_truncate(void) {
    int t;
    for (t = 0; t < 3; t++) {
        char name[96];
        tcase c;
        neo_layer_desc d = shape(4, 1, 32, 0, 700, (neo_type)t);
        if (t == 1) d.max_alibi_bias = 2.0f;
        snprintf(name, sizeof name, "truncate then append, kv_type %d", t);
        if (tc_open(&c, &d, 0, name)) {
            tc_append(&c, 300), tc_append(&c, 300), tc_both(&c, 4);
            tc_truncate(&c, 250), tc_both(&c, 250);
            tc_append(&c, 100), tc_both(&c, 100); /* new rows over old ones */
            tc_truncate(&c, 350), tc_both(&c, 0);
            tc_truncate(&c, 0), tc_both(&c, 1);   /* empty: NEO_ERR_INVALID_ARG */
            tc_append(&c, 5), tc_both(&c, 5);
            tc_truncate(&c, 1), tc_both(&c, 1);
            tc_append(&c, 699), tc_both(&c, 3);
            tc_append(&c, 1);                     /* full */
            tc_truncate(&c, 699), tc_append(&c, 1), tc_both(&c, 2);
        }
        tc_close(&c);
    }
}

/* a small full cache: decode works, the next append is NEO_ERR_FULL and changes nothing */
static void test_full(void) {
    int t;
    for (t = 0; t < 3; t++) {
        char name[96];
        tcase c;
        neo_layer_desc d = shape(6, 2, 24, 40, 37, (neo_type)t);
        snprintf(name, sizeof name, "full cache, kv_type %d", t);
        if (tc_open(&c, &d, 0, name)) {
            tc_append(&c, 30), tc_append(&c, 7), tc_both(&c, 37);
            tc_append(&c, 1), tc_both(&c, 37);
            tc_append(&c, 38);
            tc_truncate(&c, 36), tc_append(&c, 1), tc_both(&c, 1);
        }
        tc_close(&c);
    }
}

/* every CPU path x 1..4 threads: bitwise equal per path, and each under the bound */
/* A gated decode (the CPU half of both halves at once): the tasks wait for a flag another thread
   sets later (the device, in the library), warming their rows meanwhile; the output must be
   bitwise the ungated call's, with NaN-poisoned outputs first. */
typedef struct gate_opener {
    unsigned *flag;
    unsigned  seq;
} gate_opener;
static void *open_gate_later(void *arg) {
    gate_opener    *g = (gate_opener *)arg;
    struct timespec ts = {0, 3000000}; /* 3 ms: every task is waiting by then */
    nanosleep(&ts, NULL);
    __atomic_store_n(g->flag, g->seq, __ATOMIC_RELEASE);
    return NULL;
}
static void test_gated(void) {
    const int   ctx = 1500, n_head = 8, n_kv = 2, d = 64;
    neo_runtime *rt = NULL;
    for (int i = N_ISA - 1; i >= 0 && !rt; i--)
        if (isa_ok[i]) rt = rts[i][3];
    if (!rt) return;
    neo_layer_desc ld = shape(n_head, n_kv, d, d, 2048, NEO_TYPE_F16);
    neo_layer     *L = NULL;
    check_context("gated decode: layer");
    if (!CHECK_STATUS(neo_layer_create(rt, &ld, &L), NEO_OK)) return;
    float *k = (float *)malloc(sizeof(float) * (size_t)ctx * n_kv * d), *v = (float *)malloc(sizeof(float) * (size_t)ctx * n_kv * d);
    float  q[8 * 64], ref[8 * 64], out[8 * 64];
    rng_fill(k, (size_t)ctx * n_kv * d, -1.0f, 1.0f);
    rng_fill(v, (size_t)ctx * n_kv * d, -1.0f, 1.0f);
    rng_fill(q, sizeof q / sizeof *q, -1.0f, 1.0f);
    CHECK_STATUS(neo_attn_append(L, k, v, ctx), NEO_OK);
    CHECK_STATUS(neo_attn_decode(L, q, ref), NEO_OK);
    for (int round = 0; round < 3; round++) {
        unsigned       flag = 0;
        gate_opener    go = {&flag, 7u + (unsigned)round};
        pthread_t      th;
        neo__attn_args a;
        for (size_t i = 0; i < sizeof out / sizeof *out; i++) out[i] = NAN;
        neo__layer_args(L, &a, q, 1, out, 0);
        a.k = L->k_host;
        a.v = L->v_host;
        a.h1 = L->n_head_kv;
        a.gate = &flag;
        a.gate_seq = go.seq;
        check_context("gated decode: round %d", round);
        if (!CHECK(pthread_create(&th, NULL, open_gate_later, &go) == 0)) break;
        CHECK_STATUS((neo_status)neo__cpu_attend(rt, &a), NEO_OK);
        pthread_join(th, NULL);
        CHECK(memcmp(out, ref, sizeof out) == 0);
    }
    neo_layer_destroy(L);
    free(k);
    free(v);
}

static void test_determinism(void) {
    char name[96];
    tcase c;
    float sinks[16];
    neo_layer_desc d = shape(8, 2, 128, 0, 3000, NEO_TYPE_F16);
    set_sinks(sinks, 8), d.sinks = sinks, d.scale = 0.1f, d.softcap = 5.0f, d.max_alibi_bias = 0.5f;
    snprintf(name, sizeof name, "determinism: f16, all options, 3000 cells");
    if (tc_open(&c, &d, 1, name)) {
        tc_append(&c, 1000), tc_both(&c, 0);
        tc_append(&c, 2000), tc_both(&c, 5);
    }
    tc_close(&c);

    d = shape(16, 4, 64, 0, 1400, NEO_TYPE_BF16);
    snprintf(name, sizeof name, "determinism: bf16, 1300 cells");
    if (tc_open(&c, &d, 1, name)) {
        tc_append(&c, 257), tc_both(&c, 257);
        tc_append(&c, 743), tc_both(&c, 0);
        tc_append(&c, 300), tc_both(&c, 20);
    }
    tc_close(&c);

    d = shape(4, 4, 100, 36, 5000, NEO_TYPE_F32);
    set_sinks(sinks, 4), d.sinks = sinks;
    snprintf(name, sizeof name, "determinism: f32, head_dim 100/36, 5000 cells");
    if (tc_open(&c, &d, 1, name)) {
        tc_append(&c, 1), tc_both(&c, 1);
        tc_append(&c, 255), tc_both(&c, 0);
        tc_append(&c, 1), tc_both(&c, 0);
        tc_append(&c, 4743), tc_both(&c, 9);
    }
    tc_close(&c);

    d = shape(2, 1, 7, 3, 600, NEO_TYPE_F16);
    snprintf(name, sizeof name, "determinism: f16, head_dim 7/3, 513 cells");
    if (tc_open(&c, &d, 1, name)) {
        tc_append(&c, 513), tc_both(&c, 513);
    }
    tc_close(&c);
}

/* --- non-finite values, as the header's manual states them: a NaN or infinite score (scale * q . k)
   of a cell a query sees makes that query head's whole output NaN; a NaN or infinity in element e
   of a V row it sees makes its output element e NaN or infinite; cells after a query's position
   never change its output, whatever they hold. --- */

static int any_nonfinite(const float *x, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (!isfinite(x[i])) return 1;
    return 0;
}

/* Like tc_query, against those rules (on the stored values), with q_bad_head's first q element NaN
   when it is >= 0. Every output element is checked; the rest of a head is compared with the float64
   reference. */
static void tc_query_nf(tcase *c, int n_tok, int q_bad_head) {
    const neo_layer_desc *d = &c->d;
    int nq = n_tok ? n_tok : 1, hd = d->head_dim, dv = c->dv, group = d->n_head / d->n_head_kv, i, first[N_PATH] = {-1, -1, -1, -1, -1, -1};
    size_t nqe = (size_t)nq * (size_t)d->n_head * (size_t)hd, no = (size_t)nq * (size_t)d->n_head * (size_t)dv, e;
    float *q = (float *)malloc(nqe * sizeof(float)), *out = (float *)malloc((size_t)c->n * no * sizeof(float));
    double *ref = (double *)malloc(no * sizeof(double));
    /* the first cell with a non-finite K row, and with a non-finite V element e, of each KV head */
    int *bad_k = (int *)malloc((size_t)d->n_head_kv * sizeof(int)), *bad_v = (int *)malloc((size_t)d->n_head_kv * (size_t)dv * sizeof(int));
    if (!CHECK(q && out && ref && bad_k && bad_v && nq <= c->len)) goto done;
    for (i = 0; i < d->n_head_kv; i++) {
        int j;
        bad_k[i] = INT_MAX;
        for (e = 0; e < (size_t)dv; e++) bad_v[(size_t)i * (size_t)dv + e] = INT_MAX;
        for (j = c->len - 1; j >= 0; j--) {
            if (any_nonfinite(c->ks + ((size_t)j * (size_t)d->n_head_kv + (size_t)i) * (size_t)hd, (size_t)hd)) bad_k[i] = j;
            for (e = 0; e < (size_t)dv; e++)
                if (!isfinite(c->vs[((size_t)j * (size_t)d->n_head_kv + (size_t)i) * (size_t)dv + e])) bad_v[(size_t)i * (size_t)dv + e] = j;
        }
    }
    rng_fill(q, nqe, -2.0f, 2.0f);
    for (i = 0; q_bad_head >= 0 && i < nq; i++) q[((size_t)i * (size_t)d->n_head + (size_t)q_bad_head) * (size_t)hd] = NAN;
    for (e = 0; e < (size_t)c->n * no; e++) out[e] = u2f(0x7FC0DEADu);
    reference(c, q, nq, ref);
    for (i = 0; i < c->n; i++) {
        float *o = out + (size_t)i * no;
        int    tt, h, bad_heads = 0, bad_cols = 0, ok = 1;
        double worst = 0.0;
        CHECK_STATUS(t_query(c->l[i], c->isa[i] == P_CUDA, q, nqe, n_tok, o, no), NEO_OK);
        for (tt = 0; tt < nq; tt++) {
            int p = c->len - nq + tt;
            for (h = 0; h < d->n_head; h++) {
                size_t       th = (size_t)tt * (size_t)d->n_head + (size_t)h;
                const float *oh = o + th * (size_t)dv;
                const double *rh = ref + th * (size_t)dv;
                int          kh = h / group, nan_head = any_nonfinite(q + th * (size_t)hd, (size_t)hd) || bad_k[kh] <= p;
                double       num = 0.0, den = 0.0;
                if (nan_head) {
                    for (e = 0; e < (size_t)dv; e++) ok &= isnan(oh[e]) != 0;
                    bad_heads++;
                    continue;
                }
                for (e = 0; e < (size_t)dv; e++) {
                    if (bad_v[(size_t)kh * (size_t)dv + e] <= p) {
                        ok &= !isfinite(oh[e]);
                        bad_cols++;
                        continue;
                    }
                    num += ((double)oh[e] - rh[e]) * ((double)oh[e] - rh[e]), den += rh[e] * rh[e];
                }
                /* the finite part of a head under the bound (a NaN fails the comparison) */
                if (!(num <= TOL * TOL * den)) {
                    ok = 0;
                    if (den > 0 && !(sqrt(num / den) <= worst)) worst = sqrt(num / den);
                }
            }
        }
        if (!CHECK(ok))
            fprintf(stderr, "    %s x%d: %s n_tok %d len %d: wrong (%d NaN heads and %d non-finite columns expected; worst "
                    "finite head rel err %.3g)\n", path_names[c->isa[i]], c->thr[i], n_tok ? "prefill" : "decode", n_tok, c->len,
                    bad_heads, bad_cols, worst);
        n_calls[c->isa[i]]++;
        if (c->isa[i] == P_CUDA) continue; /* one GPU layer a case */
        if (first[c->isa[i]] < 0) first[c->isa[i]] = i;
        else if (c->bitwise && !CHECK(memcmp(o, out + (size_t)first[c->isa[i]] * no, no * sizeof(float)) == 0))
            fprintf(stderr, "    %s: x%d and x%d differ (%s n_tok %d len %d)\n", path_names[c->isa[i]], c->thr[first[c->isa[i]]],
                    c->thr[i], n_tok ? "prefill" : "decode", n_tok, c->len);
    }
done:
    free(q), free(out), free(ref), free(bad_k), free(bad_v);
}

/* One token of random K and V with element `elem` of KV head 0's K (which = 0) or V row set to val. */
static void tc_append_poisoned(tcase *c, int which, int elem, float val) {
    size_t rk = (size_t)c->d.n_head_kv * (size_t)c->d.head_dim, rv = (size_t)c->d.n_head_kv * (size_t)c->dv;
    float *k = (float *)malloc(rk * sizeof(float)), *v = (float *)malloc(rv * sizeof(float));
    if (CHECK(k && v)) {
        rng_fill(k, rk, -2.0f, 2.0f), rng_fill(v, rv, -2.0f, 2.0f);
        (which ? v : k)[elem] = val;
        tc_append_vals(c, k, v, 1);
    }
    free(k), free(v);
}

/* Every CPU path, the stand-in (split where there are two KV heads), the GPU: the prefill case
   reported (the last of 10 cells poisoned), the SIMD case reported (cell 5 of 70), a GQA group
   of 8 with tail columns, and softcap (which must not hide an infinite score) with ALiBi and
   sinks. The cell is poisoned in K or V with inf, NaN, 1e6 (infinite in F16) or -inf. */
static void test_nonfinite(void) {
    static const struct { int nh, nkv, hd, dv, P, N; float softcap, alibi; } sh[] = {
        {2, 1, 8, 0, 9, 10, 0, 0}, {4, 2, 16, 0, 5, 70, 0, 0}, {16, 2, 100, 36, 130, 140, 0, 0}, {8, 4, 64, 0, 63, 150, 3.0f, 2.0f}};
    static const float vals[] = {INFINITY, NAN, 1e6f, -INFINITY};
    static const char *const vname[] = {"inf", "NaN", "1e6", "-inf"};
    int s, w, vi, mode, k = 0;
    for (s = 0; s < 4; s++)
        for (w = 0; w < 2; w++)
            for (vi = 0; vi < 4; vi++, k++)
                for (mode = 0; mode <= 2; mode += 2) {
                    char           name[128];
                    tcase          c;
                    float          sinks[16];
                    neo_layer_desc d = shape(sh[s].nh, sh[s].nkv, sh[s].hd, sh[s].dv, 256, vi == 2 ? NEO_TYPE_F16 : (neo_type)(k % 3));
                    int            elem = (k * 7) % (w ? (sh[s].dv ? sh[s].dv : sh[s].hd) : sh[s].hd), P = sh[s].P, N = sh[s].N;
                    d.softcap = sh[s].softcap, d.max_alibi_bias = sh[s].alibi;
                    if (s == 3) set_sinks(sinks, 8), d.sinks = sinks;
                    if (mode == 2 && sh[s].nkv > 1)
                        d.gpu_heads = 1, d.pipeline = k % 3 == 2 ? NEO_PIPELINE_HYBRID : (neo_pipeline)(k % 2);
                    snprintf(name, sizeof name, "non-finite %s %s in cell %d of %d, %d/%d/%d, kv_type %d%s", vname[vi], w ? "V" : "K", P, N,
                             d.n_head, d.n_head_kv, d.head_dim, d.kv_type, mode ? ", stand-in" : "");
                    if (tc_open(&c, &d, mode, name)) {
                        tc_append(&c, P);
                        tc_append_poisoned(&c, w, elem, vals[vi]);
                        tc_query_nf(&c, P + 1, -1), tc_query_nf(&c, 0, -1); /* the poisoned cell is the last one */
                        if (N > P + 1) tc_append(&c, N - P - 1);
                        tc_query_nf(&c, N, -1), tc_query_nf(&c, N - P, -1), tc_query_nf(&c, 0, -1);
                        tc_truncate(&c, P), tc_query_nf(&c, P < 4 ? P : 4, -1), tc_query_nf(&c, 0, -1); /* gone again */
                        if (k == 0) tc_query_nf(&c, 0, sh[s].nh - 1), tc_query_nf(&c, P, 0);   /* a NaN query */
                    }
                    tc_close(&c);
                }
}

/* A decode's chunk plan over len cells from c0 for n_heads heads (neo__chunk_plan, neo__chunk_of):
   1 to neo__max_chunks(len) chunks a head (what a layer of len cells reserves), and, for up to 8 heads, every task a distinct (head, chunk)
   whose cells, in chunk order, tile [c0, c0 + len) with no chunk empty. */
static void check_chunk_plan(int len, int n_heads, int c0) {
    neo__attn_args a;
    neo__attn_job  J;
    int           *lo, *hi_c, t, h, c, ok = 1;
    memset(&a, 0, sizeof a), memset(&J, 0, sizeof J);
    a.c0 = c0, a.c1 = c0 + len, a.h0 = 0, a.h1 = n_heads;
    J.a = &a;
    neo__chunk_plan(&J, len, n_heads);
    if (!CHECK(J.n_chunks >= 1 && J.n_chunks <= neo__max_chunks(len) && J.n_big >= 1 && J.n_big <= J.n_chunks &&
               (J.chunk <= NEO__MAX_CHUNK || J.chunk % NEO__BLOCK == 0))) {
        fprintf(stderr, "    length %d, %d heads: %d chunks of %d cells, %d big\n", len, n_heads, J.n_chunks, J.chunk, J.n_big);
        return;
    }
    if (n_heads > 8) return;
    lo = (int *)malloc(sizeof(int) * (size_t)n_heads * J.n_chunks), hi_c = (int *)malloc(sizeof(int) * (size_t)n_heads * J.n_chunks);
    if (!CHECK(lo && hi_c)) goto out;
    for (t = 0; t < n_heads * J.n_chunks; t++) lo[t] = -1;
    for (t = 0; t < n_heads * J.n_chunks && ok; t++) {
        int x0, x1;
        neo__chunk_of(&J, t, &h, &c, &x0, &x1);
        ok = h >= 0 && h < n_heads && c >= 0 && c < J.n_chunks && lo[h * J.n_chunks + c] == -1 && x0 >= c0 && x0 < x1 && x1 <= a.c1;
        if (ok) lo[h * J.n_chunks + c] = x0, hi_c[h * J.n_chunks + c] = x1;
    }
    for (h = 0; h < n_heads && ok; h++)
        for (c = 0; c < J.n_chunks && ok; c++)
            ok = lo[h * J.n_chunks + c] == (c ? hi_c[h * J.n_chunks + c - 1] : c0) && (c + 1 < J.n_chunks || hi_c[h * J.n_chunks + c] == a.c1);
    if (!CHECK(ok)) fprintf(stderr, "    length %d from %d, %d heads: the chunks do not tile the range\n", len, c0, n_heads);
out:
    free(lo), free(hi_c);
}

/* Cells at the end of the int range: the decode chunk plan at every length up to INT_MAX, and the
   attention of cells [INT_MAX - n, INT_MAX) bitwise that of the same cells at [0, n), decode and
   prefill, on every CPU path and the stand-in (within the bound on the GPU). */
static void test_int_range(void) {
    static const int lens[] = {1, 63, 64, 255, 256, 257, 4096, 4097, 32768, 65536, 131072, 262144, 262145, 1 << 30, INT_MAX - 1023,
                               INT_MAX - 1022, INT_MAX - 1000, INT_MAX - 1, INT_MAX};
    static const int heads[] = {1, 2, 3, 7, 8, 65536};
    const int        n = 2999, nh = 8, nkv = 2, hd = 64;
    neo_runtime     *rt[N_PATH] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int              i, j, r;
    check_context("decode chunks at lengths up to INT_MAX");
    for (i = 0; i < (int)(sizeof lens / sizeof *lens); i++)
        for (j = 0; j < (int)(sizeof heads / sizeof *heads); j++) {
            check_chunk_plan(lens[i], heads[j], 0);
            check_chunk_plan(lens[i], heads[j], INT_MAX - lens[i]); /* ending at the top of the int range */
        }
    { /* every length where a layer's reservation is below NEO__MAX_CHUNKS chunks a head */
        int len, bad = 0;
        for (len = 1; len <= NEO__MAX_CHUNKS * (NEO__MIN_CHUNK / 2) + NEO__MIN_CHUNK && !bad; len++)
            for (j = 0; j < (int)(sizeof heads / sizeof *heads) && !bad; j++) {
                neo__attn_job J;
                memset(&J, 0, sizeof J);
                neo__chunk_plan(&J, len, heads[j]);
                if (J.n_chunks > neo__max_chunks(len)) bad = len;
            }
        if (!CHECK(!bad)) fprintf(stderr, "    length %d: more chunks than neo__max_chunks\n", bad);
    }
    for (i = 0; i < N_ISA; i++) rt[i] = isa_ok[i] ? rts[i][2] : NULL;
    rt[P_STANDIN] = rts_gpu[3];
    rt[P_CUDA] = rt_cuda;
    for (r = 0; r < N_PATH; r++) {
        neo_layer_desc ld = shape(nh, nkv, hd, 0, n, (neo_type)(r % 3));
        neo_layer     *L = NULL;
        float         *k, *v, *q, *out[2];
        const void    *kc, *vc;
        int            dev = r >= P_STANDIN;
        if (!rt[r]) continue;
        check_context("cells below INT_MAX: %s", path_names[r]);
        if (!CHECK_STATUS(neo_layer_create(rt[r], &ld, &L), NEO_OK)) continue;
        k = (float *)malloc(sizeof(float) * (size_t)n * nkv * hd), v = (float *)malloc(sizeof(float) * (size_t)n * nkv * hd);
        q = (float *)malloc(sizeof(float) * 5 * nh * hd);
        out[0] = (float *)malloc(sizeof(float) * 5 * nh * hd), out[1] = (float *)malloc(sizeof(float) * 5 * nh * hd);
        if (CHECK(k && v && q && out[0] && out[1])) {
            rng_fill(k, (size_t)n * nkv * hd, -2.0f, 2.0f), rng_fill(v, (size_t)n * nkv * hd, -2.0f, 2.0f), rng_fill(q, 5 * nh * hd, -2.0f, 2.0f);
            CHECK_STATUS(t_append(L, r == P_CUDA, k, v, (size_t)n * nkv * hd, (size_t)n * nkv * hd, n), NEO_OK);
            /* L stores K and V itself: device memory on a GPU runtime, else host */
            kc = dev ? L->k_dev : L->k_host, vc = dev ? L->v_dev : L->v_host;
            for (j = 0; j < 2; j++) { /* decode, then a prefill of 5 */
                int nt = j ? 5 : 1, top;
                size_t no = (size_t)nt * nh * hd;
                for (top = 0; top < 2; top++) {
                    neo__attn_args a;
                    float *qd = q, *od = out[top];
                    for (size_t e = 0; e < no; e++) out[top][e] = u2f(0x7FC0DEADu);
#if NEO_TEST_CUDA
                    if (r == P_CUDA) qd = (float *)to_dev(q, no * sizeof(float)), od = (float *)to_dev(out[top], no * sizeof(float));
#endif
                    neo__layer_args(L, &a, qd, nt, od, dev);
                    a.k = kc, a.v = vc, a.h1 = nkv;
                    if (top) { /* the CUDA kernels serve cells below 2^30 (larger GPU layers are refused) */
                        const int end = r == P_CUDA ? 1 << 30 : INT_MAX;
                        a.cell_base = a.c0 = end - n, a.c1 = end, a.pos0 = end - nt;
                    }
                    CHECK_STATUS((neo_status)rt[r]->attn.attend(rt[r]->dev_state, &a, NEO__STREAM_MAIN), NEO_OK);
#if NEO_TEST_CUDA
                    if (r == P_CUDA) {
                        CHECK(cudaDeviceSynchronize() == cudaSuccess && cudaMemcpy(out[top], od, no * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
                        cudaFree(qd), cudaFree(od);
                    }
#endif
                }
                if (r < P_CUDA) CHECK(memcmp(out[0], out[1], no * sizeof(float)) == 0);
                else {
                    double num = 0.0, den = 0.0;
                    for (size_t e = 0; e < no; e++) num += ((double)out[1][e] - out[0][e]) * ((double)out[1][e] - out[0][e]), den += (double)out[0][e] * out[0][e];
                    CHECK(num <= TOL * TOL * den);
                }
                n_calls[r] += 2;
            }
        }
        neo_layer_destroy(L);
        free(k), free(v), free(q), free(out[0]), free(out[1]);
    }
}

#if NEO_TEST_CUDA
/* The reported crash, end to end on the GPU: n_ctx INT_MAX (8 GiB of F16 for one KV head of
   head_dim 1), filled to INT_MAX - 1000 cells of zeros, then 1000 cells whose V is 1: every
   score is 0, so a query at position p gives the share of ones among cells [0, p]. */
static void test_int_max_gpu(void) {
    const int      step = 1 << 27, tail = 1000, N = 1 << 30; /* the largest n_ctx a CUDA layer takes */
    neo_layer_desc ld = shape(2, 1, 1, 0, INT_MAX, NEO_TYPE_F16);
    neo_layer     *L = NULL;
    float         *zeros = NULL, ones[1000], zk[1000], q[2 * 5] = {1, -1, 1, -1, 1, -1, 1, -1, 1, -1}, out[2 * 5];
    int            i, len = 0;
    if (!rt_cuda) return;
    check_context("n_ctx INT_MAX on the GPU");
    CHECK_STATUS(neo_layer_create(rt_cuda, &ld, &L), NEO_ERR_INVALID_ARG); /* refused, with a log line */
    CHECK(L == NULL);
    ld.n_ctx = N + 1;
    CHECK_STATUS(neo_layer_create(rt_cuda, &ld, &L), NEO_ERR_INVALID_ARG);
    check_context("n_ctx 2^30 on the GPU");
    ld.n_ctx = N;
    if (!CHECK_STATUS(neo_layer_create(rt_cuda, &ld, &L), NEO_OK)) return;
    if (CHECK(cudaMalloc((void **)&zeros, (size_t)step * sizeof(float)) == cudaSuccess && cudaMemset(zeros, 0, (size_t)step * sizeof(float)) == cudaSuccess)) {
        while (len < N - tail) {
            int nt = N - tail - len < step ? N - tail - len : step;
            if (!CHECK_STATUS(neo_attn_append(L, zeros, zeros, nt), NEO_OK)) break;
            len += nt;
        }
        for (int j = 0; j < 2; j++) { /* a decode at N - 1000, then the 1000 ones, a decode and a prefill at N */
            double want = j ? (double)tail / N : 0.0;
            for (i = 0; i < 10; i++) out[i] = u2f(0x7FC0DEADu);
            CHECK_STATUS(t_query(L, 1, q, 2, 0, out, 2), NEO_OK);
            CHECK(fabs(out[0] - want) <= 1e-4 * want && fabs(out[1] - want) <= 1e-4 * want);
            if (j) {
                CHECK_STATUS(t_query(L, 1, q, 10, 5, out, 10), NEO_OK);
                for (i = 0; i < 5; i++) {
                    double p = (double)N - 5 + i, w = (double)(tail - 5 + i + 1) / (p + 1);
                    CHECK(fabs(out[2 * i] - w) <= 1e-4 * w && fabs(out[2 * i + 1] - w) <= 1e-4 * w);
                }
                break;
            }
            for (i = 0; i < tail; i++) ones[i] = 1.0f, zk[i] = 0.0f;
            CHECK_STATUS(t_append(L, 1, zk, ones, tail, tail, tail), NEO_OK);
            CHECK(neo_layer_length(L) == N);
            CHECK_STATUS(t_append(L, 1, zk, ones, 1, 1, 1), NEO_ERR_FULL);
        }
        n_calls[P_CUDA] += 3;
    }
    cudaFree(zeros);
    neo_layer_destroy(L);
}
#endif

/* NEO_TEST_ONLY=name runs that group of cases alone (with the runtimes' own checks) */
static const char *only_group;
static void timed(const char *name, void (*fn)(void)) {
    struct timespec a, b;
    if (only_group && strcmp(only_group, name) != 0) return;
    clock_gettime(CLOCK_MONOTONIC, &a);
    fn();
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("test_ref: %-14s %6.2f s\n", name, (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
    fflush(stdout);
}

/* split layers on the stand-in GPU: heads [0, gpu_heads) on the "device", the rest in host
   memory, attended by stream-back (OFF), both halves at once (ON), the timed choice (AUTO) or the
   host cells shared between the CPU and the stream-back (HYBRID, at the default share and near 0
   and 1) */
static void test_split(void) {
    static const int gh[] = {0, 1, 3, 4, NEO_GPU_HEADS_NONE};
    static const float share[] = {0.0f, 0.02f, 0.97f, 0.4f, 0.0f};
    int g, p, i, k = 0;
    for (g = 0; g < 5; g++) {
        for (p = 0; p < 4; p++, k++) {
            char name[96];
            tcase c;
            float sinks[8];
            neo_layer_desc d = shape(8, 4, 64, k % 2 ? 48 : 0, 800, (neo_type)(k % 3));
            d.gpu_heads = gh[g], d.pipeline = (neo_pipeline)p;
            if (p == NEO_PIPELINE_HYBRID) d.cpu_share = share[g];
            if (k % 4 == 1) set_sinks(sinks, 8), d.sinks = sinks, d.max_alibi_bias = 1.0f, d.softcap = 3.0f;
            if (k % 4 == 3) set_sinks(sinks, 8), d.sinks = sinks, d.scale = 0.2f;
            snprintf(name, sizeof name, "split: gpu_heads %d of 4, pipeline %s, kv_type %d%s", gh[g], pipe_names[p], k % 3,
                     k % 2 ? ", options" : "");
            if (tc_open(&c, &d, 2, name)) {
                neo_layer_info li;
                memset(&li, 0, sizeof li);
                tc_append(&c, 1), tc_both(&c, 1);
                tc_append(&c, 7), tc_both(&c, 8);
                tc_append(&c, 300);
                for (i = 0; i < 7; i++) tc_query(&c, 0); /* past AUTO's probes */
                tc_query(&c, 40);
                tc_append(&c, 33), tc_both(&c, 33);
                tc_append(&c, 400); /* the context more than doubled: AUTO probes again */
                for (i = 0; i < 7; i++) tc_query(&c, 0);
                tc_query(&c, 5);
                tc_truncate(&c, 100), tc_both(&c, 2);
                tc_append(&c, 1), tc_both(&c, 0);
                tc_append(&c, 699), tc_both(&c, 3); /* full */
                tc_append(&c, 1);
                CHECK_STATUS(neo_layer_get_info(c.l[0], &li), NEO_OK);
                CHECK(li.gpu_heads == (gh[g] == NEO_GPU_HEADS_NONE ? 0 : gh[g] ? gh[g] : 4) && li.cpu_heads == 4 - li.gpu_heads);
                CHECK(li.pipeline == (neo_pipeline)p && li.n_decode == 20);
            }
            tc_close(&c);
        }
    }
}

/* A batch at head_dim 128: three OFF layers, two of which read their host heads in place (8 and
   20 cells of one f16 head) and one streams them back (40 cells), and two HYBRID layers at a CPU
   share of 0.5, one of which reads its 30 cells after the cut in place, the other streaming its
   45 back: each layer's output within the bound of float64, and on the stand-in equal to single
   calls bit for bit (on the GPU a batch may split a layer's cells differently than a single
   call). */
static void in_place_batch(neo_runtime *rt, int path) {
    enum { NB = 5, NH = 16, NKV = 4, HD = 128, CTX = 96, NI = 3 };
    static const int lens[NB] = {8, 40, 20, 60, 90}, ipl[NI] = {0, 2, 3};
    const int        on_gpu = path == P_CUDA;
    neo_layer       *a[NB] = {0}, *b[NB] = {0}, *ip[NI];
    tcase            m[NB];
    float            k[NKV * HD], v[NKV * HD], q[NB * NH * HD], oa[NB * NH * HD], ob[NB * NH * HD];
    double           ref[NH * HD];
    neo_layer_desc   d = shape(NH, NKV, HD, 0, CTX, NEO_TYPE_F16);
    d.gpu_heads = 3;
    check_context("in place: a batch against single calls on %s", path_names[path]);
    memset(m, 0, sizeof m);
    for (int i = 0; i < NB; i++) {
        d.pipeline = i < 3 ? NEO_PIPELINE_OFF : NEO_PIPELINE_HYBRID, d.cpu_share = i < 3 ? 0.0f : 0.5f;
        m[i].d = d, m[i].dv = HD;
        m[i].ks = (float *)malloc((size_t)CTX * NKV * HD * sizeof(float)), m[i].vs = (float *)malloc((size_t)CTX * NKV * HD * sizeof(float));
        if (!CHECK(m[i].ks && m[i].vs)) goto done;
        if (!CHECK_STATUS(neo_layer_create(rt, &d, &a[i]), NEO_OK) || !CHECK_STATUS(neo_layer_create(rt, &d, &b[i]), NEO_OK)) goto done;
        for (int t = 0; t < lens[i]; t++, m[i].len++) {
            rng_fill(k, NKV * HD, -2.0f, 2.0f), rng_fill(v, NKV * HD, -2.0f, 2.0f);
            CHECK_STATUS(t_append(a[i], on_gpu, k, v, NKV * HD, NKV * HD, 1), NEO_OK);
            CHECK_STATUS(t_append(b[i], on_gpu, k, v, NKV * HD, NKV * HD, 1), NEO_OK);
            for (int e = 0; e < NKV * HD; e++)
                m[i].ks[(size_t)t * NKV * HD + e] = stored(d.kv_type, k[e]), m[i].vs[(size_t)t * NKV * HD + e] = stored(d.kv_type, v[e]);
        }
    }
    rng_fill(q, NB * NH * HD, -2.0f, 2.0f);
    for (int e = 0; e < NB * NH * HD; e++) oa[e] = ob[e] = u2f(0x7FC0DEADu); /* a missed write stays NaN */
    CHECK_STATUS(t_decode_batch(rt, on_gpu, a, NB, q, NB * NH * HD, oa, NB * NH * HD), NEO_OK);
    for (int i = 0; i < NB; i++) {
        double err;
        CHECK_STATUS(t_query(b[i], on_gpu, q + i * NH * HD, NH * HD, 0, ob + i * NH * HD, NH * HD), NEO_OK);
        reference(&m[i], q + i * NH * HD, 1, ref);
        err = rel_err(oa + i * NH * HD, ref, NH * HD);
        if (!CHECK(err < TOL)) fprintf(stderr, "    %s in-place batch layer %d len %d: rel err %.3g\n", path_names[path], i, lens[i], err);
        note_err(path, err);
        CHECK(rel_err(ob + i * NH * HD, ref, NH * HD) < TOL);
    }
    if (!on_gpu) CHECK(memcmp(oa, ob, sizeof oa) == 0);
    /* the layers read in place alone: nothing else in the batch on COPY that MAIN waits for */
    for (int i = 0; i < NI; i++) {
        ip[i] = a[ipl[i]];
        memmove(q + i * NH * HD, q + ipl[i] * NH * HD, NH * HD * sizeof(float));
    }
    for (int e = 0; e < NI * NH * HD; e++) oa[e] = u2f(0x7FC0DEADu);
    CHECK_STATUS(t_decode_batch(rt, on_gpu, ip, NI, q, NI * NH * HD, oa, NI * NH * HD), NEO_OK);
    for (int i = 0; i < NI; i++) {
        reference(&m[ipl[i]], q + i * NH * HD, 1, ref);
        CHECK(rel_err(oa + i * NH * HD, ref, NH * HD) < TOL);
        if (!on_gpu) CHECK(memcmp(oa + i * NH * HD, ob + ipl[i] * NH * HD, NH * HD * sizeof(float)) == 0);
    }
done:
    for (int i = 0; i < NB; i++) neo_layer_destroy(a[i]), neo_layer_destroy(b[i]), free(m[i].ks), free(m[i].vs);
}

/* OFF decodes at head_dim 128 (f16, bf16) read their host heads in place while the heads' valid
   cells hold at most NEO_ATTN_IN_PLACE_BYTES (16 KB here: 32 cells of one f16 head, 10 of three),
   and stream them back past that; the same layer's decodes and prefills on both sides of the
   bound: every head on the host (no device half beside), sinks, ALiBi and a soft cap, AUTO
   (whose OFF probes read in place), and a GQA group over 8, whose decodes always stream. HYBRID
   decodes the same with the cells after their cut, on both sides of the bound. Then a batch of
   such layers against single calls. */
static void test_in_place(void) {
    static const int gh[7] = {3, 1, 2, NEO_GPU_HEADS_NONE, 3, 3, 2}, nh[7] = {16, 32, 40, 16, 16, 16, 32};
    for (int i = 0; i < 7; i++) {
        tcase c;
        char name[96];
        float sinks[40];
        neo_layer_desc d = shape(nh[i], 4, 128, 0, 96, (neo_type)(i % 2));
        d.gpu_heads = gh[i], d.pipeline = i == 4 ? NEO_PIPELINE_AUTO : i >= 5 ? NEO_PIPELINE_HYBRID : NEO_PIPELINE_OFF;
        if (i == 1 || i == 6) set_sinks(sinks, nh[i]), d.sinks = sinks, d.max_alibi_bias = 1.0f, d.softcap = 3.0f;
        if (i >= 5) d.cpu_share = 0.5f; /* the cells after the cut read in place up to 32 (i 5) or 16 (i 6) of them */
        snprintf(name, sizeof name, "in place: gpu_heads %d of 4, group %d, kv_type %d%s", gh[i], nh[i] / 4, i % 2,
                 i == 4 ? ", AUTO" : i >= 5 ? ", HYBRID" : "");
        if (tc_open(&c, &d, 2, name)) {
            tc_append(&c, 1), tc_both(&c, 1);
            tc_append(&c, 8), tc_both(&c, 3);
            for (int r = 0; r < 7 && i == 4; r++) tc_query(&c, 0); /* AUTO's probes */
            tc_append(&c, 24), tc_both(&c, 2);
            tc_append(&c, 40), tc_both(&c, 5);
        }
        tc_close(&c);
    }
    for (int t = 1; t <= 3; t += 2)
        if (rts_gpu[t]) in_place_batch(rts_gpu[t], P_STANDIN);
    if (rt_cuda) in_place_batch(rt_cuda, P_CUDA);
}

/* The stream-back chunks are the runtime's, shared by its split layers: a layer made after a
   larger one must leave them large enough for it (both chunks; under ASan an overflow shows). */
static void test_stage_shared(void) {
    static const neo_pipeline pl[2] = {NEO_PIPELINE_OFF, NEO_PIPELINE_HYBRID};
    for (int p = 0; p < 2; p++) {
        tcase          c;
        neo_layer     *small[MAXL];
        neo_layer_desc d = shape(8, 4, 64, 0, 700, NEO_TYPE_F32), ds = shape(8, 4, 16, 0, 64, NEO_TYPE_F16);
        int            n_small = 0;
        d.gpu_heads = 1, d.pipeline = pl[p], ds.gpu_heads = 3;
        if (tc_open(&c, &d, 2, p ? "stage chunks after a smaller layer, HYBRID" : "stage chunks after a smaller layer, OFF")) {
            for (int i = 0; i < c.n; i++)
                if (CHECK_STATUS(neo_layer_create(c.l[i]->rt, &ds, &small[n_small]), NEO_OK))
                    n_small++;
            tc_append(&c, 600), tc_query(&c, 0), tc_query(&c, 5);
        }
        for (int i = 0; i < n_small; i++) neo_layer_destroy(small[i]);
        tc_close(&c);
    }
}

/* The hybrid on the stand-in: every kv_type, GQA groups 1 to 8, head_dim_v apart, NEO_GPU_HEADS_NONE,
   options, CPU shares near 0 and 1, lengths from 1 to 3000 (shorter and longer than a stream-back
   chunk; up to 700 in the quick mode of the sanitizer runs), a prefill (which runs as OFF);
   against float64 and bitwise across thread counts. The merge and the queries' handoff to the
   CPU are counted, so a decode whose cut leaves both sides cells is known to have run as the
   hybrid, one whose cut leaves the device none as ON, and one whose cut leaves the CPU none as
   OFF. */
static long hyb_merges, hyb_signals;
static struct {
    neo_runtime *rt;
    int (*merge)(void *, const neo__merge_args *, int);
    int (*copy_signal)(void *, void *, size_t, const void *, size_t, size_t, size_t, unsigned *, unsigned, int);
} hyb_rt[4]; /* the stand-in runtimes and the real GPU's, with their own merge and copy_signal ops */
static int count_merge(void *state, const neo__merge_args *m, int stream) {
    hyb_merges++;
    for (int i = 0; i < 4; i++)
        if (hyb_rt[i].rt && hyb_rt[i].rt->dev_state == state) return hyb_rt[i].merge(state, m, stream);
    return NEO_ERR_INVALID_ARG;
}
/* the queries' handoff to a CPU half: one a decode that runs as the hybrid or ON */
static int count_signal(void *state, void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t rows, unsigned *flag,
                        unsigned seq, int stream) {
    hyb_signals++;
    for (int i = 0; i < 4; i++)
        if (hyb_rt[i].rt && hyb_rt[i].rt->dev_state == state)
            return hyb_rt[i].copy_signal(state, dst, dp, src, sp, w, rows, flag, seq, stream);
    return NEO_ERR_INVALID_ARG;
}

/* The hybrid's cut of the host cells, which a CUDA graph's replays make on both sides (the host's
   listener and the device's attend) and must make alike: share * len rounded, halves up. */
static void test_hybrid_cut(void) {
    static const struct { int len; float share; int cut; } t[] = {
        {1002, 0.25f, 251}, {1000, 0.0625f, 63}, {1, 0.5f, 1}, {4, 0.1f, 0}, {5, 0.1f, 1}, {5, 0.9f, 4}, {6, 0.9f, 5},
        {0, 0.5f, 0}, {1 << 30, 0.3f, 322122560}, {(1 << 30) - 1, 0.999f, 1072668095}};
    check_context("hybrid cut");
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!CHECK(neo__hybrid_cut(t[i].len, t[i].share) == t[i].cut))
            fprintf(stderr, "    cut(%d, %.9g) = %d, want %d\n", t[i].len, (double)t[i].share, neo__hybrid_cut(t[i].len, t[i].share), t[i].cut);
}

static void test_hybrid(void) {
    static const struct { int nh, nkv, hd, dv, gh; } sh[] = {
        {8, 4, 64, 0, 1}, {14, 2, 64, 0, NEO_GPU_HEADS_NONE}, {4, 4, 16, 24, 3}, {16, 2, 100, 36, 1}, {32, 4, 128, 0, 2}};
    static const float shares[] = {0.01f, 0.3f, 0.0f, 0.99f, 0.6f};
    static const int   lens[] = {1, 2, 5, 63, 64, 65, 130, 700, 1500, 3000};
    int k = 0;
    test_hybrid_cut();
    hyb_rt[0].rt = rts_gpu[1], hyb_rt[1].rt = rts_gpu[2], hyb_rt[2].rt = rts_gpu[3], hyb_rt[3].rt = rt_cuda;
    for (int i = 0; i < 4; i++)
        if (hyb_rt[i].rt) {
            hyb_rt[i].merge = hyb_rt[i].rt->attn.merge, hyb_rt[i].rt->attn.merge = count_merge;
            hyb_rt[i].copy_signal = hyb_rt[i].rt->attn.copy_signal, hyb_rt[i].rt->attn.copy_signal = count_signal;
        }
    for (int si = 0; si < 5; si++)
        for (int ti = 0; ti < 3; ti++, k++) {
            char           name[128];
            tcase          c;
            float          sinks[32];
            neo_layer_desc d = shape(sh[si].nh, sh[si].nkv, sh[si].hd, sh[si].dv, 3000, (neo_type)ti);
            float          share = shares[k % 5], r = share > 0.0f ? share : NEO__HYBRID_SHARE;
            long           expect = 0, signals = 0, before = hyb_merges, before_signals = hyb_signals;
            d.gpu_heads = sh[si].gh, d.pipeline = NEO_PIPELINE_HYBRID, d.cpu_share = share;
            if (k % 3 == 0) set_sinks(sinks, d.n_head), d.sinks = sinks;
            if (k % 3 == 1) d.softcap = 4.0f, d.max_alibi_bias = 2.0f;
            if (k % 3 == 2) set_sinks(sinks, d.n_head), d.sinks = sinks, d.scale = 0.2f;
            snprintf(name, sizeof name, "hybrid: %d/%d/%d/%d, gpu_heads %d, kv_type %d, cpu_share %g", d.n_head, d.n_head_kv,
                     d.head_dim, sh[si].dv, sh[si].gh, ti, (double)share);
            if (tc_open(&c, &d, 2, name)) {
                for (int i = 0; i < (quick ? 8 : 10); i++) { /* quick (the sanitizer runs): up to 700 cells */
                    int cut = (int)floor((double)r * (double)lens[i] + 0.5);
                    tc_append(&c, lens[i] - c.len);
                    tc_query(&c, 0);
                    expect += cut > 0 && cut < lens[i] ? c.n : 0; /* one merge a layer */
                    signals += cut > 0 ? c.n : 0;                  /* the CPU takes cells: the hybrid, or ON */
                    if (i == 5) tc_query(&c, 9);
                }
                CHECK(hyb_merges - before == expect && hyb_signals - before_signals == signals);
            }
            tc_close(&c);
        }
    for (int i = 0; i < 4; i++)
        if (hyb_rt[i].rt) hyb_rt[i].rt->attn.merge = hyb_rt[i].merge, hyb_rt[i].rt->attn.copy_signal = hyb_rt[i].copy_signal;
}

/* --- many layers in one call, and heads moved between the sides ---------------------------------
   A batch set: BN layers of one shape but different n_ctx, kv_type, gpu_heads, pipeline and
   options on one runtime, driven by neo_attn_append_batch / neo_attn_decode_batch, and their twins
   (same descriptors, same tokens) driven by single calls. Every batch output against float64, and
   bit for bit against the twin's on the CPU paths and the stand-in (AUTO layers excepted there: their
   choice comes from timing). */
enum { BN = 8 };
typedef struct bset {
    neo_runtime   *rt;
    int            path;    /* index into max_err / n_calls */
    int            on_gpu;  /* activations in device memory (the real GPU) */
    int            bitwise; /* batch == single calls bit for bit */
    neo_layer_desc d[BN];
    float          sinks[BN][8];
    neo_layer     *a[BN], *b[BN];
    tcase          m[BN];   /* the mirrors (d, ks, vs, len, dv) the reference reads */
} bset;

#if NEO_TEST_CUDA
/* n floats of host memory copied to new device memory, and back */
#endif
static neo_status b_append(const bset *s, neo_layer *const *ls, const float *k, const float *v, size_t kn, size_t vn) {
#if NEO_TEST_CUDA
    if (s->on_gpu) {
        float     *dk = dev_of(k, kn), *dv = dev_of(v, vn);
        neo_status st = dk && dv ? neo_attn_append_batch(ls, BN, dk, dv) : NEO_ERR_DEVICE_MEMORY;
        if (cudaDeviceSynchronize() != cudaSuccess) st = NEO_ERR_DEVICE;
        cudaFree(dk), cudaFree(dv);
        return st;
    }
#endif
    if (s->rt->gpu) { /* the stand-in (t_append) */
        float *sk = stage_in(s->rt, k, kn), *sv = stage_in(s->rt, v, vn);
        return sk && sv ? neo_attn_append_batch(ls, BN, sk, sv) : NEO_ERR_NO_MEMORY;
    }
    (void)kn, (void)vn;
    return neo_attn_append_batch(ls, BN, k, v);
}
static neo_status b_decode(const bset *s, neo_layer *const *ls, const float *q, size_t qn, float *out, size_t on) {
    return t_decode_batch(s->rt, s->on_gpu, ls, BN, q, qn, out, on);
}

static int bset_open(bset *s, neo_runtime *rt, int path, int hd, int dv, int n_head, int n_kv) {
    /* two hybrids among ON and OFF layers, one with no device heads, so that a batch carries
       several hybrid states in its handoff */
    static const int gh[BN] = {0, 1, NEO_GPU_HEADS_NONE, 3, NEO_GPU_HEADS_NONE, 2, NEO_GPU_HEADS_NONE, 2};
    static const neo_pipeline pp[BN] = {NEO_PIPELINE_OFF, NEO_PIPELINE_ON,     NEO_PIPELINE_ON,     NEO_PIPELINE_OFF,
                                        NEO_PIPELINE_OFF, NEO_PIPELINE_HYBRID, NEO_PIPELINE_HYBRID, NEO_PIPELINE_AUTO};
    int i;
    memset(s, 0, sizeof *s);
    s->rt = rt, s->path = path, s->on_gpu = path == P_CUDA, s->bitwise = path != P_CUDA;
    for (i = 0; i < BN; i++) {
        neo_layer_desc *d = &s->d[i];
        *d = shape(n_head, n_kv, hd, dv, i == BN - 1 ? 10 + 50 * i + 3 : 400 + 150 * i, (neo_type)(i % 3));
        d->gpu_heads = gh[i] > n_kv ? n_kv - 1 : gh[i], d->pipeline = pp[i];
        if (i % 2) set_sinks(s->sinks[i], n_head), d->sinks = s->sinks[i], d->softcap = 4.0f;
        if (i == 3) d->max_alibi_bias = 2.0f, d->scale = 0.15f;
        s->m[i].d = *d;
        s->m[i].dv = dv ? dv : hd;
        s->m[i].ks = (float *)malloc((size_t)d->n_ctx * (size_t)n_kv * (size_t)hd * sizeof(float));
        s->m[i].vs = (float *)malloc((size_t)d->n_ctx * (size_t)n_kv * (size_t)s->m[i].dv * sizeof(float));
        if (!CHECK(s->m[i].ks && s->m[i].vs) || !CHECK_STATUS(neo_layer_create(rt, d, &s->a[i]), NEO_OK) ||
            !CHECK_STATUS(neo_layer_create(rt, d, &s->b[i]), NEO_OK))
            return 0;
    }
    return 1;
}
static void bset_close(bset *s) {
    for (int i = 0; i < BN; i++) {
        neo_layer_destroy(s->a[i]), neo_layer_destroy(s->b[i]);
        free(s->m[i].ks), free(s->m[i].vs);
    }
}

/* n tokens into layer i of both sets by single calls */
static void bset_fill(bset *s, int i, int n) {
    const neo_layer_desc *d = &s->d[i];
    size_t rk = (size_t)d->n_head_kv * d->head_dim, rv = (size_t)d->n_head_kv * s->m[i].dv, j;
    float *k = (float *)malloc((size_t)n * rk * sizeof(float)), *v = (float *)malloc((size_t)n * rv * sizeof(float));
    if (CHECK(k && v)) {
        rng_fill(k, (size_t)n * rk, -2.0f, 2.0f), rng_fill(v, (size_t)n * rv, -2.0f, 2.0f);
        CHECK_STATUS(t_append(s->a[i], s->on_gpu, k, v, (size_t)n * rk, (size_t)n * rv, n), NEO_OK);
        CHECK_STATUS(t_append(s->b[i], s->on_gpu, k, v, (size_t)n * rk, (size_t)n * rv, n), NEO_OK);
        for (j = 0; j < (size_t)n * rk; j++) s->m[i].ks[(size_t)s->m[i].len * rk + j] = stored(d->kv_type, k[j]);
        for (j = 0; j < (size_t)n * rv; j++) s->m[i].vs[(size_t)s->m[i].len * rv + j] = stored(d->kv_type, v[j]);
        s->m[i].len += n;
    }
    free(k), free(v);
}

/* One token into every layer: the batch set by neo_attn_append_batch, the twins one by one; when a
   layer is full, the batch writes nothing anywhere. */
static void bset_append(bset *s) {
    const neo_layer_desc *d = &s->d[0];
    size_t rk = (size_t)d->n_head_kv * d->head_dim, rv = (size_t)d->n_head_kv * s->m[0].dv, j;
    float *k = (float *)malloc(BN * rk * sizeof(float)), *v = (float *)malloc(BN * rv * sizeof(float));
    int    full = 0, i;
    for (i = 0; i < BN; i++) full |= s->m[i].len == s->d[i].n_ctx;
    if (!CHECK(k && v)) goto done;
    rng_fill(k, BN * rk, -2.0f, 2.0f), rng_fill(v, BN * rv, -2.0f, 2.0f);
    CHECK_STATUS(b_append(s, s->a, k, v, BN * rk, BN * rv), full ? NEO_ERR_FULL : NEO_OK);
    for (i = 0; i < BN; i++) {
        CHECK(neo_layer_length(s->a[i]) == s->m[i].len + !full);
        if (full) continue;
        CHECK_STATUS(t_append(s->b[i], s->on_gpu, k + i * rk, v + i * rv, rk, rv, 1), NEO_OK);
        for (j = 0; j < rk; j++) s->m[i].ks[(size_t)s->m[i].len * rk + j] = stored(s->d[i].kv_type, k[i * rk + j]);
        for (j = 0; j < rv; j++) s->m[i].vs[(size_t)s->m[i].len * rv + j] = stored(s->d[i].kv_type, v[i * rv + j]);
        s->m[i].len++;
    }
done:
    free(k), free(v);
}

/* A decode of every layer: the batch set in one call, the twins one by one. */
static void bset_decode(bset *s) {
    const neo_layer_desc *d = &s->d[0];
    size_t qn = (size_t)d->n_head * d->head_dim, on = (size_t)d->n_head * s->m[0].dv, e;
    float *q = (float *)malloc(BN * qn * sizeof(float)), *out = (float *)malloc(2 * BN * on * sizeof(float));
    double *ref = (double *)malloc(on * sizeof(double));
    if (!CHECK(q && out && ref)) goto done;
    rng_fill(q, BN * qn, -2.0f, 2.0f);
    for (e = 0; e < 2 * BN * on; e++) out[e] = u2f(0x7FC0DEADu);
    CHECK_STATUS(b_decode(s, s->a, q, BN * qn, out, BN * on), NEO_OK);
    for (int i = 0; i < BN; i++) {
        float *o = out + i * on, *t = out + (BN + i) * on;
        double err;
        CHECK_STATUS(t_query(s->b[i], s->on_gpu, q + i * qn, qn, 0, t, on), NEO_OK);
        reference(&s->m[i], q + i * qn, 1, ref);
        err = rel_err(o, ref, on);
        if (!CHECK(err < TOL)) fprintf(stderr, "    %s batch layer %d len %d: rel err %.3g\n", path_names[s->path], i, s->m[i].len, err);
        note_err(s->path, err);
        CHECK(rel_err(t, ref, on) < TOL);
        if (s->bitwise && (s->path < N_ISA || s->d[i].pipeline != NEO_PIPELINE_AUTO) && !CHECK(memcmp(o, t, on * sizeof(float)) == 0))
            fprintf(stderr, "    %s: batch and single call differ, layer %d len %d\n", path_names[s->path], i, s->m[i].len);
    }
done:
    free(q), free(out), free(ref);
}

static void batch_on(neo_runtime *rt, int path, const char *what) {
    static const int shapes[2][4] = {{64, 64, 8, 4}, {40, 24, 6, 2}};
    for (int sh = 0; sh < 2; sh++) {
        bset s;
        check_context("batch on %s, shape %d: open", what, sh);
        if (bset_open(&s, rt, path, shapes[sh][0], shapes[sh][1], shapes[sh][2], shapes[sh][3])) {
            check_context("batch on %s, shape %d", what, sh);
            for (int i = 0; i < BN; i++) bset_fill(&s, i, 10 + 50 * i);
            for (int r = 0; r < 8; r++) { /* layer BN - 1 is full after 3 tokens */
                bset_append(&s);
                bset_decode(&s);
                if (r == 1) /* moved heads, in both sets alike: the batch goes on as before */
                    for (int i = 1; i < BN; i += 2) {
                        int g = i == 1 ? NEO_GPU_HEADS_NONE : i == 3 ? 0 : 1;
                        CHECK_STATUS(neo_layer_set_gpu_heads(s.a[i], g), NEO_OK);
                        CHECK_STATUS(neo_layer_set_gpu_heads(s.b[i], g), NEO_OK);
                    }
                if (r == 4) {
                    CHECK_STATUS(neo_layer_truncate(s.a[BN - 1], 20), NEO_OK);
                    CHECK_STATUS(neo_layer_truncate(s.b[BN - 1], 20), NEO_OK);
                    s.m[BN - 1].len = 20;
                }
            }
            for (int i = 0; i < BN - 1; i++) bset_fill(&s, i, 120); /* past AUTO's probes and a doubling */
            for (int r = 0; r < 8; r++) bset_append(&s), bset_decode(&s);
        }
        bset_close(&s);
    }
}

static void test_batch(void) {
    neo_runtime     *bare = NULL;
    neo_runtime_desc rd = {0};
    for (int i = 0; i < N_ISA; i++)
        for (int t = 1; t <= 3 && isa_ok[i]; t += 2) batch_on(rts[i][t], i, path_names[i]);
    for (int t = 1; t <= 3; t += 2)
        if (rts_gpu[t]) batch_on(rts_gpu[t], P_STANDIN, "the stand-in");
    /* a backend without attend_batch: the header attends the device halves one by one */
    rd.gpu = 1, rd.gpu_standin = 1, rd.n_threads = 2;
    check_context("stand-in without attend_batch");
    if (CHECK_STATUS(neo_runtime_create(&rd, &bare), NEO_OK)) {
        bare->attn.attend_batch = NULL;
        batch_on(bare, P_STANDIN, "the stand-in without attend_batch");
    }
    neo_runtime_destroy(bare);
    if (rt_cuda) batch_on(rt_cuda, P_CUDA, "the GPU");
}

/* A split layer's heads moved to every placement and back: after each move the output is within
   the bound, and bit for bit (stand-in) that of a layer made with that placement; a round trip
   gives the first output again; appends after the moves land where they should. */
static void move_on(neo_runtime *rt, int path, neo_pipeline p, neo_type t) {
    static const int seq[] = {2, NEO_GPU_HEADS_NONE, 0, 1, 3, NEO_GPU_HEADS_NONE, 4, 2};
    tcase  c;
    size_t qn = 8 * 64, on = 8 * 64;
    float  q[8 * 64], first[8 * 64], out[8 * 64], twin[8 * 64];
    double ref[8 * 64];
    int    bitwise = path == P_STANDIN && p != NEO_PIPELINE_AUTO;
    memset(&c, 0, sizeof c);
    c.d = shape(8, 4, 64, 64, 700, t);
    c.d.gpu_heads = 2, c.d.pipeline = p, c.dv = 64, c.n = 1, c.isa[0] = path;
    c.ks = (float *)malloc(700 * 4 * 64 * sizeof(float)), c.vs = (float *)malloc(700 * 4 * 64 * sizeof(float));
    check_context("set_gpu_heads on %s, pipeline %d, kv_type %d", path_names[path], (int)p, (int)t);
    if (!CHECK(c.ks && c.vs) || !CHECK_STATUS(neo_layer_create(rt, &c.d, &c.l[0]), NEO_OK)) goto done;
    tc_append(&c, 500);
    rng_fill(q, qn, -2.0f, 2.0f);
    reference(&c, q, 1, ref);
    CHECK_STATUS(t_query(c.l[0], c.isa[0] == P_CUDA, q, qn, 0, first, on), NEO_OK);
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        neo_layer     *fresh = NULL;
        neo_layer_desc fd = c.d;
        neo_layer_info li;
        int            g = seq[i], dev = g == NEO_GPU_HEADS_NONE ? 0 : g ? g : 4;
        memset(&li, 0, sizeof li);
        for (size_t e = 0; e < on; e++) out[e] = twin[e] = u2f(0x7FC0DEADu);
        CHECK_STATUS(neo_layer_set_gpu_heads(c.l[0], g), NEO_OK);
        CHECK_STATUS(neo_layer_get_info(c.l[0], &li), NEO_OK);
        CHECK(li.gpu_heads == dev && li.cpu_heads == 4 - dev && li.gpu_bytes == (size_t)dev * 700 * 128 * (t == NEO_TYPE_F32 ? 4 : 2));
        CHECK(neo_layer_length(c.l[0]) == 500);
        CHECK_STATUS(t_query(c.l[0], c.isa[0] == P_CUDA, q, qn, 0, out, on), NEO_OK);
        note_err(path, rel_err(out, ref, on));
        CHECK(rel_err(out, ref, on) < TOL);
        fd.gpu_heads = g;
        if (CHECK_STATUS(neo_layer_create(rt, &fd, &fresh), NEO_OK)) {
            CHECK_STATUS(t_append(fresh, c.isa[0] == P_CUDA, c.ks, c.vs, 500 * 4 * 64, 500 * 4 * 64, 500), NEO_OK);
            CHECK_STATUS(t_query(fresh, c.isa[0] == P_CUDA, q, qn, 0, twin, on), NEO_OK);
            CHECK(!bitwise || memcmp(out, twin, sizeof out) == 0);
        }
        neo_layer_destroy(fresh);
    }
    CHECK(!bitwise || memcmp(out, first, sizeof out) == 0); /* back at 2 device heads */
    {
        neo_layer_info before, after;
        memset(&before, 0, sizeof before), memset(&after, 0, sizeof after);
        CHECK_STATUS(neo_layer_get_info(c.l[0], &before), NEO_OK);
        CHECK_STATUS(neo_layer_set_gpu_heads(c.l[0], -2), NEO_ERR_INVALID_ARG);
        CHECK_STATUS(neo_layer_set_gpu_heads(c.l[0], 5), NEO_ERR_INVALID_ARG);
        CHECK_STATUS(neo_layer_set_gpu_heads(NULL, 1), NEO_ERR_INVALID_ARG);
        CHECK_STATUS(neo_layer_get_info(c.l[0], &after), NEO_OK);
        CHECK(after.gpu_heads == before.gpu_heads && after.gpu_bytes == before.gpu_bytes && neo_layer_length(c.l[0]) == 500);
    }
    tc_append(&c, 150), tc_query(&c, 0), tc_query(&c, 3);
    CHECK_STATUS(neo_layer_set_gpu_heads(c.l[0], NEO_GPU_HEADS_NONE), NEO_OK);
    tc_append(&c, 50), tc_query(&c, 0), tc_query(&c, 7);
done:
    tc_close(&c);
}

static void test_set_gpu_heads(void) {
    for (int p = 0; p < 4; p++) /* OFF, ON, AUTO, HYBRID */
        for (int t = 0; t < 3; t++) {
            if (rts_gpu[1 + 2 * (t % 2)]) move_on(rts_gpu[1 + 2 * (t % 2)], P_STANDIN, (neo_pipeline)p, (neo_type)t);
            if (rt_cuda) move_on(rt_cuda, P_CUDA, (neo_pipeline)p, (neo_type)t);
        }
}

/* --- CUDA graphs: a captured append + decode replayed, with the lengths kept on the device --- */

/* One capture on a GPU runtime: the stand-in records its ops (neo__standin_capture_begin), a real
   GPU captures the runtime's stream (the engine's, given at create). Buffers are device memory on
   a real GPU, host memory on the stand-in. */
typedef struct gcap {
    neo_runtime *rt;
    int          cuda;
    neo__sgraph *sg;
#if NEO_TEST_CUDA
    cudaStream_t    stream;
    cudaGraphExec_t ge;
#endif
} gcap;

static float *g_alloc(const gcap *g, size_t n) {
#if NEO_TEST_CUDA
    if (g->cuda) {
        void *p = NULL;
        return cudaMalloc(&p, n * sizeof(float)) == cudaSuccess ? (float *)p : NULL;
    }
#endif
    (void)g;
    return (float *)malloc(n * sizeof(float));
}
static void g_free(const gcap *g, float *p) {
#if NEO_TEST_CUDA
    if (g->cuda) {
        cudaFree(p);
        return;
    }
#endif
    (void)g;
    free(p);
}
/* n floats between the host and the capture's buffers (device memory on a real GPU) */
static void g_copy(const gcap *g, float *dst, const float *src, size_t n) {
#if NEO_TEST_CUDA
    if (g->cuda) {
        CHECK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDefault) == cudaSuccess);
        return;
    }
#endif
    /* the stand-in: as cudaMemcpy, in order with the runtime's stream and done when it returns */
    CHECK_STATUS((neo_status)g->rt->mem.copy(g->rt->dev_state, dst, src, n * sizeof(float), NEO__STREAM_MAIN), NEO_OK);
    CHECK_STATUS((neo_status)g->rt->mem.stream_sync(g->rt->dev_state, NEO__STREAM_MAIN), NEO_OK);
}
static int g_begin(gcap *g) {
#if NEO_TEST_CUDA
    if (g->cuda) return CHECK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeRelaxed) == cudaSuccess);
#endif
    return CHECK_STATUS(neo__standin_capture_begin(g->rt), NEO_OK);
}
/* ends the capture: 1 when it is still valid and now a graph that can be replayed */
static int g_end(gcap *g) {
#if NEO_TEST_CUDA
    if (g->cuda) {
        cudaGraph_t graph = NULL;
        int         ok = CHECK(cudaStreamEndCapture(g->stream, &graph) == cudaSuccess && graph);
        if (ok) ok = CHECK(cudaGraphInstantiate(&g->ge, graph, 0) == cudaSuccess);
        if (graph) cudaGraphDestroy(graph);
        return ok;
    }
#endif
    return CHECK_STATUS(neo__standin_capture_end(g->rt, &g->sg), NEO_OK);
}
static void g_replay(gcap *g) {
#if NEO_TEST_CUDA
    if (g->cuda) {
        CHECK(cudaGraphLaunch(g->ge, g->stream) == cudaSuccess);
        return;
    }
#endif
    CHECK_STATUS(neo__standin_replay(g->rt, g->sg), NEO_OK);
}
static void g_drop(gcap *g) {
#if NEO_TEST_CUDA
    if (g->cuda) {
        if (g->ge) cudaGraphExecDestroy(g->ge);
        g->ge = NULL;
        return;
    }
#endif
    neo__standin_graph_free(g->rt, g->sg);
    g->sg = NULL;
}

/* Under a capture, the calls a graph cannot hold refuse and leave the capture valid; so does the
   decode of a split layer under AUTO still measuring (and ON and HYBRID in a build without
   threads: no listener). */
static void graph_refusals(gcap *g, neo_layer *l, neo_layer *const *split, int n_split, float *dq, float *dout) {
    neo_layer     *made = NULL;
    neo_layer_desc d = shape(4, 2, 64, 0, 64, NEO_TYPE_F16);
    check_context("graph refusals (%s)", g->cuda ? "cuda" : "stand-in");
    if (!g_begin(g)) return;
    CHECK_STATUS(neo_attn_prefill(l, dq, 1, dout), NEO_ERR_UNSUPPORTED);
    CHECK_STATUS(neo_layer_truncate(l, 1), NEO_ERR_UNSUPPORTED);
    CHECK_STATUS(neo_runtime_sync(g->rt), NEO_ERR_UNSUPPORTED);
    CHECK_STATUS(neo_layer_create(g->rt, &d, &made), NEO_ERR_UNSUPPORTED);
    CHECK(made == NULL);
    CHECK_STATUS(neo_layer_set_gpu_heads(l, 1), NEO_ERR_UNSUPPORTED);
    for (int i = 0; i < n_split; i++) {
        CHECK_STATUS(neo_attn_decode(split[i], dq, dout), NEO_ERR_UNSUPPORTED);
        CHECK_STATUS(neo_attn_decode_batch(&split[i], 1, dq, dout), NEO_ERR_UNSUPPORTED);
    }
    if (g_end(g)) g_drop(g);
}

/* Replays of a captured append + decode of layer l (no split) from length len0 until the cache
   is full and 3 more: after each, neo_runtime_sync and the length, and out against float64 over
   what the cache holds (fresh k, v and q written into the captured buffers each time, out
   poisoned). Under AUTO the layer is made to have chosen the hybrid at d->cpu_share, as its
   timings would on a machine where that is fastest. */
static void graph_replays(gcap *g, const neo_layer_desc *d, int len0, int trunc) {
    tcase  c;
    size_t nk = (size_t)d->n_head_kv * (size_t)d->head_dim, nq = (size_t)d->n_head * (size_t)d->head_dim, nv, no, e;
    float *k, *v, *q, *out, *dk, *dv, *dq, *dout;
    double *ref;
    neo_layer *l = NULL;
    memset(&c, 0, sizeof c);
    c.d = *d, c.dv = d->head_dim_v ? d->head_dim_v : d->head_dim;
    nv = (size_t)d->n_head_kv * (size_t)c.dv, no = (size_t)d->n_head * (size_t)c.dv;
    c.ks = (float *)malloc((size_t)d->n_ctx * nk * sizeof(float)), c.vs = (float *)malloc((size_t)d->n_ctx * nv * sizeof(float));
    k = (float *)malloc(nk * sizeof(float)), v = (float *)malloc(nv * sizeof(float)), q = (float *)malloc(nq * sizeof(float));
    out = (float *)malloc(no * sizeof(float)), ref = (double *)malloc(no * sizeof(double));
    dk = g_alloc(g, nk), dv = g_alloc(g, nv), dq = g_alloc(g, nq), dout = g_alloc(g, no);
    check_context("graph %d/%d/%d/%d %s n_ctx %d from %d, gpu_heads %d, %s share %.2f (%s)", d->n_head, d->n_head_kv,
                  d->head_dim, c.dv, d->kv_type == NEO_TYPE_F16 ? "f16" : d->kv_type == NEO_TYPE_BF16 ? "bf16" : "f32", d->n_ctx,
                  len0, d->gpu_heads, pipe_names[d->pipeline], (double)d->cpu_share, g->cuda ? "cuda" : "stand-in");
    if (!CHECK(c.ks && c.vs && k && v && q && out && ref && dk && dv && dq && dout) ||
        !CHECK_STATUS(neo_layer_create(g->rt, d, &l), NEO_OK))
        goto done;
    if (d->pipeline == NEO_PIPELINE_AUTO)
        l->auto_decided = 1, l->auto_choice = NEO_PIPELINE_HYBRID, l->auto_share = d->cpu_share, l->auto_len = len0;
    for (int t = 0; t < len0; t++) { /* eagerly, one token a call */
        rng_fill(k, nk, -2.0f, 2.0f), rng_fill(v, nv, -2.0f, 2.0f);
        g_copy(g, dk, k, nk), g_copy(g, dv, v, nv);
        CHECK_STATUS(neo_attn_append(l, dk, dv, 1), NEO_OK);
        for (e = 0; e < nk; e++) c.ks[(size_t)c.len * nk + e] = stored(d->kv_type, k[e]);
        for (e = 0; e < nv; e++) c.vs[(size_t)c.len * nv + e] = stored(d->kv_type, v[e]);
        c.len++;
    }
    if (!g_begin(g)) goto done;
    CHECK_STATUS(neo_attn_append(l, dk, dv, 1), NEO_OK);
    CHECK_STATUS(neo_attn_decode(l, dq, dout), NEO_OK);
    CHECK(neo_layer_length(l) == len0); /* nothing ran */
    if (!g_end(g)) goto done;
    for (int r = 0; c.len < d->n_ctx + 3; r++) {
        int full = c.len >= d->n_ctx;
        if (r == 3 && trunc) { /* truncated between replays: the next append goes at the new length */
            CHECK_STATUS(neo_layer_truncate(l, trunc), NEO_OK);
            c.len = trunc;
        }
        rng_fill(k, nk, -2.0f, 2.0f), rng_fill(v, nv, -2.0f, 2.0f), rng_fill(q, nq, -2.0f, 2.0f);
        for (e = 0; e < no; e++) out[e] = u2f(0x7FC0DEADu);
        g_copy(g, dk, k, nk), g_copy(g, dv, v, nv), g_copy(g, dq, q, nq), g_copy(g, dout, out, no);
        g_replay(g);
        CHECK_STATUS(neo_runtime_sync(g->rt), full ? NEO_ERR_FULL : NEO_OK);
        if (full) CHECK_STATUS(neo_runtime_sync(g->rt), NEO_OK); /* the flag was cleared when read */
        if (!full) {
            for (e = 0; e < nk; e++) c.ks[(size_t)c.len * nk + e] = stored(d->kv_type, k[e]);
            for (e = 0; e < nv; e++) c.vs[(size_t)c.len * nv + e] = stored(d->kv_type, v[e]);
            c.len++;
        } else c.len++; /* counts the refused replays (the loop ends 3 past n_ctx); the cache stays at n_ctx */
        {
            int    held = c.len > d->n_ctx ? d->n_ctx : c.len;
            double num = 0.0, den = 0.0, err;
            int    keep = c.len;
            CHECK(neo_layer_length(l) == held);
            c.len = held;
            reference(&c, q, 1, ref);
            c.len = keep;
            g_copy(g, out, dout, no);
            for (e = 0; e < no; e++) {
                double diff = (double)out[e] - ref[e];
                num += diff * diff, den += ref[e] * ref[e];
            }
            err = sqrt(num) / sqrt(den);
            if (!CHECK(err < TOL)) fprintf(stderr, "    replay %d at length %d: rel err %.3g\n", r, held, err);
            if (!(err <= max_err[g->cuda ? P_CUDA : P_STANDIN])) max_err[g->cuda ? P_CUDA : P_STANDIN] = err;
            n_calls[g->cuda ? P_CUDA : P_STANDIN]++;
        }
    }
    /* an eager append after the replays goes on from the length sync read back */
    CHECK_STATUS(neo_layer_truncate(l, d->n_ctx - 1), NEO_OK);
    CHECK_STATUS(neo_attn_append(l, dk, dv, 1), NEO_OK);
    CHECK_STATUS(neo_attn_append(l, dk, dv, 1), NEO_ERR_FULL);
    CHECK_STATUS(neo_runtime_sync(g->rt), NEO_OK);
    CHECK(neo_layer_length(l) == d->n_ctx);
    g_drop(g);
done:
    neo_layer_destroy(l);
    g_free(g, dk), g_free(g, dv), g_free(g, dq), g_free(g, dout);
    free(c.ks), free(c.vs), free(k), free(v), free(q), free(out), free(ref);
}

/* Six sequences' layers of one shape at different lengths: three with every head on the device,
   one split under OFF and one with every head on the host under OFF (their device heads and
   host heads read in place, all entries of one batch launch, each reading its length when it
   runs), and one split under ON (its own bell, rung before the batch launch: with CUDA the
   wake's fork makes the copy stream part of the capture). A captured append_batch +
   decode_batch, replayed, equals float64 for each. */
static void graph_batch(gcap *g) {
    enum { NB = 6 };
    neo_layer_desc d = shape(8, 2, 64, 0, 200, NEO_TYPE_F16), dl[NB];
    const size_t   nk = 2 * 64, nq = 8 * 64, no = 8 * 64;
    tcase          c[NB];
    neo_layer     *l[NB] = {NULL, NULL, NULL, NULL, NULL, NULL};
    float          k[NB * 2 * 64], v[NB * 2 * 64], q[NB * 8 * 64], out[NB * 8 * 64];
    double         ref[8 * 64];
    float         *dk = g_alloc(g, NB * nk), *dv = g_alloc(g, NB * nk), *dq = g_alloc(g, NB * nq), *dout = g_alloc(g, NB * no);
    const int      len0[NB] = {1, 60, 150, 90, 30, 120};
    memset(c, 0, sizeof c);
    for (int i = 0; i < NB; i++) dl[i] = d;
    dl[3].gpu_heads = 1, dl[3].pipeline = NEO_PIPELINE_OFF;
    dl[4].gpu_heads = NEO_GPU_HEADS_NONE, dl[4].pipeline = NEO_PIPELINE_OFF;
    dl[5].gpu_heads = 1, dl[5].pipeline = NEO_ATTN_NO_THREADS ? NEO_PIPELINE_OFF : NEO_PIPELINE_ON; /* ON needs the listener */
    check_context("graph batch (%s)", g->cuda ? "cuda" : "stand-in");
    for (int i = 0; i < NB; i++) {
        c[i].d = dl[i], c[i].dv = 64;
        c[i].ks = (float *)malloc(200 * nk * sizeof(float)), c[i].vs = (float *)malloc(200 * nk * sizeof(float));
        if (!CHECK(c[i].ks && c[i].vs) || !CHECK_STATUS(neo_layer_create(g->rt, &c[i].d, &l[i]), NEO_OK)) goto done;
        for (int t = 0; t < len0[i]; t++) {
            rng_fill(k, nk, -2.0f, 2.0f), rng_fill(v, nk, -2.0f, 2.0f);
            g_copy(g, dk, k, nk), g_copy(g, dv, v, nk);
            CHECK_STATUS(neo_attn_append(l[i], dk, dv, 1), NEO_OK);
            for (size_t e = 0; e < nk; e++)
                c[i].ks[(size_t)t * nk + e] = stored(d.kv_type, k[e]), c[i].vs[(size_t)t * nk + e] = stored(d.kv_type, v[e]);
        }
        c[i].len = len0[i];
    }
    if (!CHECK(dk && dv && dq && dout) || !g_begin(g)) goto done;
    CHECK_STATUS(neo_attn_append_batch(l, NB, dk, dv), NEO_OK);
    CHECK_STATUS(neo_attn_decode_batch(l, NB, dq, dout), NEO_OK);
    if (!g_end(g)) goto done;
    for (int r = 0; r < 5; r++) {
        rng_fill(k, NB * nk, -2.0f, 2.0f), rng_fill(v, NB * nk, -2.0f, 2.0f), rng_fill(q, NB * nq, -2.0f, 2.0f);
        for (size_t e = 0; e < NB * no; e++) out[e] = u2f(0x7FC0DEADu);
        g_copy(g, dk, k, NB * nk), g_copy(g, dv, v, NB * nk), g_copy(g, dq, q, NB * nq), g_copy(g, dout, out, NB * no);
        g_replay(g);
        CHECK_STATUS(neo_runtime_sync(g->rt), NEO_OK);
        g_copy(g, out, dout, NB * no);
        for (int i = 0; i < NB; i++) {
            double num = 0.0, den = 0.0, err;
            for (size_t e = 0; e < nk; e++) {
                c[i].ks[(size_t)c[i].len * nk + e] = stored(d.kv_type, k[(size_t)i * nk + e]);
                c[i].vs[(size_t)c[i].len * nk + e] = stored(d.kv_type, v[(size_t)i * nk + e]);
            }
            c[i].len++;
            CHECK(neo_layer_length(l[i]) == c[i].len);
            reference(&c[i], q + (size_t)i * nq, 1, ref);
            for (size_t e = 0; e < no; e++) {
                double diff = (double)out[(size_t)i * no + e] - ref[e];
                num += diff * diff, den += ref[e] * ref[e];
            }
            err = sqrt(num) / sqrt(den);
            if (!CHECK(err < TOL)) fprintf(stderr, "    batch replay %d, layer %d at length %d: rel err %.3g\n", r, i, c[i].len, err);
            n_calls[g->cuda ? P_CUDA : P_STANDIN]++;
        }
    }
    g_drop(g);
done:
    for (int i = 0; i < NB; i++) neo_layer_destroy(l[i]), free(c[i].ks), free(c[i].vs);
    g_free(g, dk), g_free(g, dv), g_free(g, dq), g_free(g, dout);
}

/* The first batch call of a runtime, captured: three split OFF layers, each two entries of the
   batched attend (its device heads, its host heads in place), replayed twice against the same
   layers' eager single decodes (one token each, appended eagerly between replays). */
static void graph_batch_first(gcap *g) {
    enum { NB = 3 };
    neo_layer_desc d = shape(4, 2, 32, 0, 16, NEO_TYPE_F32);
    neo_layer     *l[NB] = {NULL, NULL, NULL};
    float          k[2 * 32], q[NB * 4 * 32], out[NB * 4 * 32], one[4 * 32];
    double         oned[4 * 32];
    float         *dk = g_alloc(g, 2 * 32), *dq = g_alloc(g, NB * 4 * 32), *dout = g_alloc(g, NB * 4 * 32), *done1 = g_alloc(g, 4 * 32);
    int            ok = CHECK(dk && dq && dout && done1);
    check_context("graph: a runtime's first batch, captured (%s)", g->cuda ? "cuda" : "stand-in");
    d.gpu_heads = 1, d.pipeline = NEO_PIPELINE_OFF;
    for (int i = 0; i < NB && ok; i++) ok = CHECK_STATUS(neo_layer_create(g->rt, &d, &l[i]), NEO_OK);
    for (int i = 0; i < NB && ok; i++) {
        rng_fill(k, 2 * 32, -2.0f, 2.0f), g_copy(g, dk, k, 2 * 32);
        ok = CHECK_STATUS(neo_attn_append(l[i], dk, dk, 1), NEO_OK);
    }
    if (ok && g_begin(g)) {
        CHECK_STATUS(neo_attn_decode_batch(l, NB, dq, dout), NEO_OK);
        if (g_end(g)) {
            for (int r = 0; r < 2; r++) {
                rng_fill(q, NB * 4 * 32, -2.0f, 2.0f), g_copy(g, dq, q, NB * 4 * 32);
                g_replay(g);
                CHECK_STATUS(neo_runtime_sync(g->rt), NEO_OK);
                g_copy(g, out, dout, NB * 4 * 32);
                for (int i = 0; i < NB; i++) {
                    CHECK_STATUS(neo_attn_decode(l[i], dq + (size_t)i * 4 * 32, done1), NEO_OK);
                    g_copy(g, one, done1, 4 * 32);
                    for (int e = 0; e < 4 * 32; e++) oned[e] = one[e];
                    CHECK(rel_err(out + (size_t)i * 4 * 32, oned, 4 * 32) < 1e-5);
                    rng_fill(k, 2 * 32, -2.0f, 2.0f), g_copy(g, dk, k, 2 * 32);
                    CHECK_STATUS(neo_attn_append(l[i], dk, dk, 1), NEO_OK);
                }
            }
            g_drop(g);
        }
    }
    for (int i = 0; i < NB; i++) neo_layer_destroy(l[i]);
    g_free(g, dk), g_free(g, dq), g_free(g, dout), g_free(g, done1);
}

static void graph_on(gcap *g) {
    static const float sinks[8] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f, 3.0f, 0.25f};
    neo_layer_desc d[4];
    d[0] = shape(8, 2, 64, 0, 300, NEO_TYPE_F16), d[0].sinks = sinks;
    d[1] = shape(4, 4, 128, 0, 200, NEO_TYPE_F32), d[1].softcap = 30.0f;
    d[2] = shape(8, 2, 96, 64, 120, NEO_TYPE_BF16), d[2].max_alibi_bias = 8.0f;
    d[3] = shape(16, 2, 128, 0, quick ? 700 : 2100, NEO_TYPE_BF16);
    graph_replays(g, &d[0], 1, 0);
    graph_replays(g, &d[0], 280, 100);
    graph_replays(g, &d[1], 150, 0);
    graph_replays(g, &d[2], 60, 7);
    graph_replays(g, &d[2], d[2].n_ctx, 100); /* captured full: the replays refuse until truncated */
    graph_replays(g, &d[3], d[3].n_ctx - 40, 0);
    d[0].gpu_heads = 1; /* OFF: the host heads attended in place */
    graph_replays(g, &d[0], 250, 0);
    d[3].gpu_heads = NEO_GPU_HEADS_NONE;
    graph_replays(g, &d[3], d[3].n_ctx - 30, 0);
    d[1].gpu_heads = 3;
    graph_replays(g, &d[1], 190, 0);
#if !NEO_ATTN_NO_THREADS
    /* ON: each replay rings the listener, which attends the host heads on the pool */
    d[0].pipeline = NEO_PIPELINE_ON;
    graph_replays(g, &d[0], 1, 0);
    graph_replays(g, &d[0], 200, 50);
    d[2].gpu_heads = 1, d[2].pipeline = NEO_PIPELINE_ON;
    graph_replays(g, &d[2], 100, 0);
    d[3].pipeline = NEO_PIPELINE_ON; /* every head on the host */
    graph_replays(g, &d[3], d[3].n_ctx - 20, 0);
    /* HYBRID: the listener attends the host heads' cells before the cut of the length the replay
       reads, the device the rest in place, merged. A share of 0.1 cuts at 0 below 5 cells (the
       device has every cell), 0.9 at the length below 5 (the CPU has every cell); truncated
       between replays back into those lengths */
    d[0].pipeline = NEO_PIPELINE_HYBRID, d[0].cpu_share = 0.1f;
    graph_replays(g, &d[0], 1, 0);
    graph_replays(g, &d[0], 150, 3);
    d[0].cpu_share = 0.9f;
    graph_replays(g, &d[0], 1, 2);
    d[1].pipeline = NEO_PIPELINE_HYBRID; /* the default share, 3 of 4 heads on the device */
    graph_replays(g, &d[1], 60, 0);
    d[2].pipeline = NEO_PIPELINE_HYBRID, d[2].cpu_share = 0.3f;
    graph_replays(g, &d[2], 100, 40);
    d[3].pipeline = NEO_PIPELINE_HYBRID, d[3].cpu_share = 0.7f; /* every head on the host */
    graph_replays(g, &d[3], d[3].n_ctx - 20, 0);
    d[0].pipeline = NEO_PIPELINE_AUTO, d[0].cpu_share = 0.6f; /* AUTO that chose the hybrid */
    graph_replays(g, &d[0], 200, 0);
#endif
    graph_batch(g);
    {
        neo_layer     *l = NULL, *split[3] = {NULL, NULL, NULL};
        neo_layer_desc a = shape(4, 2, 64, 0, 64, NEO_TYPE_F16);
        float         *dq = g_alloc(g, 4 * 64), *dout = g_alloc(g, 4 * 64), *dk = g_alloc(g, 2 * 64);
        float          z[2 * 64] = {0};
        int            ok = CHECK(dq && dout && dk) && CHECK_STATUS(neo_layer_create(g->rt, &a, &l), NEO_OK);
        check_context("graph refusals: layers");
        if (ok) g_copy(g, dk, z, 2 * 64), CHECK_STATUS(neo_attn_append(l, dk, dk, 1), NEO_OK);
        for (int i = 0; i < 3 && ok; i++) { /* ON and HYBRID too where there is no thread to listen */
            neo_layer_desc b = a;
            b.gpu_heads = 1, b.pipeline = i == 0 ? NEO_PIPELINE_AUTO : i == 1 ? NEO_PIPELINE_HYBRID : NEO_PIPELINE_ON;
            if (i == 1 && !NEO_ATTN_NO_THREADS) break;
            ok = CHECK_STATUS(neo_layer_create(g->rt, &b, &split[i]), NEO_OK) &&
                 CHECK_STATUS(neo_attn_append(split[i], dk, dk, 1), NEO_OK);
        }
        if (ok) graph_refusals(g, l, split, NEO_ATTN_NO_THREADS ? 3 : 1, dq, dout);
        check_context("graph: two appends of one layer (%s)", g->cuda ? "cuda" : "stand-in");
        if (ok && g_begin(g)) { /* the layer is read back once a sync, however many appends it has */
            CHECK_STATUS(neo_attn_append(l, dk, dk, 1), NEO_OK);
            CHECK_STATUS(neo_attn_append(l, dk, dk, 1), NEO_OK);
            if (g_end(g)) {
                for (int r = 1; r <= 2; r++) {
                    g_replay(g);
                    CHECK_STATUS(neo_runtime_sync(g->rt), NEO_OK);
                    CHECK(neo_layer_length(l) == 1 + 2 * r);
                }
                g_drop(g);
                /* no capture now: eager calls run as eager ones, whatever the last call was */
                CHECK_STATUS(neo_attn_prefill(l, dq, 1, dout), NEO_OK);
                CHECK_STATUS(neo_attn_decode(l, dq, dout), NEO_OK);
                CHECK_STATUS(neo_layer_truncate(l, 5), NEO_OK);
                CHECK(neo_layer_length(l) == 5);
            }
        }
        neo_layer_destroy(l);
        for (int i = 0; i < 3; i++) neo_layer_destroy(split[i]);
        g_free(g, dq), g_free(g, dout), g_free(g, dk);
    }
}

static void test_graphs(void) {
    gcap g;
    memset(&g, 0, sizeof g);
    g.rt = rts_gpu[1];
    if (g.rt) graph_on(&g);
    { /* on a fresh runtime, the captured batch is the first: it has only what it reserves */
        neo_runtime_desc rd = {0};
        memset(&g, 0, sizeof g);
        rd.gpu = 1, rd.gpu_standin = 1, rd.n_threads = 2;
        check_context("graph runtime, stand-in");
        if (CHECK_STATUS(neo_runtime_create(&rd, &g.rt), NEO_OK)) graph_batch_first(&g), graph_batch(&g);
        neo_runtime_destroy(g.rt);
    }
#if NEO_TEST_CUDA
    if (rt_cuda) {
        neo_runtime_desc rd = {0};
        memset(&g, 0, sizeof g);
        g.cuda = 1;
        check_context("graph runtime");
        if (!CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking) == cudaSuccess)) return;
        rd.gpu = 1, rd.gpu_stream = g.stream, rd.n_threads = 2;
        if (CHECK_STATUS(neo_runtime_create(&rd, &g.rt), NEO_OK)) graph_on(&g);
        neo_runtime_destroy(g.rt);
        cudaStreamDestroy(g.stream);
    }
#endif
}

int main(void) {
    const char *env = getenv("NEO_TEST_SEED");
    unsigned long long seed = env && *env ? strtoull(env, NULL, 0) : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
    int i, t;
    if (seed == 0) seed = 1;
    rng_s = seed;
    quick = (env = getenv("NEO_TEST_QUICK")) && *env && strcmp(env, "0") != 0;
    printf("test_ref: seed %llu (NEO_TEST_SEED=%llu repeats this run)%s\n", seed, seed, quick ? ", quick" : "");
    fflush(stdout);

    if ((env = getenv("NEO_TEST_ONLY")) && *env) only_group = env, printf("test_ref: only \"%s\"\n", env);
    test_conversions();
    test_lane_sums();
    test_prefetch_target();
    open_runtimes();
    if ((env = getenv("NEO_TEST_ONLY_SPLIT")) && *env) { /* NEO_TEST_ONLY_SPLIT=N: the split cases, N times */
        for (i = atoi(env); i > 0; i--) timed("split layers", test_split), timed("hybrid", test_hybrid);
        goto report;
    }
    timed("head dims", test_head_dims);
    timed("head_dim_v", test_head_dim_v);
    timed("GQA groups", test_gqa);
    timed("options", test_options);
    timed("long contexts", test_long);
    timed("truncate", test_truncate);
    timed("full cache", test_full);
    timed("determinism", test_determinism);
    timed("gated decode", test_gated);
    timed("split layers", test_split);
    timed("hybrid", test_hybrid);
    timed("shared stage chunks", test_stage_shared);
    timed("in place", test_in_place);
    timed("non-finite", test_nonfinite);
    timed("large scores", test_large_scores);
    timed("int range", test_int_range);
#if NEO_TEST_CUDA
    timed("INT_MAX on GPU", test_int_max_gpu);
#endif
    timed("batches", test_batch);
    timed("moving heads", test_set_gpu_heads);
    timed("CUDA graphs", test_graphs);
report:

    for (i = 0; i < N_PATH; i++) {
        if (i == P_STANDIN || (i < N_ISA && isa_ok[i]) || (i == P_CUDA && rt_cuda))
            printf("test_ref: %-11s %5ld calls, max relative L2 error %.3g\n", path_names[i], n_calls[i], max_err[i]);
        else if (i < N_ISA)
            printf("test_ref: %-11s NOT RUN: not in this CPU or build (NEO_ERR_UNSUPPORTED)\n", path_names[i]);
        for (t = 1; t <= 4 && i < P_CUDA; t++) {
            if (i == P_STANDIN && rts_gpu[t]) stage_sync(rts_gpu[t]);
            neo_runtime_destroy(i < N_ISA ? rts[i][t] : rts_gpu[t]);
        }
    }
    free(staged);
    neo_runtime_destroy(rt_cuda);
    check_context("%s", "");
    /* the scalar path (unless split only or one group) and the stand-in GPU ran */
    CHECK((n_calls[0] > 0 || (env && *env) || only_group) && n_calls[P_STANDIN] > 0);
    CHECK(!NEO_TEST_CUDA || n_calls[P_CUDA] > 0);
    return check_summary("test_ref");
}
