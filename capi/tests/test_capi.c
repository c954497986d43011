/* A plain C99 program against the public header: proves the header is valid
 * C, that the library links from C, and checks the C-level contract that
 * Python cannot reach (NULL pointers, negative sizes, untouched outputs). */
#include <stdio.h>
#include <string.h>

#include "approxmul.h"
#include "check.h"

static void test_version(void) {
    CHECK(approxmul_abi_version() == APPROXMUL_ABI_VERSION);
    CHECK(strlen(approxmul_version_string()) > 0);
    CHECK(strstr(approxmul_build_info(), "isa=") != NULL);
    CHECK(strcmp(approxmul_status_string(APPROXMUL_OK), "ok") == 0);
    CHECK(strcmp(approxmul_status_string((approxmul_status)12345), "unknown status") == 0);
}

static void test_errors(void) {
    approxmul_multiplier *m = NULL;
    int32_t table[16] = {0};
    int bits = 0;

    CHECK(approxmul_multiplier_exact(0, 0, &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK(strstr(approxmul_last_error(), "bits") != NULL);
    CHECK(approxmul_multiplier_exact(17, 0, &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_multiplier_exact(8, 0, NULL) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_multiplier_from_table(NULL, 16, 2, 0, &m) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_multiplier_from_table(table, 15, 2, 0, &m) == APPROXMUL_ERR_SHAPE);
    CHECK(approxmul_multiplier_from_table(table, 16, 13, 0, &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_multiplier_from_table(table, 16, 9, 0, &m) == APPROXMUL_ERR_SHAPE);
    CHECK(approxmul_multiplier_bits(NULL, &bits) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_set_num_threads(-1) == APPROXMUL_ERR_INVALID_ARGUMENT);
    /* counts OpenMP cannot create are refused, not passed on to crash it */
    CHECK(approxmul_set_num_threads(APPROXMUL_MAX_THREADS + 1) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(approxmul_last_error(), "1024") != NULL);
    CHECK(approxmul_set_num_threads(65535) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_set_num_threads(APPROXMUL_MAX_THREADS) == APPROXMUL_OK);
    CHECK(approxmul_get_num_threads() == APPROXMUL_MAX_THREADS ||
          strstr(approxmul_build_info(), "openmp=no") != NULL);
    CHECK(approxmul_set_num_threads(0) == APPROXMUL_OK);
    /* a cancel stops calls in progress only: a later call runs to the end */
    approxmul_cancel();
    CHECK(approxmul_multiplier_exact(10, 0, &m) == APPROXMUL_OK);
    {
        approxmul_metrics metrics;
        CHECK(approxmul_multiplier_metrics(m, &metrics) == APPROXMUL_OK);
        CHECK(metrics.pairs == (int64_t)1 << 20 && metrics.mae == 0);
    }
    approxmul_multiplier_destroy(m);
    m = NULL;
    CHECK(strcmp(approxmul_status_string(APPROXMUL_ERR_CANCELLED), "cancelled") == 0);
    /* the setting, as given, next to the count it means */
    CHECK(approxmul_get_num_threads_setting() == 0);
    CHECK(approxmul_set_num_threads(3) == APPROXMUL_OK);
    CHECK(approxmul_get_num_threads_setting() == 3 && approxmul_get_num_threads() == 3);
    CHECK(approxmul_set_num_threads(0) == APPROXMUL_OK);
    CHECK(approxmul_get_num_threads_setting() == 0 && approxmul_get_num_threads() >= 1);
    /* nothing to release yet is no error (tests/test_threads.py checks the threads end) */
    CHECK(approxmul_release_threads() == APPROXMUL_OK);
    CHECK(approxmul_release_threads() == APPROXMUL_OK);
    CHECK(m == NULL);
    approxmul_multiplier_destroy(NULL); /* accepted */
    /* a success clears the thread's message */
    CHECK(approxmul_multiplier_exact(4, 0, &m) == APPROXMUL_OK);
    CHECK(strcmp(approxmul_last_error(), "") == 0);
    approxmul_multiplier_destroy(m);
}

static void test_matmul(void) {
    approxmul_multiplier *m = NULL;
    /* 2x3 times 3x2, signed 8-bit exact */
    int8_t a[6] = {1, -2, 3, -128, 127, 0};
    int8_t b[6] = {4, 5, -6, 7, 8, -9};
    int32_t c[4] = {-1, -1, -1, -1};
    int32_t expect[4] = {1 * 4 + -2 * -6 + 3 * 8, 1 * 5 + -2 * 7 + 3 * -9,
                         -128 * 4 + 127 * -6, -128 * 5 + 127 * 7};
    int i;
    approxmul_dtype acc;

    CHECK(approxmul_multiplier_exact(8, 1, &m) == APPROXMUL_OK);
    CHECK(approxmul_matmul(m, 2, 2, 3, APPROXMUL_INT8, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 0, 0,
                           APPROXMUL_INT32, c, 2, 1) == APPROXMUL_OK);
    for (i = 0; i < 4; i++) CHECK(c[i] == expect[i]);

    /* errors leave c untouched */
    memset(c, 0x5a, sizeof c);
    CHECK(approxmul_matmul(m, -1, 2, 3, APPROXMUL_INT8, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 0, 0,
                           APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_SHAPE);
    CHECK(approxmul_matmul(m, 2, 2, 3, APPROXMUL_UINT8, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 0, 0,
                           APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_DTYPE);
    CHECK(approxmul_matmul(m, 2, 2, 3, APPROXMUL_INT8, NULL, 3, 1, APPROXMUL_INT8, b, 2, 1, 0, 0,
                           APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_matmul(m, 2, 2, 3, APPROXMUL_INT8, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 0, 0,
                           APPROXMUL_INT32, c, 0, 1) == APPROXMUL_ERR_ALIASING);
    CHECK(approxmul_matmul(m, 2, 2, 3, APPROXMUL_INT8, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 0, 0,
                           APPROXMUL_INT32, (void *)a, 2, 1) == APPROXMUL_ERR_ALIASING);
    CHECK(approxmul_matmul(m, 2, 2, 3, APPROXMUL_INT8, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 200, 0,
                           APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(approxmul_matmul(m, 2, 2, (int64_t)1 << 40, APPROXMUL_INT8, a, 3, 1, APPROXMUL_INT8, b,
                           2, 1, 0, 0, APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_OVERFLOW);
    CHECK(approxmul_matmul(m, (int64_t)1 << 62, 4, 1, APPROXMUL_INT8, a, 3, 1, APPROXMUL_INT8, b,
                           2, 1, 0, 0, APPROXMUL_INT64, c, 2, 1) == APPROXMUL_ERR_OVERFLOW);
    CHECK(approxmul_matmul(m, 2, 2, 3, (approxmul_dtype)77, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 0,
                           0, APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_DTYPE);
    /* found by fuzzing: negative enum values, and strides whose span fits
     * int64 but wraps the address space (were read before the fix) */
    CHECK(approxmul_matmul(m, 2, 2, 3, (approxmul_dtype)-1, a, 3, 1, APPROXMUL_INT8, b, 2, 1, 0,
                           0, APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_DTYPE);
    CHECK(strcmp(approxmul_status_string((approxmul_status)-1), "unknown status") == 0);
    CHECK(approxmul_matmul(m, 2, 2, 3, APPROXMUL_INT8, a, -((int64_t)1 << 62), 1, APPROXMUL_INT8,
                           b, 2, 1, 0, 0, APPROXMUL_INT32, c, 2, 1) == APPROXMUL_ERR_OVERFLOW);
    CHECK(strstr(approxmul_last_error(), "address space") != NULL);
    for (i = 0; i < 4; i++) CHECK(c[i] == 0x5a5a5a5a);

    /* int32 fits up to 2^31 / 128^2 = 131072 signed products, int64 beyond */
    CHECK(approxmul_accumulator_dtype(m, 131071, 0, 0, &acc) == APPROXMUL_OK);
    CHECK(acc == APPROXMUL_INT32);
    CHECK(approxmul_accumulator_dtype(m, 131073, 0, 0, &acc) == APPROXMUL_OK);
    CHECK(acc == APPROXMUL_INT64);
    approxmul_multiplier_destroy(m);
}

static void test_bmm_and_conv2d(void) {
    approxmul_multiplier *m = NULL;
    uint8_t a[2 * 2 * 3] = {1, 2, 3, 4, 5, 6, 1, 1, 1, 2, 2, 2};
    uint8_t b[3 * 2] = {1, 0, 0, 1, 1, 1};
    int32_t c[2 * 2 * 2];
    int i;
    CHECK(approxmul_multiplier_exact(8, 0, &m) == APPROXMUL_OK);
    /* b shared by both batch entries (batch stride 0) */
    CHECK(approxmul_bmm(m, 2, 2, 2, 3, APPROXMUL_UINT8, a, 6, 3, 1, APPROXMUL_UINT8, b, 0, 2, 1,
                        0, 0, APPROXMUL_INT32, c, 4, 2, 1) == APPROXMUL_OK);
    CHECK(c[0] == 4 && c[1] == 5 && c[2] == 10 && c[3] == 11 && c[4] == 2 && c[7] == 4);
    for (i = 0; i < 8; ++i) c[i] = -1;
    CHECK(approxmul_bmm(m, -1, 2, 2, 3, APPROXMUL_UINT8, a, 6, 3, 1, APPROXMUL_UINT8, b, 0, 2, 1,
                        0, 0, APPROXMUL_INT32, c, 4, 2, 1) == APPROXMUL_ERR_SHAPE);
    CHECK(approxmul_bmm(m, 2, 2, 2, 3, APPROXMUL_UINT8, NULL, 6, 3, 1, APPROXMUL_UINT8, b, 0, 2,
                        1, 0, 0, APPROXMUL_INT32, c, 4, 2, 1) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_bmm(m, 2, 2, 2, 3, APPROXMUL_UINT8, a, 6, 3, 1, APPROXMUL_UINT8, b, 0, 2, 1,
                        0, 0, APPROXMUL_INT32, c, 0, 2, 1) == APPROXMUL_ERR_ALIASING);
    CHECK(approxmul_bmm(m, INT64_MAX, 2, 2, 3, APPROXMUL_UINT8, a, 6, 3, 1, APPROXMUL_UINT8, b, 0,
                        2, 1, 0, 0, APPROXMUL_INT32, c, 4, 2, 1) == APPROXMUL_ERR_OVERFLOW);
    /* found by fuzzing: a batch stride whose span fits int64 but reaches
     * below address 0 (was accepted and read before the fix) */
    CHECK(approxmul_bmm(m, 2, 2, 2, 3, APPROXMUL_UINT8, a, -((int64_t)1 << 62), 3, 1,
                        APPROXMUL_UINT8, b, 0, 2, 1, 0, 0, APPROXMUL_INT32, c, 4, 2, 1) ==
          APPROXMUL_ERR_OVERFLOW);
    CHECK(strstr(approxmul_last_error(), "address space") != NULL);
    for (i = 0; i < 8; ++i) CHECK(c[i] == -1);

    {
        /* 1 x 2 x 3 x 3 input, 2 x 1 x 2 x 2 weights, groups 2 (depthwise) */
        uint8_t x[18], w[8];
        int32_t out[2 * 2 * 2];
        const int64_t xs[4] = {1, 2, 3, 3}, xst[4] = {18, 9, 3, 1};
        const int64_t ws[4] = {2, 1, 2, 2}, wst[4] = {4, 4, 2, 1};
        const int64_t os[4] = {1, 2, 2, 2}, ost[4] = {8, 4, 2, 1};
        const int64_t one[2] = {1, 1}, zero[2] = {0, 0}, huge[2] = {5, 5};
        for (i = 0; i < 18; ++i) x[i] = 1;
        for (i = 0; i < 8; ++i) w[i] = (uint8_t)(i + 1);
        CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst, one,
                               zero, one, 2, 0, 0, APPROXMUL_INT32, out, os, ost) == APPROXMUL_OK);
        CHECK(out[0] == 10 && out[3] == 10 && out[4] == 26 && out[7] == 26);
        {
            /* found by fuzzing: weights stored wider than x (uint16 vs
             * uint8) were copied with x's element size and read past it */
            uint16_t w16[8];
            for (i = 0; i < 8; ++i) w16[i] = (uint16_t)(i + 1);
            for (i = 0; i < 8; ++i) out[i] = -1;
            CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT16, w16, ws, wst,
                                   one, zero, one, 2, 0, 0, APPROXMUL_INT32, out, os, ost) ==
                  APPROXMUL_OK);
            CHECK(out[0] == 10 && out[3] == 10 && out[4] == 26 && out[7] == 26);
        }
        for (i = 0; i < 8; ++i) out[i] = -1;
        CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst, one,
                               zero, one, 3, 0, 0, APPROXMUL_INT32, out, os, ost) ==
              APPROXMUL_ERR_SHAPE);
        CHECK(strstr(approxmul_last_error(), "groups") != NULL);
        CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst, zero,
                               zero, one, 2, 0, 0, APPROXMUL_INT32, out, os, ost) ==
              APPROXMUL_ERR_INVALID_ARGUMENT);
        CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst, one,
                               zero, huge, 2, 0, 0, APPROXMUL_INT32, out, os, ost) ==
              APPROXMUL_ERR_SHAPE);
        CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, NULL, xst, APPROXMUL_UINT8, w, ws, wst, one,
                               zero, one, 2, 0, 0, APPROXMUL_INT32, out, os, ost) ==
              APPROXMUL_ERR_NULL_POINTER);
        CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst, one,
                               zero, one, 2, 0, 0, APPROXMUL_INT32, out, xs, ost) ==
              APPROXMUL_ERR_SHAPE);
        {
            /* found by fuzzing: like the bmm case above, for x's row stride */
            const int64_t wrap[4] = {18, 9, -((int64_t)1 << 61), 1};
            CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, wrap, APPROXMUL_UINT8, w, ws, wst,
                                   one, zero, one, 2, 0, 0, APPROXMUL_INT32, out, os, ost) ==
                  APPROXMUL_ERR_OVERFLOW);
            CHECK(strstr(approxmul_last_error(), "address space") != NULL);
        }
        for (i = 0; i < 8; ++i) CHECK(out[i] == -1);
        {
            /* the output shape and type, with conv2d's own checks and messages */
            int64_t shape[4] = {-1, -1, -1, -1};
            char conv_message[256];
            approxmul_dtype dtype = APPROXMUL_INT8;
            CHECK(approxmul_conv2d_output_shape(m, xs, ws, one, zero, one, 2, 0, 0, shape,
                                                &dtype) == APPROXMUL_OK);
            CHECK(shape[0] == 1 && shape[1] == 2 && shape[2] == 2 && shape[3] == 2);
            CHECK(dtype == APPROXMUL_INT32);
            CHECK(approxmul_conv2d_output_shape(NULL, xs, ws, one, one, one, 2, 0, 0, shape,
                                                NULL) == APPROXMUL_OK);
            CHECK(shape[2] == 4 && shape[3] == 4);
            CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst,
                                   one, zero, huge, 2, 0, 0, APPROXMUL_INT32, out, os, ost) ==
                  APPROXMUL_ERR_SHAPE);
            strncpy(conv_message, approxmul_last_error(), sizeof conv_message - 1);
            conv_message[sizeof conv_message - 1] = 0;
            for (i = 0; i < 4; ++i) shape[i] = -1;
            CHECK(approxmul_conv2d_output_shape(m, xs, ws, one, zero, huge, 2, 0, 0, shape,
                                                &dtype) == APPROXMUL_ERR_SHAPE);
            CHECK(strcmp(conv_message, approxmul_last_error()) == 0);
            CHECK(approxmul_conv2d_output_shape(m, xs, ws, one, zero, one, 2, 256, 0, shape,
                                                &dtype) == APPROXMUL_ERR_OUT_OF_RANGE);
            CHECK(strstr(approxmul_last_error(), "x_zero_point") != NULL);
            CHECK(approxmul_conv2d_output_shape(m, xs, ws, one, zero, one, 2, 0, 0, shape,
                                                NULL) == APPROXMUL_ERR_NULL_POINTER);
            CHECK(approxmul_conv2d_output_shape(m, NULL, ws, one, zero, one, 2, 0, 0, shape,
                                                &dtype) == APPROXMUL_ERR_NULL_POINTER);
            CHECK(approxmul_conv2d_output_shape(m, xs, ws, one, zero, one, 2, 0, 0, NULL,
                                                &dtype) == APPROXMUL_ERR_NULL_POINTER);
            for (i = 0; i < 4; ++i) CHECK(shape[i] == -1);
        }
    }
    approxmul_multiplier_destroy(m);
}

