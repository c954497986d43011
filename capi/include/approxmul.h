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
    APPROXMUL_ERR_CANCELLED = 13,       /* stopped by approxmul_cancel(); outputs unspecified */
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
 * available core. This never changes the caller's OpenMP settings. More
 * than APPROXMUL_MAX_THREADS is refused (APPROXMUL_ERR_INVALID_ARGUMENT), and
 * a larger OMP_NUM_THREADS is capped to it. */
#define APPROXMUL_MAX_THREADS 1024
APPROXMUL_API approxmul_status approxmul_set_num_threads(int num_threads);
APPROXMUL_API int approxmul_get_num_threads(void);
/* The value last passed to approxmul_set_num_threads (0 if none), where
 * approxmul_get_num_threads gives the count it means: a caller that changes
 * the count for a while restores this one exactly. */
APPROXMUL_API int approxmul_get_num_threads_setting(void);

/* Ends the OpenMP team of approxmul's calls on the calling thread now: its
 * idle threads exit instead of waiting for the next parallel region (the
 * runtime spins first, then sleeps), so they take no CPU from what runs
 * next on another runtime's threads (NumPy's BLAS). The next parallel call
 * creates them again. The team belongs to the OpenMP runtime: a library
 * using the same runtime on this thread (a PyTorch linking the same
 * libgomp) loses it too and must start it again, so do not call this
 * between such a library's calls and approxmul's. (LLVM's libomp keeps
 * its threads but puts them to sleep.) Nothing to end
 * is no error; APPROXMUL_ERR_UNSUPPORTED inside a parallel region or where
 * the OpenMP runtime cannot pause (no OpenMP: nothing to do, APPROXMUL_OK). */
APPROXMUL_API approxmul_status approxmul_release_threads(void);

/* ---------------------------------------------------------- cancellation */

/* Asks every approxmul call in progress in this process to stop. Long
 * loops (metrics, error maps, the kernels' and requantization's outer
 * loops) poll for it, so such a call returns APPROXMUL_ERR_CANCELLED soon
 * after; its outputs are then unspecified (the one exception to "nothing
 * written on error"). Calls that start after this returns are unaffected;
 * calls that finish without reaching a poll succeed. Lock-free and
 * async-signal safe: callable from any thread or a signal handler. A
 * vendor C model stuck inside one call is not interrupted. */
APPROXMUL_API void approxmul_cancel(void);

/* ------------------------------------------------------------------ info */

/* A static description of the build and of the kernels chosen for this CPU,
 * as "key=value" lines (isa=..., openmp=..., openmp_runtime=<the file of the
 * OpenMP runtime in use>, ...). */
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
 * (for signed 8-bit operands the pattern of -1 is 255). bits in 1..12;
 * table_len must equal 4^bits. The table is copied. Up to 8 bits the
 * table kernels run it; 9-12-bit tables run on the generic kernel unless
 * an exact structure is found (plan "exact-gemm" or "factorized-gemm"). */
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

/* The product table (4^bits int32 entries, layout as in _from_table),
 * tabulated from the model when it has none; bits <= 12, else
 * APPROXMUL_ERR_UNSUPPORTED. A product outside int32 is
 * APPROXMUL_ERR_OVERFLOW; out is untouched on any error. */
APPROXMUL_API approxmul_status approxmul_multiplier_table(
    const approxmul_multiplier *m, int32_t *out, int64_t out_len);

/* One product, operands given as values (-2^(bits-1)..2^(bits-1)-1 when
 * signed, 0..2^bits-1 when not). */
APPROXMUL_API approxmul_status approxmul_multiplier_product(
    const approxmul_multiplier *m, int64_t a, int64_t b, int64_t *out);

/* Smallest and largest product over all operand pairs. */
APPROXMUL_API approxmul_status approxmul_multiplier_product_range(
    const approxmul_multiplier *m, int64_t *min_out, int64_t *max_out);

/* ------------------------------------------------ multiplier library
 * Built-in families, spec strings, table files, vendor C models and error
 * metrics (docs/multipliers.md, docs/metrics.md). */

