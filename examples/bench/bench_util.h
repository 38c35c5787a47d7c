/* bench_util.h - the helpers both benchmarks (bench_cpu.c, bench.c) use: a monotonic clock, a
   qsort comparator and the CPU's name. Included once by each program. */
#ifndef NEO_BENCH_UTIL_H
#define NEO_BENCH_UTIL_H

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* the "model name" line of /proc/cpuinfo, or "unknown" */
static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (!c) break;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            size_t n = strcspn(c, "\r\n");
            if (n >= cap) n = cap - 1;
            memcpy(buf, c, n);
            buf[n] = 0;
            break;
        }
    }
    fclose(f);
}

#endif
