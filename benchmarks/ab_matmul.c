/* Two builds of libapproxmul in one process, timed on the same matmul (as
 * benchmarks/ab_conv2d.c does for conv2d): blocks of 10 calls alternate
 * between the libraries after a 50 ms pause; the best call of each is
 * kept, and the int64 outputs must agree.
 *
 *   cc -O2 -Icapi/include benchmarks/ab_matmul.c -o /tmp/ab_matmul -ldl
 *   /tmp/ab_matmul OLD.so NEW.so ROWS INNER COLS SPEC THREADS ROUNDS
 *
 * SPEC is a multiplier spec, or random-table:bits=N for a seeded random
 * table of unsigned N-bit operands (ab_common.h), the table kernel's case.
 * Operands: random codes of the multiplier's width, stored as (u)int8 up to
 * 8 bits and as (u)int16 above, signed as the multiplier is; rows in memory
 * order (B's columns with AB_B_COLUMNS=1: a Linear layer's x @ W^T, conv2d's
 * weights for channels-last pixels); zero points 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ab_common.h"

typedef approxmul_status (*matmul_fn)(const approxmul_multiplier *, int64_t, int64_t, int64_t,
                                      approxmul_dtype, const void *, int64_t, int64_t,
                                      approxmul_dtype, const void *, int64_t, int64_t, int64_t,
                                      int64_t, approxmul_dtype, void *, int64_t, int64_t);
typedef approxmul_status (*spec_fn)(const char *, approxmul_multiplier **);
typedef approxmul_status (*query_fn)(const approxmul_multiplier *, int *);
typedef approxmul_status (*threads_fn)(int);

struct Call {
    matmul_fn matmul[2];
    approxmul_multiplier *m[2];
    int64_t M, N, K;
    int64_t b_row_stride, b_col_stride;
    approxmul_dtype dtype;
    const void *a, *b;
    int64_t *out[2];
};

static approxmul_status run_matmul(int l, void *context) {
    const struct Call *c = context;
    return c->matmul[l](c->m[l], c->M, c->N, c->K, c->dtype, c->a, c->K, 1, c->dtype, c->b, c->b_row_stride, c->b_col_stride,
                        0, 0, APPROXMUL_INT64, c->out[l], c->N, 1);
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: %s OLD.so NEW.so ROWS INNER COLS SPEC THREADS ROUNDS\n", argv[0]);
        return 2;
    }
    const int64_t M = atoll(argv[3]), K = atoll(argv[4]), N = atoll(argv[5]);
    const char *spec = argv[6];
    const int threads = atoi(argv[7]), rounds = atoi(argv[8]);
    matmul_fn matmul[2];
    approxmul_multiplier *m[2];
    int bits = 8, is_signed = 0;
    for (int l = 0; l < 2; ++l) {
        void *lib = ab_open(argv[1 + l], threads, spec, &m[l]);
        if (lib == NULL) return 1;
        matmul[l] = (matmul_fn)dlsym(lib, "approxmul_matmul");
        ((query_fn)dlsym(lib, "approxmul_multiplier_bits"))(m[l], &bits);
        ((query_fn)dlsym(lib, "approxmul_multiplier_is_signed"))(m[l], &is_signed);
    }
    const int wide = bits > 8;
    const approxmul_dtype dtype = wide ? (is_signed ? APPROXMUL_INT16 : APPROXMUL_UINT16)
                                       : (is_signed ? APPROXMUL_INT8 : APPROXMUL_UINT8);
    const size_t item = wide ? 2 : 1, a_size = (size_t)(M * K), b_size = (size_t)(K * N);
    const uint32_t mask = (1u << bits) - 1;
    uint8_t *a = malloc(item * a_size), *b = malloc(item * b_size);
    int64_t *out[2] = {malloc(8 * (size_t)(M * N)), malloc(8 * (size_t)(M * N))};
    srand(1);
    for (size_t i = 0; i < a_size + b_size; ++i) {
        const uint32_t code = ((uint32_t)rand() ^ ((uint32_t)rand() << 15)) & mask;
        uint8_t *at = i < a_size ? a + item * i : b + item * (i - a_size);
        if (wide) {
            const uint16_t c16 = (uint16_t)code;
            memcpy(at, &c16, 2);
        } else {
            *at = (uint8_t)code;
        }
    }
    const char *columns = getenv("AB_B_COLUMNS");
    const int b_columns = columns != NULL && atoi(columns) != 0;
    struct Call call = {{matmul[0], matmul[1]}, {m[0], m[1]}, M, N, K,
                        b_columns ? 1 : N, b_columns ? K : 1, dtype, a, b, {out[0], out[1]}};
    double best[2];
    if (ab_alternate(rounds, run_matmul, &call, "matmul", best) != APPROXMUL_OK) return 1;
    const int same = memcmp(out[0], out[1], 8 * (size_t)(M * N)) == 0;
    printf("%s %lldx%lldx%lld%s, %d threads: old %.3f ms, new %.3f ms, new/old %.3f%s\n", spec,
           (long long)M, (long long)K, (long long)N, b_columns ? " (B by columns)" : "", threads, best[0] * 1e3, best[1] * 1e3,
           best[1] / best[0], same ? "" : "  OUTPUTS DIFFER");
    return same ? 0 : 1;
}
