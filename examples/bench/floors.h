/* floors.h - the floors of a decode-shaped kernel (examples/bench/floors.cu), for bench's sweep.
   bench_floor_setup sizes the grid for one layer shape (KV heads, cells, head_dim, query group;
   smem: dynamic shared memory each block holds at least; reader: how the blocks read, below)
   and returns its splits a head, or -1; bench_floor enqueues one call of a kind on stream s over a
   layer's device K and V ([n_kv][kstride] and [n_kv][vstride] elements of 2 bytes), 0 or -1. */
#ifndef BENCH_FLOORS_H
#define BENCH_FLOORS_H
#include <stddef.h>
#include <cuda_runtime_api.h>
#ifdef __cplusplus
extern "C" {
#endif
enum { BENCH_FLOOR_READ, BENCH_FLOOR_GLOBAL, BENCH_FLOOR_CLUSTER, BENCH_FLOOR_ATOMIC, BENCH_FLOOR_TAGGED, BENCH_FLOOR_TAGGED_SLICES,
       BENCH_FLOOR_KINDS };
/* readers: plain loads (the compiler's choice of registers), bulk copies into shared memory
   (sm_90), plain loads in at most 64 registers a thread, two blocks an SM; and the call's
   arithmetic on such blocks (sm_90, f16, head_dim 128, query group <= 8: global merge only, its
   outputs checked by bench_floor_check), each warp making q's two f16 parts, or (MMA_QB) the
   parts made once a block */
enum { BENCH_FLOOR_PLAIN, BENCH_FLOOR_BULK, BENCH_FLOOR_PLAIN64, BENCH_FLOOR_MMA, BENCH_FLOOR_MMA_QB, BENCH_FLOOR_READERS };
int  bench_floor_setup(int n_kv, int ctx, int d, int g, size_t smem, int reader);
void bench_floor_release(void);
int  bench_floor_has(int kind); /* the cluster and tagged kinds need 2-16 splits, the cluster sm_90; BENCH_FLOOR_MMA has the global kind only */
int  bench_floor(int kind, const void *k, const void *v, size_t kstride, size_t vstride, cudaStream_t s);
double bench_floor_check(const void *k, const void *v, size_t kstride, size_t vstride);
int    bench_floor_blocks(int kind);        /* resident blocks an SM for the set-up reader's kernel of that kind, or -1 */
/* BENCH_FLOOR_MMA's timeline: stamps on (each block's SM and the times of its steps, for the last
   64 calls) or off, 0 or -1; then bench_floor_timeline prints the last 64 calls' figures under the label what, 0 or -1 */
int    bench_floor_stamps(int on);
int    bench_floor_timeline(const char *what);
#ifdef __cplusplus
}
#endif
#endif
