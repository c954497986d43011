// The C ABI of the quantized-inference helpers, through the same
// exception-to-status boundary as the core (core/boundary.hpp).
#include "approxmul.h"
#include "core/boundary.hpp"
#include "quant/requantize.hpp"

extern "C" {

approxmul_status approxmul_requantize(int64_t outer, int64_t channels, int64_t inner,
                                      approxmul_dtype acc_dtype, const void *acc,
                                      const int32_t *bias, const int32_t *mantissa,
                                      const int32_t *shift, int32_t zero_point, int32_t qmin,
                                      int32_t qmax, approxmul_rounding rounding,
                                      approxmul_dtype out_dtype, void *out) {
    return approxmul::guarded([&] {
        const int rounding_code = approxmul::enum_bits(rounding);
        if (rounding_code != APPROXMUL_ROUND_DOUBLE && rounding_code != APPROXMUL_ROUND_SINGLE)
            approxmul::fail(APPROXMUL_ERR_INVALID_ARGUMENT,
                            "rounding: %d is not an approxmul_rounding value", rounding_code);
        const approxmul::quant::RequantizeProblem problem{
            outer, channels, inner, approxmul::dtype_argument(acc_dtype, "acc"), acc, bias,
            mantissa, shift, zero_point, qmin, qmax,
            static_cast<approxmul_rounding>(rounding_code),
            approxmul::dtype_argument(out_dtype, "out"), out};
        approxmul::quant::check(problem);
        approxmul::quant::requantize(problem);
    });
}

}  // extern "C"
