/* floors.cu - the floors of a decode-shaped kernel on this GPU, for bench's sweep (not part of the
   library; built into build/bench).

   A decode attention call over a layer's device KV must read every byte, and because one KV head
   is spread over many SMs to read it at the GPU's rate, it must also combine what the SMs found:
   the softmax of a query needs every cell's score. These kernels do that dataflow and nothing
   else, on a grid of n_kv heads x S splits (the cells of a split contiguous; for a Llama-3-8B
   layer at 4k the library's own grid, 8 x 16), so that the library's call can be set beside what
   this much work takes with no arithmetic, in the same run:

     read           each block reads its split's K and V rows and folds them into one partial of
                    the query group's outputs (G x d floats); the partials are written, not combined
     global merge   read, then the combine a deterministic call needs without clusters: each block
                    writes its partial and (m, l) to global memory, counts its arrival with one
                    acquire-release atomic, and the last of a head's S blocks reads the S partials
                    back and sums them in split order, weighted by e^(m - max)
     cluster merge  read, then the S blocks of a head (S <= 16, sm_90) exchange their partials
                    through distributed shared memory, each finishing an S-th of the outputs
     atomic adds    read, then each block adds its partial into the output with fire-and-forget
                    float atomics: no block waits for another, the cheapest combine there is and
                    one a deterministic library cannot use (the sum's order follows the arrivals)

   Three readers (floors.h). Plain 16-byte loads, 2 FL_UNROLL a thread a round (all of a split's
   bytes in one round when it holds at most 256 cells of head_dim 128; longer splits read in
   rounds and are no floor), a block letting the next launch begin once its reads have returned:
   BENCH_FLOOR_PLAIN leaves the registers to the compiler, which keeps the kernels in about 30, so
   only a few of a thread's loads are in flight at a time; BENCH_FLOOR_PLAIN64 caps them at 64 a
   thread, two blocks an SM, and the compiler keeps most of them in flight. Either's blocks are
   small enough that the next call's can share the SM, or with smem (bench_floor_setup) each
   block also holds that much dynamic shared memory, unused, so that it keeps its SM to itself
   until it exits, as the library's wide block (192 KB of rings) does. BENCH_FLOOR_BULK: bulk
   copies of 16-cell tiles into shared memory, the library's way, all issued at once, the next
   launch let in right after: the tiles hold the split's bytes (128 KB a block for 256 cells of
   head_dim 128: one block an SM too). Every kernel is launched as a programmatic dependent on
   sm_90 (as the library's are) and waits for the previous grid only before its first write.
   K, V: [n_kv][kstride elements] of f16 or bf16 (2 bytes), head h's cells at h * kstride, cell c
   at c * d. */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "floors.h"

#define FL_THREADS 512
#define FL_UNROLL 8
/* the blocks an SM a reader's kernels are compiled for: BENCH_FLOOR_PLAIN64's two cap them at 64
   registers a thread; 0 leaves the count to the compiler */
#define FL_MIN_BLOCKS(R) ((R) == BENCH_FLOOR_PLAIN64 ? 2 : 0)

struct fl_args {
    const uint4 *k, *v;
    size_t       kstride, vstride; /* uint4s between heads */
    int          ctx, d, g, S, chunk; /* cells, head_dim, query group, splits, cells a split */
    float       *work;                /* [n_kv][S][g * d + 2] the partials and their (m, l) */
    unsigned    *cnt;                 /* [n_kv] arrivals, reset by the last block */
    float       *out;                 /* [n_kv][g * d] */
};