/* ------------------------------------------------ multiplier library */

static uint16_t vendor_u8(uint8_t a, uint8_t b) { return (uint16_t)(a * b + (a == 3 && b == 5)); }
static uint64_t vendor_ba(uint64_t b, uint64_t a) { return a * 2 + b; } /* asymmetric on purpose */
static uint16_t vendor_signed_as_unsigned(uint8_t a, uint8_t b) {
    return (uint16_t)((int8_t)a * (int8_t)b); /* a signed circuit behind unsigned types */
}
static uint16_t vendor_too_wide(uint8_t a, uint8_t b) { (void)a; (void)b; return 0xFFFF; }
static int counting_callback(void *data, int64_t a, int64_t b, int64_t *p) {
    ++*(int *)data;
    *p = a - b;
    return 0;
}
static int failing_callback(void *data, int64_t a, int64_t b, int64_t *p) {
    (void)data;
    *p = 0;
    return a == 1 && b == 2;
}

/* approxmul_conv2d_output_shape gives the shape approxmul_conv2d accepts,
 * and for bad arguments the status and message approxmul_conv2d gives. */
static void test_conv2d_output_shape(void) {
    approxmul_multiplier *m = NULL;
    /* x 2 x 4 x 7 x 10, w 6 x 2 x 3 x 2, groups 2, stride (2, 3), padding
     * (1, 0), dilation (2, 1): OH = (7 + 2 - 2*2 - 1) / 2 + 1 = 3,
     * OW = (10 - 1 - 1) / 3 + 1 = 3 */
    const int64_t xs[4] = {2, 4, 7, 10}, ws[4] = {6, 2, 3, 2};
    const int64_t xst[4] = {280, 70, 10, 1}, wst[4] = {12, 6, 2, 1};
    const int64_t stride[2] = {2, 3}, padding[2] = {1, 0}, dilation[2] = {2, 1};
    const int64_t ost[4] = {54, 9, 3, 1};
    static uint8_t x[2 * 4 * 7 * 10], w[6 * 2 * 3 * 2];
    int64_t shape[4] = {-7, -7, -7, -7}, out[2 * 6 * 3 * 3];
    char message[512];
    approxmul_dtype dtype = APPROXMUL_INT8;
    int i;
    CHECK(approxmul_multiplier_exact(8, 0, &m) == APPROXMUL_OK);
    CHECK(approxmul_conv2d_output_shape(m, xs, ws, stride, padding, dilation, 2, 0, 0, shape,
                                        &dtype) == APPROXMUL_OK);
    CHECK(dtype == APPROXMUL_INT32);
    CHECK(shape[0] == 2 && shape[1] == 6 && shape[2] == 3 && shape[3] == 3);
    CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst, stride,
                           padding, dilation, 2, 0, 0, APPROXMUL_INT64, out, shape, ost) ==
          APPROXMUL_OK);
    shape[3] = 4;
    CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, xs, xst, APPROXMUL_UINT8, w, ws, wst, stride,
                           padding, dilation, 2, 0, 0, APPROXMUL_INT64, out, shape, ost) ==
          APPROXMUL_ERR_SHAPE);

    {
        /* each bad argument: same status and message from both functions,
         * and out_shape untouched */
        const int64_t no_stride[2] = {1, 0}, tall[4] = {6, 2, 12, 2}, x_odd[4] = {2, 5, 7, 10};
        struct {
            const int64_t *x_shape, *w_shape, *stride;
            int64_t groups, x_zero;
            approxmul_status status;
        } bad[] = {
            {xs, ws, stride, 4, 0, APPROXMUL_ERR_SHAPE},            /* groups */
            {xs, ws, no_stride, 2, 0, APPROXMUL_ERR_INVALID_ARGUMENT},
            {xs, tall, stride, 2, 0, APPROXMUL_ERR_SHAPE},          /* kernel span */
            {x_odd, ws, stride, 2, 0, APPROXMUL_ERR_SHAPE},         /* channels */
            {xs, ws, stride, 2, 256, APPROXMUL_ERR_OUT_OF_RANGE},   /* zero point */
        };
        size_t k;
        for (k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
            for (i = 0; i < 4; ++i) shape[i] = -7;
            CHECK(approxmul_conv2d_output_shape(m, bad[k].x_shape, bad[k].w_shape, bad[k].stride,
                                                padding, dilation, bad[k].groups, bad[k].x_zero,
                                                0, shape, &dtype) == bad[k].status);
            for (i = 0; i < 4; ++i) CHECK(shape[i] == -7);
            snprintf(message, sizeof message, "%s", approxmul_last_error());
            CHECK(strlen(message) > 0);
            CHECK(approxmul_conv2d(m, APPROXMUL_UINT8, x, bad[k].x_shape, xst, APPROXMUL_UINT8, w,
                                   bad[k].w_shape, wst, bad[k].stride, padding, dilation,
                                   bad[k].groups, bad[k].x_zero, 0, APPROXMUL_INT64, out, xs,
                                   ost) == bad[k].status);
            CHECK(strcmp(message, approxmul_last_error()) == 0);
        }
    }
    CHECK(strstr(approxmul_last_error(), "x_zero_point") != NULL);
    CHECK(approxmul_conv2d_output_shape(m, xs, ws, stride, padding, dilation, 2, 0, 0, NULL,
                                        &dtype) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_conv2d_output_shape(m, xs, NULL, stride, padding, dilation, 2, 0, 0, shape,
                                        &dtype) == APPROXMUL_ERR_NULL_POINTER);
    /* no multiplier: shape inference, zero points unchecked */
    for (i = 0; i < 4; ++i) shape[i] = -7;
    CHECK(approxmul_conv2d_output_shape(NULL, xs, ws, stride, padding, dilation, 2, 999, 0,
                                        shape, NULL) == APPROXMUL_OK);
    CHECK(shape[0] == 2 && shape[1] == 6 && shape[2] == 3 && shape[3] == 3);
    CHECK(approxmul_conv2d_output_shape(NULL, xs, ws, stride, padding, dilation, 4, 0, 0,
                                        shape, NULL) == APPROXMUL_ERR_SHAPE);
    approxmul_multiplier_destroy(m);
}

