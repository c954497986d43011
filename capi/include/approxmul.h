/*
 * approxmul.h - the C ABI of approxmul, a simulator of approximate integer
 * multipliers for neural-network studies.
 *
 * This header is the single source of truth for the ABI: the Python binding
 * (approxmul_cffi) derives its cffi declarations from it mechanically, so
 * keep declarations on plain C lines that cffi can parse (no macros inside
 * declarations other than APPROXMUL_API, no function-like macros).
 *
 * Conventions (docs/abi.md has the long form):
 *  - Every function returns an approxmul_status; APPROXMUL_OK is 0. On any
 *    other status nothing has been written to the outputs, and
 *    approxmul_last_error() holds a message for the calling thread.
 *  - Results come back through out-pointers, written only on success.
 *  - Sizes are int64_t. Strides are int64_t and counted in elements, one row
 *    stride and one column stride per matrix (BLIS style); they may be zero
 *    or negative for inputs, never aliasing for outputs.
 *  - Handles are opaque, immutable after creation and safe to share between
 *    threads; destroy functions accept NULL.
 */
#ifndef APPROXMUL_H
#define APPROXMUL_H

#include <stdint.h>

#if defined(_WIN32)
#  if defined(APPROXMUL_BUILDING)
#    define APPROXMUL_API __declspec(dllexport)
#  else
#    define APPROXMUL_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define APPROXMUL_API __attribute__((visibility("default")))
#else
#  define APPROXMUL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a declaration below changes incompatibly. */
#define APPROXMUL_ABI_VERSION 1

/* ---------------------------------------------------------------- status */

typedef enum approxmul_status {
    APPROXMUL_OK = 0,
    APPROXMUL_ERR_INVALID_ARGUMENT = 1, /* a value that makes no sense */
    APPROXMUL_ERR_NULL_POINTER = 2,     /* a required pointer was NULL */
    APPROXMUL_ERR_DTYPE = 3,            /* element type not accepted here */
    APPROXMUL_ERR_SHAPE = 4,            /* sizes that do not match or are negative */
    APPROXMUL_ERR_OVERFLOW = 5,         /* a size or an accumulator would overflow */
    APPROXMUL_ERR_OUT_OF_RANGE = 6,     /* an operand value outside the multiplier's width */
    APPROXMUL_ERR_ALIASING = 7,         /* an output overlaps an input or itself */
    APPROXMUL_ERR_OUT_OF_MEMORY = 8,
    APPROXMUL_ERR_UNSUPPORTED = 9,      /* valid request this build or CPU cannot serve */
    APPROXMUL_ERR_IO = 10,              /* a file could not be read or written */
    APPROXMUL_ERR_FORMAT = 11,          /* file or text content is malformed */
    APPROXMUL_ERR_CALLBACK = 12,        /* a user function failed */
    APPROXMUL_ERR_INTERNAL = 99         /* a bug in approxmul: please report it */
} approxmul_status;

/* A static, human-readable name for a status ("invalid argument", ...). */
APPROXMUL_API const char *approxmul_status_string(approxmul_status status);

/* The detail message of this thread's last call that returned a status:
 * "" after a success. Valid until the next approxmul call on this thread. */
APPROXMUL_API const char *approxmul_last_error(void);

/* --------------------------------------------------------------- version */

APPROXMUL_API const char *approxmul_version_string(void);
APPROXMUL_API int approxmul_abi_version(void);

/* --------------------------------------------------------------- threads */

/* Threads used by approxmul's own parallel regions; 0 means one per
 * available core. This never changes the caller's OpenMP settings. */
APPROXMUL_API approxmul_status approxmul_set_num_threads(int num_threads);
APPROXMUL_API int approxmul_get_num_threads(void);

/* ------------------------------------------------------------------ info */

/* A static description of the build and of the kernels chosen for this CPU,
 * as "key=value" lines (isa=..., openmp=..., ...). */
APPROXMUL_API const char *approxmul_build_info(void);

/* --------------------------------------------------------- element types */

typedef enum approxmul_dtype {
    APPROXMUL_INT8 = 1,
    APPROXMUL_UINT8 = 2,
    APPROXMUL_INT16 = 3,
    APPROXMUL_UINT16 = 4,
    APPROXMUL_INT32 = 5,
    APPROXMUL_INT64 = 6
} approxmul_dtype;