/* A multiplier from a spec string "family[:key=value,...]", for example
 * "drum:k=4", "truncated:bits=8,cut=6,correct=1", "exact:bits=16,signed=1".
 * Omitted parameters take their defaults (bits=8, signed=0). Errors name
 * the valid families or the family's parameters. */
APPROXMUL_API approxmul_status approxmul_multiplier_from_spec(
    const char *spec, approxmul_multiplier **out);

/* The canonical spec that recreates m (every parameter spelled out), or ""
 * for a multiplier not made from a spec (tables, C functions); owned by
 * the handle. */
APPROXMUL_API approxmul_status approxmul_multiplier_spec(
    const approxmul_multiplier *m, const char **out);

/* The built-in families, index 0 .. approxmul_family_count() - 1. Static
 * strings: name ("drum"), parameters ("bits=8 (2..16), signed=0 (0..1),
 * k=4 (2..bits)"), and a one-line description with the paper it follows. */
APPROXMUL_API int approxmul_family_count(void);
APPROXMUL_API approxmul_status approxmul_family_info(
    int index, const char **name, const char **parameters, const char **description);

/* Table file contents. */
typedef enum approxmul_table_format {
    APPROXMUL_TABLE_BINARY_U16LE = 1, /* 4^bits little-endian 16-bit entries, no header (TFApprox) */
    APPROXMUL_TABLE_C_SOURCE = 2,     /* "int16_t lut[256][256] = {...};" (AdaPT), int32_t too */
    APPROXMUL_TABLE_TEXT = 3          /* 2^bits lines of 2^bits integers, comma or space separated */
} approxmul_table_format;

/* Which operand value row (and column) i of a table file holds. */
typedef enum approxmul_table_order {
    APPROXMUL_ORDER_RAW = 1,        /* the operand's raw bit pattern i (unsigned: value i) */
    APPROXMUL_ORDER_TWOS = 2,       /* signed only: values 0..2^(n-1)-1 then -2^(n-1)..-1
                                       (the same layout as RAW for signed operands) */
    APPROXMUL_ORDER_OFFSET = 3      /* signed only: value i - 2^(n-1) */
} approxmul_table_order;

/* Parses a table file's bytes into a raw-pattern table (as _from_table
 * takes). bits 1..12, or 0 to infer it from the entry count. Binary entries
 * are read as uint16, or as int16 when is_signed. Values must fit the
 * product range of the width (unsigned: 0..4^bits-1; signed: a 2*bits-bit
 * two's complement value) and, for C source, the declared element type.
 * out_len must be at least 4^bits; *bits_out receives the width. */
APPROXMUL_API approxmul_status approxmul_table_parse(
    const void *data, int64_t size, approxmul_table_format format,
    int bits, int is_signed, approxmul_table_order order,
    int32_t *out, int64_t out_len, int *bits_out);

/* Prototypes of vendor C models; the name says the operand order. */
typedef enum approxmul_signature {
    APPROXMUL_SIG_U16_U8_U8 = 1,       /* uint16_t f(uint8_t a, uint8_t b) */
    APPROXMUL_SIG_I16_I8_I8 = 2,       /* int16_t f(int8_t a, int8_t b) */
    APPROXMUL_SIG_U64_U64B_U64A = 3,   /* uint64_t f(uint64_t b, uint64_t a): second operand first */
    APPROXMUL_SIG_U64_U64_U64 = 4,     /* uint64_t f(uint64_t a, uint64_t b) */
    APPROXMUL_SIG_U32_U16_U16 = 5,     /* uint32_t f(uint16_t a, uint16_t b) */
    APPROXMUL_SIG_I32_I16_I16 = 6      /* int32_t f(int16_t a, int16_t b) */
} approxmul_signature;

/* Any C function, cast to this type and back to its real prototype (ISO C
 * allows function pointer casts; dlsym's void * converts on POSIX). */
typedef void (*approxmul_function)(void);

