// approxmul_quantize and approxmul_dequantize under fuzz: sizes (negative,
// overflowing, rows shorter and longer than the per-element threshold),
// float32/float64 values biased to ties, infinities, NaN and huge values,
// scales that are tiny, huge, zero, negative, infinite or NaN, zero points
// around their limit, qmin/qmax around the output type, invalid type
// values, and an output overlapping the input. Successes must equal the
// harness's own statement of the arithmetic (floor in double, no shortcut);
// failures write nothing.
#include <cmath>

#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

double reference_code(double x, double scale, int32_t zero, int32_t qmin, int32_t qmax) {
    const double v = x / scale;
    const double r = v < 0 ? -std::floor(-v + 0.5) : std::floor(v + 0.5);
    return std::min<double>(std::max<double>(r + zero, qmin), qmax);
}

double pick_value(FuzzedDataProvider &in, double scale) {
    switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0: return (in.ConsumeIntegralInRange(-70000, 70000) + 0.5) * scale;  // ties
    case 1: return in.PickValueInArray<double>({double(INFINITY), -double(INFINITY), double(NAN), 1e300, -1e300, -0.0, 0.0,
                                        0.49999999999999994, 2147483648.5, 1073741824.5});
    case 2: return in.ConsumeIntegralInRange(-70000, 70000) * scale;
    default: return in.ConsumeFloatingPointInRange<double>(-1e6, 1e6) * scale;
    }
}

double pick_scale(FuzzedDataProvider &in) {
    switch (in.ConsumeIntegralInRange(0, 9)) {
    case 0: return in.PickValueInArray<double>({0.0, -1.0, double(INFINITY), double(NAN), 5e-324, 1e308});
    case 1: return std::ldexp(1.0, in.ConsumeIntegralInRange(-1074, 1023));
    default: return std::ldexp(in.ConsumeFloatingPointInRange<double>(0.5, 1.0),
                               in.ConsumeIntegralInRange(-40, 40));
    }
}

int pick_type(FuzzedDataProvider &in, std::initializer_list<const int> valid) {
    if (in.ConsumeIntegralInRange(0, 9) == 0) return in.ConsumeIntegralInRange(-1, 8);
    return in.PickValueInArray(valid);
}

bool code_type(int t, int64_t &lo, int64_t &hi) {
    switch (t) {
    case APPROXMUL_INT8: lo = -128; hi = 127; return true;
    case APPROXMUL_UINT8: lo = 0; hi = 255; return true;
    case APPROXMUL_INT16: lo = -32768; hi = 32767; return true;
    case APPROXMUL_UINT16: lo = 0; hi = 65535; return true;
    }
    return false;
}