/* programmatic dependent launch: sm_90 (older GPUs launch plainly, each grid after the last) */
__device__ __forceinline__ void fl_pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void fl_pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* The split's K and V rows read and folded into one word a thread; thread t < g * d then holds
   the partial's element t (a finite float) and a made-up (m, l) of its query. Plain: FL_UNROLL
   16-byte loads of K and of V a thread a round. BENCH_FLOOR_BULK (sm_90): bulk copies of 16-cell
   tiles into dynamic shared memory, all issued at once on one barrier, as the library's kernel
   reads (its rings hold the split's tiles at the contexts these floors are for). */
template <int R> __device__ __forceinline__ float fl_read(const fl_args &a, float *ml) {
    const int    h = blockIdx.x, s = blockIdx.y, c0 = s * a.chunk, c1 = min(a.ctx, c0 + a.chunk);
    const int    n = c1 > c0 ? (c1 - c0) * a.d / 8 : 0; /* uint4s of K (and of V) */
    const uint4 *k = a.k + h * a.kstride + (size_t)c0 * a.d / 8, *v = a.v + h * a.vstride + (size_t)c0 * a.d / 8;
    unsigned     x = 0;
    if constexpr (R == BENCH_FLOOR_BULK) {
#if __CUDA_ARCH__ >= 900
        extern __shared__ __align__(128) uint4 fl_smem[];
        __shared__ __align__(8) unsigned long long bar;
        const unsigned b = (unsigned)__cvta_generic_to_shared(&bar), tile = (unsigned)(16 * a.d * 2);
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"((unsigned)(2 * n * 16)) : "memory");
            for (unsigned o = 0; o < (unsigned)n * 16; o += tile) {
                const unsigned len = min(tile, (unsigned)n * 16 - o), dk = (unsigned)__cvta_generic_to_shared(fl_smem) + o;
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dk),
                             "l"(reinterpret_cast<const char *>(k) + o), "r"(len), "r"(b)
                             : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 dk + (unsigned)n * 16),
                             "l"(reinterpret_cast<const char *>(v) + o), "r"(len), "r"(b)
                             : "memory");
            }
        }
        fl_pdl_trigger();
        __syncthreads(); /* the barrier's init before anyone waits on it */
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done)
                         : "r"(b)
                         : "memory");
        for (int i = threadIdx.x; i < 2 * n; i += FL_THREADS) x ^= fl_smem[i].x ^ fl_smem[i].y ^ fl_smem[i].z ^ fl_smem[i].w;
#endif
    } else {
        for (int i = threadIdx.x; i < n; i += FL_THREADS * FL_UNROLL) {
            uint4 r[2 * FL_UNROLL];
#pragma unroll
            for (int u = 0; u < FL_UNROLL; u++) {
                const int j = i + u * FL_THREADS;
                r[2 * u] = j < n ? __ldcs(k + j) : make_uint4(0, 0, 0, 0);
                r[2 * u + 1] = j < n ? __ldcs(v + j) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < 2 * FL_UNROLL; u++) x ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
        }
        fl_pdl_trigger();
    }
    ml[0] = (float)(x & 15u), ml[1] = 1.0f + (float)(x & 7u);
    return (float)(x & 0xffffu) * 0x1p-16f;
}

template <int R> __global__ void __launch_bounds__(FL_THREADS, FL_MIN_BLOCKS(R)) fl_read_kernel(const fl_args a) {
    float      ml[2];
    const float p = fl_read<R>(a, ml);
    fl_pdl_wait();
    const int   t = threadIdx.x, gd = a.g * a.d;
    float      *w = a.work + ((size_t)blockIdx.x * a.S + blockIdx.y) * (gd + 2);
    if (t < gd) __stcg(w + t, p);
}

template <int R> __global__ void __launch_bounds__(FL_THREADS, FL_MIN_BLOCKS(R)) fl_global_kernel(const fl_args a) {
    __shared__ int last;
    float          ml[2];
    const float    p = fl_read<R>(a, ml);
    fl_pdl_wait();
    const int t = threadIdx.x, gd = a.g * a.d, h = blockIdx.x, S = a.S;
    float    *w0 = a.work + (size_t)h * S * (gd + 2), *w = w0 + (size_t)blockIdx.y * (gd + 2);
    if (t < gd) __stcg(w + t, p);
    if (t == 0) __stcg(reinterpret_cast<float2 *>(w + gd), make_float2(ml[0], ml[1]));
    __syncthreads();
    if (t == 0) {
        unsigned prev;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(a.cnt + h) : "memory");
        last = prev == (unsigned)(S - 1);
        if (last) a.cnt[h] = 0u;
    }
    __syncthreads();
    if (!last || t >= gd) return;
    float M = -INFINITY, L = 0.0f, acc = 0.0f;
