/* approxmul_quantize / approxmul_dequantize from C: worked values from the
 * arithmetic in approxmul.h (ties away from zero, clamps, infinities,
 * per-channel parameters, float32 rounding of dequantized values), a run
 * longer than one block checked element by element, and the error contract
 * (a NaN or bad argument writes nothing and leaves a message). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "approxmul.h"
#include "check.h"

static void test_ties_and_clamps(void) {
    const double x[10] = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999999999999994, 300.0,
                          -INFINITY, INFINITY};
    const float xf[10] = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.4999999f, 300.0f,
                          -INFINITY, INFINITY};
    const double scale = 1.0;
    const int32_t zero = 0, zero_u = 100;
    /* 0.49999999999999994 + 0.5 rounds to 1.0 in double, so the formula (like
     * NumPy's) gives 1 where C's round() gives 0; float32 0.4999999 stays below */
    const int8_t want[10] = {-3, -2, -1, 1, 2, 3, 1, 127, -128, 127};
    /* zero point 100, clamp to 90..200 */
    const uint8_t want_u[10] = {97, 98, 99, 101, 102, 103, 100, 200, 90, 200};
    int8_t out[10];
    uint8_t out_u[10];
    int i;
    CHECK(approxmul_quantize(1, 1, 10, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_OK);
    for (i = 0; i < 10; ++i) CHECK(out[i] == want[i]);
    CHECK(approxmul_quantize(1, 1, 10, APPROXMUL_FLOAT32, xf, &scale, &zero_u, 90, 200,
                             APPROXMUL_UINT8, out_u) == APPROXMUL_OK);
    for (i = 0; i < 10; ++i) CHECK(out_u[i] == want_u[i]);
}

/* [outer 2, channels 2, inner 3]: channel 0 scale 0.5 zero 0, channel 1
 * scale 4 zero -10, int16 codes; then back to float32 and float64. */
static void test_per_channel_round_trip(void) {
    const double x[12] = {1.0, -1.25, 0.2, 8.0, -2.0, 1e6, 3.0, 0.25, -0.75, 6.0, 10.0, -1e6};
    const double scale[2] = {0.5, 4.0};
    const int32_t zero[2] = {0, -10};
    const int16_t want[12] = {2, -3, 0, -8, -11, 32767, 6, 1, -2, -8, -7, -32768};
    int16_t codes[12];
    double real[12];
    float real32[12];
    int i;
    CHECK(approxmul_quantize(2, 2, 3, APPROXMUL_FLOAT64, x, scale, zero, -32768, 32767,
                             APPROXMUL_INT16, codes) == APPROXMUL_OK);
    for (i = 0; i < 12; ++i) {
        if (codes[i] != want[i]) fprintf(stderr, "  codes[%d] = %d, want %d\n", i, codes[i], want[i]);
        CHECK(codes[i] == want[i]);
    }
    CHECK(approxmul_dequantize(2, 2, 3, APPROXMUL_INT16, codes, scale, zero, APPROXMUL_FLOAT64,
                               real) == APPROXMUL_OK);
    CHECK(approxmul_dequantize(2, 2, 3, APPROXMUL_INT16, codes, scale, zero, APPROXMUL_FLOAT32,
                               real32) == APPROXMUL_OK);
    for (i = 0; i < 12; ++i) {
        const int c = (i / 3) % 2;
        const double expect = scale[c] * (double)(codes[i] - zero[c]);
        CHECK(real[i] == expect);
        CHECK(real32[i] == (float)expect);
    }
    CHECK(real[5] == 4.0 * 32777.0);
}

