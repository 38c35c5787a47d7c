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
     tagged merge   read, then each block writes its partial and (m, l) as tagged words (a float
                    and the call's tag in one 64-bit store, so that a reader that sees the tag sees
                    the value: no fence, no arrival count) and exits, except the head's first
                    block, which polls the S partials until every word carries the call's tag and
                    sums them in split order (S <= 16). The tag is the head's call count, read
                    after the wait and advanced by that block once it has seen every partial.
     tagged slices  the same, but each of the S blocks polls and sums an S-th of the outputs

   Three readers of the bytes alone (floors.h). Plain 16-byte loads, 2 FL_UNROLL a thread a round (all of a split's
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
   BENCH_FLOOR_MMA does the call's arithmetic too (its comment, below): its global kind is a
   whole decode (checked against float64 by bench_floor_check), its read kind the same without
   the merge of the splits (each block's partial written, not combined); BENCH_FLOOR_MMA_QB the
   same with q's parts made once a block instead of by every warp. With bench_floor_stamps on,
   their blocks stamp their SM and the times of their steps, which bench_floor_timeline reads
   back as each call's timeline after the previous call's end.
   K, V: [n_kv][kstride elements] of f16 or bf16 (2 bytes), head h's cells at h * kstride, cell c
   at c * d. */
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

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
    float       *work;                /* [n_kv][S][g * d + 16] the partials and their (m, l), up to 8 queries */
    unsigned long long *tw;           /* [n_kv][S][g * d + 2] the tagged kinds' partials and (m, l) */
    unsigned           *ep;           /* [n_kv] the tagged kinds' last tag of each head */
    unsigned    *cnt;                 /* [n_kv] arrivals, reset by the last block */
    float       *out;                 /* [n_kv][g * d] */
    const float *q;                   /* [n_kv][g][d] BENCH_FLOOR_MMA's queries */
    float        scale;               /* and their score scale, 1 / sqrt(d) */
    unsigned long long *stamps;       /* NULL, or BENCH_FLOOR_MMA's timeline: [FL_CALLS][n_kv * S][FL_ST] */
    int                 call;         /* the call's number, for the stamps */
    int                 dry, reps;    /* BENCH_FLOOR_MMA's passes of its arithmetic before the wait and after it */
};
/* the stamps a block of BENCH_FLOOR_MMA leaves (thread 0, %globaltimer ns; FL_SMID its SM, FL_LAST
   1 in the block that merged), for the last FL_CALLS calls */
enum { FL_SMID, FL_START, FL_WAITED, FL_Q, FL_ARITH, FL_WRITTEN, FL_END, FL_LAST, /* block-wide, thread 0 */
       FL_MX, FL_SCORES, FL_SOFT, FL_VREADY, FL_PV, /* warp 0's steps, each once its result is there */
       FL_ARRIVED, FL_CLKQ, FL_CLKA, /* thread 0's clock64 beside FL_Q and FL_ARITH */
       FL_ST };
#define FL_CALLS 64
__device__ __forceinline__ void fl_put(const fl_args &a, int i, unsigned long long x) {
    if (a.stamps && threadIdx.x == 0) a.stamps[(((size_t)(a.call % FL_CALLS) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * FL_ST + i] = x;
}
/* a stamp taken once dep is there: the comparison waits for it, then the timer is read */
__device__ __forceinline__ void fl_stampd(const fl_args &a, int i, float dep) {
    if (!a.stamps) return;
    unsigned long long t;
    asm volatile("{ .reg .pred p; setp.eq.f32 p, %1, 0f7F7FFFFF; mov.u64 %0, %%globaltimer; @p add.u64 %0, %0, 1; }" : "=l"(t) : "f"(dep));
    fl_put(a, i, t);
}
__device__ __forceinline__ void fl_stamp(const fl_args &a, int i) {
    if (!a.stamps) return;
    unsigned long long t;
    if (i == FL_SMID) asm volatile("{ .reg .u32 r; mov.u32 r, %%smid; cvt.u64.u32 %0, r; }" : "=l"(t));
    else asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    fl_put(a, i, t);
}

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

/* The block's arrival at its head's counter, once every thread has written its share of the
   partial (the barrier, then one acquire-release add, which publishes the block's writes and
   makes the others' visible): true in the last of the S blocks, which resets the counter.
   last: the block's shared flag. */
__device__ __forceinline__ bool fl_last_block(unsigned *cnt, int S, int &last) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned prev;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(cnt) : "memory");
        last = prev == (unsigned)(S - 1);
        if (last) *cnt = 0u;
    }
    __syncthreads();
    return last != 0;
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
    if (!fl_last_block(a.cnt + h, S, last) || t >= gd) return;
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

/* A tagged word: the float's bits low, the tag high, one 64-bit access (single-copy atomic). */
__device__ __forceinline__ void fl_put_tagged(unsigned long long *p, float x, unsigned tag) {
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(((unsigned long long)tag << 32) | __float_as_uint(x)) : "memory");
}
__device__ __forceinline__ unsigned long long fl_get_tagged(const unsigned long long *p) {
    unsigned long long x;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(x) : "l"(p) : "memory");
    return x;
}
/* Column f (< g * d) of head h's S partials, polled until all 3S words (value, m, l) carry tag e,
   then summed in split order: the merged output. All S loads of a round are in flight at once. */
