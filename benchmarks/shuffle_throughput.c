/* Throughput of the byte shuffles the table kernel is built from, on this
 * core: nanoseconds per instruction over 8 independent chains, against
 * vpaddb (two per cycle on current x86 cores) as the clock's yardstick.
 * The 8x8 table kernel spends 4 vpermi2b per 64 products (two 128-entry
 * halves per byte plane), so this bounds it from below on any core whose
 * shuffles share one port (docs/benchmarks.md).
 *
 * Its second part times the kernel's whole step in registers: per 64
 * streamed codes, the top-bit mask and its complement, 4 merge-masked
 * vpermi2b (two byte planes), 2 word shifts (the odd bytes' sums) and 4
 * word adds, over 4 independent chunks as the kernel runs them, with no
 * loads; then the same step without the shifts; and a vpermi2b timed
 * beside a vpsrlw and beside a vpaddw. On cores where shifts and shuffles
 * share ports the step, not the shuffles alone, bounds the kernel.
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

/* ns per step of 8 chains of OPA beside 8 of OPB, each chain with its own
 * starting value (equal ones would be merged by the compiler), kept in
 * registers by the empty asm. SAME for OPB times OPA alone; a pair shows
 * whether two ops share a port (it costs the slower op's time where they
 * do not, up to both ops' where they do). */
#define SAME(x) (x)
#define CHAINS(OPA, OPB, RESULT)                                                             \
    do {                                                                                     \
        __m512i a0 = _mm512_set1_epi8(3), a1 = _mm512_set1_epi8(4), a2 = _mm512_set1_epi8(5), \
                a3 = _mm512_set1_epi8(6), a4 = _mm512_set1_epi8(7), a5 = _mm512_set1_epi8(8), \
                a6 = _mm512_set1_epi8(9), a7 = _mm512_set1_epi8(10);                        \
        __m512i b0 = a0, b1 = a1, b2 = a2, b3 = a3, b4 = a4, b5 = a5, b6 = a6, b7 = a7;      \
        const double start = seconds();                                                      \
        for (long i = 0; i < STEPS; ++i) {                                                   \
            a0 = OPA(a0), a1 = OPA(a1), a2 = OPA(a2), a3 = OPA(a3);                          \
            a4 = OPA(a4), a5 = OPA(a5), a6 = OPA(a6), a7 = OPA(a7);                          \
            b0 = OPB(b0), b1 = OPB(b1), b2 = OPB(b2), b3 = OPB(b3);                          \
            b4 = OPB(b4), b5 = OPB(b5), b6 = OPB(b6), b7 = OPB(b7);                          \
            __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), \
                             "+v"(a6), "+v"(a7));                                            \
            __asm__ volatile("" : "+v"(b0), "+v"(b1), "+v"(b2), "+v"(b3), "+v"(b4), "+v"(b5), \
                             "+v"(b6), "+v"(b7));                                            \
        }                                                                                    \
        RESULT = (seconds() - start) / STEPS / 8 * 1e9;                                      \
        sink = _mm512_xor_si512(sink, _mm512_xor_si512(a0, b7));                             \
    } while (0)

/* ns per 64 products of the table kernel's register work (see the top).
 * NOSHIFT adds the looked-up words themselves instead of their odd bytes:
 * a wrong sum, timed only to size the shifts' share. */
#define SHIFTED(v) _mm512_srli_epi16(v, 8)
#define NOSHIFT(v) (v)
#define KERNEL_CHUNK(x, a0, a1, a2, a3, SHIFT)                                                 \
    do {                                                                                     \
        const __mmask64 upper = _mm512_movepi8_mask(x), lower = _knot_mask64(upper);        \
        const __m512i lo = _mm512_mask2_permutex2var_epi8(                                   \
            q0, _mm512_mask2_permutex2var_epi8(q2, x, upper, q3), lower, q1);                \
        const __m512i hi = _mm512_mask2_permutex2var_epi8(                                   \
            q1, _mm512_mask2_permutex2var_epi8(q3, x, upper, q2), lower, q0);                \
        a0 = _mm512_add_epi16(a0, lo), a1 = _mm512_add_epi16(a1, SHIFT(lo));                 \
        a2 = _mm512_add_epi16(a2, hi), a3 = _mm512_add_epi16(a3, SHIFT(hi));                 \
    } while (0)
