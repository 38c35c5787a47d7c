/* cpu_isa.h - what the tests expect of neo_runtime_desc.cpu_isa on this machine, found
   independently of neo_attn: the AVX2 kernels need AVX2 + FMA + F16C, the AVX-512 ones AVX-512 F,
   BW and VL; a build with NEO_ATTN_NO_SIMD has only the scalar path.
   (clang has no "f16c" for __builtin_cpu_supports, so F16C is read with cpuid.) */
#ifndef NEO_TEST_CPU_ISA_H
#define NEO_TEST_CPU_ISA_H

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static inline int test_cpu_has(neo_cpu_isa isa) {
    if (isa == NEO_CPU_SCALAR) return 1;
#if (defined(__x86_64__) || defined(__i386__)) && !(defined(NEO_ATTN_NO_SIMD) && NEO_ATTN_NO_SIMD)
    {
        unsigned a = 0, b = 0, c = 0, d = 0;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
        __builtin_cpu_init();
        if (isa == NEO_CPU_AVX2)
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
        if (isa == NEO_CPU_AVX512)
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl");
    }
#endif
    return 0;
}

/* the threads a runtime asked for t runs: one in a build without threads */
#if defined(NEO_ATTN_NO_THREADS) && NEO_ATTN_NO_THREADS
#define THREADS(t) 1
#else
#define THREADS(t) (t)
#endif

/* the ISA that NEO_CPU_AUTO must pick: the best one present */
static inline neo_cpu_isa test_cpu_best(void) {
    if (test_cpu_has(NEO_CPU_AVX512)) return NEO_CPU_AVX512;
    if (test_cpu_has(NEO_CPU_AVX2)) return NEO_CPU_AVX2;
    return NEO_CPU_SCALAR;
}

#endif
