/* The baseline the issue measures against: the naive i-j-k loop over an int32
 * product table that existing simulators run on CPUs (one table lookup per
 * product, OpenMP over rows). Compiled by bench_gemm.py, never part of the
 * library or its ABI. */
#include <stdint.h>

void naive_table_gemm(const int32_t *table, const uint8_t *a, const uint8_t *b, int64_t *c,
                      int64_t rows, int64_t cols, int64_t inner, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            int64_t sum = 0;
            for (int64_t k = 0; k < inner; ++k) sum += table[a[i * inner + k] * 256 + b[k * cols + j]];
            c[i * cols + j] = sum;
        }
}
