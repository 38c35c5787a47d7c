/* neo_attn_cuda.cu - the CUDA half of neo_attn: kernels and the device tables - MIT or public domain, see neo_attn.h

   neo_attn.h drives every device operation through three small tables, neo__dev_mem, neo__dev_attn
   and neo__dev_model (see "the GPU bridge" in the header). This file fills them with the CUDA runtime (cudart only, no cuBLAS). It
   includes the header WITHOUT NEO_ATTN_IMPLEMENTATION; compile it once and link it into a program
   whose implementing file defines NEO_ATTN_CUDA=1:

       nvcc -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
            -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
            -gencode arch=compute_80,code=compute_80 -c neo_attn_cuda.cu

   (make cuda-build; CUDA_ARCHS narrows it) and link with -lcudart, plus -lstdc++ when a C
   compiler links (nvcc's launch stubs use the C++ runtime). Nothing here exits or prints: every
   CUDA call is checked and becomes a neo_status.

   GPUS
   ----
   sm_80 and later. The same kernels compile for every target; what differs is chosen at compile
   time by __CUDA_ARCH__ and at init by the device:
     sm_90 (Hopper)          the tensor-core kernel loads its tiles with bulk copies (TMA:
                             cp.async.bulk + mbarrier transaction counts), and the attention,
                             merge and matvec kernels are launched as programmatic dependents
                             (griddepcontrol) so that each one's launch overlaps the tail of the
                             one before.
     sm_80, sm_86, sm_89     the tensor-core kernel loads with cp.async into swizzled rows and
     (Ampere, Ada)           ldmatrix; every launch is plain. Block shapes whose shared memory
                             does not fit the device (sm_86 / sm_89 have 99 KB a block) give way
                             to the narrow shape (see the planner).
     newer than sm_90        the compute_80 PTX, compiled by the driver: the sm_80 path.
   Below sm_80 init returns NEO_ERR_UNSUPPORTED, as it does when the object holds no image the
   GPU can run. Programmatic launches are used only when the loaded kernels were compiled for
   sm_90 (cudaFuncAttributes.ptxVersion >= 90) on an sm_90+ device: compute_80 PTX that the
   driver compiles for a Hopper GPU runs the sm_80 path throughout.

   SECTIONS (grep for the tag)
   --------
   device: >>common  >>attn.simt  >>merge  >>attn.mma  >>kv  >>model  >>handoff
   host:   >>ops  >>plan  >>ops.attend  >>test (entries for tests/test_cuda_ops.c)  >>ops.model

   ENVIRONMENT
   -----------
   Nothing of this library's. CUDA_LAUNCH_BLOCKING, CUDA's own switch, is read once at init: with
   blocking launches a kernel that waits for the CPU half's flag would hold the host thread that
   must set it, so the both-halves pipeline orders its halves differently (launch_blocking).

   KERNELS (launch geometry)
   -------------------------
   neo__attn_mma<T, D, BPS>  f16 / bf16 K and V, head_dim == head_dim_v == D in {64, 128, 256},
                             16-byte aligned K, V and q: the attention path for those (see its
                             comment). grid (H * ceil(nq / 8), S). Two block shapes (BPS 1 and
                             2): wide, 8 warps (9 for D = 128, 4 for D = 256), one block an
                             SM; narrow (D = 128 and 256), 5 warps two blocks an SM (D = 128),
                             or 2 warps (D = 256).
                             The planner picks one (>>plan). Tensor cores (mma.m16n8k16, f32
                             accumulators, q and the weights split into 16-bit parts so that the
                             result keeps float32 accuracy); each warp streams its own 16-cell K
                             and V tiles (bulk copies on sm_90, cp.async below); every K/V row
                             is read once for a tile of 8 queries (the GQA group, or tokens x
                             group in prefill), so group 8 costs what group 4 does. It merges its
                             own splits: the last block of a query tile to finish (an arrival
                             counter per tile in the stream's buffer, which that block resets)
                             merges the partials in split order and writes out / state, so an
                             attend is one launch (a programmatic dependent on sm_90, so that
                             its launch overlaps the tail of the kernel before). On sm_90, when
                             S is 2-16 and every unit's cluster fits the GPU at once, a query
                             tile's S blocks are one thread block cluster instead: the partials
                             stay in each block's shared memory and every block finishes an S-th
                             of the tile's columns from the others' (distributed shared memory,
                             the same sums in the same order).
   neo__attn_fast<T, D, NQ>  float32 K and V (T = float): flash-decoding for head_dim ==
                             head_dim_v == D in {64, 128, 256} and
                             16-byte aligned K, V and q. grid (H * QT, S): one block per (KV head,
                             tile of NQ = 1/2/4/8 queries, split of the cell range), 128 threads.
                             Each warp streams its own 2 KB K + 2 KB V warp tiles (warp tiles
                             w, w + 4, ..) through its own 3-deep cp.async ring (48 KB of dynamic
                             shared memory a block, 4 blocks an SM) and keeps its own online
                             softmax, so the loop has no block barrier; every K/V row is read once
                             for all NQ queries (the GQA group, or tokens x group in prefill). The
                             four warp states are merged at the end into one partial
                             (m, l, acc[D]) per query and split.
   neo__attn_generic<T, NQ>  the same for any head_dim / head_dim_v in 1..16384 and any alignment.
                             grid (H * QT, S, ceil(head_dim_v / 256)), 128 threads; tiles of 32
                             cells; each block owns 256 output columns (scores are recomputed
                             per column block, which only matters for head_dim_v > 256).
   neo__attn_merge           one block of 256 threads per (KV head, query): merges the S partials
                             (and the previous state when accumulating) in split order, then
                             writes the state or the finished, normalised output. A
                             programmatic dependent of the attention kernel on sm_90.
   neo__append_kernel        grid (n_tokens * (h1 - h0), 2: K and V), 128 threads: one new row each;
                             a captured append's last block also moves the length (DEVICE-SIDE LENGTHS).
   neo__append_batch_kernel  the appends of many layers (neo_attn_append_batch) in one launch: each
                             block finds its layer's entry in a table in device memory and runs
                             as that append's own launch would.
   neo__set_length_kernel    one thread: set_length.
   neo__matvec_kernel<E, N>  the decode loop's projections, with run.c's rmsnorm before (N) and the
                             residual add, SwiGLU or RoPE after (E) folded in: 8 warps a block, R
                             = 1..8 warps on each output row (or pair of rows), R chosen so that
                             about 32 warps an SM stream the weights; float4 loads when aligned.
                             Programmatic dependent launch: each block asks its weight slice into
                             L2, lets the next kernel launch, and only then waits for the one ahead.
                             The q | k | v projection may also append the token's k and v to a
                             layer (neo__matvec_args.app): the append kernel's stores and length
                             protocol in its epilogue, one launch fewer a layer.
   neo__argmax_kernel        one block of 1024 threads: strided scan, then a (value, index) reduction.
   neo__merge2_kernel        one block of 128 threads per (token, query head): the hybrid's merge of
                             the CPU's and the stream-back's states, finished with the sink.
   neo__handoff_kernel<A>    one block of 1024 threads, eight loads in flight each: the both-halves
                             handoff (copy_signal / await_copy), rows of floats to or from pinned
                             host memory with a flag in host memory (ld.acquire / st.release at
                             system scope). Rows go side by side (a warp or more a row): a decode
                             step's row of up to 8192 floats is one PCIe round trip, and a batch's
                             or a prefill's 32 rows of up to 256 floats are one too.

   DETERMINISM
   -----------
   The split count and the block shape depend only on the shape, the SM count and the kernels'
   occupancy, and every sum (dot products, partial reductions, the merge) runs in a fixed order,
   so the same inputs on the same GPU give bitwise the same outputs. In neo__attn_mma the block that merges is whichever
   arrives last, but it reads every partial from memory in split order, so the result does not
   depend on which one it is; a cluster's blocks read them in the same order, so the two merges
   give the same bits. Each stream has its own partial buffer and counters, so attends on
   MAIN and COPY may run at once.

   DEVICE-SIDE LENGTHS
   -------------------
   For calls captured into a CUDA graph a layer's length lives in device memory (neo__append_args.len,
   neo__attn_args.len). An append with row0 = -1 writes its rows at len[0], and the last of its
   blocks to finish advances len[0] (or, when the rows did not fit, none are written and it sets
   the full flag len[1]); len[2] counts the blocks and is 0 between appends. An attend with len reads *len when it runs (neo__attn_live): its kernel, block shape
   and split count are planned on the host for the bound c1 (the layer's n_ctx), and the splits
   share the cells the layer holds then, so a replay gives the bits of an eager attend with that
   split count. A captured hybrid decode's device part (neo__attn_args.cut_share) also starts at the
   hybrid's cut of that length, computed in the kernel as the host's listener computes it, so that
   the two sides meet at the same cell. On sm_90 the tensor-core kernel with len is a programmatic
   dependent like the eager one: it requests its first tiles from an early read of the length
   and checks them against the real one after its wait (neo__attn_live). Each attention kernel
   is compiled twice, with and without (template parameter LEN), so that an eager attend runs
   exactly the code it ran before lengths moved to the device. A batch of attends with len (a
   captured neo_attn_decode_batch) is one launch of neo__attn_mma_batch<LEN> per storage type and
   head_dim, started the same way: each entry's split count is fixed by its bound, its chunk
   follows the length it reads, and the launch's table lives in device memory of its own, written
   outside the capture and kept until release (neo__cu_bt_keep), since the graph reads it at every
   replay. A batch of appends (neo_attn_append_batch) is one
   launch of neo__append_batch_kernel with its table kept the same way; each entry counts its
   own blocks in its own len[2].

   NUMERICS
   --------
   CUDA-core kernels: q stays float32; K/V are widened to float32 in registers; all sums are
   float32. Tensor-core kernel: K/V are exact in the mma; q and the weights are carried in two or
   three 16-bit parts (see neo__attn_mma), sums are float32. A query with
   no visible cell in a split leaves (m, l, acc) = (-inf, 0, 0), which every merge treats as
   weight 0. A finished query with no visible cell at all and no sink gets out = 0. NaN and inf
   (see neo__score): a masked cell never reaches an output whatever its K and V hold; inf or
   NaN in a visible cell's K makes the outputs of its KV head's queries that see it NaN; a
   non-finite V element of a visible cell makes that output element non-finite. */
#include "neo_attn.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NEO__CU_STREAMS 2
#define NEO__CU_THREADS 128             /* attention kernels */
#define NEO__CU_WSTAGES 3               /* cp.async ring depth of each warp */
#define NEO__CU_WTILE_BYTES 2048        /* K (or V) bytes of one warp tile */
#define NEO__CU_NQ8_BLOCKS 1            /* resident blocks the 8-query kernels are built for */
#define NEO__CU_MAX_SPLITS 256          /* splits per KV head (the merge's shared weights) */
#define NEO__CU_MAX_CLUSTER 16          /* splits a cluster merges (neo__mma::merge_cluster); past 8 a non-portable size */
#define NEO__CU_MAX_DIM 16384
/* Cells a cache may hold here. The kernels index cells and positions with ints, and a tile's or a
   split's end past a position (cell + chunk) must stay below INT_MAX: below 2^30 it does. The
   header refuses larger GPU layers at create. */
#define NEO__CU_MAX_CELLS (1 << 30)
#define NEO__CU_GEN_COLS 256            /* output columns per generic block */
#define NEO__CU_GEN_TILE 32             /* cells per generic tile */
/* batch tables in flight before the host waits for the oldest's copy: a many-sequence step
   stages one for each layer's append batch and one for each launch group of its decode batch,
   and the host may run that many tables ahead of the device */
#define NEO__CU_BT_SLOTS 16
#define NEO__CU_BATCH_WAVES 4           /* a batch's blocks: about this many waves of equal ones (neo__cu_batch_chunk) */
#define NEO__CU_BATCH_BLOCK_BYTES (2 << 20) /* and the K and V bytes one reads at least */
#define NEO__CU_BT_LEN 6                /* a batch's launch groups with len come after the 6 without */
#define NEO__CU_WORK_CAP ((size_t)512 << 20) /* split partials beyond this use fewer splits */
/* How the tensor-core kernel loads its tiles, per compiled architecture: on sm_90 bulk copies
   (cp.async.bulk completing on an mbarrier's transaction count) into plain rows; below sm_90
   (Ampere, Ada) cp.async into XOR-swizzled rows, read with ldmatrix. The host pass runs no device
   code; it only needs the shapes, which do not depend on this. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define NEO__CU_TMA 0
#else
#define NEO__CU_TMA 1
#endif

/* =============================================================================================
   >>common  storage types, cp.async, programmatic launch, warp sums, NaN and inf, reduce-scatter
   ============================================================================================= */

/* The storage types: ld widens one element, st rounds to nearest even; for float32 (the
   CUDA-core kernel's type) cvt widens a 16-byte chunk of E elements. */
template <typename T> struct neo__kvt;
template <> struct neo__kvt<__half> {
    static __device__ __forceinline__ float ld(const __half *p, size_t i) { return __half2float(p[i]); }
    static __device__ __forceinline__ __half st(float f) { return __float2half_rn(f); }
};
template <> struct neo__kvt<__nv_bfloat16> {
    static __device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
    static __device__ __forceinline__ __nv_bfloat16 st(float f) { return __float2bfloat16_rn(f); }
};
template <> struct neo__kvt<float> {
    static constexpr int E = 4;
    static __device__ __forceinline__ void cvt(const uint4 r, float *x) {
        x[0] = __uint_as_float(r.x);
        x[1] = __uint_as_float(r.y);
        x[2] = __uint_as_float(r.z);
        x[3] = __uint_as_float(r.w);
    }
    static __device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
    static __device__ __forceinline__ float st(float f) { return f; }
};

/* Programmatic dependent launch. On sm_90 the host launches the attention, merge and matvec
   kernels as programmatic dependents (neo__cu_launch): such a grid may start while the one before
   it on the stream still runs, so it must call neo__pdl_wait before touching anything that grid
   writes, and neo__pdl_trigger lets the next one start. Below sm_90 the host launches plainly (a
   grid starts after the one before it has completed) and both are no-ops. */
