#include "affine.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "../core/error.hpp"
#include "../core/operands.hpp"
#include "../core/threads.hpp"
#include "../kernels/isa.hpp"
#include "../kernels/parallel.hpp"

namespace approxmul::quant {

namespace {

// The arithmetic, per element with its channel's scale s and zero point z,
// all in double as NumPy computes it (approxmul_cffi.affine):
//   quantize:   v = x / s; code = clamp(sign(v) * floor(|v| + 0.5) + z, qmin, qmax)
//   dequantize: real = s * (code - z), then rounded once to float32 if asked

constexpr int64_t kBlock = 16384;  // elements per task: scheduling costs nothing next to it
constexpr int64_t kRowRun = 64;    // shorter rows take per-element parameters (see Params)
// The kernel sets cap |v| at 2^30 (kernels/isa_kernels.cpp), which leaves every
// code unchanged only while |zero point| <= 2^24.
constexpr int32_t kMaxZeroPoint = 1 << 24;

// Parameters as the loops read them: one per channel, used as scalars over
// runs of a row; or, when rows are short (a per-channel last axis has rows
// of one), one per element of a channels*inner period, read as vectors.
struct Params {
    bool per_element = false;
    int64_t period = 0;
    std::vector<double> scale;
    std::vector<int32_t> zero;
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

// Calls run(i, n, scale, zero, step) for consecutive runs covering
// elements [begin, end); a run's parameters start at scale[0], zero[0].
template <typename Run>
void for_runs(const AffineLayout &l, const Params &p, int64_t begin, int64_t end, Run &&run) {
    for (int64_t i = begin; i < end;) {
        int64_t n;
        if (p.per_element) {
            const int64_t j = i % p.period;
            n = std::min(end - i, p.period - j);
            run(i, n, p.scale.data() + j, p.zero.data() + j, 1);
        } else {
            const int64_t row = i / l.inner;
            const int64_t c = row % l.channels;
            n = std::min(end - i, (row + 1) * l.inner - i);
            run(i, n, p.scale.data() + c, p.zero.data() + c, 0);
        }
        i += n;
    }
}

const kernels::KernelTable &affine_kernels() {
    try {
        return kernels::selected_kernels();
    } catch (const Error &) {  // a forced, unavailable set: these loops need none
        return *kernels::generic_kernel_table();
    }
}

size_t real_size(approxmul_real_type type) { return type == APPROXMUL_FLOAT32 ? 4 : 8; }

int64_t element_count(const AffineLayout &l) {
    return checked_layout_count(l.outer, l.channels, l.inner);
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

namespace {

// Every argument but the values of x (check's NaN pass); the count of elements.
int64_t check_arguments(const QuantizeProblem &p) {
    const int64_t count = element_count(p.layout);
    check_real_type(p.x_type, "x");
    if (p.out_dtype != APPROXMUL_INT8 && p.out_dtype != APPROXMUL_UINT8 &&
        p.out_dtype != APPROXMUL_INT16 && p.out_dtype != APPROXMUL_UINT16)
        fail(APPROXMUL_ERR_DTYPE, "out: element type %s; codes are int8, uint8, int16 or uint16",
             dtype_name(p.out_dtype));
    check_code_range(p.qmin, p.qmax, p.out_dtype);
    if (count == 0) return 0;
    require_pointer(p.x, "x");
    require_pointer(p.out, "out");
    check_scales(p.layout);
    for (int64_t c = 0; c < p.layout.channels; ++c)
        if (p.layout.zero_point[c] < -kMaxZeroPoint || p.layout.zero_point[c] > kMaxZeroPoint)
            fail(APPROXMUL_ERR_OUT_OF_RANGE, "zero_point[%lld] = %d is outside -2^24..2^24",
                 static_cast<long long>(c), p.layout.zero_point[c]);
    check_apart(p.x, count * static_cast<int64_t>(real_size(p.x_type)), p.out,
                count * static_cast<int64_t>(dtype_size(p.out_dtype)), "x");
    return count;
}

// The value refused, from the first block flagged (bad: one flag per block).
[[noreturn]] void refuse_first(const QuantizeProblem &p, const std::vector<char> &bad) {
    const kernels::KernelTable &kt = affine_kernels();
    const int x64 = p.x_type == APPROXMUL_FLOAT64;
    const int infinite = p.finite_only ? 1 : 0;
    const auto *x = static_cast<const char *>(p.x);
    const int64_t item = static_cast<int64_t>(real_size(p.x_type));
    int64_t i = (std::find(bad.begin(), bad.end(), 1) - bad.begin()) * kBlock;
    while (!kt.any_nan(1, x + i * item, x64, infinite)) ++i;
    if (kt.any_nan(1, x + i * item, x64, 0))
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "x[%lld] is NaN, which has no code",
             static_cast<long long>(i));
    fail(APPROXMUL_ERR_INVALID_ARGUMENT,
         "x[%lld] is infinite, which approxmul_quantize_finite refuses",
         static_cast<long long>(i));
}

// Whether the block [begin, end) of x holds a value that has no code.
bool block_refused(const QuantizeProblem &p, int64_t begin, int64_t end) {
    const int64_t item = static_cast<int64_t>(real_size(p.x_type));
    return affine_kernels().any_nan(end - begin, static_cast<const char *>(p.x) + begin * item,
                                    p.x_type == APPROXMUL_FLOAT64, p.finite_only ? 1 : 0) != 0;
}

// Quantizes the elements [begin, end) of x; refuse as the kernels take it
// (0: x was checked; 1 or 2: returns whether a NaN, or also an infinity, was met).
bool quantize_block(const QuantizeProblem &p, const Params &params, int64_t begin, int64_t end,
                    int refuse = 0) {
    const kernels::KernelTable &kt = affine_kernels();
    const int x64 = p.x_type == APPROXMUL_FLOAT64;
    const auto *x = static_cast<const char *>(p.x);
    auto *out = static_cast<char *>(p.out);
    const int64_t in_item = static_cast<int64_t>(real_size(p.x_type));
    const int64_t out_item = static_cast<int64_t>(dtype_size(p.out_dtype));
    bool bad = false;
    for_runs(p.layout, params, begin, end, [&](int64_t i, int64_t n, const double *s,
                                               const int32_t *z, int step) {
        bad |= kt.quantize(n, x + i * in_item, x64, s, z, step, p.qmin, p.qmax, p.out_dtype,
                           out + i * out_item, refuse) != 0;
    });
    return bad;
}

}  // namespace

void check(const QuantizeProblem &p) {
    const int64_t count = check_arguments(p);
    if (count == 0) return;
    // NaN has no code (nor, if finite_only, does an infinity): refused before
    // anything is written, so a read-only pass
    std::vector<char> bad(static_cast<size_t>((count + kBlock - 1) / kBlock), 0);
    for_blocks(count, [&](int64_t begin, int64_t end) {
        bad[static_cast<size_t>(begin / kBlock)] = static_cast<char>(block_refused(p, begin, end));
    });
    if (std::find(bad.begin(), bad.end(), 1) != bad.end()) refuse_first(p, bad);
}

void quantize_checked(const QuantizeProblem &p) {
    const int64_t count = check_arguments(p);
    if (count == 0) return;
    // the kernels look for refused values as they quantize: one read of x
    // where check() and quantize() make two, for outputs nobody else sees
    const Params params = expand(p.layout);
    std::vector<char> bad(static_cast<size_t>((count + kBlock - 1) / kBlock), 0);
    for_blocks(count, [&](int64_t begin, int64_t end) {
        bad[static_cast<size_t>(begin / kBlock)] =
            static_cast<char>(quantize_block(p, params, begin, end, p.finite_only ? 2 : 1));
    });
    if (std::find(bad.begin(), bad.end(), 1) != bad.end()) refuse_first(p, bad);
}

void quantize(const QuantizeProblem &p) {
    const int64_t count = p.layout.outer * p.layout.channels * p.layout.inner;
    if (count == 0) return;
    const Params params = expand(p.layout);
    for_blocks(count, [&](int64_t begin, int64_t end) { quantize_block(p, params, begin, end); });
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
    const kernels::KernelTable &kt = affine_kernels();
    const int out64 = p.out_type == APPROXMUL_FLOAT64;
    const auto *codes = static_cast<const char *>(p.codes);
    auto *out = static_cast<char *>(p.out);
    const int64_t in_item = static_cast<int64_t>(dtype_size(p.codes_dtype));
    const int64_t out_item = static_cast<int64_t>(real_size(p.out_type));
    for_blocks(count, [&](int64_t begin, int64_t end) {
        for_runs(l, params, begin, end, [&](int64_t i, int64_t n, const double *s, const int32_t *z,
                                            int step) {
            kt.dequantize(n, codes + i * in_item, p.codes_dtype, s, z, step, out64,
                          out + i * out_item);
        });
    });
}

}  // namespace approxmul::quant
