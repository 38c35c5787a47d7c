/* cpu_isa.h - what the tests expect of neo_runtime_desc.cpu_isa on this machine. The header is
   the one place that reads the CPU's features; the tests take what NEO_CPU_AUTO picks (read back
   through neo_runtime_get_info) as the best ISA present, and expect every ISA up to it, and none
   above it, to be accepted when forced (test_api checks that). The ISAs are ordered: the AVX-512
   kernels need AVX2's features too, and a build with NEO_ATTN_NO_SIMD has only the scalar path.
   Include after neo_attn.h. */
#ifndef NEO_TEST_CPU_ISA_H
#define NEO_TEST_CPU_ISA_H

#include <string.h>

/* the ISA that NEO_CPU_AUTO picks: the best one present (scalar if a runtime cannot be made) */
static inline neo_cpu_isa test_cpu_best(void) {
    static neo_cpu_isa best = NEO_CPU_AUTO;
    if (best == NEO_CPU_AUTO) {
        neo_runtime_desc rd;
        neo_runtime_info ri;
        neo_runtime     *rt = NULL;
        memset(&rd, 0, sizeof rd);
        rd.n_threads = 1;
        best = NEO_CPU_SCALAR;
        if (neo_runtime_create(&rd, &rt) == NEO_OK && neo_runtime_get_info(rt, &ri) == NEO_OK) best = ri.cpu_isa;
        neo_runtime_destroy(rt);
    }
    return best;
}

static inline int test_cpu_has(neo_cpu_isa isa) {
    return isa != NEO_CPU_AUTO && (int)isa <= (int)test_cpu_best();
}

/* the threads a runtime asked for t runs: one in a build without threads */
#if defined(NEO_ATTN_NO_THREADS) && NEO_ATTN_NO_THREADS
#define THREADS(t) 1
#else
#define THREADS(t) (t)
#endif

#endif