__device__ __forceinline__ float fl_poll_merge(const unsigned long long *w0, int S, int gd, int f, unsigned e) {
    unsigned long long x[16], m[16], l[16];
    unsigned           missing = (1u << S) - 1u;
    while (missing) {
#pragma unroll
        for (int s = 0; s < 16; s++)
            if (missing >> s & 1u) {
                const unsigned long long *ws = w0 + (size_t)s * (gd + 2);
                x[s] = fl_get_tagged(ws + f), m[s] = fl_get_tagged(ws + gd), l[s] = fl_get_tagged(ws + gd + 1);
            }
#pragma unroll
        for (int s = 0; s < 16; s++)
            if ((missing >> s & 1u) && (unsigned)(x[s] >> 32) == e && (unsigned)(m[s] >> 32) == e && (unsigned)(l[s] >> 32) == e)
                missing &= ~(1u << s);
    }
    float M = -INFINITY, L = 0.0f, acc = 0.0f;
#pragma unroll
    for (int s = 0; s < 16; s++)
        if (s < S) M = fmaxf(M, __uint_as_float((unsigned)m[s]));
#pragma unroll
    for (int s = 0; s < 16; s++)
        if (s < S) {
            const float w = __expf(__uint_as_float((unsigned)m[s]) - M);
            L = fmaf(w, __uint_as_float((unsigned)l[s]), L);
            acc = fmaf(w, __uint_as_float((unsigned)x[s]), acc);
        }
    return acc / L;
}

/* SLICES: every block merges an S-th of the head's outputs; else the first block merges them all */
template <int R, bool SLICES> __global__ void __launch_bounds__(FL_THREADS, FL_MIN_BLOCKS(R)) fl_tagged_kernel(const fl_args a) {
    __shared__ unsigned se;
    float               ml[2];
    const float         p = fl_read<R>(a, ml);
    fl_pdl_wait();
    const int t = threadIdx.x, gd = a.g * a.d, h = blockIdx.x, S = a.S, r = blockIdx.y;
    /* read once a block: a word of the block's seen with tag e means the whole block has read it */
    if (t == 0) se = *(volatile const unsigned *)(a.ep + h) + 1u;
    __syncthreads();
    const unsigned      e = se;
    unsigned long long *w0 = a.tw + (size_t)h * S * (gd + 2), *w = w0 + (size_t)r * (gd + 2);
    if (t < gd) fl_put_tagged(w + t, p, e);
    if (t == 0) fl_put_tagged(w + gd, ml[0], e), fl_put_tagged(w + gd + 1, ml[1], e);
    if (!SLICES && r != 0) return;
    const int per = SLICES ? (gd + S - 1) / S : gd, f = (SLICES ? r * per : 0) + t;
    if (t < per && f < gd) a.out[(size_t)h * gd + f] = fl_poll_merge(w0, S, gd, f, e);
    if (r != 0) return;
    /* the first block has seen every block's words, so every block has read the tag: advance it.
       The next call reads it after its wait, that is after this grid is done. */
    __syncthreads();
    if (t == 0) *(volatile unsigned *)(a.ep + h) = e;
}

/* BENCH_FLOOR_MMA: the call's arithmetic too, on the dataflow of the plain 64-register reader
   (f16 K and V, head_dim 128, query group <= 8, splits of whole 16-cell tiles, every cell
   visible: a decode at the layer's last position, no mask, no sinks). 16 warps of one 16-cell
   tile each; a lane's share of its tile's K rows (rows g and g + 8, chunks 4P + c: the A
   fragments of S^T = K . Q^T, the library's bulk-path order) goes straight into registers, and
   the tile's V rows come by one bulk copy into the warp's 4 KB of shared memory, both before the
   wait, so that a block of 64 registers a thread and 64 KB leaves room for the next call's block
   on its SM (with smem, bench_floor_setup, it holds that much instead: one block an SM). After
   the wait: q staged in shared memory, split into two f16 parts after a scaling
   by a power of two (as the library carries it), the scores (tensor cores, f32 sums), the
   softmax, O^T += V^T . P^T with the weights in two f16 parts, the warps' combine through shared
   memory, and the global merge of the splits as BENCH_FLOOR_GLOBAL's, with real weights. Its
   outputs are checked against float64 (bench_floor_check). */