/* A multiplier that calls a C function of the given signature. bits: the
 * operand width, at most the parameter type's width (8 or 16; 64-bit
 * parameters take at most 16). is_signed: two's-complement operands; with
 * an unsigned signature the operands are passed as n-bit patterns and the
 * result is read as a 2n-bit two's complement value (signed circuits
 * declared with unsigned types). Widths <= 8 are tabulated at once and the
 * function is not called again; wider ones call the function from the
 * kernels, so it must stay loaded and thread safe while the handle lives.
 * Results outside the 2n-bit product range are an error. name is copied. */
APPROXMUL_API approxmul_status approxmul_multiplier_from_c_function(
    approxmul_function function, approxmul_signature signature, int bits, int is_signed,
    const char *name, approxmul_multiplier **out);

/* A user function for _from_callback: writes the product of operand values
 * a and b to *product and returns 0, or returns non-zero on failure. */
typedef int (*approxmul_product_callback)(void *user_data, int64_t a, int64_t b,
                                          int64_t *product);

/* A multiplier tabulated from a callback, bits 1..8: called once per
 * operand pair on the calling thread, never after this returns. A non-zero
 * return stops it with APPROXMUL_ERR_CALLBACK. */
APPROXMUL_API approxmul_status approxmul_multiplier_from_callback(
    approxmul_product_callback callback, void *user_data, int bits, int is_signed,
    approxmul_multiplier **out);

/* Error metrics over every operand pair, error e = approx - exact
 * (docs/metrics.md). Percentages are 0..100; mae_percent and wce_percent
 * are normalised by 4^bits; relative metrics skip pairs whose exact
 * product is 0 (counted in zero_product_pairs). */
typedef struct approxmul_metrics {
    double mae;            /* mean |e| */
    double mae_percent;    /* 100 * mae / 4^bits */
    double mse;            /* mean e^2 */
    double wce;            /* max |e| */
    double wce_percent;    /* 100 * wce / 4^bits */
    double wcre_percent;   /* 100 * max |e| / |exact|, exact != 0 */
    double mre_percent;    /* 100 * mean |e| / |exact|, exact != 0 */
    double ep_percent;     /* 100 * share of pairs with e != 0 */
    double bias;           /* mean e */
    double error_std;      /* population standard deviation of e */
    int64_t min_error;
    int64_t max_error;
    int64_t pairs;
    int64_t zero_product_pairs;
} approxmul_metrics;

APPROXMUL_API approxmul_status approxmul_multiplier_metrics(
    const approxmul_multiplier *m, approxmul_metrics *out);

/* The 2^bits x 2^bits errors approx - exact, row-major by raw bit pattern
 * like the table; bits <= 12. */
APPROXMUL_API approxmul_status approxmul_multiplier_error_map(
    const approxmul_multiplier *m, int64_t *out, int64_t out_len);

/* ------------------------------------------------ gate-level netlists
 * Multipliers read from structural Verilog (docs/multipliers.md, "From a
 * Verilog netlist"): one module with two operand input vectors and one
 * output vector; wire declarations, continuous assign with ~ & | ^ ~^
 * (and the reductions ~& ~| ~^), ?:, bit and part selects, concatenation
 * and constants; the gate primitives and or nand nor xor xnor not buf; and,
 * given a cell map, standard-cell instances. Nothing in the text is
 * executed. Errors start with "line N:" where they concern a line: FORMAT
 * for malformed netlists (loops, undriven or doubly driven nets, unknown
 * names, width mismatches, truncated text, limits on size and nesting),
 * UNSUPPORTED for Verilog outside the subset (behavioural code, module
 * instances; Yosys can lower those), INVALID_ARGUMENT for ports that do
 * not match (the message lists the module's ports). */
typedef struct approxmul_netlist approxmul_netlist;

/* Parses and levelizes a netlist from size bytes of text. module: the
 * module to read, or NULL for the file's only module; a, b, out_port: the
 * operand and product ports, NULL for "A", "B", "O". cell_map (NULL for
 * none): cell_map_size bytes of lines "CELL PIN = expression" giving each
 * output pin of a library cell as a function of its input pins ('#' and
 * '//' comment). Operands are 1..16 bits, both the same width. */
