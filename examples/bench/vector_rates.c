/* vector_rates.c - how many zmm instructions a ns each thread issues, with threads pinned to given
   CPUs (a benchmark tool, not a test): FMAs, shuffles, f16 widenings (vcvtph2ps) and a mix of 8
   FMAs and 4 shuffles, each kind alone in registers, 12 independent instructions a loop. On a VM
   it shows whether its vCPUs have their cores' vector units to themselves when all are busy.

       make build/vector-rates && build/vector-rates

   x86-64 with AVX-512 and at least 16 CPUs; on fewer, the pinning to a missing CPU fails and
   those threads run where the system puts them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <stdint.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static uint16_t          buf[64][256] __attribute__((aligned(64)));
static pthread_barrier_t bar;
typedef struct {
    int    cpu, kind;
    double rate;
} arg_t;
#define N 20000000L
static void *run(void *p) {
    arg_t    *a = p;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(a->cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
    uint16_t *b = buf[a->cpu % 64];
    long      n = N;
    pthread_barrier_wait(&bar);
    double t0 = now();
    if (a->kind == 0)
        __asm__ volatile("1:\n\t"
                         "vfmadd231ps %%zmm0,%%zmm1,%%zmm2\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm3\n\t vfmadd231ps "
                         "%%zmm0,%%zmm1,%%zmm4\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm5\n\t"
                         "vfmadd231ps %%zmm0,%%zmm1,%%zmm6\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm7\n\t vfmadd231ps "
                         "%%zmm0,%%zmm1,%%zmm8\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm9\n\t"
                         "vfmadd231ps %%zmm0,%%zmm1,%%zmm10\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm11\n\t vfmadd231ps "
                         "%%zmm0,%%zmm1,%%zmm12\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm13\n\t"
                         "dec %0\n\t jnz 1b"
                         : "+r"(n)::"zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12",
                           "zmm13");
    else if (a->kind == 1)
        __asm__ volatile("1:\n\t"
                         "vshufps $0x88,%%zmm0,%%zmm1,%%zmm2\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm3\n\t vshufps "
                         "$0x88,%%zmm0,%%zmm1,%%zmm4\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm5\n\t"
                         "vshufps $0x88,%%zmm0,%%zmm1,%%zmm6\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm7\n\t vshufps "
                         "$0x88,%%zmm0,%%zmm1,%%zmm8\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm9\n\t"
                         "vshufps $0x88,%%zmm0,%%zmm1,%%zmm10\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm11\n\t vshufps "
                         "$0x88,%%zmm0,%%zmm1,%%zmm12\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm13\n\t"
                         "dec %0\n\t jnz 1b"
                         : "+r"(n)::"zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12",
                           "zmm13");
    else if (a->kind == 2)
        __asm__ volatile(
            "1:\n\t"
            "vcvtph2ps (%1),%%zmm2\n\t vcvtph2ps 32(%1),%%zmm3\n\t vcvtph2ps 64(%1),%%zmm4\n\t vcvtph2ps 96(%1),%%zmm5\n\t"
            "vcvtph2ps 128(%1),%%zmm6\n\t vcvtph2ps 160(%1),%%zmm7\n\t vcvtph2ps 192(%1),%%zmm8\n\t vcvtph2ps "
            "224(%1),%%zmm9\n\t"
            "vcvtph2ps 256(%1),%%zmm10\n\t vcvtph2ps 288(%1),%%zmm11\n\t vcvtph2ps 320(%1),%%zmm12\n\t vcvtph2ps "
            "352(%1),%%zmm13\n\t"
            "dec %0\n\t jnz 1b"
            : "+r"(n)
            : "r"(b)
            : "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13");
    else
        __asm__ volatile(
            "1:\n\t" /* 8 FMAs + 4 shuffles */
            "vfmadd231ps %%zmm0,%%zmm1,%%zmm2\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm3\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm10\n\t "
            "vfmadd231ps %%zmm0,%%zmm1,%%zmm4\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm5\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm11\n\t"
            "vfmadd231ps %%zmm0,%%zmm1,%%zmm6\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm7\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm12\n\t "
            "vfmadd231ps %%zmm0,%%zmm1,%%zmm8\n\t vfmadd231ps %%zmm0,%%zmm1,%%zmm9\n\t vshufps $0x88,%%zmm0,%%zmm1,%%zmm13\n\t"
            "dec %0\n\t jnz 1b"
            : "+r"(n)::"zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", "zmm10", "zmm11", "zmm12", "zmm13");
    a->rate = 12.0 * N / (now() - t0) / 1e9;
    return 0;
}
int main(void) {
    static const char *kinds[4] = {"fma", "shuf", "cvtph2ps", "8fma+4shuf"};
    static const int   sets[][17] = {{1, 0},
                                     {2, 0, 1},
                                     {2, 0, 8},
                                     {2, 0, 15},
                                     {8, 0, 1, 2, 3, 4, 5, 6, 7},
                                     {8, 0, 2, 4, 6, 8, 10, 12, 14},
                                     {16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}};
    printf("zmm instructions per ns per thread (threads pinned to the CPUs listed)\n");
    for (int k = 0; k < 4; k++)
        for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
            int       nt = sets[si][0];
            pthread_t th[16];
            arg_t     a[16];
            pthread_barrier_init(&bar, 0, nt);
            for (int i = 0; i < nt; i++) {
                a[i].cpu = sets[si][1 + i];
                a[i].kind = k;
                pthread_create(&th[i], 0, run, &a[i]);
            }
            double mn = 1e9, mx = 0;
            for (int i = 0; i < nt; i++) {
                pthread_join(th[i], 0);
                if (a[i].rate < mn) mn = a[i].rate;
                if (a[i].rate > mx) mx = a[i].rate;
            }
            printf("%-11s threads %2d cpus", kinds[k], nt);
            for (int i = 0; i < nt && i < 8; i++)
                printf(" %d", sets[si][1 + i]);
            if (nt > 8) printf(" ..");
            printf(": min %.2f max %.2f\n", mn, mx);
            pthread_barrier_destroy(&bar);
        }
}