/* ----------------------------------------------------------- multipliers */

/* An n x n bit multiplier: maps two n-bit operands (unsigned, or two's
 * complement when signed) to an integer product. Immutable. */
typedef struct approxmul_multiplier approxmul_multiplier;

/* A multiplier from its full product table: 2^bits x 2^bits int32 entries,
 * row-major, row = first operand's raw bit pattern, column = second's
 * (for signed 8-bit operands the pattern of -1 is 255). bits in 1..8;
 * table_len must equal 4^bits. The table is copied. */
APPROXMUL_API approxmul_status approxmul_multiplier_from_table(
    const int32_t *table, int64_t table_len, int bits, int is_signed,
    approxmul_multiplier **out);

/* The exact multiplier, bits in 1..16. */
APPROXMUL_API approxmul_status approxmul_multiplier_exact(
    int bits, int is_signed, approxmul_multiplier **out);

APPROXMUL_API void approxmul_multiplier_destroy(approxmul_multiplier *m);

APPROXMUL_API approxmul_status approxmul_multiplier_bits(
    const approxmul_multiplier *m, int *out);
APPROXMUL_API approxmul_status approxmul_multiplier_is_signed(
    const approxmul_multiplier *m, int *out);

/* A static-lifetime name of the multiplier's model ("table", "exact", ...). */
APPROXMUL_API approxmul_status approxmul_multiplier_name(
    const approxmul_multiplier *m, const char **out);

/* How the kernels compute this multiplier, e.g. "exact-gemm" or "table";
 * owned by the handle. */
APPROXMUL_API approxmul_status approxmul_multiplier_plan(
    const approxmul_multiplier *m, const char **out);

/* The product table (4^bits int32 entries, layout as in _from_table);
 * only for bits <= 8, else APPROXMUL_ERR_UNSUPPORTED. */
APPROXMUL_API approxmul_status approxmul_multiplier_table(
    const approxmul_multiplier *m, int32_t *out, int64_t out_len);

/* One product, operands given as values (-2^(bits-1)..2^(bits-1)-1 when
 * signed, 0..2^bits-1 when not). */
APPROXMUL_API approxmul_status approxmul_multiplier_product(
    const approxmul_multiplier *m, int64_t a, int64_t b, int64_t *out);

/* Smallest and largest product over all operand pairs. */
APPROXMUL_API approxmul_status approxmul_multiplier_product_range(
    const approxmul_multiplier *m, int64_t *min_out, int64_t *max_out);

/* --------------------------------------------------------------- kernels */

/* The accumulator (and output) type a matmul with this inner size and these
 * zero points needs: APPROXMUL_INT32 when no output can leave int32, else
 * APPROXMUL_INT64; APPROXMUL_ERR_OVERFLOW if even int64 cannot hold it. */
APPROXMUL_API approxmul_status approxmul_accumulator_dtype(
    const approxmul_multiplier *m, int64_t inner, int64_t a_zero_point,
    int64_t b_zero_point, approxmul_dtype *out);

/* C[i,j] = sum_k mul(A[i,k], B[k,j]) - b_zero * sum_k A[i,k]
 *          - a_zero * sum_k B[k,j] + k * a_zero * b_zero
 * Only the code-by-code product goes through the multiplier; the zero-point
 * cross terms are exact (zero points 0 give the plain approximate matmul).
 * Operands: int8/uint8 (or int16/uint16) as the multiplier's signedness
 * says, values within its width. C is int32 or int64; int32 only when
 * approxmul_accumulator_dtype allows it. C must not overlap A or B. */
APPROXMUL_API approxmul_status approxmul_matmul(
    const approxmul_multiplier *m, int64_t rows, int64_t cols, int64_t inner,
    approxmul_dtype a_dtype, const void *a, int64_t a_row_stride, int64_t a_col_stride,
    approxmul_dtype b_dtype, const void *b, int64_t b_row_stride, int64_t b_col_stride,
    int64_t a_zero_point, int64_t b_zero_point,
    approxmul_dtype c_dtype, void *c, int64_t c_row_stride, int64_t c_col_stride);

/* Batched matmul (attention-style): for t < batch,
 * C[t] = approxmul_matmul(A[t], B[t]) with the same zero points and output
 * rule. Each operand is pointer + batch stride + row stride + column
 * stride, in elements; a zero batch stride shares one input matrix across
 * the batch. C must not overlap A or B or itself. */