#define KERNEL_STEP(NAME, SHIFT)                                                             \
    static double NAME(void) {                                                               \
        const __m512i q0 = _mm512_set1_epi8(1), q1 = _mm512_set1_epi8(2),                    \
                      q2 = _mm512_set1_epi8(3), q3 = _mm512_set1_epi8(4);                    \
        __m512i x0 = _mm512_set1_epi8(5), x1 = _mm512_set1_epi8(-7), x2 = _mm512_set1_epi8(9), \
                x3 = _mm512_set1_epi8(-100);                                                 \
        __m512i a[16];                                                                       \
        for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_epi16((short)i);                     \
        const double start = seconds();                                                      \
        for (long i = 0; i < STEPS / 4; ++i) {                                               \
            __asm__ volatile("" : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3));                   \
            KERNEL_CHUNK(x0, a[0], a[1], a[2], a[3], SHIFT);                                 \
            KERNEL_CHUNK(x1, a[4], a[5], a[6], a[7], SHIFT);                                 \
            KERNEL_CHUNK(x2, a[8], a[9], a[10], a[11], SHIFT);                               \
            KERNEL_CHUNK(x3, a[12], a[13], a[14], a[15], SHIFT);                             \
        }                                                                                    \
        const double ns = (seconds() - start) / (STEPS / 4) / 4 * 1e9;                       \
        int sum = 0;                                                                         \
        for (int i = 0; i < 16; ++i) sum += _mm512_reduce_add_epi32(a[i]);                   \
        return sum == 12345 ? -ns : ns; /* the sums used, so the work stays */               \
    }
KERNEL_STEP(kernel_step, SHIFTED)
KERNEL_STEP(kernel_step_unshifted, NOSHIFT)

int main(void) {
    const __m512i t0 = _mm512_set1_epi8(1), t1 = _mm512_set1_epi8(2);
    __m512i sink = _mm512_setzero_si512();
    double add, permi2, perm, shuf;
#define ADD(x) _mm512_add_epi8(x, t0)
#define PERMI2(x) _mm512_permutex2var_epi8(t0, x, t1)
#define PERM(x) _mm512_permutexvar_epi8(x, t0)
#define SHUF(x) _mm512_shuffle_epi8(t0, x)
    CHAINS(ADD, SAME, add);
    CHAINS(PERMI2, SAME, permi2);
    CHAINS(PERM, SAME, perm);
    CHAINS(SHUF, SAME, shuf);
    const double cycle = 2 * add; /* vpaddb: two per cycle */
    printf("ns per instruction (8 chains): vpaddb %.3f, vpermi2b %.3f, vpermb %.3f, vpshufb %.3f\n",
           add, permi2, perm, shuf);
    printf("in cycles of 2 x vpaddb: vpermi2b %.2f, vpermb %.2f, vpshufb %.2f\n", permi2 / cycle,
           perm / cycle, shuf / cycle);
    printf("table kernel bound: %.1f products per cycle per core (4 vpermi2b per 64)\n",
           64.0 / (4 * permi2 / cycle));
#define SRLW(x) _mm512_srli_epi16(x, 1)
#define ADDW(x) _mm512_add_epi16(x, t0)
    double with_shift, with_add;
    CHAINS(PERMI2, SRLW, with_shift);
    CHAINS(PERMI2, ADDW, with_add);
    printf("a vpermi2b beside a vpsrlw: %.2f cycles; beside a vpaddw: %.2f\n",
           with_shift / cycle, with_add / cycle);
    const double step = kernel_step(), unshifted = kernel_step_unshifted();
    printf("the kernel's step in registers: %.2f cycles per 64 products (%.1f per cycle); "
           "without its 2 shifts %.2f (%.1f per cycle)\n",
           step / cycle, 64.0 / (step / cycle), unshifted / cycle, 64.0 / (unshifted / cycle));
    return _mm512_reduce_add_epi32(sink) == 12345;
}