__device__ __forceinline__ void neo__pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void neo__pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void neo__cp_async16(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
/* the same with src_bytes (0 or 16) read and the rest of the 16 bytes zero-filled */
__device__ __forceinline__ void neo__cp_async16z(void *smem, const void *gmem, int src_bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void neo__cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void neo__cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ float neo__warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float neo__warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* NaN and inf. A visible cell whose dot product with q is not finite (inf or NaN in its K)
   makes the query's output NaN: its score becomes NaN (an infinite score would otherwise take all
   the weight, or as -inf look masked), and a NaN weight reaches l and acc through exp. A masked
   cell never reaches an output: its weight is exactly 0 and no kernel multiplies it into an
   accumulator (see neo__fast_pv and the tensor-core kernel's masked tiles). A non-finite V
   element of a visible cell makes that output element non-finite. */
/* scale * dot, NaN where dot is inf or NaN: dot - dot is +0 for a finite dot, and adding it in
   the fma leaves the value of scale * dot (one rounding; an exact zero product as +0), and NaN
   otherwise. One dependent add in the score's chain and no test. */
__device__ __forceinline__ float neo__score(float scale, float dot) { return fmaf(scale, dot, dot - dot); }
/* a finished output: acc / l, 0 where no cell was visible and there is no sink (l == 0), NaN
   where l is (a NaN score upstream) */
__device__ __forceinline__ float neo__finish(float acc, float den) { return den != 0.0f ? acc / den : 0.0f; }

/* Reduce-scatter of N values over the lanes that differ in bits O, O/2, .., 1: each halving step
   sends the half the lane does not keep to its partner, so the group of N queries costs
   N/2 + N/4 + .. shuffles instead of N * log2(lanes). Afterwards the lane holds the full sums of
   queries [qbase, qbase + max(1, N / lanes)). */
template <int N, int O> struct neo__rs {
    static __device__ __forceinline__ void run(float *v, int lane, int &qbase) {
        if constexpr (O > 0) {
            if constexpr (N > 1) {
                constexpr int H = N / 2;
                const bool up = (lane & O) != 0;
#pragma unroll
                for (int j = 0; j < H; j++) {
                    float send = up ? v[j] : v[j + H], keep = up ? v[j + H] : v[j];
                    v[j] = keep + __shfl_xor_sync(0xffffffffu, send, O);
                }
                if (up) qbase += H;
                neo__rs<H, O / 2>::run(v, lane, qbase);
            } else {
                v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
                neo__rs<1, O / 2>::run(v, lane, qbase);
            }
        }
    }
};

/* =============================================================================================
   >>attn.simt  the attention parameters, then the CUDA-core kernels: float32 (neo__attn_fast)
   and any shape (neo__attn_generic)
   ============================================================================================= */

/* Query r of KV head g (0 <= r < nq = n_tokens * G) is token r / G, query head g * G + r % G. */
struct neo__cu_attn {
    const void  *k;       /* [stored heads][kv_cells][d] of T, from head kv_h0 */
    const void  *v;       /* [stored heads][kv_cells][dv] of T */
    const float *q;       /* [n_tokens][n_head][d] */
    const float *slopes;  /* [n_head] or NULL */
    float       *work;    /* [H][nq][S][dv + 2] split partials (m, l, acc) */
    long long    kstride, vstride; /* elements per stored head */
    int          kv_h0, cell_base, h0, c0, c1; /* c1 already clipped to the last query's position + 1 */
    int          n_tokens, pos0, n_head, G, nq, d, dv;
    int          S, chunk, QT; /* splits, cells per split, query tiles per KV head */
    float        scale, softcap;
    /* the tensor-core kernel, which finishes its own merge (the others leave it to neo__attn_merge) */
    float       *work_ml; /* [H * QT][S][8][2] split (m, l); work is then [H * QT][S][8][dv] */
    unsigned    *cnt;     /* [H * QT] arrivals per query tile, back to 0 after every launch */
    float       *state, *out;
    const float *sinks;
    int          accumulate;
    /* Device int or NULL: the layer's length, read when the kernel runs (neo__attn_live); then
       c1 is the bound the launch was planned for and pos0 is not read */
    const int   *len;
    float        cut_share; /* with len, or 0: start at the hybrid's cut of the length (neo__cu_cut) */
    int          gran;    /* a split's chunk is a multiple of this (the kernel's tile) */
    int          hint;    /* with len: added to the length's early read (neo__attn_live); 0 but in tests */
    int          cl;      /* the tensor-core kernel, S > 1: a query tile's S blocks are one thread block
                             cluster and merge through distributed shared memory (work, cnt unused) */
};

/* The hybrid's cut of a length at a CPU share, as the header's neo__hybrid_cut computes it: one
   fused rounding in double, so that the device and the host's listener cut at the same cell. */
__device__ __forceinline__ int neo__cu_cut(int len, float share) {
    const double c = floor(fma((double)share, (double)len, 0.5));
    return c < 0.0 ? 0 : c > (double)len ? len : (int)c;
}

/* The cells and positions of an attend as it runs: c0, c1 (one past the last visible cell), pos0,
   and the cells a split takes. len NULL: what the host planned. len set (a call replayed from a
   CUDA graph attends what the layer holds then): L = *len, c1 = min(c1, L), pos0 = L - n_tokens,
   c0 the hybrid's cut of L when cut_share is set (a captured hybrid decode's device part: the
   cells before the cut are the CPU's), and the S planned splits share [c0, c1) in chunks of
   whole tiles; a split past them (every split when the cut is at L) is empty
   and leaves (m, l, acc) = (-inf, 0, 0), which every merge weighs 0, so the result equals an
   eager attend of [c0, L) with the same split count bit for bit. *len is written by the kernel
   before this one on the stream (the append), so what a kernel attends must come from a read
   after neo__pdl_wait. The tensor-core kernel on sm_90 is launched as a programmatic dependent
   all the same: before the wait it places its split from an early, unordered read of *len (the
   old length or the new one, or anything: every value is clamped as below) and requests each
   warp's first tile if it would hold only cells before that placement's pos0, which no kernel
   still running writes (neo__mma::start); after the wait it reads *len again beside q, asks for
   the placement's other stages behind q's loads, and keeps every tile asked for only if the real
   placement covers the same cells and the first tiles lie before the real pos0, else it lets them
   all land and requests the real placement's tiles in their stages (neo__mma::settle). The
   CUDA-core kernels read *len first and are launched plainly. Every attention kernel is compiled
   twice, LEN = p.len != NULL, so that the eager kernels keep their registers, hence their
   occupancy, split counts and bits. */
struct neo__cu_live {
    int c0, c1, pos0, chunk;
};
/* the attend as it runs when the layer holds L cells (L < 0 read as 0) */
__device__ __forceinline__ neo__cu_live neo__attn_live_at(const neo__cu_attn &p, int L) {
    L = max(L, 0);
    const int c0 = p.cut_share > 0.0f ? max(p.c0, neo__cu_cut(L, p.cut_share)) : p.c0;
    const int c1 = min(p.c1, L), n = c1 - c0;
    return {c0, c1, L - p.n_tokens, n > 0 ? ((n + p.S - 1) / p.S + p.gran - 1) / p.gran * p.gran : p.gran};
}
template <bool LEN> __device__ __forceinline__ neo__cu_live neo__attn_live(const neo__cu_attn &p) {
    if constexpr (!LEN) return {p.c0, p.c1, p.pos0, p.chunk};
    else return neo__attn_live_at(p, *p.len);
}
/* *p with no ordering (ld.relaxed): an early read while another grid may be writing it */
__device__ __forceinline__ int neo__ld_hint(const int *p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* A batch launch: many attends of one shape in one grid (neo__cu_attend_batch). Entry e's
   blocks are [start[e], start[e + 1]) of the one-dimensional grid, and block l of them is block
   (x, y) of its own launch's grid (X, S), x fastest. */
struct neo__cu_batch {
    const neo__cu_attn *p;     /* [n] each entry's parameters */
    const int          *start; /* [n + 1] */
    int                 n;
};

/* The calling block's entry in t (its parameters copied into *p, which all threads share) and its
   block (x, y) in that entry's grid. Every warp counts the entries that start at or before
   the block, 32 at a time, so no thread waits for another before the copy. */
__device__ __forceinline__ void neo__batch_block(const neo__cu_batch &t, neo__cu_attn *p, int *x, int *y) {
    const int b = (int)blockIdx.x, lane = threadIdx.x & 31;
    int       e = -1;
    for (int i0 = 0; i0 <= t.n; i0 += 32) {
        const int i = i0 + lane;
        e += __popc(__ballot_sync(0xffffffffu, i <= t.n && __ldg(t.start + i) <= b));
    }
    const int      l = b - __ldg(t.start + e), n = __ldg(t.start + e + 1) - __ldg(t.start + e);
    const unsigned *src = reinterpret_cast<const unsigned *>(t.p + e);
    for (int i = threadIdx.x; i < (int)(sizeof(neo__cu_attn) / 4); i += blockDim.x) reinterpret_cast<unsigned *>(p)[i] = __ldg(src + i);
    __syncthreads();
    const int X = n / p->S;
    *x = l % X;
    *y = l / X;
}

/* One tile's online-softmax step for NQ queries: scores in s_p ([TC][NQ], raw dot products) are
   scaled, soft-capped, ALiBi-biased and masked, the running max s_m and sum s_l are updated,
   s_corr gets the factor the accumulators must be rescaled by, and s_p becomes the weights.
   One warp per query; all threads of the block call it. */
template <int TC, int NQ>
__device__ __forceinline__ void neo__softmax_tile(const neo__cu_attn &p, float *s_p, float *s_m, float *s_l, float *s_corr,
                                                  int g, int r0, int pos0, int tile0, int nvalid) {
    constexpr int NCL = (TC + 31) / 32;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int i = warp; i < NQ; i += NEO__CU_THREADS / 32) {
        const int   r = r0 + i;
        const bool  qok = r < p.nq;
        const int   pos = pos0 + (qok ? r / p.G : 0);
        const float slope = (p.slopes && qok) ? p.slopes[g * p.G + r % p.G] : 0.0f;
        float       sv[NCL], mx = -INFINITY;
#pragma unroll
        for (int cc = 0; cc < NCL; cc++) {
            const int c = lane + 32 * cc, cell = tile0 + c;
            float     s = -INFINITY;
            if (qok && c < nvalid && cell <= pos) {
                s = neo__score(p.scale, s_p[c * NQ + i]);
                if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
                if (p.slopes) s -= slope * (float)(pos - cell);
            }
            sv[cc] = s;
            mx = fmaxf(mx, s);
        }
        mx = neo__warp_max(mx);
        const float mold = s_m[i], mnew = fmaxf(mold, mx);
        /* mnew == -inf: nothing visible yet, so nothing to rescale (and no inf - inf) */
        const float corr = mnew == -INFINITY ? 1.0f : expf(mold - mnew);
        float       sum = 0.0f;
#pragma unroll
        for (int cc = 0; cc < NCL; cc++) {
            const int   c = lane + 32 * cc;
            const float e = sv[cc] == -INFINITY ? 0.0f : expf(sv[cc] - mnew);
            if (c < TC) s_p[c * NQ + i] = e;
            sum += e;
        }
        sum = neo__warp_sum(sum);
        __syncwarp(); /* every lane has read s_m[i] */
        if (lane == 0) {
            s_m[i] = mnew;
            s_l[i] = s_l[i] * corr + sum;
            s_corr[i] = corr;
        }
    }
}

__host__ __device__ constexpr int neo__imin(int a, int b) { return a < b ? a : b; }

/* The CUDA-core kernel's lane geometry (see neo__attn_fast); WT rows of K (and of V) in a warp
   tile of NEO__CU_WTILE_BYTES */
template <typename T, int D> struct neo__fast_geom {
    static constexpr int E = neo__kvt<T>::E, CPR = D / E, LPR = neo__imin(CPR, 32), CPL = CPR / LPR, RW = 32 / LPR;
    static constexpr int WT = NEO__CU_WTILE_BYTES / (D * (int)sizeof(T)), STEPS = WT / RW;
};

/* f(c, x) for the lane's chunks c of row `row` of a warp tile, x the chunk widened to floats */
template <typename T, int D, typename F> __device__ __forceinline__ void neo__fast_chunks(const uint4 *tile, int row, int ch, F f) {
    typedef neo__fast_geom<T, D> FG;
#pragma unroll
    for (int c = 0; c < FG::CPL; c++) {
        float x[FG::E];
        neo__kvt<T>::cvt(tile[row * FG::CPR + ch + c * FG::LPR], x);
        f(c, x);
    }
}

/* acc[i] += p[row][i] * v[row] over the lane's rows (< nvalid) of a warp tile in shared memory.
   With GUARD a weight of exactly 0 skips its product: a cell masked for query i (after its
   position) must not reach acc[i] even when its V holds inf or NaN (0 * inf is NaN). For finite
   V the two agree bit for bit (fmaf(0, x, a) == a). */
template <typename T, int D, int NQ, bool GUARD, int CW>
__device__ __forceinline__ void neo__fast_pv(float (&acc)[NQ][CW], const uint4 *vs, const float (*pw_rows)[NQ], int rsub, int ch,
                                             int nvalid) {
    typedef neo__fast_geom<T, D> FG;
    constexpr int E = FG::E, RW = FG::RW;
#pragma unroll
    for (int k = 0; k < FG::STEPS; k++) {
        const int row = k * RW + rsub;
        if (row < nvalid) {
            float pw[NQ];
#pragma unroll
            for (int i = 0; i < NQ; i++) pw[i] = pw_rows[row][i];
            neo__fast_chunks<T, D>(vs, row, ch, [&](int c, const float *x) {
#pragma unroll
                for (int i = 0; i < NQ; i++)
#pragma unroll
                    for (int e = 0; e < E; e++)
                        if (!GUARD || pw[i] != 0.0f) acc[i][c * E + e] = fmaf(pw[i], x[e], acc[i][c * E + e]);
            });
        }
    }
}

/* The CUDA-core kernel's shared state besides the rings: the weights of a tile's rows, the
   rescale factors, the warps' (m, l) and weights, the block's (m, l). */
template <int NW, int WT, int NQ> struct neo__fast_sh {
    __align__(16) float pw[NW][WT][NQ];
    float cw[NW][NQ], wm[NW][NQ], wl[NW][NQ], ww[NW][NQ], m[NQ], l[NQ];
};

/* The scores of a warp tile's rows (K at ks): sc[k] is the score of row k * RW + rsub for the
   lane's query after the reduce-scatter (see neo__rs) */
template <typename T, int D, int NQ, int CW, int STEPS>
__device__ __forceinline__ void neo__fast_scores(const float (&qf)[NQ][CW], const uint4 *ks, int lane, int rsub, int ch, float (&sc)[STEPS]) {
    typedef neo__fast_geom<T, D> FG;
    constexpr int E = FG::E, LPR = FG::LPR, RW = FG::RW;
#pragma unroll
    for (int k = 0; k < STEPS; k++) {
        const int row = k * RW + rsub;
        float     part[NQ];
#pragma unroll
        for (int i = 0; i < NQ; i++) part[i] = 0.0f;
        neo__fast_chunks<T, D>(ks, row, ch, [&](int c, const float *x) {
#pragma unroll
            for (int i = 0; i < NQ; i++)
#pragma unroll
                for (int e = 0; e < E; e++) part[i] = fmaf(qf[i][c * E + e], x[e], part[i]);
        });
        int qb = 0;
        neo__rs<NQ, LPR / 2>::run(part, lane, qb);
        sc[k] = part[0];
    }
}

/* The online-softmax step of the lane's query over a warp tile: the scores scaled, soft-capped,
   ALiBi-biased and masked, (m, l) updated (every lane of the query holds the same), sc the
   weights; returns the factor the accumulators must be rescaled by. */
template <int LPR, int RW, int STEPS>
__device__ __forceinline__ float neo__fast_softmax(const neo__cu_attn &p, float (&sc)[STEPS], bool qok, int pos, float slope, int tile0,
                                                   int nvalid, int rsub, float &m, float &l) {
    float tmax = -INFINITY;
#pragma unroll
    for (int k = 0; k < STEPS; k++) {
        const int row = k * RW + rsub, cell = tile0 + row;
        float     s = -INFINITY;
        if (qok && row < nvalid && cell <= pos) {
            s = neo__score(p.scale, sc[k]);
            if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
            if (p.slopes) s -= slope * (float)(pos - cell);
        }
        sc[k] = s;
        tmax = fmaxf(tmax, s);
    }
#pragma unroll
    for (int o = LPR; o < 32; o <<= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
    const float mnew = fmaxf(m, tmax);
    const float corr = mnew == -INFINITY ? 1.0f : expf(m - mnew); /* no inf - inf */
    float       psum = 0.0f;
#pragma unroll
    for (int k = 0; k < STEPS; k++) {
        sc[k] = sc[k] == -INFINITY ? 0.0f : expf(sc[k] - mnew);
        psum += sc[k];
    }
#pragma unroll
    for (int o = LPR; o < 32; o <<= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    l = l * corr + psum;
    m = mnew;
    return corr;
}

/* The four warps' states into the split's partial (m, l, acc[D]) per query: weights
   e^(m_w - M), then the row groups summed in a fixed order through the (now idle) rings at red. */
template <typename T, int D, int NQ, int CW, typename SH>
__device__ __forceinline__ void neo__fast_finish(const neo__cu_attn &p, const float (&acc)[NQ][CW], float *red, SH &sh, int warp, int rsub,
                                                 int ch, int kvh, int r0, int nqb, int split) {
    typedef neo__fast_geom<T, D> FG;
    constexpr int E = FG::E, LPR = FG::LPR, CPL = FG::CPL, RW = FG::RW, NW = NEO__CU_THREADS / 32;
    const int     tid = threadIdx.x;
    if (tid < NQ) {
        float M = -INFINITY, L = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) M = fmaxf(M, sh.wm[w][tid]);
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float wt = sh.wm[w][tid] == -INFINITY ? 0.0f : expf(sh.wm[w][tid] - M);
            sh.ww[w][tid] = wt;
            L = fmaf(wt, sh.wl[w][tid], L);
        }
        sh.m[tid] = M;
        sh.l[tid] = L;
    }
    /* red: [NW * RW][NQ][D] */
#pragma unroll
    for (int i = 0; i < NQ; i++)
#pragma unroll
        for (int c = 0; c < CPL; c++)
#pragma unroll
            for (int e4 = 0; e4 < E / 4; e4++) {
                float4 f = make_float4(acc[i][c * E + e4 * 4], acc[i][c * E + e4 * 4 + 1], acc[i][c * E + e4 * 4 + 2],
                                       acc[i][c * E + e4 * 4 + 3]);
                *reinterpret_cast<float4 *>(red + ((size_t)(warp * RW + rsub) * NQ + i) * D + (ch + c * LPR) * E + e4 * 4) = f;
            }
    __syncthreads();
    for (int o = tid; o < nqb * D; o += NEO__CU_THREADS) {
        const int i = o / D, col = o - i * D;
        float     sum = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            float part = 0.0f;
#pragma unroll
            for (int x = 0; x < RW; x++) part += red[((w * RW + x) * NQ + i) * D + col];
            sum = fmaf(sh.ww[w][i], part, sum);
        }
        p.work[((size_t)(kvh * p.nq + r0 + i) * p.S + split) * (D + 2) + 2 + col] = sum;
    }
    if (tid < nqb) {
        float *w = p.work + ((size_t)(kvh * p.nq + r0 + tid) * p.S + split) * (D + 2);
        w[0] = sh.m[tid];
        w[1] = sh.l[tid];
    }
}

/* Flash-decoding over one split of one KV head for a tile of NQ queries.
   Every warp streams its own warp tiles (tiles warp, warp + 4, ..) through its own cp.async ring
   and keeps its own online-softmax state, so the main loop has no block-wide barrier; the four
   warp states are merged once at the end.
   Lanes: a K/V row is CPR 16-byte chunks; LPR lanes share a row (CPL chunks each), so a warp
   covers RW rows per step. Each lane holds its q columns of all NQ queries in registers; the
   score of a row is reduce-scattered so that afterwards every lane holds one query's score (query
   qi of the lane); the softmax runs on those, and p . v accumulates the lane's columns of all NQ
   outputs over the rows of its row group (rsub). */
template <typename T, int D, int NQ, bool LEN>
__global__ void __launch_bounds__(NEO__CU_THREADS, NQ >= 8 ? NEO__CU_NQ8_BLOCKS : 4) neo__attn_fast(const neo__cu_attn p) {
    typedef neo__fast_geom<T, D> FG;
    constexpr int E = FG::E, CPR = FG::CPR, LPR = FG::LPR, CPL = FG::CPL, RW = FG::RW;
    constexpr int NW = NEO__CU_THREADS / 32, WT = FG::WT, STEPS = FG::STEPS, WT4 = WT * CPR, NS = NEO__CU_WSTAGES;
    constexpr int WM = LPR / NQ; /* lanes holding each (row, query) score after the reduce-scatter */
    static_assert(NQ <= LPR && WT % RW == 0 && WT4 % 32 == 0, "warp tile shape");
    static_assert(NW * RW * NQ * D * 4 <= NW * NS * 2 * WT4 * 16, "row-group reduction must fit the rings");
    extern __shared__ uint4 neo__smem[]; /* [NW][NS][2][WT4]: a ring of K and V warp tiles per warp */
    __shared__ neo__fast_sh<NW, WT, NQ> sh;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int rsub = lane / LPR, ch = lane % LPR;
    const int kvh = blockIdx.x / p.QT, qt = blockIdx.x % p.QT, split = blockIdx.y;
    const int g = p.h0 + kvh, r0 = qt * NQ, nqb = min(NQ, p.nq - r0);
    const neo__cu_live lv = neo__attn_live<LEN>(p);
    const int maxpos = lv.pos0 + (r0 + nqb - 1) / p.G; /* cells after the tile's last query are masked for all */
    const int minpos = lv.pos0 + r0 / p.G;             /* and those after its first query's for some */
    const int cb0 = lv.c0 + split * lv.chunk, cb1 = min(min(cb0 + lv.chunk, lv.c1), maxpos + 1);
    const int ntiles = cb1 > cb0 ? (cb1 - cb0 + WT - 1) / WT : 0;
    const int nw = ntiles > warp ? (ntiles - warp + NW - 1) / NW : 0; /* this warp's tiles */
    uint4    *ring = neo__smem + warp * NS * 2 * WT4;
    const uint4 *kg = reinterpret_cast<const uint4 *>(static_cast<const T *>(p.k) + (size_t)(g - p.kv_h0) * p.kstride +
                                                      (size_t)(cb0 - p.cell_base) * D);
    const uint4 *vg = reinterpret_cast<const uint4 *>(static_cast<const T *>(p.v) + (size_t)(g - p.kv_h0) * p.vstride +
                                                      (size_t)(cb0 - p.cell_base) * D);

    /* rows are contiguous within a head, so a warp tile is one contiguous run of WT4 chunks */
    auto load = [&](int j, int stage) {
        const int    t = warp + j * NW, rows = min(WT, cb1 - (cb0 + t * WT));
        uint4       *ks = ring + stage * 2 * WT4, *vs = ks + WT4;
        const uint4 *kt = kg + (size_t)t * WT4, *vt = vg + (size_t)t * WT4;
#pragma unroll
        for (int u = 0; u < WT4 / 32; u++) {
            const int idx = lane + u * 32;
            if (idx / CPR < rows) {
                neo__cp_async16(ks + idx, kt + idx);
                neo__cp_async16(vs + idx, vt + idx);
            }
        }
    };
#pragma unroll
    for (int s = 0; s < NS - 1; s++) {
        if (s < nw) load(s, s);
        neo__cp_async_commit();
    }

    /* the lane's query after the reduce-scatter (see neo__rs) */
    int qi = 0;
#pragma unroll
    for (int o = LPR / 2, n = NQ; o >= 1 && n > 1; o >>= 1, n >>= 1)
        if (lane & o) qi += n / 2;
    const bool  qok = qi < nqb;
    const int   pos = lv.pos0 + (r0 + (qok ? qi : 0)) / p.G;
    const float slope = (p.slopes && qok) ? p.slopes[g * p.G + (r0 + qi) % p.G] : 0.0f;
    float       m = -INFINITY, l = 0.0f;

    float qf[NQ][CPL * E], acc[NQ][CPL * E];
#pragma unroll
    for (int i = 0; i < NQ; i++) {
        const int     r = r0 + (i < nqb ? i : 0);
        const float4 *qr = reinterpret_cast<const float4 *>(p.q + ((size_t)(r / p.G) * p.n_head + (size_t)g * p.G + r % p.G) * D);
#pragma unroll
        for (int c = 0; c < CPL; c++)
#pragma unroll
            for (int e4 = 0; e4 < E / 4; e4++) {
                const float4 f = __ldg(qr + (ch + c * LPR) * (E / 4) + e4);
                qf[i][c * E + e4 * 4 + 0] = f.x;
                qf[i][c * E + e4 * 4 + 1] = f.y;
                qf[i][c * E + e4 * 4 + 2] = f.z;
                qf[i][c * E + e4 * 4 + 3] = f.w;
            }
#pragma unroll
        for (int e = 0; e < CPL * E; e++) acc[i][e] = 0.0f;
    }

    for (int j = 0; j < nw; j++) {
        neo__cp_async_wait<NS - 2>(); /* this lane's copies of tile j have landed */
        __syncwarp();                 /* the warp's have, and every lane is done with tile j - 1 */
        if (j + NS - 1 < nw) load(j + NS - 1, (j + NS - 1) % NS);
        neo__cp_async_commit();
        const uint4 *ks = ring + (j % NS) * 2 * WT4, *vs = ks + WT4;
        const int    tile0 = cb0 + (warp + j * NW) * WT, nvalid = min(WT, cb1 - tile0);

        float sc[STEPS];
        neo__fast_scores<T, D, NQ>(qf, ks, lane, rsub, ch, sc);
        const float corr = neo__fast_softmax<LPR, RW>(p, sc, qok, pos, slope, tile0, nvalid, rsub, m, l);
        if (ch % WM == 0) {
#pragma unroll
            for (int k = 0; k < STEPS; k++) sh.pw[warp][k * RW + rsub][qi] = sc[k];
            if (rsub == 0) sh.cw[warp][qi] = corr;
        }
        const bool rescale = __any_sync(0xffffffffu, corr != 1.0f);
        __syncwarp();

        /* acc = acc * corr + p . v over this lane's rows */
        if (rescale)
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const float cr = sh.cw[warp][i];
#pragma unroll
                for (int e = 0; e < CPL * E; e++) acc[i][e] *= cr;
            }
        /* a tile with cells after the first query's position (prefill only: the queries of a
           decode tile share one position, and cb1 stops there) weighs them 0 for some queries */
        if (tile0 + nvalid - 1 > minpos) neo__fast_pv<T, D, NQ, true>(acc, vs, sh.pw[warp], rsub, ch, nvalid);
        else neo__fast_pv<T, D, NQ, false>(acc, vs, sh.pw[warp], rsub, ch, nvalid);
    }
    neo__cp_async_wait<0>();
    if (rsub == 0 && ch % WM == 0) {
        sh.wm[warp][qi] = m;
        sh.wl[warp][qi] = l;
    }
    __syncthreads();
    /* the merge kernel may start launching; it waits for this grid's writes before reading */
    neo__pdl_trigger();
    neo__fast_finish<T, D, NQ>(p, acc, reinterpret_cast<float *>(neo__smem), sh, warp, rsub, ch, kvh, r0, nqb, split);
}
/* Any head_dim / head_dim_v, any alignment: element loads, q read through the cache, a warp per
   cell for the scores and a thread per output column (two of them) for p . v. */
template <typename T, int NQ, bool LEN>
__global__ void __launch_bounds__(NEO__CU_THREADS) neo__attn_generic(const neo__cu_attn p) {
    typedef neo__kvt<T> KV;
    constexpr int TC = NEO__CU_GEN_TILE, NW = NEO__CU_THREADS / 32;
    __shared__ float s_p[TC * NQ];
    __shared__ float s_m[NQ], s_l[NQ], s_corr[NQ];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int kvh = blockIdx.x / p.QT, qt = blockIdx.x % p.QT, split = blockIdx.y;
    const int g = p.h0 + kvh, r0 = qt * NQ, nqb = min(NQ, p.nq - r0);
    const neo__cu_live lv = neo__attn_live<LEN>(p);
    const int maxpos = lv.pos0 + (r0 + nqb - 1) / p.G;
    const int cb0 = lv.c0 + split * lv.chunk, cb1 = min(min(cb0 + lv.chunk, lv.c1), maxpos + 1);
    const int j0 = blockIdx.z * NEO__CU_GEN_COLS + tid, j1 = j0 + NEO__CU_THREADS;
    const T *kh = static_cast<const T *>(p.k) + (size_t)(g - p.kv_h0) * p.kstride;
    const T *vh = static_cast<const T *>(p.v) + (size_t)(g - p.kv_h0) * p.vstride;
    const float *qp[NQ];
#pragma unroll
    for (int i = 0; i < NQ; i++) {
        const int r = r0 + (i < nqb ? i : 0); /* a missing query reads a real one and is never written */
        qp[i] = p.q + ((size_t)(r / p.G) * p.n_head + (size_t)g * p.G + r % p.G) * p.d;
    }
    if (tid < NQ) {
        s_m[tid] = -INFINITY;
        s_l[tid] = 0.0f;
    }
    float acc[NQ][2];
#pragma unroll
    for (int i = 0; i < NQ; i++) acc[i][0] = acc[i][1] = 0.0f;

    for (int tile0 = cb0; tile0 < cb1; tile0 += TC) {
        const int nvalid = min(TC, cb1 - tile0);
        for (int c = warp; c < nvalid; c += NW) {
            const T *kr = kh + (size_t)(tile0 + c - p.cell_base) * p.d;
            float    part[NQ];
#pragma unroll
            for (int i = 0; i < NQ; i++) part[i] = 0.0f;
            for (int j = lane; j < p.d; j += 32) {
                const float kx = KV::ld(kr, (size_t)j);
#pragma unroll
                for (int i = 0; i < NQ; i++) part[i] = fmaf(__ldg(qp[i] + j), kx, part[i]);
            }
#pragma unroll
            for (int i = 0; i < NQ; i++) part[i] = neo__warp_sum(part[i]);
            if (lane < NQ) {
                float mine = part[0];
#pragma unroll
                for (int i = 1; i < NQ; i++) mine = lane == i ? part[i] : mine;
                s_p[c * NQ + lane] = mine;
            }
        }
        __syncthreads();
        neo__softmax_tile<TC, NQ>(p, s_p, s_m, s_l, s_corr, g, r0, lv.pos0, tile0, nvalid);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            acc[i][0] *= s_corr[i];
            acc[i][1] *= s_corr[i];
        }
        for (int c = 0; c < nvalid; c++) {
            const T    *vr = vh + (size_t)(tile0 + c - p.cell_base) * p.dv;
            const float x0 = j0 < p.dv ? KV::ld(vr, (size_t)j0) : 0.0f, x1 = j1 < p.dv ? KV::ld(vr, (size_t)j1) : 0.0f;
#pragma unroll
            for (int i = 0; i < NQ; i++) {
                const float w = s_p[c * NQ + i];
                if (w != 0.0f) { /* a masked cell (w == 0) never meets acc: its V may be inf (see neo__fast_pv) */
                    acc[i][0] = fmaf(w, x0, acc[i][0]);
                    acc[i][1] = fmaf(w, x1, acc[i][1]);
                }
            }
        }
        __syncthreads(); /* s_p and s_corr are rewritten by the next tile */
    }
    __syncthreads();
    neo__pdl_trigger();
#pragma unroll
    for (int i = 0; i < NQ; i++) {
        if (i >= nqb) break;
        float *w = p.work + ((size_t)(kvh * p.nq + r0 + i) * p.S + split) * (p.dv + 2);
        if (j0 < p.dv) w[2 + j0] = acc[i][0];
        if (j1 < p.dv) w[2 + j1] = acc[i][1];
        if (blockIdx.z == 0 && tid == 0) {
            w[0] = s_m[i];
            w[1] = s_l[i];
        }
    }
}

/* =============================================================================================
   >>merge  the splits' partials into the state or the output: the weights (one device function
   for both merges), and neo__attn_merge for the CUDA-core kernels
   ============================================================================================= */

/* The merge's weights for one query, one warp: w_s = e^(m_s - Mf) for split s (into w[s]) and
   for the previous state (mprev, lprev), M the max of the m's, Mf that or the sink's logit sv
   when larger. Returns (wprev, M, L, den): L = sum w_s l_s + wprev lprev, den = L + e^(sv - Mf)
   with a sink. ml(u) is the (m, l) of split lane + 32u, (-inf, 0) from S on. A fixed order (each
   lane's splits in order, then the warp's tree), so the result does not depend on which block
   merges. Both merges (the tensor-core kernel's own and neo__attn_merge) use it. */
/* a += w v, lane by lane: one split's weighted partial added into a merge's sum */
__device__ __forceinline__ void neo__fma4(float4 &a, float w, const float4 &v) {
    a.x = fmaf(w, v.x, a.x);
    a.y = fmaf(w, v.y, a.y);
    a.z = fmaf(w, v.z, a.z);
    a.w = fmaf(w, v.w, a.w);
}

template <typename ML>
__device__ __forceinline__ float4 neo__merge_weights(ML ml, int S, int lane, float mprev, float lprev, bool sink, float sv, float *w) {
    constexpr int SPL = NEO__CU_MAX_SPLITS / 32;
    float         M = -INFINITY;
#pragma unroll
    for (int u = 0; u < SPL; u++) M = fmaxf(M, ml(u).x);
    M = neo__warp_max(fmaxf(M, mprev));
    const float Mf = sink ? fmaxf(M, sv) : M;
    float       L = 0.0f;
#pragma unroll
    for (int u = 0; u < SPL; u++) {
        const int s = lane + 32 * u;
        if (s < S) {
            const float2 v = ml(u);
            const float  ws = v.x == -INFINITY ? 0.0f : expf(v.x - Mf);
            w[s] = ws;
            L = fmaf(ws, v.y, L);
        }
    }
    L = neo__warp_sum(L);
    const float wprev = mprev == -INFINITY ? 0.0f : expf(mprev - Mf);
    L = fmaf(wprev, lprev, L);
    return make_float4(wprev, M, L, L + (sink ? expf(sv - Mf) : 0.0f));
}

struct neo__cu_merge {
    const float *work;    /* [H][nq][S][dv + 2] */
    float       *state;   /* [n_tokens][n_head][dv + 2] or NULL */
    float       *out;     /* [n_tokens][n_head][dv] or NULL */
    const float *sinks;   /* [n_head] or NULL */
    int          S, nq, G, n_head, h0, dv, accumulate;
    int          P;       /* partial sums over the splits per column: 1, 2 or 4 (P * dv <= 256) */
};

/* out (or state) for one (KV head, query): weights w_s = e^(m_s - M) over the previous state and
   the splits, M their max (and the sink's logit when finishing with sinks), fixed order. */
__global__ void __launch_bounds__(256) neo__attn_merge(const neo__cu_merge mp) {
    /* programmatic dependent launch: wait until the attention grid's writes are visible */
    neo__pdl_wait();
    __shared__ float s_w[NEO__CU_MAX_SPLITS], s_red[256], s_misc[4];
    const int    b = blockIdx.x, kvh = b / mp.nq, r = b % mp.nq;
    const int    t = r / mp.G, hq = (mp.h0 + kvh) * mp.G + r % mp.G;
    const size_t stride = (size_t)mp.dv + 2;
    const float *part = mp.work + (size_t)b * mp.S * stride;
    float       *st = mp.state ? mp.state + ((size_t)t * mp.n_head + hq) * stride : NULL;
    float       *o = mp.out ? mp.out + ((size_t)t * mp.n_head + hq) * mp.dv : NULL;
    const bool   sink = o && mp.sinks;
    const int    P = mp.P, TPC = 256 / P, pi = threadIdx.x / TPC, jt = threadIdx.x % TPC;
    const int    s0 = pi * mp.S / P, s1 = (pi + 1) * mp.S / P;
    /* the first partials of this thread's first column, loaded while warp 0 works out the weights */
    constexpr int PF = 32;
    float         pf[PF];
#pragma unroll
    for (int u = 0; u < PF; u++) pf[u] = (jt < mp.dv && s0 + u < s1) ? part[(size_t)(s0 + u) * stride + 2 + jt] : 0.0f;
    if (threadIdx.x < 32) {
        const int    lane = threadIdx.x;
        auto         ml = [&](int u) {
            const int s = lane + 32 * u;
            return s < mp.S ? make_float2(part[s * stride], part[s * stride + 1]) : make_float2(-INFINITY, 0.0f);
        };
        const float4 f = neo__merge_weights(ml, mp.S, lane, mp.accumulate ? st[0] : -INFINITY, mp.accumulate ? st[1] : 0.0f, sink,
                                            sink ? mp.sinks[hq] : 0.0f, s_w);
        if (lane == 0) {
            s_misc[0] = f.x;
            s_misc[1] = f.y;
            s_misc[2] = f.z;
            s_misc[3] = f.w;
        }
    }
    __syncthreads();
    const float wprev = s_misc[0], den = s_misc[3];
    for (int j = jt; j < mp.dv; j += TPC) {
        float a = 0.0f;
        int   s = s0;
        if (j == jt) {
#pragma unroll
            for (int u = 0; u < PF; u++)
                if (s0 + u < s1) a = fmaf(s_w[s0 + u], pf[u], a);
            s = min(s1, s0 + PF);
        }
#pragma unroll 8
        for (; s < s1; s++) a = fmaf(s_w[s], part[(size_t)s * stride + 2 + j], a);
        if (P > 1) { /* P > 1 only when dv <= TPC: one column per thread */
            s_red[threadIdx.x] = a;
            break;
        }
        if (mp.accumulate) a = fmaf(wprev, st[2 + j], a);
        if (o) o[j] = neo__finish(a, den);
        else st[2 + j] = a;
    }
    if (P > 1) {
        __syncthreads();
        if (pi == 0 && jt < mp.dv) {
            float a = s_red[jt];
            for (int x = 1; x < P; x++) a += s_red[x * TPC + jt];
            if (mp.accumulate) a = fmaf(wprev, st[2 + jt], a);
            if (o) o[jt] = neo__finish(a, den);
            else st[2 + jt] = a;
        }
    }
    if (!o && threadIdx.x == 0) { /* warp 0 read st[0..1] before the barrier above */
        st[0] = s_misc[1];
        st[1] = s_misc[2];
    }
}

