// The C ABI of the quantized-inference helpers, through the same
// exception-to-status boundary as the core (core/boundary.hpp).
#include <algorithm>
#include <array>
#include <utility>

#include "approxmul.h"
#include "capi_arguments.hpp"
#include "core/boundary.hpp"
#include "core/error.hpp"
#include "core/scratch.hpp"
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

// conv2d with an output stage: the convolution's problem, its accumulators
// described in p.out (their type, the output shape, contiguous), the
// requantization and the real output checked, then one pass.
void conv2d_staged(approxmul::kernels::Conv2dProblem &p,
                   const approxmul::quant::RequantizeProblem &requant,
                   const approxmul::quant::RealOutput *real, const int64_t *out_shape) {
    using namespace approxmul;
    p.out.name = "out";
    p.out.data = real != nullptr ? real->out : requant.out;  // for the emptiness check only
    require_pointer(out_shape, "out_shape");
    std::copy(out_shape, out_shape + 4, p.out.shape);
    const kernels::Shape4 shape = kernels::checked_output_shape(p);
    p.out.dtype = accumulator_dtype(*p.multiplier, p.w.shape[1] * p.w.shape[2] * p.w.shape[3],
                                    p.x_zero_point, p.w_zero_point);
    const int64_t st[4] = {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
    std::copy(st, st + 4, p.out.strides);
    quant::RequantizeProblem sized = requant;
    sized.outer = shape[0], sized.channels = shape[1], sized.inner = shape[2] * shape[3];
    sized.acc_dtype = p.out.dtype;
    if (real != nullptr) quant::check_real_output(*real);
    const kernels::Conv2dOutputStage stage{
        requant.bias, requant.mantissa, requant.shift, requant.zero_point, requant.qmin,
        requant.qmax, requant.rounding == APPROXMUL_ROUND_SINGLE ? 1 : 0, requant.out_dtype,
        real == nullptr ? 0 : (real->type == APPROXMUL_FLOAT64 ? 8 : 4),
        real == nullptr ? 1.0 : real->scale, real != nullptr ? real->out : requant.out};
    p.stage = &stage;
    kernels::check(p);  // shapes (out_shape against the convolution's), operands, overlap
    quant::check_parameters(sized);
    kernels::conv2d(p);
}

// Whether a 4-d layout is a permutation of a contiguous one (NCHW,
// channels-last, ...): its count elements lie consecutively from its first.
bool dense_layout(const int64_t *shape, const int64_t *strides) {
    std::array<std::pair<int64_t, int64_t>, 4> dims;  // (stride, size) of sizes > 1, by stride
    size_t n = 0;
    for (int d = 0; d < 4; ++d) {
        if (shape[d] <= 1) continue;
        size_t at = n++;
        for (; at > 0 && dims[at - 1].first > strides[d]; --at) dims[at] = dims[at - 1];
        dims[at] = {strides[d], shape[d]};
    }
    int64_t expected = 1;
    for (size_t d = 0; d < n; ++d) {
        if (dims[d].first != expected) return false;
        expected *= dims[d].second;
    }
    return true;
}

}  // namespace