#pragma unroll 16
    for (int s = 0; s < S; s++) M = fmaxf(M, __ldcg(w0 + (size_t)s * (gd + 2) + gd));
#pragma unroll 16
    for (int s = 0; s < S; s++) {
        const float *ws = w0 + (size_t)s * (gd + 2);
        const float  e = __expf(__ldcg(ws + gd) - M);
        L = fmaf(e, __ldcg(ws + gd + 1), L);
        acc = fmaf(e, __ldcg(ws + t), acc);
    }
    a.out[(size_t)h * gd + t] = acc / L;
}

template <int R> __global__ void __launch_bounds__(FL_THREADS, FL_MIN_BLOCKS(R)) fl_cluster_kernel(const fl_args a) {
#if __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    __shared__ float part[FL_THREADS], sml[2];
    float            ml[2];
    const float      p = fl_read<R>(a, ml);
    const int        t = threadIdx.x, gd = a.g * a.d, S = a.S, r = blockIdx.y;
    cg::cluster_group cl = cg::this_cluster();
    part[t] = p;
    if (t == 0) sml[0] = ml[0], sml[1] = ml[1];
    cl.sync();
    fl_pdl_wait();
    const int per = (gd + S - 1) / S, f = r * per + t;
    if (t < per && f < gd) {
        float M = -INFINITY, L = 0.0f, acc = 0.0f;
        for (int s = 0; s < S; s++) M = fmaxf(M, *cl.map_shared_rank(&sml[0], (unsigned)s));
        for (int s = 0; s < S; s++) {
            const float e = __expf(*cl.map_shared_rank(&sml[0], (unsigned)s) - M);
            L = fmaf(e, *cl.map_shared_rank(&sml[1], (unsigned)s), L);
            acc = fmaf(e, *cl.map_shared_rank(&part[f], (unsigned)s), acc);
        }
        a.out[(size_t)blockIdx.x * gd + f] = acc / L;
    }
    cl.sync(); /* every block's shared memory stays until the others have read it */
#else
    (void)a;
#endif
}

template <int R> __global__ void __launch_bounds__(FL_THREADS, FL_MIN_BLOCKS(R)) fl_atomic_kernel(const fl_args a) {
    float       ml[2];
    const float p = fl_read<R>(a, ml);
    fl_pdl_wait();
    const int t = threadIdx.x, gd = a.g * a.d;
    if (t < gd) atomicAdd(a.out + (size_t)blockIdx.x * gd + t, p * ml[1]);
}

static fl_args  fl_a;
static int      fl_sm, fl_major, fl_cluster_ok;
static unsigned fl_grid_x;
static size_t   fl_dyn;
static int      fl_reader;
#define FL_FNS(R) {(const void *)fl_read_kernel<R>, (const void *)fl_global_kernel<R>, (const void *)fl_cluster_kernel<R>, (const void *)fl_atomic_kernel<R>}
static const void *const fl_fns[BENCH_FLOOR_READERS][BENCH_FLOOR_KINDS] = {FL_FNS(BENCH_FLOOR_PLAIN), FL_FNS(BENCH_FLOOR_BULK),
                                                                           FL_FNS(BENCH_FLOOR_PLAIN64)};