APPROXMUL_API approxmul_status approxmul_netlist_parse(
    const void *text, int64_t size, const char *module, const char *a, const char *b,
    const char *out_port, const void *cell_map, int64_t cell_map_size,
    approxmul_netlist **out);

APPROXMUL_API void approxmul_netlist_destroy(approxmul_netlist *netlist);

/* The netlist's statistics as "key=value" lines, owned by the handle:
 * module, a, b, out (ports with ranges), bits, out_bits, gates (two-input
 * gates as evaluated), gates.<and|or|xor|nand|nor|xnor|not|mux>, depth
 * (gates on the longest path), assigns, primitives, cells.<CELL> (instance
 * counts) and meta.<NAME> for header comments "// NAME = value unit". */
APPROXMUL_API approxmul_status approxmul_netlist_info(
    const approxmul_netlist *netlist, const char **out);

/* The multiplier the netlist computes: the output vector read as unsigned,
 * or as two's complement when is_signed (operands are then n-bit two's
 * complement patterns). Simulated bit-parallel over every operand pair and
 * tabulated up to 12 bits (9..12 bits run with the function plan over that
 * table); wider netlists run with the function plan, simulated 64 products
 * of a row per pass over the gates. A product outside the
 * 2n-bit product range is APPROXMUL_ERR_OUT_OF_RANGE. The multiplier does
 * not need the netlist handle afterwards. */
APPROXMUL_API approxmul_status approxmul_multiplier_from_netlist(
    const approxmul_netlist *netlist, int is_signed, approxmul_multiplier **out);

/* A gate-level netlist (module ports A, B, O) of a built-in family given by
 * its spec: exact, truncated and bam (others: APPROXMUL_ERR_UNSUPPORTED).
 * Writes at most out_len bytes including the terminating NUL; *length_out
 * receives the full length including the NUL. out may be NULL (with
 * out_len 0) to ask for the length; a buffer too small is
 * APPROXMUL_ERR_SHAPE and writes nothing. */
APPROXMUL_API approxmul_status approxmul_family_verilog(
    const char *spec, char *out, int64_t out_len, int64_t *length_out);
/* ------------------------------------------------ multiplier gradients
 * Derivatives of a multiplier's product table for retraining through it
 * (docs/retraining.md). Entries are indexed by raw bit pattern like the
 * table; operand values run min..max (signed: -2^(bits-1)..2^(bits-1)-1).
 * bits <= 12. */

/* The operand a derivative is taken with respect to. */
typedef enum approxmul_operand {
    APPROXMUL_OPERAND_A = 0,   /* the first (row) operand: the activation */
    APPROXMUL_OPERAND_B = 1    /* the second (column) operand: the weight */
} approxmul_operand;

/* 2^bits x 2^bits smoothed central differences: for operand A,
 * out[a][b] = (M(hi, b) - M(lo, b)) / (hi - lo) with lo = max(a - h, min),
 * hi = min(a + h, max), h = half_window >= 1 (one-sided near the edges);
 * for operand B the same along b. out_len must be 4^bits. */
APPROXMUL_API approxmul_status approxmul_multiplier_gradient_table(
    const approxmul_multiplier *m, approxmul_operand operand, int half_window,
    double *out, int64_t out_len);

/* 2^bits least-squares slopes, one per value of the other operand: for
 * operand A, out[b] = sum_a (a - mean_a)(M(a, b) - mean_b) / sum_a (a - mean_a)^2
 * over every value a (the exact multiplier gives out[b] = b); for operand B
 * the same along b, indexed by a. out_len must be 2^bits. */
APPROXMUL_API approxmul_status approxmul_multiplier_gradient_slopes(
    const approxmul_multiplier *m, approxmul_operand operand, double *out, int64_t out_len);

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

/* The output approxmul_conv2d gives for these x and w shapes (4 entries
 * each), stride, padding, dilation (2 entries) and groups: its shape
 * N,O,OH,OW in out_shape[0..3] and, when m is not NULL, its type in
 * *out_dtype (approxmul_accumulator_dtype for K = C/groups*KH*KW and the
 * zero points). Runs the same checks as approxmul_conv2d, with the same
 * statuses and messages; with m NULL only the shape is computed (zero
 * points unchecked, out_dtype unused and may be NULL). */