/* =============================================================================================
   >>attn.mma  the tensor-core kernel: f16 / bf16 K and V, head_dim == head_dim_v in {64, 128, 256}
   ============================================================================================= */

/* Per warp and 16-cell warp tile, with mma.m16n8k16 (f32 accumulators):
     S^T[16 cells][8 queries] = K[16 cells][d] . Q^T[d][8 queries]       A = K (ldmatrix), B = q
     O^T[d][8 queries]      += V^T[d][16 cells] . P^T[16 cells][8 queries] A = V^T (ldmatrix.trans)
   so that a query tile is always the n = 8 side and the cells and head dims the m = 16 side; the
   C fragment of S^T becomes the B fragment of P^T with one movmatrix.trans per 8 x 8 block. q
   (float32) is split into 16-bit parts (hi + lo for f16, to 2^-22 of x; hi + mid + lo for bf16,
   to 2^-24) and the weights p into a high and a low part (to 2^-22 for f16, 2^-16 for bf16), and
   every part goes through the tensor cores, so the products keep about float32 accuracy; q is first scaled by a power of two per query (undone
   exactly in the score scale) so that its high part uses the f16 range well. */
#define NEO__MMA_NQ 8
/* Block shapes. Wide: one block an SM, 8 warps (head_dim 64), 9 (128) or 4 (256) with rings of
   3 16-cell tiles a warp (216 KB for head_dim 128, 192 KB for 256, 96 KB for 64): for head_dim
   128 and 256 the most bytes in flight that the 227 KB an sm_90 block may have can hold, which is
   what a decode attention that streams the cache from memory needs, in as few warps as keep them
   in flight, since every warp of a block adds to the chain after the last tile (its share of the
   SM's issue slots, its state in the combine). At a short context a split is then one or two
   tiles a warp, all asked for at once. Narrow: for head_dim 128, 5 warps with 2-deep rings in 80
   KB, two blocks an SM, so that at the longest contexts every SM stays busy and one block's
   epilogue runs under the other's loads (also for batches, for K and V read from host memory
   over the bus, and on GPUs whose blocks cannot have 216 KB); for head_dim 256, 2 warps with
   3-deep rings in 96 KB, for GPUs whose blocks cannot have 192 KB. The planner picks the shape
   (neo__plan_mma_narrow); docs/BENCHMARKS.md has the measurements behind these numbers. */
#define NEO__CU_MMA_NS_NARROW 2     /* ring depth of each warp of the narrow head_dim 128 block */
#define NEO__CU_MMA_MIN_TILES 1     /* 16-cell tiles a warp at least, per split */
#define NEO__CU_MMA_NARROW_CELLS 196608 /* cells a KV head from which head_dim 128 takes the narrow block */
#define NEO__CU_MMA_STATIC_SMEM 2048   /* bound on the kernel's static shared memory (s_wm .. s_bar) */
/* BPS: 1 the wide shape, 2 the narrow one (two blocks an SM for head_dim 128) */
template <int D, int BPS> struct neo__mma_cfg {
    static_assert(BPS == 1 || (BPS == 2 && D != 64), "block shapes");
    static constexpr int W = D == 256 ? (BPS == 1 ? 4 : 2) : BPS == 1 ? (D == 128 ? 9 : 8) : 5; /* warps a block */
    static constexpr int NS = D == 128 && BPS == 2 ? NEO__CU_MMA_NS_NARROW : 3;  /* ring depth of each warp */
    static constexpr int CPR = D / 8;                     /* 16-byte chunks of a row */
    static constexpr int TCH = 16 * CPR;                  /* chunks of one K (or V) warp tile */
    /* row stride of the warp-combine buffer: the acc fragment stores hit 32 banks (bank 2c + the
       row's dim on the bulk path, 8c + g on the ldmatrix path) */
    static constexpr int RS = NEO__CU_TMA ? D + 1 : D + 4;
    static constexpr size_t SMEM = (size_t)W * NS * 2 * TCH * 16; /* the rings (wide 96 / 216 / 192 KB for head_dim 64 / 128 / 256; narrow 80 / 96 KB) */
    static_assert(SMEM * BPS + NEO__CU_MMA_STATIC_SMEM <= 227 * 1024, "the rings of BPS blocks must fit an sm_90 SM");
    static_assert((size_t)W * NEO__MMA_NQ * RS * 4 + NEO__MMA_NQ * D * 4 + NEO__MMA_NQ * NEO__CU_MAX_SPLITS * 4 <= SMEM,
                  "epilogue buffers must fit in the rings");
};

template <typename T> struct neo__mmt;
template <> struct neo__mmt<__half> {
    static constexpr int      QP = 2;               /* parts of q: x = hi + lo to 2^-22 */
    static constexpr uint32_t EXP2 = 0x7c007c00u;   /* the exponents of two elements: all ones is inf or NaN */
    static __device__ __forceinline__ float widen(unsigned short u) { return __half2float(__ushort_as_half(u)); }
    static __device__ __forceinline__ uint32_t pack(float x, float y) {
        __half2 h = __floats2half2_rn(x, y);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ float2 unpack(uint32_t u) { return __half22float2(*reinterpret_cast<__half2 *>(&u)); }
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <> struct neo__mmt<__nv_bfloat16> {
    static constexpr int      QP = 3;               /* parts of q: x = hi + mid + lo to 2^-24 */
    static constexpr uint32_t EXP2 = 0x7f807f80u;
    static __device__ __forceinline__ float widen(unsigned short u) { return __uint_as_float((uint32_t)u << 16); }
    static __device__ __forceinline__ uint32_t pack(float x, float y) {
        __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
        return *reinterpret_cast<uint32_t *>(&h);
    }
    static __device__ __forceinline__ float2 unpack(uint32_t u) {
        return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
    }
    static __device__ __forceinline__ void mma(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
__device__ __forceinline__ void neo__ldsm4(uint32_t *r, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void neo__ldsm4t(uint32_t *r, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ uint32_t neo__movt(uint32_t x) {
    uint32_t y;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* Whether a V element in rows [r0, r1) of a warp tile (a ring stage at shared address vs; the
   chunks of a row in any order) is inf or NaN, warp-wide. */
template <typename T, int D> __device__ __forceinline__ bool neo__mma_v_bad(unsigned vs, int r0, int r1, int lane) {
    constexpr int      CPR = D / 8;
    constexpr uint32_t LO = neo__mmt<T>::EXP2 & 0xffffu, HI = neo__mmt<T>::EXP2 & 0xffff0000u;
    bool               bad = false;
    for (int i = max(r0, 0) * CPR + lane; i < r1 * CPR; i += 32) {
        uint4 x;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(vs + (unsigned)(i * 16)));
        const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int k = 0; k < 4; k++) bad |= (w[k] & LO) == LO || (w[k] & HI) == HI;
    }
    return __any_sync(0xffffffffu, bad);
}

/* The head dim of row g (hi = 0) or g + 8 (hi = 1) of m-tile t of O^T: the order in which the
   bulk path's 16-byte loads and movmatrix give V^T, or plain order on the ldmatrix path. */
template <bool TMA> __device__ __forceinline__ int neo__mma_dim(int t, int g, int hi) {
    return TMA ? 8 * (4 * (t >> 1) + (g >> 1)) + 4 * (t & 1) + (g & 1) + 2 * hi : 16 * t + g + 8 * hi;
}

/* p . v for a warp tile whose cells after the first query's position (masked for some queries)
   hold inf or NaN in V: the products one by one, a weight of exactly 0 skipping its product (in
   the mma, 0 * inf would make a masked query's sums NaN). acc[t]: dims neo__mma_dim(t, g, 0 / 1)
   x queries 2c, 2c + 1; pw: the lane's weights, x = 2 (cell >> 3) + query parity for cells g,
   g + 8. Taken only for such tiles (prefill with non-finite V), so the mma path's bits are kept
   for every other. */
template <typename T, int D, bool TMA>
__device__ __forceinline__ void neo__mma_pv_masked(float (&acc)[D / 16][4], const float (&pw)[4], unsigned vs, int g, int c) {
    constexpr int CPR = D / 8;
    auto          vld = [&](int cell, int dim) { /* V[cell][dim] in the ring's layout */
        const int      ch = TMA ? dim >> 3 : (dim >> 3) ^ (cell & 7);
        unsigned short u;
        asm volatile("ld.shared.u16 %0, [%1];" : "=h"(u) : "r"(vs + (unsigned)((cell * CPR + ch) * 16 + (dim & 7) * 2)));
        return neo__mmt<T>::widen(u);
    };
#pragma unroll 1
    for (int h = 0; h < 8; h++) {
        float p[4]; /* cells h, h + 8 x queries 2c, 2c + 1, from lane (h, c) */
#pragma unroll
        for (int x = 0; x < 4; x++) p[x] = __shfl_sync(0xffffffffu, pw[x], (h << 2) | c);
#pragma unroll
        for (int t = 0; t < D / 16; t++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int   cell = h + 8 * hh;
                const float v0 = vld(cell, neo__mma_dim<TMA>(t, g, 0)), v8 = vld(cell, neo__mma_dim<TMA>(t, g, 1));
                const float pa = p[2 * hh], pb = p[2 * hh + 1];
                if (pa != 0.0f) acc[t][0] = fmaf(pa, v0, acc[t][0]), acc[t][2] = fmaf(pa, v8, acc[t][2]);
                if (pb != 0.0f) acc[t][1] = fmaf(pb, v0, acc[t][1]), acc[t][3] = fmaf(pb, v8, acc[t][3]);
            }
    }
}

/* The shared state of a tensor-core block besides the rings: the warps' (m, l) and weights, the
   block's (m, l), the merge's per-query results, the last-arrival flag, a barrier per ring stage. */
template <int W, int NS> struct neo__mma_sh {
    float              wm[W][8], wl[W][8], ww[W][8], m[8], l[8], fin[8][4];
    int                last;
    unsigned long long bar[W][NS];
};

/* The parts of neo__attn_mma (below), one warp's view of one block: the coordinates, then load /
   q / scores / softmax / p . v for a tile, then the warps' combine and the splits' merge. */
template <typename T, int D, int BPS, bool LEN, bool CL> struct neo__mma {
    typedef neo__mma_cfg<D, BPS> C;
    typedef neo__mmt<T>          MT;
    typedef neo__mma_sh<C::W, C::NS> SH;
    static constexpr int      W = C::W, NS = C::NS, CPR = C::CPR, TCH = C::TCH, KS = D / 16, RS = C::RS, NT = W * 32, NC = D / 4;
    static constexpr int      TB = TCH * 16, QP = MT::QP; /* bytes of one K (or V) warp tile; parts of q */
    static constexpr bool     TMA = NEO__CU_TMA;
    static constexpr unsigned FULL = 0xffffffffu;

    const neo__cu_attn &p;
    uint4              *smem; /* the rings, then the epilogue's buffers */
    SH                 &sh;
    int tid, warp, lane, g, c, unit, split, S, gh, r0, nqb, minpos, cb0, cb1, nw;
    int early, drained; /* the stages filled before the wait (SPEC, short calls); the first drained ones are one phase on */
    uint4       *ring;
    unsigned     ring_s;
    const uint4 *kg, *vg;

    __device__ __forceinline__ neo__mma(const neo__cu_attn &p_, int unit_, int split_, uint4 *smem_, SH &sh_) : p(p_), smem(smem_), sh(sh_) {
        tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
        unit = unit_, split = split_, S = p.S;
        const int kvh = unit / p.QT, qt = unit % p.QT;
        gh = p.h0 + kvh, r0 = qt * NEO__MMA_NQ, nqb = min(NEO__MMA_NQ, p.nq - r0);
        ring = smem + warp * NS * 2 * TCH;
        ring_s = (unsigned)__cvta_generic_to_shared(ring);
        early = drained = 0;
        if constexpr (SPEC) place(neo__attn_live_at(p, neo__ld_hint(p.len) + p.hint)); /* settled after the wait */
        else place(neo__attn_live<LEN>(p));
    }

    /* the block's cells, this warp's tile count and the split's K and V rows, for an attend as lv */
    __device__ __forceinline__ void place(const neo__cu_live &lv) {
        const int maxpos = lv.pos0 + (r0 + nqb - 1) / p.G; /* cells after the tile's last query are masked for all */
        minpos = lv.pos0 + r0 / p.G;                       /* and those after its first query's for some */
        cb0 = lv.c0 + split * lv.chunk, cb1 = min(min(cb0 + lv.chunk, lv.c1), maxpos + 1);
        const int ntiles = cb1 > cb0 ? (cb1 - cb0 + 15) / 16 : 0;
        nw = ntiles > warp ? (ntiles - warp + W - 1) / W : 0; /* this warp's tiles */
        kg = reinterpret_cast<const uint4 *>(static_cast<const T *>(p.k) + (size_t)(gh - p.kv_h0) * p.kstride + (size_t)(cb0 - p.cell_base) * D);
        vg = reinterpret_cast<const uint4 *>(static_cast<const T *>(p.v) + (size_t)(gh - p.kv_h0) * p.vstride + (size_t)(cb0 - p.cell_base) * D);
    }

    /* An attend with len that starts before the wait (sm_90, launched as a programmatic dependent)
       is placed from an early read of *len, and settled from the real one after the wait. Its
       first stages (requested before the wait) and its others (behind q's loads, rest) hold the
       early placement's tiles; they are kept when the real placement covers the same cells and
       the last early tile (the warp's first tiles) is whole and before pos0, else every stage
       requested lands and the real placement's tiles are requested in their stages, one barrier
       phase on (drained). */
    static constexpr bool SPEC = LEN && TMA;
    __device__ __forceinline__ void settle(int len) {
        const int c = cb0, e = cb1, asked = min(NS, nw);
        place(neo__attn_live_at(p, len));
        if (cb0 != c || cb1 != e || (early > 0 && cb0 + (warp + (early - 1) * W) * 16 + 16 > min(cb1, pos0()))) {
            for (int s = 0; s < asked; s++) wait(s, s);
            __syncwarp(); /* every lane is past the barriers before the stages are rewritten */
            drained = asked;
            early = 0;
            request(0);
        }
    }

    /* the position of token 0: with LEN from minpos, so that the live value takes no register */
    __device__ __forceinline__ int pos0() const {
        if constexpr (LEN) return minpos - r0 / p.G;
        else return p.pos0;
    }

    /* this launch's splits merge in a cluster (only kernels built with CL can) */
    __device__ __forceinline__ bool clustered() const { return CL && p.cl; }

    __device__ __forceinline__ unsigned bar(int stage) const { return (unsigned)__cvta_generic_to_shared(&sh.bar[warp][stage]); }

    /* the warp's tile j into ring stage `stage`: bulk copies completing on the stage's barrier
       (sm_90), or cp.async into XOR-swizzled rows (ldmatrix is then conflict-free); rows past the
       range are zero in V (0 * V must never meet stale or uninitialised bits) */
    __device__ __forceinline__ void load(int j, int stage) const {
        const int    t = warp + j * W, rows = min(16, cb1 - (cb0 + t * 16));
        uint4       *ks = ring + stage * 2 * TCH, *vs = ks + TCH;
        const uint4 *kt = kg + (size_t)t * TCH, *vt = vg + (size_t)t * TCH;
        if constexpr (TMA) {
            if (rows < 16) {
                for (int idx = rows * CPR + lane; idx < TCH; idx += 32) vs[idx] = make_uint4(0u, 0u, 0u, 0u);
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                __syncwarp();
            }
            if (lane == 0) {
                const unsigned b = bar(stage), n = (unsigned)(rows * CPR * 16);
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(2 * n) : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 (unsigned)__cvta_generic_to_shared(ks)),
                             "l"(kt), "r"(n), "r"(b)
                             : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 (unsigned)__cvta_generic_to_shared(vs)),
                             "l"(vt), "r"(n), "r"(b)
                             : "memory");
            }
        } else {
#pragma unroll
            for (int u = 0; u < TCH / 32; u++) {
                const int  idx = lane + 32 * u, row = idx / CPR, ch = idx % CPR, dst = row * CPR + (ch ^ (row & 7));
                const bool ok = row < rows;
                neo__cp_async16z(ks + dst, ok ? kt + idx : kt, ok ? 16 : 0);
                neo__cp_async16z(vs + dst, ok ? vt + idx : vt, ok ? 16 : 0);
            }
        }
    }

    /* Every stage is filled at once (with len and in short calls: the first before the wait, the
       others after it), and refilled as soon as the warp is done with it. Under programmatic
       dependent launch this block may start while the previous kernel on the stream still runs;
       its writes (q, this stream's work buffer and counters, cells appended just before) are
       visible only after neo__pdl_wait. Cells before pos0 are not among them:
       neo_attn_append wrote them before the append kernel of pos0, which is launched without the
       programmatic attribute and so starts only after all earlier work is complete, and no kernel
       after it starts before it completes; the decode loop, whose projection appends the token
       itself (a programmatic dependent), wrote them in earlier steps, and each step starts with
       a copy (the token's embedding), which waits for all earlier work. So the first tiles below
       pos0 are requested at once, overlapping the previous kernel's tail, and the rest after the
       wait. (An attend with len is placed from an early read of its length here, and its first
       tiles are whole ones below that placement's pos0; settle checks them after the wait. It
       asks for one stage of each warp before the wait, not every stage: attends with len are
       what CUDA graphs replay, and replayed back to back such calls were shorter or level with
       fewer early tiles; docs/BENCHMARKS.md, "One ring stage before the wait for decodes
       replayed from a graph". Its other stages, from the same placement, are requested once q's
       loads are issued (rest), as a short call's are: "An attend with len asks for its other
       stages behind q's loads".) So does an eager single attend (CL) of the wide head_dim 128 block
       whose warps' tiles all fit their rings (short_call), and it requests the other stages once
       q's loads are issued (rest): the reads a block has queued delay the wait's return and its
       later reads, q's among them, so behind one stage q comes sooner, and the other stages, asked
       for behind q's loads, still land while the first is computed. Where a warp streams more
       tiles than its ring holds, every stage goes first, as the ring must be refilled from the
       start (docs/BENCHMARKS.md, "q before the rest of a short call's tiles", "q's loads ahead of
       the rest of a short call's tiles"). Head_dim 128 and 256 let the next kernel launch before
       the main loop (EARLY): its blocks take an SM as soon as one of this grid's leaves it and
       request their first tiles while this grid's last blocks finish; head_dim 64, whose blocks
       are shorter, triggers after its main loop. */
    static constexpr bool EARLY = D != 64;
    /* head_dim 128's wide block (one an SM) only: head_dim 64's, two an SM, was slower so */
    __device__ __forceinline__ bool short_call() const { return CL && TMA && D == 128 && BPS == 1 && nw <= NS; }
    __device__ __forceinline__ void start() {
        if constexpr (TMA) {
            /* The barriers are written by the generic proxy (init) and completed by the async one
               (the bulk copies' complete_tx): the proxy fence orders the two, as the release of
               the init orders it for other threads. Without it compute-sanitizer's racecheck
               reports the first tiles' reads in clustered launches (their copies are issued
               before griddepcontrol.wait) as unsynchronised with those copies. */
            if (lane == 0) {
#pragma unroll
                for (int s = 0; s < NS; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar(s)));
                asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            }
            __syncwarp();
        }
        const int most = SPEC || short_call() ? 1 : NS; /* ring stages a warp fills before the wait */
        int       pre = 0;
        for (; pre < most && pre < nw; pre++) {
            const int t0 = cb0 + (warp + pre * W) * 16;
            if (min(t0 + 16, cb1) > pos0() || (SPEC && t0 + 16 > cb1)) break;
            load(pre, pre);
            if constexpr (!TMA) neo__cp_async_commit();
        }
        if constexpr (EARLY) neo__pdl_trigger();
        neo__pdl_wait();
        early = pre; /* SPEC and short calls: rest requests the others */
        if (!SPEC && !short_call())
            for (int s = pre; s < NS; s++) {
                if (s < nw) load(s, s);
                if constexpr (!TMA) neo__cp_async_commit();
            }
    }

    /* the stages from `from` on that hold tiles of this warp */
    __device__ __forceinline__ void request(int from) const {
        for (int s = from; s < NS && s < nw; s++) load(s, s);
    }

    /* the other stages of a short call or an attend with len (from its early placement, settled
       later), asked for once q's loads are issued, so that q's stay ahead of them */
    __device__ __forceinline__ void rest() const {
        if (SPEC || short_call()) request(early);
    }

    /* q_load: the lane's q values qv, in the order q_frags takes them (apart, so that a short
       call's other stages can be asked for while they are in flight); q_frags: q as the B
       fragments of Q^T, query g of lane (g, c), split into QP 16-bit parts after a scaling by a
       power of two (qdown undoes it). cp.async path: k-step s holds dims 16s + 2c +
       {0, 1} and 16s + 2c + {8, 9} (the order ldmatrix gives K). Bulk path: k-step (P, t) = 2P + t
       holds dims 8 (4P + c) + 4t + {0, 1} and + {2, 3}, the order in which a lane's 16-byte loads
       of K rows give them. */
    __device__ __forceinline__ void q_load(float2 (&qv)[KS][2]) const {
        const bool   gq = g < nqb;
        const int    rq = r0 + (gq ? g : 0);
        const float *qr = p.q + ((size_t)(rq / p.G) * p.n_head + (size_t)gh * p.G + rq % p.G) * D;
#pragma unroll
        for (int s = 0; s < KS; s++) {
            if constexpr (TMA) { /* a k-step's four dims are adjacent: one 16-byte load */
                const float *src = qr + 8 * (4 * (s >> 1) + c) + 4 * (s & 1);
                const float4 v = gq ? *reinterpret_cast<const float4 *>(src) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                qv[s][0] = make_float2(v.x, v.y), qv[s][1] = make_float2(v.z, v.w);
            } else
#pragma unroll
                for (int h = 0; h < 2; h++) qv[s][h] = gq ? *reinterpret_cast<const float2 *>(qr + 16 * s + 2 * c + 8 * h) : make_float2(0.0f, 0.0f);
        }
    }
    __device__ __forceinline__ float q_frags(const float2 (&qv)[KS][2], uint32_t (&qf)[QP][KS][2]) const {
        float mx = 0.0f;
#pragma unroll
        for (int s = 0; s < KS; s++)
#pragma unroll
            for (int h = 0; h < 2; h++) mx = fmaxf(mx, fmaxf(fabsf(qv[s][h].x), fabsf(qv[s][h].y)));
        mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 2));
        /* max |q| * 2^sh in [2^8, 2^9): mx = f 2^ex with f in [0.5, 1) */
        const int   ex = ((__float_as_int(mx) >> 23) & 0xff) - 126;
        const int   sh_ = max(-126, min(126, 9 - ex));
        const float up = __int_as_float((127 + sh_) << 23);
#pragma unroll
        for (int s = 0; s < KS; s++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float x = qv[s][h].x * up, y = qv[s][h].y * up;
#pragma unroll
                for (int u = 0; u < QP; u++) {
                    qf[u][s][h] = MT::pack(x, y);
                    const float2 b = MT::unpack(qf[u][s][h]);
                    x -= b.x;
                    y -= b.y;
                }
            }
        return __int_as_float((127 - sh_) << 23);
    }

    /* the lane's queries in the C fragments, 2c + e: valid, position, ALiBi slope, score scale */
    struct lq {
        float sce[2], slp[2];
        int   pse[2];
        bool  qok[2];
    };
    __device__ __forceinline__ lq lane_queries(float qdown) const {
        lq q;
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int qi = 2 * c + e, r = r0 + (qi < nqb ? qi : 0);
            q.qok[e] = qi < nqb;
            q.pse[e] = pos0() + r / p.G;
            q.slp[e] = (p.slopes && q.qok[e]) ? p.slopes[gh * p.G + r % p.G] : 0.0f;
            q.sce[e] = p.scale * __shfl_sync(FULL, qdown, qi * 4);
        }
        return q;
    }

    /* until the warp's tile j has landed in its stage */
    __device__ __forceinline__ void wait(int j, int stage) const {
        if constexpr (TMA) {
            const unsigned b = bar(stage), par = (unsigned)((j / NS + (SPEC && stage < drained)) & 1);
            unsigned       done = 0;
            while (!done)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                             : "=r"(done)
                             : "r"(b), "r"(par)
                             : "memory");
        } else {
            neo__cp_async_wait<NS - 1>(); /* this lane's copies of tile j have landed */
            __syncwarp();                 /* and the warp's */
        }
    }

    /* S^T = K . Q^T for the tile at shared address ks: the parts of q in separate chains */
    __device__ __forceinline__ void scores(unsigned ks, const uint32_t (&qf)[QP][KS][2], float (&sp)[QP][4]) const {
#pragma unroll
        for (int u = 0; u < QP; u++) sp[u][0] = sp[u][1] = sp[u][2] = sp[u][3] = 0.0f;
        if constexpr (TMA) {
#pragma unroll
            for (int P = 0; P < KS / 2; P++) {
                uint4 x0, x1; /* rows g and g + 8, chunk 4P + c */
                asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(x0.x), "=r"(x0.y), "=r"(x0.z), "=r"(x0.w)
                             : "r"(ks + (unsigned)((g * CPR + 4 * P + c) * 16)));
                asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(x1.x), "=r"(x1.y), "=r"(x1.z), "=r"(x1.w)
                             : "r"(ks + (unsigned)(((g + 8) * CPR + 4 * P + c) * 16)));
                const uint32_t a0[4] = {x0.x, x1.x, x0.y, x1.y}, a1[4] = {x0.z, x1.z, x0.w, x1.w};
#pragma unroll
                for (int u = 0; u < QP; u++) {
                    MT::mma(sp[u], a0, qf[u][2 * P][0], qf[u][2 * P][1]);
                    MT::mma(sp[u], a1, qf[u][2 * P + 1][0], qf[u][2 * P + 1][1]);
                }
            }
        } else {
            const int      lr = lane & 7, mi = lane >> 3, kb = mi >> 1;
            const unsigned krow = (unsigned)((lr + 8 * (mi & 1)) * CPR * 16);
#pragma unroll
            for (int s = 0; s < KS; s++) {
                uint32_t a[4];
                neo__ldsm4(a, ks + krow + ((unsigned)((2 * s + kb) ^ lr) << 4));
#pragma unroll
                for (int u = 0; u < QP; u++) MT::mma(sp[u], a, qf[u][s][0], qf[u][s][1]);
            }
        }
    }

    /* The online-softmax step: the scores (element x: cell g + 8 (x >> 1), query 2c + (x & 1))
       scaled, soft-capped, ALiBi-biased and masked, the running (m, l) of the lane's two queries
       updated, acc rescaled, pw the weights. Straight-line code: every element's score and exp
       is computed and a masked one's discarded by a select (soft-capping and ALiBi behind tests
       uniform over the launch), so that a lane's four scores and six exps interleave instead of
       running one branch at a time. */
    __device__ __forceinline__ void softmax(const float (&sp)[QP][4], const lq &q, int tile0, int nvalid, float (&m)[2],
                                            float (&l)[2], float (&acc)[KS][4], float (&pw)[4]) const {
        float sv[4];
#pragma unroll
        for (int x = 0; x < 4; x++) {
            float dot = sp[QP - 1][x];
#pragma unroll
            for (int u = QP - 2; u >= 0; u--) dot += sp[u][x]; /* low to high */
            sv[x] = neo__score(q.sce[x & 1], dot);
        }
        if (p.softcap > 0.0f)
#pragma unroll
            for (int x = 0; x < 4; x++) sv[x] = p.softcap * tanhf(sv[x] / p.softcap);
        if (p.slopes)
#pragma unroll
            for (int x = 0; x < 4; x++) sv[x] -= q.slp[x & 1] * (float)(q.pse[x & 1] - (tile0 + g + 8 * (x >> 1)));
#pragma unroll
        for (int x = 0; x < 4; x++) {
            const int e = x & 1, row = g + 8 * (x >> 1);
            sv[x] = q.qok[e] && row < nvalid && tile0 + row <= q.pse[e] ? sv[x] : -INFINITY;
        }
        float t0 = fmaxf(sv[0], sv[2]), t1 = fmaxf(sv[1], sv[3]);
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
            t0 = fmaxf(t0, __shfl_xor_sync(FULL, t0, o));
            t1 = fmaxf(t1, __shfl_xor_sync(FULL, t1, o));
        }
        const float n0 = fmaxf(m[0], t0), n1 = fmaxf(m[1], t1);
        /* no inf - inf: e^0 = 1 where the row has no score yet, e^-inf = 0 for a masked score */
        const float c0 = expf(n0 == -INFINITY ? 0.0f : m[0] - n0), c1 = expf(n1 == -INFINITY ? 0.0f : m[1] - n1);
