#include "affine.hpp"

// The loops below select with comparisons (clamps, the cap); GCC if-converts
// them into vector code only when FP compares may not trap. Values are
// unchanged by this: it only drops the promise of exact FP exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../core/operands.hpp"
#include "../core/threads.hpp"
#include "../kernels/parallel.hpp"

namespace approxmul::quant {

namespace {

// The arithmetic, per element with its channel's scale s and zero point z,
// all in double as NumPy computes it (approxmul_cffi.affine):
//   quantize:   v = x / s; code = clamp(sign(v) * floor(|v| + 0.5) + z, qmin, qmax)
//   dequantize: real = s * (code - z), then rounded once to float32 if asked

constexpr int64_t kBlock = 16384;  // elements per task: scheduling costs nothing next to it
constexpr int64_t kRowRun = 64;    // shorter rows take per-element parameters (see Params)
// floor(|v| + 0.5) is taken by truncating to int32, which vectorizes on any
// x86-64 (floor itself needs SSE4.1). |v| is capped first: any |v| >= 2^30
// gives a code beyond qmin..qmax (|q| <= 65535) whatever the zero point
// (|z| <= 2^24), exactly as the uncapped value would.
constexpr double kCap = 1073741824.0;  // 2^30
constexpr int32_t kMaxZeroPoint = 1 << 24;

// Parameters as the loops read them: one per channel, used as scalars over
// runs of a row; or, when rows are short (a per-channel last axis has rows
// of one), one per element of a channels*inner period, read as vectors.
struct Params {
    bool per_element = false;
    int64_t period = 0;
    std::vector<double> scale, zero;
};

Params expand(const AffineLayout &l) {
    Params p;
    p.per_element = l.channels > 1 && l.inner < kRowRun;
    const int64_t repeat = p.per_element ? l.inner : 1;
    p.period = l.channels * repeat;
    p.scale.resize(static_cast<size_t>(p.period));
    p.zero.resize(static_cast<size_t>(p.period));
    for (int64_t c = 0; c < l.channels; ++c)
        for (int64_t i = 0; i < repeat; ++i) {
            p.scale[static_cast<size_t>(c * repeat + i)] = l.scale[c];
            p.zero[static_cast<size_t>(c * repeat + i)] = l.zero_point[c];
        }
    return p;
}

// Calls run(i, n, scale, zero, per_element) for consecutive runs covering
// elements [begin, end); a run's parameters start at scale[0], zero[0].
template <typename Run>
void for_runs(const AffineLayout &l, const Params &p, int64_t begin, int64_t end, Run &&run) {
    for (int64_t i = begin; i < end;) {
        int64_t n;
        if (p.per_element) {
            const int64_t j = i % p.period;
            n = std::min(end - i, p.period - j);
            run(i, n, p.scale.data() + j, p.zero.data() + j, std::true_type{});
        } else {
            const int64_t row = i / l.inner;
            const int64_t c = row % l.channels;
            n = std::min(end - i, (row + 1) * l.inner - i);
            run(i, n, p.scale.data() + c, p.zero.data() + c, std::false_type{});
        }
        i += n;
    }
}

template <bool PerElement, typename In, typename Out>
void quantize_run(int64_t n, const In *__restrict x, const double *__restrict scale,
                  const double *__restrict zero, double lo, double hi, Out *__restrict out) {
    double s = scale[0], z = zero[0];
    for (int64_t i = 0; i < n; ++i) {
        if constexpr (PerElement) {
            s = scale[i];
            z = zero[i];
        }
        const double v = static_cast<double>(x[i]) / s;
        double a = std::fabs(v);
        a = a < kCap ? a : kCap;
        const double r = std::copysign(static_cast<double>(static_cast<int32_t>(a + 0.5)), v);
        double q = r + z;
        q = q < lo ? lo : q;
        q = q > hi ? hi : q;
        out[i] = static_cast<Out>(static_cast<int32_t>(q));
    }
}

template <bool PerElement, typename In, typename Out>
void dequantize_run(int64_t n, const In *__restrict codes, const double *__restrict scale,
                    const double *__restrict zero, Out *__restrict out) {
    double s = scale[0], z = zero[0];
    for (int64_t i = 0; i < n; ++i) {
        if constexpr (PerElement) {
            s = scale[i];
            z = zero[i];
        }
        // code - z is exact in double (|code|, |z| < 2^31), as NumPy's int64 difference is
        out[i] = static_cast<Out>(s * (static_cast<double>(codes[i]) - z));
    }
}

template <typename In>
bool any_nan(const In *x, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) bad |= x[i] != x[i];
    return bad != 0;
}

// Calls f with a value of the C type an enum names.
template <typename F>
void with_real(approxmul_real_type type, F &&f) {
    if (type == APPROXMUL_FLOAT32)
        f(float{});
    else
        f(double{});
}

template <typename F>
void with_code(approxmul_dtype type, F &&f) {
    switch (type) {
    case APPROXMUL_INT8: return f(int8_t{});
    case APPROXMUL_UINT8: return f(uint8_t{});
    case APPROXMUL_INT16: return f(int16_t{});
    case APPROXMUL_UINT16: return f(uint16_t{});
    case APPROXMUL_INT32: return f(int32_t{});
    default: fail(APPROXMUL_ERR_INTERNAL, "code type %s reached the loop", dtype_name(type));
    }
}

size_t real_size(approxmul_real_type type) { return type == APPROXMUL_FLOAT32 ? 4 : 8; }

int64_t element_count(const AffineLayout &l) {
    if (l.outer < 0 || l.channels < 0 || l.inner < 0)
        fail(APPROXMUL_ERR_SHAPE, "sizes must not be negative (outer=%lld, channels=%lld, "
             "inner=%lld)", static_cast<long long>(l.outer), static_cast<long long>(l.channels),
             static_cast<long long>(l.inner));
    const int64_t count = checked_mul(checked_mul(l.outer, l.channels, "outer*channels"),
                                      l.inner, "outer*channels*inner");
    checked_mul(count, 8, "size in bytes");
    return count;
}

void check_real_type(approxmul_real_type type, const char *name) {
    if (type != APPROXMUL_FLOAT32 && type != APPROXMUL_FLOAT64)
        fail(APPROXMUL_ERR_DTYPE, "%s: %d is not an approxmul_real_type value", name,
             static_cast<int>(type));
}

void check_scales(const AffineLayout &l) {
    require_pointer(l.scale, "scale");
    require_pointer(l.zero_point, "zero_point");
    for (int64_t c = 0; c < l.channels; ++c)
        if (!(std::isfinite(l.scale[c]) && l.scale[c] > 0))
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "scale[%lld] = %g is not finite and positive",
                 static_cast<long long>(c), l.scale[c]);
}

