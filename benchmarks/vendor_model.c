/* A stand-in for a vendor's 16-bit C model (EvoApproxLib's prototype
 * uint32_t f(uint16_t a, uint16_t b)) and the loop a user writes around
 * one: the naive i-j-k matmul calling the model once per product through a
 * pointer, as a simulator that takes any model does. Compiled by
 * bench_vendor.py, never part of the library or its ABI. */
#include <stdint.h>

/* cheap on purpose, so that the cost around each call shows: the exact
 * product with its low 8 bits cleared and a bit of the operands folded in */
uint32_t mul16u_demo(uint16_t a, uint16_t b) {
    return ((uint32_t)a * b & ~0xFFu) | ((a ^ b) & 0x80u);
}

typedef uint32_t (*model16)(uint16_t, uint16_t);

void naive_model_gemm(model16 f, const uint16_t *a, const uint16_t *b, int64_t *c, int64_t rows,
                      int64_t cols, int64_t inner, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            int64_t sum = 0;
            for (int64_t k = 0; k < inner; ++k) sum += f(a[i * inner + k], b[k * cols + j]);
            c[i * cols + j] = sum;
        }
}
