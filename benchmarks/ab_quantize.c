/* Two builds of libapproxmul in one process, timed on the same affine
 * quantization (as benchmarks/ab_matmul.c does for matmul): float32
 * activations of N*C*H*W values, one scale and zero point, into uint8 codes
 * through approxmul_quantize_finite (what the framework adapters call);
 * blocks of 10 calls alternate between the libraries after a 50 ms pause,
 * the best call of each is kept, and the codes must agree.
 *
 *   cc -O2 -Icapi/include benchmarks/ab_quantize.c -o /tmp/ab_quantize -ldl -lm
 *   /tmp/ab_quantize OLD.so NEW.so COUNT THREADS ROUNDS
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ab_common.h"

typedef approxmul_status (*quantize_fn)(int64_t, int64_t, int64_t, approxmul_real_type,
                                        const void *, const double *, const int32_t *, int32_t,
                                        int32_t, approxmul_dtype, void *);

struct Call {
    quantize_fn quantize[2];
    int64_t count;
    const float *x;
    uint8_t *out[2];
};

/* activations of about +-6 onto 0..255 around 128 */
static approxmul_status run_quantize(int l, void *context) {
    const struct Call *c = context;
    const double scale = 6.0 / 255.0;
    const int32_t zero = 128;
    return c->quantize[l](1, 1, c->count, APPROXMUL_FLOAT32, c->x, &scale, &zero, 0, 255,
                          APPROXMUL_UINT8, c->out[l]);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s OLD.so NEW.so COUNT THREADS ROUNDS\n", argv[0]);
        return 2;
    }
    const int64_t count = atoll(argv[3]);
    const int threads = atoi(argv[4]), rounds = atoi(argv[5]);
    quantize_fn quantize[2];
    for (int l = 0; l < 2; ++l) {
        approxmul_multiplier *m;
        void *lib = ab_open(argv[1 + l], threads, "exact", &m);
        if (lib == NULL) return 1;
        quantize[l] = (quantize_fn)dlsym(lib, "approxmul_quantize_finite");
    }
    float *x = malloc(sizeof(float) * (size_t)count);
    uint8_t *out[2] = {malloc((size_t)count), malloc((size_t)count)};
    srand(1);
    for (int64_t i = 0; i < count; ++i)  /* roughly normal within +-3, as activations are */
        x[i] = (float)(((double)rand() + rand() + rand() - 1.5 * RAND_MAX) / RAND_MAX * 2.0);
    struct Call call = {{quantize[0], quantize[1]}, count, x, {out[0], out[1]}};
    double best[2];
    if (ab_alternate(rounds, run_quantize, &call, "quantize", best) != APPROXMUL_OK) return 1;
    const int same = memcmp(out[0], out[1], (size_t)count) == 0;
    printf("quantize %lld float32 values, %d threads: old %.3f ms, new %.3f ms, new/old %.3f%s\n",
           (long long)count, threads, best[0] * 1e3, best[1] * 1e3, best[1] / best[0],
           same ? "" : "  OUTPUTS DIFFER");
    return same ? 0 : 1;
}