#define FL_W (FL_THREADS / 32)
__device__ __forceinline__ uint32_t fl_pack(float x, float y) {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t *>(&h);
}
__device__ __forceinline__ float2 fl_unpack(uint32_t u) { return __half22float2(*reinterpret_cast<__half2 *>(&u)); }
__device__ __forceinline__ void fl_mma16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t fl_movt(uint32_t x) {
    uint32_t y;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* The last block's merge of head h's S partials (w0: [S][g * d + 16], each with its queries'
   (m, l) after it), in split order, into out. */
__device__ __forceinline__ void fl_mma_merge(const fl_args &a, const float *w0, int h, int d) {
    const int gd = a.g * d, S = a.S;
    for (int f = threadIdx.x; f < gd; f += FL_THREADS) {
        const int i = f / d;
        float     M = -INFINITY, L = 0.0f, s = 0.0f;
#pragma unroll 16
        for (int u = 0; u < S; u++) M = fmaxf(M, __ldcg(w0 + (size_t)u * (gd + 16) + gd + 2 * i));
#pragma unroll 16
        for (int u = 0; u < S; u++) {
            const float *wu = w0 + (size_t)u * (gd + 16);
            const float  mu = __ldcg(wu + gd + 2 * i), e = mu == -INFINITY ? 0.0f : expf(mu - M);
            L = fmaf(e, __ldcg(wu + gd + 2 * i + 1), L);
            s = fmaf(e, __ldcg(wu + f), s);
        }
        a.out[(size_t)h * gd + f] = s / L;
    }
}

/* QB: q's two f16 parts (and each query's score scale) made once a block after the wait, by a warp
   a query, into shared memory, from which every warp loads its B fragments (16 bytes a lane a
   k-step pair); else every warp makes its own from q in shared memory (the library's way). */
template <bool MERGE, bool QB> __global__ void __launch_bounds__(FL_THREADS, 2) fl_mma_kernel(const fl_args a) {
#if __CUDA_ARCH__ >= 900
    constexpr int D = 128, CPR = D / 8, RS = D + 1;
    extern __shared__ __align__(128) uint4 fl_smem[]; /* [FL_W][16 * CPR] V tiles, then [FL_W][G][RS] the warps' acc */
    constexpr int QR = D + 32; /* halves a row of qp: a quarter warp's 16-byte reads of rows g, g + 1 fall in distinct banks */
    __shared__ float qsm[QB ? 1 : 8 * D], wm[FL_W][8], wl[FL_W][8], ww[FL_W][8], bm[8], bl[8], qsc[8];
    __shared__ __align__(16) __half qp[QB ? 2 : 1][8][QR]; /* QB: q's parts, [part][query][dim], rows G.. zero */
    __shared__ __align__(8) unsigned long long bar[FL_W];
    __shared__ int last;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3, h = blockIdx.x, S = a.S, G = a.g;
    const int tile0 = blockIdx.y * a.chunk + 16 * warp, live = tile0 < min(a.ctx, (blockIdx.y + 1) * a.chunk);
    const uint4 *kt = a.k + h * a.kstride + (size_t)tile0 * CPR, *vt = a.v + h * a.vstride + (size_t)tile0 * CPR;
    uint4        x0[4], x1[4]; /* K rows g and g + 8, chunks 4P + c */
    fl_stamp(a, FL_SMID), fl_stamp(a, FL_START);
    const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[warp]), vs = (unsigned)__cvta_generic_to_shared(fl_smem + warp * 16 * CPR);
    if (live) {
        if (lane == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(16 * CPR * 16) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(vs), "l"(vt),
                         "r"(16 * CPR * 16), "r"(b)
                         : "memory");
        }
        __syncwarp();
#pragma unroll
        for (int P = 0; P < 4; P++) x0[P] = __ldcs(kt + g * CPR + 4 * P + c), x1[P] = __ldcs(kt + (g + 8) * CPR + 4 * P + c);
    }
    fl_pdl_trigger();
    /* a.dry passes of the arithmetic on zero queries before the wait (their results dropped), then
       a.reps passes after it on the real ones, one copy of the code for all of them */
    float m[2], l[2], acc[8][4];
    if (a.dry) {
        if constexpr (QB)
            for (int t = tid; t < 2 * 8 * QR; t += FL_THREADS) (&qp[0][0][0])[t] = __float2half(0.0f);
        else
            for (int t = tid; t < 8 * D; t += FL_THREADS) qsm[t] = 0.0f;
        if (tid < 8) qsc[tid] = 0.0f;
        __syncthreads();
    }