void check_apart(const void *in, int64_t in_bytes, const void *out, int64_t out_bytes,
                 const char *in_name) {
    const auto in_lo = reinterpret_cast<intptr_t>(in);
    const auto out_lo = reinterpret_cast<intptr_t>(out);
    if (in_lo < out_lo + out_bytes && out_lo < in_lo + in_bytes)
        fail(APPROXMUL_ERR_ALIASING, "out overlaps %s", in_name);
}

// Runs body(begin, end) over blocks of the count elements on the library's threads.
template <typename Body>
void for_blocks(int64_t count, const Body &body) {
    const int64_t tasks = (count + kBlock - 1) / kBlock;
    kernels::parallel_for(tasks, tasks > 1 ? num_threads() : 1, [&](int64_t task, int) {
        body(task * kBlock, std::min(count, (task + 1) * kBlock));
    });
}

}  // namespace

void check(const QuantizeProblem &p) {
    const int64_t count = element_count(p.layout);
    check_real_type(p.x_type, "x");
    if (p.out_dtype != APPROXMUL_INT8 && p.out_dtype != APPROXMUL_UINT8 &&
        p.out_dtype != APPROXMUL_INT16 && p.out_dtype != APPROXMUL_UINT16)
        fail(APPROXMUL_ERR_DTYPE, "out: element type %s; codes are int8, uint8, int16 or uint16",
             dtype_name(p.out_dtype));
    const bool is_signed = p.out_dtype == APPROXMUL_INT8 || p.out_dtype == APPROXMUL_INT16;
    const int64_t bits = 8 * static_cast<int64_t>(dtype_size(p.out_dtype));
    const int64_t lo = is_signed ? -(int64_t(1) << (bits - 1)) : 0;
    const int64_t hi = is_signed ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
    if (p.qmin > p.qmax || p.qmin < lo || p.qmax > hi)
        fail(APPROXMUL_ERR_OUT_OF_RANGE, "qmin..qmax = %d..%d is not a range within %s", p.qmin,
             p.qmax, dtype_name(p.out_dtype));
    if (count == 0) return;
    require_pointer(p.x, "x");
    require_pointer(p.out, "out");
    check_scales(p.layout);
    for (int64_t c = 0; c < p.layout.channels; ++c)
        if (p.layout.zero_point[c] < -kMaxZeroPoint || p.layout.zero_point[c] > kMaxZeroPoint)
            fail(APPROXMUL_ERR_OUT_OF_RANGE, "zero_point[%lld] = %d is outside -2^24..2^24",
                 static_cast<long long>(c), p.layout.zero_point[c]);
    check_apart(p.x, count * static_cast<int64_t>(real_size(p.x_type)), p.out,
                count * static_cast<int64_t>(dtype_size(p.out_dtype)), "x");
    // NaN has no code: refused before anything is written, so a read-only pass
    with_real(p.x_type, [&](auto real) {
        using In = decltype(real);
        const auto *x = static_cast<const In *>(p.x);
        std::vector<char> bad(static_cast<size_t>((count + kBlock - 1) / kBlock), 0);
        for_blocks(count, [&](int64_t begin, int64_t end) {
            bad[static_cast<size_t>(begin / kBlock)] = any_nan(x + begin, end - begin);
        });
        if (std::find(bad.begin(), bad.end(), 1) == bad.end()) return;
        int64_t i = 0;
        while (!std::isnan(x[i])) ++i;
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "x[%lld] is NaN, which has no code",
             static_cast<long long>(i));
    });
}

