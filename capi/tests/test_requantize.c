/* approxmul_requantize from C: worked values computed by hand from the
 * arithmetic in approxmul.h and docs/quantization.md (ties, left shifts,
 * saturation of acc + bias, per-channel and NULL bias), and the error
 * contract (a failing call writes nothing and leaves a message). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "approxmul.h"
#include "check.h"

#define COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

/* Two channels of four int32 accumulators, int8 out:
 * channel 0: factor 0.25 (mantissa 2^30, shift -1), exact ties at +-6 and +-2;
 * channel 1: factor 1.5 (mantissa 3 * 2^29, shift 1: a left shift), bias 10,
 * a value past qmax and INT32_MIN (acc + bias stays in range, x << 1 saturates). */
static void test_per_channel(approxmul_rounding rounding, const int8_t *want) {
    const int32_t acc[8] = {-6, -2, 2, 6, 1, -11, 100, INT32_MIN};
    const int32_t bias[2] = {0, 10};
    const int32_t mantissa[2] = {1 << 30, 3 << 29};
    const int32_t shift[2] = {-1, 1};
    int8_t out[8];
    int i;
    memset(out, 0x5a, sizeof out);
    CHECK(approxmul_requantize(1, 2, 4, APPROXMUL_INT32, acc, bias, mantissa, shift, 0, -128,
                               127, rounding, APPROXMUL_INT8, out) == APPROXMUL_OK);
    CHECK(strcmp(approxmul_last_error(), "") == 0);
    for (i = 0; i < 8; ++i) {
        if (out[i] != want[i]) fprintf(stderr, "  out[%d] = %d, want %d\n", i, out[i], want[i]);
        CHECK(out[i] == want[i]);
    }
}

/* int64 accumulators beyond int32 saturate before scaling; NULL bias; uint8
 * out with zero point 100; factor 2^-25 (mantissa 2^30, shift -24), so
 * +-3.5 * 2^25 are ties: the double rounding takes them away from zero, the
 * single rounding up. */
static void test_saturation_and_ties(approxmul_rounding rounding, const uint8_t *want) {
    const int64_t acc[6] = {(int64_t)1 << 40, -((int64_t)1 << 40), INT32_MAX,
                            (int64_t)7 << 24, -((int64_t)7 << 24), 0};
    /* the ends of int64 plus a bias once wrapped (found by fuzz_requantize) */
    const int64_t ends[2] = {INT64_MIN + 10, INT64_MAX - 10};
    const int32_t end_bias[2] = {-100, 100}, end_m[2] = {1 << 30, 1 << 30}, end_s[2] = {-24, -24};
    uint8_t end_out[2];
    const int32_t mantissa = 1 << 30, shift = -24;
    uint8_t out[6];
    int i;
    /* outer 3, one channel, inner 2: the per-tensor case */
    CHECK(approxmul_requantize(3, 1, 2, APPROXMUL_INT64, acc, NULL, &mantissa, &shift, 100, 0,
                               255, rounding, APPROXMUL_UINT8, out) == APPROXMUL_OK);
    for (i = 0; i < COUNT(out); ++i) {
        if (out[i] != want[i]) fprintf(stderr, "  out[%d] = %d, want %d\n", i, out[i], want[i]);
        CHECK(out[i] == want[i]);
    }
    CHECK(approxmul_requantize(1, 2, 1, APPROXMUL_INT64, ends, end_bias, end_m, end_s, 100,
                               0, 255, rounding, APPROXMUL_UINT8, end_out) == APPROXMUL_OK);
    CHECK(end_out[0] == 36 && end_out[1] == 164);
}

/* Mantissa 100, shift 30 (factor 100 * 2^-1): the double rounding's
 * t << 30 saturates to int32 first (3 -> 2^31 - 1 -> 100), the single
 * rounding scales the exact product (3 -> 150, clamped to 127). */
static void test_left_shift_saturates(approxmul_rounding rounding, const int8_t *want) {
    const int32_t acc[4] = {3, -3, 1, -1};
    const int32_t mantissa = 100, shift = 30;
    int8_t out[4];
    int i;
    CHECK(approxmul_requantize(1, 1, 4, APPROXMUL_INT32, acc, NULL, &mantissa, &shift, 0, -128,
                               127, rounding, APPROXMUL_INT8, out) == APPROXMUL_OK);
    for (i = 0; i < 4; ++i) {
        if (out[i] != want[i]) fprintf(stderr, "  out[%d] = %d, want %d\n", i, out[i], want[i]);
        CHECK(out[i] == want[i]);
    }
}

/* A row of 70 (>= 64: run channel by channel with scalar parameters, and a
 * vector remainder) must give what the same values give one by one. */
