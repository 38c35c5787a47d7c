/* ring_racecheck.cu - the tensor-core decode kernel's sm_90 shared-memory ring alone, for
   compute-sanitizer's racecheck (docs/BENCHMARKS.md, "Correctness checks, latest").

   Each warp streams 16-row K and V tiles of head_dim 256 (bf16-sized rows of 512 bytes) through
   its own 3-stage ring: lane 0 issues bulk copies completing on the stage's mbarrier, every lane
   reads the stage after mbarrier.try_wait.parity, and the stage is refilled after __syncwarp, as
   neo__attn_mma does. A partial last tile has its missing V rows zeroed by the lanes first
   (generic stores, fence.proxy.async, __syncwarp). The flags add, one at a time:
     2   the first tile asked before griddepcontrol.wait, under a programmatic dependent launch
     4   clusters of 4 (the copies' .shared::cluster form)
     8   the rings reused by generic stores and loads after __syncthreads (the epilogue)
     16  2640 blocks whose only tile has 2 rows, so that the reads of its other K rows see what
         earlier blocks copied into that shared memory
     32  with 16: those K rows zeroed first, like the V rows

       nvcc -arch=sm_90 -O2 -std=c++17 examples/bench/ring_racecheck.cu -o build/ring_racecheck
       compute-sanitizer --tool racecheck --racecheck-report all build/ring_racecheck [FLAGS]

   Every run of flags 0, 2, 4, 8, 14, 16 and 48 on an H200 (CUDA 13.0) was clean, although this
   ring has no proxy fence after its barriers' init: it does not reproduce the library kernel's
   racecheck warnings, which needed a clustered launch with copies issued before the wait and
   which that fence removed (docs/BENCHMARKS.md). */
#include <cstdio>
#include <cstdint>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)
constexpr int W = 4, NS = 3, CPR = 32, TCH = 16 * CPR, TB = TCH * 16; /* head_dim 256, bf16 */
struct P { const uint4 *k, *v; float *out; int cells; int flags; };
__global__ void __launch_bounds__(W * 32) ring(const P p) {
    extern __shared__ uint4 sm[];
    __shared__ __align__(8) unsigned long long bar[W][NS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint4 *r = sm + (size_t)warp * NS * 2 * TCH;
    const int ntiles = (p.cells + 15) / 16, nw = ntiles > warp ? (ntiles - warp + W - 1) / W : 0;
    const uint4 *kg = p.k + (size_t)blockIdx.x * p.cells * CPR, *vg = p.v + (size_t)blockIdx.x * p.cells * CPR;
    if (lane == 0) {
        for (int s = 0; s < NS; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(&bar[warp][s])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
    auto load = [&](int j, int s) {
        const int t = warp + j * W, rows = min(16, p.cells - t * 16);
        uint4 *ks = r + s * 2 * TCH, *vs = ks + TCH;
        if (rows < 16) {
            for (int idx = rows * CPR + lane; idx < TCH; idx += 32) {
                vs[idx] = make_uint4(0u, 0u, 0u, 0u);
                if (p.flags & 32) ks[idx] = make_uint4(0u, 0u, 0u, 0u);
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncwarp();
        }
        if (lane == 0) {
            const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[warp][s]), n = (unsigned)(rows * CPR * 16);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(2 * n) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             (unsigned)__cvta_generic_to_shared(ks)), "l"(kg + (size_t)t * TCH), "r"(n), "r"(b) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             (unsigned)__cvta_generic_to_shared(vs)), "l"(vg + (size_t)t * TCH), "r"(n), "r"(b) : "memory");
        }
    };
    int pre = 0;
    if (p.flags & 2) { /* first tile before the wait */
        if (nw > 0) load(0, 0), pre = 1;
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    for (int s = pre; s < NS && s < nw; s++) load(s, s);
    float acc = 0.0f;
    for (int j = 0; j < nw; j++) {
        const int s = j % NS;
        const unsigned b = (unsigned)__cvta_generic_to_shared(&bar[warp][s]), par = (unsigned)((j / NS) & 1);
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(b), "r"(par) : "memory");
        const unsigned base = (unsigned)__cvta_generic_to_shared(r + (size_t)s * 2 * TCH);
        for (int i = lane; i < 2 * TCH; i += 32) {
            uint4 x;
            asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(base + 16u * i));
            acc += __uint_as_float((x.x & 0x3fffffffu) | 0x3c000000u) + __uint_as_float((x.w & 0x3fffffffu) | 0x3c000000u);
        }
        __syncwarp();
        if (j + NS < nw) load(j + NS, s);
    }
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (p.flags & 8) { /* the epilogue: rings reused */
        __syncthreads();
        float *red = reinterpret_cast<float *>(sm);
        if (lane == 0) red[warp] = acc;
        __syncthreads();
        if (threadIdx.x == 0) { float t = 0.0f; for (int w = 0; w < W; w++) t += red[w]; p.out[blockIdx.x * W] = t; }
    } else if (lane == 0) p.out[blockIdx.x * W + warp] = acc;
}
static int run(int flags, int blocks, int cells) {
    const size_t smem = (size_t)W * NS * 2 * TB, n = (size_t)blocks * cells * CPR * 16;
    uint4 *k, *v; float *o;
    CK(cudaMalloc(&k, n)); CK(cudaMalloc(&v, n)); CK(cudaMalloc(&o, sizeof(float) * blocks * W));
    CK(cudaMemset(k, 0x3c, n)); CK(cudaMemset(v, 0x2b, n));
    CK(cudaFuncSetAttribute(ring, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    if (flags & 4) CK(cudaFuncSetAttribute(ring, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    P p = {k, v, o, cells, flags};
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[2];
    int na = 0;
    cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(W * 32), cfg.dynamicSmemBytes = smem;
    if (flags & 2) {
        at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[na++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (flags & 4) {
        at[na].id = cudaLaunchAttributeClusterDimension;
        at[na].val.clusterDim.x = 4, at[na].val.clusterDim.y = 1, at[na++].val.clusterDim.z = 1;
    }
    cfg.attrs = at, cfg.numAttrs = na;
    float h0 = 0.0f;
    int bad = 0;
    for (int rep = 0; rep < 6; rep++) {
        CK(cudaLaunchKernelEx(&cfg, ring, p));
        CK(cudaGetLastError());
        if (rep % 3 == 2) {
            CK(cudaDeviceSynchronize());
            float h;
            CK(cudaMemcpy(&h, o, sizeof h, cudaMemcpyDeviceToHost));
            if (rep == 2) h0 = h; else bad |= h != h0;
        }
    }
    printf("flags %d, %d blocks x %d cells: %s (out[0] %g)\n", flags, blocks, cells, bad ? "DIFFER" : "same", h0);
    cudaFree(k); cudaFree(v); cudaFree(o);
    return bad;
}
int main(int argc, char **argv) {
    int flags = argc > 1 ? atoi(argv[1]) : 14, f = 0;
    if (flags & 16) { /* every block's only tile partial (2 rows): its other K rows hold what earlier blocks copied there */
        run(flags, 2640, 2);
        return 0;
    }
    f |= run(flags, 16, 200);  /* partial last tiles: 200 = 12 x 16 + 8 */
    f |= run(flags, 132, 1000);
    return f;
}
