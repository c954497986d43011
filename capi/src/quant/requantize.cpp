#include "requantize.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../core/error.hpp"
#include "../core/operands.hpp"
#include "../core/threads.hpp"
#include "../kernels/isa.hpp"
#include "../kernels/parallel.hpp"

namespace approxmul::quant {

namespace {

// The arithmetic, per element with the channel's bias b, mantissa m, shift e:
//   t = sat32(acc + b)
//   double rounding (gemmlowp): x = sat32(t * 2^max(e, 0));
//     high = (x * m + (x * m >= 0 ? 2^30 : 1 - 2^30)) / 2^31, rounded toward zero
//     (SaturatingRoundingDoublingHighMul: ties up; it cannot saturate, m >= 0);
//     y = RoundingDivideByPOT(high, max(-e, 0)): ties away from zero
//   single rounding (TFLite): y = (t * m + 2^(30 - e)) >> (31 - e), ties up
//   code = clamp(y + zero_point, qmin, qmax)

// The kernel set's vectorised loop (isa_kernels.cpp) does the arithmetic
// above; for_chunks splits the work. Rows of at least kRowRun elements
// run with their channel's parameters as scalars; shorter rows (a linear
// layer's are one element, a small feature map's 16) run as whole
// channels*inner stretches with the parameters expanded per element.
constexpr int64_t kRowRun = 64;

const kernels::KernelTable &requantize_kernels() {
    try {
        return kernels::selected_kernels();
    } catch (const Error &) {  // a forced, unavailable set: requantization needs none
        return *kernels::generic_kernel_table();
    }
}

// Elements per emit call: a chunk of codes stays in L1 between the two
// passes of requantize_dequantize.
constexpr int64_t kChunk = 2048;

// Calls emit(first, n, acc, bias, mantissa, shift, step) over chunks of at
// most kChunk elements that cover the problem, in parallel; the parameter
// pointers are those of the chunk's first element.
template <typename Emit>
void for_chunks(const RequantizeProblem &p, const Emit &emit) {
    const size_t acc_item = p.acc_dtype == APPROXMUL_INT64 ? 8 : 4;
    const auto *acc = static_cast<const char *>(p.acc);
    std::vector<int32_t> zero_bias;
    const int32_t *bias = p.bias;
    if (bias == nullptr) {
        zero_bias.assign(static_cast<size_t>(p.channels), 0);
        bias = zero_bias.data();
    }
    const bool by_row = p.inner >= kRowRun || p.channels == 1;
    // Units of work: one row (by_row), or one outer index's channels*inner.
    const int64_t unit = by_row ? p.inner : p.channels * p.inner;
    const int64_t units = by_row ? p.outer * p.channels : p.outer;
    std::vector<int32_t> expanded;  // bias, mantissa, shift per element of a unit
    if (!by_row) {
        expanded.resize(static_cast<size_t>(3 * unit));
        for (int64_t c = 0; c < p.channels; ++c)
            for (int64_t i = 0; i < p.inner; ++i) {
                const size_t e = static_cast<size_t>(c * p.inner + i);
                expanded[e] = bias[c];
                expanded[static_cast<size_t>(unit) + e] = p.mantissa[c];
                expanded[static_cast<size_t>(2 * unit) + e] = p.shift[c];
            }
    }
    // Blocks of about 16k elements so that scheduling costs nothing next to the work.
    const int64_t per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(unit, 1));
    const int64_t tasks = (units + per_task - 1) / per_task;
    const int threads = tasks > 1 ? num_threads() : 1;
    kernels::parallel_for(tasks, threads, [&](int64_t task, int) {
        const int64_t end = std::min(units, (task + 1) * per_task);
        for (int64_t u = task * per_task; u < end; ++u)
            for (int64_t j = 0; j < unit; j += kChunk) {
                const int64_t first = u * unit + j, n = std::min(kChunk, unit - j);
                const void *in = acc + first * static_cast<int64_t>(acc_item);
                if (by_row) {
                    const int64_t c = u % p.channels;
                    emit(first, n, in, bias + c, p.mantissa + c, p.shift + c, 0);
                } else {
                    const int32_t *e = expanded.data() + j;
                    emit(first, n, in, e, e + unit, e + 2 * unit, 1);
                }
            }
    });
}

}  // namespace

