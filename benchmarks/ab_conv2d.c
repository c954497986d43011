/* Two builds of libapproxmul in one process, timed on the same conv2d: the
 * before/after of a kernel change without the machine's drift between runs
 * (on shared machines two processes minutes apart differ by more than most
 * changes). Blocks of 10 calls alternate between the libraries after a
 * 50 ms pause; the best call of each is kept, and the outputs must agree.
 *
 *   cc -O2 -Icapi/include benchmarks/ab_conv2d.c -o /tmp/ab_conv2d -ldl
 *   /tmp/ab_conv2d OLD.so NEW.so CHANNELS SIZE SPEC THREADS ROUNDS
 *
 * Layer: batch 64 (or AB_BATCH from the environment), CHANNELS -> CHANNELS
 * (or AB_OUT), SIZE x SIZE, 3x3 with padding 1 (or AB_KERNEL=1: 1x1, no
 * padding), stride 1 (or AB_STRIDE), one group (or AB_GROUPS: AB_GROUPS=CHANNELS
 * is a depthwise layer), uint8 codes with
 * zero points 3 and 128 (as benchmarks/bench_conv.py). With AB_STAGE set,
 * approxmul_conv2d_requantize_dequantize to float32 instead (the output
 * stage a framework adapter runs: uint8 codes around 100, scale 0.05). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ab_common.h"

typedef approxmul_status (*conv_fn)(const approxmul_multiplier *, approxmul_dtype, const void *,
                                    const int64_t *, const int64_t *, approxmul_dtype,
                                    const void *, const int64_t *, const int64_t *,
                                    const int64_t *, const int64_t *, const int64_t *, int64_t,
                                    int64_t, int64_t, approxmul_dtype, void *, const int64_t *,
                                    const int64_t *);

typedef approxmul_status (*staged_fn)(
    const approxmul_multiplier *, approxmul_dtype, const void *, const int64_t *, const int64_t *,
    approxmul_dtype, const void *, const int64_t *, const int64_t *, const int64_t *,
    const int64_t *, const int64_t *, int64_t, int64_t, int64_t, const int32_t *, const int32_t *,
    const int32_t *, int32_t, int32_t, int32_t, approxmul_rounding, approxmul_dtype, double,
    approxmul_real_type, void *, const int64_t *);

struct Call {
    conv_fn conv[2];
    staged_fn staged[2];
    const int32_t *bias, *mantissa, *shift;
    approxmul_multiplier *m[2];
    const uint8_t *x, *w;
    const int64_t *x_shape, *x_strides, *w_shape, *w_strides, *out_shape, *out_strides;
    const int64_t *strides, *padding, *one;
    int64_t groups;
    int32_t *out[2];
};

/* zero points 3 (x) and 128 (w): the cross terms run too */
static approxmul_status run_conv2d(int l, void *context) {
    const struct Call *c = context;
    if (c->staged[l] != NULL)
        return c->staged[l](c->m[l], APPROXMUL_UINT8, c->x, c->x_shape, c->x_strides,
                            APPROXMUL_UINT8, c->w, c->w_shape, c->w_strides, c->strides,
                            c->padding, c->one, c->groups, 3, 128, c->bias, c->mantissa, c->shift, 100, 0, 255,
                            APPROXMUL_ROUND_DOUBLE, APPROXMUL_UINT8, 0.05, APPROXMUL_FLOAT32,
                            c->out[l], c->out_shape);
    return c->conv[l](c->m[l], APPROXMUL_UINT8, c->x, c->x_shape, c->x_strides, APPROXMUL_UINT8,
                      c->w, c->w_shape, c->w_strides, c->strides, c->padding, c->one, c->groups, 3, 128,
                      APPROXMUL_INT32, c->out[l], c->out_shape, c->out_strides);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s OLD.so NEW.so CHANNELS SIZE SPEC THREADS ROUNDS\n", argv[0]);
        return 2;
    }
    const int64_t N = getenv("AB_BATCH") ? atoi(getenv("AB_BATCH")) : 64, C = atoi(argv[3]), S = atoi(argv[4]);
    const int64_t stride = getenv("AB_STRIDE") ? atoi(getenv("AB_STRIDE")) : 1;
    const int64_t KS = getenv("AB_KERNEL") ? atoi(getenv("AB_KERNEL")) : 3, pad = KS / 2;
    const int64_t O = getenv("AB_OUT") ? atoi(getenv("AB_OUT")) : C;
    const int64_t G = getenv("AB_GROUPS") ? atoi(getenv("AB_GROUPS")) : 1;
    const int64_t OS = (S + 2 * pad - KS) / stride + 1;
    const char *spec = argv[5];
    const int threads = atoi(argv[6]), rounds = atoi(argv[7]);
    conv_fn conv[2];
    staged_fn staged[2] = {NULL, NULL};
    approxmul_multiplier *m[2];
    for (int l = 0; l < 2; ++l) {
        void *lib = ab_open(argv[1 + l], threads, spec, &m[l]);
        if (lib == NULL) return 1;
        conv[l] = (conv_fn)dlsym(lib, "approxmul_conv2d");
        if (getenv("AB_STAGE") != NULL)
            staged[l] = (staged_fn)dlsym(lib, "approxmul_conv2d_requantize_dequantize");
    }
    const int64_t x_shape[4] = {N, C, S, S}, w_shape[4] = {O, C / G, KS, KS}, out_shape[4] = {N, O, OS, OS};
    const int64_t x_strides[4] = {C * S * S, S * S, S, 1}, w_strides[4] = {C / G * KS * KS, KS * KS, KS, 1};
    const int64_t out_strides[4] = {O * OS * OS, OS * OS, OS, 1};
    const int64_t one[2] = {1, 1}, strides[2] = {stride, stride}, padding[2] = {pad, pad};
    const size_t x_size = (size_t)(N * C * S * S), w_size = (size_t)(O * C / G * KS * KS);
    const size_t out_size = (size_t)(N * O * OS * OS);
    uint8_t *x = malloc(x_size), *w = malloc(w_size);
    int32_t *out[2] = {malloc(4 * out_size), malloc(4 * out_size)};
    srand(1);
    for (size_t i = 0; i < x_size; ++i) x[i] = (uint8_t)rand();
    for (size_t i = 0; i < w_size; ++i) w[i] = (uint8_t)rand();
    int32_t *bias = malloc(4 * O), *mantissa = malloc(4 * O), *shift = malloc(4 * O);
    for (int64_t o = 0; o < O; ++o)  /* factors of about 2^-12 to 2^-11 */
        bias[o] = (int32_t)(o * 1000 - 5000), mantissa[o] = 1100000000 + (int32_t)(o % 32) * 30000000,
        shift[o] = -11;
    struct Call call = {{conv[0], conv[1]}, {staged[0], staged[1]}, bias, mantissa, shift,
                        {m[0], m[1]}, x, w, x_shape, x_strides, w_shape,
                        w_strides, out_shape, out_strides, strides, padding, one, G, {out[0], out[1]}};
    double best[2];
    if (ab_alternate(rounds, run_conv2d, &call, "conv2d", best) != APPROXMUL_OK) return 1;
    const int same = memcmp(out[0], out[1], 4 * out_size) == 0;
    printf("%s%s %lld->%lld %lldx%lld %lldx%lld stride %lld%s, %d threads: old %.3f ms, new %.3f ms, new/old %.3f%s\n",
           staged[0] != NULL ? "staged " : "", spec, (long long)C, (long long)O, (long long)S, (long long)S, (long long)KS, (long long)KS, (long long)stride, G == C && G > 1 ? " depthwise" : "", threads, best[0] * 1e3,
           best[1] * 1e3, best[1] / best[0], same ? "" : "  OUTPUTS DIFFER");
    return same ? 0 : 1;
}
