/* in_place.c - how fast the device's attention kernel reads a split layer's host heads in place
   over the bus, by block shape and split count (a benchmark tool, not a test; needs a CUDA GPU).

   An OFF decode whose host half is short, and every captured OFF or hybrid decode, has the GPU
   attend the host heads where they are, its loads crossing the bus (neo__attn_args.kv_host). This
   program times those attends alone for one Llama-3-8B layer (32 query / 8 KV heads, head_dim
   128, f16) with 1 of its 8 KV heads on the host, at 4k, 32k and 128k cells, through the
   kernels' test entry with the plan forced: the planner's own, the wide and the narrow tensor-core
   block, each at split caps from 4 to 128 (0 = the planner's count). Calls rotate over layers
   holding >= 256 MiB of host heads, back to back, wall clock with a final stream sync, median of
   15 rounds. It prints GB/s of host bytes, the pinned host-to-device copy rate measured in the same
   run (one copy of a layer's host half, and 64 MiB copies, best of 16 and of 5) as the ceiling,
   and the layer's device half (7 heads, in device memory) for scale.

       make build/in-place && build/in-place
       (links build/neo_attn_cuda.o; CUDA_ARCHS=90 make ... builds only the Hopper image) */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include "examples/bench/bench_util.h"
#include <cuda_runtime.h>