APPROXMUL_API approxmul_status approxmul_bmm(
    const approxmul_multiplier *m, int64_t batch, int64_t rows, int64_t cols, int64_t inner,
    approxmul_dtype a_dtype, const void *a, int64_t a_batch_stride, int64_t a_row_stride, int64_t a_col_stride,
    approxmul_dtype b_dtype, const void *b, int64_t b_batch_stride, int64_t b_row_stride, int64_t b_col_stride,
    int64_t a_zero_point, int64_t b_zero_point,
    approxmul_dtype c_dtype, void *c, int64_t c_batch_stride, int64_t c_row_stride, int64_t c_col_stride);

/* 2-D convolution (cross-correlation, as in PyTorch) with every product
 * code-by-code through the multiplier, activation first:
 *   out[n,o,y,x] = sum_{c,i,j} mul(X, W[o,c,i,j]) - w_zero * sum X
 *                  - x_zero * sum W + K * x_zero * w_zero,
 * X = x[n, g*C/groups + c, y*stride[0] - padding[0] + i*dilation[0],
 *       x*stride[1] - padding[1] + j*dilation[1]], g = o / (O/groups),
 * K = C/groups*KH*KW. Taps outside the image hold the code x_zero_point
 * and pass through the multiplier like any other (docs/semantics.md).
 * Shapes and strides (elements) are 4 entries each: x N,C,H,W; w
 * O,C/groups,KH,KW; out N,O,OH,OW with OH = (H + 2 padding[0] -
 * dilation[0] (KH - 1) - 1) / stride[0] + 1 (likewise OW), which must be
 * >= 1. stride, padding, dilation: 2 entries (height, width). The output
 * type follows approxmul_accumulator_dtype(m, K, x_zero_point, w_zero_point). */
APPROXMUL_API approxmul_status approxmul_conv2d(
    const approxmul_multiplier *m,
    approxmul_dtype x_dtype, const void *x, const int64_t *x_shape, const int64_t *x_strides,
    approxmul_dtype w_dtype, const void *w, const int64_t *w_shape, const int64_t *w_strides,
    const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups,
    int64_t x_zero_point, int64_t w_zero_point,
    approxmul_dtype out_dtype, void *out, const int64_t *out_shape, const int64_t *out_strides);

/* C[i,j] = mul(A[i,j], B[i,j]) over a rows x cols grid; C int32 or int64. */
APPROXMUL_API approxmul_status approxmul_multiply(
    const approxmul_multiplier *m, int64_t rows, int64_t cols,
    approxmul_dtype a_dtype, const void *a, int64_t a_row_stride, int64_t a_col_stride,
    approxmul_dtype b_dtype, const void *b, int64_t b_row_stride, int64_t b_col_stride,
    approxmul_dtype c_dtype, void *c, int64_t c_row_stride, int64_t c_col_stride);

/* --------------------------------------------------- quantized inference */

/* How a requantization rounds (docs/quantization.md has the arithmetic). */
typedef enum approxmul_rounding {
    APPROXMUL_ROUND_DOUBLE = 1, /* gemmlowp: rounding doubling high multiply, then
                                   rounding divide by a power of two (TFLite default) */
    APPROXMUL_ROUND_SINGLE = 2  /* one rounding: (x*m + 2^(30-shift)) >> (31-shift) */
} approxmul_rounding;

/* Accumulators to output codes, as integer inference hardware does:
 *   out[o,c,i] = clamp(zero_point + round(sat32(acc[o,c,i] + bias[c])
 *                      * mantissa[c] * 2^(shift[c] - 31)), qmin, qmax)
 * acc is int32 or int64 and out int8 or uint8, both contiguous
 * [outer, channels, inner] (NCHW: outer = N, inner = H*W; a linear layer:
 * inner = 1). bias may be NULL (zero); mantissa in 0..2^31-1; shift in
 * -31..30; qmin <= qmax within out's type. */
APPROXMUL_API approxmul_status approxmul_requantize(
    int64_t outer, int64_t channels, int64_t inner,
    approxmul_dtype acc_dtype, const void *acc,
    const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype out_dtype, void *out);

#ifdef __cplusplus
}
#endif

#endif /* APPROXMUL_H */