#pragma unroll
        for (int x = 0; x < 4; x++) pw[x] = expf(sv[x] == -INFINITY ? -INFINITY : sv[x] - ((x & 1) ? n1 : n0));
        l[0] = l[0] * c0 + (pw[0] + pw[2]);
        l[1] = l[1] * c1 + (pw[1] + pw[3]);
        m[0] = n0;
        m[1] = n1;
        if (__any_sync(FULL, c0 != 1.0f || c1 != 1.0f))
#pragma unroll
            for (int t = 0; t < KS; t++) {
                acc[t][0] *= c0;
                acc[t][1] *= c1;
                acc[t][2] *= c0;
                acc[t][3] *= c1;
            }
    }

    /* V^T's A fragments of m-tiles 2P and 2P + 1 of the tile at shared address vs. Bulk path: a
       lane's 16-byte loads of rows g and g + 8 (chunk 4P + c), 8 x 8 blocks (cells) x (dim pairs)
       that pv transposes with movmatrix (neo__mma_dim); ldmatrix path: already transposed. */
    __device__ __forceinline__ void v_frag(unsigned vs, int P, uint32_t (&a0)[4], uint32_t (&a1)[4]) const {
        if constexpr (TMA) {
            asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a0[0]), "=r"(a0[1]), "=r"(a1[0]), "=r"(a1[1])
                         : "r"(vs + (unsigned)((g * CPR + 4 * P + c) * 16)));
            asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a0[2]), "=r"(a0[3]), "=r"(a1[2]), "=r"(a1[3])
                         : "r"(vs + (unsigned)(((g + 8) * CPR + 4 * P + c) * 16)));
        } else {
            const int      lr = lane & 7, mi = lane >> 3, vb = mi & 1;
            const unsigned vrow = vs + (unsigned)((lr + 8 * (mi >> 1)) * CPR * 16);
            neo__ldsm4t(a0, vrow + ((unsigned)((4 * P + vb) ^ lr) << 4));
            neo__ldsm4t(a1, vrow + ((unsigned)((4 * P + 2 + vb) ^ lr) << 4));
        }
    }
    /* Head_dim 64 and 128 read all of a tile's V fragments before the softmax (v_frags), so that
       the shared loads are in flight under its shuffles and exps: pv's masked-tile test would
       otherwise hold them back until the weights are done. Head_dim 256 reads them in pv, pair
       by pair: its 64 registers of V do not fit beside the softmax's without spilling. */
    static constexpr bool VEARLY = D <= 128;
    __device__ __forceinline__ void v_frags(unsigned vs, uint32_t (&va)[KS][4]) const {
#pragma unroll
        for (int P = 0; P < KS / 2; P++) v_frag(vs, P, va[2 * P], va[2 * P + 1]);
    }

    /* O^T += V^T . P^T for the tile at shared address vs (va: its v_frags when VEARLY): the
       weights in a high and a low part */
    __device__ __forceinline__ void pv(unsigned vs, uint32_t (&va)[KS][4], const float (&pw)[4], int tile0, int nvalid,
                                       float (&acc)[KS][4]) const {
        /* P^T's B fragments: the 8 x 8 blocks (cells g, g + 8) x (queries 2c, 2c + 1) transposed */
        uint32_t bh[2], bl[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t hi = MT::pack(pw[2 * h], pw[2 * h + 1]);
            const float2   b = MT::unpack(hi);
            bh[h] = neo__movt(hi);
            bl[h] = neo__movt(MT::pack(pw[2 * h] - b.x, pw[2 * h + 1] - b.y));
        }
        if (tile0 + nvalid - 1 > minpos && neo__mma_v_bad<T, D>(vs, minpos + 1 - tile0, nvalid, lane)) {
            neo__mma_pv_masked<T, D, TMA>(acc, pw, vs, g, c);
        } else {
#pragma unroll
            for (int P = 0; P < KS / 2; P++) {
                if constexpr (!VEARLY) v_frag(vs, P, va[2 * P], va[2 * P + 1]);
#pragma unroll
                for (int t = 2 * P; t < 2 * P + 2; t++) {
                    uint32_t a[4];
#pragma unroll
                    for (int u = 0; u < 4; u++) a[u] = TMA ? neo__movt(va[t][u]) : va[t][u];
                    MT::mma(acc[t], a, bh[0], bh[1]);
                    MT::mma(acc[t], a, bl[0], bl[1]);
                }
            }
        }
    }

    /* The warps' states combined in a fixed order (weights e^(m_w - M) per query) into the block's
       partial: to the stream's work buffer when there are splits and no cluster (then true only
       in the last block of the query tile to arrive, which merges), else into pbuf, with its
       (m, l) in sh (true: one block merges, or, in a cluster, every block takes part). */
    __device__ __forceinline__ bool combine(const float (&acc)[KS][4], const float (&m)[2], const float (&l)[2]) const {
        float *red = reinterpret_cast<float *>(smem); /* [W][8][RS] the warps' acc */
        float *pbuf = red + W * NEO__MMA_NQ * RS;     /* [8][D] the block's partial when S == 1 or clustered */
#pragma unroll
        for (int t = 0; t < KS; t++) {
            const int d0 = neo__mma_dim<TMA>(t, g, 0), d8 = neo__mma_dim<TMA>(t, g, 1);
            float    *r = red + (warp * NEO__MMA_NQ + 2 * c) * RS;
            r[d0] = acc[t][0];
            r[RS + d0] = acc[t][1];
            r[d8] = acc[t][2];
            r[RS + d8] = acc[t][3];
        }
        if (g == 0) {
            sh.wm[warp][2 * c] = m[0];
            sh.wm[warp][2 * c + 1] = m[1];
            sh.wl[warp][2 * c] = l[0];
            sh.wl[warp][2 * c + 1] = l[1];
        }
        __syncthreads();
        if (tid < W * NEO__MMA_NQ) { /* the weight of warp w for query i */
            const int w = tid / NEO__MMA_NQ, i = tid % NEO__MMA_NQ;
            float     M = -INFINITY;
#pragma unroll
            for (int u = 0; u < W; u++) M = fmaxf(M, sh.wm[u][i]);
            sh.ww[w][i] = sh.wm[w][i] == -INFINITY ? 0.0f : expf(sh.wm[w][i] - M);
            if (w == 0) sh.m[i] = M;
        }
        __syncthreads();
        if (tid < NEO__MMA_NQ) {
            float L = 0.0f;
#pragma unroll
            for (int w = 0; w < W; w++) L = fmaf(sh.ww[w][tid], sh.wl[w][tid], L);
            sh.l[tid] = L;
        }
        const size_t part0 = (size_t)unit * S * NEO__MMA_NQ; /* (unit, split 0, query 0) */
        for (int f = tid; f < nqb * D; f += NT) {
            const int i = f / D, col = f % D;
            float     a = 0.0f;
#pragma unroll
            for (int w = 0; w < W; w++) a = fmaf(sh.ww[w][i], red[(w * NEO__MMA_NQ + i) * RS + col], a);
            if (S > 1 && !clustered()) __stcg(p.work + (part0 + (size_t)split * NEO__MMA_NQ + i) * D + col, a);
            else pbuf[i * D + col] = a;
        }
        if (S == 1 || clustered()) {
            __syncthreads(); /* sh.l and pbuf are read by the merge */
            return true;
        }
        if (tid < nqb) /* sh.l[tid] is this thread's */
            __stcg(reinterpret_cast<float2 *>(p.work_ml + (part0 + (size_t)split * NEO__MMA_NQ + tid) * 2), make_float2(sh.m[tid], sh.l[tid]));
        /* one release by one thread after the barrier publishes the whole block's partial (it is
           cumulative), and its acquire makes the other blocks' partials visible to the last one */
        __syncthreads();
        if (tid == 0) {
            unsigned prev;
            asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(p.cnt + unit) : "memory");
            sh.last = prev == (unsigned)(S - 1);
            if (sh.last) p.cnt[unit] = 0u; /* every block of this launch has counted; the next launch is ordered after this one */
        }
        __syncthreads();
        return sh.last != 0;
    }

    /* The merge of the query tile's S partials (and the previous state), one warp a query:
       neo__merge_weights, every read of the partials issued before any is needed (the (m, l) of
       the warp's query into registers, the first PF partials of the thread's first column). */
    static constexpr int PF = 16;
    __device__ __forceinline__ void merge() const {
        constexpr int SPL = NEO__CU_MAX_SPLITS / 32;
        float        *s_w = reinterpret_cast<float *>(smem) + W * NEO__MMA_NQ * RS + NEO__MMA_NQ * D; /* [8][MAX_SPLITS] */
        const size_t  part0 = (size_t)unit * S * NEO__MMA_NQ;
        float2        ml[SPL];
        auto          load_ml = [&](int i) {
#pragma unroll
            for (int u = 0; u < SPL; u++) {
                const int s = lane + 32 * u;
                ml[u] = s >= S  ? make_float2(-INFINITY, 0.0f)
                        : S > 1 ? __ldcg(reinterpret_cast<const float2 *>(p.work_ml + (part0 + (size_t)s * NEO__MMA_NQ + i) * 2))
                                : make_float2(sh.m[i], sh.l[i]);
            }
        };
        if (warp < nqb) load_ml(warp);
        float4 pf[PF];
#pragma unroll
        for (int u = 0; u < PF; u++) pf[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        /* behind one uniform branch and a compare a split, not a select each: so compiled, a short
           call's chain is shorter (docs/BENCHMARKS.md, "The merge's loads on an H200") */
        if (S > 1) {
            const int    f = tid < nqb * NC ? tid : 0, i = f / NC, col = 4 * (f % NC);
            const float *src = p.work + (part0 + i) * D + col;
#pragma unroll
            for (int u = 0; u < PF; u++)
                if (u < S) pf[u] = __ldcg(reinterpret_cast<const float4 *>(src + (size_t)u * NEO__MMA_NQ * D));
        }
        const bool sink = p.out != NULL && p.sinks;
        for (int i = warp; i < nqb; i += W) {
            if (i != warp) load_ml(i);
            const int r = r0 + i, hq = gh * p.G + r % p.G;
            float    *stp = p.state ? p.state + ((size_t)(r / p.G) * p.n_head + hq) * (D + 2) : NULL;
            const float4 f = neo__merge_weights([&](int u) { return ml[u]; }, S, lane, p.accumulate ? stp[0] : -INFINITY,
                                                p.accumulate ? stp[1] : 0.0f, sink, sink ? p.sinks[hq] : 0.0f, s_w + i * NEO__CU_MAX_SPLITS);
            if (lane == 0) {
                sh.fin[i][0] = f.x;
                sh.fin[i][1] = f.y;
                sh.fin[i][2] = f.z;
                sh.fin[i][3] = f.w;
            }
        }
        __syncthreads(); /* also: every read of a state's (m, l) above happens before the writes below */
        for (int f = tid; f < nqb * NC; f += NT) finish(f, f == tid, pf, s_w);
    }

    /* columns 4 (f % NC) .. + 3 of query f / NC: the weighted sum of the partials (the
       prefetched ones first when first), then the state or the finished output */
    __device__ __forceinline__ void finish(int f, bool first, const float4 (&pf)[PF], const float *s_w) const {
        const int    i = f / NC, col = 4 * (f % NC);
        const float *wv = s_w + i * NEO__CU_MAX_SPLITS;
        const float *pbuf = reinterpret_cast<const float *>(smem) + W * NEO__MMA_NQ * RS;
        float4       a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (S > 1) {
            const float *src = p.work + ((size_t)unit * S * NEO__MMA_NQ + i) * D + col;
            int          s = 0;
            if (first) {
#pragma unroll
                for (int u = 0; u < PF; u++)
                    if (u < S) neo__fma4(a, wv[u], pf[u]);
                s = min(S, PF);
            }
#pragma unroll 8
            for (; s < S; s++) {
                neo__fma4(a, wv[s], __ldcg(reinterpret_cast<const float4 *>(src + (size_t)s * NEO__MMA_NQ * D)));
            }
        } else {
            const float4 v = *reinterpret_cast<const float4 *>(pbuf + i * D + col);
            const float  w = wv[0];
            a = make_float4(w * v.x, w * v.y, w * v.z, w * v.w);
        }
        put(i, col, a, true);
    }

    /* a = the weighted sum of columns col .. col + 3 of query i: into the state (continuing it
       when accumulating) or finished into out; with ml also the state's (m, l) */
    __device__ __forceinline__ void put(int i, int col, float4 a, bool ml) const {
        const int   r = r0 + i, hq = gh * p.G + r % p.G;
        float      *stp = p.state ? p.state + ((size_t)(r / p.G) * p.n_head + hq) * (D + 2) : NULL;
        float      *o = p.out ? p.out + ((size_t)(r / p.G) * p.n_head + hq) * D : NULL;
        const float wprev = sh.fin[i][0], den = sh.fin[i][3];
        float       av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (p.accumulate) av[k] = fmaf(wprev, stp[2 + col + k], av[k]);
            if (o) o[col + k] = neo__finish(av[k], den);
            else stp[2 + col + k] = av[k];
        }
        if (ml && !o && col == 0) {
            stp[0] = sh.fin[i][1];
            stp[1] = sh.fin[i][2];
        }
    }

    /* The merge of a cluster's S partials (p.cl), each in its block's shared memory (pbuf, sh.m,
       sh.l): every block weighs the splits of every query as merge() does, reading the others'
       (m, l) through distributed shared memory, then finishes its own S-th of the query tile's
       column groups, summing the partials in split order (so the bits are those of merge() with
       the same S). The second cluster barrier keeps each block's shared memory alive until the
       others have read it, and holds the state's (m, l) writes back until every block has read
       the previous ones. */
    __device__ __forceinline__ void merge_cluster() const {
#if __CUDA_ARCH__ >= 900
        constexpr int SPL = NEO__CU_MAX_SPLITS / 32;
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        float            *pbuf = reinterpret_cast<float *>(smem) + W * NEO__MMA_NQ * RS; /* [8][D] */
        float            *s_w = pbuf + NEO__MMA_NQ * D;                                  /* [8][MAX_SPLITS] */
        cl.sync(); /* every block's partial is in its shared memory */
        const bool sink = p.out != NULL && p.sinks;
        for (int i = warp; i < nqb; i += W) {
            float2 ml[SPL]; /* the splits' (m, l) of query i, from their blocks */
#pragma unroll
            for (int u = 0; u < SPL; u++) {
                const int s = lane + 32 * u;
                ml[u] = s < S ? make_float2(*cl.map_shared_rank(&sh.m[i], (unsigned)s), *cl.map_shared_rank(&sh.l[i], (unsigned)s))
                              : make_float2(-INFINITY, 0.0f);
            }
            const int    r = r0 + i, hq = gh * p.G + r % p.G;
            const float *prev = p.accumulate ? p.state + ((size_t)(r / p.G) * p.n_head + hq) * (D + 2) : NULL; /* (m, l) continued */
            const float4 f = neo__merge_weights([&](int u) { return ml[u]; }, S, lane, prev ? prev[0] : -INFINITY, prev ? prev[1] : 0.0f,
                                                sink, sink ? p.sinks[hq] : 0.0f, s_w + i * NEO__CU_MAX_SPLITS);
            if (lane == 0) sh.fin[i][0] = f.x, sh.fin[i][1] = f.y, sh.fin[i][2] = f.z, sh.fin[i][3] = f.w;
        }
        __syncthreads();
        const int per = (nqb * NC + S - 1) / S, f0 = split * per, f1 = min(nqb * NC, f0 + per);
        for (int f = f0 + tid; f < f1; f += NT) {
            const int    i = f / NC, col = 4 * (f % NC);
            const float *wv = s_w + i * NEO__CU_MAX_SPLITS;
            float4       v[NEO__CU_MAX_CLUSTER], a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int u = 0; u < NEO__CU_MAX_CLUSTER; u++)
                if (u < S) v[u] = *reinterpret_cast<const float4 *>(cl.map_shared_rank(pbuf + i * D + col, (unsigned)u));
#pragma unroll
            for (int u = 0; u < NEO__CU_MAX_CLUSTER; u++)
                if (u < S) neo__fma4(a, wv[u], v[u]);
            put(i, col, a, false);
        }
        cl.sync();
        for (int f = f0 + tid; f < f1; f += NT)
            if (f % NC == 0 && !p.out) {
                const int i = f / NC, r = r0 + i, hq = gh * p.G + r % p.G;
                float    *stp = p.state + ((size_t)(r / p.G) * p.n_head + hq) * (D + 2);
                stp[0] = sh.fin[i][1];
                stp[1] = sh.fin[i][2];
            }
#else
        __trap(); /* the host clusters only sm_90 images (neo__cu_cluster) */
#endif
    }
};

/* grid (H * QT, S), W warps: one block per (KV head, tile of 8 queries, split). Warp w streams
   the split's 16-cell tiles w, w + W, .. through its own ring and keeps its own online softmax.
   At the end the warps are combined in a fixed order; with one split the block finishes the
   queries itself, otherwise it writes its partial, and the last of the S blocks of the query
   tile to arrive (a counter per tile, reset by that block) merges the S partials in split order
   and finishes: so the result does not depend on which block came last. Built with CL and
   launched as clusters (p.cl), the S blocks merge together instead (merge_cluster). */
template <typename T, int D, int BPS, bool LEN, bool CL> __device__ __forceinline__ void neo__mma_run(const neo__cu_attn &p, int unit, int split) {
    typedef neo__mma<T, D, BPS, LEN, CL> K;
    extern __shared__ uint4 neo__smem[];
    __shared__ __align__(8) typename K::SH sh;
    K k(p, unit, split, neo__smem, sh);
    k.start();
    int len = 0;
    if constexpr (K::SPEC) len = *p.len; /* requested beside q, used after it */
    float2         qv[K::KS][2];
    k.q_load(qv);
    k.rest(); /* issued behind q's loads, before q is needed */
    uint32_t       qf[K::QP][K::KS][2];
    const float    qdown = k.q_frags(qv, qf);
    if constexpr (K::SPEC) k.settle(len);
    const auto     q = k.lane_queries(qdown);
    float          m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, acc[K::KS][4];
#pragma unroll
    for (int t = 0; t < K::KS; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
    for (int j = 0; j < k.nw; j++) {
        const int      stage = j % K::NS, tile0 = k.cb0 + (k.warp + j * K::W) * 16, nvalid = min(16, k.cb1 - tile0);
        const unsigned ks = k.ring_s + (unsigned)(stage * 2 * K::TB);
        float          sp[K::QP][4], pw[4];
        k.wait(j, stage);
        k.scores(ks, qf, sp);
        uint32_t       va[K::KS][4];
        if constexpr (K::VEARLY) k.v_frags(ks + K::TB, va);
        k.softmax(sp, q, tile0, nvalid, m, l, acc, pw);
        k.pv(ks + K::TB, va, pw, tile0, nvalid, acc);
        __syncwarp(); /* every lane is done with the stage: refill it */
        if (j + K::NS < k.nw) k.load(j + K::NS, stage);
        if constexpr (!K::TMA) neo__cp_async_commit();
    }
    if constexpr (!K::TMA) neo__cp_async_wait<0>();
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
        l[0] += __shfl_xor_sync(K::FULL, l[0], o);
        l[1] += __shfl_xor_sync(K::FULL, l[1], o);
    }
    __syncthreads(); /* every warp is done with its ring: they become the epilogue's buffers */
    if constexpr (!K::EARLY) neo__pdl_trigger(); /* the next kernel waits for this grid's completion before touching memory */
    if (k.combine(acc, m, l)) {
        if (k.clustered()) k.merge_cluster();
        else k.merge();
    }
}
template <typename T, int D, int BPS, bool LEN>
__global__ void __launch_bounds__(neo__mma_cfg<D, BPS>::W * 32, BPS) neo__attn_mma(const neo__cu_attn p) {
    neo__mma_run<T, D, BPS, LEN, !LEN>(p, blockIdx.x, blockIdx.y); /* an attend with len never clusters */
}
/* A batch (neo__cu_batch): the block's entry found, its parameters copied to shared memory (the
   kernel's asm barriers would make the compiler reload global ones on every tile), then the
   block (unit, split) of that entry's own grid as one launch of neo__attn_mma would run it. The
   parameters go after the rings, in dynamic shared memory: as a static variable they would move
   the rings' start, and the rings stream markedly slower from some starts than from the one the
   single-attend kernel has. With LEN every entry reads its own length (a captured batch: each
   entry's splits are fixed, their chunk follows the length); never a cluster. */
template <typename T, int D, int BPS, bool LEN>
__global__ void __launch_bounds__(neo__mma_cfg<D, BPS>::W * 32, BPS) neo__attn_mma_batch(const neo__cu_batch t) {
    extern __shared__ uint4 neo__smem[];
    neo__cu_attn           *p = reinterpret_cast<neo__cu_attn *>(neo__smem + neo__mma_cfg<D, BPS>::SMEM / 16);
    int                     x, y;
    neo__batch_block(t, p, &x, &y);
    neo__mma_run<T, D, BPS, LEN, false>(*p, x, y);
}

/* =============================================================================================
   >>kv  append: new K and V rows, rounded to the storage type
   ============================================================================================= */
struct neo__cu_app {
    void        *k, *v;     /* [stored heads][kv_cells][d or dv] of T */
    void        *k2, *v2;   /* or NULL: heads from h2 on go here (pinned host memory, a split layer's host half) */
    int          h2;
    const float *src_k;     /* [n_tokens][n_head_kv][d] */
    const float *src_v;     /* [n_tokens][n_head_kv][dv] */
    int          kv_cells, kv_h0, h0, nh, n_head_kv, d, dv;
    int          row0;      /* row of the launch's token 0, or -1: row len[0] + t0 (captured) */
    int         *len;       /* device [3] (neo__append_args.len) or NULL */
    int          t0, n_all; /* the launch's first token in the append, and the append's tokens */
    int          len_to;    /* >= 0: len[0] = len_to once the rows are written (row0 >= 0) */
    int          advance;   /* row0 = -1, the append's last launch: its last block moves len */
    int          type;      /* the storage type T, NEO_TYPE_* (read by the kernels that take several) */
};

/* Block (bx, by) of the nblk blocks of an append's launch (bx: token x head, by: K or V) writes
   one row. Captured (row0 = -1): every block reads len[0] and writes nothing when the append's
   n_all rows do not fit after it. In the append's last launch (advance) each block then counts
   itself in len[2], after its threads' reads of len[0], and the last to arrive moves the length
   on by n_all, or raises the full flag len[1] when the rows did not fit, and sets the count back
   to 0: so len[0] changes only once every block has read it. */