APPROXMUL_API approxmul_status approxmul_conv2d_output_shape(
    const approxmul_multiplier *m, const int64_t *x_shape, const int64_t *w_shape,
    const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups,
    int64_t x_zero_point, int64_t w_zero_point, int64_t *out_shape, approxmul_dtype *out_dtype);

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
 * acc is int32 or int64 and out int8, uint8, int16 or uint16, both contiguous
 * [outer, channels, inner] (NCHW: outer = N, inner = H*W; a linear layer:
 * inner = 1). bias may be NULL (zero); mantissa in 0..2^31-1; shift in
 * -31..30; qmin <= qmax within out's type. */
APPROXMUL_API approxmul_status approxmul_requantize(
    int64_t outer, int64_t channels, int64_t inner,
    approxmul_dtype acc_dtype, const void *acc,
    const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype out_dtype, void *out);

/* Real element types of the affine quantization below (kept apart from
 * approxmul_dtype, whose values are the kernels' integer operand types). */
typedef enum approxmul_real_type {
    APPROXMUL_FLOAT32 = 1,
    APPROXMUL_FLOAT64 = 2
} approxmul_real_type;

/* Real values to integer codes (affine quantization), computed in double:
 *   v = (double)x[o,c,i] / scale[c]
 *   out[o,c,i] = clamp(sign(v) * floor(|v| + 0.5) + zero_point[c], qmin, qmax)
 * (round half away from zero, then clamp; +-infinity clamps to qmin/qmax).
 * x is float32 or float64, out int8, uint8, int16 or uint16, both contiguous
 * [outer, channels, inner] (per tensor: channels = 1; per channel along an
 * axis: outer and inner are the products of the sizes before and after
 * it). scale[c] finite and > 0; zero_point[c] in -2^24..2^24; qmin <= qmax
 * within out's type. A NaN in x is APPROXMUL_ERR_INVALID_ARGUMENT (the
 * message names its index) and nothing is written. out must not overlap x. */
APPROXMUL_API approxmul_status approxmul_quantize(
    int64_t outer, int64_t channels, int64_t inner,
    approxmul_real_type x_type, const void *x,
    const double *scale, const int32_t *zero_point, int32_t qmin, int32_t qmax,
    approxmul_dtype out_dtype, void *out);

/* approxmul_quantize for values that must be finite: +-infinity is refused
 * like NaN (APPROXMUL_ERR_INVALID_ARGUMENT, the message names its index) in
 * the same read-only pass, where approxmul_quantize would clamp it; nothing
 * is written then. For a framework's activations, where an infinity is a
 * fault to report rather than a value to saturate. */
APPROXMUL_API approxmul_status approxmul_quantize_finite(
    int64_t outer, int64_t channels, int64_t inner,
    approxmul_real_type x_type, const void *x,
    const double *scale, const int32_t *zero_point, int32_t qmin, int32_t qmax,
    approxmul_dtype out_dtype, void *out);

/* Integer codes to real values: out[o,c,i] = scale[c] * (codes[o,c,i] -
 * zero_point[c]), computed in double and rounded once to float32 when out
 * is float32. codes are int8, uint8, int16, uint16 or int32, out float32 or
 * float64, both contiguous [outer, channels, inner] as for
 * approxmul_quantize; scale[c] finite and > 0. out must not overlap codes. */
APPROXMUL_API approxmul_status approxmul_dequantize(
    int64_t outer, int64_t channels, int64_t inner,
    approxmul_dtype codes_dtype, const void *codes,
    const double *scale, const int32_t *zero_point,
    approxmul_real_type out_type, void *out);

