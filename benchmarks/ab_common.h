/* What benchmarks/ab_*.c share: a monotonic clock, and one build of
 * libapproxmul opened with its own symbols (RTLD_LOCAL) and its thread
 * count and multiplier set. */
#ifndef APPROXMUL_BENCHMARKS_AB_COMMON_H
#define APPROXMUL_BENCHMARKS_AB_COMMON_H

#include <dlfcn.h>
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

/* The library at path, or NULL after a message; *m = spec's multiplier. */
static void *ab_open(const char *path, int threads, const char *spec, approxmul_multiplier **m) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return NULL;
    }
    ((ab_threads_fn)dlsym(lib, "approxmul_set_num_threads"))(threads);
    if (((ab_spec_fn)dlsym(lib, "approxmul_multiplier_from_spec"))(spec, m) != APPROXMUL_OK) {
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