void quantize(const QuantizeProblem &p) {
    const AffineLayout &l = p.layout;
    const int64_t count = l.outer * l.channels * l.inner;
    if (count == 0) return;
    const Params params = expand(l);
    const double lo = p.qmin, hi = p.qmax;
    with_real(p.x_type, [&](auto real) {
        with_code(p.out_dtype, [&](auto code) {
            using In = decltype(real);
            using Out = decltype(code);
            const auto *x = static_cast<const In *>(p.x);
            auto *out = static_cast<Out *>(p.out);
            for_blocks(count, [&](int64_t begin, int64_t end) {
                for_runs(l, params, begin, end,
                         [&](int64_t i, int64_t n, const double *s, const double *z, auto each) {
                             quantize_run<decltype(each)::value>(n, x + i, s, z, lo, hi,
                                                                 out + i);
                         });
            });
        });
    });
}

void check(const DequantizeProblem &p) {
    const int64_t count = element_count(p.layout);
    if (p.codes_dtype != APPROXMUL_INT8 && p.codes_dtype != APPROXMUL_UINT8 &&
        p.codes_dtype != APPROXMUL_INT16 && p.codes_dtype != APPROXMUL_UINT16 &&
        p.codes_dtype != APPROXMUL_INT32)
        fail(APPROXMUL_ERR_DTYPE, "codes: element type %s; codes are 8, 16 or 32-bit integers",
             dtype_name(p.codes_dtype));
    check_real_type(p.out_type, "out");
    if (count == 0) return;
    require_pointer(p.codes, "codes");
    require_pointer(p.out, "out");
    check_scales(p.layout);
    check_apart(p.codes, count * static_cast<int64_t>(dtype_size(p.codes_dtype)), p.out,
                count * static_cast<int64_t>(real_size(p.out_type)), "codes");
}

void dequantize(const DequantizeProblem &p) {
    const AffineLayout &l = p.layout;
    const int64_t count = l.outer * l.channels * l.inner;
    if (count == 0) return;
    const Params params = expand(l);
    with_code(p.codes_dtype, [&](auto code) {
        with_real(p.out_type, [&](auto real) {
            using In = decltype(code);
            using Out = decltype(real);
            const auto *codes = static_cast<const In *>(p.codes);
            auto *out = static_cast<Out *>(p.out);
            for_blocks(count, [&](int64_t begin, int64_t end) {
                for_runs(l, params, begin, end,
                         [&](int64_t i, int64_t n, const double *s, const double *z, auto each) {
                             dequantize_run<decltype(each)::value>(n, codes + i, s, z, out + i);
                         });
            });
        });
    });
}

}  // namespace approxmul::quant