void check_parameters(const RequantizeProblem &p) {
    if (p.acc_dtype != APPROXMUL_INT32 && p.acc_dtype != APPROXMUL_INT64)
        fail(APPROXMUL_ERR_DTYPE, "acc: element type %s; accumulators are int32 or int64",
             dtype_name(p.acc_dtype));
    if (p.out_dtype != APPROXMUL_INT8 && p.out_dtype != APPROXMUL_UINT8 &&
        p.out_dtype != APPROXMUL_INT16 && p.out_dtype != APPROXMUL_UINT16)
        fail(APPROXMUL_ERR_DTYPE, "out: element type %s; codes are int8, uint8, int16 or uint16",
             dtype_name(p.out_dtype));
    check_code_range(p.qmin, p.qmax, p.out_dtype);
    if (p.outer * p.channels * p.inner == 0) return;
    require_pointer(p.mantissa, "mantissa");
    require_pointer(p.shift, "shift");
    for (int64_t c = 0; c < p.channels; ++c) {
        if (p.mantissa[c] < 0)
            fail(APPROXMUL_ERR_OUT_OF_RANGE, "mantissa[%lld] = %d is negative",
                 static_cast<long long>(c), p.mantissa[c]);
        if (p.shift[c] < -31 || p.shift[c] > 30)
            fail(APPROXMUL_ERR_OUT_OF_RANGE, "shift[%lld] = %d is outside -31..30",
                 static_cast<long long>(c), p.shift[c]);
    }
}

namespace {

void check_requantize(const RequantizeProblem &p, void *out, int64_t out_item) {
    const int64_t count = checked_layout_count(p.outer, p.channels, p.inner);
    check_parameters(p);
    if (count == 0) return;
    require_pointer(p.acc, "acc");
    require_pointer(out, "out");
    // out must not overlap acc (both are contiguous)
    const auto acc_lo = reinterpret_cast<intptr_t>(p.acc);
    const auto out_lo = reinterpret_cast<intptr_t>(out);
    const intptr_t acc_hi = acc_lo + static_cast<intptr_t>(count * dtype_size(p.acc_dtype));
    const intptr_t out_hi = out_lo + static_cast<intptr_t>(count * out_item);
    if (acc_lo < out_hi && out_lo < acc_hi) fail(APPROXMUL_ERR_ALIASING, "out overlaps acc");
}

}  // namespace

void check(const RequantizeProblem &p) {
    check_requantize(p, p.out, static_cast<int64_t>(dtype_size(p.out_dtype)));
}

void requantize(const RequantizeProblem &p) {
    if (p.outer * p.channels * p.inner == 0) return;
    const kernels::KernelTable &kt = requantize_kernels();
    const int acc64 = p.acc_dtype == APPROXMUL_INT64 ? 1 : 0;
    const int single = p.rounding == APPROXMUL_ROUND_DOUBLE ? 0 : 1;
    auto *out = static_cast<char *>(p.out);
    const int64_t out_item = static_cast<int64_t>(dtype_size(p.out_dtype));
    for_chunks(p, [&](int64_t first, int64_t n, const void *acc, const int32_t *bias,
                      const int32_t *mantissa, const int32_t *shift, int step) {
        kt.requantize(n, acc, acc64, bias, mantissa, shift, step, p.zero_point, p.qmin, p.qmax,
                      single, p.out_dtype, out + first * out_item);
    });
}

void check_real_output(const RealOutput &real) {
    if (real.type != APPROXMUL_FLOAT32 && real.type != APPROXMUL_FLOAT64)
        fail(APPROXMUL_ERR_DTYPE, "out: %d is not an approxmul_real_type value",
             static_cast<int>(real.type));
    if (!(std::isfinite(real.scale) && real.scale > 0))
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "out_scale = %g is not finite and positive",
             real.scale);
}

void check(const RequantizeProblem &p, const RealOutput &real) {
    check_real_output(real);
    check_requantize(p, real.out, real.type == APPROXMUL_FLOAT32 ? 4 : 8);
}

void requantize_dequantize(const RequantizeProblem &p, const RealOutput &real) {
    if (p.outer * p.channels * p.inner == 0) return;
    const kernels::KernelTable &kt = requantize_kernels();
    const int acc64 = p.acc_dtype == APPROXMUL_INT64 ? 1 : 0;
    const int single = p.rounding == APPROXMUL_ROUND_DOUBLE ? 0 : 1;
    const int out64 = real.type == APPROXMUL_FLOAT64;
    auto *out = static_cast<char *>(real.out);
    const int64_t out_item = out64 ? 8 : 4;
    const int32_t zero = p.zero_point;
    for_chunks(p, [&](int64_t first, int64_t n, const void *acc, const int32_t *bias,
                      const int32_t *mantissa, const int32_t *shift, int step) {
        alignas(64) int16_t codes[kChunk];  // 8- or 16-bit codes of this chunk
        kt.requantize(n, acc, acc64, bias, mantissa, shift, step, p.zero_point, p.qmin, p.qmax,
                      single, p.out_dtype, codes);
        kt.dequantize(n, codes, p.out_dtype, &real.scale, &zero, 0, out64,
                      out + first * out_item);
    });
}

}  // namespace approxmul::quant
