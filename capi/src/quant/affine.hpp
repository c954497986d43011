// Affine quantization of real values into integer codes and back, bit-exact
// with the NumPy statements approxmul_cffi.affine.quantize_reference and
// dequantize_reference (the tests' oracle).
#pragma once

#include <cstdint>

#include "approxmul.h"

namespace approxmul::quant {

// Both directions share the layout: contiguous [outer, channels, inner]
// with one scale and zero point per channel (per tensor: channels = 1).
struct AffineLayout {
    int64_t outer, channels, inner;
    const double *scale;
    const int32_t *zero_point;
};

struct QuantizeProblem {
    AffineLayout layout;
    approxmul_real_type x_type;
    const void *x;
    int32_t qmin, qmax;
    approxmul_dtype out_dtype;
    void *out;
    bool finite_only;  // +-infinity refused like NaN (approxmul_quantize_finite)
};

struct DequantizeProblem {
    AffineLayout layout;
    approxmul_dtype codes_dtype;
    const void *codes;
    approxmul_real_type out_type;
    void *out;
};

// check() throws Error for bad arguments (a NaN input included) and must
// run before the call that writes.
void check(const QuantizeProblem &p);
void quantize(const QuantizeProblem &p);
// check() and quantize() in one pass, for an out that is the library's own
// scratch: out is written whether or not a value is refused.
void quantize_checked(const QuantizeProblem &p);
void check(const DequantizeProblem &p);
void dequantize(const DequantizeProblem &p);

}  // namespace approxmul::quant