template <typename T> __device__ __forceinline__ void neo__append_block(const neo__cu_app &a, unsigned bx, unsigned by, unsigned nblk) {
    int  row0 = a.row0, L = 0;
    bool fits = true;
    if (row0 < 0) {
        L = *a.len;
        fits = L >= 0 && L <= a.kv_cells - a.n_all;
        row0 = L + a.t0;
    }
    if (fits) {
        const int    t = (int)bx / a.nh, h = a.h0 + (int)bx % a.nh, isv = (int)by, dim = isv ? a.dv : a.d;
        const bool   second = a.k2 && h >= a.h2;
        const float *src = (isv ? a.src_v : a.src_k) + ((size_t)t * a.n_head_kv + h) * dim;
        T *base = static_cast<T *>(second ? (isv ? a.v2 : a.k2) : (isv ? a.v : a.k));
        T *dst = base + ((size_t)(h - (second ? a.h2 : a.kv_h0)) * a.kv_cells + (size_t)row0 + t) * dim;
        for (int j = threadIdx.x; j < dim; j += blockDim.x) dst[j] = neo__kvt<T>::st(src[j]);
    }
    if (a.len_to >= 0 && bx == 0 && by == 0 && threadIdx.x == 0) a.len[0] = a.len_to;
    if (!a.advance) return;
    __syncthreads(); /* every thread of the block has read len[0] */
    if (threadIdx.x == 0) {
        unsigned prev;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(a.len + 2) : "memory");
        if (prev == nblk - 1) {
            a.len[2] = 0;
            if (fits) a.len[0] = L + a.n_all;
            else a.len[1] = 1;
        }
    }
}
template <typename T> __global__ void __launch_bounds__(128) neo__append_kernel(const neo__cu_app a) {
    neo__append_block<T>(a, blockIdx.x, blockIdx.y, gridDim.x * gridDim.y);
}
/* A batch of appends in one launch (neo__cu_append_batch): entry i (tab[i], in device memory) owns
   blocks [start[i], start[i + 1]) x (K, V), found by bisection, and runs them as its own launch
   would, in its own storage type. */
__global__ void __launch_bounds__(128) neo__append_batch_kernel(const neo__cu_app *tab, const int *start, int n) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (start[mid] <= (int)blockIdx.x) lo = mid;
        else hi = mid - 1;
    }
    const neo__cu_app a = tab[lo];
    const unsigned    bx = blockIdx.x - (unsigned)start[lo], nblk = 2u * (unsigned)(start[lo + 1] - start[lo]);
    if (a.type == NEO_TYPE_F16) neo__append_block<__half>(a, bx, blockIdx.y, nblk);
    else if (a.type == NEO_TYPE_BF16) neo__append_block<__nv_bfloat16>(a, bx, blockIdx.y, nblk);
    else neo__append_block<float>(a, bx, blockIdx.y, nblk);
}
__global__ void __launch_bounds__(1) neo__set_length_kernel(int *len, int value) {
    len[0] = value;
    len[1] = 0;
    len[2] = 0;
}

/* =============================================================================================
   >>model  the decode loop's kernels: projections with their epilogues (neo__matvec_kernel), argmax
   ============================================================================================= */

/* The decode loop's projections (neo__matvec_args). A unit is what one epilogue needs: a row
   (STORE, ADD), the rows i of w and w_mul (SWIGLU) or a pair of rows (ROPE). R warps share a unit,
   each a slice of n (float4 loads when aligned), so that a short, wide matrix (w2: 896 rows of
   4864) still puts thousands of warps in flight; the R partial sums add up in warp order. With a
   norm the dot products run over norm * x and are scaled by run.c's 1 / rms(x) at the end (the
   same value mathematically): the unit's warps read all of x anyway, so they sum its squares on
   the way, and no block waits for a reduction before its first load. Every unit sums in the same
   order, so every row gets the same scale. */
struct neo__cu_mv {
    float       *y;        /* [d] */
    const float *w, *w_mul; /* [d][n] each (w_mul: SWIGLU only) */
    const float *x, *norm; /* [n], [n] or NULL */
    int          n;
    int          units;    /* d, or d / 2 for ROPE */
    int          R;        /* warps a unit: 1, 2, 4 or 8 */
    int          vec;      /* 1 = every row, x and norm 16-byte aligned (n % 4 == 0) */
    int          pos, rope_q, rope_k, head_size;
    const int   *pos_dev;  /* or NULL: the position, read in the epilogue (after the dependency wait) */
    /* app_on: ROPE with an append (neo__matvec_args.app, one token): the k and v pairs also stored
       into the cache app describes (src unused), in its storage type app.type */
    neo__cu_app  app;
    int          app_on;
};

#define NEO__CU_MV_BATCH 8 /* float4 weight loads a lane has in flight (per unit; rows share them) */

/* A lane's weight loads go out in batches of NEO__CU_MV_BATCH float4s before the first is used
   (a loop of one float4 an iteration, unrolled by 4 behind its remainder, left a unit's slice
   coming in as several DRAM round trips in series). */
template <int ROWS> struct neo__mv_batch {
    static constexpr int U = NEO__CU_MV_BATCH / ROWS;
    float4               w[ROWS][U];
    /* float4s i0, i0 + 32, .. of each row, zeros from b on */
    __device__ __forceinline__ void load(const float *const (&wr)[2], int i0, int b) {
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int k = 0; k < ROWS; k++)
                w[k][u] = i0 + 32 * u < b ? __ldg(reinterpret_cast<const float4 *>(wr[k]) + i0 + 32 * u) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
};

/* s[k] += row k of the unit . (norm * x), ss += x . x, over float4s or floats [a, b); with vec,
   wb holds the lane's first batch already. The sums keep the lane's order, so the bits are
   those of a loop one float4 at a time. */
template <int ROWS, bool NORM>
__device__ __forceinline__ void neo__mv_dot(float (&s)[2], float &ss, neo__mv_batch<ROWS> &wb, const float *const (&wr)[2],
                                            const float *x, const float *nw, int a, int b, int vec, int lane) {
    if (vec) {
        constexpr int U = neo__mv_batch<ROWS>::U;
        const float4 *x4 = reinterpret_cast<const float4 *>(x), *n4 = reinterpret_cast<const float4 *>(nw);
        for (int i0 = a + lane; i0 < b; i0 += 32 * U) {
            if (i0 != a + lane) wb.load(wr, i0, b);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int i = i0 + 32 * u;
                if (i >= b) break;
                float4 xv = __ldg(x4 + i);
                if (NORM) {
                    const float4 nv = __ldg(n4 + i);
                    ss = fmaf(xv.x, xv.x, ss);
                    ss = fmaf(xv.y, xv.y, ss);
                    ss = fmaf(xv.z, xv.z, ss);
                    ss = fmaf(xv.w, xv.w, ss);
                    xv = make_float4(nv.x * xv.x, nv.y * xv.y, nv.z * xv.z, nv.w * xv.w);
                }
#pragma unroll
                for (int k = 0; k < ROWS; k++) {
                    s[k] = fmaf(wb.w[k][u].x, xv.x, s[k]);
                    s[k] = fmaf(wb.w[k][u].y, xv.y, s[k]);
                    s[k] = fmaf(wb.w[k][u].z, xv.z, s[k]);
                    s[k] = fmaf(wb.w[k][u].w, xv.w, s[k]);
                }
            }
        }
    } else {
#pragma unroll 4
        for (int i = a + lane; i < b; i += 32) {
            float xv = __ldg(x + i);
            if (NORM) {
                ss = fmaf(xv, xv, ss);
                xv *= __ldg(nw + i);
            }
#pragma unroll
            for (int k = 0; k < ROWS; k++) s[k] = fmaf(__ldg(wr[k] + i), xv, s[k]);
        }
    }
}

/* The cache row of the appended token (a.row0, or len[0] when -1) and whether it fits. */
__device__ __forceinline__ int neo__mv_app_row(const neo__cu_app &p, bool *fits) {
    if (p.row0 >= 0) {
        *fits = true;
        return p.row0;
    }
    const int L = *p.len;
    *fits = L >= 0 && L <= p.kv_cells - 1;
    return L;
}

/* The pair of k or v elements (v0, v1) at rows r0, r0 + 1 of y past the queries (i: its index
   there) into the appended token's cache row, in the cache's type, rounded as the append kernel
   rounds. */
template <typename T> __device__ __forceinline__ void neo__mv_app_store(const neo__cu_app &p, int i, int row, float v0, float v1) {
    const bool isv = i >= p.nh * p.d;
    const int  dim = isv ? p.dv : p.d, j = isv ? i - p.nh * p.d : i, h = j / dim, c = j % dim;
    const bool second = p.k2 && h >= p.h2;
    T         *base = static_cast<T *>(second ? (isv ? p.v2 : p.k2) : (isv ? p.v : p.k));
    T         *dst = base + ((size_t)(h - (second ? p.h2 : 0)) * p.kv_cells + (size_t)row) * dim + c;
    dst[0] = neo__kvt<T>::st(v0);
    dst[1] = neo__kvt<T>::st(v1);
}

/* After a block's epilogues: as the append kernel's last launch, the block counts itself in
   len[2] once its threads have read len[0] (for the row and for RoPE's position), and the last
   block moves the length on by one, or raises the full flag; with a row given, block 0 stores
   len_to. */
__device__ __forceinline__ void neo__mv_app_done(const neo__cu_app &p) {
    if (p.len_to >= 0) {
        if (blockIdx.x == 0 && threadIdx.x == 0) p.len[0] = p.len_to;
        return;
    }
    if (!p.advance) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        const int L = *p.len;
        unsigned  prev;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(p.len + 2) : "memory");
        if (prev == gridDim.x - 1) {
            p.len[2] = 0;
            if (L >= 0 && L <= p.kv_cells - 1) p.len[0] = L + 1;
            else p.len[1] = 1;
        }
    }
}

/* One unit's epilogue (the lane that holds its sums): s[0..1] the rows' dot products, s[2] x . x. */
template <int EPI, bool NORM> __device__ __forceinline__ void neo__mv_epilogue(const neo__cu_mv &a, int u, float (&s)[3]) {
    if (NORM) { /* run.c's rmsnorm scale, 1 / sqrt(x . x / n + 1e-5) */
        const float r = 1.0f / sqrtf(s[2] / (float)a.n + 1e-5f);
        s[0] *= r;
        s[1] *= r;
    }
    if (EPI == NEO__MV_STORE) a.y[u] = s[0];
    else if (EPI == NEO__MV_ADD) a.y[u] += s[0];
    else if (EPI == NEO__MV_SWIGLU) { /* run.c's order: silu first, then the product */
        float v = s[0];
        v *= (1.0f / (1.0f + expf(-v)));
        v *= s[1];
        a.y[u] = v;
    } else { /* RoPE as run.c: the power goes through double and is rounded once, to match a
                correctly rounded powf (glibc's) rather than CUDA's 2-ulp powf: at pos ~ 1e4 one
                ulp of the frequency turns the angle by ~1e-3 */
        const int r0 = 2 * u;
        float     v0 = s[0], v1 = s[1];
        if (r0 < a.rope_q + a.rope_k) {
            const int   i = r0 < a.rope_q ? r0 : r0 - a.rope_q, hd = i % a.head_size;
            const float freq = 1.0f / (float)pow(10000.0, (double)(hd / (float)a.head_size));
            const float val = (a.pos_dev ? *a.pos_dev : a.pos) * freq, fcr = cosf(val), fci = sinf(val);
            const float t0 = v0 * fcr - v1 * fci;
            v1 = v0 * fci + v1 * fcr;
            v0 = t0;
        }
        a.y[r0] = v0;
        a.y[r0 + 1] = v1;
        if (a.app_on && r0 >= a.rope_q) {
            bool      fits;
            const int row = neo__mv_app_row(a.app, &fits), i = r0 - a.rope_q;
            if (!fits) return;
            if (a.app.type == NEO_TYPE_F16) neo__mv_app_store<__half>(a.app, i, row, v0, v1);
            else if (a.app.type == NEO_TYPE_BF16) neo__mv_app_store<__nv_bfloat16>(a.app, i, row, v0, v1);
            else neo__mv_app_store<float>(a.app, i, row, v0, v1);
        }
    }
}

template <int EPI, bool NORM> __global__ void __launch_bounds__(256) neo__matvec_kernel(const neo__cu_mv a) {
    constexpr int ROWS = EPI == NEO__MV_SWIGLU || EPI == NEO__MV_ROPE ? 2 : 1;
    __shared__ float s_part[8][3];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, per = 8 / a.R;
    const int u = blockIdx.x * per + warp / a.R, part = warp % a.R;
    float     s[3] = {0.0f, 0.0f, 0.0f}; /* the rows' sums, then x . x */
    const size_t row0 = u >= a.units ? 0 : EPI == NEO__MV_ROPE ? 2 * (size_t)u : (size_t)u;
    const float *const wr[2] = {a.w + row0 * a.n, EPI == NEO__MV_SWIGLU ? a.w_mul + row0 * a.n : a.w + (row0 + 1) * a.n};
    const int len = a.vec ? a.n >> 2 : a.n, lo = (int)((long long)len * part / a.R), hi = (int)((long long)len * (part + 1) / a.R);
    /* Launched as a programmatic dependent: this grid may start while the kernel before it (the
       last projection, say) still runs. The weights never depend on it, so the lane's first
       batch of them is loaded and the rest of the warp's slice asked into L2 now, overlapping
       that kernel's tail; x, norm, y, the position and the appended token's cache row and
       length only after the wait. The next kernel may start as soon as every block of this one
       is here. */
    neo__mv_batch<ROWS> wb;
    if (u < a.units && a.vec) wb.load(wr, lo + lane, hi);
    if (u < a.units) {
        /* past the first batch: the warp's loads have asked for float4s [lo, lo + 32 U) already */
        const int    from = a.vec ? lo + 32 * neo__mv_batch<ROWS>::U : lo;
        const char  *b0 = reinterpret_cast<const char *>(wr[0]), *b1 = reinterpret_cast<const char *>(wr[1]);
        const size_t e = a.vec ? 16 : 4, o0 = (size_t)from * e & ~(size_t)127, o1 = (size_t)hi * e;
        for (size_t o = o0 + (size_t)lane * 128; o < o1; o += 32 * 128) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(b0 + o));
            if (ROWS == 2) asm volatile("prefetch.global.L2 [%0];" ::"l"(b1 + o));
        }
    }
    neo__pdl_trigger();
    neo__pdl_wait();
    if (u < a.units) {
        float two[2] = {0.0f, 0.0f};
        neo__mv_dot<ROWS, NORM>(two, s[2], wb, wr, a.x, a.norm, lo, hi, a.vec, lane);
        s[0] = neo__warp_sum(two[0]);
        if (ROWS == 2) s[1] = neo__warp_sum(two[1]);
        if (NORM) s[2] = neo__warp_sum(s[2]);
    }
    if (a.R > 1) {
        if (lane == 0) s_part[warp][0] = s[0], s_part[warp][1] = s[1], s_part[warp][2] = s[2];
        __syncthreads();
        if (part == 0 && lane == 0)
            for (int k = 0; k < 3; k++) {
                float t = s_part[warp][k];
                for (int p = 1; p < a.R; p++) t += s_part[warp + p][k];
                s[k] = t;
            }
    }
    if (u < a.units && part == 0 && lane == 0) neo__mv_epilogue<EPI, NORM>(a, u, s);
    if (EPI == NEO__MV_ROPE && a.app_on) neo__mv_app_done(a.app);
}

/* llama2.c's argmax: the lowest index of the largest x[n]; NaN never wins, 0 when nothing beats
   -inf. One block: each thread scans a stride keeping its first best (its indices rise), then
   (value, index) pairs reduce, the larger value winning and the lower index breaking ties. */
__device__ __forceinline__ void neo__argmax_pick(float &v, int &i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
}
__global__ void __launch_bounds__(1024) neo__argmax_kernel(int *out, const float *x, int n) {
    __shared__ float s_v[32];
    __shared__ int   s_i[32];
    float best = -INFINITY;
    int   idx = INT_MAX;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (x[i] > best) best = x[i], idx = i;
    for (int o = 16; o > 0; o >>= 1)
        neo__argmax_pick(best, idx, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, idx, o));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) s_v[warp] = best, s_i[warp] = idx;
    __syncthreads();
    if (warp == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        best = lane < nw ? s_v[lane] : -INFINITY;
        idx = lane < nw ? s_i[lane] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1)
            neo__argmax_pick(best, idx, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, idx, o));
        if (lane == 0) *out = idx == INT_MAX ? 0 : idx;
    }
}

/* =============================================================================================
   >>handoff  the both-halves handoff's copy kernels, synchronised through flags in host memory
   ============================================================================================= */

/* The both-halves handoff: the host half's queries go down to pinned memory and a flag follows
   them (!AWAIT), or the kernel waits for the host's flag and pulls the host half's output up
   (AWAIT). The flag is polled over PCIe, so no host call is needed once both are enqueued. */
static __device__ unsigned neo__ld_acquire_sys(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ void neo__st_release_sys(unsigned *p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/* Rows of w floats from src (every sp) to dst (every dp) by the block: side by side, wpr warps a
   row (all of them for one row), so that a batch's many rows cost a few round trips over PCIe,
   not one each. CV: src is pinned host memory the host rewrote since the last call (.cv loads). */
template <bool CV>
__device__ __forceinline__ void neo__rows_copy(float *__restrict__ dst, size_t dp, const float *__restrict__ src, size_t sp, size_t w,
                                               size_t rows) {
    const unsigned nw = blockDim.x / 32, warp = threadIdx.x / 32, wpr = rows >= nw || !rows ? 1 : nw / (unsigned)rows;
    const unsigned tpr = wpr * 32, t = (warp % wpr) * 32 + (threadIdx.x & 31);
    for (size_t r = warp / wpr; r < rows; r += nw / wpr) {
        const float *s = src + r * sp;
        float       *d = dst + r * dp;
        for (size_t c0 = t; c0 < w; c0 += 8 * (size_t)tpr) {
            float v[8];
#pragma unroll
            for (int k = 0; k < 8; k++) { /* all eight loads issued before any store: one round trip */
                const size_t c = c0 + (size_t)k * tpr;
                v[k] = c < w ? (CV ? __ldcv(s + c) : s[c]) : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const size_t c = c0 + (size_t)k * tpr;
                if (c < w) d[c] = v[k];
            }
        }
    }
}

template <bool AWAIT>
__global__ void __launch_bounds__(1024) neo__handoff_kernel(float *__restrict__ dst, size_t dp, const float *__restrict__ src,
                                                            size_t sp, size_t w, size_t rows, unsigned *flag, unsigned seq) {
    /* The next kernel, if launched as a programmatic dependent (a projection, attention), may
       start now: it fetches what does not depend on this copy (its weights, its first KV tiles)
       while this one waits on the other side, and reads the copy only after its own wait. */
    neo__pdl_trigger();
    if (AWAIT) {
        if (threadIdx.x == 0)
            while (neo__ld_acquire_sys(flag) != seq) {}
        __syncthreads();
    }
    neo__rows_copy<AWAIT>(dst, dp, src, sp, w, rows);
    if (!AWAIT) {
        __threadfence_system(); /* each thread's rows reach host memory before the flag */
        __syncthreads();
        if (threadIdx.x == 0) neo__st_release_sys(flag, seq);
    }
}

/* The handoff inside a graph (neo__dev_attn.ring / answer): the replay's number is the bell's
   own count, which only these kernels write, in stream order. RING: count + 1, the rows, the
   length, then the ring once all of it is visible to the host. ANSWER: waits for the host's
   answer to this count, then the rows. */
template <bool RING>
__global__ void __launch_bounds__(1024) neo__bell_kernel(float *__restrict__ dst, size_t dp, const float *__restrict__ src, size_t sp,
                                                         size_t w, size_t rows, unsigned *bell, const int *len) {
    __shared__ unsigned s_seq;
    neo__pdl_trigger();
    if (threadIdx.x == 0) {
        const unsigned seq = neo__ld_acquire_sys(bell + NEO__BELL_SEQ) + (RING ? 1u : 0u);
        if (!RING)
            while (neo__ld_acquire_sys(bell + NEO__BELL_DONE) != seq) {}
        s_seq = seq;
    }
    __syncthreads();
    neo__rows_copy<!RING>(dst, dp, src, sp, w, rows);
    if (RING) {
        if (threadIdx.x == 0) bell[NEO__BELL_LEN] = (unsigned)*len;
        __threadfence_system(); /* the rows and the length reach host memory before the ring */
        __syncthreads();
        if (threadIdx.x == 0) {
            bell[NEO__BELL_SEQ] = s_seq;
            neo__st_release_sys(bell + NEO__BELL_RING, s_seq);
        }
    }
}

/* The hybrid's merge (neo__merge_args): the CPU's state a and the stream-back's state b of one
   (token, query head) a block, finished into out with the sink, in the host's order of operations
   (neo__merge in the header): b continued by a. An empty state (m = -inf) weighs 0; a NaN m
   (a non-finite score) gives a NaN weight, so a NaN output. */
struct neo__cu_merge2 {
    const float *a, *b;   /* [n_tokens][n_head][dv + 2] */
    float       *out;     /* [n_tokens][n_head][dv] */
    const float *sinks;   /* [n_head] or NULL */
    int          h0, nh, n_head, dv;
};
__global__ void __launch_bounds__(128) neo__merge2_kernel(const neo__cu_merge2 p) {
    const int    t = blockIdx.x / p.nh, h = p.h0 + blockIdx.x % p.nh;
    const size_t row = (size_t)t * p.n_head + h, sw = (size_t)p.dv + 2;
    const float *a = p.a + row * sw, *b = p.b + row * sw;
    float       *o = p.out + row * p.dv;
    float        M = a[0];
    if (b[0] > M) M = b[0];
    if (M == -INFINITY) M = 0.0f; /* both empty: every weight is 0 */
    const float wa = expf(a[0] - M), wb = expf(b[0] - M), den = a[1] * wa + b[1] * wb;
    const bool  sink = p.sinks != NULL;
    const float sv = sink ? p.sinks[h] : 0.0f, Mf = sink && sv > M ? sv : M, sc = expf(M - Mf);
    const float tot = den * sc + (sink ? expf(sv - Mf) : 0.0f), inv = tot > 0.0f ? sc / tot : 0.0f;
    for (int j = threadIdx.x; j < p.dv; j += blockDim.x) o[j] = (a[2 + j] * wa + b[2 + j] * wb) * inv;
}

/* =============================================================================================
   >>ops  host side: state, status mapping, the launch helper, init, memory, copies, events,
   append (the attention's dispatch follows >>plan; the decode loop's after >>test)
   ============================================================================================= */
typedef struct neo__cuda {
    int          device, n_sm, own_main;
    cudaStream_t stream[NEO__CU_STREAMS]; /* MAIN (engine's or own), COPY */
    /* never joins a capture (no op of the library's forks onto it): what must run now while MAIN
       is being captured (a new buffer's zeros, a captured batch's table) runs here, waited for,
       also when COPY has joined the capture (an ON layer's wake forks onto it) */
    cudaStream_t side;
    cudaEvent_t  event[NEO__EVENTS];
    float       *work[NEO__CU_STREAMS]; /* split partials; one per stream so that concurrent attends never share */
    size_t       work_bytes[NEO__CU_STREAMS];
    size_t       smem_optin;             /* shared memory a block may opt into */
    size_t       smem_sm;                /* shared memory an SM has */
    /* resident blocks per SM of the attention kernels, [len set] first (each kernel is compiled
       with and without device-side lengths); 0 = not asked */
    int          occ_fast[2][3][4];      /* [64/128/256][NQ 1/2/4/8] (float32) */
    int          occ_gen[2][3][3];       /* [type][NQ 1/2/4] */
    int          occ_mma[2][2][3][2];    /* the tensor-core kernel [f16/bf16][64/128/256][wide/narrow] */
    /* its clusters of y = 2..16 blocks that run at once [f16/bf16][64/128/256][wide/narrow][y]
       (cudaOccupancyMaxActiveClusters; the kernel without len, the one that clusters); 0 = not asked, -1 = none */
    int          occ_cl[2][3][2][NEO__CU_MAX_CLUSTER + 1];
    unsigned long long n_cl;             /* its launches as clusters so far (neo__cu_test_clusters) */
    int          hint;                   /* neo__cu_attn.hint of attends with len (neo__cu_test_hint) */
    int          occ_mv[4][2];           /* the matvec kernel [epilogue][norm] */
    unsigned    *cnt[NEO__CU_STREAMS];   /* its arrival counters, zero between launches; one set per stream */
    size_t       cnt_n[NEO__CU_STREAMS];
    int          occ_mma_b[2][2][3][2];  /* its batch form (neo__attn_mma_batch), [len set] first */
    /* a batch launch's table (neo__cu_attend_batch, neo__cu_append_batch), staged by
       neo__cu_bt_begin / _end: written into one of NEO__CU_BT_SLOTS slots of pinned memory, each
       rewritten only once the copy out of it (its event) is done, and copied to a device buffer
       of the stream, which stream order keeps from being rewritten while read */
    char        *bt_host;
    size_t       bt_slot;
    int          bt_next;
    cudaEvent_t  bt_done[NEO__CU_BT_SLOTS];
    void        *bt_dev[NEO__CU_STREAMS];
    size_t       bt_dev_bytes[NEO__CU_STREAMS];
    int         *bt_key;  /* [bt_key_n] scratch: each entry's launch group (neo__cu_attend_batch) */
    size_t       bt_key_n;
    int          launch_blocking;        /* CUDA_LAUNCH_BLOCKING=1: a launch returns when its kernel is done */
    int          pdl;                    /* launch programmatic dependents: the device and the loaded kernels are sm_90+ */
    /* A graph holds the buffers its captured attends were given. Bit 0 (work) and bit 1 (cnt) of
       kept[stream] are set once an attend with len (the calls graphs replay) has used them, or
       capturing found the stream capturing; growing a kept buffer moves the old one to retired,
       freed at release, instead of freeing it. */
    int          kept[NEO__CU_STREAMS];
    void       **retired;
    int          n_retired;
} neo__cuda;

/* A failed CUDA call also leaves its error as the thread's last error (cudaGetLastError), where
   the engine's own checks, and a <<<>>> launch's check of its own error, would find it: every
   failure clears it (a sticky error stays, and every later call reports it). */
static int neo__cu_fail(void) {
    (void)cudaGetLastError();
    return NEO_ERR_DEVICE;
}
/* A call's result as a status: a failure as neo__cu_fail. */
static int neo__cu_status(cudaError_t e) { return e == cudaSuccess ? NEO_OK : neo__cu_fail(); }
/* The same, telling an allocation that failed apart. */
static int neo__cu_err(cudaError_t e) {
    const int s = neo__cu_status(e);
    return e == cudaErrorMemoryAllocation ? NEO_ERR_DEVICE_MEMORY : s;
}
/* A <<<>>> launch reports its error only as the last error, which may hold an earlier call's
   (the engine's): cleared just before such a launch, read just after it. */
static void neo__cu_clear(void) { (void)cudaGetLastError(); }
static int  neo__cu_launched(void) { return cudaGetLastError() == cudaSuccess ? NEO_OK : NEO_ERR_DEVICE; }

/* The calls run on the runtime's GPU and leave the calling thread's current device as they found
   it: an engine may drive several GPUs from one thread. */
struct neo__cu_on {
    int prev, ok, set; /* set: this scope made device current, and puts prev back */
    explicit neo__cu_on(int device) : prev(-1), ok(0), set(0) {
        if (cudaGetDevice(&prev) != cudaSuccess) prev = -1, (void)cudaGetLastError();
        if (prev == device) ok = 1;
        else if (cudaSetDevice(device) == cudaSuccess) ok = 1, set = prev >= 0;
        else (void)cudaGetLastError();
    }
    ~neo__cu_on() {
        if (set) (void)cudaSetDevice(prev);
    }
    neo__cu_on(const neo__cu_on &) = delete;
    neo__cu_on &operator=(const neo__cu_on &) = delete;
};

/* The one launch of a kernel that may start as a programmatic dependent (it calls neo__pdl_wait
   before reading what the kernel before it writes): with the attribute where the kernels were
   compiled for sm_90 and run on one, plainly elsewhere. cy > 0 (sm_90 only): blocks (x, y .. y +
   cy - 1) are one thread block cluster. */
static int neo__cu_launch_cl(const neo__cuda *st, const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t s, void **args, int cy) {
    cudaLaunchConfig_t  cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = 1;
    attr[1].val.clusterDim.y = (unsigned)cy;
    attr[1].val.clusterDim.z = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = st->pdl ? (cy > 0 ? 2 : 1) : 0;
    if (cy > 0 && !st->pdl) return NEO_ERR_DEVICE; /* a cluster's merge exists only in sm_90 images */
    return neo__cu_status(cudaLaunchKernelExC(&cfg, fn, args));
}
static int neo__cu_launch(const neo__cuda *st, const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t s, void **args) {
    return neo__cu_launch_cl(st, fn, grid, block, smem, s, args, 0);
}

static cudaStream_t neo__cu_stream(neo__cuda *st, int s, int *ok) {
    *ok = st && s >= 0 && s < NEO__CU_STREAMS;
    return *ok ? st->stream[s] : (cudaStream_t)0;
}

static void neo__cu_release(void *state) {
    neo__cuda *st = (neo__cuda *)state;
    if (!st) return;
    neo__cu_on neo__on(st->device);
    for (int s = 0; s < NEO__CU_STREAMS; s++)
        if (st->stream[s]) (void)cudaStreamSynchronize(st->stream[s]);
    if (st->side) (void)cudaStreamSynchronize(st->side);
    for (int s = 0; s < NEO__CU_STREAMS; s++) {
        if (st->work[s]) (void)cudaFree(st->work[s]);
        if (st->cnt[s]) (void)cudaFree(st->cnt[s]);
        if (st->bt_dev[s]) (void)cudaFree(st->bt_dev[s]);
    }
    for (int i = 0; i < NEO__CU_BT_SLOTS; i++)
        if (st->bt_done[i]) (void)cudaEventDestroy(st->bt_done[i]);
    if (st->bt_host) (void)cudaFreeHost(st->bt_host);
    free(st->bt_key);
    for (int i = 0; i < st->n_retired; i++) (void)cudaFree(st->retired[i]);
    free(st->retired);
    for (int e = 0; e < NEO__EVENTS; e++)
        if (st->event[e]) (void)cudaEventDestroy(st->event[e]);
    for (int s = 0; s < NEO__CU_STREAMS; s++)
        if (st->stream[s] && (s != NEO__STREAM_MAIN || st->own_main)) (void)cudaStreamDestroy(st->stream[s]);
    if (st->side) (void)cudaStreamDestroy(st->side);
    (void)cudaGetLastError();
    free(st);
}

static int neo__cu_init(int device, void *engine_stream, void **state) {
    if (!state) return NEO_ERR_INVALID_ARG;
    *state = NULL;
    int         n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        /* a driver older than the toolkit this was built with cannot run this build */
        return e == cudaErrorInsufficientDriver ? NEO_ERR_UNSUPPORTED : NEO_ERR_DEVICE;
    }
    if (device < 0 || device >= n) return NEO_ERR_DEVICE;
    neo__cu_on neo__on(device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    /* Ampere (sm_80) and later: the kernels need cp.async, ldmatrix and bf16 tensor cores. The
       kernels must also have an image for this GPU (SASS of its family, or PTX it can compile). */
    int               major = 0;
    cudaFuncAttributes fa;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return NEO_ERR_DEVICE;
    }
    if (major < 8) return NEO_ERR_UNSUPPORTED;
    if (cudaFuncGetAttributes(&fa, (const void *)neo__attn_merge) != cudaSuccess) {
        (void)cudaGetLastError();
        return NEO_ERR_UNSUPPORTED;
    }
    neo__cuda *st = (neo__cuda *)calloc(1, sizeof(neo__cuda));
    if (!st) return NEO_ERR_NO_MEMORY;
    st->device = device;
    /* the kernels call griddepcontrol only where they were compiled for sm_90 (ptxVersion: the
       virtual architecture the loaded code came from, e.g. 80 when the driver compiled
       compute_80 PTX for a newer GPU) */
    st->pdl = major >= 9 && fa.ptxVersion >= 90;
    int rc = NEO_ERR_DEVICE;
    if (engine_stream) st->stream[NEO__STREAM_MAIN] = (cudaStream_t)engine_stream;
    else {
        /* blocking: ordered with the legacy default stream, so an engine that passes no stream
           and fills q, k, v with plain cudaMemcpy gets them in order */
        if (cudaStreamCreateWithFlags(&st->stream[NEO__STREAM_MAIN], cudaStreamDefault) != cudaSuccess) goto fail;
        st->own_main = 1;
    }
    if (cudaStreamCreateWithFlags(&st->stream[NEO__STREAM_COPY], cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st->side, cudaStreamNonBlocking) != cudaSuccess)
        goto fail;
    for (int e = 0; e < NEO__EVENTS; e++)
        if (cudaEventCreateWithFlags(&st->event[e], cudaEventDisableTiming) != cudaSuccess) goto fail;
    if (cudaDeviceGetAttribute(&st->n_sm, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || st->n_sm < 1) goto fail;
    {
        int optin = 0, per_sm = 0;
        if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess || optin < 1 ||
            cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess || per_sm < optin)
            goto fail;
        st->smem_optin = (size_t)optin;
        st->smem_sm = (size_t)per_sm;
    }
    {   /* CUDA's own switch, not ours: with blocking launches a kernel that waits for the CPU
           half's flag would block the host thread that has to set it, so the both-halves
           pipeline orders the two halves differently (neo__dev_attn.launch_async) */
        const char *e = getenv("CUDA_LAUNCH_BLOCKING");
        st->launch_blocking = e && e[0] == '1';
    }
    *state = st;
    return NEO_OK;
fail:
    (void)cudaGetLastError();
    neo__cu_release(st);
    return rc;
}

/* Device memory, or pinned host memory (host): with unified addressing (every sm_90 system)
   kernels use a pinned buffer's own pointer, as the handoff does. Relaxed for this thread: a
   captured call's bell (its pinned rows, and a hybrid's device states) is made while its stream
   is being captured, which a stricter mode would end at this call. */
static int neo__cu_alloc(void *state, void **ptr, size_t bytes, bool host) {
    neo__cuda *st = (neo__cuda *)state;
    if (!st || !ptr) return NEO_ERR_INVALID_ARG;
    *ptr = NULL;
    if (!bytes) return NEO_OK;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = host ? cudaHostAlloc(ptr, bytes, cudaHostAllocPortable | cudaHostAllocMapped) : cudaMalloc(ptr, bytes);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e == cudaSuccess) return NEO_OK;
    *ptr = NULL;
    if (!host) return neo__cu_err(e);
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? NEO_ERR_NO_MEMORY : NEO_ERR_DEVICE;
}
static int neo__cu_dev_alloc(void *state, void **ptr, size_t bytes) { return neo__cu_alloc(state, ptr, bytes, false); }
static void neo__cu_dev_free(void *state, void *ptr) {
    neo__cuda *st = (neo__cuda *)state;
    if (!st || !ptr) return;
    neo__cu_on neo__on(st->device);
    (void)cudaFree(ptr);
}
static int neo__cu_host_alloc(void *state, void **ptr, size_t bytes) { return neo__cu_alloc(state, ptr, bytes, true); }
static void neo__cu_host_free(void *state, void *ptr) {
    if (!state || !ptr) return;
    (void)cudaFreeHost(ptr);
}