#pragma unroll 1
    for (int rep = 0; rep < a.dry + a.reps; rep++) {
        if (rep == a.dry) {
            fl_pdl_wait();
            fl_stamp(a, FL_WAITED);
            if constexpr (QB) {
                if (warp < 8) { /* query warp: its 128 dims, 4 a lane; rows from G on stay zero */
                    const float4 v = warp < G ? *reinterpret_cast<const float4 *>(a.q + ((size_t)h * G + warp) * D + 4 * lane) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    float        mx = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
                    for (int o = 1; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                    const int   sh = max(-126, min(126, 9 - (((__float_as_int(mx) >> 23) & 0xff) - 126)));
                    const float up = __int_as_float((127 + sh) << 23);
                    const float y0 = v.x * up, y1 = v.y * up, y2 = v.z * up, y3 = v.w * up;
                    const uint32_t h01 = fl_pack(y0, y1), h23 = fl_pack(y2, y3);
                    const float2   r01 = fl_unpack(h01), r23 = fl_unpack(h23);
                    *reinterpret_cast<uint2 *>(&qp[0][warp][4 * lane]) = make_uint2(h01, h23);
                    *reinterpret_cast<uint2 *>(&qp[1][warp][4 * lane]) = make_uint2(fl_pack(y0 - r01.x, y1 - r01.y), fl_pack(y2 - r23.x, y3 - r23.y));
                    if (lane == 0) qsc[warp] = a.scale * __int_as_float((127 - sh) << 23);
                }
            } else {
                for (int t = tid; t < G * D; t += FL_THREADS) qsm[t] = a.q[(size_t)h * G * D + t];
            }
            __syncthreads();
            fl_stamp(a, FL_Q);
            fl_put(a, FL_CLKQ, (unsigned long long)clock64());
        }
        m[0] = m[1] = -INFINITY, l[0] = l[1] = 0.0f;
#pragma unroll
        for (int t = 0; t < 8; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
        if (live) {
            /* q of query g as the B fragments, k-step s = 2P + t: dims 8 (4P + c) + 4t + {0, 1}, + {2, 3} */
            float sp[2][4] = {};
            float down = 1.0f;
            if constexpr (QB) {
#pragma unroll
                for (int P = 0; P < 4; P++) {
                    const uint32_t k0[4] = {x0[P].x, x1[P].x, x0[P].y, x1[P].y}, k1[4] = {x0[P].z, x1[P].z, x0[P].w, x1[P].w};
#pragma unroll
                    for (int u = 0; u < 2; u++) {
                        const uint4 f = *reinterpret_cast<const uint4 *>(&qp[u][g][8 * (4 * P + c)]);
                        if (P == 0 && u == 0) fl_stampd(a, FL_MX, __uint_as_float(f.x & 0x3fffffffu));
                        fl_mma16(sp[u], k0, f.x, f.y), fl_mma16(sp[u], k1, f.z, f.w);
                    }
                }
            } else {
            const float *qr = qsm + (g < G ? g : 0) * D;
            float        mx = 0.0f;
#pragma unroll
            for (int s = 0; s < 8; s++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const float2 v = *reinterpret_cast<const float2 *>(qr + 8 * (4 * (s >> 1) + c) + 4 * (s & 1) + 2 * hh);
                    mx = fmaxf(mx, fmaxf(fabsf(v.x), fabsf(v.y)));
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            fl_stampd(a, FL_MX, mx);
            const int   sh = max(-126, min(126, 9 - (((__float_as_int(mx) >> 23) & 0xff) - 126)));
            const float up = __int_as_float((127 + sh) << 23);
            down = __int_as_float((127 - sh) << 23);
#pragma unroll
            for (int P = 0; P < 4; P++) {
                const uint32_t k0[4] = {x0[P].x, x1[P].x, x0[P].y, x1[P].y}, k1[4] = {x0[P].z, x1[P].z, x0[P].w, x1[P].w};
                uint32_t       qf[2][2][2]; /* part, k-step 2P + t, half */
#pragma unroll
                for (int t = 0; t < 2; t++)
#pragma unroll
                    for (int hh = 0; hh < 2; hh++) {
                        const float2 v = g < G ? *reinterpret_cast<const float2 *>(qr + 8 * (4 * P + c) + 4 * t + 2 * hh) : make_float2(0.0f, 0.0f);
                        const float  x = v.x * up, y = v.y * up;
                        qf[0][t][hh] = fl_pack(x, y);
                        const float2 hi = fl_unpack(qf[0][t][hh]);
                        qf[1][t][hh] = fl_pack(x - hi.x, y - hi.y);
                    }
#pragma unroll
                for (int u = 0; u < 2; u++) fl_mma16(sp[u], k0, qf[u][0][0], qf[u][0][1]), fl_mma16(sp[u], k1, qf[u][1][0], qf[u][1][1]);
            }
            }
            fl_stampd(a, FL_SCORES, sp[0][3] + sp[1][3]);
            /* element x: cell g + 8 (x >> 1), query 2c + (x & 1) */
            float sv[4], pw[4];
#pragma unroll
            for (int x = 0; x < 4; x++) { /* the shuffle by every lane: it is warp-wide */
                const int   qi = 2 * c + (x & 1);
                const float sc = QB ? qsc[qi] : a.scale * __shfl_sync(0xffffffffu, down, 4 * qi);
                sv[x] = qi < G ? (sp[1][x] + sp[0][x]) * sc : -INFINITY;
            }
            float t0 = fmaxf(sv[0], sv[2]), t1 = fmaxf(sv[1], sv[3]);
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) t0 = fmaxf(t0, __shfl_xor_sync(0xffffffffu, t0, o)), t1 = fmaxf(t1, __shfl_xor_sync(0xffffffffu, t1, o));
            m[0] = t0, m[1] = t1;
#pragma unroll
            for (int x = 0; x < 4; x++) pw[x] = sv[x] == -INFINITY ? 0.0f : expf(sv[x] - ((x & 1) ? t1 : t0));
            l[0] = pw[0] + pw[2], l[1] = pw[1] + pw[3];
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) l[0] += __shfl_xor_sync(0xffffffffu, l[0], o), l[1] += __shfl_xor_sync(0xffffffffu, l[1], o);
            uint32_t bh[2], bw[2];
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const uint32_t hi = fl_pack(pw[2 * hh], pw[2 * hh + 1]);
                const float2   hv = fl_unpack(hi);
                bh[hh] = fl_movt(hi), bw[hh] = fl_movt(fl_pack(pw[2 * hh] - hv.x, pw[2 * hh + 1] - hv.y));
            }
            fl_stampd(a, FL_SOFT, __uint_as_float(bw[1] & 0x3fffffffu));
            unsigned done = 0;
            while (!done)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                             : "=r"(done)
                             : "r"(b)
                             : "memory");
            fl_stamp(a, FL_VREADY);
            __syncwarp(); /* movmatrix and mma below are warp-wide */
#pragma unroll
            for (int P = 0; P < 4; P++) {
                uint32_t va[2][4];
                asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(va[0][0]), "=r"(va[0][1]), "=r"(va[1][0]), "=r"(va[1][1])
                             : "r"(vs + (unsigned)((g * CPR + 4 * P + c) * 16)));
                asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(va[0][2]), "=r"(va[0][3]), "=r"(va[1][2]), "=r"(va[1][3])
                             : "r"(vs + (unsigned)(((g + 8) * CPR + 4 * P + c) * 16)));
