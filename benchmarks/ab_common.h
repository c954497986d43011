/* What benchmarks/ab_*.c share: a monotonic clock, and one build of
 * libapproxmul opened with its own symbols (RTLD_LOCAL) and its thread
 * count and multiplier set. */
#ifndef APPROXMUL_BENCHMARKS_AB_COMMON_H
#define APPROXMUL_BENCHMARKS_AB_COMMON_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "approxmul.h"

typedef approxmul_status (*ab_spec_fn)(const char *, approxmul_multiplier **);
typedef approxmul_status (*ab_threads_fn)(int);

static double ab_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef approxmul_status (*ab_table_fn)(const int32_t *, int64_t, int, int, approxmul_multiplier **);

/* "random-table:bits=N" (N in 1..8): unsigned N-bit products drawn from a
 * fixed-seed generator over 0..65535, the kind of table bench_gemm's
 * "random 8x8 table" row times; the same table in every build. */
static approxmul_status ab_random_table(void *lib, int bits, approxmul_multiplier **m) {
    static int32_t table[1 << 16];
    const int64_t len = (int64_t)1 << (2 * bits);
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (int64_t i = 0; i < len; ++i) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        table[i] = (int32_t)(state >> 48);
    }
    return ((ab_table_fn)dlsym(lib, "approxmul_multiplier_from_table"))(table, len, bits, 0, m);
}

/* The library at path, or NULL after a message; *m = spec's multiplier. */
static void *ab_open(const char *path, int threads, const char *spec, approxmul_multiplier **m) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return NULL;
    }
    ((ab_threads_fn)dlsym(lib, "approxmul_set_num_threads"))(threads);
    int table_bits = 0;
    const approxmul_status status =
        sscanf(spec, "random-table:bits=%d", &table_bits) == 1 && table_bits >= 1 && table_bits <= 8
            ? ab_random_table(lib, table_bits, m)
            : ((ab_spec_fn)dlsym(lib, "approxmul_multiplier_from_spec"))(spec, m);
    if (status != APPROXMUL_OK) {
        fprintf(stderr, "%s: not a multiplier spec\n", spec);
        return NULL;
    }
    return lib;
}

/* The timing the harnesses share: for each of `rounds` rounds, for each
 * build l (0 = OLD, 1 = NEW), a 50 ms pause and then 10 calls of call(l,
 * context); best[l] receives build l's fastest call in seconds. A call
 * returns an approxmul_status; the first failure is reported under `what`
 * and returned (APPROXMUL_OK when every call succeeded). */
typedef approxmul_status (*ab_call_fn)(int l, void *context);

static approxmul_status ab_alternate(int rounds, ab_call_fn call, void *context, const char *what,
                                     double best[2]) {
    best[0] = best[1] = 1e9;
    for (int r = 0; r < rounds; ++r)
        for (int l = 0; l < 2; ++l) {
            usleep(50000);
            for (int i = 0; i < 10; ++i) {
                const double start = ab_now();
                const approxmul_status status = call(l, context);
                const double t = ab_now() - start;
                if (status != APPROXMUL_OK) {
                    fprintf(stderr, "%s failed: status %d\n", what, (int)status);
                    return status;
                }
                if (t < best[l]) best[l] = t;
            }
        }
    return APPROXMUL_OK;
}

#endif