/* 40000 elements (three blocks) in rows of 20000: equal to one-element calls. */
static void test_long_run_matches_single_elements(void) {
    static float x[40000];
    static int8_t out[40000];
    const double scale[2] = {0.1, 0.037};
    const int32_t zero[2] = {3, -5};
    int i;
    for (i = 0; i < 40000; ++i) x[i] = (float)((int)((i * 2654435761u) % 4001u) - 2000) / 200.0f;
    CHECK(approxmul_quantize(1, 2, 20000, APPROXMUL_FLOAT32, x, scale, zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_OK);
    for (i = 0; i < 40000; i += 7) {
        int8_t one;
        const int c = i / 20000;
        CHECK(approxmul_quantize(1, 1, 1, APPROXMUL_FLOAT32, x + i, scale + c, zero + c, -128,
                                 127, APPROXMUL_INT8, &one) == APPROXMUL_OK);
        CHECK(out[i] == one);
    }
}

static void test_errors_write_nothing(void) {
    double x[4] = {1.0, 2.0, 3.0, 4.0};
    const double scale = 1.0, bad_scale = 0.0;
    const int32_t zero = 0, far_zero = (1 << 24) + 1;
    int8_t out[4];
    double real[4];
    int i;
    memset(out, 0x5a, sizeof out);
    x[2] = NAN;
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(approxmul_last_error(), "x[2] is NaN, which has no code") == 0);
    /* an infinity: clamped by approxmul_quantize, refused by _finite, and a
     * NaN after it is still named first by index order */
    x[2] = INFINITY;
    CHECK(approxmul_quantize_finite(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                                    APPROXMUL_INT8, out) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(approxmul_last_error(),
                 "x[2] is infinite, which approxmul_quantize_finite refuses") == 0);
    x[3] = NAN;
    CHECK(approxmul_quantize_finite(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                                    APPROXMUL_INT8, out) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(approxmul_last_error(), "x[2] is infinite") != NULL);
    x[3] = 4.0;
    for (i = 0; i < 4; ++i) CHECK(out[i] == 0x5a);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_OK);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 127 && out[3] == 4);
    memset(out, 0x5a, sizeof out);
    x[2] = 3.0;
    CHECK(approxmul_quantize_finite(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                                    APPROXMUL_INT8, out) == APPROXMUL_OK);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == 4);
    memset(out, 0x5a, sizeof out);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &bad_scale, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &far_zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(approxmul_quantize(1, 1, 4, (approxmul_real_type)7, x, &scale, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_DTYPE);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                             APPROXMUL_INT64, out) == APPROXMUL_ERR_DTYPE);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, 0, 255,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, NULL, &scale, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, NULL, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, NULL, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_quantize(1, 1, -4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                             APPROXMUL_INT8, out) == APPROXMUL_ERR_SHAPE);
    CHECK(approxmul_quantize((int64_t)1 << 62, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128,
                             127, APPROXMUL_INT8, out) == APPROXMUL_ERR_OVERFLOW);
    for (i = 0; i < 4; ++i) CHECK(out[i] == 0x5a);
    CHECK(approxmul_quantize(1, 1, 4, APPROXMUL_FLOAT64, x, &scale, &zero, -128, 127,
                             APPROXMUL_INT8, (int8_t *)x + 3) == APPROXMUL_ERR_ALIASING);
    CHECK(x[0] == 1.0 && x[1] == 2.0);
    for (i = 0; i < 4; ++i) real[i] = -1.0;
    CHECK(approxmul_dequantize(1, 1, 4, APPROXMUL_INT8, out, &bad_scale, &zero,
                               APPROXMUL_FLOAT64, real) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_dequantize(1, 1, 4, APPROXMUL_INT64, out, &scale, &zero,
                               APPROXMUL_FLOAT64, real) == APPROXMUL_ERR_DTYPE);
    CHECK(approxmul_dequantize(1, 1, 4, APPROXMUL_INT8, out, &scale, &zero,
                               (approxmul_real_type)0, real) == APPROXMUL_ERR_DTYPE);
    CHECK(approxmul_dequantize(1, 1, 4, APPROXMUL_INT8, out, &scale, &zero,
                               APPROXMUL_FLOAT64, NULL) == APPROXMUL_ERR_NULL_POINTER);
    for (i = 0; i < 4; ++i) CHECK(real[i] == -1.0);
    CHECK(strlen(approxmul_last_error()) > 0);
    /* nothing to do is a success */
    CHECK(approxmul_quantize(0, 1, 4, APPROXMUL_FLOAT64, NULL, NULL, NULL, -128, 127,
                             APPROXMUL_INT8, NULL) == APPROXMUL_OK);
    CHECK(approxmul_dequantize(3, 0, 4, APPROXMUL_INT8, NULL, NULL, NULL, APPROXMUL_FLOAT32,
                               NULL) == APPROXMUL_OK);
}

int main(void) {
    test_ties_and_clamps();
    test_per_channel_round_trip();
    test_long_run_matches_single_elements();
    test_errors_write_nothing();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_affine: all checks passed\n");
    return 0;
}
