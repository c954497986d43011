// approxmul_requantize under fuzz: sizes (negative, overflowing, rows
// shorter and longer than the by-row threshold), int32/int64 accumulators
// biased to the int32 edges, NULL bias, mantissas and shifts just inside and
// outside their ranges, both roundings and invalid ones, qmin/qmax around
// the output type (8- and 16-bit codes), and an output overlapping the
// accumulators.
// Successes must equal the harness's own statement of the arithmetic
// (128-bit integers, floor divisions), and approxmul_requantize_dequantize
// the same codes scaled; failures write nothing.
#include <cmath>

#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

i128 floor_div(i128 a, i128 b) {  // b > 0
    const i128 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

i128 sat32(i128 v) { return std::min<i128>(std::max<i128>(v, INT32_MIN), INT32_MAX); }

// The documented arithmetic (approxmul.h, docs/quantization.md), written as
// the roundings it names rather than as the library's shifts and masks.
int64_t reference(int64_t acc, int32_t bias, int32_t mantissa, int32_t shift, int rounding,
                  int32_t zero_point, int32_t qmin, int32_t qmax) {
    const i128 t = sat32(i128(acc) + bias);
    i128 y;
    if (rounding == APPROXMUL_ROUND_SINGLE) {
        const int total = 31 - shift;  // round half up of t*m / 2^total
        y = floor_div(t * mantissa + (i128(1) << (total - 1)), i128(1) << total);
    } else {
        const int left = std::max(shift, 0), right = std::max(-shift, 0);
        const i128 x = sat32(t * (i128(1) << left));
        const i128 high = floor_div(x * mantissa + (i128(1) << 30), i128(1) << 31);  // ties up
        if (right == 0) {
            y = high;
        } else {  // ties away from zero
            const i128 half = i128(1) << (right - 1), unit = i128(1) << right;
            y = high >= 0 ? floor_div(high + half, unit) : -floor_div(-high + half, unit);
        }
    }
    return int64_t(std::min<i128>(std::max<i128>(y + zero_point, qmin), qmax));
}

int32_t pick_accumulator(FuzzedDataProvider &in, bool wide) {
    switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<int32_t>(-300, 300);
    case 1: return in.ConsumeBool() ? INT32_MAX - in.ConsumeIntegralInRange(0, 3)
                                    : INT32_MIN + in.ConsumeIntegralInRange(0, 3);
    default: return wide ? 0 : in.ConsumeIntegral<int32_t>();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    pick_threads(in);
    const bool huge = in.ConsumeIntegralInRange(0, 15) == 0;
    const int64_t outer = huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 4);
    const int64_t channels =
        huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 9);
    const int64_t inner = huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 80);
    const int acc_dtype = in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeIntegralInRange(-1, 8)
                          : in.ConsumeBool()                   ? APPROXMUL_INT32
                                                               : APPROXMUL_INT64;
    const int out_dtype = in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeIntegralInRange(-1, 8)
                                                               : in.ConsumeIntegralInRange(1, 4);
    const bool out16 = out_dtype == APPROXMUL_INT16 || out_dtype == APPROXMUL_UINT16;
    const int rounding = in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeIntegralInRange(-1, 4)
                         : in.ConsumeBool()                   ? APPROXMUL_ROUND_DOUBLE
                                                              : APPROXMUL_ROUND_SINGLE;
    const int32_t zero_point = in.ConsumeIntegralInRange(-300, 300);
    int32_t qmin = out16 ? in.ConsumeIntegralInRange(-32770, 65537) : in.ConsumeIntegralInRange(-130, 257);
    int32_t qmax = out16 ? in.ConsumeIntegralInRange(-32770, 65537) : in.ConsumeIntegralInRange(-130, 257);
    if (in.ConsumeBool() && qmin > qmax) std::swap(qmin, qmax);

    if (huge) {
        // sizes the library must refuse before reading any pointer
        if (layout_addressable(outer, channels, inner)) return 0;
        int64_t dummy[4] = {0, 0, 0, 0};
        const int32_t params[2] = {1, 0};
        const approxmul_status status = checked(approxmul_requantize(
            outer, channels, inner, static_cast<approxmul_dtype>(acc_dtype), dummy, params,
            params, params + 1, zero_point, qmin, qmax, static_cast<approxmul_rounding>(rounding),
            static_cast<approxmul_dtype>(out_dtype), dummy + 2));
        expect(status != APPROXMUL_OK, "negative or overflowing size accepted");
        return 0;
    }

    const int64_t count = outer * channels * inner;
    const bool wide = acc_dtype == APPROXMUL_INT64;
    bool valid = (acc_dtype == APPROXMUL_INT32 || wide) &&
                 out_dtype >= APPROXMUL_INT8 && out_dtype <= APPROXMUL_UINT16 &&
                 (rounding == APPROXMUL_ROUND_DOUBLE || rounding == APPROXMUL_ROUND_SINGLE);
    const int32_t lo = out_dtype == APPROXMUL_INT8 ? -128 : out_dtype == APPROXMUL_INT16 ? -32768 : 0;
    const int32_t hi = out_dtype == APPROXMUL_INT8    ? 127
                       : out_dtype == APPROXMUL_UINT8 ? 255
                       : out_dtype == APPROXMUL_INT16 ? 32767
                                                      : 65535;
    const size_t out_item = out16 ? 2 : 1;
    valid &= qmin <= qmax && qmin >= lo && qmax <= hi;

    std::vector<int32_t> bias(static_cast<size_t>(channels)),
        mantissa(static_cast<size_t>(channels)), shift(static_cast<size_t>(channels));
    const bool null_bias = in.ConsumeBool();
    for (int64_t c = 0; c < channels; ++c) {
        bias[size_t(c)] = in.ConsumeBool() ? in.ConsumeIntegralInRange(-1000, 1000)
                                           : in.ConsumeIntegral<int32_t>();
        mantissa[size_t(c)] = in.ConsumeIntegralInRange(0, 15) == 0
                                  ? in.ConsumeIntegralInRange(-2, 2)
                                  : in.ConsumeIntegralInRange<int32_t>(0, INT32_MAX);
        shift[size_t(c)] = in.ConsumeIntegralInRange(-33, 32);
        if (count > 0)
            valid &= mantissa[size_t(c)] >= 0 && shift[size_t(c)] >= -31 && shift[size_t(c)] <= 30;
    }

    // accumulators, and an output either apart or (sometimes) inside them
    std::vector<int64_t> values(static_cast<size_t>(count));
    for (auto &v : values) {
        v = pick_accumulator(in, wide);
        if (wide && in.ConsumeIntegralInRange(0, 3) == 0) v = in.ConsumeIntegral<int64_t>();
    }
    const size_t acc_bytes = size_t(count) * (wide ? 8 : 4);
    const bool overlap = count > 0 && in.ConsumeIntegralInRange(0, 15) == 0;
    std::vector<unsigned char> acc_storage(acc_bytes + (overlap ? size_t(count) * out_item : 0));
    for (int64_t i = 0; i < count; ++i) {
        if (wide) {
            std::memcpy(acc_storage.data() + 8 * i, &values[size_t(i)], 8);
        } else {
            const int32_t v32 = int32_t(values[size_t(i)]);
            std::memcpy(acc_storage.data() + 4 * i, &v32, 4);
        }
    }
    std::vector<unsigned char> out_storage(static_cast<size_t>(count) * out_item);
    unsigned char *out = out_storage.data();
    if (overlap) out = acc_storage.data() + in.ConsumeIntegralInRange<size_t>(0, acc_bytes);
    const std::vector<unsigned char> acc_before(acc_storage.begin(),
                                                acc_storage.begin() + long(acc_bytes));
    auto acc_unchanged = [&] {
        return std::equal(acc_before.begin(), acc_before.end(), acc_storage.begin());
    };
    std::fill(out_storage.begin(), out_storage.end(), 0x5a);
    const std::vector<unsigned char> out_before = out_storage;

    const approxmul_status status = checked(approxmul_requantize(
        outer, channels, inner, static_cast<approxmul_dtype>(acc_dtype),
        count ? acc_storage.data() : nullptr, null_bias ? nullptr : bias.data(),
        channels ? mantissa.data() : nullptr, channels ? shift.data() : nullptr, zero_point,
        qmin, qmax, static_cast<approxmul_rounding>(rounding),
        static_cast<approxmul_dtype>(out_dtype), count ? out : nullptr));
    if (overlap && out < acc_storage.data() + acc_bytes)
        expect(status == APPROXMUL_ERR_ALIASING || !valid, "output inside acc accepted", status);
    if (status != APPROXMUL_OK) {
        expect(out_storage == out_before && acc_unchanged(), "memory written by a failing call",
               status);
        return 0;
    }
    expect(valid, "invalid requantize arguments accepted");
    const auto code_at = [&](int64_t i) {
        if (out16) {
            uint16_t raw;
            std::memcpy(&raw, out + 2 * i, 2);
            return out_dtype == APPROXMUL_INT16 ? int64_t(int16_t(raw)) : int64_t(raw);
        }
        return out_dtype == APPROXMUL_INT8 ? int64_t(int8_t(out[i])) : int64_t(out[i]);
    };
    expect(acc_unchanged(), "acc modified");
    for (int64_t i = 0; i < count; ++i) {
        const int64_t c = (i / inner) % channels;
        const int64_t want = reference(wide ? values[size_t(i)] : int32_t(values[size_t(i)]),
                                       null_bias ? 0 : bias[size_t(c)], mantissa[size_t(c)],
                                       shift[size_t(c)], rounding, zero_point, qmin, qmax);
        expect(code_at(i) == want, "requantized code differs from the reference",
               static_cast<long long>(i));
    }
    // the fused pass to real values: the same codes, scaled, bit for bit
    const double scale = std::ldexp(1.0 + in.ConsumeIntegralInRange(0, 1023) / 1024.0,
                                    in.ConsumeIntegralInRange(-30, 10));
    const bool real64 = in.ConsumeBool();
    std::vector<unsigned char> real(static_cast<size_t>(count) * (real64 ? 8 : 4));
    expect(checked(approxmul_requantize_dequantize(
               outer, channels, inner, static_cast<approxmul_dtype>(acc_dtype),
               count ? acc_storage.data() : nullptr, null_bias ? nullptr : bias.data(),
               channels ? mantissa.data() : nullptr, channels ? shift.data() : nullptr,
               zero_point, qmin, qmax, static_cast<approxmul_rounding>(rounding),
               static_cast<approxmul_dtype>(out_dtype), scale,
               real64 ? APPROXMUL_FLOAT64 : APPROXMUL_FLOAT32, count ? real.data() : nullptr)) ==
               APPROXMUL_OK,
           "requantize_dequantize refused what requantize took");
    for (int64_t i = 0; i < count; ++i) {
        const double want = scale * (double(code_at(i)) - double(zero_point));
        bool same;
        if (real64) {
            double got;
            std::memcpy(&got, real.data() + 8 * i, 8);
            same = std::memcmp(&got, &want, 8) == 0;
        } else {
            float got;
            const float want32 = static_cast<float>(want);
            std::memcpy(&got, real.data() + 4 * i, 4);
            same = std::memcmp(&got, &want32, 4) == 0;
        }
        expect(same, "requantize_dequantize differs from the scaled codes",
               static_cast<long long>(i));
    }
    return 0;
}