static int neo__cu_copy(void *state, void *dst, const void *src, size_t bytes, int stream) {
    int          ok;
    cudaStream_t s = neo__cu_stream((neo__cuda *)state, stream, &ok);
    if (!ok || (bytes && (!dst || !src))) return NEO_ERR_INVALID_ARG;
    if (!bytes) return NEO_OK;
    neo__cu_on neo__on(((neo__cuda *)state)->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    return neo__cu_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
}
static int neo__cu_copy2d(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                          size_t rows, int stream) {
    int          ok;
    cudaStream_t s = neo__cu_stream((neo__cuda *)state, stream, &ok);
    if (!ok) return NEO_ERR_INVALID_ARG;
    if (!width || !rows) return NEO_OK;
    if (!dst || !src || dst_pitch < width || src_pitch < width) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(((neo__cuda *)state)->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    /* one row (a decode step's queries or outputs): the plain copy costs the host less */
    const cudaError_t e = rows == 1 ? cudaMemcpyAsync(dst, src, width, cudaMemcpyDefault, s)
                                    : cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault, s);
    return neo__cu_status(e);
}
/* 1 when the handoff's rows (widths and pitches in bytes) can be copied as floats */
static bool neo__cu_rows_ok(const void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows) {
    if (width && rows && (!dst || !src || dst_pitch < width || src_pitch < width)) return false;
    return (width | dst_pitch | src_pitch) % 4 == 0 && (uintptr_t)dst % 4 == 0 && (uintptr_t)src % 4 == 0;
}
static int neo__cu_handoff(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                           size_t rows, unsigned *flag, unsigned seq, int stream, bool await) {
    int          ok;
    cudaStream_t s = neo__cu_stream((neo__cuda *)state, stream, &ok);
    if (!ok || !flag || (uintptr_t)flag % 4 || !neo__cu_rows_ok(dst, dst_pitch, src, src_pitch, width, rows)) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(((neo__cuda *)state)->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    /* A graph being captured would hold these kernels while the CPU half waits now for a flag
       only they can set: say so instead of hanging. */
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) (void)cudaGetLastError();
    else if (cs != cudaStreamCaptureStatusNone) return NEO_ERR_UNSUPPORTED;
    if (!width) rows = 0; /* the flag still travels */
    neo__cu_clear();
    if (await)
        neo__handoff_kernel<true><<<1, 1024, 0, s>>>((float *)dst, dst_pitch / 4, (const float *)src, src_pitch / 4, width / 4,
                                                     rows, flag, seq);
    else
        neo__handoff_kernel<false><<<1, 1024, 0, s>>>((float *)dst, dst_pitch / 4, (const float *)src, src_pitch / 4, width / 4,
                                                      rows, flag, seq);
    return neo__cu_launched();
}
static int neo__cu_copy_signal(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                               size_t rows, unsigned *flag, unsigned seq, int stream) {
    return neo__cu_handoff(state, dst, dst_pitch, src, src_pitch, width, rows, flag, seq, stream, false);
}
static int neo__cu_await_copy(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                              size_t rows, const unsigned *flag, unsigned seq, int stream) {
    return neo__cu_handoff(state, dst, dst_pitch, src, src_pitch, width, rows, (unsigned *)flag, seq, stream, true);
}
/* ring and answer (neo__dev_attn): the handoff's checks, without the refusal under capture
   (graphs are where they belong) */
static int neo__cu_bell(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                        unsigned *bell, const int *len, int stream, bool ring) {
    int          ok;
    cudaStream_t s = neo__cu_stream((neo__cuda *)state, stream, &ok);
    if (!ok || !bell || (uintptr_t)bell % 4 || (ring && (!len || (uintptr_t)len % 4)) ||
        !neo__cu_rows_ok(dst, dst_pitch, src, src_pitch, width, rows))
        return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(((neo__cuda *)state)->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    if (!width) rows = 0;
    neo__cu_clear();
    if (ring)
        neo__bell_kernel<true><<<1, 1024, 0, s>>>((float *)dst, dst_pitch / 4, (const float *)src, src_pitch / 4, width / 4, rows, bell, len);
    else
        neo__bell_kernel<false><<<1, 1024, 0, s>>>((float *)dst, dst_pitch / 4, (const float *)src, src_pitch / 4, width / 4, rows, bell, len);
    return neo__cu_launched();
}
static int neo__cu_ring(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                        unsigned *bell, const int *len, int stream) {
    return neo__cu_bell(state, dst, dst_pitch, src, src_pitch, width, rows, bell, len, stream, true);
}
static int neo__cu_answer(void *state, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                          unsigned *bell, int stream) {
    return neo__cu_bell(state, dst, dst_pitch, src, src_pitch, width, rows, bell, NULL, stream, false);
}
/* fn(arg) on CUDA's host thread once the stream reaches it (a graph's host node when captured) */
static int neo__cu_host_fn(void *state, void (*fn)(void *), void *arg, int stream) {
    int          ok;
    cudaStream_t s = neo__cu_stream((neo__cuda *)state, stream, &ok);
    if (!ok || !fn) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(((neo__cuda *)state)->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    return neo__cu_status(cudaLaunchHostFunc(s, fn, arg));
}
static int neo__cu_merge_states(void *state, const neo__merge_args *m, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !neo__merge_ok(m)) return NEO_ERR_INVALID_ARG;
    const long long blocks = (long long)m->n_tokens * (m->h1 - m->h0);
    if (blocks > 0x7fffffffLL) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    const neo__cu_merge2 p = {m->a, m->b, m->out, m->sinks, m->h0, m->h1 - m->h0, m->n_head, m->head_dim_v};
    neo__cu_clear();
    neo__merge2_kernel<<<(unsigned)blocks, 128, 0, s>>>(p);
    return neo__cu_launched();
}
static int neo__cu_launch_blocking(void *state) { return state && ((neo__cuda *)state)->launch_blocking; }
static int neo__cu_record(void *state, int event, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || event < 0 || event >= NEO__EVENTS) return NEO_ERR_INVALID_ARG;
    return neo__cu_status(cudaEventRecord(st->event[event], s));
}
static int neo__cu_wait(void *state, int stream, int event) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || event < 0 || event >= NEO__EVENTS) return NEO_ERR_INVALID_ARG;
    return neo__cu_status(cudaStreamWaitEvent(s, st->event[event], 0));
}
static int neo__cu_event_sync(void *state, int event) {
    neo__cuda *st = (neo__cuda *)state;
    if (!st || event < 0 || event >= NEO__EVENTS) return NEO_ERR_INVALID_ARG;
    return neo__cu_status(cudaEventSynchronize(st->event[event]));
}
static int neo__cu_stream_sync(void *state, int stream) {
    int          ok;
    cudaStream_t s = neo__cu_stream((neo__cuda *)state, stream, &ok);
    if (!ok) return NEO_ERR_INVALID_ARG;
    return neo__cu_status(cudaStreamSynchronize(s));
}
/* 1 when the stream is being captured into a CUDA graph (or its capture was invalidated: its
   ops run neither way), else 0, also when CUDA cannot say (the error is cleared); *id (unless
   NULL) = the capture's id. A capturing stream's partial buffer and counters are kept from then
   on (neo__cuda.kept): the graph may hold them. */
static int neo__cu_capturing(void *state, int stream, unsigned long long *id) {
    int                     ok;
    neo__cuda              *st = (neo__cuda *)state;
    cudaStream_t            s = neo__cu_stream(st, stream, &ok);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    unsigned long long      cid = 0;
    if (id) *id = 0;
    if (!ok) return 0;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok || cudaStreamGetCaptureInfo(s, &cs, &cid) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (cs != cudaStreamCaptureStatusNone) st->kept[stream] = 3;
    if (id) *id = cid;
    return cs != cudaStreamCaptureStatusNone;
}

/* 1 when a can be run: the destinations, the heads, the sizes; row0 = -1 (the rows at the
   length the device holds) needs len */
static int neo__cu_append_ok(const neo__append_args *a) {
    const bool second = a->k2 && a->v2;
    if ((a->k2 || a->v2) && (!second || a->h2 < a->h0 || a->h2 > a->h1)) return 0;
    /* the first destination is needed unless the second takes every head */
    if (!(second && a->h2 == a->h0) && (!a->k || !a->v || a->kv_h0 < 0 || a->h0 < a->kv_h0)) return 0;
    if ((uintptr_t)a->len % 4 || (a->row0 == -1 ? !a->len : a->row0 < 0 || a->n_tokens > a->kv_cells - a->row0)) return 0;
    return a->src_k && a->src_v && a->n_tokens >= 1 && a->h0 >= 0 && a->h1 > a->h0 && a->h1 <= a->n_head_kv &&
           a->head_dim >= 1 && a->head_dim <= NEO__CU_MAX_DIM && a->head_dim_v >= 1 && a->head_dim_v <= NEO__CU_MAX_DIM &&
           a->kv_cells <= NEO__CU_MAX_CELLS && a->kv_type >= NEO_TYPE_F16 && a->kv_type <= NEO_TYPE_F32;
}

/* An append's launch parameters for all its tokens (row0, len_to and advance as one launch of
   them would have; neo__cu_append slices them, the projection with an append has one token). */
static neo__cu_app neo__cu_app_args(const neo__append_args *a) {
    const bool  second = a->k2 && a->v2;
    neo__cu_app p;
    memset(&p, 0, sizeof p);
    p.k = a->k, p.v = a->v, p.k2 = second ? a->k2 : NULL, p.v2 = second ? a->v2 : NULL, p.h2 = a->h2;
    p.src_k = a->src_k, p.src_v = a->src_v, p.kv_cells = a->kv_cells, p.kv_h0 = a->kv_h0, p.h0 = a->h0, p.nh = a->h1 - a->h0;
    p.n_head_kv = a->n_head_kv, p.d = a->head_dim, p.dv = a->head_dim_v, p.row0 = a->row0, p.len = a->len, p.n_all = a->n_tokens;
    p.len_to = a->row0 >= 0 && a->len ? a->row0 + a->n_tokens : -1;
    p.advance = a->row0 < 0;
    p.type = a->kv_type;
    return p;
}

static int neo__cu_append(void *state, const neo__append_args *a, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !a || !neo__cu_append_ok(a)) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    const neo__cu_app all = neo__cu_app_args(a);
    neo__cu_app       p = all;
    /* a launch's grid (tokens x heads) stays below 2^30 blocks */
    const int slice = (1 << 30) / p.nh;
    for (int t0 = 0, rc; t0 < a->n_tokens; t0 += slice) {
        const int n = a->n_tokens - t0 < slice ? a->n_tokens - t0 : slice;
        p.src_k = a->src_k + (size_t)t0 * a->n_head_kv * a->head_dim;
        p.src_v = a->src_v + (size_t)t0 * a->n_head_kv * a->head_dim_v;
        p.row0 = a->row0 < 0 ? -1 : a->row0 + t0;
        p.t0 = t0;
        p.len_to = t0 + n == a->n_tokens ? all.len_to : -1; /* the last launch stores the length */
        p.advance = t0 + n == a->n_tokens && all.advance;  /* or moves it */
        dim3 grid((unsigned)n * (unsigned)p.nh, 2);
        neo__cu_clear();
        if (a->kv_type == NEO_TYPE_F16) neo__append_kernel<__half><<<grid, 128, 0, s>>>(p);
        else if (a->kv_type == NEO_TYPE_BF16) neo__append_kernel<__nv_bfloat16><<<grid, 128, 0, s>>>(p);
        else neo__append_kernel<float><<<grid, 128, 0, s>>>(p);
        if ((rc = neo__cu_launched()) != NEO_OK) return rc;
    }
    return NEO_OK;
}

/* len[0] = value, len[1] = len[2] = 0 in stream order: one thread, the value a launch parameter, so that
   it can be captured into a graph */
static int neo__cu_set_length(void *state, int *len, int value, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !len || (uintptr_t)len % 4 || value < 0 || value > NEO__CU_MAX_CELLS) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    neo__cu_clear();
    neo__set_length_kernel<<<1, 1, 0, s>>>(len, value);
    return neo__cu_launched();
}

/* =============================================================================================
   >>plan  which kernel, block shape, split count and chunk an attend gets
   ============================================================================================= */

enum { NEO__KER_MMA = 0, NEO__KER_FAST = 1, NEO__KER_GEN = 2 };

/* A plan. The planner's functions are pure: the same shape, length and device properties (SM
   count, shared memory a block may opt into and an SM has, the chosen kernel's resident blocks an
   SM) give the same plan, so the same inputs on the same GPU give the same bits (see DETERMINISM). */
typedef struct neo__cu_plan {
    int    kernel;   /* NEO__KER_* */
    int    dc;       /* head_dim 64 / 128 / 256 as 0 / 1 / 2 (MMA, FAST); 0 for GEN */
    int    shape;    /* MMA: 0 wide, 1 narrow; FAST: log2 of the queries a block (0..3); GEN: (0..2) */
    int    NQ;       /* queries a block */
    int    QT;       /* query tiles per KV head */
    int    ZC;       /* blocks of output columns (GEN), else 1 */
    int    threads;  /* a block */
    size_t smem;     /* dynamic shared memory a block */
    int    min_cells, gran; /* cells a split at least; the chunk is a multiple of gran */
    size_t per_split;       /* bytes of partials a split */
    long long S;            /* splits */
    int    chunk;           /* cells a split */
} neo__cu_plan;

/* Forcing a plan (tests only): a kernel, a block shape, a cap on the split count, a batch's waves
   (neo__cu_batch_chunk), the splits merged through global memory even where a cluster could
   (neo__cu_cluster); -1, -1, 0, 0, 0 = auto. */
typedef struct neo__cu_force {
    int kernel, shape, max_splits, waves, global;
} neo__cu_force;

/* The tensor-core kernel's shapes, (W warps, dynamic shared memory) by (dc, narrow). */
template <int D, int BPS> static void neo__mma_geom(int *threads, size_t *smem) {
    *threads = neo__mma_cfg<D, BPS>::W * 32;
    *smem = neo__mma_cfg<D, BPS>::SMEM;
}
static void neo__mma_shape(int dc, int narrow, int *threads, size_t *smem) {
    if (dc == 0) neo__mma_geom<64, 1>(threads, smem);
    else if (dc == 1) narrow ? neo__mma_geom<128, 2>(threads, smem) : neo__mma_geom<128, 1>(threads, smem);
    else narrow ? neo__mma_geom<256, 2>(threads, smem) : neo__mma_geom<256, 1>(threads, smem);
}

/* The tensor-core kernel's block shape. Wide (one block an SM, the rings of 9 or 4 warps) unless
   its shared memory does not fit the device (head_dim 128 and 256 below sm_90: 216 and 192 KB) or,
   for head_dim 128, from NEO__CU_MMA_NARROW_CELLS cells a KV head (a batch plans for the most),
   where two narrow blocks an SM keep every SM busy and one block's epilogue runs under the
   other's loads (the wide block was the faster up to 64k cells, the narrow one from 256k, and at
   128k which one depends on the KV heads a call: docs/BENCHMARKS.md, "Nine warps in the wide
   head_dim 128 block" and "The short last split, and where the wide block stops"), or when K
   and V are host memory read over the bus (kv_host), which narrow blocks read faster than wide
   ones whatever the split count ("Reading the host heads in place"). Head_dim 64 has the wide
   shape only (96 KB, which every sm_80+ GPU can give a block). */
static int neo__plan_mma_narrow(int dc, int ncells, int kv_host, size_t smem_optin) {
    int    threads;
    size_t wide;
    neo__mma_shape(dc, 0, &threads, &wide);
    if (dc == 0) return 0;
    if (wide + NEO__CU_MMA_STATIC_SMEM > smem_optin) return 1;
    return dc == 1 && (kv_host || ncells >= NEO__CU_MMA_NARROW_CELLS);
}

/* The kernel and block shape for an attend of nq queries a KV head over ncells cells. f16 / bf16
   with head_dim == head_dim_v in {64, 128, 256} and 16-byte aligned K, V and q take the
   tensor-core kernel; float32 with the same shapes the CUDA-core kernel; everything else the
   generic one. NEO_ERR_UNSUPPORTED when a forced kernel or shape cannot serve the attend. */
