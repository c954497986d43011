/* The C tests' one assertion: report the failed condition and count it, so
 * that a test program runs every check and exits non-zero if any failed. */
#ifndef APPROXMUL_TESTS_CHECK_H
#define APPROXMUL_TESTS_CHECK_H

#include <stdio.h>

static int failures = 0;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                             \
        }                                                                           \
    } while (0)

#endif
