/*
 * timing.h - the clock and the statistics shared by the bench programs
 * (loadgen.c, inproc.c), so every figure in one report is computed alike.
 * Header-only: each program is one translation unit.
 */
#ifndef SANDBOXD_BENCH_TIMING_H
#define SANDBOXD_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array; 0 for an empty one. */
static inline double pct(const double *v, size_t n, double p)
{
    size_t k;

    if (n == 0)
        return 0;
    k = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

/* Sort v and print n, p50, p99, mean, min and max as key=value lines. */
static inline void print_latencies(double *v, size_t n)
{
    double sum = 0;
    size_t i;

    qsort(v, n, sizeof *v, cmp_double);
    for (i = 0; i < n; i++)
        sum += v[i];
    printf("n=%zu\np50_us=%.1f\np99_us=%.1f\nmean_us=%.1f\nmin_us=%.1f\nmax_us=%.1f\n",
           n, pct(v, n, 50), pct(v, n, 99), n ? sum / (double)n : 0, n ? v[0] : 0,
           n ? v[n - 1] : 0);
}

/* Repeated runs of one script: wall and CPU times in us, sorted here;
 * prints the best and median wall time and the best CPU time in seconds. */
static inline void print_runs(double *wall, double *cpu, size_t n)
{
    qsort(wall, n, sizeof *wall, cmp_double);
    qsort(cpu, n, sizeof *cpu, cmp_double);
    printf("best_s=%.4f\nmedian_s=%.4f\nbest_cpu_s=%.4f\n", wall[0] / 1e6,
           pct(wall, n, 50) / 1e6, cpu[0] / 1e6);
}

#endif
