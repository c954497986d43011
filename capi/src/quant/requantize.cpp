#include "requantize.hpp"

#include <algorithm>
#include <limits>

#include "../core/error.hpp"
#include "../core/operands.hpp"
#include "../core/threads.hpp"
#include "../kernels/parallel.hpp"

namespace approxmul::quant {

namespace {

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int64_t saturate32(int64_t x) { return std::min(std::max(x, kInt32Min), kInt32Max); }

// x / 2^n rounded toward zero, as C division does
int64_t truncating_shift(int64_t x, int n) { return (x + ((x >> 63) & ((int64_t{1} << n) - 1))) >> n; }

// gemmlowp's SaturatingRoundingDoublingHighMul(x << left, m) followed by
// RoundingDivideByPOT(., right): ties up in the first, away from zero in the second.
int64_t scale_double(int64_t x, int64_t m, int shift) {
    const int left = std::max(shift, 0), right = std::max(-shift, 0);
    x = saturate32(x * (int64_t{1} << left));
    const int64_t product = x * m;
    const int64_t nudge = product >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30);
    const int64_t high = truncating_shift(product + nudge, 31);
    const int64_t mask = (int64_t{1} << right) - 1;
    const int64_t remainder = high & mask;
    const int64_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
    return (high >> right) + (remainder > threshold ? 1 : 0);
}

// TFLite's single rounding: one rounding of x*m / 2^(31-shift), ties up.
int64_t scale_single(int64_t x, int64_t m, int shift) {
    const int total = 31 - shift;
    return (x * m + (int64_t{1} << (total - 1))) >> total;
}

template <typename Acc, typename Out, int64_t (*Scale)(int64_t, int64_t, int)>
void run(const RequantizeProblem &p) {
    const Acc *acc = static_cast<const Acc *>(p.acc);
    Out *out = static_cast<Out *>(p.out);
    const int64_t rows = p.outer * p.channels;
    // Rows can be short (a linear layer's are one element): hand out blocks of
    // about 16k elements so that scheduling costs nothing next to the work.
    const int64_t rows_per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(p.inner, 1));
    const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
    const int threads = tasks > 1 ? num_threads() : 1;
    kernels::parallel_for(tasks, threads, [&](int64_t task, int) {
        const int64_t end = std::min(rows, (task + 1) * rows_per_task);
        for (int64_t row = task * rows_per_task; row < end; ++row) {
            const int64_t c = row % p.channels;
            const int64_t bias = p.bias ? p.bias[c] : 0;
            const int64_t m = p.mantissa[c];
            const int shift = p.shift[c];
            const Acc *in = acc + row * p.inner;
            Out *to = out + row * p.inner;
            for (int64_t i = 0; i < p.inner; ++i) {
                const int64_t y = Scale(saturate32(static_cast<int64_t>(in[i]) + bias), m, shift);
                to[i] = static_cast<Out>(
                    std::min<int64_t>(std::max<int64_t>(y + p.zero_point, p.qmin), p.qmax));
            }
        }
    });
}

template <typename Acc, typename Out>
void run_rounding(const RequantizeProblem &p) {
    if (p.rounding == APPROXMUL_ROUND_DOUBLE)
        run<Acc, Out, scale_double>(p);
    else
        run<Acc, Out, scale_single>(p);
}

template <typename Acc>
void run_output(const RequantizeProblem &p) {
    if (p.out_dtype == APPROXMUL_INT8)
        run_rounding<Acc, int8_t>(p);
    else
        run_rounding<Acc, uint8_t>(p);
}

}  // namespace

void check(const RequantizeProblem &p) {
    if (p.outer < 0 || p.channels < 0 || p.inner < 0)
        fail(APPROXMUL_ERR_SHAPE, "sizes must not be negative (outer=%lld, channels=%lld, "
             "inner=%lld)", static_cast<long long>(p.outer), static_cast<long long>(p.channels),
             static_cast<long long>(p.inner));
    const int64_t count = checked_mul(checked_mul(p.outer, p.channels, "outer*channels"),
                                      p.inner, "outer*channels*inner");
    checked_mul(count, 8, "acc size in bytes");
    if (p.acc_dtype != APPROXMUL_INT32 && p.acc_dtype != APPROXMUL_INT64)
        fail(APPROXMUL_ERR_DTYPE, "acc: element type %s; accumulators are int32 or int64",
             dtype_name(p.acc_dtype));
    if (p.out_dtype != APPROXMUL_INT8 && p.out_dtype != APPROXMUL_UINT8)
        fail(APPROXMUL_ERR_DTYPE, "out: element type %s; codes are int8 or uint8",
             dtype_name(p.out_dtype));
    const int64_t lo = p.out_dtype == APPROXMUL_INT8 ? -128 : 0;
    const int64_t hi = p.out_dtype == APPROXMUL_INT8 ? 127 : 255;
    if (p.qmin > p.qmax || p.qmin < lo || p.qmax > hi)
        fail(APPROXMUL_ERR_OUT_OF_RANGE, "qmin..qmax = %d..%d is not a range within %s", p.qmin,
             p.qmax, dtype_name(p.out_dtype));
    if (count == 0) return;
    require_pointer(p.acc, "acc");
    require_pointer(p.out, "out");
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
    // out must not overlap acc (both are contiguous)
    const auto acc_lo = reinterpret_cast<intptr_t>(p.acc);
    const auto out_lo = reinterpret_cast<intptr_t>(p.out);
    const intptr_t acc_hi = acc_lo + static_cast<intptr_t>(count * dtype_size(p.acc_dtype));
    const intptr_t out_hi = out_lo + static_cast<intptr_t>(count);
    if (acc_lo < out_hi && out_lo < acc_hi) fail(APPROXMUL_ERR_ALIASING, "out overlaps acc");
}

void requantize(const RequantizeProblem &p) {
    if (p.outer * p.channels * p.inner == 0) return;
    if (p.acc_dtype == APPROXMUL_INT32)
        run_output<int32_t>(p);
    else
        run_output<int64_t>(p);
}

}  // namespace approxmul::quant
