/* Whether both cores of a shared machine give vector code full throughput
 * right now: each of THREADS threads runs eight independent vpdpbusd chains
 * for 100 ms, ROUNDS times, and prints its count of 10,000-step batches.
 * On the shared 2-vCPU Zen 4 of docs/benchmarks.md the counts sit near
 * 2,200 each, except for stretches of minutes in which one thread's drops
 * (a 2-thread GEMM then runs at one thread's speed); run it before and
 * after a benchmark to know which it measured.
 *
 *   cc -O2 -fopenmp benchmarks/core_probe.c -o /tmp/core_probe
 *   /tmp/core_probe THREADS ROUNDS
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static long chains(double start) {
    __m512i acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_set1_epi32(i);
    const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(5);
    long batches = 0;
    while (now() - start < 0.1) {
        for (int step = 0; step < 10000; ++step)
            for (int i = 0; i < 8; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], x, y);
        ++batches;
    }
    int sum = 0;  /* keeps the chains live */
    for (int i = 0; i < 8; ++i) sum += _mm512_reduce_add_epi32(acc[i]);
    return batches + (sum == 1);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s THREADS ROUNDS\n", argv[0]);
        return 2;
    }
    const int threads = atoi(argv[1]), rounds = atoi(argv[2]);
    if (threads < 1 || threads > 256 || rounds < 1) return 2;
    if (!__builtin_cpu_supports("avx512vnni")) {
        fprintf(stderr, "needs AVX-512 VNNI\n");
        return 1;
    }
    long counts[256];
    for (int r = 0; r < rounds; ++r) {
        const double start = now();
#pragma omp parallel num_threads(threads)
        counts[omp_get_thread_num()] = chains(start);
        for (int t = 0; t < threads; ++t) printf("%ld%c", counts[t], t + 1 < threads ? ' ' : '\n');
    }
    return 0;
}
