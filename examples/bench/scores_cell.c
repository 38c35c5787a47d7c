/* scores_cell.c - ns a cell of one SIMD scores kernel, alone and in cache (a benchmark tool, not a
   test): a tile of NQ f16 queries of head_dim D against 256 cells (their K rows in L1 or L2), the
   kernel called block by block as a decode task calls it, best of 7 rounds of 3000 passes. Built
   against another copy of the header too (-I), it compares two versions of a kernel on one
   machine; run the two builds alternately, a machine's speed drifts:

       make build/scores-cell && build/scores-cell NQ D [avx2]        e.g. build/scores-cell 7 64
       cc -std=c11 -O3 -I../other examples/bench/scores_cell.c -o build/scores-cell-b -lm -lpthread */
#define NEO_ATTN_IMPLEMENTATION
#include "neo_attn.h"
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: scores-cell NQ D [avx2]\n");
        return 2;
    }
    int nq = atoi(argv[1]), d = atoi(argv[2]), avx2 = argc > 3 && !strcmp(argv[3], "avx2"), nc = 256, reps = 3000;
    if (nq < 1 || nq > 64 || d < 1 || d > 512) return 2;
    if (avx2 ? !__builtin_cpu_supports("avx2") : !__builtin_cpu_supports("avx512f")) {
        fprintf(stderr, "scores-cell: this CPU lacks %s\n", avx2 ? "AVX2" : "AVX-512");
        return 1;
    }
    uint16_t *k = (uint16_t *)malloc((size_t)nc * d * 2), *v = (uint16_t *)malloc((size_t)nc * d * 2); /* [nc][d] f16 */
    float    *q = (float *)malloc(sizeof(float) * nq * d), *s = (float *)malloc(sizeof(float) * nq * NEO__BLOCK);
    for (int i = 0; i < nc * d; i++)
        k[i] = neo__f32_to_f16((float)(rand() % 1000) / 1000.0f - 0.5f), v[i] = k[i];
    for (int i = 0; i < nq * d; i++)
        q[i] = (float)(rand() % 1000) / 1000.0f - 0.5f;
    double best = 1e30, sum = 0.0;
    for (int round = 0; round < 7; round++) {
        double t0 = now_ns();
        for (int it = 0; it < reps; it++)
            for (int b = 0; b < nc; b += NEO__BLOCK) {
                const char *kb = (const char *)k + (size_t)b * d * 2, *vb = (const char *)v + (size_t)b * d * 2;
                if (avx2)
                    neo__scores_avx2(s, q, kb, vb, NEO_TYPE_F16, nq, NEO__BLOCK, d, d, 1);
                else
                    neo__scores_avx512(s, q, kb, vb, NEO_TYPE_F16, nq, NEO__BLOCK, d, d, 1);
                sum += s[0];
            }
        double t = (now_ns() - t0) / ((double)reps * nc);
        if (t < best) best = t;
    }
    printf("%s scores, %d queries, head_dim %d, f16: %.2f ns a cell (best of 7; checksum %g)\n", avx2 ? "AVX2" : "AVX-512", nq,
           d, best, sum);
    free(k), free(v), free(q), free(s);
    return 0;
}