#pragma unroll
                for (int t = 0; t < 2; t++) {
                    uint32_t av[4];
#pragma unroll
                    for (int u = 0; u < 4; u++) av[u] = fl_movt(va[t][u]);
                    fl_mma16(acc[2 * P + t], av, bh[0], bh[1]);
                    fl_mma16(acc[2 * P + t], av, bw[0], bw[1]);
                }
            }
            fl_stampd(a, FL_PV, acc[0][0] + acc[7][3]);
        }
    }
    /* the warps combined in a fixed order: acc[t] holds dims (t, g, 0 / 1) x queries 2c, 2c + 1 */
    __syncthreads(); /* every warp is done with its V: the tiles become the combine's buffer */
    float *red = reinterpret_cast<float *>(fl_smem);
#pragma unroll
    for (int t = 0; t < 8; t++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            if (2 * c + e < G) {
                const int d0 = 8 * (4 * (t >> 1) + (g >> 1)) + 4 * (t & 1) + (g & 1);
                float    *r = red + (warp * G + 2 * c + e) * RS;
                r[d0] = acc[t][e], r[d0 + 2] = acc[t][2 + e];
            }
    if (g == 0)
#pragma unroll
        for (int e = 0; e < 2; e++) wm[warp][2 * c + e] = m[e], wl[warp][2 * c + e] = l[e];
    __syncthreads();
    fl_stamp(a, FL_ARITH);
    fl_put(a, FL_CLKA, (unsigned long long)clock64());
    if (tid < FL_W * 8) {
        const int w = tid / 8, i = tid % 8;
        float     M = -INFINITY;
#pragma unroll
        for (int u = 0; u < FL_W; u++) M = fmaxf(M, wm[u][i]);
        ww[w][i] = wm[w][i] == -INFINITY ? 0.0f : expf(wm[w][i] - M);
        if (w == 0) bm[i] = M;
    }
    __syncthreads();
    if (tid < 8) {
        float L = 0.0f;
#pragma unroll
        for (int w = 0; w < FL_W; w++) L = fmaf(ww[w][tid], wl[w][tid], L);
        bl[tid] = L;
    }
    const int gd = G * D;
    float    *w0 = a.work + (size_t)h * S * (gd + 2 * 8), *wp = w0 + (size_t)blockIdx.y * (gd + 2 * 8);
    for (int f = tid; f < gd; f += FL_THREADS) {
        const int i = f / D, col = f % D;
        float     s = 0.0f;
#pragma unroll
        for (int w = 0; w < FL_W; w++) s = fmaf(ww[w][i], red[(w * G + i) * RS + col], s);
        __stcg(wp + f, s);
    }
    __syncthreads();
    if (tid < G) __stcg(reinterpret_cast<float2 *>(wp + gd) + tid, make_float2(bm[tid], bl[tid]));
    fl_stamp(a, FL_WRITTEN);
    bool merged = false;
    if constexpr (MERGE)
        if ((merged = fl_last_block(a.cnt + h, S, last), fl_stamp(a, FL_ARRIVED), merged)) {
            fl_mma_merge(a, w0, h, D);
            __syncthreads();
        }
    fl_put(a, FL_LAST, merged);
    fl_stamp(a, FL_END);
#else
    (void)a;
#endif
}

static fl_args  fl_a;
static int      fl_sm, fl_major, fl_cluster_ok;
static unsigned fl_grid_x;
static size_t   fl_dyn;
static int      fl_reader;
#define FL_FNS(R)                                                                                                                  \
    {(const void *)fl_read_kernel<R>,   (const void *)fl_global_kernel<R>,        (const void *)fl_cluster_kernel<R>,                 \
     (const void *)fl_atomic_kernel<R>, (const void *)fl_tagged_kernel<R, false>, (const void *)fl_tagged_kernel<R, true>}
static const void *const fl_fns[BENCH_FLOOR_READERS][BENCH_FLOOR_KINDS] = {
    FL_FNS(BENCH_FLOOR_PLAIN), FL_FNS(BENCH_FLOOR_BULK), FL_FNS(BENCH_FLOOR_PLAIN64),
    {(const void *)fl_mma_kernel<false, false>, (const void *)fl_mma_kernel<true, false>, NULL, NULL, NULL, NULL},
    {(const void *)fl_mma_kernel<false, true>, (const void *)fl_mma_kernel<true, true>, NULL, NULL, NULL, NULL}};
static float *fl_hq; /* BENCH_FLOOR_MMA's queries on the host, for bench_floor_check */
static int    fl_calls; /* calls enqueued since the set-up: each one's number for its stamps */

int bench_floor_blocks(int kind) {
    int n = 0;
    if (!bench_floor_has(kind) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fl_fns[fl_reader][kind], FL_THREADS, fl_dyn) != cudaSuccess)
        return -1;
    return n;
}