extern "C" {

approxmul_status approxmul_conv2d_requantize(
    const approxmul_multiplier *m, approxmul_dtype x_dtype, const void *x,
    const int64_t *x_shape, const int64_t *x_strides, approxmul_dtype w_dtype, const void *w,
    const int64_t *w_shape, const int64_t *w_strides, const int64_t *stride,
    const int64_t *padding, const int64_t *dilation, int64_t groups, int64_t x_zero_point,
    int64_t w_zero_point, const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype out_dtype, void *out, const int64_t *out_shape) {
    return approxmul::guarded([&] {
        auto p = approxmul::conv2d_arguments(m, x_dtype, x, x_shape, x_strides, w_dtype, w,
                                             w_shape, w_strides, stride, padding, dilation,
                                             groups, x_zero_point, w_zero_point);
        const auto requant = requantize_problem(0, 0, 0, APPROXMUL_INT32, nullptr, bias, mantissa,
                                                shift, zero_point, qmin, qmax, rounding,
                                                out_dtype, out);
        conv2d_staged(p, requant, nullptr, out_shape);
    });
}

approxmul_status approxmul_conv2d_requantize_dequantize(
    const approxmul_multiplier *m, approxmul_dtype x_dtype, const void *x,
    const int64_t *x_shape, const int64_t *x_strides, approxmul_dtype w_dtype, const void *w,
    const int64_t *w_shape, const int64_t *w_strides, const int64_t *stride,
    const int64_t *padding, const int64_t *dilation, int64_t groups, int64_t x_zero_point,
    int64_t w_zero_point, const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype code_dtype, double out_scale, approxmul_real_type out_type, void *out,
    const int64_t *out_shape) {
    return approxmul::guarded([&] {
        auto p = approxmul::conv2d_arguments(m, x_dtype, x, x_shape, x_strides, w_dtype, w,
                                             w_shape, w_strides, stride, padding, dilation,
                                             groups, x_zero_point, w_zero_point);
        const auto requant = requantize_problem(0, 0, 0, APPROXMUL_INT32, nullptr, bias, mantissa,
                                                shift, zero_point, qmin, qmax, rounding,
                                                code_dtype, nullptr);
        const approxmul::quant::RealOutput real{out_scale, real_type_argument(out_type, "out"),
                                                out};
        conv2d_staged(p, requant, &real, out_shape);
    });
}

approxmul_status approxmul_conv2d_real(
    const approxmul_multiplier *m, approxmul_real_type x_type, const void *x,
    const int64_t *x_shape, const int64_t *x_strides, double x_scale, int32_t x_qmin,
    int32_t x_qmax, approxmul_dtype x_dtype, approxmul_dtype w_dtype, const void *w,
    const int64_t *w_shape, const int64_t *w_strides, const int64_t *stride,
    const int64_t *padding, const int64_t *dilation, int64_t groups, int64_t x_zero_point,
    int64_t w_zero_point, const int32_t *bias, const int32_t *mantissa, const int32_t *shift,
    int32_t zero_point, int32_t qmin, int32_t qmax, approxmul_rounding rounding,
    approxmul_dtype code_dtype, double out_scale, approxmul_real_type out_type, void *out,
    const int64_t *out_shape) {
    using namespace approxmul;
    return guarded([&] {
        auto p = conv2d_arguments(m, x_dtype, x, x_shape, x_strides, w_dtype, w, w_shape,
                                  w_strides, stride, padding, dilation, groups, x_zero_point,
                                  w_zero_point);
        const auto requant = requantize_problem(0, 0, 0, APPROXMUL_INT32, nullptr, bias, mantissa,
                                                shift, zero_point, qmin, qmax, rounding,
                                                code_dtype, nullptr);
        const quant::RealOutput real{out_scale, real_type_argument(out_type, "out"), out};
        // the geometry and zero points first: they need no values
        kernels::checked_output_shape(p);
        const int64_t count = p.x.size();
        if (count > 0 && !dense_layout(p.x.shape, p.x.strides))
            fail(APPROXMUL_ERR_INVALID_ARGUMENT,
                 "x_strides: x must be dense in some axis order (contiguous, channels-last, ...)");
        // codes the multiplier takes, so the convolution need not scan them
        const Multiplier &multiplier = *p.multiplier;
        if (x_qmin < multiplier.min_operand() || x_qmax > multiplier.max_operand())
            fail(APPROXMUL_ERR_OUT_OF_RANGE,
                 "x_qmin..x_qmax = %d..%d: the multiplier takes codes %lld..%lld", x_qmin,
                 x_qmax, static_cast<long long>(multiplier.min_operand()),
                 static_cast<long long>(multiplier.max_operand()));
        // x's codes in the library's scratch, in x's own layout: quantized and
        // checked in one pass, as nobody else sees them
        const int32_t zero = static_cast<int32_t>(x_zero_point);  // fits x_dtype: checked
        quant::QuantizeProblem quantize{{1, 1, count, &x_scale, &zero},
                                        real_type_argument(x_type, "x"), x, x_qmin, x_qmax,
                                        p.x.dtype, nullptr, true};
        Scratch<char> codes(static_cast<size_t>(count) * dtype_size(p.x.dtype));
        quantize.out = codes.data();
        quant::quantize_checked(quantize);
        if (count > 0) p.x.data = codes.data();
        conv2d_staged(p, requant, &real, out_shape);
    });
}

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