int64_t read_code(const unsigned char *p, int t) {
    switch (t) {
    case APPROXMUL_INT8: return int8_t(*p);
    case APPROXMUL_UINT8: return *p;
    case APPROXMUL_INT16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case APPROXMUL_UINT16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    default: { int32_t v; std::memcpy(&v, p, 4); return v; }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    pick_threads(in);
    const bool dequantize = in.ConsumeBool();
    const bool huge = in.ConsumeIntegralInRange(0, 15) == 0;
    const int64_t outer = huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 3);
    const int64_t channels = huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 9);
    const int64_t inner = huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 80);
    const int real_type = pick_type(in, {APPROXMUL_FLOAT32, APPROXMUL_FLOAT64});
    const int code = pick_type(in, {APPROXMUL_INT8, APPROXMUL_UINT8, APPROXMUL_INT16,
                                    APPROXMUL_UINT16, APPROXMUL_INT32});
    int32_t qmin = in.ConsumeIntegralInRange(-33000, 66000);
    int32_t qmax = in.ConsumeIntegralInRange(-33000, 66000);
    if (in.ConsumeBool() && qmin > qmax) std::swap(qmin, qmax);
    if (huge) {
        if (layout_addressable(outer, channels, inner)) return 0;
        double dummy[4] = {0, 0, 0, 0};
        const double scale = 1.0;
        const int32_t zero = 0;
        const approxmul_status status =
            dequantize ? checked(approxmul_dequantize(outer, channels, inner,
                                                      static_cast<approxmul_dtype>(code), dummy,
                                                      &scale, &zero,
                                                      static_cast<approxmul_real_type>(real_type),
                                                      dummy + 2))
                       : checked(approxmul_quantize(outer, channels, inner,
                                                    static_cast<approxmul_real_type>(real_type),
                                                    dummy, &scale, &zero, qmin, qmax,
                                                    static_cast<approxmul_dtype>(code), dummy + 2));
        expect(status != APPROXMUL_OK, "negative or overflowing size accepted");
        return 0;
    }
    const int64_t count = outer * channels * inner;
    std::vector<double> scale(static_cast<size_t>(channels));
    std::vector<int32_t> zero(static_cast<size_t>(channels));
    bool params_ok = true;
    for (int64_t c = 0; c < channels; ++c) {
        scale[size_t(c)] = pick_scale(in);
        zero[size_t(c)] = in.ConsumeIntegralInRange(0, 7) == 0
                              ? in.ConsumeIntegralInRange(-(1 << 24) - 2, (1 << 24) + 2)
                              : in.ConsumeIntegralInRange(-300, 300);
        params_ok &= std::isfinite(scale[size_t(c)]) && scale[size_t(c)] > 0;
        if (!dequantize) params_ok &= std::abs(zero[size_t(c)]) <= (1 << 24);
    }
    const bool single = real_type == APPROXMUL_FLOAT32;
    const size_t real_bytes = single ? 4 : 8;
    int64_t lo = INT32_MIN, hi = INT32_MAX;
    const bool code_ok = dequantize ? (code_type(code, lo, hi) || code == APPROXMUL_INT32)
                                    : code_type(code, lo, hi);
    const size_t code_bytes = code == APPROXMUL_INT32 ? 4 : dtype_size(code) ? dtype_size(code) : 1;
    bool valid = code_ok && (single || real_type == APPROXMUL_FLOAT64);
    if (!dequantize) valid &= qmin <= qmax && qmin >= lo && qmax <= hi;
    if (count > 0) valid &= params_ok;

    // the input, and an output apart from it or (sometimes) inside it
    const size_t in_bytes = size_t(count) * (dequantize ? code_bytes : real_bytes);
    const size_t out_bytes = size_t(count) * (dequantize ? real_bytes : code_bytes);
    const bool overlap = count > 0 && in.ConsumeIntegralInRange(0, 15) == 0;
    std::vector<unsigned char> input(in_bytes + (overlap ? out_bytes : 0));
    const bool finite = !dequantize && in.ConsumeBool();  // approxmul_quantize_finite
    bool has_nan = false, has_inf = false;
    for (int64_t i = 0; i < count; ++i) {
        const int64_t c = (i / inner) % channels;
        if (dequantize) {
            const int64_t v = in.ConsumeIntegralInRange<int64_t>(lo, hi);
            std::memcpy(input.data() + size_t(i) * code_bytes, &v, code_bytes);  // little endian
        } else {
            const double v = pick_value(in, std::isfinite(scale[size_t(c)]) ? scale[size_t(c)] : 1);
            if (single) {
                const float f = float(v);
                has_nan |= std::isnan(f);
                has_inf |= std::isinf(f);
                std::memcpy(input.data() + 4 * i, &f, 4);
            } else {
                has_nan |= std::isnan(v);
                has_inf |= std::isinf(v);
                std::memcpy(input.data() + 8 * i, &v, 8);
            }
        }
    }
    if (!dequantize && count > 0) valid &= !has_nan && !(finite && has_inf);
    std::vector<unsigned char> out_storage(out_bytes, 0x5a);
    unsigned char *out = out_storage.data();
    if (overlap) {  // aligned for its type, as a C caller's pointer is
        const size_t item = dequantize ? real_bytes : code_bytes;
        out = input.data() + in.ConsumeIntegralInRange<size_t>(0, in_bytes) / item * item;
    }
    const std::vector<unsigned char> input_before(input.begin(), input.begin() + long(in_bytes));
    const std::vector<unsigned char> out_before = out_storage;

    const approxmul_status status =
        dequantize
            ? checked(approxmul_dequantize(outer, channels, inner,
                                           static_cast<approxmul_dtype>(code),
                                           count ? input.data() : nullptr, scale.data(),
                                           zero.data(), static_cast<approxmul_real_type>(real_type),
                                           count ? out : nullptr))
            : checked((finite ? approxmul_quantize_finite : approxmul_quantize)(
                  outer, channels, inner, static_cast<approxmul_real_type>(real_type),
                  count ? input.data() : nullptr, scale.data(), zero.data(), qmin, qmax,
                  static_cast<approxmul_dtype>(code), count ? out : nullptr));
    const bool input_unchanged =
        std::equal(input_before.begin(), input_before.end(), input.begin());
    if (overlap && out < input.data() + in_bytes)
        expect(status == APPROXMUL_ERR_ALIASING || !valid, "output inside the input accepted",
               status);
    if (status != APPROXMUL_OK) {
        expect(out_storage == out_before && input_unchanged, "memory written by a failing call",
               status);
        return 0;
    }
    expect(valid, "invalid arguments accepted");
    expect(input_unchanged, "input modified");
    for (int64_t i = 0; i < count; ++i) {
        const int64_t c = (i / inner) % channels;
        const double s = scale[size_t(c)];
        const int32_t z = zero[size_t(c)];
        if (dequantize) {
            const double want = s * double(read_code(input.data() + size_t(i) * code_bytes, code) - int64_t(z));
            if (single) {
                float got;
                std::memcpy(&got, out + 4 * i, 4);
                expect(got == float(want), "float32 dequantized value differs", i);
            } else {
                double got;
                std::memcpy(&got, out + 8 * i, 8);
                expect(got == want, "dequantized value differs", i);
            }
        } else {
            double x;
            if (single) {
                float f;
                std::memcpy(&f, input.data() + 4 * i, 4);
                x = f;
            } else {
                std::memcpy(&x, input.data() + 8 * i, 8);
            }
            const double want = reference_code(x, s, z, qmin, qmax);
            expect(double(read_code(out + size_t(i) * code_bytes, code)) == want,
                   "code differs from the reference", i);
        }
    }
    return 0;
}