static void test_long_rows_match_single_elements(void) {
    int32_t acc[2 * 70];
    const int32_t bias[2] = {-7, 123456};
    const int32_t mantissa[2] = {1518500250, 1073741824}; /* 2^-0.5 and 0.5 in Q31 */
    const int32_t shift[2] = {-3, 5};
    int8_t out[2 * 70], one;
    int i;
    for (i = 0; i < 2 * 70; ++i) acc[i] = (int32_t)((i * 2654435761u) % 200001u) - 100000;
    CHECK(approxmul_requantize(1, 2, 70, APPROXMUL_INT32, acc, bias, mantissa, shift, -3, -100,
                               90, APPROXMUL_ROUND_DOUBLE, APPROXMUL_INT8, out) == APPROXMUL_OK);
    for (i = 0; i < 2 * 70; ++i) {
        const int c = i / 70;
        CHECK(approxmul_requantize(1, 1, 1, APPROXMUL_INT32, acc + i, bias + c, mantissa + c,
                                   shift + c, -3, -100, 90, APPROXMUL_ROUND_DOUBLE,
                                   APPROXMUL_INT8, &one) == APPROXMUL_OK);
        CHECK(out[i] == one);
    }
}

static void test_errors_write_nothing(void) {
    int32_t acc[6] = {1, 2, 3, 4, 5, 6};
    const int32_t ones[3] = {1, 1, 1}, bad_shift[3] = {0, 31, 0}, low_shift[3] = {-32, 0, 0};
    const int32_t negative_mantissa[3] = {1, -1, 1};
    int8_t out[6];
    int i;
    memset(out, 0x5a, sizeof out);
#define CALL(outer, acc_dtype, acc_ptr, mant, sh, qmin, qmax, rounding, out_dtype, out_ptr) \
    approxmul_requantize(outer, 3, 2, acc_dtype, acc_ptr, NULL, mant, sh, 0, qmin, qmax,    \
                         rounding, out_dtype, out_ptr)
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, bad_shift, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(strstr(approxmul_last_error(), "shift[1]") != NULL);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, low_shift, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(CALL(1, APPROXMUL_INT32, acc, negative_mantissa, ones, -128, 127,
               APPROXMUL_ROUND_DOUBLE, APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, 5, 4, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, -129, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, 0, 255, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, -128, 127, (approxmul_rounding)7,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, -128, 127, (approxmul_rounding)-1,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(CALL(1, APPROXMUL_INT16, acc, ones, ones, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_DTYPE);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT32, out) == APPROXMUL_ERR_DTYPE);
    CHECK(CALL(1, APPROXMUL_INT32, NULL, ones, ones, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(CALL(1, APPROXMUL_INT32, acc, NULL, ones, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, NULL) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(CALL(-1, APPROXMUL_INT32, acc, ones, ones, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, out) == APPROXMUL_ERR_SHAPE);
    CHECK(CALL((int64_t)1 << 62, APPROXMUL_INT32, acc, ones, ones, -128, 127,
               APPROXMUL_ROUND_DOUBLE, APPROXMUL_INT8, out) == APPROXMUL_ERR_OVERFLOW);
    for (i = 0; i < 6; ++i) CHECK(out[i] == 0x5a);
    /* out inside acc */
    CHECK(CALL(1, APPROXMUL_INT32, acc, ones, ones, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, (int8_t *)acc + 4) == APPROXMUL_ERR_ALIASING);
    CHECK(acc[1] == 2 && acc[2] == 3);
    CHECK(strlen(approxmul_last_error()) > 0);
    /* nothing to do is a success */
    CHECK(CALL(0, APPROXMUL_INT32, NULL, NULL, NULL, -128, 127, APPROXMUL_ROUND_DOUBLE,
               APPROXMUL_INT8, NULL) == APPROXMUL_OK);
#undef CALL
}

/* 12-bit codes in int16/uint16: factor 0.5 (mantissa 2^30, shift 0) on a
 * row long enough for the vector paths; values beyond a byte, clamps at the
 * 12-bit range, and the same row unsigned with zero point 2048. */
static void test_wide_codes(void) {
    int32_t acc[70];
    int16_t s[70];
    uint16_t u[70];
    const int32_t mantissa = 1 << 30, shift = 0;
    int i;
    for (i = 0; i < 70; ++i) acc[i] = (i - 35) * 150;   /* -5250 .. 5100 */
    CHECK(approxmul_requantize(1, 1, 70, APPROXMUL_INT32, acc, NULL, &mantissa, &shift, 0, -2048,
                               2047, APPROXMUL_ROUND_DOUBLE, APPROXMUL_INT16, s) == APPROXMUL_OK);
    CHECK(approxmul_requantize(1, 1, 70, APPROXMUL_INT32, acc, NULL, &mantissa, &shift, 2048, 0,
                               4095, APPROXMUL_ROUND_DOUBLE, APPROXMUL_UINT16, u) == APPROXMUL_OK);
    for (i = 0; i < 70; ++i) {
        int want = acc[i] / 2; /* exact: acc is even */
        want = want < -2048 ? -2048 : want > 2047 ? 2047 : want;
        CHECK(s[i] == want);
        CHECK(u[i] == want + 2048);
    }
    CHECK(s[0] == -2048 && s[69] == 2047 && s[40] == 375);
    CHECK(approxmul_requantize(1, 1, 70, APPROXMUL_INT32, acc, NULL, &mantissa, &shift, 0, -2048,
                               40000, APPROXMUL_ROUND_DOUBLE, APPROXMUL_INT16, s) ==
          APPROXMUL_ERR_OUT_OF_RANGE);
}

/* approxmul_requantize_dequantize: the 12-bit row of test_wide_codes as
 * real values 0.25 * (code - 2048), float32 and float64, across a row longer
 * than the library's 2048-element chunks; and its own error contract. */
static void test_requantize_dequantize(void) {
    static int32_t acc[5000];
    static uint16_t codes[5000];
    static float f32[5000];
    static double f64[5000];
    const int32_t mantissa = 1 << 30, shift = 0;
    int i;
    for (i = 0; i < 5000; ++i) acc[i] = (i % 97 - 48) * 93 + i; /* ends past +-4096 */
    CHECK(approxmul_requantize(1, 1, 5000, APPROXMUL_INT32, acc, NULL, &mantissa, &shift, 2048,
                               0, 4095, APPROXMUL_ROUND_DOUBLE, APPROXMUL_UINT16, codes) ==
          APPROXMUL_OK);
    CHECK(approxmul_requantize_dequantize(1, 1, 5000, APPROXMUL_INT32, acc, NULL, &mantissa,
                                          &shift, 2048, 0, 4095, APPROXMUL_ROUND_DOUBLE,
                                          APPROXMUL_UINT16, 0.25, APPROXMUL_FLOAT32, f32) ==
          APPROXMUL_OK);
    CHECK(approxmul_requantize_dequantize(1, 1, 5000, APPROXMUL_INT32, acc, NULL, &mantissa,
                                          &shift, 2048, 0, 4095, APPROXMUL_ROUND_DOUBLE,
                                          APPROXMUL_UINT16, 0.25, APPROXMUL_FLOAT64, f64) ==
          APPROXMUL_OK);
    for (i = 0; i < 5000; ++i) {
        CHECK(f64[i] == 0.25 * ((double)codes[i] - 2048));
        CHECK(f32[i] == (float)f64[i]);
    }
    CHECK(codes[4999] == 4095 && f64[4999] == 511.75);
    /* refused: a scale that is not finite and positive, a real type that is
     * not one, codes too narrow for qmax; out untouched */
    f32[0] = 9.0f;
    CHECK(approxmul_requantize_dequantize(1, 1, 5000, APPROXMUL_INT32, acc, NULL, &mantissa,
                                          &shift, 2048, 0, 4095, APPROXMUL_ROUND_DOUBLE,
                                          APPROXMUL_UINT16, 0.0, APPROXMUL_FLOAT32, f32) ==
          APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(approxmul_last_error(), "out_scale") != NULL);
    CHECK(approxmul_requantize_dequantize(1, 1, 5000, APPROXMUL_INT32, acc, NULL, &mantissa,
                                          &shift, 2048, 0, 4095, APPROXMUL_ROUND_DOUBLE,
                                          APPROXMUL_UINT16, 0.25, (approxmul_real_type)3, f32) ==
          APPROXMUL_ERR_DTYPE);
    CHECK(approxmul_requantize_dequantize(1, 1, 5000, APPROXMUL_INT32, acc, NULL, &mantissa,
                                          &shift, 2048, 0, 4095, APPROXMUL_ROUND_DOUBLE,
                                          APPROXMUL_UINT8, 0.25, APPROXMUL_FLOAT32, f32) ==
          APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(f32[0] == 9.0f);
}

int main(void) {
    /* channel 0: -1.5 -0.5 0.5 1.5; channel 1: 16.5 -1.5 165 -1610612736 */
    const int8_t per_channel_double[8] = {-2, -1, 1, 2, 17, -1, 127, -128};
    const int8_t per_channel_single[8] = {-1, 0, 1, 2, 17, -1, 127, -128};
    /* 2^31 - 1, -2^31, 2^31 - 1 (x 2^-25: ~64, -64, ~64), 3.5, -3.5, 0; + 100 */
    const uint8_t saturated_double[6] = {164, 36, 164, 104, 96, 100};
    const uint8_t saturated_single[6] = {164, 36, 164, 104, 97, 100};
    test_per_channel(APPROXMUL_ROUND_DOUBLE, per_channel_double);
    test_per_channel(APPROXMUL_ROUND_SINGLE, per_channel_single);
    test_saturation_and_ties(APPROXMUL_ROUND_DOUBLE, saturated_double);
    test_saturation_and_ties(APPROXMUL_ROUND_SINGLE, saturated_single);
    const int8_t shifted_double[4] = {100, -100, 50, -50};
    const int8_t shifted_single[4] = {127, -128, 50, -50};
    test_left_shift_saturates(APPROXMUL_ROUND_DOUBLE, shifted_double);
    test_left_shift_saturates(APPROXMUL_ROUND_SINGLE, shifted_single);
    test_long_rows_match_single_elements();
    test_wide_codes();
    test_requantize_dequantize();
    test_errors_write_nothing();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_requantize: all checks passed\n");
    return 0;
}