static int neo__plan_kernel(const neo__attn_args *a, int nq, int ncells, size_t smem_optin, size_t smem_sm, const neo__cu_force *f,
                            neo__cu_plan *pl) {
    const int d = a->head_dim, dv = a->head_dim_v, f32 = a->kv_type == NEO_TYPE_F32;
    const int dc = d == 64 ? 0 : d == 128 ? 1 : d == 256 ? 2 : -1;
    const int fast = dc >= 0 && d == dv && (uintptr_t)a->k % 16 == 0 && (uintptr_t)a->v % 16 == 0 && (uintptr_t)a->q % 16 == 0;
    memset(pl, 0, sizeof *pl);
    pl->kernel = !fast ? NEO__KER_GEN : f32 ? NEO__KER_FAST : NEO__KER_MMA;
    if (f->kernel >= 0) {
        if (f->kernel != NEO__KER_GEN && f->kernel != pl->kernel) return NEO_ERR_UNSUPPORTED;
        pl->kernel = f->kernel;
    }
    pl->ZC = 1;
    if (pl->kernel == NEO__KER_MMA) {
        pl->dc = dc;
        pl->shape = f->shape >= 0 ? f->shape : neo__plan_mma_narrow(dc, ncells, a->kv_host, smem_optin);
        if (pl->shape < 0 || pl->shape > 1 || (pl->shape && dc == 0)) return NEO_ERR_UNSUPPORTED;
        neo__mma_shape(dc, pl->shape, &pl->threads, &pl->smem);
        if (pl->smem + NEO__CU_MMA_STATIC_SMEM > smem_optin) return NEO_ERR_UNSUPPORTED; /* (forced wide) */
        /* the wide shape is one block an SM whatever registers the compiler gives it: where two
           would fit (head_dim 64 on sm_90), it asks for half the SM's shared memory. Two blocks
           an SM would double the planned splits, and the scheduler may put two on one SM while
           another has none (docs/BENCHMARKS.md, "One block an SM for head_dim 64"); a batch's
           parameters go after that */
        const size_t half = (smem_sm / 2 + 15) / 16 * 16;
        if (!pl->shape && 2 * (pl->smem + NEO__CU_MMA_STATIC_SMEM) <= smem_sm &&
            half + NEO__CU_MMA_STATIC_SMEM + sizeof(neo__cu_attn) <= smem_optin)
            pl->smem = half;
        pl->NQ = NEO__MMA_NQ;
        pl->min_cells = NEO__CU_MMA_MIN_TILES * 16 * (pl->threads / 32);
        pl->gran = 16;
    } else {
        const int NW = NEO__CU_THREADS / 32, TC = pl->kernel == NEO__KER_FAST ? NW * (NEO__CU_WTILE_BYTES / (d * 4)) : NEO__CU_GEN_TILE;
        pl->dc = pl->kernel == NEO__KER_FAST ? dc : 0;
        pl->shape = pl->kernel == NEO__KER_FAST ? (nq >= 5 ? 3 : nq >= 3 ? 2 : nq - 1) : (nq >= 3 ? 2 : nq - 1);
        pl->NQ = 1 << pl->shape;
        pl->ZC = pl->kernel == NEO__KER_GEN ? (dv + NEO__CU_GEN_COLS - 1) / NEO__CU_GEN_COLS : 1;
        pl->threads = NEO__CU_THREADS;
        pl->smem = pl->kernel == NEO__KER_FAST ? (size_t)NW * NEO__CU_WSTAGES * 2 * NEO__CU_WTILE_BYTES : 0;
        pl->min_cells = 2 * TC; /* at least two tiles a split */
        pl->gran = TC;
    }
    pl->QT = (nq + pl->NQ - 1) / pl->NQ;
    return NEO_OK;
}

/* Splits of the cell range: as many as fill every SM's resident blocks once (more would make a
   second, partly empty wave), each at least min_cells, at most NEO__CU_MAX_SPLITS (the merges'
   weights), with a bounded partial buffer; the chunk is rounded up to whole tiles and the count
   then trimmed to the chunks that hold cells. units: blocks a split (KV heads x query tiles x
   column blocks). */
static void neo__plan_splits(neo__cu_plan *pl, long long units, int ncells, int n_sm, int occ, int max_splits) {
    long long       S = ((long long)n_sm * occ) / units;
    const long long max_by_cells = ((long long)ncells + pl->min_cells - 1) / pl->min_cells;
    if (max_splits > 0 && S > max_splits) S = max_splits;
    if (S > max_by_cells) S = max_by_cells;
    if (S > NEO__CU_MAX_SPLITS) S = NEO__CU_MAX_SPLITS;
    if ((size_t)S > NEO__CU_WORK_CAP / pl->per_split) S = (long long)(NEO__CU_WORK_CAP / pl->per_split);
    if (S < 1) S = 1;
    pl->chunk = pl->gran;
    if (ncells > 0) {
        long long c = (ncells + S - 1) / S;
        c = (c + pl->gran - 1) / pl->gran * pl->gran;
        pl->chunk = (int)c;
        S = (ncells + c - 1) / c;
    } else S = 1;
    pl->S = S;
}

/* =============================================================================================
   >>ops.attend  validation, plan, launch
   ============================================================================================= */

template <typename T, int D, bool LEN> static const void *neo__fast_fn(int nqc) {
    switch (nqc) {
    case 0: return (const void *)neo__attn_fast<T, D, 1, LEN>;
    case 1: return (const void *)neo__attn_fast<T, D, 2, LEN>;
    case 2: return (const void *)neo__attn_fast<T, D, 4, LEN>;
    default: return (const void *)neo__attn_fast<T, D, 8, LEN>;
    }
}
template <typename T, bool LEN> static const void *neo__gen_fn(int nqc) {
    return nqc == 0 ? (const void *)neo__attn_generic<T, 1, LEN>
           : nqc == 1 ? (const void *)neo__attn_generic<T, 2, LEN>
                      : (const void *)neo__attn_generic<T, 4, LEN>;
}
template <int D, int BPS, bool LEN> static const void *neo__mma_fn(int type) {
    return type == NEO_TYPE_F16 ? (const void *)neo__attn_mma<__half, D, BPS, LEN> : (const void *)neo__attn_mma<__nv_bfloat16, D, BPS, LEN>;
}
/* the planned kernel, with or without device-side lengths */
template <bool LEN> static const void *neo__plan_fn_t(int type, const neo__cu_plan *pl) {
    if (pl->kernel == NEO__KER_MMA) {
        if (pl->dc == 0) return neo__mma_fn<64, 1, LEN>(type);
        if (pl->dc == 1) return pl->shape ? neo__mma_fn<128, 2, LEN>(type) : neo__mma_fn<128, 1, LEN>(type);
        return pl->shape ? neo__mma_fn<256, 2, LEN>(type) : neo__mma_fn<256, 1, LEN>(type);
    }
    if (pl->kernel == NEO__KER_FAST) /* float32 K and V only */
        return pl->dc == 0 ? neo__fast_fn<float, 64, LEN>(pl->shape) : pl->dc == 1 ? neo__fast_fn<float, 128, LEN>(pl->shape)
                                                                              : neo__fast_fn<float, 256, LEN>(pl->shape);
    return type == NEO_TYPE_F16    ? neo__gen_fn<__half, LEN>(pl->shape)
           : type == NEO_TYPE_BF16 ? neo__gen_fn<__nv_bfloat16, LEN>(pl->shape)
                                   : neo__gen_fn<float, LEN>(pl->shape);
}

/* The planned kernel (len: the attend reads its length when it runs) and its cached
   resident-blocks count. */
static const void *neo__plan_fn(neo__cuda *st, int type, int len, const neo__cu_plan *pl, int **occ) {
    if (pl->kernel == NEO__KER_MMA) *occ = &st->occ_mma[len][type == NEO_TYPE_F16 ? 0 : 1][pl->dc][pl->shape];
    else if (pl->kernel == NEO__KER_FAST) *occ = &st->occ_fast[len][pl->dc][pl->shape];
    else *occ = &st->occ_gen[len][type][pl->shape];
    return len ? neo__plan_fn_t<true>(type, pl) : neo__plan_fn_t<false>(type, pl);
}

/* Resident blocks per SM of fn, asked once (raising the dynamic shared memory limit first).
   Relaxed for this thread: the first call may come while the stream is being captured, and it
   may load the kernel (CUDA's lazy loading), which a stricter mode would end the capture at. */
static int neo__cu_occupancy(int *cache, const void *fn, int threads, size_t smem) {
    if (*cache > 0) return NEO_OK;
    int                   n = 0;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    /* dynamic plus static shared memory past 48 KB needs the opt-in */
    cudaError_t e = smem ? cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) : cudaSuccess;
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, smem);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) return neo__cu_fail();
    *cache = n > 0 ? n : 1;
    return NEO_OK;
}

/* A buffer of the stream's that holds at least need elements of es bytes: when it is smaller,
   a new one of alloc elements (zeroed when zero is set). The old one is retired when a graph may
   hold it (bit `kept` of neo__cuda.kept[stream], 0 for a buffer no graph holds), else freed
   after waiting for the stream, whose earlier attends may still read it. On a stream being
   captured, the allocation is made outside the capture (relaxed for this thread: a graph cannot
   hold a cudaMalloc) and zeroed on the side stream, waited for (a captured memset would run only
   at replays, after eager launches that need the zeros); the old buffer is kept (a graph
   being captured may hold it), and so is the new one. */
static int neo__cu_grow(neo__cuda *st, int stream, void **buf, size_t *have, size_t need, size_t alloc, size_t es, int zero, int kept) {
    if (need <= *have) return NEO_OK;
    const int cap = neo__cu_capturing(st, stream, NULL);
    if (*buf && (st->kept[stream] & kept)) {
        void **r = (void **)realloc(st->retired, (size_t)(st->n_retired + 1) * sizeof *r);
        if (!r) return NEO_ERR_NO_MEMORY;
        st->retired = r;
        r[st->n_retired++] = *buf;
    } else if (*buf) {
        if (cudaStreamSynchronize(st->stream[stream]) != cudaSuccess) return neo__cu_fail();
        if (cudaFree(*buf) != cudaSuccess) return neo__cu_fail();
    }
    *buf = NULL;
    *have = 0;
    void                 *p = NULL;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cap) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaMalloc(&p, alloc * es);
    /* zeroed now, in the stream's order, or, during a capture, on the side stream, waited for
       (a captured memset would run only at the replays, after eager launches that need zeros);
       still relaxed, so that the wait does not end a stricter capture */
    cudaStream_t zs = cap ? st->side : st->stream[stream];
    int          bad = e != cudaSuccess ? neo__cu_err(e) : NEO_OK;
    if (!bad && zero && (cudaMemsetAsync(p, 0, alloc * es, zs) != cudaSuccess || (cap && cudaStreamSynchronize(zs) != cudaSuccess))) {
        (void)cudaFree(p);
        (void)cudaGetLastError();
        bad = NEO_ERR_DEVICE;
    }
    if (cap) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (bad) return bad;
    *buf = p;
    *have = alloc;
    /* the graph being captured holds the new one; else none does yet */
    if (cap) st->kept[stream] |= kept;
    else st->kept[stream] &= ~kept;
    return NEO_OK;
}
/* the stream's partial buffer (a quarter more than asked, in whole MiB) and its arrival counters
   (zero between launches) */
static int neo__cu_work(neo__cuda *st, int stream, size_t bytes) {
    const size_t mib = (size_t)1 << 20, want = (bytes + bytes / 4 + mib - 1) & ~(mib - 1);
    return neo__cu_grow(st, stream, (void **)&st->work[stream], &st->work_bytes[stream], bytes, want, 1, 0, 1);
}
static int neo__cu_counters(neo__cuda *st, int stream, size_t n) {
    return neo__cu_grow(st, stream, (void **)&st->cnt[stream], &st->cnt_n[stream], n, n < 4096 ? 4096 : n + n / 4, sizeof(unsigned), 1, 2);
}

/* The fields of a launch's parameters that every attention kernel reads. */
static void neo__cu_attn_params(neo__cu_attn *p, const neo__attn_args *a, int G, int nq, int c1, const neo__cu_plan *pl) {
    memset(p, 0, sizeof *p);
    p->k = a->k;
    p->v = a->v;
    p->q = a->q;
    p->slopes = a->slopes;
    p->kstride = (long long)a->kv_cells * a->head_dim;
    p->vstride = (long long)a->kv_cells * a->head_dim_v;
    p->kv_h0 = a->kv_h0;
    p->cell_base = a->cell_base;
    p->h0 = a->h0;
    p->c0 = a->c0;
    p->c1 = c1;
    p->n_tokens = a->n_tokens;
    p->pos0 = a->pos0;
    p->n_head = a->n_head;
    p->G = G;
    p->nq = nq;
    p->d = a->head_dim;
    p->dv = a->head_dim_v;
    p->S = (int)pl->S;
    p->chunk = pl->chunk;
    p->QT = pl->QT;
    p->scale = a->scale;
    p->softcap = a->softcap;
    p->state = a->state;
    p->out = a->out;
    p->sinks = a->sinks;
    p->accumulate = a->accumulate ? 1 : 0;
    p->len = a->len;
    p->cut_share = a->cut_share;
    p->gran = pl->gran;
}

/* Whether the S > 1 blocks of each of a tensor-core launch's units run as one cluster that merges
   through distributed shared memory (neo__mma::merge_cluster) instead of through global memory
   (partials written, an arrival counted, the last block reading them back: serial steps that a
   short call pays whatever its size). Only on sm_90 (st->pdl), for S up to NEO__CU_MAX_CLUSTER,
   never for an attend with len (its kernel is built without the cluster merge), and when every
   unit's cluster can run at once: a cluster waits for S SMs of one GPC to be free together, and
   a second wave of clusters would cost more than the merge saves. cache[S] is the kernel's count
   of clusters of S blocks that fit the GPU, asked once. */
static int neo__cu_cluster(const neo__cuda *st, const void *fn, const neo__cu_plan *pl, long long units, int *cache) {
    const int S = (int)pl->S;
    if (!st->pdl || S < 2 || S > NEO__CU_MAX_CLUSTER) return 0;
    if (cache[S] == 0) {
        cudaLaunchConfig_t  cfg = {};
        cudaLaunchAttribute at[1];
        int                 n = 0;
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = 1;
        at[0].val.clusterDim.y = (unsigned)S;
        at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(1, (unsigned)S);
        cfg.blockDim = dim3((unsigned)pl->threads);
        cfg.dynamicSmemBytes = pl->smem;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        if ((S <= 8 || cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) &&
            cudaOccupancyMaxActiveClusters(&n, fn, &cfg) == cudaSuccess && n > 0)
            cache[S] = n;
        else {
            (void)cudaGetLastError(); /* a size this device cannot take: the global merge */
            cache[S] = -1;
        }
    }
    return cache[S] >= units;
}

/* The tensor-core path: one launch that also merges and finishes. */
static int neo__cu_launch_mma(neo__cuda *st, int stream, cudaStream_t s, const void *fn, const neo__cu_plan *pl, long long units,
                              neo__cu_attn *p, int *cl_cache) {
    int rc;
    p->cl = cl_cache && neo__cu_cluster(st, fn, pl, units, cl_cache);
    if (pl->S > 1 && !p->cl) {
        if ((rc = neo__cu_work(st, stream, pl->per_split * (size_t)pl->S)) != NEO_OK) return rc;
        if ((rc = neo__cu_counters(st, stream, (size_t)units)) != NEO_OK) return rc;
        p->work = st->work[stream];
        p->work_ml = p->work + (size_t)units * (size_t)pl->S * NEO__MMA_NQ * (size_t)p->d;
        p->cnt = st->cnt[stream];
        if (p->len) st->kept[stream] |= 3;
    }
    if (p->len) p->hint = st->hint;
    void      *args[] = {p};
    const dim3 grid((unsigned)units, (unsigned)pl->S), block((unsigned)pl->threads);
    if ((rc = neo__cu_launch_cl(st, fn, grid, block, pl->smem, s, args, p->cl ? (int)pl->S : 0)) == NEO_OK && p->cl) st->n_cl++;
    return rc;
}

/* The CUDA-core paths: the attention kernel writes every split's partial, neo__attn_merge
   merges them (a programmatic dependent of it) and finishes. */
static int neo__cu_launch_split(neo__cuda *st, int stream, cudaStream_t s, const void *fn, const neo__cu_plan *pl, int H,
                                neo__cu_attn *p) {
    int rc;
    if ((rc = neo__cu_work(st, stream, pl->per_split * (size_t)pl->S)) != NEO_OK) return rc;
    p->work = st->work[stream];
    if (p->len) st->kept[stream] |= 1;
    void *args[] = {p};
    if (cudaLaunchKernel(fn, dim3((unsigned)(H * pl->QT), (unsigned)pl->S, (unsigned)pl->ZC), dim3(NEO__CU_THREADS), args,
                         pl->smem, s) != cudaSuccess)
        return neo__cu_fail();
    const int     P = pl->S < 8 ? 1 : p->dv <= 64 ? 4 : p->dv <= 128 ? 2 : 1;
    neo__cu_merge mp = {st->work[stream], p->state, p->out, p->sinks, (int)pl->S, p->nq, p->G, p->n_head, p->h0, p->dv, p->accumulate, P};
    void *margs[] = {&mp};
    return neo__cu_launch(st, (const void *)neo__attn_merge, dim3((unsigned)(H * p->nq)), dim3(256), 0, s, margs);
}

static int neo__cu_attend_ok(const neo__attn_args *a) {
    return a && a->k && a->v && a->q && a->n_head >= 1 && a->n_head_kv >= 1 && a->n_head % a->n_head_kv == 0 &&
           a->head_dim >= 1 && a->head_dim <= NEO__CU_MAX_DIM && a->head_dim_v >= 1 && a->head_dim_v <= NEO__CU_MAX_DIM &&
           a->kv_h0 >= 0 && a->h0 >= a->kv_h0 && a->h1 > a->h0 && a->h1 <= a->n_head_kv && a->kv_cells >= 1 &&
           a->c0 >= a->cell_base && a->c1 > a->c0 && (long long)a->c1 <= (long long)a->cell_base + a->kv_cells &&
           (long long)a->cell_base + a->kv_cells <= NEO__CU_MAX_CELLS && (a->len || (long long)a->pos0 + a->n_tokens <= NEO__CU_MAX_CELLS) &&
           a->n_tokens >= 1 && (a->out || a->state) && (!a->accumulate || a->state) && a->kv_type >= NEO_TYPE_F16 &&
           a->kv_type <= NEO_TYPE_F32 && (uintptr_t)a->len % 4 == 0 && neo__cut_ok(a);
}

/* An attend's queries a KV head (nq) and the end of its visible cells (c1: cells after the last
   query's position are masked for every query; with len, the bound given, which the kernels
   clip to the length when they run); 0 when nq is past what the kernels index. */
static int neo__cu_range(const neo__attn_args *a, int *nq, int *c1) {
    const long long nql = (long long)a->n_tokens * (a->n_head / a->n_head_kv);
    const long long last = (long long)a->pos0 + a->n_tokens; /* one past the last visible cell */
    *nq = (int)nql;
    *c1 = a->len || last >= a->c1 ? a->c1 : (int)(last > a->c0 ? last : a->c0);
    /* the kernels number a call's queries over all its KV heads in an int */
    return nql <= (1 << 30) && nql * (a->h1 - a->h0) <= 0x7fffffffLL;
}

/* validation, the plan (forced in part by f), the launches */
static int neo__cu_attend_plan(neo__cuda *st, const neo__attn_args *a, int stream, const neo__cu_force *f) {
    int          ok, rc;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !neo__cu_attend_ok(a)) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    const int G = a->n_head / a->n_head_kv, H = a->h1 - a->h0;
    int       nq, c1;
    if (!neo__cu_range(a, &nq, &c1)) return NEO_ERR_INVALID_ARG;
    const int ncells = c1 - a->c0;

    neo__cu_plan pl;
    int         *occ;
    if ((rc = neo__plan_kernel(a, nq, ncells, st->smem_optin, st->smem_sm, f, &pl)) != NEO_OK) return rc;
    const void *fn = neo__plan_fn(st, a->kv_type, a->len != NULL, &pl, &occ);
    if ((rc = neo__cu_occupancy(occ, fn, pl.threads, pl.smem)) != NEO_OK) return rc;
    const long long units = (long long)H * pl.QT; /* blocks a split, per column block */
    if (units > 0x7fffffffLL) return NEO_ERR_INVALID_ARG;
    pl.per_split = pl.kernel == NEO__KER_MMA ? (size_t)units * NEO__MMA_NQ * ((size_t)a->head_dim + 2) * sizeof(float)
                                             : (size_t)H * (size_t)nq * ((size_t)a->head_dim_v + 2) * sizeof(float);
    neo__plan_splits(&pl, units * pl.ZC, ncells, st->n_sm, *occ, f->max_splits);
    if (units * pl.ZC * pl.S > 0x7fffffffLL) return NEO_ERR_INVALID_ARG;
    neo__cu_attn p;
    neo__cu_attn_params(&p, a, G, nq, c1, &pl);
    if (pl.kernel != NEO__KER_MMA) return neo__cu_launch_split(st, stream, s, fn, &pl, H, &p);
    int *cl_cache = f->global || a->len ? NULL : st->occ_cl[a->kv_type == NEO_TYPE_F16 ? 0 : 1][pl.dc][pl.shape];
    return neo__cu_launch_mma(st, stream, s, fn, &pl, units, &p, cl_cache);
}

static int neo__cu_attend(void *state, const neo__attn_args *a, int stream) {
    const neo__cu_force f = {-1, -1, 0, 0, 0};
    return neo__cu_attend_plan((neo__cuda *)state, a, stream, &f);
}

/* ---- a batch: the device halves of many layers in one launch --------------------------------- */

template <int D, int BPS, bool LEN> static const void *neo__mma_batch_fn(int type) {
    return type == NEO_TYPE_F16 ? (const void *)neo__attn_mma_batch<__half, D, BPS, LEN>
                                : (const void *)neo__attn_mma_batch<__nv_bfloat16, D, BPS, LEN>;
}
template <bool LEN> static const void *neo__plan_batch_fn_t(int type, const neo__cu_plan *pl) {
    if (pl->dc == 0) return neo__mma_batch_fn<64, 1, LEN>(type);
    if (pl->dc == 1) return pl->shape ? neo__mma_batch_fn<128, 2, LEN>(type) : neo__mma_batch_fn<128, 1, LEN>(type);
    return pl->shape ? neo__mma_batch_fn<256, 2, LEN>(type) : neo__mma_batch_fn<256, 1, LEN>(type);
}
/* The batch form of a tensor-core plan (len: its entries read their lengths when it runs), and
   its cached resident-blocks count. */
static const void *neo__plan_batch_fn(neo__cuda *st, int type, int len, const neo__cu_plan *pl, int **occ) {
    *occ = &st->occ_mma_b[len][type == NEO_TYPE_F16 ? 0 : 1][pl->dc][pl->shape];
    return len ? neo__plan_batch_fn_t<true>(type, pl) : neo__plan_batch_fn_t<false>(type, pl);
}

/* The launch group of every entry of b, into st->bt_key: entries that take the tensor-core kernel
   are grouped by storage type, head_dim and whether their length is read when the launch runs
   (1 + 6 len + 3 type + dc, see NEO__CU_BT_LEN), one launch a group; -1 = an attend of its own
   (the CUDA-core and generic kernels, or an entry that fails validation, which its own attend
   then reports). */
static int neo__cu_batch_keys(neo__cuda *st, const neo__attn_batch *b, const neo__cu_force *f) {
    if ((size_t)b->n > st->bt_key_n) {
        int *k = (int *)realloc(st->bt_key, (size_t)b->n * sizeof(int));
        if (!k) return NEO_ERR_NO_MEMORY;
        st->bt_key = k;
        st->bt_key_n = (size_t)b->n;
    }
    for (int i = 0; i < b->n; i++) {
        const neo__attn_args *a = &b->entries[i];
        neo__cu_plan          pl;
        int                   nq, c1;
        st->bt_key[i] = -1;
        if (neo__cu_attend_ok(a) && neo__cu_range(a, &nq, &c1) && neo__plan_kernel(a, nq, c1 - a->c0, st->smem_optin, st->smem_sm, f, &pl) == NEO_OK &&
            pl.kernel == NEO__KER_MMA)
            st->bt_key[i] = 1 + (a->len ? NEO__CU_BT_LEN : 0) + (a->kv_type == NEO_TYPE_F16 ? 0 : 3) + pl.dc;
    }
    return NEO_OK;
}

/* The cells of a batch's split, one chunk for every entry: the batch's KV-head cells (work) over
   about NEO__CU_BATCH_WAVES waves of the device's resident blocks. With blocks of at most one
   chunk and the device taking them in any order, the launch ends at most one block after a
   perfectly balanced one would, whatever the entries' lengths; more waves shorten that tail but
   add blocks, each with its own start and partial, so a block reads at least
   NEO__CU_BATCH_BLOCK_BYTES of K and V (unless a test forces the waves). Whole tiles, at least
   min_cells (or the cap on splits a test forces), and no entry over NEO__CU_MAX_SPLITS splits. */
static long long neo__cu_batch_chunk(const neo__cu_plan *pl, long long work, int max_cells, int cell_bytes, int n_sm, int occ,
                                     const neo__cu_force *f) {
    const int       max_splits = f->max_splits;
    const long long waves = (long long)n_sm * occ * (f->waves > 0 ? f->waves : NEO__CU_BATCH_WAVES);
    long long       c = (work + waves - 1) / waves;
    if (c < pl->min_cells) c = pl->min_cells;
    if (f->waves <= 0 && c < NEO__CU_BATCH_BLOCK_BYTES / cell_bytes) c = NEO__CU_BATCH_BLOCK_BYTES / cell_bytes;
    if (c < (max_cells + NEO__CU_MAX_SPLITS - 1) / NEO__CU_MAX_SPLITS) c = (max_cells + NEO__CU_MAX_SPLITS - 1) / NEO__CU_MAX_SPLITS;
    if (max_splits > 0 && c < (max_cells + max_splits - 1) / max_splits) c = (max_cells + max_splits - 1) / max_splits;
    return (c + pl->gran - 1) / pl->gran * pl->gran;
}

/* A pinned slot of at least bytes for a batch table, once the copy out of it is done; *ev is
   recorded after the next copy out of it. */
static int neo__cu_bt_slot(neo__cuda *st, size_t bytes, char **slot, cudaEvent_t *ev) {
    if (bytes > st->bt_slot) {
        const size_t want = (bytes + bytes / 2 + 4095) & ~(size_t)4095;
        for (int i = 0; i < NEO__CU_BT_SLOTS; i++)
            if (st->bt_done[i] && cudaEventSynchronize(st->bt_done[i]) != cudaSuccess) return neo__cu_fail();
        if (st->bt_host && cudaFreeHost(st->bt_host) != cudaSuccess) return neo__cu_fail();
        st->bt_host = NULL;
        st->bt_slot = 0;
        if (cudaHostAlloc((void **)&st->bt_host, want * NEO__CU_BT_SLOTS, cudaHostAllocPortable) != cudaSuccess) {
            (void)cudaGetLastError();
            st->bt_host = NULL;
            return NEO_ERR_NO_MEMORY;
        }
        st->bt_slot = want;
    }
    const int i = st->bt_next;
    if (!st->bt_done[i] && cudaEventCreateWithFlags(&st->bt_done[i], cudaEventDisableTiming) != cudaSuccess)
        return neo__cu_fail();
    if (cudaEventSynchronize(st->bt_done[i]) != cudaSuccess) return neo__cu_fail();
    st->bt_next = (i + 1) % NEO__CU_BT_SLOTS;
    *slot = st->bt_host + (size_t)i * st->bt_slot;
    *ev = st->bt_done[i];
    return NEO_OK;
}