int bench_floor_setup(int n_kv, int ctx, int d, int g, size_t smem, int reader) {
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&fl_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&fl_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return -1;
    if (g * d > FL_THREADS || d % 8) return -1;
    bench_floor_release();
    if (reader < 0 || reader >= BENCH_FLOOR_READERS || (reader == BENCH_FLOOR_BULK && fl_major < 9)) return -1;
    fl_reader = reader;
    fl_a.ctx = ctx, fl_a.d = d, fl_a.g = g;
    /* S splits a head: n_kv x S blocks at most one an SM, none shorter than 256 cells (one
       16-cell tile a warp of 16 warps), so fewer than the SMs at short contexts */
    fl_a.S = fl_sm / n_kv > 0 ? fl_sm / n_kv : 1;
    if (fl_a.S > (ctx + 255) / 256) fl_a.S = (ctx + 255) / 256;
    fl_a.chunk = (ctx + fl_a.S - 1) / fl_a.S;
    /* the bulk reader's tiles; else unused, only holding the SM as the library's rings do */
    fl_dyn = reader == BENCH_FLOOR_BULK ? (size_t)fl_a.chunk * d * 2 * 2 : smem;
    if (fl_dyn < smem) fl_dyn = smem;
    for (int k = 0; k < BENCH_FLOOR_KINDS; k++)
        if (cudaFuncSetAttribute(fl_fns[reader][k], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fl_dyn) != cudaSuccess) return -1;
    fl_grid_x = (unsigned)n_kv;
    fl_cluster_ok = fl_major >= 9 && fl_a.S >= 2 && fl_a.S <= 16;
    if (fl_cluster_ok && fl_a.S > 8 &&
        cudaFuncSetAttribute(fl_fns[reader][BENCH_FLOOR_CLUSTER], cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
        fl_cluster_ok = 0, cudaGetLastError();
    if (cudaMalloc(&fl_a.work, (size_t)n_kv * fl_a.S * (g * d + 2) * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&fl_a.cnt, (size_t)n_kv * sizeof(unsigned)) != cudaSuccess ||
        cudaMalloc(&fl_a.out, (size_t)n_kv * g * d * sizeof(float)) != cudaSuccess ||
        cudaMemset(fl_a.cnt, 0, (size_t)n_kv * sizeof(unsigned)) != cudaSuccess)
        return -1;
    return fl_a.S;
}

void bench_floor_release(void) {
    cudaFree(fl_a.work), cudaFree(fl_a.cnt), cudaFree(fl_a.out);
    fl_a.work = NULL, fl_a.cnt = NULL, fl_a.out = NULL;
}

int bench_floor_has(int kind) { return kind != BENCH_FLOOR_CLUSTER || fl_cluster_ok; }

int bench_floor(int kind, const void *k, const void *v, size_t kstride, size_t vstride, cudaStream_t s) {
    if (kind < 0 || kind >= BENCH_FLOOR_KINDS || !bench_floor_has(kind)) return -1;
    fl_args a = fl_a;
    a.k = static_cast<const uint4 *>(k), a.v = static_cast<const uint4 *>(v);
    a.kstride = kstride * 2 / 16, a.vstride = vstride * 2 / 16;
    cudaLaunchConfig_t   cfg = {};
    cudaLaunchAttribute  at[2];
    int                  na = 0;
    if (fl_major >= 9) at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization, at[na++].val.programmaticStreamSerializationAllowed = 1;
    if (kind == BENCH_FLOOR_CLUSTER) {
        at[na].id = cudaLaunchAttributeClusterDimension;
        at[na].val.clusterDim.x = 1, at[na].val.clusterDim.y = (unsigned)a.S, at[na++].val.clusterDim.z = 1;
    }
    cfg.gridDim = dim3(fl_grid_x, (unsigned)a.S), cfg.blockDim = dim3(FL_THREADS), cfg.dynamicSmemBytes = fl_dyn, cfg.stream = s;
    cfg.attrs = at, cfg.numAttrs = na;
    void *args[1] = {&a};
    return cudaLaunchKernelExC(&cfg, fl_fns[fl_reader][kind], args) == cudaSuccess ? 0 : -1;
}
