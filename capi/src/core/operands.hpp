// Validation shared by every kernel entry point: element types, strided
// extents computed without overflow, aliasing between outputs and inputs,
// and operand values outside the multiplier's width. Everything here runs
// before a kernel writes its first output element.
#pragma once

#include <cstdint>

#include "approxmul.h"
#include "multiplier.hpp"

namespace approxmul {

size_t dtype_size(approxmul_dtype dtype);  // 0 for an unknown value
const char *dtype_name(approxmul_dtype dtype);

// A strided 2-D view as the C ABI passes it.
struct MatrixView {
    const char *name;
    approxmul_dtype dtype;
    const void *data;
    int64_t rows, cols;
    int64_t row_stride, col_stride;  // in elements

    // Byte range [lo, hi) the view touches; empty (lo == hi) for no elements.
    void byte_range(intptr_t &lo, intptr_t &hi) const;
};

int64_t checked_mul(int64_t a, int64_t b, const char *what);
int64_t checked_add(int64_t a, int64_t b, const char *what);

// Elements of an (outer, channels, inner) per-channel layout, as the
// quantization calls take them: sizes not negative, and the count of 8-byte
// elements (the widest they read or write) addressable.
int64_t checked_layout_count(int64_t outer, int64_t channels, int64_t inner);

void check_sizes(int64_t rows, int64_t cols, int64_t inner);

// qmin..qmax is a non-empty range of values the integer code type `dtype`
// (int8, uint8, int16 or uint16) holds.
void check_code_range(int64_t qmin, int64_t qmax, approxmul_dtype dtype);

// The operand's dtype suits the multiplier and (when stored wider than the
// multiplier's width) every value lies within it.
void check_operand(const MatrixView &view, const Multiplier &m);
void check_zero_point(int64_t zero_point, const char *name, const Multiplier &m);

// An int32/int64 output that overlaps neither itself nor any input.
void check_output(const MatrixView &out, const MatrixView &a, const MatrixView &b);

// A bound on |sum| of inner (zero-point adjusted) products; Error where it
// does not fit int64.
int64_t accumulator_bound(const Multiplier &m, int64_t inner, int64_t a_zero_point,
                          int64_t b_zero_point);
// The accumulator type for inner-size sums of (zero-point adjusted) products.
approxmul_dtype accumulator_dtype(const Multiplier &m, int64_t inner, int64_t a_zero_point,
                                  int64_t b_zero_point);
// The output `name` of that type can hold every sum (int32 only where
// accumulator_dtype allows it).
void check_output_type(const char *name, approxmul_dtype dtype, const Multiplier &m,
                       int64_t inner, int64_t a_zero_point, int64_t b_zero_point);

// A strided tensor of up to 4 dimensions (batched matrices, NCHW images).
constexpr int kMaxTensorDims = 4;

struct TensorView {
    const char *name;
    approxmul_dtype dtype;
    const void *data;
    int ndim;  // 1..kMaxTensorDims
    int64_t shape[kMaxTensorDims];
    int64_t strides[kMaxTensorDims];  // in elements

    int64_t size() const;  // element count (overflow-checked)
    void byte_range(intptr_t &lo, intptr_t &hi) const;
};

// Shapes not negative, dtype suits the multiplier, every value in range.
void check_tensor_operand(const TensorView &v, const Multiplier &m);
// int32/int64, no two elements at one address, no overlap with the inputs.
void check_tensor_output(const TensorView &out, const TensorView &a, const TensorView &b);

// Read element (i, j) of a validated integer view as int64.
inline int64_t load(const MatrixView &v, int64_t i, int64_t j) {
    const int64_t offset = i * v.row_stride + j * v.col_stride;
    switch (v.dtype) {
    case APPROXMUL_INT8: return static_cast<const int8_t *>(v.data)[offset];
    case APPROXMUL_UINT8: return static_cast<const uint8_t *>(v.data)[offset];
    case APPROXMUL_INT16: return static_cast<const int16_t *>(v.data)[offset];
    case APPROXMUL_UINT16: return static_cast<const uint16_t *>(v.data)[offset];
    case APPROXMUL_INT32: return static_cast<const int32_t *>(v.data)[offset];
    case APPROXMUL_INT64: return static_cast<const int64_t *>(v.data)[offset];
    }
    return 0;
}

}  // namespace approxmul