/* A tensor-core group's sizes: its entries (m), their KV-head cells (work) and most cells (max_cells). */
typedef struct neo__cu_group {
    int          key, m, max_cells;
    long long    work, blocks, units;
    size_t       work_floats; /* partials of the entries with more than one split */
    neo__cu_plan pl;
} neo__cu_group;

/* Entry a's plan in a group planned as gp at chunk c: its query tiles, its splits (one when no
   cell is visible: the block still finishes the queries) and its chunk, the cells in S equal
   splits of whole tiles (at most c each: no short last one); *units its blocks a split. */
static neo__cu_plan neo__cu_entry_plan(const neo__cu_plan *gp, const neo__attn_args *a, long long c, int *nq, int *c1, long long *units) {
    neo__cu_plan pl = *gp;
    neo__cu_range(a, nq, c1);
    const int n = *c1 - a->c0;
    pl.QT = (*nq + pl.NQ - 1) / pl.NQ;
    pl.S = n > 0 ? (n + c - 1) / c : 1;
    pl.chunk = n > 0 ? (int)(((n + pl.S - 1) / pl.S + pl.gran - 1) / pl.gran * pl.gran) : (int)c;
    *units = (long long)(a->h1 - a->h0) * pl.QT;
    return pl;
}

/* The group's blocks, units and partials at chunk c; 0 when past what a launch indexes. */
static int neo__cu_group_size(neo__cu_group *g, const neo__attn_batch *b, const int *key, long long c) {
    g->blocks = g->units = 0;
    g->work_floats = 0;
    for (int i = 0; i < b->n; i++) {
        const neo__attn_args *a = &b->entries[i];
        int                   nq, c1;
        long long             units;
        if (key[i] != g->key) continue;
        const long long S = neo__cu_entry_plan(&g->pl, a, c, &nq, &c1, &units).S;
        g->blocks += units * S;
        g->units += units;
        if (S > 1) g->work_floats += (size_t)(units * S) * NEO__MMA_NQ * ((size_t)a->head_dim + 2);
    }
    return g->blocks <= 0x7fffffffLL && g->work_floats * sizeof(float) <= NEO__CU_WORK_CAP;
}

/* The group's table: entry j's parameters (its plan at chunk c, its share of the stream's
   partials and arrival counters) and its first block. */
static void neo__cu_batch_fill(neo__cuda *st, const neo__attn_batch *b, const neo__cu_group *g, long long c, int stream, neo__cu_attn *P,
                               int *start) {
    size_t work = 0, cnt = 0;
    int    j = 0;
    start[0] = 0;
    for (int i = 0; i < b->n; i++) {
        const neo__attn_args *a = &b->entries[i];
        int                   nq, c1;
        long long             units;
        if (st->bt_key[i] != g->key) continue;
        const neo__cu_plan pl = neo__cu_entry_plan(&g->pl, a, c, &nq, &c1, &units);
        neo__cu_attn_params(&P[j], a, a->n_head / a->n_head_kv, nq, c1, &pl);
        P[j].cnt = st->cnt[stream] + cnt;
        if (P[j].len) P[j].hint = st->hint;
        if (pl.S > 1) {
            P[j].work = st->work[stream] + work;
            P[j].work_ml = P[j].work + (size_t)(units * pl.S) * NEO__MMA_NQ * (size_t)a->head_dim;
            work += (size_t)(units * pl.S) * NEO__MMA_NQ * ((size_t)a->head_dim + 2);
        }
        cnt += (size_t)units;
        start[j + 1] = start[j] + (int)(units * pl.S);
        j++;
    }
}

/* A captured batch launch's table in device memory of its own, which the graph reads at every
   replay: allocated and written now, outside the capture (relaxed for this thread; the copy on
   the side stream, waited for), and freed at release with the retired buffers, since the
   library cannot know when the engine destroys its graph: each capture adds one. */
static int neo__cu_bt_keep(neo__cuda *st, const void *src, size_t bytes, char **dev) {
    void **r = (void **)realloc(st->retired, (size_t)(st->n_retired + 1) * sizeof *r);
    if (!r) return NEO_ERR_NO_MEMORY;
    st->retired = r;
    void                 *p = NULL;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) e = cudaMemcpyAsync(p, src, bytes, cudaMemcpyHostToDevice, st->side);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st->side);
    if (e != cudaSuccess && p) (void)cudaFree(p);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) {
        const int rc = neo__cu_err(e);
        (void)cudaGetLastError();
        return rc;
    }
    r[st->n_retired++] = p;
    *dev = (char *)p;
    return NEO_OK;
}

/* A batch launch's table, staged: begin gives host memory of bytes to fill (a pinned slot, or,
   under a capture, memory of its own for neo__cu_bt_keep); end puts it in device memory for the
   launch that follows on the stream (the stream's table buffer, which stream order keeps from
   being rewritten while read, or the captured graph's own) and sets *dev. */
typedef struct neo__cu_stage {
    char       *host;
    size_t      bytes;
    int         cap;
    cudaEvent_t ev; /* the slot's, recorded after the copy out of it */
} neo__cu_stage;
static int neo__cu_bt_begin(neo__cuda *st, int stream, size_t bytes, neo__cu_stage *g) {
    g->bytes = bytes;
    g->cap = neo__cu_capturing(st, stream, NULL);
    if (g->cap) return (g->host = (char *)malloc(bytes)) ? NEO_OK : NEO_ERR_NO_MEMORY;
    return neo__cu_bt_slot(st, bytes, &g->host, &g->ev);
}
static int neo__cu_bt_end(neo__cuda *st, int stream, neo__cu_stage *g, char **dev) {
    int rc;
    if (g->cap) {
        rc = neo__cu_bt_keep(st, g->host, g->bytes, dev);
        free(g->host);
        return rc;
    }
    const cudaStream_t s = st->stream[stream];
    if ((rc = neo__cu_grow(st, stream, &st->bt_dev[stream], &st->bt_dev_bytes[stream], g->bytes, g->bytes * 2, 1, 0, 0)) != NEO_OK)
        return rc;
    *dev = (char *)st->bt_dev[stream];
    if (cudaMemcpyAsync(*dev, g->host, g->bytes, cudaMemcpyHostToDevice, s) != cudaSuccess || cudaEventRecord(g->ev, s) != cudaSuccess)
        return neo__cu_fail();
    return NEO_OK;
}

/* Group key's entries as one launch of neo__attn_mma_batch: the plan, the chunk, each entry's
   parameters and first block staged, copied, launched. A group with len (the calls a graph
   replays) is planned at its entries' bounds (c1, the cells they may hold when it runs): each
   entry's split count is fixed, and its kernel spreads the length it reads over those splits. */
static int neo__cu_batch_group(neo__cuda *st, const neo__attn_batch *b, int key, int stream, cudaStream_t s, const neo__cu_force *f) {
    neo__cu_group         g;
    const neo__attn_args *a0 = NULL;
    const int             len = key > NEO__CU_BT_LEN;
    int                   rc, *occ, nq, c1;
    memset(&g, 0, sizeof g);
    g.key = key;
    for (int i = 0; i < b->n; i++) {
        if (st->bt_key[i] != key) continue;
        const neo__attn_args *a = &b->entries[i];
        if (!a0) a0 = a;
        neo__cu_range(a, &nq, &c1);
        g.m++;
        g.work += (long long)(a->h1 - a->h0) * (c1 - a->c0);
        if (c1 - a->c0 > g.max_cells) g.max_cells = c1 - a->c0;
    }
    /* the block shape for many cells a KV head (narrow for head_dim 128): a batch launches many
       blocks an SM in turn, and with two resident, one's start and merge run under the other's
       loads */
    neo__cu_range(a0, &nq, &c1);
    if ((rc = neo__plan_kernel(a0, nq, NEO__CU_MAX_CELLS, st->smem_optin, st->smem_sm, f, &g.pl)) != NEO_OK) return rc;
    g.pl.smem += (sizeof(neo__cu_attn) + 15) / 16 * 16; /* the entry's parameters, after the rings */
    const void *fn = neo__plan_batch_fn(st, a0->kv_type, len, &g.pl, &occ);
    if ((rc = neo__cu_occupancy(occ, fn, g.pl.threads, g.pl.smem)) != NEO_OK) return rc;
    const int cell_bytes = (a0->head_dim + a0->head_dim_v) * 2; /* f16 / bf16 */
    long long c = neo__cu_batch_chunk(&g.pl, g.work, g.max_cells, cell_bytes, st->n_sm, *occ, f);
    while (!neo__cu_group_size(&g, b, st->bt_key, c))
        if ((c *= 2) > NEO__CU_MAX_CELLS) return NEO_ERR_INVALID_ARG;
    if ((rc = neo__cu_work(st, stream, g.work_floats * sizeof(float))) != NEO_OK || (rc = neo__cu_counters(st, stream, (size_t)g.units)) != NEO_OK)
        return rc;
    if (len) st->kept[stream] |= 3; /* as a single attend with len: a graph may hold them */
    const size_t  tab = (size_t)g.m * sizeof(neo__cu_attn);
    neo__cu_stage sg;
    char         *dev;
    if ((rc = neo__cu_bt_begin(st, stream, tab + ((size_t)g.m + 1) * sizeof(int), &sg)) != NEO_OK) return rc;
    neo__cu_batch_fill(st, b, &g, c, stream, (neo__cu_attn *)sg.host, (int *)(sg.host + tab));
    if ((rc = neo__cu_bt_end(st, stream, &sg, &dev)) != NEO_OK) return rc;
    const neo__cu_batch t = {(const neo__cu_attn *)dev, (const int *)(dev + tab), g.m};
    void               *args[] = {(void *)&t};
    const dim3          grid((unsigned)g.blocks), block((unsigned)g.pl.threads);
    rc = neo__cu_launch(st, fn, grid, block, g.pl.smem, s, args); /* with len too: each block reads its length after its wait */
    return rc;
}

/* Every entry of b: each tensor-core group in one launch, the other entries one attend each. */
static int neo__cu_attend_batch_plan(neo__cuda *st, const neo__attn_batch *b, int stream, const neo__cu_force *f) {
    int          ok, rc;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !b || b->n < 1 || !b->entries) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    if ((rc = neo__cu_batch_keys(st, b, f)) != NEO_OK) return rc;
    for (int i = 0; i < b->n; i++) {
        int key = st->bt_key[i], m = 0;
        if (key == 0) continue; /* launched with its group */
        for (int j = i; j < b->n && key > 0; j++) m += st->bt_key[j] == key;
        if (m == 1) key = -1; /* a group of one: the single attend's own plan fills the device better */
        rc = key < 0 ? neo__cu_attend_plan(st, &b->entries[i], stream, f) : neo__cu_batch_group(st, b, key, stream, s, f);
        if (rc != NEO_OK) return rc;
        for (int j = i; j < b->n && key > 0; j++)
            if (st->bt_key[j] == key) st->bt_key[j] = 0;
    }
    return NEO_OK;
}

static int neo__cu_attend_batch(void *state, const neo__attn_batch *b, int stream) {
    const neo__cu_force f = {-1, -1, 0, 0, 0};
    return neo__cu_attend_batch_plan((neo__cuda *)state, b, stream, &f);
}

/* Every append of a[0..n) (distinct layers' rows) in one launch of neo__append_batch_kernel: each
   entry's parameters as its own append's one launch would have them (neo__cu_app_args) and its
   first block, in a staged table. One entry, or more blocks than a launch takes (2^30 rows:
   beyond any batch of one token a layer), go one append each, and then a failed launch leaves
   the entries before it appended. */
static int neo__cu_append_batch(void *state, const neo__append_args *a, int n, int stream) {
    int          ok, rc;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    long long    blocks = 0;
    if (!ok || !a || n < 1) return NEO_ERR_INVALID_ARG;
    for (int i = 0; i < n; i++) {
        if (!neo__cu_append_ok(&a[i])) return NEO_ERR_INVALID_ARG;
        if (blocks < (1LL << 30)) blocks += (long long)a[i].n_tokens * (a[i].h1 - a[i].h0); /* each term < 2^62 */
    }
    if (n == 1 || blocks >= (1LL << 30)) {
        for (int i = 0; i < n; i++)
            if ((rc = neo__cu_append(state, &a[i], stream)) != NEO_OK) return rc;
        return NEO_OK;
    }
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    const size_t  tab = (size_t)n * sizeof(neo__cu_app);
    neo__cu_stage sg;
    char         *dev;
    if ((rc = neo__cu_bt_begin(st, stream, tab + ((size_t)n + 1) * sizeof(int), &sg)) != NEO_OK) return rc;
    neo__cu_app *P = (neo__cu_app *)sg.host;
    int         *start = (int *)(sg.host + tab);
    start[0] = 0;
    for (int i = 0; i < n; i++) {
        P[i] = neo__cu_app_args(&a[i]);
        start[i + 1] = start[i] + P[i].n_all * P[i].nh;
    }
    if ((rc = neo__cu_bt_end(st, stream, &sg, &dev)) != NEO_OK) return rc;
    neo__cu_clear();
    neo__append_batch_kernel<<<dim3((unsigned)blocks, 2), 128, 0, s>>>((const neo__cu_app *)dev, (const int *)(dev + tab), n);
    return neo__cu_launched();
}

/* =============================================================================================
   >>test  entries for tests/test_cuda_ops.c only: not API, declared there by hand
   ============================================================================================= */

/* An attend with a forced plan, so that the tests run every kernel and block shape whatever the
   planner would pick: kernel NEO__KER_* (0 tensor-core, 1 CUDA-core float32, 2 generic) or -1,
   shape (tensor-core: 0 wide, 1 narrow) or -1, max_splits > 0 caps the split count.
   NEO_ERR_UNSUPPORTED when the forced kernel or shape cannot serve the attend. */
extern "C" int neo__cu_test_attend(void *state, const neo__attn_args *a, int stream, int kernel, int shape, int max_splits) {
    const neo__cu_force f = {kernel, shape, max_splits, 0, 0};
    if (!state) return NEO_ERR_INVALID_ARG;
    return neo__cu_attend_plan((neo__cuda *)state, a, stream, &f);
}
/* the same, the splits merged through global memory whatever the plan (tests: = the cluster's merge, bit for bit) */
extern "C" int neo__cu_test_attend_global(void *state, const neo__attn_args *a, int stream, int kernel, int shape, int max_splits) {
    const neo__cu_force f = {kernel, shape, max_splits, 0, 1};
    if (!state) return NEO_ERR_INVALID_ARG;
    return neo__cu_attend_plan((neo__cuda *)state, a, stream, &f);
}
/* Moves the early read of the length of every later attend with len by `offset` cells (tests:
   that tiles requested for a wrong placement are requested again, with the same bits). */
extern "C" int neo__cu_test_hint(void *state, int offset) {
    if (!state) return NEO_ERR_INVALID_ARG;
    ((neo__cuda *)state)->hint = offset;
    return NEO_OK;
}
/* Resident blocks an SM of the wide tensor-core kernel with (len 1) or without device-side
   lengths, for f16 / bf16 (type 0 / 1) and head_dim 64 / 128 / 256 (dc 0..2), as the planner
   asked them; 0 when no attend has asked yet, -1 for an index out of range (tests: that the wide
   shape is one block an SM whatever registers the compiler gave it). */
extern "C" int neo__cu_test_wide_blocks(void *state, int len, int type, int dc) {
    if (!state || len < 0 || len > 1 || type < 0 || type > 1 || dc < 0 || dc > 2) return -1;
    return ((const neo__cuda *)state)->occ_mma[len][type][dc][0];
}
/* how many attends so far merged their splits in a cluster (tests: that the cluster merge ran) */
extern "C" unsigned long long neo__cu_test_clusters(void *state) { return state ? ((const neo__cuda *)state)->n_cl : 0; }

/* A batch with a forced tensor-core block shape (0 wide, 1 narrow, -1 the planner's), a cap on
   the splits of an entry (max_splits > 0) and the waves its chunk is sized for (waves > 0). */
extern "C" int neo__cu_test_attend_batch(void *state, const neo__attn_batch *b, int stream, int shape, int max_splits, int waves) {
    const neo__cu_force f = {-1, shape, max_splits, waves, 0};
    if (!state) return NEO_ERR_INVALID_ARG;
    return neo__cu_attend_batch_plan((neo__cuda *)state, b, stream, &f);
}

/* The virtual architecture the loaded kernels were compiled from (ptx_version, 80 for the sm_80
   path) and the one they run as (binary_version): they differ when the driver compiled PTX. */
extern "C" int neo__cu_test_image(int device, int *ptx_version, int *binary_version) {
    cudaFuncAttributes fa;
    if (!ptx_version || !binary_version || cudaSetDevice(device) != cudaSuccess) return NEO_ERR_INVALID_ARG;
    if (cudaFuncGetAttributes(&fa, (const void *)neo__attn_merge) != cudaSuccess) {
        (void)cudaGetLastError();
        return NEO_ERR_UNSUPPORTED;
    }
    *ptx_version = fa.ptxVersion;
    *binary_version = fa.binaryVersion;
    return NEO_OK;
}

/* =============================================================================================
   >>ops.model  the decode loop's operations
   ============================================================================================= */


template <int EPI> static const void *neo__mv_fn(bool norm) {
    return norm ? (const void *)neo__matvec_kernel<EPI, true> : (const void *)neo__matvec_kernel<EPI, false>;
}
static int neo__cu_matvec(void *state, const neo__matvec_args *m, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !neo__matvec_ok(m)) return NEO_ERR_INVALID_ARG;
    const int epi = m->epilogue;
    if (!m->d) return NEO_OK;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    neo__cu_mv a;
    a.y = m->y;
    a.w = m->w;
    a.w_mul = m->w_mul;
    a.x = m->x;
    a.norm = m->norm;
    a.n = m->n;
    a.units = epi == NEO__MV_ROPE ? m->d / 2 : m->d;
    a.vec = m->n % 4 == 0 && (uintptr_t)m->w % 16 == 0 && (uintptr_t)m->x % 16 == 0 &&
            (!m->w_mul || (uintptr_t)m->w_mul % 16 == 0) && (!m->norm || (uintptr_t)m->norm % 16 == 0);
    a.pos = m->pos;
    a.pos_dev = m->pos_dev;
    a.rope_q = m->rope_q;
    a.rope_k = m->rope_k;
    a.head_size = m->head_size;
    a.app_on = m->app != NULL;
    if (m->app) a.app = neo__cu_app_args(m->app); /* as the append op's one launch */
    else memset(&a.app, 0, sizeof a.app);
    const bool  norm = m->norm != NULL;
    const void *fn = epi == NEO__MV_STORE ? neo__mv_fn<NEO__MV_STORE>(norm) : epi == NEO__MV_ADD ? neo__mv_fn<NEO__MV_ADD>(norm)
                     : epi == NEO__MV_SWIGLU ? neo__mv_fn<NEO__MV_SWIGLU>(norm) : neo__mv_fn<NEO__MV_ROPE>(norm);
    int         rc;
    if ((rc = neo__cu_occupancy(&st->occ_mv[epi][norm], fn, 256, 0)) != NEO_OK) return rc;
    /* Warps a unit: as many as one wave of resident blocks holds (a second, partly empty wave
       costs more than fewer warps a row gain), each still 128+ floats. */
    const long long cap = 8LL * st->occ_mv[epi][norm] * st->n_sm;
    a.R = 1;
    while (a.R < 8 && (long long)a.units * a.R * 2 <= cap && m->n / (2 * a.R) >= 128) a.R *= 2;
    const long long blocks = ((long long)a.units + 8 / a.R - 1) / (8 / a.R);
    if (blocks > 0x7fffffffLL) return NEO_ERR_INVALID_ARG;
    void *args[] = {&a};
    return neo__cu_launch(st, fn, dim3((unsigned)blocks), dim3(256), 0, s, args);
}

/* The decode loop's step as a graph. Thread-local capture: another thread's unsafe calls (an
   engine's own) do not end it. */
static int neo__cu_graph_begin(void *state, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    return neo__cu_status(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
}
static int neo__cu_graph_end(void *state, int stream, void **graph) {
    int             ok;
    neo__cuda      *st = (neo__cuda *)state;
    cudaStream_t    s = neo__cu_stream(st, stream, &ok);
    cudaGraph_t     g = NULL;
    cudaGraphExec_t ge = NULL;
    if (!ok || !graph) return NEO_ERR_INVALID_ARG;
    *graph = NULL;
    neo__cu_on neo__on(st->device); /* the graph is instantiated on the current device */
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    const cudaError_t e = cudaStreamEndCapture(s, &g);
    if (e != cudaSuccess || !g) { /* an op broke the capture */
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return NEO_ERR_UNSUPPORTED;
    }
    const cudaError_t ei = cudaGraphInstantiate(&ge, g, 0);
    (void)cudaGraphDestroy(g);
    if (ei != cudaSuccess) {
        (void)cudaGetLastError();
        return neo__cu_err(ei == cudaErrorMemoryAllocation ? ei : cudaErrorUnknown);
    }
    *graph = ge;
    return NEO_OK;
}
static int neo__cu_graph_launch(void *state, void *graph, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !graph) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    return neo__cu_status(cudaGraphLaunch((cudaGraphExec_t)graph, s));
}
static void neo__cu_graph_free(void *state, void *graph) {
    if (!state || !graph) return;
    neo__cu_on neo__on(((neo__cuda *)state)->device);
    (void)cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

static int neo__cu_argmax(void *state, int *out, const float *x, int n, int stream) {
    int          ok;
    neo__cuda   *st = (neo__cuda *)state;
    cudaStream_t s = neo__cu_stream(st, stream, &ok);
    if (!ok || !out || !x || n < 1) return NEO_ERR_INVALID_ARG;
    neo__cu_on neo__on(st->device);
    if (!neo__on.ok) return NEO_ERR_DEVICE;
    neo__cu_clear();
    neo__argmax_kernel<<<1, 1024, 0, s>>>(out, x, n);
    return neo__cu_launched();
}

/* ---------------------------------------------------------------------------------------------
   The bridge's three tables (neo_attn.h, "the GPU bridge"), each filled when the caller's ABI
   version of it matches. init gives the runtime's log CUDA's own reason when it fails (a driver
   too old for this runtime, no device, a bad ordinal).
   --------------------------------------------------------------------------------------------- */
#include <stdio.h>

static int neo__cu_init_why(int device, void *engine_stream, void **state, char *why, size_t why_size) {
    int rc = neo__cu_init(device, engine_stream, state);
    if (rc != NEO_OK && why && why_size) {
        int         n = 0, prev = -1; /* the thread's device, set back after the probe below */
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e == cudaSuccess && cudaGetDevice(&prev) != cudaSuccess) prev = -1;
        if (e != cudaSuccess) snprintf(why, why_size, "%s", cudaGetErrorString(e));
        else if (device < 0 || device >= n) snprintf(why, why_size, "no CUDA device %d (%d present)", device, n);
        else if (rc == NEO_ERR_NO_MEMORY) snprintf(why, why_size, "out of host memory");
        else if ((e = cudaSetDevice(device)) != cudaSuccess) snprintf(why, why_size, "%s", cudaGetErrorString(e));
        else if (rc == NEO_ERR_UNSUPPORTED) {
            int major = 0, minor = 0;
            (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
            (void)cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
            if (major < 8) snprintf(why, why_size, "compute capability %d.%d; the kernels need 8.0 or later", major, minor);
            else
                snprintf(why, why_size, "no kernel image for compute capability %d.%d in this build (CUDA_ARCHS)", major, minor);
        } else snprintf(why, why_size, "CUDA stream, event or attribute setup failed");
        if (prev >= 0) (void)cudaSetDevice(prev);
        (void)cudaGetLastError();
    }
    return rc;
}
static int neo__cu_launch_async(void *state) { return state && !neo__cu_launch_blocking(state); }

extern "C" int neo__cuda_get_mem(int abi_version, neo__dev_mem *t) {
    if (abi_version != NEO__DEV_MEM_ABI) return (int)NEO_ERR_UNSUPPORTED;
    if (!t) return (int)NEO_ERR_INVALID_ARG;
    t->init = neo__cu_init_why;
    t->release = neo__cu_release;
    t->dev_alloc = neo__cu_dev_alloc;
    t->dev_free = neo__cu_dev_free;
    t->host_alloc = neo__cu_host_alloc;
    t->host_free = neo__cu_host_free;
    t->copy = neo__cu_copy;
    t->copy2d = neo__cu_copy2d;
    t->record = neo__cu_record;
    t->wait = neo__cu_wait;
    t->event_sync = neo__cu_event_sync;
    t->stream_sync = neo__cu_stream_sync;
    t->capturing = neo__cu_capturing;
    return (int)NEO_OK;
}

extern "C" int neo__cuda_get_attn(int abi_version, neo__dev_attn *t) {
    if (abi_version != NEO__DEV_ATTN_ABI) return (int)NEO_ERR_UNSUPPORTED;
    if (!t) return (int)NEO_ERR_INVALID_ARG;
    t->append = neo__cu_append;
    t->attend = neo__cu_attend;
    t->copy_signal = neo__cu_copy_signal;
    t->await_copy = neo__cu_await_copy;
    t->launch_async = neo__cu_launch_async;
    t->attend_batch = neo__cu_attend_batch;
    t->append_batch = neo__cu_append_batch;
    t->merge = neo__cu_merge_states;
    t->ring = neo__cu_ring;
    t->answer = neo__cu_answer;
    t->host_fn = neo__cu_host_fn;
    t->set_length = neo__cu_set_length;
    return (int)NEO_OK;
}

extern "C" int neo__cuda_get_model(int abi_version, neo__dev_model *t) {
    if (abi_version != NEO__DEV_MODEL_ABI) return (int)NEO_ERR_UNSUPPORTED;
    if (!t) return (int)NEO_ERR_INVALID_ARG;
    t->matvec = neo__cu_matvec;
    t->argmax = neo__cu_argmax;
    t->graph_begin = neo__cu_graph_begin;
    t->graph_end = neo__cu_graph_end;
    t->graph_launch = neo__cu_graph_launch;
    t->graph_free = neo__cu_graph_free;
    return (int)NEO_OK;
}