/* approxmul_requantize into codes of code_dtype, then approxmul_dequantize
 * of those codes with one scale (out_scale) and zero_point, in one pass and
 * without the codes array, for adapters that hand real values back to a
 * float framework: out[o,c,i] = out_scale * (code[o,c,i] - zero_point), in
 * double, rounded once to float32 when out is float32. The same bits as the
 * two calls; the arguments are checked as theirs are (code_dtype takes
 * approxmul_requantize's out_dtype checks; out_scale finite and > 0), and
 * out must not overlap acc. */
APPROXMUL_API approxmul_status approxmul_requantize_dequantize(
    int64_t outer, int64_t channels, int64_t inner,
    approxmul_dtype acc_dtype, const void *acc,
    const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype code_dtype, double out_scale, approxmul_real_type out_type, void *out);

/* approxmul_conv2d, then approxmul_requantize of its accumulators (outer
 * N, channels O, inner OH*OW): the layer's output codes in one pass, block
 * by block, without the accumulator tensor. The convolution's arguments
 * are approxmul_conv2d's, the requantization's approxmul_requantize's
 * (bias, mantissa, shift per output channel; the accumulators take the
 * type approxmul_accumulator_dtype gives). out: contiguous N,O,OH,OW of
 * out_dtype, out_shape its 4 sizes, which must be the convolution's. The
 * same bits as the two calls; every argument is checked before anything
 * is written, and out must not overlap x or w. */
APPROXMUL_API approxmul_status approxmul_conv2d_requantize(
    const approxmul_multiplier *m,
    approxmul_dtype x_dtype, const void *x, const int64_t *x_shape, const int64_t *x_strides,
    approxmul_dtype w_dtype, const void *w, const int64_t *w_shape, const int64_t *w_strides,
    const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups,
    int64_t x_zero_point, int64_t w_zero_point,
    const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype out_dtype, void *out, const int64_t *out_shape);

/* approxmul_conv2d_requantize, then approxmul_dequantize of the codes
 * with out_scale and zero_point (approxmul_requantize_dequantize's
 * arithmetic): the layer's real outputs, float32 or float64, contiguous
 * N,O,OH,OW, for adapters that hand them back to a float framework. */
APPROXMUL_API approxmul_status approxmul_conv2d_requantize_dequantize(
    const approxmul_multiplier *m,
    approxmul_dtype x_dtype, const void *x, const int64_t *x_shape, const int64_t *x_strides,
    approxmul_dtype w_dtype, const void *w, const int64_t *w_shape, const int64_t *w_strides,
    const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups,
    int64_t x_zero_point, int64_t w_zero_point,
    const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype code_dtype, double out_scale, approxmul_real_type out_type, void *out,
    const int64_t *out_shape);

/* A float framework's quantized conv2d layer from its real input to its
 * real output in one call: x (float32 or float64, x_type) to codes of
 * x_dtype as approxmul_quantize_finite computes them with one scale
 * (x_scale), the zero point x_zero_point and the range x_qmin..x_qmax
 * (within the multiplier's operands), then
 * approxmul_conv2d_requantize_dequantize of those codes, whose other
 * arguments these are. x_shape and x_strides are approxmul_conv2d's, and x
 * must be dense in some axis order (contiguous, channels-last, ...). The
 * codes live in the library's scratch memory, checked and quantized in one
 * pass: NaN or an infinity in x is APPROXMUL_ERR_INVALID_ARGUMENT (the
 * message names its index in memory order), and out is not written. The
 * same bits as the two calls, without their second pass over x. */
APPROXMUL_API approxmul_status approxmul_conv2d_real(
    const approxmul_multiplier *m,
    approxmul_real_type x_type, const void *x, const int64_t *x_shape, const int64_t *x_strides,
    double x_scale, int32_t x_qmin, int32_t x_qmax, approxmul_dtype x_dtype,
    approxmul_dtype w_dtype, const void *w, const int64_t *w_shape, const int64_t *w_strides,
    const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups,
    int64_t x_zero_point, int64_t w_zero_point,
    const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype code_dtype, double out_scale, approxmul_real_type out_type, void *out,
    const int64_t *out_shape);

#ifdef __cplusplus
}
#endif

#endif /* APPROXMUL_H */
