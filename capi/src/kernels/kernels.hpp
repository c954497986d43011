// The kernel dispatch point. capi.cpp validates arguments and calls these
// entry points; they pick an implementation from the multiplier's plan and
// the CPU's instruction sets. Inputs reaching them are fully validated.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/multiplier.hpp"
#include "../core/operands.hpp"

namespace approxmul::kernels {

// A packed form of a matmul operand that a caller keeps across calls with
// the same operand (conv2d's weights, multiplied by one pixel block after
// another): a driver stores what it packed under a key of the data and of
// the packing, and reuses it while the key matches.
struct PackCache {
    std::vector<int64_t> key;
    std::vector<int16_t> int16;
};

struct MatmulProblem {
    const Multiplier *multiplier;
    int64_t rows, cols, inner;
    MatrixView a, b, c;  // a: rows x inner, b: inner x cols, c: rows x cols
    int64_t a_zero_point, b_zero_point;
    int threads = 0;  // 0: approxmul's thread setting; callers that parallelise outside say 1
    // B's data and values are the same in every call given this cache
    PackCache *b_pack_cache = nullptr;
    // The operand sums the zero-point cross terms take (sum_k a[i, k] per
    // row, sum_k b[k, j] per column), when the caller has them: conv2d's
    // weights, summed once per call, or operands that stand for other codes
    // (mapped through a factor table) whose own sums are not the terms'.
    const int64_t *a_row_sums = nullptr, *b_col_sums = nullptr;
    // A's columns read in place (conv2d's taps, straight from a padded
    // image): column k starts a_col_offsets[k] elements past a.data, rows
    // contiguous; a.col_stride is not used. Only matmul_in_place takes it.
    const int64_t *a_col_offsets = nullptr;
    // Nonzero: C (int64) = c_scale * C + the product, C's old values kept
    // (split_gemm's byte GEMMs fold their parts as they come). Only u8_gemm
    // takes it.
    int64_t c_scale = 0;
};

void matmul(const MatmulProblem &problem);
// matmul of a problem with a_col_offsets, where a kernel reads them (the
// byte GEMM, A flipped into its packed B); false, having done nothing, where
// none does: the caller then copies the columns out and calls matmul.
bool matmul_in_place(const MatmulProblem &problem);

// c[t] = matmul(a[t], b[t]) for t < batch; the views in `matrices` are those
// of t = 0, the batch strides (elements) step to the others.
struct BmmProblem {
    MatmulProblem matrices;
    int64_t batch;
    int64_t a_batch_stride, b_batch_stride, c_batch_stride;
};
void bmm(const BmmProblem &problem);

// conv2d's output stage (approxmul_conv2d_requantize[_dequantize]): each
// block's sums go through the kernel set's requantize with their output
// channel's parameters (and dequantize, with real_bytes) on their way to
// out, so the accumulator tensor never exists whole. Parameters validated
// by the caller (quant::check_parameters).
struct Conv2dOutputStage {
    const int32_t *bias;  // per output channel, or nullptr (zeros)
    const int32_t *mantissa, *shift;  // per output channel
    int32_t zero_point, qmin, qmax;
    int single;                   // TFLite's single rounding, else gemmlowp's double
    approxmul_dtype code_dtype;   // int8, uint8, int16 or uint16
    int real_bytes;               // 0: out holds codes; 4 or 8: float32 or float64 values
    double scale;                 // of the real values: scale * (code - zero_point)
    void *out;                    // contiguous N O OH OW
};

// out[n, o, y, x] = sum over c, i, j of mul(x[n, g*C/groups + c, y*stride0 -
// padding0 + i*dilation0, ...], w[o, c, i, j]) with zero-point cross terms,
// g = o / (O / groups); taps outside the image hold x_zero_point. With a
// stage, out describes the accumulators (their type, N O OH OW, contiguous
// strides) and stage->out receives what the stage makes of them.
struct Conv2dProblem {
    const Multiplier *multiplier;
    TensorView x, w, out;  // N C H W, O C/groups KH KW, N O OH OW
    int64_t stride[2], padding[2], dilation[2], groups;
    int64_t x_zero_point, w_zero_point;
    const Conv2dOutputStage *stage = nullptr;
};
using Shape4 = std::array<int64_t, 4>;
// The checks of a conv2d that need neither data nor output: x and w
// shapes, stride, padding, dilation, groups, sizes and (with a multiplier)
// zero points. Returns the output shape (N, O, OH, OW) they give. Throws
// Error.
Shape4 checked_output_shape(const Conv2dProblem &problem);
// Every check conv2d relies on: checked_output_shape's, out's shape and
// type, the operands' types and values, no overlap. Throws Error; call
// before conv2d.
void check(const Conv2dProblem &problem);
void conv2d(const Conv2dProblem &problem);

// c[i, j] = mul(a[i, j], b[i, j])
void multiply(const Multiplier &m, const MatrixView &a, const MatrixView &b,
              const MatrixView &c);

// Name of the instruction set the kernels were chosen for ("generic", ...).
const char *active_isa();

// The longest factorization the plan of a `bits`-bit multiplier runs as
// exact GEMMs on this process's instruction set: up to 8 bits it competes
// with the table kernel, whose speed next to an int16 GEMM differs by
// instruction set; wider models have no table kernel, so any short sum wins.
int max_factorized_rank(int bits);

// The same for factorizations whose factors fit the byte GEMM: longer
// (kMaxByteFactorizedRank) where it runs on AMX tiles, else
// max_factorized_rank. APPROXMUL_MAX_FACTORIZED_RANK forces both.
int max_byte_factorized_rank(int bits);

// The same for a factorization of no known form (find_factorization's
// general search), whose factors run as int16 GEMMs:
// min(max_factorized_rank, kMaxLatticeRank) up to 8 bits, unless
// APPROXMUL_MAX_FACTORIZED_RANK forces both.
int max_lattice_rank(int bits);

// The byte GEMM's factors of a model of up to 8 bits with int16 factors f,
// for both orientations (Multiplier::u8_factors); not found where a term's
// factors cannot be moved into bytes.
std::array<U8Factors, 2> fit_u8_factors(const Int16Factors &f, int bits);

// Whether 5..8-bit tables whose error lives in the low nibbles take the
// exact-plus-table plan: this process's instruction set has a nibble table
// kernel, and APPROXMUL_NIBBLE_ERRORS is not 0 (tests and benchmarks reach
// the byte-table plan with it on every machine).
bool plans_nibble_errors();

// The factorization rank from which such a model takes the exact-plus-table
// plan too, where plans_nibble_errors(): the kernel set's measured crossover
// between rank int16 GEMMs (byte_factors: rank byte GEMMs) and the exact
// GEMM plus a nibble-table GEMM.
int nibble_error_min_rank(bool byte_factors);

// "key=value" lines: the instruction set, CPU features, and the kernel
// each plan runs on (for approxmul_build_info).
std::string dispatch_info();

}  // namespace approxmul::kernels
