/* What benchmarks/ab_*.c share: a monotonic clock, and one build of
 * libapproxmul opened with its own symbols (RTLD_LOCAL) and its thread
 * count and multiplier set. */
#ifndef APPROXMUL_BENCHMARKS_AB_COMMON_H
#define APPROXMUL_BENCHMARKS_AB_COMMON_H

#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

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

#endif
