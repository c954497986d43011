// The C ABI of the quantized-inference helpers, through the same
// exception-to-status boundary as the core (core/boundary.hpp).
#include "approxmul.h"
#include "core/boundary.hpp"
#include "quant/affine.hpp"
#include "quant/requantize.hpp"

namespace {

// An approxmul_real_type argument, validated like dtype_argument.
approxmul_real_type real_type_argument(const approxmul_real_type &raw, const char *name) {
    const int code = approxmul::enum_bits(raw);
    if (code != APPROXMUL_FLOAT32 && code != APPROXMUL_FLOAT64)
        approxmul::fail(APPROXMUL_ERR_DTYPE, "%s: %d is not an approxmul_real_type value", name,
                        code);
    return static_cast<approxmul_real_type>(code);
}

// A requantization's arguments, validated as far as their values go (the
// enums by reference: their bits are read before any is taken as a value).
approxmul::quant::RequantizeProblem requantize_problem(
    int64_t outer, int64_t channels, int64_t inner, const approxmul_dtype &acc_dtype,
    const void *acc, const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, const approxmul_rounding &rounding,
    const approxmul_dtype &out_dtype, void *out) {
    const int rounding_code = approxmul::enum_bits(rounding);
    if (rounding_code != APPROXMUL_ROUND_DOUBLE && rounding_code != APPROXMUL_ROUND_SINGLE)
        approxmul::fail(APPROXMUL_ERR_INVALID_ARGUMENT,
                        "rounding: %d is not an approxmul_rounding value", rounding_code);
    return {outer, channels, inner, approxmul::dtype_argument(acc_dtype, "acc"), acc, bias,
            mantissa, shift, zero_point, qmin, qmax,
            static_cast<approxmul_rounding>(rounding_code),
            approxmul::dtype_argument(out_dtype, "out"), out};
}

// Both quantizations; finite_only refuses +-infinity as well as NaN.
approxmul_status quantize_call(int64_t outer, int64_t channels, int64_t inner,
                               const approxmul_real_type &x_type, const void *x,
                               const double *scale, const int32_t *zero_point, int32_t qmin,
                               int32_t qmax, const approxmul_dtype &out_dtype, void *out,
                               bool finite_only) {
    return approxmul::guarded([&] {
        const approxmul::quant::QuantizeProblem problem{
            {outer, channels, inner, scale, zero_point}, real_type_argument(x_type, "x"), x,
            qmin, qmax, approxmul::dtype_argument(out_dtype, "out"), out, finite_only};
        approxmul::quant::check(problem);
        approxmul::quant::quantize(problem);
    });
}

}  // namespace

extern "C" {

approxmul_status approxmul_requantize(int64_t outer, int64_t channels, int64_t inner,
                                      approxmul_dtype acc_dtype, const void *acc,
                                      const int32_t *bias, const int32_t *mantissa,
                                      const int32_t *shift, int32_t zero_point, int32_t qmin,
                                      int32_t qmax, approxmul_rounding rounding,
                                      approxmul_dtype out_dtype, void *out) {
    return approxmul::guarded([&] {
        const auto problem = requantize_problem(outer, channels, inner, acc_dtype, acc, bias,
                                                mantissa, shift, zero_point, qmin, qmax,
                                                rounding, out_dtype, out);
        approxmul::quant::check(problem);
        approxmul::quant::requantize(problem);
    });
}

approxmul_status approxmul_requantize_dequantize(
    int64_t outer, int64_t channels, int64_t inner, approxmul_dtype acc_dtype, const void *acc,
    const int32_t *bias, const int32_t *mantissa, const int32_t *shift, int32_t zero_point,
    int32_t qmin, int32_t qmax, approxmul_rounding rounding, approxmul_dtype code_dtype,
    double out_scale, approxmul_real_type out_type, void *out) {
    return approxmul::guarded([&] {
        const auto problem = requantize_problem(outer, channels, inner, acc_dtype, acc, bias,
                                                mantissa, shift, zero_point, qmin, qmax,
                                                rounding, code_dtype, nullptr);
        const approxmul::quant::RealOutput real{out_scale, real_type_argument(out_type, "out"),
                                                out};
        approxmul::quant::check(problem, real);
        approxmul::quant::requantize_dequantize(problem, real);
    });
}

approxmul_status approxmul_quantize(int64_t outer, int64_t channels, int64_t inner,
                                    approxmul_real_type x_type, const void *x,
                                    const double *scale, const int32_t *zero_point,
                                    int32_t qmin, int32_t qmax, approxmul_dtype out_dtype,
                                    void *out) {
    return quantize_call(outer, channels, inner, x_type, x, scale, zero_point, qmin, qmax,
                         out_dtype, out, false);
}

approxmul_status approxmul_quantize_finite(int64_t outer, int64_t channels, int64_t inner,
                                           approxmul_real_type x_type, const void *x,
                                           const double *scale, const int32_t *zero_point,
                                           int32_t qmin, int32_t qmax,
                                           approxmul_dtype out_dtype, void *out) {
    return quantize_call(outer, channels, inner, x_type, x, scale, zero_point, qmin, qmax,
                         out_dtype, out, true);
}

approxmul_status approxmul_dequantize(int64_t outer, int64_t channels, int64_t inner,
                                      approxmul_dtype codes_dtype, const void *codes,
                                      const double *scale, const int32_t *zero_point,
                                      approxmul_real_type out_type, void *out) {
    return approxmul::guarded([&] {
        const approxmul::quant::DequantizeProblem problem{
            {outer, channels, inner, scale, zero_point},
            approxmul::dtype_argument(codes_dtype, "codes"), codes,
            real_type_argument(out_type, "out"), out};
        approxmul::quant::check(problem);
        approxmul::quant::dequantize(problem);
    });
}

}  // extern "C"