int bench_floor_setup(int n_kv, int ctx, int d, int g, size_t smem, int reader) {
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&fl_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&fl_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return -1;
    if (g * d > FL_THREADS || d % 8) return -1;
    bench_floor_release();
    const int mma = reader == BENCH_FLOOR_MMA || reader == BENCH_FLOOR_MMA_QB;
    if (reader < 0 || reader >= BENCH_FLOOR_READERS || ((reader == BENCH_FLOOR_BULK || mma) && fl_major < 9)) return -1;
    if (mma && (d != 128 || g > 8 || ctx % 16)) return -1;
    fl_reader = reader;
    fl_a.ctx = ctx, fl_a.d = d, fl_a.g = g;
    /* S splits a head: n_kv x S blocks at most one an SM, none shorter than 256 cells (one
       16-cell tile a warp of 16 warps), so fewer than the SMs at short contexts */
    fl_a.S = fl_sm / n_kv > 0 ? fl_sm / n_kv : 1;
    if (fl_a.S > (ctx + 255) / 256) fl_a.S = (ctx + 255) / 256;
    fl_a.chunk = (ctx + fl_a.S - 1) / fl_a.S;
    if (mma) { /* whole tiles, one a warp */
        fl_a.chunk = (fl_a.chunk + 15) / 16 * 16;
        if (fl_a.chunk > 16 * FL_W) return -1;
    }
    /* the bulk reader's tiles; the arithmetic's V tiles, then its warps' combine; else unused,
       only holding the SM as the library's rings do */
    fl_dyn = reader == BENCH_FLOOR_BULK ? (size_t)fl_a.chunk * d * 2 * 2 : smem;
    if (mma) fl_dyn = (size_t)FL_W * (16 * d * 2 > g * (d + 1) * 4 ? 16 * d * 2 : g * (d + 1) * 4);
    if (fl_dyn < smem) fl_dyn = smem;
    for (int k = 0; k < BENCH_FLOOR_KINDS; k++)
        if (fl_fns[reader][k] &&
            cudaFuncSetAttribute(fl_fns[reader][k], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fl_dyn) != cudaSuccess)
            return -1;
    fl_grid_x = (unsigned)n_kv;
    fl_cluster_ok = fl_major >= 9 && fl_a.S >= 2 && fl_a.S <= 16 && fl_fns[reader][BENCH_FLOOR_CLUSTER];
    if (fl_cluster_ok && fl_a.S > 8 &&
        cudaFuncSetAttribute(fl_fns[reader][BENCH_FLOOR_CLUSTER], cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
        fl_cluster_ok = 0, cudaGetLastError();
    const size_t nq = (size_t)n_kv * g * d;
    if (cudaMalloc(&fl_a.work, (size_t)n_kv * fl_a.S * (g * d + 16) * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&fl_a.cnt, (size_t)n_kv * sizeof(unsigned)) != cudaSuccess || cudaMalloc(&fl_a.out, nq * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&fl_a.q, nq * sizeof(float)) != cudaSuccess || !(fl_hq = (float *)malloc(nq * sizeof(float))) ||
        cudaMemset(fl_a.cnt, 0, (size_t)n_kv * sizeof(unsigned)) != cudaSuccess ||
        cudaMalloc(&fl_a.tw, (size_t)n_kv * fl_a.S * (g * d + 2) * sizeof(unsigned long long)) != cudaSuccess ||
        cudaMemset(fl_a.tw, 0, (size_t)n_kv * fl_a.S * (g * d + 2) * sizeof(unsigned long long)) != cudaSuccess ||
        cudaMalloc(&fl_a.ep, (size_t)n_kv * sizeof(unsigned)) != cudaSuccess || cudaMemset(fl_a.ep, 0, (size_t)n_kv * sizeof(unsigned)) != cudaSuccess)
        return -1;
    /* queries drawn fresh each run, uniform in [-2, 2) */
    unsigned long long x = (unsigned long long)time(NULL) * 0x9e3779b97f4a7c15ull | 1u;
    for (size_t i = 0; i < nq; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        fl_hq[i] = (float)((double)(x >> 11) * 0x1p-53 * 4.0 - 2.0);
    }
    fl_a.scale = 1.0f / sqrtf((float)d);
    /* BENCH_FLOOR_DRY=1: a pass of the arithmetic before the wait; BENCH_FLOOR_REPS=n: n after it */
    fl_a.dry = getenv("BENCH_FLOOR_DRY") ? atoi(getenv("BENCH_FLOOR_DRY")) : 0;
    fl_a.reps = getenv("BENCH_FLOOR_REPS") ? atoi(getenv("BENCH_FLOOR_REPS")) : 1;
    if (fl_a.dry < 0 || fl_a.dry > 4 || fl_a.reps < 1 || fl_a.reps > 4) return -1;
    if (cudaMemcpy((void *)fl_a.q, fl_hq, nq * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) return -1;
    return fl_a.S;
}

void bench_floor_release(void) {
    cudaFree(fl_a.work), cudaFree(fl_a.cnt), cudaFree(fl_a.out), cudaFree((void *)fl_a.q), free(fl_hq), cudaFree(fl_a.stamps);
    cudaFree(fl_a.tw), cudaFree(fl_a.ep);
    fl_a.work = NULL, fl_a.cnt = NULL, fl_a.out = NULL, fl_a.q = NULL, fl_hq = NULL, fl_a.stamps = NULL, fl_a.tw = NULL, fl_a.ep = NULL;
}

int bench_floor_has(int kind) {
    const int tagged = kind == BENCH_FLOOR_TAGGED || kind == BENCH_FLOOR_TAGGED_SLICES;
    return kind >= 0 && kind < BENCH_FLOOR_KINDS && fl_fns[fl_reader][kind] && (kind != BENCH_FLOOR_CLUSTER || fl_cluster_ok) &&
           (!tagged || (fl_a.S >= 2 && fl_a.S <= 16));
}

/* BENCH_FLOOR_MMA's outputs of the last call (over K and V as bench_floor took them, f16) against
   float64 on the host: the largest relative L2 error of a query's output row, or -1 */
double bench_floor_check(const void *k, const void *v, size_t kstride, size_t vstride) {
    const int    n_kv = (int)fl_grid_x, g = fl_a.g, d = fl_a.d, ctx = fl_a.ctx;
    const size_t nq = (size_t)n_kv * g * d;
    __half      *hk = (__half *)malloc((size_t)ctx * d * sizeof(__half)), *hv = (__half *)malloc((size_t)ctx * d * sizeof(__half));
    float       *out = (float *)malloc(nq * sizeof(float));
    double      *sc = (double *)malloc((size_t)ctx * sizeof(double)), worst = -1.0;
    if (hk && hv && out && sc && cudaDeviceSynchronize() == cudaSuccess &&
        cudaMemcpy(out, fl_a.out, nq * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess) {
        worst = 0.0;
        for (int h = 0; h < n_kv && worst >= 0.0; h++) {
            if (cudaMemcpy(hk, (const __half *)k + h * kstride, (size_t)ctx * d * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
                cudaMemcpy(hv, (const __half *)v + h * vstride, (size_t)ctx * d * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
                worst = -1.0;
                break;
            }
            for (int i = 0; i < g; i++) {
                const float *q = fl_hq + ((size_t)h * g + i) * d;
                double       mx = -INFINITY, l = 0.0, e2 = 0.0, r2 = 0.0;
                for (int c = 0; c < ctx; c++) {
                    double s = 0.0;
                    for (int j = 0; j < d; j++) s += (double)q[j] * (double)__half2float(hk[(size_t)c * d + j]);
                    sc[c] = s / sqrt((double)d);
                    mx = fmax(mx, sc[c]);
                }
                for (int c = 0; c < ctx; c++) l += (sc[c] = exp(sc[c] - mx));
                for (int j = 0; j < d; j++) {
                    double o = 0.0;
                    for (int c = 0; c < ctx; c++) o += sc[c] * (double)__half2float(hv[(size_t)c * d + j]);
                    o /= l;
                    const double e = (double)out[((size_t)h * g + i) * d + j] - o;
                    e2 += e * e, r2 += o * o;
                }
                worst = fmax(worst, sqrt(e2 / r2));
            }
        }
    }
    free(hk), free(hv), free(out), free(sc);
    return worst;
}

int bench_floor(int kind, const void *k, const void *v, size_t kstride, size_t vstride, cudaStream_t s) {
    if (!bench_floor_has(kind)) return -1;
    fl_args a = fl_a;
    a.k = static_cast<const uint4 *>(k), a.v = static_cast<const uint4 *>(v);
    a.kstride = kstride * 2 / 16, a.vstride = vstride * 2 / 16;
    a.call = fl_calls++;
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

int bench_floor_stamps(int on) {
    cudaFree(fl_a.stamps), fl_a.stamps = NULL;
    if (on && ((fl_reader != BENCH_FLOOR_MMA && fl_reader != BENCH_FLOOR_MMA_QB) ||
               cudaMalloc(&fl_a.stamps, (size_t)FL_CALLS * fl_grid_x * fl_a.S * FL_ST * sizeof(unsigned long long)) != cudaSuccess ||
               cudaMemset(fl_a.stamps, 0, (size_t)FL_CALLS * fl_grid_x * fl_a.S * FL_ST * sizeof(unsigned long long)) != cudaSuccess))
        return -1;
    return 0;
}

/* median of x[0..n) (sorts x), NAN for n < 1: bench_util.h's, which this file cannot include (a
   program includes that header once: it defines the benchmarks' sinks) */
static int fl_cmp(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}
static double fl_median(double *x, int n) {
    if (n < 1) return NAN;
    qsort(x, (size_t)n, sizeof *x, fl_cmp);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* The last FL_CALLS calls' stamps, each call's figures taken after the previous call's last block
   ended (its end, ns), then the median over the calls of each figure, printed in us. */
int bench_floor_timeline(const char *what) {
    const int           nb = (int)fl_grid_x * fl_a.S, C = FL_CALLS;
    const size_t        n = (size_t)C * nb * FL_ST;
    unsigned long long *st = (unsigned long long *)malloc(n * sizeof *st);
    enum { T_FIRST, T_LASTSTART, T_WAIT, T_WAITMAX, T_Q, T_ARITH, T_ARITHMAX, T_WRITTEN, T_WRITTENMAX, T_MERGED, T_END, T_SHARED, T_PACK, T_N };
    double *f = (double *)malloc((size_t)T_N * C * sizeof *f), *tmp = (double *)malloc((size_t)nb * sizeof *tmp);
    int     ok = st && f && tmp && fl_a.stamps && fl_calls >= C && cudaDeviceSynchronize() == cudaSuccess &&
             cudaMemcpy(st, fl_a.stamps, n * sizeof *st, cudaMemcpyDeviceToHost) == cudaSuccess;
    /* call j of the last C in the order they ran (the oldest is the slot after the last), block b */
    auto at = [&](int j, int b) { return st + ((size_t)((fl_calls + j) % C) * nb + b) * FL_ST; };
    int  nc = 0;
    for (int j = 1; ok && j < C; j++) {
        const unsigned long long *p = at(j - 1, 0), *c = at(j, 0);
        double                    pe = 0.0;
        for (int b = 0; b < nb; b++) pe = fmax(pe, (double)p[b * FL_ST + FL_END]);
        double *g = f + (size_t)nc * T_N, first = INFINITY, last = -INFINITY, amax = -INFINITY, wmax = -INFINITY, waitmax = -INFINITY, end = 0.0;
        int     shared = 0, pack = 0, nm = 0;
#define FL_MED(field, expr)                                        \
    do {                                                           \
        for (int b = 0; b < nb; b++) tmp[b] = (expr);              \
        g[field] = fl_median(tmp, nb) * 1e-3;                      \
    } while (0)
        FL_MED(T_WAIT, (double)c[b * FL_ST + FL_WAITED] - pe);
        FL_MED(T_Q, (double)(c[b * FL_ST + FL_Q] - c[b * FL_ST + FL_WAITED]));
        FL_MED(T_ARITH, (double)(c[b * FL_ST + FL_ARITH] - c[b * FL_ST + FL_Q]));
        FL_MED(T_WRITTEN, (double)(c[b * FL_ST + FL_WRITTEN] - c[b * FL_ST + FL_ARITH]));
#undef FL_MED
        for (int b = 0; b < nb; b++) {
            const unsigned long long *x = c + b * FL_ST;
            first = fmin(first, (double)x[FL_START] - pe), last = fmax(last, (double)x[FL_START] - pe);
            waitmax = fmax(waitmax, (double)x[FL_WAITED] - pe), amax = fmax(amax, (double)x[FL_ARITH] - pe);
            wmax = fmax(wmax, (double)x[FL_WRITTEN] - pe), end = fmax(end, (double)x[FL_END] - pe);
            if (x[FL_LAST]) tmp[nm++] = (double)(x[FL_END] - x[FL_WRITTEN]);
            int same = 0;
            for (int e = 0; e < nb; e++) same += c[e * FL_ST + FL_SMID] == x[FL_SMID];
            pack = same > pack ? same : pack;
            for (int e = 0; e < nb; e++)
                if (p[e * FL_ST + FL_SMID] == x[FL_SMID] && p[e * FL_ST + FL_END] > x[FL_START]) {
                    shared++;
                    break;
                }
        }
        g[T_MERGED] = fl_median(tmp, nm) * 1e-3;
        g[T_FIRST] = first * 1e-3, g[T_LASTSTART] = last * 1e-3, g[T_WAITMAX] = waitmax * 1e-3, g[T_ARITHMAX] = amax * 1e-3;
        g[T_WRITTENMAX] = wmax * 1e-3, g[T_END] = end * 1e-3, g[T_SHARED] = shared, g[T_PACK] = pack;
        nc++;
    }
    double  m[T_N];
    double *all = (double *)malloc((size_t)(C - 1) * nb * sizeof *all); /* one figure of every call, or of every block */
    ok = ok && all;
    for (int k = 0; ok && k < T_N; k++) {
        for (int i = 0; i < nc; i++) all[i] = f[(size_t)i * T_N + k];
        m[k] = fl_median(all, nc);
    }
    if (ok)
        printf("# timeline of the arithmetic's blocks (%s), us after the previous call's last block ended (median of %d calls): "
               "blocks started %.2f to %.2f; wait returned %.2f (last %.2f); q staged %.2f later; the warps' arithmetic %.2f later "
               "(last block done at %.2f); the partial written %.2f later (last at %.2f); the merge %.2f; the call's last block "
               "ended at %.2f; blocks started on an SM beside one of the previous call %.0f of %d; most blocks of a call on one SM %.0f\n",
               what, nc, m[T_FIRST], m[T_LASTSTART], m[T_WAIT], m[T_WAITMAX], m[T_Q], m[T_ARITH], m[T_ARITHMAX], m[T_WRITTEN], m[T_WRITTENMAX],
               m[T_MERGED], m[T_END], m[T_SHARED], nb, m[T_PACK]);
    /* warp 0's steps and the merge's, medians over every block of the calls */
    static const int   from[8] = {FL_Q, FL_MX, FL_SCORES, FL_SOFT, FL_VREADY, FL_PV, FL_WRITTEN, FL_ARRIVED};
    static const int   to[8] = {FL_MX, FL_SCORES, FL_SOFT, FL_VREADY, FL_PV, FL_ARITH, FL_ARRIVED, FL_END};
    static const char *step[8] = {"q's scale", "scores", "softmax", "V ready", "p . v", "to every warp's end", "the arrival count",
                                  "the last block's merge"};
    if (ok) {
        printf("# warp 0's steps, us (median over the blocks of %d calls):", C - 1);
        for (int k = 0; k < 8; k++) {
            int na = 0;
            for (int j = 1; j < C; j++)
                for (int b = 0; b < nb; b++) {
                    const unsigned long long *x = at(j, b);
                    if (x[from[k]] && x[to[k]] && (k < 7 || x[FL_LAST])) all[na++] = ((double)x[to[k]] - (double)x[from[k]]) * 1e-3;
                }
            printf("%s %s %.2f", k ? ";" : "", step[k], fl_median(all, na));
        }
        int nk = 0;
        for (int j = 1; j < C; j++)
            for (int b = 0; b < nb; b++) {
                const unsigned long long *x = at(j, b);
                all[nk++] = (double)(x[FL_CLKA] - x[FL_CLKQ]);
            }
        const double cyc = fl_median(all, nk);
        nk = 0;
        for (int j = 1; j < C; j++)
            for (int b = 0; b < nb; b++) {
                const unsigned long long *x = at(j, b);
                if (x[FL_ARITH] - x[FL_Q] >= 2000) all[nk++] = (double)(x[FL_CLKA] - x[FL_CLKQ]) / (double)(x[FL_ARITH] - x[FL_Q]) * 1e3;
            }
        printf("; q staged to every warp's end %.0f SM clocks (median), the SM clock %.0f MHz (median of the blocks' clocks over "
               "ns where that took 2 us or more)\n", cyc, fl_median(all, nk));
    }
    free(all), free(st), free(f), free(tmp);
    return ok ? 0 : -1;
}