static void test_specs(void) {
    approxmul_multiplier *m = NULL;
    const char *text = NULL, *params = NULL, *desc = NULL;
    int64_t p = 0;
    int i, found_drum = 0;

    CHECK(approxmul_multiplier_from_spec("drum:k=4", &m) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_spec(m, &text) == APPROXMUL_OK);
    CHECK(strcmp(text, "drum:bits=8,signed=0,k=4") == 0);
    CHECK(approxmul_multiplier_product(m, 200, 57, &p) == APPROXMUL_OK && p == 12480);
    approxmul_multiplier_destroy(m);
    m = NULL;

    CHECK(approxmul_multiplier_from_spec("nope:k=1", &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK(strstr(approxmul_last_error(), "mitchell") != NULL); /* lists the families */
    CHECK(approxmul_multiplier_from_spec("drum:z=1", &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(approxmul_last_error(), "k=4 (2..bits)") != NULL); /* lists the parameters */
    CHECK(approxmul_multiplier_from_spec(NULL, &m) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_multiplier_from_spec("exact", NULL) == APPROXMUL_ERR_NULL_POINTER);

    /* a table multiplier has no spec */
    {
        int32_t t[4] = {0, 0, 0, 1};
        CHECK(approxmul_multiplier_from_table(t, 4, 1, 0, &m) == APPROXMUL_OK);
        CHECK(approxmul_multiplier_spec(m, &text) == APPROXMUL_OK && text[0] == '\0');
        approxmul_multiplier_destroy(m);
    }

    CHECK(approxmul_family_count() >= 8);
    for (i = 0; i < approxmul_family_count(); ++i) {
        CHECK(approxmul_family_info(i, &text, &params, &desc) == APPROXMUL_OK);
        found_drum += strcmp(text, "drum") == 0 && strstr(desc, "ICCAD 2015") != NULL;
    }
    CHECK(found_drum == 1);
    CHECK(approxmul_family_info(-1, &text, &params, &desc) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_family_info(0, NULL, &params, &desc) == APPROXMUL_ERR_NULL_POINTER);
}

static void test_table_parse(void) {
    /* 1-bit tables: 4 entries */
    const unsigned char binary[8] = {0, 0, 0, 0, 0, 0, 1, 0};
    const char *c_source = "/* x */\n#include <stdint.h>\nconst int16_t lut[2][2] = {{0, 0}, {0, 0x1}};\n";
    const char *text = "0, 0\n0 1\n";
    const char *offset_text = "1 0\n0 0\n"; /* signed 1-bit, offset order: row 0 is -1 */
    int32_t out[4] = {7, 7, 7, 7};
    int bits = 0;

    CHECK(approxmul_table_parse(binary, 8, APPROXMUL_TABLE_BINARY_U16LE, 0, 0, APPROXMUL_ORDER_RAW,
                                out, 4, &bits) == APPROXMUL_OK);
    CHECK(bits == 1 && out[3] == 1 && out[0] == 0);
    CHECK(approxmul_table_parse(c_source, (int64_t)strlen(c_source), APPROXMUL_TABLE_C_SOURCE, 1,
                                0, APPROXMUL_ORDER_RAW, out, 4, &bits) == APPROXMUL_OK);
    CHECK(out[3] == 1);
    CHECK(approxmul_table_parse(text, (int64_t)strlen(text), APPROXMUL_TABLE_TEXT, 0, 0,
                                APPROXMUL_ORDER_RAW, out, 4, &bits) == APPROXMUL_OK);
    CHECK(out[3] == 1);
    CHECK(approxmul_table_parse(offset_text, (int64_t)strlen(offset_text), APPROXMUL_TABLE_TEXT, 0,
                                1, APPROXMUL_ORDER_OFFSET, out, 4, &bits) == APPROXMUL_OK);
    CHECK(out[3] == 1 && out[0] == 0); /* pattern 1 is -1 */

    /* errors leave out and bits alone */
    out[0] = 7;
    bits = 5;
    CHECK(approxmul_table_parse(binary, 7, APPROXMUL_TABLE_BINARY_U16LE, 0, 0, APPROXMUL_ORDER_RAW,
                                out, 4, &bits) == APPROXMUL_ERR_FORMAT);
    CHECK(strstr(approxmul_last_error(), "truncated") != NULL);
    CHECK(approxmul_table_parse(binary, 8, APPROXMUL_TABLE_BINARY_U16LE, 2, 0, APPROXMUL_ORDER_RAW,
                                out, 4, &bits) == APPROXMUL_ERR_FORMAT);
    CHECK(approxmul_table_parse(binary, 8, APPROXMUL_TABLE_C_SOURCE, 0, 0, APPROXMUL_ORDER_RAW,
                                out, 4, &bits) == APPROXMUL_ERR_FORMAT);
    CHECK(approxmul_table_parse(text, (int64_t)strlen(text), APPROXMUL_TABLE_TEXT, 0, 0,
                                APPROXMUL_ORDER_OFFSET, out, 4, &bits) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_table_parse(c_source, 30, APPROXMUL_TABLE_C_SOURCE, 0, 0, APPROXMUL_ORDER_RAW,
                                out, 4, &bits) == APPROXMUL_ERR_FORMAT);
    CHECK(approxmul_table_parse(text, (int64_t)strlen(text), (approxmul_table_format)9, 0, 0,
                                APPROXMUL_ORDER_RAW, out, 4, &bits) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_table_parse(text, (int64_t)strlen(text), APPROXMUL_TABLE_TEXT, 0, 0,
                                APPROXMUL_ORDER_RAW, out, 3, &bits) == APPROXMUL_ERR_SHAPE);
    CHECK(approxmul_table_parse(NULL, 4, APPROXMUL_TABLE_TEXT, 0, 0, APPROXMUL_ORDER_RAW, out, 4,
                                &bits) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_table_parse(text, -1, APPROXMUL_TABLE_TEXT, 0, 0, APPROXMUL_ORDER_RAW, out, 4,
                                &bits) == APPROXMUL_ERR_SHAPE);
    CHECK(out[0] == 7 && bits == 5);
}

static void test_foreign(void) {
    approxmul_multiplier *m = NULL;
    int64_t p = 0;
    int calls = 0;

    CHECK(approxmul_multiplier_from_c_function((approxmul_function)vendor_u8, APPROXMUL_SIG_U16_U8_U8, 8, 0,
                                               "vendor_u8", &m) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_product(m, 3, 5, &p) == APPROXMUL_OK && p == 16);
    CHECK(approxmul_multiplier_product(m, 5, 3, &p) == APPROXMUL_OK && p == 15);
    approxmul_multiplier_destroy(m);

    /* second operand first: f(b, a) = 2a + b, so mul(a=10, b=1) = 21 */
    CHECK(approxmul_multiplier_from_c_function((approxmul_function)vendor_ba, APPROXMUL_SIG_U64_U64B_U64A, 12,
                                               0, "ba", &m) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_product(m, 10, 1, &p) == APPROXMUL_OK && p == 21);
    approxmul_multiplier_destroy(m);

    CHECK(approxmul_multiplier_from_c_function((approxmul_function)vendor_signed_as_unsigned,
                                               APPROXMUL_SIG_U16_U8_U8, 8, 1, "s", &m) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_product(m, -3, 7, &p) == APPROXMUL_OK && p == -21);
    CHECK(approxmul_multiplier_product(m, -128, -128, &p) == APPROXMUL_OK && p == 16384);
    approxmul_multiplier_destroy(m);
    m = NULL;

    /* 0xFFFF exceeds the 4-bit unsigned product range 0..255 */
    CHECK(approxmul_multiplier_from_c_function((approxmul_function)vendor_too_wide, APPROXMUL_SIG_U16_U8_U8, 4,
                                               0, "w", &m) == APPROXMUL_ERR_OUT_OF_RANGE);
    CHECK(approxmul_multiplier_from_c_function((approxmul_function)vendor_u8, APPROXMUL_SIG_U16_U8_U8, 9, 0,
                                               "x", &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_multiplier_from_c_function((approxmul_function)vendor_u8, (approxmul_signature)77, 8, 0,
                                               "x", &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(approxmul_last_error(), "uint16_t f(uint8_t a, uint8_t b)") != NULL);
    CHECK(approxmul_multiplier_from_c_function((approxmul_function)vendor_u8, APPROXMUL_SIG_I16_I8_I8, 8, 0,
                                               "x", &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_multiplier_from_c_function(NULL, APPROXMUL_SIG_U16_U8_U8, 8, 0, "x", &m) ==
          APPROXMUL_ERR_NULL_POINTER);
    CHECK(m == NULL);

    CHECK(approxmul_multiplier_from_callback(counting_callback, &calls, 3, 1, &m) == APPROXMUL_OK);
    CHECK(calls == 64);
    CHECK(approxmul_multiplier_product(m, -4, 3, &p) == APPROXMUL_OK && p == -7 && calls == 64);
    approxmul_multiplier_destroy(m);
    m = NULL;
    CHECK(approxmul_multiplier_from_callback(failing_callback, NULL, 3, 0, &m) == APPROXMUL_ERR_CALLBACK);
    CHECK(strstr(approxmul_last_error(), "a=1, b=2") != NULL);
    CHECK(approxmul_multiplier_from_callback(counting_callback, &calls, 9, 0, &m) ==
          APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(m == NULL);
}

static void test_metrics(void) {
    approxmul_multiplier *m = NULL;
    approxmul_metrics met;
    int64_t map[16];
    /* 2-bit unsigned table: exact except 3*3 -> 8 (error -1) */
    int32_t t[16] = {0, 0, 0, 0, 0, 1, 2, 3, 0, 2, 4, 6, 0, 3, 6, 8};

    CHECK(approxmul_multiplier_from_table(t, 16, 2, 0, &m) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_metrics(m, &met) == APPROXMUL_OK);
    CHECK(met.pairs == 16 && met.zero_product_pairs == 7);
    CHECK(met.mae == 1.0 / 16 && met.wce == 1 && met.bias == -1.0 / 16);
    CHECK(met.mae_percent == 100.0 / 256 && met.ep_percent == 100.0 / 16);
    CHECK(met.wcre_percent > 11.11 && met.wcre_percent < 11.12);       /* 1/9 */
    CHECK(met.mre_percent > 100.0 / 81 - 1e-9 && met.mre_percent < 100.0 / 81 + 1e-9);
    CHECK(met.min_error == -1 && met.max_error == 0);
    CHECK(approxmul_multiplier_error_map(m, map, 16) == APPROXMUL_OK);
    CHECK(map[15] == -1 && map[14] == 0);
    map[0] = 99;
    CHECK(approxmul_multiplier_error_map(m, map, 15) == APPROXMUL_ERR_SHAPE && map[0] == 99);
    CHECK(approxmul_multiplier_metrics(m, NULL) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_multiplier_metrics(NULL, &met) == APPROXMUL_ERR_NULL_POINTER);
    approxmul_multiplier_destroy(m);

    CHECK(approxmul_multiplier_from_spec("exact:bits=16", &m) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_error_map(m, map, 16) == APPROXMUL_ERR_UNSUPPORTED);
    approxmul_multiplier_destroy(m);
}

static double absolute(double v) { return v < 0 ? -v : v; }

static void test_gradients(void) {
    approxmul_multiplier *m = NULL;
    static double grad[256 * 256];
    double slopes[256];
    int i, j, ok = 1;
    CHECK(approxmul_multiplier_exact(8, 1, &m) == APPROXMUL_OK);
    /* exact a*b: dM/da = b everywhere (the product is linear in a) */
    CHECK(approxmul_multiplier_gradient_table(m, APPROXMUL_OPERAND_A, 3, grad, 65536) == APPROXMUL_OK);
    for (i = 0; i < 256; ++i)
        for (j = 0; j < 256; ++j)
            ok &= grad[i * 256 + j] == (double)(signed char)j;
    CHECK(ok);
    CHECK(approxmul_multiplier_gradient_slopes(m, APPROXMUL_OPERAND_B, slopes, 256) == APPROXMUL_OK);
    for (i = 0, ok = 1; i < 256; ++i)
        ok &= absolute(slopes[i] - (double)(signed char)i) < 1e-9;
    CHECK(ok);
    approxmul_multiplier_destroy(m);

    /* 2-bit unsigned table, operands 0..3, row a, column b */
    {
        const int32_t t[16] = {0, 0, 0, 0,  0, 1, 2, 3,  0, 2, 4, 7,  0, 3, 6, 9};
        double g[16], s[4];
        CHECK(approxmul_multiplier_from_table(t, 16, 2, 0, &m) == APPROXMUL_OK);
        /* h = 1, operand B at (a=2): b=0: (M(2,1)-M(2,0))/1 = 2; b=1: (4-0)/2 = 2;
         * b=2: (7-2)/2 = 2.5; b=3: (7-4)/1 = 3 */
        CHECK(approxmul_multiplier_gradient_table(m, APPROXMUL_OPERAND_B, 1, g, 16) == APPROXMUL_OK);
        CHECK(g[8] == 2.0 && g[9] == 2.0 && g[10] == 2.5 && g[11] == 3.0);
        /* slope of column b=3 over a = 0..3: values 0,3,7,9, mean a 1.5:
         * (-1.5*0 - 0.5*3 + 0.5*7 + 1.5*9) / 5 = 15.5 / 5 = 3.1 */
        CHECK(approxmul_multiplier_gradient_slopes(m, APPROXMUL_OPERAND_A, s, 4) == APPROXMUL_OK);
        CHECK(absolute(s[3] - 3.1) < 1e-12);
        s[0] = 99;
        CHECK(approxmul_multiplier_gradient_slopes(m, APPROXMUL_OPERAND_A, s, 3) == APPROXMUL_ERR_SHAPE && s[0] == 99);
        CHECK(approxmul_multiplier_gradient_table(m, APPROXMUL_OPERAND_A, 0, g, 16) == APPROXMUL_ERR_INVALID_ARGUMENT);
        CHECK(approxmul_multiplier_gradient_table(m, (approxmul_operand)7, 1, g, 16) == APPROXMUL_ERR_INVALID_ARGUMENT);
        CHECK(approxmul_multiplier_gradient_table(m, APPROXMUL_OPERAND_A, 1, NULL, 16) == APPROXMUL_ERR_NULL_POINTER);
        CHECK(approxmul_multiplier_gradient_slopes(NULL, APPROXMUL_OPERAND_A, s, 4) == APPROXMUL_ERR_NULL_POINTER);
        approxmul_multiplier_destroy(m);
    }
}

int main(void) {
    test_version();
    test_errors();
    test_matmul();
    test_bmm_and_conv2d();
    test_conv2d_output_shape();
    test_specs();
    test_table_parse();
    test_foreign();
    test_metrics();
    test_gradients();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_capi: all checks passed\n");
    return 0;
}
