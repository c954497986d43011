/* Throughput of the byte shuffles the table kernel is built from, on this
 * core: nanoseconds per instruction over 8 independent chains, against
 * vpaddb (two per cycle on current x86 cores) as the clock's yardstick.
 * The 8x8 table kernel spends 4 vpermi2b per 64 products (two 128-entry
 * halves per byte plane), so this bounds it from below on any core whose
 * shuffles share one port (docs/benchmarks.md).
 *
 *   cc -O2 -mavx512f -mavx512bw -mavx512vbmi benchmarks/shuffle_throughput.c -o /tmp/shuffles
 *   /tmp/shuffles
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define STEPS 50000000L

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* 8 chains with distinct starting values (equal ones would be merged by
 * the compiler), kept in registers by the empty asm */
#define CHAINS(OP, RESULT)                                                                   \
    do {                                                                                     \
        __m512i c0 = _mm512_set1_epi8(3), c1 = _mm512_set1_epi8(4), c2 = _mm512_set1_epi8(5), \
                c3 = _mm512_set1_epi8(6), c4 = _mm512_set1_epi8(7), c5 = _mm512_set1_epi8(8), \
                c6 = _mm512_set1_epi8(9), c7 = _mm512_set1_epi8(10);                        \
        const double start = seconds();                                                      \
        for (long i = 0; i < STEPS; ++i) {                                                   \
            c0 = OP(c0), c1 = OP(c1), c2 = OP(c2), c3 = OP(c3);                              \
            c4 = OP(c4), c5 = OP(c5), c6 = OP(c6), c7 = OP(c7);                              \
            __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), \
                             "+v"(c6), "+v"(c7));                                            \
        }                                                                                    \
        RESULT = (seconds() - start) / STEPS / 8 * 1e9;                                      \
        sink = _mm512_xor_si512(sink, _mm512_xor_si512(c0, c7));                             \
    } while (0)

int main(void) {
    const __m512i t0 = _mm512_set1_epi8(1), t1 = _mm512_set1_epi8(2);
    __m512i sink = _mm512_setzero_si512();
    double add, permi2, perm, shuf;
#define ADD(x) _mm512_add_epi8(x, t0)
#define PERMI2(x) _mm512_permutex2var_epi8(t0, x, t1)
#define PERM(x) _mm512_permutexvar_epi8(x, t0)
#define SHUF(x) _mm512_shuffle_epi8(t0, x)
    CHAINS(ADD, add);
    CHAINS(PERMI2, permi2);
    CHAINS(PERM, perm);
    CHAINS(SHUF, shuf);
    const double cycle = 2 * add; /* vpaddb: two per cycle */
    printf("ns per instruction (8 chains): vpaddb %.3f, vpermi2b %.3f, vpermb %.3f, vpshufb %.3f\n",
           add, permi2, perm, shuf);
    printf("in cycles of 2 x vpaddb: vpermi2b %.2f, vpermb %.2f, vpshufb %.2f\n", permi2 / cycle,
           perm / cycle, shuf / cycle);
    printf("table kernel bound: %.1f products per cycle per core (4 vpermi2b per 64)\n",
           64.0 / (4 * permi2 / cycle));
    return _mm512_reduce_add_epi32(sink) == 12345;
}
