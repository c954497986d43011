/* A plain C99 program against the public header: proves the header is valid
 * C, that the library links from C, and checks the C-level contract that
 * Python cannot reach (NULL pointers, negative sizes, untouched outputs). */
#include <stdio.h>
#include <string.h>

#include "approxmul.h"

static int failures = 0;

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

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
    CHECK(approxmul_multiplier_from_table(table, 16, 9, 0, &m) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(approxmul_multiplier_bits(NULL, &bits) == APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_set_num_threads(-1) == APPROXMUL_ERR_INVALID_ARGUMENT);
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

int main(void) {
    test_version();
    test_errors();
    test_matmul();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_capi: all checks passed\n");
    return 0;
}
