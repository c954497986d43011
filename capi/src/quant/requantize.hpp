// Integer requantization of accumulators into 8-bit codes, bit-exact with
// approxmul_cffi.quant.requantize (the NumPy reference it is tested against).
#pragma once

#include <cstdint>

#include "approxmul.h"

namespace approxmul::quant {

struct RequantizeProblem {
    int64_t outer, channels, inner;
    approxmul_dtype acc_dtype;
    const void *acc;
    const int32_t *bias;  // may be null
    const int32_t *mantissa;
    const int32_t *shift;
    int32_t zero_point, qmin, qmax;
    approxmul_rounding rounding;
    approxmul_dtype out_dtype;
    void *out;
};

void check(const RequantizeProblem &p);  // throws Error; call before requantize
// Its checks of everything but acc and out (dtypes, code range, mantissa
// and shift), for callers whose accumulators are made on the way (conv2d's
// output stage); sizes must have been checked.
void check_parameters(const RequantizeProblem &p);
void requantize(const RequantizeProblem &p);

// The codes' real values instead of the codes (approxmul_requantize_dequantize):
// out = scale * (code - zero_point), code as requantize writes it into
// RequantizeProblem::out_dtype, whose out is unused.
struct RealOutput {
    double scale;
    approxmul_real_type type;
    void *out;
};

void check(const RequantizeProblem &p, const RealOutput &real);  // as check above
void check_real_output(const RealOutput &real);  // its checks of type and scale
void requantize_dequantize(const RequantizeProblem &p, const RealOutput &real);

}  // namespace approxmul::quant