#define CU(x)                                                                                                                   \
    do {                                                                                                                        \
        cudaError_t e_ = (x);                                                                                                   \
        if (e_ != cudaSuccess) {                                                                                                \
            fprintf(stderr, "in-place: %s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                                \
            exit(1);                                                                                                            \
        }                                                                                                                       \
    } while (0)

int neo__cu_test_attend(void *state, const neo__attn_args *a, int stream, int kernel, int shape, int max_splits);

static cudaStream_t st;
static float       *dq, *dout; /* [32][128] device: q, and out */

static void check(neo_status s, const char *what) {
    if (s != NEO_OK) {
        fprintf(stderr, "in-place: %s: %s\n", what, neo_status_string(s));
        exit(1);
    }
}
static void log_line(void *user, neo_log_level level, const char *msg) {
    (void)user, (void)level;
    fprintf(stderr, "neo_attn: %s\n", msg);
}

/* one attend of L's host heads in place (dev = 0) or of its device heads (dev = 1), plan forced */
static int attend(neo_layer *L, int shape, int cap, int dev) {
    neo__attn_args a;
    neo__layer_args(L, &a, dq, 1, dout, 1);
    if (dev) a.k = L->k_dev, a.v = L->v_dev, a.h1 = L->gpu_heads;
    else neo__host_in_place(L, &a);
    return neo__cu_test_attend(L->rt->dev_state, &a, NEO__STREAM_MAIN, -1, shape, cap);
}

/* µs a call, median of 15 rounds of back-to-back calls over L[0..n); NAN if the plan cannot be forced */
static double time_attend(neo_layer **L, int n, int shape, int cap, int dev) {
    double t[15];
    int    per = n < 16 ? 16 : n, next = 0;
    for (int i = 0; i < per; i++)
        if (attend(L[i % n], shape, cap, dev)) return NAN;
    CU(cudaStreamSynchronize(st));
    for (int r = 0; r < 15; r++) {
        double w0 = now_s();
        for (int i = 0; i < per; i++)
            if (attend(L[next++ % n], shape, cap, dev)) return NAN;
        CU(cudaStreamSynchronize(st));
        t[r] = (now_s() - w0) / per * 1e6;
    }
    return median(t, 15);
}

/* GB/s of the best of reps pinned host-to-device copies of bytes */
static double h2d(void *dst, const void *src, size_t bytes, int reps) {
    double      g[16];
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int r = 0; r < reps; r++) {
        float ms;
        CU(cudaEventRecord(e0, st));
        CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st));
        CU(cudaEventRecord(e1, st));
        CU(cudaEventSynchronize(e1));
        CU(cudaEventElapsedTime(&ms, e0, e1));
        g[r] = (double)bytes / (ms * 1e-3) * 1e-9;
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return best(g, reps);
}

int main(void) {
    const int       ctxs[3] = {4096, 32768, 131072}, caps[8] = {0, 4, 8, 16, 32, 64, 96, 128};
    const size_t    rows = (size_t)1024 * 8 * 128; /* an append of 1024 tokens, K or V */
    neo_runtime    *rt;
    neo_runtime_desc rd;
    float          *dk, *dv;
    void           *hp, *dp;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    memset(&rd, 0, sizeof rd);
    rd.gpu = 1, rd.gpu_stream = st, rd.log = log_line;
    check(neo_runtime_create(&rd, &rt), "neo_runtime_create");
    CU(cudaMalloc((void **)&dq, 32 * 128 * sizeof(float)));
    CU(cudaMalloc((void **)&dout, 32 * 128 * sizeof(float)));
    CU(cudaMalloc((void **)&dk, rows * sizeof(float)));
    CU(cudaMalloc((void **)&dv, rows * sizeof(float)));
    CU(cudaMemset(dq, 0, 32 * 128 * sizeof(float))); /* the bytes read do not depend on the values */
    CU(cudaMemset(dk, 0, rows * sizeof(float)));
    CU(cudaMemset(dv, 0, rows * sizeof(float)));
    CU(cudaMallocHost(&hp, (size_t)64 << 20));
    CU(cudaMalloc(&dp, (size_t)64 << 20));
    memset(hp, 1, (size_t)64 << 20);
    printf("# pinned host-to-device copies: 64 MiB %.1f GB/s (best of 5)\n", h2d(dp, hp, (size_t)64 << 20, 5));
    for (int ci = 0; ci < 3; ci++) {
        const int    ctx = ctxs[ci];
        const size_t hb = (size_t)ctx * 2 * 128 * 2; /* one f16 KV head's K and V */
        int          n = (int)(((size_t)256 << 20) / hb) + 1;
        if (n > 128) n = 128;
        if (n < 2) n = 2;
        neo_layer    **L = (neo_layer **)malloc((size_t)n * sizeof *L);
        neo_layer_desc d;
        memset(&d, 0, sizeof d);
        d.n_head = 32, d.n_head_kv = 8, d.head_dim = 128, d.n_ctx = ctx, d.kv_type = NEO_TYPE_F16, d.gpu_heads = 7;
        d.pipeline = NEO_PIPELINE_OFF;
        if (!L) return 1;
        for (int i = 0; i < n; i++) {
            check(neo_layer_create(rt, &d, &L[i]), "neo_layer_create");
            for (int p = 0; p < ctx; p += 1024) check(neo_attn_append(L[i], dk, dv, 1024), "neo_attn_append");
        }
        CU(cudaDeviceSynchronize());
        printf("# %d cells, 1 of 8 KV heads on the host (%.2f MiB a layer, %d layers): GB/s read in place; "
               "one copy of it %.1f GB/s (best of 16)\n",
               ctx, (double)hb / 1048576.0, n, h2d(dp, hp, hb, 16));
        printf("%-9s", "cap");
        for (int k = 0; k < 8; k++) printf(" %6d", caps[k]);
        printf("\n");
        for (int sh = -1; sh <= 1; sh++) {
            printf("%-9s", sh < 0 ? "planner" : sh ? "narrow" : "wide");
            for (int k = 0; k < 8; k++) printf(" %6.1f", (double)hb / (time_attend(L, n, sh, caps[k], 0) * 1e-6) * 1e-9);
            printf("\n");
        }
        printf("the device half (7 heads in device memory), the planner's: %.1f us\n", time_attend(L, n, -1, 0, 1));
        fflush(stdout);
        for (int i = 0; i < n; i++) neo_layer_destroy(L[i]);
        free(L);
    }
    neo_runtime_destroy(rt);
    CU(cudaFreeHost(hp));
    CU(cudaFree(dp));
    return 0;
}
