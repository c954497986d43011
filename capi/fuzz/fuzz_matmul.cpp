// approxmul_matmul under fuzz: shapes, strides (negative, zero, huge),
// dtypes (valid or not), zero points, NULL pointers, thread counts, tables
// with extreme entries. Successful results are compared bit-exactly with a
// 128-bit reference computed here; failures must leave the output untouched.
#include <optional>

#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

// Sizes: usually small enough to compute a reference (several inner blocks
// of the tiled kernel), sometimes negative or with a product beyond int64,
// sometimes large (a parallel problem: more than 8 panels of rows, so the
// byte GEMM makes several row jobs and packs B per thread).
struct Sizes {
    int64_t rows, cols, inner;
    bool valid;
};

Sizes pick_sizes(FuzzedDataProvider &in, Model &m, std::optional<Large> &large) {
    // one byte: 0 mod 16 broken sizes, 255 large (seed inputs keep their cases)
    const int kind = in.ConsumeIntegralInRange(0, 255);
    if (kind == 255) {
        large = pick_large(in, m);
        Sizes s{in.ConsumeIntegralInRange<int64_t>(72, 256), in.ConsumeIntegralInRange<int64_t>(8, 160),
                0, true};
        s.inner = std::max<int64_t>(1, in.ConsumeIntegralInRange(large->low, large->high) / (s.rows * s.cols));
        return s;
    }
    if (kind % 16 == 0) {
        Sizes s{in.ConsumeIntegral<int64_t>(), in.ConsumeIntegral<int64_t>(),
                in.ConsumeIntegral<int64_t>(), false};
        int64_t work;
        const bool overflows =
            __builtin_mul_overflow(s.rows, s.cols, &work) ||
            __builtin_mul_overflow(work, s.inner > 1 ? s.inner : 1, &work);
        // only sizes the library must refuse: running them would take forever
        if (s.rows >= 0 && s.cols >= 0 && s.inner >= 0 && !overflows) s.rows = -1;
        return s;
    }
    Sizes s{in.ConsumeIntegralInRange<int64_t>(0, 40), in.ConsumeIntegralInRange<int64_t>(0, 40),
            in.ConsumeIntegralInRange<int64_t>(0, 600), true};
    while (s.rows * s.cols * s.inner > 60000) s.inner /= 2;
    return s;
}

// Output layouts the ABI promises to accept: one stride steps over all
// elements along the other (docs/abi.md). Others may be refused.
bool ordinary_output(const View &c) {
    const int64_t rs = c.rows > 1 ? std::llabs(c.row_stride) : -1;
    const int64_t cs = c.cols > 1 ? std::llabs(c.col_stride) : -1;
    if (rs < 0 || cs < 0) return rs != 0 && cs != 0;
    return (cs >= 1 && rs / c.cols >= cs) || (rs >= 1 && cs / c.rows >= rs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    pick_threads(in);
    auto m = make_model(in);
    std::optional<Large> large;
    const Sizes s = pick_sizes(in, *m, large);

    View a, b, c;
    a.dtype = pick_operand_dtype(in, *m);
    b.dtype = pick_operand_dtype(in, *m);
    a.rows = s.rows, a.cols = s.inner;
    b.rows = s.inner, b.cols = s.cols;
    c.rows = s.rows, c.cols = s.cols;
    const bool null_multiplier = in.ConsumeIntegralInRange(0, 31) == 0;
    const auto [a_zero, b_zero, acc, acc_status, c_dtype] =
        pick_gemm_output(in, *m, s.valid ? s.inner : 0);
    c.dtype = c_dtype;

    bool all_valid = s.valid && !null_multiplier && acc_status == APPROXMUL_OK;
    bool operands_valid = true;
    if (s.valid) {
        for (View *v : {&a, &b}) {
            layout(*v, in, in.ConsumeBool());
            operands_valid &= operand_dtype_ok(v->dtype, *m);
            if (v->addressable && dtype_size(v->dtype) != 0)
                operands_valid &= large ? fill_view(*v, *m, random_operand(*large, *m))
                                        : fill_operands(*v, in, *m);
            all_valid &= v->addressable;
        }
        all_valid &= operands_valid;
        layout(c, in, in.ConsumeBool());
        all_valid &= c.addressable && ordinary_output(c) &&
                     (c.dtype == APPROXMUL_INT64 || (c.dtype == APPROXMUL_INT32 && acc == APPROXMUL_INT32));
    }
    // NULL data pointers: an error unless the matrix is empty
    for (View *v : {&a, &b, &c})
        if (in.ConsumeIntegralInRange(0, 31) == 0) {
            v->data = nullptr;
            all_valid &= v->rows == 0 || v->cols == 0;
        }
    // A huge view that could exist is the caller's promise the library must
    // trust (it would read it): no real memory here, so no call.
    for (const View *v : {&a, &b, &c})
        if (!v->addressable && !v->impossible && v->data != nullptr && dtype_size(v->dtype) != 0)
            return 0;
    std::fill(c.storage.begin(), c.storage.end(), 0x5a);
    const std::vector<unsigned char> before = c.storage;

    const approxmul_status status = checked(approxmul_matmul(
        null_multiplier ? nullptr : m->handle, s.rows, s.cols, s.inner,
        static_cast<approxmul_dtype>(a.dtype), a.data, a.row_stride, a.col_stride,
        static_cast<approxmul_dtype>(b.dtype), b.data, b.row_stride, b.col_stride, a_zero, b_zero,
        static_cast<approxmul_dtype>(c.dtype), c.data, c.row_stride, c.col_stride));

    if (all_valid) expect(status == APPROXMUL_OK, "valid matmul refused", status);
    for (const View *v : {&a, &b, &c})
        if (v->impossible) expect(status != APPROXMUL_OK, "impossible view accepted");
    if (status != APPROXMUL_OK) {
        expect(c.storage == before, "output written by a failing call", status);
        return 0;
    }
    expect(s.valid && !null_multiplier, "invalid sizes or multiplier accepted");
    expect(operands_valid && m->in_range(a_zero) && m->in_range(b_zero),
           "operand dtype or value outside the multiplier accepted");
    const auto written = touched(c);
    for (size_t e = 0; e < written.size(); ++e)
        if (!written[e])
            for (size_t byte = 0; byte < c.size(); ++byte)
                expect(c.storage[e * c.size() + byte] == 0x5a, "wrote outside the output view");
    for (int64_t i = 0; i < s.rows; ++i)
        for (int64_t j = 0; j < s.cols; ++j) {
            i128 sum = 0;
            for (int64_t k = 0; k < s.inner; ++k) {
                const int64_t x = a.get(i, k), y = b.get(k, j);
                sum += static_cast<i128>(m->product(x, y)) - static_cast<i128>(b_zero) * x -
                       static_cast<i128>(a_zero) * y + static_cast<i128>(a_zero) * b_zero;
            }
            expect(static_cast<i128>(c.get(i, j)) == sum, "matmul result differs from reference",
                   static_cast<long long>(i * s.cols + j));
        }
    return 0;
}
