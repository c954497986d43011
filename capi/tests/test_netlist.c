/* The netlist entry points from plain C99 (suite 'c': the valgrind and
 * sanitizer jobs run it): a netlist text becomes a multiplier, errors name
 * the line and write nothing, a family netlist reads back to the family,
 * and every handle is released (valgrind's leak check). */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "approxmul.h"

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)

static const char kMul2[] =
    "// AREA = 4.5 um2\n"
    "module mul2 (A, B, O);\n"
    "  input [1:0] A, B;\n"
    "  output [3:0] O;\n"
    "  wire c;\n"
    "  and (O[0], A[0], B[0]);\n"
    "  assign c = A[1] & B[0] & A[0] & B[1];\n"
    "  assign O[1] = (A[1] & B[0]) ^ (A[0] & B[1]);\n"
    "  assign O[2] = (A[1] & B[1]) ^ c;\n"
    "  assign O[3] = c;\n"
    "endmodule\n";

static void test_netlist_multiplier(void) {
    approxmul_netlist *n = NULL;
    approxmul_multiplier *m = NULL;
    const char *info = NULL;
    int64_t p = 0, a, b;
    CHECK(approxmul_netlist_parse(kMul2, (int64_t)strlen(kMul2), NULL, NULL, NULL, NULL, NULL, 0,
                                  &n) == APPROXMUL_OK);
    CHECK(approxmul_netlist_info(n, &info) == APPROXMUL_OK);
    CHECK(strstr(info, "module=mul2\n") != NULL && strstr(info, "meta.AREA=4.5 um2\n") != NULL);
    CHECK(approxmul_multiplier_from_netlist(n, 0, &m) == APPROXMUL_OK);
    approxmul_netlist_destroy(n); /* the multiplier does not need it */
    for (a = 0; a < 4; ++a)
        for (b = 0; b < 4; ++b) {
            CHECK(approxmul_multiplier_product(m, a, b, &p) == APPROXMUL_OK);
            CHECK(p == a * b);
        }
    approxmul_multiplier_destroy(m);
}

static void test_netlist_errors(void) {
    static const char loop[] =
        "module m(A, B, O); input A, B; output O; wire x;\n"
        "assign x = O ^ A;\nassign O = x & B;\nendmodule\n";
    approxmul_netlist *n = (approxmul_netlist *)&failures; /* must stay untouched */
    CHECK(approxmul_netlist_parse(loop, (int64_t)strlen(loop), NULL, NULL, NULL, NULL, NULL, 0,
                                  &n) == APPROXMUL_ERR_FORMAT);
    CHECK(n == (approxmul_netlist *)&failures);
    CHECK(strstr(approxmul_last_error(), "combinational loop") != NULL);
    CHECK(strncmp(approxmul_last_error(), "line ", 5) == 0);
    /* truncated: no endmodule */
    CHECK(approxmul_netlist_parse(kMul2, 60, NULL, NULL, NULL, NULL, NULL, 0, &n) ==
          APPROXMUL_ERR_FORMAT);
    CHECK(approxmul_netlist_parse(kMul2, (int64_t)strlen(kMul2), NULL, "X", NULL, NULL, NULL, 0,
                                  &n) == APPROXMUL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(approxmul_last_error(), "its ports: input A[1:0], input B[1:0], output O[3:0]") != NULL);
    CHECK(approxmul_netlist_parse(NULL, 5, NULL, NULL, NULL, NULL, NULL, 0, &n) ==
          APPROXMUL_ERR_NULL_POINTER);
    CHECK(approxmul_netlist_parse(kMul2, -1, NULL, NULL, NULL, NULL, NULL, 0, &n) == APPROXMUL_ERR_SHAPE);
    CHECK(approxmul_netlist_parse(kMul2, 10, NULL, NULL, NULL, NULL, NULL, 3, &n) ==
          APPROXMUL_ERR_NULL_POINTER);
    CHECK(n == (approxmul_netlist *)&failures);
    CHECK(approxmul_netlist_info(NULL, NULL) == APPROXMUL_ERR_NULL_POINTER);
    approxmul_netlist_destroy(NULL);
}

static void test_family_netlist(void) {
    const char *spec = "bam:bits=6,signed=1,hbl=1,vbl=5";
    int64_t length = 0, written = -1, p = 0, q = 0, a, b;
    char *text;
    approxmul_netlist *n = NULL;
    approxmul_multiplier *family = NULL, *back = NULL;
    CHECK(approxmul_family_verilog(spec, NULL, 0, &length) == APPROXMUL_OK && length > 100);
    text = (char *)malloc((size_t)length);
    CHECK(approxmul_family_verilog(spec, text, length - 1, &written) == APPROXMUL_ERR_SHAPE);
    CHECK(written == -1);
    CHECK(approxmul_family_verilog(spec, text, length, &written) == APPROXMUL_OK);
    CHECK(written == length && text[length - 1] == '\0');
    CHECK(approxmul_netlist_parse(text, length - 1, NULL, NULL, NULL, NULL, NULL, 0, &n) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_from_netlist(n, 1, &back) == APPROXMUL_OK);
    CHECK(approxmul_multiplier_from_spec(spec, &family) == APPROXMUL_OK);
    for (a = -32; a < 32; ++a)
        for (b = -32; b < 32; ++b) {
            CHECK(approxmul_multiplier_product(back, a, b, &p) == APPROXMUL_OK);
            CHECK(approxmul_multiplier_product(family, a, b, &q) == APPROXMUL_OK);
            if (p != q) {
                CHECK(p == q);
                a = b = 32;
            }
        }
    CHECK(approxmul_family_verilog("drum:k=4", NULL, 0, &length) == APPROXMUL_ERR_UNSUPPORTED);
    approxmul_multiplier_destroy(family);
    approxmul_multiplier_destroy(back);
    approxmul_netlist_destroy(n);
    free(text);
}

int main(void) {
    test_netlist_multiplier();
    test_netlist_errors();
    test_family_netlist();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_netlist: all checks passed\n");
    return 0;
}
